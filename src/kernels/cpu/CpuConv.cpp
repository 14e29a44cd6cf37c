// CPU convolutions: im2col + GEMM (1x1 convolutions straight to GEMM), direct loops for
// depthwise convolutions, and transposed convolutions as GEMM + col2im. f16/bf16 widen their
// operands to f32, run the f32 kernels and round each result once.
#include "kernels/cpu/CpuAvx512.h"
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/CpuKernelsImpl.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <immintrin.h>
#include <memory>
#include <new>
#include <omp.h>
#include <vector>

namespace coil::cpu {

namespace {
std::atomic<bool> avx512Allowed{true};
} // namespace

void setConvAvx512Allowed(bool allowed) {
  avx512Allowed.store(allowed, std::memory_order_relaxed);
}

bool avx512Enabled() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  return yes && avx512Allowed.load(std::memory_order_relaxed);
}

/// 0, or the status of fail naming `op` and the broken rule.
int32_t makeGeom(const char *op, ConvGeom &g, int64_t n, int64_t c, int64_t m, int64_t group,
                 int64_t nd, const int64_t in[3], const int64_t k[3], const int64_t out[3],
                 const int64_t s[3], const int64_t d[3], const int64_t p[3]) {
  if (nd < 1 || nd > 3) return fail("%s: %lld spatial dims, 1 to 3 are supported", op, ll(nd));
  if (n < 0 || c < 0 || m < 0)
    return fail("%s: sizes n %lld, c %lld, m %lld must be >= 0", op, ll(n), ll(c), ll(m));
  if (group < 1 || c % group || m % group)
    return fail("%s: group %lld must be >= 1 and divide the channels %lld and %lld", op, ll(group),
                ll(c), ll(m));
  g.n = n, g.c = c, g.m = m, g.group = group, g.cg = c / group, g.mg = m / group;
  // The spatial dims are right-aligned (unused leading dims of size 1), so that the innermost
  // loops of im2col/col2im run along the last, contiguous dim of a 1-D or 2-D convolution.
  for (int i = 0; i < 3; ++i) {
    int64_t j = i - (3 - nd);
    bool used = j >= 0;
    g.in[i] = used ? in[j] : 1, g.k[i] = used ? k[j] : 1, g.out[i] = used ? out[j] : 1;
    g.s[i] = used ? s[j] : 1, g.d[i] = used ? d[j] : 1, g.p[i] = used ? p[j] : 0;
    if (g.in[i] < 0 || g.k[i] < 0 || g.out[i] < 0 || g.s[i] < 1 || g.d[i] < 1 ||
        g.p[i] < -(INT64_MAX >> 2))
      return fail("%s: spatial dim %lld has input %lld, kernel %lld, output %lld, stride %lld, "
                  "dilation %lld, pad %lld (sizes >= 0, strides and dilations >= 1)",
                  op, ll(j), ll(g.in[i]), ll(g.k[i]), ll(g.out[i]), ll(g.s[i]), ll(g.d[i]),
                  ll(g.p[i]));
    // Coordinates o*s - p + kk*d (and i*s - p + kk*d) must stay far from overflow.
    int64_t a, b, e;
    if (!mulSize(g.out[i], g.s[i], &a) || !mulSize(g.k[i], g.d[i], &b) ||
        !mulSize(g.in[i], g.s[i], &e) || a > (INT64_MAX >> 2) || b > (INT64_MAX >> 2) ||
        e > (INT64_MAX >> 2) || g.p[i] > (INT64_MAX >> 2) || g.out[i] > (INT64_MAX >> 2))
      return fail("%s: the coordinates of spatial dim %lld overflow", op, ll(j));
  }
  int64_t all;
  if (!mulSizes({g.in[0], g.in[1], g.in[2]}, &g.inSize) ||
      !mulSizes({g.k[0], g.k[1], g.k[2]}, &g.kSize) ||
      !mulSizes({g.out[0], g.out[1], g.out[2]}, &g.outSize) ||
      !mulSize(g.cg, g.kSize, &g.colRows) || !mulSizes({n, c, g.inSize}, &all) ||
      !mulSizes({n, m, g.outSize}, &all) || !mulSizes({g.colRows, g.outSize}, &all) ||
      !mulSizes({m, g.colRows}, &all) || !mulSizes({c, g.mg, g.kSize}, &all) ||
      !mulSizes({g.colRows, g.inSize}, &all) || !mulSizes({g.mg, g.kSize, g.inSize}, &all))
    return fail("%s: the tensor sizes overflow int64", op);
  return 0;
}

namespace {

// --- Convolution

/// The output positions o2 of the last dim whose input position o2 * s2 + off lies in
/// [0, in2): [lo, hi).
inline void validRange(int64_t off, int64_t s2, int64_t in2, int64_t out2, int64_t *lo,
                       int64_t *hi) {
  int64_t l = off >= 0 ? 0 : (-off + s2 - 1) / s2;
  int64_t last = in2 - 1 - off; // o2 * s2 <= last
  int64_t h = last < 0 ? 0 : std::min(out2, last / s2 + 1);
  l = std::min(l, out2);
  *lo = l, *hi = std::max(h, l);
}

/// col[(ic*K + kk), o] = x[ic, position(o, kk)] (0 in the padding), for one image and group.
/// Rows are short for small images, so the copies are plain loops (no library call per row).
template <typename T> void im2col(const ConvGeom &g, const T *x, T *col, bool parallel) {
  int64_t K = g.kSize, O = g.outSize;
#pragma omp parallel for schedule(static) if (parallel && g.colRows * O > 65536)
  for (int64_t row = 0; row < g.colRows; ++row) {
    int64_t ic = row / K, kk = row % K;
    int64_t k0 = kk / (g.k[1] * g.k[2]), k1 = (kk / g.k[2]) % g.k[1], k2 = kk % g.k[2];
    const T *xc = x + ic * g.inSize;
    T *dst = col + row * O;
    const int64_t s2 = g.s[2], off = k2 * g.d[2] - g.p[2], out2 = g.out[2];
    int64_t lo, hi;
    validRange(off, s2, g.in[2], out2, &lo, &hi);
    for (int64_t o0 = 0; o0 < g.out[0]; ++o0) {
      int64_t i0 = o0 * g.s[0] - g.p[0] + k0 * g.d[0];
      bool in0 = i0 >= 0 && i0 < g.in[0];
      for (int64_t o1 = 0; o1 < g.out[1]; ++o1) {
        int64_t i1 = o1 * g.s[1] - g.p[1] + k1 * g.d[1];
        T *d = dst + (o0 * g.out[1] + o1) * out2;
        if (!in0 || i1 < 0 || i1 >= g.in[1]) {
          for (int64_t o2 = 0; o2 < out2; ++o2) d[o2] = T(0);
          continue;
        }
        const T *src = xc + (i0 * g.in[1] + i1) * g.in[2] + off;
        for (int64_t o2 = 0; o2 < lo; ++o2) d[o2] = T(0);
        if (s2 == 1) {
#pragma omp simd
          for (int64_t o2 = lo; o2 < hi; ++o2) d[o2] = src[o2];
        } else {
          for (int64_t o2 = lo; o2 < hi; ++o2) d[o2] = src[o2 * s2];
        }
        for (int64_t o2 = hi; o2 < out2; ++o2) d[o2] = T(0);
      }
    }
  }
}

/// y[mc, position(i, kk)] += col[(mc*K + kk), i] for one image and group (the adjoint of
/// im2col with in/out swapped: here `in` is the transposed conv's input, `out` its output).
template <typename T> void col2im(const ConvGeom &g, const T *col, T *y, int64_t channels) {
  int64_t K = g.kSize;
#pragma omp parallel for schedule(static) if (channels * g.outSize > 32768)
  for (int64_t mc = 0; mc < channels; ++mc) {
    T *yc = y + mc * g.outSize;
    for (int64_t kk = 0; kk < K; ++kk) {
      int64_t k0 = kk / (g.k[1] * g.k[2]), k1 = (kk / g.k[2]) % g.k[1], k2 = kk % g.k[2];
      const T *src = col + (mc * K + kk) * g.inSize;
      for (int64_t i0 = 0; i0 < g.in[0]; ++i0) {
        int64_t o0 = i0 * g.s[0] - g.p[0] + k0 * g.d[0];
        if (o0 < 0 || o0 >= g.out[0]) continue;
        for (int64_t i1 = 0; i1 < g.in[1]; ++i1) {
          int64_t o1 = i1 * g.s[1] - g.p[1] + k1 * g.d[1];
          if (o1 < 0 || o1 >= g.out[1]) continue;
          const T *s = src + (i0 * g.in[1] + i1) * g.in[2];
          T *d = yc + (o0 * g.out[1] + o1) * g.out[2];
          for (int64_t i2 = 0; i2 < g.in[2]; ++i2) {
            int64_t o2 = i2 * g.s[2] - g.p[2] + k2 * g.d[2];
            if (o2 >= 0 && o2 < g.out[2]) d[o2] += s[i2];
          }
        }
      }
    }
  }
}

bool isPointwiseConv(const ConvGeom &g) {
  for (int i = 0; i < 3; ++i)
    if (g.k[i] != 1 || g.s[i] != 1 || g.p[i] != 0 || g.out[i] != g.in[i]) return false;
  return true;
}

/// Calls fn(fromFlat, kk, toFlat) for every position `f` of the `from` grid and kernel position
/// kk whose target t = f*s - p + kk*d lies inside the `to` grid (conv: from = output, to =
/// input; transposed conv: from = input, to = output). The workspace-free fallback of the
/// GEMM formulations when their column buffer cannot be allocated.
template <typename F>
void forEachTap(const ConvGeom &g, const int64_t from[3], const int64_t to[3], F fn) {
  for (int64_t f0 = 0; f0 < from[0]; ++f0)
    for (int64_t f1 = 0; f1 < from[1]; ++f1)
      for (int64_t f2 = 0; f2 < from[2]; ++f2)
        for (int64_t k0 = 0; k0 < g.k[0]; ++k0)
          for (int64_t k1 = 0; k1 < g.k[1]; ++k1)
            for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
              int64_t t0 = f0 * g.s[0] - g.p[0] + k0 * g.d[0];
              int64_t t1 = f1 * g.s[1] - g.p[1] + k1 * g.d[1];
              int64_t t2 = f2 * g.s[2] - g.p[2] + k2 * g.d[2];
              if (t0 < 0 || t0 >= to[0] || t1 < 0 || t1 >= to[1] || t2 < 0 || t2 >= to[2]) continue;
              fn((f0 * from[1] + f1) * from[2] + f2, (k0 * g.k[1] + k1) * g.k[2] + k2,
                 (t0 * to[1] + t1) * to[2] + t2);
            }
}

