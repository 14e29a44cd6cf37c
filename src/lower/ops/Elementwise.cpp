// Lowering of the Elementwise family (see Ops.def): every op becomes one Pointwise node whose
// body loads its inputs broadcast to the output shape. Semantics follow the reference kernels
// in interp/kernels/Elementwise*.cpp.
#include "ir/Infer.h"
#include "lower/Lower.h"

#include <cmath>
#include <limits>

namespace coil::loop {
namespace {

using Idx = std::vector<SymInt>;

double attrF(LowerContext &ctx, const char *name, double dflt) {
  return ctx.gnode().attrs.getFloat(name, dflt);
}

Status needInputs(LowerContext &ctx, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!ctx.hasInput(i))
      return ctx.error(std::string(opName(ctx.gnode().op)) + " needs input " + std::to_string(i));
  return okStatus();
}

/// Output 0 as a Pointwise node of the inferred type.
void pointwiseOut(LowerContext &ctx, const PointwiseFn &fn, size_t out = 0) {
  const TensorType &t = ctx.outputType(out);
  ctx.setOutput(out, ctx.pointwise(t.dtype, t.shape, fn));
}

/// Input i broadcast to output 0's shape (a view).
TensorRef broadcastInput(LowerContext &ctx, size_t i) {
  return ctx.broadcastTo(ctx.input(i), ctx.outputType(0).shape);
}

/// An input as a body reads it: a one-element constant becomes a literal of the body (no node,
/// no load); anything else is loaded, broadcast to output 0's shape.
struct Operand {
  DType dtype = DType::F32;
  std::optional<TensorRef> ref;
  std::optional<Tensor> scalar;

  Val get(BodyBuilder &b, const Idx &idx) const {
    if (scalar)
      return isFloat(dtype) ? b.constant(dtype, scalar->getDouble(0))
                            : b.intConstant(dtype, scalar->getInt(0));
    return b.load(*ref, idx);
  }
};

Operand operand(LowerContext &ctx, size_t i) {
  Operand o;
  o.dtype = ctx.inputType(i).dtype;
  const Tensor *c = ctx.constant(i);
  if (c && c->numel() == 1)
    o.scalar = *c;
  else
    o.ref = broadcastInput(ctx, i);
  return o;
}

// --- small body helpers

Val cst(BodyBuilder &b, Val like, double v) {
  return b.constant(b.dtypeOf(like), v);
}
Val add(BodyBuilder &b, Val x, Val y) {
  return b.op(ScalarOp::Add, x, y);
}
Val sub(BodyBuilder &b, Val x, Val y) {
  return b.op(ScalarOp::Sub, x, y);
}
Val mul(BodyBuilder &b, Val x, Val y) {
  return b.op(ScalarOp::Mul, x, y);
}
Val div(BodyBuilder &b, Val x, Val y) {
  return b.op(ScalarOp::Div, x, y);
}
Val select(BodyBuilder &b, Val c, Val x, Val y) {
  return b.op(ScalarOp::Select, c, x, y);
}

/// std::max(a, b) and std::min(a, b) as the reference kernels use them: `a < b ? b : a` and
/// `b < a ? b : a` (a NaN operand does not always propagate, unlike ScalarOp::Max/Min).
Val stdMax(BodyBuilder &b, Val x, Val y) {
  return select(b, b.op(ScalarOp::Lt, x, y), y, x);
}
Val stdMin(BodyBuilder &b, Val x, Val y) {
  return select(b, b.op(ScalarOp::Lt, y, x), y, x);
}

/// log(1 + exp(x)) without overflow: max(x, 0) + log(1 + exp(-|x|)).
Val softplus(BodyBuilder &b, Val x) {
  Val zero = cst(b, x, 0), one = cst(b, x, 1);
  Val e = b.op(ScalarOp::Exp, b.op(ScalarOp::Neg, b.op(ScalarOp::Abs, x)));
  Val pos = b.op(ScalarOp::Max, x, zero);
  Val l = b.op(ScalarOp::Log, add(b, one, e));
  return add(b, pos, l);
}

// Bodies build their statements in a fixed order: an argument list holds at most one call
// that emits statements (C++ leaves the order of argument evaluation unspecified, and the
// printed Loop IR and generated code must not depend on the compiler).

// --- unary

using UnaryBody = std::function<Val(BodyBuilder &, Val)>;

Status unary(LowerContext &ctx, const UnaryBody &f) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  TensorRef x = ctx.input(0);
  pointwiseOut(ctx, [&](BodyBuilder &b, const Idx &idx) { return f(b, b.load(x, idx)); });
  return okStatus();
}

Status floatOnly(LowerContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  DType t = ctx.inputType(0).dtype;
  if (!isFloat(t))
    return ctx.error(std::string(opName(ctx.gnode().op)) + " needs a floating input, got " +
                     std::string(dtypeName(t)));
  return okStatus();
}

