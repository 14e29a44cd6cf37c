// The failure message of the CPU kernels: one per thread, written by coil::cpu::fail and read
// through coil_cpu_last_error.
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/CpuKernelsImpl.h"

#include <cstdarg>
#include <cstdio>

namespace coil::cpu {
namespace {
thread_local char tMessage[512] = "";
} // namespace

int32_t fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(tMessage, sizeof tMessage, fmt, ap);
  va_end(ap);
  return 1;
}

} // namespace coil::cpu

extern "C" const char *coil_cpu_last_error(void) {
  return coil::cpu::tMessage;
}
