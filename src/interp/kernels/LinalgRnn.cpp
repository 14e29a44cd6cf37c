// Reference kernels of the recurrent ops (RNN, GRU, LSTM) and RotaryEmbedding.
//
// The recurrent ops run one direction at a time over the time steps of each batch entry
// (honouring sequence_lens), in double, with ONNX's gate orders: GRU z r h, LSTM i o f c.
#include "interp/kernels/LinalgKernels.h"

#include <algorithm>
#include <cmath>

namespace coil::linalg {
namespace {

using Cell = RnnCell;

/// An activation function of ir/OpAttrs.h's list, applied.
struct Activation : RnnActivation {
  double operator()(double x) const {
    if (name == "Tanh") return std::tanh(x);
    if (name == "Sigmoid") return 1 / (1 + std::exp(-x));
    if (name == "Relu") return std::max(x, 0.0);
    if (name == "Affine") return alpha * x + beta;
    if (name == "LeakyRelu") return x >= 0 ? x : alpha * x;
    if (name == "ThresholdedRelu") return x > alpha ? x : 0;
    if (name == "ScaledTanh") return alpha * std::tanh(beta * x);
    if (name == "HardSigmoid") return std::clamp(alpha * x + beta, 0.0, 1.0);
    if (name == "Elu") return x >= 0 ? x : alpha * (std::exp(x) - 1);
    if (name == "Softsign") return x / (1 + std::fabs(x));
    return std::log1p(std::exp(x)); // Softplus
  }
};

Expected<std::vector<Tensor>> recurrentKernel(KernelContext &ctx, Cell cell) {
  const Tensor &x = ctx.input(0), &w = ctx.input(1), &r = ctx.input(2);
  COIL_TRY(RnnAttrs ra, decodeRnn(ctx.node));
  int64_t layout = ra.layout, dirs = ra.dirs, gates = ra.gates;
  const std::string &dir = ra.direction;
  if (x.rank() != 3 || w.rank() != 3 || r.rank() != 3)
    return ctx.error("X, W and R must have rank 3");
  int64_t seq = layout ? x.dim(1) : x.dim(0), batch = layout ? x.dim(0) : x.dim(1);
  int64_t in = x.dim(2), hid = ra.hiddenSize.value_or(r.dim(2));
  if (w.dim(0) != dirs || w.dim(1) != gates * hid || w.dim(2) != in || r.dim(0) != dirs ||
      r.dim(1) != gates * hid || r.dim(2) != hid)
    return ctx.error("W " + shapeStr(w.shape()) + " and R " + shapeStr(r.shape()) +
                     " do not match hidden_size " + std::to_string(hid) + " and input size " +
                     std::to_string(in));
  std::vector<Activation> acts;
  for (const RnnActivation &f : ra.activations) acts.push_back(Activation{f});
  std::optional<double> clip = ra.clip;
  bool linearBeforeReset = ra.linearBeforeReset, inputForget = ra.inputForget;
  auto xv = x.toDoubles(), wv = w.toDoubles(), rv = r.toDoubles();
  std::vector<double> bv(size_t(dirs * 2 * gates * hid), 0.0), pv(size_t(dirs * 3 * hid), 0.0);
  std::vector<double> h0(size_t(dirs * batch * hid), 0.0), c0 = h0;
  auto readOpt = [&](size_t i, std::vector<double> &dst, const char *what) -> Status {
    if (!ctx.hasInput(i)) return okStatus();
    auto v = ctx.input(i).toDoubles();
    if (v.size() != dst.size())
      return ctx.error(std::string(what) + " must have " + std::to_string(dst.size()) +
                       " values, got " + std::to_string(v.size()));
    dst = v;
    return okStatus();
  };
  COIL_TRY_STATUS(readOpt(3, bv, "B"));
  COIL_TRY_STATUS(readOpt(5, h0, "initial_h"));
  if (cell == Cell::Lstm) {
    COIL_TRY_STATUS(readOpt(6, c0, "initial_c"));
    COIL_TRY_STATUS(readOpt(7, pv, "P"));
  }
  if (layout) { // initial states are [batch, dirs, hidden]: bring them to [dirs, batch, hidden]
    auto swap = [&](std::vector<double> &v) {
      std::vector<double> t(v.size());
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t d = 0; d < dirs; ++d)
          for (int64_t k = 0; k < hid; ++k)
            t[size_t((d * batch + b) * hid + k)] = v[size_t((b * dirs + d) * hid + k)];
      v = t;
    };
    swap(h0);
    swap(c0);
  }
  std::vector<int64_t> lens(size_t(batch), seq);
  if (ctx.hasInput(4)) {
    lens = ctx.input(4).toInts();
    if (int64_t(lens.size()) != batch)
      return ctx.error("sequence_lens must have " + std::to_string(batch) + " values");
    for (int64_t l : lens)
      if (l < 0 || l > seq)
        return ctx.error("sequence length " + std::to_string(l) + " is out of range [0, " +
                         std::to_string(seq) + "]");
  }
  auto xAt = [&](int64_t t, int64_t b, int64_t k) {
    return xv[size_t(layout ? (b * seq + t) * in + k : (t * batch + b) * in + k)];
  };
  // Outputs in [seq, dirs, batch, hidden] and [dirs, batch, hidden]; transposed at the end.
  std::vector<double> y(size_t(seq * dirs * batch * hid), 0.0), yh(h0.size()), yc(c0.size());
  auto clipped = [&](double v) { return clip ? std::clamp(v, -*clip, *clip) : v; };
  for (int64_t d = 0; d < dirs; ++d) {
    bool reverse = dir == "reverse" || d == 1;
    const double *W = wv.data() + d * gates * hid * in, *R = rv.data() + d * gates * hid * hid;
    const double *Wb = bv.data() + d * 2 * gates * hid, *Rb = Wb + gates * hid;
    const double *P = pv.data() + d * 3 * hid;
    const Activation *f = &acts[size_t(d) * acts.size() / size_t(dirs)];
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<double> h(h0.begin() + (d * batch + b) * hid,
                            h0.begin() + (d * batch + b + 1) * hid);
      std::vector<double> c(c0.begin() + (d * batch + b) * hid,
                            c0.begin() + (d * batch + b + 1) * hid);
      std::vector<double> xw(size_t(gates * hid)), hr(size_t(gates * hid));
      std::vector<double> nh(static_cast<size_t>(hid));
      for (int64_t step = 0; step < lens[size_t(b)]; ++step) {
        int64_t t = reverse ? lens[size_t(b)] - 1 - step : step;
        for (int64_t g = 0; g < gates * hid; ++g) {
          double s = Wb[g], q = Rb[g];
          for (int64_t k = 0; k < in; ++k) s += xAt(t, b, k) * W[g * in + k];
          for (int64_t k = 0; k < hid; ++k) q += h[size_t(k)] * R[g * hid + k];
          xw[size_t(g)] = s;
          hr[size_t(g)] = q;
        }
        for (int64_t k = 0; k < hid; ++k) {
          size_t K = size_t(k), H = size_t(hid);
          if (cell == Cell::Rnn) {
            nh[K] = f[0](clipped(xw[K] + hr[K]));
          } else if (cell == Cell::Gru) {
            double z = f[0](clipped(xw[K] + hr[K]));
            double rg = f[0](clipped(xw[H + K] + hr[H + K]));
            double pre;
            if (linearBeforeReset) {
              pre = xw[2 * H + K] + rg * hr[2 * H + K];
            } else { // (r * h) R_h^T + Rb_h, recomputed with the reset hidden state
              double q = Rb[2 * hid + k];
              for (int64_t j = 0; j < hid; ++j) {
                double rj = f[0](clipped(xw[H + size_t(j)] + hr[H + size_t(j)]));
                q += rj * h[size_t(j)] * R[(2 * hid + k) * hid + j];
              }
              pre = xw[2 * H + K] + q;
            }
            double hh = f[1](clipped(pre));
            nh[K] = (1 - z) * hh + z * h[K];
          } else {
            double ig = f[0](clipped(xw[K] + hr[K] + P[k] * c[K]));
            double fg = inputForget
                            ? 1 - ig
                            : f[0](clipped(xw[2 * H + K] + hr[2 * H + K] + P[2 * hid + k] * c[K]));
            double cg = f[1](clipped(xw[3 * H + K] + hr[3 * H + K]));
            double cn = fg * c[K] + ig * cg;
            double og = f[0](clipped(xw[H + K] + hr[H + K] + P[hid + k] * cn));
            nh[K] = og * f[2](cn);
            c[K] = cn;
          }
        }
        h = nh;
        for (int64_t k = 0; k < hid; ++k)
          y[size_t(((t * dirs + d) * batch + b) * hid + k)] = h[size_t(k)];
      }
      std::copy(h.begin(), h.end(), yh.begin() + (d * batch + b) * hid);
      std::copy(c.begin(), c.end(), yc.begin() + (d * batch + b) * hid);
    }
  }
  DType dt = x.dtype();
  std::vector<Tensor> res;
  if (!layout) {
    res.push_back(Tensor::fromDoubles(dt, {seq, dirs, batch, hid}, y));
    res.push_back(Tensor::fromDoubles(dt, {dirs, batch, hid}, yh));
    if (cell == Cell::Lstm) res.push_back(Tensor::fromDoubles(dt, {dirs, batch, hid}, yc));
  } else {
    std::vector<double> y1(y.size()), yh1(yh.size()), yc1(yc.size());
    for (int64_t t = 0; t < seq; ++t)
      for (int64_t d = 0; d < dirs; ++d)
        for (int64_t b = 0; b < batch; ++b)
          for (int64_t k = 0; k < hid; ++k)
            y1[size_t(((b * seq + t) * dirs + d) * hid + k)] =
                y[size_t(((t * dirs + d) * batch + b) * hid + k)];
    for (int64_t d = 0; d < dirs; ++d)
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t k = 0; k < hid; ++k) {
          yh1[size_t((b * dirs + d) * hid + k)] = yh[size_t((d * batch + b) * hid + k)];
          yc1[size_t((b * dirs + d) * hid + k)] = yc[size_t((d * batch + b) * hid + k)];
        }
    res.push_back(Tensor::fromDoubles(dt, {batch, seq, dirs, hid}, y1));
    res.push_back(Tensor::fromDoubles(dt, {batch, dirs, hid}, yh1));
    if (cell == Cell::Lstm) res.push_back(Tensor::fromDoubles(dt, {batch, dirs, hid}, yc1));
  }
  res.resize(std::min(res.size(), ctx.numOutputs()));
  return res;
}

