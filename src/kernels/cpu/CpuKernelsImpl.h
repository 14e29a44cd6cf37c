/// \file Private helpers of the CPU kernels: element traits per dtype (conversions to and from
/// double that match support/DType's rules, ordering with NaN above numbers) and checked size math.
/// kernels/cpu is a leaf library, so it carries its own copy of the f16/bf16 conversions.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <new>
#include <type_traits>
#include <vector>

namespace coil::cpu {

/// Records the message of a failed call (printf-style, lowercase, "<op>: <rule and values>") for
/// coil_cpu_last_error on this thread and returns 1, the failure status of every kernel.
int32_t fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/// Short for the long long casts of printf arguments.
inline long long ll(int64_t v) {
  return static_cast<long long>(v);
}

/// a * b into *out; false when a or b is negative or the product overflows.
inline bool mulSize(int64_t a, int64_t b, int64_t *out) {
  if (a < 0 || b < 0) return false;
  return !__builtin_mul_overflow(a, b, out);
}
inline bool mulSizes(std::initializer_list<int64_t> v, int64_t *out) {
  int64_t p = 1;
  for (int64_t x : v)
    if (!mulSize(p, x, &p)) return false;
  *out = p;
  return true;
}

float halfBitsToFloat(uint16_t h);
uint16_t floatToHalfBits(float f);
inline float bf16BitsToFloat(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t floatToBf16Bits(float f);
/// double -> float as IEEE rounding does (out-of-range values become infinity), without the
/// undefined behaviour of a C++ conversion.
float doubleToFloat(double v);
/// double -> float rounded to odd, so that a second rounding to f16/bf16 is correct.
float doubleToFloatOdd(double v);

// f16 / bf16 kernels convert to f32, run the f32 kernels and round each result once.
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

/// y = f(x, w) computed in f32 for 16-bit H: f gets widened copies of x (xs elements) and w (ws)
/// and an f32 output of ys elements, which is then narrowed into y. False, with y untouched,
/// when memory for the copies (or for f's own workspaces) runs out.
template <typename H, typename F>
bool viaF32(const void *x, int64_t xs, const void *w, int64_t ws, void *y, int64_t ys, F &&f) {
  try {
    std::vector<float> x32 = widen<H>(x, xs), w32 = widen<H>(w, ws), y32(static_cast<size_t>(ys));
    f(x32.data(), w32.data(), y32.data());
    narrow<H>(y32, y);
    return true;
  } catch (const std::bad_alloc &) {
    return false;
  }
}

/// y (m x n, ldy n) = alpha * op(a) op(b) + beta * y, one matrix, through BLAS when the sizes
/// fit BLAS's int, else by a plain loop (float and double; CpuGemm.cpp).
template <typename T>
void gemmOne(const T *a, const T *b, T *y, int64_t m, int64_t n, int64_t k, bool ta, bool tb,
             T alpha, T beta);
/// Up to this many multiply-adds per matrix, batches run in parallel, one matrix per thread:
/// OpenBLAS runs such sizes on a single thread anyway (its multithreading threshold is
/// 4 * 65536), so threads never nest.
constexpr int64_t kSmallGemm = int64_t(1) << 18;
/// Below this many multiply-adds, gemmOne runs BLAS on one thread.
constexpr int64_t kSerialGemm = int64_t(1) << 21;

/// Multiply-adds from which a convolution runs on all threads; smaller ones run on the calling
/// thread. 2^19 is some 15-25 us on one Zen 4 core, several times what starting and joining a
/// team of threads costs on an idle machine; on a loaded one each team waits for a thread to be
/// scheduled (up to a time slice), which small convolutions (the model zoo's, hundreds per run)
/// measured far slower with than without.
constexpr int64_t kConvParallelWork = int64_t(1) << 19;

struct F64T {
  using S = double;
  static constexpr bool kFloat = true;
  static double toDouble(S v) { return v; }
  static S fromDouble(double d) { return d; }
};
struct F32T {
  using S = float;
  static constexpr bool kFloat = true;
  static double toDouble(S v) { return v; }
  static S fromDouble(double d) { return doubleToFloat(d); }
};
struct F16T {
  using S = uint16_t;
  static constexpr bool kFloat = true;
  static double toDouble(S v) { return halfBitsToFloat(v); }
  static S fromDouble(double d) { return floatToHalfBits(doubleToFloatOdd(d)); }
};
struct BF16T {
  using S = uint16_t;
  static constexpr bool kFloat = true;
  static double toDouble(S v) { return bf16BitsToFloat(v); }
  static S fromDouble(double d) { return floatToBf16Bits(doubleToFloatOdd(d)); }
};
template <typename T> struct IntT {
  using S = T;
  static constexpr bool kFloat = false;
  static double toDouble(S v) { return double(v); }
};
using I64T = IntT<int64_t>;
using I32T = IntT<int32_t>;
using I16T = IntT<int16_t>;
using I8T = IntT<int8_t>;
using U64T = IntT<uint64_t>;
using U32T = IntT<uint32_t>;
using U16T = IntT<uint16_t>;
using U8T = IntT<uint8_t>;
using BoolT = IntT<uint8_t>;

template <typename E> typename E::S load(const void *p, int64_t i) {
  typename E::S v;
  std::memcpy(&v, static_cast<const char *>(p) + size_t(i) * sizeof(v), sizeof(v));
  return v;
}
template <typename E> void store(void *p, int64_t i, typename E::S v) {
  std::memcpy(static_cast<char *>(p) + size_t(i) * sizeof(v), &v, sizeof(v));
}

/// -1, 0, 1; floats compare as numbers with NaN above every number (two NaNs are equal).
template <typename E> int compareValues(typename E::S a, typename E::S b) {
  if constexpr (E::kFloat) {
    double x = E::toDouble(a), y = E::toDouble(b);
    bool nx = std::isnan(x), ny = std::isnan(y);
    if (nx || ny) return nx == ny ? 0 : (nx ? 1 : -1);
    return x < y ? -1 : (x > y ? 1 : 0);
  } else {
    return a < b ? -1 : (b < a ? 1 : 0);
  }
}
template <typename E> bool isNonZero(typename E::S v) {
  if constexpr (E::kFloat)
    return E::toDouble(v) != 0.0; // -0.0 is zero, NaN is not
  else
    return v != 0;
}

/// Geometry of a conv or transposed conv with up to 3 spatial dims, validated.
struct ConvGeom {
  int64_t n = 0, c = 0, m = 0, group = 1, cg = 0, mg = 0;
  int64_t in[3], k[3], out[3], s[3], d[3], p[3];
  int64_t inSize = 0, kSize = 0, outSize = 0, colRows = 0;
};

/// Validates a conv or transposed conv geometry (`nd` 1 to 3 spatial dims, right-aligned into
/// 3 with unused leading dims of size 1): 0, or the status of fail() naming `op` and the rule.
int32_t makeGeom(const char *op, ConvGeom &g, int64_t n, int64_t c, int64_t m, int64_t group,
                 int64_t nd, const int64_t in[3], const int64_t k[3], const int64_t out[3],
                 const int64_t s[3], const int64_t d[3], const int64_t p[3]);

/// The geometry arguments of the conv entry points of CpuKernels.h, in their order: n, c, m,
/// group, nd, then in, k, out, strides, dilations and pads of 3 dims each.
using ConvArgs = int64_t[23];
inline int32_t makeGeom(const char *op, ConvGeom &g, const ConvArgs &a) {
  return makeGeom(op, g, a[0], a[1], a[2], a[3], a[4], a + 5, a + 8, a + 11, a + 14, a + 17,
                  a + 20);
}

/// Those arguments as a C parameter list, and (in a function declared with it) as a ConvArgs.
#define COIL_CPU_CONV_PARAMS                                                                       \
  int64_t n, int64_t c, int64_t m, int64_t group, int64_t nd, int64_t in0, int64_t in1,            \
      int64_t in2, int64_t k0, int64_t k1, int64_t k2, int64_t out0, int64_t out1, int64_t out2,   \
      int64_t s0, int64_t s1, int64_t s2, int64_t d0, int64_t d1, int64_t d2, int64_t p0,          \
      int64_t p1, int64_t p2
#define COIL_CPU_CONV_ARGS                                                                         \
  {                                                                                                \
    n, c, m, group, nd, in0, in1, in2, k0, k1, k2, out0, out1, out2, s0, s1, s2, d0, d1, d2, p0,   \
        p1, p2                                                                                     \
  }

/// y = conv(x, w) (+ bias, then clamped below at lo when `lower` and above at hi when `upper`)
/// for f32 as an implicit GEMM on AVX-512 CPUs (CpuConvAvx512.cpp); false, with nothing
/// written, where that path does not apply (another CPU, geometry or sizes).
bool convImplicitF32(const float *x, float *y, const float *w, const ConvGeom &g, const float *bias,
                     bool lower, bool upper, float lo, float hi);

/// y = depthwise conv(x, w) (+ bias, clamps as convImplicitF32) for f32 1-D/2-D depthwise
/// convolutions (one input channel per group) with a row stride of 1 or 2 and any window,
/// dilation, padding and stride between rows, on AVX-512 CPUs (CpuConvDwAvx512.cpp); false,
/// with nothing written, where the path does not apply.
bool depthwisePaddedF32(const float *x, float *y, const float *w, const ConvGeom &g,
                        const float *bias, bool lower, bool upper, float lo, float hi);

/// Whether the AVX-512 paths of the f32 convolutions may run (by default they do, where the
/// CPU has AVX-512 F/VL/BW/DQ); false sends them to the portable paths, for the tests of those.
void setConvAvx512Allowed(bool allowed);

} // namespace coil::cpu

// One macro application per dtype suffix and traits type.
#define COIL_CPU_FOR_EACH_NUMERIC(X)                                                               \
  X(f64, F64T)                                                                                     \
  X(f32, F32T)                                                                                     \
  X(f16, F16T)                                                                                     \
  X(bf16, BF16T)                                                                                   \
  X(i64, I64T)                                                                                     \
  X(i32, I32T) X(i16, I16T) X(i8, I8T) X(u64, U64T) X(u32, U32T) X(u16, U16T) X(u8, U8T)
#define COIL_CPU_FOR_EACH_DTYPE(X) COIL_CPU_FOR_EACH_NUMERIC(X) X(bool, BoolT)
