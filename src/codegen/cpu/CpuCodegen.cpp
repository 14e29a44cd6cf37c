#include "codegen/cpu/CpuCodegen.h"

#include "codegen/CSource.h"
#include "codegen/KernelEmitter.h"
#include "support/Check.h"
#include "support/DType.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

namespace coil::codegen {

using loop::Body;
using loop::NodeId;
using loop::ReduceKind;
using loop::ScalarOp;
using loop::Stmt;
using loop::Val;

const char *cpuStorageType(DType t) {
  return cStorageType(t);
}

namespace {

/// How CPU kernels keep reductions' partial states (KernelEmitter.h).
ReductionStyle kCpuReductions(const CpuCodegenOptions &o) {
  return ReductionStyle{o.sumF32InDouble, /*cuda=*/false};
}

/// The `#pragma omp simd` clauses that combine the lanes' partial states (none for arg
/// reductions, which do not run as simd loops).
std::vector<std::string> ompReductionClauses(const std::vector<ReductionVar> &reds) {
  std::vector<std::string> clauses;
  for (const ReductionVar &red : reds) {
    const char *op = nullptr;
    switch (red.r->kind) {
    case ReduceKind::Sum:
      op = "+";
      break;
    case ReduceKind::Prod:
      op = "*";
      break;
    case ReduceKind::Max:
      op = "max";
      break;
    case ReduceKind::Min:
      op = "min";
      break;
    case ReduceKind::Any:
      op = "|";
      break;
    case ReduceKind::All:
      op = "&";
      break;
    case ReduceKind::ArgMax:
    case ReduceKind::ArgMin:
      break;
    }
    if (!op) continue;
    clauses.push_back(std::string("reduction(") + op + ":" + red.work + ")");
    if (!red.nan.empty()) clauses.push_back("reduction(|:" + red.nan + ")");
  }
  return clauses;
}

class Emitter : KernelEmitterBase {
public:
  Emitter(const sched::Kernel &k, const loop::LoopProgram &p, const CpuCodegenOptions &o)
      : KernelEmitterBase(k, p, {"v", "o", "d", "n", "acc", "red"},
                          {"begin", "end", "f", "t", "lo", "hi", "total", "grid", "block", "task",
                           "n_row", "ilo", "ihi", "part", "pa", "pb"},
                          "cpu codegen: "),
        o_(o) {}

  Expected<CpuKernelSource> run();

private:
  // --- launcher
  SymInt perPointWork() const;

  // --- body
  struct LoopCtx {
    std::string var; ///< C name of the innermost loop variable ("" when no loop)
    std::map<std::string, std::string> hoisted;            ///< offset expression text -> name
    std::vector<std::pair<std::string, std::string>> defs; ///< hoisted (name, expr), in order
    std::map<const void *, std::string> offsets; ///< per Load stmt / Store: the printed offset
    bool simd = true;
  };
  std::string offsetOf(LoopCtx &ctx, const Body &b, NodeId node, const std::vector<SymInt> &idx,
                       bool isStore);
  Status planOffsets(LoopCtx &ctx, const Body &b, const std::vector<bool> &live,
                     const std::vector<sched::Store> &stores);
  Status emitBody(CodeWriter &w, LoopCtx &ctx, const Body &b, const std::vector<bool> &live,
                  std::vector<std::string> &valName);
  Status emitStores(CodeWriter &w, LoopCtx &ctx, const std::vector<sched::Store> &stores,
                    const Body &b, const std::vector<std::string> &valName);

  // --- kernel structure
  Status emitPointwise(CodeWriter &w);
  size_t mergeableTrailingDims(const sched::Phase &ph, const std::vector<bool> &live,
                               const std::vector<std::string> &vars,
                               const std::vector<SymInt> &ranges, size_t keep);
  bool planFlat(LoopCtx &ctx, const std::vector<bool> &live);
  Status emitFlat(CodeWriter &w, LoopCtx &ctx, const std::vector<bool> &live);
  Status emitRows(CodeWriter &w);
  Status emitPhase(CodeWriter &w, size_t pi);
  bool isWindowKernel();
  Status emitWindowRows(CodeWriter &w);
  void emitStartPoint(CodeWriter &w, size_t lastDim);
  void emitCarry(CodeWriter &w, size_t dims);
  std::string paramList(bool restrict) const;
  std::string argList() const;