/// Whether the CPU runs the AVX2 + FMA clones of the hot loops (the library itself is built
/// for the baseline ISA).
bool hasAvx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

/// A per-thread workspace of at least `n` elements, kept between calls up to kKeptScratch bytes
/// (no allocation or zeroing per call); nullptr when memory runs out. `local` holds a larger
/// one for the duration of the caller.
constexpr size_t kKeptScratch = size_t(16) << 20;
template <typename T, int Slot> T *scratch(size_t n, std::unique_ptr<T[]> &local) {
  thread_local std::unique_ptr<T[]> kept;
  thread_local size_t keptSize = 0;
  if (n <= keptSize) return kept.get();
  if (n * sizeof(T) > kKeptScratch) {
    local.reset(new (std::nothrow) T[n]);
    return local.get();
  }
  kept.reset(new (std::nothrow) T[n]);
  keptSize = kept ? n : 0;
  return kept.get();
}

/// Output channel oc of image b of a convolution with one input channel per group (depthwise):
/// the taps of the window in order, each a multiply-add over output rows.
template <typename T>
void depthwiseChannel(const ConvGeom &g, const T *x, const T *w, T *y, int64_t b, int64_t oc) {
  const T *xc = x + (b * g.c + oc / g.mg) * g.inSize;
  const T *wc = w + oc * g.kSize;
  T *yc = y + (b * g.m + oc) * g.outSize;
  for (int64_t o = 0; o < g.outSize; ++o) yc[o] = T(0);
  const int64_t s2 = g.s[2], out2 = g.out[2];
  for (int64_t k0 = 0; k0 < g.k[0]; ++k0)
    for (int64_t k1 = 0; k1 < g.k[1]; ++k1)
      for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
        const T wv = wc[(k0 * g.k[1] + k1) * g.k[2] + k2];
        const int64_t off = k2 * g.d[2] - g.p[2];
        int64_t lo, hi;
        validRange(off, s2, g.in[2], out2, &lo, &hi);
        for (int64_t o0 = 0; o0 < g.out[0]; ++o0) {
          int64_t i0 = o0 * g.s[0] - g.p[0] + k0 * g.d[0];
          if (i0 < 0 || i0 >= g.in[0]) continue;
          for (int64_t o1 = 0; o1 < g.out[1]; ++o1) {
            int64_t i1 = o1 * g.s[1] - g.p[1] + k1 * g.d[1];
            if (i1 < 0 || i1 >= g.in[1]) continue;
            const T *src = xc + (i0 * g.in[1] + i1) * g.in[2] + off;
            T *d = yc + (o0 * g.out[1] + o1) * out2;
            if (s2 == 1) {
#pragma omp simd
              for (int64_t o2 = lo; o2 < hi; ++o2) d[o2] += wv * src[o2];
            } else {
              for (int64_t o2 = lo; o2 < hi; ++o2) d[o2] += wv * src[o2 * s2];
            }
          }
        }
      }
}

/// The zero-padded copy of one image and group for im2col: xp [cg, P0, P1, P2] holds x at
/// offset p (begin pads) in every dim, so that position o*s + kk*d needs no bounds check.
struct PaddedGeom {
  int64_t P[3] = {1, 1, 1};
  int64_t size = 0;
};

/// The padded geometry, when it applies (no negative pads) and its copy is smaller than the
/// columns it saves checks for.
bool makePadded(const ConvGeom &g, PaddedGeom &pd) {
  for (int i = 0; i < 3; ++i) {
    if (g.p[i] < 0) return false;
    // The last position read is (out-1)*s + (k-1)*d (all far below overflow, see makeGeom).
    int64_t need =
        g.out[i] == 0 || g.k[i] == 0 ? 0 : (g.out[i] - 1) * g.s[i] + (g.k[i] - 1) * g.d[i] + 1;
    pd.P[i] = std::max(g.in[i] + g.p[i], need);
  }
  return mulSizes({g.cg, pd.P[0], pd.P[1], pd.P[2]}, &pd.size) && pd.size <= g.colRows * g.outSize;
}

template <typename T> void padImage(const ConvGeom &g, const PaddedGeom &pd, const T *x, T *xp) {
  const int64_t P0 = pd.P[0], P1 = pd.P[1], P2 = pd.P[2];
  for (int64_t ic = 0; ic < g.cg; ++ic)
    for (int64_t r0 = 0; r0 < P0; ++r0)
      for (int64_t r1 = 0; r1 < P1; ++r1) {
        T *d = xp + ((ic * P0 + r0) * P1 + r1) * P2;
        int64_t i0 = r0 - g.p[0], i1 = r1 - g.p[1];
        if (i0 < 0 || i0 >= g.in[0] || i1 < 0 || i1 >= g.in[1]) {
          for (int64_t r2 = 0; r2 < P2; ++r2) d[r2] = T(0);
          continue;
        }
        const T *src = x + ((ic * g.in[0] + i0) * g.in[1] + i1) * g.in[2];
        int64_t p2 = g.p[2], in2 = g.in[2];
        for (int64_t r2 = 0; r2 < p2; ++r2) d[r2] = T(0);
        std::memcpy(d + p2, src, size_t(in2) * sizeof(T));
        for (int64_t r2 = p2 + in2; r2 < P2; ++r2) d[r2] = T(0);
      }
}

/// im2col from the padded copy: every output row is a plain copy (of W elements when W > 0,
/// a length the compiler unrolls; out2 otherwise), or with S2 == 2 a copy of every other
/// element (the stride-2 stems of CNNs), which vectorizes with AVX2's permutes.
template <typename T, int W, int S2 = 0>
inline __attribute__((always_inline)) void im2colPaddedRows(const ConvGeom &g, const PaddedGeom &pd,
                                                            const T *xp, T *col) {
  const int64_t O = g.outSize, P0 = pd.P[0], P1 = pd.P[1], P2 = pd.P[2];
  const int64_t out2 = W > 0 ? W : g.out[2], s2 = g.s[2];
  const int64_t step0 = g.s[0] * P1 * P2, step1 = g.s[1] * P2;
  // Rows in order (ic, k0, k1, k2), counted without divisions (they cost more than a short
  // row's copy).
  int64_t row = 0;
  for (int64_t ic = 0; ic < g.cg; ++ic)
    for (int64_t k0 = 0; k0 < g.k[0]; ++k0)
      for (int64_t k1 = 0; k1 < g.k[1]; ++k1)
        for (int64_t k2 = 0; k2 < g.k[2]; ++k2, ++row) {
          const T *base = xp + ((ic * P0 + k0 * g.d[0]) * P1 + k1 * g.d[1]) * P2 + k2 * g.d[2];
          T *d = col + row * O;
          for (int64_t o0 = 0; o0 < g.out[0]; ++o0) {
            const T *src = base + o0 * step0;
            for (int64_t o1 = 0; o1 < g.out[1]; ++o1, src += step1, d += out2) {
              if (S2 == 2) {
#pragma omp simd
                for (int64_t o2 = 0; o2 < out2; ++o2) d[o2] = src[2 * o2];
              } else if (W > 0) {
                std::memcpy(d, src, size_t(W) * sizeof(T));
              } else if (s2 == 1) {
                std::memcpy(d, src, size_t(out2) * sizeof(T));
              } else {
                for (int64_t o2 = 0; o2 < out2; ++o2) d[o2] = src[o2 * s2];
              }
            }
          }
        }
}

