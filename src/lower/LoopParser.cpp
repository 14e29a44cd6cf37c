// The Loop IR text parser (grammar in LoopParser.h): recursive descent, one function per rule,
// over a lexer that lexes one token ahead (LoopLexer.cpp; a program input or output name is
// lexed as a word of its own). Every problem is a user error at file:line:column.
#include "lower/LoopParser.h"

#include "ir/TextFormatUtil.h"
#include "lower/LoopParserInternal.h"
#include "lower/LoopVerify.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>

namespace coil::loop {
namespace {

std::optional<ScalarOp> scalarOpFromName(std::string_view name) {
  static const std::map<std::string, ScalarOp, std::less<>> kOps = [] {
    std::map<std::string, ScalarOp, std::less<>> m;
#define COIL_SCALAR_OP_ENTRY(E, A)                                                                 \
  {                                                                                                \
    std::string s = #E;                                                                            \
    for (char &c : s) c = char(std::tolower(static_cast<unsigned char>(c)));                       \
    m[s] = ScalarOp::E;                                                                            \
  }
    COIL_FOR_EACH_SCALAR_OP(COIL_SCALAR_OP_ENTRY)
#undef COIL_SCALAR_OP_ENTRY
    return m;
  }();
  auto it = kOps.find(name);
  if (it == kOps.end()) return std::nullopt;
  return it->second;
}

std::optional<ReduceKind> reduceKindFromName(std::string_view name) {
  for (int k = 0; k <= int(ReduceKind::All); ++k)
    if (name == reduceKindName(ReduceKind(k))) return ReduceKind(k);
  return std::nullopt;
}

} // namespace

namespace text {

// program := ('symbols' symdecl (',' symdecl)*)? node* io*
Status Parser::parseProgram() {
  if (atKeyword("symbols")) COIL_TRY_STATUS(parseSymbols());
  while (cur_.kind != Tok::Eof) {
    if (!stopAt_.empty() && atKeyword(stopAt_)) break;
    if (atKeyword("input") || atKeyword("output")) {
      COIL_TRY_STATUS(parseIo());
    } else if (cur_.kind == Tok::Ident && ioTok_.kind == Tok::Eof) { // no io line yet
      COIL_TRY_STATUS(parseNode());
    } else if (cur_.kind == Tok::Ident) {
      return errorAt(cur_, "node '" + std::string(cur_.text) +
                               "' comes after the program's inputs and outputs");
    } else {
      return expected("a node ('NAME: TYPE = ...'), 'input' or 'output'");
    }
  }
  ioTok_ = ioTok_.kind == Tok::Eof ? cur_ : ioTok_;
  return okStatus();
}

// symbols := 'symbols' symdecl (',' symdecl)* ;  symdecl := IDENT 'in' '[' int ',' int ']'
Status Parser::parseSymbols() {
  bump();
  for (;;) {
    Token nameTok = cur_;
    if (cur_.kind != Tok::Ident) return expected("a symbol name", "in 'symbols'");
    std::string name(cur_.text);
    if (p_.symbols.count(name)) return errorAt(nameTok, "symbol '" + name + "' is declared twice");
    bump();
    COIL_TRY_STATUS(expectKeyword("in", "after the symbol name"));
    COIL_TRY(SymRange r, parseSymbolRange(name));
    p_.symbols[name] = r;
    if (!isPunct(",")) return okStatus();
    bump();
  }
}

// node := IDENT ':' type '=' node-kind
Status Parser::parseNode() {
  Token nameTok = cur_;
  Node n;
  n.name = std::string(cur_.text);
  n.loc = SourceLoc{file_, "", "", cur_.line, cur_.col};
  if (auto it = nodeIds_.find(n.name); it != nodeIds_.end())
    return errorAt(nameTok, "node '" + n.name + "' is already defined at line " +
                                std::to_string(nodeToks_[size_t(it->second)].line));
  bump();
  COIL_TRY_STATUS(expectPunct(":", "after the node name"));
  COIL_TRY(TensorType type, parseType("as the node's type"));
  n.dtype = type.dtype;
  n.shape = std::move(type.shape);
  COIL_TRY_STATUS(expectPunct("=", "after the node's type"));
  COIL_TRY_STATUS(parseNodeKind(n));
  nodeIds_[n.name] = NodeId(p_.nodes.size());
  nodeToks_.push_back(nameTok);
  p_.add(std::move(n));
  return okStatus();
}

Status Parser::parseNodeKind(Node &n) {
  if (cur_.kind != Tok::Ident)
    return expected("a node kind (input, constant, pointwise, reduce, extern or output)",
                    "after '='");
  std::string kind(cur_.text);
  if (kind == "input" || kind == "constant") return parseLeaf(n, kind == "constant");
  if (kind == "pointwise") {
    COIL_TRY(n.kind, parsePointwise());
  } else if (kind == "reduce") {
    COIL_TRY(n.kind, parseReduce());
  } else if (kind == "extern") {
    COIL_TRY(n.kind, parseExtern());
  } else if (kind == "output") {
    COIL_TRY(n.kind, parseMultiOutput());
  } else {
    return errorAt(cur_, "unknown node kind '" + kind +
                             "' (input, constant, pointwise, reduce, extern or output)");
  }
  return okStatus();
}

// 'input' NAME? | 'constant' (NAME ('[' (elem (',' elem)*)? ']')?)?
Status Parser::parseLeaf(Node &n, bool constant) {
  bump();
  ValueId v = kNoValue;
  if (cur_.kind == Tok::String) {
    Token nameTok = cur_;
    std::string name = cur_.str;
    bump();
    TensorType type{n.dtype, n.shape};
    ValueKind kind = constant ? ValueKind::Constant : ValueKind::Input;
    if (std::optional<ValueId> old = g_->findValue(name)) {
      if (g_->value(*old).kind != kind)
        return errorAt(nameTok, "graph value '" + name + "' is named by both an input and a " +
                                    "constant node");
      v = *old;
      if (isPunct("["))
        return errorAt(cur_,
                       "the elements of constant '" + name + "' are listed by its first node only");
    } else if (!constant) {
      v = g_->addInput(name, std::move(type));
    } else if (isPunct("[")) {
      Tensor t;
      COIL_TRY_STATUS(parseElements(n, name, t));
      v = g_->addConstant(name, std::move(t));
    } else {
      v = g_->addValue(name, std::move(type), ValueKind::Constant); // its data is not in the text
    }
  }
  if (constant)
    n.kind = ConstantNode{v};
  else
    n.kind = InputNode{v};
  return okStatus();
}

Status Parser::parseElements(const Node &n, const std::string &name, Tensor &t) {
  Token open = cur_;
  TensorType type{n.dtype, n.shape};
  std::optional<Shape> shape = type.concreteShape();
  if (!shape)
    return errorAt(open, "constant '" + name + "' lists elements but its shape " + type.str() +
                             " is not static");
  t = Tensor(n.dtype, *shape);
  bump();
  int64_t count = 0;
  auto *data = static_cast<char *>(t.data());
  while (!isPunct("]")) {
    if (count > 0) COIL_TRY_STATUS(expectPunct(",", "or ']' after an element"));
    Token elemTok = cur_;
    bool isFloat = false;
    COIL_TRY(std::string text,
             parseNumberText("as an element of constant '" + name + "'", &isFloat));
    if (count >= t.numel())
      return errorAt(elemTok, "constant '" + name + "' of type " + type.str() + " has " +
                                  std::to_string(t.numel()) + " elements, the text lists more");
    std::string err =
        textfmt::parseElement(n.dtype, text, isFloat, data + size_t(count) * dtypeSize(n.dtype));
    if (!err.empty()) return errorAt(elemTok, err);
    ++count;
  }
  if (count != t.numel())
    return errorAt(cur_, "constant '" + name + "' of type " + type.str() + " has " +
                             std::to_string(t.numel()) + " elements, the text lists " +
                             std::to_string(count));
  bump();
  return okStatus();
}

// 'pointwise' '(' vars? ')' stmt* 'result' VAL
Expected<PointwiseNode> Parser::parsePointwise() {
  bump();
  PointwiseNode pw;
  COIL_TRY_STATUS(parseVars(pw.vars, nullptr, "of the pointwise node"));
  COIL_TRY_STATUS(parseBody(pw.body));
  if (!atKeyword("result")) return expected("a statement or 'result'", "in a pointwise node");
  bump();
  COIL_TRY(pw.result, parseVal(pw.body.stmts.size(), "as the result"));
  return pw;
}

// 'reduce' REDUCE DTYPE 'last'? '(' vars? ')' 'over' '(' rvars? ')' stmt*
//   'value' VAL ('position' VAL)?
Expected<ReductionNode> Parser::parseReduce() {
  bump();
  ReductionNode r;
  COIL_TRY(r.kind, parseReduceKind());
  COIL_TRY(r.accDType, parseDType("as the accumulation type"));
  if (isKeyword("last")) {
    r.selectLast = true;
    bump();
  }
  COIL_TRY_STATUS(parseVars(r.vars, nullptr, "of the reduction's outer point"));
  COIL_TRY_STATUS(expectKeyword("over", "after the reduction's outer variables"));
  COIL_TRY_STATUS(parseVars(r.rvars, &r.rranges, "of the reduced point"));
  COIL_TRY_STATUS(parseBody(r.body));
  if (!atKeyword("value")) return expected("a statement or 'value'", "in a reduction");
  bump();
  COIL_TRY(r.value, parseVal(r.body.stmts.size(), "as the folded value"));
  if (atKeyword("position")) {
    bump();
    COIL_TRY(r.position, parseVal(r.body.stmts.size(), "as the position"));
  }
  return r;
}

// REDUCE: sum, prod, max, min, argmax, argmin, any or all
Expected<ReduceKind> Parser::parseReduceKind() {
  if (cur_.kind != Tok::Ident) return expected("a reduction kind", "after 'reduce'");
  std::optional<ReduceKind> kind = reduceKindFromName(cur_.text);
  if (!kind)
    return errorAt(cur_, "unknown reduction kind '" + std::string(cur_.text) +
                             "' (sum, prod, max, min, argmax, argmin, any or all)");
  bump();
  return *kind;
}

// '(' (VAR (',' VAR)*)? ')', each VAR followed by '<' symint when `ranges` is given
Status Parser::parseVars(std::vector<std::string> &vars, std::vector<SymInt> *ranges,
                         const std::string &context, const std::string &rangeContext) {
  COIL_TRY_STATUS(expectPunct("(", "before the loop variables " + context));
  while (!isPunct(")")) {
    if (!vars.empty()) COIL_TRY_STATUS(expectPunct(",", "or ')' after a loop variable"));
    COIL_TRY(std::string v, parseVar("as a loop variable " + context));
    vars.push_back(std::move(v));
    if (ranges) {
      COIL_TRY_STATUS(expectPunct("<", rangeContext));
      COIL_TRY(SymInt e, parseSize());
      ranges->push_back(std::move(e));
    }
  }
  bump();
  return okStatus();
}

// 'extern' IDENT '(' (arg (',' arg)*)? ')' 'allocates'? ('out' INT ':' type)*
Expected<ExternNode> Parser::parseExtern() {
  bump();
  ExternNode ex;
  if (cur_.kind != Tok::Ident) return expected("the extern function's name", "after 'extern'");
  ex.function = std::string(cur_.text);
  bump();
  COIL_TRY_STATUS(expectPunct("(", "after the extern function's name"));
  while (!isPunct(")")) {
    if (!ex.args.empty()) COIL_TRY_STATUS(expectPunct(",", "or ')' after an extern argument"));
    COIL_TRY(ExternArg a, parseExternArg());
    ex.args.push_back(std::move(a));
  }
  bump();
  if (atKeyword("allocates")) {
    ex.allocates = true;
    bump();
  }
  while (isKeyword("out") && peekNext().kind == Tok::Int) {
    bump();
    Token indexTok = cur_;
    COIL_TRY(int64_t k, parseIntLiteral("as the output's index"));
    if (k != int64_t(ex.outputs.size()))
      return errorAt(indexTok, "expected output " + std::to_string(ex.outputs.size()) +
                                   " (outputs are listed in order), got output " +
                                   std::to_string(k));
    COIL_TRY_STATUS(expectPunct(":", "after the output's index"));
    COIL_TRY(TensorType t, parseType("as the output's type"));
    ex.outputs.push_back(std::move(t));
  }
  return ex;
}

// arg := IDENT | 'out' INT | 'int' symint | 'float' num | 'outsym' IDENT
Expected<ExternArg> Parser::parseExternArg() {
  ExternArg a;
  if (cur_.kind != Tok::Ident)
    return expected("an extern argument (a node, out, int, float or outsym)");
  Token next = peekNext();
  bool plainName = next.kind == Tok::Punct && (next.text == "," || next.text == ")");
  if (plainName ||
      !(isKeyword("out") || isKeyword("int") || isKeyword("float") || isKeyword("outsym"))) {
    a.kind = ExternArg::Kind::Node;
    COIL_TRY(a.node, parseNodeRef("as an extern argument"));
    return a;
  }
  std::string kw(cur_.text);
  bump();
  if (kw == "out") {
    a.kind = ExternArg::Kind::Output;
    Token indexTok = cur_;
    COIL_TRY(int64_t k, parseIntLiteral("as the index of an 'out' argument"));
    if (k < 0 || k > INT32_MAX)
      return errorAt(indexTok, "output index " + std::to_string(k) + " is out of range");
    a.index = int32_t(k);
  } else if (kw == "int") {
    a.kind = ExternArg::Kind::Int;
    COIL_TRY(a.sym, parseSize());
  } else if (kw == "float") {
    a.kind = ExternArg::Kind::Float;
    COIL_TRY(a.number, parseDouble("after 'float'"));
  } else {
    a.kind = ExternArg::Kind::OutSymbol;
    if (cur_.kind != Tok::Ident) return expected("a size symbol", "after 'outsym'");
    a.symbol = std::string(cur_.text);
    bump();
  }
  return a;
}

// 'output' INT 'of' IDENT
Expected<MultiOutputNode> Parser::parseMultiOutput() {
  bump();
  MultiOutputNode m;
  Token indexTok = cur_;
  COIL_TRY(int64_t k, parseIntLiteral("as the extern output's index"));
  if (k < 0 || k > INT32_MAX)
    return errorAt(indexTok, "output index " + std::to_string(k) + " is out of range");
  m.index = int32_t(k);
  COIL_TRY_STATUS(expectKeyword("of", "after the extern output's index"));
  COIL_TRY(m.source, parseNodeRef("as the extern node"));
  return m;
}

Status Parser::parseBody(Body &b) {
  while (cur_.kind == Tok::Var) COIL_TRY_STATUS(parseStmt(b));
  return okStatus();
}

// stmt := VAL '=' ( 'load' ... | 'const' ... | 'index' ... | OP ... | 'cast' ... | 'bitcast' ...
//                 | 'indirect' ... | 'accumulator' ... )
Status Parser::parseStmt(Body &b) {
  std::string want = "%" + std::to_string(b.stmts.size());
  if (cur_.text != want)
    return expected("'" + want + "'", "(the statements of a body are numbered in order)");
  bump();
  COIL_TRY_STATUS(expectPunct("=", "after '" + want + "'"));
  Token kindTok = cur_;
  std::string kind(cur_.kind == Tok::Ident ? cur_.text : "");
  std::optional<ScalarOp> op = scalarOpFromName(kind);
  static const char *kKinds[] = {"load",    "const",    "index",      "cast",
                                 "bitcast", "indirect", "accumulator"};
  if (!op && std::find(std::begin(kKinds), std::end(kKinds), kind) == std::end(kKinds)) {
    if (cur_.kind != Tok::Ident)
      return expected("a statement (load, const, index, cast, bitcast, indirect, accumulator or "
                      "a scalar op)",
                      "after '='");
    return errorAt(kindTok, "unknown statement or scalar op '" + kind + "'");
  }
  bump();
  Stmt s;
  if (kind == "indirect") {
    COIL_TRY_STATUS(parseIndirect(s, b));
    b.add(std::move(s));
    return okStatus();
  }
  COIL_TRY(s.dtype, parseDType("after '" + kind + "'"));
  if (op) {
    s.kind = Stmt::Kind::Op;
    s.op = *op;
  }
  COIL_TRY_STATUS(parseStmtOperands(s, b, kind));
  b.add(std::move(s));
  return okStatus();
}

/// What follows `KIND DTYPE` in a statement other than 'indirect'.
Status Parser::parseStmtOperands(Stmt &s, const Body &b, const std::string &kind) {
  size_t defined = b.stmts.size();
  if (s.kind == Stmt::Kind::Op) {
    Token first = cur_;
    do {
      if (!s.args.empty()) bump();
      COIL_TRY(Val v, parseVal(defined, "as an operand of " + kind));
      s.args.push_back(v);
    } while (isPunct(","));
    if (int(s.args.size()) != scalarOpArity(s.op))
      return errorAt(first, kind + " takes " + std::to_string(scalarOpArity(s.op)) +
                                " operands, got " + std::to_string(s.args.size()));
  } else if (kind == "load") {
    s.kind = Stmt::Kind::Load;
    COIL_TRY(s.node, parseNodeRef("as the node loaded"));
    COIL_TRY(s.index, parseSymList("as the load's index"));
  } else if (kind == "const") {
    s.kind = Stmt::Kind::Constant;
    COIL_TRY_STATUS(parseConstValue(s));
  } else if (kind == "index") {
    s.kind = Stmt::Kind::Index;
    COIL_TRY(s.expr, parseSize());
  } else if (kind == "cast" || kind == "bitcast") {
    s.kind = kind == "cast" ? Stmt::Kind::Cast : Stmt::Kind::BitCast;
    COIL_TRY(Val v, parseVal(defined, "as the operand of " + kind));
    s.args.push_back(v);
  } else { // accumulator
    s.kind = Stmt::Kind::Accumulator;
    COIL_TRY_STATUS(expectKeyword("phase", "after the accumulator's type"));
    COIL_TRY(int64_t phase, parseIntLiteral("as the accumulator's phase"));
    COIL_TRY_STATUS(expectKeyword("slot", "after the accumulator's phase"));
    COIL_TRY(int64_t slot, parseIntLiteral("as the accumulator's slot"));
    if (phase < 0 || phase > INT32_MAX || slot < 0 || slot > INT32_MAX)
      return expected("a phase and slot in [0, 2^31)", "in an accumulator");
    s.phase = int32_t(phase);
    s.slot = int32_t(slot);
  }
  return okStatus();
}

// 'indirect' VAR '=' VAL 'in' '[' '0' ',' symint ')' 'wrap'?
Status Parser::parseIndirect(Stmt &s, const Body &b) {
  s.kind = Stmt::Kind::IndirectIndex;
  s.dtype = DType::I64;
  COIL_TRY(s.symbol, parseVar("as the symbol an indirect index defines"));
  COIL_TRY_STATUS(expectPunct("=", "after the indirect index's symbol"));
  COIL_TRY(Val v, parseVal(b.stmts.size(), "as the indirect index's value"));
  s.args.push_back(v);
  COIL_TRY_STATUS(expectKeyword("in", "after the indirect index's value"));
  COIL_TRY_STATUS(expectPunct("[", "before the indirect index's range"));
  if (!(cur_.kind == Tok::Int && cur_.text == "0"))
    return expected("0", "as the start of the indirect index's range");
  bump();
  COIL_TRY_STATUS(expectPunct(",", "after the start of the indirect index's range"));
  COIL_TRY(s.extent, parseSize());
  COIL_TRY_STATUS(expectPunct(")", "after the indirect index's extent"));
  s.wrapNegative = isKeyword("wrap");
  if (s.wrapNegative) bump();
  return okStatus();
}

// const := 'const' DTYPE num: exact integers for integer dtypes (u64 up to 2^64 - 1)
Status Parser::parseConstValue(Stmt &s) {
  if (isFloat(s.dtype)) {
    COIL_TRY(s.number, parseDouble("as the constant"));
    return okStatus();
  }
  Token t = cur_;
  bool isFloatText = false;
  COIL_TRY(std::string text, parseNumberText("as the constant", &isFloatText));
  const char *b = text.data(), *e = b + text.size();
  std::from_chars_result r{};
  if (s.dtype == DType::U64 && text[0] != '-') {
    uint64_t u = 0;
    r = std::from_chars(b, e, u);
    s.intNumber = int64_t(u);
  } else {
    r = std::from_chars(b, e, s.intNumber);
  }
  if (isFloatText || r.ec != std::errc() || r.ptr != e)
    return errorAt(t, "expected an integer for a constant of type " +
                          std::string(dtypeName(s.dtype)) + ", got '" + text + "'");
  s.isInt = true;
  s.number = double(s.intNumber);
  return okStatus();
}

// io := ('input' | 'output') IONAME '=' IDENT
Status Parser::parseIo() {
  if (ioTok_.kind == Tok::Eof) ioTok_ = cur_;
  bool input = isKeyword("input");
  std::string what = input ? "program input" : "program output";
  cur_ = lex_.nextName();
  if (cur_.kind != Tok::String) return expected("the " + what + "'s name");
  std::string name = cur_.str;
  bump();
  COIL_TRY_STATUS(expectPunct("=", "after the " + what + "'s name"));
  COIL_TRY(NodeId n, parseNodeRef("as the " + what + "'s node"));
  (input ? p_.inputs : p_.outputs).push_back(n);
  (input ? p_.inputNames : p_.outputNames).push_back(std::move(name));
  return okStatus();
}

// --- pieces

Expected<NodeId> Parser::parseNodeRef(const std::string &context) {
  if (cur_.kind != Tok::Ident) return expected("a node name", context);
  auto it = nodeIds_.find(std::string(cur_.text));
  if (it == nodeIds_.end()) return undefinedNode(cur_);
  bump();
  return it->second;
}

/// A use of a node that no earlier line defines: say where it is defined, if it is.
Error Parser::undefinedNode(const Token &t) const {
  Lexer ahead = lex_;
  Token prev = cur_;
  for (Token k = ahead.next(); k.kind != Tok::Eof && k.kind != Tok::Error;
       prev = std::move(k), k = ahead.next())
    if (prev.kind == Tok::Ident && prev.text == t.text && k.kind == Tok::Punct && k.text == ":")
      return errorAt(t, "node '" + std::string(t.text) +
                            "' is used before its definition at line " + std::to_string(prev.line));
  return errorAt(t, "node '" + std::string(t.text) + "' is not defined");
}

/// VAL: '%' DIGITS naming one of the first `defined` statements.
Expected<Val> Parser::parseVal(size_t defined, const std::string &context) {
  if (cur_.kind != Tok::Var) return expected("a value ('%N')", context);
  std::string_view digits = cur_.text.substr(1);
  uint64_t v = 0;
  auto r = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (r.ec != std::errc() || r.ptr != digits.data() + digits.size())
    return expected("a value ('%N')", context);
  if (v >= defined) {
    std::string before = defined == 0   ? "no statement precedes it"
                         : defined == 1 ? "only %0 precedes it"
                                        : "%0 to %" + std::to_string(defined - 1) + " precede it";
    return errorAt(cur_, "value " + std::string(cur_.text) + " is not defined before its use (" +
                             before + ")");
  }
  bump();
  return Val(v);
}

Expected<DType> Parser::parseDType(const std::string &context) {
  std::optional<DType> t;
  if (cur_.kind == Tok::Ident) t = coil::parseDType(cur_.text);
  if (!t) return expected("a dtype (f32, i64, bool, ...)", context);
  bump();
  return *t;
}

// type := DTYPE '[' (symint (',' symint)*)? ']'
Expected<TensorType> Parser::parseType(const std::string &context) {
  TensorType t;
  COIL_TRY(t.dtype, parseDType(context));
  COIL_TRY(t.shape, parseSymList("as the shape"));
  return t;
}

Expected<std::vector<SymInt>> Parser::parseSymList(const std::string &context) {
  COIL_TRY_STATUS(expectPunct("[", context));
  std::vector<SymInt> v;
  while (!isPunct("]")) {
    if (!v.empty()) COIL_TRY_STATUS(expectPunct(",", "or ']' in a list of sizes"));
    COIL_TRY(SymInt e, parseSize());
    v.push_back(std::move(e));
  }
  bump();
  return v;
}

Expected<std::string> Parser::parseVar(const std::string &context) {
  if (cur_.kind != Tok::Var) return expected("a variable ('%name')", context);
  std::string v(cur_.text);
  bump();
  return v;
}

// int := '-'? INT
/// '-'? (INT | FLOAT | 'inf' | 'nan' | 'true' | 'false'), as one text; *isFloat: a FLOAT token.
Expected<std::string> Parser::parseNumberText(const std::string &context, bool *isFloat) {
  std::string text;
  if (isPunct("-")) {
    text = "-";
    bump();
  }
  bool word =
      cur_.kind == Tok::Ident && (cur_.text == "inf" || cur_.text == "nan" ||
                                  ((cur_.text == "true" || cur_.text == "false") && text.empty()));
  if (cur_.kind != Tok::Int && cur_.kind != Tok::Float && !word)
    return expected("a number", context);
  *isFloat = cur_.kind == Tok::Float;
  text += std::string(cur_.text);
  bump();
  return text;
}

Expected<double> Parser::parseDouble(const std::string &context) {
  Token t = cur_;
  bool isFloatText = false;
  COIL_TRY(std::string text, parseNumberText(context, &isFloatText));
  bool neg = text[0] == '-';
  std::string_view body = std::string_view(text).substr(neg ? 1 : 0);
  double v = 0;
  if (body == "inf") {
    v = HUGE_VAL;
  } else if (body == "nan") {
    v = std::nan("");
  } else {
    auto r = std::from_chars(body.data(), body.data() + body.size(), v);
    if (r.ec != std::errc() || r.ptr != body.data() + body.size())
      return errorAt(t, "expected a number " + context + ", got '" + text + "'");
  }
  return neg ? -v : v;
}

// --- the verifier on the parsed program, its failures located at the node at fault
Status Parser::verify() {
  NodeId at = -1;
  Status st = verifyLoopProgram(p_, "parsing", &at);
  if (st.ok()) return st;
  const Token &t = at >= 0 && size_t(at) < nodeToks_.size() ? nodeToks_[size_t(at)] : ioTok_;
  return Error::user(st.error().message(), SourceLoc{file_, "", "", t.line, t.col});
}

} // namespace text

Expected<ParsedLoopProgram> parseLoopProgram(std::string_view text, const std::string &file) {
  return loop::text::Parser(text, file).run();
}

Expected<ParsedLoopProgram> parseLoopProgramFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::user("cannot open '" + path + "'", SourceLoc{path});
  std::ostringstream ss;
  ss << in.rdbuf();
  return parseLoopProgram(ss.str(), path);
}

} // namespace coil::loop