/// A float unary op. f16 and bf16 compute in f32 (as every f16/bf16 statement does) with f32
/// constants, rounding once at the end: an attribute (HardSigmoid's alpha 1/6, LeakyRelu's 0.01)
/// or a constant of the formula (Gelu's 1/sqrt(2)) keeps its value, as in the interpreter,
/// instead of being rounded to the 16-bit type.
Status unaryFloat(LowerContext &ctx, const UnaryBody &f) {
  COIL_TRY_STATUS(floatOnly(ctx));
  DType t = ctx.inputType(0).dtype;
  if (t != DType::F16 && t != DType::BF16) return unary(ctx, f);
  return unary(ctx, [&](BodyBuilder &b, Val x) { return b.cast(f(b, b.cast(x, DType::F32)), t); });
}

template <ScalarOp Op> Status lUnaryOp(LowerContext &ctx) {
  return unaryFloat(ctx, [](BodyBuilder &b, Val x) { return b.op(Op, x); });
}

Status lSoftsign(LowerContext &ctx) {
  return unaryFloat(ctx, [](BodyBuilder &b, Val x) {
    Val one = cst(b, x, 1);
    Val d = add(b, one, b.op(ScalarOp::Abs, x));
    return div(b, x, d);
  });
}
Status lHardSwish(LowerContext &ctx) {
  return unaryFloat(ctx, [](BodyBuilder &b, Val x) {
    Val six = cst(b, x, 6), half = cst(b, x, 0.5), zero = cst(b, x, 0), one = cst(b, x, 1);
    Val t = add(b, div(b, x, six), half);
    t = stdMax(b, zero, stdMin(b, one, t));
    return mul(b, x, t);
  });
}
Status lSoftplus(LowerContext &ctx) {
  return unaryFloat(ctx, softplus);
}
Status lMish(LowerContext &ctx) {
  return unaryFloat(
      ctx, [](BodyBuilder &b, Val x) { return mul(b, x, b.op(ScalarOp::Tanh, softplus(b, x))); });
}
Status lSwish(LowerContext &ctx) {
  double alpha = attrF(ctx, "alpha", 1.0);
  return unaryFloat(ctx, [alpha](BodyBuilder &b, Val x) {
    Val a = cst(b, x, alpha);
    return mul(b, x, b.op(ScalarOp::Sigmoid, mul(b, a, x)));
  });
}
Status lCelu(LowerContext &ctx) {
  double alpha = attrF(ctx, "alpha", 1.0);
  return unaryFloat(ctx, [alpha](BodyBuilder &b, Val x) {
    Val zero = cst(b, x, 0), a = cst(b, x, alpha), one = cst(b, x, 1);
    Val e = sub(b, b.op(ScalarOp::Exp, div(b, x, a)), one);
    Val pos = stdMax(b, zero, x);
    Val neg = stdMin(b, zero, mul(b, a, e));
    return add(b, pos, neg);
  });
}
Status lElu(LowerContext &ctx) {
  double alpha = attrF(ctx, "alpha", 1.0);
  return unaryFloat(ctx, [alpha](BodyBuilder &b, Val x) {
    Val zero = cst(b, x, 0), one = cst(b, x, 1), a = cst(b, x, alpha);
    Val neg = b.op(ScalarOp::Lt, x, zero);
    Val e = mul(b, a, sub(b, b.op(ScalarOp::Exp, x), one));
    return select(b, neg, e, x);
  });
}
Status lSelu(LowerContext &ctx) {
  double alpha = attrF(ctx, "alpha", 1.67326319217681884765625);
  double gamma = attrF(ctx, "gamma", 1.05070102214813232421875);
  return unaryFloat(ctx, [alpha, gamma](BodyBuilder &b, Val x) {
    Val zero = cst(b, x, 0), g = cst(b, x, gamma), a = cst(b, x, alpha);
    Val pos = b.op(ScalarOp::Gt, x, zero);
    Val neg = mul(b, g, sub(b, mul(b, a, b.op(ScalarOp::Exp, x)), a));
    Val lin = mul(b, g, x);
    return select(b, pos, lin, neg);
  });
}
Status lHardSigmoid(LowerContext &ctx) {
  double alpha = attrF(ctx, "alpha", 0.2), beta = attrF(ctx, "beta", 0.5);
  return unaryFloat(ctx, [alpha, beta](BodyBuilder &b, Val x) {
    Val a = cst(b, x, alpha), c = cst(b, x, beta), zero = cst(b, x, 0), one = cst(b, x, 1);
    Val t = add(b, mul(b, a, x), c);
    return stdMax(b, zero, stdMin(b, one, t));
  });
}
Status lLeakyRelu(LowerContext &ctx) {
  double alpha = attrF(ctx, "alpha", 0.01);
  return unaryFloat(ctx, [alpha](BodyBuilder &b, Val x) {
    Val zero = cst(b, x, 0), a = cst(b, x, alpha);
    Val neg = b.op(ScalarOp::Lt, x, zero);
    Val scaled = mul(b, a, x);
    return select(b, neg, scaled, x);
  });
}
Status lThresholdedRelu(LowerContext &ctx) {
  double alpha = attrF(ctx, "alpha", 1.0);
  return unaryFloat(ctx, [alpha](BodyBuilder &b, Val x) {
    Val a = cst(b, x, alpha), zero = cst(b, x, 0);
    return select(b, b.op(ScalarOp::Gt, x, a), x, zero);
  });
}
Status lGelu(LowerContext &ctx) {
  std::string approx = ctx.gnode().attrs.getString("approximate", "none");
  if (approx == "none")
    return unaryFloat(ctx, [](BodyBuilder &b, Val x) {
      Val half = cst(b, x, 0.5), one = cst(b, x, 1), k = cst(b, x, 1.0 / std::sqrt(2.0));
      Val e = b.op(ScalarOp::Erf, mul(b, x, k));
      Val h = mul(b, half, x);
      return mul(b, h, add(b, one, e));
    });
  if (approx == "tanh")
    return unaryFloat(ctx, [](BodyBuilder &b, Val x) {
      Val half = cst(b, x, 0.5), one = cst(b, x, 1), k = cst(b, x, std::sqrt(2.0 / M_PI)),
          c = cst(b, x, 0.044715);
      Val x3 = mul(b, mul(b, x, x), x);
      Val inner = mul(b, k, add(b, x, mul(b, c, x3)));
      Val h = mul(b, half, x);
      return mul(b, h, add(b, one, b.op(ScalarOp::Tanh, inner)));
    });
  return ctx.error("approximate must be 'none' or 'tanh', got '" + approx + "'");
}

