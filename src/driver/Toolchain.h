/// \file The host toolchain: compiles generated C++ sources into a shared object, through the
/// compile cache (driver/CompileCache.h: where it lives, its size bound, its entries), keyed by
/// the SHA-256 of the sources, the headers they include from the -I directories, the flags, the
/// compiler's identity (its resolved path and `--version`), the CUDA toolkit's cuda.h for
/// system include directories that have one, and coil's version.
#pragma once

#include "driver/CompileCache.h"
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
  /// The optimization level of this file: -1 for the toolchain's optLevel, else the lower of
  /// the two (host glue without loops, like the wrapper, compiles much faster at -O1).
  int optLevel = -1;
  /// The extern "C" functions the file defines. A CPU target with clones (CpuTarget::clones)
  /// compiles such a file once per instruction-set level, each copy's functions renamed, and
  /// makes each name an ifunc that the dynamic loader binds to the best copy this CPU runs.
  std::vector<std::string> exports;
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
  /// CUDA translation units (sources ending in ".cu": host and device code) compile with this
  /// nvcc and these flags (architectures, include directories), each object through the
  /// compile cache on its own, so that units shared by builds compile once.
  std::string nvcc;
  std::vector<std::string> cudaFlags;
  /// Progress of a build: (task, translation units and link done, total); done 0 first.
  std::function<void(const std::string &task, int64_t done, int64_t total)> onProgress;
};

struct BuildResult {
  bool cacheHit = false;
  std::string key; ///< the cache key: SHA-256 (hex)
  double seconds = 0;
  /// A warning for the user (empty: none), e.g. that nvcc crashed and the device code was built
  /// again at a lower NVVM optimization level.
  std::string warning;
};

/// Writes `sources` under `dir` (creating subdirectories) and builds `dir/<output>` from those
/// ending in ".cpp" and ".cu" (compiled in parallel, one process per file, at most as many at a
/// time as the machine has processors). A compiler failure is an internal error that quotes the
/// compiler's first lines of output and names the log file.
Expected<BuildResult> buildSharedObject(const std::string &dir,
                                        const std::vector<SourceFile> &sources,
                                        const std::string &output, const ToolchainOptions &opts);

/// The CPU instruction set of a package's host code (`--cpu-target`), as recorded in
/// metadata.json ("cpu_target", "cpu_features") and checked by the runtime at load.
struct CpuTarget {
  std::string level;                 ///< "x86-64-v2", "x86-64-v3" or "x86-64-v4"
  std::vector<std::string> features; ///< native: this CPU's extensions beyond `level`
  std::string march;                 ///< the compiler's -march flag
  /// Levels above `level` that files with exports (the generated kernels) are compiled for too
  /// (SourceFile::exports): the default target's copy for this CPU's level.
  std::vector<std::string> clones;
};
/// "" (the portable default: x86-64-v2, plus a copy of the generated kernels for this CPU's
/// level, x86-64-v3 or -v4, which CPUs that have it run; the runtime's extern kernels choose
/// their AVX2 and AVX-512 paths as they run), "native" (this CPU: its level and extensions), or
/// a level (that level only).
Expected<CpuTarget> resolveCpuTarget(const std::string &requested);

/// The CUDA toolkit coil compiles device code with: nvcc from $COIL_NVCC, else `nvcc` on PATH,
/// else /usr/local/cuda/bin/nvcc; its include and stub-library directories.
struct CudaToolkit {
  std::string nvcc, includeDir, stubLibDir;
  std::string libDir; ///< holds libcudart_static.a
};
/// A user error naming what to install when no toolkit is found.
Expected<CudaToolkit> findCudaToolkit();

/// Compiles the CUDA source `cu` (written under `dir`) into the fatbin `dir/<output>` with
/// device code for every arch in `archs` ("sm_80", "sm_90a", ...), through the same compile
/// cache as buildSharedObject (keyed by nvcc's identity, the flags and the source).
Expected<BuildResult> buildFatbin(const std::string &dir, const SourceFile &cu,
                                  const std::string &output, const std::vector<std::string> &archs,
                                  const ToolchainOptions &opts);

/// The CUTLASS headers CUDA GEMM kernels compile with: the directory holding
/// cutlass/cutlass.h and cute/, from $COIL_CUTLASS_DIR (that directory or its include/), else
/// the pip package nvidia-cutlass (`cutlass_library/source/include` of the python3 on PATH).
/// A user error naming both ways when neither has them.
Expected<std::string> findCutlassIncludeDir();

/// The host compiler: `cxx`, else $CXX, else "c++".
std::string hostCompiler(const std::string &cxx);
/// Whether that compiler builds CpuTarget::clones: GCC's `#pragma GCC target("arch=...")` and
/// __builtin_cpu_supports of level names (clang 14 knows neither: it builds the base only).
bool buildsLevelCopies(const std::string &cxx);

/// The identity of a compiler for cache keys: its resolved path and its `--version` output.
std::string compilerIdentity(const std::string &compiler);

} // namespace coil
