// CUDA attention externs (coil_cuda_attention_*): the flash-attention algorithm on tensor cores
// for f16/bf16 and a plain kernel for everything else.
//
// Fast path (f16/bf16, headDim == headDimV in {64, 80, 96, 128}, every row of Q, K, V and Y
// 16-byte aligned): one block owns a tile of BM "packed rows" of one (batch, kv head): the
// group = heads / kvHeads query heads that share the kv head, interleaved row by row (packed
// row r is query i = r / group of head hk * group + r % group), so the query heads of a GQA
// group share every K/V tile the block loads. Each warp owns 16-row m-tiles in the fragment
// layout of mma m16n8k16 (which is also the per-warp layout of wgmma m64nNk16), so masking,
// the online softmax (running max and sum per row in f32, base-2 exponentials with the scale
// folded in) and the output stores are shared by two kernels:
// - flashAttnWgmmaKernel (sm_90a, head dims 64 and 128; the default on sm_90): two warpgroups
//   of 64 rows (BM 128), 64-key tiles through three cp.async stages in the 128-byte-swizzled
//   layout; S = Q K^T is wgmma with Q fragments in registers and K from shared memory, O += P V
//   is wgmma with P from the S registers and V (MN-major) from shared memory. The S product of
//   tile t + 1 is issued before the softmax of tile t, so the tensor cores work while the warps
//   compute exponentials; one barrier per tile.
// - flashAttnKernel (mma.sync, sm_80 and up): Q fragments in registers (16 rows per warp) or
//   re-read from padded shared memory (32 rows per warp: the default, BM 128, 32-key tiles);
//   K/V tiles in a two-stage cp.async pipeline in padded shared memory (rows of D + 8
//   elements: ldmatrix without bank conflicts). Decode shapes (at most 16 packed rows) run it
//   with 4 warps on different keys of each 64-key tile, merged through shared memory.
// Causal blocks stop at their last visible key; element masks are applied only on tiles that
// need them (the tail past seqK, the causal diagonal), and on every tile in the kGeneral
// instantiations (a mask tensor or softcap). When the blocks do not fill the GPU (decode: few
// query rows against many keys), the keys are split across blocks (split-KV): each split
// writes its f32 partial output and log-sum-exp into ctx->workspace and a combine kernel
// produces Y. Fewer splits are used when the workspace is too small.
//
// The plain kernel (f32, other head dims, unaligned rows, seqK == 0): one block of 128 threads
// per query row, scores of 128 keys at a time (one per thread), the online softmax over the
// block and the f32 output accumulator in shared memory (headDimV <= 8192).
#include "kernels/cuda/CudaKernels.h"
#include "kernels/cuda/CudaKernelsImpl.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <type_traits>

namespace coil::cuda {
namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr int kMaxSplits = 128;
constexpr int64_t kPlainMaxDv = 8192;

/// Everything a kernel reads, passed by value. Strides and offsets are in elements.
struct AttnParams {
  const void *q, *k, *v, *mask;
  void *y;
  float *partO; ///< split-KV partial outputs [splits][rowsTotal][dv] (f32, normalized)
  float *partL; ///< split-KV log2-sum-exp2 [splits][rowsTotal] (-inf: no visible key)
  int64_t qOff, qsB, qsH, qsS;
  int64_t kOff, ksB, ksH, ksS;
  int64_t vOff, vsB, vsH, vsS;
  int64_t ysB, ysH, ysS;
  int64_t mOff, msB, msH, msQ, msK;
  int64_t batch, heads, kvHeads, group;
  int64_t seqQ, seqK, d, dv;
  int64_t causalOffset;
  int64_t rowsPerKv; ///< group * seqQ
  int64_t rowsTotal; ///< batch * heads * seqQ
  int64_t mBlocks;   ///< blocks of packed rows per (batch, kv head)
  int64_t totalBlocks;
  int32_t splits, kbPerSplit;
  int32_t maskKind, causal;
  float scale, softcap;
};

// --- PTX helpers

__device__ __forceinline__ uint32_t smemAddr(const void *p) {
  return uint32_t(__cvta_generic_to_shared(p));
}
/// 16-byte cp.async; when !valid the destination is zero-filled and nothing is read.
__device__ __forceinline__ void cpAsync16(uint32_t dst, const void *src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> __device__ __forceinline__ void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
__device__ __forceinline__ void ldmatrixX4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2,
                                           uint32_t &r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrixX4T(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2,
                                            uint32_t &r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
/// c += a * b, m16n8k16, f32 accumulators.
template <typename T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}
/// Two floats as a packed pair of T (lo in the low half).
template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
  }
}
__device__ __forceinline__ float fastExp2(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
  return r;
}

/// The score of one (row, key) in the log2 domain after softcap and mask (general kernels).
template <typename T>
__device__ __forceinline__ float generalScore(const AttnParams &p, float dot, int64_t maskRow,
                                              int64_t j) {
  float x = dot * p.scale;
  if (p.softcap > 0.f) x = p.softcap * tanhf(x / p.softcap);
  if (p.maskKind == 1) {
    if (static_cast<const unsigned char *>(p.mask)[maskRow + j * p.msK] == 0) return -INFINITY;
  } else if (p.maskKind == 2) {
    x += toAcc<float>(static_cast<const T *>(p.mask)[maskRow + j * p.msK]);
  }
  return x * kLog2e;
}

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

/// What a block knows about each of its rows (shared memory): the query index (-1: past the
/// end), the element offsets of its mask row and Y row, and its row in [batch, heads, seqQ].
struct RowInfo {
  int64_t qi, maskBase, yBase, row;
};

/// One warp's scores of 16 rows (mma fragment layout: this thread's rows r0 = g and r1 = g + 8,
/// keys nw + nt * 8 + 2 * tq + {0, 1}), when `edge` or kGeneral, masked to -inf (row past the
/// end, key past seqK, causal) with softcap and the mask. kGeneral scores end in the log2
/// domain; the others stay raw when scaleLog2 > 0 (softmaxStep folds the scale into its
/// exponentials: softmaxMult) and are scaled otherwise.
template <typename T, bool kGeneral, int NT>
__device__ __forceinline__ void maskScores(const AttnParams &p, float (&s)[NT][4],
                                           const RowInfo *r0, const RowInfo *r1, int64_t nw, int tq,
                                           bool edge, float scaleLog2) {
  if (kGeneral || edge) {
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const RowInfo &ri = hi ? *r1 : *r0;
      const int64_t qi = ri.qi;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int64_t j = nw + nt * 8 + 2 * tq + e;
          const bool valid = qi >= 0 && j < p.seqK && !(p.causal && j > qi + p.causalOffset);
          float &x = s[nt][2 * hi + e];
          if constexpr (kGeneral)
            x = valid ? generalScore<T>(p, x, ri.maskBase, j) : -INFINITY;
          else
            x = valid ? (scaleLog2 > 0.f ? x : x * scaleLog2) : -INFINITY;
        }
      }
    }
  } else if (!(scaleLog2 > 0.f)) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] *= scaleLog2;
  }
}

