// Tests of the DataMovement ops: inference (ir/infer/DataMovement.cpp) and reference kernels
// (interp/kernels/DataMovement*.cpp), run together so that each kernel result is also checked
// against the inferred type.
#include "interp/Kernel.h"
#include "ir/Infer.h"

#include <gtest/gtest.h>
#include <optional>
#include <random>

using namespace coil;

namespace {

struct Input {
  Tensor t;
  bool known = false; ///< contents visible to inference (a constant input)
};
Input in(Tensor t) {
  return {std::move(t), false};
}
Input cst(Tensor t) {
  return {std::move(t), true};
}
Tensor i64(Shape s, std::vector<int64_t> v) {
  return Tensor::fromInts(DType::I64, s, v);
}
Tensor i32(Shape s, std::vector<int64_t> v) {
  return Tensor::fromInts(DType::I32, s, v);
}
Tensor f32(Shape s, std::vector<double> v) {
  return Tensor::fromDoubles(DType::F32, s, v);
}
Tensor boolT(Shape s, std::vector<int64_t> v) {
  return Tensor::fromInts(DType::Bool, s, v);
}

struct NodeRun {
  Node node;
  std::vector<std::optional<Input>> inputs;
  std::vector<TensorType> types; ///< inferred
  int fresh = 0;

  NodeRun(OpKind op, std::vector<std::optional<Input>> ins, Attrs attrs = {}, int outputs = 1)
      : inputs(std::move(ins)) {
    node.op = op;
    node.attrs = std::move(attrs);
    for (size_t i = 0; i < inputs.size(); ++i)
      node.inputs.push_back(inputs[i] ? ValueId(i) : kNoValue);
    for (int i = 0; i < outputs; ++i) node.outputs.push_back(ValueId(100 + i));
  }

  Expected<std::vector<TensorType>> infer() {
    std::vector<TensorType> inTypes(inputs.size());
    InferContext ctx{node, {}, {}, {}, [this](const std::string &h) {
                       return SymInt::symbol(h + std::to_string(fresh++));
                     }};
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i]) {
        ctx.inputTypes.push_back(nullptr);
        ctx.intValues.push_back(std::nullopt);
        ctx.constants.push_back(nullptr);
        continue;
      }
      const Tensor &t = inputs[i]->t;
      inTypes[i].dtype = t.dtype();
      for (int64_t d : t.shape()) inTypes[i].shape.push_back(d);
      ctx.inputTypes.push_back(&inTypes[i]);
      std::optional<std::vector<SymInt>> iv;
      if (inputs[i]->known && !isFloat(t.dtype())) {
        iv.emplace();
        for (int64_t v : t.toInts()) iv->push_back(v);
      }
      ctx.intValues.push_back(iv);
      ctx.constants.push_back(inputs[i]->known ? &inputs[i]->t : nullptr);
    }
    return inferNode(ctx);
  }

  /// Runs inference then the kernel; checks that both agree.
  Expected<std::vector<Tensor>> run() {
    auto ty = infer();
    if (!ty.ok()) return ty.error();
    types = *ty;
    KernelContext kctx{node, {}, &types};
    for (auto &i : inputs) kctx.inputs.push_back(i ? &i->t : nullptr);
    KernelFn fn = kernelFor(node.op);
    EXPECT_NE(fn, nullptr);
    auto outs = fn(kctx);
    if (!outs.ok()) return outs;
    EXPECT_EQ(outs->size(), types.size());
    for (size_t o = 0; o < std::min(outs->size(), types.size()); ++o) {
      const Tensor &t = (*outs)[o];
      EXPECT_EQ(t.dtype(), types[o].dtype) << "output " << o;
      EXPECT_EQ(t.rank(), types[o].rank()) << "output " << o << " " << types[o].str();
      for (size_t d = 0; d < std::min<size_t>(t.shape().size(), types[o].shape.size()); ++d)
        if (types[o].shape[d].isConstant())
          EXPECT_EQ(types[o].shape[d].constant(), t.shape()[d])
              << "output " << o << " dim " << d << " inferred " << types[o].str() << ", got "
              << shapeStr(t.shape());
    }
    return outs;
  }
};

Attrs attrs(std::initializer_list<std::pair<const std::string, AttrValue>> kv) {
  Attrs a;
  for (const auto &[k, v] : kv) a.set(k, v);
  return a;
}

Tensor runOne(NodeRun &&n) {
  auto r = n.run();
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().render());
  return r.ok() ? r->at(0) : Tensor();
}

std::string errorOf(NodeRun &&n) {
  auto r = n.run();
  return r.ok() ? "<no error>" : r.error().message();
}

#define EXPECT_TENSOR(actual, expected)                                                            \
  do {                                                                                             \
    Tensor a_ = (actual), e_ = (expected);                                                         \
    EXPECT_EQ(shapeStr(a_.shape()), shapeStr(e_.shape()));                                         \
    EXPECT_TRUE(a_.identical(e_)) << "got " << ::testing::PrintToString(a_.toDoubles())            \
                                  << " want " << ::testing::PrintToString(e_.toDoubles());         \
  } while (0)

} // namespace

// --- Transpose

