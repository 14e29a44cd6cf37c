// The bias/ReLU fold into the GEMM extern (lower/FoldGemmBias.h): which patterns fold and which
// do not, and that the folded program, evaluated by the Loop IR evaluator (the CPU kernels),
// still matches the reference interpreter.
#include "lower/FoldGemmBias.h"

#include "LowerTestUtil.h"

#include <gtest/gtest.h>

using namespace coil;
using namespace coil::lowertest;

namespace {

const SymInt N = SymInt::symbol("N");
const std::vector<SymBindings> kSizes = {{{"N", 1}}, {{"N", 3}}};
const Tolerance kF32{1e-4, 1e-4};

struct Folded {
  int folds = -1;
  int pointwise = 0;
  std::vector<std::string> externs; ///< function names, in node order
  std::vector<int64_t> relu;        ///< the relu argument of each gemm_bias call
  loop::LoopProgram program;
};

/// Lowers and folds `g`, then checks the folded program against the interpreter.
Folded foldAndCheck(const Graph &g, Tolerance tol, const std::string &what) {
  Folded f;
  auto p = loop::lowerGraph(g);
  EXPECT_TRUE(p.ok()) << what << ": " << (p.ok() ? "" : p.error().render());
  if (!p.ok()) return f;
  f.folds = loop::foldGemmBias(*p);
  for (const loop::Node &n : p->nodes) {
    f.pointwise += n.isPointwise() ? 1 : 0;
    if (const auto *ex = std::get_if<loop::ExternNode>(&n.kind)) {
      f.externs.push_back(ex->function);
      if (ex->function.rfind("coil_cpu_gemm_bias_", 0) == 0) {
        auto v = ex->args.back().sym.evaluate({});
        f.relu.push_back(v.ok() ? *v : -1);
      }
    }
  }
  uint64_t seed = 11;
  for (const SymBindings &s : kSizes) {
    std::vector<Tensor> ins = randomInputs(g, s, seed++);
    auto want = interpret(g, ins);
    EXPECT_TRUE(want.ok()) << what << ": " << (want.ok() ? "" : want.error().render());
    auto got = loop::evaluateLoopProgram(*p, ins);
    EXPECT_TRUE(got.ok()) << what << ": " << (got.ok() ? "" : got.error().render()) << "\n"
                          << loop::printLoopProgram(*p);
    if (!want.ok() || !got.ok()) continue;
    EXPECT_EQ(got->size(), want->size());
    for (size_t k = 0; k < got->size() && k < want->size(); ++k)
      EXPECT_EQ(compareTensors((*got)[k], (*want)[k], tol), "") << what << ": output " << k << "\n"
                                                                << loop::printLoopProgram(*p);
  }
  f.program = std::move(*p);
  return f;
}

Tensor randomConst(DType t, const Shape &s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return randomTensor(t, s, rng);
}

TEST(FoldGemmBias, BatchedMatMulPlusColumnBias) {
  for (bool biasFirst : {false, true})
    for (bool constant : {false, true}) {
      GraphBuilder b;
      ValueId x = b.input("x", DType::F32, {N, 3, 5});
      ValueId w = b.constant("w", randomConst(DType::F32, {5, 4}, 1));
      ValueId bias = constant ? b.constant("bias", randomConst(DType::F32, {1, 4}, 2))
                              : b.input("bias", DType::F32, {4});
      ValueId mm = b.op(OpKind::MatMul, {x, w});
      b.output(b.op(OpKind::Add,
                    biasFirst ? std::vector<ValueId>{bias, mm} : std::vector<ValueId>{mm, bias}));
      Folded f = foldAndCheck(b.g, kF32, "matmul + bias");
      EXPECT_EQ(f.folds, 1);
      EXPECT_EQ(f.pointwise, 0);
      ASSERT_EQ(f.externs, std::vector<std::string>{"coil_cpu_gemm_bias_f32"});
      EXPECT_EQ(f.relu, std::vector<int64_t>{0});
    }
}

TEST(FoldGemmBias, ReluAfterTheBiasFolds) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::F32, {N, 6});
  ValueId w = b.input("w", DType::F32, {6, 7});
  ValueId bias = b.constant("bias", randomConst(DType::F32, {7}, 3));
  ValueId y = b.op(OpKind::Add, {b.op(OpKind::MatMul, {x, w}), bias});
  b.output(b.op(OpKind::Relu, {y}));
  Folded f = foldAndCheck(b.g, kF32, "matmul + bias + relu");
  EXPECT_EQ(f.folds, 2);
  EXPECT_EQ(f.pointwise, 0);
  ASSERT_EQ(f.externs, std::vector<std::string>{"coil_cpu_gemm_bias_f32"});
  EXPECT_EQ(f.relu, std::vector<int64_t>{1});
}

TEST(FoldGemmBias, Bf16AddsTheBiasBeforeTheOneRounding) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::BF16, {N, 3, 8});
  ValueId w = b.constant("w", randomConst(DType::BF16, {8, 5}, 4));
  ValueId bias = b.constant("bias", randomConst(DType::BF16, {5}, 5));
  ValueId y = b.op(OpKind::Add, {b.op(OpKind::MatMul, {x, w}), bias});
  b.output(b.op(OpKind::Relu, {y}));
  // The unfused program rounds the product to bf16 before the add: one bf16 ulp apart at most.
  Folded f = foldAndCheck(b.g, Tolerance{5e-2, 1e-2}, "bf16 matmul + bias + relu");
  EXPECT_EQ(f.folds, 2);
  ASSERT_EQ(f.externs, std::vector<std::string>{"coil_cpu_gemm_bias_bf16"});
  EXPECT_EQ(f.relu, std::vector<int64_t>{1});
}

