// The ONNX importer's folding (see ImporterInternal.h): small integer tensors whose elements
// may be symbolic (`Known`) are tracked through the graph, and nodes over them fold into
// constants or symbolic constants, a function per op family.
#include "frontend/onnx/ImporterInternal.h"
#include "ir/Infer.h"
#include "ir/OpAttrs.h"
#include "ir/infer/ShapeOpsHelpers.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>

namespace coil::importer {

namespace {

/// Integer values with at most this many elements have their contents tracked for folding.
constexpr int64_t kMaxKnown = 4096;

/// Whether a shape given as data (ConstantOfShape's, Expand's) is small enough to fold: no
/// negative dim, and the dims, zeros counted as 1, multiply to at most kMaxKnown (checked
/// factor by factor, so no partial product overflows; a 0-element tensor with huge other dims
/// is left to inference, which reports it).
bool smallShape(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || std::max<int64_t>(d, 1) > kMaxKnown / n) return false;
    n *= std::max<int64_t>(d, 1);
  }
  return true;
}

/// Row-major flat index into `in` for output flat index `flat` under broadcasting.
int64_t broadcastFlat(const Shape &in, const Shape &out, int64_t flat) {
  int64_t idx = 0, stride = 1;
  int64_t off = int64_t(out.size()) - int64_t(in.size());
  for (int64_t d = int64_t(out.size()) - 1; d >= 0; --d) {
    int64_t od = out[size_t(d)];
    int64_t i = od ? flat % od : 0;
    flat = od ? flat / od : 0;
    if (d >= off) {
      int64_t id = in[size_t(d - off)];
      idx += (id == 1 ? 0 : i) * stride;
      stride *= id;
    }
  }
  return idx;
}

std::optional<Shape> broadcastKnown(const std::vector<const Known *> &ins) {
  Shape out;
  for (const Known *k : ins) {
    const Shape &s = k->shape;
    if (s.size() > out.size()) out.insert(out.begin(), s.size() - out.size(), 1);
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t &o = out[out.size() - s.size() + i];
      if (s[i] == o || s[i] == 1) continue;
      if (o != 1) return std::nullopt;
      o = s[i];
    }
  }
  return out;
}

/// Elementwise map of known values with broadcasting; nullopt when `f` cannot decide an
/// element or the shapes do not broadcast.
std::optional<Known>
mapKnown(const std::vector<const Known *> &ins,
         const std::function<std::optional<SymInt>(const std::vector<SymInt> &)> &f) {
  auto shape = broadcastKnown(ins);
  if (!shape || numelOf(*shape) > kMaxKnown) return std::nullopt;
  Known out{*shape, {}};
  int64_t n = numelOf(*shape);
  std::vector<SymInt> args(ins.size());
  for (int64_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < ins.size(); ++k)
      args[k] = ins[k]->v[size_t(broadcastFlat(ins[k]->shape, *shape, i))];
    auto r = f(args);
    if (!r) return std::nullopt;
    out.v.push_back(*r);
  }
  return out;
}

} // namespace

void Importer::noteKnown(ValueId v) {
  const Value &val = g_.value(v);
  if (g_.isSymConstant(v)) {
    Known k;
    if (val.type.rank() == 1) k.shape = {val.type.shape[0].constant()};
    k.v = g_.symConstant(v);
    known_[v] = std::move(k);
    return;
  }
  if (!g_.isConstant(v)) return;
  const Tensor &t = g_.constant(v);
  if (t.numel() > kMaxKnown) return;
  Known k{t.shape(), {}};
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (isFloat(t.dtype())) {
      double d = t.getDouble(i);
      if (!(std::fabs(d) < 9.0e15) || d != std::floor(d))
        return; // only integral values are tracked
      k.v.push_back(int64_t(d));
    } else {
      k.v.push_back(t.getInt(i));
    }
  }
  known_[v] = std::move(k);
}

namespace {

/// Constant folding of one node over known values (`Known`: small integer tensors whose
/// elements may be symbolic), split by op family; each returns nullopt where it does not fold.
struct Folder {
  const Node &node;
  const Graph &g_;
  std::function<const Known *(ValueId)> known;
  size_t nIn = node.inputs.size();