TEST(DataMovementTest, TransposeDefaultReverses) {
  Tensor y = runOne(NodeRun(OpKind::Transpose, {in(i32({2, 3}, {1, 2, 3, 4, 5, 6}))}));
  EXPECT_TENSOR(y, i32({3, 2}, {1, 4, 2, 5, 3, 6}));
}

TEST(DataMovementTest, TransposePermAndError) {
  Tensor x = f32({2, 1, 3}, {1, 2, 3, 4, 5, 6});
  Tensor y =
      runOne(NodeRun(OpKind::Transpose, {in(x)}, attrs({{"perm", std::vector<int64_t>{2, 0, 1}}})));
  EXPECT_TENSOR(y, f32({3, 2, 1}, {1, 4, 2, 5, 3, 6}));
  Tensor x4(DType::F32, {1, 2, 3, 4});
  EXPECT_EQ(errorOf(NodeRun(OpKind::Transpose, {in(x4)},
                            attrs({{"perm", std::vector<int64_t>{0, 0, 1, 2}}}))),
            "perm must be a permutation of 0..3, got [0, 0, 1, 2]");
}

// --- Gather / Scatter

TEST(DataMovementTest, GatherElementsNegativeIndices) {
  Tensor x = f32({2, 2}, {1, 2, 3, 4});
  Tensor y = runOne(NodeRun(OpKind::GatherElements, {in(x), in(i64({2, 2}, {-1, 0, 0, -2}))},
                            attrs({{"axis", int64_t(1)}})));
  EXPECT_TENSOR(y, f32({2, 2}, {2, 1, 3, 3}));
  EXPECT_EQ(errorOf(NodeRun(OpKind::GatherElements, {in(x), in(i64({1, 1}, {2}))},
                            attrs({{"axis", int64_t(-1)}}))),
            "index 2 is out of range [-2, 1]");
}