TEST(FoldGemmBias, GemmOutputReadTwiceDoesNotFold) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::F32, {N, 5});
  ValueId w = b.input("w", DType::F32, {5, 4});
  ValueId bias = b.input("bias", DType::F32, {4});
  ValueId mm = b.op(OpKind::MatMul, {x, w});
  b.output(b.op(OpKind::Add, {mm, bias}));
  b.output(b.op(OpKind::Neg, {mm}));
  Folded f = foldAndCheck(b.g, kF32, "gemm read twice");
  EXPECT_EQ(f.folds, 0);
  EXPECT_EQ(f.externs, std::vector<std::string>{"coil_cpu_gemm_f32"});

  GraphBuilder o; // the GEMM's output is a graph output
  x = o.input("x", DType::F32, {N, 5});
  w = o.input("w", DType::F32, {5, 4});
  bias = o.input("bias", DType::F32, {4});
  mm = o.op(OpKind::MatMul, {x, w});
  o.output(mm);
  o.output(o.op(OpKind::Add, {mm, bias}));
  EXPECT_EQ(foldAndCheck(o.g, kF32, "gemm is an output").folds, 0);
}

TEST(FoldGemmBias, PreActivationReadTwiceKeepsTheRelu) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::F32, {N, 5});
  ValueId w = b.input("w", DType::F32, {5, 4});
  ValueId bias = b.input("bias", DType::F32, {4});
  ValueId y = b.op(OpKind::Add, {b.op(OpKind::MatMul, {x, w}), bias});
  b.output(b.op(OpKind::Relu, {y}));
  b.output(b.op(OpKind::Neg, {y}));
  Folded f = foldAndCheck(b.g, kF32, "pre-activation read twice");
  EXPECT_EQ(f.folds, 1);
  EXPECT_EQ(f.relu, std::vector<int64_t>{0});
  EXPECT_EQ(f.pointwise, 2);
}

TEST(FoldGemmBias, BiasAlongTheRowsOrFullShapeDoesNotFold) {
  std::vector<std::vector<SymInt>> shapes = {{3, 1}, {N, 3, 4}, {N, 1, 4}, {1}};
  for (const auto &bs : shapes) {
    GraphBuilder b;
    ValueId x = b.input("x", DType::F32, {N, 3, 5});
    ValueId w = b.input("w", DType::F32, {5, 4});
    ValueId bias = b.input("bias", DType::F32, bs);
    b.output(b.op(OpKind::Add, {b.op(OpKind::MatMul, {x, w}), bias}));
    Folded f = foldAndCheck(b.g, kF32, "bias shape");
    EXPECT_EQ(f.folds, 0) << loop::printLoopProgram(f.program);
  }
}

TEST(FoldGemmBias, ComputedBiasOrOtherOpsDoNotFold) {
  GraphBuilder b; // the bias is computed (a Pointwise node), not a constant or input
  ValueId x = b.input("x", DType::F32, {N, 5});
  ValueId w = b.input("w", DType::F32, {5, 4});
  ValueId bias = b.op(OpKind::Neg, {b.input("bias", DType::F32, {4})});
  b.output(b.op(OpKind::Add, {b.op(OpKind::MatMul, {x, w}), bias}));
  EXPECT_EQ(foldAndCheck(b.g, kF32, "computed bias").folds, 0);

  GraphBuilder s; // a Sub is no bias add
  x = s.input("x", DType::F32, {N, 5});
  w = s.input("w", DType::F32, {5, 4});
  bias = s.input("bias", DType::F32, {4});
  s.output(s.op(OpKind::Sub, {s.op(OpKind::MatMul, {x, w}), bias}));
  EXPECT_EQ(foldAndCheck(s.g, kF32, "sub").folds, 0);

  GraphBuilder r; // a ReLU straight after a GEMM without a bias stays a Pointwise node
  x = r.input("x", DType::F32, {N, 5});
  w = r.input("w", DType::F32, {5, 4});
  r.output(r.op(OpKind::Relu, {r.op(OpKind::MatMul, {x, w})}));
  EXPECT_EQ(foldAndCheck(r.g, kF32, "relu without bias").folds, 0);
}

TEST(FoldGemmBias, GemmWithColumnCLowersToTheBiasExtern) {
  for (std::vector<SymInt> cs : {std::vector<SymInt>{4}, std::vector<SymInt>{1, 4}}) {
    GraphBuilder b;
    ValueId x = b.input("x", DType::F32, {5, N});
    ValueId w = b.input("w", DType::F32, {4, 5});
    ValueId c = b.input("c", DType::F32, cs);
    ValueId y = b.op(OpKind::Gemm, {x, w, c},
                     attrs({{"transA", int64_t(1)}, {"transB", int64_t(1)}, {"alpha", 0.5}}));
    b.output(b.op(OpKind::Relu, {y}));
    Folded f = foldAndCheck(b.g, kF32, "gemm with C");
    EXPECT_EQ(f.folds, 1); // the ReLU
    ASSERT_EQ(f.externs, std::vector<std::string>{"coil_cpu_gemm_bias_f32"});
    EXPECT_EQ(f.relu, std::vector<int64_t>{1});
  }
  GraphBuilder s; // beta != 1 keeps the Pointwise add
  ValueId x = s.input("x", DType::F32, {N, 5});
  ValueId w = s.input("w", DType::F32, {5, 4});
  ValueId c = s.input("c", DType::F32, {4});
  s.output(s.op(OpKind::Gemm, {x, w, c}, attrs({{"beta", 0.5}})));
  Folded f = foldAndCheck(s.g, kF32, "gemm with beta");
  EXPECT_EQ(f.externs, std::vector<std::string>{"coil_cpu_gemm_f32"});
}

} // namespace
