// Reference kernels for the Linalg family of ops (see Ops.def): matrix products, Einsum, Det,
// and the registration of the conv/pool/image kernels of the other Linalg*.cpp files.
//
// Floating-point ops read their inputs as double, accumulate in double and round once when
// storing the result in the output dtype. Integer products accumulate in 64-bit integers with
// wrap-around, then wrap to the output dtype.
#include "interp/kernels/LinalgKernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace coil {
namespace linalg {

Expected<Window> computeWindow(const KernelContext &ctx, const WindowAttrs &a, const Shape &in,
                               const Shape &kernel) {
  size_t nd = in.size();
  if (kernel.size() != nd)
    return ctx.error("kernel_shape must have " + std::to_string(nd) + " values, got " +
                     std::to_string(kernel.size()));
  Window w;
  w.nd = nd;
  w.in = in;
  w.kernel = kernel;
  w.strides = a.strides;
  w.dilations = a.dilations;
  for (size_t i = 0; i < nd; ++i) {
    COIL_TRY(WindowDim d, windowDim(a, i, SymInt(in[i]), SymInt(kernel[i])));
    w.out.push_back(d.out.constant());
    w.padBegin.push_back(d.padBegin.constant());
    w.padEnd.push_back(d.padEnd.constant());
  }
  return w;
}

int64_t saturateRound(double v, DType t) {
  double r = std::nearbyint(v);
  auto [lo, hi] = saturationRange(t);
  if (std::isnan(r)) return 0;
  return int64_t(std::clamp(r, lo, hi));
}

} // namespace linalg

namespace {

using linalg::saturateRound;

/// Layout of a numpy matmul: operand shapes promoted to rank >= 2, the broadcast batch shape,
/// and the output shape with the promoted dims removed.
struct MatMulPlan {
  int64_t m = 0, k = 0, n = 0;
  Shape batch, outShape;
  std::vector<int64_t> aBatch, bBatch; // per flat batch index, the batch index of a and b
};

Expected<MatMulPlan> planMatMul(const KernelContext &ctx, Shape a, Shape b) {
  if (a.empty() || b.empty()) return ctx.error("matmul operands must have rank >= 1");
  bool aVec = a.size() == 1, bVec = b.size() == 1;
  if (aVec) a.insert(a.begin(), 1);
  if (bVec) b.push_back(1);
  MatMulPlan p;
  p.m = a[a.size() - 2];
  p.k = a[a.size() - 1];
  p.n = b[b.size() - 1];
  if (b[b.size() - 2] != p.k)
    return ctx.error("inner dimensions differ: " + std::to_string(p.k) + " vs " +
                     std::to_string(b[b.size() - 2]));
  Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  COIL_TRY(p.batch, broadcastConcrete(ba, bb));
  p.aBatch = broadcastIndex(ba, p.batch);
  p.bBatch = broadcastIndex(bb, p.batch);
  p.outShape = p.batch;
  if (!aVec) p.outShape.push_back(p.m);
  if (!bVec) p.outShape.push_back(p.n);
  return p;
}

/// c[batch, i, j] = sum_k f(a[.., i, k], b[.., k, j]) with T = double or uint64_t (wrapping).
template <typename T, typename LoadA, typename LoadB>
std::vector<T> runMatMul(const MatMulPlan &p, LoadA la, LoadB lb) {
  int64_t nb = numelOf(p.batch);
  std::vector<T> out(size_t(nb * p.m * p.n));
  for (int64_t bi = 0; bi < nb; ++bi) {
    int64_t ao = p.aBatch[size_t(bi)] * p.m * p.k, bo = p.bBatch[size_t(bi)] * p.k * p.n;
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        T acc = 0;
        for (int64_t kk = 0; kk < p.k; ++kk)
          acc += la(ao + i * p.k + kk, i) * lb(bo + kk * p.n + j, j);
        out[size_t((bi * p.m + i) * p.n + j)] = acc;
      }
  }
  return out;
}

