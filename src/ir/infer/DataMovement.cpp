// Type and shape inference for the DataMovement family of ops (see Ops.def). Output dims that
// depend on an input's contents are computed when those contents are known at compile time
// (as SymInts) and are fresh symbols otherwise; dims that depend on the data itself (NonZero,
// Compress, Unique, NonMaxSuppression) are always fresh symbols.
#include "ir/Infer.h"
#include "ir/OpAttrs.h"

#include <algorithm>
#include <cmath>

namespace coil {

namespace {

using Types = std::vector<TensorType>;

std::string dimsStr(const std::vector<SymInt> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? ", " : "") + (s[i].isConstant() ? std::to_string(s[i].constant()) : s[i].str());
  return r + "]";
}

/// The known contents of input `i`, or nullptr.
const std::vector<SymInt> *known(const InferContext &ctx, size_t i) {
  if (!ctx.hasInput(i)) return nullptr;
  const auto &v = ctx.intValue(i);
  return v ? &*v : nullptr;
}

/// The known contents of input `i` when every element is a constant.
std::optional<std::vector<int64_t>> knownConstants(const InferContext &ctx, size_t i) {
  const std::vector<SymInt> *v = known(ctx, i);
  if (!v) return std::nullopt;
  return constantValues(*v);
}

Status checkIndexType(const InferContext &ctx, size_t i, const char *what) {
  DType t = ctx.input(i).dtype;
  if (t != DType::I64 && t != DType::I32)
    return ctx.error(std::string(what) + " must have dtype i32 or i64, got " +
                     std::string(dtypeName(t)));
  return okStatus();
}

Status checkSameDType(const InferContext &ctx, size_t i, size_t j, const char *what,
                      const char *ref) {
  if (ctx.input(i).dtype != ctx.input(j).dtype)
    return ctx.error(std::string(what) + " must have the dtype of " + ref + " (" +
                     std::string(dtypeName(ctx.input(j).dtype)) + "), got " +
                     std::string(dtypeName(ctx.input(i).dtype)));
  return okStatus();
}

/// Two dims that must be equal: an error only when both are constants and differ.
bool provablyDifferent(const SymInt &a, const SymInt &b) {
  return a.isConstant() && b.isConstant() && a.constant() != b.constant();
}

Status checkReduction(const InferContext &ctx) {
  std::string r = ctx.node.attrs.getString("reduction", "none");
  if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min")
    return ctx.error("reduction must be one of none, add, mul, max, min, got '" + r + "'");
  return okStatus();
}

// --- Transpose

Expected<Types> inferTranspose(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  int64_t r = x.rank();
  std::vector<int64_t> perm;
  if (auto p = ctx.node.attrs.maybeInts("perm"))
    perm = *p;
  else
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  if (!isPermutation(perm, r))
    return ctx.error("perm must be a permutation of 0.." + std::to_string(r - 1) + ", got " +
                     intsStr(perm));
  TensorType y{x.dtype, {}};
  for (int64_t p : perm) y.shape.push_back(x.shape[size_t(p)]);
  return Types{y};
}

// --- GatherElements, ScatterElements, Scatter

Expected<Types> inferGatherElements(InferContext &ctx) {
  const TensorType &x = ctx.input(0), &ind = ctx.input(1);
  COIL_TRY_STATUS(checkIndexType(ctx, 1, "indices"));
  if (x.rank() < 1) return ctx.error("data must have rank >= 1");
  if (ind.rank() != x.rank())
    return ctx.error("indices must have the rank of data (" + std::to_string(x.rank()) +
                     "), got rank " + std::to_string(ind.rank()));
  COIL_TRY(int64_t axis, normalizeAxis(ctx.node.attrs.getInt("axis", 0), x.rank()));
  (void)axis;
  return Types{{x.dtype, ind.shape}};
}

Expected<Types> inferScatterElements(InferContext &ctx) {
  const TensorType &x = ctx.input(0), &ind = ctx.input(1), &upd = ctx.input(2);
  COIL_TRY_STATUS(checkIndexType(ctx, 1, "indices"));
  COIL_TRY_STATUS(checkSameDType(ctx, 2, 0, "updates", "data"));
  COIL_TRY_STATUS(checkReduction(ctx));
  if (x.rank() < 1) return ctx.error("data must have rank >= 1");
  if (ind.rank() != x.rank())
    return ctx.error("indices must have the rank of data (" + std::to_string(x.rank()) +
                     "), got rank " + std::to_string(ind.rank()));
  bool same = upd.rank() == ind.rank();
  for (int64_t d = 0; same && d < ind.rank(); ++d)
    same = !provablyDifferent(ind.shape[size_t(d)], upd.shape[size_t(d)]);
  if (!same)
    return ctx.error("indices and updates must have the same shape, got " + dimsStr(ind.shape) +
                     " and " + dimsStr(upd.shape));
  COIL_TRY(int64_t axis, normalizeAxis(ctx.node.attrs.getInt("axis", 0), x.rank()));
  (void)axis;
  return Types{x};
}

// --- GatherND, ScatterND

Expected<int64_t> tupleLength(const InferContext &ctx, const TensorType &ind, int64_t dataRank,
                              int64_t batchDims) {
  if (ind.rank() < 1) return ctx.error("indices must have rank >= 1");
  const SymInt &last = ind.shape.back();
  if (!last.isConstant())
    return ctx.error("the last dim of indices must be known at compile time, got " + last.str());
  int64_t m = last.constant();
  if (m < 1 || m > dataRank - batchDims)
    return ctx.error("the last dim of indices must be in [1, " +
                     std::to_string(dataRank - batchDims) + "], got " + std::to_string(m));
  return m;
}

Expected<Types> inferGatherND(InferContext &ctx) {
  const TensorType &x = ctx.input(0), &ind = ctx.input(1);
  COIL_TRY_STATUS(checkIndexType(ctx, 1, "indices"));
  int64_t b = ctx.node.attrs.getInt("batch_dims", 0);
  int64_t r = x.rank(), q = ind.rank();
  if (b < 0 || b >= std::min(r, q))
    return ctx.error("batch_dims must be in [0, " + std::to_string(std::min(r, q) - 1) + "], got " +
                     std::to_string(b));
  for (int64_t d = 0; d < b; ++d)
    if (provablyDifferent(x.shape[size_t(d)], ind.shape[size_t(d)]))
      return ctx.error("the first batch_dims dims of data " + dimsStr(x.shape) + " and indices " +
                       dimsStr(ind.shape) + " must match");
  COIL_TRY(int64_t m, tupleLength(ctx, ind, r, b));
  TensorType y{x.dtype, std::vector<SymInt>(ind.shape.begin(), ind.shape.end() - 1)};
  y.shape.insert(y.shape.end(), x.shape.begin() + b + m, x.shape.end());
  return Types{y};
}

Expected<Types> inferScatterND(InferContext &ctx) {
  const TensorType &x = ctx.input(0), &ind = ctx.input(1), &upd = ctx.input(2);
  COIL_TRY_STATUS(checkIndexType(ctx, 1, "indices"));
  COIL_TRY_STATUS(checkSameDType(ctx, 2, 0, "updates", "data"));
  COIL_TRY_STATUS(checkReduction(ctx));
  COIL_TRY(int64_t k, tupleLength(ctx, ind, x.rank(), 0));
  std::vector<SymInt> want(ind.shape.begin(), ind.shape.end() - 1);
  want.insert(want.end(), x.shape.begin() + k, x.shape.end());
  bool ok = upd.rank() == int64_t(want.size());
  for (size_t d = 0; ok && d < want.size(); ++d) ok = !provablyDifferent(want[d], upd.shape[d]);
  if (!ok)
    return ctx.error("updates must have shape " + dimsStr(want) + ", got " + dimsStr(upd.shape));
  return Types{x};
}

// --- Tile

Expected<Types> inferTile(InferContext &ctx) {
  const TensorType &x = ctx.input(0), &reps = ctx.input(1);
  if (isFloat(reps.dtype))
    return ctx.error("repeats must have an integer dtype, got " +
                     std::string(dtypeName(reps.dtype)));
  if (reps.rank() != 1 || provablyDifferent(reps.shape[0], x.rank()))
    return ctx.error("repeats must have shape [" + std::to_string(x.rank()) +
                     "] (one per input dim), got " + dimsStr(reps.shape));
  TensorType y{x.dtype, {}};
  const std::vector<SymInt> *r = known(ctx, 1);
  if (r && int64_t(r->size()) != x.rank())
    return ctx.error("repeats must have " + std::to_string(x.rank()) + " elements, got " +
                     std::to_string(r->size()));
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (!r) {
      y.shape.push_back(ctx.freshSymbol("tile"));
      continue;
    }
    const SymInt &rep = (*r)[size_t(d)];
    if (rep.isConstant() && rep.constant() < 0)
      return ctx.error("repeats must be non-negative, got " + dimsStr(*r));
    y.shape.push_back(x.shape[size_t(d)] * rep);
  }
  return Types{y};
}

