// Lowering of the Reduction family: each op lowered, evaluated as Loop IR and compared with the
// reference interpreter on random inputs (with a dynamic dim), plus the structure the
// scheduler relies on (softmax = two reductions and a pointwise epilogue).
#include "LowerRdTestUtil.h"

#include <limits>

using namespace coil;
using namespace coil::rdtest;

namespace {

const std::vector<OpKind> kReduceOps = {
    OpKind::ReduceSum,       OpKind::ReduceMean,     OpKind::ReduceMax, OpKind::ReduceMin,
    OpKind::ReduceProd,      OpKind::ReduceL1,       OpKind::ReduceL2,  OpKind::ReduceLogSum,
    OpKind::ReduceLogSumExp, OpKind::ReduceSumSquare};

/// x: f32[N, 5, 7] reduced by `op` with the given attributes (and axes input).
void checkReduce(OpKind op, Attrs a, std::optional<std::vector<int64_t>> axesInput,
                 DType t = DType::F32, double lo = -2, double hi = 2, double rtol = 1e-5) {
  SCOPED_TRACE(std::string(opName(op)));
  Builder b;
  b.symbol("N", 1, 64);
  ValueId x = b.input(t, {SymInt::symbol("N"), 5, 7});
  std::vector<ValueId> ins{x};
  if (axesInput) ins.push_back(b.ints(*axesInput));
  b.outputs({b.node1(op, ins, a)});
  check(b.g, {{random(t, {3, 5, 7}, lo, hi, 1)}, {random(t, {6, 5, 7}, lo, hi, 2)}}, rtol, 1e-5);
}

TEST(ReductionLower, ReduceFloatAllOps) {
  for (OpKind op : kReduceOps) {
    // LogSum needs positive sums; the others take any sign.
    double lo = op == OpKind::ReduceLogSum ? 0.1 : -2;
    checkReduce(op, attrs({{"axes", std::vector<int64_t>{1}}}), std::nullopt, DType::F32, lo);
    checkReduce(op, attrs({{"keepdims", int64_t(0)}}), std::vector<int64_t>{-1, 0}, DType::F32, lo);
    checkReduce(op, {}, std::nullopt, DType::F32, lo); // every axis
    checkReduce(op, attrs({{"keepdims", int64_t(0)}}), std::vector<int64_t>{0, 1, 2}, DType::F32,
                lo);
  }
}

TEST(ReductionLower, ReduceNoopWithEmptyAxesIsTheInput) {
  Builder b;
  b.symbol("N", 1, 64);
  ValueId x = b.input(DType::F32, {SymInt::symbol("N"), 4});
  b.outputs(
      {b.node1(OpKind::ReduceSum, {x, b.ints({})}, attrs({{"noop_with_empty_axes", int64_t(1)}}))});
  auto p = check(b.g, {{random(DType::F32, {3, 4})}});
  ASSERT_TRUE(p);
  EXPECT_EQ(countNodes(*p, &loop::Node::isReduction), 0);
}

TEST(ReductionLower, ReduceIntegers) {
  // Sums and products wrap like the interpreter's exact arithmetic; Mean truncates; L2 takes
  // the truncated square root; Max/Min of i8 keep the sign.
  for (OpKind op :
       {OpKind::ReduceSum, OpKind::ReduceMean, OpKind::ReduceMax, OpKind::ReduceMin,
        OpKind::ReduceProd, OpKind::ReduceL1, OpKind::ReduceL2, OpKind::ReduceSumSquare})
    for (DType t : {DType::I32, DType::I8, DType::U8, DType::I64}) {
      SCOPED_TRACE(std::string(dtypeName(t)));
      double lo = isUnsigned(t) ? 0 : -100, hi = 100;
      checkReduce(op, attrs({{"axes", std::vector<int64_t>{2}}}), std::nullopt, t, lo, hi);
      checkReduce(op, attrs({{"keepdims", int64_t(0)}}), std::vector<int64_t>{0, 2}, t, lo, hi);
    }
}

TEST(ReductionLower, ReduceBoolMaxMin) {
  for (OpKind op : {OpKind::ReduceMax, OpKind::ReduceMin}) {
    Builder b;
    b.symbol("N", 1, 64);
    ValueId x = b.input(DType::Bool, {SymInt::symbol("N"), 3});
    b.outputs({b.node1(op, {x, b.ints({1})})});
    check(b.g, {{random(DType::Bool, {9, 3}, 0, 1, 4)}});
  }
}

TEST(ReductionLower, ReduceHalfAccumulatesInFloat) {
  for (OpKind op : {OpKind::ReduceSum, OpKind::ReduceMean, OpKind::ReduceLogSumExp,
                    OpKind::ReduceMax, OpKind::ReduceL2})
    checkReduce(op, attrs({{"axes", std::vector<int64_t>{1, 2}}}), std::nullopt, DType::F16, -2, 2,
                2e-3);
  checkReduce(OpKind::ReduceSum, {}, std::nullopt, DType::BF16, -2, 2, 1e-2);
}

TEST(ReductionLower, EmptyReductionsGiveTheIdentity) {
  // N = 0: sums are 0, products 1, max -inf, min +inf, mean NaN; every output element exists.
  for (OpKind op : kReduceOps) {
    SCOPED_TRACE(std::string(opName(op)));
    Builder b;
    b.symbol("N", 0, 64);
    ValueId x = b.input(DType::F32, {SymInt::symbol("N"), 3});
    b.outputs({b.node1(op, {x, b.ints({0})})});
    check(b.g, {{random(DType::F32, {0, 3})}, {random(DType::F32, {2, 3}, 0.5, 2)}});
  }
  Builder b;
  b.symbol("N", 0, 64);
  ValueId x = b.input(DType::I16, {SymInt::symbol("N"), 3});
  ValueId mx = b.node1(OpKind::ReduceMax, {x, b.ints({0})});
  ValueId mn = b.node1(OpKind::ReduceMin, {x, b.ints({0})});
  b.outputs({mx, mn});
  check(b.g, {{random(DType::I16, {0, 3})}});
}

TEST(ReductionLower, ReduceNaNPropagates) {
  Builder b;
  b.symbol("N", 1, 64);
  ValueId x = b.input(DType::F32, {SymInt::symbol("N"), 4});
  b.outputs({b.node1(OpKind::ReduceMax, {x, b.ints({1})}),
             b.node1(OpKind::ReduceLogSumExp, {x, b.ints({1})}),
             b.node1(OpKind::ReduceMin, {x, b.ints({0})})});
  const double nan = std::numeric_limits<double>::quiet_NaN(),
               inf = std::numeric_limits<double>::infinity();
  check(b.g, {{Tensor::fromDoubles(DType::F32, {3, 4},
                                   {1, nan, 2, 3, -inf, -inf, -inf, -inf, inf, 1, 2, 3})}});
}

/// x: t[N, 4, 3] reduced by `op` over the axes given as a graph input of `naxes` elements.
void checkRuntimeAxes(OpKind op, DType t, bool keepdims, bool noop,
                      const std::vector<std::vector<int64_t>> &axesSets, int64_t naxes) {
  SCOPED_TRACE(std::string(opName(op)) + " " + std::string(dtypeName(t)) + " keepdims " +
               std::to_string(keepdims) + " noop " + std::to_string(noop));
  Builder b;
  b.symbol("N", 0, 64);
  ValueId x = b.input(t, {SymInt::symbol("N"), 4, 3});
  ValueId axes = b.input(DType::I64, {naxes});
  b.outputs(
      {b.node1(op, {x, axes},
               attrs({{"keepdims", int64_t(keepdims)}, {"noop_with_empty_axes", int64_t(noop)}}))});
  auto p = lower(b.g);
  ASSERT_TRUE(p);
  EXPECT_EQ(countNodes(*p, &loop::Node::isReduction), 0); // the extern does the work
  double lo = op == OpKind::ReduceLogSum ? 0.1 : (isUnsigned(t) ? 0 : -3), hi = 3;
  unsigned seed = 5;
  for (const auto &a : axesSets)
    for (int64_t n : {5, 0, 2}) {
      Tensor xv = random(t, {n, 4, 3}, lo, hi, seed++);
      if (isFloat(t) && n > 0 && op != OpKind::ReduceLogSum) xv.setDouble(7, std::nan(""));
      expectSame(b.g, *p, {xv, Tensor::fromInts(DType::I64, {int64_t(a.size())}, a)}, 1e-6, 1e-6);
    }
}

TEST(ReductionLower, ReduceRuntimeAxesKeepdims) {
  for (OpKind op : kReduceOps) {
    checkRuntimeAxes(op, DType::F32, true, false, {{1}, {-3}}, 1);
    checkRuntimeAxes(op, DType::F32, true, false, {{-1, 0}, {2, 1}}, 2);
    checkRuntimeAxes(op, DType::F64, false, false, {{2, 0, -2}}, 3);
    // An empty axes input (static length 0): every axis, or the input with noop_with_empty_axes.
    checkRuntimeAxes(op, DType::F32, true, false, {{}}, 0);
    checkRuntimeAxes(op, DType::F32, false, false, {{}}, 0);
    checkRuntimeAxes(op, DType::F32, false, true, {{}}, 0);
  }
  // Axes of a symbolic length (keepdims=1 keeps the output rank static).
  Builder b;
  b.symbol("N", 1, 64);
  b.symbol("K", 0, 3);
  ValueId x = b.input(DType::I32, {SymInt::symbol("N"), 4, 3});
  ValueId axes = b.input(DType::I64, {SymInt::symbol("K")});
  b.outputs({b.node1(OpKind::ReduceSum, {x, axes})});
  auto p = lower(b.g);
  ASSERT_TRUE(p);
  for (const std::vector<int64_t> &a :
       {std::vector<int64_t>{}, std::vector<int64_t>{0, 2}, std::vector<int64_t>{-1, 1, 0}})
    expectSame(b.g, *p,
               {random(DType::I32, {6, 4, 3}, -50, 50, 9),
                Tensor::fromInts(DType::I64, {int64_t(a.size())}, a)},
               0, 0);
}

TEST(ReductionLower, ReduceRuntimeAxesNoKeepdimsAndIntegers) {
  for (OpKind op : {OpKind::ReduceSum, OpKind::ReduceMean, OpKind::ReduceMax, OpKind::ReduceMin,
                    OpKind::ReduceProd, OpKind::ReduceL2})
    for (DType t : {DType::I64, DType::U8, DType::F16}) {
      checkRuntimeAxes(op, t, false, false, {{0, 2}, {-1, 1}}, 2);
      checkRuntimeAxes(op, t, true, true, {{1}}, 1);
    }
  checkRuntimeAxes(OpKind::ReduceMax, DType::Bool, false, false, {{1}, {0}}, 1);
}

TEST(ReductionLower, ReduceRuntimeAxesUnitDimsAndDownstreamUse) {
  // A unit input dim stays 1 in the inferred type (no fresh symbol); the result feeds a
  // pointwise op, which reads the extern's output with the dims it reported.
  Builder b;
  b.symbol("N", 1, 64);
  ValueId x = b.input(DType::F32, {SymInt::symbol("N"), 1, 3});
  ValueId axes = b.input(DType::I64, {2});
  ValueId r = b.node1(OpKind::ReduceMean, {x, axes});
  b.outputs({b.node1(OpKind::Add, {r, r})});
  auto p = lower(b.g);
  ASSERT_TRUE(p);
  for (const std::vector<int64_t> &a :
       {std::vector<int64_t>{1, 2}, std::vector<int64_t>{0, -2}, std::vector<int64_t>{-1, 0}})
    expectSame(b.g, *p,
               {random(DType::F32, {5, 1, 3}, -2, 2, 11), Tensor::fromInts(DType::I64, {2}, a)},
               1e-6, 1e-6);
}

TEST(ReductionLower, ReduceRuntimeAxesBadAxesAreUserErrors) {
  Builder b;
  ValueId x = b.input(DType::F32, {2, 4});
  ValueId axes = b.input(DType::I64, {2});
  b.outputs({b.node1(OpKind::ReduceSum, {x, axes})});
  auto p = lower(b.g);
  ASSERT_TRUE(p);
  Tensor xv = random(DType::F32, {2, 4});
  for (const std::vector<int64_t> &a : {std::vector<int64_t>{0, 2}, std::vector<int64_t>{1, -1}}) {
    auto got = loop::evaluateLoopProgram(*p, {xv, Tensor::fromInts(DType::I64, {2}, a)});
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.error().kind(), ErrorKind::User) << got.error().render();
  }
}