/// The multiplier softmaxStep applies to the scores maskScores leaves.
template <bool kGeneral> __device__ __forceinline__ float softmaxMult(float scaleLog2) {
  return !kGeneral && scaleLog2 > 0.f ? scaleLog2 : 1.f;
}

/// The online softmax step of one warp's 16 rows on scores x = mult * S (mult > 0, folded into
/// the exponentials): new running max of x (over the 4 threads of a row; kept in the log2
/// domain), O and the running sum rescaled, S replaced by P = exp2(x - max). The sum stays a
/// per-thread partial until the end.
template <int NT, int NO>
__device__ __forceinline__ void softmaxStep(float (&s)[NT][4], float (&o)[NO][4],
                                            float (&rowMax)[2], float (&rowSum)[2], float mult) {
#pragma unroll
  for (int hi = 0; hi < 2; ++hi) {
    float mx = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * hi], s[nt][2 * hi + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    mx = fmaxf(rowMax[hi], mx * mult);
    const float mUse = mx == -INFINITY ? 0.f : mx;
    const float alpha = fastExp2(rowMax[hi] - mUse);
    rowMax[hi] = mx;
    float sum = 0.f;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      s[nt][2 * hi] = fastExp2(fmaf(s[nt][2 * hi], mult, -mUse));
      s[nt][2 * hi + 1] = fastExp2(fmaf(s[nt][2 * hi + 1], mult, -mUse));
      sum += s[nt][2 * hi] + s[nt][2 * hi + 1];
    }
    rowSum[hi] = rowSum[hi] * alpha + sum;
    // O is rescaled only when some row of the warp has a new max (often none, later on).
    if (__any_sync(0xffffffffu, alpha != 1.f)) {
#pragma unroll
      for (int i = 0; i < NO; ++i) {
        o[i][2 * hi] *= alpha;
        o[i][2 * hi + 1] *= alpha;
      }
    }
  }
}

/// The A fragment of P for keys [16 kk, 16 kk + 16) from the S accumulators.
template <typename T, int NT>
__device__ __forceinline__ void pFragment(const float (&s)[NT][4], int kk, uint32_t (&a)[4]) {
  a[0] = pack2<T>(s[2 * kk][0], s[2 * kk][1]);
  a[1] = pack2<T>(s[2 * kk][2], s[2 * kk][3]);
  a[2] = pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
  a[3] = pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

/// Writes one warp's 16 output rows (this thread: rows r0/r1, columns i * 8 + 2 * tq + {0, 1})
/// normalized by the row sums: into Y, or with splits into the f32 partials and log-sum-exps.
template <typename T, int NO>
__device__ __forceinline__ void storeRows(const AttnParams &p, const float (&o)[NO][4],
                                          const float (&rowMax)[2], const float (&rowSum)[2],
                                          const RowInfo *r0, const RowInfo *r1, int split, int tq) {
#pragma unroll
  for (int hi = 0; hi < 2; ++hi) {
    const RowInfo &ri = hi ? *r1 : *r0;
    if (ri.qi < 0) continue;
    const float l = rowSum[hi];
    const float inv = l > 0.f ? 1.f / l : (l == 0.f ? 0.f : l); // NaN stays NaN
    if (p.splits == 1) {
      T *yr = static_cast<T *>(p.y) + ri.yBase + 2 * tq;
#pragma unroll
      for (int i = 0; i < NO; ++i)
        *reinterpret_cast<uint32_t *>(yr + i * 8) =
            pack2<T>(o[i][2 * hi] * inv, o[i][2 * hi + 1] * inv);
    } else {
      float *po = p.partO + (int64_t(split) * p.rowsTotal + ri.row) * (NO * 8) + 2 * tq;
#pragma unroll
      for (int i = 0; i < NO; ++i)
        *reinterpret_cast<float2 *>(po + i * 8) =
            make_float2(o[i][2 * hi] * inv, o[i][2 * hi + 1] * inv);
      if (tq == 0)
        p.partL[int64_t(split) * p.rowsTotal + ri.row] =
            l > 0.f ? rowMax[hi] + __log2f(l) : (l == 0.f ? -INFINITY : l);
    }
  }
}

/// The work of one block: m-block, (batch, kv head), split, and the key tiles it visits.
struct BlockWork {
  int64_t m0, b, hk, kbBegin, firstQ;
  int split, nTiles;
};

template <int BM, int BN>
__device__ __forceinline__ BlockWork blockWork(const AttnParams &p, int64_t bid) {
  BlockWork w;
  int64_t mb = bid % p.mBlocks;
  bid /= p.mBlocks;
  w.split = int(bid % p.splits);
  const int64_t bkh = bid / p.splits;
  if (p.causal) mb = p.mBlocks - 1 - mb; // the longest rows first
  w.b = bkh / p.kvHeads, w.hk = bkh % p.kvHeads;
  w.m0 = mb * BM;
  // The keys this block sees: [0, keyEnd), cut to this split's key blocks.
  int64_t keyEnd = p.seqK;
  const int64_t lastRow = min(w.m0 + BM, p.rowsPerKv) - 1;
  if (p.causal) keyEnd = min(keyEnd, max(lastRow / p.group + p.causalOffset + 1, int64_t(0)));
  const int64_t nKb = (keyEnd + BN - 1) / BN;
  w.kbBegin = int64_t(w.split) * p.kbPerSplit;
  const int64_t kbEnd = min(nKb, w.kbBegin + p.kbPerSplit);
  w.nTiles = int(max(kbEnd - w.kbBegin, int64_t(0)));
  // Tiles whose last key is at most firstQ + causalOffset (and below seqK) need no mask.
  w.firstQ = w.m0 / p.group;
  return w;
}

/// Fills the block's RowInfo (all threads of the block).
__device__ __forceinline__ void fillRowInfo(const AttnParams &p, RowInfo *rowInfo, int BM,
                                            const BlockWork &w) {
  for (int r = threadIdx.x; r < BM; r += blockDim.x) {
    const int64_t pr = w.m0 + r;
    RowInfo ri{-1, 0, 0, 0};
    if (pr < p.rowsPerKv) {
      const int64_t i = pr / p.group, h = w.hk * p.group + pr % p.group;
      ri.qi = i;
      ri.maskBase = p.mOff + w.b * p.msB + h * p.msH + i * p.msQ;
      ri.yBase = w.b * p.ysB + h * p.ysH + i * p.ysS;
      ri.row = (w.b * p.heads + h) * p.seqQ + i;
    }
    rowInfo[r] = ri;
  }
}

/// The address of Q row r of the block (valid: inside the sequence).
template <typename T>
__device__ __forceinline__ const T *qRowPtr(const AttnParams &p, const BlockWork &w, int r,
                                            bool &valid) {
  const T *qg = static_cast<const T *>(p.q);
  const int64_t pr = w.m0 + r;
  valid = pr < p.rowsPerKv;
  if (!valid) return qg;
  const int64_t i = pr / p.group, h = w.hk * p.group + pr % p.group;
  return qg + p.qOff + w.b * p.qsB + h * p.qsH + i * p.qsS;
}

/// Loads `rows` rows of D elements (row ptr(r), valid(r)) into a padded tile with cp.async.
template <int D, int LD, int kThreads, int ROWS, typename T, typename RowPtr>
__device__ __forceinline__ void loadTile(T *tile, RowPtr rowPtr) {
  constexpr int kChunks = D / 8; // 16-byte chunks per row
  constexpr int kTotal = ROWS * kChunks, kIters = (kTotal + kThreads - 1) / kThreads;
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int c = int(threadIdx.x) + it * kThreads;
    if (kTotal % kThreads == 0 || c < kTotal) {
      const int r = c / kChunks, col = c % kChunks;
      bool valid;
      const T *src = rowPtr(r, valid);
      cpAsync16(smemAddr(tile + r * LD + col * 8), valid ? src + col * 8 : src, valid);
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

    // Row sums over the 4 threads of a row.
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int hi = 0; hi < 2; ++hi) {
        rowSum[mt][hi] += __shfl_xor_sync(0xffffffffu, rowSum[mt][hi], 1);
        rowSum[mt][hi] += __shfl_xor_sync(0xffffffffu, rowSum[mt][hi], 2);
      }

    if constexpr (kKeyWarps == 1) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        const RowInfo *ri = rowInfo + mt * 16 * kRowWarps + rowWarp * 16 + g;
        storeRows<T>(p, o[mt], rowMax[mt], rowSum[mt], ri, ri + 8, split, tq);
      }
    } else {
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
  }
}

