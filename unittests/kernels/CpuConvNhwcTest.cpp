// coil_cpu_conv_nhwc_* against coil_cpu_conv_* on permuted data: random inputs, groups,
// depthwise, strides, dilations, padding (cropping too), pointwise, 1-D to 3-D, every dtype;
// coil_cpu_conv_nhwc_bias_* against coil_cpu_conv_bias_* the same way.
#include "kernels/cpu/CpuKernels.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <random>
#include <string>
#include <vector>

namespace {

struct Case {
  const char *name;
  int64_t n, c, m, group;
  std::vector<int64_t> in, k, s, d, p, pe;
};

using Fn = decltype(&coil_cpu_conv_f32);

/// [a, b, rest] -> [a, rest, b] (to channels-last) or back, on raw elements of `es` bytes.
std::vector<uint8_t> moveDim(const std::vector<uint8_t> &v, int64_t a, int64_t b, int64_t rest,
                             size_t es, bool toLast) {
  std::vector<uint8_t> r(v.size());
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t k = 0; k < rest; ++k) {
        int64_t first = (i * b + j) * rest + k, last = (i * rest + k) * b + j;
        std::memcpy(&r[size_t(toLast ? last : first) * es], &v[size_t(toLast ? first : last) * es],
                    es);
      }
  return r;
}

template <typename S> std::vector<uint8_t> randomBytes(int64_t n, unsigned seed, S (*from)(float)) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<uint8_t> v(size_t(n) * sizeof(S));
  for (int64_t i = 0; i < n; ++i) {
    S x = from(d(rng));
    std::memcpy(&v[size_t(i) * sizeof(S)], &x, sizeof(S));
  }
  return v;
}

uint16_t toHalf(float f) { // round to nearest even, normal range only (test data is in [-1, 1])
  uint32_t b;
  std::memcpy(&b, &f, 4);
  uint32_t sign = (b >> 16) & 0x8000;
  int32_t e = int32_t((b >> 23) & 0xff) - 127 + 15;
  if (e <= 0) return uint16_t(sign);
  uint32_t mant = b & 0x7fffff, r = mant >> 13, rest = mant & 0x1fff;
  uint32_t h = sign | (uint32_t(e) << 10) | r;
  if (rest > 0x1000 || (rest == 0x1000 && (r & 1))) ++h;
  return uint16_t(h);
}

TEST(CpuConvNhwc, MatchesChannelsFirstConv) {
  std::vector<Case> cases = {
      {"3x3 pad", 2, 4, 6, 1, {9, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
      {"groups stride dilation", 3, 4, 6, 2, {11, 8}, {3, 2}, {2, 1}, {2, 2}, {1, 0}, {2, 1}},
      {"pointwise", 3, 8, 5, 1, {5, 6}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}},
      {"pointwise groups", 2, 8, 6, 2, {4, 5}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}},
      {"depthwise", 2, 6, 6, 6, {10, 9}, {3, 3}, {2, 1}, {1, 1}, {1, 1}, {1, 1}},
      {"crop", 1, 2, 3, 1, {9, 9}, {3, 3}, {1, 2}, {1, 1}, {-1, 0}, {0, -1}},
      {"1d", 4, 5, 7, 1, {29}, {5}, {3}, {2}, {3}, {1}},
      {"3d", 2, 3, 4, 1, {5, 6, 7}, {2, 3, 2}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1}, {0, 1, 1}},
  };
  struct Dt {
    const char *name;
    Fn nchw, nhwc;
    size_t es;
    double tol;
  };
  std::vector<Dt> dts = {{"f32", coil_cpu_conv_f32, coil_cpu_conv_nhwc_f32, 4, 1e-5},
                         {"f64", coil_cpu_conv_f64, coil_cpu_conv_nhwc_f64, 8, 1e-12},
                         {"f16", coil_cpu_conv_f16, coil_cpu_conv_nhwc_f16, 2, 0}};
  for (const Dt &dt : dts)
    for (const Case &cc : cases) {
      SCOPED_TRACE(std::string(dt.name) + " " + cc.name);
      size_t nd = cc.in.size();
      int64_t g[3][6];
      int64_t inS = 1, kS = 1, outS = 1;
      for (size_t i = 0; i < 3; ++i) {
        bool u = i < nd;
        int64_t out =
            u ? (cc.in[i] + cc.p[i] + cc.pe[i] - (cc.k[i] - 1) * cc.d[i] - 1) / cc.s[i] + 1 : 1;
        g[i][0] = u ? cc.in[i] : 1, g[i][1] = u ? cc.k[i] : 1, g[i][2] = out;
        g[i][3] = u ? cc.s[i] : 1, g[i][4] = u ? cc.d[i] : 1, g[i][5] = u ? cc.p[i] : 0;
        inS *= g[i][0], kS *= g[i][1], outS *= g[i][2];
      }
      int64_t nx = cc.n * cc.c * inS, nw = cc.m * (cc.c / cc.group) * kS, ny = cc.n * cc.m * outS;
      std::vector<uint8_t> x, w;
      if (dt.es == 4) {
        x = randomBytes<float>(nx, 1, [](float f) { return f; });
        w = randomBytes<float>(nw, 2, [](float f) { return f; });
      } else if (dt.es == 8) {
        x = randomBytes<double>(nx, 1, [](float f) { return double(f); });
        w = randomBytes<double>(nw, 2, [](float f) { return double(f); });
      } else {
        x = randomBytes<uint16_t>(nx, 1, toHalf);
        w = randomBytes<uint16_t>(nw, 2, toHalf);
      }
      std::vector<uint8_t> yRef(size_t(ny) * dt.es, 0), yGot(size_t(ny) * dt.es, 0xff);
      auto call = [&](Fn f, const void *xp, const void *wp, void *yp) {
        return f(xp, wp, yp, cc.n, cc.c, cc.m, cc.group, int64_t(nd), g[0][0], g[1][0], g[2][0],
                 g[0][1], g[1][1], g[2][1], g[0][2], g[1][2], g[2][2], g[0][3], g[1][3], g[2][3],
                 g[0][4], g[1][4], g[2][4], g[0][5], g[1][5], g[2][5]);
      };
      ASSERT_EQ(call(dt.nchw, x.data(), w.data(), yRef.data()), 0);
      std::vector<uint8_t> xl = moveDim(x, cc.n, cc.c, inS, dt.es, true);
      std::vector<uint8_t> wl = moveDim(w, cc.m, cc.c / cc.group, kS, dt.es, true);
      ASSERT_EQ(call(dt.nhwc, xl.data(), wl.data(), yGot.data()), 0) << coil_cpu_last_error();
      std::vector<uint8_t> y = moveDim(yGot, cc.n, cc.m, outS, dt.es, false);
      for (int64_t i = 0; i < ny; ++i) {
        double a, b;
        if (dt.es == 4) {
          a = reinterpret_cast<const float *>(y.data())[i];
          b = reinterpret_cast<const float *>(yRef.data())[i];
        } else if (dt.es == 8) {
          a = reinterpret_cast<const double *>(y.data())[i];
          b = reinterpret_cast<const double *>(yRef.data())[i];
        } else { // both round the same f32 sums once: equal bits, up to summation order
          uint16_t ha = reinterpret_cast<const uint16_t *>(y.data())[i];
          uint16_t hb = reinterpret_cast<const uint16_t *>(yRef.data())[i];
          EXPECT_LE(std::abs(int(ha) - int(hb)), 1) << "element " << i;
          continue;
        }
        ASSERT_NEAR(a, b, dt.tol * (1 + std::fabs(b))) << "element " << i;
      }
    }
}

