// Included by CudaAttention.cu only (one translation unit, so its anonymous namespace is the
// .cu file's): what the attention kernels share. The parameters, the PTX helpers (cp.async,
// ldmatrix, mma.sync, exp2), and the per-warp work in the mma fragment layout that the
// mma.sync and wgmma kernels share: block work and row info, masking, the online softmax
// step, P fragments, output stores, padded tile loads.
#pragma once

#include "kernels/cuda/CudaKernelsImpl.h"

#include <cmath>
#include <cstdint>
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
  /// keyMask: the mask row is the same for every row of a block (broadcast over the queries,
  /// and over the heads or one head a block) and there is no softcap, so a thread reads its
  /// keys' mask values once a tile for all its rows; maskPairs: every mask row contiguous
  /// (msK 1) with the two keys of each pair in one aligned 4-byte (additive) or 2-byte (bool)
  /// word.
  int32_t keyMask, maskPairs;
  /// keyBias (the warp-specialized kernel, a key mask and scale > 0): the kernel without mask
  /// code (kGeneral false) applies the mask through the initial S accumulators (fillKeyBias).
  int32_t keyBias;
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

/// What a block knows about each of its rows (shared memory): the query index (-1: past the
/// end), the element offsets of its mask row and Y row, and its row in [batch, heads, seqQ].
struct RowInfo {
  int64_t qi, maskBase, yBase, row;
};

/// The mask values of one warp's tile for this thread (rows r0 / r1, keys nw + nt * 8 + 2 * tq
/// + {0, 1}): their raw 16 or 8 bits, the two keys of a pair in one register. The general
/// kernels load them before the scores they apply to are ready, so that the loads' latency
/// overlaps the S product instead of following it.
template <int NT> struct MaskTile { uint32_t raw[NT][2]; };

/// The raw mask value at element `at` of the mask: kMask 1 a bool byte, 2 an additive T.
template <typename T, int kMask>
__device__ __forceinline__ uint32_t rawMask(const AttnParams &p, int64_t at) {
  static_assert(sizeof(T) == 2, "the flash kernels take 16-bit types");
  if constexpr (kMask == 1)
    return static_cast<const unsigned char *>(p.mask)[at];
  else
    return static_cast<const uint16_t *>(p.mask)[at];
}

/// x with the mask value applied: -inf where a bool mask is false, plus an additive one.
template <typename T, int kMask> __device__ __forceinline__ float applyMask(float x, uint32_t raw) {
  if constexpr (kMask == 1) {
    return (raw & 0xffu) ? x : -INFINITY;
  } else if constexpr (kMask == 2) {
    const unsigned short b = static_cast<unsigned short>(raw & 0xffffu);
    if constexpr (std::is_same_v<T, __nv_bfloat16>)
      return x + __bfloat162float(__ushort_as_bfloat16(b));
    else
      return x + __half2float(__ushort_as_half(b));
  } else {
    return x;
  }
}

/// A raw mask value as a bias in the log2 domain: log2(e) times an additive value; 0 where a
/// bool mask is true, -inf where it is false.
template <typename T, int kMask> __device__ __forceinline__ float maskBias(uint32_t raw) {
  if constexpr (kMask == 1)
    return (raw & 0xffu) ? 0.f : -INFINITY;
  else
    return applyMask<T, 2>(0.f, raw) * kLog2e;
}

/// Keys of a tile from nw on, in 32 bits: how many lie inside the sequence (at most 2^20, more
/// than a tile), and for a row with query index qi, the last it may see causally (-1: none).
__device__ __forceinline__ int keysInside(const AttnParams &p, int64_t nw) {
  return int(min(p.seqK - nw, int64_t(1) << 20));
}
__device__ __forceinline__ int causalLast(const AttnParams &p, int64_t qi, int64_t nw) {
  return int(max(min(qi + p.causalOffset - nw, int64_t(1) << 20), int64_t(-1)));
}

