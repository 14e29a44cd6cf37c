/// \file Private helpers of the Linalg lowering files (Linalg*.cpp in lower/ops): extern
/// argument builders and matrix-operand layouts.
#pragma once

#include "ir/OpAttrs.h"
#include "lower/Lower.h"

#include <string>
#include <vector>

namespace coil::loop::linalg {

inline ExternArg nodeArg(const TensorRef &t) {
  ExternArg a;
  a.kind = ExternArg::Kind::Node;
  a.node = t.node;
  return a;
}
inline ExternArg outArg(int32_t index) {
  ExternArg a;
  a.kind = ExternArg::Kind::Output;
  a.index = index;
  return a;
}
inline ExternArg intArg(SymInt v) {
  ExternArg a;
  a.kind = ExternArg::Kind::Int;
  a.sym = std::move(v);
  return a;
}
inline ExternArg floatArg(double v) {
  ExternArg a;
  a.kind = ExternArg::Kind::Float;
  a.number = v;
  return a;
}
inline ExternArg outSymbolArg(std::string symbol) {
  ExternArg a;
  a.kind = ExternArg::Kind::OutSymbol;
  a.symbol = std::move(symbol);
  return a;
}

/// The dtype suffix of extern names: "f32", "bf16", "bool", ...
std::string suffix(DType t);
/// Product of dims [from, to).
SymInt numelRange(const std::vector<SymInt> &shape, size_t from, size_t to);
/// Whether two dims are equal (structurally or provably under the program's ranges).
bool sameDim(const LowerContext &ctx, const SymInt &a, const SymInt &b);
/// The symbol a data-dependent dim stands for: its name when `dim` is a plain symbol (the one
/// inference made, which readers of the output see), else a fresh symbol of the program.
std::string dataDependentSymbol(LowerContext &ctx, const SymInt &dim, const std::string &hint);

/// How a view lies in its node's memory: as the contiguous tensor of its own shape, as that
/// with the last two dims swapped (a transposed matrix), or otherwise.
enum class Layout { Plain, Transposed, Other };
Layout layoutOf(LowerContext &ctx, const TensorRef &t);
/// The node of `t` as an identity TensorRef (its whole, contiguous buffer).
TensorRef wholeNode(LowerContext &ctx, const TensorRef &t);
/// Where a view lies in its node's row-major buffer when its index map is affine: element
/// (i_0, i_1, ...) of the view is element offset + sum_k i_k * strides[k] of the buffer
/// (strides of extent-1 dims are 0; offset and strides provably non-negative). Found per node
/// dim, or on the flattened index with split-and-merged dims recombined
/// ((a*c) * (x // c) + a * (x % c) = a * x). nullopt otherwise (LinalgAttention.cpp).
struct ViewStrides {
  SymInt offset;
  std::vector<SymInt> strides;
};
std::optional<ViewStrides> viewStrides(LowerContext &ctx, const TensorRef &t);

/// Loads `v` of dtype `t` converted to `acc`.
inline Val loadAs(BodyBuilder &b, const TensorRef &t, const std::vector<SymInt> &idx, DType acc) {
  return b.cast(b.load(t, idx), acc);
}
/// The accumulation dtype the interpreter computes products in: f64 for floats, i64 (wrapping)
/// for integers.
inline DType accTypeOf(DType t) {
  return isFloat(t) ? DType::F64 : DType::I64;
}

/// A value that is a scalar or one value per index `i` (a zero point or scale of the quantized
/// ops): loads element 0 or element `i`.
Val loadPerIndex(BodyBuilder &b, const TensorRef &t, const SymInt &i, DType acc);
/// Rounds half to even, adds the zero point, saturates to the range of `outT` and converts (the
/// requantization of QLinearMatMul / QLinearConv); `v` and `zeroPoint` are f64.
Val requantize(BodyBuilder &b, Val v, Val zeroPoint, DType outT);

/// An operand of the GEMM extern: a contiguous node, read transposed or not, and the distance
/// between the matrices of consecutive batches (0: one matrix shared by every batch).
struct MatOperand {
  TensorRef ref;
  bool trans = false;
  SymInt stride;
};
/// Prepares `t` ([batch..., rows, cols], batch dims right-aligned against `batch`) for the GEMM
/// extern (see Linalg.cpp).
MatOperand prepareOperand(LowerContext &ctx, TensorRef t, const std::vector<SymInt> &batch);
/// y [batch..., m, n] = alpha * a [.., m, k] * b [.., k, n] through the GEMM extern (f32, f64).
TensorRef gemmExtern(LowerContext &ctx, const TensorRef &a, const TensorRef &b,
                     const std::vector<SymInt> &batch, const SymInt &m, const SymInt &n,
                     const SymInt &k, double alpha);
/// The value of one operand element, converted to the accumulation type; `rc` is its row
/// (operand a) or column (operand b) in the output.
using ElemFn = std::function<Val(BodyBuilder &, const std::vector<SymInt> &idx, const SymInt &rc)>;
/// out [batch..., m, n] (outT) = sum over k of fa(a[.., i, k]) * fb(b[.., k, j]) in accT, with
/// the batch dims of a and b broadcast (any dtype).
TensorRef matmulReduction(LowerContext &ctx, const TensorRef &a, const TensorRef &b,
                          const std::vector<SymInt> &batch, const SymInt &m, const SymInt &n,
                          const SymInt &k, DType outT, DType accT, const ElemFn &fa,
                          const ElemFn &fb);
/// An element converted to `acc` (operands broadcast by their batch dims).
ElemFn plainElem(const TensorRef &t, DType acc);

/// [outer, len, inner] sizes of `shape` around `axis`.
struct AxisSplit {
  SymInt outer, len, inner;
};
AxisSplit splitAt(const std::vector<SymInt> &shape, size_t axis);

void registerLinalgConvLowerings(LowerRegistry &r);
void registerReductionDynamicLowerings(LowerRegistry &r);    ///< ReductionDynamic.cpp
void registerDataMovementDynamicLowerings(LowerRegistry &r); ///< DataMovementDynamic.cpp
void registerLinalgAttentionLowerings(LowerRegistry &r);

} // namespace coil::loop::linalg
