// Lowering of the convolutions: Conv, ConvTranspose, ConvInteger, QLinearConv.
//
// Floating Conv and ConvTranspose with 1 to 3 spatial dims call the CPU extern (im2col + GEMM,
// GEMM + col2im; f16/bf16 Conv accumulates in f32, f16/bf16 ConvTranspose goes through the f64
// kernel), with the bias added by a Pointwise epilogue; depthwise Conv sums its taps in a
// Pointwise node (in f32 for f16/bf16). Every other case of Conv and the quantized convolutions
// lower to one Reduction over (input channel of the group, kernel position) that reads the input
// through clamped indices and zeroes the products that fall into the padding, accumulating as
// the interpreter does (f64 for floats, i64 for integers, zero points subtracted before the
// padding test so that padding contributes zero).
#include "ir/Infer.h"
#include "kernels/Externs.h"
#include "lower/ChannelsLast.h"
#include "lower/ops/LinalgLower.h"

namespace coil::loop::linalg {
namespace {

/// Geometry of a convolution on symbolic shapes.
struct ConvPlan {
  size_t nd = 0;
  SymInt n, c, m, cg, mg;
  int64_t group = 1;
  std::vector<SymInt> in, k, out, pb;
  std::vector<int64_t> s, d;
  bool padded = false;                             ///< whether a window may reach outside the input
  std::optional<std::vector<int64_t>> kernelShape; ///< the attribute, when given
};

bool isExternType(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16;
}

/// The type the extern and the depthwise taps accumulate in: f32 for f16/bf16.
DType computeTypeOf(DType t) {
  return t == DType::F16 || t == DType::BF16 ? DType::F32 : t;
}

/// Reads group/strides/dilations/pads/auto_pad of a Conv-like node with input x [N, C, ...]
/// and weights w [M, C/group, k...]; the output sizes come from inference.
Expected<ConvPlan> planConv(LowerContext &ctx, const TensorRef &x, const TensorRef &w) {
  COIL_TRY_STATUS(spatialDims(x.rank()));
  COIL_TRY_STATUS(checkWeightRank(x.rank(), w.rank()));
  ConvPlan p;
  p.nd = size_t(x.rank() - 2);
  size_t nd = p.nd;
  COIL_TRY(WindowAttrs wa, decodeWindow(ctx.gnode(), nd));
  p.group = wa.group;
  p.kernelShape = wa.kernelShape;
  p.n = x.shape[0];
  p.c = x.shape[1];
  p.m = w.shape[0];
  p.cg = w.shape[1];
  auto cc = p.c.maybeConstant(), mc = p.m.maybeConstant(), cgc = p.cg.maybeConstant();
  if ((cc && cgc && *cgc * p.group != *cc) || (mc && *mc % p.group != 0))
    return ctx.error("group " + std::to_string(p.group) + " does not fit " + p.c.str() +
                     " input channels and " + p.m.str() + " output channels");
  p.mg = p.group == 1 ? p.m : floorDiv(p.m, SymInt(p.group));
  p.s = wa.strides;
  p.d = wa.dilations;
  const TensorType &yt = ctx.outputType(0);
  for (size_t i = 0; i < nd; ++i) {
    p.in.push_back(x.shape[2 + i]);
    p.k.push_back(w.shape[2 + i]);
    p.out.push_back(yt.shape[2 + i]);
    if (wa.same()) {
      p.pb.push_back(samePadBegin(wa, i, p.in[i], p.k[i], p.out[i]));
      p.padded = true;
    } else if (wa.autoPad == AutoPad::Valid) {
      p.pb.push_back(0);
    } else {
      p.pb.push_back(wa.pads[i]);
      p.padded = p.padded || wa.pads[i] != 0 || wa.pads[i + nd] != 0;
    }
  }
  return p;
}

/// The 26 size arguments shared by the conv and conv-transpose externs after the buffers.
std::vector<ExternArg> geometryArgs(const SymInt &n, const SymInt &c, const SymInt &m,
                                    int64_t group, size_t nd, const std::vector<SymInt> &in,
                                    const std::vector<SymInt> &k, const std::vector<SymInt> &out,
                                    const std::vector<int64_t> &s, const std::vector<int64_t> &d,
                                    const std::vector<SymInt> &pb) {
  std::vector<ExternArg> a{intArg(n), intArg(c), intArg(m), intArg(group), intArg(int64_t(nd))};
  auto three = [&](auto get, SymInt fill) {
    for (size_t i = 0; i < 3; ++i) a.push_back(intArg(i < nd ? SymInt(get(i)) : fill));
  };
  three([&](size_t i) { return in[i]; }, 1);
  three([&](size_t i) { return k[i]; }, 1);
  three([&](size_t i) { return out[i]; }, 1);
  three([&](size_t i) { return SymInt(s[i]); }, 1);
  three([&](size_t i) { return SymInt(d[i]); }, 1);
  three([&](size_t i) { return pb[i]; }, 0);
  return a;
}

/// Element converters of the reduction: the loaded raw value -> the accumulation type (with a
/// zero point subtracted); `oc` is the output channel (for per-channel weight zero points).
using ConvElemFn = std::function<Val(BodyBuilder &, Val raw, const SymInt &oc)>;

ConvElemFn castElem(DType acc) {
  return [acc](BodyBuilder &b, Val v, const SymInt &) { return b.cast(v, acc); };
}
ConvElemFn zeroPointElem(std::optional<TensorRef> zp, bool perChannel) {
  return [zp, perChannel](BodyBuilder &b, Val v, const SymInt &oc) {
    v = b.cast(v, DType::I64);
    if (!zp) return v;
    return b.op(ScalarOp::Sub, v, loadPerIndex(b, *zp, perChannel ? oc : SymInt(0), DType::I64));
  };
}

/// y [n, m, out...] = sum over (ic, kernel position) of fx(x) * fw(w), products in the padding
/// being zero.
TensorRef convReduction(LowerContext &ctx, const ConvPlan &p, const TensorRef &x,
                        const TensorRef &w, DType outT, DType acc, const ConvElemFn &fx,
                        const ConvElemFn &fw) {
  std::vector<SymInt> outer{p.n, p.m}, rr{p.cg};
  outer.insert(outer.end(), p.out.begin(), p.out.end());
  rr.insert(rr.end(), p.k.begin(), p.k.end());
  return ctx.reduce(
      ReduceKind::Sum, outT, acc, outer, rr,
      [&](BodyBuilder &b, const std::vector<SymInt> &o, const std::vector<SymInt> &r, Val *) {
        SymInt oc = o[1];
        SymInt ic = p.group == 1 ? r[0] : floorDiv(oc, p.mg) * p.cg + r[0];
        std::vector<SymInt> xi{o[0], ic}, wi{oc};
        wi.insert(wi.end(), r.begin(), r.end());
        Val inside = kNoVal;
        for (size_t i = 0; i < p.nd; ++i) {
          SymInt pos = o[2 + i] * p.s[i] - p.pb[i] + r[1 + i] * p.d[i];
          if (!p.padded) {
            xi.push_back(pos);
            continue;
          }
          xi.push_back(max(SymInt(0), min(pos, p.in[i] - 1)));
          Val pv = b.index(pos);
          Val ok = b.op(ScalarOp::And, b.op(ScalarOp::Ge, pv, b.index(0)),
                        b.op(ScalarOp::Lt, pv, b.index(p.in[i])));
          inside = inside == kNoVal ? ok : b.op(ScalarOp::And, inside, ok);
        }
        Val prod = b.op(ScalarOp::Mul, fx(b, b.load(x, xi), oc), fw(b, b.load(w, wi), oc));
        if (inside != kNoVal) prod = b.op(ScalarOp::Select, inside, prod, b.constant(acc, 0));
        return prod;
      });
}

/// A depthwise convolution (one input channel per group) with a small constant window, as a
/// Pointwise node of type t that sums the taps in the reduction's order, in t: its innermost
/// loop runs along the output row, so it vectorizes, where a Reduction would loop over a 3-tap
/// inner dim. x and w are loaded as their own type and cast to t.
std::optional<TensorRef> depthwiseTaps(LowerContext &ctx, const ConvPlan &p, const TensorRef &x,
                                       const TensorRef &w, DType t) {
  std::vector<int64_t> ks;
  int64_t taps = 1;
  for (const SymInt &k : p.k) {
    auto kc = k.maybeConstant();
    if (!kc || *kc < 1) return std::nullopt;
    ks.push_back(*kc);
    taps *= *kc;
  }
  if (taps > 49) return std::nullopt;
  std::vector<SymInt> shape{p.n, p.m};
  shape.insert(shape.end(), p.out.begin(), p.out.end());
  return ctx.pointwise(t, shape, [&](BodyBuilder &b, const std::vector<SymInt> &o) {
    SymInt oc = o[1];
    SymInt ic = floorDiv(oc, p.mg); // cg == 1: input channel of this output channel's group
    Val acc = b.constant(t, 0);
    std::vector<int64_t> tap(p.nd, 0);
    for (int64_t flat = 0; flat < taps; ++flat) {
      int64_t rest = flat;
      for (size_t i = p.nd; i-- > 0;) {
        tap[i] = rest % ks[i];
        rest /= ks[i];
      }
      std::vector<SymInt> xi{o[0], ic}, wi{oc, 0};
      Val inside = kNoVal;
      for (size_t i = 0; i < p.nd; ++i) {
        wi.push_back(tap[i]);
        SymInt pos = o[2 + i] * p.s[i] - p.pb[i] + tap[i] * p.d[i];
        if (!p.padded) {
          xi.push_back(pos);
          continue;
        }
        xi.push_back(max(SymInt(0), min(pos, p.in[i] - 1)));
        Val pv = b.index(pos);
        Val ok = b.op(ScalarOp::And, b.op(ScalarOp::Ge, pv, b.index(0)),
                      b.op(ScalarOp::Lt, pv, b.index(p.in[i])));
        inside = inside == kNoVal ? ok : b.op(ScalarOp::And, inside, ok);
      }
      Val xv = b.cast(b.load(x, xi), t);
      Val wv = b.cast(b.load(w, wi), t);
      Val prod = b.op(ScalarOp::Mul, xv, wv);
      if (inside != kNoVal) prod = b.op(ScalarOp::Select, inside, prod, b.constant(t, 0));
      acc = b.op(ScalarOp::Add, acc, prod);
    }
    return acc;
  });
}

/// y + bias[channel] broadcast over [n, m, spatial...], computed in `computeT`, stored as outT.
TensorRef addChannelBias(LowerContext &ctx, const TensorRef &y, const TensorRef &bias,
                         DType computeT, DType outT) {
  return ctx.pointwise(outT, y.shape, [&](BodyBuilder &b, const std::vector<SymInt> &i) {
    Val v = b.cast(b.load(y, i), computeT);
    return b.cast(b.op(ScalarOp::Add, v, b.cast(b.load(bias, {i[1]}), computeT)), outT);
  });
}

/// `t` [n, c, h, w] as a contiguous channels-last node [n, h, w, c]: the node itself when `t`
/// is the channels-first view of one (a Transpose of the channels-last pass, the weights it
/// transposed), else a realized copy.
TensorRef channelsLastOperand(LowerContext &ctx, const TensorRef &t) {
  TensorRef v = ctx.permute(t, {0, 2, 3, 1});
  return layoutOf(ctx, v) == Layout::Plain ? wholeNode(ctx, v) : ctx.realize(v);
}

/// A 2-D convolution through the channels-last extern: x and w are read as [n, h, w, c] and
/// [m, kh, kw, c/group], the extern writes y [n, oh, ow, m], the bias is added there, and the
/// result is that node seen as [n, m, oh, ow] (a view: the readers the channels-last pass left
/// in channels-last order read it in place).
TensorRef channelsLastConv(LowerContext &ctx, const ConvPlan &p, const TensorRef &x,
                           const TensorRef &w, const std::optional<TensorRef> &bias, DType dt) {
  TensorRef xn = channelsLastOperand(ctx, x), wn = channelsLastOperand(ctx, w);
  std::vector<ExternArg> args{nodeArg(xn), nodeArg(wn), outArg(0)};
  auto g = geometryArgs(p.n, p.c, p.m, p.group, p.nd, p.in, p.k, p.out, p.s, p.d, p.pb);
  args.insert(args.end(), g.begin(), g.end());
  std::vector<SymInt> shape{p.n, p.out[0], p.out[1], p.m};
  TensorRef y = ctx.externCall(kernels::cpuSymbol(kernels::ExternId::ConvNhwc, dt), std::move(args),
                               {{dt, shape}})[0];
  if (bias) {
    DType ct = computeTypeOf(dt);
    TensorRef b = *bias;
    y = ctx.pointwise(dt, shape, [&](BodyBuilder &bb, const std::vector<SymInt> &i) {
      Val v = bb.cast(bb.load(y, i), ct);
      return bb.cast(bb.op(ScalarOp::Add, v, bb.cast(bb.load(b, {i[3]}), ct)), dt);
    });
  }
  return ctx.permute(y, {0, 3, 1, 2});
}

Status lowerConv(LowerContext &ctx) {
  TensorRef x = ctx.input(0), w = ctx.input(1);
  COIL_TRY(ConvPlan p, planConv(ctx, x, w));
  if (const auto &ks = p.kernelShape)
    for (size_t i = 0; i < ks->size() && i < p.nd; ++i)
      if (auto kc = p.k[i].maybeConstant(); kc && *kc != (*ks)[i])
        return ctx.error("kernel_shape differs from the weight shape");
  DType dt = ctx.outputType(0).dtype;
  std::optional<TensorRef> bias;
  if (ctx.hasInput(2)) bias = ctx.input(2);
  TensorRef y;
  bool depthwise = p.group > 1 && p.cg == SymInt(1);
  DType ct = computeTypeOf(dt);
  // Up to 3 spatial dims, depthwise convolutions go to the extern too (its direct loops read a
  // realized input once per tap, where a generated kernel would recompute the fused producer).
  if (isExternType(dt) && depthwise && p.nd > 3) {
    // One input channel per group: im2col + GEMM would make a GEMM of one row per group. A
    // direct reduction over the kernel window, accumulated in the compute type (the element
    // type, f32 for f16/bf16), is much faster. The bias is added before rounding to dt.
    if (auto taps = depthwiseTaps(ctx, p, x, w, ct))
      y = *taps;
    else
      y = convReduction(ctx, p, x, w, ct, ct, castElem(ct), castElem(ct));
    if (bias)
      y = addChannelBias(ctx, y, *bias, ct, dt);
    else if (ct != dt)
      y = ctx.pointwise(dt, y.shape, [&](BodyBuilder &b, const std::vector<SymInt> &i) {
        return b.cast(b.load(y, i), dt);
      });
  } else if (isExternType(dt) && p.nd == 2 && ctx.gnode().attrs.getInt(kChannelsLastAttr, 0) != 0) {
    y = channelsLastConv(ctx, p, x, w, bias, dt);
  } else if (isExternType(dt) && p.nd <= 3) {
    x = ctx.realize(x);
    w = ctx.realize(w);
    std::vector<ExternArg> args{nodeArg(x), nodeArg(w), outArg(0)};
    auto g = geometryArgs(p.n, p.c, p.m, p.group, p.nd, p.in, p.k, p.out, p.s, p.d, p.pb);
    args.insert(args.end(), g.begin(), g.end());
    y = ctx.externCall(kernels::cpuSymbol(kernels::ExternId::Conv, dt), std::move(args),
                       {{dt, ctx.outputType(0).shape}})[0];
    if (bias) y = addChannelBias(ctx, y, *bias, ct, dt);
  } else {
    if (!isFloat(dt)) return ctx.error("conv needs a floating-point input");
    // The interpreter accumulates in double and adds the bias before rounding once.
    DType mid = bias ? DType::F64 : dt;
    y = convReduction(ctx, p, x, w, mid, DType::F64, castElem(DType::F64), castElem(DType::F64));
    if (bias) y = addChannelBias(ctx, y, *bias, DType::F64, dt);
  }
  ctx.setOutput(0, y);
  return okStatus();
}

std::optional<TensorRef> optionalInput(LowerContext &ctx, size_t i) {
  if (!ctx.hasInput(i)) return std::nullopt;
  return ctx.input(i);
}

Status lowerConvInteger(LowerContext &ctx) {
  TensorRef x = ctx.input(0), w = ctx.input(1);
  COIL_TRY(ConvPlan p, planConv(ctx, x, w));
  TensorRef y = convReduction(ctx, p, x, w, DType::I32, DType::I64,
                              zeroPointElem(optionalInput(ctx, 2), false),
                              zeroPointElem(optionalInput(ctx, 3), true));
  ctx.setOutput(0, y);
  return okStatus();
}

Status lowerQLinearConv(LowerContext &ctx) {
  TensorRef x = ctx.input(0), w = ctx.input(3);
  COIL_TRY(ConvPlan p, planConv(ctx, x, w));
  TensorRef acc = convReduction(ctx, p, x, w, DType::I64, DType::I64,
                                zeroPointElem(optionalInput(ctx, 2), false),
                                zeroPointElem(optionalInput(ctx, 5), true));
  TensorRef xs = ctx.input(1), ws = ctx.input(4), ys = ctx.input(6), yz = ctx.input(7);
  std::optional<TensorRef> bias = optionalInput(ctx, 8);
  DType outT = ctx.outputType(0).dtype;
  TensorRef y = ctx.pointwise(outT, acc.shape, [&](BodyBuilder &b, const std::vector<SymInt> &i) {
    Val a = b.cast(b.load(acc, i), DType::F64);
    if (bias) a = b.op(ScalarOp::Add, a, b.cast(b.load(*bias, {i[1]}), DType::F64));
    // The scale is a float32 product, as in the ONNX definition.
    Val scale = b.op(ScalarOp::Mul, loadPerIndex(b, xs, 0, DType::F32),
                     loadPerIndex(b, ws, i[1], DType::F32));
    scale = b.op(ScalarOp::Div, scale, loadPerIndex(b, ys, 0, DType::F32));
    Val v = b.op(ScalarOp::Mul, a, b.cast(scale, DType::F64));
    return requantize(b, v, loadPerIndex(b, yz, 0, DType::F64), outT);
  });
  ctx.setOutput(0, y);
  return okStatus();
}

Status lowerConvTranspose(LowerContext &ctx) {
  TensorRef x = ctx.input(0), w = ctx.input(1);
  if (x.rank() < 3 || w.rank() != x.rank())
    return ctx.error("conv_transpose needs input [N, C, spatial...] and weights of the same rank");
  size_t nd = size_t(x.rank() - 2);
  DType dt = ctx.outputType(0).dtype;
  if (!isFloat(dt) || nd > 3)
    return ctx.error("ConvTranspose is compiled for floating-point inputs with 1 to 3 spatial "
                     "dims only, got " +
                     std::string(dtypeName(dt)) + " with " + std::to_string(nd));
  // f16/bf16 go through the f64 kernel: the interpreter computes in double and rounds once
  // (the bias included), which the f16/bf16 kernels followed by a bias epilogue would not.
  DType kt = dt == DType::F32 || dt == DType::F64 ? dt : DType::F64;
  COIL_TRY(WindowAttrs wa, decodeWindow(ctx.gnode(), nd));
  int64_t group = wa.group;
  const std::vector<int64_t> &s = wa.strides, &d = wa.dilations;
  const TensorType &yt = ctx.outputType(0);
  std::vector<SymInt> in, k, out, pb;
  for (size_t i = 0; i < nd; ++i) {
    in.push_back(x.shape[2 + i]);
    k.push_back(w.shape[2 + i]);
    out.push_back(yt.shape[2 + i]);
    COIL_TRY(WindowDim wd, convTransposeDim(wa, i, in[i], k[i]));
    pb.push_back(wd.padBegin);
  }
  SymInt n = x.shape[0], c = x.shape[1], m = yt.shape[1];
  auto prepare = [&](const TensorRef &t) {
    if (t.dtype == kt) return ctx.realize(t);
    return ctx.pointwise(kt, t.shape, [&](BodyBuilder &b, const std::vector<SymInt> &i) {
      return b.cast(b.load(t, i), kt);
    });
  };
  x = prepare(x);
  w = prepare(w);
  std::vector<ExternArg> args{nodeArg(x), nodeArg(w), outArg(0)};
  auto g = geometryArgs(n, c, m, group, nd, in, k, out, s, d, pb);
  args.insert(args.end(), g.begin(), g.end());
  TensorRef y = ctx.externCall(kernels::cpuSymbol(kernels::ExternId::ConvTranspose, kt),
                               std::move(args), {{kt, yt.shape}})[0];
  if (ctx.hasInput(2))
    y = addChannelBias(ctx, y, ctx.input(2), kt, dt);
  else if (kt != dt)
    y = ctx.pointwise(dt, yt.shape, [&](BodyBuilder &b, const std::vector<SymInt> &i) {
      return b.cast(b.load(y, i), dt);
    });
  ctx.setOutput(0, y);
  return okStatus();
}

} // namespace

void registerLinalgConvLowerings(LowerRegistry &r) {
  r.add(OpKind::Conv, lowerConv);
  r.add(OpKind::ConvInteger, lowerConvInteger);
  r.add(OpKind::QLinearConv, lowerQLinearConv);
  r.add(OpKind::ConvTranspose, lowerConvTranspose);
}

} // namespace coil::loop::linalg
