/// \file Helpers private to the DataMovement kernels (DataMovement*.cpp).
#pragma once

#include "interp/Kernel.h"

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace coil::dm {

/// The elements of an integer input (i32 or i64; `what` names it in errors).
Expected<std::vector<int64_t>> readIndexTensor(const KernelContext &ctx, size_t input,
                                               const char *what);
/// The elements of any integer (or bool) input.
Expected<std::vector<int64_t>> readIntTensor(const KernelContext &ctx, size_t input,
                                             const char *what);
/// A scalar or one-element integer input.
Expected<int64_t> readScalarInt(const KernelContext &ctx, size_t input, const char *what);

/// Maps index `idx` of a dim of size `dim` (negative counts from the end) into [0, dim);
/// a user error names `what` and the allowed range when it is out of range.
Expected<int64_t> normalizeIndex(const KernelContext &ctx, int64_t idx, int64_t dim,
                                 const char *what);

/// ScatterElements / ScatterND reduction.
enum class Reduction { None, Add, Mul, Max, Min };
Expected<Reduction> parseReduction(const KernelContext &ctx);
/// dst = reduce(dst, src) for one element of type `t` (None copies).
void combineElement(DType t, void *dst, const void *src, Reduction r);

/// Three-way comparison of two elements of type `t` by value (NaN sorts last, NaNs equal).
int compareElements(DType t, const void *a, const void *b);

/// memcpy that accepts null pointers when `n` is 0 (empty tensors have no buffer).
inline void copyBytes(void *dst, const void *src, size_t n) {
  if (n) std::memcpy(dst, src, n);
}

/// Copies element `src` of `from` into element `dst` of `to` (same dtype), byte for byte.
inline void copyElement(Tensor &to, int64_t dst, const Tensor &from, int64_t src) {
  size_t es = dtypeSize(from.dtype());
  std::memcpy(static_cast<uint8_t *>(to.data()) + size_t(dst) * es,
              static_cast<const uint8_t *>(from.data()) + size_t(src) * es, es);
}

} // namespace coil::dm
