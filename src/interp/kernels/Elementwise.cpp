// Reference kernels for the Elementwise family of ops (see Ops.def): math, comparisons, logic,
// selection. Conversions and quantization live in ElementwiseConvert.cpp.
#include "interp/kernels/ElementwiseCommon.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace coil {
namespace elementwise {

using Result = Expected<std::vector<Tensor>>;

float toFloat(double v) {
  // Out-of-range conversions are undefined in C++: round to nearest explicitly.
  constexpr double kMax = std::numeric_limits<float>::max();
  constexpr double kOverflow = 0x1.ffffffp127; // FLT_MAX + half an ulp: the rounding boundary
  if (std::isfinite(v) && std::fabs(v) > kMax)
    return std::fabs(v) >= kOverflow
               ? std::copysign(std::numeric_limits<float>::infinity(), float(v > 0 ? 1 : -1))
               : std::copysign(std::numeric_limits<float>::max(), float(v > 0 ? 1 : -1));
  return float(v);
}

double roundToFloatDType(DType t, double v) {
  switch (t) {
  case DType::F64:
    return v;
  case DType::F32:
    return double(toFloat(v));
  case DType::F16:
  case DType::BF16: {
    // Round to f32 with "round to odd" (truncate, then set the last bit if inexact) so that
    // the second rounding to 16 bits gives the correctly rounded result.
    float f = toFloat(v);
    if (std::isfinite(v) && double(f) != v) {
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      if (std::fabs(double(f)) > std::fabs(v))
        --bits; // f was rounded away from zero: step back toward zero
      bits |= 1;
      std::memcpy(&f, &bits, 4);
    }
    return t == DType::F16 ? double(halfToFloat(floatToHalf(f)))
                           : double(bf16ToFloat(floatToBf16(f)));
  }
  default:
    return v;
  }
}

void storeDouble(Tensor &out, int64_t i, double v) {
  if (isFloat(out.dtype())) // exactly representable now, so setDouble does not round again
    v = roundToFloatDType(out.dtype(), v);
  out.setDouble(i, v);
}

Expected<Broadcast> broadcastInputs(const KernelContext &ctx,
                                    const std::vector<const Tensor *> &inputs) {
  (void)ctx;
  Broadcast b;
  for (const Tensor *t : inputs)
    if (t) {
      COIL_TRY(b.shape, broadcastConcrete(b.shape, t->shape()));
    }
  for (const Tensor *t : inputs) // inputs of the full shape need no map
    b.index.push_back(t && t->shape() != b.shape ? broadcastIndex(t->shape(), b.shape)
                                                 : std::vector<int64_t>{});
  return b;
}

Status needInputs(const KernelContext &ctx, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!ctx.hasInput(i))
      return ctx.error(std::string(opName(ctx.node.op)) + " needs input " + std::to_string(i));
  return okStatus();
}

namespace {

uint64_t u64(int64_t v) {
  return uint64_t(v);
}

// --- unary

/// Applies `ff` (double -> double) to a float tensor.
template <typename FF> Result unaryFloat(KernelContext &ctx, FF ff) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  const Tensor &x = ctx.input(0);
  if (!isFloat(x.dtype()))
    return ctx.error(std::string(opName(ctx.node.op)) + " needs a floating input, got " +
                     std::string(dtypeName(x.dtype())));
  Tensor out(x.dtype(), x.shape());
  for (int64_t i = 0, n = x.numel(); i < n; ++i) storeDouble(out, i, ff(x.getDouble(i)));
  return std::vector<Tensor>{out};
}

/// Applies `ff` to floats, `fi` to signed integers and `fu` to unsigned integers and bool;
/// the output has dtype `outType`.
template <typename FF, typename FI, typename FU>
Result unaryNum(KernelContext &ctx, FF ff, FI fi, FU fu, std::optional<DType> outType = {}) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  const Tensor &x = ctx.input(0);
  Tensor out(outType.value_or(x.dtype()), x.shape());
  Domain d = domainOf(x.dtype());
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    if (d == Domain::Float)
      storeDouble(out, i, double(ff(x.getDouble(i))));
    else if (d == Domain::Signed)
      out.setInt(i, int64_t(fi(x.getInt(i))));
    else
      out.setInt(i, int64_t(fu(u64(x.getInt(i)))));
  }
  return std::vector<Tensor>{out};
}

