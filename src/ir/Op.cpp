// Lookups over the op table.
#include "ir/Op.h"

#include "support/Check.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

namespace coil {

namespace {
struct OpInfo {
  std::string_view name;
  OpFamily family;
};
constexpr OpInfo kOps[] = {
#define COIL_OP(E, N, F) {N, OpFamily::F},
#include "ir/Ops.def"
};
} // namespace

std::string_view opName(OpKind k) {
  return kOps[size_t(k)].name;
}
OpFamily opFamily(OpKind k) {
  return kOps[size_t(k)].family;
}

std::optional<OpKind> opFromName(std::string_view onnxName) {
  for (size_t i = 0; i < kNumOps; ++i)
    if (kOps[i].name == onnxName) return OpKind(i);
  return std::nullopt;
}

void registeredTwice(OpKind op) {
  COIL_UNREACHABLE("two functions registered for " << opName(op) << " in one op table");
}

} // namespace coil
