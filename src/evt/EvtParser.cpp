#include "evt/EvtParser.h"

#include "support/TextScanner.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <set>

namespace coil::evt {
namespace {

enum class Tok { Name, Number, String, Op, Newline, End };

struct Token {
  Tok kind;
  std::string text;
  int line = 0, col = 0;
  int indent = 0; ///< column of the first token of its logical line
};

/// Python-like lines: names, numbers, strings, operators, logical-line ends with their indent.
class Lexer : scan::TextScanner {
public:
  Lexer(const std::string &src, const std::string &file) : TextScanner(src), file_(file) {}

  Expected<std::vector<Token>> run() {
    std::vector<Token> out;
    int depth = 0;
    bool lineStart = true;
    int indent = 0;
    while (p_ < s_.size()) {
      char c = s_[p_];
      if (c == '\n') {
        if (depth == 0 && !lineStart) out.push_back({Tok::Newline, "", line_, col_, indent});
        if (depth == 0) lineStart = true;
        advance();
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\r') {
        if (c == '\t' && lineStart)
          return err(line_, col_, "tabs are not allowed in indentation; use spaces");
        advance();
        continue;
      }
      if (c == '#') {
        while (p_ < s_.size() && s_[p_] != '\n') advance();
        continue;
      }
      if (c == '\\' && p_ + 1 < s_.size() && s_[p_ + 1] == '\n') {
        advance();
        advance();
        continue;
      }
      if (lineStart) {
        indent = col_;
        lineStart = false;
      }
      int l = line_, co = col_;
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::string t;
        while (p_ < s_.size() &&
               (std::isalnum(static_cast<unsigned char>(s_[p_])) || s_[p_] == '_'))
          t += s_[p_], advance();
        out.push_back({Tok::Name, t, l, co, indent});
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c)) ||
          (c == '.' && p_ + 1 < s_.size() &&
           std::isdigit(static_cast<unsigned char>(s_[p_ + 1])))) {
        std::string t;
        while (p_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[p_])) ||
                                  s_[p_] == '.' || s_[p_] == '_' ||
                                  ((s_[p_] == '+' || s_[p_] == '-') && !t.empty() &&
                                   (t.back() == 'e' || t.back() == 'E'))))
          t += s_[p_], advance();
        out.push_back({Tok::Number, t, l, co, indent});
        continue;
      }
      if (c == '"' || c == '\'') {
        char q = c;
        advance();
        std::string t;
        while (p_ < s_.size() && s_[p_] != q && s_[p_] != '\n') t += s_[p_], advance();
        if (p_ >= s_.size() || s_[p_] != q) return err(l, co, "unterminated string");
        advance();
        out.push_back({Tok::String, t, l, co, indent});
        continue;
      }
      static const char *two[] = {"**", "<=", ">=", "==", "!=", "->"};
      std::string op(1, c);
      for (const char *t : two)
        if (s_.compare(p_, 2, t) == 0) op = t;
      if (op.size() == 1 && std::string("+-*/()<>=,:[]").find(c) == std::string::npos)
        return err(l, co, std::string("unexpected character '") + c + "'");
      if (op == "(" || op == "[") ++depth;
      if ((op == ")" || op == "]") && depth > 0) --depth;
      for (size_t k = 0; k < op.size(); ++k) advance();
      out.push_back({Tok::Op, op, l, co, indent});
    }
    if (!lineStart) out.push_back({Tok::Newline, "", line_, col_, indent});
    out.push_back({Tok::End, "", line_, col_, 0});
    return out;
  }

private:
  Error err(int l, int c, std::string msg) const {
    SourceLoc loc;
    loc.file = file_;
    loc.line = l;
    loc.column = c;
    return Error::user(std::move(msg), loc);
  }
  std::string file_;
};

/// One value of the expression language: a node, or (only as a call argument) a dim tuple.
struct Value {
  int node = -1;
  SourceLoc loc;
};

const std::map<std::string, Op> &unaryFns() {
  static const std::map<std::string, Op> m = {
      {"relu", Op::Relu}, {"sigmoid", Op::Sigmoid}, {"tanh", Op::Tanh}, {"gelu", Op::Gelu},
      {"erf", Op::Erf},   {"silu", Op::Silu},       {"exp", Op::Exp},   {"log", Op::Log},
      {"abs", Op::Abs},   {"sqrt", Op::Sqrt},       {"neg", Op::Neg}};
  return m;
}

