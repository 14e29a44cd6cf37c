#include "sched/Schedule.h"

#include <gtest/gtest.h>

using namespace coil;
using namespace coil::loop;

namespace {

/// Hand-built Loop IR helpers.
struct ProgramBuilder {
  LoopProgram p;
  Graph g;

  ProgramBuilder() { p.graph = &g; }

  NodeId input(const std::string &name, std::vector<SymInt> shape) {
    loop::Node n;
    n.name = name;
    n.shape = std::move(shape);
    n.kind = InputNode{};
    NodeId id = p.add(std::move(n));
    p.inputs.push_back(id);
    p.inputNames.push_back(name);
    return id;
  }

  static Val load(Body &b, NodeId node, std::vector<SymInt> idx) {
    Stmt s;
    s.kind = Stmt::Kind::Load;
    s.node = node;
    s.index = std::move(idx);
    return b.add(s);
  }
  static Val op(Body &b, ScalarOp op, std::vector<Val> args) {
    Stmt s;
    s.kind = Stmt::Kind::Op;
    s.op = op;
    s.args = std::move(args);
    return b.add(s);
  }

  NodeId pointwise(const std::string &name, std::vector<SymInt> shape,
                   const std::function<Val(Body &, std::vector<SymInt>)> &fn) {
    PointwiseNode pw;
    std::vector<SymInt> idx;
    for (size_t d = 0; d < shape.size(); ++d) {
      pw.vars.push_back(loopVar(int(d)));
      idx.push_back(SymInt::symbol(pw.vars.back()));
    }
    pw.result = fn(pw.body, idx);
    loop::Node n;
    n.name = name;
    n.shape = std::move(shape);
    n.kind = std::move(pw);
    return p.add(std::move(n));
  }

  NodeId reduce(const std::string &name, ReduceKind kind, std::vector<SymInt> outer,
                std::vector<SymInt> rranges,
                const std::function<Val(Body &, std::vector<SymInt>, std::vector<SymInt>)> &fn) {
    ReductionNode r;
    r.kind = kind;
    std::vector<SymInt> o, ri;
    for (size_t d = 0; d < outer.size(); ++d) {
      r.vars.push_back(loopVar(int(d)));
      o.push_back(SymInt::symbol(r.vars.back()));
    }
    for (size_t d = 0; d < rranges.size(); ++d) {
      r.rvars.push_back(reduceVar(int(d)));
      ri.push_back(SymInt::symbol(r.rvars.back()));
    }
    r.rranges = std::move(rranges);
    r.value = fn(r.body, o, ri);
    loop::Node n;
    n.name = name;
    n.shape = std::move(outer);
    n.kind = std::move(r);
    return p.add(std::move(n));
  }
};

const sched::Kernel &onlyKernel(const sched::Schedule &s) {
  EXPECT_EQ(s.steps.size(), 1u);
  return std::get<sched::Kernel>(s.steps.at(0));
}

} // namespace

using sched::Kernel;

TEST(Schedule, SoftmaxBecomesOneKernelWithThreePhases) {
  ProgramBuilder b;
  SymInt N = SymInt::symbol("N");
  b.p.symbols["N"] = {1, 1024};
  NodeId x = b.input("x", {N, 8});
  NodeId mx = b.reduce("mx", ReduceKind::Max, {N}, {8}, [&](Body &body, auto o, auto r) {
    return ProgramBuilder::load(body, x, {o[0], r[0]});
  });
  NodeId e = b.pointwise("e", {N, 8}, [&](Body &body, auto i) {
    Val v = ProgramBuilder::load(body, x, {i[0], i[1]});
    Val m = ProgramBuilder::load(body, mx, {i[0]});
    return ProgramBuilder::op(body, ScalarOp::Exp,
                              {ProgramBuilder::op(body, ScalarOp::Sub, {v, m})});
  });
  NodeId sum = b.reduce("sum", ReduceKind::Sum, {N}, {8}, [&](Body &body, auto o, auto r) {
    return ProgramBuilder::load(body, e, {o[0], r[0]});
  });
  NodeId y = b.pointwise("y", {N, 8}, [&](Body &body, auto i) {
    Val v = ProgramBuilder::load(body, e, {i[0], i[1]});
    Val s = ProgramBuilder::load(body, sum, {i[0]});
    return ProgramBuilder::op(body, ScalarOp::Div, {v, s});
  });
  b.p.outputs = {y};
  b.p.outputNames = {"y"};

  auto s = sched::scheduleProgram(b.p);
  ASSERT_TRUE(s.ok()) << s.error().render();
  const Kernel &k = onlyKernel(*s);
  ASSERT_EQ(k.phases.size(), 3u);
  EXPECT_EQ(k.phases[0].reductions.size(), 1u);
  EXPECT_EQ(k.phases[1].reductions.size(), 1u);
  EXPECT_EQ(k.phases[2].stores.size(), 1u);
  EXPECT_EQ(k.phases[2].vars.size(), 1u); // the row's inner loop
  EXPECT_EQ(k.reads, std::vector<NodeId>{x});
  EXPECT_EQ(k.writes, std::vector<NodeId>{y});
  // Neither reduction result nor exp(x - max) is a buffer.
  EXPECT_FALSE(s->realized[size_t(mx)]);
  EXPECT_FALSE(s->realized[size_t(sum)]);
  EXPECT_FALSE(s->realized[size_t(e)]);
  // Later phases read the earlier ones' accumulators.
  int accumulators = 0;
  for (const auto &ph : k.phases)
    for (const Stmt &st : ph.body.stmts) accumulators += st.kind == Stmt::Kind::Accumulator;
  EXPECT_GE(accumulators, 2);
  EXPECT_NE(sched::fusionReport(*s).find("max over [8] | sum over [8] | store over [8]"),
            std::string::npos)
      << sched::fusionReport(*s);
}

