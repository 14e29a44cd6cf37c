// Reference kernels for the ShapeOps family of ops (see Ops.def). Data movement is done on
// raw bytes, so every kernel handles every dtype alike.
#include "interp/Kernel.h"
#include "ir/OpAttrs.h"
#include "ir/infer/ShapeOpsHelpers.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace coil {
namespace {

using Result = Expected<std::vector<Tensor>>;

Status checkSize(const KernelContext &ctx, const Shape &s) {
  return checkOutputSize(ctx, s);
}

const uint8_t *bytesOf(const Tensor &t) {
  return static_cast<const uint8_t *>(t.data());
}
uint8_t *bytesOf(Tensor &t) {
  return static_cast<uint8_t *>(t.data());
}

std::vector<SymInt> symsOf(const Shape &s) {
  return std::vector<SymInt>(s.begin(), s.end());
}

Expected<Shape> concrete(const std::vector<SymInt> &s) {
  Shape out;
  for (const SymInt &d : s) {
    if (!d.isConstant()) return Error::internal("kernel computed a symbolic dim " + d.str());
    out.push_back(d.constant());
  }
  return out;
}

/// Axes from the `axes` attribute (older opsets) or input `i` (newer); nullopt when absent.
std::optional<std::vector<int64_t>> axesOf(const KernelContext &ctx, size_t i) {
  if (auto a = ctx.attrs().maybeInts("axes")) return *a;
  if (ctx.hasInput(i)) return ctx.input(i).toInts();
  return std::nullopt;
}

Result shapeKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  int64_t r = x.rank();
  auto clampAxis = [r](int64_t a) {
    if (a < 0) a += r;
    return std::max<int64_t>(0, std::min(r, a));
  };
  int64_t s = clampAxis(ctx.attrs().getInt("start", 0)),
          e = clampAxis(ctx.attrs().getInt("end", r));
  std::vector<int64_t> dims;
  for (int64_t i = s; i < e; ++i) dims.push_back(x.dim(i));
  return std::vector<Tensor>{Tensor::fromInts(DType::I64, {int64_t(dims.size())}, dims)};
}

Result sizeKernel(KernelContext &ctx) {
  return std::vector<Tensor>{Tensor::fromInts(DType::I64, {}, {ctx.input(0).numel()})};
}

Result reshapeKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  const Tensor &shape = ctx.input(1);
  if (shape.rank() != 1)
    return ctx.error("shape must have rank 1, got rank " + std::to_string(shape.rank()));
  std::vector<SymInt> target;
  for (int64_t v : shape.toInts()) target.push_back(v);
  auto out = reshapeTarget(symsOf(x.shape()), target, ctx.attrs().getInt("allowzero", 0) != 0);
  if (!out.ok()) return out.error().withDefaultLoc(ctx.node.loc);
  COIL_TRY(Shape s, concrete(*out));
  for (int64_t d : s)
    if (d < 0)
      return ctx.error("cannot reshape " + shapeStr(x.shape()) + " to " + shapeStr(shape.toInts()));
  if (numelOf(s) != x.numel())
    return ctx.error("cannot reshape " + shapeStr(x.shape()) + " (" + std::to_string(x.numel()) +
                     " elements) to " + shapeStr(shape.toInts()));
  return std::vector<Tensor>{x.clone().reshaped(s)};
}

Result flattenKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  int64_t r = x.rank(), axis = ctx.attrs().getInt("axis", 1);
  if (axis < -r || axis > r)
    return ctx.error("axis " + std::to_string(axis) + " is out of range for rank " +
                     std::to_string(r));
  if (axis < 0) axis += r;
  int64_t a = 1, b = 1;
  for (int64_t i = 0; i < r; ++i) (i < axis ? a : b) *= x.dim(i);
  return std::vector<Tensor>{x.clone().reshaped({a, b})};
}