// --- Pad, CenterCropPad

Expected<Types> inferPad(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  int64_t r = x.rank();
  COIL_TRY_STATUS(decodePadMode(ctx.node));
  if (ctx.hasInput(1) && isFloat(ctx.input(1).dtype))
    return ctx.error("pads must have an integer dtype, got " +
                     std::string(dtypeName(ctx.input(1).dtype)));
  if (ctx.hasInput(2)) COIL_TRY_STATUS(checkSameDType(ctx, 2, 0, "constant_value", "data"));
  // Axes: all (absent), known, or unknown (every dim may change).
  std::optional<std::vector<int64_t>> axes;
  if (!ctx.hasInput(3)) {
    axes.emplace();
    for (int64_t i = 0; i < r; ++i) axes->push_back(i);
  } else if (auto a = knownConstants(ctx, 3)) {
    COIL_TRY(axes, distinctAxes(*a, r));
  }
  std::optional<std::vector<SymInt>> pads;
  if (ctx.hasInput(1)) {
    if (const std::vector<SymInt> *p = known(ctx, 1)) pads = *p;
  } else if (auto p = ctx.node.attrs.maybeInts("pads")) {
    pads.emplace(p->begin(), p->end());
  }
  TensorType y = x;
  if (!axes || !pads) {
    for (size_t d = 0; d < size_t(r); ++d)
      if (!axes || std::count(axes->begin(), axes->end(), int64_t(d)))
        y.shape[d] = ctx.freshSymbol("pad");
    return Types{y};
  }
  COIL_TRY(PadSpread<SymInt> spread, spreadPads(*pads, *axes, r));
  for (size_t d = 0; d < size_t(r); ++d) {
    SymInt dim = x.shape[d] + spread.begin[d] + spread.end[d];
    if (dim.isConstant() && dim.constant() < 0)
      return ctx.error("pads " + dimsStr(*pads) + " crop more than dim " + std::to_string(d) +
                       " of shape " + dimsStr(x.shape));
    y.shape[d] = dim;
  }
  return Types{y};
}

