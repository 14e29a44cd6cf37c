// SymInt: canonical construction (the operators), range reasoning (bounds, simplify), evaluation,
// printers and the parser.
//
// Canonicalization is done once, when a node is built: makeAdd/makeMul collect terms and
// factors, divRule/modRule/minMaxRule apply the rewrites for floor division, modulo, min and max.
// The rewrites that need facts about values ask an Oracle for intervals: in the operators the
// Oracle knows nothing about symbols (every int64 value is possible) and uses the interval
// cached in each node; in simplify() it uses the user's per-symbol ranges.
#include "support/SymInt.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <unordered_map>

namespace coil {

namespace {

using i128 = __int128;
constexpr int64_t kBig = int64_t(1) << 62;
// Every int64 value lies in [-kInf, kInf], so interval arithmetic with kInf as an ordinary
// number stays conservative; results are clamped to that range to keep products in i128.
constexpr i128 kInf = i128(1) << 63;

struct Ival {
  i128 lo, hi;
};

i128 clampI(i128 v) {
  return v < -kInf ? -kInf : (v > kInf ? kInf : v);
}
Ival mkIval(i128 lo, i128 hi) {
  return {clampI(lo), clampI(hi)};
}
bool isPoint(const Ival &v) {
  return v.lo == v.hi && v.lo > -kInf && v.lo < kInf;
}

i128 floorDiv128(i128 a, i128 b) {
  i128 q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Ival addIval(const Ival &a, const Ival &b) {
  return mkIval(a.lo + b.lo, a.hi + b.hi);
}
Ival mulIval(const Ival &a, const Ival &b) {
  i128 c[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
  return mkIval(*std::min_element(c, c + 4), *std::max_element(c, c + 4));
}
Ival powIval(const Ival &a, size_t p) {
  Ival r = a;
  for (size_t i = 1; i < p; ++i) r = mulIval(r, a);
  if (p % 2 == 0) {
    // An even power is non-negative; its minimum is at the value nearest to 0.
    i128 m =
        (a.lo <= 0 && a.hi >= 0) ? 0 : std::min(a.lo < 0 ? -a.lo : a.lo, a.hi < 0 ? -a.hi : a.hi);
    i128 lo = 1;
    for (size_t i = 0; i < p && lo < kInf; ++i) lo = clampI(lo * m);
    r.lo = std::max<i128>(r.lo, lo);
  }
  return r;
}
// Floor division over the divisor's non-zero values (a division by zero has no value).
Ival divIval(const Ival &a, const Ival &b) {
  bool any = false;
  i128 lo = 0, hi = 0;
  auto part = [&](i128 bl, i128 bh) {
    i128 c[4] = {floorDiv128(a.lo, bl), floorDiv128(a.lo, bh), floorDiv128(a.hi, bl),
                 floorDiv128(a.hi, bh)};
    i128 l = *std::min_element(c, c + 4), h = *std::max_element(c, c + 4);
    lo = any ? std::min(lo, l) : l;
    hi = any ? std::max(hi, h) : h;
    any = true;
  };
  if (b.lo <= -1) part(b.lo, std::min<i128>(b.hi, -1));
  if (b.hi >= 1) part(std::max<i128>(b.lo, 1), b.hi);
  if (!any) return {-kInf, kInf};
  return mkIval(lo, hi);
}
Ival modIval(const Ival &a, const Ival &b) {
  if (b.lo == b.hi && b.lo != 0) {
    // One divisor: if `a` stays within one period, the result is a shifted `a`.
    i128 c = b.lo;
    i128 qa = floorDiv128(a.lo, c), qb = floorDiv128(a.hi, c);
    if (qa == qb && a.lo > -kInf && a.hi < kInf) return mkIval(a.lo - qa * c, a.hi - qa * c);
  }
  if (b.lo >= 1) {
    i128 hi = b.hi - 1;
    if (a.lo >= 0) return mkIval(a.lo < b.lo && a.hi < b.lo ? a.lo : 0, std::min(hi, a.hi));
    return mkIval(0, hi);
  }
  if (b.hi <= -1) {
    i128 lo = b.lo + 1;
    if (a.hi <= 0) return mkIval(std::max(lo, a.lo), a.lo > b.hi && a.hi > b.hi ? a.hi : 0);
    return mkIval(lo, 0);
  }
  // Divisor of either sign: |result| < max |divisor|.
  i128 m = std::max(-b.lo, b.hi);
  if (m == 0) return {-kInf, kInf};
  return mkIval(-(m - 1), m - 1);
}

int64_t gcd64(int64_t a, int64_t b) {
  uint64_t x = a < 0 ? uint64_t(0) - uint64_t(a) : uint64_t(a);
  uint64_t y = b < 0 ? uint64_t(0) - uint64_t(b) : uint64_t(b);
  uint64_t g = std::gcd(x, y);
  return g > uint64_t(INT64_MAX) ? -1 : int64_t(g); // -1 (acts as 1 later): 2^63
}

size_t hashMix(size_t h, size_t v) {
  return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
}

} // namespace

struct SymInt::Node {
  Kind kind = Kind::Const;
  int64_t value = 0;
  std::string name;
  std::vector<SymInt> ops;
  size_t hash = 0;
  Ival ib{-kInf, kInf}; // values for any values of the symbols
  // An Add or Mul kept unfolded because folding its constants overflowed int64: its operands
  // are as given, it is never flattened into another node, and evaluate() reports the overflow.
  bool raw = false;
};

namespace {
class Oracle;
}

struct SymIntBuilder {
  using Kind = SymInt::Kind;
  static const Ival &ib(const SymInt &e) { return e.n_->ib; }
  static const void *key(const SymInt &e) { return e.n_.get(); }

  /// A node with these operands as they are (no canonicalization).
  static SymInt make(Kind k, std::vector<SymInt> ops, bool raw = false) {
    auto n = std::make_shared<SymInt::Node>();
    n->kind = k;
    n->ops = std::move(ops);
    n->raw = raw;
    n->hash = std::hash<int>()(int(k) + (raw ? 100 : 0));
    for (const SymInt &o : n->ops) n->hash = hashMix(n->hash, o.n_->hash);
    n->ib = combine(k, n->ops, [](const SymInt &o) { return o.n_->ib; });
    return SymInt(std::shared_ptr<const SymInt::Node>(std::move(n)));
  }

  /// The interval of a node of kind `k` over `ops`, given the intervals of the operands.
  static Ival combine(Kind k, const std::vector<SymInt> &ops,
                      const std::function<Ival(const SymInt &)> &get) {
    switch (k) {
    case Kind::Const:
    case Kind::Symbol:
      return {-kInf, kInf};
    case Kind::Add: {
      Ival r{0, 0};
      for (const SymInt &o : ops) r = addIval(r, get(o));
      return r;
    }
    case Kind::Mul: {
      Ival r{1, 1};
      for (size_t i = 0; i < ops.size();) {
        size_t j = i;
        while (j < ops.size() && ops[j] == ops[i]) ++j;
        r = mulIval(r, powIval(get(ops[i]), j - i));
        i = j;
      }
      return r;
    }
    case Kind::FloorDiv:
      return divIval(get(ops[0]), get(ops[1]));
    case Kind::Mod:
      return modIval(get(ops[0]), get(ops[1]));
    case Kind::Min:
    case Kind::Max: {
      Ival r = get(ops[0]);
      for (size_t i = 1; i < ops.size(); ++i) {
        Ival v = get(ops[i]);
        if (k == Kind::Min)
          r = {std::min(r.lo, v.lo), std::min(r.hi, v.hi)};
        else
          r = {std::max(r.lo, v.lo), std::max(r.hi, v.hi)};
      }
      return r;
    }
    }
    return {-kInf, kInf};
  }

  // ---- sums and products
  struct Term {
    int64_t coef;
    SymInt mono; // never a constant
  };
  /// Splits a canonical term into coefficient and monomial.
  static Term splitTerm(const SymInt &t) {
    if (t.kind() == Kind::Mul && t.operands()[0].isConstant() && !isRaw(t)) {
      const auto &ops = t.operands();
      if (ops.size() == 2) return {ops[0].constant(), ops[1]};
      return {ops[0].constant(), make(Kind::Mul, std::vector<SymInt>(ops.begin() + 1, ops.end()))};
    }
    return {1, t};
  }
  static SymInt makeTerm(int64_t coef, const SymInt &mono) {
    if (coef == 1) return mono;
    std::vector<SymInt> ops{SymInt(coef)};
    if (mono.kind() == Kind::Mul && !mono.operands()[0].isConstant() && !isRaw(mono))
      ops.insert(ops.end(), mono.operands().begin(), mono.operands().end());
    else
      ops.push_back(mono);
    return make(Kind::Mul, std::move(ops));
  }
  /// A canonical expression as non-constant terms plus a constant.
  static void splitSum(const SymInt &e, std::vector<Term> &terms, int64_t &k) {
    k = 0;
    terms.clear();
    if (e.isConstant()) {
      k = e.constant();
    } else if (e.kind() == Kind::Add && !isRaw(e)) {
      for (const SymInt &o : e.operands()) {
        if (o.isConstant())
          k = o.constant();
        else
          terms.push_back(splitTerm(o));
      }
    } else {
      terms.push_back(splitTerm(e));
    }
  }

  static SymInt makeAdd(const std::vector<SymInt> &in) {
    std::vector<SymInt> flat;
    for (const SymInt &o : in) {
      if (o.kind() == Kind::Add && !isRaw(o))
        flat.insert(flat.end(), o.operands().begin(), o.operands().end());
      else
        flat.push_back(o);
    }
    int64_t k = 0;
    std::map<SymInt, int64_t> coefs;
    for (const SymInt &o : flat) {
      if (o.isConstant()) {
        if (__builtin_add_overflow(k, o.constant(), &k)) return rawChain(Kind::Add, in);
        continue;
      }
      Term t = splitTerm(o);
      int64_t &c = coefs[t.mono];
      if (__builtin_add_overflow(c, t.coef, &c)) return rawChain(Kind::Add, in);
    }
    // k*c*(x // c) + k*(x % c) == k*x (c a constant, both terms with the same x).
    std::vector<SymInt> merged;
    for (auto it = coefs.begin(); it != coefs.end();) {
      const SymInt &m = it->first;
      int64_t kc;
      if (it->second != 0 && m.kind() == Kind::Mod && m.operands()[1].isConstant() &&
          !__builtin_mul_overflow(it->second, m.operands()[1].constant(), &kc)) {
        auto q = coefs.find(make(Kind::FloorDiv, m.operands()));
        if (q != coefs.end() && q->second == kc) {
          merged.push_back(makeMul({SymInt(it->second), m.operands()[0]}));
          q->second = 0;
          it->second = 0;
        }
      }
      ++it;
    }
    if (!merged.empty()) {
      for (const auto &[mono, c] : coefs)
        if (c != 0) merged.push_back(makeTerm(c, mono));
      merged.push_back(SymInt(k));
      return makeAdd(merged);
    }
    std::vector<SymInt> ops;
    // Terms of higher degree first (`M*N + 2*N + 1`), then in the order of their monomials.
    std::vector<std::pair<const SymInt *, int64_t>> sorted;
    for (const auto &[mono, c] : coefs)
      if (c != 0) sorted.push_back({&mono, c});
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto &x, const auto &y) {
      return degree(*x.first) > degree(*y.first);
    });
    for (const auto &[mono, c] : sorted) ops.push_back(makeTerm(c, *mono));
    if (ops.empty()) return SymInt(k);
    if (k != 0) ops.push_back(SymInt(k));
    if (ops.size() == 1) return ops[0];
    return make(Kind::Add, std::move(ops));
  }

