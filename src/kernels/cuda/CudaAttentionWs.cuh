// Included by CudaAttention.cu only: the warp-specialized flash-attention kernel of sm_90a. A
// producer warp streams the K and V tiles with the tensor memory accelerator (TMA) into a ring
// of shared-memory stages guarded by mbarriers; two consumer warpgroups run both products on
// warpgroup MMA and overlap each tile's softmax with the previous tile's P V product.
#pragma once

#include "kernels/cuda/CudaAttentionWgmma.cuh"

#include <algorithm>
#include <cuda.h> // CUtensorMap

namespace coil::cuda {
namespace {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) // the helpers of the warp-specialized kernel
__device__ __forceinline__ void mbarInit(uint64_t *bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smemAddr(bar)), "r"(count));
}
/// Makes the barriers' initialization visible to the async proxy (the TMA unit).
__device__ __forceinline__ void fenceBarrierInit() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
/// Arrives once and adds `bytes` to the transactions the current phase waits for.
__device__ __forceinline__ void mbarArriveExpectTx(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smemAddr(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbarArrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smemAddr(bar)) : "memory");
}
/// Waits until the phase of the given parity has completed. A fresh barrier counts the phase
/// before its first as completed: waiting for parity 1 returns at once.
__device__ __forceinline__ void mbarWait(uint64_t *bar, uint32_t parity) {
  const uint32_t addr = smemAddr(bar);
  uint32_t done;
  do {
    asm volatile("{\n.reg .pred p;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(addr), "r"(parity)
                 : "memory");
  } while (!done);
}
/// A 4-d TMA tile load (coordinates innermost first) completing on `bar`.
__device__ __forceinline__ void tmaLoad4d(uint32_t dst, const CUtensorMap *map, int c0, int c1,
                                          int c2, int c3, uint64_t *bar) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
               "r"(smemAddr(bar))
               : "memory");
}
__device__ __forceinline__ void prefetchTensorMap(const CUtensorMap *map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}
/// Barrier `id` (1 and up; 0 is __syncthreads) among `count` threads.
__device__ __forceinline__ void namedBarrier(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
/// Arrives on barrier `id` without waiting (the other side of a namedBarrier of `count`).
__device__ __forceinline__ void namedBarrierArrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
template <int N> __device__ __forceinline__ void setMaxRegsDec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N> __device__ __forceinline__ void setMaxRegsInc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
#endif

/// The warp-specialized kernel's block: warpgroup 0 produces (one thread issues the TMA loads;
/// its registers are given to the others), kGroups warpgroups (1 or 2) consume, 64 rows each
/// (BM = 64 kGroups). With one, two blocks share an SM (registers: 128 a thread at launch, the
/// consumers grow to 232). Shared memory: kStages K tiles, kStages V tiles (BN x D each, 128-byte
/// swizzled in column blocks of 64, the layout of loadTileSw), two padded Q tiles (a block's and
/// the next one's), the RowInfo, the barriers (full and empty, for K and V, per stage) and,
/// launched with p.keyBias, kBiasSmem more: each consumer warpgroup's key biases (fillKeyBias).
template <int D, int BN, int kStages, int kGroups> struct WsCfg {
  static constexpr int kGroupRows = 64; ///< rows of one consumer warpgroup
  static constexpr int BM = kGroupRows * kGroups;
  static constexpr int kThreads = 128 * (1 + kGroups);
  static constexpr int kConsumers = 128 * kGroups;
  static constexpr int kBlocksPerSm = kGroups == 1 ? 2 : 1;
  static constexpr int kConsumerRegs = kGroups == 1 ? 232 : 240;
  static constexpr int kTile = BN * D; ///< elements of one K or V tile
  static constexpr size_t kSmem = 1024 + size_t(2 * kStages) * kTile * 2 +
                                  2 * size_t(BM) * (D + 8) * 2 + size_t(BM) * sizeof(RowInfo) +
                                  size_t(4 * kStages) * 8;
  /// The most keys a key mask as biases takes: what fits beside kSmem without fewer blocks an
  /// SM (228 KB an SM, 1 KB of it reserved a block, 227 KB at most a block), at most 8192.
  static constexpr size_t kBlockSmem = kGroups == 1 ? 233472 / 2 - 1024 : 232448;
  static constexpr int kBiasKeys =
      int(std::min<size_t>(8192, (kBlockSmem - kSmem) / (4 * kGroups) / BN * BN));
  static constexpr size_t kBiasSmem = size_t(kGroups) * kBiasKeys * 4;
  static_assert(kSmem < kBlockSmem && kBiasKeys >= 2048, "room for 2048 key biases");
  static_assert(D % 64 == 0 && BN % 64 == 0 && kStages >= 2, "tiles of 64, two stages or more");
  static_assert(kGroups == 1 || kGroups == 2, "one or two consumer warpgroups");
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/// The warp-specialized kernel's producer thread: for each tile of each of its blocks' work
/// (the running count `it` over all of them), it waits until the tile's stage is empty, then
/// TMA-loads the K tile and the V tile into it, each completing on the stage's full barrier.
template <typename T, int D, int BN, int kStages, int BM>
__device__ __forceinline__ void wsProduce(const AttnParams &p, const CUtensorMap *tmK,
                                          const CUtensorMap *tmV, T *sK, T *sV, uint64_t *fullK,
                                          uint64_t *fullV, uint64_t *emptyK, uint64_t *emptyV) {
  constexpr int kTile = BN * D;
  constexpr uint32_t kTileBytes = kTile * 2;
  prefetchTensorMap(tmK);
  prefetchTensorMap(tmV);
  uint32_t it = 0;
  for (int64_t bid = blockIdx.x; bid < p.totalBlocks; bid += gridDim.x) {
    const BlockWork w = blockWork<BM, BN>(p, bid);
    for (int t = 0; t < w.nTiles; ++t, ++it) {
      const int st = int(it % kStages);
      const uint32_t phase = (it / kStages) & 1;
      const int n0 = int((w.kbBegin + t) * BN);
      // Into stage st of `tiles` once the consumers emptied it, completing on `full`.
      auto load = [&](T *tiles, uint64_t *full, uint64_t *empty, const CUtensorMap *map) {
        mbarWait(empty + st, phase ^ 1);
        mbarArriveExpectTx(full + st, kTileBytes);
#pragma unroll
        for (int c = 0; c < D / 64; ++c)
          tmaLoad4d(smemAddr(tiles + st * kTile) + c * BN * 128, map, c * 64, n0, int(w.hk),
                    int(w.b), full + st);
      };
      load(sK, fullK, emptyK, tmK);
      load(sV, fullV, emptyV, tmV);
    }
  }
}
#endif

/// The warp-specialized flash kernel (sm_90a). Per block of BM packed rows, the producer
/// thread walks the block's key tiles: it waits until the stage is empty, then TMA-loads the
/// K tile and the V tile, each completing on its stage's full barrier. Each consumer
/// warpgroup, per tile t: S(t) = Q K(t)^T is issued, then O += P(t - 1) V(t - 1); when S(t)
/// is done, K(t)'s stage is released and the softmax of tile t runs while the P V product
/// is still on the tensor cores; then V(t - 1)'s stage is released and O rescaled. The
/// tiles' stage and phase follow one running count over all the block's work, the same in
/// the producer and the consumers. With kPingPong two consumer warpgroups take turns to
/// issue their products (named barriers 2 and 3), so that one's softmax runs while the other's
/// products occupy the tensor cores. Each consumer warpgroup loads its own 64 rows of Q with
/// cp.async, on a persistent grid those of its next block while it works on the current one.
/// The masking, softmax and stores are the mma.sync kernel's.
template <typename T, int D, int BN, int kStages, bool kGeneral, bool kPingPong, int kGroups>
__global__ void __launch_bounds__(WsCfg<D, BN, kStages, kGroups>::kThreads,
                                  WsCfg<D, BN, kStages, kGroups>::kBlocksPerSm)
    flashAttnWsKernel(const __grid_constant__ CUtensorMap tmK,
                      const __grid_constant__ CUtensorMap tmV, const AttnParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Cfg = WsCfg<D, BN, kStages, kGroups>;
  static_assert(!kPingPong || kGroups == 2, "ping-pong takes two consumer warpgroups");
  constexpr int BM = Cfg::BM, LDQ = D + 8, kTile = Cfg::kTile;
  extern __shared__ __align__(16) unsigned char smemRaw[];
  const uint32_t align = (1024 - (smemAddr(smemRaw) & 1023)) & 1023;
  T *sK = reinterpret_cast<T *>(smemRaw + align);
  T *sV = sK + kStages * kTile;
  T *sQ = sV + kStages * kTile; // two of BM x LDQ (padded)
  RowInfo *rowInfo = reinterpret_cast<RowInfo *>(sQ + 2 * BM * LDQ);
  uint64_t *fullK = reinterpret_cast<uint64_t *>(rowInfo + BM);
  uint64_t *fullV = fullK + kStages, *emptyK = fullV + kStages, *emptyV = emptyK + kStages;
  float *sBias = reinterpret_cast<float *>(emptyV + kStages); // kGroups x kBiasKeys (keyBias)
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarInit(fullK + s, 1);
      mbarInit(fullV + s, 1);
      mbarInit(emptyK + s, Cfg::kConsumers / 32); // one arrival per consumer warp
      mbarInit(emptyV + s, Cfg::kConsumers / 32);
    }
    fenceBarrierInit();
  }
  __syncthreads();

  if (threadIdx.x < 128) { // the producer warpgroup
    setMaxRegsDec<24>();
    if (threadIdx.x == 0)
      wsProduce<T, D, BN, kStages, BM>(p, &tmK, &tmV, sK, sV, fullK, fullV, emptyK, emptyV);
    return;
  }

  setMaxRegsInc<Cfg::kConsumerRegs>();
  const int ct = int(threadIdx.x) - 128; // 0 .. kConsumers - 1
  const int warp = ct / 32, lane = ct % 32, tq = lane % 4;
  const int group = ct / 128, gt = ct % 128; // consumer warpgroup, thread in it
  constexpr int GR = Cfg::kGroupRows;
  // Ping-pong turns: barrier 2 + g lets warpgroup g issue; the other warpgroup arrives on it
  // after its own issue. Warpgroup 1 opens the first turn of a block and skips the arrival
  // after its last, so that every barrier's arrivals and waits pair up within the block.
  auto takeTurn = [&]() {
    if constexpr (kPingPong) namedBarrier(2 + group, Cfg::kConsumers);
  };
  auto passTurn = [&](bool last) {
    if constexpr (kPingPong)
      if (!(last && group == 1)) namedBarrierArrive(2 + (group ^ 1), Cfg::kConsumers);
  };
  const float scaleLog2 = p.scale * kLog2e;
  // Under a key mask taken as biases (p.keyBias), S(t) starts from the biases of its keys
  // (the same for both rows of a thread) instead of zero.
  const float *bias = sBias + group * Cfg::kBiasKeys + 2 * tq;
  auto issueS = [&](float(&s)[BN / 8][4], const uint32_t(&qf)[D / 16][4], int st, int64_t n0) {
    if (p.keyBias) {
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt) {
        const float2 b = *reinterpret_cast<const float2 *>(bias + n0 + nt * 8);
        s[nt][0] = s[nt][2] = b.x;
        s[nt][1] = s[nt][3] = b.y;
      }
    }
    issueQK<T, D, BN>(s, qf, smemAddr(sK + st * kTile), p.keyBias != 0);
  };
  auto issueO = [&](float(&o)[D / 8][4], const uint32_t(&pa)[BN / 16][4], int st) {
    issuePVFragments<T, D, BN>(o, pa, smemAddr(sV + st * kTile));
  };
  // Waits until tile i of the running count is in its stage (the `full` barrier's phase for
  // it); returns the stage.
  auto waitFull = [&](uint64_t *full, uint32_t i) {
    const int st = int(i % kStages);
    mbarWait(full + st, (i / kStages) & 1);
    return st;
  };
  // Each consumer warpgroup loads the 64 rows of Q it reads (synchronized by its barrier
  // 4 + group) into two buffers: the rows of its next block load (cp.async) while the current
  // block runs. Buffer b is rewritten at block k only after every thread of the warpgroup
  // passed block k's barrier, so after their reads at block k - 1. Each warp fills the 16 rows
  // of RowInfo it reads.
  auto loadQ = [&](int64_t bid, int buf) {
    BlockWork w = blockWork<BM, BN>(p, bid);
    w.m0 += GR * group;
    loadTile<D, LDQ, 128, GR>(
        sQ + (buf * BM + GR * group) * LDQ,
        [&](int r, bool &valid) { return qRowPtr<T>(p, w, r, valid); }, gt);
    cpAsyncCommit();
  };
  if (blockIdx.x < p.totalBlocks) loadQ(blockIdx.x, 0);
  const RowInfo *ri = rowInfo + warp * 16 + lane / 4;

  uint32_t it = 0;
  int buf = 0;
  for (int64_t bid = blockIdx.x; bid < p.totalBlocks; bid += gridDim.x, buf ^= 1) {
    const BlockWork w = blockWork<BM, BN>(p, bid);
    {
      BlockWork wr = w;
      wr.m0 += warp * 16;
      __syncwarp(); // the warp's reads of the previous block's rows are done
      fillRowInfo(p, rowInfo + warp * 16, 16, wr, lane, 32);
    }
    if (p.keyBias) { // after every thread's last read of the previous block's biases
      namedBarrier(4 + group, 128);
      fillKeyBias<T>(p, w, sBias + group * Cfg::kBiasKeys, w.kbBegin * BN,
                     (w.kbBegin + w.nTiles) * BN, gt, 128);
    }
    cpAsyncWait<0>();
    namedBarrier(4 + group, 128);
    uint32_t qf[D / 16][4];
    {
      const T *qa = sQ + (buf * BM + warp * 16 + (lane & 15)) * LDQ + (lane / 16) * 8;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        ldmatrixX4(smemAddr(qa + kk * 16), qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3]);
    }
    if (bid + gridDim.x < p.totalBlocks) loadQ(bid + gridDim.x, buf ^ 1);
    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float rowMax[2] = {-INFINITY, -INFINITY}, rowSum[2] = {0.f, 0.f};
    // Under a mask (kGeneral), tile t's mask values are loaded while S(t) is on the tensor cores
    // and applied without a branch an element where the registers allow (64-key tiles; the
    // 128-key ones spill), else read as they apply.
    constexpr bool kEarlyMask = kGeneral && BN == 64;
    constexpr bool kLean = BN == 64;
    MaskTile<BN / 8> mask;
    auto prefetchMask = [&](int t) {
      if constexpr (kEarlyMask) loadMask<T>(p, mask, ri, ri + 8, (w.kbBegin + t) * BN, tq);
    };
    auto scores = [&](float(&s)[BN / 8][4], int t, float(&alpha)[2]) {
      const int64_t n0 = (w.kbBegin + t) * BN;
      const bool edge = n0 + BN > p.seqK || (p.causal && n0 + BN - 1 > w.firstQ + p.causalOffset);
      maskScores<T, kGeneral, BN / 8, kLean>(p, s, ri, ri + 8, n0, tq, edge, scaleLog2,
                                             kEarlyMask ? &mask : nullptr);
      softmaxScores(s, rowMax, rowSum, softmaxMult<kGeneral>(scaleLog2), alpha);
    };

    if (w.nTiles > 0) {
      // Between tiles only P(t - 1) crosses, as the product's A fragments (pa: half the
      // registers of its f32 scores), converted once P(t - 2) V(t - 2) no longer reads them.
      float s[BN / 8][4], alpha[2];
      uint32_t pa[BN / 16][4];
      if (kPingPong && group == 1) namedBarrierArrive(2, Cfg::kConsumers);
      {
        const int st = waitFull(fullK, it);
        takeTurn();
        issueS(s, qf, st, w.kbBegin * BN);
        passTurn(false);
        prefetchMask(0);
        wgmmaWait<0>();
        fenceRegs(s);
        if (lane == 0) mbarArrive(emptyK + st);
        scores(s, 0, alpha); // O is still zero: nothing to rescale
        pFragments<T, BN>(s, pa);
      }
      for (int t = 1; t < w.nTiles; ++t) {
        const int stK = waitFull(fullK, it + t), stV = waitFull(fullV, it + t - 1);
        takeTurn();
        issueS(s, qf, stK, (w.kbBegin + t) * BN);
        issueO(o, pa, stV);
        passTurn(false);
        prefetchMask(t);
        wgmmaWait<1>(); // S(t) is done; P(t - 1) V(t - 1) may still run
        fenceRegs(s);
        if (lane == 0) mbarArrive(emptyK + stK);
        scores(s, t, alpha);
        wgmmaWait<0>();
        fenceRegs(o);
        if (lane == 0) mbarArrive(emptyV + stV);
        rescaleO(o, alpha);
        pFragments<T, BN>(s, pa);
      }
      const int stV = waitFull(fullV, it + w.nTiles - 1);
      takeTurn();
      issueO(o, pa, stV);
      passTurn(true);
      wgmmaWait<0>();
      fenceRegs(o);
      if (lane == 0) mbarArrive(emptyV + stV);
      it += uint32_t(w.nTiles);
    }
    quadRowSums(rowSum);
    storeRows<T>(p, o, rowMax, rowSum, ri, ri + 8, w.split, tq);
  }
#endif
}

} // namespace
} // namespace coil::cuda