Expected<Types> inferCenterCropPad(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  int64_t r = x.rank();
  COIL_TRY(std::vector<int64_t> axes, decodeCenterCropAxes(ctx.node, r));
  TensorType y = x;
  const std::vector<SymInt> *shape = known(ctx, 1);
  if (shape && shape->size() != axes.size())
    return ctx.error("shape must have " + std::to_string(axes.size()) +
                     " elements (one per axis), got " + std::to_string(shape->size()));
  for (size_t i = 0; i < axes.size(); ++i)
    y.shape[size_t(axes[i])] = shape ? (*shape)[i] : ctx.freshSymbol("crop");
  return Types{y};
}

// --- Split

Expected<Types> inferSplit(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  if (x.rank() < 1) return ctx.error("input must have rank >= 1");
  COIL_TRY(int64_t axis, normalizeAxis(ctx.node.attrs.getInt("axis", 0), x.rank()));
  int64_t n = int64_t(ctx.node.outputs.size());
  const SymInt &dim = x.shape[size_t(axis)];
  std::optional<std::vector<SymInt>> sizes;
  // An empty split input counts as absent.
  bool hasSplit = ctx.hasInput(1) && !(ctx.input(1).rank() == 1 && ctx.input(1).shape[0] == 0);
  if (hasSplit) {
    if (const std::vector<SymInt> *s = known(ctx, 1)) sizes = *s;
  } else if (auto s = ctx.node.attrs.maybeInts("split")) {
    hasSplit = true;
    sizes.emplace(s->begin(), s->end());
  }
  if (hasSplit && ctx.node.attrs.has("num_outputs"))
    return ctx.error("split and num_outputs must not both be given");
  Types out(size_t(n), TensorType{x.dtype, x.shape});
  if (hasSplit) {
    if (sizes && int64_t(sizes->size()) != n)
      return ctx.error("split must have " + std::to_string(n) + " elements (one per output), got " +
                       std::to_string(sizes->size()));
    SymInt sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      SymInt s = sizes ? (*sizes)[size_t(i)] : ctx.freshSymbol("split");
      if (s.isConstant() && s.constant() < 0)
        return ctx.error("split sizes must be non-negative, got " + dimsStr(*sizes));
      out[size_t(i)].shape[size_t(axis)] = s;
      sum += s;
    }
    if (sizes && provablyDifferent(sum, dim))
      return ctx.error("split sizes " + dimsStr(*sizes) + " must sum to the size of axis " +
                       std::to_string(axis) + " (" + dim.str() + ")");
    return out;
  }
  int64_t parts = ctx.node.attrs.getInt("num_outputs", n);
  if (parts != n || n < 1)
    return ctx.error("num_outputs (" + std::to_string(parts) +
                     ") must equal the number of outputs (" + std::to_string(n) + ")");
  SymInt chunk = ceilDiv(dim, n), last = dim - chunk * (n - 1);
  if (last.isConstant() && last.constant() < 0)
    return ctx.error("axis " + std::to_string(axis) + " of size " + dim.str() +
                     " cannot be split into " + std::to_string(n) + " outputs");
  for (int64_t i = 0; i < n; ++i) out[size_t(i)].shape[size_t(axis)] = i + 1 < n ? chunk : last;
  return out;
}

