// Lowering of the ShapeOps family (lower/ops/ShapeOps.cpp), compared with the interpreter.
#include "LowerTestUtil.h"

#include <gtest/gtest.h>

using namespace coil;
using namespace coil::loop;
using namespace coil::lowertest;

namespace {

const SymInt N = SymInt::symbol("N");
const std::vector<SymBindings> kSizes = {{{"N", 1}}, {{"N", 3}}};
const Tolerance kExact{0, 0};

/// Neg of a view makes the view a node's input (a view as a direct output is copied too).
ValueId neg(GraphBuilder &b, ValueId v) {
  return b.op(OpKind::Neg, {v});
}

TEST(ShapeOpsLower, ReshapeFlattenSqueezeUnsqueeze) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::F32, {N, 2, 6});
  b.output(neg(b, b.op(OpKind::Reshape, {x, b.ints("s1", {0, 3, -1})})));
  b.output(neg(b, b.op(OpKind::Reshape, {x, b.ints("s2", {-1})})));
  b.output(neg(b, b.op(OpKind::Reshape, {x, b.ints("s3", {0, 4, 1, 3})})));
  b.output(b.op(OpKind::Reshape, {x, b.ints("s4", {2, -1, 3})}));
  for (int64_t axis : {0, 1, 2, 3, -1})
    b.output(neg(b, b.op(OpKind::Flatten, {x}, attrs({{"axis", axis}}))));
  ValueId u = b.op(OpKind::Unsqueeze, {x, b.ints("ax", {0, -1})});
  b.output(neg(b, u));
  b.output(neg(b, b.op(OpKind::Squeeze, {u, b.ints("sq", {0, 4})})));
  checkGraph(b.g, kSizes, kExact);
  GraphBuilder c; // squeeze of every unit dim needs constant dims
  ValueId y = c.input("y", DType::I8, {1, 3, 1, 2});
  c.output(c.op(OpKind::Squeeze, {y}));
  c.output(c.op(OpKind::Unsqueeze, {y, c.ints("ax", {1, 3, -1})}));
  checkGraph(c.g, {{}}, kExact);
}

TEST(ShapeOpsLower, ReshapeOfTransposedView) {
  // Reshape of a reshape of a slice: views compose.
  GraphBuilder b;
  ValueId x = b.input("x", DType::I32, {N, 4, 6});
  ValueId s = b.op(OpKind::Slice, {x, b.ints("st", {1}), b.ints("en", {6}), b.ints("ax", {2}),
                                   b.ints("sp", {2})}); // [N, 4, 3]
  ValueId r = b.op(OpKind::Reshape, {s, b.ints("t", {0, 2, 6})});
  b.output(neg(b, b.op(OpKind::Reshape, {r, b.ints("t2", {-1, 3})})));
  checkGraph(b.g, kSizes, kExact);
}

TEST(ShapeOpsLower, Expand) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::F32, {3, 1});
  ValueId y = b.input("y", DType::I64, {N, 1, 4});
  b.output(neg(b, b.op(OpKind::Expand, {x, b.ints("s", {2, 3, 4})})));
  b.output(b.op(OpKind::Expand, {y, b.symconst("sy", {N, 3, 1})}));
  b.output(b.op(OpKind::Expand, {x, b.ints("same", {1})}));
  checkGraph(b.g, kSizes, kExact);
}

TEST(ShapeOpsLower, Concat) {
  for (int64_t axis : {0, 1, -1}) {
    GraphBuilder b;
    ValueId x = b.input("x", DType::F32, {N, 2, 3});
    ValueId y = b.input("y", DType::F32, {N, 2, 3});
    ValueId c = b.constant("c", Tensor::fromDoubles(DType::F32, {1, 2, 3}, {1, 2, 3, 4, 5, 6}));
    if (axis == 0) {
      b.output(b.op(OpKind::Concat, {x, c, y, c}, attrs({{"axis", axis}})));
    } else {
      b.output(b.op(OpKind::Concat, {x, y, x}, attrs({{"axis", axis}})));
    }
    checkGraph(b.g, kSizes, kExact, {}, "axis " + std::to_string(axis));
  }
  // an empty input, a single input, integers
  GraphBuilder b;
  ValueId x = b.input("x", DType::U8, {N, 3});
  ValueId e = b.constant("e", Tensor(DType::U8, {0, 3}));
  b.output(b.op(OpKind::Concat, {e, x, e}, attrs({{"axis", int64_t(0)}})));
  b.output(b.op(OpKind::Concat, {x}, attrs({{"axis", int64_t(1)}})));
  b.output(b.op(OpKind::Concat, {x, e, x}, attrs({{"axis", int64_t(0)}})));
  checkGraph(b.g, kSizes, kExact);
}

