// Reference kernels of the convolutions: Conv, ConvInteger, QLinearConv, ConvTranspose, Col2Im.
//
// All of them run the same direct loops in double (exact for the integer variants: products
// of 8-bit values summed far below 2^53), with zero points subtracted beforehand so that
// padding contributes zero.
#include "interp/kernels/LinalgKernels.h"

#include <cmath>

namespace coil::linalg {
namespace {

/// For every (output position, kernel position) pair, the flat spatial index of the input
/// element it reads, or -1 where the window falls into the padding.
std::vector<int64_t> gatherTable(const Window &w) {
  Shape outS(w.out.begin(), w.out.end()), kS(w.kernel.begin(), w.kernel.end());
  int64_t nOut = numelOf(outS), nK = numelOf(kS);
  auto inStrides = contiguousStrides(Shape(w.in.begin(), w.in.end()));
  std::vector<int64_t> table(size_t(nOut * nK), -1), oi, ki;
  for (int64_t o = 0; o < nOut; ++o) {
    unravelIndex(o, outS, oi);
    for (int64_t k = 0; k < nK; ++k) {
      unravelIndex(k, kS, ki);
      int64_t flat = 0;
      bool inside = true;
      for (size_t d = 0; d < w.nd && inside; ++d) {
        int64_t c = oi[d] * w.strides[d] - w.padBegin[d] + ki[d] * w.dilations[d];
        inside = c >= 0 && c < w.in[d];
        flat += c * inStrides[d];
      }
      if (inside) table[size_t(o * nK + k)] = flat;
    }
  }
  return table;
}

struct ConvProblem {
  Shape x, w;
  int64_t group = 1;
  std::optional<std::vector<int64_t>> kernelShape; ///< the attribute, when given
  Window win;
  Shape outShape;
};

/// Validates shapes and attributes of a Conv-like node (x at input 0, weights at `wIdx`).
Expected<ConvProblem> planConv(const KernelContext &ctx, const Shape &x, const Shape &w) {
  COIL_TRY_STATUS(spatialDims(int64_t(x.size())));
  COIL_TRY_STATUS(checkWeightRank(int64_t(x.size()), int64_t(w.size())));
  ConvProblem p;
  p.x = x;
  p.w = w;
  COIL_TRY(WindowAttrs a, decodeWindow(ctx.node, x.size() - 2));
  p.group = a.group;
  p.kernelShape = a.kernelShape;
  if (x[1] % p.group != 0 || w[0] % p.group != 0 || w[1] * p.group != x[1])
    return ctx.error("group " + std::to_string(p.group) + " does not fit " + std::to_string(x[1]) +
                     " input channels and weights " + shapeStr(w));
  Shape in(x.begin() + 2, x.end()), k(w.begin() + 2, w.end());
  COIL_TRY(p.win, computeWindow(ctx, a, in, k));
  p.outShape = {x[0], w[0]};
  p.outShape.insert(p.outShape.end(), p.win.out.begin(), p.win.out.end());
  return p;
}

std::vector<double> runConv(const ConvProblem &p, const std::vector<double> &x,
                            const std::vector<double> &w) {
  int64_t n = p.x[0], c = p.x[1], m = p.w[0], cg = c / p.group, mg = m / p.group;
  int64_t inSize = numelOf(Shape(p.x.begin() + 2, p.x.end()));
  int64_t kSize = numelOf(Shape(p.w.begin() + 2, p.w.end()));
  int64_t outSize = numelOf(Shape(p.outShape.begin() + 2, p.outShape.end()));
  auto table = gatherTable(p.win);
  std::vector<double> out(size_t(n * m * outSize), 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < m; ++oc) {
      int64_t g = oc / mg;
      for (int64_t o = 0; o < outSize; ++o) {
        double acc = 0;
        for (int64_t ic = 0; ic < cg; ++ic) {
          const double *xb = x.data() + (b * c + g * cg + ic) * inSize;
          const double *wb = w.data() + (oc * cg + ic) * kSize;
          const int64_t *t = table.data() + o * kSize;
          for (int64_t k = 0; k < kSize; ++k)
            if (t[k] >= 0) acc += xb[t[k]] * wb[k];
        }
        out[size_t((b * m + oc) * outSize + o)] = acc;
      }
    }
  return out;
}

Expected<std::vector<Tensor>> convKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0), &w = ctx.input(1);
  COIL_TRY(ConvProblem p, planConv(ctx, x.shape(), w.shape()));
  if (const auto &ks = p.kernelShape)
    if (*ks != Shape(w.shape().begin() + 2, w.shape().end()))
      return ctx.error("kernel_shape differs from the weight shape " + shapeStr(w.shape()));
  std::vector<double> out = runConv(p, x.toDoubles(), w.toDoubles());
  if (ctx.hasInput(2)) {
    const Tensor &b = ctx.input(2);
    if (b.numel() != p.w[0])
      return ctx.error("bias must have " + std::to_string(p.w[0]) + " values, got " +
                       std::to_string(b.numel()));
    auto bv = b.toDoubles();
    int64_t per = numelOf(p.outShape) / (p.outShape[0] * p.outShape[1]);
    for (size_t i = 0; i < out.size(); ++i) out[i] += bv[size_t((int64_t(i) / per) % p.w[0])];
  }
  return std::vector<Tensor>{Tensor::fromDoubles(x.dtype(), p.outShape, out)};
}