// --- Trilu, EyeLike, ReverseSequence, TensorScatter

Expected<Types> inferTrilu(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  if (x.rank() < 2)
    return ctx.error("input must have rank >= 2, got rank " + std::to_string(x.rank()));
  if (ctx.hasInput(1) && ctx.input(1).rank() > 1)
    return ctx.error("k must be a scalar, got shape " + dimsStr(ctx.input(1).shape));
  return Types{x};
}

Expected<Types> inferEyeLike(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  if (x.rank() != 2)
    return ctx.error("input must have rank 2, got rank " + std::to_string(x.rank()));
  DType dt = x.dtype;
  if (auto a = ctx.node.attrs.maybeInt("dtype")) {
    auto d = dtypeFromOnnxCode(*a);
    if (!d) return ctx.error("dtype " + std::to_string(*a) + " is not supported");
    dt = *d;
  }
  return Types{{dt, x.shape}};
}

Expected<Types> inferReverseSequence(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  COIL_TRY_STATUS(checkIndexType(ctx, 1, "sequence_lens"));
  if (x.rank() < 2)
    return ctx.error("input must have rank >= 2, got rank " + std::to_string(x.rank()));
  int64_t ba = ctx.node.attrs.getInt("batch_axis", 1), ta = ctx.node.attrs.getInt("time_axis", 0);
  if (!((ba == 0 && ta == 1) || (ba == 1 && ta == 0)))
    return ctx.error("batch_axis and time_axis must be 0 and 1 in some order, got " +
                     std::to_string(ba) + " and " + std::to_string(ta));
  const TensorType &lens = ctx.input(1);
  if (lens.rank() != 1 || provablyDifferent(lens.shape[0], x.shape[size_t(ba)]))
    return ctx.error("sequence_lens must have shape [" + x.shape[size_t(ba)].str() + "], got " +
                     dimsStr(lens.shape));
  return Types{x};
}

