// CPU convolutions: im2col + GEMM (1x1 convolutions straight to GEMM), direct loops for
// depthwise convolutions, and transposed convolutions as GEMM + col2im. f16/bf16 widen their
// operands to f32, run the f32 kernels and round each result once.
// The depthwise paths are in CpuConvDepthwise.cpp, the epilogue of coil_cpu_conv_bias_* in
// CpuConvEpilogue.cpp.
#include "kernels/cpu/CpuAvx512.h"
#include "kernels/cpu/CpuConvInternal.h"
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
  return cpuHasAvx512() && avx512Allowed.load(std::memory_order_relaxed);
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

} // namespace

namespace {

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

/// Whether the small-plane im2col applies (f32, 1-D/2-D, AVX-512; see im2colSmallPlaneAvx512).
bool isSmallPlane(const ConvGeom &g) {
  const int64_t vecs = (g.outSize + 15) / 16;
  return g.inSize <= kSmallPlane && g.out[2] < 16 && g.kSize * vecs <= kSmallPlaneEntries;
}

} // namespace

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

namespace {

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
