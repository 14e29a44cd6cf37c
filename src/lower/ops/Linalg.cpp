// Lowering of the Linalg family: matrix products (MatMul, Gemm, MatMulInteger, QLinearMatMul),
// Einsum and Det; the convolutions, pools, image and sampling ops, recurrent ops and Attention are
// in the other Linalg*.cpp files of this folder, registered here too.
//
// Floating matrix products call the batched GEMM extern (kernels/cpu; f16/bf16 accumulate in
// f32 and round once) on contiguous operands, with plain transposes folded into its
// transA/transB flags; other dtypes lower to a
// Reduction over K that accumulates as the interpreter does (f64 for floats, wrapping i64 for
// integers).
#include "ir/Infer.h"
#include "kernels/Externs.h"
#include "lower/ops/LinalgLower.h"
#include "lower/ops/SpatialUtil.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace coil::loop {
namespace linalg {

std::string suffix(DType t) {
  return std::string(dtypeName(t));
}

SymInt numelRange(const std::vector<SymInt> &shape, size_t from, size_t to) {
  SymInt p = 1;
  for (size_t i = from; i < to; ++i) p = p * shape[i];
  return p;
}

bool sameDim(const LowerContext &ctx, const SymInt &a, const SymInt &b) {
  return a == b || proveEQ(a, b, const_cast<LowerContext &>(ctx).program().symbols);
}

static Error innerDimsError(const LowerContext &ctx, const SymInt &k1, const SymInt &k2) {
  if (k1.isConstant() && k2.isConstant())
    return ctx.error("inner dimensions differ: " + k1.str() + " vs " + k2.str());
  // Inference let it pass (they may be equal); the kernels need them proven equal.
  return ctx.error("inner dimensions " + k1.str() + " and " + k2.str() +
                   " cannot be proven equal from the model's sizes (coil sizes kernels at "
                   "compile time): export them as one symbol or a static size, or fix the "
                   "symbols' values with --dynamic NAME=V:V");
}

std::string dataDependentSymbol(LowerContext &ctx, const SymInt &dim, const std::string &hint) {
  if (dim.isSymbol()) return dim.symbolName();
  return ctx.freshSymbol(hint).symbolName();
}

Layout layoutOf(LowerContext &ctx, const TensorRef &t) {
  if (t.map.empty()) return Layout::Plain;
  const Node &n = ctx.program().nodes.at(size_t(t.node));
  size_t r = t.shape.size();
  // The index expression and extent of every non-unit dim of the node, in order.
  std::vector<std::pair<SymInt, SymInt>> seen;
  for (size_t d = 0; d < n.shape.size(); ++d)
    if (n.shape[d] != SymInt(1)) seen.push_back({t.map[d], n.shape[d]});
  auto matches = [&](const std::vector<size_t> &order) {
    std::vector<std::pair<SymInt, SymInt>> want;
    for (size_t i : order)
      if (t.shape[i] != SymInt(1)) want.push_back({SymInt::symbol(viewVar(int(i))), t.shape[i]});
    if (want.size() != seen.size()) return false;
    for (size_t k = 0; k < want.size(); ++k)
      if (want[k].first != seen[k].first || !sameDim(ctx, want[k].second, seen[k].second))
        return false;
    return true;
  };
  std::vector<size_t> order(r);
  for (size_t i = 0; i < r; ++i) order[i] = i;
  if (matches(order)) return Layout::Plain;
  if (r >= 2) {
    std::swap(order[r - 2], order[r - 1]);
    if (matches(order)) return Layout::Transposed;
  }
  // A reshape of a contiguous node (e.g. [B, S, H, D] seen as [B, S, H*D]) is contiguous too.
  if (auto vs = viewStrides(ctx, t); vs && vs->offset == SymInt(0)) {
    SymInt want = 1;
    bool plain = true;
    for (size_t i = r; i-- > 0 && plain;) {
      plain = t.shape[i] == SymInt(1) || vs->strides[i] == want;
      want = want * t.shape[i];
    }
    if (plain) return Layout::Plain;
  }
  return Layout::Other;
}

TensorRef wholeNode(LowerContext &ctx, const TensorRef &t) {
  const Node &n = ctx.program().nodes.at(size_t(t.node));
  return TensorRef{t.node, n.dtype, n.shape, {}};
}

Val loadPerIndex(BodyBuilder &b, const TensorRef &t, const SymInt &i, DType acc) {
  std::vector<SymInt> idx(t.shape.size(), SymInt(0));
  bool single = true;
  for (const SymInt &d : t.shape) single = single && d == SymInt(1);
  if (!single && !idx.empty()) idx.back() = i;
  return b.cast(b.load(t, idx), acc);
}

Val requantize(BodyBuilder &b, Val v, Val zeroPoint, DType outT) {
  auto [lo, hi] = saturationRange(outT);
  Val r = b.op(ScalarOp::Add, b.op(ScalarOp::Round, v), zeroPoint);
  r = b.op(ScalarOp::Min, b.op(ScalarOp::Max, r, b.constant(DType::F64, lo)),
           b.constant(DType::F64, hi));
  r = b.op(ScalarOp::Select, b.op(ScalarOp::IsNaN, r), b.constant(DType::F64, 0), r);
  return b.cast(r, outT);
}

// --- matrix products

/// Prepares `t` ([batch..., rows, cols], batch dims right-aligned against `batch`) for the
/// GEMM extern: shared when its batch dims are all 1, used in place when it already has the
/// full batch shape and lies in memory as a plain or transposed contiguous tensor; otherwise
/// broadcast and/or copied into a buffer of its own.
MatOperand prepareOperand(LowerContext &ctx, TensorRef t, const std::vector<SymInt> &batch) {
  size_t r = t.shape.size();
  SymInt rows = t.shape[r - 2], cols = t.shape[r - 1];
  bool shared = true;
  for (size_t i = 0; i + 2 < r; ++i) shared = shared && t.shape[i] == SymInt(1);
  bool full = r - 2 == batch.size();
  for (size_t i = 0; full && i + 2 < r; ++i) full = sameDim(ctx, t.shape[i], batch[i]);
  if (!shared && !full) {
    std::vector<SymInt> s = batch;
    s.push_back(rows);
    s.push_back(cols);
    t = ctx.broadcastTo(t, s);
  }
  Layout l = layoutOf(ctx, t);
  if (l == Layout::Other) {
    t = ctx.realize(t);
    l = Layout::Plain;
  }
  MatOperand op;
  op.ref = wholeNode(ctx, t);
  op.trans = l == Layout::Transposed;
  op.stride = shared ? SymInt(0) : rows * cols;
  return op;
}

/// y [batch..., m, n] = alpha * a [.., m, k] * b [.., k, n] through the GEMM extern.
TensorRef gemmExtern(LowerContext &ctx, const TensorRef &a, const TensorRef &b,
                     const std::vector<SymInt> &batch, const SymInt &m, const SymInt &n,
                     const SymInt &k, double alpha) {
  MatOperand pa = prepareOperand(ctx, a, batch), pb = prepareOperand(ctx, b, batch);
  std::vector<SymInt> shape = batch;
  shape.push_back(m);
  shape.push_back(n);
  DType dt = a.dtype;
  std::vector<ExternArg> args{nodeArg(pa.ref),
                              nodeArg(pb.ref),
                              outArg(0),
                              intArg(symNumel(batch)),
                              intArg(m),
                              intArg(n),
                              intArg(k),
                              intArg(pa.trans ? 1 : 0),
                              intArg(pb.trans ? 1 : 0),
                              intArg(pa.stride),
                              intArg(pb.stride),
                              floatArg(alpha)};
  return ctx.externCall(kernels::cpuSymbol(kernels::ExternId::Gemm, dt), std::move(args),
                        {{dt, shape}})[0];
}

using ElemFn = std::function<Val(BodyBuilder &, const std::vector<SymInt> &idx, const SymInt &rc)>;

/// out [batch..., m, n] (outT) = sum over k of fa(a[.., i, k]) * fb(b[.., k, j]) in accT, with
/// the batch dims of a and b broadcast.
TensorRef matmulReduction(LowerContext &ctx, const TensorRef &a, const TensorRef &b,
                          const std::vector<SymInt> &batch, const SymInt &m, const SymInt &n,
                          const SymInt &k, DType outT, DType accT, const ElemFn &fa,
                          const ElemFn &fb) {
  std::vector<SymInt> outer = batch;
  outer.push_back(m);
  outer.push_back(n);
  size_t nb = batch.size();
  return ctx.reduce(
      ReduceKind::Sum, outT, accT, outer, {k},
      [&](BodyBuilder &bb, const std::vector<SymInt> &o, const std::vector<SymInt> &r, Val *) {
        std::vector<SymInt> ia(o.begin(), o.begin() + long(nb)), ib = ia;
        ia.push_back(o[nb]);
        ia.push_back(r[0]);
        ib.push_back(r[0]);
        ib.push_back(o[nb + 1]);
        return bb.op(ScalarOp::Mul, fa(bb, ia, o[nb]), fb(bb, ib, o[nb + 1]));
      });
}

ElemFn plainElem(const TensorRef &t, DType acc) {
  return [t, acc](BodyBuilder &b, const std::vector<SymInt> &idx, const SymInt &) {
    return b.cast(b.loadBroadcast(t, idx), acc);
  };
}
} // namespace linalg