Result squeezeKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  std::vector<bool> drop(size_t(x.rank()), false);
  if (auto axes = axesOf(ctx, 1)) {
    auto norm = normalizeAxes(*axes, x.rank());
    if (!norm.ok()) return norm.error().withDefaultLoc(ctx.node.loc);
    for (int64_t a : *norm) {
      if (x.dim(a) != 1)
        return ctx.error("cannot squeeze axis " + std::to_string(a) + " of size " +
                         std::to_string(x.dim(a)) + " (shape " + shapeStr(x.shape()) + ")");
      drop[size_t(a)] = true;
    }
  } else {
    for (int64_t i = 0; i < x.rank(); ++i) drop[size_t(i)] = x.dim(i) == 1;
  }
  Shape s;
  for (int64_t i = 0; i < x.rank(); ++i)
    if (!drop[size_t(i)]) s.push_back(x.dim(i));
  return std::vector<Tensor>{x.clone().reshaped(s)};
}

Result unsqueezeKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  auto axes = axesOf(ctx, 1);
  if (!axes) return ctx.error("unsqueeze needs axes");
  int64_t outRank = x.rank() + int64_t(axes->size());
  auto norm = normalizeAxes(*axes, outRank);
  if (!norm.ok()) return norm.error().withDefaultLoc(ctx.node.loc);
  Shape s;
  size_t k = 0;
  for (int64_t i = 0; i < outRank; ++i)
    s.push_back(std::binary_search(norm->begin(), norm->end(), i) ? 1 : x.dim(int64_t(k++)));
  return std::vector<Tensor>{x.clone().reshaped(s)};
}

Result concatKernel(KernelContext &ctx) {
  if (ctx.numInputs() == 0) return ctx.error("concat needs at least one input");
  const Tensor &first = ctx.input(0);
  int64_t r = first.rank();
  if (r == 0) return ctx.error("concat inputs must have rank >= 1, got a scalar");
  auto axisOr = normalizeAxis(ctx.attrs().getInt("axis", 0), r);
  if (!axisOr.ok()) return axisOr.error().withDefaultLoc(ctx.node.loc);
  int64_t axis = *axisOr;
  Shape out = first.shape();
  out[size_t(axis)] = 0;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    const Tensor &t = ctx.input(i);
    if (t.dtype() != first.dtype() || t.rank() != r)
      return ctx.error("input " + std::to_string(i) + " (" + std::string(dtypeName(t.dtype())) +
                       shapeStr(t.shape()) + ") does not match input 0 (" +
                       std::string(dtypeName(first.dtype())) + shapeStr(first.shape()) + ")");
    for (int64_t d = 0; d < r; ++d)
      if (d != axis && t.dim(d) != first.dim(d))
        return ctx.error("input " + std::to_string(i) + " has shape " + shapeStr(t.shape()) +
                         ", incompatible with input 0 " + shapeStr(first.shape()));
    out[size_t(axis)] += t.dim(axis);
  }
  Tensor y(first.dtype(), out);
  size_t es = dtypeSize(first.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out[size_t(d)];
  for (int64_t d = axis + 1; d < r; ++d) inner *= out[size_t(d)];
  size_t rowOut = size_t(out[size_t(axis)] * inner) * es;
  size_t offset = 0;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    const Tensor &t = ctx.input(i);
    size_t row = size_t(t.dim(axis) * inner) * es;
    for (int64_t o = 0; o < outer; ++o)
      if (row)
        std::memcpy(bytesOf(y) + size_t(o) * rowOut + offset, bytesOf(t) + size_t(o) * row, row);
    offset += row;
  }
  return std::vector<Tensor>{y};
}

