/// \file Reading and writing numpy `.npy` arrays and `.npz` archives (zip, via libzip).
///
/// dtypes map to numpy descriptors: f64 '<f8', f32 '<f4', f16 '<f2', i64 '<i8', i32 '<i4',
/// i16 '<i2', i8 '|i1', u64 '<u8', u32 '<u4', u16 '<u2', u8 '|u1', bool '|b1'; bf16, which numpy
/// lacks, is written as raw 2-byte values with descriptor '<V2' and read back as bf16.
/// Fortran-ordered arrays are read (converted to row-major); coil always writes C order.
/// Archive entries are named `<key>.npy`; keys are the graph's input / output names.
#pragma once

#include "ir/Tensor.h"
#include "support/Expected.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace coil {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// Parses one `.npy` image; `what` names it in errors.
Expected<Tensor> parseNpy(const std::string &bytes, const std::string &what);
std::string serializeNpy(const Tensor &t);

/// Reads every array of an `.npz` file, in archive order.
Expected<NamedTensors> readNpz(const std::string &path);
/// The same for an archive held in memory (`what` names it in errors); the fuzz target's entry.
Expected<NamedTensors> readNpzBytes(std::string_view bytes, const std::string &what);
/// Writes an uncompressed `.npz` (deterministic: entries in the given order).
Status writeNpz(const std::string &path, const NamedTensors &arrays);

Expected<Tensor> readNpy(const std::string &path);
Status writeNpy(const std::string &path, const Tensor &t);

} // namespace coil
