#include "evt/EvtIR.h"

#include <sstream>

namespace coil::evt {

std::string_view archName(Arch a) {
  return a == Arch::Sm80 ? "sm80" : "sm90";
}

std::string_view kindName(Kind k) {
  switch (k) {
  case Kind::Input:
    return "input";
  case Kind::Accum:
    return "accum";
  case Kind::Src:
    return "src";
  case Kind::AuxLoad:
    return "aux_load";
  case Kind::RowBcast:
    return "row_broadcast";
  case Kind::ColBcast:
    return "col_broadcast";
  case Kind::ScalarBcast:
    return "scalar_broadcast";
  case Kind::Literal:
    return "literal";
  case Kind::Compute:
    return "compute";
  case Kind::AuxStore:
    return "aux_store";
  case Kind::RowRed:
    return "row_reduction";
  case Kind::ColRed:
    return "col_reduction";
  case Kind::ScalarRed:
    return "scalar_reduction";
  }
  return "?";
}

bool isLoad(Kind k) {
  return k == Kind::Input || k == Kind::Accum || k == Kind::Src || k == Kind::AuxLoad ||
         k == Kind::RowBcast || k == Kind::ColBcast || k == Kind::ScalarBcast || k == Kind::Literal;
}
bool isStore(Kind k) {
  return k == Kind::AuxStore || isReduction(k);
}
bool isReduction(Kind k) {
  return k == Kind::RowRed || k == Kind::ColRed || k == Kind::ScalarRed;
}

std::string_view opName(Op op) {
  switch (op) {
  case Op::Add:
    return "add";
  case Op::Sub:
    return "sub";
  case Op::Mul:
    return "mul";
  case Op::Div:
    return "div";
  case Op::Pow:
    return "pow";
  case Op::Neg:
    return "neg";
  case Op::Relu:
    return "relu";
  case Op::Sigmoid:
    return "sigmoid";
  case Op::Tanh:
    return "tanh";
  case Op::Gelu:
    return "gelu";
  case Op::Erf:
    return "erf";
  case Op::Silu:
    return "silu";
  case Op::Exp:
    return "exp";
  case Op::Log:
    return "log";
  case Op::Abs:
    return "abs";
  case Op::Sqrt:
    return "sqrt";
  case Op::Max:
    return "maximum";
  case Op::Min:
    return "minimum";
  case Op::Clamp:
    return "clamp";
  case Op::Where:
    return "where";
  case Op::Lt:
    return "lt";
  case Op::Le:
    return "le";
  case Op::Gt:
    return "gt";
  case Op::Ge:
    return "ge";
  case Op::Eq:
    return "eq";
  case Op::Ne:
    return "ne";
  case Op::Fma:
    return "fma";
  case Op::Cast:
    return "cast";
  case Op::First:
    return "first";
  }
  return "?";
}

int opArity(Op op) {
  switch (op) {
  case Op::Neg:
  case Op::Relu:
  case Op::Sigmoid:
  case Op::Tanh:
  case Op::Gelu:
  case Op::Erf:
  case Op::Silu:
  case Op::Exp:
  case Op::Log:
  case Op::Abs:
  case Op::Sqrt:
  case Op::Cast:
    return 1;
  case Op::Clamp:
  case Op::Where:
  case Op::Fma:
    return 3;
  case Op::First:
    return -1;
  default:
    return 2;
  }
}

std::string_view redName(RedFn r) {
  return r == RedFn::Sum ? "sum" : "max";
}

std::vector<std::vector<int>> Program::users() const {
  std::vector<std::vector<int>> u(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].dead) continue;
    for (int o : nodes[i].operands) u[static_cast<size_t>(o)].push_back(static_cast<int>(i));
  }
  return u;
}

static std::string shapeStr(const Dims &d, bool batched) {
  std::string s = d.m == 1 ? "1" : "M";
  s += d.n == 1 ? ",1" : ",N";
  if (batched) s += d.l == 1 ? ",1" : ",L";
  return "[" + s + "]";
}

std::string printProgram(const Program &p) {
  std::ostringstream os;
  os << "evt " << p.fnName << " (M=" << p.problem.m << ", N=" << p.problem.n;
  if (p.batched) os << ", L=" << p.problem.l;
  os << ") element " << dtypeName(p.element) << " compute " << dtypeName(p.compute) << "\n";
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const Node &n = p.nodes[i];
    if (n.dead) continue;
    os << "  %" << i << " = " << kindName(n.kind);
    if (n.kind == Kind::Compute) os << " " << opName(n.op);
    if (isReduction(n.kind)) os << " " << redName(n.red);
    if (n.kind == Kind::Literal) os << " " << n.value;
    if (!n.operands.empty()) {
      os << "(";
      for (size_t k = 0; k < n.operands.size(); ++k) os << (k ? ", %" : "%") << n.operands[k];
      os << ")";
    }
    os << " : " << dtypeName(n.dtype) << " " << shapeStr(n.shape, p.batched);
    if (isLoad(n.kind) || isStore(n.kind))
      if (n.kind != Kind::Literal && n.kind != Kind::Accum)
        os << " stride(" << n.stride.m << "," << n.stride.n << "," << n.stride.l << ")";
    if (!n.name.empty())
      os << " '" << n.name << "'";
    else if (!n.var.empty())
      os << " (" << n.var << ")";
    if (static_cast<int>(i) == p.root) os << " root";
    if (static_cast<int>(i) == p.dValue) os << " -> D";
    os << "\n";
  }
  os << "  return";
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    os << (k ? ", " : " ") << p.outputs[k].name << "=%";
    os << (k < p.outputStores.size() && p.outputStores[k] >= 0 ? p.outputStores[k]
                                                               : p.outputs[k].value);
  }
  os << "\n";
  return os.str();
}