Result gatherKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0), &idx = ctx.input(1);
  if (x.rank() == 0) return ctx.error("gather data must have rank >= 1, got a scalar");
  auto axisOr = normalizeAxis(ctx.attrs().getInt("axis", 0), x.rank());
  if (!axisOr.ok()) return axisOr.error().withDefaultLoc(ctx.node.loc);
  int64_t axis = *axisOr;
  Shape out;
  for (int64_t i = 0; i < axis; ++i) out.push_back(x.dim(i));
  for (int64_t d : idx.shape()) out.push_back(d);
  for (int64_t i = axis + 1; i < x.rank(); ++i) out.push_back(x.dim(i));
  Tensor y(x.dtype(), out);
  size_t es = dtypeSize(x.dtype());
  int64_t outer = 1, inner = 1, len = x.dim(axis);
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  int64_t n = idx.numel();
  size_t chunk = size_t(inner) * es;
  for (int64_t k = 0; k < n; ++k) {
    int64_t j = idx.getInt(k);
    if (j < -len || j >= len)
      return ctx.error("index " + std::to_string(j) + " is out of range for axis " +
                       std::to_string(axis) + " of size " + std::to_string(len));
    if (j < 0) j += len;
    for (int64_t o = 0; o < outer; ++o)
      if (chunk)
        std::memcpy(bytesOf(y) + (size_t(o * n + k)) * chunk,
                    bytesOf(x) + size_t(o * len + j) * chunk, chunk);
  }
  return std::vector<Tensor>{y};
}

Result sliceKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  int64_t r = x.rank();
  if (r == 0) return ctx.error("slice data must have rank >= 1, got a scalar");
  std::vector<int64_t> starts = ctx.input(1).toInts(), ends = ctx.input(2).toInts();
  std::vector<int64_t> axes, steps;
  if (ctx.hasInput(3)) {
    axes = ctx.input(3).toInts();
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  }
  if (ctx.hasInput(4))
    steps = ctx.input(4).toInts();
  else
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return ctx.error("starts, ends, axes and steps must have the same length");
  auto norm = normalizeAxes(axes, r);
  if (!norm.ok()) return norm.error().withDefaultLoc(ctx.node.loc);
  std::vector<int64_t> first(size_t(r), 0), step(size_t(r), 1);
  Shape out = x.shape();
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
    if (steps[i] == 0) return ctx.error("slice step must not be 0");
    if (steps[i] < -kMaxSliceStep || steps[i] > kMaxSliceStep)
      return ctx.error("slice step " + std::to_string(steps[i]) + " of axis " +
                       std::to_string(axes[i]) + " is out of range (|step| <= 2^62)");
    SliceRange sr = sliceAxis(x.dim(a), starts[i], ends[i], steps[i]);
    first[size_t(a)] = sr.start.constant();
    out[size_t(a)] = sr.length.constant();
    step[size_t(a)] = steps[i];
  }
  Tensor y(x.dtype(), out);
  size_t es = dtypeSize(x.dtype());
  std::vector<int64_t> inStrides = contiguousStrides(x.shape()), idx;
  for (int64_t f = 0; f < y.numel(); ++f) {
    unravelIndex(f, out, idx);
    int64_t src = 0;
    for (int64_t d = 0; d < r; ++d)
      src += (first[size_t(d)] + idx[size_t(d)] * step[size_t(d)]) * inStrides[size_t(d)];
    std::memcpy(bytesOf(y) + size_t(f) * es, bytesOf(x) + size_t(src) * es, es);
  }
  return std::vector<Tensor>{y};
}

Result expandKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  Shape target = ctx.input(1).toInts();
  for (int64_t d : target)
    if (d < 0) return ctx.error("expand shape " + shapeStr(target) + " has a negative dim");
  COIL_TRY(Shape out, broadcastConcrete(x.shape(), target));
  COIL_TRY_STATUS(checkSize(ctx, out));
  Tensor y(x.dtype(), out);
  size_t es = dtypeSize(x.dtype());
  std::vector<int64_t> map = broadcastIndex(x.shape(), out);
  for (size_t f = 0; f < map.size(); ++f)
    std::memcpy(bytesOf(y) + f * es, bytesOf(x) + size_t(map[f]) * es, es);
  return std::vector<Tensor>{y};
}

