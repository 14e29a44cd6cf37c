// Lowering of the Reduction-family ops that sort or scan: TopK, CumSum, CumProd. Each calls a
// CPU extern (kernels/cpu) on contiguous inputs. Semantics: interp/kernels/Reduction.cpp.
#include "ir/Infer.h"
#include "kernels/Externs.h"
#include "lower/ops/LinalgLower.h"

namespace coil::loop::linalg {

AxisSplit splitAt(const std::vector<SymInt> &shape, size_t axis) {
  return {numelRange(shape, 0, axis), shape[axis], numelRange(shape, axis + 1, shape.size())};
}

namespace {

Status lowerTopK(LowerContext &ctx) {
  TensorRef x = ctx.input(0);
  if (x.rank() == 0) return ctx.error("input 0 of TopK must have rank >= 1, got rank 0");
  const Attrs &at = ctx.gnode().attrs;
  COIL_TRY(int64_t axis, normalizeAxis(at.getInt("axis", -1), x.rank()));
  auto kv = ctx.intValue(1);
  const TensorType &vt = ctx.outputType(0);
  SymInt k = vt.shape[size_t(axis)];
  x = ctx.realize(x);
  AxisSplit s = splitAt(x.shape, size_t(axis));
  bool largest = at.getInt("largest", 1) != 0;
  if (!kv || kv->size() != 1) {
    // K is read at run time: the allocating form defines the symbol of the K dim.
    if (ctx.inputType(1).dtype != DType::I64) return ctx.error("K of TopK must be i64");
    std::string sym = dataDependentSymbol(ctx, k, "topk");
    std::vector<SymInt> shape = x.shape;
    shape[size_t(axis)] = SymInt::symbol(sym);
    auto outs = ctx.externCall(kernels::cpuSymbol(kernels::ExternId::TopKDyn, x.dtype),
                               {nodeArg(x), nodeArg(ctx.realize(ctx.input(1))), outArg(0),
                                outArg(1), outSymbolArg(sym), intArg(s.outer), intArg(s.len),
                                intArg(s.inner), intArg(largest ? 1 : 0)},
                               {{x.dtype, shape}, {DType::I64, shape}}, true);
    ctx.setOutput(0, outs[0]);
    ctx.setOutput(1, outs[1]);
    return okStatus();
  }
  // The result is always sorted: a valid answer for sorted=0 too, and the interpreter's.
  auto outs = ctx.externCall(kernels::cpuSymbol(kernels::ExternId::TopK, x.dtype),
                             {nodeArg(x), outArg(0), outArg(1), intArg(s.outer), intArg(s.len),
                              intArg(s.inner), intArg(k), intArg(largest ? 1 : 0)},
                             {vt, ctx.outputType(1)});
  ctx.setOutput(0, outs[0]);
  ctx.setOutput(1, outs[1]);
  return okStatus();
}

Status lowerCumulative(LowerContext &ctx) {
  TensorRef x = ctx.input(0);
  if (x.rank() == 0)
    return ctx.error("input 0 of " + std::string(opName(ctx.gnode().op)) +
                     " must have rank >= 1, got rank 0");
  const Attrs &at = ctx.gnode().attrs;
  bool exclusive = at.getInt("exclusive", 0) != 0, reverse = at.getInt("reverse", 0) != 0;
  const bool prod = ctx.gnode().op == OpKind::CumProd;
  using kernels::ExternId;
  x = ctx.realize(x);
  auto av = ctx.intValue(1);
  if (!av || av->size() != 1 || !(*av)[0].isConstant()) {
    // The axis is read at run time, with the shape passed as a tensor of its dims.
    DType at1 = ctx.inputType(1).dtype;
    if (at1 != DType::I32 && at1 != DType::I64) return ctx.error("the axis must be i32 or i64");
    int64_t r = x.rank();
    std::vector<SymInt> dims = x.shape;
    TensorRef shape = ctx.pointwise(
        DType::I64, {r},
        [&](BodyBuilder &b, const std::vector<SymInt> &i) {
          Val v = b.intConstant(DType::I64, 0);
          for (int64_t d = 0; d < r; ++d)
            v = b.op(ScalarOp::Select, b.op(ScalarOp::Eq, b.index(i[0]), b.index(d)),
                     b.index(dims[size_t(d)]), v);
          return v;
        },
        "shape");
    auto outs = ctx.externCall(
        kernels::cpuSymbol(prod ? ExternId::CumProdDyn : ExternId::CumSumDyn, x.dtype),
        {nodeArg(x), nodeArg(ctx.realize(ctx.input(1))), nodeArg(shape), outArg(0), intArg(r),
         intArg(at1 == DType::I32 ? 1 : 0), intArg(exclusive ? 1 : 0), intArg(reverse ? 1 : 0)},
        {ctx.outputType(0)});
    ctx.setOutput(0, outs[0]);
    return okStatus();
  }
  COIL_TRY(int64_t axis, normalizeAxis((*av)[0].constant(), x.rank()));
  AxisSplit s = splitAt(x.shape, size_t(axis));
  auto outs =
      ctx.externCall(kernels::cpuSymbol(prod ? ExternId::CumProd : ExternId::CumSum, x.dtype),
                     {nodeArg(x), outArg(0), intArg(s.outer), intArg(s.len), intArg(s.inner),
                      intArg(exclusive ? 1 : 0), intArg(reverse ? 1 : 0)},
                     {ctx.outputType(0)});
  ctx.setOutput(0, outs[0]);
  return okStatus();
}

} // namespace

void registerReductionDynamicLowerings(LowerRegistry &r) {
  r.add(OpKind::TopK, lowerTopK);
  r.add(kCumulativeOps, lowerCumulative);
}

} // namespace coil::loop::linalg
