// Tests of the ShapeOps family: reference kernels and inference, checked against each other.
#include "interp/Kernel.h"
#include "ir/Infer.h"

#include <gtest/gtest.h>
#include <limits>

namespace coil {
namespace {

struct OpRun {
  Node node;
  std::vector<Tensor> inputs; ///< undefined Tensor = absent optional input

  OpRun(OpKind op, std::vector<Tensor> ins, Attrs attrs = {}) : inputs(std::move(ins)) {
    node.op = op;
    node.name = std::string(opName(op));
    node.attrs = std::move(attrs);
    for (size_t i = 0; i < inputs.size(); ++i)
      node.inputs.push_back(inputs[i].defined() ? ValueId(i) : kNoValue);
    node.outputs = {ValueId(inputs.size())};
  }

  Expected<std::vector<Tensor>> kernel() {
    KernelContext ctx{node, {}, nullptr};
    for (const Tensor &t : inputs) ctx.inputs.push_back(t.defined() ? &t : nullptr);
    KernelFn fn = kernelFor(node.op);
    EXPECT_NE(fn, nullptr);
    return fn(ctx);
  }

  /// Inference with every integer input's contents known (as the importer provides them).
  Expected<std::vector<TensorType>> infer(bool knowContents = true) {
    std::vector<TensorType> types(inputs.size());
    InferContext ctx{node, {}, {}, {}, {}};
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].defined()) {
        ctx.inputTypes.push_back(nullptr);
        ctx.intValues.push_back(std::nullopt);
        ctx.constants.push_back(nullptr);
        continue;
      }
      types[i].dtype = inputs[i].dtype();
      for (int64_t d : inputs[i].shape()) types[i].shape.push_back(d);
      ctx.inputTypes.push_back(&types[i]);
      std::optional<std::vector<SymInt>> iv;
      if (knowContents && !isFloat(inputs[i].dtype())) {
        iv.emplace();
        for (int64_t v : inputs[i].toInts()) iv->push_back(v);
      }
      ctx.intValues.push_back(iv);
      ctx.constants.push_back(knowContents ? &inputs[i] : nullptr);
    }
    int counter = 0;
    ctx.freshSymbol = [&counter](const std::string &h) {
      return SymInt::symbol(h + std::to_string(counter++));
    };
    return inferNode(ctx);
  }

  /// Runs the kernel and checks the result against inference; returns output 0.
  Tensor run() {
    auto out = kernel();
    EXPECT_TRUE(out.ok()) << out.error().render();
    if (!out.ok()) return {};
    auto types = infer();
    EXPECT_TRUE(types.ok()) << types.error().render();
    if (types.ok()) {
      EXPECT_EQ((*types)[0].dtype, (*out)[0].dtype());
      auto s = (*types)[0].concreteShape();
      EXPECT_TRUE(s.has_value()) << (*types)[0].str();
      if (s) EXPECT_EQ(*s, (*out)[0].shape()) << (*types)[0].str();
    }
    return (*out)[0];
  }
};

