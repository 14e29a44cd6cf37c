// Helpers shared by the AVX-512 paths of the CPU kernels: functions built with
// __attribute__((target("avx512f,..."))) and chosen at run time, where the CPU has AVX-512.
#pragma once

#include <algorithm>
#include <cstdint>
#include <immintrin.h>

namespace coil::cpu {

/// Whether the AVX-512 paths of the convolutions may run: the CPU has AVX-512 F, VL, BW and DQ,
/// and setConvAvx512Allowed(false) has not sent them to the portable paths.
bool avx512Enabled();

/// The lanes [lo, hi) of 16 (clamped) as a mask.
inline __mmask16 laneRange(int64_t lo, int64_t hi) {
  lo = std::clamp<int64_t>(lo, 0, 16), hi = std::clamp<int64_t>(hi, 0, 16);
  if (hi <= lo) return 0;
  return __mmask16(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}

/// The address p + off (off may point before p or past its object: masked-off lanes are never
/// read, and masked loads do not fault on them), formed without pointer arithmetic outside the
/// object.
inline const float *shifted(const float *p, int64_t off) {
  return reinterpret_cast<const float *>(reinterpret_cast<uintptr_t>(p) +
                                         uintptr_t(off) * sizeof(float));
}

} // namespace coil::cpu
