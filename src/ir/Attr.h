/// \file Typed node attributes.
///
/// Attribute kinds mirror ONNX's (int, float, string, ints, floats, strings, tensor) plus
/// `syms`, a list of SymInts (a shape that may hold symbols). Floats are stored as double but
/// hold the float32 value ONNX gives. Attrs keeps attributes sorted by name, so printing is
/// deterministic.
#pragma once

#include "ir/Tensor.h"
#include "support/Expected.h"
#include "support/SymInt.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace coil {

using AttrValue =
    std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>,
                 std::vector<std::string>, Tensor, std::vector<SymInt>>;

enum class AttrKind { Int, Float, String, Ints, Floats, Strings, Tensor, Syms };
AttrKind attrKind(const AttrValue &v);
/// "int", "float", "string", "ints", "floats", "strings", "tensor", "syms".
const char *attrKindName(AttrKind k);

class Attrs {
public:
  bool has(const std::string &name) const { return map_.count(name) != 0; }
  const AttrValue *find(const std::string &name) const;
  void set(const std::string &name, AttrValue v) { map_[name] = std::move(v); }
  void erase(const std::string &name) { map_.erase(name); }
  const std::map<std::string, AttrValue> &all() const { return map_; }
  bool empty() const { return map_.empty(); }

  // Typed getters with a default for absent attributes. A present attribute of another kind is
  // a verifier error (the importer checks kinds against the ONNX schema), so these check it.
  int64_t getInt(const std::string &name, int64_t dflt) const;
  double getFloat(const std::string &name, double dflt) const;
  std::string getString(const std::string &name, const std::string &dflt) const;
  std::vector<int64_t> getInts(const std::string &name, std::vector<int64_t> dflt = {}) const;
  std::vector<double> getFloats(const std::string &name, std::vector<double> dflt = {}) const;
  std::vector<std::string> getStrings(const std::string &name) const;
  std::optional<Tensor> getTensor(const std::string &name) const;
  std::optional<int64_t> maybeInt(const std::string &name) const;
  std::optional<std::vector<int64_t>> maybeInts(const std::string &name) const;

  friend bool operator==(const Attrs &a, const Attrs &b);

private:
  std::map<std::string, AttrValue> map_;
};

bool attrValueEqual(const AttrValue &a, const AttrValue &b);

/// The dtype named by attribute `name` of `attrs`: an ONNX TensorProto.DataType code (an int,
/// as in Cast's `to`) or a coil dtype name (a string). A user error when it is absent, of
/// another kind, or names a type coil lacks.
Expected<DType> dtypeAttr(const Attrs &attrs, const std::string &name);

} // namespace coil
