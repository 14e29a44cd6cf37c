// CPU kernel of the recurrent ops (RNN, GRU, LSTM): the recurrence over the time steps, after
// the input projections (X W^T of every step, one GEMM computed by the caller). Semantics as the
// reference interpreter (interp/kernels/LinalgRnn.cpp): ONNX gate orders (GRU z r h, LSTM
// i o f c), sequence_lens honoured per batch entry, the reverse direction reading time
// len - 1 - step. Per step, one GEMM of the states of all batch entries by R, then the gate
// arithmetic fused per row in simd loops (CpuRnnBody.inc, built for AVX2 and portable); no
// allocation inside the time loop. Directions and slices of the batch are independent, so a
// call with enough work runs them on OpenMP threads in one parallel region (no barrier per
// step); a small call never enters an OpenMP region.
#include "kernels/cpu/CpuRnn.h"

#include "kernels/cpu/CpuFeatures.h"
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/CpuKernelsImpl.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <omp.h>
#include <type_traits>
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

/// The arguments of one call, as the body (CpuRnnBody.inc) reads them.
template <typename T> struct Job {
  const T *xw, *r, *b, *h0, *c0, *p;
  const int64_t *lens;
  const Activation *acts; // [dirs * 3]
  T *y, *yh, *yc;
  int64_t cell, seq, batch, hid, gh, dirs;
  int64_t qld; // columns of the per-step product: gates * hidden (GRU without lbr: 2 * hidden)
  bool reverse, linearBeforeReset, inputForget, hasClip;
  T clip;
  bool smallProduct; // the per-step product by coil's register tiles, not BLAS
};

namespace portable32 {
using Real = float;
#include "kernels/cpu/CpuRnnBody.inc"
} // namespace portable32

namespace portable64 {
using Real = double;
#include "kernels/cpu/CpuRnnBody.inc"
} // namespace portable64

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#ifdef __clang__ // clang ignores GCC's target pragma
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#endif
namespace avx2 {
using Real = float;
#include "kernels/cpu/CpuRnnBody.inc"
} // namespace avx2
#ifdef __clang__
#pragma clang attribute pop
#endif
#pragma GCC pop_options

std::atomic<int> isaLimit{int(RecurrentIsa::Avx2)};
std::atomic<int64_t> parallelWork{kRecurrentParallelWork};
std::atomic<int64_t> smallProductWork{kRecurrentSmallProduct};

template <typename T> int64_t rowsWorkspace(const Job<T> &j, int64_t rows) {
  if constexpr (std::is_same_v<T, double>)
    return portable64::rowsWorkspace(j, rows);
  else
    return portable32::rowsWorkspace(j, rows);
}