// --- the Hopper kernel (sm_90a): warpgroup MMA

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) // the helpers of the Hopper kernel
/// wgmma wrappers (generated): d (m64nN f32, the mma fragment layout per warp) += a (this
/// warp's 16 x 16 A fragment in registers) * B (shared memory, descriptor `desc`); scaleD 0
/// overwrites d; TB 1: B is MN-major (transposed).
template <int TB>
__device__ __forceinline__ void wgmmaRS(float (&d)[8][4], const uint32_t (&a)[4], uint64_t desc,
                                        int scaleD, __nv_bfloat16 *) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
               "{%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]),
                 "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]),
                 "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]),
                 "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
                 "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),
                 "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
                 "+f"(d[7][2]), "+f"(d[7][3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scaleD), "n"(TB));
}
template <int TB>
__device__ __forceinline__ void wgmmaRS(float (&d)[8][4], const uint32_t (&a)[4], uint64_t desc,
                                        int scaleD, __half *) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
               "{%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]),
                 "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]),
                 "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]),
                 "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
                 "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),
                 "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
                 "+f"(d[7][2]), "+f"(d[7][3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scaleD), "n"(TB));
}
template <int TB>
__device__ __forceinline__ void wgmmaRS(float (&d)[10][4], const uint32_t (&a)[4], uint64_t desc,
                                        int scaleD, __nv_bfloat16 *) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %45, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
               "%32, %33, %34, %35, %36, %37, %38, %39}, "
               "{%40, %41, %42, %43}, %44, p, 1, 1, %46;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]),
                 "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]),
                 "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]),
                 "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
                 "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),
                 "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
                 "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]),
                 "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scaleD), "n"(TB));
}
template <int TB>
__device__ __forceinline__ void wgmmaRS(float (&d)[10][4], const uint32_t (&a)[4], uint64_t desc,
                                        int scaleD, __half *) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %45, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n80k16.f32.f16.f16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
               "%32, %33, %34, %35, %36, %37, %38, %39}, "
               "{%40, %41, %42, %43}, %44, p, 1, 1, %46;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]),
                 "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]),
                 "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]),
                 "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
                 "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),
                 "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
                 "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]),
                 "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scaleD), "n"(TB));
}
template <int TB>
__device__ __forceinline__ void wgmmaRS(float (&d)[12][4], const uint32_t (&a)[4], uint64_t desc,
                                        int scaleD, __nv_bfloat16 *) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %53, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
               "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, "
               "{%48, %49, %50, %51}, %52, p, 1, 1, %54;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]),
                 "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]),
                 "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]),
                 "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
                 "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),
                 "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
                 "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]),
                 "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]),
                 "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]),
                 "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scaleD), "n"(TB));
}
template <int TB>
__device__ __forceinline__ void wgmmaRS(float (&d)[12][4], const uint32_t (&a)[4], uint64_t desc,
                                        int scaleD, __half *) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %53, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n96k16.f32.f16.f16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
               "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, "
               "{%48, %49, %50, %51}, %52, p, 1, 1, %54;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]),
                 "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]),
                 "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]),
                 "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
                 "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),
                 "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
                 "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]),
                 "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]),
                 "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]),
                 "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scaleD), "n"(TB));
}
template <int TB>
__device__ __forceinline__ void wgmmaRS(float (&d)[16][4], const uint32_t (&a)[4], uint64_t desc,
                                        int scaleD, __nv_bfloat16 *) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
               "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
               "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
               "{%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]),
                 "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]),
                 "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]),
                 "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
                 "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),
                 "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
                 "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]),
                 "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]),
                 "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]),
                 "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]),
                 "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]),
                 "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]),
                 "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scaleD), "n"(TB));
}
template <int TB>
__device__ __forceinline__ void wgmmaRS(float (&d)[16][4], const uint32_t (&a)[4], uint64_t desc,
                                        int scaleD, __half *) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
               "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
               "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
               "{%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]),
                 "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]),
                 "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]),
                 "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
                 "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),
                 "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
                 "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]),
                 "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]),
                 "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]),
                 "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]),
                 "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]),
                 "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]),
                 "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scaleD), "n"(TB));
}

__device__ __forceinline__ void wgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void wgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/// Orders the accumulators' registers after the wgmma that wrote them.
template <int NT> __device__ __forceinline__ void fenceRegs(float (&d)[NT][4]) {
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[i][e])::"memory");
}
/// Makes this thread's completed cp.async writes visible to the tensor cores (async proxy).
__device__ __forceinline__ void fenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
/// A shared-memory matrix descriptor of the 128-byte swizzle mode (PTX "matrix descriptor"):
/// start address, leading and stride byte offsets (in 16-byte units), swizzle mode 1.
__device__ __forceinline__ uint64_t smemDescSw128(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t((lbo >> 4) & 0x3FFF) << 16) |
         (uint64_t((sbo >> 4) & 0x3FFF) << 32) | (uint64_t(1) << 62);
}
#endif

