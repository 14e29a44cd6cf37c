// The attention fusion pass (see FuseAttention.h): a matcher per final MatMul that reads the
// chain back to Q, K, V, the scale and the mask terms, checking every condition first, then one
// walk over the nodes that emits the Attention node (and the few view and mask nodes it needs)
// in the place of each matched MatMul; compaction drops the chain.
#include "passes/FuseAttention.h"

#include "ir/Infer.h"

#include <cmath>
#include <limits>
#include <map>
#include <optional>

namespace coil {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Whether the top-left causal triangle is where a predicate is nonzero: kKeep when it is
/// nonzero exactly at j <= i (row i, column j of its last two dims), kDrop at j > i.
enum class Tri { kKeep, kDrop };
Tri flip(Tri t) {
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
};

class Matcher {
public:
  explicit Matcher(const Graph &g) : g_(g), uses_(g.numValues(), 0) {
    for (const Node &n : g.nodes())
      for (ValueId v : n.inputs)
        if (v != kNoValue) ++uses_[size_t(v)];
    for (ValueId v : g.outputs) uses_[size_t(v)] += 2; // never an intermediate
  }

  std::optional<Plan> match(int32_t idx) {
    const Node &m2 = g_.nodes()[size_t(idx)];
    if (m2.op != OpKind::MatMul || m2.inputs.size() != 2) return std::nullopt;
    Plan p;
    p.node = idx;
    chain_.clear();
    // P' back to the softmax.
    ValueId cur = m2.inputs[0];
    const Node *sm = nullptr;
    while (!sm) {
      const Node *n = prod(cur);
      if (!n) return std::nullopt;
      if (n->op == OpKind::Softmax) {
        chain_.push_back(cur);
        sm = n;
        break;
      }
      if (n->op == OpKind::Where && isSafeSoftmax(*n)) {
        // Where(IsNaN(P), 0, P): P has exactly these two users.
        chain_.push_back(cur);
        chain_.push_back(n->inputs[0]);
        ValueId pv = n->inputs[2];
        if (uses_[size_t(pv)] != 2) return std::nullopt;
        const Node *s = prod(pv);
        if (!s || s->op != OpKind::Softmax) return std::nullopt;
        sm = s;
        break;
      }
      if (!isTransparent(*n)) return std::nullopt;
      chain_.push_back(cur);
      cur = n->inputs[0];
    }
    ValueId x = sm->inputs[0];
    const TensorType &xt = type(x);
    int64_t axis = sm->attrs.getInt("axis", -1);
    if (xt.rank() < 2 || (axis != -1 && axis != xt.rank() - 1)) return std::nullopt;
    if (!isFloat(xt.dtype)) return std::nullopt;
    p.scoreShape = xt.shape;
    p.rank = int(xt.rank());
    if (p.rank > 4) return std::nullopt;
    // X back to the scores MatMul.
    std::optional<Parsed> parsed = parseScores(x, false);
    if (!parsed) return std::nullopt;
    chain_.insert(chain_.end(), parsed->chain.begin(), parsed->chain.end());
    for (ValueId c : chain_)
      if (uses_[size_t(c)] != 1 && !isSafeSoftmaxInput(c)) return std::nullopt;
    p.scale = parsed->scale;
    p.terms = parsed->terms;
    const Node &qk = *prod(parsed->qk);
    // Q and K^T, each possibly scaled.
    ValueId q = peelScale(qk.inputs[0], p.scale), kt = peelScale(qk.inputs[1], p.scale);
    p.v = m2.inputs[1];
    p.q = q;
    if (!std::isfinite(p.scale) || p.scale == 0) return std::nullopt;
    if (!checkShapes(p, q, kt)) return std::nullopt;
    p.k = untranspose(kt);
    if (p.rank == 4) groupedQuery(p);
    if (!planMask(p)) return std::nullopt;
    return p;
  }

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

  const TensorType &type(ValueId v) const { return g_.value(v).type; }
  const Node *prod(ValueId v) const {
    if (v == kNoValue) return nullptr;
    const Value &val = g_.value(v);
    if (val.kind != ValueKind::NodeOutput || val.producer < 0) return nullptr;
    return &g_.nodes()[size_t(val.producer)];
  }
  bool same(const SymInt &a, const SymInt &b) const { return a == b || proveEQ(a, b, g_.symbols); }
  bool sameShape(const std::vector<SymInt> &a, const std::vector<SymInt> &b) const {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!same(a[i], b[i])) return false;
    return true;
  }
  /// The value of a one-element constant.
  std::optional<double> scalar(ValueId v) const {
    if (v == kNoValue || !g_.isConstant(v)) return std::nullopt;
    const Tensor &t = g_.constant(v);
    if (t.numel() != 1) return std::nullopt;
    return t.toDoubles()[0];
  }
  /// A one-element constant whose shape does not widen `into` when broadcast against it.
  std::optional<double> scalarFor(ValueId v, const TensorType &into) const {
    if (!g_.isConstant(v) || type(v).rank() > into.rank()) return std::nullopt;
    return scalar(v);
  }
  /// Whether `m` broadcasts into `shape` without widening it.
  bool broadcastsInto(ValueId m, const std::vector<SymInt> &shape) const {
    const std::vector<SymInt> &ms = type(m).shape;
    if (ms.size() > shape.size()) return false;
    size_t off = shape.size() - ms.size();
    for (size_t i = 0; i < ms.size(); ++i)
      if (ms[i] != SymInt(1) && !same(ms[i], shape[off + i])) return false;
    return true;
  }

