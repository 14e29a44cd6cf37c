/// \file CUDA kernel codegen: CUDA C++ for one fused kernel (sched::Kernel), with its configs, and
/// a host launcher per config that computes the grid itself.
///
/// Output of generateCudaKernel, for kernel `k` with configs 0..C-1:
///  - `device`: per config i one `extern "C" __global__ void <k>_c<i>_kernel(params...)`,
///    compiled by nvcc into the package's fatbin (src/kernels.cu starts with
///    cudaKernelPrelude() once). Buffer params are `const T *__restrict__` (read) or
///    `T *__restrict__` (written), T the storage type (float, __half -> uint16_t bits, ...),
///    then sizes as `int64_t`, in the order of info.params.
///  - `host`: per config i one launcher
///      extern "C" int32_t <k>_c<i>(const coil_cuda_ctx *ctx, params...)
///    (src/launchers.cpp, compiled by the host compiler into model.so, starting with
///    cudaLauncherPrelude() once) that computes the grid from the sizes (ceil-div, no overflow
///    of the 2^31-1 grid.x limit: it loops or fails cleanly), returns 0 without launching when
///    the iteration space is empty, and launches ctx->functions[functionBase + i] through
///    cuLaunchKernel on ctx->stream. A failing launch returns nonzero with a message naming the
///    kernel and the CUDA error in ctx->error.
///  - `functions`: the __global__ names, config order (metadata.json cuda.functions), then the
///    combining kernel of a split config (`<k>_c<i>_combine_kernel`), which that config's
///    launcher runs after its own function (at functionBase + number of configs).
/// Two launchers may launch functions other than their own: config 0 of a row kernel whose
/// sizes are not known at compile time ("adaptive_" configs) picks the row mapping from the
/// actual sizes and launches that config's function (or calls the split config's launcher);
/// a split config whose reduction is too short to split, or whose partials do not fit in
/// ctx->workspace, launches the block-per-row config's function. A split config keeps phase 0's
/// partial states in ctx->workspace between its two kernels (same stream).
/// The scalar semantics are the Loop IR's (lower/LoopIR.h), exactly as codegen/cpu reproduces
/// them; f16/bf16 compute in f32.
#pragma once

#include "codegen/cuda/CudaPlan.h"
#include "sched/Kernel.h"
#include "support/Expected.h"
#include "wrapper/WrapperIR.h"

#include <string>
#include <vector>

namespace coil::codegen {

struct CudaKernelSource {
  wrapper::KernelInfo info;
  std::string device;
  std::string host;
  std::vector<std::string> functions;
  /// Translation units of their own (host and device code, compiled by nvcc and linked into
  /// model.so), by package-relative file name: the CUTLASS GEMMs of a GEMM kernel
  /// (codegen/cuda/CudaGemm.h). Equal names hold equal text.
  std::vector<std::pair<std::string, std::string>> units;
  CudaKernelPlan plan; ///< the kernel's plan (a GEMM kernel: its unfused epilogue kernel's)
  std::vector<std::string> gemmConfigs; ///< a GEMM kernel: its CUTLASS configs, by name
};

struct CudaCodegenOptions {
  /// Index of config 0's CUfunction in ctx->functions (the kernels before it own the others).
  int32_t functionBase = 0;
  std::string deviceFile = "src/kernels.cu";
};

Expected<CudaKernelSource> generateCudaKernel(const sched::Kernel &k, const loop::LoopProgram &p,
                                              const CudaCodegenOptions &o = {});

/// The round trip of `src`'s plan as text (printCudaKernelPlan): it parses (against kernel `k`
/// of `p`) to the plan and configs `src` holds, which print the same text again. An internal error
/// naming the kernel where it does not (a printer and parser that disagree); driver/Pipeline.cpp
/// checks it after codegen with verifyEach.
Status checkCudaPlanText(const CudaKernelSource &src, const sched::Kernel &k,
                         const loop::LoopProgram &p);

/// Device-side text src/kernels.cu starts with: includes and scalar helpers.
std::string cudaKernelPrelude();
/// Host-side text src/launchers.cpp starts with: <cuda.h>, coil/cuda_abi.h, launch helpers.
std::string cudaLauncherPrelude();

} // namespace coil::codegen
