/// The CPU check at load (runtime/Metadata.h): a package's model.so is compiled for the
/// instruction set recorded in metadata.json ("cpu_target", "cpu_features"); on a CPU without it
/// the first vector instruction would kill the process with SIGILL, so the runtime refuses to
/// load it and says what is missing. CPUID is read through __builtin_cpu_supports (it works
/// under emulators such as QEMU, whose /proc/cpuinfo is the host's).
#include "runtime/Metadata.h"

namespace coil::runtime {

namespace {

struct Feature {
  const char *name;
  bool (*present)();
};

#define COIL_FEATURE(n)                                                                            \
  {                                                                                                \
    n, [] { return __builtin_cpu_supports(n) != 0; }                                               \
  }
// The extensions --cpu-target native records (driver/Toolchain.cpp), by
// __builtin_cpu_supports's names.
const Feature kFeatures[] = {
    COIL_FEATURE("aes"),
    COIL_FEATURE("pclmul"),
    COIL_FEATURE("gfni"),
    COIL_FEATURE("vpclmulqdq"),
    COIL_FEATURE("avx512vbmi"),
    COIL_FEATURE("avx512ifma"),
    COIL_FEATURE("avx512vpopcntdq"),
    COIL_FEATURE("avx512vbmi2"),
    COIL_FEATURE("avx512vnni"),
    COIL_FEATURE("avx512bitalg"),
    COIL_FEATURE("avx512bf16"),
};
#undef COIL_FEATURE

/// The extensions of each x86-64 level that this CPU lacks (for the message).
std::string missingOfLevel(const std::string &level) {
  struct Need {
    const char *level, *name;
    bool (*present)();
  };
#define COIL_NEED(l, n)                                                                            \
  {                                                                                                \
    l, n, [] { return __builtin_cpu_supports(n) != 0; }                                            \
  }
  static const Need needs[] = {
      COIL_NEED("x86-64-v2", "sse3"),     COIL_NEED("x86-64-v2", "ssse3"),
      COIL_NEED("x86-64-v2", "sse4.1"),   COIL_NEED("x86-64-v2", "sse4.2"),
      COIL_NEED("x86-64-v2", "popcnt"),   COIL_NEED("x86-64-v3", "avx"),
      COIL_NEED("x86-64-v3", "avx2"),     COIL_NEED("x86-64-v3", "fma"),
      COIL_NEED("x86-64-v3", "bmi"),      COIL_NEED("x86-64-v3", "bmi2"),
      COIL_NEED("x86-64-v4", "avx512f"),  COIL_NEED("x86-64-v4", "avx512bw"),
      COIL_NEED("x86-64-v4", "avx512cd"), COIL_NEED("x86-64-v4", "avx512dq"),
      COIL_NEED("x86-64-v4", "avx512vl"),
  };
#undef COIL_NEED
  std::string out;
  for (const Need &n : needs) {
    if (std::string(n.level) > level) continue; // "x86-64-v2" < "x86-64-v3" < "x86-64-v4"
    if (!n.present()) out += std::string(out.empty() ? "" : ", ") + n.name;
  }
  return out;
}

bool levelPresent(const std::string &level) {
  if (level != "x86-64-v2" && level != "x86-64-v3" && level != "x86-64-v4") return false;
#if defined(__clang__)
  // clang (the fuzzing build) has no level names in __builtin_cpu_supports: the level's
  // extensions listed above, a subset of what GCC checks.
  return missingOfLevel(level).empty();
#else
  if (level == "x86-64-v2") return __builtin_cpu_supports("x86-64-v2");
  if (level == "x86-64-v3") return __builtin_cpu_supports("x86-64-v3");
  return __builtin_cpu_supports("x86-64-v4");
#endif
}

} // namespace

bool isCpuFeature(const std::string &name) {
  for (const Feature &f : kFeatures)
    if (name == f.name) return true;
  return false;
}

std::string missingCpuFeatures(const Metadata &m) {
  if (m.cpuTarget.empty()) return ""; // a package of an older coil: nothing recorded
  __builtin_cpu_init();
  std::string missing;
  if (!levelPresent(m.cpuTarget)) {
    std::string lacks = missingOfLevel(m.cpuTarget);
    missing = m.cpuTarget + (lacks.empty() ? "" : " (" + lacks + ")");
  }
  for (const std::string &name : m.cpuFeatures)
    for (const Feature &f : kFeatures)
      if (name == f.name && !f.present()) missing += (missing.empty() ? "" : ", ") + name;
  return missing;
}

} // namespace coil::runtime
