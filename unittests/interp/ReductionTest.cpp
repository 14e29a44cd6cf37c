// Tests of the Reduction family: inference (ir/infer/Reduction.cpp) and reference kernels
// (interp/kernels/Reduction*.cpp), run together on concrete inputs.
#include "interp/Kernel.h"
#include "ir/Infer.h"

#include <cmath>
#include <gtest/gtest.h>
#include <limits>

using namespace coil;

namespace {

TensorType typeOf(const Tensor &t) {
  std::vector<SymInt> s(t.shape().begin(), t.shape().end());
  return TensorType{t.dtype(), s};
}

Node makeNode(OpKind op, Attrs attrs, size_t nIn, size_t nOut) {
  Node n{op, "n", {}, {}, std::move(attrs), {}};
  for (size_t i = 0; i < nIn; ++i) n.inputs.push_back(ValueId(i));
  for (size_t i = 0; i < nOut; ++i) n.outputs.push_back(ValueId(nIn + i));
  return n;
}

/// Infers types of `op` on the inputs (integer inputs known as constants unless `unknownInts`)
/// and returns them, or the error.
Expected<std::vector<TensorType>> infer(OpKind op, Attrs attrs, std::vector<const Tensor *> in,
                                        size_t nOut = 1, bool unknownInts = false) {
  Node n = makeNode(op, std::move(attrs), in.size(), nOut);
  std::vector<TensorType> types;
  for (const Tensor *t : in) types.push_back(t ? typeOf(*t) : TensorType{});
  int fresh = 0;
  InferContext ctx{n, {}, {}, {}, [&fresh](const std::string &h) {
                     return SymInt::symbol(h + std::to_string(fresh++));
                   }};
  for (size_t i = 0; i < in.size(); ++i) {
    ctx.inputTypes.push_back(in[i] ? &types[i] : nullptr);
    ctx.constants.push_back(in[i]);
    std::optional<std::vector<SymInt>> v;
    if (in[i] && isInteger(in[i]->dtype()) && !unknownInts) {
      std::vector<SymInt> s;
      for (int64_t x : in[i]->toInts()) s.push_back(x);
      v = s;
    }
    ctx.intValues.push_back(v);
  }
  return inferNode(ctx);
}

/// Runs inference and the kernel; checks that the kernel's results have the inferred types.
std::vector<Tensor> run(OpKind op, Attrs attrs, std::vector<const Tensor *> in, size_t nOut = 1) {
  auto types = infer(op, attrs, in, nOut);
  EXPECT_TRUE(types.ok()) << (types.ok() ? "" : types.error().render());
  if (!types.ok()) return {};
  Node n = makeNode(op, std::move(attrs), in.size(), nOut);
  KernelContext kctx{n, in, &*types};
  auto outs = kernelFor(op)(kctx);
  EXPECT_TRUE(outs.ok()) << (outs.ok() ? "" : outs.error().render());
  if (!outs.ok()) return {};
  EXPECT_EQ(outs->size(), types->size());
  for (size_t i = 0; i < outs->size() && i < types->size(); ++i)
    EXPECT_EQ(typeOf((*outs)[i]), (*types)[i]) << "output " << i;
  return *outs;
}

Attrs attrs(std::initializer_list<std::pair<std::string, AttrValue>> kv) {
  Attrs a;
  for (auto &[k, v] : kv) a.set(k, v);
  return a;
}

Tensor f32(Shape s, std::vector<double> v) {
  return Tensor::fromDoubles(DType::F32, s, v);
}
Tensor i64(Shape s, std::vector<int64_t> v) {
  return Tensor::fromInts(DType::I64, s, v);
}

void expectNear(const Tensor &t, const std::vector<double> &want, double tol = 1e-5) {
  ASSERT_EQ(t.numel(), int64_t(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    double g = t.getDouble(int64_t(i));
    if (std::isnan(want[i]) || std::isinf(want[i]))
      EXPECT_TRUE(std::isnan(want[i]) ? std::isnan(g) : g == want[i]) << "at " << i << ": " << g;
    else
      EXPECT_NEAR(g, want[i], tol) << "at " << i;
  }
}

} // namespace

TEST(ReductionTest, ReduceSumAxesInputAndAttribute) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor axes = i64({1}, {-1});
  auto r = run(OpKind::ReduceSum, {}, {&x, &axes});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].shape(), (Shape{2, 1}));
  expectNear(r[0], {6, 15});
  // Older opsets: axes as attribute, keepdims=0.
  r = run(OpKind::ReduceMean, attrs({{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t(0)}}),
          {&x});
  EXPECT_EQ(r[0].shape(), (Shape{3}));
  expectNear(r[0], {2.5, 3.5, 4.5});
}

