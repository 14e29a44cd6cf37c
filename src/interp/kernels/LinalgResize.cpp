// Reference kernels of the image rearrangements: Resize, DepthToSpace, SpaceToDepth.
//
// Resize is separable: each resized axis is interpolated in turn (in double), each output
// coordinate mapped back to an input coordinate by the coordinate transformation mode and
// then read through a small list of (input index, weight) taps built by the mode.
#include "interp/kernels/LinalgKernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace coil::linalg {
namespace {

struct Tap {
  int64_t index;
  double weight;
};

/// Taps of one output coordinate; `extrapolate` marks tf_crop_and_resize points outside.
struct Sample {
  std::vector<Tap> taps;
  bool extrapolate = false;
};

using ResizeParams = ResizeAttrs;

double sourceCoord(const ResizeParams &p, int64_t j, double scale, int64_t in, int64_t outInt,
                   double roiStart, double roiEnd, bool &extrapolate) {
  double outW = scale * double(in), x = double(j);
  const std::string &m = p.coordMode;
  if (m == "align_corners") return outW == 1 ? 0.0 : x * double(in - 1) / (outW - 1);
  if (m == "asymmetric") return x / scale;
  if (m == "tf_crop_and_resize") {
    double r = outW == 1 ? (roiEnd - roiStart) * double(in - 1) / 2
                         : x * (roiEnd - roiStart) * double(in - 1) / (outW - 1);
    r += roiStart * double(in - 1);
    extrapolate = r < 0 || r > double(in - 1);
    return r;
  }
  if (m == "pytorch_half_pixel") return outW == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  if (m == "half_pixel_symmetric") {
    double adjustment = double(outInt) / outW, center = double(in) / 2;
    return center * (1 - adjustment) + (x + 0.5) / scale - 0.5;
  }
  return (x + 0.5) / scale - 0.5; // half_pixel
}

double cubicKernel(double x, double a) {
  x = std::fabs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

Sample makeSample(const ResizeParams &p, double x, double scale, int64_t in) {
  Sample s;
  auto clampIdx = [&](int64_t i) { return std::clamp<int64_t>(i, 0, in - 1); };
  double fl = std::floor(x);
  if (p.mode == "nearest") {
    int64_t f = int64_t(fl), idx;
    double r = x - fl;
    if (r == 0)
      idx = f;
    else if (p.nearestMode == "round_prefer_ceil")
      idx = r < 0.5 ? f : f + 1;
    else if (p.nearestMode == "floor")
      idx = f;
    else if (p.nearestMode == "ceil")
      idx = f + 1;
    else // round_prefer_floor
      idx = r <= 0.5 ? f : f + 1;
    s.taps.push_back({clampIdx(idx), 1.0});
    return s;
  }
  // Taps base - n/2 + 1 .. base + n/2, with ratio = x - base in (0, 1] (the ONNX convention).
  int64_t base = x == fl ? int64_t(fl) - 1 : int64_t(fl);
  double ratio = x - double(base);
  std::vector<double> coeffs;
  if (p.mode == "linear") {
    if (p.antialias) {
      double sc = std::min(scale, 1.0);
      int64_t start = int64_t(std::floor(-1 / sc)) + 1, n = 2 - 2 * start;
      for (int64_t i = start; i < start + n; ++i)
        coeffs.push_back(std::clamp(1 - std::fabs((double(i) - ratio) * sc), 0.0, 1.0));
    } else {
      coeffs = {1 - ratio, ratio};
    }
  } else { // cubic
    if (p.antialias) {
      double sc = std::min(scale, 1.0);
      int64_t start = int64_t(std::floor(-2 / sc)) + 1, end = 2 - start;
      for (int64_t i = start; i < end; ++i)
        coeffs.push_back(cubicKernel(sc * (double(i) - ratio), p.cubicA));
    } else {
      for (double d : {1 + ratio, ratio, 1 - ratio, 2 - ratio})
        coeffs.push_back(cubicKernel(d, p.cubicA));
    }
  }
  if (p.antialias) {
    double sum = 0;
    for (double c : coeffs) sum += c;
    for (double &c : coeffs) c /= sum;
  }
  int64_t n = int64_t(coeffs.size()), first = base - n / 2 + 1;
  if (p.excludeOutside) {
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      int64_t idx = first + j;
      if (idx < 0 || idx >= in) coeffs[size_t(j)] = 0;
      sum += coeffs[size_t(j)];
    }
    if (sum != 0)
      for (double &c : coeffs) c /= sum;
  }
  for (int64_t j = 0; j < n; ++j)
    if (coeffs[size_t(j)] != 0) s.taps.push_back({clampIdx(first + j), coeffs[size_t(j)]});
  return s;
}

Expected<std::vector<Tensor>> resizeKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  int64_t r = x.rank();
  COIL_TRY(ResizeAttrs p, decodeResize(ctx.node, r));
  const std::string &policy = p.policy;
  const std::vector<int64_t> &axes = p.axes;
  size_t na = axes.size();
  auto present = [&](size_t i) { return ctx.hasInput(i) && ctx.input(i).numel() > 0; };
  std::vector<double> scale(size_t(r), 1.0);
  Shape outShape = x.shape();
  if (present(3)) {
    auto sizes = ctx.input(3).toInts();
    if (sizes.size() != na)
      return ctx.error("sizes must have " + std::to_string(na) + " values, got " +
                       std::to_string(sizes.size()));
    for (size_t i = 0; i < na; ++i) {
      if (sizes[i] < 0)
        return ctx.error("sizes must be non-negative, got " + std::to_string(sizes[i]));
      scale[size_t(axes[i])] = double(sizes[i]) / double(x.dim(axes[i]));
      outShape[size_t(axes[i])] = sizes[i];
    }
    if (policy != "stretch") {
      double s = policy == "not_larger" ? 1e300 : -1e300;
      for (int64_t a : axes)
        s = policy == "not_larger" ? std::min(s, scale[size_t(a)]) : std::max(s, scale[size_t(a)]);
      for (int64_t a : axes) {
        scale[size_t(a)] = s;
        outShape[size_t(a)] = int64_t(s * double(x.dim(a)) + 0.5);
      }
    }
  } else if (present(2)) {
    auto sc = ctx.input(2).toDoubles();
    if (sc.size() != na)
      return ctx.error("scales must have " + std::to_string(na) + " values, got " +
                       std::to_string(sc.size()));
    for (size_t i = 0; i < na; ++i) {
      if (!(sc[i] > 0) || !std::isfinite(sc[i]) || sc[i] * double(x.dim(axes[i])) > 9.0e15)
        return ctx.error("scales must be positive, got " + std::to_string(sc[i]));
      scale[size_t(axes[i])] = sc[i];
      outShape[size_t(axes[i])] = int64_t(std::floor(sc[i] * double(x.dim(axes[i]))));
    }
  } else {
    return ctx.error("exactly one of scales and sizes must be given");
  }
  std::vector<double> roiStart(size_t(r), 0.0), roiEnd(size_t(r), 1.0);
  bool hasRoi = p.coordMode == "tf_crop_and_resize" && present(1);
  if (hasRoi) {
    auto roi = ctx.input(1).toDoubles();
    if (roi.size() != 2 * na)
      return ctx.error("roi must have " + std::to_string(2 * na) + " values, got " +
                       std::to_string(roi.size()));
    for (size_t i = 0; i < na; ++i) {
      roiStart[size_t(axes[i])] = roi[i];
      roiEnd[size_t(axes[i])] = roi[na + i];
    }
  }
  std::vector<double> cur = x.toDoubles();
  Shape curShape = x.shape();
  for (int64_t a : axes) {
    size_t ax = size_t(a);
    int64_t in = curShape[ax], out = outShape[ax];
    bool identity =
        std::fabs(scale[ax] - 1.0) <= 1e-9 && out == in &&
        (!hasRoi || (std::fabs(roiStart[ax]) <= 1e-9 && std::fabs(roiEnd[ax] - 1) <= 1e-9));
    if (identity) continue;
    if (in == 0 && out > 0)
      return ctx.error("cannot resize an empty axis to size " + std::to_string(out));
    std::vector<Sample> samples(static_cast<size_t>(out));
    for (int64_t j = 0; j < out; ++j) {
      bool ext = false;
      double xo = sourceCoord(p, j, scale[ax], in, out, roiStart[ax], roiEnd[ax], ext);
      samples[size_t(j)] = ext ? Sample{{}, true} : makeSample(p, xo, scale[ax], in);
    }
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < ax; ++d) outer *= curShape[d];
    for (size_t d = ax + 1; d < curShape.size(); ++d) inner *= curShape[d];
    std::vector<double> next(size_t(outer * out * inner));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < out; ++j) {
        const Sample &s = samples[size_t(j)];
        double *dst = next.data() + (o * out + j) * inner;
        if (s.extrapolate) {
          std::fill(dst, dst + inner, p.extrapolation);
          continue;
        }
        for (int64_t i = 0; i < inner; ++i) {
          double acc = 0;
          for (const Tap &t : s.taps) acc += t.weight * cur[size_t((o * in + t.index) * inner + i)];
          dst[i] = acc;
        }
      }
    cur = std::move(next);
    curShape[ax] = out;
  }
  Tensor res(x.dtype(), outShape);
  for (size_t i = 0; i < cur.size(); ++i) {
    if (isFloat(x.dtype()))
      res.setDouble(int64_t(i), cur[i]);
    else // integer tensors: round and saturate as a cast from the float result
      res.setInt(int64_t(i), saturateRound(cur[i], x.dtype()));
  }
  return std::vector<Tensor>{res};
}

