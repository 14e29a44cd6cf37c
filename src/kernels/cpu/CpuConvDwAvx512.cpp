// Depthwise f32 convolutions (one input channel per group) of any window, stride, dilation and
// padding, on AVX-512 CPUs, eight output channels at a time in a channels-interleaved
// workspace (the layout onnxruntime's NCHWc kernels keep between layers, made here per call):
// the input planes of eight output channels are transposed into one zero-bordered plane of
// 8-channel vectors, each output vector is the sum over taps of a weight vector (the eight
// channels' weights of the tap) times the input vector at the tap's position (aligned loads,
// no masks, no lanes wasted on short rows), eight outputs of a row at a time, and each 8 x 8
// block of results is transposed back into the eight output rows with the bias and clamps of
// coil_cpu_conv_bias_* applied.
#include "kernels/cpu/CpuAvx512.h"
#include "kernels/cpu/CpuKernelsImpl.h"

#include <algorithm>
#include <cstring>
#include <immintrin.h>
#include <memory>
#include <new>
#include <omp.h>

#define COIL_DW_TARGET __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))

namespace coil::cpu {
namespace {

/// Channels per block (lanes of a 256-bit vector) and outputs of a row per register block.
constexpr int64_t kC = 8;
constexpr int64_t kOx = 8;
/// Most window taps (the block's weights are kept transposed on the stack).
constexpr int64_t kMaxTaps = 256;

/// The workspace of one block: rows x cols positions of 8 channels; padded position (r, c)
/// holds input (r - p1, c - p2) of each channel, or zero.
struct DwPlan {
  int64_t rows = 0, cols = 0, size = 0;
  int64_t obs = 0; ///< blocks of kOx outputs per output row
};

bool makePlan(const ConvGeom &g, DwPlan &p) {
  if (g.in[0] != 1 || g.k[0] != 1 || g.out[0] != 1 || g.p[0] != 0 || g.cg != 1 || g.kSize < 1 ||
      g.kSize > kMaxTaps || g.out[1] > (int64_t(1) << 24) || g.out[2] > (int64_t(1) << 24) ||
      g.s[1] > (1 << 12) || g.s[2] > (1 << 12) || g.d[1] > (1 << 12) || g.d[2] > (1 << 12))
    return false;
  p.obs = (g.out[2] + kOx - 1) / kOx;
  // Positions read: rows up to (out1 - 1) s1 + (k1 - 1) d1, columns up to (obs kOx - 1) s2 +
  // (k2 - 1) d2 (the outputs past the row's end are computed and dropped).
  p.rows = (g.out[1] - 1) * g.s[1] + (g.k[1] - 1) * g.d[1] + 1;
  p.cols = (p.obs * kOx - 1) * g.s[2] + (g.k[2] - 1) * g.d[2] + 1;
  int64_t size;
  if (!mulSizes({p.rows, p.cols, kC}, &size) || size > (int64_t(1) << 28)) return false;
  p.size = size;
  return true;
}

/// The 8 x 8 transpose of r[0..7] in place.
COIL_DW_TARGET inline __attribute__((always_inline)) void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xee);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xee);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xee);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xee);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20), r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20), r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20), r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20), r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/// The mask of the first n lanes of 8.
inline __mmask8 first(int64_t n) {
  return __mmask8(laneRange(0, std::min<int64_t>(n, 8)));
}

struct Epi {
  const float *bias = nullptr;
  bool lower = false, upper = false;
  float lo = 0, hi = 0;
};

/// Stores the kOx outputs acc[j] (8 channels each) of output row oy from column ob kOx, after
/// the epilogue, into the output rows of the nc channels from oc0.
COIL_DW_TARGET inline __attribute__((always_inline)) void
storeBlock(const ConvGeom &g, const Epi &ep, __m256 acc[kOx], __m256 bias, float *yb, int64_t nc,
           int64_t oy, int64_t ob) {
  if (ep.bias) {
    const __m256 lo = _mm256_set1_ps(ep.lo), hi = _mm256_set1_ps(ep.hi);
#pragma GCC unroll 8
    for (int j = 0; j < kOx; ++j) {
      acc[j] = _mm256_add_ps(acc[j], bias);
      // `v < lo ? lo : v`, `v > hi ? hi : v` (max/min return their second operand when
      // either is NaN, so NaN passes).
      if (ep.lower) acc[j] = _mm256_max_ps(lo, acc[j]);
      if (ep.upper) acc[j] = _mm256_min_ps(hi, acc[j]);
    }
  }
  transpose8(acc); // acc[c] now holds outputs ob kOx .. + 7 of channel c
  const int64_t out2 = g.out[2];
  const __mmask8 m = first(out2 - ob * kOx);
  float *d = yb + oy * out2 + ob * kOx;
  if (nc == kC) {
#pragma GCC unroll 8
    for (int64_t c = 0; c < kC; ++c) _mm256_mask_storeu_ps(d + c * g.outSize, m, acc[c]);
    return;
  }
  for (int64_t c = 0; c < nc; ++c) _mm256_mask_storeu_ps(d + c * g.outSize, m, acc[c]);
}

