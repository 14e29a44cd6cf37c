/// \file Imports an ONNX model file into a Graph.
///
/// Accepts opsets 7 through the newest the build's onnx defines (default domain only); nodes of
/// op versions older than opset 13's are converted to their opset-13 form (OldOpsets.h).
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
  int64_t removedNodes = 0;  ///< Identity / Dropout removed
  int64_t opset = 0;         ///< default-domain opset of the model
  int64_t upgradedNodes = 0; ///< nodes of versions older than opset 13's, converted
};

Expected<Graph> importOnnxFile(const std::string &path, const ImportOptions &opts = {},
                               ImportStats *stats = nullptr);
/// Imports from serialized bytes; `path` names the model in messages and locates external data.
Expected<Graph> importOnnxBytes(const std::string &bytes, const std::string &path,
                                const ImportOptions &opts = {}, ImportStats *stats = nullptr);

/// The opset whose op forms the importer's node handling takes (see OldOpsets.h): nodes of
/// older versions are converted to these forms while importing.
constexpr int64_t kMinOnnxOpset = 13;
/// The opsets the importer accepts: kOldestOnnxOpset through maxOnnxOpset() (the newest the
/// build's onnx package defines). Older models are accepted when each op has the version it
/// has at kOldestOnnxOpset.
constexpr int64_t kOldestOnnxOpset = 7;
int64_t maxOnnxOpset();

/// Reads a serialized onnx.TensorProto file (the backend test-data format) into a Tensor.
Expected<Tensor> readTensorProtoFile(const std::string &path);

} // namespace coil
