// CPU kernels for scans (CumSum, CumProd), TopK and the ops with data-dependent output sizes
// (NonZero, Unique, NonMaxSuppression).
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/CpuKernelsImpl.h"

#include <algorithm>
#include <new>
#include <numeric>
#include <vector>

namespace coil::cpu {
namespace {

template <typename E, bool Prod>
int32_t scan(const void *x, void *y, int64_t outer, int64_t len, int64_t inner, bool exclusive,
             bool reverse) {
  int64_t all, lines;
  if (!mulSizes({outer, len, inner}, &all) || !mulSize(outer, inner, &lines))
    return fail("%s: sizes outer %lld, len %lld, inner %lld are negative or overflow",
                Prod ? "cumprod" : "cumsum", ll(outer), ll(len), ll(inner));
  if (all == 0) return 0;
#pragma omp parallel for schedule(static) if (all > 65536)
  for (int64_t line = 0; line < lines; ++line) {
    int64_t o = line / inner, i = line % inner;
    double accF = Prod ? 1.0 : 0.0;
    uint64_t accI = Prod ? 1 : 0;
    for (int64_t step = 0; step < len; ++step) {
      int64_t k = reverse ? len - 1 - step : step, idx = (o * len + k) * inner + i;
      auto v = load<E>(x, idx);
      if constexpr (E::kFloat) {
        if (exclusive) store<E>(y, idx, E::fromDouble(accF));
        accF = Prod ? accF * E::toDouble(v) : accF + E::toDouble(v);
        if (!exclusive) store<E>(y, idx, E::fromDouble(accF));
      } else {
        using S = typename E::S;
        if (exclusive) store<E>(y, idx, S(accI));
        // Sign-extend signed values, then wrap modulo 2^64.
        uint64_t u = std::is_signed_v<S> ? uint64_t(int64_t(v)) : uint64_t(v);
        accI = Prod ? accI * u : accI + u;
        if (!exclusive) store<E>(y, idx, S(accI));
      }
    }
  }
  return 0;
}

template <typename E>
int32_t topk(const void *x, void *values, void *indices, int64_t outer, int64_t len, int64_t inner,
             int64_t k, bool largest) {
  int64_t all, lines;
  if (!mulSizes({outer, len, inner}, &all) || !mulSize(outer, inner, &lines))
    return fail("topk: sizes outer %lld, len %lld, inner %lld are negative or overflow", ll(outer),
                ll(len), ll(inner));
  if (k < 0 || k > len)
    return fail("topk: k %lld is out of range [0, %lld] (the size of the axis)", ll(k), ll(len));
  bool outOfMemory = false;
#pragma omp parallel for schedule(dynamic, 16) if (lines > 1 && all > 16384)
  for (int64_t line = 0; line < lines; ++line) {
    int64_t o = line / inner, i = line % inner;
    std::vector<int64_t> order;
    try {
      order.resize(static_cast<size_t>(len));
    } catch (const std::bad_alloc &) {
#pragma omp atomic write
      outOfMemory = true; // reported below (never an exception out of here)
      continue;
    }
    std::iota(order.begin(), order.end(), 0);
    auto at = [&](int64_t j) { return load<E>(x, (o * len + j) * inner + i); };
    auto before = [&](int64_t a, int64_t b) {
      int c = compareValues<E>(at(a), at(b));
      if (c != 0) return largest ? c > 0 : c < 0;
      return a < b;
    };
    // Ties are broken by index, so the order is strict and partial_sort gives the ONNX answer.
    std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
    for (int64_t j = 0; j < k; ++j) {
      int64_t dst = (o * k + j) * inner + i;
      store<E>(values, dst, at(order[size_t(j)]));
      store<I64T>(indices, dst, order[size_t(j)]);
    }
  }
  if (outOfMemory) return fail("topk: out of memory sorting a line of %lld elements", ll(len));
  return 0;
}

/// Allocates `bytes` through the runtime; NULL when the allocator fails (bytes > 0).
void *allocate(coil_alloc_fn alloc, void *ctx, int64_t bytes) {
  if (!alloc) return nullptr;
  return alloc(ctx, size_t(bytes));
}

/// outer/len/inner of a shape buffer around a run-time axis; the status of fail when out of
/// range.
int32_t splitDynamic(const char *op, const void *axisBuf, const void *shapeBuf, int64_t rank,
                     bool axisI32, int64_t *outer, int64_t *len, int64_t *inner) {
  if (rank < 1) return fail("%s: a tensor of rank %lld has no axis", op, ll(rank));
  int64_t axis = axisI32 ? int64_t(load<I32T>(axisBuf, 0)) : load<I64T>(axisBuf, 0);
  if (axis < -rank || axis >= rank)
    return fail("%s: axis %lld is out of range for rank %lld", op, ll(axis), ll(rank));
  if (axis < 0) axis += rank;
  int64_t o = 1, in = 1;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t v = load<I64T>(shapeBuf, d);
    if (v < 0 || (d < axis && !mulSize(o, v, &o)) || (d > axis && !mulSize(in, v, &in)))
      return fail("%s: dim %lld of size %lld is negative or overflows", op, ll(d), ll(v));
  }
  *outer = o, *len = load<I64T>(shapeBuf, axis), *inner = in;
  return 0;
}

template <typename E, bool Prod>
int32_t scanDyn(const void *x, const void *axis, const void *shape, void *y, int64_t rank,
                bool axisI32, bool exclusive, bool reverse) {
  int64_t outer, len, inner;
  if (int32_t rc = splitDynamic(Prod ? "cumprod" : "cumsum", axis, shape, rank, axisI32, &outer,
                                &len, &inner))
    return rc;
  return scan<E, Prod>(x, y, outer, len, inner, exclusive, reverse);
}

template <typename E>
int32_t topkDyn(coil_alloc_fn alloc, void *actx, const void *x, const void *kBuf, void **values,
                void **indices, int64_t *count, int64_t outer, int64_t len, int64_t inner,
                bool largest) {
  *count = 0;
  *values = *indices = nullptr;
  int64_t k = load<I64T>(kBuf, 0), n, vb, ib;
  if (k < 0 || k > len)
    return fail("topk: k %lld is out of range [0, %lld] (the size of the axis)", ll(k), ll(len));
  if (!mulSizes({outer, k, inner}, &n) || !mulSize(n, int64_t(sizeof(typename E::S)), &vb) ||
      !mulSize(n, 8, &ib))
    return fail("topk: sizes outer %lld, k %lld, inner %lld are negative or overflow", ll(outer),
                ll(k), ll(inner));
  void *pv = allocate(alloc, actx, vb), *pi = allocate(alloc, actx, ib);
  *values = pv, *indices = pi;
  if (n > 0 && (!pv || !pi))
    return fail("topk: out of memory allocating the outputs (%lld and %lld bytes)", ll(vb), ll(ib));
  if (int32_t rc = topk<E>(x, pv, pi, outer, len, inner, k, largest)) return rc;
  *count = k;
  return 0;
}

template <typename E>
int32_t nonzero(coil_alloc_fn alloc, void *actx, const void *x, void **out, int64_t *count,
                int64_t numel) {
  *count = 0;
  *out = nullptr;
  if (numel < 0) return fail("nonzero: element count %lld is negative", ll(numel));
  int64_t hits = 0;
  for (int64_t i = 0; i < numel; ++i) hits += isNonZero<E>(load<E>(x, i));
  int64_t bytes;
  if (!mulSize(hits, 8, &bytes))
    return fail("nonzero: %lld indices overflow the byte count", ll(hits));
  void *p = allocate(alloc, actx, bytes);
  *out = p;
  if (!p && hits > 0)
    return fail("nonzero: out of memory allocating %lld indices (%lld bytes)", ll(hits), ll(bytes));
  int64_t j = 0;
  for (int64_t i = 0; i < numel; ++i)
    if (isNonZero<E>(load<E>(x, i))) store<I64T>(p, j++, i);
  *count = hits;
  return 0;
}

template <typename E>
int32_t unique(coil_alloc_fn alloc, void *actx, const void *x, void **y, void **indices,
               void **inverse, void **counts, int64_t *count, int64_t outer, int64_t len,
               int64_t inner, bool sorted) {
  *count = 0;
  *y = *indices = *inverse = *counts = nullptr;
  int64_t all, lenBytes;
  if (!mulSizes({outer, len, inner}, &all) || !mulSizes({outer, inner}, &all) ||
      !mulSizes({outer, len, inner, 8}, &all) || !mulSize(len, 8, &lenBytes))
    return fail("unique: sizes outer %lld, len %lld, inner %lld are negative or overflow",
                ll(outer), ll(len), ll(inner));
  auto cmpSlices = [&](int64_t a, int64_t b) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t e = 0; e < inner; ++e) {
        int c = compareValues<E>(load<E>(x, (o * len + a) * inner + e),
                                 load<E>(x, (o * len + b) * inner + e));
        if (c) return c;
      }
    return 0;
  };
  std::vector<int64_t> order(static_cast<size_t>(len));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return cmpSlices(a, b) < 0; });
  std::vector<int64_t> first, cnt, inv(static_cast<size_t>(len));
  for (size_t k = 0; k < order.size(); ++k) {
    if (k == 0 || cmpSlices(order[k - 1], order[k]) != 0) {
      first.push_back(order[k]);
      cnt.push_back(0);
    }
    ++cnt.back();
    inv[size_t(order[k])] = int64_t(first.size()) - 1;
  }
  int64_t u = int64_t(first.size());
  std::vector<int64_t> groupAt(static_cast<size_t>(u)), position(static_cast<size_t>(u));
  std::iota(groupAt.begin(), groupAt.end(), 0);
  if (!sorted)
    std::sort(groupAt.begin(), groupAt.end(),
              [&](int64_t a, int64_t b) { return first[size_t(a)] < first[size_t(b)]; });
  for (int64_t p = 0; p < u; ++p) position[size_t(groupAt[size_t(p)])] = p;
  using S = typename E::S;
  int64_t ySize = outer * u * inner; // u <= len: no overflow (checked above, with 8 bytes)
  void *py = allocate(alloc, actx, ySize * int64_t(sizeof(S)));
  void *pi = allocate(alloc, actx, u * 8);
  void *pv = allocate(alloc, actx, lenBytes);
  void *pc = allocate(alloc, actx, u * 8);
  *y = py, *indices = pi, *inverse = pv, *counts = pc;
  if ((!py && ySize > 0) || (!pi && u > 0) || (!pv && len > 0) || (!pc && u > 0))
    return fail("unique: out of memory allocating the outputs of %lld distinct values", ll(u));
  for (int64_t p = 0; p < u; ++p) {
    int64_t g = groupAt[size_t(p)], src = first[size_t(g)];
    store<I64T>(pi, p, src);
    store<I64T>(pc, p, cnt[size_t(g)]);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t e = 0; e < inner; ++e)
        store<E>(py, (o * u + p) * inner + e, load<E>(x, (o * len + src) * inner + e));
  }
  for (int64_t i = 0; i < len; ++i) store<I64T>(pv, i, position[size_t(inv[size_t(i)])]);
  *count = u;
  return 0;
}