template <typename T>
__attribute__((target("avx2,fma"))) void
im2colPaddedStride2Avx2(const ConvGeom &g, const PaddedGeom &pd, const T *xp, T *col) {
  im2colPaddedRows<T, 0, 2>(g, pd, xp, col);
}

template <typename T>
void im2colPadded(const ConvGeom &g, const PaddedGeom &pd, const T *xp, T *col) {
  if (g.s[2] == 2)
    return hasAvx2() ? im2colPaddedStride2Avx2(g, pd, xp, col)
                     : im2colPaddedRows<T, 0, 2>(g, pd, xp, col);
  if (g.s[2] == 1) switch (g.out[2]) {
    case 4:
      return im2colPaddedRows<T, 4>(g, pd, xp, col);
    case 8:
      return im2colPaddedRows<T, 8>(g, pd, xp, col);
    case 16:
      return im2colPaddedRows<T, 16>(g, pd, xp, col);
    case 32:
      return im2colPaddedRows<T, 32>(g, pd, xp, col);
    default:
      break;
    }
  im2colPaddedRows<T, 0>(g, pd, xp, col);
}

/// Whether im2col2dAvx512 applies: at most two spatial dims (the leading one of size 1) and a
/// stride of 1 or 2 along the row (stride 2 without dilation).
bool isIm2col2d(const ConvGeom &g) {
  return g.in[0] == 1 && g.k[0] == 1 && g.out[0] == 1 && g.p[0] == 0 &&
         (g.s[2] == 1 || (g.s[2] == 2 && g.d[2] == 1)) && g.in[2] < (int64_t(1) << 40);
}

/// Input planes of at most this many elements (four vectors) with rows of fewer than 16
/// outputs take im2colSmallPlaneAvx512; its table holds at most kSmallPlaneEntries permutes
/// (taps x vectors of a column row).
constexpr int64_t kSmallPlane = 64;
constexpr int64_t kSmallPlaneEntries = 128;

/// One vector of 16 column elements (flat outputs 16 v to 16 v + 15) of one tap, from a plane
/// held in four registers: lane L takes plane element idx[L] (`lo` lanes from the first 32,
/// `hi` lanes from the last 32; the others are padding or past the row, zero).
struct PlaneTap {
  __m512i idx;
  __mmask16 lo, hi;
};

/// The permutes of im2colSmallPlaneAvx512, the same for every image and channel: taps x
/// vectors entries.
struct SmallPlaneTable {
  int64_t vecs = 0;
  PlaneTap tap[kSmallPlaneEntries];
};

/// Whether the small-plane im2col applies (f32, 1-D/2-D, AVX-512; see im2colSmallPlaneAvx512).
bool isSmallPlane(const ConvGeom &g) {
  const int64_t vecs = (g.outSize + 15) / 16;
  return g.inSize <= kSmallPlane && g.out[2] < 16 && g.kSize * vecs <= kSmallPlaneEntries;
}

__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq"))) void
makeSmallPlaneTable(const ConvGeom &g, SmallPlaneTable &t) {
  static_assert(kSmallPlane <= 64, "the plane must fit the four registers");
  const int64_t O = g.outSize, vecs = (O + 15) / 16;
  t.vecs = vecs;
  alignas(64) int32_t idx[16];
  // Taps and output positions counted without divisions.
  const int64_t out2 = g.out[2], in1 = g.in[1], in2 = g.in[2];
  for (int64_t ky = 0, kk = 0; ky < g.k[1]; ++ky)
    for (int64_t kx = 0; kx < g.k[2]; ++kx, ++kk) {
      int64_t oy = 0, ox = 0;
      for (int64_t v = 0; v < vecs; ++v) {
        unsigned lo = 0, hi = 0;
        for (int L = 0; L < 16; ++L) {
          idx[L] = 0;
          if (16 * v + L >= O) continue;
          const int64_t i1 = oy * g.s[1] - g.p[1] + ky * g.d[1];
          const int64_t i2 = ox * g.s[2] - g.p[2] + kx * g.d[2];
          if (++ox == out2) ox = 0, ++oy;
          if (i1 < 0 || i1 >= in1 || i2 < 0 || i2 >= in2) continue;
          const int64_t src = i1 * in2 + i2; // < inSize <= 64
          idx[L] = int32_t(src);
          (src < 32 ? lo : hi) |= 1u << L;
        }
        PlaneTap &e = t.tap[kk * vecs + v];
        e.idx = _mm512_load_si512(idx);
        e.lo = __mmask16(lo), e.hi = __mmask16(hi);
      }
    }
}

/// im2col of small planes (kSmallPlane elements or fewer) whose output rows are shorter than a
/// vector: the vectors of a column row span several output rows, so instead of one short copy
/// per output row, each input plane is loaded into registers once and every vector of every
/// tap is one or two permutes of them (from `table`, the same for every channel).
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq"))) void
im2colSmallPlaneAvx512(const ConvGeom &g, const SmallPlaneTable &table, const float *x,
                       float *col) {
  const int64_t O = g.outSize, inSize = g.inSize, taps = g.kSize, vecs = table.vecs;
  const __mmask16 tail = laneRange(0, O - 16 * (vecs - 1));
  float *row = col;
  for (int64_t ic = 0; ic < g.cg; ++ic) {
    const float *plane = x + ic * inSize;
    const __m512 p0 = _mm512_maskz_loadu_ps(laneRange(0, inSize), plane);
    const __m512 p1 = _mm512_maskz_loadu_ps(laneRange(0, inSize - 16), shifted(plane, 16));
    const __m512 p2 = _mm512_maskz_loadu_ps(laneRange(0, inSize - 32), shifted(plane, 32));
    const __m512 p3 = _mm512_maskz_loadu_ps(laneRange(0, inSize - 48), shifted(plane, 48));
    const PlaneTap *t = table.tap;
    for (int64_t kk = 0; kk < taps; ++kk, row += O)
      for (int64_t v = 0; v < vecs; ++v, ++t) {
        __m512 r = _mm512_maskz_permutex2var_ps(t->lo, p0, t->idx, p1);
        r = _mm512_mask_mov_ps(r, t->hi, _mm512_permutex2var_ps(p2, t->idx, p3));
        if (v + 1 < vecs)
          _mm512_storeu_ps(row + 16 * v, r);
        else
          _mm512_mask_storeu_ps(row + 16 * v, tail, r);
      }
  }
}

/// im2col of one image and group of a 1-D or 2-D f32 convolution straight from x, 16 outputs
/// of a column row at a time: one masked load per 16 (stride 1) or two and a permute of the
/// even lanes (stride 2), the padding masked to zero, and a masked store. No padded copy, and
/// no per-element bounds tests.
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq"))) void
im2col2dAvx512(const ConvGeom &g, const float *x, float *col) {
  const int64_t in1 = g.in[1], in2 = g.in[2], out1 = g.out[1], out2 = g.out[2];
  const int64_t k1n = g.k[1], k2n = g.k[2], s1 = g.s[1], s2 = g.s[2], d1 = g.d[1], d2 = g.d[2];
  const int64_t p1 = g.p[1], p2 = g.p[2], inSize = g.inSize, O = g.outSize, cg = g.cg;
  const __m512i evens = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512 zero = _mm512_setzero_ps();
  float *dstRow = col;
  for (int64_t ic = 0; ic < cg; ++ic) {
    const float *xc = x + ic * inSize;
    for (int64_t ky = 0; ky < k1n; ++ky)
      for (int64_t kx = 0; kx < k2n; ++kx, dstRow += O) {
        for (int64_t ox0 = 0; ox0 < out2; ox0 += 16) {
          const int64_t n = std::min<int64_t>(16, out2 - ox0);
          const __mmask16 store = laneRange(0, n);
          const int64_t i2s = ox0 * s2 - p2 + kx * d2; // input column of lane 0
          float *d = dstRow + ox0;
          if (s2 == 1) {
            const __mmask16 load = laneRange(-i2s, std::min(n, in2 - i2s));
            if (load == 0xffff && n == 16) { // inside the row: plain loads and stores
              for (int64_t o1 = 0; o1 < out1; ++o1, d += out2) {
                const int64_t i1 = o1 * s1 - p1 + ky * d1;
                __m512 v = zero;
                if (i1 >= 0 && i1 < in1) v = _mm512_loadu_ps(xc + i1 * in2 + i2s);
                _mm512_storeu_ps(d, v);
              }
              continue;
            }
            for (int64_t o1 = 0; o1 < out1; ++o1, d += out2) {
              const int64_t i1 = o1 * s1 - p1 + ky * d1;
              __m512 v = zero;
              if (i1 >= 0 && i1 < in1) v = _mm512_maskz_loadu_ps(load, shifted(xc + i1 * in2, i2s));
              _mm512_mask_storeu_ps(d, store, v);
            }
          } else {
            // Raw lanes r in [0, 2n) hold input columns i2s + r; the outputs take the even ones.
            const __mmask16 lo = laneRange(-i2s, std::min(2 * n, in2 - i2s));
            const __mmask16 hi = laneRange(-i2s - 16, std::min(2 * n, in2 - i2s) - 16);
            if (lo == 0xffff && hi == 0xffff && n == 16) { // inside the row
              for (int64_t o1 = 0; o1 < out1; ++o1, d += out2) {
                const int64_t i1 = o1 * s1 - p1 + ky * d1;
                __m512 v = zero;
                if (i1 >= 0 && i1 < in1) {
                  const float *src = xc + i1 * in2 + i2s;
                  v = _mm512_permutex2var_ps(_mm512_loadu_ps(src), evens,
                                             _mm512_loadu_ps(src + 16));
                }
                _mm512_storeu_ps(d, v);
              }
              continue;
            }
            for (int64_t o1 = 0; o1 < out1; ++o1, d += out2) {
              const int64_t i1 = o1 * s1 - p1 + ky * d1;
              __m512 v = zero;
              if (i1 >= 0 && i1 < in1) {
                const float *src = xc + i1 * in2;
                __m512 a = _mm512_maskz_loadu_ps(lo, shifted(src, i2s));
                __m512 b = _mm512_maskz_loadu_ps(hi, shifted(src, i2s + 16));
                v = _mm512_permutex2var_ps(a, evens, b);
              }
              _mm512_mask_storeu_ps(d, store, v);
            }
          }
        }
      }
  }
}

