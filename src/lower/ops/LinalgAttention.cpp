// Lowering of Attention (scaled dot-product attention, opset 23+).
//
// Where the fused extern coil_cpu_attention_<dtype> (kernels/cpu/CpuKernels.h; a CUDA twin on
// the GPU) computes the node (Q, K and V of one dtype among f32, f16, bf16, f64; no past cache,
// nonpad_kv_seqlen or sliding window; the QK^T output not wanted; a bool mask or a float mask of
// Q's dtype whose last dim is the key length and whose other dims are 1 or full), the node is
// ONE extern call: Q, K, V and the mask are passed as the nodes they are views of, with an
// element offset and strides read off the views' index maps (Transpose / Reshape / Slice /
// Expand around attention cost no copy); only a view that is not affine in its indices is
// copied first. Y is stored [B, S, H, Dv], so the usual Transpose + Reshape back to
// [B, S, H*Dv] is a free view of it. No B x H x S x T buffer exists on that path.
//
// Otherwise the node is decomposed as the interpreter computes it
// (interp/kernels/LinalgAttention.cpp):
//   Q, K, V as [B, H, S, D] views (3-D inputs are split into heads by a view), the past cache
//   prepended to K and V (a Pointwise), grouped-query heads read through an index map;
//   scores = Q K^T (the GEMM extern for f32/f64, a Reduction otherwise) * scale, softcap;
//   bias = attn_mask (bool: false masks; float: added; a short last dim masks the rest) +
//          causal mask + sliding window + nonpad_kv_seqlen, as -inf where masked;
//   softmax over the keys as Reductions (max, sum of exp) and a Pointwise, rows masked
//   everywhere giving zeros; Y = P V (GEMM or Reduction), back to [B, S, H*Dv] for 3-D Q.
// f32 computes in f32, f64 in f64, f16/bf16 in f32 (the interpreter uses double throughout).
#include "kernels/Externs.h"
#include "lower/ops/LinalgLower.h"

#include <array>
#include <cmath>
#include <limits>
#include <set>

