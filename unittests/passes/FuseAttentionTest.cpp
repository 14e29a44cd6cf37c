// The attention fusion pass (passes/FuseAttention.h) on hand-built graphs: which chains become
// one Attention node (and with which is_causal, kv heads and mask), which stay, and that the
// fused graph computes what the original computes (both run by the reference interpreter on
// random inputs; rows masked everywhere included where the semantics agree).
#include "passes/FuseAttention.h"

#include "../lower/LowerTestUtil.h"
#include "ir/Verifier.h"

#include <functional>
#include <gtest/gtest.h>
#include <limits>

using namespace coil;
using namespace coil::lowertest;

namespace {

const SymInt N = SymInt::symbol("N");
const double kInf = std::numeric_limits<double>::infinity();
const double kMin = -3.4028234663852886e38; // float32's lowest

ValueId scalarC(GraphBuilder &b, DType t, double v) {
  return b.constant("c" + std::to_string(b.fresh++), Tensor::fromDoubles(t, {}, {v}));
}
ValueId perm(GraphBuilder &b, ValueId x, std::vector<int64_t> p) {
  return b.op(OpKind::Transpose, {x}, attrs({{"perm", p}}));
}
ValueId softmaxPV(GraphBuilder &b, ValueId scores, ValueId v, int64_t axis = -1) {
  return b.op(OpKind::MatMul, {b.op(OpKind::Softmax, {scores}, attrs({{"axis", axis}})), v});
}

struct Fused {
  Graph g;
  int count = 0;
  const Node *attention = nullptr;
};

Fused fuse(const Graph &g) {
  Fused f;
  auto r = fuseAttention(g, &f.count);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().render());
  if (!r.ok()) return f;
  f.g = std::move(*r);
  Status st = verifyGraph(f.g);
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().render());
  for (const Node &n : f.g.nodes())
    if (n.op == OpKind::Attention) f.attention = &n;
  return f;
}

/// The original and the fused graph, both interpreted, on the same inputs.
void expectSameResults(const Graph &g, const Graph &fused, const std::vector<Tensor> &ins,
                       Tolerance tol, const std::string &what) {
  auto want = interpret(g, ins);
  ASSERT_TRUE(want.ok()) << what << ": " << want.error().render();
  auto got = interpret(fused, ins);
  ASSERT_TRUE(got.ok()) << what << ": " << got.error().render();
  ASSERT_EQ(got->size(), want->size());
  for (size_t k = 0; k < got->size(); ++k)
    EXPECT_EQ(compareTensors((*got)[k], (*want)[k], tol), "") << what << ": output " << k;
}

void expectSame(const Graph &g, const Graph &fused, const std::string &what,
                Tolerance tol = {1e-5, 1e-5}) {
  uint64_t seed = 3;
  for (int64_t n : {1, 5, 9})
    expectSameResults(g, fused, randomInputs(g, {{"N", n}}, seed++), tol, what);
}

bool causalOf(const Fused &f) {
  return f.attention && f.attention->attrs.getInt("is_causal", 0) == 1;
}

TEST(FuseAttention, ScaledChainWithAdditiveMask) {
  // BERT: scores = Q K^T / 8 + (1 - mask) * finfo.min, K^T as Transpose(perm 0,2,3,1) of [B,T,H,D].
  GraphBuilder b;
  ValueId q = b.input("q", DType::F32, {2, 3, N, 8}), kbt = b.input("k", DType::F32, {2, N, 3, 8}),
          v = b.input("v", DType::F32, {2, 3, N, 8}), m = b.input("m", DType::F32, {2, 1, 1, N});
  ValueId s = b.op(OpKind::Div, {b.op(OpKind::MatMul, {q, perm(b, kbt, {0, 2, 3, 1})}),
                                 scalarC(b, DType::F32, 8)});
  ValueId ext = b.op(OpKind::Mul, {b.op(OpKind::Sub, {scalarC(b, DType::F32, 1), m}),
                                   scalarC(b, DType::F32, kMin)});
  b.output(softmaxPV(b, b.op(OpKind::Add, {s, ext}), v));
  Fused f = fuse(b.g);
  EXPECT_EQ(f.count, 1);
  ASSERT_TRUE(f.attention);
  EXPECT_FALSE(causalOf(f));
  EXPECT_EQ(f.attention->inputs.size(), 4u);
  EXPECT_DOUBLE_EQ(f.attention->attrs.getFloat("scale", 0), 0.125);
  // A 0/1 padding mask, batch row 1 padded everywhere (uniform in both).
  for (int64_t n : {1, 6}) {
    std::vector<Tensor> ins = randomInputs(b.g, {{"N", n}}, 9);
    std::vector<double> mv(size_t(2 * n), 1.0);
    for (int64_t j = 0; j < n; ++j) mv[size_t(n + j)] = 0;
    mv[0] = 0;
    ins[3] = Tensor::fromDoubles(DType::F32, {2, 1, 1, n}, mv);
    expectSameResults(b.g, f.g, ins, {1e-5, 1e-5}, "BERT chain");
  }
  // Only the attention is left: no MatMul, Softmax or Add of the scores.
  for (const Node &n : f.g.nodes())
    EXPECT_TRUE(n.op != OpKind::Softmax && n.op != OpKind::MatMul) << opName(n.op);
}

