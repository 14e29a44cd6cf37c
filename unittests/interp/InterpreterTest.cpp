// Tests of the interpreter's input binding and result checking (graphs without kernels needed).
#include "interp/Interpreter.h"

#include <gtest/gtest.h>

using namespace coil;

namespace {
TensorType ty(DType d, std::vector<SymInt> s) { return TensorType{d, std::move(s)}; }
Tensor zeros(DType d, Shape s) { return Tensor(d, std::move(s)); }
} // namespace

TEST(Interpreter, BindsSymbolsAndChecksRepeats) {
  Graph g;
  SymInt n = SymInt::symbol("N");
  ValueId a = g.addInput("a", ty(DType::F32, {n, 3}));
  g.addInput("b", ty(DType::F32, {n}));
  g.outputs.push_back(a);
  auto b = bindInputs(g, {zeros(DType::F32, {5, 3}), zeros(DType::F32, {5})});
  ASSERT_TRUE(b.ok()) << b.error().render();
  EXPECT_EQ(b->at("N"), 5);
  auto bad = bindInputs(g, {zeros(DType::F32, {5, 3}), zeros(DType::F32, {4})});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "input 'b' must have shape [N], got [4] (dim 0)");
}

TEST(Interpreter, ChecksDTypeRankConstantDimsAndRanges) {
  Graph g;
  g.symbols["B"] = SymRange{1, 4};
  ValueId x = g.addInput("x", ty(DType::F16, {SymInt::symbol("B"), 8}));
  g.outputs.push_back(x);
  auto wrongType = bindInputs(g, {zeros(DType::F32, {2, 8})});
  ASSERT_FALSE(wrongType.ok());
  EXPECT_EQ(wrongType.error().message(), "input 'x' must have dtype f16, got f32");
  auto wrongRank = bindInputs(g, {zeros(DType::F16, {16})});
  ASSERT_FALSE(wrongRank.ok());
  EXPECT_NE(wrongRank.error().message().find("must have rank 2"), std::string::npos);
  auto wrongDim = bindInputs(g, {zeros(DType::F16, {2, 9})});
  ASSERT_FALSE(wrongDim.ok());
  EXPECT_NE(wrongDim.error().message().find("(dim 1)"), std::string::npos);
  auto outOfRange = bindInputs(g, {zeros(DType::F16, {5, 8})});
  ASSERT_FALSE(outOfRange.ok());
  EXPECT_EQ(outOfRange.error().message(),
            "symbol 'B' = 5 is outside its declared range [1, 4]");
  EXPECT_FALSE(bindInputs(g, {}).ok());
}

TEST(Interpreter, ChecksExpressionDimsAfterBinding) {
  Graph g;
  SymInt n = SymInt::symbol("N");
  g.addInput("a", ty(DType::I64, {n}));
  ValueId b = g.addInput("b", ty(DType::I64, {n * 2}));
  g.outputs.push_back(b);
  EXPECT_TRUE(bindInputs(g, {zeros(DType::I64, {3}), zeros(DType::I64, {6})}).ok());
  EXPECT_FALSE(bindInputs(g, {zeros(DType::I64, {3}), zeros(DType::I64, {7})}).ok());
}

TEST(Interpreter, EvaluatesSymbolicConstantOutputs) {
  Graph g;
  SymInt n = SymInt::symbol("N");
  g.addInput("x", ty(DType::F32, {n, 4}));
  ValueId s = g.addSymConstant("shape", {n * 4, 1});
  g.outputs.push_back(s);
  auto outs = interpret(g, {zeros(DType::F32, {3, 4})});
  ASSERT_TRUE(outs.ok()) << outs.error().render();
  EXPECT_EQ((*outs)[0].toInts(), (std::vector<int64_t>{12, 1}));
}
