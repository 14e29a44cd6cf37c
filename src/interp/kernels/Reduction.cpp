// Reference kernels for the Reduction family of ops (see Ops.def): Reduce*, ArgMax/ArgMin,
// Softmax/LogSoftmax/Hardmax, CumSum/CumProd and TopK. The normalizations and losses are in
// ReductionNorm.cpp.
//
// Floating-point inputs are read as double, computed in double and rounded once when stored
// (so f16/bf16 results are correctly rounded from a double computation). Integer inputs are
// computed exactly: sums and products in 64-bit two's complement, wrapping modulo 2^bits when
// stored, as ONNX integer arithmetic does.
#include "interp/kernels/ReductionImpl.h"
#include "ir/OpAttrs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace coil {
namespace {

using Outs = std::vector<Tensor>;

std::string opStr(const KernelContext &ctx) {
  return std::string(opName(ctx.node.op));
}

// --- Reduce*

enum class RKind { Sum, SumSquare, L1, L2, LogSum, LogSumExp, Max, Min, Mean, Prod };

RKind reduceKind(OpKind op) {
  switch (op) {
  case OpKind::ReduceSum:
    return RKind::Sum;
  case OpKind::ReduceSumSquare:
    return RKind::SumSquare;
  case OpKind::ReduceL1:
    return RKind::L1;
  case OpKind::ReduceL2:
    return RKind::L2;
  case OpKind::ReduceLogSum:
    return RKind::LogSum;
  case OpKind::ReduceLogSumExp:
    return RKind::LogSumExp;
  case OpKind::ReduceMax:
    return RKind::Max;
  case OpKind::ReduceMin:
    return RKind::Min;
  case OpKind::ReduceMean:
    return RKind::Mean;
  default:
    return RKind::Prod;
  }
}

/// Integer reduction, exact. Values are 64-bit two's complement bit patterns (as loadAsInt
/// reads them); `uns` selects unsigned comparison and division.
Tensor reduceInts(RKind k, const Tensor &x, const ReducePlan &p) {
  DType t = x.dtype();
  bool uns = isUnsigned(t);
  int64_t nOut = numelOf(p.outShape);
  std::vector<uint64_t> acc(size_t(nOut), 0);
  uint64_t init = 0;
  if (k == RKind::Prod) init = 1;
  if (k == RKind::Max || k == RKind::Min) {
    // Identity of an empty reduction: the lowest / highest value of the dtype.
    Tensor probe(t, {1});
    if (t == DType::Bool)
      probe.setInt(0, k == RKind::Max ? 0 : 1);
    else if (uns)
      probe.setInt(0, k == RKind::Max ? 0 : -1);
    else {
      int bits = int(dtypeSize(t)) * 8;
      uint64_t lo = uint64_t(1) << (bits - 1); // as a negative pattern after sign extension
      probe.setInt(0, k == RKind::Max ? int64_t(~(lo - 1)) : int64_t(lo - 1));
    }
    init = uint64_t(probe.getInt(0));
  }
  std::fill(acc.begin(), acc.end(), init);
  auto less = [uns](uint64_t a, uint64_t b) { return uns ? a < b : int64_t(a) < int64_t(b); };
  for (int64_t i = 0; i < x.numel(); ++i) {
    uint64_t v = uint64_t(x.getInt(i));
    uint64_t &a = acc[size_t(p.outIndex[size_t(i)])];
    switch (k) {
    case RKind::Sum:
    case RKind::Mean:
      a += v;
      break;
    case RKind::SumSquare:
    case RKind::L2:
      a += v * v;
      break;
    case RKind::L1:
      a += (!uns && int64_t(v) < 0) ? uint64_t(0) - v : v;
      break;
    case RKind::Prod:
      a *= v;
      break;
    case RKind::Max:
      if (less(a, v)) a = v;
      break;
    case RKind::Min:
      if (less(v, a)) a = v;
      break;
    default:
      break;
    }
  }
  Tensor out(t, p.outShape);
  for (int64_t o = 0; o < nOut; ++o) {
    uint64_t a = acc[size_t(o)];
    if (k == RKind::Mean) {
      int64_t n = p.count;
      if (n == 0)
        a = 0;
      else if (uns)
        a = a / uint64_t(n);
      else
        a = uint64_t(int64_t(a) / n);
    } else if (k == RKind::L2) {
      double s = uns ? double(a) : double(int64_t(a));
      a = uint64_t(int64_t(std::sqrt(s)));
    }
    out.setInt(o, int64_t(a));
  }
  return out;
}

Tensor reduceFloats(RKind k, const Tensor &x, const ReducePlan &p) {
  int64_t nOut = numelOf(p.outShape);
  const double inf = std::numeric_limits<double>::infinity();
  double init = 0;
  if (k == RKind::Prod)
    init = 1;
  else if (k == RKind::Max || k == RKind::LogSumExp)
    init = -inf;
  else if (k == RKind::Min)
    init = inf;
  std::vector<double> acc(size_t(nOut), init);
  std::vector<double> xs = x.toDoubles();
  for (size_t i = 0; i < xs.size(); ++i) {
    double v = xs[i];
    double &a = acc[size_t(p.outIndex[i])];
    switch (k) {
    case RKind::Sum:
    case RKind::Mean:
    case RKind::LogSum:
      a += v;
      break;
    case RKind::SumSquare:
    case RKind::L2:
      a += v * v;
      break;
    case RKind::L1:
      a += std::fabs(v);
      break;
    case RKind::Prod:
      a *= v;
      break;
    case RKind::Max:
    case RKind::LogSumExp: // first pass: the maximum, for a stable log-sum-exp
      if (std::isnan(v) || v > a) a = std::isnan(a) ? a : v;
      break;
    case RKind::Min:
      if (std::isnan(v) || v < a) a = std::isnan(a) ? a : v;
      break;
    }
  }
  if (k == RKind::LogSumExp) {
    std::vector<double> sum(size_t(nOut), 0.0);
    for (size_t i = 0; i < xs.size(); ++i) {
      double m = acc[size_t(p.outIndex[i])];
      if (std::isfinite(m)) sum[size_t(p.outIndex[i])] += std::exp(xs[i] - m);
    }
    for (int64_t o = 0; o < nOut; ++o) {
      double m = acc[size_t(o)];
      if (std::isfinite(m)) acc[size_t(o)] = m + std::log(sum[size_t(o)]);
      // m == -inf: empty or all -inf, result -inf; m == +inf or NaN: the result is m.
    }
  }
  Tensor out(x.dtype(), p.outShape);
  for (int64_t o = 0; o < nOut; ++o) {
    double a = acc[size_t(o)];
    if (k == RKind::Mean)
      a = a / double(p.count);
    else if (k == RKind::L2)
      a = std::sqrt(a);
    else if (k == RKind::LogSum)
      a = std::log(a);
    out.setDouble(o, a);
  }
  return out;
}

Expected<Outs> reduceKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  COIL_TRY(ReduceAttrs ra, decodeReduce(ctx.node));
  std::vector<int64_t> axes;
  if (ctx.hasInput(1))
    axes = ctx.input(1).toInts();
  else
    axes = ra.axes.value_or(std::vector<int64_t>{});
  bool keepdims = ra.keepdims, noop = ra.noopWithEmptyAxes;
  if (axes.empty() && noop) return Outs{x.clone()};
  COIL_TRY(ReducePlan p, planReduce(x.shape(), axes, keepdims));
  RKind k = reduceKind(ctx.node.op);
  if (isFloat(x.dtype())) return Outs{reduceFloats(k, x, p)};
  if ((k == RKind::LogSum || k == RKind::LogSumExp))
    return ctx.error(opStr(ctx) + " requires a floating-point input, got " +
                     std::string(dtypeName(x.dtype())));
  return Outs{reduceInts(k, x, p)};
}

