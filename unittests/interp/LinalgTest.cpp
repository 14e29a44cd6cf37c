// Tests of the Linalg family: inference (shapes, symbolic dims, error messages) and reference
// kernels (against naive formulas on random data and hand-checked small cases).
#include "interp/Interpreter.h"
#include "ir/Infer.h"

#include <cmath>
#include <gtest/gtest.h>
#include <optional>
#include <random>

using namespace coil;

namespace {

using Types = std::vector<TensorType>;

TensorType typeOf(DType dt, std::vector<SymInt> shape) {
  return TensorType{dt, std::move(shape)};
}

std::vector<SymInt> syms(const Shape &s) {
  return std::vector<SymInt>(s.begin(), s.end());
}

/// Runs inference of one node whose inputs have the given types (nullopt: absent) and, for
/// the inputs listed in `consts`, known contents.
Expected<Types> inferOp(OpKind op, const Attrs &attrs,
                        const std::vector<std::optional<TensorType>> &ins, size_t numOutputs = 1,
                        const std::map<size_t, Tensor> &consts = {}) {
  Node node{op, "n", {}, {}, attrs, {}};
  for (size_t i = 0; i < ins.size(); ++i) node.inputs.push_back(ins[i] ? ValueId(i) : kNoValue);
  for (size_t i = 0; i < numOutputs; ++i) node.outputs.push_back(ValueId(100 + i));
  std::vector<const TensorType *> types;
  std::vector<std::optional<std::vector<SymInt>>> ints(ins.size());
  std::vector<const Tensor *> cptr(ins.size(), nullptr);
  for (size_t i = 0; i < ins.size(); ++i) {
    types.push_back(ins[i] ? &*ins[i] : nullptr);
    auto it = consts.find(i);
    if (it != consts.end()) {
      cptr[i] = &it->second;
      if (!isFloat(it->second.dtype())) {
        std::vector<SymInt> v;
        for (int64_t x : it->second.toInts()) v.push_back(x);
        ints[i] = v;
      }
    }
  }
  int counter = 0;
  InferContext ctx{node, types, ints, cptr, [&](const std::string &h) {
                     return SymInt::symbol(h + std::to_string(counter++));
                   }};
  return inferNode(ctx);
}

/// Builds a one-node graph (inputs fed at run time, except those in `constIdx`, which become
/// graph constants), infers its output types and interprets it.
Expected<std::vector<Tensor>> runOp(OpKind op, const Attrs &attrs,
                                    const std::vector<std::optional<Tensor>> &ins,
                                    size_t numOutputs = 1, std::vector<size_t> constIdx = {}) {
  Graph g;
  Node node{op, "n", {}, {}, attrs, {}};
  std::vector<Tensor> feeds;
  std::map<size_t, Tensor> consts;
  std::vector<std::optional<TensorType>> types;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (!ins[i]) {
      node.inputs.push_back(kNoValue);
      types.push_back(std::nullopt);
      continue;
    }
    bool isConst = std::find(constIdx.begin(), constIdx.end(), i) != constIdx.end();
    TensorType t = typeOf(ins[i]->dtype(), syms(ins[i]->shape()));
    types.push_back(t);
    if (isConst) {
      node.inputs.push_back(g.addConstant("c" + std::to_string(i), *ins[i]));
      consts[i] = *ins[i];
    } else {
      node.inputs.push_back(g.addInput("x" + std::to_string(i), t));
      feeds.push_back(*ins[i]);
    }
  }
  COIL_TRY(Types outTypes, inferOp(op, attrs, types, numOutputs, consts));
  for (size_t i = 0; i < outTypes.size(); ++i) {
    ValueId v = g.addValue("y" + std::to_string(i), outTypes[i], ValueKind::NodeOutput);
    node.outputs.push_back(v);
    g.outputs.push_back(v);
  }
  g.addNode(node);
  return interpret(g, feeds);
}

Tensor randomTensor(DType dt, Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(size_t(numelOf(shape)));
  for (double &x : v) x = dist(rng);
  return Tensor::fromDoubles(dt, std::move(shape), v);
}

void expectNear(const Tensor &got, const Shape &shape, const std::vector<double> &want,
                double tol = 1e-5) {
  ASSERT_EQ(shapeStr(got.shape()), shapeStr(shape));
  auto g = got.toDoubles();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], tol) << "at flat index " << i;
}

Attrs attrs(std::initializer_list<std::pair<const char *, AttrValue>> list) {
  Attrs a;
  for (auto &[k, v] : list) a.set(k, v);
  return a;
}

std::string errorOf(const Expected<Types> &r) {
  return r.ok() ? "(ok)" : r.error().message();
}

// --- MatMul / Gemm

std::vector<double> naiveBatchedMatMul(const Tensor &a, const Tensor &b, int64_t batchA,
                                       int64_t batchB, int64_t m, int64_t k, int64_t n,
                                       int64_t batches) {
  auto av = a.toDoubles(), bv = b.toDoubles();
  std::vector<double> out;
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t kk = 0; kk < k; ++kk)
          s += av[size_t((bi % batchA) * m * k + i * k + kk)] *
               bv[size_t((bi % batchB) * k * n + kk * n + j)];
        out.push_back(s);
      }
  return out;
}

TEST(LinalgMatMul, BroadcastsBatchDims) {
  // a [3, 2, 4] with b [1, 4, 5]: b's batch dim broadcasts.
  Tensor a = randomTensor(DType::F32, {3, 2, 4}, 1), b = randomTensor(DType::F32, {1, 4, 5}, 2);
  auto r = runOp(OpKind::MatMul, {}, {a, b});
  ASSERT_TRUE(r.ok()) << r.error().render();
  expectNear((*r)[0], {3, 2, 5}, naiveBatchedMatMul(a, b, 3, 1, 2, 4, 5, 3));
  // Rank-2 b against a rank-3 a.
  Tensor b2 = randomTensor(DType::F64, {4, 5}, 3), a2 = randomTensor(DType::F64, {3, 2, 4}, 4);
  auto r2 = runOp(OpKind::MatMul, {}, {a2, b2});
  ASSERT_TRUE(r2.ok()) << r2.error().render();
  expectNear((*r2)[0], {3, 2, 5}, naiveBatchedMatMul(a2, b2, 3, 1, 2, 4, 5, 3), 1e-12);
}

