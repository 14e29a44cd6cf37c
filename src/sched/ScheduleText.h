/// \file The text of a schedule (`coil inspect --schedule`), which sched/ScheduleParser.h reads
/// back: its Loop IR program exactly as printLoopProgram prints it (lower/LoopIR.h), then a
/// `schedule` section: the realized nodes, each step in order (an extern call, or a kernel with
/// its outer point, its phases (inner point, body statements, stores, reductions) and its
/// reads, writes and fused nodes), and the GEMM notes of sched/FuseGemmEpilogue.h. The grammar
/// and an example are in ScheduleParser.h.
///
/// print -> parse -> print is byte-identical for every schedule without a fused GEMM mainloop
/// (Kernel::gemm, CUDA with CUTLASS only): such a kernel prints a one-line summary of its GEMM,
/// which the parser refuses.
#pragma once

#include "sched/Kernel.h"

#include <string>

namespace coil::sched {

/// The text of `s` and of its program (`*s.program`); deterministic.
std::string printSchedule(const Schedule &s);

} // namespace coil::sched