Status lAbs(LowerContext &ctx) {
  return unary(ctx, [](BodyBuilder &b, Val x) { return b.op(ScalarOp::Abs, x); });
}
Status lNeg(LowerContext &ctx) {
  return unary(ctx, [](BodyBuilder &b, Val x) { return b.op(ScalarOp::Neg, x); });
}
Status lSign(LowerContext &ctx) {
  return unary(ctx, [](BodyBuilder &b, Val x) { return b.op(ScalarOp::Sign, x); });
}
Status lRelu(LowerContext &ctx) {
  return unary(ctx, [](BodyBuilder &b, Val x) {
    Val zero = cst(b, x, 0);
    return select(b, b.op(ScalarOp::Lt, x, zero), zero, x);
  });
}
Status lBitwiseNot(LowerContext &ctx) {
  return unary(ctx, [](BodyBuilder &b, Val x) { return b.op(ScalarOp::BitNot, x); });
}
Status lNot(LowerContext &ctx) {
  return unary(ctx, [](BodyBuilder &b, Val x) { return b.op(ScalarOp::Not, x); });
}
Status lShrink(LowerContext &ctx) {
  double bias = attrF(ctx, "bias", 0.0), lambd = attrF(ctx, "lambd", 0.5);
  DType t = ctx.outputType(0).dtype;
  return unary(ctx, [=](BodyBuilder &b, Val x) {
    // Integers compute in f64 and truncate back, as the reference kernel; f16 and bf16 in f32,
    // so that bias and lambd keep their values (see unaryFloat).
    Val v = t == DType::F16 || t == DType::BF16 ? b.cast(x, DType::F32)
            : isFloat(t)                        ? x
                                                : b.cast(x, DType::F64);
    Val nl = cst(b, v, -lambd), l = cst(b, v, lambd), c = cst(b, v, bias), zero = cst(b, v, 0);
    Val lo = b.op(ScalarOp::Lt, v, nl);
    Val hi = b.op(ScalarOp::Gt, v, l);
    Val r = select(b, hi, sub(b, v, c), zero);
    r = select(b, lo, add(b, v, c), r);
    return b.cast(r, t);
  });
}
Status lIsNaN(LowerContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  bool fl = isFloat(ctx.inputType(0).dtype);
  return unary(ctx, [fl](BodyBuilder &b, Val x) {
    return fl ? b.op(ScalarOp::IsNaN, x) : b.intConstant(DType::Bool, 0);
  });
}
Status lIsInf(LowerContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  bool neg = ctx.gnode().attrs.getInt("detect_negative", 1) != 0;
  bool pos = ctx.gnode().attrs.getInt("detect_positive", 1) != 0;
  bool fl = isFloat(ctx.inputType(0).dtype);
  return unary(ctx, [=](BodyBuilder &b, Val x) {
    if (!fl || (!neg && !pos)) return b.intConstant(DType::Bool, 0);
    if (pos && neg) {
      Val p = b.op(ScalarOp::IsPosInf, x);
      return b.op(ScalarOp::Or, p, b.op(ScalarOp::IsNegInf, x));
    }
    return b.op(pos ? ScalarOp::IsPosInf : ScalarOp::IsNegInf, x);
  });
}

Status lIdentity(LowerContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  ctx.setOutput(0, ctx.input(0));
  return okStatus();
}