/// Loads ROWS rows of D elements (row r at rowBase + r * stride, zeros from rowsLeft on) into
/// the 128-byte-swizzled layout of the descriptors: the row's 16-byte chunk c lives in column
/// block c / 8 (ROWS * 128 bytes each), at byte r * 128 + ((c % 8) ^ (r % 8)) * 16 of it. Each
/// thread keeps one chunk column, c = thread % (D / 8), and every (threads / (D / 8))-th row,
/// so its shared-memory offsets are fixed (`dst0`, from swizzleDst0) and its global address
/// moves by a constant step. The tile must be 1024-byte aligned.
template <int D, int kThreads, int ROWS, typename T>
__device__ __forceinline__ void loadTileSw(T *tile, uint32_t dst0, const T *rowBase, int64_t stride,
                                           int rowsLeft, const T *dummy) {
  constexpr int kChunks = D / 8, kRowStep = kThreads / kChunks;
  static_assert(kThreads % kChunks == 0 && kRowStep % 8 == 0 && ROWS % kRowStep == 0, "loader");
  const int r0 = int(threadIdx.x) / kChunks, c = int(threadIdx.x) % kChunks;
  const T *src = rowBase + r0 * stride + c * 8;
  const int64_t step = kRowStep * stride;
  const uint32_t dst = smemAddr(tile) + dst0;
#pragma unroll
  for (int it = 0; it < ROWS / kRowStep; ++it) {
    const bool valid = r0 + it * kRowStep < rowsLeft;
    cpAsync16(dst + it * kRowStep * 128, valid ? src : dummy, valid);
    src += step;
  }
}
/// This thread's byte offset in a tile of loadTileSw.
template <int D, int kThreads, int ROWS> __device__ __forceinline__ uint32_t swizzleDst0() {
  constexpr int kChunks = D / 8;
  const int r0 = int(threadIdx.x) / kChunks, c = int(threadIdx.x) % kChunks;
  return uint32_t((c / 8) * ROWS * 128 + r0 * 128 + ((c % 8) ^ (r0 % 8)) * 16);
}

/// The flash kernel on warpgroup MMA: kWG warpgroups of 4 warps, 64 rows each (16 per warp,
/// the same fragment layout as the mma.sync kernel: the masking, softmax and stores are
/// shared). S = Q K^T is wgmma m64nBNk16 with Q fragments in registers and K (K-major) in
/// shared memory; O += P V is wgmma m64nDk16 with P from the S registers and V (MN-major) in
/// shared memory, both 128-byte swizzled. K/V tiles stream through kStages cp.async stages;
/// the S product of tile t + 1 is issued before the softmax of tile t, so the tensor cores
/// work while the warps compute exponentials. Compiled for sm_90a only; D 64 or 128.
template <typename T, int D, int kWG, int BN, int kStages, bool kGeneral>
__global__ void __launch_bounds__(128 * kWG) flashAttnWgmmaKernel(const AttnParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(D % 64 == 0 && BN % 64 == 0 && kStages == 3, "wgmma tiles");
  constexpr int BM = 64 * kWG, LDQ = D + 8, kThreads = 128 * kWG;
  constexpr int kTile = BN * D; // elements of one K or V tile
  extern __shared__ __align__(16) unsigned char smemRaw[];
  const uint32_t align = (1024 - (smemAddr(smemRaw) & 1023)) & 1023;
  T *sK = reinterpret_cast<T *>(smemRaw + align); // kStages tiles, then kStages V tiles
  T *sV = sK + kStages * kTile;
  T *sQ = sV + kStages * kTile; // BM x LDQ (padded)
  RowInfo *rowInfo = reinterpret_cast<RowInfo *>(sQ + BM * LDQ);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tq = lane % 4;
  const T *kg = static_cast<const T *>(p.k);
  const T *vg = static_cast<const T *>(p.v);
  const float scaleLog2 = p.scale * kLog2e;
  const uint32_t dst0 = swizzleDst0<D, kThreads, BN>();

  for (int64_t bid = blockIdx.x; bid < p.totalBlocks; bid += gridDim.x) {
    const BlockWork w = blockWork<BM, BN>(p, bid);
    const T *kBase = kg + p.kOff + w.b * p.ksB + w.hk * p.ksH;
    const T *vBase = vg + p.vOff + w.b * p.vsB + w.hk * p.vsH;
    __syncthreads(); // the previous block of this loop is done with shared memory
    fillRowInfo(p, rowInfo, BM, w);
    auto loadKV = [&](int tile) {
      const int stage = tile % kStages;
      const int64_t n0 = (w.kbBegin + tile) * BN;
      const int rowsLeft = int(min(p.seqK - n0, int64_t(BN)));
      const int64_t ks = p.ksS, vs = p.vsS;
      loadTileSw<D, kThreads, BN>(sK + stage * kTile, dst0, kBase + n0 * ks, ks, rowsLeft, kBase);
      loadTileSw<D, kThreads, BN>(sV + stage * kTile, dst0, vBase + n0 * vs, vs, rowsLeft, vBase);
    };
    // S = Q K(tile)^T, issued (K is K-major: column block kk / 4, 32 bytes per k-step).
    auto issueS = [&](float(&s)[BN / 8][4], const uint32_t(&qf)[D / 16][4], int tile) {
      const uint32_t kAddr = smemAddr(sK + (tile % kStages) * kTile);
      wgmmaFence();
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        wgmmaRS<0>(s, qf[kk], smemDescSw128(kAddr + (kk / 4) * BN * 128 + (kk % 4) * 32, 16, 1024),
                   kk, (T *)nullptr);
      wgmmaCommit();
    };
    // Waits for every committed load (the newest is the tile needed next) and makes it
    // visible to the tensor cores; the barrier also means every warp is done with the tiles
    // before the one in use.
    auto waitLoads = [&]() {
      cpAsyncWait<0>();
      fenceProxyAsync();
      __syncthreads();
    };

    loadTile<D, LDQ, kThreads, BM>(sQ,
                                   [&](int r, bool &valid) { return qRowPtr<T>(p, w, r, valid); });
    if (w.nTiles > 0) loadKV(0);
    cpAsyncCommit();

    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float rowMax[2] = {-INFINITY, -INFINITY}, rowSum[2] = {0.f, 0.f};
    uint32_t qf[D / 16][4];
    float s[BN / 8][4], sNext[BN / 8][4];
    waitLoads(); // Q and tile 0
    if (w.nTiles > 1) loadKV(1);
    cpAsyncCommit();
    {
      const T *qa = sQ + (warp * 16 + (lane & 15)) * LDQ + (lane / 16) * 8;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        ldmatrixX4(smemAddr(qa + kk * 16), qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3]);
    }
    const RowInfo *ri = rowInfo + warp * 16 + lane / 4;
    if (w.nTiles > 0) {
      issueS(s, qf, 0);
      wgmmaWait<0>();
      fenceRegs(s);
    }

    for (int t = 0; t < w.nTiles; ++t) {
      const bool more = t + 1 < w.nTiles;
      if (more) {
        waitLoads(); // tile t + 1; every warp is past tile t - 1
        // Tile t + 2 goes into the stage of tile t - 1 (3 stages).
        if (t + 2 < w.nTiles) loadKV(t + 2);
        cpAsyncCommit();
        issueS(sNext, qf, t + 1);
      }

      const int64_t n0 = (w.kbBegin + t) * BN;
      const bool edge = n0 + BN > p.seqK || (p.causal && n0 + BN - 1 > w.firstQ + p.causalOffset);
      maskScores<T, kGeneral>(p, s, ri, ri + 8, n0, tq, edge, scaleLog2);
      softmaxStep(s, o, rowMax, rowSum, softmaxMult<kGeneral>(scaleLog2));

      // O += P V: V is MN-major (column blocks of 64 at BN * 128 bytes, 8-key groups at 1024).
      uint32_t pa[BN / 16][4];
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) pFragment<T>(s, kk, pa[kk]);
      const uint32_t vAddr = smemAddr(sV + (t % kStages) * kTile);
      wgmmaFence();
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk)
        wgmmaRS<1>(o, pa[kk], smemDescSw128(vAddr + kk * 2048, BN * 128, 1024), 1, (T *)nullptr);
      wgmmaCommit();
      wgmmaWait<0>();
      fenceRegs(o);
      if (more) {
        fenceRegs(sNext);
#pragma unroll
        for (int i = 0; i < BN / 8; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[i][e] = sNext[i][e];
      }
    }
    cpAsyncWait<0>();
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      rowSum[hi] += __shfl_xor_sync(0xffffffffu, rowSum[hi], 1);
      rowSum[hi] += __shfl_xor_sync(0xffffffffu, rowSum[hi], 2);
    }
    storeRows<T>(p, o, rowMax, rowSum, ri, ri + 8, w.split, tq);
  }