/// Copies element `from` of `src` to element `to` of `dst` (same dtype), byte for byte.
void copyElem(Tensor &dst, int64_t to, const Tensor &src, int64_t from) {
  size_t es = dtypeSize(src.dtype());
  std::memcpy(static_cast<uint8_t *>(dst.data()) + size_t(to) * es,
              static_cast<const uint8_t *>(src.data()) + size_t(from) * es, es);
}

Expected<std::vector<Tensor>> depthToSpaceKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  COIL_TRY(BlockAttrs ba, decodeBlock(ctx.node));
  int64_t b = ba.blocksize;
  bool crd = ba.crd;
  if (x.rank() != 4 || b < 1 || x.dim(1) % (b * b) != 0)
    return ctx.error("depth_to_space needs a rank-4 input whose channels divide by blocksize^2");
  int64_t n = x.dim(0), c = x.dim(1) / (b * b), h = x.dim(2), w = x.dim(3);
  Tensor out(x.dtype(), {n, c, h * b, w * b});
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t y = 0; y < h * b; ++y)
        for (int64_t z = 0; z < w * b; ++z) {
          int64_t i = y % b, j = z % b;
          int64_t src = crd ? ic * b * b + i * b + j : (i * b + j) * c + ic;
          copyElem(out, ((in * c + ic) * h * b + y) * w * b + z, x,
                   ((in * x.dim(1) + src) * h + y / b) * w + z / b);
        }
  return std::vector<Tensor>{out};
}

