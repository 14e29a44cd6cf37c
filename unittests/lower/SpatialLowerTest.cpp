// Tests of the spatial and recurrent lowerings (lower/ops/Spatial.cpp): each graph is lowered to
// Loop IR, evaluated by the Loop IR evaluator on random inputs and compared with the reference
// interpreter.
#include "codegen/cpu/CpuCodegen.h"
#include "interp/Interpreter.h"
#include "ir/Infer.h"
#include "ir/Parser.h"
#include "kernels/cpu/CpuRnn.h"
#include "lower/LoopEval.h"
#include "lower/Lower.h"
#include "sched/Schedule.h"

#include <cmath>
#include <gtest/gtest.h>
#include <omp.h>
#include <random>
#include <sstream>

using namespace coil;

namespace {

Tensor randomTensor(DType dt, Shape shape, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(size_t(numelOf(shape)));
  for (double &x : v) x = dist(rng);
  if (!isFloat(dt))
    for (double &x : v) x = std::round(x);
  return Tensor::fromDoubles(dt, std::move(shape), v);
}

Tensor ints(DType dt, Shape shape, std::vector<int64_t> v) {
  return Tensor::fromInts(dt, std::move(shape), v);
}

/// Test graphs leave output types to inference: each "?" stands for the output types of the
/// node it ends (one placeholder per output); the parsed graph is then re-typed node by node.
Expected<Graph> parseUntyped(const std::string &text) {
  std::string filled;
  size_t lineStart = 0, stmtStart = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    if (ch == '\n') {
      lineStart = i + 1;
      size_t j = lineStart;
      while (j < text.size() && text[j] == ' ') ++j;
      if (j < text.size() && text[j] == '%') stmtStart = j;
    }
    if (ch != '?') {
      filled += ch;
      continue;
    }
    size_t eq = text.find('=', stmtStart);
    int outs = 0;
    for (size_t k = stmtStart; k < eq; ++k) outs += text[k] == '%';
    for (int k = 0; k < outs; ++k) filled += k ? ", f32[]" : "f32[]";
  }
  ParseOptions opts;
  opts.verify.reinfer = false;
  COIL_TRY(Graph g, parseGraph(filled, "<test>", opts));
  int fresh = 0;
  for (const Node &n : g.nodes()) {
    InferContext ctx{n, {}, {}, {}, {}};
    for (ValueId in : n.inputs) {
      if (in == kNoValue) {
        ctx.inputTypes.push_back(nullptr);
        ctx.intValues.push_back(std::nullopt);
        ctx.constants.push_back(nullptr);
        continue;
      }
      ctx.inputTypes.push_back(&g.value(in).type);
      std::optional<std::vector<SymInt>> iv;
      if (g.isConstant(in) && !isFloat(g.constant(in).dtype())) {
        std::vector<SymInt> v;
        for (int64_t x : g.constant(in).toInts()) v.push_back(x);
        iv = v;
      } else if (g.isSymConstant(in)) {
        iv = g.symConstant(in);
      }
      ctx.intValues.push_back(iv);
      ctx.constants.push_back(g.isConstant(in) ? &g.constant(in) : nullptr);
    }
    ctx.freshSymbol = [&](const std::string &h) {
      return SymInt::symbol(h + "_" + std::to_string(fresh++));
    };
    COIL_TRY(auto types, inferNode(ctx));
    for (size_t o = 0; o < n.outputs.size() && o < types.size(); ++o)
      if (n.outputs[o] != kNoValue) g.value(n.outputs[o]).type = types[o];
  }
  return g;
}

/// Lowers the graph of `text` (with `lo`), evaluates it on `inputs` and compares every output
/// with the interpreter's (integers exactly, floats within `tol` relative to max(1, |want|)).
void expectMatches(const std::string &text, const std::vector<Tensor> &inputs, double tol = 1e-4,
                   const loop::LowerOptions &lo = {}) {
  SCOPED_TRACE(text);
  auto g = parseUntyped(text);
  ASSERT_TRUE(g.ok()) << g.error().render();
  auto want = interpret(*g, inputs);
  ASSERT_TRUE(want.ok()) << want.error().render();
  auto prog = loop::lowerGraph(*g, lo);
  ASSERT_TRUE(prog.ok()) << prog.error().render();
  {
    loop::LoopProgram copy = *prog;
    // The rest of the pipeline accepts the program: it schedules and every kernel generates.
    auto sch = sched::scheduleProgram(copy);
    EXPECT_TRUE(sch.ok()) << sch.error().render();
    if (sch.ok())
      for (const sched::Step &st : sch->steps)
        if (const auto *k = std::get_if<sched::Kernel>(&st)) {
          auto src = codegen::generateCpuKernel(*k, copy);
          EXPECT_TRUE(src.ok()) << src.error().render();
        }
  }
  auto got = loop::evaluateLoopProgram(*prog, inputs);
  ASSERT_TRUE(got.ok()) << got.error().render() << "\n" << loop::printLoopProgram(*prog);
  ASSERT_EQ(got->size(), want->size());
  for (size_t o = 0; o < want->size(); ++o) {
    const Tensor &w = (*want)[o], &r = (*got)[o];
    ASSERT_EQ(r.dtype(), w.dtype()) << "output " << o;
    ASSERT_EQ(shapeStr(r.shape()), shapeStr(w.shape())) << "output " << o;
    if (!isFloat(w.dtype())) {
      auto wv = w.toInts(), rv = r.toInts();
      for (size_t i = 0; i < wv.size(); ++i)
        ASSERT_EQ(rv[i], wv[i]) << "output " << o << " at flat index " << i;
      continue;
    }
    auto wv = w.toDoubles(), rv = r.toDoubles();
    for (size_t i = 0; i < wv.size(); ++i) {
      if (std::isnan(wv[i])) {
        ASSERT_TRUE(std::isnan(rv[i])) << "output " << o << " at flat index " << i;
        continue;
      }
      if (std::isinf(wv[i])) {
        ASSERT_EQ(rv[i], wv[i]) << "output " << o << " at flat index " << i;
        continue;
      }
      ASSERT_NEAR(rv[i], wv[i], tol * std::max(1.0, std::fabs(wv[i])))
          << "output " << o << " at flat index " << i;
    }
  }
}

std::string lowerError(const std::string &text) {
  auto g = parseUntyped(text);
  if (!g.ok()) return "parse: " + g.error().render();
  auto prog = loop::lowerGraph(*g);
  return prog.ok() ? "(ok)" : prog.error().message();
}

// ---------------------------------------------------------------------------------- pools

TEST(SpatialLower, MaxPoolPadsStridesAndIndices) {
  expectMatches(R"(graph @g(%x: f32[2, 3, 7, 8]) -> (%y, %i) {
    %y, %i = MaxPool(%x) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : ?
  })",
                {randomTensor(DType::F32, {2, 3, 7, 8}, 1)});
}

TEST(SpatialLower, MaxPoolCeilModeDilationsColumnMajorIndices) {
  expectMatches(R"(graph @g(%x: f32[1, 2, 9, 10]) -> (%y, %i) {
    %y, %i = MaxPool(%x) {kernel_shape = [2, 3], pads = [0, 1, 1, 0], strides = [2, 3],
                          dilations = [2, 1], ceil_mode = 1, storage_order = 1} : ?
  })",
                {randomTensor(DType::F32, {1, 2, 9, 10}, 2)});
}

TEST(SpatialLower, MaxPoolAutoPad1dAnd3d) {
  for (const char *pad : {"SAME_UPPER", "SAME_LOWER", "VALID"}) {
    expectMatches(std::string(R"(graph @g(%x: f32[2, 2, 11]) -> (%y, %i) {
      %y, %i = MaxPool(%x) {kernel_shape = [4], strides = [3], auto_pad = ")") +
                      pad + R"("} : ?
    })",
                  {randomTensor(DType::F32, {2, 2, 11}, 3)});
    expectMatches(std::string(R"(graph @g(%x: f32[1, 2, 5, 4, 6]) -> (%y) {
      %y = MaxPool(%x) {kernel_shape = [2, 3, 2], strides = [2, 1, 2], auto_pad = ")") +
                      pad + R"("} : ?
    })",
                  {randomTensor(DType::F32, {1, 2, 5, 4, 6}, 4)});
  }
}

