/// \file CUTLASS code generation for a compiled epilogue.
///
/// sm90: CUTLASS 3.x visitors (Sm90EVT / Sm90TopologicalVisitor) for the TMA warp-specialized
/// epilogue; C and D belong to the collective. sm80: CUTLASS 2.x visitors (Sm80EVT /
/// Sm80TopologicalVisitor) for DefaultGemmWithVisitor; C is an aux load and D an aux store.
/// Types and the nested `Arguments` initializer come from one walk over the visitor plan, and
/// every emitted name lives in a private namespace, made unique by the node id. With `kernel`,
/// the output is a complete program: a GEMM with this epilogue, run on random data and checked
/// against a host reference evaluated from the same IR.
#pragma once

#include "evt/EvtPasses.h"

#include <cstdint>
#include <string>

namespace coil::evt {

struct EmitOptions {
  Arch arch = Arch::Sm90;
  bool kernel = false;        ///< emit a complete GEMM + host check program
  int64_t k = 128;            ///< GEMM K for the kernel program
  DType inputs = DType::BF16; ///< element type of A and B for the kernel program
  std::string source;         ///< file name for the header comment
};

Expected<std::string> emitCutlass(const Program &p, const VisitorPlan &plan, const EmitOptions &o);

} // namespace coil::evt
