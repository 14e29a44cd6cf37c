// Lowering of the DataMovement family: each op lowered, evaluated as Loop IR and compared with
// the reference interpreter on random inputs (with a dynamic dim), plus the structure relied on
// (views create no node).
#include "LowerRdTestUtil.h"

using namespace coil;
using namespace coil::rdtest;

namespace {

SymInt N() {
  return SymInt::symbol("N");
}

/// Nodes of the program other than its inputs and constants.
int computeNodes(const loop::LoopProgram &p) {
  return countNodes(p, &loop::Node::isPointwise) + countNodes(p, &loop::Node::isReduction) +
         countNodes(p, &loop::Node::isExtern);
}

TEST(DataMovementLower, TransposeIsAView) {
  for (auto perm : {std::vector<int64_t>{2, 0, 1}, std::vector<int64_t>{}}) {
    Builder b;
    b.symbol("N", 1, 64);
    ValueId x = b.input(DType::F32, {N(), 3, 4});
    Attrs a;
    if (!perm.empty()) a.set("perm", perm);
    ValueId t = b.node1(OpKind::Transpose, {x}, a);
    // Reduce over the transposed tensor: the reduction reads x through the permuted view.
    b.outputs({t, b.node1(OpKind::ReduceSum, {t, b.ints({0})})});
    auto p = check(b.g, {{random(DType::F32, {2, 3, 4})}, {random(DType::F32, {5, 3, 4})}});
    ASSERT_TRUE(p);
    EXPECT_EQ(countNodes(*p, &loop::Node::isReduction), 1);
    for (const loop::Node &n : p->nodes)
      if (auto *r = std::get_if<loop::ReductionNode>(&n.kind))
        for (const loop::Stmt &s : r->body.stmts)
          if (s.kind == loop::Stmt::Kind::Load)
            EXPECT_TRUE(p->nodes[size_t(s.node)].kind.index() == 0) << "reads x directly";
  }
}

TEST(DataMovementLower, Split) {
  struct Case {
    int64_t axis;
    std::optional<std::vector<int64_t>> split;
    size_t outs;
    Shape shape;
    std::vector<SymInt> sym;
  };
  std::vector<Case> cases = {
      {1, std::vector<int64_t>{2, 0, 5}, 3, {3, 7}, {N(), 7}},
      {1, std::nullopt, 3, {3, 7}, {N(), 7}}, // 3, 3, 1
      {0, std::nullopt, 2, {6, 2}, {N(), 2}},
      {0, std::nullopt, 2, {5, 2}, {N(), 2}}, // 3, 2
      {-1, std::vector<int64_t>{1, 6}, 2, {2, 7}, {N(), 7}},
  };
  for (const Case &c : cases) {
    Builder b;
    b.symbol("N", 1, 64);
    ValueId x = b.input(DType::I32, c.sym);
    std::vector<ValueId> ins{x};
    Attrs a = attrs({{"axis", c.axis}});
    if (c.split)
      ins.push_back(b.ints(*c.split));
    else if (c.outs == 3)
      a.set("num_outputs", int64_t(3));
    b.outputs(b.node(OpKind::Split, ins, a, c.outs));
    auto p = check(b.g, {{random(DType::I32, c.shape, -9, 9)}});
    ASSERT_TRUE(p);
  }
}

TEST(DataMovementLower, Tile) {
  Builder b;
  b.symbol("N", 1, 64);
  ValueId x = b.input(DType::F32, {N(), 1, 3});
  b.outputs({b.node1(OpKind::Tile, {x, b.ints({2, 3, 1})})});
  auto p = check(b.g, {{random(DType::F32, {2, 1, 3})}, {random(DType::F32, {3, 1, 3})}});
  ASSERT_TRUE(p);
  // A tile is a view: only the copy of the output (if any) computes.
  EXPECT_LE(computeNodes(*p), 1);
}

TEST(DataMovementLower, PadModes) {
  struct Case {
    std::vector<int64_t> pads;
    std::optional<std::vector<int64_t>> axes;
  };
  std::vector<Case> cases = {
      {{1, 2, 0, 3}, std::nullopt},   // grow both dims
      {{0, -1, 1, 2}, std::nullopt},  // crop one end of dim 1, pad the other dims
      {{-1, 3, 1, -2}, std::nullopt}, // crop and pad in each dim
      {{2, 1}, std::vector<int64_t>{-1}},
      {{4, 5, 0, 0}, std::nullopt}, // wider than the dim: reflect and wrap go around
  };
  for (std::string mode : {"constant", "edge", "reflect", "wrap"})
    for (const Case &c : cases)
      for (bool value : {false, true}) {
        if (value && mode != "constant") continue;
        SCOPED_TRACE(mode + " pads " + std::to_string(c.pads[0]) + "," + std::to_string(c.pads[1]) +
                     " value " + std::to_string(value));
        Builder b;
        b.symbol("N", 1, 64);
        ValueId x = b.input(DType::F32, {N(), 4});
        ValueId cv = value ? b.constant(Tensor::scalar(DType::F32, 7.5)) : kNoValue;
        std::vector<ValueId> ins{x, b.ints(c.pads), cv};
        if (c.axes) ins.push_back(b.ints(*c.axes));
        b.outputs({b.node1(OpKind::Pad, ins, attrs({{"mode", mode}}))});
        check(b.g, {{random(DType::F32, {3, 4})}, {random(DType::F32, {5, 4})}});
      }
}

TEST(DataMovementLower, PadEdgeWrapReflectAreViews) {
  for (std::string mode : {"edge", "reflect", "wrap"}) {
    Builder b;
    b.symbol("N", 2, 64);
    ValueId x = b.input(DType::F32, {N(), 4});
    ValueId p = b.node1(OpKind::Pad, {x, b.ints({1, 1, 2, 2})}, attrs({{"mode", mode}}));
    b.outputs({b.node1(OpKind::ReduceMax, {p, b.ints({1})})});
    auto prog = check(b.g, {{random(DType::F32, {3, 4})}});
    ASSERT_TRUE(prog);
    EXPECT_EQ(computeNodes(*prog), 1) << mode; // the reduction alone
  }
}

TEST(DataMovementLower, PadIntegerAndAttributeForm) {
  Builder b;
  b.symbol("N", 1, 64);
  ValueId x = b.input(DType::I64, {N(), 3});
  b.outputs({b.node1(OpKind::Pad, {x, b.ints({1, 0, 0, 2}),
                                   b.constant(Tensor::fromInts(DType::I64, {1}, {-4}))})});
  check(b.g, {{random(DType::I64, {2, 3}, -9, 9)}});
}

TEST(DataMovementLower, CenterCropPad) {
  for (auto shape :
       {std::vector<int64_t>{2, 3}, std::vector<int64_t>{7, 6}, std::vector<int64_t>{3, 8}}) {
    SCOPED_TRACE(std::to_string(shape[0]) + "x" + std::to_string(shape[1]));
    Builder b;
    ValueId x = b.input(DType::F32, {5, 4});
    b.outputs({b.node1(OpKind::CenterCropPad, {x, b.ints(shape)})});
    check(b.g, {{random(DType::F32, {5, 4})}});
  }
  Builder b;
  b.symbol("N", 1, 64);
  ValueId x = b.input(DType::F32, {N(), 5, 4});
  b.outputs({b.node1(OpKind::CenterCropPad, {x, b.ints({2})},
                     attrs({{"axes", std::vector<int64_t>{-1}}}))});
  check(b.g, {{random(DType::F32, {2, 5, 4})}});
}

TEST(DataMovementLower, GatherElements) {
  for (int64_t axis : {0, 1}) {
    Builder b;
    b.symbol("N", 1, 64);
    ValueId x = b.input(DType::F32, {N(), 4});
    int64_t w = axis == 0 ? 3 : 6; // off the axis, indices may not exceed data
    ValueId ind = b.input(DType::I32, {N(), w});
    b.outputs({b.node1(OpKind::GatherElements, {x, ind}, attrs({{"axis", axis}}))});
    // Negative indices count from the end.
    int64_t lo = axis == 0 ? -3 : -4, hi = axis == 0 ? 2 : 3;
    Tensor ind3 = random(DType::I32, {3, w}, lo, hi, 5);
    check(b.g, {{random(DType::F32, {3, 4}), ind3}});
  }
}

TEST(DataMovementLower, GatherND) {
  {
    Builder b;
    b.symbol("N", 1, 64);
    ValueId x = b.input(DType::F32, {3, 4, 5});
    ValueId ind = b.input(DType::I64, {N(), 2});
    b.outputs({b.node1(OpKind::GatherND, {x, ind})});
    Tensor i = Tensor::fromInts(DType::I64, {4, 2}, {0, 1, 2, -1, -3, 0, 1, 3});
    check(b.g, {{random(DType::F32, {3, 4, 5}), i}});
  }
  {
    Builder b;
    b.symbol("N", 1, 64);
    ValueId x = b.input(DType::I32, {N(), 4, 5});
    ValueId ind = b.input(DType::I64, {N(), 3, 1});
    b.outputs({b.node1(OpKind::GatherND, {x, ind}, attrs({{"batch_dims", int64_t(1)}}))});
    check(b.g, {{random(DType::I32, {2, 4, 5}, -9, 9), random(DType::I64, {2, 3, 1}, -4, 3, 3)}});
  }
  {
    Builder b; // full tuples: scalars gathered
    ValueId x = b.input(DType::F32, {3, 4});
    ValueId ind = b.input(DType::I64, {5, 2});
    b.outputs({b.node1(OpKind::GatherND, {x, ind})});
    Tensor i = Tensor::fromInts(DType::I64, {5, 2}, {0, 1, 2, 3, 1, 1, 0, 0, -1, -1});
    check(b.g, {{random(DType::F32, {3, 4}), i}});
  }
}

TEST(DataMovementLower, ScatterElements) {
  for (std::string red : {"none", "add", "mul", "max", "min"})
    for (int64_t axis : {0, 1})
      for (DType t : {DType::F32, DType::I32}) {
        SCOPED_TRACE(red + " axis " + std::to_string(axis) + " " + std::string(dtypeName(t)));
        Builder b;
        b.symbol("N", 1, 64);
        ValueId x = b.input(t, {N(), 4});
        ValueId ind = b.input(DType::I64, {2, 3});
        ValueId upd = b.input(t, {2, 3});
        b.outputs({b.node1(OpKind::ScatterElements, {x, ind, upd},
                           attrs({{"axis", axis}, {"reduction", red}}))});
        // Duplicate targets: "none" keeps the last update, the others combine all of them.
        Tensor i = axis == 0 ? Tensor::fromInts(DType::I64, {2, 3}, {0, 2, -1, 0, 2, 1})
                             : Tensor::fromInts(DType::I64, {2, 3}, {3, 3, -1, 0, 1, 0});
        check(b.g, {{random(t, {3, 4}, -5, 5, 1), i, random(t, {2, 3}, -5, 5, 2)}});
      }
  // Scatter (deprecated) is ScatterElements without reduction.
  Builder b;
  ValueId x = b.input(DType::F32, {3, 3});
  ValueId ind = b.input(DType::I32, {1, 2});
  ValueId upd = b.input(DType::F32, {1, 2});
  b.outputs({b.node1(OpKind::Scatter, {x, ind, upd}, attrs({{"axis", int64_t(1)}}))});
  check(b.g, {{random(DType::F32, {3, 3}), Tensor::fromInts(DType::I32, {1, 2}, {1, 2}),
               random(DType::F32, {1, 2}, -2, 2, 4)}});
}

TEST(DataMovementLower, ScatterND) {
  for (std::string red : {"none", "add", "mul", "max", "min"}) {
    SCOPED_TRACE(red);
    {
      Builder b; // slices: indices [3, 1] into [4, N]
      b.symbol("N", 1, 64);
      ValueId x = b.input(DType::F32, {4, N()});
      ValueId ind = b.input(DType::I64, {3, 1});
      ValueId upd = b.input(DType::F32, {3, N()});
      b.outputs({b.node1(OpKind::ScatterND, {x, ind, upd}, attrs({{"reduction", red}}))});
      Tensor i = Tensor::fromInts(DType::I64, {3, 1}, {1, -1, 1});
      check(b.g, {{random(DType::F32, {4, 5}), i, random(DType::F32, {3, 5}, -2, 2, 3)}});
    }
    {
      Builder b; // elements: indices [2, 2, 2] into [3, 4]
      ValueId x = b.input(DType::I32, {3, 4});
      ValueId ind = b.input(DType::I64, {2, 2, 2});
      ValueId upd = b.input(DType::I32, {2, 2});
      b.outputs({b.node1(OpKind::ScatterND, {x, ind, upd}, attrs({{"reduction", red}}))});
      Tensor i = Tensor::fromInts(DType::I64, {2, 2, 2}, {0, 0, 2, 3, 0, 0, 1, -2});
      check(b.g, {{random(DType::I32, {3, 4}, -9, 9), i, random(DType::I32, {2, 2}, -9, 9, 2)}});
    }
  }
}

TEST(DataMovementLower, ScatterBool) {
  for (std::string red : {"none", "add", "mul"}) {
    Builder b;
    ValueId x = b.input(DType::Bool, {2, 3});
    ValueId ind = b.input(DType::I64, {2, 2});
    ValueId upd = b.input(DType::Bool, {2, 2});
    b.outputs({b.node1(OpKind::ScatterElements, {x, ind, upd},
                       attrs({{"axis", int64_t(1)}, {"reduction", red}}))});
    check(b.g, {{random(DType::Bool, {2, 3}, 0, 1, 3),
                 Tensor::fromInts(DType::I64, {2, 2}, {0, 0, 2, 1}),
                 random(DType::Bool, {2, 2}, 0, 1, 4)}});
  }
}

TEST(DataMovementLower, TensorScatter) {
  for (std::string mode : {"linear", "circular"})
    for (bool withIdx : {false, true}) {
      SCOPED_TRACE(mode + " write_indices " + std::to_string(withIdx));
      Builder b;
      b.symbol("N", 1, 64);
      ValueId cache = b.input(DType::F32, {2, 3, 6, 4});
      ValueId upd = b.input(DType::F32, {2, 3, N(), 4});
      ValueId wi = withIdx ? b.input(DType::I64, {2}) : kNoValue;
      b.outputs({b.node1(OpKind::TensorScatter, {cache, upd, wi}, attrs({{"mode", mode}}))});
      std::vector<Tensor> in{random(DType::F32, {2, 3, 6, 4}),
                             random(DType::F32, {2, 3, 2, 4}, -2, 2, 2)};
      if (withIdx) in.push_back(Tensor::fromInts(DType::I64, {2}, {mode == "linear" ? 4 : 5, 1}));
      check(b.g, {in});
    }
}

TEST(DataMovementLower, Trilu) {
  for (int64_t upper : {0, 1})
    for (int64_t k : {-1, 0, 2}) {
      Builder b;
      b.symbol("N", 1, 64);
      ValueId x = b.input(DType::F32, {2, N(), 5});
      ValueId kv = b.input(DType::I64, {}); // read at run time
      b.outputs({b.node1(OpKind::Trilu, {x, kv}, attrs({{"upper", upper}}))});
      check(b.g, {{random(DType::F32, {2, 4, 5}), Tensor::fromInts(DType::I64, {}, {k})}});
    }
  Builder b;
  ValueId x = b.input(DType::I32, {3, 3});
  b.outputs({b.node1(OpKind::Trilu, {x})});
  check(b.g, {{random(DType::I32, {3, 3}, -9, 9)}});
}

TEST(DataMovementLower, EyeLike) {
  for (int64_t k : {-1, 0, 3}) {
    Builder b;
    b.symbol("N", 1, 64);
    ValueId x = b.input(DType::F32, {N(), 4});
    b.outputs({b.node1(OpKind::EyeLike, {x}, attrs({{"k", k}})),
               b.node1(OpKind::EyeLike, {x}, attrs({{"k", k}, {"dtype", int64_t(7)}}))});
    check(b.g, {{random(DType::F32, {3, 4})}, {random(DType::F32, {6, 4})}});
  }
}

TEST(DataMovementLower, OneHot) {
  for (int64_t axis : {-1, 0, 1})
    for (DType it : {DType::I64, DType::F32}) {
      SCOPED_TRACE("axis " + std::to_string(axis) + " " + std::string(dtypeName(it)));
      Builder b;
      b.symbol("N", 1, 64);
      ValueId ind = b.input(it, {N(), 3});
      ValueId depth = b.constant(Tensor::fromInts(DType::I64, {}, {5}));
      ValueId vals = b.input(DType::F32, {2});
      b.outputs({b.node1(OpKind::OneHot, {ind, depth, vals}, attrs({{"axis", axis}}))});
      Tensor i = isFloat(it) ? Tensor::fromDoubles(it, {2, 3}, {0, 4, -1, 2.5, 7, -5})
                             : Tensor::fromInts(it, {2, 3}, {0, 4, -1, 3, 7, -5});
      check(b.g, {{i, Tensor::fromDoubles(DType::F32, {2}, {-1.5, 3})}});
    }
}

TEST(DataMovementLower, ReverseSequence) {
  for (int64_t batchAxis : {0, 1}) {
    Builder b;
    b.symbol("N", 1, 64);
    ValueId x = b.input(DType::F32, {4, 4, N()});
    ValueId lens = b.input(DType::I64, {4});
    b.outputs({b.node1(OpKind::ReverseSequence, {x, lens},
                       attrs({{"batch_axis", batchAxis}, {"time_axis", 1 - batchAxis}}))});
    check(b.g, {{random(DType::F32, {4, 4, 2}), Tensor::fromInts(DType::I64, {4}, {4, 0, 1, 3})}});
  }
}

TEST(DataMovementLower, Windows) {
  for (OpKind op : {OpKind::BlackmanWindow, OpKind::HammingWindow, OpKind::HannWindow})
    for (int64_t periodic : {0, 1})
      for (int64_t size : {1, 8, 11}) {
        SCOPED_TRACE(std::string(opName(op)) + " periodic " + std::to_string(periodic) + " size " +
                     std::to_string(size));
        Builder b;
        ValueId n = b.ints({size}, /*scalar=*/true);
        b.outputs(
            {b.node1(op, {n}, attrs({{"periodic", periodic}})),
             b.node1(op, {n}, attrs({{"periodic", periodic}, {"output_datatype", int64_t(11)}}))});
        check(b.g, {{}}, 1e-6, 1e-7);
      }
}

// Repeats, pads, split, depth, sizes read at run time: see DynShapeLowerTest.cpp.

} // namespace

