/// \file The schedule verifier: the invariants sched/Kernel.h states, checked after scheduling
/// and after every schedule rewrite (driver/Pipeline.cpp, with CompileOptions::verifyEach). A
/// violation is coil's fault: an internal error naming the step and the rule broken.
///
/// Checked: inputs, constants, externs (and their MultiOutputs) and program outputs are
/// realized; every other realized node is produced by exactly one step (a kernel's store, or
/// the extern step of its call) before any step reads it; a kernel's reads and writes are
/// sorted, distinct and realized, its bodies load only its reads (a GEMM kernel also its
/// product, which is not realized), store only its writes, with an index per dim, and read
/// only accumulators of earlier phases; outer and phase variables match their ranges; a GEMM
/// kernel reads its operands and its epilogue's inputs.
#pragma once

#include "sched/Kernel.h"
#include "support/Expected.h"

#include <string>

namespace coil::sched {

/// `stage` names the pass that produced `s` ("scheduleProgram", ...) in messages. On a
/// violation, `failedStep` (when given) receives the index of the step at fault, or -1 when the
/// rule broken is about the schedule as a whole (realization, a node no step produces).
Status verifySchedule(const Schedule &s, const std::string &stage, int *failedStep = nullptr);

} // namespace coil::sched
