// Tests of the f16 / bf16 GEMM and convolution kernels of kernels/cpu: random inputs against a
// double reference on the same (already rounded) values.
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/CpuKernelsImpl.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <gtest/gtest.h>
#include <random>
#include <sys/resource.h>
#include <vector>

namespace {

using namespace coil::cpu;

struct Half {
  static constexpr const char *kName = "f16";
  static uint16_t store(float v) { return floatToHalfBits(v); }
  static float load(uint16_t v) { return halfBitsToFloat(v); }
  static constexpr double kRel = 2e-3; // 2^-11 rounding of the result, f32 accumulation
};
struct Bf16 {
  static constexpr const char *kName = "bf16";
  static uint16_t store(float v) { return floatToBf16Bits(v); }
  static float load(uint16_t v) { return bf16BitsToFloat(v); }
  static constexpr double kRel = 1e-2; // 2^-8
};

/// Random 16-bit values in [-1, 1) and their exact double values.
template <typename H>
void randomHalf(size_t n, unsigned seed, std::vector<uint16_t> &bits, std::vector<double> &vals) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  bits.resize(n);
  vals.resize(n);
  for (size_t i = 0; i < n; ++i) {
    bits[i] = H::store(d(rng));
    vals[i] = H::load(bits[i]);
  }
}

template <typename H>
void callGemm(const uint16_t *a, const uint16_t *b, const uint16_t *c, uint16_t *y, int64_t batch,
              int64_t m, int64_t n, int64_t k, int64_t ta, int64_t tb, int64_t sa, int64_t sb,
              int64_t sc, double alpha, double beta) {
  bool f16 = std::is_same_v<H, Half>;
  if (c)
    (f16 ? coil_cpu_gemm_c_f16 : coil_cpu_gemm_c_bf16)(a, b, c, y, batch, m, n, k, ta, tb, sa, sb,
                                                       sc, alpha, beta);
  else
    (f16 ? coil_cpu_gemm_f16 : coil_cpu_gemm_bf16)(a, b, y, batch, m, n, k, ta, tb, sa, sb, alpha);
}

template <typename H> void checkHalfGemm(int64_t batch, int64_t m, int64_t n, int64_t k) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (int bcast = 0; bcast < 3; ++bcast)     // 0 none, 1 A shared, 2 B shared
        for (int withC = 0; withC < 3; ++withC) { // 0 none, 1 C per batch, 2 C shared
          SCOPED_TRACE(testing::Message()
                       << H::kName << " ta " << ta << " tb " << tb << " bcast " << bcast << " C "
                       << withC << " batch,m,n,k " << batch << "," << m << "," << n << "," << k);
          int64_t sa = bcast == 1 ? 0 : m * k, sb = bcast == 2 ? 0 : k * n;
          int64_t sc = withC == 2 ? 0 : m * n;
          std::vector<uint16_t> a, b, c;
          std::vector<double> av, bv, cv;
          randomHalf<H>(size_t((bcast == 1 ? 1 : batch) * m * k), 3 + unsigned(ta), a, av);
          randomHalf<H>(size_t((bcast == 2 ? 1 : batch) * k * n), 5 + unsigned(tb), b, bv);
          randomHalf<H>(size_t((withC == 2 ? 1 : batch) * m * n), 9, c, cv);
          double alpha = 0.5, beta = -1.5;
          std::vector<uint16_t> y(size_t(batch * m * n), H::store(42));
          callGemm<H>(a.data(), b.data(), withC ? c.data() : nullptr, y.data(), batch, m, n, k, ta,
                      tb, sa, sb, sc, alpha, beta);
          for (int64_t bi = 0; bi < batch; ++bi)
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j) {
                double acc = 0, mag = 0;
                for (int64_t p = 0; p < k; ++p) {
                  double t = av[size_t(bi * sa + (ta ? p * m + i : i * k + p))] *
                             bv[size_t(bi * sb + (tb ? j * k + p : p * n + j))];
                  acc += t;
                  mag += std::fabs(t);
                }
                double ref = alpha * acc;
                if (withC) ref += beta * cv[size_t(bi * sc + i * n + j)];
                double got = H::load(y[size_t((bi * m + i) * n + j)]);
                // Rounding of the result plus f32 accumulation error.
                double tol = H::kRel * std::fabs(ref) + 1e-6 * mag + 1e-6;
                ASSERT_NEAR(got, ref, tol) << "at " << bi << "," << i << "," << j;
              }
        }
}

