/// \file CUDA extern kernels (libcoil_cuda): the device twins of the GEMM, convolution and
/// attention functions of kernels/cpu/CpuKernels.h.
///
/// `coil_cuda_<op>_<dtype>` takes `const coil_cuda_ctx *` first, then exactly the arguments of
/// `coil_cpu_<op>_<dtype>` with device pointers, and has the same semantics (including the
/// argument checks: a convolution whose geometry breaks the rules fails with a message, as the
/// CPU twin does; an out-of-range GEMM size or stride makes the call a no-op that returns 0). It
/// enqueues its work on ctx->stream and never synchronizes, so it can be captured into a CUDA
/// graph. It returns 0, or nonzero with a NUL-terminated message naming the function (and the
/// CUDA or cuBLAS status) in ctx->error.
///
/// GEMMs run through cuBLASLt with f32 accumulation (f64 for f64); f32 GEMMs compute in true fp32
/// unless the environment variable COIL_CUDA_TF32=1 allows TF32 tensor cores. Convolutions and
/// transposed convolutions of f32, f16 and bf16 with symmetric padding run through cuDNN 9 when
/// it can be loaded at run time (kernels/cuda/CudnnLoader.h: COIL_CUDNN_LIBRARY, the loader
/// path, or pip's nvidia-cudnn wheel; COIL_CUDNN=0 at coil_cuda_blas_create disables it; see
/// kernels/cuda/CudnnConv.h). Otherwise, and when cuDNN fails, convolutions are im2col (into
/// ctx->workspace, chunked over the batch) + cuBLASLt GEMM; a 1x1, stride-1, unpadded
/// convolution is a GEMM directly (cuDNN only with COIL_CUDNN_POINTWISE=1); depthwise
/// convolutions (and any convolution whose column buffer does not fit the workspace) run a
/// direct kernel. Transposed convolutions are GEMM + col2im. Every function uses ctx->workspace
/// (ctx->workspace_bytes long) as its only scratch memory and ctx->blas, which must come from
/// coil_cuda_blas_create.
#pragma once

#include "coil/cuda_abi.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The GEMM state the runtime puts into coil_cuda_ctx::blas: a cuBLASLt handle and a cache of
/// matmul descriptors and chosen algorithms keyed by problem (shape, strides, dtype, pointer
/// alignment, workspace size). Thread-safe. NULL when cuBLASLt cannot be initialized (no
/// driver or device: the externs then fail with a message). The current CUDA context at
/// create time is the one the handle belongs to.
void *coil_cuda_blas_create(void);
/// Destroys the state of coil_cuda_blas_create (NULL is a no-op). No work using it may be
/// pending.
void coil_cuda_blas_destroy(void *blas);

#define COIL_CUDA_DECLARE_GEMM(S)                                                                  \
  int32_t coil_cuda_gemm_##S(const coil_cuda_ctx *ctx, const void *a, const void *b, void *y,      \
                             int64_t batch, int64_t m, int64_t n, int64_t k, int64_t transA,       \
                             int64_t transB, int64_t strideA, int64_t strideB, double alpha);      \
  int32_t coil_cuda_gemm_c_##S(const coil_cuda_ctx *ctx, const void *a, const void *b,             \
                               const void *c, void *y, int64_t batch, int64_t m, int64_t n,        \
                               int64_t k, int64_t transA, int64_t transB, int64_t strideA,         \
                               int64_t strideB, int64_t strideC, double alpha, double beta);