Expected<std::vector<Tensor>> matMulKernel(KernelContext &ctx) {
  const Tensor &a = ctx.input(0), &b = ctx.input(1);
  if (a.dtype() != b.dtype()) return ctx.error("matmul operands must have the same dtype");
  COIL_TRY(MatMulPlan p, planMatMul(ctx, a.shape(), b.shape()));
  if (isFloat(a.dtype())) {
    std::vector<double> av = a.toDoubles(), bv = b.toDoubles();
    auto out = runMatMul<double>(
        p, [&](int64_t i, int64_t) { return av[size_t(i)]; },
        [&](int64_t i, int64_t) { return bv[size_t(i)]; });
    return std::vector<Tensor>{Tensor::fromDoubles(a.dtype(), p.outShape, out)};
  }
  std::vector<int64_t> av = a.toInts(), bv = b.toInts();
  auto out = runMatMul<uint64_t>(
      p, [&](int64_t i, int64_t) { return uint64_t(av[size_t(i)]); },
      [&](int64_t i, int64_t) { return uint64_t(bv[size_t(i)]); });
  Tensor t(a.dtype(), p.outShape);
  for (size_t i = 0; i < out.size(); ++i) t.setInt(int64_t(i), int64_t(out[i]));
  return std::vector<Tensor>{t};
}

/// A zero point (or scale) that is a scalar or has one value per row (per column).
Expected<std::vector<double>> perIndex(const KernelContext &ctx, size_t input, int64_t n,
                                       const char *what) {
  if (!ctx.hasInput(input)) return std::vector<double>(size_t(n), 0.0);
  const Tensor &t = ctx.input(input);
  std::vector<double> v = t.toDoubles();
  if (v.size() == 1) return std::vector<double>(size_t(n), v[0]);
  if (int64_t(v.size()) == n) return v;
  return ctx.error(std::string(what) + " must be a scalar or have " + std::to_string(n) +
                   " values, got " + std::to_string(v.size()));
}

Expected<std::vector<Tensor>> matMulIntegerKernel(KernelContext &ctx) {
  const Tensor &a = ctx.input(0), &b = ctx.input(1);
  COIL_TRY(MatMulPlan p, planMatMul(ctx, a.shape(), b.shape()));
  COIL_TRY(auto az, perIndex(ctx, 2, p.m, "a_zero_point"));
  COIL_TRY(auto bz, perIndex(ctx, 3, p.n, "b_zero_point"));
  std::vector<int64_t> av = a.toInts(), bv = b.toInts();
  auto out = runMatMul<uint64_t>(
      p, [&](int64_t i, int64_t r) { return uint64_t(av[size_t(i)] - int64_t(az[size_t(r)])); },
      [&](int64_t i, int64_t c) { return uint64_t(bv[size_t(i)] - int64_t(bz[size_t(c)])); });
  Tensor t(DType::I32, p.outShape);
  for (size_t i = 0; i < out.size(); ++i) t.setInt(int64_t(i), int64_t(out[i]));
  return std::vector<Tensor>{t};
}

Expected<std::vector<Tensor>> qLinearMatMulKernel(KernelContext &ctx) {
  const Tensor &a = ctx.input(0), &b = ctx.input(3);
  COIL_TRY(MatMulPlan p, planMatMul(ctx, a.shape(), b.shape()));
  COIL_TRY(auto as, perIndex(ctx, 1, p.m, "a_scale"));
  COIL_TRY(auto az, perIndex(ctx, 2, p.m, "a_zero_point"));
  COIL_TRY(auto bs, perIndex(ctx, 4, p.n, "b_scale"));
  COIL_TRY(auto bz, perIndex(ctx, 5, p.n, "b_zero_point"));
  COIL_TRY(auto ys, perIndex(ctx, 6, 1, "y_scale"));
  COIL_TRY(auto yz, perIndex(ctx, 7, 1, "y_zero_point"));
  DType outType = ctx.input(7).dtype();
  std::vector<int64_t> av = a.toInts(), bv = b.toInts();
  auto acc = runMatMul<uint64_t>(
      p, [&](int64_t i, int64_t r) { return uint64_t(av[size_t(i)] - int64_t(az[size_t(r)])); },
      [&](int64_t i, int64_t c) { return uint64_t(bv[size_t(i)] - int64_t(bz[size_t(c)])); });
  Tensor t(outType, p.outShape);
  for (size_t i = 0; i < acc.size(); ++i) {
    int64_t r = int64_t(i / size_t(p.n)) % p.m, c = int64_t(i % size_t(p.n));
    // The scale factor is a float32 product, as in the ONNX definition.
    float f = float(as[size_t(r)]) * float(bs[size_t(c)]) / float(ys[0]);
    double v = double(int64_t(acc[i])) * double(f);
    t.setInt(int64_t(i), saturateRound(std::nearbyint(v) + yz[0], outType));
  }
  return std::vector<Tensor>{t};
}

