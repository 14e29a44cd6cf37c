/// \file The decisions of CPU kernel codegen, as data (cf. cuda/CudaPlan.h): which shape of code
/// a fused kernel (sched::Kernel) becomes, how many dims its loops walk as one, where a window
/// kernel's interior needs no clamps, its configs and when a launch runs on threads.
///
/// The planner (CpuPlan.cpp) makes these decisions before anything is printed; the printers
/// (CpuCodegen.cpp) read the plan. Shapes (CpuCodegen.h says what each prints):
///  - kFlat: a pointwise kernel whose every access is the flat index of the outer space or
///    independent of it: one loop over [begin, end);
///  - kPointwiseRows: the other pointwise kernels: row segments of the last `rowDims` outer dims
///    (walked as one: every access moves with them in one proportion), the rest advanced by carry;
///  - kWindowRows: every phase walks a small constant window (pooling): row segments of the last
///    outer dim, each lane walking its window unrolled; with an `interior`, the segment splits
///    into the edges (clamped taps) and [ilo, ihi) (taps without clamps: plain vector loads);
///  - kRows: per outer point, the phases in order, phase i's last `loopDims[i]` inner dims one
///    (simd) loop.
#pragma once

#include "sched/Kernel.h"
#include "support/Expected.h"
#include "support/SymInt.h"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace coil::codegen {

enum class CpuShape : uint8_t { kFlat, kPointwiseRows, kWindowRows, kRows };

struct CpuKernelPlan {
  CpuShape shape = CpuShape::kRows;
  size_t rowDims = 1; ///< kPointwiseRows
  /// kRows, kWindowRows: per phase (0 for a phase without inner dims; a window kernel's phases
  /// with inner dims unroll them instead).
  std::vector<size_t> loopDims;
  /// kWindowRows: the interior, as C bounds over the kernel's names: ilo = max(lo, each of
  /// `lowers`), ihi = min(hi, each of `uppers` + 1).
  bool interior = false;
  std::set<std::string> lowers, uppers;
  /// Per config: outer points (elements, for pointwise and window kernels) per task.
  std::vector<int64_t> blocks;
  /// Work (statements evaluated) per outer point: each phase's inner points times its statements.
  SymInt perPointWork;
  /// A launch of more than one task runs on threads from this much work (kParallelWork or
  /// kParallelWorkSimd).
  int64_t parallelWork = 0;
  friend bool operator==(const CpuKernelPlan &, const CpuKernelPlan &) = default;
};

/// The invariants of a plan that the printers rely on: "" when `plan` holds them for a kernel
/// of `rank` outer dims whose phases have `phaseVars[i]` inner dims, else the first rule
/// broken. At least one config, each of at least one point; a row segment walks 1 to rank - 1
/// dims (the outermost bounds the launcher's blocks); one loop plan per phase (row and window
/// kernels), which walks at most the phase's dims as one loop and at least one of them (row
/// kernels; window kernels unroll theirs); an interior has bounds; the threads threshold is one
/// of the two policies.
std::string verifyCpuKernelPlan(const CpuKernelPlan &plan, size_t rank,
                                const std::vector<size_t> &phaseVars);

namespace plantext {
class Reader;
}

/// The plan of kernel `k` as text (codegen/PlanText.h), which parseCpuKernelPlan reads again to
/// the same plan. Grammar (indentation in levels of two spaces; "..." C text, or the work per
/// point as a size expression):
///   plan   := 'plan' KERNEL 'cpu' ('flat' | 'pointwise-rows' | 'window-rows' | 'rows') NL
///             ('  row-dims' N)?                     # pointwise-rows: rowDims
///             ('  phase' P 'loop-dims' N)*          # rows, window-rows: loopDims, per phase
///             ('  interior' ('none' | ('lower' "BOUND" | 'upper' "BOUND")+))?   # window-rows
///             '  blocks' B+ NL '  threads' N 'per-point' "SIZE"
std::string printCpuKernelPlan(const CpuKernelPlan &plan, const sched::Kernel &k);
/// The plan of kernel `k` at `r` (its lines up to the next plan), verified by
/// verifyCpuKernelPlan (else a user error at the plan's line).
Expected<CpuKernelPlan> parseCpuKernelPlan(plantext::Reader &r, const sched::Kernel &k);

/// Below this much work, a launcher runs its kernel on one thread: a parallel region's fork and
/// join costs microseconds, which tiny kernels cannot win back.
inline constexpr int64_t kParallelWork = int64_t(1) << 15;
/// The same for kernels whose innermost loops are simd loops over about 8 lanes (all but window
/// kernels, whose taps are gathers, and arg reductions): a GELU + batch norm over [4, 32, 8, 8]
/// (3e5 statements, about 12 us on one thread) ran slower on 2 threads than on one (fork and
/// join on the 2-core machine, issue 19).
inline constexpr int64_t kParallelWorkSimd = int64_t(1) << 18;

} // namespace coil::codegen
