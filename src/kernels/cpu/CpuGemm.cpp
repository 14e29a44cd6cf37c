// CPU kernels for GEMM, convolution (im2col + GEMM), transposed convolution (GEMM + col2im)
// and Det, plus the scalar conversions the other kernel files share. f16/bf16 GEMMs and
// convolutions widen their operands to f32, run the f32 kernels and round each result once.
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/CpuKernelsImpl.h"

#include <algorithm>
#include <cblas.h>
#include <climits>
#include <cstdlib>
#include <memory>
#include <new>
#include <omp.h>
#include <vector>

namespace coil::cpu {

float halfBitsToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { // subnormal: value = mant * 2^-24, exact in float
      float f = float(mant) * (1.0f / 16777216.0f);
      return sign ? -f : f;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToHalfBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, absx = x & 0x7fffffff;
  if (absx >= 0x7f800000) // infinity or NaN (kept quiet)
    return uint16_t(sign | 0x7c00 | (absx > 0x7f800000 ? 0x200 | ((absx >> 13) & 0x3ff) : 0));
  if (absx >= 0x477ff000) return uint16_t(sign | 0x7c00); // rounds to >= 65520
  if (absx < 0x38800000) {                                // subnormal or zero
    float a;
    std::memcpy(&a, &absx, 4);
    return uint16_t(sign | uint32_t(std::nearbyint(a * 16777216.0f)));
  }
  uint32_t mant = absx & 0x7fffff, exp = (absx >> 23) - 127 + 15;
  uint32_t h = exp << 10 | mant >> 13, rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return uint16_t(sign | h);
}

uint16_t floatToBf16Bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return uint16_t((x >> 16) | 0x40);
  return uint16_t((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

float doubleToFloat(double v) {
  constexpr double kOverflow = 3.4028235677973366e38; // FLT_MAX + half an ulp
  constexpr double kMax = double(std::numeric_limits<float>::max());
  if (v >= kOverflow) return std::numeric_limits<float>::infinity();
  if (v <= -kOverflow) return -std::numeric_limits<float>::infinity();
  if (v > kMax) return std::numeric_limits<float>::max();
  if (v < -kMax) return -std::numeric_limits<float>::max();
  return float(v);
}

float doubleToFloatOdd(double v) {
  float f = doubleToFloat(v);
  if (std::isnan(v) || std::isinf(f) || double(f) == v) return f;
  if (std::fabs(double(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits |= 1;
  std::memcpy(&f, &bits, 4);
  return f;
}

namespace {

// --- GEMM

/// y (m x n, ldy n) = alpha * op(a) op(b) + beta * y, one matrix, through BLAS when the sizes
/// fit BLAS's int, else by a plain loop.
template <typename T>
void gemmOne(const T *a, const T *b, T *y, int64_t m, int64_t n, int64_t k, bool ta, bool tb,
             T alpha, T beta) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m * n; ++i) y[i] = beta == T(0) ? T(0) : beta * y[i];
    return;
  }
  if (m <= INT_MAX && n <= INT_MAX && k <= INT_MAX) {
    int lda = int(ta ? m : k), ldb = int(tb ? k : n);
    auto opA = ta ? CblasTrans : CblasNoTrans, opB = tb ? CblasTrans : CblasNoTrans;
    if constexpr (std::is_same_v<T, float>)
      cblas_sgemm(CblasRowMajor, opA, opB, int(m), int(n), int(k), alpha, a, lda, b, ldb, beta, y,
                  int(n));
    else
      cblas_dgemm(CblasRowMajor, opA, opB, int(m), int(n), int(k), alpha, a, lda, b, ldb, beta, y,
                  int(n));
    return;
  }
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      T acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += a[ta ? p * m + i : i * k + p] * b[tb ? j * k + p : p * n + j];
      y[i * n + j] = alpha * acc + (beta == T(0) ? T(0) : beta * y[i * n + j]);
    }
}

/// Up to this many multiply-adds per matrix, batches run in parallel, one matrix per thread:
/// OpenBLAS runs such sizes on a single thread anyway (its multithreading threshold is
/// 4 * 65536), so threads never nest.
constexpr int64_t kSmallGemm = int64_t(1) << 18;

/// Element counts of a batched GEMM: m*n, m*k, k*n, batch*m*n and m*n*k (the work).
struct GemmSizes {
  int64_t mn, mk, kn, all, work;
};

/// Checks a batched GEMM's sizes and batch strides (non-negative; no count or batch offset
/// overflows int64) and computes its element counts; nonzero with coil_cpu_last_error set
/// otherwise.
int32_t checkGemmSizes(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t sa, int64_t sb,
                       int64_t sc, GemmSizes *z) {
  if (batch < 0 || m < 0 || n < 0 || k < 0)
    return fail("gemm: sizes must be >= 0, got batch %lld, m %lld, n %lld, k %lld", ll(batch),
                ll(m), ll(n), ll(k));
  if (sa < 0 || sb < 0 || sc < 0)
    return fail("gemm: batch strides must be >= 0, got %lld, %lld, %lld", ll(sa), ll(sb), ll(sc));
  // The batch offsets must not overflow either.
  int64_t last = batch > 0 ? batch - 1 : 0, tmp;
  if (!mulSize(m, n, &z->mn) || !mulSize(m, k, &z->mk) || !mulSize(k, n, &z->kn) ||
      !mulSize(batch, z->mn, &z->all) || !mulSizes({z->mn, k}, &z->work) ||
      !mulSize(last, sa, &tmp) || !mulSize(last, sb, &tmp) || !mulSize(last, sc, &tmp))
    return fail("gemm: sizes batch %lld, m %lld, n %lld, k %lld overflow int64", ll(batch), ll(m),
                ll(n), ll(k));
  return 0;
}

template <typename T>
int32_t gemmBatched(const T *a, const T *b, const T *c, T *y, int64_t batch, int64_t m, int64_t n,
                    int64_t k, int64_t ta, int64_t tb, int64_t sa, int64_t sb, int64_t sc,
                    double alpha, double beta) {
  GemmSizes z;
  if (int32_t st = checkGemmSizes(batch, m, n, k, sa, sb, sc, &z)) return st;
  const int64_t mn = z.mn, work = z.work;
  // A batch of contiguous A matrices times one shared B (a [batch, m, k] activation times a
  // weight matrix) is a single GEMM over batch * m rows.
  int64_t rows;
  if (batch > 1 && sb == 0 && ta == 0 && sa == z.mk && (!c || sc == mn) &&
      mulSize(batch, m, &rows)) {
    if (c && c != y) std::memmove(y, c, size_t(z.all) * sizeof(T));
    gemmOne<T>(a, b, y, rows, n, k, false, tb != 0, T(alpha), c ? T(beta) : T(0));
    return 0;
  }
  auto one = [&](int64_t i) {
    T *yb = y + i * mn;
    if (c) std::memmove(yb, c + i * sc, size_t(mn) * sizeof(T));
    gemmOne<T>(a + i * sa, b + i * sb, yb, m, n, k, ta != 0, tb != 0, T(alpha), c ? T(beta) : T(0));
  };
  if (batch > 1 && work <= kSmallGemm) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < batch; ++i) one(i);
  } else {
    for (int64_t i = 0; i < batch; ++i) one(i);
  }
  return 0;
}

// --- Convolution

/// Geometry of a conv or transposed conv with up to 3 spatial dims, validated.
struct ConvGeom {
  int64_t n = 0, c = 0, m = 0, group = 1, cg = 0, mg = 0;
  int64_t in[3], k[3], out[3], s[3], d[3], p[3];
  int64_t inSize = 0, kSize = 0, outSize = 0, colRows = 0;
};

/// 0, or the status of fail naming `op` and the broken rule.
int32_t makeGeom(const char *op, ConvGeom &g, int64_t n, int64_t c, int64_t m, int64_t group,
                 int64_t nd, const int64_t in[3], const int64_t k[3], const int64_t out[3],
                 const int64_t s[3], const int64_t d[3], const int64_t p[3]) {
  if (nd < 1 || nd > 3) return fail("%s: %lld spatial dims, 1 to 3 are supported", op, ll(nd));
  if (n < 0 || c < 0 || m < 0)
    return fail("%s: sizes n %lld, c %lld, m %lld must be >= 0", op, ll(n), ll(c), ll(m));
  if (group < 1 || c % group || m % group)
    return fail("%s: group %lld must be >= 1 and divide the channels %lld and %lld", op, ll(group),
                ll(c), ll(m));
  g.n = n, g.c = c, g.m = m, g.group = group, g.cg = c / group, g.mg = m / group;
  // The spatial dims are right-aligned (unused leading dims of size 1), so that the innermost
  // loops of im2col/col2im run along the last, contiguous dim of a 1-D or 2-D convolution.
  for (int i = 0; i < 3; ++i) {
    int64_t j = i - (3 - nd);
    bool used = j >= 0;
    g.in[i] = used ? in[j] : 1, g.k[i] = used ? k[j] : 1, g.out[i] = used ? out[j] : 1;
    g.s[i] = used ? s[j] : 1, g.d[i] = used ? d[j] : 1, g.p[i] = used ? p[j] : 0;
    if (g.in[i] < 0 || g.k[i] < 0 || g.out[i] < 0 || g.s[i] < 1 || g.d[i] < 1 ||
        g.p[i] < -(INT64_MAX >> 2))
      return fail("%s: spatial dim %lld has input %lld, kernel %lld, output %lld, stride %lld, "
                  "dilation %lld, pad %lld (sizes >= 0, strides and dilations >= 1)",
                  op, ll(j), ll(g.in[i]), ll(g.k[i]), ll(g.out[i]), ll(g.s[i]), ll(g.d[i]),
                  ll(g.p[i]));
    // Coordinates o*s - p + kk*d (and i*s - p + kk*d) must stay far from overflow.
    int64_t a, b, e;
    if (!mulSize(g.out[i], g.s[i], &a) || !mulSize(g.k[i], g.d[i], &b) ||
        !mulSize(g.in[i], g.s[i], &e) || a > (INT64_MAX >> 2) || b > (INT64_MAX >> 2) ||
        e > (INT64_MAX >> 2) || g.p[i] > (INT64_MAX >> 2) || g.out[i] > (INT64_MAX >> 2))
      return fail("%s: the coordinates of spatial dim %lld overflow", op, ll(j));
  }
  int64_t all;
  if (!mulSizes({g.in[0], g.in[1], g.in[2]}, &g.inSize) ||
      !mulSizes({g.k[0], g.k[1], g.k[2]}, &g.kSize) ||
      !mulSizes({g.out[0], g.out[1], g.out[2]}, &g.outSize) ||
      !mulSize(g.cg, g.kSize, &g.colRows) || !mulSizes({n, c, g.inSize}, &all) ||
      !mulSizes({n, m, g.outSize}, &all) || !mulSizes({g.colRows, g.outSize}, &all) ||
      !mulSizes({m, g.colRows}, &all) || !mulSizes({c, g.mg, g.kSize}, &all) ||
      !mulSizes({g.colRows, g.inSize}, &all) || !mulSizes({g.mg, g.kSize, g.inSize}, &all))
    return fail("%s: the tensor sizes overflow int64", op);
  return 0;
}

/// The output positions o2 of the last dim whose input position o2 * s2 + off lies in
/// [0, in2): [lo, hi).
inline void validRange(int64_t off, int64_t s2, int64_t in2, int64_t out2, int64_t *lo,
                       int64_t *hi) {
  int64_t l = off >= 0 ? 0 : (-off + s2 - 1) / s2;
  int64_t last = in2 - 1 - off; // o2 * s2 <= last
  int64_t h = last < 0 ? 0 : std::min(out2, last / s2 + 1);
  l = std::min(l, out2);
  *lo = l, *hi = std::max(h, l);
}

/// col[(ic*K + kk), o] = x[ic, position(o, kk)] (0 in the padding), for one image and group.
/// Rows are short for small images, so the copies are plain loops (no library call per row).
template <typename T> void im2col(const ConvGeom &g, const T *x, T *col, bool parallel) {
  int64_t K = g.kSize, O = g.outSize;
#pragma omp parallel for schedule(static) if (parallel && g.colRows * O > 65536)
  for (int64_t row = 0; row < g.colRows; ++row) {
    int64_t ic = row / K, kk = row % K;
    int64_t k0 = kk / (g.k[1] * g.k[2]), k1 = (kk / g.k[2]) % g.k[1], k2 = kk % g.k[2];
    const T *xc = x + ic * g.inSize;
    T *dst = col + row * O;
    const int64_t s2 = g.s[2], off = k2 * g.d[2] - g.p[2], out2 = g.out[2];
    int64_t lo, hi;
    validRange(off, s2, g.in[2], out2, &lo, &hi);
    for (int64_t o0 = 0; o0 < g.out[0]; ++o0) {
      int64_t i0 = o0 * g.s[0] - g.p[0] + k0 * g.d[0];
      bool in0 = i0 >= 0 && i0 < g.in[0];
      for (int64_t o1 = 0; o1 < g.out[1]; ++o1) {
        int64_t i1 = o1 * g.s[1] - g.p[1] + k1 * g.d[1];
        T *d = dst + (o0 * g.out[1] + o1) * out2;
        if (!in0 || i1 < 0 || i1 >= g.in[1]) {
          for (int64_t o2 = 0; o2 < out2; ++o2) d[o2] = T(0);
          continue;
        }
        const T *src = xc + (i0 * g.in[1] + i1) * g.in[2] + off;
        for (int64_t o2 = 0; o2 < lo; ++o2) d[o2] = T(0);
        if (s2 == 1) {
#pragma omp simd
          for (int64_t o2 = lo; o2 < hi; ++o2) d[o2] = src[o2];
        } else {
          for (int64_t o2 = lo; o2 < hi; ++o2) d[o2] = src[o2 * s2];
        }
        for (int64_t o2 = hi; o2 < out2; ++o2) d[o2] = T(0);
      }
    }
  }
}

/// y[mc, position(i, kk)] += col[(mc*K + kk), i] for one image and group (the adjoint of
/// im2col with in/out swapped: here `in` is the transposed conv's input, `out` its output).
template <typename T> void col2im(const ConvGeom &g, const T *col, T *y, int64_t channels) {
  int64_t K = g.kSize;
#pragma omp parallel for schedule(static) if (channels * g.outSize > 32768)
  for (int64_t mc = 0; mc < channels; ++mc) {
    T *yc = y + mc * g.outSize;
    for (int64_t kk = 0; kk < K; ++kk) {
      int64_t k0 = kk / (g.k[1] * g.k[2]), k1 = (kk / g.k[2]) % g.k[1], k2 = kk % g.k[2];
      const T *src = col + (mc * K + kk) * g.inSize;
      for (int64_t i0 = 0; i0 < g.in[0]; ++i0) {
        int64_t o0 = i0 * g.s[0] - g.p[0] + k0 * g.d[0];
        if (o0 < 0 || o0 >= g.out[0]) continue;
        for (int64_t i1 = 0; i1 < g.in[1]; ++i1) {
          int64_t o1 = i1 * g.s[1] - g.p[1] + k1 * g.d[1];
          if (o1 < 0 || o1 >= g.out[1]) continue;
          const T *s = src + (i0 * g.in[1] + i1) * g.in[2];
          T *d = yc + (o0 * g.out[1] + o1) * g.out[2];
          for (int64_t i2 = 0; i2 < g.in[2]; ++i2) {
            int64_t o2 = i2 * g.s[2] - g.p[2] + k2 * g.d[2];
            if (o2 >= 0 && o2 < g.out[2]) d[o2] += s[i2];
          }
        }
      }
    }
  }
}

bool isPointwiseConv(const ConvGeom &g) {
  for (int i = 0; i < 3; ++i)
    if (g.k[i] != 1 || g.s[i] != 1 || g.p[i] != 0 || g.out[i] != g.in[i]) return false;
  return true;
}

/// Calls fn(fromFlat, kk, toFlat) for every position `f` of the `from` grid and kernel position
/// kk whose target t = f*s - p + kk*d lies inside the `to` grid (conv: from = output, to =
/// input; transposed conv: from = input, to = output). The workspace-free fallback of the
/// GEMM formulations when their column buffer cannot be allocated.
template <typename F>
void forEachTap(const ConvGeom &g, const int64_t from[3], const int64_t to[3], F fn) {
  for (int64_t f0 = 0; f0 < from[0]; ++f0)
    for (int64_t f1 = 0; f1 < from[1]; ++f1)
      for (int64_t f2 = 0; f2 < from[2]; ++f2)
        for (int64_t k0 = 0; k0 < g.k[0]; ++k0)
          for (int64_t k1 = 0; k1 < g.k[1]; ++k1)
            for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
              int64_t t0 = f0 * g.s[0] - g.p[0] + k0 * g.d[0];
              int64_t t1 = f1 * g.s[1] - g.p[1] + k1 * g.d[1];
              int64_t t2 = f2 * g.s[2] - g.p[2] + k2 * g.d[2];
              if (t0 < 0 || t0 >= to[0] || t1 < 0 || t1 >= to[1] || t2 < 0 || t2 >= to[2]) continue;
              fn((f0 * from[1] + f1) * from[2] + f2, (k0 * g.k[1] + k1) * g.k[2] + k2,
                 (t0 * to[1] + t1) * to[2] + t2);
            }
}

