// Type and shape inference for the Reduction family of ops (see Ops.def).
//
// Reduce* take their axes from the `axes` attribute (older opsets) or from the optional input
// 1 (ReduceSum since 13, the others since 18); both forms are accepted for every opset. When
// the axes input is not known at compile time, the keepdims=1 shape is inferred with a fresh
// symbol for every dim that may or may not be reduced.
#include "ir/Infer.h"
#include "ir/OpAttrs.h"

#include <algorithm>
#include <set>

namespace coil {
namespace {

using Types = std::vector<TensorType>;

std::string opStr(const InferContext &ctx) {
  return std::string(opName(ctx.node.op));
}

Status requireFloat(const InferContext &ctx, size_t i, const char *what = "input") {
  DType t = ctx.input(i).dtype;
  if (!isFloat(t))
    return ctx.error(std::string(what) + " " + std::to_string(i) + " of " + opStr(ctx) +
                     " must be a floating-point tensor, got " + std::string(dtypeName(t)));
  return okStatus();
}

Status requireNumeric(const InferContext &ctx, size_t i, bool allowBool = false) {
  DType t = ctx.input(i).dtype;
  if (t == DType::Bool && !allowBool)
    return ctx.error("input " + std::to_string(i) + " of " + opStr(ctx) +
                     " must be numeric, got bool");
  return okStatus();
}

Status requireRankAtLeast(const InferContext &ctx, size_t i, int64_t rank) {
  if (ctx.input(i).rank() < rank)
    return ctx.error("input " + std::to_string(i) + " of " + opStr(ctx) + " must have rank >= " +
                     std::to_string(rank) + ", got rank " + std::to_string(ctx.input(i).rank()));
  return okStatus();
}

/// Normalizes a list of axes for a tensor of `rank`; rejects duplicates.
Expected<std::vector<int64_t>> normalizeAxes(const std::vector<int64_t> &axes, int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    if (a < -rank || a >= rank)
      return Error::user("axis " + std::to_string(a) + " is out of range for rank " +
                         std::to_string(rank));
    int64_t n = a < 0 ? a + rank : a;
    if (std::find(out.begin(), out.end(), n) != out.end())
      return Error::user("axis " + std::to_string(a) + " appears more than once in axes");
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Types one(DType t, std::vector<SymInt> shape) {
  return {TensorType{t, std::move(shape)}};
}

// --- Reduce*

Expected<Types> inferReduce(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  OpKind op = ctx.node.op;
  bool floatOnly = op == OpKind::ReduceLogSum || op == OpKind::ReduceLogSumExp;
  if (floatOnly)
    COIL_TRY_STATUS(requireFloat(ctx, 0));
  else
    COIL_TRY_STATUS(
        requireNumeric(ctx, 0, /*allowBool=*/op == OpKind::ReduceMax || op == OpKind::ReduceMin));
  COIL_TRY(ReduceAttrs ra, decodeReduce(ctx.node));
  bool keepdims = ra.keepdims, noop = ra.noopWithEmptyAxes;
  int64_t rank = x.rank();

  std::optional<std::vector<int64_t>> axes;
  if (ctx.hasInput(1)) {
    const TensorType &at1 = ctx.input(1);
    if (at1.dtype != DType::I64)
      return ctx.error("input 1 (axes) of " + opStr(ctx) + " must be i64, got " +
                       std::string(dtypeName(at1.dtype)));
    if (at1.rank() != 1)
      return ctx.error("input 1 (axes) of " + opStr(ctx) + " must have rank 1, got rank " +
                       std::to_string(at1.rank()));
    if (const auto &v = ctx.intValue(1)) {
      std::vector<int64_t> a;
      bool allConst = true;
      for (const SymInt &s : *v) {
        if (!s.isConstant()) {
          allConst = false;
          break;
        }
        a.push_back(s.constant());
      }
      if (allConst) axes = a;
    }
    if (!axes) {
      auto numAxes = at1.shape[0].maybeConstant();
      if (numAxes == 0 && noop) return one(x.dtype, x.shape);
      if (keepdims) {
        // Each dim is either kept or reduced to 1: a fresh symbol unless it is already 1.
        std::vector<SymInt> shape;
        for (int64_t d = 0; d < rank; ++d) {
          const SymInt &dim = x.shape[size_t(d)];
          shape.push_back(dim == SymInt(1) ? dim : ctx.freshSymbol("reduced"));
        }
        return one(x.dtype, shape);
      }
      // keepdims=0: the output rank follows from the number of axes (axes are unique).
      if (!numAxes)
        return ctx.error(opStr(ctx) + " with non-constant axes and keepdims=0 is not supported");
      if (*numAxes == 0) return one(x.dtype, {});
      if (*numAxes > rank)
        return ctx.error("input 1 (axes) of " + opStr(ctx) + " has " + std::to_string(*numAxes) +
                         " axes, more than the rank " + std::to_string(rank) + " of input 0");
      // Each remaining dim is one of the input dims: known when those are all alike.
      bool alike = std::all_of(x.shape.begin(), x.shape.end(),
                               [&](const SymInt &d) { return d == x.shape[0]; });
      std::vector<SymInt> shape;
      for (int64_t d = 0; d < rank - *numAxes; ++d)
        shape.push_back(alike ? x.shape[0] : ctx.freshSymbol("reduced"));
      return one(x.dtype, shape);
    }
  } else {
    axes = ra.axes.value_or(std::vector<int64_t>{});
  }

  std::vector<bool> reduced(size_t(rank), false);
  if (axes->empty()) {
    if (noop) return one(x.dtype, x.shape);
    std::fill(reduced.begin(), reduced.end(), true);
  } else {
    auto norm = normalizeAxes(*axes, rank);
    if (!norm) return ctx.error(norm.error().message());
    for (int64_t a : *norm) reduced[size_t(a)] = true;
  }
  std::vector<SymInt> shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[size_t(d)])
      shape.push_back(x.shape[size_t(d)]);
    else if (keepdims)
      shape.push_back(1);
  }
  return one(x.dtype, shape);
}

Expected<Types> inferArgMaxMin(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  COIL_TRY_STATUS(requireNumeric(ctx, 0));
  const Attrs &at = ctx.node.attrs;
  int64_t rank = x.rank();
  if (rank == 0) return ctx.error("input 0 of " + opStr(ctx) + " must have rank >= 1, got rank 0");
  COIL_TRY(int64_t axis, normalizeAxis(at.getInt("axis", 0), rank));
  bool keepdims = at.getInt("keepdims", 1) != 0;
  std::vector<SymInt> shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != axis)
      shape.push_back(x.shape[size_t(d)]);
    else if (keepdims)
      shape.push_back(1);
  }
  return one(DType::I64, shape);
}