#define COIL_CUDA_DECLARE_CONV(S)                                                                  \
  int32_t coil_cuda_conv_##S(                                                                      \
      const coil_cuda_ctx *ctx, const void *x, const void *w, void *y, int64_t n, int64_t c,       \
      int64_t m, int64_t group, int64_t nd, int64_t in0, int64_t in1, int64_t in2, int64_t k0,     \
      int64_t k1, int64_t k2, int64_t out0, int64_t out1, int64_t out2, int64_t s0, int64_t s1,    \
      int64_t s2, int64_t d0, int64_t d1, int64_t d2, int64_t p0, int64_t p1, int64_t p2);         \
  int32_t coil_cuda_conv_transpose_##S(                                                            \
      const coil_cuda_ctx *ctx, const void *x, const void *w, void *y, int64_t n, int64_t c,       \
      int64_t m, int64_t group, int64_t nd, int64_t in0, int64_t in1, int64_t in2, int64_t k0,     \
      int64_t k1, int64_t k2, int64_t out0, int64_t out1, int64_t out2, int64_t s0, int64_t s1,    \
      int64_t s2, int64_t d0, int64_t d1, int64_t d2, int64_t p0, int64_t p1, int64_t p2);

/// Batched GEMM, as coil_cpu_gemm_* / coil_cpu_gemm_c_* (row-major; batch strides in elements,
/// 0 broadcasts; Y contiguous [batch, m, n]).
COIL_CUDA_DECLARE_GEMM(f64)
COIL_CUDA_DECLARE_GEMM(f32)
COIL_CUDA_DECLARE_GEMM(f16)
COIL_CUDA_DECLARE_GEMM(bf16)
/// Convolution and transposed convolution, as coil_cpu_conv_* / coil_cpu_conv_transpose_*.
COIL_CUDA_DECLARE_CONV(f64)
COIL_CUDA_DECLARE_CONV(f32)
COIL_CUDA_DECLARE_CONV(f16)
COIL_CUDA_DECLARE_CONV(bf16)

/// Channels-last convolution, as coil_cpu_conv_nhwc_* (x [n, in..., c], w [m, k..., c/group],
/// y [n, out..., m]): a 1x1, stride-1, unpadded convolution of one group is one cuBLASLt GEMM
/// over n * positions rows; other 2-D ones run through cuDNN with NHWC descriptors (depthwise
/// included) where it suits; otherwise a direct kernel.
#define COIL_CUDA_DECLARE_CONV_NHWC(S)                                                             \
  int32_t coil_cuda_conv_nhwc_##S(                                                                 \
      const coil_cuda_ctx *ctx, const void *x, const void *w, void *y, int64_t n, int64_t c,       \
      int64_t m, int64_t group, int64_t nd, int64_t in0, int64_t in1, int64_t in2, int64_t k0,     \
      int64_t k1, int64_t k2, int64_t out0, int64_t out1, int64_t out2, int64_t s0, int64_t s1,    \
      int64_t s2, int64_t d0, int64_t d1, int64_t d2, int64_t p0, int64_t p1, int64_t p2);
COIL_CUDA_DECLARE_CONV_NHWC(f64)
COIL_CUDA_DECLARE_CONV_NHWC(f32)
COIL_CUDA_DECLARE_CONV_NHWC(f16)
COIL_CUDA_DECLARE_CONV_NHWC(bf16)
#undef COIL_CUDA_DECLARE_CONV_NHWC

