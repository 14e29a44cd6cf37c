// The attention fusion's matcher (see FuseAttentionInternal.h): from a final MatMul back
// through the softmax and the mask and scale terms to the scores' MatMul, Q, K (untransposed)
// and V, grouped-query repeats, and the shapes and dtypes of all of them.
#include "ir/Infer.h"
#include "passes/FuseAttentionInternal.h"

#include <cmath>

namespace coil::attnfusion {

std::optional<Plan> Matcher::match(int32_t idx) {
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

const Node *Matcher::prod(ValueId v) const {
  if (v == kNoValue) return nullptr;
  const Value &val = g_.value(v);
  if (val.kind != ValueKind::NodeOutput || val.producer < 0) return nullptr;
  return &g_.nodes()[size_t(val.producer)];
}

bool Matcher::sameShape(const std::vector<SymInt> &a, const std::vector<SymInt> &b) const {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same(a[i], b[i])) return false;
  return true;
}

/// The value of a one-element constant.
std::optional<double> Matcher::scalar(ValueId v) const {
  if (v == kNoValue || !g_.isConstant(v)) return std::nullopt;
  const Tensor &t = g_.constant(v);
  if (t.numel() != 1) return std::nullopt;
  return t.toDoubles()[0];
}

/// A one-element constant whose shape does not widen `into` when broadcast against it.
std::optional<double> Matcher::scalarFor(ValueId v, const TensorType &into) const {
  if (!g_.isConstant(v) || type(v).rank() > into.rank()) return std::nullopt;
  return scalar(v);
}

/// Whether `m` broadcasts into `shape` without widening it.
bool Matcher::broadcastsInto(ValueId m, const std::vector<SymInt> &shape) const {
  const std::vector<SymInt> &ms = type(m).shape;
  if (ms.size() > shape.size()) return false;
  size_t off = shape.size() - ms.size();
  for (size_t i = 0; i < ms.size(); ++i)
    if (ms[i] != SymInt(1) && !same(ms[i], shape[off + i])) return false;
  return true;
}

/// Nodes between the softmax and the final MatMul that pass values through.
bool Matcher::isTransparent(const Node &n) const {
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
bool Matcher::isSafeSoftmax(const Node &n) const {
  if (n.inputs.size() != 3) return false;
  const Node *isnan = prod(n.inputs[0]);
  std::optional<double> zero = scalarFor(n.inputs[1], type(n.outputs[0]));
  return isnan && isnan->op == OpKind::IsNaN && isnan->inputs[0] == n.inputs[2] && zero &&
         *zero == 0 && uses_[size_t(n.inputs[0])] == 1 &&
         sameShape(type(n.outputs[0]).shape, type(n.inputs[2]).shape);
}

bool Matcher::isSafeSoftmaxInput(ValueId v) const {
  const Node *n = prod(v);
  return n && n->op == OpKind::Softmax && uses_[size_t(v)] == 2;
}

/// The scores X back to their MatMul; `scaled` when a scale lies between X and the softmax.
std::optional<Matcher::Parsed> Matcher::parseScores(ValueId cur, bool scaled) {
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
ValueId Matcher::peelScale(ValueId v, double &scale) const {
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
bool Matcher::checkShapes(Plan &p, ValueId q, ValueId kt) const {
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
KPlan Matcher::untranspose(ValueId kt) const {
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
std::optional<std::pair<ValueId, int64_t>> Matcher::repeatedHeads(ValueId e) const {
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

// Compiled on its own (no longer inlined into match(), as it was inside the class), this
// function meets GCC 12's false -Wmaybe-uninitialized on copying a disengaged
// std::optional<std::pair>.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
/// For rank 4: K and V whose heads are both repeated in place by the same factor become
/// their sources (Attention's kv heads).
void Matcher::groupedQuery(Plan &p) const {
  // `e` [B, Hkv, rep, T, D] merged into `merged` [B, H, T, D].
  auto merges = [&](ValueId e, const std::vector<SymInt> &merged) {
    const std::vector<SymInt> &es = type(e).shape;
    return merged.size() == 4 && es.size() == 5 && same(es[0], merged[0]) &&
           same(es[3], merged[2]) && same(es[4], merged[3]);
  };
  auto source = [&](ValueId x) -> std::optional<std::pair<ValueId, int64_t>> {
    const Node *n = prod(x);
    if (!n || n->op != OpKind::Reshape || !merges(n->inputs[0], type(x).shape)) return std::nullopt;
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
#pragma GCC diagnostic pop

} // namespace coil::attnfusion
