// Tests of the lowering framework (lower/Lower.cpp), the Loop IR printer and the Loop IR
// evaluator (lower/LoopEval.cpp).
#include "LowerTestUtil.h"

#include <deque>
#include <gtest/gtest.h>

using namespace coil;
using namespace coil::loop;
using namespace coil::lowertest;

namespace {

LoopProgram lowerText(const std::string &text) {
  static std::deque<Graph> graphs; // kept alive: the program points at its graph
  Graph *g = &graphs.emplace_back(parseOrDie(text));
  auto p = lowerGraph(*g);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().render());
  return p.ok() ? std::move(p).value() : LoopProgram();
}

TEST(LowerFramework, ReluPrintsReadably) {
  LoopProgram p = lowerText(R"(graph @g(%x: f32[N, 4]) -> (%y) {
    symbol N in [1, 16]
    %y = Relu(%x) : f32[N, 4] name "act"
  })");
  std::string text = printLoopProgram(p);
  EXPECT_NE(text.find("x: f32[N, 4] = input 'x'"), std::string::npos) << text;
  EXPECT_NE(text.find("relu: f32[N, 4] = pointwise (%x0, %x1)"), std::string::npos) << text;
  EXPECT_NE(text.find("%0 = load f32 x[%x0, %x1]"), std::string::npos) << text;
  EXPECT_NE(text.find("output y = relu"), std::string::npos) << text;
  EXPECT_NE(text.find("symbols N in [1, 16]"), std::string::npos) << text;
  EXPECT_EQ(text, printLoopProgram(p)); // deterministic
  ASSERT_EQ(p.nodes.size(), 2u);
  EXPECT_EQ(p.nodes[1].origins, std::vector<int32_t>{0});
}

TEST(LowerFramework, PrintedProgramGolden) {
  LoopProgram p = lowerText(R"(graph @g(%x: f32[N, 4], %i: i64[2]) -> (%y, %g) {
    symbol N in [1, 16]
    %c = constant f32[4] [0.5, -1, 2, 0.1]
    %s = Add(%x, %c) : f32[N, 4] name "add0"
    %y = Gelu(%s) {approximate = "tanh"} : f32[N, 4]
    %g = Gather(%x, %i) {axis = 1} : f32[N, 2]
  })");
  const char *want = R"(symbols N in [1, 16]

x: f32[N, 4] = input 'x'

i: i64[2] = input 'i'

c: f32[4] = constant 'c' [0.5, -1, 2, 0.1]

add: f32[N, 4] = pointwise (%x0, %x1)
  %0 = load f32 x[%x0, %x1]
  %1 = load f32 c[%x1]
  %2 = add f32 %0, %1
  result %2

gelu: f32[N, 4] = pointwise (%x0, %x1)
  %0 = load f32 add[%x0, %x1]
  %1 = const f32 0.5
  %2 = const f32 1
  %3 = const f32 0.7978845608028654
  %4 = const f32 0.044715
  %5 = mul f32 %0, %0
  %6 = mul f32 %5, %0
  %7 = mul f32 %4, %6
  %8 = add f32 %0, %7
  %9 = mul f32 %3, %8
  %10 = mul f32 %1, %0
  %11 = tanh f32 %9
  %12 = add f32 %2, %11
  %13 = mul f32 %10, %12
  result %13

gather: f32[N, 2] = pointwise (%x0, %x1)
  %0 = load i64 i[%x1]
  %1 = indirect %i0 = %0 in [0, 4) wrap
  %2 = load f32 x[%x0, %i0]
  result %2

input x = x
input i = i
output y = gelu
output g = gather
)";
  EXPECT_EQ(printLoopProgram(p), want);
}

TEST(LowerFramework, EveryElementwiseAndShapeOpHasALowering) {
  for (size_t k = 0; k < kNumOps; ++k) {
    OpKind op = OpKind(k);
    if (opFamily(op) == OpFamily::Elementwise || opFamily(op) == OpFamily::ShapeOps)
      EXPECT_NE(lowerFnFor(op), nullptr) << opName(op);
  }
}