/// Convolution with its bias and an optional clamp fused, as coil_cpu_conv_bias_* (channels-
/// first) and coil_cpu_conv_nhwc_bias_* (channels-last), f16 and bf16: y = act(conv(x, w) +
/// bias[oc]) with the bias added to the f32 accumulator and the clamp (bit 0 of `clamp`: `v < lo
/// ? lo : v`, then bit 1: `v > hi ? hi : v`) applied before the one rounding. Paths: cuDNN's
/// fused convolution with bias and activation (cudnnConvolutionBiasActivationForward on the
/// implicit precomputed GEMM algorithm, kernels/cuda/CudnnConv.h) for no clamp or a ReLU where
/// cuDNN suits the problem (2-D for channels-last; not a channels-first depthwise one); a
/// channels-last 1x1, stride-1, unpadded convolution of one group with no clamp or a ReLU is
/// one cuBLASLt GEMM with its BIAS / RELU_BIAS epilogue (as coil_cuda_gemm_bias_*; ReLU of NaN
/// is cuBLASLt's); everything else runs the direct kernels with the epilogue (correct, not
/// fast). Fails as the CPU functions do (geometry, clamp outside 0..3) and on a null bias.
#define COIL_CUDA_DECLARE_CONV_BIAS(S)                                                             \
  int32_t coil_cuda_conv_bias_##S(                                                                 \
      const coil_cuda_ctx *ctx, const void *x, const void *w, const void *bias, void *y,           \
      int64_t n, int64_t c, int64_t m, int64_t group, int64_t nd, int64_t in0, int64_t in1,        \
      int64_t in2, int64_t k0, int64_t k1, int64_t k2, int64_t out0, int64_t out1, int64_t out2,   \
      int64_t s0, int64_t s1, int64_t s2, int64_t d0, int64_t d1, int64_t d2, int64_t p0,          \
      int64_t p1, int64_t p2, int64_t clamp, double lo, double hi);                                \
  int32_t coil_cuda_conv_nhwc_bias_##S(                                                            \
      const coil_cuda_ctx *ctx, const void *x, const void *w, const void *bias, void *y,           \
      int64_t n, int64_t c, int64_t m, int64_t group, int64_t nd, int64_t in0, int64_t in1,        \
      int64_t in2, int64_t k0, int64_t k1, int64_t k2, int64_t out0, int64_t out1, int64_t out2,   \
      int64_t s0, int64_t s1, int64_t s2, int64_t d0, int64_t d1, int64_t d2, int64_t p0,          \
      int64_t p1, int64_t p2, int64_t clamp, double lo, double hi);
COIL_CUDA_DECLARE_CONV_BIAS(f16)
COIL_CUDA_DECLARE_CONV_BIAS(bf16)
#undef COIL_CUDA_DECLARE_CONV_BIAS

/// What the calling thread's last coil_cuda_conv_* / coil_cuda_conv_transpose_* call ran (for
/// tests and diagnostics): nothing (an empty problem or invalid arguments), a fill with zeros,
/// the direct kernel, im2col / col2im + cuBLASLt GEMM, or cuDNN.
#define COIL_CUDA_CONV_PATH_NONE 0
#define COIL_CUDA_CONV_PATH_ZEROS 1
#define COIL_CUDA_CONV_PATH_DIRECT 2
#define COIL_CUDA_CONV_PATH_GEMM 3
#define COIL_CUDA_CONV_PATH_CUDNN 4
int32_t coil_cuda_conv_last_path(void);
/// The version of the cuDNN the convolutions load (e.g. 91900 for 9.19.0), loading it if not
/// yet done; 0 when none was found.
int64_t coil_cuda_cudnn_version(void);
/// The path cuDNN was loaded from, or why none was (NUL-terminated, valid for the process).
const char *coil_cuda_cudnn_library(void);

/// GEMM with a per-output-column bias and optional ReLU, as coil_cpu_gemm_bias_*: cuBLASLt's
/// CUBLASLT_EPILOGUE_BIAS / RELU_BIAS with the bias (n elements of Y's type) through
/// CUBLASLT_MATMUL_DESC_BIAS_POINTER. Rounding: the bias is added to alpha times the f32 (f64
/// for f64) accumulator, then ReLU, then one rounding to Y's type; f32 computes in true fp32
/// (TF32 only with COIL_CUDA_TF32=1). ReLU of NaN is cuBLASLt's (the CPU kernel keeps NaN).
/// Where cuBLASLt has no algorithm with the epilogue, f32/f64 run the GEMM without it and add
/// the bias (+ ReLU) in a kernel after the product's rounding, f16/bf16 a plain kernel with the
/// same single rounding.
#define COIL_CUDA_DECLARE_GEMM_BIAS(S)                                                             \
  int32_t coil_cuda_gemm_bias_##S(const coil_cuda_ctx *ctx, const void *a, const void *b,          \
                                  const void *bias, void *y, int64_t batch, int64_t m, int64_t n,  \
                                  int64_t k, int64_t transA, int64_t transB, int64_t strideA,      \
                                  int64_t strideB, double alpha, int64_t relu);
