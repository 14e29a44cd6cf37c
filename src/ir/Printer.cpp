// The `.coil` text printer (grammar in Printer.h) and the spelling helpers it shares with the
// parser (TextFormatUtil.h).
#include "ir/Printer.h"

#include "ir/TextFormatUtil.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>

namespace coil {

namespace textfmt {

bool isIdentifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

bool isBareName(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  return true;
}

void appendQuoted(std::string &out, std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  out += '"';
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
    case '\\':
      out += "\\\\";
      break;
    case '"':
      out += "\\\"";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\r':
      out += "\\r";
      break;
    default:
      if (c >= 0x20 && c < 0x7f) {
        out += ch;
      } else {
        out += "\\x";
        out += kHex[c >> 4];
        out += kHex[c & 15];
      }
    }
  }
  out += '"';
}

void appendName(std::string &out, char prefix, std::string_view name) {
  out += prefix;
  if (isBareName(name))
    out += name;
  else
    appendQuoted(out, name);
}

namespace {
/// "0x" and the bits of `size` bytes at `p`, most significant digit first.
std::string bitsText(const void *p, size_t size) {
  uint64_t bits = 0;
  std::memcpy(&bits, p, size); // little-endian: the low bytes
  static const char kHex[] = "0123456789abcdef";
  std::string s = "0x";
  for (size_t k = 2 * size; k-- > 0;) s += kHex[(bits >> (4 * k)) & 15];
  return s;
}

template <typename F> std::string formatFp(F v, bool forceFloat) {
  if (std::isnan(v)) {
    F canonical = std::numeric_limits<F>::quiet_NaN();
    if (std::signbit(v)) canonical = -canonical;
    if (std::memcmp(&v, &canonical, sizeof(F)) != 0) return bitsText(&v, sizeof(F)); // payload
    return std::signbit(v) ? "-nan" : "nan";
  }
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v); // shortest text that reads back exactly
  std::string s(buf, r.ptr);
  if (forceFloat && s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}
} // namespace

std::string formatDouble(double v, bool forceFloat) {
  return formatFp(v, forceFloat);
}
std::string formatFloat(float v) {
  return formatFp(v, false);
}

bool appendElement(std::string &out, DType t, const void *data, size_t i) {
  const char *p = static_cast<const char *>(data);
  std::string text;
  switch (t) {
  case DType::F64: {
    double v;
    std::memcpy(&v, p + i * 8, 8);
    text = formatDouble(v, false);
    break;
  }
  case DType::F32: {
    float v;
    std::memcpy(&v, p + i * 4, 4);
    text = formatFloat(v);
    break;
  }
  case DType::F16:
  case DType::BF16: {
    uint16_t h;
    std::memcpy(&h, p + i * 2, 2);
    text = formatFloat(t == DType::F16 ? halfToFloat(h) : bf16ToFloat(h));
    break;
  }
  case DType::U64: {
    uint64_t v;
    std::memcpy(&v, p + i * 8, 8);
    out += std::to_string(v);
    return true;
  }
  case DType::Bool: {
    uint8_t b = static_cast<const uint8_t *>(data)[i];
    out += b ? "true" : "false";
    return b <= 1;
  }
  default:
    out += std::to_string(loadAsInt(t, data, i));
    return true;
  }
  // Floats: where the decimal text does not reproduce the bytes (a f16/bf16 NaN payload),
  // print the bit pattern.
  size_t sz = dtypeSize(t);
  unsigned char back[8];
  if (!parseElement(t, text, true, back).empty() || std::memcmp(back, p + i * sz, sz) != 0)
    text = bitsText(p + i * sz, sz);
  out += text;
  return true;
}

namespace {
enum class IntText { Ok, Bad, TooLarge };
/// Parses an optionally negative decimal integer into magnitude and sign.
IntText parseIntText(std::string_view text, bool &neg, uint64_t &mag) {
  neg = !text.empty() && text[0] == '-';
  if (neg) text.remove_prefix(1);
  if (text.empty()) return IntText::Bad;
  auto r = std::from_chars(text.data(), text.data() + text.size(), mag);
  if (r.ptr != text.data() + text.size()) return IntText::Bad;
  if (r.ec == std::errc::result_out_of_range) return IntText::TooLarge;
  return r.ec == std::errc() ? IntText::Ok : IntText::Bad;
}

template <typename F> std::string parseFp(std::string_view text, F &out) {
  bool neg = !text.empty() && text[0] == '-';
  std::string_view body = neg ? text.substr(1) : text;
  if (body == "nan" || body == "inf") {
    out = body == "nan" ? std::numeric_limits<F>::quiet_NaN() : std::numeric_limits<F>::infinity();
    if (neg) out = -out;
    return "";
  }
  auto r = std::from_chars(text.data(), text.data() + text.size(), out);
  if (r.ec == std::errc::result_out_of_range) return "'" + std::string(text) + "' is out of range";
  if (r.ec != std::errc() || r.ptr != text.data() + text.size())
    return "expected a number, got '" + std::string(text) + "'";
  return "";
}
} // namespace

