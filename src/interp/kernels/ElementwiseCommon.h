/// \file Helpers shared by the Elementwise reference kernels (private to interp/kernels/).
///
/// Values are computed in one of three domains picked by the dtype: floats in double, signed
/// integers in int64 and unsigned integers (and bool) in uint64, with results stored back
/// rounded (floats, to nearest even) or wrapped (integers) to the output dtype.
#pragma once

#include "interp/Kernel.h"

#include <string>
#include <vector>

namespace coil::elementwise {

enum class Domain { Float, Signed, Unsigned };

inline Domain domainOf(DType t) {
  if (isFloat(t)) return Domain::Float;
  return isUnsigned(t) ? Domain::Unsigned : Domain::Signed;
}

/// `v` rounded to the nearest float (to infinity beyond the largest float), without UB.
float toFloat(double v);

/// `v` rounded to the nearest value of float dtype `t` (ties to even), without the double
/// rounding of going through f32 for f16 and bf16.
double roundToFloatDType(DType t, double v);

/// Stores `v` into element `i` of `out`: floats round to nearest even, integers truncate
/// toward zero and wrap, bool is v != 0.
void storeDouble(Tensor &out, int64_t i, double v);

/// The shape all `inputs` broadcast to and, per input, the flat index of its element for each
/// output element (nullptr inputs are skipped).
struct Broadcast {
  Shape shape;
  /// Per input, the map from output to input flat index; empty when the input already has the
  /// output's shape (the identity).
  std::vector<std::vector<int64_t>> index;

  int64_t at(size_t input, int64_t i) const {
    const std::vector<int64_t> &m = index[input];
    return m.empty() ? i : m[size_t(i)];
  }
};
Expected<Broadcast> broadcastInputs(const KernelContext &ctx,
                                    const std::vector<const Tensor *> &inputs);


/// Checks that the node has at least `n` present inputs.
Status needInputs(const KernelContext &ctx, size_t n);

void registerElementwiseConvertKernels(KernelRegistry &r);

} // namespace coil::elementwise
