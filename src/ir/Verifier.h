/// \file Checks the invariants stated in Graph.h, and re-infers every node's types.
#pragma once

#include "ir/Graph.h"
#include "support/Expected.h"

namespace coil {

/// Returns ok, or an error naming the first broken rule and the node or value at fault.
/// Errors are internal when the graph came from coil's own passes; the text parser reports
/// them as user errors.
Status verifyGraph(const Graph &g);

} // namespace coil