TEST(LowerFramework, NodeNamesAreUniqueCIdentifiers) {
  LoopProgram p = lowerText(R"(graph @g(%"in put/0": f32[3]) -> (%c) {
    %a = Neg(%"in put/0") : f32[3] name "int"
    %b = Neg(%a) : f32[3] name "int"
    %c = Add(%a, %b) : f32[3] name "9lives"
  })");
  std::set<std::string> names;
  for (const loop::Node &n : p.nodes) {
    EXPECT_TRUE(names.insert(n.name).second) << n.name;
    ASSERT_FALSE(n.name.empty());
    EXPECT_FALSE(std::isdigit(static_cast<unsigned char>(n.name[0]))) << n.name;
    for (char c : n.name)
      EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '_') << n.name;
    EXPECT_NE(n.name, "int");
  }
}

TEST(LowerFramework, ReshapeAvoidsDivisionWhereRunsMatch) {
  // [N, 12] -> [N, 3, 4]: N maps to N, 12 to (3, 4) by a linear index without // or %.
  LoopProgram p = lowerText(R"(graph @g(%x: f32[N, 12]) -> (%z) {
    %s = constant i64[3] [0, 3, 4]
    %y = Reshape(%x, %s) : f32[N, 3, 4]
    %z = Neg(%y) : f32[N, 3, 4]
  })");
  std::string text = printLoopProgram(p);
  EXPECT_NE(text.find("load f32 x[%x0, 4*%x1 + %x2]"), std::string::npos) << text;
  EXPECT_EQ(text.find("//"), std::string::npos) << text;
  // The inverse splits one dim: div and mod only within the run.
  LoopProgram q = lowerText(R"(graph @g(%x: f32[N, 3, 4]) -> (%z) {
    %s = constant i64[2] [0, 12]
    %y = Reshape(%x, %s) : f32[N, 12]
    %z = Neg(%y) : f32[N, 12]
  })");
  std::string t2 = printLoopProgram(q);
  EXPECT_NE(t2.find("load f32 x[%x0, %x1 // 4, %x1 % 4]"), std::string::npos) << t2;
}

TEST(LowerFramework, ReshapeMatchesInterpreter) {
  const char *cases[] = {
      // symbolic runs, unit dims, merges and splits across runs
      R"(graph @g(%x: f32[N, 6, 4]) -> (%z) {
        %s = constant i64[4] [0, 2, 3, 4]
        %y = Reshape(%x, %s) : f32[N, 2, 3, 4]
        %z = Neg(%y) : f32[N, 2, 3, 4]
      })",
      R"(graph @g(%x: f32[2, N, 3]) -> (%z) {
        %s = constant i64[3] [1, -1, 1]
        %y = Reshape(%x, %s) : f32[1, 6*N, 1]
        %z = Neg(%y) : f32[1, 6*N, 1]
      })",
      R"(graph @g(%x: f32[6, 4]) -> (%z) {
        %s = constant i64[3] [4, 3, 2]
        %y = Reshape(%x, %s) : f32[4, 3, 2]
        %z = Neg(%y) : f32[4, 3, 2]
      })",
      R"(graph @g(%x: f32[N, M, 2]) -> (%z) {
        %s = constant i64[2] [-1, 2]
        %y = Reshape(%x, %s) : f32[M*N, 2]
        %z = Neg(%y) : f32[M*N, 2]
      })",
  };
  for (const char *c : cases) checkText(c, {{{"N", 3}, {"M", 5}}, {{"N", 1}, {"M", 2}}});
}

TEST(LowerFramework, BroadcastingAndDynamicDims) {
  checkText(R"(graph @g(%a: f32[N, 1, 4], %b: f32[3, 1]) -> (%c) {
    %c = Add(%a, %b) : f32[N, 3, 4]
  })",
            {{{"N", 2}}, {{"N", 5}}});
  checkText(R"(graph @g(%a: i32[B, S], %b: i32[S]) -> (%c) {
    %c = Mul(%a, %b) : i32[B, S]
  })",
            {{{"B", 3}, {"S", 7}}});
}