TEST(ReductionTest, EmptyAxesReducesAllOrIsNoop) {
  Tensor x = f32({2, 2}, {1, 2, 3, 4});
  Tensor none = i64({0}, {});
  auto r = run(OpKind::ReduceSum, attrs({{"keepdims", int64_t(0)}}), {&x, &none});
  EXPECT_EQ(r[0].shape(), Shape{});
  expectNear(r[0], {10});
  r = run(OpKind::ReduceProd, attrs({{"noop_with_empty_axes", int64_t(1)}}), {&x, &none});
  EXPECT_EQ(r[0].shape(), (Shape{2, 2}));
  expectNear(r[0], {1, 2, 3, 4});
  r = run(OpKind::ReduceMax, {}, {&x});
  EXPECT_EQ(r[0].shape(), (Shape{1, 1}));
  expectNear(r[0], {4});
}

TEST(ReductionTest, EmptyReductionsGiveIdentities) {
  const double inf = std::numeric_limits<double>::infinity();
  Tensor x = f32({2, 0}, {});
  Tensor ax = i64({1}, {1});
  expectNear(run(OpKind::ReduceSum, {}, {&x, &ax})[0], {0, 0});
  expectNear(run(OpKind::ReduceProd, {}, {&x, &ax})[0], {1, 1});
  expectNear(run(OpKind::ReduceMax, {}, {&x, &ax})[0], {-inf, -inf});
  expectNear(run(OpKind::ReduceMin, {}, {&x, &ax})[0], {inf, inf});
  expectNear(run(OpKind::ReduceLogSumExp, {}, {&x, &ax})[0], {-inf, -inf});
  expectNear(run(OpKind::ReduceL2, {}, {&x, &ax})[0], {0, 0});
  Tensor xi = Tensor(DType::I32, {0, 3});
  Tensor ax0 = i64({1}, {0});
  auto mx = run(OpKind::ReduceMax, {}, {&xi, &ax0});
  EXPECT_EQ(mx[0].shape(), (Shape{1, 3}));
  EXPECT_EQ(mx[0].getInt(0), std::numeric_limits<int32_t>::lowest());
  auto mn = run(OpKind::ReduceMin, {}, {&xi, &ax0});
  EXPECT_EQ(mn[0].getInt(2), std::numeric_limits<int32_t>::max());
  Tensor xu = Tensor(DType::U8, {0});
  auto mnu = run(OpKind::ReduceMin, attrs({{"keepdims", int64_t(0)}}), {&xu});
  EXPECT_EQ(mnu[0].getInt(0), 255);
}

TEST(ReductionTest, NegativeAndBadAxes) {
  Tensor x = f32({2, 3, 4}, std::vector<double>(24, 1.0));
  Tensor ax = i64({2}, {-1, 0});
  auto r = run(OpKind::ReduceSum, attrs({{"keepdims", int64_t(0)}}), {&x, &ax});
  EXPECT_EQ(r[0].shape(), (Shape{3}));
  expectNear(r[0], {8, 8, 8});
  Tensor bad = i64({1}, {3});
  auto e = infer(OpKind::ReduceSum, {}, {&x, &bad});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message(), "axis 3 is out of range for rank 3");
  Tensor dup = i64({2}, {1, -2});
  EXPECT_FALSE(infer(OpKind::ReduceSum, {}, {&x, &dup}).ok());
}

TEST(ReductionTest, NonConstantAxes) {
  Tensor x = f32({1, 3}, {1, 2, 3});
  Tensor ax = i64({1}, {1});
  auto t = infer(OpKind::ReduceSum, {}, {&x, &ax}, 1, /*unknownInts=*/true);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ((*t)[0].rank(), 2);
  EXPECT_EQ((*t)[0].shape[0], SymInt(1));
  EXPECT_TRUE((*t)[0].shape[1].isSymbol());
  // keepdims=0: the rank follows from the (constant) number of axes.
  Tensor y = f32({2, 3, 4}, std::vector<double>(24, 1.0));
  Tensor ax2 = i64({2}, {0, 2});
  auto t0 = infer(OpKind::ReduceSum, attrs({{"keepdims", int64_t(0)}}), {&y, &ax2}, 1, true);
  ASSERT_TRUE(t0.ok());
  ASSERT_EQ((*t0)[0].rank(), 1);
  EXPECT_TRUE((*t0)[0].shape[0].isSymbol());
  // A symbolic number of axes with keepdims=0 cannot be expressed.
  Node n = makeNode(OpKind::ReduceSum, attrs({{"keepdims", int64_t(0)}}), 2, 1);
  TensorType xt{DType::F32, {2, 3}}, at{DType::I64, {SymInt::symbol("K")}};
  InferContext ctx{
      n, {&xt, &at}, {std::nullopt, std::nullopt}, {nullptr, nullptr}, [](const std::string &h) {
        return SymInt::symbol(h);
      }};
  auto e = inferNode(ctx);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message(),
            "ReduceSum with non-constant axes and keepdims=0 is not supported");
}