namespace {

TEST(DataMovementLower, SymbolicPadsAndRepeats) {
  // Sizes known as SymInts (folded shape computations), not constants.
  Builder b;
  b.symbol("N", 1, 64);
  ValueId x = b.input(DType::F32, {N(), 3});
  ValueId pads = b.g.addSymConstant("pads", {0, N(), 1, 0});
  ValueId reps = b.g.addSymConstant("reps", {1, N()});
  b.outputs({b.node1(OpKind::Pad, {x, pads}), b.node1(OpKind::Tile, {x, reps}),
             b.node1(OpKind::Pad, {x, pads}, attrs({{"mode", "wrap"}}))});
  check(b.g, {{random(DType::F32, {2, 3})}, {random(DType::F32, {5, 3})}});
}

TEST(DataMovementLower, OneHotFloatDepth) {
  Builder b;
  ValueId ind = b.input(DType::I32, {4});
  ValueId depth = b.constant(Tensor::scalar(DType::F32, 3.5)); // ceil: 4
  ValueId vals = b.input(DType::I64, {2});
  b.outputs({b.node1(OpKind::OneHot, {ind, depth, vals})});
  check(b.g, {{Tensor::fromInts(DType::I32, {4}, {0, 3, -4, 4}),
               Tensor::fromInts(DType::I64, {2}, {5, 9})}});
}

} // namespace

