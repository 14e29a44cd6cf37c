// Tests of SymInt: one test per rewrite rule and printer feature, then randomized differential
// tests: random expression trees are evaluated by a reference evaluator of the unsimplified tree
// and compared with the canonical form, its parsed text, its C++ text (interpreted with C++
// semantics here, and compiled once), its Python text (one python3 process) and its bounds.
#include "support/SymInt.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <gtest/gtest.h>
#include <random>
#include <sstream>
#include <unistd.h>

using namespace coil;

namespace {

// The very code that cppPrelude() returns, compiled here.
COIL_SYMINT_CPP_PRELUDE_CODE

const SymInt N = SymInt::symbol("N"), M = SymInt::symbol("M"), K = SymInt::symbol("K");

int64_t eval(const SymInt &e, const SymBindings &b) {
  auto v = e.evaluate(b);
  EXPECT_TRUE(v.ok()) << e.str() << ": " << v.error().message();
  return v.ok() ? *v : 0;
}
SymInt parse(const std::string &s) {
  auto e = parseSymInt(s);
  EXPECT_TRUE(e.ok()) << s << ": " << e.error().message();
  return e.ok() ? *e : SymInt(0);
}

} // namespace

// ---------------------------------------------------------------- canonical forms

TEST(SymIntCanon, ConstantsFold) {
  EXPECT_EQ(SymInt(2) + 3, SymInt(5));
  EXPECT_EQ(SymInt(2) * -3, SymInt(-6));
  EXPECT_EQ(floorDiv(-7, 2), SymInt(-4));
  EXPECT_EQ(floorMod(-7, 2), SymInt(1));
  EXPECT_EQ(floorMod(7, -2), SymInt(-1));
  EXPECT_EQ(ceilDiv(7, 2), SymInt(4));
  EXPECT_EQ(ceilDiv(-7, 2), SymInt(-3));
  EXPECT_EQ(min(3, 5), SymInt(3));
  EXPECT_EQ(max(3, 5), SymInt(5));
  EXPECT_EQ((N + 2) - N + 3, SymInt(5));
}

TEST(SymIntCanon, LikeTermsCollected) {
  EXPECT_EQ(N + N, 2 * N);
  EXPECT_EQ(N - N, SymInt(0));
  EXPECT_EQ(2 * N + 3 * N, 5 * N);
  EXPECT_EQ((2 * N + 3 * N).str(), "5*N");
  EXPECT_EQ(N * M - M * N, SymInt(0));
  EXPECT_EQ(floorDiv(N, 4) + floorDiv(N, 4), 2 * floorDiv(N, 4));
  EXPECT_EQ((N + 1 + M - 1 - N).str(), "M");
}

TEST(SymIntCanon, CommutativeOperandsSorted) {
  EXPECT_EQ(N * M, M * N);
  EXPECT_EQ((N * M).hash(), (M * N).hash());
  EXPECT_EQ((N * M).str(), (M * N).str());
  EXPECT_EQ(N + M, M + N);
  EXPECT_EQ(min(N, M), min(M, N));
  EXPECT_EQ(max(N, M).str(), max(M, N).str());
  EXPECT_EQ(min(N, 8).str(), "min(N, 8)");
  EXPECT_EQ(min(8, N).str(), "min(N, 8)");
  EXPECT_NE(min(N, M), max(N, M));
}

TEST(SymIntCanon, NestedSumsAndProductsFlattened) {
  SymInt s = (N + M) + K, t = N + (M + K);
  EXPECT_EQ(s, t);
  EXPECT_EQ(s.kind(), SymInt::Kind::Add);
  EXPECT_EQ(s.operands().size(), 3u);
  SymInt p = (N * M) * K;
  EXPECT_EQ(p, N * (M * K));
  EXPECT_EQ(p.operands().size(), 3u);
  EXPECT_EQ(min(min(N, M), K), min(N, min(K, M)));
  EXPECT_EQ(min(min(N, M), K).operands().size(), 3u);
  EXPECT_EQ(max(max(N, 3), max(M, 5)).str(), "max(M, N, 5)");
}

TEST(SymIntCanon, PowersAsRepeatedFactors) {
  EXPECT_EQ(N * N * M, M * N * N);
  EXPECT_EQ((N * M * N).str(), "M*N*N");
  EXPECT_NE(N * N, N);
  EXPECT_EQ(N * N - N * N, SymInt(0));
}

TEST(SymIntCanon, DistributesOverSums) {
  EXPECT_EQ((2 * (N + 1)).str(), "2*N + 2");
  EXPECT_EQ(2 * (N + 1), 2 * N + 2);
  // Other products of sums stay factored, each sum primitive (content in the coefficient).
  EXPECT_EQ((N + 1) * (N - 1), (N - 1) * (N + 1));
  EXPECT_EQ(((N + 1) * (N - 1)).str(), "(N - 1)*(N + 1)");
  EXPECT_EQ(((N + 1) * M).str(), "M*(N + 1)");
  EXPECT_EQ((2 * N + 2) * M, 2 * (M * (N + 1)));
  EXPECT_EQ(((2 * N + 2) * M).str(), "2*M*(N + 1)");
  EXPECT_EQ(((1 - N) * M).str(), "-M*(N - 1)");
  EXPECT_EQ((N + 1) * M * 3 - 2 * M * (N + 1), M * (N + 1));
  EXPECT_EQ(((N + 1) * (N + 1)).str(), "(N + 1)*(N + 1)");
  EXPECT_EQ(-(N - M), M - N);
  EXPECT_EQ((N + 2) * 3 - 3 * N, SymInt(6));
}

TEST(SymIntCanon, FloorDivIdentities) {
  EXPECT_EQ(floorDiv(N, 1), N);
  EXPECT_EQ(floorDiv(N, -1), -N);
  EXPECT_EQ(floorDiv(4 * N, 4), N);
  EXPECT_EQ(floorDiv(-4 * N, 4), -N);
  // (x + c*k) // c == x // c + k holds for floor division.
  EXPECT_EQ(floorDiv(N + 8, 4), floorDiv(N, 4) + 2);
  EXPECT_EQ(floorDiv(N - 8, 4), floorDiv(N, 4) - 2);
  EXPECT_EQ(floorDiv(4 * N + M, 4), N + floorDiv(M, 4));
  EXPECT_EQ(floorDiv(N + 5, 4).str(), "(N + 1) // 4 + 1");
  EXPECT_EQ(floorDiv(N + 3, 4).str(), "(N + 3) // 4");
  // Common factor: (2*N + 1) // 4 == N // 2.
  EXPECT_EQ(floorDiv(2 * N + 1, 4), floorDiv(N, 2));
  EXPECT_EQ(floorDiv(6 * N + 4 * M, 4), M + floorDiv(3 * N, 2));
  // Nested: (N // 2) // 3 == N // 6.
  EXPECT_EQ(floorDiv(floorDiv(N, 2), 3), floorDiv(N, 6));
  // Negative divisors are normalized: N // -3 == (-N) // 3.
  EXPECT_EQ(floorDiv(N, -3), floorDiv(-N, 3));
  // A value within one period of the divisor.
  EXPECT_EQ(floorDiv(floorMod(N, 4), 4), SymInt(0));
  EXPECT_EQ(floorDiv(floorMod(N, 4) + 4, 4), SymInt(1));
  EXPECT_EQ(ceilDiv(N, 4), floorDiv(N + 3, 4));
  // Division by zero is kept, to fail at evaluation.
  EXPECT_EQ(floorDiv(N, 0).kind(), SymInt::Kind::FloorDiv);
  EXPECT_EQ(floorDiv(5, 0).kind(), SymInt::Kind::FloorDiv);
}