Expected<Types> inferTensorScatter(InferContext &ctx) {
  const TensorType &cache = ctx.input(0), &upd = ctx.input(1);
  COIL_TRY_STATUS(checkSameDType(ctx, 1, 0, "update", "past_cache"));
  if (ctx.hasInput(2)) COIL_TRY_STATUS(checkIndexType(ctx, 2, "write_indices"));
  if (cache.rank() < 2)
    return ctx.error("past_cache must have rank >= 2, got rank " + std::to_string(cache.rank()));
  COIL_TRY(int64_t axis, normalizeAxis(ctx.node.attrs.getInt("axis", -2), cache.rank()));
  if (axis == 0) return ctx.error("axis must not be the batch axis 0");
  std::string mode = ctx.node.attrs.getString("mode", "linear");
  if (mode != "linear" && mode != "circular")
    return ctx.error("mode must be 'linear' or 'circular', got '" + mode + "'");
  bool ok = upd.rank() == cache.rank();
  for (int64_t d = 0; ok && d < cache.rank(); ++d)
    ok = d == axis || !provablyDifferent(upd.shape[size_t(d)], cache.shape[size_t(d)]);
  if (!ok)
    return ctx.error("update shape " + dimsStr(upd.shape) + " must match past_cache shape " +
                     dimsStr(cache.shape) + " except in axis " + std::to_string(axis));
  return Types{cache};
}

// --- OneHot, windows

Expected<Types> inferOneHot(InferContext &ctx) {
  const TensorType &ind = ctx.input(0), &values = ctx.input(2);
  int64_t r = ind.rank();
  int64_t axis = ctx.node.attrs.getInt("axis", -1);
  if (axis < -r - 1 || axis > r)
    return ctx.error("axis " + std::to_string(axis) + " is out of range for output rank " +
                     std::to_string(r + 1));
  if (axis < 0) axis += r + 1;
  if (values.rank() != 1 || provablyDifferent(values.shape[0], 2))
    return ctx.error("values must have shape [2], got " + dimsStr(values.shape));
  SymInt depth;
  if (const std::vector<SymInt> *d = known(ctx, 1); d && d->size() == 1) {
    depth = (*d)[0];
  } else if (ctx.hasInput(1) && ctx.constants.size() > 1 && ctx.constants[1] &&
             ctx.constants[1]->numel() == 1) {
    depth = int64_t(std::ceil(ctx.constants[1]->getDouble(0)));
  } else {
    depth = ctx.freshSymbol("depth");
  }
  if (depth.isConstant() && depth.constant() < 1)
    return ctx.error("depth must be positive, got " + depth.str());
  TensorType y{values.dtype, ind.shape};
  y.shape.insert(y.shape.begin() + axis, depth);
  return Types{y};
}

Expected<Types> inferWindow(InferContext &ctx) {
  const TensorType &size = ctx.input(0);
  if (isFloat(size.dtype) || size.rank() > 1)
    return ctx.error("size must be an integer scalar, got " + size.str());
  int64_t dt = ctx.node.attrs.getInt("output_datatype", 1);
  auto dtype = dtypeFromOnnxCode(dt);
  if (!dtype) return ctx.error("output_datatype " + std::to_string(dt) + " is not supported");
  SymInt n;
  if (const std::vector<SymInt> *v = known(ctx, 0); v && v->size() == 1)
    n = (*v)[0];
  else
    n = ctx.freshSymbol("window");
  if (n.isConstant() && n.constant() < 0)
    return ctx.error("size must be non-negative, got " + n.str());
  return Types{{*dtype, {n}}};
}

