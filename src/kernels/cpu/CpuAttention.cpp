// Fused scaled dot-product attention on the CPU (coil_cpu_attention_*, CpuKernels.h): a
// flash-attention style kernel. Work is split into tasks of (batch, head, block of query rows),
// run in parallel under OpenMP; each task walks the keys block by block with an online softmax
// (running max and sum per row, accumulator rescaled when the max grows), so memory is a few
// blocks per thread and never seqQ x seqK. f16/bf16 are widened to f32 while packing; f32,
// f16 and bf16 accumulate in f32, f64 in f64.
//
// The arithmetic is one body (CpuAttentionBody.inc) built three times: for AVX-512 and for
// AVX2 + FMA + F16C (register tiles of vectors, a polynomial exp), chosen at run time where the
// CPU has them, and as portable scalar code (std::exp), which also runs every f64 call.
#include "kernels/cpu/CpuAttention.h"

#include "kernels/cpu/CpuFeatures.h"
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/CpuKernelsImpl.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <immintrin.h>
#include <limits>
#include <memory>
#include <new>
#include <omp.h>
#include <type_traits>

namespace coil::cpu {
namespace {

/// The arguments of one call, validated (names follow CpuKernels.h; G = heads / kvHeads).
struct Params {
  const void *q, *k, *v, *mask;
  void *y;
  int64_t B, H, HK, G, S, T, D, DV;
  int64_t qOff, qSB, qSH, qSS, kOff, kSB, kSH, kSS, vOff, vSB, vSH, vSS, ySB, ySH, ySS;
  int64_t maskKind, mOff, mSB, mSH, mSQ, mSK;
  int64_t causal, causalOffset;
  double scale, softcap;
};

/// Query rows per task and keys per block.
constexpr int64_t kBr = 128, kBc = 128;

// Element types of the tensors.
struct EF64 {
  using S = double;
};
struct EF32 {
  using S = float;
};
struct EF16 {
  using S = uint16_t;
};
struct EBF16 {
  using S = uint16_t;
};

template <typename E> inline double toDouble(typename E::S v) {
  if constexpr (std::is_same_v<E, EF16>)
    return halfBitsToFloat(v);
  else if constexpr (std::is_same_v<E, EBF16>)
    return bf16BitsToFloat(v);
  else
    return v;
}

/// Stores an accumulated result, rounded once to the tensor's type.
template <typename E, typename A> inline void storeOut(void *y, int64_t i, A v) {
  if constexpr (std::is_same_v<E, EF16>)
    store<EF16>(y, i, floatToHalfBits(float(v)));
  else if constexpr (std::is_same_v<E, EBF16>)
    store<EBF16>(y, i, floatToBf16Bits(float(v)));
  else
    store<E>(y, i, typename E::S(v));
}

/// n elements of a tensor from element `base` on, as A (the scalar conversion).
template <typename E, typename A>
inline void widenScalar(const void *src, int64_t base, A *dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = A(toDouble<E>(load<E>(src, base + i)));
}

// --- portable scalar code (f64, and f32/f16/bf16 on CPUs without AVX2) -------------------------

template <typename Acc> struct ScalarOps {
  using A = Acc;
  using V = Acc;
  static constexpr int64_t W = 1;
  static V zero() { return 0; }
  static V set1(A a) { return a; }
  static V load(const A *p) { return *p; }
  static void store(A *p, V v) { *p = v; }
  static V fma(V a, V b, V c) { return a * b + c; }
  static V mul(V a, V b) { return a * b; }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V max(V a, V b) { return a < b ? b : a; }
  static V maskBias(V s, V bias) {
    return bias == -std::numeric_limits<A>::infinity() ? bias : s + bias;
  }
  static V exp(V x) { return std::exp(x); }
  static A hmax(V v) { return v; }
  static A hsum(V v) { return v; }
  template <typename E> static void widen(const void *src, int64_t base, A *dst, int64_t n) {
    widenScalar<E>(src, base, dst, n);
  }
  /// dst[c * ldd + r] = src[r * lds + c] for a W x W block.
  static void transpose(const A *src, int64_t lds, A *dst, int64_t ldd) { *dst = *src; }
};

namespace portable32 {
using Ops = ScalarOps<float>;
#include "kernels/cpu/CpuAttentionBody.inc"
} // namespace portable32

namespace portable64 {
using Ops = ScalarOps<double>;
#include "kernels/cpu/CpuAttentionBody.inc"
} // namespace portable64

// --- AVX2 + FMA + F16C -----------------------------------------------------------------------

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#ifdef __clang__ // clang ignores GCC's target pragma
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#endif
namespace avx2 {

struct Ops {
  using A = float;
  using V = __m256;
  static constexpr int64_t W = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float a) { return _mm256_set1_ps(a); }
  static V load(const float *p) { return _mm256_loadu_ps(p); }
  static void store(float *p, V v) { _mm256_storeu_ps(p, v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V maskBias(V s, V bias) {
    V negInf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
    return _mm256_blendv_ps(_mm256_add_ps(s, bias), negInf,
                            _mm256_cmp_ps(bias, negInf, _CMP_EQ_OQ));
  }
  /// e^x within 2 ulp for x >= -87.3 (0 below, NaN stays NaN; x <= 0 here).
  static V exp(V x) {
    const V lo = _mm256_set1_ps(-87.33654f), hi = _mm256_set1_ps(88.3762626647949f);
    V xc = _mm256_min_ps(hi, _mm256_max_ps(lo, x)); // NaN passes through (second operand)
    V n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    V r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    V y = _mm256_set1_ps(1.0f / 5040);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.0f / 720));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.0f / 120));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.0f / 24));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.0f / 6));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(0.5f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.0f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.0f));
    __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    V res = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
    return _mm256_and_ps(res, _mm256_cmp_ps(x, lo, _CMP_NLT_UQ));
  }
  static float hsum(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float hmax(V v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  template <typename E> static void widen(const void *src, int64_t base, float *dst, int64_t n) {
    int64_t i = 0;
    if constexpr (std::is_same_v<E, EF32>) {
      const float *s = static_cast<const float *>(src) + base;
      for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_loadu_ps(s + i));
    } else if constexpr (std::is_same_v<E, EF16>) {
      const uint16_t *s = static_cast<const uint16_t *>(src) + base;
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(
            dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(s + i))));
    } else if constexpr (std::is_same_v<E, EBF16>) {
      const uint16_t *s = static_cast<const uint16_t *>(src) + base;
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(
            dst + i,
            _mm256_castsi256_ps(_mm256_slli_epi32(
                _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(s + i))),
                16)));
    }
    widenScalar<E>(src, base + i, dst + i, n - i);
  }
  /// dst[c * ldd + r] = src[r * lds + c] for an 8 x 8 block.
  static void transpose(const float *src, int64_t lds, float *dst, int64_t ldd) {
    V r[8], t[8], u[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
    for (int k = 0; k < 4; ++k) {
      t[2 * k] = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
      t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    for (int g = 0; g < 2; ++g) {
      __m256d a = _mm256_castps_pd(t[4 * g]), b = _mm256_castps_pd(t[4 * g + 1]),
              c = _mm256_castps_pd(t[4 * g + 2]), d = _mm256_castps_pd(t[4 * g + 3]);
      u[4 * g] = _mm256_castpd_ps(_mm256_unpacklo_pd(a, c));
      u[4 * g + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(a, c));
      u[4 * g + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(b, d));
      u[4 * g + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(b, d));
    }
    // u[4g + m] holds, in 128-bit lane l, column 4l + m of rows 4g .. 4g + 3.
    for (int m = 0; m < 4; ++m) {
      _mm256_storeu_ps(dst + m * ldd, _mm256_permute2f128_ps(u[m], u[4 + m], 0x20));
      _mm256_storeu_ps(dst + (4 + m) * ldd, _mm256_permute2f128_ps(u[m], u[4 + m], 0x31));
    }
  }
};

#include "kernels/cpu/CpuAttentionBody.inc"
} // namespace avx2
#ifdef __clang__
#pragma clang attribute pop
#endif
#pragma GCC pop_options