COIL_CUDA_DECLARE_GEMM_BIAS(f64)
COIL_CUDA_DECLARE_GEMM_BIAS(f32)
COIL_CUDA_DECLARE_GEMM_BIAS(f16)
COIL_CUDA_DECLARE_GEMM_BIAS(bf16)
#undef COIL_CUDA_DECLARE_GEMM_BIAS

/// Fused attention, as coil_cpu_attention_* (the contract: docs of kernels/cpu/CpuKernels.h;
/// every size and stride in elements; Y[b,h,i,:] = softmax_j(softcap(scale * Q.K_j) + mask,
/// causal: key j hidden from query i when j > i + causalOffset) V; a row with no visible key
/// gives zeros; K/V head h / (heads / kvHeads) serves query head h). Argument checks: sizes,
/// offsets and strides >= 0, heads a multiple of kvHeads, maskKind 0/1/2, every index within
/// int64, headDimV <= 8192 off the tensor-core path; a failed check returns 1 with a message.
/// f16/bf16 with headDim == headDimV in {64, 80, 96, 128} and 16-byte aligned rows (pointer +
/// offset, and every stride of Q, K, V and Y a multiple of 8 elements) run the flash-attention
/// kernel (tensor cores: wgmma on sm_90 for head dims 64 and 128 when ctx->sm_version is 90,
/// mma.sync otherwise; f32 accumulation and softmax, no seqQ x seqK buffer); when its blocks do
/// not fill the GPU (decode shapes), the keys are split across blocks with f32 partials in
/// ctx->workspace (fewer splits when it is too small; none without one). Everything else (f32,
/// other head dims, unaligned rows) runs a plain kernel: correct, not fast. No cuBLAS:
/// ctx->blas may be NULL. The environment variables COIL_CUDA_ATTN_SPLITS (a split count) and
/// COIL_CUDA_ATTN_CONFIG (a kernel configuration, kernels/cuda/CudaAttention.cu) override the
/// heuristics, for tests and tuning.
#define COIL_CUDA_DECLARE_ATTENTION(S)                                                             \
  int32_t coil_cuda_attention_##S(                                                                 \
      const coil_cuda_ctx *ctx, const void *q, const void *k, const void *v, const void *mask,     \
      void *y, int64_t batch, int64_t heads, int64_t kvHeads, int64_t seqQ, int64_t seqK,          \
      int64_t headDim, int64_t headDimV, int64_t qOffset, int64_t qStrideB, int64_t qStrideH,      \
      int64_t qStrideS, int64_t kOffset, int64_t kStrideB, int64_t kStrideH, int64_t kStrideS,     \
      int64_t vOffset, int64_t vStrideB, int64_t vStrideH, int64_t vStrideS, int64_t yStrideB,     \
      int64_t yStrideH, int64_t yStrideS, int64_t maskKind, int64_t maskOffset,                    \
      int64_t maskStrideB, int64_t maskStrideH, int64_t maskStrideQ, int64_t maskStrideK,          \
      int64_t causal, int64_t causalOffset, double scale, double softcap);
COIL_CUDA_DECLARE_ATTENTION(f32)
COIL_CUDA_DECLARE_ATTENTION(f16)
COIL_CUDA_DECLARE_ATTENTION(bf16)
#undef COIL_CUDA_DECLARE_ATTENTION

/// What the calling thread's last coil_cuda_attention_* call ran (for tests and diagnostics):
/// nothing (an empty problem or invalid arguments), the plain kernel, the flash kernel, or the
/// flash kernel with split keys and the combine kernel.
#define COIL_CUDA_ATTN_PATH_NONE 0
#define COIL_CUDA_ATTN_PATH_PLAIN 1
#define COIL_CUDA_ATTN_PATH_FLASH 2
#define COIL_CUDA_ATTN_PATH_SPLIT 3
int32_t coil_cuda_attention_last_path(void);
/// 1 when the calling thread's last coil_cuda_attention_* call ran the wgmma (sm_90a) kernel.
int32_t coil_cuda_attention_last_wgmma(void);

#undef COIL_CUDA_DECLARE_CONV
#undef COIL_CUDA_DECLARE_GEMM

#ifdef __cplusplus
} // extern "C"
#endif
