#include "codegen/CSource.h"

#include "support/Check.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

namespace coil::codegen {

void CodeWriter::line(const std::string &text) {
  if (text.empty()) {
    text_ += '\n';
    return;
  }
  // Preprocessor lines (pragmas) are indented like code: compilers accept it, it reads better.
  text_.append(size_t(depth_) * 2, ' ');
  text_ += text;
  text_ += '\n';
}

void CodeWriter::open(const std::string &head) {
  line(head.empty() ? "{" : head + " {");
  ++depth_;
}

void CodeWriter::close(const std::string &tail) {
  --depth_;
  line(tail);
}

namespace {

const char *const kKeywords[] = {
    "alignas",      "alignof",  "and",      "asm",      "auto",      "bool",      "break",
    "case",         "catch",    "char",     "class",    "const",     "constexpr", "continue",
    "default",      "delete",   "do",       "double",   "else",      "enum",      "explicit",
    "export",       "extern",   "false",    "float",    "for",       "friend",    "goto",
    "if",           "inline",   "int",      "long",     "mutable",   "namespace", "new",
    "noexcept",     "not",      "nullptr",  "operator", "or",        "private",   "protected",
    "public",       "register", "return",   "short",    "signed",    "sizeof",    "static",
    "struct",       "switch",   "template", "this",     "throw",     "true",      "try",
    "typedef",      "typename", "union",    "unsigned", "using",     "virtual",   "void",
    "volatile",     "while",    "xor",      "std",      "main",      "NAN",       "INFINITY",
    "HUGE_VAL",     "restrict", "int64_t",  "int32_t",  "int16_t",   "int8_t",    "uint64_t",
    "uint32_t",     "uint16_t", "uint8_t",  "size_t",   "INT64_MAX", "INT64_MIN", "UINT64_MAX",
    "COIL_RESTRICT"};

} // namespace

NameTable::NameTable(std::set<std::string> reservedPrefixes)
    : prefixes_(std::move(reservedPrefixes)) {
  for (const std::string &p : prefixes_) {
    bool letters = !p.empty();
    for (char c : p) letters = letters && std::isalpha(static_cast<unsigned char>(c));
    COIL_CHECK(letters) << "NameTable: a reserved prefix must be letters only, not '" << p << "'";
  }
  for (const char *k : kKeywords) used_.insert(k);
}

bool NameTable::reservedForm(const std::string &name) const {
  if (name.rfind("coil_", 0) == 0 || name.rfind("__", 0) == 0) return true;
  for (const std::string &p : prefixes_)
    if (name.size() > p.size() && name.compare(0, p.size(), p) == 0 &&
        std::isdigit(static_cast<unsigned char>(name[p.size()])))
      return true;
  return false;
}

std::string NameTable::fresh(const std::string &hint) {
  // `m_` escapes a hint of reserved form: no reserved form starts with a letter and a '_'.
  std::string base = sanitizeIdentifier(hint);
  if (reservedForm(base)) base = "m_" + base;
  if (used_.insert(base).second) return base;
  // Whether `<base>_<digits>` has a reserved form does not depend on the digits (the prefixes
  // are letters only), so testing `<base>_2` covers them all (it catches `coil` and `_`).
  if (reservedForm(base + "_2")) {
    base = "m_" + base;
    if (used_.insert(base).second) return base;
  }
  int64_t &k = nextSuffix_[base];
  k = std::max<int64_t>(k, 2);
  std::string name;
  do name = base + "_" + std::to_string(k++);
  while (!used_.insert(name).second);
  return name;
}

std::string sanitizeIdentifier(const std::string &s) {
  std::string r;
  for (char c : s) r += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  if (r.empty() || std::isdigit(static_cast<unsigned char>(r[0]))) r = "_" + r;
  return r;
}

namespace {
std::string withPoint(std::string s) {
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}
std::string paren(std::string s) {
  return s[0] == '-' ? "(" + s + ")" : s;
}
} // namespace

std::string floatLiteral(float v) {
  if (std::isnan(v)) return "NAN";
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "(-INFINITY)";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", double(v));
  return paren(withPoint(buf) + "f");
}

std::string doubleLiteral(double v) {
  if (std::isnan(v)) return "double(NAN)";
  if (std::isinf(v)) return v > 0 ? "HUGE_VAL" : "(-HUGE_VAL)";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return paren(withPoint(buf));
}

std::string int64Literal(int64_t v) {
  if (v == INT64_MIN) return "(-9223372036854775807LL - 1)";
  std::string s = std::to_string(v);
  if (v > 2147483647 || v < -2147483647) s += "LL";
  return paren(s);
}

} // namespace coil::codegen
