// f32 convolutions as implicit GEMMs on AVX-512 CPUs, for rows of whole vectors: the register
// tiles of the GEMM (8 output channels x 2 vectors of 16 output positions) load their
// input vectors straight from the image with masked loads (zero in the padding), so that no
// im2col columns are written and read back, and apply the bias and clamps of
// coil_cpu_conv_bias_* before the one store of each output.
#include "kernels/cpu/CpuAvx512.h"
#include "kernels/cpu/CpuKernelsImpl.h"

#include <algorithm>
#include <immintrin.h>
#include <omp.h>

namespace coil::cpu {
namespace {

/// Output channels per register tile, and the most vectors of 16 output positions per chunk
/// (a tile holds kMr x nv accumulators; 8 x 2 measured best, as fast as OpenBLAS's kernel).
constexpr int kMr = 8;
constexpr int kMaxNv = 2;
/// Geometry bounds: window taps (the loads of a chunk are planned per tap), and weights per
/// group (re-read for every chunk, so they should stay in the L2 cache).
constexpr int64_t kMaxTaps = 49;
constexpr int64_t kMaxWeightFloats = int64_t(1) << 17;
/// Below this many multiply-adds per output (input channels x taps), im2col + BLAS measured
/// faster (a 3-channel 3x3 stem: the per-chunk planning and tile set-up do not pay).
constexpr int64_t kMinColRows = 64;

/// The load of one input vector for one tap: lanes `mask` read the channel plane at off + lane.
struct Load {
  int64_t off = 0;
  __mmask16 mask = 0;
};

/// The loads of a chunk of nv vectors from output position o0 (every vector inside one output
/// row), per tap: loads[kk * nv + v].
void planLoads(const ConvGeom &g, int64_t o0, int64_t n, int nv, Load *loads) {
  const int64_t out2 = g.out[2], in1 = g.in[1], in2 = g.in[2];
  int64_t oy[kMaxNv], ox[kMaxNv], len[kMaxNv];
  for (int v = 0; v < nv; ++v) {
    const int64_t o = o0 + 16 * v;
    oy[v] = o / out2, ox[v] = o % out2, len[v] = std::min<int64_t>(16, n - 16 * v);
  }
  // Taps in order (ky, kx), counted without divisions (a chunk has only a few hundred
  // multiply-adds per tap).
  Load *l = loads;
  for (int64_t ky = 0; ky < g.k[1]; ++ky)
    for (int64_t kx = 0; kx < g.k[2]; ++kx)
      for (int v = 0; v < nv; ++v, ++l) {
        *l = Load{};
        if (len[v] <= 0) continue;
        const int64_t i1 = oy[v] * g.s[1] - g.p[1] + ky * g.d[1];
        if (i1 < 0 || i1 >= in1) continue;               // a padding row: zeros
        const int64_t c0 = ox[v] - g.p[2] + kx * g.d[2]; // stride 1 along the row
        l->off = i1 * in2 + c0;
        l->mask = laneRange(-c0, std::min(len[v], in2 - c0));
      }
}

struct Epi {
  const float *bias = nullptr;
  bool lower = false, upper = false;
  float lo = 0, hi = 0;
};

/// Output channels [oc0, oc0 + MR) x NV vectors of one chunk: acc += w[oc][ic][kk] * the input
/// vector of (ic, kk), over all input channels and taps, then the epilogue and masked stores.
template <int MR, int NV>
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq"), always_inline)) inline void
tile(const ConvGeom &g, const float *xg, const float *w, const Load *loads, float *y, int64_t oc0,
     const __mmask16 *store, const Epi &ep) {
  const int64_t K = g.colRows, taps = g.kSize, inSize = g.inSize, ldy = g.outSize;
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  const float *wk = w; // w[oc0 + i][k] = wk[i * K] for k = ic * taps + kk
  for (int64_t ic = 0; ic < g.cg; ++ic) {
    const float *plane = xg + ic * inSize;
    const Load *l = loads;
    for (int64_t kk = 0; kk < taps; ++kk, ++wk, l += NV) {
      __m512 b[NV];
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v)
        b[v] = _mm512_maskz_loadu_ps(l[v].mask, shifted(plane, l[v].off));
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        const __m512 a = _mm512_set1_ps(wk[i * K]);
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(a, b[v], acc[i][v]);
      }
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      __m512 r = acc[i][v];
      if (ep.bias) {
        r = _mm512_add_ps(r, _mm512_set1_ps(ep.bias[oc0 + i]));
        // `v < lo ? lo : v`, `v > hi ? hi : v` as the scalar epilogue: max/min return their
        // second operand when either is NaN (maskz forms: GCC 12 warns on the plain ones).
        if (ep.lower) r = _mm512_maskz_max_ps(0xffff, _mm512_set1_ps(ep.lo), r);
        if (ep.upper) r = _mm512_maskz_min_ps(0xffff, _mm512_set1_ps(ep.hi), r);
      }
      _mm512_mask_storeu_ps(y + i * ldy + 16 * v, store[v], r);
    }
}

/// All output channels of one group for one chunk: tiles of kMr, then 4, then 1.
template <int NV>
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq"))) void
chunk(const ConvGeom &g, const float *xg, const float *wg, const Load *loads, float *yg,
      int64_t ocBase, const __mmask16 *store, const Epi &ep) {
  const int64_t K = g.colRows, ldy = g.outSize;
  int64_t m = 0;
  for (; m + kMr <= g.mg; m += kMr)
    tile<kMr, NV>(g, xg, wg + m * K, loads, yg + m * ldy, ocBase + m, store, ep);
  for (; m + 4 <= g.mg; m += 4)
    tile<4, NV>(g, xg, wg + m * K, loads, yg + m * ldy, ocBase + m, store, ep);
  for (; m < g.mg; ++m) tile<1, NV>(g, xg, wg + m * K, loads, yg + m * ldy, ocBase + m, store, ep);
}

} // namespace

