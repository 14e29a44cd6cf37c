/// \file Fused kernels and schedules: what the scheduler hands to kernel codegen.
///
/// A Schedule is the LoopProgram's work in execution order: fused Kernels (generated code) and
/// Extern steps (library calls). Nodes that are *realized* own a buffer (contiguous, row-major,
/// of the node's dtype and shape); every other Pointwise node has been inlined into the bodies
/// that read it, so kernel bodies load only realized nodes.
///
/// A Kernel runs, for every point of its outer ranges `vars` (the parallel iteration space: the
/// CPU parallelizes it over threads, CUDA maps it to the grid), its phases in order. A phase is
/// an inner loop nest (`vars`/`ranges`, possibly empty: one point) whose body is evaluated at
/// every inner point; at each point it performs its `stores`, and it folds its `reductions`
/// over all of its points. A reduction's result (per outer point) is available to later phases
/// through `Stmt::Kind::Accumulator` statements. Examples:
///  - a pointwise kernel: outer = all dims (or a prefix), one phase storing the value;
///  - softmax over the last dim of [N, D]: outer = [N]; phase 0 reduces max over [D]; phase 1
///    reduces sum of exp(x - acc0) over [D]; phase 2 stores exp(x - acc0) / acc1 over [D];
///  - a plain reduction: outer = kept dims, phase 0 reduces over the reduced dims, phase 1 (no
///    inner vars) stores acc0.
/// Phase bodies may use the kernel's outer vars and their own inner vars; all loop variables of a
/// kernel have distinct names.
#pragma once

#include "evt/EvtPasses.h"
#include "lower/LoopIR.h"

#include <memory>
#include <optional>
#include <variant>

namespace coil::sched {

struct Store {
  loop::NodeId node = -1;    ///< a realized node
  std::vector<SymInt> index; ///< one per dim of the node's shape
  loop::Val value = loop::kNoVal;
};

struct Accumulate {
  loop::ReduceKind kind = loop::ReduceKind::Sum;
  DType accDType = DType::F32;
  loop::Val value = loop::kNoVal;
  loop::Val position = loop::kNoVal; ///< ArgMax/ArgMin
  bool selectLast = false;
};

struct Phase {
  std::vector<std::string> vars;
  std::vector<SymInt> ranges;
  loop::Body body;
  std::vector<Store> stores;
  std::vector<Accumulate> reductions;
};

/// A GEMM computed by the kernel that consumes it (sched/FuseGemmEpilogue.h): the kernel's body
/// is the GEMM's epilogue. `node` is the GEMM extern of the Loop IR; it is not realized, and the
/// body's loads of it (at the kernel's point) read the f32 accumulator. D = A x B with A an
/// m x k row-major matrix (or k x m, `columnMajorA`) and B k x n (`rowMajorB`) or n x k, both
/// contiguous (a batch of products sharing B is folded into m); `bias` (or -1) is the extern's own
/// per-column bias, added to the accumulator first, then its ReLU when `relu`. `epilogue` is the
/// body as an epilogue visitor tree (parameters named "in<i>" for `inputs[i]`, output "D" the
/// kernel's one store), which codegen prints as a CUTLASS kernel per config. `call` and
/// `epilogueReads` keep the unfused form (the GEMM extern, then this kernel reading its product),
/// which codegen prints as one more config: the fallback where CUTLASS cannot run, and the baseline
/// tuning measures the fused configs against.
struct GemmMainloop {
  loop::NodeId node = -1, a = -1, b = -1;
  loop::ExternNode call;
  std::vector<loop::NodeId> epilogueReads;
  bool rowMajorB = false, columnMajorA = false;
  SymInt m, n, k;
  DType dtype = DType::BF16; ///< of A, B and D
  std::vector<loop::NodeId> inputs;
  evt::Program epilogue; ///< compiled (evt::compileEpilogue) for sm90
  evt::VisitorPlan plan;
  std::string description; ///< e.g. "bias + gelu" (coil inspect --fusion)
};

struct Kernel {
  std::string name; ///< unique C identifier, e.g. "k3_softmax"
  std::vector<std::string> vars;
  std::vector<SymInt> ranges;
  std::vector<Phase> phases;
  std::vector<loop::NodeId> reads;  ///< realized nodes loaded (sorted, unique)
  std::vector<loop::NodeId> writes; ///< realized nodes stored (sorted, unique)
  std::vector<loop::NodeId> fused;  ///< Loop IR nodes computed by this kernel (report)
  std::optional<GemmMainloop> gemm; ///< set: a GEMM with this kernel as its epilogue (CUDA)

  /// One phase without inner vars or reductions, over at least one outer var: each outer point
  /// is computed on its own (the code generators' pointwise kernels).
  bool pointwise() const {
    return phases.size() == 1 && phases[0].vars.empty() && phases[0].reductions.empty() &&
           !vars.empty();
  }
};

struct ExternStep {
  loop::NodeId node = -1; ///< an Extern node of the program
};

using Step = std::variant<Kernel, ExternStep>;

struct Schedule {
  const loop::LoopProgram *program = nullptr;
  std::vector<Step> steps;
  /// Per Loop IR node: does it own a buffer? (Inputs, constants, externs, their outputs,
  /// reductions and graph outputs always do.)
  std::vector<bool> realized;
  /// Why GEMM externs were not fused with their epilogues (sched/FuseGemmEpilogue.h), one line
  /// per GEMM the pass looked at: coil inspect --fusion prints them.
  std::vector<std::string> gemmNotes;
};

} // namespace coil::sched
