/// \file What this CPU runs, asked once (CPUID through libgcc, whose checks include the operating
/// system's support for the registers): the CPU kernels' run-time dispatch and the OpenBLAS core
/// choice (Blas.cpp) ask here.
#pragma once

// Internal to the CPU kernels (hidden: not exported, not interposable).
#pragma GCC visibility push(hidden)

namespace coil::cpu {

/// AVX-512 F, VL, BW and DQ: what the AVX-512 kernels use (OpenBLAS's SkylakeX kernels too).
bool cpuHasAvx512();

/// AVX2 and FMA: what the AVX2 clones of the hot loops use (the library itself is built for the
/// baseline ISA).
bool hasAvx2();

/// F16C (f16 <-> f32 conversion instructions), read from CPUID directly: clang's
/// __builtin_cpu_supports does not know it.
bool hasF16c();

} // namespace coil::cpu

#pragma GCC visibility pop