  const Known *in(size_t i) const {
    return i < node.inputs.size() && node.inputs[i] >= 0 ? known(node.inputs[i]) : nullptr;
  }
  DType dtypeIn(size_t i) const { return g_.value(node.inputs[i]).type.dtype; }
  /// Every input known, or an empty list.
  std::vector<const Known *> allIn() const {
    std::vector<const Known *> r;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const Known *k = in(i);
      if (!k) return std::vector<const Known *>();
      r.push_back(k);
    }
    return r;
  }
  /// A value without symbols that is not a constant is one whose int64 arithmetic overflowed:
  /// not folded here; the node stays and the reference kernels define the result.
  static std::optional<std::vector<Folded>> one(DType dt, Known k) {
    for (const SymInt &v : k.v) {
      if (v.isConstant()) continue;
      std::set<std::string> syms;
      v.collectSymbols(syms);
      if (syms.empty()) return std::nullopt;
    }
    return std::vector<Folded>{Folded{dt, std::move(k), {}}};
  }
  std::optional<std::vector<int64_t>> constVec(size_t i) const {
    const Known *k = in(i);
    if (!k || !k->allConstant()) return std::nullopt;
    std::vector<int64_t> r;
    for (const SymInt &s : k->v) r.push_back(s.constant());
    return r;
  }

  std::optional<std::vector<Folded>> shapes() const;
  std::optional<std::vector<Folded>> slices() const;
  std::optional<std::vector<Folded>> arith() const;
  std::optional<std::vector<Folded>> logic() const;
};