/// A per-thread workspace of at least `n` elements, kept between calls up to kKeptScratch bytes
/// (no allocation or zeroing per call); nullptr when memory runs out. `local` holds a larger
/// one for the duration of the caller.
constexpr size_t kKeptScratch = size_t(16) << 20;
template <typename T, int Slot> T *scratch(size_t n, std::unique_ptr<T[]> &local) {
  thread_local std::unique_ptr<T[]> kept;
  thread_local size_t keptSize = 0;
  if (n <= keptSize) return kept.get();
  if (n * sizeof(T) > kKeptScratch) {
    local.reset(new (std::nothrow) T[n]);
    return local.get();
  }
  kept.reset(new (std::nothrow) T[n]);
  keptSize = kept ? n : 0;
  return kept.get();
}

/// Output channel oc of image b of a convolution with one input channel per group (depthwise):
/// the taps of the window in order, each a multiply-add over output rows.
template <typename T>
void depthwiseChannel(const ConvGeom &g, const T *x, const T *w, T *y, int64_t b, int64_t oc) {
  const T *xc = x + (b * g.c + oc / g.mg) * g.inSize;
  const T *wc = w + oc * g.kSize;
  T *yc = y + (b * g.m + oc) * g.outSize;
  for (int64_t o = 0; o < g.outSize; ++o) yc[o] = T(0);
  const int64_t s2 = g.s[2], out2 = g.out[2];
  for (int64_t k0 = 0; k0 < g.k[0]; ++k0)
    for (int64_t k1 = 0; k1 < g.k[1]; ++k1)
      for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
        const T wv = wc[(k0 * g.k[1] + k1) * g.k[2] + k2];
        const int64_t off = k2 * g.d[2] - g.p[2];
        int64_t lo, hi;
        validRange(off, s2, g.in[2], out2, &lo, &hi);
        for (int64_t o0 = 0; o0 < g.out[0]; ++o0) {
          int64_t i0 = o0 * g.s[0] - g.p[0] + k0 * g.d[0];
          if (i0 < 0 || i0 >= g.in[0]) continue;
          for (int64_t o1 = 0; o1 < g.out[1]; ++o1) {
            int64_t i1 = o1 * g.s[1] - g.p[1] + k1 * g.d[1];
            if (i1 < 0 || i1 >= g.in[1]) continue;
            const T *src = xc + (i0 * g.in[1] + i1) * g.in[2] + off;
            T *d = yc + (o0 * g.out[1] + o1) * out2;
            if (s2 == 1) {
#pragma omp simd
              for (int64_t o2 = lo; o2 < hi; ++o2) d[o2] += wv * src[o2];
            } else {
              for (int64_t o2 = lo; o2 < hi; ++o2) d[o2] += wv * src[o2 * s2];
            }
          }
        }
      }
}