TEST(SymIntCanon, FloorDivBySymbols) {
  // (a*b) // b needs b != 0: not provable for a bare symbol.
  EXPECT_EQ(floorDiv(N * M, M).kind(), SymInt::Kind::FloorDiv);
  EXPECT_EQ(floorDiv(N, N).kind(), SymInt::Kind::FloorDiv);
  // ... but provable for max(M, 1).
  SymInt pos = max(M, 1);
  EXPECT_EQ(floorDiv(N * pos, pos), N);
  EXPECT_EQ(floorDiv(pos, pos), SymInt(1));
  EXPECT_EQ(floorDiv(3 * N * pos + 2 * pos, pos), 3 * N + 2);
  // Terms that are multiples leave the division whatever b is (b == 0 still fails).
  EXPECT_EQ(floorDiv(N * M + K, M), N + floorDiv(K, M));
  EXPECT_EQ(floorMod(N * M + K, M), floorMod(K, M));
  EXPECT_EQ(floorMod(N * pos, pos), SymInt(0));
  EXPECT_EQ(floorMod(N * M, M).kind(), SymInt::Kind::Mod);
  // 0 <= N % 4 < max(M, 4): quotient 0, remainder unchanged.
  EXPECT_EQ(floorDiv(floorMod(N, 4), max(M, 4)), SymInt(0));
  EXPECT_EQ(floorMod(floorMod(N, 4), max(M, 4)), floorMod(N, 4));
}

TEST(SymIntCanon, ExactQuotient) {
  auto q = [](const SymInt &a, const SymInt &b) {
    auto r = exactQuotient(a, b);
    return r ? r->str() : std::string("none");
  };
  EXPECT_EQ(q(6 * N * M + 3 * M, 3 * M), "2*N + 1");
  EXPECT_EQ(q(2 * N + 2, N + 1), "2");
  EXPECT_EQ(q(2 * N + 2, 2), "N + 1");
  EXPECT_EQ(q(2 * N + 3, 2), "none");
  EXPECT_EQ(q(N * (M + 1) * K, (M + 1) * K), "N");
  EXPECT_EQ(q(N, 0), "none");
  EXPECT_EQ(q(N + 1, N), "none");
  EXPECT_EQ(q(SymInt(0), N), "0");
  EXPECT_EQ(q(SymInt(INT64_MIN) * N, -1), "none");
  // Division by a sum factor.
  SymInt pos = max(M, 1) + 1;
  EXPECT_EQ(floorDiv(N * pos + 3, pos), N + floorDiv(3, pos));
  EXPECT_EQ(floorDiv(2 * pos, pos), SymInt(2));
  EXPECT_EQ(floorMod(N * pos * K, pos), SymInt(0));
  SymRanges r{{"C", {1, 64}}, {"H", {3, 64}}, {"W", {3, 64}}, {"N", {0, 8}}};
  SymInt C = SymInt::symbol("C"), H = SymInt::symbol("H"), W = SymInt::symbol("W");
  SymInt numel = N * C * (H - 2) * (W - 2);
  EXPECT_EQ(numel.str(), "C*N*(H - 2)*(W - 2)");
  EXPECT_EQ(simplify(floorDiv(numel, C * (H - 2) * (W - 2)), r), N);
  EXPECT_EQ(floorDiv(numel, C * (H - 2) * (W - 2)).kind(), SymInt::Kind::FloorDiv); // C may be 0
}

TEST(SymIntCanon, ModIdentities) {
  EXPECT_EQ(floorMod(N, 1), SymInt(0));
  EXPECT_EQ(floorMod(N, -1), SymInt(0));
  EXPECT_EQ(floorMod(4 * N + 6, 4), SymInt(2));
  EXPECT_EQ(floorMod(4 * N + M + 5, 4), floorMod(M + 1, 4));
  EXPECT_EQ(floorMod(floorMod(N, 8), 4), floorMod(N, 4));
  EXPECT_EQ(floorMod(floorMod(N, 4), 8), floorMod(N, 4));
  EXPECT_EQ(floorMod(floorMod(N, 4) + 4, 4), floorMod(N, 4));
  EXPECT_EQ(floorMod(2 * N, 4), 2 * floorMod(N, 2));
  EXPECT_EQ(floorMod(N, -3), -floorMod(-N, 3));
  EXPECT_EQ(floorMod(N, N).kind(), SymInt::Kind::Mod);
}

TEST(SymIntCanon, QuotientAndRemainderRecombine) {
  // c*(x // c) + x % c == x.
  EXPECT_EQ(4 * floorDiv(N, 4) + floorMod(N, 4), N);
  EXPECT_EQ(4 * floorDiv(N + 5, 4) + floorMod(N + 5, 4), N + 5);
  EXPECT_EQ(3 * (4 * floorDiv(N + M, 4) + floorMod(N + M, 4)) - 3 * M, 3 * N);
  EXPECT_EQ(4 * floorDiv(2 * N, 4) + floorMod(2 * N, 4), 2 * N);
  // Not when the multiple does not match.
  EXPECT_EQ((3 * floorDiv(N, 4) + floorMod(N, 4)).str(), "3*(N // 4) + N % 4");
}

TEST(SymIntCanon, MinMax) {
  EXPECT_EQ(min(N, N), N);
  EXPECT_EQ(max(N, N), N);
  EXPECT_EQ(min(N, N + 1), N);
  EXPECT_EQ(max(N, N + 1), N + 1);
  EXPECT_EQ(min(N - 2, N + 1), N - 2);
  EXPECT_EQ(min(min(N, 3), 5), min(N, 3));
  EXPECT_EQ(max(max(N, 3), 5), max(N, 5));
  EXPECT_EQ(min(floorMod(N, 4), 3), floorMod(N, 4));
  EXPECT_EQ(max(floorMod(N, 4), 0), floorMod(N, 4));
  EXPECT_EQ(min(floorMod(N, 4), 2).str(), "min(N % 4, 2)");
  EXPECT_EQ(min(N, M).kind(), SymInt::Kind::Min);
}