  static SymInt makeMul(const std::vector<SymInt> &in) {
    std::vector<SymInt> flat;
    for (const SymInt &o : in) {
      if (o.kind() == Kind::Mul && !isRaw(o))
        flat.insert(flat.end(), o.operands().begin(), o.operands().end());
      else
        flat.push_back(o);
    }
    int64_t k = 1;
    std::vector<SymInt> factors;
    for (const SymInt &o : flat) {
      if (o.isConstant()) {
        if (__builtin_mul_overflow(k, o.constant(), &k)) return rawChain(Kind::Mul, in);
        continue;
      }
      factors.push_back(o);
    }
    if (k == 0) return SymInt(0);
    // A sum factor gives its content (gcd of its coefficients, with the sign of its first
    // term) to the coefficient: (2*N + 2)*M -> 2*M*(N + 1).
    for (SymInt &f : factors) {
      if (f.kind() != Kind::Add || isRaw(f)) continue;
      auto [unit, primitive] = content(f);
      int64_t k2;
      if (unit != 1 && !__builtin_mul_overflow(k, unit, &k2)) {
        k = k2;
        f = primitive;
      }
    }
    // A constant times one sum is distributed: 2*(N + 1) -> 2*N + 2.
    if (factors.size() == 1 && k != 1 && factors[0].kind() == Kind::Add && !isRaw(factors[0])) {
      std::vector<SymInt> terms;
      for (const SymInt &t : factors[0].operands()) {
        Term st = t.isConstant() ? Term{t.constant(), SymInt(1)} : splitTerm(t);
        int64_t c;
        if (__builtin_mul_overflow(st.coef, k, &c)) // keep it factored
          return make(Kind::Mul, {SymInt(k), factors[0]});
        terms.push_back(t.isConstant() ? SymInt(c) : makeTerm(c, st.mono));
      }
      return makeAdd(terms);
    }
    std::sort(factors.begin(), factors.end());
    if (factors.empty()) return SymInt(k);
    if (k == 1 && factors.size() == 1) return factors[0];
    if (k != 1) factors.insert(factors.begin(), SymInt(k));
    return make(Kind::Mul, std::move(factors));
  }

