// DType names, properties and scalar conversions.
#include "support/DType.h"

#include "support/Check.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace coil {

std::string_view dtypeName(DType t) {
  switch (t) {
#define COIL_DTYPE_NAME(E, N, T, S)                                                                \
  case DType::E:                                                                                   \
    return N;
    COIL_FOR_EACH_DTYPE(COIL_DTYPE_NAME)
#undef COIL_DTYPE_NAME
  }
  return "?";
}

std::optional<DType> parseDType(std::string_view name) {
#define COIL_DTYPE_PARSE(E, N, T, S)                                                               \
  if (name == N) return DType::E;
  COIL_FOR_EACH_DTYPE(COIL_DTYPE_PARSE)
#undef COIL_DTYPE_PARSE
  return std::nullopt;
}

size_t dtypeSize(DType t) {
  switch (t) {
#define COIL_DTYPE_SIZE(E, N, T, S)                                                                \
  case DType::E:                                                                                   \
    return S;
    COIL_FOR_EACH_DTYPE(COIL_DTYPE_SIZE)
#undef COIL_DTYPE_SIZE
  }
  return 0;
}

bool isFloat(DType t) {
  return t == DType::F64 || t == DType::F32 || t == DType::F16 || t == DType::BF16;
}
bool isUnsigned(DType t) {
  return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64 ||
         t == DType::Bool;
}
bool isInteger(DType t) {
  return !isFloat(t) && t != DType::Bool;
}
bool isSigned(DType t) {
  return !isUnsigned(t);
}

std::optional<DType> dtypeFromOnnxCode(int64_t code) {
  switch (code) {
  case 1:
    return DType::F32;
  case 2:
    return DType::U8;
  case 3:
    return DType::I8;
  case 4:
    return DType::U16;
  case 5:
    return DType::I16;
  case 6:
    return DType::I32;
  case 7:
    return DType::I64;
  case 9:
    return DType::Bool;
  case 10:
    return DType::F16;
  case 11:
    return DType::F64;
  case 12:
    return DType::U32;
  case 13:
    return DType::U64;
  case 16:
    return DType::BF16;
  default:
    return std::nullopt;
  }
}

float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { // subnormal: normalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      bits = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7fffffff;
  if (absx >= 0x7f800000) // inf or nan
    return uint16_t(sign | 0x7c00 | (absx > 0x7f800000 ? 0x200 | ((absx >> 13) & 0x3ff) : 0));
  if (absx >= 0x477ff000) // rounds to >= 65520: overflow to inf
    return uint16_t(sign | 0x7c00);
  if (absx < 0x38800000) { // below the smallest normal half: subnormal or zero
    // value = absx as float; half subnormal unit is 2^-24.
    float a;
    std::memcpy(&a, &absx, 4);
    float scaled = a * 16777216.0f;   // 2^24
    float r = std::nearbyint(scaled); // ties to even under the default rounding mode
    return uint16_t(sign | uint32_t(r));
  }
  uint32_t mant = absx & 0x7fffff;
  uint32_t exp = (absx >> 23) - 127 + 15;
  uint32_t h = exp << 10 | mant >> 13;
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
    ++h; // may carry into the exponent, which is the correct rounding
  return uint16_t(sign | h);
}

float bf16ToFloat(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) // NaN: keep it a quiet NaN
    return uint16_t((x >> 16) | 0x40);
  uint32_t rounding = 0x7fff + ((x >> 16) & 1);
  return uint16_t((x + rounding) >> 16);
}

