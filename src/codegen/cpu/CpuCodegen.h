/// \file CPU kernel codegen: C++ source for one fused kernel (sched::Kernel), with its configs
/// and one launcher per config.
///
/// The generated file starts with cpuKernelPrelude() once, then every kernel's text. A kernel
/// `k` becomes a static body function `k_body(begin, end, params...)` that runs the outer
/// points [begin, end) of the kernel's flattened iteration space, and, per config i, a launcher
///   extern "C" void k_c<i>(params...)
/// whose params follow info.params: buffers as `const T *` (read) or `T *` (written), T the C
/// storage type (uint16_t for f16/bf16, uint8_t for bool), then sizes as `int64_t`. The launcher
/// computes the iteration space from the sizes, returns early when it is empty, and runs blocks
/// of `block` outer points (or elements) under `#pragma omp parallel for`.
///
/// Two shapes of code:
///  - pointwise kernels (one phase, no inner loops, no reductions): blocks of `block` elements of
///    the flattened outer space, walked as row segments; the last outer dim is the
///    `#pragma omp simd` loop, with the other indices advanced by carry (no div/mod per element);
///  - other kernels: blocks of `block` outer points; per outer point the phases run in order, each
///    a loop nest whose innermost loop is `#pragma omp simd` (with `reduction` clauses) where
///    that is legal: stores move with the loop variable, no ArgMax/ArgMin (scalar loop).
/// In the innermost loop, affine offsets are hoisted (`o + x * stride`). f16/bf16 compute in
/// float; f32 sums accumulate in float (per SIMD lane, which is pairwise-like), or double when
/// `sumF32InDouble`.
#pragma once

#include "codegen/cpu/CpuPlan.h"
#include "sched/Kernel.h"
#include "support/Expected.h"
#include "wrapper/WrapperIR.h"

#include <string>

namespace coil::codegen {

struct CpuKernelSource {
  wrapper::KernelInfo info;
  std::string code;
  CpuKernelPlan plan;
};

struct CpuCodegenOptions {
  /// Configs of pointwise kernels: elements of the flattened iteration space per task.
  std::vector<int64_t> pointwiseBlocks = {4096, 32768};
  /// Configs of kernels with inner loops (reductions, multi-phase): outer points per task.
  std::vector<int64_t> rowBlocks = {8, 1};
  /// Accumulate f32 Sum reductions in double (slower, more accurate on very long sums).
  bool sumF32InDouble = false;
  /// Package-relative file the kernel's source goes into.
  std::string sourceFile = "src/kernels.cpp";
};

/// The C++ text of kernel `k` of program `p`. Internal errors for malformed kernels (a load of a
/// node that is not in `reads`, index arity mismatches, ...), naming the kernel and the rule.
Expected<CpuKernelSource> generateCpuKernel(const sched::Kernel &k, const loop::LoopProgram &p,
                                            const CpuCodegenOptions &o = {});

/// The round trip of `src`'s plan as text (printCpuKernelPlan): it parses (against kernel `k`) to
/// the plan `src` holds, which prints the same text again.
/// An internal error naming the kernel where it does not; driver/Pipeline.cpp checks it after
/// codegen with verifyEach.
Status checkCpuPlanText(const CpuKernelSource &src, const sched::Kernel &k);

/// Common text every kernel file starts with: includes and scalar helpers.
std::string cpuKernelPrelude();

/// C storage type of a dtype ("float", "uint16_t" for f16/bf16, "uint8_t" for bool, ...).
const char *cpuStorageType(DType t);

} // namespace coil::codegen
