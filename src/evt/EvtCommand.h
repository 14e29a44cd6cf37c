/// \file `coil evt`: parse an epilogue, validate it for an architecture, emit CUTLASS code.
#pragma once

#include "support/Expected.h"

namespace coil::evt {

/// Usage line for `coil help`.
extern const char *kEvtUsage;

/// Runs `coil evt FILE ...` (argv[1] is "evt"). Code goes to stdout or -o; notes to stderr.
Status runEvtCommand(int argc, char **argv);

} // namespace coil::evt
