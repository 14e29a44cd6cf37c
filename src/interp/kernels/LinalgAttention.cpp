// Reference kernel of Attention (scaled dot-product attention, opset 23+).
//
// Inputs are brought to [batch, heads, seq, head_size]; the additive bias combines attn_mask
// (bool: false masks; float: added; a short last dim is padded as masked), the causal mask,
// the sliding window and nonpad_kv_seqlen. Rows whose bias is -inf everywhere give zeros.
#include "interp/kernels/LinalgKernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace coil::linalg {
namespace {

/// A [B, H, S, D] view of a 3-D [B, S, H*D] or 4-D [B, H, S, D] tensor as doubles.
struct Heads {
  int64_t b = 0, h = 0, s = 0, d = 0;
  std::vector<double> v; // [B, H, S, D]
  double at(int64_t bi, int64_t hi, int64_t si, int64_t di) const {
    return v[size_t(((bi * h + hi) * s + si) * d + di)];
  }
};

Expected<Heads> toHeads(const KernelContext &ctx, const Tensor &t, int64_t heads,
                        const char *what) {
  Heads r;
  auto v = t.toDoubles();
  if (t.rank() == 4) {
    r.b = t.dim(0), r.h = t.dim(1), r.s = t.dim(2), r.d = t.dim(3);
    r.v = v;
    return r;
  }
  if (t.rank() != 3)
    return ctx.error(std::string(what) + " must have rank 3 or 4, got rank " +
                     std::to_string(t.rank()));
  if (heads < 1 || t.dim(2) % heads != 0)
    return ctx.error(std::string(what) + " hidden size " + std::to_string(t.dim(2)) +
                     " is not divisible by the number of heads " + std::to_string(heads));
  r.b = t.dim(0), r.s = t.dim(1), r.h = heads, r.d = t.dim(2) / heads;
  r.v.resize(v.size());
  for (int64_t bi = 0; bi < r.b; ++bi)
    for (int64_t si = 0; si < r.s; ++si)
      for (int64_t hi = 0; hi < r.h; ++hi)
        for (int64_t di = 0; di < r.d; ++di)
          r.v[size_t(((bi * r.h + hi) * r.s + si) * r.d + di)] =
              v[size_t((bi * r.s + si) * t.dim(2) + hi * r.d + di)];
  return r;
}

/// Appends `cur` to `past` along the sequence dim.
Expected<Heads> concatPast(const KernelContext &ctx, size_t pastIdx, const Heads &cur) {
  if (!ctx.hasInput(pastIdx)) return cur;
  const Tensor &p = ctx.input(pastIdx);
  if (p.rank() != 4 || p.dim(0) != cur.b || p.dim(1) != cur.h || p.dim(3) != cur.d)
    return ctx.error("past cache of shape " + shapeStr(p.shape()) + " does not fit [" +
                     std::to_string(cur.b) + ", " + std::to_string(cur.h) + ", past, " +
                     std::to_string(cur.d) + "]");
  auto pv = p.toDoubles();
  Heads r = cur;
  r.s = p.dim(2) + cur.s;
  r.v.assign(size_t(r.b * r.h * r.s * r.d), 0.0);
  for (int64_t bi = 0; bi < r.b; ++bi)
    for (int64_t hi = 0; hi < r.h; ++hi)
      for (int64_t si = 0; si < r.s; ++si)
        for (int64_t di = 0; di < r.d; ++di)
          r.v[size_t(((bi * r.h + hi) * r.s + si) * r.d + di)] =
              si < p.dim(2) ? pv[size_t(((bi * r.h + hi) * p.dim(2) + si) * r.d + di)]
                            : cur.at(bi, hi, si - p.dim(2), di);
  return r;
}

Expected<std::vector<Tensor>> attentionKernel(KernelContext &ctx) {
  const Attrs &at = ctx.attrs();
  const Tensor &q0 = ctx.input(0);
  int64_t qHeads = at.getInt("q_num_heads", 0), kvHeads = at.getInt("kv_num_heads", 0);
  COIL_TRY(Heads q, toHeads(ctx, q0, qHeads, "Q"));
  COIL_TRY(Heads k0, toHeads(ctx, ctx.input(1), kvHeads, "K"));
  COIL_TRY(Heads v0, toHeads(ctx, ctx.input(2), kvHeads, "V"));
  if (k0.d != q.d || k0.b != q.b || v0.b != q.b || v0.h != k0.h || v0.s != k0.s)
    return ctx.error("Q, K and V shapes do not fit together");
  if (q.h % k0.h != 0)
    return ctx.error("the " + std::to_string(q.h) + " query heads are not a multiple of the " +
                     std::to_string(k0.h) + " key/value heads");
  COIL_TRY(Heads k, concatPast(ctx, 4, k0));
  COIL_TRY(Heads v, concatPast(ctx, 5, v0));
  if (v.s != k.s)
    return ctx.error("past_key and past_value must be given together with the same length");
  int64_t B = q.b, H = q.h, S = q.s, T = k.s, D = q.d, DV = v.d, rep = q.h / k.h;
  int64_t past = ctx.hasInput(4) ? ctx.input(4).dim(2) : 0;
  double scale = at.has("scale") ? at.getFloat("scale", 1.0) : 1.0 / std::sqrt(double(D));
  double softcap = at.getFloat("softcap", 0.0);
  bool causal = at.getInt("is_causal", 0) != 0;
  int64_t left = at.getInt("left_window_size", -1), right = at.getInt("right_window_size", -1);
  int64_t mode = at.getInt("qk_matmul_output_mode", 0);
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<int64_t> nonpad;
  if (ctx.hasInput(6)) {
    nonpad = ctx.input(6).toInts();
    if (int64_t(nonpad.size()) != B)
      return ctx.error("nonpad_kv_seqlen must have " + std::to_string(B) + " values");
  }
  // The mask, right-aligned against [B, H, S, T].
  const Tensor *mask = ctx.hasInput(3) ? &ctx.input(3) : nullptr;
  std::vector<double> mv;
  Shape ms;
  if (mask) {
    if (mask->rank() < 1 || mask->rank() > 4)
      return ctx.error("attn_mask must have rank 1 to 4, got rank " + std::to_string(mask->rank()));
    ms = mask->shape();
    ms.insert(ms.begin(), size_t(4 - mask->rank()), 1);
    Shape full{B, H, S, T};
    for (size_t i = 0; i < 3; ++i)
      if (ms[i] != 1 && ms[i] != full[i])
        return ctx.error("attn_mask of shape " + shapeStr(mask->shape()) +
                         " cannot be broadcast to " + shapeStr(full));
    if (ms[3] > T)
      return ctx.error("attn_mask last dim " + std::to_string(ms[3]) + " exceeds " +
                       std::to_string(T) + " keys");
    mv = mask->toDoubles();
  }
  auto bias = [&](int64_t b, int64_t h, int64_t i, int64_t j) {
    double r = 0;
    if (mask) {
      if (j >= ms[3]) {
        r = -inf;
      } else {
        int64_t idx =
            (((ms[0] == 1 ? 0 : b) * ms[1] + (ms[1] == 1 ? 0 : h)) * ms[2] + (ms[2] == 1 ? 0 : i)) *
                ms[3] +
            j;
        double m = mv[size_t(idx)];
        r = mask->dtype() == DType::Bool ? (m != 0 ? 0.0 : -inf) : m;
      }
    }
    int64_t offset = !nonpad.empty() && !ctx.hasInput(4) ? nonpad[size_t(b)] - S : past;
    if (causal && j > i + offset) r = -inf;
    int64_t diff = i + offset - j;
    if ((left >= 0 && diff > left) || (right >= 0 && -diff > right)) r = -inf;
    if (!nonpad.empty() && j >= nonpad[size_t(b)]) r = -inf;
    return r;
  };
  std::vector<double> y(size_t(B * H * S * DV), 0.0), qk(size_t(B * H * S * T));
  std::vector<double> row(static_cast<size_t>(T)), bs(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < S; ++i) {
        double maxBias = -inf, mx = -inf;
        for (int64_t j = 0; j < T; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += q.at(b, h, i, d) * k.at(b, h / rep, j, d);
          s *= scale;
          if (softcap > 0) s = softcap * std::tanh(s / softcap);
          bs[size_t(j)] = bias(b, h, i, j);
          maxBias = std::max(maxBias, bs[size_t(j)]);
          double *out = &qk[size_t(((b * H + h) * S + i) * T + j)];
          *out = s;
          row[size_t(j)] = s + bs[size_t(j)];
          if (mode == 2) *out = row[size_t(j)];
          mx = std::max(mx, row[size_t(j)]);
        }
        bool allMasked = maxBias == -inf;
        double sum = 0;
        for (int64_t j = 0; j < T; ++j) {
          row[size_t(j)] = std::exp(row[size_t(j)] - (mx == -inf ? 0.0 : mx));
          sum += row[size_t(j)];
        }
        for (int64_t j = 0; j < T; ++j) {
          double p = allMasked || sum == 0 ? 0.0 : row[size_t(j)] / sum;
          if (mode == 3) qk[size_t(((b * H + h) * S + i) * T + j)] = p;
          for (int64_t d = 0; d < DV; ++d)
            y[size_t(((b * H + h) * S + i) * DV + d)] += p * v.at(b, h / rep, j, d);
        }
      }
  DType dt = q0.dtype();
  std::vector<Tensor> res;
  if (q0.rank() == 3) {
    std::vector<double> y3(y.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < S; ++i)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t d = 0; d < DV; ++d)
            y3[size_t(((b * S + i) * H + h) * DV + d)] = y[size_t(((b * H + h) * S + i) * DV + d)];
    res.push_back(Tensor::fromDoubles(dt, {B, S, H * DV}, y3));
  } else {
    res.push_back(Tensor::fromDoubles(dt, {B, H, S, DV}, y));
  }
  res.push_back(Tensor::fromDoubles(ctx.input(1).dtype(), {k.b, k.h, k.s, k.d}, k.v));
  res.push_back(Tensor::fromDoubles(ctx.input(2).dtype(), {v.b, v.h, v.s, v.d}, v.v));
  res.push_back(Tensor::fromDoubles(dt, {B, H, S, T}, qk));
  res.resize(std::min(res.size(), ctx.numOutputs()));
  return res;
}

} // namespace

void registerLinalgAttentionKernels(KernelRegistry &r) {
  r.add(OpKind::Attention, attentionKernel);
}

} // namespace coil::linalg