  /// A canonical sum as unit * primitive: unit is the gcd of its coefficients and constant,
  /// negated when the first term's coefficient is negative (1 if that would overflow).
  static std::pair<int64_t, SymInt> content(const SymInt &sum) {
    std::vector<Term> terms;
    int64_t k;
    splitSum(sum, terms, k);
    int64_t g = k;
    for (const Term &t : terms) g = gcd64(g, t.coef);
    if (g <= 0) return {1, sum};
    int64_t unit = terms[0].coef < 0 ? -g : g;
    if (unit == 1) return {1, sum};
    std::vector<SymInt> ops;
    for (const Term &t : terms) {
      if (t.coef == INT64_MIN && unit == -1) return {1, sum};
      ops.push_back(makeTerm(t.coef / unit, t.mono));
    }
    if (k == INT64_MIN && unit == -1) return {1, sum};
    ops.push_back(SymInt(k / unit));
    return {unit, makeAdd(ops)};
  }

  static SymInt neg(const SymInt &a) { return makeMul({SymInt(-1), a}); }
  static SymInt sub(const SymInt &a, const SymInt &b) { return makeAdd({a, neg(b)}); }

  static bool isRaw(const SymInt &e) { return e.n_->raw; }
  static size_t degree(const SymInt &mono) {
    return mono.kind() == Kind::Mul && !isRaw(mono) ? mono.operands().size() : 1;
  }
  /// When folding overflows: combines the operands pairwise from the left, each pair
  /// canonically if it can be, else as a raw node (what parsing the printed text rebuilds).
  static SymInt rawChain(Kind k, const std::vector<SymInt> &in) {
    if (in.size() == 2) return make(k, in, /*raw=*/true);
    SymInt r = in[0];
    for (size_t i = 1; i < in.size(); ++i)
      r = k == Kind::Add ? makeAdd({r, in[i]}) : makeMul({r, in[i]});
    return r;
  }
};

namespace {

using B = SymIntBuilder;
using Kind = SymInt::Kind;

/// Intervals of expressions: without ranges (every int64 is possible for a symbol), from the
/// interval cached in each node; with ranges, recomputed from the ranges (memoized).
class Oracle {
public:
  Oracle() = default;
  explicit Oracle(const SymRanges &ranges) : ranges_(&ranges) {}

