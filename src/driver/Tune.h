/// \file Config choice: which of a kernel's configs each KernelCall runs, per size bucket.
///
/// A call's *bucket size* is its kernel's flattened iteration space over the call's sizes (the
/// elements of a pointwise kernel, the rows of a row kernel). Its buckets come from the ranges
/// of the program's size symbols: representative bindings that set every dynamic symbol to
/// 1, 4, 16, ... (clamped to its range, at most kMaxTunedSymbol), each giving one representative
/// bucket size; a bucket ends halfway (geometrically) between two representatives, the last one
/// at the size's maximum. A call whose size is static has one bucket.
///
/// Each bucket's config is picked by measuring every config on the GPU (measureConfigs, device
/// "cuda", `coil compile --tune`), or else by a cost model of the config values codegen/cuda
/// defines, which overrides codegen's own choice (config 0) only for a predicted 2x gain ("block",
/// "ept", "vec" for pointwise kernels; "block", "threads_per_row", "rows_per_block" for row
/// kernels) on an H100/H200-class GPU (132 SMs, 2048 threads per SM). Kernels whose config values
/// the model does not know keep config 0 (codegen's own choice). Adjacent buckets with the same
/// config merge; the last bucket's config becomes the call's default `config`, so a static call
/// prints no compare at all.
#pragma once

#include "codegen/cuda/CudaCodegen.h"
#include "driver/Toolchain.h"
#include "support/Expected.h"
#include "wrapper/Package.h"
#include "wrapper/WrapperIR.h"

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace coil::tune {

/// The largest value a dynamic symbol takes in a representative binding.
inline constexpr int64_t kMaxTunedSymbol = int64_t(1) << 16;

struct Bucket {
  int64_t upTo = 0;     ///< bucket sizes up to this (inclusive) fall into it
  int64_t at = 0;       ///< the representative bucket size
  SymBindings bindings; ///< the program's symbols at the representative
};

/// The bucket size of call `c` (a SymInt over the program's symbols), simplified.
SymInt bucketSize(const wrapper::WrapperProgram &p, const wrapper::KernelCall &c);

/// The buckets of `size` under the ranges of `symbols` (see the file comment); empty when `size`
/// is below 1 at every representative binding.
std::vector<Bucket> sizeBuckets(const SymInt &size, const SymRanges &symbols);

/// The cost model's estimate for running `config` over `outer` points (the bucket size) with
/// `inner` elements per point (row kernels), in arbitrary units; a negative value: the model
/// does not know the config's values.
double estimateCost(const wrapper::KernelConfig &config, int64_t outer, int64_t inner);

/// The heuristic's config for call `c` at `bucket`: config 0 (codegen's choice for the whole
/// size range) unless the lowest estimate is under half of config 0's (ties: the lower index).
int32_t heuristicConfig(const wrapper::WrapperProgram &p, const wrapper::KernelCall &c,
                        const Bucket &bucket);

/// One call with more than one config to choose from.
struct TuneTask {
  size_t line = 0; ///< index into p.lines of the KernelCall
  SymInt size;
  std::vector<Bucket> buckets;
};
std::vector<TuneTask> tuneTasks(const wrapper::WrapperProgram &p);

/// Per task, per bucket, per config: the measured time in microseconds (negative: failed);
/// an empty vector for a bucket: not measured (the heuristic decides it).
using Timings = std::vector<std::vector<std::vector<double>>>;

/// Sets each task's call's choices and default config, from `timings` where measured (the
/// fastest config that ran) and the heuristic elsewhere; returns the record for metadata.json.
wrapper::TuningRecord applyChoices(wrapper::WrapperProgram &p, const std::vector<TuneTask> &tasks,
                                   const Timings *timings);

/// The heuristic for every call of `p` (the compiler's default, no GPU needed).
wrapper::TuningRecord chooseConfigsHeuristic(wrapper::WrapperProgram &p);

/// Measuring on the GPU: what the package directory holds after the fatbin build.
struct MeasureInput {
  std::string packageDir; ///< holds src/kernels.fatbin
  std::string fatbin = "src/kernels.fatbin";
  std::vector<std::string> functions; ///< metadata.json cuda.functions
  std::string launcherSource;         ///< the text of src/launchers.cpp
  std::vector<SourceFile> units;      ///< CUDA units the launchers call (CUTLASS GEMMs)
  ToolchainOptions toolchain;         ///< includes coil's and the CUDA toolkit's headers
  int64_t workspaceBytes = 0;
  double timeoutSeconds = 300;
  /// Progress: ("tune", configs measured, configs to measure), as the worker reports them.
  std::function<void(const std::string &task, int64_t done, int64_t total)> onProgress;
};
struct MeasureResult {
  Timings timings;
  std::string device;  ///< the GPU's name
  bool cached = false; ///< the timings came from the compile cache
};

/// Times every config of every task at each bucket's representative sizes on the GPU (random
/// inputs: floats in [-1, 1), integers 0; 3 warm-up runs, the median of 15, CUDA events; L2 not
/// flushed), in a separate process (`coil tune-worker`, found as $COIL_EXECUTABLE, this process,
/// or `coil` beside it) so that a fault cannot take the compiler down and the compiler's
/// process never initializes CUDA. A successful measurement is kept in the compile cache
/// (Toolchain.h), keyed by the launchers, the fatbin, the jobs and the GPUs `nvidia-smi -L`
/// lists, so that compiling the same model again on the same machine chooses the same configs. An
/// error (no GPU, no libcoil_cuda, a failed launch) means the caller falls back to the heuristic.
Expected<MeasureResult> measureConfigs(const wrapper::WrapperProgram &p,
                                       const std::vector<TuneTask> &tasks, const MeasureInput &in);

/// One launcher argument as the tuning trampoline takes it: a buffer's device pointer, or a
/// size (the launcher's parameter type decides which member is read).
struct TuneArg {
  void *ptr = nullptr;
  int64_t size = 0;
};
/// C++ appended to the package's launchers (src/launchers.cpp) in the measuring build:
///   extern "C" int32_t coil_tune_launch(const coil_cuda_ctx *ctx, int32_t kernel,
///                                       int32_t config, const TuneArg *args)
/// calls launcher <kernel>_c<config> with args in the kernel's param order (-1: no such one).
std::string tuneTrampolineSource(const wrapper::WrapperProgram &p);

/// The request measureConfigs hands the worker: "lib PATH" (the trampoline build), "fatbin
/// PATH", "workspace BYTES", "function NAME" per cuda.functions entry, then per task and bucket
/// "job TASK BUCKET KERNEL NAME CONFIGS ARGS" followed by one line per argument, "arg b DTYPE
/// NUMEL" or "arg s VALUE", at the bucket's representative sizes. Buckets whose buffers exceed
/// 512 MiB are left out (the heuristic decides them).
std::string tuneRequestText(const wrapper::WrapperProgram &p, const std::vector<TuneTask> &tasks,
                            const MeasureInput &in, const std::string &lib);

/// The measuring process: `coil tune-worker REQUEST` (run by measureConfigs, never by users)
/// reads the request measureConfigs wrote, loads libcoil_cuda and the launchers, times every job
/// and writes "D <gpu>", "T <task> <bucket> <config> <us>" and, on failure, "E <message>" lines
/// to `out`. Returns the process's exit status.
int runTuneWorker(const std::string &requestPath, FILE *out);

/// Whether a CUDA GPU appears to be present (/dev/nvidia0, or `nvidia-smi -L` lists one).
bool gpuPresent();

} // namespace coil::tune
