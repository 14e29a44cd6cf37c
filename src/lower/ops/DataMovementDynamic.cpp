// Lowering of the DataMovement-family ops whose output sizes depend on the data: NonZero,
// Compress, Unique, NonMaxSuppression. Each calls an allocating CPU extern (kernels/cpu), which
// defines the size symbol that inference gave the output dim; NonZero and Compress get flat
// indices from the extern and finish with a Pointwise (unravel, gather), which the scheduler
// may fuse. Semantics: interp/kernels/DataMovementDynamic.cpp.
#include "ir/Infer.h"
#include "kernels/Externs.h"
#include "lower/ops/LinalgLower.h"

namespace coil::loop::linalg {
namespace {

/// The flat indices [count] of the non-zero elements among the first `numel` of `x` (realized),
/// through the allocating extern; `count` is the data-dependent symbol `symbol`.
TensorRef nonZeroFlat(LowerContext &ctx, const TensorRef &x, const SymInt &numel,
                      const std::string &symbol) {
  return ctx.externCall(kernels::cpuSymbol(kernels::ExternId::NonZero, x.dtype),
                        {nodeArg(x), outArg(0), outSymbolArg(symbol), intArg(numel)},
                        {{DType::I64, {SymInt::symbol(symbol)}}}, true)[0];
}

Status lowerNonZero(LowerContext &ctx) {
  TensorRef x = ctx.realize(ctx.input(0));
  const TensorType &yt = ctx.outputType(0);
  std::string sym = dataDependentSymbol(ctx, yt.shape[1], "nonzero");
  TensorRef flat = nonZeroFlat(ctx, x, symNumel(x.shape), sym);
  std::vector<SymInt> shape = x.shape;
  size_t r = shape.size();
  // y[d, j] = (flat[j] / stride_d) mod dim_d, the row-major unravelling.
  TensorRef y =
      ctx.pointwise(DType::I64, {int64_t(r), SymInt::symbol(sym)},
                    [&](BodyBuilder &b, const std::vector<SymInt> &i) {
                      Val f = b.load(flat, {i[1]});
                      Val v = b.intConstant(DType::I64, 0);
                      for (size_t d = r; d-- > 0;) {
                        Val q = b.op(ScalarOp::Div, f, b.index(numelRange(shape, d + 1, r)));
                        Val coord = b.op(ScalarOp::Mod, q, b.index(shape[d]));
                        v = b.op(ScalarOp::Select,
                                 b.op(ScalarOp::Eq, b.index(i[0]), b.index(int64_t(d))), coord, v);
                      }
                      return v;
                    });
  ctx.setOutput(0, y);
  return okStatus();
}

Status lowerCompress(LowerContext &ctx) {
  TensorRef x = ctx.input(0), cond = ctx.realize(ctx.input(1));
  if (cond.rank() != 1)
    return ctx.error("condition must have rank 1, got rank " + std::to_string(cond.rank()));
  const TensorType &yt = ctx.outputType(0);
  size_t axis = 0;
  if (auto a = ctx.gnode().attrs.maybeInt("axis")) {
    COIL_TRY(int64_t ax, normalizeAxis(*a, x.rank()));
    axis = size_t(ax);
  } else {
    x = ctx.reshape(x, {symNumel(x.shape)});
  }
  SymInt dim = x.shape[axis];
  std::string sym = dataDependentSymbol(ctx, yt.shape[axis], "compress");
  // Selections beyond the axis are dropped (the interpreter reports them as an error).
  TensorRef keep = nonZeroFlat(ctx, cond, min(cond.shape[0], dim), sym);
  TensorRef y =
      ctx.pointwise(yt.dtype, yt.shape, [&](BodyBuilder &b, const std::vector<SymInt> &i) {
        std::vector<SymInt> src = i;
        src[axis] = b.indirect(b.load(keep, {i[axis]}), dim, false);
        return b.load(x, src);
      });
  ctx.setOutput(0, y);
  return okStatus();
}

Status lowerUnique(LowerContext &ctx) {
  TensorRef x = ctx.input(0);
  const TensorType &yt = ctx.outputType(0);
  size_t axis = 0;
  if (auto a = ctx.gnode().attrs.maybeInt("axis")) {
    COIL_TRY(int64_t ax, normalizeAxis(*a, x.rank()));
    axis = size_t(ax);
  } else {
    x = ctx.reshape(x, {symNumel(x.shape)});
  }
  x = ctx.realize(x);
  bool sorted = ctx.gnode().attrs.getInt("sorted", 1) != 0;
  AxisSplit s = splitAt(x.shape, axis);
  std::string sym = dataDependentSymbol(ctx, yt.shape[axis], "unique");
  SymInt u = SymInt::symbol(sym);
  std::vector<SymInt> yShape = x.shape;
  yShape[axis] = u;
  auto outs = ctx.externCall(
      kernels::cpuSymbol(kernels::ExternId::Unique, x.dtype),
      {nodeArg(x), outArg(0), outArg(1), outArg(2), outArg(3), outSymbolArg(sym), intArg(s.outer),
       intArg(s.len), intArg(s.inner), intArg(sorted ? 1 : 0)},
      {{x.dtype, yShape}, {DType::I64, {u}}, {DType::I64, {s.len}}, {DType::I64, {u}}}, true);
  for (size_t i = 0; i < ctx.numOutputs() && i < outs.size(); ++i)
    if (ctx.gnode().outputs[i] != kNoValue) ctx.setOutput(i, outs[i]);
  return okStatus();
}

Status lowerNonMaxSuppression(LowerContext &ctx) {
  TensorRef boxes = ctx.input(0), scores = ctx.input(1);
  if (boxes.rank() != 3 || scores.rank() != 3)
    return ctx.error("boxes and scores must have rank 3");
  if (boxes.dtype != DType::F32 || scores.dtype != DType::F32)
    return ctx.error("NonMaxSuppression is compiled for f32 boxes and scores only");
  bool center = ctx.gnode().attrs.getInt("center_point_box", 0) != 0;
  boxes = ctx.realize(boxes);
  scores = ctx.realize(scores);
  // The scalar inputs are read at run time; an absent one passes boxes with a count of 0.
  std::vector<ExternArg> scalars, counts;
  for (size_t i = 2; i <= 4; ++i) {
    if (ctx.hasInput(i)) {
      TensorRef t = ctx.realize(ctx.input(i));
      DType want = i == 2 ? DType::I64 : DType::F32;
      if (t.dtype != want)
        return ctx.error("input " + std::to_string(i) + " of NonMaxSuppression must be " +
                         std::string(dtypeName(want)));
      scalars.push_back(nodeArg(t));
      counts.push_back(intArg(symNumel(t.shape)));
    } else {
      scalars.push_back(nodeArg(boxes));
      counts.push_back(intArg(0));
    }
  }
  const TensorType &yt = ctx.outputType(0);
  std::string sym = dataDependentSymbol(ctx, yt.shape[0], "selected");
  std::vector<ExternArg> args{nodeArg(boxes), nodeArg(scores)};
  args.insert(args.end(), scalars.begin(), scalars.end());
  args.push_back(outArg(0));
  args.push_back(outSymbolArg(sym));
  args.push_back(intArg(boxes.shape[0]));
  args.push_back(intArg(scores.shape[1]));
  args.push_back(intArg(boxes.shape[1]));
  args.insert(args.end(), counts.begin(), counts.end());
  args.push_back(intArg(center ? 1 : 0));
  auto outs = ctx.externCall(kernels::cpuSymbol(kernels::ExternId::NmsDyn, DType::F32),
                             std::move(args), {{DType::I64, {SymInt::symbol(sym), 3}}}, true);
  ctx.setOutput(0, outs[0]);
  return okStatus();
}

} // namespace

void registerDataMovementDynamicLowerings(LowerRegistry &r) {
  r.add(OpKind::NonZero, lowerNonZero);
  r.add(OpKind::Compress, lowerCompress);
  r.add(OpKind::Unique, lowerUnique);
  r.add(OpKind::NonMaxSuppression, lowerNonMaxSuppression);
}

} // namespace coil::loop::linalg