Builder::Builder(Dims problem, bool batched, DType element) {
  p_.problem = problem;
  p_.batched = batched;
  p_.element = element;
}

int Builder::add(Node n) {
  for (int o : n.operands)
    if (o < 0 || o >= static_cast<int>(p_.nodes.size()))
      problems_.push_back("operand %" + std::to_string(o) + " of a " +
                          std::string(kindName(n.kind)) + " node does not exist");
  p_.nodes.push_back(std::move(n));
  return static_cast<int>(p_.nodes.size()) - 1;
}

int Builder::accum(SourceLoc loc) {
  Node n;
  n.kind = Kind::Accum;
  n.name = "accum";
  n.dtype = DType::F32;
  n.shape = p_.problem;
  n.loc = std::move(loc);
  int id = add(std::move(n));
  p_.params.push_back(id);
  return id;
}

int Builder::input(const std::string &name, bool spansM, bool spansN, bool spansL, DType dtype,
                   SourceLoc loc) {
  Node n;
  n.kind = Kind::Input;
  n.name = name;
  n.dtype = dtype;
  n.shape = {spansM ? p_.problem.m : 1, spansN ? p_.problem.n : 1, spansL ? p_.problem.l : 1};
  // Dense row-major strides over the spanned dimensions; 0 for broadcast ones.
  int64_t s = 1;
  n.stride.n = spansN ? s : 0;
  if (spansN) s *= p_.problem.n;
  n.stride.m = spansM ? s : 0;
  if (spansM) s *= p_.problem.m;
  n.stride.l = spansL ? s : 0;
  n.loc = std::move(loc);
  int id = add(std::move(n));
  p_.params.push_back(id);
  return id;
}

int Builder::inputStrided(const std::string &name, Strides strides, DType dtype, SourceLoc loc) {
  int id = input(name, strides.m != 0, strides.n != 0, strides.l != 0, dtype, std::move(loc));
  p_.at(id).stride = strides;
  return id;
}

int Builder::scalar(const std::string &name, DType dtype, SourceLoc loc) {
  return input(name, false, false, false, dtype, std::move(loc));
}

int Builder::literal(double v, SourceLoc loc) {
  Node n;
  n.kind = Kind::Literal;
  n.value = v;
  n.dtype = p_.compute;
  n.loc = std::move(loc);
  return add(std::move(n));
}

int Builder::compute(Op op, std::vector<int> operands, SourceLoc loc) {
  Node n;
  n.kind = Kind::Compute;
  n.op = op;
  int arity = opArity(op);
  if ((arity >= 0 && static_cast<int>(operands.size()) != arity) || (arity < 0 && operands.empty()))
    problems_.push_back(std::string(opName(op)) + " takes " +
                        (arity < 0 ? std::string("at least 1") : std::to_string(arity)) +
                        " operands, got " + std::to_string(operands.size()));
  n.operands = std::move(operands);
  n.dtype = p_.compute;
  n.loc = std::move(loc);
  return add(std::move(n));
}

int Builder::cast(int x, DType to, SourceLoc loc) {
  int id = compute(Op::Cast, {x}, std::move(loc));
  p_.nodes.back().dtype = to;
  return id;
}

int Builder::reduce(RedFn fn, int x, bool overM, bool overN, SourceLoc loc) {
  Node n;
  n.kind = overM && overN ? Kind::ScalarRed : overM ? Kind::RowRed : Kind::ColRed;
  if (!overM && !overN) problems_.push_back("a reduction must reduce over M, N or both");
  n.red = fn;
  n.operands = {x};
  n.dtype = DType::F32;
  n.loc = std::move(loc);
  return add(std::move(n));
}

void Builder::output(const std::string &name, int value, SourceLoc loc) {
  if (value < 0 || value >= static_cast<int>(p_.nodes.size()))
    problems_.push_back("output '" + name + "' refers to a node that does not exist");
  p_.outputs.push_back({name, value, std::move(loc)});
}

void Builder::setVar(int id, const std::string &var) {
  if (id >= 0 && id < static_cast<int>(p_.nodes.size()) && p_.at(id).var.empty())
    p_.at(id).var = var;
}

Expected<Program> Builder::finish() {
  if (!problems_.empty()) return Error::user(problems_.front());
  return std::move(p_);
}

} // namespace coil::evt