TEST(DataMovementTest, GatherNDBatchDimsAndNegative) {
  Tensor x = i32({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  Tensor y = runOne(NodeRun(OpKind::GatherND, {in(x), in(i64({2, 1}, {-1, 0}))},
                            attrs({{"batch_dims", int64_t(1)}})));
  EXPECT_TENSOR(y, i32({2, 2}, {2, 3, 4, 5}));
  Tensor z = runOne(NodeRun(OpKind::GatherND, {in(x), in(i64({2, 3}, {0, 1, 1, 1, -1, 0}))}));
  EXPECT_TENSOR(z, i32({2}, {3, 6}));
  EXPECT_EQ(errorOf(NodeRun(OpKind::GatherND, {in(x), in(i64({1, 2}, {0, -3}))})),
            "index -3 is out of range [-2, 1]");
}

TEST(DataMovementTest, ScatterElementsReductionsWithDuplicates) {
  Tensor x = i32({5}, {1, 2, 3, 4, 5});
  Tensor ind = i64({3}, {1, 1, -1});
  Tensor upd = i32({3}, {10, 20, 30});
  auto run = [&](const char *red) {
    return runOne(NodeRun(OpKind::ScatterElements, {in(x), in(ind), in(upd)},
                          attrs({{"reduction", std::string(red)}})));
  };
  EXPECT_TENSOR(run("add"), i32({5}, {1, 32, 3, 4, 35}));
  EXPECT_TENSOR(run("mul"), i32({5}, {1, 400, 3, 4, 150}));
  EXPECT_TENSOR(run("max"), i32({5}, {1, 20, 3, 4, 30}));
  Tensor small = i32({3}, {0, -7, 1});
  EXPECT_TENSOR(runOne(NodeRun(OpKind::ScatterElements, {in(x), in(ind), in(small)},
                               attrs({{"reduction", std::string("min")}}))),
                i32({5}, {1, -7, 3, 4, 1}));
  // none: the last write wins; f16 bytes copied exactly.
  Tensor xh = Tensor::fromDoubles(DType::F16, {2, 2}, {1, 2, 3, 4});
  Tensor uh = Tensor::fromDoubles(DType::F16, {1, 2}, {0.1, -0.5});
  Tensor yh = runOne(NodeRun(OpKind::ScatterElements, {in(xh), in(i64({1, 2}, {1, 0})), in(uh)},
                             attrs({{"axis", int64_t(0)}})));
  EXPECT_TENSOR(yh, Tensor::fromDoubles(DType::F16, {2, 2}, {1, -0.5, 0.1, 4}));
  EXPECT_EQ(
      errorOf(NodeRun(OpKind::ScatterElements, {in(x), in(i64({1}, {5})), in(i32({1}, {0}))})),
      "index 5 is out of range [-5, 4]");
}

TEST(DataMovementTest, ScatterNDReductionsWithDuplicates) {
  Tensor x = f32({2, 2}, {1, 2, 3, 4});
  Tensor ind = i64({3, 1}, {1, -1, 0});
  Tensor upd = f32({3, 2}, {10, 20, 30, 40, 5, 6});
  auto run = [&](const char *red) {
    return runOne(NodeRun(OpKind::ScatterND, {in(x), in(ind), in(upd)},
                          attrs({{"reduction", std::string(red)}})));
  };
  EXPECT_TENSOR(run("add"), f32({2, 2}, {6, 8, 43, 64}));
  EXPECT_TENSOR(run("mul"), f32({2, 2}, {5, 12, 900, 3200}));
  EXPECT_TENSOR(run("max"), f32({2, 2}, {5, 6, 30, 40}));
  EXPECT_TENSOR(run("min"), f32({2, 2}, {1, 2, 3, 4}));
  EXPECT_TENSOR(run("none"), f32({2, 2}, {5, 6, 30, 40}));
  EXPECT_EQ(errorOf(NodeRun(OpKind::ScatterND, {in(x), in(ind), in(f32({3}, {1, 2, 3}))})),
            "updates must have shape [3, 2], got [3]");
}

// --- Tile, Pad, CenterCropPad

TEST(DataMovementTest, TileKnownAndUnknownRepeats) {
  Tensor x = i64({1, 2}, {1, 2});
  NodeRun n(OpKind::Tile, {in(x), cst(i64({2}, {2, 2}))});
  EXPECT_TENSOR(runOne(std::move(n)), i64({2, 4}, {1, 2, 1, 2, 1, 2, 1, 2}));
  NodeRun u(OpKind::Tile, {in(x), in(i64({2}, {3, 1}))});
  ASSERT_TRUE(u.run().ok());
  EXPECT_FALSE(u.types[0].shape[0].isConstant()); // data-dependent
  NodeRun k(OpKind::Tile, {in(x), cst(i64({2}, {3, 1}))});
  auto t = k.infer();
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->at(0).str(), "i64[3, 2]");
}

TEST(DataMovementTest, PadReflectAndWrapWithCrops) {
  Tensor x = i32({5}, {0, 1, 2, 3, 4});
  auto pad = [&](const char *mode, std::vector<int64_t> pads) {
    int64_t n = int64_t(pads.size());
    return runOne(
        NodeRun(OpKind::Pad, {in(x), cst(i64({n}, pads))}, attrs({{"mode", std::string(mode)}})));
  };
  // Negative pads crop first; the kept part is then padded by the mode.
  EXPECT_TENSOR(pad("reflect", {-1, 3}), i32({7}, {1, 2, 3, 4, 3, 2, 1}));
  EXPECT_TENSOR(pad("wrap", {2, -2}), i32({5}, {1, 2, 0, 1, 2}));
  EXPECT_TENSOR(pad("wrap", {0, 5}), i32({10}, {0, 1, 2, 3, 4, 0, 1, 2, 3, 4}));
  EXPECT_TENSOR(pad("reflect", {-2, -2}), i32({1}, {2}));
  Tensor x3 = i32({3}, {1, 2, 3});
  EXPECT_TENSOR(runOne(NodeRun(OpKind::Pad, {in(x3), cst(i64({2}, {4, 0}))},
                               attrs({{"mode", std::string("reflect")}}))),
                i32({7}, {1, 2, 3, 2, 1, 2, 3}));
  // 2-D edge with a crop on each axis: pads [begin0, begin1, end0, end1].
  Tensor m = f32({3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_TENSOR(runOne(NodeRun(OpKind::Pad, {in(m), cst(i64({4}, {1, -1, -1, 1}))},
                               attrs({{"mode", std::string("edge")}}))),
                f32({3, 3}, {1, 2, 2, 1, 2, 2, 4, 5, 5}));
  EXPECT_EQ(errorOf(NodeRun(OpKind::Pad, {in(x), cst(i64({2}, {-3, -3}))})),
            "pads [-3, -3] crop more than dim 0 of shape [5]");
}

TEST(DataMovementTest, PadConstantValueAndAxes) {
  Tensor x = f32({2, 2}, {1, 2, 3, 4});
  Tensor y = runOne(
      NodeRun(OpKind::Pad, {in(x), cst(i64({2}, {1, 0})), in(f32({}, {9})), cst(i64({1}, {-1}))}));
  EXPECT_TENSOR(y, f32({2, 3}, {9, 1, 2, 9, 3, 4}));
  // Unknown pads: the padded dims become symbols; the kernel still runs.
  NodeRun u(OpKind::Pad, {in(x), in(i64({4}, {0, 1, 0, 0}))});
  ASSERT_TRUE(u.run().ok());
  EXPECT_FALSE(u.types[0].shape[1].isConstant());
}

TEST(DataMovementTest, CenterCropPad) {
  Tensor x = i32({5}, {1, 2, 3, 4, 5});
  EXPECT_TENSOR(runOne(NodeRun(OpKind::CenterCropPad, {in(x), cst(i64({1}, {2}))})),
                i32({2}, {2, 3}));
  EXPECT_TENSOR(runOne(NodeRun(OpKind::CenterCropPad, {in(i32({2}, {1, 2})), cst(i64({1}, {5}))})),
                i32({5}, {0, 1, 2, 0, 0}));
}

// --- Split

TEST(DataMovementTest, SplitUneven) {
  Tensor x = i64({7}, {1, 2, 3, 4, 5, 6, 7});
  NodeRun n(OpKind::Split, {in(x)}, attrs({{"num_outputs", int64_t(3)}}), 3);
  auto r = n.run();
  ASSERT_TRUE(r.ok()) << r.error().render();
  EXPECT_TENSOR(r->at(0), i64({3}, {1, 2, 3}));
  EXPECT_TENSOR(r->at(1), i64({3}, {4, 5, 6}));
  EXPECT_TENSOR(r->at(2), i64({1}, {7}));
  NodeRun s(OpKind::Split, {in(x), cst(i64({2}, {2, 5}))}, {}, 2);
  auto r2 = s.run();
  ASSERT_TRUE(r2.ok());
  EXPECT_TENSOR(r2->at(1), i64({5}, {3, 4, 5, 6, 7}));
  EXPECT_EQ(errorOf(NodeRun(OpKind::Split, {in(x), cst(i64({2}, {2, 2}))}, {}, 2)),
            "split sizes [2, 2] must sum to the size of axis 0 (7)");
  // Symbolic dim: ceil chunks.
  Node node;
  node.op = OpKind::Split;
  node.inputs = {0};
  node.outputs = {1, 2};
  TensorType t{DType::F32, {SymInt::symbol("N"), 4}};
  InferContext ctx{node, {&t}, {std::nullopt}, {nullptr}, [](const std::string &h) {
                     return SymInt::symbol(h);
                   }};
  auto ty = inferNode(ctx);
  ASSERT_TRUE(ty.ok());
  SymBindings b{{"N", 5}};
  EXPECT_EQ(*ty->at(0).shape[0].evaluate(b), 3);
  EXPECT_EQ(*ty->at(1).shape[0].evaluate(b), 2);
}

// --- Trilu, EyeLike, ReverseSequence, TensorScatter

TEST(DataMovementTest, TriluUpperLower) {
  Tensor x = i32({3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_TENSOR(runOne(NodeRun(OpKind::Trilu, {in(x), in(i64({}, {1}))})),
                i32({3, 3}, {0, 1, 2, 0, 0, 5, 0, 0, 0}));
  EXPECT_TENSOR(
      runOne(NodeRun(OpKind::Trilu, {in(x), in(i64({}, {-1}))}, attrs({{"upper", int64_t(0)}}))),
      i32({3, 3}, {0, 0, 0, 3, 0, 0, 6, 7, 0}));
}

TEST(DataMovementTest, EyeLikeDtypeAndK) {
  Tensor y = runOne(NodeRun(OpKind::EyeLike, {in(Tensor(DType::F32, {2, 3}))},
                            attrs({{"k", int64_t(1)}, {"dtype", int64_t(7)}})));
  EXPECT_TENSOR(y, i64({2, 3}, {0, 1, 0, 0, 0, 1}));
}

TEST(DataMovementTest, ReverseSequence) {
  // time_axis 0, batch_axis 1 (ONNX example).
  Tensor x = f32({4, 4}, {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15});
  Tensor y = runOne(NodeRun(OpKind::ReverseSequence, {in(x), in(i64({4}, {4, 3, 2, 1}))}));
  EXPECT_TENSOR(y, f32({4, 4}, {3, 6, 9, 12, 2, 5, 8, 13, 1, 4, 10, 14, 0, 7, 11, 15}));
}

TEST(DataMovementTest, TensorScatterCircular) {
  Tensor cache = f32({1, 4, 1}, {0, 0, 0, 0});
  Tensor upd = f32({1, 2, 1}, {7, 8});
  Tensor y = runOne(NodeRun(OpKind::TensorScatter, {in(cache), in(upd), in(i64({1}, {3}))},
                            attrs({{"mode", std::string("circular")}})));
  EXPECT_TENSOR(y, f32({1, 4, 1}, {8, 0, 0, 7}));
  EXPECT_EQ(errorOf(NodeRun(OpKind::TensorScatter, {in(cache), in(upd), in(i64({1}, {3}))})),
            "write position 4 is out of range [0, 3] (write_indices [3])");
}

// --- OneHot, windows

TEST(DataMovementTest, OneHotNegativeAndOutOfRange) {
  Tensor y = runOne(
      NodeRun(OpKind::OneHot, {in(i64({3}, {0, -1, 5})), cst(i64({}, {3})), in(f32({2}, {2, 7}))}));
  EXPECT_TENSOR(y, f32({3, 3}, {7, 2, 2, 2, 2, 7, 2, 2, 2}));
  Tensor z = runOne(NodeRun(OpKind::OneHot,
                            {in(f32({2}, {1, -2})), cst(f32({}, {2})), in(i32({2}, {0, 1}))},
                            attrs({{"axis", int64_t(0)}})));
  EXPECT_TENSOR(z, i32({2, 2}, {0, 1, 1, 0}));
}

TEST(DataMovementTest, Windows) {
  Tensor h = runOne(NodeRun(OpKind::HannWindow, {cst(i64({}, {4}))}));
  ASSERT_EQ(h.numel(), 4);
  std::vector<double> hv = h.toDoubles(), want = {0, 0.5, 1, 0.5};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(hv[i], want[i], 1e-6);
  Tensor b = runOne(NodeRun(OpKind::BlackmanWindow, {cst(i64({}, {3}))},
                            attrs({{"periodic", int64_t(0)}, {"output_datatype", int64_t(11)}})));
  EXPECT_EQ(b.dtype(), DType::F64);
  EXPECT_NEAR(b.toDoubles()[1], 1.0, 1e-12);
  Tensor m = runOne(NodeRun(OpKind::HammingWindow, {in(i32({}, {2}))}));
  EXPECT_NEAR(m.toDoubles()[0], 25.0 / 46 - 21.0 / 46, 1e-6);
}

// --- NonZero, Compress, Unique, NonMaxSuppression

TEST(DataMovementTest, NonZero) {
  Tensor y = runOne(NodeRun(OpKind::NonZero, {in(boolT({2, 2}, {1, 0, 1, 1}))}));
  EXPECT_TENSOR(y, i64({2, 3}, {0, 1, 1, 0, 0, 1}));
  Tensor z = runOne(NodeRun(OpKind::NonZero, {in(f32({3}, {-0.0, 2, 0}))}));
  EXPECT_TENSOR(z, i64({1, 1}, {1}));
}

TEST(DataMovementTest, NonZeroEmptyInput) {
  NodeRun n(OpKind::NonZero, {in(Tensor(DType::F32, {0, 3}))});
  auto r = n.run();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(shapeStr(r->at(0).shape()), "[2, 0]");
  EXPECT_EQ(n.types[0].shape[0], SymInt(2));
  EXPECT_TRUE(n.types[0].shape[1].isSymbol());
  Tensor zeros = runOne(NodeRun(OpKind::NonZero, {in(Tensor(DType::I32, {2, 2}))}));
  EXPECT_EQ(shapeStr(zeros.shape()), "[2, 0]");
}

TEST(DataMovementTest, Compress) {
  Tensor x = i32({3, 2}, {1, 2, 3, 4, 5, 6});
  EXPECT_TENSOR(runOne(NodeRun(OpKind::Compress, {in(x), cst(boolT({3}, {0, 1, 1}))},
                               attrs({{"axis", int64_t(0)}}))),
                i32({2, 2}, {3, 4, 5, 6}));
  EXPECT_TENSOR(runOne(NodeRun(OpKind::Compress, {in(x), in(boolT({5}, {0, 1, 0, 0, 1}))})),
                i32({2}, {2, 5}));
  EXPECT_TENSOR(runOne(NodeRun(OpKind::Compress, {in(x), in(boolT({2}, {0, 1}))},
                               attrs({{"axis", int64_t(-1)}}))),
                i32({3, 1}, {2, 4, 6}));
}

TEST(DataMovementTest, UniqueOutputsOrder) {
  Tensor x = f32({6}, {2, 1, 1, 3, 4, 3});
  NodeRun s(OpKind::Unique, {in(x)}, {}, 4);
  auto r = s.run();
  ASSERT_TRUE(r.ok());
  EXPECT_TENSOR(r->at(0), f32({4}, {1, 2, 3, 4}));
  EXPECT_TENSOR(r->at(1), i64({4}, {1, 0, 3, 4}));
  EXPECT_TENSOR(r->at(2), i64({6}, {1, 0, 0, 2, 3, 2}));
  EXPECT_TENSOR(r->at(3), i64({4}, {2, 1, 2, 1}));
  NodeRun u(OpKind::Unique, {in(x)}, attrs({{"sorted", int64_t(0)}}), 4);
  auto r2 = u.run();
  ASSERT_TRUE(r2.ok());
  EXPECT_TENSOR(r2->at(0), f32({4}, {2, 1, 3, 4}));
  EXPECT_TENSOR(r2->at(1), i64({4}, {0, 1, 3, 4}));
  EXPECT_TENSOR(r2->at(2), i64({6}, {0, 1, 1, 2, 3, 2}));
  EXPECT_TENSOR(r2->at(3), i64({4}, {1, 2, 2, 1}));
  // Along an axis, slices compare lexicographically.
  Tensor m = i32({3, 3}, {2, 3, 4, 1, 0, 0, 1, 0, 0});
  NodeRun a(OpKind::Unique, {in(m)}, attrs({{"axis", int64_t(0)}}), 4);
  auto r3 = a.run();
  ASSERT_TRUE(r3.ok());
  EXPECT_TENSOR(r3->at(0), i32({2, 3}, {1, 0, 0, 2, 3, 4}));
  EXPECT_TENSOR(r3->at(1), i64({2}, {1, 0}));
  EXPECT_TENSOR(r3->at(2), i64({3}, {1, 0, 0}));
  EXPECT_TENSOR(r3->at(3), i64({2}, {2, 1}));
}

TEST(DataMovementTest, NonMaxSuppression) {
  Tensor boxes = f32({1, 6, 4}, {0, 0,  1, 1,  0, 0.1,  1, 1.1,  0, -0.1, 1, 0.9,
                                 0, 10, 1, 11, 0, 10.1, 1, 11.1, 0, 100,  1, 101});
  Tensor scores = f32({1, 1, 6}, {0.9, 0.75, 0.6, 0.95, 0.5, 0.3});
  Tensor y = runOne(NodeRun(OpKind::NonMaxSuppression, {in(boxes), in(scores), in(i64({1}, {3})),
                                                        in(f32({1}, {0.5})), in(f32({1}, {0.0}))}));
  EXPECT_TENSOR(y, i64({3, 3}, {0, 0, 3, 0, 0, 0, 0, 0, 5}));
  // center_point_box: the same boxes as [x_center, y_center, w, h].
  Tensor centers = f32({1, 6, 4}, {0.5, 0.5,  1, 1, 0.5, 0.6,  1, 1, 0.5, 0.4,   1, 1,
                                   0.5, 10.5, 1, 1, 0.5, 10.6, 1, 1, 0.5, 100.5, 1, 1});
  Tensor z = runOne(NodeRun(OpKind::NonMaxSuppression,
                            {in(centers), in(scores), in(i64({1}, {2})), in(f32({1}, {0.5}))},
                            attrs({{"center_point_box", int64_t(1)}})));
  EXPECT_TENSOR(z, i64({2, 3}, {0, 0, 3, 0, 0, 0}));
}

// --- Inference over symbolic shapes and known (symbolic) contents

namespace {

struct SymInput {
  TensorType type;
  std::optional<std::vector<SymInt>> value;
};

Expected<std::vector<TensorType>> inferWith(OpKind op, std::vector<SymInput> ins, Attrs a = {},
                                            int outputs = 1) {
  Node node;
  node.op = op;
  node.attrs = std::move(a);
  for (size_t i = 0; i < ins.size(); ++i) node.inputs.push_back(ValueId(i));
  for (int i = 0; i < outputs; ++i) node.outputs.push_back(ValueId(100 + i));
  int fresh = 0;
  InferContext ctx{node, {}, {}, {}, [&](const std::string &h) {
                     return SymInt::symbol(h + std::to_string(fresh++));
                   }};
  for (const SymInput &s : ins) {
    ctx.inputTypes.push_back(&s.type);
    ctx.intValues.push_back(s.value);
    ctx.constants.push_back(nullptr);
  }
  return inferNode(ctx);
}

const SymInt N = SymInt::symbol("N");

std::string typeOrError(const Expected<std::vector<TensorType>> &r, size_t i = 0) {
  return r.ok() ? r->at(i).str() : r.error().message();
}

/// The first output type with N bound to 7, e.g. "f32[7, 12]".
std::string evalDims(const Expected<std::vector<TensorType>> &r) {
  if (!r.ok()) return r.error().message();
  std::string out = std::string(dtypeName(r->at(0).dtype)) + "[";
  for (size_t i = 0; i < r->at(0).shape.size(); ++i) {
    auto v = r->at(0).shape[i].evaluate({{"N", 7}});
    out += (i ? ", " : "") + (v.ok() ? std::to_string(*v) : r->at(0).shape[i].str());
  }
  return out + "]";
}

} // namespace

TEST(DataMovementTest, InferKnownSymbolicContents) {
  TensorType x{DType::F32, {N, 3}};
  // Pad with pads known as symbols: [0, N, 0, 2] pads dim 1 by N + 2.
  auto p = inferWith(OpKind::Pad, {{x, {}}, {{DType::I64, {4}}, {{0, N, 0, 2}}}});
  EXPECT_EQ(evalDims(p), "f32[7, 12]");
  auto t = inferWith(OpKind::Tile, {{x, {}}, {{DType::I64, {2}}, {{2, N}}}});
  EXPECT_EQ(evalDims(t), "f32[14, 21]");
  auto s = inferWith(OpKind::Split, {{x, {}}, {{DType::I64, {2}}, {{1, 2}}}},
                     attrs({{"axis", int64_t(1)}}), 2);
  EXPECT_EQ(typeOrError(s, 1), "f32[N, 2]");
  auto c = inferWith(OpKind::Compress, {{x, {}}, {{DType::Bool, {3}}, {{1, 0, 1}}}},
                     attrs({{"axis", int64_t(1)}}));
  EXPECT_EQ(typeOrError(c), "f32[N, 2]");
  auto o = inferWith(OpKind::OneHot,
                     {{{DType::I64, {N}}, {}}, {{DType::I64, {}}, {{5}}}, {{DType::F16, {2}}, {}}},
                     attrs({{"axis", int64_t(0)}}));
  EXPECT_EQ(typeOrError(o), "f16[5, N]");
  auto w = inferWith(OpKind::HannWindow, {{{DType::I32, {}}, {{N}}}},
                     attrs({{"output_datatype", int64_t(11)}}));
  EXPECT_EQ(typeOrError(w), "f64[N]");
  auto u =
      inferWith(OpKind::Unique, {{{DType::I32, {N, 4}}, {}}}, attrs({{"axis", int64_t(1)}}), 4);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->at(0).str(), "i32[N, unique0]");
  EXPECT_EQ(u->at(2).str(), "i64[4]");
  auto gnd =
      inferWith(OpKind::GatherND, {{{DType::F32, {N, 4, 5}}, {}}, {{DType::I64, {N, 7, 1}}, {}}},
                attrs({{"batch_dims", int64_t(1)}}));
  EXPECT_EQ(typeOrError(gnd), "f32[N, 7, 5]");
}

TEST(DataMovementTest, InferErrors) {
  TensorType x{DType::F32, {2, 3}};
  EXPECT_EQ(typeOrError(inferWith(OpKind::GatherND, {{x, {}}, {{DType::I64, {4, N}}, {}}})),
            "the last dim of indices must be known at compile time, got N");
  EXPECT_EQ(
      typeOrError(inferWith(OpKind::ScatterElements, {{x, {}}, {{DType::I64, {2, 3}}, {}}, {x, {}}},
                            attrs({{"reduction", std::string("sum")}}))),
      "reduction must be one of none, add, mul, max, min, got 'sum'");
  EXPECT_EQ(typeOrError(
                inferWith(OpKind::ScatterElements, {{x, {}}, {{DType::F32, {2, 3}}, {}}, {x, {}}})),
            "indices must have dtype i32 or i64, got f32");
  EXPECT_EQ(
      typeOrError(inferWith(OpKind::Split, {{x, {}}}, attrs({{"num_outputs", int64_t(3)}}), 2)),
      "num_outputs (3) must equal the number of outputs (2)");
  EXPECT_EQ(typeOrError(inferWith(OpKind::Split, {{{DType::F32, {5}}, {}}},
                                  attrs({{"num_outputs", int64_t(4)}}), 4)),
            "axis 0 of size 5 cannot be split into 4 outputs");
  EXPECT_EQ(typeOrError(inferWith(OpKind::Tile, {{x, {}}, {{DType::I64, {3}}, {}}})),
            "repeats must have shape [2] (one per input dim), got [3]");
  EXPECT_EQ(typeOrError(inferWith(OpKind::Trilu, {{{DType::F32, {3}}, {}}})),
            "input must have rank >= 2, got rank 1");
  EXPECT_EQ(typeOrError(inferWith(OpKind::Pad, {{x, {}}, {{DType::I64, {2}}, {{1, 1}}}})),
            "pads must have 4 elements (2 per padded axis), got 2");
  EXPECT_EQ(typeOrError(inferWith(OpKind::Pad, {{x, {}}, {{DType::I64, {4}}, {}}},
                                  attrs({{"mode", std::string("mirror")}}))),
            "mode must be one of constant, reflect, edge, wrap, got 'mirror'");
  EXPECT_EQ(typeOrError(inferWith(OpKind::EyeLike, {{x, {}}}, attrs({{"dtype", int64_t(8)}}))),
            "dtype 8 is not supported");
  EXPECT_EQ(typeOrError(inferWith(OpKind::GatherElements, {{x, {}}, {{DType::I64, {2, 3}}, {}}},
                                  attrs({{"axis", int64_t(2)}}))),
            "axis 2 is out of range for rank 2");
}

TEST(DataMovementTest, KernelErrorsOnBadInput) {
  Tensor x = f32({2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(errorOf(NodeRun(OpKind::Tile, {in(x), in(i64({2}, {-1, 1}))})),
            "repeats must be non-negative, got [-1, 1]");
  EXPECT_EQ(errorOf(NodeRun(OpKind::ReverseSequence, {in(x), in(i64({2}, {3, 1}))})),
            "sequence_lens must be in [0, 2], got [3, 1]");
  EXPECT_EQ(errorOf(NodeRun(OpKind::Compress, {in(x), in(boolT({3}, {0, 0, 1}))},
                            attrs({{"axis", int64_t(0)}}))),
            "condition selects index 2 of axis 0, which has size 2");
  EXPECT_EQ(
      errorOf(NodeRun(OpKind::Pad, {in(Tensor(DType::F32, {0, 2})), in(i64({4}, {1, 0, 0, 0}))},
                      attrs({{"mode", std::string("reflect")}}))),
      "mode 'reflect' cannot pad dim 0, which is empty");
  EXPECT_EQ(errorOf(NodeRun(OpKind::Split, {in(x), in(i64({2}, {3, -1}))}, {}, 2)),
            "split sizes must be non-negative, got [3, -1]");
  // An empty split input means an even split.
  NodeRun s(OpKind::Split, {in(x), in(i64({0}, {}))}, {}, 2);
  auto r = s.run();
  ASSERT_TRUE(r.ok()) << r.error().render();
  EXPECT_TENSOR(r->at(1), f32({1, 2}, {3, 4}));
}

// --- Robustness: random (often invalid) inputs give a result or a user error, never a crash,
// and a result always agrees with inference.

TEST(DataMovementTest, RandomInputsNeverCrash) {
  std::mt19937 rng(1234);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto randShape = [&](int64_t minRank, int64_t maxRank) {
    Shape s(size_t(pick(minRank, maxRank)));
    for (auto &d : s) d = pick(0, 3);
    return s;
  };
  auto randInts = [&](DType dt, Shape s, int64_t lo, int64_t hi) {
    std::vector<int64_t> v(size_t(numelOf(s)));
    for (auto &x : v) x = pick(lo, hi);
    return Tensor::fromInts(dt, s, v);
  };
  auto maybeKnown = [&](Tensor t) { return pick(0, 1) ? cst(t) : in(t); };
  const OpKind ops[] = {OpKind::Transpose,
                        OpKind::GatherElements,
                        OpKind::GatherND,
                        OpKind::ScatterElements,
                        OpKind::ScatterND,
                        OpKind::Tile,
                        OpKind::Pad,
                        OpKind::Split,
                        OpKind::Trilu,
                        OpKind::OneHot,
                        OpKind::Compress,
                        OpKind::Unique,
                        OpKind::ReverseSequence,
                        OpKind::CenterCropPad,
                        OpKind::TensorScatter,
                        OpKind::EyeLike,
                        OpKind::NonZero,
                        OpKind::NonMaxSuppression};
  int ran = 0, succeeded = 0;
  for (int iter = 0; iter < 400; ++iter) {
    for (OpKind op : ops) {
      Tensor x = randInts(DType::I32, randShape(0, 3), -3, 3);
      int64_t r = x.rank();
      Tensor idx = randInts(pick(0, 1) ? DType::I64 : DType::I32, randShape(0, 3), -4, 4);
      Attrs a;
      if (pick(0, 1)) a.set("axis", pick(-3, 3));
      std::vector<std::optional<Input>> ins;
      int outputs = 1;
      switch (op) {
      case OpKind::Transpose: {
        std::vector<int64_t> perm(size_t(pick(0, 3)));
        for (auto &p : perm) p = pick(-1, 3);
        if (pick(0, 1)) a.set("perm", perm);
        ins = {in(x)};
        break;
      }
      case OpKind::GatherElements:
      case OpKind::GatherND:
        if (op == OpKind::GatherND && pick(0, 1)) a.set("batch_dims", pick(0, 2));
        ins = {in(x), in(idx)};
        break;
      case OpKind::ScatterElements:
      case OpKind::ScatterND: {
        const char *reds[] = {"none", "add", "mul", "max", "min"};
        a.set("reduction", std::string(reds[pick(0, 4)]));
        ins = {in(x), in(idx), in(randInts(DType::I32, randShape(0, 3), -3, 3))};
        if (pick(0, 1)) ins[2] = in(randInts(DType::I32, idx.shape(), -3, 3));
        break;
      }
      case OpKind::Tile:
        ins = {in(x), maybeKnown(randInts(DType::I64, {r}, -1, 2))};
        break;
      case OpKind::Pad: {
        const char *modes[] = {"constant", "reflect", "edge", "wrap"};
        a.set("mode", std::string(modes[pick(0, 3)]));
        int64_t n = pick(0, 1) ? 2 * r : pick(0, 4);
        ins = {in(x), maybeKnown(randInts(DType::I64, {n}, -3, 3))};
        if (pick(0, 1)) ins.push_back(in(randInts(DType::I32, {}, 0, 9)));
        break;
      }
      case OpKind::Split:
        outputs = int(pick(1, 3));
        ins = {in(x)};
        if (pick(0, 1))
          ins.push_back(maybeKnown(randInts(DType::I64, {pick(0, 3)}, -1, 3)));
        else if (pick(0, 1))
          a.set("num_outputs", pick(0, 3));
        break;
      case OpKind::Trilu:
        ins = {in(x), in(randInts(DType::I64, {}, -3, 3))};
        break;
      case OpKind::OneHot:
        ins = {in(idx), maybeKnown(randInts(DType::I64, {}, -1, 4)),
               in(randInts(DType::F32, {2}, 0, 5))};
        break;
      case OpKind::Compress:
        ins = {in(x), maybeKnown(randInts(DType::Bool, {pick(0, 4)}, 0, 1))};
        break;
      case OpKind::Unique:
        outputs = 4;
        a.set("sorted", pick(0, 1));
        ins = {in(x)};
        break;
      case OpKind::ReverseSequence:
        ins = {in(x), in(randInts(DType::I64, {pick(0, 3)}, -1, 3))};
        break;
      case OpKind::CenterCropPad:
        ins = {in(x), maybeKnown(randInts(DType::I64, {pick(0, 3)}, -1, 4))};
        break;
      case OpKind::TensorScatter:
        ins = {in(x), in(randInts(DType::I32, randShape(0, 3), 0, 3)),
               in(randInts(DType::I64, {pick(0, 3)}, -2, 4))};
        break;
      case OpKind::EyeLike:
        a.set("k", pick(-3, 3));
        ins = {in(x)};
        break;
      case OpKind::NonZero:
        ins = {in(x)};
        break;
      case OpKind::NonMaxSuppression:
        ins = {in(randInts(DType::F32, randShape(3, 3), 0, 3)),
               in(randInts(DType::F32, randShape(3, 3), 0, 3)),
               in(randInts(DType::I64, {1}, 0, 3))};
        break;
      default:
        break;
      }
      NodeRun n(op, ins, a, outputs);
      auto res = n.run();
      ++ran;
      if (res.ok())
        ++succeeded;
      else
        EXPECT_EQ(res.error().kind(), ErrorKind::User) << res.error().render();
    }
  }
  EXPECT_GT(succeeded, ran / 20); // the generator reaches the kernels, not only the checks
}