// --- ArgMax / ArgMin

TEST(ReductionLower, ArgMaxArgMin) {
  for (OpKind op : {OpKind::ArgMax, OpKind::ArgMin})
    for (int64_t axis : {0, 1, -1})
      for (int64_t keep : {0, 1})
        for (int64_t last : {0, 1}) {
          SCOPED_TRACE(std::string(opName(op)) + " axis " + std::to_string(axis) + " keepdims " +
                       std::to_string(keep) + " last " + std::to_string(last));
          Builder b;
          b.symbol("N", 1, 64);
          // Small integers: many ties, so the first/last rule matters.
          ValueId x = b.input(DType::I32, {SymInt::symbol("N"), 4, 5});
          ValueId xf = b.input(DType::F32, {SymInt::symbol("N"), 4, 5});
          Attrs a = attrs({{"axis", axis}, {"keepdims", keep}, {"select_last_index", last}});
          b.outputs({b.node1(op, {x}, a), b.node1(op, {xf}, a)});
          check(b.g, {{random(DType::I32, {3, 4, 5}, -2, 2, 7), random(DType::F32, {3, 4, 5})},
                      {random(DType::I32, {1, 4, 5}, -2, 2, 8), random(DType::F32, {1, 4, 5})}});
        }
}

TEST(ReductionLower, ArgMaxWithNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (OpKind op : {OpKind::ArgMax, OpKind::ArgMin})
    for (int64_t last : {0, 1}) {
      Builder b;
      ValueId x = b.input(DType::F32, {2, 4});
      b.outputs({b.node1(op, {x}, attrs({{"axis", int64_t(1)}, {"select_last_index", last}}))});
      check(b.g, {{Tensor::fromDoubles(DType::F32, {2, 4}, {1, nan, 5, nan, 3, 3, -1, 3})}});
    }
}