std::optional<DType> parseDTypeName(const std::string &s) {
  if (s == "f32" || s == "float32" || s == "float") return DType::F32;
  if (s == "f16" || s == "float16" || s == "half") return DType::F16;
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  return std::nullopt;
}

class Parser {
public:
  Parser(std::vector<Token> toks, std::string file, const ParseOptions &opts)
      : t_(std::move(toks)), file_(std::move(file)), opts_(opts),
        b_(opts.problem, opts.batched, opts.element) {
    b_.program().compute = opts.compute;
    b_.program().file = file_;
  }

  Expected<Program> run() {
    while (peek().kind == Tok::Newline) ++pos_;
    const Token &def = peek();
    if (!(def.kind == Tok::Name && def.text == "def"))
      return err(def, "expected 'def NAME(...):' to start the epilogue");
    ++pos_;
    if (peek().kind != Tok::Name) return err(peek(), "expected the function's name after 'def'");
    b_.program().fnName = peek().text;
    ++pos_;
    COIL_TRY_STATUS(expect("("));
    COIL_TRY_STATUS(parseParams());
    COIL_TRY_STATUS(expect(")"));
    if (isOp("->")) {
      ++pos_;
      while (peek().kind != Tok::End && !isOp(":") && peek().kind != Tok::Newline) ++pos_;
    }
    COIL_TRY_STATUS(expect(":"));
    if (peek().kind != Tok::Newline)
      return err(peek(), "the function body must start on its own line");
    ++pos_;
    int bodyIndent = -1;
    bool returned = false;
    while (peek().kind != Tok::End) {
      const Token &first = peek();
      if (first.indent <= def.indent)
        return err(first, "statement outside the epilogue function (only one 'def' is allowed)");
      if (bodyIndent < 0) bodyIndent = first.indent;
      if (first.indent != bodyIndent)
        return err(first, "inconsistent indentation: expected column " +
                              std::to_string(bodyIndent) + ", got " + std::to_string(first.indent));
      if (returned) return err(first, "statement after 'return'");
      if (first.kind == Tok::Name && first.text == "return") {
        COIL_TRY_STATUS(parseReturn());
        returned = true;
      } else if (first.kind == Tok::Name && first.text == "pass") {
        ++pos_;
      } else {
        COIL_TRY_STATUS(parseAssign());
      }
      if (peek().kind != Tok::Newline) return err(peek(), "expected the end of the line");
      ++pos_;
    }
    if (!returned) return err(peek(), "the epilogue must end with 'return NAME, ...'");
    return b_.finish();
  }

private:
  const Token &peek(int k = 0) const {
    size_t i = std::min(pos_ + static_cast<size_t>(k), t_.size() - 1);
    return t_[i];
  }
  bool isOp(const char *s) const { return peek().kind == Tok::Op && peek().text == s; }
  SourceLoc locOf(const Token &t) const {
    SourceLoc l;
    l.file = file_;
    l.line = t.line;
    l.column = t.col;
    return l;
  }
  Error err(const Token &t, std::string msg) const { return Error::user(std::move(msg), locOf(t)); }
  Status expect(const char *s) {
    if (!isOp(s)) {
      std::string got = peek().kind == Tok::Newline ? "end of line"
                        : peek().kind == Tok::End   ? "end of file"
                                                    : "'" + peek().text + "'";
      return err(peek(), std::string("expected '") + s + "', got " + got);
    }
    ++pos_;
    return okStatus();
  }

  Status parseParams() {
    std::set<std::string> seen;
    while (!isOp(")")) {
      const Token &nt = peek();
      if (nt.kind != Tok::Name) return err(nt, "expected a parameter name");
      ++pos_;
      if (!seen.insert(nt.text).second) return err(nt, "duplicate parameter '" + nt.text + "'");
      std::string ann;
      const Token *annTok = &nt;
      if (isOp(":")) {
        ++pos_;
        if (peek().kind == Tok::String) {
          ann = peek().text;
          annTok = &peek();
          ++pos_;
        } else {
          return err(peek(), "the annotation of parameter '" + nt.text +
                                 "' must be a string such as \"1,N\" or \"scalar\"");
        }
      }
      COIL_TRY_STATUS(declareParam(nt, ann, *annTok));
      if (isOp(","))
        ++pos_;
      else if (!isOp(")"))
        return err(peek(), "expected ',' or ')' in the parameter list");
    }
    if (!seen.count("accum"))
      return err(peek(), "the epilogue needs a parameter named 'accum' (the accumulator)");
    return okStatus();
  }

