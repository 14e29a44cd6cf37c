// Type and shape inference for the Elementwise family of ops (see Ops.def).
//
// Each op accepts the dtypes ONNX allows for it at any opset from 13 on (restricted to coil's
// dtypes); inputs that ONNX types with the same type variable must have equal dtypes. Shapes
// follow multidirectional (numpy) broadcasting.
#include "ir/Infer.h"

#include <string>

namespace coil {
namespace {

using DTypeSet = uint32_t;

constexpr DTypeSet bit(DType t) {
  return DTypeSet(1) << unsigned(t);
}
constexpr DTypeSet kFloat = bit(DType::F64) | bit(DType::F32) | bit(DType::F16) | bit(DType::BF16);
constexpr DTypeSet kSignedInt =
    bit(DType::I64) | bit(DType::I32) | bit(DType::I16) | bit(DType::I8);
constexpr DTypeSet kUnsignedInt =
    bit(DType::U64) | bit(DType::U32) | bit(DType::U16) | bit(DType::U8);
constexpr DTypeSet kInt = kSignedInt | kUnsignedInt;
constexpr DTypeSet kBool = bit(DType::Bool);
constexpr DTypeSet kNumeric = kFloat | kInt;
constexpr DTypeSet kAll = kNumeric | kBool;
constexpr DTypeSet kSignedNumeric = kFloat | kSignedInt;

std::string opStr(const InferContext &ctx) {
  return std::string(opName(ctx.node.op));
}

Status needInputs(const InferContext &ctx, size_t required) {
  for (size_t i = 0; i < required; ++i)
    if (!ctx.hasInput(i)) return ctx.error(opStr(ctx) + " needs input " + std::to_string(i));
  return okStatus();
}

Status checkDType(const InferContext &ctx, size_t i, DTypeSet allowed) {
  DType t = ctx.input(i).dtype;
  if (!(allowed & bit(t)))
    return ctx.error("input " + std::to_string(i) + " has dtype " + std::string(dtypeName(t)) +
                     ", which " + opStr(ctx) + " does not accept");
  return okStatus();
}

Status checkSame(const InferContext &ctx, size_t i, size_t j) {
  DType a = ctx.input(i).dtype, b = ctx.input(j).dtype;
  if (a != b)
    return ctx.error("inputs " + std::to_string(i) + " and " + std::to_string(j) +
                     " must have the same dtype, got " + std::string(dtypeName(a)) + " and " +
                     std::string(dtypeName(b)));
  return okStatus();
}

/// Broadcast shape of the present inputs among `idx`.
Expected<std::vector<SymInt>> broadcastOf(const InferContext &ctx, std::vector<size_t> idx) {
  std::vector<SymInt> out;
  for (size_t i : idx) {
    if (!ctx.hasInput(i)) continue;
    COIL_TRY(out, broadcastShapes(out, ctx.input(i).shape));
  }
  return out;
}

std::vector<TensorType> one(DType t, std::vector<SymInt> shape) {
  return {TensorType{t, std::move(shape)}};
}

// --- generic shapes of rule

template <DTypeSet Allowed> Expected<std::vector<TensorType>> unary(InferContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  COIL_TRY_STATUS(checkDType(ctx, 0, Allowed));
  return std::vector<TensorType>{ctx.input(0)};
}

template <DTypeSet Allowed> Expected<std::vector<TensorType>> unaryToBool(InferContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  COIL_TRY_STATUS(checkDType(ctx, 0, Allowed));
  return one(DType::Bool, ctx.input(0).shape);
}

/// Two inputs of one dtype; the output has that dtype (or bool for comparisons).
template <DTypeSet Allowed, bool ToBool>
Expected<std::vector<TensorType>> binary(InferContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 2));
  COIL_TRY_STATUS(checkDType(ctx, 0, Allowed));
  COIL_TRY_STATUS(checkSame(ctx, 0, 1));
  COIL_TRY(auto shape, broadcastOf(ctx, {0, 1}));
  return one(ToBool ? DType::Bool : ctx.input(0).dtype, std::move(shape));
}

/// Max, Min, Mean, Sum: one or more inputs of one dtype, all broadcast together.
template <DTypeSet Allowed> Expected<std::vector<TensorType>> variadic(InferContext &ctx) {
  if (ctx.numInputs() == 0) return ctx.error(opStr(ctx) + " needs at least one input");
  COIL_TRY_STATUS(needInputs(ctx, ctx.numInputs()));
  COIL_TRY_STATUS(checkDType(ctx, 0, Allowed));
  std::vector<size_t> idx;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    COIL_TRY_STATUS(checkSame(ctx, 0, i));
    idx.push_back(i);
  }
  COIL_TRY(auto shape, broadcastOf(ctx, idx));
  return one(ctx.input(0).dtype, std::move(shape));
}