/// The zero-padded copy of one image and group for im2col: xp [cg, P0, P1, P2] holds x at
/// offset p (begin pads) in every dim, so that position o*s + kk*d needs no bounds check.
struct PaddedGeom {
  int64_t P[3] = {1, 1, 1};
  int64_t size = 0;
};

/// The padded geometry, when it applies (no negative pads) and its copy is smaller than the
/// columns it saves checks for.
bool makePadded(const ConvGeom &g, PaddedGeom &pd) {
  for (int i = 0; i < 3; ++i) {
    if (g.p[i] < 0) return false;
    // The last position read is (out-1)*s + (k-1)*d (all far below overflow, see makeGeom).
    int64_t need =
        g.out[i] == 0 || g.k[i] == 0 ? 0 : (g.out[i] - 1) * g.s[i] + (g.k[i] - 1) * g.d[i] + 1;
    pd.P[i] = std::max(g.in[i] + g.p[i], need);
  }
  return mulSizes({g.cg, pd.P[0], pd.P[1], pd.P[2]}, &pd.size) && pd.size <= g.colRows * g.outSize;
}

template <typename T> void padImage(const ConvGeom &g, const PaddedGeom &pd, const T *x, T *xp) {
  const int64_t P0 = pd.P[0], P1 = pd.P[1], P2 = pd.P[2];
  for (int64_t ic = 0; ic < g.cg; ++ic)
    for (int64_t r0 = 0; r0 < P0; ++r0)
      for (int64_t r1 = 0; r1 < P1; ++r1) {
        T *d = xp + ((ic * P0 + r0) * P1 + r1) * P2;
        int64_t i0 = r0 - g.p[0], i1 = r1 - g.p[1];
        if (i0 < 0 || i0 >= g.in[0] || i1 < 0 || i1 >= g.in[1]) {
          for (int64_t r2 = 0; r2 < P2; ++r2) d[r2] = T(0);
          continue;
        }
        const T *src = x + ((ic * g.in[0] + i0) * g.in[1] + i1) * g.in[2];
        int64_t p2 = g.p[2], in2 = g.in[2];
        for (int64_t r2 = 0; r2 < p2; ++r2) d[r2] = T(0);
        std::memcpy(d + p2, src, size_t(in2) * sizeof(T));
        for (int64_t r2 = p2 + in2; r2 < P2; ++r2) d[r2] = T(0);
      }
}