#endif
}

template <int D, int kWG, int BN, int kStages> struct WgmmaCfg {
  static constexpr int BM = 64 * kWG;
  static constexpr int kThreads = 128 * kWG;
  static constexpr size_t kSmem =
      1024 + size_t(2 * kStages) * BN * D * 2 + size_t(BM) * (D + 8) * 2 + size_t(BM) * 32;
};

/// Y from the split-KV partials: per row, weights exp2(lse_s - max lse).
template <typename T> __global__ void splitCombineKernel(const AttnParams p) {
  for (int64_t row = blockIdx.x; row < p.rowsTotal; row += gridDim.x) {
    float mx = -INFINITY;
    for (int s = 0; s < p.splits; ++s) mx = fmaxf(mx, p.partL[int64_t(s) * p.rowsTotal + row]);
    const float mUse = mx == -INFINITY ? 0.f : mx;
    const int64_t qi = row % p.seqQ, bh = row / p.seqQ, h = bh % p.heads, b = bh / p.heads;
    T *yr = static_cast<T *>(p.y) + b * p.ysB + h * p.ysH + qi * p.ysS;
    for (int64_t e = threadIdx.x; e < p.dv; e += blockDim.x) {
      float acc = 0.f, wsum = 0.f;
      for (int s = 0; s < p.splits; ++s) {
        const float lse = p.partL[int64_t(s) * p.rowsTotal + row];
        const float w = exp2f(lse - mUse);
        wsum += w;
        // A split that saw no key has weight 0 and a zero partial.
        if (w != 0.f || lse != lse) acc += w * p.partO[(int64_t(s) * p.rowsTotal + row) * p.dv + e];
      }
      yr[e] = fromAcc<T>(wsum > 0.f ? acc / wsum : (wsum == 0.f ? 0.f : wsum));
    }
  }
}

// --- the plain kernel

constexpr int kPlainThreads = 128;

/// One block per query row (grid-stride): thread t scores key j0 + t, the block shares the
/// running max and sum, and the f32 output row lives in shared memory.
template <typename T>
__global__ void __launch_bounds__(kPlainThreads) plainAttnKernel(const AttnParams p) {
  extern __shared__ float plainSmem[];
  float *oAcc = plainSmem;       // dv
  float *pSh = plainSmem + p.dv; // kPlainThreads
  __shared__ float red[kPlainThreads / 32];
  const T *qg = static_cast<const T *>(p.q);
  const T *kg = static_cast<const T *>(p.k);
  const T *vg = static_cast<const T *>(p.v);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  auto blockReduce = [&](float v, bool isMax) {
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
      float w = __shfl_xor_sync(0xffffffffu, v, o);
      v = isMax ? fmaxf(v, w) : v + w;
    }
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = red[0];
    for (int w = 1; w < kPlainThreads / 32; ++w) v = isMax ? fmaxf(v, red[w]) : v + red[w];
    return v;
  };
  for (int64_t row = blockIdx.x; row < p.rowsTotal; row += gridDim.x) {
    const int64_t qi = row % p.seqQ, bh = row / p.seqQ, h = bh % p.heads, b = bh / p.heads;
    const int64_t hk = h / p.group;
    const T *qr = qg + p.qOff + b * p.qsB + h * p.qsH + qi * p.qsS;
    const T *kb = kg + p.kOff + b * p.ksB + hk * p.ksH;
    const T *vb = vg + p.vOff + b * p.vsB + hk * p.vsH;
    const int64_t maskRow = p.mOff + b * p.msB + h * p.msH + qi * p.msQ;
    int64_t keyEnd = p.seqK;
    if (p.causal) keyEnd = min(keyEnd, max(qi + p.causalOffset + 1, int64_t(0)));
    __syncthreads();
    for (int64_t e = tid; e < p.dv; e += kPlainThreads) oAcc[e] = 0.f;
    float m = -INFINITY, l = 0.f;
    for (int64_t j0 = 0; j0 < keyEnd; j0 += kPlainThreads) {
      const int64_t j = j0 + tid;
      float x = -INFINITY;
      if (j < keyEnd) {
        const T *kr = kb + j * p.ksS;
        float dot = 0.f;
        for (int64_t d = 0; d < p.d; ++d) dot = fmaf(toAcc<float>(qr[d]), toAcc<float>(kr[d]), dot);
        x = dot * p.scale;
        if (p.softcap > 0.f) x = p.softcap * tanhf(x / p.softcap);
        if (p.maskKind == 1) {
          if (static_cast<const unsigned char *>(p.mask)[maskRow + j * p.msK] == 0) x = -INFINITY;
        } else if (p.maskKind == 2) {
          x += toAcc<float>(static_cast<const T *>(p.mask)[maskRow + j * p.msK]);
        }
      }
      const float mNew = fmaxf(m, blockReduce(x, true));
      const float mUse = mNew == -INFINITY ? 0.f : mNew;
      const float alpha = expf(m - mUse);
      const float pj = expf(x - mUse);
      l = l * alpha + blockReduce(pj, false);
      m = mNew;
      pSh[tid] = pj;
      __syncthreads();
      const int cnt = int(min(int64_t(kPlainThreads), keyEnd - j0));
      for (int64_t e = tid; e < p.dv; e += kPlainThreads) {
        float acc = oAcc[e] * alpha;
        const T *vc = vb + j0 * p.vsS + e;
        for (int jj = 0; jj < cnt; ++jj) acc = fmaf(pSh[jj], toAcc<float>(vc[jj * p.vsS]), acc);
        oAcc[e] = acc;
      }
    }
    T *yr = static_cast<T *>(p.y) + b * p.ysB + h * p.ysH + qi * p.ysS;
    const float inv = l > 0.f ? 1.f / l : (l == 0.f ? 0.f : l);
    for (int64_t e = tid; e < p.dv; e += kPlainThreads) yr[e] = fromAcc<T>(oAcc[e] * inv);
  }
}

// --- host side

bool addIndex(int64_t &acc, int64_t n, int64_t stride) {
  // acc += (n - 1) * stride, n >= 1
  int64_t t;
  return !__builtin_mul_overflow(n - 1, stride, &t) && !__builtin_add_overflow(acc, t, &acc);
}