/// A 2-D depthwise 3x3 window (dilation 1, pads >= 0, stride S along rows, any stride between
/// rows) from the zero-padded channel xp [.., P2]: the nine taps of each output in registers.
template <typename T, int S>
void depthwise3x3Rows(const T *xp, int64_t P2, int64_t s1, const T *wc, T *yc, int64_t out1,
                      int64_t out2) {
  const T w0 = wc[0], w1 = wc[1], w2 = wc[2], w3 = wc[3], w4 = wc[4], w5 = wc[5], w6 = wc[6],
          w7 = wc[7], w8 = wc[8];
  for (int64_t o1 = 0; o1 < out1; ++o1) {
    const T *r0 = xp + o1 * s1 * P2, *r1 = r0 + P2, *r2 = r1 + P2;
    T *d = yc + o1 * out2;
#pragma omp simd
    for (int64_t o2 = 0; o2 < out2; ++o2) {
      const int64_t i = o2 * S;
      d[o2] = w0 * r0[i] + w1 * r0[i + 1] + w2 * r0[i + 2] + w3 * r1[i] + w4 * r1[i + 1] +
              w5 * r1[i + 2] + w6 * r2[i] + w7 * r2[i + 1] + w8 * r2[i + 2];
    }
  }
}

/// Whether depthwise3x3Rows applies: one plane (2-D), 3x3, dilation 1, pads >= 0, strides 1 or
/// 2 along the row.
bool isDepthwise3x3(const ConvGeom &g) {
  return g.in[0] == 1 && g.k[0] == 1 && g.out[0] == 1 && g.p[0] == 0 && g.k[1] == 3 &&
         g.k[2] == 3 && g.d[1] == 1 && g.d[2] == 1 && g.p[1] >= 0 && g.p[2] >= 0 &&
         (g.s[2] == 1 || g.s[2] == 2);
}

/// Depthwise convolution (one input channel per group): im2col + GEMM would be a GEMM of one
/// row per group, so direct loops, per (image, group) in parallel.
/// The epilogue of coil_cpu_conv_bias_*, applied to each output tile while it is in cache:
/// y = clamp(y + bias[oc]) with `v < lo ? lo : v` when `lower` and `v > hi ? hi : v` when
/// `upper` (in this order, as Clip and ReLU lower; NaN passes). Inactive without a bias.
template <typename T> struct ConvEpilogue {
  const T *bias = nullptr;
  bool lower = false, upper = false;
  T lo = T(0), hi = T(0);
  /// d[i] = f(src[i]) for `count` outputs of channel oc (d == src allowed). One loop per
  /// clamp case, so that each vectorizes without tests.
  inline __attribute__((always_inline)) void apply(T *d, const T *src, int64_t count,
                                                   int64_t oc) const {
    const T b = bias[oc], l = lo, h = hi;
    if (lower && upper) {
#pragma omp simd
      for (int64_t i = 0; i < count; ++i) {
        T v = src[i] + b;
        v = v < l ? l : v;
        d[i] = v > h ? h : v;
      }
    } else if (lower) {
#pragma omp simd
      for (int64_t i = 0; i < count; ++i) {
        T v = src[i] + b;
        d[i] = v < l ? l : v;
      }
    } else if (upper) {
#pragma omp simd
      for (int64_t i = 0; i < count; ++i) {
        T v = src[i] + b;
        d[i] = v > h ? h : v;
      }
    } else {
#pragma omp simd
      for (int64_t i = 0; i < count; ++i) d[i] = src[i] + b;
    }
  }
  /// apply in place on `rows` consecutive channel rows of `count` outputs from channel oc0.
  inline __attribute__((always_inline)) void applyRows(T *y, int64_t rows, int64_t count,
                                                       int64_t oc0) const {
    for (int64_t r = 0; r < rows; ++r) apply(y + r * count, y + r * count, count, oc0 + r);
  }
};

template <typename T>
__attribute__((target("avx2,fma"))) void applyRowsAvx2(const ConvEpilogue<T> &ep, T *y,
                                                       int64_t rows, int64_t count, int64_t oc0) {
  ep.applyRows(y, rows, count, oc0);
}
template <typename T>
void applyRowsBase(const ConvEpilogue<T> &ep, T *y, int64_t rows, int64_t count, int64_t oc0) {
  ep.applyRows(y, rows, count, oc0);
}
/// The epilogue of ConvEpilogue on one vector: + bias, then `v < lo ? lo : v` and
/// `v > hi ? hi : v` (max/min return their second operand when either is NaN, so NaN passes;
/// the maskz forms because GCC 12 warns on the plain ones).
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq"), always_inline)) inline __m512
epilogue16(const ConvEpilogue<float> &ep, __m512 v, int64_t oc) {
  if (!ep.bias) return v;
  v = _mm512_add_ps(v, _mm512_set1_ps(ep.bias[oc]));
  if (ep.lower) v = _mm512_maskz_max_ps(0xffff, _mm512_set1_ps(ep.lo), v);
  if (ep.upper) v = _mm512_maskz_min_ps(0xffff, _mm512_set1_ps(ep.hi), v);
  return v;
}

/// The epilogue on f32 rows with AVX-512: rows of 16 or more a vector at a time (a masked
/// tail); shorter rows that divide 16 (1, 2, 4, 8: the small planes of late CNN layers) as
/// one flat run, each vector's biases spread over its lanes by one permute; false for other
/// row lengths.
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq"))) bool
applyRowsAvx512(const ConvEpilogue<float> &ep, float *y, int64_t rows, int64_t count, int64_t oc0) {
  if (count >= 16) {
    for (int64_t r = 0; r < rows; ++r) {
      float *d = y + r * count;
      for (int64_t i = 0; i < count; i += 16) {
        const __mmask16 m = laneRange(0, count - i);
        _mm512_mask_storeu_ps(d + i, m, epilogue16(ep, _mm512_maskz_loadu_ps(m, d + i), oc0 + r));
      }
    }
    return true;
  }
  if (count < 1 || 16 % count != 0) return false;
  const int64_t perVec = 16 / count, total = rows * count;
  alignas(64) int32_t idx[16];
  for (int L = 0; L < 16; ++L) idx[L] = int32_t(L / count);
  const __m512i spread = _mm512_load_si512(idx);
  const __m512 lo = _mm512_set1_ps(ep.lo), hi = _mm512_set1_ps(ep.hi);
  for (int64_t f = 0, r = 0; f < total; f += 16, r += perVec) {
    const __mmask16 m = laneRange(0, total - f);
    const __m512 b = _mm512_maskz_loadu_ps(laneRange(0, rows - r), ep.bias + oc0 + r);
    __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + f),
                             _mm512_maskz_permutexvar_ps(0xffff, spread, b));
    if (ep.lower) v = _mm512_maskz_max_ps(0xffff, lo, v);
    if (ep.upper) v = _mm512_maskz_min_ps(0xffff, hi, v);
    _mm512_mask_storeu_ps(y + f, m, v);
  }
  return true;
}

/// The epilogue on the rows of channels [oc0, oc0 + rows) at y, AVX-512 or AVX2 where the CPU
/// has them.
template <typename T>
void applyEpilogue(const ConvEpilogue<T> &ep, T *y, int64_t rows, int64_t count, int64_t oc0) {
  if (!ep.bias) return;
  if constexpr (std::is_same_v<T, float>) {
    if (avx512Enabled() && applyRowsAvx512(ep, y, rows, count, oc0)) return;
  }
  hasAvx2() ? applyRowsAvx2(ep, y, rows, count, oc0) : applyRowsBase(ep, y, rows, count, oc0);
}

