// Reference kernels of the Reduction family's normalizations and losses: LayerNormalization,
// RMSNormalization, BatchNormalization, InstanceNormalization, GroupNormalization,
// LpNormalization, MeanVarianceNormalization, LRN, NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss. Statistics are computed in double whatever the stash_type; each
// result is rounded once, to the output's dtype.
#include "interp/kernels/ReductionImpl.h"

#include <cmath>

namespace coil {
namespace {

using Outs = std::vector<Tensor>;

std::string opStr(const KernelContext &ctx) {
  return std::string(opName(ctx.node.op));
}

Expected<DType> stashDType(const KernelContext &ctx) {
  int64_t s = ctx.attrs().getInt("stash_type", 1);
  if (auto t = dtypeFromOnnxCode(s); t && isFloat(*t)) return *t;
  return ctx.error("stash_type " + std::to_string(s) + " of " + opStr(ctx) +
                   " is not a supported floating-point type");
}

/// For each element of a tensor of shape `target`, the flat index of the element of `t` that
/// broadcasts to it (unidirectional broadcasting), or a user error.
Expected<std::vector<int64_t>> unidirectional(const KernelContext &ctx, const Tensor &t,
                                              const char *name, const Shape &target) {
  auto b = broadcastConcrete(t.shape(), target);
  if (!b || *b != target)
    return ctx.error(std::string(name) + " of " + opStr(ctx) + " with shape " +
                     shapeStr(t.shape()) + " does not broadcast to " + shapeStr(target));
  return broadcastIndex(t.shape(), target);
}

Status requireChannels(const KernelContext &ctx, size_t i, const char *name, int64_t c) {
  const Tensor &t = ctx.input(i);
  if (t.rank() != 1 || t.dim(0) != c)
    return ctx.error(std::string(name) + " of " + opStr(ctx) + " must have shape [" +
                     std::to_string(c) + "], got " + shapeStr(t.shape()));
  return okStatus();
}

Status requireRank(const KernelContext &ctx, const Tensor &x, int64_t rank) {
  if (x.rank() < rank)
    return ctx.error("input 0 of " + opStr(ctx) + " must have rank >= " + std::to_string(rank) +
                     ", got rank " + std::to_string(x.rank()));
  return okStatus();
}

// --- LayerNormalization / RMSNormalization

Expected<Outs> layerNormKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  COIL_TRY_STATUS(requireRank(ctx, x, 1));
  COIL_TRY(int64_t axis, kernelAxis(ctx, ctx.attrs().getInt("axis", -1), x.rank()));
  COIL_TRY(DType stash, stashDType(ctx));
  double eps = ctx.attrs().getFloat("epsilon", 1e-5);
  bool rms = ctx.node.op == OpKind::RMSNormalization;
  Shape normShape(x.shape().begin() + axis, x.shape().end());
  int64_t outer = 1, inner = numelOf(normShape);
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  // Scale and bias broadcast to X (usually they have the normalized shape).
  COIL_TRY(std::vector<int64_t> si, unidirectional(ctx, ctx.input(1), "scale", x.shape()));
  std::vector<int64_t> bi;
  if (ctx.hasInput(2)) {
    COIL_TRY(bi, unidirectional(ctx, ctx.input(2), "bias", x.shape()));
  }
  std::vector<double> xs = x.toDoubles(), sc = ctx.input(1).toDoubles();
  std::vector<double> bs = ctx.hasInput(2) ? ctx.input(2).toDoubles() : std::vector<double>{};
  Shape statShape = x.shape();
  for (int64_t d = axis; d < x.rank(); ++d) statShape[size_t(d)] = 1;
  Tensor y(x.dtype(), x.shape()), meanT(stash, statShape), invStdT(stash, statShape);
  for (int64_t o = 0; o < outer; ++o) {
    const double *row = xs.data() + o * inner;
    double mean = 0;
    if (!rms) {
      for (int64_t j = 0; j < inner; ++j) mean += row[j];
      mean /= double(inner);
    }
    double var = 0;
    for (int64_t j = 0; j < inner; ++j) var += (row[j] - mean) * (row[j] - mean);
    var /= double(inner);
    double invStd = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < inner; ++j) {
      size_t flat = size_t(o * inner + j);
      double v = (row[j] - mean) * invStd * sc[size_t(si[flat])];
      if (!bi.empty()) v += bs[size_t(bi[flat])];
      y.setDouble(o * inner + j, v);
    }
    meanT.setDouble(o, mean);
    invStdT.setDouble(o, invStd);
  }
  if (rms) return Outs{y};
  return Outs{y, meanT, invStdT};
}

// --- BatchNormalization