TEST(SpatialLower, MaxPoolTapsWithoutIndices) {
  // Without indices a small window is a Pointwise max of its taps: pads, dilations, ceil_mode
  // and NaN, infinities and signed zeros (NaN propagates; of +0 and -0 the first tap's stays).
  Tensor x = randomTensor(DType::F32, {2, 3, 9, 10}, 11);
  const double specials[] = {std::nan(""), INFINITY, -INFINITY, 0.0, -0.0};
  for (int64_t i = 0; i < x.numel(); i += 7) x.setDouble(i, specials[(i / 7) % 5]);
  for (int64_t i = 1; i < x.numel(); i += 13) x.setDouble(i, (i / 13) % 2 ? 0.0 : -0.0);
  expectMatches(R"(graph @g(%x: f32[2, 3, 9, 10]) -> (%y) {
    %y = MaxPool(%x) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : ?
  })",
                {x});
  expectMatches(R"(graph @g(%x: f32[2, 3, 9, 10]) -> (%y) {
    %y = MaxPool(%x) {kernel_shape = [2, 3], pads = [0, 1, 1, 0], strides = [2, 3],
                      dilations = [2, 1], ceil_mode = 1} : ?
  })",
                {x});
}

TEST(SpatialLower, MaxPoolIntegerAndDynamicDims) {
  expectMatches(R"(graph @g(%x: u8[1, 2, 6, 6]) -> (%y) {
    %y = MaxPool(%x) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : ?
  })",
                {randomTensor(DType::U8, {1, 2, 6, 6}, 5, 0, 255)});
  std::string dyn = R"(graph @g(%x: f32[N, 3, H, W]) -> (%y, %i) {
    symbol N in [1, 8]
    symbol H in [3, 64]
    symbol W in [3, 64]
    %y, %i = MaxPool(%x) {kernel_shape = [3, 2], pads = [1, 0, 1, 1], strides = [2, 2],
                          ceil_mode = 1} : ?
  })";
  expectMatches(dyn, {randomTensor(DType::F32, {2, 3, 7, 6}, 6)});
  expectMatches(dyn, {randomTensor(DType::F32, {1, 3, 4, 9}, 7)});
  std::string same = R"(graph @g(%x: f32[N, 2, H, 5]) -> (%y) {
    symbol H in [1, 64]
    %y = MaxPool(%x) {kernel_shape = [3, 3], strides = [2, 2], auto_pad = "SAME_LOWER"} : ?
  })";
  expectMatches(same, {randomTensor(DType::F32, {2, 2, 8, 5}, 8)});
  expectMatches(same, {randomTensor(DType::F32, {1, 2, 5, 5}, 9)});
}

TEST(SpatialLower, AveragePoolCountIncludePadAndCeilMode) {
  for (int inc : {0, 1})
    for (int ceil : {0, 1})
      expectMatches(R"(graph @g(%x: f32[2, 2, 7, 6]) -> (%y) {
        %y = AveragePool(%x) {kernel_shape = [3, 2], pads = [1, 1, 2, 0], strides = [2, 2],
                              count_include_pad = )" +
                        std::to_string(inc) + ", ceil_mode = " + std::to_string(ceil) + R"(} : ?
      })",
                    {randomTensor(DType::F32, {2, 2, 7, 6}, 10 + uint32_t(inc * 2 + ceil))});
}

TEST(SpatialLower, AveragePoolDilationsAutoPadAndDynamic) {
  expectMatches(R"(graph @g(%x: f32[1, 3, 9, 8]) -> (%y) {
    %y = AveragePool(%x) {kernel_shape = [3, 3], dilations = [2, 2], pads = [2, 1, 2, 1],
                          count_include_pad = 1} : ?
  })",
                {randomTensor(DType::F32, {1, 3, 9, 8}, 20)});
  std::string dyn = R"(graph @g(%x: f32[N, 2, H, W]) -> (%y) {
    symbol H in [1, 64]
    symbol W in [1, 64]
    %y = AveragePool(%x) {kernel_shape = [3, 3], strides = [2, 2], auto_pad = "SAME_UPPER"} : ?
  })";
  expectMatches(dyn, {randomTensor(DType::F32, {2, 2, 7, 4}, 21)});
  expectMatches(dyn, {randomTensor(DType::F32, {1, 2, 2, 9}, 22)});
}

TEST(SpatialLower, LpPool) {
  for (int p : {1, 2, 3})
    expectMatches(R"(graph @g(%x: f32[2, 2, 6, 7]) -> (%y) {
      %y = LpPool(%x) {kernel_shape = [2, 3], pads = [1, 0, 0, 1], strides = [2, 2], p = )" +
                      std::to_string(p) + R"(} : ?
    })",
                  {randomTensor(DType::F32, {2, 2, 6, 7}, 30 + uint32_t(p))});
}

TEST(SpatialLower, GlobalPools) {
  for (const char *op : {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"}) {
    std::string text = std::string(R"(graph @g(%x: f32[N, 3, H, W]) -> (%y) {
      %y = )") + op + R"((%x) {} : ?
    })";
    expectMatches(text, {randomTensor(DType::F32, {2, 3, 4, 5}, 40)});
    expectMatches(text, {randomTensor(DType::F32, {1, 3, 1, 7}, 41)});
  }
  expectMatches(R"(graph @g(%x: f32[2, 3, 5]) -> (%y) {
    %y = GlobalLpPool(%x) {p = 3} : ?
  })",
                {randomTensor(DType::F32, {2, 3, 5}, 42)});
}

// --------------------------------------------------------------------------- image views

TEST(SpatialLower, DepthToSpaceAndSpaceToDepth) {
  for (const char *mode : {"DCR", "CRD"}) {
    expectMatches(std::string(R"(graph @g(%x: f32[N, 8, 2, 3]) -> (%y) {
      %y = DepthToSpace(%x) {blocksize = 2, mode = ")") +
                      mode + R"("} : ?
    })",
                  {randomTensor(DType::F32, {2, 8, 2, 3}, 50)});
    expectMatches(std::string(R"(graph @g(%x: i64[N, 3, 4, 6]) -> (%y) {
      %y = SpaceToDepth(%x) {blocksize = 2, mode = ")") +
                      mode + R"("} : ?
    })",
                  {randomTensor(DType::I64, {2, 3, 4, 6}, 51, -100, 100)});
  }
}

// ---------------------------------------------------------------------------------- Resize

std::string resizeGraph(const std::string &shape, const std::string &scales,
                        const std::string &attrs, const std::string &dtype = "f32") {
  return "graph @g(%x: " + dtype + "[" + shape + "]) -> (%y) {\n  %s = constant " + scales +
         "\n  %y = Resize(%x, _, %s) {" + attrs + "} : ?\n}";
}