  /// Nodes between the softmax and the final MatMul that pass values through.
  bool isTransparent(const Node &n) const {
    if (n.inputs.empty() || n.outputs.empty()) return false;
    ValueId in = n.inputs[0], out = n.outputs[0];
    if (!sameShape(type(in).shape, type(out).shape)) return false;
    switch (n.op) {
    case OpKind::Cast:
      return isFloat(type(in).dtype) && isFloat(type(out).dtype);
    case OpKind::Identity:
      return true;
    case OpKind::Dropout: {
      if (n.outputs.size() > 1 && n.outputs[1] != kNoValue && uses_[size_t(n.outputs[1])] > 0)
        return false;
      if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) {
        std::optional<double> training = scalar(n.inputs[2]);
        return training && *training == 0;
      }
      return true;
    }
    default:
      return false;
    }
  }
  /// Where(IsNaN(P), 0, P).
  bool isSafeSoftmax(const Node &n) const {
    if (n.inputs.size() != 3) return false;
    const Node *isnan = prod(n.inputs[0]);
    std::optional<double> zero = scalarFor(n.inputs[1], type(n.outputs[0]));
    return isnan && isnan->op == OpKind::IsNaN && isnan->inputs[0] == n.inputs[2] && zero &&
           *zero == 0 && uses_[size_t(n.inputs[0])] == 1 &&
           sameShape(type(n.outputs[0]).shape, type(n.inputs[2]).shape);
  }
  bool isSafeSoftmaxInput(ValueId v) const {
    const Node *n = prod(v);
    return n && n->op == OpKind::Softmax && uses_[size_t(v)] == 2;
  }

  /// The scores X back to their MatMul; `scaled` when a scale lies between X and the softmax.
  std::optional<Parsed> parseScores(ValueId cur, bool scaled) {
    const Node *n = prod(cur);
    if (!n || n->outputs.empty() || n->outputs[0] != cur) return std::nullopt;
    const TensorType &ct = type(cur);
    auto sub = [&](ValueId s, bool sc) -> std::optional<Parsed> {
      if (!sameShape(type(s).shape, ct.shape)) return std::nullopt;
      std::optional<Parsed> r = parseScores(s, sc);
      if (r) r->chain.push_back(cur);
      return r;
    };
    switch (n->op) {
    case OpKind::MatMul: {
      Parsed r;
      r.qk = cur;
      r.chain.push_back(cur);
      return r;
    }
    case OpKind::Cast: {
      // Widening (or same) float casts only.
      DType from = type(n->inputs[0]).dtype;
      if (!isFloat(from) || !isFloat(ct.dtype) || dtypeSize(ct.dtype) < dtypeSize(from))
        return std::nullopt;
      return sub(n->inputs[0], scaled);
    }
    case OpKind::Mul:
    case OpKind::Div: {
      for (int side = 0; side < 2; ++side) {
        if (n->op == OpKind::Div && side == 1) break;
        ValueId s = n->inputs[size_t(side)], c = n->inputs[size_t(1 - side)];
        std::optional<double> k = scalarFor(c, ct);
        if (!k) continue;
        std::optional<Parsed> r = sub(s, true);
        if (!r) return std::nullopt;
        r->scale = n->op == OpKind::Div ? r->scale / *k : r->scale * *k;
        return r;
      }
      return std::nullopt;
    }
    case OpKind::Add: {
      if (scaled) return std::nullopt; // a mask under a scale would be scaled too
      for (int side = 0; side < 2; ++side) {
        ValueId s = n->inputs[size_t(side)], m = n->inputs[size_t(1 - side)];
        if (!isFloat(type(m).dtype) || !broadcastsInto(m, ct.shape)) continue;
        if (!sameShape(type(s).shape, ct.shape)) continue;
        std::optional<Parsed> r = sub(s, scaled);
        if (!r) continue;
        if (allZero(m)) return r; // adds nothing (e.g. ViT's mask of no padding)
        MaskTerm t;
        t.kind = MaskTerm::kAdditive;
        t.value = m;
        t.dtype = ct.dtype;
        if (const Node *w = prod(m); w && w->op == OpKind::Where) {
          // Where(C, 0, -inf) added (the SDPA exporters' boolean mask) is the boolean mask C.
          std::optional<double> a = scalar(w->inputs[1]), b = scalar(w->inputs[2]);
          if (a && b && ((*a == 0 && *b == -kInf) || (*a == -kInf && *b == 0))) {
            t.kind = MaskTerm::kKeep;
            t.value = w->inputs[0];
            t.negate = *a != 0;
            std::optional<Tri> tri = causalPolarity(t.value);
            t.causal = tri && (t.negate ? flip(*tri) : *tri) == Tri::kKeep;
            r->terms.push_back(t);
            return r;
          }
        }
        std::optional<double> neg = additiveCausal(m);
        t.causal = neg.has_value();
        if (neg) t.neg = *neg;
        r->terms.push_back(t);
        return r;
      }
      return std::nullopt;
    }
    case OpKind::Where: {
      if (scaled) return std::nullopt;
      ValueId c = n->inputs[0];
      if (type(c).dtype != DType::Bool || !broadcastsInto(c, ct.shape)) return std::nullopt;
      for (int side = 0; side < 2; ++side) {
        ValueId s = n->inputs[size_t(1 + side)];
        std::optional<double> neg = scalarFor(n->inputs[size_t(2 - side)], ct);
        if (!neg || !(*neg < 0)) continue;
        MaskTerm t;
        t.value = c;
        t.negate = side == 1; // the scores are kept where c is false
        t.neg = *neg;
        t.dtype = ct.dtype;
        std::optional<Tri> tri = causalPolarity(c);
        t.causal = tri && (t.negate ? flip(*tri) : *tri) == Tri::kKeep;
        if (std::isinf(*neg)) {
          t.kind = MaskTerm::kKeep;
        } else if (*neg <= -1e30) {
          t.kind = MaskTerm::kWhereNeg;
        } else if (t.causal && *neg <= -1e4) {
          t.kind = MaskTerm::kWhereNeg;
          t.mustBeFlag = true;
        } else {
          return std::nullopt;
        }
        std::optional<Parsed> r = sub(s, scaled);
        if (!r) return std::nullopt;
        if (!t.negate && nonzeroFill(c)) return r; // keeps every key
        r->terms.push_back(t);
        return r;
      }
      return std::nullopt;
    }
    default:
      return std::nullopt;
    }
  }

  /// `v` without scalar Mul / Div factors (their product joins `scale`).
  ValueId peelScale(ValueId v, double &scale) const {
    for (;;) {
      const Node *n = prod(v);
      if (!n || (n->op != OpKind::Mul && n->op != OpKind::Div)) return v;
      const TensorType &t = type(v);
      bool done = true;
      for (int side = 0; side < 2; ++side) {
        if (n->op == OpKind::Div && side == 1) break;
        ValueId s = n->inputs[size_t(side)];
        std::optional<double> k = scalarFor(n->inputs[size_t(1 - side)], t);
        if (!k || !sameShape(type(s).shape, t.shape) || type(s).dtype != t.dtype) continue;
        scale = n->op == OpKind::Div ? scale / *k : scale * *k;
        v = s;
        done = false;
        break;
      }
      if (done) return v;
    }
  }

  /// Ranks, dtypes and shapes of Q, K^T, V and the scores.
  bool checkShapes(Plan &p, ValueId q, ValueId kt) const {
    DType dt = type(q).dtype;
    const TensorType &yt = type(g_.nodes()[size_t(p.node)].outputs[0]);
    p.dt = dt;
    p.outDt = yt.dtype;
    // Y of a wider float type: V widened to it by a Cast (and the probabilities at Y's dtype, as
    // they are after a widening of the scores), so Attention runs at Q's dtype, then Y widens.
    bool widened = isFloat(dt) && isFloat(yt.dtype) && dtypeSize(yt.dtype) > dtypeSize(dt);
    if (const Node *c = prod(p.v);
        widened && c && c->op == OpKind::Cast && type(c->inputs[0]).dtype == dt)
      p.v = c->inputs[0];
    const TensorType &qt = type(q), &kT = type(kt), &vt = type(p.v);
    const std::vector<SymInt> &s = p.scoreShape;
    size_t r = s.size();
    if (!isFloat(dt) || kT.dtype != dt || vt.dtype != dt) return false;
    if (yt.dtype != dt && !widened) return false;
    if (qt.rank() != int64_t(r) || kT.rank() != int64_t(r) || vt.rank() != int64_t(r) ||
        yt.rank() != int64_t(r))
      return false;
    SymInt S = s[r - 2], T = s[r - 1], D = qt.shape[r - 1];
    if (!same(qt.shape[r - 2], S) || !same(kT.shape[r - 2], D) || !same(kT.shape[r - 1], T) ||
        !same(vt.shape[r - 2], T) || !same(yt.shape[r - 2], S) ||
        !same(yt.shape[r - 1], vt.shape[r - 1]))
      return false;
    for (size_t i = 0; i + 2 < r; ++i) {
      if (!same(qt.shape[i], s[i]) || !same(yt.shape[i], s[i])) return false;
      for (const TensorType *t : {&kT, &vt})
        if (t->shape[i] != SymInt(1) && !same(t->shape[i], s[i])) return false;
    }
    return true;
  }

  /// K from K^T (see KPlan).
  KPlan untranspose(ValueId kt) const {
    const TensorType &t = type(kt);
    size_t r = size_t(t.rank());
    KPlan k;
    const Node *n = prod(kt);
    if (n && n->op == OpKind::Transpose) {
      std::vector<int64_t> perm = n->attrs.getInts("perm");
      if (perm.empty())
        for (size_t i = 0; i < r; ++i) perm.push_back(int64_t(r - 1 - i));
      if (perm.size() == r) {
        std::vector<int64_t> composed = perm;
        std::swap(composed[r - 2], composed[r - 1]);
        bool identity = true;
        for (size_t i = 0; i < r; ++i) identity = identity && composed[i] == int64_t(i);
        k.base = n->inputs[0];
        if (identity) {
          k.kind = KPlan::kExisting;
        } else {
          k.kind = KPlan::kTranspose;
          k.perm = composed;
        }
        return k;
      }
    }
    // Reshape(Transpose(Reshape(X, [N, T, D]), [0, 2, 1]), [lead..., D, T]).
    if (n && n->op == OpKind::Reshape) {
      const Node *tr = prod(n->inputs[0]);
      const Node *in = tr && tr->op == OpKind::Transpose ? prod(tr->inputs[0]) : nullptr;
      if (in && in->op == OpKind::Reshape &&
          tr->attrs.getInts("perm") == std::vector<int64_t>{0, 2, 1}) {
        ValueId x = in->inputs[0];
        const TensorType &xt = type(x), &mid = type(in->outputs[0]);
        size_t xr = size_t(xt.rank());
        if (mid.rank() == 3 && xr >= 3 && same(xt.shape[xr - 1], mid.shape[2]) &&
            same(xt.shape[xr - 2], mid.shape[1]) && same(mid.shape[2], t.shape[r - 2]) &&
            same(mid.shape[1], t.shape[r - 1])) {
          SymInt lead = 1, klead = 1;
          for (size_t i = 0; i + 2 < xr; ++i) lead = lead * xt.shape[i];
          for (size_t i = 0; i + 2 < r; ++i) klead = klead * t.shape[i];
          if (same(lead, mid.shape[0]) && same(klead, mid.shape[0])) {
            k.kind = KPlan::kReshape;
            k.base = x;
            k.shape.assign(t.shape.begin(), t.shape.end() - 2);
            k.shape.push_back(t.shape[r - 1]);
            k.shape.push_back(t.shape[r - 2]);
            if (sameShape(xt.shape, k.shape)) k.kind = KPlan::kExisting; // X is K already
            return k;
          }
        }
      }
    }
    k.kind = KPlan::kTranspose;
    k.base = kt;
    for (size_t i = 0; i < r; ++i) k.perm.push_back(int64_t(i));
    std::swap(k.perm[r - 2], k.perm[r - 1]);
    return k;
  }

  /// The [B, Hkv, T, D] source of heads repeated in place: `e` = Expand or Tile of
  /// Unsqueeze(src, 2) (or of src reshaped to [B, Hkv, 1, T, D]) with shape [B, Hkv, rep, T, D].
  std::optional<std::pair<ValueId, int64_t>> repeatedHeads(ValueId e) const {
    const Node *n = prod(e);
    const TensorType &et = type(e);
    if (!n || et.rank() != 5) return std::nullopt;
    if (n->op != OpKind::Expand && n->op != OpKind::Tile) return std::nullopt;
    ValueId u = n->inputs[0];
    const TensorType &ut = type(u);
    if (ut.rank() != 5 || ut.shape[2] != SymInt(1)) return std::nullopt;
    for (size_t i : {0, 1, 3, 4})
      if (!same(ut.shape[i], et.shape[i])) return std::nullopt;
    std::optional<int64_t> rep = et.shape[2].maybeConstant();
    if (!rep || *rep < 1) return std::nullopt;
    const Node *un = prod(u);
    if (!un || (un->op != OpKind::Unsqueeze && un->op != OpKind::Reshape)) return std::nullopt;
    ValueId src = un->inputs[0];
    const TensorType &st = type(src);
    if (st.rank() != 4) return std::nullopt;
    // The inserted unit axis must be axis 2: src's dims are u's without it.
    for (auto [a, b] : {std::pair{0, 0}, {1, 1}, {2, 3}, {3, 4}})
      if (!same(st.shape[size_t(a)], ut.shape[size_t(b)])) return std::nullopt;
    return std::pair{src, *rep};
  }

  /// For rank 4: K and V whose heads are both repeated in place by the same factor become
  /// their sources (Attention's kv heads).
  void groupedQuery(Plan &p) const {
    // `e` [B, Hkv, rep, T, D] merged into `merged` [B, H, T, D].
    auto merges = [&](ValueId e, const std::vector<SymInt> &merged) {
      const std::vector<SymInt> &es = type(e).shape;
      return merged.size() == 4 && es.size() == 5 && same(es[0], merged[0]) &&
             same(es[3], merged[2]) && same(es[4], merged[3]);
    };
    auto source = [&](ValueId x) -> std::optional<std::pair<ValueId, int64_t>> {
      const Node *n = prod(x);
      if (!n || n->op != OpKind::Reshape || !merges(n->inputs[0], type(x).shape))
        return std::nullopt;
      return repeatedHeads(n->inputs[0]);
    };
    std::optional<std::pair<ValueId, int64_t>> ks;
    if (p.k.kind == KPlan::kExisting) ks = source(p.k.base);
    if (p.k.kind == KPlan::kReshape && merges(p.k.base, p.k.shape)) ks = repeatedHeads(p.k.base);
    std::optional<std::pair<ValueId, int64_t>> vs = source(p.v);
    if (!ks || !vs || ks->second != vs->second) return;
    const TensorType &kc = type(ks->first), &vc = type(vs->first);
    if (!same(kc.shape[1], vc.shape[1])) return;
    // The repeated tensors are [B, Hkv * rep, T, D] = the scores' heads.
    if (!same(kc.shape[1] * SymInt(ks->second), p.scoreShape[1])) return;
    p.kvK = ks->first;
    p.kvV = vs->first;
  }

  // --- mask classification

  /// Whether every element of `v` is zero.
  bool allZero(ValueId v, int depth = 0) const {
    if (depth > 16) return false;
    if (g_.isConstant(v)) {
      for (double x : g_.constant(v).toDoubles())
        if (x != 0) return false;
      return true;
    }
    const Node *n = prod(v);
    if (!n) return false;
    switch (n->op) {
    case OpKind::Expand:
    case OpKind::Identity:
      return allZero(n->inputs[0], depth + 1);
    case OpKind::Cast:
      return isFloat(type(v).dtype) && allZero(n->inputs[0], depth + 1);
    case OpKind::Where:
      return (allZero(n->inputs[1], depth + 1) && allZero(n->inputs[2], depth + 1)) ||
             (nonzeroFill(n->inputs[0]) && allZero(n->inputs[1], depth + 1));
    default:
      return false;
    }
  }

  /// Whether every element of `v` is nonzero (a fill).
  bool nonzeroFill(ValueId v) const {
    if (g_.isConstant(v)) {
      for (double x : g_.constant(v).toDoubles())
        if (x == 0) return false;
      return true;
    }
    const Node *n = prod(v);
    if (!n) return false;
    if (n->op == OpKind::Cast && isFloat(type(n->inputs[0]).dtype) && !isFloat(type(v).dtype) &&
        type(v).dtype != DType::Bool)
      return false; // 0.5 cast to an integer is 0
    if (n->op == OpKind::Expand || n->op == OpKind::Cast || n->op == OpKind::Identity)
      return nonzeroFill(n->inputs[0]);
    if (n->op == OpKind::ConstantOfShape) {
      std::optional<Tensor> val = n->attrs.getTensor("value");
      return val && val->numel() == 1 && val->toDoubles()[0] != 0;
    }
    return false;
  }

  /// The causal triangle (see Tri) where `v` is nonzero; `v` must vary over its last two dims
  /// only (leading dims broadcast).
  std::optional<Tri> causalPolarity(ValueId v, int depth = 0) const {
    if (depth > 16) return std::nullopt;
    const TensorType &t = type(v);
    if (t.rank() < 2) return std::nullopt;
    if (g_.isConstant(v)) return constantTriangle(v);
    const Node *n = prod(v);
    if (!n) return std::nullopt;
    switch (n->op) {
    case OpKind::Trilu: {
      if (!nonzeroFill(n->inputs[0])) return std::nullopt;
      int64_t k = 0;
      if (n->inputs.size() > 1 && n->inputs[1] != kNoValue) {
        std::optional<double> kv = scalar(n->inputs[1]);
        if (!kv) return std::nullopt;
        k = int64_t(*kv);
      }
      bool upper = n->attrs.getInt("upper", 1) != 0;
      if (!upper && k == 0) return Tri::kKeep; // nonzero at j <= i
      if (upper && k == 1) return Tri::kDrop;  // nonzero at j >= i + 1
      return std::nullopt;
    }
    case OpKind::Not:
      if (auto r = causalPolarity(n->inputs[0], depth + 1)) return flip(*r);
      return std::nullopt;
    case OpKind::Equal: {
      for (int side = 0; side < 2; ++side) {
        std::optional<double> z = scalar(n->inputs[size_t(1 - side)]);
        if (!z || *z != 0) continue;
        if (auto r = causalPolarity(n->inputs[size_t(side)], depth + 1)) return flip(*r);
      }
      return std::nullopt;
    }
    case OpKind::Cast: {
      DType from = type(n->inputs[0]).dtype;
      // Nonzero-ness survives casts from bool, to bool, and from integers to floats.
      if (from != DType::Bool && t.dtype != DType::Bool && !(isFloat(t.dtype) && !isFloat(from)))
        return std::nullopt;
      return causalPolarity(n->inputs[0], depth + 1);
    }
    case OpKind::Identity:
      return causalPolarity(n->inputs[0], depth + 1);
    case OpKind::Expand: {
      const TensorType &it = type(n->inputs[0]);
      if (it.rank() < 2 || !same(it.shape[size_t(it.rank() - 1)], t.shape[size_t(t.rank() - 1)]) ||
          !same(it.shape[size_t(it.rank() - 2)], t.shape[size_t(t.rank() - 2)]))
        return std::nullopt;
      return causalPolarity(n->inputs[0], depth + 1);
    }
    case OpKind::And: {
      for (int side = 0; side < 2; ++side)
        if (nonzeroFill(n->inputs[size_t(1 - side)]) &&
            sameShape(type(n->inputs[size_t(side)]).shape, t.shape))
          return causalPolarity(n->inputs[size_t(side)], depth + 1);
      return std::nullopt;
    }
    case OpKind::Where: {
      std::optional<double> a = scalar(n->inputs[1]), b = scalar(n->inputs[2]);
      if (!a || !b || (*a != 0) == (*b != 0)) return std::nullopt;
      std::optional<Tri> c = causalPolarity(n->inputs[0], depth + 1);
      if (!c) return std::nullopt;
      return *a != 0 ? *c : flip(*c);
    }
    case OpKind::Less:
    case OpKind::LessOrEqual:
    case OpKind::Greater:
    case OpKind::GreaterOrEqual:
      return comparison(*n);
    default:
      return std::nullopt;
    }
  }

  /// Whether constant `v` ([1..., S, T]) is the triangle: values 0 at j <= i and `masked`
  /// (or any nonzero when masked is 1.0) elsewhere, or the reverse.
  std::optional<Tri> constantTriangle(ValueId v) const {
    const Tensor &c = g_.constant(v);
    const Shape &s = c.shape();
    if (s.size() < 2) return std::nullopt;
    for (size_t i = 0; i + 2 < s.size(); ++i)
      if (s[i] != 1) return std::nullopt;
    int64_t S = s[s.size() - 2], T = s[s.size() - 1];
    std::vector<double> x = c.toDoubles();
    std::optional<Tri> r;
    for (int pol = 0; pol < 2 && !r; ++pol) {
      bool ok = true;
      for (int64_t i = 0; i < S && ok; ++i)
        for (int64_t j = 0; j < T && ok; ++j) {
          bool nz = x[size_t(i * T + j)] != 0;
          ok = nz == (pol == 0 ? j <= i : j > i);
        }
      if (ok) r = pol == 0 ? Tri::kKeep : Tri::kDrop;
    }
    return r;
  }

  /// Less / LessOrEqual / Greater / GreaterOrEqual of two index forms.
  std::optional<Tri> comparison(const Node &n) const {
    std::optional<IdxForm> a = indexForm(n.inputs[0], 0), b = indexForm(n.inputs[1], 0);
    if (!a || !b) return std::nullopt;
    if (n.op == OpKind::Greater || n.op == OpKind::GreaterOrEqual) std::swap(a, b);
    // d = a - b; Less: d < 0; LessOrEqual: d - 1 < 0.
    int64_t di = a->ci - b->ci, dj = a->cj - b->cj, dc = a->c - b->c;
    if (n.op == OpKind::LessOrEqual || n.op == OpKind::GreaterOrEqual) dc -= 1;
    // j - i + dc < 0  <=>  j <= i - dc - 1: kept with offset 0 when dc == -1.
    if (di == -1 && dj == 1 && dc == -1) return Tri::kKeep;
    // i - j + dc < 0  <=>  j > i + dc: masked with offset 0 when dc == 0.
    if (di == 1 && dj == -1 && dc == 0) return Tri::kDrop;
    return std::nullopt;
  }

  /// The single non-unit axis of a shape, counted from the end (1 = last), or 0.
  int varyingAxis(const std::vector<SymInt> &s) const {
    int found = 0;
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i] != SymInt(1)) {
        if (found) return -1;
        found = int(s.size() - i);
      }
    return found;
  }

  std::optional<IdxForm> indexForm(ValueId v, int depth) const {
    if (depth > 16) return std::nullopt;
    const TensorType &t = type(v);
    if (std::optional<double> c = scalar(v)) {
      if (*c != std::floor(*c) || std::fabs(*c) > 1e15) return std::nullopt;
      return IdxForm{0, 0, int64_t(*c)};
    }
    const Node *n = prod(v);
    if (!n) return std::nullopt;
    auto intScalar = [&](ValueId x) -> std::optional<int64_t> {
      if (x == kNoValue) return std::nullopt;
      if (g_.isSymConstant(x)) {
        const std::vector<SymInt> &e = g_.symConstant(x);
        if (e.size() == 1 && e[0].isConstant()) return e[0].constant();
        return std::nullopt;
      }
      std::optional<double> c = scalar(x);
      if (!c || *c != std::floor(*c)) return std::nullopt;
      return int64_t(*c);
    };
    switch (n->op) {
    case OpKind::Range: {
      std::optional<int64_t> start = intScalar(n->inputs[0]), delta = intScalar(n->inputs[2]);
      if (!start || !delta || *delta != 1 || t.rank() != 1) return std::nullopt;
      return IdxForm{0, 1, *start};
    }
    case OpKind::Unsqueeze:
    case OpKind::Reshape:
    case OpKind::Squeeze:
    case OpKind::Cast:
    case OpKind::Identity: {
      if (n->op == OpKind::Cast && isFloat(type(n->inputs[0]).dtype) && !isFloat(t.dtype))
        return std::nullopt;
      std::optional<IdxForm> f = indexForm(n->inputs[0], depth + 1);
      if (!f) return std::nullopt;
      if (f->ci == 0 && f->cj == 0) return f;
      int from = varyingAxis(type(n->inputs[0]).shape), to = varyingAxis(t.shape);
      if (from <= 0 || to <= 0 || from > 2 || to > 2) return std::nullopt;
      int64_t coef = from == 1 ? f->cj : f->ci;
      if ((from == 1 ? f->ci : f->cj) != 0) return std::nullopt;
      return to == 1 ? IdxForm{0, coef, f->c} : IdxForm{coef, 0, f->c};
    }
    case OpKind::Add:
    case OpKind::Sub: {
      std::optional<IdxForm> a = indexForm(n->inputs[0], depth + 1),
                             b = indexForm(n->inputs[1], depth + 1);
      if (!a || !b) return std::nullopt;
      int64_t s = n->op == OpKind::Add ? 1 : -1;
      return IdxForm{a->ci + s * b->ci, a->cj + s * b->cj, a->c + s * b->c};
    }
    default:
      return std::nullopt;
    }
  }

  /// Whether `v` takes only the values 0 and 1, with 1 on the triangle side given.
  std::optional<Tri> zeroOne(ValueId v, int depth = 0) const {
    if (depth > 16) return std::nullopt;
    if (g_.isConstant(v)) {
      for (double x : g_.constant(v).toDoubles())
        if (x != 0 && x != 1) return std::nullopt;
      return constantTriangle(v);
    }
    const Node *n = prod(v);
    if (!n) return std::nullopt;
    if (n->op == OpKind::Cast && type(n->inputs[0]).dtype == DType::Bool)
      return causalPolarity(n->inputs[0], depth + 1);
    if (n->op == OpKind::Sub) {
      std::optional<double> one = scalar(n->inputs[0]);
      if (one && *one == 1)
        if (auto r = zeroOne(n->inputs[1], depth + 1)) return flip(*r);
    }
    return std::nullopt;
  }

  /// For an additive mask that is 0 on the causal triangle (j <= i) and one large negative
  /// value n elsewhere: n.
  std::optional<double> additiveCausal(ValueId m, int depth = 0) const {
    if (depth > 16) return std::nullopt;
    const TensorType &t = type(m);
    if (t.rank() < 2) return std::nullopt;
    auto large = [](double n) { return n <= -1e4; };
    if (g_.isConstant(m)) {
      const Tensor &c = g_.constant(m);
      std::optional<Tri> tri = constantTriangle(m);
      if (!tri || *tri != Tri::kDrop) return std::nullopt;
      std::optional<double> neg;
      for (double x : c.toDoubles())
        if (x != 0) {
          if (neg && *neg != x) return std::nullopt;
          neg = x;
        }
      if (!neg || !large(*neg)) return std::nullopt;
      return neg;
    }
    const Node *n = prod(m);
    if (!n) return std::nullopt;
    if (n->op == OpKind::Expand || n->op == OpKind::Identity) {
      const TensorType &it = type(n->inputs[0]);
      if (it.rank() < 2 || !same(it.shape[size_t(it.rank() - 1)], t.shape[size_t(t.rank() - 1)]) ||
          !same(it.shape[size_t(it.rank() - 2)], t.shape[size_t(t.rank() - 2)]))
        return std::nullopt;
      return additiveCausal(n->inputs[0], depth + 1);
    }
    if (n->op == OpKind::Where) {
      std::optional<double> a = scalar(n->inputs[1]), b = scalar(n->inputs[2]);
      std::optional<Tri> c = causalPolarity(n->inputs[0]);
      if (!a || !b || !c) return std::nullopt;
      double kept = *c == Tri::kKeep ? *a : *b, masked = *c == Tri::kKeep ? *b : *a;
      if (kept != 0 || !large(masked)) return std::nullopt;
      return masked;
    }
    if (n->op == OpKind::Mul) {
      for (int side = 0; side < 2; ++side) {
        std::optional<double> k = scalar(n->inputs[size_t(1 - side)]);
        std::optional<Tri> z = zeroOne(n->inputs[size_t(side)]);
        // (1 on the masked side) * k, k finite (0 * -inf would be NaN).
        if (k && z && *z == Tri::kDrop && std::isfinite(*k) && large(*k)) return k;
      }
    }
    return std::nullopt;
  }

  /// Chooses the term that becomes is_causal and checks the others' dtypes.
  bool planMask(Plan &p) const {
    const std::vector<SymInt> &s = p.scoreShape;
    size_t r = s.size();
    for (size_t i = 0; i < p.terms.size(); ++i) {
      MaskTerm &t = p.terms[i];
      if (!t.causal) continue;
      // The triangle must span the scores' S x T.
      const TensorType &vt = type(t.value);
      if (vt.rank() < 2 || !same(vt.shape[size_t(vt.rank() - 2)], s[r - 2]) ||
          !same(vt.shape[size_t(vt.rank() - 1)], s[r - 1]))
        t.causal = false;
    }
    for (size_t i = 0; i < p.terms.size() && p.causalTerm < 0; ++i) {
      const MaskTerm &t = p.terms[i];
      if (t.causal && (p.terms.size() == 1 || std::isinf(t.neg))) p.causalTerm = int(i);
    }
    for (size_t i = 0; i < p.terms.size(); ++i) {
      const MaskTerm &t = p.terms[i];
      if (int(i) == p.causalTerm) continue;
      if (t.mustBeFlag) return false;
      if (t.kind == MaskTerm::kAdditive && type(t.value).dtype != p.dt && !exactIn(t.value, p.dt))
        return false;
      // Where(C, 0, n) in Q's dtype: n must stay a large finite value there.
      if (t.kind == MaskTerm::kWhereNeg && lowestOf(p.dt) > -1e30) return false;
    }
    return true;
  }

  static double lowestOf(DType t) {
    switch (t) {
    case DType::F64:
      return std::numeric_limits<double>::lowest();
    case DType::F32:
      return std::numeric_limits<float>::lowest();
    case DType::BF16:
      return -3.3895313892515355e38;
    default:
      return -65504.0;
    }
  }

  /// Whether constant `v` converts exactly to `t`.
  bool exactIn(ValueId v, DType t) const {
    if (!g_.isConstant(v)) return false;
    const Tensor &c = g_.constant(v);
    std::vector<double> x = c.toDoubles();
    std::vector<double> y = Tensor::fromDoubles(t, c.shape(), x).toDoubles();
    for (size_t i = 0; i < x.size(); ++i)
      if (!(x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i])))) return false;
    return true;
  }

