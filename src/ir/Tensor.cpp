// Tensor storage and conversions.
#include "ir/Tensor.h"

#include "support/Check.h"

#include <cstring>

namespace coil {

int64_t numelOf(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<int64_t> contiguousStrides(const Shape &shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i)
    s[size_t(i)] = s[size_t(i + 1)] * shape[size_t(i + 1)];
  return s;
}

std::string intsStr(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  __int128 n = 1;
  for (int64_t d : shape_) {
    COIL_CHECK(d >= 0) << "negative dimension in tensor shape " << shapeStr(shape_);
    n *= d;
    COIL_CHECK(n <= kMaxTensorElements)
        << "tensor shape " << shapeStr(shape_) << " has more than 2^59 elements";
  }
  buf_ = std::make_shared<std::vector<uint8_t>>(nbytes(), 0);
}

Tensor Tensor::fromDoubles(DType dtype, Shape shape, const std::vector<double> &values) {
  Tensor t(dtype, std::move(shape));
  COIL_CHECK(int64_t(values.size()) == t.numel()) << "fromDoubles: size mismatch";
  for (size_t i = 0; i < values.size(); ++i) t.setDouble(int64_t(i), values[i]);
  return t;
}

Tensor Tensor::fromInts(DType dtype, Shape shape, const std::vector<int64_t> &values) {
  Tensor t(dtype, std::move(shape));
  COIL_CHECK(int64_t(values.size()) == t.numel()) << "fromInts: size mismatch";
  for (size_t i = 0; i < values.size(); ++i) t.setInt(int64_t(i), values[i]);
  return t;
}

Tensor Tensor::fromBytes(DType dtype, Shape shape, const void *bytes, size_t size) {
  Tensor t(dtype, std::move(shape));
  COIL_CHECK(size == t.nbytes()) << "fromBytes: size mismatch";
  if (size) std::memcpy(t.data(), bytes, size);
  return t;
}

std::vector<double> Tensor::toDoubles() const {
  std::vector<double> v(static_cast<size_t>(numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = getDouble(int64_t(i));
  return v;
}

std::vector<int64_t> Tensor::toInts() const {
  std::vector<int64_t> v(static_cast<size_t>(numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = getInt(int64_t(i));
  return v;
}

Tensor Tensor::clone() const {
  Tensor t = *this;
  if (buf_) t.buf_ = std::make_shared<std::vector<uint8_t>>(*buf_);
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  COIL_CHECK(numelOf(shape) == numel())
      << "reshaped: " << shapeStr(shape_) << " to " << shapeStr(shape);
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::castTo(DType dtype) const {
  if (dtype == dtype_) return clone();
  Tensor t(dtype, shape_);
  int64_t n = numel();
  bool exactInt = !isFloat(dtype_) && !isFloat(dtype);
  for (int64_t i = 0; i < n; ++i) {
    if (exactInt)
      t.setInt(i, getInt(i));
    else
      t.setDouble(i, getDouble(i));
  }
  return t;
}

bool Tensor::identical(const Tensor &o) const {
  if (dtype_ != o.dtype_ || shape_ != o.shape_) return false;
  return nbytes() == 0 || std::memcmp(data(), o.data(), nbytes()) == 0;
}

} // namespace coil
