/// \file libcoil_runtime's side of CUDA packages: loads libcoil_cuda.so (dlopen, RTLD_GLOBAL,
/// so that a model.so resolves its coil_cuda_* externs from it) and forwards model creation and
/// runs to its table (runtime/cuda/CudaRuntime.h). No CUDA headers: the CPU runtime never needs
/// a GPU driver.
///
/// The library is found next to libcoil_runtime.so (dladdr) unless COIL_CUDA_LIBRARY names it.
/// A missing library, a missing driver or no GPU is a COIL_ERROR_PACKAGE with a message.
#pragma once

#include "runtime/Metadata.h"

#include <coil/coil.h>
#include <coil/model_abi.h>
#include <memory>
#include <string>

namespace coil::runtime {

struct CudaStatus {
  coil_status code = COIL_OK;
  std::string message;
};

/// The device half of a loaded CUDA package (module, device weights, slots, graphs).
class CudaModel {
public:
  ~CudaModel();
  /// Loads libcoil_cuda if needed, then the package's fatbin and weights. Call before dlopen-ing
  /// model.so. `weights` are the host bytes of weights.bin.
  static CudaStatus load(const std::string &packageDir, const Metadata &md, const void *weights,
                         size_t weightsBytes, std::unique_ptr<CudaModel> &out);

  /// Runs on validated inputs: host memory (coil_model_run) or device memory on `stream`
  /// (coil_model_run_device). Sets outputs' data, shape and owned (dtype and rank are the
  /// caller's to set).
  CudaStatus run(const Metadata &md, coil_model_arena_bytes_fn arenaBytes, coil_model_run_fn fn,
                 const coil_tensor *inputs, int64_t numInputs, coil_output *outputs,
                 int64_t numOutputs, bool hostMemory, void *stream,
                 const struct coil_debug_hooks *debug);

private:
  CudaModel() = default;
  void *handle_ = nullptr;
};

/// Frees the device memory of an output with owned == 2 (no-op without libcoil_cuda).
void cudaReleaseDeviceOutput(void *ptr);

} // namespace coil::runtime