public:
  static double lowest(DType t) { return lowestOf(t); }
};

/// Emits the planned nodes into `out` (a copy of the graph being rebuilt).
class Emitter {
public:
  explicit Emitter(Graph &out) : g_(out) {}

  void emit(const Plan &p, const Node &m2) {
    base_ = m2.name.empty() ? std::string("attention") : m2.name;
    loc_ = m2.loc;
    const std::vector<SymInt> &s = p.scoreShape;
    size_t r = s.size();
    // Leading dims of the 4-D problem: [B, H] for rank 4, [N, 1] for rank 3, [1, 1] for 2.
    SymInt B = r == 4 ? s[0] : r == 3 ? s[0] : SymInt(1), H = r == 4 ? s[1] : SymInt(1);
    auto to4 = [&](ValueId x) {
      const std::vector<SymInt> &xs = g_.value(x).type.shape;
      if (xs.size() == 4) return x;
      std::vector<SymInt> shape{xs.size() == 3 ? xs[0] : SymInt(1), SymInt(1), xs[xs.size() - 2],
                                xs[xs.size() - 1]};
      return reshape(x, shape);
    };
    ValueId q = to4(p.q);
    ValueId k = kNoValue, v = kNoValue;
    if (p.kvK != kNoValue) {
      k = p.kvK, v = p.kvV;
    } else {
      switch (p.k.kind) {
      case KPlan::kExisting:
        k = p.k.base;
        break;
      case KPlan::kTranspose:
        k = node(OpKind::Transpose, {p.k.base}, attrs({{"perm", AttrValue(p.k.perm)}}), "k");
        break;
      case KPlan::kReshape:
        k = reshape(p.k.base, p.k.shape);
        break;
      }
      k = to4(k);
      v = to4(p.v);
    }
    // Batch dims of 1 broadcast by the MatMuls, and key/value heads of 1 against more.
    auto dims = [&](ValueId x) { return g_.value(x).type.shape; };
    SymInt hk = dims(k)[1], hv = dims(v)[1];
    SymInt heads = hk == SymInt(1) ? hv : hk;
    auto widen = [&](ValueId x) {
      std::vector<SymInt> d = dims(x), want = d;
      if (d[0] == SymInt(1)) want[0] = B;
      if (d[1] == SymInt(1)) want[1] = heads;
      if (want == d) return x;
      return node(OpKind::Expand, {x, shapeConst(want)}, {}, "kv");
    };
    k = widen(k);
    v = widen(v);
    (void)H;
    // The mask.
    ValueId mask = buildMask(p);
    if (mask != kNoValue) {
      std::vector<SymInt> ms = dims(mask);
      // Right-aligned against the 4-D scores; a rank-3 problem's batch is the mask's first dim.
      if (r == 3 && ms.size() == 3) {
        mask = reshape(mask, {ms[0], SymInt(1), ms[1], ms[2]});
      } else if (ms.size() < 4) {
        ms.insert(ms.begin(), 4 - ms.size(), SymInt(1));
        mask = reshape(mask, ms);
      }
      ms = dims(mask);
      if (ms.back() != s[r - 1]) {
        ms.back() = s[r - 1];
        mask = node(OpKind::Expand, {mask, shapeConst(ms)}, {}, "mask");
      }
    }
    Attrs at;
    at.set("scale", AttrValue(p.scale));
    if (p.causalTerm >= 0) at.set("is_causal", AttrValue(int64_t(1)));
    std::vector<ValueId> ins{q, k, v};
    if (mask != kNoValue) ins.push_back(mask);
    ValueId y = m2.outputs[0];
    if (r == 4 && p.outDt == p.dt) {
      node(OpKind::Attention, ins, at, "attention", y);
    } else {
      ValueId y4 = node(OpKind::Attention, ins, at, "attention");
      if (r != 4) y4 = reshape(y4, g_.value(y).type.shape, p.outDt == p.dt ? y : kNoValue);
      if (p.outDt != p.dt)
        node(OpKind::Cast, {y4}, attrs({{"to", AttrValue(std::string(dtypeName(p.outDt)))}}), "y",
             y);
    }
  }

private:
  Graph &g_;
  std::string base_;
  SourceLoc loc_;
  int counter_ = 0;

