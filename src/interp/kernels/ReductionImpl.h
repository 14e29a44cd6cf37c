/// \file Helpers shared by the Reduction family's kernels (Reduction.cpp, ReductionNorm.cpp).
#pragma once

#include "interp/Kernel.h"
#include "ir/OpAttrs.h"

#include <vector>

namespace coil {

/// A reduction of a tensor over a set of axes.
struct ReducePlan {
  Shape outShape;                ///< with or without the reduced dims, per keepdims
  std::vector<int64_t> outIndex; ///< for each input element (row-major), its output element
  int64_t count = 1;             ///< input elements per output element
};
/// Empty `axes` reduces every axis. Axes may be negative; out of range or repeated is an error.
Expected<ReducePlan> planReduce(const Shape &shape, const std::vector<int64_t> &axes,
                                bool keepdims);

/// A tensor viewed as [outer, n, inner] around one axis.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
  int64_t at(int64_t o, int64_t k, int64_t i) const { return (o * n + k) * inner + i; }
};
AxisSplit splitAt(const Shape &shape, int64_t axis);

/// Normalizes `axis` for `rank` (>= 1), or a user error about this node.
Expected<int64_t> kernelAxis(const KernelContext &ctx, int64_t axis, int64_t rank);

/// Softmax (or log-softmax) of a row in place, max-stabilized.
void softmaxRow(std::vector<double> &row, bool log);

/// Three-way comparison of two elements of one tensor in its dtype's order: exact for every
/// integer type (signed or unsigned), NaN above every number for floats.
class ScalarCompare {
public:
  explicit ScalarCompare(const Tensor &t);
  int compare(int64_t a, int64_t b) const;
  bool isNaN(int64_t i) const;

private:
  const Tensor &t_;
  bool fl_ = false, uns_ = false;
};

/// Copies element `si` of `src` to element `di` of `dst` (same dtype), bit for bit.
void copyElement(const Tensor &src, int64_t si, Tensor &dst, int64_t di);

/// Normalizations and losses (ReductionNorm.cpp).
void registerReductionNormKernels(KernelRegistry &r);

} // namespace coil