// --- AVX-512 -----------------------------------------------------------------------------------

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,f16c")
#ifdef __clang__ // clang ignores GCC's target pragma
#pragma clang attribute push(                                                                      \
    __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,f16c"))),                   \
    apply_to = function)
#endif
// GCC 12 warns about the self-initialized `__Y = __Y` of its own _mm512_undefined_* helpers
// once they are inlined here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
namespace avx512 {

struct Ops {
  using A = float;
  using V = __m512;
  static constexpr int64_t W = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float a) { return _mm512_set1_ps(a); }
  static V load(const float *p) { return _mm512_loadu_ps(p); }
  static void store(float *p, V v) { _mm512_storeu_ps(p, v); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V maskBias(V s, V bias) {
    V negInf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(bias, negInf, _CMP_EQ_OQ),
                                _mm512_add_ps(s, bias), negInf);
  }
  /// e^x as avx2::Ops::exp.
  static V exp(V x) {
    const V lo = _mm512_set1_ps(-87.33654f), hi = _mm512_set1_ps(88.3762626647949f);
    V xc = _mm512_min_ps(hi, _mm512_max_ps(lo, x)); // NaN passes through (second operand)
    V n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    V r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    V y = _mm512_set1_ps(1.0f / 5040);
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f / 720));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f / 120));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f / 24));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f / 6));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(0.5f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f));
    __m512i e =
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    V res = _mm512_mul_ps(y, _mm512_castsi512_ps(e));
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ), res);
  }
  static float hsum(V v) { return _mm512_reduce_add_ps(v); }
  static float hmax(V v) { return _mm512_reduce_max_ps(v); }
  template <typename E> static void widen(const void *src, int64_t base, float *dst, int64_t n) {
    int64_t i = 0;
    if constexpr (std::is_same_v<E, EF32>) {
      const float *s = static_cast<const float *>(src) + base;
      for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, _mm512_loadu_ps(s + i));
    } else if constexpr (std::is_same_v<E, EF16>) {
      const uint16_t *s = static_cast<const uint16_t *>(src) + base;
      for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(
            dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(s + i))));
    } else if constexpr (std::is_same_v<E, EBF16>) {
      const uint16_t *s = static_cast<const uint16_t *>(src) + base;
      for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(
            dst + i,
            _mm512_castsi512_ps(_mm512_slli_epi32(
                _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(s + i))),
                16)));
    }
    widenScalar<E>(src, base + i, dst + i, n - i);
  }
  /// dst[c * ldd + r] = src[r * lds + c] for a 16 x 16 block.
  static void transpose(const float *src, int64_t lds, float *dst, int64_t ldd) {
    V r[16], t[16], u[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
    for (int k = 0; k < 8; ++k) {
      t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
      t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    for (int g = 0; g < 4; ++g) {
      __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 1]),
              c = _mm512_castps_pd(t[4 * g + 2]), d = _mm512_castps_pd(t[4 * g + 3]);
      u[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
      u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
      u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
      u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    // u[4g + m] holds, in 128-bit lane l, column 4l + m of rows 4g .. 4g + 3: a 4 x 4
    // transpose of lanes gives the columns.
    for (int m = 0; m < 4; ++m) {
      V x0 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x44),
        x1 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xEE);
      V y0 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x44),
        y1 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xEE);
      _mm512_storeu_ps(dst + m * ldd, _mm512_shuffle_f32x4(x0, y0, 0x88));
      _mm512_storeu_ps(dst + (4 + m) * ldd, _mm512_shuffle_f32x4(x0, y0, 0xDD));
      _mm512_storeu_ps(dst + (8 + m) * ldd, _mm512_shuffle_f32x4(x1, y1, 0x88));
      _mm512_storeu_ps(dst + (12 + m) * ldd, _mm512_shuffle_f32x4(x1, y1, 0xDD));
    }
  }
};

