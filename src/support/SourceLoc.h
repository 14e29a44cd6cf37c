/// \file Where a diagnostic points: a file, an ONNX node and its op type, or a text position.
#pragma once

#include <string>

namespace coil {

/// Every field is optional (empty / 0 when unknown). The importer stamps file, node and op on
/// each Graph IR node; passes copy the location to the nodes they create; the text parser fills
/// line and column.
struct SourceLoc {
  std::string file; ///< model or text file as given on the command line
  std::string node; ///< ONNX node name (or the name of the node's first output)
  std::string op;   ///< op type, e.g. "Conv"
  int line = 0;     ///< 1-based line in a text file (0 when unknown)
  int column = 0;   ///< 1-based column (0 when unknown)

  bool empty() const { return file.empty() && node.empty() && op.empty() && line == 0; }
  /// "model.onnx: node 'Conv_17' (Conv)" or "graph.coil:3:14"; empty when nothing is known.
  std::string str() const;
};

} // namespace coil