TEST(SpatialLower, ResizeNearestModes) {
  for (const char *nm : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"})
    for (const char *cm : {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                           "half_pixel_symmetric"})
      for (const char *sc : {"f32[4] [1, 1, 2.5, 1.75]", "f32[4] [1, 1, 0.6, 0.5]"})
        expectMatches(resizeGraph("1, 2, 4, 5", sc,
                                  std::string("mode = \"nearest\", nearest_mode = \"") + nm +
                                      "\", coordinate_transformation_mode = \"" + cm + "\""),
                      {randomTensor(DType::F32, {1, 2, 4, 5}, 60)});
}

TEST(SpatialLower, ResizeLinearAndCubicCoordinateModes) {
  for (const char *mode : {"linear", "cubic"})
    for (const char *cm : {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                           "half_pixel_symmetric"})
      for (const char *sc : {"f32[4] [1, 1, 2.5, 1.5]", "f32[4] [1, 1, 0.5, 0.8]"})
        expectMatches(resizeGraph("1, 2, 4, 5", sc,
                                  std::string("mode = \"") + mode +
                                      "\", coordinate_transformation_mode = \"" + cm + "\""),
                      {randomTensor(DType::F32, {1, 2, 4, 5}, 61)});
}

TEST(SpatialLower, ResizeCubicExcludeOutsideAndCoefficient) {
  expectMatches(resizeGraph("1, 1, 5, 4", "f32[4] [1, 1, 1.6, 2]",
                            "mode = \"cubic\", exclude_outside = 1, cubic_coeff_a = -0.5"),
                {randomTensor(DType::F32, {1, 1, 5, 4}, 62)});
}

TEST(SpatialLower, ResizeAntialias) {
  for (const char *mode : {"linear", "cubic"})
    expectMatches(resizeGraph("1, 2, 9, 8", "f32[4] [1, 1, 0.45, 0.6]",
                              std::string("mode = \"") + mode + "\", antialias = 1"),
                  {randomTensor(DType::F32, {1, 2, 9, 8}, 63)});
}

TEST(SpatialLower, ResizeSizesAxesPolicyAndRoi) {
  expectMatches(R"(graph @g(%x: f32[2, 3, 4, 5]) -> (%y) {
    %sz = constant i64[2] [7, 3]
    %y = Resize(%x, _, _, %sz) {mode = "linear", axes = [3, 2]} : ?
  })",
                {randomTensor(DType::F32, {2, 3, 4, 5}, 64)});
  for (const char *policy : {"not_larger", "not_smaller"})
    expectMatches(std::string(R"(graph @g(%x: f32[1, 1, 4, 6]) -> (%y) {
      %sz = constant i64[2] [7, 8]
      %y = Resize(%x, _, _, %sz) {mode = "cubic", axes = [2, 3], keep_aspect_ratio_policy = ")") +
                      policy + R"("} : ?
    })",
                  {randomTensor(DType::F32, {1, 1, 4, 6}, 65)});
  for (const char *mode : {"nearest", "linear"})
    expectMatches(std::string(R"(graph @g(%x: f32[1, 1, 5, 6]) -> (%y) {
      %roi = constant f32[8] [0, 0, 0.2, -0.3, 1, 1, 0.9, 1.2]
      %sz = constant i64[4] [1, 1, 4, 7]
      %y = Resize(%x, %roi, _, %sz) {mode = ")") +
                      mode + R"(", coordinate_transformation_mode = "tf_crop_and_resize",
                              extrapolation_value = 7.5} : ?
    })",
                  {randomTensor(DType::F32, {1, 1, 5, 6}, 66)});
}

TEST(SpatialLower, ResizeIntegerAndDynamicBatch) {
  expectMatches(R"(graph @g(%x: u8[1, 1, 4, 4]) -> (%y) {
    %s = constant f32[4] [1, 1, 1.5, 2.25]
    %y = Resize(%x, _, %s) {mode = "cubic"} : ?
  })",
                {randomTensor(DType::U8, {1, 1, 4, 4}, 67, 0, 255)});
  std::string dyn = R"(graph @g(%x: f32[N, 2, H, 3]) -> (%y) {
    symbol H in [1, 16]
    %s = constant f32[4] [1, 1, 2, 1.5]
    %y = Resize(%x, _, %s) {mode = "linear"} : ?
  })";
  expectMatches(dyn, {randomTensor(DType::F32, {2, 2, 3, 3}, 68)});
  expectMatches(dyn, {randomTensor(DType::F32, {1, 2, 5, 3}, 69)});
}

// ------------------------------------------------------------------------- RNN, GRU, LSTM

TEST(SpatialLower, RnnDirectionsActivationsClip) {
  // X [seq 3, batch 2, input 4], hidden 3.
  for (const char *dir : {"forward", "reverse", "bidirectional"}) {
    int64_t d = std::string(dir) == "bidirectional" ? 2 : 1;
    std::string ds = std::to_string(d);
    std::string text = R"(graph @g(%x: f32[3, 2, 4], %w: f32[)" + ds + R"(, 3, 4], %r: f32[)" + ds +
                       R"(, 3, 3], %b: f32[)" + ds + R"(, 6], %h0: f32[)" + ds +
                       R"(, 2, 3]) -> (%y, %yh) {
      %y, %yh = RNN(%x, %w, %r, %b, _, %h0) {hidden_size = 3, direction = ")" +
                       dir + R"(", clip = 0.9} : ?
    })";
    expectMatches(text,
                  {randomTensor(DType::F32, {3, 2, 4}, 70), randomTensor(DType::F32, {d, 3, 4}, 71),
                   randomTensor(DType::F32, {d, 3, 3}, 72), randomTensor(DType::F32, {d, 6}, 73),
                   randomTensor(DType::F32, {d, 2, 3}, 74)});
  }
  expectMatches(R"(graph @g(%x: f32[2, 3, 2], %w: f32[2, 2, 2], %r: f32[2, 2, 2]) -> (%y, %yh) {
    %y, %yh = RNN(%x, %w, %r) {hidden_size = 2, direction = "bidirectional", layout = 1,
                               activations = ["LeakyRelu", "HardSigmoid"],
                               activation_alpha = [0.2, 0.3], activation_beta = [0.0, 0.4]} : ?
  })",
                {randomTensor(DType::F32, {2, 3, 2}, 75), randomTensor(DType::F32, {2, 2, 2}, 76),
                 randomTensor(DType::F32, {2, 2, 2}, 77)});
}

TEST(SpatialLower, GruLinearBeforeResetAndSequenceLens) {
  for (int lbr : {0, 1})
    for (const char *dir : {"forward", "reverse", "bidirectional"}) {
      int64_t d = std::string(dir) == "bidirectional" ? 2 : 1;
      std::string ds = std::to_string(d);
      std::string text = R"(graph @g(%x: f32[4, N, 3], %w: f32[)" + ds + R"(, 6, 3], %r: f32[)" +
                         ds + R"(, 6, 2], %b: f32[)" + ds + R"(, 12], %len: i32[N]) -> (%y, %yh) {
        %y, %yh = GRU(%x, %w, %r, %b, %len) {hidden_size = 2, direction = ")" +
                         dir + R"(", linear_before_reset = )" + std::to_string(lbr) + R"(} : ?
      })";
      expectMatches(
          text, {randomTensor(DType::F32, {4, 3, 3}, 80), randomTensor(DType::F32, {d, 6, 3}, 81),
                 randomTensor(DType::F32, {d, 6, 2}, 82), randomTensor(DType::F32, {d, 12}, 83),
                 ints(DType::I32, {3}, {4, 2, 0})});
    }
}

