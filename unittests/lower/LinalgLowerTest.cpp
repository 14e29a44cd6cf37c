// Lowering of the Linalg ops and of the data-dependent ops (lower/ops/Linalg*.cpp): each graph is
// lowered, evaluated by the Loop IR evaluator (which calls the CPU kernels through
// lower/LoopEvalExterns.cpp) on random inputs and compared with the reference interpreter.
#include "LowerTestUtil.h"

#include <gtest/gtest.h>

using namespace coil;
using namespace coil::lowertest;

namespace {

const SymInt N = SymInt::symbol("N");
const std::vector<SymBindings> kSizes = {{{"N", 1}}, {{"N", 3}}};
const Tolerance kF32{1e-4, 1e-4};
const Tolerance kF64{1e-11, 1e-11};
const Tolerance kExact{0, 0};

std::string what(OpKind op, DType t, const std::string &extra = "") {
  return std::string(opName(op)) + " " + std::string(dtypeName(t)) + " " + extra;
}

/// Counts the nodes of the lowered program of `g` that satisfy `pred`.
template <typename P> int countNodes(const Graph &g, P pred) {
  auto p = loop::lowerGraph(g);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().render());
  if (!p.ok()) return -1;
  int n = 0;
  for (const loop::Node &node : p->nodes) n += pred(node) ? 1 : 0;
  return n;
}

// --- MatMul

void checkMatMul(DType t, std::vector<SymInt> sa, std::vector<SymInt> sb, Tolerance tol) {
  GraphBuilder b;
  ValueId x = b.input("a", t, sa), y = b.input("b", t, sb);
  b.output(b.op(OpKind::MatMul, {x, y}));
  checkGraph(b.g, kSizes, tol, {}, what(OpKind::MatMul, t));
}

TEST(LinalgLower, MatMulShapesThroughGemm) {
  for (DType t : {DType::F32, DType::F64}) {
    Tolerance tol = t == DType::F32 ? kF32 : kF64;
    checkMatMul(t, {N, 3, 5}, {5, 4}, tol);
    checkMatMul(t, {3, 5}, {N, 5, 4}, tol);
    checkMatMul(t, {2, 1, 3, 5}, {N, 5, 6}, tol); // batch broadcast both ways
    checkMatMul(t, {N, 1, 3, 5}, {1, 2, 5, 6}, tol);
    checkMatMul(t, {5}, {N, 5, 4}, tol); // vector operands
    checkMatMul(t, {N, 3, 5}, {5}, tol);
    checkMatMul(t, {7}, {7}, tol);
    checkMatMul(t, {N, 2, 3, 5}, {N, 2, 5, 1}, tol);
  }
}

TEST(LinalgLower, MatMulOtherDTypesAsReduction) {
  checkMatMul(DType::F16, {N, 3, 5}, {5, 4}, Tolerance{2e-3, 2e-3});
  checkMatMul(DType::BF16, {N, 3, 5}, {2, 1, 5, 4}, Tolerance{2e-2, 2e-2});
  for (DType t : {DType::I32, DType::I64, DType::U8, DType::I8, DType::U32})
    checkMatMul(t, {N, 3, 5}, {5, 4}, kExact);
}

TEST(LinalgLower, GemmTransposesFoldIntoFlags) {
  GraphBuilder b;
  ValueId x = b.input("a", DType::F32, {5, N}), y = b.input("b", DType::F32, {4, 5});
  b.output(b.op(OpKind::Gemm, {x, y}, attrs({{"transA", int64_t(1)}, {"transB", int64_t(1)}})));
  checkGraph(b.g, kSizes, kF32, {}, "Gemm of transposes");
  // No copy: the extern reads both inputs in place.
  EXPECT_EQ(countNodes(b.g, [](const loop::Node &n) { return n.isPointwise(); }), 0);
  EXPECT_EQ(countNodes(b.g, [](const loop::Node &n) { return n.isExtern(); }), 1);
}