std::string parseElement(DType t, std::string_view text, bool isFloatToken, void *dst) {
  std::string name(dtypeName(t));
  if (text.size() > 2 && (text.substr(0, 2) == "0x" || text.substr(0, 2) == "0X")) {
    // The bit pattern of a float element.
    if (!isFloat(t))
      return "a bit pattern (" + std::string(text) + ") is only allowed for float elements, not " +
             name;
    uint64_t bits = 0;
    auto r = std::from_chars(text.data() + 2, text.data() + text.size(), bits, 16);
    if (r.ec != std::errc() || r.ptr != text.data() + text.size() ||
        (dtypeSize(t) < 8 && bits >> (8 * dtypeSize(t)) != 0))
      return "bit pattern " + std::string(text) + " does not fit " + name;
    std::memcpy(dst, &bits, dtypeSize(t));
    return "";
  }
  if (t == DType::Bool) {
    uint8_t b;
    if (text == "true" || text == "1")
      b = 1;
    else if (text == "false" || text == "0")
      b = 0;
    else
      return "expected true or false for a bool element, got '" + std::string(text) + "'";
    std::memcpy(dst, &b, 1);
    return "";
  }
  if (isFloat(t)) {
    if (t == DType::F64) {
      double v;
      std::string e = parseFp(text, v);
      if (e.empty()) std::memcpy(dst, &v, 8);
      return e;
    }
    float v;
    std::string e = parseFp(text, v);
    if (!e.empty()) return e;
    if (t == DType::F32) {
      std::memcpy(dst, &v, 4);
    } else {
      uint16_t h = t == DType::F16 ? floatToHalf(v) : floatToBf16(v);
      std::memcpy(dst, &h, 2);
    }
    return "";
  }
  bool neg = false;
  uint64_t mag = 0;
  IntText parsed = isFloatToken ? IntText::Bad : parseIntText(text, neg, mag);
  std::string range = "value " + std::string(text) + " is out of range for " + name;
  if (parsed == IntText::TooLarge) return range;
  if (parsed == IntText::Bad)
    return "expected an integer for a " + name + " element, got '" + std::string(text) + "'";
  if (isUnsigned(t)) {
    if (neg && mag != 0) return range;
    uint64_t limit = t == DType::U64 ? UINT64_MAX : (uint64_t(1) << (8 * dtypeSize(t))) - 1;
    if (mag > limit) return range;
    std::memcpy(dst, &mag, dtypeSize(t)); // little-endian: the low bytes
    return "";
  }
  uint64_t bits = 8 * dtypeSize(t);
  uint64_t maxPos = (uint64_t(1) << (bits - 1)) - 1;
  if ((!neg && mag > maxPos) || (neg && mag > maxPos + 1)) return range;
  int64_t v = neg ? int64_t(0 - mag) : int64_t(mag);
  storeFromInt(t, dst, 0, v);
  return "";
}

} // namespace textfmt

