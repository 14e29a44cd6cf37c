// Reference kernels for the DataMovement family of ops (see Ops.def): the ops whose output is
// a rearrangement of their input's elements. Elements are copied byte for byte, never through
// a float. The data-dependent ops (NonZero, Compress, Unique, OneHot, NonMaxSuppression) and
// the window generators are in DataMovementDynamic.cpp.
#include "interp/kernels/DataMovementUtil.h"
#include "ir/Infer.h"
#include "ir/OpAttrs.h"

#include <algorithm>

namespace coil {

void registerDataMovementDynamicKernels(KernelRegistry &r);

namespace {

using namespace dm;

/// Calls fn(idx, flat) for every multi-index of `shape` in row-major order.
template <typename Fn> void forEachIndex(const Shape &shape, Fn fn) {
  int64_t n = numelOf(shape);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t f = 0; f < n; ++f) {
    fn(idx, f);
    for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
      if (++idx[size_t(d)] < shape[size_t(d)]) break;
      idx[size_t(d)] = 0;
    }
  }
}

int64_t offsetOf(const std::vector<int64_t> &idx, const std::vector<int64_t> &strides) {
  int64_t off = 0;
  for (size_t i = 0; i < idx.size(); ++i) off += idx[i] * strides[i];
  return off;
}

Expected<int64_t> axisAttr(const KernelContext &ctx, int64_t dflt, int64_t rank) {
  int64_t axis = ctx.attrs().getInt("axis", dflt);
  if (axis < -rank || axis >= rank)
    return ctx.error("axis " + std::to_string(axis) + " is out of range for rank " +
                     std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

// --- Transpose

Expected<std::vector<Tensor>> transposeKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  int64_t r = x.rank();
  std::vector<int64_t> perm = ctx.attrs().getInts("perm");
  if (!ctx.attrs().has("perm"))
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  if (!isPermutation(perm, r))
    return ctx.error("perm must be a permutation of 0.." + std::to_string(r - 1) + ", got " +
                     intsStr(perm));
  Shape out(static_cast<size_t>(r));
  std::vector<int64_t> inStrides = contiguousStrides(x.shape()), st(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i) {
    out[size_t(i)] = x.dim(perm[size_t(i)]);
    st[size_t(i)] = inStrides[size_t(perm[size_t(i)])];
  }
  Tensor y(x.dtype(), out);
  forEachIndex(out, [&](const std::vector<int64_t> &idx, int64_t f) {
    copyElement(y, f, x, offsetOf(idx, st));
  });
  return std::vector<Tensor>{y};
}

// --- GatherElements, ScatterElements, Scatter

Expected<std::vector<Tensor>> gatherElementsKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  const Tensor &ind = ctx.input(1);
  COIL_TRY(std::vector<int64_t> indices, readIndexTensor(ctx, 1, "indices"));
  if (ind.rank() != x.rank())
    return ctx.error("indices must have the rank of data (" + std::to_string(x.rank()) +
                     "), got rank " + std::to_string(ind.rank()));
  if (x.rank() == 0) return ctx.error("data must have rank >= 1");
  COIL_TRY(int64_t axis, axisAttr(ctx, 0, x.rank()));
  for (int64_t d = 0; d < x.rank(); ++d)
    if (d != axis && ind.dim(d) > x.dim(d))
      return ctx.error("indices shape " + shapeStr(ind.shape()) + " exceeds data shape " +
                       shapeStr(x.shape()) + " in dim " + std::to_string(d));
  Tensor y(x.dtype(), ind.shape());
  std::vector<int64_t> st = contiguousStrides(x.shape());
  std::vector<int64_t> src;
  for (int64_t f = 0; f < ind.numel(); ++f) {
    unravelIndex(f, ind.shape(), src);
    COIL_TRY(src[size_t(axis)], normalizeIndex(ctx, indices[size_t(f)], x.dim(axis), "index"));
    copyElement(y, f, x, offsetOf(src, st));
  }
  return std::vector<Tensor>{y};
}

