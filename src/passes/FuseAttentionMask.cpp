// The attention fusion's mask classification (see FuseAttentionInternal.h): zero and nonzero
// fills, causal triangles (constant, Trilu, Range comparisons, 0/1 predicates, additive causal
// masks) and the choice of the term that becomes is_causal.
#include "passes/FuseAttentionInternal.h"

#include <cmath>

namespace coil::attnfusion {

/// Whether every element of `v` is zero.
bool Matcher::allZero(ValueId v, int depth) const {
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
bool Matcher::nonzeroFill(ValueId v) const {
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
std::optional<Tri> Matcher::causalPolarity(ValueId v, int depth) const {
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
std::optional<Tri> Matcher::constantTriangle(ValueId v) const {
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
std::optional<Tri> Matcher::comparison(const Node &n) const {
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
int Matcher::varyingAxis(const std::vector<SymInt> &s) const {
  int found = 0;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] != SymInt(1)) {
      if (found) return -1;
      found = int(s.size() - i);
    }
  return found;
}

std::optional<IdxForm> Matcher::indexForm(ValueId v, int depth) const {
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
std::optional<Tri> Matcher::zeroOne(ValueId v, int depth) const {
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
std::optional<double> Matcher::additiveCausal(ValueId m, int depth) const {
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

/// Whether the bool `v` is true everywhere: a nonzero fill, or comparisons of index forms that
/// hold at every index (indices are >= 0: Range(0, n) >= 0 is Hugging Face's bidirectional
/// mask), through Expand, Identity, bool Casts, And and Or.
bool Matcher::alwaysTrue(ValueId v, int depth) const {
  if (depth > 16) return false;
  if (nonzeroFill(v)) return true;
  const Node *n = prod(v);
  if (!n) return false;
  switch (n->op) {
  case OpKind::Expand:
  case OpKind::Identity:
    return alwaysTrue(n->inputs[0], depth + 1);
  case OpKind::Cast:
    return type(n->inputs[0]).dtype == DType::Bool && alwaysTrue(n->inputs[0], depth + 1);
  case OpKind::And:
    return alwaysTrue(n->inputs[0], depth + 1) && alwaysTrue(n->inputs[1], depth + 1);
  case OpKind::Or:
    return alwaysTrue(n->inputs[0], depth + 1) || alwaysTrue(n->inputs[1], depth + 1);
  case OpKind::Less:
  case OpKind::LessOrEqual:
  case OpKind::Greater:
  case OpKind::GreaterOrEqual: {
    std::optional<IdxForm> a = indexForm(n->inputs[0], 0), b = indexForm(n->inputs[1], 0);
    if (!a || !b) return false;
    if (n->op == OpKind::Less || n->op == OpKind::LessOrEqual) std::swap(a, b);
    // a > b or a >= b at every i, j >= 0: a - b = di i + dj j + dc with di, dj >= 0 and dc
    // at least 1 (strict) or 0.
    const bool strict = n->op == OpKind::Less || n->op == OpKind::Greater;
    return a->ci >= b->ci && a->cj >= b->cj && a->c - b->c >= (strict ? 1 : 0);
  }
  default:
    return false;
  }
}

/// The bool `c`, or a value of which it is the broadcast: through Expand, bool Casts and Ands
/// with an operand true everywhere. Hugging Face's padding mask arrives as And(q >= 0, pad)
/// expanded to [B, 1, S, T]; its value is pad [B, 1, 1, T], one row for every query.
ValueId Matcher::narrowCondition(ValueId c, int depth) const {
  if (depth > 16) return c;
  const Node *n = prod(c);
  if (!n || type(c).dtype != DType::Bool) return c;
  switch (n->op) {
  case OpKind::Expand:
  case OpKind::Identity:
    return narrowCondition(n->inputs[0], depth + 1);
  case OpKind::Cast:
    return type(n->inputs[0]).dtype == DType::Bool ? narrowCondition(n->inputs[0], depth + 1) : c;
  case OpKind::And:
    for (int side = 0; side < 2; ++side)
      if (alwaysTrue(n->inputs[size_t(1 - side)]))
        return narrowCondition(n->inputs[size_t(side)], depth + 1);
    return c;
  default:
    return c;
  }
}

/// The node of `v` when it is Where(C, a, b) of one-element constants a and b of v's dtype.
const Node *Matcher::whereOfScalars(ValueId v) const {
  const Node *n = prod(v);
  if (!n || n->op != OpKind::Where) return nullptr;
  for (size_t i = 1; i < 3; ++i)
    if (!scalar(n->inputs[i]) || type(n->inputs[i]).dtype != type(v).dtype) return nullptr;
  return n;
}

/// Narrows a term (MaskTerm::narrowCond): a bool condition in place, an additive Where of
/// scalars through its condition; only to a value of fewer elements.
void Matcher::narrowTerm(MaskTerm &t) const {
  auto elements = [&](ValueId v) {
    SymInt n(1);
    for (const SymInt &d : type(v).shape) n = n * d;
    return n;
  };
  auto fewer = [&](ValueId a, ValueId b) {
    return a != b && elements(a) != elements(b) && type(a).rank() <= type(b).rank();
  };
  if (t.kind != MaskTerm::kAdditive) {
    const ValueId c = narrowCondition(t.value);
    if (fewer(c, t.value)) t.value = c;
    return;
  }
  const Node *n = whereOfScalars(t.value);
  if (!n) return;
  const ValueId c = narrowCondition(n->inputs[0]);
  if (!fewer(c, t.value)) return;
  t.narrowCond = c, t.narrowThen = n->inputs[1], t.narrowElse = n->inputs[2];
}

/// The operands of the And tree `v` (bool) through Expand, Identity and bool Casts.
void Matcher::andLeaves(ValueId v, std::vector<ValueId> &leaves, int depth) const {
  const Node *n = prod(v);
  if (n && depth < 16 && type(v).dtype == DType::Bool) {
    if (n->op == OpKind::Expand || n->op == OpKind::Identity ||
        (n->op == OpKind::Cast && type(n->inputs[0]).dtype == DType::Bool))
      return andLeaves(n->inputs[0], leaves, depth + 1);
    if (n->op == OpKind::And) {
      andLeaves(n->inputs[0], leaves, depth + 1);
      andLeaves(n->inputs[1], leaves, depth + 1);
      return;
    }
  }
  leaves.push_back(v);
}

/// For a condition that is the And of the causal triangle (kept at j <= i, spanning the
/// scores' S x T `s`), conditions true everywhere, and one bool K that does not vary over the
/// queries (its second-to-last dim 1): K.
std::optional<ValueId> Matcher::causalKeyCondition(ValueId c, const std::vector<SymInt> &s) const {
  std::vector<ValueId> leaves;
  andLeaves(c, leaves);
  const size_t r = s.size();
  bool causal = false;
  ValueId key = kNoValue;
  for (ValueId l : leaves) {
    if (alwaysTrue(l)) continue;
    const TensorType &lt = type(l);
    const size_t lr = size_t(lt.rank());
    std::optional<Tri> tri = causalPolarity(l);
    if (tri && *tri == Tri::kKeep && lr >= 2 && same(lt.shape[lr - 2], s[r - 2]) &&
        same(lt.shape[lr - 1], s[r - 1])) {
      causal = true;
      continue;
    }
    if (key != kNoValue || lt.dtype != DType::Bool || (lr >= 2 && lt.shape[lr - 2] != SymInt(1)))
      return std::nullopt;
    key = l;
  }
  if (!causal || key == kNoValue) return std::nullopt;
  return key;
}

/// Splits Hugging Face decoders' mask, the one additive term Where(causal and K, 0, fill)
/// with fill finite and at most -1e30 (so that score + fill rounds to fill): is_causal, the
/// key mask Where(K, 0, fill), and the rows that K masks at every key they see, whose
/// softmax is uniform over all T keys in the original (Plan::splitKeys).
void Matcher::splitCausal(Plan &p) const {
  if (p.causalTerm >= 0 || p.terms.size() != 1) return;
  const MaskTerm &t = p.terms[0];
  if (t.kind != MaskTerm::kAdditive || type(t.value).dtype != p.dt) return;
  const Node *n = whereOfScalars(t.value);
  if (!n) return;
  const double a = *scalar(n->inputs[1]), b = *scalar(n->inputs[2]);
  if (a != 0 || !(b <= -1e30) || std::isinf(b)) return;
  std::optional<ValueId> k = causalKeyCondition(n->inputs[0], p.scoreShape);
  if (!k) return;
  p.causalTerm = 0;
  p.splitKeys = *k, p.splitThen = n->inputs[1], p.splitElse = n->inputs[2];
}

/// Chooses the term that becomes is_causal and checks the others' dtypes.
bool Matcher::planMask(Plan &p) const {
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
  splitCausal(p);
  for (size_t i = 0; i < p.terms.size(); ++i) {
    const MaskTerm &t = p.terms[i];
    if (int(i) == p.causalTerm) continue;
    if (t.mustBeFlag) return false;
    if (t.kind == MaskTerm::kAdditive && type(t.value).dtype != p.dt && !exactIn(t.value, p.dt))
      return false;
    // Where(C, 0, n) in Q's dtype: n must stay a large finite value there.
    if (t.kind == MaskTerm::kWhereNeg && lowestOf(p.dt) > -1e30) return false;
  }
  for (size_t i = 0; i < p.terms.size(); ++i)
    if (int(i) != p.causalTerm) narrowTerm(p.terms[i]);
  return true;
}

double Matcher::lowestOf(DType t) {
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
bool Matcher::exactIn(ValueId v, DType t) const {
  if (!g_.isConstant(v)) return false;
  const Tensor &c = g_.constant(v);
  std::vector<double> x = c.toDoubles();
  std::vector<double> y = Tensor::fromDoubles(t, c.shape(), x).toDoubles();
  for (size_t i = 0; i < x.size(); ++i)
    if (!(x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i])))) return false;
  return true;
}

} // namespace coil::attnfusion
