/// \file The extern table: every extern kernel generated code calls, as data (`Externs.def`).
///
/// An *extern* is a C function of libcoil_runtime (kernels/cpu/CpuKernels.h) that a wrapper
/// calls for a Loop IR Extern node, possibly with a CUDA twin in libcoil_cuda
/// (kernels/cuda/CudaKernels.h). Each row of the table is one extern *op*, over a set of dtypes:
///  - `base`: the function names are derived from it, `coil_cpu_<base>_<dtype>` on the CPU and
///    `coil_cuda_<base>_<dtype>` for the CUDA twin (an untyped extern, `dtypes` empty, has one
///    function `coil_cpu_<base>`); these names are the table's, and only cpuSymbol() and
///    cudaSymbol() spell them;
///  - `ops`: the ONNX ops (or rewrites) it implements, for readers;
///  - `dtypes`: the element types it is defined for (a bit per DType, dtypeBit()); `cudaDTypes`:
///    those with a CUDA twin (a subset; empty when the extern always runs on the host);
///  - `allocates`: it allocates its outputs through a `coil_alloc_fn` passed first (data-
///    dependent output shapes; a wrapper ExternKernelAlloc line), else it writes pre-allocated
///    outputs (ExternKernelOut);
///  - `args`: its arguments after the allocator, one letter each (Externs.def lists them); a
///    CUDA twin takes `const coil_cuda_ctx *` first and then exactly these arguments as device
///    pointers, returning 0 or a status with the message in ctx->error;
///  - `epilogues`: the operations folded into it after the main computation (ExternEpilogue bits).
/// The lowering names externs by cpuSymbol(); the wrapper's placement (wrapper/PlaceExterns.h)
/// and verifier, and the driver, look names up here (findExtern) and never test name prefixes.
/// This header includes only support/ (every layer that handles externs may include it).
#pragma once

#include "support/DType.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace coil::kernels {

/// One bit per DType in the dtype sets of the table.
constexpr uint32_t dtypeBit(DType t) {
  return uint32_t(1) << unsigned(t);
}

inline constexpr uint32_t kNoDTypes = 0;
/// An untyped extern (one function, no dtype in its name).
inline constexpr uint32_t kUntyped = 0;
inline constexpr uint32_t kF32Only = dtypeBit(DType::F32);
inline constexpr uint32_t kF32F64 = dtypeBit(DType::F32) | dtypeBit(DType::F64);
inline constexpr uint32_t kF16BF16 = dtypeBit(DType::F16) | dtypeBit(DType::BF16);
inline constexpr uint32_t kF32F16BF16 =
    dtypeBit(DType::F32) | dtypeBit(DType::F16) | dtypeBit(DType::BF16);
inline constexpr uint32_t kFloatDTypes = kF32F64 | dtypeBit(DType::F16) | dtypeBit(DType::BF16);
inline constexpr uint32_t kNumericDTypes =
    kFloatDTypes | dtypeBit(DType::I64) | dtypeBit(DType::I32) | dtypeBit(DType::I16) |
    dtypeBit(DType::I8) | dtypeBit(DType::U64) | dtypeBit(DType::U32) | dtypeBit(DType::U16) |
    dtypeBit(DType::U8);
inline constexpr uint32_t kAllDTypes = kNumericDTypes | dtypeBit(DType::Bool);

/// Operations an extern applies to its result before storing it (bits of ExternInfo::epilogues).
enum ExternEpilogue : uint8_t {
  kEpilogueNone = 0,
  kEpilogueBias = 1, ///< + a per-channel (per-column) bias
  kEpilogueRelu = 2, ///< max(0, x)
  kEpilogueClip = 4, ///< clamp to [lo, hi]
};

enum class ExternId : uint8_t {
#define COIL_EXTERN(Id, ...) Id,
#include "kernels/Externs.def"
#undef COIL_EXTERN
};

struct ExternInfo {
  ExternId id;
  std::string_view base;
  std::string_view ops;
  uint32_t dtypes;
  uint32_t cudaDTypes;
  bool allocates;
  std::string_view args;
  uint8_t epilogues;

  bool hasDType(DType t) const { return dtypes == kUntyped ? false : (dtypes & dtypeBit(t)); }
  bool hasCuda(DType t) const { return (cudaDTypes & dtypeBit(t)) != 0; }
};

inline constexpr ExternInfo kExterns[] = {
#define COIL_EXTERN(Id, base, ops, dtypes, cuda, alloc, args, epi)                                 \
  {ExternId::Id, base, ops, dtypes, cuda, alloc, args, epi},
#include "kernels/Externs.def"
#undef COIL_EXTERN
};

inline const ExternInfo &externInfo(ExternId id) {
  return kExterns[size_t(id)];
}

/// The CPU function of extern `id` for element type `t` (`t` ignored for an untyped extern).
/// Requires info.hasDType(t) for a typed one.
std::string cpuSymbol(ExternId id, DType t = DType::F32);
/// The CUDA twin of extern `id` for `t`, or "" when it has none (it runs on the host).
std::string cudaSymbol(ExternId id, DType t);

/// A function name of the table resolved: the extern, its dtype, and which of its functions.
struct ExternRef {
  ExternId id;
  DType dtype = DType::F32; ///< F32 for an untyped extern
  bool cuda = false;        ///< the name is the CUDA twin
  const ExternInfo &info() const { return externInfo(id); }
};
/// The extern whose CPU function or CUDA twin is exactly `symbol`; nullopt for any other name.
std::optional<ExternRef> findExtern(std::string_view symbol);

} // namespace coil::kernels
