// Lowerings of the sampling ops: Resize (one Pointwise node per resized axis, reading its taps
// through indirect indices with weights computed in the body), GridSample, AffineGrid, RoiAlign
// and MaxRoiPool. Semantics: interp/kernels/LinalgResize.cpp and LinalgSample.cpp.
#include "kernels/cpu/CpuKernels.h"
#include "lower/ops/DynShape.h"
#include "lower/ops/LinalgLower.h"
#include "lower/ops/SpatialUtil.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace coil::loop::spatial {
namespace {

// ---------------------------------------------------------------------------------- Resize

struct ResizeParams {
  std::string mode, coordMode, nearestMode;
  double cubicA = -0.75, extrapolation = 0.0;
  bool excludeOutside = false, antialias = false;
};

/// The interpreter's cubicKernel on an f64 value.
Val cubicWeight(BodyBuilder &b, Val x, double a) {
  DType t = DType::F64;
  x = b.op(ScalarOp::Abs, x);
  auto c = [&](double v) { return b.constant(t, v); };
  auto mul = [&](Val p, Val q) { return b.op(ScalarOp::Mul, p, q); };
  Val near =
      b.op(ScalarOp::Add, mul(mul(b.op(ScalarOp::Sub, mul(c(a + 2), x), c(a + 3)), x), x), c(1));
  Val far = b.op(
      ScalarOp::Sub,
      mul(b.op(ScalarOp::Add, mul(b.op(ScalarOp::Sub, mul(c(a), x), c(5 * a)), x), c(8 * a)), x),
      c(4 * a));
  Val r = b.op(ScalarOp::Select, b.op(ScalarOp::Lt, x, c(2)), far, c(0));
  return b.op(ScalarOp::Select, b.op(ScalarOp::Le, x, c(1)), near, r);
}

/// One resized axis: scale, sizes and roi of that axis.
struct ResizeAxis {
  int64_t axis = 0;
  SymInt in, out;
  std::optional<double> scale;                       ///< known at compile time
  std::vector<std::pair<SymInt, SymInt>> sizeRatios; ///< scale = min/max of size/in ratios
  bool minRatio = true;
  double roiStart = 0, roiEnd = 1;
  /// Read at run time: the scale is element `index` of `scales`; the roi elements `index` and
  /// `index + numAxes` of `roi`.
  std::optional<TensorRef> scales, roi;
  int64_t index = 0, numAxes = 0;
  /// Antialias with a scale known only at run time: the number of filter taps (a symbol the
  /// size extern binds).
  std::optional<SymInt> taps;
};

Val resizeScale(BodyBuilder &b, const ResizeAxis &a) {
  if (a.scale) return b.constant(DType::F64, *a.scale);
  if (a.scales) return b.cast(b.load(*a.scales, {SymInt(a.index)}), DType::F64);
  Val s = kNoVal;
  for (auto &[num, den] : a.sizeRatios) {
    Val r = b.op(ScalarOp::Div, b.index(num, DType::F64), b.index(den, DType::F64));
    s = s == kNoVal ? r : b.op(a.minRatio ? ScalarOp::Min : ScalarOp::Max, s, r);
  }
  return s;
}

/// The input coordinate of output coordinate `j` (the interpreter's sourceCoord), in f64;
/// sets *extrapolate (a bool Val) for tf_crop_and_resize.
Val resizeSource(BodyBuilder &b, const ResizeParams &p, const ResizeAxis &a, const SymInt &j,
                 Val *extrapolate) {
  DType t = DType::F64;
  auto c = [&](double v) { return b.constant(t, v); };
  Val scale = resizeScale(b, a);
  Val in = b.index(a.in, t), x = b.index(j, t);
  // Built on first use, so that each mode's body holds only what it reads.
  Val outW = kNoVal;
  auto outWidth = [&] {
    if (outW == kNoVal) outW = b.op(ScalarOp::Mul, scale, in);
    return outW;
  };
  auto outIsOne = [&] { return b.op(ScalarOp::Eq, outWidth(), c(1)); };
  auto inM1 = [&] { return b.op(ScalarOp::Sub, in, c(1)); };
  auto outWM1 = [&] { return b.op(ScalarOp::Sub, outWidth(), c(1)); };
  const std::string &m = p.coordMode;
  if (m == "align_corners")
    return b.op(ScalarOp::Select, outIsOne(), c(0),
                b.op(ScalarOp::Div, b.op(ScalarOp::Mul, x, inM1()), outWM1()));
  if (m == "asymmetric") return b.op(ScalarOp::Div, x, scale);
  if (m == "tf_crop_and_resize") {
    Val roiStart = c(a.roiStart), span = c(a.roiEnd - a.roiStart);
    if (a.roi) {
      roiStart = b.cast(b.load(*a.roi, {SymInt(a.index)}), t);
      Val roiEnd = b.cast(b.load(*a.roi, {SymInt(a.index + a.numAxes)}), t);
      span = b.op(ScalarOp::Sub, roiEnd, roiStart);
    }
    Val one = b.op(ScalarOp::Div, b.op(ScalarOp::Mul, span, inM1()), c(2));
    Val many =
        b.op(ScalarOp::Div, b.op(ScalarOp::Mul, b.op(ScalarOp::Mul, x, span), inM1()), outWM1());
    Val r = b.op(ScalarOp::Select, outIsOne(), one, many);
    Val last = inM1();
    r = b.op(ScalarOp::Add, r, b.op(ScalarOp::Mul, roiStart, last));
    *extrapolate = b.op(ScalarOp::Or, b.op(ScalarOp::Lt, r, c(0)), b.op(ScalarOp::Gt, r, last));
    return r;
  }
  if (m == "half_pixel_symmetric") {
    // center * (1 - adjustment) + (x + 0.5) / scale - 0.5, associated as the interpreter.
    Val adjustment = b.op(ScalarOp::Div, b.index(a.out, t), outWidth());
    Val center = b.op(ScalarOp::Div, in, c(2));
    Val shifted =
        b.op(ScalarOp::Add, b.op(ScalarOp::Mul, center, b.op(ScalarOp::Sub, c(1), adjustment)),
             b.op(ScalarOp::Div, b.op(ScalarOp::Add, x, c(0.5)), scale));
    return b.op(ScalarOp::Sub, shifted, c(0.5));
  }
  Val half =
      b.op(ScalarOp::Sub, b.op(ScalarOp::Div, b.op(ScalarOp::Add, x, c(0.5)), scale), c(0.5));
  if (m == "pytorch_half_pixel") return b.op(ScalarOp::Select, outIsOne(), c(-0.5), half);
  return half;
}

/// Antialiased linear or cubic resize of axis `a.axis` whose tap count `a.taps` is known only
/// at run time: a reduction of the weights, then of the normalized weights times the taps (as
/// the interpreter: weights of 0 skipped, tap indices clamped into the input).
TensorRef resizeAxisTaps(LowerContext &ctx, const ResizeParams &p, const ResizeAxis &a,
                         const TensorRef &cur, DType nodeT, DType accT, bool last, DType outT) {
  Syms shape = cur.shape;
  size_t ax = size_t(a.axis);
  shape[ax] = a.out;
  const DType t = DType::F64;
  double support = p.mode == "linear" ? 1 : 2;
  // The weight of tap r and (if `at`) its load index.
  auto tap = [&](BodyBuilder &b, const Syms &idx, const SymInt &r, Syms *at) {
    auto c = [&](double v) { return b.constant(t, v); };
    Val ext = kNoVal;
    Val x = resizeSource(b, p, a, idx[ax], &ext);
    Val fl = b.op(ScalarOp::Floor, x);
    Val base = b.op(ScalarOp::Select, b.op(ScalarOp::Eq, x, fl), b.op(ScalarOp::Sub, fl, c(1)), fl);
    Val ratio = b.op(ScalarOp::Sub, x, base);
    Val sc = b.op(ScalarOp::Min, resizeScale(b, a), c(1));
    Val start =
        b.op(ScalarOp::Add, b.op(ScalarOp::Floor, b.op(ScalarOp::Div, c(-support), sc)), c(1));
    Val d = b.op(ScalarOp::Sub, b.op(ScalarOp::Add, start, b.index(r, t)), ratio);
    Val w;
    if (p.mode == "linear")
      w = b.op(ScalarOp::Min,
               b.op(ScalarOp::Max,
                    b.op(ScalarOp::Sub, c(1), b.op(ScalarOp::Abs, b.op(ScalarOp::Mul, d, sc))),
                    c(0)),
               c(1));
    else
      w = cubicWeight(b, b.op(ScalarOp::Mul, sc, d), p.cubicA);
    if (at) {
      // first = base - taps / 2 + 1 (taps is even); clamped into [0, in - 1].
      Val half = b.op(ScalarOp::Div, b.index(*a.taps, t), c(2));
      Val ti = b.op(ScalarOp::Add, b.op(ScalarOp::Add, b.op(ScalarOp::Sub, base, half), c(1)),
                    b.index(r, t));
      ti = b.op(ScalarOp::Min, b.op(ScalarOp::Max, ti, c(0)),
                b.op(ScalarOp::Sub, b.index(a.in, t), c(1)));
      *at = idx;
      (*at)[ax] = b.indirect(b.cast(ti, DType::I64), a.in, false);
    }
    return w;
  };
  TensorRef sum = ctx.reduce(
      ReduceKind::Sum, t, t, shape, {*a.taps},
      [&](BodyBuilder &b, const Syms &o, const Syms &r, Val *) { return tap(b, o, r[0], nullptr); },
      false, "taps_sum");
  TensorRef acc = ctx.reduce(
      ReduceKind::Sum, accT, accT, shape, {*a.taps},
      [&](BodyBuilder &b, const Syms &o, const Syms &r, Val *) {
        Syms at;
        Val w = b.op(ScalarOp::Div, tap(b, o, r[0], &at), b.load(sum, o));
        Val term = b.op(ScalarOp::Mul, b.cast(w, accT), b.cast(b.load(cur, at), accT));
        return b.op(ScalarOp::Select, b.op(ScalarOp::Ne, w, b.constant(t, 0)), term,
                    b.constant(accT, 0));
      },
      false, "taps_acc");
  return ctx.pointwise(last ? outT : nodeT, shape, [&](BodyBuilder &b, const Syms &idx) {
    Val v = b.load(acc, idx);
    Val ext = kNoVal;
    if (p.coordMode == "tf_crop_and_resize") {
      resizeSource(b, p, a, idx[ax], &ext);
      v = b.op(ScalarOp::Select, ext, b.constant(accT, p.extrapolation), v);
    }
    return last ? storeAs(b, v, outT) : b.cast(v, nodeT);
  });
}

/// Resizes axis `a.axis` of `cur`: a Pointwise node of type `nodeT`.
TensorRef resizeAxis(LowerContext &ctx, const ResizeParams &p, const ResizeAxis &a,
                     const TensorRef &cur, DType nodeT, DType accT, bool last, DType outT) {
  if (p.antialias && a.taps) return resizeAxisTaps(ctx, p, a, cur, nodeT, accT, last, outT);
  Syms shape = cur.shape;
  size_t ax = size_t(a.axis);
  shape[ax] = a.out;
  return ctx.pointwise(last ? outT : nodeT, shape, [&](BodyBuilder &b, const Syms &idx) {
    DType t = DType::F64;
    auto c = [&](double v) { return b.constant(t, v); };
    Val ext = kNoVal;
    Val x = resizeSource(b, p, a, idx[ax], &ext);
    Val fl = b.op(ScalarOp::Floor, x);
    auto loadAt = [&](Val fidx) {
      Syms li = idx;
      li[ax] = b.indirect(b.cast(fidx, DType::I64), a.in, false);
      return b.load(cur, li);
    };
    Val v;
    if (p.mode == "nearest") {
      Val r = b.op(ScalarOp::Sub, x, fl);
      Val up; // whether to take floor + 1
      if (p.nearestMode == "round_prefer_ceil")
        up = b.op(ScalarOp::Ge, r, c(0.5));
      else if (p.nearestMode == "floor")
        up = b.intConstant(DType::Bool, 0);
      else if (p.nearestMode == "ceil")
        up = b.op(ScalarOp::Gt, r, c(0));
      else
        up = b.op(ScalarOp::Gt, r, c(0.5));
      Val fi = b.op(ScalarOp::Add, fl, b.op(ScalarOp::Select, up, c(1), c(0)));
      v = loadAt(fi);
      v = last ? v : b.cast(v, nodeT);
      if (ext != kNoVal) {
        Val e = b.cast(c(p.extrapolation), accT);
        v = b.op(ScalarOp::Select, ext, storeAs(b, e, last ? outT : nodeT), v);
      }
      return v;
    }
    // Taps base - n/2 + 1 .. base + n/2 with ratio = x - base in (0, 1].
    Val base = b.op(ScalarOp::Select, b.op(ScalarOp::Eq, x, fl), b.op(ScalarOp::Sub, fl, c(1)), fl);
    Val ratio = b.op(ScalarOp::Sub, x, base);
    std::vector<Val> coeffs;
    double sc = a.scale ? std::min(*a.scale, 1.0) : 1.0;
    if (p.mode == "linear") {
      if (p.antialias) {
        int64_t start = int64_t(std::floor(-1 / sc)) + 1, n = 2 - 2 * start;
        for (int64_t i = start; i < start + n; ++i) {
          Val d = b.op(ScalarOp::Mul, b.op(ScalarOp::Sub, c(double(i)), ratio), c(sc));
          Val w = b.op(ScalarOp::Sub, c(1), b.op(ScalarOp::Abs, d));
          coeffs.push_back(b.op(ScalarOp::Min, b.op(ScalarOp::Max, w, c(0)), c(1)));
        }
      } else {
        coeffs = {b.op(ScalarOp::Sub, c(1), ratio), ratio};
      }
    } else {
      if (p.antialias) {
        int64_t start = int64_t(std::floor(-2 / sc)) + 1, end = 2 - start;
        for (int64_t i = start; i < end; ++i)
          coeffs.push_back(cubicWeight(
              b, b.op(ScalarOp::Mul, c(sc), b.op(ScalarOp::Sub, c(double(i)), ratio)), p.cubicA));
      } else {
        coeffs = {cubicWeight(b, b.op(ScalarOp::Add, c(1), ratio), p.cubicA),
                  cubicWeight(b, ratio, p.cubicA),
                  cubicWeight(b, b.op(ScalarOp::Sub, c(1), ratio), p.cubicA),
                  cubicWeight(b, b.op(ScalarOp::Sub, c(2), ratio), p.cubicA)};
      }
    }
    auto normalize = [&]() {
      Val sum = coeffs[0];
      for (size_t i = 1; i < coeffs.size(); ++i) sum = b.op(ScalarOp::Add, sum, coeffs[i]);
      return sum;
    };
    if (p.antialias) {
      Val sum = normalize();
      for (Val &cv : coeffs) cv = b.op(ScalarOp::Div, cv, sum);
    }
    int64_t n = int64_t(coeffs.size());
    auto offset = [&](Val v, int64_t k) {
      return k == 0 ? v : b.op(ScalarOp::Add, v, c(double(k)));
    };
    Val first = offset(base, -(n / 2) + 1);
    std::vector<Val> tapIdx;
    for (int64_t i = 0; i < n; ++i) tapIdx.push_back(offset(first, i));
    if (p.excludeOutside) {
      Val inF = b.index(a.in, t);
      for (int64_t i = 0; i < n; ++i) {
        Val out = b.op(ScalarOp::Or, b.op(ScalarOp::Lt, tapIdx[size_t(i)], c(0)),
                       b.op(ScalarOp::Ge, tapIdx[size_t(i)], inF));
        coeffs[size_t(i)] = b.op(ScalarOp::Select, out, c(0), coeffs[size_t(i)]);
      }
      Val sum = normalize();
      Val nz = b.op(ScalarOp::Ne, sum, c(0));
      for (Val &cv : coeffs) cv = b.op(ScalarOp::Select, nz, b.op(ScalarOp::Div, cv, sum), cv);
    }
    Val acc = b.constant(accT, 0);
    for (int64_t i = 0; i < n; ++i) {
      Val w = coeffs[size_t(i)];
      Val term = b.op(ScalarOp::Mul, b.cast(w, accT), b.cast(loadAt(tapIdx[size_t(i)]), accT));
      // Taps of weight 0 are skipped (a 0 weight times inf is not added).
      acc = b.op(ScalarOp::Add, acc,
                 b.op(ScalarOp::Select, b.op(ScalarOp::Ne, w, c(0)), term, b.constant(accT, 0)));
    }
    if (ext != kNoVal) acc = b.op(ScalarOp::Select, ext, b.constant(accT, p.extrapolation), acc);
    return last ? storeAs(b, acc, outT) : b.cast(acc, nodeT);
  });
}

/// On the CPU (LowerOptions::cpuExterns), an f32 nearest or linear Resize of at most the two
/// innermost axes as one call of coil_cpu_resize2d_f32, which computes each axis's taps once
/// instead of per output element; nullopt where the extern does not apply (the generic
/// lowering then runs). `todo` are the axes that are not identities.
std::optional<TensorRef> resizeOnCpu(LowerContext &ctx, const ResizeParams &p,
                                     const std::vector<const ResizeAxis *> &todo) {
  using linalg::floatArg;
  using linalg::intArg;
  using linalg::nodeArg;
  using linalg::outArg;
  TensorRef x = ctx.input(0);
  int64_t r = x.rank();
  if (!ctx.options().cpuExterns || x.dtype != DType::F32 || r < 2 || p.antialias ||
      p.excludeOutside || (p.mode != "nearest" && p.mode != "linear") ||
      p.coordMode == "tf_crop_and_resize")
    return std::nullopt;
  static const char *coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                 "half_pixel_symmetric"};
  static const char *nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  auto code = [](const std::string &s, const char *const *names, int64_t n) -> int64_t {
    for (int64_t i = 0; i < n; ++i)
      if (s == names[i]) return i;
    return -1;
  };
  int64_t coord = code(p.coordMode, coords, 5), nearest = code(p.nearestMode, nearests, 4);
  if (coord < 0 || (p.mode == "nearest" && nearest < 0)) return std::nullopt;
  // Per innermost axis: its output size and its scale (a double, or num / den at run time).
  // An axis that is not resized keeps its size with scale 1, which the taps reproduce exactly.
  struct Inner {
    SymInt out;
    double scale = 1;
    SymInt num = 0, den = 0;
  };
  Inner inner[2];
  for (int k = 0; k < 2; ++k) inner[k].out = x.shape[size_t(r - 2 + k)];
  for (const ResizeAxis *a : todo) {
    if (a->axis < r - 2) return std::nullopt;
    Inner &in = inner[a->axis - (r - 2)];
    in.out = a->out;
    if (a->scale)
      in.scale = *a->scale;
    else if (!a->scales && a->sizeRatios.size() == 1)
      in.num = a->sizeRatios[0].first, in.den = a->sizeRatios[0].second;
    else
      return std::nullopt;
  }
  SymInt planes = 1;
  for (int64_t d = 0; d < r - 2; ++d) planes = planes * x.shape[size_t(d)];
  TensorRef src = ctx.realize(x);
  int64_t mode = p.mode == "nearest" ? COIL_RESIZE_NEAREST : COIL_RESIZE_LINEAR;
  Syms shape = x.shape;
  shape[size_t(r - 2)] = inner[0].out, shape[size_t(r - 1)] = inner[1].out;
  return ctx.externCall("coil_cpu_resize2d_f32",
                        {nodeArg(src), outArg(0), intArg(planes), intArg(x.shape[size_t(r - 2)]),
                         intArg(x.shape[size_t(r - 1)]), intArg(inner[0].out), intArg(inner[1].out),
                         floatArg(inner[0].scale), intArg(inner[0].num), intArg(inner[0].den),
                         floatArg(inner[1].scale), intArg(inner[1].num), intArg(inner[1].den),
                         intArg(mode), intArg(coord), intArg(std::max<int64_t>(nearest, 0))},
                        {TensorType{DType::F32, shape}})[0];
}