TEST(LowerFramework, SymbolAgainstSymbolBroadcast) {
  // [N] + [M] types as [max(N, M)]; at run time one of them is 1.
  GraphBuilder b;
  ValueId x = b.input("x", DType::F32, {SymInt::symbol("N")});
  ValueId y = b.input("y", DType::F32, {SymInt::symbol("M")});
  b.output(b.op(OpKind::Add, {x, y}));
  checkGraph(b.g, {{{"N", 1}, {"M", 4}}, {{"N", 3}, {"M", 1}}, {{"N", 5}, {"M", 5}}});
}

TEST(LowerFramework, SymbolicReshapeRuns) {
  SymInt B = SymInt::symbol("B"), S = SymInt::symbol("S");
  struct Case {
    std::vector<SymInt> from, to;
    std::string load; ///< expected load of the input in Neg's body
  };
  const Case cases[] = {
      {{B, S, 768}, {B, S, 12, 64}, "x[%x0, %x1, 64*%x2 + %x3]"},
      {{B, S, 12, 64}, {B, S, 768}, "x[%x0, %x1, %x2 // 64, %x2 % 64]"},
      {{B * S, 64}, {B, S, 64}, "x[%x0*S + %x1, %x2]"},
      {{B, S, 64}, {B * S, 64}, "x[%x0 // S, %x0 % S, %x1]"},
      {{B, 1, S}, {B, S, 1}, "x[%x0, 0, %x1]"},
  };
  for (const Case &c : cases) {
    GraphBuilder b;
    b.input("dims", DType::F32, {B, S}); // binds B and S before x, whose dims may be products
    ValueId x = b.input("x", DType::F32, c.from);
    ValueId shape = b.symconst("shape", c.to);
    b.output(b.op(OpKind::Neg, {b.op(OpKind::Reshape, {x, shape})}));
    auto p = lowerGraph(b.g);
    ASSERT_TRUE(p.ok()) << p.error().render();
    std::string text = printLoopProgram(*p);
    EXPECT_NE(text.find("load f32 " + c.load), std::string::npos) << text;
    checkGraph(b.g, {{{"B", 2}, {"S", 3}}, {{"B", 1}, {"S", 5}}});
  }
}

TEST(LowerFramework, ReshapeOfReshapeIsOneReshape) {
  // [B, 1, 1, S, 1] -> [B*S] -> [B, 1, 1, S] (as BERT's mask): no // or % remains.
  SymInt B = SymInt::symbol("B"), S = SymInt::symbol("S");
  GraphBuilder b;
  ValueId x = b.input("x", DType::F32, {B, 1, 1, S, 1});
  ValueId flat = b.op(OpKind::Reshape, {x, b.ints("f", {-1})});
  ValueId back = b.op(OpKind::Reshape, {flat, b.symconst("t", {B, 1, 1, S})});
  b.output(b.op(OpKind::Neg, {back}));
  auto p = lowerGraph(b.g);
  ASSERT_TRUE(p.ok()) << p.error().render();
  std::string text = printLoopProgram(*p);
  EXPECT_NE(text.find("load f32 x[%x0, 0, 0, %x3, 0]"), std::string::npos) << text;
  checkGraph(b.g, {{{"B", 2}, {"S", 3}}, {{"B", 3}, {"S", 1}}});
  // A reshape of a slice is not a reshape of the node.
  GraphBuilder c;
  ValueId y = c.input("y", DType::F32, {4, 6});
  ValueId sl = c.op(OpKind::Slice, {y, c.ints("st", {1}), c.ints("en", {5}), c.ints("ax", {1})});
  c.output(c.op(OpKind::Neg, {c.op(OpKind::Reshape, {sl, c.ints("r", {8, 2})})}));
  checkGraph(c.g);
}

TEST(LowerFramework, ViewOutputsAndInputOutputs) {
  // A view as an output, an input as an output, a constant as an output.
  checkText(R"(graph @g(%x: f32[2, 3]) -> (%y, %x, %w) {
    %w = constant f32[2] [1.5, -2]
    %s = constant i64[1] [6]
    %y = Reshape(%x, %s) : f32[6]
  })");
}

