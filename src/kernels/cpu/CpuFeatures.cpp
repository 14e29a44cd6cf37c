// The CPU's features, asked once (CpuFeatures.h).
#include "kernels/cpu/CpuFeatures.h"

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

bool hasAvx2() {
#if defined(__x86_64__)
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
#else
  return false;
#endif
}

} // namespace coil::cpu
