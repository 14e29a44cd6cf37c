/// \file coil's version: recorded in packages (metadata.json "coil_version") and part of every
/// compile cache key.
#pragma once

namespace coil {

inline constexpr const char *kCoilVersion = "0.1.0";

} // namespace coil
