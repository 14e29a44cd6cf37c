/// \file Private to the SymInt implementation (SymInt.cpp: construction, the canonicalizing
/// operators and their rules, comparison and evaluation; SymIntRanges.cpp: range analysis;
/// SymIntText.cpp: printers and the parser): the node, the interval arithmetic every node caches,
/// the builder of canonical sums and products, and the Oracle that the rewrites ask for intervals.
///
/// Canonicalization is done once, when a node is built: makeAdd/makeMul collect terms and
/// factors, divRule/modRule/minMaxRule apply the rewrites for floor division, modulo, min and max.
/// The rewrites that need facts about values ask an Oracle for intervals: in the operators the
/// Oracle knows nothing about symbols (every int64 value is possible) and uses the interval
/// cached in each node; in simplify() it uses the user's per-symbol ranges.
#pragma once

#include "support/SymInt.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <unordered_map>
#include <vector>

namespace coil {

namespace symint {

using i128 = __int128;
constexpr int64_t kBig = int64_t(1) << 62;
// Every int64 value lies in [-kInf, kInf], so interval arithmetic with kInf as an ordinary
// number stays conservative; results are clamped to that range to keep products in i128.
constexpr i128 kInf = i128(1) << 63;

struct Ival {
  i128 lo, hi;
};

// Internal to the libraries that link support/: not exported.
#pragma GCC visibility push(hidden)

inline i128 clampI(i128 v) {
  return v < -kInf ? -kInf : (v > kInf ? kInf : v);
}
inline Ival mkIval(i128 lo, i128 hi) {
  return {clampI(lo), clampI(hi)};
}
inline bool isPoint(const Ival &v) {
  return v.lo == v.hi && v.lo > -kInf && v.lo < kInf;
}

inline i128 floorDiv128(i128 a, i128 b) {
  i128 q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

inline Ival addIval(const Ival &a, const Ival &b) {
  return mkIval(a.lo + b.lo, a.hi + b.hi);
}
inline Ival mulIval(const Ival &a, const Ival &b) {
  i128 c[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
  return mkIval(*std::min_element(c, c + 4), *std::max_element(c, c + 4));
}
inline Ival powIval(const Ival &a, size_t p) {
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
inline Ival divIval(const Ival &a, const Ival &b) {
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
inline Ival modIval(const Ival &a, const Ival &b) {
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

inline int64_t gcd64(int64_t a, int64_t b) {
  uint64_t x = a < 0 ? uint64_t(0) - uint64_t(a) : uint64_t(a);
  uint64_t y = b < 0 ? uint64_t(0) - uint64_t(b) : uint64_t(b);
  uint64_t g = std::gcd(x, y);
  return g > uint64_t(INT64_MAX) ? -1 : int64_t(g); // -1 (acts as 1 later): 2^63
}

inline size_t hashMix(size_t h, size_t v) {
  return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
}

#pragma GCC visibility pop

} // namespace symint

struct SymInt::Node {
  Kind kind = Kind::Const;
  int64_t value = 0;
  std::string name;
  std::vector<SymInt> ops;
  size_t hash = 0;
  symint::Ival ib{-symint::kInf, symint::kInf}; // values for any values of the symbols
  // An Add or Mul kept unfolded because folding its constants overflowed int64: its operands
  // are as given, it is never flattened into another node, and evaluate() reports the overflow.
  bool raw = false;
};

struct SymIntBuilder {
  using Kind = SymInt::Kind;
  static const symint::Ival &ib(const SymInt &e) { return e.n_->ib; }
  static const void *key(const SymInt &e) { return e.n_.get(); }

  /// A node with these operands as they are (no canonicalization).
  static SymInt make(Kind k, std::vector<SymInt> ops, bool raw = false) {
    auto n = std::make_shared<SymInt::Node>();
    n->kind = k;
    n->ops = std::move(ops);
    n->raw = raw;
    n->hash = std::hash<int>()(int(k) + (raw ? 100 : 0));
    for (const SymInt &o : n->ops) n->hash = symint::hashMix(n->hash, o.n_->hash);
    n->ib = combine(k, n->ops, [](const SymInt &o) { return o.n_->ib; });
    return SymInt(std::shared_ptr<const SymInt::Node>(std::move(n)));
  }

  /// The interval of a node of kind `k` over `ops`, given the intervals of the operands.
  static symint::Ival combine(Kind k, const std::vector<SymInt> &ops,
                              const std::function<symint::Ival(const SymInt &)> &get) {
    switch (k) {
    case Kind::Const:
    case Kind::Symbol:
      return {-symint::kInf, symint::kInf};
    case Kind::Add: {
      symint::Ival r{0, 0};
      for (const SymInt &o : ops) r = symint::addIval(r, get(o));
      return r;
    }
    case Kind::Mul: {
      symint::Ival r{1, 1};
      for (size_t i = 0; i < ops.size();) {
        size_t j = i;
        while (j < ops.size() && ops[j] == ops[i]) ++j;
        r = symint::mulIval(r, symint::powIval(get(ops[i]), j - i));
        i = j;
      }
      return r;
    }
    case Kind::FloorDiv:
      return symint::divIval(get(ops[0]), get(ops[1]));
    case Kind::Mod:
      return symint::modIval(get(ops[0]), get(ops[1]));
    case Kind::Min:
    case Kind::Max: {
      symint::Ival r = get(ops[0]);
      for (size_t i = 1; i < ops.size(); ++i) {
        symint::Ival v = get(ops[i]);
        if (k == Kind::Min)
          r = {std::min(r.lo, v.lo), std::min(r.hi, v.hi)};
        else
          r = {std::max(r.lo, v.lo), std::max(r.hi, v.hi)};
      }
      return r;
    }
    }
    return {-symint::kInf, symint::kInf};
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
    for (const Term &t : terms) g = symint::gcd64(g, t.coef);
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

namespace symint {

#pragma GCC visibility push(hidden)

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

/// The canonical floor division, modulo, min and max of canonical operands (SymInt.cpp).
SymInt divRule(const SymInt &a, const SymInt &b, Oracle &o);
SymInt modRule(const SymInt &a, const SymInt &b, Oracle &o);
SymInt minMaxRule(Kind kind, const std::vector<SymInt> &in, Oracle &o);

#pragma GCC visibility pop

} // namespace symint
} // namespace coil