// --- Softmax family

TEST(ReductionLower, SoftmaxFamily) {
  for (OpKind op : {OpKind::Softmax, OpKind::LogSoftmax, OpKind::Hardmax})
    for (int64_t axis : {-1, 1, 0})
      for (DType t : {DType::F32, DType::F16}) {
        SCOPED_TRACE(std::string(opName(op)) + " axis " + std::to_string(axis) + " " +
                     std::string(dtypeName(t)));
        Builder b;
        b.symbol("N", 1, 64);
        ValueId x = b.input(t, {SymInt::symbol("N"), 6, 4});
        b.outputs({b.node1(op, {x}, attrs({{"axis", axis}}))});
        double tol = t == DType::F16 ? 2e-3 : 1e-5;
        check(b.g, {{random(t, {2, 6, 4}, -4, 4, 3)}, {random(t, {5, 6, 4}, -4, 4, 4)}}, tol, tol);
      }
}

TEST(ReductionLower, SoftmaxIsTwoReductionsAndAPointwise) {
  Builder b;
  b.symbol("N", 1, 64);
  ValueId x = b.input(DType::F32, {SymInt::symbol("N"), 16});
  b.outputs({b.node1(OpKind::Softmax, {x})});
  auto p = lower(b.g);
  ASSERT_TRUE(p);
  ASSERT_EQ(countNodes(*p, &loop::Node::isReduction), 2);
  const loop::Node *maxN = nullptr, *sumN = nullptr;
  for (const loop::Node &n : p->nodes)
    if (auto *r = std::get_if<loop::ReductionNode>(&n.kind)) {
      // Outer dims: all but the axis; one reduced dim, the axis.
      EXPECT_EQ(n.shape, (std::vector<SymInt>{SymInt::symbol("N")}));
      EXPECT_EQ(r->rranges, (std::vector<SymInt>{16}));
      (r->kind == loop::ReduceKind::Max ? maxN : sumN) = &n;
    }
  ASSERT_TRUE(maxN && sumN);
  EXPECT_EQ(std::get<loop::ReductionNode>(sumN->kind).kind, loop::ReduceKind::Sum);
  // The output is a pointwise node over x's shape.
  const loop::Node &out = p->nodes[size_t(p->outputs[0])];
  EXPECT_TRUE(out.isPointwise());
  EXPECT_EQ(out.shape, (std::vector<SymInt>{SymInt::symbol("N"), 16}));
}