Expected<Outs> batchNormKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  COIL_TRY_STATUS(requireRank(ctx, x, 2));
  int64_t n = x.dim(0), c = x.dim(1), inner = 1;
  for (int64_t d = 2; d < x.rank(); ++d) inner *= x.dim(d);
  const char *names[] = {"", "scale", "bias", "input_mean", "input_var"};
  for (size_t i = 1; i <= 4; ++i) COIL_TRY_STATUS(requireChannels(ctx, i, names[i], c));
  double eps = ctx.attrs().getFloat("epsilon", 1e-5);
  double momentum = ctx.attrs().getFloat("momentum", 0.9);
  bool training = ctx.attrs().getInt("training_mode", 0) != 0;
  std::vector<double> xs = x.toDoubles();
  std::vector<double> scale = ctx.input(1).toDoubles(), bias = ctx.input(2).toDoubles();
  std::vector<double> mean = ctx.input(3).toDoubles(), var = ctx.input(4).toDoubles();
  Tensor runMean(ctx.input(3).dtype(), {c}), runVar(ctx.input(4).dtype(), {c});
  if (training) {
    // Batch statistics (population variance) normalize; the running stats are updated.
    int64_t cnt = n * inner;
    for (int64_t ch = 0; ch < c; ++ch) {
      double m = 0, v = 0;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < inner; ++i) m += xs[size_t((b * c + ch) * inner + i)];
      m /= double(cnt);
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < inner; ++i) {
          double d = xs[size_t((b * c + ch) * inner + i)] - m;
          v += d * d;
        }
      v /= double(cnt);
      runMean.setDouble(ch, mean[size_t(ch)] * momentum + m * (1 - momentum));
      runVar.setDouble(ch, var[size_t(ch)] * momentum + v * (1 - momentum));
      mean[size_t(ch)] = m;
      var[size_t(ch)] = v;
    }
  }
  Tensor y(x.dtype(), x.shape());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      double k = scale[size_t(ch)] / std::sqrt(var[size_t(ch)] + eps);
      for (int64_t i = 0; i < inner; ++i) {
        int64_t idx = (b * c + ch) * inner + i;
        y.setDouble(idx, (xs[size_t(idx)] - mean[size_t(ch)]) * k + bias[size_t(ch)]);
      }
    }
  if (training) return Outs{y, runMean, runVar};
  if (ctx.numOutputs() > 1)
    return ctx.error("BatchNormalization has " + std::to_string(ctx.numOutputs()) +
                     " outputs but training_mode is 0");
  return Outs{y};
}

// --- InstanceNormalization / GroupNormalization

/// Normalizes x viewed as [n, groups, chPerGroup, inner]; `scaleIdx(ch, g)` picks the scale and
/// bias element of channel ch (in group g).
template <typename ScaleIdx>
Tensor groupNorm(const Tensor &x, int64_t groups, double eps, const std::vector<double> &scale,
                 const std::vector<double> &bias, ScaleIdx scaleIdx) {
  int64_t n = x.dim(0), c = x.dim(1), inner = 1;
  for (int64_t d = 2; d < x.rank(); ++d) inner *= x.dim(d);
  int64_t cpg = c / groups, len = cpg * inner;
  std::vector<double> xs = x.toDoubles();
  Tensor y(x.dtype(), x.shape());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t g = 0; g < groups; ++g) {
      int64_t base = (b * c + g * cpg) * inner; // a group is contiguous
      double m = 0, v = 0;
      for (int64_t j = 0; j < len; ++j) m += xs[size_t(base + j)];
      m /= double(len);
      for (int64_t j = 0; j < len; ++j)
        v += (xs[size_t(base + j)] - m) * (xs[size_t(base + j)] - m);
      v /= double(len);
      double inv = 1.0 / std::sqrt(v + eps);
      for (int64_t j = 0; j < len; ++j) {
        size_t s = size_t(scaleIdx(g * cpg + j / inner, g));
        y.setDouble(base + j, (xs[size_t(base + j)] - m) * inv * scale[s] + bias[s]);
      }
    }
  return y;
}

Expected<Outs> instanceNormKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  COIL_TRY_STATUS(requireRank(ctx, x, 3));
  int64_t c = x.dim(1);
  COIL_TRY_STATUS(requireChannels(ctx, 1, "scale", c));
  COIL_TRY_STATUS(requireChannels(ctx, 2, "bias", c));
  double eps = ctx.attrs().getFloat("epsilon", 1e-5);
  return Outs{groupNorm(x, c, eps, ctx.input(1).toDoubles(), ctx.input(2).toDoubles(),
                        [](int64_t ch, int64_t) { return ch; })};
}

