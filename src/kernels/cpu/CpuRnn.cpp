// CPU kernel of the recurrent ops (RNN, GRU, LSTM): the recurrence over the time steps, after
// the input projections (X W^T, computed by the caller for every step at once). Semantics as the
// reference interpreter (interp/kernels/LinalgRnn.cpp): ONNX gate orders (GRU z r h, LSTM
// i o f c), sequence_lens honoured per batch entry, the reverse direction reading time
// len - 1 - step.
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/CpuKernelsImpl.h"

#include <algorithm>
#include <cmath>
#include <new>
#include <vector>

namespace coil::cpu {
namespace {

const char *cellName(int64_t cell) {
  return cell == COIL_CPU_RNN_CELL_RNN ? "rnn" : cell == COIL_CPU_RNN_CELL_GRU ? "gru" : "lstm";
}

/// An activation function of the recurrent ops: its code (COIL_CPU_RNN_ACT_*) and parameters.
struct Activation {
  int64_t code = 0;
  double alpha = 0, beta = 0;
  double operator()(double x) const {
    switch (code) {
    case COIL_CPU_RNN_ACT_TANH:
      return std::tanh(x);
    case COIL_CPU_RNN_ACT_SIGMOID:
      return 1 / (1 + std::exp(-x));
    case COIL_CPU_RNN_ACT_RELU:
      return std::max(x, 0.0);
    case COIL_CPU_RNN_ACT_AFFINE:
      return alpha * x + beta;
    case COIL_CPU_RNN_ACT_LEAKY_RELU:
      return x >= 0 ? x : alpha * x;
    case COIL_CPU_RNN_ACT_THRESHOLDED_RELU:
      return x > alpha ? x : 0;
    case COIL_CPU_RNN_ACT_SCALED_TANH:
      return alpha * std::tanh(beta * x);
    case COIL_CPU_RNN_ACT_HARD_SIGMOID:
      return std::clamp(alpha * x + beta, 0.0, 1.0);
    case COIL_CPU_RNN_ACT_ELU:
      return x >= 0 ? x : alpha * (std::exp(x) - 1);
    case COIL_CPU_RNN_ACT_SOFTSIGN:
      return x / (1 + std::fabs(x));
    default: // COIL_CPU_RNN_ACT_SOFTPLUS
      return std::log1p(std::exp(x));
    }
  }
};

template <typename T>
int32_t recurrent(const T *xw, const T *r, const T *bias, const int64_t *lens, const T *h0,
                  const T *c0, const T *peep, const double *acts, T *y, T *yh, T *yc, int64_t cell,
                  int64_t seq, int64_t batch, int64_t hid, int64_t dirs, bool reverseOnly,
                  bool linearBeforeReset, bool inputForget, bool hasClip, double clip) {
  if (cell != COIL_CPU_RNN_CELL_RNN && cell != COIL_CPU_RNN_CELL_GRU &&
      cell != COIL_CPU_RNN_CELL_LSTM)
    return fail("recurrent: cell %lld is not one of 0 (RNN), 1 (GRU), 2 (LSTM)", ll(cell));
  const char *op = cellName(cell);
  if (dirs != 1 && dirs != 2) return fail("%s: %lld directions (1 or 2)", op, ll(dirs));
  int64_t gates = cell == COIL_CPU_RNN_CELL_RNN ? 1 : cell == COIL_CPU_RNN_CELL_GRU ? 3 : 4;
  int64_t gh = 0, all = 0, states = 0;
  if (!mulSize(gates, hid, &gh) || !mulSizes({dirs, seq, batch, gh}, &all) ||
      !mulSizes({seq, dirs, batch, hid}, &all) || !mulSizes({dirs, gh, hid}, &all) ||
      !mulSizes({dirs, batch, hid}, &states))
    return fail("%s: sizes seq %lld, batch %lld, hidden %lld are negative or overflow", op, ll(seq),
                ll(batch), ll(hid));
  if (hasClip && !(clip >= 0)) return fail("%s: clip %g must be a non-negative number", op, clip);
  for (int64_t i = 0; i < dirs * 3; ++i) {
    double code = acts[i * 3];
    if (!(code >= 0 && code <= COIL_CPU_RNN_ACT_SOFTPLUS) || code != std::floor(code))
      return fail("%s: activation code %g is not a known activation", op, code);
  }
  for (int64_t b = 0; b < batch; ++b)
    if (lens[b] < 0 || lens[b] > seq)
      return fail("%s: sequence length %lld of batch entry %lld is out of range [0, %lld]", op,
                  ll(lens[b]), ll(b), ll(seq));
  std::fill(y, y + seq * dirs * batch * hid, T(0));
  std::fill(yc, yc + states, T(0));
  auto clipped = [&](double v) { return hasClip ? std::clamp(v, -clip, clip) : v; };
  int64_t maxLen = 0;
  for (int64_t b = 0; b < batch; ++b) maxLen = std::max(maxLen, lens[b]);
  try {
    std::vector<T> h(size_t(batch * hid)), c(size_t(batch * hid)), hr(size_t(batch * gh));
    std::vector<T> nh(size_t(batch * hid));
    std::vector<double> rh(cell == COIL_CPU_RNN_CELL_GRU && !linearBeforeReset ? size_t(batch * hid)
                                                                               : 0);
    for (int64_t d = 0; d < dirs; ++d) {
      bool reverse = dirs == 2 ? d == 1 : reverseOnly;
      const T *R = r + d * gh * hid, *Wb = bias + d * 2 * gh, *Rb = Wb + gh;
      const T *P = peep + d * 3 * hid;
      Activation f[3];
      for (int64_t i = 0; i < 3; ++i) {
        const double *a = acts + (d * 3 + i) * 3;
        f[i] = {int64_t(a[0]), a[1], a[2]};
      }
      std::copy(h0 + d * batch * hid, h0 + (d + 1) * batch * hid, h.begin());
      if (cell == COIL_CPU_RNN_CELL_LSTM)
        std::copy(c0 + d * batch * hid, c0 + (d + 1) * batch * hid, c.begin());
      for (int64_t step = 0; step < maxLen; ++step) {
        // h R^T for every batch entry: [batch, gates * hidden].
        if (batch > 0 && gh > 0) {
          if (hid > 0)
            gemmOne<T>(h.data(), R, hr.data(), batch, gh, hid, false, true, T(1), T(0));
          else
            std::fill(hr.begin(), hr.end(), T(0));
        }
#pragma omp parallel for schedule(static) if (batch > 1 && batch * gh * hid > 65536)
        for (int64_t b = 0; b < batch; ++b) {
          if (step >= lens[b]) continue;
          int64_t t = reverse ? lens[b] - 1 - step : step;
          const T *x = xw + ((d * seq + t) * batch + b) * gh, *q = hr.data() + b * gh;
          const T *hb = h.data() + b * hid;
          T *cb = c.data() + b * hid, *nb = nh.data() + b * hid;
          double *rhb = rh.empty() ? nullptr : rh.data() + b * hid;
          // Gate g's input and recurrent parts at unit k, biases included.
          auto xg = [&](int64_t g, int64_t k) { return double(x[g * hid + k]) + Wb[g * hid + k]; };
          auto hg = [&](int64_t g, int64_t k) { return double(q[g * hid + k]) + Rb[g * hid + k]; };
          if (rhb) // GRU without linear_before_reset: the reset gate times the state, per unit
            for (int64_t j = 0; j < hid; ++j)
              rhb[j] = f[0](clipped(xg(1, j) + hg(1, j))) * double(hb[j]);
          for (int64_t k = 0; k < hid; ++k) {
            double v;
            if (cell == COIL_CPU_RNN_CELL_RNN) {
              v = f[0](clipped(xg(0, k) + hg(0, k)));
            } else if (cell == COIL_CPU_RNN_CELL_GRU) {
              double z = f[0](clipped(xg(0, k) + hg(0, k)));
              double pre;
              if (linearBeforeReset) {
                double rg = f[0](clipped(xg(1, k) + hg(1, k)));
                pre = xg(2, k) + rg * hg(2, k);
              } else { // (r * h) R_h^T + Rb_h
                double s = Rb[2 * hid + k];
                const T *row = R + (2 * hid + k) * hid;
                for (int64_t j = 0; j < hid; ++j) s += rhb[j] * double(row[j]);
                pre = xg(2, k) + s;
              }
              v = (1 - z) * f[1](clipped(pre)) + z * double(hb[k]);
            } else {
              double cv = cb[k];
              double ig = f[0](clipped(xg(0, k) + hg(0, k) + double(P[k]) * cv));
              double fg = inputForget
                              ? 1 - ig
                              : f[0](clipped(xg(2, k) + hg(2, k) + double(P[2 * hid + k]) * cv));
              double cg = f[1](clipped(xg(3, k) + hg(3, k)));
              double cn = fg * cv + ig * cg;
              double og = f[0](clipped(xg(1, k) + hg(1, k) + double(P[hid + k]) * cn));
              v = og * f[2](cn);
              cb[k] = T(cn);
            }
            nb[k] = T(v);
          }
          std::copy(nb, nb + hid, h.data() + b * hid);
          std::copy(nb, nb + hid, y + ((t * dirs + d) * batch + b) * hid);
        }
      }
      std::copy(h.begin(), h.end(), yh + d * batch * hid);
      if (cell == COIL_CPU_RNN_CELL_LSTM) std::copy(c.begin(), c.end(), yc + d * batch * hid);
    }
  } catch (const std::bad_alloc &) {
    return fail("%s: out of memory for the states of batch %lld, hidden %lld", op, ll(batch),
                ll(hid));
  }
  return 0;
}

} // namespace
} // namespace coil::cpu