  static Attrs attrs(std::initializer_list<std::pair<const char *, AttrValue>> kv) {
    Attrs a;
    for (const auto &[k, v] : kv) a.set(k, v);
    return a;
  }

  ValueId shapeConst(const std::vector<SymInt> &dims) {
    return g_.addSymConstant(g_.uniqueName(base_ + "/shape"), dims);
  }
  ValueId scalarConst(DType t, double v) {
    return g_.addConstant(g_.uniqueName(base_ + "/const"), Tensor::fromDoubles(t, {}, {v}));
  }
  ValueId reshape(ValueId x, const std::vector<SymInt> &shape, ValueId into = kNoValue) {
    return node(OpKind::Reshape, {x, shapeConst(shape)},
                attrs({{"allowzero", AttrValue(int64_t(1))}}), "view", into);
  }

  /// Adds a node with inferred output types; its one output is `into` when given.
  ValueId node(OpKind op, std::vector<ValueId> ins, Attrs at, const std::string &hint,
               ValueId into = kNoValue) {
    Node n{op,
           base_ + "/" + hint + "_" + std::to_string(counter_++),
           std::move(ins),
           {kNoValue},
           std::move(at),
           loc_};
    InferContext ctx{n, {}, {}, {}, {}};
    for (ValueId v : n.inputs) {
      ctx.inputTypes.push_back(v == kNoValue ? nullptr : &g_.value(v).type);
      std::optional<std::vector<SymInt>> iv;
      const Tensor *c = nullptr;
      if (v != kNoValue && g_.isSymConstant(v)) iv = g_.symConstant(v);
      if (v != kNoValue && g_.isConstant(v)) {
        c = &g_.constant(v);
        if (!isFloat(c->dtype())) {
          iv.emplace();
          for (int64_t x : c->toInts()) iv->push_back(x);
        }
      }
      ctx.intValues.push_back(iv);
      ctx.constants.push_back(c);
    }
    ctx.freshSymbol = [](const std::string &) -> SymInt {
      COIL_CHECK(false) << "attention fusion made a node with a data-dependent shape";
      return SymInt(0);
    };
    auto types = inferNode(ctx);
    COIL_CHECK(types.ok() && types->size() >= 1)
        << "attention fusion made an invalid " << opName(op)
        << " node: " << (types.ok() ? "" : types.error().render());
    if (into == kNoValue) {
      into = g_.addValue(g_.uniqueName(n.name), (*types)[0], ValueKind::NodeOutput);
    } else {
      const TensorType &want = g_.value(into).type, &got = (*types)[0];
      bool fits = want.dtype == got.dtype && want.rank() == got.rank();
      for (size_t i = 0; fits && i < want.shape.size(); ++i)
        fits = want.shape[i] == got.shape[i] || proveEQ(want.shape[i], got.shape[i], g_.symbols);
      COIL_CHECK(fits) << "attention fusion: " << opName(op) << " gives " << got.str() << " for "
                       << want.str();
    }
    n.outputs = {into};
    g_.addNode(std::move(n));
    return into;
  }