Expected<std::vector<Tensor>> gemmKernel(KernelContext &ctx) {
  const Tensor &a = ctx.input(0), &b = ctx.input(1);
  if (a.rank() != 2 || b.rank() != 2)
    return ctx.error("gemm operands must have rank 2, got " + shapeStr(a.shape()) + " and " +
                     shapeStr(b.shape()));
  const Attrs &at = ctx.attrs();
  bool ta = at.getInt("transA", 0) != 0, tb = at.getInt("transB", 0) != 0;
  double alpha = at.getFloat("alpha", 1.0), beta = at.getFloat("beta", 1.0);
  int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
  int64_t k2 = tb ? b.dim(1) : b.dim(0), n = tb ? b.dim(0) : b.dim(1);
  if (k != k2)
    return ctx.error("inner dimensions differ: " + std::to_string(k) + " vs " + std::to_string(k2));
  Shape outShape{m, n};
  std::vector<double> av = a.toDoubles(), bv = b.toDoubles(), cv;
  std::vector<int64_t> cIdx;
  if (ctx.hasInput(2)) {
    const Tensor &c = ctx.input(2);
    COIL_TRY(Shape bs, broadcastConcrete(c.shape(), outShape));
    if (bs != outShape)
      return ctx.error("input 2 (C) of shape " + shapeStr(c.shape()) + " cannot be broadcast to " +
                       shapeStr(outShape));
    cv = c.toDoubles();
    cIdx = broadcastIndex(c.shape(), outShape);
  }
  if (isInteger(a.dtype()) && alpha == 1.0 && beta == 1.0) {
    // Integer Gemm without scaling is exact, wrapping modulo 2^64 as the output type does;
    // going through double would round values above 2^53.
    std::vector<int64_t> ai = a.toInts(), bi = b.toInts(), ci;
    if (ctx.hasInput(2)) ci = ctx.input(2).toInts();
    std::vector<int64_t> outI(size_t(m * n));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        uint64_t acc = 0;
        for (int64_t kk = 0; kk < k; ++kk)
          acc += uint64_t(ai[size_t(ta ? kk * m + i : i * k + kk)]) *
                 uint64_t(bi[size_t(tb ? j * k + kk : kk * n + j)]);
        if (!ci.empty()) acc += uint64_t(ci[size_t(cIdx[size_t(i * n + j)])]);
        outI[size_t(i * n + j)] = int64_t(acc);
      }
    return std::vector<Tensor>{Tensor::fromInts(a.dtype(), outShape, outI)};
  }
  std::vector<double> out(size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t kk = 0; kk < k; ++kk)
        acc += av[size_t(ta ? kk * m + i : i * k + kk)] * bv[size_t(tb ? j * k + kk : kk * n + j)];
      double v = alpha * acc;
      if (!cv.empty()) v += beta * cv[size_t(cIdx[size_t(i * n + j)])];
      out[size_t(i * n + j)] = v;
    }
  return std::vector<Tensor>{Tensor::fromDoubles(a.dtype(), outShape, out)};
}

// --- Einsum

