/// \file OpKind: the enumeration generated from Ops.def, and lookups by ONNX name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>

namespace coil {

enum class OpKind : uint16_t {
#define COIL_OP(E, N, F) E,
#include "ir/Ops.def"
  NumOps
};

enum class OpFamily : uint8_t {
#define COIL_OP_FAMILY(F) F,
#include "ir/OpFamilies.def"
#undef COIL_OP_FAMILY
};

/// The ONNX op type, e.g. "Conv".
std::string_view opName(OpKind k);
OpFamily opFamily(OpKind k);
std::optional<OpKind> opFromName(std::string_view onnxName);
constexpr size_t kNumOps = size_t(OpKind::NumOps);

/// An internal error: a table has two functions for `op`.
[[noreturn]] void registeredTwice(OpKind op);

/// One function per op, or none (nullptr): how each layer dispatches on the op, filled once by
/// its family files (inference: InferRegistry, ir/Infer.h; the reference interpreter:
/// KernelRegistry, interp/Kernel.h; lowering: LowerRegistry, lower/Lower.h).
template <class Fn> class OpTable {
public:
  /// Registers `fn` for `op`, which has none yet.
  void add(OpKind op, Fn fn) {
    if (fns_[size_t(op)] != nullptr) registeredTwice(op);
    fns_[size_t(op)] = fn;
  }
  /// Registers `fn` for each op of `ops` (ops that share one definition, ir/OpAttrs.h).
  template <size_t N> void add(const OpKind (&ops)[N], Fn fn) {
    for (OpKind op : ops) add(op, fn);
  }
  Fn get(OpKind op) const { return fns_[size_t(op)]; }

  /// A table filled by `families`, each the register function of one op family (called in
  /// order: ir/OpFamilies.def).
  static OpTable filled(std::initializer_list<void (*)(OpTable &)> families) {
    OpTable t;
    for (auto family : families) family(t);
    return t;
  }

private:
  Fn fns_[kNumOps] = {};
};

} // namespace coil
