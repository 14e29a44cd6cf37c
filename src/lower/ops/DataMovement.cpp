// Lowering of the DataMovement family (see Ops.def). Rearrangements that are a fixed index map
// (Transpose, Split, Tile, Pad in edge/wrap/reflect mode, a crop) are views and copy nothing;
// the others are Pointwise nodes whose loads go through indirect indices (gathers) or pick
// between the input and a fill value with Select (Pad in constant mode, Trilu, ...). Scatters
// are Reductions over the update positions (see lowerScatterElements). The data-dependent ops
// (NonZero, Compress, Unique, NonMaxSuppression) are externs, in DataMovementDynamic.cpp;
// DepthToSpace / SpaceToDepth are Linalg ops (LinalgResize.cpp).
//
// The interpreter (interp/kernels/DataMovement*.cpp) is the reference for every rule here.
#include "kernels/cpu/CpuKernels.h"
#include "lower/Lower.h"
#include "lower/ops/DynShape.h"
#include "lower/ops/LinalgLower.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace coil::loop {
namespace {

using Idx = std::vector<SymInt>;

std::string opStr(const LowerContext &ctx) {
  return std::string(opName(ctx.gnode().op));
}

Expected<int64_t> normAxis(const LowerContext &ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return ctx.error("axis " + std::to_string(axis) + " of " + opStr(ctx) +
                     " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

/// The contents of integer input `i`, which the lowering needs at compile time.
Expected<std::vector<SymInt>> knownInts(const LowerContext &ctx, size_t i, const char *what) {
  auto v = ctx.intValue(i);
  if (!v)
    return ctx.error(std::string(what) + " (input " + std::to_string(i) + ") of " + opStr(ctx) +
                     " must be known at compile time to lower it");
  return *v;
}

Expected<std::vector<int64_t>> knownConstInts(const LowerContext &ctx, size_t i, const char *what) {
  COIL_TRY(std::vector<SymInt> v, knownInts(ctx, i, what));
  std::vector<int64_t> out;
  for (const SymInt &s : v) {
    if (!s.isConstant())
      return ctx.error(std::string(what) + " (input " + std::to_string(i) + ") of " + opStr(ctx) +
                       " must be constants to lower it, got " + s.str());
    out.push_back(s.constant());
  }
  return out;
}

/// Clamps `e` into [0, extent - 1] (for a load that a Select may discard).
SymInt clampIndex(const SymInt &e, const SymInt &extent) {
  return max(SymInt(0), min(e, extent - 1));
}

/// `lo <= e < hi` as a bool value.
Val inRange(BodyBuilder &b, const SymInt &e, const SymInt &lo, const SymInt &hi) {
  Val v = b.index(e);
  return b.op(ScalarOp::And, b.op(ScalarOp::Ge, v, b.index(lo)),
              b.op(ScalarOp::Lt, v, b.index(hi)));
}

/// Element 0 of a (rank 0 or 1) tensor.
Val loadFirst(BodyBuilder &b, const TensorRef &t) {
  return b.load(t, Idx(size_t(t.rank()), SymInt(0)));
}

/// The number 0 (or 1) of dtype t, exact for integers.
Val zeroOf(BodyBuilder &b, DType t, int64_t v = 0) {
  return isFloat(t) ? b.constant(t, double(v)) : b.intConstant(t, v);
}

// --- Transpose, Split, Tile

Status lowerTranspose(LowerContext &ctx) {
  TensorRef x = ctx.input(0);
  int64_t r = x.rank();
  std::vector<int64_t> perm;
  if (auto p = ctx.gnode().attrs.maybeInts("perm"))
    perm = *p;
  else
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  std::vector<bool> seen(size_t(r), false);
  bool ok = int64_t(perm.size()) == r;
  for (int64_t p : perm) {
    ok = ok && p >= 0 && p < r && !seen[size_t(p)];
    if (ok) seen[size_t(p)] = true;
  }
  if (!ok)
    return ctx.error("perm must be a permutation of 0.." + std::to_string(r - 1) + ", got " +
                     intsStr(perm));
  ctx.setOutput(0, ctx.permute(x, perm));
  return okStatus();
}

Status lowerSplit(LowerContext &ctx) {
  TensorRef x = ctx.input(0);
  if (x.rank() == 0) return ctx.error("input of Split must have rank >= 1");
  COIL_TRY(int64_t axis, normAxis(ctx, ctx.gnode().attrs.getInt("axis", 0), x.rank()));
  bool hasSplit =
      ctx.hasInput(1) && !(ctx.inputType(1).rank() == 1 && ctx.inputType(1).shape[0] == SymInt(0));
  std::vector<SymInt> sizes;
  if (hasSplit && !ctx.intValue(1)) {
    // Split read at run time: the size extern binds each output's size along the axis.
    auto sv = dynshape::inputElems(ctx, 1);
    if (!sv || sv->size() != ctx.numOutputs())
      return ctx.error("split (input 1) of Split must be a 1-D integer tensor of " +
                       std::to_string(ctx.numOutputs()) + " elements (one per output)");
    std::vector<SymInt> named;
    for (size_t i = 0; i < ctx.numOutputs(); ++i)
      named.push_back(ctx.outputType(i).shape.at(size_t(axis)));
    COIL_TRY(auto dd,
             dynshape::shapeDimsNamed(ctx, COIL_SHAPE_SPLIT, *sv, x.shape, named, 0, axis));
    sizes = dd.dims;
  }
  // The output types hold the sizes (from split, or equal chunks); outputs are slices.
  SymInt start = 0;
  for (size_t i = 0; i < ctx.numOutputs(); ++i) {
    std::vector<SymInt> shape = ctx.outputType(i).shape;
    if (!sizes.empty()) shape[size_t(axis)] = sizes[i];
    SymInt off = start;
    ctx.setOutput(i, ctx.view(x, shape, [axis, off](const Idx &idx) {
      Idx src = idx;
      src[size_t(axis)] = idx[size_t(axis)] + off;
      return src;
    }));
    start = start + shape[size_t(axis)];
  }
  return okStatus();
}

Status lowerTile(LowerContext &ctx) {
  TensorRef x = ctx.input(0);
  std::vector<SymInt> shape = ctx.outputType(0).shape;
  if (ctx.hasInput(1) && !ctx.intValue(1)) {
    // Repeats read at run time: the size extern computes the output dims.
    auto reps = dynshape::inputElems(ctx, 1);
    if (!reps || int64_t(reps->size()) != x.rank())
      return ctx.error("repeats of Tile must be a 1-D integer tensor of " +
                       std::to_string(x.rank()) + " elements (the rank of input)");
    COIL_TRY(auto dd, dynshape::shapeDims(ctx, COIL_SHAPE_TILE, *reps, x.shape, 0, 0, 0));
    shape = dd.dims;
  } else {
    COIL_TRY(std::vector<SymInt> reps, knownInts(ctx, 1, "repeats"));
    if (int64_t(reps.size()) != x.rank())
      return ctx.error("repeats must have " + std::to_string(x.rank()) +
                       " elements (the rank of input), got " + std::to_string(reps.size()));
  }
  std::vector<SymInt> in = x.shape;
  ctx.setOutput(0, ctx.view(x, shape, [in](const Idx &idx) {
    Idx src;
    for (size_t d = 0; d < idx.size(); ++d)
      src.push_back(in[d] == SymInt(1) ? SymInt(0) : floorMod(idx[d], in[d]));
    return src;
  }));
  return okStatus();
}

// --- Pad, CenterCropPad

Status lowerPad(LowerContext &ctx) {
  const coil::Node &n = ctx.gnode();
  TensorRef x = ctx.input(0);
  int64_t r = x.rank();
  COIL_TRY(PadMode mode, decodePadMode(n));
  std::vector<int64_t> axes;
  std::vector<SymInt> pads;
  std::optional<std::vector<SymInt>> dynShape;
  bool runTimeAxes = ctx.hasInput(3) && !knownConstInts(ctx, 3, "axes").ok();
  if ((ctx.hasInput(1) && !ctx.intValue(1)) || runTimeAxes) {
    // Pads or axes read at run time: the size extern binds every dim's begin and end pad and
    // output size (checking them), and the lowering below works on those symbols.
    auto pv = dynshape::inputElems(ctx, 1);
    std::optional<std::vector<dynshape::ElemFn>> av;
    if (ctx.hasInput(3)) {
      av = dynshape::inputElems(ctx, 3);
    } else {
      av.emplace();
      for (int64_t i = 0; i < r; ++i) av->push_back(dynshape::constElem(i));
    }
    if (!pv || !av || pv->size() != 2 * av->size())
      return ctx.error("pads and axes of Pad must be 1-D integer tensors of known lengths, pads "
                       "2 per axis");
    std::vector<dynshape::ElemFn> vals = *pv;
    vals.insert(vals.end(), av->begin(), av->end());
    COIL_TRY(auto dd, dynshape::shapeDims(ctx, COIL_SHAPE_PAD, vals, x.shape, 0, 2 * r,
                                          mode == PadMode::Constant ? 0 : 1));
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
    pads = dd.extra;
    dynShape = dd.dims;
  } else {
    if (ctx.hasInput(3)) {
      COIL_TRY(std::vector<int64_t> listed, knownConstInts(ctx, 3, "axes"));
      COIL_TRY(axes, distinctAxes(listed, r));
    } else {
      for (int64_t i = 0; i < r; ++i) axes.push_back(i);
    }
    if (ctx.hasInput(1)) {
      COIL_TRY(pads, knownInts(ctx, 1, "pads"));
    } else {
      for (int64_t p : n.attrs.getInts("pads")) pads.push_back(p);
    }
  }
  COIL_TRY(PadSpread<SymInt> spread, spreadPads(pads, axes, r));
  const std::vector<SymInt> &begin = spread.begin, &end = spread.end;
  // Negative pads crop first: the kept region of dim d is [cropBegin, cropBegin + len) of x;
  // output coordinate o reads the kept region at c = o - padBegin, mapped by the mode.
  std::vector<SymInt> cropBegin, len, padBegin;
  for (size_t d = 0; d < size_t(r); ++d) {
    cropBegin.push_back(max(SymInt(0), -begin[d]));
    len.push_back(x.shape[d] - cropBegin[d] - max(SymInt(0), -end[d]));
    padBegin.push_back(max(SymInt(0), begin[d]));
  }
  std::vector<SymInt> shape = dynShape ? *dynShape : ctx.outputType(0).shape;
  auto padded = [&](size_t d) { return begin[d] != SymInt(0) || end[d] != SymInt(0); };
  if (mode != PadMode::Constant) {
    for (size_t d = 0; d < size_t(r); ++d)
      if (padded(d) && len[d].isConstant() && len[d].constant() == 0 &&
          !(shape[d].isConstant() && shape[d].constant() == 0))
        return ctx.error("mode '" + std::string(padModeName(mode)) + "' of Pad cannot pad dim " +
                         std::to_string(d) + ", which is empty");
    ctx.setOutput(0, ctx.view(x, shape, [&](const Idx &idx) {
      Idx src;
      for (size_t d = 0; d < idx.size(); ++d) {
        SymInt c = idx[d] - padBegin[d], s;
        if (!padded(d))
          s = c;
        else if (mode == PadMode::Edge)
          s = clampIndex(c, len[d]);
        else if (mode == PadMode::Wrap)
          s = floorMod(c, len[d]);
        else { // reflect: period 2 * (len - 1), the second half mirrored (len 1: always 0)
          SymInt p = max(2 * (len[d] - 1), SymInt(1));
          SymInt m = floorMod(c, p);
          s = min(m, p - m);
        }
        src.push_back(s + cropBegin[d]);
      }
      return src;
    }));
    return okStatus();
  }
  // Constant: the fill value where a coordinate falls outside the kept region. A dim whose pads
  // are both <= 0 is only cropped (no fill): when every dim is, the Pad is a view.
  const SymRanges &ranges = ctx.program().symbols;
  auto fills = [&](size_t d) {
    return padded(d) && !(proveLE(begin[d], 0, ranges) && proveLE(end[d], 0, ranges));
  };
  bool anyFill = false;
  for (size_t d = 0; d < size_t(r); ++d) anyFill = anyFill || fills(d);
  if (!anyFill) {
    ctx.setOutput(0, ctx.view(x, shape, [&](const Idx &idx) {
      Idx src;
      for (size_t d = 0; d < idx.size(); ++d) src.push_back(idx[d] + cropBegin[d]);
      return src;
    }));
    return okStatus();
  }
  std::optional<TensorRef> fillT;
  double fillAttr = 0;
  if (ctx.hasInput(2) && !(ctx.inputType(2).rank() == 1 && ctx.inputType(2).shape[0] == SymInt(0)))
    fillT = ctx.input(2);
  else if (!ctx.hasInput(1))
    fillAttr = n.attrs.getFloat("value", 0.0);
  DType t = x.dtype;
  ctx.setOutput(0, ctx.pointwise(t, shape, [&](BodyBuilder &b, const Idx &idx) {
    Idx src;
    Val in = kNoVal;
    for (size_t d = 0; d < idx.size(); ++d) {
      if (!fills(d)) {
        src.push_back(idx[d] + cropBegin[d]);
        continue;
      }
      SymInt c = idx[d] - padBegin[d];
      src.push_back(clampIndex(c, len[d]) + cropBegin[d]);
      Val ok = inRange(b, c, 0, len[d]);
      in = in == kNoVal ? ok : b.op(ScalarOp::And, in, ok);
    }
    Val v = b.load(x, src);
    Val fill =
        fillT ? b.cast(loadFirst(b, *fillT), t) : b.cast(b.constant(DType::F64, fillAttr), t);
    return b.op(ScalarOp::Select, in, v, fill);
  }));
  return okStatus();
}

/// trunc(a / 2) (toward zero), from floor divisions.
SymInt truncHalf(const SymInt &a) {
  return floorDiv(max(a, SymInt(0)), 2) - floorDiv(max(-a, SymInt(0)), 2);
}

Status lowerCenterCropPad(LowerContext &ctx) {
  TensorRef x = ctx.input(0);
  int64_t r = x.rank();
  COIL_TRY(std::vector<int64_t> axes, decodeCenterCropAxes(ctx.gnode(), r));
  std::vector<SymInt> shape = ctx.outputType(0).shape;
  if (!ctx.intValue(1)) {
    // Sizes read at run time: the size extern binds the output dims.
    auto sv = dynshape::inputElems(ctx, 1);
    if (!sv || sv->size() != axes.size())
      return ctx.error("shape (input 1) of CenterCropPad must be a 1-D integer tensor of " +
                       std::to_string(axes.size()) + " elements (one per axis)");
    std::vector<dynshape::ElemFn> vals = *sv;
    for (int64_t a : axes) vals.push_back(dynshape::constElem(a));
    COIL_TRY(auto dd, dynshape::shapeDims(ctx, COIL_SHAPE_CENTER_CROP_PAD, vals, x.shape, 0, 0, 0));
    shape = dd.dims;
  }
  // Input coordinate = output coordinate + shift; a centered crop shifts by (dim - size) / 2,
  // a centered pad by -((size - dim) / 2): both are trunc((dim - size) / 2).
  std::vector<SymInt> shift(size_t(r), 0);
  bool cropOnly = true;
  const SymRanges &ranges = ctx.program().symbols;
  for (int64_t d : axes) {
    shift[size_t(d)] = truncHalf(x.shape[size_t(d)] - shape[size_t(d)]);
    cropOnly = cropOnly && proveLE(shape[size_t(d)], x.shape[size_t(d)], ranges);
  }
  if (cropOnly) {
    ctx.setOutput(0, ctx.view(x, shape, [&](const Idx &idx) {
      Idx src;
      for (size_t d = 0; d < idx.size(); ++d) src.push_back(idx[d] + shift[d]);
      return src;
    }));
    return okStatus();
  }
  DType t = x.dtype;
  ctx.setOutput(0, ctx.pointwise(t, shape, [&](BodyBuilder &b, const Idx &idx) {
    Idx src;
    Val in = kNoVal;
    for (size_t d = 0; d < idx.size(); ++d) {
      SymInt s = idx[d] + shift[d];
      if (shift[d] == SymInt(0) && shape[d] == x.shape[d]) {
        src.push_back(s);
        continue;
      }
      src.push_back(clampIndex(s, x.shape[d]));
      Val ok = inRange(b, s, 0, x.shape[d]);
      in = in == kNoVal ? ok : b.op(ScalarOp::And, in, ok);
    }
    Val v = b.load(x, src);
    if (in == kNoVal) return v;
    return b.op(ScalarOp::Select, in, v, zeroOf(b, t));
  }));
  return okStatus();
}

// --- GatherElements, GatherND

Status lowerGatherElements(LowerContext &ctx) {
  TensorRef x = ctx.input(0), ind = ctx.input(1);
  if (x.rank() == 0) return ctx.error("data of GatherElements must have rank >= 1");
  if (ind.rank() != x.rank())
    return ctx.error("indices of GatherElements must have the rank of data (" +
                     std::to_string(x.rank()) + "), got rank " + std::to_string(ind.rank()));
  COIL_TRY(int64_t axis, normAxis(ctx, ctx.gnode().attrs.getInt("axis", 0), x.rank()));
  ctx.setOutput(0, ctx.pointwise(x.dtype, ind.shape, [&](BodyBuilder &b, const Idx &idx) {
    Val i = b.cast(b.load(ind, idx), DType::I64);
    Idx src = idx;
    src[size_t(axis)] = b.indirect(i, x.shape[size_t(axis)]);
    return b.load(x, src);
  }));
  return okStatus();
}

Status lowerGatherND(LowerContext &ctx) {
  TensorRef x = ctx.input(0), ind = ctx.input(1);
  int64_t bd = ctx.gnode().attrs.getInt("batch_dims", 0);
  int64_t r = x.rank(), q = ind.rank();
  if (bd < 0 || bd >= std::min(r, q))
    return ctx.error("batch_dims of GatherND must be in [0, " + std::to_string(std::min(r, q) - 1) +
                     "], got " + std::to_string(bd));
  auto mc = ind.shape.back().maybeConstant();
  if (!mc || *mc < 1 || *mc > r - bd)
    return ctx.error("the last dim of indices of GatherND must be a constant in [1, " +
                     std::to_string(r - bd) + "], got " + ind.shape.back().str());
  int64_t m = *mc;
  ctx.setOutput(
      0, ctx.pointwise(x.dtype, ctx.outputType(0).shape, [&](BodyBuilder &b, const Idx &idx) {
        // idx = [batch dims (bd), tuple dims (q - 1 - bd), slice dims (r - bd - m)].
        Idx ti(idx.begin(), idx.begin() + (q - 1));
        Idx src(idx.begin(), idx.begin() + bd);
        ti.push_back(0);
        for (int64_t j = 0; j < m; ++j) {
          ti.back() = j;
          Val v = b.cast(b.load(ind, ti), DType::I64);
          src.push_back(b.indirect(v, x.shape[size_t(bd + j)]));
        }
        src.insert(src.end(), idx.begin() + (q - 1), idx.end());
        return b.load(x, src);
      }));
  return okStatus();
}

// --- ScatterElements, Scatter, ScatterND

enum class Combine { None, Add, Mul, Max, Min };

Expected<Combine> parseCombine(const LowerContext &ctx) {
  std::string r = ctx.gnode().attrs.getString("reduction", "none");
  if (r == "none") return Combine::None;
  if (r == "add") return Combine::Add;
  if (r == "mul") return Combine::Mul;
  if (r == "max") return Combine::Max;
  if (r == "min") return Combine::Min;
  return ctx.error("reduction of " + opStr(ctx) +
                   " must be one of none, add, mul, max, min, got '" + r + "'");
}

/// The lowest (or highest) finite-or-infinite value of t, the identity of max (min).
Val extremeOf(BodyBuilder &b, DType t, bool lowest) {
  if (isFloat(t))
    return b.constant(t, lowest ? -std::numeric_limits<double>::infinity()
                                : std::numeric_limits<double>::infinity());
  if (isUnsigned(t)) return b.intConstant(t, lowest ? 0 : -1); // -1: all ones
  int bits = int(dtypeSize(t)) * 8;
  int64_t hi = bits == 64 ? std::numeric_limits<int64_t>::max() : (int64_t(1) << (bits - 1)) - 1;
  return b.intConstant(t, lowest ? -hi - 1 : hi);
}

/// A scatter as a Reduction: for every output element p, fold over every update position u
/// (rranges) whether u targets p (`hits`) and its value (`update`). With reduction none the
/// result is the last update that targets p (an ArgMax of the hit flag, last index wins, then
/// a pointwise that re-checks the hit); otherwise the sum / product / max / min of the hitting
/// updates combined with the data. Cost: O(numel(data) * number of updates), fine for the
/// small index tensors this serves; large scatters want an extern.
struct ScatterSpec {
  std::vector<SymInt> rranges;
  /// hit(b, p, u): bool; update(b, p, u): the value (x's dtype); both may use indirect loads.
  std::function<Val(BodyBuilder &, const Idx &, const Idx &)> hit, update;
};

Status lowerScatterWith(LowerContext &ctx, const ScatterSpec &sp, Combine comb) {
  TensorRef x = ctx.input(0);
  DType t = x.dtype;
  const std::vector<SymInt> &shape = x.shape;
  if (comb == Combine::None) {
    // The flat position of the last hitting update (or of the last position when none hits).
    std::vector<SymInt> strides(sp.rranges.size(), 1);
    for (size_t i = sp.rranges.size(); i-- > 1;) strides[i - 1] = strides[i] * sp.rranges[i];
    TensorRef last = ctx.reduce(
        ReduceKind::ArgMax, DType::I64, DType::Bool, shape, sp.rranges,
        [&](BodyBuilder &b, const Idx &o, const Idx &r, Val *pos) {
          SymInt flat = 0;
          for (size_t i = 0; i < r.size(); ++i) flat = flat + r[i] * strides[i];
          *pos = b.index(flat);
          return sp.hit(b, o, r);
        },
        /*selectLast=*/true, "last");
    SymInt total = 1;
    for (const SymInt &s : sp.rranges) total = total * s;
    ctx.setOutput(0, ctx.pointwise(t, shape, [&](BodyBuilder &b, const Idx &p) {
      Val v = b.load(x, p);
      if (total.isConstant() && total.constant() == 0) return v;
      SymInt f = b.indirect(b.load(last, p), total);
      Idx u;
      for (size_t i = 0; i < sp.rranges.size(); ++i)
        u.push_back(sp.rranges.size() == 1 ? f : floorMod(floorDiv(f, strides[i]), sp.rranges[i]));
      return b.op(ScalarOp::Select, sp.hit(b, p, u), sp.update(b, p, u), v);
    }));
    return okStatus();
  }
  DType acc = t == DType::F16 || t == DType::BF16 ? DType::F32 : t;
  ReduceKind k = ReduceKind::Sum;
  if (t == DType::Bool)
    k = comb == Combine::Add || comb == Combine::Max ? ReduceKind::Any : ReduceKind::All;
  else if (comb == Combine::Mul)
    k = ReduceKind::Prod;
  else if (comb == Combine::Max)
    k = ReduceKind::Max;
  else if (comb == Combine::Min)
    k = ReduceKind::Min;
  TensorRef red = ctx.reduce(
      k, acc, acc, shape, sp.rranges,
      [&](BodyBuilder &b, const Idx &o, const Idx &r, Val *) {
        Val id;
        if (t == DType::Bool)
          id = b.intConstant(DType::Bool, k == ReduceKind::All ? 1 : 0);
        else if (comb == Combine::Add)
          id = zeroOf(b, acc, 0);
        else if (comb == Combine::Mul)
          id = zeroOf(b, acc, 1);
        else
          id = extremeOf(b, acc, comb == Combine::Max);
        return b.op(ScalarOp::Select, sp.hit(b, o, r), b.cast(sp.update(b, o, r), acc), id);
      },
      false, "scatter");
  ctx.setOutput(0, ctx.pointwise(t, shape, [&](BodyBuilder &b, const Idx &p) {
    Val v = b.cast(b.load(x, p), acc), u = b.load(red, p);
    ScalarOp op = ScalarOp::Add;
    if (t == DType::Bool)
      op = k == ReduceKind::Any ? ScalarOp::Or : ScalarOp::And;
    else if (comb == Combine::Mul)
      op = ScalarOp::Mul;
    else if (comb == Combine::Max)
      op = ScalarOp::Max;
    else if (comb == Combine::Min)
      op = ScalarOp::Min;
    return b.cast(b.op(op, v, u), t);
  }));
  return okStatus();
}

Status lowerScatterElements(LowerContext &ctx) {
  TensorRef x = ctx.input(0), ind = ctx.input(1), upd = ctx.input(2);
  COIL_TRY(Combine comb, parseCombine(ctx));
  if (x.rank() == 0 || ind.rank() != x.rank())
    return ctx.error("indices of " + opStr(ctx) + " must have the rank of data (" +
                     std::to_string(x.rank()) + "), got rank " + std::to_string(ind.rank()));
  COIL_TRY(int64_t axis, normAxis(ctx, ctx.gnode().attrs.getInt("axis", 0), x.rank()));
  SymInt dim = x.shape[size_t(axis)];
  ScatterSpec sp;
  sp.rranges = ind.shape;
  // Update u targets p when u and p agree off the axis and indices[u] (wrapped) is p[axis].
  sp.hit = [&, axis, dim](BodyBuilder &b, const Idx &p, const Idx &u) {
    Val i = b.cast(b.load(ind, u), DType::I64);
    Val neg = b.op(ScalarOp::Lt, i, b.intConstant(DType::I64, 0));
    i = b.op(ScalarOp::Select, neg, b.op(ScalarOp::Add, i, b.index(dim)), i);
    Val h = b.op(ScalarOp::Eq, i, b.index(p[size_t(axis)]));
    for (size_t d = 0; d < p.size(); ++d)
      if (int64_t(d) != axis)
        h = b.op(ScalarOp::And, h, b.op(ScalarOp::Eq, b.index(u[d]), b.index(p[d])));
    return h;
  };
  sp.update = [&](BodyBuilder &b, const Idx &, const Idx &u) { return b.load(upd, u); };
  return lowerScatterWith(ctx, sp, comb);
}

Status lowerScatterND(LowerContext &ctx) {
  TensorRef x = ctx.input(0), ind = ctx.input(1), upd = ctx.input(2);
  COIL_TRY(Combine comb, parseCombine(ctx));
  if (ind.rank() < 1) return ctx.error("indices of ScatterND must have rank >= 1");
  auto kc = ind.shape.back().maybeConstant();
  if (!kc || *kc < 1 || *kc > x.rank())
    return ctx.error("the last dim of indices of ScatterND must be a constant in [1, " +
                     std::to_string(x.rank()) + "], got " + ind.shape.back().str());
  int64_t k = *kc;
  ScatterSpec sp;
  sp.rranges.assign(ind.shape.begin(), ind.shape.end() - 1);
  // Tuple u targets the slice of p when indices[u, j] (wrapped) == p[j] for every j < k.
  sp.hit = [&, k](BodyBuilder &b, const Idx &p, const Idx &u) {
    Idx ti = u;
    ti.push_back(0);
    Val h = kNoVal;
    for (int64_t j = 0; j < k; ++j) {
      ti.back() = j;
      Val i = b.cast(b.load(ind, ti), DType::I64);
      Val neg = b.op(ScalarOp::Lt, i, b.intConstant(DType::I64, 0));
      i = b.op(ScalarOp::Select, neg, b.op(ScalarOp::Add, i, b.index(x.shape[size_t(j)])), i);
      Val e = b.op(ScalarOp::Eq, i, b.index(p[size_t(j)]));
      h = h == kNoVal ? e : b.op(ScalarOp::And, h, e);
    }
    return h;
  };
  sp.update = [&, k](BodyBuilder &b, const Idx &p, const Idx &u) {
    Idx ui = u;
    ui.insert(ui.end(), p.begin() + k, p.end());
    return b.load(upd, ui);
  };
  return lowerScatterWith(ctx, sp, comb);
}

// --- TensorScatter

Status lowerTensorScatter(LowerContext &ctx) {
  const coil::Node &n = ctx.gnode();
  TensorRef cache = ctx.input(0), upd = ctx.input(1);
  int64_t r = cache.rank();
  if (r < 2)
    return ctx.error("past_cache of TensorScatter must have rank >= 2, got rank " +
                     std::to_string(r));
  COIL_TRY(int64_t axis, normAxis(ctx, n.attrs.getInt("axis", -2), r));
  if (axis == 0) return ctx.error("axis of TensorScatter must not be the batch axis 0");
  std::string mode = n.attrs.getString("mode", "linear");
  if (mode != "linear" && mode != "circular")
    return ctx.error("mode of TensorScatter must be 'linear' or 'circular', got '" + mode + "'");
  std::optional<TensorRef> writeAt;
  if (ctx.hasInput(2)) writeAt = ctx.input(2);
  SymInt maxLen = cache.shape[size_t(axis)], len = upd.shape[size_t(axis)];
  if (len == SymInt(0)) {
    ctx.setOutput(0, cache);
    return okStatus();
  }
  // Output position pos of row b holds update[pos - write_indices[b]] when that is in
  // [0, len) (modulo maxLen in circular mode), else the cache.
  ctx.setOutput(0, ctx.pointwise(cache.dtype, cache.shape, [&](BodyBuilder &b, const Idx &p) {
    Val u = b.index(p[size_t(axis)]);
    if (writeAt) u = b.op(ScalarOp::Sub, u, b.cast(b.load(*writeAt, {p[0]}), DType::I64));
    if (mode == "circular") u = b.op(ScalarOp::Mod, u, b.index(maxLen));
    Val in = b.op(ScalarOp::And, b.op(ScalarOp::Ge, u, b.intConstant(DType::I64, 0)),
                  b.op(ScalarOp::Lt, u, b.index(len)));
    Idx ui = p;
    ui[size_t(axis)] = b.indirect(u, len, /*wrapNegative=*/false);
    return b.op(ScalarOp::Select, in, b.load(upd, ui), b.load(cache, p));
  }));
  return okStatus();
}

// --- Trilu, EyeLike, OneHot, ReverseSequence

Status lowerTrilu(LowerContext &ctx) {
  TensorRef x = ctx.input(0);
  int64_t r = x.rank();
  if (r < 2) return ctx.error("input of Trilu must have rank >= 2, got rank " + std::to_string(r));
  std::optional<TensorRef> kT;
  if (ctx.hasInput(1)) kT = ctx.input(1);
  bool upper = ctx.gnode().attrs.getInt("upper", 1) != 0;
  ctx.setOutput(0, ctx.pointwise(x.dtype, x.shape, [&](BodyBuilder &b, const Idx &idx) {
    Val diff = b.index(idx[size_t(r - 1)] - idx[size_t(r - 2)]);
    Val k = kT ? b.cast(loadFirst(b, *kT), DType::I64) : b.intConstant(DType::I64, 0);
    Val keep = b.op(upper ? ScalarOp::Ge : ScalarOp::Le, diff, k);
    return b.op(ScalarOp::Select, keep, b.load(x, idx), zeroOf(b, x.dtype));
  }));
  return okStatus();
}

Status lowerEyeLike(LowerContext &ctx) {
  const TensorType &xt = ctx.inputType(0);
  if (xt.rank() != 2)
    return ctx.error("input of EyeLike must have rank 2, got rank " + std::to_string(xt.rank()));
  int64_t k = ctx.gnode().attrs.getInt("k", 0);
  const TensorType &ot = ctx.outputType(0);
  ctx.setOutput(0, ctx.pointwise(ot.dtype, ot.shape, [&](BodyBuilder &b, const Idx &idx) {
    Val on = b.op(ScalarOp::Eq, b.index(idx[1]), b.index(idx[0] + k));
    return b.op(ScalarOp::Select, on, zeroOf(b, ot.dtype, 1), zeroOf(b, ot.dtype, 0));
  }));
  return okStatus();
}

Status lowerOneHot(LowerContext &ctx) {
  TensorRef ind = ctx.input(0), values = ctx.input(2);
  TensorType ot = ctx.outputType(0);
  int64_t r = ind.rank();
  int64_t axis = ctx.gnode().attrs.getInt("axis", -1);
  if (axis < -r - 1 || axis > r)
    return ctx.error("axis " + std::to_string(axis) +
                     " of OneHot is out of range for output rank " + std::to_string(r + 1));
  if (axis < 0) axis += r + 1;
  if (!ctx.intValue(1) && !ctx.constant(1)) {
    // Depth read at run time (a float depth rounds up, as in the interpreter): the size extern
    // binds it, rejecting depths below 1.
    TensorRef dt = ctx.input(1);
    if (dt.rank() > 1 || (dt.rank() == 1 && dt.shape[0] != SymInt(1)) || dt.dtype == DType::Bool)
      return ctx.error("depth (input 1) of OneHot must be a numeric scalar");
    dynshape::ElemFn depthElem = dynshape::loadElem(dt, 0);
    if (isFloat(dt.dtype))
      depthElem = [dt](BodyBuilder &b) {
        Idx at(dt.shape.size(), SymInt(0));
        Val v = b.op(ScalarOp::Ceil, b.cast(b.load(dt, at), DType::F64));
        // Outside [1, 2^62] (or NaN): 0, which the extern rejects; the cast stays in range.
        Val ok = b.op(ScalarOp::And, b.op(ScalarOp::Ge, v, b.constant(DType::F64, 1)),
                      b.op(ScalarOp::Le, v, b.constant(DType::F64, 4611686018427387904.0)));
        return b.cast(b.op(ScalarOp::Select, ok, v, b.constant(DType::F64, 0)), DType::I64);
      };
    COIL_TRY(auto dd,
             dynshape::shapeDims(ctx, COIL_SHAPE_ONE_HOT, {depthElem}, ind.shape, 0, 0, axis));
    ot.shape = dd.dims;
  }
  SymInt depth = ot.shape[size_t(axis)];
  bool floatIdx = isFloat(ind.dtype);
  ctx.setOutput(0, ctx.pointwise(ot.dtype, ot.shape, [&](BodyBuilder &b, const Idx &idx) {
    Idx src = idx;
    src.erase(src.begin() + axis);
    DType ct = floatIdx ? DType::F64 : DType::I64;
    Val v = b.cast(b.load(ind, src), ct);
    Val neg = b.op(ScalarOp::Lt, v, zeroOf(b, ct));
    v = b.op(ScalarOp::Select, neg, b.op(ScalarOp::Add, v, b.index(depth, ct)), v);
    // Equality with the position also requires an integral float index in [0, depth).
    Val hot = b.op(ScalarOp::Eq, v, b.index(idx[size_t(axis)], ct));
    return b.op(ScalarOp::Select, hot, b.load(values, {1}), b.load(values, {0}));
  }));
  return okStatus();
}

Status lowerReverseSequence(LowerContext &ctx) {
  const coil::Node &n = ctx.gnode();
  TensorRef x = ctx.input(0), lens = ctx.input(1);
  if (x.rank() < 2)
    return ctx.error("input of ReverseSequence must have rank >= 2, got rank " +
                     std::to_string(x.rank()));
  int64_t ba = n.attrs.getInt("batch_axis", 1), ta = n.attrs.getInt("time_axis", 0);
  if (!((ba == 0 && ta == 1) || (ba == 1 && ta == 0)))
    return ctx.error("batch_axis and time_axis of ReverseSequence must be 0 and 1 in some order, "
                     "got " +
                     std::to_string(ba) + " and " + std::to_string(ta));
  SymInt steps = x.shape[size_t(ta)];
  ctx.setOutput(0, ctx.pointwise(x.dtype, x.shape, [&](BodyBuilder &b, const Idx &idx) {
    Val t = b.index(idx[size_t(ta)]);
    Val l = b.cast(b.load(lens, {idx[size_t(ba)]}), DType::I64);
    Val rev = b.op(ScalarOp::Sub, b.op(ScalarOp::Sub, l, b.intConstant(DType::I64, 1)), t);
    Val s = b.op(ScalarOp::Select, b.op(ScalarOp::Lt, t, l), rev, t);
    Idx src = idx;
    src[size_t(ta)] = b.indirect(s, steps, /*wrapNegative=*/false);
    return b.load(x, src);
  }));
  return okStatus();
}

// --- Windows

enum class Window { Blackman, Hamming, Hann };

template <Window W> Status lowerWindow(LowerContext &ctx) {
  TensorType ot = ctx.outputType(0);
  if (!ctx.intValue(0)) {
    // Size read at run time: the size extern binds it (>= 0).
    auto sv = dynshape::inputElems(ctx, 0);
    if (!sv || sv->size() != 1)
      return ctx.error("size (input 0) of " + opStr(ctx) + " must be an integer scalar");
    COIL_TRY(auto dd, dynshape::shapeDims(ctx, COIL_SHAPE_CONSTANT_OF_SHAPE, *sv, {}, 0, 0, 0));
    ot.shape = dd.dims;
  }
  bool periodic = ctx.gnode().attrs.getInt("periodic", 1) != 0;
  SymInt size = ot.shape[0];
  ctx.setOutput(0, ctx.pointwise(ot.dtype, ot.shape, [&](BodyBuilder &b, const Idx &idx) {
    const DType f = DType::F64;
    const double pi = 3.14159265358979323846;
    Val t = b.op(ScalarOp::Div, b.index(idx[0], f), b.index(periodic ? size : size - 1, f));
    auto cosOf = [&](double k) {
      return b.op(ScalarOp::Cos, b.op(ScalarOp::Mul, b.constant(f, k * pi), t));
    };
    Val v;
    if constexpr (W == Window::Blackman)
      v = b.op(ScalarOp::Add,
               b.op(ScalarOp::Sub, b.constant(f, 0.42),
                    b.op(ScalarOp::Mul, b.constant(f, 0.5), cosOf(2))),
               b.op(ScalarOp::Mul, b.constant(f, 0.08), cosOf(4)));
    else if constexpr (W == Window::Hamming)
      v = b.op(ScalarOp::Sub, b.constant(f, 25.0 / 46.0),
               b.op(ScalarOp::Mul, b.constant(f, 21.0 / 46.0), cosOf(2)));
    else {
      Val s = b.op(ScalarOp::Sin, b.op(ScalarOp::Mul, b.constant(f, pi), t));
      v = b.op(ScalarOp::Mul, s, s);
    }
    return b.cast(v, ot.dtype);
  }));
  return okStatus();
}

} // namespace

void registerDataMovementLowerings(LowerRegistry &r) {
  r.add(OpKind::Transpose, lowerTranspose);
  r.add(OpKind::Split, lowerSplit);
  r.add(OpKind::Tile, lowerTile);
  r.add(OpKind::Pad, lowerPad);
  r.add(OpKind::CenterCropPad, lowerCenterCropPad);
  r.add(OpKind::GatherElements, lowerGatherElements);
  r.add(OpKind::GatherND, lowerGatherND);
  r.add(kScatterElementsOps, lowerScatterElements);
  r.add(OpKind::ScatterND, lowerScatterND);
  r.add(OpKind::TensorScatter, lowerTensorScatter);
  r.add(OpKind::Trilu, lowerTrilu);
  r.add(OpKind::EyeLike, lowerEyeLike);
  r.add(OpKind::OneHot, lowerOneHot);
  r.add(OpKind::ReverseSequence, lowerReverseSequence);
  r.add(OpKind::BlackmanWindow, lowerWindow<Window::Blackman>);
  r.add(OpKind::HammingWindow, lowerWindow<Window::Hamming>);
  r.add(OpKind::HannWindow, lowerWindow<Window::Hann>);
  linalg::registerDataMovementDynamicLowerings(r);
}

} // namespace coil::loop
