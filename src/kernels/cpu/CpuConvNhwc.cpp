// Channels-last convolution (coil_cpu_conv_nhwc_*): x [n, in..., c], w [m, k..., c/group],
// y [n, out..., m]. Per (image, group): an im2col whose rows are output positions and whose
// columns are (kernel position, input channel) -- runs of c/group contiguous channels copied
// at once --, then one GEMM against the weights read transposed. A pointwise convolution of
// one group is a single GEMM over every image's positions, without columns. f16/bf16 are
// widened to f32, computed as f32 and rounded once. coil_cpu_conv_nhwc_bias_* adds a bias per
// output channel and clamps afterwards (in f32 for f16/bf16, before that rounding).
#include "kernels/cpu/Blas.h"
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/CpuKernelsImpl.h"

#include <climits>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

namespace coil::cpu {
namespace {

constexpr const char *kOp = "conv_nhwc";

/// y (rows x cols, ldy) = a (rows x k, lda) * b^T where b is (cols x k, ldb): BLAS when the
/// sizes fit its int, else plain loops.
template <typename T>
void gemmNT(const T *a, int64_t lda, const T *b, int64_t ldb, T *y, int64_t ldy, int64_t rows,
            int64_t cols, int64_t k) {
  if (rows == 0 || cols == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) y[i * ldy + j] = T(0);
    return;
  }
  if (rows <= INT_MAX && cols <= INT_MAX && k <= INT_MAX && lda <= INT_MAX && ldb <= INT_MAX &&
      ldy <= INT_MAX) {
    if constexpr (std::is_same_v<T, float>)
      blasSgemm(false, true, int(rows), int(cols), int(k), 1.0f, a, int(lda), b, int(ldb), 0.0f, y,
                int(ldy));
    else
      blasDgemm(false, true, int(rows), int(cols), int(k), 1.0, a, int(lda), b, int(ldb), 0.0, y,
                int(ldy));
    return;
  }
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      T acc = 0;
      for (int64_t q = 0; q < k; ++q) acc += a[i * lda + q] * b[j * ldb + q];
      y[i * ldy + j] = acc;
    }
}

bool isPointwise(const ConvGeom &g) {
  for (int i = 0; i < 3; ++i)
    if (g.k[i] != 1 || g.s[i] != 1 || g.p[i] != 0 || g.out[i] != g.in[i]) return false;
  return true;
}

/// Columns of image `b`, group `gr`: col[o][kk * cg + ic] = x[b][pos(o, kk)][gr * cg + ic].
template <typename T>
void im2colNhwc(const ConvGeom &g, const T *x, T *col, int64_t b, int64_t gr) {
  const T *xb = x + b * g.inSize * g.c + gr * g.cg;
  for (int64_t o0 = 0; o0 < g.out[0]; ++o0)
    for (int64_t o1 = 0; o1 < g.out[1]; ++o1)
      for (int64_t o2 = 0; o2 < g.out[2]; ++o2) {
        T *row = col + ((o0 * g.out[1] + o1) * g.out[2] + o2) * g.colRows;
        for (int64_t k0 = 0; k0 < g.k[0]; ++k0) {
          int64_t i0 = o0 * g.s[0] - g.p[0] + k0 * g.d[0];
          for (int64_t k1 = 0; k1 < g.k[1]; ++k1) {
            int64_t i1 = o1 * g.s[1] - g.p[1] + k1 * g.d[1];
            for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
              int64_t i2 = o2 * g.s[2] - g.p[2] + k2 * g.d[2];
              T *dst = row + ((k0 * g.k[1] + k1) * g.k[2] + k2) * g.cg;
              if (i0 < 0 || i0 >= g.in[0] || i1 < 0 || i1 >= g.in[1] || i2 < 0 || i2 >= g.in[2]) {
                for (int64_t ic = 0; ic < g.cg; ++ic) dst[ic] = T(0);
                continue;
              }
              const T *src = xb + ((i0 * g.in[1] + i1) * g.in[2] + i2) * g.c;
              std::memcpy(dst, src, size_t(g.cg) * sizeof(T));
            }
          }
        }
      }
}

