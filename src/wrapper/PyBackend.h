/// \file The Python wrapper backend: prints a WrapperProgram as wrapper.py, a readable Python
/// twin of wrapper.cpp that runs the model line for line from Python (numpy arrays as buffers,
/// ctypes calls into model.so's kernel launchers and libcoil_runtime's extern functions).
///
/// An emitter only, mirroring the C++ backend (CppBackend.h) line for line:
///  - buffers are numpy arrays `b_<name>` (f16: float16, bf16: uint16 bits, bool: bool);
///    inputs and constants are the caller's arrays; outputs are arrays the run allocates before
///    their first use; planned intermediates are views `rt.view(arena, offset, dtype, shape)`
///    of the run's 64-byte aligned arena; unplanned ones are `rt.empty(dtype, shape)`, outputs
///    of allocating externs `rt.adopt(...)` of what the allocator callback handed out;
///  - symbols are Python ints `s_<name>` (the C++ backend's names), bound from input shapes;
///  - a KernelCall calls the launcher of its config, `lib.<kernel>_c<config>(...)`, with the
///    buffers and sizes only: the launcher computes its grid, Python never does;
///  - extern calls pass pointers, int64s, doubles and, for the symbols an allocating extern
///    defines, int64 cells; allocating externs get `rt.alloc, rt.alloc_ctx` first and their
///    outputs through pointer cells;
///  - DebugPrint calls `rt.debug(when, launch, [(name, value)...])` when `rt.debug` is set
///    (coil.pywrapper sets it from COIL_DEBUG_PRINTER), and does nothing otherwise.
/// The module defines LAUNCHERS and EXTERNS (ctypes signatures), INPUTS, OUTPUTS, CONSTANTS,
/// `arena_bytes(input_shapes)` and `run(rt, inputs, constants) -> list of arrays`;
/// extern statuses are checked in the text: a failure calls `rt.extern_failed(WHO, FUNCTION)`
/// with WHO naming the graph node as wrapper.cpp does ("node 'rs' (Reshape)").
/// CUDA programs (device "cuda") are printed like wrapper.cpp's CUDA flavour: buffers are device
/// memory (`rt.view` of the run's device arena, `rt.empty`/`rt.output` from the run's allocator,
/// `rt.free`), `cu = rt.cuda_ctx(MODEL)` is the run's coil_cuda_ctx, launchers and coil_cuda_*
/// externs take it first and a nonzero status calls `rt.cuda_failed(cu)`, externs without a CUDA
/// twin run on the host (synchronize, copies into the ctx's host memory, the CPU call, copies
/// back), and `rt.set_output(i, buffer, shape, allocated)` hands the outputs over.
/// python/coil/pywrapper.py provides `rt`. Deterministic: the text depends only on the program.
#pragma once

#include "wrapper/WrapperIR.h"

#include <string>

namespace coil::wrapper {

/// Version of the contract between wrapper.py and coil.pywrapper (WRAPPER_ABI in the file).
constexpr int32_t kPyWrapperAbiVersion = 2;

/// wrapper.py for `p` (call after planMemory and verifyWrapper).
std::string emitPyWrapper(const WrapperProgram &p);

} // namespace coil::wrapper
