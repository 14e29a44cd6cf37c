// Lowerings of the sampling ops: GridSample, AffineGrid, RoiAlign and MaxRoiPool. Semantics:
// interp/kernels/LinalgSample.cpp.
#include "kernels/cpu/CpuKernels.h"
#include "lower/ops/DynShape.h"
#include "lower/ops/SpatialUtil.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace coil::loop::spatial {
namespace {

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
  COIL_TRY(GridSampleAttrs ga, decodeGridSample(ctx.gnode()));
  const std::string &mode = ga.mode, &pad = ga.padding;
  bool align = ga.alignCorners;
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
  COIL_TRY(RoiAlignAttrs ra, decodeRoiAlign(ctx.gnode()));
  int64_t ph = ra.outHeight, pw = ra.outWidth, ratio = ra.samplingRatio;
  double scale = ra.spatialScale;
  bool isMax = ra.max, halfPixel = ra.halfPixel;
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

void registerLinalgSampleLowerings(LowerRegistry &r) {
  r.add(OpKind::AffineGrid, lowerAffineGrid);
  r.add(OpKind::GridSample, lowerGridSample);
  r.add(OpKind::MaxRoiPool, lowerMaxRoiPool);
  r.add(OpKind::RoiAlign, lowerRoiAlign);
}

} // namespace coil::loop::spatial
