/// \file The debug printer's runtime half: acts on the DebugPrint lines of a package's wrapper
/// (include/coil/debug_abi.h) as COIL_DEBUG_PRINTER, COIL_DEBUG_KERNELS and COIL_DEBUG_DIR say.
///
/// The environment is read when a model loads (not per run): `COIL_DEBUG_PRINTER` is 0/off,
/// 1/save, 2/print or 3/names (case-insensitive); `COIL_DEBUG_KERNELS` a comma-separated list of
/// launch names (metadata.json "launches"; an extern function's name selects all its launches),
/// case-insensitive, that restricts every mode; `COIL_DEBUG_DIR` the directory of save mode
/// (default "coil-debug", created). A bad mode or an unknown launch name fails the load with the
/// list of valid values. Output goes to stderr:
///  - save: each tensor argument before and after its launch as
///    `<COIL_DEBUG_DIR>/<before|after>_<launch>_<arg>.npy` (and the model inputs as
///    `input_<name>.npy`); bf16 is stored as its uint16 bit patterns (numpy has no bfloat16);
///  - print: the model inputs first, then per launch and argument: name, dtype, shape, strides,
///    device, numel, min, max, mean, NaN and Inf counts, and the values when numel <= 64; sizes
///    as int64 and scalars as f64 (never an integer format);
///  - names: `[before_launch: <launch>]` / `[after_launch: <launch>]` only, flushed at once.
/// Device memory (CUDA packages) is read through a DeviceReader that the CUDA runtime registers:
/// it synchronizes the run's stream (coil_cuda_ctx::stream) and copies to the host.
#pragma once

#include "support/Expected.h"

#include <coil/coil.h>
#include <coil/debug.h>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace coil::runtime {

enum class DebugMode : uint8_t { Off, Save, Print, Names };

/// A launch of metadata.json "launches".
struct LaunchSig {
  std::string name;
  std::string kind;     ///< "kernel", "extern" (or "other")
  std::string function; ///< the kernel or extern function it calls
};

/// The "launches" of metadata.json (empty when the package has none); user errors name the
/// malformed field.
Expected<std::vector<LaunchSig>> parseLaunches(std::string_view metadataText);

/// How the printer reads device memory: functions of the CUDA driver API, supplied by the CUDA
/// runtime (libcoil_cuda, which loads the driver) through setDebugDeviceReader. Before reading a
/// launch's device tensors the printer synchronizes the run's stream (coil_cuda_ctx::stream of
/// the launch's device_ctx), then copies each to the host. Return values are CUresult (0:
/// CUDA_SUCCESS).
struct DeviceReader {
  int (*streamSynchronize)(void *stream) = nullptr;                   ///< cuStreamSynchronize
  int (*memcpyDtoH)(void *dst, uint64_t src, size_t bytes) = nullptr; ///< cuMemcpyDtoH
  int (*errorName)(int result, const char **name) = nullptr;          ///< cuGetErrorName (optional)
};
void setDebugDeviceReader(DeviceReader reader);
/// coil_debug_read_value (include/coil/debug.h): `bytes` bytes of a TENSOR value into `dst`,
/// device memory through the registered reader after synchronizing the launch's stream.
/// User errors for a bad value, runtime errors for a missing reader or a driver failure.
Status readDebugValue(const coil_debug_launch &launch, const coil_debug_value &value, void *dst,
                      size_t bytes);

struct DebugConfig {
  DebugMode mode = DebugMode::Off;
  std::vector<uint8_t> enabled; ///< per launch
  std::string dir;              ///< save mode
};

/// The configuration from these variable values (nullptr: unset). User errors for a bad mode,
/// an unknown launch name (the message lists the valid ones) or an unusable directory.
Expected<DebugConfig> debugConfig(const char *printer, const char *kernels, const char *dir,
                                  const std::vector<LaunchSig> &launches, const std::string &model);

class DebugPrinter {
public:
  /// The printer the environment asks for, or nullptr when it is off.
  static Expected<std::unique_ptr<DebugPrinter>>
  fromEnvironment(const std::vector<LaunchSig> &launches, const std::string &model);

  DebugPrinter(DebugConfig config, std::vector<LaunchSig> launches);

  DebugMode mode() const { return config_.mode; }
  const coil_debug_hooks *hooks() const { return &hooks_; }

  /// Before a run: print mode prints the model inputs, save mode saves them. `onDevice`: the
  /// data is device memory (read through the DeviceReader with `deviceCtx`'s stream).
  Status reportInputs(const std::vector<std::string> &names, const coil_tensor *inputs, int64_t n,
                      bool onDevice, void *deviceCtx);

private:
  static int32_t reportHook(void *ctx, const coil_debug_launch *launch);
  int32_t report(const coil_debug_launch &launch);

  DebugConfig config_;
  std::vector<LaunchSig> launches_;
  coil_debug_hooks hooks_{};
  std::mutex mu_;
  bool bf16Noted_ = false;
};

} // namespace coil::runtime
