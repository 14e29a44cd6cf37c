// A CUDA kernel's plan as text, and back (the grammar is in CudaPlan.h).
#include "codegen/PlanText.h"
#include "codegen/cuda/CudaCodegen.h"
#include "codegen/cuda/CudaPlan.h"

#include <map>

namespace coil::codegen {

using loop::NodeId;
using plantext::Line;
using plantext::quote;
using plantext::Reader;

namespace {

const std::string_view kMappings[] = {"flat", "last-dim", "dim", "indexed"};

std::string n(int64_t v) {
  return std::to_string(v);
}

class Printer {
public:
  Printer(const sched::Kernel &k, const loop::LoopProgram &p) : k_(k), p_(p) {}

  std::string plan(const CudaKernelPlan &plan, const std::vector<std::string> &gemmConfigs) {
    std::string head = "plan " + k_.name + " cuda ";
    if (!gemmConfigs.empty()) {
      head += "gemm";
      for (const std::string &c : gemmConfigs) head += " " + c;
      line(0, head);
      head = "  epilogue ";
      kind(plan, head);
      s_ += head + "\n";
    } else {
      kind(plan, head);
      line(0, head);
    }
    if (plan.pointwise)
      pointwise(plan);
    else
      rows(plan);
    for (size_t ci = 0; ci < plan.configs.size(); ++ci)
      config(plan.configs[ci], "config c" + n(int64_t(ci)) + " " + plan.configs[ci].name);
    if (!plan.adaptive.empty()) {
      std::string a = "adaptive inner";
      for (const std::string &t : plan.adaptiveInner) a += " " + quote(t);
      line(1, a + (plan.adaptiveSplit ? " split" : ""));
      for (const AdaptiveCase &c : plan.adaptive)
        line(2, "case c" + n(c.config) + " " + quote(c.condition));
    }
    if (plan.splitConfig >= 0) {
      line(1, "split c" + n(plan.splitConfig) + " whole c" + n(plan.wholeConfig) + " inner " +
                  quote(plan.splitInner));
      for (const WorkspaceArray &a : plan.splitArrays)
        line(2, "workspace " + a.name + " " + quote(a.type) + " " + n(a.elemBytes));
    }
    if (!plan.pointwise) config(plan.combine, "combine");
    return s_;
  }

private:
  void line(size_t indent, const std::string &text) {
    s_ += std::string(2 * indent, ' ') + text + "\n";
  }
  std::string name(NodeId id) const { return p_.nodes[size_t(id)].name; }
  static std::string ref(StmtRef r) { return r.store ? "store " + n(r.index) : "%" + n(r.index); }
  static void kind(const CudaKernelPlan &plan, std::string &head) {
    head += plan.pointwise ? "pointwise " + std::string(kMappings[int(plan.mapping)]) : "rows";
  }
  std::string names(const std::set<NodeId> &nodes) const {
    std::string s;
    for (NodeId id : nodes) s += " " + name(id);
    return s;
  }
  void runs(const VecRuns &rv) {
    std::map<VecRuns::Key, std::string> refs;
    for (const auto &[r, key] : rv.access) refs[key] += " " + ref(r);
    for (const auto &[key, list] : refs)
      line(2, "run " + name(key.first) + " " + quote(key.second) + list);
  }
  void pointwise(const CudaKernelPlan &plan) {
    line(1,
         "vector-width " + n(plan.vecWidth) + (plan.vecNeedsLastMultiple ? " last-multiple" : ""));
    if (!plan.vecAlign.empty()) line(1, "align" + names(plan.vecAlign));
    if (!plan.flatNodes.empty()) line(1, "flat-nodes" + names(plan.flatNodes));
    for (const auto &[r, flat] : plan.flatAccess)
      line(1, "access " + ref(r) + (flat ? " flat" : " fixed"));
    if (plan.lastVec) {
      line(1, "last-dim width " + n(plan.lastVec->width) + " extent " + n(plan.lastVec->extent));
      runs(*plan.lastVec);
    }
    if (plan.dimVec) {
      std::string loads;
      for (StmtRef r : plan.dimVec->loads) loads += " " + ref(r);
      line(1, "dim " + n(int64_t(plan.dimVec->dim)) + " width " + n(plan.dimVec->width) +
                  " extent " + n(plan.dimVec->extent) + " loads" + loads);
    }
  }
  void rows(const CudaKernelPlan &plan) {
    for (size_t pi = 0; pi < plan.phaseVec.size(); ++pi) {
      const auto &rv = plan.phaseVec[pi];
      if (!rv) {
        line(1, "phase " + n(int64_t(pi)) + " elements");
        continue;
      }
      line(1, "phase " + n(int64_t(pi)) + " vectors width " + n(rv->width) + " extent " +
                  n(rv->extent));
      runs(*rv);
    }
  }
  void config(const CudaConfig &c, const std::string &head) {
    line(1, head + " block " + n(c.block) + " ept " + n(c.ept) + " vec " + n(c.vec) + " tpr " +
                n(c.tpr) + " rows " + n(c.rows) + (c.split ? " split" : "") +
                (c.regs.rowVec ? " rowvec" : "") + (c.regs.fullOccupancy ? " full-occupancy" : ""));
    for (const auto &[key, reg] : c.regs.cache)
      line(2, "hold " + name(key.first) + " " + quote(key.second) + " " + reg);
  }

