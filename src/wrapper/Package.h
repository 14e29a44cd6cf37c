/// \file The package format: metadata.json and weights.bin (docs/PACKAGE.md describes it).
///
/// A package is a directory:
///   metadata.json  what a loader needs without model.so: inputs and outputs (names, dtypes,
///                  symbolic shapes as SymInt text), symbol ranges and which input dim binds each
///                  symbol, constants (dtype, shape, byte offset into weights.bin), kernels with
///                  their configs and the configs chosen, the arena size expression, compile
///                  options, coil version, format and model ABI versions;
///   weights.bin    the constants' raw bytes, each at a 64-byte aligned offset (zero padding);
///   model.so       the compiled wrapper and kernels (include/coil/model_abi.h), built by the
///                  driver from src/;
///   src/           wrapper.cpp and the kernel sources.
#pragma once

#include "support/Expected.h"
#include "wrapper/WrapperIR.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace coil::wrapper {

constexpr int32_t kPackageFormatVersion = 1;
constexpr int64_t kWeightAlignment = 64;
/// COIL_MODEL_ABI_VERSION of include/coil/model_abi.h (a test keeps them equal).
constexpr int32_t kModelAbiVersion = 2;

/// A constant's value, independent of graph types: `data` holds `size` bytes, row-major.
struct ConstantBlob {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void *data = nullptr;
  size_t size = 0;
};

/// Where a constant lives in weights.bin.
struct ConstantEntry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t offset = 0;
  int64_t bytes = 0;
};

/// What the runtime needs to run a CUDA package (metadata.json "cuda").
struct CudaPackageInfo {
  std::string fatbin = "src/kernels.fatbin";
  std::vector<std::string> functions; ///< CUfunction names, ctx->functions order
  std::vector<std::string> archs;     ///< e.g. {"sm_80", "sm_90a"}
  /// Some extern runs on the host (the wrapper synchronizes): CUDA graphs cannot capture it.
  bool hostFallback = false;
  int64_t workspaceBytes = 0; ///< device scratch the CUDA externs may use
};

/// How the configs of the kernel calls were chosen (metadata.json "tuning"): per call with a
/// kernel of several configs, per size bucket, the config chosen and the measured times.
struct TuningRecord {
  struct Bucket {
    int64_t upTo = 0; ///< the bucket holds bucket sizes up to this (the last: the size's maximum)
    int64_t at = 0;   ///< the bucket size measured or estimated
    int32_t config = 0;
    std::vector<double> timesUs; ///< per config (negative: failed); empty: not measured
  };
  struct Call {
    std::string kernel;
    std::string bucketSize;
    std::vector<Bucket> buckets;
  };
  std::string method = "heuristic"; ///< "measured" or "heuristic"
  std::string device;               ///< the GPU measured on
  std::string note;                 ///< why tuning did not measure, if it did not
  std::vector<Call> calls;
};

struct PackageOptions {
  std::string coilVersion = "0.1.0";
  std::string device = "cpu";
  std::optional<CudaPackageInfo> cuda; ///< set for device "cuda"
  /// Compile options as given (e.g. {"dynamic", "N=1:64"}), recorded in order.
  std::vector<std::pair<std::string, std::string>> compileOptions;
  std::optional<TuningRecord> tuning;
  /// The CPU instruction set model.so is built for ("x86-64-v2", ...) and, for
  /// --cpu-target native, the build CPU's extensions beyond it; the runtime refuses to load
  /// the package on a CPU without them. Empty: not recorded (no check).
  std::string cpuTarget;
  std::vector<std::string> cpuFeatures;
};

/// Offsets of the constants in weights.bin (64-byte aligned, in order) and its total size.
std::vector<ConstantEntry> layoutWeights(const std::vector<ConstantBlob> &constants,
                                         int64_t *totalBytes = nullptr);
/// Writes weights.bin; runtime error on I/O failure.
Status writeWeights(const std::string &path, const std::vector<ConstantBlob> &constants);
/// The text of metadata.json. `constants` follows p.constants' order.
std::string metadataJson(const WrapperProgram &p, const std::vector<ConstantEntry> &constants,
                         int64_t weightsBytes, const PackageOptions &options);
/// Checks that `constants` matches the program's constant buffers (count, names, dtypes, shapes,
/// byte sizes); an internal error names the first mismatch.
Status checkConstants(const WrapperProgram &p, const std::vector<ConstantBlob> &constants);
/// Writes metadata.json, weights.bin and src/wrapper.cpp into `dir` (created if missing).
/// The driver adds the kernel sources and builds model.so.
Status writePackage(const std::string &dir, const WrapperProgram &p,
                    const std::vector<ConstantBlob> &constants, const PackageOptions &options);

} // namespace coil::wrapper