double attrF(const KernelContext &ctx, const char *name, double dflt) {
  return ctx.attrs().getFloat(name, dflt);
}

#define COIL_UNARY_FLOAT(NAME, EXPR)                                                               \
  Result k##NAME(KernelContext &ctx) {                                                             \
    return unaryFloat(ctx, [](double x) { return EXPR; });                                         \
  }

COIL_UNARY_FLOAT(Acos, std::acos(x))
COIL_UNARY_FLOAT(Acosh, std::acosh(x))
COIL_UNARY_FLOAT(Asin, std::asin(x))
COIL_UNARY_FLOAT(Asinh, std::asinh(x))
COIL_UNARY_FLOAT(Atan, std::atan(x))
COIL_UNARY_FLOAT(Atanh, std::atanh(x))
COIL_UNARY_FLOAT(Ceil, std::ceil(x))
COIL_UNARY_FLOAT(Cos, std::cos(x))
COIL_UNARY_FLOAT(Cosh, std::cosh(x))
COIL_UNARY_FLOAT(Erf, std::erf(x))
COIL_UNARY_FLOAT(Exp, std::exp(x))
COIL_UNARY_FLOAT(Floor, std::floor(x))
COIL_UNARY_FLOAT(Log, std::log(x))
COIL_UNARY_FLOAT(Reciprocal, 1.0 / x)
COIL_UNARY_FLOAT(Round, std::nearbyint(x)) // default rounding mode: half to even
COIL_UNARY_FLOAT(Sin, std::sin(x))
COIL_UNARY_FLOAT(Sinh, std::sinh(x))
COIL_UNARY_FLOAT(Softsign, x / (1.0 + std::fabs(x)))
COIL_UNARY_FLOAT(Sqrt, std::sqrt(x))
COIL_UNARY_FLOAT(Tan, std::tan(x))
COIL_UNARY_FLOAT(Tanh, std::tanh(x))
COIL_UNARY_FLOAT(HardSwish, x *std::max(0.0, std::min(1.0, x / 6.0 + 0.5)))
#undef COIL_UNARY_FLOAT

/// log(1 + exp(x)) without overflow for large x.
double softplus(double x) {
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}
double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}

Result kSigmoid(KernelContext &ctx) {
  return unaryFloat(ctx, sigmoid);
}
Result kSoftplus(KernelContext &ctx) {
  return unaryFloat(ctx, softplus);
}
Result kMish(KernelContext &ctx) {
  return unaryFloat(ctx, [](double x) { return x * std::tanh(softplus(x)); });
}
Result kSwish(KernelContext &ctx) {
  double alpha = attrF(ctx, "alpha", 1.0);
  return unaryFloat(ctx, [alpha](double x) { return x * sigmoid(alpha * x); });
}
Result kCelu(KernelContext &ctx) {
  double alpha = attrF(ctx, "alpha", 1.0);
  return unaryFloat(ctx, [alpha](double x) {
    return std::max(0.0, x) + std::min(0.0, alpha * (std::exp(x / alpha) - 1.0));
  });
}
Result kElu(KernelContext &ctx) {
  double alpha = attrF(ctx, "alpha", 1.0);
  return unaryFloat(ctx, [alpha](double x) { return x < 0 ? alpha * (std::exp(x) - 1.0) : x; });
}
Result kSelu(KernelContext &ctx) {
  double alpha = attrF(ctx, "alpha", 1.67326319217681884765625);
  double gamma = attrF(ctx, "gamma", 1.05070102214813232421875);
  return unaryFloat(ctx, [alpha, gamma](double x) {
    return x > 0 ? gamma * x : gamma * (alpha * std::exp(x) - alpha);
  });
}
Result kHardSigmoid(KernelContext &ctx) {
  double alpha = attrF(ctx, "alpha", 0.2), beta = attrF(ctx, "beta", 0.5);
  return unaryFloat(
      ctx, [alpha, beta](double x) { return std::max(0.0, std::min(1.0, alpha * x + beta)); });
}
Result kLeakyRelu(KernelContext &ctx) {
  double alpha = attrF(ctx, "alpha", 0.01);
  return unaryFloat(ctx, [alpha](double x) { return x < 0 ? alpha * x : x; });
}
Result kThresholdedRelu(KernelContext &ctx) {
  double alpha = attrF(ctx, "alpha", 1.0);
  return unaryFloat(ctx, [alpha](double x) { return x > alpha ? x : 0.0; });
}
Result kGelu(KernelContext &ctx) {
  std::string approx = ctx.attrs().getString("approximate", "none");
  if (approx == "none")
    return unaryFloat(ctx, [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); });
  if (approx == "tanh")
    return unaryFloat(ctx, [](double x) {
      const double k = std::sqrt(2.0 / M_PI);
      return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
    });
  return ctx.error("approximate must be 'none' or 'tanh', got '" + approx + "'");
}