  /// The one attn_mask of the terms other than the causal one (kNoValue when there is none).
  ValueId buildMask(const Plan &p) {
    ValueId add = kNoValue, keep = kNoValue;
    for (size_t i = 0; i < p.terms.size(); ++i) {
      if (int(i) == p.causalTerm) continue;
      const MaskTerm &t = p.terms[i];
      if (t.kind == MaskTerm::kKeep) {
        ValueId c = t.negate ? node(OpKind::Not, {t.value}, {}, "mask") : t.value;
        keep = keep == kNoValue ? c : node(OpKind::And, {keep, c}, {}, "mask");
        continue;
      }
      ValueId m;
      if (t.kind == MaskTerm::kWhereNeg) {
        double n = std::max(t.neg, Matcher::lowest(p.dt));
        ValueId zero = scalarConst(p.dt, 0), neg = scalarConst(p.dt, n);
        m = node(OpKind::Where, {t.value, t.negate ? neg : zero, t.negate ? zero : neg}, {},
                 "mask");
      } else if (g_.value(t.value).type.dtype != p.dt) {
        const Tensor &c = g_.constant(t.value);
        m = g_.addConstant(
            g_.uniqueName(g_.value(t.value).name + "_" + std::string(dtypeName(p.dt))),
            Tensor::fromDoubles(p.dt, c.shape(), c.toDoubles()));
      } else {
        m = t.value;
      }
      add = add == kNoValue ? m : node(OpKind::Add, {add, m}, {}, "mask");
    }
    if (keep == kNoValue) return add;
    if (add == kNoValue) return keep;
    return node(OpKind::Where, {keep, add, scalarConst(p.dt, -kInf)}, {}, "mask");
  }
};

} // namespace

Expected<Graph> fuseAttention(const Graph &g, int *fused) {
  if (fused) *fused = 0;
  Matcher matcher(g);
  std::map<int32_t, Plan> plans;
  for (int32_t i = 0; i < int32_t(g.nodes().size()); ++i)
    if (std::optional<Plan> p = matcher.match(i)) plans.emplace(i, std::move(*p));
  if (plans.empty()) return g;
  Graph out = g;
  std::vector<Node> nodes = std::move(out.mutableNodes());
  out.mutableNodes().clear();
  for (size_t v = 0; v < out.numValues(); ++v) {
    Value &val = out.value(ValueId(v));
    if (val.kind == ValueKind::NodeOutput) val.producer = -1;
  }
  Emitter emitter(out);
  for (int32_t i = 0; i < int32_t(nodes.size()); ++i) {
    auto it = plans.find(i);
    if (it == plans.end()) {
      out.addNode(std::move(nodes[size_t(i)]));
      continue;
    }
    emitter.emit(it->second, nodes[size_t(i)]);
    if (fused) ++*fused;
  }
  return out.compacted();
}

} // namespace coil
