/// \file Which extern functions have a CUDA implementation (kernels/cuda/CudaKernels.h).
///
/// Lowering names externs after the CPU library (`coil_cpu_<op>_<dtype>`). When compiling for
/// CUDA, the driver replaces each name listed here by its device twin `coil_cuda_<op>_<dtype>`,
/// which takes `const coil_cuda_ctx *` first, then exactly the CPU function's arguments (with
/// device pointers), and returns 0 or a nonzero status with a message in ctx->error. Every other
/// extern runs on the host: the wrapper copies its inputs to the host, calls the CPU function,
/// and copies its outputs back (a "host fallback", which also disables CUDA-graph capture).
#pragma once

#include <string_view>

namespace coil::kernels {

/// CPU extern names that have a CUDA twin.
inline constexpr std::string_view kCudaExterns[] = {
    "coil_cpu_gemm_f64",           "coil_cpu_gemm_f32",
    "coil_cpu_gemm_f16",           "coil_cpu_gemm_bf16",
    "coil_cpu_gemm_c_f64",         "coil_cpu_gemm_c_f32",
    "coil_cpu_gemm_c_f16",         "coil_cpu_gemm_c_bf16",
    "coil_cpu_conv_f64",           "coil_cpu_conv_f32",
    "coil_cpu_conv_f16",           "coil_cpu_conv_bf16",
    "coil_cpu_conv_transpose_f64", "coil_cpu_conv_transpose_f32",
    "coil_cpu_conv_transpose_f16", "coil_cpu_conv_transpose_bf16",
    "coil_cpu_gemm_bias_f64",      "coil_cpu_gemm_bias_f32",
    "coil_cpu_gemm_bias_f16",      "coil_cpu_gemm_bias_bf16",
    "coil_cpu_conv_nhwc_f64",      "coil_cpu_conv_nhwc_f32",
    "coil_cpu_conv_nhwc_f16",      "coil_cpu_conv_nhwc_bf16",
    "coil_cpu_attention_f32",      "coil_cpu_attention_f16",
    "coil_cpu_attention_bf16",
};

inline bool hasCudaExtern(std::string_view cpuName) {
  for (std::string_view n : kCudaExterns)
    if (n == cpuName) return true;
  return false;
}

} // namespace coil::kernels
