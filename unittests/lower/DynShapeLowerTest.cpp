// Ops whose output shape comes from a run-time tensor (lower/ops/DynShape.cpp and the ShapeOps
// and DataMovement lowerings): the size extern binds the output's sizes; compared with the
// interpreter on valid values, and checked to give an empty result on invalid ones.
#include "LowerTestUtil.h"

#include <gtest/gtest.h>

using namespace coil;
using namespace coil::loop;
using namespace coil::lowertest;

namespace {

const Tolerance kExact{0, 0};

Tensor i64s(std::vector<int64_t> v, bool scalar = false) {
  return Tensor::fromInts(DType::I64, scalar ? Shape{} : Shape{int64_t(v.size())}, v);
}

/// Random data for input 0 of shape `s` followed by the given value tensors.
std::vector<Tensor> withData(DType t, const Shape &s, std::vector<Tensor> rest, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Tensor> ins{randomTensor(t, s, rng)};
  for (Tensor &x : rest) ins.push_back(std::move(x));
  return ins;
}

TEST(DynShapeLower, ReshapeSqueezeUnsqueeze) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::F32, {2, 3, 4});
  ValueId s = b.input("s", DType::I64, {3});
  b.output(b.op(OpKind::Neg, {b.op(OpKind::Reshape, {x, s})}));
  uint64_t seed = 1;
  for (auto v : std::vector<std::vector<int64_t>>{{0, -1, 2}, {4, 3, 2}, {-1, 1, 1}, {2, 0, 4}})
    expectMatchesInterpreter(b.g, withData(DType::F32, {2, 3, 4}, {i64s(v)}, seed++), kExact);
  // A target of the wrong element count: an error that states the rule (as the interpreter's
  // and the compiled program's), never an empty result or a read out of bounds.
  auto p = lowerGraph(b.g);
  ASSERT_TRUE(p.ok()) << p.error().render();
  auto got = evaluateLoopProgram(*p, withData(DType::F32, {2, 3, 4}, {i64s({5, 5, 5})}, 9));
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.error().render().find("reshape: the shape has 125 elements, the input 24"),
            std::string::npos)
      << got.error().render();

  GraphBuilder c;
  ValueId y = c.input("y", DType::I32, {3, 1, 5});
  ValueId ua = c.input("ua", DType::I64, {2});
  ValueId sa = c.input("sa", DType::I64, {1});
  c.output(c.op(OpKind::Unsqueeze, {y, ua}));
  c.output(c.op(OpKind::Squeeze, {y, sa}));
  expectMatchesInterpreter(c.g, withData(DType::I32, {3, 1, 5}, {i64s({0, -1}), i64s({1})}, 3),
                           kExact);
  expectMatchesInterpreter(c.g, withData(DType::I32, {3, 1, 5}, {i64s({2, 1}), i64s({-2})}, 4),
                           kExact);
}

TEST(DynShapeLower, SliceWithRunTimeBounds) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::F32, {6, 7});
  ValueId st = b.input("st", DType::I64, {2}), en = b.input("en", DType::I64, {2});
  ValueId ax = b.input("ax", DType::I64, {2}), sp = b.input("sp", DType::I64, {2});
  b.output(b.op(OpKind::Neg, {b.op(OpKind::Slice, {x, st, en, ax, sp})}));
  struct Case {
    std::vector<int64_t> st, en, ax, sp;
  };
  std::vector<Case> cases{{{1, 0}, {5, 7}, {0, 1}, {1, 2}},
                          {{-1, -2}, {-100, 0}, {1, 0}, {-2, -1}},
                          {{100, 2}, {-100, 100}, {-1, -2}, {-3, 3}},
                          {{4, 0}, {2, 3}, {0, 1}, {1, 1}}}; // an empty slice
  uint64_t seed = 1;
  for (const Case &k : cases)
    expectMatchesInterpreter(
        b.g, withData(DType::F32, {6, 7}, {i64s(k.st), i64s(k.en), i64s(k.ax), i64s(k.sp)}, seed++),
        kExact);
}

TEST(DynShapeLower, PadWithRunTimePads) {
  for (const char *mode : {"constant", "reflect", "edge", "wrap"}) {
    SCOPED_TRACE(mode);
    GraphBuilder b;
    ValueId x = b.input("x", DType::F32, {3, 4});
    ValueId pads = b.input("pads", DType::I64, {4});
    b.output(b.op(OpKind::Pad, {x, pads}, attrs({{"mode", std::string(mode)}})));
    uint64_t seed = 1;
    for (auto v : std::vector<std::vector<int64_t>>{{1, 2, 0, 1}, {0, -1, 2, -2}, {0, 0, 0, 0}})
      expectMatchesInterpreter(b.g, withData(DType::F32, {3, 4}, {i64s(v)}, seed++), kExact);
  }
  GraphBuilder b; // run-time axes, a fill value
  ValueId x = b.input("x", DType::I32, {2, 3, 2});
  ValueId pads = b.input("pads", DType::I64, {4}), axes = b.input("axes", DType::I64, {2});
  ValueId fill = b.constant("f", Tensor::fromInts(DType::I32, {}, {7}));
  b.output(b.op(OpKind::Pad, {x, pads, fill, axes}));
  expectMatchesInterpreter(
      b.g, withData(DType::I32, {2, 3, 2}, {i64s({1, -1, 2, 0}), i64s({-1, 1})}, 5), kExact);
}