Result kAbs(KernelContext &ctx) {
  return unaryNum(
      ctx, [](double x) { return std::fabs(x); },
      [](int64_t x) { return x < 0 ? int64_t(0 - u64(x)) : x; }, [](uint64_t x) { return x; });
}
Result kNeg(KernelContext &ctx) {
  return unaryNum(
      ctx, [](double x) { return -x; }, [](int64_t x) { return int64_t(0 - u64(x)); },
      [](uint64_t x) { return 0 - x; });
}
Result kSign(KernelContext &ctx) {
  return unaryNum(
      ctx, [](double x) { return x > 0   ? 1.0
                                 : x < 0 ? -1.0
                                         : x; }, // NaN and 0 stay
      [](int64_t x) { return int64_t(x > 0) - int64_t(x < 0); },
      [](uint64_t x) { return uint64_t(x != 0); });
}
Result kRelu(KernelContext &ctx) {
  return unaryNum(
      ctx, [](double x) { return x < 0 ? 0.0 : x; }, [](int64_t x) { return x < 0 ? 0 : x; },
      [](uint64_t x) { return x; });
}
Result kBitwiseNot(KernelContext &ctx) {
  return unaryNum(
      ctx, [](double x) { return x; }, [](int64_t x) { return ~x; }, [](uint64_t x) { return ~x; });
}
Result kNot(KernelContext &ctx) {
  return unaryNum(
      ctx, [](double x) { return x == 0; }, [](int64_t x) { return x == 0; },
      [](uint64_t x) { return x == 0; });
}
Result kShrink(KernelContext &ctx) {
  double bias = attrF(ctx, "bias", 0.0), lambd = attrF(ctx, "lambd", 0.5);
  auto f = [bias, lambd](double x) { return x < -lambd ? x + bias : x > lambd ? x - bias : 0.0; };
  COIL_TRY_STATUS(needInputs(ctx, 1));
  const Tensor &x = ctx.input(0);
  Tensor out(x.dtype(), x.shape());
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    double v = f(x.getDouble(i));
    if (isFloat(x.dtype()))
      storeDouble(out, i, v);
    else // truncate toward zero; out-of-range values saturate before wrapping
      out.setDouble(i, v);
  }
  return std::vector<Tensor>{out};
}
Result kIsNaN(KernelContext &ctx) {
  return unaryNum(
      ctx, [](double x) { return std::isnan(x); }, [](int64_t) { return false; },
      [](uint64_t) { return false; }, DType::Bool);
}
Result kIsInf(KernelContext &ctx) {
  bool neg = ctx.attrs().getInt("detect_negative", 1) != 0;
  bool pos = ctx.attrs().getInt("detect_positive", 1) != 0;
  return unaryNum(
      ctx, [neg, pos](double x) { return std::isinf(x) && (x > 0 ? pos : neg); },
      [](int64_t) { return false; }, [](uint64_t) { return false; }, DType::Bool);
}

