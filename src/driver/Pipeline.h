/// \file The compiler pipeline, one straight line (DESIGN.md §1):
///
///   Graph IR --lower--> Loop IR --schedule--> fused kernels --codegen--> kernel sources
///     --build--> Wrapper IR --plan memory, verify--> C++ wrapper --toolchain--> package
///
/// compileGraph() runs every stage up to the Wrapper IR and keeps each stage's result, so that
/// `coil inspect` can print any of them; writePackage() writes and builds the package.
#pragma once

#include "codegen/cpu/CpuCodegen.h"
#include "codegen/cuda/CudaCodegen.h"
#include "codegen/cuda/CudaGemm.h"
#include "driver/Toolchain.h"
#include "ir/Graph.h"
#include "lower/LoopIR.h"
#include "sched/Kernel.h"
#include "wrapper/Package.h"
#include "wrapper/WrapperIR.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace coil {

struct CompileOptions {
  std::string device = "cpu"; ///< "cpu" or "cuda"
  /// cuda: the GPU architectures the fatbin holds code for.
  std::vector<std::string> cudaArchs = {"sm_80", "sm_90a"};
  /// cuda: how GEMMs with pointwise consumers run. "cutlass": fused with their epilogues into
  /// generated CUTLASS kernels (sched/FuseGemmEpilogue.h; sm_90a code, so the archs must include
  /// sm_90a; other GPUs run each kernel's unfused config; needs the CUTLASS headers);
  /// "cublaslt": through the cuBLASLt extern, the epilogue a kernel of its own;
  /// "auto": cublaslt for now (the generated CUTLASS kernels are opt-in until they have run on a
  /// GPU).
  std::string gemm = "auto";
  /// cuda: how many CUTLASS configs each fused GEMM gets (compiled, and timed when tuning).
  int cutlassConfigs = 4;
  /// cuda: device scratch the extern kernels (GEMM, convolution) may use.
  int64_t cudaWorkspaceBytes = int64_t(64) << 20;
  /// Print the IR after this stage to stderr: "lower", "schedule", "wrapper" (or "" for none).
  std::string printAfter;
  /// Run the verifiers after every stage (always on in tests).
  bool verifyEach = true;
  ToolchainOptions toolchain;
  /// cuda: choose each call's config per size bucket by timing every config on the GPU
  /// (src/driver/Tune.h) instead of by the cost model; where no GPU or no libcoil_cuda is
  /// usable, the cost model's choice stands and PackageResult::tuning says why.
  bool tune = false;
  double tuneTimeoutSeconds = 300;
  /// Called as each stage finishes, with its name and seconds (the CLI prints progress with it):
  /// compileGraph's "fold", "lower", "schedule", "codegen", "wrapper", then writePackage's
  /// "nvcc", "tune" and "build".
  std::function<void(const std::string &stage, double seconds)> onStage;
  /// Called as countable work advances: "tune" (kernel calls measured), "nvcc" and "build"
  /// (translation units compiled, then the link), with items done and the total (done 0
  /// announces the total).
  std::function<void(const std::string &task, int64_t done, int64_t total)> onProgress;
  /// Recorded in metadata.json (e.g. {"dynamic", "N=1:64"}).
  std::vector<std::pair<std::string, std::string>> recordedOptions;
};

/// Every stage's result. The members point into each other: keep the object where it is.
struct Compilation {
  Graph graph;
  loop::LoopProgram loops;
  sched::Schedule schedule;
  std::vector<codegen::CpuKernelSource> kernels;      ///< device "cpu"
  std::vector<codegen::CudaKernelSource> cudaKernels; ///< device "cuda"
  /// cuda: the CUTLASS include directory when GEMM kernels were generated, else "".
  std::string cutlassInclude;
  wrapper::WrapperProgram wrapper;
  /// How the wrapper's calls got their configs (the cost model; tuning revises it).
  wrapper::TuningRecord tuning;
  /// Per wrapper buffer: the Loop IR node whose value it holds (-1: an extern's scratch output).
  std::vector<loop::NodeId> bufferNodes;
  /// Seconds spent in each stage, in order.
  std::vector<std::pair<std::string, double>> timings;
};

Expected<std::unique_ptr<Compilation>> compileGraph(Graph g, const CompileOptions &o);

struct PackageResult {
  std::string dir;
  BuildResult build;
  BuildResult fatbin; ///< cuda: the device code's build
  /// cuda: a line on the config choice ("tuned N calls on GPU in S s", or why tuning fell
  /// back to the cost model, starting "warning: ").
  std::string tuning;
};

/// Writes the package (metadata.json, weights.bin, src/) into `dir` and builds model.so.
Expected<PackageResult> writePackage(const Compilation &c, const std::string &dir,
                                     const CompileOptions &o);

} // namespace coil