struct Box {
  double xmin, ymin, xmax, ymax;
};

Box readBox(const float *b, bool center) {
  double a = b[0], c = b[1], e = b[2], f = b[3];
  if (center) return {a - e / 2, c - f / 2, a + e / 2, c + f / 2};
  return {std::min(c, f), std::min(a, e), std::max(c, f), std::max(a, e)};
}

bool suppresses(const Box &p, const Box &q, double iou) {
  double ix = std::min(p.xmax, q.xmax) - std::max(p.xmin, q.xmin);
  double iy = std::min(p.ymax, q.ymax) - std::max(p.ymin, q.ymin);
  if (ix <= 0 || iy <= 0) return false;
  double inter = ix * iy;
  double a1 = (p.xmax - p.xmin) * (p.ymax - p.ymin), a2 = (q.xmax - q.xmin) * (q.ymax - q.ymin);
  double uni = a1 + a2 - inter;
  if (a1 <= 0 || a2 <= 0 || uni <= 0) return false;
  return inter / uni > iou;
}

int32_t nms(coil_alloc_fn alloc, void *actx, const float *boxes, const float *scores, void **out,
            int64_t *count, int64_t nb, int64_t nc, int64_t n, int64_t maxPerClass, double iou,
            double scoreThreshold, bool filter, bool center) {
  *count = 0;
  *out = nullptr;
  int64_t all;
  if (!mulSizes({nb, nc, n}, &all) || !mulSizes({nb, n, 4}, &all))
    return fail("non max suppression: sizes batches %lld, classes %lld, boxes %lld are negative "
                "or overflow",
                ll(nb), ll(nc), ll(n));
  maxPerClass = std::max<int64_t>(0, maxPerClass);
  std::vector<int64_t> selected;
  std::vector<int64_t> cand;
  std::vector<Box> kept;
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t c = 0; c < nc; ++c) {
      const float *s = scores + (b * nc + c) * n;
      cand.clear();
      kept.clear();
      for (int64_t i = 0; i < n; ++i)
        if (!filter || double(s[i]) > scoreThreshold) cand.push_back(i);
      // Highest score first, equal scores keep the lower index first; NaN ranks lowest (a
      // strict weak order even then).
      auto key = [&](int64_t i) { return std::isnan(s[i]) ? -INFINITY : double(s[i]); };
      auto nanLow = [&](int64_t i, int64_t j) {
        bool ni = std::isnan(s[i]), nj = std::isnan(s[j]);
        if (ni || nj) return !ni && nj;
        return key(i) > key(j);
      };
      std::stable_sort(cand.begin(), cand.end(), nanLow);
      for (int64_t i : cand) {
        if (int64_t(kept.size()) >= maxPerClass) break;
        Box bx = readBox(boxes + (b * n + i) * 4, center);
        if (std::none_of(kept.begin(), kept.end(),
                         [&](const Box &k) { return suppresses(bx, k, iou); })) {
          kept.push_back(bx);
          selected.insert(selected.end(), {b, c, i});
        }
      }
    }
  int64_t m = int64_t(selected.size()) / 3;
  void *p = allocate(alloc, actx, m * 24);
  *out = p;
  if (!p && m > 0)
    return fail("non max suppression: out of memory allocating %lld selected boxes", ll(m));
  if (m > 0) std::memcpy(p, selected.data(), size_t(m) * 24);
  *count = m;
  return 0;
}

} // namespace
} // namespace coil::cpu