/// im2col from the padded copy: every output row is a plain copy (of W elements when W > 0,
/// a length the compiler unrolls; out2 otherwise).
template <typename T, int W>
void im2colPaddedRows(const ConvGeom &g, const PaddedGeom &pd, const T *xp, T *col) {
  const int64_t K = g.kSize, O = g.outSize, P0 = pd.P[0], P1 = pd.P[1], P2 = pd.P[2];
  const int64_t out2 = W > 0 ? W : g.out[2], s2 = g.s[2];
  const int64_t step0 = g.s[0] * P1 * P2, step1 = g.s[1] * P2;
  for (int64_t row = 0; row < g.colRows; ++row) {
    int64_t ic = row / K, kk = row % K;
    int64_t k0 = kk / (g.k[1] * g.k[2]), k1 = (kk / g.k[2]) % g.k[1], k2 = kk % g.k[2];
    const T *base = xp + ((ic * P0 + k0 * g.d[0]) * P1 + k1 * g.d[1]) * P2 + k2 * g.d[2];
    T *d = col + row * O;
    for (int64_t o0 = 0; o0 < g.out[0]; ++o0) {
      const T *src = base + o0 * step0;
      for (int64_t o1 = 0; o1 < g.out[1]; ++o1, src += step1, d += out2) {
        if (W > 0) {
          std::memcpy(d, src, size_t(W) * sizeof(T));
        } else if (s2 == 1) {
          std::memcpy(d, src, size_t(out2) * sizeof(T));
        } else {
          for (int64_t o2 = 0; o2 < out2; ++o2) d[o2] = src[o2 * s2];
        }
      }
    }
  }
}

template <typename T>
void im2colPadded(const ConvGeom &g, const PaddedGeom &pd, const T *xp, T *col) {
  if (g.s[2] == 1) switch (g.out[2]) {
    case 4:
      return im2colPaddedRows<T, 4>(g, pd, xp, col);
    case 8:
      return im2colPaddedRows<T, 8>(g, pd, xp, col);
    case 16:
      return im2colPaddedRows<T, 16>(g, pd, xp, col);
    case 32:
      return im2colPaddedRows<T, 32>(g, pd, xp, col);
    default:
      break;
    }
  im2colPaddedRows<T, 0>(g, pd, xp, col);
}

/// A 2-D depthwise 3x3 window (dilation 1, pads >= 0, stride S along rows, any stride between
/// rows) from the zero-padded channel xp [.., P2]: the nine taps of each output in registers.
template <typename T, int S>
void depthwise3x3Rows(const T *xp, int64_t P2, int64_t s1, const T *wc, T *yc, int64_t out1,
                      int64_t out2) {
  const T w0 = wc[0], w1 = wc[1], w2 = wc[2], w3 = wc[3], w4 = wc[4], w5 = wc[5], w6 = wc[6],
          w7 = wc[7], w8 = wc[8];
  for (int64_t o1 = 0; o1 < out1; ++o1) {
    const T *r0 = xp + o1 * s1 * P2, *r1 = r0 + P2, *r2 = r1 + P2;
    T *d = yc + o1 * out2;
#pragma omp simd
    for (int64_t o2 = 0; o2 < out2; ++o2) {
      const int64_t i = o2 * S;
      d[o2] = w0 * r0[i] + w1 * r0[i + 1] + w2 * r0[i + 2] + w3 * r1[i] + w4 * r1[i + 1] +
              w5 * r1[i + 2] + w6 * r2[i] + w7 * r2[i + 1] + w8 * r2[i + 2];
    }
  }
}

/// Whether depthwise3x3Rows applies: one plane (2-D), 3x3, dilation 1, pads >= 0, strides 1 or
/// 2 along the row.
bool isDepthwise3x3(const ConvGeom &g) {
  return g.in[0] == 1 && g.k[0] == 1 && g.out[0] == 1 && g.p[0] == 0 && g.k[1] == 3 &&
         g.k[2] == 3 && g.d[1] == 1 && g.d[2] == 1 && g.p[1] >= 0 && g.p[2] >= 0 &&
         (g.s[2] == 1 || g.s[2] == 2);
}

