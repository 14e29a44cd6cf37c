/// \file SymInt: symbolic integer expressions, the sizes of coil's tensors.
///
/// A SymInt is an immutable expression over 64-bit integers built from constants, named
/// symbols (e.g. the dynamic batch size "N"), `+ - *`, floor division, floor modulo, min and
/// max. Semantics are those of mathematical integers with *floor* rounding, exactly as in
/// Python: floorDiv(-7, 2) == -4 and floorMod(-7, 2) == 1 (the result of floorMod has the sign
/// of the divisor). Division or modulo by zero has no value: evaluate() reports an error.
///
/// Expressions are kept in a canonical form by the operators themselves (constants folded,
/// like terms collected, operands of commutative operators sorted), so two expressions that
/// canonicalize alike compare equal with `==`, hash alike and print alike. `==` is structural
/// equality of canonical forms: `a == b` false does not prove the values differ.
///
/// The canonical form (what kind() and operands() show):
///  - Add is n-ary (>= 2 operands): each monomial once, terms of higher degree first, then in
///    the order of their monomials, the constant (if not 0) last. A term is a monomial or
///    Mul(coefficient, factors...).
///  - Mul is n-ary: the constant coefficient first (if not 1), then factors sorted, a power
///    being a repeated factor (`N*N`). A constant times a sum is distributed (`2*(N + 1)` ->
///    `2*N + 2`); other products of sums stay factored (so that bounds stay tight), each sum
///    factor primitive: its content (gcd of its coefficients, with the sign of its first term)
///    moves to the coefficient (`(2*N + 2)*M` -> `2*M*(N + 1)`). `N*M + M` and `M*(N + 1)` are
///    therefore different canonical forms of the same value.
///  - Min and Max are n-ary, flattened, sorted (a constant last), without duplicates or
///    operands that another one provably undercuts (min) or exceeds (max).
///  - FloorDiv and Mod are binary; a constant divisor is >= 2.
/// Rewrites are value-preserving wherever the original expression has a value; they may remove
/// a division by zero (e.g. `(N // M)*0` -> `0`) but never introduce one. (Only int64 overflow
/// of intermediate results can differ: `2*(N - M)` is kept as `2*N - 2*M`.) Rewrites that need a
/// fact a symbol may violate (`(a*b) // b -> a` needs b != 0) happen in the operators only when
/// the fact holds for every value of the symbols; otherwise in simplify() under ranges.
/// If folding a constant would overflow int64, the operator keeps that (binary) operation
/// unfolded, with its operands as given, and evaluate() reports the overflow where the value
/// does overflow; such nodes still print and parse back alike.
///
/// Text: str() and toPython() print `+ - * // %`, min(...) and max(...) with Python's
/// precedence (unary minus binds tighter than `* // %`), e.g. `2*N + 1`, `N // 4`, `min(N, 8)`,
/// `1 - N`, `-(N // 4)`; parseSymInt(e.str()) == e.
///
/// Range facts (per symbol, from `--dynamic NAME=MIN:MAX`, default [0, 2^62]) are not part of
/// an expression; rewrites that need them (`(a*b) // b -> a` when b > 0 ...) and bounds are
/// computed by `simplify()` and `bounds()` against a SymRanges map.
#pragma once

#include "support/Expected.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace coil {

using SymBindings = std::map<std::string, int64_t>;

/// Inclusive range of values a symbol (or an expression) may take. In results of bounds(),
/// -2^62 and 2^62 stand for "unbounded" (bounds saturate there).
struct SymRange {
  int64_t min = 0;
  int64_t max = int64_t(1) << 62;
};
using SymRanges = std::map<std::string, SymRange>;

class SymInt {
public:
  enum class Kind { Const, Symbol, Add, Mul, FloorDiv, Mod, Min, Max };

  SymInt(int64_t value = 0); // NOLINT: implicit, so that `dim * 2` and `{1, N}` read naturally
  static SymInt symbol(std::string name);

  Kind kind() const;
  bool isConstant() const { return kind() == Kind::Const; }
  bool isSymbol() const { return kind() == Kind::Symbol; }
  /// The value of a constant; checked.
  int64_t constant() const;
  std::optional<int64_t> maybeConstant() const;
  /// The name of a symbol; checked.
  const std::string &symbolName() const;
  /// Operands in canonical order (empty for constants and symbols).
  const std::vector<SymInt> &operands() const;

  friend SymInt operator+(const SymInt &a, const SymInt &b);
  friend SymInt operator-(const SymInt &a, const SymInt &b);
  friend SymInt operator*(const SymInt &a, const SymInt &b);
  friend SymInt operator-(const SymInt &a);
  SymInt &operator+=(const SymInt &b) { return *this = *this + b; }
  SymInt &operator-=(const SymInt &b) { return *this = *this - b; }
  SymInt &operator*=(const SymInt &b) { return *this = *this * b; }

  /// Structural equality of canonical forms.
  friend bool operator==(const SymInt &a, const SymInt &b);
  friend bool operator!=(const SymInt &a, const SymInt &b) { return !(a == b); }
  /// A total order on canonical forms, used to sort operands and for deterministic maps.
  friend bool operator<(const SymInt &a, const SymInt &b);
  size_t hash() const;

