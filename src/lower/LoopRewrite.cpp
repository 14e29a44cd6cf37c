#include "lower/LoopRewrite.h"

#include "support/Check.h"

#include <algorithm>

namespace coil::loop {

std::optional<NodeId> identityLoad(const Body &b, Val v, const std::vector<std::string> &vars) {
  if (v < 0 || size_t(v) >= b.stmts.size()) return std::nullopt;
  const Stmt &s = b.stmts[size_t(v)];
  if (s.kind != Stmt::Kind::Load || s.index.size() != vars.size()) return std::nullopt;
  for (size_t d = 0; d < vars.size(); ++d)
    if (s.index[d] != SymInt::symbol(vars[d])) return std::nullopt;
  return s.node;
}

std::vector<std::vector<NodeId>> readersOf(const LoopProgram &p) {
  std::vector<std::vector<NodeId>> r(p.nodes.size());
  auto add = [&](NodeId src, NodeId reader) {
    if (src < 0 || size_t(src) >= r.size()) return;
    auto &v = r[size_t(src)];
    if (std::find(v.begin(), v.end(), reader) == v.end()) v.push_back(reader);
  };
  auto body = [&](const Body &b, NodeId reader) {
    for (const Stmt &s : b.stmts)
      if (s.kind == Stmt::Kind::Load) add(s.node, reader);
  };
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    NodeId id = NodeId(i);
    const NodeKind &k = p.nodes[i].kind;
    if (const auto *pw = std::get_if<PointwiseNode>(&k)) body(pw->body, id);
    if (const auto *rd = std::get_if<ReductionNode>(&k)) body(rd->body, id);
    if (const auto *ex = std::get_if<ExternNode>(&k))
      for (const ExternArg &a : ex->args)
        if (a.kind == ExternArg::Kind::Node) add(a.node, id);
    if (const auto *mo = std::get_if<MultiOutputNode>(&k)) add(mo->source, id);
  }
  return r;
}

void removeNodes(LoopProgram &p, const std::vector<bool> &dead) {
  std::vector<NodeId> remap(p.nodes.size(), -1);
  std::vector<Node> kept;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    if (dead[i]) continue;
    remap[i] = NodeId(kept.size());
    kept.push_back(std::move(p.nodes[i]));
  }
  auto fix = [&](NodeId &id) {
    if (id >= 0) {
      COIL_CHECK(remap[size_t(id)] >= 0) << "a removed node is still referenced";
      id = remap[size_t(id)];
    }
  };
  auto body = [&](Body &b) {
    for (Stmt &s : b.stmts)
      if (s.kind == Stmt::Kind::Load) fix(s.node);
  };
  for (Node &n : kept) {
    if (auto *pw = std::get_if<PointwiseNode>(&n.kind)) body(pw->body);
    if (auto *rd = std::get_if<ReductionNode>(&n.kind)) body(rd->body);
    if (auto *ex = std::get_if<ExternNode>(&n.kind))
      for (ExternArg &a : ex->args)
        if (a.kind == ExternArg::Kind::Node) fix(a.node);
    if (auto *mo = std::get_if<MultiOutputNode>(&n.kind)) fix(mo->source);
  }
  for (NodeId &id : p.inputs) fix(id);
  for (NodeId &id : p.outputs) fix(id);
  p.nodes = std::move(kept);
}

void absorb(LoopProgram &p, NodeId into, NodeId from, ExternNode ex) {
  Node &dst = p.nodes[size_t(into)];
  const Node &src = p.nodes[size_t(from)];
  ex.outputs = {TensorType{dst.dtype, dst.shape}};
  std::vector<int32_t> origins = src.origins;
  for (int32_t o : dst.origins)
    if (std::find(origins.begin(), origins.end(), o) == origins.end()) origins.push_back(o);
  dst.origins = std::move(origins);
  dst.kind = std::move(ex);
}

} // namespace coil::loop
