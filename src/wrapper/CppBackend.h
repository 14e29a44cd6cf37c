/// \file The C++ wrapper backend: prints a WrapperProgram as wrapper.cpp, the host program of
/// model.so (the ABI is include/coil/model_abi.h).
///
/// An emitter only: every decision (storage, reuse, offsets, configs) is already in the program;
/// the printed code follows the lines in order:
///  - buffers are pointers `b_<name>` of their dtype's C storage type (f16/bf16: uint16_t,
///    bool: uint8_t); inputs and constants point at the caller's data; outputs at the caller's
///    buffer or a block from the run's allocator (set up before their first use); planned
///    intermediates at `arena + arenaOffset`; unplanned ones (sizes known only at run time, or
///    outputs of allocating externs) are allocated through the run's allocator and freed by
///    their Free line (or at the end of the run, or on failure);
///  - symbols are `int64_t s_<name>` (names made into C identifiers, distinct);
///  - a KernelCall calls the launcher of its config, `<kernel>_c<config>(...)`: Buffer params
///    `const T *` (read) or `T *` (written), Size params `int64_t`;
///  - extern functions are declared from their arguments' kinds (`const void *`, `void *`,
///    `int64_t`, `double`, `int64_t *`); allocating ones take `coil_alloc_fn, void *` first and
///    their outputs as `void **`;
///  - MultiOutput `buffer` aliases the `index`-th Output argument of the ExternKernelAlloc line
///    whose first Output argument is `source`.
/// Deterministic: the text depends only on the program.
#pragma once

#include "wrapper/WrapperIR.h"

#include <map>
#include <string>

namespace coil::wrapper {

/// wrapper.cpp for `p` (call after planMemory and verifyWrapper).
std::string emitCppWrapper(const WrapperProgram &p);

/// The C identifier the generated code uses for each symbol of the program.
std::map<std::string, std::string> cppSymbolNames(const WrapperProgram &p);

/// The C storage type of a dtype: "float", "uint16_t" (f16, bf16), "uint8_t" (bool), ...
const char *cppStorageType(DType t);

} // namespace coil::wrapper