TEST(LinalgMatMul, OneDimensionalOperands) {
  Tensor v = Tensor::fromDoubles(DType::F32, {3}, {1, 2, 3});
  Tensor m = Tensor::fromDoubles(DType::F32, {3, 2}, {1, 2, 3, 4, 5, 6});
  auto r = runOp(OpKind::MatMul, {}, {v, m}); // [3] x [3, 2] -> [2]
  ASSERT_TRUE(r.ok()) << r.error().render();
  expectNear((*r)[0], {2}, {22, 28});
  Tensor mt = Tensor::fromDoubles(DType::F32, {2, 3}, {1, 3, 5, 2, 4, 6});
  auto r2 = runOp(OpKind::MatMul, {}, {mt, v}); // [2, 3] x [3] -> [2]
  ASSERT_TRUE(r2.ok());
  expectNear((*r2)[0], {2}, {22, 28});
  auto r3 = runOp(OpKind::MatMul, {}, {v, v}); // [3] x [3] -> []
  ASSERT_TRUE(r3.ok());
  expectNear((*r3)[0], {}, {14});
}

TEST(LinalgMatMul, IntegerAndHalf) {
  Tensor a = Tensor::fromInts(DType::I32, {1, 2}, {3, -4});
  Tensor b = Tensor::fromInts(DType::I32, {2, 1}, {5, 6});
  auto r = runOp(OpKind::MatMul, {}, {a, b});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].toInts(), std::vector<int64_t>{-9});
  Tensor h = Tensor::fromDoubles(DType::F16, {1, 2}, {0.5, 0.25});
  Tensor hb = Tensor::fromDoubles(DType::F16, {2}, {2, 4});
  auto rh = runOp(OpKind::MatMul, {}, {h, hb});
  ASSERT_TRUE(rh.ok());
  EXPECT_EQ((*rh)[0].dtype(), DType::F16);
  expectNear((*rh)[0], {1}, {2.0});
}

TEST(LinalgMatMul, InferenceKeepsSymbolsAndReportsMismatch) {
  SymInt n = SymInt::symbol("N");
  auto r = inferOp(OpKind::MatMul, {},
                   {typeOf(DType::F32, {n, 5, 64}), typeOf(DType::F32, {1, 64, 32})});
  ASSERT_TRUE(r.ok()) << errorOf(r);
  EXPECT_EQ((*r)[0].str(), TensorType({DType::F32, {n, 5, 32}}).str());
  auto bad =
      inferOp(OpKind::MatMul, {}, {typeOf(DType::F32, {8, 64}), typeOf(DType::F32, {32, 16})});
  EXPECT_EQ(errorOf(bad), "inner dimensions differ: 64 vs 32");
  auto dt =
      inferOp(OpKind::MatMul, {}, {typeOf(DType::F32, {8, 64}), typeOf(DType::F16, {64, 16})});
  EXPECT_FALSE(dt.ok());
}

TEST(LinalgGemm, TransposesScalesAndBroadcastsC) {
  Tensor a = randomTensor(DType::F32, {4, 3}, 5); // transA: A^T is [3, 4]
  Tensor b = randomTensor(DType::F32, {5, 4}, 6); // transB: B^T is [4, 5]
  Tensor c = randomTensor(DType::F32, {5}, 7);
  Attrs at = attrs({{"transA", int64_t(1)}, {"transB", int64_t(1)}, {"alpha", 0.5}, {"beta", 2.0}});
  auto r = runOp(OpKind::Gemm, at, {a, b, c});
  ASSERT_TRUE(r.ok()) << r.error().render();
  auto av = a.toDoubles(), bv = b.toDoubles(), cv = c.toDoubles();
  std::vector<double> want;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) {
      double s = 0;
      for (int k = 0; k < 4; ++k) s += av[size_t(k * 3 + i)] * bv[size_t(j * 4 + k)];
      want.push_back(0.5 * s + 2.0 * cv[size_t(j)]);
    }
  expectNear((*r)[0], {3, 5}, want);
  auto bad =
      inferOp(OpKind::Gemm, {},
              {typeOf(DType::F32, {3, 4}), typeOf(DType::F32, {5, 6}), typeOf(DType::F32, {6})});
  EXPECT_EQ(errorOf(bad), "inner dimensions differ: 4 vs 5");
  auto badC =
      inferOp(OpKind::Gemm, {},
              {typeOf(DType::F32, {3, 4}), typeOf(DType::F32, {4, 6}), typeOf(DType::F32, {2, 6})});
  EXPECT_FALSE(badC.ok());
}

// --- Conv

/// Direct 2-D convolution formula, written independently of the kernel.
std::vector<double> naiveConv2d(const Tensor &x, const Tensor &w, const Tensor *b, int64_t group,
                                std::array<int64_t, 2> stride, std::array<int64_t, 2> dil,
                                std::array<int64_t, 4> pads, Shape &outShape) {
  int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  int64_t M = w.dim(0), CG = w.dim(1), KH = w.dim(2), KW = w.dim(3);
  int64_t OH = (H + pads[0] + pads[2] - dil[0] * (KH - 1) - 1) / stride[0] + 1;
  int64_t OW = (W + pads[1] + pads[3] - dil[1] * (KW - 1) - 1) / stride[1] + 1;
  outShape = {N, M, OH, OW};
  auto xv = x.toDoubles(), wv = w.toDoubles();
  std::vector<double> out;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = b ? b->getDouble(m) : 0.0;
          int64_t g = m / (M / group);
          for (int64_t cg = 0; cg < CG; ++cg)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t ih = oh * stride[0] - pads[0] + kh * dil[0];
                int64_t iw = ow * stride[1] - pads[1] + kw * dil[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                int64_t c = g * CG + cg;
                s += xv[size_t(((n * C + c) * H + ih) * W + iw)] *
                     wv[size_t(((m * CG + cg) * KH + kh) * KW + kw)];
              }
          out.push_back(s);
        }
  (void)C;
  return out;
}

TEST(LinalgConv, GroupsDilationsAsymmetricPadsMatchDirectFormula) {
  Tensor x = randomTensor(DType::F32, {2, 6, 9, 8}, 11);
  Tensor w = randomTensor(DType::F32, {4, 3, 3, 2}, 12);
  Tensor b = randomTensor(DType::F32, {4}, 13);
  Attrs at = attrs({{"group", int64_t(2)},
                    {"strides", std::vector<int64_t>{2, 1}},
                    {"dilations", std::vector<int64_t>{2, 3}},
                    {"pads", std::vector<int64_t>{1, 0, 2, 3}}});
  auto r = runOp(OpKind::Conv, at, {x, w, b});
  ASSERT_TRUE(r.ok()) << r.error().render();
  Shape shape;
  auto want = naiveConv2d(x, w, &b, 2, {2, 1}, {2, 3}, {1, 0, 2, 3}, shape);
  expectNear((*r)[0], shape, want);
}