namespace {

using namespace textfmt;

/// Prints a SymInt as SymInt::str() does, but quotes symbol names that are not identifiers.
void appendSym(std::string &out, const SymInt &e, bool top) {
  switch (e.kind()) {
  case SymInt::Kind::Const: {
    int64_t v = e.constant();
    if (v < 0 && !top)
      out += "(" + std::to_string(v) + ")";
    else
      out += std::to_string(v);
    return;
  }
  case SymInt::Kind::Symbol:
    if (isIdentifier(e.symbolName()))
      out += e.symbolName();
    else
      appendQuoted(out, e.symbolName());
    return;
  case SymInt::Kind::Add:
  case SymInt::Kind::Mul:
  case SymInt::Kind::FloorDiv:
  case SymInt::Kind::Mod: {
    const char *op = e.kind() == SymInt::Kind::Add   ? " + "
                     : e.kind() == SymInt::Kind::Mul ? "*"
                     : e.kind() == SymInt::Kind::Mod ? " % "
                                                     : " // ";
    out += "(";
    for (size_t i = 0; i < e.operands().size(); ++i) {
      if (i) out += op;
      appendSym(out, e.operands()[i], false);
    }
    out += ")";
    return;
  }
  case SymInt::Kind::Min:
  case SymInt::Kind::Max: {
    out += e.kind() == SymInt::Kind::Min ? "min(" : "max(";
    for (size_t i = 0; i < e.operands().size(); ++i) {
      if (i) out += ", ";
      appendSym(out, e.operands()[i], false);
    }
    out += ")";
    return;
  }
  }
}

/// The text of dims already printed by the running printGraph call (dims repeat a lot).
thread_local std::unordered_map<SymInt, std::string> *tlsSymText = nullptr;

/// A top-level size: SymInt::str() (the most readable form) where it parses back to the same
/// expression, else the fully parenthesized form of appendSym (e.g. for symbol names that
/// need quotes).
void appendTopSym(std::string &out, const SymInt &e) {
  if (e.isConstant()) {
    out += std::to_string(e.constant());
    return;
  }
  if (tlsSymText) {
    auto it = tlsSymText->find(e);
    if (it != tlsSymText->end()) {
      out += it->second;
      return;
    }
  }
  std::string s = e.str();
  Expected<SymInt> back = parseSymIntText(s);
  if (!back.ok() || *back != e) {
    s.clear();
    appendSym(s, e, true);
  }
  out += s;
  if (tlsSymText) tlsSymText->emplace(e, std::move(s));
}

void appendSymList(std::string &out, const std::vector<SymInt> &list) {
  out += "[";
  for (size_t i = 0; i < list.size(); ++i) {
    if (i) out += ", ";
    appendTopSym(out, list[i]);
  }
  out += "]";
}

void appendType(std::string &out, const TensorType &t) {
  out += dtypeName(t.dtype);
  appendSymList(out, t.shape);
}

void appendHex(std::string &out, const void *data, size_t n) {
  static const char kHex[] = "0123456789abcdef";
  const unsigned char *p = static_cast<const unsigned char *>(data);
  size_t at = out.size();
  out.resize(at + 2 * n);
  char *o = out.data() + at;
  for (size_t i = 0; i < n; ++i) {
    o[2 * i] = kHex[p[i] >> 4];
    o[2 * i + 1] = kHex[p[i] & 15];
  }
}

/// `f32[2, 2] [1, 2, 3, 4]` or `f32[1000] hex "0000803f..."`.
void appendTensorLiteral(std::string &out, const Tensor &t) {
  out += dtypeName(t.dtype());
  out += shapeStr(t.shape());
  out += ' ';
  int64_t n = t.defined() ? t.numel() : 0;
  if (t.defined() && n <= kMaxListElements) {
    size_t at = out.size();
    out += "[";
    bool exact = true;
    for (int64_t i = 0; i < n && exact; ++i) {
      if (i) out += ", ";
      exact = appendElement(out, t.dtype(), t.data(), size_t(i));
    }
    out += "]";
    if (exact) return;
    out.resize(at);
  }
  out += "hex \"";
  if (t.defined()) appendHex(out, t.data(), t.nbytes());
  out += "\"";
}

void appendAttr(std::string &out, const AttrValue &v) {
  auto list = [&](const char *tag, size_t n, auto each) {
    if (n == 0) {
      out += tag;
      out += "[]";
      return;
    }
    out += "[";
    for (size_t i = 0; i < n; ++i) {
      if (i) out += ", ";
      each(i);
    }
    out += "]";
  };
  switch (attrKind(v)) {
  case AttrKind::Int:
    out += std::to_string(std::get<int64_t>(v));
    return;
  case AttrKind::Float:
    out += formatDouble(std::get<double>(v), true);
    return;
  case AttrKind::String:
    appendQuoted(out, std::get<std::string>(v));
    return;
  case AttrKind::Ints: {
    const auto &l = std::get<std::vector<int64_t>>(v);
    list("ints", l.size(), [&](size_t i) { out += std::to_string(l[i]); });
    return;
  }
  case AttrKind::Floats: {
    const auto &l = std::get<std::vector<double>>(v);
    list("floats", l.size(), [&](size_t i) { out += formatDouble(l[i], true); });
    return;
  }
  case AttrKind::Strings: {
    const auto &l = std::get<std::vector<std::string>>(v);
    list("strings", l.size(), [&](size_t i) { appendQuoted(out, l[i]); });
    return;
  }
  case AttrKind::Tensor:
    out += "tensor ";
    appendTensorLiteral(out, std::get<Tensor>(v));
    return;
  case AttrKind::Syms:
    out += "syms";
    appendSymList(out, std::get<std::vector<SymInt>>(v));
    return;
  }
}

void appendValueRef(std::string &out, const Graph &g, ValueId v) {
  if (v < 0 || size_t(v) >= g.numValues())
    out += "_";
  else
    appendName(out, '%', g.value(v).name);
}

void appendNode(std::string &out, const Graph &g, const Node &n) {
  out += "  ";
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    if (i) out += ", ";
    appendValueRef(out, g, n.outputs[i]);
  }
  if (!n.outputs.empty()) out += " = ";
  if (size_t(n.op) < kNumOps)
    out += opName(n.op);
  else
    out += "<invalid op " + std::to_string(size_t(n.op)) + ">";
  out += "(";
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (i) out += ", ";
    appendValueRef(out, g, n.inputs[i]);
  }
  out += ")";
  if (!n.attrs.empty()) {
    out += " {";
    bool first = true;
    for (const auto &[name, v] : n.attrs.all()) {
      if (!first) out += ", ";
      first = false;
      if (isIdentifier(name))
        out += name;
      else
        appendQuoted(out, name);
      out += " = ";
      appendAttr(out, v);
    }
    out += "}";
  }
  if (!n.outputs.empty()) {
    out += " : ";
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (i) out += ", ";
      ValueId o = n.outputs[i];
      if (o >= 0 && size_t(o) < g.numValues())
        appendType(out, g.value(o).type);
      else
        out += "?";
    }
  }
  if (!n.name.empty()) {
    out += " name ";
    appendQuoted(out, n.name);
  }
  if (!n.loc.file.empty() || !n.loc.node.empty() || !n.loc.op.empty()) {
    out += " loc(";
    appendQuoted(out, n.loc.file);
    out += ", ";
    appendQuoted(out, n.loc.node);
    out += ", ";
    appendQuoted(out, n.loc.op);
    out += ")";
  }
  out += "\n";
}

