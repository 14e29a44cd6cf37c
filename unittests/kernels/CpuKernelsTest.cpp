// Tests of the CPU extern kernels (kernels/cpu) against naive loops on random data.
#include "kernels/cpu/CpuKernels.h"

#include "kernels/cpu/CpuKernelsImpl.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <gtest/gtest.h>
#include <numeric>
#include <random>
#include <string>
#include <sys/resource.h>
#include <thread>
#include <vector>

namespace {

std::vector<double> randomDoubles(size_t n, unsigned seed, double lo = -1, double hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (double &x : v) x = d(rng);
  return v;
}
template <typename T> std::vector<T> cast(const std::vector<double> &v) {
  return std::vector<T>(v.begin(), v.end());
}

// --- GEMM

/// Naive reference: y[b] = alpha * op(a_b) op(b_b) + beta * c_b.
std::vector<double> naiveGemm(const std::vector<double> &a, const std::vector<double> &b,
                              const std::vector<double> *c, int64_t batch, int64_t m, int64_t n,
                              int64_t k, bool ta, bool tb, int64_t sa, int64_t sb, int64_t sc,
                              double alpha, double beta) {
  std::vector<double> y(size_t(batch * m * n));
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += a[size_t(bi * sa + (ta ? p * m + i : i * k + p))] *
                 b[size_t(bi * sb + (tb ? j * k + p : p * n + j))];
        double v = alpha * acc;
        if (c) v += beta * (*c)[size_t(bi * sc + i * n + j)];
        y[size_t((bi * m + i) * n + j)] = v;
      }
  return y;
}

template <typename T> void checkGemm(int64_t batch, int64_t m, int64_t n, int64_t k, double tol) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (int broadcastA = 0; broadcastA < 2; ++broadcastA)
        for (int withC = 0; withC < 2; ++withC) {
          SCOPED_TRACE(testing::Message()
                       << "ta " << ta << " tb " << tb << " bA " << broadcastA << " C " << withC
                       << " m,n,k " << m << "," << n << "," << k);
          int64_t sa = broadcastA ? 0 : m * k, sb = k * n, sc = withC == 1 ? 0 : m * n;
          auto a = randomDoubles(size_t((broadcastA ? 1 : batch) * m * k), 1 + unsigned(ta));
          auto b = randomDoubles(size_t(batch * k * n), 7 + unsigned(tb));
          auto c = randomDoubles(size_t(m * n), 11);
          double alpha = 0.75, beta = -1.25;
          auto ref = naiveGemm(a, b, withC ? &c : nullptr, batch, m, n, k, ta, tb, sa, sb, sc,
                               alpha, beta);
          auto at = cast<T>(a), bt = cast<T>(b), ct = cast<T>(c);
          std::vector<T> y(size_t(batch * m * n), T(42));
          if constexpr (std::is_same_v<T, float>) {
            if (withC)
              coil_cpu_gemm_c_f32(at.data(), bt.data(), ct.data(), y.data(), batch, m, n, k, ta, tb,
                                  sa, sb, sc, alpha, beta);
            else
              coil_cpu_gemm_f32(at.data(), bt.data(), y.data(), batch, m, n, k, ta, tb, sa, sb,
                                alpha);
          } else {
            if (withC)
              coil_cpu_gemm_c_f64(at.data(), bt.data(), ct.data(), y.data(), batch, m, n, k, ta, tb,
                                  sa, sb, sc, alpha, beta);
            else
              coil_cpu_gemm_f64(at.data(), bt.data(), y.data(), batch, m, n, k, ta, tb, sa, sb,
                                alpha);
          }
          for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(double(y[i]), ref[i], tol) << i;
        }
}

TEST(CpuKernelsGemm, SmallOddSizesF32) {
  checkGemm<float>(3, 5, 7, 9, 1e-5);
}
TEST(CpuKernelsGemm, SmallOddSizesF64) {
  checkGemm<double>(4, 3, 1, 6, 1e-12);
}
TEST(CpuKernelsGemm, LargerSerialBatchesF32) {
  checkGemm<float>(2, 67, 71, 129, 1e-4);
}
TEST(CpuKernelsGemm, EmptyInnerDimensionWritesZerosOrC) {
  std::vector<float> y(6, 5.0f), c{1, 2, 3, 4, 5, 6};
  coil_cpu_gemm_f32(nullptr, nullptr, y.data(), 1, 2, 3, 0, 0, 0, 0, 0, 1.0);
  for (float v : y) EXPECT_EQ(v, 0.0f);
  coil_cpu_gemm_c_f32(nullptr, nullptr, c.data(), y.data(), 1, 2, 3, 0, 0, 0, 0, 0, 0, 1.0, 2.0);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(y[i], 2 * c[i]);
}
TEST(CpuKernelsGemm, InvalidSizesFailWithAMessage) {
  std::vector<float> a(4, 1), b(4, 1), y(4, 9);
  EXPECT_EQ(coil_cpu_gemm_f32(a.data(), b.data(), y.data(), 1, 2, 2, 2, 0, 0, 0, 0, 1.0), 0);
  std::fill(y.begin(), y.end(), 9.0f);
  EXPECT_NE(coil_cpu_gemm_f32(a.data(), b.data(), y.data(), 1, -2, 2, 2, 0, 0, 0, 0, 1.0), 0);
  EXPECT_STREQ(coil_cpu_last_error(), "gemm: sizes must be >= 0, got batch 1, m -2, n 2, k 2");
  EXPECT_NE(coil_cpu_gemm_f32(a.data(), b.data(), y.data(), -1, 2, 2, 2, 0, 0, 0, 0, 1.0), 0);
  EXPECT_NE(coil_cpu_gemm_f32(a.data(), b.data(), y.data(), 2, 2, 2, 2, 0, 0, -4, 0, 1.0), 0);
  EXPECT_STREQ(coil_cpu_last_error(), "gemm: batch strides must be >= 0, got -4, 0, 0");
  EXPECT_NE(
      coil_cpu_gemm_f32(a.data(), b.data(), y.data(), 1, INT64_MAX, INT64_MAX, 2, 0, 0, 0, 0, 1.0),
      0);
  EXPECT_NE(std::string(coil_cpu_last_error()).find("overflow"), std::string::npos);
  EXPECT_NE(
      coil_cpu_gemm_c_f64(nullptr, nullptr, nullptr, nullptr, 1, 2, 2, 2, 0, 0, 0, 0, -1, 1.0, 1.0),
      0);
  for (float v : y) EXPECT_EQ(v, 9.0f);
}

// --- Convolution

struct ConvCase {
  int64_t n, c, m, group;
  std::vector<int64_t> in, k, s, d, pb, pe;
  std::vector<int64_t> out() const {
    std::vector<int64_t> o;
    for (size_t i = 0; i < in.size(); ++i)
      o.push_back((in[i] + pb[i] + pe[i] - ((k[i] - 1) * d[i] + 1)) / s[i] + 1);
    return o;
  }
};
int64_t prod(const std::vector<int64_t> &v) {
  return std::accumulate(v.begin(), v.end(), int64_t(1), std::multiplies<int64_t>());
}
/// Calls `f(outFlat, kernelFlat, inFlat)` for every (output, kernel) pair inside the input,
/// with positions (o * s - p + kk * d).
template <typename F>
void forWindow(const std::vector<int64_t> &in, const std::vector<int64_t> &k,
               const std::vector<int64_t> &out, const std::vector<int64_t> &s,
               const std::vector<int64_t> &d, const std::vector<int64_t> &p, F f) {
  size_t nd = in.size();
  for (int64_t o = 0; o < prod(out); ++o)
    for (int64_t kk = 0; kk < prod(k); ++kk) {
      int64_t flat = 0, ro = o, rk = kk, mul = 1;
      bool inside = true;
      std::vector<int64_t> oi(nd), ki(nd);
      for (size_t j = nd; j-- > 0;) {
        oi[j] = ro % out[j], ro /= out[j];
        ki[j] = rk % k[j], rk /= k[j];
      }
      for (size_t j = nd; j-- > 0;) {
        int64_t pos = oi[j] * s[j] - p[j] + ki[j] * d[j];
        inside = inside && pos >= 0 && pos < in[j];
        flat += pos * mul;
        mul *= in[j];
      }
      if (inside) f(o, kk, flat);
    }
}

std::vector<int64_t> pad3(std::vector<int64_t> v, int64_t fill) {
  v.resize(3, fill);
  return v;
}