/// Shape and Size, Cast, Range, ConstantOfShape, Expand and the reshaping ops.
std::optional<std::vector<Folded>> Folder::shapes() const {
  const Attrs &attrs = node.attrs;
  (void)attrs;
  switch (node.op) {
  case OpKind::Shape: {
    const TensorType &t = g_.value(node.inputs[0]).type;
    int64_t r = t.rank();
    auto clampAxis = [r](int64_t a) {
      return std::max<int64_t>(0, std::min(r, a < 0 ? a + r : a));
    };
    int64_t s = clampAxis(attrs.getInt("start", 0)), e = clampAxis(attrs.getInt("end", r));
    Known k{{std::max<int64_t>(0, e - s)}, {}};
    for (int64_t i = s; i < e; ++i) k.v.push_back(t.shape[size_t(i)]);
    return one(DType::I64, k);
  }
  case OpKind::Size:
    return one(DType::I64, Known{{}, {symNumel(g_.value(node.inputs[0]).type.shape)}});
  case OpKind::Cast: {
    const Known *x = in(0);
    if (!x) return std::nullopt;
    auto to = onnxDType(int32_t(attrs.getInt("to", 0)));
    if (!to) return std::nullopt;
    DType from = dtypeIn(0);
    if (x->allConstant()) {
      // Exact ONNX Cast on the integral values through a tensor of the target type.
      Tensor src(from, x->shape);
      for (size_t i = 0; i < x->v.size(); ++i) src.setInt(int64_t(i), x->v[i].constant());
      Tensor dst = src.castTo(*to);
      Known k{x->shape, {}};
      for (int64_t i = 0; i < dst.numel(); ++i) {
        double v = dst.getDouble(i);
        if (v != std::floor(v)) return std::nullopt;
        k.v.push_back(isFloat(*to) ? int64_t(v) : dst.getInt(i));
      }
      return one(*to, k);
    }
    if (*to == DType::Bool || *to == DType::F16 || *to == DType::BF16 || dtypeSize(*to) < 4)
      return std::nullopt; // symbolic values may not survive narrow types
    return one(*to, *x);
  }
  case OpKind::Range: {
    auto s = constVec(0), l = constVec(1), d = constVec(2);
    DType dt = dtypeIn(0);
    if (!s || !l || !d || s->size() != 1 || l->size() != 1 || d->size() != 1 || (*d)[0] == 0 ||
        isFloat(dt))
      return std::nullopt;
    int64_t a = (*s)[0], b = (*l)[0], c = (*d)[0];
    double n = std::ceil((double(b) - double(a)) / double(c));
    if (n > double(kMaxKnown)) return std::nullopt;
    Known k{{std::max<int64_t>(0, int64_t(n))}, {}};
    for (int64_t i = 0; i < k.shape[0]; ++i) k.v.push_back(a + i * c);
    return one(dt, k);
  }
  case OpKind::ConstantOfShape: {
    auto shape = constVec(0);
    if (!shape || !smallShape(*shape)) return std::nullopt;
    Tensor value = Tensor::scalar(DType::F32, 0);
    if (auto v = attrs.getTensor("value")) {
      if (v->numel() != 1) return std::nullopt;
      value = *v;
    }
    Tensor t(value.dtype(), *shape);
    size_t es = dtypeSize(value.dtype());
    for (int64_t i = 0; i < t.numel(); ++i)
      std::memcpy(static_cast<uint8_t *>(t.data()) + size_t(i) * es, value.data(), es);
    return std::vector<Folded>{Folded{value.dtype(), Known{}, t}};
  }
  case OpKind::Expand: {
    const Known *x = in(0);
    auto shape = constVec(1);
    if (!x || !shape || !smallShape(*shape)) return std::nullopt;
    Known target{*shape, std::vector<SymInt>(size_t(numelOf(*shape)), SymInt(0))};
    auto k = mapKnown({x, &target},
                      [](const std::vector<SymInt> &v) -> std::optional<SymInt> { return v[0]; });
    if (!k) return std::nullopt;
    return one(dtypeIn(0), *k);
  }
  case OpKind::Squeeze:
  case OpKind::Unsqueeze:
  case OpKind::Reshape:
  case OpKind::Flatten: {
    const Known *x = in(0);
    if (!x) return std::nullopt;
    // The new shape comes from inference (which sees the known axes / target).
    std::vector<TensorType> types;
    std::vector<const TensorType *> ptrs;
    InferContext ctx{node, {}, {}, {}, {}};
    for (ValueId v : node.inputs) types.push_back(v >= 0 ? g_.value(v).type : TensorType{});
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      ptrs.push_back(node.inputs[i] >= 0 ? &types[i] : nullptr);
      const Known *k = in(i);
      DType dt = node.inputs[i] >= 0 ? types[i].dtype : DType::F32;
      ctx.intValues.push_back(k && !isFloat(dt) ? std::optional<std::vector<SymInt>>(k->v)
                                                : std::nullopt);
      ctx.constants.push_back(node.inputs[i] >= 0 && g_.isConstant(node.inputs[i])
                                  ? &g_.constant(node.inputs[i])
                                  : nullptr);
    }
    ctx.inputTypes = ptrs;
    ctx.freshSymbol = [](const std::string &) { return SymInt(-1); };
    auto r = inferNode(ctx);
    if (!r.ok() || r->empty()) return std::nullopt;
    // A dim inference left to a fresh symbol reads -1 here: not foldable ([-1, -1] has the
    // "numel" of a one-element input).
    auto s = (*r)[0].concreteShape();
    if (!s || std::any_of(s->begin(), s->end(), [](int64_t d) { return d < 0; }) ||
        numelOf(*s) != int64_t(x->v.size()))
      return std::nullopt;
    return one(dtypeIn(0), Known{*s, x->v});
  }
  default:
    return std::nullopt;
  }
}

