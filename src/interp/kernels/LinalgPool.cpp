// Reference kernels of the pools: MaxPool (with Indices), AveragePool, LpPool, their Global
// variants, and MaxUnpool.
//
// A window at output position o covers input coordinates o*stride - pad_begin + k*dilation.
// Taps outside the input are skipped by MaxPool; AveragePool divides by the number of taps
// inside the input (count_include_pad=0) or inside input plus explicit padding
// (count_include_pad=1; taps added only by ceil_mode never count).
#include "interp/kernels/LinalgKernels.h"

#include <cmath>
#include <limits>

namespace coil::linalg {
namespace {

enum class PoolKind { Max, Average, Lp };

Expected<std::vector<Tensor>> poolKernel(KernelContext &ctx, PoolKind kind) {
  const Tensor &x = ctx.input(0);
  COIL_TRY_STATUS(spatialDims(x.rank()));
  Shape in(x.shape().begin() + 2, x.shape().end());
  COIL_TRY(WindowAttrs a, decodePoolWindow(ctx.node, in.size()));
  COIL_TRY(Window w, computeWindow(ctx, a, in, *a.kernelShape));
  size_t nd = w.nd;
  bool includePad = a.countIncludePad;
  int64_t storageOrder = a.storageOrder;
  double p = kind == PoolKind::Lp ? double(a.p) : 1.0;
  Shape outS(w.out.begin(), w.out.end()), kS(w.kernel.begin(), w.kernel.end());
  Shape outShape{x.dim(0), x.dim(1)};
  outShape.insert(outShape.end(), outS.begin(), outS.end());
  int64_t planes = x.dim(0) * x.dim(1), inSize = numelOf(in), outSize = numelOf(outS),
          kSize = numelOf(kS);
  auto rowStrides = contiguousStrides(in);
  std::vector<int64_t> colStrides(nd, 1); // column-major spatial strides (storage_order 1)
  for (size_t d = 1; d < nd; ++d) colStrides[d] = colStrides[d - 1] * in[d - 1];
  // Per (output, kernel) position: row-major flat input index, -1 in padding, -2 beyond it.
  std::vector<int64_t> table(size_t(outSize * kSize)), colIdx(size_t(outSize * kSize)), oi, ki;
  for (int64_t o = 0; o < outSize; ++o) {
    unravelIndex(o, outS, oi);
    for (int64_t k = 0; k < kSize; ++k) {
      unravelIndex(k, kS, ki);
      int64_t flat = 0, col = 0, state = 0; // 0 inside, 1 padding, 2 beyond padding
      for (size_t d = 0; d < nd; ++d) {
        int64_t c = oi[d] * w.strides[d] - w.padBegin[d] + ki[d] * w.dilations[d];
        if (c >= w.in[d] + w.padEnd[d] || c < -w.padBegin[d])
          state = 2;
        else if ((c < 0 || c >= w.in[d]) && state == 0)
          state = 1;
        flat += c * rowStrides[d];
        col += c * colStrides[d];
      }
      table[size_t(o * kSize + k)] = state == 0 ? flat : -state;
      colIdx[size_t(o * kSize + k)] = col;
    }
  }
  auto xv = x.toDoubles();
  std::vector<double> out(size_t(planes * outSize));
  Tensor indices;
  if (kind == PoolKind::Max && ctx.numOutputs() > 1) indices = Tensor(DType::I64, outShape);
  for (int64_t pl = 0; pl < planes; ++pl) {
    const double *xb = xv.data() + pl * inSize;
    for (int64_t o = 0; o < outSize; ++o) {
      const int64_t *t = table.data() + o * kSize;
      double acc = kind == PoolKind::Max ? -std::numeric_limits<double>::infinity() : 0.0;
      int64_t count = 0, best = -1;
      for (int64_t k = 0; k < kSize; ++k) {
        if (t[k] == -1 && includePad) ++count;
        if (t[k] < 0) continue;
        double v = xb[t[k]];
        ++count;
        if (kind == PoolKind::Max) {
          if (best < 0 || v > acc || (std::isnan(v) && !std::isnan(acc)))
            acc = v, best = o * kSize + k;
        } else if (kind == PoolKind::Average) {
          acc += v;
        } else {
          acc += std::pow(std::fabs(v), p);
        }
      }
      double r = acc;
      if (kind == PoolKind::Average)
        r = count ? acc / double(count) : std::numeric_limits<double>::quiet_NaN();
      else if (kind == PoolKind::Lp)
        r = std::pow(acc, 1.0 / p);
      out[size_t(pl * outSize + o)] = r;
      if (indices.defined()) {
        int64_t idx = -1;
        if (best >= 0)
          idx = pl * inSize + (storageOrder == 1 ? colIdx[size_t(best)] : table[size_t(best)]);
        indices.setInt(pl * outSize + o, idx);
      }
    }
  }
  std::vector<Tensor> res{Tensor::fromDoubles(x.dtype(), outShape, out)};
  if (indices.defined()) res.push_back(indices);
  return res;
}

Expected<std::vector<Tensor>> maxPoolKernel(KernelContext &ctx) {
  return poolKernel(ctx, PoolKind::Max);
}
Expected<std::vector<Tensor>> averagePoolKernel(KernelContext &ctx) {
  return poolKernel(ctx, PoolKind::Average);
}
Expected<std::vector<Tensor>> lpPoolKernel(KernelContext &ctx) {
  return poolKernel(ctx, PoolKind::Lp);
}

Expected<std::vector<Tensor>> globalPoolKernel(KernelContext &ctx, PoolKind kind) {
  const Tensor &x = ctx.input(0);
  if (x.rank() < 2)
    return ctx.error("input 0 must have rank >= 2 ([N, C, spatial...]), got rank " +
                     std::to_string(x.rank()));
  double p = kind == PoolKind::Lp ? double(ctx.attrs().getInt("p", 2)) : 1.0;
  int64_t planes = x.dim(0) * x.dim(1), size = planes ? x.numel() / planes : 0;
  Shape outShape{x.dim(0), x.dim(1)};
  outShape.resize(size_t(x.rank()), 1);
  auto xv = x.toDoubles();
  std::vector<double> out(static_cast<size_t>(planes));
  for (int64_t pl = 0; pl < planes; ++pl) {
    double acc = kind == PoolKind::Max ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int64_t i = 0; i < size; ++i) {
      double v = xv[size_t(pl * size + i)];
      if (kind == PoolKind::Max)
        acc = (v > acc || std::isnan(v)) ? v : acc;
      else if (kind == PoolKind::Average)
        acc += v;
      else
        acc += std::pow(std::fabs(v), p);
    }
    if (kind == PoolKind::Average)
      acc /= double(size);
    else if (kind == PoolKind::Lp)
      acc = std::pow(acc, 1.0 / p);
    out[size_t(pl)] = acc;
  }
  return std::vector<Tensor>{Tensor::fromDoubles(x.dtype(), outShape, out)};
}

Expected<std::vector<Tensor>> globalAveragePoolKernel(KernelContext &ctx) {
  return globalPoolKernel(ctx, PoolKind::Average);
}
Expected<std::vector<Tensor>> globalMaxPoolKernel(KernelContext &ctx) {
  return globalPoolKernel(ctx, PoolKind::Max);
}
Expected<std::vector<Tensor>> globalLpPoolKernel(KernelContext &ctx) {
  return globalPoolKernel(ctx, PoolKind::Lp);
}

Expected<std::vector<Tensor>> maxUnpoolKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0), &ind = ctx.input(1);
  COIL_TRY_STATUS(spatialDims(x.rank()));
  if (ind.shape() != x.shape())
    return ctx.error("indices must have the shape of the input " + shapeStr(x.shape()) + ", got " +
                     shapeStr(ind.shape()));
  size_t nd = size_t(x.rank() - 2);
  COIL_TRY(WindowAttrs a, decodePoolWindow(ctx.node, nd));
  // Indices address the default-sized output; an explicit output_shape only enlarges it.
  Shape inferred{x.dim(0), x.dim(1)};
  for (size_t i = 0; i < nd; ++i)
    inferred.push_back(unpoolDim(a, i, SymInt(x.dim(int64_t(2 + i)))).constant());
  Shape outShape = inferred;
  if (ctx.hasInput(2)) {
    outShape = ctx.input(2).toInts();
    if (outShape.size() != inferred.size())
      return ctx.error("output_shape must have " + std::to_string(inferred.size()) + " values");
    for (size_t i = 0; i < outShape.size(); ++i)
      if (outShape[i] < inferred[i])
        return ctx.error("output_shape " + shapeStr(outShape) + " is smaller than " +
                         shapeStr(inferred));
  }
  int64_t total = numelOf(inferred);
  Tensor out(x.dtype(), outShape);
  std::vector<int64_t> idx;
  auto outStrides = contiguousStrides(outShape);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t t = ind.getInt(i);
    if (t < 0 || t >= total)
      return ctx.error("index " + std::to_string(t) + " is out of range [0, " +
                       std::to_string(total) + ")");
    unravelIndex(t, inferred, idx);
    int64_t flat = 0;
    for (size_t d = 0; d < idx.size(); ++d) flat += idx[d] * outStrides[d];
    out.setDouble(flat, x.getDouble(i));
  }
  return std::vector<Tensor>{out};
}

} // namespace

void registerLinalgPoolKernels(KernelRegistry &r) {
  r.add(OpKind::MaxPool, maxPoolKernel);
  r.add(OpKind::AveragePool, averagePoolKernel);
  r.add(OpKind::LpPool, lpPoolKernel);
  r.add(OpKind::GlobalAveragePool, globalAveragePoolKernel);
  r.add(OpKind::GlobalMaxPool, globalMaxPoolKernel);
  r.add(OpKind::GlobalLpPool, globalLpPoolKernel);
  r.add(OpKind::MaxUnpool, maxUnpoolKernel);
}

} // namespace coil::linalg