TEST(SpatialLower, LstmPeepholesInitialStatesLayoutInputForget) {
  for (int layout : {0, 1})
    for (const char *dir : {"forward", "bidirectional"}) {
      int64_t d = std::string(dir) == "bidirectional" ? 2 : 1;
      std::string ds = std::to_string(d);
      Shape xs = layout ? Shape{2, 3, 3} : Shape{3, 2, 3};
      Shape hs = layout ? Shape{2, d, 2} : Shape{d, 2, 2};
      auto shp = [](const Shape &s) {
        std::string r;
        for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
        return r;
      };
      std::string text = "graph @g(%x: f32[" + shp(xs) + "], %w: f32[" + ds + ", 8, 3], %r: f32[" +
                         ds + ", 8, 2], %b: f32[" + ds + ", 16], %h0: f32[" + shp(hs) +
                         "], %c0: f32[" + shp(hs) + "], %p: f32[" + ds +
                         R"(, 6]) -> (%y, %yh, %yc) {
        %y, %yh, %yc = LSTM(%x, %w, %r, %b, _, %h0, %c0, %p) {hidden_size = 2, layout = )" +
                         std::to_string(layout) + R"(, direction = ")" + dir + R"(", clip = 2.5} : ?
      })";
      expectMatches(text,
                    {randomTensor(DType::F32, xs, 90), randomTensor(DType::F32, {d, 8, 3}, 91),
                     randomTensor(DType::F32, {d, 8, 2}, 92), randomTensor(DType::F32, {d, 16}, 93),
                     randomTensor(DType::F32, hs, 94), randomTensor(DType::F32, hs, 95),
                     randomTensor(DType::F32, {d, 6}, 96)});
    }
  expectMatches(
      R"(graph @g(%x: f32[2, 1, 2], %w: f32[1, 8, 2], %r: f32[1, 8, 2], %len: i32[1]) -> (%y, %yh, %yc) {
    %y, %yh, %yc = LSTM(%x, %w, %r, _, %len) {hidden_size = 2, input_forget = 1, direction = "reverse",
                                             activations = ["Sigmoid", "Softsign", "Elu"]} : ?
  })",
      {randomTensor(DType::F32, {2, 1, 2}, 97), randomTensor(DType::F32, {1, 8, 2}, 98),
       randomTensor(DType::F32, {1, 8, 2}, 99), ints(DType::I32, {1}, {1})});
}

TEST(SpatialLower, RecurrentDynamicSequenceLength) {
  // The sequence length is a symbol: the recurrence is a loop of the extern, bounded at run
  // time (it was refused while the lowering unrolled the steps).
  std::string rnn = R"(graph @g(%x: f32[T, 2, 3], %w: f32[1, 2, 3], %r: f32[1, 2, 2]) -> (%y, %yh) {
    %y, %yh = RNN(%x, %w, %r) {hidden_size = 2} : ?
  })";
  for (int64_t t : {1, 5})
    expectMatches(rnn, {randomTensor(DType::F32, {t, 2, 3}, 100 + uint32_t(t)),
                        randomTensor(DType::F32, {1, 2, 3}, 102),
                        randomTensor(DType::F32, {1, 2, 2}, 103)});
  std::string gru = R"(graph @g(%x: f32[B, T, 3], %w: f32[2, 6, 3], %r: f32[2, 6, 2]) -> (%y, %yh) {
    %y, %yh = GRU(%x, %w, %r) {hidden_size = 2, layout = 1, direction = "bidirectional"} : ?
  })";
  for (int64_t t : {2, 7})
    expectMatches(gru, {randomTensor(DType::F32, {3, t, 3}, 110 + uint32_t(t)),
                        randomTensor(DType::F32, {2, 6, 3}, 112),
                        randomTensor(DType::F32, {2, 6, 2}, 113)});
}

TEST(SpatialLower, RecurrentEveryKernelPath) {
  // Sizes past the simd width with odd tails (hidden 19), every cell and direction, partial
  // sequence lengths (0, 1, full), through each path of the recurrence kernel: the AVX2 and the
  // portable build, serial, and on threads (directions and batch slices as separate tasks, with
  // fewer threads than tasks), the per-step product on register tiles and through BLAS (hidden
  // 19: whole tiles and a tail of columns; 5 rows: a tile of 4 and one of 1); the fused loops of
  // the default activations and the general per-gate passes of the others; f64 too.
  struct Case {
    std::string text;
    std::vector<Tensor> inputs;
  };
  auto t = [](Shape s, uint32_t seed) { return randomTensor(DType::F32, std::move(s), seed); };
  std::vector<Case> cases;
  for (const char *dir : {"forward", "reverse", "bidirectional"}) {
    int64_t d = std::string(dir) == "bidirectional" ? 2 : 1;
    std::string ds = std::to_string(d);
    cases.push_back({R"(graph @g(%x: f32[6, 5, 7], %w: f32[)" + ds + R"(, 19, 7], %r: f32[)" + ds +
                         R"(, 19, 19], %b: f32[)" + ds + R"(, 38], %len: i32[5]) -> (%y, %yh) {
      %y, %yh = RNN(%x, %w, %r, %b, %len) {hidden_size = 19, direction = ")" +
                         dir + R"(", clip = 1.5} : ?
    })",
                     {t({6, 5, 7}, 130), t({d, 19, 7}, 131), t({d, 19, 19}, 132), t({d, 38}, 133),
                      ints(DType::I32, {5}, {6, 0, 3, 6, 1})}});
    for (int lbr : {0, 1})
      cases.push_back(
          {R"(graph @g(%x: f32[6, 5, 7], %w: f32[)" + ds + R"(, 57, 7], %r: f32[)" + ds +
               R"(, 57, 19], %b: f32[)" + ds + R"(, 114], %len: i32[5], %h0: f32[)" + ds +
               R"(, 5, 19]) -> (%y, %yh) {
        %y, %yh = GRU(%x, %w, %r, %b, %len, %h0) {hidden_size = 19, direction = ")" +
               dir + R"(", linear_before_reset = )" + std::to_string(lbr) + R"(} : ?
      })",
           {t({6, 5, 7}, 134), t({d, 57, 7}, 135), t({d, 57, 19}, 136), t({d, 114}, 137),
            ints(DType::I32, {5}, {3, 6, 0, 1, 6}), t({d, 5, 19}, 138)}});
    cases.push_back({R"(graph @g(%x: f32[5, 6, 7], %w: f32[)" + ds + R"(, 76, 7], %r: f32[)" + ds +
                         R"(, 76, 19], %b: f32[)" + ds + R"(, 152], %len: i32[5], %h0: f32[5, )" +
                         ds + R"(, 19], %c0: f32[5, )" + ds + R"(, 19], %p: f32[)" + ds +
                         R"(, 57]) -> (%y, %yh, %yc) {
      %y, %yh, %yc = LSTM(%x, %w, %r, %b, %len, %h0, %c0, %p) {hidden_size = 19, layout = 1,
                                                              direction = ")" +
                         dir + R"(", clip = 3.0} : ?
    })",
                     {t({5, 6, 7}, 139), t({d, 76, 7}, 140), t({d, 76, 19}, 141), t({d, 152}, 142),
                      ints(DType::I32, {5}, {6, 1, 6, 0, 4}), t({5, d, 19}, 143),
                      t({5, d, 19}, 144), t({d, 57}, 145)}});
  }
  cases.push_back(
      {R"(graph @g(%x: f32[6, 5, 7], %w: f32[1, 76, 7], %r: f32[1, 76, 19]) -> (%y, %yh, %yc) {
    %y, %yh, %yc = LSTM(%x, %w, %r) {hidden_size = 19, input_forget = 1,
                                     activations = ["HardSigmoid", "Relu", "Softsign"]} : ?
  })",
       {t({6, 5, 7}, 146), t({1, 76, 7}, 147), t({1, 76, 19}, 148)}});
  cases.push_back(
      {R"(graph @g(%x: f32[6, 5, 7], %w: f32[2, 57, 7], %r: f32[2, 57, 19]) -> (%y, %yh) {
    %y, %yh = GRU(%x, %w, %r) {hidden_size = 19, direction = "bidirectional", clip = 0.8,
                               activations = ["HardSigmoid", "Softsign", "Sigmoid", "Relu"]} : ?
  })",
       {t({6, 5, 7}, 152), t({2, 57, 7}, 153), t({2, 57, 19}, 154)}});
  cases.push_back(
      {R"(graph @g(%x: f64[6, 5, 7], %w: f64[2, 57, 7], %r: f64[2, 57, 19]) -> (%y, %yh) {
    %y, %yh = GRU(%x, %w, %r) {hidden_size = 19, direction = "bidirectional"} : ?
  })",
       {randomTensor(DType::F64, {6, 5, 7}, 149), randomTensor(DType::F64, {2, 57, 7}, 150),
        randomTensor(DType::F64, {2, 57, 19}, 151)}});
  const int threads = omp_get_max_threads();
  for (cpu::RecurrentIsa isa : {cpu::RecurrentIsa::Avx2, cpu::RecurrentIsa::Portable})
    for (int parallel : {0, 2, 3})
      for (bool tiles : {true, false}) {
        SCOPED_TRACE("isa " + std::to_string(int(isa)) + ", threads " + std::to_string(parallel) +
                     (tiles ? ", register tiles" : ", BLAS"));
        cpu::setRecurrentIsaLimit(isa);
        int64_t before = cpu::setRecurrentParallelWork(parallel ? 0 : INT64_MAX);
        int64_t small = cpu::setRecurrentSmallProduct(tiles ? INT64_MAX : -1);
        if (parallel) omp_set_num_threads(parallel);
        for (const Case &c : cases) expectMatches(c.text, c.inputs);
        omp_set_num_threads(threads);
        cpu::setRecurrentSmallProduct(small);
        cpu::setRecurrentParallelWork(before);
        cpu::setRecurrentIsaLimit(cpu::RecurrentIsa::Avx2);
      }
}

