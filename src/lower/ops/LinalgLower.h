/// \file Private helpers of the Linalg lowering files (Linalg*.cpp in lower/ops): extern
/// argument builders and matrix-operand layouts.
#pragma once

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

void registerLinalgConvLowerings(LowerRegistry &r);
void registerLinalgDynamicLowerings(LowerRegistry &r);
void registerLinalgAttentionLowerings(LowerRegistry &r);

} // namespace coil::loop::linalg