Expected<std::vector<Tensor>> scatterElementsKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  const Tensor &ind = ctx.input(1);
  const Tensor &upd = ctx.input(2);
  COIL_TRY(std::vector<int64_t> indices, readIndexTensor(ctx, 1, "indices"));
  COIL_TRY(Reduction red, parseReduction(ctx));
  if (upd.dtype() != x.dtype())
    return ctx.error("updates must have the dtype of data (" + std::string(dtypeName(x.dtype())) +
                     "), got " + std::string(dtypeName(upd.dtype())));
  if (ind.shape() != upd.shape())
    return ctx.error("indices and updates must have the same shape, got " + shapeStr(ind.shape()) +
                     " and " + shapeStr(upd.shape()));
  if (ind.rank() != x.rank() || x.rank() == 0)
    return ctx.error("indices must have the rank of data (" + std::to_string(x.rank()) +
                     "), got rank " + std::to_string(ind.rank()));
  COIL_TRY(int64_t axis, axisAttr(ctx, 0, x.rank()));
  for (int64_t d = 0; d < x.rank(); ++d)
    if (d != axis && ind.dim(d) > x.dim(d))
      return ctx.error("indices shape " + shapeStr(ind.shape()) + " exceeds data shape " +
                       shapeStr(x.shape()) + " in dim " + std::to_string(d));
  Tensor y = x.clone();
  size_t es = dtypeSize(x.dtype());
  auto *yb = static_cast<uint8_t *>(y.data());
  const auto *ub = static_cast<const uint8_t *>(upd.data());
  std::vector<int64_t> st = contiguousStrides(x.shape());
  std::vector<int64_t> dst;
  for (int64_t f = 0; f < ind.numel(); ++f) {
    unravelIndex(f, ind.shape(), dst);
    COIL_TRY(dst[size_t(axis)], normalizeIndex(ctx, indices[size_t(f)], x.dim(axis), "index"));
    combineElement(x.dtype(), yb + size_t(offsetOf(dst, st)) * es, ub + size_t(f) * es, red);
  }
  return std::vector<Tensor>{y};
}

// --- GatherND, ScatterND

/// Validates the last dim of GatherND/ScatterND indices and returns it.
Expected<int64_t> tupleLength(const KernelContext &ctx, const Tensor &ind, int64_t dataRank,
                              int64_t batchDims) {
  if (ind.rank() < 1) return ctx.error("indices must have rank >= 1");
  int64_t m = ind.dim(ind.rank() - 1);
  if (m < 1 || m > dataRank - batchDims)
    return ctx.error("the last dim of indices must be in [1, " +
                     std::to_string(dataRank - batchDims) + "], got " + std::to_string(m));
  return m;
}

Expected<std::vector<Tensor>> gatherNDKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  const Tensor &ind = ctx.input(1);
  COIL_TRY(std::vector<int64_t> indices, readIndexTensor(ctx, 1, "indices"));
  int64_t b = ctx.attrs().getInt("batch_dims", 0);
  int64_t r = x.rank(), q = ind.rank();
  if (b < 0 || b >= std::min(r, q))
    return ctx.error("batch_dims must be in [0, " + std::to_string(std::min(r, q) - 1) + "], got " +
                     std::to_string(b));
  for (int64_t d = 0; d < b; ++d)
    if (x.dim(d) != ind.dim(d))
      return ctx.error("the first batch_dims dims of data " + shapeStr(x.shape()) +
                       " and indices " + shapeStr(ind.shape()) + " must match");
  COIL_TRY(int64_t m, tupleLength(ctx, ind, r, b));
  Shape out(ind.shape().begin(), ind.shape().end() - 1);
  out.insert(out.end(), x.shape().begin() + b + m, x.shape().end());
  Tensor y(x.dtype(), out);
  std::vector<int64_t> st = contiguousStrides(x.shape());
  int64_t slice = 1;
  for (int64_t d = b + m; d < r; ++d) slice *= x.dim(d);
  int64_t batches = 1, tuples = 1;
  for (int64_t d = 0; d < b; ++d) batches *= x.dim(d);
  for (int64_t d = b; d < q - 1; ++d) tuples *= ind.dim(d);
  int64_t batchStride = b > 0 ? st[size_t(b - 1)] : 0;
  size_t es = dtypeSize(x.dtype());
  for (int64_t bi = 0; bi < batches; ++bi) {
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t tup = bi * tuples + t, off = bi * batchStride;
      for (int64_t j = 0; j < m; ++j) {
        COIL_TRY(int64_t k,
                 normalizeIndex(ctx, indices[size_t(tup * m + j)], x.dim(b + j), "index"));
        off += k * st[size_t(b + j)];
      }
      copyBytes(static_cast<uint8_t *>(y.data()) + size_t(tup * slice) * es,
                static_cast<const uint8_t *>(x.data()) + size_t(off) * es, size_t(slice) * es);
    }
  }
  return std::vector<Tensor>{y};
}

