// The CPU planner: the decisions of CPU kernel codegen (CpuPlan.h), made before anything is
// printed: the kernel's shape of code, the dims its loops walk as one, a window kernel's
// interior, its configs and when its launches run on threads.
#include "codegen/cpu/CpuEmitter.h"

#include <algorithm>

namespace coil::codegen {

using loop::ReduceKind;

namespace {

/// An ArgMax / ArgMin reduction: a position per lane, so no simd loop.
bool hasArgReduction(const sched::Phase &ph) {
  return std::any_of(ph.reductions.begin(), ph.reductions.end(), [](const sched::Accumulate &r) {
    return r.kind == ReduceKind::ArgMax || r.kind == ReduceKind::ArgMin;
  });
}

} // namespace

Status CpuEmitter::plan() {
  bool pointwise = k_.pointwise();
  bool window = !pointwise && isWindowKernel();
  // Lanes that cannot run as simd lanes (window taps are gathers; arg reductions keep a
  // position per lane) make threads pay off sooner.
  bool scalarLanes = window || std::any_of(k_.phases.begin(), k_.phases.end(), hasArgReduction);
  plan_.blocks = pointwise || window ? o_.pointwiseBlocks : o_.rowBlocks; // checked by verified()
  plan_.perPointWork = perPointWork();
  plan_.parallelWork = scalarLanes ? kParallelWork : kParallelWorkSimd;

  if (pointwise) {
    const sched::Phase &ph = k_.phases[0];
    flatLive_ = liveStmts(ph.body, &ph);
    if (planFlat(flatCtx_, flatLive_)) {
      plan_.shape = CpuShape::kFlat;
      return verified();
    }
    plan_.shape = CpuShape::kPointwiseRows;
    plan_.rowDims = mergeableTrailingDims(ph, flatLive_, k_.vars, k_.ranges, 1);
    return verified();
  }
  plan_.shape = window ? CpuShape::kWindowRows : CpuShape::kRows;
  for (const sched::Phase &ph : k_.phases) {
    // Trailing phase dims that every access walks in one proportion are one loop (an 8x8
    // window summed as one simd loop of 64); not with an arg reduction (a scalar loop).
    size_t nv = ph.vars.size();
    plan_.loopDims.push_back(
        nv >= 2 && !hasArgReduction(ph)
            ? mergeableTrailingDims(ph, liveStmts(ph.body, &ph), ph.vars, ph.ranges, 0)
            : std::min<size_t>(nv, 1));
  }
  if (window) COIL_TRY_STATUS(planWindowInterior());
  return verified();
}

Status CpuEmitter::verified() const {
  std::vector<size_t> phaseVars;
  for (const sched::Phase &ph : k_.phases) phaseVars.push_back(ph.vars.size());
  std::string broken = verifyCpuKernelPlan(plan_, k_.vars.size(), phaseVars);
  if (!broken.empty()) return Error::internal(kernelError(k_, "plan: " + broken));
  return okStatus();
}

/// The interior of a window kernel: where every clamped tap index (a window inside the padding)
/// equals its unclamped value, the taps are contiguous in the last outer dim and vectorize as
/// plain loads (no gathers). Planning each phase's offsets with the clamps taken off (declamp on
/// its loads, resolveClamps on the sizes its index statements compute) finds the clamps and the
/// bounds of that range (bounds_, at each point of the phase's window). The offsets are planned
/// again when the phases are printed; their hoisted names are numbered after these.
Status CpuEmitter::planWindowInterior() {
  declampVar_ = cname_[k_.vars.back()];
  declampOk_ = true;
  bounds_.clear();
  for (size_t pi = 0; pi < k_.phases.size(); ++pi) {
    const sched::Phase &ph = k_.phases[pi];
    curPhase_ = pi;
    LoopCtx ctx;
    if (!ph.vars.empty()) ctx.var = cname_[ph.vars.back()];
    std::vector<bool> live = liveStmts(ph.body, &ph);
    COIL_TRY_STATUS(planOffsets(ctx, ph.body, live, ph.stores));
    for (size_t i = 0; i < ph.body.stmts.size(); ++i) {
      const Stmt &s = ph.body.stmts[i];
      if (!live[i]) continue;
      const SymInt *size = s.kind == Stmt::Kind::Index           ? &s.expr
                           : s.kind == Stmt::Kind::IndirectIndex ? &s.extent
                                                                 : nullptr;
      if (!size) continue;
      SymInt e = simplify(renamed(*size), ranges_);
      if (s.kind == Stmt::Kind::Index && e.isConstant()) continue; // printed as a literal
      resolveClamps(e, declampVar_);
    }
  }
  declampVar_.clear();
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
      (bd.upper ? plan_.uppers : plan_.lowers).insert(text);
    }
  }
  plan_.interior = declampOk_ && !bounds_.empty();
  bounds_.clear();
  return okStatus();
}

/// The work per outer point of a kernel: each phase's inner points times its statements.
SymInt CpuEmitter::perPointWork() const {
  SymInt per(0);
  for (const sched::Phase &ph : k_.phases) {
    SymInt points(1);
    for (const SymInt &r : ph.ranges) points = points * r;
    per = per + points * SymInt(std::max<int64_t>(1, int64_t(ph.body.stmts.size())));
  }
  return per;
}

