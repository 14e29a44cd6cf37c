// The CPU printers: the body function and the launchers of one kernel, from its plan
// (CpuPlan.h, made by CpuPlan.cpp).
#include "codegen/cpu/CpuCodegen.h"

#include "codegen/cpu/CpuEmitter.h"
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

} // namespace

// ------------------------------------------------------------------------------------- bodies

std::string CpuEmitter::offsetOf(LoopCtx &ctx, const Body &b, NodeId node,
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

Status CpuEmitter::planOffsets(LoopCtx &ctx, const Body &b, const std::vector<bool> &live,
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

Status CpuEmitter::emitBody(CodeWriter &w, LoopCtx &ctx, const Body &b,
                            const std::vector<bool> &live, std::vector<std::string> &valName) {
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

Status CpuEmitter::emitStores(CodeWriter &w, LoopCtx &ctx, const std::vector<sched::Store> &stores,
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

std::string CpuEmitter::paramList(bool restrict) const {
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

std::string CpuEmitter::argList() const {
  std::string s;
  for (NodeId n : buffers_) s += ", " + bufName_.at(n);
  for (const std::string &sym : sizeSyms_) s += ", " + cname_.at(sym);
  return s;
}

/// Decomposes `begin` into the outer indices x0..x{lastDim-1} (and `lo` for the last dim when
/// lastDim < rank: the pointwise shape).
void CpuEmitter::emitStartPoint(CodeWriter &w, size_t dims) {
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
void CpuEmitter::emitCarry(CodeWriter &w, size_t dims) {
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

Status CpuEmitter::emitPointwise(CodeWriter &w) {
  const sched::Phase &ph = k_.phases[0];
  size_t rank = k_.vars.size();
  std::string last = cname_[k_.vars[rank - 1]];
  const std::vector<bool> &live = flatLive_;
  size_t merged = plan_.rowDims;
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

Status CpuEmitter::emitFlat(CodeWriter &w) {
  const sched::Phase &ph = k_.phases[0];
  LoopCtx &ctx = flatCtx_;
  const std::vector<bool> &live = flatLive_;
  if (ctx.simd) w.line("#pragma omp simd");
  w.open("for (int64_t f = begin; f < end; ++f)");
  std::vector<std::string> valName;
  COIL_TRY_STATUS(emitBody(w, ctx, ph.body, live, valName));
  COIL_TRY_STATUS(emitStores(w, ctx, ph.stores, ph.body, valName));
  w.close();
  return okStatus();
}

Status CpuEmitter::emitRows(CodeWriter &w) {
  size_t rank = k_.vars.size();
  emitStartPoint(w, rank);
  w.open("for (int64_t f = begin; f < end; ++f)");
  for (size_t pi = 0; pi < k_.phases.size(); ++pi) COIL_TRY_STATUS(emitPhase(w, pi));
  emitCarry(w, rank);
  w.close();
  return okStatus();
}

Status CpuEmitter::emitPhase(CodeWriter &w, size_t pi) {
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
    // The planned trailing dims are one loop, the others merged into it 0.
    size_t nv = ph.vars.size();
    size_t merged = plan_.loopDims[pi];
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

Status CpuEmitter::emitWindowPhases(CodeWriter &w) {
  inSimd_ = true;
  Status st = okStatus();
  for (size_t pi = 0; pi < k_.phases.size() && st.ok(); ++pi) st = emitPhase(w, pi);
  inSimd_ = false;
  return st;
}

Status CpuEmitter::emitWindowRows(CodeWriter &w) {
  size_t rank = k_.vars.size();
  std::string last = cname_[k_.vars[rank - 1]];
  emitStartPoint(w, rank - 1);
  w.open("for (int64_t f = begin; f < end;)");
  w.line("const int64_t hi = std::min<int64_t>(" + extent_[rank - 1] + ", lo + (end - f));");
  if (!plan_.interior) {
    w.line("#pragma omp simd");
    w.open("for (int64_t " + last + " = lo; " + last + " < hi; ++" + last + ")");
    COIL_TRY_STATUS(emitWindowPhases(w));
    w.close();
  } else {
    // [lo, ilo) and [ihi, hi) with clamps, [ilo, ihi) without.
    w.line("int64_t ilo = lo, ihi = hi;");
    for (const std::string &b : plan_.lowers) w.line("ilo = std::max<int64_t>(ilo, " + b + ");");
    for (const std::string &b : plan_.uppers)
      w.line("ihi = std::min<int64_t>(ihi, (" + b + ") + 1);");
    w.line("ilo = std::min<int64_t>(ilo, hi);");
    w.line("ihi = std::max<int64_t>(ihi, ilo);");
    w.open("for (int part = 0; part < 2; ++part)");
    w.line("const int64_t pa = part == 0 ? lo : ihi, pb = part == 0 ? ilo : hi;");
    w.line("#pragma omp simd");
    w.open("for (int64_t " + last + " = pa; " + last + " < pb; ++" + last + ")");
    COIL_TRY_STATUS(emitWindowPhases(w));
    w.close();
    w.close();
    w.line("#pragma omp simd");
    w.open("for (int64_t " + last + " = ilo; " + last + " < ihi; ++" + last + ")");
    declampVar_ = last;
    Status st = emitWindowPhases(w);
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

Expected<CpuKernelSource> CpuEmitter::run() {
  COIL_TRY_STATUS(validate());
  assignNames();
  CpuKernelSource out;
  out.info = kernelInfo(o_.sourceFile);
  wrapper::KernelInfo &info = out.info;

  COIL_TRY_STATUS(plan());
  for (int64_t blk : plan_.blocks)
    info.configs.push_back(wrapper::KernelConfig{"block" + std::to_string(blk), {{"block", blk}}});
  const CpuShape shape = plan_.shape;

  CodeWriter w;
  std::string fusedNames;
  for (NodeId n : k_.fused)
    if (n >= 0 && size_t(n) < p_.nodes.size())
      fusedNames += (fusedNames.empty() ? "" : ", ") + p_.nodes[size_t(n)].name;
  w.line("// kernel " + k_.name + (fusedNames.empty() ? "" : " (" + fusedNames + ")") + ": " +
         (shape == CpuShape::kFlat            ? "pointwise, flat"
          : shape == CpuShape::kPointwiseRows ? "pointwise, blocks of rows"
          : shape == CpuShape::kWindowRows
              ? "small windows, rows of outer points, " + std::to_string(k_.phases.size()) +
                    " phase(s)"
              : "per outer point, " + std::to_string(k_.phases.size()) + " phase(s)"));
  w.open("static void " + k_.name + "_body(int64_t begin, int64_t end" +
         (buffers_.empty() && sizeSyms_.empty() ? "" : ", ") + paramList(true) + ")");
  // Extents of the outer dims the body walks (the outermost one only bounds a pointwise row).
  bool rowsOfLast = shape == CpuShape::kPointwiseRows || shape == CpuShape::kWindowRows;
  for (size_t d = rowsOfLast && k_.vars.size() == 1 ? 0 : 1;
       d < k_.vars.size() && shape != CpuShape::kFlat; ++d)
    w.line("const int64_t " + extent_[d] + " = " + cpp(k_.ranges[d]) + ";");
  COIL_TRY_STATUS(shape == CpuShape::kFlat            ? emitFlat(w)
                  : shape == CpuShape::kPointwiseRows ? emitPointwise(w)
                  : shape == CpuShape::kWindowRows    ? emitWindowRows(w)
                                                      : emitRows(w));
  w.close();
  for (size_t c = 0; c < plan_.blocks.size(); ++c) {
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
    w.line("const int64_t block = " + std::to_string(plan_.blocks[c]) + ";");
    w.line("const int64_t grid = (total + block - 1) / block;");
    // Threads only when the work (points times the phases' inner points times their
    // statements) pays for the fork and join of a parallel region. Below that, a plain loop:
    // a parallel region with a false `if` clause still enters libgomp, which wakes the pool's
    // threads with a futex call every time (about 0.5 us on the 2-core machine, more when the
    // threads are still spinning from the last region).
    w.line("const int64_t work = total * (" + cpp(plan_.perPointWork) + ");");
    std::string call = k_.name +
                       "_body(task * block, std::min<int64_t>(total, (task + 1) * block)" +
                       argList() + ");";
    w.open("if (grid > 1 && work >= " + std::to_string(plan_.parallelWork) + ")");
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
  out.plan = plan_;
  return out;
}

Expected<CpuKernelSource> generateCpuKernel(const sched::Kernel &k, const loop::LoopProgram &p,
                                            const CpuCodegenOptions &o) {
  return CpuEmitter(k, p, o).run();
}

} // namespace coil::codegen
