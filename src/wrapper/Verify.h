/// \file The Wrapper IR verifier.
#pragma once

#include "support/Expected.h"
#include "wrapper/WrapperIR.h"

namespace coil::wrapper {

/// Checks the program's invariants; an internal error names the line and the rule broken:
///  - buffers: unique C-identifier names, indices consistent with inputs/outputs/constants;
///  - every buffer gets storage (input, constant, output, Allocate, Reuse, Reinterpret,
///    MultiOutput, an ExternKernelAlloc output) exactly once and before any use, is released
///    (Free, FreeIfNotReused, Reuse's from) at most once, only if it owns its storage, and is
///    never used after its storage (or the storage it views) is released;
///  - symbols are bound (BindSymbol on an input dim, ExternKernelAlloc outSymbols) once and
///    before every expression, shape or offset that uses them;
///  - kernel calls: the kernel is defined earlier, the config exists, arguments match the
///    kernel's params in count, kind and dtype, and written params are not inputs or constants;
///  - extern calls: outputs are not inputs or constants, one signature per function, OutSymbol
///    arguments only in allocating calls and matching outSymbols;
///  - MultiOutput names an output of an ExternKernelAlloc; arena offsets only on intermediates
///    that own storage. Comment is the only line carrying text.
Status verifyWrapper(const WrapperProgram &p);

/// After planning: at these symbol values, every planned offset is 64-byte aligned, inside
/// arenaBytes, and no two buffers live at the same time overlap in the arena.
Status verifyArena(const WrapperProgram &p, const SymBindings &bindings);

} // namespace coil::wrapper