using namespace coil::cpu;

extern "C" {

#define COIL_CPU_DEFINE_NUMERIC(S, E)                                                              \
  int32_t coil_cpu_cumsum_##S(const void *x, void *y, int64_t outer, int64_t len, int64_t inner,   \
                              int64_t exclusive, int64_t reverse) {                                \
    return scan<E, false>(x, y, outer, len, inner, exclusive != 0, reverse != 0);                  \
  }                                                                                                \
  int32_t coil_cpu_cumprod_##S(const void *x, void *y, int64_t outer, int64_t len, int64_t inner,  \
                               int64_t exclusive, int64_t reverse) {                               \
    return scan<E, true>(x, y, outer, len, inner, exclusive != 0, reverse != 0);                   \
  }                                                                                                \
  int32_t coil_cpu_topk_##S(const void *x, void *values, void *indices, int64_t outer,             \
                            int64_t len, int64_t inner, int64_t k, int64_t largest) {              \
    return topk<E>(x, values, indices, outer, len, inner, k, largest != 0);                        \
  }
COIL_CPU_FOR_EACH_NUMERIC(COIL_CPU_DEFINE_NUMERIC)
#undef COIL_CPU_DEFINE_NUMERIC

#define COIL_CPU_DEFINE_NUMERIC_DYN(S, E)                                                          \
  int32_t coil_cpu_cumsum_dyn_##S(const void *x, const void *axis, const void *shape, void *y,     \
                                  int64_t rank, int64_t axisIsI32, int64_t exclusive,              \
                                  int64_t reverse) {                                               \
    return scanDyn<E, false>(x, axis, shape, y, rank, axisIsI32 != 0, exclusive != 0,              \
                             reverse != 0);                                                        \
  }                                                                                                \
  int32_t coil_cpu_cumprod_dyn_##S(const void *x, const void *axis, const void *shape, void *y,    \
                                   int64_t rank, int64_t axisIsI32, int64_t exclusive,             \
                                   int64_t reverse) {                                              \
    return scanDyn<E, true>(x, axis, shape, y, rank, axisIsI32 != 0, exclusive != 0,               \
                            reverse != 0);                                                         \
  }                                                                                                \
  int32_t coil_cpu_topk_dyn_##S(coil_alloc_fn alloc, void *alloc_ctx, const void *x,               \
                                const void *k, void **values, void **indices, int64_t *count,      \
                                int64_t outer, int64_t len, int64_t inner, int64_t largest) {      \
    return topkDyn<E>(alloc, alloc_ctx, x, k, values, indices, count, outer, len, inner,           \
                      largest != 0);                                                               \
  }