// --- ops with their own rules

Expected<std::vector<TensorType>> inferPow(InferContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 2));
  COIL_TRY_STATUS(checkDType(ctx, 0, kFloat | bit(DType::I64) | bit(DType::I32)));
  COIL_TRY_STATUS(checkDType(ctx, 1, kNumeric));
  COIL_TRY(auto shape, broadcastOf(ctx, {0, 1}));
  return one(ctx.input(0).dtype, std::move(shape));
}

Expected<std::vector<TensorType>> inferPRelu(InferContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 2));
  COIL_TRY_STATUS(checkDType(
      ctx, 0, kFloat | bit(DType::I64) | bit(DType::I32) | bit(DType::U64) | bit(DType::U32)));
  COIL_TRY_STATUS(checkSame(ctx, 0, 1));
  COIL_TRY(auto shape, broadcastOf(ctx, {0, 1}));
  return one(ctx.input(0).dtype, std::move(shape));
}

/// min/max bounds of Clip must be scalars (rank 0, or a single element).
Status checkScalarBound(const InferContext &ctx, size_t i) {
  const TensorType &t = ctx.input(i);
  SymInt n = symNumel(t.shape);
  if (t.rank() > 1 || (n.isConstant() && n.constant() != 1))
    return ctx.error("input " + std::to_string(i) + " of Clip must be a scalar, got shape " +
                     t.str());
  return okStatus();
}

Expected<std::vector<TensorType>> inferClip(InferContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  COIL_TRY_STATUS(checkDType(ctx, 0, kNumeric));
  for (size_t i = 1; i < 3; ++i) {
    if (!ctx.hasInput(i)) continue;
    COIL_TRY_STATUS(checkSame(ctx, 0, i));
    COIL_TRY_STATUS(checkScalarBound(ctx, i));
  }
  return std::vector<TensorType>{ctx.input(0)};
}

Expected<std::vector<TensorType>> inferWhere(InferContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 3));
  COIL_TRY_STATUS(checkDType(ctx, 0, kBool));
  COIL_TRY_STATUS(checkDType(ctx, 1, kAll));
  COIL_TRY_STATUS(checkSame(ctx, 1, 2));
  COIL_TRY(auto shape, broadcastOf(ctx, {0, 1, 2}));
  return one(ctx.input(1).dtype, std::move(shape));
}

Expected<std::vector<TensorType>> inferIdentity(InferContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  return std::vector<TensorType>{ctx.input(0)};
}

Expected<std::vector<TensorType>> inferDropout(InferContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  COIL_TRY_STATUS(checkDType(ctx, 0, kFloat));
  if (ctx.hasInput(1)) COIL_TRY_STATUS(checkDType(ctx, 1, kFloat));
  if (ctx.hasInput(2)) {
    COIL_TRY_STATUS(checkDType(ctx, 2, kBool));
    // A training_mode known to be true with a ratio that is not known to be 0 drops values.
    const Tensor *mode = ctx.constants.size() > 2 ? ctx.constants[2] : nullptr;
    const Tensor *ratio = ctx.hasInput(1) && ctx.constants.size() > 1 ? ctx.constants[1] : nullptr;
    bool training = mode && mode->numel() == 1 && mode->getInt(0) != 0;
    bool zeroRatio = ratio && ratio->numel() == 1 && ratio->getDouble(0) == 0.0;
    if (training && (ctx.hasInput(1) ? (ratio && !zeroRatio) : true))
      return ctx.error("training-mode Dropout is not supported");
  }
  std::vector<TensorType> out{ctx.input(0), TensorType{DType::Bool, ctx.input(0).shape}};
  return out;
}

Expected<std::vector<TensorType>> inferCast(InferContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  COIL_TRY(DType to, dtypeAttr(ctx.node.attrs, "to"));
  return one(to, ctx.input(0).shape);
}

Expected<std::vector<TensorType>> inferCastLike(InferContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 2));
  return one(ctx.input(1).dtype, ctx.input(0).shape);
}

Expected<std::vector<TensorType>> inferBitCast(InferContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  COIL_TRY(DType to, dtypeAttr(ctx.node.attrs, "to"));
  DType from = ctx.input(0).dtype;
  if (dtypeSize(from) != dtypeSize(to))
    return ctx.error("BitCast needs dtypes of the same width, got " + std::string(dtypeName(from)) +
                     " (" + std::to_string(dtypeSize(from) * 8) + " bits) and " +
                     std::string(dtypeName(to)) + " (" + std::to_string(dtypeSize(to) * 8) +
                     " bits)");
  return one(to, ctx.input(0).shape);
}