TEST(LinalgConv, DepthwiseAndSameUpper) {
  Tensor x = randomTensor(DType::F64, {1, 3, 7, 5}, 21);
  Tensor w = randomTensor(DType::F64, {3, 1, 3, 3}, 22);
  // SAME_UPPER, stride 2: out = ceil(7/2) x ceil(5/2) = 4 x 3; total pads 2 and 2 -> 1/1.
  auto r = runOp(OpKind::Conv,
                 attrs({{"group", int64_t(3)},
                        {"auto_pad", std::string("SAME_UPPER")},
                        {"strides", std::vector<int64_t>{2, 2}}}),
                 {x, w});
  ASSERT_TRUE(r.ok()) << r.error().render();
  Shape shape;
  auto want = naiveConv2d(x, w, nullptr, 3, {2, 2}, {1, 1}, {1, 1, 1, 1}, shape);
  expectNear((*r)[0], shape, want, 1e-12);
  EXPECT_EQ(shapeStr(shape), "[1, 3, 4, 3]");
  // SAME_LOWER with an odd total padding puts the extra row first: in 6, k 2, s 1 -> pad 1,0.
  Tensor x2 = randomTensor(DType::F64, {1, 1, 6, 6}, 23);
  Tensor w2 = randomTensor(DType::F64, {1, 1, 2, 2}, 24);
  auto r2 = runOp(OpKind::Conv, attrs({{"auto_pad", std::string("SAME_LOWER")}}), {x2, w2});
  ASSERT_TRUE(r2.ok());
  auto want2 = naiveConv2d(x2, w2, nullptr, 1, {1, 1}, {1, 1}, {1, 1, 0, 0}, shape);
  expectNear((*r2)[0], shape, want2, 1e-12);
}

TEST(LinalgConv, OneAndThreeSpatialDims) {
  // 1-D conv as a 2-D conv with a height of 1.
  Tensor x = randomTensor(DType::F32, {1, 2, 10}, 31), w = randomTensor(DType::F32, {3, 2, 4}, 32);
  auto r = runOp(
      OpKind::Conv,
      attrs({{"pads", std::vector<int64_t>{2, 1}}, {"strides", std::vector<int64_t>{3}}}), {x, w});
  ASSERT_TRUE(r.ok()) << r.error().render();
  Shape shape;
  auto want = naiveConv2d(x.reshaped({1, 2, 1, 10}), w.reshaped({3, 2, 1, 4}), nullptr, 1, {1, 3},
                          {1, 1}, {0, 2, 0, 1}, shape);
  expectNear((*r)[0], {1, 3, shape[3]}, want);
  // 3-D conv with a depth-1 kernel equals a 2-D conv per depth slice.
  Tensor x3 = randomTensor(DType::F32, {1, 1, 2, 4, 4}, 33);
  Tensor w3 = randomTensor(DType::F32, {1, 1, 1, 3, 3}, 34);
  auto r3 = runOp(OpKind::Conv, {}, {x3, w3});
  ASSERT_TRUE(r3.ok()) << r3.error().render();
  ASSERT_EQ(shapeStr((*r3)[0].shape()), "[1, 1, 2, 2, 2]");
  auto xs = x3.toDoubles();
  for (int d = 0; d < 2; ++d) {
    std::vector<double> slice(xs.begin() + d * 16, xs.begin() + (d + 1) * 16);
    auto want3 =
        naiveConv2d(Tensor::fromDoubles(DType::F32, {1, 1, 4, 4}, slice), w3.reshaped({1, 1, 3, 3}),
                    nullptr, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, shape);
    for (int i = 0; i < 4; ++i) EXPECT_NEAR((*r3)[0].getDouble(d * 4 + i), want3[size_t(i)], 1e-5);
  }
}

TEST(LinalgConv, InferenceIsSymbolic) {
  SymInt n = SymInt::symbol("N"), h = SymInt::symbol("H");
  auto r = inferOp(
      OpKind::Conv,
      attrs({{"strides", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}),
      {typeOf(DType::F32, {n, 3, h, 224}), typeOf(DType::F32, {64, 3, 3, 3})});
  ASSERT_TRUE(r.ok()) << errorOf(r);
  const auto &s = (*r)[0].shape;
  EXPECT_EQ(s[0], n);
  EXPECT_EQ(s[1], SymInt(64));
  EXPECT_EQ(s[3], SymInt(112));
  for (int64_t hv : {223, 224, 225}) {
    auto v = s[2].evaluate({{"H", hv}});
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(*v, (hv + 2 - 3) / 2 + 1) << "H = " << hv;
  }
  auto same = inferOp(
      OpKind::Conv,
      attrs({{"strides", std::vector<int64_t>{3, 3}}, {"auto_pad", std::string("SAME_UPPER")}}),
      {typeOf(DType::F32, {n, 3, h, 10}), typeOf(DType::F32, {8, 3, 3, 3})});
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*(*same)[0].shape[2].evaluate({{"H", 10}}), 4);
  EXPECT_EQ((*same)[0].shape[3], SymInt(4));
}

TEST(LinalgConv, InferenceErrors) {
  auto rank =
      inferOp(OpKind::Conv, {}, {typeOf(DType::F32, {1, 3, 8, 8}), typeOf(DType::F32, {8, 3, 3})});
  EXPECT_EQ(errorOf(rank), "input 1 must have rank 4 (weights [M, C/group, kH, kW]), got rank 3");
  auto grp = inferOp(OpKind::Conv, attrs({{"group", int64_t(2)}}),
                     {typeOf(DType::F32, {1, 3, 8, 8}), typeOf(DType::F32, {8, 1, 3, 3})});
  EXPECT_EQ(errorOf(grp), "group 2 does not divide the 3 input channels");
  auto ch = inferOp(OpKind::Conv, {},
                    {typeOf(DType::F32, {1, 3, 8, 8}), typeOf(DType::F32, {8, 4, 3, 3})});
  EXPECT_EQ(errorOf(ch), "weights have 4 input channels per group, expected 3 (3 input channels / "
                         "group 1)");
  auto small = inferOp(OpKind::Conv, {},
                       {typeOf(DType::F32, {1, 3, 2, 8}), typeOf(DType::F32, {8, 3, 5, 3})});
  EXPECT_FALSE(small.ok());
  auto pad = inferOp(OpKind::Conv, attrs({{"auto_pad", std::string("SAME")}}),
                     {typeOf(DType::F32, {1, 3, 8, 8}), typeOf(DType::F32, {8, 3, 3, 3})});
  EXPECT_EQ(errorOf(pad), "auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got 'SAME'");
}