/// Gather, Concat, Slice and Transpose of known values.
std::optional<std::vector<Folded>> Folder::slices() const {
  const Attrs &attrs = node.attrs;
  (void)attrs;
  switch (node.op) {
  case OpKind::Gather: {
    const Known *d = in(0);
    auto idx = constVec(1);
    if (!d || !idx || d->shape.size() != 1) return std::nullopt;
    int64_t len = d->shape[0];
    Known k{in(1)->shape, {}};
    for (int64_t i : *idx) {
      if (i < -len || i >= len) return std::nullopt; // inference reports it
      k.v.push_back(d->v[size_t(i < 0 ? i + len : i)]);
    }
    return one(dtypeIn(0), k);
  }
  case OpKind::Concat: {
    auto ins = allIn();
    if (ins.empty()) return std::nullopt;
    Known k{{0}, {}};
    for (const Known *x : ins) {
      if (x->shape.size() != 1) return std::nullopt;
      k.v.insert(k.v.end(), x->v.begin(), x->v.end());
    }
    k.shape[0] = int64_t(k.v.size());
    return one(dtypeIn(0), k);
  }
  case OpKind::Slice: {
    // Any rank (a pads vector reshaped to [-1, 2] and reversed by a Slice of step -1 is the
    // TorchScript export of F.pad with computed pads).
    const Known *d = in(0);
    auto starts = constVec(1), ends = constVec(2);
    if (!d || d->shape.empty() || !starts || !ends || starts->size() != ends->size())
      return std::nullopt;
    int64_t rank = int64_t(d->shape.size());
    std::vector<int64_t> axes(starts->size()), steps(starts->size(), 1);
    for (size_t i = 0; i < axes.size(); ++i) axes[i] = int64_t(i);
    if (nIn > 3 && node.inputs[3] >= 0) {
      auto a = constVec(3);
      if (!a || a->size() != axes.size()) return std::nullopt;
      axes = *a;
    }
    if (nIn > 4 && node.inputs[4] >= 0) {
      auto st = constVec(4);
      if (!st || st->size() != steps.size()) return std::nullopt;
      // Steps beyond +-2^62 are left to inference, which rejects them.
      for (int64_t v : *st)
        if (v < -kMaxSliceStep || v > kMaxSliceStep) return std::nullopt;
      steps = *st;
    }
    std::vector<int64_t> first(size_t(rank), 0), step(size_t(rank), 1);
    Shape shape = d->shape;
    std::vector<bool> seen(size_t(rank), false);
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t ax = axes[i] < 0 ? axes[i] + rank : axes[i];
      if (ax < 0 || ax >= rank || seen[size_t(ax)] || steps[i] == 0) return std::nullopt;
      seen[size_t(ax)] = true;
      SliceRange r = sliceAxis(d->shape[size_t(ax)], (*starts)[i], (*ends)[i], steps[i]);
      if (!r.start.isConstant() || !r.length.isConstant()) return std::nullopt;
      first[size_t(ax)] = r.start.constant();
      step[size_t(ax)] = steps[i];
      shape[size_t(ax)] = r.length.constant();
    }
    Known k{shape, {}};
    int64_t n = numelOf(shape);
    for (int64_t flat = 0; flat < n; ++flat) {
      int64_t rest = flat, src = 0, stride = 1;
      for (int64_t ax = rank - 1; ax >= 0; --ax) {
        int64_t i = rest % shape[size_t(ax)];
        rest /= shape[size_t(ax)];
        src += (first[size_t(ax)] + i * step[size_t(ax)]) * stride;
        stride *= d->shape[size_t(ax)];
      }
      k.v.push_back(d->v[size_t(src)]);
    }
    return one(dtypeIn(0), k);
  }
  case OpKind::Transpose: {
    const Known *x = in(0);
    if (!x) return std::nullopt;
    int64_t rank = int64_t(x->shape.size());
    std::vector<int64_t> perm = attrs.getInts("perm");
    if (perm.empty())
      for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
    if (int64_t(perm.size()) != rank) return std::nullopt; // inference reports it
    std::vector<bool> seen(size_t(rank), false);
    Shape shape(static_cast<size_t>(rank), 0);
    for (int64_t i = 0; i < rank; ++i) {
      if (perm[size_t(i)] < 0 || perm[size_t(i)] >= rank || seen[size_t(perm[size_t(i)])])
        return std::nullopt;
      seen[size_t(perm[size_t(i)])] = true;
      shape[size_t(i)] = x->shape[size_t(perm[size_t(i)])];
    }
    std::vector<int64_t> inStride(size_t(rank), 1);
    for (int64_t ax = rank - 2; ax >= 0; --ax)
      inStride[size_t(ax)] = inStride[size_t(ax + 1)] * x->shape[size_t(ax + 1)];
    Known k{shape, {}};
    int64_t n = numelOf(shape);
    for (int64_t flat = 0; flat < n; ++flat) {
      int64_t rest = flat, src = 0;
      for (int64_t ax = rank - 1; ax >= 0; --ax) {
        int64_t i = rest % shape[size_t(ax)];
        rest /= shape[size_t(ax)];
        src += i * inStride[size_t(perm[size_t(ax)])];
      }
      k.v.push_back(x->v[size_t(src)]);
    }
    return one(dtypeIn(0), k);
  }
  default:
    return std::nullopt;
  }
}

