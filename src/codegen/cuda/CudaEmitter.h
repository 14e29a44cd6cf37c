/// \file The CUDA kernel generator of one fused kernel (private to codegen/cuda): the planner
/// (CudaPlan.cpp) fills `plan_` with every decision, then the printers write the device functions
/// (CudaPointwise.cpp, CudaRows.cpp) and the host launchers (CudaLaunch.cpp) from it. They share
/// the kernel's C names (KernelEmitterBase).
#pragma once

#include "codegen/CSource.h"
#include "codegen/KernelEmitter.h"
#include "codegen/cuda/CudaCodegen.h"
#include "codegen/cuda/CudaPlan.h"

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace coil::codegen {

class CudaEmitter : KernelEmitterBase {
public:
  CudaEmitter(const sched::Kernel &k, const loop::LoopProgram &p, const CudaCodegenOptions &o);

  Expected<CudaKernelSource> run();

private:
  using Body = loop::Body;
  using NodeId = loop::NodeId;
  using Stmt = loop::Stmt;

  // --- names and addressing (CudaLaunch.cpp)
  /// `e` (over the kernel's original symbols) as a device-code expression.
  std::string dcpp(const SymInt &e) const { return simplify(renamed(e), ranges_).toCuda(ranges_); }
  std::string offsetText(NodeId node, const std::vector<SymInt> &idx) const;
  SymInt linearOffset(NodeId node, const std::vector<SymInt> &idx) const;
  /// `buf[offset]`: the element of `node` at `idx`.
  std::string elementAt(NodeId node, const std::vector<SymInt> &idx) const;
  Status emitBody(CodeWriter &w, const Body &b, const std::vector<bool> &live,
                  std::vector<std::string> &valName, const LoadFn &load);
  std::string storeText(const sched::Store &s, const Body &b,
                        const std::vector<std::string> &valName, const std::string &target) const;
  std::string deviceParams() const;
  std::string hostParams() const;
  void emitExtents(CodeWriter &w, bool device) const;
  /// `narrow`: divide in 32 bits when the space has at most 2^32 points (64-bit division is
  /// a long instruction sequence on the GPU).
  void emitDecompose(CodeWriter &w, const std::string &flat, bool narrow = false,
                     const std::string &lastName = "") const;

  // --- statements as the plan names them (StmtRef)
  /// The Load statement `r` names.
  const Stmt &loadAt(StmtRef r) const { return k_.phases[r.phase].body.stmts[r.index]; }
  /// The place of statement `s` or store `st` of phase `pi`: the printers pass the kernel's own.
  StmtRef refOf(size_t pi, const Stmt &s) const;
  StmtRef refOf(size_t pi, const sched::Store &st) const;

  // --- the planner (CudaPlan.cpp): every decision, into plan_
  Status plan();
  void planPointwise();
  bool planFlat(const std::vector<bool> &live);
  std::optional<DimVecs> planDimVec(const std::vector<bool> &live) const;
  /// The vector plan of phase `ph` along loop variable `var` (C name), any extent.
  std::optional<VecRuns> planVec(size_t pi, const std::string &var,
                                 const std::vector<bool> &live) const;
  /// A phase over one inner var of constant extent whose accesses that move with it are all
  /// contiguous runs of aligned vectors.
  std::optional<VecRuns> planRowVec(size_t pi, const std::vector<bool> &live) const;
  void planRowConfigs();
  RowRegisters planRegisters(const CudaConfig &c, bool combining) const;
  std::vector<WorkspaceArray> planSplitArrays() const;
  /// A phase's vector plan when printing under `splitMode_` (none for a split phase 0).
  const std::optional<VecRuns> &phaseVec(size_t pi) const;

  // --- pointwise device code (CudaPointwise.cpp)
  Status emitPointwise(CodeWriter &w, const CudaConfig &c, const std::vector<bool> &live);
  Status emitDimVecPath(CodeWriter &w, const CudaConfig &c, const std::vector<bool> &live);
  Status emitLastVecPath(CodeWriter &w, const CudaConfig &c, const std::vector<bool> &live);
  Status emitFlatVecPath(CodeWriter &w, const CudaConfig &c, const std::vector<bool> &live);
  Status emitScalarElement(CodeWriter &w, const std::vector<bool> &live);
  std::string pointwiseLoad(const Stmt &s) const;
  /// The grid-stride loop over vector groups: per grid step, the loads of the thread's `ept`
  /// groups first (`inner(false)`), then their math and stores (`inner(true)`).
  Status vecLoop(CodeWriter &w, const CudaConfig &c, const std::string &count,
                 const std::function<Status(bool)> &inner);
  std::string vecType(NodeId n, const std::string &width) const;

  // --- row device code (CudaRows.cpp)
  Status emitRows(CodeWriter &w, const CudaConfig &c);
  Status emitPhase(CodeWriter &w, const CudaConfig &c, size_t pi);
  void emitWorkspace(CodeWriter &w) const;
  using Red = ReductionVar;
  Status emitInnerBody(CodeWriter &w, const CudaConfig &c, const sched::Phase &ph,
                       const std::vector<bool> &live, const std::vector<Red> &reds,
                       const LoadFn &load,
                       const std::function<std::string(const sched::Store &)> &storeTarget);
  void foldLines(CodeWriter &o, const Red &red, const std::string &sw, const std::string &sn,
                 const std::string &sp, const std::string &ss) const;
  Status emitPhaseVectors(CodeWriter &w, const CudaConfig &c, size_t pi, const VecRuns &rv,
                          const std::vector<bool> &live, const std::vector<Red> &reds);
  Status emitPhaseElements(CodeWriter &w, const CudaConfig &c, size_t pi,
                           const std::vector<bool> &live, const std::vector<Red> &reds);
  void emitCombine(CodeWriter &w, const CudaConfig &c, const std::vector<Red> &reds) const;

  // --- launchers (CudaLaunch.cpp)
  void emitLauncher(CodeWriter &host, size_t ci) const;
  /// Config `ci`'s launch plan as data (what its launcher computes), over the Size params.
  wrapper::LaunchPlan launchPlan(size_t ci) const;
  std::string launchArgs() const;
  std::string functionName(size_t ci) const { return wrapper::KernelInfo::entryName(k_.name, ci); }

  const CudaCodegenOptions &o_;
  CudaKernelPlan plan_;
  std::vector<bool> pwLive_; ///< pointwise: the live statements of the phase

  // Printing state.
  /// Split reductions: 0 off, 1 the partial kernel (phase 0 over a slice), 2 the combining
  /// kernel (phase 0 folds the slices' partials).
  int splitMode_ = 0;
  /// Row kernels with vector phases emit their row loop twice, under one test of the buffers'
  /// alignment (`coil_rowvec_ok`): 1 while emitting the aligned copy (vector phases only), 0
  /// the unaligned copy (element by element). A test per phase inside the loop would keep NVCC
  /// from holding the persistent row in registers across the phases (softmax: 3.0 vs 3.5 TB/s).
  int vecPath_ = 0;
  /// Register-held runs already loaded by an earlier phase of the row being printed.
  std::set<VecRuns::Key> rowCacheFilled_;
  const RowRegisters *regs_ = nullptr; ///< of the config being printed
};

} // namespace coil::codegen