TEST(SymIntCanon, SubstituteRecanonicalizes) {
  SymInt e = floorDiv(N * M + 4, 4) + min(N, M);
  EXPECT_EQ(e.substitute({{"M", SymInt(4)}}), N + 1 + min(N, 4));
  EXPECT_EQ(e.substitute({{"N", SymInt(0)}, {"M", SymInt(7)}}), SymInt(1));
  std::set<std::string> syms;
  e.collectSymbols(syms);
  EXPECT_EQ(syms, (std::set<std::string>{"M", "N"}));
}

// ---------------------------------------------------------------- ranges

TEST(SymIntRanges, SimplifyUsesRanges) {
  SymRanges r{{"N", {0, 5}}, {"M", {1, 100}}, {"K", {10, 20}}};
  EXPECT_EQ(simplify(floorDiv(N * M, M), r), N);
  EXPECT_EQ(simplify(floorMod(N * M, M), r), SymInt(0));
  EXPECT_EQ(simplify(min(N, K), r), N);
  EXPECT_EQ(simplify(max(N, K), r), K);
  EXPECT_EQ(simplify(floorMod(N, 8), r), N);
  EXPECT_EQ(simplify(floorDiv(N, 8), r), SymInt(0));
  EXPECT_EQ(simplify(floorDiv(N + 10, 8), r), SymInt(1));
  EXPECT_EQ(simplify(floorMod(N + 10, 8), r), N + 2);
  EXPECT_EQ(simplify(floorDiv(N, M + 5), r), SymInt(0));
  EXPECT_EQ(simplify(floorMod(N, M + 5), r), N);
  EXPECT_EQ(simplify(min(N, 2), r), min(N, 2)); // not provable
  // A symbol with a one-value range is that constant.
  EXPECT_EQ(simplify(N * M, {{"N", {3, 3}}, {"M", {0, 9}}}), 3 * M);
  // Missing symbols default to [0, 2^62].
  EXPECT_EQ(simplify(max(N, 0), {}), N);
  EXPECT_EQ(simplify(max(N, 0), {{"N", {-1, 4}}}), max(N, 0));
}

TEST(SymIntRanges, Bounds) {
  SymRanges r{{"N", {-3, 5}}, {"M", {2, 4}}};
  auto eq = [](SymRange a, SymRange b) { return a.min == b.min && a.max == b.max; };
  EXPECT_TRUE(eq(bounds(N + M, r), {-1, 9}));
  EXPECT_TRUE(eq(bounds(N - M, r), {-7, 3}));
  EXPECT_TRUE(eq(bounds(N * M, r), {-12, 20}));
  EXPECT_TRUE(eq(bounds(N * N, r), {0, 25}));
  EXPECT_TRUE(eq(bounds(floorDiv(N, M), r), {-2, 2}));
  EXPECT_TRUE(eq(bounds(floorMod(N, M), r), {0, 3}));
  EXPECT_TRUE(eq(bounds(floorMod(N, 8), {}), {0, 7}));
  EXPECT_TRUE(eq(bounds(min(N, M), r), {-3, 4}));
  EXPECT_TRUE(eq(bounds(max(N, M), r), {2, 5}));
  // Saturates at +-2^62 without overflowing.
  const int64_t big = int64_t(1) << 62;
  EXPECT_TRUE(eq(bounds(N * M, {}), {0, big}));
  SymRanges huge{{"N", {INT64_MIN, INT64_MAX}}, {"M", {INT64_MIN, INT64_MAX}}};
  EXPECT_TRUE(eq(bounds(N * M * N + N, huge), {-big, big}));
  EXPECT_TRUE(eq(bounds(floorDiv(N, M), huge), {-big, big}));
  EXPECT_TRUE(eq(bounds(floorMod(N, 0), huge), {-big, big}));
  EXPECT_TRUE(eq(bounds(floorMod(N, M), huge), {-big, big}));
}

TEST(SymIntRanges, Provers) {
  SymRanges r{{"N", {0, 5}}, {"M", {6, 9}}};
  EXPECT_TRUE(proveLE(N, M, r));
  EXPECT_TRUE(proveLT(N, M, r));
  EXPECT_FALSE(proveLE(M, N, r));
  EXPECT_TRUE(proveLE(N, N + 1, {}));
  EXPECT_FALSE(proveLT(N, N, {}));
  EXPECT_TRUE(proveEQ(floorMod(N, 8), N, r));
  EXPECT_FALSE(proveEQ(N, M, r));
  // Through min/max operands, which the interval of the difference misses (the importer
  // records max(seq, min(seq, 64)) as seq; the Graph IR verifier must agree).
  SymRanges pos{{"N", {1, int64_t(1) << 62}}};
  EXPECT_TRUE(proveLE(min(N, SymInt(64)), N, pos));
  EXPECT_TRUE(proveLE(N, max(N, M), {}));
  EXPECT_FALSE(proveLE(N, min(N, SymInt(64)), pos));
  EXPECT_TRUE(proveEQ(max(N, min(N, SymInt(64))), N, pos));
  EXPECT_FALSE(proveEQ(max(N, SymInt(64)), N, pos));
  // Nested min/max on both sides: the descent is bounded (not proven, quickly), never
  // exponential.
  std::vector<SymInt> syms;
  for (int i = 0; i < 12; ++i) syms.push_back(SymInt::symbol("s" + std::to_string(i)));
  SymInt left = syms[0], right = syms[1];
  for (int i = 2; i + 1 < 12; i += 2) {
    left = i % 4 ? min(max(left, syms[i]), syms[i + 1]) : max(min(left, syms[i]), syms[i + 1]);
    right = i % 4 ? max(min(right, syms[i + 1]), syms[i]) : min(max(right, syms[i + 1]), syms[i]);
  }
  EXPECT_FALSE(proveLE(left, right + SymInt(-1), {}));
  EXPECT_TRUE(proveLE(left, left, {}));
}

// ---------------------------------------------------------------- printers and parser

