// Lowering of the Reduction family (see Ops.def): Reduce*, ArgMax/ArgMin, Softmax/LogSoftmax/
// Hardmax, the normalizations and the losses; TopK, CumSum and CumProd (externs) are in
// ReductionDynamic.cpp.
//
// Every op becomes Reduction nodes (one per statistic) plus Pointwise nodes that read them; the
// scheduler fuses a row's reductions and its pointwise epilogue into one kernel. Statistics are
// accumulated in f32 for f16/bf16/f32 inputs (f64 for f64), integer sums and products in 64 bits
// (which wrap to the same result as the interpreter's exact arithmetic once stored).
//
// The interpreter (interp/kernels/Reduction*.cpp) is the reference for every formula here.
#include "ir/OpAttrs.h"
#include "kernels/Externs.h"
#include "lower/Lower.h"
#include "lower/ops/LinalgLower.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace coil::loop {
namespace {

std::string opStr(const LowerContext &ctx) {
  return std::string(opName(ctx.gnode().op));
}

/// The dtype statistics of `t` accumulate in.
DType floatAcc(DType t) {
  return t == DType::F64 ? DType::F64 : DType::F32;
}
/// Accumulator of an integer sum or product: 64 bits of the same signedness.
DType wideInt(DType t) {
  return isUnsigned(t) ? DType::U64 : DType::I64;
}

Expected<int64_t> normAxis(const LowerContext &ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return ctx.error("axis " + std::to_string(axis) + " of " + opStr(ctx) +
                     " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

/// Whether output i is present (an optional output may be absent).
bool hasOutput(const LowerContext &ctx, size_t i) {
  return i < ctx.numOutputs() && ctx.gnode().outputs[i] != kNoValue;
}

Val ldCast(BodyBuilder &b, const TensorRef &t, const std::vector<SymInt> &idx, DType ct) {
  return b.cast(b.load(t, idx), ct);
}

/// A tensor of shape `in` reduced over the dims marked in `reduced`. The reduction's outer
/// point has the kept dims (keepdims: every dim, the reduced ones of extent 1).
struct AxesSplit {
  std::vector<SymInt> in;
  std::vector<bool> reduced;
  bool keepdims = false;

  std::vector<SymInt> outer() const {
    std::vector<SymInt> s;
    for (size_t d = 0; d < in.size(); ++d) {
      if (!reduced[d])
        s.push_back(in[d]);
      else if (keepdims)
        s.push_back(1);
    }
    return s;
  }
  std::vector<SymInt> rranges() const {
    std::vector<SymInt> s;
    for (size_t d = 0; d < in.size(); ++d)
      if (reduced[d]) s.push_back(in[d]);
    return s;
  }
  SymInt count() const {
    SymInt c = 1;
    for (const SymInt &s : rranges()) c = c * s;
    return c;
  }
  /// The input index of (outer point, reduced point).
  std::vector<SymInt> compose(const std::vector<SymInt> &o, const std::vector<SymInt> &r) const {
    std::vector<SymInt> idx;
    size_t oi = 0, ri = 0;
    for (size_t d = 0; d < in.size(); ++d) {
      if (reduced[d]) {
        idx.push_back(r[ri++]);
        if (keepdims) ++oi;
      } else {
        idx.push_back(o[oi++]);
      }
    }
    return idx;
  }
  /// The outer point of input index `full`.
  std::vector<SymInt> outerOf(const std::vector<SymInt> &full) const {
    std::vector<SymInt> o;
    for (size_t d = 0; d < in.size(); ++d) {
      if (!reduced[d])
        o.push_back(full[d]);
      else if (keepdims)
        o.push_back(0);
    }
    return o;
  }
};

AxesSplit splitAxes(const std::vector<SymInt> &shape, const std::vector<int64_t> &dims,
                    bool keepdims) {
  AxesSplit s{shape, std::vector<bool>(shape.size(), false), keepdims};
  for (int64_t d : dims) s.reduced[size_t(d)] = true;
  return s;
}

/// Sum over the split of `value(b, inputIndex)`, accumulated and stored in `acc`.
TensorRef sumOver(LowerContext &ctx, const AxesSplit &s, DType acc,
                  const std::function<Val(BodyBuilder &, const std::vector<SymInt> &)> &value,
                  const std::string &hint) {
  return ctx.reduce(
      ReduceKind::Sum, acc, acc, s.outer(), s.rranges(),
      [&](BodyBuilder &b, const std::vector<SymInt> &o, const std::vector<SymInt> &r, Val *) {
        return b.cast(value(b, s.compose(o, r)), acc);
      },
      false, hint);
}

// --- Reduce*

/// Reduce* whose axes are read at run time: an allocating extern (kernels/cpu/CpuReduce.cpp)
/// that computes the output dims, defining the symbols inference gave them. The output rank
/// must be static: keepdims=1, or keepdims=0 with a static number of axes.
Status lowerReduceRuntimeAxes(LowerContext &ctx) {
  namespace la = linalg;
  constexpr int64_t kMaxRank = 8;
  TensorRef x = ctx.input(0);
  int64_t rank = x.rank();
  const TensorType &axesT = ctx.inputType(1);
  if (axesT.dtype != DType::I64 || axesT.rank() != 1)
    return ctx.error("axes (input 1) of " + opStr(ctx) + " must be a 1-d i64 tensor");
  if (rank > kMaxRank)
    return ctx.error("input 0 of " + opStr(ctx) + " with axes known only at run time must have " +
                     "rank <= " + std::to_string(kMaxRank) + ", got rank " + std::to_string(rank));
  const TensorType &yt = ctx.outputType(0);
  if (yt.rank() > rank)
    return ctx.error("the output of " + opStr(ctx) + " has rank " + std::to_string(yt.rank()) +
                     ", above the input's " + std::to_string(rank));
  int64_t kind = 0;
  switch (ctx.gnode().op) {
  case OpKind::ReduceSum:
    kind = 0;
    break;
  case OpKind::ReduceSumSquare:
    kind = 1;
    break;
  case OpKind::ReduceL1:
    kind = 2;
    break;
  case OpKind::ReduceL2:
    kind = 3;
    break;
  case OpKind::ReduceLogSum:
    kind = 4;
    break;
  case OpKind::ReduceLogSumExp:
    kind = 5;
    break;
  case OpKind::ReduceMax:
    kind = 6;
    break;
  case OpKind::ReduceMin:
    kind = 7;
    break;
  case OpKind::ReduceMean:
    kind = 8;
    break;
  default:
    kind = 9;
    break;
  }
  if (!isFloat(x.dtype) && (kind == 4 || kind == 5))
    return ctx.error(opStr(ctx) + " requires a floating-point input, got " +
                     std::string(dtypeName(x.dtype)));
  COIL_TRY(ReduceAttrs ra, decodeReduce(ctx.gnode()));
  bool keepdims = ra.keepdims, noop = ra.noopWithEmptyAxes;
  x = ctx.realize(x);
  TensorRef axes = ctx.realize(ctx.input(1));
  // The output dims: the symbols inference made (readers of the output see them), fresh ones
  // where inference knew the dim or named it after an input dim.
  std::vector<SymInt> shape;
  std::vector<ExternArg> args{la::nodeArg(x), la::nodeArg(axes), la::outArg(0)};
  std::set<std::string> inSyms;
  for (const SymInt &in : x.shape) in.collectSymbols(inSyms);
  for (int64_t d = 0; d < kMaxRank; ++d) {
    std::string sym;
    const SymInt *dim = d < yt.rank() ? &yt.shape[size_t(d)] : nullptr;
    bool ownSymbol = dim && dim->isSymbol() && !inSyms.count(dim->symbolName());
    sym = ownSymbol ? dim->symbolName() : ctx.freshSymbol("reduced").symbolName();
    if (dim) shape.push_back(SymInt::symbol(sym));
    args.push_back(la::outSymbolArg(sym));
  }
  args.push_back(la::intArg(rank));
  for (int64_t d = 0; d < kMaxRank; ++d)
    args.push_back(la::intArg(d < rank ? x.shape[size_t(d)] : SymInt(1)));
  args.push_back(la::intArg(axes.shape[0]));
  args.push_back(la::intArg(kind));
  args.push_back(la::intArg(keepdims ? 1 : 0));
  args.push_back(la::intArg(noop ? 1 : 0));
  auto outs = ctx.externCall(kernels::cpuSymbol(kernels::ExternId::ReduceDyn, x.dtype),
                             std::move(args), {{x.dtype, shape}}, true);
  ctx.setOutput(0, outs[0]);
  return okStatus();
}

Status lowerReduce(LowerContext &ctx) {
  const coil::Node &n = ctx.gnode();
  TensorRef x = ctx.input(0);
  DType t = x.dtype;
  COIL_TRY(ReduceAttrs ra, decodeReduce(n));
  bool keepdims = ra.keepdims, noop = ra.noopWithEmptyAxes;
  int64_t rank = x.rank();
  std::vector<int64_t> axes;
  if (ctx.hasInput(1)) {
    auto v = ctx.intValue(1);
    bool known =
        v && std::all_of(v->begin(), v->end(), [](const SymInt &s) { return s.isConstant(); });
    auto numAxes =
        ctx.inputType(1).rank() == 1 ? ctx.inputType(1).shape[0].maybeConstant() : std::nullopt;
    // No axes with noop_with_empty_axes is the input; otherwise the extern defines the output
    // dims (inference gave them fresh symbols even for a static empty axes).
    if (!known && !(numAxes == 0 && noop)) return lowerReduceRuntimeAxes(ctx);
    if (known)
      for (const SymInt &s : *v) axes.push_back(s.constant());
  } else {
    axes = ra.axes.value_or(std::vector<int64_t>{});
  }
  if (axes.empty() && noop) {
    ctx.setOutput(0, x);
    return okStatus();
  }
  std::vector<int64_t> dims;
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
  for (int64_t a : axes) {
    COIL_TRY(int64_t d, normAxis(ctx, a, rank));
    if (std::find(dims.begin(), dims.end(), d) != dims.end())
      return ctx.error("axis " + std::to_string(a) + " appears more than once in axes of " +
                       opStr(ctx));
    dims.push_back(d);
  }
  AxesSplit s = splitAxes(x.shape, dims, keepdims);
  OpKind op = n.op;
  bool fl = isFloat(t);
  DType outT = ctx.outputType(0).dtype;

  // Max / Min (bool: any / all), in the input's own type so the identity of an empty reduction
  // is the dtype's lowest / highest value, as in the interpreter.
  if (op == OpKind::ReduceMax || op == OpKind::ReduceMin) {
    bool isMax = op == OpKind::ReduceMax;
    ReduceKind k = t == DType::Bool ? (isMax ? ReduceKind::Any : ReduceKind::All)
                                    : (isMax ? ReduceKind::Max : ReduceKind::Min);
    DType acc = fl ? floatAcc(t) : t;
    ctx.setOutput(
        0, ctx.reduce(
               k, outT, acc, s.outer(), s.rranges(),
               [&](BodyBuilder &b, const std::vector<SymInt> &o, const std::vector<SymInt> &r,
                   Val *) { return ldCast(b, x, s.compose(o, r), acc); },
               false, isMax ? "max" : "min"));
    return okStatus();
  }
  if (op == OpKind::ReduceProd) {
    DType acc = fl ? floatAcc(t) : wideInt(t);
    ctx.setOutput(
        0, ctx.reduce(
               ReduceKind::Prod, outT, acc, s.outer(), s.rranges(),
               [&](BodyBuilder &b, const std::vector<SymInt> &o, const std::vector<SymInt> &r,
                   Val *) { return ldCast(b, x, s.compose(o, r), acc); },
               false, "prod"));
    return okStatus();
  }
  if (op == OpKind::ReduceLogSumExp) {
    // Stable: m = max, s = sum(exp(x - m)), m + log(s); an infinite or NaN m is the result.
    DType acc = floatAcc(t);
    TensorRef m = ctx.reduce(
        ReduceKind::Max, acc, acc, s.outer(), s.rranges(),
        [&](BodyBuilder &b, const std::vector<SymInt> &o, const std::vector<SymInt> &r, Val *) {
          return ldCast(b, x, s.compose(o, r), acc);
        },
        false, "max");
    TensorRef sum = ctx.reduce(
        ReduceKind::Sum, acc, acc, s.outer(), s.rranges(),
        [&](BodyBuilder &b, const std::vector<SymInt> &o, const std::vector<SymInt> &r, Val *) {
          Val v = ldCast(b, x, s.compose(o, r), acc);
          return b.op(ScalarOp::Exp, b.op(ScalarOp::Sub, v, b.load(m, o)));
        },
        false, "sumexp");
    ctx.setOutput(
        0, ctx.pointwise(outT, s.outer(), [&](BodyBuilder &b, const std::vector<SymInt> &o) {
          Val mv = b.load(m, o);
          Val finite = b.op(ScalarOp::Eq, b.op(ScalarOp::Sub, mv, mv), b.constant(acc, 0));
          Val lse = b.op(ScalarOp::Add, mv, b.op(ScalarOp::Log, b.load(sum, o)));
          return b.cast(b.op(ScalarOp::Select, finite, lse, mv), outT);
        }));
    return okStatus();
  }

  // The sum family: Sum, Mean, SumSquare, L1, L2, LogSum.
  DType acc = fl ? floatAcc(t) : wideInt(t);
  bool square = op == OpKind::ReduceSumSquare || op == OpKind::ReduceL2;
  bool absv = op == OpKind::ReduceL1;
  bool epilogue = op == OpKind::ReduceMean || op == OpKind::ReduceL2 || op == OpKind::ReduceLogSum;
  TensorRef sum = ctx.reduce(
      ReduceKind::Sum, epilogue ? acc : outT, acc, s.outer(), s.rranges(),
      [&](BodyBuilder &b, const std::vector<SymInt> &o, const std::vector<SymInt> &r, Val *) {
        Val v = ldCast(b, x, s.compose(o, r), acc);
        if (square) v = b.op(ScalarOp::Mul, v, v);
        if (absv) v = b.op(ScalarOp::Abs, v);
        return v;
      },
      false, "sum");
  if (!epilogue) {
    ctx.setOutput(0, sum);
    return okStatus();
  }
  SymInt count = s.count();
  ctx.setOutput(0,
                ctx.pointwise(outT, s.outer(), [&](BodyBuilder &b, const std::vector<SymInt> &o) {
                  Val v = b.load(sum, o);
                  if (op == OpKind::ReduceMean) {
                    // Integer division by an empty count gives 0, as in the interpreter.
                    v = b.op(ScalarOp::Div, v, b.index(count, acc));
                  } else if (op == OpKind::ReduceLogSum) {
                    v = b.op(ScalarOp::Log, v);
                  } else if (fl) {
                    v = b.op(ScalarOp::Sqrt, v);
                  } else { // integer L2: the square root truncated toward zero
                    v = b.cast(b.op(ScalarOp::Sqrt, b.cast(v, DType::F64)), DType::I64);
                  }
                  return b.cast(v, outT);
                }));
  return okStatus();
}

// --- ArgMax / ArgMin

Status lowerArg(LowerContext &ctx) {
  const coil::Node &n = ctx.gnode();
  TensorRef x = ctx.input(0);
  if (x.rank() == 0)
    return ctx.error("input 0 of " + opStr(ctx) + " must have rank >= 1, got rank 0");
  COIL_TRY(int64_t axis, normAxis(ctx, n.attrs.getInt("axis", 0), x.rank()));
  bool keepdims = n.attrs.getInt("keepdims", 1) != 0;
  bool last = n.attrs.getInt("select_last_index", 0) != 0;
  AxesSplit s = splitAxes(x.shape, {axis}, keepdims);
  DType acc = isFloat(x.dtype) ? floatAcc(x.dtype) : x.dtype;
  ReduceKind k = n.op == OpKind::ArgMax ? ReduceKind::ArgMax : ReduceKind::ArgMin;
  ctx.setOutput(0, ctx.reduce(
                       k, DType::I64, acc, s.outer(), s.rranges(),
                       [&](BodyBuilder &b, const std::vector<SymInt> &o,
                           const std::vector<SymInt> &r, Val *pos) {
                         *pos = b.index(r[0]);
                         return ldCast(b, x, s.compose(o, r), acc);
                       },
                       last, "arg"));
  return okStatus();
}

// --- Softmax / LogSoftmax / Hardmax

/// Log-softmax (or softmax) of `x` along `axis`, computed in `ct`, stored as `outT`: a max
/// reduction, a sum-of-exp reduction and a pointwise epilogue, all over the same outer point.
TensorRef softmaxOf(LowerContext &ctx, const TensorRef &x, int64_t axis, bool log, DType ct,
                    DType outT) {
  AxesSplit s = splitAxes(x.shape, {axis}, false);
  TensorRef m = ctx.reduce(
      ReduceKind::Max, ct, ct, s.outer(), s.rranges(),
      [&](BodyBuilder &b, const std::vector<SymInt> &o, const std::vector<SymInt> &r, Val *) {
        return ldCast(b, x, s.compose(o, r), ct);
      },
      false, "max");
  TensorRef sum = ctx.reduce(
      ReduceKind::Sum, ct, ct, s.outer(), s.rranges(),
      [&](BodyBuilder &b, const std::vector<SymInt> &o, const std::vector<SymInt> &r, Val *) {
        Val v = ldCast(b, x, s.compose(o, r), ct);
        return b.op(ScalarOp::Exp, b.op(ScalarOp::Sub, v, b.load(m, o)));
      },
      false, "sumexp");
  return ctx.pointwise(outT, x.shape, [&](BodyBuilder &b, const std::vector<SymInt> &idx) {
    std::vector<SymInt> o = s.outerOf(idx);
    Val d = b.op(ScalarOp::Sub, ldCast(b, x, idx, ct), b.load(m, o));
    Val sv = b.load(sum, o);
    Val y = log ? b.op(ScalarOp::Sub, d, b.op(ScalarOp::Log, sv))
                : b.op(ScalarOp::Div, b.op(ScalarOp::Exp, d), sv);
    return b.cast(y, outT);
  });
}

Status lowerSoftmax(LowerContext &ctx) {
  const coil::Node &n = ctx.gnode();
  TensorRef x = ctx.input(0);
  if (x.rank() == 0)
    return ctx.error("input 0 of " + opStr(ctx) + " must have rank >= 1, got rank 0");
  COIL_TRY(int64_t axis, normAxis(ctx, n.attrs.getInt("axis", -1), x.rank()));
  DType outT = ctx.outputType(0).dtype;
  DType ct = floatAcc(x.dtype);
  if (n.op == OpKind::Hardmax) {
    // One at the first maximum (a NaN counts as the maximum), zero elsewhere.
    AxesSplit s = splitAxes(x.shape, {axis}, false);
    TensorRef am = ctx.reduce(
        ReduceKind::ArgMax, DType::I64, ct, s.outer(), s.rranges(),
        [&](BodyBuilder &b, const std::vector<SymInt> &o, const std::vector<SymInt> &r, Val *pos) {
          *pos = b.index(r[0]);
          return ldCast(b, x, s.compose(o, r), ct);
        },
        false, "argmax");
    ctx.setOutput(
        0, ctx.pointwise(outT, x.shape, [&](BodyBuilder &b, const std::vector<SymInt> &idx) {
          Val hit = b.op(ScalarOp::Eq, b.index(idx[size_t(axis)]), b.load(am, s.outerOf(idx)));
          return b.op(ScalarOp::Select, hit, b.constant(outT, 1), b.constant(outT, 0));
        }));
    return okStatus();
  }
  ctx.setOutput(0, softmaxOf(ctx, x, axis, n.op == OpKind::LogSoftmax, ct, outT));
  return okStatus();
}

// --- LayerNormalization / RMSNormalization

Expected<DType> stashDType(const LowerContext &ctx) {
  int64_t s = ctx.gnode().attrs.getInt("stash_type", 1);
  if (auto t = dtypeFromOnnxCode(s); t && isFloat(*t)) return *t;
  return ctx.error("stash_type " + std::to_string(s) + " of " + opStr(ctx) +
                   " is not a supported floating-point type");
}

/// Statistics of `x` over a split, as pointwise nodes of shape s.outer() in the compute type.
struct Moments {
  TensorRef mean, var, inv; ///< inv = 1 / sqrt(var + eps)
};

/// Mean, (population) variance and inverse standard deviation of `x` over the split, in two
/// passes as the interpreter computes them. `rms`: the mean is taken as 0.
Moments moments(LowerContext &ctx, const TensorRef &x, const AxesSplit &s, DType ct, double eps,
                bool rms) {
  SymInt count = s.count();
  std::optional<TensorRef> mean;
  if (!rms) {
    TensorRef sum = sumOver(
        ctx, s, ct, [&](BodyBuilder &b, const std::vector<SymInt> &i) { return b.load(x, i); },
        "sum");
    mean = ctx.pointwise(
        ct, s.outer(),
        [&](BodyBuilder &b, const std::vector<SymInt> &o) {
          return b.op(ScalarOp::Div, b.load(sum, o), b.index(count, ct));
        },
        "mean");
  }
  TensorRef sq = sumOver(
      ctx, s, ct,
      [&](BodyBuilder &b, const std::vector<SymInt> &i) {
        Val d = ldCast(b, x, i, ct);
        if (mean) d = b.op(ScalarOp::Sub, d, b.load(*mean, s.outerOf(i)));
        return b.op(ScalarOp::Mul, d, d);
      },
      "sumsq");
  TensorRef var = ctx.pointwise(
      ct, s.outer(),
      [&](BodyBuilder &b, const std::vector<SymInt> &o) {
        return b.op(ScalarOp::Div, b.load(sq, o), b.index(count, ct));
      },
      "var");
  TensorRef inv = ctx.pointwise(
      ct, s.outer(),
      [&](BodyBuilder &b, const std::vector<SymInt> &o) {
        Val sd = b.op(ScalarOp::Sqrt, b.op(ScalarOp::Add, b.load(var, o), b.constant(ct, eps)));
        return b.op(ScalarOp::Div, b.constant(ct, 1), sd);
      },
      "rstd");
  if (!mean)
    mean = ctx.pointwise(
        ct, s.outer(),
        [&](BodyBuilder &b, const std::vector<SymInt> &) { return b.constant(ct, 0); }, "mean");
  return {*mean, var, inv};
}

Status lowerLayerNorm(LowerContext &ctx) {
  const coil::Node &n = ctx.gnode();
  TensorRef x = ctx.input(0);
  if (x.rank() == 0)
    return ctx.error("input 0 of " + opStr(ctx) + " must have rank >= 1, got rank 0");
  COIL_TRY(int64_t axis, normAxis(ctx, n.attrs.getInt("axis", -1), x.rank()));
  COIL_TRY(DType stash, stashDType(ctx));
  double eps = n.attrs.getFloat("epsilon", 1e-5);
  bool rms = n.op == OpKind::RMSNormalization;
  DType ct = x.dtype == DType::F64 || stash == DType::F64 ? DType::F64 : DType::F32;
  std::vector<int64_t> dims;
  for (int64_t d = axis; d < x.rank(); ++d) dims.push_back(d);
  AxesSplit s = splitAxes(x.shape, dims, false);
  Moments m = moments(ctx, x, s, ct, eps, rms);
  TensorRef scale = ctx.input(1);
  std::optional<TensorRef> bias;
  if (ctx.hasInput(2)) bias = ctx.input(2);
  DType outT = ctx.outputType(0).dtype;
  ctx.setOutput(0,
                ctx.pointwise(outT, x.shape, [&](BodyBuilder &b, const std::vector<SymInt> &idx) {
                  std::vector<SymInt> o = s.outerOf(idx);
                  Val v = b.op(ScalarOp::Sub, ldCast(b, x, idx, ct), b.load(m.mean, o));
                  v = b.op(ScalarOp::Mul, b.op(ScalarOp::Mul, v, b.load(m.inv, o)),
                           b.cast(b.loadBroadcast(scale, idx), ct));
                  if (bias) v = b.op(ScalarOp::Add, v, b.cast(b.loadBroadcast(*bias, idx), ct));
                  return b.cast(v, outT);
                }));
  if (rms) return okStatus();
  // Mean and InvStdDev have shape x.shape[:axis] + [1] * (rank - axis), in the stash type.
  for (size_t i = 1; i < 3; ++i) {
    if (!hasOutput(ctx, i)) continue;
    const TensorType &ot = ctx.outputType(i);
    TensorRef stat = i == 1 ? m.mean : m.inv;
    auto statIndex = [axis](const std::vector<SymInt> &idx) {
      return std::vector<SymInt>(idx.begin(), idx.begin() + axis);
    };
    if (ot.dtype != ct || axis == 0) {
      // (A view of a rank-0 tensor cannot be told from the identity: compute axis 0 instead.)
      ctx.setOutput(
          i, ctx.pointwise(ot.dtype, ot.shape, [&](BodyBuilder &b, const std::vector<SymInt> &idx) {
            return b.cast(b.load(stat, statIndex(idx)), ot.dtype);
          }));
      continue;
    }
    ctx.setOutput(i, ctx.view(stat, ot.shape, statIndex));
  }
  return okStatus();
}

// --- BatchNormalization

Status lowerBatchNorm(LowerContext &ctx) {
  const coil::Node &n = ctx.gnode();
  TensorRef x = ctx.input(0);
  if (x.rank() < 2)
    return ctx.error("input 0 of BatchNormalization must have rank >= 2, got rank " +
                     std::to_string(x.rank()));
  double eps = n.attrs.getFloat("epsilon", 1e-5);
  double momentum = n.attrs.getFloat("momentum", 0.9);
  bool training = n.attrs.getInt("training_mode", 0) != 0;
  DType ct = floatAcc(x.dtype);
  for (size_t i = 1; i <= 4; ++i)
    if (ctx.inputType(i).dtype == DType::F64) ct = DType::F64;
  TensorRef scale = ctx.input(1), bias = ctx.input(2);
  TensorRef mean = ctx.input(3), var = ctx.input(4);
  if (training) {
    // Batch statistics over every dim but the channel (population variance) normalize; the
    // running statistics are updated with the momentum.
    std::vector<int64_t> dims{0};
    for (int64_t d = 2; d < x.rank(); ++d) dims.push_back(d);
    AxesSplit s = splitAxes(x.shape, dims, false);
    Moments st = moments(ctx, x, s, ct, 0.0, false);
    TensorRef bm = st.mean, bv = st.var;
    for (size_t i = 1; i < 3; ++i) {
      if (!hasOutput(ctx, i)) continue;
      const TensorRef &running = i == 1 ? mean : var;
      const TensorRef &batch = i == 1 ? bm : bv;
      DType ot = ctx.outputType(i).dtype;
      ctx.setOutput(
          i, ctx.pointwise(ot, s.outer(), [&](BodyBuilder &b, const std::vector<SymInt> &o) {
            Val r = b.op(ScalarOp::Mul, ldCast(b, running, o, ct), b.constant(ct, momentum));
            Val c = b.op(ScalarOp::Mul, b.load(batch, o), b.constant(ct, 1 - momentum));
            return b.cast(b.op(ScalarOp::Add, r, c), ot);
          }));
    }
    mean = bm;
    var = bv;
  }
  DType outT = ctx.outputType(0).dtype;
  ctx.setOutput(
      0, ctx.pointwise(outT, x.shape, [&](BodyBuilder &b, const std::vector<SymInt> &idx) {
        std::vector<SymInt> c{idx[1]};
        Val sd =
            b.op(ScalarOp::Sqrt, b.op(ScalarOp::Add, ldCast(b, var, c, ct), b.constant(ct, eps)));
        Val k = b.op(ScalarOp::Div, ldCast(b, scale, c, ct), sd);
        Val v = b.op(ScalarOp::Sub, ldCast(b, x, idx, ct), ldCast(b, mean, c, ct));
        v = b.op(ScalarOp::Add, b.op(ScalarOp::Mul, v, k), ldCast(b, bias, c, ct));
        return b.cast(v, outT);
      }));
  return okStatus();
}

// --- InstanceNormalization / GroupNormalization

/// x [N, C, inner...] normalized per (n, group) of C / groups channels; scale and bias have one
/// element per channel (`perChannel`) or per group.
Status lowerGroupNormWith(LowerContext &ctx, int64_t groups, bool perChannel) {
  TensorRef x = ctx.input(0);
  double eps = ctx.gnode().attrs.getFloat("epsilon", 1e-5);
  DType ct = floatAcc(x.dtype);
  SymInt c = x.shape[1];
  SymInt cpg = groups == 1 ? c : floorDiv(c, groups);
  // The view [N, G, C/G, inner...] of x, reduced over all dims from 2.
  std::vector<SymInt> gshape{x.shape[0], groups, cpg};
  gshape.insert(gshape.end(), x.shape.begin() + 2, x.shape.end());
  TensorRef xg = ctx.view(x, gshape, [&](const std::vector<SymInt> &i) {
    std::vector<SymInt> src{i[0], i[1] * cpg + i[2]};
    src.insert(src.end(), i.begin() + 3, i.end());
    return src;
  });
  std::vector<int64_t> dims;
  for (int64_t d = 2; d < int64_t(gshape.size()); ++d) dims.push_back(d);
  AxesSplit s = splitAxes(gshape, dims, false);
  Moments m = moments(ctx, xg, s, ct, eps, false);
  TensorRef scale = ctx.input(1), bias = ctx.input(2);
  DType outT = ctx.outputType(0).dtype;
  ctx.setOutput(
      0, ctx.pointwise(outT, x.shape, [&](BodyBuilder &b, const std::vector<SymInt> &idx) {
        SymInt g = groups == 1 ? SymInt(0) : floorDiv(idx[1], cpg);
        std::vector<SymInt> o{idx[0], g};
        std::vector<SymInt> p{perChannel ? idx[1] : g};
        Val v = b.op(ScalarOp::Sub, ldCast(b, x, idx, ct), b.load(m.mean, o));
        v = b.op(ScalarOp::Mul, b.op(ScalarOp::Mul, v, b.load(m.inv, o)), ldCast(b, scale, p, ct));
        return b.cast(b.op(ScalarOp::Add, v, ldCast(b, bias, p, ct)), outT);
      }));
  return okStatus();
}

Status lowerInstanceNorm(LowerContext &ctx) {
  TensorRef x = ctx.input(0);
  if (x.rank() < 3)
    return ctx.error("input 0 of InstanceNormalization must have rank >= 3, got rank " +
                     std::to_string(x.rank()));
  // One group per channel: statistics over [N, C] x inner.
  double eps = ctx.gnode().attrs.getFloat("epsilon", 1e-5);
  DType ct = floatAcc(x.dtype);
  std::vector<int64_t> dims;
  for (int64_t d = 2; d < x.rank(); ++d) dims.push_back(d);
  AxesSplit s = splitAxes(x.shape, dims, false);
  Moments m = moments(ctx, x, s, ct, eps, false);
  TensorRef scale = ctx.input(1), bias = ctx.input(2);
  DType outT = ctx.outputType(0).dtype;
  ctx.setOutput(
      0, ctx.pointwise(outT, x.shape, [&](BodyBuilder &b, const std::vector<SymInt> &idx) {
        std::vector<SymInt> o{idx[0], idx[1]}, p{idx[1]};
        Val v = b.op(ScalarOp::Sub, ldCast(b, x, idx, ct), b.load(m.mean, o));
        v = b.op(ScalarOp::Mul, b.op(ScalarOp::Mul, v, b.load(m.inv, o)), ldCast(b, scale, p, ct));
        return b.cast(b.op(ScalarOp::Add, v, ldCast(b, bias, p, ct)), outT);
      }));
  return okStatus();
}

Status lowerGroupNorm(LowerContext &ctx) {
  const TensorType &x = ctx.inputType(0);
  if (x.rank() < 2)
    return ctx.error("input 0 of GroupNormalization must have rank >= 2, got rank " +
                     std::to_string(x.rank()));
  int64_t g = ctx.gnode().attrs.getInt("num_groups", 0);
  const SymInt &c = x.shape[1];
  if (g <= 0 || (c.isConstant() && c.constant() % g != 0))
    return ctx.error("channels (" + c.str() +
                     ") of GroupNormalization must be divisible by num_groups (" +
                     std::to_string(g) + ")");
  const SymInt &sc = ctx.inputType(1).shape.at(0);
  bool perChannel;
  if (sc == c)
    perChannel = true;
  else if (sc == SymInt(g))
    perChannel = false;
  else
    return ctx.error("scale of GroupNormalization must have shape [" + c.str() + "] or [" +
                     std::to_string(g) + "], got [" + sc.str() + "]");
  return lowerGroupNormWith(ctx, g, perChannel);
}

// --- LpNormalization / MeanVarianceNormalization / LRN

Status lowerLpNorm(LowerContext &ctx) {
  const coil::Node &n = ctx.gnode();
  TensorRef x = ctx.input(0);
  if (x.rank() == 0) return ctx.error("input 0 of LpNormalization must have rank >= 1, got rank 0");
  COIL_TRY(int64_t axis, normAxis(ctx, n.attrs.getInt("axis", -1), x.rank()));
  int64_t p = n.attrs.getInt("p", 2);
  if (p != 1 && p != 2)
    return ctx.error("p of LpNormalization must be 1 or 2, got " + std::to_string(p));
  DType ct = floatAcc(x.dtype);
  AxesSplit s = splitAxes(x.shape, {axis}, false);
  TensorRef sum = sumOver(
      ctx, s, ct,
      [&](BodyBuilder &b, const std::vector<SymInt> &i) {
        Val v = ldCast(b, x, i, ct);
        return p == 1 ? b.op(ScalarOp::Abs, v) : b.op(ScalarOp::Mul, v, v);
      },
      "norm");
  DType outT = ctx.outputType(0).dtype;
  ctx.setOutput(
      0, ctx.pointwise(outT, x.shape, [&](BodyBuilder &b, const std::vector<SymInt> &idx) {
        Val norm = b.load(sum, s.outerOf(idx));
        if (p == 2) norm = b.op(ScalarOp::Sqrt, norm);
        Val zero = b.constant(ct, 0);
        Val q = b.op(ScalarOp::Div, ldCast(b, x, idx, ct), norm);
        // A zero norm gives 0, not NaN.
        return b.cast(b.op(ScalarOp::Select, b.op(ScalarOp::Eq, norm, zero), zero, q), outT);
      }));
  return okStatus();
}

Status lowerMVN(LowerContext &ctx) {
  TensorRef x = ctx.input(0);
  std::vector<int64_t> axes = ctx.gnode().attrs.getInts("axes", {0, 2, 3});
  std::vector<int64_t> dims;
  for (int64_t a : axes) {
    COIL_TRY(int64_t d, normAxis(ctx, a, x.rank()));
    if (std::find(dims.begin(), dims.end(), d) != dims.end())
      return ctx.error("axis " + std::to_string(a) +
                       " appears more than once in axes of MeanVarianceNormalization");
    dims.push_back(d);
  }
  DType ct = floatAcc(x.dtype);
  AxesSplit s = splitAxes(x.shape, dims, false);
  SymInt count = s.count();
  TensorRef sum = sumOver(
      ctx, s, ct, [&](BodyBuilder &b, const std::vector<SymInt> &i) { return b.load(x, i); },
      "sum");
  TensorRef sq = sumOver(
      ctx, s, ct,
      [&](BodyBuilder &b, const std::vector<SymInt> &i) {
        Val v = ldCast(b, x, i, ct);
        return b.op(ScalarOp::Mul, v, v);
      },
      "sumsq");
  DType outT = ctx.outputType(0).dtype;
  ctx.setOutput(
      0, ctx.pointwise(outT, x.shape, [&](BodyBuilder &b, const std::vector<SymInt> &idx) {
        std::vector<SymInt> o = s.outerOf(idx);
        Val cnt = b.index(count, ct);
        Val mean = b.op(ScalarOp::Div, b.load(sum, o), cnt);
        // E[x^2] - E[x]^2, as ONNX defines it.
        Val var = b.op(ScalarOp::Sub, b.op(ScalarOp::Div, b.load(sq, o), cnt),
                       b.op(ScalarOp::Mul, mean, mean));
        Val den = b.op(ScalarOp::Add, b.op(ScalarOp::Sqrt, var), b.constant(ct, 1e-9));
        return b.cast(b.op(ScalarOp::Div, b.op(ScalarOp::Sub, ldCast(b, x, idx, ct), mean), den),
                      outT);
      }));
  return okStatus();
}

Status lowerLRN(LowerContext &ctx) {
  const coil::Node &n = ctx.gnode();
  TensorRef x = ctx.input(0);
  if (x.rank() < 2)
    return ctx.error("input 0 of LRN must have rank >= 2, got rank " + std::to_string(x.rank()));
  int64_t size = n.attrs.getInt("size", 0);
  if (size <= 0) return ctx.error("size of LRN must be > 0, got " + std::to_string(size));
  double alpha = n.attrs.getFloat("alpha", 1e-4);
  double beta = n.attrs.getFloat("beta", 0.75);
  double bias = n.attrs.getFloat("bias", 1.0);
  int64_t lo = (size - 1) / 2;
  DType ct = floatAcc(x.dtype);
  SymInt c = x.shape[1];
  // sq[..., c, ...] = sum of x[..., k, ...]^2 over k in [c - lo, c + hi] within [0, C).
  TensorRef sq = ctx.reduce(
      ReduceKind::Sum, ct, ct, x.shape, {size},
      [&](BodyBuilder &b, const std::vector<SymInt> &o, const std::vector<SymInt> &r, Val *) {
        SymInt k = o[1] - lo + r[0];
        std::vector<SymInt> idx = o;
        idx[1] = max(SymInt(0), min(k, c - 1));
        Val v = ldCast(b, x, idx, ct);
        Val ki = b.index(k);
        Val in = b.op(ScalarOp::And, b.op(ScalarOp::Ge, ki, b.intConstant(DType::I64, 0)),
                      b.op(ScalarOp::Lt, ki, b.index(c)));
        return b.op(ScalarOp::Select, in, b.op(ScalarOp::Mul, v, v), b.constant(ct, 0));
      },
      false, "sumsq");
  DType outT = ctx.outputType(0).dtype;
  ctx.setOutput(
      0, ctx.pointwise(outT, x.shape, [&](BodyBuilder &b, const std::vector<SymInt> &idx) {
        Val base = b.op(ScalarOp::Add, b.constant(ct, bias),
                        b.op(ScalarOp::Mul, b.constant(ct, alpha / double(size)), b.load(sq, idx)));
        Val den = b.op(ScalarOp::Pow, base, b.constant(ct, beta));
        return b.cast(b.op(ScalarOp::Div, ldCast(b, x, idx, ct), den), outT);
      }));
  return okStatus();
}

// --- NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss

/// The loss of log-probabilities `lp` ([N, C, d...]) against `target` ([N, d...]).
Status lowerNll(LowerContext &ctx, const TensorRef &lp, DType ct) {
  const coil::Node &n = ctx.gnode();
  TensorRef target = ctx.input(1);
  std::optional<TensorRef> weight;
  if (ctx.hasInput(2)) weight = ctx.input(2);
  std::optional<int64_t> ignore = n.attrs.maybeInt("ignore_index");
  std::string red = n.attrs.getString("reduction", "mean");
  if (red != "none" && red != "sum" && red != "mean")
    return ctx.error("reduction of " + opStr(ctx) + " must be none, sum or mean, got '" + red +
                     "'");
  SymInt c = lp.shape[1];
  // Per target element: its weight (0 when ignored) and its loss -lp[n, t, d...] * weight
  // (0 when ignored, whatever lp holds there).
  struct Term {
    Val weight, loss;
  };
  auto termAt = [&](BodyBuilder &b, const std::vector<SymInt> &i) {
    Val t = b.cast(b.load(target, i), DType::I64);
    SymInt tc = b.indirect(t, c, /*wrapNegative=*/false);
    std::vector<SymInt> li{i[0], tc};
    li.insert(li.end(), i.begin() + 1, i.end());
    Val w = weight ? ldCast(b, *weight, {tc}, ct) : b.constant(ct, 1);
    Val l = b.op(ScalarOp::Mul, b.op(ScalarOp::Neg, ldCast(b, lp, li, ct)), w);
    if (ignore) {
      Val ign = b.op(ScalarOp::Eq, t, b.intConstant(DType::I64, *ignore));
      w = b.op(ScalarOp::Select, ign, b.constant(ct, 0), w);
      l = b.op(ScalarOp::Select, ign, b.constant(ct, 0), l);
    }
    return Term{w, l};
  };
  auto lossAt = [&](BodyBuilder &b, const std::vector<SymInt> &i) { return termAt(b, i).loss; };
  DType outT = ctx.outputType(0).dtype;
  if (red == "none") {
    ctx.setOutput(
        0, ctx.pointwise(outT, target.shape, [&](BodyBuilder &b, const std::vector<SymInt> &i) {
          return b.cast(lossAt(b, i), outT);
        }));
    return okStatus();
  }
  std::vector<int64_t> all;
  for (int64_t d = 0; d < target.rank(); ++d) all.push_back(d);
  AxesSplit s = splitAxes(target.shape, all, false);
  TensorRef lsum = sumOver(ctx, s, ct, lossAt, "loss");
  if (red == "sum") {
    ctx.setOutput(0, ctx.pointwise(outT, {}, [&](BodyBuilder &b, const std::vector<SymInt> &) {
      return b.cast(b.load(lsum, {}), outT);
    }));
    return okStatus();
  }
  TensorRef wsum = sumOver(
      ctx, s, ct, [&](BodyBuilder &b, const std::vector<SymInt> &i) { return termAt(b, i).weight; },
      "weight");
  ctx.setOutput(0, ctx.pointwise(outT, {}, [&](BodyBuilder &b, const std::vector<SymInt> &) {
    return b.cast(b.op(ScalarOp::Div, b.load(lsum, {}), b.load(wsum, {})), outT);
  }));
  return okStatus();
}

Status lowerNllLoss(LowerContext &ctx) {
  TensorRef x = ctx.input(0);
  if (x.rank() < 2)
    return ctx.error("input 0 of NegativeLogLikelihoodLoss must have rank >= 2, got rank " +
                     std::to_string(x.rank()));
  return lowerNll(ctx, x, floatAcc(x.dtype));
}

Status lowerSoftmaxCrossEntropy(LowerContext &ctx) {
  TensorRef x = ctx.input(0);
  if (x.rank() < 2)
    return ctx.error("input 0 of SoftmaxCrossEntropyLoss must have rank >= 2, got rank " +
                     std::to_string(x.rank()));
  DType ct = floatAcc(x.dtype);
  TensorRef lp = softmaxOf(ctx, x, 1, /*log=*/true, ct, ct);
  COIL_TRY_STATUS(lowerNll(ctx, lp, ct));
  if (hasOutput(ctx, 1)) {
    DType ot = ctx.outputType(1).dtype;
    if (ot != ct)
      lp = ctx.pointwise(ot, x.shape, [&](BodyBuilder &b, const std::vector<SymInt> &i) {
        return b.cast(b.load(lp, i), ot);
      });
    ctx.setOutput(1, lp);
  }
  return okStatus();
}

} // namespace

void registerReductionLowerings(LowerRegistry &r) {
  for (OpKind op : kReduceOps) r.add(op, lowerReduce);
  r.add(kArgReduceOps, lowerArg);
  r.add(kSoftmaxOps, lowerSoftmax);
  r.add(kLayerNormOps, lowerLayerNorm);
  r.add(OpKind::BatchNormalization, lowerBatchNorm);
  r.add(OpKind::InstanceNormalization, lowerInstanceNorm);
  r.add(OpKind::GroupNormalization, lowerGroupNorm);
  r.add(OpKind::LpNormalization, lowerLpNorm);
  r.add(OpKind::MeanVarianceNormalization, lowerMVN);
  r.add(OpKind::LRN, lowerLRN);
  r.add(OpKind::NegativeLogLikelihoodLoss, lowerNllLoss);
  r.add(OpKind::SoftmaxCrossEntropyLoss, lowerSoftmaxCrossEntropy);
  linalg::registerReductionDynamicLowerings(r);
}

} // namespace coil::loop