/// Depthwise convolution (one input channel per group): im2col + GEMM would be a GEMM of one
/// row per group, so direct loops, per (image, group) in parallel.
template <typename T> void depthwise(const T *x, T *y, const T *w, const ConvGeom &g) {
  int64_t items = g.n * g.group, all;
  if (!mulSizes({g.n, g.m, g.outSize, g.kSize}, &all)) all = INT64_MAX;
  // The 3x3 fast path pads one channel: rows of P2, enough of them for the last output row.
  bool fast = isDepthwise3x3(g);
  int64_t P1 = 0, P2 = 0, padSize = 0;
  if (fast) {
    P1 = std::max(g.in[1] + g.p[1], (g.out[1] - 1) * g.s[1] + 3);
    P2 = std::max(g.in[2] + g.p[2], (g.out[2] - 1) * g.s[2] + 3);
    fast = mulSize(P1, P2, &padSize);
  }
#pragma omp parallel for schedule(static) if (items > 1 && all > 32768)
  for (int64_t item = 0; item < items; ++item) {
    int64_t b = item / g.group, gr = item % g.group;
    std::unique_ptr<T[]> local;
    T *xp = fast ? scratch<T, 1>(size_t(padSize), local) : nullptr;
    if (!xp) {
      for (int64_t oc = gr * g.mg; oc < (gr + 1) * g.mg; ++oc) depthwiseChannel(g, x, w, y, b, oc);
      continue;
    }
    const T *xc = x + (b * g.c + gr) * g.inSize;
    for (int64_t r1 = 0; r1 < P1; ++r1) {
      T *d = xp + r1 * P2;
      int64_t i1 = r1 - g.p[1];
      if (i1 < 0 || i1 >= g.in[1]) {
        for (int64_t r2 = 0; r2 < P2; ++r2) d[r2] = T(0);
        continue;
      }
      for (int64_t r2 = 0; r2 < g.p[2]; ++r2) d[r2] = T(0);
      std::memcpy(d + g.p[2], xc + i1 * g.in[2], size_t(g.in[2]) * sizeof(T));
      for (int64_t r2 = g.p[2] + g.in[2]; r2 < P2; ++r2) d[r2] = T(0);
    }
    for (int64_t oc = gr * g.mg; oc < (gr + 1) * g.mg; ++oc) {
      T *yc = y + (b * g.m + oc) * g.outSize;
      if (g.s[2] == 1)
        depthwise3x3Rows<T, 1>(xp, P2, g.s[1], w + oc * 9, yc, g.out[1], g.out[2]);
      else
        depthwise3x3Rows<T, 2>(xp, P2, g.s[1], w + oc * 9, yc, g.out[1], g.out[2]);
    }
  }
}

template <typename T> void conv(const T *x, T *y, const T *w, const ConvGeom &g) {
  if (g.n == 0 || g.m == 0 || g.outSize == 0) return;
  int64_t work; // multiply-adds per (image, group)
  if (!mulSizes({g.mg, g.outSize, g.colRows}, &work)) work = INT64_MAX;
  if (g.cg == 1) return depthwise(x, y, w, g);
  bool direct = isPointwiseConv(g);
  int64_t items = g.n * g.group; // (image, group) pairs, each one GEMM
  size_t colSize = direct ? 0 : size_t(g.colRows * g.outSize);
  PaddedGeom pd;
  bool padded = !direct && makePadded(g, pd);
  // One (image, group): im2col into `col` (unless 1x1), then y_g [mg, O] = w_g [mg, cg*K] *
  // col [cg*K, O].
  auto one = [&](int64_t item, bool parallel) {
    int64_t b = item / g.group, gr = item % g.group;
    const T *xg = x + (b * g.c + gr * g.cg) * g.inSize;
    T *yg = y + (b * g.m + gr * g.mg) * g.outSize;
    const T *wg = w + gr * g.mg * g.colRows;
    const T *cols = xg;
    std::unique_ptr<T[]> local;
    if (!direct) {
      T *col = scratch<T, 0>(colSize, local);
      if (!col) { // no memory for the columns: direct loops
        std::fill(yg, yg + g.mg * g.outSize, T(0));
        for (int64_t oc = 0; oc < g.mg; ++oc)
          for (int64_t ic = 0; ic < g.cg; ++ic)
            forEachTap(g, g.out, g.in, [&](int64_t o, int64_t kk, int64_t i) {
              yg[oc * g.outSize + o] += xg[ic * g.inSize + i] * wg[(oc * g.cg + ic) * g.kSize + kk];
            });
        return;
      }
      std::unique_ptr<T[]> localPad;
      T *xp = padded ? scratch<T, 1>(size_t(pd.size), localPad) : nullptr;
      if (xp) {
        padImage(g, pd, xg, xp);
        im2colPadded(g, pd, xp, col);
      } else {
        im2col(g, xg, col, parallel);
      }
      cols = col;
    }
    gemmOne<T>(wg, cols, yg, g.mg, g.outSize, g.colRows, false, false, T(1), T(0));
  };
  // Images (and groups) in parallel, each one GEMM on its thread, when there are enough of
  // them for the threads or they are small; else one at a time with BLAS's own threads.
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (items > 1 && threads > 1 && (items >= threads || work <= kSmallGemm)) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < items; ++i) one(i, false);
  } else {
    for (int64_t i = 0; i < items; ++i) one(i, true);
  }
}

template <typename T> void convTranspose(const T *x, T *y, const T *w, const ConvGeom &g) {
  int64_t total = g.n * g.m * g.outSize;
  std::fill(y, y + total, T(0));
  if (g.n == 0 || g.c == 0 || g.inSize == 0) return;
  int64_t rows = g.mg * g.kSize; // col [mg*K, inSize]
  std::vector<T> col;
  try {
    col.resize(size_t(rows * g.inSize));
  } catch (const std::bad_alloc &) { // no memory for the columns: direct loops
    for (int64_t b = 0; b < g.n; ++b)
      for (int64_t gr = 0; gr < g.group; ++gr)
        for (int64_t ic = 0; ic < g.cg; ++ic)
          for (int64_t oc = 0; oc < g.mg; ++oc) {
            const T *xc = x + (b * g.c + gr * g.cg + ic) * g.inSize;
            const T *wc = w + ((gr * g.cg + ic) * g.mg + oc) * g.kSize;
            T *yc = y + (b * g.m + gr * g.mg + oc) * g.outSize;
            forEachTap(g, g.in, g.out,
                       [&](int64_t i, int64_t kk, int64_t o) { yc[o] += xc[i] * wc[kk]; });
          }
    return;
  }
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t gr = 0; gr < g.group; ++gr) {
      const T *xg = x + (b * g.c + gr * g.cg) * g.inSize; // [cg, inSize]
      const T *wg = w + gr * g.cg * rows;                 // [cg, mg*K]
      T *yg = y + (b * g.m + gr * g.mg) * g.outSize;
      gemmOne<T>(wg, xg, col.data(), rows, g.inSize, g.cg, true, false, T(1), T(0));
      col2im(g, col.data(), yg, g.mg);
    }
}