TEST(LinalgConvTranspose, IsTheAdjointOfConv) {
  // <conv(x, w), y> == <x, conv_transpose(y, w)> for every x, y.
  Tensor x = randomTensor(DType::F64, {1, 2, 7, 6}, 41),
         w = randomTensor(DType::F64, {3, 2, 3, 2}, 42);
  Attrs conv = attrs({{"strides", std::vector<int64_t>{2, 1}},
                      {"dilations", std::vector<int64_t>{1, 2}},
                      {"pads", std::vector<int64_t>{1, 0, 1, 2}}});
  auto cx = runOp(OpKind::Conv, conv, {x, w});
  ASSERT_TRUE(cx.ok()) << cx.error().render();
  Tensor y = randomTensor(DType::F64, (*cx)[0].shape(), 43);
  Attrs tr = conv;
  tr.set("output_shape", std::vector<int64_t>{7, 6});
  auto ty = runOp(OpKind::ConvTranspose, tr, {y, w});
  ASSERT_TRUE(ty.ok()) << ty.error().render();
  ASSERT_EQ(shapeStr((*ty)[0].shape()), "[1, 2, 7, 6]");
  double lhs = 0, rhs = 0;
  for (int64_t i = 0; i < y.numel(); ++i) lhs += (*cx)[0].getDouble(i) * y.getDouble(i);
  for (int64_t i = 0; i < x.numel(); ++i) rhs += x.getDouble(i) * (*ty)[0].getDouble(i);
  EXPECT_NEAR(lhs, rhs, 1e-9);
}

TEST(LinalgConvTranspose, OutputShapeFormula) {
  Tensor x = Tensor::fromDoubles(DType::F32, {1, 1, 3}, {1, 2, 3});
  Tensor w = Tensor::fromDoubles(DType::F32, {1, 2, 2}, {1, 1, 1, -1});
  // out = (3 - 1) * 2 + 1 (output_padding) + 2 - 0 = 7.
  auto r = runOp(
      OpKind::ConvTranspose,
      attrs({{"strides", std::vector<int64_t>{2}}, {"output_padding", std::vector<int64_t>{1}}}),
      {x, w});
  ASSERT_TRUE(r.ok()) << r.error().render();
  expectNear((*r)[0], {1, 2, 7}, {1, 1, 2, 2, 3, 3, 0, 1, -1, 2, -2, 3, -3, 0});
}

// --- Pools

TEST(LinalgPool, MaxPoolCeilModeAndIndices) {
  std::vector<double> v(16);
  for (int i = 0; i < 16; ++i) v[size_t(i)] = double((i * 7) % 16) - 8; // a permutation of -8..7
  Tensor x = Tensor::fromDoubles(DType::F32, {1, 1, 4, 4}, v);
  Attrs at = attrs({{"kernel_shape", std::vector<int64_t>{3, 3}},
                    {"strides", std::vector<int64_t>{2, 2}},
                    {"ceil_mode", int64_t(1)}});
  auto r = runOp(OpKind::MaxPool, at, {x}, 2);
  ASSERT_TRUE(r.ok()) << r.error().render();
  // Windows: rows {0,1,2} / {2,3} x cols {0,1,2} / {2,3}.
  std::vector<double> want;
  std::vector<int64_t> wantIdx, wantCol;
  for (int wr : {0, 2})
    for (int wc : {0, 2}) {
      double best = -1e9;
      int bi = -1;
      for (int i = wr; i < std::min(wr + 3, 4); ++i)
        for (int j = wc; j < std::min(wc + 3, 4); ++j)
          if (v[size_t(i * 4 + j)] > best) best = v[size_t(i * 4 + j)], bi = i * 4 + j;
      want.push_back(best);
      wantIdx.push_back(bi);
      wantCol.push_back((bi / 4) + (bi % 4) * 4);
    }
  expectNear((*r)[0], {1, 1, 2, 2}, want);
  EXPECT_EQ((*r)[1].toInts(), wantIdx);
  EXPECT_EQ((*r)[1].dtype(), DType::I64);
  at.set("storage_order", int64_t(1));
  auto rc = runOp(OpKind::MaxPool, at, {x}, 2);
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ((*rc)[1].toInts(), wantCol);
  // Without ceil_mode the output is 1 x 1.
  at.set("ceil_mode", int64_t(0));
  auto rf = runOp(OpKind::MaxPool, at, {x});
  ASSERT_TRUE(rf.ok());
  EXPECT_EQ(shapeStr((*rf)[0].shape()), "[1, 1, 1, 1]");
}

TEST(LinalgPool, MaxPoolIndicesCountBatchAndChannel) {
  Tensor x = Tensor::fromDoubles(DType::F32, {2, 1, 1, 3}, {1, 5, 2, 7, 0, 3});
  auto r = runOp(OpKind::MaxPool, attrs({{"kernel_shape", std::vector<int64_t>{1, 2}}}), {x}, 2);
  ASSERT_TRUE(r.ok()) << r.error().render();
  expectNear((*r)[0], {2, 1, 1, 2}, {5, 5, 7, 3});
  EXPECT_EQ((*r)[1].toInts(), (std::vector<int64_t>{1, 1, 3, 5}));
}

