// Reference kernels of the Elementwise family that convert between dtypes: Cast, CastLike,
// BitCast, QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear.
#include "interp/kernels/ElementwiseCommon.h"
#include "ir/Infer.h"

#include <cmath>
#include <cstring>

namespace coil {
namespace elementwise {
namespace {

using Result = Expected<std::vector<Tensor>>;

/// ONNX Cast of every element of `x` to `to`: floats round to nearest even, floats truncate
/// toward zero into integers, integers wrap, anything non-zero is true.
Tensor castTensor(const Tensor &x, DType to) {
  Tensor out(to, x.shape());
  DType from = x.dtype();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    if (isFloat(from)) {
      storeDouble(out, i, x.getDouble(i));
    } else if (!isFloat(to)) {
      out.setInt(i, x.getInt(i));
    } else { // integer to float: convert straight from the integer to avoid double rounding
      int64_t v = x.getInt(i);
      bool u = from == DType::U64;
      if (to == DType::F32)
        out.setDouble(i, double(u ? float(uint64_t(v)) : float(v)));
      else
        storeDouble(out, i, u ? double(uint64_t(v)) : double(v));
    }
  }
  return out;
}

Result kCast(KernelContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  COIL_TRY(DType to, dtypeAttr(ctx.attrs(), "to"));
  return std::vector<Tensor>{castTensor(ctx.input(0), to)};
}

Result kCastLike(KernelContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 2));
  return std::vector<Tensor>{castTensor(ctx.input(0), ctx.input(1).dtype())};
}

Result kBitCast(KernelContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  COIL_TRY(DType to, dtypeAttr(ctx.attrs(), "to"));
  const Tensor &x = ctx.input(0);
  if (dtypeSize(x.dtype()) != dtypeSize(to))
    return ctx.error("BitCast needs dtypes of the same width, got " +
                     std::string(dtypeName(x.dtype())) + " and " + std::string(dtypeName(to)));
  Tensor out = Tensor::fromBytes(to, x.shape(), x.data(), x.nbytes());
  if (to == DType::Bool) // coil's bool is 0 or 1
    for (int64_t i = 0, n = out.numel(); i < n; ++i)
      out.dataAs<uint8_t>()[i] = out.dataAs<uint8_t>()[i] != 0;
  return std::vector<Tensor>{out};
}

/// For each element of x, the flat index of its scale (and zero point): per-tensor (one
/// element), per-axis (a 1-D tensor along `axis`) or blocked (x's shape with dim `axis`
/// divided into blocks of `blockSize`).
struct QuantParamIndex {
  enum { PerTensor, PerAxis, Blocked } mode = PerTensor;
  int64_t inner = 1, dim = 1, blocks = 1, blockSize = 1;

  int64_t operator()(int64_t f) const {
    if (mode == PerTensor) return 0;
    int64_t in = f % inner, a = (f / inner) % dim, outer = f / (inner * dim);
    if (mode == PerAxis) return a;
    return (outer * blocks + a / blockSize) * inner + in;
  }
};

Expected<QuantParamIndex> quantParamIndex(const KernelContext &ctx, const Tensor &x,
                                          const Tensor &s, size_t which) {
  QuantParamIndex q;
  int64_t blockSize = ctx.attrs().getInt("block_size", 0);
  const std::string what =
      "input " + std::to_string(which) + " of " + std::string(opName(ctx.node.op));
  if (blockSize < 0)
    return ctx.error("block_size must be positive, got " + std::to_string(blockSize));
  if (blockSize == 0 && s.numel() == 1) return q;
  COIL_TRY(int64_t axis, normalizeAxis(ctx.attrs().getInt("axis", 1), x.rank()));
  q.mode = blockSize == 0 ? QuantParamIndex::PerAxis : QuantParamIndex::Blocked;
  q.dim = x.dim(axis);
  for (int64_t d = axis + 1; d < x.rank(); ++d) q.inner *= x.dim(d);
  if (blockSize == 0) {
    if (s.rank() != 1 || s.dim(0) != q.dim)
      return ctx.error(what + " must be a scalar or have shape [" + std::to_string(q.dim) +
                       "] (dim " + std::to_string(axis) + " of input 0), got shape " +
                       shapeStr(s.shape()));
    q.blocks = q.dim;
    return q;
  }
  q.blockSize = blockSize;
  q.blocks = (q.dim + blockSize - 1) / blockSize;
  Shape want = x.shape();
  want[size_t(axis)] = q.blocks;
  if (s.shape() != want)
    return ctx.error(what + " must have shape " + shapeStr(want) + " for blocked quantization of " +
                     shapeStr(x.shape()) + " along axis " + std::to_string(axis) +
                     " with block_size " + std::to_string(blockSize) + ", got shape " +
                     shapeStr(s.shape()));
  return q;
}

/// The dtype numpy gives x / s: the wider float, f64 where an integer is involved.
DType divisionDType(DType x, DType s) {
  if (!isFloat(x) || !isFloat(s) || x == DType::F64 || s == DType::F64) return DType::F64;
  if (x == s) return x;
  if (x == DType::F32 || s == DType::F32) return DType::F32;
  return DType::F32; // f16 with bf16
}

void quantRange(DType t, int64_t &lo, int64_t &hi) {
  switch (t) {
  case DType::I8:
    lo = -128, hi = 127;
    return;
  case DType::U8:
    lo = 0, hi = 255;
    return;
  case DType::I16:
    lo = -32768, hi = 32767;
    return;
  default:
    lo = 0, hi = 65535;
    return;
  }
}

