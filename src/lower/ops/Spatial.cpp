// Lowerings of the spatial and recurrent ops of the Linalg family: pools (as reductions over
// the kernel window, padding masked by Select), DepthToSpace / SpaceToDepth (views), Resize
// (one Pointwise node per resized axis, reading its taps through indirect indices with weights
// computed in the body), the sampling ops, Col2Im, RotaryEmbedding and the recurrent ops RNN,
// GRU and LSTM (unrolled over a compile-time sequence length).
//
// The reference kernels in interp/kernels/Linalg*.cpp define the semantics; the comments below
// name the interpreter's rule where the lowering mirrors it.
#include "lower/Lower.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>

namespace coil::loop {

namespace {

using Syms = std::vector<SymInt>;

/// The type arithmetic happens in: f16 and bf16 compute in f32, integers in f64 (as the
/// interpreter, which computes in double).
DType calcType(DType t) {
  if (t == DType::F16 || t == DType::BF16) return DType::F32;
  if (!isFloat(t)) return DType::F64;
  return t;
}

const Attrs &attrsOf(const LowerContext &ctx) {
  return ctx.gnode().attrs;
}

SymInt clampSym(const SymInt &v, const SymInt &extent) {
  return max(min(v, extent - 1), SymInt(0));
}

Val andAll(BodyBuilder &b, const std::vector<Val> &conds) {
  if (conds.empty()) return b.intConstant(DType::Bool, 1);
  Val r = conds[0];
  for (size_t i = 1; i < conds.size(); ++i) r = b.op(ScalarOp::And, r, conds[i]);
  return r;
}

Val lowestOf(BodyBuilder &b, DType t) {
  switch (t) {
  case DType::I64:
    return b.intConstant(t, std::numeric_limits<int64_t>::min());
  case DType::I32:
    return b.intConstant(t, std::numeric_limits<int32_t>::min());
  case DType::I16:
    return b.intConstant(t, std::numeric_limits<int16_t>::min());
  case DType::I8:
    return b.intConstant(t, std::numeric_limits<int8_t>::min());
  case DType::U64:
  case DType::U32:
  case DType::U16:
  case DType::U8:
  case DType::Bool:
    return b.intConstant(t, 0);
  default:
    return b.constant(t, -std::numeric_limits<double>::infinity());
  }
}

/// Converts a computed value `v` back to `t` as the interpreter stores its double results:
/// floats are converted, integers rounded half to even and saturated (saturateRound).
Val storeAs(BodyBuilder &b, Val v, DType t) {
  if (isFloat(t) || t == DType::Bool) return b.cast(v, t);
  double lo, hi;
  switch (t) {
  case DType::U8:
    lo = 0, hi = 255;
    break;
  case DType::I8:
    lo = -128, hi = 127;
    break;
  case DType::U16:
    lo = 0, hi = 65535;
    break;
  case DType::I16:
    lo = -32768, hi = 32767;
    break;
  case DType::I32:
    lo = -2147483648.0, hi = 2147483647.0;
    break;
  default:
    lo = -9.2e18, hi = 9.2e18;
    break;
  }
  DType ct = b.dtypeOf(v);
  Val r = b.op(ScalarOp::Round, v);
  Val nan = b.op(ScalarOp::IsNaN, r);
  r = b.op(ScalarOp::Min, b.op(ScalarOp::Max, r, b.constant(ct, lo)), b.constant(ct, hi));
  r = b.op(ScalarOp::Select, nan, b.constant(ct, 0), r);
  return b.cast(r, t);
}

// ---------------------------------------------------------------------------------- pools

/// Sliding-window geometry on symbolic sizes (the interpreter's computeWindow).
struct SymWindow {
  size_t nd = 0;
  Syms in, out, padBegin, padEnd;
  std::vector<int64_t> kernel, strides, dilations;
};

Expected<SymWindow> symWindow(const LowerContext &ctx, const Syms &in,
                              const std::vector<int64_t> &kernel, bool allowCeil) {
  const Attrs &at = attrsOf(ctx);
  SymWindow w;
  size_t nd = in.size();
  w.nd = nd;
  w.in = in;
  w.kernel = kernel;
  w.strides = at.getInts("strides", std::vector<int64_t>(nd, 1));
  w.dilations = at.getInts("dilations", std::vector<int64_t>(nd, 1));
  std::vector<int64_t> pads = at.getInts("pads", std::vector<int64_t>(2 * nd, 0));
  std::string autoPad = at.getString("auto_pad", "NOTSET");
  bool ceilMode = allowCeil && at.getInt("ceil_mode", 0) != 0;
  if (kernel.size() != nd || w.strides.size() != nd || w.dilations.size() != nd ||
      pads.size() != 2 * nd)
    return ctx.error("kernel_shape, strides, dilations and pads must match the " +
                     std::to_string(nd) + " spatial dims");
  for (size_t i = 0; i < nd; ++i) {
    int64_t s = w.strides[i], d = w.dilations[i], k = kernel[i];
    if (s < 1 || d < 1 || k < 1)
      return ctx.error("strides, dilations and kernel sizes must be positive");
    int64_t span = (k - 1) * d + 1;
    SymInt pb = 0, pe = 0, out;
    if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      out = ceilDiv(in[i], s);
      SymInt total = max(SymInt(0), (out - 1) * s + span - in[i]);
      pb = autoPad == "SAME_UPPER" ? floorDiv(total, 2) : total - floorDiv(total, 2);
      pe = total - pb;
    } else if (autoPad == "VALID") {
      out = ceilMode ? ceilDiv(in[i] - span, s) + 1 : floorDiv(in[i] - span, s) + 1;
    } else if (autoPad == "NOTSET") {
      if (pads[i] < 0 || pads[i + nd] < 0) return ctx.error("pads must be non-negative");
      pb = pads[i];
      pe = pads[i + nd];
      SymInt num = in[i] + pb + pe - span;
      out = ceilMode ? min(ceilDiv(num, s) + 1, ceilDiv(in[i] + pb, s)) : floorDiv(num, s) + 1;
    } else {
      return ctx.error("auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '" + autoPad +
                       "'");
    }
    w.out.push_back(out);
    w.padBegin.push_back(pb);
    w.padEnd.push_back(pe);
  }
  return w;
}

/// Input coordinate of tap `k` of the window at output position `o` along dim `d`.
SymInt tapCoord(const SymWindow &w, size_t d, const SymInt &o, const SymInt &k) {
  return o * w.strides[d] - w.padBegin[d] + k * w.dilations[d];
}

/// Whether some tap along dim d may fall below `lo` or at/above `hi` (not provably inside).
bool mayLeave(const LowerContext &ctx, const SymWindow &w, size_t d, const SymInt &lo,
              const SymInt &hi) {
  const SymRanges &rg = ctx.graph().symbols;
  SymInt first = -w.padBegin[d];
  SymInt last = (w.out[d] - 1) * w.strides[d] - w.padBegin[d] + (w.kernel[d] - 1) * w.dilations[d];
  return !proveLE(lo, first, rg) || !proveLT(last, hi, rg);
}

enum class PoolKind { Max, Average, Lp };

Status lowerPool(LowerContext &ctx, PoolKind kind) {
  const TensorType &xt = ctx.inputType(0);
  if (xt.rank() < 3)
    return ctx.error("input 0 must have rank >= 3 ([N, C, spatial...]), got rank " +
                     std::to_string(xt.rank()));
  const Attrs &at = attrsOf(ctx);
  auto ks = at.maybeInts("kernel_shape");
  if (!ks) return ctx.error("attribute kernel_shape is required");
  Syms in(xt.shape.begin() + 2, xt.shape.end());
  COIL_TRY(SymWindow w, symWindow(ctx, in, *ks, true));
  // The output type is authoritative for the sizes (inference computes the same).
  const Syms &outShape = ctx.outputType(0).shape;
  for (size_t d = 0; d < w.nd; ++d) w.out[d] = outShape[2 + d];
  size_t nd = w.nd;
  bool includePad = at.getInt("count_include_pad", 0) != 0;
  int64_t storageOrder = at.getInt("storage_order", 0);
  int64_t p = kind == PoolKind::Lp ? at.getInt("p", 2) : 1;
  DType dt = xt.dtype, ct = calcType(dt);
  if (kind != PoolKind::Max && !isFloat(dt))
    return ctx.error("pooling of " + std::string(dtypeName(dt)) + " tensors needs a float type");
  if (kind == PoolKind::Max) ct = isFloat(dt) ? ct : dt;
  std::vector<bool> mask(nd);
  for (size_t d = 0; d < nd; ++d) mask[d] = mayLeave(ctx, w, d, 0, w.in[d]);
  TensorRef x = ctx.input(0);
  Syms rr(w.kernel.begin(), w.kernel.end());

  // Loads the tap at (outer, r), masked: returns {value, inside}.
  auto tap = [&](BodyBuilder &b, const Syms &o, const Syms &r) -> std::pair<Val, Val> {
    Syms idx{o[0], o[1]};
    std::vector<Val> conds;
    for (size_t d = 0; d < nd; ++d) {
      SymInt c = tapCoord(w, d, o[2 + d], r[d]);
      if (mask[d]) {
        Val ci = b.index(c);
        conds.push_back(b.op(ScalarOp::Ge, ci, b.intConstant(DType::I64, 0)));
        conds.push_back(b.op(ScalarOp::Lt, ci, b.index(w.in[d])));
        c = clampSym(c, w.in[d]);
      }
      idx.push_back(c);
    }
    Val v = b.load(x, idx);
    return {v, conds.empty() ? kNoVal : andAll(b, conds)};
  };

  if (kind == PoolKind::Max) {
    TensorRef y = ctx.reduce(
        ReduceKind::Max, dt, ct, outShape, rr,
        [&](BodyBuilder &b, const Syms &o, const Syms &r, Val *) {
          auto [v, inside] = tap(b, o, r);
          v = b.cast(v, ct);
          return inside == kNoVal ? v : b.op(ScalarOp::Select, inside, v, lowestOf(b, ct));
        },
        false, "maxpool");
    ctx.setOutput(0, y);
    if (ctx.numOutputs() > 1 && ctx.gnode().outputs[1] != kNoValue) {
      // Row-major (or, with storage_order 1, column-major) flat index of the first maximum in
      // the whole input tensor.
      Syms rowStride(nd, 1), colStride(nd, 1);
      for (size_t d = nd - 1; d-- > 0;) rowStride[d] = rowStride[d + 1] * w.in[d + 1];
      for (size_t d = 1; d < nd; ++d) colStride[d] = colStride[d - 1] * w.in[d - 1];
      SymInt inSize = 1;
      for (const SymInt &s : w.in) inSize = inSize * s;
      SymInt channels = xt.shape[1];
      TensorRef ind = ctx.reduce(
          ReduceKind::ArgMax, DType::I64, ct, outShape, rr,
          [&](BodyBuilder &b, const Syms &o, const Syms &r, Val *position) {
            auto [v, inside] = tap(b, o, r);
            v = b.cast(v, ct);
            if (inside != kNoVal) v = b.op(ScalarOp::Select, inside, v, lowestOf(b, ct));
            SymInt flat = (o[0] * channels + o[1]) * inSize;
            for (size_t d = 0; d < nd; ++d)
              flat = flat + tapCoord(w, d, o[2 + d], r[d]) *
                                (storageOrder == 1 ? colStride[d] : rowStride[d]);
            *position = b.index(flat);
            return v;
          },
          false, "maxpool_indices");
      ctx.setOutput(1, ind);
    }
    return okStatus();
  }

  TensorRef sum = ctx.reduce(
      ReduceKind::Sum, ct, ct, outShape, rr,
      [&](BodyBuilder &b, const Syms &o, const Syms &r, Val *) {
        auto [v, inside] = tap(b, o, r);
        v = b.cast(v, ct);
        if (kind == PoolKind::Lp)
          v = b.op(ScalarOp::Pow, b.op(ScalarOp::Abs, v), b.constant(ct, double(p)));
        return inside == kNoVal ? v : b.op(ScalarOp::Select, inside, v, b.constant(ct, 0));
      },
      false, kind == PoolKind::Lp ? "lppool_sum" : "avgpool_sum");
  TensorRef y = ctx.pointwise(dt, outShape, [&](BodyBuilder &b, const Syms &o) {
    Val s = b.load(sum, o);
    if (kind == PoolKind::Lp)
      return storeAs(b, b.op(ScalarOp::Pow, s, b.constant(ct, 1.0 / double(p))), dt);
    // The number of taps counted along each dim: inside the input, or inside the input plus
    // its padding (count_include_pad); taps added by ceil_mode never count.
    SymInt count = 1;
    for (size_t d = 0; d < nd; ++d) {
      SymInt lo = includePad ? -w.padBegin[d] : SymInt(0);
      SymInt hi = includePad ? w.in[d] + w.padEnd[d] : w.in[d];
      if (!mayLeave(ctx, w, d, lo, hi)) {
        count = count * w.kernel[d];
        continue;
      }
      SymInt base = w.padBegin[d] - o[2 + d] * w.strides[d];
      SymInt kmin = max(SymInt(0), ceilDiv(lo + base, w.dilations[d]));
      SymInt kmax = min(SymInt(w.kernel[d] - 1), floorDiv(hi - 1 + base, w.dilations[d]));
      count = count * max(SymInt(0), kmax - kmin + 1);
    }
    return storeAs(b, b.op(ScalarOp::Div, s, b.index(count, ct)), dt);
  });
  ctx.setOutput(0, y);
  return okStatus();
}

Status lowerMaxPool(LowerContext &ctx) {
  return lowerPool(ctx, PoolKind::Max);
}
Status lowerAveragePool(LowerContext &ctx) {
  return lowerPool(ctx, PoolKind::Average);
}
Status lowerLpPool(LowerContext &ctx) {
  return lowerPool(ctx, PoolKind::Lp);
}

Status lowerGlobalPool(LowerContext &ctx, PoolKind kind) {
  const TensorType &xt = ctx.inputType(0);
  if (xt.rank() < 2)
    return ctx.error("input 0 must have rank >= 2 ([N, C, spatial...]), got rank " +
                     std::to_string(xt.rank()));
  DType dt = xt.dtype, ct = calcType(dt);
  if (kind == PoolKind::Max && !isFloat(dt)) ct = dt;
  int64_t p = kind == PoolKind::Lp ? attrsOf(ctx).getInt("p", 2) : 1;
  Syms outShape = ctx.outputType(0).shape;
  Syms rr(xt.shape.begin() + 2, xt.shape.end());
  SymInt size = 1;
  for (const SymInt &s : rr) size = size * s;
  TensorRef x = ctx.input(0);
  ReduceKind rk = kind == PoolKind::Max ? ReduceKind::Max : ReduceKind::Sum;
  TensorRef acc = ctx.reduce(
      rk, kind == PoolKind::Max ? dt : ct, ct, outShape, rr,
      [&](BodyBuilder &b, const Syms &o, const Syms &r, Val *) {
        Syms idx{o[0], o[1]};
        idx.insert(idx.end(), r.begin(), r.end());
        Val v = b.cast(b.load(x, idx), ct);
        if (kind == PoolKind::Lp)
          v = b.op(ScalarOp::Pow, b.op(ScalarOp::Abs, v), b.constant(ct, double(p)));
        return v;
      },
      false, "global_pool");
  if (kind == PoolKind::Max) {
    ctx.setOutput(0, acc);
    return okStatus();
  }
  ctx.setOutput(0, ctx.pointwise(dt, outShape, [&](BodyBuilder &b, const Syms &o) {
    Val s = b.load(acc, o);
    if (kind == PoolKind::Lp)
      return b.cast(b.op(ScalarOp::Pow, s, b.constant(ct, 1.0 / double(p))), dt);
    return b.cast(b.op(ScalarOp::Div, s, b.index(size, ct)), dt);
  }));
  return okStatus();
}

Status lowerGlobalAveragePool(LowerContext &ctx) {
  return lowerGlobalPool(ctx, PoolKind::Average);
}
Status lowerGlobalMaxPool(LowerContext &ctx) {
  return lowerGlobalPool(ctx, PoolKind::Max);
}
Status lowerGlobalLpPool(LowerContext &ctx) {
  return lowerGlobalPool(ctx, PoolKind::Lp);
}

// --------------------------------------------------------------------------- image views

Status lowerDepthToSpace(LowerContext &ctx) {
  const TensorType &xt = ctx.inputType(0);
  int64_t b = attrsOf(ctx).getInt("blocksize", 0);
  bool crd = attrsOf(ctx).getString("mode", "DCR") == "CRD";
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
  int64_t b = attrsOf(ctx).getInt("blocksize", 0);
  bool crd = attrsOf(ctx).getString("mode", "DCR") == "CRD";
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
};

Val resizeScale(BodyBuilder &b, const ResizeAxis &a) {
  if (a.scale) return b.constant(DType::F64, *a.scale);
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
    Val span = c(a.roiEnd - a.roiStart);
    Val one = b.op(ScalarOp::Div, b.op(ScalarOp::Mul, span, inM1()), c(2));
    Val many =
        b.op(ScalarOp::Div, b.op(ScalarOp::Mul, b.op(ScalarOp::Mul, x, span), inM1()), outWM1());
    Val r = b.op(ScalarOp::Select, outIsOne(), one, many);
    Val last = inM1();
    r = b.op(ScalarOp::Add, r, b.op(ScalarOp::Mul, c(a.roiStart), last));
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

/// Resizes axis `a.axis` of `cur`: a Pointwise node of type `nodeT`.
TensorRef resizeAxis(LowerContext &ctx, const ResizeParams &p, const ResizeAxis &a,
                     const TensorRef &cur, DType nodeT, DType accT, bool last, DType outT) {
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
  std::vector<ResizeAxis> ra(na);
  for (size_t i = 0; i < na; ++i) {
    ra[i].axis = axes[i];
    ra[i].in = xt.shape[size_t(axes[i])];
    ra[i].out = outShape[size_t(axes[i])];
  }
  if (present(3)) {
    auto sizes = ctx.intValue(3);
    if (!sizes)
      return ctx.error("Resize with sizes computed at run time is not supported by the compiler "
                       "yet (sizes must be a constant or a shape computation)");
    if (sizes->size() != na)
      return ctx.error("sizes must have " + std::to_string(na) + " values, got " +
                       std::to_string(sizes->size()));
    for (size_t i = 0; i < na; ++i) {
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
    if (!sc)
      return ctx.error("Resize with scales computed at run time is not supported by the "
                       "compiler yet (scales must be a constant)");
    auto v = sc->toDoubles();
    if (v.size() != na)
      return ctx.error("scales must have " + std::to_string(na) + " values, got " +
                       std::to_string(v.size()));
    for (size_t i = 0; i < na; ++i) {
      if (!(v[i] > 0) || !std::isfinite(v[i]))
        return ctx.error("scales must be positive, got " + std::to_string(v[i]));
      ra[i].scale = v[i];
    }
  } else {
    return ctx.error("exactly one of scales and sizes must be given");
  }
  bool hasRoi = p.coordMode == "tf_crop_and_resize" && present(1);
  if (hasRoi) {
    const Tensor *roi = ctx.constant(1);
    if (!roi)
      return ctx.error("Resize with a roi computed at run time is not supported by the compiler "
                       "yet (roi must be a constant)");
    auto v = roi->toDoubles();
    if (v.size() != 2 * na)
      return ctx.error("roi must have " + std::to_string(2 * na) + " values, got " +
                       std::to_string(v.size()));
    for (size_t i = 0; i < na; ++i) ra[i].roiStart = v[i], ra[i].roiEnd = v[na + i];
  }
  DType dt = xt.dtype;
  bool nearest = p.mode == "nearest";
  DType accT = calcType(dt);
  DType nodeT = nearest ? dt : accT;
  std::vector<const ResizeAxis *> todo;
  for (const ResizeAxis &a : ra) {
    auto ic = a.in.maybeConstant(), oc = a.out.maybeConstant();
    // The interpreter skips identity axes; elsewhere the interpolation reproduces the input.
    if (a.scale && ic && oc && std::fabs(*a.scale - 1.0) <= 1e-9 && *ic == *oc &&
        (!hasRoi || (std::fabs(a.roiStart) <= 1e-9 && std::fabs(a.roiEnd - 1) <= 1e-9)))
      continue;
    if (ic && oc && *ic == 0 && *oc > 0)
      return ctx.error("cannot resize an empty axis to size " + std::to_string(*oc));
    if (p.antialias && !a.scale)
      return ctx.error("Resize with antialias and a scale known only at run time is not "
                       "supported by the compiler yet");
    todo.push_back(&a);
  }
  TensorRef cur = ctx.input(0);
  if (todo.empty()) {
    ctx.setOutput(0, cur);
    return okStatus();
  }
  for (size_t i = 0; i < todo.size(); ++i)
    cur = resizeAxis(ctx, p, *todo[i], cur, nodeT, accT, i + 1 == todo.size(), dt);
  ctx.setOutput(0, cur);
  return okStatus();
}

// ------------------------------------------------------------------------- RNN, GRU, LSTM

enum class Cell { Rnn, Gru, Lstm };

struct Activation {
  std::string name;
  double alpha = 0, beta = 0;
};

/// The interpreter's activation functions, on a value of type t.
Val applyActivation(BodyBuilder &b, const Activation &a, Val x) {
  DType t = b.dtypeOf(x);
  auto c = [&](double v) { return b.constant(t, v); };
  const std::string &n = a.name;
  if (n == "Tanh") return b.op(ScalarOp::Tanh, x);
  if (n == "Sigmoid") return b.op(ScalarOp::Sigmoid, x);
  if (n == "Relu") return b.op(ScalarOp::Max, x, c(0));
  if (n == "Affine") return b.op(ScalarOp::Add, b.op(ScalarOp::Mul, c(a.alpha), x), c(a.beta));
  if (n == "LeakyRelu")
    return b.op(ScalarOp::Select, b.op(ScalarOp::Ge, x, c(0)), x,
                b.op(ScalarOp::Mul, c(a.alpha), x));
  if (n == "ThresholdedRelu")
    return b.op(ScalarOp::Select, b.op(ScalarOp::Gt, x, c(a.alpha)), x, c(0));
  if (n == "ScaledTanh")
    return b.op(ScalarOp::Mul, c(a.alpha), b.op(ScalarOp::Tanh, b.op(ScalarOp::Mul, c(a.beta), x)));
  if (n == "HardSigmoid") {
    Val v = b.op(ScalarOp::Add, b.op(ScalarOp::Mul, c(a.alpha), x), c(a.beta));
    return b.op(ScalarOp::Min, b.op(ScalarOp::Max, v, c(0)), c(1));
  }
  if (n == "Elu")
    return b.op(ScalarOp::Select, b.op(ScalarOp::Ge, x, c(0)), x,
                b.op(ScalarOp::Mul, c(a.alpha), b.op(ScalarOp::Sub, b.op(ScalarOp::Exp, x), c(1))));
  if (n == "Softsign")
    return b.op(ScalarOp::Div, x, b.op(ScalarOp::Add, c(1), b.op(ScalarOp::Abs, x)));
  // Softplus: log(1 + exp(x))
  return b.op(ScalarOp::Log, b.op(ScalarOp::Add, c(1), b.op(ScalarOp::Exp, x)));
}

Expected<std::vector<Activation>> readActivations(const LowerContext &ctx, Cell cell,
                                                  int64_t dirs) {
  const Attrs &at = attrsOf(ctx);
  std::vector<std::string> names;
  if (at.has("activations")) names = at.getStrings("activations");
  size_t per = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 2 : 3;
  if (names.empty()) {
    for (int64_t d = 0; d < dirs; ++d) {
      names.push_back(cell == Cell::Rnn ? "Tanh" : "Sigmoid");
      for (size_t k = 1; k < per; ++k) names.push_back("Tanh");
    }
  }
  if (names.size() == per && dirs == 2) names.insert(names.end(), names.begin(), names.end());
  if (names.size() != per * size_t(dirs))
    return ctx.error("activations must list " + std::to_string(per * size_t(dirs)) +
                     " functions, got " + std::to_string(names.size()));
  auto alphas = at.getFloats("activation_alpha");
  auto betas = at.getFloats("activation_beta");
  static const char *known[] = {"Tanh",      "Sigmoid",         "Relu",       "Affine",
                                "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid",
                                "Elu",       "Softsign",        "Softplus"};
  std::vector<Activation> acts;
  for (size_t i = 0; i < names.size(); ++i) {
    Activation a;
    a.name = names[i];
    if (std::find(std::begin(known), std::end(known), a.name) == std::end(known))
      return ctx.error("unsupported activation '" + a.name + "'");
    double da = a.name == "LeakyRelu" ? 0.01 : a.name == "HardSigmoid" ? 0.2 : 1.0;
    double db = a.name == "HardSigmoid" ? 0.5 : a.name == "ScaledTanh" ? 1.0 : 0.0;
    a.alpha = i < alphas.size() ? alphas[i] : da;
    a.beta = i < betas.size() ? betas[i] : db;
    acts.push_back(a);
  }
  return acts;
}

const char *cellName(Cell c) {
  return c == Cell::Rnn ? "RNN" : c == Cell::Gru ? "GRU" : "LSTM";
}

/// Unrolls the recurrence over the (compile-time) sequence length. Per direction: one
/// reduction projects every time step of X (X W^T); per step, a reduction over the hidden size
/// (h R^T), for GRU without linear_before_reset one more ((r * h) R_h^T), and Pointwise nodes
/// for the new hidden (and cell) state. sequence_lens masks the steps past each batch entry's
/// length (the state is kept, Y is 0) and, for the reverse direction, indexes X indirectly.
Status lowerRecurrent(LowerContext &ctx, Cell cell) {
  const TensorType &xt = ctx.inputType(0), &wt = ctx.inputType(1), &rt = ctx.inputType(2);
  const Attrs &at = attrsOf(ctx);
  int64_t layout = at.getInt("layout", 0);
  std::string dir = at.getString("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    return ctx.error("direction must be forward, reverse or bidirectional, got '" + dir + "'");
  int64_t dirs = dir == "bidirectional" ? 2 : 1;
  int64_t gates = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
  if (xt.rank() != 3 || wt.rank() != 3 || rt.rank() != 3)
    return ctx.error("X, W and R must have rank 3");
  SymInt seqS = layout ? xt.shape[1] : xt.shape[0];
  auto seqC = seqS.maybeConstant();
  if (!seqC)
    return ctx.error(std::string(cellName(cell)) + " with a dynamic sequence length (" +
                     seqS.str() + ") is not supported by the compiler yet");
  int64_t seq = *seqC;
  SymInt batch = layout ? xt.shape[0] : xt.shape[1], in = xt.shape[2];
  SymInt hid = at.has("hidden_size") ? SymInt(at.getInt("hidden_size", 0)) : rt.shape[2];
  COIL_TRY(auto acts, readActivations(ctx, cell, dirs));
  std::optional<double> clip;
  if (at.has("clip")) clip = at.getFloat("clip", 0.0);
  bool linearBeforeReset = at.getInt("linear_before_reset", 0) != 0;
  bool inputForget = at.getInt("input_forget", 0) != 0;
  DType dt = xt.dtype, ct = calcType(dt);
  TensorRef x = ctx.input(0), w = ctx.input(1), r = ctx.input(2);
  std::optional<TensorRef> bias, lens, h0, c0, peep;
  if (ctx.hasInput(3)) bias = ctx.input(3);
  if (ctx.hasInput(4)) lens = ctx.input(4);
  if (ctx.hasInput(5)) h0 = ctx.input(5);
  if (cell == Cell::Lstm && ctx.hasInput(6)) c0 = ctx.input(6);
  if (cell == Cell::Lstm && ctx.hasInput(7)) peep = ctx.input(7);
  SymInt gh = hid * gates;

  auto loadX = [&](BodyBuilder &b, const SymInt &t, const SymInt &bi, const SymInt &k) {
    return b.cast(b.load(x, layout ? Syms{bi, t, k} : Syms{t, bi, k}), ct);
  };
  auto clipped = [&](BodyBuilder &b, Val v) {
    if (!clip) return v;
    return b.op(ScalarOp::Min, b.op(ScalarOp::Max, v, b.constant(ct, -*clip)),
                b.constant(ct, *clip));
  };
  // Length of batch entry bi (i64), or nullopt without sequence_lens.
  auto lenOf = [&](BodyBuilder &b, const SymInt &bi) -> Val {
    return b.cast(b.load(*lens, {bi}), DType::I64);
  };

  std::vector<std::vector<TensorRef>> hs(static_cast<size_t>(dirs)), cs(static_cast<size_t>(dirs));
  for (int64_t d = 0; d < dirs; ++d) {
    bool reverse = dir == "reverse" || d == 1;
    const Activation *f = &acts[size_t(d) * acts.size() / size_t(dirs)];
    // X W^T for every time step: [seq, batch, gates * hidden].
    TensorRef xw = ctx.reduce(
        ReduceKind::Sum, ct, ct, {seqS, batch, gh}, {in},
        [&](BodyBuilder &b, const Syms &o, const Syms &rv, Val *) {
          return b.op(ScalarOp::Mul, loadX(b, o[0], o[1], rv[0]),
                      b.cast(b.load(w, {d, o[2], rv[0]}), ct));
        },
        false, "xw");
    auto initial = [&](const std::optional<TensorRef> &init) {
      return ctx.pointwise(ct, {batch, hid}, [&](BodyBuilder &b, const Syms &o) {
        if (!init) return b.constant(ct, 0);
        return b.cast(b.load(*init, layout ? Syms{o[0], d, o[1]} : Syms{d, o[0], o[1]}), ct);
      });
    };
    hs[size_t(d)].push_back(initial(h0));
    if (cell == Cell::Lstm) cs[size_t(d)].push_back(initial(c0));
    for (int64_t s = 0; s < seq; ++s) {
      TensorRef h = hs[size_t(d)].back();
      TensorRef hr = ctx.reduce(
          ReduceKind::Sum, ct, ct, {batch, gh}, {hid},
          [&](BodyBuilder &b, const Syms &o, const Syms &rv, Val *) {
            return b.op(ScalarOp::Mul, b.load(h, {o[0], rv[0]}),
                        b.cast(b.load(r, {d, o[1], rv[0]}), ct));
          },
          false, "hr");
      // The time step read at batch entry bi.
      auto timeOf = [&](BodyBuilder &b, const SymInt &bi) -> SymInt {
        if (!reverse) return s;
        if (!lens) return seq - 1 - s;
        Val t = b.op(ScalarOp::Sub, lenOf(b, bi), b.intConstant(DType::I64, s + 1));
        return b.indirect(t, seqS, false);
      };
      auto biasAt = [&](BodyBuilder &b, const SymInt &g, int64_t which) {
        if (!bias) return b.constant(ct, 0);
        return b.cast(b.load(*bias, {d, g + gh * which}), ct);
      };
      // Gate g (0-based) at (bi, k): X W^T + Wb and h R^T + Rb.
      auto gateXw = [&](BodyBuilder &b, const SymInt &t, const SymInt &bi, int64_t g,
                        const SymInt &k) {
        SymInt gi = hid * g + k;
        return b.op(ScalarOp::Add, b.load(xw, {t, bi, gi}), biasAt(b, gi, 0));
      };
      auto gateHr = [&](BodyBuilder &b, const SymInt &bi, int64_t g, const SymInt &k) {
        SymInt gi = hid * g + k;
        return b.op(ScalarOp::Add, b.load(hr, {bi, gi}), biasAt(b, gi, 1));
      };
      auto gateSum = [&](BodyBuilder &b, const SymInt &t, const SymInt &bi, int64_t g,
                         const SymInt &k) {
        return b.op(ScalarOp::Add, gateXw(b, t, bi, g, k), gateHr(b, bi, g, k));
      };
      auto peepAt = [&](BodyBuilder &b, int64_t which, const SymInt &k) {
        if (!peep) return b.constant(ct, 0);
        return b.cast(b.load(*peep, {d, hid * which + k}), ct);
      };
      auto masked = [&](BodyBuilder &b, const SymInt &bi, Val nv, Val old) {
        if (!lens) return nv;
        Val valid = b.op(ScalarOp::Lt, b.intConstant(DType::I64, s), lenOf(b, bi));
        return b.op(ScalarOp::Select, valid, nv, old);
      };
      std::optional<TensorRef> q;
      if (cell == Cell::Gru && !linearBeforeReset) {
        // (r * h) R_h^T with the reset gate recomputed per j, as the interpreter does.
        q = ctx.reduce(
            ReduceKind::Sum, ct, ct, {batch, hid}, {hid},
            [&](BodyBuilder &b, const Syms &o, const Syms &rv, Val *) {
              SymInt t = timeOf(b, o[0]);
              Val rj = applyActivation(b, f[0], clipped(b, gateSum(b, t, o[0], 1, rv[0])));
              Val hj = b.load(h, {o[0], rv[0]});
              return b.op(ScalarOp::Mul, b.op(ScalarOp::Mul, rj, hj),
                          b.cast(b.load(r, {d, hid * 2 + o[1], rv[0]}), ct));
            },
            false, "gru_rh");
      }
      std::optional<TensorRef> cNew;
      if (cell == Cell::Lstm) {
        TensorRef c = cs[size_t(d)].back();
        cNew = ctx.pointwise(ct, {batch, hid}, [&](BodyBuilder &b, const Syms &o) {
          SymInt t = timeOf(b, o[0]);
          Val cv = b.load(c, o);
          Val ig = applyActivation(b, f[0],
                                   clipped(b, b.op(ScalarOp::Add, gateSum(b, t, o[0], 0, o[1]),
                                                   b.op(ScalarOp::Mul, peepAt(b, 0, o[1]), cv))));
          Val fg =
              inputForget
                  ? b.op(ScalarOp::Sub, b.constant(ct, 1), ig)
                  : applyActivation(b, f[0],
                                    clipped(b, b.op(ScalarOp::Add, gateSum(b, t, o[0], 2, o[1]),
                                                    b.op(ScalarOp::Mul, peepAt(b, 2, o[1]), cv))));
          Val cg = applyActivation(b, f[1], clipped(b, gateSum(b, t, o[0], 3, o[1])));
          Val cn = b.op(ScalarOp::Add, b.op(ScalarOp::Mul, fg, cv), b.op(ScalarOp::Mul, ig, cg));
          return masked(b, o[0], cn, cv);
        });
        cs[size_t(d)].push_back(*cNew);
      }
      TensorRef hNew = ctx.pointwise(ct, {batch, hid}, [&](BodyBuilder &b, const Syms &o) {
        SymInt t = timeOf(b, o[0]);
        Val hv = b.load(h, o);
        Val nh;
        if (cell == Cell::Rnn) {
          nh = applyActivation(b, f[0], clipped(b, gateSum(b, t, o[0], 0, o[1])));
        } else if (cell == Cell::Gru) {
          Val z = applyActivation(b, f[0], clipped(b, gateSum(b, t, o[0], 0, o[1])));
          Val pre;
          if (linearBeforeReset) {
            Val rg = applyActivation(b, f[0], clipped(b, gateSum(b, t, o[0], 1, o[1])));
            pre = b.op(ScalarOp::Add, gateXw(b, t, o[0], 2, o[1]),
                       b.op(ScalarOp::Mul, rg, gateHr(b, o[0], 2, o[1])));
          } else {
            pre = b.op(ScalarOp::Add, gateXw(b, t, o[0], 2, o[1]),
                       b.op(ScalarOp::Add, biasAt(b, hid * 2 + o[1], 1), b.load(*q, o)));
          }
          Val hh = applyActivation(b, f[1], clipped(b, pre));
          nh = b.op(ScalarOp::Add,
                    b.op(ScalarOp::Mul, b.op(ScalarOp::Sub, b.constant(ct, 1), z), hh),
                    b.op(ScalarOp::Mul, z, hv));
        } else {
          Val cn = b.load(*cNew, o);
          Val og = applyActivation(b, f[0],
                                   clipped(b, b.op(ScalarOp::Add, gateSum(b, t, o[0], 1, o[1]),
                                                   b.op(ScalarOp::Mul, peepAt(b, 1, o[1]), cn))));
          nh = b.op(ScalarOp::Mul, og, applyActivation(b, f[2], cn));
        }
        return masked(b, o[0], nh, hv);
      });
      hs[size_t(d)].push_back(hNew);
    }
  }

  // Y: [seq, dirs, batch, hidden] (layout 1: [batch, seq, dirs, hidden]); Y[t] of a direction
  // is the state after the step that read time t, 0 past the batch entry's length.
  if (ctx.numOutputs() > 0 && ctx.gnode().outputs[0] != kNoValue) {
    ctx.setOutput(0, ctx.pointwise(dt, ctx.outputType(0).shape, [&](BodyBuilder &b, const Syms &o) {
      SymInt t = layout ? o[1] : o[0], dv = layout ? o[2] : o[1], bi = layout ? o[0] : o[2],
             k = o[3];
      Val tv = b.index(t), dvv = b.index(dv);
      Val len = lens ? lenOf(b, bi) : b.intConstant(DType::I64, seq);
      Val res = b.constant(ct, 0);
      for (int64_t d = 0; d < dirs; ++d) {
        bool reverse = dir == "reverse" || d == 1;
        // The step s that read time t.
        Val step = reverse ? b.op(ScalarOp::Sub,
                                  b.op(ScalarOp::Sub, len, b.intConstant(DType::I64, 1)), tv)
                           : tv;
        for (int64_t s = 0; s < seq; ++s) {
          Val hit = b.op(ScalarOp::And, b.op(ScalarOp::Eq, dvv, b.intConstant(DType::I64, d)),
                         b.op(ScalarOp::Eq, step, b.intConstant(DType::I64, s)));
          res = b.op(ScalarOp::Select, hit, b.load(hs[size_t(d)][size_t(s + 1)], {bi, k}), res);
        }
      }
      Val valid = b.op(ScalarOp::Lt, tv, len);
      return b.cast(b.op(ScalarOp::Select, valid, res, b.constant(ct, 0)), dt);
    }));
  }
  // Y_h and Y_c: the final states, [dirs, batch, hidden] (layout 1: [batch, dirs, hidden]).
  auto finalState = [&](size_t out, std::vector<std::vector<TensorRef>> &states) {
    if (ctx.numOutputs() <= out || ctx.gnode().outputs[out] == kNoValue) return;
    ctx.setOutput(out,
                  ctx.pointwise(dt, ctx.outputType(out).shape, [&](BodyBuilder &b, const Syms &o) {
                    SymInt dv = layout ? o[1] : o[0], bi = layout ? o[0] : o[1], k = o[2];
                    Val res = b.load(states[0].back(), {bi, k});
                    if (dirs == 2)
                      res = b.op(ScalarOp::Select,
                                 b.op(ScalarOp::Eq, b.index(dv), b.intConstant(DType::I64, 1)),
                                 b.load(states[1].back(), {bi, k}), res);
                    return b.cast(res, dt);
                  }));
  };
  finalState(1, hs);
  if (cell == Cell::Lstm) finalState(2, cs);
  return okStatus();
}

Status lowerRnn(LowerContext &ctx) {
  return lowerRecurrent(ctx, Cell::Rnn);
}
Status lowerGru(LowerContext &ctx) {
  return lowerRecurrent(ctx, Cell::Gru);
}
Status lowerLstm(LowerContext &ctx) {
  return lowerRecurrent(ctx, Cell::Lstm);
}

// ------------------------------------------------------------------------- RotaryEmbedding

Status lowerRotaryEmbedding(LowerContext &ctx) {
  const TensorType &xt = ctx.inputType(0), &cosT = ctx.inputType(1), &sinT = ctx.inputType(2);
  const Attrs &at = attrsOf(ctx);
  bool interleaved = at.getInt("interleaved", 0) != 0;
  SymInt headSize;
  int64_t heads = 0;
  if (xt.rank() == 4) {
    headSize = xt.shape[3];
  } else if (xt.rank() == 3) {
    heads = at.getInt("num_heads", 0);
    if (heads < 1) return ctx.error("num_heads must be positive for a rank-3 input");
    headSize = floorDiv(xt.shape[2], heads);
  } else {
    return ctx.error("input 0 must have rank 3 or 4, got rank " + std::to_string(xt.rank()));
  }
  int64_t rdAttr = at.getInt("rotary_embedding_dim", 0);
  SymInt rd = rdAttr == 0 ? headSize : SymInt(rdAttr);
  if (rdAttr % 2 != 0) return ctx.error("rotary_embedding_dim must be even");
  SymInt half = floorDiv(rd, 2);
  if (cosT.rank() < 1 || sinT.rank() < 1)
    return ctx.error("the cos and sin caches must have rank >= 1");
  DType dt = xt.dtype, ct = calcType(dt);
  // Caches as [rows, half]: rows are position ids, or (batch, seq) without position_ids.
  auto flat2d = [&](size_t i) {
    TensorRef t = ctx.input(i);
    if (t.rank() == 2) return t;
    SymInt rows = 1;
    for (int64_t d = 0; d + 1 < t.rank(); ++d) rows = rows * t.shape[size_t(d)];
    return ctx.reshape(t, {rows, t.shape.back()});
  };
  TensorRef x = ctx.input(0), cosC = flat2d(1), sinC = flat2d(2);
  std::optional<TensorRef> pos;
  if (ctx.hasInput(3)) pos = ctx.input(3);
  SymInt seq = xt.rank() == 4 ? xt.shape[2] : xt.shape[1];
  ctx.setOutput(0, ctx.pointwise(dt, xt.shape, [&](BodyBuilder &b, const Syms &o) {
    // Batch, sequence position and the element within the head; `at(e)` is the index of
    // element e of the same head.
    SymInt bi = o[0], si = xt.rank() == 4 ? o[2] : o[1];
    SymInt i = xt.rank() == 4 ? o[3] : floorMod(o[2], headSize);
    auto at = [&](const SymInt &e) {
      Syms idx = o;
      if (xt.rank() == 4)
        idx[3] = e;
      else
        idx[2] = o[2] - i + e;
      return idx;
    };
    SymInt row;
    if (pos)
      row = b.indirect(b.cast(b.load(*pos, {bi, si}), DType::I64), cosC.shape[0], false);
    else
      row = bi * seq + si;
    SymInt ii = min(i, rd - 1), partner, col;
    Val first;
    if (interleaved) {
      partner = ii + 1 - floorMod(ii, 2) * 2;
      col = floorDiv(ii, 2);
      first = b.op(ScalarOp::Eq, b.index(floorMod(ii, 2)), b.intConstant(DType::I64, 0));
    } else {
      partner = floorMod(ii + half, rd);
      col = floorMod(ii, half);
      first = b.op(ScalarOp::Lt, b.index(ii), b.index(half));
    }
    Val xi = b.cast(b.load(x, at(i)), ct), xp = b.cast(b.load(x, at(partner)), ct);
    Val c = b.cast(b.load(cosC, {row, col}), ct), sn = b.cast(b.load(sinC, {row, col}), ct);
    Val rotFirst = b.op(ScalarOp::Sub, b.op(ScalarOp::Mul, c, xi), b.op(ScalarOp::Mul, sn, xp));
    Val rotSecond = b.op(ScalarOp::Add, b.op(ScalarOp::Mul, sn, xp), b.op(ScalarOp::Mul, c, xi));
    Val rot = b.op(ScalarOp::Select, first, rotFirst, rotSecond);
    Val inRot = b.op(ScalarOp::Lt, b.index(i), b.index(rd));
    return b.cast(b.op(ScalarOp::Select, inRot, rot, xi), dt);
  }));
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

// ---------------------------------------------------------------------------------- Col2Im

/// Each image pixel sums the blocks that cover it: a reduction over the kernel positions k,
/// reading block position (p + pad_begin - k*dilation) / stride where that divides exactly.
Status lowerCol2Im(LowerContext &ctx) {
  const TensorType &xt = ctx.inputType(0);
  if (xt.rank() != 3)
    return ctx.error("input 0 must have rank 3 ([N, C*prod(block), L]), got rank " +
                     std::to_string(xt.rank()));
  auto img = ctx.intValue(1), blkS = ctx.intValue(2);
  if (!img || !blkS)
    return ctx.error("Col2Im with an image_shape or block_shape computed at run time is not "
                     "supported by the compiler yet");
  if (img->size() != blkS->size() || img->empty())
    return ctx.error("image_shape and block_shape must have the same non-zero length");
  std::vector<int64_t> blk;
  for (const SymInt &s : *blkS) {
    auto c = s.maybeConstant();
    if (!c)
      return ctx.error("Col2Im with a block_shape known only at run time is not supported by "
                       "the compiler yet");
    blk.push_back(*c);
  }
  COIL_TRY(SymWindow w, symWindow(ctx, *img, blk, false));
  size_t nd = w.nd;
  DType dt = xt.dtype, ct = calcType(dt);
  SymInt kSize = 1, blocks = 1;
  for (int64_t k : blk) kSize = kSize * k;
  for (const SymInt &o : w.out) blocks = blocks * o;
  auto lc = xt.shape[2].maybeConstant(), bc = blocks.maybeConstant();
  if (lc && bc && *lc != *bc)
    return ctx.error("input dim 2 must be the number of blocks " + std::to_string(*bc) + ", got " +
                     std::to_string(*lc));
  Syms outStride(nd, 1);
  for (size_t d = nd - 1; d-- > 0;) outStride[d] = outStride[d + 1] * w.out[d + 1];
  TensorRef x = ctx.input(0);
  const Syms &os = ctx.outputType(0).shape;
  Syms rr(blk.begin(), blk.end());
  TensorRef sum = ctx.reduce(
      ReduceKind::Sum, ct, ct, os, rr,
      [&](BodyBuilder &b, const Syms &o, const Syms &r, Val *) {
        std::vector<Val> conds;
        SymInt kflat = 0, l = 0;
        for (size_t d = 0; d < nd; ++d) {
          SymInt num = o[2 + d] + w.padBegin[d] - r[d] * w.dilations[d];
          SymInt q = floorDiv(num, w.strides[d]);
          if (w.strides[d] > 1)
            conds.push_back(b.op(ScalarOp::Eq, b.index(floorMod(num, w.strides[d])),
                                 b.intConstant(DType::I64, 0)));
          Val qv = b.index(q);
          conds.push_back(b.op(ScalarOp::Ge, qv, b.intConstant(DType::I64, 0)));
          conds.push_back(b.op(ScalarOp::Lt, qv, b.index(w.out[d])));
          kflat = kflat * blk[d] + r[d];
          l = l + clampSym(q, w.out[d]) * outStride[d];
        }
        Val v = b.cast(b.load(x, {o[0], o[1] * kSize + kflat, l}), ct);
        return b.op(ScalarOp::Select, andAll(b, conds), v, b.constant(ct, 0));
      },
      false, "col2im");
  ctx.setOutput(0, ctx.pointwise(dt, os, [&](BodyBuilder &b, const Syms &o) {
    return b.cast(b.load(sum, o), dt);
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

// ------------------------------------------------------------------------------- MaxUnpool

/// A scatter written as a gather: every output element searches the indices for the last
/// input element that targets it (an ArgMax with selectLast over the whole input), so the cost
/// is (output size) x (input size).
Status lowerMaxUnpool(LowerContext &ctx) {
  const TensorType &xt = ctx.inputType(0), &it = ctx.inputType(1);
  if (xt.rank() < 3)
    return ctx.error("input 0 must have rank >= 3 ([N, C, spatial...]), got rank " +
                     std::to_string(xt.rank()));
  if (it.shape != xt.shape)
    return ctx.error("indices must have the shape of the input " + xt.str() + ", got " + it.str());
  const Attrs &at = attrsOf(ctx);
  size_t nd = size_t(xt.rank() - 2);
  auto ks = at.maybeInts("kernel_shape");
  if (!ks || ks->size() != nd)
    return ctx.error("attribute kernel_shape must have " + std::to_string(nd) + " values");
  auto strides = at.getInts("strides", std::vector<int64_t>(nd, 1));
  auto pads = at.getInts("pads", std::vector<int64_t>(2 * nd, 0));
  if (strides.size() != nd || pads.size() != 2 * nd)
    return ctx.error("strides and pads must match the " + std::to_string(nd) + " spatial dims");
  // Indices address the default-sized output; an explicit output_shape only enlarges it.
  Syms inferred{xt.shape[0], xt.shape[1]};
  for (size_t i = 0; i < nd; ++i)
    inferred.push_back((xt.shape[2 + i] - 1) * strides[i] - pads[i] - pads[i + nd] + (*ks)[i]);
  size_t rank = inferred.size();
  Syms stride(rank, 1);
  for (size_t d = rank - 1; d-- > 0;) stride[d] = stride[d + 1] * inferred[d + 1];
  DType dt = xt.dtype;
  TensorRef x = ctx.input(0), ind = ctx.input(1);
  const Syms &os = ctx.outputType(0).shape;
  SymInt xNumel = 1;
  for (const SymInt &s : xt.shape) xNumel = xNumel * s;
  Syms xStride(rank, 1);
  for (size_t d = rank - 1; d-- > 0;) xStride[d] = xStride[d + 1] * xt.shape[d + 1];
  // The flat index (in the inferred shape) that output point o has, and whether it has one.
  auto target = [&](BodyBuilder &b, const Syms &o) -> std::pair<Val, Val> {
    SymInt flat = 0;
    std::vector<Val> conds;
    for (size_t d = 0; d < rank; ++d) {
      flat = flat + o[d] * stride[d];
      if (d >= 2 && !(os[d] == inferred[d]))
        conds.push_back(b.op(ScalarOp::Lt, b.index(o[d]), b.index(inferred[d])));
    }
    return {b.index(flat), andAll(b, conds)};
  };
  TensorRef last = ctx.reduce(
      ReduceKind::ArgMax, DType::I64, DType::I32, os, xt.shape,
      [&](BodyBuilder &b, const Syms &o, const Syms &r, Val *position) {
        auto [flat, has] = target(b, o);
        Val hit =
            b.op(ScalarOp::And, has, b.op(ScalarOp::Eq, b.cast(b.load(ind, r), DType::I64), flat));
        SymInt pos = 0;
        for (size_t d = 0; d < rank; ++d) pos = pos + r[d] * xStride[d];
        *position = b.index(pos);
        return b.cast(hit, DType::I32);
      },
      true, "max_unpool_search");
  TensorRef xFlat = ctx.reshape(x, {xNumel}), indFlat = ctx.reshape(ind, {xNumel});
  ctx.setOutput(0, ctx.pointwise(dt, os, [&](BodyBuilder &b, const Syms &o) {
    auto [flat, has] = target(b, o);
    SymInt p = b.indirect(b.load(last, o), xNumel, false);
    Val hit = b.op(ScalarOp::And, has,
                   b.op(ScalarOp::Eq, b.cast(b.load(indFlat, {p}), DType::I64), flat));
    Val zero = isFloat(dt) ? b.constant(dt, 0) : b.intConstant(dt, 0);
    return b.op(ScalarOp::Select, hit, b.load(xFlat, {p}), zero);
  }));
  return okStatus();
}

} // namespace

void registerSpatialLowerings(LowerRegistry &r) {
  r.add(OpKind::MaxPool, lowerMaxPool);
  r.add(OpKind::AveragePool, lowerAveragePool);
  r.add(OpKind::LpPool, lowerLpPool);
  r.add(OpKind::GlobalAveragePool, lowerGlobalAveragePool);
  r.add(OpKind::GlobalMaxPool, lowerGlobalMaxPool);
  r.add(OpKind::GlobalLpPool, lowerGlobalLpPool);
  r.add(OpKind::DepthToSpace, lowerDepthToSpace);
  r.add(OpKind::SpaceToDepth, lowerSpaceToDepth);
  r.add(OpKind::Resize, lowerResize);
  r.add(OpKind::RNN, lowerRnn);
  r.add(OpKind::GRU, lowerGru);
  r.add(OpKind::LSTM, lowerLstm);
  r.add(OpKind::RotaryEmbedding, lowerRotaryEmbedding);
  r.add(OpKind::AffineGrid, lowerAffineGrid);
  r.add(OpKind::Col2Im, lowerCol2Im);
  r.add(OpKind::GridSample, lowerGridSample);
  r.add(OpKind::MaxRoiPool, lowerMaxRoiPool);
  r.add(OpKind::RoiAlign, lowerRoiAlign);
  r.add(OpKind::MaxUnpool, lowerMaxUnpool);
}

} // namespace coil::loop
