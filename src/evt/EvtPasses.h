/// \file Passes over the EVT IR, the per-architecture validator, and the visitor plan.
///
/// `compileEpilogue` runs, in order: semantic rules, kinds from strides, shape propagation,
/// constant folding, CSE, DCE, store splicing (every output gets a pass-through store and every
/// store becomes an ancestor of the root), and the plan that maps the DAG onto CUTLASS's tree
/// and topological visitors with the smallest DAG regions. `verify` (arity, liveness,
/// acyclicity, reachability) runs after every rewrite.
#pragma once

#include "evt/EvtIR.h"

#include <map>
#include <string>
#include <vector>

namespace coil::evt {

struct CompileOptions {
  Arch arch = Arch::Sm90;
  DType inputs = DType::BF16; ///< A and B of the GEMM (the mainloop's share of shared memory)
  std::map<std::string, DType> dtypes; ///< output dtype overrides
};

/// A topological-visitor region: nodes on every path from `sources` to `exit`.
struct Region {
  std::vector<int> sources;
  int exit = -1;
  std::vector<int> members; ///< in topological order; `exit` is last
};

/// How the DAG is laid out on CUTLASS visitors.
struct VisitorPlan {
  std::vector<int> topo;         ///< live nodes reachable from the root, operands first
  std::vector<Region> regions;   ///< disjoint
  std::vector<int> regionOfExit; ///< by node id: index of the region it exits, or -1
  std::vector<int> regionOf;     ///< by node id: index of the region it belongs to, or -1
};

/// The value of compute op `op` on its operands, in double: the scalar semantics constant folding,
/// the emitted host reference and evaluateOutputs (EvtEval.h) share.
double evalOp(Op op, const std::vector<double> &operands);

/// Whether a node can be repeated in a tree visitor (a cheap, side-effect-free fetch).
bool isDuplicableLeaf(Kind k);

Status checkRules(Program &p, const CompileOptions &o);
Status resolveKinds(Program &p, const CompileOptions &o);
Status propagateShapes(Program &p);
void foldConstants(Program &p);
void cse(Program &p);
void dce(Program &p);
/// sm90: `beta * C + Z` (beta a scalar, C the source, the product used once) becomes one Fma node
/// with operands (beta, C, Z), which CUTLASS specialises to skip C's load at run time when
/// beta == 0. Returns the number of rewrites.
int fuseBetaC(Program &p);
Status spliceStores(Program &p, const CompileOptions &o, std::vector<std::string> *notes = nullptr);
/// Invariants after a rewrite; a violation is coil's fault (Error::internal naming the node).
Status verify(const Program &p, bool spliced);
Expected<VisitorPlan> planVisitors(const Program &p);

/// All of the above, then the shared-memory budget (evt/EvtBudget.h); `notes` receives one
/// line per rewrite the validator made.
Expected<VisitorPlan> compileEpilogue(Program &p, const CompileOptions &o,
                                      std::vector<std::string> *notes = nullptr);

} // namespace coil::evt
