// Reference kernels of the DataMovement ops whose output size depends on the data (NonZero,
// Compress, Unique, NonMaxSuppression) or on an input's value (OneHot, the window
// generators).
#include "interp/kernels/DataMovementUtil.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace coil {

void registerDataMovementDynamicKernels(KernelRegistry &r);

namespace {

using namespace dm;

bool elementIsNonZero(const Tensor &t, int64_t i) {
  if (isFloat(t.dtype())) return t.getDouble(i) != 0.0; // -0.0 is zero, NaN is not
  size_t es = dtypeSize(t.dtype());
  const auto *p = static_cast<const uint8_t *>(t.data()) + size_t(i) * es;
  return std::any_of(p, p + es, [](uint8_t b) { return b != 0; });
}

// --- NonZero, Compress

Expected<std::vector<Tensor>> nonZeroKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  std::vector<int64_t> hits;
  for (int64_t f = 0; f < x.numel(); ++f)
    if (elementIsNonZero(x, f)) hits.push_back(f);
  int64_t n = int64_t(hits.size()), r = x.rank();
  Tensor y(DType::I64, {r, n});
  std::vector<int64_t> idx;
  for (int64_t k = 0; k < n; ++k) {
    unravelIndex(hits[size_t(k)], x.shape(), idx);
    for (int64_t d = 0; d < r; ++d) y.dataAs<int64_t>()[d * n + k] = idx[size_t(d)];
  }
  return std::vector<Tensor>{y};
}

Expected<std::vector<Tensor>> compressKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  const Tensor &cond = ctx.input(1);
  if (cond.rank() != 1)
    return ctx.error("condition must have rank 1, got rank " + std::to_string(cond.rank()));
  Shape shape = x.shape();
  int64_t axis = 0;
  if (auto a = ctx.attrs().maybeInt("axis")) {
    if (*a < -x.rank() || *a >= x.rank())
      return ctx.error("axis " + std::to_string(*a) + " is out of range for rank " +
                       std::to_string(x.rank()));
    axis = *a < 0 ? *a + x.rank() : *a;
  } else {
    shape = {x.numel()};
  }
  int64_t dim = shape[size_t(axis)];
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < cond.numel(); ++i) {
    if (!elementIsNonZero(cond, i)) continue;
    if (i >= dim)
      return ctx.error("condition selects index " + std::to_string(i) + " of axis " +
                       std::to_string(axis) + ", which has size " + std::to_string(dim));
    keep.push_back(i);
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[size_t(d)];
  for (size_t d = size_t(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  Shape outShape = shape;
  outShape[size_t(axis)] = int64_t(keep.size());
  Tensor y(x.dtype(), outShape);
  size_t es = dtypeSize(x.dtype());
  int64_t k = int64_t(keep.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < k; ++j)
      copyBytes(static_cast<uint8_t *>(y.data()) + size_t((o * k + j) * inner) * es,
                static_cast<const uint8_t *>(x.data()) +
                    size_t((o * dim + keep[size_t(j)]) * inner) * es,
                size_t(inner) * es);
  return std::vector<Tensor>{y};
}

// --- Unique

Expected<std::vector<Tensor>> uniqueKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  bool sorted = ctx.attrs().getInt("sorted", 1) != 0;
  Shape shape = {x.numel()};
  int64_t axis = 0;
  if (auto a = ctx.attrs().maybeInt("axis")) {
    if (*a < -x.rank() || *a >= x.rank())
      return ctx.error("axis " + std::to_string(*a) + " is out of range for rank " +
                       std::to_string(x.rank()));
    axis = *a < 0 ? *a + x.rank() : *a;
    shape = x.shape();
  }
  // Slice i is shape[axis] == n slices of `outer` runs of `inner` elements.
  int64_t n = shape[size_t(axis)], outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[size_t(d)];
  for (size_t d = size_t(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  size_t es = dtypeSize(x.dtype());
  const auto *xb = static_cast<const uint8_t *>(x.data());
  auto compareSlices = [&](int64_t i, int64_t j) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t e = 0; e < inner; ++e) {
        int c = compareElements(x.dtype(), xb + size_t((o * n + i) * inner + e) * es,
                                xb + size_t((o * n + j) * inner + e) * es);
        if (c) return c;
      }
    return 0;
  };
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return compareSlices(a, b) < 0; });
  // Groups of equal slices in sorted order: first occurrence, count; inverse per slice.
  std::vector<int64_t> first, counts, inverse(static_cast<size_t>(n));
  for (size_t k = 0; k < order.size(); ++k) {
    if (k == 0 || compareSlices(order[k - 1], order[k]) != 0) {
      first.push_back(order[k]);
      counts.push_back(0);
    }
    ++counts.back();
    inverse[size_t(order[k])] = int64_t(first.size()) - 1;
  }
  int64_t u = int64_t(first.size());
  std::vector<int64_t> groupOrder(static_cast<size_t>(u)); // output position -> group
  std::iota(groupOrder.begin(), groupOrder.end(), 0);
  if (!sorted)
    std::sort(groupOrder.begin(), groupOrder.end(),
              [&](int64_t a, int64_t b) { return first[size_t(a)] < first[size_t(b)]; });
  std::vector<int64_t> position(static_cast<size_t>(u));
  for (int64_t p = 0; p < u; ++p) position[size_t(groupOrder[size_t(p)])] = p;

  Shape yShape = shape;
  yShape[size_t(axis)] = u;
  Tensor y(x.dtype(), yShape), indices(DType::I64, {u}), inv(DType::I64, {n}), cnt(DType::I64, {u});
  for (int64_t p = 0; p < u; ++p) {
    int64_t g = groupOrder[size_t(p)], src = first[size_t(g)];
    indices.dataAs<int64_t>()[p] = src;
    cnt.dataAs<int64_t>()[p] = counts[size_t(g)];
    for (int64_t o = 0; o < outer; ++o)
      copyBytes(static_cast<uint8_t *>(y.data()) + size_t((o * u + p) * inner) * es,
                xb + size_t((o * n + src) * inner) * es, size_t(inner) * es);
  }
  for (int64_t i = 0; i < n; ++i) inv.dataAs<int64_t>()[i] = position[size_t(inverse[size_t(i)])];
  std::vector<Tensor> outs{y, indices, inv, cnt};
  outs.resize(std::min<size_t>(outs.size(), std::max<size_t>(ctx.numOutputs(), 1)));
  return outs;
}

