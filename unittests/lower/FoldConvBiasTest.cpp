// Folding of conv bias adds and ReLU/Clip into coil_cpu_conv_bias_* (lower/FoldConvBias.h): the
// folded program has the expected calls and evaluates to the interpreter's results.
#include "lower/FoldConvBias.h"

#include "LowerTestUtil.h"

#include <gtest/gtest.h>

using namespace coil;
using namespace coil::lowertest;

namespace {

const SymInt N = SymInt::symbol("N");

/// Lowers and folds `g`, checks the folds and the conv externs' functions and clamp
/// arguments, then compares its evaluation with the interpreter at N = 1 and 3.
void checkFold(const Graph &g, int folds, const std::vector<std::string> &functions,
               const std::vector<int64_t> &clamps) {
  auto p = loop::lowerGraph(g);
  ASSERT_TRUE(p.ok()) << p.error().render();
  EXPECT_EQ(loop::foldConvBias(*p), folds) << loop::printLoopProgram(*p);
  std::vector<std::string> got;
  std::vector<int64_t> gotClamps;
  for (const loop::Node &n : p->nodes)
    if (const auto *ex = std::get_if<loop::ExternNode>(&n.kind)) {
      got.push_back(ex->function);
      if (ex->function.rfind("coil_cpu_conv_bias_", 0) == 0) {
        ASSERT_EQ(ex->args.size(), 30u);
        gotClamps.push_back(*ex->args[27].sym.maybeConstant());
      }
    }
  EXPECT_EQ(got, functions) << loop::printLoopProgram(*p);
  EXPECT_EQ(gotClamps, clamps);
  uint64_t seed = 3;
  for (int64_t n : {1, 3}) {
    auto ins = randomInputs(g, {{"N", n}}, seed++);
    auto want = interpret(g, ins);
    ASSERT_TRUE(want.ok()) << want.error().render();
    auto out = loop::evaluateLoopProgram(*p, ins);
    ASSERT_TRUE(out.ok()) << out.error().render() << "\n" << loop::printLoopProgram(*p);
    ASSERT_EQ(out->size(), want->size());
    for (size_t k = 0; k < out->size(); ++k)
      EXPECT_EQ(compareTensors((*out)[k], (*want)[k], {1e-5, 1e-5}), "") << "output " << k;
  }
}

Attrs pad1() {
  return attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
}

TEST(FoldConvBias, BiasReluAndClip) {
  for (DType t : {DType::F32, DType::F64}) {
    std::string s = t == DType::F32 ? "f32" : "f64";
    GraphBuilder b;
    ValueId x = b.input("x", t, {N, 3, 9, 8});
    ValueId w1 = b.input("w1", t, {4, 3, 3, 3}), b1 = b.input("b1", t, {4});
    ValueId w2 = b.input("w2", t, {4, 1, 3, 3}), b2 = b.input("b2", t, {4});
    ValueId w3 = b.input("w3", t, {5, 4, 1, 1}), b3 = b.input("b3", t, {5});
    ValueId lo = b.constant("lo", Tensor::fromDoubles(t, {}, {-0.25}));
    ValueId hi = b.constant("hi", Tensor::fromDoubles(t, {}, {0.5}));
    // conv + bias + ReLU; depthwise conv + bias + Clip(lo, hi); 1x1 conv + bias (no clamp).
    ValueId y = b.op(OpKind::Relu, {b.op(OpKind::Conv, {x, w1, b1}, pad1())});
    y = b.op(OpKind::Clip,
             {b.op(OpKind::Conv, {y, w2, b2},
                   attrs({{"group", int64_t(4)}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}})),
              lo, hi});
    b.output(b.op(OpKind::Conv, {y, w3, b3}));
    std::string f = "coil_cpu_conv_bias_" + s;
    checkFold(b.g, 5, {f, f, f}, {1, 3, 0});
  }
}

TEST(FoldConvBias, SharedOrOutputValuesStay) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::F32, {N, 2, 6, 6});
  ValueId w = b.input("w", DType::F32, {3, 2, 3, 3}), bias = b.input("bias", DType::F32, {3});
  // The biased conv is an output and also feeds the ReLU: the bias folds, the ReLU does not.
  ValueId c = b.op(OpKind::Conv, {x, w, bias}, pad1());
  b.output(c);
  b.output(b.op(OpKind::Relu, {c}));
  // A conv without bias read twice: nothing folds.
  ValueId c2 = b.op(OpKind::Conv, {x, w}, pad1());
  b.output(b.op(OpKind::Add, {c2, c2}));
  b.output(b.op(OpKind::Relu, {c2}));
  checkFold(b.g, 1, {"coil_cpu_conv_bias_f32", "coil_cpu_conv_f32"}, {0});
}

TEST(FoldConvBias, NonConstantClipStaysApart) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::F32, {N, 2, 5, 5});
  ValueId w = b.input("w", DType::F32, {2, 2, 1, 1}), bias = b.input("bias", DType::F32, {2});
  ValueId lo = b.input("lo", DType::F32, {});
  b.output(b.op(OpKind::Clip, {b.op(OpKind::Conv, {x, w, bias}), lo}));
  checkFold(b.g, 1, {"coil_cpu_conv_bias_f32"}, {0});
}

} // namespace