// --- along one axis, same shape out

Expected<Types> inferSoftmaxLike(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  COIL_TRY_STATUS(requireFloat(ctx, 0));
  int64_t rank = x.rank();
  if (rank == 0) return ctx.error("input 0 of " + opStr(ctx) + " must have rank >= 1, got rank 0");
  int64_t dflt = -1;
  COIL_TRY(int64_t axis, normalizeAxis(ctx.node.attrs.getInt("axis", dflt), rank));
  (void)axis;
  return one(x.dtype, x.shape);
}

Expected<Types> inferCumulative(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  COIL_TRY_STATUS(requireNumeric(ctx, 0));
  if (x.rank() == 0)
    return ctx.error("input 0 of " + opStr(ctx) + " must have rank >= 1, got rank 0");
  const TensorType &a = ctx.input(1);
  if (a.dtype != DType::I64 && a.dtype != DType::I32)
    return ctx.error("input 1 (axis) of " + opStr(ctx) + " must be i32 or i64, got " +
                     std::string(dtypeName(a.dtype)));
  if (a.rank() > 1 || (a.rank() == 1 && a.shape[0] != SymInt(1)))
    return ctx.error("input 1 (axis) of " + opStr(ctx) + " must be a scalar, got shape " + a.str());
  if (const auto &v = ctx.intValue(1)) {
    if (v->size() == 1 && (*v)[0].isConstant()) {
      COIL_TRY(int64_t axis, normalizeAxis((*v)[0].constant(), x.rank()));
      (void)axis;
    }
  }
  return one(x.dtype, x.shape);
}