/// Q K^T * 0.25 with a causal triangle from Trilu through Where(tri, S, neg) (or the additive
/// Where(tri, 0, neg)), plus (optionally) a key padding mask [B, 1, 1, T] added.
Graph causalGraph(double neg, bool additive, bool padding, DType t = DType::F32) {
  GraphBuilder b;
  ValueId q = b.input("q", t, {1, 2, N, 4}), k = b.input("k", t, {1, 2, N, 4}),
          v = b.input("v", t, {1, 2, N, 4});
  ValueId s =
      b.op(OpKind::Mul, {b.op(OpKind::MatMul, {q, perm(b, k, {0, 1, 3, 2})}), scalarC(b, t, 0.25)});
  ValueId ones = b.op(OpKind::Expand, {scalarC(b, DType::Bool, 1), b.symconst("st", {N, N})});
  ValueId tri = b.op(OpKind::Trilu, {ones}, attrs({{"upper", int64_t(0)}}));
  if (additive)
    s = b.op(OpKind::Add, {s, b.op(OpKind::Where, {tri, scalarC(b, t, 0), scalarC(b, t, neg)})});
  else
    s = b.op(OpKind::Where, {tri, s, scalarC(b, t, neg)});
  if (padding) s = b.op(OpKind::Add, {s, b.input("pad", t, {1, 1, 1, N})});
  b.output(softmaxPV(b, s, v));
  return b.g;
}

TEST(FuseAttention, CausalMasks) {
  // The whole mask: is_causal, for -inf, finfo.min, or -1e4 (never a row masked everywhere).
  for (double neg : {-kInf, kMin, -1e4})
    for (bool additive : {false, true}) {
      Graph g = causalGraph(neg, additive, false);
      Fused f = fuse(g);
      std::string what = "causal " + std::to_string(neg) + (additive ? " added" : " where");
      EXPECT_EQ(f.count, 1) << what;
      EXPECT_TRUE(causalOf(f)) << what;
      EXPECT_EQ(f.attention ? f.attention->inputs.size() : 0u, 3u) << what << ": no attn_mask";
      expectSame(g, f.g, what);
    }
  // With a padding mask: a -inf triangle splits off as is_causal, the padding stays the mask.
  Graph g = causalGraph(-kInf, false, true);
  Fused f = fuse(g);
  EXPECT_TRUE(causalOf(f));
  EXPECT_EQ(f.attention ? f.attention->inputs.size() : 0u, 4u);
  expectSame(g, f.g, "-inf causal + padding");
  // A finite triangle with a padding mask stays part of the mask: a row that the padding masks
  // everywhere is uniform over every key in the original, which is_causal would change.
  g = causalGraph(kMin, true, true);
  f = fuse(g);
  EXPECT_EQ(f.count, 1);
  EXPECT_FALSE(causalOf(f));
  RandomOptions o;
  std::vector<Tensor> ins = randomInputs(g, {{"N", 4}}, 11, o);
  ins[3] = Tensor::fromDoubles(DType::F32, {1, 1, 1, 4}, {kMin, kMin, 0, 0}); // rows 0, 1 masked
  expectSameResults(g, f.g, ins, {1e-5, 1e-5}, "finite causal + padding, rows masked everywhere");
  // -1e4 is exact only as is_causal: with another term, no fusion.
  g = causalGraph(-1e4, false, true);
  EXPECT_EQ(fuse(g).count, 0);
}