Status lDropout(LowerContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  if (ctx.hasInput(2)) {
    auto training = ctx.intValue(2);
    auto ratio = ctx.constant(1);
    bool zeroRatio = ctx.hasInput(1) && ratio && ratio->numel() == 1 && ratio->getDouble(0) == 0;
    if (!training || training->size() != 1 || !training->at(0).isConstant())
      return ctx.error("Dropout with a training_mode that is not a constant is not supported");
    if (training->at(0).constant() != 0 && !zeroRatio)
      return ctx.error("training-mode Dropout is not supported");
  }
  ctx.setOutput(0, ctx.input(0));
  if (ctx.numOutputs() > 1 && ctx.gnode().outputs[1] != kNoValue)
    pointwiseOut(
        ctx, [](BodyBuilder &b, const Idx &) { return b.intConstant(DType::Bool, 1); }, 1);
  return okStatus();
}

// --- binary and variadic

using BinaryBody = std::function<Val(BodyBuilder &, Val, Val)>;

Status binary(LowerContext &ctx, const BinaryBody &f) {
  COIL_TRY_STATUS(needInputs(ctx, 2));
  Operand x = operand(ctx, 0), y = operand(ctx, 1);
  if (x.dtype != y.dtype && ctx.gnode().op != OpKind::Pow)
    return ctx.error("inputs 0 and 1 must have the same dtype, got " +
                     std::string(dtypeName(x.dtype)) + " and " + std::string(dtypeName(y.dtype)));
  pointwiseOut(ctx, [&](BodyBuilder &b, const Idx &idx) {
    Val a = x.get(b, idx);
    return f(b, a, y.get(b, idx));
  });
  return okStatus();
}

template <ScalarOp Op> Status lBinaryOp(LowerContext &ctx) {
  return binary(ctx, [](BodyBuilder &b, Val x, Val y) { return b.op(Op, x, y); });
}

Status lMod(LowerContext &ctx) {
  bool fmod = ctx.gnode().attrs.getInt("fmod", 0) != 0;
  return binary(ctx, [fmod](BodyBuilder &b, Val x, Val y) {
    return b.op(fmod ? ScalarOp::FMod : ScalarOp::Mod, x, y);
  });
}

Status lBitShift(LowerContext &ctx) {
  std::string dir = ctx.gnode().attrs.getString("direction", "");
  if (dir != "LEFT" && dir != "RIGHT")
    return ctx.error("direction must be 'LEFT' or 'RIGHT', got '" + dir + "'");
  ScalarOp op = dir == "LEFT" ? ScalarOp::Shl : ScalarOp::Shr;
  return binary(ctx, [op](BodyBuilder &b, Val x, Val y) { return b.op(op, x, y); });
}

Status lPow(LowerContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 2));
  DType bt = ctx.inputType(0).dtype, et = ctx.inputType(1).dtype;
  return binary(ctx, [=](BodyBuilder &b, Val x, Val y) {
    if (bt == et && isFloat(bt)) return b.op(ScalarOp::Pow, x, y);
    if (!isFloat(bt) && !isFloat(et)) { // integer power, wrapping, in i64
      Val xi = b.cast(x, DType::I64);
      Val yi = b.cast(y, DType::I64);
      if (et == DType::U64) { // exponents >= 2^63 act as 2^63 - 1, as in the reference kernel
        Val big = b.op(ScalarOp::Lt, yi, b.intConstant(DType::I64, 0));
        yi = select(b, big, b.intConstant(DType::I64, std::numeric_limits<int64_t>::max()), yi);
      }
      return b.cast(b.op(ScalarOp::Pow, xi, yi), bt);
    }
    // Mixed: as the reference kernel, in double, rounded (or truncated) to the base type.
    Val xd = b.cast(x, DType::F64);
    return b.cast(b.op(ScalarOp::Pow, xd, b.cast(y, DType::F64)), bt);
  });
}

Status lPRelu(LowerContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 2));
  bool uns = isUnsigned(ctx.inputType(0).dtype);
  return binary(ctx, [uns](BodyBuilder &b, Val x, Val s) {
    if (uns) return x;
    Val neg = b.op(ScalarOp::Lt, x, cst(b, x, 0));
    Val scaled = mul(b, s, x);
    return select(b, neg, scaled, x);
  });
}

enum class Fold { Max, Min, Sum, Mean };

template <Fold F> Status lVariadic(LowerContext &ctx) {
  size_t m = ctx.numInputs();
  if (m == 0) return ctx.error(std::string(opName(ctx.gnode().op)) + " needs at least one input");
  COIL_TRY_STATUS(needInputs(ctx, m));
  std::vector<Operand> xs;
  for (size_t k = 0; k < m; ++k) {
    xs.push_back(operand(ctx, k));
    if (xs.back().dtype != xs[0].dtype)
      return ctx.error("inputs 0 and " + std::to_string(k) + " must have the same dtype, got " +
                       std::string(dtypeName(xs[0].dtype)) + " and " +
                       std::string(dtypeName(xs.back().dtype)));
  }
  DType t = xs[0].dtype;
  pointwiseOut(ctx, [&](BodyBuilder &b, const Idx &idx) {
    // Float sums and means accumulate in f64, as the reference kernel.
    bool wide = isFloat(t) && (F == Fold::Sum || F == Fold::Mean) && m > 1;
    auto ld = [&](size_t k) {
      Val v = xs[k].get(b, idx);
      return wide ? b.cast(v, DType::F64) : v;
    };
    Val acc = ld(0);
    for (size_t k = 1; k < m; ++k) {
      Val v = ld(k);
      ScalarOp op = F == Fold::Max ? ScalarOp::Max : F == Fold::Min ? ScalarOp::Min : ScalarOp::Add;
      acc = b.op(op, acc, v);
    }
    if (F == Fold::Mean && m > 1) acc = div(b, acc, b.constant(b.dtypeOf(acc), double(m)));
    return b.cast(acc, t);
  });
  return okStatus();
}

