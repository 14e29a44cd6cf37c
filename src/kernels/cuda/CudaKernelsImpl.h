/// \file Private helpers shared by the CUDA extern kernels (CudaGemm.cu, CudaConv.cu): error
/// reporting, element types, workspace carving and the internal cuBLASLt GEMM entry point.
/// Compiled by nvcc as C++17.
#pragma once

#include "coil/cuda_abi.h"

#include <cstddef>
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace coil::cuda {

/// Element types of the extern kernels.
enum class Elem { F64, F32, F16, BF16 };

inline size_t elemSize(Elem t) {
  return t == Elem::F64 ? 8 : t == Elem::F32 ? 4 : 2;
}

template <typename T> struct ElemOf;
template <> struct ElemOf<double> {
  static constexpr Elem kElem = Elem::F64;
  using Acc = double;
};
template <> struct ElemOf<float> {
  static constexpr Elem kElem = Elem::F32;
  using Acc = float;
};
template <> struct ElemOf<__half> {
  static constexpr Elem kElem = Elem::F16;
  using Acc = float;
};
template <> struct ElemOf<__nv_bfloat16> {
  static constexpr Elem kElem = Elem::BF16;
  using Acc = float;
};

template <typename A, typename T> __device__ __forceinline__ A toAcc(T v) {
  return A(v);
}
template <> __device__ __forceinline__ float toAcc<float, __half>(__half v) {
  return __half2float(v);
}
template <> __device__ __forceinline__ float toAcc<float, __nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <typename T, typename A> __device__ __forceinline__ T fromAcc(A v) {
  return T(v);
}
template <> __device__ __forceinline__ __half fromAcc<__half, float>(float v) {
  return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 fromAcc<__nv_bfloat16, float>(float v) {
  return __float2bfloat16_rn(v);
}

/// Writes "<fn>: <message>" into ctx->error (truncated to fit) and returns 1.
int32_t fail(const coil_cuda_ctx *ctx, const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/// 0 when `e` is cudaSuccess, else fail() with the CUDA error name and string after `what`.
int32_t check(const coil_cuda_ctx *ctx, const char *fn, const char *what, cudaError_t e);
/// check() of cudaGetLastError() after a kernel launch.
int32_t checkLaunch(const coil_cuda_ctx *ctx, const char *fn, const char *kernel);

/// Blocks of `threads` threads covering `total` items with a grid-stride loop.
inline unsigned gridFor(int64_t total, unsigned threads) {
  int64_t blocks = (total + threads - 1) / threads;
  if (blocks > (int64_t(1) << 20)) blocks = int64_t(1) << 20;
  return unsigned(blocks < 1 ? 1 : blocks);
}

/// A device scratch region.
struct Scratch {
  void *ptr = nullptr;
  size_t bytes = 0;
};

/// One cuBLASLt call: for b in [0, batch): Y_b = alpha * op(A_b) op(B_b) + beta * Y_b (beta is
/// used only when `accumulate`; otherwise Y is overwritten), row-major, A_b = a + b*sa,
/// B_b = b + b*sb, Y_b = y + b*sy (elements), op(A) m x k, op(B) k x n, Y_b m x n with row
/// stride n. Sizes must be valid and k > 0, m, n, batch > 0. Uses `ws` as cuBLASLt's workspace.
/// Falls back to a plain CUDA kernel when cuBLASLt has no algorithm for the problem.
struct GemmCall {
  Elem t = Elem::F32;
  const void *a = nullptr, *b = nullptr;
  void *y = nullptr;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  int64_t sa = 0, sb = 0, sy = 0;
  double alpha = 1, beta = 0;
  bool accumulate = false;
  Scratch ws;
};
int32_t gemmLt(const coil_cuda_ctx *ctx, const char *fn, const GemmCall &g);

/// The epilogue of a GEMM: none (bias null), or Y = act(alpha * op(A) op(B) + bias[j]) with a
/// per-output-column bias vector of n elements of Y's type, act = ReLU when `relu`. cuBLASLt
/// (CUBLASLT_EPILOGUE_BIAS / RELU_BIAS) adds the bias to the f32 (f64) accumulator scaled by
/// alpha and rounds once to Y's type; the plain kernel does the same. (Where cuBLASLt has no
/// algorithm with the epilogue, f32/f64 add the bias after the product's rounding.)
struct GemmEpilogue {
  const void *bias = nullptr;
  bool relu = false;
};
/// gemmLt with an epilogue (requires !g.accumulate when the bias is set; Y contiguous).
int32_t gemmLtEpilogue(const coil_cuda_ctx *ctx, const char *fn, const GemmCall &g,
                       const GemmEpilogue &epi);

/// The workspace of ctx, 256-aligned.
inline Scratch workspaceOf(const coil_cuda_ctx *ctx) {
  Scratch s;
  s.ptr = ctx->workspace;
  s.bytes = ctx->workspace ? ctx->workspace_bytes : 0;
  return s;
}

/// Bytes rounded down to a multiple of 256.
inline size_t align256Down(size_t v) {
  return v & ~size_t(255);
}

} // namespace coil::cuda
