// SymInt printers (text, Python, C++, CUDA) and the parser of the text form.
#include "support/SymInt.h"
#include "support/SymIntInternal.h"

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