/// Hugging Face's masks as recent exporters spell them: Where(Expand(And(pred, pad), [2, 1, N,
/// N]), 0, fill) added to the scores; pred made by `predicate` from the query index [1, 1, N, 1]
/// and the key index [1, 1, 1, N] (from Range(0, N)); pad a bool input [2, 1, 1, N] (with
/// `padPerQuery`, [2, 1, N, N]).
Graph hfMaskGraph(const std::function<ValueId(GraphBuilder &, ValueId, ValueId)> &predicate,
                  double fill, bool padPerQuery = false) {
  GraphBuilder b;
  ValueId q = b.input("q", DType::F32, {2, 2, N, 4}), k = b.input("k", DType::F32, {2, 2, N, 4}),
          v = b.input("v", DType::F32, {2, 2, N, 4}),
          pad = b.input("pad", DType::Bool, {2, 1, padPerQuery ? N : SymInt(1), N});
  ValueId s = b.op(OpKind::MatMul, {q, perm(b, k, {0, 1, 3, 2})});
  ValueId idx = b.op(OpKind::Range, {b.constant("r0", Tensor::fromInts(DType::I64, {}, {0})),
                                     b.symconst("rn", {N}, true),
                                     b.constant("r1", Tensor::fromInts(DType::I64, {}, {1}))});
  ValueId qi = b.op(OpKind::Reshape, {idx, b.symconst("qs", {1, 1, N, 1})}),
          kj = b.op(OpKind::Reshape, {idx, b.symconst("ks", {1, 1, 1, N})});
  ValueId both = b.op(OpKind::Expand, {b.op(OpKind::And, {predicate(b, qi, kj), pad}),
                                       b.symconst("ms", {2, 1, N, N})});
  ValueId mask =
      b.op(OpKind::Where, {both, scalarC(b, DType::F32, 0), scalarC(b, DType::F32, fill)});
  b.output(softmaxPV(b, b.op(OpKind::Add, {s, mask}), v));
  return b.g;
}

/// The encoders' padding mask: pred compares the query index with `bound`.
Graph paddingPredicateGraph(OpKind cmp, double bound) {
  return hfMaskGraph(
      [&](GraphBuilder &b, ValueId qi, ValueId) {
        return b.op(cmp,
                    {qi, b.constant("bound", Tensor::fromInts(DType::I64, {}, {int64_t(bound)}))});
      },
      kMin);
}

TEST(FuseAttention, PaddingMaskNarrowedToOneRowPerBatch) {
  // q >= 0 holds for every query: the mask is pad's one row per batch, [2, 1, 1, N] (a key mask
  // for the kernels), and the [2, 1, N, N] one is no longer made.
  for (OpKind cmp : {OpKind::GreaterOrEqual, OpKind::Greater}) {
    const double bound = cmp == OpKind::Greater ? -1 : 0;
    Graph g = paddingPredicateGraph(cmp, bound);
    Fused f = fuse(g);
    ASSERT_EQ(f.count, 1) << opName(cmp);
    ASSERT_TRUE(f.attention && f.attention->inputs.size() == 4u);
    const TensorType &mt = f.g.value(f.attention->inputs[3]).type;
    EXPECT_EQ(mt.shape, (std::vector<SymInt>{2, 1, 1, N})) << mt.str();
    for (const Node &n : f.g.nodes()) EXPECT_NE(n.op, OpKind::Expand) << "the wide mask is gone";
    // Batch 1 padded everywhere: uniform over its keys in both graphs.
    for (int64_t n : {1, 5}) {
      std::vector<Tensor> ins = randomInputs(g, {{"N", n}}, 21);
      std::vector<double> pv(size_t(2 * n), 1.0);
      for (int64_t j = 0; j < n; ++j) pv[size_t(n + j)] = j == n - 1 ? 1 : 0;
      pv[0] = 0;
      ins[3] = Tensor::fromDoubles(DType::Bool, {2, 1, 1, n}, pv);
      expectSameResults(g, f.g, ins, {1e-5, 1e-5}, "narrowed padding mask");
    }
  }
  // q >= 1 is false at the first query: the mask keeps its query dim.
  Graph g = paddingPredicateGraph(OpKind::GreaterOrEqual, 1);
  Fused f = fuse(g);
  ASSERT_EQ(f.count, 1);
  ASSERT_TRUE(f.attention && f.attention->inputs.size() == 4u);
  EXPECT_EQ(f.g.value(f.attention->inputs[3]).type.shape, (std::vector<SymInt>{2, 1, N, N}));
  expectSame(g, f.g, "q >= 1 and padding");
}

