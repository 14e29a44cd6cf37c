// Lowering of the ShapeOps family (see Ops.def). Reshape, Flatten, Squeeze, Unsqueeze, Expand
// and Slice are views (no node); Concat and Gather are Pointwise nodes; Shape, Size, Range,
// ConstantOfShape and Constant compute their values from index expressions. Semantics follow
// interp/kernels/ShapeOps.cpp; output shapes are the inferred ones.
#include "ir/Infer.h"
#include "ir/OpAttrs.h"
#include "ir/infer/ShapeOpsHelpers.h"
#include "kernels/cpu/CpuKernels.h"
#include "lower/Lower.h"
#include "lower/ops/DynShape.h"

#include <set>

namespace coil::loop {
namespace {

using Idx = std::vector<SymInt>;

Status needInputs(LowerContext &ctx, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!ctx.hasInput(i))
      return ctx.error(std::string(opName(ctx.gnode().op)) + " needs input " + std::to_string(i));
  return okStatus();
}

/// The symbols known before the program runs its nodes: those of the inputs' shapes, and the
/// data-dependent ones that extern calls lowered so far define.
std::set<std::string> boundSymbols(LowerContext &ctx) {
  std::set<std::string> s;
  const LoopProgram &p = ctx.program();
  for (NodeId i : p.inputs)
    for (const SymInt &d : p.nodes[size_t(i)].shape) d.collectSymbols(s);
  for (const Node &n : p.nodes)
    if (const auto *e = std::get_if<ExternNode>(&n.kind))
      for (const ExternArg &a : e->args)
        if (a.kind == ExternArg::Kind::OutSymbol) s.insert(a.symbol);
  return s;
}

/// Output `i`'s inferred shape, checked to depend only on sizes known when the node runs (a
/// shape computed from tensor data at run time cannot be lowered to a view or a loop).
Expected<std::vector<SymInt>> staticOutputShape(LowerContext &ctx, size_t i, const char *what) {
  const std::vector<SymInt> &shape = ctx.outputType(i).shape;
  std::set<std::string> used;
  for (const SymInt &d : shape) d.collectSymbols(used);
  if (used.empty()) return shape;
  std::set<std::string> bound = boundSymbols(ctx);
  for (const std::string &s : used)
    if (!bound.count(s))
      return ctx.error(std::string(opName(ctx.gnode().op)) + " with " + what +
                       " computed from tensor data at run time is not supported (output shape " +
                       ctx.outputType(i).str() + ")");
  return shape;
}

/// Whether output i's inferred shape uses symbols bound only when the node runs (its shape
/// comes from tensor data).
bool runTimeShape(LowerContext &ctx, size_t i) {
  std::set<std::string> used;
  for (const SymInt &d : ctx.outputType(i).shape) d.collectSymbols(used);
  if (used.empty()) return false;
  std::set<std::string> bound = boundSymbols(ctx);
  for (const std::string &s : used)
    if (!bound.count(s)) return true;
  return false;
}

/// The elements of input i for the size extern, or an error naming it.
Expected<std::vector<dynshape::ElemFn>> runTimeElems(LowerContext &ctx, size_t i,
                                                     const char *what) {
  auto e = dynshape::inputElems(ctx, i);
  if (!e)
    return ctx.error(std::string(what) + " of " + std::string(opName(ctx.gnode().op)) +
                     " must be a 1-D integer tensor of known length");
  return *e;
}

/// Reshape-like ops: the inferred shape is the target; the view maps it onto the input. A
/// target read at run time (Reshape's shape, Squeeze's and Unsqueeze's axes) gets its dims
/// from the size extern, which checks the ONNX rules.
Status lReshapeLike(LowerContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  OpKind op = ctx.gnode().op;
  if (op != OpKind::Flatten && ctx.hasInput(1) && runTimeShape(ctx, 0)) {
    TensorRef x = ctx.input(0);
    COIL_TRY(auto vals, runTimeElems(ctx, 1, op == OpKind::Reshape ? "shape" : "axes"));
    int64_t code = op == OpKind::Reshape     ? COIL_SHAPE_RESHAPE
                   : op == OpKind::Unsqueeze ? COIL_SHAPE_UNSQUEEZE
                                             : COIL_SHAPE_SQUEEZE;
    int64_t allowzero = op == OpKind::Reshape ? ctx.gnode().attrs.getInt("allowzero", 0) : 0;
    COIL_TRY(auto dd, dynshape::shapeDims(ctx, code, vals, x.shape, 0, 0, allowzero));
    ctx.setOutput(0, ctx.reshape(x, dd.dims));
    return okStatus();
  }
  COIL_TRY(auto shape, staticOutputShape(ctx, 0, "a target shape"));
  ctx.setOutput(0, ctx.reshape(ctx.input(0), shape));
  return okStatus();
}

Status lExpand(LowerContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 2));
  if (runTimeShape(ctx, 0)) {
    TensorRef x = ctx.input(0);
    COIL_TRY(auto vals, runTimeElems(ctx, 1, "shape"));
    COIL_TRY(auto dd, dynshape::shapeDims(ctx, COIL_SHAPE_EXPAND, vals, x.shape, 0, 0, 0));
    int64_t r = x.rank(), o = int64_t(dd.dims.size());
    std::vector<SymInt> in = x.shape;
    // Input dim 1 broadcasts (index 0); otherwise it equals the output dim (the extern checks).
    ctx.setOutput(0, ctx.view(x, dd.dims, [&](const Idx &v) {
      Idx i;
      for (int64_t d = 0; d < r; ++d) {
        const SymInt &od = v[size_t(d + o - r)], &id = in[size_t(d)];
        i.push_back(id == SymInt(1) ? SymInt(0) : id.isConstant() ? od : min(od, id - 1));
      }
      return i;
    }));
    return okStatus();
  }
  COIL_TRY(auto shape, staticOutputShape(ctx, 0, "a target shape"));
  ctx.setOutput(0, ctx.broadcastTo(ctx.input(0), shape));
  return okStatus();
}