namespace {

using namespace linalg;

/// t[idx] - zeroPoint[rc] (zero point scalar or per row/column; absent: 0), as i64.
ElemFn zeroPointElem(const TensorRef &t, std::optional<TensorRef> zp) {
  return [t, zp](BodyBuilder &b, const std::vector<SymInt> &idx, const SymInt &rc) {
    Val v = b.cast(b.loadBroadcast(t, idx), DType::I64);
    if (!zp) return v;
    return b.op(ScalarOp::Sub, v, loadPerIndex(b, *zp, rc, DType::I64));
  };
}

/// Operands promoted to rank >= 2 as numpy's matmul does, with m, k, n and the batch shape.
struct MatMulShapes {
  TensorRef a, b;
  SymInt m, k, n;
  std::vector<SymInt> batch;
};

Expected<MatMulShapes> matmulShapes(LowerContext &ctx, size_t ai, size_t bi) {
  MatMulShapes s;
  s.a = ctx.input(ai);
  s.b = ctx.input(bi);
  if (s.a.rank() == 0 || s.b.rank() == 0) return ctx.error("matmul operands must have rank >= 1");
  if (s.a.rank() == 1) s.a = ctx.reshape(s.a, {1, s.a.shape[0]});
  if (s.b.rank() == 1) s.b = ctx.reshape(s.b, {s.b.shape[0], 1});
  size_t ra = s.a.shape.size(), rb = s.b.shape.size();
  s.m = s.a.shape[ra - 2];
  s.k = s.a.shape[ra - 1];
  s.n = s.b.shape[rb - 1];
  if (!sameDim(ctx, s.k, s.b.shape[rb - 2])) return innerDimsError(ctx, s.k, s.b.shape[rb - 2]);
  std::vector<SymInt> ba(s.a.shape.begin(), s.a.shape.end() - 2),
      bb(s.b.shape.begin(), s.b.shape.end() - 2);
  COIL_TRY(s.batch, broadcastShapes(ba, bb));
  return s;
}

/// Types with a GEMM extern (f16/bf16 accumulate in f32 and round once).
bool isGemmType(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16;
}

bool isHalfType(DType t) {
  return t == DType::F16 || t == DType::BF16;
}

Status lowerMatMul(LowerContext &ctx) {
  COIL_TRY(MatMulShapes s, matmulShapes(ctx, 0, 1));
  if (s.a.dtype != s.b.dtype) return ctx.error("matmul operands must have the same dtype");
  DType dt = ctx.outputType(0).dtype;
  TensorRef y;
  if (isGemmType(dt)) {
    y = gemmExtern(ctx, s.a, s.b, s.batch, s.m, s.n, s.k, 1.0);
  } else {
    DType acc = accTypeOf(dt);
    y = matmulReduction(ctx, s.a, s.b, s.batch, s.m, s.n, s.k, dt, acc, plainElem(s.a, acc),
                        plainElem(s.b, acc));
  }
  ctx.setOutput(0, ctx.reshape(y, ctx.outputType(0).shape));
  return okStatus();
}

std::optional<TensorRef> optionalInput(LowerContext &ctx, size_t i) {
  if (!ctx.hasInput(i)) return std::nullopt;
  return ctx.input(i);
}

Status lowerMatMulInteger(LowerContext &ctx) {
  COIL_TRY(MatMulShapes s, matmulShapes(ctx, 0, 1));
  TensorRef y = matmulReduction(ctx, s.a, s.b, s.batch, s.m, s.n, s.k, DType::I32, DType::I64,
                                zeroPointElem(s.a, optionalInput(ctx, 2)),
                                zeroPointElem(s.b, optionalInput(ctx, 3)));
  ctx.setOutput(0, ctx.reshape(y, ctx.outputType(0).shape));
  return okStatus();
}

Status lowerQLinearMatMul(LowerContext &ctx) {
  COIL_TRY(MatMulShapes s, matmulShapes(ctx, 0, 3));
  TensorRef acc = matmulReduction(ctx, s.a, s.b, s.batch, s.m, s.n, s.k, DType::I64, DType::I64,
                                  zeroPointElem(s.a, optionalInput(ctx, 2)),
                                  zeroPointElem(s.b, optionalInput(ctx, 5)));
  TensorRef as = ctx.input(1), bs = ctx.input(4), ys = ctx.input(6), yz = ctx.input(7);
  DType outT = ctx.outputType(0).dtype;
  size_t nb = s.batch.size();
  TensorRef y = ctx.pointwise(outT, acc.shape, [&](BodyBuilder &b, const std::vector<SymInt> &i) {
    // The scale factor is a float32 product, as in the ONNX definition.
    Val f = b.op(ScalarOp::Mul, loadPerIndex(b, as, i[nb], DType::F32),
                 loadPerIndex(b, bs, i[nb + 1], DType::F32));
    f = b.op(ScalarOp::Div, f, loadPerIndex(b, ys, 0, DType::F32));
    Val v = b.op(ScalarOp::Mul, b.cast(b.load(acc, i), DType::F64), b.cast(f, DType::F64));
    return requantize(b, v, loadPerIndex(b, yz, 0, DType::F64), outT);
  });
  ctx.setOutput(0, ctx.reshape(y, ctx.outputType(0).shape));
  return okStatus();
}

/// C of an ONNX Gemm as a per-column bias vector of the GEMM extern's epilogue: a realized
/// node of n elements when C has shape [n] or [1, n] (of the output's dtype); nullopt otherwise.
std::optional<TensorRef> columnBias(LowerContext &ctx, const TensorRef &c, const SymInt &n,
                                    DType dt) {
  if (c.dtype != dt || c.rank() == 0 || c.rank() > 2 || !sameDim(ctx, c.shape.back(), n))
    return std::nullopt;
  if (c.rank() == 2 && c.shape[0] != SymInt(1)) return std::nullopt;
  TensorRef v = c.map.empty() ? c : ctx.realize(c);
  return wholeNode(ctx, v);
}

/// y [m, n] = alpha * a [m, k] * b [k, n] + bias [n] through the bias-epilogue GEMM extern.
TensorRef gemmBiasExtern(LowerContext &ctx, const TensorRef &a, const TensorRef &b,
                         const TensorRef &bias, const SymInt &m, const SymInt &n, const SymInt &k,
                         double alpha) {
  MatOperand pa = prepareOperand(ctx, a, {}), pb = prepareOperand(ctx, b, {});
  DType dt = a.dtype;
  std::vector<ExternArg> args{nodeArg(pa.ref),
                              nodeArg(pb.ref),
                              nodeArg(bias),
                              outArg(0),
                              intArg(1),
                              intArg(m),
                              intArg(n),
                              intArg(k),
                              intArg(pa.trans ? 1 : 0),
                              intArg(pb.trans ? 1 : 0),
                              intArg(pa.stride),
                              intArg(pb.stride),
                              floatArg(alpha),
                              intArg(0)};
  return ctx.externCall(kernels::cpuSymbol(kernels::ExternId::GemmBias, dt), std::move(args),
                        {{dt, {m, n}}})[0];
}

Status lowerGemm(LowerContext &ctx) {
  TensorRef a = ctx.input(0), b = ctx.input(1);
  if (a.rank() != 2 || b.rank() != 2)
    return ctx.error("gemm operands must have rank 2, got ranks " + std::to_string(a.rank()) +
                     " and " + std::to_string(b.rank()));
  const Attrs &at = ctx.gnode().attrs;
  bool ta = at.getInt("transA", 0) != 0, tb = at.getInt("transB", 0) != 0;
  double alpha = at.getFloat("alpha", 1.0), beta = at.getFloat("beta", 1.0);
  if (ta) a = ctx.permute(a, {1, 0});
  if (tb) b = ctx.permute(b, {1, 0});
  SymInt m = a.shape[0], k = a.shape[1], n = b.shape[1];
  if (!sameDim(ctx, k, b.shape[0])) return innerDimsError(ctx, k, b.shape[0]);
  DType dt = ctx.outputType(0).dtype;
  std::optional<TensorRef> c = optionalInput(ctx, 2);
  std::vector<SymInt> shape{m, n};
  TensorRef y;
  std::optional<TensorRef> bias;
  if (isGemmType(dt) && c && beta == 1.0) bias = columnBias(ctx, *c, n, dt);
  if (bias) {
    // C is a per-column bias: the GEMM's epilogue adds it (f16/bf16 in f32, one rounding).
    y = gemmBiasExtern(ctx, a, b, *bias, m, n, k, alpha);
  } else if (isGemmType(dt)) {
    y = gemmExtern(ctx, a, b, {}, m, n, k, alpha);
    if (c) {
      // f16/bf16 add C in f32.
      TensorRef acc = y;
      DType ct = isHalfType(dt) ? DType::F32 : dt;
      y = ctx.pointwise(dt, shape, [&](BodyBuilder &bb, const std::vector<SymInt> &i) {
        Val cv = bb.cast(bb.loadBroadcast(*c, i), ct);
        if (beta != 1.0) cv = bb.op(ScalarOp::Mul, bb.constant(ct, beta), cv);
        return bb.cast(bb.op(ScalarOp::Add, bb.cast(bb.load(acc, i), ct), cv), dt);
      });
    }
  } else {
    // Integers without scaling are exact in wrapping i64; everything else computes in f64 and
    // rounds once, as the interpreter does.
    bool exactInt = isInteger(dt) && alpha == 1.0 && beta == 1.0;
    DType acc = exactInt ? DType::I64 : DType::F64;
    TensorRef r =
        matmulReduction(ctx, a, b, {}, m, n, k, acc, acc, plainElem(a, acc), plainElem(b, acc));
    y = ctx.pointwise(dt, shape, [&](BodyBuilder &bb, const std::vector<SymInt> &i) {
      Val v = bb.load(r, i);
      if (!exactInt && alpha != 1.0) v = bb.op(ScalarOp::Mul, bb.constant(acc, alpha), v);
      if (c) {
        Val cv = bb.cast(bb.loadBroadcast(*c, i), acc);
        if (!exactInt && beta != 1.0) cv = bb.op(ScalarOp::Mul, bb.constant(acc, beta), cv);
        v = bb.op(ScalarOp::Add, v, cv);
      }
      return bb.cast(v, dt);
    });
  }
  ctx.setOutput(0, y);
  return okStatus();
}

// --- Einsum

/// A two-operand Einsum as one batched GEMM when every label is a batch label (in both operands
/// and the output), an M or N label (in one operand and the output) or a K label (in both
/// operands, summed): the operands are permuted and reshaped to [batch..., M, K] and
/// [batch..., K, N] views (read in place when they lie in memory that way), the result viewed
/// back in the output's label order. nullopt when the equation does not have that form
/// (diagonals, broadcast dims, labels summed within one operand).
std::optional<TensorRef> einsumAsGemm(LowerContext &ctx, const std::vector<TensorRef> &ops,
                                      const std::vector<std::vector<int>> &labels,
                                      const std::vector<int> &outLabels,
                                      std::map<int, SymInt> &size) {
  auto has = [](const std::vector<int> &v, int l) {
    return std::find(v.begin(), v.end(), l) != v.end();
  };
  for (size_t t = 0; t < 2; ++t)
    for (size_t d = 0; d < labels[t].size(); ++d) {
      int l = labels[t][d];
      if (std::count(labels[t].begin(), labels[t].end(), l) != 1) return std::nullopt;
      if (!sameDim(ctx, ops[t].shape[d], size[l])) return std::nullopt;
    }
  const auto &la = labels[0], &lb = labels[1];
  std::vector<int> batch, ms, ns, ks;
  for (int l : la) {
    bool inB = has(lb, l), inOut = has(outLabels, l);
    if (inB && inOut)
      batch.push_back(l);
    else if (inOut)
      ms.push_back(l);
    else if (inB)
      ks.push_back(l);
    else
      return std::nullopt; // summed within A alone
  }
  for (int l : lb)
    if (!has(la, l)) {
      if (!has(outLabels, l)) return std::nullopt;
      ns.push_back(l);
    }
  auto arrange = [&](const TensorRef &t, const std::vector<int> &lt,
                     const std::vector<std::vector<int>> &groups) {
    std::vector<int64_t> perm;
    for (const auto &g : groups)
      for (int l : g) perm.push_back(int64_t(std::find(lt.begin(), lt.end(), l) - lt.begin()));
    TensorRef p = ctx.permute(t, perm);
    std::vector<SymInt> shape;
    for (int l : groups[0]) shape.push_back(size[l]);
    for (size_t g = 1; g < groups.size(); ++g) {
      SymInt n = 1;
      for (int l : groups[g]) n = n * size[l];
      shape.push_back(n);
    }
    return ctx.reshape(p, shape);
  };
  TensorRef a = arrange(ops[0], la, {batch, ms, ks}), b = arrange(ops[1], lb, {batch, ks, ns});
  std::vector<SymInt> batchShape(a.shape.begin(), a.shape.end() - 2);
  SymInt m = a.shape[a.shape.size() - 2], k = a.shape.back(), n = b.shape.back();
  TensorRef y = gemmExtern(ctx, a, b, batchShape, m, n, k, 1.0);
  // [batch..., M, N] -> [batch..., ms..., ns...] -> the output's label order.
  std::vector<int> yLabels = batch;
  yLabels.insert(yLabels.end(), ms.begin(), ms.end());
  yLabels.insert(yLabels.end(), ns.begin(), ns.end());
  std::vector<SymInt> yShape;
  for (int l : yLabels) yShape.push_back(size[l]);
  y = ctx.reshape(y, yShape);
  std::vector<int64_t> perm;
  for (int l : outLabels)
    perm.push_back(int64_t(std::find(yLabels.begin(), yLabels.end(), l) - yLabels.begin()));
  return ctx.permute(y, perm);
}

/// Einsum as one Reduction: the output labels are the outer point, the summed labels the
/// reduced point, the body the product of the operands (f64 for floats, i64 for integers).
/// Operand dims of size 1 broadcast; a label repeated within a term reads a diagonal.
Status lowerEinsum(LowerContext &ctx) {
  size_t nIn = ctx.numInputs();
  COIL_TRY(EinsumEquation eq, decodeEinsum(ctx.gnode(), nIn));
  std::vector<TensorRef> ops;
  std::vector<size_t> ranks;
  for (size_t t = 0; t < nIn; ++t) {
    ops.push_back(ctx.input(t));
    ranks.push_back(ops.back().shape.size());
  }
  COIL_TRY(EinsumLabels L, einsumLabels(eq, ranks));
  const auto &labels = L.operands;
  const std::vector<int> &outLabels = L.output, &sumLabels = L.summed;
  std::map<int, SymInt> size;
  for (size_t t = 0; t < nIn; ++t)
    for (size_t d = 0; d < ops[t].shape.size(); ++d) {
      int l = labels[t][d];
      auto it = size.find(l);
      if (it == size.end() || it->second == SymInt(1)) size[l] = ops[t].shape[d];
    }
  std::vector<SymInt> outShape, sumShape;
  for (int l : outLabels) outShape.push_back(size[l]);
  for (int l : sumLabels) sumShape.push_back(size[l]);
  DType dt = ctx.outputType(0).dtype, acc = accTypeOf(dt);
  if (nIn == 2 && isGemmType(dt))
    if (auto y = einsumAsGemm(ctx, ops, labels, outLabels, size)) {
      ctx.setOutput(0, *y);
      return okStatus();
    }
  auto product = [&](BodyBuilder &b, const std::vector<SymInt> &o, const std::vector<SymInt> &r) {
    std::map<int, SymInt> var;
    for (size_t j = 0; j < outLabels.size(); ++j) var[outLabels[j]] = o[j];
    for (size_t j = 0; j < sumLabels.size(); ++j) var[sumLabels[j]] = r[j];
    Val p = kNoVal;
    for (size_t t = 0; t < nIn; ++t) {
      std::vector<SymInt> idx;
      for (size_t d = 0; d < ops[t].shape.size(); ++d)
        idx.push_back(ops[t].shape[d] == SymInt(1) ? SymInt(0) : var.at(labels[t][d]));
      Val v = b.cast(b.load(ops[t], idx), acc);
      p = p == kNoVal ? v : b.op(ScalarOp::Mul, p, v);
    }
    return p;
  };
  TensorRef y;
  if (sumLabels.empty())
    y = ctx.pointwise(dt, outShape, [&](BodyBuilder &b, const std::vector<SymInt> &o) {
      return product(b, o, {});
    });
  else
    y = ctx.reduce(ReduceKind::Sum, dt, acc, outShape, sumShape,
                   [&](BodyBuilder &b, const std::vector<SymInt> &o, const std::vector<SymInt> &r,
                       Val *) { return product(b, o, r); });
  ctx.setOutput(0, y);
  return okStatus();
}

// --- Det

Status lowerDet(LowerContext &ctx) {
  TensorRef x = ctx.input(0);
  size_t r = x.shape.size();
  if (r < 2 || !sameDim(ctx, x.shape[r - 1], x.shape[r - 2]))
    return ctx.error("det needs square matrices, got rank " + std::to_string(r));
  DType dt = ctx.outputType(0).dtype;
  if (!isFloat(dt)) return ctx.error("det needs a floating-point input");
  // f16/bf16 go through the f64 kernel: the interpreter computes in double and rounds once.
  DType kt = dt == DType::F32 || dt == DType::F64 ? dt : DType::F64;
  if (kt != dt)
    x = ctx.pointwise(kt, x.shape, [&](BodyBuilder &b, const std::vector<SymInt> &i) {
      return b.cast(b.load(x, i), kt);
    });
  x = ctx.realize(x);
  std::vector<SymInt> outShape(x.shape.begin(), x.shape.end() - 2);
  TensorRef y =
      ctx.externCall(kernels::cpuSymbol(kernels::ExternId::Det, kt),
                     {nodeArg(x), outArg(0), intArg(symNumel(outShape)), intArg(x.shape[r - 1])},
                     {{kt, outShape}})[0];
  if (kt != dt)
    y = ctx.pointwise(dt, outShape, [&](BodyBuilder &b, const std::vector<SymInt> &i) {
      return b.cast(b.load(y, i), dt);
    });
  ctx.setOutput(0, y);
  return okStatus();
}

} // namespace

void registerLinalgLowerings(LowerRegistry &r) {
  r.add(OpKind::MatMul, lowerMatMul);
  r.add(OpKind::MatMulInteger, lowerMatMulInteger);
  r.add(OpKind::QLinearMatMul, lowerQLinearMatMul);
  r.add(OpKind::Gemm, lowerGemm);
  r.add(OpKind::Einsum, lowerEinsum);
  r.add(OpKind::Det, lowerDet);
  linalg::registerLinalgConvLowerings(r);
  linalg::registerLinalgAttentionLowerings(r);
  spatial::registerLinalgPoolLowerings(r);
  spatial::registerLinalgResizeLowerings(r);
  spatial::registerLinalgSampleLowerings(r);
  spatial::registerLinalgRnnLowerings(r);
}

} // namespace coil::loop
