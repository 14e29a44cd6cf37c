/// \file metadata.json of a package, read and checked (format in src/wrapper/Package.h).
#pragma once

#include "support/DType.h"
#include "support/Expected.h"
#include "support/SymInt.h"

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace coil::runtime {

struct TensorSig {
  std::string name;
  DType dtype = DType::F32;
  std::vector<SymInt> dims;
  std::vector<std::string> dimText;
};

struct SymbolSig {
  std::string name;
  int64_t min = 0, max = 0;
};

struct BindingSig {
  std::string symbol;
  int64_t input = 0, dim = 0;
};

struct ConstantSig {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t offset = 0, bytes = 0;
};

/// The "cuda" object of a CUDA package's metadata.json.
struct CudaSig {
  std::string fatbin;                 ///< package-relative path of the kernels' fatbin
  std::vector<std::string> functions; ///< CUfunction names; coil_cuda_ctx::functions order
  std::vector<std::string> archs;     ///< "sm_80", "sm_90a", ...: images in the fatbin
  bool hostFallback = false;          ///< some extern runs on the host (no CUDA graphs)
  int64_t workspaceBytes = 0;         ///< device scratch of the externs per run
};

struct Metadata {
  std::string name, device, library, weights;
  int64_t formatVersion = 0, abiVersion = 0, weightsBytes = 0;
  std::vector<SymbolSig> symbols;
  std::vector<BindingSig> bindings;
  std::vector<TensorSig> inputs, outputs;
  std::vector<ConstantSig> constants;
  std::optional<CudaSig> cuda; ///< present iff device is "cuda"
  /// The CPU instruction set model.so needs ("x86-64-v2", ...; empty in packages of older
  /// coils: not checked) and further extensions (--cpu-target native), as named by
  /// __builtin_cpu_supports.
  std::string cpuTarget;
  std::vector<std::string> cpuFeatures;
};

/// "" when this CPU runs code built for `m`'s cpu_target and cpu_features, else what it lacks
/// ("x86-64-v3 (AVX2, FMA, BMI1/2, ...)", "avx512vnni").
std::string missingCpuFeatures(const Metadata &m);
/// A CPU extension the runtime can check (runtime/CpuCheck.cpp's table).
bool isCpuFeature(const std::string &name);

/// Parses and checks metadata.json (types of every field, dtype names, shapes, ranks up to
/// COIL_MAX_RANK, bindings naming existing input dims, constants inside the weights and
/// 64-byte aligned, for device "cuda" the "cuda" object); user errors name the field.
Expected<Metadata> parseMetadata(std::string_view text);

/// The "integrity" record that ends metadata.json (src/wrapper/Package.h): SHA-256 digests.
struct PackageIntegrity {
  int64_t abiVersion = 0;
  std::string metadata;                                   ///< of metadata.json's body
  std::vector<std::pair<std::string, std::string>> files; ///< package-relative path, digest
  /// The digest recorded for `file`, or nullptr.
  const std::string *digestOf(const std::string &file) const;
};

/// metadata.json split into its body (what parseMetadata reads) and its integrity record.
struct SealedMetadata {
  std::string body;
  PackageIntegrity integrity;
};

/// Splits metadata.json's text at the integrity record and parses the record (the algorithm
/// "sha256", the ABI version, 64-hex digests of the body and of package-relative files). User
/// errors name the field; a text without the record is a package written by an older coil or
/// edited. Nothing is compared here: see checkBody.
Expected<SealedMetadata> splitSealedMetadata(std::string_view text);
/// A user error unless SHA-256(`sealed.body`) is the digest the record holds for it.
Status checkBody(const SealedMetadata &sealed);

} // namespace coil::runtime