Status lConcat(LowerContext &ctx) {
  size_t m = ctx.numInputs();
  if (m == 0) return ctx.error("concat needs at least one input");
  COIL_TRY_STATUS(needInputs(ctx, m));
  const TensorType &out = ctx.outputType(0);
  int64_t r = out.rank();
  if (r == 0) return ctx.error("concat inputs must have rank >= 1, got a scalar");
  COIL_TRY(int64_t axis, normalizeAxis(ctx.gnode().attrs.getInt("axis", 0), r));
  std::vector<TensorRef> xs;
  std::vector<SymInt> offsets; // start of each input along the axis
  SymInt off = 0;
  for (size_t k = 0; k < m; ++k) {
    TensorRef x = ctx.input(k);
    if (x.dtype != out.dtype || x.rank() != r)
      return ctx.error("input " + std::to_string(k) + " (" + TensorType{x.dtype, x.shape}.str() +
                       ") does not match the output (" + out.str() + ")");
    SymInt len = x.shape[size_t(axis)];
    if (len != SymInt(0)) { // empty inputs contribute nothing
      xs.push_back(x);
      offsets.push_back(off);
    }
    off = off + len;
  }
  if (xs.empty()) { // every input is empty: so is the output
    ctx.setOutput(0, ctx.pointwise(out.dtype, out.shape, [&](BodyBuilder &b, const Idx &) {
      return b.constant(out.dtype, 0);
    }));
    return okStatus();
  }
  if (xs.size() == 1) { // a view of the only non-empty input
    TensorRef x = xs[0];
    ctx.setOutput(0, ctx.view(x, out.shape, [&](const Idx &v) {
      Idx i = v;
      i[size_t(axis)] = v[size_t(axis)] - offsets[0];
      return i;
    }));
    return okStatus();
  }
  ctx.setOutput(0, ctx.pointwise(out.dtype, out.shape, [&](BodyBuilder &b, const Idx &idx) {
    // Select chain from the last input back; every load's index is clamped into its input so
    // that the loads of the inputs not selected stay in bounds.
    const SymInt &i = idx[size_t(axis)];
    Val pos = b.index(i);
    Val acc = kNoVal;
    for (size_t k = xs.size(); k-- > 0;) {
      SymInt len = xs[k].shape[size_t(axis)];
      SymInt j = i - offsets[k];
      if (k > 0) j = max(j, SymInt(0));
      if (k + 1 < xs.size()) j = min(j, len - 1);
      Idx at = idx;
      at[size_t(axis)] = j;
      Val v = b.load(xs[k], at);
      if (acc == kNoVal) {
        acc = v;
      } else {
        Val in = b.op(ScalarOp::Lt, pos, b.index(offsets[k] + len));
        acc = b.op(ScalarOp::Select, in, v, acc);
      }
    }
    return acc;
  }));
  return okStatus();
}

