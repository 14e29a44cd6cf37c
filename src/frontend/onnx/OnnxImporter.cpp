// ONNX importer (placeholder until the importer lands).
#include "frontend/onnx/OnnxImporter.h"

namespace coil {

Expected<Graph> importOnnxFile(const std::string &path, const ImportOptions &opts,
                               ImportStats *stats) {
  return Error::user("the ONNX importer is not built yet", SourceLoc{path});
}
Expected<Graph> importOnnxBytes(const std::string &bytes, const std::string &path,
                                const ImportOptions &opts, ImportStats *stats) {
  return Error::user("the ONNX importer is not built yet", SourceLoc{path});
}
Expected<Tensor> readTensorProtoFile(const std::string &path) {
  return Error::user("the ONNX importer is not built yet", SourceLoc{path});
}

} // namespace coil