#include "kernels/cpu/CpuAttentionBody.inc"
} // namespace avx512
#pragma GCC diagnostic pop
#ifdef __clang__
#pragma clang attribute pop
#endif
#pragma GCC pop_options

// --- dispatch ----------------------------------------------------------------------------------

std::atomic<int> isaLimit{int(AttentionIsa::Avx512)};

/// The AVX2 path also converts f16 with F16C.
bool cpuHasAvx2F16c() {
  static const bool yes = hasAvx2() && hasF16c();
  return yes;
}

/// The largest element index of a tensor: off + sum (extent_i - 1) * stride_i + last - 1, all
/// extents > 0; false when it overflows.
bool lastIndex(int64_t off, std::initializer_list<std::pair<int64_t, int64_t>> dims, int64_t last,
               int64_t *out) {
  int64_t acc = off;
  for (auto [extent, stride] : dims) {
    int64_t t;
    if (__builtin_mul_overflow(extent - 1, stride, &t) || __builtin_add_overflow(acc, t, &acc))
      return false;
  }
  if (__builtin_add_overflow(acc, last - 1, &acc)) return false;
  *out = acc;
  return true;
}

/// Runs `task` for every task index in parallel, each thread with a workspace of `wsElems` A.
template <typename A>
int32_t runTasks(const char *fn, int64_t tasks, size_t wsElems, double work,
                 void (*task)(const Params &, A *, int64_t), const Params &p) {
  std::atomic<bool> noMemory{false};
  const bool parallel = tasks > 1 && work > 65536.0 && !omp_in_parallel();
#pragma omp parallel if (parallel)
  {
    std::unique_ptr<A[]> ws(new (std::nothrow) A[wsElems]);
    if (!ws) noMemory.store(true, std::memory_order_relaxed);
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; ++t)
      if (ws) task(p, ws.get(), t);
  }
  if (noMemory.load()) return fail("%s: out of memory for the workspace", fn);
  return 0;
}