namespace {

TEST(DataMovementLower, HalfPrecisionGatherScatter) {
  for (std::string red : {"none", "add", "max"}) {
    SCOPED_TRACE(red);
    Builder b;
    b.symbol("N", 1, 64);
    ValueId x = b.input(DType::F16, {N(), 5});
    ValueId ind = b.input(DType::I64, {2, 4});
    ValueId upd = b.input(DType::F16, {2, 4});
    ValueId s = b.node1(OpKind::ScatterElements, {x, ind, upd},
                        attrs({{"axis", int64_t(1)}, {"reduction", red}}));
    b.outputs({s, b.node1(OpKind::GatherElements, {s, ind}, attrs({{"axis", int64_t(1)}}))});
    Tensor i = Tensor::fromInts(DType::I64, {2, 4}, {0, 4, 4, -1, 2, 2, 2, 1});
    // f16 accumulates in f32 here and rounds once; the interpreter rounds after every update.
    check(b.g, {{random(DType::F16, {3, 5}), i, random(DType::F16, {2, 4}, -2, 2, 2)}}, 4e-3, 4e-3);
  }
}

} // namespace

namespace {

TEST(DataMovementLower, PadThatOnlyCropsIsAView) {
  Builder b;
  b.symbol("N", 3, 64);
  ValueId x = b.input(DType::F32, {N(), 6});
  ValueId p = b.node1(OpKind::Pad, {x, b.ints({-1, 0, -2, -3})});
  b.outputs({b.node1(OpKind::ReduceSum, {p, b.ints({1})})});
  auto prog = check(b.g, {{random(DType::F32, {4, 6})}, {random(DType::F32, {7, 6})}});
  ASSERT_TRUE(prog);
  EXPECT_EQ(computeNodes(*prog), 1); // the reduction alone
}

} // namespace
