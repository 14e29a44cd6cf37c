// CPU depthwise convolutions (one input channel per group; see CpuConvInternal.h): per
// channel direct loops, a vectorized 3x3 path on a zero-padded copy, the flat 3x3 path along
// the flattened plane, and on AVX-512 CPUs f32 small planes through register permutes and
// stride-2 rows through masked loads (CpuConvDwAvx512.cpp holds the 8-channel f32 path).
#include "kernels/cpu/CpuConvInternal.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <omp.h>
#include <type_traits>

namespace coil::cpu {

namespace {

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

} // namespace

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

template void depthwise<float>(const float *x, float *y, const float *w, const ConvGeom &g,
                               const ConvEpilogue<float> &ep);
template void depthwise<double>(const double *x, double *y, const double *w, const ConvGeom &g,
                                const ConvEpilogue<double> &ep);

} // namespace coil::cpu
