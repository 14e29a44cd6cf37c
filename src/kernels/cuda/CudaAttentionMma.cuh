// Included by CudaAttention.cu only: the flash-attention kernel on mma.sync (sm_80 and up),
// its block configurations, and the merge of the key warps' states of the decode
// configuration.
#pragma once

#include "kernels/cuda/CudaAttentionCommon.cuh"

namespace coil::cuda {
namespace {

// --- the tensor-core kernel

/// A block of the flash kernel: kRowWarps x kKeyWarps warps. Warp w owns rows of the block's
/// BM = 16 * kRowWarps * kMTiles packed rows (m-tile mt of warp w: rows mt * 16 * kRowWarps +
/// (w % kRowWarps) * 16 + [0, 16)) and, of every tile of BN keys, the BNW = BN / kKeyWarps keys
/// at (w / kRowWarps) * BNW. With kKeyWarps > 1 the warps' partial softmax states are merged
/// through shared memory at the end (decode: few rows, every warp on other keys). Q stays in
/// registers when kMTiles == 1, else it is re-read from shared memory (register budget).
template <int D, int kRowWarps, int kKeyWarps, int kMTiles, int BN> struct FlashCfg {
  static constexpr int kWarps = kRowWarps * kKeyWarps;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int BM = 16 * kRowWarps * kMTiles;
  static constexpr int BNW = BN / kKeyWarps;
  static constexpr int LD = D + 8; ///< padded shared-memory row (elements)
  static constexpr size_t kRowInfo = size_t(BM) * 32;
  static constexpr size_t kTiles = size_t(BM + 4 * BN) * LD * 2; ///< Q + 2 stages of K and V
  static constexpr size_t kMerge = kKeyWarps > 1 ? size_t(kKeyWarps) * BM *(D + 2) * 4 : 0;
  static constexpr size_t kSmem = kRowInfo + (kTiles > kMerge ? kTiles : kMerge);
  static_assert(BNW % 16 == 0 && D % 16 == 0, "tiles of 16");
};

/// The end of a block whose kKeyWarps > 1 warps saw different keys (decode): their softmax
/// states meet in shared memory (the K/V tiles' space, after the block's RowInfo) and are
/// merged per row into Y, or with splits into the f32 partials and log-sum-exps.
template <typename T, typename Cfg, int D, int kRowWarps, int kKeyWarps, int kMTiles>
__device__ __forceinline__ void
mergeKeyWarps(const AttnParams &p, T *yg, unsigned char *smemRaw, const RowInfo *rowInfo,
              const float (&o)[kMTiles][D / 8][4], const float (&rowMax)[kMTiles][2],
              const float (&rowSum)[kMTiles][2], int rowWarp, int keyWarp, int g, int tq,
              int split) {
  constexpr int BM = Cfg::BM, kThreads = Cfg::kThreads;
  // Merge the key warps' states: O_w (unnormalized), max m_w and sum l_w per row.
  __syncthreads();                                                // the K/V tiles are free
  float *mO = reinterpret_cast<float *>(smemRaw + Cfg::kRowInfo); // [kKeyWarps][BM][D]
  float *mM = mO + kKeyWarps * BM * D, *mL = mM + kKeyWarps * BM; // [kKeyWarps][BM]
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const int r = mt * 16 * kRowWarps + rowWarp * 16 + g + 8 * hi;
      float *dst = mO + (keyWarp * BM + r) * D + 2 * tq;
#pragma unroll
      for (int i = 0; i < D / 8; ++i)
        *reinterpret_cast<float2 *>(dst + i * 8) =
            make_float2(o[mt][i][2 * hi], o[mt][i][2 * hi + 1]);
      if (tq == 0) {
        mM[keyWarp * BM + r] = rowMax[mt][hi];
        mL[keyWarp * BM + r] = rowSum[mt][hi];
      }
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < BM * D; idx += kThreads) {
    const int r = idx / D, e = idx % D;
    const RowInfo &ri = rowInfo[r];
    if (ri.qi < 0) continue;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kKeyWarps; ++w) mx = fmaxf(mx, mM[w * BM + r]);
    const float mUse = mx == -INFINITY ? 0.f : mx;
    float l = 0.f, acc = 0.f;
#pragma unroll
    for (int w = 0; w < kKeyWarps; ++w) {
      const float c = fastExp2(mM[w * BM + r] - mUse);
      l += c * mL[w * BM + r];
      acc += c * mO[(w * BM + r) * D + e];
    }
    const float inv = l > 0.f ? 1.f / l : (l == 0.f ? 0.f : l);
    if (p.splits == 1) {
      yg[ri.yBase + e] = fromAcc<T>(acc * inv);
    } else {
      p.partO[(int64_t(split) * p.rowsTotal + ri.row) * D + e] = acc * inv;
      if (e == 0)
        p.partL[int64_t(split) * p.rowsTotal + ri.row] =
            l > 0.f ? mx + __log2f(l) : (l == 0.f ? -INFINITY : l);
    }
  }
}