/// The mask values of one row (RowInfo ri, its mask row from key nw on) for keys nw + c: an
/// unconditional load (no branch an element) of key c clamped into the sequence; rows past the
/// end read row base 0 (their RowInfo's), inside the mask, and their scores are dropped.
template <typename T, int kMask> struct MaskRow {
  int64_t at; ///< the element of key nw
  int inside; ///< keysInside
  __device__ __forceinline__ MaskRow(const AttnParams &p, const RowInfo &ri, int64_t nw)
      : at(ri.maskBase + nw * p.msK), inside(keysInside(p, nw)) {}
  __device__ __forceinline__ uint32_t operator()(const AttnParams &p, int c) const {
    return rawMask<T, kMask>(p, at + int64_t(min(c, inside - 1)) * p.msK);
  }
};

/// This thread's mask values of keys nw + nt * 8 + 2 * tq + {0, 1} of the mask row at element
/// `at`, a pair a register: one load a pair where p.maskPairs and the tile lies inside the
/// sequence (!edge), else two loads clamped into the sequence.
template <typename T, int kMask, int NT>
__device__ __forceinline__ void maskRowValues(const AttnParams &p, uint32_t (&raw)[NT], int64_t at,
                                              int64_t nw, int tq, bool edge) {
  if (p.maskPairs && !edge) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int64_t e = at + nw + nt * 8 + 2 * tq;
      if constexpr (kMask == 1) {
        const uint32_t v =
            *reinterpret_cast<const uint16_t *>(static_cast<const unsigned char *>(p.mask) + e);
        raw[nt] = (v & 0xffu) | (v >> 8) << 16;
      } else {
        raw[nt] = *reinterpret_cast<const uint32_t *>(static_cast<const uint16_t *>(p.mask) + e);
      }
    }
  } else {
    RowInfo ri{};
    ri.maskBase = at;
    const MaskRow<T, kMask> row(p, ri, nw);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int c = nt * 8 + 2 * tq;
      raw[nt] = row(p, c) | row(p, c + 1) << 16;
    }
  }
}

template <typename T, int kMask, int NT>
__device__ __forceinline__ void loadMaskOf(const AttnParams &p, MaskTile<NT> &m, const RowInfo *r0,
                                           const RowInfo *r1, int64_t nw, int tq) {
  if (p.keyMask) { // one row serves both (r0's: when r0 is past the end, so is r1)
    uint32_t raw[NT];
    maskRowValues<T, kMask>(p, raw, r0->maskBase, nw, tq, nw + NT * 8 > p.seqK);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) m.raw[nt][0] = m.raw[nt][1] = raw[nt];
    return;
  }
#pragma unroll
  for (int hi = 0; hi < 2; ++hi) {
    uint32_t raw[NT];
    maskRowValues<T, kMask>(p, raw, (hi ? r1 : r0)->maskBase, nw, tq, nw + NT * 8 > p.seqK);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) m.raw[nt][hi] = raw[nt];
  }
}

/// Fills m with the mask values of rows r0 / r1 and keys nw + nt * 8 + 2 * tq + {0, 1}.
template <typename T, int NT>
__device__ __forceinline__ void loadMask(const AttnParams &p, MaskTile<NT> &m, const RowInfo *r0,
                                         const RowInfo *r1, int64_t nw, int tq) {
  if (p.maskKind == 1)
    loadMaskOf<T, 1>(p, m, r0, r1, nw, tq);
  else if (p.maskKind == 2)
    loadMaskOf<T, 2>(p, m, r0, r1, nw, tq);
}

