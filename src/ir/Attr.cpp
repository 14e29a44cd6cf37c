// Attribute accessors.
#include "ir/Attr.h"

#include "support/Check.h"

namespace coil {

AttrKind attrKind(const AttrValue &v) {
  return AttrKind(v.index());
}

const char *attrKindName(AttrKind k) {
  static const char *names[] = {"int",    "float",   "string", "ints",
                                "floats", "strings", "tensor", "syms"};
  return names[int(k)];
}

const AttrValue *Attrs::find(const std::string &name) const {
  auto it = map_.find(name);
  return it == map_.end() ? nullptr : &it->second;
}

namespace {
template <typename T> const T &expectKind(const AttrValue &v, const std::string &name) {
  const T *p = std::get_if<T>(&v);
  COIL_CHECK(p) << "attribute '" << name << "' has kind " << attrKindName(attrKind(v));
  return *p;
}
} // namespace

int64_t Attrs::getInt(const std::string &name, int64_t dflt) const {
  const AttrValue *v = find(name);
  return v ? expectKind<int64_t>(*v, name) : dflt;
}
double Attrs::getFloat(const std::string &name, double dflt) const {
  const AttrValue *v = find(name);
  if (v && std::holds_alternative<int64_t>(*v)) return double(std::get<int64_t>(*v));
  return v ? expectKind<double>(*v, name) : dflt;
}
std::string Attrs::getString(const std::string &name, const std::string &dflt) const {
  const AttrValue *v = find(name);
  return v ? expectKind<std::string>(*v, name) : dflt;
}
std::vector<int64_t> Attrs::getInts(const std::string &name, std::vector<int64_t> dflt) const {
  const AttrValue *v = find(name);
  return v ? expectKind<std::vector<int64_t>>(*v, name) : dflt;
}
std::vector<double> Attrs::getFloats(const std::string &name, std::vector<double> dflt) const {
  const AttrValue *v = find(name);
  return v ? expectKind<std::vector<double>>(*v, name) : dflt;
}
std::vector<std::string> Attrs::getStrings(const std::string &name) const {
  const AttrValue *v = find(name);
  return v ? expectKind<std::vector<std::string>>(*v, name) : std::vector<std::string>{};
}
std::optional<Tensor> Attrs::getTensor(const std::string &name) const {
  const AttrValue *v = find(name);
  if (!v) return std::nullopt;
  return expectKind<Tensor>(*v, name);
}
std::optional<int64_t> Attrs::maybeInt(const std::string &name) const {
  const AttrValue *v = find(name);
  if (!v) return std::nullopt;
  return expectKind<int64_t>(*v, name);
}
std::optional<std::vector<int64_t>> Attrs::maybeInts(const std::string &name) const {
  const AttrValue *v = find(name);
  if (!v) return std::nullopt;
  return expectKind<std::vector<int64_t>>(*v, name);
}

bool attrValueEqual(const AttrValue &a, const AttrValue &b) {
  if (a.index() != b.index()) return false;
  if (const Tensor *ta = std::get_if<Tensor>(&a)) return ta->identical(std::get<Tensor>(b));
  return a == b;
}

Expected<DType> dtypeAttr(const Attrs &attrs, const std::string &name) {
  const AttrValue *v = attrs.find(name);
  if (!v) return Error::user("missing attribute '" + name + "'");
  if (const std::string *s = std::get_if<std::string>(v)) {
    if (auto t = parseDType(*s)) return *t;
    return Error::user("attribute '" + name + "' names unknown dtype '" + *s + "'");
  }
  const int64_t *code = std::get_if<int64_t>(v);
  if (!code) return Error::user("attribute '" + name + "' must be an int (an ONNX data type)");
  if (auto t = dtypeFromOnnxCode(*code)) return *t;
  if (*code == 8) return Error::user("attribute '" + name + "': string tensors are not supported");
  return Error::user("attribute '" + name + "': ONNX data type " + std::to_string(*code) +
                     " is not supported");
}

bool operator==(const Attrs &a, const Attrs &b) {
  if (a.map_.size() != b.map_.size()) return false;
  for (auto ia = a.map_.begin(), ib = b.map_.begin(); ia != a.map_.end(); ++ia, ++ib)
    if (ia->first != ib->first || !attrValueEqual(ia->second, ib->second)) return false;
  return true;
}

} // namespace coil