/// Subtracts a zero point that is a scalar or one value per leading-dim slice of `v`.
Status subtractZeroPoint(const KernelContext &ctx, std::vector<double> &v, size_t input,
                         int64_t slices, const char *what) {
  if (!ctx.hasInput(input)) return okStatus();
  auto zp = ctx.input(input).toDoubles();
  if (zp.size() != 1 && int64_t(zp.size()) != slices)
    return ctx.error(std::string(what) + " must be a scalar or have " + std::to_string(slices) +
                     " values, got " + std::to_string(zp.size()));
  size_t per = v.size() / size_t(std::max<int64_t>(slices, 1));
  for (size_t i = 0; i < v.size(); ++i) v[i] -= zp.size() == 1 ? zp[0] : zp[i / per];
  return okStatus();
}

Expected<std::vector<Tensor>> convIntegerKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0), &w = ctx.input(1);
  COIL_TRY(ConvProblem p, planConv(ctx, x.shape(), w.shape()));
  auto xv = x.toDoubles(), wv = w.toDoubles();
  COIL_TRY_STATUS(subtractZeroPoint(ctx, xv, 2, 1, "x_zero_point"));
  COIL_TRY_STATUS(subtractZeroPoint(ctx, wv, 3, p.w[0], "w_zero_point"));
  std::vector<double> out = runConv(p, xv, wv);
  Tensor t(DType::I32, p.outShape);
  for (size_t i = 0; i < out.size(); ++i) t.setInt(int64_t(i), int64_t(std::llround(out[i])));
  return std::vector<Tensor>{t};
}

Expected<std::vector<Tensor>> qLinearConvKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0), &w = ctx.input(3);
  COIL_TRY(ConvProblem p, planConv(ctx, x.shape(), w.shape()));
  int64_t m = p.w[0];
  auto xv = x.toDoubles(), wv = w.toDoubles();
  COIL_TRY_STATUS(subtractZeroPoint(ctx, xv, 2, 1, "x_zero_point"));
  COIL_TRY_STATUS(subtractZeroPoint(ctx, wv, 5, m, "w_zero_point"));
  std::vector<double> acc = runConv(p, xv, wv);
  for (size_t i : {1, 2, 6, 7})
    if (ctx.hasInput(i) && ctx.input(i).numel() != 1)
      return ctx.error("input " + std::to_string(i) + " must hold one value, got " +
                       std::to_string(ctx.input(i).numel()));
  double xs = ctx.input(1).getDouble(0), ys = ctx.input(6).getDouble(0);
  double yz = ctx.input(7).getDouble(0);
  auto ws = ctx.input(4).toDoubles();
  if (ws.size() != 1 && int64_t(ws.size()) != m)
    return ctx.error("w_scale must be a scalar or have " + std::to_string(m) + " values");
  std::vector<double> bias;
  if (ctx.hasInput(8)) {
    bias = ctx.input(8).toDoubles();
    if (int64_t(bias.size()) != m)
      return ctx.error("bias must have " + std::to_string(m) + " values, got " +
                       std::to_string(bias.size()));
  }
  DType outType = ctx.input(7).dtype();
  int64_t per = numelOf(p.outShape) / (p.outShape[0] * m);
  Tensor t(outType, p.outShape);
  for (size_t i = 0; i < acc.size(); ++i) {
    size_t oc = size_t((int64_t(i) / per) % m);
    double a = acc[i] + (bias.empty() ? 0.0 : bias[oc]);
    float scale = float(xs) * float(ws.size() == 1 ? ws[0] : ws[oc]) / float(ys);
    t.setInt(int64_t(i), saturateRound(std::nearbyint(a * double(scale)) + yz, outType));
  }
  return std::vector<Tensor>{t};
}

