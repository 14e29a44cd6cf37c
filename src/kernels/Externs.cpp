// The extern table's names and lookup (see Externs.h).
#include "kernels/Externs.h"

#include <map>

namespace coil::kernels {

namespace {

// The two function name prefixes of the table; nothing outside this file spells them.
constexpr std::string_view kCpuPrefix = "coil_cpu_", kCudaPrefix = "coil_cuda_";

std::string symbolName(std::string_view prefix, const ExternInfo &e, DType t) {
  std::string s(prefix);
  s += e.base;
  if (e.dtypes != kUntyped) {
    s += '_';
    s += dtypeName(t);
  }
  return s;
}

constexpr DType kAllDTypeValues[] = {
#define COIL_EXTERNS_DTYPE(E, N, T, S) DType::E,
    COIL_FOR_EACH_DTYPE(COIL_EXTERNS_DTYPE)
#undef COIL_EXTERNS_DTYPE
};

/// Every name of the table, to its extern.
const std::map<std::string, ExternRef, std::less<>> &symbolTable() {
  static const std::map<std::string, ExternRef, std::less<>> table = [] {
    std::map<std::string, ExternRef, std::less<>> m;
    for (const ExternInfo &e : kExterns) {
      if (e.dtypes == kUntyped) {
        m.emplace(symbolName(kCpuPrefix, e, DType::F32), ExternRef{e.id, DType::F32, false});
        continue;
      }
      for (DType t : kAllDTypeValues) {
        if (!e.hasDType(t)) continue;
        m.emplace(symbolName(kCpuPrefix, e, t), ExternRef{e.id, t, false});
        if (e.hasCuda(t)) m.emplace(symbolName(kCudaPrefix, e, t), ExternRef{e.id, t, true});
      }
    }
    return m;
  }();
  return table;
}

} // namespace

std::string cpuSymbol(ExternId id, DType t) {
  return symbolName(kCpuPrefix, externInfo(id), t);
}

std::string cudaSymbol(ExternId id, DType t) {
  const ExternInfo &e = externInfo(id);
  return e.hasCuda(t) ? symbolName(kCudaPrefix, e, t) : std::string();
}

std::optional<ExternRef> findExtern(std::string_view symbol) {
  const auto &m = symbolTable();
  auto it = m.find(symbol);
  if (it == m.end()) return std::nullopt;
  return it->second;
}

} // namespace coil::kernels
