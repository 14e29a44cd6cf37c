// Type and shape inference for the ShapeOps family of ops (see Ops.def), and the symbolic
// helpers of ShapeOpsHelpers.h that the importer's shape folding shares.
#include "ir/OpAttrs.h"
#include "ir/infer/ShapeOpsHelpers.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace coil {

// --- helpers

namespace {
/// Splits a product into a constant coefficient and its non-constant factors; false when the
/// coefficient overflows int64.
bool factorize(const SymInt &e, int64_t &coef, std::vector<SymInt> &factors) {
  if (e.isConstant()) return !__builtin_mul_overflow(coef, e.constant(), &coef);
  if (e.kind() == SymInt::Kind::Mul) {
    for (const SymInt &o : e.operands())
      if (!factorize(o, coef, factors)) return false;
    return true;
  }
  factors.push_back(e);
  return true;
}

std::string symsStr(const std::vector<SymInt> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + s[i].str();
  return r + "]";
}

constexpr int64_t kBig = int64_t(1) << 62;
int64_t clampBig(int64_t v) {
  return std::max(-kBig, std::min(kBig, v));
}
} // namespace

std::optional<SymInt> symDivExact(const SymInt &a, const SymInt &b) {
  if (b.isConstant() && b.constant() == 1) return a;
  if (b.isConstant() && b.constant() == 0) return std::nullopt;
  if (a.isConstant() && b.isConstant()) {
    if (b.constant() == -1) // INT64_MIN / -1 overflows (and % traps)
      return a.constant() == INT64_MIN ? std::nullopt : std::optional<SymInt>(-a.constant());
    if (a.constant() % b.constant() != 0) return std::nullopt;
    return SymInt(a.constant() / b.constant());
  }
  if (a.kind() == SymInt::Kind::Add && b.isConstant()) {
    SymInt sum = 0;
    for (const SymInt &t : a.operands()) {
      auto q = symDivExact(t, b);
      if (!q) return std::nullopt;
      sum = sum + *q;
    }
    return sum;
  }
  int64_t ca = 1, cb = 1;
  std::vector<SymInt> fa, fb;
  if (!factorize(a, ca, fa) || !factorize(b, cb, fb)) return std::nullopt;
  if (cb == -1 && ca == INT64_MIN) return std::nullopt;
  if (cb != 0 && ca % cb == 0) {
    std::sort(fa.begin(), fa.end());
    std::sort(fb.begin(), fb.end());
    SymInt q = ca / cb;
    size_t j = 0;
    for (size_t i = 0; i < fa.size(); ++i) {
      if (j < fb.size() && fa[i] == fb[j])
        ++j;
      else
        q = q * fa[i];
    }
    if (j == fb.size()) return q;
  }
  // Let SymInt's simplifier try; accept only a quotient that provably multiplies back.
  SymInt q = simplify(floorDiv(a, b), {});
  if (q.kind() != SymInt::Kind::FloorDiv && proveEQ(q * b, a, {})) return q;
  return std::nullopt;
}

SymInt symMinBounded(const SymInt &a, const SymInt &b) {
  if (proveLE(a, b, {})) return a;
  if (proveLE(b, a, {})) return b;
  return min(a, b);
}

SymInt symMaxBounded(const SymInt &a, const SymInt &b) {
  if (proveLE(b, a, {})) return a;
  if (proveLE(a, b, {})) return b;
  return max(a, b);
}

bool symNonNegative(const SymInt &a) {
  return bounds(a, {}).min >= 0;
}

