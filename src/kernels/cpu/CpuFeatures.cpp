// The CPU's features, asked once (CpuFeatures.h).
#include "kernels/cpu/CpuFeatures.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace coil::cpu {

bool cpuHasAvx512() {
#if defined(__x86_64__)
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  return yes;
#else
  return false;
#endif
}

bool hasF16c() {
#if defined(__x86_64__)
  static const bool yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
  }();
  return yes;
#else
  return false;
#endif
}

bool hasAvx2() {
#if defined(__x86_64__)
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
#else
  return false;
#endif
}

} // namespace coil::cpu