template <typename E>
int32_t attention(const char *fn, const void *q, const void *k, const void *v, const void *mask,
                  void *y, const int64_t (&a)[32], double scale, double softcap) {
  Params p{};
  p.q = q, p.k = k, p.v = v, p.mask = mask, p.y = y;
  p.B = a[0], p.H = a[1], p.HK = a[2], p.S = a[3], p.T = a[4], p.D = a[5], p.DV = a[6];
  p.qOff = a[7], p.qSB = a[8], p.qSH = a[9], p.qSS = a[10];
  p.kOff = a[11], p.kSB = a[12], p.kSH = a[13], p.kSS = a[14];
  p.vOff = a[15], p.vSB = a[16], p.vSH = a[17], p.vSS = a[18];
  p.ySB = a[19], p.ySH = a[20], p.ySS = a[21];
  p.maskKind = a[22], p.mOff = a[23], p.mSB = a[24], p.mSH = a[25], p.mSQ = a[26], p.mSK = a[27];
  p.causal = a[28], p.causalOffset = a[29];
  p.scale = scale, p.softcap = softcap;
  static const char *const kNames[] = {
      "batch",       "heads",       "kvHeads",     "seqQ",       "seqK",     "headDim",
      "headDimV",    "qOffset",     "qStrideB",    "qStrideH",   "qStrideS", "kOffset",
      "kStrideB",    "kStrideH",    "kStrideS",    "vOffset",    "vStrideB", "vStrideH",
      "vStrideS",    "yStrideB",    "yStrideH",    "yStrideS",   "maskKind", "maskOffset",
      "maskStrideB", "maskStrideH", "maskStrideQ", "maskStrideK"};
  // The mask's offset and strides matter only with a mask.
  for (int i = 0; i < (a[22] != 0 ? 28 : 23); ++i)
    if (a[i] < 0) return fail("%s: %s is negative (%lld)", fn, kNames[i], ll(a[i]));
  if (p.HK == 0 ? p.H != 0 : p.H % p.HK != 0)
    return fail("%s: heads (%lld) is not a multiple of kvHeads (%lld)", fn, ll(p.H), ll(p.HK));
  if (p.maskKind > 2) return fail("%s: maskKind must be 0, 1 or 2, got %lld", fn, ll(p.maskKind));
  if (p.B == 0 || p.H == 0 || p.S == 0 || p.DV == 0) return 0;
  p.G = p.H / p.HK;
  // Offsets beyond the sizes mask every key or none: clamped, so that i + offset cannot overflow.
  p.causalOffset =
      std::clamp<int64_t>(p.causalOffset, -std::min<int64_t>(p.S, int64_t(1) << 60) - 1,
                          std::min<int64_t>(p.T, int64_t(1) << 60) + 1);
  int64_t last, nqb = (p.S + kBr - 1) / kBr, tasks;
  bool ok = lastIndex(p.qOff, {{p.B, p.qSB}, {p.H, p.qSH}, {p.S, p.qSS}}, std::max<int64_t>(p.D, 1),
                      &last) &&
            lastIndex(0, {{p.B, p.ySB}, {p.H, p.ySH}, {p.S, p.ySS}}, p.DV, &last) &&
            mulSizes({p.B, p.H, nqb}, &tasks);
  if (ok && p.T > 0)
    ok = lastIndex(p.kOff, {{p.B, p.kSB}, {p.HK, p.kSH}, {p.T, p.kSS}}, std::max<int64_t>(p.D, 1),
                   &last) &&
         lastIndex(p.vOff, {{p.B, p.vSB}, {p.HK, p.vSH}, {p.T, p.vSS}}, p.DV, &last) &&
         (p.maskKind == 0 ||
          lastIndex(p.mOff, {{p.B, p.mSB}, {p.H, p.mSH}, {p.S, p.mSQ}, {p.T, p.mSK}}, 1, &last));
  if (!ok) return fail("%s: sizes overflow", fn);
  // Work in multiply-adds, for the decision to run threads.
  double work = double(p.B) * double(p.H) * double(p.S) * double(p.T + 1) * double(p.D + p.DV + 1);
  if constexpr (std::is_same_v<E, EF64>) {
    return runTasks<double>(fn, tasks, portable64::workspaceElems(p), work,
                            &portable64::attentionTask<E>, p);
  } else {
    AttentionIsa isa = attentionIsa();
    if (isa == AttentionIsa::Avx512)
      return runTasks<float>(fn, tasks, avx512::workspaceElems(p), work, &avx512::attentionTask<E>,
                             p);
    if (isa == AttentionIsa::Avx2)
      return runTasks<float>(fn, tasks, avx2::workspaceElems(p), work, &avx2::attentionTask<E>, p);
    return runTasks<float>(fn, tasks, portable32::workspaceElems(p), work,
                           &portable32::attentionTask<E>, p);
  }
}

} // namespace