  const CpuCodegenOptions &o_;
  int nextOffset_ = 0;
  /// Phases are emitted inside the simd loop over the last outer dim (window kernels): their
  /// inner points are unrolled, one block each, not loops.
  bool inSimd_ = false;
  /// Window kernels' interior: while set, load offsets drop the min/max clamps that select an
  /// operand moving with this (C-named) variable, and record where that is exact.
  std::string declampVar_;
  bool declampOk_ = true;
  struct Bound {
    size_t phase;
    bool upper; ///< var <= e (else var >= e)
    SymInt e;
  };
  std::vector<Bound> bounds_;
  size_t curPhase_ = 0;
  using ClampFn = std::function<std::optional<SymInt>(const SymInt &)>;
  std::optional<SymInt> mapClamps(const SymInt &e, const std::string &v, const ClampFn &clamp);
  std::optional<SymInt> declamp(const SymInt &e, const std::string &v);
  std::optional<SymInt> resolveClamps(const SymInt &e, const std::string &v);
};

// ------------------------------------------------------------------------------------- bodies

std::string Emitter::offsetOf(LoopCtx &ctx, const Body &b, NodeId node,
                              const std::vector<SymInt> &idx, bool isStore) {
  (void)b;
  std::vector<SymInt> ridx;
  for (const SymInt &e : idx) ridx.push_back(renamed(e));
  std::vector<SymInt> shape;
  for (const SymInt &d : p_.nodes[size_t(node)].shape) shape.push_back(renamed(d));
  SymInt lin = simplify(linearIndex(shape, ridx), ranges_);
  if (!declampVar_.empty() && !isStore) {
    if (auto d = declamp(lin, declampVar_))
      lin = simplify(*d, ranges_);
    else
      declampOk_ = false;
  }
  std::optional<Affine> a;
  if (!ctx.var.empty()) a = affineIn(lin, ctx.var);
  bool hoistable = false;
  if (a) {
    std::set<std::string> syms;
    a->rest.collectSymbols(syms);
    a->coef.collectSymbols(syms);
    hoistable = true;
    for (const std::string &s : syms)
      for (const std::string &ind : indirectSyms_)
        if (cname_[ind] == s) hoistable = false;
  }
  if (isStore && !ctx.var.empty()) {
    // Lanes of a simd loop must store to distinct elements.
    bool distinct =
        hoistable && a &&
        (a->coef.isConstant() ? a->coef.constant() != 0 : proveLE(SymInt(1), a->coef, ranges_));
    if (!distinct) ctx.simd = false;
  }
  if (!hoistable || ctx.var.empty()) return lin.toCpp(ranges_);
  std::string base;
  if (a->rest.isConstant()) {
    base = a->rest.toCpp(ranges_);
  } else {
    std::string text = a->rest.toCpp(ranges_);
    auto it = ctx.hoisted.find(text);
    if (it == ctx.hoisted.end()) {
      std::string name = "o" + std::to_string(nextOffset_++);
      it = ctx.hoisted.emplace(text, name).first;
      ctx.defs.emplace_back(name, text);
    }
    base = it->second;
  }
  if (a->coef == SymInt(0)) return base;
  std::string step;
  if (a->coef == SymInt(1)) {
    step = ctx.var;
  } else if (a->coef.isConstant()) {
    step = ctx.var + " * " + int64Literal(a->coef.constant());
  } else {
    std::string text = a->coef.toCpp(ranges_);
    auto it = ctx.hoisted.find(text);
    if (it == ctx.hoisted.end()) {
      std::string name = "d" + std::to_string(nextOffset_++);
      it = ctx.hoisted.emplace(text, name).first;
      ctx.defs.emplace_back(name, text);
    }
    step = ctx.var + " * " + it->second;
  }
  return base == "0" ? step : base + " + " + step;
}

Status Emitter::planOffsets(LoopCtx &ctx, const Body &b, const std::vector<bool> &live,
                            const std::vector<sched::Store> &stores) {
  for (size_t i = 0; i < b.stmts.size(); ++i)
    if (live[i] && b.stmts[i].kind == Stmt::Kind::Load)
      ctx.offsets[&b.stmts[i]] = offsetOf(ctx, b, b.stmts[i].node, b.stmts[i].index, false);
  for (const sched::Store &s : stores) {
    ctx.offsets[&s] = offsetOf(ctx, b, s.node, s.index, true);
    // A kernel that reads what it writes: keep the loop scalar.
    if (readSet_.count(s.node)) ctx.simd = false;
  }
  return okStatus();
}

Status Emitter::emitBody(CodeWriter &w, LoopCtx &ctx, const Body &b, const std::vector<bool> &live,
                         std::vector<std::string> &valName) {
  return emitStatements(
      w, b, live, valName,
      [&](const Stmt &s) { return bufName_[s.node] + "[" + ctx.offsets[&s] + "]"; },
      [&](const SymInt &e) {
        if (declampVar_.empty()) return cpp(e);
        // In a window interior, a value's min / max against the moving variable (a tap count
        // near the border) is its other operand: hoistable, and no 64-bit min / max per lane.
        SymInt r = simplify(renamed(e), ranges_);
        if (auto d = resolveClamps(r, declampVar_)) r = simplify(*d, ranges_);
        return r.toCpp(ranges_);
      });
}

Status Emitter::emitStores(CodeWriter &w, LoopCtx &ctx, const std::vector<sched::Store> &stores,
                           const Body &b, const std::vector<std::string> &valName) {
  for (const sched::Store &s : stores) {
    DType from = b.stmts[size_t(s.value)].dtype;
    DType nd = p_.nodes[size_t(s.node)].dtype;
    w.line(bufName_[s.node] + "[" + ctx.offsets[&s] +
           "] = " + storeConv(valName[size_t(s.value)], from, nd) + ";");
  }
  return okStatus();
}

// ------------------------------------------------------------------------------ kernel shapes

std::string Emitter::paramList(bool restrict) const {
  std::string s;
  for (NodeId n : buffers_) {
    if (!s.empty()) s += ", ";
    bool w = writeSet_.count(n) != 0;
    // A buffer both read and written may alias itself: no restrict on it.
    bool r = restrict && !(w && readSet_.count(n));
    s += std::string(w ? "" : "const ") + cpuStorageType(p_.nodes[size_t(n)].dtype) + " *" +
         (r ? "COIL_RESTRICT " : "") + bufName_.at(n);
  }
  for (const std::string &sym : sizeSyms_) {
    if (!s.empty()) s += ", ";
    s += std::string(restrict ? "[[maybe_unused]] " : "") + "int64_t " + cname_.at(sym);
  }
  return s;
}

std::string Emitter::argList() const {
  std::string s;
  for (NodeId n : buffers_) s += ", " + bufName_.at(n);
  for (const std::string &sym : sizeSyms_) s += ", " + cname_.at(sym);
  return s;
}

/// Decomposes `begin` into the outer indices x0..x{lastDim-1} (and `lo` for the last dim when
/// lastDim < rank: the pointwise shape).
void Emitter::emitStartPoint(CodeWriter &w, size_t dims) {
  size_t rank = k_.vars.size();
  if (rank == 0) return;
  // dims == rank: every outer index is a variable; dims == rank - 1: the last is `lo`.
  if (rank == 1) {
    w.line(std::string("int64_t ") + (dims == rank ? cname_[k_.vars[0]] : "lo") + " = begin;");
    return;
  }
  w.line("int64_t t = begin;");
  for (size_t d = rank; d-- > 1;) {
    std::string var = d == rank - 1 && dims < rank ? "lo" : cname_[k_.vars[d]];
    w.line("int64_t " + var + " = t % " + extent_[d] + ";");
    w.line("t /= " + extent_[d] + ";");
  }
  w.line("int64_t " + cname_[k_.vars[0]] + " = t;");
}

/// Advances x0..x{dims-1} by one point (row-major, with carry).
void Emitter::emitCarry(CodeWriter &w, size_t dims) {
  if (dims == 0) return;
  std::string text;
  for (size_t d = dims; d-- > 0;) {
    const std::string &x = cname_[k_.vars[d]];
    if (d == 0) {
      text += "++" + x + ";";
      break;
    }
    text += "if (++" + x + " == " + extent_[d] + ") { " + x + " = 0; ";
  }
  for (size_t d = 1; d < dims; ++d) text += " }";
  w.line(text);
}

/// How many trailing dims of a pointwise kernel one row segment can walk as if they were one
/// dim (at least 1): those over which every load and store is contiguous in the same proportion
/// (a per-channel parameter over an H x W plane: independent of H and W; the activations: the
/// plane's flat index) and which no statement reads as a value. Short rows (7x7, 8x8 planes)
/// then vectorize over the whole plane instead of one row of 7 or 8 lanes at a time.
size_t Emitter::mergeableTrailingDims(const sched::Phase &ph, const std::vector<bool> &live,
                                      const std::vector<std::string> &vars,
                                      const std::vector<SymInt> &ranges, size_t keep) {
  size_t rank = vars.size();
  if (rank < keep + 2) return 1;
  std::vector<SymInt> lins;
  auto linOf = [&](NodeId node, const std::vector<SymInt> &idx) {
    std::vector<SymInt> ridx, shape;
    for (const SymInt &e : idx) ridx.push_back(renamed(e));
    for (const SymInt &d : p_.nodes[size_t(node)].shape) shape.push_back(renamed(d));
    return simplify(linearIndex(shape, ridx), ranges_);
  };
  for (size_t i = 0; i < ph.body.stmts.size(); ++i) {
    const Stmt &st = ph.body.stmts[i];
    if (!live[i]) continue;
    if (st.kind == Stmt::Kind::Load) lins.push_back(linOf(st.node, st.index));
  }
  for (const sched::Store &st : ph.stores) lins.push_back(linOf(st.node, st.index));
  auto mentionsIndirect = [&](const SymInt &e) {
    for (const std::string &ind : indirectSyms_)
      if (mentions(e, cname_[ind])) return true;
    return false;
  };
  for (const SymInt &lin : lins)
    if (mentionsIndirect(lin)) return 1;
  // Per access: its coefficient of the last dim and the rest.
  std::string lastVar = cname_[vars[rank - 1]];
  std::vector<Affine> aff;
  for (const SymInt &lin : lins) {
    auto a = affineIn(lin, lastVar);
    if (!a) return 1;
    aff.push_back(*a);
  }
  size_t merged = 1;
  SymInt inner = renamed(ranges[rank - 1]); // extent of the dims merged so far
  // Each access's coefficient of the last dim: a dim merges when its coefficient is that times
  // the extent of the dims merged so far (not the previous dim's coefficient times it, which
  // lets [32, 4, 5, 4] read at [r0, x0, r1, r2] merge r0 over x0).
  std::vector<SymInt> lastCoef;
  for (const Affine &a : aff) lastCoef.push_back(a.coef);
  // The first `keep` dims are never merged (the kernel's outermost dim bounds the launcher's
  // blocks).
  for (size_t d = rank - 1; d-- > keep;) {
    const std::string &var = cname_[vars[d]];
    bool ok = true;
    for (size_t i = 0; i < ph.body.stmts.size() && ok; ++i)
      if (live[i] && ph.body.stmts[i].kind == Stmt::Kind::Index &&
          (mentions(renamed(ph.body.stmts[i].expr), var) ||
           mentions(renamed(ph.body.stmts[i].expr), lastVar)))
        ok = false;
    std::vector<Affine> next;
    for (size_t i = 0; i < aff.size() && ok; ++i) {
      auto a = affineIn(aff[i].rest, var);
      if (!a || mentions(a->coef, lastVar) ||
          !(simplify(a->coef - lastCoef[i] * inner, ranges_) == SymInt(0)))
        ok = false;
      else
        next.push_back(*a);
    }
    if (!ok) break;
    aff = std::move(next);
    inner = inner * renamed(ranges[d]);
    ++merged;
  }
  return merged;
}

Status Emitter::emitPointwise(CodeWriter &w) {
  const sched::Phase &ph = k_.phases[0];
  size_t rank = k_.vars.size();
  std::string last = cname_[k_.vars[rank - 1]];
  std::vector<bool> live = liveStmts(ph.body, &ph);
  size_t merged = mergeableTrailingDims(ph, live, k_.vars, k_.ranges, 1);
  // With merged dims, `last` walks all of them (their flat index) and the others merged are 0:
  // every access is affine in them in the same proportion, so its offset at (0, .., 0, m)
  // equals its offset at the point whose merged flat index is m.
  std::string rowExtent = extent_[rank - 1];
  if (merged > 1) {
    std::string prod;
    for (size_t d = rank - merged; d < rank; ++d) prod += (prod.empty() ? "" : " * ") + extent_[d];
    rowExtent = "n_row";
    w.line("const int64_t n_row = " + prod + ";");
    w.line("int64_t t = begin;");
    w.line("int64_t lo = t % n_row;");
    w.line("t /= n_row;");
    for (size_t d = rank - merged; d-- > 1;) {
      w.line("int64_t " + cname_[k_.vars[d]] + " = t % " + extent_[d] + ";");
      w.line("t /= " + extent_[d] + ";");
    }
    w.line("int64_t " + cname_[k_.vars[0]] + " = t;");
  } else {
    emitStartPoint(w, rank - 1);
  }
  w.open("for (int64_t f = begin; f < end;)");
  w.line("const int64_t hi = std::min<int64_t>(" + rowExtent + ", lo + (end - f));");
  for (size_t d = rank - merged; d + 1 < rank; ++d)
    w.line("const int64_t " + cname_[k_.vars[d]] + " = 0;");
  LoopCtx ctx;
  ctx.var = last;
  COIL_TRY_STATUS(planOffsets(ctx, ph.body, live, ph.stores));
  for (auto &[name, expr] : ctx.defs) w.line("const int64_t " + name + " = " + expr + ";");
  if (ctx.simd) w.line("#pragma omp simd");
  w.open("for (int64_t " + last + " = lo; " + last + " < hi; ++" + last + ")");
  std::vector<std::string> valName;
  COIL_TRY_STATUS(emitBody(w, ctx, ph.body, live, valName));
  COIL_TRY_STATUS(emitStores(w, ctx, ph.stores, ph.body, valName));
  w.close();
  w.line("f += hi - lo;");
  w.line("lo = 0;");
  emitCarry(w, rank - merged);
  w.close();
  return okStatus();
}

/// A pointwise kernel whose every access is either the row-major flat index of the outer space
/// (same shape, no broadcast or view) or independent of the outer point runs as one flat loop:
/// no row segments, no index decomposition. Fills ctx.offsets; false when not flat.
bool Emitter::planFlat(LoopCtx &ctx, const std::vector<bool> &live) {
  const sched::Phase &ph = k_.phases[0];
  const FlatIndex fi = flatIndex();
  auto offset = [&](NodeId node, const std::vector<SymInt> &idx, bool isStore, std::string &out) {
    SymInt lin;
    FlatAccess a = flatAccess(fi, node, idx, &lin);
    if (a == FlatAccess::Flat) {
      out = "f";
      return true;
    }
    if (isStore || a == FlatAccess::Other) return false;
    out = lin.toCpp(ranges_);
    return true;
  };
  for (size_t i = 0; i < ph.body.stmts.size(); ++i) {
    const Stmt &s = ph.body.stmts[i];
    if (!live[i]) continue;
    if (s.kind == Stmt::Kind::Index && fi.usesOuter(renamed(s.expr))) return false;
    if (s.kind == Stmt::Kind::Load && !offset(s.node, s.index, false, ctx.offsets[&s]))
      return false;
  }
  for (const sched::Store &st : ph.stores) {
    if (!offset(st.node, st.index, true, ctx.offsets[&st])) return false;
    if (readSet_.count(st.node)) ctx.simd = false;
  }
  return true;
}

Status Emitter::emitFlat(CodeWriter &w, LoopCtx &ctx, const std::vector<bool> &live) {
  const sched::Phase &ph = k_.phases[0];
  if (ctx.simd) w.line("#pragma omp simd");
  w.open("for (int64_t f = begin; f < end; ++f)");
  std::vector<std::string> valName;
  COIL_TRY_STATUS(emitBody(w, ctx, ph.body, live, valName));
  COIL_TRY_STATUS(emitStores(w, ctx, ph.stores, ph.body, valName));
  w.close();
  return okStatus();
}

Status Emitter::emitRows(CodeWriter &w) {
  size_t rank = k_.vars.size();
  emitStartPoint(w, rank);
  w.open("for (int64_t f = begin; f < end; ++f)");
  for (size_t pi = 0; pi < k_.phases.size(); ++pi) COIL_TRY_STATUS(emitPhase(w, pi));
  emitCarry(w, rank);
  w.close();
  return okStatus();
}

Status Emitter::emitPhase(CodeWriter &w, size_t pi) {
  curPhase_ = pi;
  const sched::Phase &ph = k_.phases[pi];
  const Body &b = ph.body;
  std::string tag = std::to_string(pi);
  w.line(phaseComment(ph, pi, [&](const SymInt &e) { return cpp(e); }));
  // Working variables of the reductions, and the simd loop's clauses for them.
  std::vector<ReductionVar> reds = declareReductionVars(w, ph, tag, kCpuReductions(o_));
  std::vector<std::string> clauses = ompReductionClauses(reds);
  bool argReduce = std::any_of(reds.begin(), reds.end(), [](const ReductionVar &red) {
    return red.r->kind == ReduceKind::ArgMax || red.r->kind == ReduceKind::ArgMin;
  });

  // The loop nest.
  LoopCtx ctx;
  if (!ph.vars.empty()) ctx.var = cname_[ph.vars.back()];
  std::vector<bool> live = liveStmts(b, &ph);
  // The body at one inner point and its folds into the accumulators.
  auto inner = [&]() -> Status {
    std::vector<std::string> valName;
    COIL_TRY_STATUS(emitBody(w, ctx, b, live, valName));
    COIL_TRY_STATUS(emitStores(w, ctx, ph.stores, b, valName));
    for (const ReductionVar &red : reds) emitFoldElement(w, red, b, valName, kCpuReductions(o_));
    return okStatus();
  };
  if (inSimd_ && !ph.vars.empty()) {
    // Inside a simd loop: every inner point of the (small, constant) window as a block of its
    // own with the phase's variables as constants, so that the loop over outer points is the
    // only loop left to vectorize.
    COIL_TRY_STATUS(planOffsets(ctx, b, live, ph.stores));
    std::vector<int64_t> ext;
    int64_t points = 1;
    for (const SymInt &r : ph.ranges) {
      auto c = renamed(r).maybeConstant();
      if (!c) return Error::internal(kernelError(k_, "window phase with a symbolic range"));
      ext.push_back(*c);
      points *= *c;
    }
    for (int64_t pt = 0; pt < points; ++pt) {
      w.open("");
      int64_t rest = pt;
      std::vector<int64_t> at(ext.size());
      for (size_t d = ext.size(); d-- > 0;) at[d] = rest % ext[d], rest /= ext[d];
      for (size_t d = 0; d < ext.size(); ++d)
        w.line("const int64_t " + cname_[ph.vars[d]] + " = " + std::to_string(at[d]) + ";");
      for (auto &[name, expr] : ctx.defs) w.line("const int64_t " + name + " = " + expr + ";");
      COIL_TRY_STATUS(inner());
      w.close();
    }
  } else {
    // Trailing phase dims that every access walks in one proportion are one loop (an 8x8
    // window summed as one simd loop of 64), the others merged into it 0.
    size_t nv = ph.vars.size();
    size_t merged = nv >= 2 && !argReduce ? mergeableTrailingDims(ph, live, ph.vars, ph.ranges, 0)
                                          : std::min<size_t>(nv, 1);
    for (size_t d = 0; d + merged < nv; ++d) {
      const std::string &v = cname_[ph.vars[d]];
      w.open("for (int64_t " + v + " = 0; " + v + " < " + cpp(ph.ranges[d]) + "; ++" + v + ")");
    }
    if (ph.vars.empty()) w.open("");
    for (size_t d = nv - merged; d + 1 < nv; ++d)
      w.line("const int64_t " + cname_[ph.vars[d]] + " = 0;");
    COIL_TRY_STATUS(planOffsets(ctx, b, live, ph.stores));
    if (!ph.vars.empty()) {
      for (auto &[name, expr] : ctx.defs) w.line("const int64_t " + name + " = " + expr + ";");
      if (ctx.simd && !argReduce) {
        std::string pragma = "#pragma omp simd";
        for (const std::string &c : clauses) pragma += " " + c;
        w.line(pragma);
      }
      const std::string &v = ctx.var;
      SymInt extent(1);
      for (size_t d = nv - merged; d < nv; ++d) extent = extent * ph.ranges[d];
      w.open("for (int64_t " + v + " = 0; " + v + " < " + cpp(extent) + "; ++" + v + ")");
    }
    COIL_TRY_STATUS(inner());
    if (ph.vars.empty()) w.close();
    for (size_t d = 0; d < nv - merged + (nv ? 1 : 0); ++d) w.close();
  }
  // Final values of the accumulators, visible to later phases.
  emitReductionResults(w, tag, reds);
  return okStatus();
}

/// A kernel whose phases all walk small constant windows (pooling: 3x3 sums and maxima, with
/// their epilogues) runs as row segments of its last outer dim, vectorized across neighbouring
/// output points, each lane walking its window with unrolled loops; per outer point, a window
/// of 9 taps would leave the simd loop 9 lanes and a scalar epilogue. Not for arg reductions
/// (a position per lane) nor phases that store inside their loops; the stores at the outer
/// point must move with the last outer dim, so that lanes store to distinct elements.
bool Emitter::isWindowKernel() {
  size_t rank = k_.vars.size();
  if (rank == 0) return false;
  std::string lastVar = cname_[k_.vars[rank - 1]];
  bool anyLoop = false;
  for (const sched::Phase &ph : k_.phases) {
    int64_t points = 1;
    for (const SymInt &r : ph.ranges) {
      auto c = renamed(r).maybeConstant();
      if (!c || *c < 0) return false;
      points *= *c;
      if (points > 64) return false;
    }
    anyLoop = anyLoop || !ph.vars.empty();
    for (const sched::Accumulate &r : ph.reductions)
      if (r.kind == ReduceKind::ArgMax || r.kind == ReduceKind::ArgMin) return false;
    if (!ph.vars.empty() && !ph.stores.empty()) return false;
    for (const sched::Store &st : ph.stores) {
      if (readSet_.count(st.node)) return false;
      std::vector<SymInt> ridx, shape;
      for (const SymInt &e : st.index) ridx.push_back(renamed(e));
      for (const SymInt &d : p_.nodes[size_t(st.node)].shape) shape.push_back(renamed(d));
      SymInt lin = simplify(linearIndex(shape, ridx), ranges_);
      auto a = affineIn(lin, lastVar);
      if (!a) return false;
      for (const std::string &ind : indirectSyms_)
        if (mentions(lin, cname_[ind])) return false;
      bool distinct =
          a->coef.isConstant() ? a->coef.constant() != 0 : proveLE(SymInt(1), a->coef, ranges_);
      if (!distinct) return false;
    }
  }
  return anyLoop;
}

/// `e` with each min / max that moves with `v` replaced by `clamp(node)`, the sums and products
/// around them rebuilt; nullopt where `e` has another form that moves with v (a division, ...)
/// or `clamp` gives up.
std::optional<SymInt> Emitter::mapClamps(const SymInt &e, const std::string &v,
                                         const ClampFn &clamp) {
  if (!mentions(e, v)) return e;
  using K = SymInt::Kind;
  switch (e.kind()) {
  case K::Symbol:
    return e;
  case K::Add:
  case K::Mul: {
    bool add = e.kind() == K::Add;
    SymInt r(add ? 0 : 1);
    for (const SymInt &o : e.operands()) {
      auto d = mapClamps(o, v, clamp);
      if (!d) return std::nullopt;
      r = add ? r + *d : r * *d;
    }
    return r;
  }
  case K::Min:
  case K::Max:
    return clamp(e);
  default:
    return std::nullopt;
  }
}

/// `e` with every min / max that selects the one operand moving with `v` replaced by that
/// operand (which must be v + something), recording in bounds_ where that is exact: v <= o - rest
/// for each other operand o of a min, v >= o - rest of a max.
std::optional<SymInt> Emitter::declamp(const SymInt &e, const std::string &v) {
  return mapClamps(e, v, [&](const SymInt &mm) -> std::optional<SymInt> {
    const SymInt *moving = nullptr;
    for (const SymInt &o : mm.operands())
      if (mentions(o, v)) {
        if (moving) return std::nullopt;
        moving = &o;
      }
    auto d = declamp(*moving, v);
    if (!d) return std::nullopt;
    auto a = affineIn(*d, v);
    if (!a || !(a->coef == SymInt(1))) return std::nullopt;
    for (const SymInt &o : mm.operands())
      if (&o != moving) bounds_.push_back({curPhase_, mm.kind() == SymInt::Kind::Min, o - a->rest});
    return d;
  });
}

/// `e` with every min / max of two operands, one moving with `v` (as v or -v plus something),
/// replaced by the other, recording in bounds_ where that is exact.
std::optional<SymInt> Emitter::resolveClamps(const SymInt &e, const std::string &v) {
  return mapClamps(e, v, [&](const SymInt &mm) -> std::optional<SymInt> {
    const std::vector<SymInt> &ops = mm.operands();
    if (ops.size() != 2 || mentions(ops[0], v) == mentions(ops[1], v)) return std::nullopt;
    const SymInt &m = mentions(ops[0], v) ? ops[0] : ops[1];
    const SymInt &o = mentions(ops[0], v) ? ops[1] : ops[0];
    auto a = affineIn(m, v);
    if (!a || !a->coef.isConstant() || std::abs(a->coef.constant()) != 1) return std::nullopt;
    bool up = a->coef.constant() == 1;
    // min(m, o) = o where o <= m; max(m, o) = o where o >= m; m = c*v + rest, c = +-1.
    bool isMin = mm.kind() == SymInt::Kind::Min;
    SymInt bound = up ? o - a->rest : a->rest - o;
    bounds_.push_back({curPhase_, isMin != up, bound});
    return o;
  });
}

Status Emitter::emitWindowRows(CodeWriter &w) {
  size_t rank = k_.vars.size();
  std::string last = cname_[k_.vars[rank - 1]];
  auto phases = [&](CodeWriter &out) -> Status {
    inSimd_ = true;
    for (size_t pi = 0; pi < k_.phases.size(); ++pi) COIL_TRY_STATUS(emitPhase(out, pi));
    inSimd_ = false;
    return okStatus();
  };
  // The interior: where every clamped tap index (a window inside the padding) equals its
  // unclamped value, the taps are contiguous in `last` and vectorize as plain loads (no
  // gathers). A dry run finds the clamps and the bounds of that range.
  std::set<std::string> lowers, uppers;
  {
    CodeWriter dry;
    declampVar_ = last;
    declampOk_ = true;
    bounds_.clear();
    Status st = phases(dry);
    declampVar_.clear();
    COIL_TRY_STATUS(st);
    for (const Bound &bd : bounds_) {
      const sched::Phase &ph = k_.phases[bd.phase];
      std::vector<int64_t> ext;
      int64_t points = 1;
      for (const SymInt &r : ph.ranges) {
        ext.push_back(renamed(r).maybeConstant().value_or(0));
        points *= ext.back();
      }
      for (int64_t pt = 0; pt < points; ++pt) {
        std::map<std::string, SymInt> at;
        int64_t rest = pt;
        for (size_t d = ext.size(); d-- > 0;) {
          at[cname_[ph.vars[d]]] = SymInt(rest % ext[d]);
          rest /= ext[d];
        }
        std::string text = simplify(bd.e.substitute(at), ranges_).toCpp(ranges_);
        (bd.upper ? uppers : lowers).insert(text);
      }
    }
  }
  bool interior = declampOk_ && !bounds_.empty();
  bounds_.clear();
  emitStartPoint(w, rank - 1);
  w.open("for (int64_t f = begin; f < end;)");
  w.line("const int64_t hi = std::min<int64_t>(" + extent_[rank - 1] + ", lo + (end - f));");
  if (!interior) {
    w.line("#pragma omp simd");
    w.open("for (int64_t " + last + " = lo; " + last + " < hi; ++" + last + ")");
    COIL_TRY_STATUS(phases(w));
    w.close();
  } else {
    // [lo, ilo) and [ihi, hi) with clamps, [ilo, ihi) without.
    w.line("int64_t ilo = lo, ihi = hi;");
    for (const std::string &b : lowers) w.line("ilo = std::max<int64_t>(ilo, " + b + ");");
    for (const std::string &b : uppers) w.line("ihi = std::min<int64_t>(ihi, (" + b + ") + 1);");
    w.line("ilo = std::min<int64_t>(ilo, hi);");
    w.line("ihi = std::max<int64_t>(ihi, ilo);");
    w.open("for (int part = 0; part < 2; ++part)");
    w.line("const int64_t pa = part == 0 ? lo : ihi, pb = part == 0 ? ilo : hi;");
    w.line("#pragma omp simd");
    w.open("for (int64_t " + last + " = pa; " + last + " < pb; ++" + last + ")");
    COIL_TRY_STATUS(phases(w));
    w.close();
    w.close();
    w.line("#pragma omp simd");
    w.open("for (int64_t " + last + " = ilo; " + last + " < ihi; ++" + last + ")");
    declampVar_ = last;
    Status st = phases(w);
    declampVar_.clear();
    bounds_.clear();
    COIL_TRY_STATUS(st);
    if (!declampOk_) return Error::internal(kernelError(k_, "window interior not reproducible"));
    w.close();
  }
  w.line("f += hi - lo;");
  w.line("lo = 0;");
  emitCarry(w, rank - 1);
  w.close();
  return okStatus();
}

/// Below this much work (statements evaluated), a launcher runs its kernel on one thread: a
/// parallel region's fork and join costs microseconds, which tiny kernels cannot win back.
constexpr int64_t kParallelWork = int64_t(1) << 15;
/// The same for kernels whose innermost loops are simd loops over about 8 lanes (all but window
/// kernels, whose taps are gathers, and arg reductions): a GELU + batch norm over [4, 32, 8, 8]
/// (3e5 statements, about 12 us on one thread) ran slower on 2 threads than on one (fork and
/// join on the 2-core machine, issue 19).
constexpr int64_t kParallelWorkSimd = int64_t(1) << 18;

/// The work per outer point of a kernel: each phase's inner points times its statements.
SymInt Emitter::perPointWork() const {
  SymInt per(0);
  for (const sched::Phase &ph : k_.phases) {
    SymInt points(1);
    for (const SymInt &r : ph.ranges) points = points * r;
    per = per + points * SymInt(std::max<int64_t>(1, int64_t(ph.body.stmts.size())));
  }
  return per;
}

Expected<CpuKernelSource> Emitter::run() {
  COIL_TRY_STATUS(validate());
  assignNames();
  CpuKernelSource out;
  out.info = kernelInfo(o_.sourceFile);
  wrapper::KernelInfo &info = out.info;

  bool pointwise = k_.phases.size() == 1 && k_.phases[0].vars.empty() &&
                   k_.phases[0].reductions.empty() && !k_.vars.empty();
  bool window = !pointwise && isWindowKernel();
  bool scalarLanes = window;
  for (const sched::Phase &ph : k_.phases)
    for (const sched::Accumulate &r : ph.reductions)
      if (r.kind == ReduceKind::ArgMax || r.kind == ReduceKind::ArgMin) scalarLanes = true;
  const std::vector<int64_t> &blocks = pointwise || window ? o_.pointwiseBlocks : o_.rowBlocks;
  if (blocks.empty()) return Error::internal(kernelError(k_, "no configs requested"));
  for (int64_t blk : blocks) {
    if (blk < 1) return Error::internal(kernelError(k_, "config block must be >= 1"));
    info.configs.push_back(wrapper::KernelConfig{"block" + std::to_string(blk), {{"block", blk}}});
  }

  LoopCtx flatCtx;
  std::vector<bool> flatLive;
  bool flat = false;
  if (pointwise) {
    flatLive = liveStmts(k_.phases[0].body, &k_.phases[0]);
    flat = planFlat(flatCtx, flatLive);
  }
  CodeWriter w;
  std::string fusedNames;
  for (NodeId n : k_.fused)
    if (n >= 0 && size_t(n) < p_.nodes.size())
      fusedNames += (fusedNames.empty() ? "" : ", ") + p_.nodes[size_t(n)].name;
  w.line("// kernel " + k_.name + (fusedNames.empty() ? "" : " (" + fusedNames + ")") + ": " +
         (flat        ? "pointwise, flat"
          : pointwise ? "pointwise, blocks of rows"
          : window    ? "small windows, rows of outer points, " + std::to_string(k_.phases.size()) +
                         " phase(s)"
                   : "per outer point, " + std::to_string(k_.phases.size()) + " phase(s)"));
  w.open("static void " + k_.name + "_body(int64_t begin, int64_t end" +
         (buffers_.empty() && sizeSyms_.empty() ? "" : ", ") + paramList(true) + ")");
  // Extents of the outer dims the body walks (the outermost one only bounds a pointwise row).
  for (size_t d = (pointwise || window) && k_.vars.size() == 1 ? 0 : 1; d < k_.vars.size() && !flat;
       ++d)
    w.line("const int64_t " + extent_[d] + " = " + cpp(k_.ranges[d]) + ";");
  COIL_TRY_STATUS(flat        ? emitFlat(w, flatCtx, flatLive)
                  : pointwise ? emitPointwise(w)
                  : window    ? emitWindowRows(w)
                              : emitRows(w));
  w.close();
  for (size_t c = 0; c < blocks.size(); ++c) {
    w.blank();
    w.open("extern \"C\" void " + wrapper::KernelInfo::entryName(k_.name, c) + "(" +
           paramList(false) + ")");
    std::string total;
    std::string empty;
    for (size_t d = 0; d < k_.vars.size(); ++d) {
      w.line("const int64_t " + extent_[d] + " = " + cpp(k_.ranges[d]) + ";");
      empty += (empty.empty() ? "" : " || ") + extent_[d] + " <= 0";
      total += (total.empty() ? "" : " * ") + extent_[d];
    }
    if (!empty.empty()) w.line("if (" + empty + ") return;");
    w.line("const int64_t total = " + (total.empty() ? std::string("1") : total) + ";");
    w.line("const int64_t block = " + std::to_string(blocks[c]) + ";");
    w.line("const int64_t grid = (total + block - 1) / block;");
    // Threads only when the work (points times the phases' inner points times their
    // statements) pays for the fork and join of a parallel region. Below that, a plain loop:
    // a parallel region with a false `if` clause still enters libgomp, which wakes the pool's
    // threads with a futex call every time (about 0.5 us on the 2-core machine, more when the
    // threads are still spinning from the last region).
    w.line("const int64_t work = total * (" + cpp(perPointWork()) + ");");
    std::string call = k_.name +
                       "_body(task * block, std::min<int64_t>(total, (task + 1) * block)" +
                       argList() + ");";
    w.open("if (grid > 1 && work >= " +
           std::to_string(scalarLanes ? kParallelWork : kParallelWorkSimd) + ")");
    w.line("#pragma omp parallel for schedule(static)");
    w.open("for (int64_t task = 0; task < grid; ++task)");
    w.line(call);
    w.close();
    w.close("} else {");
    w.indent();
    w.open("for (int64_t task = 0; task < grid; ++task)");
    w.line(call);
    w.close();
    w.close();
    w.close();
  }
  out.code = w.str();
  return out;
}

} // namespace

Expected<CpuKernelSource> generateCpuKernel(const sched::Kernel &k, const loop::LoopProgram &p,
                                            const CpuCodegenOptions &o) {
  Emitter e(k, p, o);
  return e.run();
}

} // namespace coil::codegen
