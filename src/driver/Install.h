/// \file Where coil's own files are when the compiler runs: in the `coil` executable, in a
/// program linked with libcoil_compiler.so, or in Python through the `coil` module.
///
/// An installed coil (`cmake --install`, a wheel) is one prefix: bin/coil, lib/libcoil_*.so,
/// include/coil/*.h. The compiler finds them beside the file that holds its code (found with
/// dladdr: the executable or libcoil_compiler.so), so an installation works wherever it is moved.
#pragma once

#include <string>

namespace coil {

/// `<prefix>/<relative>` for the first prefix, the directory of the file holding the compiler's
/// code or its parent, where that file exists; "" when neither has it.
std::string installedFile(const std::string &relative);

} // namespace coil