TEST(LinalgLower, TransposeFoldsIntoGemmFlags) {
  GraphBuilder b;
  ValueId x = b.input("a", DType::F32, {N, 5, 3}), y = b.input("b", DType::F32, {4, 5});
  ValueId xt = b.op(OpKind::Transpose, {x}, attrs({{"perm", std::vector<int64_t>{0, 2, 1}}}));
  ValueId yt = b.op(OpKind::Transpose, {y}, attrs({{"perm", std::vector<int64_t>{1, 0}}}));
  b.output(b.op(OpKind::MatMul, {xt, yt}));
  checkGraph(b.g, kSizes, kF32, {}, "MatMul of transposes");
  // No copy: the extern reads both inputs in place.
  EXPECT_EQ(countNodes(b.g, [](const loop::Node &n) { return n.isPointwise(); }), 0);
  EXPECT_EQ(countNodes(b.g, [](const loop::Node &n) { return n.isExtern(); }), 1);
}

// --- Gemm

void checkGemm(DType t, bool ta, bool tb, double alpha, double beta,
               std::optional<std::vector<SymInt>> cShape, Tolerance tol) {
  GraphBuilder b;
  SymInt m = N, k = 5, n = 4;
  ValueId a = b.input("a", t, ta ? std::vector<SymInt>{k, m} : std::vector<SymInt>{m, k});
  ValueId bb = b.input("b", t, tb ? std::vector<SymInt>{n, k} : std::vector<SymInt>{k, n});
  std::vector<ValueId> ins{a, bb};
  if (cShape) ins.push_back(b.input("c", t, *cShape));
  b.output(b.op(
      OpKind::Gemm, ins,
      attrs({{"transA", int64_t(ta)}, {"transB", int64_t(tb)}, {"alpha", alpha}, {"beta", beta}})));
  checkGraph(b.g, kSizes, tol, {}, what(OpKind::Gemm, t));
}

TEST(LinalgLower, GemmTransposesScalesAndC) {
  for (DType t : {DType::F32, DType::F64}) {
    Tolerance tol = t == DType::F32 ? kF32 : kF64;
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) checkGemm(t, ta, tb, 0.5, 2.0, std::vector<SymInt>{4}, tol);
    checkGemm(t, false, false, 1.0, 1.0, std::nullopt, tol);
    checkGemm(t, false, true, 1.5, 1.0, std::vector<SymInt>{N, 1}, tol);
    checkGemm(t, true, false, 1.0, -1.0, std::vector<SymInt>{N, 4}, tol);
  }
  checkGemm(DType::I32, true, false, 1.0, 1.0, std::vector<SymInt>{4}, kExact);
  checkGemm(DType::I64, false, true, 1.0, 1.0, std::nullopt, kExact);
  checkGemm(DType::F16, false, true, 0.5, 2.0, std::vector<SymInt>{1, 4}, Tolerance{2e-3, 2e-3});
}

// --- quantized matrix products

TEST(LinalgLower, MatMulIntegerWithZeroPoints) {
  for (DType t : {DType::U8, DType::I8}) {
    GraphBuilder b;
    ValueId a = b.input("a", t, {N, 3, 5}), bb = b.input("b", t, {5, 4});
    ValueId az = b.input("az", t, {}), bz = b.input("bz", t, {4});
    b.output(b.op(OpKind::MatMulInteger, {a, bb, az, bz}));
    checkGraph(b.g, kSizes, kExact, {}, what(OpKind::MatMulInteger, t));
  }
  GraphBuilder b;
  ValueId a = b.input("a", DType::U8, {3, 5}), bb = b.input("b", DType::U8, {5, 4});
  b.output(b.op(OpKind::MatMulInteger, {a, bb}));
  checkGraph(b.g, {{}}, kExact, {}, "MatMulInteger without zero points");
}

