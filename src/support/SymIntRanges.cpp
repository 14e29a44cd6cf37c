// SymInt range analysis: bounds under symbol ranges, simplify() (the canonicalizing rules
// asked with the ranges' intervals), and the proofs built on them.
#include "support/SymInt.h"
#include "support/SymIntInternal.h"

#include <algorithm>

namespace coil {

using namespace symint;

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

namespace {

/// a <= b by the intervals, else through the min/max operands that the intervals of b - a
/// miss (min(seq, 128) <= seq): min(x, ...) <= b when some operand is, max(x, ...) <= b when
/// every operand is, and the mirror rules for a min or max on the right. Descending into both
/// sides can take exponential time in nested min/max; after `budget` comparisons the answer is
/// "not proven" (false is always sound).
bool le(Oracle &o, const SymInt &a, const SymInt &b, const SymRanges &ranges, int &budget) {
  if (o.le(a, b) || o.ival(simplify(b - a, ranges)).lo >= 0) return true;
  if (--budget < 0) return false;
  // Whether `pred` holds for any (or every) operand of the min/max `m`, stopping at the first
  // operand that decides.
  auto through = [](const SymInt &m, bool anyOperand, auto pred) {
    const auto &ops = m.operands();
    return anyOperand ? std::any_of(ops.begin(), ops.end(), pred)
                      : std::all_of(ops.begin(), ops.end(), pred);
  };
  auto minOrMax = [](const SymInt &e) { return e.kind() == Kind::Min || e.kind() == Kind::Max; };
  if (minOrMax(a) && through(a, a.kind() == Kind::Min,
                             [&](const SymInt &x) { return le(o, x, b, ranges, budget); }))
    return true;
  if (minOrMax(b) && through(b, b.kind() == Kind::Max,
                             [&](const SymInt &y) { return le(o, a, y, ranges, budget); }))
    return true;
  return false;
}

} // namespace

bool proveLE(const SymInt &a, const SymInt &b, const SymRanges &ranges) {
  Oracle o(ranges);
  int budget = 256;
  return le(o, a, b, ranges, budget);
}
bool proveLT(const SymInt &a, const SymInt &b, const SymRanges &ranges) {
  return proveLE(a + 1, b, ranges);
}
bool proveEQ(const SymInt &a, const SymInt &b, const SymRanges &ranges) {
  if (a == b) return true;
  SymInt d = simplify(a - b, ranges);
  if (d.isConstant() && d.constant() == 0) return true;
  // max(seq, min(seq, 64)) == seq, which the difference does not show.
  return proveLE(a, b, ranges) && proveLE(b, a, ranges);
}

} // namespace coil