TEST(SpatialLower, RecurrentSequenceLengthOutOfRangeIsReported) {
  // sequence_lens past the sequence length: the extern's run-time check, with the op's name.
  auto g = parseUntyped(
      R"(graph @g(%x: f32[3, 2, 1], %w: f32[1, 8, 1], %r: f32[1, 8, 2], %len: i32[2]) -> (%y) {
    %y = LSTM(%x, %w, %r, _, %len) {hidden_size = 2} : ?
  })");
  ASSERT_TRUE(g.ok()) << g.error().render();
  auto prog = loop::lowerGraph(*g);
  ASSERT_TRUE(prog.ok()) << prog.error().render();
  auto r = loop::evaluateLoopProgram(
      *prog, {randomTensor(DType::F32, {3, 2, 1}, 120), randomTensor(DType::F32, {1, 8, 1}, 121),
              randomTensor(DType::F32, {1, 8, 2}, 122), ints(DType::I32, {2}, {3, 4})});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(
      r.error().render().find("lstm: sequence length 4 of batch entry 1 is out of range [0, 3]"),
      std::string::npos)
      << r.error().render();
}

// ------------------------------------------------------------------ rotary, grids, Col2Im

TEST(SpatialLower, RotaryEmbedding) {
  for (int inter : {0, 1}) {
    // Rank 4 with position ids and a partial rotary dim.
    expectMatches(
        R"(graph @g(%x: f32[2, 2, 3, 8], %c: f32[5, 3], %s: f32[5, 3], %p: i64[2, 3]) -> (%y) {
      %y = RotaryEmbedding(%x, %c, %s, %p) {rotary_embedding_dim = 6, interleaved = )" +
            std::to_string(inter) + R"(} : ?
    })",
        {randomTensor(DType::F32, {2, 2, 3, 8}, 100), randomTensor(DType::F32, {5, 3}, 101),
         randomTensor(DType::F32, {5, 3}, 102), ints(DType::I64, {2, 3}, {0, 4, 2, 1, 3, 3})});
    // Rank 3 without position ids: caches [batch, seq, half].
    expectMatches(R"(graph @g(%x: f32[2, 3, 8], %c: f32[2, 3, 2], %s: f32[2, 3, 2]) -> (%y) {
      %y = RotaryEmbedding(%x, %c, %s) {num_heads = 2, interleaved = )" +
                      std::to_string(inter) + R"(} : ?
    })",
                  {randomTensor(DType::F32, {2, 3, 8}, 103),
                   randomTensor(DType::F32, {2, 3, 2}, 104),
                   randomTensor(DType::F32, {2, 3, 2}, 105)});
  }
}

TEST(SpatialLower, AffineGrid) {
  for (int align : {0, 1}) {
    expectMatches(R"(graph @g(%t: f32[2, 2, 3]) -> (%y) {
      %sz = constant i64[4] [2, 3, 4, 5]
      %y = AffineGrid(%t, %sz) {align_corners = )" +
                      std::to_string(align) + R"(} : ?
    })",
                  {randomTensor(DType::F32, {2, 2, 3}, 110)});
    expectMatches(R"(graph @g(%t: f32[1, 3, 4]) -> (%y) {
      %sz = constant i64[5] [1, 1, 2, 3, 1]
      %y = AffineGrid(%t, %sz) {align_corners = )" +
                      std::to_string(align) + R"(} : ?
    })",
                  {randomTensor(DType::F32, {1, 3, 4}, 111)});
  }
}

TEST(SpatialLower, Col2Im) {
  // image 5x6, block 2x3, pads, strides 2x1, dilations 1x2: 3x3 blocks (L = 9).
  expectMatches(R"(graph @g(%x: f32[2, 12, 9]) -> (%y) {
    %img = constant i64[2] [5, 6]
    %blk = constant i64[2] [2, 3]
    %y = Col2Im(%x, %img, %blk) {pads = [1, 0, 0, 1], strides = [2, 1], dilations = [1, 2]} : ?
  })",
                {randomTensor(DType::F32, {2, 12, 9}, 120)});
}

TEST(SpatialLower, GridSample) {
  for (const char *mode : {"linear", "nearest", "cubic"})
    for (const char *pad : {"zeros", "border", "reflection"})
      for (int align : {0, 1})
        expectMatches(std::string(R"(graph @g(%x: f32[2, 2, 4, 5], %gr: f32[2, 3, 2, 2]) -> (%y) {
          %y = GridSample(%x, %gr) {mode = ")") +
                          mode + "\", padding_mode = \"" + pad +
                          "\", align_corners = " + std::to_string(align) + R"(} : ?
        })",
                      {randomTensor(DType::F32, {2, 2, 4, 5}, 130),
                       randomTensor(DType::F32, {2, 3, 2, 2}, 131, -1.6, 1.6)});
}

TEST(SpatialLower, RoiPools) {
  expectMatches(
      R"(graph @g(%x: f32[2, 2, 6, 7], %rois: f32[3, 5]) -> (%y) {
    %y = MaxRoiPool(%x, %rois) {pooled_shape = [2, 3], spatial_scale = 0.5} : ?
  })",
      {randomTensor(DType::F32, {2, 2, 6, 7}, 140),
       Tensor::fromDoubles(DType::F32, {3, 5}, {0, 1, 1, 9, 7, 1, 0, 2, 5, 11, 1, 4, 4, 4.9, 5})});
  for (const char *mode : {"avg", "max"})
    for (const char *ctm : {"half_pixel", "output_half_pixel"})
      expectMatches(
          std::string(R"(graph @g(%x: f32[2, 2, 6, 7], %rois: f32[3, 4], %bi: i64[3]) -> (%y) {
        %y = RoiAlign(%x, %rois, %bi) {output_height = 2, output_width = 3, sampling_ratio = 2,
                                       spatial_scale = 0.5, mode = ")") +
              mode + "\", coordinate_transformation_mode = \"" + ctm + R"("} : ?
      })",
          {randomTensor(DType::F32, {2, 2, 6, 7}, 141),
           Tensor::fromDoubles(DType::F32, {3, 4}, {1, 1, 9, 7, 0.5, 2, 14, 12, -3, 4, 4.9, 13}),
           ints(DType::I64, {3}, {0, 1, 1})});
}

TEST(SpatialLower, MaxUnpoolOfMaxPoolIndices) {
  expectMatches(R"(graph @g(%x: f32[2, 2, 4, 6]) -> (%u, %v) {
    %y, %i = MaxPool(%x) {kernel_shape = [2, 2], strides = [2, 2]} : ?
    %u = MaxUnpool(%y, %i) {kernel_shape = [2, 2], strides = [2, 2]} : ?
    %os = constant i64[4] [2, 2, 5, 7]
    %v = MaxUnpool(%y, %i, %os) {kernel_shape = [2, 2], strides = [2, 2]} : ?
  })",
                {randomTensor(DType::F32, {2, 2, 4, 6}, 150)});
}