/// Output rows [oy0, oy0 + R) x the kOx outputs from column ob kOx of a window of K1 rows,
/// row stride S1 and no dilation between rows: each input row the block reads is loaded once
/// per window column and serves every output row of the block it falls into, with the
/// column's K1 weight vectors in registers.
template <int K1, int S1, int R>
COIL_DW_TARGET inline __attribute__((always_inline)) void
rowsBlock(const ConvGeom &g, const DwPlan &p, const float *xp, const float *wt, const Epi &ep,
          __m256 bias, float *yb, int64_t nc, int64_t oy0, int64_t ob) {
  const int64_t cols = p.cols, k2 = g.k[2], step = g.s[2] * kC, dstep = g.d[2] * kC;
  __m256 acc[R][kOx];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < kOx; ++j) acc[r][j] = _mm256_setzero_ps();
  const float *base = xp + (oy0 * S1 * cols + ob * kOx * g.s[2]) * kC;
  for (int64_t kx = 0; kx < k2; ++kx, base += dstep) {
    __m256 wcol[K1];
#pragma GCC unroll 8
    for (int ky = 0; ky < K1; ++ky) wcol[ky] = _mm256_load_ps(wt + (ky * k2 + kx) * kC);
#pragma GCC unroll 16
    for (int t = 0; t < (R - 1) * S1 + K1; ++t) {
      const float *src = base + t * cols * kC;
#pragma GCC unroll 8
      for (int j = 0; j < kOx; ++j) {
        const __m256 xv = _mm256_load_ps(src + j * step);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const int ky = t - S1 * r;
          if (ky >= 0 && ky < K1) acc[r][j] = _mm256_fmadd_ps(wcol[ky], xv, acc[r][j]);
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) storeBlock(g, ep, acc[r], bias, yb, nc, oy0 + r, ob);
}

/// All output rows of a block through rowsBlock, two rows at a time.
template <int K1, int S1>
COIL_DW_TARGET void rowsChannels(const ConvGeom &g, const DwPlan &p, const float *xp,
                                 const float *wt, const Epi &ep, __m256 bias, float *yb,
                                 int64_t nc) {
  const int64_t out1 = g.out[1];
  int64_t oy = 0;
  for (; oy + 2 <= out1; oy += 2)
    for (int64_t ob = 0; ob < p.obs; ++ob)
      rowsBlock<K1, S1, 2>(g, p, xp, wt, ep, bias, yb, nc, oy, ob);
  for (; oy < out1; ++oy)
    for (int64_t ob = 0; ob < p.obs; ++ob)
      rowsBlock<K1, S1, 1>(g, p, xp, wt, ep, bias, yb, nc, oy, ob);
}

using RowsFn = void (*)(const ConvGeom &, const DwPlan &, const float *, const float *, const Epi &,
                        __m256, float *, int64_t);

/// The rowsChannels instance for g's window height and row stride; nullptr for other heights,
/// strides or a dilation between rows (the generic loop).
RowsFn rowsFor(const ConvGeom &g) {
  if (g.d[1] != 1 || (g.s[1] != 1 && g.s[1] != 2)) return nullptr;
  const bool one = g.s[1] == 1;
  switch (g.k[1]) {
  case 1:
    return one ? rowsChannels<1, 1> : rowsChannels<1, 2>;
  case 3:
    return one ? rowsChannels<3, 1> : rowsChannels<3, 2>;
  case 5:
    return one ? rowsChannels<5, 1> : rowsChannels<5, 2>;
  case 7:
    return one ? rowsChannels<7, 1> : rowsChannels<7, 2>;
  default:
    return nullptr;
  }
}

/// One block: output channels [oc0, oc0 + nc) of image b (nc <= 8); xp is the workspace.
COIL_DW_TARGET void channelBlock(const ConvGeom &g, const DwPlan &p, const float *x, const float *w,
                                 float *y, const Epi &ep, int64_t b, int64_t oc0, int64_t nc,
                                 float *xp) {
  const int64_t in1 = g.in[1], in2 = g.in[2], out1 = g.out[1];
  const int64_t k1 = g.k[1], k2 = g.k[2], taps = g.kSize, cols = p.cols;
  const int64_t s1 = g.s[1], s2 = g.s[2], d1 = g.d[1], d2 = g.d[2], p1 = g.p[1], p2 = g.p[2];
  // The eight channels' input planes (channel oc / mg of each output channel oc; missing
  // channels read nothing and stay zero).
  const float *plane[kC];
  for (int64_t c = 0; c < kC; ++c)
    plane[c] = c < nc ? x + (b * g.c + (oc0 + c) / g.mg) * g.inSize : nullptr;
  std::memset(xp, 0, size_t(p.size) * sizeof(float));
  // Input columns [cLo, cHi) and rows [rLo, rHi) land inside the workspace.
  const int64_t cLo = std::max<int64_t>(0, -p2), cHi = std::min(in2, cols - p2);
  const int64_t rLo = std::max<int64_t>(0, -p1), rHi = std::min(in1, p.rows - p1);
  for (int64_t i1 = rLo; i1 < rHi; ++i1) {
    float *dst = xp + (i1 + p1) * cols * kC; // position (i1 + p1, c) at dst + c kC
    for (int64_t i2 = cLo; i2 < cHi; i2 += kC) {
      const int64_t n = std::min(kC, cHi - i2);
      const __mmask8 m = first(n);
      __m256 r[kC];
#pragma GCC unroll 8
      for (int64_t c = 0; c < kC; ++c)
        r[c] = c < nc ? _mm256_maskz_loadu_ps(m, plane[c] + i1 * in2 + i2) : _mm256_setzero_ps();
      transpose8(r);
      if (n == kC) {
#pragma GCC unroll 8
        for (int64_t j = 0; j < kC; ++j) _mm256_store_ps(dst + (i2 + j + p2) * kC, r[j]);
        continue;
      }
      for (int64_t j = 0; j < n; ++j) _mm256_store_ps(dst + (i2 + j + p2) * kC, r[j]);
    }
  }
  // The weights transposed: wt[tap] holds the tap's weight of each channel.
  alignas(32) float wt[kMaxTaps * kC];
  for (int64_t t0 = 0; t0 < taps; t0 += kC) {
    const __mmask8 m = first(taps - t0);
    __m256 r[kC];
#pragma GCC unroll 8
    for (int64_t c = 0; c < kC; ++c)
      r[c] = c < nc ? _mm256_maskz_loadu_ps(m, w + (oc0 + c) * taps + t0) : _mm256_setzero_ps();
    transpose8(r);
    for (int64_t j = 0; j < kC && t0 + j < taps; ++j) _mm256_store_ps(wt + (t0 + j) * kC, r[j]);
  }
  __m256 bias = _mm256_setzero_ps();
  if (ep.bias) bias = _mm256_maskz_loadu_ps(first(nc), ep.bias + oc0);
  float *yb = y + (b * g.m + oc0) * g.outSize;
  if (RowsFn rows = rowsFor(g)) return rows(g, p, xp, wt, ep, bias, yb, nc);
  const int64_t step = s2 * kC, dstep = d2 * kC;
  for (int64_t oy = 0; oy < out1; ++oy) {
    for (int64_t ob = 0; ob < p.obs; ++ob) {
      __m256 acc[kOx];
#pragma GCC unroll 8
      for (int j = 0; j < kOx; ++j) acc[j] = _mm256_setzero_ps();
      const float *wk = wt;
      for (int64_t ky = 0; ky < k1; ++ky) {
        const float *src = xp + ((oy * s1 + ky * d1) * cols + ob * kOx * s2) * kC;
        for (int64_t kx = 0; kx < k2; ++kx, wk += kC, src += dstep) {
          const __m256 wv = _mm256_load_ps(wk);
#pragma GCC unroll 8
          for (int j = 0; j < kOx; ++j)
            acc[j] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(src + j * step), acc[j]);
        }
      }
      storeBlock(g, ep, acc, bias, yb, nc, oy, ob);
    }
  }
}

} // namespace