// --- binary

/// Broadcasts inputs 0 and 1 and applies `ff` (floats, in double), `fi` (signed integers, in
/// int64) or `fu` (unsigned and bool, in uint64), chosen by the dtype of input 0. The output has
/// dtype `outType` (default: input 0's).
template <typename FF, typename FI, typename FU>
Result binaryNum(KernelContext &ctx, FF ff, FI fi, FU fu, std::optional<DType> outType = {}) {
  COIL_TRY_STATUS(needInputs(ctx, 2));
  const Tensor &a = ctx.input(0), &b = ctx.input(1);
  if (a.dtype() != b.dtype())
    return ctx.error("inputs 0 and 1 must have the same dtype, got " +
                     std::string(dtypeName(a.dtype())) + " and " +
                     std::string(dtypeName(b.dtype())));
  COIL_TRY(Broadcast bc, broadcastInputs(ctx, {&a, &b}));
  Tensor out(outType.value_or(a.dtype()), bc.shape);
  Domain d = domainOf(a.dtype());
  for (int64_t i = 0, n = out.numel(); i < n; ++i) {
    int64_t x = bc.at(0, i), y = bc.at(1, i);
    if (d == Domain::Float)
      storeDouble(out, i, double(ff(a.getDouble(x), b.getDouble(y))));
    else if (d == Domain::Signed)
      out.setInt(i, int64_t(fi(a.getInt(x), b.getInt(y))));
    else
      out.setInt(i, int64_t(fu(u64(a.getInt(x)), u64(b.getInt(y)))));
  }
  return std::vector<Tensor>{out};
}

Result kAdd(KernelContext &ctx) {
  return binaryNum(
      ctx, [](double x, double y) { return x + y; },
      [](int64_t x, int64_t y) { return int64_t(u64(x) + u64(y)); },
      [](uint64_t x, uint64_t y) { return x + y; });
}
Result kSub(KernelContext &ctx) {
  return binaryNum(
      ctx, [](double x, double y) { return x - y; },
      [](int64_t x, int64_t y) { return int64_t(u64(x) - u64(y)); },
      [](uint64_t x, uint64_t y) { return x - y; });
}
Result kMul(KernelContext &ctx) {
  return binaryNum(
      ctx, [](double x, double y) { return x * y; },
      [](int64_t x, int64_t y) { return int64_t(u64(x) * u64(y)); },
      [](uint64_t x, uint64_t y) { return x * y; });
}

constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

Result kDiv(KernelContext &ctx) {
  bool divByZero = false;
  auto r = binaryNum(
      ctx, [](double x, double y) { return x / y; },
      [&](int64_t x, int64_t y) -> int64_t {
        if (y == 0) {
          divByZero = true;
          return 0;
        }
        return x == kI64Min && y == -1 ? x : x / y; // C++ division truncates toward zero
      },
      [&](uint64_t x, uint64_t y) -> uint64_t {
        if (y == 0) {
          divByZero = true;
          return 0;
        }
        return x / y;
      });
  if (divByZero) return ctx.error("integer division by zero");
  return r;
}

Result kMod(KernelContext &ctx) {
  bool fmod = ctx.attrs().getInt("fmod", 0) != 0;
  bool divByZero = false;
  auto r = binaryNum(
      ctx,
      [fmod](double x, double y) {
        double m = std::fmod(x, y);
        if (!fmod && m != 0 && (m < 0) != (y < 0)) m += y; // floor modulo: the sign of the divisor
        return m;
      },
      [&](int64_t x, int64_t y) -> int64_t {
        if (y == 0) {
          divByZero = true;
          return 0;
        }
        if (y == -1) return 0; // also avoids the overflow of INT64_MIN % -1
        int64_t m = x % y;
        if (!fmod && m != 0 && (m < 0) != (y < 0)) m += y;
        return m;
      },
      [&](uint64_t x, uint64_t y) -> uint64_t {
        if (y == 0) {
          divByZero = true;
          return 0;
        }
        return x % y;
      });
  if (divByZero) return ctx.error("integer modulo by zero");
  return r;
}