/// Checks the shape of a scale (or zero point) of QuantizeLinear / DequantizeLinear against x:
/// a scalar (per-tensor), a 1-D tensor of x's dim `axis` (per-axis) or, with block_size, x's
/// shape with dim `axis` replaced by ceil(dim / block_size) (blocked).
Status checkQuantParamShape(const InferContext &ctx, size_t i) {
  const TensorType &x = ctx.input(0);
  const TensorType &s = ctx.input(i);
  int64_t blockSize = ctx.node.attrs.getInt("block_size", 0);
  if (blockSize < 0)
    return ctx.error("block_size must be positive, got " + std::to_string(blockSize));
  SymInt n = symNumel(s.shape);
  bool single = s.rank() == 0 || (n.isConstant() && n.constant() == 1);
  if (single && blockSize == 0) return okStatus();
  COIL_TRY(int64_t axis, normalizeAxis(ctx.node.attrs.getInt("axis", 1), x.rank()));
  const std::string what = "input " + std::to_string(i) + " of " + opStr(ctx);
  if (blockSize == 0) {
    if (s.rank() != 1)
      return ctx.error(what + " must be a scalar or a 1-D tensor, got shape " + s.str());
    const SymInt &d = x.shape[size_t(axis)];
    if (d.isConstant() && s.shape[0].isConstant() && d.constant() != s.shape[0].constant())
      return ctx.error(what + " must have " + d.str() + " elements (dim " + std::to_string(axis) +
                       " of input 0), got " + s.shape[0].str());
    return okStatus();
  }
  if (s.rank() != x.rank())
    return ctx.error(what + " must have rank " + std::to_string(x.rank()) +
                     " for blocked quantization, got shape " + s.str());
  for (size_t d = 0; d < x.shape.size(); ++d) {
    const SymInt &xd = x.shape[d];
    SymInt want = int64_t(d) == axis ? ceilDiv(xd, SymInt(blockSize)) : xd;
    if (want.isConstant() && s.shape[d].isConstant() && want.constant() != s.shape[d].constant())
      return ctx.error(what + " has shape " + s.str() + ", but blocked quantization of " + x.str() +
                       " along axis " + std::to_string(axis) + " with block_size " +
                       std::to_string(blockSize) + " needs dim " + std::to_string(d) + " = " +
                       want.str());
  }
  return okStatus();
}

constexpr DTypeSet kQuantized = bit(DType::I8) | bit(DType::U8) | bit(DType::I16) | bit(DType::U16);

Expected<std::vector<TensorType>> inferQuantizeLinear(InferContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 2));
  constexpr DTypeSet kIn = kFloat & ~bit(DType::F64);
  COIL_TRY_STATUS(checkDType(ctx, 0, kIn | bit(DType::I32)));
  COIL_TRY_STATUS(checkDType(ctx, 1, kIn | bit(DType::I32)));
  COIL_TRY_STATUS(checkQuantParamShape(ctx, 1));
  std::optional<DType> out;
  if (ctx.node.attrs.has("output_dtype") && ctx.node.attrs.getInt("output_dtype", 0) != 0) {
    COIL_TRY(DType t, dtypeAttr(ctx.node.attrs, "output_dtype"));
    out = t;
  }
  if (ctx.hasInput(2)) {
    COIL_TRY_STATUS(checkDType(ctx, 2, kQuantized));
    COIL_TRY_STATUS(checkQuantParamShape(ctx, 2));
    DType zp = ctx.input(2).dtype;
    if (out && *out != zp)
      return ctx.error("output_dtype " + std::string(dtypeName(*out)) +
                       " differs from the dtype of the zero point, " + std::string(dtypeName(zp)));
    out = zp;
  }
  DType t = out.value_or(DType::U8);
  if (!(kQuantized & bit(t)))
    return ctx.error("QuantizeLinear cannot quantize to " + std::string(dtypeName(t)) +
                     " (accepts i8, u8, i16, u16)");
  if (ctx.node.attrs.has("precision") && ctx.node.attrs.getInt("precision", 0) != 0) {
    COIL_TRY(DType p, dtypeAttr(ctx.node.attrs, "precision"));
    if (!isFloat(p))
      return ctx.error("precision must be a floating dtype, got " + std::string(dtypeName(p)));
  }
  return one(t, ctx.input(0).shape);
}

