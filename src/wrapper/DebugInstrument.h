/// \file The debug printer's Wrapper IR pass: a DebugPrint line before and after every launch.
///
/// A *launch* is a KernelCall, ExternKernelOut or ExternKernelAlloc line. Each launch gets a
/// unique name: the kernel's name or the extern function's name, with `_<k>` appended (k the
/// occurrence, from 0, in line order) when several launches share that name. The names are the
/// ones COIL_DEBUG_KERNELS filters on, `coil compile` and `coil inspect --kernels` print, and
/// metadata.json lists under "launches" (in the order of the launch ids the C++ wrapper passes).
///
/// insertDebugPrints() puts before each launch a DebugPrint(Before) and after it a
/// DebugPrint(After) reporting every argument: buffers (named after the kernel's parameter; the
/// positional in<i> / out<i> for externs, whose arguments have no names), sizes and float
/// scalars. The outputs of an ExternKernelAlloc do not exist before the call: its Before line
/// omits them, its After line follows the call's MultiOutput lines and reports them. The lines
/// cost nothing unless the runtime enables the printer (see include/coil/debug_abi.h).
#pragma once

#include "wrapper/WrapperIR.h"

#include <string>
#include <vector>

namespace coil::wrapper {

struct LaunchInfo {
  std::string name; ///< unique among the program's launches
  std::string base; ///< kernel or extern function name (several launches may share it)
  bool isExtern = false;
  size_t line = 0; ///< index of the launch line in p.lines
  /// The buffers the launch writes (kernel params marked written, extern outputs; for a host
  /// fallback, the buffers its host outputs are copied back to).
  std::vector<BufferId> writes;
};

/// The program's launch lines in order, with their unique names.
std::vector<LaunchInfo> launchTable(const WrapperProgram &p);

/// Removes any DebugPrint lines, then inserts the Before/After pair of every launch.
void insertDebugPrints(WrapperProgram &p);

/// The launch names of the program's DebugPrint lines, each once, in line order: the launch id
/// of a DebugPrint line is the index of its name here.
std::vector<std::string> debugLaunchNames(const WrapperProgram &p);

} // namespace coil::wrapper
