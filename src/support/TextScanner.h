/// \file What coil's text parsers share: the Graph IR's (ir/Parser.h, the `.coil` format), the
/// Loop IR's (lower/LoopParser.h, with sched/ScheduleParser.h after it) and parseSymInt's
/// (SymInt.h: a size expression alone, as metadata.json holds them).
///  - `TextScanner`: a cursor over the text with its line and column, white space and `#`
///    comments, number tokens and the message for a character no token starts with; each
///    lexer derives from it and adds its own tokens.
///  - `SizeExprRules<P, Token>`: the grammar of size expressions and of a symbol's range, as
///    recursive-descent rules that a parser P gains by deriving from it (CRTP), reading its
///    tokens through P's own cur() / bump() / isPunct() and reporting through P's errorAt() /
///    expected() / expectPunct(). Token kinds Int, Ident and Punct are P's; what else names a
///    symbol P says in sizeSymbol().
#pragma once

#include "support/SymInt.h"

#include <cctype>
#include <charconv>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

// Internal (hidden: not exported, not interposable).
#pragma GCC visibility push(hidden)

namespace coil::scan {

class TextScanner {
protected:
  explicit TextScanner(std::string_view s) : s_(s) {}

  char peek(size_t k = 0) const { return p_ + k < s_.size() ? s_[p_ + k] : '\0'; }
  bool atEnd() const { return p_ >= s_.size(); }
  void advance() {
    if (s_[p_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++p_;
  }
  /// Skips white space and comments (`#` to the end of its line).
  void skipSpaceAndComments() {
    for (;;) {
      while (!atEnd() && std::isspace(static_cast<unsigned char>(peek()))) advance();
      if (atEnd() || peek() != '#') return;
      while (!atEnd() && peek() != '\n') advance();
    }
  }
  /// At a digit: reads a number, `DIGITS ('.' DIGITS?)? ([eE] [+-]? DIGITS)?` or a float's bit
  /// pattern `0x...`; returns whether it is a float.
  bool scanNumber() {
    if (peek() == '0' && (peek(1) == 'x' || peek(1) == 'X') &&
        std::isxdigit(static_cast<unsigned char>(peek(2)))) {
      advance();
      advance();
      while (std::isalnum(static_cast<unsigned char>(peek()))) advance();
      return true;
    }
    bool isFloat = false;
    skipDigits();
    if (peek() == '.') {
      isFloat = true;
      advance();
      skipDigits();
    }
    if ((peek() == 'e' || peek() == 'E') &&
        (isDigit(peek(1)) || ((peek(1) == '+' || peek(1) == '-') && isDigit(peek(2))))) {
      isFloat = true;
      advance();
      if (peek() == '+' || peek() == '-') advance();
      skipDigits();
    }
    return isFloat;
  }
  static bool isDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
  static int hexDigit(char h) {
    return h >= '0' && h <= '9'   ? h - '0'
           : h >= 'a' && h <= 'f' ? h - 'a' + 10
           : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                  : -1;
  }
  /// "unexpected character 'c'", c shown as itself when printable, else as \xHH.
  static std::string unexpectedChar(char c) {
    static const char kHex[] = "0123456789abcdef";
    auto u = static_cast<unsigned char>(c);
    std::string shown =
        std::isprint(u) ? std::string(1, c) : std::string("\\x") + kHex[u >> 4] + kHex[u & 15];
    return "unexpected character '" + shown + "'";
  }

  std::string_view s_;
  size_t p_ = 0;
  int line_ = 1, col_ = 1;

private:
  void skipDigits() {
    while (isDigit(peek())) advance();
  }
};

/// Size expressions, with the precedence of SymInt::str():
///   size := sum ; sum := term (('+' | '-') term)* ; term := unary (('*' | '//' | '%') unary)*
///   unary := '-' unary | primary
///   primary := INT | SYMBOL | ('min' | 'max') '(' sum (',' sum)+ ')' | '(' sum ')'
/// and a symbol's range, `'[' int ',' int ']'` with min <= max. A fold of constants that overflows
/// int64 stays an unfolded operation, as SymInt's operators keep it (SymInt.h), so that every
/// printed expression parses back alike; only an expression without symbols, whose value
/// therefore overflows whatever the sizes, is an error, at the first operator that overflows.
///
/// P provides: `const Token &cur() const`, `bool nextIsPunct(std::string_view) const` (the token
/// after cur()), `void bump()`, `bool isPunct(std::string_view) const`, `Error errorAt(const
/// Token &, const std::string &) const`, `Error expected(const std::string &what, const
/// std::string &context = "") const`, `Status expectPunct(std::string_view, const std::string &)`,
/// `std::optional<std::string> sizeSymbol(const Token &) const` (the symbol a token names, if
/// any, besides an Ident), `const char *sizeWhat() const` (what a primary may be, for the error
/// when none is there), and `Expected<bool> gluedOperand(SymInt &)`: true (and the token taken)
/// where cur() is a modulo fused with its operand by the lexer (the `.coil` format's `N %4`).
template <class P, class Token> class SizeExprRules {
protected:
  /// `symIntText`: read exactly what SymInt::str() prints, which keeps a division by zero and a
  /// fold that overflows as unevaluated operations (SymInt.h); neither is then an error.
  explicit SizeExprRules(bool symIntText = false) : symIntText_(symIntText) {}

  /// A whole size expression (a dim, a range, an index): errors where it overflows without
  /// symbols.
  Expected<SymInt> parseSize() {
    overflowAt_.reset();
    COIL_TRY(SymInt e, parseSum(0));
    if (overflowAt_ && !symIntText_) {
      std::set<std::string> symbols;
      e.collectSymbols(symbols);
      if (symbols.empty())
        return self().errorAt(*overflowAt_, "size expression overflows 64-bit integers");
    }
    return e;
  }

  /// '-'? INT, as an int64.
  Expected<int64_t> parseIntLiteral(const std::string &context) {
    Token start = self().cur();
    bool neg = self().isPunct("-");
    if (neg) self().bump();
    if (self().cur().kind != decltype(start.kind)::Int)
      return self().expected("an integer", context);
    COIL_TRY(int64_t v, intValue(start, self().cur().text, neg));
    self().bump();
    return v;
  }

  /// '[' int ',' int ']': the range of symbol `name` (empty: an error at its minimum).
  Expected<SymRange> parseSymbolRange(const std::string &name) {
    SymRange r;
    COIL_TRY_STATUS(self().expectPunct("[", "before the symbol range"));
    Token at = self().cur();
    COIL_TRY(r.min, parseIntLiteral("as the symbol's minimum"));
    COIL_TRY_STATUS(self().expectPunct(",", "between the bounds of the symbol range"));
    COIL_TRY(r.max, parseIntLiteral("as the symbol's maximum"));
    COIL_TRY_STATUS(self().expectPunct("]", "after the symbol range"));
    if (r.min > r.max)
      return self().errorAt(at, "range of symbol '" + name + "' is empty: min " +
                                    std::to_string(r.min) + " > max " + std::to_string(r.max));
    return r;
  }

private:
  /// Size expressions nest at most this deep.
  static constexpr int kMaxDepth = 256;

  P &self() { return static_cast<P &>(*this); }
  const P &self() const { return static_cast<const P &>(*this); }

  Expected<SymInt> parseSum(int depth) {
    COIL_TRY(SymInt e, parseTerm(depth));
    for (;;) {
      bool add = self().isPunct("+");
      if (!add && !self().isPunct("-")) return e;
      Token opTok = self().cur();
      self().bump();
      COIL_TRY(SymInt r, parseTerm(depth));
      int64_t v;
      if (e.isConstant() && r.isConstant() &&
          (add ? __builtin_add_overflow(e.constant(), r.constant(), &v)
               : __builtin_sub_overflow(e.constant(), r.constant(), &v)))
        noteOverflow(opTok);
      else if (!add && r.isConstant() && r.constant() == INT64_MIN)
        noteOverflow(opTok);
      e = add ? e + r : e - r;
    }
  }

  void noteOverflow(const Token &t) {
    if (!overflowAt_) overflowAt_ = t;
  }

  Expected<int64_t> intValue(const Token &at, std::string_view digits, bool neg) const {
    std::string text = (neg ? "-" : "") + std::string(digits);
    int64_t v = 0;
    auto r = std::from_chars(text.data(), text.data() + text.size(), v);
    if (r.ec != std::errc() || r.ptr != text.data() + text.size())
      return self().errorAt(at, "value " + text + " is out of range for i64");
    return v;
  }

  Expected<SymInt> parseTerm(int depth) {
    COIL_TRY(SymInt e, parseUnary(depth));
    for (;;) {
      int op = self().isPunct("*") ? 0 : self().isPunct("//") ? 1 : self().isPunct("%") ? 2 : -1;
      Token opTok = self().cur();
      SymInt r;
      if (op < 0) {
        COIL_TRY(bool glued, self().gluedOperand(r));
        if (!glued) return e;
        op = 2;
      } else {
        self().bump();
        COIL_TRY(r, parseUnary(depth));
      }
      if (op > 0 && r.isConstant() && r.constant() == 0 && !symIntText_)
        return self().errorAt(opTok, "division by zero in a size expression");
      if (e.isConstant() && r.isConstant()) {
        int64_t a = e.constant(), b = r.constant(), v = 0;
        if ((op == 0 && __builtin_mul_overflow(a, b, &v)) || (op > 0 && a == INT64_MIN && b == -1))
          noteOverflow(opTok);
      }
      e = op == 0 ? e * r : op == 1 ? floorDiv(e, r) : floorMod(e, r);
    }
  }

  Expected<SymInt> parseUnary(int depth) {
    if (depth > kMaxDepth)
      return self().errorAt(self().cur(), "size expression is nested too deeply");
    if (!self().isPunct("-")) return parsePrimary(depth);
    Token minus = self().cur();
    self().bump();
    if (self().cur().kind == decltype(minus.kind)::Int) { // so that INT64_MIN can be written
      COIL_TRY(int64_t v, intValue(minus, self().cur().text, true));
      self().bump();
      return SymInt(v);
    }
    COIL_TRY(SymInt e, parseUnary(depth + 1));
    if (e.isConstant() && e.constant() == INT64_MIN) noteOverflow(minus);
    return -e;
  }

  Expected<SymInt> parsePrimary(int depth) {
    const Token &t = self().cur();
    using Kind = decltype(t.kind);
    if (t.kind == Kind::Int) {
      COIL_TRY(int64_t v, intValue(t, t.text, false));
      self().bump();
      return SymInt(v);
    }
    if (t.kind == Kind::Ident && (t.text == "min" || t.text == "max") && self().nextIsPunct("(")) {
      bool isMin = t.text == "min";
      self().bump();
      self().bump();
      COIL_TRY(SymInt e, parseSum(depth + 1));
      int n = 1;
      while (self().isPunct(",")) {
        self().bump();
        COIL_TRY(SymInt r, parseSum(depth + 1));
        e = isMin ? min(e, r) : max(e, r);
        ++n;
      }
      if (n < 2)
        return self().expected("','",
                               std::string("between the operands of ") + (isMin ? "min" : "max"));
      COIL_TRY_STATUS(self().expectPunct(")", "to close the size expression"));
      return e;
    }
    std::optional<std::string> name = t.kind == Kind::Ident
                                          ? std::optional<std::string>(std::string(t.text))
                                          : self().sizeSymbol(t);
    if (name) {
      self().bump();
      return SymInt::symbol(*name);
    }
    if (self().isPunct("(")) {
      self().bump();
      COIL_TRY(SymInt e, parseSum(depth + 1));
      COIL_TRY_STATUS(self().expectPunct(")", "to close the size expression"));
      return e;
    }
    return self().expected(self().sizeWhat());
  }

  std::optional<Token> overflowAt_; ///< the first constant fold that overflowed (parseSize)
  bool symIntText_;
};

} // namespace coil::scan

#pragma GCC visibility pop