/// Direct loops, when no column buffer can be had.
template <typename T> void directNhwc(const ConvGeom &g, const T *x, const T *w, T *y) {
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t o0 = 0; o0 < g.out[0]; ++o0)
      for (int64_t o1 = 0; o1 < g.out[1]; ++o1)
        for (int64_t o2 = 0; o2 < g.out[2]; ++o2) {
          T *yo = y + (((b * g.out[0] + o0) * g.out[1] + o1) * g.out[2] + o2) * g.m;
          for (int64_t oc = 0; oc < g.m; ++oc) {
            int64_t gr = oc / g.mg;
            T acc = 0;
            for (int64_t k0 = 0; k0 < g.k[0]; ++k0)
              for (int64_t k1 = 0; k1 < g.k[1]; ++k1)
                for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
                  int64_t i0 = o0 * g.s[0] - g.p[0] + k0 * g.d[0];
                  int64_t i1 = o1 * g.s[1] - g.p[1] + k1 * g.d[1];
                  int64_t i2 = o2 * g.s[2] - g.p[2] + k2 * g.d[2];
                  if (i0 < 0 || i0 >= g.in[0] || i1 < 0 || i1 >= g.in[1] || i2 < 0 || i2 >= g.in[2])
                    continue;
                  const T *xs =
                      x + (((b * g.in[0] + i0) * g.in[1] + i1) * g.in[2] + i2) * g.c + gr * g.cg;
                  const T *ws = w + (oc * g.kSize + (k0 * g.k[1] + k1) * g.k[2] + k2) * g.cg;
                  for (int64_t ic = 0; ic < g.cg; ++ic) acc += xs[ic] * ws[ic];
                }
            yo[oc] = acc;
          }
        }
}

template <typename T> void convNhwc(const ConvGeom &g, const T *x, const T *w, T *y) {
  if (g.n == 0 || g.m == 0 || g.outSize == 0) return;
  if (g.group == 1 && isPointwise(g)) { // one GEMM: [n * positions, c] x [m, c]^T
    gemmNT(x, g.c, w, g.c, y, g.m, g.n * g.outSize, g.m, g.c);
    return;
  }
  std::vector<T> col;
  try {
    col.resize(size_t(g.outSize * g.colRows));
  } catch (const std::bad_alloc &) {
    directNhwc(g, x, w, y);
    return;
  }
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t gr = 0; gr < g.group; ++gr) {
      im2colNhwc(g, x, col.data(), b, gr);
      gemmNT(col.data(), g.colRows, w + gr * g.mg * g.colRows, g.colRows,
             y + b * g.outSize * g.m + gr * g.mg, g.m, g.outSize, g.mg, g.colRows);
    }
}

template <typename T> int32_t runNhwc(const void *x, const void *w, void *y, const ConvArgs &a) {
  ConvGeom g;
  if (int32_t r = makeGeom(kOp, g, a)) return r;
  convNhwc(g, static_cast<const T *>(x), static_cast<const T *>(w), static_cast<T *>(y));
  return 0;
}

template <typename H>
int32_t runNhwcHalf(const void *x, const void *w, void *y, const ConvArgs &a) {
  ConvGeom g;
  if (int32_t r = makeGeom(kOp, g, a)) return r;
  bool done =
      viaF32<H>(x, g.n * g.inSize * g.c, w, g.m * g.colRows, y, g.n * g.outSize * g.m,
                [&](const float *xf, const float *wf, float *yf) { convNhwc(g, xf, wf, yf); });
  return done ? 0 : fail("%s: out of memory", kOp);
}

// --- with a bias and a clamp (coil_cpu_conv_nhwc_bias_*)

constexpr const char *kBiasOp = "conv_nhwc_bias";

/// The epilogue, in place on the `rows` rows of m channels of y: y[r][oc] = clamp(y[r][oc] +
/// bias[oc]) in T, `v < lo ? lo : v` when bit 0 of `clamp` is set, then `v > hi ? hi : v` when
/// bit 1 is (NaN passes), as Add, Relu and Clip lower.
template <typename T>
void biasNhwc(T *y, int64_t rows, int64_t m, const T *bias, int64_t clamp, T lo, T hi) {
  const bool lower = (clamp & 1) != 0, upper = (clamp & 2) != 0;
#pragma omp parallel for schedule(static) if (rows * m >= (int64_t(1) << 18))
  for (int64_t r = 0; r < rows; ++r) {
    T *yr = y + r * m;
#pragma omp simd
    for (int64_t j = 0; j < m; ++j) {
      T v = yr[j] + bias[j];
      if (lower) v = v < lo ? lo : v;
      if (upper) v = v > hi ? hi : v;
      yr[j] = v;
    }
  }
}