template <typename T> void checkConv(const ConvCase &cc, double tol) {
  auto out = cc.out();
  int64_t inS = prod(cc.in), kS = prod(cc.k), outS = prod(out), cg = cc.c / cc.group,
          mg = cc.m / cc.group;
  auto x = randomDoubles(size_t(cc.n * cc.c * inS), 3),
       w = randomDoubles(size_t(cc.m * cg * kS), 4);
  std::vector<double> ref(size_t(cc.n * cc.m * outS), 0.0);
  for (int64_t b = 0; b < cc.n; ++b)
    for (int64_t oc = 0; oc < cc.m; ++oc) {
      int64_t g = oc / mg;
      for (int64_t ic = 0; ic < cg; ++ic)
        forWindow(cc.in, cc.k, out, cc.s, cc.d, cc.pb, [&](int64_t o, int64_t kk, int64_t i) {
          ref[size_t((b * cc.m + oc) * outS + o)] +=
              x[size_t((b * cc.c + g * cg + ic) * inS + i)] * w[size_t((oc * cg + ic) * kS + kk)];
        });
    }
  auto xt = cast<T>(x), wt = cast<T>(w);
  std::vector<T> y(ref.size(), T(77));
  auto in = pad3(cc.in, 1), k = pad3(cc.k, 1), o = pad3(out, 1), s = pad3(cc.s, 1),
       d = pad3(cc.d, 1), p = pad3(cc.pb, 0);
  auto fn = std::is_same_v<T, float> ? coil_cpu_conv_f32 : coil_cpu_conv_f64;
  fn(xt.data(), wt.data(), y.data(), cc.n, cc.c, cc.m, cc.group, int64_t(cc.in.size()), in[0],
     in[1], in[2], k[0], k[1], k[2], o[0], o[1], o[2], s[0], s[1], s[2], d[0], d[1], d[2], p[0],
     p[1], p[2]);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(double(y[i]), ref[i], tol) << i;
}