TEST(ReductionLower, HardmaxTiesAndNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Builder b;
  ValueId x = b.input(DType::F32, {3, 4});
  b.outputs({b.node1(OpKind::Hardmax, {x})});
  check(b.g, {{Tensor::fromDoubles(DType::F32, {3, 4}, {1, 3, 3, 2, 1, nan, 5, nan, 0, 0, 0, 0})}});
}

// --- CumSum / CumProd

TEST(ReductionLower, Cumulative) {
  for (OpKind op : {OpKind::CumSum, OpKind::CumProd})
    for (int64_t axis : {0, 1, -1})
      for (int64_t excl : {0, 1})
        for (int64_t rev : {0, 1})
          for (DType t : {DType::F32, DType::I32}) {
            SCOPED_TRACE(std::string(opName(op)) + " axis " + std::to_string(axis) + " excl " +
                         std::to_string(excl) + " rev " + std::to_string(rev) + " " +
                         std::string(dtypeName(t)));
            Builder b;
            b.symbol("N", 1, 64);
            ValueId x = b.input(t, {SymInt::symbol("N"), 5});
            b.outputs({b.node1(op, {x, b.ints({axis}, /*scalar=*/true)},
                               attrs({{"exclusive", excl}, {"reverse", rev}}))});
            double lo = op == OpKind::CumProd ? 0.5 : -3, hi = 3;
            if (!isFloat(t)) lo = op == OpKind::CumProd ? -3 : -50;
            check(b.g, {{random(t, {4, 5}, lo, hi, 11)}, {random(t, {1, 5}, lo, hi, 12)}});
          }
}