  Status declareParam(const Token &nt, const std::string &annIn, const Token &annTok) {
    const std::string &name = nt.text;
    std::string ann = annIn;
    std::optional<DType> dt;
    if (size_t colon = ann.find(':'); colon != std::string::npos) {
      dt = parseDTypeName(ann.substr(colon + 1));
      if (!dt)
        return err(annTok, "parameter '" + name + "': unknown dtype '" + ann.substr(colon + 1) +
                               "' (use f32, f16 or bf16)");
      ann = ann.substr(0, colon);
    }
    if (auto it = opts_.dtypes.find(name); it != opts_.dtypes.end()) dt = it->second;
    if (name == "accum") {
      if (!annIn.empty())
        return err(annTok, "parameter 'accum' is the accumulator and takes no annotation");
      env_[name] = b_.accum(locOf(nt));
      return okStatus();
    }
    bool m = true, n = true, l = opts_.batched;
    if (!ann.empty()) {
      std::string a;
      for (char c : ann)
        if (c != ' ') a += c;
      if (a == "scalar") {
        m = n = l = false;
      } else {
        std::vector<std::string> dims;
        size_t s = 0;
        while (true) {
          size_t e = a.find(',', s);
          dims.push_back(a.substr(s, e == std::string::npos ? std::string::npos : e - s));
          if (e == std::string::npos) break;
          s = e + 1;
        }
        static const char *names[] = {"M", "N", "L"};
        size_t rank = opts_.batched ? 3 : 2;
        if (dims.size() != 2 && dims.size() != rank)
          return err(annTok, "parameter '" + name + "': annotation \"" + annIn + "\" must list " +
                                 (opts_.batched ? "2 or 3" : "2") + " dimensions over (M, N" +
                                 (opts_.batched ? ", L" : "") +
                                 "), each the dimension's name or 1");
        bool spans[3] = {false, false, false};
        for (size_t k = 0; k < dims.size(); ++k) {
          if (dims[k] == "1") continue;
          if (dims[k] == names[k]) {
            spans[k] = true;
            continue;
          }
          return err(annTok, "parameter '" + name + "': dimension " + std::to_string(k) +
                                 " of annotation \"" + annIn + "\" must be " + names[k] +
                                 " or 1, got '" + dims[k] + "'");
        }
        m = spans[0];
        n = spans[1];
        l = dims.size() == 3 ? spans[2] : false;
      }
    }
    bool isScalar = !m && !n;
    DType dtype = dt ? *dt : (isScalar ? opts_.compute : opts_.element);
    env_[name] = b_.input(name, m, n, l, dtype, locOf(nt));
    return okStatus();
  }

  Status parseReturn() {
    ++pos_;
    std::set<std::string> seen;
    if (peek().kind == Tok::Newline) return err(peek(), "'return' needs at least one name");
    bool paren = false;
    if (isOp("(")) {
      paren = true;
      ++pos_;
    }
    while (true) {
      const Token &t = peek();
      if (t.kind != Tok::Name)
        return err(t, "return values must be variable names (assign the expression to a name "
                      "first)");
      if (peek(1).kind == Tok::Op && peek(1).text != "," && peek(1).text != ")")
        return err(t, "return values must be variable names (assign the expression to a name "
                      "first)");
      auto it = env_.find(t.text);
      if (it == env_.end()) return err(t, "returned name '" + t.text + "' is not defined");
      if (!seen.insert(t.text).second) return err(t, "'" + t.text + "' is returned twice");
      b_.output(t.text, it->second, locOf(t));
      ++pos_;
      if (isOp(",")) {
        ++pos_;
        if (peek().kind == Tok::Newline || isOp(")")) break;
        continue;
      }
      break;
    }
    if (paren) COIL_TRY_STATUS(expect(")"));
    return okStatus();
  }

