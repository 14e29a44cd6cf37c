/// \file GEMM + epilogue fusion: a GEMM extern and the pointwise kernel that consumes it become
/// one kernel whose body is the GEMM's epilogue (an epilogue visitor tree, printed as a CUTLASS
/// kernel by codegen/cuda/CudaGemm.h).
///
/// A GEMM extern step (`gemm` or `gemm_bias` of f16 / bf16) is fused with kernel K when:
///  - K is the only step that reads the GEMM's output, which is no program output;
///  - K is pointwise (one phase, no reductions) over exactly the GEMM's output shape, stores one
///    node of that shape at its point, and loads the GEMM's output only at its point;
///  - every other load of K is, over the output's (rows, columns) with the leading dims folded
///    into rows, a dense tensor of the output's shape at the same point, a per-column vector
///    (all dims 1 but the last, read at the column) or a per-row vector (the output's shape with
///    a last dim of 1, read at the row): CUTLASS's aux load, row and column broadcasts;
///  - every statement on the way from those loads to the store is one the epilogue grammar has
///    (arithmetic, min / max against a constant, exp, log, sqrt, tanh, erf, sigmoid, abs,
///    comparisons, select, casts between floating types);
///  - the GEMM is a plain one: A not transposed, alpha 1, a batch only when B is shared and A
///    contiguous (folded into the rows); k and n constants that are multiples of 8 (16-byte rows
///    for TMA); m may be symbolic.
/// The fused kernel takes K's place in the schedule (the GEMM's operands are ready earlier), the
/// GEMM's output is no longer realized, and K's reads gain A, B (and the extern's bias).
///
/// Numerics: the epilogue reads the f32 accumulator where the unfused program reads the product
/// rounded to f16 / bf16 (one rounding fewer), as the extern's own bias epilogue does.
#pragma once

#include "sched/Kernel.h"

namespace coil::sched {

struct GemmFusionOptions {
  bool enabled = false; ///< off: record nothing, change nothing
};

/// Fuses every GEMM the rules above allow, in place; appends to `s.gemmNotes` one line per GEMM
/// extern looked at (fused, or why not). Returns the number of fusions.
int fuseGemmEpilogues(Schedule &s, const GemmFusionOptions &o);

} // namespace coil::sched