TEST(DynShapeLower, ExpandTileConstantOfShapeRange) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::F32, {3, 1});
  ValueId es = b.input("es", DType::I64, {3}), reps = b.input("reps", DType::I64, {2});
  ValueId cs = b.input("cs", DType::I64, {2}), lim = b.input("lim", DType::I64, {});
  b.output(b.op(OpKind::Expand, {x, es}));
  b.output(b.op(OpKind::Tile, {x, reps}));
  Attrs cv = attrs({{"value", Tensor::fromInts(DType::I32, {1}, {5})}});
  b.output(b.op(OpKind::ConstantOfShape, {cs}, cv));
  b.output(b.op(OpKind::Range,
                {b.constant("z", i64s({9}, true)), lim, b.constant("d", i64s({-2}, true))}));
  expectMatchesInterpreter(b.g,
                           withData(DType::F32, {3, 1},
                                    {i64s({2, 1, 4}), i64s({2, 3}), i64s({3, 2}), i64s({0}, true)},
                                    1),
                           kExact);
  expectMatchesInterpreter(b.g,
                           withData(DType::F32, {3, 1},
                                    {i64s({1, 3, 1}), i64s({1, 0}), i64s({0, 4}), i64s({20}, true)},
                                    2),
                           kExact);
  GraphBuilder f; // a float range
  ValueId a = f.input("a", DType::F32, {}), l = f.input("l", DType::F32, {});
  f.output(f.op(OpKind::Range, {a, l, f.constant("d", Tensor::scalar(DType::F32, 0.3))}));
  expectMatchesInterpreter(
      f.g, {Tensor::scalar(DType::F32, -1.25), Tensor::scalar(DType::F32, 2.5)}, kExact);
}

TEST(DynShapeLower, SplitOneHotCenterCropPadWindow) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::F32, {2, 7});
  ValueId split = b.input("split", DType::I64, {3});
  ValueId ind = b.input("ind", DType::I64, {3});
  ValueId depth = b.input("depth", DType::F32, {});
  ValueId crop = b.input("crop", DType::I64, {2});
  ValueId size = b.input("size", DType::I64, {});
  for (ValueId o : b.node(OpKind::Split, {x, split}, attrs({{"axis", int64_t(1)}}), 3))
    b.output(b.op(OpKind::Neg, {o}));
  b.output(b.op(OpKind::OneHot, {ind, depth, b.constant("v", i64s({-1, 4}))},
                attrs({{"axis", int64_t(0)}})));
  b.output(b.op(OpKind::CenterCropPad, {x, crop}));
  b.output(b.op(OpKind::HannWindow, {size}));
  std::vector<Tensor> ins =
      withData(DType::F32, {2, 7},
               {i64s({3, 0, 4}), i64s({0, -1, 3}), Tensor::scalar(DType::F32, 3.5), i64s({5, 2}),
                i64s({6}, true)},
               1);
  expectMatchesInterpreter(b.g, ins, {1e-6, 1e-6});
}

} // namespace

namespace {

TEST(DynShapeLower, ResizeWithRunTimeScalesSizesRoi) {
  for (const char *mode : {"nearest", "linear", "cubic"}) {
    SCOPED_TRACE(mode);
    GraphBuilder b;
    ValueId x = b.input("x", DType::F32, {1, 2, 4, 5});
    ValueId sc = b.input("scales", DType::F32, {4});
    ValueId sz = b.input("sizes", DType::I64, {2});
    ValueId roi = b.input("roi", DType::F32, {4});
    b.output(b.op(OpKind::Resize, {x, kNoValue, sc}, attrs({{"mode", std::string(mode)}})));
    b.output(b.op(OpKind::Resize, {x, kNoValue, kNoValue, sz},
                  attrs({{"mode", std::string(mode)},
                         {"axes", std::vector<int64_t>{3, 2}},
                         {"keep_aspect_ratio_policy", std::string("not_larger")}})));
    b.output(b.op(OpKind::Resize, {x, roi, kNoValue, sz},
                  attrs({{"mode", std::string(mode)},
                         {"axes", std::vector<int64_t>{2, 3}},
                         {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                         {"extrapolation_value", 2.5}})));
    std::mt19937_64 rng(7);
    std::vector<Tensor> ins{randomTensor(DType::F32, {1, 2, 4, 5}, rng),
                            Tensor::fromDoubles(DType::F32, {4}, {1, 1, 0.6, 1.7}), i64s({7, 3}),
                            Tensor::fromDoubles(DType::F32, {4}, {0.1, -0.2, 0.9, 1.3})};
    expectMatchesInterpreter(b.g, ins, {1e-5, 1e-5});
  }
  for (const char *mode : {"linear", "cubic"}) { // antialias: the tap count read at run time
    SCOPED_TRACE(mode);
    GraphBuilder b;
    ValueId x = b.input("x", DType::F32, {1, 1, 9, 8});
    ValueId sc = b.input("scales", DType::F32, {4});
    ValueId sz = b.input("sizes", DType::I64, {2});
    b.output(b.op(OpKind::Resize, {x, kNoValue, sc},
                  attrs({{"mode", std::string(mode)}, {"antialias", int64_t(1)}})));
    b.output(b.op(OpKind::Resize, {x, kNoValue, kNoValue, sz},
                  attrs({{"mode", std::string(mode)},
                         {"antialias", int64_t(1)},
                         {"axes", std::vector<int64_t>{2, 3}}})));
    std::mt19937_64 rng(8);
    std::vector<Tensor> ins{randomTensor(DType::F32, {1, 1, 9, 8}, rng),
                            Tensor::fromDoubles(DType::F32, {4}, {1, 1, 0.3, 0.8}), i64s({4, 11})};
    expectMatchesInterpreter(b.g, ins, {1e-5, 1e-5});
  }
}

} // namespace
