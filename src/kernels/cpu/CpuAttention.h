/// \file Private controls of the fused attention kernels (coil_cpu_attention_*, CpuAttention.cpp).
///
/// The kernels exist in three builds of one body (CpuAttentionBody.inc): AVX-512 (16 f32 lanes),
/// AVX2 + FMA + F16C (8 lanes) and portable scalar code (the f64 kernel always, and the others on
/// CPUs without AVX2). Each call takes the widest path the CPU has, capped by
/// setAttentionIsaLimit, so that the tests run every path on one machine.
#pragma once

namespace coil::cpu {

enum class AttentionIsa { Portable = 0, Avx2 = 1, Avx512 = 2 };

/// Caps the path of later calls (all threads); the default cap is Avx512.
void setAttentionIsaLimit(AttentionIsa limit);
/// The path an f32/f16/bf16 call takes now: the widest one the CPU has, within the cap.
AttentionIsa attentionIsa();

} // namespace coil::cpu