template <typename T>
int32_t runNhwcBias(const void *x, const void *w, const void *bias, void *y, const ConvArgs &a,
                    int64_t clamp, double lo, double hi) {
  ConvGeom g;
  if (int32_t r = makeGeom(kBiasOp, g, a)) return r;
  if (clamp < 0 || clamp > 3)
    return fail("%s: clamp flags must be 0 to 3, got %lld", kBiasOp, ll(clamp));
  T *yt = static_cast<T *>(y);
  convNhwc(g, static_cast<const T *>(x), static_cast<const T *>(w), yt);
  biasNhwc(yt, g.n * g.outSize, g.m, static_cast<const T *>(bias), clamp, T(lo), T(hi));
  return 0;
}

/// f16/bf16: the convolution in f32, the bias (widened) and the clamp in f32, one rounding.
template <typename H>
int32_t runNhwcBiasHalf(const void *x, const void *w, const void *bias, void *y,
                        const ConvArgs &a, int64_t clamp, double lo, double hi) {
  ConvGeom g;
  if (int32_t r = makeGeom(kBiasOp, g, a)) return r;
  if (clamp < 0 || clamp > 3)
    return fail("%s: clamp flags must be 0 to 3, got %lld", kBiasOp, ll(clamp));
  bool done = false;
  try {
    std::vector<float> b32 = widen<H>(bias, g.m);
    done = viaF32<H>(x, g.n * g.inSize * g.c, w, g.m * g.colRows, y, g.n * g.outSize * g.m,
                     [&](const float *xf, const float *wf, float *yf) {
                       convNhwc(g, xf, wf, yf);
                       biasNhwc(yf, g.n * g.outSize, g.m, b32.data(), clamp, float(lo),
                                float(hi));
                     });
  } catch (const std::bad_alloc &) {
  }
  return done ? 0 : fail("%s: out of memory", kBiasOp);
}

} // namespace
} // namespace coil::cpu

using namespace coil::cpu;

extern "C" {

#define COIL_CPU_DEFINE_CONV_NHWC(S, RUN)                                                          \
  int32_t coil_cpu_conv_nhwc_##S(const void *x, const void *w, void *y, COIL_CPU_CONV_PARAMS) {    \
    return RUN(x, w, y, COIL_CPU_CONV_ARGS);                                                       \
  }

#define COIL_CPU_DEFINE_CONV_NHWC_BIAS(S, RUN)                                                     \
  int32_t coil_cpu_conv_nhwc_bias_##S(const void *x, const void *w, const void *bias, void *y,     \
                                      COIL_CPU_CONV_PARAMS, int64_t clamp, double lo, double hi) { \
    return RUN(x, w, bias, y, COIL_CPU_CONV_ARGS, clamp, lo, hi);                                  \
  }

COIL_CPU_DEFINE_CONV_NHWC(f32, runNhwc<float>)
COIL_CPU_DEFINE_CONV_NHWC(f64, runNhwc<double>)
COIL_CPU_DEFINE_CONV_NHWC(f16, runNhwcHalf<HalfBits>)
COIL_CPU_DEFINE_CONV_NHWC(bf16, runNhwcHalf<Bf16Bits>)
COIL_CPU_DEFINE_CONV_NHWC_BIAS(f32, runNhwcBias<float>)
COIL_CPU_DEFINE_CONV_NHWC_BIAS(f64, runNhwcBias<double>)
COIL_CPU_DEFINE_CONV_NHWC_BIAS(f16, runNhwcBiasHalf<HalfBits>)
COIL_CPU_DEFINE_CONV_NHWC_BIAS(bf16, runNhwcBiasHalf<Bf16Bits>)
#undef COIL_CPU_DEFINE_CONV_NHWC_BIAS
#undef COIL_CPU_DEFINE_CONV_NHWC

} // extern "C"