TEST(CpuKernelsConv, OneDimensionalGroupsDilationPadding) {
  checkConv<float>({2, 6, 4, 2, {11}, {3}, {2}, {2}, {1}, {2}}, 1e-5);
  checkConv<double>({3, 3, 5, 1, {7}, {2}, {1}, {3}, {0}, {1}}, 1e-12);
}
TEST(CpuKernelsConv, TwoDimensional) {
  checkConv<float>({2, 4, 6, 2, {9, 8}, {3, 2}, {2, 1}, {1, 2}, {1, 0}, {2, 1}}, 1e-5);
  checkConv<double>({1, 3, 3, 3, {5, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, 1e-12);
  // 1x1 convolution (no im2col) and a kernel larger than the unpadded input.
  checkConv<float>({2, 5, 3, 1, {4, 3}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}}, 1e-5);
  checkConv<float>({1, 2, 2, 1, {2, 2}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, 1e-5);
}
TEST(CpuKernelsConv, DepthwiseDirectLoops) {
  // One input channel per group (two output channels each): strides, dilations, uneven pads;
  // enough channels for the parallel loop.
  checkConv<float>({3, 8, 16, 8, {20, 18}, {3, 3}, {2, 1}, {1, 2}, {1, 2}, {1, 0}}, 1e-5);
  checkConv<double>({2, 5, 5, 5, {13}, {5}, {1}, {1}, {2}, {2}}, 1e-12);
  checkConv<float>({1, 4, 4, 4, {3, 4, 5}, {2, 2, 3}, {1, 2, 1}, {2, 1, 1}, {1, 0, 1}, {0, 1, 1}},
                   1e-5);
  // 3x3 windows (registers, from a padded channel): strides 1 and 2, uneven and no pads, rows
  // of several lengths, and a 3-D 1x3x3 window (the general loops).
  checkConv<float>({2, 6, 6, 6, {16, 16}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, 1e-5);
  checkConv<float>({2, 4, 8, 4, {9, 12}, {3, 3}, {2, 2}, {1, 1}, {1, 0}, {1, 2}}, 1e-5);
  checkConv<double>({1, 3, 3, 3, {7, 5}, {3, 3}, {3, 1}, {1, 1}, {0, 0}, {0, 0}}, 1e-12);
  checkConv<float>({1, 3, 3, 3, {2, 6, 6}, {1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}},
                   1e-5);
  // A single input channel (group 1) takes the same path.
  checkConv<float>({2, 1, 3, 1, {9, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, 1e-5);
}
TEST(CpuKernelsConv, DepthwiseFlatPlanes) {
  // The flat 3x3 path (equal strides 1 or 2, pads >= 0): planes of 1x1 to 32x32, pads 0 to 2
  // (uneven), a depth multiplier of 2, f64, and enough channels for the threads.
  for (int64_t side : {1, 2, 4, 7, 32})
    for (int64_t s : {1, 2})
      checkConv<float>({4, 24, 24, 24, {side, side}, {3, 3}, {s, s}, {1, 1}, {1, 1}, {1, 1}}, 1e-5);
  checkConv<float>({2, 5, 10, 5, {6, 9}, {3, 3}, {2, 2}, {1, 1}, {2, 0}, {0, 2}}, 1e-5);
  checkConv<double>({3, 4, 4, 4, {5, 3}, {3, 3}, {1, 1}, {1, 1}, {0, 2}, {1, 0}}, 1e-12);
  checkConv<float>({4, 96, 96, 96, {16, 16}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}}, 1e-5);
}
TEST(CpuKernelsConv, ImagesInParallel) {
  // Small images (one GEMM per image, images over threads) and larger ones.
  checkConv<float>({4, 5, 7, 1, {12, 12}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, 1e-4);
  checkConv<float>({3, 16, 32, 1, {20, 20}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, 1e-4);
  checkConv<double>({5, 6, 4, 2, {9, 7}, {1, 1}, {2, 2}, {1, 1}, {0, 0}, {0, 0}}, 1e-12);
  // Output rows of 4, 8, 16 and 32 elements (the unrolled copies of the padded im2col), a
  // strided last dim, and a negative pad (plain im2col).
  for (int64_t side : {4, 8, 16, 32})
    checkConv<float>({2, 3, 4, 1, {side, side}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, 1e-4);
  checkConv<float>({2, 3, 4, 1, {9, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}}, 1e-4);
  // Stride-2 stems (every other element copied into the columns): odd and even sides, uneven
  // pads, f32 (AVX2 where the CPU has it) and f64.
  checkConv<float>({2, 3, 8, 1, {64, 64}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}}, 1e-4);
  checkConv<float>({3, 3, 5, 1, {33, 20}, {3, 3}, {2, 2}, {1, 1}, {1, 2}, {0, 1}}, 1e-4);
  checkConv<double>({2, 2, 3, 1, {17, 12}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}}, 1e-12);
  checkConv<double>({2, 2, 3, 1, {5, 10}, {2, 3}, {1, 1}, {2, 1}, {2, -1}, {1, 2}}, 1e-12);
  // One large image: im2col's rows over threads, then BLAS's threads (a negative pad keeps the
  // plain im2col; the second is padded).
  checkConv<float>({1, 8, 8, 1, {40, 40}, {3, 3}, {1, 1}, {1, 1}, {-1, 1}, {1, -1}}, 1e-4);
  checkConv<float>({1, 8, 8, 1, {40, 40}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, 1e-4);
}
/// The f32 1-D/2-D columns of masked loads (AVX-512 CPUs): rows of 1 to 40 outputs (one
/// vector, several, a tail), strides 1 and 2 along the row (any stride between rows), pads
/// wider than the window, negative pads, dilations, 1x1 strided and 1-D convolutions; small
/// planes (permutes of registers).
void maskedColumnCases() {
  for (int64_t side : {1, 3, 4, 5, 8, 15, 16, 17, 31, 32, 33, 40})
    for (int64_t s : {1, 2})
      checkConv<float>({2, 3, 5, 1, {side, side}, {3, 3}, {s, s}, {1, 1}, {1, 1}, {1, 1}}, 1e-4);
  checkConv<float>({2, 4, 6, 2, {9, 37}, {3, 3}, {1, 2}, {1, 1}, {3, 4}, {2, 5}}, 1e-4);
  checkConv<float>({2, 4, 6, 1, {11, 35}, {3, 3}, {2, 1}, {2, 3}, {2, 3}, {1, 4}}, 1e-4);
  checkConv<float>({2, 3, 4, 1, {9, 20}, {3, 3}, {1, 2}, {1, 1}, {-1, -2}, {1, 2}}, 1e-4);
  checkConv<float>({3, 16, 32, 1, {16, 16}, {1, 1}, {2, 2}, {1, 1}, {0, 0}, {0, 0}}, 1e-4);
  checkConv<float>({2, 3, 5, 1, {50}, {4}, {2}, {1}, {2}, {3}}, 1e-4);
  checkConv<float>({2, 3, 5, 1, {50}, {4}, {1}, {3}, {5}, {0}}, 1e-4);
  // Rows of whole vectors and 64+ columns (the implicit GEMM of masked loads): output channels
  // 8 + 4 + 1, groups, row strides, dilations, wide and uneven pads, 1-D.
  checkConv<float>({2, 8, 13, 1, {16, 16}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, 1e-4);
  checkConv<float>({3, 16, 12, 2, {12, 32}, {3, 3}, {2, 1}, {1, 2}, {1, 2}, {2, 2}}, 1e-4);
  checkConv<float>({1, 8, 8, 1, {5, 44}, {3, 5}, {1, 1}, {2, 1}, {2, 5}, {2, 3}}, 1e-4);
  checkConv<float>({2, 20, 9, 1, {66}, {4}, {1}, {1}, {0}, {1}}, 1e-4);
  checkConv<float>({2, 8, 9, 1, {10, 18}, {3, 3}, {1, 1}, {1, 1}, {-1, -1}, {1, 1}}, 1e-4);
}
TEST(CpuKernelsConv, MaskedColumns2d) {
  maskedColumnCases();
}
TEST(CpuKernelsConv, ThreeDimensional) {
  checkConv<float>({2, 4, 4, 2, {5, 4, 6}, {2, 3, 2}, {1, 2, 2}, {2, 1, 1}, {1, 1, 0}, {0, 1, 1}},
                   1e-5);
}
/// coil_cpu_conv_bias_* against coil_cpu_conv_* followed by the bias and clamps in T (the
/// same operations in the same order, so the results are identical).
template <typename T> void checkConvBias(const ConvCase &cc, int64_t clamp, double lo, double hi) {
  auto out = cc.out();
  int64_t cg = cc.c / cc.group, outS = prod(out);
  auto x = cast<T>(randomDoubles(size_t(cc.n * cc.c * prod(cc.in)), 7));
  auto w = cast<T>(randomDoubles(size_t(cc.m * cg * prod(cc.k)), 8));
  auto bias = cast<T>(randomDoubles(size_t(cc.m), 9));
  std::vector<T> plain(size_t(cc.n * cc.m * outS), T(77)), fused(plain.size(), T(55));
  auto in = pad3(cc.in, 1), k = pad3(cc.k, 1), o = pad3(out, 1), s = pad3(cc.s, 1),
       d = pad3(cc.d, 1), p = pad3(cc.pb, 0);
  auto fn = std::is_same_v<T, float> ? coil_cpu_conv_f32 : coil_cpu_conv_f64;
  auto fnBias = std::is_same_v<T, float> ? coil_cpu_conv_bias_f32 : coil_cpu_conv_bias_f64;
  int64_t nd = int64_t(cc.in.size());
  ASSERT_EQ(fn(x.data(), w.data(), plain.data(), cc.n, cc.c, cc.m, cc.group, nd, in[0], in[1],
               in[2], k[0], k[1], k[2], o[0], o[1], o[2], s[0], s[1], s[2], d[0], d[1], d[2], p[0],
               p[1], p[2]),
            0);
  ASSERT_EQ(fnBias(x.data(), w.data(), bias.data(), fused.data(), cc.n, cc.c, cc.m, cc.group, nd,
                   in[0], in[1], in[2], k[0], k[1], k[2], o[0], o[1], o[2], s[0], s[1], s[2], d[0],
                   d[1], d[2], p[0], p[1], p[2], clamp, lo, hi),
            0);
  for (size_t i = 0; i < plain.size(); ++i) {
    T v = plain[i] + bias[(i / size_t(outS)) % size_t(cc.m)];
    if (clamp & 1) v = v < T(lo) ? T(lo) : v;
    if (clamp & 2) v = v > T(hi) ? T(hi) : v;
    ASSERT_EQ(fused[i], v) << i;
  }
}

TEST(CpuKernelsConv, BiasAndClampFused) {
  // Every path: im2col + GEMM (images in parallel), 1x1, flat depthwise (strides 1 and 2, a
  // depth multiplier), the general depthwise loops, 1-D and 3-D; no clamp, ReLU, Clip.
  for (int64_t clamp = 0; clamp < 4; ++clamp) {
    double lo = clamp == 2 ? -0.5 : 0.0, hi = 0.75;
    checkConvBias<float>({4, 5, 7, 1, {12, 12}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, clamp, lo,
                         hi);
    checkConvBias<float>({3, 6, 9, 1, {4, 4}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}}, clamp, lo,
                         hi);
    checkConvBias<float>({2, 8, 16, 8, {9, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}}, clamp, lo,
                         hi);
    checkConvBias<float>({2, 4, 4, 4, {7, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, clamp, lo,
                         hi);
    checkConvBias<float>({2, 4, 8, 4, {10, 9}, {3, 3}, {2, 1}, {1, 1}, {1, 0}, {1, 2}}, clamp, lo,
                         hi);
    checkConvBias<double>({2, 3, 4, 1, {11}, {3}, {2}, {1}, {1}, {1}}, clamp, lo, hi);
    // Output planes of 1, 2, 4 and 8 (the flat AVX-512 epilogue, channels not a multiple of
    // the rows per vector), 3 (per row) and 20 (a masked tail).
    for (std::vector<int64_t> plane :
         std::vector<std::vector<int64_t>>{{1, 1}, {1, 2}, {2, 2}, {2, 4}, {1, 3}, {4, 5}})
      checkConvBias<float>({3, 5, 7, 1, plane, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}}, clamp, lo,
                           hi);
    checkConvBias<double>(
        {1, 2, 2, 1, {4, 3, 5}, {2, 2, 3}, {1, 1, 2}, {1, 1, 1}, {0, 1, 1}, {1, 0, 1}}, clamp, lo,
        hi);
  }
  std::vector<float> x(16, 1), w(16, 1), b(4, 1), y(16, 3);
  EXPECT_NE(coil_cpu_conv_bias_f32(x.data(), w.data(), b.data(), y.data(), 1, 1, 1, 1, 1, 4, 1, 1,
                                   1, 1, 1, 4, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 4, 0.0, 0.0),
            0);
  for (float v : y) EXPECT_EQ(v, 3.0f);
}

/// coil_cpu_conv_bias_<f16|bf16> against the plain f32 convolution of the same (widened)
/// values plus the bias and clamps in f32, rounded once: bit for bit. Returns how many outputs
/// differ from the unfused form (coil_cpu_conv_<f16|bf16> rounded, then the bias added and the
/// result rounded again), which the fused kernel exists to avoid.
int64_t checkConvBiasHalf(bool bf16, const ConvCase &cc, int64_t clamp, double lo, double hi) {
  SCOPED_TRACE(testing::Message() << (bf16 ? "bf16" : "f16") << " clamp " << clamp << " c "
                                  << cc.c << " m " << cc.m << " group " << cc.group);
  auto toBits = [bf16](float v) {
    return bf16 ? coil::cpu::floatToBf16Bits(v) : coil::cpu::floatToHalfBits(v);
  };
  auto toFloat = [bf16](uint16_t h) {
    return bf16 ? coil::cpu::bf16BitsToFloat(h) : coil::cpu::halfBitsToFloat(h);
  };
  auto bits = [&](const std::vector<double> &v) {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = toBits(float(v[i]));
    return h;
  };
  auto widened = [&](const std::vector<uint16_t> &h) {
    std::vector<float> f(h.size());
    for (size_t i = 0; i < h.size(); ++i) f[i] = toFloat(h[i]);
    return f;
  };
  auto out = cc.out();
  int64_t cg = cc.c / cc.group, outS = prod(out);
  auto x = bits(randomDoubles(size_t(cc.n * cc.c * prod(cc.in)), 17, -2, 2));
  auto w = bits(randomDoubles(size_t(cc.m * cg * prod(cc.k)), 18));
  auto bias = bits(randomDoubles(size_t(cc.m), 19, -4, 4));
  auto x32 = widened(x), w32 = widened(w), bias32 = widened(bias);
  std::vector<float> plain(size_t(cc.n * cc.m * outS), 77.0f);
  std::vector<uint16_t> fused(plain.size(), 0x5555), rounded(plain.size(), 0x5555);
  auto in = pad3(cc.in, 1), k = pad3(cc.k, 1), o = pad3(out, 1), s = pad3(cc.s, 1),
       d = pad3(cc.d, 1), p = pad3(cc.pb, 0);
  int64_t nd = int64_t(cc.in.size());
  auto conv = bf16 ? coil_cpu_conv_bf16 : coil_cpu_conv_f16;
  auto convBias = bf16 ? coil_cpu_conv_bias_bf16 : coil_cpu_conv_bias_f16;
  EXPECT_EQ(coil_cpu_conv_f32(x32.data(), w32.data(), plain.data(), cc.n, cc.c, cc.m, cc.group, nd,
                              in[0], in[1], in[2], k[0], k[1], k[2], o[0], o[1], o[2], s[0], s[1],
                              s[2], d[0], d[1], d[2], p[0], p[1], p[2]),
            0);
  EXPECT_EQ(conv(x.data(), w.data(), rounded.data(), cc.n, cc.c, cc.m, cc.group, nd, in[0], in[1],
                 in[2], k[0], k[1], k[2], o[0], o[1], o[2], s[0], s[1], s[2], d[0], d[1], d[2],
                 p[0], p[1], p[2]),
            0);
  EXPECT_EQ(convBias(x.data(), w.data(), bias.data(), fused.data(), cc.n, cc.c, cc.m, cc.group, nd,
                     in[0], in[1], in[2], k[0], k[1], k[2], o[0], o[1], o[2], s[0], s[1], s[2],
                     d[0], d[1], d[2], p[0], p[1], p[2], clamp, lo, hi),
            0);
  auto epilogue = [&](float v, size_t i) {
    v += bias32[(i / size_t(outS)) % size_t(cc.m)];
    if (clamp & 1) v = v < float(lo) ? float(lo) : v;
    if (clamp & 2) v = v > float(hi) ? float(hi) : v;
    return toBits(v);
  };
  int64_t twice = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(fused[i], epilogue(plain[i], i)) << "output " << i;
    twice += epilogue(toFloat(rounded[i]), i) != fused[i];
  }
  return twice;
}

TEST(CpuKernelsConv, HalfBiasAndClampRoundOnce) {
  // f16 and bf16 through the f32 paths: im2col + GEMM, 1x1, flat and general depthwise, small
  // planes, 1-D and 3-D; no clamp, ReLU, Clip(lo, hi), and a bound that f16/bf16 cannot hold
  // exactly (the clamp is in f32, before the one rounding).
  for (bool bf16 : {false, true}) {
    int64_t twice = 0;
    for (int64_t clamp = 0; clamp < 4; ++clamp) {
      double lo = clamp == 2 ? -0.5 : 0.0, hi = clamp == 3 ? 0.7 : 0.75;
      twice += checkConvBiasHalf(
          bf16, {4, 5, 7, 1, {12, 12}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, clamp, lo, hi);
      twice += checkConvBiasHalf(bf16, {3, 6, 9, 1, {4, 4}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}},
                                 clamp, lo, hi);
      twice += checkConvBiasHalf(bf16, {2, 8, 16, 8, {9, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}},
                                 clamp, lo, hi);
      twice += checkConvBiasHalf(
          bf16, {2, 4, 8, 4, {10, 9}, {3, 3}, {2, 1}, {1, 1}, {1, 0}, {1, 2}}, clamp, lo, hi);
      twice += checkConvBiasHalf(bf16, {3, 5, 7, 1, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}},
                                 clamp, lo, hi);
      twice += checkConvBiasHalf(bf16, {2, 3, 4, 1, {11}, {3}, {2}, {1}, {1}, {1}}, clamp, lo, hi);
      twice += checkConvBiasHalf(
          bf16, {1, 2, 2, 1, {4, 3, 5}, {2, 2, 3}, {1, 1, 2}, {1, 1, 1}, {0, 1, 1}, {1, 0, 1}},
          clamp, lo, hi);
    }
    // Rounding the convolution before the bias changes some results (else this test would not
    // tell the fused kernel from the unfused one).
    EXPECT_GT(twice, 0) << (bf16 ? "bf16" : "f16");
  }
  std::vector<uint16_t> x(16, 0x3c00), w(16, 0x3c00), b(4, 0x3c00), y(16, 0x4200);
  EXPECT_NE(coil_cpu_conv_bias_f16(x.data(), w.data(), b.data(), y.data(), 1, 1, 1, 1, 1, 4, 1, 1,
                                   1, 1, 1, 4, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, -1, 0.0, 0.0),
            0);
  for (uint16_t v : y) EXPECT_EQ(v, 0x4200);
}

/// f32 depthwise on AVX-512 CPUs: planes of up to 32 elements (64 with stride 2) as permutes
/// of registers (strides, dilations, uneven and negative pads, a depth multiplier, 1-D, more
/// than one output vector), and stride-2 rows of 16 outputs or more (tails, wide windows).
void depthwiseAvx512Cases() {
  checkConv<float>({4, 24, 24, 24, {2, 2}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, 1e-5);
  checkConv<float>({3, 6, 12, 6, {5, 6}, {3, 2}, {2, 1}, {2, 1}, {2, 0}, {1, 2}}, 1e-5);
  checkConv<float>({2, 5, 5, 5, {8, 8}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {0, 0}}, 1e-5);
  checkConv<float>({2, 4, 4, 4, {7, 9}, {3, 3}, {2, 2}, {1, 1}, {-1, 1}, {2, 1}}, 1e-5);
  checkConv<float>({2, 3, 3, 3, {30}, {5}, {1}, {2}, {3}, {3}}, 1e-5);
  checkConv<float>({2, 4, 8, 4, {4, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, 1e-5);
  checkConv<float>({2, 6, 6, 6, {32, 40}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}}, 1e-5);
  checkConv<float>({2, 4, 8, 4, {9, 47}, {3, 5}, {1, 2}, {2, 1}, {2, 3}, {0, 2}}, 1e-5);
  for (int64_t clamp = 0; clamp < 4; ++clamp) {
    double lo = clamp == 2 ? -0.5 : 0.0, hi = 0.75;
    checkConvBias<float>({2, 8, 8, 8, {4, 4}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, clamp, lo,
                         hi);
    checkConvBias<float>({2, 4, 4, 4, {32, 34}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}}, clamp, lo,
                         hi);
    checkConvBias<float>({2, 8, 13, 1, {16, 16}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, clamp, lo,
                         hi);
  }
}
TEST(CpuKernelsConv, DepthwiseRegisterPlanesAndStridedRows) {
  depthwiseAvx512Cases();
}
/// f32 depthwise convolutions of eight channels at a time (AVX-512 CPUs; the portable paths
/// otherwise): windows of 1, 3, 5 and 7 rows (row stride 1 or 2: the row-sharing blocks) and
/// of 2, 4, 9 rows, row strides of 3, dilations between rows (the general loop); 5x5 and 7x7
/// windows, row strides 1 to 3, dilations, uneven, wide and negative pads, a depth multiplier,
/// channel counts that are not a multiple of 8, rows shorter and longer than 8 outputs, 1-D,
/// and the bias and clamps.
void depthwiseBlockCases() {
  const std::vector<std::vector<int64_t>> windows{{1, 7}, {3, 3}, {5, 5}, {7, 7},
                                                  {2, 3}, {4, 1}, {9, 3}, {3, 5}};
  for (const auto &k : windows)
    for (int64_t s : {1, 2})
      checkConv<float>(
          {2, 11, 11, 11, {15, 19}, k, {s, s}, {1, 1}, {k[0] / 2, k[1] / 2}, {k[0] / 2, k[1] / 2}},
          1e-4);
  // 7x7 and 5x5 on the planes of ConvNeXt / MNASNet / EfficientNet (scaled down), stride 2.
  checkConv<float>({1, 16, 16, 16, {14, 14}, {7, 7}, {1, 1}, {1, 1}, {3, 3}, {3, 3}}, 1e-4);
  checkConv<float>({2, 9, 9, 9, {7, 7}, {5, 5}, {1, 1}, {1, 1}, {2, 2}, {2, 2}}, 1e-4);
  checkConv<float>({2, 12, 12, 12, {28, 28}, {5, 5}, {2, 2}, {1, 1}, {2, 2}, {2, 2}}, 1e-4);
  checkConv<float>({1, 8, 8, 8, {56, 56}, {3, 3}, {2, 2}, {1, 1}, {0, 0}, {1, 1}}, 1e-4);
  // Dilations (rows, columns, both), row strides of 3, uneven, wide and negative pads.
  checkConv<float>({2, 10, 10, 10, {20, 20}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, {2, 2}}, 1e-4);
  checkConv<float>({1, 8, 8, 8, {17, 23}, {3, 5}, {1, 2}, {4, 1}, {4, 2}, {4, 2}}, 1e-4);
  checkConv<float>({1, 8, 8, 8, {17, 23}, {5, 3}, {3, 3}, {1, 3}, {0, 3}, {4, 1}}, 1e-4);
  checkConv<float>({2, 9, 9, 9, {12, 30}, {7, 7}, {2, 1}, {1, 1}, {5, 0}, {1, 6}}, 1e-4);
  checkConv<float>({2, 9, 9, 9, {12, 30}, {5, 5}, {1, 2}, {1, 1}, {-1, 2}, {2, -2}}, 1e-4);
  // A depth multiplier of 3 (output channels 8 at a time across groups), 1-D.
  checkConv<float>({2, 5, 15, 5, {13, 21}, {5, 5}, {1, 1}, {1, 1}, {2, 2}, {2, 2}}, 1e-4);
  checkConv<float>({3, 7, 7, 7, {77}, {7}, {1}, {1}, {3}, {3}}, 1e-4);
  checkConv<float>({3, 7, 14, 7, {77}, {9}, {2}, {2}, {4}, {0}}, 1e-4);
  for (int64_t clamp = 0; clamp < 4; ++clamp) {
    double lo = clamp == 2 ? -0.5 : 0.0, hi = 0.75;
    checkConvBias<float>({2, 13, 13, 13, {14, 14}, {7, 7}, {1, 1}, {1, 1}, {3, 3}, {3, 3}}, clamp,
                         lo, hi);
    checkConvBias<float>({2, 9, 18, 9, {15, 10}, {5, 5}, {2, 2}, {1, 1}, {2, 2}, {1, 1}}, clamp, lo,
                         hi);
    checkConvBias<float>({1, 8, 8, 8, {9, 9}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, {2, 2}}, clamp, lo,
                         hi);
  }
}
TEST(CpuKernelsConv, DepthwiseChannelBlocks) {
  depthwiseBlockCases();
}
TEST(CpuKernelsConv, LargeCallsOnAllThreads) {
  // Calls of 2^19 multiply-adds or more run on all threads (smaller ones on the caller's):
  // the channel blocks (row-sharing and general), flat planes, register planes, the row path,
  // the implicit GEMM, im2col + GEMM per image and one large image, with the epilogue.
  checkConv<float>({2, 20, 20, 20, {40, 40}, {7, 7}, {1, 1}, {1, 1}, {3, 3}, {3, 3}}, 1e-4);
  checkConv<float>({2, 20, 20, 20, {40, 40}, {3, 3}, {2, 2}, {2, 2}, {2, 2}, {2, 2}}, 1e-4);
  checkConv<float>({4, 32, 32, 32, {32, 32}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, 1e-4);
  checkConv<float>({16, 256, 256, 256, {4, 4}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, 1e-4);
  checkConv<float>({2, 16, 32, 1, {32, 32}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, 1e-4);
  checkConv<float>({3, 16, 32, 2, {20, 20}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}}, 1e-4);
  checkConv<float>({1, 32, 64, 1, {40, 40}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}}, 1e-4);
  for (int64_t clamp = 0; clamp < 4; ++clamp) {
    double lo = clamp == 2 ? -0.5 : 0.0, hi = 0.75;
    checkConvBias<float>({2, 24, 24, 24, {30, 30}, {5, 5}, {1, 1}, {1, 1}, {2, 2}, {2, 2}}, clamp,
                         lo, hi);
    checkConvBias<float>({2, 16, 32, 1, {32, 32}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, clamp,
                         lo, hi);
  }
}
/// Random 1-D and 2-D f32 geometries (seeded): groups, depthwise, strides 1 to 3, dilations,
/// pads from -1 to 3, windows up to 5, and rows aimed at 16 and 32 outputs for the implicit
/// GEMM; every case against the reference, and the bias + clamp epilogue against the plain
/// result.
void randomConvCases(unsigned seed, int count) {
  std::mt19937 rng(seed);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  for (int t = 0; t < count; ++t) {
    int64_t nd = pick(1, 2), n = pick(1, 3), group = pick(1, 2), cg = pick(1, 12), mg = pick(1, 13);
    if (pick(0, 4) == 0) cg = 1, mg = pick(1, 2), group = pick(1, 6); // depthwise
    ConvCase cc{n, group * cg, group * mg, group, {}, {}, {}, {}, {}, {}};
    bool ok = true;
    for (int64_t i = 0; i < nd; ++i) {
      int64_t k = pick(1, 5), s = pick(1, 3), d = k > 1 ? pick(1, 2) : 1, pb = pick(-1, 3),
              pe = pick(-1, 3);
      int64_t span = (k - 1) * d + 1, in = pick(1, 40);
      if (i == nd - 1 && pick(0, 2) == 0) // a row of 16 or 32 outputs at stride 1
        s = 1, in = std::max<int64_t>(1, 16 * pick(1, 2) - pb - pe + span - 1);
      if (in + pb + pe < span || -pb >= in || -pe >= in) ok = false;
      cc.in.push_back(in), cc.k.push_back(k), cc.s.push_back(s), cc.d.push_back(d);
      cc.pb.push_back(pb), cc.pe.push_back(pe);
    }
    if (!ok) continue;
    SCOPED_TRACE("case " + std::to_string(t));
    checkConv<float>(cc, 1e-4);
    if (t % 4 == 0) {
      int64_t clamp = pick(0, 3);
      checkConvBias<float>(cc, clamp, clamp == 2 ? -0.5 : 0.0, 0.75);
    }
  }
}
TEST(CpuKernelsConv, RandomGeometries) {
  randomConvCases(11, 300);
}
TEST(CpuKernelsConv, PortablePathsWithoutAvx512) {
  // The same cases through the portable paths (padded im2col, flat depthwise), which CPUs
  // without AVX-512 take.
  struct Restore {
    ~Restore() { coil::cpu::setConvAvx512Allowed(true); }
  } restore;
  coil::cpu::setConvAvx512Allowed(false);
  maskedColumnCases();
  depthwiseAvx512Cases();
  depthwiseBlockCases();
  randomConvCases(11, 300);
  for (int64_t side : {2, 4, 8, 16})
    checkConv<float>({4, 24, 24, 24, {side, side}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}}, 1e-5);
}

TEST(CpuKernelsConv, InvalidGeometryFailsUntouched) {
  std::vector<float> x(16, 1), w(16, 1), y(16, 3);
  // group does not divide the channels; stride 0; nd 4.
  EXPECT_NE(coil_cpu_conv_f32(x.data(), w.data(), y.data(), 1, 3, 2, 2, 1, 4, 1, 1, 1, 1, 1, 4, 1,
                              1, 1, 1, 1, 1, 1, 1, 0, 0, 0),
            0);
  EXPECT_NE(coil_cpu_conv_f32(x.data(), w.data(), y.data(), 1, 1, 1, 1, 1, 4, 1, 1, 1, 1, 1, 4, 1,
                              1, 0, 1, 1, 1, 1, 1, 0, 0, 0),
            0);
  EXPECT_NE(coil_cpu_conv_f32(x.data(), w.data(), y.data(), 1, 1, 1, 1, 4, 4, 1, 1, 1, 1, 1, 4, 1,
                              1, 1, 1, 1, 1, 1, 1, 0, 0, 0),
            0);
  for (float v : y) EXPECT_EQ(v, 3.0f);
}

template <typename T>
void checkConvTranspose(int64_t n, int64_t c, int64_t m, int64_t group, std::vector<int64_t> in,
                        std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> d,
                        std::vector<int64_t> p, std::vector<int64_t> out, double tol) {
  int64_t inS = prod(in), kS = prod(k), outS = prod(out), cg = c / group, mg = m / group;
  auto x = randomDoubles(size_t(n * c * inS), 5), w = randomDoubles(size_t(c * mg * kS), 6);
  std::vector<double> ref(size_t(n * m * outS), 0.0);
  // Transposed conv: input i adds to output position i*s - p + kk*d; reuse forWindow with the
  // roles of input and output swapped.
  for (int64_t b = 0; b < n; ++b)
    for (int64_t g = 0; g < group; ++g)
      for (int64_t ic = 0; ic < cg; ++ic)
        for (int64_t oc = 0; oc < mg; ++oc)
          forWindow(out, k, in, s, d, p, [&](int64_t i, int64_t kk, int64_t o) {
            ref[size_t((b * m + g * mg + oc) * outS + o)] +=
                x[size_t((b * c + g * cg + ic) * inS + i)] *
                w[size_t(((g * cg + ic) * mg + oc) * kS + kk)];
          });
  auto xt = cast<T>(x), wt = cast<T>(w);
  std::vector<T> y(ref.size(), T(77));
  auto in3 = pad3(in, 1), k3 = pad3(k, 1), o3 = pad3(out, 1), s3 = pad3(s, 1), d3 = pad3(d, 1),
       p3 = pad3(p, 0);
  auto fn = std::is_same_v<T, float> ? coil_cpu_conv_transpose_f32 : coil_cpu_conv_transpose_f64;
  fn(xt.data(), wt.data(), y.data(), n, c, m, group, int64_t(in.size()), in3[0], in3[1], in3[2],
     k3[0], k3[1], k3[2], o3[0], o3[1], o3[2], s3[0], s3[1], s3[2], d3[0], d3[1], d3[2], p3[0],
     p3[1], p3[2]);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(double(y[i]), ref[i], tol) << i;
}

TEST(CpuKernelsConvTranspose, OneTwoThreeDims) {
  checkConvTranspose<float>(2, 4, 6, 2, {5}, {3}, {2}, {1}, {1}, {10}, 1e-5);
  checkConvTranspose<double>(1, 3, 2, 1, {4, 3}, {2, 3}, {2, 1}, {1, 2}, {0, 1}, {9, 6}, 1e-12);
  checkConvTranspose<float>(2, 2, 4, 2, {3, 2, 3}, {2, 2, 2}, {1, 2, 2}, {1, 1, 2}, {0, 0, 1},
                            {4, 4, 6}, 1e-5);
}

// --- Det

TEST(CpuKernelsDet, MatchesCofactorExpansion) {
  auto v = randomDoubles(4 * 9, 8);
  std::vector<double> y(4);
  coil_cpu_det_f64(v.data(), y.data(), 4, 3);
  for (int b = 0; b < 4; ++b) {
    const double *a = v.data() + b * 9;
    double ref = a[0] * (a[4] * a[8] - a[5] * a[7]) - a[1] * (a[3] * a[8] - a[5] * a[6]) +
                 a[2] * (a[3] * a[7] - a[4] * a[6]);
    EXPECT_NEAR(y[size_t(b)], ref, 1e-12);
  }
  std::vector<float> singular{1, 2, 2, 4}, yf(1, 5);
  coil_cpu_det_f32(singular.data(), yf.data(), 1, 2);
  EXPECT_EQ(yf[0], 0.0f);
  std::vector<float> empty, one(1, 5);
  coil_cpu_det_f32(empty.data(), one.data(), 1, 0); // the empty matrix has determinant 1
  EXPECT_EQ(one[0], 1.0f);
}

// --- Scans

TEST(CpuKernelsScan, CumSumCumProdExclusiveReverse) {
  const int64_t outer = 2, len = 5, inner = 3;
  auto v = randomDoubles(size_t(outer * len * inner), 9, 0.5, 1.5);
  for (int prodOp = 0; prodOp < 2; ++prodOp)
    for (int ex = 0; ex < 2; ++ex)
      for (int rev = 0; rev < 2; ++rev) {
        std::vector<double> y(v.size());
        (prodOp ? coil_cpu_cumprod_f64 : coil_cpu_cumsum_f64)(v.data(), y.data(), outer, len, inner,
                                                              ex, rev);
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < inner; ++i)
            for (int64_t j = 0; j < len; ++j) {
              double acc = prodOp ? 1 : 0;
              for (int64_t q = 0; q < len; ++q) {
                bool take = rev ? (ex ? q > j : q >= j) : (ex ? q < j : q <= j);
                double e = v[size_t((o * len + q) * inner + i)];
                if (take) acc = prodOp ? acc * e : acc + e;
              }
              EXPECT_NEAR(y[size_t((o * len + j) * inner + i)], acc, 1e-12);
            }
      }
}
TEST(CpuKernelsScan, IntegersWrapAndHalfRounds) {
  std::vector<int8_t> x{100, 100, -128, 1};
  std::vector<int8_t> y(4);
  coil_cpu_cumsum_i8(x.data(), y.data(), 1, 4, 1, 0, 0);
  EXPECT_EQ(y[1], int8_t(-56)); // 200 wraps
  EXPECT_EQ(y[2], int8_t(72));  // 72
  EXPECT_EQ(y[3], int8_t(73));
  std::vector<uint32_t> u{4000000000u, 4000000000u}, uy(2);
  coil_cpu_cumprod_u32(u.data(), uy.data(), 1, 2, 1, 0, 0);
  EXPECT_EQ(uy[1], uint32_t(uint64_t(4000000000u) * 4000000000u));
  // f16: 1 + 2^-11 rounds back to 1 (ties to even) when stored, but the sum carries on in
  // double: 1 + 2^-11 + 2^-11 = 1 + 2^-10 is exact.
  std::vector<uint16_t> h{0x3c00, 0x1000, 0x1000}, hy(3); // 1, 2^-11, 2^-11
  coil_cpu_cumsum_f16(h.data(), hy.data(), 1, 3, 1, 0, 0);
  EXPECT_EQ(hy[1], 0x3c00);
  EXPECT_EQ(hy[2], 0x3c01);
}

// --- TopK

TEST(CpuKernelsTopK, TiesByIndexAndNaNFirst) {
  std::vector<float> x{3, 1, 3, NAN, 2, 1, 5, 1};
  std::vector<float> vals(4);
  std::vector<int64_t> idx(4);
  coil_cpu_topk_f32(x.data(), vals.data(), idx.data(), 1, 8, 1, 4, 1);
  EXPECT_EQ(idx, (std::vector<int64_t>{3, 6, 0, 2}));
  EXPECT_TRUE(std::isnan(vals[0]));
  EXPECT_EQ(vals[1], 5.0f);
  coil_cpu_topk_f32(x.data(), vals.data(), idx.data(), 1, 8, 1, 4, 0);
  EXPECT_EQ(idx, (std::vector<int64_t>{1, 5, 7, 4}));
}
TEST(CpuKernelsTopK, InnerAxisRandomAgainstStableSort) {
  const int64_t outer = 3, len = 9, inner = 4, k = 5;
  std::mt19937 rng(12);
  std::vector<int32_t> x(size_t(outer * len * inner));
  for (auto &v : x) v = int32_t(rng() % 7) - 3; // many ties
  std::vector<int32_t> vals(size_t(outer * k * inner));
  std::vector<int64_t> idx(vals.size());
  coil_cpu_topk_i32(x.data(), vals.data(), idx.data(), outer, len, inner, k, 1);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<int64_t> ord(len);
      std::iota(ord.begin(), ord.end(), 0);
      auto at = [&](int64_t j) { return x[size_t((o * len + j) * inner + i)]; };
      std::stable_sort(ord.begin(), ord.end(), [&](int64_t a, int64_t b) { return at(a) > at(b); });
      for (int64_t j = 0; j < k; ++j) {
        EXPECT_EQ(idx[size_t((o * k + j) * inner + i)], ord[size_t(j)]);
        EXPECT_EQ(vals[size_t((o * k + j) * inner + i)], at(ord[size_t(j)]));
      }
    }
  std::vector<int64_t> keep(2, -7);
  coil_cpu_topk_i32(x.data(), vals.data(), keep.data(), 1, 3, 1, 4, 1); // k > len: no-op
  EXPECT_EQ(keep[0], -7);
}

// --- Allocating calls

void *testAlloc(void *ctx, size_t bytes) {
  auto *list = static_cast<std::vector<void *> *>(ctx);
  void *p = std::malloc(bytes ? bytes : 1);
  list->push_back(p);
  return p;
}
struct Allocs {
  std::vector<void *> ptrs;
  ~Allocs() {
    for (void *p : ptrs) std::free(p);
  }
};
std::vector<int64_t> ints(void *p, int64_t n) {
  auto *q = static_cast<int64_t *>(p);
  return std::vector<int64_t>(q, q + n);
}

TEST(CpuKernelsDynamic, NonZeroFloatsAndBool) {
  Allocs a;
  std::vector<float> x{0.0f, -0.0f, 1.0f, NAN, 0.0f, -2.0f};
  void *out = nullptr;
  int64_t count = -1;
  coil_cpu_nonzero_f32(testAlloc, &a.ptrs, x.data(), &out, &count, 6);
  ASSERT_EQ(count, 3);
  EXPECT_EQ(ints(out, count), (std::vector<int64_t>{2, 3, 5}));
  std::vector<uint8_t> b{1, 0, 0, 1};
  coil_cpu_nonzero_bool(testAlloc, &a.ptrs, b.data(), &out, &count, 3); // numel clamps the scan
  ASSERT_EQ(count, 1);
  EXPECT_EQ(ints(out, count), (std::vector<int64_t>{0}));
  coil_cpu_nonzero_bool(testAlloc, &a.ptrs, b.data(), &out, &count, -3);
  EXPECT_EQ(count, 0);
}

TEST(CpuKernelsDynamic, UniqueSortedAndUnsorted) {
  Allocs a;
  std::vector<int32_t> x{2, 1, 1, 3, 4, 3};
  void *y, *ind, *inv, *cnt;
  int64_t u = -1;
  coil_cpu_unique_i32(testAlloc, &a.ptrs, x.data(), &y, &ind, &inv, &cnt, &u, 1, 6, 1, 0);
  ASSERT_EQ(u, 4);
  auto *yv = static_cast<int32_t *>(y);
  EXPECT_EQ(std::vector<int32_t>(yv, yv + 4), (std::vector<int32_t>{2, 1, 3, 4}));
  EXPECT_EQ(ints(ind, 4), (std::vector<int64_t>{0, 1, 3, 4}));
  EXPECT_EQ(ints(inv, 6), (std::vector<int64_t>{0, 1, 1, 2, 3, 2}));
  EXPECT_EQ(ints(cnt, 4), (std::vector<int64_t>{1, 2, 2, 1}));
  coil_cpu_unique_i32(testAlloc, &a.ptrs, x.data(), &y, &ind, &inv, &cnt, &u, 1, 6, 1, 1);
  ASSERT_EQ(u, 4);
  yv = static_cast<int32_t *>(y);
  EXPECT_EQ(std::vector<int32_t>(yv, yv + 4), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(ints(ind, 4), (std::vector<int64_t>{1, 0, 3, 4}));
  EXPECT_EQ(ints(inv, 6), (std::vector<int64_t>{1, 0, 0, 2, 3, 2}));
  EXPECT_EQ(ints(cnt, 4), (std::vector<int64_t>{2, 1, 2, 1}));
}

TEST(CpuKernelsDynamic, UniqueAlongAxisComparesSlices) {
  Allocs a;
  // x [2, 3, 2] along axis 1: slices x[:, i, :] = {(1,0),(2,2)}, {(1,0),(2,2)}, {(0,5),(9,9)}.
  std::vector<double> x{1, 0, 1, 0, 0, 5, 2, 2, 2, 2, 9, 9};
  void *y, *ind, *inv, *cnt;
  int64_t u = -1;
  coil_cpu_unique_f64(testAlloc, &a.ptrs, x.data(), &y, &ind, &inv, &cnt, &u, 2, 3, 2, 1);
  ASSERT_EQ(u, 2);
  auto *yv = static_cast<double *>(y);
  EXPECT_EQ(std::vector<double>(yv, yv + 8), (std::vector<double>{0, 5, 1, 0, 9, 9, 2, 2}));
  EXPECT_EQ(ints(ind, 2), (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(ints(inv, 3), (std::vector<int64_t>{1, 1, 0}));
  EXPECT_EQ(ints(cnt, 2), (std::vector<int64_t>{1, 2}));
}

TEST(CpuKernelsDynamic, NonMaxSuppression) {
  Allocs a;
  // The ONNX suppress-by-IOU example: 6 boxes, one class.
  std::vector<float> boxes{0, 0,  1, 1,  0, 0.1f,  1, 1.1f,  0, -0.1f, 1, 0.9f,
                           0, 10, 1, 11, 0, 10.1f, 1, 11.1f, 0, 100,   1, 101};
  std::vector<float> scores{0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f};
  void *sel;
  int64_t count = -1;
  coil_cpu_nms_f32(testAlloc, &a.ptrs, boxes.data(), scores.data(), &sel, &count, 1, 1, 6, 3, 0.5,
                   0.0, 1, 0);
  ASSERT_EQ(count, 3);
  EXPECT_EQ(ints(sel, 9), (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 0, 5}));
  coil_cpu_nms_f32(testAlloc, &a.ptrs, boxes.data(), scores.data(), &sel, &count, 1, 1, 6, 2, 0.5,
                   0.4, 1, 0);
  ASSERT_EQ(count, 2);
  EXPECT_EQ(ints(sel, 6), (std::vector<int64_t>{0, 0, 3, 0, 0, 0}));
  coil_cpu_nms_f32(testAlloc, &a.ptrs, boxes.data(), scores.data(), &sel, &count, 1, 1, 6, -5, 0.5,
                   0.0, 0, 0);
  EXPECT_EQ(count, 0);
}

TEST(CpuKernelsDynamic, FailedAllocationFails) {
  coil_alloc_fn none = [](void *, size_t) -> void * { return nullptr; };
  std::vector<int64_t> x{1, 2, 3};
  void *out = reinterpret_cast<void *>(1);
  int64_t count = -1;
  EXPECT_NE(coil_cpu_nonzero_i64(none, nullptr, x.data(), &out, &count, 3), 0);
  EXPECT_EQ(count, 0);
  EXPECT_STREQ(coil_cpu_last_error(), "nonzero: out of memory allocating 3 indices (24 bytes)");
  void *p[4];
  count = -1;
  EXPECT_NE(
      coil_cpu_unique_i64(none, nullptr, x.data(), &p[0], &p[1], &p[2], &p[3], &count, 1, 3, 1, 1),
      0);
  EXPECT_EQ(count, 0);
  EXPECT_STREQ(coil_cpu_last_error(),
               "unique: out of memory allocating the outputs of 3 distinct values");
  std::vector<float> xf{3, 1, 2};
  int64_t k = 2;
  EXPECT_NE(coil_cpu_topk_dyn_f32(none, nullptr, xf.data(), &k, &p[0], &p[1], &count, 1, 3, 1, 1),
            0);
  EXPECT_STREQ(coil_cpu_last_error(),
               "topk: out of memory allocating the outputs (8 and 16 bytes)");
  std::vector<float> boxes{0, 0, 1, 1}, scores{0.5f};
  EXPECT_NE(coil_cpu_nms_f32(none, nullptr, boxes.data(), scores.data(), &p[0], &count, 1, 1, 1, 5,
                             0.5, 0, 0, 0),
            0);
  EXPECT_STREQ(coil_cpu_last_error(),
               "non max suppression: out of memory allocating 1 selected boxes");
  // An empty result needs no memory: a NULL block is fine.
  std::vector<int64_t> zeros{0, 0};
  EXPECT_EQ(coil_cpu_nonzero_i64(none, nullptr, zeros.data(), &out, &count, 2), 0);
  EXPECT_EQ(count, 0);
}

TEST(CpuKernelsValidation, RuleBreakingValuesFailWithTheirMessage) {
  std::vector<float> x(16, 1), w(16, 1), y(16, 3);
  EXPECT_NE(coil_cpu_conv_f32(x.data(), w.data(), y.data(), 1, 3, 2, 2, 1, 4, 1, 1, 1, 1, 1, 4, 1,
                              1, 1, 1, 1, 1, 1, 1, 0, 0, 0),
            0);
  EXPECT_STREQ(coil_cpu_last_error(), "conv: group 2 must be >= 1 and divide the channels 3 and 2");
  EXPECT_NE(coil_cpu_conv_transpose_f64(nullptr, nullptr, nullptr, 1, 1, 1, 1, 4, 4, 1, 1, 1, 1, 1,
                                        4, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0),
            0);
  EXPECT_STREQ(coil_cpu_last_error(), "conv transpose: 4 spatial dims, 1 to 3 are supported");
  EXPECT_NE(coil_cpu_conv_f32(x.data(), w.data(), y.data(), 1, 1, 1, 1, 1, 4, 1, 1, 1, 1, 1, 4, 1,
                              1, 0, 1, 1, 1, 1, 1, 0, 0, 0),
            0);
  EXPECT_NE(std::string(coil_cpu_last_error())
                .find("conv: spatial dim 0 has input 4, kernel 1, "
                      "output 4, stride 0"),
            std::string::npos)
      << coil_cpu_last_error();
  EXPECT_EQ(y, std::vector<float>(16, 3));
  EXPECT_NE(coil_cpu_det_f32(nullptr, nullptr, -1, 2), 0);
  EXPECT_STREQ(coil_cpu_last_error(), "det: sizes batch -1, n 2 are negative or overflow");
  EXPECT_NE(coil_cpu_cumprod_u8(nullptr, nullptr, 1, -4, 1, 0, 0), 0);
  EXPECT_STREQ(coil_cpu_last_error(),
               "cumprod: sizes outer 1, len -4, inner 1 are negative or overflow");
  EXPECT_NE(coil_cpu_topk_f32(x.data(), y.data(), y.data(), 2, 4, 2, 5, 1), 0);
  EXPECT_STREQ(coil_cpu_last_error(), "topk: k 5 is out of range [0, 4] (the size of the axis)");
  EXPECT_EQ(y, std::vector<float>(16, 3));
  int64_t shape[2] = {2, 3}, axis = -3;
  EXPECT_NE(coil_cpu_cumsum_dyn_f32(x.data(), &axis, shape, y.data(), 2, 0, 0, 0), 0);
  EXPECT_STREQ(coil_cpu_last_error(), "cumsum: axis -3 is out of range for rank 2");
  int64_t count = -1;
  void *p;
  EXPECT_NE(coil_cpu_nonzero_f32(testAlloc, nullptr, x.data(), &p, &count, -1), 0);
  EXPECT_STREQ(coil_cpu_last_error(), "nonzero: element count -1 is negative");
  EXPECT_EQ(count, 0);
  // A success leaves status 0 (and the message of an earlier failure is not cleared).
  std::vector<int64_t> idx(16);
  EXPECT_EQ(coil_cpu_topk_f32(x.data(), y.data(), idx.data(), 2, 4, 2, 4, 1), 0);
}

TEST(CpuKernelsValidation, MessagesArePerThread) {
  EXPECT_NE(coil_cpu_det_f64(nullptr, nullptr, -5, 1), 0);
  std::string other;
  std::thread t([&] {
    EXPECT_NE(coil_cpu_det_f64(nullptr, nullptr, -6, 1), 0);
    other = coil_cpu_last_error();
  });
  t.join();
  EXPECT_STREQ(coil_cpu_last_error(), "det: sizes batch -5, n 1 are negative or overflow");
  EXPECT_EQ(other, "det: sizes batch -6, n 1 are negative or overflow");
}

TEST(CpuKernelsDynamic, RunTimeAxisAndK) {
  Allocs a;
  // x [2, 3] cumsum along axis -1 given as int32, then along 0 as int64.
  std::vector<float> x{1, 2, 3, 4, 5, 6}, y(6, 0);
  std::vector<int64_t> shape{2, 3};
  int32_t ax32 = -1;
  coil_cpu_cumsum_dyn_f32(x.data(), &ax32, shape.data(), y.data(), 2, 1, 0, 0);
  EXPECT_EQ(y, (std::vector<float>{1, 3, 6, 4, 9, 15}));
  int64_t ax64 = 0;
  coil_cpu_cumprod_dyn_f32(x.data(), &ax64, shape.data(), y.data(), 2, 0, 1, 0);
  EXPECT_EQ(y, (std::vector<float>{1, 1, 1, 1, 2, 3}));
  std::vector<float> keep(6, 7);
  int64_t bad = 2;
  EXPECT_NE(coil_cpu_cumsum_dyn_f32(x.data(), &bad, shape.data(), keep.data(), 2, 0, 0, 0), 0);
  EXPECT_EQ(keep, std::vector<float>(6, 7)); // axis out of range: a failure, nothing written
  // TopK with K read from a buffer.
  void *vals, *idx;
  int64_t count = -1, k = 2;
  coil_cpu_topk_dyn_f32(testAlloc, &a.ptrs, x.data(), &k, &vals, &idx, &count, 2, 3, 1, 1);
  ASSERT_EQ(count, 2);
  auto *v = static_cast<float *>(vals);
  EXPECT_EQ(std::vector<float>(v, v + 4), (std::vector<float>{3, 2, 6, 5}));
  EXPECT_EQ(ints(idx, 4), (std::vector<int64_t>{2, 1, 2, 1}));
  k = 4;
  EXPECT_NE(
      coil_cpu_topk_dyn_f32(testAlloc, &a.ptrs, x.data(), &k, &vals, &idx, &count, 2, 3, 1, 1), 0);
  EXPECT_EQ(count, 0);
  EXPECT_STREQ(coil_cpu_last_error(), "topk: k 4 is out of range [0, 3] (the size of the axis)");
}

TEST(CpuKernelsDynamic, NonMaxSuppressionScalarsFromBuffers) {
  Allocs a;
  std::vector<float> boxes{0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 10, 1, 11};
  std::vector<float> scores{0.9f, 0.8f, 0.7f};
  int64_t maxOut = 5;
  float iou = 0.5f, thr = 0.75f;
  void *sel;
  int64_t count = -1;
  coil_cpu_nms_dyn_f32(testAlloc, &a.ptrs, boxes.data(), scores.data(), &maxOut, &iou, &thr, &sel,
                       &count, 1, 1, 3, 1, 1, 1, 0);
  ASSERT_EQ(count, 1); // box 1 overlaps box 0; box 2 scores below the threshold
  EXPECT_EQ(ints(sel, 3), (std::vector<int64_t>{0, 0, 0}));
  // Without the score threshold (count 0), box 2 is kept too; without max_output_boxes, none.
  coil_cpu_nms_dyn_f32(testAlloc, &a.ptrs, boxes.data(), scores.data(), &maxOut, &iou, boxes.data(),
                       &sel, &count, 1, 1, 3, 1, 1, 0, 0);
  ASSERT_EQ(count, 2);
  EXPECT_EQ(ints(sel, 6), (std::vector<int64_t>{0, 0, 0, 0, 0, 2}));
  coil_cpu_nms_dyn_f32(testAlloc, &a.ptrs, boxes.data(), scores.data(), boxes.data(), boxes.data(),
                       boxes.data(), &sel, &count, 1, 1, 3, 0, 0, 0, 0);
  EXPECT_EQ(count, 0);
}

TEST(CpuKernelsValidation, HostileSizesNeverTouchMemory) {
  // Null buffers with sizes that are negative or overflow: every call must fail untouched.
  const int64_t big = INT64_MAX / 2, sizes[] = {-1, -INT64_MAX, big, INT64_MAX};
  Allocs a;
  for (int64_t s : sizes) {
    EXPECT_NE(coil_cpu_gemm_f64(nullptr, nullptr, nullptr, s, 3, 3, 3, 0, 0, 9, 9, 1.0), 0)
        << "coil_cpu_gemm_f64" << s;
    EXPECT_NE(coil_cpu_gemm_f32(nullptr, nullptr, nullptr, 2, s, s, 3, 0, 0, 9, 9, 1.0), 0)
        << "coil_cpu_gemm_f32" << s;
    EXPECT_NE(coil_cpu_conv_f32(nullptr, nullptr, nullptr, 1, 1, 1, 1, 2, s, s, 1, 2, 2, 1, s, s, 1,
                                1, 1, 1, 1, 1, 1, 0, 0, 0),
              0)
        << "coil_cpu_conv_f32" << s;
    EXPECT_NE(coil_cpu_conv_transpose_f64(nullptr, nullptr, nullptr, s, 2, 2, 1, 1, 3, 1, 1, 2, 1,
                                          1, 4, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0),
              0)
        << "coil_cpu_conv_transpose_f64" << s;
    EXPECT_NE(coil_cpu_det_f32(nullptr, nullptr, s, s), 0) << "coil_cpu_det_f32" << s;
    EXPECT_NE(coil_cpu_cumsum_i16(nullptr, nullptr, s, s, 2, 0, 0), 0)
        << "coil_cpu_cumsum_i16" << s;
    EXPECT_NE(coil_cpu_topk_u8(nullptr, nullptr, nullptr, 2, s, s, 1, 1), 0)
        << "coil_cpu_topk_u8" << s;
    void *p1 = nullptr, *p2 = nullptr, *p3 = nullptr, *p4 = nullptr;
    int64_t count = -1;
    EXPECT_NE(
        coil_cpu_unique_bf16(testAlloc, &a.ptrs, nullptr, &p1, &p2, &p3, &p4, &count, s, s, s, 1),
        0)
        << "coil_cpu_unique_bf16" << s;
    EXPECT_EQ(count, 0);
    count = -1;
    EXPECT_NE(coil_cpu_nonzero_i8(testAlloc, &a.ptrs, nullptr, &p1, &count, s < 0 ? s : -s), 0)
        << "coil_cpu_nonzero_i8" << s;
    EXPECT_EQ(count, 0);
    count = -1;
    EXPECT_NE(coil_cpu_nms_f32(testAlloc, &a.ptrs, nullptr, nullptr, &p1, &count, s, s, s, 3, 0.5,
                               0, 0, 0),
              0)
        << "coil_cpu_nms_f32" << s;
    EXPECT_EQ(count, 0);
  }
}

/// Runs the conv and conv-transpose kernels in a child process whose address space is capped
/// below what their column buffers need: they must fall back to direct loops and still be right.
TEST(CpuKernelsConvDeathTest, FallBackToDirectLoopsWithoutMemory) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto run = [] {
    // conv: one 1-channel 160x160 image, 41x41 kernel, pads 20: columns of 1681 x 25600 floats
    // (172 MB); transposed: 48x48 input, 41x41 kernel: columns of 1681 x 2304 doubles (31 MB).
    const int64_t H = 160, K = 41, P = 20, T = 48, TO = T + K - 1;
    auto x = cast<float>(randomDoubles(size_t(H * H), 21));
    auto w = cast<float>(randomDoubles(size_t(K * K), 22));
    auto xt = randomDoubles(size_t(T * T), 23), wt = randomDoubles(size_t(K * K), 24);
    std::vector<float> y(size_t(H * H), 9), ref(size_t(H * H), 0);
    std::vector<double> yt(size_t(TO * TO), 9), reft(size_t(TO * TO), 0);
    for (int64_t o0 = 0; o0 < H; ++o0)
      for (int64_t o1 = 0; o1 < H; ++o1)
        for (int64_t k0 = 0; k0 < K; ++k0)
          for (int64_t k1 = 0; k1 < K; ++k1) {
            int64_t i0 = o0 - P + k0, i1 = o1 - P + k1;
            if (i0 >= 0 && i0 < H && i1 >= 0 && i1 < H)
              ref[size_t(o0 * H + o1)] += x[size_t(i0 * H + i1)] * w[size_t(k0 * K + k1)];
          }
    for (int64_t i0 = 0; i0 < T; ++i0)
      for (int64_t i1 = 0; i1 < T; ++i1)
        for (int64_t k0 = 0; k0 < K; ++k0)
          for (int64_t k1 = 0; k1 < K; ++k1)
            reft[size_t((i0 + k0) * TO + i1 + k1)] +=
                xt[size_t(i0 * T + i1)] * wt[size_t(k0 * K + k1)];
    rlimit lim{};
    getrlimit(RLIMIT_AS, &lim);
    rlimit cap = lim;
    cap.rlim_cur = 0;
    // The current address space plus 24 MB: the inputs fit, the columns do not.
    FILE *f = std::fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (!f || std::fscanf(f, "%lu", &pages) != 1) std::exit(3);
    std::fclose(f);
    cap.rlim_cur = rlim_t(pages) * 4096 + (24u << 20);
    if (setrlimit(RLIMIT_AS, &cap) != 0) std::exit(4);
    coil_cpu_conv_f32(x.data(), w.data(), y.data(), 1, 1, 1, 1, 2, H, H, 1, K, K, 1, H, H, 1, 1, 1,
                      1, 1, 1, 1, P, P, 0);
    coil_cpu_conv_transpose_f64(xt.data(), wt.data(), yt.data(), 1, 1, 1, 1, 2, T, T, 1, K, K, 1,
                                TO, TO, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0);
    for (size_t i = 0; i < y.size(); ++i)
      if (std::fabs(y[i] - ref[i]) > 1e-3) std::exit(5);
    for (size_t i = 0; i < yt.size(); ++i)
      if (std::fabs(yt[i] - reft[i]) > 1e-9) std::exit(6);
    std::exit(0);
  };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(0), "");
}

} // namespace
