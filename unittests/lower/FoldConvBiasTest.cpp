// Folding of conv bias adds and ReLU/Clip into coil_cpu_conv_bias_* (lower/FoldConvBias.h): the
// folded program has the expected calls and evaluates to the interpreter's results.
#include "lower/FoldConvBias.h"

#include "LowerTestUtil.h"
#include "lower/ChannelsLast.h"

#include <gtest/gtest.h>

using namespace coil;
using namespace coil::lowertest;

namespace {

const SymInt N = SymInt::symbol("N");

/// Lowers and folds `g`, checks the folds and the conv externs' functions and clamp
/// arguments, then compares its evaluation with the interpreter at N = 1 and 3.
/// Lowers `g` (converted to channels-last first when `channelsLast`, as for CUDA) and folds it
/// with `o`, checks the folds and the conv externs' functions and clamp arguments, then
/// compares its evaluation with the interpreter at N = 1 and 3.
void checkFold(const Graph &g, int folds, const std::vector<std::string> &functions,
               const std::vector<int64_t> &clamps, Tolerance tol = {1e-5, 1e-5},
               bool channelsLast = false, loop::FoldConvBiasOptions o = {}) {
  Graph lowered = g;
  if (channelsLast) {
    auto cl = loop::convertToChannelsLast(g);
    ASSERT_TRUE(cl.ok()) << cl.error().render();
    lowered = std::move(*cl);
  }
  auto p = loop::lowerGraph(lowered);
  ASSERT_TRUE(p.ok()) << p.error().render();
  EXPECT_EQ(loop::foldConvBias(*p, o), folds) << loop::printLoopProgram(*p);
  std::vector<std::string> got;
  std::vector<int64_t> gotClamps;
  for (const loop::Node &n : p->nodes)
    if (const auto *ex = std::get_if<loop::ExternNode>(&n.kind)) {
      if (ex->function.rfind("coil_cpu_conv", 0) != 0) continue;
      got.push_back(ex->function);
      if (ex->function.find("_bias_") != std::string::npos) {
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
      EXPECT_EQ(compareTensors((*out)[k], (*want)[k], tol), "") << "output " << k;
  }
}

Attrs pad1() {
  return attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
}

/// conv + bias + ReLU; depthwise conv + bias + Clip(-0.25, 0.5); 1x1 conv + bias (no clamp).
Graph biasReluClipGraph(DType t) {
  GraphBuilder b;
  ValueId x = b.input("x", t, {N, 3, 9, 8});
  ValueId w1 = b.input("w1", t, {4, 3, 3, 3}), b1 = b.input("b1", t, {4});
  ValueId w2 = b.input("w2", t, {4, 1, 3, 3}), b2 = b.input("b2", t, {4});
  ValueId w3 = b.input("w3", t, {5, 4, 1, 1}), b3 = b.input("b3", t, {5});
  ValueId lo = b.constant("lo", Tensor::fromDoubles(t, {}, {-0.25}));
  ValueId hi = b.constant("hi", Tensor::fromDoubles(t, {}, {0.5}));
  ValueId y = b.op(OpKind::Relu, {b.op(OpKind::Conv, {x, w1, b1}, pad1())});
  y = b.op(OpKind::Clip,
           {b.op(OpKind::Conv, {y, w2, b2},
                 attrs({{"group", int64_t(4)}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}})),
            lo, hi});
  b.output(b.op(OpKind::Conv, {y, w3, b3}));
  return b.g;
}

/// The interpreter accumulates f16/bf16 in f64, the externs in f32 (both round once).
Tolerance tolOf(DType t) {
  return t == DType::F16    ? Tolerance{2e-3, 2e-3}
         : t == DType::BF16 ? Tolerance{1.6e-2, 1.6e-2}
                            : Tolerance{1e-5, 1e-5};
}

TEST(FoldConvBias, ChannelsLastBiasReluAndClip) {
  // The channels-last form (the CUDA default): conv_nhwc + a bias read at the last index.
  // (f32: the channels-last GEMMs sum in another order than the interpreter, as unfolded.)
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtypeName(t));
    std::string f = "coil_cpu_conv_nhwc_bias_" + std::string(dtypeName(t));
    checkFold(biasReluClipGraph(t), 5, {f, f, f}, {1, 3, 0},
              t == DType::F32 ? Tolerance{1e-4, 1e-4} : tolOf(t), true);
  }
}