TEST(SymIntPrint, ReadableText) {
  EXPECT_EQ((2 * N + 1).str(), "2*N + 1");
  EXPECT_EQ(floorDiv(N, 4).str(), "N // 4");
  EXPECT_EQ(floorMod(N, 4).str(), "N % 4");
  EXPECT_EQ(min(N, 8).str(), "min(N, 8)");
  EXPECT_EQ((1 - N).str(), "1 - N");
  EXPECT_EQ((N - 1).str(), "N - 1");
  EXPECT_EQ((M - 2 * N).str(), "M - 2*N");
  EXPECT_EQ((-N - M).str(), "-M - N");
  EXPECT_EQ((-N).str(), "-N");
  EXPECT_EQ(SymInt(-3).str(), "-3");
  EXPECT_EQ((-floorDiv(N, 4)).str(), "-(N // 4)");
  EXPECT_EQ(floorDiv(-N, 4).str(), "-N // 4");
  EXPECT_EQ(floorDiv(N + 1, 4).str(), "(N + 1) // 4");
  EXPECT_EQ(floorDiv(N, M + 1).str(), "N // (M + 1)");
  EXPECT_EQ(floorDiv(N, M * K).str(), "N // (K*M)");
  EXPECT_EQ((2 * floorDiv(N, 4)).str(), "2*(N // 4)");
  EXPECT_EQ((M * floorMod(N, 4)).str(), "M*(N % 4)");
  EXPECT_EQ(((N + 1) * min(N, 3)).str(), "(N + 1)*min(N, 3)");
  EXPECT_EQ(max(N - 1, 0).str(), "max(N - 1, 0)");
  EXPECT_EQ(SymInt(INT64_MIN).str(), "(-9223372036854775807 - 1)");
}

TEST(SymIntPrint, ParseRoundTrip) {
  std::vector<SymInt> es = {2 * N + 1,
                            floorDiv(N, 4),
                            min(N, 8),
                            -floorDiv(N, 4) + 1,
                            floorDiv(-N, M),
                            floorMod(N - M, K + 1),
                            max(max(N, M), 3) * 2,
                            M - 2 * N * K,
                            SymInt(INT64_MIN),
                            SymInt(INT64_MAX) - N,
                            ceilDiv(N, M),
                            N * SymInt(int64_t(1) << 62) * 4};
  for (const SymInt &e : es) {
    SymInt p = parse(e.str());
    EXPECT_EQ(p, e) << e.str() << " reparsed as " << p.str();
    EXPECT_EQ(p.hash(), e.hash());
    EXPECT_EQ(p.str(), e.str());
  }
  EXPECT_EQ(parse("N*2 + 1 + N"), 3 * N + 1);
  EXPECT_EQ(parse(" min( N , max(M,1) ) "), min(N, max(M, 1)));
  EXPECT_EQ(parse("-9223372036854775807 - 1"), SymInt(INT64_MIN));
}

TEST(SymIntPrint, ParseErrors) {
  for (const char *bad : {"", "N +", "min(N)", "max(N, )", "(N", "N ) ", "3 $ 4", "N // ",
                          "99999999999999999999", "min N"}) {
    auto e = parseSymInt(bad);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.error().kind(), ErrorKind::User);
    EXPECT_NE(e.error().message().find("bad size expression"), std::string::npos);
  }
  // Deep nesting is an error, not a stack overflow.
  EXPECT_FALSE(parseSymInt(std::string(100000, '(') + "N" + std::string(100000, ')')).ok());
  EXPECT_FALSE(parseSymInt(std::string(100000, '-') + "N").ok());
}

TEST(SymIntPrint, CppText) {
  SymRanges nonneg{{"N", {0, 100}}, {"M", {1, 8}}};
  SymRanges anySign{{"N", {-100, 100}}, {"M", {1, 8}}};
  EXPECT_EQ(floorDiv(N, M).toCpp(nonneg), "N / M");
  EXPECT_EQ(floorMod(N, 4).toCpp(nonneg), "N % 4");
  EXPECT_EQ(floorDiv(N, M).toCpp(anySign), "coil_floordiv(N, M)");
  EXPECT_EQ(floorMod(N, 4).toCpp(anySign), "coil_floormod(N, 4)");
  EXPECT_EQ(floorDiv(N, K).toCpp({{"N", {0, 10}}, {"K", {0, 10}}}), "coil_floordiv(N, K)");
  EXPECT_EQ(min(N, 8).toCpp(nonneg), "std::min<int64_t>(N, 8)");
  EXPECT_EQ(max(max(N, M), 3).toCpp(nonneg), "std::max<int64_t>(M, std::max<int64_t>(N, 3))");
  EXPECT_EQ((2 * floorDiv(N + 1, M)).toCpp(nonneg), "2*((N + 1) / M)");
  EXPECT_EQ(floorDiv(N, 4).toPython(), "N // 4");
  std::string pre = cppPrelude();
  EXPECT_NE(pre.find("coil_floordiv"), std::string::npos);
  EXPECT_NE(pre.find("coil_floormod"), std::string::npos);
}

TEST(SymIntPrint, PreludeMatchesFloorHelpers) {
  std::vector<int64_t> vals;
  for (int64_t v = -25; v <= 25; ++v) vals.push_back(v);
  for (int64_t v : {INT64_MIN, INT64_MIN + 1, INT64_MAX, INT64_MAX - 1, int64_t(1) << 40})
    vals.push_back(v);
  for (int64_t a : vals) {
    for (int64_t b : vals) {
      if (b == 0 || (a == INT64_MIN && b == -1)) continue;
      ASSERT_EQ(coil_floordiv(a, b), floorDivInt(a, b)) << a << " // " << b;
      ASSERT_EQ(coil_floormod(a, b), floorModInt(a, b)) << a << " % " << b;
      // Definition of floor division.
      int64_t q = floorDivInt(a, b), r = floorModInt(a, b);
      if (a > INT64_MIN / 2 && a < INT64_MAX / 2 && b > -1000 && b < 1000) {
        EXPECT_EQ(q * b + r, a);
        EXPECT_TRUE(b > 0 ? (r >= 0 && r < b) : (r <= 0 && r > b)) << a << " % " << b;
      }
    }
  }
  EXPECT_EQ(floorModInt(INT64_MIN, -1), 0);
  EXPECT_EQ(floorDivInt(-7, 2), -4);
  EXPECT_EQ(floorModInt(-7, 2), 1);
}

// ---------------------------------------------------------------- evaluation

TEST(SymIntEval, ValuesAndErrors) {
  SymBindings b{{"N", -7}, {"M", 2}};
  EXPECT_EQ(eval(floorDiv(N, M), b), -4);
  EXPECT_EQ(eval(floorMod(N, M), b), 1);
  EXPECT_EQ(eval(ceilDiv(N, M), b), -3);
  EXPECT_EQ(eval(min(min(N, M), 0), b), -7);
  auto unbound = (N + K).evaluate(b);
  ASSERT_FALSE(unbound.ok());
  EXPECT_EQ(unbound.error().message(), "symbol 'K' has no value");
  auto div0 = floorDiv(N, M - 2).evaluate(b);
  ASSERT_FALSE(div0.ok());
  EXPECT_NE(div0.error().message().find("division by zero"), std::string::npos);
  EXPECT_FALSE(floorMod(N, 0).evaluate(b).ok());
}

