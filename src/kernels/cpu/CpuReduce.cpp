// CPU kernels of the Reduce* ops whose axes are only known at run time (allocating calls):
// the output shape follows from the axes, so the output is allocated here. The arithmetic is
// the reference interpreter's (interp/kernels/Reduction.cpp): floats accumulate in double and
// round once when stored; integers are exact modulo 2^64 and wrap to the type.
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/CpuKernelsImpl.h"

#include <cmath>
#include <limits>
#include <new>
#include <string_view>
#include <type_traits>
#include <vector>

namespace coil::cpu {
namespace {

constexpr int64_t kMaxRank = 8;

enum Kind : int64_t {
  kSum = 0,
  kSumSquare = 1,
  kL1 = 2,
  kL2 = 3,
  kLogSum = 4,
  kLogSumExp = 5,
  kMax = 6,
  kMin = 7,
  kMean = 8,
  kProd = 9
};

/// The 64-bit pattern of an integer element: sign-extended for signed types.
template <typename E> uint64_t widen(typename E::S v) {
  using S = typename E::S;
  if constexpr (std::is_signed_v<S>)
    return uint64_t(int64_t(v));
  else
    return uint64_t(v);
}

/// Identity of an empty Max (`max`) or Min reduction: the lowest / highest value of the type.
template <typename E> uint64_t intIdentity(bool max, bool isBool) {
  using S = typename E::S;
  if (isBool) return max ? 0 : 1;
  return widen<E>(max ? std::numeric_limits<S>::lowest() : std::numeric_limits<S>::max());
}

/// The reduction of x (dims `dims`, `rank` of them) over the dims flagged in `red` into y, whose
/// elements are laid out as x's shape with the reduced dims of extent 1.
template <typename E>
void reduceInto(const void *x, void *y, const int64_t *dims, const bool *red, int64_t rank,
                int64_t numel, int64_t nOut, int64_t count, int64_t kind, bool isBool) {
  // Row-major strides of the output (kept layout) for every input dim; 0 for reduced dims.
  int64_t ostride[kMaxRank] = {0}, s = 1;
  for (int64_t d = rank; d-- > 0;) {
    ostride[d] = red[d] ? 0 : s;
    if (!red[d]) s *= dims[d];
  }
  std::vector<int64_t> outIdx(static_cast<size_t>(numel));
  int64_t idx[kMaxRank] = {0}, o = 0;
  for (int64_t i = 0; i < numel; ++i) {
    outIdx[size_t(i)] = o;
    for (int64_t d = rank; d-- > 0;) {
      ++idx[d];
      o += ostride[d];
      if (idx[d] < dims[d]) break;
      o -= ostride[d] * idx[d];
      idx[d] = 0;
    }
  }
  if constexpr (E::kFloat) {
    const double inf = std::numeric_limits<double>::infinity();
    double init = kind == kProd                          ? 1.0
                  : (kind == kMax || kind == kLogSumExp) ? -inf
                  : kind == kMin                         ? inf
                                                         : 0.0;
    std::vector<double> acc(static_cast<size_t>(nOut), init);
    for (int64_t i = 0; i < numel; ++i) {
      double v = E::toDouble(load<E>(x, i));
      double &a = acc[size_t(outIdx[size_t(i)])];
      switch (kind) {
      case kSum:
      case kMean:
      case kLogSum:
        a += v;
        break;
      case kSumSquare:
      case kL2:
        a += v * v;
        break;
      case kL1:
        a += std::fabs(v);
        break;
      case kProd:
        a *= v;
        break;
      case kMax:
      case kLogSumExp:
        if (std::isnan(v) || v > a) a = std::isnan(a) ? a : v;
        break;
      case kMin:
        if (std::isnan(v) || v < a) a = std::isnan(a) ? a : v;
        break;
      default:
        break;
      }
    }
    if (kind == kLogSumExp) {
      std::vector<double> sum(static_cast<size_t>(nOut), 0.0);
      for (int64_t i = 0; i < numel; ++i) {
        size_t oi = size_t(outIdx[size_t(i)]);
        double m = acc[oi];
        if (std::isfinite(m)) sum[oi] += std::exp(E::toDouble(load<E>(x, i)) - m);
      }
      for (int64_t k = 0; k < nOut; ++k)
        if (std::isfinite(acc[size_t(k)])) acc[size_t(k)] += std::log(sum[size_t(k)]);
    }
    for (int64_t k = 0; k < nOut; ++k) {
      double a = acc[size_t(k)];
      if (kind == kMean)
        a = a / double(count);
      else if (kind == kL2)
        a = std::sqrt(a);
      else if (kind == kLogSum)
        a = std::log(a);
      store<E>(y, k, E::fromDouble(a));
    }
  } else {
    using S = typename E::S;
    bool uns = !std::is_signed_v<S>;
    uint64_t init = kind == kProd  ? 1
                    : kind == kMax ? intIdentity<E>(true, isBool)
                    : kind == kMin ? intIdentity<E>(false, isBool)
                                   : 0;
    std::vector<uint64_t> acc(static_cast<size_t>(nOut), init);
    auto less = [uns](uint64_t a, uint64_t b) { return uns ? a < b : int64_t(a) < int64_t(b); };
    for (int64_t i = 0; i < numel; ++i) {
      uint64_t v = widen<E>(load<E>(x, i));
      uint64_t &a = acc[size_t(outIdx[size_t(i)])];
      switch (kind) {
      case kSum:
      case kMean:
        a += v;
        break;
      case kSumSquare:
      case kL2:
        a += v * v;
        break;
      case kL1:
        a += (!uns && int64_t(v) < 0) ? uint64_t(0) - v : v;
        break;
      case kProd:
        a *= v;
        break;
      case kMax:
        if (less(a, v)) a = v;
        break;
      case kMin:
        if (less(v, a)) a = v;
        break;
      default:
        break;
      }
    }
    for (int64_t k = 0; k < nOut; ++k) {
      uint64_t a = acc[size_t(k)];
      if (kind == kMean) {
        if (count == 0)
          a = 0;
        else if (uns)
          a = a / uint64_t(count);
        else
          a = uint64_t(int64_t(a) / count);
      } else if (kind == kL2) {
        double r = std::sqrt(uns ? double(a) : double(int64_t(a)));
        // Truncated toward zero; out of int64's range (or NaN) gives INT64_MIN, as the x86
        // conversion the interpreter relies on does.
        a = r > -9.2233720368547758e18 && r < 9.2233720368547758e18
                ? uint64_t(int64_t(r))
                : uint64_t(std::numeric_limits<int64_t>::min());
      }
      store<E>(y, k, isBool ? S(a != 0) : S(a));
    }
  }
}

template <typename E>
int32_t reduceDyn(coil_alloc_fn alloc, void *actx, const void *x, const void *axesBuf, void **y,
                  int64_t *const outDims[kMaxRank], int64_t rank, const int64_t inDims[kMaxRank],
                  int64_t naxes, int64_t kind, bool keepdims, bool noop, bool isBool) {
  *y = nullptr;
  for (int64_t d = 0; d < kMaxRank; ++d) *outDims[d] = 0;
  if (rank < 0 || rank > kMaxRank)
    return fail("reduce: rank %lld is out of range [0, %lld]", ll(rank), ll(kMaxRank));
  if (naxes < 0) return fail("reduce: axis count %lld is negative", ll(naxes));
  if (kind < kSum || kind > kProd || (!E::kFloat && (kind == kLogSum || kind == kLogSumExp)))
    return fail("reduce: reduction kind %lld is not valid for this dtype", ll(kind));
  int64_t numel = 1;
  for (int64_t d = 0; d < rank; ++d)
    if (!mulSize(numel, inDims[d], &numel))
      return fail("reduce: dim %lld of size %lld is negative or overflows", ll(d), ll(inDims[d]));
  bool red[kMaxRank] = {false};
  bool copy = naxes == 0 && noop;
  if (naxes == 0)
    for (int64_t d = 0; d < rank; ++d) red[d] = !noop;
  for (int64_t i = 0; i < naxes; ++i) {
    int64_t a = load<I64T>(axesBuf, i);
    if (a < -rank || a >= rank)
      return fail("reduce: axis %lld is out of range for rank %lld", ll(a), ll(rank));
    int64_t n = a < 0 ? a + rank : a;
    if (red[n]) return fail("reduce: axis %lld appears more than once in axes", ll(a));
    red[n] = true;
  }
  int64_t nOut = 1, count = 1, orank = 0;
  int64_t shape[kMaxRank];
  for (int64_t d = 0; d < rank; ++d) {
    if (red[d]) {
      count *= inDims[d]; // divides numel's product: no overflow
      if (keepdims || copy) shape[orank++] = 1;
    } else {
      nOut *= inDims[d];
      shape[orank++] = inDims[d];
    }
  }
  if (copy) nOut = numel;
  int64_t bytes;
  if (!mulSize(nOut, int64_t(sizeof(typename E::S)), &bytes))
    return fail("reduce: %lld output elements overflow the byte count", ll(nOut));
  void *p = alloc ? alloc(actx, size_t(bytes)) : nullptr;
  *y = p; // the caller frees it, also when the call fails
  if (!p && bytes > 0)
    return fail("reduce: out of memory allocating the output (%lld bytes)", ll(bytes));
  try {
    if (copy) {
      for (int64_t i = 0; i < numel; ++i) store<E>(p, i, load<E>(x, i));
      for (int64_t d = 0; d < rank; ++d) shape[d] = inDims[d];
    } else {
      reduceInto<E>(x, p, inDims, red, rank, numel, nOut, count, kind, isBool);
    }
  } catch (const std::bad_alloc &) {
    return fail("reduce: out of memory for the workspace of %lld elements", ll(numel));
  }
  for (int64_t d = 0; d < kMaxRank; ++d) *outDims[d] = d < orank ? shape[d] : 1;
  return 0;
}

} // namespace
} // namespace coil::cpu