TEST(ReductionTest, ReduceSumI32WrapsOnOverflow) {
  Tensor x = Tensor::fromInts(DType::I32, {3}, {2147483647, 1, 5});
  auto r = run(OpKind::ReduceSum, attrs({{"keepdims", int64_t(0)}}), {&x});
  EXPECT_EQ(r[0].dtype(), DType::I32);
  EXPECT_EQ(r[0].getInt(0), -2147483648LL + 5);
  Tensor big = Tensor::fromInts(DType::I64, {2}, {int64_t(1) << 62, int64_t(1) << 62});
  auto p = run(OpKind::ReduceProd, attrs({{"keepdims", int64_t(0)}}), {&big});
  EXPECT_EQ(p[0].getInt(0), 0); // 2^124 mod 2^64
  Tensor s = Tensor::fromInts(DType::I64, {2}, {int64_t(1) << 53, 1});
  EXPECT_EQ(run(OpKind::ReduceSum, attrs({{"keepdims", int64_t(0)}}), {&s})[0].getInt(0),
            (int64_t(1) << 53) + 1); // exact beyond double precision
}

TEST(ReductionTest, ArgMaxTiesAndSelectLastIndex) {
  Tensor x = f32({2, 3}, {1, 5, 5, 7, 2, 7});
  auto r = run(OpKind::ArgMax, attrs({{"axis", int64_t(1)}}), {&x});
  EXPECT_EQ(r[0].dtype(), DType::I64);
  EXPECT_EQ(r[0].shape(), (Shape{2, 1}));
  EXPECT_EQ(r[0].toInts(), (std::vector<int64_t>{1, 0}));
  r = run(
      OpKind::ArgMax,
      attrs({{"axis", int64_t(-1)}, {"select_last_index", int64_t(1)}, {"keepdims", int64_t(0)}}),
      {&x});
  EXPECT_EQ(r[0].shape(), (Shape{2}));
  EXPECT_EQ(r[0].toInts(), (std::vector<int64_t>{2, 2}));
  Tensor u = Tensor::fromInts(DType::U64, {3}, {1, -1, 3}); // -1 is 2^64 - 1
  EXPECT_EQ(run(OpKind::ArgMin, {}, {&u})[0].toInts(), (std::vector<int64_t>{0}));
  EXPECT_EQ(run(OpKind::ArgMax, {}, {&u})[0].toInts(), (std::vector<int64_t>{1}));
}

TEST(ReductionTest, TopKTiesLowerIndexFirst) {
  Tensor x = f32({1, 5}, {3, 1, 3, 2, 3});
  Tensor k = i64({1}, {2});
  auto r = run(OpKind::TopK, {}, {&x, &k}, 2);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].shape(), (Shape{1, 2}));
  expectNear(r[0], {3, 3});
  EXPECT_EQ(r[1].toInts(), (std::vector<int64_t>{0, 2}));
  Tensor k3 = i64({1}, {3});
  r = run(OpKind::TopK, attrs({{"largest", int64_t(0)}}), {&x, &k3}, 2);
  expectNear(r[0], {1, 2, 3});
  EXPECT_EQ(r[1].toInts(), (std::vector<int64_t>{1, 3, 0}));
  Tensor k9 = i64({1}, {9});
  EXPECT_FALSE(infer(OpKind::TopK, {}, {&x, &k9}, 2).ok());
  auto t = infer(OpKind::TopK, {}, {&x, &k}, 2, /*unknownInts=*/true);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE((*t)[0].shape[1].isSymbol());
}