/// Elementwise arithmetic: Add, Sub, Mul, Div, Mod, Max, Min and the unary ops.
std::optional<std::vector<Folded>> Folder::arith() const {
  const Attrs &attrs = node.attrs;
  (void)attrs;
  switch (node.op) {
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Mod: {
    const Known *a = in(0), *b = in(1);
    if (!a || !b) return std::nullopt;
    DType dt = dtypeIn(0);
    bool fl = isFloat(dt);
    bool fmod = attrs.getInt("fmod", 0) != 0;
    OpKind op = node.op;
    auto k = mapKnown({a, b}, [&](const std::vector<SymInt> &v) -> std::optional<SymInt> {
      const SymInt &x = v[0], &y = v[1];
      switch (op) {
      case OpKind::Add:
        return x + y;
      case OpKind::Sub:
        return x - y;
      case OpKind::Mul:
        return x * y;
      case OpKind::Div:
        if (y.isConstant() && y.constant() == 0) return std::nullopt;
        if (x.isConstant() && y.isConstant() && !fl) {
          if (x.constant() == INT64_MIN && y.constant() == -1)
            return SymInt(INT64_MIN); // wraps, as the kernels do (interp/kernels/Elementwise.cpp)
          return SymInt(x.constant() / y.constant()); // integer Div truncates
        }
        if (auto q = symDivExact(x, y)) return *q;
        if (!fl && y.isConstant() && y.constant() > 0 && symNonNegative(x)) return floorDiv(x, y);
        return std::nullopt;
      default: // Mod
        if (!y.isConstant() || y.constant() == 0) return std::nullopt;
        if (x.isConstant()) {
          // Truncated (fmod=1); x % -1 is 0 (and INT64_MIN % -1 would trap).
          int64_t r = y.constant() == -1 ? 0 : x.constant() % y.constant();
          if (!fmod && r != 0 && ((r < 0) != (y.constant() < 0))) r += y.constant();
          return SymInt(r);
        }
        if (fl) return std::nullopt;
        if (!fmod || (y.constant() > 0 && symNonNegative(x))) return floorMod(x, y);
        return std::nullopt;
      }
    });
    if (!k) return std::nullopt;
    return one(dt, *k);
  }
  case OpKind::Max:
  case OpKind::Min: {
    auto ins = allIn();
    if (ins.empty()) return std::nullopt;
    bool isMax = node.op == OpKind::Max;
    auto k = mapKnown(ins, [&](const std::vector<SymInt> &v) -> std::optional<SymInt> {
      SymInt r = v[0];
      for (size_t i = 1; i < v.size(); ++i)
        r = isMax ? symMaxBounded(r, v[i]) : symMinBounded(r, v[i]);
      return r;
    });
    if (!k) return std::nullopt;
    return one(dtypeIn(0), *k);
  }
  case OpKind::Neg:
  case OpKind::Abs:
  case OpKind::Floor:
  case OpKind::Ceil:
  case OpKind::Round: {
    const Known *x = in(0);
    if (!x) return std::nullopt;
    OpKind op = node.op;
    auto k = mapKnown({x}, [&](const std::vector<SymInt> &v) -> std::optional<SymInt> {
      if (op == OpKind::Neg) return -v[0];
      if (op == OpKind::Abs) {
        if (v[0].isConstant()) // |INT64_MIN| wraps to itself, as in the kernels
          return SymInt(v[0].constant() == INT64_MIN ? INT64_MIN : std::abs(v[0].constant()));
        return symNonNegative(v[0]) ? std::optional<SymInt>(v[0]) : std::nullopt;
      }
      return v[0]; // integral values round to themselves
    });
    if (!k) return std::nullopt;
    return one(dtypeIn(0), *k);
  }
  default:
    return std::nullopt;
  }
}

