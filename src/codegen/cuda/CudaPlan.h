/// \file The decisions of CUDA kernel codegen, as data: how a fused kernel (sched::Kernel) maps
/// to threads, which of its accesses run as 16-byte vectors and under which alignment tests,
/// and per launch config its block, grid, launch bounds, register-held rows and workspace.
///
/// The planner (CudaPlan.cpp) makes every such decision and records it here; the printers of
/// device code (CudaPointwise.cpp, CudaRows.cpp) and of host launchers (CudaLaunch.cpp) read the
/// plan and decide nothing. Kernel shapes:
///  - pointwise (one phase, no inner vars, no reductions): a 1-D grid-stride loop over the
///    flattened outer space, `block` threads, `ept` elements (or vectors) per thread and grid
///    step. `mapping` says how the body addresses memory: at the flat index (kFlat), in groups
///    along the last dim (kLastDim: broadcasts), loads in groups along another dim (kDim: a
///    transposing bias add), or through index decomposition only (kIndexed). A vector path of
///    `vec` elements per 16-byte access exists when vec > 1; the launcher runs it when
///    `vecAlign` holds (every listed buffer aligned, the last extent a multiple of vec).
///  - rows (everything else): `tpr` threads per outer point (1, a warp, or a block), `rows`
///    outer points per block, rows strided over the grid; each phase strides its flattened inner
///    space over the row's threads, as vectors where `phaseVec` has a plan.
/// Launch: a config's launcher launches ceil(count / perBlock) blocks of `block` threads, where
/// count is the outer points (rows, scalar path) or the vector groups (pointwise vector path).
/// An *adaptive* config 0 (rows, sizes unknown at compile time) applies `adaptive` to the actual
/// sizes and launches the chosen config's function; a *split* config reduces phase 0 of each outer
/// point in `splits` slices (one block each, partial states in ctx->workspace), then a combining
/// kernel folds them and runs the later phases.
#pragma once

#include "lower/LoopIR.h"
#include "sched/Kernel.h"
#include "support/Expected.h"
#include "support/SymInt.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace coil::codegen {

/// A statement of a kernel, by its place (a plan names statements, never addresses, so that it
/// prints and parses): body statement %`index` of phase `phase`, or its store `index`.
struct StmtRef {
  uint32_t phase = 0;
  bool store = false;
  uint32_t index = 0;
  friend auto operator<=>(const StmtRef &, const StmtRef &) = default;
};
inline StmtRef loadRef(size_t phase, size_t index) {
  return StmtRef{uint32_t(phase), false, uint32_t(index)};
}
inline StmtRef storeRef(size_t phase, size_t index) {
  return StmtRef{uint32_t(phase), true, uint32_t(index)};
}

/// Contiguous runs that one loop variable walks with coefficient 1: loaded and stored `width`
/// elements (16 bytes) at a time. A run is keyed by its buffer and the C text of its start
/// offset (a multiple of the width); `access` maps each Load statement and Store that reads or
/// writes a run to its run.
struct VecRuns {
  int64_t width = 1, extent = 0;
  using Key = std::pair<loop::NodeId, std::string>;
  std::map<StmtRef, Key> access;
  /// The runs that loads read, and those that stores write.
  std::set<Key> loads() const { return runs(false); }
  std::set<Key> stores() const { return runs(true); }
  friend bool operator==(const VecRuns &, const VecRuns &) = default;

private:
  std::set<Key> runs(bool store) const {
    std::set<Key> out;
    for (const auto &[ref, key] : access)
      if (ref.store == store) out.insert(key);
    return out;
  }
};

/// Pointwise kernels that read along another outer dim than they write: each thread takes
/// `width` consecutive points of outer dim `dim` (a constant extent, a multiple of the width) at
/// one point of the others, the last dim fastest across threads (the stores stay coalesced); the
/// loads contiguous along `dim` (`loads`, at their first point; vector i is loads[i]) are
/// 16-byte vectors.
struct DimVecs {
  size_t dim = 0;
  int64_t width = 1, extent = 0;
  std::vector<StmtRef> loads;
  friend bool operator==(const DimVecs &, const DimVecs &) = default;
};

enum class PointwiseMapping : uint8_t { kFlat, kLastDim, kDim, kIndexed };