  /// The value under `bindings`; a user error names an unbound symbol, a division by zero or an
  /// integer overflow ("integer overflow in '...'"). Never undefined behaviour.
  Expected<int64_t> evaluate(const SymBindings &bindings) const;
  /// Replaces symbols by expressions.
  SymInt substitute(const std::map<std::string, SymInt> &repl) const;
  void collectSymbols(std::set<std::string> &out) const;

  /// Canonical text, parseable by parseSymInt: `2*N + 1`, `N // 4`, `N % 4`, `min(N, 8)`.
  std::string str() const;
  /// A C++ expression of type int64_t. Symbols print as their names. Floor division and
  /// modulo print as `/` and `%` only where the dividend is provably >= 0 and the divisor >= 1
  /// under `ranges` (a symbol missing from `ranges` counts as [0, 2^62], a size); elsewhere as
  /// calls to `coil_floordiv` / `coil_floormod` (see cppPrelude()). min and max print as
  /// `std::min<int64_t>(a, b)` (nested for more operands).
  std::string toCpp(const SymRanges &ranges = {}) const;
  /// As toCpp, for CUDA device code: min and max print as `coil_imin(a, b)` / `coil_imax(a, b)`
  /// (functions of the CUDA kernel prelude; std::min / std::max are host-only there).
  std::string toCuda(const SymRanges &ranges = {}) const;
  /// A Python expression (Python's `//` and `%` already floor).
  std::string toPython() const;

private:
  struct Node;
  explicit SymInt(std::shared_ptr<const Node> n);
  std::shared_ptr<const Node> n_;
  friend struct SymIntBuilder;
};

SymInt floorDiv(const SymInt &a, const SymInt &b);
SymInt floorMod(const SymInt &a, const SymInt &b);
/// ceil(a / b) == -floorDiv(-a, b).
SymInt ceilDiv(const SymInt &a, const SymInt &b);
SymInt min(const SymInt &a, const SymInt &b);
SymInt max(const SymInt &a, const SymInt &b);

/// The values of `v` when every element is a constant; nullopt otherwise.
std::optional<std::vector<int64_t>> constantValues(const std::vector<SymInt> &v);

/// The q with a == q*b for every value of the symbols, found when b is a non-zero constant
/// dividing every coefficient, or a product (or sum) dividing every term of a:
/// exactQuotient(6*N*M + 3*M, 3*M) == 2*N + 1, exactQuotient(2*N + 2, N + 1) == 2. Then
/// floorDiv(a, b) == q wherever b != 0. nullopt when not found (not a proof of anything).
std::optional<SymInt> exactQuotient(const SymInt &a, const SymInt &b);

/// Rewrites that hold under `ranges` (e.g. `(a*b) // b -> a` when b > 0, `min(a, b) -> a`
/// when a <= b is provable).
SymInt simplify(const SymInt &e, const SymRanges &ranges);
/// Interval of values `e` may take under `ranges` (conservative; a symbol missing from
/// `ranges` has the default SymRange [0, 2^62]). Saturates at +-2^62, which mean unbounded.
SymRange bounds(const SymInt &e, const SymRanges &ranges);
/// Provable facts under `ranges` (false means "not proven", not "false").
bool proveLE(const SymInt &a, const SymInt &b, const SymRanges &ranges);
bool proveLT(const SymInt &a, const SymInt &b, const SymRanges &ranges);
bool proveEQ(const SymInt &a, const SymInt &b, const SymRanges &ranges);

/// Parses the text form printed by SymInt::str(). Symbols are identifiers [A-Za-z_][A-Za-z0-9_]*.
Expected<SymInt> parseSymInt(std::string_view text);

/// The code of cppPrelude(), as a macro so that the unit tests compile the very same text.
/// Needs <cstdint>; b != 0 (and not INT64_MIN / -1 for coil_floordiv).
#define COIL_SYMINT_CPP_PRELUDE_CODE                                                               \
  static inline int64_t coil_floordiv(int64_t a, int64_t b) {                                      \
    int64_t q = a / b;                                                                             \
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;                                       \
  }                                                                                                \
  static inline int64_t coil_floormod(int64_t a, int64_t b) {                                      \
    int64_t r = a % b;                                                                             \
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;                                           \
  }

/// C++ definitions of coil_floordiv / coil_floormod used by toCpp() (include <algorithm> and
/// <cstdint> before it: min and max print as std::min<int64_t>(a, b)).
const char *cppPrelude();

/// Floor division and modulo on concrete integers (b != 0). floorDivInt(INT64_MIN, -1) wraps to
/// INT64_MIN (evaluate() reports that case as an overflow); floorModInt(x, -1) is 0.
int64_t floorDivInt(int64_t a, int64_t b);
int64_t floorModInt(int64_t a, int64_t b);

} // namespace coil

template <> struct std::hash<coil::SymInt> {
  size_t operator()(const coil::SymInt &s) const { return s.hash(); }
};