Expected<std::vector<Tensor>> scatterNDKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  const Tensor &ind = ctx.input(1);
  const Tensor &upd = ctx.input(2);
  COIL_TRY(std::vector<int64_t> indices, readIndexTensor(ctx, 1, "indices"));
  COIL_TRY(Reduction red, parseReduction(ctx));
  if (upd.dtype() != x.dtype())
    return ctx.error("updates must have the dtype of data (" + std::string(dtypeName(x.dtype())) +
                     "), got " + std::string(dtypeName(upd.dtype())));
  COIL_TRY(int64_t k, tupleLength(ctx, ind, x.rank(), 0));
  Shape want(ind.shape().begin(), ind.shape().end() - 1);
  want.insert(want.end(), x.shape().begin() + k, x.shape().end());
  if (upd.shape() != want)
    return ctx.error("updates must have shape " + shapeStr(want) + ", got " +
                     shapeStr(upd.shape()));
  Tensor y = x.clone();
  std::vector<int64_t> st = contiguousStrides(x.shape());
  int64_t slice = 1;
  for (int64_t d = k; d < x.rank(); ++d) slice *= x.dim(d);
  int64_t tuples = ind.numel() / k;
  size_t es = dtypeSize(x.dtype());
  auto *yb = static_cast<uint8_t *>(y.data());
  const auto *ub = static_cast<const uint8_t *>(upd.data());
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = 0;
    for (int64_t j = 0; j < k; ++j) {
      COIL_TRY(int64_t i, normalizeIndex(ctx, indices[size_t(t * k + j)], x.dim(j), "index"));
      off += i * st[size_t(j)];
    }
    for (int64_t e = 0; e < slice; ++e)
      combineElement(x.dtype(), yb + size_t(off + e) * es, ub + size_t(t * slice + e) * es, red);
  }
  return std::vector<Tensor>{y};
}

// --- Tile

Expected<std::vector<Tensor>> tileKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  COIL_TRY(std::vector<int64_t> reps, readIntTensor(ctx, 1, "repeats"));
  if (int64_t(reps.size()) != x.rank())
    return ctx.error("repeats must have " + std::to_string(x.rank()) +
                     " elements (the rank of input), got " + std::to_string(reps.size()));
  Shape out(size_t(x.rank()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (reps[i] < 0) return ctx.error("repeats must be non-negative, got " + intsStr(reps));
    if (__builtin_mul_overflow(x.shape()[i], reps[i], &out[i]))
      return ctx.error("dim " + std::to_string(i) + " of size " + std::to_string(x.shape()[i]) +
                       " repeated " + std::to_string(reps[i]) + " times overflows");
  }
  COIL_TRY_STATUS(checkOutputSize(ctx, out));
  Tensor y(x.dtype(), out);
  std::vector<int64_t> st = contiguousStrides(x.shape());
  forEachIndex(out, [&](const std::vector<int64_t> &idx, int64_t f) {
    int64_t off = 0;
    for (size_t i = 0; i < idx.size(); ++i) off += (idx[i] % x.shape()[i]) * st[i];
    copyElement(y, f, x, off);
  });
  return std::vector<Tensor>{y};
}