/// The flat 3x3 depthwise path: a 2-D window of 3x3, dilation 1, pads >= 0 and the same stride
/// S (1 or 2) along both dims. Each input plane is copied into the interior of a zero-bordered
/// plane xp of `pitch` columns (zeroed once per call and thread: only the interior changes),
/// and the outputs are computed along the flattened plane: output q = oy * pitch + ox reads
/// xp[S * q + ky * pitch + kx] for every tap, so that the nine taps are nine shifted contiguous
/// (or stride-2) loads and the loop vectorizes whatever the row length; columns ox >= out2 are
/// computed into `tmp` and dropped. Small planes (rows of 2 or 4) vectorize as well as large ones.
struct FlatDw {
  int64_t S = 1, pitch = 0, flat = 0, padSize = 0;
};

bool makeFlatDw(const ConvGeom &g, FlatDw &f) {
  if (!(g.in[0] == 1 && g.k[0] == 1 && g.out[0] == 1 && g.p[0] == 0 && g.k[1] == 3 && g.k[2] == 3 &&
        g.d[1] == 1 && g.d[2] == 1 && g.p[1] >= 0 && g.p[2] >= 0 && g.s[1] == g.s[2] &&
        (g.s[2] == 1 || g.s[2] == 2)))
    return false;
  f.S = g.s[2];
  // Valid outputs read columns up to (out2 - 1) * S + 2 and rows up to (out1 - 1) * S + 2,
  // which must lie in the plane (zero outside the interior); the dropped columns of the last
  // row read up to S * (flat - 1) + 2 * pitch + 2.
  f.pitch = std::max(g.in[2] + g.p[2], (g.out[2] - 1) * f.S + 3);
  int64_t rows = std::max(g.in[1] + g.p[1], (g.out[1] - 1) * f.S + 3);
  if (!mulSize(g.out[1], f.pitch, &f.flat) || !mulSize(rows, f.pitch, &f.padSize)) return false;
  f.padSize = std::max(f.padSize, f.S * f.flat + 2 * f.pitch + 3);
  return f.padSize < (int64_t(1) << 40);
}

/// Planes [begin, end) of the (image, group) items of the flat path, one output channel per
/// group member; xp (padSize) and tmp (flat) are the thread's workspaces, xp zeroed.
template <typename T, int S>
inline __attribute__((always_inline)) void
flatDwPlanes(const ConvGeom &g, const FlatDw &f, const T *x, const T *w, T *y, int64_t begin,
             int64_t end, T *xp, T *tmp, const ConvEpilogue<T> &ep) {
  const int64_t P = f.pitch, in1 = g.in[1], in2 = g.in[2], out1 = g.out[1], out2 = g.out[2];
  T *interior = xp + g.p[1] * P + g.p[2];
  for (int64_t item = begin; item < end; ++item) {
    int64_t b = item / g.group, gr = item % g.group;
    const T *xc = x + (b * g.c + gr) * g.inSize;
    for (int64_t r = 0; r < in1; ++r) {
      T *d = interior + r * P;
      const T *src = xc + r * in2;
#pragma omp simd
      for (int64_t j = 0; j < in2; ++j) d[j] = src[j];
    }
    for (int64_t oc = gr * g.mg; oc < (gr + 1) * g.mg; ++oc) {
      const T *wc = w + oc * 9;
      const T w0 = wc[0], w1 = wc[1], w2 = wc[2], w3 = wc[3], w4 = wc[4], w5 = wc[5], w6 = wc[6],
              w7 = wc[7], w8 = wc[8];
      const T *r0 = xp, *r1 = xp + P, *r2 = xp + 2 * P;
      const int64_t n = f.flat;
#pragma omp simd
      for (int64_t q = 0; q < n; ++q) {
        const int64_t i = q * S;
        tmp[q] = w0 * r0[i] + w1 * r0[i + 1] + w2 * r0[i + 2] + w3 * r1[i] + w4 * r1[i + 1] +
                 w5 * r1[i + 2] + w6 * r2[i] + w7 * r2[i + 1] + w8 * r2[i + 2];
      }
      T *yc = y + (b * g.m + oc) * g.outSize;
      for (int64_t oy = 0; oy < out1; ++oy) {
        T *d = yc + oy * out2;
        const T *src = tmp + oy * P;
        if (ep.bias) {
          ep.apply(d, src, out2, oc);
          continue;
        }
#pragma omp simd
        for (int64_t ox = 0; ox < out2; ++ox) d[ox] = src[ox];
      }
    }
  }
}

template <typename T, int S>
__attribute__((target("avx2,fma"))) void
flatDwPlanesAvx2(const ConvGeom &g, const FlatDw &f, const T *x, const T *w, T *y, int64_t begin,
                 int64_t end, T *xp, T *tmp, const ConvEpilogue<T> &ep) {
  flatDwPlanes<T, S>(g, f, x, w, y, begin, end, xp, tmp, ep);
}
template <typename T, int S>
void flatDwPlanesBase(const ConvGeom &g, const FlatDw &f, const T *x, const T *w, T *y,
                      int64_t begin, int64_t end, T *xp, T *tmp, const ConvEpilogue<T> &ep) {
  flatDwPlanes<T, S>(g, f, x, w, y, begin, end, xp, tmp, ep);
}

/// The flat path over all (image, group) items, in parallel when the work pays for the
/// threads; false (nothing written) when a workspace cannot be allocated.
template <typename T>
bool flatDepthwise(const T *x, T *y, const T *w, const ConvGeom &g, const FlatDw &f,
                   const ConvEpilogue<T> &ep) {
  const int64_t items = g.n * g.group;
  int64_t work; // multiply-adds, counting the dropped columns
  if (!mulSizes({items, g.mg, f.flat, 9}, &work)) work = INT64_MAX;
  using Fn = void (*)(const ConvGeom &, const FlatDw &, const T *, const T *, T *, int64_t, int64_t,
                      T *, T *, const ConvEpilogue<T> &);
  Fn fn = hasAvx2() ? (f.S == 1 ? flatDwPlanesAvx2<T, 1> : flatDwPlanesAvx2<T, 2>)
                    : (f.S == 1 ? flatDwPlanesBase<T, 1> : flatDwPlanesBase<T, 2>);
  bool ok = true;
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  int useThreads = work >= kConvParallelWork && items > 1 ? threads : 1;
#pragma omp parallel num_threads(useThreads) if (useThreads > 1)
  {
    std::unique_ptr<T[]> localPad, localTmp;
    T *xp = scratch<T, 1>(size_t(f.padSize), localPad);
    T *tmp = scratch<T, 2>(size_t(f.flat), localTmp);
    int nt = omp_get_num_threads();
    if (!xp || !tmp) {
#pragma omp atomic write
      ok = false;
    } else {
      std::fill(xp, xp + f.padSize, T(0));
    }
    // Blocks of planes handed out dynamically: a thread that its core shares with another
    // process takes fewer of them instead of holding the others up at the barrier.
    const int64_t block = std::max<int64_t>(1, items / (int64_t(nt) * 8));
    const int64_t blocks = (items + block - 1) / block;
#pragma omp for schedule(dynamic)
    for (int64_t i = 0; i < blocks; ++i)
      if (xp && tmp) fn(g, f, x, w, y, i * block, std::min(items, (i + 1) * block), xp, tmp, ep);
  }
  return ok;
}

/// Kernel columns up to which the row path of depthwiseAvx512 keeps its per-column masks.
constexpr int64_t kDwMaxCols = 16;

/// The per-column loads of one chunk of 16 outputs of a row of the row path: the input column
/// of lane 0 and the masks of the lanes inside the row (stride 2: of the raw lanes of the two
/// loads whose even lanes are the outputs').
struct DwCols {
  int64_t c0[kDwMaxCols];
  __mmask16 m0[kDwMaxCols], m1[kDwMaxCols];
};