template <typename T> int32_t det(const T *x, T *y, int64_t batch, int64_t n) {
  int64_t nn, all;
  if (batch < 0 || !mulSize(n, n, &nn) || !mulSize(batch, nn, &all))
    return fail("det: sizes batch %lld, n %lld are negative or overflow", ll(batch), ll(n));
  bool outOfMemory = false;
#pragma omp parallel for schedule(static) if (batch > 16)
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<double> m;
    try {
      m.assign(x + b * nn, x + (b + 1) * nn);
    } catch (const std::bad_alloc &) {
#pragma omp atomic write
      outOfMemory = true; // reported below (never an exception out of here)
      continue;
    }
    double r = 1;
    for (int64_t c = 0; c < n && r != 0; ++c) {
      int64_t piv = c;
      for (int64_t i = c + 1; i < n; ++i)
        if (std::fabs(m[size_t(i * n + c)]) > std::fabs(m[size_t(piv * n + c)])) piv = i;
      if (m[size_t(piv * n + c)] == 0) {
        r = 0;
        break;
      }
      if (piv != c) {
        for (int64_t j = 0; j < n; ++j) std::swap(m[size_t(c * n + j)], m[size_t(piv * n + j)]);
        r = -r;
      }
      double p = m[size_t(c * n + c)];
      r *= p;
      for (int64_t i = c + 1; i < n; ++i) {
        double f = m[size_t(i * n + c)] / p;
        for (int64_t j = c; j < n; ++j) m[size_t(i * n + j)] -= f * m[size_t(c * n + j)];
      }
    }
    if constexpr (std::is_same_v<T, float>)
      y[b] = doubleToFloat(r);
    else
      y[b] = r;
  }
  if (outOfMemory) return fail("det: out of memory for a %lld x %lld matrix", ll(n), ll(n));
  return 0;
}

// --- f16 / bf16: converted to f32, computed by the f32 kernels, rounded once

struct HalfBits {
  static float load(uint16_t v) { return halfBitsToFloat(v); }
  static uint16_t store(float v) { return floatToHalfBits(v); }
};
struct Bf16Bits {
  static float load(uint16_t v) { return bf16BitsToFloat(v); }
  static uint16_t store(float v) { return floatToBf16Bits(v); }
};

/// The f32 values of `count` 16-bit elements at `p` (throws std::bad_alloc).
template <typename H> std::vector<float> widen(const void *p, int64_t count) {
  const auto *s = static_cast<const uint16_t *>(p);
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[size_t(i)] = H::load(s[i]);
  return v;
}

template <typename H> void narrow(const std::vector<float> &v, void *p) {
  auto *d = static_cast<uint16_t *>(p);
  for (size_t i = 0; i < v.size(); ++i) d[i] = H::store(v[i]);
}

/// Elements a batched operand spans: (batch - 1) * stride + size (sizes already validated).
int64_t span(int64_t batch, int64_t stride, int64_t size) {
  return batch == 0 || size == 0 ? 0 : (batch - 1) * stride + size;
}

template <typename H>
int32_t gemmHalf(const void *a, const void *b, const void *c, void *y, int64_t batch, int64_t m,
                 int64_t n, int64_t k, int64_t ta, int64_t tb, int64_t sa, int64_t sb, int64_t sc,
                 double alpha, double beta) {
  GemmSizes z;
  if (int32_t st = checkGemmSizes(batch, m, n, k, sa, sb, sc, &z)) return st;
  const int64_t mn = z.mn, mk = z.mk, kn = z.kn, all = z.all;
  if (all == 0) return 0;
  try {
    std::vector<float> a32 = widen<H>(a, span(batch, sa, mk)),
                       b32 = widen<H>(b, span(batch, sb, kn));
    std::vector<float> c32, y32(static_cast<size_t>(all));
    if (c) c32 = widen<H>(c, span(batch, sc, mn));
    if (int32_t rc =
            gemmBatched<float>(a32.data(), b32.data(), c ? c32.data() : nullptr, y32.data(), batch,
                               m, n, k, ta, tb, sa, sb, sc, alpha, beta))
      return rc;
    narrow<H>(y32, y);
    return 0;
  } catch (const std::bad_alloc &) { // no memory for the f32 copies: direct loops
  }
  const auto *ah = static_cast<const uint16_t *>(a), *bh = static_cast<const uint16_t *>(b);
  const auto *ch = static_cast<const uint16_t *>(c);
  auto *yh = static_cast<uint16_t *>(y);
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += H::load(ah[bi * sa + (ta ? p * m + i : i * k + p)]) *
                 H::load(bh[bi * sb + (tb ? j * k + p : p * n + j)]);
        float v = float(alpha) * acc;
        if (c && beta != 0) v += float(beta) * H::load(ch[bi * sc + i * n + j]);
        yh[(bi * m + i) * n + j] = H::store(v);
      }
  return 0;
}

/// The bias epilogue of coil_cpu_gemm_bias_*, in place on the batch * m rows of y (n wide):
/// y[r, j] = act(y[r, j] + bias[j]) in T (f32 for the f16/bf16 kernels, before their single
/// rounding), act = ReLU (`v < 0 ? 0 : v`, NaN kept) when `relu`, else the identity.
template <typename T, typename B>
void biasEpilogue(T *y, const B &bias, int64_t rows, int64_t n, bool relu) {
  auto row = [&](int64_t r) {
    T *yr = y + r * n;
    for (int64_t j = 0; j < n; ++j) {
      T v = yr[j] + T(bias(j));
      yr[j] = relu && v < T(0) ? T(0) : v;
    }
  };
  if (rows > 1 && rows * n >= (int64_t(1) << 16)) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) row(r);
  } else {
    for (int64_t r = 0; r < rows; ++r) row(r);
  }
}

template <typename T>
int32_t gemmBias(const void *a, const void *b, const void *bias, void *y, int64_t batch, int64_t m,
                 int64_t n, int64_t k, int64_t ta, int64_t tb, int64_t sa, int64_t sb, double alpha,
                 int64_t relu) {
  T *yt = static_cast<T *>(y);
  if (int32_t rc = gemmBatched<T>(static_cast<const T *>(a), static_cast<const T *>(b), nullptr, yt,
                                  batch, m, n, k, ta, tb, sa, sb, 0, alpha, 0.0))
    return rc;
  const T *bt = static_cast<const T *>(bias);
  biasEpilogue<T>(
      yt, [bt](int64_t j) { return bt[j]; }, batch * m, n, relu != 0);
  return 0;
}

template <typename H>
int32_t gemmBiasHalf(const void *a, const void *b, const void *bias, void *y, int64_t batch,
                     int64_t m, int64_t n, int64_t k, int64_t ta, int64_t tb, int64_t sa,
                     int64_t sb, double alpha, int64_t relu) {
  GemmSizes z;
  if (int32_t st = checkGemmSizes(batch, m, n, k, sa, sb, 0, &z)) return st;
  const int64_t mk = z.mk, kn = z.kn, all = z.all;
  if (all == 0) return 0;
  const auto *bh = static_cast<const uint16_t *>(bias);
  auto biasAt = [bh](int64_t j) { return H::load(bh[j]); };
  try {
    std::vector<float> a32 = widen<H>(a, span(batch, sa, mk)),
                       b32 = widen<H>(b, span(batch, sb, kn)), y32(static_cast<size_t>(all));
    if (int32_t rc = gemmBatched<float>(a32.data(), b32.data(), nullptr, y32.data(), batch, m, n, k,
                                        ta, tb, sa, sb, 0, alpha, 0.0))
      return rc;
    biasEpilogue<float>(y32.data(), biasAt, batch * m, n, relu != 0);
    narrow<H>(y32, y);
    return 0;
  } catch (const std::bad_alloc &) { // no memory for the f32 copies: direct loops
  }
  const auto *ah = static_cast<const uint16_t *>(a), *bm = static_cast<const uint16_t *>(b);
  auto *yh = static_cast<uint16_t *>(y);
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += H::load(ah[bi * sa + (ta ? p * m + i : i * k + p)]) *
                 H::load(bm[bi * sb + (tb ? j * k + p : p * n + j)]);
        float v = float(alpha) * acc + biasAt(j);
        yh[(bi * m + i) * n + j] = H::store(relu && v < 0.0f ? 0.0f : v);
      }
  return 0;
}

