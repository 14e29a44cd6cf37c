/// \file The Loop IR evaluator: the definition of Loop IR semantics (see LoopIR.h).
///
/// evaluateLoopProgram() binds the size symbols from the input shapes, then materializes every
/// node in order, point by point: Pointwise bodies per output point, Reduction bodies per
/// (outer point, reduced point) with the reduced points in row-major order, Extern nodes by
/// calling an adapter registered under the extern's function name. It is slow and simple on
/// purpose: tests compare it with the reference interpreter (is the lowering right?) and with
/// generated code (is the code generator right?).
///
/// Scalar semantics, per statement dtype: f64 computes in double; f32 computes in double and
/// rounds to float after every statement; f16 and bf16 compute as f32 (rounded to float after
/// every statement) and round to 16 bits only where a Cast to f16/bf16 says so and when the
/// node's value is stored. Integers wrap modulo 2^bits after every statement; integer division
/// and modulo by zero give 0. A load out of bounds is an internal error (a lowering bug).
#pragma once

#include "lower/LoopIR.h"
#include "support/Expected.h"

#include <functional>
#include <string>
#include <vector>

namespace coil::loop {

/// One argument of an extern call as the evaluator passes it to an adapter, parallel to
/// ExternNode::args.
struct EvalExternArg {
  ExternArg::Kind kind = ExternArg::Kind::Int;
  const Tensor *tensor = nullptr; ///< Node: the realized input (contiguous, row-major)
  /// Output: the output tensor. For a non-allocating call it is allocated (zero-filled) with the
  /// output's evaluated shape and the adapter writes its data; for an allocating call it is
  /// undefined and the adapter assigns it.
  Tensor *output = nullptr;
  int64_t i = 0;                ///< Int: the evaluated value
  double number = 0;            ///< Float
  int64_t *outSymbol = nullptr; ///< OutSymbol: where the adapter writes the symbol's value
};

/// Calls the C function an extern node names, on evaluator tensors.
using EvalExternFn = std::function<Status(const ExternNode &, std::vector<EvalExternArg> &)>;

/// Registers the adapter of extern function `name` (replacing any earlier one).
void registerEvalExtern(std::string name, EvalExternFn fn);

/// Registers the adapters of the CPU kernels (kernels/cpu); defined in LoopEvalExterns.cpp and
/// called once by the evaluator before its first extern call.
void registerCpuKernelEvalExterns();

/// Evaluates `p` on `inputs` (in the order of p.inputs) and returns the outputs in the order of
/// p.outputs. User errors: wrong number, dtype or shape of inputs, a symbol out of its range.
Expected<std::vector<Tensor>> evaluateLoopProgram(const LoopProgram &p,
                                                  const std::vector<Tensor> &inputs);

} // namespace coil::loop