TEST(SymIntEval, OverflowIsAnError) {
  const int64_t big = int64_t(1) << 40;
  SymBindings b{{"N", big}, {"M", big}};
  for (const SymInt &e :
       {N * M, N * M * M - 1, N * N * N, SymInt(INT64_MAX) + N, SymInt(INT64_MIN) - N,
        floorDiv(SymInt(INT64_MIN) + N - M, -1 + N - M), N * SymInt(int64_t(1) << 62) * 4}) {
    auto v = e.evaluate(b);
    ASSERT_FALSE(v.ok()) << e.str() << " = " << *v;
    EXPECT_EQ(v.error().kind(), ErrorKind::User);
    EXPECT_EQ(v.error().message().rfind("integer overflow in '", 0), 0u) << v.error().message();
  }
  // Folding that would overflow is kept unfolded, with the right value where it has one.
  SymInt e = N * SymInt(int64_t(1) << 62) * 4;
  EXPECT_EQ(eval(e, {{"N", 0}}), 0);
  SymInt s = (N + SymInt(INT64_MAX)) + 1;
  EXPECT_EQ(eval(s, {{"N", -5}}), INT64_MAX - 4);
  EXPECT_FALSE(s.evaluate({{"N", 0}}).ok());
  EXPECT_EQ(parse(s.str()), s);
  EXPECT_EQ(SymInt(INT64_MAX) + 1 - 1, SymInt(INT64_MAX) + 1 - 1); // deterministic
}

// ---------------------------------------------------------------- randomized tests

