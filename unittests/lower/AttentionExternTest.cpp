// The lowering of Attention to the fused extern coil_cpu_attention_* (lower/ops/
// LinalgAttention.cpp): which forms take it (one extern call, Q/K/V/mask read in place through
// their views, no copy) and which keep the decomposition; each graph is also evaluated by the
// Loop IR evaluator (which calls the CPU kernel) against the reference interpreter.
#include "LowerTestUtil.h"

#include <gtest/gtest.h>

using namespace coil;
using namespace coil::lowertest;

namespace {

const SymInt N = SymInt::symbol("N");
const std::vector<SymBindings> kSizes = {{{"N", 1}}, {{"N", 3}}, {{"N", 130}}};

Tolerance tolOf(DType t) {
  switch (t) {
  case DType::F64:
    return {1e-11, 1e-11};
  case DType::F32:
    return {1e-4, 1e-4};
  case DType::F16:
    return {3e-3, 3e-3};
  default:
    return {2e-2, 2e-2};
  }
}

struct Counts {
  int attention = 0, externs = 0, pointwise = 0, reductions = 0;
};

Counts countsOf(const Graph &g) {
  Counts c;
  auto p = loop::lowerGraph(g);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().render());
  if (!p.ok()) return c;
  for (const loop::Node &n : p->nodes) {
    if (const auto *e = std::get_if<loop::ExternNode>(&n.kind)) {
      ++c.externs;
      if (e->function.rfind("coil_cpu_attention_", 0) == 0) ++c.attention;
    }
    c.pointwise += n.isPointwise() ? 1 : 0;
    c.reductions += n.isReduction() ? 1 : 0;
  }
  return c;
}

ValueId perm(GraphBuilder &b, ValueId x, std::vector<int64_t> p) {
  return b.op(OpKind::Transpose, {x}, attrs({{"perm", p}}));
}

TEST(AttentionExtern, FourDGroupedQueryEveryDType) {
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    GraphBuilder b;
    ValueId q = b.input("q", t, {2, 4, N, 8}), k = b.input("k", t, {2, 2, N + 2, 8}),
            v = b.input("v", t, {2, 2, N + 2, 6});
    b.output(b.op(OpKind::Attention, {q, k, v}));
    Counts c = countsOf(b.g);
    EXPECT_EQ(c.attention, 1) << dtypeName(t);
    EXPECT_EQ(c.externs, 1) << dtypeName(t);
    // No copy: the extern stores Y, a graph output, as [B, H, S, Dv].
    EXPECT_EQ(c.pointwise, 0) << dtypeName(t);
    EXPECT_EQ(c.reductions, 0) << dtypeName(t);
    checkGraph(b.g, kSizes, tolOf(t), {}, std::string("4-D GQA ") + std::string(dtypeName(t)));
  }
}

TEST(AttentionExtern, ViewsOfAFusedProjectionCostNoCopy) {
  // x [2, N, 3*H*D] split into Q, K, V, each reshaped to heads and transposed; Y transposed,
  // reshaped back and projected: every one of them is a view, and the GEMM reads the attention
  // result in place.
  const int64_t H = 3, D = 16;
  GraphBuilder b;
  ValueId x = b.input("x", DType::F32, {2, N, 3 * H * D});
  auto parts = b.node(OpKind::Split, {x, b.ints("split", {H * D, H * D, H * D})},
                      attrs({{"axis", int64_t(2)}}), 3);
  ValueId shape = b.symconst("heads", {2, N, H, D});
  std::vector<ValueId> qkv;
  for (ValueId p : parts) qkv.push_back(perm(b, b.op(OpKind::Reshape, {p, shape}), {0, 2, 1, 3}));
  ValueId y = b.op(OpKind::Attention, {qkv[0], qkv[1], qkv[2]},
                   attrs({{"is_causal", int64_t(1)}, {"scale", 0.3}}));
  ValueId back = b.op(OpKind::Reshape, {perm(b, y, {0, 2, 1, 3}), b.symconst("o", {2, N, H * D})});
  std::mt19937_64 rng(1);
  ValueId w = b.constant("w", randomTensor(DType::F32, {H * D, 8}, rng));
  b.output(b.op(OpKind::MatMul, {back, w}));
  Counts c = countsOf(b.g);
  EXPECT_EQ(c.attention, 1);
  EXPECT_EQ(c.externs, 2);
  EXPECT_EQ(c.pointwise, 0) << loop::printLoopProgram(*loop::lowerGraph(b.g));
  checkGraph(b.g, kSizes, tolOf(DType::F32), {}, "fused projection");
}

TEST(AttentionExtern, ThreeDInputs) {
  for (int64_t hkv : {4, 2, 1}) {
    GraphBuilder b;
    ValueId q = b.input("q", DType::F32, {2, N, 4 * 8}),
            k = b.input("k", DType::F32, {2, 5, hkv * 8}),
            v = b.input("v", DType::F32, {2, 5, hkv * 4});
    b.output(b.op(OpKind::Attention, {q, k, v},
                  attrs({{"q_num_heads", int64_t(4)}, {"kv_num_heads", hkv}})));
    Counts c = countsOf(b.g);
    EXPECT_EQ(c.attention, 1);
    EXPECT_EQ(c.pointwise, 0);
    checkGraph(b.g, kSizes, tolOf(DType::F32), {}, "3-D, kv heads " + std::to_string(hkv));
  }
}

