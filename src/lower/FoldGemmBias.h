/// \file Folding per-column bias adds (and a ReLU after them) into the GEMM extern's epilogue.
#pragma once

#include "lower/LoopIR.h"

namespace coil::loop {

/// Rewrites, in place, every GEMM extern (`coil_cpu_gemm_<dtype>`, output [batch..., m, n])
/// whose only reader is a Pointwise node computing `gemm + bias` (either order; f16/bf16
/// possibly through exact casts to f32) into one `coil_cpu_gemm_bias_<dtype>` call, when the
/// bias is a Constant or Input node of the GEMM's dtype with shape [1..., n] read at the
/// output's last index, and the Pointwise node has the GEMM's shape and reads it at the same
/// point. Then every `coil_cpu_gemm_bias_*` call whose only reader is a Pointwise ReLU
/// (`x < 0 ? 0 : x`, or Max(x, 0)) of the same shape gets relu = 1 in that reader's place.
/// Folded nodes take the place of the Pointwise node they absorb (so every operand, the bias
/// included, is defined before them) and keep its name; the absorbed GEMM is removed and the
/// node ids renumbered. A node that is a program output, or read by any other node, is never
/// absorbed. Returns the number of folds (bias adds plus ReLUs).
///
/// Numerics: f32/f64 are unchanged (product rounded, then the sum); f16/bf16 add the bias to
/// the f32 product and round once, where the unfused program rounds the product first.
int foldGemmBias(LoopProgram &p);

} // namespace coil::loop
