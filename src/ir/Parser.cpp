// The `.coil` text parser: a lexer over the whole text, then recursive descent (one function
// per rule of the grammar in Printer.h). Every problem is a user error at file:line:column.
#include "ir/Parser.h"

#include "ir/Printer.h"
#include "ir/TextFormatUtil.h"

#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

namespace coil {

namespace {

using namespace textfmt;

enum class Tok { Eof, Ident, ValueName, GlobalName, Int, Float, String, Punct, Error };

struct Token {
  Tok kind = Tok::Eof;
  std::string_view text; ///< the source text (punctuation, identifiers, numbers)
  std::string str;       ///< decoded contents of strings and quoted names; the error message
  int line = 1;
  int col = 1;
};

std::string hexByte(unsigned char c) {
  static const char kHex[] = "0123456789abcdef";
  return {kHex[c >> 4], kHex[c & 15]};
}

bool isNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}

class Lexer {
public:
  explicit Lexer(std::string_view s) : s_(s) {}

  std::vector<Token> run() {
    std::vector<Token> toks;
    for (;;) {
      toks.push_back(next());
      if (toks.back().kind == Tok::Eof || toks.back().kind == Tok::Error) return toks;
    }
  }

private:
  char peek(size_t k = 0) const { return p_ + k < s_.size() ? s_[p_ + k] : '\0'; }
  void advance() {
    if (s_[p_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++p_;
  }
  Token error(Token t, std::string msg) {
    t.kind = Tok::Error;
    t.str = std::move(msg);
    return t;
  }

  /// Reads a quoted string starting at '"' into t.str.
  bool readString(Token &t) {
    advance(); // opening quote
    for (;;) {
      if (p_ >= s_.size() || peek() == '\n') {
        t.str = "unterminated string";
        return false;
      }
      char c = peek();
      if (c == '"') {
        advance();
        return true;
      }
      if (c != '\\') {
        // Plain run: copy as much as possible at once (hex constants are long).
        size_t b = p_;
        while (p_ < s_.size() && s_[p_] != '"' && s_[p_] != '\\' && s_[p_] != '\n') ++p_;
        col_ += int(p_ - b);
        t.str.append(s_.data() + b, p_ - b);
        continue;
      }
      advance();
      char e = peek();
      switch (e) {
      case '\\':
        t.str += '\\';
        break;
      case '"':
        t.str += '"';
        break;
      case 'n':
        t.str += '\n';
        break;
      case 't':
        t.str += '\t';
        break;
      case 'r':
        t.str += '\r';
        break;
      case 'x': {
        auto hex = [](char h) {
          return h >= '0' && h <= '9'   ? h - '0'
                 : h >= 'a' && h <= 'f' ? h - 'a' + 10
                 : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                        : -1;
        };
        int hi = hex(peek(1)), lo = hex(peek(2));
        if (hi < 0 || lo < 0) {
          t.str = "expected two hex digits after '\\x' in string";
          return false;
        }
        t.str += char(hi * 16 + lo);
        advance();
        advance();
        break;
      }
      default:
        t.str = "unknown escape sequence in string";
        return false;
      }
      advance();
    }
  }

  Token next() {
    for (;;) {
      while (p_ < s_.size() && std::isspace(static_cast<unsigned char>(peek()))) advance();
      if (peek() == '#') {
        while (p_ < s_.size() && peek() != '\n') advance();
        continue;
      }
      break;
    }
    Token t;
    t.line = line_;
    t.col = col_;
    size_t b = p_;
    if (p_ >= s_.size()) return t;
    char c = peek();
    auto finish = [&](Tok k) {
      t.kind = k;
      t.text = s_.substr(b, p_ - b);
      return t;
    };
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      while (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_') advance();
      return finish(Tok::Ident);
    }
    if (c == '0' && (peek(1) == 'x' || peek(1) == 'X') &&
        std::isxdigit(static_cast<unsigned char>(peek(2)))) {
      // The bit pattern of a float: a Float token spelled 0x...
      advance();
      advance();
      while (std::isalnum(static_cast<unsigned char>(peek()))) advance();
      return finish(Tok::Float);
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      bool isFloat = false;
      while (std::isdigit(static_cast<unsigned char>(peek()))) advance();
      if (peek() == '.') {
        isFloat = true;
        advance();
        while (std::isdigit(static_cast<unsigned char>(peek()))) advance();
      }
      if ((peek() == 'e' || peek() == 'E') &&
          (std::isdigit(static_cast<unsigned char>(peek(1))) ||
           ((peek(1) == '+' || peek(1) == '-') &&
            std::isdigit(static_cast<unsigned char>(peek(2)))))) {
        isFloat = true;
        advance();
        if (peek() == '+' || peek() == '-') advance();
        while (std::isdigit(static_cast<unsigned char>(peek()))) advance();
      }
      return finish(isFloat ? Tok::Float : Tok::Int);
    }
    if (c == '"') {
      if (!readString(t)) return error(t, t.str);
      return finish(Tok::String);
    }
    if ((c == '%' || c == '@') && (isNameChar(peek(1)) || peek(1) == '"')) {
      advance();
      if (peek() == '"') {
        if (!readString(t)) return error(t, t.str);
      } else {
        while (isNameChar(peek())) advance();
        t.str = std::string(s_.substr(b + 1, p_ - b - 1));
      }
      return finish(c == '%' ? Tok::ValueName : Tok::GlobalName);
    }
    if ((c == '-' && peek(1) == '>') || (c == '/' && peek(1) == '/')) {
      advance();
      advance();
      return finish(Tok::Punct);
    }
    if (c != '\0' && std::strchr("()[]{},:=+-*%", c)) {
      advance();
      return finish(Tok::Punct);
    }
    std::string shown = std::isprint(static_cast<unsigned char>(c))
                            ? std::string(1, c)
                            : "\\x" + hexByte(static_cast<unsigned char>(c));
    return error(t, "unexpected character '" + shown + "'");
  }

  std::string_view s_;
  size_t p_ = 0;
  int line_ = 1, col_ = 1;
};

struct Pos {
  int line = 0, col = 0;
};

class Parser {
public:
  Parser(std::string_view text, std::string file, const ParseOptions &opts)
      : file_(std::move(file)), opts_(opts) {
    toks_ = Lexer(text).run();
  }

  Expected<Graph> run() {
    COIL_TRY_STATUS(parseGraph());
    COIL_TRY_STATUS(verify());
    return std::move(g_);
  }

  /// The whole text as one size expression.
  Expected<SymInt> runSymInt() {
    COIL_TRY(SymInt e, parseSum(0));
    if (cur().kind != Tok::Eof) return expected("end of the size expression");
    return e;
  }

private:
  // --- tokens
  const Token &cur() const { return toks_[p_]; }
  const Token &ahead(size_t k) const { return toks_[std::min(p_ + k, toks_.size() - 1)]; }
  void bump() {
    if (p_ + 1 < toks_.size()) ++p_;
  }
  bool isPunct(std::string_view p) const { return cur().kind == Tok::Punct && cur().text == p; }
  bool isKeyword(std::string_view k) const { return cur().kind == Tok::Ident && cur().text == k; }

  SourceLoc locOf(const Token &t) const { return SourceLoc{file_, "", "", t.line, t.col}; }
  Error errorAt(const Token &t, const std::string &msg) const {
    if (t.kind == Tok::Error) return Error::user(t.str, locOf(t));
    return Error::user(msg, locOf(t));
  }
  static std::string describe(const Token &t) {
    switch (t.kind) {
    case Tok::Eof:
      return "end of input";
    case Tok::String:
      return "a string";
    case Tok::ValueName:
    case Tok::GlobalName: {
      std::string s;
      appendName(s, t.text[0], t.str);
      return "'" + s + "'";
    }
    default:
      return "'" + std::string(t.text) + "'";
    }
  }
  /// "expected WHAT CONTEXT, got X" at the current token.
  Error expected(const std::string &what, const std::string &context = "") const {
    return errorAt(cur(), "expected " + what + (context.empty() ? "" : " " + context) + ", got " +
                              describe(cur()));
  }
  Status expectPunct(std::string_view p, const std::string &context) {
    if (!isPunct(p)) return expected("'" + std::string(p) + "'", context);
    bump();
    return okStatus();
  }
  Status expectKeyword(std::string_view k, const std::string &context) {
    if (!isKeyword(k)) return expected("'" + std::string(k) + "'", context);
    bump();
    return okStatus();
  }
  Expected<std::string> expectString(const std::string &context) {
    if (cur().kind != Tok::String) return expected("a string", context);
    std::string s = cur().str;
    bump();
    return s;
  }

  static std::string valueText(const std::string &name) {
    std::string s;
    appendName(s, '%', name);
    return s;
  }

  // --- graph := 'graph' GLOBAL '(' params? ')' '->' '(' results? ')' '{' stmt* '}'
  Status parseGraph() {
    graphTok_ = cur();
    COIL_TRY_STATUS(expectKeyword("graph", "at the start of the text"));
    if (cur().kind != Tok::GlobalName)
      return expected("a graph name such as '@main'", "after 'graph'");
    g_.name = cur().str;
    bump();
    COIL_TRY_STATUS(expectPunct("(", "before the graph inputs"));
    if (!isPunct(")")) {
      for (;;) {
        COIL_TRY_STATUS(parseParam());
        if (isPunct(")")) break;
        COIL_TRY_STATUS(expectPunct(",", "or ')' after a graph input"));
      }
    }
    bump();
    COIL_TRY_STATUS(expectPunct("->", "after the graph inputs"));
    COIL_TRY_STATUS(expectPunct("(", "before the graph outputs"));
    std::vector<Token> results;
    if (!isPunct(")")) {
      for (;;) {
        if (cur().kind != Tok::ValueName) return expected("a value name", "in the graph outputs");
        results.push_back(cur());
        bump();
        if (isPunct(")")) break;
        COIL_TRY_STATUS(expectPunct(",", "or ')' after a graph output"));
      }
    }
    bump();
    COIL_TRY_STATUS(expectPunct("{", "before the graph body"));
    while (!isPunct("}")) {
      if (cur().kind == Tok::Eof) return expected("'}'", "at the end of the graph body");
      COIL_TRY_STATUS(parseStatement());
    }
    bump();
    if (cur().kind != Tok::Eof) return expected("end of input", "after the graph");
    for (const Token &r : results) {
      auto v = g_.findValue(r.str);
      if (!v) return errorAt(r, "graph output " + valueText(r.str) + " is not defined");
      g_.outputs.push_back(*v);
    }
    return okStatus();
  }

  Status defineCheck(const Token &t) {
    auto it = defs_.find(t.str);
    if (it != defs_.end())
      return errorAt(t, "value " + valueText(t.str) + " is already defined at line " +
                            std::to_string(it->second.line));
    return okStatus();
  }
  void recordDef(const Token &t) { defs_[t.str] = Pos{t.line, t.col}; }

  // param := VALUE ':' type
  Status parseParam() {
    if (cur().kind != Tok::ValueName) return expected("a value name", "in the graph inputs");
    Token nameTok = cur();
    COIL_TRY_STATUS(defineCheck(nameTok));
    bump();
    COIL_TRY_STATUS(expectPunct(":", "after value name"));
    COIL_TRY(TensorType type, parseType());
    recordDef(nameTok);
    g_.addInput(nameTok.str, std::move(type));
    return okStatus();
  }

  // --- statements
  Status parseStatement() {
    if (isKeyword("symbol")) return parseSymbolDecl();
    std::vector<Token> outs;
    if (cur().kind == Tok::ValueName) {
      for (;;) {
        if (cur().kind != Tok::ValueName) return expected("a value name", "after ','");
        outs.push_back(cur());
        bump();
        if (!isPunct(",")) break;
        bump();
      }
      COIL_TRY_STATUS(expectPunct("=", "after value name"));
      if (outs.size() == 1 && isKeyword("constant")) return parseConstant(outs[0]);
      if (outs.size() == 1 && isKeyword("symconst")) return parseSymConst(outs[0]);
    } else if (cur().kind != Tok::Ident) {
      return expected("a statement (symbol, constant, symconst or node) or '}'");
    }
    return parseNode(outs);
  }

  // symbol-decl := 'symbol' (IDENT | STRING) ('in' '[' INT ',' INT ']')?
  Status parseSymbolDecl() {
    bump();
    Token nameTok = cur();
    if (cur().kind != Tok::Ident && cur().kind != Tok::String)
      return expected("a symbol name", "after 'symbol'");
    std::string name = cur().kind == Tok::String ? cur().str : std::string(cur().text);
    if (g_.symbols.count(name)) return errorAt(nameTok, "symbol '" + name + "' is declared twice");
    bump();
    SymRange range;
    if (isKeyword("in")) {
      bump();
      COIL_TRY_STATUS(expectPunct("[", "before the symbol range"));
      Token minTok = cur();
      COIL_TRY(range.min, parseInt64("as the symbol's minimum"));
      COIL_TRY_STATUS(expectPunct(",", "between the bounds of the symbol range"));
      COIL_TRY(range.max, parseInt64("as the symbol's maximum"));
      COIL_TRY_STATUS(expectPunct("]", "after the symbol range"));
      if (range.min > range.max)
        return errorAt(minTok, "range of symbol '" + name + "' is empty: min " +
                                   std::to_string(range.min) + " > max " +
                                   std::to_string(range.max));
    }
    g_.symbols[name] = range;
    return okStatus();
  }

  // constant := VALUE '=' 'constant' tensor-literal
  Status parseConstant(const Token &nameTok) {
    bump();
    COIL_TRY_STATUS(defineCheck(nameTok));
    COIL_TRY(Tensor t, parseTensorLiteral());
    recordDef(nameTok);
    g_.addConstant(nameTok.str, std::move(t));
    return okStatus();
  }

  // symconst := VALUE '=' 'symconst' type '[' symint (',' symint)* ']'
  Status parseSymConst(const Token &nameTok) {
    bump();
    COIL_TRY_STATUS(defineCheck(nameTok));
    Token typeTok = cur();
    COIL_TRY(TensorType type, parseType());
    COIL_TRY(std::vector<SymInt> elems, parseSymList("in the symbolic constant"));
    bool scalar = type.rank() == 0;
    if (type.dtype != DType::I64 || type.rank() > 1)
      return errorAt(typeTok,
                     "a symbolic constant must have type i64[] or i64[n], got " + type.str());
    if (scalar && elems.size() != 1)
      return errorAt(typeTok, "a symbolic constant of type i64[] needs 1 element, got " +
                                  std::to_string(elems.size()));
    if (!scalar && type.shape[0] != SymInt(int64_t(elems.size())))
      return errorAt(typeTok, "a symbolic constant of type " + type.str() + " needs " +
                                  type.shape[0].str() + " elements, got " +
                                  std::to_string(elems.size()));
    recordDef(nameTok);
    g_.addSymConstant(nameTok.str, std::move(elems), scalar);
    return okStatus();
  }

  // node := (VALUE (',' VALUE)* '=')? OPNAME '(' args? ')' attrs? (':' types)?
  //         ('name' STRING)? ('loc' '(' STRING ',' STRING ',' STRING ')')?
  Status parseNode(const std::vector<Token> &outs) {
    Token opTok = cur();
    if (cur().kind != Tok::Ident)
      return expected("an op name, 'constant' or 'symconst'", "after '='");
    auto op = opFromName(cur().text);
    if (!op) return errorAt(opTok, "unknown op '" + std::string(cur().text) + "'");
    bump();
    Node n;
    n.op = *op;
    n.loc.line = opTok.line;
    n.loc.column = opTok.col;
    if (!outs.empty()) {
      n.loc.line = outs[0].line;
      n.loc.column = outs[0].col;
    }
    COIL_TRY_STATUS(expectPunct("(", "after the op name"));
    if (!isPunct(")")) {
      for (;;) {
        if (isKeyword("_")) {
          n.inputs.push_back(kNoValue);
          bump();
        } else if (cur().kind == Tok::ValueName) {
          COIL_TRY(ValueId v, resolveUse(cur()));
          n.inputs.push_back(v);
          bump();
        } else {
          return expected("a value name or '_'", "as an op input");
        }
        if (isPunct(")")) break;
        COIL_TRY_STATUS(expectPunct(",", "or ')' after an op input"));
      }
    }
    bump();
    if (isPunct("{")) COIL_TRY_STATUS(parseAttrs(n.attrs));
    std::vector<TensorType> types;
    if (!outs.empty()) {
      Token colon = cur();
      COIL_TRY_STATUS(expectPunct(":", "before the output types"));
      for (;;) {
        COIL_TRY(TensorType t, parseType());
        types.push_back(std::move(t));
        if (!isPunct(",")) break;
        bump();
        if (types.size() == outs.size())
          return errorAt(colon, "node has " + std::to_string(outs.size()) +
                                    " outputs but more output types");
      }
      if (types.size() != outs.size())
        return errorAt(colon, "node has " + std::to_string(outs.size()) + " outputs but " +
                                  std::to_string(types.size()) + " output types");
    }
    if (isKeyword("name")) {
      bump();
      COIL_TRY(n.name, expectString("after 'name'"));
    }
    if (isKeyword("loc")) {
      bump();
      COIL_TRY_STATUS(expectPunct("(", "after 'loc'"));
      COIL_TRY(n.loc.file, expectString("as the file of 'loc'"));
      COIL_TRY_STATUS(expectPunct(",", "after the file of 'loc'"));
      COIL_TRY(n.loc.node, expectString("as the node of 'loc'"));
      COIL_TRY_STATUS(expectPunct(",", "after the node of 'loc'"));
      COIL_TRY(n.loc.op, expectString("as the op of 'loc'"));
      COIL_TRY_STATUS(expectPunct(")", "after 'loc'"));
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      COIL_TRY_STATUS(defineCheck(outs[i]));
      recordDef(outs[i]);
      n.outputs.push_back(g_.addValue(outs[i].str, std::move(types[i]), ValueKind::NodeOutput));
    }
    nodePos_.push_back(Pos{n.loc.line, n.loc.column});
    g_.addNode(std::move(n));
    return okStatus();
  }

  /// A use of a value: it must be defined by an earlier statement.
  Expected<ValueId> resolveUse(const Token &t) {
    if (auto v = g_.findValue(t.str)) return *v;
    // Is it defined later? Look for a statement defining it (error path only): the name is
    // followed by (',' VALUE)* '='.
    for (size_t k = p_ + 1; k < toks_.size(); ++k) {
      if (toks_[k].kind != Tok::ValueName || toks_[k].str != t.str) continue;
      size_t j = k + 1;
      while (j + 1 < toks_.size() && toks_[j].kind == Tok::Punct && toks_[j].text == "," &&
             toks_[j + 1].kind == Tok::ValueName)
        j += 2;
      if (j < toks_.size() && toks_[j].kind == Tok::Punct && toks_[j].text == "=")
        return errorAt(t, "value " + valueText(t.str) + " is used before its definition at line " +
                              std::to_string(toks_[k].line));
    }
    return errorAt(t, "value " + valueText(t.str) + " is not defined");
  }

  // attrs := '{' (attr (',' attr)*)? '}' ; attr := (IDENT | STRING) '=' attr-value
  Status parseAttrs(Attrs &attrs) {
    bump();
    if (isPunct("}")) {
      bump();
      return okStatus();
    }
    for (;;) {
      Token nameTok = cur();
      std::string name;
      if (cur().kind == Tok::Ident)
        name = std::string(cur().text);
      else if (cur().kind == Tok::String)
        name = cur().str;
      else
        return expected("an attribute name");
      if (attrs.has(name)) return errorAt(nameTok, "attribute '" + name + "' is given twice");
      bump();
      COIL_TRY_STATUS(expectPunct("=", "after the attribute name"));
      COIL_TRY(AttrValue v, parseAttrValue());
      attrs.set(name, std::move(v));
      if (isPunct("}")) break;
      COIL_TRY_STATUS(expectPunct(",", "or '}' after an attribute"));
    }
    bump();
    return okStatus();
  }

  bool atNumber() const {
    const Token &t = cur().kind == Tok::Punct && cur().text == "-" ? ahead(1) : cur();
    return t.kind == Tok::Int || t.kind == Tok::Float ||
           (t.kind == Tok::Ident && (t.text == "inf" || t.text == "nan"));
  }
  /// ['-'] (INT | FLOAT | 'inf' | 'nan'): the joined text, and whether it is a float.
  Status parseNumberText(std::string &text, bool &isFloat, const std::string &context) {
    text.clear();
    if (isPunct("-")) {
      text = "-";
      bump();
    }
    const Token &t = cur();
    if (!(t.kind == Tok::Int || t.kind == Tok::Float ||
          (t.kind == Tok::Ident && (t.text == "inf" || t.text == "nan"))))
      return expected("a number", context);
    isFloat = t.kind != Tok::Int;
    text += t.text;
    bump();
    return okStatus();
  }
  Expected<int64_t> parseInt64(const std::string &context) {
    Token start = cur();
    std::string text;
    bool isFloat = false;
    COIL_TRY_STATUS(parseNumberText(text, isFloat, context));
    int64_t v = 0;
    std::string err = parseElement(DType::I64, text, isFloat, &v);
    if (!err.empty()) return errorAt(start, err);
    return v;
  }
  Expected<double> parseDouble(const std::string &context) {
    Token start = cur();
    std::string text;
    bool isFloat = false;
    COIL_TRY_STATUS(parseNumberText(text, isFloat, context));
    double v = 0;
    std::string err = parseElement(DType::F64, text, true, &v);
    if (!err.empty()) return errorAt(start, err);
    return v;
  }

  /// `[` items `]` where each item is parsed by `item`.
  template <typename F> Status parseList(const std::string &context, F item) {
    COIL_TRY_STATUS(expectPunct("[", context));
    if (isPunct("]")) {
      bump();
      return okStatus();
    }
    for (;;) {
      COIL_TRY_STATUS(item());
      if (isPunct("]")) break;
      COIL_TRY_STATUS(expectPunct(",", "or ']' in a list"));
    }
    bump();
    return okStatus();
  }

  Expected<AttrValue> parseAttrValue() {
    Token start = cur();
    if (cur().kind == Tok::String) {
      std::string s = cur().str;
      bump();
      return AttrValue(std::move(s));
    }
    if (atNumber()) {
      std::string text;
      bool isFloat = false;
      COIL_TRY_STATUS(parseNumberText(text, isFloat, "as an attribute value"));
      if (isFloat) {
        double d = 0;
        std::string err = parseElement(DType::F64, text, true, &d);
        if (!err.empty()) return errorAt(start, err);
        return AttrValue(d);
      }
      int64_t v = 0;
      std::string err = parseElement(DType::I64, text, false, &v);
      if (!err.empty()) return errorAt(start, err);
      return AttrValue(v);
    }
    if (isKeyword("tensor")) {
      bump();
      COIL_TRY(Tensor t, parseTensorLiteral());
      return AttrValue(std::move(t));
    }
    if (isKeyword("syms")) {
      bump();
      COIL_TRY(std::vector<SymInt> l, parseSymList("after 'syms'"));
      return AttrValue(std::move(l));
    }
    if (isKeyword("ints")) {
      bump();
      std::vector<int64_t> l;
      COIL_TRY_STATUS(parseList("after 'ints'", [&]() -> Status {
        COIL_TRY(int64_t v, parseInt64("in an ints list"));
        l.push_back(v);
        return okStatus();
      }));
      return AttrValue(std::move(l));
    }
    if (isKeyword("floats")) {
      bump();
      std::vector<double> l;
      COIL_TRY_STATUS(parseList("after 'floats'", [&]() -> Status {
        COIL_TRY(double v, parseDouble("in a floats list"));
        l.push_back(v);
        return okStatus();
      }));
      return AttrValue(std::move(l));
    }
    if (isKeyword("strings")) {
      bump();
      std::vector<std::string> l;
      COIL_TRY_STATUS(parseList("after 'strings'", [&]() -> Status {
        COIL_TRY(std::string s, expectString("in a strings list"));
        l.push_back(std::move(s));
        return okStatus();
      }));
      return AttrValue(std::move(l));
    }
    if (isPunct("[")) {
      if (ahead(1).kind == Tok::Punct && ahead(1).text == "]")
        return errorAt(start, "an empty list needs its kind: ints[], floats[], strings[] or "
                              "syms[]");
      if (ahead(1).kind == Tok::String) {
        std::vector<std::string> l;
        COIL_TRY_STATUS(parseList("", [&]() -> Status {
          COIL_TRY(std::string s, expectString("in a list of strings"));
          l.push_back(std::move(s));
          return okStatus();
        }));
        return AttrValue(std::move(l));
      }
      // Numbers: a list holding any float is a floats list, else an ints list.
      std::vector<std::pair<std::string, bool>> items;
      std::vector<Token> starts;
      bool anyFloat = false;
      COIL_TRY_STATUS(parseList("", [&]() -> Status {
        std::string text;
        bool isFloat = false;
        starts.push_back(cur());
        COIL_TRY_STATUS(parseNumberText(text, isFloat, "in a list"));
        anyFloat |= isFloat;
        items.emplace_back(std::move(text), isFloat);
        return okStatus();
      }));
      if (anyFloat) {
        std::vector<double> l(items.size());
        for (size_t i = 0; i < items.size(); ++i) {
          std::string err = parseElement(DType::F64, items[i].first, true, &l[i]);
          if (!err.empty()) return errorAt(starts[i], err);
        }
        return AttrValue(std::move(l));
      }
      std::vector<int64_t> l(items.size());
      for (size_t i = 0; i < items.size(); ++i) {
        std::string err = parseElement(DType::I64, items[i].first, false, &l[i]);
        if (!err.empty()) return errorAt(starts[i], err);
      }
      return AttrValue(std::move(l));
    }
    return expected("an attribute value (number, string, list, 'tensor' or 'syms')");
  }

  // tensor-literal := type ('[' element (',' element)* ']' | 'hex' STRING)
  Expected<Tensor> parseTensorLiteral() {
    Token typeTok = cur();
    COIL_TRY(TensorType type, parseType());
    auto shape = type.concreteShape();
    if (!shape) return errorAt(typeTok, "a constant must have a concrete shape, got " + type.str());
    // numel * element size, guarding against overflow (constants are at most 2^40 bytes).
    const uint64_t kMaxBytes = uint64_t(1) << 40;
    uint64_t numel = 1;
    for (int64_t d : *shape) {
      if (d != 0 && numel > kMaxBytes / uint64_t(d))
        return errorAt(typeTok, "constant of type " + type.str() + " is too large");
      numel *= uint64_t(d);
    }
    size_t esize = dtypeSize(type.dtype);
    if (numel * esize > kMaxBytes)
      return errorAt(typeTok, "constant of type " + type.str() + " is too large");
    std::vector<uint8_t> bytes;
    if (isKeyword("hex")) {
      bump();
      Token strTok = cur();
      COIL_TRY(std::string hex, expectString("after 'hex'"));
      if (hex.size() != 2 * numel * esize)
        return errorAt(strTok, "hex data of " + type.str() + " must have " +
                                   std::to_string(2 * numel * esize) + " hex digits, got " +
                                   std::to_string(hex.size()));
      bytes.resize(hex.size() / 2);
      static const auto digit = [](char h) {
        return h >= '0' && h <= '9'   ? h - '0'
               : h >= 'a' && h <= 'f' ? h - 'a' + 10
               : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                      : -1;
      };
      for (size_t i = 0; i < bytes.size(); ++i) {
        int hi = digit(hex[2 * i]), lo = digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
          return errorAt(strTok, "hex data holds a character that is not a hex digit at "
                                 "offset " +
                                     std::to_string(hi < 0 ? 2 * i : 2 * i + 1));
        bytes[i] = uint8_t(hi * 16 + lo);
      }
    } else if (isPunct("[")) {
      Token listTok = cur();
      uint64_t count = 0;
      COIL_TRY_STATUS(parseList("", [&]() -> Status {
        Token start = cur();
        std::string text;
        bool isFloat = false;
        if (isKeyword("true") || isKeyword("false")) {
          text = std::string(cur().text);
          bump();
        } else {
          COIL_TRY_STATUS(parseNumberText(text, isFloat, "as a tensor element"));
        }
        if (++count > numel)
          return errorAt(start, "constant of type " + type.str() + " needs " +
                                    std::to_string(numel) + " elements, got more");
        bytes.resize(bytes.size() + esize);
        std::string err =
            parseElement(type.dtype, text, isFloat, bytes.data() + bytes.size() - esize);
        if (!err.empty()) return errorAt(start, err);
        return okStatus();
      }));
      if (count != numel)
        return errorAt(listTok, "constant of type " + type.str() + " needs " +
                                    std::to_string(numel) + " elements, got " +
                                    std::to_string(count));
    } else {
      return expected("'[' or 'hex'", "after the constant's type");
    }
    return Tensor::fromBytes(type.dtype, *shape, bytes.data(), bytes.size());
  }

  // type := DTYPE '[' (symint (',' symint)*)? ']'
  Expected<TensorType> parseType() {
    if (cur().kind != Tok::Ident) return expected("a type such as 'f32[N, 3]'");
    auto dt = parseDType(cur().text);
    if (!dt) return errorAt(cur(), "unknown dtype '" + std::string(cur().text) + "'");
    bump();
    TensorType t;
    t.dtype = *dt;
    Token listTok = cur();
    COIL_TRY(t.shape, parseSymList("after the dtype"));
    for (const SymInt &d : t.shape)
      if (d.isConstant() && d.constant() < 0)
        return errorAt(listTok, "dimension " + std::to_string(d.constant()) + " of type " +
                                    t.str() + " is negative");
    return t;
  }

  Expected<std::vector<SymInt>> parseSymList(const std::string &context) {
    std::vector<SymInt> l;
    COIL_TRY_STATUS(parseList(context, [&]() -> Status {
      COIL_TRY(SymInt e, parseSum(0));
      l.push_back(std::move(e));
      return okStatus();
    }));
    return l;
  }

  // --- size expressions, with the precedence of SymInt::str():
  //   sum := term (('+' | '-') term)* ; term := unary (('*' | '//' | '%') unary)*
  //   unary := '-' unary | primary
  //   primary := INT | IDENT | STRING | ('min' | 'max') '(' sum (',' sum)+ ')' | '(' sum ')'
  static constexpr int kMaxDepth = 256;
  Error overflow(const Token &t) const {
    return errorAt(t, "size expression overflows 64-bit integers");
  }

  Expected<SymInt> parseSum(int depth) {
    Token start = cur();
    COIL_TRY(SymInt e, parseTerm(depth));
    for (;;) {
      bool add = isPunct("+");
      if (!add && !isPunct("-")) return e;
      Token opTok = cur();
      bump();
      COIL_TRY(SymInt r, parseTerm(depth));
      if (e.isConstant() && r.isConstant()) {
        int64_t v;
        if (add ? __builtin_add_overflow(e.constant(), r.constant(), &v)
                : __builtin_sub_overflow(e.constant(), r.constant(), &v))
          return overflow(opTok);
        e = v;
      } else {
        if (!add && r.isConstant() && r.constant() == INT64_MIN) return overflow(opTok);
        e = add ? e + r : e - r;
      }
    }
  }

  Expected<SymInt> parseTerm(int depth) {
    COIL_TRY(SymInt e, parseUnary(depth));
    for (;;) {
      int op = isPunct("*") ? 0 : isPunct("//") ? 1 : isPunct("%") ? 2 : -1;
      if (op < 0) return e;
      Token opTok = cur();
      bump();
      COIL_TRY(SymInt r, parseUnary(depth));
      if (op > 0 && r.isConstant() && r.constant() == 0)
        return errorAt(opTok, "division by zero in a size expression");
      if (e.isConstant() && r.isConstant()) {
        int64_t a = e.constant(), b = r.constant(), v = 0;
        if (op == 0 && __builtin_mul_overflow(a, b, &v)) return overflow(opTok);
        if (op > 0 && a == INT64_MIN && b == -1) return overflow(opTok);
        e = op == 0 ? v : op == 1 ? floorDivInt(a, b) : floorModInt(a, b);
      } else {
        e = op == 0 ? e * r : op == 1 ? floorDiv(e, r) : floorMod(e, r);
      }
    }
  }

  Expected<SymInt> parseUnary(int depth) {
    if (depth > kMaxDepth) return errorAt(cur(), "size expression is nested too deeply");
    if (isPunct("-")) {
      Token minus = cur();
      bump();
      if (cur().kind == Tok::Int) { // a negative literal, so that INT64_MIN can be written
        int64_t v = 0;
        std::string err = parseElement(DType::I64, "-" + std::string(cur().text), false, &v);
        if (!err.empty()) return errorAt(minus, err);
        bump();
        return SymInt(v);
      }
      COIL_TRY(SymInt e, parseUnary(depth + 1));
      if (e.isConstant() && e.constant() == INT64_MIN) return overflow(minus);
      return -e;
    }
    return parsePrimary(depth);
  }

  Expected<SymInt> parsePrimary(int depth) {
    const Token &t = cur();
    if (t.kind == Tok::Int) {
      int64_t v = 0;
      std::string err = parseElement(DType::I64, t.text, false, &v);
      if (!err.empty()) return errorAt(t, err);
      bump();
      return SymInt(v);
    }
    if (t.kind == Tok::Ident && (t.text == "min" || t.text == "max") &&
        ahead(1).kind == Tok::Punct && ahead(1).text == "(") {
      bool isMin = t.text == "min";
      bump();
      bump();
      COIL_TRY(SymInt e, parseSum(depth + 1));
      int n = 1;
      while (isPunct(",")) {
        bump();
        COIL_TRY(SymInt r, parseSum(depth + 1));
        e = isMin ? min(e, r) : max(e, r);
        ++n;
      }
      if (n < 2)
        return expected("','", std::string("between the operands of ") + (isMin ? "min" : "max"));
      COIL_TRY_STATUS(expectPunct(")", "to close the size expression"));
      return e;
    }
    if (t.kind == Tok::Ident || t.kind == Tok::String) {
      SymInt s = SymInt::symbol(t.kind == Tok::String ? t.str : std::string(t.text));
      bump();
      return s;
    }
    if (isPunct("(")) {
      bump();
      COIL_TRY(SymInt e, parseSum(depth + 1));
      COIL_TRY_STATUS(expectPunct(")", "to close the size expression"));
      return e;
    }
    return expected("a size (a number, a symbol or '(')");
  }

  // --- verification of the parsed graph, reported at the line of the node or value at fault
  Status verify() {
    VerifyFailure where;
    Status st = verifyGraph(g_, opts_.verify, &where);
    if (st.ok()) return st;
    Pos pos{graphTok_.line, graphTok_.col};
    if (where.node >= 0 && size_t(where.node) < nodePos_.size()) {
      pos = nodePos_[size_t(where.node)];
    } else if (where.value >= 0 && size_t(where.value) < g_.numValues()) {
      auto it = defs_.find(g_.value(where.value).name);
      if (it != defs_.end()) pos = it->second;
    }
    return Error::user(st.error().message(), SourceLoc{file_, "", "", pos.line, pos.col});
  }

  std::vector<Token> toks_;
  size_t p_ = 0;
  std::string file_;
  ParseOptions opts_;
  Graph g_;
  Token graphTok_;
  std::map<std::string, Pos> defs_;
  std::vector<Pos> nodePos_;
};

} // namespace

Expected<SymInt> textfmt::parseSymIntText(std::string_view text) {
  return Parser(text, "<size>", ParseOptions{}).runSymInt();
}

Expected<Graph> parseGraph(std::string_view text, const std::string &file,
                           const ParseOptions &opts) {
  return Parser(text, file, opts).run();
}

Expected<Graph> parseGraphFile(const std::string &path, const ParseOptions &opts) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::user("cannot open '" + path + "'", SourceLoc{path});
  std::ostringstream ss;
  ss << in.rdbuf();
  return parseGraph(ss.str(), path, opts);
}

} // namespace coil