TEST(LinalgPool, AveragePoolCountIncludePad) {
  Tensor x = Tensor::fromDoubles(DType::F32, {1, 1, 2, 2}, {1, 2, 3, 4});
  Attrs at = attrs(
      {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  auto r = runOp(OpKind::AveragePool, at, {x});
  ASSERT_TRUE(r.ok()) << r.error().render();
  expectNear((*r)[0], {1, 1, 3, 3}, {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4});
  at.set("count_include_pad", int64_t(1));
  auto ri = runOp(OpKind::AveragePool, at, {x});
  ASSERT_TRUE(ri.ok());
  expectNear((*ri)[0], {1, 1, 3, 3}, {0.25, 0.75, 0.5, 1, 2.5, 1.5, 0.75, 1.75, 1});
}

TEST(LinalgPool, GlobalPools) {
  Tensor x = Tensor::fromDoubles(DType::F32, {1, 2, 2, 1}, {1, 3, -2, -6});
  auto a = runOp(OpKind::GlobalAveragePool, {}, {x});
  auto m = runOp(OpKind::GlobalMaxPool, {}, {x});
  ASSERT_TRUE(a.ok() && m.ok());
  expectNear((*a)[0], {1, 2, 1, 1}, {2, -4});
  expectNear((*m)[0], {1, 2, 1, 1}, {3, -2});
}

TEST(LinalgPool, PoolInferenceWithSymbols) {
  SymInt h = SymInt::symbol("H");
  auto r = inferOp(OpKind::MaxPool,
                   attrs({{"kernel_shape", std::vector<int64_t>{3, 3}},
                          {"strides", std::vector<int64_t>{2, 2}},
                          {"ceil_mode", int64_t(1)}}),
                   {typeOf(DType::F32, {1, 1, h, 4})}, 2);
  ASSERT_TRUE(r.ok()) << errorOf(r);
  EXPECT_EQ((*r)[0].shape[3], SymInt(2));
  EXPECT_EQ(*(*r)[0].shape[2].evaluate({{"H", 4}}), 2);
  EXPECT_EQ(*(*r)[0].shape[2].evaluate({{"H", 5}}), 2);
  EXPECT_EQ(*(*r)[0].shape[2].evaluate({{"H", 6}}), 3);
  EXPECT_EQ((*r)[1].dtype, DType::I64);
  auto missing = inferOp(OpKind::AveragePool, {}, {typeOf(DType::F32, {1, 1, 4, 4})});
  EXPECT_EQ(errorOf(missing), "attribute kernel_shape is required");
}

// --- Resize

Expected<std::vector<Tensor>> resize1d(const std::vector<double> &x, Attrs at,
                                       std::optional<double> scale, std::optional<int64_t> size,
                                       std::vector<double> roi = {}) {
  Tensor t = Tensor::fromDoubles(DType::F32, {int64_t(x.size())}, x);
  std::optional<Tensor> r, s, z;
  if (!roi.empty()) r = Tensor::fromDoubles(DType::F32, {int64_t(roi.size())}, roi);
  if (scale) s = Tensor::fromDoubles(DType::F32, {1}, {*scale});
  if (size) z = Tensor::fromInts(DType::I64, {1}, {*size});
  return runOp(OpKind::Resize, at, {t, r, s, z}, 1, {1, 2, 3});
}

TEST(LinalgResize, NearestModes) {
  Attrs at = attrs({{"coordinate_transformation_mode", std::string("asymmetric")}});
  auto r = resize1d({0, 10}, at, 2.0, std::nullopt);
  ASSERT_TRUE(r.ok()) << r.error().render();
  expectNear((*r)[0], {4}, {0, 0, 10, 10}); // x/2 = 0, .5, 1, 1.5, ties round down
  at.set("nearest_mode", std::string("round_prefer_ceil"));
  auto c = resize1d({0, 10}, at, 2.0, std::nullopt);
  ASSERT_TRUE(c.ok());
  expectNear((*c)[0], {4}, {0, 10, 10, 10});
  at.set("nearest_mode", std::string("ceil"));
  auto ce = resize1d({0, 10, 20}, at, 1.0, std::nullopt); // scale 1: identity
  ASSERT_TRUE(ce.ok());
  expectNear((*ce)[0], {3}, {0, 10, 20});
  // Downsampling 4 -> 2 with half_pixel: coords 0.5 and 2.5, floor mode picks 0 and 2.
  Attrs dn = attrs({{"nearest_mode", std::string("floor")}});
  auto d = resize1d({1, 2, 3, 4}, dn, std::nullopt, 2);
  ASSERT_TRUE(d.ok());
  expectNear((*d)[0], {2}, {1, 3});
}

TEST(LinalgResize, LinearCoordinateModes) {
  Attrs hp = attrs({{"mode", std::string("linear")}});
  auto r = resize1d({0, 10}, hp, 2.0, std::nullopt);
  ASSERT_TRUE(r.ok()) << r.error().render();
  expectNear((*r)[0], {4}, {0, 2.5, 7.5, 10});
  hp.set("coordinate_transformation_mode", std::string("align_corners"));
  auto a = resize1d({0, 10}, hp, std::nullopt, 4);
  ASSERT_TRUE(a.ok());
  expectNear((*a)[0], {4}, {0, 10.0 / 3, 20.0 / 3, 10});
  hp.set("coordinate_transformation_mode", std::string("tf_crop_and_resize"));
  hp.set("extrapolation_value", 7.0);
  auto t = resize1d({0, 10}, hp, std::nullopt, 4, {0.0, 1.5});
  ASSERT_TRUE(t.ok()) << t.error().render();
  expectNear((*t)[0], {4}, {0, 5, 10, 7});
}

TEST(LinalgResize, CubicWithAndWithoutExcludeOutside) {
  Attrs at = attrs({{"mode", std::string("cubic")},
                    {"coordinate_transformation_mode", std::string("asymmetric")}});
  auto r = resize1d({0, 0, 10, 0}, at, 2.0, std::nullopt);
  ASSERT_TRUE(r.ok()) << r.error().render();
  // Coeffs at ratio 0.5 with a = -0.75: [-0.09375, 0.59375, 0.59375, -0.09375].
  auto v = (*r)[0].toDoubles();
  ASSERT_EQ(v.size(), 8u);
  EXPECT_NEAR(v[1], -0.9375, 1e-6);
  EXPECT_NEAR(v[3], 5.9375, 1e-6);
  EXPECT_NEAR(v[4], 10, 1e-6);
  at.set("exclude_outside", int64_t(1));
  auto e = resize1d({0, 0, 10, 0}, at, 2.0, std::nullopt);
  ASSERT_TRUE(e.ok());
  EXPECT_NEAR((*e)[0].getDouble(1), -0.9375 / 1.09375, 1e-6);
  at.set("cubic_coeff_a", -0.5);
  at.set("exclude_outside", int64_t(0));
  auto a5 = resize1d({0, 0, 10, 0}, at, 2.0, std::nullopt);
  ASSERT_TRUE(a5.ok());
  EXPECT_NEAR((*a5)[0].getDouble(3), 5.625, 1e-6);
}

TEST(LinalgResize, AxesAndAspectRatioAndInference) {
  Tensor x = randomTensor(DType::F32, {1, 1, 2, 4}, 51);
  Attrs at = attrs({{"axes", std::vector<int64_t>{2, 3}},
                    {"keep_aspect_ratio_policy", std::string("not_smaller")}});
  Tensor sizes = Tensor::fromInts(DType::I64, {2}, {4, 4});
  auto r = runOp(OpKind::Resize, at, {x, std::nullopt, std::nullopt, sizes}, 1, {3});
  ASSERT_TRUE(r.ok()) << r.error().render();
  EXPECT_EQ(shapeStr((*r)[0].shape()), "[1, 1, 4, 8]");
  at.set("keep_aspect_ratio_policy", std::string("not_larger"));
  auto r2 = runOp(OpKind::Resize, at, {x, std::nullopt, std::nullopt, sizes}, 1, {3});
  ASSERT_TRUE(r2.ok());
  EXPECT_TRUE((*r2)[0].identical(x));
  SymInt n = SymInt::symbol("N");
  Tensor scales = Tensor::fromDoubles(DType::F32, {4}, {1, 1, 2, 1.5});
  auto inf = inferOp(OpKind::Resize, {},
                     {typeOf(DType::F32, {n, 3, 5, 7}), std::nullopt, typeOf(DType::F32, {4})}, 1,
                     {{2, scales}});
  ASSERT_TRUE(inf.ok()) << errorOf(inf);
  EXPECT_EQ((*inf)[0].str(), TensorType({DType::F32, {n, 3, 10, 10}}).str());
  auto unknown = inferOp(
      OpKind::Resize, {},
      {typeOf(DType::F32, {n, 3, 5, 7}), std::nullopt, std::nullopt, typeOf(DType::I64, {4})});
  ASSERT_TRUE(unknown.ok());
  EXPECT_TRUE((*unknown)[0].shape[2].isSymbol());
  auto both = inferOp(OpKind::Resize, {},
                      {typeOf(DType::F32, {n, 3, 5, 7}), std::nullopt, typeOf(DType::F32, {4}),
                       typeOf(DType::I64, {4})});
  EXPECT_EQ(errorOf(both), "exactly one of scales and sizes must be given");
}

// --- Rearrangements, Einsum, Det, quantized products

TEST(LinalgDepthSpace, ModesAndRoundTrip) {
  std::vector<double> v(8);
  for (int i = 0; i < 8; ++i) v[size_t(i)] = i;
  Tensor x = Tensor::fromDoubles(DType::F32, {1, 8, 1, 1}, v);
  auto dcr = runOp(OpKind::DepthToSpace, attrs({{"blocksize", int64_t(2)}}), {x});
  auto crd = runOp(OpKind::DepthToSpace,
                   attrs({{"blocksize", int64_t(2)}, {"mode", std::string("CRD")}}), {x});
  ASSERT_TRUE(dcr.ok() && crd.ok());
  expectNear((*dcr)[0], {1, 2, 2, 2}, {0, 2, 4, 6, 1, 3, 5, 7});
  expectNear((*crd)[0], {1, 2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  Tensor y = randomTensor(DType::F32, {2, 3, 4, 6}, 61);
  auto s = runOp(OpKind::SpaceToDepth, attrs({{"blocksize", int64_t(2)}}), {y});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(shapeStr((*s)[0].shape()), "[2, 12, 2, 3]");
  auto back = runOp(OpKind::DepthToSpace, attrs({{"blocksize", int64_t(2)}}), {(*s)[0]});
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE((*back)[0].identical(y));
}

TEST(LinalgEinsum, MatMulDiagonalTransposeAndImplicit) {
  Tensor a = randomTensor(DType::F64, {2, 3, 4}, 71), b = randomTensor(DType::F64, {2, 4, 5}, 72);
  auto bmm = runOp(OpKind::Einsum, attrs({{"equation", std::string("bij,bjk->bik")}}), {a, b});
  ASSERT_TRUE(bmm.ok()) << bmm.error().render();
  expectNear((*bmm)[0], {2, 3, 5}, naiveBatchedMatMul(a, b, 2, 2, 3, 4, 5, 2), 1e-12);
  Tensor sq = Tensor::fromDoubles(DType::F32, {3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto diag = runOp(OpKind::Einsum, attrs({{"equation", std::string("ii->i")}}), {sq});
  ASSERT_TRUE(diag.ok());
  expectNear((*diag)[0], {3}, {1, 5, 9});
  auto trace = runOp(OpKind::Einsum, attrs({{"equation", std::string("ii")}}), {sq});
  ASSERT_TRUE(trace.ok());
  expectNear((*trace)[0], {}, {15});
  auto tr = runOp(OpKind::Einsum, attrs({{"equation", std::string("...ij->...ji")}}), {a});
  ASSERT_TRUE(tr.ok()) << tr.error().render();
  EXPECT_EQ(shapeStr((*tr)[0].shape()), "[2, 4, 3]");
  EXPECT_EQ((*tr)[0].getDouble(1), a.getDouble(4)); // [0, 1, 0] <- [0, 0, 1]
  auto impl = runOp(OpKind::Einsum, attrs({{"equation", std::string("ji,jk")}}), {sq, sq});
  ASSERT_TRUE(impl.ok()); // implicit output "ik": sq^T sq
  expectNear((*impl)[0], {3, 3}, {66, 78, 90, 78, 93, 108, 90, 108, 126});
  // A repeated output label would ask for a diagonal output, which einsum does not define.
  auto repeated = runOp(OpKind::Einsum, attrs({{"equation", std::string("ii->ii")}}), {sq});
  ASSERT_FALSE(repeated.ok());
  EXPECT_NE(repeated.error().message().find("einsum output repeats dim 'i'"), std::string::npos)
      << repeated.error().render();
}

TEST(LinalgGemm, IntegerIsExactBeyondDoublePrecision) {
  // 2^53 + 1 is not a double; an exact integer Gemm keeps the + 1.
  int64_t big = (int64_t(1) << 53) + 1;
  Tensor a = Tensor::fromInts(DType::I64, {1, 2}, {big, 1});
  Tensor b = Tensor::fromInts(DType::I64, {2, 1}, {1, 2});
  Tensor c = Tensor::fromInts(DType::I64, {1}, {3});
  auto r = runOp(OpKind::Gemm, {}, {a, b, c});
  ASSERT_TRUE(r.ok()) << r.error().render();
  EXPECT_EQ((*r)[0].toInts(), std::vector<int64_t>{big + 2 + 3});
}

TEST(LinalgDet, SmallMatrices) {
  Tensor m = Tensor::fromDoubles(DType::F32, {2, 3, 3},
                                 {2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 1, 2, 1, 0, 3, 4, -3, 8});
  auto r = runOp(OpKind::Det, {}, {m});
  ASSERT_TRUE(r.ok()) << r.error().render();
  expectNear((*r)[0], {2}, {24, -2});
}

TEST(LinalgQuant, MatMulIntegerAndQLinearMatMul) {
  Tensor a = Tensor::fromInts(DType::U8, {2, 2}, {10, 20, 30, 40});
  Tensor b = Tensor::fromInts(DType::U8, {2, 1}, {1, 2});
  Tensor az = Tensor::fromInts(DType::U8, {}, {10});
  Tensor bz = Tensor::fromInts(DType::U8, {}, {1});
  auto r = runOp(OpKind::MatMulInteger, {}, {a, b, az, bz});
  ASSERT_TRUE(r.ok()) << r.error().render();
  EXPECT_EQ((*r)[0].dtype(), DType::I32);
  EXPECT_EQ((*r)[0].toInts(), (std::vector<int64_t>{10, 30})); // [0,10]x[0,1], [20,30]x[0,1]
  Tensor s1 = Tensor::scalar(DType::F32, 0.5), s2 = Tensor::scalar(DType::F32, 0.25);
  Tensor yz = Tensor::fromInts(DType::U8, {}, {100});
  auto q =
      runOp(OpKind::QLinearMatMul, {}, {a, s1, az, b, s2, bz, Tensor::scalar(DType::F32, 0.5), yz});
  ASSERT_TRUE(q.ok()) << q.error().render();
  // acc * 0.5 * 0.25 / 0.5 = acc / 4: 10 -> 2.5 -> 2 (ties to even), 30 -> 7.5 -> 8; + 100.
  EXPECT_EQ((*q)[0].toInts(), (std::vector<int64_t>{102, 108}));
}

// --- Sampling, recurrent ops, rotary embeddings, attention

TEST(LinalgGridSample, AlignCornersPaddingAndNearest) {
  Tensor x = Tensor::fromDoubles(DType::F32, {1, 1, 2, 2}, {1, 2, 3, 4});
  // Grid points (x, y): corners and the centre.
  Tensor grid = Tensor::fromDoubles(DType::F32, {1, 1, 3, 2}, {-1, -1, 1, 1, 0, 0});
  auto r = runOp(OpKind::GridSample, attrs({{"align_corners", int64_t(1)}}), {x, grid});
  ASSERT_TRUE(r.ok()) << r.error().render();
  expectNear((*r)[0], {1, 1, 1, 3}, {1, 4, 2.5});
  // Without align_corners the corner -1 maps to pixel -0.5: half of it lies in zero padding.
  auto z = runOp(OpKind::GridSample, {}, {x, grid});
  ASSERT_TRUE(z.ok());
  expectNear((*z)[0], {1, 1, 1, 3}, {0.25, 1, 2.5});
  auto b = runOp(OpKind::GridSample, attrs({{"padding_mode", std::string("border")}}), {x, grid});
  ASSERT_TRUE(b.ok());
  expectNear((*b)[0], {1, 1, 1, 3}, {1, 4, 2.5});
  // Nearest at the centre: 0.5 rounds to even (0).
  auto n =
      runOp(OpKind::GridSample,
            attrs({{"mode", std::string("nearest")}, {"align_corners", int64_t(1)}}), {x, grid});
  ASSERT_TRUE(n.ok());
  expectNear((*n)[0], {1, 1, 1, 3}, {1, 4, 1});
}

TEST(LinalgRecurrent, RnnForwardAndReverse) {
  Tensor x = Tensor::fromDoubles(DType::F64, {2, 1, 1}, {1, -1});
  Tensor w = Tensor::fromDoubles(DType::F64, {1, 1, 1}, {2});
  Tensor r = Tensor::fromDoubles(DType::F64, {1, 1, 1}, {0.5});
  Tensor b = Tensor::fromDoubles(DType::F64, {1, 2}, {0.1, 0.2});
  auto f = runOp(OpKind::RNN, attrs({{"hidden_size", int64_t(1)}}), {x, w, r, b}, 2);
  ASSERT_TRUE(f.ok()) << f.error().render();
  double h1 = std::tanh(2.3), h2 = std::tanh(-2 + 0.5 * h1 + 0.3);
  expectNear((*f)[0], {2, 1, 1, 1}, {h1, h2}, 1e-12);
  expectNear((*f)[1], {1, 1, 1}, {h2}, 1e-12);
  auto rv = runOp(OpKind::RNN,
                  attrs({{"hidden_size", int64_t(1)}, {"direction", std::string("reverse")}}),
                  {x, w, r, b}, 2);
  ASSERT_TRUE(rv.ok());
  double g1 = std::tanh(-1.7), g0 = std::tanh(2 + 0.5 * g1 + 0.3);
  expectNear((*rv)[0], {2, 1, 1, 1}, {g0, g1}, 1e-12);
  expectNear((*rv)[1], {1, 1, 1}, {g0}, 1e-12);
}

TEST(LinalgRecurrent, LstmOneStep) {
  Tensor x = Tensor::fromDoubles(DType::F64, {1, 1, 1}, {0.5});
  Tensor w = Tensor::fromDoubles(DType::F64, {1, 4, 1}, {1, 2, 3, 4}); // gates i o f c
  Tensor r = Tensor::fromDoubles(DType::F64, {1, 4, 1}, {0, 0, 0, 0});
  auto o = runOp(OpKind::LSTM, attrs({{"hidden_size", int64_t(1)}}), {x, w, r}, 3);
  ASSERT_TRUE(o.ok()) << o.error().render();
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  double c = sig(0.5) * std::tanh(2.0), h = sig(1.0) * std::tanh(c);
  expectNear((*o)[1], {1, 1, 1}, {h}, 1e-12);
  expectNear((*o)[2], {1, 1, 1}, {c}, 1e-12);
  auto bad = inferOp(
      OpKind::LSTM, {},
      {typeOf(DType::F32, {2, 3}), typeOf(DType::F32, {1, 4, 3}), typeOf(DType::F32, {1, 4, 1})});
  EXPECT_EQ(errorOf(bad), "input 0 must have rank 3 ([seq, batch, input]), got rank 2");
}

TEST(LinalgRotary, HalvesAndInterleaved) {
  Tensor x = Tensor::fromDoubles(DType::F32, {1, 1, 1, 4}, {1, 2, 3, 4});
  double c0 = 0.6, c1 = 0.8, s0 = 0.8, s1 = 0.6;
  Tensor cs = Tensor::fromDoubles(DType::F32, {1, 2}, {c0, c1});
  Tensor sn = Tensor::fromDoubles(DType::F32, {1, 2}, {s0, s1});
  Tensor pos = Tensor::fromInts(DType::I64, {1, 1}, {0});
  auto r = runOp(OpKind::RotaryEmbedding, {}, {x, cs, sn, pos});
  ASSERT_TRUE(r.ok()) << r.error().render();
  expectNear((*r)[0], {1, 1, 1, 4},
             {c0 * 1 - s0 * 3, c1 * 2 - s1 * 4, s0 * 1 + c0 * 3, s1 * 2 + c1 * 4});
  auto i = runOp(OpKind::RotaryEmbedding, attrs({{"interleaved", int64_t(1)}}), {x, cs, sn, pos});
  ASSERT_TRUE(i.ok());
  expectNear((*i)[0], {1, 1, 1, 4},
             {c0 * 1 - s0 * 2, s0 * 1 + c0 * 2, c1 * 3 - s1 * 4, s1 * 3 + c1 * 4});
}

TEST(LinalgAttention, SoftmaxWeightsAndCausalMask) {
  Tensor q = Tensor::fromDoubles(DType::F32, {1, 1, 2, 2}, {1, 0, 0, 1});
  Tensor k = Tensor::fromDoubles(DType::F32, {1, 1, 2, 2}, {1, 0, 0, 2});
  Tensor v = Tensor::fromDoubles(DType::F32, {1, 1, 2, 1}, {10, 20});
  auto r = runOp(OpKind::Attention, {}, {q, k, v});
  ASSERT_TRUE(r.ok()) << r.error().render();
  double s = 1 / std::sqrt(2.0);
  auto mix = [&](double a, double b) { // softmax([a, b]) . [10, 20]
    double ea = std::exp(a * s), eb = std::exp(b * s);
    return (10 * ea + 20 * eb) / (ea + eb);
  };
  expectNear((*r)[0], {1, 1, 2, 1}, {mix(1, 0), mix(0, 2)});
  auto c = runOp(OpKind::Attention, attrs({{"is_causal", int64_t(1)}}), {q, k, v});
  ASSERT_TRUE(c.ok());
  expectNear((*c)[0], {1, 1, 2, 1}, {10, mix(0, 2)});       // the first query sees only key 0
  Tensor mask = Tensor::fromInts(DType::Bool, {2}, {0, 1}); // every query sees only key 1
  auto m = runOp(OpKind::Attention, {}, {q, k, v, mask});
  ASSERT_TRUE(m.ok()) << m.error().render();
  expectNear((*m)[0], {1, 1, 2, 1}, {20, 20});
}

TEST(LinalgRoiAlign, AverageOfOneBin) {
  std::vector<double> v(16);
  for (int i = 0; i < 16; ++i) v[size_t(i)] = i;
  Tensor x = Tensor::fromDoubles(DType::F32, {1, 1, 4, 4}, v);
  Tensor rois = Tensor::fromDoubles(DType::F32, {1, 4}, {0, 0, 2, 2});
  Tensor idx = Tensor::fromInts(DType::I64, {1}, {0});
  // output_half_pixel: roi [-0.5, 1.5]^2, one 1x1 bin sampled on a 2x2 grid at 0 and 1.
  auto r = runOp(OpKind::RoiAlign, attrs({{"sampling_ratio", int64_t(2)}}), {x, rois, idx});
  ASSERT_TRUE(r.ok()) << r.error().render();
  expectNear((*r)[0], {1, 1, 1, 1}, {(0 + 1 + 4 + 5) / 4.0});
}

TEST(LinalgInference, MoreErrorMessagesAndSymbolicShapes) {
  SymInt n = SymInt::symbol("N"), h = SymInt::symbol("H");
  auto d2s = inferOp(OpKind::DepthToSpace, attrs({{"blocksize", int64_t(2)}}),
                     {typeOf(DType::F32, {1, 6, 2, 2})});
  EXPECT_EQ(errorOf(d2s), "channels 6 must be divisible by blocksize^2 = 4");
  auto s2d = inferOp(OpKind::SpaceToDepth, attrs({{"blocksize", int64_t(2)}}),
                     {typeOf(DType::F32, {n, 3, h, 8})});
  ASSERT_TRUE(s2d.ok()) << errorOf(s2d);
  EXPECT_EQ((*s2d)[0].shape[1], SymInt(12));
  EXPECT_EQ(*(*s2d)[0].shape[2].evaluate({{"H", 10}}), 5);
  auto ct = inferOp(OpKind::ConvTranspose, attrs({{"strides", std::vector<int64_t>{2, 2}}}),
                    {typeOf(DType::F32, {n, 4, h, 5}), typeOf(DType::F32, {4, 3, 3, 3})});
  ASSERT_TRUE(ct.ok()) << errorOf(ct);
  EXPECT_EQ((*ct)[0].shape[1], SymInt(3));
  EXPECT_EQ((*ct)[0].shape[3], SymInt(11)); // (5 - 1) * 2 + 3
  EXPECT_EQ(*(*ct)[0].shape[2].evaluate({{"H", 7}}), 15);
  auto ctBad = inferOp(OpKind::ConvTranspose, {},
                       {typeOf(DType::F32, {1, 4, 5, 5}), typeOf(DType::F32, {2, 3, 3, 3})});
  EXPECT_EQ(errorOf(ctBad), "weights have 2 input channels, expected 4");
  auto gp = inferOp(OpKind::GlobalAveragePool, {}, {typeOf(DType::F32, {n, 8, h, h, 3})});
  ASSERT_TRUE(gp.ok());
  EXPECT_EQ((*gp)[0].str(), TensorType({DType::F32, {n, 8, 1, 1, 1}}).str());
  auto ein = inferOp(OpKind::Einsum, attrs({{"equation", std::string("ij,jk->ik")}}),
                     {typeOf(DType::F32, {2, 3}), typeOf(DType::F32, {4, 5})});
  EXPECT_EQ(errorOf(ein), "einsum dim 'j' has sizes 3 and 4");
  auto det = inferOp(OpKind::Det, {}, {typeOf(DType::F32, {n, 3, 4})});
  EXPECT_EQ(errorOf(det), "matrices must be square, got 3 x 4");
  auto bias = inferOp(OpKind::Conv, {},
                      {typeOf(DType::F32, {1, 3, 8, 8}), typeOf(DType::F32, {8, 3, 3, 3}),
                       typeOf(DType::F32, {4})});
  EXPECT_EQ(errorOf(bias), "bias must have shape [8], got [4]");
}

TEST(LinalgKernelErrors, BadRuntimeInputsAreUserErrors) {
  // MaxUnpool with an index outside the output.
  Tensor x = Tensor::fromDoubles(DType::F32, {1, 1, 1, 1}, {5});
  Tensor idx = Tensor::fromInts(DType::I64, {1, 1, 1, 1}, {7});
  auto r =
      runOp(OpKind::MaxUnpool, attrs({{"kernel_shape", std::vector<int64_t>{2, 2}}}), {x, idx});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("index 7 is out of range [0, 4)"), std::string::npos)
      << r.error().message();
  // A RoiAlign batch index past the batch.
  Tensor img = randomTensor(DType::F32, {1, 1, 4, 4}, 81);
  Tensor rois = Tensor::fromDoubles(DType::F32, {1, 4}, {0, 0, 1, 1});
  auto ra = runOp(OpKind::RoiAlign, {}, {img, rois, Tensor::fromInts(DType::I64, {1}, {3})});
  ASSERT_FALSE(ra.ok());
  EXPECT_NE(ra.error().message().find("batch index 3 is out of range"), std::string::npos);
}

TEST(LinalgMaxRoiPool, MaxPerBin) {
  std::vector<double> v(16);
  for (int i = 0; i < 16; ++i) v[size_t(i)] = i;
  Tensor x = Tensor::fromDoubles(DType::F32, {1, 1, 4, 4}, v);
  // Roi (batch 0, x1 0, y1 0, x2 3, y2 3): 4 x 4 pixels in 2 x 2 bins of 2 x 2.
  Tensor rois = Tensor::fromDoubles(DType::F32, {2, 5}, {0, 0, 0, 3, 3, 0, 2, 0, 3, 1});
  auto r =
      runOp(OpKind::MaxRoiPool, attrs({{"pooled_shape", std::vector<int64_t>{2, 2}}}), {x, rois});
  ASSERT_TRUE(r.ok()) << r.error().render();
  // Second roi: columns 2..3, rows 0..1, one pixel per bin.
  expectNear((*r)[0], {2, 1, 2, 2}, {5, 7, 13, 15, 2, 3, 6, 7});
}

} // namespace