template <typename Cmp> Result compare(KernelContext &ctx, Cmp cmp) {
  return binaryNum(
      ctx, [cmp](double x, double y) { return cmp(x, y); },
      [cmp](int64_t x, int64_t y) { return cmp(x, y); },
      [cmp](uint64_t x, uint64_t y) { return cmp(x, y); }, DType::Bool);
}
Result kEqual(KernelContext &ctx) {
  return compare(ctx, [](auto x, auto y) { return x == y; });
}
Result kGreater(KernelContext &ctx) {
  return compare(ctx, [](auto x, auto y) { return x > y; });
}
Result kGreaterOrEqual(KernelContext &ctx) {
  return compare(ctx, [](auto x, auto y) { return x >= y; });
}
Result kLess(KernelContext &ctx) {
  return compare(ctx, [](auto x, auto y) { return x < y; });
}
Result kLessOrEqual(KernelContext &ctx) {
  return compare(ctx, [](auto x, auto y) { return x <= y; });
}

template <typename Op> Result bitwise(KernelContext &ctx, Op op) {
  return binaryNum(
      ctx, [](double x, double) { return x; }, // floats are rejected by inference
      [op](int64_t x, int64_t y) { return int64_t(op(u64(x), u64(y))); },
      [op](uint64_t x, uint64_t y) { return op(x, y); });
}
Result kBitwiseAnd(KernelContext &ctx) {
  return bitwise(ctx, [](uint64_t x, uint64_t y) { return x & y; });
}
Result kBitwiseOr(KernelContext &ctx) {
  return bitwise(ctx, [](uint64_t x, uint64_t y) { return x | y; });
}
Result kBitwiseXor(KernelContext &ctx) {
  return bitwise(ctx, [](uint64_t x, uint64_t y) { return x ^ y; });
}
Result kAnd(KernelContext &ctx) {
  return kBitwiseAnd(ctx);
} // bool is 0 or 1
Result kOr(KernelContext &ctx) {
  return kBitwiseOr(ctx);
}
Result kXor(KernelContext &ctx) {
  return kBitwiseXor(ctx);
}

Result kBitShift(KernelContext &ctx) {
  std::string dir = ctx.attrs().getString("direction", "");
  if (dir != "LEFT" && dir != "RIGHT")
    return ctx.error("direction must be 'LEFT' or 'RIGHT', got '" + dir + "'");
  COIL_TRY_STATUS(needInputs(ctx, 1));
  bool left = dir == "LEFT";
  int64_t bits = int64_t(dtypeSize(ctx.input(0).dtype()) * 8);
  // Shift amounts outside [0, bits) shift every bit out (0, or -1 for a negative signed value
  // shifted right).
  return binaryNum(
      ctx, [](double x, double) { return x; },
      [left, bits](int64_t x, int64_t s) -> int64_t {
        if (s < 0 || s >= bits) return left ? 0 : (x < 0 ? -1 : 0);
        return left ? int64_t(u64(x) << s) : x >> s; // values are sign-extended: arithmetic
      },
      [left, bits](uint64_t x, uint64_t s) -> uint64_t {
        if (s >= uint64_t(bits)) return 0;
        return left ? x << s : x >> s;
      });
}

/// x**y in integers, wrapping; a negative exponent gives the truncated value of 1 / x**-y.
Expected<int64_t> intPow(int64_t x, int64_t y) {
  if (y < 0) {
    if (x == 0) return Error::user("integer 0 raised to a negative power");
    if (x == 1) return 1;
    if (x == -1) return (y & 1) ? -1 : 1;
    return 0;
  }
  uint64_t base = u64(x), r = 1;
  for (uint64_t e = u64(y); e; e >>= 1) {
    if (e & 1) r *= base;
    base *= base;
  }
  return int64_t(r);
}