// --- OneHot

Expected<std::vector<Tensor>> oneHotKernel(KernelContext &ctx) {
  const Tensor &ind = ctx.input(0);
  const Tensor &depthT = ctx.input(1);
  const Tensor &values = ctx.input(2);
  if (depthT.numel() != 1 || depthT.rank() > 1)
    return ctx.error("depth must be a scalar, got shape " + shapeStr(depthT.shape()));
  if (values.numel() != 2 || values.rank() != 1)
    return ctx.error("values must have shape [2], got " + shapeStr(values.shape()));
  int64_t depth =
      isFloat(depthT.dtype()) ? int64_t(std::ceil(depthT.getDouble(0))) : depthT.getInt(0);
  if (depth < 1) return ctx.error("depth must be positive, got " + std::to_string(depth));
  int64_t r = ind.rank();
  int64_t axis = ctx.attrs().getInt("axis", -1);
  if (axis < -r - 1 || axis > r)
    return ctx.error("axis " + std::to_string(axis) + " is out of range for output rank " +
                     std::to_string(r + 1));
  if (axis < 0) axis += r + 1;
  Shape out = ind.shape();
  out.insert(out.begin() + axis, depth);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= ind.dim(d);
  for (int64_t d = axis; d < r; ++d) inner *= ind.dim(d);
  Tensor y(values.dtype(), out);
  bool floatIdx = isFloat(ind.dtype());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t e = 0; e < inner; ++e) {
      int64_t src = o * inner + e, hot = -1;
      if (floatIdx) {
        double v = ind.getDouble(src);
        if (v < 0) v += double(depth);
        if (v >= 0 && v < double(depth) && v == std::floor(v)) hot = int64_t(v);
      } else {
        int64_t v = ind.getInt(src);
        if (v < 0) v += depth;
        if (v >= 0 && v < depth) hot = v;
      }
      for (int64_t j = 0; j < depth; ++j)
        copyElement(y, (o * depth + j) * inner + e, values, j == hot ? 1 : 0);
    }
  return std::vector<Tensor>{y};
}

// --- NonMaxSuppression

struct Box {
  double xmin, ymin, xmax, ymax;
};

Box readBox(const Tensor &boxes, int64_t base, bool centerPoint) {
  double a = boxes.getDouble(base), b = boxes.getDouble(base + 1), c = boxes.getDouble(base + 2),
         d = boxes.getDouble(base + 3);
  if (centerPoint) // [x_center, y_center, width, height]
    return {a - c / 2, b - d / 2, a + c / 2, b + d / 2};
  // [y1, x1, y2, x2], corners in any order
  return {std::min(b, d), std::min(a, c), std::max(b, d), std::max(a, c)};
}

bool suppresses(const Box &p, const Box &q, double iouThreshold) {
  double ix = std::min(p.xmax, q.xmax) - std::max(p.xmin, q.xmin);
  double iy = std::min(p.ymax, q.ymax) - std::max(p.ymin, q.ymin);
  if (ix <= 0 || iy <= 0) return false;
  double inter = ix * iy;
  double a1 = (p.xmax - p.xmin) * (p.ymax - p.ymin), a2 = (q.xmax - q.xmin) * (q.ymax - q.ymin);
  double uni = a1 + a2 - inter;
  if (a1 <= 0 || a2 <= 0 || uni <= 0) return false;
  return inter / uni > iouThreshold;
}

