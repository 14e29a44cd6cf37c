// The CUDA planner: every decision of CUDA kernel codegen (thread mapping, vector paths and
// their alignment tests, configs and their order, adaptive launch cases, split reductions,
// register-held rows, launch bounds), recorded in CudaKernelPlan (CudaPlan.h) before anything
// is printed.
#include "codegen/cuda/CudaEmitter.h"
#include "support/DType.h"

#include <algorithm>

namespace coil::codegen {

using loop::Body;
using loop::NodeId;
using loop::ReduceKind;
using loop::Stmt;

namespace {

/// Heuristic row mappings, by the largest inner space and the number of outer points: short
/// rows a thread each; rows up to 2048 a warp each (a block when there are few rows: one wave
/// of the GPU); longer rows a block each. `strided`: loads stride through memory along a
/// phase's innermost var (a reduction over a leading dim), so one thread per outer point keeps
/// a warp's accesses coalesced. The adaptive launcher prints the same rules (adaptiveCases).
constexpr int64_t kThreadMaxInner = 8, kStridedMinTotal = 4096, kWarpMaxInner = 2048,
                  kWarpFewRows = 64, kWarpFewRowsMaxInner = 256, kBlock256MaxInner = 16384,
                  kBlock256MinTotal = 132;

enum RowChoice { kThread, kWarp, kBlock256, kBlock1024 };

RowChoice chooseRows(int64_t inner, int64_t total, bool strided) {
  if (inner <= kThreadMaxInner || (strided && total >= kStridedMinTotal)) return kThread;
  if (inner <= kWarpMaxInner && !(total < kWarpFewRows && inner > kWarpFewRowsMaxInner))
    return kWarp;
  if (inner <= kBlock256MaxInner && total >= kBlock256MinTotal) return kBlock256;
  return kBlock1024;
}

std::vector<std::pair<std::string, RowChoice>> adaptiveCases(bool strided) {
  auto n = [](int64_t v) { return std::to_string(v); };
  return {
      {"if (inner <= " + n(kThreadMaxInner) +
           (strided ? " || total >= " + n(kStridedMinTotal) + ")" : ")"),
       kThread},
      {"else if (inner <= " + n(kWarpMaxInner) + " && !(total < " + n(kWarpFewRows) +
           " && inner > " + n(kWarpFewRowsMaxInner) + "))",
       kWarp},
      {"else if (inner <= " + n(kBlock256MaxInner) + " && total >= " + n(kBlock256MinTotal) + ")",
       kBlock256},
      {"else", kBlock1024},
  };
}

} // namespace

StmtRef CudaEmitter::refOf(size_t pi, const Stmt &s) const {
  return loadRef(pi, size_t(&s - k_.phases[pi].body.stmts.data()));
}

StmtRef CudaEmitter::refOf(size_t pi, const sched::Store &st) const {
  return storeRef(pi, size_t(&st - k_.phases[pi].stores.data()));
}

Status CudaEmitter::plan() {
  plan_.pointwise = k_.pointwise();
  if (plan_.pointwise) {
    planPointwise();
  } else {
    for (size_t pi = 0; pi < k_.phases.size(); ++pi)
      plan_.phaseVec.push_back(planRowVec(pi, liveStmts(k_.phases[pi].body, &k_.phases[pi])));
    planRowConfigs();
  }
  std::string broken = verifyCudaKernelPlan(plan_, k_.phases.size());
  if (!broken.empty()) return Error::internal(kernelError(k_, "plan: " + broken));
  return okStatus();
}

void CudaEmitter::planPointwise() {
  pwLive_ = liveStmts(k_.phases[0].body, &k_.phases[0]);
  const std::vector<bool> &live = pwLive_;
  bool flat = planFlat(live);
  plan_.mapping = flat ? PointwiseMapping::kFlat : PointwiseMapping::kIndexed;
  if (!flat) {
    plan_.flatAccess.clear();
    plan_.flatNodes.clear();
    plan_.vecWidth = 1;
    if (k_.vars.size() >= 2) plan_.lastVec = planVec(0, cname_.at(k_.vars.back()), live);
    if (plan_.lastVec) {
      auto n = simplify(renamed(k_.ranges.back()), ranges_).maybeConstant();
      if (n && *n % plan_.lastVec->width != 0) plan_.lastVec.reset(); // never whole vectors
    }
    if (plan_.lastVec) {
      plan_.mapping = PointwiseMapping::kLastDim;
      plan_.vecWidth = plan_.lastVec->width;
    }
    if (!plan_.lastVec && k_.vars.size() >= 2) plan_.dimVec = planDimVec(live);
    if (plan_.dimVec) {
      plan_.mapping = PointwiseMapping::kDim;
      plan_.vecWidth = plan_.dimVec->width;
    }
  }
  int64_t vec = plan_.vecWidth;
  for (auto [blk, ept] : std::vector<std::pair<int64_t, int64_t>>{{256, 2}, {128, 4}, {512, 1}}) {
    CudaConfig c;
    c.name = "block" + std::to_string(blk) + "_ept" + std::to_string(ept) +
             (vec > 1 ? "_vec" + std::to_string(vec) : "");
    c.block = blk;
    c.ept = ept;
    c.vec = vec;
    plan_.configs.push_back(c);
  }
  // The vector path needs every buffer it accesses as vectors aligned to its vector access.
  if (vec > 1) {
    plan_.vecAlign = plan_.flatNodes;
    if (plan_.dimVec)
      for (StmtRef ld : plan_.dimVec->loads) plan_.vecAlign.insert(loadAt(ld).node);
    if (plan_.lastVec) {
      plan_.vecNeedsLastMultiple = true;
      for (const VecRuns::Key &key : plan_.lastVec->loads()) plan_.vecAlign.insert(key.first);
      for (const VecRuns::Key &key : plan_.lastVec->stores()) plan_.vecAlign.insert(key.first);
    }
  }
}

void CudaEmitter::planRowConfigs() {
  // The largest inner space of a phase, and the number of outer points, as far as known.
  int64_t inner = 1;
  for (const sched::Phase &ph : k_.phases) {
    SymInt size(1);
    for (const SymInt &r : ph.ranges) size = size * renamed(r);
    inner = std::max(inner, bounds(size, ranges_).max);
  }
  SymInt outer(1);
  for (const SymInt &r : k_.ranges) outer = outer * renamed(r);
  int64_t outerMax = bounds(outer, ranges_).max;
  const CudaConfig byChoice[] = {rowConfig("thread_per_row_block128", 128, 1, 128),
                                 rowConfig("warp_per_row_rows4", 128, 32, 4),
                                 rowConfig("block256_per_row", 256, 256, 1),
                                 rowConfig("block1024_per_row", 1024, 1024, 1)};
  CudaConfig blk512 = rowConfig("block512_per_row", 512, 512, 1);
  CudaConfig split = rowConfig("split_block1024", 1024, 1024, 1);
  split.split = true;
  // Loads that stride through memory along a phase's innermost var.
  bool strided = false;
  for (const sched::Phase &ph : k_.phases) {
    if (ph.vars.empty()) continue;
    const std::string &var = cname_.at(ph.vars.back());
    for (const Stmt &s : ph.body.stmts) {
      if (s.kind != Stmt::Kind::Load) continue;
      auto a = affineIn(linearOffset(s.node, s.index), var);
      if (a && !(simplify(a->coef, ranges_) == SymInt(0)) &&
          !(simplify(a->coef, ranges_) == SymInt(1)))
        strided = true;
    }
  }
  CudaConfig best = byChoice[chooseRows(inner, outerMax, strided)];
  // Few outer points with long reductions: phase 0 split over many blocks (when phase 0
  // only reduces; its launcher falls back to a block per point when splitting does not pay).
  const sched::Phase &ph0 = k_.phases[0];
  SymInt size0(1);
  for (const SymInt &r : ph0.ranges) size0 = size0 * r;
  // (Only where phase 0 may be long enough to split: more than one slice.)
  bool splittable = !ph0.vars.empty() && !ph0.reductions.empty() && ph0.stores.empty() &&
                    bounds(renamed(size0), ranges_).max > kSplitSliceElems;
  if (splittable && outerMax <= kSplitMaxTotal &&
      bounds(renamed(size0), ranges_).min >= kSplitMinInner)
    best = split;
  std::vector<CudaConfig> &configs = plan_.configs;
  configs.push_back(best);
  for (const CudaConfig &c : {byChoice[kThread], byChoice[kWarp], byChoice[kBlock256], blk512,
                              byChoice[kBlock1024], split})
    if (c.name != best.name && (!c.split || splittable)) configs.push_back(c);
  auto index = [&](const CudaConfig &c) {
    for (size_t i = 0; i < configs.size(); ++i)
      if (configs[i].name == c.name) return int32_t(i);
    return int32_t(0);
  };
  if (splittable) {
    plan_.splitConfig = index(split);
    plan_.wholeConfig = index(byChoice[kBlock1024]);
    plan_.splitInner = cpp(size0);
    plan_.splitArrays = planSplitArrays();
  }
  // Sizes unknown at compile time: config 0's launcher applies the same rule to the actual
  // sizes and launches the function of the config it picks.
  bool known = simplify(outer, ranges_).isConstant();
  for (const sched::Phase &ph : k_.phases) {
    if (ph.vars.empty()) continue;
    SymInt size(1);
    for (const SymInt &r : ph.ranges) size = size * r;
    known = known && simplify(renamed(size), ranges_).isConstant();
    std::string t = cpp(size);
    if (std::find(plan_.adaptiveInner.begin(), plan_.adaptiveInner.end(), t) ==
        plan_.adaptiveInner.end())
      plan_.adaptiveInner.push_back(t);
  }
  if (!known && !plan_.adaptiveInner.empty()) {
    plan_.adaptiveSplit = splittable && plan_.splitConfig != 0 &&
                          bounds(renamed(size0), ranges_).max >= kSplitMinInner;
    for (const auto &[cond, choice] : adaptiveCases(strided))
      plan_.adaptive.push_back(AdaptiveCase{cond, index(byChoice[choice])});
  } else {
    plan_.adaptiveInner.clear();
  }
  for (CudaConfig &c : configs)
    if (!c.split) c.regs = planRegisters(c, false);
  plan_.combine = rowConfig("combine", 1024, 1024, 1);
  plan_.combine.regs = planRegisters(plan_.combine, true);
}

RowRegisters CudaEmitter::planRegisters(const CudaConfig &c, bool combining) const {
  RowRegisters regs;
  auto vecOf = [&](size_t pi) -> const std::optional<VecRuns> & {
    static const std::optional<VecRuns> none;
    return combining && pi == 0 ? none : plan_.phaseVec[pi];
  };
  for (size_t pi = 0; pi < k_.phases.size() && c.tpr > 1; ++pi)
    regs.rowVec |= vecOf(pi).has_value();
  if (!regs.rowVec) return regs;
  // Runs loaded by more than one vector phase, when a thread's share of the row is small.
  std::map<VecRuns::Key, std::pair<int, std::pair<int64_t, int64_t>>> seen;
  std::set<VecRuns::Key> mixed;
  for (size_t pi = 0; pi < k_.phases.size(); ++pi) {
    const auto &rv = vecOf(pi);
    if (!rv) continue;
    for (const VecRuns::Key &key : rv->loads()) {
      auto [it, fresh] = seen.try_emplace(key, 0, std::make_pair(rv->width, rv->extent));
      if (!fresh && it->second.second != std::make_pair(rv->width, rv->extent)) mixed.insert(key);
      ++it->second.first;
    }
  }
  int64_t bytes = 0;
  for (const auto &[key, info] : seen) {
    int64_t steps = (info.second.second / info.second.first + c.tpr - 1) / c.tpr;
    if (info.first < 2 || mixed.count(key) || steps > 8 || bytes + steps * 16 > 256) continue;
    bytes += steps * 16;
    std::string name = "rc" + std::to_string(regs.cache.size());
    regs.cache[key] = name;
  }
  // A warp per row whose only loads are a small register-held row (softmax): few registers
  // suffice, so the kernel asks for a full SM of threads (more rows' loads in flight).
  regs.fullOccupancy = c.tpr == 32 && !combining && bytes <= 32;
  for (size_t pi = 0; pi < k_.phases.size() && regs.fullOccupancy; ++pi) {
    const sched::Phase &ph = k_.phases[pi];
    std::vector<bool> live = liveStmts(ph.body, &ph);
    const auto &rv = vecOf(pi);
    if (!rv) {
      for (size_t i = 0; i < ph.body.stmts.size(); ++i)
        if (live[i] && ph.body.stmts[i].kind == Stmt::Kind::Load) regs.fullOccupancy = false;
      if (!ph.vars.empty()) regs.fullOccupancy = false;
      continue;
    }
    for (const VecRuns::Key &key : rv->loads())
      if (!regs.cache.count(key)) regs.fullOccupancy = false;
    for (size_t i = 0; i < ph.body.stmts.size(); ++i)
      if (ph.body.stmts[i].kind == Stmt::Kind::Load && !rv->access.count(loadRef(pi, i)))
        regs.fullOccupancy = false;
  }
  return regs;
}

const std::optional<VecRuns> &CudaEmitter::phaseVec(size_t pi) const {
  static const std::optional<VecRuns> none;
  return splitMode_ && pi == 0 ? none : plan_.phaseVec[pi];
}

bool CudaEmitter::planFlat(const std::vector<bool> &live) {
  const sched::Phase &ph = k_.phases[0];
  const FlatIndex fi = flatIndex();
  int64_t maxSize = 1;
  for (size_t i = 0; i < ph.body.stmts.size(); ++i) {
    const Stmt &s = ph.body.stmts[i];
    if (!live[i]) continue;
    if (s.kind == Stmt::Kind::Index && fi.usesOuter(renamed(s.expr))) return false;
    if (s.kind == Stmt::Kind::Load) {
      FlatAccess a = flatAccess(fi, s.node, s.index);
      if (a == FlatAccess::Other) return false;
      plan_.flatAccess[loadRef(0, i)] = a == FlatAccess::Flat;
      if (a == FlatAccess::Flat) {
        plan_.flatNodes.insert(s.node);
        maxSize = std::max<int64_t>(maxSize, dtypeSize(s.dtype));
      }
    }
  }
  bool inPlace = false;
  for (size_t si = 0; si < ph.stores.size(); ++si) {
    const sched::Store &st = ph.stores[si];
    if (flatAccess(fi, st.node, st.index) != FlatAccess::Flat) return false;
    plan_.flatAccess[storeRef(0, si)] = true;
    plan_.flatNodes.insert(st.node);
    maxSize = std::max<int64_t>(maxSize, dtypeSize(p_.nodes[size_t(st.node)].dtype));
    if (readSet_.count(st.node)) inPlace = true;
  }
  // A buffer both read and written: its reads need not be at the flat index; stay scalar.
  plan_.vecWidth = inPlace ? 1 : std::max<int64_t>(1, 16 / maxSize);
  return true;
}

std::optional<DimVecs> CudaEmitter::planDimVec(const std::vector<bool> &live) const {
  const sched::Phase &ph = k_.phases[0];
  size_t rank = k_.vars.size();
  std::set<std::string> indirect;
  for (const std::string &sym : indirectSyms_) indirect.insert(cname_.at(sym));
  auto linear = [&](NodeId node, const std::vector<SymInt> &idx) {
    std::vector<SymInt> ridx, shape;
    for (const SymInt &e : idx) ridx.push_back(renamed(e));
    for (const SymInt &d : p_.nodes[size_t(node)].shape) shape.push_back(renamed(d));
    return simplify(linearIndex(shape, ridx), ranges_);
  };
  auto coefIn = [&](const SymInt &lin, const std::string &var) -> std::optional<Affine> {
    std::set<std::string> syms;
    lin.collectSymbols(syms);
    for (const std::string &sym : syms)
      if (indirect.count(sym)) return std::nullopt;
    auto a = affineIn(lin, var);
    if (!a) return std::nullopt;
    return Affine{simplify(a->rest, ranges_), simplify(a->coef, ranges_)};
  };
  // Every store contiguous along the last dim (coalesced across threads), not read back.
  const std::string &last = cname_.at(k_.vars.back());
  for (const sched::Store &st : ph.stores) {
    auto a = coefIn(linear(st.node, st.index), last);
    if (!a || !(a->coef == SymInt(1)) || readSet_.count(st.node)) return std::nullopt;
  }
  for (size_t d = rank - 1; d-- > 0;) {
    auto extent = simplify(renamed(k_.ranges[d]), ranges_).maybeConstant();
    if (!extent || *extent <= 1) continue;
    const std::string &var = cname_.at(k_.vars[d]);
    DimVecs dv;
    dv.dim = d;
    dv.extent = *extent;
    int64_t maxSize = 1;
    std::vector<std::pair<StmtRef, SymInt>> vecLoads;
    bool ok = true;
    for (size_t i = 0; i < ph.body.stmts.size() && ok; ++i) {
      const Stmt &st = ph.body.stmts[i];
      if (!live[i]) continue;
      if (st.kind == Stmt::Kind::IndirectIndex) ok = false;
      if (st.kind != Stmt::Kind::Load) continue;
      auto a = coefIn(linear(st.node, st.index), var);
      if (!a || !(a->coef == SymInt(1))) continue; // a scalar load
      // Contiguous along `dim` and not along the last dim (those are read coalesced anyway).
      auto l = coefIn(linear(st.node, st.index), last);
      if (l && l->coef == SymInt(1)) continue;
      vecLoads.push_back({loadRef(0, i), a->rest});
      maxSize = std::max<int64_t>(maxSize, dtypeSize(p_.nodes[size_t(st.node)].dtype));
    }
    if (!ok || vecLoads.empty()) continue;
    dv.width = 16 / maxSize;
    if (dv.width < 2 || *extent % dv.width != 0) continue;
    for (const auto &[st, rest] : vecLoads) {
      // The vector starts at a multiple of the width (aligned when the buffer is).
      if (!(rest == SymInt(0)) && !exactQuotient(rest, SymInt(dv.width))) {
        ok = false;
        break;
      }
      dv.loads.push_back(st);
    }
    if (ok) return dv;
  }
  return std::nullopt;
}

std::optional<VecRuns> CudaEmitter::planRowVec(size_t pi, const std::vector<bool> &live) const {
  const sched::Phase &ph = k_.phases[pi];
  if (ph.vars.size() != 1) return std::nullopt;
  auto extent = simplify(renamed(ph.ranges[0]), ranges_).maybeConstant();
  if (!extent || *extent <= 0) return std::nullopt;
  auto rv = planVec(pi, cname_.at(ph.vars[0]), live);
  if (!rv || *extent % rv->width != 0) return std::nullopt;
  rv->extent = *extent;
  return rv;
}

std::optional<VecRuns> CudaEmitter::planVec(size_t pi, const std::string &var,
                                            const std::vector<bool> &live) const {
  const sched::Phase &ph = k_.phases[pi];
  std::set<std::string> indirect;
  for (const std::string &s : indirectSyms_) indirect.insert(cname_.at(s));
  struct Access {
    StmtRef what;
    NodeId node;
    SymInt rest;
    bool store;
  };
  std::vector<Access> runs;
  int64_t maxSize = 1;
  // nullopt: not vectorizable; false: independent of the inner var; true: a contiguous run.
  auto classify = [&](StmtRef what, NodeId node, const std::vector<SymInt> &idx,
                      bool store) -> std::optional<bool> {
    std::vector<SymInt> ridx, shape;
    for (const SymInt &e : idx) ridx.push_back(renamed(e));
    for (const SymInt &d : p_.nodes[size_t(node)].shape) shape.push_back(renamed(d));
    SymInt lin = simplify(linearIndex(shape, ridx), ranges_);
    std::set<std::string> syms;
    lin.collectSymbols(syms);
    for (const std::string &sym : syms)
      if (indirect.count(sym)) return std::nullopt;
    auto a = affineIn(lin, var);
    if (!a) return std::nullopt;
    SymInt coef = simplify(a->coef, ranges_);
    if (coef == SymInt(0)) return false;
    if (!(coef == SymInt(1))) return std::nullopt;
    runs.push_back(Access{what, node, simplify(a->rest, ranges_), store});
    maxSize = std::max<int64_t>(maxSize, dtypeSize(p_.nodes[size_t(node)].dtype));
    return true;
  };
  for (size_t i = 0; i < ph.body.stmts.size(); ++i) {
    const Stmt &s = ph.body.stmts[i];
    if (!live[i]) continue;
    if (s.kind == Stmt::Kind::IndirectIndex) return std::nullopt;
    if (s.kind == Stmt::Kind::Load && !classify(loadRef(pi, i), s.node, s.index, false))
      return std::nullopt;
  }
  for (size_t si = 0; si < ph.stores.size(); ++si) {
    const sched::Store &st = ph.stores[si];
    auto r = classify(storeRef(pi, si), st.node, st.index, true);
    if (!r || !*r || readSet_.count(st.node)) return std::nullopt;
  }
  if (runs.empty()) return std::nullopt;
  VecRuns rv;
  rv.width = 16 / maxSize;
  if (rv.width < 2) return std::nullopt;
  for (const Access &a : runs) {
    // The run starts at a multiple of the width (so aligned when the buffer is).
    if (!(a.rest == SymInt(0)) && !exactQuotient(a.rest, SymInt(rv.width))) return std::nullopt;
    VecRuns::Key key{a.node, a.rest.toCuda(ranges_)};
    rv.access[a.what] = key;
  }
  return rv;
}

std::vector<WorkspaceArray> CudaEmitter::planSplitArrays() const {
  std::vector<WorkspaceArray> out;
  // Bytes of computeType(t): f16/bf16 compute in float, bool as bool.
  auto computeBytes = [](DType t) -> int64_t {
    return t == DType::F16 || t == DType::BF16 ? 4 : t == DType::Bool ? 1 : dtypeSize(t);
  };
  const sched::Phase &ph = k_.phases[0];
  for (size_t si = 0; si < ph.reductions.size(); ++si) {
    const sched::Accumulate &r = ph.reductions[si];
    std::string work = "red0_" + std::to_string(si);
    DType D = r.accDType;
    bool fl = isFloat(D);
    switch (r.kind) {
    case ReduceKind::Sum:
    case ReduceKind::Prod:
      if (fl)
        out.push_back({work + "_ws", computeType(D), computeBytes(D)});
      else if (D == DType::Bool)
        out.push_back({work + "_ws", "bool", 1});
      else
        out.push_back(
            {work + "_ws", dtypeSize(D) > 4 ? "uint64_t" : "uint32_t", dtypeSize(D) > 4 ? 8 : 4});
      break;
    case ReduceKind::Max:
    case ReduceKind::Min:
      out.push_back({work + "_ws", computeType(D), computeBytes(D)});
      if (fl) out.push_back({work + "n_ws", "int", 4});
      break;
    case ReduceKind::Any:
    case ReduceKind::All:
      out.push_back({work + "_ws", "int", 4});
      break;
    case ReduceKind::ArgMax:
    case ReduceKind::ArgMin: {
      DType vt = ph.body.stmts[size_t(r.value)].dtype;
      out.push_back({work + "_ws", computeType(vt), computeBytes(vt)});
      out.push_back({work + "i_ws", "int64_t", 8});
      out.push_back({work + "s_ws", "bool", 1});
      break;
    }
    }
  }
  return out;
}

// --- the plan's invariants

std::string verifyCudaKernelPlan(const CudaKernelPlan &plan, size_t phases) {
  auto n = [](int64_t v) { return std::to_string(v); };
  if (plan.configs.empty()) return "no configs";
  auto powerOfTwo = [](int64_t v) { return v >= 1 && (v & (v - 1)) == 0; };
  if (!powerOfTwo(plan.vecWidth) || plan.vecWidth > 16)
    return "vector width " + n(plan.vecWidth) + " is not a power of two up to 16";
  for (size_t ci = 0; ci < plan.configs.size(); ++ci) {
    const CudaConfig &c = plan.configs[ci];
    std::string at = "config " + n(int64_t(ci)) + " (" + c.name + "): ";
    if (c.block < 32 || c.block > 1024 || c.block % 32 != 0)
      return at + "block of " + n(c.block) + " threads is not whole warps up to 1024";
    if (c.minBlocksPerSm() * c.block > 2048)
      return at + n(c.minBlocksPerSm()) + " blocks per SM of " + n(c.block) +
             " threads exceed 2048";
    if (plan.pointwise) {
      if (c.ept < 1) return at + n(c.ept) + " elements per thread";
      if (c.vec != 1 && c.vec != plan.vecWidth)
        return at + "vectors of " + n(c.vec) + ", the plan's are " + n(plan.vecWidth);
    } else {
      if (c.tpr != 1 && c.tpr != 32 && c.tpr != c.block)
        return at + n(c.tpr) + " threads per row: not 1, a warp or the block";
      if (c.tpr * c.rows != c.block)
        return at + n(c.rows) + " rows of " + n(c.tpr) + " threads do not fill the block of " +
               n(c.block);
    }
  }
  auto runsOk = [&](const VecRuns &r) { return r.width > 1 && powerOfTwo(r.width); };
  if (plan.pointwise) {
    if (plan.mapping == PointwiseMapping::kLastDim && (!plan.lastVec || !runsOk(*plan.lastVec)))
      return "vectors along the last dim without a vector plan";
    if (plan.mapping == PointwiseMapping::kDim &&
        (!plan.dimVec || plan.dimVec->width != plan.vecWidth || plan.dimVec->loads.empty()))
      return "vector loads along dim without a vector plan of the plan's width";
    if (plan.vecWidth == 1 && !plan.vecAlign.empty())
      return "alignment tests without a vector path";
  } else {
    if (plan.phaseVec.size() != phases)
      return n(int64_t(plan.phaseVec.size())) + " phase vector plans for " + n(int64_t(phases)) +
             " phases";
    for (size_t pi = 0; pi < phases; ++pi)
      if (plan.phaseVec[pi] && !runsOk(*plan.phaseVec[pi]))
        return "phase " + n(int64_t(pi)) + ": vectors of " + n(plan.phaseVec[pi]->width);
  }
  for (size_t i = 0; i < plan.adaptive.size(); ++i) {
    const AdaptiveCase &a = plan.adaptive[i];
    if (a.config < 0 || size_t(a.config) >= plan.configs.size())
      return "adaptive case " + n(int64_t(i)) + " launches config " + n(a.config) + " of " +
             n(int64_t(plan.configs.size()));
    bool last = i + 1 == plan.adaptive.size();
    if (last != (a.condition == "else"))
      return "adaptive case " + n(int64_t(i)) + " ('" + a.condition + "')" +
             (last ? ": the last case must always hold" : ": only the last case is 'else'");
  }
  if (plan.splitConfig >= 0) {
    auto valid = [&](int32_t c) { return c >= 0 && size_t(c) < plan.configs.size(); };
    if (!valid(plan.splitConfig) || !plan.configs[size_t(plan.splitConfig)].split)
      return "split config " + n(plan.splitConfig) + " is not a split config";
    if (!valid(plan.wholeConfig) || plan.configs[size_t(plan.wholeConfig)].split)
      return "split fallback " + n(plan.wholeConfig) + " is not a whole-point config";
    if (plan.splitArrays.empty()) return "a split plan without workspace arrays";
  } else {
    for (const CudaConfig &c : plan.configs)
      if (c.split) return "config " + c.name + " splits, the plan has no split";
  }
  return "";
}

} // namespace coil::codegen