Expected<std::vector<TensorType>> inferDequantizeLinear(InferContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 2));
  COIL_TRY_STATUS(checkDType(ctx, 0, kQuantized | bit(DType::I32)));
  COIL_TRY_STATUS(checkDType(ctx, 1, kFloat & ~bit(DType::F64)));
  COIL_TRY_STATUS(checkQuantParamShape(ctx, 1));
  if (ctx.hasInput(2)) {
    COIL_TRY_STATUS(checkSame(ctx, 0, 2));
    COIL_TRY_STATUS(checkQuantParamShape(ctx, 2));
  }
  DType out = ctx.input(1).dtype;
  if (ctx.node.attrs.has("output_dtype") && ctx.node.attrs.getInt("output_dtype", 0) != 0) {
    COIL_TRY(out, dtypeAttr(ctx.node.attrs, "output_dtype"));
    if (!(bit(out) & (kFloat & ~bit(DType::F64))))
      return ctx.error("DequantizeLinear cannot produce " + std::string(dtypeName(out)) +
                       " (accepts f32, f16, bf16)");
  }
  return one(out, ctx.input(0).shape);
}

Expected<std::vector<TensorType>> inferDynamicQuantizeLinear(InferContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  COIL_TRY_STATUS(checkDType(ctx, 0, bit(DType::F32)));
  return std::vector<TensorType>{TensorType{DType::U8, ctx.input(0).shape},
                                 TensorType{DType::F32, {}}, TensorType{DType::U8, {}}};
}

} // namespace

void registerElementwiseInfer(InferRegistry &r) {
  // Unary, output of the input's type.
  for (OpKind k : {OpKind::Acos,        OpKind::Acosh,     OpKind::Asin,
                   OpKind::Asinh,       OpKind::Atan,      OpKind::Atanh,
                   OpKind::Ceil,        OpKind::Celu,      OpKind::Cos,
                   OpKind::Cosh,        OpKind::Elu,       OpKind::Erf,
                   OpKind::Exp,         OpKind::Floor,     OpKind::Gelu,
                   OpKind::HardSigmoid, OpKind::HardSwish, OpKind::LeakyRelu,
                   OpKind::Log,         OpKind::Mish,      OpKind::Reciprocal,
                   OpKind::Round,       OpKind::Selu,      OpKind::Sigmoid,
                   OpKind::Sin,         OpKind::Sinh,      OpKind::Softplus,
                   OpKind::Softsign,    OpKind::Sqrt,      OpKind::Swish,
                   OpKind::Tan,         OpKind::Tanh,      OpKind::ThresholdedRelu})
    r.add(k, unary<kFloat>);
  r.add(OpKind::Abs, unary<kNumeric>);
  r.add(OpKind::Sign, unary<kNumeric>);
  r.add(OpKind::Neg, unary<kSignedNumeric>);
  r.add(OpKind::Relu, unary<kSignedNumeric>);
  r.add(OpKind::Shrink, unary<kNumeric & ~bit(DType::BF16)>);
  r.add(OpKind::BitwiseNot, unary<kInt>);
  r.add(OpKind::Not, unary<kBool>);
  r.add(OpKind::IsInf, unaryToBool<kFloat>);
  r.add(OpKind::IsNaN, unaryToBool<kFloat>);

  // Binary, broadcast.
  for (OpKind k : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Mod})
    r.add(k, binary<kNumeric, false>);
  for (OpKind k : {OpKind::BitShift, OpKind::BitwiseAnd, OpKind::BitwiseOr, OpKind::BitwiseXor})
    r.add(k, binary<kInt, false>);
  for (OpKind k : {OpKind::And, OpKind::Or, OpKind::Xor}) r.add(k, binary<kBool, false>);
  r.add(OpKind::Equal, binary<kAll, true>);
  for (OpKind k : {OpKind::Greater, OpKind::GreaterOrEqual, OpKind::Less, OpKind::LessOrEqual})
    r.add(k, binary<kNumeric, true>);
  r.add(OpKind::Pow, inferPow);
  r.add(OpKind::PRelu, inferPRelu);

  r.add(OpKind::Max, variadic<kNumeric>);
  r.add(OpKind::Min, variadic<kNumeric>);
  r.add(OpKind::Mean, variadic<kFloat>);
  r.add(OpKind::Sum, variadic<kFloat>);

  r.add(OpKind::Clip, inferClip);
  r.add(OpKind::Where, inferWhere);
  r.add(OpKind::Identity, inferIdentity);
  r.add(OpKind::Dropout, inferDropout);
  r.add(OpKind::Cast, inferCast);
  r.add(OpKind::CastLike, inferCastLike);
  r.add(OpKind::BitCast, inferBitCast);
  r.add(OpKind::QuantizeLinear, inferQuantizeLinear);
  r.add(OpKind::DequantizeLinear, inferDequantizeLinear);
  r.add(OpKind::DynamicQuantizeLinear, inferDynamicQuantizeLinear);
}

} // namespace coil
