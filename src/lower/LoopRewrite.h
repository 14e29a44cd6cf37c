/// \file Small rewriting helpers shared by the Loop IR passes that fold pointwise epilogues
/// into extern calls (FoldGemmBias, FoldConvBias).
#pragma once

#include "lower/LoopIR.h"

#include <optional>
#include <string>
#include <vector>

namespace coil::loop {

/// The node that statement `v` of `b` loads, when it loads it at exactly the point `vars` of the
/// reader (an identity index); nullopt otherwise or when `v` is no statement of `b`.
std::optional<NodeId> identityLoad(const Body &b, Val v, const std::vector<std::string> &vars);

/// Per node: the distinct nodes that read it (loads, extern arguments, MultiOutput sources).
std::vector<std::vector<NodeId>> readersOf(const LoopProgram &p);

/// Removes the nodes marked in `dead` and renumbers every reference to the others; a removed
/// node must no longer be referenced.
void removeNodes(LoopProgram &p, const std::vector<bool> &dead);

/// Node `into` becomes the extern `ex` (with into's type as its one output), absorbing node
/// `from`, whose origins it adds.
void absorb(LoopProgram &p, NodeId into, NodeId from, ExternNode ex);

} // namespace coil::loop