TEST(CpuKernelsHalfGemm, OddSizesF16) {
  checkHalfGemm<Half>(3, 7, 5, 9);
  checkHalfGemm<Half>(1, 1, 1, 1);
}
TEST(CpuKernelsHalfGemm, OddSizesBf16) {
  checkHalfGemm<Bf16>(2, 7, 1, 13);
}
TEST(CpuKernelsHalfGemm, LargerF16AndBf16) {
  checkHalfGemm<Half>(2, 33, 65, 129);
  checkHalfGemm<Bf16>(1, 65, 17, 130);
}

TEST(CpuKernelsHalfGemm, RoundsOnceFromF32) {
  // 1 + 2^-11 + 2^-12 is not an f16: a single rounding gives 1 + 2^-10.
  uint16_t one = floatToHalfBits(1.0f),
           a[3] = {one, floatToHalfBits(0x1p-11f), floatToHalfBits(0x1p-12f)};
  uint16_t b[3] = {one, one, one}, y = 0;
  coil_cpu_gemm_f16(a, b, &y, 1, 1, 1, 3, 0, 0, 0, 0, 1.0);
  EXPECT_EQ(halfBitsToFloat(y), 1.0f + 0x1p-10f);
}

TEST(CpuKernelsHalfGemm, EmptyInnerDimensionAndInvalidSizes) {
  std::vector<uint16_t> y(6, floatToHalfBits(5)), c(6);
  for (size_t i = 0; i < 6; ++i) c[i] = floatToHalfBits(float(i) - 2.5f);
  coil_cpu_gemm_f16(nullptr, nullptr, y.data(), 1, 2, 3, 0, 0, 0, 0, 0, 1.0);
  for (uint16_t v : y) EXPECT_EQ(halfBitsToFloat(v), 0.0f);
  coil_cpu_gemm_c_bf16(nullptr, nullptr, c.data(), y.data(), 1, 2, 3, 0, 0, 0, 0, 0, 0, 1.0, 2.0);
  // c holds f16 bits; read as bf16 they are other numbers: compare in bf16.
  for (size_t i = 0; i < 6; ++i)
    EXPECT_EQ(bf16BitsToFloat(y[i]), bf16BitsToFloat(floatToBf16Bits(2 * bf16BitsToFloat(c[i]))));
  std::vector<uint16_t> a(4, floatToHalfBits(1)), b(4, floatToHalfBits(1)),
      z(4, floatToHalfBits(9));
  coil_cpu_gemm_f16(a.data(), b.data(), z.data(), 1, -2, 2, 2, 0, 0, 0, 0, 1.0);
  coil_cpu_gemm_bf16(a.data(), b.data(), z.data(), 2, 2, 2, 2, 0, 0, -4, 0, 1.0);
  coil_cpu_gemm_f16(a.data(), b.data(), z.data(), 1, INT64_MAX, INT64_MAX, 2, 0, 0, 0, 0, 1.0);
  for (uint16_t v : z) EXPECT_EQ(halfBitsToFloat(v), 9.0f);
}

// --- Convolutions: f16 / bf16 against the f32 kernels on the same values