  const sched::Kernel &k_;
  const loop::LoopProgram &p_;
  std::string s_;
};

class Parser {
public:
  Parser(Reader &r, const sched::Kernel &k, const loop::LoopProgram &p) : r_(r), k_(k), p_(p) {
    for (size_t i = 0; i < p.nodes.size(); ++i) byName_[p.nodes[i].name] = NodeId(i);
  }

  Expected<CudaKernelPlan> plan(std::vector<std::string> *gemmConfigs) {
    COIL_TRY(const Line *headLine, r_.planHeader(k_.name, "cuda"));
    const Line &head = *headLine;
    CudaKernelPlan plan;
    const Line *kindLine = &head;
    size_t kindAt = 3;
    std::vector<std::string> unused;
    if (!gemmConfigs) gemmConfigs = &unused;
    if (head.words.size() > 3 && head.words[3].text == "gemm" && !head.words[3].quoted) {
      if (!k_.gemm) return r_.error(head, 3, "kernel '" + k_.name + "' has no GEMM");
      for (size_t i = 4; i < head.words.size(); ++i) {
        COIL_TRY(std::string c, r_.bare(head, i, "a CUTLASS config name"));
        gemmConfigs->push_back(c);
      }
      if (gemmConfigs->empty()) return r_.error(head, 4, "expected a CUTLASS config name");
      COIL_TRY(kindLine, r_.expectLine(1, "epilogue", where()));
      kindAt = 1;
    } else if (k_.gemm) {
      return r_.error(head, 3, "expected 'gemm': kernel '" + k_.name + "' computes a GEMM");
    }
    COIL_TRY(size_t kind, r_.choice(*kindLine, kindAt, {"rows", "pointwise"}, "kind"));
    plan.pointwise = kind == 1;
    if (plan.pointwise != k_.pointwise())
      return r_.error(*kindLine, kindAt,
                      "kernel '" + k_.name + "' is " +
                          (k_.pointwise() ? "pointwise (one phase without inner loops)"
                                          : "not pointwise: its plan is 'rows'"));
    if (plan.pointwise) {
      COIL_TRY(size_t mi, r_.choice(*kindLine, kindAt + 1,
                                    {std::begin(kMappings), std::end(kMappings)}, "mapping"));
      plan.mapping = PointwiseMapping(mi);
      COIL_TRY_STATUS(r_.arity(*kindLine, kindAt + 2, "pointwise MAPPING"));
      COIL_TRY_STATUS(pointwise(plan));
    } else {
      COIL_TRY_STATUS(r_.arity(*kindLine, kindAt + 1, "rows"));
      COIL_TRY_STATUS(rows(plan));
    }
    while (r_.nextIs(1, "config")) {
      const Line &l = r_.take();
      COIL_TRY(std::string index, r_.bare(l, 1, "the config's number c<i>"));
      if (index != "c" + n(int64_t(plan.configs.size())))
        return r_.error(l, 1, "expected config c" + n(int64_t(plan.configs.size())));
      CudaConfig c;
      COIL_TRY(c.name, r_.bare(l, 2, "a config name"));
      COIL_TRY_STATUS(config(l, 3, c));
      plan.configs.push_back(std::move(c));
    }
    if (r_.nextIs(1, "adaptive")) COIL_TRY_STATUS(adaptive(plan));
    if (r_.nextIs(1, "split")) COIL_TRY_STATUS(split(plan));
    if (!plan.pointwise) {
      COIL_TRY(const Line *l, r_.expectLine(1, "combine", where()));
      plan.combine.name = "combine";
      COIL_TRY_STATUS(config(*l, 1, plan.combine));
    }
    COIL_TRY_STATUS(r_.planEnd(k_.name));
    std::string broken = verifyCudaKernelPlan(plan, k_.phases.size());
    if (!broken.empty()) return r_.error(head, 0, "kernel '" + k_.name + "': " + broken);
    return plan;
  }

private:
  std::string where() const { return "the plan of kernel '" + k_.name + "'"; }
  Expected<NodeId> node(const Line &l, size_t i) {
    COIL_TRY(std::string name, r_.bare(l, i, "a node name"));
    auto it = byName_.find(name);
    if (it == byName_.end()) return r_.error(l, i, "unknown node '" + name + "'");
    return it->second;
  }
  Expected<std::set<NodeId>> nodes(const Line &l, size_t from) {
    std::set<NodeId> out;
    for (size_t i = from; i < l.words.size(); ++i) {
      COIL_TRY(NodeId id, node(l, i));
      if (!out.insert(id).second) return r_.error(l, i, "node listed twice");
    }
    return out;
  }
  /// A statement reference at word `i` (`%N` or `store N`) of phase `pi`; `i` moves past it.
  Expected<StmtRef> ref(const Line &l, size_t &i, size_t pi) {
    const sched::Phase &ph = k_.phases[pi];
    COIL_TRY(std::string w, r_.bare(l, i, "a statement (%N) or 'store N'"));
    if (w == "store") {
      COIL_TRY(int64_t s, r_.integer(l, i + 1, "a store number"));
      if (s < 0 || size_t(s) >= ph.stores.size())
        return r_.error(l, i + 1, "phase " + n(int64_t(pi)) + " has no store " + n(s));
      i += 2;
      return storeRef(pi, size_t(s));
    }
    std::optional<int64_t> s = w.size() > 1 && w[0] == '%' && w[1] != '-'
                                   ? plantext::parseInteger(std::string_view(w).substr(1))
                                   : std::nullopt;
    if (!s) return r_.error(l, i, "expected a statement (%N) or 'store N'");
    if (size_t(*s) >= ph.body.stmts.size() ||
        ph.body.stmts[size_t(*s)].kind != loop::Stmt::Kind::Load)
      return r_.error(l, i, "statement " + w + " of phase " + n(int64_t(pi)) + " is no load");
    ++i;
    return loadRef(pi, size_t(*s));
  }
  NodeId nodeOf(StmtRef r) const {
    const sched::Phase &ph = k_.phases[r.phase];
    return r.store ? ph.stores[r.index].node : ph.body.stmts[r.index].node;
  }
  /// `NAME int` pairs from word `i`, in this order.
  Status ints(const Line &l, size_t i,
              std::initializer_list<std::pair<const char *, int64_t *>> f) {
    for (const auto &[key, out] : f) {
      COIL_TRY_STATUS(r_.keyword(l, i, key));
      COIL_TRY(*out, r_.integer(l, i + 1, std::string("the ") + key));
      i += 2;
    }
    return okStatus();
  }
  Status runs(VecRuns &rv, size_t pi) {
    while (r_.nextIs(2, "run")) {
      const Line &l = r_.take();
      COIL_TRY(NodeId id, node(l, 1));
      COIL_TRY(std::string offset, r_.string(l, 2, "the run's start offset"));
      VecRuns::Key key{id, offset};
      if (l.words.size() == 3) return r_.error(l, 3, "a run without accesses");
      for (size_t i = 3; i < l.words.size();) {
        size_t at = i;
        COIL_TRY(StmtRef r, ref(l, i, pi));
        if (nodeOf(r) != id)
          return r_.error(l, at,
                          "this access is of node '" + p_.nodes[size_t(nodeOf(r))].name +
                              "', not of the run's");
        if (!rv.access.emplace(r, key).second) return r_.error(l, at, "an access in two runs");
      }
    }
    return okStatus();
  }
  Status pointwise(CudaKernelPlan &plan) {
    COIL_TRY(const Line *vwLine, r_.expectLine(1, "vector-width", where()));
    const Line &vw = *vwLine;
    COIL_TRY(plan.vecWidth, r_.integer(vw, 1, "the vector width"));
    if (vw.words.size() > 2) {
      COIL_TRY_STATUS(r_.keyword(vw, 2, "last-multiple"));
      COIL_TRY_STATUS(r_.arity(vw, 3, "vector-width W last-multiple"));
      plan.vecNeedsLastMultiple = true;
    }
    if (r_.nextIs(1, "align")) {
      COIL_TRY(plan.vecAlign, nodes(r_.take(), 1));
    }
    if (r_.nextIs(1, "flat-nodes")) {
      COIL_TRY(plan.flatNodes, nodes(r_.take(), 1));
    }
    while (r_.nextIs(1, "access")) {
      const Line &l = r_.take();
      size_t i = 1;
      COIL_TRY(StmtRef r, ref(l, i, 0));
      COIL_TRY(size_t how, r_.choice(l, i, {"fixed", "flat"}, "access"));
      COIL_TRY_STATUS(r_.arity(l, i + 1, "access REF flat|fixed"));
      if (!plan.flatAccess.emplace(r, how == 1).second)
        return r_.error(l, 1, "this access is listed twice");
    }
    if (r_.nextIs(1, "last-dim")) {
      const Line &l = r_.take();
      VecRuns rv;
      COIL_TRY_STATUS(ints(l, 1, {{"width", &rv.width}, {"extent", &rv.extent}}));
      COIL_TRY_STATUS(r_.arity(l, 5, "last-dim width W extent E"));
      COIL_TRY_STATUS(runs(rv, 0));
      plan.lastVec = std::move(rv);
    }
    if (r_.nextIs(1, "dim")) {
      const Line &l = r_.take();
      DimVecs dv;
      COIL_TRY(int64_t dim, r_.integer(l, 1, "an outer dim"));
      if (dim < 0 || size_t(dim) + 1 >= k_.vars.size())
        return r_.error(l, 1, "dim " + n(dim) + " is not an outer dim before the last");
      dv.dim = size_t(dim);
      COIL_TRY_STATUS(ints(l, 2, {{"width", &dv.width}, {"extent", &dv.extent}}));
      COIL_TRY_STATUS(r_.keyword(l, 6, "loads"));
      for (size_t i = 7; i < l.words.size();) {
        size_t at = i;
        COIL_TRY(StmtRef r, ref(l, i, 0));
        if (r.store) return r_.error(l, at, "a vector load, not a store");
        dv.loads.push_back(r);
      }
      plan.dimVec = std::move(dv);
    }
    return okStatus();
  }
  Status rows(CudaKernelPlan &plan) {
    while (r_.nextIs(1, "phase")) {
      const Line &l = r_.take();
      COIL_TRY(int64_t pi, r_.integer(l, 1, "the phase number"));
      if (pi != int64_t(plan.phaseVec.size()))
        return r_.error(l, 1, "expected phase " + n(int64_t(plan.phaseVec.size())));
      if (size_t(pi) >= k_.phases.size())
        return r_.error(
            l, 1, "kernel '" + k_.name + "' has " + n(int64_t(k_.phases.size())) + " phase(s)");
      COIL_TRY(size_t how, r_.choice(l, 2, {"elements", "vectors"}, "phase access"));
      if (how == 0) {
        COIL_TRY_STATUS(r_.arity(l, 3, "phase P elements"));
        plan.phaseVec.emplace_back();
        continue;
      }
      VecRuns rv;
      COIL_TRY_STATUS(ints(l, 3, {{"width", &rv.width}, {"extent", &rv.extent}}));
      COIL_TRY_STATUS(r_.arity(l, 7, "phase P vectors width W extent E"));
      COIL_TRY_STATUS(runs(rv, size_t(pi)));
      plan.phaseVec.push_back(std::move(rv));
    }
    return okStatus();
  }
  Status config(const Line &l, size_t i, CudaConfig &c) {
    COIL_TRY_STATUS(ints(l, i,
                         {{"block", &c.block},
                          {"ept", &c.ept},
                          {"vec", &c.vec},
                          {"tpr", &c.tpr},
                          {"rows", &c.rows}}));
    i += 10;
    for (const auto &[flag, out] : {std::pair<const char *, bool *>{"split", &c.split},
                                    {"rowvec", &c.regs.rowVec},
                                    {"full-occupancy", &c.regs.fullOccupancy}})
      if (i < l.words.size() && !l.words[i].quoted && l.words[i].text == flag) {
        *out = true;
        ++i;
      }
    if (i < l.words.size())
      return r_.error(l, i,
                      "expected the end of the config, or split, rowvec, full-occupancy (in "
                      "this order)");
    while (r_.nextIs(2, "hold")) {
      const Line &h = r_.take();
      COIL_TRY(NodeId id, node(h, 1));
      COIL_TRY(std::string offset, r_.string(h, 2, "the run's start offset"));
      COIL_TRY(std::string reg, r_.bare(h, 3, "a register array name"));
      COIL_TRY_STATUS(r_.arity(h, 4, "hold NODE \"OFFSET\" NAME"));
      if (!c.regs.cache.emplace(VecRuns::Key{id, offset}, reg).second)
        return r_.error(h, 1, "this run is held twice");
    }
    return okStatus();
  }
  Expected<int32_t> configRef(const Line &l, size_t i, const CudaKernelPlan &plan) {
    COIL_TRY(std::string w, r_.bare(l, i, "a config c<i>"));
    for (size_t c = 0; c < plan.configs.size(); ++c)
      if (w == "c" + n(int64_t(c))) return int32_t(c);
    return r_.error(l, i, "no config '" + w + "'");
  }
  Status adaptive(CudaKernelPlan &plan) {
    const Line &l = r_.take();
    COIL_TRY_STATUS(r_.keyword(l, 1, "inner"));
    size_t i = 2;
    for (; i < l.words.size() && l.words[i].quoted; ++i)
      plan.adaptiveInner.push_back(l.words[i].text);
    if (plan.adaptiveInner.empty()) return r_.error(l, 2, "expected an inner size (a string)");
    if (i < l.words.size()) {
      COIL_TRY_STATUS(r_.keyword(l, i, "split"));
      COIL_TRY_STATUS(r_.arity(l, i + 1, "adaptive inner \"SIZE\"... split"));
      plan.adaptiveSplit = true;
    }
    while (r_.nextIs(2, "case")) {
      const Line &c = r_.take();
      COIL_TRY(int32_t config, configRef(c, 1, plan));
      COIL_TRY(std::string cond, r_.string(c, 2, "the case's condition"));
      COIL_TRY_STATUS(r_.arity(c, 3, "case c<i> \"CONDITION\""));
      plan.adaptive.push_back(AdaptiveCase{cond, config});
    }
    if (plan.adaptive.empty()) return r_.error(l, 0, "an adaptive launcher without cases");
    return okStatus();
  }
  Status split(CudaKernelPlan &plan) {
    const Line &l = r_.take();
    COIL_TRY(plan.splitConfig, configRef(l, 1, plan));
    COIL_TRY_STATUS(r_.keyword(l, 2, "whole"));
    COIL_TRY(plan.wholeConfig, configRef(l, 3, plan));
    COIL_TRY_STATUS(r_.keyword(l, 4, "inner"));
    COIL_TRY(plan.splitInner, r_.string(l, 5, "phase 0's inner size"));
    COIL_TRY_STATUS(r_.arity(l, 6, "split c<i> whole c<j> inner \"SIZE\""));
    while (r_.nextIs(2, "workspace")) {
      const Line &w = r_.take();
      WorkspaceArray a;
      COIL_TRY(a.name, r_.bare(w, 1, "the array's name"));
      COIL_TRY(a.type, r_.string(w, 2, "its C type"));
      COIL_TRY(a.elemBytes, r_.integer(w, 3, "its element size"));
      COIL_TRY_STATUS(r_.arity(w, 4, "workspace NAME \"TYPE\" BYTES"));
      plan.splitArrays.push_back(std::move(a));
    }
    return okStatus();
  }

