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
///    arguments only in allocating calls and matching outSymbols; a function of the extern
///    table (kernels/Externs.def) is called by the line kind, with the argument kinds and at
///    the place (CUDA twin: device, CPU function: host) the table gives;
///  - memory: host buffers (BufferMemory::kHost) exist only in CUDA programs, as intermediates
///    outside the arena, get storage from HostAllocate or an allocating host extern and are
///    released by HostFree; kernels, device externs, Allocate / Reuse / Reinterpret / Free and
///    DebugPrint take program-memory buffers only; a host extern does not mix host and program
///    buffers; CopyToHost goes from program to host memory, CopyToDevice from host to program
///    memory (an allocating one defines its target), between buffers of equal byte size;
///    Synchronize, HostAllocate, HostFree and the copies occur in CUDA programs only;
///  - MultiOutput names an output of an ExternKernelAlloc; arena offsets only on intermediates
///    that own storage. Comment is the only line carrying text.
Status verifyWrapper(const WrapperProgram &p);

/// After planning: at these symbol values, every planned offset is 64-byte aligned, inside
/// arenaBytes, and no two buffers live at the same time overlap in the arena.
Status verifyArena(const WrapperProgram &p, const SymBindings &bindings);

} // namespace coil::wrapper