void appendGraph(std::string &out, const Graph &g) {
  out += "graph ";
  appendName(out, '@', g.name);
  out += "(";
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    if (i) out += ", ";
    appendValueRef(out, g, g.inputs[i]);
    out += ": ";
    if (g.inputs[i] >= 0 && size_t(g.inputs[i]) < g.numValues())
      appendType(out, g.value(g.inputs[i]).type);
  }
  out += ") -> (";
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    if (i) out += ", ";
    appendValueRef(out, g, g.outputs[i]);
  }
  out += ") {\n";
  const SymRange dflt;
  for (const auto &[name, range] : g.symbols) {
    out += "  symbol ";
    if (isIdentifier(name))
      out += name;
    else
      appendQuoted(out, name);
    if (range.min != dflt.min || range.max != dflt.max)
      out += " in [" + std::to_string(range.min) + ", " + std::to_string(range.max) + "]";
    out += "\n";
  }
  // Constants and symbolic constants in value order (the maps are keyed by ValueId).
  auto ci = g.constants().begin(), ce = g.constants().end();
  auto si = g.symConstants().begin(), se = g.symConstants().end();
  while (ci != ce || si != se) {
    bool takeConst = si == se || (ci != ce && ci->first < si->first);
    ValueId v = takeConst ? ci->first : si->first;
    out += "  ";
    appendValueRef(out, g, v);
    if (takeConst) {
      out += " = constant ";
      appendTensorLiteral(out, ci->second);
      ++ci;
    } else {
      out += " = symconst ";
      if (size_t(v) < g.numValues()) appendType(out, g.value(v).type);
      out += " ";
      appendSymList(out, si->second);
      ++si;
    }
    out += "\n";
  }
  for (const Node &n : g.nodes()) appendNode(out, g, n);
  out += "}\n";
}

} // namespace

std::string printGraph(const Graph &g) {
  std::unordered_map<SymInt, std::string> symText;
  auto *saved = tlsSymText;
  tlsSymText = &symText;
  struct Restore {
    std::unordered_map<SymInt, std::string> *saved;
    ~Restore() { tlsSymText = saved; }
  } restore{saved};
  std::string out;
  size_t weights = 0;
  for (const auto &[v, t] : g.constants()) weights += t.defined() ? t.nbytes() : 0;
  out.reserve(2 * weights + 64 * (g.numValues() + 1));
  appendGraph(out, g);
  return out;
}

void printGraph(const Graph &g, std::ostream &os) {
  os << printGraph(g);
}

} // namespace coil
