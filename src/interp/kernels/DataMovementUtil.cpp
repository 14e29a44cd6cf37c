// Helpers shared by the DataMovement kernels.
#include "interp/kernels/DataMovementUtil.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace coil::dm {

Expected<std::vector<int64_t>> readIndexTensor(const KernelContext &ctx, size_t input,
                                               const char *what) {
  const Tensor &t = ctx.input(input);
  if (t.dtype() != DType::I64 && t.dtype() != DType::I32)
    return ctx.error(std::string(what) + " must have dtype i32 or i64, got " +
                     std::string(dtypeName(t.dtype())));
  return t.toInts();
}

Expected<std::vector<int64_t>> readIntTensor(const KernelContext &ctx, size_t input,
                                             const char *what) {
  const Tensor &t = ctx.input(input);
  if (isFloat(t.dtype()))
    return ctx.error(std::string(what) + " must have an integer dtype, got " +
                     std::string(dtypeName(t.dtype())));
  return t.toInts();
}

Expected<int64_t> readScalarInt(const KernelContext &ctx, size_t input, const char *what) {
  COIL_TRY(std::vector<int64_t> v, readIntTensor(ctx, input, what));
  if (v.size() != 1 || ctx.input(input).rank() > 1)
    return ctx.error(std::string(what) + " must be a scalar, got shape " +
                     shapeStr(ctx.input(input).shape()));
  return v[0];
}

Expected<int64_t> normalizeIndex(const KernelContext &ctx, int64_t idx, int64_t dim,
                                 const char *what) {
  if (idx < -dim || idx >= dim)
    return ctx.error(std::string(what) + " " + std::to_string(idx) + " is out of range [" +
                     std::to_string(-dim) + ", " + std::to_string(dim - 1) + "]");
  return idx < 0 ? idx + dim : idx;
}

Expected<Reduction> parseReduction(const KernelContext &ctx) {
  std::string r = ctx.attrs().getString("reduction", "none");
  if (r == "none") return Reduction::None;
  if (r == "add") return Reduction::Add;
  if (r == "mul") return Reduction::Mul;
  if (r == "max") return Reduction::Max;
  if (r == "min") return Reduction::Min;
  return ctx.error("reduction must be one of none, add, mul, max, min, got '" + r + "'");
}

namespace {

template <typename T> T reduceValues(T a, T b, Reduction r) {
  if constexpr (std::is_integral_v<T>) {
    // Integers wrap modulo 2^bits (no signed-overflow UB).
    using U = std::make_unsigned_t<T>;
    switch (r) {
    case Reduction::Add:
      return T(U(U(a) + U(b)));
    case Reduction::Mul:
      return T(U(U(a) * U(b)));
    default:
      break;
    }
  } else {
    switch (r) {
    case Reduction::Add:
      return a + b;
    case Reduction::Mul:
      return a * b;
    default:
      break;
    }
  }
  switch (r) {
  case Reduction::Max:
    return std::max(a, b);
  case Reduction::Min:
    return std::min(a, b);
  default:
    return b;
  }
}

template <typename T> void combineTyped(void *dst, const void *src, Reduction r) {
  T a, b;
  std::memcpy(&a, dst, sizeof(T));
  std::memcpy(&b, src, sizeof(T));
  a = reduceValues(a, b, r);
  std::memcpy(dst, &a, sizeof(T));
}

template <typename T> int compareTyped(const void *pa, const void *pb) {
  T a, b;
  std::memcpy(&a, pa, sizeof(T));
  std::memcpy(&b, pb, sizeof(T));
  if constexpr (std::is_floating_point_v<T>) {
    bool na = std::isnan(a), nb = std::isnan(b);
    if (na || nb) return na == nb ? 0 : (na ? 1 : -1);
  }
  return a < b ? -1 : (b < a ? 1 : 0);
}

float loadHalfish(DType t, const void *p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return t == DType::F16 ? halfToFloat(h) : bf16ToFloat(h);
}

} // namespace

void combineElement(DType t, void *dst, const void *src, Reduction r) {
  if (r == Reduction::None) {
    std::memcpy(dst, src, dtypeSize(t));
    return;
  }
  switch (t) {
  case DType::F16:
  case DType::BF16: {
    float v = reduceValues(loadHalfish(t, dst), loadHalfish(t, src), r);
    uint16_t h = t == DType::F16 ? floatToHalf(v) : floatToBf16(v);
    std::memcpy(dst, &h, 2);
    return;
  }
  case DType::Bool: {
    uint8_t a = *static_cast<uint8_t *>(dst), b = *static_cast<const uint8_t *>(src);
    // Logical: add and max are `or`, mul and min are `and`.
    bool any = r == Reduction::Add || r == Reduction::Max;
    *static_cast<uint8_t *>(dst) = any ? uint8_t(a || b) : uint8_t(a && b);
    return;
  }
#define COIL_DM_COMBINE(E, N, T, S)                                                                \
  case DType::E:                                                                                   \
    combineTyped<T>(dst, src, r);                                                                  \
    return;
    COIL_DM_COMBINE(F64, "", double, 8)
    COIL_DM_COMBINE(F32, "", float, 4)
    COIL_DM_COMBINE(I64, "", int64_t, 8)
    COIL_DM_COMBINE(I32, "", int32_t, 4)
    COIL_DM_COMBINE(I16, "", int16_t, 2)
    COIL_DM_COMBINE(I8, "", int8_t, 1)
    COIL_DM_COMBINE(U64, "", uint64_t, 8)
    COIL_DM_COMBINE(U32, "", uint32_t, 4)
    COIL_DM_COMBINE(U16, "", uint16_t, 2)
    COIL_DM_COMBINE(U8, "", uint8_t, 1)
#undef COIL_DM_COMBINE
  }
}

int compareElements(DType t, const void *a, const void *b) {
  switch (t) {
  case DType::F16:
  case DType::BF16: {
    float x = loadHalfish(t, a), y = loadHalfish(t, b);
    return compareTyped<float>(&x, &y);
  }
  case DType::F64:
    return compareTyped<double>(a, b);
  case DType::F32:
    return compareTyped<float>(a, b);
  case DType::I64:
    return compareTyped<int64_t>(a, b);
  case DType::I32:
    return compareTyped<int32_t>(a, b);
  case DType::I16:
    return compareTyped<int16_t>(a, b);
  case DType::I8:
    return compareTyped<int8_t>(a, b);
  case DType::U64:
    return compareTyped<uint64_t>(a, b);
  case DType::U32:
    return compareTyped<uint32_t>(a, b);
  case DType::U16:
    return compareTyped<uint16_t>(a, b);
  case DType::U8:
  case DType::Bool:
    return compareTyped<uint8_t>(a, b);
  }
  return 0;
}

} // namespace coil::dm
