// The kernel registry and shared helpers.
#include "interp/Kernel.h"

#include "support/Check.h"

#include <mutex>

namespace coil {

const Tensor &KernelContext::input(size_t i) const {
  COIL_CHECK(hasInput(i)) << "input " << i << " of " << opName(node.op) << " is absent";
  return *inputs[i];
}

KernelFn kernelFor(OpKind op) {
  static const KernelRegistry r = KernelRegistry::filled({
#define COIL_OP_FAMILY(F) register##F##Kernels,
#include "ir/OpFamilies.def"
#undef COIL_OP_FAMILY
  });
  return r.get(op);
}

Status checkOutputSize(const KernelContext &ctx, const Shape &shape) {
  long double n = 1;
  for (int64_t d : shape) n *= (long double)d;
  if (n > (long double)kMaxInterpElements)
    return ctx.error("output shape " + shapeStr(shape) + " is too large (more than 2^36 elements)");
  return okStatus();
}

Expected<Shape> broadcastConcrete(const Shape &a, const Shape &b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t x = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t y = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (x != y && x != 1 && y != 1)
      return Error::user("shapes " + shapeStr(a) + " and " + shapeStr(b) + " cannot be broadcast");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

std::vector<int64_t> broadcastIndex(const Shape &in, const Shape &out) {
  COIL_CHECK(in.size() <= out.size())
      << "broadcastIndex: rank " << in.size() << " > " << out.size();
  size_t off = out.size() - in.size();
  std::vector<int64_t> inStrides = contiguousStrides(in);
  // Effective stride per output dim: 0 where the input dim is broadcast.
  std::vector<int64_t> st(out.size(), 0);
  for (size_t i = 0; i < in.size(); ++i) st[i + off] = in[i] == 1 ? 0 : inStrides[i];
  int64_t n = numelOf(out);
  std::vector<int64_t> map(static_cast<size_t>(n));
  std::vector<int64_t> idx(out.size(), 0);
  int64_t cur = 0;
  for (int64_t f = 0; f < n; ++f) {
    map[size_t(f)] = cur;
    for (int64_t d = int64_t(out.size()) - 1; d >= 0; --d) { // odometer increment
      if (++idx[size_t(d)] < out[size_t(d)]) {
        cur += st[size_t(d)];
        break;
      }
      cur -= st[size_t(d)] * (out[size_t(d)] - 1);
      idx[size_t(d)] = 0;
    }
  }
  return map;
}

void unravelIndex(int64_t flat, const Shape &shape, std::vector<int64_t> &idx) {
  idx.resize(shape.size());
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    int64_t s = shape[size_t(d)];
    idx[size_t(d)] = s ? flat % s : 0;
    flat = s ? flat / s : 0;
  }
}

} // namespace coil
