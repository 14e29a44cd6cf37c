// The inference registry and shared helpers.
#include "ir/Infer.h"

#include "support/Check.h"

#include <mutex>
#include <set>

namespace coil {

const TensorType &InferContext::input(size_t i) const {
  COIL_CHECK(hasInput(i)) << "input " << i << " of " << opName(node.op) << " is absent";
  return *inputTypes[i];
}

const std::optional<std::vector<SymInt>> &InferContext::intValue(size_t i) const {
  static const std::optional<std::vector<SymInt>> none;
  return i < intValues.size() ? intValues[i] : none;
}

namespace {
const InferRegistry &registry() {
  static const InferRegistry r = InferRegistry::filled({
#define COIL_OP_FAMILY(F) register##F##Infer,
#include "ir/OpFamilies.def"
#undef COIL_OP_FAMILY
  });
  return r;
}
} // namespace

InferFn inferFnFor(OpKind op) {
  return registry().get(op);
}

Expected<std::vector<TensorType>> inferNode(InferContext &ctx) {
  InferFn fn = inferFnFor(ctx.node.op);
  if (!fn)
    return Error::user("op '" + std::string(opName(ctx.node.op)) + "' is not supported",
                       ctx.node.loc);
  auto r = fn(ctx);
  if (!r.ok()) return r.error().withDefaultLoc(ctx.node.loc);
  if (r->size() > ctx.node.outputs.size())
    r->resize(ctx.node.outputs.size()); // optional trailing outputs not requested
  for (size_t i = 0; i < r->size(); ++i)
    if (Status st = checkElementCount((*r)[i]); !st.ok())
      return Error::user("output " + std::to_string(i) + " " + st.error().message(), ctx.node.loc);
  return r;
}

Status checkElementCount(const TensorType &t) {
  __int128 n = 1;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    const SymInt &dim = t.shape[d];
    int64_t v = 1;
    if (dim.isConstant()) {
      v = dim.constant();
    } else {
      // A dim without symbols is a constant whose folding overflowed int64.
      std::set<std::string> syms;
      dim.collectSymbols(syms);
      if (!syms.empty()) continue; // bounded when the symbols are bound (at run time)
      auto e = dim.evaluate({});
      if (!e.ok())
        return Error::user("of type " + t.str() + ": dim " + std::to_string(d) + " (" + dim.str() +
                           ") overflows int64");
      v = *e;
    }
    if (v < 0) continue; // a placeholder (-1: unknown), not a size
    n *= v;
    if (n > kMaxTensorElements)
      return Error::user("of type " + t.str() + " has more than 2^59 elements");
  }
  return okStatus();
}

Expected<std::vector<SymInt>> broadcastShapes(const std::vector<SymInt> &a,
                                              const std::vector<SymInt> &b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<SymInt> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const SymInt one(1);
    const SymInt &x = i < rank - a.size() ? one : a[i - (rank - a.size())];
    const SymInt &y = i < rank - b.size() ? one : b[i - (rank - b.size())];
    if (x == y || y == one) {
      out[i] = x;
    } else if (x == one) {
      out[i] = y;
    } else if (x.isConstant() && y.isConstant()) {
      auto str = [](const std::vector<SymInt> &s) {
        std::string r = "[";
        for (size_t k = 0; k < s.size(); ++k) r += (k ? ", " : "") + s[k].str();
        return r + "]";
      };
      return Error::user("shapes " + str(a) + " and " + str(b) + " cannot be broadcast (dim " +
                         x.str() + " vs " + y.str() + ")");
    } else if (x.isConstant()) {
      out[i] = x;
    } else if (y.isConstant()) {
      out[i] = y;
    } else {
      out[i] = max(x, y);
    }
  }
  return out;
}

Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank, const char *what) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1) || (rank == 0 && axis != 0 && axis != -1))
    return Error::user(std::string(what) + " " + std::to_string(axis) +
                       " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

bool isPermutation(const std::vector<int64_t> &perm, int64_t rank) {
  if (int64_t(perm.size()) != rank) return false;
  std::vector<bool> seen(perm.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[size_t(p)]) return false;
    seen[size_t(p)] = true;
  }
  return true;
}

SymInt symNumel(const std::vector<SymInt> &shape) {
  SymInt n = 1;
  for (const SymInt &d : shape) n = n * d;
  return n;
}

} // namespace coil