/// The flat input position that conv output `o` reads through kernel tap `kk`, or -1 (padding).
int64_t convSource(const ConvGeom &g, int64_t o, int64_t kk) {
  int64_t oi[3] = {o / (g.out[1] * g.out[2]), (o / g.out[2]) % g.out[1], o % g.out[2]};
  int64_t ki[3] = {kk / (g.k[1] * g.k[2]), (kk / g.k[2]) % g.k[1], kk % g.k[2]}, pos = 0;
  for (int d = 0; d < 3; ++d) {
    int64_t i = oi[d] * g.s[d] - g.p[d] + ki[d] * g.d[d];
    if (i < 0 || i >= g.in[d]) return -1;
    pos = pos * g.in[d] + i;
  }
  return pos;
}

/// The flat input position whose transposed-conv contribution through tap `kk` lands on
/// output `o`, or -1.
int64_t transposedSource(const ConvGeom &g, int64_t o, int64_t kk) {
  int64_t oi[3] = {o / (g.out[1] * g.out[2]), (o / g.out[2]) % g.out[1], o % g.out[2]};
  int64_t ki[3] = {kk / (g.k[1] * g.k[2]), (kk / g.k[2]) % g.k[1], kk % g.k[2]}, pos = 0;
  for (int d = 0; d < 3; ++d) {
    int64_t t = oi[d] + g.p[d] - ki[d] * g.d[d];
    if (t < 0 || t % g.s[d] != 0 || t / g.s[d] >= g.in[d]) return -1;
    pos = pos * g.in[d] + t / g.s[d];
  }
  return pos;
}

template <typename H> void convHalf(const void *x, const void *w, void *y, const ConvGeom &g) {
  int64_t xs = g.n * g.c * g.inSize, ws = g.m * g.colRows, ys = g.n * g.m * g.outSize;
  try {
    std::vector<float> x32 = widen<H>(x, xs), w32 = widen<H>(w, ws), y32(static_cast<size_t>(ys));
    conv<float>(x32.data(), y32.data(), w32.data(), g);
    narrow<H>(y32, y);
    return;
  } catch (const std::bad_alloc &) { // no memory for the f32 copies: direct loops
  }
  const auto *xh = static_cast<const uint16_t *>(x), *wh = static_cast<const uint16_t *>(w);
  auto *yh = static_cast<uint16_t *>(y);
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t oc = 0; oc < g.m; ++oc)
      for (int64_t o = 0; o < g.outSize; ++o) {
        int64_t gr = oc / g.mg;
        float acc = 0;
        for (int64_t ic = 0; ic < g.cg; ++ic)
          for (int64_t kk = 0; kk < g.kSize; ++kk) {
            int64_t i = convSource(g, o, kk);
            if (i >= 0)
              acc += H::load(xh[(b * g.c + gr * g.cg + ic) * g.inSize + i]) *
                     H::load(wh[(oc * g.cg + ic) * g.kSize + kk]);
          }
        yh[(b * g.m + oc) * g.outSize + o] = H::store(acc);
      }
}

template <typename H>
void convTransposeHalf(const void *x, const void *w, void *y, const ConvGeom &g) {
  int64_t xs = g.n * g.c * g.inSize, ws = g.c * g.mg * g.kSize, ys = g.n * g.m * g.outSize;
  try {
    std::vector<float> x32 = widen<H>(x, xs), w32 = widen<H>(w, ws), y32(static_cast<size_t>(ys));
    convTranspose<float>(x32.data(), y32.data(), w32.data(), g);
    narrow<H>(y32, y);
    return;
  } catch (const std::bad_alloc &) { // no memory for the f32 copies: direct loops
  }
  const auto *xh = static_cast<const uint16_t *>(x), *wh = static_cast<const uint16_t *>(w);
  auto *yh = static_cast<uint16_t *>(y);
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t oc = 0; oc < g.m; ++oc)
      for (int64_t o = 0; o < g.outSize; ++o) {
        int64_t gr = oc / g.mg, mc = oc % g.mg;
        float acc = 0;
        for (int64_t kk = 0; kk < g.kSize; ++kk) {
          int64_t i = transposedSource(g, o, kk);
          if (i < 0) continue;
          for (int64_t ic = gr * g.cg; ic < (gr + 1) * g.cg; ++ic)
            acc += H::load(xh[(b * g.c + ic) * g.inSize + i]) *
                   H::load(wh[(ic * g.mg + mc) * g.kSize + kk]);
        }
        yh[(b * g.m + oc) * g.outSize + o] = H::store(acc);
      }
}

} // namespace
} // namespace coil::cpu

using namespace coil::cpu;