Expected<std::vector<SymInt>> reshapeTarget(const std::vector<SymInt> &in,
                                            const std::vector<SymInt> &target, bool allowZero) {
  std::vector<SymInt> out(target.size());
  int64_t inferAt = -1;
  SymInt known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    const SymInt &t = target[i];
    if (t.isConstant() && t.constant() == -1) {
      if (inferAt >= 0)
        return Error::user("reshape target " + symsStr(target) + " has more than one -1");
      inferAt = int64_t(i);
      continue;
    }
    if (t.isConstant() && t.constant() == 0 && !allowZero) {
      if (i >= in.size())
        return Error::user("reshape target " + symsStr(target) + " copies dim " +
                           std::to_string(i) + " (0) of an input of rank " +
                           std::to_string(in.size()));
      out[i] = in[i];
    } else if (t.isConstant() && t.constant() < -1) {
      return Error::user("reshape target " + symsStr(target) + " has negative dim " + t.str());
    } else {
      out[i] = t;
    }
    known = known * out[i];
  }
  SymInt numel = symNumel(in);
  if (inferAt >= 0) {
    if (allowZero) {
      for (const SymInt &t : target)
        if (t.isConstant() && t.constant() == 0)
          return Error::user("reshape target " + symsStr(target) +
                             " has both 0 and -1 with allowzero=1");
    }
    if (known.isConstant() && known.constant() == 0)
      return Error::user("reshape target " + symsStr(target) +
                         " infers -1 next to a zero-sized dim");
    auto q = symDivExact(numel, known);
    if (!q) {
      if (numel.isConstant() && known.isConstant())
        return Error::user("cannot reshape " + symsStr(in) + " (" + numel.str() + " elements) to " +
                           symsStr(target));
      q = floorDiv(numel, known);
    }
    out[size_t(inferAt)] = *q;
  } else if (numel.isConstant() && known.isConstant() && numel.constant() != known.constant()) {
    return Error::user("cannot reshape " + symsStr(in) + " (" + numel.str() + " elements) to " +
                       symsStr(target) + " (" + known.str() + " elements)");
  }
  return out;
}

SliceRange sliceAxis(const SymInt &dim, int64_t start, int64_t end, int64_t step) {
  start = clampBig(start);
  end = clampBig(end);
  step = std::max(-kMaxSliceStep, std::min(kMaxSliceStep, step)); // -step cannot overflow
  if (step > 0) {
    SymInt s = start < 0 ? symMaxBounded(dim + start, 0) : symMinBounded(SymInt(start), dim);
    SymInt e = end < 0 ? symMaxBounded(dim + end, 0) : symMinBounded(SymInt(end), dim);
    SymInt len = symMaxBounded(ceilDiv(e - s, step), 0);
    return {s, len};
  }
  // Negative step: start clamps to [0, dim-1], end to [-1, dim-1].
  SymInt s = start < 0 ? dim + start : SymInt(start);
  s = symMinBounded(symMaxBounded(s, 0), dim - 1);
  SymInt e = end < 0 ? dim + end : SymInt(end);
  e = symMinBounded(symMaxBounded(e, -1), dim - 1);
  SymInt len = symMaxBounded(ceilDiv(s - e, -step), 0);
  return {s, len};
}

namespace {
/// One slice bound clamped to [0, dim] as for a positive step; nullopt when its sign is unknown.
std::optional<SymInt> clampSliceBound(const SymInt &dim, const SymInt &b) {
  if (b.isConstant()) {
    int64_t v = clampBig(b.constant());
    return v < 0 ? symMaxBounded(dim + v, 0) : symMinBounded(SymInt(v), dim);
  }
  SymRange r = bounds(b, {});
  if (r.min >= 0) return symMinBounded(b, dim);
  if (r.max < 0) return symMaxBounded(dim + b, 0);
  return std::nullopt;
}
} // namespace

std::optional<SliceRange> sliceAxisSym(const SymInt &dim, const SymInt &start, const SymInt &end,
                                       int64_t step) {
  if (step <= 0) return std::nullopt;
  auto s = clampSliceBound(dim, start);
  auto e = clampSliceBound(dim, end);
  if (!s || !e) return std::nullopt;
  return SliceRange{*s, symMaxBounded(ceilDiv(*e - *s, step), 0)};
}