  Status parseAssign() {
    const Token &nt = peek();
    if (nt.kind != Tok::Name) return err(nt, "expected an assignment 'NAME = expression'");
    static const std::set<std::string> keywords = {"if",     "for",  "while", "def",  "lambda",
                                                   "import", "from", "class", "with", "else"};
    if (keywords.count(nt.text))
      return err(nt, "'" + nt.text + "' is not supported in an epilogue");
    ++pos_;
    if (isOp(","))
      return err(peek(), "tuple assignment is not supported; assign one name per line");
    if (!isOp("=")) {
      if (peek().kind == Tok::Op &&
          (peek().text == "+" || peek().text == "-" || peek().text == "*" || peek().text == "/"))
        return err(peek(), "augmented assignment ('" + peek().text +
                               "=') is not supported; write 'x = x " + peek().text + " ...'");
      return err(peek(), "expected '=' after '" + nt.text + "'");
    }
    ++pos_;
    if (nt.text == "accum")
      return err(nt, "'accum' names the accumulator and cannot be reassigned");
    COIL_TRY(Value v, parseExpr());
    env_[nt.text] = v.node;
    b_.setVar(v.node, nt.text);
    return okStatus();
  }

  /// Nesting guard: the recursive descent stays far from the native stack's limit.
  struct Depth {
    explicit Depth(int &d) : d_(d) { ++d_; }
    ~Depth() { --d_; }
    int &d_;
  };

  Expected<Value> parseExpr() {
    Depth guard(depth_);
    if (depth_ > kMaxDepth)
      return err(peek(),
                 "expression nested more than " + std::to_string(kMaxDepth) + " levels deep");
    COIL_TRY(Value a, parseAdditive());
    static const std::map<std::string, Op> cmp = {{"<", Op::Lt},  {"<=", Op::Le}, {">", Op::Gt},
                                                  {">=", Op::Ge}, {"==", Op::Eq}, {"!=", Op::Ne}};
    if (peek().kind == Tok::Op) {
      auto it = cmp.find(peek().text);
      if (it != cmp.end()) {
        const Token &opTok = peek();
        ++pos_;
        COIL_TRY(Value b, parseAdditive());
        if (peek().kind == Tok::Op && cmp.count(peek().text))
          return err(peek(), "chained comparisons are not supported");
        return Value{b_.compute(it->second, {a.node, b.node}, locOf(opTok)), locOf(opTok)};
      }
    }
    return a;
  }

  Expected<Value> parseAdditive() {
    COIL_TRY(Value a, parseTerm());
    while (isOp("+") || isOp("-")) {
      const Token &opTok = peek();
      Op op = opTok.text == "+" ? Op::Add : Op::Sub;
      ++pos_;
      COIL_TRY(Value b, parseTerm());
      a = Value{b_.compute(op, {a.node, b.node}, locOf(opTok)), locOf(opTok)};
    }
    return a;
  }

  Expected<Value> parseTerm() {
    COIL_TRY(Value a, parseUnary());
    while (isOp("*") || isOp("/")) {
      const Token &opTok = peek();
      Op op = opTok.text == "*" ? Op::Mul : Op::Div;
      ++pos_;
      COIL_TRY(Value b, parseUnary());
      a = Value{b_.compute(op, {a.node, b.node}, locOf(opTok)), locOf(opTok)};
    }
    return a;
  }

  Expected<Value> parseUnary() {
    Depth guard(depth_);
    if (depth_ > kMaxDepth)
      return err(peek(),
                 "expression nested more than " + std::to_string(kMaxDepth) + " levels deep");
    if (isOp("-")) {
      const Token &opTok = peek();
      ++pos_;
      // A negative number literal folds into the literal.
      if (peek().kind == Tok::Number && !(peek(1).kind == Tok::Op && peek(1).text == "**")) {
        COIL_TRY(Value v, parsePrimary());
        b_.program().at(v.node).value = -b_.program().at(v.node).value;
        return v;
      }
      COIL_TRY(Value v, parseUnary());
      return Value{b_.compute(Op::Neg, {v.node}, locOf(opTok)), locOf(opTok)};
    }
    if (isOp("+")) {
      ++pos_;
      return parseUnary();
    }
    return parsePower();
  }

  Expected<Value> parsePower() {
    COIL_TRY(Value a, parsePrimary());
    if (isOp("**")) {
      const Token &opTok = peek();
      ++pos_;
      COIL_TRY(Value b, parseUnary());
      return Value{b_.compute(Op::Pow, {a.node, b.node}, locOf(opTok)), locOf(opTok)};
    }
    return a;
  }