bool convImplicitF32(const float *x, float *y, const float *w, const ConvGeom &g, const float *bias,
                     bool lower, bool upper, float lo, float hi) {
  // 1-D/2-D (leading dim 1), stride 1 along rows of whole vectors (so that each vector of 16
  // outputs lies in one row and reads one contiguous run of its input row), not 1x1, not
  // depthwise; windows and weights within the bounds above.
  if (!avx512Enabled() || g.in[0] != 1 || g.k[0] != 1 || g.out[0] != 1 || g.p[0] != 0 ||
      g.s[2] != 1 || g.out[2] % 16 != 0 || g.cg < 2 || g.kSize < 2 || g.kSize > kMaxTaps ||
      g.colRows < kMinColRows || g.mg * g.colRows > kMaxWeightFloats ||
      g.in[2] >= (int64_t(1) << 40))
    return false;
  if (g.n == 0 || g.m == 0 || g.outSize == 0) return true;
  // Three vectors per chunk (24 accumulators), one when a row holds just one.
  const int nv = g.outSize >= 32 ? 2 : 1;
  const int64_t cw = 16 * nv, chunks = (g.outSize + cw - 1) / cw;
  const int64_t items = g.n * g.group, tasks = items * chunks;
  int64_t work;
  if (!mulSizes({g.n, g.m, g.outSize, g.colRows}, &work)) work = INT64_MAX;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int use = work >= kConvParallelWork && tasks > 1 ? threads : 1;
  Epi ep;
  ep.bias = bias, ep.lower = lower, ep.upper = upper, ep.lo = lo, ep.hi = hi;
#pragma omp parallel num_threads(use) if (use > 1)
  {
    Load loads[kMaxTaps * kMaxNv];
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t item = t / chunks, c = t % chunks;
      const int64_t b = item / g.group, gr = item % g.group;
      const int64_t o0 = c * cw, n = std::min(cw, g.outSize - o0);
      const float *xg = x + (b * g.c + gr * g.cg) * g.inSize;
      float *yg = y + (b * g.m + gr * g.mg) * g.outSize + o0;
      const float *wg = w + gr * g.mg * g.colRows;
      planLoads(g, o0, n, nv, loads);
      __mmask16 store[kMaxNv];
      for (int v = 0; v < kMaxNv; ++v) store[v] = laneRange(0, n - 16 * v);
      if (nv == 1)
        chunk<1>(g, xg, wg, loads, yg, gr * g.mg, store, ep);
      else
        chunk<2>(g, xg, wg, loads, yg, gr * g.mg, store, ep);
    }
  }
  return true;
}

} // namespace coil::cpu