TEST(SpatialLower, PoolsWithNaNHalfAndInt8) {
  Tensor x = randomTensor(DType::F32, {1, 2, 5, 5}, 160);
  x.setDouble(7, std::nan(""));
  x.setDouble(30, std::nan(""));
  expectMatches(R"(graph @g(%x: f32[1, 2, 5, 5]) -> (%y, %i, %m) {
    %y, %i = MaxPool(%x) {kernel_shape = [2, 2], pads = [1, 1, 0, 0]} : ?
    %m = GlobalMaxPool(%x) {} : ?
  })",
                {x});
  expectMatches(R"(graph @g(%x: f16[2, 2, 6, 5]) -> (%y, %z) {
    %y = AveragePool(%x) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : ?
    %z = MaxPool(%x) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : ?
  })",
                {randomTensor(DType::F16, {2, 2, 6, 5}, 161)}, 2e-3);
  expectMatches(R"(graph @g(%x: i8[1, 2, 5, 6]) -> (%y) {
    %y = MaxPool(%x) {kernel_shape = [2, 3], pads = [1, 1, 1, 1], strides = [2, 2], ceil_mode = 1} : ?
  })",
                {randomTensor(DType::I8, {1, 2, 5, 6}, 162, -128, 127)});
  std::string lp = R"(graph @g(%x: f32[N, 2, H, 6]) -> (%y) {
    symbol H in [2, 32]
    %y = LpPool(%x) {kernel_shape = [2, 2], strides = [2, 2], pads = [1, 0, 0, 1], p = 3} : ?
  })";
  expectMatches(lp, {randomTensor(DType::F32, {1, 2, 5, 6}, 163)});
  expectMatches(lp, {randomTensor(DType::F32, {2, 2, 2, 6}, 164)});
}

TEST(SpatialLower, ResizeMoreCases) {
  // Trilinear over three axes, sizes known only through symbols (scales computed at run time).
  std::string dyn = R"(graph @g(%x: f32[1, 2, D, H, 3]) -> (%y) {
    symbol D in [1, 8]
    symbol H in [1, 8]
    %sz = symconst i64[3] [2*D, H + 1, 5]
    %y = Resize(%x, _, _, %sz) {mode = "linear", axes = [2, 3, 4], coordinate_transformation_mode = "align_corners"} : ?
  })";
  expectMatches(dyn, {randomTensor(DType::F32, {1, 2, 2, 3, 3}, 170)});
  expectMatches(dyn, {randomTensor(DType::F32, {1, 2, 3, 1, 3}, 171)});
  // Antialias with sizes; an f16 input; nearest on integers with extrapolation.
  expectMatches(R"(graph @g(%x: f32[1, 1, 10, 7]) -> (%y) {
    %sz = constant i64[2] [4, 3]
    %y = Resize(%x, _, _, %sz) {mode = "cubic", antialias = 1, axes = [2, 3], exclude_outside = 1} : ?
  })",
                {randomTensor(DType::F32, {1, 1, 10, 7}, 172)});
  expectMatches(resizeGraph("1, 3, 4, 4", "f32[4] [1, 1, 1.5, 0.75]", "mode = \"linear\"", "f16"),
                {randomTensor(DType::F16, {1, 3, 4, 4}, 173)}, 2e-3);
  expectMatches(R"(graph @g(%x: i32[1, 1, 4, 5]) -> (%y) {
    %roi = constant f32[8] [0, 0, -0.2, 0.1, 1, 1, 1.3, 0.8]
    %s = constant f32[4] [1, 1, 1.5, 1.4]
    %y = Resize(%x, %roi, %s) {mode = "nearest", coordinate_transformation_mode = "tf_crop_and_resize", extrapolation_value = -3.6} : ?
  })",
                {randomTensor(DType::I32, {1, 1, 4, 5}, 174, -50, 50)});
  // Identity axes are copies.
  expectMatches(resizeGraph("2, 3, 4, 5", "f32[4] [1, 1, 1, 1]", "mode = \"cubic\""),
                {randomTensor(DType::F32, {2, 3, 4, 5}, 175)});
}

// Resize on the CPU (LowerOptions::cpuExterns): nearest and linear f32 Resize of the two
// innermost axes is one call of coil_cpu_resize2d_f32; everything else lowers generically.

loop::LowerOptions cpuExterns() {
  loop::LowerOptions lo;
  lo.cpuExterns = true;
  return lo;
}

/// The extern functions the lowering of `text` calls.
std::string externsOf(const std::string &text, const loop::LowerOptions &lo) {
  auto g = parseUntyped(text);
  if (!g.ok()) return "parse: " + g.error().render();
  auto prog = loop::lowerGraph(*g, lo);
  if (!prog.ok()) return "lower: " + prog.error().render();
  std::string names;
  for (const loop::Node &n : prog->nodes)
    if (const auto *e = std::get_if<loop::ExternNode>(&n.kind)) names += e->function + " ";
  return names;
}

TEST(SpatialLower, ResizeCpuExternModes) {
  for (const char *mode : {"nearest", "linear"})
    for (const char *cm : {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                           "half_pixel_symmetric"})
      for (const char *nm : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"})
        for (const char *sc : {"f32[4] [1, 1, 2.5, 1.75]", "f32[4] [1, 1, 0.6, 0.5]",
                               "f32[4] [1, 1, 2, 1]", "f32[4] [1, 1, 1, 0.4]"}) {
          if (std::string(mode) == "linear" && std::string(nm) != "round_prefer_floor") continue;
          std::string text = resizeGraph("2, 3, 4, 5", sc,
                                         std::string("mode = \"") + mode +
                                             "\", coordinate_transformation_mode = \"" + cm +
                                             "\", nearest_mode = \"" + nm + "\"");
          EXPECT_EQ(externsOf(text, cpuExterns()), "coil_cpu_resize2d_f32 ") << text;
          EXPECT_EQ(externsOf(text, {}), "") << text;
          expectMatches(text, {randomTensor(DType::F32, {2, 3, 4, 5}, 300)}, 1e-5, cpuExterns());
        }
}

TEST(SpatialLower, ResizeCpuExternSymbolicSizes) {
  // The segmentation heads' form: sizes [batch, C, H, W] taken from Shape of the image; the
  // batch and channel axes are identities, H and W scales are run-time ratios of symbols.
  std::string text =
      R"(graph @g(%img: f32[N, 1, H, W], %x: f32[N, 3, (H + 1) // 2, (W + 1) // 4]) -> (%y) {
    symbol N in [1, 8]
    symbol H in [1, 64]
    symbol W in [1, 64]
    %sz = symconst i64[4] [N, 3, H, W]
    %y = Resize(%x, _, _, %sz) {mode = "linear"} : ?
  })";
  EXPECT_EQ(externsOf(text, cpuExterns()), "coil_cpu_resize2d_f32 ");
  for (auto [n, h, w] : {std::tuple<int64_t, int64_t, int64_t>{2, 7, 9}, {1, 32, 32}, {3, 1, 5}})
    expectMatches(text,
                  {randomTensor(DType::F32, {n, 1, h, w}, 300),
                   randomTensor(DType::F32, {n, 3, (h + 1) / 2, (w + 1) / 4}, 301)},
                  1e-5, cpuExterns());
  // Only W resized (H given as its own size); a rank-3 input; the threaded path (2^17 outputs).
  std::string onlyW = R"(graph @g(%x: f32[2, H, 6]) -> (%y) {
    symbol H in [1, 64]
    %sz = symconst i64[3] [2, H, 13]
    %y = Resize(%x, _, _, %sz) {mode = "linear", coordinate_transformation_mode = "align_corners"} : ?
  })";
  EXPECT_EQ(externsOf(onlyW, cpuExterns()), "coil_cpu_resize2d_f32 ");
  expectMatches(onlyW, {randomTensor(DType::F32, {2, 5, 6}, 302)}, 1e-5, cpuExterns());
  std::string big = resizeGraph("2, 4, 64, 64", "f32[4] [1, 1, 2, 2]", "mode = \"linear\"");
  EXPECT_EQ(externsOf(big, cpuExterns()), "coil_cpu_resize2d_f32 ");
  expectMatches(big, {randomTensor(DType::F32, {2, 4, 64, 64}, 303)}, 1e-5, cpuExterns());
  std::string bigNearest = resizeGraph("2, 4, 64, 64", "f32[4] [1, 1, 2, 2]", "mode = \"nearest\"");
  expectMatches(bigNearest, {randomTensor(DType::F32, {2, 4, 64, 64}, 304)}, 0, cpuExterns());
}

