/// \file CUDA codegen of a GEMM kernel (sched::Kernel with `gemm`, sched/FuseGemmEpilogue.h):
/// its epilogue visitor tree printed as CUTLASS 3.x sm90 kernels, one per config.
///
/// Output (a CudaKernelSource, like generateCudaKernel's):
///  - `units`: per config one translation unit `src/gemm_<hash>.cu` (CUTLASS headers, the
///    epilogue's visitor types, a TMA warp-specialized GEMM of the config's tile, cluster and
///    schedule, and one entry point `coil_gemm_<hash>` of evt/EvtEmit.h's LibraryEntry form).
///    The hash is of the unit's text, so equal GEMMs (the layers of a model) share one unit;
///  - `host`: per config a launcher
///      extern "C" int32_t <k>_c<i>(const coil_cuda_ctx *ctx, params...)
///    with the params of generateCudaKernel's launchers (buffers, then sizes), which computes m
///    from the sizes and calls the config's entry on ctx->stream with ctx->workspace;
///  - the unfused form as the last config ("cublaslt_unfused"): the GEMM extern's CUDA twin
///    (cuBLASLt) writes the product into ctx->workspace (cuBLASLt gets the rest of it), or, when
///    it does not fit and the stored dtype is the product's, into the output itself, then the
///    kernel's body runs as a plain CUDA kernel `<k>_epilogue` (generateCudaKernel: its device
///    code, `functions` from `functionBase`, and its launchers, which only this config calls).
///    The CUTLASS configs call it on a GPU other than sm_90 (their code is sm_90a's), and when
///    their entry cannot run the problem (CUTLASS refuses the sizes, or an operand is not
///    16-byte aligned: the entry returns 2).
/// CUTLASS configs: 128 x 128 and 128 x 256 cooperative, 64 x 128 ping-pong, 128 x 128 on 2 x 1
/// clusters (the first `maxConfigs`).
#pragma once

#include "codegen/cuda/CudaCodegen.h"

namespace coil::codegen {

struct CudaGemmOptions {
  int maxConfigs = 4;
  int32_t functionBase = 0; ///< of the epilogue kernel's functions (CudaCodegenOptions)
};

Expected<CudaKernelSource> generateCudaGemmKernel(const sched::Kernel &k,
                                                  const loop::LoopProgram &p,
                                                  const CudaGemmOptions &o = {});

} // namespace coil::codegen
