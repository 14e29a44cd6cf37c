/// \file Private controls of the recurrence kernels (coil_cpu_recurrent_*, CpuRnn.cpp).
///
/// The f32 recurrence exists in two builds of one body (CpuRnnBody.inc): AVX2 + FMA and portable
/// code (the f64 kernel always, and f32 on CPUs without AVX2). Independent pieces of a call (each
/// direction, slices of the batch) run on OpenMP threads when the call has enough work; small
/// per-step products of the states by R run on register tiles instead of BLAS. The controls
/// exist so that the tests run every path on one machine.
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
/// From this much work, the two directions of a bidirectional call run on two threads even
/// below kRecurrentParallelWork: each is a whole sequence of its own, one fork and join per
/// call (the zoo's bidirectional LSTM tagger, 2 x 295K multiply-adds per layer: 0.71x the time).
/// Slices of one direction's batch stay on one thread below kRecurrentParallelWork.
constexpr int64_t kRecurrentDirectionWork = int64_t(1) << 18;

/// The most multiply-adds of one step's product of the states by R (per task) that run on
/// coil's own register tiles; larger products (or an R of more than kSmallGemm elements) call
/// BLAS. Returns the previous value. The default is kRecurrentSmallProduct.
int64_t setRecurrentSmallProduct(int64_t work);
constexpr int64_t kRecurrentSmallProduct = int64_t(1) << 18;

} // namespace coil::cpu
