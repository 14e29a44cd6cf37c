/// \file Helpers shared by the ShapeOps inference functions and the ONNX importer's shape
/// folding: exact symbolic division and range-aware min/max of SymInts, and the ONNX rules
/// for Reshape targets, Slice bounds and Squeeze/Unsqueeze axes.
#pragma once

#include "ir/Infer.h"

#include <optional>
#include <vector>

namespace coil {

/// `a / b` when `b` provably divides `a` (monomials: constant coefficient and symbol factors);
/// nullopt otherwise.
std::optional<SymInt> symDivExact(const SymInt &a, const SymInt &b);
/// min / max that resolve when the bounds of the operands (under default symbol ranges
/// [0, 2^62]) decide the comparison.
SymInt symMinBounded(const SymInt &a, const SymInt &b);
SymInt symMaxBounded(const SymInt &a, const SymInt &b);
/// True when `a >= 0` is provable from bounds.
bool symNonNegative(const SymInt &a);

/// The output shape of Reshape(input of shape `in`, target `target`) with ONNX semantics
/// (0 copies the input dim unless `allowZero`; one -1 is inferred).
Expected<std::vector<SymInt>> reshapeTarget(const std::vector<SymInt> &in,
                                            const std::vector<SymInt> &target, bool allowZero);

/// ONNX Slice on one axis of length `dim`: the first index and the number of elements.
struct SliceRange {
  SymInt start;
  SymInt length;
};
/// Steps must lie in [-kMaxSliceStep, kMaxSliceStep] (inference rejects others, as the run-time
/// kernels do); within it, with dims of at most 2^62, a step larger in magnitude than the dim
/// takes one element, so nothing is lost.
constexpr int64_t kMaxSliceStep = int64_t(1) << 62;
/// `step` is clamped into that range, so that no value of it overflows.
SliceRange sliceAxis(const SymInt &dim, int64_t start, int64_t end, int64_t step);
/// The same with symbolic start and end and a positive step. A symbolic bound is clamped as
/// ONNX clamps only when its sign is provable under the default symbol ranges (non-negative:
/// min(e, dim); negative: max(dim + e, 0)); nullopt when the sign is unknown.
std::optional<SliceRange> sliceAxisSym(const SymInt &dim, const SymInt &start, const SymInt &end,
                                       int64_t step);

/// Normalized, sorted, duplicate-free axes for rank `rank`; error on out-of-range/duplicates.
Expected<std::vector<int64_t>> normalizeAxes(const std::vector<int64_t> &axes, int64_t rank);

} // namespace coil