// --- selection

Status lWhere(LowerContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 3));
  Operand c = operand(ctx, 0), x = operand(ctx, 1), y = operand(ctx, 2);
  if (x.dtype != y.dtype)
    return ctx.error("inputs 1 and 2 must have the same dtype, got " +
                     std::string(dtypeName(x.dtype)) + " and " + std::string(dtypeName(y.dtype)));
  pointwiseOut(ctx, [&](BodyBuilder &b, const Idx &idx) {
    Val cv = c.get(b, idx);
    Val xv = x.get(b, idx);
    return select(b, cv, xv, y.get(b, idx));
  });
  return okStatus();
}

/// Element 0 of a one-element tensor.
Val loadScalar(BodyBuilder &b, const TensorRef &t) {
  return b.load(t, Idx(t.shape.size(), SymInt(0)));
}

Status lClip(LowerContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  TensorRef x = ctx.input(0);
  // Each bound: input 1 / 2 (a one-element tensor: a literal when constant), or in older
  // models attribute min / max, or absent.
  struct Bound {
    std::optional<TensorRef> ref;
    std::optional<Tensor> lit;
    std::optional<double> attr;
    bool present() const { return ref || lit || attr; }
  };
  Bound bounds[2];
  for (size_t i : {size_t(1), size_t(2)}) {
    Bound &bd = bounds[i - 1];
    if (ctx.hasInput(i)) {
      const TensorType &t = ctx.inputType(i);
      SymInt n = 1;
      for (const SymInt &d : t.shape) n = n * d;
      if (n != SymInt(1))
        return ctx.error("input " + std::to_string(i) + " of Clip must be a scalar, got shape " +
                         t.str());
      if (t.dtype != x.dtype)
        return ctx.error("inputs 0 and " + std::to_string(i) + " must have the same dtype, got " +
                         std::string(dtypeName(x.dtype)) + " and " +
                         std::string(dtypeName(t.dtype)));
      if (const Tensor *c = ctx.constant(i))
        bd.lit = *c;
      else
        bd.ref = ctx.input(i);
    } else {
      const char *attr = i == 1 ? "min" : "max";
      if (ctx.gnode().attrs.has(attr)) bd.attr = attrF(ctx, attr, 0);
    }
  }
  pointwiseOut(ctx, [&](BodyBuilder &b, const Idx &idx) {
    Val v = b.load(x, idx);
    auto bound = [&](const Bound &bd) {
      if (bd.ref) return loadScalar(b, *bd.ref);
      if (bd.lit)
        return isFloat(x.dtype) ? b.constant(x.dtype, bd.lit->getDouble(0))
                                : b.intConstant(x.dtype, bd.lit->getInt(0));
      // An attribute bound is stored in x's dtype (as the reference kernel's scalar tensor).
      return b.cast(b.constant(DType::F64, *bd.attr), x.dtype);
    };
    // max(x, lo) then min(., hi): when lo > hi every value becomes hi.
    if (bounds[0].present()) {
      Val l = bound(bounds[0]);
      v = select(b, b.op(ScalarOp::Lt, v, l), l, v);
    }
    if (bounds[1].present()) {
      Val h = bound(bounds[1]);
      v = select(b, b.op(ScalarOp::Gt, v, h), h, v);
    }
    return v;
  });
  return okStatus();
}

// --- conversions

Status lCastTo(LowerContext &ctx, DType to) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  return unary(ctx, [to](BodyBuilder &b, Val x) { return b.cast(x, to); });
}
Status lCast(LowerContext &ctx) {
  COIL_TRY(DType to, dtypeAttr(ctx.gnode().attrs, "to"));
  return lCastTo(ctx, to);
}
Status lCastLike(LowerContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 2));
  return lCastTo(ctx, ctx.inputType(1).dtype);
}
Status lBitCast(LowerContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  COIL_TRY(DType to, dtypeAttr(ctx.gnode().attrs, "to"));
  DType from = ctx.inputType(0).dtype;
  if (dtypeSize(from) != dtypeSize(to))
    return ctx.error("BitCast needs dtypes of the same width, got " + std::string(dtypeName(from)) +
                     " and " + std::string(dtypeName(to)));
  return unary(ctx, [to](BodyBuilder &b, Val x) { return b.bitcast(x, to); });
}

/// How element idx of x finds its scale (and zero point): per tensor, per axis or blocked.
struct QuantParams {
  enum { PerTensor, PerAxis, Blocked } mode = PerTensor;
  int64_t axis = 0, blockSize = 0;

