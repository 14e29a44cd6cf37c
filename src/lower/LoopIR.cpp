#include "lower/LoopIR.h"

#include "ir/TextFormatUtil.h"
#include "support/Check.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <sstream>

namespace coil::loop {

const char *scalarOpName(ScalarOp op) {
  switch (op) {
#define COIL_SCALAR_OP_NAME(E, A)                                                                  \
  case ScalarOp::E:                                                                                \
    return #E;
    COIL_FOR_EACH_SCALAR_OP(COIL_SCALAR_OP_NAME)
#undef COIL_SCALAR_OP_NAME
  }
  COIL_UNREACHABLE("unknown scalar op");
  return "";
}

int scalarOpArity(ScalarOp op) {
  switch (op) {
#define COIL_SCALAR_OP_ARITY(E, A)                                                                 \
  case ScalarOp::E:                                                                                \
    return A;
    COIL_FOR_EACH_SCALAR_OP(COIL_SCALAR_OP_ARITY)
#undef COIL_SCALAR_OP_ARITY
  }
  COIL_UNREACHABLE("unknown scalar op");
  return 0;
}

const char *reduceKindName(ReduceKind k) {
  switch (k) {
  case ReduceKind::Sum:
    return "sum";
  case ReduceKind::Prod:
    return "prod";
  case ReduceKind::Max:
    return "max";
  case ReduceKind::Min:
    return "min";
  case ReduceKind::ArgMax:
    return "argmax";
  case ReduceKind::ArgMin:
    return "argmin";
  case ReduceKind::Any:
    return "any";
  case ReduceKind::All:
    return "all";
  }
  COIL_UNREACHABLE("unknown reduce kind");
  return "";
}

std::string loopVar(int i) {
  return "%x" + std::to_string(i);
}
std::string reduceVar(int i) {
  return "%r" + std::to_string(i);
}

namespace {

std::string lower(const char *s) {
  std::string r(s);
  for (char &c : r) c = char(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

/// The shortest decimal that reads back as `v` (inf, -inf, nan spelled out).
std::string number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string list(const std::vector<SymInt> &v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i].str();
  return s;
}

std::string names(const std::vector<std::string> &v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

std::string nodeName(const LoopProgram &p, NodeId id) {
  if (id < 0 || size_t(id) >= p.nodes.size()) return "<node " + std::to_string(id) + ">";
  return p.nodes[size_t(id)].name;
}

std::string val(Val v) {
  return "%" + std::to_string(v);
}

} // namespace

std::string quoteName(const std::string &s) {
  static const char kHex[] = "0123456789abcdef";
  std::string r = "'";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '\'' || c == '\\') {
      r += '\\';
      r += ch;
    } else if (c < 0x20 || c > 0x7e) {
      r += "\\x";
      r += kHex[c >> 4];
      r += kHex[c & 15];
    } else {
      r += ch;
    }
  }
  return r + "'";
}

namespace {

/// A program input or output name: bare when it reads back as one word (see LoopParser.h),
/// else quoted.
std::string ioName(const std::string &s) {
  bool bare = !s.empty() && (std::isalnum(static_cast<unsigned char>(s[0])) || s[0] == '_');
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    bare = bare && c > 0x20 && c <= 0x7e && c != '\'' && c != '\\' && c != '#';
  }
  return bare ? s : quoteName(s);
}

/// The graph value an Input or Constant node names (`'name'`), and a small constant's
/// elements; "" when the program has no graph or the node no graph value.
std::string graphValueText(const LoopProgram &p, ValueId v) {
  if (!p.graph || v < 0 || size_t(v) >= p.graph->numValues()) return "";
  std::string s = " " + quoteName(p.graph->value(v).name);
  if (!p.graph->isConstant(v)) return s;
  const Tensor &t = p.graph->constant(v);
  if (t.numel() > kMaxPrintedConstantElements) return s;
  std::string elems;
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (i) elems += ", ";
    if (!textfmt::appendElement(elems, t.dtype(), t.data(), size_t(i))) return s;
  }
  return s + " [" + elems + "]";
}

