/// \file Parses the schedule text that printSchedule (ScheduleText.h) prints, so that the
/// scheduler's output can be read, checked and tested as text (`coil inspect --schedule
/// FILE.sched`).
///
/// Example (softmax over the last dim of x, as `coil inspect --schedule` prints it: one kernel
/// of three phases; `#` starts a comment that runs to the end of the line):
///   symbols N in [1, 64]
///
///   x: f32[N, 8] = input 'x'
///
///   max: f32[N] = reduce max f32 (%x0) over (%r0 < 8)
///     %0 = load f32 x[%x0, %r0]
///     value %0
///   ...                                       # sumexp, softmax: the rest of the program
///   input x = x
///   output y = softmax
///
///   schedule
///   realized [x, softmax]
///
///   kernel k0_max (%x0 < N)
///     phase (%r0 < 8)
///       %0 = load f32 x[%x0, %r0]
///       reduce max f32 value %0
///     phase (%f0 < 8)
///       %0 = load f32 x[%x0, %f0]
///       %1 = accumulator f32 phase 0 slot 0     # the max of this row
///       %2 = sub f32 %0, %1
///       %3 = exp f32 %2
///       reduce sum f32 value %3
///     phase (%f1 < 8)
///       ...
///       %5 = div f32 %4, %3
///       store softmax[%x0, %f1] = %5
///     reads [x]
///     writes [softmax]
///     fused [max, sumexp, softmax]
///
/// Grammar: the Loop IR program of lower/LoopParser.h (`program`; its rules `vars`, `rvars`,
/// `stmt`, `symint`, `REDUCE`, `DTYPE`, `VAL`, `NAME` are used here too), then
///   file      := program 'schedule' realized step* note*
///   realized  := 'realized' nodes                 # the nodes that own a buffer
///   step      := 'extern' IDENT                   # the call of an Extern node
///              | 'kernel' IDENT '(' rvars? ')' phase+ 'reads' nodes 'writes' nodes
///                'fused' nodes
///   phase     := 'phase' '(' rvars? ')' stmt* store* reduction*
///   store     := 'store' IDENT '[' (symint (',' symint)*)? ']' '=' VAL
///   reduction := 'reduce' REDUCE DTYPE 'last'? 'value' VAL ('position' VAL)?
///   nodes     := '[' (IDENT (',' IDENT)*)? ']'
///   note      := 'note' NAME                      # Schedule::gemmNotes, one each
/// A kernel's outer variables, then each phase's inner variables, with their extents; a phase's
/// statements may use both and read the reductions of earlier phases (`accumulator DTYPE phase
/// P slot S`: reduction S of phase P, in order). A reduction's value and position, and a store's
/// value, are statements of its phase. Node lists name nodes of the program, each once; kernel
/// names are distinct, and so are the loop variables of a kernel (outer and inner).
///
/// Not readable: a kernel with a fused GEMM mainloop (Kernel::gemm, made by
/// sched/FuseGemmEpilogue.h for CUDA with CUTLASS) prints a summary line after its header,
/// `gemm NODE = A @ B [m M, n N, k K] DTYPE epilogue NAME` (`^T` after a transposed operand),
/// which holds neither the epilogue visitor tree nor the unfused call; the parser stops there
/// with the error "a kernel with a fused GEMM mainloop cannot be read back".
///
/// Errors are user errors at `file:line:column` that say what was expected. The program is
/// verified as LoopParser.h verifies it; the schedule is verified (ScheduleVerify.h), and a
/// violation is a user error at the line of the step at fault (of `schedule` when the rule is
/// about the whole schedule).
#pragma once

#include "ir/Graph.h"
#include "sched/Kernel.h"
#include "support/Expected.h"

#include <memory>
#include <string>
#include <string_view>

namespace coil::sched {

/// A parsed schedule, its program, and the graph that the program's Input and Constant nodes
/// name (as in lower/LoopParser.h). `schedule.program` is `program.get()`, and
/// `program->graph` is `graph.get()`: both move with the struct.
struct ParsedSchedule {
  std::unique_ptr<Graph> graph;
  std::unique_ptr<loop::LoopProgram> program;
  Schedule schedule;
};

/// Parses `text`; `file` names it in errors.
Expected<ParsedSchedule> parseSchedule(std::string_view text, const std::string &file = "<input>");

} // namespace coil::sched
