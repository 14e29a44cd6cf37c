// SymInt printers (text, Python, C++, CUDA) and the parser of the text form.
#include "support/SymInt.h"
#include "support/SymIntInternal.h"
#include "support/TextScanner.h"

#include <cstring>

namespace coil {

using namespace symint;

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

// The grammar is support/TextScanner.h's, over tokens of one line: blanks between them, no
// comments.
enum class Tok { Eof, Ident, Int, Punct, Error };

struct Token {
  Tok kind = Tok::Eof;
  std::string_view text;
  int col = 1;
};

class SymLexer : scan::TextScanner {
public:
  explicit SymLexer(std::string_view s) : TextScanner(s) {}

  Token next() {
    while (peek() == ' ' || peek() == '\t') advance();
    Token t;
    t.col = col_;
    size_t b = p_;
    if (atEnd()) return t;
    char c = peek();
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      while (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_') advance();
      t.kind = Tok::Ident;
    } else if (isDigit(c)) {
      while (isDigit(peek())) advance();
      t.kind = Tok::Int;
    } else if (c == '/' && peek(1) == '/') {
      advance();
      advance();
      t.kind = Tok::Punct;
    } else if (c != '\0' && std::strchr("+-*%(),", c)) {
      advance();
      t.kind = Tok::Punct;
    } else {
      advance();
      t.kind = Tok::Error;
    }
    t.text = s_.substr(b, p_ - b);
    return t;
  }
};

class SymParser : scan::SizeExprRules<SymParser, Token> {
  friend class scan::SizeExprRules<SymParser, Token>;

public:
  explicit SymParser(std::string_view s) : SizeExprRules(true), s_(s), lex_(s) {
    cur_ = lex_.next();
  }

  Expected<SymInt> parseAll() {
    COIL_TRY(SymInt e, parseSize());
    if (cur_.kind != Tok::Eof) return errorAt(cur_, "unexpected '" + std::string(cur_.text) + "'");
    return e;
  }

private:
  const Token &cur() const { return cur_; }
  void bump() { cur_ = lex_.next(); }
  bool isPunct(std::string_view p) const { return cur_.kind == Tok::Punct && cur_.text == p; }
  bool nextIsPunct(std::string_view p) const {
    SymLexer copy = lex_;
    Token n = copy.next();
    return n.kind == Tok::Punct && n.text == p;
  }
  Error errorAt(const Token &t, const std::string &m) const {
    return Error::user("bad size expression '" + std::string(s_) + "' at column " +
                       std::to_string(t.col) + ": " + m);
  }
  Error expected(const std::string &what, const std::string &context = "") const {
    std::string got = cur_.kind == Tok::Eof ? "the end" : "'" + std::string(cur_.text) + "'";
    return errorAt(cur_,
                   "expected " + what + (context.empty() ? "" : " " + context) + ", got " + got);
  }
  Status expectPunct(std::string_view p, const std::string &context) {
    if (!isPunct(p)) return expected("'" + std::string(p) + "'", context);
    bump();
    return okStatus();
  }
  static std::optional<std::string> sizeSymbol(const Token &) { return std::nullopt; }
  static const char *sizeWhat() { return "a number, a symbol or '('"; }
  static Expected<bool> gluedOperand(SymInt &) { return false; }

  std::string_view s_;
  SymLexer lex_;
  Token cur_;
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
