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
//
// The kernels are in CudaAttentionCommon.cuh (shared device code), CudaAttentionMma.cuh,
// CudaAttentionWgmma.cuh and CudaAttentionPlain.cuh (split-KV combine, plain kernel), included
// here so that kernels and host side are one translation unit; this file is the host side.
#include "kernels/cuda/CudaAttentionCommon.cuh"
#include "kernels/cuda/CudaAttentionMma.cuh"
#include "kernels/cuda/CudaAttentionPlain.cuh"
#include "kernels/cuda/CudaAttentionWgmma.cuh"
#include "kernels/cuda/CudaAttentionWs.cuh"
#include "kernels/cuda/CudaKernels.h"
#include "kernels/cuda/CudaKernelsImpl.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cudaTypedefs.h>
#include <initializer_list>
#include <iterator>
#include <type_traits>

namespace coil::cuda {
namespace {

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

/// Raises a kernel's dynamic shared-memory limit to `smem` (the most any launch of it takes)
/// once per device (`occ`: the kernel's own cache); its resident blocks per SM at that size.
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
/// wgmma 'e' two warpgroups (BM 128), 'f' one (BM 64); warp-specialized with TMA 'g' (64-key
/// tiles), 'h' (128-key tiles at head dim 64) and 'i' (64-key tiles, ping-pong warpgroups), and
/// 'j', 'k', 'l' the same on a persistent grid; 'm' and 'n' as 'g' and 'h' with one consumer
/// warpgroup (BM 64, two blocks an SM), 'o' and 'p' those on a persistent grid (the default:
/// dispatchConfig).
char envConfig() {
  const char *s = std::getenv("COIL_CUDA_ATTN_CONFIG");
  return s && s[0] >= 'a' && s[0] <= 'p' && !s[1] ? s[0] : 0;
}
/// COIL_CUDA_ATTN_KEY_BIAS=0 turns off key masks as accumulator biases (the warp-specialized
/// kernel then reads them as it scores), for tests and experiments.
bool envKeyBias() {
  const char *s = std::getenv("COIL_CUDA_ATTN_KEY_BIAS");
  return !(s && s[0] == '0' && !s[1]);
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
/// dynamic shared memory; its arguments: `lead`, then the parameters) with the split count
/// chosen here, then the combine kernel.
template <typename T, int D, typename Kernel, typename... Lead>
int32_t launchAttn(const coil_cuda_ctx *ctx, const char *fn, AttnParams p, Kernel kernel,
                   const char *name, int BM, int BN, int threads, size_t smem, size_t smemMax,
                   std::atomic<int> (&occ)[64], bool persistent, const Lead &...lead) {
  cudaStream_t stream = static_cast<cudaStream_t>(ctx->stream);
  cudaError_t err;
  const int perSm = prepareKernel(kernel, smemMax, ctx->device_ordinal, threads, occ, err);
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
  // A persistent grid (as many blocks as fit at once, each looping over the work) lets a
  // block's loads for its next work overlap the end of its current work.
  const unsigned grid =
      unsigned(std::min<int64_t>(p.totalBlocks, persistent ? capacity : int64_t(1) << 30));
  kernel<<<grid, threads, smem, stream>>>(lead..., p);
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
  return launchAttn<T, D>(
      ctx, fn, p, flashAttnKernel<T, D, kRowWarps, kKeyWarps, kMTiles, BN, kGeneral>,
      "flashAttnKernel", Cfg::BM, BN, Cfg::kThreads, Cfg::kSmem, Cfg::kSmem, occ, false);
}

/// Whether the library holds sm_90a code for `kernel` (a build without 90a has an empty body).
template <typename Kernel> bool hasSm90a(Kernel kernel, std::atomic<int> &cache) {
  if (cache.load(std::memory_order_relaxed) < 0) {
    cudaFuncAttributes attr{};
    const bool ok = cudaFuncGetAttributes(&attr, kernel) == cudaSuccess && attr.binaryVersion == 90;
    cache.store(ok ? 1 : 0, std::memory_order_relaxed);
  }
  return cache.load(std::memory_order_relaxed) == 1;
}

/// Launches the wgmma kernel, or returns -1 when the library holds no sm_90a code for it.
template <typename T, int D, int kWG, int BN, int kStages, bool kGeneral>
int32_t launchWgmma(const coil_cuda_ctx *ctx, const char *fn, const AttnParams &p) {
  using Cfg = WgmmaCfg<D, kWG, BN, kStages>;
  static std::atomic<int> occ[64];
  static std::atomic<int> sm90a{-1};
  const auto kernel = flashAttnWgmmaKernel<T, D, kWG, BN, kStages, kGeneral>;
  if (!hasSm90a(kernel, sm90a)) return -1;
  const int32_t r = launchAttn<T, D>(ctx, fn, p, kernel, "flashAttnWgmmaKernel", Cfg::BM, BN,
                                     Cfg::kThreads, Cfg::kSmem, Cfg::kSmem, occ, false);
  lastWgmma = r == 0;
  return r;
}

/// The driver's cuTensorMapEncodeTiled, through the runtime (the library links no libcuda);
/// null when the driver has none.
PFN_cuTensorMapEncodeTiled_v12000 tensorMapEncoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void *f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return encode;
}

/// The TMA map of K or V as [batch, kvHeads, seqK, d] (strides in elements) whose box is BN
/// rows of 64 elements, 128-byte swizzled (the layout of loadTileSw); rows past seqK read as
/// zeros. False when the driver refuses it.
template <typename T>
bool kvTensorMap(CUtensorMap &map, const void *base, int64_t off, const AttnParams &p, int64_t sB,
                 int64_t sH, int64_t sS, int BN) {
  const auto encode = tensorMapEncoder();
  if (!encode) return false;
  const cuuint64_t dims[4] = {cuuint64_t(p.d), cuuint64_t(p.seqK), cuuint64_t(p.kvHeads),
                              cuuint64_t(p.batch)};
  const cuuint64_t strides[3] = {cuuint64_t(sS) * 2, cuuint64_t(sH) * 2, cuuint64_t(sB) * 2};
  const cuuint32_t box[4] = {64, cuuint32_t(BN), 1, 1};
  const cuuint32_t elementStrides[4] = {1, 1, 1, 1};
  const CUtensorMapDataType type = std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                             : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  void *start = const_cast<T *>(static_cast<const T *>(base) + off);
  return encode(&map, type, 4, start, dims, strides, box, elementStrides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/// Launches the warp-specialized TMA kernel, or returns -1 when the library holds no sm_90a
/// code for it, the sizes pass the TMA coordinates (int32) or the driver refuses the maps.
template <typename T, int D, int BN, int kStages, bool kGeneral, bool kPingPong, int kGroups = 2>
int32_t launchWs(const coil_cuda_ctx *ctx, const char *fn, const AttnParams &p, bool persistent) {
  using Cfg = WsCfg<D, BN, kStages, kGroups>;
  static std::atomic<int> occ[64];
  static std::atomic<int> sm90a{-1};
  const auto kernel = flashAttnWsKernel<T, D, BN, kStages, kGeneral, kPingPong, kGroups>;
  if (!hasSm90a(kernel, sm90a)) return -1;
  if (p.seqK + BN > INT32_MAX || p.kvHeads > INT32_MAX || p.batch > INT32_MAX) return -1;
  if (p.keyBias && (kGeneral || (p.seqK + BN - 1) / BN * BN > Cfg::kBiasKeys)) return -1;
  CUtensorMap tmK, tmV;
  if (!kvTensorMap<T>(tmK, p.k, p.kOff, p, p.ksB, p.ksH, p.ksS, BN) ||
      !kvTensorMap<T>(tmV, p.v, p.vOff, p, p.vsB, p.vsH, p.vsS, BN))
    return -1;
  // Every launch may take the key biases' shared memory (the occupancy counts them).
  const size_t smem = Cfg::kSmem + (p.keyBias ? Cfg::kBiasSmem : 0);
  const int32_t r =
      launchAttn<T, D>(ctx, fn, p, kernel, "flashAttnWsKernel", Cfg::BM, BN, Cfg::kThreads, smem,
                       Cfg::kSmem + Cfg::kBiasSmem, occ, persistent, tmK, tmV);
  lastWgmma = r == 0;
  return r;
}

/// A variant of the warp-specialized kernel: 128-key tiles at head dim 64 (`wide`; 64 at 128),
/// ping-pong warpgroups, one consumer warpgroup (two blocks an SM), a persistent grid.
struct WsChoice {
  bool wide, pingPong, oneGroup, persistent;
};
/// COIL_CUDA_ATTN_CONFIG 'g' to 'p': g, h, i (64-key, 128-key, ping-pong), j, k, l (the same,
/// persistent), m, n (64- and 128-key with one consumer warpgroup), o, p (those, persistent).
constexpr WsChoice kWsChoices[] = {{false, false, false, false}, {true, false, false, false},
                                   {false, true, false, false},  {false, false, false, true},
                                   {true, false, false, true},   {false, true, false, true},
                                   {false, false, true, false},  {true, false, true, false},
                                   {false, false, true, true},   {true, false, true, true}};

/// Launches the warp-specialized kernel that `c` describes (-1: see launchWs).
template <typename T, int D, bool kGeneral>
int32_t launchWsChoice(const coil_cuda_ctx *ctx, const char *fn, const AttnParams &p, WsChoice c) {
  constexpr int kWideBN = D == 64 ? 128 : 64; // 128-key tiles at head dim 128: registers
  if (c.oneGroup)
    return c.wide ? launchWs<T, D, kWideBN, 2, kGeneral, false, 1>(ctx, fn, p, c.persistent)
                  : launchWs<T, D, 64, 2, kGeneral, false, 1>(ctx, fn, p, c.persistent);
  if (c.pingPong) return launchWs<T, D, 64, 2, kGeneral, true>(ctx, fn, p, c.persistent);
  return c.wide ? launchWs<T, D, kWideBN, 2, kGeneral, false>(ctx, fn, p, c.persistent)
                : launchWs<T, D, 64, 2, kGeneral, false>(ctx, fn, p, c.persistent);
}

template <typename T, int D, bool kGeneral>
int32_t dispatchConfig(const coil_cuda_ctx *ctx, const char *fn, const AttnParams &p) {
  // Decode-like (at most 16 packed rows): one row of 4 warps on different keys.
  if (p.rowsPerKv <= 16) return launchFlash<T, D, 1, 4, 1, 64, kGeneral>(ctx, fn, p);
  const char cfg = envConfig();
  // sm_90, head dims 64 and 128: warpgroup MMA, by default the warp-specialized TMA kernel.
  // Measured with bench/attention_bench.py --variants (bench/RESULTS.md, session 17; H100,
  // ms): without a mask, one consumer warpgroup (two blocks an SM) and 64-key tiles at head
  // dim 128 (prefill 2048 keys: 0.597 against 0.624 for two ping-pong warpgroups; causal 0.380
  // against 0.404); at head dim 64 one warpgroup on a persistent grid, whose blocks load their
  // next Q rows while they work, with 128-key tiles over more than 256 keys (BERT's 512 keys:
  // 0.030 against 0.032 for two warpgroups, 0.054 for mma.sync; 4096 keys: 0.705 against
  // 0.804) and 64-key tiles over fewer (ViT's 197 keys: 0.026 against 0.027). Under a key
  // mask (of at most WsCfg::kBiasKeys keys, 2944 to 8192), the same kernels with the mask as
  // accumulator biases (session 18: BERT's shape 0.037, against 0.054 in the masked kernel and
  // 0.168 before); under other masks the masked kernel.
  if constexpr (D % 64 == 0) {
    if (ctx->sm_version == 90 && (cfg == 0 || (cfg >= 'g' && cfg <= 'p'))) {
      const WsChoice c = cfg != 0 ? kWsChoices[cfg - 'g']
                                  : WsChoice{D == 64 && p.seqK > 256, false, true, D == 64};
      int32_t r = -1;
      if constexpr (kGeneral) {
        // A key mask as the S accumulators' initial values, in the kernel without mask code.
        if (p.keyMask && p.scale > 0.f && envKeyBias()) {
          AttnParams pb = p;
          pb.keyBias = 1;
          r = launchWsChoice<T, D, false>(ctx, fn, pb, c);
        }
        // Else the masked kernel; by default 128-key tiles only under a key mask (the 128-key
        // form spills: under a mask row per query it takes 3x the time of 64-key tiles, under a
        // key mask of 4096 keys 0.8x).
        if (r < 0)
          r = launchWsChoice<T, D, true>(
              ctx, fn, p,
              {c.wide && (cfg != 0 || p.keyMask), c.pingPong, c.oneGroup, c.persistent});
      } else {
        r = launchWsChoice<T, D, false>(ctx, fn, p, c);
      }
      if (r >= 0) return r;
    }
    // The wgmma kernel: where the TMA kernel cannot run (no TMA map for these strides), or
    // chosen. Head dim 64 runs one warpgroup per block (two were slower at every size
    // measured: bench/attention_bench.py, problems "bert D64", "vit D64", "long D64").
    if (ctx->sm_version == 90 && cfg != 'a' && cfg != 'b' && cfg != 'c' && cfg != 'd') {
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
  // A key mask: one mask row for every row of a block (blocks are per batch and kv head).
  p.keyMask =
      maskKind != 0 && p.softcap == 0.f && maskStrideQ == 0 && (maskStrideH == 0 || p.group == 1);
  const int64_t maskElem = maskKind == 1 ? 1 : int64_t(sizeof(T));
  p.maskPairs = maskKind != 0 && maskStrideK == 1 &&
                reinterpret_cast<uintptr_t>(mask) % uintptr_t(2 * maskElem) == 0 &&
                maskOffset % 2 == 0 && maskStrideB % 2 == 0 && maskStrideH % 2 == 0 &&
                maskStrideQ % 2 == 0;
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