Result kPow(KernelContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 2));
  const Tensor &a = ctx.input(0), &b = ctx.input(1);
  COIL_TRY(Broadcast bc, broadcastInputs(ctx, {&a, &b}));
  Tensor out(a.dtype(), bc.shape);
  bool intBase = !isFloat(a.dtype()), intExp = !isFloat(b.dtype());
  for (int64_t i = 0, n = out.numel(); i < n; ++i) {
    int64_t x = bc.at(0, i), y = bc.at(1, i);
    if (intBase && intExp) {
      int64_t e = b.dtype() == DType::U64 && b.getInt(y) < 0 ? std::numeric_limits<int64_t>::max()
                                                             : b.getInt(y);
      auto p = intPow(a.getInt(x), e);
      if (!p.ok()) return ctx.error(p.error().message());
      out.setInt(i, *p);
    } else {
      storeDouble(out, i, std::pow(a.getDouble(x), b.getDouble(y)));
    }
  }
  return std::vector<Tensor>{out};
}

Result kPRelu(KernelContext &ctx) {
  return binaryNum(
      ctx, [](double x, double s) { return x < 0 ? s * x : x; },
      [](int64_t x, int64_t s) { return x < 0 ? int64_t(u64(s) * u64(x)) : x; },
      [](uint64_t x, uint64_t) { return x; });
}

// --- variadic

enum class Fold { Max, Min, Sum, Mean };

template <Fold F> Result variadic(KernelContext &ctx) {
  if (ctx.numInputs() == 0)
    return ctx.error(std::string(opName(ctx.node.op)) + " needs at least one input");
  COIL_TRY_STATUS(needInputs(ctx, ctx.numInputs()));
  DType t = ctx.input(0).dtype();
  for (size_t k = 1; k < ctx.numInputs(); ++k)
    if (ctx.input(k).dtype() != t)
      return ctx.error("inputs 0 and " + std::to_string(k) + " must have the same dtype, got " +
                       std::string(dtypeName(t)) + " and " +
                       std::string(dtypeName(ctx.input(k).dtype())));
  COIL_TRY(Broadcast bc, broadcastInputs(ctx, ctx.inputs));
  Tensor out(t, bc.shape);
  Domain d = domainOf(t);
  size_t m = ctx.numInputs();
  for (int64_t i = 0, n = out.numel(); i < n; ++i) {
    if (d == Domain::Float) {
      double acc = ctx.input(0).getDouble(bc.at(0, i));
      for (size_t k = 1; k < m; ++k) {
        double v = ctx.input(k).getDouble(bc.at(k, i));
        if constexpr (F == Fold::Max || F == Fold::Min) {
          if (std::isnan(v) || std::isnan(acc))
            acc = std::numeric_limits<double>::quiet_NaN(); // NaN propagates
          else
            acc = F == Fold::Max ? std::max(acc, v) : std::min(acc, v);
        } else {
          acc += v;
        }
      }
      if constexpr (F == Fold::Mean) acc /= double(m);
      storeDouble(out, i, acc);
    } else {
      int64_t acc = ctx.input(0).getInt(bc.at(0, i));
      for (size_t k = 1; k < m; ++k) {
        int64_t v = ctx.input(k).getInt(bc.at(k, i));
        bool less = d == Domain::Unsigned ? u64(v) < u64(acc) : v < acc;
        if constexpr (F == Fold::Max)
          acc = less ? acc : v;
        else if constexpr (F == Fold::Min)
          acc = less ? v : acc;
        else
          acc = int64_t(u64(acc) + u64(v));
      }
      if constexpr (F == Fold::Mean)
        acc = d == Domain::Unsigned ? int64_t(u64(acc) / m) : acc / int64_t(m);
      out.setInt(i, acc);
    }
  }
  return std::vector<Tensor>{out};
}

// --- selection and pass-through

