#include "runtime/Metadata.h"

#include "runtime/Json.h"
#include "support/Sha256.h"

#include <coil/coil.h>

namespace coil::runtime {

namespace {

using json::Value;

Error bad(const std::string &field, const std::string &rule) {
  return Error::user("metadata.json: '" + field + "' " + rule);
}

Expected<const Value *> member(const Value &obj, const std::string &key, Value::Kind kind,
                               const std::string &where) {
  const Value *v = obj.get(key);
  std::string field = where.empty() ? key : where + "." + key;
  if (!v) return bad(field, "is missing");
  if (v->kind != kind) {
    static const char *names[] = {"null",     "a boolean", "a number",
                                  "a string", "an array",  "an object"};
    return bad(field, std::string("must be ") + names[int(kind)]);
  }
  return v;
}

Expected<int64_t> intMember(const Value &obj, const std::string &key, const std::string &where) {
  COIL_TRY(const Value *v, member(obj, key, Value::Kind::Number, where));
  auto i = v->asInt();
  if (!i) return bad(where.empty() ? key : where + "." + key, "must be an int64 integer");
  return *i;
}

Expected<std::string> strMember(const Value &obj, const std::string &key,
                                const std::string &where) {
  COIL_TRY(const Value *v, member(obj, key, Value::Kind::String, where));
  return v->text;
}

Expected<DType> dtypeMember(const Value &obj, const std::string &where) {
  COIL_TRY(std::string s, strMember(obj, "dtype", where));
  auto t = parseDType(s);
  if (!t) return bad(where + ".dtype", "is not a dtype: '" + s + "'");
  return *t;
}

Expected<std::vector<TensorSig>> tensors(const Value &root, const std::string &key) {
  COIL_TRY(const Value *list, member(root, key, Value::Kind::Array, ""));
  std::vector<TensorSig> out;
  for (size_t i = 0; i < list->items.size(); ++i) {
    const Value &t = list->items[i];
    std::string where = key + "[" + std::to_string(i) + "]";
    if (!t.isObject()) return bad(where, "must be an object");
    TensorSig sig;
    COIL_TRY(sig.name, strMember(t, "name", where));
    COIL_TRY(sig.dtype, dtypeMember(t, where));
    COIL_TRY(const Value *shape, member(t, "shape", Value::Kind::Array, where));
    if (shape->items.size() > COIL_MAX_RANK)
      return bad(where + ".shape", "has rank " + std::to_string(shape->items.size()) +
                                       ", above the runtime's maximum " +
                                       std::to_string(COIL_MAX_RANK));
    for (size_t d = 0; d < shape->items.size(); ++d) {
      const Value &dim = shape->items[d];
      std::string dw = where + ".shape[" + std::to_string(d) + "]";
      if (!dim.isString()) return bad(dw, "must be a string");
      auto e = parseSymInt(dim.text);
      if (!e) return bad(dw, "is not a size expression: " + e.error().message());
      sig.dims.push_back(*e);
      sig.dimText.push_back(dim.text);
    }
    out.push_back(std::move(sig));
  }
  return out;
}

/// A package-relative path: not empty, not absolute, no "." or ".." component, no empty one.
bool isPackagePath(const std::string &p) {
  if (p.empty() || p.front() == '/' || p.back() == '/') return false;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    std::string_view part(p.data() + start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

bool isIdentifier(const std::string &s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s)
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
      return false;
  return true;
}

/// "sm_<major><minor>" with an optional "a" or "f" suffix: sm_80, sm_90a.
bool isSmArch(const std::string &s) {
  if (s.size() < 5 || s.compare(0, 3, "sm_") != 0) return false;
  size_t i = 3;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  if (i - 3 < 2) return false;
  return i == s.size() || (i + 1 == s.size() && (s[i] == 'a' || s[i] == 'f'));
}

Expected<std::vector<std::string>> stringList(const Value &obj, const std::string &key,
                                              const std::string &where,
                                              bool (*valid)(const std::string &),
                                              const char *rule) {
  COIL_TRY(const Value *list, member(obj, key, Value::Kind::Array, where));
  std::vector<std::string> out;
  for (size_t i = 0; i < list->items.size(); ++i) {
    const Value &v = list->items[i];
    std::string field = where + "." + key + "[" + std::to_string(i) + "]";
    if (!v.isString()) return bad(field, "must be a string");
    if (!valid(v.text)) return bad(field, std::string(rule) + ", got \"" + v.text + "\"");
    out.push_back(v.text);
  }
  return out;
}

Expected<CudaSig> cudaObject(const Value &root) {
  COIL_TRY(const Value *c, member(root, "cuda", Value::Kind::Object, ""));
  CudaSig sig;
  COIL_TRY(sig.fatbin, strMember(*c, "fatbin", "cuda"));
  if (!isPackagePath(sig.fatbin))
    return bad("cuda.fatbin",
               "must be a relative path inside the package, got \"" + sig.fatbin + "\"");
  COIL_TRY(sig.functions,
           stringList(*c, "functions", "cuda", isIdentifier, "must be a C identifier"));
  COIL_TRY(sig.archs, stringList(*c, "archs", "cuda", isSmArch,
                                 "must be an architecture such as \"sm_80\" or \"sm_90a\""));
  if (sig.archs.empty()) return bad("cuda.archs", "must name at least one architecture");
  COIL_TRY(const Value *fallback, member(*c, "host_fallback", Value::Kind::Bool, "cuda"));
  sig.hostFallback = fallback->boolean;
  COIL_TRY(sig.workspaceBytes, intMember(*c, "workspace_bytes", "cuda"));
  if (sig.workspaceBytes < 0)
    return bad("cuda.workspace_bytes", "must be >= 0, got " + std::to_string(sig.workspaceBytes));
  return sig;
}

} // namespace

Expected<Metadata> parseMetadata(std::string_view text) {
  COIL_TRY(Value root, json::parse(text));
  if (!root.isObject()) return Error::user("metadata.json: the document must be an object");
  Metadata m;
  COIL_TRY(std::string format, strMember(root, "format", ""));
  if (format != "coil-package")
    return bad("format", "must be \"coil-package\", got \"" + format + "\"");
  COIL_TRY(m.formatVersion, intMember(root, "format_version", ""));
  COIL_TRY(m.abiVersion, intMember(root, "model_abi_version", ""));
  COIL_TRY(m.name, strMember(root, "name", ""));
  COIL_TRY(m.device, strMember(root, "device", ""));
  COIL_TRY(m.library, strMember(root, "library", ""));
  COIL_TRY(m.weights, strMember(root, "weights", ""));
  COIL_TRY(m.weightsBytes, intMember(root, "weights_bytes", ""));
  if (m.weightsBytes < 0) return bad("weights_bytes", "must be >= 0");
  // A plain file name of the package folder: no path, no control bytes (a NUL would cut the
  // name the system opens), at most 255 bytes (NAME_MAX).
  auto fileName = [](const std::string &f) {
    if (f.empty() || f.size() > 255 || f == "." || f == "..") return false;
    for (unsigned char c : f)
      if (c == '/' || c < 0x20 || c == 0x7f) return false;
    return true;
  };
  for (const std::string *f : {&m.library, &m.weights})
    if (!fileName(*f))
      return bad(*f == m.library ? "library" : "weights",
                 "must be a file name in the package (at most 255 bytes, no '/' or control "
                 "characters)");

  if (root.get("cpu_target")) { // absent in packages of older coils
    COIL_TRY(m.cpuTarget, strMember(root, "cpu_target", ""));
    if (m.cpuTarget != "x86-64-v2" && m.cpuTarget != "x86-64-v3" && m.cpuTarget != "x86-64-v4")
      return bad("cpu_target", "must be \"x86-64-v2\", \"x86-64-v3\" or \"x86-64-v4\", got \"" +
                                   m.cpuTarget + "\"");
    COIL_TRY(m.cpuFeatures, stringList(root, "cpu_features", "", isCpuFeature,
                                       "must be a CPU extension name such as \"avx512vnni\""));
  }
  COIL_TRY(const Value *syms, member(root, "symbols", Value::Kind::Array, ""));
  for (size_t i = 0; i < syms->items.size(); ++i) {
    std::string where = "symbols[" + std::to_string(i) + "]";
    const Value &s = syms->items[i];
    if (!s.isObject()) return bad(where, "must be an object");
    SymbolSig sig;
    COIL_TRY(sig.name, strMember(s, "name", where));
    COIL_TRY(sig.min, intMember(s, "min", where));
    COIL_TRY(sig.max, intMember(s, "max", where));
    if (sig.min > sig.max) return bad(where, "has min > max");
    m.symbols.push_back(std::move(sig));
  }
  COIL_TRY(m.inputs, tensors(root, "inputs"));
  COIL_TRY(m.outputs, tensors(root, "outputs"));
  COIL_TRY(const Value *binds, member(root, "bindings", Value::Kind::Array, ""));
  for (size_t i = 0; i < binds->items.size(); ++i) {
    std::string where = "bindings[" + std::to_string(i) + "]";
    const Value &b = binds->items[i];
    if (!b.isObject()) return bad(where, "must be an object");
    BindingSig sig;
    COIL_TRY(sig.symbol, strMember(b, "symbol", where));
    COIL_TRY(sig.input, intMember(b, "input", where));
    COIL_TRY(sig.dim, intMember(b, "dim", where));
    if (sig.input < 0 || size_t(sig.input) >= m.inputs.size() || sig.dim < 0 ||
        size_t(sig.dim) >= m.inputs[sig.input].dims.size())
      return bad(where, "names no input dim (input " + std::to_string(sig.input) + ", dim " +
                            std::to_string(sig.dim) + ")");
    m.bindings.push_back(std::move(sig));
  }
  COIL_TRY(const Value *consts, member(root, "constants", Value::Kind::Array, ""));
  for (size_t i = 0; i < consts->items.size(); ++i) {
    std::string where = "constants[" + std::to_string(i) + "]";
    const Value &c = consts->items[i];
    if (!c.isObject()) return bad(where, "must be an object");
    ConstantSig sig;
    COIL_TRY(sig.name, strMember(c, "name", where));
    COIL_TRY(sig.dtype, dtypeMember(c, where));
    COIL_TRY(const Value *shape, member(c, "shape", Value::Kind::Array, where));
    __int128 numel = 1;
    for (const Value &d : shape->items) {
      auto v = d.asInt();
      if (!v || *v < 0) return bad(where + ".shape", "must hold sizes >= 0");
      sig.shape.push_back(*v);
      numel *= *v;
      if (numel > (__int128(1) << 62)) return bad(where + ".shape", "is too large");
    }
    COIL_TRY(sig.offset, intMember(c, "offset", where));
    COIL_TRY(sig.bytes, intMember(c, "bytes", where));
    if (__int128(sig.bytes) != numel * __int128(dtypeSize(sig.dtype)))
      return bad(where + ".bytes", "must be " + std::to_string(int64_t(numel)) + " elements of " +
                                       std::string(dtypeName(sig.dtype)));
    if (sig.offset < 0 || sig.offset % 64 != 0 || sig.bytes > m.weightsBytes ||
        sig.offset > m.weightsBytes - sig.bytes)
      return bad(where + ".offset", "must be 64-byte aligned and inside weights (" +
                                        std::to_string(sig.offset) + " + " +
                                        std::to_string(sig.bytes) + " bytes of " +
                                        std::to_string(m.weightsBytes) + ")");
    m.constants.push_back(std::move(sig));
  }
  if (m.device == "cuda") {
    COIL_TRY(CudaSig cuda, cudaObject(root));
    m.cuda = std::move(cuda);
  }
  return m;
}

const std::string *PackageIntegrity::digestOf(const std::string &file) const {
  for (const auto &[f, d] : files)
    if (f == file) return &d;
  return nullptr;
}

Expected<SealedMetadata> splitSealedMetadata(std::string_view text) {
  static constexpr std::string_view sep = ",\n  \"integrity\": ";
  size_t pos = text.rfind(sep);
  if (pos == std::string_view::npos)
    return Error::user("metadata.json has no integrity record: the package was written by an "
                       "older coil, or metadata.json was edited; recompile the model");
  if (text.size() < 3 || text.substr(text.size() - 3) != "\n}\n")
    return Error::user("metadata.json does not end as coil writes it (\"\\n}\\n\"): it was "
                       "truncated or edited");
  SealedMetadata out;
  out.body = std::string(text.substr(0, pos)) + "\n}\n";
  // The record is the last member: `{` + the rest must be an object with that member only.
  auto tail = json::parse("{" + std::string(text.substr(pos + 1)));
  if (!tail) return Error::user("metadata.json: the integrity record: " + tail.error().message());
  if (!tail->isObject() || tail->members.size() != 1)
    return bad("integrity", "must be the last member of metadata.json");
  const json::Value &rec = tail->members[0].second;
  if (!rec.isObject()) return bad("integrity", "must be an object");
  COIL_TRY(std::string algorithm, strMember(rec, "algorithm", "integrity"));
  if (algorithm != "sha256")
    return bad("integrity.algorithm", "must be \"sha256\", got \"" + algorithm + "\"");
  COIL_TRY(out.integrity.abiVersion, intMember(rec, "model_abi_version", "integrity"));
  COIL_TRY(out.integrity.metadata, strMember(rec, "metadata", "integrity"));
  if (!isSha256Hex(out.integrity.metadata))
    return bad("integrity.metadata", "must be a SHA-256 digest (64 lowercase hex digits)");
  COIL_TRY(const Value *files, member(rec, "files", Value::Kind::Object, "integrity"));
  for (const auto &[file, digest] : files->members) {
    std::string field = "integrity.files." + file;
    if (!isPackagePath(file)) return bad(field, "must name a file inside the package");
    if (!digest.isString() || !isSha256Hex(digest.text))
      return bad(field, "must be a SHA-256 digest (64 lowercase hex digits)");
    if (out.integrity.digestOf(file)) return bad(field, "is given twice");
    out.integrity.files.emplace_back(file, digest.text);
  }
  return out;
}

Status checkBody(const SealedMetadata &sealed) {
  std::string got = sha256Hex(sealed.body);
  if (got != sealed.integrity.metadata)
    return Error::user("metadata.json was modified after it was written: the SHA-256 of its "
                       "contents is " +
                       got + ", its integrity record says " + sealed.integrity.metadata);
  return okStatus();
}

} // namespace coil::runtime
