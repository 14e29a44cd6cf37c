/// \file Shared memory of the GEMM an epilogue becomes (issue 15, defect 9): per architecture and
/// tile shape, what CUTLASS's types occupy, so that `coil evt` rejects an epilogue whose kernel
/// would not compile or launch instead of emitting it.
///
/// sm90 (CUTLASS 3.x, TileShape 128x128xK with K = 64 for 16-bit A/B and 32 for f32, cooperative
/// TMA warp-specialized schedule, epilogue tile 128x32, so StagesC = 4 and StagesD = 2): the
/// epilogue's SharedStorage is the collective's C and D buffers (a union when C and D have the
/// same width, CUTLASS's ReuseSmemC), the fusion tree's storage (an aux load: StagesC epilogue
/// tiles; an aux store: StagesD tiles; a row broadcast: the tile's 128 elements, once per place
/// the tree instantiates it; the others none), laid out as cute::tuple lays them out (children
/// before their node, empty members taking no space, each aligned to its swizzle), and the load
/// pipeline's barriers. The mainloop gets what is left of the 232448 bytes of an SM: its stages
/// are (232448 - epilogue, rounded up to 128) / (A and B tiles + 16 bytes of barriers), and
/// CUTLASS needs at least 2 ("Specialization requires Stages set to value 2 or more").
///
/// sm80 (CUTLASS 2.x DefaultGemmWithVisitor, ThreadblockShape 128x128xK, K = 32 for 16-bit A/B
/// and 16 for f32, 3 stages): the mainloop's buffers and the epilogue's share one union; the
/// epilogue's part is the 2.x epilogue's own storage plus its visitors' (row reductions only).
/// It must fit the 166912 bytes an sm_80 block may opt into.
///
/// The numbers are checked against nvcc: the emitted kernel program asserts them
/// (`static_assert`, exact under COIL_EVT_CHECK_SMEM_EXACT), and test/evt/compile_corpus.py
/// compiles every accepted corpus program so.
#pragma once

#include "evt/EvtPasses.h"

#include <cstdint>
#include <vector>

namespace coil::evt {

struct SmemBudget {
  /// sm90: sizeof(CollectiveEpilogue::SharedStorage); sm80: the epilogue's share of the union.
  int64_t epilogueBytes = 0;
  int64_t collectiveBytes = 0; ///< sm90: the collective's C and D buffers
  int64_t stageBytes = 0;      ///< the mainloop's bytes per stage
  int stages = 0;              ///< sm90: the stages left to the mainloop; sm80: 3
  int64_t totalBytes = 0;      ///< what the kernel's block uses
  int64_t capacityBytes = 0;   ///< what a block may use on the architecture
  /// Fusion storage per node (every instance in the visitor tree), largest first.
  std::vector<std::pair<int, int64_t>> nodes;
  bool fits() const;
};

/// The budget of the kernel for `p` (compiled: spliced and planned) with A and B of `inputs`.
SmemBudget smemBudget(const Program &p, const VisitorPlan &plan, Arch arch, DType inputs);

/// A user error at the file when the budget does not fit: it names the limit broken, the
/// numbers, and the outputs and inputs whose buffers cost the most.
Status checkSmemBudget(const Program &p, const VisitorPlan &plan, Arch arch, DType inputs);

} // namespace coil::evt
