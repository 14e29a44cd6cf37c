// SymInt: construction, the canonicalizing operators and the rules they apply (floor
// division, modulo, min and max; see SymIntInternal.h), comparison and evaluation. Range
// reasoning is in SymIntRanges.cpp, the printers and the parser in SymIntText.cpp.
#include "support/SymInt.h"

#include "support/SymIntInternal.h"

namespace coil {

using namespace symint;

namespace symint {
namespace {

/// Factors of a monomial (a Mul without coefficient is its operands; anything else is itself).
std::vector<SymInt> factorsOf(const SymInt &mono) {
  if (mono.kind() == Kind::Mul && !B::isRaw(mono)) return mono.operands();
  return {mono};
}

/// If term (coef, mono) is a multiple of divisor (dcoef, dmono), its quotient.
std::optional<SymInt> divideTerm(const B::Term &t, const B::Term &d) {
  if (d.coef == 0 || (t.coef == INT64_MIN && d.coef == -1) || t.coef % d.coef != 0)
    return std::nullopt;
  std::vector<SymInt> tf = factorsOf(t.mono), df = factorsOf(d.mono);
  // Both sorted: multiset difference.
  std::vector<SymInt> rest;
  size_t j = 0;
  for (const SymInt &f : tf) {
    if (j < df.size() && f == df[j])
      ++j;
    else
      rest.push_back(f);
  }
  if (j != df.size()) return std::nullopt;
  rest.push_back(SymInt(t.coef / d.coef));
  return B::makeMul(rest);
}

/// b as coefficient times monomial; a sum gives its content: 2*N + 2 -> (2, N + 1).
B::Term divisorTerm(const SymInt &b) {
  if (b.kind() == Kind::Add && !B::isRaw(b)) {
    auto [unit, primitive] = B::content(b);
    return {unit, primitive};
  }
  return B::splitTerm(b);
}

SymInt sumOf(const std::vector<B::Term> &terms, int64_t k) {
  std::vector<SymInt> ops;
  for (const B::Term &t : terms) ops.push_back(B::makeTerm(t.coef, t.mono));
  ops.push_back(SymInt(k));
  return B::makeAdd(ops);
}

SymInt divByConstant(const SymInt &a, int64_t c, Oracle &o) {
  // c >= 2. Terms whose coefficient is a multiple of c leave the division:
  // (c*q + r) // c == q + r // c for every integer q.
  std::vector<B::Term> terms, rest;
  int64_t k;
  B::splitSum(a, terms, k);
  std::vector<SymInt> out;
  for (const B::Term &t : terms) {
    if (t.coef % c == 0)
      out.push_back(B::makeTerm(t.coef / c, t.mono));
    else
      rest.push_back(t);
  }
  out.push_back(SymInt(floorDivInt(k, c)));
  int64_t r0 = floorModInt(k, c);
  if (rest.empty()) return B::makeAdd(out);
  // A common factor g of c and every coefficient: (g*X + r0) // (g*c') == (X + r0 // g) // c'.
  int64_t g = c;
  for (const B::Term &t : rest) g = gcd64(g, t.coef);
  if (g > 1) {
    std::vector<B::Term> reduced;
    for (const B::Term &t : rest) reduced.push_back({t.coef / g, t.mono});
    out.push_back(divRule(sumOf(reduced, r0 / g), SymInt(c / g), o));
    return B::makeAdd(out);
  }
  SymInt r = sumOf(rest, r0);
  // (x // c1) // c == x // (c1*c) for positive c1, c.
  if (r.kind() == Kind::FloorDiv && r.operands()[1].isConstant() &&
      r.operands()[1].constant() > 0) {
    int64_t c1c;
    if (!__builtin_mul_overflow(r.operands()[1].constant(), c, &c1c)) {
      out.push_back(divRule(r.operands()[0], SymInt(c1c), o));
      return B::makeAdd(out);
    }
  }
  // Within one period of c the quotient is a constant.
  Ival v = o.ival(r);
  if (v.lo > -kInf && v.hi < kInf && floorDiv128(v.lo, c) == floorDiv128(v.hi, c)) {
    out.push_back(SymInt(int64_t(floorDiv128(v.lo, c))));
    return B::makeAdd(out);
  }
  out.push_back(B::make(Kind::FloorDiv, {r, SymInt(c)}));
  return B::makeAdd(out);
}

} // namespace

SymInt divRule(const SymInt &a, const SymInt &b, Oracle &o) {
  if (b.isConstant()) {
    int64_t c = b.constant();
    if (c == 0) return B::make(Kind::FloorDiv, {a, b});
    if (a.isConstant()) {
      if (a.constant() == INT64_MIN && c == -1) return B::make(Kind::FloorDiv, {a, b});
      return SymInt(floorDivInt(a.constant(), c));
    }
    if (c == 1) return a;
    if (c < 0) {
      if (c == INT64_MIN) return B::make(Kind::FloorDiv, {a, b});
      // x // c == (-x) // (-c)
      return divRule(B::neg(a), SymInt(-c), o);
    }
    return divByConstant(a, c, o);
  }
  if (auto q = exactQuotient(a, b); q && o.nonZero(b)) return *q;
  // Terms that are multiples of b leave the division: (b*q + r) // b == q + r // b (b != 0).
  std::vector<B::Term> terms, rest;
  int64_t k;
  B::splitSum(a, terms, k);
  std::vector<SymInt> out;
  B::Term d = divisorTerm(b);
  for (const B::Term &t : terms) {
    if (auto q = divideTerm(t, d))
      out.push_back(*q);
    else
      rest.push_back(t);
  }
  SymInt r = out.empty() ? a : sumOf(rest, k);
  if (r.isConstant() && r.constant() == 0) {
    if (!o.nonZero(b)) return B::make(Kind::FloorDiv, {a, b});
    return B::makeAdd(out);
  }
  // 0 <= r < b or b < r <= 0: the quotient is 0.
  Ival rv = o.ival(r);
  if ((rv.lo >= 0 && o.lt(r, b)) || (rv.hi <= 0 && o.lt(b, r))) {
    if (out.empty()) return SymInt(0);
    return B::makeAdd(out);
  }
  SymInt q = B::make(Kind::FloorDiv, {r, b});
  Ival qv = o.ival(q);
  if (isPoint(qv) && o.nonZero(b)) q = SymInt(int64_t(qv.lo));
  out.push_back(q);
  return B::makeAdd(out);
}

namespace {

SymInt modByConstant(const SymInt &a, int64_t c, Oracle &o) {
  // c >= 2. Multiples of c vanish.
  std::vector<B::Term> terms, rest;
  int64_t k;
  B::splitSum(a, terms, k);
  for (const B::Term &t : terms)
    if (t.coef % c != 0) rest.push_back(t);
  int64_t r0 = floorModInt(k, c);
  if (rest.empty()) return SymInt(r0);
  // (g*X + r0) % (g*c') == g*((X + r0 // g) % c') + r0 % g.
  int64_t g = c;
  for (const B::Term &t : rest) g = gcd64(g, t.coef);
  if (g > 1) {
    std::vector<B::Term> reduced;
    for (const B::Term &t : rest) reduced.push_back({t.coef / g, t.mono});
    SymInt inner = modRule(sumOf(reduced, r0 / g), SymInt(c / g), o);
    return B::makeAdd({B::makeMul({SymInt(g), inner}), SymInt(r0 % g)});
  }
  SymInt r = sumOf(rest, r0);
  // (x % c1) % c == x % c when c divides c1.
  if (r.kind() == Kind::Mod && r.operands()[1].isConstant() && r.operands()[1].constant() > 0 &&
      r.operands()[1].constant() % c == 0)
    return modRule(r.operands()[0], SymInt(c), o);
  // Within one period of c the remainder is r shifted.
  Ival v = o.ival(r);
  if (v.lo > -kInf && v.hi < kInf && floorDiv128(v.lo, c) == floorDiv128(v.hi, c)) {
    i128 shift = -(floorDiv128(v.lo, c) * c);
    if (shift >= INT64_MIN && shift <= INT64_MAX) return B::makeAdd({r, SymInt(int64_t(shift))});
  }
  return B::make(Kind::Mod, {r, SymInt(c)});
}

} // namespace

SymInt modRule(const SymInt &a, const SymInt &b, Oracle &o) {
  if (b.isConstant()) {
    int64_t c = b.constant();
    if (c == 0) return B::make(Kind::Mod, {a, b});
    if (a.isConstant()) return SymInt(floorModInt(a.constant(), c));
    if (c == 1 || c == -1) return SymInt(0);
    if (c < 0) {
      if (c == INT64_MIN) return B::make(Kind::Mod, {a, b});
      // x % c == -((-x) % (-c))
      return B::neg(modRule(B::neg(a), SymInt(-c), o));
    }
    return modByConstant(a, c, o);
  }
  if (exactQuotient(a, b) && o.nonZero(b)) return SymInt(0);
  std::vector<B::Term> terms, rest;
  int64_t k;
  B::splitSum(a, terms, k);
  bool dropped = false;
  B::Term d = divisorTerm(b);
  for (const B::Term &t : terms) {
    if (divideTerm(t, d))
      dropped = true;
    else
      rest.push_back(t);
  }
  SymInt r = dropped ? sumOf(rest, k) : a;
  if (r.isConstant() && r.constant() == 0)
    return o.nonZero(b) ? SymInt(0) : B::make(Kind::Mod, {a, b});
  Ival rv = o.ival(r);
  if ((rv.lo >= 0 && o.lt(r, b)) || (rv.hi <= 0 && o.lt(b, r))) return r;
  return B::make(Kind::Mod, {r, b});
}

SymInt minMaxRule(Kind kind, const std::vector<SymInt> &in, Oracle &o) {
  bool isMin = kind == Kind::Min;
  std::vector<SymInt> ops;
  std::optional<int64_t> k;
  for (const SymInt &x : in) {
    std::vector<SymInt> flat = x.kind() == kind ? x.operands() : std::vector<SymInt>{x};
    for (const SymInt &y : flat) {
      if (y.isConstant())
        k = !k ? y.constant() : (isMin ? std::min(*k, y.constant()) : std::max(*k, y.constant()));
      else
        ops.push_back(y);
    }
  }
  if (k) ops.push_back(SymInt(*k));
  std::sort(ops.begin(), ops.end());
  ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
  // Drop an operand that another one provably undercuts (min) or exceeds (max).
  std::vector<bool> alive(ops.size(), true);
  for (size_t i = 0; i < ops.size() && ops.size() > 1; ++i) {
    for (size_t j = 0; j < ops.size(); ++j) {
      if (j == i || !alive[j]) continue;
      if (isMin ? o.le(ops[j], ops[i]) : o.le(ops[i], ops[j])) {
        alive[i] = false;
        break;
      }
    }
  }
  std::vector<SymInt> kept;
  for (size_t i = 0; i < ops.size(); ++i)
    if (alive[i]) kept.push_back(ops[i]);
  if (kept.size() == 1) return kept[0];
  // The constant (sorted first) goes last: `min(N, 8)`.
  if (kept[0].isConstant()) std::rotate(kept.begin(), kept.begin() + 1, kept.end());
  return B::make(kind, std::move(kept));
}

} // namespace symint

std::optional<SymInt> exactQuotient(const SymInt &a, const SymInt &b) {
  std::vector<B::Term> terms;
  int64_t k;
  B::splitSum(a, terms, k);
  std::vector<SymInt> ops;
  if (b.isConstant()) {
    int64_t c = b.constant();
    auto divides = [c](int64_t v) { return c != 0 && !(v == INT64_MIN && c == -1) && v % c == 0; };
    for (const B::Term &t : terms) {
      if (!divides(t.coef)) return std::nullopt;
      ops.push_back(B::makeTerm(t.coef / c, t.mono));
    }
    if (!divides(k)) return std::nullopt;
    ops.push_back(SymInt(k / c));
    return B::makeAdd(ops);
  }
  B::Term d = divisorTerm(b);
  // A sum that is a multiple of b as a whole: (2*N + 2) / (N + 1) == 2.
  if (a.kind() == Kind::Add && !B::isRaw(a)) {
    auto [unit, primitive] = B::content(a);
    if (primitive == d.mono && !(unit == INT64_MIN && d.coef == -1) && unit % d.coef == 0)
      return SymInt(unit / d.coef);
  }
  if (k != 0) return std::nullopt;
  for (const B::Term &t : terms) {
    auto q = divideTerm(t, d);
    if (!q) return std::nullopt;
    ops.push_back(*q);
  }
  return B::makeAdd(ops);
}

// ---- public construction

SymInt::SymInt(int64_t value) {
  auto n = std::make_shared<Node>();
  n->kind = Kind::Const;
  n->value = value;
  n->hash = hashMix(std::hash<int>()(int(Kind::Const)), std::hash<int64_t>()(value));
  n->ib = {value, value};
  n_ = std::move(n);
}
SymInt::SymInt(std::shared_ptr<const Node> n) : n_(std::move(n)) {}

SymInt SymInt::symbol(std::string name) {
  auto n = std::make_shared<Node>();
  n->kind = Kind::Symbol;
  n->hash = hashMix(std::hash<int>()(int(Kind::Symbol)), std::hash<std::string>()(name));
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
  if (b == -1) return int64_t(uint64_t(0) - uint64_t(a)); // wraps for INT64_MIN instead of trapping
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t floorModInt(int64_t a, int64_t b) {
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

SymInt operator+(const SymInt &a, const SymInt &b) {
  return B::makeAdd({a, b});
}
SymInt operator*(const SymInt &a, const SymInt &b) {
  return B::makeMul({a, b});
}
SymInt operator-(const SymInt &a) {
  return B::neg(a);
}
SymInt operator-(const SymInt &a, const SymInt &b) {
  return B::sub(a, b);
}

SymInt floorDiv(const SymInt &a, const SymInt &b) {
  Oracle o;
  return divRule(a, b, o);
}
SymInt floorMod(const SymInt &a, const SymInt &b) {
  Oracle o;
  return modRule(a, b, o);
}
SymInt ceilDiv(const SymInt &a, const SymInt &b) {
  // For c > 0, ceil(a / c) == floor((a + c - 1) / c).
  if (b.isConstant() && b.constant() > 0) return floorDiv(a + SymInt(b.constant() - 1), b);
  return -floorDiv(-a, b);
}
SymInt min(const SymInt &a, const SymInt &b) {
  Oracle o;
  return minMaxRule(SymInt::Kind::Min, {a, b}, o);
}
SymInt max(const SymInt &a, const SymInt &b) {
  Oracle o;
  return minMaxRule(SymInt::Kind::Max, {a, b}, o);
}

std::optional<std::vector<int64_t>> constantValues(const std::vector<SymInt> &v) {
  std::vector<int64_t> out;
  for (const SymInt &e : v) {
    if (!e.isConstant()) return std::nullopt;
    out.push_back(e.constant());
  }
  return out;
}

// ---- comparison

namespace {
int cmpSym(const SymInt &a, const SymInt &b) {
  if (B::key(a) == B::key(b)) return 0;
  if (a.kind() != b.kind()) return a.kind() < b.kind() ? -1 : 1;
  if (B::isRaw(a) != B::isRaw(b)) return B::isRaw(a) ? 1 : -1;
  switch (a.kind()) {
  case Kind::Const: {
    int64_t x = a.constant(), y = b.constant();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  case Kind::Symbol: {
    int c = a.symbolName().compare(b.symbolName());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  default:
    break;
  }
  const auto &x = a.operands(), &y = b.operands();
  for (size_t i = 0; i < x.size() && i < y.size(); ++i)
    if (int c = cmpSym(x[i], y[i])) return c;
  return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
}
} // namespace

bool operator==(const SymInt &a, const SymInt &b) {
  if (a.n_ == b.n_) return true;
  if (a.n_->hash != b.n_->hash) return false;
  return cmpSym(a, b) == 0;
}
bool operator<(const SymInt &a, const SymInt &b) {
  return cmpSym(a, b) < 0;
}
size_t SymInt::hash() const {
  return n_->hash;
}

// ---- evaluation

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
  v.reserve(n_->ops.size());
  for (const SymInt &o : n_->ops) {
    COIL_TRY(int64_t x, o.evaluate(bindings));
    v.push_back(x);
  }
  auto overflow = [&] { return Error::user("integer overflow in '" + str() + "'"); };
  int64_t r = v[0];
  switch (kind()) {
  case Kind::Add:
    for (size_t i = 1; i < v.size(); ++i)
      if (__builtin_add_overflow(r, v[i], &r)) return overflow();
    return r;
  case Kind::Mul:
    for (size_t i = 1; i < v.size(); ++i)
      if (__builtin_mul_overflow(r, v[i], &r)) return overflow();
    return r;
  case Kind::FloorDiv:
  case Kind::Mod:
    if (v[1] == 0) return Error::user("division by zero in '" + str() + "'");
    if (kind() == Kind::FloorDiv) {
      if (v[0] == INT64_MIN && v[1] == -1) return overflow();
      return floorDivInt(v[0], v[1]);
    }
    return floorModInt(v[0], v[1]);
  case Kind::Min:
    return *std::min_element(v.begin(), v.end());
  case Kind::Max:
    return *std::max_element(v.begin(), v.end());
  default:
    break;
  }
  return Error::internal("bad SymInt kind");
}

SymInt SymInt::substitute(const std::map<std::string, SymInt> &repl) const {
  if (isConstant()) return *this;
  if (isSymbol()) {
    auto it = repl.find(n_->name);
    return it == repl.end() ? *this : it->second;
  }
  std::vector<SymInt> ops;
  for (const SymInt &o : n_->ops) ops.push_back(o.substitute(repl));
  Oracle o;
  switch (kind()) {
  case Kind::Add:
    return B::makeAdd(ops);
  case Kind::Mul:
    return B::makeMul(ops);
  case Kind::FloorDiv:
    return divRule(ops[0], ops[1], o);
  case Kind::Mod:
    return modRule(ops[0], ops[1], o);
  default:
    return minMaxRule(kind(), ops, o);
  }
}

void SymInt::collectSymbols(std::set<std::string> &out) const {
  if (isSymbol()) out.insert(n_->name);
  for (const SymInt &o : n_->ops) o.collectSymbols(out);
}

} // namespace coil