// --- Pad, CenterCropPad

/// Source coordinate of padded coordinate `c` (relative to a kept region of length `len`), or
/// -1 for the constant value.
int64_t padSource(PadMode mode, int64_t c, int64_t len) {
  if (c >= 0 && c < len) return c;
  if (mode == PadMode::Edge) return c < 0 ? 0 : len - 1;
  if (mode == PadMode::Wrap) return floorModInt(c, len);
  if (mode == PadMode::Reflect) {
    if (len == 1) return 0;
    int64_t p = 2 * (len - 1);
    c = floorModInt(c, p);
    return c < len ? c : p - c;
  }
  return -1;
}

Expected<std::vector<Tensor>> padKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  int64_t r = x.rank();
  COIL_TRY(PadMode mode, decodePadMode(ctx.node));
  std::vector<int64_t> pads;
  if (ctx.hasInput(1)) {
    COIL_TRY(pads, readIntTensor(ctx, 1, "pads"));
  } else {
    pads = ctx.attrs().getInts("pads");
  }
  std::vector<int64_t> axes;
  if (ctx.hasInput(3)) {
    COIL_TRY(std::vector<int64_t> listed, readIntTensor(ctx, 3, "axes"));
    COIL_TRY(axes, distinctAxes(listed, r));
  } else {
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  COIL_TRY(PadSpread<int64_t> spread, spreadPads(pads, axes, r));
  const int64_t padLimit = int64_t(1) << 61; // as the compiled kernel (CpuShape.cpp)
  for (int64_t p : pads)
    if (p < -padLimit || p > padLimit)
      return ctx.error("pads " + intsStr(pads) + " hold " + std::to_string(p) +
                       ", out of range (|pad| <= 2^61)");
  const std::vector<int64_t> &begin = spread.begin, &end = spread.end;
  // Negative pads crop first; the kept region is then padded by the mode.
  std::vector<int64_t> cropBegin(static_cast<size_t>(r)), len(static_cast<size_t>(r)),
      padBegin(static_cast<size_t>(r));
  Shape out(static_cast<size_t>(r));
  for (size_t d = 0; d < size_t(r); ++d) {
    cropBegin[d] = std::max<int64_t>(0, -begin[d]);
    len[d] = x.shape()[d] - cropBegin[d] - std::max<int64_t>(0, -end[d]);
    padBegin[d] = std::max<int64_t>(0, begin[d]);
    if (len[d] < 0)
      return ctx.error("pads " + intsStr(pads) + " crop more than dim " + std::to_string(d) +
                       " of shape " + shapeStr(x.shape()));
    if (__builtin_add_overflow(len[d], padBegin[d], &out[d]) ||
        __builtin_add_overflow(out[d], std::max<int64_t>(0, end[d]), &out[d]))
      return ctx.error("pads " + intsStr(pads) + " make dim " + std::to_string(d) + " of shape " +
                       shapeStr(x.shape()) + " overflow");
    if (mode != PadMode::Constant && len[d] == 0 && out[d] > 0)
      return ctx.error("mode '" + std::string(padModeName(mode)) + "' cannot pad dim " +
                       std::to_string(d) + ", which is empty");
  }
  Tensor fill(x.dtype(), {});
  if (ctx.hasInput(2) && ctx.input(2).numel() > 0) {
    const Tensor &cv = ctx.input(2);
    if (cv.dtype() != x.dtype())
      return ctx.error("constant_value must have the dtype of data (" +
                       std::string(dtypeName(x.dtype())) + "), got " +
                       std::string(dtypeName(cv.dtype())));
    copyElement(fill, 0, cv, 0);
  } else if (!ctx.hasInput(1) && ctx.attrs().has("value")) {
    fill.setDouble(0, ctx.attrs().getFloat("value", 0.0));
  }
  COIL_TRY_STATUS(checkOutputSize(ctx, out));
  Tensor y(x.dtype(), out);
  std::vector<int64_t> st = contiguousStrides(x.shape());
  forEachIndex(out, [&](const std::vector<int64_t> &idx, int64_t f) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      int64_t s = padSource(mode, idx[d] - padBegin[d], len[d]);
      if (s < 0) {
        copyElement(y, f, fill, 0);
        return;
      }
      off += (s + cropBegin[d]) * st[d];
    }
    copyElement(y, f, x, off);
  });
  return std::vector<Tensor>{y};
}