Status lowerResize(LowerContext &ctx) {
  const TensorType &xt = ctx.inputType(0);
  const Attrs &at = attrsOf(ctx);
  int64_t r = xt.rank();
  ResizeParams p;
  p.mode = at.getString("mode", "nearest");
  p.coordMode = at.getString("coordinate_transformation_mode", "half_pixel");
  p.nearestMode = at.getString("nearest_mode", "round_prefer_floor");
  p.cubicA = at.getFloat("cubic_coeff_a", -0.75);
  p.extrapolation = at.getFloat("extrapolation_value", 0.0);
  p.excludeOutside = at.getInt("exclude_outside", 0) != 0;
  p.antialias = at.getInt("antialias", 0) != 0 && p.mode != "nearest";
  if (p.mode != "nearest" && p.mode != "linear" && p.mode != "cubic")
    return ctx.error("mode must be nearest, linear or cubic, got '" + p.mode + "'");
  std::string policy = at.getString("keep_aspect_ratio_policy", "stretch");
  std::vector<int64_t> axes;
  if (auto a = at.maybeInts("axes")) {
    for (int64_t ax : *a) {
      if (ax < -r || ax >= r)
        return ctx.error("axis " + std::to_string(ax) + " is out of range for rank " +
                         std::to_string(r));
      axes.push_back(ax < 0 ? ax + r : ax);
    }
  } else {
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  size_t na = axes.size();
  auto present = [&](size_t i) {
    if (!ctx.hasInput(i)) return false;
    auto cs = ctx.inputType(i).concreteShape();
    return !cs || numelOf(*cs) > 0;
  };
  const Syms &outShape = ctx.outputType(0).shape;
  // The antialias filter's support, for the size extern's tap count.
  int64_t support = !p.antialias ? 0 : p.mode == "linear" ? 1 : 2;
  std::vector<ResizeAxis> ra(na);
  for (size_t i = 0; i < na; ++i) {
    ra[i].axis = axes[i];
    ra[i].in = xt.shape[size_t(axes[i])];
    ra[i].out = outShape[size_t(axes[i])];
  }
  if (present(3)) {
    auto sizes = ctx.intValue(3);
    if (!sizes) {
      // Sizes read at run time: the size extern binds the output sizes (and the sizes, whose
      // ratios to the input dims are the scales).
      auto sv = dynshape::inputElems(ctx, 3);
      if (!sv || sv->size() != na)
        return ctx.error("sizes must be a 1-D integer tensor of " + std::to_string(na) + " values");
      Syms ins, named;
      for (size_t i = 0; i < na; ++i) ins.push_back(ra[i].in), named.push_back(ra[i].out);
      int64_t code = policy == "stretch" ? 1 : policy == "not_larger" ? 2 : 3;
      COIL_TRY(auto dd,
               dynshape::shapeDimsNamed(ctx, COIL_SHAPE_RESIZE, *sv, ins, named,
                                        int64_t(p.antialias ? 2 * na : na), code + 4 * support));
      if (p.antialias)
        for (size_t i = 0; i < na; ++i) ra[i].taps = dd.extra[na + i];
      for (size_t i = 0; i < na; ++i) {
        ra[i].out = dd.dims[i];
        ra[i].minRatio = policy == "not_larger";
        if (policy == "stretch")
          ra[i].sizeRatios = {{dd.extra[i], ra[i].in}};
        else
          for (size_t k = 0; k < na; ++k) ra[i].sizeRatios.push_back({dd.extra[k], ra[k].in});
      }
      sizes.emplace(); // handled
    } else if (sizes->size() != na) {
      return ctx.error("sizes must have " + std::to_string(na) + " values, got " +
                       std::to_string(sizes->size()));
    }
    for (size_t i = 0; i < na && !sizes->empty(); ++i) {
      if (policy == "stretch") {
        ra[i].sizeRatios = {{(*sizes)[i], ra[i].in}};
      } else {
        ra[i].minRatio = policy == "not_larger";
        for (size_t k = 0; k < na; ++k) ra[i].sizeRatios.push_back({(*sizes)[k], ra[k].in});
      }
      // Known at compile time when every ratio is constant.
      bool known = true;
      double s = ra[i].minRatio ? 1e300 : -1e300;
      for (auto &[num, den] : ra[i].sizeRatios) {
        auto nc = num.maybeConstant(), dc = den.maybeConstant();
        if (!nc || !dc) {
          known = false;
          break;
        }
        double q = double(*nc) / double(*dc);
        s = ra[i].minRatio ? std::min(s, q) : std::max(s, q);
      }
      if (known) ra[i].scale = s;
    }
  } else if (present(2)) {
    const Tensor *sc = ctx.constant(2);
    TensorRef st = ctx.input(2);
    if (!sc && (st.rank() != 1 || st.shape[0] != SymInt(int64_t(na)) || !isFloat(st.dtype)))
      return ctx.error("scales must be a 1-D float tensor of " + std::to_string(na) + " values");
    if (!sc) {
      // Scales read at run time: the size extern binds the output sizes (passed the scales
      // as f64 bits); the bodies read the scales.
      std::vector<dynshape::ElemFn> vals;
      for (size_t i = 0; i < na; ++i)
        vals.push_back([st, i](BodyBuilder &b) {
          Val v = b.cast(b.load(st, {SymInt(int64_t(i))}), DType::F64);
          return b.bitcast(v, DType::I64);
        });
      Syms ins, named;
      for (size_t i = 0; i < na; ++i) ins.push_back(ra[i].in), named.push_back(ra[i].out);
      COIL_TRY(auto dd, dynshape::shapeDimsNamed(ctx, COIL_SHAPE_RESIZE, vals, ins, named,
                                                 p.antialias ? int64_t(2 * na) : 0, 4 * support));
      if (p.antialias)
        for (size_t i = 0; i < na; ++i) ra[i].taps = dd.extra[na + i];
      for (size_t i = 0; i < na; ++i) {
        ra[i].out = dd.dims[i];
        ra[i].scales = st;
        ra[i].index = int64_t(i);
      }
    }
  }
  if (present(2) && !present(3) && ctx.constant(2)) {
    auto v = ctx.constant(2)->toDoubles();
    if (v.size() != na)
      return ctx.error("scales must have " + std::to_string(na) + " values, got " +
                       std::to_string(v.size()));
    for (size_t i = 0; i < na; ++i) {
      if (!(v[i] > 0) || !std::isfinite(v[i]))
        return ctx.error("scales must be positive, got " + std::to_string(v[i]));
      ra[i].scale = v[i];
    }
  } else if (!present(2) && !present(3)) {
    return ctx.error("exactly one of scales and sizes must be given");
  }
  bool hasRoi = p.coordMode == "tf_crop_and_resize" && present(1);
  if (hasRoi) {
    const Tensor *roi = ctx.constant(1);
    if (!roi) {
      // Read at run time by the bodies.
      TensorRef rt = ctx.input(1);
      if (rt.rank() != 1 || rt.shape[0] != SymInt(int64_t(2 * na)) || !isFloat(rt.dtype))
        return ctx.error("roi must be a 1-D float tensor of " + std::to_string(2 * na) + " values");
      for (size_t i = 0; i < na; ++i) {
        ra[i].roi = rt;
        ra[i].index = int64_t(i);
        ra[i].numAxes = int64_t(na);
      }
    } else {
      auto v = roi->toDoubles();
      if (v.size() != 2 * na)
        return ctx.error("roi must have " + std::to_string(2 * na) + " values, got " +
                         std::to_string(v.size()));
      for (size_t i = 0; i < na; ++i) ra[i].roiStart = v[i], ra[i].roiEnd = v[na + i];
    }
  }
  DType dt = xt.dtype;
  bool nearest = p.mode == "nearest";
  DType accT = calcType(dt);
  DType nodeT = nearest ? dt : accT;
  std::vector<const ResizeAxis *> todo;
  for (const ResizeAxis &a : ra) {
    auto ic = a.in.maybeConstant(), oc = a.out.maybeConstant();
    bool roiWhole =
        !hasRoi || (!a.roi && std::fabs(a.roiStart) <= 1e-9 && std::fabs(a.roiEnd - 1) <= 1e-9);
    // The interpreter skips identity axes; elsewhere the interpolation reproduces the input.
    if (a.scale && ic && oc && std::fabs(*a.scale - 1.0) <= 1e-9 && *ic == *oc && roiWhole)
      continue;
    // An axis resized to its own symbolic size (sizes such as [batch, C, H, W] taken from
    // Shape): with the stretch policy its scale is that size over itself, exactly 1 for every
    // value of the symbols, so it is an identity axis too.
    if (!a.scale && !a.scales && policy == "stretch" && a.sizeRatios.size() == 1 &&
        a.sizeRatios[0].first == a.sizeRatios[0].second && a.out == a.in && roiWhole)
      continue;
    if (ic && oc && *ic == 0 && *oc > 0)
      return ctx.error("cannot resize an empty axis to size " + std::to_string(*oc));
    if (p.antialias && !a.scale && (!a.taps || p.excludeOutside))
      return ctx.error("Resize with antialias and a scale known only at run time is not "
                       "supported by the compiler yet");
    todo.push_back(&a);
  }
  TensorRef cur = ctx.input(0);
  if (todo.empty()) {
    ctx.setOutput(0, cur);
    return okStatus();
  }
  if (auto y = resizeOnCpu(ctx, p, todo)) {
    ctx.setOutput(0, *y);
    return okStatus();
  }
  for (size_t i = 0; i < todo.size(); ++i)
    cur = resizeAxis(ctx, p, *todo[i], cur, nodeT, accT, i + 1 == todo.size(), dt);
  ctx.setOutput(0, cur);
  return okStatus();
}

// ------------------------------------------------------------------------------ AffineGrid

Status lowerAffineGrid(LowerContext &ctx) {
  const TensorType &tt = ctx.inputType(0);
  const Syms &os = ctx.outputType(0).shape;
  if (os.size() != 4 && os.size() != 5)
    return ctx.error("size must have 4 or 5 values, got " + std::to_string(os.size() + 1));
  size_t nd = os.size() - 2;
  bool align = attrsOf(ctx).getInt("align_corners", 0) != 0;
  TensorRef theta = ctx.input(0);
  DType dt = tt.dtype, t = DType::F64;
  Syms sp(os.begin() + 1, os.end() - 1);
  ctx.setOutput(0, ctx.pointwise(dt, os, [&](BodyBuilder &b, const Syms &o) {
    auto c = [&](double v) { return b.constant(t, v); };
    // The normalized coordinate of index i along a dim of length len.
    auto base = [&](const SymInt &i, const SymInt &len) {
      Val iv = b.index(i, t), lv = b.index(len, t);
      if (align)
        return b.op(ScalarOp::Select, b.op(ScalarOp::Eq, lv, c(1)), c(-1),
                    b.op(ScalarOp::Add, c(-1),
                         b.op(ScalarOp::Div, b.op(ScalarOp::Mul, c(2), iv),
                              b.op(ScalarOp::Sub, lv, c(1)))));
      return b.op(ScalarOp::Sub,
                  b.op(ScalarOp::Div, b.op(ScalarOp::Add, b.op(ScalarOp::Mul, c(2), iv), c(1)), lv),
                  c(1));
    };
    SymInt bi = o[0], rr = o.back();
    Val acc = c(0);
    for (size_t k = 0; k <= nd; ++k) {
      // (x, y[, z], 1): x is the last spatial dim.
      Val h = k < nd ? base(o[1 + (nd - 1 - k)], sp[nd - 1 - k]) : c(1);
      Val th = b.cast(b.load(theta, {bi, rr, SymInt(int64_t(k))}), t);
      acc = b.op(ScalarOp::Add, acc, b.op(ScalarOp::Mul, th, h));
    }
    return b.cast(acc, dt);
  }));
  return okStatus();
}

// ------------------------------------------------------------------------------ GridSample

/// Folds `x` into [lo, hi] by reflecting at the borders any number of times (the
/// interpreter's reflect), in f64.
Val reflectVal(BodyBuilder &b, Val x, Val lo, Val hi) {
  DType t = DType::F64;
  auto c = [&](double v) { return b.constant(t, v); };
  Val range = b.op(ScalarOp::Sub, hi, lo);
  auto fold = [&](Val dx, Val evenBase, Val oddBase, bool evenSubtracts) {
    Val n = b.op(ScalarOp::Floor, b.op(ScalarOp::Div, dx, range));
    Val r = b.op(ScalarOp::Sub, dx, b.op(ScalarOp::Mul, n, range));
    Val half = b.op(ScalarOp::Floor, b.op(ScalarOp::Div, n, c(2)));
    Val even = b.op(ScalarOp::Eq, b.op(ScalarOp::Sub, n, b.op(ScalarOp::Mul, half, c(2))), c(0));
    Val ev = evenSubtracts ? b.op(ScalarOp::Sub, evenBase, r) : b.op(ScalarOp::Add, evenBase, r);
    Val od = evenSubtracts ? b.op(ScalarOp::Add, oddBase, r) : b.op(ScalarOp::Sub, oddBase, r);
    return b.op(ScalarOp::Select, even, ev, od);
  };
  Val below = fold(b.op(ScalarOp::Sub, lo, x), lo, hi, false);
  Val above = fold(b.op(ScalarOp::Sub, x, hi), hi, lo, true);
  Val r = b.op(ScalarOp::Select, b.op(ScalarOp::Lt, x, lo), below,
               b.op(ScalarOp::Select, b.op(ScalarOp::Gt, x, hi), above, x));
  return b.op(ScalarOp::Select, b.op(ScalarOp::Le, range, c(0)), lo, r);
}

/// Truncation toward zero of an f64 value (the C cast to an integer), still f64.
Val truncVal(BodyBuilder &b, Val v) {
  return b.op(ScalarOp::Select, b.op(ScalarOp::Lt, v, b.constant(b.dtypeOf(v), 0)),
              b.op(ScalarOp::Ceil, v), b.op(ScalarOp::Floor, v));
}

Status lowerGridSample(LowerContext &ctx) {
  const TensorType &xt = ctx.inputType(0), &gt = ctx.inputType(1);
  size_t nd = xt.rank() >= 3 ? size_t(xt.rank() - 2) : 0;
  if (nd == 0 || gt.rank() != xt.rank())
    return ctx.error("grid of type " + gt.str() + " does not fit input " + xt.str());
  const Attrs &at = attrsOf(ctx);
  std::string mode = at.getString("mode", "linear"), pad = at.getString("padding_mode", "zeros");
  if (mode == "bilinear") mode = "linear";
  if (mode == "bicubic") mode = "cubic";
  if (mode != "linear" && mode != "nearest" && mode != "cubic")
    return ctx.error("mode must be linear, nearest or cubic, got '" + mode + "'");
  if (pad != "zeros" && pad != "border" && pad != "reflection")
    return ctx.error("padding_mode must be zeros, border or reflection, got '" + pad + "'");
  bool align = at.getInt("align_corners", 0) != 0;
  DType dt = xt.dtype, ct = calcType(dt), t = DType::F64;
  TensorRef x = ctx.input(0), grid = ctx.input(1);
  Syms in(xt.shape.begin() + 2, xt.shape.end());
  ctx.setOutput(0, ctx.pointwise(dt, ctx.outputType(0).shape, [&](BodyBuilder &b, const Syms &o) {
    auto c = [&](double v) { return b.constant(t, v); };
    struct Tap {
      Val index; // f64 integer value, or a bool `valid` below for zeros padding
      Val valid;
      Val weight;
    };
    std::vector<std::vector<Tap>> taps(nd);
    for (size_t d = 0; d < nd; ++d) {
      Syms gi{o[0]};
      gi.insert(gi.end(), o.begin() + 2, o.end());
      gi.push_back(SymInt(int64_t(nd - 1 - d))); // the grid lists x (last dim) first
      Val v = b.cast(b.load(grid, gi), t);
      Val len = b.index(in[d], t);
      Val lenM1 = b.op(ScalarOp::Sub, len, c(1));
      Val pos = align ? b.op(ScalarOp::Mul, b.op(ScalarOp::Div, b.op(ScalarOp::Add, v, c(1)), c(2)),
                             lenM1)
                      : b.op(ScalarOp::Div,
                             b.op(ScalarOp::Sub,
                                  b.op(ScalarOp::Mul, b.op(ScalarOp::Add, v, c(1)), len), c(1)),
                             c(2));
      Val lo = align ? c(0) : c(-0.5), hi = align ? lenM1 : b.op(ScalarOp::Sub, len, c(0.5));
      if (mode == "nearest") pos = b.op(ScalarOp::Round, pos);
      Val outside = b.op(ScalarOp::Or, b.op(ScalarOp::Lt, pos, lo), b.op(ScalarOp::Gt, pos, hi));
      if (pad == "border")
        pos = b.op(ScalarOp::Select, outside,
                   b.op(ScalarOp::Min, b.op(ScalarOp::Max, pos, c(0)), lenM1), pos);
      else if (pad == "reflection")
        pos = b.op(ScalarOp::Select, outside, reflectVal(b, pos, lo, hi), pos);
      auto mapIdx = [&](Val i) -> Tap {
        Tap tp{i, kNoVal, kNoVal};
        if (pad == "zeros") {
          tp.valid = b.op(ScalarOp::And, b.op(ScalarOp::Ge, i, c(0)), b.op(ScalarOp::Lt, i, len));
        } else if (pad == "reflection") {
          Val inside = b.op(ScalarOp::And, b.op(ScalarOp::Ge, i, c(0)), b.op(ScalarOp::Lt, i, len));
          tp.index = b.op(ScalarOp::Select, inside, i, truncVal(b, reflectVal(b, i, lo, hi)));
        } // border: the indirect index clamps
        return tp;
      };
      if (mode == "nearest") {
        Tap tp = mapIdx(truncVal(b, pos));
        tp.weight = c(1);
        taps[d].push_back(tp);
      } else {
        Val f = b.op(ScalarOp::Floor, pos), r = b.op(ScalarOp::Sub, pos, f);
        if (mode == "linear") {
          Tap t0 = mapIdx(f), t1 = mapIdx(b.op(ScalarOp::Add, f, c(1)));
          t0.weight = b.op(ScalarOp::Sub, c(1), r);
          t1.weight = r;
          taps[d] = {t0, t1};
        } else {
          for (int k = -1; k <= 2; ++k) {
            Tap tp = mapIdx(b.op(ScalarOp::Add, f, c(k)));
            tp.weight = cubicWeight(b, b.op(ScalarOp::Sub, r, c(k)), -0.75);
            taps[d].push_back(tp);
          }
        }
      }
    }
    // Sum over the tap combinations of all dims (dim 0 slowest, as the interpreter).
    std::vector<std::vector<SymInt>> idxSyms(nd);
    for (size_t d = 0; d < nd; ++d)
      for (Tap &tp : taps[d])
        idxSyms[d].push_back(b.indirect(b.cast(tp.index, DType::I64), in[d], false));
    Val acc = b.constant(ct, 0);
    std::vector<size_t> sel(nd, 0);
    while (true) {
      Val w = kNoVal, valid = kNoVal;
      Syms li{o[0], o[1]};
      for (size_t d = 0; d < nd; ++d) {
        const Tap &tp = taps[d][sel[d]];
        w = w == kNoVal ? tp.weight : b.op(ScalarOp::Mul, w, tp.weight);
        if (tp.valid != kNoVal)
          valid = valid == kNoVal ? tp.valid : b.op(ScalarOp::And, valid, tp.valid);
        li.push_back(idxSyms[d][sel[d]]);
      }
      Val term = b.op(ScalarOp::Mul, b.cast(w, ct), b.cast(b.load(x, li), ct));
      if (valid != kNoVal) term = b.op(ScalarOp::Select, valid, term, b.constant(ct, 0));
      acc = b.op(ScalarOp::Add, acc, term);
      size_t d = nd;
      while (d > 0 && ++sel[d - 1] == taps[d - 1].size()) sel[--d] = 0;
      if (d == 0) break;
    }
    return b.cast(acc, dt);
  }));
  return okStatus();
}

// ---------------------------------------------------------------------- RoiAlign, MaxRoiPool

/// std::round (half away from zero) of an f64 value.
Val roundHalfAway(BodyBuilder &b, Val v) {
  DType t = b.dtypeOf(v);
  Val tr = truncVal(b, v);
  Val frac = b.op(ScalarOp::Abs, b.op(ScalarOp::Sub, v, tr));
  return b.op(ScalarOp::Add, tr,
              b.op(ScalarOp::Select, b.op(ScalarOp::Ge, frac, b.constant(t, 0.5)),
                   b.op(ScalarOp::Sign, v), b.constant(t, 0)));
}

/// Each output bin is a Max reduction over the whole input plane, masked to the bin's window
/// (the window depends on the roi values, so its extent is not known at compile time).
Status lowerMaxRoiPool(LowerContext &ctx) {
  const TensorType &xt = ctx.inputType(0), &rt = ctx.inputType(1);
  if (xt.rank() != 4 || rt.rank() != 2)
    return ctx.error("max_roi_pool needs X [N, C, H, W] and rois [R, 5]");
  auto ps = attrsOf(ctx).getInts("pooled_shape");
  if (ps.size() != 2 || ps[0] < 1 || ps[1] < 1)
    return ctx.error("pooled_shape must have 2 positive values");
  double scale = attrsOf(ctx).getFloat("spatial_scale", 1.0);
  DType dt = xt.dtype, ct = calcType(dt), t = DType::F64;
  TensorRef x = ctx.input(0), rois = ctx.input(1);
  SymInt h = xt.shape[2], w = xt.shape[3];
  const Syms &os = ctx.outputType(0).shape;
  // The bin's window [hs, he) x [ws, we) (f64 values) and the batch index.
  struct Bin {
    Val hs, he, ws, we;
    SymInt batch;
  };
  auto bin = [&](BodyBuilder &b, const Syms &o) {
    auto c = [&](double v) { return b.constant(t, v); };
    auto roi = [&](int64_t i) { return b.cast(b.load(rois, {o[0], SymInt(i)}), t); };
    Bin r;
    r.batch = b.indirect(b.cast(roi(0), DType::I64), xt.shape[0], false);
    auto sc = [&](int64_t i) { return roundHalfAway(b, b.op(ScalarOp::Mul, roi(i), c(scale))); };
    Val sw = sc(1), sh = sc(2), ew = sc(3), eh = sc(4);
    Val bh = b.op(ScalarOp::Div,
                  b.op(ScalarOp::Max, b.op(ScalarOp::Add, b.op(ScalarOp::Sub, eh, sh), c(1)), c(1)),
                  c(double(ps[0])));
    Val bw = b.op(ScalarOp::Div,
                  b.op(ScalarOp::Max, b.op(ScalarOp::Add, b.op(ScalarOp::Sub, ew, sw), c(1)), c(1)),
                  c(double(ps[1])));
    auto clampTo = [&](Val v, const SymInt &n) {
      return b.op(ScalarOp::Min, b.op(ScalarOp::Max, v, c(0)), b.index(n, t));
    };
    Val py = b.index(o[2], t), px = b.index(o[3], t);
    r.hs = clampTo(b.op(ScalarOp::Add, b.op(ScalarOp::Floor, b.op(ScalarOp::Mul, py, bh)), sh), h);
    r.he = clampTo(
        b.op(ScalarOp::Add,
             b.op(ScalarOp::Ceil, b.op(ScalarOp::Mul, b.op(ScalarOp::Add, py, c(1)), bh)), sh),
        h);
    r.ws = clampTo(b.op(ScalarOp::Add, b.op(ScalarOp::Floor, b.op(ScalarOp::Mul, px, bw)), sw), w);
    r.we = clampTo(
        b.op(ScalarOp::Add,
             b.op(ScalarOp::Ceil, b.op(ScalarOp::Mul, b.op(ScalarOp::Add, px, c(1)), bw)), sw),
        w);
    return r;
  };
  TensorRef m = ctx.reduce(
      ReduceKind::Max, ct, ct, os, {h, w},
      [&](BodyBuilder &b, const Syms &o, const Syms &r, Val *) {
        Bin bn = bin(b, o);
        Val yy = b.index(r[0], t), xx = b.index(r[1], t);
        Val inside = andAll(b, {b.op(ScalarOp::Ge, yy, bn.hs), b.op(ScalarOp::Lt, yy, bn.he),
                                b.op(ScalarOp::Ge, xx, bn.ws), b.op(ScalarOp::Lt, xx, bn.we)});
        Val v = b.cast(b.load(x, {bn.batch, o[1], r[0], r[1]}), ct);
        return b.op(ScalarOp::Select, inside, v, lowestOf(b, ct));
      },
      false, "max_roi_pool");
  ctx.setOutput(0, ctx.pointwise(dt, os, [&](BodyBuilder &b, const Syms &o) {
    Bin bn = bin(b, o); // an empty bin gives 0
    Val nonEmpty =
        b.op(ScalarOp::And, b.op(ScalarOp::Lt, bn.hs, bn.he), b.op(ScalarOp::Lt, bn.ws, bn.we));
    return b.cast(b.op(ScalarOp::Select, nonEmpty, b.load(m, o), b.constant(ct, 0)), dt);
  }));
  return okStatus();
}

/// A reduction over the sampling grid of each bin (sampling_ratio x sampling_ratio points),
/// each point bilinearly interpolated from the input.
Status lowerRoiAlign(LowerContext &ctx) {
  const TensorType &xt = ctx.inputType(0), &rt = ctx.inputType(1);
  if (xt.rank() != 4 || rt.rank() != 2)
    return ctx.error("roi_align needs X [N, C, H, W], rois [R, 4] and R batch indices");
  const Attrs &at = attrsOf(ctx);
  int64_t ph = at.getInt("output_height", 1), pw = at.getInt("output_width", 1);
  int64_t ratio = at.getInt("sampling_ratio", 0);
  double scale = at.getFloat("spatial_scale", 1.0);
  bool isMax = at.getString("mode", "avg") == "max";
  bool halfPixel = at.getString("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  if (ph < 1 || pw < 1) return ctx.error("output_height and output_width must be positive");
  if (ratio <= 0)
    return ctx.error("RoiAlign with sampling_ratio " + std::to_string(ratio) +
                     " (a sampling grid that depends on the roi values) is not supported by the "
                     "compiler yet; give a positive sampling_ratio");
  DType dt = xt.dtype, ct = calcType(dt), t = DType::F64;
  TensorRef x = ctx.input(0), rois = ctx.input(1), bidx = ctx.input(2);
  SymInt h = xt.shape[2], w = xt.shape[3];
  const Syms &os = ctx.outputType(0).shape;
  TensorRef acc = ctx.reduce(
      isMax ? ReduceKind::Max : ReduceKind::Sum, ct, ct, os, {ratio, ratio},
      [&](BodyBuilder &b, const Syms &o, const Syms &r, Val *) {
        auto c = [&](double v) { return b.constant(t, v); };
        auto roi = [&](int64_t i) { return b.cast(b.load(rois, {o[0], SymInt(i)}), t); };
        SymInt batch = b.indirect(b.cast(b.load(bidx, {o[0]}), DType::I64), xt.shape[0], false);
        double off = halfPixel ? 0.5 : 0.0;
        auto sc = [&](int64_t i) {
          return b.op(ScalarOp::Sub, b.op(ScalarOp::Mul, roi(i), c(scale)), c(off));
        };
        Val sw = sc(0), sh = sc(1), ew = sc(2), eh = sc(3);
        Val rw = b.op(ScalarOp::Sub, ew, sw), rh = b.op(ScalarOp::Sub, eh, sh);
        if (!halfPixel) rw = b.op(ScalarOp::Max, rw, c(1)), rh = b.op(ScalarOp::Max, rh, c(1));
        Val bh = b.op(ScalarOp::Div, rh, c(double(ph))),
            bw = b.op(ScalarOp::Div, rw, c(double(pw)));
        auto coord = [&](Val start, Val binSize, const SymInt &p, const SymInt &i) {
          Val a = b.op(ScalarOp::Add, start, b.op(ScalarOp::Mul, b.index(p, t), binSize));
          Val frac = b.op(ScalarOp::Div,
                          b.op(ScalarOp::Mul, b.op(ScalarOp::Add, b.index(i, t), c(0.5)), binSize),
                          c(double(ratio)));
          return b.op(ScalarOp::Add, a, frac);
        };
        Val y = coord(sh, bh, o[2], r[0]), xx = coord(sw, bw, o[3], r[1]);
        Val hf = b.index(h, t), wf = b.index(w, t);
        Val outside =
            b.op(ScalarOp::Or,
                 b.op(ScalarOp::Or, b.op(ScalarOp::Lt, y, c(-1)), b.op(ScalarOp::Gt, y, hf)),
                 b.op(ScalarOp::Or, b.op(ScalarOp::Lt, xx, c(-1)), b.op(ScalarOp::Gt, xx, wf)));
        // Low and high neighbours along one axis: {low, high, clamped coordinate}.
        auto axis = [&](Val v, Val n) {
          v = b.op(ScalarOp::Max, v, c(0));
          Val lo = b.op(ScalarOp::Floor, v);
          Val nm1 = b.op(ScalarOp::Sub, n, c(1));
          Val atEnd = b.op(ScalarOp::Ge, lo, nm1);
          lo = b.op(ScalarOp::Select, atEnd, nm1, lo);
          Val hi = b.op(ScalarOp::Select, atEnd, nm1, b.op(ScalarOp::Add, lo, c(1)));
          v = b.op(ScalarOp::Select, atEnd, lo, v);
          return std::array<Val, 3>{lo, hi, v};
        };
        auto [yl, yh, yc] = axis(y, hf);
        auto [xl, xh, xc] = axis(xx, wf);
        Val ly = b.op(ScalarOp::Sub, yc, yl), lx = b.op(ScalarOp::Sub, xc, xl);
        Val hy = b.op(ScalarOp::Sub, c(1), ly), hx = b.op(ScalarOp::Sub, c(1), lx);
        auto ix = [&](Val v, const SymInt &n) {
          return b.indirect(b.cast(v, DType::I64), n, false);
        };
        SymInt iyl = ix(yl, h), iyh = ix(yh, h), ixl = ix(xl, w), ixh = ix(xh, w);
        auto px = [&](const SymInt &yy, const SymInt &xi) {
          return b.cast(b.load(x, {batch, o[1], yy, xi}), t);
        };
        auto mul3 = [&](Val p, Val q, Val v) {
          return b.op(ScalarOp::Mul, b.op(ScalarOp::Mul, p, q), v);
        };
        Val zero = c(0);
        Val v1 = b.op(ScalarOp::Select, outside, zero, mul3(hy, hx, px(iyl, ixl)));
        Val v2 = b.op(ScalarOp::Select, outside, zero, mul3(hy, lx, px(iyl, ixh)));
        Val v3 = b.op(ScalarOp::Select, outside, zero, mul3(ly, hx, px(iyh, ixl)));
        Val v4 = b.op(ScalarOp::Select, outside, zero, mul3(ly, lx, px(iyh, ixh)));
        Val v = isMax
                    ? b.op(ScalarOp::Max, b.op(ScalarOp::Max, v1, v2), b.op(ScalarOp::Max, v3, v4))
                    : b.op(ScalarOp::Add, b.op(ScalarOp::Add, b.op(ScalarOp::Add, v1, v2), v3), v4);
        return b.cast(v, ct);
      },
      false, "roi_align");
  ctx.setOutput(0, ctx.pointwise(dt, os, [&](BodyBuilder &b, const Syms &o) {
    Val v = b.load(acc, o);
    if (!isMax) v = b.op(ScalarOp::Div, v, b.constant(ct, double(ratio * ratio)));
    return b.cast(v, dt);
  }));
  return okStatus();
}

} // namespace

void registerSpatialSampleLowerings(LowerRegistry &r) {
  r.add(OpKind::Resize, lowerResize);
  r.add(OpKind::AffineGrid, lowerAffineGrid);
  r.add(OpKind::GridSample, lowerGridSample);
  r.add(OpKind::MaxRoiPool, lowerMaxRoiPool);
  r.add(OpKind::RoiAlign, lowerRoiAlign);
}

} // namespace coil::loop::spatial
