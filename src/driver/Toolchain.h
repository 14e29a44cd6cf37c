/// \file The host toolchain: compiles generated C++ sources into a shared object, through a
/// compile cache keyed by a content hash of the sources, the flags and the compiler's identity.
///
/// The cache lives in `$COIL_CACHE_DIR`, else `$XDG_CACHE_HOME/coil`, else `~/.cache/coil`
/// (`COIL_CACHE_DIR=off` disables it). An entry is written atomically (rename), so concurrent
/// compiles of the same model never see a partial file.
#pragma once

#include "support/Expected.h"

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
  std::vector<std::string> includes; ///< -I directories
  std::vector<std::string> extraFlags;
  int optLevel = 3;
  bool useCache = true;
  bool verbose = false; ///< print the commands
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

/// A 128-bit content hash (two independent 64-bit FNV-1a lanes), as 32 hex digits.
std::string contentHash(const std::string &data);

/// The directory of the compile cache, or "" when disabled.
std::string cacheDirectory();

} // namespace coil
