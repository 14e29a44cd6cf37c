/// \file Imports an ONNX model file into a Graph.
///
/// Accepts opsets 13 through the newest the build's onnx defines (default domain only).
/// Initializers become constants (external data is read relative to the model's folder);
/// graph inputs that also have an initializer become constants; `dim_param`s become symbols
/// (a missing dim becomes a fresh symbol); Identity and Dropout (inference mode) are removed;
/// shape subgraphs (Shape, Gather, Concat, Unsqueeze, Squeeze, Slice, Cast, integer
/// arithmetic, Range, ...) over symbolic dims are folded into symbolic constants, so Reshape,
/// Expand, ConstantOfShape and the like see their targets at compile time.
///
/// Every node is validated against the ONNX schema of its opset version (arity, attribute
/// names, kinds and required attributes) and typed by inference. All problems found are
/// reported in one error, each line naming the file, node and op.
#pragma once

#include "ir/Graph.h"
#include "support/Expected.h"

#include <string>

namespace coil {

struct ImportOptions {
  /// Ranges for symbols (from --dynamic NAME=MIN:MAX). dim_param symbols not listed get
  /// [1, 2^62]; other symbols (unnamed and data-dependent dims) [0, 2^62].
  SymRanges symbolRanges;
};

/// Import statistics, for `coil inspect` and the shape-folding report.
struct ImportStats {
  int64_t onnxNodes = 0; ///< nodes in the ONNX graph
  /// Nodes gone at import other than Identity/Dropout: folded into (symbolic) constants, or
  /// left dead by folding (e.g. a Cast to float whose only user folded).
  int64_t foldedNodes = 0;
  int64_t removedNodes = 0; ///< Identity / Dropout removed
  int64_t opset = 0;        ///< default-domain opset of the model
};

Expected<Graph> importOnnxFile(const std::string &path, const ImportOptions &opts = {},
                               ImportStats *stats = nullptr);
/// Imports from serialized bytes; `path` names the model in messages and locates external data.
Expected<Graph> importOnnxBytes(const std::string &bytes, const std::string &path,
                                const ImportOptions &opts = {}, ImportStats *stats = nullptr);

/// The opsets the importer accepts: kMinOnnxOpset through maxOnnxOpset() (the newest the
/// build's onnx package defines). Older models are accepted when no op changed since 13.
constexpr int64_t kMinOnnxOpset = 13;
int64_t maxOnnxOpset();

/// Reads a serialized onnx.TensorProto file (the backend test-data format) into a Tensor.
Expected<Tensor> readTensorProtoFile(const std::string &path);

} // namespace coil