Tensor i64(Shape s, std::vector<int64_t> v) {
  return Tensor::fromInts(DType::I64, std::move(s), v);
}
Tensor vec(std::vector<int64_t> v) {
  return i64({int64_t(v.size())}, v);
}
Tensor iota(DType dt, Shape s) {
  std::vector<int64_t> v(size_t(numelOf(s)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t(i);
  return Tensor::fromInts(dt, std::move(s), v);
}
Attrs attrs(std::initializer_list<std::pair<std::string, AttrValue>> kv) {
  Attrs a;
  for (const auto &[k, v] : kv) a.set(k, v);
  return a;
}

TEST(ShapeOpsKernels, ShapeAndSize) {
  Tensor x = iota(DType::F32, {2, 3, 4});
  EXPECT_EQ(OpRun(OpKind::Shape, {x}).run().toInts(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(OpRun(OpKind::Shape, {x}, attrs({{"start", int64_t(-2)}})).run().toInts(),
            (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(OpRun(OpKind::Shape, {x}, attrs({{"start", int64_t(1)}, {"end", int64_t(-1)}}))
                .run()
                .toInts(),
            (std::vector<int64_t>{3}));
  EXPECT_EQ(OpRun(OpKind::Shape, {x}, attrs({{"start", int64_t(5)}})).run().numel(), 0);
  Tensor n = OpRun(OpKind::Size, {x}).run();
  EXPECT_EQ(n.rank(), 0);
  EXPECT_EQ(n.getInt(0), 24);
}

TEST(ShapeOpsKernels, Reshape) {
  Tensor x = iota(DType::I32, {2, 3, 4});
  Tensor y = OpRun(OpKind::Reshape, {x, vec({0, -1})}).run();
  EXPECT_EQ(y.shape(), (Shape{2, 12}));
  EXPECT_EQ(y.toInts(), x.toInts());
  EXPECT_EQ(OpRun(OpKind::Reshape, {x, vec({4, 0, 2})}).run().shape(), (Shape{4, 3, 2}));
  Tensor empty = iota(DType::F32, {0, 3});
  EXPECT_EQ(OpRun(OpKind::Reshape, {empty, vec({3, 0})}, attrs({{"allowzero", int64_t(1)}}))
                .run()
                .shape(),
            (Shape{3, 0}));
  EXPECT_FALSE(OpRun(OpKind::Reshape, {x, vec({5, -1})}).kernel().ok());
  EXPECT_FALSE(OpRun(OpKind::Reshape, {x, vec({-1, -1})}).kernel().ok());
  auto bad = OpRun(OpKind::Reshape, {x, vec({5, 5})}).infer();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("cannot reshape"), std::string::npos);
}

TEST(ShapeOpsKernels, FlattenSqueezeUnsqueeze) {
  Tensor x = iota(DType::U8, {2, 1, 3, 1});
  EXPECT_EQ(OpRun(OpKind::Flatten, {x}).run().shape(), (Shape{2, 3}));
  EXPECT_EQ(OpRun(OpKind::Flatten, {x}, attrs({{"axis", int64_t(0)}})).run().shape(),
            (Shape{1, 6}));
  EXPECT_EQ(OpRun(OpKind::Flatten, {x}, attrs({{"axis", int64_t(-1)}})).run().shape(),
            (Shape{6, 1}));
  EXPECT_EQ(OpRun(OpKind::Squeeze, {x}).run().shape(), (Shape{2, 3}));
  EXPECT_EQ(OpRun(OpKind::Squeeze, {x, vec({-1})}).run().shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(OpRun(OpKind::Squeeze, {x}, attrs({{"axes", std::vector<int64_t>{1}}})).run().shape(),
            (Shape{2, 3, 1}));
  EXPECT_FALSE(OpRun(OpKind::Squeeze, {x, vec({0})}).kernel().ok());
  EXPECT_FALSE(OpRun(OpKind::Squeeze, {x, vec({0})}).infer().ok());
  Tensor u = OpRun(OpKind::Unsqueeze, {x, vec({0, -1})}).run();
  EXPECT_EQ(u.shape(), (Shape{1, 2, 1, 3, 1, 1}));
  EXPECT_EQ(u.toInts(), x.toInts());
  EXPECT_FALSE(OpRun(OpKind::Unsqueeze, {x, vec({0, 0})}).kernel().ok());
  Tensor s = Tensor::fromInts(DType::I64, {}, {7});
  EXPECT_EQ(OpRun(OpKind::Unsqueeze, {s, vec({0})}).run().shape(), (Shape{1}));
}

TEST(ShapeOpsKernels, Concat) {
  Tensor a = iota(DType::I16, {2, 2}), b = iota(DType::I16, {2, 3});
  Tensor y = OpRun(OpKind::Concat, {a, b}, attrs({{"axis", int64_t(-1)}})).run();
  EXPECT_EQ(y.shape(), (Shape{2, 5}));
  EXPECT_EQ(y.toInts(), (std::vector<int64_t>{0, 1, 0, 1, 2, 2, 3, 3, 4, 5}));
  Tensor z = OpRun(OpKind::Concat, {a, a}, attrs({{"axis", int64_t(0)}})).run();
  EXPECT_EQ(z.toInts(), (std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_FALSE(OpRun(OpKind::Concat, {a, b}, attrs({{"axis", int64_t(0)}})).kernel().ok());
  EXPECT_FALSE(OpRun(OpKind::Concat, {a, b}, attrs({{"axis", int64_t(0)}})).infer().ok());
}

TEST(ShapeOpsKernels, Gather) {
  Tensor x = iota(DType::F64, {2, 3});
  Tensor idx = Tensor::fromInts(DType::I32, {2, 2}, {0, -1, 2, 1});
  Tensor y = OpRun(OpKind::Gather, {x, idx}, attrs({{"axis", int64_t(1)}})).run();
  EXPECT_EQ(y.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(y.toInts(), (std::vector<int64_t>{0, 2, 2, 1, 3, 5, 5, 4}));
  Tensor s = OpRun(OpKind::Gather, {x, Tensor::fromInts(DType::I64, {}, {1})}).run();
  EXPECT_EQ(s.shape(), (Shape{3}));
  EXPECT_EQ(s.toInts(), (std::vector<int64_t>{3, 4, 5}));
  auto bad = OpRun(OpKind::Gather, {x, vec({2})}).kernel();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("index 2 is out of range"), std::string::npos);
}

TEST(ShapeOpsKernels, Slice) {
  Tensor x = iota(DType::I64, {3, 4});
  Tensor a = OpRun(OpKind::Slice, {x, vec({1, 0}), vec({3, 3})}).run();
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(a.toInts(), (std::vector<int64_t>{4, 5, 6, 8, 9, 10}));
  const int64_t big = std::numeric_limits<int64_t>::max();
  Tensor b = OpRun(OpKind::Slice, {x, vec({-1}), vec({-big}), vec({1}), vec({-2})}).run();
  EXPECT_EQ(b.shape(), (Shape{3, 2}));
  EXPECT_EQ(b.toInts(), (std::vector<int64_t>{3, 1, 7, 5, 11, 9}));
  Tensor c = OpRun(OpKind::Slice, {x, vec({5}), vec({big}), vec({0})}).run();
  EXPECT_EQ(c.shape(), (Shape{0, 4}));
  Tensor d = OpRun(OpKind::Slice, {x, vec({-10}), vec({10}), Tensor(), vec({2})}).run();
  EXPECT_EQ(d.toInts(), (std::vector<int64_t>{0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_FALSE(OpRun(OpKind::Slice, {x, vec({0}), vec({1}), vec({0}), vec({0})}).kernel().ok());
}

TEST(ShapeOpsKernels, ExpandConstantOfShapeRange) {
  Tensor x = iota(DType::Bool, {3, 1});
  Tensor y = OpRun(OpKind::Expand, {x, vec({2, 1, 2})}).run();
  EXPECT_EQ(y.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(y.toInts(), (std::vector<int64_t>{0, 0, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1}));
  EXPECT_FALSE(OpRun(OpKind::Expand, {x, vec({2, 2})}).kernel().ok());
  Tensor c = OpRun(OpKind::ConstantOfShape, {vec({2, 2})},
                   attrs({{"value", Tensor::fromInts(DType::I32, {1}, {7})}}))
                 .run();
  EXPECT_EQ(c.dtype(), DType::I32);
  EXPECT_EQ(c.toInts(), (std::vector<int64_t>{7, 7, 7, 7}));
  Tensor z = OpRun(OpKind::ConstantOfShape, {i64({0}, {})}).run();
  EXPECT_EQ(z.rank(), 0);
  EXPECT_EQ(z.dtype(), DType::F32);
  auto sc = [](int64_t v) { return Tensor::fromInts(DType::I32, {}, {v}); };
  EXPECT_EQ(OpRun(OpKind::Range, {sc(10), sc(3), sc(-3)}).run().toInts(),
            (std::vector<int64_t>{10, 7, 4}));
  EXPECT_EQ(OpRun(OpKind::Range, {sc(0), sc(-3), sc(1)}).run().numel(), 0);
  auto fs = [](double v) { return Tensor::scalar(DType::F32, v); };
  EXPECT_EQ(OpRun(OpKind::Range, {fs(1), fs(2), fs(0.25)}).run().toDoubles(),
            (std::vector<double>{1, 1.25, 1.5, 1.75}));
  EXPECT_FALSE(OpRun(OpKind::Range, {sc(0), sc(3), sc(0)}).kernel().ok());
  auto lc = [](int64_t v) { return Tensor::fromInts(DType::I64, {}, {v}); };
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(OpRun(OpKind::Range, {lc(hi - 1), lc(lo), lc(lo)}).kernel()->at(0).toInts(),
            (std::vector<int64_t>{hi - 1, -2}));
  EXPECT_FALSE(OpRun(OpKind::Range, {lc(lo), lc(hi), lc(1)}).kernel().ok()); // too large
  EXPECT_FALSE(OpRun(OpKind::ConstantOfShape, {vec({1 << 30, 1 << 30})}).kernel().ok());
}

TEST(ShapeOpsInfer, RunTimeAxesGiveRankWithFreshDims) {
  Tensor x = iota(DType::F32, {2, 1, 3});
  auto sq = OpRun(OpKind::Squeeze, {x, vec({1})}).infer(/*knowContents=*/false);
  ASSERT_TRUE(sq.ok()) << sq.error().render();
  EXPECT_EQ((*sq)[0].rank(), 2);
  EXPECT_FALSE((*sq)[0].shape[0].isConstant());
  auto un = OpRun(OpKind::Unsqueeze, {x, vec({0, 4})}).infer(false);
  ASSERT_TRUE(un.ok()) << un.error().render();
  EXPECT_EQ((*un)[0].rank(), 5);
  EXPECT_FALSE(OpRun(OpKind::Squeeze, {x, vec({0, 1, 2, 0})}).infer(false).ok());
}

TEST(ShapeOpsInfer, SymbolicShapes) {
  // Slice to the end of a symbolic axis keeps the symbol; Reshape infers -1 exactly.
  SymInt N = SymInt::symbol("N");
  Node slice{OpKind::Slice, "s", {0, 1, 2, 3}, {4}, {}, {}};
  TensorType x{DType::F32, {N, 8}}, v1{DType::I64, {1}};
  InferContext ctx{slice, {&x, &v1, &v1, &v1}, {}, {}, {}};
  const int64_t big = std::numeric_limits<int64_t>::max();
  ctx.intValues = {std::nullopt, std::vector<SymInt>{1}, std::vector<SymInt>{big},
                   std::vector<SymInt>{0}};
  ctx.constants.assign(4, nullptr);
  auto r = inferNode(ctx);
  ASSERT_TRUE(r.ok()) << r.error().render();
  SymBindings b{{"N", 5}};
  EXPECT_EQ(*(*r)[0].shape[0].evaluate(b), 4);

  Node reshape{OpKind::Reshape, "r", {0, 1}, {2}, {}, {}};
  TensorType x2{DType::F32, {N, 8, 6}}, v2{DType::I64, {2}};
  InferContext c2{reshape, {&x2, &v2}, {}, {}, {}};
  c2.intValues = {std::nullopt, std::vector<SymInt>{N, -1}};
  c2.constants.assign(2, nullptr);
  auto r2 = inferNode(c2);
  ASSERT_TRUE(r2.ok()) << r2.error().render();
  EXPECT_TRUE((*r2)[0].shape[1].isConstant()) << (*r2)[0].str();
  EXPECT_EQ((*r2)[0].shape[1], SymInt(48));
}

TEST(ShapeOpsInfer, SliceWithSymbolicBounds) {
  // x[0:N] of a length-128 axis is min(N, 128); x[N-1:] (start of unknown sign) is fresh;
  // x[-N-1:] (a provably negative start) counts from the end and clamps at 0.
  SymInt N = SymInt::symbol("N");
  Node slice{OpKind::Slice, "s", {0, 1, 2, 3}, {4}, {}, {}};
  TensorType x{DType::F32, {2, 128}}, v1{DType::I64, {1}};
  auto run = [&](SymInt start, SymInt end) {
    InferContext ctx{slice, {&x, &v1, &v1, &v1}, {}, {}, {}};
    ctx.intValues = {std::nullopt, std::vector<SymInt>{start}, std::vector<SymInt>{end},
                     std::vector<SymInt>{1}};
    ctx.constants.assign(4, nullptr);
    ctx.freshSymbol = [](const std::string &) { return SymInt::symbol("fresh"); };
    auto r = inferNode(ctx);
    EXPECT_TRUE(r.ok()) << r.error().render();
    return r.ok() ? (*r)[0].shape[1] : SymInt(-7);
  };
  EXPECT_EQ(run(0, N), min(N, SymInt(128)));
  EXPECT_EQ(run(N - 1, 1000), SymInt::symbol("fresh"));
  SymInt fromEnd = run(-N - 1, 1000); // start = 128 - N - 1 clamped at 0
  for (int64_t n : {0, 5, 127, 128, 500}) {
    int64_t start = std::max<int64_t>(128 - n - 1, 0);
    EXPECT_EQ(*fromEnd.evaluate({{"N", n}}), 128 - start) << n << ": " << fromEnd.str();
  }
  // The kernel agrees with inference on a concrete case.
  for (int64_t n : {3, 200}) {
    auto k =
        OpRun(OpKind::Slice, {iota(DType::F32, {2, 128}), vec({0}), vec({n}), vec({1})}).kernel();
    ASSERT_TRUE(k.ok()) << k.error().render();
    EXPECT_EQ((*k)[0].dim(1), *run(0, N).evaluate({{"N", n}}));
  }
}

} // namespace
} // namespace coil