// --- ArgMax / ArgMin

Expected<Outs> argKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  if (x.rank() == 0)
    return ctx.error("input 0 of " + opStr(ctx) + " must have rank >= 1, got rank 0");
  COIL_TRY(int64_t axis, kernelAxis(ctx, ctx.attrs().getInt("axis", 0), x.rank()));
  bool keepdims = ctx.attrs().getInt("keepdims", 1) != 0;
  bool last = ctx.attrs().getInt("select_last_index", 0) != 0;
  bool isMax = ctx.node.op == OpKind::ArgMax;
  AxisSplit s = splitAt(x.shape(), axis);
  if (s.n == 0)
    return ctx.error(opStr(ctx) + " over an empty axis " + std::to_string(axis) + " has no result");
  Shape outShape = x.shape();
  if (keepdims)
    outShape[size_t(axis)] = 1;
  else
    outShape.erase(outShape.begin() + axis);
  Tensor out(DType::I64, outShape);
  ScalarCompare cmp(x);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      int64_t best = 0;
      for (int64_t k = 1; k < s.n; ++k) {
        int64_t a = s.at(o, k, i), b = s.at(o, best, i);
        // NaN wins over numbers for both ops (as numpy's argmax / argmin).
        bool na = cmp.isNaN(a), nb = cmp.isNaN(b);
        int c = na || nb ? (na == nb ? 0 : (na ? 1 : -1))
                         : (isMax ? cmp.compare(a, b) : cmp.compare(b, a)); // > 0: a is better
        if (c > 0 || (c == 0 && last)) best = k;
      }
      out.setInt(o * s.inner + i, best);
    }
  return Outs{out};
}

