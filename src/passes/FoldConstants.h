/// \file Constant folding: nodes whose inputs are all constants become constants.
#pragma once

#include "ir/Graph.h"
#include "support/Expected.h"

namespace coil {

struct FoldOptions {
  /// A node is folded only if its outputs hold at most this many elements in total, or no more
  /// bytes than its inputs: folding must not turn a small Expand or ConstantOfShape into a
  /// large weight.
  int64_t maxNewElements = 1 << 16;
};

/// Requires: a verified graph. Evaluates foldable nodes with the reference kernels and replaces
/// their outputs by constants (same names), then drops nodes and constants no output needs, and
/// refines the types that folding made stale (refineShapes: a dim that was a data-dependent
/// symbol at import and that a folded value now determines).
/// Establishes: the graph verifies; no remaining node has only constant inputs unless it was
/// too large to fold.
/// Errors: a user error when a kernel rejects constant inputs (e.g. an index out of range).
Expected<Graph> foldConstants(const Graph &g, const FoldOptions &opts = {});

} // namespace coil