COIL_CPU_FOR_EACH_NUMERIC(COIL_CPU_DEFINE_NUMERIC_DYN)
#undef COIL_CPU_DEFINE_NUMERIC_DYN

#define COIL_CPU_DEFINE_DYNAMIC(S, E)                                                              \
  int32_t coil_cpu_nonzero_##S(coil_alloc_fn alloc, void *alloc_ctx, const void *x,                \
                               void **indices, int64_t *count, int64_t numel) {                    \
    return nonzero<E>(alloc, alloc_ctx, x, indices, count, numel);                                 \
  }                                                                                                \
  int32_t coil_cpu_unique_##S(coil_alloc_fn alloc, void *alloc_ctx, const void *x, void **y,       \
                              void **indices, void **inverse, void **counts, int64_t *count,       \
                              int64_t outer, int64_t len, int64_t inner, int64_t sorted) {         \
    try {                                                                                          \
      return unique<E>(alloc, alloc_ctx, x, y, indices, inverse, counts, count, outer, len, inner, \
                       sorted != 0);                                                               \
    } catch (const std::bad_alloc &) {                                                             \
      *count = 0;                                                                                  \
      return fail("unique: out of memory sorting %lld slices", ll(len));                           \
    }                                                                                              \
  }
COIL_CPU_FOR_EACH_DTYPE(COIL_CPU_DEFINE_DYNAMIC)
#undef COIL_CPU_DEFINE_DYNAMIC

