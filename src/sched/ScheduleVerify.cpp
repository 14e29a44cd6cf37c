// The schedule verifier (see ScheduleVerify.h).
#include "sched/ScheduleVerify.h"

#include <algorithm>
#include <set>

namespace coil::sched {
namespace {

using loop::NodeId;
using loop::Stmt;

class Verifier {
public:
  Verifier(const Schedule &s, const std::string &stage) : s_(s), stage_(stage) {}

  int step() const { return step_; }

  Status run() {
    if (!s_.program) return fail("the schedule has no program");
    const loop::LoopProgram &p = *s_.program;
    if (s_.realized.size() != p.nodes.size())
      return fail("realized has " + std::to_string(s_.realized.size()) + " entries for " +
                  std::to_string(p.nodes.size()) + " nodes");
    std::vector<int> producer(p.nodes.size(), -1);
    for (size_t i = 0; i < p.nodes.size(); ++i) {
      const loop::Node &n = p.nodes[i];
      bool must = std::holds_alternative<loop::InputNode>(n.kind) ||
                  std::holds_alternative<loop::ConstantNode>(n.kind) ||
                  std::holds_alternative<loop::MultiOutputNode>(n.kind);
      if (must && !s_.realized[i]) return fail("node '" + n.name + "' is not realized");
    }
    for (NodeId o : p.outputs)
      if (!s_.realized.at(size_t(o)))
        return fail("program output '" + p.nodes[size_t(o)].name + "' is not realized");
    for (size_t si = 0; si < s_.steps.size(); ++si) {
      step_ = int(si);
      if (const auto *k = std::get_if<Kernel>(&s_.steps[si])) {
        COIL_TRY_STATUS(kernel(*k, producer));
      } else {
        NodeId e = std::get<ExternStep>(s_.steps[si]).node;
        if (e < 0 || size_t(e) >= p.nodes.size() || !p.nodes[size_t(e)].isExtern())
          return fail("an extern step of node " + std::to_string(e) + ", which is no extern");
        if (!s_.realized[size_t(e)]) return fail("its extern '" + name(e) + "' is not realized");
        const auto &ex = std::get<loop::ExternNode>(p.nodes[size_t(e)].kind);
        for (const loop::ExternArg &a : ex.args)
          if (a.kind == loop::ExternArg::Kind::Node) COIL_TRY_STATUS(ready(a.node, producer));
        COIL_TRY_STATUS(produce(e, producer));
        for (size_t i = 0; i < p.nodes.size(); ++i)
          if (const auto *mo = std::get_if<loop::MultiOutputNode>(&p.nodes[i].kind);
              mo && mo->source == e)
            COIL_TRY_STATUS(produce(NodeId(i), producer));
      }
    }
    step_ = -1;
    for (size_t i = 0; i < p.nodes.size(); ++i)
      if (s_.realized[i] && !leaf(NodeId(i)) && producer[i] < 0)
        return fail("realized node '" + p.nodes[i].name + "' is produced by no step");
    return okStatus();
  }

private:
  Status fail(const std::string &rule) const {
    std::string where;
    if (step_ >= 0) {
      where = "step " + std::to_string(step_);
      if (const auto *k = std::get_if<Kernel>(&s_.steps[size_t(step_)]))
        where += " (kernel " + k->name + ")";
      where += ": ";
    }
    return Error::internal("schedule after " + stage_ + ": " + where + rule);
  }

  std::string name(NodeId n) const { return s_.program->nodes[size_t(n)].name; }

  bool leaf(NodeId n) const {
    const loop::Node &x = s_.program->nodes[size_t(n)];
    return std::holds_alternative<loop::InputNode>(x.kind) ||
           std::holds_alternative<loop::ConstantNode>(x.kind);
  }

  Status valid(NodeId n, const std::string &what) const {
    if (n < 0 || size_t(n) >= s_.program->nodes.size())
      return fail(what + " is node " + std::to_string(n) + ", out of range");
    return okStatus();
  }

  /// `n` may be read at this step: a leaf, or produced by an earlier step.
  Status ready(NodeId n, const std::vector<int> &producer) const {
    COIL_TRY_STATUS(valid(n, "a read"));
    if (!s_.realized[size_t(n)]) return fail("it reads '" + name(n) + "', which is not realized");
    if (!leaf(n) && (producer[size_t(n)] < 0 || producer[size_t(n)] >= step_))
      return fail("it reads '" + name(n) + "' before any step produces it");
    return okStatus();
  }

