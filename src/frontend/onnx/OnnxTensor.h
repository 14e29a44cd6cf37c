/// \file Conversions from onnx protobuf messages to coil types (used by the importer and by
/// tests that build ModelProtos directly).
#pragma once

#include "ir/Tensor.h"
#include "onnx/onnx.pb.h"
#include "support/Expected.h"

#include <string>

namespace coil {

/// coil's dtype for an onnx TensorProto.DataType; a user error names `tensorName` for types
/// coil does not have (string, complex, fp8, int4, ...).
Expected<DType> dtypeFromOnnx(int32_t elemType, const std::string &tensorName);

/// Decodes a TensorProto (raw_data, the typed fields, or external data read relative to
/// `baseDir`) into a Tensor.
Expected<Tensor> tensorFromProto(const onnx::TensorProto &tp, const std::string &baseDir);

} // namespace coil
