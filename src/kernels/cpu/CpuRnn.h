/// \file Private controls of the recurrence kernels (coil_cpu_recurrent_*, CpuRnn.cpp).
///
/// The f32 recurrence exists in two builds of one body (CpuRnnBody.inc): AVX2 + FMA and portable
/// code (the f64 kernel always, and f32 on CPUs without AVX2). Independent pieces of a call (each
/// direction, slices of the batch) run on OpenMP threads when the call has enough work. Both
/// controls exist so that the tests run every path on one machine.
#pragma once

#include <cstdint>

namespace coil::cpu {

enum class RecurrentIsa { Portable = 0, Avx2 = 1 };

/// Caps the path of later f32 calls (all threads); the default cap is Avx2.
void setRecurrentIsaLimit(RecurrentIsa limit);
/// The path an f32 call takes now: the widest one the CPU has, within the cap.
RecurrentIsa recurrentIsa();

/// The least work (multiply-adds of the recurrent products over all steps, directions and
/// batch entries) for which a call runs on several threads; below it a call never enters an
/// OpenMP region. Returns the previous value. The default is kRecurrentParallelWork.
int64_t setRecurrentParallelWork(int64_t work);
constexpr int64_t kRecurrentParallelWork = int64_t(1) << 21;

} // namespace coil::cpu