TEST(LinalgLower, QLinearMatMul) {
  for (DType t : {DType::U8, DType::I8}) {
    GraphBuilder b;
    ValueId a = b.input("a", t, {N, 3, 5}), bb = b.input("b", t, {5, 4});
    ValueId as = b.constant("as", Tensor::fromDoubles(DType::F32, {}, {0.05}));
    ValueId az = b.input("az", t, {});
    ValueId bs = b.constant("bs", Tensor::fromDoubles(DType::F32, {4}, {0.02, 0.03, 0.07, 0.01}));
    ValueId bz = b.input("bz", t, {4});
    ValueId ys = b.constant("ys", Tensor::fromDoubles(DType::F32, {}, {0.09}));
    ValueId yz = b.input("yz", t, {});
    b.output(b.op(OpKind::QLinearMatMul, {a, as, az, bb, bs, bz, ys, yz}));
    checkGraph(b.g, kSizes, kExact, {}, what(OpKind::QLinearMatMul, t));
  }
}

// --- convolutions

void checkConv(DType t, std::vector<SymInt> xs, std::vector<SymInt> ws, Attrs at, bool bias,
               Tolerance tol) {
  GraphBuilder b;
  ValueId x = b.input("x", t, xs), w = b.input("w", t, ws);
  std::vector<ValueId> ins{x, w};
  if (bias) ins.push_back(b.input("bias", t, {ws[0]}));
  b.output(b.op(OpKind::Conv, ins, std::move(at)));
  checkGraph(b.g, kSizes, tol, {}, what(OpKind::Conv, t));
}

TEST(LinalgLower, ConvThroughExtern) {
  for (DType t : {DType::F32, DType::F64}) {
    Tolerance tol = t == DType::F32 ? kF32 : kF64;
    checkConv(t, {N, 4, 9, 8}, {6, 2, 3, 2},
              attrs({{"group", int64_t(2)},
                     {"strides", std::vector<int64_t>{2, 1}},
                     {"dilations", std::vector<int64_t>{1, 2}},
                     {"pads", std::vector<int64_t>{1, 0, 2, 1}}}),
              true, tol);
    checkConv(t, {N, 3, 11}, {5, 3, 3},
              attrs({{"strides", std::vector<int64_t>{2}}, {"pads", std::vector<int64_t>{1, 1}}}),
              false, tol);
    checkConv(t, {N, 2, 5, 4, 6}, {4, 2, 2, 3, 2},
              attrs({{"pads", std::vector<int64_t>{1, 0, 1, 0, 1, 1}}}), true, tol);
    for (const char *pad : {"SAME_UPPER", "SAME_LOWER", "VALID"})
      checkConv(t, {N, 3, 7, 6}, {2, 3, 3, 2},
                attrs({{"auto_pad", std::string(pad)}, {"strides", std::vector<int64_t>{2, 2}}}),
                true, tol);
    checkConv(t, {N, 4, 5, 5}, {4, 1, 1, 1}, attrs({{"group", int64_t(4)}}), false, tol);
  }
}

TEST(LinalgLower, DepthwiseConvAsSumOfTaps) {
  // One input channel per group: a pointwise sum over the window's taps (with padding, strides,
  // dilations, a channel multiplier of 2, 1-D and 2-D), and a reduction when the window is big.
  for (DType t : {DType::F32, DType::F64}) {
    Tolerance tol = t == DType::F32 ? kF32 : kF64;
    checkConv(t, {N, 4, 9, 8}, {8, 1, 3, 3},
              attrs({{"group", int64_t(4)},
                     {"strides", std::vector<int64_t>{2, 1}},
                     {"dilations", std::vector<int64_t>{1, 2}},
                     {"pads", std::vector<int64_t>{1, 2, 1, 2}}}),
              true, tol);
    checkConv(t, {N, 3, 10}, {3, 1, 5},
              attrs({{"group", int64_t(3)}, {"pads", std::vector<int64_t>{2, 2}}}), true, tol);
    checkConv(t, {N, 2, 9, 9}, {2, 1, 8, 8}, attrs({{"group", int64_t(2)}}), false, tol);
  }
}

TEST(LinalgLower, ConvAsReduction) {
  // f16 and more than 3 spatial dims lower to a Reduction.
  checkConv(DType::F16, {N, 4, 6, 5}, {2, 2, 3, 3},
            attrs({{"group", int64_t(2)}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}), true,
            Tolerance{2e-3, 2e-3});
  checkConv(DType::F32, {N, 1, 3, 3, 3, 3}, {2, 1, 2, 2, 2, 2},
            attrs({{"pads", std::vector<int64_t>{1, 0, 0, 1, 0, 1, 0, 0}}}), true, kF32);
}

