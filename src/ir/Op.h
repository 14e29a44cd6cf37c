/// \file OpKind: the enumeration generated from Ops.def, and lookups by ONNX name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace coil {

enum class OpKind : uint16_t {
#define COIL_OP(E, N, F) E,
#include "ir/Ops.def"
  NumOps
};

enum class OpFamily : uint8_t { Elementwise, Reduction, Linalg, DataMovement, ShapeOps };

/// The ONNX op type, e.g. "Conv".
std::string_view opName(OpKind k);
OpFamily opFamily(OpKind k);
std::optional<OpKind> opFromName(std::string_view onnxName);
constexpr size_t kNumOps = size_t(OpKind::NumOps);

} // namespace coil