Result kQuantizeLinear(KernelContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 2));
  const Tensor &x = ctx.input(0), &s = ctx.input(1);
  const Tensor *zp = ctx.hasInput(2) ? &ctx.input(2) : nullptr;
  DType outType = DType::U8;
  if (ctx.attrs().getInt("output_dtype", 0) != 0) {
    COIL_TRY(outType, dtypeAttr(ctx.attrs(), "output_dtype"));
  }
  if (zp) {
    if (ctx.attrs().getInt("output_dtype", 0) != 0 && outType != zp->dtype())
      return ctx.error("output_dtype " + std::string(dtypeName(outType)) +
                       " differs from the dtype of the zero point, " +
                       std::string(dtypeName(zp->dtype())));
    outType = zp->dtype();
  }
  if (outType != DType::I8 && outType != DType::U8 && outType != DType::I16 &&
      outType != DType::U16)
    return ctx.error("QuantizeLinear cannot quantize to " + std::string(dtypeName(outType)) +
                     " (accepts i8, u8, i16, u16)");
  DType precision = divisionDType(x.dtype(), s.dtype());
  if (ctx.attrs().getInt("precision", 0) != 0) {
    COIL_TRY(precision, dtypeAttr(ctx.attrs(), "precision"));
  }
  COIL_TRY(QuantParamIndex si, quantParamIndex(ctx, x, s, 1));
  QuantParamIndex zi;
  if (zp) {
    if (zp->shape() != s.shape())
      return ctx.error("the zero point must have the shape of the scale, " + shapeStr(s.shape()) +
                       ", got " + shapeStr(zp->shape()));
    COIL_TRY(zi, quantParamIndex(ctx, x, *zp, 2));
  }
  int64_t lo, hi;
  quantRange(outType, lo, hi);
  Tensor out(outType, x.shape());
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    double xv = roundToFloatDType(precision, x.getDouble(i));
    double sv = roundToFloatDType(precision, s.getDouble(si(i)));
    double q = std::nearbyint(roundToFloatDType(precision, xv / sv)); // half to even
    if (std::isnan(q)) q = 0;
    q += zp ? double(zp->getInt(zi(i))) : 0.0;
    out.setInt(i, int64_t(std::min(double(hi), std::max(double(lo), q))));
  }
  return std::vector<Tensor>{out};
}

Result kDequantizeLinear(KernelContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 2));
  const Tensor &x = ctx.input(0), &s = ctx.input(1);
  const Tensor *zp = ctx.hasInput(2) ? &ctx.input(2) : nullptr;
  DType outType = s.dtype();
  if (ctx.attrs().getInt("output_dtype", 0) != 0) {
    COIL_TRY(outType, dtypeAttr(ctx.attrs(), "output_dtype"));
  }
  if (!isFloat(outType) || outType == DType::F64)
    return ctx.error("DequantizeLinear cannot produce " + std::string(dtypeName(outType)) +
                     " (accepts f32, f16, bf16)");
  COIL_TRY(QuantParamIndex si, quantParamIndex(ctx, x, s, 1));
  QuantParamIndex zi;
  if (zp) {
    if (zp->dtype() != x.dtype())
      return ctx.error("inputs 0 and 2 must have the same dtype, got " +
                       std::string(dtypeName(x.dtype())) + " and " +
                       std::string(dtypeName(zp->dtype())));
    if (zp->shape() != s.shape())
      return ctx.error("the zero point must have the shape of the scale, " + shapeStr(s.shape()) +
                       ", got " + shapeStr(zp->shape()));
    COIL_TRY(zi, quantParamIndex(ctx, x, *zp, 2));
  }
  Tensor out(outType, x.shape());
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    // As the ONNX definition computes it: x converted to f32 (minus the zero point, exactly),
    // times the scale, rounded to f32 and then to the output dtype.
    double d = zp ? double(x.getInt(i) - zp->getInt(zi(i))) : double(float(x.getInt(i)));
    double y = double(toFloat(d * s.getDouble(si(i))));
    storeDouble(out, i, y);
  }
  return std::vector<Tensor>{out};
}

Result kDynamicQuantizeLinear(KernelContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  const Tensor &x = ctx.input(0);
  if (x.dtype() != DType::F32)
    return ctx.error("DynamicQuantizeLinear needs an f32 input, got " +
                     std::string(dtypeName(x.dtype())));
  // All arithmetic in f32, as the ONNX definition: the range always includes 0.
  float maxx = 0, minx = 0;
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    float v = x.dataAs<float>()[i];
    if (std::isnan(v)) return ctx.error("DynamicQuantizeLinear input holds NaN");
    maxx = std::max(maxx, v);
    minx = std::min(minx, v);
  }
  float scale = (maxx == minx ? 1.0f : maxx - minx) / 255.0f;
  float zpf = 0.0f - minx / scale;
  zpf = std::max(0.0f, std::min(255.0f, zpf));
  float zpi = std::nearbyint(zpf);
  Tensor y(DType::U8, x.shape());
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    float q = std::nearbyint(x.dataAs<float>()[i] / scale) + zpi;
    y.dataAs<uint8_t>()[i] = uint8_t(std::max(0.0f, std::min(255.0f, q)));
  }
  Tensor ys(DType::F32, {});
  ys.dataAs<float>()[0] = scale;
  Tensor yz(DType::U8, {});
  yz.dataAs<uint8_t>()[0] = uint8_t(zpi);
  return std::vector<Tensor>{y, ys, yz};
}

} // namespace

void registerElementwiseConvertKernels(KernelRegistry &r) {
  r.add(OpKind::Cast, kCast);
  r.add(OpKind::CastLike, kCastLike);
  r.add(OpKind::BitCast, kBitCast);
  r.add(OpKind::QuantizeLinear, kQuantizeLinear);
  r.add(OpKind::DequantizeLinear, kDequantizeLinear);
  r.add(OpKind::DynamicQuantizeLinear, kDynamicQuantizeLinear);
}

} // namespace elementwise
} // namespace coil