using namespace coil::cpu;

extern "C" {

#define COIL_CPU_DEFINE_REDUCE_DYN(S, E)                                                           \
  int32_t coil_cpu_reduce_dyn_##S(                                                                 \
      coil_alloc_fn alloc, void *alloc_ctx, const void *x, const void *axes, void **y,             \
      int64_t *y0, int64_t *y1, int64_t *y2, int64_t *y3, int64_t *y4, int64_t *y5, int64_t *y6,   \
      int64_t *y7, int64_t rank, int64_t d0, int64_t d1, int64_t d2, int64_t d3, int64_t d4,       \
      int64_t d5, int64_t d6, int64_t d7, int64_t naxes, int64_t kind, int64_t keepdims,           \
      int64_t noopWithEmptyAxes) {                                                                 \
    int64_t *const outs[8] = {y0, y1, y2, y3, y4, y5, y6, y7};                                     \
    const int64_t dims[8] = {d0, d1, d2, d3, d4, d5, d6, d7};                                      \
    return reduceDyn<E>(alloc, alloc_ctx, x, axes, y, outs, rank, dims, naxes, kind,               \
                        keepdims != 0, noopWithEmptyAxes != 0, std::string_view(#S) == "bool");    \
  }
COIL_CPU_FOR_EACH_DTYPE(COIL_CPU_DEFINE_REDUCE_DYN)
#undef COIL_CPU_DEFINE_REDUCE_DYN

} // extern "C"