  Idx index(const Idx &idx, const TensorRef &s) const {
    if (mode == PerTensor) return Idx(s.shape.size(), SymInt(0));
    if (mode == PerAxis) return {idx[size_t(axis)]};
    Idx r = idx;
    r[size_t(axis)] = floorDiv(idx[size_t(axis)], SymInt(blockSize));
    return r;
  }
};

Expected<QuantParams> quantParams(LowerContext &ctx, const TensorRef &x, const TensorRef &s,
                                  size_t which) {
  QuantParams q;
  const Attrs &at = ctx.gnode().attrs;
  int64_t blockSize = at.getInt("block_size", 0);
  std::string what =
      "input " + std::to_string(which) + " of " + std::string(opName(ctx.gnode().op));
  if (blockSize < 0)
    return ctx.error("block_size must be positive, got " + std::to_string(blockSize));
  SymInt numel = 1;
  for (const SymInt &d : s.shape) numel = numel * d;
  if (blockSize == 0 && numel == SymInt(1)) return q;
  COIL_TRY(q.axis, normalizeAxis(at.getInt("axis", 1), x.rank()));
  const SymRanges &r = ctx.program().symbols;
  SymInt dim = x.shape[size_t(q.axis)];
  if (blockSize == 0) {
    q.mode = QuantParams::PerAxis;
    if (s.shape.size() != 1 || !proveEQ(s.shape[0], dim, r))
      return ctx.error(what + " must be a scalar or have shape [" + dim.str() + "] (dim " +
                       std::to_string(q.axis) + " of input 0), got shape " +
                       TensorType{s.dtype, s.shape}.str());
    return q;
  }
  q.mode = QuantParams::Blocked;
  q.blockSize = blockSize;
  std::vector<SymInt> want = x.shape;
  want[size_t(q.axis)] = ceilDiv(dim, SymInt(blockSize));
  bool same = want.size() == s.shape.size();
  for (size_t d = 0; same && d < want.size(); ++d) same = proveEQ(want[d], s.shape[d], r);
  if (!same)
    return ctx.error(what + " must have shape " + TensorType{s.dtype, want}.str() +
                     " for blocked quantization along axis " + std::to_string(q.axis) +
                     " with block_size " + std::to_string(blockSize) + ", got shape " +
                     TensorType{s.dtype, s.shape}.str());
  return q;
}

DType divisionDType(DType x, DType s) {
  if (!isFloat(x) || !isFloat(s) || x == DType::F64 || s == DType::F64) return DType::F64;
  if (x == s) return x;
  return DType::F32;
}

/// The reference kernel computes in double and rounds each intermediate to `t` (once, from
/// double): f16/bf16 values round to 16 bits; in Loop IR that is a cast from f64.
Val roundTo(BodyBuilder &b, Val v, DType t) {
  if (t == DType::F64) return b.cast(v, DType::F64);
  return b.cast(b.cast(v, t), DType::F64);
}

Status lQuantizeLinear(LowerContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 2));
  TensorRef x = ctx.input(0), s = ctx.input(1);
  std::optional<TensorRef> zp;
  if (ctx.hasInput(2)) zp = ctx.input(2);
  DType outType = ctx.outputType(0).dtype;
  if (outType != DType::I8 && outType != DType::U8 && outType != DType::I16 &&
      outType != DType::U16)
    return ctx.error("QuantizeLinear cannot quantize to " + std::string(dtypeName(outType)) +
                     " (accepts i8, u8, i16, u16)");
  DType precision = divisionDType(x.dtype, s.dtype);
  if (ctx.gnode().attrs.getInt("precision", 0) != 0) {
    COIL_TRY(precision, dtypeAttr(ctx.gnode().attrs, "precision"));
  }
  COIL_TRY(QuantParams si, quantParams(ctx, x, s, 1));
  QuantParams zi;
  if (zp) {
    COIL_TRY(zi, quantParams(ctx, x, *zp, 2));
  }
  double lo = outType == DType::I8 ? -128 : outType == DType::I16 ? -32768 : 0;
  double hi = outType == DType::I8    ? 127
              : outType == DType::U8  ? 255
              : outType == DType::I16 ? 32767
                                      : 65535;
  pointwiseOut(ctx, [&](BodyBuilder &b, const Idx &idx) {
    Val xv = roundTo(b, b.load(x, idx), precision);
    Val sv = roundTo(b, b.load(s, si.index(idx, s)), precision);
    Val q = b.op(ScalarOp::Round, roundTo(b, div(b, xv, sv), precision));
    Val nan = b.op(ScalarOp::IsNaN, q);
    q = select(b, nan, b.constant(DType::F64, 0), q);
    if (zp) q = add(b, q, b.cast(b.load(*zp, zi.index(idx, *zp)), DType::F64));
    Val hiC = b.constant(DType::F64, hi), loC = b.constant(DType::F64, lo);
    q = b.op(ScalarOp::Min, hiC, b.op(ScalarOp::Max, loC, q));
    return b.cast(q, outType);
  });
  return okStatus();
}

