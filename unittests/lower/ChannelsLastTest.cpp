// Tests of the channels-last pass (lower/ChannelsLast.h): the converted graph, lowered and
// evaluated, matches the interpreter on the original graph, the convolutions call the NHWC
// extern, and no layout copy is left between them.
#include "lower/ChannelsLast.h"

#include "LowerRdTestUtil.h"

#include <string>

using namespace coil;
using namespace coil::rdtest;

namespace {

/// Pointwise nodes whose whole body is one load of another node: layout copies.
int copies(const loop::LoopProgram &p) {
  int n = 0;
  for (const loop::Node &node : p.nodes) {
    const auto *pw = std::get_if<loop::PointwiseNode>(&node.kind);
    if (pw && pw->body.stmts.size() == 1 && pw->body.stmts[0].kind == loop::Stmt::Kind::Load) ++n;
  }
  return n;
}

int externs(const loop::LoopProgram &p, const std::string &prefix) {
  int n = 0;
  for (const loop::Node &node : p.nodes)
    if (const auto *e = std::get_if<loop::ExternNode>(&node.kind))
      n += e->function.rfind(prefix, 0) == 0 ? 1 : 0;
  return n;
}

/// conv+bias -> relu -> maxpool -> 1x1 conv -> + per-channel constant -> + maxpool (residual)
/// -> relu -> depthwise conv -> sigmoid -> average pool; a second output reads the residual sum
/// through a global average pool.
Graph block(DType t) {
  Builder b;
  ValueId x = b.input(t, {2, 5, 9, 8});
  auto cst = [&](Shape s, unsigned seed) { return b.constant(random(t, s, -1, 1, seed)); };
  ValueId c1 = b.node1(OpKind::Conv, {x, cst({6, 5, 3, 3}, 2), cst({6}, 3)},
                       attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
  ValueId r1 = b.node1(OpKind::Relu, {c1});
  ValueId mp = b.node1(OpKind::MaxPool, {r1},
                       attrs({{"kernel_shape", std::vector<int64_t>{2, 2}},
                              {"strides", std::vector<int64_t>{2, 2}}}));
  ValueId c2 = b.node1(OpKind::Conv, {mp, cst({6, 6, 1, 1}, 4)});
  ValueId a1 = b.node1(OpKind::Add, {c2, cst({6, 1, 1}, 5)});
  ValueId a2 = b.node1(OpKind::Add, {a1, mp});
  ValueId r2 = b.node1(OpKind::Relu, {a2});
  ValueId dw = b.node1(OpKind::Conv, {r2, cst({6, 1, 3, 3}, 6)},
                       attrs({{"group", int64_t(6)}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
  ValueId sg = b.node1(OpKind::Sigmoid, {dw});
  ValueId ap = b.node1(OpKind::AveragePool, {sg},
                       attrs({{"kernel_shape", std::vector<int64_t>{2, 2}},
                              {"strides", std::vector<int64_t>{1, 1}}}));
  ValueId gp = b.node1(OpKind::GlobalAveragePool, {a2});
  b.outputs({ap, gp});
  return b.g;
}

TEST(ChannelsLast, BlockMatchesInterpreterWithoutCopiesBetweenConvs) {
  for (DType t : {DType::F32, DType::F64, DType::F16}) {
    SCOPED_TRACE(dtypeName(t));
    Graph g = block(t);
    auto cl = loop::convertToChannelsLast(g);
    ASSERT_TRUE(cl.ok()) << cl.error().render();
    auto p = lower(*cl);
    ASSERT_TRUE(p);
    std::vector<Tensor> in{random(t, {2, 5, 9, 8}, -1, 1, 9)};
    double tol = t == DType::F16 ? 2e-2 : 1e-5;
    expectSame(g, *p, in, tol, tol);
    EXPECT_EQ(externs(*p, "coil_cpu_conv_nhwc_"), 3);
    EXPECT_EQ(externs(*p, "coil_cpu_conv_" + std::string(t == DType::F16 ? "f16" : "f")), 0);
    // Two copies: the graph input into NHWC and the NHWC average pool into the NCHW graph
    // output; every intermediate is stored channels-last.
    EXPECT_EQ(copies(*p), 2) << loop::printLoopProgram(*p);
  }
}

TEST(ChannelsLast, WithoutThePassConvsStayChannelsFirst) {
  Graph g = block(DType::F32);
  auto p = lower(g);
  ASSERT_TRUE(p);
  EXPECT_EQ(externs(*p, "coil_cpu_conv_nhwc_"), 0);
  std::vector<Tensor> in{random(DType::F32, {2, 5, 9, 8}, -1, 1, 9)};
  expectSame(g, *p, in);
}

TEST(ChannelsLast, NonConvGraphIsUnchanged) {
  Builder b;
  ValueId x = b.input(DType::F32, {2, 3, 4, 5});
  b.outputs({b.node1(OpKind::Relu, {x})});
  auto cl = loop::convertToChannelsLast(b.g);
  ASSERT_TRUE(cl.ok());
  ASSERT_EQ(cl->nodes().size(), 1u);
  EXPECT_EQ(cl->nodes()[0].op, OpKind::Relu);
}

} // namespace