/// The largest element index of a strided 4-D view, or false when it overflows.
bool maxIndex(int64_t off, std::initializer_list<std::pair<int64_t, int64_t>> dims) {
  int64_t acc = off;
  for (auto [n, s] : dims)
    if (!addIndex(acc, n, s)) return false;
  return true;
}

bool aligned16(const void *ptr, int64_t off, std::initializer_list<int64_t> strides) {
  if ((reinterpret_cast<uintptr_t>(ptr) + uintptr_t(off) * 2) % 16) return false;
  for (int64_t s : strides)
    if (s % 8) return false;
  return true;
}

/// Multiprocessor count of the device (cached per ordinal).
int smCount(int device) {
  static std::atomic<int> cache[64];
  if (device < 0 || device >= 64) device = 0;
  int v = cache[device].load(std::memory_order_relaxed);
  if (v > 0) return v;
  int n = 0;
  if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || n <= 0)
    n = 132;
  cache[device].store(n, std::memory_order_relaxed);
  return n;
}

/// Raises a kernel's dynamic shared-memory limit once per device (`occ`: the kernel's own
/// cache); its resident blocks per SM.
template <typename Kernel>
int prepareKernel(Kernel kernel, size_t smem, int device, int threads, std::atomic<int> (&occ)[64],
                  cudaError_t &err) {
  if (device < 0 || device >= 64) device = 0;
  int v = occ[device].load(std::memory_order_relaxed);
  err = cudaSuccess;
  if (v > 0) return v;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (err != cudaSuccess) return 0;
  int n = 0;
  err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem);
  if (err != cudaSuccess) return 0;
  if (n < 1) n = 1;
  occ[device].store(n, std::memory_order_relaxed);
  return n;
}

/// Environment override of the prefill kernel, for experiments and tests: mma.sync 'a' 4
/// warps x 16 rows (BM 64), 'b' 4 warps x 32 rows (BM 128) with 64-key tiles, 'c' the same with
/// 32-key tiles (the mma.sync default), 'd' 8 warps x 16 rows; on sm_90 (head dims 64 and 128)
/// wgmma 'e' two warpgroups (BM 128, the default at head dim 128), 'f' one (BM 64, the default
/// at head dim 64).
char envConfig() {
  const char *s = std::getenv("COIL_CUDA_ATTN_CONFIG");
  return s && s[0] >= 'a' && s[0] <= 'f' && !s[1] ? s[0] : 0;
}
/// Environment override of the split count (>= 1), for tests and experiments.
int envSplits() {
  const char *s = std::getenv("COIL_CUDA_ATTN_SPLITS");
  if (!s) return 0;
  int w = std::atoi(s);
  return w >= 1 && w <= kMaxSplits ? w : 0;
}

/// The path of the calling thread's last attention call (COIL_CUDA_ATTN_PATH_*).
thread_local int32_t lastPath = COIL_CUDA_ATTN_PATH_NONE;
/// Whether that call ran the wgmma kernel.
thread_local int32_t lastWgmma = 0;

/// Launches a flash kernel (block of `threads` threads, BM rows, BN-key tiles, `smem` bytes of
/// dynamic shared memory) with the split count chosen here, then the combine kernel.
template <typename T, int D, typename Kernel>
int32_t launchAttn(const coil_cuda_ctx *ctx, const char *fn, AttnParams p, Kernel kernel,
                   const char *name, int BM, int BN, int threads, size_t smem,
                   std::atomic<int> (&occ)[64]) {
  cudaStream_t stream = static_cast<cudaStream_t>(ctx->stream);
  cudaError_t err;
  const int perSm = prepareKernel(kernel, smem, ctx->device_ordinal, threads, occ, err);
  if (err != cudaSuccess) return check(ctx, fn, "setting up the attention kernel", err);
  const int64_t capacity = int64_t(perSm) * smCount(ctx->device_ordinal);

  p.mBlocks = (p.rowsPerKv + BM - 1) / BM;
  const int64_t base = p.mBlocks * p.batch * p.kvHeads;
  const int64_t keyBlocks = (p.seqK + BN - 1) / BN;
  // Split the keys when one split does not fill the GPU: the fewest splits within 10% of the
  // best wave efficiency, each split at least 2 key blocks long, bounded by the workspace.
  int splits = 1;
  if (base < capacity && keyBlocks >= 4) {
    const int64_t maxS =
        std::min<int64_t>({int64_t(kMaxSplits), keyBlocks / 2, (2 * capacity + base - 1) / base});
    double best = 0;
    double eff[kMaxSplits + 1] = {};
    for (int64_t s = 1; s <= maxS; ++s) {
      double waves = double(base * s) / double(capacity);
      eff[s] = waves / std::ceil(waves);
      best = std::max(best, eff[s]);
    }
    for (int64_t s = 1; s <= maxS; ++s)
      if (eff[s] >= 0.9 * best) {
        splits = int(s);
        break;
      }
  }
  if (int e = envSplits()) splits = int(std::min<int64_t>(e, std::max<int64_t>(keyBlocks, 1)));
  // Workspace: partial outputs and log-sum-exps (f32).
  while (splits > 1) {
    size_t oBytes = size_t(splits) * size_t(p.rowsTotal) * size_t(D) * 4;
    size_t oAligned = (oBytes + 255) & ~size_t(255);
    size_t need = oAligned + size_t(splits) * size_t(p.rowsTotal) * 4;
    if (ctx->workspace && need <= ctx->workspace_bytes) {
      p.partO = static_cast<float *>(ctx->workspace);
      p.partL = reinterpret_cast<float *>(static_cast<char *>(ctx->workspace) + oAligned);
      break;
    }
    --splits;
  }
  p.splits = splits;
  p.kbPerSplit = int((keyBlocks + splits - 1) / splits);
  if (splits > 1)
    p.kbPerSplit = std::max(p.kbPerSplit, 1);
  else
    p.kbPerSplit = int(std::min<int64_t>(keyBlocks, INT32_MAX));
  p.totalBlocks = base * splits;
  const unsigned grid = unsigned(std::min<int64_t>(p.totalBlocks, int64_t(1) << 30));
  kernel<<<grid, threads, smem, stream>>>(p);
  if (int32_t r = checkLaunch(ctx, fn, name)) return r;
  if (splits > 1) {
    splitCombineKernel<T><<<gridFor(p.rowsTotal, 1), 128, 0, stream>>>(p);
    if (int32_t r = checkLaunch(ctx, fn, "splitCombineKernel")) return r;
  }
  lastPath = splits > 1 ? COIL_CUDA_ATTN_PATH_SPLIT : COIL_CUDA_ATTN_PATH_FLASH;
  return 0;
}

template <typename T, int D, int kRowWarps, int kKeyWarps, int kMTiles, int BN, bool kGeneral>
int32_t launchFlash(const coil_cuda_ctx *ctx, const char *fn, const AttnParams &p) {
  using Cfg = FlashCfg<D, kRowWarps, kKeyWarps, kMTiles, BN>;
  static std::atomic<int> occ[64];
  return launchAttn<T, D>(ctx, fn, p,
                          flashAttnKernel<T, D, kRowWarps, kKeyWarps, kMTiles, BN, kGeneral>,
                          "flashAttnKernel", Cfg::BM, BN, Cfg::kThreads, Cfg::kSmem, occ);
}

