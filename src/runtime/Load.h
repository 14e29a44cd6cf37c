/// \file Package loading short of running the package's code.
#pragma once

#include <coil/coil.h>
#include <string>

namespace coil::runtime {

/// Does everything coil_model_load does before it runs any code of the package (before
/// libcoil_cuda takes the fatbin and before model.so is dlopened): reads metadata.json, checks
/// its integrity record and every file's SHA-256, parses the metadata and its launches, checks
/// model.so's mark of the metadata, maps weights.bin and locates the constants. Returns COIL_OK
/// or the status coil_model_load would return, with its message in `*message`. The metadata
/// fuzz target (test/fuzz) drives it; it never dlopens, so a fuzzed package cannot run code.
coil_status checkPackage(const char *path, std::string *message = nullptr);

} // namespace coil::runtime
