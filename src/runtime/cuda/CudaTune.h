/// \file libcoil_cuda's tuning entry points, for `coil compile --tune` (src/driver/Tune.cpp),
/// obtained with dlsym("coil_cuda_tune_table") in a child process of the compiler. A session
/// holds a package's fatbin functions (no weights), a stream, the extern workspace and the
/// coil_cuda_ctx the package's launchers take. No CUDA and no coil/ headers here: the compiler
/// includes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

struct coil_cuda_ctx; // include/coil/cuda_abi.h

namespace coil::runtime::cuda {

inline constexpr uint32_t kTuneTableVersion = 1;

struct TuneDesc {
  const char *package = nullptr; ///< for messages
  const void *fatbin = nullptr;
  size_t fatbinBytes = 0;
  const char *fatbinName = nullptr;
  const char *const *functions = nullptr; ///< metadata.json cuda.functions
  size_t numFunctions = 0;
  size_t workspaceBytes = 0;
};

struct TuneTable {
  uint32_t version = kTuneTableVersion;
  /// Loads the fatbin and its functions; sets *ctx and the GPU's name. Returns a coil_status.
  int32_t (*open)(const TuneDesc *desc, void **session, const coil_cuda_ctx **ctx,
                  std::string *deviceName, std::string *error) = nullptr;
  /// Allocates `bytes` of device memory (kept until freeAll or close) holding a copy of `host`.
  int32_t (*upload)(void *session, const void *host, size_t bytes, void **device,
                    std::string *error) = nullptr;
  /// Calls launch(user) (which enqueues on ctx->stream and returns nonzero on failure) `warmup`
  /// times, then `reps` times each between two events; *medianUs: the median, microseconds.
  int32_t (*time)(void *session, int32_t (*launch)(void *user), void *user, int32_t warmup,
                  int32_t reps, double *medianUs, std::string *error) = nullptr;
  /// Frees the memory of every upload.
  void (*freeAll)(void *session) = nullptr;
  void (*close)(void *session) = nullptr;
};

} // namespace coil::runtime::cuda

extern "C" {
/// Exported by libcoil_cuda.so.
const coil::runtime::cuda::TuneTable *coil_cuda_tune_table(void);
}
