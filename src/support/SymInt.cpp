// Minimal SymInt implementation: expression trees with constant folding and identities.
// (Canonical simplification of sums and products is added on top of this representation.)
#include "support/SymInt.h"

#include <functional>

namespace coil {

struct SymInt::Node {
  Kind kind;
  int64_t value = 0;
  std::string name;
  std::vector<SymInt> ops;
};

struct SymIntBuilder {
  static SymInt make(SymInt::Kind k, std::vector<SymInt> ops) {
    auto n = std::make_shared<SymInt::Node>();
    n->kind = k;
    n->ops = std::move(ops);
    return SymInt(std::shared_ptr<const SymInt::Node>(std::move(n)));
  }
};

SymInt::SymInt(int64_t value) {
  auto n = std::make_shared<Node>();
  n->kind = Kind::Const;
  n->value = value;
  n_ = std::move(n);
}
SymInt::SymInt(std::shared_ptr<const Node> n) : n_(std::move(n)) {}

SymInt SymInt::symbol(std::string name) {
  auto n = std::make_shared<Node>();
  n->kind = Kind::Symbol;
  n->name = std::move(name);
  return SymInt(std::shared_ptr<const Node>(std::move(n)));
}

SymInt::Kind SymInt::kind() const {
  return n_->kind;
}
int64_t SymInt::constant() const {
  COIL_CHECK(isConstant()) << "SymInt::constant() on " << str();
  return n_->value;
}
std::optional<int64_t> SymInt::maybeConstant() const {
  if (isConstant()) return n_->value;
  return std::nullopt;
}
const std::string &SymInt::symbolName() const {
  COIL_CHECK(isSymbol()) << "SymInt::symbolName() on " << str();
  return n_->name;
}
const std::vector<SymInt> &SymInt::operands() const {
  return n_->ops;
}

int64_t floorDivInt(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t floorModInt(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

SymInt operator+(const SymInt &a, const SymInt &b) {
  if (a.isConstant() && b.isConstant()) return a.constant() + b.constant();
  if (a.isConstant() && a.constant() == 0) return b;
  if (b.isConstant() && b.constant() == 0) return a;
  return SymIntBuilder::make(SymInt::Kind::Add, {a, b});
}
SymInt operator*(const SymInt &a, const SymInt &b) {
  if (a.isConstant() && b.isConstant()) return a.constant() * b.constant();
  if ((a.isConstant() && a.constant() == 0) || (b.isConstant() && b.constant() == 0)) return 0;
  if (a.isConstant() && a.constant() == 1) return b;
  if (b.isConstant() && b.constant() == 1) return a;
  return SymIntBuilder::make(SymInt::Kind::Mul, {a, b});
}
SymInt operator-(const SymInt &a) {
  return SymInt(-1) * a;
}
SymInt operator-(const SymInt &a, const SymInt &b) {
  if (a == b) return 0;
  return a + (-b);
}

SymInt floorDiv(const SymInt &a, const SymInt &b) {
  if (a.isConstant() && b.isConstant() && b.constant() != 0)
    return floorDivInt(a.constant(), b.constant());
  if (b.isConstant() && b.constant() == 1) return a;
  return SymIntBuilder::make(SymInt::Kind::FloorDiv, {a, b});
}
SymInt floorMod(const SymInt &a, const SymInt &b) {
  if (a.isConstant() && b.isConstant() && b.constant() != 0)
    return floorModInt(a.constant(), b.constant());
  if (b.isConstant() && b.constant() == 1) return 0;
  return SymIntBuilder::make(SymInt::Kind::Mod, {a, b});
}
SymInt ceilDiv(const SymInt &a, const SymInt &b) {
  return -floorDiv(-a, b);
}
SymInt min(const SymInt &a, const SymInt &b) {
  if (a.isConstant() && b.isConstant()) return std::min(a.constant(), b.constant());
  if (a == b) return a;
  return SymIntBuilder::make(SymInt::Kind::Min, {a, b});
}
SymInt max(const SymInt &a, const SymInt &b) {
  if (a.isConstant() && b.isConstant()) return std::max(a.constant(), b.constant());
  if (a == b) return a;
  return SymIntBuilder::make(SymInt::Kind::Max, {a, b});
}

bool operator==(const SymInt &a, const SymInt &b) {
  if (a.n_ == b.n_) return true;
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
  case SymInt::Kind::Const:
    return a.n_->value == b.n_->value;
  case SymInt::Kind::Symbol:
    return a.n_->name == b.n_->name;
  default:
    return a.n_->ops == b.n_->ops;
  }
}
bool operator<(const SymInt &a, const SymInt &b) {
  if (a.kind() != b.kind()) return a.kind() < b.kind();
  switch (a.kind()) {
  case SymInt::Kind::Const:
    return a.n_->value < b.n_->value;
  case SymInt::Kind::Symbol:
    return a.n_->name < b.n_->name;
  default:
    return a.n_->ops < b.n_->ops;
  }
}
size_t SymInt::hash() const {
  size_t h = std::hash<int>()(int(kind()));
  if (isConstant()) return h ^ std::hash<int64_t>()(n_->value);
  if (isSymbol()) return h ^ std::hash<std::string>()(n_->name);
  for (const SymInt &o : n_->ops) h = h * 31 + o.hash();
  return h;
}

Expected<int64_t> SymInt::evaluate(const SymBindings &bindings) const {
  switch (kind()) {
  case Kind::Const:
    return n_->value;
  case Kind::Symbol: {
    auto it = bindings.find(n_->name);
    if (it == bindings.end()) return Error::user("symbol '" + n_->name + "' has no value");
    return it->second;
  }
  default:
    break;
  }
  std::vector<int64_t> v;
  for (const SymInt &o : n_->ops) {
    COIL_TRY(int64_t x, o.evaluate(bindings));
    v.push_back(x);
  }
  switch (kind()) {
  case Kind::Add:
    return v[0] + v[1];
  case Kind::Mul:
    return v[0] * v[1];
  case Kind::FloorDiv:
  case Kind::Mod:
    if (v[1] == 0) return Error::user("division by zero in '" + str() + "'");
    return kind() == Kind::FloorDiv ? floorDivInt(v[0], v[1]) : floorModInt(v[0], v[1]);
  case Kind::Min:
    return std::min(v[0], v[1]);
  case Kind::Max:
    return std::max(v[0], v[1]);
  default:
    COIL_UNREACHABLE("bad SymInt kind");
  }
}

SymInt SymInt::substitute(const std::map<std::string, SymInt> &repl) const {
  if (isConstant()) return *this;
  if (isSymbol()) {
    auto it = repl.find(n_->name);
    return it == repl.end() ? *this : it->second;
  }
  SymInt a = n_->ops[0].substitute(repl), b = n_->ops[1].substitute(repl);
  switch (kind()) {
  case Kind::Add:
    return a + b;
  case Kind::Mul:
    return a * b;
  case Kind::FloorDiv:
    return floorDiv(a, b);
  case Kind::Mod:
    return floorMod(a, b);
  case Kind::Min:
    return min(a, b);
  case Kind::Max:
    return max(a, b);
  default:
    COIL_UNREACHABLE("bad SymInt kind");
  }
}

void SymInt::collectSymbols(std::set<std::string> &out) const {
  if (isSymbol()) out.insert(n_->name);
  for (const SymInt &o : n_->ops) o.collectSymbols(out);
}

namespace {
std::string printWith(const SymInt &e, bool python, const SymRanges *ranges) {
  auto rec = [&](const SymInt &x) { return printWith(x, python, ranges); };
  switch (e.kind()) {
  case SymInt::Kind::Const: {
    int64_t v = e.constant();
    return v < 0 ? "(" + std::to_string(v) + ")" : std::to_string(v);
  }
  case SymInt::Kind::Symbol:
    return e.symbolName();
  case SymInt::Kind::Add:
    return "(" + rec(e.operands()[0]) + " + " + rec(e.operands()[1]) + ")";
  case SymInt::Kind::Mul:
    return "(" + rec(e.operands()[0]) + "*" + rec(e.operands()[1]) + ")";
  case SymInt::Kind::FloorDiv:
  case SymInt::Kind::Mod: {
    bool div = e.kind() == SymInt::Kind::FloorDiv;
    if (python || !ranges)
      return "(" + rec(e.operands()[0]) + (div ? " // " : " % ") + rec(e.operands()[1]) + ")";
    if (bounds(e.operands()[0], *ranges).min >= 0 && bounds(e.operands()[1], *ranges).min > 0)
      return "(" + rec(e.operands()[0]) + (div ? " / " : " % ") + rec(e.operands()[1]) + ")";
    return std::string(div ? "coil_floordiv(" : "coil_floormod(") + rec(e.operands()[0]) + ", " +
           rec(e.operands()[1]) + ")";
  }
  case SymInt::Kind::Min:
  case SymInt::Kind::Max: {
    const char *f = e.kind() == SymInt::Kind::Min ? "min" : "max";
    std::string pre = (!python && ranges) ? "std::" : "";
    return pre + f + "(" + rec(e.operands()[0]) + ", " + rec(e.operands()[1]) + ")";
  }
  }
  return "?";
}
} // namespace

std::string SymInt::str() const {
  return printWith(*this, true, nullptr);
}
std::string SymInt::toPython() const {
  return printWith(*this, true, nullptr);
}
std::string SymInt::toCpp(const SymRanges &ranges) const {
  return printWith(*this, false, &ranges);
}

SymInt simplify(const SymInt &e, const SymRanges &) {
  return e;
}

SymRange bounds(const SymInt &e, const SymRanges &ranges) {
  constexpr int64_t kBig = int64_t(1) << 62;
  switch (e.kind()) {
  case SymInt::Kind::Const:
    return {e.constant(), e.constant()};
  case SymInt::Kind::Symbol: {
    auto it = ranges.find(e.symbolName());
    return it == ranges.end() ? SymRange{} : it->second;
  }
  default:
    break;
  }
  SymRange a = bounds(e.operands()[0], ranges), b = bounds(e.operands()[1], ranges);
  switch (e.kind()) {
  case SymInt::Kind::Add:
    return {a.min + b.min > -kBig ? a.min + b.min : -kBig, std::min(kBig, a.max + b.max)};
  case SymInt::Kind::Min:
    return {std::min(a.min, b.min), std::min(a.max, b.max)};
  case SymInt::Kind::Max:
    return {std::max(a.min, b.min), std::max(a.max, b.max)};
  case SymInt::Kind::Mul:
    if (a.min >= 0 && b.min >= 0)
      return {a.min * b.min, (a.max > 0 && b.max > kBig / a.max) ? kBig : a.max * b.max};
    return {-kBig, kBig};
  case SymInt::Kind::FloorDiv:
    if (a.min >= 0 && b.min > 0) return {a.min / b.max, a.max / b.min};
    return {-kBig, kBig};
  case SymInt::Kind::Mod:
    if (b.min > 0) return {0, b.max - 1};
    return {-kBig, kBig};
  default:
    return {-kBig, kBig};
  }
}

namespace {
class SymParser {
public:
  explicit SymParser(std::string_view s) : s_(s) {}
  Expected<SymInt> parseAll() {
    COIL_TRY(SymInt e, parseSum());
    skip();
    if (p_ != s_.size()) return err("unexpected '" + std::string(1, s_[p_]) + "'");
    return e;
  }

private:
  Error err(const std::string &m) {
    return Error::user("bad size expression '" + std::string(s_) + "' at column " +
                       std::to_string(p_ + 1) + ": " + m);
  }
  void skip() {
    while (p_ < s_.size() && s_[p_] == ' ') ++p_;
  }
  bool eat(std::string_view t) {
    skip();
    if (s_.substr(p_, t.size()) == t) {
      p_ += t.size();
      return true;
    }
    return false;
  }
  // sum := term (('+'|'-') term)*
  Expected<SymInt> parseSum() {
    COIL_TRY(SymInt e, parseTerm());
    for (;;) {
      if (eat("+")) {
        COIL_TRY(SymInt r, parseTerm());
        e = e + r;
      } else if (eat("-")) {
        COIL_TRY(SymInt r, parseTerm());
        e = e - r;
      } else {
        return e;
      }
    }
  }
  // term := unary (('*'|'//'|'%') unary)*
  Expected<SymInt> parseTerm() {
    COIL_TRY(SymInt e, parseUnary());
    for (;;) {
      if (eat("//")) {
        COIL_TRY(SymInt r, parseUnary());
        e = floorDiv(e, r);
      } else if (eat("*")) {
        COIL_TRY(SymInt r, parseUnary());
        e = e * r;
      } else if (eat("%")) {
        COIL_TRY(SymInt r, parseUnary());
        e = floorMod(e, r);
      } else {
        return e;
      }
    }
  }
  // unary := '-' unary | primary
  Expected<SymInt> parseUnary() {
    if (eat("-")) {
      COIL_TRY(SymInt e, parseUnary());
      return -e;
    }
    return parsePrimary();
  }
  // primary := INT | IDENT | ('min'|'max') '(' sum ',' sum ')' | '(' sum ')'
  Expected<SymInt> parsePrimary() {
    skip();
    if (p_ >= s_.size()) return err("expected a number, a symbol or '('");
    if (eat("(")) {
      COIL_TRY(SymInt e, parseSum());
      if (!eat(")")) return err("expected ')'");
      return e;
    }
    char c = s_[p_];
    if (c >= '0' && c <= '9') {
      int64_t v = 0;
      while (p_ < s_.size() && s_[p_] >= '0' && s_[p_] <= '9') {
        if (v > (INT64_MAX - 9) / 10) return err("integer too large");
        v = v * 10 + (s_[p_++] - '0');
      }
      return SymInt(v);
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t b = p_;
      while (p_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[p_])) || s_[p_] == '_'))
        ++p_;
      std::string id(s_.substr(b, p_ - b));
      if ((id == "min" || id == "max") && eat("(")) {
        COIL_TRY(SymInt a, parseSum());
        if (!eat(",")) return err("expected ','");
        COIL_TRY(SymInt b2, parseSum());
        if (!eat(")")) return err("expected ')'");
        return id == "min" ? min(a, b2) : max(a, b2);
      }
      return SymInt::symbol(id);
    }
    return err("unexpected '" + std::string(1, c) + "'");
  }
  std::string_view s_;
  size_t p_ = 0;
};
} // namespace

Expected<SymInt> parseSymInt(std::string_view text) {
  return SymParser(text).parseAll();
}

const char *cppPrelude() {
  return "static inline int64_t coil_floordiv(int64_t a, int64_t b) {\n"
         "  int64_t q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;\n"
         "}\n"
         "static inline int64_t coil_floormod(int64_t a, int64_t b) {\n"
         "  int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n"
         "}\n";
}

} // namespace coil