  Expected<Value> parsePrimary() {
    const Token &t = peek();
    if (t.kind == Tok::Number) {
      ++pos_;
      const char *s = t.text.c_str();
      char *end = nullptr;
      double v = std::strtod(s, &end);
      if (end == s || *end != '\0') return err(t, "malformed number '" + t.text + "'");
      return Value{b_.literal(v, locOf(t)), locOf(t)};
    }
    if (isOp("(")) {
      ++pos_;
      COIL_TRY(Value v, parseExpr());
      if (isOp(",")) return err(peek(), "tuples are only allowed as dim= of a reduction");
      COIL_TRY_STATUS(expect(")"));
      return v;
    }
    if (t.kind == Tok::Name) {
      ++pos_;
      if (isOp("(")) return parseCall(t);
      if (isOp("[")) return err(peek(), "indexing is not supported in an epilogue");
      if (t.text == "True" || t.text == "False")
        return Value{b_.literal(t.text == "True" ? 1 : 0, locOf(t)), locOf(t)};
      auto it = env_.find(t.text);
      if (it == env_.end()) return err(t, "name '" + t.text + "' is not defined");
      auto &rn = b_.program().readNames;
      if (auto pos = std::lower_bound(rn.begin(), rn.end(), t.text);
          pos == rn.end() || *pos != t.text)
        rn.insert(pos, t.text);
      return Value{it->second, locOf(t)};
    }
    if (t.kind == Tok::String) return err(t, "strings are only allowed as annotations and dtypes");
    if (t.kind == Tok::Newline || t.kind == Tok::End)
      return err(t, "expected an expression, got the end of the line");
    return err(t, "expected an expression, got '" + t.text + "'");
  }

  struct Arg {
    std::string key; ///< keyword, or empty
    Value value;
    std::vector<int64_t> ints; ///< dim= values
    std::string str;           ///< a string argument (cast's dtype)
    bool isStr = false;
    bool isInts = false;
    Token tok;
  };

  Expected<std::vector<int64_t>> parseIntTuple() {
    std::vector<int64_t> out;
    auto one = [&]() -> Status {
      bool neg = false;
      if (isOp("-")) {
        neg = true;
        ++pos_;
      }
      if (peek().kind != Tok::Number ||
          peek().text.find_first_not_of("0123456789") != std::string::npos)
        return err(peek(), "dim= takes integers");
      int64_t v = std::strtoll(peek().text.c_str(), nullptr, 10);
      out.push_back(neg ? -v : v);
      ++pos_;
      return okStatus();
    };
    if (isOp("(") || isOp("[")) {
      std::string close = peek().text == "(" ? ")" : "]";
      ++pos_;
      while (!isOp(close.c_str())) {
        COIL_TRY_STATUS(one());
        if (isOp(","))
          ++pos_;
        else if (!isOp(close.c_str()))
          return err(peek(), "expected ',' or '" + close + "'");
      }
      ++pos_;
    } else {
      COIL_TRY_STATUS(one());
    }
    return out;
  }