Expected<std::vector<Tensor>> spaceToDepthKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  COIL_TRY(BlockAttrs ba, decodeBlock(ctx.node));
  int64_t b = ba.blocksize;
  bool crd = ba.crd;
  if (x.rank() != 4 || b < 1 || x.dim(2) % b != 0 || x.dim(3) % b != 0)
    return ctx.error("space_to_depth needs a rank-4 input whose spatial dims divide by "
                     "blocksize");
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2) / b, w = x.dim(3) / b, oc = c * b * b;
  Tensor out(x.dtype(), {n, oc, h, w});
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ch = 0; ch < oc; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t z = 0; z < w; ++z) {
          int64_t blk = crd ? ch % (b * b) : ch / c, ic = crd ? ch / (b * b) : ch % c;
          int64_t i = blk / b, j = blk % b;
          copyElem(out, ((in * oc + ch) * h + y) * w + z, x,
                   ((in * c + ic) * x.dim(2) + y * b + i) * x.dim(3) + z * b + j);
        }
  return std::vector<Tensor>{out};
}

} // namespace

void registerLinalgImageKernels(KernelRegistry &r) {
  r.add(OpKind::Resize, resizeKernel);
  r.add(OpKind::DepthToSpace, depthToSpaceKernel);
  r.add(OpKind::SpaceToDepth, spaceToDepthKernel);
}

} // namespace coil::linalg