Expected<std::vector<Tensor>> einsumKernel(KernelContext &ctx) {
  COIL_TRY(EinsumEquation eq, decodeEinsum(ctx.node, ctx.numInputs()));
  std::vector<size_t> ranks;
  for (size_t t = 0; t < ctx.numInputs(); ++t) ranks.push_back(size_t(ctx.input(t).rank()));
  COIL_TRY(EinsumLabels L, einsumLabels(eq, ranks));
  const auto &labels = L.operands;
  const std::vector<int> &outLabels = L.output, &sumLabels = L.summed;
  size_t nIn = ranks.size();
  std::map<int, int64_t> size;
  for (size_t t = 0; t < nIn; ++t) {
    const Shape &sh = ctx.input(t).shape();
    for (size_t d = 0; d < sh.size(); ++d) {
      int l = labels[t][d];
      auto it = size.find(l);
      if (it == size.end() || it->second == 1)
        size[l] = sh[d];
      else if (sh[d] != 1 && sh[d] != it->second)
        return ctx.error("einsum dim '" + einsumLabelName(l) + "' has sizes " +
                         std::to_string(it->second) + " and " + std::to_string(sh[d]));
    }
  }
  // Per operand and label, the stride to add per step of that label (0 where broadcast).
  std::vector<int> all = outLabels;
  all.insert(all.end(), sumLabels.begin(), sumLabels.end());
  std::vector<std::vector<int64_t>> stride(nIn, std::vector<int64_t>(all.size(), 0));
  for (size_t t = 0; t < nIn; ++t) {
    const Shape &sh = ctx.input(t).shape();
    auto st = contiguousStrides(sh);
    for (size_t d = 0; d < sh.size(); ++d) {
      if (sh[d] == 1) continue;
      size_t li = size_t(std::find(all.begin(), all.end(), labels[t][d]) - all.begin());
      stride[t][li] += st[d];
    }
  }
  Shape outShape, sumShape;
  for (int l : outLabels) outShape.push_back(size[l]);
  for (int l : sumLabels) sumShape.push_back(size[l]);
  DType dt = ctx.input(0).dtype();
  bool fl = isFloat(dt);
  std::vector<std::vector<double>> dv(nIn);
  std::vector<std::vector<int64_t>> iv(nIn);
  for (size_t t = 0; t < nIn; ++t)
    fl ? (void)(dv[t] = ctx.input(t).toDoubles()) : (void)(iv[t] = ctx.input(t).toInts());
  int64_t nOut = numelOf(outShape), nSum = numelOf(sumShape);
  Tensor out(dt, outShape);
  std::vector<int64_t> oi, si;
  for (int64_t o = 0; o < nOut; ++o) {
    unravelIndex(o, outShape, oi);
    double dacc = 0;
    uint64_t iacc = 0;
    for (int64_t s = 0; s < nSum; ++s) {
      unravelIndex(s, sumShape, si);
      double dp = 1;
      uint64_t ip = 1;
      for (size_t t = 0; t < nIn; ++t) {
        int64_t off = 0;
        for (size_t j = 0; j < oi.size(); ++j) off += oi[j] * stride[t][j];
        for (size_t j = 0; j < si.size(); ++j) off += si[j] * stride[t][oi.size() + j];
        if (fl)
          dp *= dv[t][size_t(off)];
        else
          ip *= uint64_t(iv[t][size_t(off)]);
      }
      dacc += dp;
      iacc += ip;
    }
    fl ? out.setDouble(o, dacc) : out.setInt(o, int64_t(iacc));
  }
  return std::vector<Tensor>{out};
}

Expected<std::vector<Tensor>> detKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  if (x.rank() < 2 || x.dim(x.rank() - 1) != x.dim(x.rank() - 2))
    return ctx.error("det needs square matrices, got shape " + shapeStr(x.shape()));
  int64_t n = x.dim(x.rank() - 1);
  Shape outShape(x.shape().begin(), x.shape().end() - 2);
  int64_t count = numelOf(outShape);
  std::vector<double> v = x.toDoubles();
  std::vector<double> out(static_cast<size_t>(count));
  for (int64_t b = 0; b < count; ++b) {
    std::vector<double> m(v.begin() + b * n * n, v.begin() + (b + 1) * n * n);
    double det = 1;
    for (int64_t c = 0; c < n && det != 0; ++c) {
      int64_t piv = c;
      for (int64_t r = c + 1; r < n; ++r)
        if (std::fabs(m[size_t(r * n + c)]) > std::fabs(m[size_t(piv * n + c)])) piv = r;
      if (m[size_t(piv * n + c)] == 0) {
        det = 0;
        break;
      }
      if (piv != c) {
        for (int64_t j = 0; j < n; ++j) std::swap(m[size_t(c * n + j)], m[size_t(piv * n + j)]);
        det = -det;
      }
      double p = m[size_t(c * n + c)];
      det *= p;
      for (int64_t r = c + 1; r < n; ++r) {
        double f = m[size_t(r * n + c)] / p;
        for (int64_t j = c; j < n; ++j) m[size_t(r * n + j)] -= f * m[size_t(c * n + j)];
      }
    }
    out[size_t(b)] = det;
  }
  return std::vector<Tensor>{Tensor::fromDoubles(x.dtype(), outShape, out)};
}

} // namespace

void registerLinalgKernels(KernelRegistry &r) {
  r.add(OpKind::MatMul, matMulKernel);
  r.add(OpKind::MatMulInteger, matMulIntegerKernel);
  r.add(OpKind::QLinearMatMul, qLinearMatMulKernel);
  r.add(OpKind::Gemm, gemmKernel);
  r.add(OpKind::Einsum, einsumKernel);
  r.add(OpKind::Det, detKernel);
  linalg::registerLinalgConvKernels(r);
  linalg::registerLinalgPoolKernels(r);
  linalg::registerLinalgImageKernels(r);
  linalg::registerLinalgSampleKernels(r);
  linalg::registerLinalgRnnKernels(r);
  linalg::registerLinalgAttentionKernels(r);
}

} // namespace coil