Status lGather(LowerContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 2));
  TensorRef x = ctx.input(0), ind = ctx.input(1);
  if (x.rank() == 0) return ctx.error("gather data must have rank >= 1, got a scalar");
  if (isFloat(ind.dtype) || ind.dtype == DType::Bool)
    return ctx.error("gather indices must be integers, got " + std::string(dtypeName(ind.dtype)));
  COIL_TRY(int64_t axis, normalizeAxis(ctx.gnode().attrs.getInt("axis", 0), x.rank()));
  const TensorType &out = ctx.outputType(0);
  SymInt len = x.shape[size_t(axis)];
  size_t q = ind.shape.size();
  // A known scalar index is a view.
  if (q == 0) {
    auto known = ctx.intValue(1);
    if (known && known->size() == 1 && known->at(0).isConstant()) {
      int64_t k = known->at(0).constant();
      auto c = len.maybeConstant();
      if (c && (k < -*c || k >= *c))
        return ctx.error("index " + std::to_string(k) + " is out of range for axis " +
                         std::to_string(axis) + " of size " + std::to_string(*c));
      SymInt j = k < 0 ? len + k : SymInt(k);
      ctx.setOutput(0, ctx.view(x, out.shape, [&](const Idx &v) {
        Idx i;
        for (int64_t d = 0; d < x.rank(); ++d)
          i.push_back(d < axis ? v[size_t(d)] : d == axis ? j : v[size_t(d - 1)]);
        return i;
      }));
      return okStatus();
    }
  }
  ctx.setOutput(0, ctx.pointwise(out.dtype, out.shape, [&](BodyBuilder &b, const Idx &idx) {
    Idx ii(idx.begin() + axis, idx.begin() + axis + int64_t(q));
    SymInt j = b.indirect(b.load(ind, ii), len, /*wrapNegative=*/true);
    Idx at;
    for (int64_t d = 0; d < x.rank(); ++d)
      at.push_back(d < axis ? idx[size_t(d)] : d == axis ? j : idx[size_t(d - 1) + q]);
    return b.load(x, at);
  }));
  return okStatus();
}

/// Known integer contents of input i (constants or size expressions), as int64 when constant.
std::optional<std::vector<int64_t>> constInts(LowerContext &ctx, size_t i) {
  auto v = ctx.intValue(i);
  if (!v) return std::nullopt;
  return constantValues(*v);
}