TEST(Schedule, PointwiseChainInlinesIntoOneKernel) {
  ProgramBuilder b;
  NodeId x = b.input("x", {4, 5});
  NodeId a = b.pointwise("a", {4, 5}, [&](Body &body, auto i) {
    return ProgramBuilder::op(body, ScalarOp::Neg, {ProgramBuilder::load(body, x, i)});
  });
  NodeId c = b.pointwise("c", {4, 5}, [&](Body &body, auto i) {
    return ProgramBuilder::op(body, ScalarOp::Exp, {ProgramBuilder::load(body, a, i)});
  });
  b.p.outputs = {c};
  auto s = sched::scheduleProgram(b.p);
  ASSERT_TRUE(s.ok());
  const Kernel &k = onlyKernel(*s);
  EXPECT_EQ(k.reads, std::vector<NodeId>{x});
  EXPECT_EQ(k.writes, std::vector<NodeId>{c});
  EXPECT_FALSE(s->realized[size_t(a)]);
  EXPECT_EQ(k.fused.size(), 2u);
}

TEST(Schedule, ExpensiveSharedProducerIsRealized) {
  ProgramBuilder b;
  NodeId x = b.input("x", {16});
  NodeId heavy = b.pointwise("heavy", {16}, [&](Body &body, auto i) {
    Val v = ProgramBuilder::load(body, x, i);
    for (int k = 0; k < 20; ++k) v = ProgramBuilder::op(body, ScalarOp::Sin, {v});
    return v;
  });
  // Two reductions read it, so inlining would compute it twice.
  NodeId r1 = b.reduce("r1", ReduceKind::Sum, {}, {16}, [&](Body &body, auto, auto r) {
    return ProgramBuilder::load(body, heavy, {r[0]});
  });
  NodeId r2 = b.reduce("r2", ReduceKind::Max, {}, {16}, [&](Body &body, auto, auto r) {
    return ProgramBuilder::load(body, heavy, {r[0]});
  });
  b.p.outputs = {r1, r2};
  auto s = sched::scheduleProgram(b.p);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->realized[size_t(heavy)]);
  // A scalar reduction's iteration space is one point: nothing fuses into it.
  EXPECT_EQ(s->steps.size(), 3u);
}

TEST(Schedule, HorizontalFusionOfSiblingsReadingOneInput) {
  ProgramBuilder b;
  SymInt N = SymInt::symbol("N");
  NodeId x = b.input("x", {N, 3});
  NodeId a = b.pointwise("a", {N, 3}, [&](Body &body, auto i) {
    return ProgramBuilder::op(body, ScalarOp::Neg, {ProgramBuilder::load(body, x, i)});
  });
  NodeId c = b.pointwise("c", {N, 3}, [&](Body &body, auto i) {
    return ProgramBuilder::op(body, ScalarOp::Abs, {ProgramBuilder::load(body, x, i)});
  });
  b.p.outputs = {a, c};
  auto s = sched::scheduleProgram(b.p);
  ASSERT_TRUE(s.ok());
  const Kernel &k = onlyKernel(*s);
  EXPECT_EQ(k.phases.at(0).stores.size(), 2u);
  EXPECT_EQ(k.writes, (std::vector<NodeId>{a, c}));
  sched::ScheduleOptions off;
  off.fuseHorizontal = false;
  ProgramBuilder b2;
  auto s2 = sched::scheduleProgram(b.p, off);
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ(s2->steps.size(), 2u);
}

TEST(Schedule, OutputThatIsAnInputGetsACopy) {
  ProgramBuilder b;
  NodeId x = b.input("x", {3});
  b.p.outputs = {x, x};
  auto s = sched::scheduleProgram(b.p);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(b.p.outputs.size(), 2u);
  EXPECT_NE(b.p.outputs[0], x);
  EXPECT_NE(b.p.outputs[1], x);
  EXPECT_NE(b.p.outputs[0], b.p.outputs[1]);
}