TEST(LowerFramework, SymbolicConstantsAsInputs) {
  // %shape is an i64 vector of size expressions; Add reads it as a tensor.
  LoopProgram p = lowerText(R"(graph @g(%x: i64[M, 2]) -> (%y) {
    %shape = symconst i64[2] [M, 2*M + 1]
    %y = Add(%x, %shape) : i64[M, 2]
  })");
  EXPECT_NE(printLoopProgram(p).find("index i64 2*M + 1"), std::string::npos)
      << printLoopProgram(p);
  checkText(R"(graph @g(%x: i64[N, 2]) -> (%y, %n) {
    %shape = symconst i64[2] [N, 2*N + 1]
    %n = symconst i64[] [N*N]
    %y = Add(%x, %shape) : i64[N, 2]
  })",
            {{{"N", 4}}});
}

TEST(LowerFramework, EveryLoweringErrorIsReportedInOneRun) {
  // Two nodes that cannot be compiled (RoiAlign with an adaptive sampling ratio): both are
  // reported, each with its node name, from one lowerGraph call.
  Graph g = parseOrDie(R"(graph @g(%x: f32[1, 2, 5, 5], %r: f32[2, 4], %b: i64[2]) -> (%y1, %y2) {
    %y1 = RoiAlign(%x, %r, %b) {output_height = 2, output_width = 2} : f32[2, 2, 2, 2] name "roi_a"
    %y2 = RoiAlign(%x, %r, %b) {output_height = 2, output_width = 2} : f32[2, 2, 2, 2] name "roi_b"
  })");
  auto p = lowerGraph(g);
  ASSERT_FALSE(p.ok());
  std::string msg = p.error().render();
  EXPECT_NE(msg.find("roi_a"), std::string::npos) << msg;
  EXPECT_NE(msg.find("roi_b"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sampling_ratio 0"), std::string::npos) << msg;
}

TEST(LowerFramework, LoweringErrorsNameTheNode) {
  Graph g = parseOrDie(R"(graph @g(%x: f32[2, 3]) -> (%y) {
    %y = Gelu(%x) {approximate = "cubic"} : f32[2, 3] name "g1"
  })");
  if (g.nodes().empty()) GTEST_SKIP() << "the verifier rejects the attribute";
  auto p = lowerGraph(g);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().render().find("g1"), std::string::npos) << p.error().render();
}

// --- the builders

TEST(LowerFramework, PermuteBroadcastRealizeAndIndirect) {
  Graph g = parseOrDie(R"(graph @g(%x: f32[2, 3], %i: i64[4]) -> (%y) {
    %y = Neg(%x) : f32[2, 3]
  })");
  LoopProgram p;
  p.graph = &g;
  std::vector<std::optional<TensorRef>> refs(g.numValues());
  loop::Node in;
  in.name = "x";
  in.dtype = DType::F32;
  in.shape = {2, 3};
  in.kind = InputNode{g.inputs[0]};
  NodeId x = p.add(in);
  loop::Node idx;
  idx.name = "i";
  idx.dtype = DType::I64;
  idx.shape = {4};
  idx.kind = InputNode{g.inputs[1]};
  NodeId ii = p.add(idx);
  p.inputs = {x, ii};
  refs[size_t(g.inputs[0])] = TensorRef{x, DType::F32, {2, 3}, {}};
  refs[size_t(g.inputs[1])] = TensorRef{ii, DType::I64, {4}, {}};
  LowerContext ctx(p, g, 0, refs);
  TensorRef xt = ctx.input(0);
  TensorRef t = ctx.permute(xt, {1, 0}); // [3, 2]
  EXPECT_EQ(t.shape, (std::vector<SymInt>{3, 2}));
  TensorRef bt = ctx.broadcastTo(ctx.reshape(t, {3, 2, 1}), {4, 3, 2, 5}); // [4, 3, 2, 5]
  TensorRef r = ctx.realize(bt);
  EXPECT_TRUE(r.map.empty());
  EXPECT_TRUE(ctx.realize(r).node == r.node); // already a node
  // gather rows of the transposed x by i (wrapping negatives): out[k, j] = x[j, i[k]]
  TensorRef iref{ii, DType::I64, {4}, {}};
  TensorRef gth =
      ctx.pointwise(DType::F32, {4, 2}, [&](BodyBuilder &b, const std::vector<SymInt> &v) {
        SymInt k = b.indirect(b.load(iref, {v[0]}), 3);
        SymInt k2 = b.indirect(b.load(iref, {v[0]}), 3);
        EXPECT_NE(k, k2); // fresh symbols
        return b.load(t, {k, v[1]});
      });
  p.outputs = {r.node, gth.node};
  p.outputNames = {"r", "g"};
  Tensor xv = Tensor::fromDoubles(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor iv = Tensor::fromInts(DType::I64, {4}, {0, -1, 7, -9});
  auto out = evaluateLoopProgram(p, {xv, iv});
  ASSERT_TRUE(out.ok()) << out.error().render() << printLoopProgram(p);
  const Tensor &rv = (*out)[0];
  ASSERT_EQ(rv.shape(), (Shape{4, 3, 2, 5}));
  for (int64_t a = 0; a < 4; ++a)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t d = 0; d < 2; ++d)
        for (int64_t e = 0; e < 5; ++e)
          EXPECT_EQ(rv.getDouble(((a * 3 + c) * 2 + d) * 5 + e), xv.getDouble(d * 3 + c));
  // i = 0 -> 0, -1 -> 2, 7 -> clamped 2, -9 -> -6 clamped 0
  const Tensor &gv = (*out)[1];
  int64_t want[4] = {0, 2, 2, 0};
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t j = 0; j < 2; ++j)
      EXPECT_EQ(gv.getDouble(k * 2 + j), xv.getDouble(j * 3 + want[k])) << k << "," << j;
}

