// Folding of conv bias adds and clamps into the conv externs (see FoldConvBias.h).
#include "lower/FoldConvBias.h"

#include "kernels/Externs.h"
#include "lower/LoopRewrite.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace coil::loop {
namespace {

using kernels::ExternId;

/// The fused extern of a plain convolution extern: conv -> conv_bias, conv_nhwc ->
/// conv_nhwc_bias; nullopt for any other.
std::optional<ExternId> fusedOf(ExternId id) {
  if (id == ExternId::Conv) return ExternId::ConvBias;
  if (id == ExternId::ConvNhwc) return ExternId::ConvNhwcBias;
  return std::nullopt;
}

/// The extern of `fn` when it is the CPU function of a plain convolution (`plain`) or of a fused
/// one (otherwise) of a dtype that the fused extern has (a CUDA twin too, for CUDA programs).
std::optional<kernels::ExternRef> convExtern(const std::string &fn, bool plain,
                                             const FoldConvBiasOptions &o) {
  std::optional<kernels::ExternRef> r = kernels::findExtern(fn);
  if (!r || r->cuda) return std::nullopt;
  bool fused = r->id == ExternId::ConvBias || r->id == ExternId::ConvNhwcBias;
  std::optional<ExternId> target = plain ? fusedOf(r->id) : std::optional<ExternId>(r->id);
  if ((plain ? !target : !fused) || !kernels::externInfo(*target).hasDType(r->dtype) ||
      (o.cuda && !kernels::externInfo(*target).hasCuda(r->dtype)))
    return std::nullopt;
  return r;
}

/// The value of a finite floating constant statement.
std::optional<double> floatConstant(const Body &b, Val v) {
  if (v < 0 || size_t(v) >= b.stmts.size()) return std::nullopt;
  const Stmt &s = b.stmts[size_t(v)];
  if (s.kind != Stmt::Kind::Constant || s.isInt || !std::isfinite(s.number)) return std::nullopt;
  return s.number;
}

bool onlyReader(const LoopProgram &p, const std::vector<std::vector<NodeId>> &readers, NodeId src,
                NodeId reader) {
  if (std::find(p.outputs.begin(), p.outputs.end(), src) != p.outputs.end()) return false;
  const auto &r = readers[size_t(src)];
  return r.size() == 1 && r[0] == reader;
}

bool isHalf(DType dt) {
  return dt == DType::F16 || dt == DType::BF16;
}

/// `v` with exact widening casts peeled: casts to `dt`, or to f32 when dt is f16/bf16 (the
/// patterns load every value as dt, so these casts never round).
Val peelCasts(const Body &b, Val v, DType dt) {
  while (v >= 0 && size_t(v) < b.stmts.size()) {
    const Stmt &s = b.stmts[size_t(v)];
    if (s.kind != Stmt::Kind::Cast || !(s.dtype == dt || (isHalf(dt) && s.dtype == DType::F32)))
      break;
    v = s.args.at(0);
  }
  return v;
}

/// `pw` (node n) computes conv + bias[channel] of a plain conv extern: the two nodes and the
/// fused extern. The channel is dim 1 of conv's output, the last dim for conv_nhwc. For f16/bf16
/// the add may be in f32 on widened loads, rounded to the dtype by a final cast (the form
/// lowering gives it).
struct BiasAdd {
  NodeId conv = -1, bias = -1;
  ExternId fused = ExternId::ConvBias;
};
std::optional<BiasAdd> matchBiasAdd(const LoopProgram &p, const Node &n, const PointwiseNode &pw,
                                    const FoldConvBiasOptions &o) {
  const Body &b = pw.body;
  if (pw.result < 0 || size_t(pw.result) >= b.stmts.size() || n.shape.size() < 3 ||
      pw.vars.size() != n.shape.size())
    return std::nullopt;
  const Stmt &add = b.stmts[size_t(peelCasts(b, pw.result, n.dtype))];
  if (add.kind != Stmt::Kind::Op || add.op != ScalarOp::Add || add.args.size() != 2 ||
      !(add.dtype == n.dtype || (isHalf(n.dtype) && add.dtype == DType::F32)))
    return std::nullopt;
  for (int order = 0; order < 2; ++order) {
    std::optional<NodeId> conv =
        identityLoad(b, peelCasts(b, add.args[size_t(order)], n.dtype), pw.vars);
    Val c = peelCasts(b, add.args[size_t(1 - order)], n.dtype);
    if (!conv || c < 0 || size_t(c) >= b.stmts.size()) continue;
    const Stmt &cl = b.stmts[size_t(c)];
    if (cl.kind != Stmt::Kind::Load || cl.dtype != n.dtype) continue;
    const Node &cn = p.nodes.at(size_t(*conv));
    const auto *ex = std::get_if<ExternNode>(&cn.kind);
    std::optional<kernels::ExternRef> r;
    if (ex) r = convExtern(ex->function, true, o);
    if (!r || cn.dtype != n.dtype || ex->outputs.size() != 1 || cn.shape != n.shape) continue;
    size_t channel = r->id == ExternId::ConvNhwc ? n.shape.size() - 1 : 1;
    const Node &bn = p.nodes.at(size_t(cl.node));
    if (bn.dtype != n.dtype || bn.shape.size() != 1 || bn.shape[0] != n.shape[channel] ||
        cl.index.size() != 1 || cl.index[0] != SymInt::symbol(pw.vars[channel]))
      continue;
    return BiasAdd{*conv, cl.node, *fusedOf(r->id)};
  }
  return std::nullopt;
}

/// `pw` (node n) clamps an identity load of one node: `x < lo ? lo : x`, then optionally
/// `y > hi ? hi : y` (or only the latter); the node, the flags (bit 0 lower, bit 1 upper) and
/// the bounds.
struct Clamp {
  NodeId src = -1;
  int64_t flags = 0;
  double lo = 0, hi = 0;
};
/// `v` = select(cmp(x, c), c, x) with cmp `op`: x and c.
std::optional<std::pair<Val, double>> matchSelectClamp(const Body &b, Val v, ScalarOp op,
                                                       DType dt) {
  if (v < 0 || size_t(v) >= b.stmts.size()) return std::nullopt;
  const Stmt &s = b.stmts[size_t(v)];
  if (s.kind != Stmt::Kind::Op || s.op != ScalarOp::Select || s.args.size() != 3 || s.dtype != dt)
    return std::nullopt;
  const Stmt &cmp = b.stmts.at(size_t(s.args[0]));
  if (cmp.kind != Stmt::Kind::Op || cmp.op != op || cmp.args.size() != 2) return std::nullopt;
  std::optional<double> c = floatConstant(b, s.args[1]), c2 = floatConstant(b, cmp.args[1]);
  if (!c || !c2 || *c != *c2 || cmp.args[0] != s.args[2]) return std::nullopt;
  return std::make_pair(s.args[2], *c);
}
std::optional<Clamp> matchClamp(const Node &n, const PointwiseNode &pw) {
  const Body &b = pw.body;
  Clamp c;
  Val x = pw.result;
  if (auto hi = matchSelectClamp(b, x, ScalarOp::Gt, n.dtype)) {
    c.flags |= 2, c.hi = hi->second, x = hi->first;
  }
  if (auto lo = matchSelectClamp(b, x, ScalarOp::Lt, n.dtype)) {
    c.flags |= 1, c.lo = lo->second, x = lo->first;
  }
  std::optional<NodeId> src = identityLoad(b, x, pw.vars);
  if (c.flags == 0 || !src) return std::nullopt;
  c.src = *src;
  return c;
}

ExternArg intArg(int64_t v) {
  ExternArg a;
  a.kind = ExternArg::Kind::Int;
  a.sym = SymInt(v);
  return a;
}
ExternArg floatArg(double v) {
  ExternArg a;
  a.kind = ExternArg::Kind::Float;
  a.number = v;
  return a;
}

} // namespace

