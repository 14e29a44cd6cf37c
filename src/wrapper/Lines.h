/// \file What each Wrapper IR line reads, defines and releases: the one place the passes
/// (memory planning, the verifier) and the backends learn a line's buffers and symbols from.
#pragma once

#include "wrapper/WrapperIR.h"

#include <set>
#include <string>
#include <vector>

namespace coil::wrapper {

struct LineEffects {
  /// Buffers whose storage the line reads or writes (call arguments, view bases, sources).
  std::vector<BufferId> uses;
  /// Buffers that get a pointer at this line (Allocate, Reuse's `to`, Reinterpret, MultiOutput,
  /// the outputs of an ExternKernelAlloc, HostAllocate, an allocating CopyToDevice's `to`).
  std::vector<BufferId> defines;
  /// Buffers whose storage is released (Free, FreeIfNotReused, HostFree) or handed over (Reuse's
  /// `from`).
  std::vector<BufferId> releases;
  /// Symbols the line defines (BindSymbol, ExternKernelAlloc's outSymbols).
  std::vector<std::string> definesSymbols;
  /// SymInt expressions the line evaluates (sizes, offsets), for the symbols they need.
  std::vector<SymInt> exprs;
};

LineEffects lineEffects(const Line &line);

/// Every symbol that occurs in the program: ranges, buffer shapes and offsets, line
/// expressions, bound and defined symbols; sorted.
std::set<std::string> programSymbols(const WrapperProgram &p);

/// For each buffer, the index of the ExternKernelAlloc line that defines it as an output, or -1.
std::vector<int32_t> externAllocDefs(const WrapperProgram &p);

/// For each buffer, whether its storage is a block of the run's allocator taken by the line
/// that defines it (an output of an ExternKernelAlloc in program memory, the `to` of an
/// allocating CopyToDevice), rather than by an Allocate line or the caller: such blocks are
/// freed through the run's allocator, and such outputs are handed to the caller at the end.
std::vector<bool> allocatedAtDefinition(const WrapperProgram &p);

} // namespace coil::wrapper
