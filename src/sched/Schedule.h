/// \file The scheduler: which Loop IR nodes become buffers, and which nodes share a kernel.
///
/// scheduleProgram() decides, in this order:
///  1. Realization. Inputs, constants, reductions, externs and program outputs own buffers. A
///     Pointwise node is computed inline inside every body that reads it (vertical fusion of
///     pointwise chains), unless it is read by an extern, or read by more than one node while
///     its body is not cheap, or its inlined body would grow past a size limit; then it is
///     realized.
///  2. Kernels. Every realized Pointwise or Reduction node starts as a kernel of its own (a
///     reduction: phase 0 folds, phase 1 stores), with the bodies of its inlined producers
///     substituted in.
///  3. Reduction fusion. A later kernel whose only reads of an earlier reduction kernel's
///     results are at that kernel's outer point (its index is a selection of the reader's loop
///     variables) is appended to it as further phases: the loads become accumulator reads, and
///     reduction results read by no one else stop being buffers. Softmax (max, sum of exp,
///     normalize) and layer norm (mean, variance, normalize) become one kernel each. Kernels
///     whose outer iteration space is a small constant are not fused into (it would serialize
///     the work).
///  4. Horizontal fusion. Adjacent independent pointwise kernels with the same iteration space
///     that read a common buffer become one kernel with several stores.
/// Program outputs that are inputs, constants or repeated nodes get a copy kernel each, so every
/// output owns a distinct buffer.
#pragma once

#include "sched/Kernel.h"
#include "support/Expected.h"

#include <string>

namespace coil::sched {

struct ScheduleOptions {
  bool fuseReductions = true;
  bool fuseHorizontal = true;
  /// A Pointwise body longer than this (statements, after inlining) is realized.
  int maxInlineStmts = 400;
};

/// Schedules `p`. Copy nodes for outputs are appended to `p`, which the schedule points to.
Expected<Schedule> scheduleProgram(loop::LoopProgram &p, const ScheduleOptions &o = {});

/// `coil inspect --fusion`: one block per kernel or extern step (its Loop IR nodes, the graph
/// nodes they came from, its iteration space and phases, the GEMM a kernel computes), then the
/// buffers that are realized, then how each GEMM runs (CUTLASS or cuBLASLt, and why).
std::string fusionReport(const Schedule &s);

} // namespace coil::sched