Expected<std::vector<Tensor>> centerCropPadKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  int64_t r = x.rank();
  COIL_TRY(std::vector<int64_t> shape, readIntTensor(ctx, 1, "shape"));
  COIL_TRY(std::vector<int64_t> axes, decodeCenterCropAxes(ctx.node, r));
  if (shape.size() != axes.size())
    return ctx.error("shape must have " + std::to_string(axes.size()) +
                     " elements (one per axis), got " + std::to_string(shape.size()));
  Shape out = x.shape();
  std::vector<int64_t> shift(size_t(r), 0); // input coordinate = output coordinate + shift
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (shape[i] < 0) return ctx.error("shape must be non-negative, got " + intsStr(shape));
    int64_t dim = x.dim(a);
    out[size_t(a)] = shape[i];
    shift[size_t(a)] = shape[i] < dim ? (dim - shape[i]) / 2 : -((shape[i] - dim) / 2);
  }
  COIL_TRY_STATUS(checkOutputSize(ctx, out));
  Tensor y(x.dtype(), out);
  std::vector<int64_t> st = contiguousStrides(x.shape());
  forEachIndex(out, [&](const std::vector<int64_t> &idx, int64_t f) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      int64_t s = idx[d] + shift[d];
      if (s < 0 || s >= x.shape()[d]) return; // zero
      off += s * st[d];
    }
    copyElement(y, f, x, off);
  });
  return std::vector<Tensor>{y};
}

// --- Split

Expected<std::vector<Tensor>> splitKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  if (x.rank() == 0) return ctx.error("input must have rank >= 1");
  COIL_TRY(int64_t axis, axisAttr(ctx, 0, x.rank()));
  int64_t n = int64_t(ctx.numOutputs()), dim = x.dim(axis);
  std::vector<int64_t> sizes;
  // An empty split input counts as absent.
  bool hasSplit = ctx.hasInput(1) && ctx.input(1).numel() > 0;
  if (hasSplit) {
    COIL_TRY(sizes, readIntTensor(ctx, 1, "split"));
  } else if (ctx.attrs().has("split")) {
    hasSplit = true;
    sizes = ctx.attrs().getInts("split");
  }
  if (hasSplit) {
    if (int64_t(sizes.size()) != n)
      return ctx.error("split must have " + std::to_string(n) + " elements (one per output), got " +
                       std::to_string(sizes.size()));
    int64_t sum = 0;
    for (int64_t s : sizes) {
      if (s < 0) return ctx.error("split sizes must be non-negative, got " + intsStr(sizes));
      sum += s;
    }
    if (sum != dim)
      return ctx.error("split sizes " + intsStr(sizes) + " must sum to the size of axis " +
                       std::to_string(axis) + " (" + std::to_string(dim) + ")");
  } else {
    int64_t parts = ctx.attrs().getInt("num_outputs", n);
    if (parts != n || n < 1)
      return ctx.error("num_outputs (" + std::to_string(parts) +
                       ") must equal the number of outputs (" + std::to_string(n) + ")");
    int64_t chunk = (dim + n - 1) / n;
    if (chunk * (n - 1) > dim)
      return ctx.error("axis " + std::to_string(axis) + " of size " + std::to_string(dim) +
                       " cannot be split into " + std::to_string(n) + " outputs");
    sizes.assign(size_t(n), chunk);
    sizes.back() = dim - chunk * (n - 1);
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  size_t es = dtypeSize(x.dtype());
  std::vector<Tensor> outs;
  int64_t start = 0;
  for (int64_t s : sizes) {
    Shape sh = x.shape();
    sh[size_t(axis)] = s;
    Tensor y(x.dtype(), sh);
    for (int64_t o = 0; o < outer; ++o)
      copyBytes(static_cast<uint8_t *>(y.data()) + size_t(o * s * inner) * es,
                static_cast<const uint8_t *>(x.data()) + size_t((o * dim + start) * inner) * es,
                size_t(s * inner) * es);
    start += s;
    outs.push_back(y);
  }
  return outs;
}