TEST(ReductionTest, SoftmaxFamily) {
  Tensor x = f32({2, 2}, {0, std::log(3.0), 1, 1});
  expectNear(run(OpKind::Softmax, attrs({{"axis", int64_t(1)}}), {&x})[0], {0.25, 0.75, 0.5, 0.5});
  expectNear(run(OpKind::LogSoftmax, {}, {&x})[0],
             {std::log(0.25), std::log(0.75), std::log(0.5), std::log(0.5)});
  expectNear(run(OpKind::Hardmax, attrs({{"axis", int64_t(0)}}), {&x})[0], {0, 1, 1, 0});
}

TEST(ReductionTest, LayerNormAxisNotLast) {
  // x [2, 2, 2], axis 1: normalize over the last 4 elements of each batch row.
  Tensor x = f32({2, 2, 2}, {1, 2, 3, 4, 0, 2, 0, 2});
  Tensor scale = f32({2, 2}, {1, 1, 2, 2});
  Tensor bias = f32({2}, {0, 10}); // broadcasts over the last dim
  auto r = run(OpKind::LayerNormalization, attrs({{"axis", int64_t(1)}, {"epsilon", 0.0}}),
               {&x, &scale, &bias}, 3);
  ASSERT_EQ(r.size(), 3u);
  double sd = std::sqrt(1.25);
  expectNear(r[0], {-1.5 / sd, -0.5 / sd + 10, 2 * 0.5 / sd, 2 * 1.5 / sd + 10, -1, 11, -2, 12});
  EXPECT_EQ(r[1].shape(), (Shape{2, 1, 1}));
  expectNear(r[1], {2.5, 1});
  EXPECT_EQ(r[2].dtype(), DType::F32);
  expectNear(r[2], {1 / sd, 1});
}

TEST(ReductionTest, GroupNormOpset18And21) {
  Tensor x = f32({1, 4, 1}, {1, 3, 5, 9});
  Tensor s21 = f32({4}, {1, 2, 1, 1}), b21 = f32({4}, {0, 0, 0, 1});
  auto r = run(OpKind::GroupNormalization, attrs({{"num_groups", int64_t(2)}, {"epsilon", 0.0}}),
               {&x, &s21, &b21});
  expectNear(r[0], {-1, 2, -1, 2});
  Tensor s18 = f32({2}, {1, 3}), b18 = f32({2}, {0, 1});
  r = run(OpKind::GroupNormalization, attrs({{"num_groups", int64_t(2)}, {"epsilon", 0.0}}),
          {&x, &s18, &b18});
  expectNear(r[0], {-1, 1, -2, 4});
}

TEST(ReductionTest, CumSumExclusiveReverse) {
  Tensor x = Tensor::fromInts(DType::I32, {4}, {1, 2, 3, 4});
  Tensor ax = Tensor::fromInts(DType::I32, {}, {0});
  auto r =
      run(OpKind::CumSum, attrs({{"exclusive", int64_t(1)}, {"reverse", int64_t(1)}}), {&x, &ax});
  EXPECT_EQ(r[0].toInts(), (std::vector<int64_t>{9, 7, 4, 0}));
  r = run(OpKind::CumProd, {}, {&x, &ax});
  EXPECT_EQ(r[0].toInts(), (std::vector<int64_t>{1, 2, 6, 24}));
}

TEST(ReductionTest, NllLossIgnoreIndexAndWeights) {
  Tensor lp = f32({2, 3}, {-1, -2, -3, -4, -5, -6});
  Tensor t = i64({2}, {2, 0});
  Tensor w = f32({3}, {1, 1, 2});
  auto r = run(OpKind::NegativeLogLikelihoodLoss, {}, {&lp, &t, &w});
  EXPECT_EQ(r[0].shape(), Shape{});
  expectNear(r[0], {(6.0 + 4.0) / 3.0});
  r = run(OpKind::NegativeLogLikelihoodLoss,
          attrs({{"ignore_index", int64_t(0)}, {"reduction", std::string("none")}}), {&lp, &t});
  expectNear(r[0], {3, 0});
  Tensor bad = i64({2}, {3, 0});
  Node n = makeNode(OpKind::NegativeLogLikelihoodLoss, {}, 2, 1);
  KernelContext kctx{n, {&lp, &bad}, nullptr};
  EXPECT_FALSE(kernelFor(OpKind::NegativeLogLikelihoodLoss)(kctx).ok());
}

