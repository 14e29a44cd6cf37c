/// \file Private to the attention fusion pass (FuseAttention.cpp: the pass and the emission;
/// FuseAttentionMatch.cpp: the matcher's walk from the final MatMul back to Q, K, V and the
/// scale; FuseAttentionMask.cpp: the classification of the mask terms): the plan of one fusion
/// and the Matcher that makes it.
#pragma once

#include "passes/FuseAttention.h"

#include <limits>
#include <optional>
#include <utility>
#include <vector>

// Internal to the pass (hidden: not exported, not interposable).
#pragma GCC visibility push(hidden)

namespace coil::attnfusion {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Whether the top-left causal triangle is where a predicate is nonzero: kKeep when it is
/// nonzero exactly at j <= i (row i, column j of its last two dims), kDrop at j > i.
enum class Tri { kKeep, kDrop };
inline Tri flip(Tri t) {
  return t == Tri::kKeep ? Tri::kDrop : Tri::kKeep;
}

/// An integer index expression over the last two dims: ci * i + cj * j + c.
struct IdxForm {
  int64_t ci = 0, cj = 0, c = 0;
};

/// One term of the mask, in the order found (from the softmax back).
struct MaskTerm {
  enum Kind {
    kAdditive, ///< `value` is added to the scores
    kKeep,     ///< keys are kept where `value` is nonzero (zero when `negate`), else -inf
    kWhereNeg, ///< keys are kept where `value` is nonzero (zero when `negate`), else `neg`
  } kind = kAdditive;
  ValueId value = kNoValue;
  bool negate = false;
  double neg = -kInf;
  DType dtype = DType::F32; ///< the scores' dtype where the term applies
  bool causal = false;      ///< exactly the top-left causal triangle
  bool mustBeFlag = false;  ///< exact only as is_causal (a small finite `neg`)
  /// An additive `value` that is Where(C, narrowThen, narrowElse) of scalars, whose condition C
  /// equals the broadcast of narrowCond, a value of fewer elements (kNoValue: none): the term
  /// is emitted as Where(narrowCond, narrowThen, narrowElse) (Matcher::narrowCondition).
  ValueId narrowCond = kNoValue, narrowThen = kNoValue, narrowElse = kNoValue;
};

/// How K ([..., T, D]) is obtained from the scores' K^T operand.
struct KPlan {
  enum Kind { kExisting, kTranspose, kReshape } kind = kExisting;
  ValueId base = kNoValue;
  std::vector<int64_t> perm; ///< kTranspose
  std::vector<SymInt> shape; ///< kReshape
};

/// Everything the emission needs, all conditions checked.
struct Plan {
  int32_t node = -1; ///< the final MatMul
  int rank = 4;
  ValueId q = kNoValue, v = kNoValue;
  KPlan k;
  /// Grouped-query sources ([B, Hkv, T, D]) replacing K and V, when both are repeated heads.
  ValueId kvK = kNoValue, kvV = kNoValue;
  double scale = 1;
  std::vector<MaskTerm> terms;
  int causalTerm = -1; ///< the term that becomes is_causal
  DType dt = DType::F32;
  /// The final MatMul's dtype when wider than `dt`: the probabilities and V were widened to it
  /// (TorchScript's low-precision SDPA export), so the Attention's Y is widened after it.
  DType outDt = DType::F32;
  std::vector<SymInt> scoreShape; ///< [batch..., S, T]
  /// Hugging Face decoders' mask Where(causal and K, then, else) split (Matcher::splitCausal):
  /// the one term is causalTerm (is_causal), the mask is Where(splitKeys, splitThen, splitElse)
  /// with K = splitKeys a condition on the keys only, and the rows that K masks at every key
  /// they see causally get the mean of V over all keys, as the original's uniform softmax.
  ValueId splitKeys = kNoValue, splitThen = kNoValue, splitElse = kNoValue;
};

/// Matches the attention chain ending at a MatMul and checks every condition of the fusion.
class Matcher {
public:
  explicit Matcher(const Graph &g) : g_(g), uses_(g.numValues(), 0) {
    for (const Node &n : g.nodes())
      for (ValueId v : n.inputs)
        if (v != kNoValue) ++uses_[size_t(v)];
    for (ValueId v : g.outputs) uses_[size_t(v)] += 2; // never an intermediate
  }

  std::optional<Plan> match(int32_t idx);

private:
  const Graph &g_;
  std::vector<int> uses_;
  std::vector<ValueId> chain_;

  struct Parsed {
    ValueId qk = kNoValue;
    double scale = 1;
    std::vector<MaskTerm> terms;
    std::vector<ValueId> chain;
  };

  // --- the chain back from the final MatMul (FuseAttentionMatch.cpp)
  const TensorType &type(ValueId v) const { return g_.value(v).type; }
  const Node *prod(ValueId v) const;
  bool same(const SymInt &a, const SymInt &b) const { return a == b || proveEQ(a, b, g_.symbols); }
  bool sameShape(const std::vector<SymInt> &a, const std::vector<SymInt> &b) const;
  std::optional<double> scalar(ValueId v) const;
  std::optional<double> scalarFor(ValueId v, const TensorType &into) const;
  bool broadcastsInto(ValueId m, const std::vector<SymInt> &shape) const;
  bool isTransparent(const Node &n) const;
  bool isSafeSoftmax(const Node &n) const;
  bool isSafeSoftmaxInput(ValueId v) const;
  std::optional<Parsed> parseScores(ValueId cur, bool scaled);
  ValueId peelScale(ValueId v, double &scale) const;
  bool checkShapes(Plan &p, ValueId q, ValueId kt) const;
  KPlan untranspose(ValueId kt) const;
  std::optional<std::pair<ValueId, int64_t>> repeatedHeads(ValueId e) const;
  void groupedQuery(Plan &p) const;

  // --- mask classification (FuseAttentionMask.cpp)
  bool allZero(ValueId v, int depth = 0) const;
  bool nonzeroFill(ValueId v) const;
  std::optional<Tri> causalPolarity(ValueId v, int depth = 0) const;
  std::optional<Tri> constantTriangle(ValueId v) const;
  std::optional<Tri> comparison(const Node &n) const;
  int varyingAxis(const std::vector<SymInt> &s) const;
  std::optional<IdxForm> indexForm(ValueId v, int depth) const;
  std::optional<Tri> zeroOne(ValueId v, int depth = 0) const;
  std::optional<double> additiveCausal(ValueId m, int depth = 0) const;
  bool planMask(Plan &p) const;
  bool alwaysTrue(ValueId v, int depth = 0) const;
  ValueId narrowCondition(ValueId c, int depth = 0) const;
  const Node *whereOfScalars(ValueId v) const;
  void narrowTerm(MaskTerm &t) const;
  void andLeaves(ValueId v, std::vector<ValueId> &leaves, int depth = 0) const;
  std::optional<ValueId> causalKeyCondition(ValueId c, const std::vector<SymInt> &s) const;
  void splitCausal(Plan &p) const;
  static double lowestOf(DType t);
  bool exactIn(ValueId v, DType t) const;

public:
  static double lowest(DType t) { return lowestOf(t); }
};

} // namespace coil::attnfusion

#pragma GCC visibility pop