TEST(LowerFramework, ReduceBuilder) {
  Graph g = parseOrDie(R"(graph @g(%x: f32[N, 5]) -> (%y) {
    %y = Neg(%x) : f32[N, 5]
  })");
  auto p0 = lowerGraph(g);
  ASSERT_TRUE(p0.ok());
  LoopProgram p = std::move(p0).value();
  std::vector<std::optional<TensorRef>> refs(g.numValues());
  refs[size_t(g.inputs[0])] =
      TensorRef{p.inputs[0], DType::F32, g.value(g.inputs[0]).type.shape, {}};
  LowerContext ctx(p, g, 0, refs);
  TensorRef x = ctx.input(0);
  SymInt n = x.shape[0];
  auto load = [&](BodyBuilder &b, const std::vector<SymInt> &o, const std::vector<SymInt> &r,
                  Val *pos) {
    if (pos) *pos = b.index(r[0]);
    return b.load(x, {o[0], r[0]});
  };
  TensorRef sum = ctx.reduce(ReduceKind::Sum, DType::F32, DType::F32, {n}, {5}, load);
  TensorRef amax = ctx.reduce(ReduceKind::ArgMax, DType::I64, DType::F32, {n}, {5}, load);
  TensorRef amin = ctx.reduce(ReduceKind::ArgMin, DType::I64, DType::F32, {n}, {5}, load, true);
  p.outputs = {sum.node, amax.node, amin.node};
  p.outputNames = {"s", "a", "b"};
  Tensor xv = Tensor::fromDoubles(DType::F32, {2, 5}, {1, 7, 7, -2, -2, 0, NAN, 3, NAN, 1});
  auto out = evaluateLoopProgram(p, {xv});
  ASSERT_TRUE(out.ok()) << out.error().render();
  EXPECT_EQ((*out)[0].getDouble(0), 11.0);
  EXPECT_TRUE(std::isnan((*out)[0].getDouble(1)));
  EXPECT_EQ((*out)[1].getInt(0), 1); // first maximum
  EXPECT_EQ((*out)[1].getInt(1), 1); // NaN counts as the maximum
  EXPECT_EQ((*out)[2].getInt(0), 4); // last minimum
  EXPECT_EQ((*out)[2].getInt(1), 3); // last NaN
  std::string text = printLoopProgram(p);
  EXPECT_NE(text.find("reduce argmin f32 last (%x0) over (%r0 < 5)"), std::string::npos) << text;
}

// --- evaluator semantics

