/// \file Folding a convolution's bias add (and a ReLU or Clip after it) into the conv extern's
/// epilogue (coil_cpu_conv_bias_*, coil_cpu_conv_nhwc_bias_*).
#pragma once

#include "lower/LoopIR.h"

namespace coil::loop {

/// What foldConvBias folds.
struct FoldConvBiasOptions {
  /// A CUDA program: only convolutions whose fused extern has a CUDA twin for their dtype
  /// (kernels/Externs.def: f16 and bf16) fold, the others would run on the host; and of the
  /// clamps only a ReLU (lo = 0, no upper bound), which cuDNN's fused convolution applies. A
  /// Clip stays a kernel of its own: clamping the rounded sum gives what rounding the clamped
  /// sum gives, so the one rounding is kept.
  bool cuda = false;
};

/// Rewrites, in place, every `coil_cpu_conv_<dtype>` extern (output [n, m, spatial...]) and
/// `coil_cpu_conv_nhwc_<dtype>` extern (output [n, spatial..., m]) of a dtype that its fused
/// extern has (kernels/Externs.def: conv_bias and conv_nhwc_bias, f64, f32, f16, bf16) whose
/// only reader is a Pointwise node computing `conv + bias[channel]` (either order; the bias a
/// node of the conv's dtype and shape [m], read at the channel index; the conv read at the same
/// point; for f16/bf16 possibly through exact casts to f32, the sum rounded by a final cast, as
/// lowering writes it) into one fused call (`coil_cpu_conv_bias_<dtype>` or
/// `coil_cpu_conv_nhwc_bias_<dtype>`) in that node's place. Then every such call without a
/// clamp whose only reader is a Pointwise clamp of the same shape, `x < lo ? lo : x` (ReLU for
/// lo = 0) and/or then `x > hi ? hi : x` (Clip) with finite constants, gets the clamp in that
/// reader's place. A node that is a program output, or read by any other node, is never
/// absorbed; absorbed nodes are removed and the node ids renumbered. Returns the number of
/// folds.
///
/// Numerics: f32/f64 results are identical (the same operations in the same order, in the
/// dtype). f16/bf16 add the bias to the f32 convolution and clamp in f32, then round once,
/// where the unfused program rounds the convolution first and the sum again (the interpreter
/// too rounds Conv's result, bias included, once).
int foldConvBias(LoopProgram &p, const FoldConvBiasOptions &o = {});

} // namespace coil::loop
