/// \file Packed packages: `coil pack PKG -o model.coil.zip` writes a package directory as one
/// zip archive with stored (uncompressed) entries; coil_model_load takes the archive too. It is
/// unpacked once, each entry's CRC-32 checked, into a directory of the package cache keyed by the
/// archive's central directory (names, sizes, CRCs), which later loads reuse:
/// $COIL_CACHE_DIR/packages, else $XDG_CACHE_HOME/coil/packages, else ~/.cache/coil/packages
/// (with COIL_CACHE_DIR=off, or no home: $TMPDIR/coil-packages).
#pragma once

#include "support/Expected.h"

#include <string>

namespace coil::runtime {

/// True when `path` is a regular file that starts like a zip archive.
bool isPackageArchive(const std::string &path);

/// The directory holding the unpacked archive `path`; user errors (the archive is not a
/// package: compressed or unsafe entries, a bad CRC, no metadata.json) name the archive.
Expected<std::string> unpackPackageArchive(const std::string &path);

} // namespace coil::runtime
