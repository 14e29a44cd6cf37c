// Tests of scalar conversions: f16/bf16 rounding from double is correct (rounded once).
#include "support/DType.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace coil;

TEST(DType, HalfRoundsOnceFromDouble) {
  uint16_t h;
  // 1 + 2^-11 is a tie between 1 and 1 + 2^-10 (ties to even: 1). A hair above it must round
  // up; rounding through float first would lose the hair (1 + 2^-11 + 2^-40 -> 1 + 2^-11) and
  // then round the tie down.
  storeFromDouble(DType::F16, &h, 0, 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40));
  EXPECT_EQ(halfToFloat(h), float(1.0 + std::ldexp(1.0, -10)));
  storeFromDouble(DType::F16, &h, 0, 1.0 + std::ldexp(1.0, -11));
  EXPECT_EQ(halfToFloat(h), 1.0f);
  storeFromDouble(DType::F16, &h, 0, -(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)));
  EXPECT_EQ(halfToFloat(h), -float(1.0 + std::ldexp(1.0, -10)));
}

TEST(DType, Bf16RoundsOnceFromDouble) {
  uint16_t b;
  storeFromDouble(DType::BF16, &b, 0, 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40));
  EXPECT_EQ(bf16ToFloat(b), float(1.0 + std::ldexp(1.0, -7)));
  storeFromDouble(DType::BF16, &b, 0, 1.0 + std::ldexp(1.0, -8));
  EXPECT_EQ(bf16ToFloat(b), 1.0f);
}

TEST(DType, OutOfRangeDoublesBecomeInfinity) {
  float f;
  storeFromDouble(DType::F32, &f, 0, 1e300);
  EXPECT_TRUE(std::isinf(f) && f > 0);
  storeFromDouble(DType::F32, &f, 0, -1e300);
  EXPECT_TRUE(std::isinf(f) && f < 0);
  storeFromDouble(DType::F32, &f, 0, double(std::numeric_limits<float>::max()) * (1 + 1e-12));
  EXPECT_EQ(f, std::numeric_limits<float>::max());
  uint16_t h;
  storeFromDouble(DType::F16, &h, 0, 1e300);
  EXPECT_TRUE(std::isinf(halfToFloat(h)));
  storeFromDouble(DType::F16, &h, 0, std::nan(""));
  EXPECT_TRUE(std::isnan(halfToFloat(h)));
}

TEST(DType, IntegerStoresWrapAndFloatLoadsSaturate) {
  int8_t i8;
  storeFromInt(DType::I8, &i8, 0, 300);
  EXPECT_EQ(i8, int8_t(44));
  double big = 1e30;
  EXPECT_EQ(loadAsInt(DType::F64, &big, 0), std::numeric_limits<int64_t>::max());
  double nan = std::nan("");
  EXPECT_EQ(loadAsInt(DType::F64, &nan, 0), 0);
}