TEST(LinalgLower, ConvIntegerAndQLinearConv) {
  for (DType t : {DType::U8, DType::I8}) {
    GraphBuilder b;
    ValueId x = b.input("x", t, {N, 4, 6, 5}), w = b.input("w", t, {6, 2, 3, 3});
    ValueId xz = b.input("xz", t, {}), wz = b.input("wz", t, {6});
    b.output(b.op(OpKind::ConvInteger, {x, w, xz, wz},
                  attrs({{"group", int64_t(2)}, {"pads", std::vector<int64_t>{1, 0, 1, 2}}})));
    checkGraph(b.g, kSizes, kExact, {}, what(OpKind::ConvInteger, t));
  }
  for (DType t : {DType::U8, DType::I8}) {
    GraphBuilder b;
    ValueId x = b.input("x", t, {N, 2, 5, 5});
    ValueId xs = b.constant("xs", Tensor::fromDoubles(DType::F32, {}, {0.04}));
    ValueId xz = b.input("xz", t, {});
    ValueId w = b.input("w", t, {3, 2, 2, 2});
    ValueId ws = b.constant("ws", Tensor::fromDoubles(DType::F32, {3}, {0.02, 0.05, 0.01}));
    ValueId wz = b.input("wz", t, {3});
    ValueId ys = b.constant("ys", Tensor::fromDoubles(DType::F32, {}, {0.1}));
    ValueId yz = b.input("yz", t, {});
    ValueId bias = b.input("bias", DType::I32, {3});
    b.output(b.op(OpKind::QLinearConv, {x, xs, xz, w, ws, wz, ys, yz, bias},
                  attrs({{"pads", std::vector<int64_t>{1, 1, 0, 0}}})));
    checkGraph(b.g, kSizes, kExact, {}, what(OpKind::QLinearConv, t));
  }
}

void checkConvTranspose(DType t, std::vector<SymInt> xs, std::vector<SymInt> ws, Attrs at,
                        bool bias, Tolerance tol) {
  GraphBuilder b;
  ValueId x = b.input("x", t, xs), w = b.input("w", t, ws);
  std::vector<ValueId> ins{x, w};
  if (bias) {
    int64_t group = at.getInt("group", 1);
    ins.push_back(b.input("bias", t, {ws[1] * group}));
  }
  b.output(b.op(OpKind::ConvTranspose, ins, std::move(at)));
  checkGraph(b.g, kSizes, tol, {}, what(OpKind::ConvTranspose, t));
}

TEST(LinalgLower, ConvTranspose) {
  for (DType t : {DType::F32, DType::F64}) {
    Tolerance tol = t == DType::F32 ? kF32 : kF64;
    checkConvTranspose(t, {N, 4, 3, 4}, {4, 3, 3, 2},
                       attrs({{"group", int64_t(2)},
                              {"strides", std::vector<int64_t>{2, 1}},
                              {"pads", std::vector<int64_t>{1, 0, 0, 1}},
                              {"output_padding", std::vector<int64_t>{1, 0}}}),
                       true, tol);
    checkConvTranspose(t, {N, 2, 5}, {2, 3, 3},
                       attrs({{"strides", std::vector<int64_t>{3}},
                              {"dilations", std::vector<int64_t>{2}},
                              {"output_shape", std::vector<int64_t>{18}}}),
                       false, tol);
    checkConvTranspose(t, {N, 3, 3, 2, 3}, {3, 2, 2, 2, 2},
                       attrs({{"auto_pad", std::string("SAME_UPPER")},
                              {"strides", std::vector<int64_t>{2, 2, 1}}}),
                       true, tol);
  }
  // f16/bf16 through the f64 kernel, rounded once.
  checkConvTranspose(DType::F16, {N, 2, 3, 3}, {2, 2, 2, 2},
                     attrs({{"strides", std::vector<int64_t>{2, 2}}}), true, kExact);
  checkConvTranspose(DType::BF16, {N, 2, 4}, {2, 3, 3}, {}, false, kExact);
}