  Status produce(NodeId n, std::vector<int> &producer) const {
    if (leaf(n)) return fail("it writes '" + name(n) + "', an input or constant");
    if (producer[size_t(n)] >= 0)
      return fail("it writes '" + name(n) + "', which step " + std::to_string(producer[size_t(n)]) +
                  " already produced");
    producer[size_t(n)] = step_;
    return okStatus();
  }

  static bool sortedUnique(const std::vector<NodeId> &v) {
    return std::adjacent_find(v.begin(), v.end(), [](NodeId a, NodeId b) { return a >= b; }) ==
           v.end();
  }

  Status kernel(const Kernel &k, std::vector<int> &producer) const {
    const loop::LoopProgram &p = *s_.program;
    if (k.vars.size() != k.ranges.size()) return fail("outer vars and ranges differ in number");
    if (k.phases.empty()) return fail("a kernel without phases");
    if (!sortedUnique(k.reads) || !sortedUnique(k.writes))
      return fail("its reads or writes are not sorted and distinct");
    for (NodeId r : k.reads) COIL_TRY_STATUS(ready(r, producer));
    std::set<NodeId> reads(k.reads.begin(), k.reads.end()),
        writes(k.writes.begin(), k.writes.end());
    NodeId product = -1;
    if (k.gemm) {
      const GemmMainloop &g = *k.gemm;
      COIL_TRY_STATUS(valid(g.node, "its GEMM"));
      product = g.node;
      if (!p.nodes[size_t(g.node)].isExtern()) return fail("its GEMM is no extern node");
      if (s_.realized[size_t(g.node)]) return fail("its GEMM's product is realized");
      if (!reads.count(g.a) || !reads.count(g.b)) return fail("it does not read its operands");
      for (NodeId in : g.inputs)
        if (!reads.count(in)) return fail("it does not read epilogue input '" + name(in) + "'");
    }
    for (size_t pi = 0; pi < k.phases.size(); ++pi) {
      const Phase &ph = k.phases[pi];
      std::string at = "phase " + std::to_string(pi);
      if (ph.vars.size() != ph.ranges.size())
        return fail(at + ": vars and ranges differ in number");
      for (const Stmt &s : ph.body.stmts) {
        if (s.kind == Stmt::Kind::Load) {
          COIL_TRY_STATUS(valid(s.node, at + ": a load"));
          if (!reads.count(s.node) && s.node != product)
            return fail(at + " loads '" + name(s.node) + "', which is not among its reads");
          if (s.index.size() != p.nodes[size_t(s.node)].shape.size())
            return fail(at + " loads '" + name(s.node) + "' with the wrong number of indices");
        }
        if (s.kind == Stmt::Kind::Accumulator &&
            (s.phase < 0 || size_t(s.phase) >= pi || s.slot < 0 ||
             size_t(s.slot) >= k.phases[size_t(s.phase)].reductions.size()))
          return fail(at + " reads accumulator " + std::to_string(s.phase) + "." +
                      std::to_string(s.slot) + ", which no earlier phase has");
      }
      for (const Store &st : ph.stores) {
        COIL_TRY_STATUS(valid(st.node, at + ": a store"));
        if (!writes.count(st.node))
          return fail(at + " stores '" + name(st.node) + "', which is not among its writes");
        if (st.index.size() != p.nodes[size_t(st.node)].shape.size())
          return fail(at + " stores '" + name(st.node) + "' with the wrong number of indices");
        if (st.value < 0 || size_t(st.value) >= ph.body.stmts.size())
          return fail(at + " stores a value that is no statement of its body");
      }
    }
    for (NodeId w : k.writes) {
      COIL_TRY_STATUS(valid(w, "a write"));
      if (!s_.realized[size_t(w)])
        return fail("it writes '" + name(w) + "', which is not realized");
      COIL_TRY_STATUS(produce(w, producer));
    }
    return okStatus();
  }

  const Schedule &s_;
  std::string stage_;
  int step_ = -1;
};

} // namespace

Status verifySchedule(const Schedule &s, const std::string &stage, int *failedStep) {
  Verifier v(s, stage);
  Status st = v.run();
  if (failedStep) *failedStep = st.ok() ? -1 : v.step();
  return st;
}

} // namespace coil::sched