// --- Softmax / LogSoftmax / Hardmax

Expected<Outs> softmaxKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  if (x.rank() == 0)
    return ctx.error("input 0 of " + opStr(ctx) + " must have rank >= 1, got rank 0");
  COIL_TRY(int64_t axis, kernelAxis(ctx, ctx.attrs().getInt("axis", -1), x.rank()));
  AxisSplit s = splitAt(x.shape(), axis);
  std::vector<double> xs = x.toDoubles();
  Tensor out(x.dtype(), x.shape());
  OpKind op = ctx.node.op;
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      if (s.n == 0) continue;
      if (op == OpKind::Hardmax) {
        int64_t best = 0; // first occurrence of the maximum (a NaN counts as the maximum)
        for (int64_t k = 1; k < s.n; ++k) {
          double v = xs[size_t(s.at(o, k, i))], b = xs[size_t(s.at(o, best, i))];
          if (!std::isnan(b) && (v > b || std::isnan(v))) best = k;
        }
        for (int64_t k = 0; k < s.n; ++k) out.setDouble(s.at(o, k, i), k == best ? 1.0 : 0.0);
        continue;
      }
      std::vector<double> row(size_t(s.n));
      for (int64_t k = 0; k < s.n; ++k) row[size_t(k)] = xs[size_t(s.at(o, k, i))];
      softmaxRow(row, op == OpKind::LogSoftmax);
      for (int64_t k = 0; k < s.n; ++k) out.setDouble(s.at(o, k, i), row[size_t(k)]);
    }
  return Outs{out};
}

// --- CumSum / CumProd

Expected<Outs> cumKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  if (x.rank() == 0)
    return ctx.error("input 0 of " + opStr(ctx) + " must have rank >= 1, got rank 0");
  const Tensor &axisT = ctx.input(1);
  if (axisT.numel() != 1)
    return ctx.error("input 1 (axis) of " + opStr(ctx) + " must hold one element, got shape " +
                     shapeStr(axisT.shape()));
  COIL_TRY(int64_t axis, kernelAxis(ctx, axisT.getInt(0), x.rank()));
  bool exclusive = ctx.attrs().getInt("exclusive", 0) != 0;
  bool reverse = ctx.attrs().getInt("reverse", 0) != 0;
  bool prod = ctx.node.op == OpKind::CumProd;
  AxisSplit s = splitAt(x.shape(), axis);
  Tensor out(x.dtype(), x.shape());
  bool fl = isFloat(x.dtype());
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      double accF = prod ? 1.0 : 0.0;
      uint64_t accI = prod ? 1 : 0;
      for (int64_t step = 0; step < s.n; ++step) {
        int64_t k = reverse ? s.n - 1 - step : step;
        int64_t idx = s.at(o, k, i);
        if (exclusive) {
          if (fl)
            out.setDouble(idx, accF);
          else
            out.setInt(idx, int64_t(accI));
        }
        if (fl) {
          double v = x.getDouble(idx);
          accF = prod ? accF * v : accF + v;
        } else {
          uint64_t v = uint64_t(x.getInt(idx));
          accI = prod ? accI * v : accI + v;
        }
        if (!exclusive) {
          if (fl)
            out.setDouble(idx, accF);
          else
            out.setInt(idx, int64_t(accI));
        }
      }
    }
  return Outs{out};
}

// --- TopK

Expected<Outs> topKKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0);
  if (x.rank() == 0) return ctx.error("input 0 of TopK must have rank >= 1, got rank 0");
  COIL_TRY(int64_t axis, kernelAxis(ctx, ctx.attrs().getInt("axis", -1), x.rank()));
  const Tensor &kT = ctx.input(1);
  if (kT.numel() != 1)
    return ctx.error("input 1 (K) of TopK must hold one element, got shape " +
                     shapeStr(kT.shape()));
  int64_t k = kT.getInt(0);
  int64_t n = x.dim(axis);
  if (k < 0 || k > n)
    return ctx.error("K of TopK must be in [0, " + std::to_string(n) + "] (the size of axis " +
                     std::to_string(axis) + "), got " + std::to_string(k));
  bool largest = ctx.attrs().getInt("largest", 1) != 0;
  AxisSplit s = splitAt(x.shape(), axis);
  Shape outShape = x.shape();
  outShape[size_t(axis)] = k;
  Tensor values(x.dtype(), outShape), indices(DType::I64, outShape);
  AxisSplit so = splitAt(outShape, axis);
  ScalarCompare cmp(x);
  std::vector<int64_t> order(static_cast<size_t>(n));
  // The result is always sorted (a valid answer for sorted=0 too); equal values keep the
  // lower index first, as ONNX specifies.
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        int c = cmp.compare(s.at(o, a, i), s.at(o, b, i));
        return largest ? c > 0 : c < 0;
      });
      for (int64_t j = 0; j < k; ++j) {
        int64_t src = s.at(o, order[size_t(j)], i), dst = so.at(o, j, i);
        copyElement(x, src, values, dst);
        indices.setInt(dst, order[size_t(j)]);
      }
    }
  return Outs{values, indices};
}

} // namespace