/// Comparisons, Where, and ReduceSum / ReduceProd of a vector.
std::optional<std::vector<Folded>> Folder::logic() const {
  const Attrs &attrs = node.attrs;
  (void)attrs;
  switch (node.op) {
  case OpKind::Equal:
  case OpKind::Less:
  case OpKind::LessOrEqual:
  case OpKind::Greater:
  case OpKind::GreaterOrEqual: {
    const Known *a = in(0), *b = in(1);
    if (!a || !b) return std::nullopt;
    OpKind op = node.op;
    const SymRanges &ranges = g_.symbols;
    auto k = mapKnown({a, b}, [&](const std::vector<SymInt> &v) -> std::optional<SymInt> {
      const SymInt &x = v[0], &y = v[1];
      auto decide = [](bool yes, bool no) -> std::optional<SymInt> {
        if (yes) return SymInt(1);
        if (no) return SymInt(0);
        return std::nullopt;
      };
      switch (op) {
      case OpKind::Equal:
        return decide(x == y || proveEQ(x, y, ranges),
                      proveLT(x, y, ranges) || proveLT(y, x, ranges));
      case OpKind::Less:
        return decide(proveLT(x, y, ranges), proveLE(y, x, ranges));
      case OpKind::LessOrEqual:
        return decide(proveLE(x, y, ranges), proveLT(y, x, ranges));
      case OpKind::Greater:
        return decide(proveLT(y, x, ranges), proveLE(x, y, ranges));
      default:
        return decide(proveLE(y, x, ranges), proveLT(x, y, ranges));
      }
    });
    if (!k) return std::nullopt;
    return one(DType::Bool, *k);
  }
  case OpKind::Where: {
    auto ins = allIn();
    if (ins.size() != 3 || !ins[0]->allConstant()) return std::nullopt;
    auto k = mapKnown(ins, [](const std::vector<SymInt> &v) -> std::optional<SymInt> {
      return v[0].constant() ? v[1] : v[2];
    });
    if (!k) return std::nullopt;
    return one(dtypeIn(1), *k);
  }
  case OpKind::ReduceProd:
  case OpKind::ReduceSum: {
    const Known *x = in(0);
    if (!x || x->shape.size() > 1) return std::nullopt;
    auto ra = decodeReduce(node);
    if (!ra.ok()) return std::nullopt;
    std::optional<std::vector<int64_t>> axes = ra->axes;
    if (!axes && nIn > 1 && node.inputs[1] >= 0) {
      axes = constVec(1);
      if (!axes) return std::nullopt;
    }
    bool keep = ra->keepdims;
    if ((!axes || axes->empty()) && ra->noopWithEmptyAxes) return one(dtypeIn(0), *x);
    if (axes)
      for (int64_t a : *axes)
        if (a != 0 && a != -1) return std::nullopt;
    SymInt r = node.op == OpKind::ReduceProd ? SymInt(1) : SymInt(0);
    for (const SymInt &v : x->v) r = node.op == OpKind::ReduceProd ? r * v : r + v;
    Known k{x->shape.empty() || !keep ? Shape{} : Shape{1}, {r}};
    return one(dtypeIn(0), k);
  }
  default:
    return std::nullopt;
  }
}

} // namespace

std::optional<std::vector<Folded>> Importer::fold(const Node &node, const onnx::NodeProto &) {
  Folder f{node, g_, [this](ValueId v) { return known(v); }};
  if (auto r = f.shapes()) return r;
  if (auto r = f.slices()) return r;
  if (auto r = f.arith()) return r;
  return f.logic();
}

bool Importer::materialize(const onnx::NodeProto &n, const std::vector<Folded> &outs) {
  // All outputs must become constants or symbolic constants, or none does.
  for (const Folded &f : outs) {
    if (f.tensor || f.known.allConstant()) continue;
    if (f.dtype != DType::I64 || f.known.shape.size() > 1) return false;
    // A symbol bound only when some node runs (NonZero's count, ...) keeps the computation
    // in the graph: a symbolic constant would cut the dependence on that node.
    std::set<std::string> syms;
    for (const SymInt &e : f.known.v) e.collectSymbols(syms);
    for (const std::string &sym : syms)
      if (!inputSymbols_.count(sym)) return false;
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    if (i >= size_t(n.output_size()) || n.output(int(i)).empty()) continue;
    const Folded &f = outs[i];
    const std::string &name = n.output(int(i));
    ValueId id;
    if (f.tensor) {
      id = g_.addConstant(name, *f.tensor);
    } else if (f.known.allConstant()) {
      Tensor t(f.dtype, f.known.shape);
      for (size_t k = 0; k < f.known.v.size(); ++k) t.setInt(int64_t(k), f.known.v[k].constant());
      id = g_.addConstant(name, t);
    } else {
      id = g_.addSymConstant(name, f.known.v, f.known.shape.empty());
    }
    names_[name] = id;
    noteKnown(id);
  }
  return true;
}

} // namespace coil::importer
