/// \file Reference kernels: the interpreter's implementation of each op.
///
/// A kernel receives a node's input tensors (nullptr for an absent optional input) and returns
/// its outputs, computing the output shapes itself. Kernels are the living definition of each
/// op's semantics: written as plain loops, obviously correct rather than fast, accumulating in
/// double where precision matters (sums, means, dot products) and following ONNX semantics
/// for every dtype the op accepts. A kernel returns a user error for inputs that make the op
/// undefined (an index out of range, a shape that does not match), never crashes.
///
/// Kernels are grouped by op family in interp/kernels/<Family>.cpp.
#pragma once

#include "ir/Graph.h"
#include "support/Expected.h"

#include <vector>

namespace coil {

struct KernelContext {
  const Node &node;
  std::vector<const Tensor *> inputs; ///< nullptr for an absent optional input
  /// The inferred output types (symbols may still be unbound); a kernel may use the dtypes.
  const std::vector<TensorType> *outputTypes = nullptr;

  size_t numInputs() const { return inputs.size(); }
  bool hasInput(size_t i) const { return i < inputs.size() && inputs[i] != nullptr; }
  const Tensor &input(size_t i) const;
  const Attrs &attrs() const { return node.attrs; }
  size_t numOutputs() const { return node.outputs.size(); }
  Error error(const std::string &message) const { return Error::user(message, node.loc); }
};

using KernelFn = Expected<std::vector<Tensor>> (*)(KernelContext &);

using KernelRegistry = OpTable<KernelFn>;

/// The reference kernel of `op`, or nullptr.
KernelFn kernelFor(OpKind op);

// One per op family (ir/OpFamilies.def): its file registers its ops.
#define COIL_OP_FAMILY(F) void register##F##Kernels(KernelRegistry &r);
#include "ir/OpFamilies.def"
#undef COIL_OP_FAMILY

// --- helpers shared by kernels

/// Outputs larger than this many elements are refused: the interpreter holds every value in
/// memory, and a shape this large comes from a malformed shape input, not a model.
constexpr int64_t kMaxInterpElements = int64_t(1) << 36;
/// A user error naming `shape` when it has more than kMaxInterpElements elements; kernels whose
/// output shape comes from run-time values (Expand, Tile, Pad, ...) call it before allocating.
Status checkOutputSize(const KernelContext &ctx, const Shape &shape);

/// Numpy broadcasting of concrete shapes; error names both shapes.
Expected<Shape> broadcastConcrete(const Shape &a, const Shape &b);
/// For each element of `out` (row-major), the flat index of the element of a tensor of shape
/// `in` that broadcasts to it. `in` must broadcast to `out`.
std::vector<int64_t> broadcastIndex(const Shape &in, const Shape &out);
/// Row-major multi-index of flat index `flat` in `shape`.
void unravelIndex(int64_t flat, const Shape &shape, std::vector<int64_t> &idx);

} // namespace coil
