// Tests of coil_cpu_gemm_bias_* (kernels/cpu/CpuGemm.cpp): random operands against a double
// reference, every dtype, transposes, batch strides (0 shares B), ReLU on and off, k == 0, and
// the argument checks.
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/CpuKernelsImpl.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace coil::cpu;
using BiasFn = decltype(&coil_cpu_gemm_bias_f32);

/// One dtype: its kernel, element size, value rounding and tolerance.
struct Dt {
  const char *name;
  BiasFn fn;
  size_t size;
  double rel;
};

const Dt kDts[] = {{"f32", coil_cpu_gemm_bias_f32, 4, 1e-5},
                   {"f64", coil_cpu_gemm_bias_f64, 8, 1e-12},
                   {"f16", coil_cpu_gemm_bias_f16, 2, 2e-3},
                   {"bf16", coil_cpu_gemm_bias_bf16, 2, 1e-2}};

void put(const Dt &t, std::vector<unsigned char> &buf, size_t i, double v) {
  unsigned char *p = buf.data() + i * t.size;
  if (t.size == 8) {
    std::memcpy(p, &v, 8);
  } else if (t.size == 4) {
    float f = float(v);
    std::memcpy(p, &f, 4);
  } else {
    uint16_t h =
        std::string(t.name) == "f16" ? floatToHalfBits(float(v)) : floatToBf16Bits(float(v));
    std::memcpy(p, &h, 2);
  }
}
double get(const Dt &t, const std::vector<unsigned char> &buf, size_t i) {
  const unsigned char *p = buf.data() + i * t.size;
  if (t.size == 8) {
    double v;
    std::memcpy(&v, p, 8);
    return v;
  }
  if (t.size == 4) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return std::string(t.name) == "f16" ? halfBitsToFloat(h) : bf16BitsToFloat(h);
}

struct Buf {
  std::vector<unsigned char> bytes;
  std::vector<double> vals; ///< the stored (rounded) values
};
Buf randomBuf(const Dt &t, size_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<double> d(-1, 1);
  Buf b;
  b.bytes.resize(n * t.size);
  b.vals.resize(n);
  for (size_t i = 0; i < n; ++i) {
    put(t, b.bytes, i, d(rng));
    b.vals[i] = get(t, b.bytes, i);
  }
  return b;
}

void check(const Dt &t, int64_t batch, int64_t m, int64_t n, int64_t k, bool ta, bool tb,
           bool shareB, bool relu, double alpha) {
  SCOPED_TRACE(std::string(t.name) + " batch " + std::to_string(batch) + " m,n,k " +
               std::to_string(m) + "," + std::to_string(n) + "," + std::to_string(k) + " ta " +
               std::to_string(ta) + " tb " + std::to_string(tb) + " shareB " +
               std::to_string(shareB) + " relu " + std::to_string(relu));
  std::mt19937 rng(unsigned(batch * 1000 + m * 100 + n * 10 + k + (relu ? 7 : 0)));
  int64_t sa = m * k, sb = shareB ? 0 : k * n;
  Buf a = randomBuf(t, size_t(batch * m * k), rng);
  Buf b = randomBuf(t, size_t((shareB ? 1 : batch) * k * n), rng);
  Buf bias = randomBuf(t, size_t(n), rng);
  Buf y = randomBuf(t, size_t(batch * m * n), rng); // garbage in the output
  ASSERT_EQ(t.fn(a.bytes.data(), b.bytes.data(), bias.bytes.data(), y.bytes.data(), batch, m, n, k,
                 ta, tb, sa, sb, alpha, relu),
            0);
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0, mag = 0;
        for (int64_t p = 0; p < k; ++p) {
          double x = a.vals[size_t(bi * sa + (ta ? p * m + i : i * k + p))];
          double w = b.vals[size_t(bi * sb + (tb ? j * k + p : p * n + j))];
          acc += x * w;
          mag += std::fabs(x * w);
        }
        double want = alpha * acc + bias.vals[size_t(j)];
        if (relu && want < 0) want = 0;
        double got = get(t, y.bytes, size_t((bi * m + i) * n + j));
        double bound = t.rel * (std::fabs(want) + std::fabs(alpha) * mag + 1e-3);
        ASSERT_LE(std::fabs(got - want), bound) << "at " << bi << "," << i << "," << j;
        if (relu) {
          ASSERT_GE(got, 0.0);
        }
      }
}

TEST(CpuGemmBias, EveryDtypeTransposeBatchAndRelu) {
  for (const Dt &t : kDts)
    for (int tr = 0; tr < 4; ++tr)
      for (bool relu : {false, true}) {
        check(t, 1, 7, 9, 5, tr & 1, tr & 2, false, relu, 1.0);
        check(t, 3, 4, 6, 8, tr & 1, tr & 2, false, relu, 0.5);
        check(t, 3, 5, 3, 7, tr & 1, tr & 2, true, relu, -1.25);
        check(t, 2, 33, 70, 65, tr & 1, tr & 2, true, relu, 1.0); // parallel epilogue rows
      }
}

TEST(CpuGemmBias, EmptyInnerDimensionWritesTheBias) {
  for (const Dt &t : kDts)
    for (bool relu : {false, true}) check(t, 2, 3, 5, 0, false, false, false, relu, 1.0);
}

TEST(CpuGemmBias, BadSizesFailWithAMessage) {
  float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, bias[2] = {1, -1}, y[4] = {};
  EXPECT_NE(coil_cpu_gemm_bias_f32(a, b, bias, y, 1, -2, 2, 2, 0, 0, 4, 4, 1.0, 0), 0);
  EXPECT_NE(std::string(coil_cpu_last_error()).find("gemm: sizes must be >= 0"), std::string::npos)
      << coil_cpu_last_error();
  EXPECT_NE(coil_cpu_gemm_bias_bf16(a, b, bias, y, 1, 2, 2, 2, 0, 0, -1, 4, 1.0, 0), 0);
  EXPECT_NE(std::string(coil_cpu_last_error()).find("batch strides must be >= 0"),
            std::string::npos)
      << coil_cpu_last_error();
}

} // namespace