TEST(ReductionTest, BatchNormInferenceAndTraining) {
  Tensor x = f32({2, 1, 2}, {1, 3, 5, 7});
  Tensor s = f32({1}, {2}), b = f32({1}, {1}), m = f32({1}, {1}), v = f32({1}, {4});
  auto r = run(OpKind::BatchNormalization, attrs({{"epsilon", 0.0}}), {&x, &s, &b, &m, &v});
  expectNear(r[0], {1, 3, 5, 7});
  r = run(OpKind::BatchNormalization,
          attrs({{"epsilon", 0.0}, {"training_mode", int64_t(1)}, {"momentum", 0.5}}),
          {&x, &s, &b, &m, &v}, 3);
  ASSERT_EQ(r.size(), 3u);
  expectNear(r[0], {2 * -3 / std::sqrt(5.0) + 1, 2 * -1 / std::sqrt(5.0) + 1,
                    2 * 1 / std::sqrt(5.0) + 1, 2 * 3 / std::sqrt(5.0) + 1});
  expectNear(r[1], {2.5});
  expectNear(r[2], {4.5});
}

TEST(ReductionTest, LowPrecisionRoundsOnce) {
  // bf16 steps by 2 at 256: summing step by step in bf16 would give 256, once-rounded gives 258.
  Tensor x = Tensor::fromDoubles(DType::BF16, {3}, {256, 1, 1});
  auto r = run(OpKind::ReduceSum, attrs({{"keepdims", int64_t(0)}}), {&x});
  EXPECT_EQ(r[0].dtype(), DType::BF16);
  EXPECT_EQ(r[0].getDouble(0), 258.0);
  Tensor h = Tensor::fromDoubles(DType::F16, {2}, {0, 0});
  auto s = run(OpKind::Softmax, {}, {&h});
  EXPECT_EQ(s[0].dtype(), DType::F16);
  expectNear(s[0], {0.5, 0.5}, 0);
}

TEST(ReductionTest, ArgMinMaxPickNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = f32({4}, {1, nan, -5, nan});
  EXPECT_EQ(run(OpKind::ArgMin, {}, {&x})[0].toInts(), (std::vector<int64_t>{1}));
  EXPECT_EQ(run(OpKind::ArgMax, {}, {&x})[0].toInts(), (std::vector<int64_t>{1}));
  EXPECT_EQ(run(OpKind::ArgMax, attrs({{"select_last_index", int64_t(1)}}), {&x})[0].toInts(),
            (std::vector<int64_t>{3}));
  expectNear(run(OpKind::ReduceMax, {}, {&x})[0], {nan});
}

TEST(ReductionTest, InferenceErrors) {
  Tensor xi = Tensor::fromInts(DType::I32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto e = infer(OpKind::Softmax, {}, {&xi});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message(), "input 0 of Softmax must be a floating-point tensor, got i32");
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor sc = f32({2}, {1, 1});
  e = infer(OpKind::LayerNormalization, {}, {&x, &sc}, 3);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message(),
            "scale of LayerNormalization with shape f32[2] does not broadcast to [2, 3]");
  Tensor x4 = f32({1, 3, 1}, {1, 2, 3});
  Tensor s3 = f32({3}, {1, 1, 1});
  e = infer(OpKind::GroupNormalization, attrs({{"num_groups", int64_t(2)}}), {&x4, &s3, &s3});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message(),
            "channels (3) of GroupNormalization must be divisible by num_groups (2)");
  e = infer(OpKind::ArgMax, attrs({{"axis", int64_t(2)}}), {&x});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message(), "axis 2 is out of range for rank 2");
  Tensor t = Tensor::fromDoubles(DType::F32, {2}, {0, 1});
  e = infer(OpKind::NegativeLogLikelihoodLoss, {}, {&x, &t});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message(), "input 1 (target) of NegativeLogLikelihoodLoss must be i32 or "
                                 "i64, got f32");
}

TEST(ReductionTest, LpNormZeroNormAndSoftmaxCrossEntropy) {
  Tensor x = f32({2, 2}, {3, -4, 0, 0});
  expectNear(run(OpKind::LpNormalization, {}, {&x})[0], {0.6, -0.8, 0, 0});
  expectNear(
      run(OpKind::LpNormalization, attrs({{"p", int64_t(1)}, {"axis", int64_t(0)}}), {&x})[0],
      {1, -1, 0, 0});
  Tensor s = f32({2, 2}, {0, std::log(3.0), 5, 5});
  Tensor t = i64({2}, {1, 0});
  auto r =
      run(OpKind::SoftmaxCrossEntropyLoss, attrs({{"reduction", std::string("sum")}}), {&s, &t}, 2);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].shape(), Shape{});
  expectNear(r[0], {-std::log(0.75) - std::log(0.5)});
  expectNear(r[1], {std::log(0.25), std::log(0.75), std::log(0.5), std::log(0.5)});
}
