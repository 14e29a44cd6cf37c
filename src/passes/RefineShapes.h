/// \file Shape refinement: re-runs type inference after constant folding, so that dims that
/// were data-dependent symbols at import (e.g. an Expand whose target came from logic on
/// constants) become the values folding revealed.
#pragma once

#include "ir/Graph.h"
#include "support/Expected.h"

namespace coil {

/// Requires: a graph that verifies but for such stale dims (foldConstants' result before it
/// calls this; a verified graph). For every node in order, infers its outputs again from the
/// current input types and constant contents; where a recorded dim is a symbol that no graph
/// input defines and inference now gives an expression free of new symbols, that symbol is
/// replaced by the expression in every value's type. Returns how many symbols were replaced.
/// Establishes: the graph verifies (types only become more precise).
Expected<int> refineShapes(Graph &g);

} // namespace coil