// --- Einsum, Det

void checkEinsum(DType t, const std::string &eq, std::vector<std::vector<SymInt>> shapes,
                 Tolerance tol) {
  GraphBuilder b;
  std::vector<ValueId> ins;
  for (size_t i = 0; i < shapes.size(); ++i)
    ins.push_back(b.input("x" + std::to_string(i), t, shapes[i]));
  b.output(b.op(OpKind::Einsum, ins, attrs({{"equation", eq}})));
  checkGraph(b.g, kSizes, tol, {}, "Einsum " + eq + " " + std::string(dtypeName(t)));
}

TEST(LinalgLower, Einsum) {
  for (DType t : {DType::F32, DType::F64}) {
    Tolerance tol = t == DType::F32 ? kF32 : kF64;
    checkEinsum(t, "ij,jk->ik", {{N, 3}, {3, 4}}, tol);
    checkEinsum(t, "bij,bjk->bik", {{N, 2, 3}, {N, 3, 4}}, tol);
    checkEinsum(t, "ij,jk", {{2, 3}, {3, N}}, tol);
    checkEinsum(t, "ii->i", {{4, 4}}, tol);
    checkEinsum(t, "...ij,...jk->...ik", {{N, 2, 3}, {1, 3, 2}}, tol);
    checkEinsum(t, "i,i->", {{5}, {5}}, tol);
    checkEinsum(t, "ij->ji", {{N, 3}}, tol);
    checkEinsum(t, "abc,cd,a->bd", {{2, 3, 4}, {4, N}, {2}}, tol);
    checkEinsum(t, "ij,kj->ik", {{N, 3}, {4, 3}}, tol);
    checkEinsum(t, "bhqd,bhkd->bhqk", {{2, N, 3, 4}, {2, N, 5, 4}}, tol);
    checkEinsum(t, "ik,kj->ji", {{N, 3}, {3, 2}}, tol);
    checkEinsum(t, "ij,ij->ij", {{N, 3}, {N, 3}}, tol);
    checkEinsum(t, "abk,kc->bac", {{2, N, 3}, {3, 4}}, tol);
    checkEinsum(t, "ij,j->i", {{N, 3}, {3}}, tol);
    checkEinsum(t, "ij,jk->k", {{N, 3}, {3, 4}}, tol); // i summed within one operand
  }
  // Two-operand contractions become one GEMM extern.
  GraphBuilder b;
  ValueId x = b.input("x", DType::F32, {N, 2, 3}), y = b.input("y", DType::F32, {N, 4, 3});
  b.output(b.op(OpKind::Einsum, {x, y}, attrs({{"equation", std::string("bij,bkj->bik")}})));
  EXPECT_EQ(countNodes(b.g, [](const loop::Node &n) { return n.isExtern(); }), 1);
  EXPECT_EQ(countNodes(b.g, [](const loop::Node &n) { return n.isReduction(); }), 0);
  checkEinsum(DType::I32, "ij,jk->ik", {{N, 3}, {3, 4}}, kExact);
  checkEinsum(DType::F16, "bij,bkj->bik", {{N, 2, 3}, {N, 4, 3}}, Tolerance{2e-3, 2e-3});
}

TEST(LinalgLower, Det) {
  for (DType t : {DType::F32, DType::F64, DType::F16}) {
    GraphBuilder b;
    ValueId x = b.input("x", t, {N, 2, 4, 4});
    b.output(b.op(OpKind::Det, {x}));
    // The kernel computes as the interpreter does (double, same pivoting): exact.
    checkGraph(b.g, kSizes, kExact, {}, what(OpKind::Det, t));
  }
  GraphBuilder b;
  ValueId x = b.input("x", DType::F64, {3, 3});
  b.output(b.op(OpKind::Det, {x}));
  checkGraph(b.g, {{}}, kExact, {}, "Det of one matrix");
}

// --- TopK, CumSum, CumProd