// --- Trilu, EyeLike

Expected<std::vector<Tensor>> triluKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  if (x.rank() < 2)
    return ctx.error("input must have rank >= 2, got rank " + std::to_string(x.rank()));
  int64_t k = 0;
  if (ctx.hasInput(1)) {
    COIL_TRY(k, readScalarInt(ctx, 1, "k"));
  }
  bool upper = ctx.attrs().getInt("upper", 1) != 0;
  int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
  Tensor y(x.dtype(), x.shape());
  for (int64_t f = 0; f < x.numel(); ++f) {
    int64_t j = f % cols, i = (f / cols) % rows;
    if (upper ? j - i >= k : j - i <= k) copyElement(y, f, x, f);
  }
  return std::vector<Tensor>{y};
}

Expected<std::vector<Tensor>> eyeLikeKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  if (x.rank() != 2)
    return ctx.error("input must have rank 2, got rank " + std::to_string(x.rank()));
  DType dt = x.dtype();
  if (auto a = ctx.attrs().maybeInt("dtype")) {
    auto d = dtypeFromOnnxCode(*a);
    if (!d) return ctx.error("dtype " + std::to_string(*a) + " is not supported");
    dt = *d;
  }
  int64_t k = ctx.attrs().getInt("k", 0);
  Tensor y(dt, x.shape());
  for (int64_t i = 0; i < x.dim(0); ++i)
    if (i + k >= 0 && i + k < x.dim(1)) y.setInt(i * x.dim(1) + i + k, 1);
  return std::vector<Tensor>{y};
}

// --- ReverseSequence, TensorScatter

Expected<std::vector<Tensor>> reverseSequenceKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  COIL_TRY(std::vector<int64_t> lens, readIndexTensor(ctx, 1, "sequence_lens"));
  if (x.rank() < 2)
    return ctx.error("input must have rank >= 2, got rank " + std::to_string(x.rank()));
  int64_t ba = ctx.attrs().getInt("batch_axis", 1), ta = ctx.attrs().getInt("time_axis", 0);
  if (!((ba == 0 && ta == 1) || (ba == 1 && ta == 0)))
    return ctx.error("batch_axis and time_axis must be 0 and 1 in some order, got " +
                     std::to_string(ba) + " and " + std::to_string(ta));
  if (int64_t(lens.size()) != x.dim(ba) || ctx.input(1).rank() != 1)
    return ctx.error("sequence_lens must have shape [" + std::to_string(x.dim(ba)) + "], got " +
                     shapeStr(ctx.input(1).shape()));
  for (int64_t l : lens)
    if (l < 0 || l > x.dim(ta))
      return ctx.error("sequence_lens must be in [0, " + std::to_string(x.dim(ta)) + "], got " +
                       intsStr(lens));
  Tensor y(x.dtype(), x.shape());
  std::vector<int64_t> st = contiguousStrides(x.shape());
  forEachIndex(x.shape(), [&](const std::vector<int64_t> &idx, int64_t f) {
    int64_t t = idx[size_t(ta)], l = lens[size_t(idx[size_t(ba)])];
    int64_t src = f + (t < l ? (l - 1 - 2 * t) * st[size_t(ta)] : 0);
    copyElement(y, f, x, src);
  });
  return std::vector<Tensor>{y};
}