Expected<Outs> groupNormKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  COIL_TRY_STATUS(requireRank(ctx, x, 2));
  int64_t c = x.dim(1);
  int64_t g = ctx.attrs().getInt("num_groups", 0);
  if (g <= 0 || c % g != 0)
    return ctx.error("channels (" + std::to_string(c) +
                     ") of GroupNormalization must be divisible by num_groups (" +
                     std::to_string(g) + ")");
  COIL_TRY(DType stash, stashDType(ctx));
  (void)stash;
  const Tensor &s = ctx.input(1), &b = ctx.input(2);
  // Opset 21: one scale/bias per channel; opset 18: one per group.
  bool perChannel = s.rank() == 1 && s.dim(0) == c;
  int64_t want = perChannel ? c : g;
  for (const Tensor *t : {&s, &b})
    if (t->rank() != 1 || t->dim(0) != want)
      return ctx.error("scale and bias of GroupNormalization must both have shape [" +
                       std::to_string(c) + "] (or [" + std::to_string(g) + "] in opset 18), got " +
                       shapeStr(s.shape()) + " and " + shapeStr(b.shape()));
  double eps = ctx.attrs().getFloat("epsilon", 1e-5);
  return Outs{groupNorm(x, g, eps, s.toDoubles(), b.toDoubles(),
                        [perChannel](int64_t ch, int64_t gr) { return perChannel ? ch : gr; })};
}

// --- LpNormalization / MeanVarianceNormalization / LRN

Expected<Outs> lpNormKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  COIL_TRY_STATUS(requireRank(ctx, x, 1));
  COIL_TRY(int64_t axis, kernelAxis(ctx, ctx.attrs().getInt("axis", -1), x.rank()));
  int64_t p = ctx.attrs().getInt("p", 2);
  if (p != 1 && p != 2)
    return ctx.error("p of LpNormalization must be 1 or 2, got " + std::to_string(p));
  AxisSplit s = splitAt(x.shape(), axis);
  std::vector<double> xs = x.toDoubles();
  Tensor y(x.dtype(), x.shape());
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      double norm = 0;
      for (int64_t k = 0; k < s.n; ++k) {
        double v = xs[size_t(s.at(o, k, i))];
        norm += p == 1 ? std::fabs(v) : v * v;
      }
      if (p == 2) norm = std::sqrt(norm);
      for (int64_t k = 0; k < s.n; ++k) // a zero norm gives 0, not NaN
        y.setDouble(s.at(o, k, i), norm == 0 ? 0.0 : xs[size_t(s.at(o, k, i))] / norm);
    }
  return Outs{y};
}

Expected<Outs> mvnKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  auto planE = planReduce(x.shape(), ctx.attrs().getInts("axes", {0, 2, 3}), true);
  if (!planE) return ctx.error("axes of MeanVarianceNormalization: " + planE.error().message());
  const ReducePlan &p = *planE;
  std::vector<double> xs = x.toDoubles();
  size_t nOut = size_t(numelOf(p.outShape));
  std::vector<double> sum(nOut, 0.0), sq(nOut, 0.0);
  for (size_t i = 0; i < xs.size(); ++i) {
    sum[size_t(p.outIndex[i])] += xs[i];
    sq[size_t(p.outIndex[i])] += xs[i] * xs[i];
  }
  Tensor y(x.dtype(), x.shape());
  for (size_t i = 0; i < xs.size(); ++i) {
    size_t o = size_t(p.outIndex[i]);
    double mean = sum[o] / double(p.count);
    double var = sq[o] / double(p.count) - mean * mean; // E[x^2] - E[x]^2, as ONNX defines it
    y.setDouble(int64_t(i), (xs[i] - mean) / (std::sqrt(var) + 1e-9));
  }
  return Outs{y};
}

Expected<Outs> lrnKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  COIL_TRY_STATUS(requireRank(ctx, x, 2));
  int64_t size = ctx.attrs().getInt("size", 0);
  if (size <= 0) return ctx.error("size of LRN must be > 0, got " + std::to_string(size));
  double alpha = ctx.attrs().getFloat("alpha", 1e-4);
  double beta = ctx.attrs().getFloat("beta", 0.75);
  double bias = ctx.attrs().getFloat("bias", 1.0);
  AxisSplit s = splitAt(x.shape(), 1);
  int64_t lo = (size - 1) / 2, hi = size - 1 - lo; // floor and ceil of (size-1)/2
  std::vector<double> xs = x.toDoubles();
  Tensor y(x.dtype(), x.shape());
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t c = 0; c < s.n; ++c)
      for (int64_t i = 0; i < s.inner; ++i) {
        double sq = 0;
        for (int64_t k = std::max<int64_t>(0, c - lo); k <= std::min(s.n - 1, c + hi); ++k) {
          double v = xs[size_t(s.at(o, k, i))];
          sq += v * v;
        }
        int64_t idx = s.at(o, c, i);
        y.setDouble(idx, xs[size_t(idx)] / std::pow(bias + alpha / double(size) * sq, beta));
      }
  return Outs{y};
}