TEST(LinalgLower, TopK) {
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::U8, DType::F16, DType::I64})
    for (int64_t axis : {0, 1, -1})
      for (int64_t largest : {0, 1}) {
        GraphBuilder b;
        ValueId x = b.input("x", t, {4, N, 6});
        ValueId k = b.ints("k", {axis == 1 ? 1 : 3});
        auto outs = b.node(OpKind::TopK, {x, k}, attrs({{"axis", axis}, {"largest", largest}}), 2);
        for (ValueId o : outs) b.output(o);
        RandomOptions o;
        o.ilo = -3, o.ihi = 3, o.uhi = 4; // ties
        checkGraph(b.g, kSizes, kExact, o, what(OpKind::TopK, t, std::to_string(axis)));
      }
}

TEST(LinalgLower, CumSumCumProd) {
  for (OpKind op : {OpKind::CumSum, OpKind::CumProd})
    for (DType t : {DType::F32, DType::F64, DType::I32, DType::U8, DType::F16, DType::I64})
      for (int64_t ex : {0, 1})
        for (int64_t rev : {0, 1}) {
          GraphBuilder b;
          ValueId x = b.input("x", t, {3, N, 5});
          ValueId axis = b.ints("axis", {rev ? -1 : 1});
          b.output(b.op(op, {x, axis}, attrs({{"exclusive", ex}, {"reverse", rev}})));
          checkGraph(b.g, kSizes, kExact, {}, what(op, t));
        }
}

// --- data-dependent outputs

TEST(LinalgLower, NonZero) {
  for (DType t : {DType::F32, DType::Bool, DType::I32, DType::U8, DType::F16}) {
    GraphBuilder b;
    ValueId x = b.input("x", t, {N, 3, 4});
    b.output(b.op(OpKind::NonZero, {x}));
    RandomOptions o;
    o.lo = -1, o.hi = 1, o.ilo = -1, o.ihi = 1, o.uhi = 1, o.specials = true;
    checkGraph(b.g, kSizes, kExact, o, what(OpKind::NonZero, t));
  }
  GraphBuilder b;
  ValueId x = b.input("x", DType::I64, {});
  b.output(b.op(OpKind::NonZero, {x}));
  checkGraph(b.g, {{}}, kExact, {}, "NonZero of a scalar");
}

TEST(LinalgLower, Compress) {
  for (std::optional<int64_t> axis :
       {std::optional<int64_t>(), std::optional<int64_t>(1), std::optional<int64_t>(-1)}) {
    GraphBuilder b;
    ValueId x = b.input("x", DType::F32, {N, 4, 3});
    ValueId c = b.input("c", DType::Bool, {axis && *axis == 1 ? 4 : 3});
    Attrs at;
    if (axis) at.set("axis", *axis);
    b.output(b.op(OpKind::Compress, {x, c}, at));
    checkGraph(b.g, kSizes, kExact, {}, "Compress");
  }
  // A constant condition (inference knows the size).
  GraphBuilder b;
  ValueId x = b.input("x", DType::I32, {N, 5});
  ValueId c = b.constant("c", Tensor::fromInts(DType::Bool, {4}, {1, 0, 1, 1}));
  b.output(b.op(OpKind::Compress, {x, c}, attrs({{"axis", int64_t(1)}})));
  checkGraph(b.g, kSizes, kExact, {}, "Compress with a constant condition");
}

TEST(LinalgLower, UniqueAllOutputs) {
  for (DType t : {DType::F32, DType::I32, DType::Bool})
    for (int64_t sorted : {0, 1})
      for (std::optional<int64_t> axis : {std::optional<int64_t>(), std::optional<int64_t>(1)}) {
        GraphBuilder b;
        ValueId x = b.input("x", t, {2, N, 3});
        Attrs at = attrs({{"sorted", sorted}});
        if (axis) at.set("axis", *axis);
        auto outs = b.node(OpKind::Unique, {x}, at, 4);
        for (ValueId o : outs) b.output(o);
        RandomOptions o;
        o.lo = -1, o.hi = 1, o.ilo = -1, o.ihi = 1;
        std::vector<SymBindings> sizes = {{{"N", 1}}, {{"N", 4}}};
        uint64_t seed = 3;
        for (const SymBindings &s : sizes) {
          auto ins = randomInputs(b.g, s, seed++, o);
          if (isFloat(t)) // few distinct values, so that there are duplicates
            for (int64_t i = 0; i < ins[0].numel(); ++i)
              ins[0].setDouble(i, std::round(ins[0].getDouble(i)));
          expectMatchesInterpreter(b.g, ins, kExact, what(OpKind::Unique, t));
        }
      }
}