Status lDequantizeLinear(LowerContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 2));
  TensorRef x = ctx.input(0), s = ctx.input(1);
  std::optional<TensorRef> zp;
  if (ctx.hasInput(2)) zp = ctx.input(2);
  DType outType = ctx.outputType(0).dtype;
  if (!isFloat(outType) || outType == DType::F64)
    return ctx.error("DequantizeLinear cannot produce " + std::string(dtypeName(outType)) +
                     " (accepts f32, f16, bf16)");
  if (zp && zp->dtype != x.dtype)
    return ctx.error("inputs 0 and 2 must have the same dtype, got " +
                     std::string(dtypeName(x.dtype)) + " and " + std::string(dtypeName(zp->dtype)));
  COIL_TRY(QuantParams si, quantParams(ctx, x, s, 1));
  QuantParams zi;
  if (zp) {
    COIL_TRY(zi, quantParams(ctx, x, *zp, 2));
  }
  pointwiseOut(ctx, [&](BodyBuilder &b, const Idx &idx) {
    // x (minus the zero point, exactly) times the scale, rounded to f32 and then to the output.
    Val xi = b.cast(b.load(x, idx), DType::I64);
    Val d;
    if (zp)
      d = b.cast(sub(b, xi, b.cast(b.load(*zp, zi.index(idx, *zp)), DType::I64)), DType::F64);
    else
      d = b.cast(b.cast(xi, DType::F32), DType::F64);
    Val y = mul(b, d, b.cast(b.load(s, si.index(idx, s)), DType::F64));
    return b.cast(b.cast(y, DType::F32), outType);
  });
  return okStatus();
}

Status lDynamicQuantizeLinear(LowerContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  TensorRef x = ctx.input(0);
  if (x.dtype != DType::F32)
    return ctx.error("DynamicQuantizeLinear needs an f32 input, got " +
                     std::string(dtypeName(x.dtype)));
  // The range [min(x, 0), max(x, 0)] by two reductions over every element.
  std::vector<SymInt> all = x.shape;
  auto range = [&](ReduceKind k) {
    return ctx.reduce(
        k, DType::F32, DType::F32, {}, all,
        [&](BodyBuilder &b, const Idx &, const Idx &r, Val *) { return b.load(x, r); }, false,
        k == ReduceKind::Max ? "dql_max" : "dql_min");
  };
  TensorRef mx = range(ReduceKind::Max), mn = range(ReduceKind::Min);
  // scale and zero point (all arithmetic in f32, as the ONNX definition).
  auto scaleOf = [&](BodyBuilder &b) {
    Val zero = b.constant(DType::F32, 0);
    Val hi = b.op(ScalarOp::Max, zero, b.load(mx, {}));
    Val lo = b.op(ScalarOp::Min, zero, b.load(mn, {}));
    Val same = b.op(ScalarOp::Eq, hi, lo);
    Val one = b.constant(DType::F32, 1);
    Val range = select(b, same, one, sub(b, hi, lo));
    return std::pair<Val, Val>(div(b, range, b.constant(DType::F32, 255)), lo);
  };
  auto zeroPointOf = [&](BodyBuilder &b, Val scale, Val lo) {
    Val zero = b.constant(DType::F32, 0), top = b.constant(DType::F32, 255);
    Val zpf = sub(b, zero, div(b, lo, scale));
    zpf = b.op(ScalarOp::Max, zero, b.op(ScalarOp::Min, top, zpf));
    return b.op(ScalarOp::Round, zpf);
  };
  TensorRef scale = ctx.pointwise(
      DType::F32, {}, [&](BodyBuilder &b, const Idx &) { return scaleOf(b).first; }, "dql_scale");
  TensorRef zp = ctx.pointwise(
      DType::U8, {},
      [&](BodyBuilder &b, const Idx &) {
        auto [sc, lo] = scaleOf(b);
        return b.cast(zeroPointOf(b, sc, lo), DType::U8);
      },
      "dql_zero_point");
  TensorRef y = ctx.pointwise(DType::U8, x.shape, [&](BodyBuilder &b, const Idx &idx) {
    Val z = b.cast(b.load(zp, {}), DType::F32); // exact: an integer in [0, 255]
    Val xv = b.load(x, idx);
    Val q = add(b, b.op(ScalarOp::Round, div(b, xv, b.load(scale, {}))), z);
    Val zero = b.constant(DType::F32, 0), top = b.constant(DType::F32, 255);
    q = b.op(ScalarOp::Max, zero, b.op(ScalarOp::Min, top, q));
    return b.cast(q, DType::U8);
  });
  ctx.setOutput(0, y);
  if (ctx.numOutputs() > 1) ctx.setOutput(1, scale);
  if (ctx.numOutputs() > 2) ctx.setOutput(2, zp);
  return okStatus();
}

} // namespace