TEST(ShapeOpsLower, Gather) {
  for (DType it : {DType::I64, DType::I32}) {
    for (int64_t axis : {0, 1, -1}) {
      for (std::vector<SymInt> ishape :
           {std::vector<SymInt>{}, std::vector<SymInt>{5}, std::vector<SymInt>{2, N}}) {
        GraphBuilder b;
        ValueId x = b.input("x", DType::F32, {4, 3, 2});
        ValueId i = b.input("i", it, ishape);
        b.output(b.op(OpKind::Gather, {x, i}, attrs({{"axis", axis}})));
        int64_t len = axis == 0 ? 4 : axis == 1 ? 3 : 2;
        uint64_t seed = 3;
        for (const SymBindings &s : kSizes) {
          auto ins = randomInputs(b.g, s, seed++);
          std::mt19937_64 rng(seed);
          for (int64_t k = 0; k < ins[1].numel(); ++k)
            ins[1].setInt(k, int64_t(rng() % uint64_t(2 * len)) - len); // [-len, len)
          expectMatchesInterpreter(b.g, ins, kExact,
                                   "gather axis " + std::to_string(axis) + " rank " +
                                       std::to_string(ishape.size()));
        }
      }
    }
  }
  // constant scalar indices become views
  GraphBuilder b;
  ValueId x = b.input("x", DType::I32, {N, 5});
  ValueId g1 = b.op(OpKind::Gather, {x, b.constant("k", Tensor::fromInts(DType::I64, {}, {-2}))},
                    attrs({{"axis", int64_t(1)}}));
  b.output(neg(b, g1));
  b.output(b.op(OpKind::Gather, {x, b.constant("k0", Tensor::fromInts(DType::I64, {}, {0}))}));
  checkGraph(b.g, kSizes, kExact);
  auto p = lowerGraph(b.g);
  ASSERT_TRUE(p.ok());
  EXPECT_NE(printLoopProgram(*p).find("load i32 x[%x0, 3]"), std::string::npos)
      << printLoopProgram(*p);
}

TEST(ShapeOpsLower, Slice) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  struct Case {
    std::vector<int64_t> starts, ends, axes, steps;
  };
  const Case cases[] = {
      {{1}, {3}, {}, {}},
      {{0, 1}, {-1, 100}, {}, {}},
      {{-1}, {-big}, {2}, {-1}},
      {{5, 2}, {0, -big}, {1, 2}, {-2, -3}},
      {{-100, 0}, {big, 7}, {0, -1}, {1, 3}},
      {{2}, {1}, {1}, {1}}, // empty
      {{1, 1, 0}, {-1, big, 2}, {2, 1, 0}, {2, 1, 1}},
  };
  for (const Case &c : cases) {
    GraphBuilder b;
    ValueId x = b.input("x", DType::F32, {N, 4, 7});
    std::vector<ValueId> in = {x, b.ints("s", c.starts), b.ints("e", c.ends)};
    if (!c.axes.empty() || !c.steps.empty()) {
      std::vector<int64_t> axes = c.axes;
      if (axes.empty())
        for (size_t k = 0; k < c.starts.size(); ++k) axes.push_back(int64_t(k));
      in.push_back(b.ints("a", axes));
    }
    if (!c.steps.empty()) in.push_back(b.ints("p", c.steps));
    ValueId s = b.op(OpKind::Slice, in);
    b.output(s);
    b.output(neg(b, s));
    checkGraph(b.g, kSizes, kExact);
  }
  // symbolic bounds: x[:, N:] over a dim of size 2N
  GraphBuilder b;
  ValueId x = b.input("x", DType::I64, {N, 2 * N});
  ValueId s = b.op(OpKind::Slice, {x, b.symconst("st", {N}), b.ints("e", {big}), b.ints("a", {1})});
  b.output(s);
  checkGraph(b.g, kSizes, kExact);
}

TEST(ShapeOpsLower, ShapeSizeRangeConstants) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::F32, {N, 3, 2 * N});
  b.output(b.op(OpKind::Shape, {x}));
  b.output(b.op(OpKind::Shape, {x}, attrs({{"start", int64_t(1)}})));
  b.output(b.op(OpKind::Shape, {x}, attrs({{"start", int64_t(-1)}, {"end", int64_t(10)}})));
  b.output(b.op(OpKind::Size, {x}));
  b.output(b.op(OpKind::Range, {b.constant("r0", Tensor::scalar(DType::F32, 0.5)),
                                b.constant("r1", Tensor::scalar(DType::F32, 4.1)),
                                b.constant("r2", Tensor::scalar(DType::F32, 0.3))}));
  b.output(b.op(OpKind::Range, {b.constant("i0", Tensor::fromInts(DType::I32, {}, {10})),
                                b.constant("i1", Tensor::fromInts(DType::I32, {}, {-3})),
                                b.constant("i2", Tensor::fromInts(DType::I32, {}, {-4}))}));
  Attrs cv;
  cv.set("value", Tensor::fromInts(DType::I32, {1}, {-7}));
  b.output(b.op(OpKind::ConstantOfShape, {b.symconst("cs", {N, 2})}, cv));
  b.output(b.op(OpKind::ConstantOfShape, {b.ints("cs2", {2, 2})}));
  Attrs ct;
  ct.set("value", Tensor::fromDoubles(DType::F16, {2, 2}, {1.5, -2, 0.25, 8}));
  b.output(b.op(OpKind::Constant, {}, ct));
  b.output(b.op(OpKind::Constant, {}, attrs({{"value_ints", std::vector<int64_t>{4, -5, 6}}})));
  checkGraph(b.g, kSizes, kExact);
}