int32_t coil_cpu_nms_f32(coil_alloc_fn alloc, void *alloc_ctx, const void *boxes,
                         const void *scores, void **selected, int64_t *count, int64_t batches,
                         int64_t classes, int64_t nboxes, int64_t maxPerClass, double iouThreshold,
                         double scoreThreshold, int64_t hasScoreThreshold, int64_t centerPointBox) {
  try {
    return nms(alloc, alloc_ctx, static_cast<const float *>(boxes),
               static_cast<const float *>(scores), selected, count, batches, classes, nboxes,
               maxPerClass, iouThreshold, scoreThreshold, hasScoreThreshold != 0,
               centerPointBox != 0);
  } catch (const std::bad_alloc &) {
    *count = 0;
    return fail("non max suppression: out of memory selecting among %lld boxes", ll(nboxes));
  }
}

int32_t coil_cpu_nms_dyn_f32(coil_alloc_fn alloc, void *alloc_ctx, const void *boxes,
                             const void *scores, const void *maxOut, const void *iou,
                             const void *scoreThreshold, void **selected, int64_t *count,
                             int64_t batches, int64_t classes, int64_t nboxes, int64_t maxCount,
                             int64_t iouCount, int64_t scoreCount, int64_t centerPointBox) {
  int64_t maxPerClass = maxCount > 0 ? load<I64T>(maxOut, 0) : 0;
  double iouT = iouCount > 0 ? double(load<F32T>(iou, 0)) : 0.0;
  double scoreT = scoreCount > 0 ? double(load<F32T>(scoreThreshold, 0)) : 0.0;
  return coil_cpu_nms_f32(alloc, alloc_ctx, boxes, scores, selected, count, batches, classes,
                          nboxes, maxPerClass, iouT, scoreT, scoreCount > 0 ? 1 : 0,
                          centerPointBox);
}

} // extern "C"
