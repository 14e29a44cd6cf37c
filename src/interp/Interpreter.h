/// \file The reference interpreter: runs a Graph on concrete tensors, node by node.
///
/// It binds the symbols of the graph's input shapes from the actual inputs (checking every
/// constant dim, every repeated symbol and every declared range), evaluates symbolic
/// constants, runs each node's reference kernel in order, and checks each result against the
/// node's inferred type (binding symbols that first appear there). A result that contradicts
/// the inferred type is an internal error: inference and kernel disagree.
#pragma once

#include "interp/Kernel.h"

#include <functional>

namespace coil {

struct InterpOptions {
  /// Called after each node runs, with its outputs (for tracing and kernel-by-kernel checks).
  std::function<void(const Node &, const std::vector<Tensor> &)> afterNode;
};

/// Checks `inputs` against the graph's input types and returns the symbol bindings.
Expected<SymBindings> bindInputs(const Graph &g, const std::vector<Tensor> &inputs);

/// Runs `g` on `inputs` (in the order of g.inputs) and returns the outputs in the order of
/// g.outputs. User errors name the input or node at fault.
Expected<std::vector<Tensor>> interpret(const Graph &g, const std::vector<Tensor> &inputs,
                                        const InterpOptions &opts = {});

} // namespace coil