/// Register-held rows and occupancy of a row kernel under one config.
struct RowRegisters {
  bool rowVec = false; ///< some phase has vectors: the row loop is printed twice (aligned / not)
  /// Runs that several vector phases load, held in registers (`rc<i>[steps]`), filled by the
  /// first phase that loads them.
  std::map<VecRuns::Key, std::string> cache;
  /// A warp per row whose only loads are a small register-held row (softmax): the kernel asks
  /// __launch_bounds__ for 2048 / block threads' worth of blocks per SM.
  bool fullOccupancy = false;
  friend bool operator==(const RowRegisters &, const RowRegisters &) = default;
};

struct CudaConfig {
  std::string name; ///< e.g. "block256_ept2_vec4", "warp_per_row_rows4"
  int64_t block = 256, ept = 1, vec = 1, tpr = 1, rows = 1;
  bool split = false;
  RowRegisters regs; ///< rows
  /// __launch_bounds__(block, minBlocksPerSm); 0: no minimum.
  int64_t minBlocksPerSm() const { return regs.fullOccupancy && block <= 1024 ? 2048 / block : 0; }
  friend bool operator==(const CudaConfig &, const CudaConfig &) = default;
};

/// A row config: `tpr` threads per outer point, `rows` outer points per block of `block`.
inline CudaConfig rowConfig(std::string name, int64_t block, int64_t tpr, int64_t rows) {
  CudaConfig c;
  c.name = std::move(name);
  c.block = block;
  c.tpr = tpr;
  c.rows = rows;
  return c;
}

/// A workspace array of a split reduction: one partial state per (outer point, slice).
struct WorkspaceArray {
  std::string name, type; ///< C name and type
  int64_t elemBytes = 0;  ///< sizeof(type)
  friend bool operator==(const WorkspaceArray &, const WorkspaceArray &) = default;
};

/// One case of an adaptive launcher: when `condition` (C text over `inner`, the largest inner
/// space, and `total`, the outer points) holds and no earlier case did, launch config `config`.
struct AdaptiveCase {
  std::string condition;
  int32_t config = 0;
  friend bool operator==(const AdaptiveCase &, const AdaptiveCase &) = default;
};

struct CudaKernelPlan {
  bool pointwise = false;
  PointwiseMapping mapping = PointwiseMapping::kIndexed;
  int64_t vecWidth = 1; ///< elements per vector access of the pointwise vector path (1: none)
  /// kFlat: buffers accessed at the flat index, and per Load stmt / Store whether it is (else
  /// the access does not move with the outer space: a broadcast scalar).
  std::set<loop::NodeId> flatNodes;
  std::map<StmtRef, bool> flatAccess;
  std::optional<VecRuns> lastVec; ///< kLastDim
  std::optional<DimVecs> dimVec;  ///< kDim
  /// Pointwise vector path: the buffers whose alignment to (vec x element size) the launcher
  /// tests, and whether the last outer extent must be a multiple of vec.
  std::set<loop::NodeId> vecAlign;
  bool vecNeedsLastMultiple = false;

  /// Rows: per phase, its vector plan (row kernels with tpr > 1, aligned path).
  std::vector<std::optional<VecRuns>> phaseVec;

  std::vector<CudaConfig> configs; ///< the heuristic best first
  /// Rows whose sizes are unknown at compile time: config 0 adapts (empty: it does not).
  std::vector<AdaptiveCase> adaptive;
  std::vector<std::string> adaptiveInner; ///< host C texts of the inner sizes (max of them)
  /// Split reduction: phase 0 only reduces and may be long: config `splitConfig` splits it,
  /// `wholeConfig` (a block per point) is its fallback; `splitInner` is phase 0's inner size
  /// (host C text). The adaptive launcher calls the split launcher when total <= kSplitMaxTotal
  /// and the inner size >= kSplitMinInner (`adaptiveSplit`).
  int32_t splitConfig = -1, wholeConfig = -1;
  bool adaptiveSplit = false;
  std::string splitInner;
  /// Workspace arrays of phase 0's partial states, in layout order (each 16-byte aligned).
  std::vector<WorkspaceArray> splitArrays;
  CudaConfig combine; ///< the combining kernel's mapping (a block of 1024 per point)
  friend bool operator==(const CudaKernelPlan &, const CudaKernelPlan &) = default;
};