TEST(SpatialLower, ResizeCpuExternNotTaken) {
  // Forms the extern does not cover lower as before, with the option on.
  for (const std::string &text :
       {resizeGraph("1, 2, 4, 5", "f32[4] [1, 1, 2.5, 1.5]", "mode = \"cubic\""),
        resizeGraph("1, 2, 9, 8", "f32[4] [1, 1, 0.45, 0.6]", "mode = \"linear\", antialias = 1"),
        resizeGraph("1, 2, 4, 5", "f32[4] [1, 2, 2, 1]", "mode = \"linear\""),
        resizeGraph("1, 3, 4, 4", "f32[4] [1, 1, 1.5, 0.75]", "mode = \"linear\"", "f16")}) {
    EXPECT_EQ(externsOf(text, cpuExterns()), "") << text;
    bool half = text.find("f16[") != std::string::npos;
    expectMatches(text,
                  {randomTensor(half ? DType::F16 : DType::F32,
                                half                                     ? Shape{1, 3, 4, 4}
                                : text.find("9, 8") != std::string::npos ? Shape{1, 2, 9, 8}
                                                                         : Shape{1, 2, 4, 5},
                                305)},
                  half ? 2e-3 : 1e-4, cpuExterns());
  }
}

TEST(SpatialLower, ResizeCpuExternRandomSweep) {
  std::mt19937 rng(4242);
  const char *coords[] = {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                          "half_pixel_symmetric"};
  const char *nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  int ran = 0;
  for (int it = 0; it < 60; ++it) {
    std::string mode = rng() % 2 ? "linear" : "nearest";
    int64_t h = 1 + int64_t(rng() % 7), w = 1 + int64_t(rng() % 7);
    double sh = double(2 + rng() % 30) / 8, sw = double(2 + rng() % 30) / 8;
    if (std::floor(sh * double(h)) < 1 || std::floor(sw * double(w)) < 1) continue;
    std::string attrs = "mode = \"" + mode + "\", coordinate_transformation_mode = \"" +
                        coords[rng() % 5] + "\", nearest_mode = \"" + nearest[rng() % 4] + "\"";
    std::ostringstream sc;
    sc << "f32[4] [1, 1, " << sh << ", " << sw << "]";
    std::string text =
        resizeGraph("2, 3, " + std::to_string(h) + ", " + std::to_string(w), sc.str(), attrs);
    EXPECT_EQ(externsOf(text, cpuExterns()), "coil_cpu_resize2d_f32 ") << text;
    expectMatches(text, {randomTensor(DType::F32, {2, 3, h, w}, uint32_t(400 + it))}, 1e-5,
                  cpuExterns());
    ++ran;
  }
  EXPECT_GE(ran, 40);
}

TEST(SpatialLower, UnsupportedFormsAreReported) {
  std::string err = lowerError(R"(graph @g(%x: f32[1, 1, 4, 4], %s: f32[4]) -> (%y) {
    %y = Resize(%x, _, %s) {mode = "linear", antialias = 1, exclude_outside = 1} : f32[1, 1, A, B]
  })");
  EXPECT_NE(err.find("Resize with antialias and a scale known only at run time is not supported"),
            std::string::npos)
      << err;
  err = lowerError(R"(graph @g(%x: f32[1, 2, 5, 5], %r: f32[2, 4], %b: i64[2]) -> (%y) {
    %y = RoiAlign(%x, %r, %b) {output_height = 2, output_width = 2} : ?
  })");
  EXPECT_NE(err.find("RoiAlign with sampling_ratio 0"), std::string::npos) << err;
}

TEST(SpatialLower, GridSample3dAndDynamicViews) {
  for (const char *mode : {"linear", "nearest"})
    expectMatches(std::string(R"(graph @g(%x: f32[1, 2, 3, 4, 3], %gr: f32[1, 2, 2, 3, 3]) -> (%y) {
      %y = GridSample(%x, %gr) {mode = ")") +
                      mode + R"(", padding_mode = "reflection"} : ?
    })",
                  {randomTensor(DType::F32, {1, 2, 3, 4, 3}, 180),
                   randomTensor(DType::F32, {1, 2, 2, 3, 3}, 181, -2.5, 2.5)});
  std::string d2s = R"(graph @g(%x: f32[N, 12, H, W]) -> (%y, %z) {
    %y = DepthToSpace(%x) {blocksize = 2, mode = "CRD"} : ?
    %z = SpaceToDepth(%y) {blocksize = 2} : ?
  })";
  expectMatches(d2s, {randomTensor(DType::F32, {1, 12, 2, 3}, 182)});
  expectMatches(d2s, {randomTensor(DType::F32, {2, 12, 3, 1}, 183)});
}

TEST(SpatialLower, MaxPoolIndicesAtNegativeInfinityNextToPadding) {
  // Every value -inf: the index is the first tap inside the input, never a padded one.
  Tensor x = Tensor::fromDoubles(DType::F32, {1, 1, 3, 4}, std::vector<double>(12, -INFINITY));
  x.setDouble(5, 2.0);
  expectMatches(R"(graph @g(%x: f32[1, 1, 3, 4]) -> (%y, %i) {
    %y, %i = MaxPool(%x) {kernel_shape = [3, 3], pads = [2, 2, 2, 2], strides = [2, 2]} : ?
  })",
                {x});
}

TEST(SpatialLower, RuntimeSizesAreReported) {
  std::string err = lowerError(R"(graph @g(%t: f32[1, 2, 3], %sz: i64[4]) -> (%y) {
    %y = AffineGrid(%t, %sz) {} : f32[a, b, c, 2]
  })");
  EXPECT_NE(err.find("AffineGrid whose output size 'grid_0' (in f32[grid_0, grid_1, grid_2, 2]) "
                     "depends on tensor data at run time is not supported by the compiler yet"),
            std::string::npos)
      << err;
}

TEST(SpatialLower, ResizeRandomSweep) {
  // Random modes, scales and shapes from a fixed seed.
  std::mt19937 rng(2024);
  const char *modes[] = {"nearest", "linear", "cubic"};
  const char *coords[] = {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                          "half_pixel_symmetric"};
  const char *nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  int ran = 0;
  for (int it = 0; it < 60; ++it) {
    std::string mode = modes[rng() % 3];
    int64_t h = 1 + int64_t(rng() % 6), w = 1 + int64_t(rng() % 6);
    // Scales that are exact in f32 (multiples of 1/8) so that the interpreter's and the
    // compiled coordinates agree bit for bit.
    double sh = double(2 + rng() % 22) / 8, sw = double(2 + rng() % 22) / 8;
    std::string attrs = "mode = \"" + mode + "\", coordinate_transformation_mode = \"" +
                        coords[rng() % 5] + "\", nearest_mode = \"" + nearest[rng() % 4] + "\"";
    if (mode != "nearest" && rng() % 3 == 0) attrs += ", antialias = 1";
    if (mode == "cubic" && rng() % 2) attrs += ", exclude_outside = 1, cubic_coeff_a = -0.5";
    std::ostringstream sc;
    sc << "f32[4] [1, 1, " << sh << ", " << sw << "]";
    std::string shape = "1, 2, " + std::to_string(h) + ", " + std::to_string(w);
    if (std::floor(sh * double(h)) < 1 || std::floor(sw * double(w)) < 1) continue;
    expectMatches(resizeGraph(shape, sc.str(), attrs),
                  {randomTensor(DType::F32, {1, 2, h, w}, uint32_t(200 + it))});
    ++ran;
  }
  EXPECT_GE(ran, 40);
}

