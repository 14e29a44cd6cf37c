/// \file Private helper of the ShapeOps and DataMovement lowerings: output shapes that come
/// from run-time tensors, bound by the size-only extern coil_cpu_shape_dims (kernels/cpu).
#pragma once

#include "lower/Lower.h"

#include <functional>
#include <string>
#include <vector>

namespace coil::loop::dynshape {

/// One element of the extern's int64 value vector, computed in a Pointwise body.
using ElemFn = std::function<Val(BodyBuilder &)>;
/// Element k of the 1-D tensor `t` (any integer dtype) as i64.
ElemFn loadElem(const TensorRef &t, int64_t k);
/// A known integer as i64.
ElemFn constElem(SymInt v);
/// The elements of 1-D input i of the node (its length must be a constant); nullopt when not.
std::optional<std::vector<ElemFn>> inputElems(LowerContext &ctx, size_t i);

/// The symbols the call defines: `dims` (the output dims, outRank of them, named after the
/// inferred output dims where those are unbound symbols) and `extra` (the op's other sizes:
/// pads, slice starts; any sign).
struct DynDims {
  std::vector<SymInt> dims, extra;
};
/// Calls coil_cpu_shape_dims for op `op` (a COIL_SHAPE_* code) on `values` and the dims of
/// `inShape`; the output's inferred shape (output `out` of the node) names the dim symbols.
Expected<DynDims> shapeDims(LowerContext &ctx, int64_t op, const std::vector<ElemFn> &values,
                            const std::vector<SymInt> &inShape, size_t out, int64_t numExtra,
                            int64_t attr);
/// The same with the dims named after `outShape` (e.g. the split axis of every output).
Expected<DynDims> shapeDimsNamed(LowerContext &ctx, int64_t op, const std::vector<ElemFn> &values,
                                 const std::vector<SymInt> &inShape,
                                 const std::vector<SymInt> &outShape, int64_t numExtra,
                                 int64_t attr);

} // namespace coil::loop::dynshape
