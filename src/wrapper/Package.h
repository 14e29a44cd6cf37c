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
///
/// Integrity (format version 2): metadata.json ends with an "integrity" member that records the
/// SHA-256 of the rest of metadata.json (its "body": the text before `,\n  "integrity": `,
/// closed by `\n}\n`), of weights.bin, model.so, src/wrapper.py and (CUDA) the fatbin, and the
/// model ABI version. model.so holds the body's SHA-256 too (the string
/// `coil-metadata-sha256:<hex>` in its data, emitted into wrapper.cpp), so a metadata.json and
/// a model.so of different packages do not pass as one even when both are intact. The runtime
/// checks all of it before dlopen and before any weight is read (docs/PACKAGE.md).
#pragma once

#include "support/Expected.h"
#include "support/Version.h"
#include "wrapper/WrapperIR.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace coil::wrapper {

constexpr int32_t kPackageFormatVersion = 2;
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
  std::string coilVersion = kCoilVersion;
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
  /// Higher levels model.so's kernels also have a copy for, which CPUs of that level run
  /// (informational: "cpu_clones").
  std::vector<std::string> cpuClones;
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
/// Writes metadata.json (its body, without the integrity record), weights.bin and src/ (the
/// wrapper in C++, with the body's SHA-256 marker, and in Python, the JSON and DOT exports) into
/// `dir` (created if missing). The driver adds the kernel sources, builds model.so from
/// src/wrapper.cpp as written, then calls sealPackage.
Status writePackage(const std::string &dir, const WrapperProgram &p,
                    const std::vector<ConstantBlob> &constants, const PackageOptions &options);

/// The text model.so carries to name its metadata.json: "coil-metadata-sha256:" then the
/// SHA-256 of metadata.json's body.
constexpr const char *kMetadataMarker = "coil-metadata-sha256:";
/// A C++ definition that puts kMetadataMarker + `bodySha256` into the object's data (appended
/// to wrapper.cpp by writePackage).
std::string metadataMarkerSource(const std::string &bodySha256);
/// The text that separates metadata.json's body from its integrity record.
constexpr const char *kIntegritySeparator = ",\n  \"integrity\": ";
/// The package files the integrity record covers, relative to the package: weights.bin,
/// model.so, src/wrapper.py and, for CUDA packages, the fatbin.
std::vector<std::string> sealedFiles(const PackageOptions &options);
/// Appends the integrity record to `dir`/metadata.json (which must hold a body only): the
/// SHA-256 of the body and of each of `files`, and the model ABI version. metadata.json is
/// replaced atomically. Runtime errors for I/O; an internal error when metadata.json is
/// already sealed.
Status sealPackage(const std::string &dir, const std::vector<std::string> &files);

} // namespace coil::wrapper