Expected<Types> inferTopK(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  COIL_TRY_STATUS(requireNumeric(ctx, 0));
  int64_t rank = x.rank();
  if (rank == 0) return ctx.error("input 0 of TopK must have rank >= 1, got rank 0");
  COIL_TRY(int64_t axis, normalizeAxis(ctx.node.attrs.getInt("axis", -1), rank));
  const TensorType &k = ctx.input(1);
  if (k.dtype != DType::I64)
    return ctx.error("input 1 (K) of TopK must be i64, got " + std::string(dtypeName(k.dtype)));
  if (k.rank() > 1 || (k.rank() == 1 && k.shape[0] != SymInt(1)))
    return ctx.error("input 1 (K) of TopK must hold one element, got shape " + k.str());
  SymInt kDim;
  const auto &v = ctx.intValue(1);
  if (v && v->size() == 1) {
    kDim = (*v)[0];
    if (kDim.isConstant()) {
      int64_t kv = kDim.constant();
      if (kv < 0) return ctx.error("K of TopK must be >= 0, got " + std::to_string(kv));
      auto n = x.shape[size_t(axis)].maybeConstant();
      if (n && kv > *n)
        return ctx.error("K of TopK must be <= the size of axis " + std::to_string(axis) + " (" +
                         std::to_string(*n) + "), got " + std::to_string(kv));
    }
  } else {
    kDim = ctx.freshSymbol("topk");
  }
  std::vector<SymInt> shape = x.shape;
  shape[size_t(axis)] = kDim;
  return Types{TensorType{x.dtype, shape}, TensorType{DType::I64, shape}};
}

// --- normalizations

Expected<DType> stashDType(const InferContext &ctx) {
  int64_t s = ctx.node.attrs.getInt("stash_type", 1);
  if (auto t = dtypeFromOnnxCode(s); t && isFloat(*t)) return *t;
  return ctx.error("stash_type " + std::to_string(s) + " of " + opStr(ctx) +
                   " is not a supported floating-point type");
}

/// Checks that input `i` broadcasts unidirectionally to `target`.
Status requireUnidirectional(const InferContext &ctx, size_t i, const char *name,
                             const std::vector<SymInt> &target) {
  const TensorType &t = ctx.input(i);
  bool ok = t.rank() <= int64_t(target.size());
  for (int64_t d = 0; ok && d < t.rank(); ++d) {
    const SymInt &a = t.shape[size_t(t.rank() - 1 - d)];
    const SymInt &b = target[target.size() - 1 - size_t(d)];
    if (a == b || a == SymInt(1)) continue;
    if (a.isConstant() && b.isConstant()) ok = false;
  }
  if (!ok) {
    std::string ts = TensorType{t.dtype, target}.str();
    return ctx.error(std::string(name) + " of " + opStr(ctx) + " with shape " + t.str() +
                     " does not broadcast to " + ts.substr(ts.find('[')));
  }
  return okStatus();
}

Expected<Types> inferLayerNorm(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  COIL_TRY_STATUS(requireFloat(ctx, 0));
  int64_t rank = x.rank();
  if (rank == 0) return ctx.error("input 0 of " + opStr(ctx) + " must have rank >= 1, got rank 0");
  COIL_TRY(int64_t axis, normalizeAxis(ctx.node.attrs.getInt("axis", -1), rank));
  COIL_TRY(DType stash, stashDType(ctx));
  // Scale and bias usually have the normalized shape; any shape that broadcasts to X works.
  COIL_TRY_STATUS(requireUnidirectional(ctx, 1, "scale", x.shape));
  if (ctx.hasInput(2)) COIL_TRY_STATUS(requireUnidirectional(ctx, 2, "bias", x.shape));
  Types out{TensorType{x.dtype, x.shape}};
  if (ctx.node.op == OpKind::LayerNormalization) {
    std::vector<SymInt> stat = x.shape;
    for (int64_t d = axis; d < rank; ++d) stat[size_t(d)] = 1;
    out.push_back(TensorType{stash, stat});
    out.push_back(TensorType{stash, stat});
  }
  return out;
}