Status lSlice(LowerContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 3));
  TensorRef x = ctx.input(0);
  int64_t r = x.rank();
  if (r == 0) return ctx.error("slice data must have rank >= 1, got a scalar");
  auto symStarts = ctx.intValue(1), symEnds = ctx.intValue(2);
  bool runTime = !symStarts || !symEnds || (ctx.hasInput(3) && !constInts(ctx, 3)) ||
                 (ctx.hasInput(4) && !constInts(ctx, 4));
  if (runTime) {
    // Starts, ends, axes or steps read at run time: the size extern computes every dim's
    // length, first index and step (ONNX clamping), and the output is a view over them.
    COIL_TRY(auto st, runTimeElems(ctx, 1, "starts"));
    COIL_TRY(auto en, runTimeElems(ctx, 2, "ends"));
    size_t k = st.size();
    std::vector<dynshape::ElemFn> ax, sp;
    if (ctx.hasInput(3)) {
      COIL_TRY(ax, runTimeElems(ctx, 3, "axes"));
    } else {
      for (size_t i = 0; i < k; ++i) ax.push_back(dynshape::constElem(int64_t(i)));
    }
    if (ctx.hasInput(4)) {
      COIL_TRY(sp, runTimeElems(ctx, 4, "steps"));
    } else {
      for (size_t i = 0; i < k; ++i) sp.push_back(dynshape::constElem(1));
    }
    if (en.size() != k || ax.size() != k || sp.size() != k)
      return ctx.error("starts, ends, axes and steps must have the same length");
    std::vector<dynshape::ElemFn> vals = st;
    for (auto *v : {&en, &ax, &sp}) vals.insert(vals.end(), v->begin(), v->end());
    COIL_TRY(auto dd, dynshape::shapeDims(ctx, COIL_SHAPE_SLICE, vals, x.shape, 0, 2 * r, 0));
    ctx.setOutput(0, ctx.view(x, dd.dims, [&](const Idx &v) {
      Idx i;
      for (int64_t d = 0; d < r; ++d)
        i.push_back(dd.extra[size_t(d)] + v[size_t(d)] * dd.extra[size_t(r + d)]);
      return i;
    }));
    return okStatus();
  }
  size_t n = symStarts->size();
  std::vector<int64_t> axes, steps(n, 1);
  if (ctx.hasInput(3)) {
    auto a = constInts(ctx, 3);
    if (!a) return ctx.error("Slice with axes computed at run time is not supported");
    axes = *a;
  } else {
    for (size_t i = 0; i < n; ++i) axes.push_back(int64_t(i));
  }
  if (ctx.hasInput(4)) {
    auto s = constInts(ctx, 4);
    if (!s) return ctx.error("Slice with steps computed at run time is not supported");
    steps = *s;
  }
  if (symEnds->size() != n || axes.size() != n || steps.size() != n)
    return ctx.error("starts, ends, axes and steps must have the same length");
  COIL_TRY(auto norm, normalizeAxes(axes, r));
  (void)norm;
  std::vector<SymInt> first(size_t(r), SymInt(0));
  std::vector<int64_t> step(size_t(r), 1);
  for (size_t i = 0; i < n; ++i) {
    int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
    if (steps[i] == 0) return ctx.error("slice step must not be 0");
    const SymInt &dim = x.shape[size_t(a)];
    const SymInt &s = (*symStarts)[i], &e = (*symEnds)[i];
    if (s.isConstant() && e.isConstant()) {
      first[size_t(a)] = sliceAxis(dim, s.constant(), e.constant(), steps[i]).start;
    } else {
      std::optional<SliceRange> sr;
      if (steps[i] > 0) sr = sliceAxisSym(dim, s, e, steps[i]);
      if (!sr)
        return ctx.error("Slice bounds " + s.str() + ":" + e.str() +
                         " whose signs are not known at compile time are not supported");
      first[size_t(a)] = sr->start;
    }
    step[size_t(a)] = steps[i];
  }
  COIL_TRY(auto shape, staticOutputShape(ctx, 0, "bounds"));
  ctx.setOutput(0, ctx.view(x, shape, [&](const Idx &v) {
    Idx i;
    for (int64_t d = 0; d < r; ++d) i.push_back(first[size_t(d)] + v[size_t(d)] * step[size_t(d)]);
    return i;
  }));
  return okStatus();
}