int foldConvBias(LoopProgram &p, const FoldConvBiasOptions &o) {
  std::vector<std::vector<NodeId>> readers = readersOf(p);
  std::vector<bool> dead(p.nodes.size(), false);
  int folds = 0;
  auto moveReaders = [&](NodeId from, NodeId to) {
    for (std::vector<NodeId> &r : readers)
      for (NodeId &x : r)
        if (x == from) x = to;
  };
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    NodeId id = NodeId(i);
    const auto *pw = std::get_if<PointwiseNode>(&p.nodes[i].kind);
    if (!pw) continue;
    if (std::optional<BiasAdd> m = matchBiasAdd(p, p.nodes[i], *pw, o);
        m && !dead[size_t(m->conv)] && onlyReader(p, readers, m->conv, id)) {
      ExternNode ex = std::get<ExternNode>(p.nodes[size_t(m->conv)].kind);
      if (ex.args.size() != 26) continue;
      ex.function = kernels::cpuSymbol(m->fused, kernels::findExtern(ex.function)->dtype);
      ExternArg bias;
      bias.kind = ExternArg::Kind::Node;
      bias.node = m->bias;
      ex.args.insert(ex.args.begin() + 2, bias);
      ex.args.push_back(intArg(0));
      ex.args.push_back(floatArg(0));
      ex.args.push_back(floatArg(0));
      absorb(p, id, m->conv, std::move(ex));
      moveReaders(m->conv, id);
      dead[size_t(m->conv)] = true;
      ++folds;
      continue;
    }
    if (std::optional<Clamp> c = matchClamp(p.nodes[i], *pw); c && !dead[size_t(c->src)]) {
      const Node &sn = p.nodes[size_t(c->src)];
      const auto *ex = std::get_if<ExternNode>(&sn.kind);
      if (!ex || !convExtern(ex->function, false, o) || sn.dtype != p.nodes[i].dtype ||
          sn.shape != p.nodes[i].shape || ex->args.size() != 30 ||
          !onlyReader(p, readers, c->src, id))
        continue;
      // CUDA: a ReLU only (cuDNN's fused convolution applies it; a Clip of the rounded sum, a
      // kernel of its own, rounds no further).
      if (o.cuda && !(c->flags == 1 && c->lo == 0)) continue;
      const ExternArg &flags = ex->args[27];
      if (flags.kind != ExternArg::Kind::Int || flags.sym != SymInt(0)) continue;
      ExternNode folded = *ex;
      folded.args[27] = intArg(c->flags);
      folded.args[28] = floatArg(c->lo);
      folded.args[29] = floatArg(c->hi);
      absorb(p, id, c->src, std::move(folded));
      moveReaders(c->src, id);
      dead[size_t(c->src)] = true;
      ++folds;
    }
  }
  if (folds > 0) removeNodes(p, dead);
  return folds;
}

} // namespace coil::loop