Status requireChannelVector(const InferContext &ctx, size_t i, const char *name, const SymInt &c) {
  const TensorType &t = ctx.input(i);
  if (t.rank() != 1 || (t.shape[0] != c && t.shape[0].isConstant() && c.isConstant()))
    return ctx.error(std::string(name) + " of " + opStr(ctx) + " must have shape [" + c.str() +
                     "], got " + t.str());
  return okStatus();
}

Expected<Types> inferBatchNorm(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  COIL_TRY_STATUS(requireFloat(ctx, 0));
  COIL_TRY_STATUS(requireRankAtLeast(ctx, 0, 2));
  const SymInt &c = x.shape[1];
  const char *names[] = {"", "scale", "bias", "input_mean", "input_var"};
  for (size_t i = 1; i <= 4; ++i) {
    COIL_TRY_STATUS(requireFloat(ctx, i));
    COIL_TRY_STATUS(requireChannelVector(ctx, i, names[i], c));
  }
  Types out{TensorType{x.dtype, x.shape}};
  if (ctx.node.attrs.getInt("training_mode", 0) != 0) {
    out.push_back(TensorType{ctx.input(3).dtype, {c}});
    out.push_back(TensorType{ctx.input(4).dtype, {c}});
  } else if (ctx.node.outputs.size() > 1) {
    return ctx.error("BatchNormalization has " + std::to_string(ctx.node.outputs.size()) +
                     " outputs but training_mode is 0 (running_mean and running_var exist "
                     "only in training mode)");
  }
  return out;
}

Expected<Types> inferInstanceNorm(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  COIL_TRY_STATUS(requireFloat(ctx, 0));
  COIL_TRY_STATUS(requireRankAtLeast(ctx, 0, 3));
  COIL_TRY_STATUS(requireChannelVector(ctx, 1, "scale", x.shape[1]));
  COIL_TRY_STATUS(requireChannelVector(ctx, 2, "bias", x.shape[1]));
  return one(x.dtype, x.shape);
}

Expected<Types> inferGroupNorm(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  COIL_TRY_STATUS(requireFloat(ctx, 0));
  COIL_TRY_STATUS(requireRankAtLeast(ctx, 0, 2));
  COIL_TRY(DType stash, stashDType(ctx));
  (void)stash;
  auto g = ctx.node.attrs.maybeInt("num_groups");
  if (!g) return ctx.error("GroupNormalization requires the attribute num_groups");
  if (*g <= 0)
    return ctx.error("num_groups of GroupNormalization must be > 0, got " + std::to_string(*g));
  auto c = x.shape[1].maybeConstant();
  if (c && *c % *g != 0)
    return ctx.error("channels (" + std::to_string(*c) +
                     ") of GroupNormalization must be divisible by num_groups (" +
                     std::to_string(*g) + ")");
  // Opset 21: scale and bias have C elements; opset 18: num_groups elements.
  for (size_t i : {size_t(1), size_t(2)}) {
    const TensorType &t = ctx.input(i);
    const char *name = i == 1 ? "scale" : "bias";
    bool ok = t.rank() == 1 && (t.shape[0] == x.shape[1] || t.shape[0] == SymInt(*g) ||
                                !t.shape[0].isConstant() || !c);
    if (!ok)
      return ctx.error(std::string(name) + " of GroupNormalization must have shape [" +
                       x.shape[1].str() + "] (or [" + std::to_string(*g) + "] in opset 18), got " +
                       t.str());
  }
  return one(x.dtype, x.shape);
}

Expected<Types> inferMVN(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  COIL_TRY_STATUS(requireFloat(ctx, 0));
  auto axes = normalizeAxes(ctx.node.attrs.getInts("axes", {0, 2, 3}), x.rank());
  if (!axes) return ctx.error("axes of MeanVarianceNormalization: " + axes.error().message());
  return one(x.dtype, x.shape);
}

