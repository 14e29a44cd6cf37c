// The Loop IR verifier (see LoopVerify.h).
#include "lower/LoopVerify.h"

#include "kernels/Externs.h"

#include <set>

namespace coil::loop {
namespace {

bool isIdentifier(const std::string &s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

class Verifier {
public:
  Verifier(const LoopProgram &p, const std::string &stage) : p_(p), stage_(stage) {}

  /// The node being checked when run() failed (-1: the program's inputs and outputs).
  NodeId node() const { return id_; }

  Status run() {
    std::set<std::string> names;
    for (const auto &[sym, range] : p_.symbols) sizeSyms_.insert(sym);
    for (size_t i = 0; i < p_.nodes.size(); ++i) {
      id_ = NodeId(i);
      const Node &n = p_.nodes[i];
      if (!isIdentifier(n.name)) COIL_TRY_STATUS(fail("its name is not a C identifier"));
      if (!names.insert(n.name).second) COIL_TRY_STATUS(fail("its name is used twice"));
      // A data-dependent size is a symbol from the call that reports it on.
      if (const auto *ex = std::get_if<ExternNode>(&n.kind))
        for (const ExternArg &a : ex->args)
          if (a.kind == ExternArg::Kind::OutSymbol) sizeSyms_.insert(a.symbol);
      for (const SymInt &d : n.shape) COIL_TRY_STATUS(sizeExpr(d, "a dim of its shape"));
      COIL_TRY_STATUS(std::visit([&](const auto &k) { return kind(n, k); }, n.kind));
    }
    id_ = -1;
    if (p_.inputNames.size() != p_.inputs.size() || p_.outputNames.size() != p_.outputs.size())
      return fail("the program's inputs or outputs and their names differ in number");
    for (NodeId in : p_.inputs)
      if (in < 0 || size_t(in) >= p_.nodes.size() ||
          !std::holds_alternative<InputNode>(p_.nodes[size_t(in)].kind))
        return fail("program input " + std::to_string(in) + " is no Input node");
    for (NodeId out : p_.outputs)
      if (out < 0 || size_t(out) >= p_.nodes.size())
        return fail("program output " + std::to_string(out) + " is no node");
    return okStatus();
  }

private:
  Status fail(const std::string &rule) const {
    std::string where =
        id_ >= 0 ? "node " + std::to_string(id_) + " '" + p_.nodes[size_t(id_)].name + "': " : "";
    return Error::internal("loop IR after " + stage_ + ": " + where + rule);
  }

  Status earlier(NodeId n, const std::string &what) const {
    if (n < 0 || n >= id_)
      return fail(what + " refers to node " + std::to_string(n) + ", which is not an earlier node");
    return okStatus();
  }

  /// `e` uses only the program's size symbols and `extra` (loop variables in scope).
  Status expr(const SymInt &e, const std::set<std::string> &extra, const std::string &what) const {
    std::set<std::string> syms;
    e.collectSymbols(syms);
    for (const std::string &s : syms)
      if (!sizeSyms_.count(s) && !extra.count(s))
        return fail(what + " uses '" + s + "', which is neither a size symbol nor in scope");
    return okStatus();
  }
  Status sizeExpr(const SymInt &e, const std::string &what) const { return expr(e, {}, what); }

  Status loopVars(const std::vector<std::string> &vars, std::set<std::string> &scope) const {
    for (const std::string &v : vars) {
      if (v.empty() || v[0] != '%')
        return fail("loop variable '" + v + "' does not start with '%'");
      if (!scope.insert(v).second) return fail("loop variable '" + v + "' is defined twice");
    }
    return okStatus();
  }

  Status body(const Body &b, std::set<std::string> scope) const {
    for (size_t i = 0; i < b.stmts.size(); ++i) {
      const Stmt &s = b.stmts[i];
      std::string at = "statement " + std::to_string(i);
      for (Val a : s.args)
        if (a < 0 || size_t(a) >= i) return fail(at + " uses a value not defined before it");
      switch (s.kind) {
      case Stmt::Kind::Load: {
        COIL_TRY_STATUS(earlier(s.node, at + " (a load)"));
        const Node &x = p_.nodes[size_t(s.node)];
        if (s.index.size() != x.shape.size())
          return fail(at + " loads '" + x.name + "' with " + std::to_string(s.index.size()) +
                      " indices for its " + std::to_string(x.shape.size()) + " dims");
        if (s.dtype != x.dtype)
          return fail(at + " loads '" + x.name + "' (" + std::string(dtypeName(x.dtype)) + ") as " +
                      std::string(dtypeName(s.dtype)));
        for (const SymInt &e : s.index) COIL_TRY_STATUS(expr(e, scope, at + "'s index"));
        break;
      }
      case Stmt::Kind::Index:
        COIL_TRY_STATUS(expr(s.expr, scope, at + " (an index)"));
        break;
      case Stmt::Kind::Op:
        if (int(s.args.size()) != scalarOpArity(s.op))
          return fail(at + " (" + scalarOpName(s.op) + ") takes " +
                      std::to_string(scalarOpArity(s.op)) + " operands, not " +
                      std::to_string(s.args.size()));
        break;
      case Stmt::Kind::Cast:
      case Stmt::Kind::BitCast:
        if (s.args.size() != 1) return fail(at + " (a cast) takes one operand");
        break;
      case Stmt::Kind::IndirectIndex:
        if (s.args.size() != 1) return fail(at + " (an indirect index) takes one operand");
        if (s.symbol.empty() || s.symbol[0] != '%')
          return fail(at + " defines '" + s.symbol + "', which does not start with '%'");
        COIL_TRY_STATUS(expr(s.extent, scope, at + "'s extent"));
        if (!scope.insert(s.symbol).second) return fail(at + " redefines '" + s.symbol + "'");
        break;
      case Stmt::Kind::Accumulator:
        return fail(at + " reads an accumulator, which only fused kernels have");
      case Stmt::Kind::Constant:
        break;
      }
    }
    return okStatus();
  }

  Status value(const Body &b, Val v, const std::string &what) const {
    if (v < 0 || size_t(v) >= b.stmts.size()) return fail(what + " is no statement of its body");
    return okStatus();
  }

  Status kind(const Node &, const InputNode &) const { return okStatus(); }
  Status kind(const Node &, const ConstantNode &) const { return okStatus(); }

  Status kind(const Node &n, const PointwiseNode &pw) const {
    if (pw.vars.size() != n.shape.size())
      return fail("a pointwise node of rank " + std::to_string(n.shape.size()) + " with " +
                  std::to_string(pw.vars.size()) + " loop variables");
    std::set<std::string> scope;
    COIL_TRY_STATUS(loopVars(pw.vars, scope));
    COIL_TRY_STATUS(body(pw.body, scope));
    COIL_TRY_STATUS(value(pw.body, pw.result, "its result"));
    DType r = pw.body.stmts[size_t(pw.result)].dtype;
    if (r != n.dtype)
      return fail("its result is " + std::string(dtypeName(r)) + ", the node " +
                  std::string(dtypeName(n.dtype)));
    return okStatus();
  }

  Status kind(const Node &n, const ReductionNode &rd) const {
    if (rd.vars.size() != n.shape.size())
      return fail("a reduction of rank " + std::to_string(n.shape.size()) + " with " +
                  std::to_string(rd.vars.size()) + " outer variables");
    if (rd.rvars.size() != rd.rranges.size())
      return fail("its reduced variables and extents differ in number");
    std::set<std::string> scope;
    COIL_TRY_STATUS(loopVars(rd.vars, scope));
    COIL_TRY_STATUS(loopVars(rd.rvars, scope));
    for (const SymInt &r : rd.rranges) COIL_TRY_STATUS(sizeExpr(r, "a reduced extent"));
    COIL_TRY_STATUS(body(rd.body, scope));
    COIL_TRY_STATUS(value(rd.body, rd.value, "its folded value"));
    if (rd.kind == ReduceKind::ArgMax || rd.kind == ReduceKind::ArgMin) {
      COIL_TRY_STATUS(value(rd.body, rd.position, "its position"));
      if (rd.body.stmts[size_t(rd.position)].dtype != DType::I64)
        return fail("its position is not an i64");
    }
    return okStatus();
  }

  Status kind(const Node &n, const ExternNode &ex) const {
    if (ex.outputs.empty()) return fail("an extern call without outputs");
    if (!(ex.outputs[0].dtype == n.dtype && ex.outputs[0].shape == n.shape))
      return fail("its output 0 (" + ex.outputs[0].str() + ") is not the node's type");
    bool reports = false;
    std::string kinds;
    for (const ExternArg &a : ex.args) {
      kinds += "BOIDS"[int(a.kind)];
      switch (a.kind) {
      case ExternArg::Kind::Node:
        COIL_TRY_STATUS(earlier(a.node, "an argument of " + ex.function));
        break;
      case ExternArg::Kind::Output:
        if (a.index < 0 || size_t(a.index) >= ex.outputs.size())
          return fail("an argument of " + ex.function + " is output " + std::to_string(a.index) +
                      " of " + std::to_string(ex.outputs.size()));
        break;
      case ExternArg::Kind::Int:
        COIL_TRY_STATUS(sizeExpr(a.sym, "an argument of " + ex.function));
        break;
      case ExternArg::Kind::OutSymbol:
        reports = true;
        break;
      case ExternArg::Kind::Float:
        break;
      }
    }
    if (reports != ex.allocates)
      return fail(ex.function + (ex.allocates ? " allocates its outputs but reports no size"
                                              : " reports a size but does not allocate"));
    if (std::optional<kernels::ExternRef> r = kernels::findExtern(ex.function)) {
      if (kinds != r->info().args)
        return fail(ex.function + " takes arguments of kinds " + std::string(r->info().args) +
                    " (B buffer, O output, I size, D float, S symbol), the call passes " + kinds);
      if (r->info().allocates != ex.allocates)
        return fail(ex.function + (r->info().allocates ? " allocates its outputs"
                                                       : " writes pre-allocated outputs"));
    }
    return okStatus();
  }

  Status kind(const Node &n, const MultiOutputNode &mo) const {
    COIL_TRY_STATUS(earlier(mo.source, "its source"));
    const auto *ex = std::get_if<ExternNode>(&p_.nodes[size_t(mo.source)].kind);
    if (!ex) return fail("its source is no extern call");
    if (mo.index < 1 || size_t(mo.index) >= ex->outputs.size())
      return fail("it names output " + std::to_string(mo.index) + " of an extern with " +
                  std::to_string(ex->outputs.size()));
    const TensorType &t = ex->outputs[size_t(mo.index)];
    if (!(t.dtype == n.dtype && t.shape == n.shape))
      return fail("its type is not that of output " + std::to_string(mo.index) + " (" + t.str() +
                  ")");
    return okStatus();
  }

  const LoopProgram &p_;
  std::string stage_;
  std::set<std::string> sizeSyms_;
  NodeId id_ = -1;
};

} // namespace

Status verifyLoopProgram(const LoopProgram &p, const std::string &stage, NodeId *failedNode) {
  Verifier v(p, stage);
  Status st = v.run();
  if (!st.ok() && failedNode) *failedNode = v.node();
  return st;
}

} // namespace coil::loop
