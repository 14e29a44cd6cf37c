/// \file CUTLASS code generation for a compiled epilogue.
///
/// sm90: CUTLASS 3.x visitors (Sm90EVT / Sm90TopologicalVisitor) for the TMA warp-specialized
/// epilogue; C and D belong to the collective. sm80: CUTLASS 2.x visitors (Sm80EVT /
/// Sm80TopologicalVisitor) for DefaultGemmWithVisitor; C is an aux load and D an aux store.
/// Types and the nested `Arguments` initializer come from one walk over the visitor plan, and
/// every emitted name lives in a private namespace, made unique by the node id. With `kernel`,
/// the output is a complete program: a GEMM with this epilogue, run on random data and checked
/// against a host reference evaluated from the same IR. With `entry`, the output is a library
/// translation unit for the compiler (codegen/cuda/CudaGemm.h): the GEMM with this epilogue and
/// one `extern "C"` entry point (see LibraryEntry) instead of a program.
#pragma once

#include "evt/EvtPasses.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace coil::evt {

/// The GEMM's mainloop for the kernel program and the library entry (sm90).
struct GemmShape {
  int tileM = 128, tileN = 128, tileK = 64; ///< CTA tile (K: 64 for 16-bit, 32 for f32 inputs)
  int clusterM = 1, clusterN = 1;
  bool pingpong = false; ///< ping-pong warp-specialized schedule; else cooperative
};

/// The library entry point's operands, by position: `in[i]` is the epilogue parameter named
/// `inputs[i]` (a dense tensor, broadcast vector or scalar pointer), `out[j]` the store of the
/// output named `outputs[j]` (D first, the collective's output on sm90).
///   extern "C" int32_t ENTRY(const void *a, const void *b, const void *const *in,
///                            void *const *out, int64_t m, int64_t n, int64_t k, void *stream,
///                            void *workspace, size_t workspace_bytes, char *error,
///                            size_t error_size);
/// A is m x k row-major (or, with `columnMajorA`, k x m row-major), B is k x n row-major
/// (`rowMajorB`) or n x k row-major; every dense tensor is m x n row-major. It returns 0 after
/// enqueueing the GEMM on `stream`; 2 when this kernel cannot run the problem (CUTLASS's
/// can_implement refuses the sizes, or an operand is not 16-byte aligned: the caller may run
/// another form of the GEMM); 1 when the workspace is too small or the launch fails; with a
/// message in `error` unless 0.
struct LibraryEntry {
  std::string name;
  std::vector<std::string> inputs, outputs;
};

struct EmitOptions {
  Arch arch = Arch::Sm90;
  bool kernel = false;        ///< emit a complete GEMM + host check program
  int64_t k = 128;            ///< GEMM K for the kernel program
  DType inputs = DType::BF16; ///< element type of A and B for the kernel program
  std::string source;         ///< file name for the header comment
  GemmShape gemm;             ///< sm90 tile, cluster and schedule
  bool rowMajorB = false;     ///< B is k x n row-major (else n x k: CUTLASS's column-major B)
  bool columnMajorA = false;  ///< A is k x m row-major (CUTLASS's column-major A)
  std::optional<LibraryEntry> entry; ///< emit a library unit with this entry point
};

Expected<std::string> emitCutlass(const Program &p, const VisitorPlan &plan, const EmitOptions &o);

} // namespace coil::evt