TEST(AttentionExtern, MasksAndTheirBroadcasts) {
  struct M {
    DType t;
    std::vector<SymInt> shape;
    bool fused;
  };
  const SymInt T = N + 1;
  for (const M &m : {M{DType::Bool, {N, T}, true}, M{DType::F32, {2, 1, 1, T}, true},
                     M{DType::F32, {2, 4, N, T}, true}, M{DType::Bool, {T}, true},
                     M{DType::F32, {1, 4, 1, T}, true}, M{DType::F16, {N, T}, false},
                     M{DType::F32, {N, 1}, false}, M{DType::I64, {N, T}, false}}) {
    GraphBuilder b;
    ValueId q = b.input("q", DType::F32, {2, 4, N, 8}), k = b.input("k", DType::F32, {2, 4, T, 8}),
            v = b.input("v", DType::F32, {2, 4, T, 8}), mask = b.input("mask", m.t, m.shape);
    b.output(b.op(OpKind::Attention, {q, k, v, mask}));
    std::string what = std::string("mask ") + std::string(dtypeName(m.t)) + " rank " +
                       std::to_string(m.shape.size());
    EXPECT_EQ(countsOf(b.g).attention, m.fused ? 1 : 0) << what;
    if (m.t == DType::I64) continue; // the decomposition's own tests cover integer masks
    RandomOptions o;
    checkGraph(b.g, kSizes, tolOf(DType::F32), o, what);
  }
}

TEST(AttentionExtern, FullyMaskedRowsAreZeros) {
  GraphBuilder b;
  ValueId q = b.input("q", DType::F32, {1, 2, 3, 4}), k = b.input("k", DType::F32, {1, 2, 5, 4}),
          v = b.input("v", DType::F32, {1, 2, 5, 4}), mask = b.input("mask", DType::Bool, {3, 5});
  b.output(b.op(OpKind::Attention, {q, k, v, mask}, attrs({{"softcap", 2.0}})));
  EXPECT_EQ(countsOf(b.g).attention, 1);
  std::mt19937_64 rng(3);
  std::vector<Tensor> ins = randomInputs(b.g, {}, 5);
  // Row 1 masked everywhere, row 2 partly.
  ins[3] = Tensor::fromInts(DType::Bool, {3, 5}, {1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0});
  expectMatchesInterpreter(b.g, ins, tolOf(DType::F32), "fully masked row");
  auto p = loop::lowerGraph(b.g);
  ASSERT_TRUE(p.ok());
  auto got = loop::evaluateLoopProgram(*p, ins);
  ASSERT_TRUE(got.ok());
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t e = 0; e < 4; ++e) EXPECT_EQ((*got)[0].getDouble((h * 3 + 1) * 4 + e), 0.0);
}

TEST(AttentionExtern, StridedLastDimIsCopied) {
  // K given as the transpose of a [B, H, D, T] tensor: its head dim is not contiguous, so K is
  // copied once; Q and V are read in place.
  GraphBuilder b;
  ValueId q = b.input("q", DType::F32, {2, 2, N, 8}), kt = b.input("kt", DType::F32, {2, 2, 8, 6}),
          v = b.input("v", DType::F32, {2, 2, 6, 8});
  b.output(b.op(OpKind::Attention, {q, perm(b, kt, {0, 1, 3, 2}), v}));
  Counts c = countsOf(b.g);
  EXPECT_EQ(c.attention, 1);
  EXPECT_EQ(c.pointwise, 1); // K
  checkGraph(b.g, kSizes, tolOf(DType::F32), {}, "transposed K");
}

TEST(AttentionExtern, UnsupportedFormsKeepTheDecomposition) {
  // A past cache, a sliding window, and the QK^T output.
  GraphBuilder b;
  ValueId q = b.input("q", DType::F32, {1, 2, N, 4}), k = b.input("k", DType::F32, {1, 2, 3, 4}),
          v = b.input("v", DType::F32, {1, 2, 3, 4}), pk = b.input("pk", DType::F32, {1, 2, 2, 4}),
          pv = b.input("pv", DType::F32, {1, 2, 2, 4});
  b.output(b.op(OpKind::Attention, {q, k, v, kNoValue, pk, pv}));
  b.output(b.op(OpKind::Attention, {q, k, v}, attrs({{"left_window_size", int64_t(1)}})));
  auto outs = b.node(OpKind::Attention, {q, k, v}, {}, 4);
  b.output(outs[3]);
  Counts c = countsOf(b.g);
  EXPECT_EQ(c.attention, 0);
  checkGraph(b.g, kSizes, tolOf(DType::F32), {}, "decomposed forms");
}

} // namespace