Result constantOfShapeKernel(KernelContext &ctx) {
  Shape s = ctx.input(0).toInts();
  for (int64_t d : s)
    if (d < 0) return ctx.error("shape " + shapeStr(s) + " has a negative dim");
  COIL_TRY_STATUS(checkSize(ctx, s));
  Tensor value = Tensor::scalar(DType::F32, 0);
  if (auto v = ctx.attrs().getTensor("value")) {
    if (v->numel() != 1)
      return ctx.error("value must have one element, got " + std::to_string(v->numel()));
    value = *v;
  }
  Tensor y(value.dtype(), s);
  size_t es = dtypeSize(value.dtype());
  for (int64_t i = 0; i < y.numel(); ++i)
    std::memcpy(bytesOf(y) + size_t(i) * es, value.data(), es);
  return std::vector<Tensor>{y};
}

Result rangeKernel(KernelContext &ctx) {
  const Tensor &s = ctx.input(0), &l = ctx.input(1), &d = ctx.input(2);
  DType dt = s.dtype();
  if (s.numel() != 1 || l.numel() != 1 || d.numel() != 1)
    return ctx.error("range inputs must be scalars");
  if (isFloat(dt)) {
    double a = s.getDouble(0), b = l.getDouble(0), c = d.getDouble(0);
    if (c == 0) return ctx.error("range delta must not be 0");
    double len = std::ceil((b - a) / c);
    if (!(len < double(kMaxInterpElements)))
      return ctx.error("range of " + std::to_string(len) + " elements is too large");
    int64_t n = std::max<int64_t>(0, int64_t(len));
    Tensor y(dt, {n});
    // Accumulate in the tensor's type, as the ONNX reference does (value_i = start + i*delta).
    for (int64_t i = 0; i < n; ++i)
      y.setDouble(i, dt == DType::F32 ? double(float(a) + float(i) * float(c)) : a + double(i) * c);
    return std::vector<Tensor>{y};
  }
  int64_t a = s.getInt(0), b = l.getInt(0), c = d.getInt(0);
  if (c == 0) return ctx.error("range delta must not be 0");
  // In 128 bits: limit - start may overflow int64.
  __int128 span = __int128(b) - a, step = c;
  __int128 len = span / step + (span % step != 0 && ((span < 0) == (step < 0)) ? 1 : 0);
  if (len > kMaxInterpElements)
    return ctx.error("range of " + std::to_string(int64_t(len)) + " elements is too large");
  int64_t n = std::max<int64_t>(0, int64_t(len));
  Tensor y(dt, {n});
  for (int64_t i = 0; i < n; ++i) y.setInt(i, int64_t(__int128(a) + __int128(i) * c));
  return std::vector<Tensor>{y};
}

Result constantKernel(KernelContext &ctx) {
  COIL_TRY(Tensor t, decodeConstant(ctx.node));
  return std::vector<Tensor>{t.clone()};
}

} // namespace

void registerShapeOpsKernels(KernelRegistry &r) {
  r.add(OpKind::Shape, shapeKernel);
  r.add(OpKind::Size, sizeKernel);
  r.add(OpKind::Reshape, reshapeKernel);
  r.add(OpKind::Flatten, flattenKernel);
  r.add(OpKind::Squeeze, squeezeKernel);
  r.add(OpKind::Unsqueeze, unsqueezeKernel);
  r.add(OpKind::Concat, concatKernel);
  r.add(OpKind::Gather, gatherKernel);
  r.add(OpKind::Slice, sliceKernel);
  r.add(OpKind::Expand, expandKernel);
  r.add(OpKind::ConstantOfShape, constantOfShapeKernel);
  r.add(OpKind::Range, rangeKernel);
  r.add(OpKind::Constant, constantKernel);
}

} // namespace coil
