// Folding of bias adds and ReLUs into the GEMM extern (see FoldGemmBias.h).
#include "lower/FoldGemmBias.h"

#include "kernels/Externs.h"
#include "lower/LoopRewrite.h"

#include <algorithm>
#include <optional>

namespace coil::loop {
namespace {

using kernels::ExternId;

/// Whether `fn` is the CPU function of extern `id` (kernels/Externs.def).
bool isExtern(const std::string &fn, ExternId id) {
  std::optional<kernels::ExternRef> r = kernels::findExtern(fn);
  return r && r->id == id && !r->cuda;
}

/// `v` with exact widening casts peeled: casts to `dt`, or to f32 when dt is f16/bf16 (every
/// value of a pattern is loaded as dt, so these casts never round).
Val peelCasts(const Body &b, Val v, DType dt) {
  bool half = dt == DType::F16 || dt == DType::BF16;
  while (v >= 0 && size_t(v) < b.stmts.size()) {
    const Stmt &s = b.stmts[size_t(v)];
    if (s.kind != Stmt::Kind::Cast || !(s.dtype == dt || (half && s.dtype == DType::F32))) break;
    v = s.args.at(0);
  }
  return v;
}

bool isZeroConstant(const Body &b, Val v) {
  const Stmt &s = b.stmts.at(size_t(v));
  return s.kind == Stmt::Kind::Constant && (s.isInt ? s.intNumber == 0 : s.number == 0);
}

/// `src` may be absorbed into its reader `reader`: that is its only reader and it is no
/// program output.
bool onlyReader(const LoopProgram &p, const std::vector<std::vector<NodeId>> &readers, NodeId src,
                NodeId reader) {
  if (std::find(p.outputs.begin(), p.outputs.end(), src) != p.outputs.end()) return false;
  const auto &r = readers[size_t(src)];
  return r.size() == 1 && r[0] == reader;
}

bool sameShape(const std::vector<SymInt> &a, const std::vector<SymInt> &b) {
  return a == b;
}

/// A GEMM + bias Pointwise node: the GEMM extern and the bias node it adds, when `pw` (node
/// `id`) has that form.
struct BiasAdd {
  NodeId gemm = -1, bias = -1;
};
std::optional<BiasAdd> matchBiasAdd(const LoopProgram &p, const Node &n, const PointwiseNode &pw) {
  const Body &b = pw.body;
  if (pw.result < 0 || n.shape.size() < 2) return std::nullopt;
  DType dt = n.dtype;
  Val r = peelCasts(b, pw.result, dt);
  const Stmt &add = b.stmts.at(size_t(r));
  if (add.kind != Stmt::Kind::Op || add.op != ScalarOp::Add || add.args.size() != 2)
    return std::nullopt;
  if (!(add.dtype == dt || ((dt == DType::F16 || dt == DType::BF16) && add.dtype == DType::F32)))
    return std::nullopt;
  for (int order = 0; order < 2; ++order) {
    Val g = peelCasts(b, add.args[size_t(order)], dt),
        c = peelCasts(b, add.args[size_t(1 - order)], dt);
    std::optional<NodeId> gemm = identityLoad(b, g, pw.vars);
    const Stmt &cl = b.stmts.at(size_t(c));
    if (!gemm || cl.kind != Stmt::Kind::Load) continue;
    const Node &gn = p.nodes.at(size_t(*gemm));
    const auto *ex = std::get_if<ExternNode>(&gn.kind);
    if (!ex || !isExtern(ex->function, ExternId::Gemm) || gn.dtype != dt ||
        ex->outputs.size() != 1 || !sameShape(gn.shape, n.shape))
      continue;
    const Node &bn = p.nodes.at(size_t(cl.node));
    bool leaf =
        std::holds_alternative<ConstantNode>(bn.kind) || std::holds_alternative<InputNode>(bn.kind);
    if (!leaf || bn.dtype != dt || bn.shape.empty() || cl.index.size() != bn.shape.size() ||
        bn.shape.back() != n.shape.back())
      continue;
    bool columns = cl.index.back() == SymInt::symbol(pw.vars.back());
    for (size_t d = 0; columns && d + 1 < bn.shape.size(); ++d)
      columns = bn.shape[d] == SymInt(1) && cl.index[d] == SymInt(0);
    if (!columns) continue;
    return BiasAdd{*gemm, cl.node};
  }
  return std::nullopt;
}

/// The node a ReLU Pointwise node reads, when `pw` is `x < 0 ? 0 : x` or Max(x, 0) (either
/// order) of an identity load x.
std::optional<NodeId> matchRelu(const Node &n, const PointwiseNode &pw) {
  const Body &b = pw.body;
  if (pw.result < 0) return std::nullopt;
  DType dt = n.dtype;
  Val r = peelCasts(b, pw.result, dt);
  const Stmt &s = b.stmts.at(size_t(r));
  if (s.kind != Stmt::Kind::Op) return std::nullopt;
  Val x = kNoVal;
  if (s.op == ScalarOp::Select && s.args.size() == 3) {
    const Stmt &cmp = b.stmts.at(size_t(s.args[0]));
    if (cmp.kind != Stmt::Kind::Op || cmp.op != ScalarOp::Lt || cmp.args.size() != 2 ||
        !isZeroConstant(b, s.args[1]) || !isZeroConstant(b, cmp.args[1]) ||
        peelCasts(b, cmp.args[0], dt) != peelCasts(b, s.args[2], dt))
      return std::nullopt;
    x = s.args[2];
  } else if (s.op == ScalarOp::Max && s.args.size() == 2) {
    if (isZeroConstant(b, s.args[1]))
      x = s.args[0];
    else if (isZeroConstant(b, s.args[0]))
      x = s.args[1];
    else
      return std::nullopt;
  } else {
    return std::nullopt;
  }
  return identityLoad(b, peelCasts(b, x, dt), pw.vars);
}

} // namespace

int foldGemmBias(LoopProgram &p) {
  std::vector<std::vector<NodeId>> readers = readersOf(p);
  std::vector<bool> dead(p.nodes.size(), false);
  int folds = 0;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    NodeId id = NodeId(i);
    const auto *pw = std::get_if<PointwiseNode>(&p.nodes[i].kind);
    if (!pw) continue;
    if (std::optional<BiasAdd> m = matchBiasAdd(p, p.nodes[i], *pw);
        m && onlyReader(p, readers, m->gemm, id)) {
      ExternNode ex = std::get<ExternNode>(p.nodes[size_t(m->gemm)].kind);
      ex.function = kernels::cpuSymbol(ExternId::GemmBias, kernels::findExtern(ex.function)->dtype);
      ExternArg bias;
      bias.kind = ExternArg::Kind::Node;
      bias.node = m->bias;
      ex.args.insert(ex.args.begin() + 2, bias);
      ExternArg relu;
      relu.kind = ExternArg::Kind::Int;
      relu.sym = SymInt(0);
      ex.args.push_back(relu);
      absorb(p, id, m->gemm, std::move(ex));
      // The GEMM's operands are now read by this node instead.
      for (std::vector<NodeId> &r : readers)
        for (NodeId &x : r)
          if (x == m->gemm) x = id;
      dead[size_t(m->gemm)] = true;
      ++folds;
      continue;
    }
    if (std::optional<NodeId> src = matchRelu(p.nodes[i], *pw); src && !dead[size_t(*src)]) {
      const Node &sn = p.nodes[size_t(*src)];
      const auto *ex = std::get_if<ExternNode>(&sn.kind);
      if (!ex || !isExtern(ex->function, ExternId::GemmBias) || sn.dtype != p.nodes[i].dtype ||
          !sameShape(sn.shape, p.nodes[i].shape) || !onlyReader(p, readers, *src, id))
        continue;
      const ExternArg &reluArg = ex->args.back();
      if (reluArg.kind != ExternArg::Kind::Int || reluArg.sym != SymInt(0)) continue;
      ExternNode folded = *ex;
      folded.args.back().sym = SymInt(1);
      absorb(p, id, *src, std::move(folded));
      for (std::vector<NodeId> &r : readers)
        for (NodeId &x : r)
          if (x == *src) x = id;
      dead[size_t(*src)] = true;
      ++folds;
    }
  }
  if (folds > 0) removeNodes(p, dead);
  return folds;
}

} // namespace coil::loop