TEST(FoldConvBias, CudaFoldsHalfTypesAndReluOnly) {
  // For CUDA: f16/bf16 (the fused externs' CUDA twins) fold their bias and a ReLU, not a Clip
  // (a kernel of its own after the fused call); f32 does not fold (no twin: it would run on the
  // host).
  loop::FoldConvBiasOptions cuda;
  cuda.cuda = true;
  for (DType t : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtypeName(t));
    std::string f = "coil_cpu_conv_nhwc_bias_" + std::string(dtypeName(t));
    checkFold(biasReluClipGraph(t), 4, {f, f, f}, {1, 0, 0}, tolOf(t), true, cuda);
    std::string g = "coil_cpu_conv_bias_" + std::string(dtypeName(t));
    checkFold(biasReluClipGraph(t), 4, {g, g, g}, {1, 0, 0}, tolOf(t), false, cuda);
  }
  checkFold(biasReluClipGraph(DType::F32), 0,
            {"coil_cpu_conv_nhwc_f32", "coil_cpu_conv_nhwc_f32", "coil_cpu_conv_nhwc_f32"}, {},
            Tolerance{1e-4, 1e-4}, true, cuda);
}

TEST(FoldConvBias, BiasReluAndClip) {
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    std::string s(dtypeName(t));
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
    // f16/bf16: the interpreter accumulates in f64, the extern in f32 (both round once).
    Tolerance tol = t == DType::F16 ? Tolerance{2e-3, 2e-3}
                    : t == DType::BF16 ? Tolerance{1.6e-2, 1.6e-2}
                                       : Tolerance{1e-5, 1e-5};
    checkFold(b.g, 5, {f, f, f}, {1, 3, 0}, tol);
  }
}

/// The elements of `got` that differ from `want`.
int64_t mismatches(const Tensor &got, const Tensor &want) {
  std::vector<double> a = got.toDoubles(), b = want.toDoubles();
  int64_t n = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) n += a[i] != b[i];
  return n;
}

TEST(FoldConvBias, HalfConvRoundsOnceAsTheInterpreter) {
  // A biased Conv in f16/bf16: the interpreter rounds conv + bias once; unfused, the conv
  // extern rounds the convolution and the bias add rounds again, which differs in a fair share
  // of the outputs; folded, the sum is rounded once (differences only where f32 and f64
  // accumulation round apart).
  for (DType t : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtypeName(t));
    GraphBuilder b;
    ValueId x = b.input("x", t, {N, 8, 10, 10});
    ValueId w = b.input("w", t, {16, 8, 3, 3}), bias = b.input("bias", t, {16});
    b.output(b.op(OpKind::Conv, {x, w, bias}, pad1()));
    auto unfused = loop::lowerGraph(b.g);
    ASSERT_TRUE(unfused.ok()) << unfused.error().render();
    loop::LoopProgram folded = *unfused;
    ASSERT_EQ(loop::foldConvBias(folded), 1) << loop::printLoopProgram(folded);
    auto ins = randomInputs(b.g, {{"N", 2}}, 11);
    auto want = interpret(b.g, ins);
    ASSERT_TRUE(want.ok()) << want.error().render();
    auto before = loop::evaluateLoopProgram(*unfused, ins);
    auto after = loop::evaluateLoopProgram(folded, ins);
    ASSERT_TRUE(before.ok() && after.ok());
    int64_t total = (*want)[0].numel(), was = mismatches((*before)[0], (*want)[0]),
            now = mismatches((*after)[0], (*want)[0]);
    EXPECT_GT(was, total / 20) << "unfused: " << was << " of " << total << " differ";
    EXPECT_LE(now, total / 100) << "folded: " << now << " of " << total << " differ";
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