  Expected<Value> parseCall(const Token &fn) {
    ++pos_; // (
    std::vector<Arg> args;
    while (!isOp(")")) {
      Arg a;
      a.tok = peek();
      if (peek().kind == Tok::Name && peek(1).kind == Tok::Op && peek(1).text == "=") {
        a.key = peek().text;
        pos_ += 2;
        if (a.key == "dim") {
          COIL_TRY(a.ints, parseIntTuple());
          a.isInts = true;
        } else if (peek().kind == Tok::String) {
          a.str = peek().text;
          a.isStr = true;
          ++pos_;
        } else {
          COIL_TRY(a.value, parseExpr());
        }
      } else if (peek().kind == Tok::String) {
        a.str = peek().text;
        a.isStr = true;
        ++pos_;
      } else {
        COIL_TRY(a.value, parseExpr());
      }
      args.push_back(std::move(a));
      if (isOp(","))
        ++pos_;
      else if (!isOp(")"))
        return err(peek(), "expected ',' or ')' in the call to " + fn.text);
    }
    ++pos_;
    SourceLoc loc = locOf(fn);
    const std::string &name = fn.text;
    auto positional = [&](size_t n) -> Status {
      size_t pos = 0;
      for (const Arg &a : args) {
        if (!a.key.empty())
          return err(a.tok, name + "() takes no keyword argument '" + a.key + "'");
        if (a.isStr) return err(a.tok, name + "() takes no string argument");
        ++pos;
      }
      if (pos != n)
        return err(fn, name + "() takes " + std::to_string(n) + " argument" + (n == 1 ? "" : "s") +
                           ", got " + std::to_string(pos));
      return okStatus();
    };
    if (auto it = unaryFns().find(name); it != unaryFns().end()) {
      COIL_TRY_STATUS(positional(1));
      return Value{b_.compute(it->second, {args[0].value.node}, loc), loc};
    }
    if (name == "maximum" || name == "minimum" || name == "pow") {
      COIL_TRY_STATUS(positional(2));
      Op op = name == "maximum" ? Op::Max : name == "minimum" ? Op::Min : Op::Pow;
      return Value{b_.compute(op, {args[0].value.node, args[1].value.node}, loc), loc};
    }
    if (name == "clamp" || name == "where") {
      COIL_TRY_STATUS(positional(3));
      Op op = name == "clamp" ? Op::Clamp : Op::Where;
      return Value{
          b_.compute(op, {args[0].value.node, args[1].value.node, args[2].value.node}, loc), loc};
    }
    if (name == "cast") {
      if (args.size() != 2 || !args[1].isStr || args[0].isStr || !args[0].key.empty())
        return err(fn, "cast() takes a value and a dtype string: cast(x, \"bf16\")");
      auto dt = parseDTypeName(args[1].str);
      if (!dt)
        return err(args[1].tok,
                   "cast(): unknown dtype '" + args[1].str + "' (use f32, f16 or bf16)");
      return Value{b_.cast(args[0].value.node, *dt, loc), loc};
    }
    if (name == "sum" || name == "max" || name == "min" || name == "mean") {
      if (name == "min" || name == "mean")
        return err(fn, name + "() reductions are not supported (supported: sum, max)");
      const Arg *x = nullptr, *dim = nullptr;
      for (const Arg &a : args) {
        if (a.key == "dim")
          dim = &a;
        else if (a.key.empty() && !a.isStr && !x)
          x = &a;
        else if (a.key.empty() && !a.isStr && name == "max")
          return err(fn, "max() is a reduction and takes one tensor and dim=; use maximum(a, b) "
                         "for the elementwise maximum");
        else
          return err(a.tok, name + "() takes one tensor and dim=");
      }
      if (!x) return err(fn, name + "() needs a tensor to reduce");
      if (!dim)
        return err(fn, name + "() needs dim= (0 reduces over M, 1 over N, (0, 1) over both)");
      int rank = opts_.batched ? 3 : 2;
      bool overM = false, overN = false;
      for (int64_t d : dim->ints) {
        int64_t k = d < 0 ? d + rank : d;
        if (k < 0 || k >= rank)
          return err(dim->tok, "dim=" + std::to_string(d) + " is out of range for the " +
                                   (opts_.batched ? "(M, N, L)" : "(M, N)") + " epilogue");
        if (k == 2)
          return err(dim->tok, "dim=" + std::to_string(d) +
                                   " reduces over the batch dimension L, which the epilogue "
                                   "cannot do (each batch is its own GEMM)");
        bool &flag = k == 0 ? overM : overN;
        if (flag) return err(dim->tok, "dim= lists dimension " + std::to_string(k) + " twice");
        flag = true;
      }
      if (dim->ints.empty()) return err(dim->tok, "dim= must name at least one dimension");
      return Value{
          b_.reduce(name == "sum" ? RedFn::Sum : RedFn::Max, x->value.node, overM, overN, loc),
          loc};
    }
    static const std::set<std::string> known = {"leaky_relu", "hardswish", "softmax", "erf",
                                                "sin",        "cos",       "permute", "reshape"};
    if (known.count(name))
      return err(fn, "function '" + name + "' is not supported in an epilogue");
    return err(fn, "unknown function '" + name + "'");
  }

  std::vector<Token> t_;
  size_t pos_ = 0;
  std::string file_;
  const ParseOptions &opts_;
  Builder b_;
  std::map<std::string, int> env_;
  int depth_ = 0;
  static constexpr int kMaxDepth = 200;
};

} // namespace

Expected<Program> parseEpilogue(const std::string &source, const std::string &file,
                                const ParseOptions &opts) {
  Lexer lx(source, file);
  COIL_TRY(std::vector<Token> toks, lx.run());
  Parser p(std::move(toks), file, opts);
  return p.run();
}

} // namespace coil::evt