/// The general kernels' scores (see maskScores), for one softcap choice and mask kind (-1: the
/// kind read from p): the uniform choices are made once a tile and the key tests are 32-bit, so
/// that an element costs a load (or a preloaded value: `pre`), its conversion to a bias and an
/// FMA, without a branch (and a select on edge tiles: elsewhere rows past the end hold finite
/// garbage that is never stored, as without a mask).
template <typename T, bool kSoftcap, int kMask, int NT>
__device__ __forceinline__ void generalScores(const AttnParams &p, float (&s)[NT][4],
                                              const RowInfo *r0, const RowInfo *r1, int64_t nw,
                                              int tq, bool edge, const MaskTile<NT> *pre) {
#pragma unroll
  for (int hi = 0; hi < 2; ++hi) {
    const RowInfo &ri = hi ? *r1 : *r0;
    const bool rowInside = ri.qi >= 0;
    // Off an edge tile every key is inside the sequence and causally visible (blockWork).
    const int inside = edge ? keysInside(p, nw) : NT * 8;
    const int last = edge && p.causal ? causalLast(p, ri.qi, nw) : NT * 8;
    const MaskRow < T, kMask<0 ? 2 : kMask> row(p, ri, nw);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = nt * 8 + 2 * tq + e;
        const bool valid = rowInside && c < inside && c <= last;
        float x = s[nt][2 * hi + e];
        if constexpr (kMask > 0) { // no softcap: one FMA with the mask as a log2-domain bias
          const uint32_t raw = pre ? pre->raw[nt][hi] >> (16 * e) : row(p, c);
          x = fmaf(x, p.scale * kLog2e, maskBias<T, kMask>(raw));
        } else {
          x *= p.scale;
          if constexpr (kSoftcap) x = p.softcap * tanhf(x / p.softcap);
          if (p.maskKind != 0) { // kMask -1: the kind tested here
            const uint32_t raw = pre ? pre->raw[nt][hi] >> (16 * e)
                                     : (p.maskKind == 1 ? MaskRow<T, 1>(p, ri, nw)(p, c)
                                                        : MaskRow<T, 2>(p, ri, nw)(p, c));
            x = p.maskKind == 1 ? applyMask<T, 1>(x, raw) : applyMask<T, 2>(x, raw);
          }
          x *= kLog2e;
        }
        s[nt][2 * hi + e] = !edge || valid ? x : -INFINITY;
      }
    }
  }
}

/// Dispatches generalScores: a branch-free specialization per mask kind without softcap (the
/// masks exporters produce); with softcap (rare) one form that tests the kind per element.
template <typename T, int NT>
__device__ __forceinline__ void generalScoresOf(const AttnParams &p, float (&s)[NT][4],
                                                const RowInfo *r0, const RowInfo *r1, int64_t nw,
                                                int tq, bool edge, const MaskTile<NT> *pre) {
  if (p.softcap > 0.f)
    generalScores<T, true, -1>(p, s, r0, r1, nw, tq, edge, pre);
  else if (p.maskKind == 1)
    generalScores<T, false, 1>(p, s, r0, r1, nw, tq, edge, pre);
  else
    generalScores<T, false, 2>(p, s, r0, r1, nw, tq, edge, pre);
}

/// The general kernels' scores under a key mask (p.keyMask: no softcap, one mask row for the
/// block): a thread reads its keys' mask values once for both its rows, a pair a load where
/// possible (maskRowValues), kChunk tiles of 8 keys at a time (the values of a whole 128-key
/// tile, live beside the scores, would spill), and turns each into a log2-domain bias, so that
/// a score costs one FMA (x scale log2(e) + bias); the row and key tests only on edge tiles
/// (elsewhere rows past the end hold finite garbage that is never stored, as without a mask).
template <typename T, int kMask, int NT>
__device__ __forceinline__ void keyMaskScores(const AttnParams &p, float (&s)[NT][4],
                                              const RowInfo *r0, const RowInfo *r1, int64_t nw,
                                              int tq, bool edge) {
  constexpr int kChunk = NT < 4 ? NT : 4;
  static_assert(NT % kChunk == 0, "whole chunks");
  const float scaleLog2 = p.scale * kLog2e;
  const int inside = edge ? keysInside(p, nw) : NT * 8;
  const bool rowInside[2] = {r0->qi >= 0, r1->qi >= 0};
  const int last[2] = {edge && p.causal ? causalLast(p, r0->qi, nw) : NT * 8,
                       edge && p.causal ? causalLast(p, r1->qi, nw) : NT * 8};
#pragma unroll
  for (int n0 = 0; n0 < NT; n0 += kChunk) {
    uint32_t raw[kChunk];
    const int64_t nc = nw + n0 * 8;
    maskRowValues<T, kMask>(p, raw, r0->maskBase, nc, tq, nc + kChunk * 8 > p.seqK);
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      const float bias[2] = {maskBias<T, kMask>(raw[i]), maskBias<T, kMask>(raw[i] >> 16)};
#pragma unroll
      for (int hi = 0; hi < 2; ++hi)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float &x = s[n0 + i][2 * hi + e];
          x = fmaf(x, scaleLog2, bias[e]);
          if (edge) {
            const int c = (n0 + i) * 8 + 2 * tq + e;
            x = rowInside[hi] && c < inside && c <= last[hi] ? x : -INFINITY;
          }
        }
    }
  }
}