Result kClip(KernelContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  const Tensor &x = ctx.input(0);
  // Bounds: inputs 1 and 2 (opset >= 11) or, in older models, attributes min and max.
  auto bound = [&](size_t i, const char *attr) -> Expected<std::optional<Tensor>> {
    if (ctx.hasInput(i)) {
      const Tensor &b = ctx.input(i);
      if (b.numel() != 1)
        return ctx.error("input " + std::to_string(i) + " of Clip must be a scalar, got shape " +
                         shapeStr(b.shape()));
      if (b.dtype() != x.dtype())
        return ctx.error("inputs 0 and " + std::to_string(i) + " must have the same dtype, got " +
                         std::string(dtypeName(x.dtype())) + " and " +
                         std::string(dtypeName(b.dtype())));
      return std::optional<Tensor>(b);
    }
    if (ctx.attrs().has(attr))
      return std::optional<Tensor>(Tensor::scalar(x.dtype(), ctx.attrs().getFloat(attr, 0)));
    return std::optional<Tensor>();
  };
  COIL_TRY(auto lo, bound(1, "min"));
  COIL_TRY(auto hi, bound(2, "max"));
  Tensor out = x.clone();
  Domain d = domainOf(x.dtype());
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    // max(x, lo) then min(., hi): when lo > hi every value becomes hi, as ONNX specifies.
    if (d == Domain::Float) {
      double v = x.getDouble(i);
      if (lo && v < lo->getDouble(0)) v = lo->getDouble(0);
      if (hi && v > hi->getDouble(0)) v = hi->getDouble(0);
      out.setDouble(i, v);
    } else {
      int64_t v = x.getInt(i);
      auto less = [d](int64_t p, int64_t q) {
        return d == Domain::Unsigned ? u64(p) < u64(q) : p < q;
      };
      if (lo && less(v, lo->getInt(0))) v = lo->getInt(0);
      if (hi && less(hi->getInt(0), v)) v = hi->getInt(0);
      out.setInt(i, v);
    }
  }
  return std::vector<Tensor>{out};
}

Result kWhere(KernelContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 3));
  const Tensor &c = ctx.input(0), &a = ctx.input(1), &b = ctx.input(2);
  if (a.dtype() != b.dtype())
    return ctx.error("inputs 1 and 2 must have the same dtype, got " +
                     std::string(dtypeName(a.dtype())) + " and " +
                     std::string(dtypeName(b.dtype())));
  COIL_TRY(Broadcast bc, broadcastInputs(ctx, {&c, &a, &b}));
  Tensor out(a.dtype(), bc.shape);
  size_t es = dtypeSize(a.dtype());
  auto *dst = static_cast<uint8_t *>(out.data());
  for (int64_t i = 0, n = out.numel(); i < n; ++i) {
    bool pick = c.getInt(bc.at(0, i)) != 0;
    const Tensor &src = pick ? a : b;
    int64_t j = bc.at(pick ? 1 : 2, i);
    std::memcpy(dst + size_t(i) * es, static_cast<const uint8_t *>(src.data()) + size_t(j) * es,
                es);
  }
  return std::vector<Tensor>{out};
}

Result kIdentity(KernelContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  return std::vector<Tensor>{ctx.input(0)};
}

Result kDropout(KernelContext &ctx) {
  COIL_TRY_STATUS(needInputs(ctx, 1));
  const Tensor &x = ctx.input(0);
  double ratio = 0.5;
  if (ctx.hasInput(1)) {
    if (ctx.input(1).numel() != 1)
      return ctx.error("ratio of Dropout must be a scalar, got shape " +
                       shapeStr(ctx.input(1).shape()));
    ratio = ctx.input(1).getDouble(0);
  }
  bool training = false;
  if (ctx.hasInput(2)) {
    if (ctx.input(2).numel() != 1)
      return ctx.error("training_mode of Dropout must be a scalar, got shape " +
                       shapeStr(ctx.input(2).shape()));
    training = ctx.input(2).getInt(0) != 0;
  }
  if (training && ratio != 0.0) return ctx.error("training-mode Dropout is not supported");
  Tensor mask(DType::Bool, x.shape());
  for (int64_t i = 0, n = mask.numel(); i < n; ++i) mask.setInt(i, 1);
  return std::vector<Tensor>{x, mask};
}

} // namespace
} // namespace elementwise