// --- normalizations

TEST(ReductionLower, LayerNormalization) {
  for (int64_t axis : {-1, -2, 1, 0})
    for (bool withBias : {true, false})
      for (DType t : {DType::F32, DType::F16}) {
        SCOPED_TRACE("axis " + std::to_string(axis) + " bias " + std::to_string(withBias) + " " +
                     std::string(dtypeName(t)));
        Builder b;
        b.symbol("N", 1, 64);
        ValueId x = b.input(t, {SymInt::symbol("N"), 3, 8});
        std::vector<SymInt> ns = axis == -1 ? std::vector<SymInt>{8} : std::vector<SymInt>{3, 8};
        if (axis == 0) ns.insert(ns.begin(), SymInt::symbol("N"));
        ValueId scale = b.input(t, ns);
        ValueId bias = withBias ? b.input(t, ns) : kNoValue;
        auto outs = b.node(OpKind::LayerNormalization, {x, scale, bias},
                           attrs({{"axis", axis}, {"epsilon", 1e-3}}), 3);
        b.outputs(outs);
        Shape nsc = axis == -1 ? Shape{8} : Shape{3, 8};
        if (axis == 0) nsc.insert(nsc.begin(), 4);
        std::vector<Tensor> in{random(t, {4, 3, 8}, -2, 2, 1), random(t, nsc, -2, 2, 2)};
        if (withBias) in.push_back(random(t, nsc, -2, 2, 3));
        double tol = t == DType::F16 ? 3e-3 : 1e-5;
        check(b.g, {in}, tol, tol);
      }
}

