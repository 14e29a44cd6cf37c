// CPU kernels for GEMM (through BLAS) and Det, plus the scalar conversions the other kernel files
// share. f16/bf16 GEMMs widen their operands to f32, run the f32 kernels and round each result
// once. The convolutions are in CpuConv.cpp.
#include "kernels/cpu/Blas.h"
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/CpuKernelsImpl.h"

#include <algorithm>
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
    // Below kSerialGemm multiply-adds, one thread: OpenBLAS (OpenMP build) threads from 2^18,
    // where the fork and join of a parallel region cost more than they save. OpenBLAS reads
    // the thread count from omp_get_max_threads() at every call.
    int64_t work = 0;
    const bool serial = mulSizes({m, n, k}, &work) && work < kSerialGemm && !omp_in_parallel() &&
                        omp_get_max_threads() > 1;
    const int saved = serial ? omp_get_max_threads() : 0;
    if (serial) omp_set_num_threads(1);
    if constexpr (std::is_same_v<T, float>)
      blasSgemm(ta, tb, int(m), int(n), int(k), alpha, a, lda, b, ldb, beta, y, int(n));
    else
      blasDgemm(ta, tb, int(m), int(n), int(k), alpha, a, lda, b, ldb, beta, y, int(n));
    if (serial) omp_set_num_threads(saved);
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

template void gemmOne<float>(const float *, const float *, float *, int64_t, int64_t, int64_t, bool,
                             bool, float, float);
template void gemmOne<double>(const double *, const double *, double *, int64_t, int64_t, int64_t,
                              bool, bool, double, double);

namespace {

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
/// Rows [r0, r1) of the epilogue, one loop per `Relu` so that each vectorizes without tests.
template <typename T, typename B, bool Relu>
inline __attribute__((always_inline)) void biasRows(T *y, const B &bias, int64_t r0, int64_t r1,
                                                    int64_t n) {
  for (int64_t r = r0; r < r1; ++r) {
    T *yr = y + r * n;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      T v = yr[j] + T(bias(j));
      yr[j] = Relu ? (v < T(0) ? T(0) : v) : v;
    }
  }
}
template <typename T, typename B, bool Relu>
__attribute__((target("avx2,fma"))) void biasRowsAvx2(T *y, const B &bias, int64_t r0, int64_t r1,
                                                      int64_t n) {
  biasRows<T, B, Relu>(y, bias, r0, r1, n);
}
template <typename T, typename B, bool Relu>
void biasRowsBase(T *y, const B &bias, int64_t r0, int64_t r1, int64_t n) {
  biasRows<T, B, Relu>(y, bias, r0, r1, n);
}

template <typename T, typename B>
void biasEpilogue(T *y, const B &bias, int64_t rows, int64_t n, bool relu) {
  // The AVX2 + FMA clone where the CPU has them (the library is built for the baseline ISA).
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  auto run = [&](int64_t r0, int64_t r1) {
    if (avx2)
      relu ? biasRowsAvx2<T, B, true>(y, bias, r0, r1, n)
           : biasRowsAvx2<T, B, false>(y, bias, r0, r1, n);
    else
      relu ? biasRowsBase<T, B, true>(y, bias, r0, r1, n)
           : biasRowsBase<T, B, false>(y, bias, r0, r1, n);
  };
  if (rows > 1 && rows * n >= (int64_t(1) << 16)) {
#pragma omp parallel
    {
      const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
      run(rows * t / nt, rows * (t + 1) / nt);
    }
  } else {
    run(0, rows);
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
