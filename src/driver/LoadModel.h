/// \file Loads a model given on the command line: an ONNX file or a `.coil` text-IR file.
#pragma once

#include "frontend/onnx/OnnxImporter.h"
#include "ir/Graph.h"
#include "support/Expected.h"

#include <string>

namespace coil {

struct LoadedModel {
  Graph graph;
  ImportStats stats; ///< import statistics (ONNX models only)
  bool fromOnnx = false;
};

/// Dispatches on the extension (`.onnx` or `.coil`); anything else is a user error. Symbol
/// ranges in `opts` apply to both formats.
Expected<LoadedModel> loadModel(const std::string &path, const ImportOptions &opts = {});

/// The SHA-256 of everything a model consists of: its file's bytes and, for ONNX, the bytes of
/// each external data file its tensors name (the compile cache of `coil run MODEL` keys on it).
/// A user error when the model file cannot be read; external files that cannot be read are
/// keyed as missing (importing reports them).
Expected<std::string> modelDigest(const std::string &path);

/// Symbol ranges from `NAME=MIN:MAX` texts (`coil compile --dynamic`, the compiler's C API);
/// a user error names the malformed text.
Expected<ImportOptions> parseSymbolRanges(const std::vector<std::string> &texts);

/// Orders the arrays of an input file by the graph's inputs: every input must be present
/// exactly once and no other array may be, or a user error lists what is wrong.
Expected<std::vector<Tensor>> matchInputs(const Graph &g,
                                          const std::vector<std::pair<std::string, Tensor>> &arrays,
                                          const std::string &file);

} // namespace coil