Expected<std::vector<Tensor>> tensorScatterKernel(KernelContext &ctx) {
  const Tensor &cache = ctx.input(0);
  const Tensor &upd = ctx.input(1);
  int64_t r = cache.rank();
  if (r < 2) return ctx.error("past_cache must have rank >= 2, got rank " + std::to_string(r));
  COIL_TRY(int64_t axis, axisAttr(ctx, -2, r));
  if (axis == 0) return ctx.error("axis must not be the batch axis 0");
  std::string mode = ctx.attrs().getString("mode", "linear");
  if (mode != "linear" && mode != "circular")
    return ctx.error("mode must be 'linear' or 'circular', got '" + mode + "'");
  if (upd.dtype() != cache.dtype())
    return ctx.error("update must have the dtype of past_cache (" +
                     std::string(dtypeName(cache.dtype())) + "), got " +
                     std::string(dtypeName(upd.dtype())));
  bool shapeOk = upd.rank() == r;
  for (int64_t d = 0; shapeOk && d < r; ++d)
    shapeOk = d == axis ? upd.dim(d) <= cache.dim(d) : upd.dim(d) == cache.dim(d);
  if (!shapeOk)
    return ctx.error("update shape " + shapeStr(upd.shape()) + " must match past_cache shape " +
                     shapeStr(cache.shape()) + " except in axis " + std::to_string(axis) +
                     ", where it may be smaller");
  std::vector<int64_t> writeAt(size_t(cache.dim(0)), 0);
  if (ctx.hasInput(2)) {
    COIL_TRY(writeAt, readIndexTensor(ctx, 2, "write_indices"));
    if (int64_t(writeAt.size()) != cache.dim(0))
      return ctx.error("write_indices must have " + std::to_string(cache.dim(0)) +
                       " elements (the batch size), got " + std::to_string(writeAt.size()));
  }
  int64_t maxLen = cache.dim(axis);
  Tensor y = cache.clone();
  std::vector<int64_t> st = contiguousStrides(cache.shape());
  std::vector<int64_t> dst;
  for (int64_t f = 0; f < upd.numel(); ++f) {
    unravelIndex(f, upd.shape(), dst);
    int64_t pos = writeAt[size_t(dst[0])] + dst[size_t(axis)];
    if (mode == "circular" && maxLen > 0) pos = floorModInt(pos, maxLen);
    if (pos < 0 || pos >= maxLen)
      return ctx.error("write position " + std::to_string(pos) + " is out of range [0, " +
                       std::to_string(maxLen - 1) + "] (write_indices " + intsStr(writeAt) + ")");
    dst[size_t(axis)] = pos;
    copyElement(y, offsetOf(dst, st), upd, f);
  }
  return std::vector<Tensor>{y};
}

} // namespace

void registerDataMovementKernels(KernelRegistry &r) {
  r.add(OpKind::Transpose, transposeKernel);
  r.add(OpKind::GatherElements, gatherElementsKernel);
  r.add(kScatterElementsOps, scatterElementsKernel);
  r.add(OpKind::GatherND, gatherNDKernel);
  r.add(OpKind::ScatterND, scatterNDKernel);
  r.add(OpKind::Tile, tileKernel);
  r.add(OpKind::Pad, padKernel);
  r.add(OpKind::CenterCropPad, centerCropPadKernel);
  r.add(OpKind::Split, splitKernel);
  r.add(OpKind::Trilu, triluKernel);
  r.add(OpKind::EyeLike, eyeLikeKernel);
  r.add(OpKind::ReverseSequence, reverseSequenceKernel);
  r.add(OpKind::TensorScatter, tensorScatterKernel);
  registerDataMovementDynamicKernels(r);
}

} // namespace coil
