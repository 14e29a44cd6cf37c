/// \file The interface between libcoil_runtime and libcoil_cuda: a table of functions that
/// libcoil_runtime obtains with dlsym("coil_cuda_runtime_table") after loading libcoil_cuda.so
/// (src/runtime/CudaHost.cpp), so that the CPU runtime never links a GPU driver. No CUDA types
/// here: both libraries include this header.
///
/// libcoil_cuda does, per model instance: the primary context of device COIL_CUDA_DEVICE
/// (default 0) made current on every calling thread, the package's fatbin loaded with
/// cuModuleLoadData and its functions resolved by name, the weights uploaded once, the externs'
/// GEMM state (coil_cuda_blas_create), a pool of run slots (stream, device arena grown as
/// needed, extern workspace; one slot per concurrent run), device allocation for outputs and
/// data-dependent buffers (stream-ordered), pinned host memory for host-fallback externs, and CUDA
/// graphs: one graph per input-shape signature (plus the device pointers involved), captured on the
/// first run and replayed after.
#pragma once

#include <coil/coil.h>
#include <coil/model_abi.h>
#include <cstddef>
#include <cstdint>
#include <string>

namespace coil::runtime::cuda {

inline constexpr uint32_t kTableVersion = 1;

/// What a model instance is made from (all pointers only valid during `create`).
struct ModelDesc {
  const char *package = nullptr; ///< the package directory, for messages
  const void *fatbin = nullptr;
  size_t fatbinBytes = 0;
  const char *fatbinName = nullptr;       ///< metadata.json cuda.fatbin, for messages
  const char *const *functions = nullptr; ///< cuda.functions
  size_t numFunctions = 0;
  const char *const *archs = nullptr; ///< cuda.archs
  size_t numArchs = 0;
  const void *weights = nullptr; ///< host bytes of weights.bin
  size_t weightsBytes = 0;
  const int64_t *constantOffsets = nullptr; ///< per constant, its offset in weights.bin
  size_t numConstants = 0;
  size_t workspaceBytes = 0; ///< cuda.workspace_bytes
  bool graphs = true; ///< CUDA-graph capture allowed (no host fallback, COIL_CUDA_GRAPHS != 0)
};

/// One run. Inputs were validated by libcoil_runtime.
struct RunRequest {
  coil_model_arena_bytes_fn arenaBytes = nullptr;
  coil_model_run_fn run = nullptr;
  const char *modelName = nullptr;
  int64_t numInputs = 0;
  const coil_tensor *inputs = nullptr;
  const size_t *inputBytes = nullptr; ///< per input, its size in bytes
  int64_t numOutputs = 0;
  /// In: data (caller buffer or NULL) and capacity; out: data, shape and owned (1: host memory
  /// from std::aligned_alloc, 2: device memory to release with `releaseDevice`). dtype and rank
  /// are set by libcoil_runtime.
  coil_output *outputs = nullptr;
  const int64_t *outputRanks = nullptr;
  const size_t *outputElementBytes = nullptr;
  const char *const *outputNames = nullptr;
  /// true: inputs and outputs are host memory (coil_model_run); false: device memory
  /// (coil_model_run_device) and the work goes on `stream`.
  bool hostMemory = true;
  void *stream = nullptr;
  const struct coil_debug_hooks *debug = nullptr; ///< non-null: the debug printer is on
};

struct Table {
  uint32_t version = kTableVersion;
  /// Creates a model instance; returns a coil_status and sets *model, or a message in *error.
  int32_t (*create)(const ModelDesc *desc, void **model, std::string *error) = nullptr;
  void (*destroy)(void *model) = nullptr;
  /// Runs once; returns a coil_status, with a message in *error on failure.
  int32_t (*run)(void *model, const RunRequest *request, std::string *error) = nullptr;
  /// Frees device memory of an output with owned == 2.
  void (*releaseDevice)(void *ptr) = nullptr;
  /// How many graphs were captured and replayed by this model instance (for tests and tools).
  void (*graphStats)(void *model, int64_t *captures, int64_t *replays) = nullptr;
};

} // namespace coil::runtime::cuda

extern "C" {
/// Exported by libcoil_cuda.so.
const coil::runtime::cuda::Table *coil_cuda_runtime_table(void);
}