  Ival ival(const SymInt &e) {
    if (e.isConstant()) return {e.constant(), e.constant()};
    if (!ranges_) return B::ib(e);
    const void *key = B::key(e);
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    Ival r;
    if (e.isSymbol()) {
      auto s = ranges_->find(e.symbolName());
      SymRange sr = s == ranges_->end() ? SymRange{} : s->second;
      r = mkIval(sr.min, sr.max);
    } else {
      r = B::combine(e.kind(), e.operands(), [this](const SymInt &o) { return ival(o); });
      // The cached interval holds for every value of the symbols, so it holds here too.
      Ival c = B::ib(e);
      r = {std::max(r.lo, c.lo), std::min(r.hi, c.hi)};
      if (r.lo > r.hi) r = c;
    }
    keep_.push_back(e);
    memo_.emplace(key, r);
    return r;
  }
  bool ranged() const { return ranges_ != nullptr; }

  bool nonZero(const SymInt &e) {
    Ival v = ival(e);
    return v.lo > 0 || v.hi < 0;
  }
  /// a <= b for every value.
  bool le(const SymInt &a, const SymInt &b) {
    if (a == b) return true;
    Ival x = ival(a), y = ival(b);
    if (x.hi <= y.lo) return true;
    return ival(B::sub(b, a)).lo >= 0;
  }
  bool lt(const SymInt &a, const SymInt &b) {
    Ival x = ival(a), y = ival(b);
    if (x.hi < y.lo) return true;
    return ival(B::sub(b, a)).lo >= 1;
  }

private:
  const SymRanges *ranges_ = nullptr;
  // Keyed by node address only to memoize (never iterated); keep_ holds the nodes alive.
  std::unordered_map<const void *, Ival> memo_;
  std::vector<SymInt> keep_;
};

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

SymInt divRule(const SymInt &a, const SymInt &b, Oracle &o);
SymInt modRule(const SymInt &a, const SymInt &b, Oracle &o);

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

} // namespace

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

// ---- ranges

SymRange bounds(const SymInt &e, const SymRanges &ranges) {
  Oracle o(ranges);
  Ival v = o.ival(e);
  auto sat = [](i128 x) { return int64_t(std::max<i128>(-kBig, std::min<i128>(kBig, x))); };
  return {sat(v.lo), sat(v.hi)};
}

SymInt simplify(const SymInt &e, const SymRanges &ranges) {
  Oracle o(ranges);
  std::function<SymInt(const SymInt &)> rec = [&](const SymInt &x) -> SymInt {
    if (x.isConstant()) return x;
    SymInt r = x;
    if (!x.isSymbol()) {
      std::vector<SymInt> ops;
      for (const SymInt &op : x.operands()) ops.push_back(rec(op));
      switch (x.kind()) {
      case Kind::Add:
        r = B::makeAdd(ops);
        break;
      case Kind::Mul:
        r = B::makeMul(ops);
        break;
      case Kind::FloorDiv:
        r = divRule(ops[0], ops[1], o);
        break;
      case Kind::Mod:
        r = modRule(ops[0], ops[1], o);
        break;
      default:
        r = minMaxRule(x.kind(), ops, o);
        break;
      }
    }
    // A value fixed by the ranges.
    Ival v = o.ival(r);
    if (isPoint(v)) return SymInt(int64_t(v.lo));
    return r;
  };
  return rec(e);
}

bool proveLE(const SymInt &a, const SymInt &b, const SymRanges &ranges) {
  Oracle o(ranges);
  return o.le(a, b) || o.ival(simplify(b - a, ranges)).lo >= 0;
}
bool proveLT(const SymInt &a, const SymInt &b, const SymRanges &ranges) {
  return proveLE(a + 1, b, ranges);
}
bool proveEQ(const SymInt &a, const SymInt &b, const SymRanges &ranges) {
  if (a == b) return true;
  SymInt d = simplify(a - b, ranges);
  return d.isConstant() && d.constant() == 0;
}

// ---- printers

namespace {

enum Prec { kSum = 1, kTerm = 2, kUnary = 3, kAtom = 4 };
enum class Lang { Text, Python, Cpp, Cuda };

class Printer {
public:
  Printer(Lang lang, const SymRanges *ranges) : lang_(lang) {
    if (ranges) oracle_.emplace(*ranges);
  }