TEST(ReductionLower, RMSNormalization) {
  Builder b;
  b.symbol("N", 1, 64);
  ValueId x = b.input(DType::F32, {SymInt::symbol("N"), 16});
  ValueId scale = b.input(DType::F32, {16});
  b.outputs({b.node1(OpKind::RMSNormalization, {x, scale}, attrs({{"epsilon", 1e-6}}))});
  check(b.g, {{random(DType::F32, {5, 16}), random(DType::F32, {16}, -1, 1, 5)}});
}

TEST(ReductionLower, BatchNormalization) {
  for (int64_t training : {0, 1}) {
    SCOPED_TRACE("training " + std::to_string(training));
    Builder b;
    b.symbol("N", 1, 64);
    ValueId x = b.input(DType::F32, {SymInt::symbol("N"), 3, 4, 5});
    std::vector<ValueId> ins{x};
    for (int i = 0; i < 4; ++i) ins.push_back(b.input(DType::F32, {3}));
    auto outs = b.node(OpKind::BatchNormalization, ins,
                       attrs({{"epsilon", 1e-3}, {"momentum", 0.8}, {"training_mode", training}}),
                       training ? 3 : 1);
    b.outputs(outs);
    check(b.g, {{random(DType::F32, {2, 3, 4, 5}), random(DType::F32, {3}, -1, 1, 2),
                 random(DType::F32, {3}, -1, 1, 3), random(DType::F32, {3}, -1, 1, 4),
                 random(DType::F32, {3}, 0.5, 2, 5)}});
  }
}

TEST(ReductionLower, InstanceAndGroupNormalization) {
  {
    Builder b;
    b.symbol("N", 1, 64);
    ValueId x = b.input(DType::F32, {SymInt::symbol("N"), 4, 3, 5});
    ValueId s = b.input(DType::F32, {4}), bi = b.input(DType::F32, {4});
    b.outputs({b.node1(OpKind::InstanceNormalization, {x, s, bi})});
    check(b.g, {{random(DType::F32, {2, 4, 3, 5}), random(DType::F32, {4}, -1, 1, 2),
                 random(DType::F32, {4}, -1, 1, 3)}});
  }
  for (int64_t perChannelDim : {6, 3}) { // opset 21 (per channel), opset 18 (per group)
    SCOPED_TRACE("scale dim " + std::to_string(perChannelDim));
    Builder b;
    b.symbol("N", 1, 64);
    ValueId x = b.input(DType::F32, {SymInt::symbol("N"), 6, 7});
    ValueId s = b.input(DType::F32, {perChannelDim}), bi = b.input(DType::F32, {perChannelDim});
    b.outputs({b.node1(OpKind::GroupNormalization, {x, s, bi},
                       attrs({{"num_groups", int64_t(3)}, {"epsilon", 1e-4}}))});
    check(b.g, {{random(DType::F32, {3, 6, 7}), random(DType::F32, {perChannelDim}, -1, 1, 2),
                 random(DType::F32, {perChannelDim}, -1, 1, 3)}});
  }
}

TEST(ReductionLower, LpNormalization) {
  for (int64_t p : {1, 2})
    for (int64_t axis : {0, -1}) {
      Builder b;
      b.symbol("N", 1, 64);
      ValueId x = b.input(DType::F32, {SymInt::symbol("N"), 5});
      b.outputs({b.node1(OpKind::LpNormalization, {x}, attrs({{"p", p}, {"axis", axis}}))});
      Tensor in = random(DType::F32, {3, 5});
      for (int64_t j = 0; j < 5; ++j) in.setDouble(5 + j, 0); // a zero row gives 0
      check(b.g, {{in}});
    }
}

