/// \file Private to the `.coil` text parser (Lexer.cpp: tokens; Parser.cpp: the graph, its
/// statements and nodes; ParserLiterals.cpp: attribute values, tensor literals, types and size
/// expressions): the token, the lexer and the recursive-descent parser.
#pragma once

#include "ir/Parser.h"
#include "ir/TextFormatUtil.h"
#include "support/TextScanner.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

// Internal (hidden: not exported, not interposable).
#pragma GCC visibility push(hidden)

namespace coil::textfmt {

enum class Tok { Eof, Ident, ValueName, GlobalName, Int, Float, String, Punct, Error };

struct Token {
  Tok kind = Tok::Eof;
  std::string_view text; ///< the source text (punctuation, identifiers, numbers)
  std::string str;       ///< decoded contents of strings and quoted names; the error message
  int line = 1;
  int col = 1;
};

class Lexer : scan::TextScanner {
public:
  explicit Lexer(std::string_view s) : TextScanner(s) {
    if (s_.substr(0, 3) == "\xEF\xBB\xBF") p_ = 3; // a UTF-8 byte order mark
  }

  std::vector<Token> run();

private:
  Token error(Token t, std::string msg);
  /// Reads a quoted string starting at '"' into t.str.
  bool readString(Token &t);
  Token next();
};

struct Pos {
  int line = 0, col = 0;
};

class Parser : scan::SizeExprRules<Parser, Token> {
  friend class scan::SizeExprRules<Parser, Token>;

public:
  Parser(std::string_view text, std::string file, const ParseOptions &opts)
      : file_(std::move(file)), opts_(opts) {
    toks_ = Lexer(text).run();
  }

  Expected<Graph> run();
  /// The whole text as one size expression.
  Expected<SymInt> runSymInt();

private:
  // --- tokens
  const Token &cur() const { return toks_[p_]; }
  const Token &ahead(size_t k) const { return toks_[std::min(p_ + k, toks_.size() - 1)]; }
  void bump();
  bool isPunct(std::string_view p) const { return cur().kind == Tok::Punct && cur().text == p; }
  bool isKeyword(std::string_view k) const { return cur().kind == Tok::Ident && cur().text == k; }

  SourceLoc locOf(const Token &t) const { return SourceLoc{file_, "", "", t.line, t.col}; }
  Error errorAt(const Token &t, const std::string &msg) const;
  static std::string describe(const Token &t);
  Error expected(const std::string &what, const std::string &context = "") const;
  Status expectPunct(std::string_view p, const std::string &context);
  Status expectKeyword(std::string_view k, const std::string &context);
  Expected<std::string> expectString(const std::string &context);
  static std::string valueText(const std::string &name);

  // --- the graph, its statements and nodes (Parser.cpp)
  Status parseGraph();
  Status defineCheck(const Token &t);
  void recordDef(const Token &t) { defs_[t.str] = Pos{t.line, t.col}; }
  Status parseParam();
  Status parseStatement();
  Status parseSymbolDecl();
  Status parseConstant(const Token &nameTok);
  Status parseSymConst(const Token &nameTok);
  Status parseNode(const std::vector<Token> &outs);
  Expected<ValueId> resolveUse(const Token &t);
  Status parseAttrs(Attrs &attrs);

  // --- numbers, attribute values, tensor literals, types, size expressions (ParserLiterals.cpp)
  bool atNumber() const;
  Status parseNumberText(std::string &text, bool &isFloat, const std::string &context);
  Expected<int64_t> parseInt64(const std::string &context);
  Expected<double> parseDouble(const std::string &context);

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

  Expected<AttrValue> parseAttrValue();
  Expected<Tensor> parseTensorLiteral();
  Expected<TensorType> parseType();
  Expected<std::vector<SymInt>> parseSymList(const std::string &context);

  // --- what the size-expression rules (support/TextScanner.h) ask of the parser
  bool nextIsPunct(std::string_view p) const {
    return ahead(1).kind == Tok::Punct && ahead(1).text == p;
  }
  std::optional<std::string> sizeSymbol(const Token &t) const {
    if (t.kind == Tok::String) return t.str;
    return std::nullopt;
  }
  static const char *sizeWhat() { return "a size (a number, a symbol or '(')"; }
  Expected<bool> gluedOperand(SymInt &operand);

  // --- verification of the parsed graph (Parser.cpp)
  Status verify();

  std::vector<Token> toks_;
  size_t p_ = 0;
  std::string file_;
  ParseOptions opts_;
  Graph g_;
  Token graphTok_;
  std::map<std::string, Pos> defs_;
  std::vector<Pos> nodePos_;
};

} // namespace coil::textfmt

#pragma GCC visibility pop