/// Launches the wgmma kernel, or returns -1 when the library holds no sm_90a code for it (a
/// build without 90a: its body would be empty).
template <typename T, int D, int kWG, int BN, int kStages, bool kGeneral>
int32_t launchWgmma(const coil_cuda_ctx *ctx, const char *fn, const AttnParams &p) {
  using Cfg = WgmmaCfg<D, kWG, BN, kStages>;
  static std::atomic<int> occ[64];
  static std::atomic<int> hasSm90a{-1};
  if (hasSm90a.load(std::memory_order_relaxed) < 0) {
    cudaFuncAttributes attr{};
    const bool ok =
        cudaFuncGetAttributes(&attr, flashAttnWgmmaKernel<T, D, kWG, BN, kStages, kGeneral>) ==
            cudaSuccess &&
        attr.binaryVersion == 90;
    hasSm90a.store(ok ? 1 : 0, std::memory_order_relaxed);
  }
  if (hasSm90a.load(std::memory_order_relaxed) == 0) return -1;
  const int32_t r =
      launchAttn<T, D>(ctx, fn, p, flashAttnWgmmaKernel<T, D, kWG, BN, kStages, kGeneral>,
                       "flashAttnWgmmaKernel", Cfg::BM, BN, Cfg::kThreads, Cfg::kSmem, occ);
  lastWgmma = r == 0;
  return r;
}

template <typename T, int D, bool kGeneral>
int32_t dispatchConfig(const coil_cuda_ctx *ctx, const char *fn, const AttnParams &p) {
  // Decode-like (at most 16 packed rows): one row of 4 warps on different keys.
  if (p.rowsPerKv <= 16) return launchFlash<T, D, 1, 4, 1, 64, kGeneral>(ctx, fn, p);
  const char cfg = envConfig();
  // Head dim 64 without a mask over at most 1024 keys: the mma.sync kernel is faster there
  // (BERT's 512 keys: 0.038 ms against 0.041 for one warpgroup, ViT's 197: 0.023 against 0.030).
  const bool shortD64 = D == 64 && !kGeneral && p.seqK <= 1024 && cfg == 0;
  // sm_90, head dims 64 and 128: warpgroup MMA.
  if constexpr (D % 64 == 0) {
    if (ctx->sm_version == 90 && !shortD64 && cfg != 'a' && cfg != 'b' && cfg != 'c' &&
        cfg != 'd') {
      // Head dim 64 runs one warpgroup per block (two were slower at every size measured:
      // bench/attention_bench.py, problems "bert D64", "vit D64", "long D64").
      const bool one = cfg == 'f' || (D == 64 && cfg != 'e');
      const int32_t r = one ? launchWgmma<T, D, 1, 64, 3, kGeneral>(ctx, fn, p)
                            : launchWgmma<T, D, 2, 64, 3, kGeneral>(ctx, fn, p);
      if (r >= 0) return r;
    }
  }
  // mma.sync: 4 warps of 32 rows each, 32-key tiles (16 rows and 64 keys with a mask or
  // softcap: registers).
  if constexpr (kGeneral) {
    return launchFlash<T, D, 4, 1, 1, 64, true>(ctx, fn, p);
  } else {
    if constexpr (D == 128) {
      switch (cfg) {
      case 'a':
        return launchFlash<T, D, 4, 1, 1, 64, false>(ctx, fn, p);
      case 'b':
        return launchFlash<T, D, 4, 1, 2, 64, false>(ctx, fn, p);
      case 'd':
        return launchFlash<T, D, 8, 1, 1, 64, false>(ctx, fn, p);
      default:
        break;
      }
    }
    return launchFlash<T, D, 4, 1, 2, 32, false>(ctx, fn, p);
  }
}

template <typename T, bool kGeneral>
int32_t dispatchHeadDim(const coil_cuda_ctx *ctx, const char *fn, const AttnParams &p) {
  switch (p.d) {
  case 64:
    return dispatchConfig<T, 64, kGeneral>(ctx, fn, p);
  case 80:
    return dispatchConfig<T, 80, kGeneral>(ctx, fn, p);
  case 96:
    return dispatchConfig<T, 96, kGeneral>(ctx, fn, p);
  default:
    return dispatchConfig<T, 128, kGeneral>(ctx, fn, p);
  }
}

