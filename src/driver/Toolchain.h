/// \file The host toolchain: compiles generated C++ sources into a shared object, through a
/// compile cache keyed by a content hash of the sources, the flags and the compiler's identity.
///
/// The cache lives in `$COIL_CACHE_DIR`, else `$XDG_CACHE_HOME/coil`, else `~/.cache/coil`
/// (`COIL_CACHE_DIR=off` disables it). An entry is written atomically (rename), so concurrent
/// compiles of the same model never see a partial file.
#pragma once

#include "support/Expected.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace coil {

struct SourceFile {
  std::string name; ///< relative path, e.g. "src/kernels.cpp"
  std::string text;
};

struct ToolchainOptions {
  std::string cxx;                   ///< compiler; default: $CXX, else "c++"
  std::vector<std::string> includes; ///< -I directories (their headers are hashed for the cache)
  /// -isystem directories of installed toolkits (keyed by path only: hashing every CUDA
  /// header on each compile would cost more than compiling).
  std::vector<std::string> systemIncludes;
  std::vector<std::string> extraFlags;
  /// Flags for the link step only (e.g. -L... -lcuda); part of the cache key.
  std::vector<std::string> linkFlags;
  int optLevel = 3;
  bool useCache = true;
  bool verbose = false; ///< print the commands
  /// The CPU instruction set of the host code (-march): "native", "x86-64-v2", "x86-64-v3",
  /// "x86-64-v4"; "" for the default.
  std::string cpuTarget;
  /// Progress of a build: (task, translation units and link done, total); done 0 first.
  std::function<void(const std::string &task, int64_t done, int64_t total)> onProgress;
};

struct BuildResult {
  bool cacheHit = false;
  std::string key; ///< content hash (hex)
  double seconds = 0;
};

/// Writes `sources` under `dir` (creating subdirectories) and builds `dir/<output>` from those
/// ending in ".cpp" (compiled in parallel, one process per file). A compiler failure is an
/// internal error that quotes the compiler's first lines of output and names the log file.
Expected<BuildResult> buildSharedObject(const std::string &dir,
                                        const std::vector<SourceFile> &sources,
                                        const std::string &output, const ToolchainOptions &opts);

/// The CPU instruction set of a package's host code (`--cpu-target`), as recorded in
/// metadata.json ("cpu_target", "cpu_features") and checked by the runtime at load.
struct CpuTarget {
  std::string level;                 ///< "x86-64-v2", "x86-64-v3" or "x86-64-v4"
  std::vector<std::string> features; ///< native: this CPU's extensions beyond `level`
  std::string march;                 ///< the compiler's -march flag
};
/// "" (the portable default: x86-64-v2; the runtime's extern kernels choose their AVX2 and
/// AVX-512 paths as they run), "native" (this CPU: its level and extensions), or a level.
Expected<CpuTarget> resolveCpuTarget(const std::string &requested);

/// The CUDA toolkit coil compiles device code with: nvcc from $COIL_NVCC, else `nvcc` on PATH,
/// else /usr/local/cuda/bin/nvcc; its include and stub-library directories.
struct CudaToolkit {
  std::string nvcc, includeDir, stubLibDir;
};
/// A user error naming what to install when no toolkit is found.
Expected<CudaToolkit> findCudaToolkit();

/// Compiles the CUDA source `cu` (written under `dir`) into the fatbin `dir/<output>` with
/// device code for every arch in `archs` ("sm_80", "sm_90a", ...), through the same compile
/// cache as buildSharedObject (keyed by nvcc's identity, the flags and the source).
Expected<BuildResult> buildFatbin(const std::string &dir, const SourceFile &cu,
                                  const std::string &output, const std::vector<std::string> &archs,
                                  const ToolchainOptions &opts);

/// A 128-bit content hash (two independent 64-bit FNV-1a lanes), as 32 hex digits.
std::string contentHash(const std::string &data);

/// The directory of the compile cache, or "" when disabled.
std::string cacheDirectory();

} // namespace coil