void printBody(std::ostringstream &os, const LoopProgram &p, const Body &b, int indent = 2) {
  for (size_t i = 0; i < b.stmts.size(); ++i) {
    const Stmt &s = b.stmts[i];
    os << std::string(size_t(indent), ' ') << val(Val(i)) << " = ";
    std::string t(dtypeName(s.dtype));
    switch (s.kind) {
    case Stmt::Kind::Load:
      os << "load " << t << " " << nodeName(p, s.node) << "[" << list(s.index) << "]";
      break;
    case Stmt::Kind::Constant:
      os << "const " << t << " "
         << (!s.isInt                ? number(s.number)
             : s.dtype == DType::U64 ? std::to_string(uint64_t(s.intNumber))
                                     : std::to_string(s.intNumber));
      break;
    case Stmt::Kind::Index:
      os << "index " << t << " " << s.expr.str();
      break;
    case Stmt::Kind::Op:
      os << lower(scalarOpName(s.op)) << " " << t;
      for (size_t k = 0; k < s.args.size(); ++k) os << (k ? ", " : " ") << val(s.args[k]);
      break;
    case Stmt::Kind::Cast:
      os << "cast " << t << " " << val(s.args.at(0));
      break;
    case Stmt::Kind::BitCast:
      os << "bitcast " << t << " " << val(s.args.at(0));
      break;
    case Stmt::Kind::IndirectIndex:
      os << "indirect " << s.symbol << " = " << val(s.args.at(0)) << " in [0, " << s.extent.str()
         << ")" << (s.wrapNegative ? " wrap" : "");
      break;
    case Stmt::Kind::Accumulator:
      os << "accumulator " << t << " phase " << s.phase << " slot " << s.slot;
      break;
    }
    os << "\n";
  }
}

std::string externArg(const LoopProgram &p, const ExternArg &a) {
  switch (a.kind) {
  case ExternArg::Kind::Node:
    return nodeName(p, a.node);
  case ExternArg::Kind::Output:
    return "out " + std::to_string(a.index);
  case ExternArg::Kind::Int:
    return "int " + a.sym.str();
  case ExternArg::Kind::Float:
    return "float " + number(a.number);
  case ExternArg::Kind::OutSymbol:
    return "outsym " + a.symbol;
  }
  return "?";
}

} // namespace

std::string printLoopBody(const LoopProgram &p, const Body &b, int indent) {
  std::ostringstream os;
  printBody(os, p, b, indent);
  return os.str();
}

std::string printLoopProgram(const LoopProgram &p) {
  std::ostringstream os;
  if (!p.symbols.empty()) {
    os << "symbols";
    bool first = true;
    for (const auto &[name, r] : p.symbols) {
      os << (first ? " " : ", ") << name << " in [" << r.min << ", " << r.max << "]";
      first = false;
    }
    os << "\n";
  }
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const Node &n = p.nodes[i];
    os << "\n" << n.name << ": " << dtypeName(n.dtype) << "[" << list(n.shape) << "] = ";
    if (const auto *in = std::get_if<InputNode>(&n.kind)) {
      os << "input" << graphValueText(p, in->graphValue) << "\n";
    } else if (const auto *c = std::get_if<ConstantNode>(&n.kind)) {
      os << "constant" << graphValueText(p, c->graphValue) << "\n";
    } else if (const auto *pw = std::get_if<PointwiseNode>(&n.kind)) {
      os << "pointwise (" << names(pw->vars) << ")\n";
      printBody(os, p, pw->body);
      os << "  result " << val(pw->result) << "\n";
    } else if (const auto *r = std::get_if<ReductionNode>(&n.kind)) {
      os << "reduce " << reduceKindName(r->kind) << " " << dtypeName(r->accDType);
      if (r->selectLast) os << " last";
      os << " (" << names(r->vars) << ") over (";
      for (size_t k = 0; k < r->rvars.size(); ++k)
        os << (k ? ", " : "") << r->rvars[k] << " < "
           << (k < r->rranges.size() ? r->rranges[k].str() : "?");
      os << ")\n";
      printBody(os, p, r->body);
      os << "  value " << val(r->value);
      if (r->position != kNoVal) os << " position " << val(r->position);
      os << "\n";
    } else if (const auto *e = std::get_if<ExternNode>(&n.kind)) {
      os << "extern " << e->function << "(";
      for (size_t k = 0; k < e->args.size(); ++k) os << (k ? ", " : "") << externArg(p, e->args[k]);
      os << ")" << (e->allocates ? " allocates" : "") << "\n";
      for (size_t k = 0; k < e->outputs.size(); ++k)
        os << "  out " << k << ": " << e->outputs[k].str() << "\n";
    } else if (const auto *m = std::get_if<MultiOutputNode>(&n.kind)) {
      os << "output " << m->index << " of " << nodeName(p, m->source) << "\n";
    }
  }
  os << "\n";
  for (size_t k = 0; k < p.inputs.size(); ++k)
    os << "input " << (k < p.inputNames.size() ? ioName(p.inputNames[k]) : "?") << " = "
       << nodeName(p, p.inputs[k]) << "\n";
  for (size_t k = 0; k < p.outputs.size(); ++k)
    os << "output " << (k < p.outputNames.size() ? ioName(p.outputNames[k]) : "?") << " = "
       << nodeName(p, p.outputs[k]) << "\n";
  return os.str();
}

} // namespace coil::loop
