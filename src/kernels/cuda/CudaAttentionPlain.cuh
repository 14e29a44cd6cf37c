// Included by CudaAttention.cu only: the split-KV combine kernel (Y from the partials of the
// splits of the flash kernels) and the plain kernel (f32, other head dims, unaligned rows).
#pragma once

#include "kernels/cuda/CudaAttentionCommon.cuh"

namespace coil::cuda {
namespace {

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

} // namespace
} // namespace coil::cuda