/// A small i64 vector of size expressions as a Pointwise node (element k = exprs[k]).
TensorRef indexVector(LowerContext &ctx, const std::vector<SymInt> &exprs, DType t,
                      std::vector<SymInt> shape) {
  return ctx.pointwise(t, std::move(shape), [&](BodyBuilder &b, const Idx &idx) {
    if (exprs.size() == 1) return b.index(exprs[0], t);
    Val pos = b.index(idx.at(0));
    Val acc = exprs.empty() ? b.intConstant(t, 0) : b.index(exprs.back(), t);
    for (size_t k = exprs.size() - 1; k-- > 0;) {
      Val hit = b.op(ScalarOp::Eq, pos, b.intConstant(DType::I64, int64_t(k)));
      acc = b.op(ScalarOp::Select, hit, b.index(exprs[k], t), acc);
    }
    return acc;
  });
}

Status lShape(LowerContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  const std::vector<SymInt> &xs = ctx.inputType(0).shape;
  int64_t r = int64_t(xs.size());
  auto clampAxis = [r](int64_t a) {
    if (a < 0) a += r;
    return std::max<int64_t>(0, std::min(r, a));
  };
  int64_t s = clampAxis(ctx.gnode().attrs.getInt("start", 0));
  int64_t e = clampAxis(ctx.gnode().attrs.getInt("end", r));
  std::vector<SymInt> dims;
  for (int64_t i = s; i < e; ++i) dims.push_back(xs[size_t(i)]);
  const TensorType &out = ctx.outputType(0);
  if (dims.empty()) {
    ctx.setOutput(0, ctx.pointwise(out.dtype, out.shape, [&](BodyBuilder &b, const Idx &) {
      return b.intConstant(out.dtype, 0);
    }));
    return okStatus();
  }
  ctx.setOutput(0, indexVector(ctx, dims, out.dtype, out.shape));
  return okStatus();
}

Status lSize(LowerContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  SymInt n = 1;
  for (const SymInt &d : ctx.inputType(0).shape) n = n * d;
  const TensorType &out = ctx.outputType(0);
  ctx.setOutput(0, indexVector(ctx, {n}, out.dtype, out.shape));
  return okStatus();
}

Status lRange(LowerContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 3));
  TensorRef s = ctx.input(0), d = ctx.input(2);
  DType t = ctx.outputType(0).dtype;
  std::vector<SymInt> shape;
  if (runTimeShape(ctx, 0)) {
    // The length read at run time: the size extern computes it from start, limit and delta
    // (passed as i64, or as the bits of f64 for float ranges).
    std::vector<dynshape::ElemFn> vals;
    for (size_t k = 0; k < 3; ++k) {
      TensorRef v = ctx.input(k);
      if (v.rank() > 1 || (v.rank() == 1 && v.shape[0] != SymInt(1)))
        return ctx.error("range inputs must be scalars");
      vals.push_back([v, t](BodyBuilder &b) {
        Val x = b.load(v, Idx(v.shape.size(), SymInt(0)));
        return isFloat(t) ? b.bitcast(b.cast(x, DType::F64), DType::I64) : b.cast(x, DType::I64);
      });
    }
    COIL_TRY(auto dd,
             dynshape::shapeDims(ctx, COIL_SHAPE_RANGE, vals, {}, 0, 0, isFloat(t) ? 1 : 0));
    shape = dd.dims;
  } else {
    COIL_TRY(shape, staticOutputShape(ctx, 0, "a length"));
  }
  ctx.setOutput(0, ctx.pointwise(t, shape, [&](BodyBuilder &b, const Idx &idx) {
    // start + i*delta: f32 in f32 (as the reference kernel), other floats in f64, integers
    // in i64 wrapping to the type.
    DType ct = t == DType::F32 ? DType::F32 : isFloat(t) ? DType::F64 : DType::I64;
    Val a = b.cast(b.load(s, Idx(s.shape.size(), SymInt(0))), ct);
    Val c = b.cast(b.load(d, Idx(d.shape.size(), SymInt(0))), ct);
    Val i = b.index(idx.at(0), ct);
    return b.cast(b.op(ScalarOp::Add, a, b.op(ScalarOp::Mul, i, c)), t);
  }));
  return okStatus();
}