  Reader &r_;
  const sched::Kernel &k_;
  const loop::LoopProgram &p_;
  std::map<std::string, NodeId> byName_;
};

} // namespace

std::string printCudaKernelPlan(const CudaKernelPlan &plan, const sched::Kernel &k,
                                const loop::LoopProgram &p,
                                const std::vector<std::string> &gemmConfigs) {
  return Printer(k, p).plan(plan, gemmConfigs);
}

Expected<CudaKernelPlan> parseCudaKernelPlan(Reader &r, const sched::Kernel &k,
                                             const loop::LoopProgram &p,
                                             std::vector<std::string> *gemmConfigs) {
  return Parser(r, k, p).plan(gemmConfigs);
}

Status checkCudaPlanText(const CudaKernelSource &src, const sched::Kernel &k,
                         const loop::LoopProgram &p) {
  std::vector<std::string> configs;
  Status st = plantext::checkRoundTrip(
      printCudaKernelPlan(src.plan, k, p, src.gemmConfigs), src.plan,
      "cuda codegen: kernel '" + k.name + "'",
      [&](Reader &r) { return parseCudaKernelPlan(r, k, p, &configs); },
      [&](const CudaKernelPlan &plan) { return printCudaKernelPlan(plan, k, p, configs); });
  if (st.ok() && configs != src.gemmConfigs)
    return Error::internal("cuda codegen: kernel '" + k.name +
                           "': its plan text parses to other GEMM configs");
  return st;
}

} // namespace coil::codegen