  std::string print(const SymInt &e, int ctx) {
    int prec;
    std::string s = body(e, prec);
    return prec < ctx ? "(" + s + ")" : s;
  }

private:
  static bool negativeTerm(const SymInt &t) {
    if (t.isConstant()) return t.constant() < 0;
    return t.kind() == Kind::Mul && t.operands()[0].isConstant() &&
           t.operands()[0].constant() < 0 && !B::isRaw(t);
  }

  std::string constant(int64_t v, int &prec) {
    if (v == INT64_MIN) {
      prec = kAtom;
      return "(-9223372036854775807 - 1)";
    }
    prec = v < 0 ? kUnary : kAtom;
    return std::to_string(v);
  }

  std::string body(const SymInt &e, int &prec) {
    switch (e.kind()) {
    case Kind::Const:
      return constant(e.constant(), prec);
    case Kind::Symbol:
      prec = kAtom;
      return e.symbolName();
    case Kind::Add: {
      prec = kSum;
      std::vector<SymInt> terms = e.operands();
      if (B::isRaw(e)) return print(terms[0], kAtom) + " + " + print(terms[1], kAtom);
      // Lead with a positive term when there is one: `M - N` rather than `-N + M`.
      if (negativeTerm(terms[0])) {
        auto pos = std::find_if(terms.begin(), terms.end(),
                                [](const SymInt &t) { return !negativeTerm(t); });
        if (pos != terms.end()) std::rotate(terms.begin(), pos, pos + 1);
      }
      std::string s = print(terms[0], kSum);
      for (size_t i = 1; i < terms.size(); ++i) {
        const SymInt &t = terms[i];
        B::Term st = t.isConstant() ? B::Term{t.constant(), SymInt(1)} : B::splitTerm(t);
        if (negativeTerm(t) && st.coef != INT64_MIN) {
          SymInt pos = t.isConstant() ? SymInt(-t.constant()) : B::makeTerm(-st.coef, st.mono);
          s += " - " + print(pos, kTerm);
        } else {
          s += " + " + print(t, kTerm);
        }
      }
      return s;
    }
    case Kind::Mul: {
      const auto &ops = e.operands();
      std::string s;
      size_t i = 0;
      prec = kTerm;
      if (B::isRaw(e)) return print(ops[0], kAtom) + "*" + print(ops[1], kAtom);
      if (ops[0].isConstant() && !B::isRaw(e)) {
        int64_t c = ops[0].constant();
        i = 1;
        if (c == -1) {
          s = "-";
          if (ops.size() == 2) prec = kUnary;
        } else {
          int p;
          s = constant(c, p) + "*";
        }
      }
      for (size_t j = i; j < ops.size(); ++j) s += (j > i ? "*" : "") + print(ops[j], kUnary);
      return s;
    }
    case Kind::FloorDiv:
    case Kind::Mod: {
      bool div = e.kind() == Kind::FloorDiv;
      const SymInt &a = e.operands()[0], &b = e.operands()[1];
      if (lang_ != Lang::Cpp && lang_ != Lang::Cuda) {
        prec = kTerm;
        return print(a, kTerm) + (div ? " // " : " % ") + print(b, kAtom);
      }
      if (oracle_ && oracle_->ival(a).lo >= 0 && oracle_->ival(b).lo >= 1) {
        prec = kTerm;
        return print(a, kTerm) + (div ? " / " : " % ") + print(b, kAtom);
      }
      prec = kAtom;
      return std::string(div ? "coil_floordiv(" : "coil_floormod(") + print(a, kSum) + ", " +
             print(b, kSum) + ")";
    }
    case Kind::Min:
    case Kind::Max: {
      bool isMin = e.kind() == Kind::Min;
      const auto &ops = e.operands();
      prec = kAtom;
      if (lang_ == Lang::Cpp || lang_ == Lang::Cuda) {
        // Nested binary calls: std::min<int64_t>(a, std::min<int64_t>(b, c)).
        const char *f = lang_ == Lang::Cuda ? (isMin ? "coil_imin(" : "coil_imax(")
                        : isMin             ? "std::min<int64_t>("
                                            : "std::max<int64_t>(";
        std::string s = print(ops.back(), kSum);
        for (size_t i = ops.size() - 1; i-- > 0;) s = f + print(ops[i], kSum) + ", " + s + ")";
        return s;
      }
      std::string s = isMin ? "min(" : "max(";
      for (size_t i = 0; i < ops.size(); ++i) s += (i ? ", " : "") + print(ops[i], kSum);
      return s + ")";
    }
    }
    prec = kAtom;
    return "?";
  }

