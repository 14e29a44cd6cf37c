/// \file Private helpers shared by the Linalg kernel files (Linalg*.cpp).
#pragma once

#include "interp/Kernel.h"
#include "ir/OpAttrs.h"

#include <string>
#include <vector>

namespace coil::linalg {

/// Sliding-window geometry of a conv or pool on concrete shapes: per spatial dim the input
/// size, kernel size, stride, dilation, begin/end padding actually applied and output size.
struct Window {
  size_t nd = 0;
  std::vector<int64_t> in, kernel, strides, dilations, padBegin, padEnd, out;
};

/// The window of the decoded attributes `a` (ir/OpAttrs.h) over input spatial dims `in` with
/// kernel `kernel`, on concrete sizes.
Expected<Window> computeWindow(const KernelContext &ctx, const WindowAttrs &a, const Shape &in,
                               const Shape &kernel);

/// Rounds to nearest even and saturates to the range of `t` (u8 or i8 and other integers).
int64_t saturateRound(double v, DType t);

void registerLinalgConvKernels(KernelRegistry &r);
void registerLinalgPoolKernels(KernelRegistry &r);
void registerLinalgImageKernels(KernelRegistry &r);
void registerLinalgSampleKernels(KernelRegistry &r);
void registerLinalgRnnKernels(KernelRegistry &r);
void registerLinalgAttentionKernels(KernelRegistry &r);

} // namespace coil::linalg
