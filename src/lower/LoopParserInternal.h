/// \file Private to the Loop IR text parsers (LoopLexer.cpp: tokens; LoopParser.cpp: the
/// program; sched/ScheduleParser.cpp: a schedule after its program, whose phase bodies are
/// Loop IR statements): the token, the lexer and the program parser, whose rules the schedule
/// parser extends.
#pragma once

#include "ir/Graph.h"
#include "lower/LoopParser.h"
#include "support/Expected.h"
#include "support/TextScanner.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// Internal (hidden: not exported, not interposable).
#pragma GCC visibility push(hidden)

namespace coil::loop::text {

enum class Tok { Eof, Ident, Var, Int, Float, String, Punct, Error };

struct Token {
  Tok kind = Tok::Eof;
  std::string_view text; ///< the source text
  std::string str;       ///< a decoded name (String), or the message of an Error token
  int line = 1, col = 1;
};

/// Lexes on demand, one token at a time; a copy of the lexer looks ahead. A bad character or
/// name is an Error token carrying the message.
class Lexer : scan::TextScanner {
public:
  explicit Lexer(std::string_view s) : TextScanner(s) {}

  Token next();
  /// IONAME (LoopParser.h): a quoted name or a bare word; anything else lexes as usual.
  Token nextName();

private:
  Token start() const {
    Token t;
    t.line = line_;
    t.col = col_;
    return t;
  }
  Token finish(Token t, Tok kind, size_t begin) const {
    t.kind = kind;
    t.text = s_.substr(begin, p_ - begin);
    return t;
  }
  static Token error(Token t, std::string msg) {
    t.kind = Tok::Error;
    t.str = std::move(msg);
    return t;
  }
  Token quoted(Token t);
};

/// Recursive descent over the grammar of LoopParser.h, one function per rule; every problem is a
/// user error at file:line:column. run() parses a whole program; a derived parser may call
/// parseProgram() (with `stopAt_`), verify() and the rules for pieces, then go on.
class Parser : scan::SizeExprRules<Parser, Token> {
  friend class scan::SizeExprRules<Parser, Token>;

public:
  Parser(std::string_view text, std::string file)
      : lex_(text), file_(std::move(file)), g_(std::make_unique<Graph>()) {
    cur_ = lex_.next();
    p_.graph = g_.get();
  }

  Expected<ParsedLoopProgram> run() {
    COIL_TRY_STATUS(parseProgram());
    COIL_TRY_STATUS(verify());
    g_->symbols = p_.symbols;
    ParsedLoopProgram r;
    r.graph = std::move(g_);
    r.program = std::move(p_);
    return r;
  }

protected:
  // --- tokens
  const Token &cur() const { return cur_; }
  void bump() { cur_ = lex_.next(); }
  Token peekNext() const {
    Lexer copy = lex_;
    return copy.next();
  }
  bool isPunct(std::string_view p) const { return cur_.kind == Tok::Punct && cur_.text == p; }
  bool isKeyword(std::string_view k) const { return cur_.kind == Tok::Ident && cur_.text == k; }
  /// Keyword `k` where a node (IDENT ':') may start as well.
  bool atKeyword(std::string_view k) const {
    if (!isKeyword(k)) return false;
    Token n = peekNext();
    return !(n.kind == Tok::Punct && n.text == ":");
  }

  Error errorAt(const Token &t, const std::string &msg) const {
    return Error::user(t.kind == Tok::Error ? t.str : msg, SourceLoc{file_, "", "", t.line, t.col});
  }
  static std::string describe(const Token &t) {
    if (t.kind == Tok::Eof) return "end of input";
    return "'" + std::string(t.text) + "'";
  }
  /// "expected WHAT CONTEXT, got X" at the current token.
  Error expected(const std::string &what, const std::string &context = "") const {
    return errorAt(cur_, "expected " + what + (context.empty() ? "" : " " + context) + ", got " +
                             describe(cur_));
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

  // --- the program (the grammar rules of LoopParser.h)
  Status parseProgram();
  Status parseSymbols();
  Status parseNode();
  Status parseNodeKind(Node &n);
  Status parseLeaf(Node &n, bool constant);
  Status parseElements(const Node &n, const std::string &name, Tensor &t);
  Expected<PointwiseNode> parsePointwise();
  Expected<ReductionNode> parseReduce();
  Expected<ReduceKind> parseReduceKind();
  Expected<ExternNode> parseExtern();
  Expected<ExternArg> parseExternArg();
  Expected<MultiOutputNode> parseMultiOutput();
  /// '(' (VAR (',' VAR)*)? ')', each VAR followed by '<' symint when `ranges` is given
  /// (`rangeContext` says where, in the error for a missing '<').
  Status parseVars(std::vector<std::string> &vars, std::vector<SymInt> *ranges,
                   const std::string &context,
                   const std::string &rangeContext = "after a reduced variable");
  Status parseBody(Body &b);
  Status parseStmt(Body &b);
  Status parseStmtOperands(Stmt &s, const Body &b, const std::string &kind);
  Status parseIndirect(Stmt &s, const Body &b);
  Status parseIo();

  // --- pieces
  Expected<NodeId> parseNodeRef(const std::string &context);
  Error undefinedNode(const Token &t) const;
  Expected<Val> parseVal(size_t defined, const std::string &context);
  Expected<DType> parseDType(const std::string &context);
  Expected<TensorType> parseType(const std::string &context);
  Expected<std::vector<SymInt>> parseSymList(const std::string &context);
  Expected<std::string> parseVar(const std::string &context);
  Expected<std::string> parseNumberText(const std::string &context, bool *isFloat);
  Expected<double> parseDouble(const std::string &context);
  Status parseConstValue(Stmt &s);

  // --- what the size-expression rules (support/TextScanner.h) ask of the parser
  bool nextIsPunct(std::string_view p) const {
    Token n = peekNext();
    return n.kind == Tok::Punct && n.text == p;
  }
  static std::optional<std::string> sizeSymbol(const Token &t) {
    if (t.kind == Tok::Var) return std::string(t.text);
    return std::nullopt;
  }
  static const char *sizeWhat() { return "a size (a number, a symbol, a loop variable or '(')"; }
  static Expected<bool> gluedOperand(SymInt &) { return false; }

  /// The verifier on the parsed program, its failures located at the node at fault.
  Status verify();

  Lexer lex_;
  Token cur_;
  std::string file_;
  std::unique_ptr<Graph> g_;
  LoopProgram p_;
  std::map<std::string, NodeId> nodeIds_;
  std::vector<Token> nodeToks_; ///< the name token of each node
  Token ioTok_;                 ///< the first program input or output line
  /// parseProgram() stops before this keyword (where a node may not start), when set: the
  /// schedule text (sched/ScheduleParser.h) continues after the program.
  std::string stopAt_;
};

} // namespace coil::loop::text

#pragma GCC visibility pop