uint16_t toBf16(float f) { // round to nearest even (finite test data)
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return uint16_t((b + 0x7fff + ((b >> 16) & 1)) >> 16);
}

using BiasFn = decltype(&coil_cpu_conv_bias_f32);

/// coil_cpu_conv_nhwc_bias_* against coil_cpu_conv_bias_* (channels-first) on permuted data:
/// the same bias and clamp, every dtype (f16/bf16: both add the bias to the f32 convolution and
/// round once, so they agree up to summation order).
TEST(CpuConvNhwc, BiasAndClampMatchChannelsFirstConvBias) {
  std::vector<Case> cases = {
      {"3x3 pad", 2, 4, 6, 1, {9, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
      {"groups stride dilation", 3, 4, 6, 2, {11, 8}, {3, 2}, {2, 1}, {2, 2}, {1, 0}, {2, 1}},
      {"pointwise", 3, 8, 5, 1, {5, 6}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}},
      {"depthwise", 2, 6, 6, 6, {10, 9}, {3, 3}, {2, 1}, {1, 1}, {1, 1}, {1, 1}},
      {"1d", 4, 5, 7, 1, {29}, {5}, {3}, {2}, {3}, {1}},
  };
  struct Dt {
    const char *name;
    BiasFn nchw, nhwc;
    size_t es;
    double tol;
    bool bf16;
  };
  std::vector<Dt> dts = {
      {"f32", coil_cpu_conv_bias_f32, coil_cpu_conv_nhwc_bias_f32, 4, 1e-5, false},
      {"f64", coil_cpu_conv_bias_f64, coil_cpu_conv_nhwc_bias_f64, 8, 1e-12, false},
      {"f16", coil_cpu_conv_bias_f16, coil_cpu_conv_nhwc_bias_f16, 2, 0, false},
      {"bf16", coil_cpu_conv_bias_bf16, coil_cpu_conv_nhwc_bias_bf16, 2, 0, true}};
  for (const Dt &dt : dts)
    for (const Case &cc : cases)
      for (int64_t clamp = 0; clamp < 4; ++clamp) {
        SCOPED_TRACE(std::string(dt.name) + " " + cc.name + " clamp " + std::to_string(clamp));
        double lo = clamp == 2 ? -0.5 : 0.0, hi = 0.25;
        size_t nd = cc.in.size();
        int64_t g[3][6];
        int64_t inS = 1, kS = 1, outS = 1;
        for (size_t i = 0; i < 3; ++i) {
          bool u = i < nd;
          int64_t out =
              u ? (cc.in[i] + cc.p[i] + cc.pe[i] - (cc.k[i] - 1) * cc.d[i] - 1) / cc.s[i] + 1 : 1;
          g[i][0] = u ? cc.in[i] : 1, g[i][1] = u ? cc.k[i] : 1, g[i][2] = out;
          g[i][3] = u ? cc.s[i] : 1, g[i][4] = u ? cc.d[i] : 1, g[i][5] = u ? cc.p[i] : 0;
          inS *= g[i][0], kS *= g[i][1], outS *= g[i][2];
        }
        int64_t nx = cc.n * cc.c * inS, nw = cc.m * (cc.c / cc.group) * kS, ny = cc.n * cc.m * outS;
        std::vector<uint8_t> x, w, b;
        if (dt.es == 4) {
          x = randomBytes<float>(nx, 1, [](float f) { return f; });
          w = randomBytes<float>(nw, 2, [](float f) { return f; });
          b = randomBytes<float>(cc.m, 3, [](float f) { return f; });
        } else if (dt.es == 8) {
          x = randomBytes<double>(nx, 1, [](float f) { return double(f); });
          w = randomBytes<double>(nw, 2, [](float f) { return double(f); });
          b = randomBytes<double>(cc.m, 3, [](float f) { return double(f); });
        } else {
          auto h = dt.bf16 ? toBf16 : toHalf;
          x = randomBytes<uint16_t>(nx, 1, h);
          w = randomBytes<uint16_t>(nw, 2, h);
          b = randomBytes<uint16_t>(cc.m, 3, h);
        }
        std::vector<uint8_t> yRef(size_t(ny) * dt.es, 0), yGot(size_t(ny) * dt.es, 0xff);
        auto call = [&](BiasFn f, const void *xp, const void *wp, void *yp) {
          return f(xp, wp, b.data(), yp, cc.n, cc.c, cc.m, cc.group, int64_t(nd), g[0][0], g[1][0],
                   g[2][0], g[0][1], g[1][1], g[2][1], g[0][2], g[1][2], g[2][2], g[0][3], g[1][3],
                   g[2][3], g[0][4], g[1][4], g[2][4], g[0][5], g[1][5], g[2][5], clamp, lo, hi);
        };
        ASSERT_EQ(call(dt.nchw, x.data(), w.data(), yRef.data()), 0) << coil_cpu_last_error();
        std::vector<uint8_t> xl = moveDim(x, cc.n, cc.c, inS, dt.es, true);
        std::vector<uint8_t> wl = moveDim(w, cc.m, cc.c / cc.group, kS, dt.es, true);
        ASSERT_EQ(call(dt.nhwc, xl.data(), wl.data(), yGot.data()), 0) << coil_cpu_last_error();
        std::vector<uint8_t> y = moveDim(yGot, cc.n, cc.m, outS, dt.es, false);
        for (int64_t i = 0; i < ny; ++i) {
          double a, r;
          if (dt.es == 4) {
            a = reinterpret_cast<const float *>(y.data())[i];
            r = reinterpret_cast<const float *>(yRef.data())[i];
          } else if (dt.es == 8) {
            a = reinterpret_cast<const double *>(y.data())[i];
            r = reinterpret_cast<const double *>(yRef.data())[i];
          } else {
            uint16_t ha = reinterpret_cast<const uint16_t *>(y.data())[i];
            uint16_t hb = reinterpret_cast<const uint16_t *>(yRef.data())[i];
            EXPECT_LE(std::abs(int(ha) - int(hb)), 1) << "element " << i;
            continue;
          }
          ASSERT_NEAR(a, r, dt.tol * (1 + std::fabs(r))) << "element " << i;
          if (clamp & 1) {
            ASSERT_GE(a, lo) << "element " << i;
          }
          if (clamp & 2) {
            ASSERT_LE(a, hi) << "element " << i;
          }
        }
      }
  float buf[16] = {};
  EXPECT_NE(coil_cpu_conv_nhwc_bias_f32(buf, buf, buf, buf, 1, 4, 4, 1, 2, 1, 4, 1, 1, 1, 1, 1, 4,
                                        1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 4, 0.0, 0.0),
            0);
  EXPECT_NE(std::string(coil_cpu_last_error()).find("conv_nhwc_bias: clamp flags"),
            std::string::npos)
      << coil_cpu_last_error();
}

TEST(CpuConvNhwc, InvalidGeometryFails) {
  float buf[16] = {};
  EXPECT_NE(coil_cpu_conv_nhwc_f32(buf, buf, buf, 1, 4, 4, 3, 2, 1, 4, 1, 1, 1, 1, 1, 4, 1, 1, 1, 1,
                                   1, 1, 1, 0, 0, 0),
            0);
  EXPECT_NE(std::string(coil_cpu_last_error()).find("conv_nhwc: group 3"), std::string::npos)
      << coil_cpu_last_error();
  EXPECT_NE(coil_cpu_conv_nhwc_f32(buf, buf, buf, 1, 4, 4, 1, 2, 1, 4, 1, 1, 1, 1, 1, 4, 1, 1, 0, 1,
                                   1, 1, 1, 0, 0, 0),
            0);
}

} // namespace