/// A one-node program computing `fn` over two inputs of dtype t and shape [n].
Tensor evalBinary(DType t, const std::vector<int64_t> &a, const std::vector<int64_t> &b,
                  ScalarOp op) {
  LoopProgram p;
  int64_t n = int64_t(a.size());
  for (int k = 0; k < 2; ++k) {
    loop::Node in;
    in.name = k ? "b" : "a";
    in.dtype = t;
    in.shape = {n};
    in.kind = InputNode{k};
    p.inputs.push_back(p.add(in));
  }
  loop::Node pw;
  pw.name = "r";
  PointwiseNode body;
  body.vars = {loopVar(0)};
  BodyBuilder bb(body.body);
  SymInt x0 = SymInt::symbol(loopVar(0));
  TensorRef ra{p.inputs[0], t, {n}, {}}, rb{p.inputs[1], t, {n}, {}};
  body.result = bb.op(op, bb.load(ra, {x0}), bb.load(rb, {x0}));
  pw.dtype = bb.dtypeOf(body.result);
  pw.shape = {n};
  pw.kind = body;
  p.outputs = {p.add(pw)};
  auto out = evaluateLoopProgram(p, {Tensor::fromInts(t, {n}, a), Tensor::fromInts(t, {n}, b)});
  EXPECT_TRUE(out.ok()) << out.error().render();
  return out.ok() ? (*out)[0] : Tensor();
}