namespace {

/// An expression tree exactly as generated, without simplification.
struct RNode {
  enum Op { Const, Sym, Add, Sub, Mul, Neg, Div, Mod, CeilDiv, Min, Max } op;
  int64_t value = 0;
  std::string name;
  std::vector<std::shared_ptr<RNode>> kids;
};
using RPtr = std::shared_ptr<RNode>;

RPtr leafC(int64_t v) {
  return std::make_shared<RNode>(RNode{RNode::Const, v, "", {}});
}
RPtr leafS(const std::string &n) {
  return std::make_shared<RNode>(RNode{RNode::Sym, 0, n, {}});
}
RPtr node(RNode::Op op, std::vector<RPtr> k) {
  return std::make_shared<RNode>(RNode{op, 0, "", std::move(k)});
}

class Gen {
public:
  explicit Gen(uint32_t seed, int nsyms) : rng_(seed), nsyms_(nsyms) {}
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  int64_t range(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  std::string sym() { return std::string(1, "NMK"[pick(nsyms_)]); }

  RPtr expr(int depth) {
    if (depth == 0 || pick(4) == 0) return pick(5) < 2 ? leafC(range(-4, 6)) : leafS(sym());
    switch (pick(15)) {
    case 0:
    case 1:
      return node(RNode::Add, {expr(depth - 1), expr(depth - 1)});
    case 2:
      return node(RNode::Sub, {expr(depth - 1), expr(depth - 1)});
    case 3:
    case 4:
      return node(RNode::Mul, {expr(depth - 1), expr(depth - 1)});
    case 5:
      return node(RNode::Neg, {expr(depth - 1)});
    case 6:
      return node(RNode::Div, {expr(depth - 1), divisor(depth - 1)});
    case 7:
      return node(RNode::Mod, {expr(depth - 1), divisor(depth - 1)});
    case 8:
      return node(RNode::CeilDiv, {expr(depth - 1), divisor(depth - 1)});
    case 9:
      return node(RNode::Min, {expr(depth - 1), expr(depth - 1)});
    case 10:
      return node(RNode::Max, {expr(depth - 1), expr(depth - 1)});
    case 11: {
      // (x*y) // y, (x*y) % y: the exact-division rules.
      RPtr x = expr(depth - 1), y = pick(2) ? leafS(sym()) : expr(depth - 1);
      return node(pick(2) ? RNode::Div : RNode::Mod,
                  {node(RNode::Add, {node(RNode::Mul, {x, y}), expr(depth - 1)}), y});
    }
    case 12: {
      // (c*x + y) // c and % c.
      RPtr c = leafC(range(2, 6));
      return node(pick(2) ? RNode::Div : RNode::Mod,
                  {node(RNode::Add, {node(RNode::Mul, {c, expr(depth - 1)}), expr(depth - 1)}), c});
    }
    case 13: {
      // c*(x // c) + x % c, sometimes with mismatched constants.
      RPtr x = expr(depth - 1), c = leafC(range(2, 5));
      RPtr c2 = pick(3) ? c : leafC(range(-4, 5));
      return node(RNode::Add, {node(RNode::Mul, {c2, node(RNode::Div, {x, c})}),
                               node(RNode::Mod, {x, pick(4) ? c : c2})});
    }
    default: {
      // min/max of near-identical operands.
      RPtr x = expr(depth - 1);
      return node(pick(2) ? RNode::Min : RNode::Max,
                  {x, node(RNode::Add, {x, leafC(range(-2, 2))})});
    }
    }
  }
  RPtr divisor(int depth) {
    int k = pick(6);
    if (k < 3) return leafC(range(-5, 6)); // includes 0 sometimes
    return k == 3 ? leafS(sym()) : expr(depth);
  }

private:
  std::mt19937 rng_;
  int nsyms_;
};

std::optional<int64_t> refEval(const RNode &n, const SymBindings &b) {
  if (n.op == RNode::Const) return n.value;
  if (n.op == RNode::Sym) return b.at(n.name);
  std::vector<int64_t> v;
  for (const RPtr &k : n.kids) {
    auto x = refEval(*k, b);
    if (!x) return std::nullopt;
    v.push_back(*x);
  }
  int64_t r;
  switch (n.op) {
  case RNode::Add:
    if (__builtin_add_overflow(v[0], v[1], &r)) return std::nullopt;
    return r;
  case RNode::Sub:
    if (__builtin_sub_overflow(v[0], v[1], &r)) return std::nullopt;
    return r;
  case RNode::Mul:
    if (__builtin_mul_overflow(v[0], v[1], &r)) return std::nullopt;
    return r;
  case RNode::Neg:
    if (v[0] == INT64_MIN) return std::nullopt;
    return -v[0];
  case RNode::Div:
  case RNode::Mod:
  case RNode::CeilDiv: {
    int64_t a = v[0], d = v[1];
    if (d == 0 || (a == INT64_MIN && d == -1)) return std::nullopt;
    // Truncating quotient and remainder, adjusted independently of the library's helpers.
    int64_t q = a / d, m = a % d;
    if (n.op == RNode::Div) return (m != 0 && ((m < 0) != (d < 0))) ? q - 1 : q;
    if (n.op == RNode::Mod) return (m != 0 && ((m < 0) != (d < 0))) ? m + d : m;
    return (m != 0 && ((m < 0) == (d < 0))) ? q + 1 : q;
  }
  case RNode::Min:
    return std::min(v[0], v[1]);
  case RNode::Max:
    return std::max(v[0], v[1]);
  default:
    return std::nullopt;
  }
}

/// Builds through the operators; `shuffle` swaps operands of commutative operators.
SymInt build(const RNode &n, std::mt19937 *shuffle = nullptr) {
  if (n.op == RNode::Const) return SymInt(n.value);
  if (n.op == RNode::Sym) return SymInt::symbol(n.name);
  std::vector<SymInt> k;
  for (const RPtr &c : n.kids) k.push_back(build(*c, shuffle));
  bool commutative =
      n.op == RNode::Add || n.op == RNode::Mul || n.op == RNode::Min || n.op == RNode::Max;
  if (shuffle && commutative && ((*shuffle)() & 1)) std::swap(k[0], k[1]);
  switch (n.op) {
  case RNode::Add:
    return k[0] + k[1];
  case RNode::Sub:
    return k[0] - k[1];
  case RNode::Mul:
    return k[0] * k[1];
  case RNode::Neg:
    return -k[0];
  case RNode::Div:
    return floorDiv(k[0], k[1]);
  case RNode::Mod:
    return floorMod(k[0], k[1]);
  case RNode::CeilDiv:
    return ceilDiv(k[0], k[1]);
  case RNode::Min:
    return min(k[0], k[1]);
  case RNode::Max:
    return max(k[0], k[1]);
  default:
    return SymInt(0);
  }
}

std::string refStr(const RNode &n) {
  switch (n.op) {
  case RNode::Const:
    return std::to_string(n.value);
  case RNode::Sym:
    return n.name;
  case RNode::Neg:
    return "-(" + refStr(*n.kids[0]) + ")";
  case RNode::Min:
    return "min(" + refStr(*n.kids[0]) + ", " + refStr(*n.kids[1]) + ")";
  case RNode::Max:
    return "max(" + refStr(*n.kids[0]) + ", " + refStr(*n.kids[1]) + ")";
  case RNode::CeilDiv:
    return "ceildiv(" + refStr(*n.kids[0]) + ", " + refStr(*n.kids[1]) + ")";
  default:
    break;
  }
  const char *op = n.op == RNode::Add   ? " + "
                   : n.op == RNode::Sub ? " - "
                   : n.op == RNode::Mul ? " * "
                   : n.op == RNode::Div ? " // "
                                        : " % ";
  return "(" + refStr(*n.kids[0]) + op + refStr(*n.kids[1]) + ")";
}

/// Evaluates the output of toCpp() with C++ semantics: truncating `/` and `%`, the prelude's
/// floor helpers, std::min/max<int64_t>. nullopt on overflow or division by zero (UB in C++).
class CppEval {
public:
  CppEval(const std::string &s, const SymBindings &b) : s_(s), b_(b) {}
  std::optional<int64_t> run() {
    auto v = sum();
    skip();
    if (p_ != s_.size()) bad_ = true;
    if (bad_) ADD_FAILURE() << "cannot read C++ text: " << s_ << " at " << p_;
    if (fail_ || bad_) return std::nullopt;
    return v;
  }

private:
  void skip() {
    while (p_ < s_.size() && s_[p_] == ' ') ++p_;
  }
  bool eat(const std::string &t) {
    skip();
    if (s_.compare(p_, t.size(), t) == 0) {
      p_ += t.size();
      return true;
    }
    return false;
  }
  int64_t sum() {
    int64_t v = term();
    for (;;) {
      if (eat("+")) {
        int64_t r = term();
        fail_ |= __builtin_add_overflow(v, r, &v);
      } else if (eat("-")) {
        int64_t r = term();
        fail_ |= __builtin_sub_overflow(v, r, &v);
      } else {
        return v;
      }
    }
  }
  int64_t term() {
    int64_t v = unary();
    for (;;) {
      if (eat("*")) {
        int64_t r = unary();
        fail_ |= __builtin_mul_overflow(v, r, &v);
      } else if (eat("/") || eat("%")) {
        bool div = s_[p_ - 1] == '/';
        int64_t r = unary();
        if (r == 0 || (v == INT64_MIN && r == -1)) {
          fail_ = true;
          v = 0;
        } else {
          v = div ? v / r : v % r;
        }
      } else {
        return v;
      }
    }
  }
  int64_t unary() {
    if (eat("-")) {
      int64_t v = unary();
      if (v == INT64_MIN) fail_ = true;
      return fail_ ? 0 : -v;
    }
    return primary();
  }
  std::pair<int64_t, int64_t> args() {
    int64_t a = sum();
    if (!eat(",")) bad_ = true;
    int64_t b = sum();
    if (!eat(")")) bad_ = true;
    return {a, b};
  }
  int64_t primary() {
    skip();
    if (bad_ || p_ >= s_.size()) {
      bad_ = true;
      return 0;
    }
    if (eat("(")) {
      int64_t v = sum();
      if (!eat(")")) bad_ = true;
      return v;
    }
    bool div = eat("coil_floordiv(");
    if (div || eat("coil_floormod(")) {
      auto [a, b] = args();
      if (b == 0 || (a == INT64_MIN && b == -1)) {
        fail_ = true;
        return 0;
      }
      return div ? coil_floordiv(a, b) : coil_floormod(a, b);
    }
    bool isMin = eat("std::min<int64_t>(");
    if (isMin || eat("std::max<int64_t>(")) {
      auto [a, b] = args();
      return isMin ? std::min<int64_t>(a, b) : std::max<int64_t>(a, b);
    }
    if (std::isdigit(static_cast<unsigned char>(s_[p_]))) {
      size_t e = p_;
      while (e < s_.size() && std::isdigit(static_cast<unsigned char>(s_[e]))) ++e;
      int64_t v = std::stoll(s_.substr(p_, e - p_));
      p_ = e;
      return v;
    }
    if (std::isalpha(static_cast<unsigned char>(s_[p_]))) {
      size_t e = p_;
      while (e < s_.size() && std::isalnum(static_cast<unsigned char>(s_[e]))) ++e;
      std::string id = s_.substr(p_, e - p_);
      p_ = e;
      auto it = b_.find(id);
      if (it == b_.end()) {
        bad_ = true;
        return 0;
      }
      return it->second;
    }
    bad_ = true;
    return 0;
  }
  std::string s_;
  const SymBindings &b_;
  size_t p_ = 0;
  bool fail_ = false, bad_ = false;
};

std::string bindStr(const SymBindings &b) {
  std::string s;
  for (const auto &[k, v] : b) s += k + "=" + std::to_string(v) + " ";
  return s;
}

std::string tempPath(const char *tag) {
  return (std::filesystem::temp_directory_path() /
          ("coil_symint_" + std::string(tag) + "_" + std::to_string(::getpid())))
      .string();
}

std::string runCommand(const std::string &cmd) {
  std::string out;
  FILE *f = ::popen(cmd.c_str(), "r");
  if (!f) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  ::pclose(f);
  return out;
}

/// COIL_SYMINT_FUZZ=K runs the randomized tests K times longer with other seeds.
int fuzzScale() {
  const char *v = std::getenv("COIL_SYMINT_FUZZ");
  return v && std::atoi(v) > 0 ? std::atoi(v) : 1;
}
uint32_t seed(uint32_t base) {
  return base + 7919u * uint32_t(fuzzScale() - 1);
}

struct Sample {
  RPtr tree;
  SymInt e;
  SymBindings b;
  std::optional<int64_t> value; // of e (evaluate)
};

} // namespace

// (a) canonical == reference, (b) parse(str()) round trip, shuffled construction, (c) C++ text.
TEST(SymIntRandom, CanonicalMatchesReference) {
  int checked = 0, defined = 0;
  for (int nsyms = 2; nsyms <= 3; ++nsyms) {
    Gen g(seed(1234 + nsyms), nsyms);
    std::mt19937 shuf(99 + nsyms);
    for (int iter = 0; iter < 2500 * fuzzScale(); ++iter) {
      RPtr t = g.expr(1 + g.pick(4));
      SymInt e = build(*t);
      std::string ctx = refStr(*t) + "  ->  " + e.str();
      // Canonical text round-trips.
      auto parsed = parseSymInt(e.str());
      ASSERT_TRUE(parsed.ok()) << ctx << ": " << parsed.error().message();
      ASSERT_EQ(*parsed, e) << ctx << " reparsed as " << parsed->str();
      ASSERT_EQ(parsed->hash(), e.hash()) << ctx;
      ASSERT_EQ(parsed->str(), e.str()) << ctx;
      // Canonical order does not depend on the order of commutative operands.
      SymInt s = build(*t, &shuf);
      EXPECT_EQ(s, e) << ctx << " vs shuffled " << s.str();
      // Values, with bindings of both signs; nonneg ranges half of the time for toCpp.
      bool nonneg = g.pick(2);
      SymRanges cppRanges;
      for (int i = 0; i < nsyms; ++i)
        cppRanges[std::string(1, "NMK"[i])] = nonneg ? SymRange{0, 9} : SymRange{-9, 9};
      std::string cpp = e.toCpp(cppRanges);
      for (int k = 0; k < 6; ++k) {
        SymBindings b;
        for (int i = 0; i < nsyms; ++i)
          b[std::string(1, "NMK"[i])] = nonneg ? g.range(0, 9) : g.range(-9, 9);
        auto ref = refEval(*t, b);
        auto got = e.evaluate(b);
        ++checked;
        if (ref) {
          ++defined;
          ASSERT_TRUE(got.ok()) << ctx << " at " << bindStr(b) << ": " << got.error().message();
          ASSERT_EQ(*got, *ref) << ctx << " at " << bindStr(b);
        }
        if (got.ok()) {
          auto pv = parsed->evaluate(b);
          ASSERT_TRUE(pv.ok() && *pv == *got) << ctx;
          auto cv = CppEval(cpp, b).run();
          ASSERT_TRUE(cv.has_value()) << ctx << " C++ " << cpp << " at " << bindStr(b);
          ASSERT_EQ(*cv, *got) << ctx << " C++ " << cpp << " at " << bindStr(b);
        }
      }
    }
  }
  EXPECT_GT(defined, checked / 2);
}

// (d) bounds() contains every sampled value; simplify() keeps values under the ranges.
TEST(SymIntRandom, BoundsAndSimplifyUnderRanges) {
  Gen g(seed(777), 3);
  int proved = 0;
  for (int iter = 0; iter < 3000 * fuzzScale(); ++iter) {
    RPtr t = g.expr(1 + g.pick(4));
    SymInt e = build(*t);
    SymRanges r;
    for (const char *s : {"N", "M", "K"}) {
      int64_t lo = g.range(-9, 6);
      r[s] = {lo, lo + g.range(0, 9)};
    }
    SymRange bd = bounds(e, r);
    SymInt simp = simplify(e, r);
    RPtr t2 = g.expr(1 + g.pick(3));
    SymInt f = build(*t2);
    bool le = proveLE(e, f, r);
    proved += le;
    std::string ctx = e.str() + " ranges N[" + std::to_string(r["N"].min) + "," +
                      std::to_string(r["N"].max) + "] M[" + std::to_string(r["M"].min) + "," +
                      std::to_string(r["M"].max) + "] K[" + std::to_string(r["K"].min) + "," +
                      std::to_string(r["K"].max) + "]";
    ASSERT_LE(bd.min, bd.max) << ctx;
    for (int k = 0; k < 8; ++k) {
      SymBindings b;
      for (const char *s : {"N", "M", "K"}) b[s] = g.range(r[s].min, r[s].max);
      auto v = e.evaluate(b);
      if (!v.ok()) continue;
      ASSERT_GE(*v, bd.min) << ctx << " at " << bindStr(b);
      ASSERT_LE(*v, bd.max) << ctx << " at " << bindStr(b);
      auto sv = simp.evaluate(b);
      ASSERT_TRUE(sv.ok()) << ctx << " simplified to " << simp.str() << ": "
                           << sv.error().message();
      ASSERT_EQ(*sv, *v) << ctx << " simplified to " << simp.str() << " at " << bindStr(b);
      auto fv = f.evaluate(b);
      if (le && fv.ok()) {
        ASSERT_LE(*v, *fv) << ctx << " proved <= " << f.str() << " at " << bindStr(b);
      }
    }
  }
  EXPECT_GT(proved, 0);
}

// The Python printer: one python3 process evaluates a batch of expressions.
TEST(SymIntRandom, PythonPrinterMatches) {
  Gen g(seed(4242), 3);
  std::vector<Sample> samples;
  std::string path = tempPath("py");
  {
    std::ofstream f(path);
    for (int iter = 0; iter < 1500 * fuzzScale(); ++iter) {
      RPtr t = g.expr(1 + g.pick(4));
      SymInt e = build(*t);
      SymBindings b{{"N", g.range(-9, 9)}, {"M", g.range(-9, 9)}, {"K", g.range(-9, 9)}};
      auto v = e.evaluate(b);
      bool overflow = !v.ok() && v.error().message().find("overflow") != std::string::npos;
      if (overflow) continue;
      samples.push_back({t, e, b, v.ok() ? std::optional<int64_t>(*v) : std::nullopt});
      f << e.toPython() << "|" << b["N"] << "," << b["M"] << "," << b["K"] << "\n";
    }
  }
  std::string code = "import sys\n"
                     "for line in open(sys.argv[1]):\n"
                     "    expr, vals = line.rstrip(\"\\n\").split(\"|\")\n"
                     "    n, m, k = (int(x) for x in vals.split(\",\"))\n"
                     "    try:\n"
                     "        print(eval(expr, {\"__builtins__\": {\"min\": min, \"max\": max}},"
                     " {\"N\": n, \"M\": m, \"K\": k}))\n"
                     "    except ZeroDivisionError:\n"
                     "        print(\"div0\")\n";
  std::string out = runCommand("python3 -c '" + code + "' " + path + " 2>&1");
  std::remove(path.c_str());
  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  for (; i < samples.size() && std::getline(lines, line); ++i) {
    const Sample &s = samples[i];
    std::string want = s.value ? std::to_string(*s.value) : "div0";
    ASSERT_EQ(line, want) << s.e.toPython() << " at " << bindStr(s.b);
  }
  ASSERT_EQ(i, samples.size()) << "python3 output ended early:\n" << out.substr(0, 2000);
}

// The C++ printer, compiled: one translation unit evaluates a batch of expressions.
TEST(SymIntRandom, CppPrinterCompiles) {
  if (std::system("c++ --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "no C++ compiler";
  Gen g(seed(5150), 3);
  std::vector<Sample> samples;
  SymRanges ranges{{"N", {-9, 9}}, {"M", {0, 9}}, {"K", {1, 9}}};
  std::ostringstream src;
  src << "#include <algorithm>\n#include <cstdint>\n#include <cstdio>\n" << cppPrelude();
  src << "int main() {\n";
  while (samples.size() < 300) {
    RPtr t = g.expr(1 + g.pick(4));
    SymInt e = build(*t);
    SymBindings b{{"N", g.range(-9, 9)}, {"M", g.range(0, 9)}, {"K", g.range(1, 9)}};
    auto v = e.evaluate(b);
    if (!v.ok()) // C++ has no value for a division by zero
      continue;
    samples.push_back({t, e, b, *v});
    src << "  { const int64_t N = " << b["N"] << ", M = " << b["M"] << ", K = " << b["K"]
        << "; (void)N; (void)M; (void)K; std::printf(\"%lld\\n\", (long long)(" << e.toCpp(ranges)
        << ")); }\n";
  }
  src << "}\n";
  std::string base = tempPath("cpp");
  std::ofstream(base + ".cpp") << src.str();
  std::string cc = runCommand("c++ -std=c++17 -O0 -w -o " + base + ".bin " + base + ".cpp 2>&1");
  ASSERT_EQ(cc, "") << "compiling the printed C++ failed:\n" << cc;
  std::string out = runCommand(base + ".bin");
  std::remove((base + ".cpp").c_str());
  std::remove((base + ".bin").c_str());
  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  for (; i < samples.size() && std::getline(lines, line); ++i)
    ASSERT_EQ(line, std::to_string(*samples[i].value))
        << samples[i].e.toCpp(ranges) << " at " << bindStr(samples[i].b);
  ASSERT_EQ(i, samples.size());
}

// Extreme constants and bindings: evaluation reports overflow instead of wrapping, and where
// both the reference and the canonical form have a value, they agree. The printed text parses
// back to the same values; structurally the same expression except, rarely, where folding
// overflowed int64 along one construction order and not along the other.
TEST(SymIntRandom, ExtremeValuesNeverWrap) {
  Gen g(seed(31337), 3);
  const int64_t extremes[] = {
      INT64_MIN, INT64_MIN + 1,    -(int64_t(1) << 62), -(int64_t(1) << 31), -1,       0,
      1,         int64_t(1) << 31, int64_t(1) << 62,    INT64_MAX - 1,       INT64_MAX};
  auto pickExtreme = [&] { return extremes[g.pick(std::size(extremes))]; };
  std::function<RPtr(const RPtr &)> bigConstants = [&](const RPtr &n) -> RPtr {
    if (n->op == RNode::Const) return g.pick(3) == 0 ? leafC(pickExtreme()) : n;
    auto c = std::make_shared<RNode>(*n);
    for (RPtr &k : c->kids) k = bigConstants(k);
    return c;
  };
  int agreed = 0, iters = 2000 * fuzzScale(), notSame = 0;
  for (int iter = 0; iter < iters; ++iter) {
    RPtr t = bigConstants(g.expr(1 + g.pick(4)));
    SymInt e = build(*t);
    auto parsed = parseSymInt(e.str());
    ASSERT_TRUE(parsed.ok()) << e.str() << ": " << parsed.error().message();
    if (*parsed != e && ++notSame == 1) {
      std::printf("note: overflow case not reparsed alike: %s\n  reparsed as %s\n", e.str().c_str(),
                  parsed->str().c_str());
    }
    SymRange bd = bounds(e, {{"N", {INT64_MIN, INT64_MAX}},
                             {"M", {INT64_MIN, INT64_MAX}},
                             {"K", {INT64_MIN, INT64_MAX}}});
    EXPECT_LE(bd.min, bd.max);
    for (int k = 0; k < 4; ++k) {
      SymBindings b{{"N", pickExtreme()}, {"M", g.range(-3, 3)}, {"K", pickExtreme()}};
      auto ref = refEval(*t, b);
      auto got = e.evaluate(b);
      if (!got.ok()) {
        const std::string &m = got.error().message();
        EXPECT_TRUE(m.find("overflow") != std::string::npos ||
                    m.find("division by zero") != std::string::npos)
            << m;
      }
      if (ref && got.ok()) {
        ++agreed;
        ASSERT_EQ(*got, *ref) << refStr(*t) << " -> " << e.str() << " at " << bindStr(b);
      }
      auto pv = parsed->evaluate(b);
      if (got.ok() && pv.ok()) {
        ASSERT_EQ(*pv, *got) << e.str() << " reparsed as " << parsed->str() << " at " << bindStr(b);
      }
    }
  }
  EXPECT_GT(agreed, iters / 4);
  EXPECT_LE(notSame, iters / 100);
  std::printf("extreme values: %d of %d expressions not reparsed structurally alike\n", notSame,
              iters);
}