/// A kernel whose phases all walk small constant windows (pooling: 3x3 sums and maxima, with
/// their epilogues) runs as row segments of its last outer dim, vectorized across neighbouring
/// output points, each lane walking its window with unrolled loops; per outer point, a window
/// of 9 taps would leave the simd loop 9 lanes and a scalar epilogue. Not for arg reductions
/// (a position per lane) nor phases that store inside their loops; the stores at the outer
/// point must move with the last outer dim, so that lanes store to distinct elements.
bool CpuEmitter::isWindowKernel() {
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
    if (hasArgReduction(ph)) return false;
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

/// How many trailing dims of a pointwise kernel one row segment can walk as if they were one
/// dim (at least 1): those over which every load and store is contiguous in the same proportion
/// (a per-channel parameter over an H x W plane: independent of H and W; the activations: the
/// plane's flat index) and which no statement reads as a value. Short rows (7x7, 8x8 planes)
/// then vectorize over the whole plane instead of one row of 7 or 8 lanes at a time.
size_t CpuEmitter::mergeableTrailingDims(const sched::Phase &ph, const std::vector<bool> &live,
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

/// A pointwise kernel whose every access is either the row-major flat index of the outer space
/// (same shape, no broadcast or view) or independent of the outer point runs as one flat loop:
/// no row segments, no index decomposition. Fills ctx.offsets; false when not flat.
bool CpuEmitter::planFlat(LoopCtx &ctx, const std::vector<bool> &live) {
  const sched::Phase &ph = k_.phases[0];
  const FlatIndex fi = flatIndex();
  // The offset text of an access at `idx` (the flat index "f", or a constant offset), or
  // nullopt where it is neither (a load of another shape, a store not at f).
  auto offset = [&](NodeId node, const std::vector<SymInt> &idx,
                    bool isStore) -> std::optional<std::string> {
    SymInt lin;
    FlatAccess a = flatAccess(fi, node, idx, &lin);
    if (a == FlatAccess::Flat) return std::string(1, 'f');
    if (isStore || a == FlatAccess::Other) return std::nullopt;
    return lin.toCpp(ranges_);
  };
  for (size_t i = 0; i < ph.body.stmts.size(); ++i) {
    const Stmt &s = ph.body.stmts[i];
    if (!live[i]) continue;
    if (s.kind == Stmt::Kind::Index && fi.usesOuter(renamed(s.expr))) return false;
    if (s.kind != Stmt::Kind::Load) continue;
    std::optional<std::string> off = offset(s.node, s.index, false);
    if (!off) return false;
    ctx.offsets[&s] = *off;
  }
  for (const sched::Store &st : ph.stores) {
    std::optional<std::string> off = offset(st.node, st.index, true);
    if (!off) return false;
    ctx.offsets[&st] = *off;
    if (readSet_.count(st.node)) ctx.simd = false;
  }
  return true;
}

/// `e` with each min / max that moves with `v` replaced by `clamp(node)`, the sums and products
/// around them rebuilt; nullopt where `e` has another form that moves with v (a division, ...)
/// or `clamp` gives up.
std::optional<SymInt> CpuEmitter::mapClamps(const SymInt &e, const std::string &v,
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
std::optional<SymInt> CpuEmitter::declamp(const SymInt &e, const std::string &v) {
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
std::optional<SymInt> CpuEmitter::resolveClamps(const SymInt &e, const std::string &v) {
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

// --- the plan's invariants

std::string verifyCpuKernelPlan(const CpuKernelPlan &plan, size_t rank,
                                const std::vector<size_t> &phaseVars) {
  auto n = [](size_t v) { return std::to_string(v); };
  if (plan.blocks.empty()) return "no configs";
  for (int64_t b : plan.blocks)
    if (b < 1) return "a config of " + std::to_string(b) + " points per task";
  if (plan.parallelWork != kParallelWork && plan.parallelWork != kParallelWorkSimd)
    return "threads from " + std::to_string(plan.parallelWork) + " statements: not a policy";
  switch (plan.shape) {
  case CpuShape::kFlat:
    break;
  case CpuShape::kPointwiseRows:
    if (plan.rowDims < 1 || plan.rowDims + 1 > std::max<size_t>(rank, 2))
      return "row segments over " + n(plan.rowDims) + " of " + n(rank) + " dims";
    break;
  case CpuShape::kWindowRows:
  case CpuShape::kRows:
    if (plan.loopDims.size() != phaseVars.size())
      return n(plan.loopDims.size()) + " loop plans for " + n(phaseVars.size()) + " phases";
    for (size_t pi = 0; pi < phaseVars.size(); ++pi) {
      size_t d = plan.loopDims[pi], v = phaseVars[pi];
      bool rows = plan.shape == CpuShape::kRows;
      if (d > v || (rows && v > 0 && d == 0))
        return "phase " + n(pi) + ": " + n(d) + " of " + n(v) + " dims as one loop";
    }
    break;
  }
  if (plan.interior &&
      (plan.shape != CpuShape::kWindowRows || (plan.lowers.empty() && plan.uppers.empty())))
    return "an interior without bounds or outside a window kernel";
  return "";
}

} // namespace coil::codegen