TEST(ShapeOpsLower, EmptyTensorsAndScalars) {
  GraphBuilder b;
  ValueId e = b.input("e", DType::F32, {0, 3});
  ValueId v = b.input("v", DType::F32, {3});
  ValueId s = b.input("s", DType::F32, {});
  ValueId i = b.input("i", DType::I64, {0});
  b.output(b.op(OpKind::Add, {e, v}));
  b.output(b.op(OpKind::Concat, {e, e}, attrs({{"axis", int64_t(1)}})));
  b.output(b.op(OpKind::Gather, {v, i}));
  b.output(b.op(OpKind::Reshape, {e, b.ints("t", {3, 0})}, attrs({{"allowzero", int64_t(1)}})));
  b.output(b.op(OpKind::Mul, {s, s}));
  b.output(b.op(OpKind::Sub, {v, s}));
  b.output(b.op(OpKind::Unsqueeze, {s, b.ints("ax", {0})}));
  b.output(b.op(OpKind::Slice, {v, b.ints("st", {2}), b.ints("en", {2})}));
  checkGraph(b.g, {{}}, kExact);
}

/// A random shape of numel `n` (a product of its factors in a random order, with 1s).
std::vector<int64_t> randomShapeOf(int64_t n, std::mt19937_64 &rng) {
  std::vector<int64_t> dims;
  for (int64_t p : {2, 3, 5})
    while (n % p == 0) {
      n /= p;
      // merge into the last dim half of the time
      if (!dims.empty() && rng() % 2)
        dims.back() *= p;
      else
        dims.push_back(p);
    }
  if (rng() % 3 == 0) dims.insert(dims.begin() + int64_t(rng() % (dims.size() + 1)), 1);
  std::shuffle(dims.begin(), dims.end(), rng);
  return dims;
}

TEST(ShapeOpsLower, RandomReshapeChains) {
  // Chains of reshapes over a dynamic leading dim: runs split, merge and regroup.
  std::mt19937_64 rng(2024);
  for (int trial = 0; trial < 60; ++trial) {
    GraphBuilder b;
    std::vector<SymInt> inShape = {N};
    for (int64_t d : randomShapeOf(60, rng)) inShape.push_back(d);
    ValueId v = b.input("x", DType::I32, inShape);
    int steps = 1 + int(rng() % 3);
    for (int k = 0; k < steps; ++k) {
      std::vector<int64_t> t = {0}; // keep N
      if (rng() % 4 == 0) {
        t.push_back(-1); // flatten the rest
      } else {
        for (int64_t d : randomShapeOf(60, rng)) t.push_back(d);
      }
      v = b.op(OpKind::Reshape, {v, b.ints("t" + std::to_string(k), t)});
    }
    b.output(b.op(OpKind::Neg, {v}));
    checkGraph(b.g, {{{"N", 1}}, {{"N", 3}}}, kExact, {}, "trial " + std::to_string(trial));
  }
}

TEST(ShapeOpsLower, RandomSlices) {
  std::mt19937_64 rng(77);
  auto pick = [&](int64_t lo, int64_t hi) { return lo + int64_t(rng() % uint64_t(hi - lo + 1)); };
  const int64_t big = std::numeric_limits<int64_t>::max();
  for (int trial = 0; trial < 80; ++trial) {
    GraphBuilder b;
    ValueId x = b.input("x", DType::I16, {N, 5, 7});
    std::vector<int64_t> axes = {1, 2, 0};
    std::shuffle(axes.begin(), axes.end(), rng);
    axes.resize(size_t(pick(1, 3)));
    std::vector<int64_t> starts, ends, steps;
    for (size_t k = 0; k < axes.size(); ++k) {
      int64_t a = axes[k];
      int64_t len = a == 0 ? 3 : a == 1 ? 5 : 7;
      int64_t st = pick(-len - 2, len + 2), en = pick(-len - 2, len + 2);
      if (rng() % 5 == 0) en = rng() % 2 ? big : -big;
      int64_t step = pick(1, 3) * (rng() % 3 == 0 ? -1 : 1);
      if (a == 0 && (st < 0 || en < 0)) st = 0; // N's slice bounds: non-negative starts
      if (a == 0) en = en < 0 ? big : en, step = std::abs(step);
      starts.push_back(st);
      ends.push_back(en);
      steps.push_back(step);
      if (rng() % 2) axes[k] -= 3; // negative axes too
    }
    ValueId s = b.op(OpKind::Slice, {x, b.ints("s", starts), b.ints("e", ends), b.ints("a", axes),
                                     b.ints("p", steps)});
    ASSERT_NE(s, kNoValue);
    b.output(b.op(OpKind::Neg, {s}));
    checkGraph(b.g, {{{"N", 1}}, {{"N", 3}}, {{"N", 4}}}, kExact, {},
               "trial " + std::to_string(trial));
  }
}

// Shapes read at run time (Range of a run-time limit, ...): see DynShapeLowerTest.cpp.

} // namespace
