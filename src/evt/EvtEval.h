/// \file The reference semantics of a compiled epilogue program at one point of its problem.
///
/// evaluateOutputs() computes every live node of a program that passed compileEpilogue
/// (EvtPasses.h), in double, at one point (m, n, l): the accumulator's value there is given,
/// every load node reads through `load`, compute nodes follow evalOp, and a Cast to f16 / bf16
/// rounds its value to that type (ElementCompute f32 otherwise). It returns, per program output
/// in order, the value its store receives (on sm90, D's is the collective's value before the
/// rounding to D's element type, which the caller applies). The compiler's tests compare it
/// with the Loop IR evaluator to check the translation of kernel bodies into epilogues
/// (sched/FuseGemmEpilogue.h); CUTLASS's execution of programs is checked on the GPU by the
/// corpus (test/evt).
#pragma once

#include "evt/EvtPasses.h"

#include <functional>
#include <vector>

namespace coil::evt {

std::vector<double> evaluateOutputs(const Program &p, const VisitorPlan &plan, double accum,
                                    const std::function<double(const Node &)> &load);

} // namespace coil::evt
