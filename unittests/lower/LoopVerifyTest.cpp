// The Loop IR verifier (lower/LoopVerify.h): lowered programs verify, and each broken
// invariant is reported as an internal error naming the node and the rule.
#include "lower/LoopVerify.h"

#include "ir/Parser.h"
#include "lower/Lower.h"

#include <gtest/gtest.h>

using namespace coil;
using namespace coil::loop;

namespace {

LoopProgram lowered() {
  auto g = parseGraph(R"(graph @g(%x: f32[N, 8], %w: f32[8, 4]) -> (%y, %s) {
  symbol N in [1, 64]
  %m = MatMul(%x, %w) : f32[N, 4]
  %y = Relu(%m) : f32[N, 4]
  %ax = constant i64[1] [1]
  %s = ReduceSum(%y, %ax) {keepdims = 0} : f32[N]
}
)",
                      "<test>");
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().render());
  static Graph keep;
  keep = std::move(*g);
  auto p = lowerGraph(keep);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().render());
  return std::move(*p);
}

/// The first node of kind T.
template <class T> loop::Node &first(LoopProgram &p) {
  for (loop::Node &n : p.nodes)
    if (std::holds_alternative<T>(n.kind)) return n;
  ADD_FAILURE() << "no such node";
  return p.nodes.front();
}

void expectBroken(const LoopProgram &p, const std::string &rule) {
  Status s = verifyLoopProgram(p, "test");
  ASSERT_FALSE(s.ok()) << "expected: " << rule;
  EXPECT_EQ(s.error().kind(), ErrorKind::Internal);
  EXPECT_NE(s.error().message().find(rule), std::string::npos) << s.error().message();
  EXPECT_NE(s.error().message().find("loop IR after test"), std::string::npos);
}

} // namespace

TEST(LoopVerify, LoweredProgramsVerify) {
  LoopProgram p = lowered();
  Status s = verifyLoopProgram(p, "lowering");
  EXPECT_TRUE(s.ok()) << s.error().render();
}

TEST(LoopVerify, ALoadOfALaterNode) {
  LoopProgram p = lowered();
  loop::Node &pw = first<PointwiseNode>(p);
  for (Stmt &s : std::get<PointwiseNode>(pw.kind).body.stmts)
    if (s.kind == Stmt::Kind::Load) s.node = NodeId(p.nodes.size() - 1);
  expectBroken(p, "which is not an earlier node");
}

TEST(LoopVerify, ALoadWithTooFewIndices) {
  LoopProgram p = lowered();
  for (Stmt &s : std::get<PointwiseNode>(first<PointwiseNode>(p).kind).body.stmts)
    if (s.kind == Stmt::Kind::Load) s.index.pop_back();
  expectBroken(p, "indices for its 2 dims");
}

TEST(LoopVerify, AnOpWithTheWrongArity) {
  LoopProgram p = lowered();
  for (Stmt &s : std::get<PointwiseNode>(first<PointwiseNode>(p).kind).body.stmts)
    if (s.kind == Stmt::Kind::Op) s.args.push_back(s.args.front());
  expectBroken(p, "operands, not");
}

TEST(LoopVerify, AResultOfAnotherDType) {
  LoopProgram p = lowered();
  first<PointwiseNode>(p).dtype = DType::F64;
  expectBroken(p, "its result is f32, the node f64");
}

TEST(LoopVerify, AnIndexOverAnUnknownVariable) {
  LoopProgram p = lowered();
  for (Stmt &s : std::get<ReductionNode>(first<ReductionNode>(p).kind).body.stmts)
    if (s.kind == Stmt::Kind::Load) s.index.back() = SymInt::symbol("%nowhere");
  expectBroken(p, "uses '%nowhere', which is neither a size symbol nor in scope");
}

TEST(LoopVerify, ExternArgumentsAgainstTheTable) {
  LoopProgram p = lowered();
  auto &ex = std::get<ExternNode>(first<ExternNode>(p).kind);
  ex.args.pop_back();
  expectBroken(p, "takes arguments of kinds");
}

TEST(LoopVerify, NamesAreUniqueIdentifiers) {
  LoopProgram p = lowered();
  p.nodes[1].name = p.nodes[0].name;
  expectBroken(p, "its name is used twice");
  LoopProgram q = lowered();
  q.nodes[0].name = "not an identifier";
  expectBroken(q, "not a C identifier");
}

TEST(LoopVerify, AShapeOverAnUnknownSymbol) {
  LoopProgram p = lowered();
  first<ReductionNode>(p).shape[0] = SymInt::symbol("Q");
  expectBroken(p, "uses 'Q', which is neither a size symbol nor in scope");
}
