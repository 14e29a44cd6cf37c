/// \file Tensor: a concrete, dense, row-major array (constants, interpreter values, I/O).
///
/// A Tensor owns (shares) a byte buffer of numel() * dtypeSize(dtype) bytes laid out
/// contiguously in row-major order. Copies share the buffer (shallow); `clone()` copies it.
/// Rank-0 tensors have shape {} and one element. Tensors are mutable through `data()`; code
/// that writes into a tensor it did not create must clone it first.
#pragma once

#include "support/DType.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace coil {

using Shape = std::vector<int64_t>;

/// The most elements a tensor may have: 2^59, so that its byte size (at most 8 bytes per
/// element) stays within 2^62 and sums of a few such sizes within int64. Type inference
/// rejects larger shapes known at compile time; the run-time shape kernels
/// (kernels/cpu/CpuShape.cpp) and the runtime's input validation apply the same bound.
constexpr int64_t kMaxTensorElements = int64_t(1) << 59;

/// Product of dims (1 for rank 0).
int64_t numelOf(const Shape &shape);
/// Row-major strides in elements.
std::vector<int64_t> contiguousStrides(const Shape &shape);
/// "[2, 3, 4]": a list of integers (a shape, axes, pads, a permutation) as messages print it.
std::string intsStr(const std::vector<int64_t> &v);
inline std::string shapeStr(const Shape &shape) {
  return intsStr(shape);
}

class Tensor {
public:
  Tensor() = default;
  /// A tensor of the given type and shape, zero-filled.
  Tensor(DType dtype, Shape shape);

  /// Builds a tensor from values converted to `dtype`.
  static Tensor fromDoubles(DType dtype, Shape shape, const std::vector<double> &values);
  static Tensor fromInts(DType dtype, Shape shape, const std::vector<int64_t> &values);
  /// Wraps raw bytes (copied); `bytes.size()` must equal numel * dtypeSize.
  static Tensor fromBytes(DType dtype, Shape shape, const void *bytes, size_t size);
  static Tensor scalar(DType dtype, double v) { return fromDoubles(dtype, {}, {v}); }

  DType dtype() const { return dtype_; }
  const Shape &shape() const { return shape_; }
  int64_t rank() const { return int64_t(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[size_t(i)]; }
  int64_t numel() const { return numelOf(shape_); }
  size_t nbytes() const { return size_t(numel()) * dtypeSize(dtype_); }
  bool defined() const { return buf_ != nullptr; }

  void *data() { return buf_ ? buf_->data() : nullptr; }
  const void *data() const { return buf_ ? buf_->data() : nullptr; }
  template <typename T> T *dataAs() { return static_cast<T *>(data()); }
  template <typename T> const T *dataAs() const { return static_cast<const T *>(data()); }

  /// Element access by flat index, converting.
  double getDouble(int64_t i) const { return loadAsDouble(dtype_, data(), size_t(i)); }
  int64_t getInt(int64_t i) const { return loadAsInt(dtype_, data(), size_t(i)); }
  void setDouble(int64_t i, double v) { storeFromDouble(dtype_, data(), size_t(i), v); }
  void setInt(int64_t i, int64_t v) { storeFromInt(dtype_, data(), size_t(i), v); }
  std::vector<double> toDoubles() const;
  std::vector<int64_t> toInts() const;

  /// Deep copy.
  Tensor clone() const;
  /// Same data, new shape with the same numel (shares the buffer).
  Tensor reshaped(Shape shape) const;
  /// Elementwise conversion (ONNX Cast semantics for numbers).
  Tensor castTo(DType dtype) const;
  /// Byte-wise equality of dtype, shape and contents.
  bool identical(const Tensor &o) const;
  friend bool operator==(const Tensor &a, const Tensor &b) { return a.identical(b); }

private:
  DType dtype_ = DType::F32;
  Shape shape_;
  std::shared_ptr<std::vector<uint8_t>> buf_;
};

} // namespace coil