Expected<Types> inferLpNorm(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  COIL_TRY_STATUS(requireFloat(ctx, 0));
  if (x.rank() == 0) return ctx.error("input 0 of LpNormalization must have rank >= 1, got rank 0");
  COIL_TRY(int64_t axis, normalizeAxis(ctx.node.attrs.getInt("axis", -1), x.rank()));
  (void)axis;
  int64_t p = ctx.node.attrs.getInt("p", 2);
  if (p != 1 && p != 2)
    return ctx.error("p of LpNormalization must be 1 or 2, got " + std::to_string(p));
  return one(x.dtype, x.shape);
}

Expected<Types> inferLRN(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  COIL_TRY_STATUS(requireFloat(ctx, 0));
  COIL_TRY_STATUS(requireRankAtLeast(ctx, 0, 2));
  auto size = ctx.node.attrs.maybeInt("size");
  if (!size) return ctx.error("LRN requires the attribute size");
  if (*size <= 0) return ctx.error("size of LRN must be > 0, got " + std::to_string(*size));
  return one(x.dtype, x.shape);
}

// --- losses

Expected<Types> inferLoss(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  COIL_TRY_STATUS(requireFloat(ctx, 0));
  COIL_TRY_STATUS(requireRankAtLeast(ctx, 0, 2));
  const TensorType &t = ctx.input(1);
  if (t.dtype != DType::I32 && t.dtype != DType::I64)
    return ctx.error("input 1 (target) of " + opStr(ctx) + " must be i32 or i64, got " +
                     std::string(dtypeName(t.dtype)));
  if (t.rank() != x.rank() - 1)
    return ctx.error("input 1 (target) of " + opStr(ctx) + " must have rank " +
                     std::to_string(x.rank() - 1) + ", got rank " + std::to_string(t.rank()));
  for (int64_t d = 0; d < t.rank(); ++d) {
    const SymInt &a = t.shape[size_t(d)];
    const SymInt &b = x.shape[size_t(d == 0 ? 0 : d + 1)];
    if (a != b && a.isConstant() && b.isConstant())
      return ctx.error("target shape " + t.str() + " of " + opStr(ctx) +
                       " does not match input shape " + x.str());
  }
  if (ctx.hasInput(2)) COIL_TRY_STATUS(requireChannelVector(ctx, 2, "weight", x.shape[1]));
  std::string red = ctx.node.attrs.getString("reduction", "mean");
  if (red != "none" && red != "sum" && red != "mean")
    return ctx.error("reduction of " + opStr(ctx) + " must be none, sum or mean, got '" + red +
                     "'");
  Types out{TensorType{x.dtype, red == "none" ? t.shape : std::vector<SymInt>{}}};
  if (ctx.node.op == OpKind::SoftmaxCrossEntropyLoss) out.push_back(TensorType{x.dtype, x.shape});
  return out;
}

} // namespace

void registerReductionInfer(InferRegistry &r) {
  for (OpKind op : kReduceOps) r.add(op, inferReduce);
  r.add(kArgReduceOps, inferArgMaxMin);
  r.add(kSoftmaxOps, inferSoftmaxLike);
  r.add(kLayerNormOps, inferLayerNorm);
  r.add(OpKind::BatchNormalization, inferBatchNorm);
  r.add(OpKind::InstanceNormalization, inferInstanceNorm);
  r.add(OpKind::GroupNormalization, inferGroupNorm);
  r.add(OpKind::LpNormalization, inferLpNorm);
  r.add(OpKind::MeanVarianceNormalization, inferMVN);
  r.add(OpKind::LRN, inferLRN);
  r.add(kCumulativeOps, inferCumulative);
  r.add(OpKind::TopK, inferTopK);
  r.add(OpKind::NegativeLogLikelihoodLoss, inferLoss);
  r.add(OpKind::SoftmaxCrossEntropyLoss, inferLoss);
}

} // namespace coil