TEST(ReductionLower, MeanVarianceNormalization) {
  for (auto axes : {std::vector<int64_t>{0, 2, 3}, std::vector<int64_t>{1}}) {
    Builder b;
    b.symbol("N", 1, 64);
    ValueId x = b.input(DType::F32, {SymInt::symbol("N"), 3, 4, 5});
    b.outputs({b.node1(OpKind::MeanVarianceNormalization, {x}, attrs({{"axes", axes}}))});
    check(b.g, {{random(DType::F32, {2, 3, 4, 5})}}, 1e-4, 1e-5);
  }
}

TEST(ReductionLower, LRN) {
  for (int64_t size : {1, 3, 4}) {
    SCOPED_TRACE("size " + std::to_string(size));
    Builder b;
    b.symbol("N", 1, 64);
    ValueId x = b.input(DType::F32, {SymInt::symbol("N"), 5, 3});
    b.outputs({b.node1(OpKind::LRN, {x},
                       attrs({{"size", size}, {"alpha", 0.1}, {"beta", 0.6}, {"bias", 2.0}}))});
    check(b.g, {{random(DType::F32, {2, 5, 3})}});
  }
}

// --- losses

TEST(ReductionLower, NegativeLogLikelihoodLoss) {
  for (std::string red : {"none", "sum", "mean"})
    for (bool weighted : {false, true})
      for (bool ignore : {false, true}) {
        SCOPED_TRACE(red + " weighted " + std::to_string(weighted) + " ignore " +
                     std::to_string(ignore));
        Builder b;
        b.symbol("N", 1, 64);
        SymInt n = SymInt::symbol("N");
        ValueId x = b.input(DType::F32, {n, 4, 3});
        ValueId t = b.input(DType::I64, {n, 3});
        ValueId w = weighted ? b.input(DType::F32, {4}) : kNoValue;
        Attrs a = attrs({{"reduction", red}});
        if (ignore) a.set("ignore_index", int64_t(2));
        b.outputs({b.node1(OpKind::NegativeLogLikelihoodLoss, {x, t, w}, a)});
        std::vector<Tensor> in{random(DType::F32, {5, 4, 3}), random(DType::I64, {5, 3}, 0, 3, 9)};
        if (weighted) in.push_back(random(DType::F32, {4}, 0.5, 2, 3));
        check(b.g, {in});
      }
}

TEST(ReductionLower, SoftmaxCrossEntropyLoss) {
  for (std::string red : {"none", "mean"})
    for (size_t nOut : {1, 2}) {
      SCOPED_TRACE(red + " outputs " + std::to_string(nOut));
      Builder b;
      b.symbol("N", 1, 64);
      SymInt n = SymInt::symbol("N");
      ValueId x = b.input(DType::F32, {n, 5});
      ValueId t = b.input(DType::I32, {n});
      b.outputs(b.node(OpKind::SoftmaxCrossEntropyLoss, {x, t},
                       attrs({{"reduction", red}, {"ignore_index", int64_t(-1)}}), nOut));
      Tensor tgt = random(DType::I32, {6}, -1, 4, 5); // -1 is ignored
      check(b.g, {{random(DType::F32, {6, 5}), tgt}});
    }
}

} // namespace

namespace {

TEST(ReductionLower, LayerNormalizationStashF64) {
  Builder b;
  b.symbol("N", 1, 64);
  ValueId x = b.input(DType::F32, {SymInt::symbol("N"), 6});
  ValueId s = b.input(DType::F32, {6});
  b.outputs(b.node(OpKind::LayerNormalization, {x, s},
                   attrs({{"stash_type", int64_t(11)}, {"axis", int64_t(1)}}), 3));
  auto p = check(b.g, {{random(DType::F32, {3, 6}), random(DType::F32, {6}, -1, 1, 2)}});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->nodes[size_t(p->outputs[1])].dtype, DType::F64);
}

