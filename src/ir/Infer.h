/// \file Type and shape inference for Graph IR nodes (one function per op).
///
/// An inference function receives the types of a node's inputs and, where known at compile
/// time, the *contents* of its integer inputs (from constants and symbolic constants: e.g. the
/// `shape` input of Reshape as {N, 12, 64}). It returns the type of every output, or a user
/// error that states the rule broken (`input 1 must have rank 4, got rank 3`); the caller adds
/// the node's location. Dims that depend on data (NonZero, Unique, a Reshape whose target is
/// unknown) become fresh symbols, bound when the node runs.
///
/// Inference functions are grouped by op family in ir/infer/<Family>.cpp and registered in
/// Infer.cpp; an op without one is unsupported.
#pragma once

#include "ir/Graph.h"
#include "support/Expected.h"

#include <functional>
#include <optional>
#include <vector>

namespace coil {

struct InferContext {
  const Node &node;
  /// Input types; nullptr for an absent optional input. Size == node.inputs.size().
  std::vector<const TensorType *> inputTypes;
  /// Known contents of inputs, flattened, as SymInts (integer and bool constants and symbolic
  /// constants); nullopt when unknown or not an integer tensor.
  std::vector<std::optional<std::vector<SymInt>>> intValues;
  /// Constant input tensors; nullptr when the input is not a constant.
  std::vector<const Tensor *> constants;
  /// Makes a new symbol for a data-dependent dim, named after `hint`.
  std::function<SymInt(const std::string &hint)> freshSymbol;

  size_t numInputs() const { return inputTypes.size(); }
  bool hasInput(size_t i) const { return i < inputTypes.size() && inputTypes[i] != nullptr; }
  /// The type of input `i`; checked present (use hasInput for optional inputs).
  const TensorType &input(size_t i) const;
  const std::optional<std::vector<SymInt>> &intValue(size_t i) const;
  /// A user error about this node (location added by the caller).
  Error error(const std::string &message) const { return Error::user(message); }
};

using InferFn = Expected<std::vector<TensorType>> (*)(InferContext &);

/// The inference function of `op`, or nullptr when coil does not support it.
InferFn inferFnFor(OpKind op);
/// Runs the op's inference; errors carry the node's location. An output whose constant dims
/// multiply to more than kMaxTensorElements (or whose dim overflows int64) is a user error.
Expected<std::vector<TensorType>> inferNode(InferContext &ctx);
/// A user error ("of type f32[...] has more than 2^59 elements") when the dims of `t` known at
/// compile time (constants, and symbol-free expressions) multiply to more than
/// kMaxTensorElements or one of them overflows int64; symbolic dims are checked at run time.
Status checkElementCount(const TensorType &t);

using InferRegistry = OpTable<InferFn>;

// One per op family (ir/OpFamilies.def): its file registers its ops.
#define COIL_OP_FAMILY(F) void register##F##Infer(InferRegistry &r);
#include "ir/OpFamilies.def"
#undef COIL_OP_FAMILY

// --- helpers shared by the inference functions

/// Multidirectional (numpy) broadcasting of shapes. Equal dims and 1s broadcast as usual; a
/// symbol against a constant c > 1 gives c; two different symbols give max(a, b).
Expected<std::vector<SymInt>> broadcastShapes(const std::vector<SymInt> &a,
                                              const std::vector<SymInt> &b);
/// Maps a possibly negative axis into [0, rank); error when out of range.
Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank, const char *what = "axis");
/// Whether `perm` holds each of 0..rank-1 exactly once.
bool isPermutation(const std::vector<int64_t> &perm, int64_t rank);
/// Product of dims.
SymInt symNumel(const std::vector<SymInt> &shape);

} // namespace coil
