/// \file Element types of coil tensors and their conversions (the compiler and the runtime).
///
/// Floating types: f64, f32, f16 (IEEE binary16), bf16 (bfloat16). Integer types: i64, i32,
/// i16, i8 (two's complement), u64, u32, u16, u8. bool is stored as one byte, 0 or 1.
/// Conversion from float to an integer type truncates toward zero (as a C cast); converting
/// NaN or an out-of-range float to an integer yields an unspecified value but never UB.
/// Conversion to f16/bf16 rounds to nearest, ties to even.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace coil {

// X(Enum, text name, C++ storage type, size in bytes)
#define COIL_FOR_EACH_DTYPE(X)                                                                     \
  X(F64, "f64", double, 8)                                                                         \
  X(F32, "f32", float, 4)                                                                          \
  X(F16, "f16", uint16_t, 2)                                                                       \
  X(BF16, "bf16", uint16_t, 2)                                                                     \
  X(I64, "i64", int64_t, 8)                                                                        \
  X(I32, "i32", int32_t, 4)                                                                        \
  X(I16, "i16", int16_t, 2)                                                                        \
  X(I8, "i8", int8_t, 1)                                                                           \
  X(U64, "u64", uint64_t, 8)                                                                       \
  X(U32, "u32", uint32_t, 4)                                                                       \
  X(U16, "u16", uint16_t, 2)                                                                       \
  X(U8, "u8", uint8_t, 1)                                                                          \
  X(Bool, "bool", uint8_t, 1)

enum class DType : uint8_t {
#define COIL_DTYPE_ENUM(E, N, T, S) E,
  COIL_FOR_EACH_DTYPE(COIL_DTYPE_ENUM)
#undef COIL_DTYPE_ENUM
};

/// "f32", "bf16", "bool", ...
std::string_view dtypeName(DType t);
std::optional<DType> parseDType(std::string_view name);
size_t dtypeSize(DType t);
bool isFloat(DType t);    ///< f64 f32 f16 bf16
bool isInteger(DType t);  ///< signed or unsigned integer (not bool)
bool isSigned(DType t);   ///< floats and signed integers
bool isUnsigned(DType t); ///< u8..u64 and bool

/// The dtype of an ONNX TensorProto.DataType code (1 = FLOAT, 7 = INT64, 16 = BFLOAT16, ...),
/// as carried by attributes such as Cast's `to`; nullopt for types coil lacks (string, fp8, ...).
std::optional<DType> dtypeFromOnnxCode(int64_t code);

/// The interval that rounded results saturate to when stored as `t` (quantization and
/// integer outputs of float computations): the type's range for 8, 16 and 32-bit integers,
/// [-9.2e18, 9.2e18] (inside int64) for every other type.
struct SaturationRange {
  double lo, hi;
};
SaturationRange saturationRange(DType t);

float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t h);
uint16_t floatToBf16(float f);

/// Reads element `i` of a buffer of type `t` as double / int64 (floats truncate toward zero,
/// saturating; NaN reads as 0).
double loadAsDouble(DType t, const void *data, size_t i);
int64_t loadAsInt(DType t, const void *data, size_t i);
/// Writes `v` converted to `t` into element `i` (integers wrap modulo 2^bits, as ONNX Cast).
void storeFromDouble(DType t, void *data, size_t i, double v);
void storeFromInt(DType t, void *data, size_t i, int64_t v);

} // namespace coil