extern "C" {

#define COIL_CPU_DEFINE_GEMM(S, T)                                                                 \
  int32_t coil_cpu_gemm_##S(const void *a, const void *b, void *y, int64_t batch, int64_t m,       \
                            int64_t n, int64_t k, int64_t transA, int64_t transB, int64_t strideA, \
                            int64_t strideB, double alpha) {                                       \
    return gemmBatched<T>(static_cast<const T *>(a), static_cast<const T *>(b), nullptr,           \
                          static_cast<T *>(y), batch, m, n, k, transA, transB, strideA, strideB,   \
                          0, alpha, 0.0);                                                          \
  }                                                                                                \
  int32_t coil_cpu_gemm_c_##S(const void *a, const void *b, const void *c, void *y, int64_t batch, \
                              int64_t m, int64_t n, int64_t k, int64_t transA, int64_t transB,     \
                              int64_t strideA, int64_t strideB, int64_t strideC, double alpha,     \
                              double beta) {                                                       \
    return gemmBatched<T>(static_cast<const T *>(a), static_cast<const T *>(b),                    \
                          static_cast<const T *>(c), static_cast<T *>(y), batch, m, n, k, transA,  \
                          transB, strideA, strideB, strideC, alpha, beta);                         \
  }                                                                                                \
  int32_t coil_cpu_conv_##S(                                                                       \
      const void *x, const void *w, void *y, int64_t n, int64_t c, int64_t m, int64_t group,       \
      int64_t nd, int64_t in0, int64_t in1, int64_t in2, int64_t k0, int64_t k1, int64_t k2,       \
      int64_t out0, int64_t out1, int64_t out2, int64_t s0, int64_t s1, int64_t s2, int64_t d0,    \
      int64_t d1, int64_t d2, int64_t p0, int64_t p1, int64_t p2) {                                \
    const int64_t in[3] = {in0, in1, in2}, k[3] = {k0, k1, k2}, out[3] = {out0, out1, out2};       \
    const int64_t s[3] = {s0, s1, s2}, d[3] = {d0, d1, d2}, p[3] = {p0, p1, p2};                   \
    ConvGeom g;                                                                                    \
    if (int32_t rc = makeGeom("conv", g, n, c, m, group, nd, in, k, out, s, d, p)) return rc;      \
    conv<T>(static_cast<const T *>(x), static_cast<T *>(y), static_cast<const T *>(w), g);         \
    return 0;                                                                                      \
  }                                                                                                \
  int32_t coil_cpu_conv_transpose_##S(                                                             \
      const void *x, const void *w, void *y, int64_t n, int64_t c, int64_t m, int64_t group,       \
      int64_t nd, int64_t in0, int64_t in1, int64_t in2, int64_t k0, int64_t k1, int64_t k2,       \
      int64_t out0, int64_t out1, int64_t out2, int64_t s0, int64_t s1, int64_t s2, int64_t d0,    \
      int64_t d1, int64_t d2, int64_t p0, int64_t p1, int64_t p2) {                                \
    const int64_t in[3] = {in0, in1, in2}, k[3] = {k0, k1, k2}, out[3] = {out0, out1, out2};       \
    const int64_t s[3] = {s0, s1, s2}, d[3] = {d0, d1, d2}, p[3] = {p0, p1, p2};                   \
    ConvGeom g;                                                                                    \
    if (int32_t rc = makeGeom("conv transpose", g, n, c, m, group, nd, in, k, out, s, d, p))       \
      return rc;                                                                                   \
    convTranspose<T>(static_cast<const T *>(x), static_cast<T *>(y), static_cast<const T *>(w),    \
                     g);                                                                           \
    return 0;                                                                                      \
  }                                                                                                \
  int32_t coil_cpu_det_##S(const void *x, void *y, int64_t batch, int64_t n) {                     \
    return det<T>(static_cast<const T *>(x), static_cast<T *>(y), batch, n);                       \
  }

COIL_CPU_DEFINE_GEMM(f32, float)
COIL_CPU_DEFINE_GEMM(f64, double)
#undef COIL_CPU_DEFINE_GEMM

#define COIL_CPU_DEFINE_GEMM_HALF(S, H)                                                            \
  int32_t coil_cpu_gemm_##S(const void *a, const void *b, void *y, int64_t batch, int64_t m,       \
                            int64_t n, int64_t k, int64_t transA, int64_t transB, int64_t strideA, \
                            int64_t strideB, double alpha) {                                       \
    return gemmHalf<H>(a, b, nullptr, y, batch, m, n, k, transA, transB, strideA, strideB, 0,      \
                       alpha, 0.0);                                                                \
  }                                                                                                \
  int32_t coil_cpu_gemm_c_##S(const void *a, const void *b, const void *c, void *y, int64_t batch, \
                              int64_t m, int64_t n, int64_t k, int64_t transA, int64_t transB,     \
                              int64_t strideA, int64_t strideB, int64_t strideC, double alpha,     \
                              double beta) {                                                       \
    return gemmHalf<H>(a, b, c, y, batch, m, n, k, transA, transB, strideA, strideB, strideC,      \
                       alpha, beta);                                                               \
  }                                                                                                \
  int32_t coil_cpu_conv_##S(                                                                       \
      const void *x, const void *w, void *y, int64_t n, int64_t c, int64_t m, int64_t group,       \
      int64_t nd, int64_t in0, int64_t in1, int64_t in2, int64_t k0, int64_t k1, int64_t k2,       \
      int64_t out0, int64_t out1, int64_t out2, int64_t s0, int64_t s1, int64_t s2, int64_t d0,    \
      int64_t d1, int64_t d2, int64_t p0, int64_t p1, int64_t p2) {                                \
    const int64_t in[3] = {in0, in1, in2}, k[3] = {k0, k1, k2}, out[3] = {out0, out1, out2};       \
    const int64_t s[3] = {s0, s1, s2}, d[3] = {d0, d1, d2}, p[3] = {p0, p1, p2};                   \
    ConvGeom g;                                                                                    \
    if (int32_t rc = makeGeom("conv", g, n, c, m, group, nd, in, k, out, s, d, p)) return rc;      \
    convHalf<H>(x, w, y, g);                                                                       \
    return 0;                                                                                      \
  }                                                                                                \
  int32_t coil_cpu_conv_transpose_##S(                                                             \
      const void *x, const void *w, void *y, int64_t n, int64_t c, int64_t m, int64_t group,       \
      int64_t nd, int64_t in0, int64_t in1, int64_t in2, int64_t k0, int64_t k1, int64_t k2,       \
      int64_t out0, int64_t out1, int64_t out2, int64_t s0, int64_t s1, int64_t s2, int64_t d0,    \
      int64_t d1, int64_t d2, int64_t p0, int64_t p1, int64_t p2) {                                \
    const int64_t in[3] = {in0, in1, in2}, k[3] = {k0, k1, k2}, out[3] = {out0, out1, out2};       \
    const int64_t s[3] = {s0, s1, s2}, d[3] = {d0, d1, d2}, p[3] = {p0, p1, p2};                   \
    ConvGeom g;                                                                                    \
    if (int32_t rc = makeGeom("conv transpose", g, n, c, m, group, nd, in, k, out, s, d, p))       \
      return rc;                                                                                   \
    convTransposeHalf<H>(x, w, y, g);                                                              \
    return 0;                                                                                      \
  }

COIL_CPU_DEFINE_GEMM_HALF(f16, HalfBits)
COIL_CPU_DEFINE_GEMM_HALF(bf16, Bf16Bits)
#undef COIL_CPU_DEFINE_GEMM_HALF

#define COIL_CPU_DEFINE_GEMM_BIAS(S, CALL)                                                         \
  int32_t coil_cpu_gemm_bias_##S(const void *a, const void *b, const void *bias, void *y,          \
                                 int64_t batch, int64_t m, int64_t n, int64_t k, int64_t transA,   \
                                 int64_t transB, int64_t strideA, int64_t strideB, double alpha,   \
                                 int64_t relu) {                                                   \
    return CALL(a, b, bias, y, batch, m, n, k, transA, transB, strideA, strideB, alpha, relu);     \
  }

COIL_CPU_DEFINE_GEMM_BIAS(f32, gemmBias<float>)
COIL_CPU_DEFINE_GEMM_BIAS(f64, gemmBias<double>)
COIL_CPU_DEFINE_GEMM_BIAS(f16, gemmBiasHalf<HalfBits>)
COIL_CPU_DEFINE_GEMM_BIAS(bf16, gemmBiasHalf<Bf16Bits>)
#undef COIL_CPU_DEFINE_GEMM_BIAS

} // extern "C"