/// The decoders' mask: pred is the causal j <= i.
Graph decoderMaskGraph(double fill, bool padPerQuery = false) {
  return hfMaskGraph(
      [](GraphBuilder &b, ValueId qi, ValueId kj) {
        return b.op(OpKind::LessOrEqual, {kj, qi});
      },
      fill, padPerQuery);
}

TEST(FuseAttention, DecoderMaskSplitIntoCausalAndKeys) {
  // finfo.min: is_causal and the key mask [2, 1, 1, N]; the rows that the padding masks at
  // every key they see (left padding, a batch padded everywhere) are uniform over all keys in
  // the original: the fused graph gives them the mean of V.
  Graph g = decoderMaskGraph(kMin);
  Fused f = fuse(g);
  ASSERT_EQ(f.count, 1);
  ASSERT_TRUE(f.attention && f.attention->inputs.size() == 4u);
  EXPECT_TRUE(causalOf(f));
  EXPECT_EQ(f.g.value(f.attention->inputs[3]).type.shape, (std::vector<SymInt>{2, 1, 1, N}));
  for (int64_t n : {1, 3, 7}) {
    std::vector<Tensor> ins = randomInputs(g, {{"N", n}}, 31);
    std::vector<double> pv(size_t(2 * n), 1.0);
    for (int64_t j = 0; j < n; ++j) pv[size_t(j)] = j >= n / 2 ? 1 : 0; // left padding
    for (int64_t j = 0; j < n; ++j) pv[size_t(n + j)] = 0;              // padded everywhere
    ins[3] = Tensor::fromDoubles(DType::Bool, {2, 1, 1, n}, pv);
    expectSameResults(g, f.g, ins, {1e-5, 1e-5}, "decoder mask, n " + std::to_string(n));
  }
  expectSame(g, f.g, "decoder mask, random padding");
  // A fill of -1e4 does not swamp the scores (a row padded everywhere is the softmax of its
  // scores over all keys, not uniform), and a padding per query is no key mask: both stay
  // whole.
  for (bool perQuery : {false, true}) {
    Graph w = decoderMaskGraph(perQuery ? kMin : -1e4, perQuery);
    Fused fw = fuse(w);
    ASSERT_EQ(fw.count, 1);
    EXPECT_FALSE(causalOf(fw));
    ASSERT_TRUE(fw.attention && fw.attention->inputs.size() == 4u);
    EXPECT_EQ(fw.g.value(fw.attention->inputs[3]).type.shape, (std::vector<SymInt>{2, 1, N, N}));
    // (With -1e4 a row padded everywhere is the softmax of s - 1e4, which f32 rounds in the
    // explicit graph: its values are compared elsewhere, not here.)
    if (perQuery) expectSame(w, fw.g, "padding per query");
  }
}

TEST(FuseAttention, BooleanMasksThroughWhere) {
  for (double neg : {-kInf, kMin, -1e4})
    for (bool negate : {false, true}) {
      GraphBuilder b;
      ValueId q = b.input("q", DType::F32, {2, 2, N, 4}),
              k = b.input("k", DType::F32, {2, 2, 5, 4}),
              v = b.input("v", DType::F32, {2, 2, 5, 4}),
              m = b.input("m", DType::Bool, {2, 1, N, 5});
      ValueId s = b.op(OpKind::MatMul, {q, perm(b, k, {0, 1, 3, 2})});
      ValueId c = scalarC(b, DType::F32, neg);
      s = negate ? b.op(OpKind::Where, {m, c, s}) : b.op(OpKind::Where, {m, s, c});
      b.output(softmaxPV(b, s, v));
      Fused f = fuse(b.g);
      std::string what = "where " + std::to_string(neg) + (negate ? " negated" : "");
      // -1e4 replaces a score: a row masked everywhere is uniform, which no mask reproduces.
      EXPECT_EQ(f.count, neg == -1e4 ? 0 : 1) << what;
      if (f.count == 0) continue;
      ASSERT_TRUE(f.attention);
      const TensorType &mt = f.g.value(f.attention->inputs[3]).type;
      EXPECT_EQ(mt.dtype, neg == -kInf ? DType::Bool : DType::F32) << what;
      if (neg == -kInf) {
        // Rows masked everywhere: NaN before, 0 after; compare on masks that keep a key.
        auto ins = randomInputs(b.g, {{"N", 3}}, 5);
        ins[3] = Tensor::fromInts(DType::Bool, {2, 1, 3, 5},
                                  {1, 0, 0, 1, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0,
                                   0, 0, 1, 0, 0, 1, 1, 0, 1, 1, 0, 1, 1, 1, 0});
        if (negate)
          for (int64_t i = 0; i < 30; ++i) ins[3].setInt(i, 1 - ins[3].getInt(i));
        expectSameResults(b.g, f.g, ins, {1e-5, 1e-5}, what);
      } else {
        expectSame(b.g, f.g, what); // finfo.min: rows masked everywhere stay uniform
      }
    }
}