Expected<std::vector<Tensor>> nonMaxSuppressionKernel(KernelContext &ctx) {
  const Tensor &boxes = ctx.input(0);
  const Tensor &scores = ctx.input(1);
  if (boxes.rank() != 3 || boxes.dim(2) != 4)
    return ctx.error("boxes must have shape [batches, boxes, 4], got " + shapeStr(boxes.shape()));
  if (scores.rank() != 3 || scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1))
    return ctx.error("scores must have shape [" + std::to_string(boxes.dim(0)) + ", classes, " +
                     std::to_string(boxes.dim(1)) + "], got " + shapeStr(scores.shape()));
  auto present = [&](size_t i) { return ctx.hasInput(i) && ctx.input(i).numel() > 0; };
  int64_t maxPerClass = present(2) ? std::max<int64_t>(0, ctx.input(2).getInt(0)) : 0;
  double iouThreshold = present(3) ? ctx.input(3).getDouble(0) : 0.0;
  bool filter = present(4);
  double scoreThreshold = filter ? ctx.input(4).getDouble(0) : 0.0;
  bool centerPoint = ctx.attrs().getInt("center_point_box", 0) != 0;
  int64_t nb = boxes.dim(0), nc = scores.dim(1), n = boxes.dim(1);
  std::vector<int64_t> selected; // triples
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t c = 0; c < nc; ++c) {
      int64_t sbase = (b * nc + c) * n;
      std::vector<int64_t> cand;
      for (int64_t i = 0; i < n; ++i)
        if (!filter || scores.getDouble(sbase + i) > scoreThreshold) cand.push_back(i);
      // Highest score first; equal scores keep the lower box index first.
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t i, int64_t j) {
        return scores.getDouble(sbase + i) > scores.getDouble(sbase + j);
      });
      std::vector<Box> kept;
      for (int64_t i : cand) {
        if (int64_t(kept.size()) >= maxPerClass) break;
        Box bx = readBox(boxes, (b * n + i) * 4, centerPoint);
        bool keep = std::none_of(kept.begin(), kept.end(),
                                 [&](const Box &k) { return suppresses(bx, k, iouThreshold); });
        if (keep) {
          kept.push_back(bx);
          selected.insert(selected.end(), {b, c, i});
        }
      }
    }
  int64_t m = int64_t(selected.size()) / 3;
  return std::vector<Tensor>{Tensor::fromInts(DType::I64, {m, 3}, selected)};
}

// --- Windows

enum class Window { Blackman, Hamming, Hann };

template <Window W> Expected<std::vector<Tensor>> windowKernel(KernelContext &ctx) {
  COIL_TRY(int64_t size, readScalarInt(ctx, 0, "size"));
  if (size < 0) return ctx.error("size must be non-negative, got " + std::to_string(size));
  int64_t dt = ctx.attrs().getInt("output_datatype", 1);
  auto dtype = dtypeFromOnnxCode(dt);
  if (!dtype) return ctx.error("output_datatype " + std::to_string(dt) + " is not supported");
  bool periodic = ctx.attrs().getInt("periodic", 1) != 0;
  double len = double(periodic ? size : size - 1);
  const double pi = 3.14159265358979323846;
  Tensor y(*dtype, {size});
  for (int64_t i = 0; i < size; ++i) {
    double t = double(i) / len, v = 0;
    if constexpr (W == Window::Blackman)
      v = 0.42 - 0.5 * std::cos(2 * pi * t) + 0.08 * std::cos(4 * pi * t);
    else if constexpr (W == Window::Hamming)
      v = 25.0 / 46.0 - (21.0 / 46.0) * std::cos(2 * pi * t);
    else
      v = std::pow(std::sin(pi * t), 2);
    y.setDouble(i, v);
  }
  return std::vector<Tensor>{y};
}

} // namespace

void registerDataMovementDynamicKernels(KernelRegistry &r) {
  r.add(OpKind::NonZero, nonZeroKernel);
  r.add(OpKind::Compress, compressKernel);
  r.add(OpKind::Unique, uniqueKernel);
  r.add(OpKind::OneHot, oneHotKernel);
  r.add(OpKind::NonMaxSuppression, nonMaxSuppressionKernel);
  r.add(OpKind::BlackmanWindow, windowKernel<Window::Blackman>);
  r.add(OpKind::HammingWindow, windowKernel<Window::Hamming>);
  r.add(OpKind::HannWindow, windowKernel<Window::Hann>);
}

} // namespace coil