namespace coil::loop::linalg {
namespace {

/// A [B, H, S, D] view of a 4-D tensor (itself) or of a 3-D [B, S, H*D] one.
Expected<TensorRef> toHeads(LowerContext &ctx, const TensorRef &t, int64_t heads,
                            const char *what) {
  if (t.rank() == 4) return t;
  if (t.rank() != 3)
    return ctx.error(std::string(what) + " must have rank 3 or 4, got rank " +
                     std::to_string(t.rank()));
  if (heads < 1) return ctx.error("q_num_heads and kv_num_heads are required for 3-D inputs");
  SymInt hidden = t.shape[2];
  if (auto h = hidden.maybeConstant(); h && *h % heads != 0)
    return ctx.error(std::string(what) + " hidden size " + std::to_string(*h) +
                     " is not divisible by the number of heads " + std::to_string(heads));
  SymInt d = floorDiv(hidden, SymInt(heads));
  TensorRef r = ctx.reshape(t, {t.shape[0], t.shape[1], heads, d});
  return ctx.permute(r, {0, 2, 1, 3});
}

/// past [B, H, P, D] followed by cur [B, H, T, D] along dim 2.
TensorRef concatSeq(LowerContext &ctx, const TensorRef &past, const TensorRef &cur) {
  SymInt p = past.shape[2];
  std::vector<SymInt> shape{cur.shape[0], cur.shape[1], p + cur.shape[2], cur.shape[3]};
  return ctx.pointwise(cur.dtype, shape, [&](BodyBuilder &b, const std::vector<SymInt> &i) {
    Val fromPast = b.load(past, {i[0], i[1], min(i[2], p - 1), i[3]});
    Val fromCur = b.load(cur, {i[0], i[1], max(i[2] - p, SymInt(0)), i[3]});
    return b.op(ScalarOp::Select, b.op(ScalarOp::Lt, b.index(i[2]), b.index(p)), fromPast, fromCur);
  });
}

/// Key/value heads [B, Hkv, T, D] seen as [B, H, T, D]: query head h reads kv head h / rep.
TensorRef expandHeads(LowerContext &ctx, const TensorRef &t, const SymInt &h, int64_t rep) {
  if (rep == 1) return t;
  return ctx.view(t, {t.shape[0], h, t.shape[2], t.shape[3]}, [&](const std::vector<SymInt> &v) {
    return std::vector<SymInt>{v[0], floorDiv(v[1], SymInt(rep)), v[2], v[3]};
  });
}

bool isGemmType(DType t) {
  return t == DType::F32 || t == DType::F64;
}

/// a [B, H, m, k] x b [B, H, k, n] -> [B, H, m, n] of `outT`.
TensorRef batchedProduct(LowerContext &ctx, const TensorRef &a, const TensorRef &b, DType outT) {
  std::vector<SymInt> batch{a.shape[0], a.shape[1]};
  SymInt m = a.shape[2], k = a.shape[3], n = b.shape[3];
  if (isGemmType(outT) && a.dtype == outT && b.dtype == outT)
    return gemmExtern(ctx, a, b, batch, m, n, k, 1.0);
  return matmulReduction(ctx, a, b, batch, m, n, k, outT, DType::F64, plainElem(a, DType::F64),
                         plainElem(b, DType::F64));
}

Status lowerAttentionDecomposed(LowerContext &ctx) {
  const Attrs &at = ctx.gnode().attrs;
  TensorRef q0 = ctx.input(0);
  int64_t qHeads = at.getInt("q_num_heads", 0), kvHeads = at.getInt("kv_num_heads", 0);
  COIL_TRY(TensorRef q, toHeads(ctx, q0, qHeads, "Q"));
  COIL_TRY(TensorRef k, toHeads(ctx, ctx.input(1), kvHeads, "K"));
  COIL_TRY(TensorRef v, toHeads(ctx, ctx.input(2), kvHeads, "V"));
  bool hasPast = ctx.hasInput(4);
  if (hasPast != ctx.hasInput(5))
    return ctx.error("past_key and past_value must be given together");
  SymInt past = 0;
  if (hasPast) {
    TensorRef pk = ctx.input(4), pv = ctx.input(5);
    if (pk.rank() != 4 || pv.rank() != 4)
      return ctx.error("past_key and past_value must have rank 4");
    past = pk.shape[2];
    k = concatSeq(ctx, pk, k);
    v = concatSeq(ctx, pv, v);
  }
  SymInt B = q.shape[0], H = q.shape[1], S = q.shape[2], D = q.shape[3], Hkv = k.shape[1],
         T = k.shape[2], DV = v.shape[3];
  int64_t rep = 1;
  if (!(H == Hkv)) {
    auto hc = H.maybeConstant(), kc = Hkv.maybeConstant();
    if (!hc || !kc || *kc < 1 || *hc % *kc != 0)
      return ctx.error("the query heads (" + H.str() + ") must be a constant multiple of the " +
                       "key/value heads (" + Hkv.str() + ")");
    rep = *hc / *kc;
  }
  double scale;
  if (at.has("scale")) {
    scale = at.getFloat("scale", 1.0);
  } else {
    auto dc = D.maybeConstant();
    if (!dc) return ctx.error("Attention without a scale needs a constant head size");
    scale = 1.0 / std::sqrt(double(*dc));
  }
  double softcap = at.getFloat("softcap", 0.0);
  bool causal = at.getInt("is_causal", 0) != 0;
  int64_t left = at.getInt("left_window_size", -1), right = at.getInt("right_window_size", -1);
  int64_t mode = at.getInt("qk_matmul_output_mode", 0);
  DType dt = q.dtype, ct = dt == DType::F64 ? DType::F64 : DType::F32;
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<SymInt> scoreShape{B, H, S, T}, rowShape{B, H, S};

  // scores = (Q K^T) * scale, soft-capped.
  TensorRef kg = expandHeads(ctx, k, H, rep), vg = expandHeads(ctx, v, H, rep);
  TensorRef qk = batchedProduct(ctx, q, ctx.permute(kg, {0, 1, 3, 2}), ct);
  TensorRef scores =
      ctx.pointwise(ct, scoreShape, [&](BodyBuilder &b, const std::vector<SymInt> &i) {
        Val s = b.op(ScalarOp::Mul, b.load(qk, i), b.constant(ct, scale));
        if (softcap > 0) {
          Val c = b.constant(ct, softcap);
          s = b.op(ScalarOp::Mul, c, b.op(ScalarOp::Tanh, b.op(ScalarOp::Div, s, c)));
        }
        return s;
      });

  // The additive bias (0 or -inf, or the float mask).
  std::optional<TensorRef> mask, nonpad;
  if (ctx.hasInput(3)) {
    TensorRef m = ctx.input(3);
    if (m.rank() < 1 || m.rank() > 4)
      return ctx.error("attn_mask must have rank 1 to 4, got rank " + std::to_string(m.rank()));
    std::vector<SymInt> s4(size_t(4 - m.rank()), SymInt(1));
    s4.insert(s4.end(), m.shape.begin(), m.shape.end());
    mask = ctx.reshape(m, s4);
  }
  if (ctx.hasInput(6)) nonpad = ctx.input(6);
  bool anyBias = mask || causal || left >= 0 || right >= 0 || nonpad;
  std::optional<TensorRef> bias;
  if (anyBias)
    bias = ctx.pointwise(ct, scoreShape, [&](BodyBuilder &b, const std::vector<SymInt> &i) {
      Val neg = b.constant(ct, -inf);
      Val r = b.constant(ct, 0);
      Val jv = b.index(i[3]);
      if (mask) {
        const auto &ms = mask->shape;
        std::vector<SymInt> idx;
        for (size_t d = 0; d < 3; ++d) idx.push_back(ms[d] == SymInt(1) ? SymInt(0) : i[d]);
        bool full = ms[3] == T;
        idx.push_back(full ? i[3] : min(i[3], ms[3] - 1));
        Val mv = b.load(*mask, idx);
        r = mask->dtype == DType::Bool ? b.op(ScalarOp::Select, mv, b.constant(ct, 0), neg)
                                       : b.cast(mv, ct);
        if (!full) r = b.op(ScalarOp::Select, b.op(ScalarOp::Lt, jv, b.index(ms[3])), r, neg);
      }
      Val npad = nonpad ? b.cast(b.load(*nonpad, {i[0]}), DType::I64) : kNoVal;
      Val offset = nonpad && !hasPast ? b.op(ScalarOp::Sub, npad, b.index(S)) : b.index(past);
      Val iv = b.op(ScalarOp::Add, b.index(i[2]), offset);
      if (causal) r = b.op(ScalarOp::Select, b.op(ScalarOp::Gt, jv, iv), neg, r);
      Val diff = b.op(ScalarOp::Sub, iv, jv);
      if (left >= 0) r = b.op(ScalarOp::Select, b.op(ScalarOp::Gt, diff, b.index(left)), neg, r);
      if (right >= 0)
        r = b.op(ScalarOp::Select, b.op(ScalarOp::Gt, b.op(ScalarOp::Neg, diff), b.index(right)),
                 neg, r);
      if (nonpad) r = b.op(ScalarOp::Select, b.op(ScalarOp::Ge, jv, npad), neg, r);
      return r;
    });
  TensorRef row = scores;
  if (bias)
    row = ctx.pointwise(ct, scoreShape, [&](BodyBuilder &b, const std::vector<SymInt> &i) {
      return b.op(ScalarOp::Add, b.load(scores, i), b.load(*bias, i));
    });

  // Softmax over the keys; rows whose bias is -inf everywhere give zeros.
  auto overKeys = [&](const TensorRef &t) {
    return [t](BodyBuilder &b, const std::vector<SymInt> &o, const std::vector<SymInt> &r, Val *) {
      return b.load(t, {o[0], o[1], o[2], r[0]});
    };
  };
  TensorRef mx = ctx.reduce(ReduceKind::Max, ct, ct, rowShape, {T}, overKeys(row));
  TensorRef e = ctx.pointwise(ct, scoreShape, [&](BodyBuilder &b, const std::vector<SymInt> &i) {
    Val m = b.load(mx, {i[0], i[1], i[2]});
    Val isNegInf = b.op(ScalarOp::IsNegInf, m);
    m = b.op(ScalarOp::Select, isNegInf, b.constant(ct, 0), m);
    return b.op(ScalarOp::Exp, b.op(ScalarOp::Sub, b.load(row, i), m));
  });
  TensorRef sum = ctx.reduce(ReduceKind::Sum, ct, DType::F64, rowShape, {T}, overKeys(e));
  std::optional<TensorRef> maxBias;
  if (bias) maxBias = ctx.reduce(ReduceKind::Max, ct, ct, rowShape, {T}, overKeys(*bias));
  TensorRef p = ctx.pointwise(ct, scoreShape, [&](BodyBuilder &b, const std::vector<SymInt> &i) {
    std::vector<SymInt> o{i[0], i[1], i[2]};
    Val s = b.load(sum, o);
    Val zero = b.constant(ct, 0);
    Val masked = b.op(ScalarOp::Eq, s, zero);
    if (maxBias) masked = b.op(ScalarOp::Or, masked, b.op(ScalarOp::IsNegInf, b.load(*maxBias, o)));
    return b.op(ScalarOp::Select, masked, zero, b.op(ScalarOp::Div, b.load(e, i), s));
  });

  // Y = P V.
  TensorRef y = batchedProduct(ctx, p, vg, dt);
  if (q0.rank() == 3) y = ctx.reshape(ctx.permute(y, {0, 2, 1, 3}), ctx.outputType(0).shape);
  ctx.setOutput(0, y);
  auto wanted = [&](size_t i) {
    return i < ctx.numOutputs() && ctx.gnode().outputs[i] != kNoValue;
  };
  if (wanted(1)) ctx.setOutput(1, k);
  if (wanted(2)) ctx.setOutput(2, v);
  if (wanted(3)) {
    TensorRef src = mode == 3 ? p : mode == 2 ? row : scores;
    ctx.setOutput(3,
                  ctx.pointwise(dt, scoreShape, [&](BodyBuilder &b, const std::vector<SymInt> &i) {
                    return b.cast(b.load(src, i), dt);
                  }));
  }
  return okStatus();
}

// --- the fused extern

/// Whether `e` mentions a view variable (%v<i>).
bool hasViewVar(const SymInt &e) {
  std::set<std::string> syms;
  e.collectSymbols(syms);
  for (const std::string &s : syms)
    if (s.rfind("%v", 0) == 0) return true;
  return false;
}

/// Splits `e` into sum_i coef[i] * %v<i> + c with var-free coef and c; false when `e` is not
/// affine in the view variables.
bool affineIn(const SymInt &e, std::vector<SymInt> &coef, SymInt &c) {
  if (!hasViewVar(e)) {
    c = c + e;
    return true;
  }
  switch (e.kind()) {
  case SymInt::Kind::Symbol:
    for (size_t i = 0; i < coef.size(); ++i)
      if (e.symbolName() == viewVar(int(i))) {
        coef[i] = coef[i] + 1;
        return true;
      }
    return false;
  case SymInt::Kind::Add:
    for (const SymInt &t : e.operands())
      if (!affineIn(t, coef, c)) return false;
    return true;
  case SymInt::Kind::Mul: {
    // One factor holds the variables; the product of the others scales it.
    SymInt factor = 1;
    const SymInt *inner = nullptr;
    for (const SymInt &f : e.operands()) {
      if (!hasViewVar(f)) {
        factor = factor * f;
      } else {
        if (inner) return false;
        inner = &f;
      }
    }
    std::vector<SymInt> ic(coef.size(), SymInt(0));
    SymInt cc = 0;
    if (!affineIn(*inner, ic, cc)) return false;
    for (size_t i = 0; i < coef.size(); ++i) coef[i] = coef[i] + factor * ic[i];
    c = c + factor * cc;
    return true;
  }
  default:
    return false;
  }
}

/// A term of a sum as multiplier * f with f a FloorDiv or Mod holding view variables.
bool floorTerm(const SymInt &t, SymInt &mult, SymInt &f) {
  auto isFloor = [](const SymInt &x) {
    return (x.kind() == SymInt::Kind::FloorDiv || x.kind() == SymInt::Kind::Mod) && hasViewVar(x);
  };
  if (isFloor(t)) {
    mult = 1, f = t;
    return true;
  }
  if (t.kind() != SymInt::Kind::Mul) return false;
  mult = 1;
  bool found = false;
  for (const SymInt &x : t.operands()) {
    if (isFloor(x) && !found) {
      f = x, found = true;
    } else if (hasViewVar(x)) {
      return false;
    } else {
      mult = mult * x;
    }
  }
  return found;
}

/// `e` with every pair of terms  (a*c) * (x // c)  and  a * (x % c)  replaced by  a * x  (the
/// flattened index of a view that splits a dim and merges it back).
SymInt mergeFloorPairs(const SymInt &e) {
  if (e.kind() != SymInt::Kind::Add) return e;
  std::vector<SymInt> terms = e.operands();
  bool changed = true;
  while (changed) {
    changed = false;
    for (size_t i = 0; i < terms.size() && !changed; ++i) {
      SymInt ma, fa;
      if (!floorTerm(terms[i], ma, fa) || fa.kind() != SymInt::Kind::FloorDiv) continue;
      const SymInt &x = fa.operands()[0], &cdiv = fa.operands()[1];
      for (size_t j = 0; j < terms.size(); ++j) {
        SymInt mb, fb;
        if (j == i || !floorTerm(terms[j], mb, fb) || fb.kind() != SymInt::Kind::Mod) continue;
        if (fb.operands()[0] != x || fb.operands()[1] != cdiv || ma != mb * cdiv) continue;
        terms[i] = mb * x;
        terms.erase(terms.begin() + long(j));
        changed = true;
        break;
      }
    }
  }
  SymInt r = 0;
  for (const SymInt &t : terms) r = r + t;
  return r;
}

} // namespace

std::optional<ViewStrides> viewStrides(LowerContext &ctx, const TensorRef &t) {
  const Node &n = ctx.program().nodes.at(size_t(t.node));
  const SymRanges &ranges = ctx.program().symbols;
  size_t r = t.shape.size();
  std::vector<SymInt> map = t.map;
  if (map.empty())
    for (size_t i = 0; i < r; ++i) map.push_back(SymInt::symbol(viewVar(int(i))));
  // Row-major strides of the node.
  std::vector<SymInt> ns(n.shape.size(), SymInt(1));
  for (size_t d = n.shape.size(); d-- > 1;) ns[d - 1] = ns[d] * n.shape[d];
  ViewStrides s{0, std::vector<SymInt>(r, SymInt(0))};
  bool ok = true;
  for (size_t d = 0; d < map.size() && ok; ++d) {
    std::vector<SymInt> coef(r, SymInt(0));
    SymInt c = 0;
    ok = affineIn(map[d], coef, c);
    for (size_t i = 0; ok && i < r; ++i) s.strides[i] = s.strides[i] + coef[i] * ns[d];
    s.offset = s.offset + c * ns[d];
  }
  if (!ok) {
    // The flattened index may still be affine: a dim split by one reshape and merged by the
    // next gives (a*c) * (x // c) + a * (x % c) = a * x.
    SymInt flat = 0;
    for (size_t d = 0; d < map.size(); ++d) flat = flat + map[d] * ns[d];
    std::vector<SymInt> coef(r, SymInt(0));
    SymInt c = 0;
    if (!affineIn(mergeFloorPairs(flat), coef, c)) return std::nullopt;
    s.strides = coef;
    s.offset = c;
  }
  for (size_t i = 0; i < r; ++i)
    if (t.shape[i] == SymInt(1)) s.strides[i] = 0;
  for (const SymInt &v : s.strides)
    if (bounds(v, ranges).min < 0) return std::nullopt;
  if (bounds(s.offset, ranges).min < 0) return std::nullopt;
  return s;
}

namespace {

/// A view read in place by the extern: its node, whole, and where the view lies in it.
struct Strided {
  TensorRef node;
  SymInt offset;
  std::vector<SymInt> strides;
};

std::optional<Strided> stridedView(LowerContext &ctx, const TensorRef &t) {
  std::optional<ViewStrides> s = viewStrides(ctx, t);
  if (!s) return std::nullopt;
  return Strided{wholeNode(ctx, t), s->offset, s->strides};
}

/// `t` (Q, K or V as [B, H, S, D]) for the extern: in place when strided with a contiguous last
/// dim, else a copy.
Strided externOperand(LowerContext &ctx, const TensorRef &t) {
  std::optional<Strided> s = stridedView(ctx, t);
  if (s && (t.shape[3] == SymInt(1) || s->strides[3] == SymInt(1))) return *s;
  return *stridedView(ctx, ctx.realize(t));
}

bool isExternType(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64;
}

/// The order in which the extern stores Y's dims [B, H, S, Dv]: [B, S, H, Dv] (so that the
/// usual Transpose + Reshape to [B, S, H*Dv] is a view), [B, H, S, Dv] for a graph output, or
/// the permutation of the one Transpose that reads Y when it keeps Dv last (e.g.
/// nn.MultiheadAttention's [S, B, H, Dv]).
std::array<int64_t, 4> yLayout(LowerContext &ctx) {
  std::array<int64_t, 4> order{0, 2, 1, 3};
  if (ctx.gnode().inputs.empty() || ctx.inputType(0).rank() != 4) return order;
  const Graph &g = ctx.graph();
  ValueId y = ctx.gnode().outputs[0];
  for (ValueId o : g.outputs)
    if (o == y) return {0, 1, 2, 3};
  const coil::Node *user = nullptr;
  int users = 0;
  for (const coil::Node &n : g.nodes())
    for (ValueId in : n.inputs)
      if (in == y) {
        ++users;
        user = &n;
      }
  if (users != 1 || user->op != OpKind::Transpose) return order;
  std::vector<int64_t> perm = user->attrs.getInts("perm");
  if (perm.size() != 4 || perm[3] != 3) return order;
  for (size_t i = 0; i < 4; ++i) order[i] = perm[i];
  return order;
}

/// The node as one coil_cpu_attention_* call, when the extern computes it (see the file
/// comment); false (with nothing built) otherwise.
Expected<bool> lowerAttentionExtern(LowerContext &ctx) {
  const Attrs &at = ctx.gnode().attrs;
  auto wanted = [&](size_t i) {
    return i < ctx.numOutputs() && ctx.gnode().outputs[i] != kNoValue;
  };
  if (ctx.hasInput(4) || ctx.hasInput(5) || ctx.hasInput(6) || wanted(3)) return false;
  if (at.getInt("left_window_size", -1) >= 0 || at.getInt("right_window_size", -1) >= 0)
    return false;
  TensorRef q0 = ctx.input(0);
  DType dt = q0.dtype;
  if (!isExternType(dt) || ctx.input(1).dtype != dt || ctx.input(2).dtype != dt) return false;
  int64_t qHeads = at.getInt("q_num_heads", 0), kvHeads = at.getInt("kv_num_heads", 0);
  COIL_TRY(TensorRef q, toHeads(ctx, q0, qHeads, "Q"));
  COIL_TRY(TensorRef k, toHeads(ctx, ctx.input(1), kvHeads, "K"));
  COIL_TRY(TensorRef v, toHeads(ctx, ctx.input(2), kvHeads, "V"));
  SymInt B = q.shape[0], H = q.shape[1], S = q.shape[2], D = q.shape[3], Hkv = k.shape[1],
         T = k.shape[2], DV = v.shape[3];
  if (!sameDim(ctx, k.shape[0], B) || !sameDim(ctx, v.shape[0], B) ||
      !sameDim(ctx, v.shape[1], Hkv) || !sameDim(ctx, v.shape[2], T) ||
      !sameDim(ctx, k.shape[3], D))
    return false;
  if (!sameDim(ctx, H, Hkv)) {
    auto hc = H.maybeConstant(), kc = Hkv.maybeConstant();
    if (!hc || !kc || *kc < 1 || *hc % *kc != 0) return false;
  }
  double scale;
  if (at.has("scale")) {
    scale = at.getFloat("scale", 1.0);
  } else {
    auto dc = D.maybeConstant();
    if (!dc) return false;
    scale = 1.0 / std::sqrt(double(*dc));
  }
  // The mask, right-aligned against [B, H, S, T]: dims of 1 broadcast, the key dim is T.
  int64_t maskKind = 0;
  std::optional<Strided> mask;
  if (ctx.hasInput(3)) {
    TensorRef m = ctx.input(3);
    if (m.rank() < 1 || m.rank() > 4) return false;
    if (m.dtype == DType::Bool)
      maskKind = 1;
    else if (m.dtype == dt)
      maskKind = 2;
    else
      return false;
    std::vector<SymInt> s4(size_t(4 - m.rank()), SymInt(1));
    s4.insert(s4.end(), m.shape.begin(), m.shape.end());
    std::vector<SymInt> full{B, H, S, T};
    for (size_t d = 0; d < 3; ++d)
      if (s4[d] != SymInt(1) && !sameDim(ctx, s4[d], full[d])) return false;
    if (!sameDim(ctx, s4[3], T)) return false;
    TensorRef m4 = ctx.reshape(m, s4);
    mask = stridedView(ctx, m4);
    if (!mask) mask = stridedView(ctx, ctx.realize(m4));
  }
  Strided sq = externOperand(ctx, q), sk = externOperand(ctx, k), sv = externOperand(ctx, v);
  // Y's layout: the order in which its [B, H, S, Dv] dims are stored (Dv last).
  std::array<int64_t, 4> order = yLayout(ctx);
  std::vector<SymInt> dims{B, H, S, DV}, yShape, yStride(4);
  for (int64_t d : order) yShape.push_back(dims[size_t(d)]);
  SymInt st = 1;
  for (size_t i = 4; i-- > 0;) {
    yStride[size_t(order[i])] = st;
    st = st * yShape[i];
  }
  std::vector<ExternArg> args{nodeArg(sq.node), nodeArg(sk.node), nodeArg(sv.node),
                              nodeArg(mask ? mask->node : sq.node), outArg(0)};
  for (const SymInt &x : {B, H, Hkv, S, T, D, DV}) args.push_back(intArg(x));
  for (const Strided *o : {&sq, &sk, &sv}) {
    args.push_back(intArg(o->offset));
    for (size_t i = 0; i < 3; ++i) args.push_back(intArg(o->strides[i]));
  }
  for (size_t i = 0; i < 3; ++i) args.push_back(intArg(yStride[i]));
  args.push_back(intArg(maskKind));
  args.push_back(intArg(mask ? mask->offset : SymInt(0)));
  for (size_t i = 0; i < 4; ++i) args.push_back(intArg(mask ? mask->strides[i] : SymInt(0)));
  args.push_back(intArg(at.getInt("is_causal", 0) != 0 ? 1 : 0));
  args.push_back(intArg(0));
  args.push_back(floatArg(scale));
  args.push_back(floatArg(at.getFloat("softcap", 0.0)));
  // A 3-D output ([B, S, H*Dv]) is the [B, S, H, Dv] buffer itself; a 4-D one a view of the
  // buffer in its order.
  if (q0.rank() == 3) yShape = ctx.outputType(0).shape;
  TensorRef y = ctx.externCall(kernels::cpuSymbol(kernels::ExternId::Attention, dt),
                               std::move(args), {{dt, yShape}})[0];
  if (q0.rank() == 3) {
    ctx.setOutput(0, y);
  } else {
    std::vector<int64_t> pos(4);
    for (size_t i = 0; i < 4; ++i) pos[size_t(order[i])] = int64_t(i);
    ctx.setOutput(0, ctx.permute(y, pos));
  }
  if (wanted(1)) ctx.setOutput(1, k);
  if (wanted(2)) ctx.setOutput(2, v);
  return true;
}

Status lowerAttention(LowerContext &ctx) {
  COIL_TRY(bool fused, lowerAttentionExtern(ctx));
  if (fused) return okStatus();
  return lowerAttentionDecomposed(ctx);
}

} // namespace

void registerLinalgAttentionLowerings(LowerRegistry &r) {
  r.add(OpKind::Attention, lowerAttention);
}

} // namespace coil::loop::linalg