// --- NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss

/// NLL of log-probabilities `lp` ([N, C, D] flattened, as doubles) against `target`.
Expected<Tensor> nll(const KernelContext &ctx, const std::vector<double> &lp, const Shape &xShape,
                     DType dtype, const Tensor &target, const Tensor *weight) {
  int64_t n = xShape[0], c = xShape[1], d = 1;
  for (size_t k = 2; k < xShape.size(); ++k) d *= xShape[k];
  Shape want{n};
  want.insert(want.end(), xShape.begin() + 2, xShape.end());
  if (target.shape() != want)
    return ctx.error("target of " + opStr(ctx) + " must have shape " + shapeStr(want) + ", got " +
                     shapeStr(target.shape()));
  if (weight && (weight->rank() != 1 || weight->dim(0) != c))
    return ctx.error("weight of " + opStr(ctx) + " must have shape [" + std::to_string(c) +
                     "], got " + shapeStr(weight->shape()));
  std::optional<int64_t> ignore = ctx.attrs().maybeInt("ignore_index");
  std::string red = ctx.attrs().getString("reduction", "mean");
  if (red != "none" && red != "sum" && red != "mean")
    return ctx.error("reduction of " + opStr(ctx) + " must be none, sum or mean, got '" + red +
                     "'");
  std::vector<double> loss(size_t(n * d));
  double lossSum = 0, weightSum = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t j = 0; j < d; ++j) {
      int64_t t = target.getInt(b * d + j);
      if (ignore && t == *ignore) {
        loss[size_t(b * d + j)] = 0;
        continue;
      }
      if (t < 0 || t >= c)
        return ctx.error("target value " + std::to_string(t) + " of " + opStr(ctx) +
                         " is out of range [0, " + std::to_string(c) + ")");
      double w = weight ? weight->getDouble(t) : 1.0;
      double l = -lp[size_t((b * c + t) * d + j)] * w;
      loss[size_t(b * d + j)] = l;
      lossSum += l;
      weightSum += w;
    }
  if (red == "none") return Tensor::fromDoubles(dtype, target.shape(), loss);
  return Tensor::scalar(dtype, red == "sum" ? lossSum : lossSum / weightSum);
}

Expected<Outs> nllKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  COIL_TRY_STATUS(requireRank(ctx, x, 2));
  COIL_TRY(Tensor loss, nll(ctx, x.toDoubles(), x.shape(), x.dtype(), ctx.input(1),
                            ctx.hasInput(2) ? &ctx.input(2) : nullptr));
  return Outs{loss};
}

Expected<Outs> sceKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  COIL_TRY_STATUS(requireRank(ctx, x, 2));
  AxisSplit s = splitAt(x.shape(), 1);
  std::vector<double> xs = x.toDoubles(), lp(xs.size());
  std::vector<double> row(size_t(s.n));
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      for (int64_t k = 0; k < s.n; ++k) row[size_t(k)] = xs[size_t(s.at(o, k, i))];
      softmaxRow(row, /*log=*/true);
      for (int64_t k = 0; k < s.n; ++k) lp[size_t(s.at(o, k, i))] = row[size_t(k)];
    }
  COIL_TRY(Tensor loss, nll(ctx, lp, x.shape(), x.dtype(), ctx.input(1),
                            ctx.hasInput(2) ? &ctx.input(2) : nullptr));
  if (ctx.numOutputs() > 1) return Outs{loss, Tensor::fromDoubles(x.dtype(), x.shape(), lp)};
  return Outs{loss};
}

} // namespace

void registerReductionNormKernels(KernelRegistry &r) {
  r.add(kLayerNormOps, layerNormKernel);
  r.add(OpKind::BatchNormalization, batchNormKernel);
  r.add(OpKind::InstanceNormalization, instanceNormKernel);
  r.add(OpKind::GroupNormalization, groupNormKernel);
  r.add(OpKind::LpNormalization, lpNormKernel);
  r.add(OpKind::MeanVarianceNormalization, mvnKernel);
  r.add(OpKind::LRN, lrnKernel);
  r.add(OpKind::NegativeLogLikelihoodLoss, nllKernel);
  r.add(OpKind::SoftmaxCrossEntropyLoss, sceKernel);
}

} // namespace coil
