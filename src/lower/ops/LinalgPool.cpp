// Lowerings of the pools (reductions over the kernel window, padding masked by Select), Col2Im
// and MaxUnpool, and the definitions of the helpers that SpatialUtil.h declares for the spatial
// lowerings (LinalgPool, LinalgResize, LinalgSample, LinalgRnn).
//
// The reference kernels in interp/kernels/Linalg*.cpp define the semantics; the comments below
// name the interpreter's rule where the lowering mirrors it.
#include "lower/ops/SpatialUtil.h"

#include <algorithm>
#include <limits>

namespace coil::loop {
namespace spatial {

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
  auto [lo, hi] = saturationRange(t);
  DType ct = b.dtypeOf(v);
  Val r = b.op(ScalarOp::Round, v);
  Val nan = b.op(ScalarOp::IsNaN, r);
  r = b.op(ScalarOp::Min, b.op(ScalarOp::Max, r, b.constant(ct, lo)), b.constant(ct, hi));
  r = b.op(ScalarOp::Select, nan, b.constant(ct, 0), r);
  return b.cast(r, t);
}

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

namespace {

// ---------------------------------------------------------------------------------- pools

/// Sliding-window geometry on symbolic sizes (the interpreter's computeWindow).
struct SymWindow {
  size_t nd = 0;
  Syms in, out, padBegin, padEnd;
  std::vector<int64_t> kernel, strides, dilations;
};

/// The window of the decoded attributes `a` over input spatial dims `in`.
Expected<SymWindow> symWindow(const WindowAttrs &a, const Syms &in) {
  SymWindow w;
  w.nd = in.size();
  w.in = in;
  w.kernel = *a.kernelShape;
  w.strides = a.strides;
  w.dilations = a.dilations;
  for (size_t i = 0; i < w.nd; ++i) {
    COIL_TRY(WindowDim d, windowDim(a, i, in[i], SymInt(w.kernel[i])));
    w.out.push_back(d.out);
    w.padBegin.push_back(d.padBegin);
    w.padEnd.push_back(d.padEnd);
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
  COIL_TRY_STATUS(spatialDims(xt.rank()));
  Syms in(xt.shape.begin() + 2, xt.shape.end());
  COIL_TRY(WindowAttrs wa, decodePoolWindow(ctx.gnode(), in.size()));
  COIL_TRY(SymWindow w, symWindow(wa, in));
  // The output type is authoritative for the sizes (inference computes the same).
  for (size_t d = 0; d < w.nd; ++d) w.out[d] = ctx.outputType(0).shape[2 + d];
  size_t nd = w.nd;
  bool includePad = wa.countIncludePad;
  int64_t storageOrder = wa.storageOrder;
  int64_t p = kind == PoolKind::Lp ? wa.p : 1;
  DType dt = xt.dtype, ct = calcType(dt);
  if (kind != PoolKind::Max && !isFloat(dt))
    return ctx.error("pooling of " + std::string(dtypeName(dt)) + " tensors needs a float type");
  if (kind == PoolKind::Max) ct = isFloat(dt) ? ct : dt;
  std::vector<bool> mask(nd);
  for (size_t d = 0; d < nd; ++d) mask[d] = mayLeave(ctx, w, d, 0, w.in[d]);
  TensorRef x = ctx.input(0);
  Syms rr(w.kernel.begin(), w.kernel.end());
  // Channels-last: when x is the [N, C, H, W] view of an [N, H, W, C] node (the channels-last
  // pass, lower/ChannelsLast.h), the pooled nodes are [N, OH, OW, C] too and the output is
  // their channels-first view, so that both reads and writes run along the channels.
  bool wantIndices = ctx.numOutputs() > 1 && ctx.gnode().outputs[1] != kNoValue;
  bool channelsLast = xt.rank() == 4 && !wantIndices &&
                      ctx.program().nodes.at(size_t(x.node)).shape.size() == 4 &&
                      ctx.permute(x, {0, 2, 3, 1}).map.empty();
  Syms outShape = ctx.outputType(0).shape, nodeShape = outShape;
  if (channelsLast) nodeShape = {outShape[0], outShape[2], outShape[3], outShape[1]};
  // The [N, C, spatial...] point of a node point.
  auto nchw = [&](const Syms &o) -> Syms {
    return channelsLast ? Syms{o[0], o[3], o[1], o[2]} : o;
  };
  auto result = [&](const TensorRef &y) { return channelsLast ? ctx.permute(y, {0, 3, 1, 2}) : y; };

  // Loads the tap at (outer, r), masked: returns {value, inside}.
  auto tap = [&](BodyBuilder &b, const Syms &on, const Syms &r) -> std::pair<Val, Val> {
    Syms o = nchw(on);
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

  // MaxPool without indices and with a small constant window: a Pointwise node that takes
  // the max of the taps in the reduction's order, so that its innermost loop runs along the
  // output row and vectorizes (a Reduction loops over the window per output point). The taps
  // keep the reduction's results: NaN propagates, and of equal values (+0, -0) the first stays.
  int64_t taps = 1;
  std::vector<int64_t> kc;
  for (const SymInt &k : rr) {
    auto c = k.maybeConstant();
    taps = c && *c >= 1 ? taps * *c : 1 << 20;
    kc.push_back(c ? *c : 0);
  }
  if (kind == PoolKind::Max && !wantIndices && taps <= 49) {
    TensorRef y = ctx.pointwise(dt, nodeShape, [&](BodyBuilder &b, const Syms &o) {
      Val acc = kNoVal;
      Syms r(nd, SymInt(0));
      for (int64_t flat = 0; flat < taps; ++flat) {
        int64_t rest = flat;
        for (size_t d = nd; d-- > 0;) {
          r[d] = SymInt(rest % kc[d]);
          rest /= kc[d];
        }
        auto [v, inside] = tap(b, o, r);
        v = b.cast(v, ct);
        if (inside != kNoVal) v = b.op(ScalarOp::Select, inside, v, lowestOf(b, ct));
        acc = acc == kNoVal ? v : b.op(ScalarOp::Max, v, acc);
      }
      return b.cast(acc, dt);
    });
    ctx.setOutput(0, result(y));
    return okStatus();
  }

  if (kind == PoolKind::Max) {
    TensorRef y = ctx.reduce(
        ReduceKind::Max, dt, ct, nodeShape, rr,
        [&](BodyBuilder &b, const Syms &o, const Syms &r, Val *) {
          auto [v, inside] = tap(b, o, r);
          v = b.cast(v, ct);
          return inside == kNoVal ? v : b.op(ScalarOp::Select, inside, v, lowestOf(b, ct));
        },
        false, "maxpool");
    ctx.setOutput(0, result(y));
    if (wantIndices) {
      // Row-major (or, with storage_order 1, column-major) flat index, in the whole input
      // tensor, of the first tap inside the input that holds the maximum (the first NaN when
      // there is one); -1 when no tap is inside the input.
      Syms rowStride(nd, 1), colStride(nd, 1);
      for (size_t d = nd - 1; d-- > 0;) rowStride[d] = rowStride[d + 1] * w.in[d + 1];
      for (size_t d = 1; d < nd; ++d) colStride[d] = colStride[d - 1] * w.in[d - 1];
      SymInt inSize = 1;
      for (const SymInt &s : w.in) inSize = inSize * s;
      SymInt channels = xt.shape[1];
      TensorRef ind = ctx.reduce(
          ReduceKind::ArgMax, DType::I64, DType::I32, outShape, rr,
          [&](BodyBuilder &b, const Syms &o, const Syms &r, Val *position) {
            auto [v, inside] = tap(b, o, r);
            v = b.cast(v, ct);
            Val m = b.cast(b.load(y, o), ct);
            Val hit = b.op(ScalarOp::Eq, v, m);
            if (isFloat(ct))
              hit = b.op(ScalarOp::Or, hit,
                         b.op(ScalarOp::And, b.op(ScalarOp::IsNaN, v), b.op(ScalarOp::IsNaN, m)));
            SymInt flat = (o[0] * channels + o[1]) * inSize;
            for (size_t d = 0; d < nd; ++d)
              flat = flat + tapCoord(w, d, o[2 + d], r[d]) *
                                (storageOrder == 1 ? colStride[d] : rowStride[d]);
            *position = b.index(flat);
            if (inside != kNoVal) {
              hit = b.op(ScalarOp::And, inside, hit);
              *position = b.op(ScalarOp::Select, inside, *position, b.intConstant(DType::I64, -1));
            }
            return b.cast(hit, DType::I32);
          },
          false, "maxpool_indices");
      ctx.setOutput(1, ind);
    }
    return okStatus();
  }

  TensorRef sum = ctx.reduce(
      ReduceKind::Sum, ct, ct, nodeShape, rr,
      [&](BodyBuilder &b, const Syms &o, const Syms &r, Val *) {
        auto [v, inside] = tap(b, o, r);
        v = b.cast(v, ct);
        if (kind == PoolKind::Lp)
          v = b.op(ScalarOp::Pow, b.op(ScalarOp::Abs, v), b.constant(ct, double(p)));
        return inside == kNoVal ? v : b.op(ScalarOp::Select, inside, v, b.constant(ct, 0));
      },
      false, kind == PoolKind::Lp ? "lppool_sum" : "avgpool_sum");
  TensorRef y = ctx.pointwise(dt, nodeShape, [&](BodyBuilder &b, const Syms &on) {
    Val s = b.load(sum, on);
    Syms o = nchw(on);
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
  ctx.setOutput(0, result(y));
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
  COIL_TRY(WindowAttrs wa, decodeWindow(ctx.gnode(), img->size()));
  wa.kernelShape = blk;
  COIL_TRY(SymWindow w, symWindow(wa, *img));
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

// ------------------------------------------------------------------------------- MaxUnpool

/// A scatter written as a gather: every output element searches the indices for the last
/// input element that targets it (an ArgMax with selectLast over the whole input), so the cost
/// is (output size) x (input size).
Status lowerMaxUnpool(LowerContext &ctx) {
  const TensorType &xt = ctx.inputType(0), &it = ctx.inputType(1);
  COIL_TRY_STATUS(spatialDims(xt.rank()));
  if (it.shape != xt.shape)
    return ctx.error("indices must have the shape of the input " + xt.str() + ", got " + it.str());
  size_t nd = size_t(xt.rank() - 2);
  COIL_TRY(WindowAttrs wa, decodePoolWindow(ctx.gnode(), nd));
  // Indices address the default-sized output; an explicit output_shape only enlarges it.
  Syms inferred{xt.shape[0], xt.shape[1]};
  for (size_t i = 0; i < nd; ++i) inferred.push_back(unpoolDim(wa, i, xt.shape[2 + i]));
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

void registerLinalgPoolLowerings(LowerRegistry &r) {
  r.add(OpKind::MaxPool, lowerMaxPool);
  r.add(OpKind::AveragePool, lowerAveragePool);
  r.add(OpKind::LpPool, lowerLpPool);
  r.add(OpKind::GlobalAveragePool, lowerGlobalAveragePool);
  r.add(OpKind::GlobalMaxPool, lowerGlobalMaxPool);
  r.add(OpKind::GlobalLpPool, lowerGlobalLpPool);
  r.add(OpKind::MaxUnpool, lowerMaxUnpool);
  r.add(OpKind::Col2Im, lowerCol2Im);
}

} // namespace spatial
} // namespace coil::loop