namespace {
/// double -> float without the undefined behaviour of a C++ conversion out of float's range:
/// values that round past FLT_MAX become infinity, as IEEE rounding gives.
float toFloat(double v) {
  constexpr double kOverflow = 3.4028235677973366e38; // FLT_MAX + half an ulp
  if (v >= kOverflow) return std::numeric_limits<float>::infinity();
  if (v <= -kOverflow) return -std::numeric_limits<float>::infinity();
  if (v > double(std::numeric_limits<float>::max())) return std::numeric_limits<float>::max();
  if (v < -double(std::numeric_limits<float>::max())) return -std::numeric_limits<float>::max();
  return float(v);
}

/// double -> float rounding to odd (truncate, then set the last bit when inexact). A float
/// rounded to odd carries enough bits that rounding it again to f16 or bf16 (to nearest, ties
/// to even) gives the correctly rounded result of the double: no double rounding.
float toFloatRoundToOdd(double v) {
  float f = toFloat(v);
  if (std::isnan(v) || std::isinf(f) || double(f) == v) return f;
  if (std::fabs(double(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits |= 1;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <typename I> I floatToIntSat(double v) {
  if (std::isnan(v)) return 0;
  double lo = double(std::numeric_limits<I>::min()), hi = double(std::numeric_limits<I>::max());
  if (v <= lo) return std::numeric_limits<I>::min();
  if (v >= hi) return std::numeric_limits<I>::max();
  return I(v);
}
template <typename T> T ld(const void *p, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char *>(p) + i * sizeof(T), sizeof(T));
  return v;
}
template <typename T> void st(void *p, size_t i, T v) {
  std::memcpy(static_cast<char *>(p) + i * sizeof(T), &v, sizeof(T));
}
} // namespace

double loadAsDouble(DType t, const void *p, size_t i) {
  switch (t) {
  case DType::F64:
    return ld<double>(p, i);
  case DType::F32:
    return ld<float>(p, i);
  case DType::F16:
    return halfToFloat(ld<uint16_t>(p, i));
  case DType::BF16:
    return bf16ToFloat(ld<uint16_t>(p, i));
  case DType::I64:
    return double(ld<int64_t>(p, i));
  case DType::I32:
    return ld<int32_t>(p, i);
  case DType::I16:
    return ld<int16_t>(p, i);
  case DType::I8:
    return ld<int8_t>(p, i);
  case DType::U64:
    return double(ld<uint64_t>(p, i));
  case DType::U32:
    return ld<uint32_t>(p, i);
  case DType::U16:
    return ld<uint16_t>(p, i);
  case DType::U8:
    return ld<uint8_t>(p, i);
  case DType::Bool:
    return ld<uint8_t>(p, i) ? 1.0 : 0.0;
  }
  return 0;
}

int64_t loadAsInt(DType t, const void *p, size_t i) {
  switch (t) {
  case DType::I64:
    return ld<int64_t>(p, i);
  case DType::I32:
    return ld<int32_t>(p, i);
  case DType::I16:
    return ld<int16_t>(p, i);
  case DType::I8:
    return ld<int8_t>(p, i);
  case DType::U64:
    return int64_t(ld<uint64_t>(p, i));
  case DType::U32:
    return ld<uint32_t>(p, i);
  case DType::U16:
    return ld<uint16_t>(p, i);
  case DType::U8:
    return ld<uint8_t>(p, i);
  case DType::Bool:
    return ld<uint8_t>(p, i) ? 1 : 0;
  default:
    return floatToIntSat<int64_t>(loadAsDouble(t, p, i));
  }
}

void storeFromDouble(DType t, void *p, size_t i, double v) {
  switch (t) {
  case DType::F64:
    return st<double>(p, i, v);
  case DType::F32:
    return st<float>(p, i, toFloat(v));
  case DType::F16:
    return st<uint16_t>(p, i, floatToHalf(toFloatRoundToOdd(v)));
  case DType::BF16:
    return st<uint16_t>(p, i, floatToBf16(toFloatRoundToOdd(v)));
  case DType::Bool:
    return st<uint8_t>(p, i, v != 0.0 ? 1 : 0);
  case DType::U64:
    return st<uint64_t>(p, i,
                        v < 0 ? uint64_t(floatToIntSat<int64_t>(v)) : floatToIntSat<uint64_t>(v));
  default:
    return storeFromInt(t, p, i, floatToIntSat<int64_t>(v));
  }
}

void storeFromInt(DType t, void *p, size_t i, int64_t v) {
  switch (t) {
  case DType::F64:
  case DType::F32:
  case DType::F16:
  case DType::BF16:
    return storeFromDouble(t, p, i, double(v));
  case DType::I64:
    return st<int64_t>(p, i, v);
  case DType::I32:
    return st<int32_t>(p, i, int32_t(uint32_t(v)));
  case DType::I16:
    return st<int16_t>(p, i, int16_t(uint16_t(v)));
  case DType::I8:
    return st<int8_t>(p, i, int8_t(uint8_t(v)));
  case DType::U64:
    return st<uint64_t>(p, i, uint64_t(v));
  case DType::U32:
    return st<uint32_t>(p, i, uint32_t(v));
  case DType::U16:
    return st<uint16_t>(p, i, uint16_t(v));
  case DType::U8:
    return st<uint8_t>(p, i, uint8_t(v));
  case DType::Bool:
    return st<uint8_t>(p, i, v != 0 ? 1 : 0);
  }
}

SaturationRange saturationRange(DType t) {
  switch (t) {
  case DType::U8:
    return {0, 255};
  case DType::I8:
    return {-128, 127};
  case DType::U16:
    return {0, 65535};
  case DType::I16:
    return {-32768, 32767};
  case DType::I32:
    return {-2147483648.0, 2147483647.0};
  default:
    return {-9.2e18, 9.2e18};
  }
}

} // namespace coil
