/// \file Convolutions through cuDNN (CudnnConv.cu), used by CudaConv.cu when cuDNN is loadable
/// (kernels/cuda/CudnnLoader.h) and the problem suits it; otherwise, and on any cuDNN failure,
/// CudaConv.cu's own im2col / direct paths run.
///
/// A convolution runs through cuDNN when: the dtype is f32, f16 or bf16; the padding is
/// symmetric (coil passes begin pads and output sizes, so: every pad >= 0 and the output size is
/// the one cuDNN derives from the pad on both sides); every size fits cuDNN's int dimensions
/// with fewer than 2^31 elements per tensor; it is not depthwise (one input channel per group:
/// CudaConv.cu's direct kernel). Tensors are NCHW (NCDHW for 3-D; 1-D runs as 2-D with H = 1).
/// f32 runs with CUDNN_FMA_MATH (true fp32) unless COIL_CUDA_TF32=1 allows TF32, as the GEMMs;
/// f16 and bf16 with tensor-op math, accumulating in f32.
///
/// The algorithm is cuDNN's heuristic choice (cudnnGet*Algorithm_v7, no benchmarking, so it is
/// safe inside CUDA-graph capture): for f16/bf16 the first tensor-op algorithm whose workspace
/// fits ctx->workspace, else the first one that fits (never a pseudo-half or converting one); it is
/// chosen once per problem (geometry, dtype, workspace size, pointer alignments) and cached with
/// the descriptors.
///
/// A forward convolution with a bias (DnnConv::bias, the conv_bias twins) runs as
/// cudnnConvolutionBiasActivationForward, y = act(conv(x, w) + bias[channel]) with act the
/// identity or ReLU (NaN propagated), on CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: the
/// algorithm cuDNN runs that call as one fused kernel, whose epilogue adds the bias to the f32
/// accumulator and applies the activation before the one rounding to f16/bf16 (tensor-op math
/// first, then default math). Where that algorithm is unavailable or its workspace does not fit,
/// cuDNN is not used for the call (coil's kernels apply the epilogue before their rounding);
/// never the unfused algorithms, which would round the convolution before adding the bias. cuDNN handles come from a pool of the state (one per concurrent call), each
/// set to the call's stream. COIL_CUDNN_DEBUG=1 prints to stderr, once per problem, the algorithm
/// chosen or why cuDNN is not used.
#pragma once

#include "coil/cuda_abi.h"
#include "kernels/cuda/CudaKernelsImpl.h"

#include <cstdint>

namespace coil::cuda {

/// The cuDNN state of one GEMM state (ctx->blas): handle pool, plan cache. Created cheaply
/// (cuDNN itself is loaded and its handles created on first use). Pointwise convolutions (1x1,
/// stride 1, no padding: one batched GEMM without im2col) stay on cuBLASLt unless the
/// environment variable COIL_CUDNN_POINTWISE=1 sends them to cuDNN too.
struct DnnState;
DnnState *dnnStateCreate(bool tf32);
/// Destroys the state (nullptr is a no-op): its handles and descriptors. No work using it may
/// be pending.
void dnnStateDestroy(DnnState *st);
/// The cuDNN state of ctx->blas; nullptr when cuDNN is disabled (COIL_CUDNN=0) or there is no
/// GEMM state (CudaGemm.cu).
DnnState *dnnStateOf(const coil_cuda_ctx *ctx);

/// One convolution (transpose false) or transposed convolution, with CudaConv.cu's geometry:
/// the spatial dims right-aligned to 3 (unused leading dims of size 1, stride 1, pad 0), p the
/// begin pads.
struct DnnConv {
  bool transpose = false;
  /// Channels-last forward convolution (2-D only): x [n, in1, in2, c], w [m, k1, k2, c/group],
  /// y [n, out1, out2, m] (coil_cuda_conv_nhwc_*); depthwise problems are taken too.
  bool nhwc = false;
  Elem t = Elem::F32;
  int64_t n = 0, c = 0, m = 0, group = 1;
  int64_t in[3], k[3], out[3], s[3], d[3], p[3];
  const void *x = nullptr, *w = nullptr;
  void *y = nullptr;
  /// Forward convolutions only: a bias of m elements of the convolution's type, added (and
  /// ReLU applied when `relu`) by cuDNN's fused call (see above); nullptr for none.
  const void *bias = nullptr;
  bool relu = false;
};

/// Whether ctx's cuDNN state also takes pointwise convolutions (COIL_CUDNN_POINTWISE=1).
bool dnnPointwise(const coil_cuda_ctx *ctx);

/// Whether the convolution suits cuDNN (dtype, symmetric padding, sizes); does not load cuDNN.
bool dnnSuits(const DnnConv &c);

/// Runs the convolution through cuDNN on ctx->stream. Returns 0 when enqueued; -1 when cuDNN
/// did not run it (unavailable, unsuitable, no algorithm, or a cuDNN error: the caller runs its
/// own path, which overwrites y); or 1 with a message in ctx->error when using cuDNN
/// invalidated a CUDA-graph capture of the stream (the runtime then runs the model eagerly).
int32_t dnnConv(const coil_cuda_ctx *ctx, const char *fn, const DnnConv &c);

} // namespace coil::cuda