/// The score of one (row, key) in the log2 domain after softcap and mask, the mask read here
/// (general kernels where registers are short: maskScores without kLean).
template <typename T>
__device__ __forceinline__ float generalScore(const AttnParams &p, float dot, int64_t maskRow,
                                              int64_t j) {
  float x = dot * p.scale;
  if (p.softcap > 0.f) x = p.softcap * tanhf(x / p.softcap);
  if (p.maskKind == 1)
    x = applyMask<T, 1>(x, rawMask<T, 1>(p, maskRow + j * p.msK));
  else if (p.maskKind == 2)
    x = applyMask<T, 2>(x, rawMask<T, 2>(p, maskRow + j * p.msK));
  return x * kLog2e;
}

/// One warp's scores of 16 rows (mma fragment layout: this thread's rows r0 = g and r1 = g + 8,
/// keys nw + nt * 8 + 2 * tq + {0, 1}), when `edge` or kGeneral, masked to -inf (row past the
/// end, key past seqK, causal) with softcap and the mask. Key masks without a preloaded tile:
/// keyMaskScores. kLean (where registers allow): the branch-free generalScores, the mask read
/// there or taken from `mask`, a MaskTile that loadMask filled for the same rows and keys; else
/// a mask load per element. kGeneral scores end in the log2 domain; the others stay raw when
/// scaleLog2 > 0 (softmaxStep folds the scale into its exponentials: softmaxMult) and are
/// scaled otherwise.
template <typename T, bool kGeneral, int NT, bool kLean = false>
__device__ __forceinline__ void
maskScores(const AttnParams &p, float (&s)[NT][4], const RowInfo *r0, const RowInfo *r1, int64_t nw,
           int tq, bool edge, float scaleLog2, const MaskTile<NT> *mask = nullptr) {
  if constexpr (kGeneral) {
    if (p.keyMask && !mask) {
      if (p.maskKind == 1)
        keyMaskScores<T, 1>(p, s, r0, r1, nw, tq, edge);
      else
        keyMaskScores<T, 2>(p, s, r0, r1, nw, tq, edge);
      return;
    }
  }
  if constexpr (kGeneral && kLean) {
    generalScoresOf<T>(p, s, r0, r1, nw, tq, edge, mask);
  } else if (kGeneral || edge) {
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
/// the exponentials), scores only: new running max of x (over the 4 threads of a row; kept in
/// the log2 domain), the running sum rescaled, S replaced by P = exp2(x - max), and in alpha the
/// factor by which O must be rescaled (rescaleO). The sum stays a per-thread partial until the end.
template <int NT>
__device__ __forceinline__ void softmaxScores(float (&s)[NT][4], float (&rowMax)[2],
                                              float (&rowSum)[2], float mult, float (&alpha)[2]) {
#pragma unroll
  for (int hi = 0; hi < 2; ++hi) {
    float mx = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * hi], s[nt][2 * hi + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    mx = fmaxf(rowMax[hi], mx * mult);
    const float mUse = mx == -INFINITY ? 0.f : mx;
    alpha[hi] = fastExp2(rowMax[hi] - mUse);
    rowMax[hi] = mx;
    float sum = 0.f;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      s[nt][2 * hi] = fastExp2(fmaf(s[nt][2 * hi], mult, -mUse));
      s[nt][2 * hi + 1] = fastExp2(fmaf(s[nt][2 * hi + 1], mult, -mUse));
      sum += s[nt][2 * hi] + s[nt][2 * hi + 1];
    }
    rowSum[hi] = rowSum[hi] * alpha[hi] + sum;
  }
}

/// O rescaled by softmaxScores' factors; only when some row of the warp has a new max (often
/// none, later on).
template <int NO>
__device__ __forceinline__ void rescaleO(float (&o)[NO][4], const float (&alpha)[2]) {
#pragma unroll
  for (int hi = 0; hi < 2; ++hi) {
    if (__any_sync(0xffffffffu, alpha[hi] != 1.f)) {
#pragma unroll
      for (int i = 0; i < NO; ++i) {
        o[i][2 * hi] *= alpha[hi];
        o[i][2 * hi + 1] *= alpha[hi];
      }
    }
  }
}

/// The whole online softmax step: softmaxScores, then rescaleO.
template <int NT, int NO>
__device__ __forceinline__ void softmaxStep(float (&s)[NT][4], float (&o)[NO][4],
                                            float (&rowMax)[2], float (&rowSum)[2], float mult) {
  float alpha[2];
  softmaxScores(s, rowMax, rowSum, mult, alpha);
  rescaleO(o, alpha);
}

/// The row sums of softmaxScores' per-thread partials, over the 4 threads of each row.
__device__ __forceinline__ void quadRowSums(float (&rowSum)[2]) {
#pragma unroll
  for (int hi = 0; hi < 2; ++hi) {
    rowSum[hi] += __shfl_xor_sync(0xffffffffu, rowSum[hi], 1);
    rowSum[hi] += __shfl_xor_sync(0xffffffffu, rowSum[hi], 2);
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

/// a / b and a % b of non-negative a and positive b, in 32 bits when both fit (a 64-bit
/// division is a subroutine of about a hundred instructions; the block's indexing has several).
__device__ __forceinline__ int64_t divMod(int64_t a, int64_t b, int64_t &rem) {
  if (((uint64_t(a) | uint64_t(b)) >> 32) == 0) {
    const uint32_t q = uint32_t(a) / uint32_t(b);
    rem = int64_t(uint32_t(a) - q * uint32_t(b));
    return int64_t(q);
  }
  const int64_t q = a / b;
  rem = a - q * b;
  return q;
}
/// a / b of non-negative a and positive b (divMod's quotient).
__device__ __forceinline__ int64_t quotient(int64_t a, int64_t b) {
  int64_t rem;
  return divMod(a, b, rem);
}

/// The work of one block: m-block, (batch, kv head), split, and the key tiles it visits.
struct BlockWork {
  int64_t m0, b, hk, kbBegin, firstQ;
  int split, nTiles;
};

template <int BM, int BN>
__device__ __forceinline__ BlockWork blockWork(const AttnParams &p, int64_t bid) {
  BlockWork w;
  int64_t mb, split;
  bid = divMod(bid, p.mBlocks, mb);
  const int64_t bkh = divMod(bid, p.splits, split);
  w.split = int(split);
  if (p.causal) mb = p.mBlocks - 1 - mb; // the longest rows first
  w.b = divMod(bkh, p.kvHeads, w.hk);
  w.m0 = mb * BM;
  // The keys this block sees: [0, keyEnd), cut to this split's key blocks.
  int64_t keyEnd = p.seqK;
  const int64_t lastRow = min(w.m0 + BM, p.rowsPerKv) - 1;
  if (p.causal)
    keyEnd = min(keyEnd, max(quotient(lastRow, p.group) + p.causalOffset + 1, int64_t(0)));
  const int64_t nKb = (keyEnd + BN - 1) / BN;
  w.kbBegin = int64_t(w.split) * p.kbPerSplit;
  const int64_t kbEnd = min(nKb, w.kbBegin + p.kbPerSplit);
  w.nTiles = int(max(kbEnd - w.kbBegin, int64_t(0)));
  // Tiles whose last key is at most firstQ + causalOffset (and below seqK) need no mask.
  w.firstQ = quotient(w.m0, p.group);
  return w;
}

/// Fills the block's RowInfo (threads tid of nThreads; by default all threads of the block).
__device__ __forceinline__ void fillRowInfo(const AttnParams &p, RowInfo *rowInfo, int BM,
                                            const BlockWork &w, int tid = int(threadIdx.x),
                                            int nThreads = int(blockDim.x)) {
  for (int r = tid; r < BM; r += nThreads) {
    const int64_t pr = w.m0 + r;
    RowInfo ri{-1, 0, 0, 0};
    if (pr < p.rowsPerKv) {
      int64_t g;
      const int64_t i = divMod(pr, p.group, g), h = w.hk * p.group + g;
      ri.qi = i;
      ri.maskBase = p.mOff + w.b * p.msB + h * p.msH + i * p.msQ;
      ri.yBase = w.b * p.ysB + h * p.ysH + i * p.ysS;
      ri.row = (w.b * p.heads + h) * p.seqQ + i;
    }
    rowInfo[r] = ri;
  }
}

/// The key mask row of block w (p.keyMask) as biases of the unscaled scores, for the keys
/// [kBegin, kEnd) (threads tid of nThreads): bias[j] = m_j / scale for an additive mask value m_j
/// (so that scale (q.k + bias) = scale q.k + m_j), 0 or -inf for a bool one, 0 past seqK (the
/// edge tiles mask those keys).
template <typename T>
__device__ __forceinline__ void fillKeyBias(const AttnParams &p, const BlockWork &w, float *bias,
                                            int64_t kBegin, int64_t kEnd, int tid, int nThreads) {
  const int64_t base = p.mOff + w.b * p.msB + w.hk * p.msH; // msH is 0 where heads share a kv head
  for (int64_t j = kBegin + tid; j < kEnd; j += nThreads) {
    float v = 0.f;
    if (j < p.seqK) {
      if (p.maskKind == 1)
        v = rawMask<T, 1>(p, base + j * p.msK) ? 0.f : -INFINITY;
      else
        v = applyMask<T, 2>(0.f, rawMask<T, 2>(p, base + j * p.msK)) / p.scale;
    }
    bias[j] = v;
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
  int64_t g;
  const int64_t i = divMod(pr, p.group, g), h = w.hk * p.group + g;
  return qg + p.qOff + w.b * p.qsB + h * p.qsH + i * p.qsS;
}

/// Loads `rows` rows of D elements (row ptr(r), valid(r)) into a padded tile with cp.async, by
/// kThreads threads (this one: tid).
template <int D, int LD, int kThreads, int ROWS, typename T, typename RowPtr>
__device__ __forceinline__ void loadTile(T *tile, RowPtr rowPtr, int tid = int(threadIdx.x)) {
  constexpr int kChunks = D / 8; // 16-byte chunks per row
  constexpr int kTotal = ROWS * kChunks, kIters = (kTotal + kThreads - 1) / kThreads;
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int c = tid + it * kThreads;
    if (kTotal % kThreads == 0 || c < kTotal) {
      const int r = c / kChunks, col = c % kChunks;
      bool valid;
      const T *src = rowPtr(r, valid);
      cpAsync16(smemAddr(tile + r * LD + col * 8), valid ? src + col * 8 : src, valid);
    }
  }
}

} // namespace
} // namespace coil::cuda