void registerElementwiseLowerings(LowerRegistry &r) {
  const std::pair<OpKind, LowerFn> fns[] = {
      {OpKind::Abs, lAbs},
      {OpKind::Acos, lUnaryOp<ScalarOp::Acos>},
      {OpKind::Acosh, lUnaryOp<ScalarOp::Acosh>},
      {OpKind::Add, lBinaryOp<ScalarOp::Add>},
      {OpKind::And, lBinaryOp<ScalarOp::And>},
      {OpKind::Asin, lUnaryOp<ScalarOp::Asin>},
      {OpKind::Asinh, lUnaryOp<ScalarOp::Asinh>},
      {OpKind::Atan, lUnaryOp<ScalarOp::Atan>},
      {OpKind::Atanh, lUnaryOp<ScalarOp::Atanh>},
      {OpKind::BitShift, lBitShift},
      {OpKind::BitwiseAnd, lBinaryOp<ScalarOp::BitAnd>},
      {OpKind::BitwiseNot, lBitwiseNot},
      {OpKind::BitwiseOr, lBinaryOp<ScalarOp::BitOr>},
      {OpKind::BitwiseXor, lBinaryOp<ScalarOp::BitXor>},
      {OpKind::Cast, lCast},
      {OpKind::CastLike, lCastLike},
      {OpKind::Ceil, lUnaryOp<ScalarOp::Ceil>},
      {OpKind::Celu, lCelu},
      {OpKind::Clip, lClip},
      {OpKind::Cos, lUnaryOp<ScalarOp::Cos>},
      {OpKind::Cosh, lUnaryOp<ScalarOp::Cosh>},
      {OpKind::Div, lBinaryOp<ScalarOp::Div>},
      {OpKind::Dropout, lDropout},
      {OpKind::Elu, lElu},
      {OpKind::Equal, lBinaryOp<ScalarOp::Eq>},
      {OpKind::Erf, lUnaryOp<ScalarOp::Erf>},
      {OpKind::Exp, lUnaryOp<ScalarOp::Exp>},
      {OpKind::Floor, lUnaryOp<ScalarOp::Floor>},
      {OpKind::Gelu, lGelu},
      {OpKind::Greater, lBinaryOp<ScalarOp::Gt>},
      {OpKind::GreaterOrEqual, lBinaryOp<ScalarOp::Ge>},
      {OpKind::HardSigmoid, lHardSigmoid},
      {OpKind::HardSwish, lHardSwish},
      {OpKind::Identity, lIdentity},
      {OpKind::IsInf, lIsInf},
      {OpKind::IsNaN, lIsNaN},
      {OpKind::LeakyRelu, lLeakyRelu},
      {OpKind::Less, lBinaryOp<ScalarOp::Lt>},
      {OpKind::LessOrEqual, lBinaryOp<ScalarOp::Le>},
      {OpKind::Log, lUnaryOp<ScalarOp::Log>},
      {OpKind::Max, lVariadic<Fold::Max>},
      {OpKind::Mean, lVariadic<Fold::Mean>},
      {OpKind::Min, lVariadic<Fold::Min>},
      {OpKind::Mish, lMish},
      {OpKind::Mod, lMod},
      {OpKind::Mul, lBinaryOp<ScalarOp::Mul>},
      {OpKind::Neg, lNeg},
      {OpKind::Not, lNot},
      {OpKind::Or, lBinaryOp<ScalarOp::Or>},
      {OpKind::PRelu, lPRelu},
      {OpKind::Pow, lPow},
      {OpKind::Reciprocal, lUnaryOp<ScalarOp::Reciprocal>},
      {OpKind::Relu, lRelu},
      {OpKind::Round, lUnaryOp<ScalarOp::Round>},
      {OpKind::Selu, lSelu},
      {OpKind::Shrink, lShrink},
      {OpKind::Sigmoid, lUnaryOp<ScalarOp::Sigmoid>},
      {OpKind::Sign, lSign},
      {OpKind::Sin, lUnaryOp<ScalarOp::Sin>},
      {OpKind::Sinh, lUnaryOp<ScalarOp::Sinh>},
      {OpKind::Softplus, lSoftplus},
      {OpKind::Softsign, lSoftsign},
      {OpKind::Sqrt, lUnaryOp<ScalarOp::Sqrt>},
      {OpKind::Sub, lBinaryOp<ScalarOp::Sub>},
      {OpKind::Sum, lVariadic<Fold::Sum>},
      {OpKind::Swish, lSwish},
      {OpKind::Tan, lUnaryOp<ScalarOp::Tan>},
      {OpKind::Tanh, lUnaryOp<ScalarOp::Tanh>},
      {OpKind::ThresholdedRelu, lThresholdedRelu},
      {OpKind::Where, lWhere},
      {OpKind::Xor, lBinaryOp<ScalarOp::Xor>},
      {OpKind::QuantizeLinear, lQuantizeLinear},
      {OpKind::DequantizeLinear, lDequantizeLinear},
      {OpKind::DynamicQuantizeLinear, lDynamicQuantizeLinear},
      {OpKind::BitCast, lBitCast},
  };
  for (const auto &[op, fn] : fns) r.add(op, fn);
}

} // namespace coil::loop