/// The invariants of a plan that the printers rely on: "" when `plan` (of a kernel of `phases`
/// phases) holds them, else the first rule broken. At least one config; a row config's threads
/// per row are 1, a warp or the block, its rows fill the block, its block is whole warps and at
/// most 1024 threads; a pointwise config's vector width is 1 or the plan's (a power of two); the
/// mapping's vector plan exists (kLastDim, kDim) and each vector run's width is the plan's; one
/// vector plan per phase (rows); adaptive cases launch configs that exist, the last one always;
/// a split plan's split config is split and its fallback is not, with workspace arrays for its
/// partial states; the blocks per SM asked through __launch_bounds__ fit 2048 threads.
std::string verifyCudaKernelPlan(const CudaKernelPlan &plan, size_t phases);

namespace plantext {
class Reader;
}

/// The plan of kernel `k` (of program `p`) as text (codegen/PlanText.h), which
/// parseCudaKernelPlan reads again to the same plan. A GEMM kernel (codegen/cuda/CudaGemm.h)
/// names its CUTLASS configs (`gemmConfigs`), and its plan is the unfused epilogue kernel's.
/// Grammar (indentation in levels of two spaces; NODE a node of `p`; REF a statement of the
/// phase, `%N` a load or `store N`; "..." C text or a size expression, as the printers use it):
///   plan      := 'plan' KERNEL 'cuda' (kind | 'gemm' CONFIG+ NL '  epilogue' kind) NL body
///   kind      := 'pointwise' ('flat' | 'last-dim' | 'dim' | 'indexed') | 'rows'
///   body      := (pointwise | phase*) config+ adaptive? split? combine?   # combine: rows
///   pointwise := '  vector-width' W 'last-multiple'?      # vecWidth, vecNeedsLastMultiple
///                ('  align' NODE+)? ('  flat-nodes' NODE+)?
///                ('  access' REF ('flat' | 'fixed'))*     # flatAccess
///                ('  last-dim width' W 'extent' E run*)?  # lastVec
///                ('  dim' D 'width' W 'extent' E 'loads' REF*)?   # dimVec
///   phase     := '  phase' P ('elements' | 'vectors width' W 'extent' E run*)   # phaseVec
///   run       := '    run' NODE "OFFSET" REF+             # a run and its accesses
///   config    := '  config c'I NAME fields hold*
///   combine   := '  combine' fields hold*
///   fields    := 'block' B 'ept' E 'vec' V 'tpr' T 'rows' R 'split'? 'rowvec'? 'full-occupancy'?
///   hold      := '    hold' NODE "OFFSET" REGISTERS       # RowRegisters::cache
///   adaptive  := '  adaptive inner' "SIZE"+ 'split'? ('    case c'I "CONDITION")+
///   split     := '  split c'I 'whole c'J 'inner' "SIZE" ('    workspace' NAME "TYPE" BYTES)*
std::string printCudaKernelPlan(const CudaKernelPlan &plan, const sched::Kernel &k,
                                const loop::LoopProgram &p,
                                const std::vector<std::string> &gemmConfigs = {});
/// The plan of kernel `k` at `r` (its lines up to the next plan), verified: its statements are
/// loads and stores of `k` whose nodes are their runs', and verifyCudaKernelPlan holds (else a
/// user error at the plan's line). A GEMM kernel's configs go to `gemmConfigs` (a kernel
/// without a GEMM: nullptr).
Expected<CudaKernelPlan> parseCudaKernelPlan(plantext::Reader &r, const sched::Kernel &k,
                                             const loop::LoopProgram &p,
                                             std::vector<std::string> *gemmConfigs = nullptr);

/// Policy constants of the planner, also printed into adaptive and split launchers.
inline constexpr int64_t kSplitSliceElems = 8192;  ///< phase-0 elements per split slice
inline constexpr int64_t kSplitTargetBlocks = 528; ///< blocks a split launch aims for
inline constexpr int64_t kSplitMaxSlices = 1024;
inline constexpr int64_t kSplitMaxTotal = 64;    ///< outer points at most, to split
inline constexpr int64_t kSplitMinInner = 65536; ///< phase-0 elements at least, to split

} // namespace coil::codegen