/// R output rows from oy of one 16-output chunk: R independent accumulators (the taps of one
/// output are a chain of dependent FMAs).
template <int R>
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq"), always_inline)) inline void
dwRows(const ConvGeom &g, const float *plane, const float *wc, float *yc, const DwCols &cols,
       int64_t oy, int64_t ox0, __mmask16 store, const ConvEpilogue<float> &ep, int64_t oc) {
  const __m512i evens = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const int64_t in1 = g.in[1], in2 = g.in[2], k2n = g.k[2];
  const bool s1 = g.s[2] == 1;
  __m512 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t ky = 0; ky < g.k[1]; ++ky) {
    const float *wr = wc + ky * k2n;
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const int64_t i1 = (oy + r) * g.s[1] - g.p[1] + ky * g.d[1];
      if (i1 < 0 || i1 >= in1) continue;
      const float *row = plane + i1 * in2;
      for (int64_t kx = 0; kx < k2n; ++kx) {
        __m512 v;
        if (s1) {
          v = _mm512_maskz_loadu_ps(cols.m0[kx], shifted(row, cols.c0[kx]));
        } else {
          __m512 a = _mm512_maskz_loadu_ps(cols.m0[kx], shifted(row, cols.c0[kx]));
          __m512 b = _mm512_maskz_loadu_ps(cols.m1[kx], shifted(row, cols.c0[kx] + 16));
          v = _mm512_permutex2var_ps(a, evens, b);
        }
        acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(wr[kx]), v, acc[r]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
    _mm512_mask_storeu_ps(yc + (oy + r) * g.out[2] + ox0, store, epilogue16(ep, acc[r], oc));
}

/// acc + weight * (the plane registers permuted by `t`).
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq"), always_inline)) inline __m512
dwTap(const PlaneTap &t, float weight, __m512 p0, __m512 p1, __m512 p2, __m512 p3, bool wide,
      __m512 acc) {
  __m512 r = _mm512_maskz_permutex2var_ps(t.lo, p0, t.idx, p1);
  if (wide) r = _mm512_mask_mov_ps(r, t.hi, _mm512_permutex2var_ps(p2, t.idx, p3));
  return _mm512_fmadd_ps(_mm512_set1_ps(weight), r, acc);
}

/// Depthwise planes [begin, end) of a 1-D/2-D f32 convolution, on AVX-512. Small planes
/// (`table`): the plane in up to four registers, each output vector the sum over taps of a
/// weight times a permute of them (three accumulators). Others: 16 outputs of a row at a time
/// and four rows at once, each tap one masked load (stride 1) or two and a permute of the even
/// lanes (stride 2) times its weight.
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq"))) void
depthwisePlanesAvx512(const float *x, float *y, const float *w, const ConvGeom &g,
                      const ConvEpilogue<float> &ep, const SmallPlaneTable *table, int64_t begin,
                      int64_t end) {
  const int64_t inSize = g.inSize, O = g.outSize, taps = g.kSize;
  const int64_t in2 = g.in[2], out1 = g.out[1], out2 = g.out[2], s2 = g.s[2];
  for (int64_t item = begin; item < end; ++item) {
    const int64_t b = item / g.group, gr = item % g.group;
    const float *plane = x + (b * g.c + gr) * inSize;
    if (table) {
      const int64_t vecs = table->vecs;
      const __mmask16 tail = laneRange(0, O - 16 * (vecs - 1));
      const __m512 zero = _mm512_setzero_ps();
      const __m512 p0 = _mm512_maskz_loadu_ps(laneRange(0, inSize), plane);
      const __m512 p1 =
          inSize > 16 ? _mm512_maskz_loadu_ps(laneRange(0, inSize - 16), shifted(plane, 16)) : zero;
      const bool wide = inSize > 32;
      const __m512 p2 =
          wide ? _mm512_maskz_loadu_ps(laneRange(0, inSize - 32), shifted(plane, 32)) : zero;
      const __m512 p3 =
          wide ? _mm512_maskz_loadu_ps(laneRange(0, inSize - 48), shifted(plane, 48)) : zero;
      for (int64_t oc = gr * g.mg; oc < (gr + 1) * g.mg; ++oc) {
        const float *wc = w + oc * taps;
        float *yc = y + (b * g.m + oc) * O;
        for (int64_t v = 0; v < vecs; ++v) {
          const PlaneTap *t = table->tap + v;
          // Three accumulators: the taps of one output are a chain of dependent FMAs.
          __m512 a0 = zero, a1 = zero, a2 = zero;
          int64_t kk = 0;
          for (; kk + 3 <= taps; kk += 3) {
            a0 = dwTap(t[kk * vecs], wc[kk], p0, p1, p2, p3, wide, a0);
            a1 = dwTap(t[(kk + 1) * vecs], wc[kk + 1], p0, p1, p2, p3, wide, a1);
            a2 = dwTap(t[(kk + 2) * vecs], wc[kk + 2], p0, p1, p2, p3, wide, a2);
          }
          for (; kk < taps; ++kk) a0 = dwTap(t[kk * vecs], wc[kk], p0, p1, p2, p3, wide, a0);
          __m512 sum = epilogue16(ep, _mm512_add_ps(_mm512_add_ps(a0, a1), a2), oc);
          _mm512_mask_storeu_ps(yc + 16 * v, v + 1 < vecs ? __mmask16(0xffff) : tail, sum);
        }
      }
      continue;
    }
    for (int64_t oc = gr * g.mg; oc < (gr + 1) * g.mg; ++oc) {
      const float *wc = w + oc * taps;
      float *yc = y + (b * g.m + oc) * O;
      for (int64_t ox0 = 0; ox0 < out2; ox0 += 16) {
        const int64_t n = std::min<int64_t>(16, out2 - ox0);
        DwCols cols;
        for (int64_t kx = 0; kx < g.k[2]; ++kx) {
          const int64_t c0 = ox0 * s2 - g.p[2] + kx * g.d[2];
          cols.c0[kx] = c0;
          if (s2 == 1) {
            cols.m0[kx] = laneRange(-c0, std::min(n, in2 - c0)), cols.m1[kx] = 0;
          } else {
            const int64_t rawEnd = std::min(2 * n, in2 - c0);
            cols.m0[kx] = laneRange(-c0, rawEnd), cols.m1[kx] = laneRange(-c0 - 16, rawEnd - 16);
          }
        }
        const __mmask16 store = laneRange(0, n);
        int64_t oy = 0;
        for (; oy + 4 <= out1; oy += 4) dwRows<4>(g, plane, wc, yc, cols, oy, ox0, store, ep, oc);
        for (; oy < out1; ++oy) dwRows<1>(g, plane, wc, yc, cols, oy, ox0, store, ep, oc);
      }
    }
  }
}

/// Whether depthwiseAvx512 takes the small-plane table (see there).
bool usesSmallPlaneTable(const ConvGeom &g) {
  const int64_t vecs = (g.outSize + 15) / 16;
  return (g.inSize <= 32 || (g.inSize <= kSmallPlane && g.s[1] * g.s[2] > 1)) &&
         g.kSize * vecs <= kSmallPlaneEntries;
}

/// Whether an f32 depthwise convolution goes to depthwisePaddedF32 (8 channels at a time)
/// first: all but the shapes where another path measured faster (batch 1 and 4 of
/// MobileNetV2/V3, MNASNet, EfficientNet, ConvNeXt and GhostNet planes on a 2-core Zen 4):
/// the small-plane table's, and 3x3 windows with stride 1 and rows of 14 or more outputs,
/// which the flat path computes from the planes as they are.
bool preferPaddedDepthwise(const ConvGeom &g) {
  FlatDw flat;
  if (g.in[0] != 1 || g.k[0] != 1 || g.out[0] != 1 || usesSmallPlaneTable(g)) return false;
  return !(makeFlatDw(g, flat) && flat.S == 1 && g.out[2] >= 14);
}

/// Depthwise f32 1-D/2-D convolutions on AVX-512 CPUs; false (nothing written) where the path
/// does not apply.
bool depthwiseAvx512(const float *x, float *y, const float *w, const ConvGeom &g,
                     const ConvEpilogue<float> &ep) {
  if (!avx512Enabled() || g.in[0] != 1 || g.k[0] != 1 || g.out[0] != 1 || g.p[0] != 0 ||
      g.in[2] >= (int64_t(1) << 40))
    return false;
  // Where each path measured faster than the flat one (4 images of MobileNetV2's planes on a
  // 2-core Zen 4): planes of up to 32 elements (one or two registers), or 64 with stride 2
  // (fewer outputs per permute), through the table (any strides, dilations, pads); rows of at
  // least 16 outputs with stride 2 (no dilation) through the row path. The rest stays flat.
  std::unique_ptr<SmallPlaneTable> table;
  if (usesSmallPlaneTable(g)) {
    table.reset(new (std::nothrow) SmallPlaneTable);
    if (!table) return false;
    makeSmallPlaneTable(g, *table);
  } else if (!(g.s[2] == 2 && g.d[2] == 1 && g.out[2] >= 16) || g.k[2] > kDwMaxCols) {
    return false;
  }
  const int64_t items = g.n * g.group;
  int64_t work; // multiply-adds
  if (!mulSizes({g.n, g.m, g.outSize, g.kSize}, &work)) work = INT64_MAX;
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  // Planes cost a few dozen cycles each beyond their multiply-adds.
  int use = work + 128 * items >= kConvParallelWork && items > 1 ? threads : 1;
#pragma omp parallel num_threads(use) if (use > 1)
  {
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t per = items / nt, extra = items % nt;
    const int64_t begin = t * per + std::min<int64_t>(t, extra);
    const int64_t end = begin + per + (t < extra ? 1 : 0);
    depthwisePlanesAvx512(x, y, w, g, ep, table.get(), begin, end);
  }
  return true;
}

template <typename T>
void depthwise(const T *x, T *y, const T *w, const ConvGeom &g, const ConvEpilogue<T> &ep) {
  FlatDw flat;
  if constexpr (std::is_same_v<T, float>) {
    if (preferPaddedDepthwise(g) &&
        depthwisePaddedF32(x, y, w, g, ep.bias, ep.lower, ep.upper, ep.lo, ep.hi))
      return;
    if (depthwiseAvx512(x, y, w, g, ep)) return;
  }
  if (makeFlatDw(g, flat) && flatDepthwise(x, y, w, g, flat, ep)) return;
  int64_t items = g.n * g.group, all;
  if (!mulSizes({g.n, g.m, g.outSize, g.kSize}, &all)) all = INT64_MAX;
  // The 3x3 fast path pads one channel: rows of P2, enough of them for the last output row.
  bool fast = isDepthwise3x3(g);
  int64_t P1 = 0, P2 = 0, padSize = 0;
  if (fast) {
    P1 = std::max(g.in[1] + g.p[1], (g.out[1] - 1) * g.s[1] + 3);
    P2 = std::max(g.in[2] + g.p[2], (g.out[2] - 1) * g.s[2] + 3);
    fast = mulSize(P1, P2, &padSize);
  }
#pragma omp parallel for schedule(static) if (items > 1 && all >= kConvParallelWork)
  for (int64_t item = 0; item < items; ++item) {
    int64_t b = item / g.group, gr = item % g.group;
    std::unique_ptr<T[]> local;
    T *xp = fast ? scratch<T, 1>(size_t(padSize), local) : nullptr;
    if (!xp) {
      for (int64_t oc = gr * g.mg; oc < (gr + 1) * g.mg; ++oc) depthwiseChannel(g, x, w, y, b, oc);
      continue;
    }
    const T *xc = x + (b * g.c + gr) * g.inSize;
    for (int64_t r1 = 0; r1 < P1; ++r1) {
      T *d = xp + r1 * P2;
      int64_t i1 = r1 - g.p[1];
      if (i1 < 0 || i1 >= g.in[1]) {
        for (int64_t r2 = 0; r2 < P2; ++r2) d[r2] = T(0);
        continue;
      }
      for (int64_t r2 = 0; r2 < g.p[2]; ++r2) d[r2] = T(0);
      std::memcpy(d + g.p[2], xc + i1 * g.in[2], size_t(g.in[2]) * sizeof(T));
      for (int64_t r2 = g.p[2] + g.in[2]; r2 < P2; ++r2) d[r2] = T(0);
    }
    for (int64_t oc = gr * g.mg; oc < (gr + 1) * g.mg; ++oc) {
      T *yc = y + (b * g.m + oc) * g.outSize;
      if (g.s[2] == 1)
        depthwise3x3Rows<T, 1>(xp, P2, g.s[1], w + oc * 9, yc, g.out[1], g.out[2]);
      else
        depthwise3x3Rows<T, 2>(xp, P2, g.s[1], w + oc * 9, yc, g.out[1], g.out[2]);
    }
  }
  for (int64_t b = 0; b < g.n; ++b) applyEpilogue(ep, y + b * g.m * g.outSize, g.m, g.outSize, 0);
}

template <typename T>
void conv(const T *x, T *y, const T *w, const ConvGeom &g, const ConvEpilogue<T> &ep = {}) {
  if (g.n == 0 || g.m == 0 || g.outSize == 0) return;
  int64_t work; // multiply-adds per (image, group)
  if (!mulSizes({g.mg, g.outSize, g.colRows}, &work)) work = INT64_MAX;
  if (g.cg == 1) return depthwise(x, y, w, g, ep);
  bool direct = isPointwiseConv(g);
  if constexpr (std::is_same_v<T, float>) {
    if (!direct && avx512Enabled() &&
        convImplicitF32(x, y, w, g, ep.bias, ep.lower, ep.upper, ep.lo, ep.hi))
      return;
  }
  int64_t items = g.n * g.group; // (image, group) pairs, each one GEMM
  size_t colSize = direct ? 0 : size_t(g.colRows * g.outSize);
  PaddedGeom pd;
  bool padded = !direct && makePadded(g, pd);
  // f32 1-D/2-D columns through masked AVX-512 loads, straight from x, for rows of fewer than
  // 64 outputs (longer ones measured as fast or faster as padded copies and row copies).
  const bool fast2d =
      std::is_same_v<T, float> && !direct && isIm2col2d(g) && g.out[2] < 64 && avx512Enabled();
  // Small planes: permutes of registers, from a table made once for all images.
  std::unique_ptr<SmallPlaneTable> small;
  if (fast2d && isSmallPlane(g)) {
    small.reset(new (std::nothrow) SmallPlaneTable);
    if (small) makeSmallPlaneTable(g, *small);
  }
  // One (image, group): im2col into `col` (unless 1x1), then y_g [mg, O] = w_g [mg, cg*K] *
  // col [cg*K, O].
  auto one = [&](int64_t item, bool parallel) {
    int64_t b = item / g.group, gr = item % g.group;
    const T *xg = x + (b * g.c + gr * g.cg) * g.inSize;
    T *yg = y + (b * g.m + gr * g.mg) * g.outSize;
    const T *wg = w + gr * g.mg * g.colRows;
    const T *cols = xg;
    std::unique_ptr<T[]> local;
    if (!direct) {
      T *col = scratch<T, 0>(colSize, local);
      if (!col) { // no memory for the columns: direct loops
        std::fill(yg, yg + g.mg * g.outSize, T(0));
        for (int64_t oc = 0; oc < g.mg; ++oc)
          for (int64_t ic = 0; ic < g.cg; ++ic)
            forEachTap(g, g.out, g.in, [&](int64_t o, int64_t kk, int64_t i) {
              yg[oc * g.outSize + o] += xg[ic * g.inSize + i] * wg[(oc * g.cg + ic) * g.kSize + kk];
            });
        applyEpilogue(ep, yg, g.mg, g.outSize, gr * g.mg);
        return;
      }
      bool colDone = false;
      if constexpr (std::is_same_v<T, float>) {
        if (small)
          im2colSmallPlaneAvx512(g, *small, xg, col), colDone = true;
        else if (fast2d)
          im2col2dAvx512(g, xg, col), colDone = true;
      }
      if (!colDone) {
        std::unique_ptr<T[]> localPad;
        T *xp = padded ? scratch<T, 1>(size_t(pd.size), localPad) : nullptr;
        if (xp) {
          padImage(g, pd, xg, xp);
          im2colPadded(g, pd, xp, col);
        } else {
          im2col(g, xg, col, parallel);
        }
      }
      cols = col;
    }
    gemmOne<T>(wg, cols, yg, g.mg, g.outSize, g.colRows, false, false, T(1), T(0));
    applyEpilogue(ep, yg, g.mg, g.outSize, gr * g.mg);
  };
  // Images (and groups) in parallel, each one GEMM on its thread, when the call has
  // kConvParallelWork multiply-adds or more and there are enough of them for the threads or
  // they are small; else one at a time (with BLAS's own threads for large calls).
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  int64_t total; // multiply-adds of the whole call
  if (!mulSizes({items, work}, &total)) total = INT64_MAX;
  if (total < kConvParallelWork) threads = 1;
  if (items > 1 && threads > 1 && (items >= threads || work <= kSmallGemm)) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < items; ++i) one(i, false);
  } else {
    for (int64_t i = 0; i < items; ++i) one(i, total >= kConvParallelWork);
  }
}

