/// \file Private helpers shared by the Linalg kernel files (Linalg*.cpp).
#pragma once

#include "interp/Kernel.h"

#include <string>
#include <vector>

namespace coil::linalg {

/// Sliding-window geometry of a conv or pool on concrete shapes: per spatial dim the input
/// size, kernel size, stride, dilation, begin/end padding actually applied and output size.
struct Window {
  size_t nd = 0;
  std::vector<int64_t> in, kernel, strides, dilations, padBegin, padEnd, out;
};

/// Reads auto_pad/pads/strides/dilations (and ceil_mode when `allowCeil`) for input spatial
/// dims `in` and kernel `kernel`, and computes the output sizes exactly as inference does.
Expected<Window> computeWindow(const KernelContext &ctx, const Shape &in, const Shape &kernel,
                               bool allowCeil);

/// Rounds to nearest even and saturates to the range of `t` (u8 or i8 and other integers).
int64_t saturateRound(double v, DType t);

void registerLinalgConvKernels(KernelRegistry &r);
void registerLinalgPoolKernels(KernelRegistry &r);
void registerLinalgImageKernels(KernelRegistry &r);
void registerLinalgSampleKernels(KernelRegistry &r);
void registerLinalgRnnKernels(KernelRegistry &r);

} // namespace coil::linalg