TEST(FuseAttention, ProbabilitiesThroughCastsIdentityAndSafeSoftmax) {
  GraphBuilder b;
  ValueId q = b.input("q", DType::BF16, {1, 2, N, 4}), k = b.input("k", DType::BF16, {1, 2, 6, 4}),
          v = b.input("v", DType::BF16, {1, 2, 6, 4});
  ValueId s = b.op(OpKind::MatMul, {q, perm(b, k, {0, 1, 3, 2})});
  ValueId up = b.op(OpKind::Cast, {s}, attrs({{"to", int64_t(1)}}));
  ValueId p = b.op(OpKind::Softmax, {up}, attrs({{"axis", int64_t(-1)}}));
  ValueId safe = b.op(OpKind::Where, {b.op(OpKind::IsNaN, {p}), scalarC(b, DType::F32, 0), p});
  ValueId down = b.op(OpKind::Cast, {b.op(OpKind::Identity, {safe})}, attrs({{"to", int64_t(16)}}));
  b.output(b.op(OpKind::MatMul, {down, v}));
  Fused f = fuse(b.g);
  EXPECT_EQ(f.count, 1);
  expectSame(b.g, f.g, "casts and safe softmax", {2e-2, 2e-2});
}

TEST(FuseAttention, MaskOfAnotherFloatType) {
  // bf16 scores widened to f32, then an f32 constant mask added: converted when exact in bf16.
  for (double x : {0.0, 0.1}) {
    GraphBuilder b;
    ValueId q = b.input("q", DType::BF16, {1, 2, 3, 4}),
            k = b.input("k", DType::BF16, {1, 2, 3, 4}),
            v = b.input("v", DType::BF16, {1, 2, 3, 4});
    ValueId s = b.op(OpKind::Cast, {b.op(OpKind::MatMul, {q, perm(b, k, {0, 1, 3, 2})})},
                     attrs({{"to", int64_t(1)}}));
    ValueId m = b.constant("m", Tensor::fromDoubles(DType::F32, {1, 1, 1, 3}, {0, x, -kInf}));
    ValueId p = b.op(OpKind::Softmax, {b.op(OpKind::Add, {s, m})}, attrs({{"axis", int64_t(-1)}}));
    b.output(b.op(OpKind::MatMul, {b.op(OpKind::Cast, {p}, attrs({{"to", int64_t(16)}})), v}));
    Fused f = fuse(b.g);
    EXPECT_EQ(f.count, x == 0 ? 1 : 0) << x;
    if (f.count) expectSame(b.g, f.g, "f32 mask, bf16 scores", {2e-2, 2e-2});
  }
}