template <typename T, int D, int kRowWarps, int kKeyWarps, int kMTiles, int BN, bool kGeneral>
__global__ void __launch_bounds__(32 * kRowWarps * kKeyWarps) flashAttnKernel(const AttnParams p) {
  using Cfg = FlashCfg<D, kRowWarps, kKeyWarps, kMTiles, BN>;
  constexpr int BM = Cfg::BM, BNW = Cfg::BNW, LD = Cfg::LD, kThreads = Cfg::kThreads;
  extern __shared__ __align__(16) unsigned char smemRaw[];
  RowInfo *rowInfo = reinterpret_cast<RowInfo *>(smemRaw);
  T *sQ = reinterpret_cast<T *>(smemRaw + Cfg::kRowInfo);
  T *sK = sQ + BM * LD; // 2 stages of BN x LD
  T *sV = sK + 2 * BN * LD;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int rowWarp = warp % kRowWarps, keyWarp = warp / kRowWarps;
  const int g = lane / 4, tq = lane % 4;
  const T *kg = static_cast<const T *>(p.k);
  const T *vg = static_cast<const T *>(p.v);
  T *yg = static_cast<T *>(p.y);
  const float scaleLog2 = p.scale * kLog2e;

  for (int64_t bid = blockIdx.x; bid < p.totalBlocks; bid += gridDim.x) {
    const BlockWork w = blockWork<BM, BN>(p, bid);
    const int64_t b = w.b, hk = w.hk, kbBegin = w.kbBegin, firstQ = w.firstQ;
    const int split = w.split, nTiles = w.nTiles;
    const T *kBase = kg + p.kOff + b * p.ksB + hk * p.ksH;
    const T *vBase = vg + p.vOff + b * p.vsB + hk * p.vsH;

    __syncthreads(); // the previous block of this loop is done with shared memory
    fillRowInfo(p, rowInfo, BM, w);
    auto qRow = [&](int r, bool &valid) { return qRowPtr<T>(p, w, r, valid); };
    auto loadKV = [&](int tile, int stage) {
      const int64_t n0 = (kbBegin + tile) * BN;
      const int rowsLeft = int(min(p.seqK - n0, int64_t(BN)));
      // Opaque copies of the strides: the row offsets are recomputed per tile instead of
      // being kept live in registers across the loop.
      int64_t ks = p.ksS, vs = p.vsS;
      asm volatile("" : "+l"(ks), "+l"(vs));
      const T *kt = kBase + n0 * ks, *vt = vBase + n0 * vs;
      loadTile<D, LD, kThreads, BN>(sK + stage * BN * LD, [&](int r, bool &valid) {
        valid = r < rowsLeft;
        return valid ? kt + r * ks : kBase;
      });
      loadTile<D, LD, kThreads, BN>(sV + stage * BN * LD, [&](int r, bool &valid) {
        valid = r < rowsLeft;
        return valid ? vt + r * vs : vBase;
      });
    };
    loadTile<D, LD, kThreads, BM>(sQ, qRow);
    if (nTiles > 0) loadKV(0, 0);
    cpAsyncCommit();
    if (nTiles > 1) loadKV(1, 1);
    cpAsyncCommit();

    float o[kMTiles][D / 8][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int i = 0; i < D / 8; ++i) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.f;
    float rowMax[kMTiles][2], rowSum[kMTiles][2];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
      rowMax[mt][0] = rowMax[mt][1] = -INFINITY, rowSum[mt][0] = rowSum[mt][1] = 0.f;
    // Q fragment address of m-tile mt: rows (lane & 15), columns (lane / 16) * 8 (+ kk * 16).
    auto qAddr = [&](int mt) {
      return smemAddr(sQ + (mt * 16 * kRowWarps + rowWarp * 16 + (lane & 15)) * LD +
                      (lane / 16) * 8);
    };
    uint32_t qf[kMTiles == 1 ? D / 16 : 1][4];

    cpAsyncWait<1>(); // Q and the first K/V tile
    __syncthreads();
    if constexpr (kMTiles == 1) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        ldmatrixX4(qAddr(0) + kk * 32, qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3]);
    }

    for (int t = 0; t < nTiles; ++t) {
      const int stage = t & 1;
      if (t > 0) {
        cpAsyncWait<1>();
        __syncthreads();
      }
      const T *kt = sK + stage * BN * LD + keyWarp * BNW * LD;
      const T *vt = sV + stage * BN * LD + keyWarp * BNW * LD;

      // S = Q K^T for this warp's rows and its BNW keys.
      float s[kMTiles][BNW / 8][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int i = 0; i < BNW / 8; ++i)
          s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.f;
      {
        // K fragment rows: key (lane & 7) + (lane / 16) * 8, column ((lane / 8) & 1) * 8.
        const uint32_t ka =
            smemAddr(kt + ((lane & 7) + (lane / 16) * 8) * LD + ((lane / 8) & 1) * 8);
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          uint32_t a[kMTiles][4];
          if constexpr (kMTiles == 1) {
#pragma unroll
            for (int x = 0; x < 4; ++x) a[0][x] = qf[kk][x];
          } else {
#pragma unroll
            for (int mt = 0; mt < kMTiles; ++mt)
              ldmatrixX4(qAddr(mt) + kk * 32, a[mt][0], a[mt][1], a[mt][2], a[mt][3]);
          }
#pragma unroll
          for (int nn = 0; nn < BNW / 16; ++nn) {
            uint32_t b0, b1, b2, b3;
            ldmatrixX4(ka + (nn * 16 * LD + kk * 16) * 2, b0, b1, b2, b3);
#pragma unroll
            for (int mt = 0; mt < kMTiles; ++mt) {
              mma16816<T>(s[mt][2 * nn], a[mt], b0, b1);
              mma16816<T>(s[mt][2 * nn + 1], a[mt], b2, b3);
            }
          }
        }
      }

      // Scores in the log2 domain, masked; online softmax.
      const int64_t n0 = (kbBegin + t) * BN;
      const bool edge = n0 + BN > p.seqK || (p.causal && n0 + BN - 1 > firstQ + p.causalOffset);
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        const RowInfo *ri = rowInfo + mt * 16 * kRowWarps + rowWarp * 16 + g;
        maskScores<T, kGeneral>(p, s[mt], ri, ri + 8, n0 + keyWarp * BNW, tq, edge, scaleLog2);
        softmaxStep(s[mt], o[mt], rowMax[mt], rowSum[mt], softmaxMult<kGeneral>(scaleLog2));
      }

      // O += P V.
      {
        // V fragment rows (transposed): key (lane & 7) + ((lane / 8) & 1) * 8, column
        // (lane / 16) * 8.
        const uint32_t va =
            smemAddr(vt + ((lane & 7) + ((lane / 8) & 1) * 8) * LD + (lane / 16) * 8);
#pragma unroll
        for (int kk = 0; kk < BNW / 16; ++kk) {
          uint32_t a[kMTiles][4];
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) pFragment<T>(s[mt], kk, a[mt]);
#pragma unroll
          for (int ee = 0; ee < D / 16; ++ee) {
            uint32_t b0, b1, b2, b3;
            ldmatrixX4T(va + (kk * 16 * LD + ee * 16) * 2, b0, b1, b2, b3);
#pragma unroll
            for (int mt = 0; mt < kMTiles; ++mt) {
              mma16816<T>(o[mt][2 * ee], a[mt], b0, b1);
              mma16816<T>(o[mt][2 * ee + 1], a[mt], b2, b3);
            }
          }
        }
      }

      __syncthreads(); // every warp is done with this stage
      if (t + 2 < nTiles) loadKV(t + 2, stage);
      cpAsyncCommit();
    }
    cpAsyncWait<0>();

#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) quadRowSums(rowSum[mt]);

    if constexpr (kKeyWarps == 1) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        const RowInfo *ri = rowInfo + mt * 16 * kRowWarps + rowWarp * 16 + g;
        storeRows<T>(p, o[mt], rowMax[mt], rowSum[mt], ri, ri + 8, split, tq);
      }
    } else {
      mergeKeyWarps<T, Cfg, D, kRowWarps, kKeyWarps, kMTiles>(
          p, yg, smemRaw, rowInfo, o, rowMax, rowSum, rowWarp, keyWarp, g, tq, split);
    }
  }
}

} // namespace
} // namespace coil::cuda
