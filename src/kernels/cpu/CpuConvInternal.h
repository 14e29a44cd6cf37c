/// \file Private to the CPU convolutions (CpuConv.cpp: geometry, im2col + GEMM, transposed and
/// f16/bf16 convolutions, the extern entry points; CpuConvDepthwise.cpp: the depthwise paths;
/// CpuConvEpilogue.cpp: the bias/clamp epilogue): what those files share.
#pragma once

#include "kernels/cpu/CpuAvx512.h"
#include "kernels/cpu/CpuFeatures.h"
#include "kernels/cpu/CpuKernelsImpl.h"

#include <cstddef>
#include <cstdint>
#include <immintrin.h>
#include <memory>
#include <new>

// Internal to the CPU kernels (hidden: not exported, not interposable).
#pragma GCC visibility push(hidden)

namespace coil::cpu {

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

/// Input planes of at most this many elements (four vectors) with rows of fewer than 16
/// outputs take im2colSmallPlaneAvx512; its table holds at most kSmallPlaneEntries permutes
/// (taps x vectors of a column row).
constexpr int64_t kSmallPlane = 64;
constexpr int64_t kSmallPlaneEntries = 128;

/// One vector of 16 column elements (flat outputs 16 v to 16 v + 15) of one tap, from a plane
/// held in four registers: lane L takes plane element idx[L] (`lo` lanes from the first 32,
/// `hi` lanes from the last 32; the others are padding or past the row, zero).
struct PlaneTap {
  __m512i idx;
  __mmask16 lo, hi;
};

/// The permutes of im2colSmallPlaneAvx512, the same for every image and channel: taps x
/// vectors entries.
struct SmallPlaneTable {
  int64_t vecs = 0;
  PlaneTap tap[kSmallPlaneEntries];
};

/// The permutes of im2colSmallPlaneAvx512 and of depthwiseAvx512's small planes for `g`.
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq"))) void
makeSmallPlaneTable(const ConvGeom &g, SmallPlaneTable &t);

/// The epilogue of coil_cpu_conv_bias_*, applied to each output tile while it is in cache:
/// y = clamp(y + bias[oc]) with `v < lo ? lo : v` when `lower` and `v > hi ? hi : v` when
/// `upper` (in this order, as Clip and ReLU lower; NaN passes). Inactive without a bias.
template <typename T> struct ConvEpilogue {
  const T *bias = nullptr;
  bool lower = false, upper = false;
  T lo = T(0), hi = T(0);
  /// d[i] = f(src[i]) for `count` outputs of channel oc (d == src allowed). One loop per
  /// clamp case, so that each vectorizes without tests.
  inline __attribute__((always_inline)) void apply(T *d, const T *src, int64_t count,
                                                   int64_t oc) const {
    const T b = bias[oc], l = lo, h = hi;
    if (lower && upper) {
#pragma omp simd
      for (int64_t i = 0; i < count; ++i) {
        T v = src[i] + b;
        v = v < l ? l : v;
        d[i] = v > h ? h : v;
      }
    } else if (lower) {
#pragma omp simd
      for (int64_t i = 0; i < count; ++i) {
        T v = src[i] + b;
        d[i] = v < l ? l : v;
      }
    } else if (upper) {
#pragma omp simd
      for (int64_t i = 0; i < count; ++i) {
        T v = src[i] + b;
        d[i] = v > h ? h : v;
      }
    } else {
#pragma omp simd
      for (int64_t i = 0; i < count; ++i) d[i] = src[i] + b;
    }
  }
  /// apply in place on `rows` consecutive channel rows of `count` outputs from channel oc0.
  inline __attribute__((always_inline)) void applyRows(T *y, int64_t rows, int64_t count,
                                                       int64_t oc0) const {
    for (int64_t r = 0; r < rows; ++r) apply(y + r * count, y + r * count, count, oc0 + r);
  }
};

/// The epilogue of ConvEpilogue on one vector: + bias, then `v < lo ? lo : v` and
/// `v > hi ? hi : v` (max/min return their second operand when either is NaN, so NaN passes;
/// the maskz forms because GCC 12 warns on the plain ones).
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq"), always_inline)) inline __m512
epilogue16(const ConvEpilogue<float> &ep, __m512 v, int64_t oc) {
  if (!ep.bias) return v;
  v = _mm512_add_ps(v, _mm512_set1_ps(ep.bias[oc]));
  if (ep.lower) v = _mm512_maskz_max_ps(0xffff, _mm512_set1_ps(ep.lo), v);
  if (ep.upper) v = _mm512_maskz_min_ps(0xffff, _mm512_set1_ps(ep.hi), v);
  return v;
}

/// The epilogue on the rows of channels [oc0, oc0 + rows) at y, AVX-512 or AVX2 where the CPU
/// has them.
template <typename T>
void applyEpilogue(const ConvEpilogue<T> &ep, T *y, int64_t rows, int64_t count, int64_t oc0);

/// Depthwise convolution (one input channel per group): im2col + GEMM would be a GEMM of one
/// row per group, so direct loops, per (image, group) in parallel.
/// (CpuConvDepthwise.cpp, for float and double.)
template <typename T>
void depthwise(const T *x, T *y, const T *w, const ConvGeom &g, const ConvEpilogue<T> &ep);

} // namespace coil::cpu

#pragma GCC visibility pop