TEST(LoopEval, IntegerSemantics) {
  EXPECT_EQ(evalBinary(DType::I32, {7, -7, 5, INT32_MIN}, {0, 2, -2, -1}, ScalarOp::Div).toInts(),
            (std::vector<int64_t>{0, -3, -2, INT32_MIN}));
  EXPECT_EQ(evalBinary(DType::I32, {7, -7, 7, -7, 3}, {0, 2, -2, -2, -1}, ScalarOp::Mod).toInts(),
            (std::vector<int64_t>{0, 1, -1, -1, 0}));
  EXPECT_EQ(evalBinary(DType::I32, {7, -7, 7}, {0, 2, -2}, ScalarOp::FMod).toInts(),
            (std::vector<int64_t>{0, -1, 1}));
  EXPECT_EQ(evalBinary(DType::I8, {100, -128}, {100, -1}, ScalarOp::Add).toInts(),
            (std::vector<int64_t>{-56, 127}));
  EXPECT_EQ(evalBinary(DType::U8, {200, 3}, {100, 5}, ScalarOp::Sub).toInts(),
            (std::vector<int64_t>{100, 254}));
  EXPECT_EQ(evalBinary(DType::U8, {200, 3}, {100, 5}, ScalarOp::Lt).toInts(),
            (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(evalBinary(DType::U32, {1, 0x80000000}, {31, 31}, ScalarOp::Shr).toInts(),
            (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(evalBinary(DType::U8, {1, 1}, {7, 8}, ScalarOp::Shl).toInts(),
            (std::vector<int64_t>{128, 0}));
}

TEST(LoopEval, InputChecks) {
  Graph g = parseOrDie(R"(graph @g(%x: f32[N, 4]) -> (%y) {
    symbol N in [1, 8]
    %y = Neg(%x) : f32[N, 4]
  })");
  auto p = lowerGraph(g);
  ASSERT_TRUE(p.ok());
  auto bad = evaluateLoopProgram(*p, {Tensor(DType::F32, {2, 5})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().render().find("input 'x'"), std::string::npos) << bad.error().render();
  auto range = evaluateLoopProgram(*p, {Tensor(DType::F32, {9, 4})});
  ASSERT_FALSE(range.ok());
  EXPECT_NE(range.error().render().find("outside its range"), std::string::npos);
  auto type = evaluateLoopProgram(*p, {Tensor(DType::F64, {2, 4})});
  EXPECT_FALSE(type.ok());
  auto count = evaluateLoopProgram(*p, {});
  EXPECT_FALSE(count.ok());
}

TEST(LoopEval, ExternAdapters) {
  // An extern with a data-dependent output size, evaluated through a registered adapter.
  registerEvalExtern("test_positive_f32", [](const ExternNode &, std::vector<EvalExternArg> &a) {
    const Tensor &x = *a[0].tensor;
    std::vector<double> keep;
    for (int64_t i = 0; i < x.numel(); ++i)
      if (x.getDouble(i) > 0) keep.push_back(x.getDouble(i));
    *a[1].output = Tensor::fromDoubles(DType::F32, {int64_t(keep.size())}, keep);
    *a[2].outSymbol = int64_t(keep.size());
    return okStatus();
  });
  Graph g = parseOrDie(R"(graph @g(%x: f32[N]) -> (%y) {
    %y = Neg(%x) : f32[N]
  })");
  auto p0 = lowerGraph(g);
  ASSERT_TRUE(p0.ok());
  LoopProgram p = std::move(p0).value();
  std::vector<std::optional<TensorRef>> refs(g.numValues());
  refs[size_t(g.inputs[0])] =
      TensorRef{p.inputs[0], DType::F32, g.value(g.inputs[0]).type.shape, {}};
  LowerContext ctx(p, g, 0, refs);
  SymInt k = ctx.freshSymbol("pos");
  std::vector<ExternArg> args(3);
  args[0].kind = ExternArg::Kind::Node;
  args[0].node = ctx.realize(ctx.input(0)).node;
  args[1].kind = ExternArg::Kind::Output;
  args[2].kind = ExternArg::Kind::OutSymbol;
  args[2].symbol = k.symbolName();
  auto outs = ctx.externCall("test_positive_f32", args, {TensorType{DType::F32, {k}}}, true);
  TensorRef twice =
      ctx.pointwise(DType::F32, {k}, [&](BodyBuilder &b, const std::vector<SymInt> &v) {
        Val e = b.load(outs[0], v);
        return b.op(ScalarOp::Add, e, e);
      });
  p.outputs = {twice.node};
  p.outputNames = {"t"};
  auto out = evaluateLoopProgram(p, {Tensor::fromDoubles(DType::F32, {5}, {1, -2, 3, 0, 0.5})});
  ASSERT_TRUE(out.ok()) << out.error().render();
  EXPECT_EQ((*out)[0].toDoubles(), (std::vector<double>{2, 6, 1}));
  EXPECT_NE(printLoopProgram(p).find("extern test_positive_f32(x, out 0, outsym pos) allocates"),
            std::string::npos)
      << printLoopProgram(p);
}

TEST(LoopEval, MalformedProgramsAreInternalErrors) {
  // A load past the end and a reference to a loop variable of another node.
  for (int bad = 0; bad < 2; ++bad) {
    LoopProgram p;
    loop::Node in;
    in.name = "x";
    in.dtype = DType::F32;
    in.shape = {4};
    in.kind = InputNode{0};
    p.inputs = {p.add(in)};
    loop::Node pw;
    pw.name = "y";
    pw.dtype = DType::F32;
    pw.shape = {4};
    PointwiseNode body;
    body.vars = {loopVar(0)};
    BodyBuilder b(body.body);
    SymInt i = bad == 0 ? SymInt::symbol(loopVar(0)) + 1 : SymInt::symbol(loopVar(1));
    body.result = b.load(TensorRef{p.inputs[0], DType::F32, {4}, {}}, {i});
    pw.kind = body;
    p.outputs = {p.add(pw)};
    auto out = evaluateLoopProgram(p, {Tensor::fromDoubles(DType::F32, {4}, {1, 2, 3, 4})});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.error().kind(), ErrorKind::Internal) << out.error().render();
    EXPECT_NE(out.error().render().find(bad == 0 ? "out of bounds" : "unbound symbol '%x1'"),
              std::string::npos)
        << out.error().render();
  }
}

TEST(LoopEval, ModerateSizes) {
  // 64K points through two nodes, one of them read through a reshape view.
  GraphBuilder b;
  ValueId x = b.input("x", DType::F32, {SymInt::symbol("N"), 256});
  ValueId s = b.op(OpKind::Sigmoid, {x});
  ValueId r = b.op(OpKind::Reshape, {x, b.ints("shape", {-1, 128, 2})});
  ValueId t = b.op(OpKind::Reshape, {r, b.ints("back", {0, 256})});
  b.output(b.op(OpKind::Mul, {s, t}));
  checkGraph(b.g, {{{"N", 256}}});
}

} // namespace
