// Type and shape inference for the Linalg family of ops (see Ops.def).
//
// Spatial output sizes are SymInt expressions (floor/ceil divisions of the input dims), so
// dynamic batch and spatial dims stay symbolic. The formulas mirror the reference kernels in
// interp/kernels/Linalg*.cpp, which compute the same sizes on concrete shapes.
#include "ir/Infer.h"
#include "ir/OpAttrs.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>

namespace coil {
namespace {

using Types = std::vector<TensorType>;
using Dims = std::vector<SymInt>;

std::string dimsStr(const Dims &d) {
  std::string r = "[";
  for (size_t i = 0; i < d.size(); ++i) r += (i ? ", " : "") + d[i].str();
  return r + "]";
}

/// Error when `a` and `b` are both constants and differ; otherwise the more informative one.
bool provablyDiffer(const SymInt &a, const SymInt &b) {
  return a.isConstant() && b.isConstant() && a.constant() != b.constant();
}

Status requireRank(const InferContext &ctx, size_t i, int64_t rank, const char *what) {
  const TensorType &t = ctx.input(i);
  if (t.rank() != rank)
    return ctx.error("input " + std::to_string(i) + " must have rank " + std::to_string(rank) +
                     " (" + what + "), got rank " + std::to_string(t.rank()));
  return okStatus();
}

Status requireSameDType(const InferContext &ctx, size_t a, size_t b) {
  if (ctx.input(a).dtype != ctx.input(b).dtype)
    return ctx.error("input " + std::to_string(b) + " must have the dtype of input " +
                     std::to_string(a) + " (" + std::string(dtypeName(ctx.input(a).dtype)) +
                     "), got " + std::string(dtypeName(ctx.input(b).dtype)));
  return okStatus();
}

Status requireFloat(const InferContext &ctx, size_t i) {
  if (!isFloat(ctx.input(i).dtype))
    return ctx.error("input " + std::to_string(i) + " must be a floating-point tensor, got " +
                     std::string(dtypeName(ctx.input(i).dtype)));
  return okStatus();
}

// --- MatMul family

/// Output dims of numpy matmul of shapes `a` and `b` (1-D operands promoted and removed).
Expected<Dims> matmulShape(const InferContext &ctx, Dims a, Dims b) {
  if (a.empty() || b.empty())
    return ctx.error("matmul operands must have rank >= 1, got ranks " + std::to_string(a.size()) +
                     " and " + std::to_string(b.size()));
  bool aVec = a.size() == 1, bVec = b.size() == 1;
  if (aVec) a.insert(a.begin(), SymInt(1));
  if (bVec) b.push_back(SymInt(1));
  const SymInt &k1 = a[a.size() - 1], &k2 = b[b.size() - 2];
  if (provablyDiffer(k1, k2))
    return ctx.error("inner dimensions differ: " + k1.str() + " vs " + k2.str());
  Dims ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  COIL_TRY(Dims out, broadcastShapes(ba, bb));
  if (!aVec) out.push_back(a[a.size() - 2]);
  if (!bVec) out.push_back(b[b.size() - 1]);
  return out;
}

Expected<Types> inferMatMul(InferContext &ctx) {
  COIL_TRY_STATUS(requireSameDType(ctx, 0, 1));
  if (ctx.input(0).dtype == DType::Bool) return ctx.error("matmul does not accept bool tensors");
  COIL_TRY(Dims out, matmulShape(ctx, ctx.input(0).shape, ctx.input(1).shape));
  return Types{{ctx.input(0).dtype, out}};
}

Status requireQuantType(const InferContext &ctx, size_t i) {
  DType t = ctx.input(i).dtype;
  if (t != DType::U8 && t != DType::I8)
    return ctx.error("input " + std::to_string(i) + " must be u8 or i8, got " +
                     std::string(dtypeName(t)));
  return okStatus();
}

Expected<Types> inferMatMulInteger(InferContext &ctx) {
  COIL_TRY_STATUS(requireQuantType(ctx, 0));
  COIL_TRY_STATUS(requireQuantType(ctx, 1));
  COIL_TRY(Dims out, matmulShape(ctx, ctx.input(0).shape, ctx.input(1).shape));
  return Types{{DType::I32, out}};
}

Expected<Types> inferQLinearMatMul(InferContext &ctx) {
  if (ctx.numInputs() < 8)
    return ctx.error("QLinearMatMul needs 8 inputs, got " + std::to_string(ctx.numInputs()));
  COIL_TRY_STATUS(requireQuantType(ctx, 0));
  COIL_TRY_STATUS(requireQuantType(ctx, 3));
  COIL_TRY_STATUS(requireQuantType(ctx, 7));
  COIL_TRY(Dims out, matmulShape(ctx, ctx.input(0).shape, ctx.input(3).shape));
  return Types{{ctx.input(7).dtype, out}};
}

Expected<Types> inferGemm(InferContext &ctx) {
  COIL_TRY_STATUS(requireSameDType(ctx, 0, 1));
  COIL_TRY_STATUS(requireRank(ctx, 0, 2, "matrix A"));
  COIL_TRY_STATUS(requireRank(ctx, 1, 2, "matrix B"));
  const Attrs &at = ctx.node.attrs;
  bool ta = at.getInt("transA", 0) != 0, tb = at.getInt("transB", 0) != 0;
  const Dims &a = ctx.input(0).shape, &b = ctx.input(1).shape;
  SymInt m = ta ? a[1] : a[0], k1 = ta ? a[0] : a[1];
  SymInt k2 = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
  if (provablyDiffer(k1, k2))
    return ctx.error("inner dimensions differ: " + k1.str() + " vs " + k2.str());
  Dims out{m, n};
  if (ctx.hasInput(2)) {
    COIL_TRY_STATUS(requireSameDType(ctx, 0, 2));
    const Dims &c = ctx.input(2).shape;
    if (c.size() > 2)
      return ctx.error("input 2 (C) must have rank <= 2, got rank " + std::to_string(c.size()));
    for (size_t i = 0; i < c.size(); ++i) {
      const SymInt &o = out[2 - c.size() + i];
      if (provablyDiffer(c[i], o) && c[i] != SymInt(1))
        return ctx.error("input 2 (C) of shape " + dimsStr(c) +
                         " cannot be broadcast to the output shape " + dimsStr(out));
    }
  }
  return Types{{ctx.input(0).dtype, out}};
}

// --- Convolution and pooling geometry (the rules are in ir/OpAttrs.h)

Expected<Types> inferConvLike(InferContext &ctx, size_t wIdx, size_t bIdx, DType outType) {
  const TensorType &x = ctx.input(0), &wt = ctx.input(wIdx);
  COIL_TRY(size_t nd, spatialDims(x.rank()));
  if (wt.rank() != x.rank()) {
    std::string sp = nd == 1 ? "k" : nd == 2 ? "kH, kW" : nd == 3 ? "kD, kH, kW" : "k...";
    return ctx.error("input " + std::to_string(wIdx) + " must have rank " +
                     std::to_string(x.rank()) + " (weights [M, C/group, " + sp + "]), got rank " +
                     std::to_string(wt.rank()));
  }
  COIL_TRY(WindowAttrs w, decodeWindow(ctx.node, nd));
  int64_t group = w.group;
  const SymInt &c = x.shape[1], &cg = wt.shape[1], &m = wt.shape[0];
  if (c.isConstant() && c.constant() % group != 0)
    return ctx.error("group " + std::to_string(group) + " does not divide the " + c.str() +
                     " input channels");
  if (m.isConstant() && m.constant() % group != 0)
    return ctx.error("group " + std::to_string(group) + " does not divide the " + m.str() +
                     " output channels");
  if (c.isConstant() && cg.isConstant() && cg.constant() * group != c.constant())
    return ctx.error("weights have " + cg.str() + " input channels per group, expected " +
                     std::to_string(c.constant() / group) + " (" + c.str() +
                     " input channels / group " + std::to_string(group) + ")");
  Dims kernel(wt.shape.begin() + 2, wt.shape.end());
  if (const auto &ks = w.kernelShape) {
    for (size_t i = 0; i < nd; ++i) {
      if (provablyDiffer(kernel[i], SymInt((*ks)[i])))
        return ctx.error("kernel_shape " + std::to_string((*ks)[i]) +
                         " differs from the weight dim " + kernel[i].str());
      kernel[i] = (*ks)[i];
    }
  }
  if (ctx.hasInput(bIdx)) {
    const TensorType &b = ctx.input(bIdx);
    if (b.rank() != 1 || provablyDiffer(b.shape[0], m))
      return ctx.error("bias must have shape [" + m.str() + "], got " + dimsStr(b.shape));
  }
  Dims out{x.shape[0], m};
  for (size_t i = 0; i < nd; ++i) {
    COIL_TRY(WindowDim d, windowDim(w, i, x.shape[2 + i], kernel[i]));
    out.push_back(d.out);
  }
  return Types{{outType, out}};
}

Expected<Types> inferConv(InferContext &ctx) {
  COIL_TRY_STATUS(requireFloat(ctx, 0));
  COIL_TRY_STATUS(requireSameDType(ctx, 0, 1));
  if (ctx.hasInput(2)) COIL_TRY_STATUS(requireSameDType(ctx, 0, 2));
  return inferConvLike(ctx, 1, 2, ctx.input(0).dtype);
}

Expected<Types> inferConvInteger(InferContext &ctx) {
  COIL_TRY_STATUS(requireQuantType(ctx, 0));
  COIL_TRY_STATUS(requireQuantType(ctx, 1));
  return inferConvLike(ctx, 1, 99, DType::I32);
}

Expected<Types> inferQLinearConv(InferContext &ctx) {
  if (ctx.numInputs() < 8)
    return ctx.error("QLinearConv needs at least 8 inputs, got " + std::to_string(ctx.numInputs()));
  COIL_TRY_STATUS(requireQuantType(ctx, 0));
  COIL_TRY_STATUS(requireQuantType(ctx, 3));
  COIL_TRY_STATUS(requireQuantType(ctx, 7));
  return inferConvLike(ctx, 3, 8, ctx.input(7).dtype);
}

Expected<Types> inferConvTranspose(InferContext &ctx) {
  COIL_TRY_STATUS(requireFloat(ctx, 0));
  COIL_TRY_STATUS(requireSameDType(ctx, 0, 1));
  const TensorType &x = ctx.input(0), &wt = ctx.input(1);
  COIL_TRY(size_t nd, spatialDims(x.rank()));
  if (wt.rank() != x.rank())
    return ctx.error("input 1 must have rank " + std::to_string(x.rank()) +
                     " (weights [C, M/group, k...]), got rank " + std::to_string(wt.rank()));
  COIL_TRY(WindowAttrs w, decodeWindow(ctx.node, nd));
  int64_t group = w.group;
  const SymInt &c = x.shape[1];
  if (c.isConstant() && c.constant() % group != 0)
    return ctx.error("group " + std::to_string(group) + " does not divide the " + c.str() +
                     " input channels");
  if (provablyDiffer(c, wt.shape[0]))
    return ctx.error("weights have " + wt.shape[0].str() + " input channels, expected " + c.str());
  SymInt m = wt.shape[1] * group;
  if (ctx.hasInput(2)) {
    const TensorType &b = ctx.input(2);
    if (b.rank() != 1 || provablyDiffer(b.shape[0], m))
      return ctx.error("bias must have shape [" + m.str() + "], got " + dimsStr(b.shape));
  }
  Dims kernel(wt.shape.begin() + 2, wt.shape.end());
  if (const auto &ks = w.kernelShape)
    for (size_t i = 0; i < nd; ++i) kernel[i] = (*ks)[i];
  Dims out{x.shape[0], m};
  for (size_t i = 0; i < nd; ++i) {
    COIL_TRY(WindowDim d, convTransposeDim(w, i, x.shape[2 + i], kernel[i]));
    out.push_back(d.out);
  }
  return Types{{x.dtype, out}};
}

Expected<Types> inferPool(InferContext &ctx) {
  DType dt = ctx.input(0).dtype;
  if (!(ctx.node.op == OpKind::MaxPool && (dt == DType::U8 || dt == DType::I8)))
    COIL_TRY_STATUS(requireFloat(ctx, 0));
  const TensorType &x = ctx.input(0);
  COIL_TRY(size_t nd, spatialDims(x.rank()));
  COIL_TRY(WindowAttrs w, decodePoolWindow(ctx.node, nd));
  Dims out{x.shape[0], x.shape[1]};
  for (size_t i = 0; i < nd; ++i) {
    COIL_TRY(WindowDim d, windowDim(w, i, x.shape[2 + i], SymInt((*w.kernelShape)[i])));
    out.push_back(d.out);
  }
  Types r{{x.dtype, out}};
  if (ctx.node.op == OpKind::MaxPool) r.push_back({DType::I64, out});
  return r;
}

Expected<Types> inferGlobalPool(InferContext &ctx) {
  COIL_TRY_STATUS(requireFloat(ctx, 0));
  const TensorType &x = ctx.input(0);
  if (x.rank() < 2)
    return ctx.error("input 0 must have rank >= 2 ([N, C, spatial...]), got rank " +
                     std::to_string(x.rank()));
  Dims out{x.shape[0], x.shape[1]};
  out.resize(x.shape.size(), SymInt(1));
  return Types{{x.dtype, out}};
}

Expected<Types> inferMaxUnpool(InferContext &ctx) {
  COIL_TRY_STATUS(requireFloat(ctx, 0));
  const TensorType &x = ctx.input(0), &ind = ctx.input(1);
  COIL_TRY(size_t nd, spatialDims(x.rank()));
  if (ind.dtype != DType::I64)
    return ctx.error("input 1 (indices) must be i64, got " + std::string(dtypeName(ind.dtype)));
  if (ctx.hasInput(2)) {
    const auto &v = ctx.intValue(2);
    if (v && v->size() == size_t(x.rank())) return Types{{x.dtype, *v}};
    if (v)
      return ctx.error("output_shape must have " + std::to_string(x.rank()) + " values, got " +
                       std::to_string(v->size()));
    Dims out;
    for (int64_t i = 0; i < x.rank(); ++i) out.push_back(ctx.freshSymbol("unpool"));
    return Types{{x.dtype, out}};
  }
  COIL_TRY(WindowAttrs w, decodePoolWindow(ctx.node, nd));
  for (int64_t k : *w.kernelShape)
    if (k < 1) return ctx.error("kernel sizes must be positive, got " + std::to_string(k));
  Dims out{x.shape[0], x.shape[1]};
  for (size_t i = 0; i < nd; ++i) out.push_back(unpoolDim(w, i, x.shape[2 + i]));
  return Types{{x.dtype, out}};
}

// --- Resize

Expected<Types> inferResize(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  COIL_TRY(ResizeAttrs ra, decodeResize(ctx.node, x.rank()));
  const std::vector<int64_t> &axes = ra.axes;
  const std::string &policy = ra.policy;
  auto present = [&](size_t i) {
    return ctx.hasInput(i) && !(ctx.input(i).rank() == 1 && ctx.input(i).shape[0] == SymInt(0));
  };
  bool hasScales = present(2), hasSizes = present(3);
  if (hasScales == hasSizes) return ctx.error("exactly one of scales and sizes must be given");
  size_t n = axes.size();
  Dims out = x.shape;
  auto unknown = [&] {
    for (int64_t a : axes) out[size_t(a)] = ctx.freshSymbol("resize");
    return Types{{x.dtype, out}};
  };
  if (hasScales) {
    const TensorType &st = ctx.input(2);
    if (st.rank() != 1 || provablyDiffer(st.shape[0], SymInt(int64_t(n))))
      return ctx.error("scales must have " + std::to_string(n) + " values, got shape " +
                       dimsStr(st.shape));
    const Tensor *sc = ctx.constants.size() > 2 ? ctx.constants[2] : nullptr;
    if (!sc) return unknown();
    std::vector<double> s = sc->toDoubles();
    for (size_t i = 0; i < n; ++i) {
      if (!(s[i] > 0) || !std::isfinite(s[i]) || s[i] > 1e12)
        return ctx.error("scales must be positive, got " + std::to_string(s[i]));
      SymInt in = x.shape[size_t(axes[i])];
      double sf = double(float(s[i]));
      if (sf == 1.0) continue;
      if (!in.isConstant()) {
        double ip;
        if (std::modf(sf, &ip) == 0.0) { // integer scale: exact symbolic product
          out[size_t(axes[i])] = in * int64_t(ip);
          continue;
        }
        out[size_t(axes[i])] = ctx.freshSymbol("resize");
        continue;
      }
      out[size_t(axes[i])] = int64_t(std::floor(double(in.constant()) * sf));
    }
    return Types{{x.dtype, out}};
  }
  const TensorType &szt = ctx.input(3);
  if (szt.rank() != 1 || provablyDiffer(szt.shape[0], SymInt(int64_t(n))))
    return ctx.error("sizes must have " + std::to_string(n) + " values, got shape " +
                     dimsStr(szt.shape));
  const auto &sv = ctx.intValue(3);
  if (!sv || sv->size() != n) return unknown();
  if (policy == "stretch") {
    for (size_t i = 0; i < n; ++i) out[size_t(axes[i])] = (*sv)[i];
    return Types{{x.dtype, out}};
  }
  // Aspect-preserving: one scale for all axes, then rounded sizes (needs constants).
  std::vector<double> ratio;
  for (size_t i = 0; i < n; ++i) {
    const SymInt &in = x.shape[size_t(axes[i])];
    if (!in.isConstant() || !(*sv)[i].isConstant()) return unknown();
    ratio.push_back(double((*sv)[i].constant()) / double(in.constant()));
  }
  double scale = policy == "not_larger" ? *std::min_element(ratio.begin(), ratio.end())
                                        : *std::max_element(ratio.begin(), ratio.end());
  for (size_t i = 0; i < n; ++i)
    out[size_t(axes[i])] = int64_t(scale * double(x.shape[size_t(axes[i])].constant()) + 0.5);
  return Types{{x.dtype, out}};
}

// --- Depth/space rearrangements

Expected<Types> inferDepthToSpace(InferContext &ctx) {
  COIL_TRY_STATUS(requireRank(ctx, 0, 4, "[N, C, H, W]"));
  const TensorType &x = ctx.input(0);
  COIL_TRY(BlockAttrs ba, decodeBlock(ctx.node));
  int64_t b = ba.blocksize;
  const SymInt &c = x.shape[1];
  if (c.isConstant() && c.constant() % (b * b) != 0)
    return ctx.error("channels " + c.str() +
                     " must be divisible by blocksize^2 = " + std::to_string(b * b));
  return Types{{x.dtype, {x.shape[0], floorDiv(c, b * b), x.shape[2] * b, x.shape[3] * b}}};
}

Expected<Types> inferSpaceToDepth(InferContext &ctx) {
  COIL_TRY_STATUS(requireRank(ctx, 0, 4, "[N, C, H, W]"));
  const TensorType &x = ctx.input(0);
  COIL_TRY(BlockAttrs ba, decodeBlock(ctx.node));
  int64_t b = ba.blocksize;
  for (int i = 2; i < 4; ++i)
    if (x.shape[size_t(i)].isConstant() && x.shape[size_t(i)].constant() % b != 0)
      return ctx.error("spatial dim " + x.shape[size_t(i)].str() +
                       " must be divisible by blocksize " + std::to_string(b));
  return Types{
      {x.dtype,
       {x.shape[0], x.shape[1] * (b * b), floorDiv(x.shape[2], b), floorDiv(x.shape[3], b)}}};
}

// --- Einsum

Expected<Types> inferEinsum(InferContext &ctx) {
  COIL_TRY(EinsumEquation eq, decodeEinsum(ctx.node, ctx.numInputs()));
  std::vector<size_t> ranks;
  for (size_t t = 0; t < ctx.numInputs(); ++t) ranks.push_back(ctx.input(t).shape.size());
  COIL_TRY(EinsumLabels labels, einsumLabels(eq, ranks));
  std::map<int, SymInt> dimOf;
  Dims ell; // the ellipsis dims, broadcast across the operands
  for (size_t t = 0; t < ranks.size(); ++t) {
    const Dims &sh = ctx.input(t).shape;
    const std::vector<int> &l = labels.operands[t];
    Dims e;
    for (size_t d = 0; d < sh.size(); ++d) {
      if (l[d] >= 1000) {
        e.push_back(sh[d]);
        continue;
      }
      auto it = dimOf.find(l[d]);
      if (it == dimOf.end()) {
        dimOf[l[d]] = sh[d];
      } else if (it->second != sh[d]) {
        if (provablyDiffer(it->second, sh[d]) && it->second != SymInt(1) && sh[d] != SymInt(1))
          return ctx.error("einsum dim '" + einsumLabelName(l[d]) + "' has sizes " +
                           it->second.str() + " and " + sh[d].str());
        if (it->second == SymInt(1)) it->second = sh[d];
      }
    }
    COIL_TRY(ell, broadcastShapes(ell, e));
  }
  Dims out;
  for (int l : labels.output) out.push_back(l >= 1000 ? ell[size_t(l - 1000)] : dimOf.at(l));
  return Types{{ctx.input(0).dtype, out}};
}

// --- Remaining image ops

Expected<Types> inferCol2Im(InferContext &ctx) {
  const TensorType &x = ctx.input(0);
  if (x.rank() != 3)
    return ctx.error("input 0 must have rank 3 ([N, C*prod(block), L]), got rank " +
                     std::to_string(x.rank()));
  const auto &img = ctx.intValue(1), &blk = ctx.intValue(2);
  if (!img || !blk) { // sizes known only at run time
    const TensorType &it = ctx.input(1);
    if (it.rank() != 1 || !it.shape[0].isConstant())
      return ctx.error("image_shape must be a 1-D tensor of known length");
    Dims out{x.shape[0], ctx.freshSymbol("col2im")};
    for (int64_t i = 0; i < it.shape[0].constant(); ++i)
      out.push_back(img ? (*img)[size_t(i)] : ctx.freshSymbol("col2im"));
    return Types{{x.dtype, out}};
  }
  if (img->size() != blk->size())
    return ctx.error("image_shape and block_shape must have the same length, got " +
                     std::to_string(img->size()) + " and " + std::to_string(blk->size()));
  SymInt prod = 1;
  for (const SymInt &b : *blk) prod = prod * b;
  Dims out{x.shape[0], floorDiv(x.shape[1], prod)};
  out.insert(out.end(), img->begin(), img->end());
  return Types{{x.dtype, out}};
}

Expected<Types> inferGridSample(InferContext &ctx) {
  const TensorType &x = ctx.input(0), &g = ctx.input(1);
  if (x.rank() < 3)
    return ctx.error("input 0 must have rank >= 3, got rank " + std::to_string(x.rank()));
  if (g.rank() != x.rank())
    return ctx.error("grid must have rank " + std::to_string(x.rank()) + ", got rank " +
                     std::to_string(g.rank()));
  if (g.shape.back().isConstant() && g.shape.back().constant() != x.rank() - 2)
    return ctx.error("grid last dim must be " + std::to_string(x.rank() - 2) + ", got " +
                     g.shape.back().str());
  if (auto a = decodeGridSample(ctx.node); !a.ok()) return a.error();
  Dims out{x.shape[0], x.shape[1]};
  out.insert(out.end(), g.shape.begin() + 1, g.shape.end() - 1);
  return Types{{x.dtype, out}};
}

Expected<Types> inferAffineGrid(InferContext &ctx) {
  const TensorType &theta = ctx.input(0);
  const auto &sz = ctx.intValue(1);
  if (theta.rank() != 3)
    return ctx.error("theta must have rank 3, got rank " + std::to_string(theta.rank()));
  if (!sz) {
    if (ctx.input(1).rank() == 1 && ctx.input(1).shape[0].isConstant()) {
      int64_t n = ctx.input(1).shape[0].constant();
      if (n != 4 && n != 5)
        return ctx.error("size must have 4 or 5 values, got " + std::to_string(n));
      Dims out{ctx.freshSymbol("grid")};
      for (int64_t i = 2; i < n; ++i) out.push_back(ctx.freshSymbol("grid"));
      out.push_back(n - 2);
      return Types{{theta.dtype, out}};
    }
    return ctx.error("size must be a constant");
  }
  if (sz->size() != 4 && sz->size() != 5)
    return ctx.error("size must have 4 or 5 values, got " + std::to_string(sz->size()));
  Dims out{(*sz)[0]};
  out.insert(out.end(), sz->begin() + 2, sz->end());
  out.push_back(int64_t(sz->size() - 2));
  return Types{{theta.dtype, out}};
}

Expected<Types> inferRoiAlign(InferContext &ctx) {
  COIL_TRY_STATUS(requireRank(ctx, 0, 4, "[N, C, H, W]"));
  COIL_TRY_STATUS(requireRank(ctx, 1, 2, "rois [num_rois, 4]"));
  COIL_TRY(RoiAlignAttrs a, decodeRoiAlign(ctx.node));
  return Types{{ctx.input(0).dtype,
                {ctx.input(1).shape[0], ctx.input(0).shape[1], a.outHeight, a.outWidth}}};
}

Expected<Types> inferMaxRoiPool(InferContext &ctx) {
  COIL_TRY_STATUS(requireRank(ctx, 0, 4, "[N, C, H, W]"));
  COIL_TRY_STATUS(requireRank(ctx, 1, 2, "rois [num_rois, 5]"));
  auto ps = ctx.node.attrs.getInts("pooled_shape");
  if (ps.size() != 2)
    return ctx.error("pooled_shape must have 2 values, got " + std::to_string(ps.size()));
  return Types{{ctx.input(0).dtype, {ctx.input(1).shape[0], ctx.input(0).shape[1], ps[0], ps[1]}}};
}

Expected<Types> inferDet(InferContext &ctx) {
  COIL_TRY_STATUS(requireFloat(ctx, 0));
  const TensorType &x = ctx.input(0);
  if (x.rank() < 2)
    return ctx.error("input 0 must have rank >= 2, got rank " + std::to_string(x.rank()));
  const SymInt &a = x.shape[size_t(x.rank() - 2)], &b = x.shape[size_t(x.rank() - 1)];
  if (provablyDiffer(a, b))
    return ctx.error("matrices must be square, got " + a.str() + " x " + b.str());
  return Types{{x.dtype, Dims(x.shape.begin(), x.shape.end() - 2)}};
}

// --- Recurrent ops and rotary embeddings

Expected<Types> inferRecurrent(InferContext &ctx) {
  COIL_TRY_STATUS(requireFloat(ctx, 0));
  const TensorType &x = ctx.input(0), &r = ctx.input(2);
  if (x.rank() != 3)
    return ctx.error("input 0 must have rank 3 ([seq, batch, input]), got rank " +
                     std::to_string(x.rank()));
  if (ctx.input(1).rank() != 3 || r.rank() != 3) return ctx.error("W and R must have rank 3");
  COIL_TRY(RnnAttrs a, decodeRnn(ctx.node));
  SymInt dirs = a.dirs;
  SymInt hid = a.hiddenSize ? SymInt(*a.hiddenSize) : r.shape[2];
  bool batchFirst = a.layout != 0;
  SymInt seq = batchFirst ? x.shape[1] : x.shape[0], batch = batchFirst ? x.shape[0] : x.shape[1];
  Types out;
  if (batchFirst) {
    out.push_back({x.dtype, {batch, seq, dirs, hid}});
    out.push_back({x.dtype, {batch, dirs, hid}});
  } else {
    out.push_back({x.dtype, {seq, dirs, batch, hid}});
    out.push_back({x.dtype, {dirs, batch, hid}});
  }
  if (ctx.node.op == OpKind::LSTM) out.push_back(out.back());
  return out;
}

Expected<Types> inferRotaryEmbedding(InferContext &ctx) {
  COIL_TRY_STATUS(requireFloat(ctx, 0));
  const TensorType &x = ctx.input(0);
  if (x.rank() != 3 && x.rank() != 4)
    return ctx.error("input 0 must have rank 3 or 4, got rank " + std::to_string(x.rank()));
  return Types{x};
}

Expected<Types> inferAttention(InferContext &ctx) {
  COIL_TRY_STATUS(requireFloat(ctx, 0));
  const Attrs &at = ctx.node.attrs;
  const TensorType &q = ctx.input(0), &k = ctx.input(1), &v = ctx.input(2);
  if (q.rank() != k.rank() || q.rank() != v.rank() || (q.rank() != 3 && q.rank() != 4))
    return ctx.error("Q, K and V must all have rank 3 or all rank 4, got ranks " +
                     std::to_string(q.rank()) + ", " + std::to_string(k.rank()) + ", " +
                     std::to_string(v.rank()));
  SymInt b = q.shape[0], hq, sq, hk, sk, dk, dv;
  if (q.rank() == 4) {
    hq = q.shape[1], sq = q.shape[2], hk = k.shape[1], sk = k.shape[2], dk = k.shape[3];
    dv = v.shape[3];
  } else {
    int64_t qh = at.getInt("q_num_heads", 0), kh = at.getInt("kv_num_heads", 0);
    if (qh < 1 || kh < 1)
      return ctx.error("q_num_heads and kv_num_heads are required for 3-D inputs");
    hq = qh, sq = q.shape[1], hk = kh, sk = k.shape[1];
    dk = floorDiv(k.shape[2], kh), dv = floorDiv(v.shape[2], kh);
  }
  SymInt total = sk;
  if (ctx.hasInput(4)) total = ctx.input(4).shape.size() == 4 ? ctx.input(4).shape[2] + sk : total;
  Dims y = q.rank() == 4 ? Dims{b, hq, sq, dv} : Dims{b, sq, hq * dv};
  return Types{{q.dtype, y},
               {k.dtype, {b, hk, total, dk}},
               {v.dtype, {b, hk, total, dv}},
               {q.dtype, {b, hq, sq, total}}};
}

} // namespace

void registerLinalgInfer(InferRegistry &r) {
  r.add(OpKind::MatMul, inferMatMul);
  r.add(OpKind::MatMulInteger, inferMatMulInteger);
  r.add(OpKind::QLinearMatMul, inferQLinearMatMul);
  r.add(OpKind::Gemm, inferGemm);
  r.add(OpKind::Conv, inferConv);
  r.add(OpKind::ConvInteger, inferConvInteger);
  r.add(OpKind::QLinearConv, inferQLinearConv);
  r.add(OpKind::ConvTranspose, inferConvTranspose);
  r.add(OpKind::MaxPool, inferPool);
  r.add(OpKind::AveragePool, inferPool);
  r.add(OpKind::LpPool, inferPool);
  r.add(OpKind::GlobalAveragePool, inferGlobalPool);
  r.add(OpKind::GlobalMaxPool, inferGlobalPool);
  r.add(OpKind::GlobalLpPool, inferGlobalPool);
  r.add(OpKind::MaxUnpool, inferMaxUnpool);
  r.add(OpKind::Resize, inferResize);
  r.add(OpKind::DepthToSpace, inferDepthToSpace);
  r.add(OpKind::SpaceToDepth, inferSpaceToDepth);
  r.add(OpKind::Einsum, inferEinsum);
  r.add(OpKind::Col2Im, inferCol2Im);
  r.add(OpKind::Det, inferDet);
  r.add(OpKind::Attention, inferAttention);
  r.add(OpKind::RNN, inferRecurrent);
  r.add(OpKind::GRU, inferRecurrent);
  r.add(OpKind::LSTM, inferRecurrent);
  r.add(OpKind::RotaryEmbedding, inferRotaryEmbedding);
  r.add(OpKind::GridSample, inferGridSample);
  r.add(OpKind::AffineGrid, inferAffineGrid);
  r.add(OpKind::RoiAlign, inferRoiAlign);
  r.add(OpKind::MaxRoiPool, inferMaxRoiPool);
}

} // namespace coil