void registerElementwiseKernels(KernelRegistry &r) {
  using namespace elementwise;
  const std::pair<OpKind, KernelFn> kernels[] = {
      {OpKind::Abs, kAbs},
      {OpKind::Acos, kAcos},
      {OpKind::Acosh, kAcosh},
      {OpKind::Add, kAdd},
      {OpKind::And, kAnd},
      {OpKind::Asin, kAsin},
      {OpKind::Asinh, kAsinh},
      {OpKind::Atan, kAtan},
      {OpKind::Atanh, kAtanh},
      {OpKind::BitShift, kBitShift},
      {OpKind::BitwiseAnd, kBitwiseAnd},
      {OpKind::BitwiseNot, kBitwiseNot},
      {OpKind::BitwiseOr, kBitwiseOr},
      {OpKind::BitwiseXor, kBitwiseXor},
      {OpKind::Ceil, kCeil},
      {OpKind::Celu, kCelu},
      {OpKind::Clip, kClip},
      {OpKind::Cos, kCos},
      {OpKind::Cosh, kCosh},
      {OpKind::Div, kDiv},
      {OpKind::Dropout, kDropout},
      {OpKind::Elu, kElu},
      {OpKind::Equal, kEqual},
      {OpKind::Erf, kErf},
      {OpKind::Exp, kExp},
      {OpKind::Floor, kFloor},
      {OpKind::Gelu, kGelu},
      {OpKind::Greater, kGreater},
      {OpKind::GreaterOrEqual, kGreaterOrEqual},
      {OpKind::HardSigmoid, kHardSigmoid},
      {OpKind::HardSwish, kHardSwish},
      {OpKind::Identity, kIdentity},
      {OpKind::IsInf, kIsInf},
      {OpKind::IsNaN, kIsNaN},
      {OpKind::LeakyRelu, kLeakyRelu},
      {OpKind::Less, kLess},
      {OpKind::LessOrEqual, kLessOrEqual},
      {OpKind::Log, kLog},
      {OpKind::Mish, kMish},
      {OpKind::Mod, kMod},
      {OpKind::Mul, kMul},
      {OpKind::Neg, kNeg},
      {OpKind::Not, kNot},
      {OpKind::Or, kOr},
      {OpKind::PRelu, kPRelu},
      {OpKind::Pow, kPow},
      {OpKind::Reciprocal, kReciprocal},
      {OpKind::Relu, kRelu},
      {OpKind::Round, kRound},
      {OpKind::Selu, kSelu},
      {OpKind::Shrink, kShrink},
      {OpKind::Sigmoid, kSigmoid},
      {OpKind::Sign, kSign},
      {OpKind::Sin, kSin},
      {OpKind::Sinh, kSinh},
      {OpKind::Softplus, kSoftplus},
      {OpKind::Softsign, kSoftsign},
      {OpKind::Sqrt, kSqrt},
      {OpKind::Sub, kSub},
      {OpKind::Swish, kSwish},
      {OpKind::Tan, kTan},
      {OpKind::Tanh, kTanh},
      {OpKind::ThresholdedRelu, kThresholdedRelu},
      {OpKind::Where, kWhere},
      {OpKind::Xor, kXor},
  };
  for (const auto &[op, fn] : kernels) r.add(op, fn);
  r.add(OpKind::Max, variadic<Fold::Max>);
  r.add(OpKind::Min, variadic<Fold::Min>);
  r.add(OpKind::Sum, variadic<Fold::Sum>);
  r.add(OpKind::Mean, variadic<Fold::Mean>);
  registerElementwiseConvertKernels(r);
}

} // namespace coil