Expected<std::vector<Tensor>> rnnKernel(KernelContext &ctx) {
  return recurrentKernel(ctx, Cell::Rnn);
}
Expected<std::vector<Tensor>> gruKernel(KernelContext &ctx) {
  return recurrentKernel(ctx, Cell::Gru);
}
Expected<std::vector<Tensor>> lstmKernel(KernelContext &ctx) {
  return recurrentKernel(ctx, Cell::Lstm);
}

Expected<std::vector<Tensor>> rotaryEmbeddingKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0), &cosC = ctx.input(1), &sinC = ctx.input(2);
  const Attrs &at = ctx.attrs();
  bool interleaved = at.getInt("interleaved", 0) != 0;
  int64_t batch, seq, heads, headSize;
  if (x.rank() == 4) {
    batch = x.dim(0), heads = x.dim(1), seq = x.dim(2), headSize = x.dim(3);
  } else if (x.rank() == 3) {
    batch = x.dim(0), seq = x.dim(1);
    heads = at.getInt("num_heads", 0);
    if (heads < 1 || x.dim(2) % heads != 0)
      return ctx.error("num_heads must divide the hidden size " + std::to_string(x.dim(2)));
    headSize = x.dim(2) / heads;
  } else {
    return ctx.error("input 0 must have rank 3 or 4, got rank " + std::to_string(x.rank()));
  }
  int64_t rd = at.getInt("rotary_embedding_dim", 0);
  if (rd == 0) rd = headSize;
  if (rd > headSize || rd % 2 != 0)
    return ctx.error("rotary_embedding_dim " + std::to_string(rd) +
                     " must be even and at most the head size " + std::to_string(headSize));
  int64_t half = rd / 2;
  if (cosC.rank() < 1 || sinC.rank() < 1)
    return ctx.error("the cos and sin caches must have rank >= 1");
  if (cosC.dim(cosC.rank() - 1) != half || sinC.dim(sinC.rank() - 1) != half)
    return ctx.error("the last dim of the cos and sin caches must be " + std::to_string(half));
  std::vector<int64_t> pos;
  if (ctx.hasInput(3)) {
    pos = ctx.input(3).toInts();
    if (int64_t(pos.size()) != batch * seq)
      return ctx.error("position_ids must have " + std::to_string(batch * seq) + " values");
    for (int64_t p : pos)
      if (p < 0 || p >= cosC.dim(0) || p >= sinC.dim(0))
        return ctx.error("position id " + std::to_string(p) + " is out of range of the caches");
  } else if (cosC.numel() != batch * seq * half || sinC.numel() != batch * seq * half) {
    return ctx.error("without position_ids the caches must have shape [batch, seq, " +
                     std::to_string(half) + "]");
  }
  auto xv = x.toDoubles(), cv = cosC.toDoubles(), sv = sinC.toDoubles();
  std::vector<double> out = xv;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s) {
      int64_t row = pos.empty() ? b * seq + s : pos[size_t(b * seq + s)];
      for (int64_t h = 0; h < heads; ++h) {
        int64_t base = x.rank() == 4 ? ((b * heads + h) * seq + s) * headSize
                                     : (b * seq + s) * heads * headSize + h * headSize;
        for (int64_t i = 0; i < half; ++i) {
          int64_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half;
          double c = cv[size_t(row * half + i)], sn = sv[size_t(row * half + i)];
          double x1 = xv[size_t(base + i1)], x2 = xv[size_t(base + i2)];
          out[size_t(base + i1)] = c * x1 - sn * x2;
          out[size_t(base + i2)] = sn * x1 + c * x2;
        }
      }
    }
  return std::vector<Tensor>{Tensor::fromDoubles(x.dtype(), x.shape(), out)};
}

} // namespace

void registerLinalgRnnKernels(KernelRegistry &r) {
  r.add(OpKind::RNN, rnnKernel);
  r.add(OpKind::GRU, gruKernel);
  r.add(OpKind::LSTM, lstmKernel);
  r.add(OpKind::RotaryEmbedding, rotaryEmbeddingKernel);
}

} // namespace coil::linalg