TEST(LinalgLower, NonMaxSuppression) {
  for (int64_t center : {0, 1}) {
    GraphBuilder b;
    ValueId boxes = b.input("boxes", DType::F32, {2, N, 4});
    ValueId scores = b.input("scores", DType::F32, {2, 3, N});
    ValueId maxOut = b.ints("max", {2});
    ValueId iou = b.constant("iou", Tensor::fromDoubles(DType::F32, {1}, {0.3}));
    ValueId thr = b.constant("thr", Tensor::fromDoubles(DType::F32, {1}, {-0.5}));
    b.output(b.op(OpKind::NonMaxSuppression, {boxes, scores, maxOut, iou, thr},
                  attrs({{"center_point_box", center}})));
    RandomOptions o;
    o.lo = -1, o.hi = 1;
    checkGraph(b.g, {{{"N", 1}}, {{"N", 7}}}, kExact, o, "NonMaxSuppression");
  }
}

TEST(LinalgLower, RunTimeScalarInputs) {
  std::mt19937_64 rng(5);
  {
    // TopK with K read at run time (an allocating call defines the K dim).
    GraphBuilder b;
    ValueId x = b.input("x", DType::F32, {3, N});
    ValueId k = b.input("k", DType::I64, {1});
    auto outs = b.node(OpKind::TopK, {x, k}, attrs({{"axis", int64_t(1)}}), 2);
    for (ValueId o : outs) b.output(o);
    for (int64_t kv : {0, 2, 4}) {
      Tensor xt = randomTensor(DType::F32, {3, 4}, rng);
      expectMatchesInterpreter(b.g, {xt, Tensor::fromInts(DType::I64, {1}, {kv})}, kExact,
                               "TopK with K " + std::to_string(kv));
    }
    auto p = loop::lowerGraph(b.g);
    ASSERT_TRUE(p.ok());
    auto bad = loop::evaluateLoopProgram(
        *p, {randomTensor(DType::F32, {3, 4}, rng), Tensor::fromInts(DType::I64, {1}, {5})});
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().render().find("topk: k 5 is out of range [0, 4] (the size of the axis)"),
              std::string::npos)
        << bad.error().render();
  }
  for (DType at : {DType::I32, DType::I64}) {
    // CumSum with the axis read at run time.
    GraphBuilder b;
    ValueId x = b.input("x", DType::I32, {3, N, 2});
    ValueId axis = b.input("axis", at, {});
    b.output(b.op(OpKind::CumSum, {x, axis}, attrs({{"reverse", int64_t(1)}})));
    for (int64_t a : {0, 1, -1, -3}) {
      Tensor xt = randomTensor(DType::I32, {3, 4, 2}, rng);
      expectMatchesInterpreter(b.g, {xt, Tensor::fromInts(at, {}, {a})}, kExact,
                               "CumSum along axis " + std::to_string(a));
    }
  }
  {
    // NonMaxSuppression with every scalar input given at run time.
    GraphBuilder b;
    ValueId boxes = b.input("boxes", DType::F32, {1, N, 4});
    ValueId scores = b.input("scores", DType::F32, {1, 2, N});
    ValueId maxOut = b.input("max", DType::I64, {1});
    ValueId iou = b.input("iou", DType::F32, {1});
    ValueId thr = b.input("thr", DType::F32, {1});
    b.output(b.op(OpKind::NonMaxSuppression, {boxes, scores, maxOut, iou, thr}));
    RandomOptions o;
    o.lo = -1, o.hi = 1;
    for (int64_t m : {1, 3}) {
      auto ins = randomInputs(b.g, {{"N", 6}}, uint64_t(m), o);
      ins[2] = Tensor::fromInts(DType::I64, {1}, {m});
      ins[3] = Tensor::fromDoubles(DType::F32, {1}, {0.2});
      ins[4] = Tensor::fromDoubles(DType::F32, {1}, {-0.3});
      expectMatchesInterpreter(b.g, ins, kExact, "NonMaxSuppression at run time");
    }
  }
}