Expected<std::vector<Tensor>> convTransposeKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0), &w = ctx.input(1);
  const Shape &xs = x.shape(), &ws = w.shape();
  if (xs.size() < 3 || ws.size() != xs.size())
    return ctx.error("conv_transpose needs input [N, C, spatial...] and weights of the same rank");
  size_t nd = xs.size() - 2;
  COIL_TRY(WindowAttrs wa, decodeWindow(ctx.node, nd));
  int64_t group = wa.group;
  if (xs[1] % group != 0 || ws[0] != xs[1])
    return ctx.error("group " + std::to_string(group) + " does not fit " + std::to_string(xs[1]) +
                     " input channels and weights " + shapeStr(ws));
  Window win;
  win.nd = nd;
  win.in.assign(xs.begin() + 2, xs.end());
  win.kernel.assign(ws.begin() + 2, ws.end());
  win.strides = wa.strides;
  win.dilations = wa.dilations;
  for (size_t i = 0; i < nd; ++i) {
    COIL_TRY(WindowDim d, convTransposeDim(wa, i, SymInt(win.in[i]), SymInt(win.kernel[i])));
    win.out.push_back(d.out.constant());
    win.padBegin.push_back(d.padBegin.constant());
    win.padEnd.push_back(d.padEnd.constant());
  }
  int64_t n = xs[0], c = xs[1], cg = c / group, mg = ws[1], m = mg * group;
  Shape outShape{n, m};
  outShape.insert(outShape.end(), win.out.begin(), win.out.end());
  // Scatter table: for (input position, kernel position), the output position it adds to.
  Shape inS(win.in.begin(), win.in.end()), kS(win.kernel.begin(), win.kernel.end()),
      outS(win.out.begin(), win.out.end());
  int64_t inSize = numelOf(inS), kSize = numelOf(kS), outSize = numelOf(outS);
  auto outStrides = contiguousStrides(outS);
  std::vector<int64_t> table(size_t(inSize * kSize), -1), ii, ki;
  for (int64_t i = 0; i < inSize; ++i) {
    unravelIndex(i, inS, ii);
    for (int64_t k = 0; k < kSize; ++k) {
      unravelIndex(k, kS, ki);
      int64_t flat = 0;
      bool inside = true;
      for (size_t d = 0; d < nd && inside; ++d) {
        int64_t o = ii[d] * win.strides[d] - win.padBegin[d] + ki[d] * win.dilations[d];
        inside = o >= 0 && o < win.out[d];
        flat += o * outStrides[d];
      }
      if (inside) table[size_t(i * kSize + k)] = flat;
    }
  }
  auto xv = x.toDoubles(), wv = w.toDoubles();
  std::vector<double> out(size_t(numelOf(outShape)), 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t g = 0; g < group; ++g)
      for (int64_t ic = 0; ic < cg; ++ic)
        for (int64_t oc = 0; oc < mg; ++oc) {
          double *ob = out.data() + (b * m + g * mg + oc) * outSize;
          const double *xb = xv.data() + (b * c + g * cg + ic) * inSize;
          const double *wb = wv.data() + ((g * cg + ic) * mg + oc) * kSize;
          for (int64_t i = 0; i < inSize; ++i)
            for (int64_t k = 0; k < kSize; ++k) {
              int64_t t = table[size_t(i * kSize + k)];
              if (t >= 0) ob[t] += xb[i] * wb[k];
            }
        }
  if (ctx.hasInput(2)) {
    auto bv = ctx.input(2).toDoubles();
    if (int64_t(bv.size()) != m)
      return ctx.error("bias must have " + std::to_string(m) + " values, got " +
                       std::to_string(bv.size()));
    for (size_t i = 0; i < out.size(); ++i) out[i] += bv[size_t((int64_t(i) / outSize) % m)];
  }
  return std::vector<Tensor>{Tensor::fromDoubles(x.dtype(), outShape, out)};
}

Expected<std::vector<Tensor>> col2ImKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  if (x.rank() != 3)
    return ctx.error("input 0 must have rank 3 ([N, C*prod(block), L]), got rank " +
                     std::to_string(x.rank()));
  Shape img = ctx.input(1).toInts(), blk = ctx.input(2).toInts();
  if (img.size() != blk.size() || img.empty())
    return ctx.error("image_shape and block_shape must have the same non-zero length");
  for (int64_t d : img)
    if (d < 0) return ctx.error("image_shape must be non-negative, got " + std::to_string(d));
  COIL_TRY(WindowAttrs a, decodeWindow(ctx.node, img.size()));
  COIL_TRY(Window win, computeWindow(ctx, a, img, blk));
  int64_t kSize = numelOf(blk), l = numelOf(Shape(win.out.begin(), win.out.end()));
  if (x.dim(1) % kSize != 0)
    return ctx.error("input dim 1 (" + std::to_string(x.dim(1)) +
                     ") must be divisible by the block size " + std::to_string(kSize));
  if (x.dim(2) != l)
    return ctx.error("input dim 2 must be the number of blocks " + std::to_string(l) + ", got " +
                     std::to_string(x.dim(2)));
  int64_t n = x.dim(0), c = x.dim(1) / kSize, imgSize = numelOf(img);
  auto table = gatherTable(win);
  auto xv = x.toDoubles();
  std::vector<double> out(size_t(n * c * imgSize), 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t k = 0; k < kSize; ++k)
        for (int64_t pos = 0; pos < l; ++pos) {
          int64_t t = table[size_t(pos * kSize + k)];
          if (t >= 0)
            out[size_t((b * c + ch) * imgSize + t)] +=
                xv[size_t(((b * c + ch) * kSize + k) * l + pos)];
        }
  Shape outShape{n, c};
  outShape.insert(outShape.end(), img.begin(), img.end());
  return std::vector<Tensor>{Tensor::fromDoubles(x.dtype(), outShape, out)};
}

} // namespace

void registerLinalgConvKernels(KernelRegistry &r) {
  r.add(OpKind::Conv, convKernel);
  r.add(OpKind::ConvInteger, convIntegerKernel);
  r.add(OpKind::QLinearConv, qLinearConvKernel);
  r.add(OpKind::ConvTranspose, convTransposeKernel);
  r.add(OpKind::Col2Im, col2ImKernel);
}

} // namespace coil::linalg
