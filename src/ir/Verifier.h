/// \file Checks the invariants stated in Graph.h, and re-infers every node's types.
///
/// Structural rules (in the order they are checked):
///  - value names are non-empty and unique; every value's type has non-negative constant dims;
///  - graph inputs are distinct values of kind Input, and every Input value is a graph input;
///  - a value is Constant exactly when the graph holds a tensor for it, and the tensor's dtype
///    and shape equal the value's type; a value is SymConstant exactly when the graph holds
///    elements for it, and its type is i64 of rank 0 (one element) or rank 1 (that many);
///  - every NodeOutput value is produced by exactly one node, the one its `producer` names;
///  - node inputs are absent (kNoValue) or values defined earlier: graph inputs, constants or
///    outputs of earlier nodes (topological order);
///  - attributes have non-empty names, and tensor attributes hold a tensor;
///  - (VerifyOptions::checkSchema) each node matches its op's ONNX schema (irOpSchema in
///    OpSchema.h): input and output counts within its bounds, required inputs present, no
///    unknown attribute names, attribute kinds as the schema says, required attributes present;
///  - graph outputs are defined values; symbol ranges have min <= max.
/// Re-inference (VerifyOptions::reinfer): each node's inference function runs on the recorded
/// input types (and the contents of integer constants and symbolic constants); the results
/// must match the recorded output types in number, dtype and rank, and dim by dim (equal, or
/// provably equal under the graph's symbol ranges), except where the re-inferred dim involves a
/// fresh data-dependent symbol (which matches anything). An op without an inference function is
/// an error (unsupported op).
#pragma once

#include "ir/Graph.h"
#include "ir/Infer.h"
#include "support/Expected.h"

#include <string>

namespace coil {

struct VerifyOptions {
  /// Re-run every node's inference and compare with the recorded output types.
  bool reinfer = true;
  /// Check nodes against their op's ONNX schema (arity, attribute names and kinds). The text
  /// format tests turn it off to round-trip arbitrary attributes.
  bool checkSchema = true;
  /// Looks up inference functions; nullptr means inferFnFor (the registry). Tests substitute
  /// their own.
  InferFn (*inferFor)(OpKind) = nullptr;
};

/// What a verifier error is about, for callers that can point at it (the text parser).
struct VerifyFailure {
  int32_t node = -1;        ///< index of the node at fault, or -1
  ValueId value = kNoValue; ///< the value at fault, or kNoValue
  /// The node's inference function threw InternalError (a COIL_CHECK): a bug in coil that the
  /// verifier reports as an error rather than letting it escape.
  bool inferenceBug = false;
};

/// Returns ok, or an error naming the first broken rule and the node or value at fault.
/// Errors are internal when the graph came from coil's own passes; the text parser reports
/// them as user errors.
Status verifyGraph(const Graph &g);
Status verifyGraph(const Graph &g, const VerifyOptions &opts, VerifyFailure *where = nullptr);

/// The check after a Graph IR pass (driver/Pipeline.cpp with CompileOptions::verifyEach, and
/// `coil inspect --graph MODEL --pass NAME`): verifyGraph with the default options; a failure
/// is an internal error ("graph IR after STAGE: ...", `stage` naming the pass) at the node at
/// fault, since the pass broke a graph that verified.
Status verifyGraphAfter(const Graph &g, const std::string &stage);

} // namespace coil