using namespace coil::cpu;

extern "C" {

#define COIL_CPU_DEFINE_RECURRENT(S, T)                                                            \
  int32_t coil_cpu_recurrent_##S(                                                                  \
      const void *xw, const void *r, const void *b, const void *lens, const void *h0,              \
      const void *c0, const void *p, const void *acts, void *y, void *yh, void *yc, int64_t cell,  \
      int64_t seq, int64_t batch, int64_t hidden, int64_t dirs, int64_t reverse,                   \
      int64_t linear_before_reset, int64_t input_forget, int64_t has_clip, double clip) {          \
    return recurrent<T>(                                                                           \
        static_cast<const T *>(xw), static_cast<const T *>(r), static_cast<const T *>(b),          \
        static_cast<const int64_t *>(lens), static_cast<const T *>(h0),                            \
        static_cast<const T *>(c0), static_cast<const T *>(p), static_cast<const double *>(acts),  \
        static_cast<T *>(y), static_cast<T *>(yh), static_cast<T *>(yc), cell, seq, batch, hidden, \
        dirs, reverse != 0, linear_before_reset != 0, input_forget != 0, has_clip != 0, clip);     \
  }
COIL_CPU_DEFINE_RECURRENT(f32, float)
COIL_CPU_DEFINE_RECURRENT(f64, double)
#undef COIL_CPU_DEFINE_RECURRENT

} // extern "C"
