/// \file The Loop IR verifier: the invariants LoopIR.h states, checked after lowering and after
/// every Loop IR rewrite (driver/Pipeline.cpp, with CompileOptions::verifyEach; always in the
/// tests). A violation is coil's fault: an internal error naming the node and the rule broken.
///
/// Checked: node names unique C identifiers; inputs are Input nodes and outputs exist, with a
/// name each; every reference (loads, extern arguments, MultiOutput sources) is to an earlier
/// node; a Pointwise node has one loop variable per dim and its result's dtype; a Reduction has
/// one outer variable per dim, an rvar per reduced extent, a folded value (and a position of
/// type i64 for ArgMax / ArgMin); loop variables start with '%' and are distinct within a node;
/// bodies are SSA (operands defined earlier), ops have their arity, loads index every dim of the
/// loaded node with its dtype, index expressions use only the node's loop variables, earlier
/// IndirectIndex symbols and the program's size symbols; an Extern's arguments have the kinds
/// the extern table gives its function (kernels/Externs.def), refer to its own outputs by index,
/// and it allocates exactly when it reports a size (OutSymbol); its output 0 is the node's type;
/// a MultiOutput names an output (>= 1) of an Extern, with that output's type; every dim of
/// every shape uses only the program's size symbols and those an extern call at or before the
/// node reports (OutSymbol).
#pragma once

#include "lower/LoopIR.h"
#include "support/Expected.h"

namespace coil::loop {

/// `stage` names the pass that produced `p` ("lower", "foldGemmBias", ...) in messages. On a
/// violation, `failedNode` (when given) receives the node at fault, or -1 when the rule broken
/// is about the program's inputs and outputs.
Status verifyLoopProgram(const LoopProgram &p, const std::string &stage,
                         NodeId *failedNode = nullptr);

} // namespace coil::loop