// --- helpers declared in ReductionImpl.h

Expected<ReducePlan> planReduce(const Shape &shape, const std::vector<int64_t> &axes,
                                bool keepdims) {
  int64_t rank = int64_t(shape.size());
  std::vector<bool> red(size_t(rank), axes.empty());
  for (int64_t a : axes) {
    if (a < -rank || a >= rank)
      return Error::user("axis " + std::to_string(a) + " is out of range for rank " +
                         std::to_string(rank));
    int64_t n = a < 0 ? a + rank : a;
    if (red[size_t(n)])
      return Error::user("axis " + std::to_string(a) + " appears more than once in axes");
    red[size_t(n)] = true;
  }
  ReducePlan p;
  Shape keep = shape;
  p.count = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (!red[size_t(d)]) continue;
    p.count *= shape[size_t(d)];
    keep[size_t(d)] = 1;
  }
  p.outIndex = broadcastIndex(keep, shape);
  if (keepdims) {
    p.outShape = keep;
  } else {
    for (int64_t d = 0; d < rank; ++d)
      if (!red[size_t(d)]) p.outShape.push_back(shape[size_t(d)]);
  }
  return p;
}

AxisSplit splitAt(const Shape &shape, int64_t axis) {
  AxisSplit s;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    if (d < axis)
      s.outer *= shape[size_t(d)];
    else if (d > axis)
      s.inner *= shape[size_t(d)];
  }
  s.n = shape[size_t(axis)];
  return s;
}

Expected<int64_t> kernelAxis(const KernelContext &ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return ctx.error("axis " + std::to_string(axis) + " is out of range for rank " +
                     std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

void softmaxRow(std::vector<double> &row, bool log) {
  if (row.empty()) return;
  double m = -std::numeric_limits<double>::infinity();
  for (double v : row)
    m = std::isnan(v) || std::isnan(m) ? std::numeric_limits<double>::quiet_NaN() : std::max(m, v);
  double sum = 0;
  for (double v : row) sum += std::exp(v - m);
  for (double &v : row) v = log ? (v - m) - std::log(sum) : std::exp(v - m) / sum;
}

bool ScalarCompare::isNaN(int64_t i) const {
  return fl_ && std::isnan(t_.getDouble(i));
}

ScalarCompare::ScalarCompare(const Tensor &t) : t_(t) {
  fl_ = isFloat(t.dtype());
  uns_ = isUnsigned(t.dtype());
}

int ScalarCompare::compare(int64_t a, int64_t b) const {
  if (fl_) {
    double x = t_.getDouble(a), y = t_.getDouble(b);
    bool nx = std::isnan(x), ny = std::isnan(y);
    if (nx || ny) // NaN orders above every number
      return nx == ny ? 0 : (nx ? 1 : -1);
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  uint64_t x = uint64_t(t_.getInt(a)), y = uint64_t(t_.getInt(b));
  if (uns_) return x < y ? -1 : (x > y ? 1 : 0);
  return int64_t(x) < int64_t(y) ? -1 : (int64_t(x) > int64_t(y) ? 1 : 0);
}

void copyElement(const Tensor &src, int64_t si, Tensor &dst, int64_t di) {
  size_t sz = dtypeSize(src.dtype());
  const auto *s = static_cast<const uint8_t *>(src.data()) + size_t(si) * sz;
  auto *d = static_cast<uint8_t *>(dst.data()) + size_t(di) * sz;
  std::copy(s, s + sz, d);
}

void registerReductionKernels(KernelRegistry &r) {
  for (OpKind op : kReduceOps) r.add(op, reduceKernel);
  r.add(kArgReduceOps, argKernel);
  r.add(kSoftmaxOps, softmaxKernel);
  r.add(kCumulativeOps, cumKernel);
  r.add(OpKind::TopK, topKKernel);
  registerReductionNormKernels(r);
}

} // namespace coil
