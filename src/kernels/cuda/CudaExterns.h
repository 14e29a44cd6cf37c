/// \file Which extern functions have a CUDA implementation (kernels/cuda/CudaKernels.h).
///
/// Lowering names externs after the CPU library (`coil_cpu_<op>_<dtype>`). When compiling for
/// CUDA, the driver's placement replaces each name listed here by its device twin (by convention
/// `coil_cuda_<op>_<dtype>`) and marks the call wrapper::ExternPlace::kDevice. The twin takes
/// `const coil_cuda_ctx *` first, then exactly the CPU function's arguments (with
/// device pointers), and returns 0 or a nonzero status with a message in ctx->error. Every other
/// extern runs on the host: the wrapper copies its inputs to the host, calls the CPU function,
/// and copies its outputs back (a "host fallback", which also disables CUDA-graph capture).
#pragma once

#include <string_view>

namespace coil::kernels {

/// An extern with a CUDA implementation: the CPU function lowering names, its device twin.
struct CudaTwin {
  std::string_view cpu, cuda;
};
inline constexpr CudaTwin kCudaExterns[] = {
    {"coil_cpu_gemm_f64", "coil_cuda_gemm_f64"},
    {"coil_cpu_gemm_f32", "coil_cuda_gemm_f32"},
    {"coil_cpu_gemm_f16", "coil_cuda_gemm_f16"},
    {"coil_cpu_gemm_bf16", "coil_cuda_gemm_bf16"},
    {"coil_cpu_gemm_c_f64", "coil_cuda_gemm_c_f64"},
    {"coil_cpu_gemm_c_f32", "coil_cuda_gemm_c_f32"},
    {"coil_cpu_gemm_c_f16", "coil_cuda_gemm_c_f16"},
    {"coil_cpu_gemm_c_bf16", "coil_cuda_gemm_c_bf16"},
    {"coil_cpu_conv_f64", "coil_cuda_conv_f64"},
    {"coil_cpu_conv_f32", "coil_cuda_conv_f32"},
    {"coil_cpu_conv_f16", "coil_cuda_conv_f16"},
    {"coil_cpu_conv_bf16", "coil_cuda_conv_bf16"},
    {"coil_cpu_conv_transpose_f64", "coil_cuda_conv_transpose_f64"},
    {"coil_cpu_conv_transpose_f32", "coil_cuda_conv_transpose_f32"},
    {"coil_cpu_conv_transpose_f16", "coil_cuda_conv_transpose_f16"},
    {"coil_cpu_conv_transpose_bf16", "coil_cuda_conv_transpose_bf16"},
    {"coil_cpu_gemm_bias_f64", "coil_cuda_gemm_bias_f64"},
    {"coil_cpu_gemm_bias_f32", "coil_cuda_gemm_bias_f32"},
    {"coil_cpu_gemm_bias_f16", "coil_cuda_gemm_bias_f16"},
    {"coil_cpu_gemm_bias_bf16", "coil_cuda_gemm_bias_bf16"},
    {"coil_cpu_conv_nhwc_f64", "coil_cuda_conv_nhwc_f64"},
    {"coil_cpu_conv_nhwc_f32", "coil_cuda_conv_nhwc_f32"},
    {"coil_cpu_conv_nhwc_f16", "coil_cuda_conv_nhwc_f16"},
    {"coil_cpu_conv_nhwc_bf16", "coil_cuda_conv_nhwc_bf16"},
    {"coil_cpu_attention_f32", "coil_cuda_attention_f32"},
    {"coil_cpu_attention_f16", "coil_cuda_attention_f16"},
    {"coil_cpu_attention_bf16", "coil_cuda_attention_bf16"},
};

/// The device twin of CPU extern `cpuName`, or "" when it has none (it runs on the host).
inline std::string_view cudaTwin(std::string_view cpuName) {
  for (const CudaTwin &t : kCudaExterns)
    if (t.cpu == cpuName) return t.cuda;
  return {};
}

} // namespace coil::kernels