template <typename T>
void runRows(const Job<T> &j, int64_t d, int64_t b0, int64_t b1, T *ws, bool wide) {
  if constexpr (std::is_same_v<T, double>) {
    portable64::runRows(j, d, b0, b1, ws);
  } else {
    if (wide)
      avx2::runRows(j, d, b0, b1, ws);
    else
      portable32::runRows(j, d, b0, b1, ws);
  }
}

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
  int64_t gh = 0, all = 0, states = 0, work = 0, perRow = 0;
  if (!mulSize(gates, hid, &gh) || !mulSizes({dirs, seq, batch, gh}, &all) ||
      !mulSizes({seq, dirs, batch, hid}, &all) || !mulSizes({dirs, gh, hid}, &all) ||
      !mulSizes({dirs, batch, hid}, &states) || !mulSizes({batch, 16, gh + 1}, &perRow))
    return fail("%s: sizes seq %lld, batch %lld, hidden %lld are negative or overflow", op, ll(seq),
                ll(batch), ll(hid));
  if (hasClip && !(clip >= 0)) return fail("%s: clip %g must be a non-negative number", op, clip);
  Activation f[6];
  for (int64_t i = 0; i < dirs * 3; ++i) {
    double code = acts[i * 3];
    if (!(code >= 0 && code <= COIL_CPU_RNN_ACT_SOFTPLUS) || code != std::floor(code))
      return fail("%s: activation code %g is not a known activation", op, code);
    f[i] = {int64_t(code), acts[i * 3 + 1], acts[i * 3 + 2]};
  }
  bool partial = false;
  for (int64_t b = 0; b < batch; ++b) {
    if (lens[b] < 0 || lens[b] > seq)
      return fail("%s: sequence length %lld of batch entry %lld is out of range [0, %lld]", op,
                  ll(lens[b]), ll(b), ll(seq));
    partial = partial || lens[b] < seq;
  }
  // Y is 0 at the steps past an entry's length; Y_c is 0 for RNN and GRU.
  if (partial) std::fill(y, y + seq * dirs * batch * hid, T(0));
  if (cell != COIL_CPU_RNN_CELL_LSTM) std::fill(yc, yc + states, T(0));
  if (batch == 0) return 0;
  Job<T> j{xw,
           r,
           bias,
           h0,
           c0,
           peep,
           lens,
           f,
           y,
           yh,
           yc,
           cell,
           seq,
           batch,
           hid,
           gh,
           dirs,
           cell == COIL_CPU_RNN_CELL_GRU && !linearBeforeReset ? 2 * hid : gh,
           dirs == 1 && reverseOnly,
           linearBeforeReset,
           inputForget,
           hasClip,
           T(clip),
           false};
  const bool wide =
      std::is_same_v<T, float> && isaLimit.load() >= int(RecurrentIsa::Avx2) && hasAvx2();
  // The multiply-adds of the recurrent products (saturating).
  if (!mulSizes({dirs, seq, batch, gh, hid}, &work)) work = INT64_MAX;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  // Independent tasks: each direction, each split into `chunks` slices of the batch.
  const bool sliced = threads > 1 && work >= parallelWork.load();
  const bool parallel = sliced || (threads > 1 && dirs == 2 &&
                                   work >= std::min(kRecurrentDirectionWork, parallelWork.load()));
  int64_t chunks = 1;
  if (sliced) chunks = std::min(batch, std::max<int64_t>(1, (threads + dirs - 1) / dirs));
  const int64_t tasks = dirs * chunks;
  const int team = parallel ? int(std::min<int64_t>(tasks, threads)) : 1;
  const int64_t rows = (batch + chunks - 1) / chunks;
  int64_t stepWork = 0, rSize = 0;
  j.smallProduct = mulSizes({rows, j.qld, hid}, &stepWork) && mulSize(hid, gh, &rSize) &&
                   stepWork <= smallProductWork.load() && rSize <= kSmallGemm;
  try {
    const int64_t each = rowsWorkspace(j, rows);
    std::vector<T> ws(size_t(each * team));
    if (team == 1) {
      for (int64_t d = 0; d < dirs; ++d) runRows(j, d, 0, batch, ws.data(), wide);
    } else {
#pragma omp parallel for schedule(static) num_threads(team)
      for (int64_t task = 0; task < tasks; ++task) {
        int64_t d = task / chunks, ci = task % chunks;
        runRows(j, d, batch * ci / chunks, batch * (ci + 1) / chunks,
                ws.data() + omp_get_thread_num() * each, wide);
      }
    }
  } catch (const std::bad_alloc &) {
    return fail("%s: out of memory for the states of batch %lld, hidden %lld", op, ll(batch),
                ll(hid));
  }
  return 0;
}

} // namespace

void setRecurrentIsaLimit(RecurrentIsa limit) {
  isaLimit.store(int(limit));
}
RecurrentIsa recurrentIsa() {
  return isaLimit.load() >= int(RecurrentIsa::Avx2) && hasAvx2() ? RecurrentIsa::Avx2
                                                                 : RecurrentIsa::Portable;
}
int64_t setRecurrentParallelWork(int64_t work) {
  return parallelWork.exchange(work);
}
int64_t setRecurrentSmallProduct(int64_t work) {
  return smallProductWork.exchange(work);
}

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