// --- NonZero, Compress, Unique, NonMaxSuppression (data-dependent sizes)

Expected<Types> inferNonZero(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  return Types{{DType::I64, {x.rank(), ctx.freshSymbol("nonzero")}}};
}

Expected<Types> inferCompress(InferContext &ctx) {
  const TensorType &x = ctx.input(0), &cond = ctx.input(1);
  if (cond.rank() != 1)
    return ctx.error("condition must have rank 1, got rank " + std::to_string(cond.rank()));
  SymInt n;
  if (auto c = knownConstants(ctx, 1))
    n = int64_t(std::count_if(c->begin(), c->end(), [](int64_t v) { return v != 0; }));
  else
    n = ctx.freshSymbol("compress");
  if (auto a = ctx.node.attrs.maybeInt("axis")) {
    COIL_TRY(int64_t axis, normalizeAxis(*a, x.rank()));
    if (x.rank() == 0) return ctx.error("input must have rank >= 1 when axis is given");
    TensorType y = x;
    y.shape[size_t(axis)] = n;
    return Types{y};
  }
  return Types{{x.dtype, {n}}};
}

Expected<Types> inferUnique(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  SymInt u = ctx.freshSymbol("unique");
  TensorType y{x.dtype, {u}};
  SymInt n = symNumel(x.shape);
  if (auto a = ctx.node.attrs.maybeInt("axis")) {
    if (x.rank() == 0) return ctx.error("input must have rank >= 1 when axis is given");
    COIL_TRY(int64_t axis, normalizeAxis(*a, x.rank()));
    y.shape = x.shape;
    n = x.shape[size_t(axis)];
    y.shape[size_t(axis)] = u;
  }
  return Types{y, {DType::I64, {u}}, {DType::I64, {n}}, {DType::I64, {u}}};
}

Expected<Types> inferNonMaxSuppression(InferContext &ctx) {
  const TensorType &boxes = ctx.input(0), &scores = ctx.input(1);
  if (boxes.rank() != 3 || provablyDifferent(boxes.shape[2], 4))
    return ctx.error("boxes must have shape [batches, boxes, 4], got " + dimsStr(boxes.shape));
  if (scores.rank() != 3 || provablyDifferent(scores.shape[0], boxes.shape[0]) ||
      provablyDifferent(scores.shape[2], boxes.shape[1]))
    return ctx.error("scores must have shape [" + boxes.shape[0].str() + ", classes, " +
                     boxes.shape[1].str() + "], got " + dimsStr(scores.shape));
  return Types{{DType::I64, {ctx.freshSymbol("selected"), 3}}};
}

} // namespace

void registerDataMovementInfer(InferRegistry &r) {
  r.add(OpKind::Transpose, inferTranspose);
  r.add(OpKind::GatherElements, inferGatherElements);
  r.add(kScatterElementsOps, inferScatterElements);
  r.add(OpKind::GatherND, inferGatherND);
  r.add(OpKind::ScatterND, inferScatterND);
  r.add(OpKind::Tile, inferTile);
  r.add(OpKind::Pad, inferPad);
  r.add(OpKind::CenterCropPad, inferCenterCropPad);
  r.add(OpKind::Split, inferSplit);
  r.add(OpKind::Trilu, inferTrilu);
  r.add(OpKind::EyeLike, inferEyeLike);
  r.add(OpKind::ReverseSequence, inferReverseSequence);
  r.add(OpKind::TensorScatter, inferTensorScatter);
  r.add(OpKind::OneHot, inferOneHot);
  r.add(OpKind::BlackmanWindow, inferWindow);
  r.add(OpKind::HammingWindow, inferWindow);
  r.add(OpKind::HannWindow, inferWindow);
  r.add(OpKind::NonZero, inferNonZero);
  r.add(OpKind::Compress, inferCompress);
  r.add(OpKind::Unique, inferUnique);
  r.add(OpKind::NonMaxSuppression, inferNonMaxSuppression);
}

} // namespace coil