// --- Attention

struct AttnCase {
  DType t = DType::F32;
  bool threeD = false;
  int64_t hq = 4, hkv = 2;
  std::optional<DType> mask;     ///< attn_mask dtype
  std::vector<SymInt> maskShape; ///< attn_mask shape
  bool past = false, nonpad = false;
  Attrs at;
  size_t outputs = 1;
};

void checkAttention(const AttnCase &c, Tolerance tol, const std::string &name) {
  GraphBuilder b;
  SymInt S = N, T = 5, D = 3, DV = 2, P = 2;
  ValueId q, k, v;
  Attrs at = c.at;
  if (c.threeD) {
    q = b.input("q", c.t, {2, S, c.hq * D});
    k = b.input("k", c.t, {2, T, c.hkv * D});
    v = b.input("v", c.t, {2, T, c.hkv * DV});
    at.set("q_num_heads", c.hq);
    at.set("kv_num_heads", c.hkv);
  } else {
    q = b.input("q", c.t, {2, c.hq, S, D});
    k = b.input("k", c.t, {2, c.hkv, T, D});
    v = b.input("v", c.t, {2, c.hkv, T, DV});
  }
  std::vector<ValueId> ins{q, k, v};
  ins.push_back(c.mask ? b.input("mask", *c.mask, c.maskShape) : kNoValue);
  ins.push_back(c.past ? b.input("pk", c.t, {2, c.hkv, P, D}) : kNoValue);
  ins.push_back(c.past ? b.input("pv", c.t, {2, c.hkv, P, DV}) : kNoValue);
  if (c.nonpad) ins.push_back(b.constant("np", Tensor::fromInts(DType::I64, {2}, {3, 5})));
  while (!ins.empty() && ins.back() == kNoValue) ins.pop_back();
  auto outs = b.node(OpKind::Attention, ins, at, c.outputs);
  for (ValueId o : outs) b.output(o);
  checkGraph(b.g, kSizes, tol, {}, "Attention " + name);
}

TEST(LinalgLower, Attention) {
  for (DType t : {DType::F32, DType::F64}) {
    Tolerance tol = t == DType::F32 ? kF32 : kF64;
    AttnCase c;
    c.t = t;
    checkAttention(c, tol, "plain GQA");
    c.threeD = true;
    c.outputs = 4;
    checkAttention(c, tol, "3-D with every output");
    c = AttnCase();
    c.t = t;
    c.hkv = 4;
    c.at = attrs({{"is_causal", int64_t(1)}, {"scale", 0.7}, {"softcap", 2.0}});
    c.past = true;
    c.outputs = 4;
    checkAttention(c, tol, "causal with a past cache and softcap");
    for (int64_t mode : {1, 2, 3}) {
      c = AttnCase();
      c.t = t;
      c.mask = DType::Bool;
      c.maskShape = {N, 5};
      c.outputs = 4;
      c.at = attrs({{"qk_matmul_output_mode", mode}});
      checkAttention(c, tol, "bool mask, qk mode " + std::to_string(mode));
    }
    c = AttnCase();
    c.t = t;
    c.mask = t;
    c.maskShape = {2, 1, N, 3}; // short last dim: keys 3.. masked
    c.at = attrs({{"left_window_size", int64_t(1)}, {"right_window_size", int64_t(2)}});
    checkAttention(c, tol, "float mask with a short last dim and windows");
    c = AttnCase();
    c.t = t;
    c.nonpad = true;
    c.at = attrs({{"is_causal", int64_t(1)}});
    checkAttention(c, tol, "nonpad_kv_seqlen");
  }
  AttnCase h;
  h.t = DType::F16;
  h.at = attrs({{"is_causal", int64_t(1)}});
  checkAttention(h, Tolerance{3e-3, 3e-3}, "f16");
}

} // namespace
