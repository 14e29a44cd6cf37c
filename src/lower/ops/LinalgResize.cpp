// Lowerings of the image rearrangements: Resize (one Pointwise node per resized axis, reading
// its taps through indirect indices with weights computed in the body) and DepthToSpace /
// SpaceToDepth (views). Semantics: interp/kernels/LinalgResize.cpp.
#include "kernels/Externs.h"
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

using ResizeParams = ResizeAttrs;

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
  return ctx.externCall(kernels::cpuSymbol(kernels::ExternId::Resize2d, DType::F32),
                        {nodeArg(src), outArg(0), intArg(planes), intArg(x.shape[size_t(r - 2)]),
                         intArg(x.shape[size_t(r - 1)]), intArg(inner[0].out), intArg(inner[1].out),
                         floatArg(inner[0].scale), intArg(inner[0].num), intArg(inner[0].den),
                         floatArg(inner[1].scale), intArg(inner[1].num), intArg(inner[1].den),
                         intArg(mode), intArg(coord), intArg(std::max<int64_t>(nearest, 0))},
                        {TensorType{DType::F32, shape}})[0];
}

Status lowerResize(LowerContext &ctx) {
  const TensorType &xt = ctx.inputType(0);
  int64_t r = xt.rank();
  COIL_TRY(ResizeAttrs p, decodeResize(ctx.gnode(), r));
  const std::string &policy = p.policy;
  const std::vector<int64_t> &axes = p.axes;
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

// --------------------------------------------------------------------------- image views

Status lowerDepthToSpace(LowerContext &ctx) {
  const TensorType &xt = ctx.inputType(0);
  COIL_TRY(BlockAttrs ba, decodeBlock(ctx.gnode()));
  int64_t b = ba.blocksize;
  bool crd = ba.crd;
  if (xt.rank() != 4 || b < 1)
    return ctx.error("depth_to_space needs a rank-4 input and a positive blocksize");
  const Syms &os = ctx.outputType(0).shape;
  SymInt c = os[1];
  ctx.setOutput(0, ctx.view(ctx.input(0), os, [&](const Syms &v) {
    SymInt i = floorMod(v[2], b), j = floorMod(v[3], b);
    SymInt src = crd ? v[1] * (b * b) + i * b + j : (i * b + j) * c + v[1];
    return Syms{v[0], src, floorDiv(v[2], b), floorDiv(v[3], b)};
  }));
  return okStatus();
}

Status lowerSpaceToDepth(LowerContext &ctx) {
  const TensorType &xt = ctx.inputType(0);
  COIL_TRY(BlockAttrs ba, decodeBlock(ctx.gnode()));
  int64_t b = ba.blocksize;
  bool crd = ba.crd;
  if (xt.rank() != 4 || b < 1)
    return ctx.error("space_to_depth needs a rank-4 input and a positive blocksize");
  const Syms &os = ctx.outputType(0).shape;
  SymInt c = xt.shape[1];
  ctx.setOutput(0, ctx.view(ctx.input(0), os, [&](const Syms &v) {
    SymInt blk = crd ? floorMod(v[1], b * b) : floorDiv(v[1], c);
    SymInt ic = crd ? floorDiv(v[1], b * b) : floorMod(v[1], c);
    return Syms{v[0], ic, v[2] * b + floorDiv(blk, b), v[3] * b + floorMod(blk, b)};
  }));
  return okStatus();
}

} // namespace

void registerLinalgResizeLowerings(LowerRegistry &r) {
  r.add(OpKind::Resize, lowerResize);
  r.add(OpKind::DepthToSpace, lowerDepthToSpace);
  r.add(OpKind::SpaceToDepth, lowerSpaceToDepth);
}

} // namespace coil::loop::spatial
