// Output shapes that come from run-time tensors: the size-only extern coil_cpu_shape_dims reads
// the shape-defining values and binds the output's size symbols; the ops' data movement stays
// ordinary Loop IR over those symbols (see DynShape.h).
#include "lower/ops/DynShape.h"

#include "kernels/Externs.h"
#include "kernels/cpu/CpuKernels.h"
#include "lower/ops/LinalgLower.h"

#include <set>

namespace coil::loop::dynshape {
namespace {

using linalg::intArg;
using linalg::nodeArg;
using linalg::outArg;
using linalg::outSymbolArg;

constexpr int64_t kMaxSyms = 16, kMaxValues = 64;

/// Symbols bound before this node runs: the inputs' shapes and earlier extern calls' symbols.
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

TensorRef i64Vector(LowerContext &ctx, const std::vector<ElemFn> &elems, const std::string &hint) {
  int64_t n = int64_t(elems.size());
  return ctx.pointwise(
      DType::I64, {n},
      [&](BodyBuilder &b, const std::vector<SymInt> &i) {
        if (elems.empty()) return b.intConstant(DType::I64, 0);
        Val acc = b.cast(elems.back()(b), DType::I64);
        Val pos = b.index(i[0]);
        for (int64_t k = n - 1; k-- > 0;) {
          Val hit = b.op(ScalarOp::Eq, pos, b.intConstant(DType::I64, k));
          acc = b.op(ScalarOp::Select, hit, b.cast(elems[size_t(k)](b), DType::I64), acc);
        }
        return acc;
      },
      hint);
}

} // namespace

ElemFn loadElem(const TensorRef &t, int64_t k) {
  return [t, k](BodyBuilder &b) {
    std::vector<SymInt> idx(t.shape.size(), SymInt(0));
    if (!idx.empty()) idx.back() = k;
    return b.cast(b.load(t, idx), DType::I64);
  };
}

ElemFn constElem(SymInt v) {
  return [v](BodyBuilder &b) { return b.index(v, DType::I64); };
}

std::optional<std::vector<ElemFn>> inputElems(LowerContext &ctx, size_t i) {
  if (!ctx.hasInput(i)) return std::vector<ElemFn>{};
  TensorRef t = ctx.input(i);
  if (t.rank() > 1 || isFloat(t.dtype) || t.dtype == DType::Bool) return std::nullopt;
  int64_t n = 1;
  if (t.rank() == 1) {
    auto c = t.shape[0].maybeConstant();
    if (!c) return std::nullopt;
    n = *c;
  }
  std::vector<ElemFn> out;
  for (int64_t k = 0; k < n; ++k) out.push_back(loadElem(t, k));
  return out;
}

Expected<DynDims> shapeDims(LowerContext &ctx, int64_t op, const std::vector<ElemFn> &values,
                            const std::vector<SymInt> &inShape, size_t out, int64_t numExtra,
                            int64_t attr) {
  return shapeDimsNamed(ctx, op, values, inShape, ctx.outputType(out).shape, numExtra, attr);
}

Expected<DynDims> shapeDimsNamed(LowerContext &ctx, int64_t op, const std::vector<ElemFn> &values,
                                 const std::vector<SymInt> &inShape,
                                 const std::vector<SymInt> &outShape, int64_t numExtra,
                                 int64_t attr) {
  int64_t outRank = int64_t(outShape.size());
  std::string opn(opName(ctx.gnode().op));
  if (outRank + numExtra > kMaxSyms || int64_t(inShape.size()) > kMaxSyms ||
      int64_t(values.size()) > kMaxValues)
    return ctx.error(opn + " with a shape computed at run time supports ranks up to " +
                     std::to_string(kMaxSyms) + " (" + std::to_string(kMaxSyms) +
                     " sizes in all), got output rank " + std::to_string(outRank));
  std::set<std::string> bound = boundSymbols(ctx), used;
  DynDims r;
  std::vector<ExternArg> args{nodeArg(i64Vector(ctx, values, "values")), {}, outArg(0)};
  std::vector<SymInt> inDims = inShape;
  std::vector<ElemFn> dimElems;
  for (const SymInt &d : inDims) dimElems.push_back(constElem(d));
  args[1] = nodeArg(i64Vector(ctx, dimElems, "dims"));
  for (int64_t k = 0; k < kMaxSyms; ++k) {
    std::string name;
    if (k < outRank) {
      const SymInt &d = outShape[size_t(k)];
      if (d.isSymbol() && !bound.count(d.symbolName()) && !used.count(d.symbolName()))
        name = d.symbolName();
      else
        name = ctx.freshSymbol(opn + "_dim").symbolName();
      r.dims.push_back(SymInt::symbol(name));
    } else {
      name = ctx.freshSymbol(k < outRank + numExtra ? opn + "_size" : "unused").symbolName();
      if (k < outRank + numExtra) {
        // Pads and starts may be negative.
        ctx.program().symbols[name] = SymRange{-(int64_t(1) << 62), int64_t(1) << 62};
        r.extra.push_back(SymInt::symbol(name));
      }
    }
    used.insert(name);
    args.push_back(outSymbolArg(name));
  }
  for (int64_t v : {op, int64_t(values.size()), int64_t(inShape.size()), outRank, attr})
    args.push_back(intArg(v));
  ctx.externCall(kernels::cpuSymbol(kernels::ExternId::ShapeDims), std::move(args),
                 {{DType::I64, {1}}}, true);
  return r;
}

} // namespace coil::loop::dynshape