TEST(ReductionLower, BatchNormalizationMixedTypes) {
  // x in f16, the statistics in f32 (ONNX's T, T1, T2).
  Builder b;
  b.symbol("N", 1, 64);
  ValueId x = b.input(DType::F16, {SymInt::symbol("N"), 2, 3});
  std::vector<ValueId> ins{x};
  for (int i = 0; i < 4; ++i) ins.push_back(b.input(DType::F32, {2}));
  b.outputs({b.node1(OpKind::BatchNormalization, ins)});
  check(b.g,
        {{random(DType::F16, {4, 2, 3}), random(DType::F32, {2}, -1, 1, 2),
          random(DType::F32, {2}, -1, 1, 3), random(DType::F32, {2}, -1, 1, 4),
          random(DType::F32, {2}, 0.5, 2, 5)}},
        2e-3, 2e-3);
}

TEST(ReductionLower, LossesWeightedSumAndHalf) {
  {
    Builder b;
    b.symbol("N", 1, 64);
    SymInt n = SymInt::symbol("N");
    ValueId x = b.input(DType::F32, {n, 4});
    ValueId t = b.input(DType::I64, {n});
    ValueId w = b.input(DType::F32, {4});
    b.outputs(b.node(OpKind::SoftmaxCrossEntropyLoss, {x, t, w}, attrs({{"reduction", "sum"}}), 2));
    check(b.g, {{random(DType::F32, {7, 4}), random(DType::I64, {7}, 0, 3, 2),
                 random(DType::F32, {4}, 0.1, 2, 3)}});
  }
  {
    Builder b;
    b.symbol("N", 1, 64);
    SymInt n = SymInt::symbol("N");
    ValueId x = b.input(DType::F16, {n, 4});
    ValueId t = b.input(DType::I64, {n});
    b.outputs({b.node1(OpKind::NegativeLogLikelihoodLoss, {x, t})});
    check(b.g, {{random(DType::F16, {7, 4}), random(DType::I64, {7}, 0, 3, 2)}}, 2e-3, 2e-3);
  }
}

} // namespace

namespace {

/// x with NaN, +-inf and +-0 sprinkled in.
Tensor withSpecials(Shape s, unsigned seed) {
  Tensor x = random(DType::F32, s, -3, 3, seed);
  std::mt19937 rng(seed + 100);
  std::uniform_int_distribution<int> pick(0, 9);
  const double specials[] = {std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(), 0.0, -0.0};
  for (int64_t i = 0; i < x.numel(); ++i)
    if (int k = pick(rng); k < 5) x.setDouble(i, specials[k]);
  return x;
}

TEST(ReductionLower, SpecialValuesMatchTheInterpreter) {
  std::vector<OpKind> ops = kReduceOps;
  ops.insert(ops.end(), {OpKind::ArgMax, OpKind::ArgMin, OpKind::Softmax, OpKind::LogSoftmax,
                         OpKind::Hardmax, OpKind::CumSum, OpKind::LpNormalization});
  for (OpKind op : ops) {
    SCOPED_TRACE(std::string(opName(op)));
    Builder b;
    b.symbol("N", 1, 64);
    ValueId x = b.input(DType::F32, {SymInt::symbol("N"), 6});
    std::vector<ValueId> ins{x};
    Attrs a;
    if (op == OpKind::CumSum)
      ins.push_back(b.ints({1}, /*scalar=*/true));
    else if (op == OpKind::ArgMax || op == OpKind::ArgMin)
      a.set("axis", int64_t(1));
    else if (op != OpKind::Softmax && op != OpKind::LogSoftmax && op != OpKind::Hardmax &&
             op != OpKind::LpNormalization)
      ins.push_back(b.ints({1}));
    b.outputs({b.node1(op, ins, a)});
    check(b.g, {{withSpecials({8, 6}, 1)}, {withSpecials({5, 6}, 2)}});
  }
}

} // namespace
