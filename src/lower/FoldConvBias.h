/// \file Folding a convolution's bias add (and a ReLU or Clip after it) into the CPU conv
/// extern's epilogue (coil_cpu_conv_bias_*).
#pragma once

#include "lower/LoopIR.h"

namespace coil::loop {

/// Rewrites, in place, every `coil_cpu_conv_<f32|f64>` extern (output [n, m, spatial...])
/// whose only reader is a Pointwise node computing `conv + bias[channel]` (either order; the
/// bias a node of the conv's dtype and shape [m], read at the channel index; the conv read at
/// the same point) into one `coil_cpu_conv_bias_<dtype>` call in that node's place. Then every
/// such call without a clamp whose only reader is a Pointwise clamp of the same shape, `x < lo
/// ? lo : x` (ReLU for lo = 0) and/or then `x > hi ? hi : x` (Clip) with finite constants,
/// gets the clamp in that reader's place. A node that is a program output, or read by any
/// other node, is never absorbed; absorbed nodes are removed and the node ids renumbered. The
/// results are identical (the same operations in the same order, in the dtype). For CPU
/// programs only (the extern has no CUDA twin). Returns the number of folds.
int foldConvBias(LoopProgram &p);

} // namespace coil::loop