/// A constant scalar of `v`'s dtype, exact.
Val scalarConstant(BodyBuilder &b, const Tensor &v, int64_t i) {
  if (isFloat(v.dtype())) return b.constant(v.dtype(), v.getDouble(i));
  return b.intConstant(v.dtype(), v.getInt(i));
}

Status lConstantOfShape(LowerContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  std::vector<SymInt> shape;
  if (runTimeShape(ctx, 0)) {
    COIL_TRY(auto vals, runTimeElems(ctx, 0, "shape"));
    COIL_TRY(auto dd, dynshape::shapeDims(ctx, COIL_SHAPE_CONSTANT_OF_SHAPE, vals, {}, 0, 0, 0));
    shape = dd.dims;
  } else {
    COIL_TRY(shape, staticOutputShape(ctx, 0, "a shape"));
  }
  Tensor value = Tensor::scalar(DType::F32, 0);
  if (auto v = ctx.gnode().attrs.getTensor("value")) {
    if (v->numel() != 1)
      return ctx.error("value must have one element, got " + std::to_string(v->numel()));
    value = *v;
  }
  ctx.setOutput(0, ctx.pointwise(value.dtype(), shape, [&](BodyBuilder &b, const Idx &) {
    return scalarConstant(b, value, 0);
  }));
  return okStatus();
}

/// Constant values held by a Constant node (usually folded away by the importer): a select
/// chain over the flat index, for small tensors only.
Status lConstant(LowerContext &ctx) {
  COIL_TRY(Tensor t, decodeConstant(ctx.gnode()));
  constexpr int64_t kMaxInline = 256;
  if (t.numel() > kMaxInline)
    return ctx.error("a Constant node of " + std::to_string(t.numel()) +
                     " elements is not supported (constants must be graph initializers)");
  std::vector<SymInt> shape(t.shape().begin(), t.shape().end());
  std::vector<int64_t> strides = contiguousStrides(t.shape());
  ctx.setOutput(0, ctx.pointwise(t.dtype(), shape, [&](BodyBuilder &b, const Idx &idx) {
    if (t.numel() == 0) return b.constant(t.dtype(), 0);
    SymInt flat = 0;
    for (size_t d = 0; d < idx.size(); ++d) flat = flat + idx[d] * strides[d];
    Val pos = b.index(flat);
    Val acc = scalarConstant(b, t, t.numel() - 1);
    for (int64_t k = t.numel() - 1; k-- > 0;) {
      Val hit = b.op(ScalarOp::Eq, pos, b.intConstant(DType::I64, k));
      acc = b.op(ScalarOp::Select, hit, scalarConstant(b, t, k), acc);
    }
    return acc;
  }));
  return okStatus();
}

} // namespace

void registerShapeOpsLowerings(LowerRegistry &r) {
  r.add(OpKind::Reshape, lReshapeLike);
  r.add(OpKind::Flatten, lReshapeLike);
  r.add(OpKind::Squeeze, lReshapeLike);
  r.add(OpKind::Unsqueeze, lReshapeLike);
  r.add(OpKind::Expand, lExpand);
  r.add(OpKind::Concat, lConcat);
  r.add(OpKind::Gather, lGather);
  r.add(OpKind::Slice, lSlice);
  r.add(OpKind::Shape, lShape);
  r.add(OpKind::Size, lSize);
  r.add(OpKind::Range, lRange);
  r.add(OpKind::ConstantOfShape, lConstantOfShape);
  r.add(OpKind::Constant, lConstant);
}

} // namespace coil::loop