template <typename T>
int32_t
attention(const coil_cuda_ctx *ctx, const char *fn, const void *q, const void *k, const void *v,
          const void *mask, void *y, int64_t batch, int64_t heads, int64_t kvHeads, int64_t seqQ,
          int64_t seqK, int64_t headDim, int64_t headDimV, int64_t qOffset, int64_t qStrideB,
          int64_t qStrideH, int64_t qStrideS, int64_t kOffset, int64_t kStrideB, int64_t kStrideH,
          int64_t kStrideS, int64_t vOffset, int64_t vStrideB, int64_t vStrideH, int64_t vStrideS,
          int64_t yStrideB, int64_t yStrideH, int64_t yStrideS, int64_t maskKind,
          int64_t maskOffset, int64_t maskStrideB, int64_t maskStrideH, int64_t maskStrideQ,
          int64_t maskStrideK, int64_t causal, int64_t causalOffset, double scale, double softcap) {
  lastPath = COIL_CUDA_ATTN_PATH_NONE;
  lastWgmma = 0;
  if (!ctx) return 1;
  if (batch < 0 || heads < 0 || kvHeads < 0 || seqQ < 0 || seqK < 0 || headDim < 0 || headDimV < 0)
    return fail(ctx, fn,
                "sizes must be >= 0 (batch %lld, heads %lld, kvHeads %lld, seqQ %lld, seqK %lld, "
                "headDim %lld, headDimV %lld)",
                (long long)batch, (long long)heads, (long long)kvHeads, (long long)seqQ,
                (long long)seqK, (long long)headDim, (long long)headDimV);
  if (heads > 0 && (kvHeads == 0 || heads % kvHeads))
    return fail(ctx, fn, "heads (%lld) must be a multiple of kvHeads (%lld)", (long long)heads,
                (long long)kvHeads);
  if (maskKind < 0 || maskKind > 2)
    return fail(ctx, fn, "maskKind must be 0 (none), 1 (bool) or 2 (additive), not %lld",
                (long long)maskKind);
  for (int64_t s : {qOffset, qStrideB, qStrideH, qStrideS, kOffset, kStrideB, kStrideH, kStrideS,
                    vOffset, vStrideB, vStrideH, vStrideS, yStrideB, yStrideH, yStrideS})
    if (s < 0) return fail(ctx, fn, "offsets and strides must be >= 0");
  if (maskKind != 0)
    for (int64_t s : {maskOffset, maskStrideB, maskStrideH, maskStrideQ, maskStrideK})
      if (s < 0) return fail(ctx, fn, "mask offsets and strides must be >= 0");
  if (batch == 0 || heads == 0 || seqQ == 0 || headDimV == 0) return 0;
  // Every index of every operand must fit int64.
  int64_t rowsTotal;
  bool ok = !__builtin_mul_overflow(batch * 1, heads, &rowsTotal) &&
            !__builtin_mul_overflow(rowsTotal, seqQ, &rowsTotal) &&
            maxIndex(0, {{batch, yStrideB}, {heads, yStrideH}, {seqQ, yStrideS}, {headDimV, 1}}) &&
            maxIndex(qOffset, {{batch, qStrideB},
                               {heads, qStrideH},
                               {seqQ, qStrideS},
                               {std::max<int64_t>(headDim, 1), 1}});
  if (ok && seqK > 0)
    ok = maxIndex(kOffset, {{batch, kStrideB},
                            {kvHeads, kStrideH},
                            {seqK, kStrideS},
                            {std::max<int64_t>(headDim, 1), 1}}) &&
         maxIndex(vOffset,
                  {{batch, vStrideB}, {kvHeads, vStrideH}, {seqK, vStrideS}, {headDimV, 1}});
  if (ok && seqK > 0 && maskKind != 0)
    ok = maxIndex(
        maskOffset,
        {{batch, maskStrideB}, {heads, maskStrideH}, {seqQ, maskStrideQ}, {seqK, maskStrideK}});
  if (!ok) return fail(ctx, fn, "the sizes, strides and offsets overflow int64");
  if (!y || (!q && headDim > 0 && seqK > 0) || (seqK > 0 && (!k || !v)) ||
      (maskKind != 0 && seqK > 0 && !mask))
    return fail(ctx, fn, "a tensor pointer is null");

  AttnParams p{};
  p.q = q, p.k = k, p.v = v, p.mask = mask, p.y = y;
  p.qOff = qOffset, p.qsB = qStrideB, p.qsH = qStrideH, p.qsS = qStrideS;
  p.kOff = kOffset, p.ksB = kStrideB, p.ksH = kStrideH, p.ksS = kStrideS;
  p.vOff = vOffset, p.vsB = vStrideB, p.vsH = vStrideH, p.vsS = vStrideS;
  p.ysB = yStrideB, p.ysH = yStrideH, p.ysS = yStrideS;
  p.mOff = maskOffset, p.msB = maskStrideB, p.msH = maskStrideH, p.msQ = maskStrideQ,
  p.msK = maskStrideK;
  p.batch = batch, p.heads = heads, p.kvHeads = kvHeads, p.group = heads / kvHeads;
  p.seqQ = seqQ, p.seqK = seqK, p.d = headDim, p.dv = headDimV;
  p.causalOffset = causalOffset, p.causal = causal != 0, p.maskKind = int32_t(maskKind);
  p.scale = float(scale), p.softcap = softcap > 0 ? float(softcap) : 0.f;
  p.rowsPerKv = p.group * seqQ, p.rowsTotal = rowsTotal;
  p.splits = 1;
  // Causal offsets far outside the sequences act like +-infinity.
  const int64_t lim = int64_t(1) << 62;
  p.causalOffset = std::min(std::max(causalOffset, -lim), lim);

  constexpr bool kTensor = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
  if constexpr (kTensor) {
    const bool fast = headDim == headDimV &&
                      (headDim == 64 || headDim == 80 || headDim == 96 || headDim == 128) &&
                      seqK > 0 && aligned16(q, qOffset, {qStrideB, qStrideH, qStrideS}) &&
                      aligned16(k, kOffset, {kStrideB, kStrideH, kStrideS}) &&
                      aligned16(v, vOffset, {vStrideB, vStrideH, vStrideS}) &&
                      aligned16(y, 0, {yStrideB, yStrideH, yStrideS});
    if (fast) {
      if (maskKind != 0 || p.softcap > 0) return dispatchHeadDim<T, true>(ctx, fn, p);
      return dispatchHeadDim<T, false>(ctx, fn, p);
    }
  }
  if (headDimV > kPlainMaxDv)
    return fail(ctx, fn, "headDimV %lld is larger than the %lld this kernel supports",
                (long long)headDimV, (long long)kPlainMaxDv);
  cudaStream_t stream = static_cast<cudaStream_t>(ctx->stream);
  const size_t smem = size_t(headDimV + kPlainThreads) * 4;
  if (smem > 48 * 1024) {
    cudaError_t err = cudaFuncSetAttribute(plainAttnKernel<T>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (err != cudaSuccess) return check(ctx, fn, "setting up the plain attention kernel", err);
  }
  plainAttnKernel<T><<<gridFor(rowsTotal, 1), kPlainThreads, smem, stream>>>(p);
  if (int32_t r = checkLaunch(ctx, fn, "plainAttnKernel")) return r;
  lastPath = COIL_CUDA_ATTN_PATH_PLAIN;
  return 0;
}

} // namespace
} // namespace coil::cuda

using coil::cuda::attention;

#define COIL_CUDA_DEFINE_ATTENTION(S, T)                                                           \
  extern "C" int32_t coil_cuda_attention_##S(                                                      \
      const coil_cuda_ctx *ctx, const void *q, const void *k, const void *v, const void *mask,     \
      void *y, int64_t batch, int64_t heads, int64_t kvHeads, int64_t seqQ, int64_t seqK,          \
      int64_t headDim, int64_t headDimV, int64_t qOffset, int64_t qStrideB, int64_t qStrideH,      \
      int64_t qStrideS, int64_t kOffset, int64_t kStrideB, int64_t kStrideH, int64_t kStrideS,     \
      int64_t vOffset, int64_t vStrideB, int64_t vStrideH, int64_t vStrideS, int64_t yStrideB,     \
      int64_t yStrideH, int64_t yStrideS, int64_t maskKind, int64_t maskOffset,                    \
      int64_t maskStrideB, int64_t maskStrideH, int64_t maskStrideQ, int64_t maskStrideK,          \
      int64_t causal, int64_t causalOffset, double scale, double softcap) {                        \
    return attention<T>(ctx, "coil_cuda_attention_" #S, q, k, v, mask, y, batch, heads, kvHeads,   \
                        seqQ, seqK, headDim, headDimV, qOffset, qStrideB, qStrideH, qStrideS,      \
                        kOffset, kStrideB, kStrideH, kStrideS, vOffset, vStrideB, vStrideH,        \
                        vStrideS, yStrideB, yStrideH, yStrideS, maskKind, maskOffset, maskStrideB, \
                        maskStrideH, maskStrideQ, maskStrideK, causal, causalOffset, scale,        \
                        softcap);                                                                  \
  }
COIL_CUDA_DEFINE_ATTENTION(f32, float)
COIL_CUDA_DEFINE_ATTENTION(f16, __half)
COIL_CUDA_DEFINE_ATTENTION(bf16, __nv_bfloat16)
#undef COIL_CUDA_DEFINE_ATTENTION

extern "C" int32_t coil_cuda_attention_last_path(void) {
  return coil::cuda::lastPath;
}
extern "C" int32_t coil_cuda_attention_last_wgmma(void) {
  return coil::cuda::lastWgmma;
}