TEST(SpatialLower, PoolRandomSweep) {
  std::mt19937 rng(7);
  const char *ops[] = {"MaxPool", "AveragePool", "LpPool"};
  const char *autoPads[] = {"NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
  int ran = 0;
  for (int it = 0; it < 60; ++it) {
    std::string op = ops[rng() % 3], autoPad = autoPads[rng() % 5];
    int64_t h = 2 + int64_t(rng() % 7), w = 2 + int64_t(rng() % 7);
    int64_t kh = 1 + int64_t(rng() % 3), kw = 1 + int64_t(rng() % 3);
    int64_t sh = 1 + int64_t(rng() % 3), sw = 1 + int64_t(rng() % 3);
    int64_t dh = op == "LpPool" ? 1 : 1 + int64_t(rng() % 2),
            dw = op == "LpPool" ? 1 : 1 + int64_t(rng() % 2);
    int64_t p[4] = {int64_t(rng() % kh), int64_t(rng() % kw), int64_t(rng() % kh),
                    int64_t(rng() % kw)};
    if ((kh - 1) * dh + 1 > h + p[0] + p[2] || (kw - 1) * dw + 1 > w + p[1] + p[3]) continue;
    if (autoPad == "VALID" && ((kh - 1) * dh + 1 > h || (kw - 1) * dw + 1 > w)) continue;
    std::ostringstream a;
    a << "kernel_shape = [" << kh << ", " << kw << "], strides = [" << sh << ", " << sw
      << "], auto_pad = \"" << autoPad << "\"";
    if (op != "LpPool") a << ", dilations = [" << dh << ", " << dw << "]";
    if (autoPad == "NOTSET")
      a << ", pads = [" << p[0] << ", " << p[1] << ", " << p[2] << ", " << p[3] << "]";
    if (op != "LpPool" && rng() % 2) a << ", ceil_mode = 1";
    if (op == "AveragePool" && rng() % 2) a << ", count_include_pad = 1";
    if (op == "MaxPool" && rng() % 2) a << ", storage_order = 1";
    std::string outs = op == "MaxPool" ? "%y, %i" : "%y";
    std::string text = "graph @g(%x: f32[2, 2, " + std::to_string(h) + ", " + std::to_string(w) +
                       "]) -> (" + outs + ") {\n  " + outs + " = " + op + "(%x) {" + a.str() +
                       "} : ?\n}";
    expectMatches(text, {randomTensor(DType::F32, {2, 2, h, w}, uint32_t(300 + it))});
    ++ran;
  }
  EXPECT_GE(ran, 40);
}

TEST(SpatialLower, GlobalPoolsWithoutSpatialDims) {
  for (const char *op : {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"})
    expectMatches(std::string(R"(graph @g(%x: f32[3, 4]) -> (%y) {
      %y = )") + op + R"((%x) {} : ?
    })",
                  {randomTensor(DType::F32, {3, 4}, 400)});
}

TEST(SpatialLower, DynamicDimsOfTheOtherOps) {
  std::string rot = R"(graph @g(%x: f32[B, 2, S, 4], %c: f32[B, S, 2], %s: f32[B, S, 2]) -> (%y) {
    %y = RotaryEmbedding(%x, %c, %s) {} : ?
  })";
  expectMatches(rot, {randomTensor(DType::F32, {1, 2, 3, 4}, 410),
                      randomTensor(DType::F32, {1, 3, 2}, 411),
                      randomTensor(DType::F32, {1, 3, 2}, 412)});
  expectMatches(rot, {randomTensor(DType::F32, {2, 2, 5, 4}, 413),
                      randomTensor(DType::F32, {2, 5, 2}, 414),
                      randomTensor(DType::F32, {2, 5, 2}, 415)});
  std::string gs = R"(graph @g(%x: f32[N, 2, H, W], %gr: f32[N, P, Q, 2]) -> (%y) {
    %y = GridSample(%x, %gr) {mode = "cubic", padding_mode = "border"} : ?
  })";
  expectMatches(gs, {randomTensor(DType::F32, {2, 2, 3, 4}, 416),
                     randomTensor(DType::F32, {2, 2, 3, 2}, 417, -1.3, 1.3)});
  expectMatches(gs, {randomTensor(DType::F32, {1, 2, 5, 2}, 418),
                     randomTensor(DType::F32, {1, 4, 1, 2}, 419, -1.3, 1.3)});
  std::string roi = R"(graph @g(%x: f32[N, 2, H, W], %r: f32[R, 4], %b: i64[R]) -> (%y) {
    %y = RoiAlign(%x, %r, %b) {output_height = 2, output_width = 2, sampling_ratio = 3, mode = "max"} : ?
  })";
  expectMatches(roi, {randomTensor(DType::F32, {2, 2, 5, 6}, 420),
                      Tensor::fromDoubles(DType::F32, {2, 4}, {0.5, 0.5, 4, 3, 1, 0, 5.5, 4.5}),
                      ints(DType::I64, {2}, {1, 0})});
  std::string c2i = R"(graph @g(%x: f32[N, 4, 6]) -> (%y) {
    %img = constant i64[2] [3, 4]
    %blk = constant i64[2] [2, 2]
    %y = Col2Im(%x, %img, %blk) {} : ?
  })";
  expectMatches(c2i, {randomTensor(DType::F32, {1, 4, 6}, 421)});
  expectMatches(c2i, {randomTensor(DType::F32, {3, 4, 6}, 422)});
  std::string unpool = R"(graph @g(%x: f32[N, 2, H, 4]) -> (%u) {
    symbol H in [2, 16]
    %y, %i = MaxPool(%x) {kernel_shape = [2, 2], strides = [2, 2]} : ?
    %u = MaxUnpool(%y, %i) {kernel_shape = [2, 2], strides = [2, 2]} : ?
  })";
  expectMatches(unpool, {randomTensor(DType::F32, {2, 2, 4, 4}, 423)});
  expectMatches(unpool, {randomTensor(DType::F32, {1, 2, 6, 4}, 424)});
}

TEST(SpatialLower, HalfAndDoubleTypes) {
  expectMatches(
      R"(graph @g(%x: f16[2, 2, 3], %w: f16[1, 8, 3], %r: f16[1, 8, 2]) -> (%y, %yh, %yc) {
    %y, %yh, %yc = LSTM(%x, %w, %r) {hidden_size = 2} : ?
  })",
      {randomTensor(DType::F16, {2, 2, 3}, 500), randomTensor(DType::F16, {1, 8, 3}, 501),
       randomTensor(DType::F16, {1, 8, 2}, 502)},
      3e-3);
  expectMatches(R"(graph @g(%x: f64[1, 2, 5, 6]) -> (%y, %z) {
    %y = AveragePool(%x) {kernel_shape = [2, 3], pads = [1, 1, 1, 1], ceil_mode = 1, strides = [2, 2]} : ?
    %z = LpPool(%x) {kernel_shape = [2, 2], p = 2} : ?
  })",
                {randomTensor(DType::F64, {1, 2, 5, 6}, 503)}, 1e-12);
  expectMatches(resizeGraph("1, 1, 3, 4", "f32[4] [1, 1, 1.75, 2.5]", "mode = \"cubic\"", "bf16"),
                {randomTensor(DType::BF16, {1, 1, 3, 4}, 504)}, 1e-2);
}

} // namespace
