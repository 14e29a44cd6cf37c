// The `.coil` text parser: a lexer over the whole text (Lexer.cpp), then recursive descent (one
// function per rule of the grammar in Printer.h): the graph, its statements and nodes here;
// numbers, attribute values, tensor literals, types and size expressions in ParserLiterals.cpp.
// Every problem is a user error at file:line:column.
#include "ir/Parser.h"

#include "ir/ParserInternal.h"
#include "ir/Printer.h"

#include <fstream>
#include <sstream>

namespace coil {

namespace textfmt {

Expected<Graph> Parser::run() {
  COIL_TRY_STATUS(parseGraph());
  COIL_TRY_STATUS(verify());
  return std::move(g_);
}

Expected<SymInt> Parser::runSymInt() {
  COIL_TRY(SymInt e, parseSize());
  if (cur().kind != Tok::Eof) return expected("end of the size expression");
  return e;
}

void Parser::bump() {
  if (p_ + 1 < toks_.size()) ++p_;
}

Error Parser::errorAt(const Token &t, const std::string &msg) const {
  if (t.kind == Tok::Error) return Error::user(t.str, locOf(t));
  return Error::user(msg, locOf(t));
}

std::string Parser::describe(const Token &t) {
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
Error Parser::expected(const std::string &what, const std::string &context) const {
  return errorAt(cur(), "expected " + what + (context.empty() ? "" : " " + context) + ", got " +
                            describe(cur()));
}

Status Parser::expectPunct(std::string_view p, const std::string &context) {
  if (!isPunct(p)) return expected("'" + std::string(p) + "'", context);
  bump();
  return okStatus();
}

Status Parser::expectKeyword(std::string_view k, const std::string &context) {
  if (!isKeyword(k)) return expected("'" + std::string(k) + "'", context);
  bump();
  return okStatus();
}

Expected<std::string> Parser::expectString(const std::string &context) {
  if (cur().kind != Tok::String) return expected("a string", context);
  std::string s = cur().str;
  bump();
  return s;
}

std::string Parser::valueText(const std::string &name) {
  std::string s;
  appendName(s, '%', name);
  return s;
}

// --- graph := 'graph' GLOBAL '(' params? ')' '->' '(' results? ')' '{' stmt* '}'
Status Parser::parseGraph() {
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

Status Parser::defineCheck(const Token &t) {
  auto it = defs_.find(t.str);
  if (it != defs_.end())
    return errorAt(t, "value " + valueText(t.str) + " is already defined at line " +
                          std::to_string(it->second.line));
  return okStatus();
}

// param := VALUE ':' type
Status Parser::parseParam() {
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
Status Parser::parseStatement() {
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
Status Parser::parseSymbolDecl() {
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
    COIL_TRY(range, parseSymbolRange(name));
  }
  g_.symbols[name] = range;
  return okStatus();
}

// constant := VALUE '=' 'constant' tensor-literal
Status Parser::parseConstant(const Token &nameTok) {
  bump();
  COIL_TRY_STATUS(defineCheck(nameTok));
  COIL_TRY(Tensor t, parseTensorLiteral());
  recordDef(nameTok);
  g_.addConstant(nameTok.str, std::move(t));
  return okStatus();
}

// symconst := VALUE '=' 'symconst' type '[' symint (',' symint)* ']'
Status Parser::parseSymConst(const Token &nameTok) {
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
Status Parser::parseNode(const std::vector<Token> &outs) {
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
Expected<ValueId> Parser::resolveUse(const Token &t) {
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
Status Parser::parseAttrs(Attrs &attrs) {
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

// --- verification of the parsed graph, reported at the line of the node or value at fault
Status Parser::verify() {
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
  SourceLoc loc{file_, "", "", pos.line, pos.col};
  if (where.inferenceBug) return Error::internal(st.error().message(), loc);
  return Error::user(st.error().message(), loc);
}

} // namespace textfmt

Expected<SymInt> textfmt::parseSymIntText(std::string_view text) {
  return Parser(text, "<size>", ParseOptions{}).runSymInt();
}

Expected<Graph> parseGraph(std::string_view text, const std::string &file,
                           const ParseOptions &opts) {
  return textfmt::Parser(text, file, opts).run();
}

Expected<Graph> parseGraphFile(const std::string &path, const ParseOptions &opts) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::user("cannot open '" + path + "'", SourceLoc{path});
  std::ostringstream ss;
  ss << in.rdbuf();
  return parseGraph(ss.str(), path, opts);
}

} // namespace coil