void setAttentionIsaLimit(AttentionIsa limit) {
  isaLimit.store(int(limit), std::memory_order_relaxed);
}

AttentionIsa attentionIsa() {
  int limit = isaLimit.load(std::memory_order_relaxed);
  if (limit >= int(AttentionIsa::Avx512) && cpuHasAvx512()) return AttentionIsa::Avx512;
  if (limit >= int(AttentionIsa::Avx2) && cpuHasAvx2F16c()) return AttentionIsa::Avx2;
  return AttentionIsa::Portable;
}

} // namespace coil::cpu

#define COIL_CPU_DEFINE_ATTENTION(S, E)                                                            \
  extern "C" int32_t coil_cpu_attention_##S(                                                       \
      const void *q, const void *k, const void *v, const void *mask, void *y, int64_t batch,       \
      int64_t heads, int64_t kvHeads, int64_t seqQ, int64_t seqK, int64_t headDim,                 \
      int64_t headDimV, int64_t qOffset, int64_t qStrideB, int64_t qStrideH, int64_t qStrideS,     \
      int64_t kOffset, int64_t kStrideB, int64_t kStrideH, int64_t kStrideS, int64_t vOffset,      \
      int64_t vStrideB, int64_t vStrideH, int64_t vStrideS, int64_t yStrideB, int64_t yStrideH,    \
      int64_t yStrideS, int64_t maskKind, int64_t maskOffset, int64_t maskStrideB,                 \
      int64_t maskStrideH, int64_t maskStrideQ, int64_t maskStrideK, int64_t causal,               \
      int64_t causalOffset, double scale, double softcap) {                                        \
    const int64_t a[32] = {batch,       heads,        kvHeads,     seqQ,                           \
                           seqK,        headDim,      headDimV,    qOffset,                        \
                           qStrideB,    qStrideH,     qStrideS,    kOffset,                        \
                           kStrideB,    kStrideH,     kStrideS,    vOffset,                        \
                           vStrideB,    vStrideH,     vStrideS,    yStrideB,                       \
                           yStrideH,    yStrideS,     maskKind,    maskOffset,                     \
                           maskStrideB, maskStrideH,  maskStrideQ, maskStrideK,                    \
                           causal != 0, causalOffset, 0,           0};                             \
    return coil::cpu::attention<coil::cpu::E>("coil_cpu_attention_" #S, q, k, v, mask, y, a,       \
                                              scale, softcap);                                     \
  }
COIL_CPU_DEFINE_ATTENTION(f64, EF64)
COIL_CPU_DEFINE_ATTENTION(f32, EF32)
COIL_CPU_DEFINE_ATTENTION(f16, EF16)
COIL_CPU_DEFINE_ATTENTION(bf16, EBF16)
#undef COIL_CPU_DEFINE_ATTENTION
