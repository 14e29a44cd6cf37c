// The epilogue of coil_cpu_conv_bias_* (see ConvEpilogue in CpuConvInternal.h): bias and
// clamps on output rows, with AVX-512 or AVX2 where the CPU has them.
#include "kernels/cpu/CpuConvInternal.h"

#include <type_traits>

namespace coil::cpu {

namespace {

template <typename T>
__attribute__((target("avx2,fma"))) void applyRowsAvx2(const ConvEpilogue<T> &ep, T *y,
                                                       int64_t rows, int64_t count, int64_t oc0) {
  ep.applyRows(y, rows, count, oc0);
}
template <typename T>
void applyRowsBase(const ConvEpilogue<T> &ep, T *y, int64_t rows, int64_t count, int64_t oc0) {
  ep.applyRows(y, rows, count, oc0);
}

/// The epilogue on f32 rows with AVX-512: rows of 16 or more a vector at a time (a masked
/// tail); shorter rows that divide 16 (1, 2, 4, 8: the small planes of late CNN layers) as
/// one flat run, each vector's biases spread over its lanes by one permute; false for other
/// row lengths.
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq"))) bool
applyRowsAvx512(const ConvEpilogue<float> &ep, float *y, int64_t rows, int64_t count, int64_t oc0) {
  if (count >= 16) {
    for (int64_t r = 0; r < rows; ++r) {
      float *d = y + r * count;
      for (int64_t i = 0; i < count; i += 16) {
        const __mmask16 m = laneRange(0, count - i);
        _mm512_mask_storeu_ps(d + i, m, epilogue16(ep, _mm512_maskz_loadu_ps(m, d + i), oc0 + r));
      }
    }
    return true;
  }
  if (count < 1 || 16 % count != 0) return false;
  const int64_t perVec = 16 / count, total = rows * count;
  alignas(64) int32_t idx[16];
  for (int L = 0; L < 16; ++L) idx[L] = int32_t(L / count);
  const __m512i spread = _mm512_load_si512(idx);
  const __m512 lo = _mm512_set1_ps(ep.lo), hi = _mm512_set1_ps(ep.hi);
  for (int64_t f = 0, r = 0; f < total; f += 16, r += perVec) {
    const __mmask16 m = laneRange(0, total - f);
    const __m512 b = _mm512_maskz_loadu_ps(laneRange(0, rows - r), ep.bias + oc0 + r);
    __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + f),
                             _mm512_maskz_permutexvar_ps(0xffff, spread, b));
    if (ep.lower) v = _mm512_maskz_max_ps(0xffff, lo, v);
    if (ep.upper) v = _mm512_maskz_min_ps(0xffff, hi, v);
    _mm512_mask_storeu_ps(y + f, m, v);
  }
  return true;
}

} // namespace

template <typename T>
void applyEpilogue(const ConvEpilogue<T> &ep, T *y, int64_t rows, int64_t count, int64_t oc0) {
  if (!ep.bias) return;
  if constexpr (std::is_same_v<T, float>) {
    if (avx512Enabled() && applyRowsAvx512(ep, y, rows, count, oc0)) return;
  }
  hasAvx2() ? applyRowsAvx2(ep, y, rows, count, oc0) : applyRowsBase(ep, y, rows, count, oc0);
}

template void applyEpilogue<float>(const ConvEpilogue<float> &ep, float *y, int64_t rows,
                                   int64_t count, int64_t oc0);
template void applyEpilogue<double>(const ConvEpilogue<double> &ep, double *y, int64_t rows,
                                    int64_t count, int64_t oc0);

} // namespace coil::cpu