TEST(FuseAttention, RanksAndHeadLayouts) {
  {
    // 3-D [N, S, D] (the bmm form) and 2-D.
    GraphBuilder b;
    ValueId q = b.input("q", DType::F32, {6, N, 4}), k = b.input("k", DType::F32, {6, 5, 4}),
            v = b.input("v", DType::F32, {6, 5, 3});
    b.output(softmaxPV(b, b.op(OpKind::MatMul, {q, perm(b, k, {0, 2, 1})}), v));
    ValueId q2 = b.input("q2", DType::F32, {N, 4}), k2 = b.input("k2", DType::F32, {5, 4}),
            v2 = b.input("v2", DType::F32, {5, 3});
    b.output(softmaxPV(b, b.op(OpKind::MatMul, {q2, perm(b, k2, {1, 0})}), v2));
    Fused f = fuse(b.g);
    EXPECT_EQ(f.count, 2);
    expectSame(b.g, f.g, "3-D and 2-D");
  }
  {
    // Grouped-query heads repeated in place (Unsqueeze, Expand, Reshape) become kv heads;
    // one kv head broadcast by the MatMul too; K with a batch of 1 is expanded.
    GraphBuilder b;
    ValueId q = b.input("q", DType::F32, {2, 4, N, 4}), k = b.input("k", DType::F32, {2, 2, 5, 4}),
            v = b.input("v", DType::F32, {2, 2, 5, 4});
    auto repeat = [&](ValueId x) {
      ValueId u = b.op(OpKind::Unsqueeze, {x, b.ints("ax" + std::to_string(b.fresh++), {2})});
      ValueId e =
          b.op(OpKind::Expand, {u, b.ints("es" + std::to_string(b.fresh++), {2, 2, 2, 5, 4})});
      return b.op(OpKind::Reshape, {e, b.ints("rs" + std::to_string(b.fresh++), {2, 4, 5, 4})});
    };
    ValueId s = b.op(OpKind::MatMul, {q, perm(b, repeat(k), {0, 1, 3, 2})});
    b.output(softmaxPV(b, s, repeat(v)));
    ValueId k1 = b.input("k1", DType::F32, {1, 1, 5, 4}),
            v1 = b.input("v1", DType::F32, {2, 1, 5, 4});
    b.output(softmaxPV(b, b.op(OpKind::MatMul, {q, perm(b, k1, {0, 1, 3, 2})}), v1));
    Fused f = fuse(b.g);
    EXPECT_EQ(f.count, 2);
    int grouped = 0;
    for (const Node &n : f.g.nodes())
      if (n.op == OpKind::Attention)
        grouped += f.g.value(n.inputs[1]).type.shape[1] == SymInt(2) ? 1 : 0;
    EXPECT_EQ(grouped, 1);
    expectSame(b.g, f.g, "grouped-query and broadcast heads");
  }
}

TEST(FuseAttention, NearMissesStay) {
  auto base = [](GraphBuilder &b) {
    ValueId q = b.input("q", DType::F32, {1, 2, N, 4}), k = b.input("k", DType::F32, {1, 2, N, 4});
    return b.op(OpKind::MatMul, {q, perm(b, k, {0, 1, 3, 2})});
  };
  {
    GraphBuilder b; // a per-head scale is no scalar
    ValueId s = base(b);
    ValueId c = b.constant("c", Tensor::fromDoubles(DType::F32, {1, 2, 1, 1}, {0.5, 0.25}));
    b.output(softmaxPV(b, b.op(OpKind::Mul, {s, c}), b.input("v", DType::F32, {1, 2, N, 4})));
    EXPECT_EQ(fuse(b.g).count, 0) << "per-head scale";
  }
  {
    GraphBuilder b; // softmax over the queries
    ValueId s = base(b);
    b.output(softmaxPV(b, s, b.input("v", DType::F32, {1, 2, N, 4}), 2));
    EXPECT_EQ(fuse(b.g).count, 0) << "softmax axis";
  }
  {
    GraphBuilder b; // the scores have a second user
    ValueId s = base(b);
    b.output(softmaxPV(b, s, b.input("v", DType::F32, {1, 2, N, 4})));
    b.output(b.op(OpKind::Relu, {s}));
    EXPECT_EQ(fuse(b.g).count, 0) << "second user";
  }
  {
    GraphBuilder b; // a mask under the scale: (s + m) * c
    ValueId s = b.op(OpKind::Add, {base(b), b.input("m", DType::F32, {1, 1, 1, N})});
    s = b.op(OpKind::Mul, {s, scalarC(b, DType::F32, 0.5)});
    b.output(softmaxPV(b, s, b.input("v", DType::F32, {1, 2, N, 4})));
    EXPECT_EQ(fuse(b.g).count, 0) << "mask under scale";
  }
  {
    GraphBuilder b; // Q broadcast by the MatMul (batch 1 against K's 2)
    ValueId q = b.input("q", DType::F32, {1, 2, 3, 4}), k = b.input("k", DType::F32, {2, 2, 3, 4});
    ValueId s = b.op(OpKind::MatMul, {q, perm(b, k, {0, 1, 3, 2})});
    b.output(softmaxPV(b, s, b.input("v", DType::F32, {2, 2, 3, 4})));
    EXPECT_EQ(fuse(b.g).count, 0) << "broadcast Q";
  }
}

} // namespace