bool depthwisePaddedF32(const float *x, float *y, const float *w, const ConvGeom &g,
                        const float *bias, bool lower, bool upper, float lo, float hi) {
  DwPlan p;
  if (!avx512Enabled() || !makePlan(g, p)) return false;
  if (g.n == 0 || g.m == 0 || g.outSize == 0) return true;
  Epi ep;
  ep.bias = bias, ep.lower = lower, ep.upper = upper, ep.lo = lo, ep.hi = hi;
  const int64_t blocks = (g.m + kC - 1) / kC, items = g.n * blocks;
  int64_t work; // multiply-adds, counting the outputs past the rows' ends
  if (!mulSizes({g.n, blocks * kC, g.out[1], p.obs * kOx, g.kSize}, &work)) work = INT64_MAX;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int use = work >= kConvParallelWork && items > 1 ? threads : 1;
  bool ok = true;
#pragma omp parallel num_threads(use) if (use > 1)
  {
    std::unique_ptr<float[]> local(new (std::nothrow) float[size_t(p.size) + 8]);
    if (!local) {
#pragma omp atomic write
      ok = false;
    }
#pragma omp barrier
    if (ok) {
      // 32-byte aligned workspace.
      float *xp = local.get();
      xp += (8 - (reinterpret_cast<uintptr_t>(xp) / sizeof(float)) % 8) % 8;
#pragma omp for schedule(static)
      for (int64_t item = 0; item < items; ++item) {
        const int64_t b = item / blocks, oc0 = (item % blocks) * kC;
        channelBlock(g, p, x, w, y, ep, b, oc0, std::min(kC, g.m - oc0), xp);
      }
    }
  }
  return ok;
}

} // namespace coil::cpu