Expected<std::vector<int64_t>> normalizeAxes(const std::vector<int64_t> &axes, int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    COIL_TRY(int64_t n, normalizeAxis(a, rank));
    if (std::find(out.begin(), out.end(), n) != out.end())
      return Error::user("axes " + intsStr(axes) + " repeat axis " + std::to_string(a));
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// --- inference functions

namespace {

using Result = Expected<std::vector<TensorType>>;

bool isIndexType(DType t) {
  return t == DType::I64 || t == DType::I32;
}

/// The contents of integer input `i` as constants; nullopt when unknown or symbolic.
std::optional<std::vector<int64_t>> constInts(const InferContext &ctx, size_t i) {
  const auto &v = ctx.intValue(i);
  if (!v) return std::nullopt;
  return constantValues(*v);
}

/// A 1-D integer "shape-like" input: checks dtype and rank, returns its length when known.
Expected<std::optional<int64_t>> vectorInput(const InferContext &ctx, size_t i, const char *what) {
  const TensorType &t = ctx.input(i);
  if (!isIndexType(t.dtype))
    return ctx.error(std::string(what) + " must be i64 or i32, got " +
                     std::string(dtypeName(t.dtype)));
  if (t.rank() != 1)
    return ctx.error(std::string(what) + " must have rank 1, got rank " + std::to_string(t.rank()));
  if (t.shape[0].isConstant()) return std::optional<int64_t>(t.shape[0].constant());
  return std::optional<int64_t>();
}

/// Axes of Squeeze/Unsqueeze/Slice-like ops: attribute `axes` (older opsets) or input `i`.
/// Returns nullopt when absent; an error when present but unknown at compile time.
Expected<std::optional<std::vector<int64_t>>> axesOf(const InferContext &ctx, size_t i) {
  if (auto a = ctx.node.attrs.maybeInts("axes")) return std::optional<std::vector<int64_t>>(*a);
  if (!ctx.hasInput(i)) return std::optional<std::vector<int64_t>>();
  COIL_TRY(auto len, vectorInput(ctx, i, "axes"));
  (void)len;
  auto c = constInts(ctx, i);
  if (!c) return ctx.error("axes must be known at compile time");
  return std::optional<std::vector<int64_t>>(*c);
}

/// The number of axes given by input `i` when its contents are unknown (axes known only at
/// run time); nullopt when the contents are known, the attribute is used, or it is absent.
std::optional<int64_t> unknownAxesCount(const InferContext &ctx, size_t i) {
  if (ctx.node.attrs.has("axes") || !ctx.hasInput(i) || ctx.intValue(i)) return std::nullopt;
  const TensorType &t = ctx.input(i);
  if (t.rank() == 1 && t.shape[0].isConstant()) return t.shape[0].constant();
  return std::nullopt;
}

Result inferShape(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  int64_t r = x.rank();
  int64_t start = ctx.node.attrs.getInt("start", 0), end = ctx.node.attrs.getInt("end", r);
  auto clampAxis = [r](int64_t a) {
    if (a < 0) a += r;
    return std::max<int64_t>(0, std::min(r, a));
  };
  start = clampAxis(start);
  end = clampAxis(end);
  return std::vector<TensorType>{{DType::I64, {std::max<int64_t>(0, end - start)}}};
}

Result inferSize(InferContext &ctx) {
  (void)ctx.input(0);
  return std::vector<TensorType>{{DType::I64, {}}};
}

Result inferReshape(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  COIL_TRY(auto len, vectorInput(ctx, 1, "shape"));
  if (ctx.input(1).dtype != DType::I64)
    return ctx.error("shape must be i64, got " + std::string(dtypeName(ctx.input(1).dtype)));
  bool allowZero = ctx.node.attrs.getInt("allowzero", 0) != 0;
  const auto &target = ctx.intValue(1);
  if (target) {
    COIL_TRY(auto out, reshapeTarget(x.shape, *target, allowZero));
    return std::vector<TensorType>{{x.dtype, out}};
  }
  if (!len) return ctx.error("the length of the reshape target must be known at compile time");
  std::vector<SymInt> out;
  for (int64_t i = 0; i < *len; ++i) out.push_back(ctx.freshSymbol("reshape"));
  return std::vector<TensorType>{{x.dtype, out}};
}

Result inferFlatten(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  int64_t r = x.rank();
  int64_t axis = ctx.node.attrs.getInt("axis", 1);
  if (axis < -r || axis > r)
    return ctx.error("axis " + std::to_string(axis) + " is out of range for rank " +
                     std::to_string(r));
  if (axis < 0) axis += r;
  SymInt a = 1, b = 1;
  for (int64_t i = 0; i < r; ++i) (i < axis ? a : b) *= x.shape[size_t(i)];
  return std::vector<TensorType>{{x.dtype, {a, b}}};
}

Result inferSqueeze(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  if (auto n = unknownAxesCount(ctx, 1)) { // run-time axes: the rank is known, the dims not
    if (*n > x.rank())
      return ctx.error("cannot squeeze " + std::to_string(*n) + " axes of " + x.str());
    TensorType out{x.dtype, {}};
    for (int64_t i = 0; i < x.rank() - *n; ++i) out.shape.push_back(ctx.freshSymbol("squeeze"));
    return std::vector<TensorType>{out};
  }
  COIL_TRY(auto axes, axesOf(ctx, 1));
  std::vector<bool> drop(size_t(x.rank()), false);
  if (axes) {
    COIL_TRY(auto norm, normalizeAxes(*axes, x.rank()));
    for (int64_t a : norm) {
      const SymInt &d = x.shape[size_t(a)];
      if (d.isConstant() && d.constant() != 1)
        return ctx.error("cannot squeeze axis " + std::to_string(a) + " of size " + d.str() +
                         " (shape " + x.str() + ")");
      drop[size_t(a)] = true;
    }
  } else {
    for (int64_t i = 0; i < x.rank(); ++i) {
      const SymInt &d = x.shape[size_t(i)];
      if (d.isConstant() && d.constant() == 1)
        drop[size_t(i)] = true;
      else if (!d.isConstant())
        return ctx.error("squeeze without axes needs constant dims, got " + x.str());
    }
  }
  TensorType out{x.dtype, {}};
  for (int64_t i = 0; i < x.rank(); ++i)
    if (!drop[size_t(i)]) out.shape.push_back(x.shape[size_t(i)]);
  return std::vector<TensorType>{out};
}

Result inferUnsqueeze(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  if (auto n = unknownAxesCount(ctx, 1)) { // run-time axes: the rank is known, the dims not
    TensorType out{x.dtype, {}};
    for (int64_t i = 0; i < x.rank() + *n; ++i) out.shape.push_back(ctx.freshSymbol("unsqueeze"));
    return std::vector<TensorType>{out};
  }
  COIL_TRY(auto axes, axesOf(ctx, 1));
  if (!axes) return ctx.error("unsqueeze needs axes");
  int64_t outRank = x.rank() + int64_t(axes->size());
  COIL_TRY(auto norm, normalizeAxes(*axes, outRank));
  TensorType out{x.dtype, {}};
  size_t k = 0;
  for (int64_t i = 0; i < outRank; ++i) {
    if (std::binary_search(norm.begin(), norm.end(), i))
      out.shape.push_back(1);
    else
      out.shape.push_back(x.shape[k++]);
  }
  return std::vector<TensorType>{out};
}

Result inferConcat(InferContext &ctx) {
  if (ctx.numInputs() == 0) return ctx.error("concat needs at least one input");
  const TensorType &first = ctx.input(0);
  if (first.rank() == 0) return ctx.error("concat inputs must have rank >= 1, got a scalar");
  COIL_TRY(int64_t axis, normalizeAxis(ctx.node.attrs.getInt("axis", 0), first.rank()));
  TensorType out = first;
  out.shape[size_t(axis)] = 0;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    const TensorType &t = ctx.input(i);
    if (t.dtype != first.dtype)
      return ctx.error("input " + std::to_string(i) + " has type " +
                       std::string(dtypeName(t.dtype)) + ", input 0 has " +
                       std::string(dtypeName(first.dtype)));
    if (t.rank() != first.rank())
      return ctx.error("input " + std::to_string(i) + " has rank " + std::to_string(t.rank()) +
                       ", input 0 has rank " + std::to_string(first.rank()));
    for (int64_t d = 0; d < t.rank(); ++d) {
      if (d == axis) continue;
      const SymInt &a = out.shape[size_t(d)], &b = t.shape[size_t(d)];
      if (a.isConstant() && b.isConstant() && a != b)
        return ctx.error("input " + std::to_string(i) + " has shape " + t.str() +
                         ", incompatible with input 0 " + first.str() + " outside axis " +
                         std::to_string(axis));
      if (!a.isConstant() && b.isConstant()) out.shape[size_t(d)] = b;
    }
    out.shape[size_t(axis)] += t.shape[size_t(axis)];
  }
  return std::vector<TensorType>{out};
}

Result inferGather(InferContext &ctx) {
  const TensorType &x = ctx.input(0), &idx = ctx.input(1);
  if (!isIndexType(idx.dtype))
    return ctx.error("indices must be i64 or i32, got " + std::string(dtypeName(idx.dtype)));
  if (x.rank() == 0) return ctx.error("gather data must have rank >= 1, got a scalar");
  COIL_TRY(int64_t axis, normalizeAxis(ctx.node.attrs.getInt("axis", 0), x.rank()));
  TensorType out{x.dtype, {}};
  for (int64_t i = 0; i < axis; ++i) out.shape.push_back(x.shape[size_t(i)]);
  for (const SymInt &d : idx.shape) out.shape.push_back(d);
  for (int64_t i = axis + 1; i < x.rank(); ++i) out.shape.push_back(x.shape[size_t(i)]);
  return std::vector<TensorType>{out};
}

Result inferSlice(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  int64_t r = x.rank();
  if (r == 0) return ctx.error("slice data must have rank >= 1, got a scalar");
  COIL_TRY(auto nStarts, vectorInput(ctx, 1, "starts"));
  COIL_TRY(auto nEnds, vectorInput(ctx, 2, "ends"));
  if (nStarts && nEnds && *nStarts != *nEnds)
    return ctx.error("starts has " + std::to_string(*nStarts) + " elements, ends has " +
                     std::to_string(*nEnds));
  std::optional<std::vector<int64_t>> axes;
  if (ctx.hasInput(3)) {
    COIL_TRY(auto n, vectorInput(ctx, 3, "axes"));
    (void)n;
    axes = constInts(ctx, 3);
    if (!axes) { // unknown axes: every dim may change
      TensorType out{x.dtype, {}};
      for (int64_t i = 0; i < r; ++i) out.shape.push_back(ctx.freshSymbol("slice"));
      return std::vector<TensorType>{out};
    }
  }
  auto starts = constInts(ctx, 1), ends = constInts(ctx, 2);
  const auto &symStarts = ctx.intValue(1), &symEnds = ctx.intValue(2);
  std::optional<std::vector<int64_t>> steps;
  if (ctx.hasInput(4)) {
    COIL_TRY(auto n, vectorInput(ctx, 4, "steps"));
    (void)n;
    steps = constInts(ctx, 4);
  }
  size_t n = starts ? starts->size() : ends ? ends->size() : nStarts ? size_t(*nStarts) : 0;
  if (!axes) {
    if (!starts && !ends && !nStarts)
      return ctx.error("the number of sliced axes must be known at compile time");
    axes = std::vector<int64_t>();
    for (size_t i = 0; i < n; ++i) axes->push_back(int64_t(i));
  }
  n = axes->size();
  if ((starts && starts->size() != n) || (ends && ends->size() != n) ||
      (steps && steps->size() != n))
    return ctx.error("starts, ends, axes and steps must have the same length");
  COIL_TRY(auto norm, normalizeAxes(*axes, r));
  (void)norm;
  TensorType out = x;
  for (size_t i = 0; i < n; ++i) {
    int64_t a = (*axes)[i] < 0 ? (*axes)[i] + r : (*axes)[i];
    int64_t step = steps ? (*steps)[i] : 1;
    if (step == 0) return ctx.error("slice step must not be 0");
    if (step < -kMaxSliceStep || step > kMaxSliceStep)
      return ctx.error("slice step " + std::to_string(step) + " of axis " +
                       std::to_string((*axes)[i]) + " is out of range (|step| <= 2^62)");
    if (ctx.hasInput(4) && !steps) {
      out.shape[size_t(a)] = ctx.freshSymbol("slice");
      continue;
    }
    if (!starts || !ends) { // symbolic bounds: clamp exactly when their signs are provable
      std::optional<SliceRange> sr;
      if (symStarts && symEnds && symStarts->size() == n && symEnds->size() == n)
        sr = sliceAxisSym(x.shape[size_t(a)], (*symStarts)[i], (*symEnds)[i], step);
      out.shape[size_t(a)] = sr ? sr->length : ctx.freshSymbol("slice");
      continue;
    }
    out.shape[size_t(a)] = sliceAxis(x.shape[size_t(a)], (*starts)[i], (*ends)[i], step).length;
  }
  return std::vector<TensorType>{out};
}

Result inferExpand(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  COIL_TRY(auto len, vectorInput(ctx, 1, "shape"));
  if (ctx.input(1).dtype != DType::I64)
    return ctx.error("shape must be i64, got " + std::string(dtypeName(ctx.input(1).dtype)));
  const auto &target = ctx.intValue(1);
  if (target) {
    for (const SymInt &d : *target)
      if (d.isConstant() && d.constant() < 0)
        return ctx.error("expand shape " + symsStr(*target) + " has a negative dim");
    COIL_TRY(auto out, broadcastShapes(x.shape, *target));
    return std::vector<TensorType>{{x.dtype, out}};
  }
  if (!len) return ctx.error("the length of the expand shape must be known at compile time");
  int64_t rank = std::max<int64_t>(x.rank(), *len);
  TensorType out{x.dtype, {}};
  for (int64_t i = 0; i < rank; ++i) out.shape.push_back(ctx.freshSymbol("expand"));
  return std::vector<TensorType>{out};
}

Result inferConstantOfShape(InferContext &ctx) {
  COIL_TRY(auto len, vectorInput(ctx, 0, "shape"));
  if (ctx.input(0).dtype != DType::I64)
    return ctx.error("shape must be i64, got " + std::string(dtypeName(ctx.input(0).dtype)));
  DType dt = DType::F32;
  if (auto v = ctx.node.attrs.getTensor("value")) {
    if (v->numel() != 1)
      return ctx.error("value must have one element, got " + std::to_string(v->numel()));
    dt = v->dtype();
  }
  const auto &target = ctx.intValue(0);
  if (target) {
    for (const SymInt &d : *target)
      if (d.isConstant() && d.constant() < 0)
        return ctx.error("shape " + symsStr(*target) + " has a negative dim");
    return std::vector<TensorType>{{dt, *target}};
  }
  if (!len) return ctx.error("the length of the shape must be known at compile time");
  TensorType out{dt, {}};
  for (int64_t i = 0; i < *len; ++i) out.shape.push_back(ctx.freshSymbol("shape"));
  return std::vector<TensorType>{out};
}

Result inferRange(InferContext &ctx) {
  const TensorType &s = ctx.input(0), &l = ctx.input(1), &d = ctx.input(2);
  for (size_t i = 0; i < 3; ++i) {
    const TensorType &t = ctx.input(i);
    if (t.rank() != 0)
      return ctx.error("input " + std::to_string(i) + " must be a scalar, got " + t.str());
    if (t.dtype != s.dtype)
      return ctx.error("inputs must have one type, got " + std::string(dtypeName(s.dtype)) +
                       " and " + std::string(dtypeName(t.dtype)));
  }
  if (s.dtype == DType::Bool)
    return ctx.error("range does not accept " + std::string(dtypeName(s.dtype)));
  (void)l;
  (void)d;
  if (ctx.constants[0] && ctx.constants[1] && ctx.constants[2] && isFloat(s.dtype)) {
    double a = ctx.constants[0]->getDouble(0), b = ctx.constants[1]->getDouble(0),
           c = ctx.constants[2]->getDouble(0);
    if (c == 0) return ctx.error("range delta must not be 0");
    double n = std::ceil((b - a) / c);
    // Converting a double past int64 is undefined: such a range is refused (NaN gives 0).
    if (!(n < 0x1p62) && n == n)
      return ctx.error("range of " + std::to_string(n) + " elements is too large");
    return std::vector<TensorType>{{s.dtype, {int64_t(std::max(0.0, n))}}};
  }
  const auto &a = ctx.intValue(0), &b = ctx.intValue(1), &c = ctx.intValue(2);
  // A delta of INT64_MIN cannot be negated: its size stays a fresh symbol (the interpreter and
  // the kernels compute it in 128 bits).
  if (!isFloat(s.dtype) && a && b && c && (*c)[0].isConstant() && (*c)[0].constant() != INT64_MIN) {
    int64_t delta = (*c)[0].constant();
    if (delta == 0) return ctx.error("range delta must not be 0");
    SymInt n = delta > 0 ? ceilDiv((*b)[0] - (*a)[0], delta) : ceilDiv((*a)[0] - (*b)[0], -delta);
    return std::vector<TensorType>{{s.dtype, {symMaxBounded(n, 0)}}};
  }
  return std::vector<TensorType>{{s.dtype, {ctx.freshSymbol("range")}}};
}

Result inferConstant(InferContext &ctx) {
  COIL_TRY(Tensor t, decodeConstant(ctx.node));
  TensorType out{t.dtype(), {}};
  for (int64_t d : t.shape()) out.shape.push_back(d);
  return std::vector<TensorType>{out};
}

} // namespace

void registerShapeOpsInfer(InferRegistry &r) {
  r.add(OpKind::Shape, inferShape);
  r.add(OpKind::Size, inferSize);
  r.add(OpKind::Reshape, inferReshape);
  r.add(OpKind::Flatten, inferFlatten);
  r.add(OpKind::Squeeze, inferSqueeze);
  r.add(OpKind::Unsqueeze, inferUnsqueeze);
  r.add(OpKind::Concat, inferConcat);
  r.add(OpKind::Gather, inferGather);
  r.add(OpKind::Slice, inferSlice);
  r.add(OpKind::Expand, inferExpand);
  r.add(OpKind::ConstantOfShape, inferConstantOfShape);
  r.add(OpKind::Range, inferRange);
  r.add(OpKind::Constant, inferConstant);
}

} // namespace coil