template <typename T> void convTranspose(const T *x, T *y, const T *w, const ConvGeom &g) {
  int64_t total = g.n * g.m * g.outSize;
  std::fill(y, y + total, T(0));
  if (g.n == 0 || g.c == 0 || g.inSize == 0) return;
  int64_t rows = g.mg * g.kSize; // col [mg*K, inSize]
  std::vector<T> col;
  try {
    col.resize(size_t(rows * g.inSize));
  } catch (const std::bad_alloc &) { // no memory for the columns: direct loops
    for (int64_t b = 0; b < g.n; ++b)
      for (int64_t gr = 0; gr < g.group; ++gr)
        for (int64_t ic = 0; ic < g.cg; ++ic)
          for (int64_t oc = 0; oc < g.mg; ++oc) {
            const T *xc = x + (b * g.c + gr * g.cg + ic) * g.inSize;
            const T *wc = w + ((gr * g.cg + ic) * g.mg + oc) * g.kSize;
            T *yc = y + (b * g.m + gr * g.mg + oc) * g.outSize;
            forEachTap(g, g.in, g.out,
                       [&](int64_t i, int64_t kk, int64_t o) { yc[o] += xc[i] * wc[kk]; });
          }
    return;
  }
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t gr = 0; gr < g.group; ++gr) {
      const T *xg = x + (b * g.c + gr * g.cg) * g.inSize; // [cg, inSize]
      const T *wg = w + gr * g.cg * rows;                 // [cg, mg*K]
      T *yg = y + (b * g.m + gr * g.mg) * g.outSize;
      gemmOne<T>(wg, xg, col.data(), rows, g.inSize, g.cg, true, false, T(1), T(0));
      col2im(g, col.data(), yg, g.mg);
    }
}

// --- f16 / bf16

/// The flat input position that conv output `o` reads through kernel tap `kk`, or -1 (padding).
int64_t convSource(const ConvGeom &g, int64_t o, int64_t kk) {
  int64_t oi[3] = {o / (g.out[1] * g.out[2]), (o / g.out[2]) % g.out[1], o % g.out[2]};
  int64_t ki[3] = {kk / (g.k[1] * g.k[2]), (kk / g.k[2]) % g.k[1], kk % g.k[2]}, pos = 0;
  for (int d = 0; d < 3; ++d) {
    int64_t i = oi[d] * g.s[d] - g.p[d] + ki[d] * g.d[d];
    if (i < 0 || i >= g.in[d]) return -1;
    pos = pos * g.in[d] + i;
  }
  return pos;
}

