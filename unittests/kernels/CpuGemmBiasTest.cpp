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
        check(t, 2, 33, 70, 65, tr & 1, tr & 2, true, relu, 1.0);
      }
  // Enough rows x columns (>= 2^16) for the epilogue's rows over threads, odd row lengths.
  for (const Dt &t : kDts)
    for (bool relu : {false, true}) check(t, 3, 230, 97, 6, false, false, false, relu, 1.0);
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

TEST(CpuGemmBias, SharedWeightsRunAsOneGemmWithOrWithoutC) {
  // [batch, m, k] x [k, n] with B shared (stride 0) runs as one GEMM over batch * m rows; C per
  // batch, shared (stride 0: not collapsed) and in place (c == y) keep their meaning.
  const int64_t batch = 3, m = 5, n = 6, k = 4, mn = m * n;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-1, 1);
  auto fill = [&](size_t count) {
    std::vector<float> v(count);
    for (float &x : v) x = d(rng);
    return v;
  };
  std::vector<float> a = fill(size_t(batch * m * k)), b = fill(size_t(k * n));
  std::vector<float> c = fill(size_t(batch * mn));
  for (int tb = 0; tb < 2; ++tb)
    for (int mode = 0; mode < 4; ++mode) { // no C, C per batch, C shared, C in place
      SCOPED_TRACE("tb " + std::to_string(tb) + " mode " + std::to_string(mode));
      int64_t sc = mode == 2 ? 0 : mn;
      std::vector<float> y = mode == 3 ? c : fill(size_t(batch * mn));
      double alpha = 0.5, beta = -2.0;
      int32_t rc = mode == 0 ? coil_cpu_gemm_f32(a.data(), b.data(), y.data(), batch, m, n, k, 0,
                                                 tb, m * k, 0, alpha)
                             : coil_cpu_gemm_c_f32(a.data(), b.data(),
                                                   mode == 3 ? y.data() : c.data(), y.data(), batch,
                                                   m, n, k, 0, tb, m * k, 0, sc, alpha, beta);
      ASSERT_EQ(rc, 0);
      for (int64_t bi = 0; bi < batch; ++bi)
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double acc = 0;
            for (int64_t p = 0; p < k; ++p)
              acc += double(a[size_t((bi * m + i) * k + p)]) *
                     double(b[size_t(tb ? j * k + p : p * n + j)]);
            double want = alpha * acc;
            if (mode != 0) want += beta * double(c[size_t(bi * sc + i * n + j)]);
            ASSERT_NEAR(y[size_t((bi * m + i) * n + j)], want, 1e-5) << bi << "," << i << "," << j;
          }
    }
}

} // namespace