template <typename H> void checkHalfConv(bool transpose) {
  // 2-D: n 2, c 4, m 6, group 2, in 7x6, k 3x2, stride 2x1, dilation 1x2, pads 1x0.
  int64_t n = 2, c = 4, m = 6, group = 2, in0 = 7, in1 = 6, k0 = 3, k1 = 2;
  int64_t s0 = 2, s1 = 1, d0 = 1, d1 = 2, p0 = 1, p1 = 0;
  int64_t out0, out1;
  if (!transpose) {
    out0 = (in0 + 2 * p0 - ((k0 - 1) * d0 + 1)) / s0 + 1;
    out1 = (in1 + 2 * p1 - ((k1 - 1) * d1 + 1)) / s1 + 1;
  } else {
    out0 = (in0 - 1) * s0 - 2 * p0 + (k0 - 1) * d0 + 1;
    out1 = (in1 - 1) * s1 - 2 * p1 + (k1 - 1) * d1 + 1;
  }
  int64_t wSize = transpose ? c * (m / group) * k0 * k1 : m * (c / group) * k0 * k1;
  std::vector<uint16_t> x, w;
  std::vector<double> xv, wv;
  randomHalf<H>(size_t(n * c * in0 * in1), 21, x, xv);
  randomHalf<H>(size_t(wSize), 22, w, wv);
  std::vector<float> x32(xv.begin(), xv.end()), w32(wv.begin(), wv.end());
  size_t ySize = size_t(n * m * out0 * out1);
  std::vector<float> ref(ySize, 7.0f);
  std::vector<uint16_t> y(ySize, H::store(7));
  bool f16 = std::is_same_v<H, Half>;
  auto f32Fn = transpose ? coil_cpu_conv_transpose_f32 : coil_cpu_conv_f32;
  auto halfFn = transpose ? (f16 ? coil_cpu_conv_transpose_f16 : coil_cpu_conv_transpose_bf16)
                          : (f16 ? coil_cpu_conv_f16 : coil_cpu_conv_bf16);
  f32Fn(x32.data(), w32.data(), ref.data(), n, c, m, group, 2, in0, in1, 1, k0, k1, 1, out0, out1,
        1, s0, s1, 1, d0, d1, 1, p0, p1, 0);
  halfFn(x.data(), w.data(), y.data(), n, c, m, group, 2, in0, in1, 1, k0, k1, 1, out0, out1, 1, s0,
         s1, 1, d0, d1, 1, p0, p1, 0);
  // The f16 result is the f32 result rounded once.
  for (size_t i = 0; i < ySize; ++i) ASSERT_EQ(y[i], H::store(ref[i])) << H::kName << " at " << i;
}

TEST(CpuKernelsHalfConv, ConvAndTransposeRoundTheF32Result) {
  checkHalfConv<Half>(false);
  checkHalfConv<Bf16>(false);
  checkHalfConv<Half>(true);
  checkHalfConv<Bf16>(true);
}

/// Runs the f16 GEMM, conv and conv-transpose kernels in a child process whose address space is
/// capped below what their f32 copies need: they must fall back to direct loops and still be
/// right.
TEST(CpuKernelsHalfDeathTest, FallBackToDirectLoopsWithoutMemory) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto run = [] {
    // GEMM 1 x 1 x 4M: f32 copies of 16 MB per operand. Convs 1x1 over a 3000x3000 image: an
    // f32 copy of 36 MB.
    const int64_t K = int64_t(1) << 22, H = 3000;
    std::vector<uint16_t> a, b, x, w;
    std::vector<double> av, bv, xv, wv;
    randomHalf<Half>(size_t(K), 31, a, av);
    randomHalf<Half>(size_t(K), 32, b, bv);
    randomHalf<Half>(size_t(H * H), 33, x, xv);
    randomHalf<Half>(1, 34, w, wv);
    double ref = 0, mag = 0;
    for (size_t i = 0; i < size_t(K); ++i) ref += av[i] * bv[i], mag += std::fabs(av[i] * bv[i]);
    std::vector<uint16_t> y(1, 0), yc(size_t(H * H), 0), yt(size_t(H * H), 0);
    rlimit cap{};
    getrlimit(RLIMIT_AS, &cap);
    FILE *f = std::fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (!f || std::fscanf(f, "%lu", &pages) != 1) std::exit(3);
    std::fclose(f);
    cap.rlim_cur = rlim_t(pages) * 4096 + (24u << 20); // the inputs fit, the f32 copies do not
    if (setrlimit(RLIMIT_AS, &cap) != 0) std::exit(4);
    coil_cpu_gemm_f16(a.data(), b.data(), y.data(), 1, 1, 1, K, 0, 0, 0, 0, 1.0);
    coil_cpu_conv_f16(x.data(), w.data(), yc.data(), 1, 1, 1, 1, 2, H, H, 1, 1, 1, 1, H, H, 1, 1, 1,
                      1, 1, 1, 1, 0, 0, 0);
    coil_cpu_conv_transpose_f16(x.data(), w.data(), yt.data(), 1, 1, 1, 1, 2, H, H, 1, 1, 1, 1, H,
                                H, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0);
    if (!(std::fabs(halfBitsToFloat(y[0]) - ref) <= 2e-3 * std::fabs(ref) + 1e-5 * mag))
      std::exit(5);
    for (size_t i = 0; i < yc.size(); ++i) {
      uint16_t want = floatToHalfBits(float(xv[i]) * float(wv[0])); // exact product, one rounding
      if (yc[i] != want) std::exit(6);
      if (yt[i] != want) std::exit(7);
    }
    std::exit(0);
  };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(0), "");
}

} // namespace
