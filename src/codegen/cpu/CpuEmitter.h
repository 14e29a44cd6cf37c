/// \file The CPU kernel generator of one fused kernel (private to codegen/cpu): the planner
/// (CpuPlan.cpp) fills `plan_` with the kernel's decisions (CpuPlan.h), then the printers
/// (CpuCodegen.cpp) write the body function and the launchers from it. Per access, the offsets
/// (hoisted affine forms, and in a window kernel's interior the taps without their clamps) are
/// worked out by planOffsets just before the loop that uses them is printed.
#pragma once

#include "codegen/CSource.h"
#include "codegen/KernelEmitter.h"
#include "codegen/cpu/CpuCodegen.h"
#include "codegen/cpu/CpuPlan.h"

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace coil::codegen {

class CpuEmitter : KernelEmitterBase {
public:
  CpuEmitter(const sched::Kernel &k, const loop::LoopProgram &p, const CpuCodegenOptions &o)
      : KernelEmitterBase(k, p, {"v", "o", "d", "n", "acc", "red"},
                          {"begin", "end", "f", "t", "lo", "hi", "total", "grid", "block", "task",
                           "n_row", "ilo", "ihi", "part", "pa", "pb"},
                          "cpu codegen: "),
        o_(o) {}

  Expected<CpuKernelSource> run();

private:
  using Body = loop::Body;
  using NodeId = loop::NodeId;
  using Stmt = loop::Stmt;

  // --- the planner (CpuPlan.cpp): fills plan_ (and the flat path's offsets) before printing
  Status plan();
  /// plan_ checked against verifyCpuKernelPlan (an internal error naming the rule broken).
  Status verified() const;
  SymInt perPointWork() const;
  Status planWindowInterior();

  // --- body
  struct LoopCtx {
    std::string var; ///< C name of the innermost loop variable ("" when no loop)
    std::map<std::string, std::string> hoisted;            ///< offset expression text -> name
    std::vector<std::pair<std::string, std::string>> defs; ///< hoisted (name, expr), in order
    std::map<const void *, std::string> offsets; ///< per Load stmt / Store: the printed offset
    bool simd = true;
  };
  std::string offsetOf(LoopCtx &ctx, const Body &b, NodeId node, const std::vector<SymInt> &idx,
                       bool isStore);
  Status planOffsets(LoopCtx &ctx, const Body &b, const std::vector<bool> &live,
                     const std::vector<sched::Store> &stores);
  Status emitBody(CodeWriter &w, LoopCtx &ctx, const Body &b, const std::vector<bool> &live,
                  std::vector<std::string> &valName);
  Status emitStores(CodeWriter &w, LoopCtx &ctx, const std::vector<sched::Store> &stores,
                    const Body &b, const std::vector<std::string> &valName);

  size_t mergeableTrailingDims(const sched::Phase &ph, const std::vector<bool> &live,
                               const std::vector<std::string> &vars,
                               const std::vector<SymInt> &ranges, size_t keep);
  bool planFlat(LoopCtx &ctx, const std::vector<bool> &live);
  bool isWindowKernel();

  // --- the printers (CpuCodegen.cpp)
  Status emitPointwise(CodeWriter &w);
  Status emitFlat(CodeWriter &w);
  Status emitRows(CodeWriter &w);
  Status emitPhase(CodeWriter &w, size_t pi);
  Status emitWindowRows(CodeWriter &w);
  /// The phases, inside the simd loop over the last outer dim of a window kernel.
  Status emitWindowPhases(CodeWriter &w);
  void emitStartPoint(CodeWriter &w, size_t lastDim);
  void emitCarry(CodeWriter &w, size_t dims);
  std::string paramList(bool restrict) const;
  std::string argList() const;

  const CpuCodegenOptions &o_;
  CpuKernelPlan plan_;
  LoopCtx flatCtx_;            ///< kFlat: the offsets planned
  std::vector<bool> flatLive_; ///< kFlat: the live statements
  int nextOffset_ = 0;
  /// Phases are emitted inside the simd loop over the last outer dim (window kernels): their
  /// inner points are unrolled, one block each, not loops.
  bool inSimd_ = false;
  /// Window kernels' interior: while set, load offsets drop the min/max clamps that select an
  /// operand moving with this (C-named) variable, and record where that is exact.
  std::string declampVar_;
  bool declampOk_ = true;
  struct Bound {
    size_t phase;
    bool upper; ///< var <= e (else var >= e)
    SymInt e;
  };
  std::vector<Bound> bounds_;
  size_t curPhase_ = 0;
  using ClampFn = std::function<std::optional<SymInt>(const SymInt &)>;
  std::optional<SymInt> mapClamps(const SymInt &e, const std::string &v, const ClampFn &clamp);
  std::optional<SymInt> declamp(const SymInt &e, const std::string &v);
  std::optional<SymInt> resolveClamps(const SymInt &e, const std::string &v);
};

} // namespace coil::codegen