/// The flat input position whose transposed-conv contribution through tap `kk` lands on
/// output `o`, or -1.
int64_t transposedSource(const ConvGeom &g, int64_t o, int64_t kk) {
  int64_t oi[3] = {o / (g.out[1] * g.out[2]), (o / g.out[2]) % g.out[1], o % g.out[2]};
  int64_t ki[3] = {kk / (g.k[1] * g.k[2]), (kk / g.k[2]) % g.k[1], kk % g.k[2]}, pos = 0;
  for (int d = 0; d < 3; ++d) {
    int64_t t = oi[d] + g.p[d] - ki[d] * g.d[d];
    if (t < 0 || t % g.s[d] != 0 || t / g.s[d] >= g.in[d]) return -1;
    pos = pos * g.in[d] + t / g.s[d];
  }
  return pos;
}

/// The f16/bf16 convolution: widened to f32, conv<float> with the epilogue `ep` (its bias in
/// f32; inactive without one), each result rounded once.
template <typename H>
void convHalf(const void *x, const void *w, void *y, const ConvGeom &g,
              const ConvEpilogue<float> &ep = {}) {
  int64_t xs = g.n * g.c * g.inSize, ws = g.m * g.colRows, ys = g.n * g.m * g.outSize;
  if (viaF32<H>(x, xs, w, ws, y, ys, [&](const float *x32, const float *w32, float *y32) {
        conv<float>(x32, y32, w32, g, ep);
      }))
    return;
  // No memory for the f32 copies: direct loops, the epilogue before the rounding.
  const auto *xh = static_cast<const uint16_t *>(x), *wh = static_cast<const uint16_t *>(w);
  auto *yh = static_cast<uint16_t *>(y);
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t oc = 0; oc < g.m; ++oc)
      for (int64_t o = 0; o < g.outSize; ++o) {
        int64_t gr = oc / g.mg;
        float acc = 0;
        for (int64_t ic = 0; ic < g.cg; ++ic)
          for (int64_t kk = 0; kk < g.kSize; ++kk) {
            int64_t i = convSource(g, o, kk);
            if (i >= 0)
              acc += H::load(xh[(b * g.c + gr * g.cg + ic) * g.inSize + i]) *
                     H::load(wh[(oc * g.cg + ic) * g.kSize + kk]);
          }
        if (ep.bias) ep.apply(&acc, &acc, 1, oc);
        yh[(b * g.m + oc) * g.outSize + o] = H::store(acc);
      }
}

/// coil_cpu_conv_bias_<f16|bf16>: the bias widened to f32 (m values) and the clamp bounds in
/// f32, then convHalf with that epilogue, so that conv + bias (+ clamp) is rounded once. False
/// when memory for the widened bias runs out.
template <typename H>
bool convBiasHalf(const void *x, const void *w, const void *bias, void *y, const ConvGeom &g,
                  int64_t clamp, double lo, double hi) {
  std::vector<float> b32;
  try {
    b32 = widen<H>(bias, g.m);
  } catch (const std::bad_alloc &) {
    return false;
  }
  ConvEpilogue<float> ep;
  ep.bias = b32.data();
  ep.lower = (clamp & 1) != 0, ep.upper = (clamp & 2) != 0;
  ep.lo = float(lo), ep.hi = float(hi);
  convHalf<H>(x, w, y, g, ep);
  return true;
}

template <typename H>
void convTransposeHalf(const void *x, const void *w, void *y, const ConvGeom &g) {
  int64_t xs = g.n * g.c * g.inSize, ws = g.c * g.mg * g.kSize, ys = g.n * g.m * g.outSize;
  if (viaF32<H>(x, xs, w, ws, y, ys, [&](const float *x32, const float *w32, float *y32) {
        convTranspose<float>(x32, y32, w32, g);
      }))
    return;
  // No memory for the f32 copies: direct loops.
  const auto *xh = static_cast<const uint16_t *>(x), *wh = static_cast<const uint16_t *>(w);
  auto *yh = static_cast<uint16_t *>(y);
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t oc = 0; oc < g.m; ++oc)
      for (int64_t o = 0; o < g.outSize; ++o) {
        int64_t gr = oc / g.mg, mc = oc % g.mg;
        float acc = 0;
        for (int64_t kk = 0; kk < g.kSize; ++kk) {
          int64_t i = transposedSource(g, o, kk);
          if (i < 0) continue;
          for (int64_t ic = gr * g.cg; ic < (gr + 1) * g.cg; ++ic)
            acc += H::load(xh[(b * g.c + ic) * g.inSize + i]) *
                   H::load(wh[(ic * g.mg + mc) * g.kSize + kk]);
        }
        yh[(b * g.m + oc) * g.outSize + o] = H::store(acc);
      }
}

} // namespace
} // namespace coil::cpu

using namespace coil::cpu;

extern "C" {

#define COIL_CPU_DEFINE_CONV(S, T)                                                                 \
  int32_t coil_cpu_conv_##S(const void *x, const void *w, void *y, COIL_CPU_CONV_PARAMS) {         \
    ConvGeom g;                                                                                    \
    if (int32_t rc = makeGeom("conv", g, COIL_CPU_CONV_ARGS)) return rc;                           \
    conv<T>(static_cast<const T *>(x), static_cast<T *>(y), static_cast<const T *>(w), g);         \
    return 0;                                                                                      \
  }                                                                                                \
  int32_t coil_cpu_conv_transpose_##S(const void *x, const void *w, void *y,                       \
                                      COIL_CPU_CONV_PARAMS) {                                      \
    ConvGeom g;                                                                                    \
    if (int32_t rc = makeGeom("conv transpose", g, COIL_CPU_CONV_ARGS)) return rc;                 \
    convTranspose<T>(static_cast<const T *>(x), static_cast<T *>(y), static_cast<const T *>(w),    \
                     g);                                                                           \
    return 0;                                                                                      \
  }                                                                                                \
  int32_t coil_cpu_conv_bias_##S(const void *x, const void *w, const void *bias, void *y,          \
                                 COIL_CPU_CONV_PARAMS, int64_t clamp, double lo, double hi) {      \
    ConvGeom g;                                                                                    \
    if (int32_t rc = makeGeom("conv bias", g, COIL_CPU_CONV_ARGS)) return rc;                      \
    if (clamp < 0 || clamp > 3)                                                                    \
      return fail("conv bias: clamp flags must be 0 to 3, got %lld", ll(clamp));                   \
    ConvEpilogue<T> ep;                                                                            \
    ep.bias = static_cast<const T *>(bias);                                                        \
    ep.lower = (clamp & 1) != 0, ep.upper = (clamp & 2) != 0;                                      \
    ep.lo = T(lo), ep.hi = T(hi);                                                                  \
    conv<T>(static_cast<const T *>(x), static_cast<T *>(y), static_cast<const T *>(w), g, ep);     \
    return 0;                                                                                      \
  }

COIL_CPU_DEFINE_CONV(f32, float)
COIL_CPU_DEFINE_CONV(f64, double)
#undef COIL_CPU_DEFINE_CONV

#define COIL_CPU_DEFINE_CONV_HALF(S, H)                                                            \
  int32_t coil_cpu_conv_##S(const void *x, const void *w, void *y, COIL_CPU_CONV_PARAMS) {         \
    ConvGeom g;                                                                                    \
    if (int32_t rc = makeGeom("conv", g, COIL_CPU_CONV_ARGS)) return rc;                           \
    convHalf<H>(x, w, y, g);                                                                       \
    return 0;                                                                                      \
  }                                                                                                \
  int32_t coil_cpu_conv_transpose_##S(const void *x, const void *w, void *y,                       \
                                      COIL_CPU_CONV_PARAMS) {                                      \
    ConvGeom g;                                                                                    \
    if (int32_t rc = makeGeom("conv transpose", g, COIL_CPU_CONV_ARGS)) return rc;                 \
    convTransposeHalf<H>(x, w, y, g);                                                              \
    return 0;                                                                                      \
  }                                                                                                \
  int32_t coil_cpu_conv_bias_##S(const void *x, const void *w, const void *bias, void *y,          \
                                 COIL_CPU_CONV_PARAMS, int64_t clamp, double lo, double hi) {      \
    ConvGeom g;                                                                                    \
    if (int32_t rc = makeGeom("conv bias", g, COIL_CPU_CONV_ARGS)) return rc;                      \
    if (clamp < 0 || clamp > 3)                                                                    \
      return fail("conv bias: clamp flags must be 0 to 3, got %lld", ll(clamp));                   \
    if (!convBiasHalf<H>(x, w, bias, y, g, clamp, lo, hi))                                         \
      return fail("conv bias: out of memory for the f32 bias (%lld channels)", ll(g.m));           \
    return 0;                                                                                      \
  }

COIL_CPU_DEFINE_CONV_HALF(f16, HalfBits)
COIL_CPU_DEFINE_CONV_HALF(bf16, Bf16Bits)
#undef COIL_CPU_DEFINE_CONV_HALF

} // extern "C"
