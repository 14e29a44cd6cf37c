// The invariants of the CPU and CUDA kernel plans (codegen/cpu/CpuPlan.h, codegen/cuda/CudaPlan.h):
// a plan as the planners make it passes; each rule broken on a copy of it is reported by name.
// (Every kernel the pipeline generates runs through the verifier after planning: the golden,
// model and conformance tests hold it on real plans.)
#include "codegen/cpu/CpuPlan.h"
#include "codegen/cuda/CudaPlan.h"

#include <functional>
#include <gtest/gtest.h>
#include <string>

using namespace coil;
using namespace coil::codegen;

namespace {

/// A per-outer-point CPU kernel of rank 2 whose phases have 1 and 0 inner dims.
CpuKernelPlan cpuRows() {
  CpuKernelPlan p;
  p.shape = CpuShape::kRows;
  p.loopDims = {1, 0};
  p.blocks = {8, 1};
  p.parallelWork = kParallelWorkSimd;
  return p;
}

std::string verifyCpu(const CpuKernelPlan &p) {
  return verifyCpuKernelPlan(p, 2, {1, 0});
}

TEST(PlanVerify, CpuRulesBroken) {
  EXPECT_EQ(verifyCpu(cpuRows()), "");
  struct Case {
    std::function<void(CpuKernelPlan &)> edit;
    std::string message;
  };
  const Case cases[] = {
      {[](CpuKernelPlan &p) { p.blocks.clear(); }, "no configs"},
      {[](CpuKernelPlan &p) {
         p.blocks = {8, 0};
       },
       "a config of 0 points per task"},
      {[](CpuKernelPlan &p) { p.parallelWork = 5; }, "threads from 5 statements: not a policy"},
      {[](CpuKernelPlan &p) { p.loopDims = {1}; }, "1 loop plans for 2 phases"},
      {[](CpuKernelPlan &p) {
         p.loopDims = {2, 0};
       },
       "phase 0: 2 of 1 dims as one loop"},
      {[](CpuKernelPlan &p) {
         p.loopDims = {0, 0};
       },
       "phase 0: 0 of 1 dims as one loop"},
      {[](CpuKernelPlan &p) {
         p.interior = true;
         p.lowers = {"x0"};
       },
       "an interior without bounds or outside a window kernel"},
      {[](CpuKernelPlan &p) {
         p.shape = CpuShape::kWindowRows;
         p.interior = true;
       },
       "an interior without bounds or outside a window kernel"},
      {[](CpuKernelPlan &p) {
         p.shape = CpuShape::kPointwiseRows;
         p.rowDims = 2;
       },
       "row segments over 2 of 2 dims"},
      {[](CpuKernelPlan &p) {
         p.shape = CpuShape::kPointwiseRows;
         p.rowDims = 0;
       },
       "row segments over 0 of 2 dims"},
  };
  for (const Case &c : cases) {
    CpuKernelPlan p = cpuRows();
    c.edit(p);
    EXPECT_EQ(verifyCpu(p), c.message);
  }
  // A window kernel unrolls its phases' dims: 0 of 1 as one loop is its plan.
  CpuKernelPlan w = cpuRows();
  w.shape = CpuShape::kWindowRows;
  w.loopDims = {0, 0};
  w.parallelWork = kParallelWork;
  EXPECT_EQ(verifyCpu(w), "");
}

/// A row kernel of 3 phases with a warp per row, a thread per row and an adaptive launcher.
CudaKernelPlan cudaRows() {
  CudaKernelPlan p;
  p.phaseVec.resize(3);
  p.configs = {rowConfig("warp_per_row_rows4", 128, 32, 4),
               rowConfig("thread_per_row_block128", 128, 1, 128),
               rowConfig("block1024_per_row", 1024, 1024, 1)};
  p.adaptive = {{"if (inner <= 8)", 1}, {"else", 0}};
  return p;
}

TEST(PlanVerify, CudaRulesBroken) {
  EXPECT_EQ(verifyCudaKernelPlan(cudaRows(), 3), "");
  EXPECT_EQ(verifyCudaKernelPlan(cudaRows(), 2), "3 phase vector plans for 2 phases");
  struct Case {
    std::function<void(CudaKernelPlan &)> edit;
    std::string message;
  };
  const Case cases[] = {
      {[](CudaKernelPlan &p) { p.configs.clear(); }, "no configs"},
      {[](CudaKernelPlan &p) { p.configs[0].block = 100; },
       "config 0 (warp_per_row_rows4): block of 100 threads is not whole warps up to 1024"},
      {[](CudaKernelPlan &p) { p.configs[2].block = 2048; },
       "config 2 (block1024_per_row): block of 2048 threads is not whole warps up to 1024"},
      {[](CudaKernelPlan &p) { p.configs[0].tpr = 64; },
       "config 0 (warp_per_row_rows4): 64 threads per row: not 1, a warp or the block"},
      {[](CudaKernelPlan &p) { p.configs[0].rows = 2; },
       "config 0 (warp_per_row_rows4): 2 rows of 32 threads do not fill the block of 128"},
      {[](CudaKernelPlan &p) { p.adaptive[0].config = 5; },
       "adaptive case 0 launches config 5 of 3"},
      {[](CudaKernelPlan &p) { p.adaptive[1].condition = "if (total > 4)"; },
       "adaptive case 1 ('if (total > 4)'): the last case must always hold"},
      {[](CudaKernelPlan &p) { p.adaptive[0].condition = "else"; },
       "adaptive case 0 ('else'): only the last case is 'else'"},
      {[](CudaKernelPlan &p) {
         VecRuns r;
         r.width = 3;
         p.phaseVec[1] = r;
       },
       "phase 1: vectors of 3"},
      {[](CudaKernelPlan &p) { p.configs[2].split = true; },
       "config block1024_per_row splits, the plan has no split"},
      {[](CudaKernelPlan &p) {
         p.splitConfig = 1;
         p.wholeConfig = 2;
       },
       "split config 1 is not a split config"},
      {[](CudaKernelPlan &p) {
         p.configs[1].split = true;
         p.splitConfig = 1;
         p.wholeConfig = 1;
       },
       "split fallback 1 is not a whole-point config"},
      {[](CudaKernelPlan &p) {
         p.configs[1].split = true;
         p.splitConfig = 1;
         p.wholeConfig = 2;
       },
       "a split plan without workspace arrays"},
  };
  for (const Case &c : cases) {
    CudaKernelPlan p = cudaRows();
    c.edit(p);
    EXPECT_EQ(verifyCudaKernelPlan(p, 3), c.message);
  }
}

TEST(PlanVerify, CudaPointwiseRulesBroken) {
  CudaKernelPlan p;
  p.pointwise = true;
  p.mapping = PointwiseMapping::kFlat;
  p.vecWidth = 4;
  p.vecAlign = {0};
  CudaConfig c;
  c.name = "block256_ept2_vec4";
  c.block = 256;
  c.ept = 2;
  c.vec = 4;
  p.configs = {c};
  EXPECT_EQ(verifyCudaKernelPlan(p, 1), "");
  CudaKernelPlan q = p;
  q.configs[0].vec = 8;
  EXPECT_EQ(verifyCudaKernelPlan(q, 1),
            "config 0 (block256_ept2_vec4): vectors of 8, the plan's are 4");
  q = p;
  q.vecWidth = 6;
  EXPECT_EQ(verifyCudaKernelPlan(q, 1), "vector width 6 is not a power of two up to 16");
  q = p;
  q.mapping = PointwiseMapping::kLastDim;
  EXPECT_EQ(verifyCudaKernelPlan(q, 1), "vectors along the last dim without a vector plan");
  q = p;
  q.mapping = PointwiseMapping::kDim;
  EXPECT_EQ(verifyCudaKernelPlan(q, 1),
            "vector loads along dim without a vector plan of the plan's width");
  q = p;
  q.vecWidth = 1;
  q.configs[0].vec = 1;
  EXPECT_EQ(verifyCudaKernelPlan(q, 1), "alignment tests without a vector path");
  q = p;
  q.configs[0].ept = 0;
  EXPECT_EQ(verifyCudaKernelPlan(q, 1), "config 0 (block256_ept2_vec4): 0 elements per thread");
}

} // namespace