  Lang lang_;
  std::optional<Oracle> oracle_;
};

} // namespace

std::string SymInt::str() const {
  return Printer(Lang::Text, nullptr).print(*this, kSum);
}
std::string SymInt::toPython() const {
  return Printer(Lang::Python, nullptr).print(*this, kSum);
}
std::string SymInt::toCpp(const SymRanges &ranges) const {
  return Printer(Lang::Cpp, &ranges).print(*this, kSum);
}
std::string SymInt::toCuda(const SymRanges &ranges) const {
  return Printer(Lang::Cuda, &ranges).print(*this, kSum);
}

// ---- parser

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
  static constexpr int kMaxDepth = 256;

  Error err(const std::string &m) {
    return Error::user("bad size expression '" + std::string(s_) + "' at column " +
                       std::to_string(p_ + 1) + ": " + m);
  }
  void skip() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t')) ++p_;
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
    if (++depth_ > kMaxDepth) return err("expression nested too deeply");
    COIL_TRY(SymInt e, parseTerm());
    for (;;) {
      if (eat("+")) {
        COIL_TRY(SymInt r, parseTerm());
        e = e + r;
      } else if (eat("-")) {
        COIL_TRY(SymInt r, parseTerm());
        e = e - r;
      } else {
        --depth_;
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
      if (++depth_ > kMaxDepth) return err("expression nested too deeply");
      COIL_TRY(SymInt e, parseUnary());
      --depth_;
      // A literal right after '-' may be -2^63.
      return -e;
    }
    return parsePrimary();
  }
  // primary := INT | IDENT | ('min'|'max') '(' sum (',' sum)+ ')' | '(' sum ')'
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
        int d = s_[p_] - '0';
        if (v > (INT64_MAX - d) / 10) return err("integer too large");
        v = v * 10 + d;
        ++p_;
      }
      return SymInt(v);
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t b = p_;
      while (p_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[p_])) || s_[p_] == '_'))
        ++p_;
      std::string id(s_.substr(b, p_ - b));
      if ((id == "min" || id == "max") && eat("(")) {
        std::vector<SymInt> args;
        do {
          COIL_TRY(SymInt a, parseSum());
          args.push_back(a);
        } while (eat(","));
        if (!eat(")")) return err("expected ',' or ')'");
        if (args.size() < 2) return err(id + "() needs at least 2 arguments");
        Oracle o;
        return minMaxRule(id == "min" ? Kind::Min : Kind::Max, args, o);
      }
      return SymInt::symbol(id);
    }
    return err("unexpected '" + std::string(1, c) + "'");
  }
  std::string_view s_;
  size_t p_ = 0;
  int depth_ = 0;
};
} // namespace

Expected<SymInt> parseSymInt(std::string_view text) {
  return SymParser(text).parseAll();
}

#define COIL_SYMINT_STRINGIFY_(...) #__VA_ARGS__
#define COIL_SYMINT_STRINGIFY(...) COIL_SYMINT_STRINGIFY_(__VA_ARGS__)
const char *cppPrelude() {
  return COIL_SYMINT_STRINGIFY(COIL_SYMINT_CPP_PRELUDE_CODE) "\n";
}

} // namespace coil
