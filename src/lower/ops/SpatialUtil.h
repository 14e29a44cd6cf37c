/// \file Private helpers shared by the spatial lowerings (lower/ops/LinalgPool.cpp,
/// LinalgResize.cpp, LinalgSample.cpp, LinalgRnn.cpp).
#pragma once

#include "ir/OpAttrs.h"
#include "lower/Lower.h"

#include <string>
#include <vector>

namespace coil::loop::spatial {

using Syms = std::vector<SymInt>;

/// The type arithmetic happens in: f16 and bf16 compute in f32, integers in f64 (as the
/// interpreter, which computes in double).
DType calcType(DType t);
const Attrs &attrsOf(const LowerContext &ctx);
/// `v` clamped into [0, extent - 1].
SymInt clampSym(const SymInt &v, const SymInt &extent);
/// The conjunction of bool values (true when there are none).
Val andAll(BodyBuilder &b, const std::vector<Val> &conds);
/// The lowest value of `t` (-inf for floats).
Val lowestOf(BodyBuilder &b, DType t);
/// The interpreter's cubicKernel (Resize, GridSample) on an f64 value `x` with coefficient `a`.
Val cubicWeight(BodyBuilder &b, Val x, double a);
/// Converts a computed value `v` back to `t` as the interpreter stores its double results:
/// floats are converted, integers rounded half to even and saturated (saturateRound).
Val storeAs(BodyBuilder &b, Val v, DType t);

// One per file, called by registerLinalgLowerings (Linalg.cpp).
void registerLinalgPoolLowerings(LowerRegistry &r);   ///< LinalgPool.cpp
void registerLinalgResizeLowerings(LowerRegistry &r); ///< LinalgResize.cpp
void registerLinalgSampleLowerings(LowerRegistry &r); ///< LinalgSample.cpp
void registerLinalgRnnLowerings(LowerRegistry &r);    ///< LinalgRnn.cpp

} // namespace coil::loop::spatial
