/// \file The epilogue front end: one Python function in a small subset, parsed by hand.
///
///   def epi(accum, C, alpha: "scalar", bias: "1,N", scale: "M,1:f32"):
///       x = alpha * accum + C          # + - * / ** unary minus, comparisons
///       D = relu(x + bias)             # relu sigmoid tanh gelu silu exp log abs sqrt
///       r = sum(x, dim=1)              # sum / max with dim= over (M, N)
///       return D, r
///
/// `accum` is the accumulator and `C` the GEMM source; other parameters are dense (M, N[, L])
/// tensors unless annotated with a string naming the dimensions they span ("1,N", "M,1",
/// "scalar", "1,N,L", ...), optionally followed by `:dtype`. Errors carry line and column.
#pragma once

#include "evt/EvtIR.h"

#include <map>
#include <string>

namespace coil::evt {

struct ParseOptions {
  Dims problem;
  bool batched = false;
  DType element = DType::BF16;
  DType compute = DType::F32;
  std::map<std::string, DType> dtypes; ///< per-tensor overrides (parameters and outputs)
};

Expected<Program> parseEpilogue(const std::string &source, const std::string &file,
                                const ParseOptions &opts);

} // namespace coil::evt
