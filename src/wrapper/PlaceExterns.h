/// \file Placement of extern calls: where each one runs, from the extern table.
///
/// placeExterns() looks every ExternKernelOut / ExternKernelAlloc function up in the extern
/// table (kernels/Externs.def; never by its name's spelling). In a CUDA program, a call of the
/// CPU function of an extern that has a CUDA twin for its dtype (and does not allocate) becomes a
/// call of the twin, placed ExternPlace::kDevice; every other call is placed ExternPlace::kHost,
/// a *host fallback* (insertHostCopies, wrapper/HostCopies.h, makes its copies explicit). In a
/// CPU program every call is placed kHost. A function the table does not list is an internal
/// error (lowering names externs from the table).
#pragma once

#include "support/Expected.h"
#include "wrapper/WrapperIR.h"

namespace coil::wrapper {

Status placeExterns(WrapperProgram &p);

} // namespace coil::wrapper
