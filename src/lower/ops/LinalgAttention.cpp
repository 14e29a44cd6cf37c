// Lowering of Attention (scaled dot-product attention, opset 23+), decomposed as the
// interpreter computes it (interp/kernels/LinalgAttention.cpp):
//   Q, K, V as [B, H, S, D] views (3-D inputs are split into heads by a view), the past cache
//   prepended to K and V (a Pointwise), grouped-query heads read through an index map;
//   scores = Q K^T (the GEMM extern for f32/f64, a Reduction otherwise) * scale, softcap;
//   bias = attn_mask (bool: false masks; float: added; a short last dim masks the rest) +
//          causal mask + sliding window + nonpad_kv_seqlen, as -inf where masked;
//   softmax over the keys as Reductions (max, sum of exp) and a Pointwise, rows masked
//   everywhere giving zeros; Y = P V (GEMM or Reduction), back to [B, S, H*Dv] for 3-D Q.
// f32 computes in f32, f64 in f64, f16/bf16 in f32 (the interpreter uses double throughout).
#include "lower/ops/LinalgLower.h"

#include <cmath>
#include <limits>

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

Status lowerAttention(LowerContext &ctx) {
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

} // namespace

void registerLinalgAttentionLowerings(LowerRegistry &r) {
  r.add(OpKind::Attention, lowerAttention);
}

} // namespace coil::loop::linalg
