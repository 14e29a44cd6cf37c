/// \file Host fallbacks as explicit Wrapper IR lines.
///
/// In a CUDA program, an extern call placed ExternPlace::kHost (wrapper/PlaceExterns.h) runs a
/// CPU function on host memory. insertHostCopies() rewrites each such call whose operands are in
/// program (device) memory into
///   Synchronize                                  the device has run everything before
///   HostAllocate h, CopyToHost b -> h            per distinct buffer the call reads
///   HostAllocate h                               per output (ExternKernelOut only)
///   the call on the host buffers                 (ExternKernelAlloc: allocates its host outputs)
///   its MultiOutput lines, on the host buffers
///   CopyToDevice h -> b                          per output (allocating the device block of an
///                                                ExternKernelAlloc's output)
///   HostFree h                                   per host buffer
/// The host buffers are new intermediates (BufferMemory::kHost) named `<buffer>_host`, each
/// used by that one call. Runs last (after memory planning, which never sees host buffers, and
/// after insertDebugPrints, so that the DebugPrint lines around the call still report the device
/// buffers: the Before line stays above the Synchronize, the After line below the copies back).
/// Calls already on host buffers are left as they are, so the pass is idempotent; a CPU program
/// is unchanged.
#pragma once

#include "wrapper/WrapperIR.h"

namespace coil::wrapper {

void insertHostCopies(WrapperProgram &p);

} // namespace coil::wrapper
