// CPU kernel of Resize over the two innermost axes (nearest and linear), for the lowering of
// lower/ops/SpatialSample.cpp on the CPU. Each axis gets a table of source indices and weights,
// computed once per call with the f64 arithmetic of the generic lowering (resizeSource and the
// taps of resizeAxis, which follow the interpreter); the linear case then blends two input rows
// into one row per output row (a loop over contiguous memory) and gathers that row's two taps
// per output column. Accumulation order and types are those of the generic lowering: the H
// axis first, then W, each as (0 + w0 * t0) + w1 * t1 in f32 with taps of weight 0 skipped.
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/CpuKernelsImpl.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>
#include <vector>

namespace coil::cpu {
namespace {

/// double -> int64 as the generated code's coil_f2i<int64_t> (saturating, NaN -> 0), then
/// clamped into [0, n - 1] as coil_index(i, n, false).
int64_t clampIndex(double x, int64_t n) {
  int64_t i;
  if (x != x)
    i = 0;
  else if (x <= -9223372036854774784.0)
    i = std::numeric_limits<int64_t>::min();
  else if (x >= 9223372036854774784.0)
    i = std::numeric_limits<int64_t>::max();
  else
    i = int64_t(x);
  return std::max<int64_t>(0, std::min<int64_t>(i, n - 1));
}

/// One axis: out, in, the scale (num / den when den > 0, else `scale`), the coordinate mode.
struct Axis {
  int64_t in = 0, out = 0;
  double scale = 1;
  int64_t coord = 0;
};

/// The source coordinate of output index j (resizeSource of the lowering, f64).
double source(const Axis &a, int64_t j) {
  double in = double(a.in), x = double(j), s = a.scale, outW = s * in;
  switch (a.coord) {
  case COIL_RESIZE_ALIGN_CORNERS:
    return outW == 1 ? 0.0 : x * (in - 1) / (outW - 1);
  case COIL_RESIZE_ASYMMETRIC:
    return x / s;
  case COIL_RESIZE_HALF_PIXEL_SYMMETRIC: {
    double adjustment = double(a.out) / outW, center = in / 2;
    return center * (1 - adjustment) + (x + 0.5) / s - 0.5;
  }
  case COIL_RESIZE_PYTORCH_HALF_PIXEL:
    return outW == 1 ? -0.5 : (x + 0.5) / s - 0.5;
  default: // half_pixel
    return (x + 0.5) / s - 0.5;
  }
}

/// Linear taps of one axis: indices i0, i1 and f32 weights, a weight of 0 marked as skipped.
struct Taps {
  std::vector<int64_t> i0, i1;
  std::vector<float> w0, w1;
  std::vector<unsigned char> use0, use1;
};

Taps linearTaps(const Axis &a) {
  Taps t;
  size_t n = size_t(a.out);
  t.i0.resize(n), t.i1.resize(n), t.w0.resize(n), t.w1.resize(n), t.use0.resize(n),
      t.use1.resize(n);
  for (int64_t j = 0; j < a.out; ++j) {
    double x = source(a, j), fl = std::floor(x);
    double base = x == fl ? fl - 1 : fl, ratio = x - base;
    double c0 = 1 - ratio, c1 = ratio;
    size_t k = size_t(j);
    t.i0[k] = clampIndex(base, a.in);
    t.i1[k] = clampIndex(base + 1, a.in);
    t.w0[k] = float(c0), t.w1[k] = float(c1);
    t.use0[k] = c0 != 0, t.use1[k] = c1 != 0;
  }
  return t;
}

std::vector<int64_t> nearestTaps(const Axis &a, int64_t nearestMode) {
  std::vector<int64_t> t(size_t(a.out));
  for (int64_t j = 0; j < a.out; ++j) {
    double x = source(a, j), fl = std::floor(x), r = x - fl;
    bool up;
    switch (nearestMode) {
    case COIL_RESIZE_ROUND_PREFER_CEIL:
      up = r >= 0.5;
      break;
    case COIL_RESIZE_FLOOR:
      up = false;
      break;
    case COIL_RESIZE_CEIL:
      up = r > 0;
      break;
    default:
      up = r > 0.5;
    }
    t[size_t(j)] = clampIndex(fl + (up ? 1 : 0), a.in);
  }
  return t;
}

/// Output rows [begin, end) of the flat (plane, output row) range, linear.
void linearRows(const float *x, float *y, const Axis &ah, const Axis &aw, const Taps &th,
                const Taps &tw, int64_t begin, int64_t end, float *row) {
  int64_t inW = aw.in, outW = aw.out, inPlane = ah.in * inW;
  for (int64_t r = begin; r < end; ++r) {
    int64_t p = r / ah.out, oh = r % ah.out;
    size_t h = size_t(oh);
    const float *r0 = x + p * inPlane + th.i0[h] * inW, *r1 = x + p * inPlane + th.i1[h] * inW;
    float a0 = th.w0[h], a1 = th.w1[h];
    // The H axis: one blended input row.
    if (th.use0[h] && th.use1[h]) {
#pragma omp simd
      for (int64_t w = 0; w < inW; ++w) row[w] = (0.0f + a0 * r0[w]) + a1 * r1[w];
    } else if (th.use1[h]) {
#pragma omp simd
      for (int64_t w = 0; w < inW; ++w) row[w] = 0.0f + a1 * r1[w];
    } else if (th.use0[h]) {
#pragma omp simd
      for (int64_t w = 0; w < inW; ++w) row[w] = 0.0f + a0 * r0[w];
    } else {
      std::fill(row, row + inW, 0.0f);
    }
    // The W axis: two taps per output column.
    float *out = y + r * outW;
    for (int64_t o = 0; o < outW; ++o) {
      size_t k = size_t(o);
      float v0 = tw.use0[k] ? tw.w0[k] * row[tw.i0[k]] : 0.0f;
      float v1 = tw.use1[k] ? tw.w1[k] * row[tw.i1[k]] : 0.0f;
      out[o] = (0.0f + v0) + v1;
    }
  }
}

void nearestRows(const float *x, float *y, const Axis &ah, const Axis &aw,
                 const std::vector<int64_t> &th, const std::vector<int64_t> &tw, int64_t begin,
                 int64_t end) {
  int64_t inW = aw.in, outW = aw.out, inPlane = ah.in * inW;
  for (int64_t r = begin; r < end; ++r) {
    int64_t p = r / ah.out, oh = r % ah.out;
    const float *src = x + p * inPlane + th[size_t(oh)] * inW;
    float *out = y + r * outW;
    for (int64_t o = 0; o < outW; ++o) out[o] = src[tw[size_t(o)]];
  }
}

int32_t resize2d(const void *xv, void *yv, int64_t planes, int64_t inH, int64_t inW, int64_t outH,
                 int64_t outW, double scaleH, int64_t numH, int64_t denH, double scaleW,
                 int64_t numW, int64_t denW, int64_t mode, int64_t coord, int64_t nearestMode) {
  int64_t inAll, outAll, rows;
  if (!mulSizes({planes, inH, inW}, &inAll) || !mulSizes({planes, outH, outW}, &outAll) ||
      !mulSize(planes, outH, &rows))
    return fail("resize2d: sizes planes %lld, input %lld x %lld, output %lld x %lld are negative "
                "or overflow",
                ll(planes), ll(inH), ll(inW), ll(outH), ll(outW));
  if (mode != COIL_RESIZE_NEAREST && mode != COIL_RESIZE_LINEAR)
    return fail("resize2d: mode %lld is neither nearest (0) nor linear (1)", ll(mode));
  if (coord < 0 || coord > COIL_RESIZE_HALF_PIXEL_SYMMETRIC)
    return fail("resize2d: coordinate mode %lld is out of range", ll(coord));
  if (outAll == 0) return 0;
  if (inH == 0 || inW == 0)
    return fail("resize2d: cannot resize an empty axis (input %lld x %lld) to %lld x %lld", ll(inH),
                ll(inW), ll(outH), ll(outW));
  Axis ah{inH, outH, denH > 0 ? double(numH) / double(denH) : scaleH, coord};
  Axis aw{inW, outW, denW > 0 ? double(numW) / double(denW) : scaleW, coord};
  const float *x = static_cast<const float *>(xv);
  float *y = static_cast<float *>(yv);
  // Threads only where the work pays for a parallel region.
  bool parallel = outAll >= (int64_t(1) << 17) && rows > 1;
  try {
    if (mode == COIL_RESIZE_NEAREST) {
      std::vector<int64_t> th = nearestTaps(ah, nearestMode), tw = nearestTaps(aw, nearestMode);
      if (!parallel) {
        nearestRows(x, y, ah, aw, th, tw, 0, rows);
        return 0;
      }
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < rows; ++r) nearestRows(x, y, ah, aw, th, tw, r, r + 1);
      return 0;
    }
    Taps th = linearTaps(ah), tw = linearTaps(aw);
    if (!parallel) {
      std::vector<float> row(static_cast<size_t>(inW));
      linearRows(x, y, ah, aw, th, tw, 0, rows, row.data());
      return 0;
    }
    bool failed = false;
#pragma omp parallel
    {
      std::vector<float> row;
      bool ok = true;
      try {
        row.resize(size_t(inW));
      } catch (const std::bad_alloc &) {
        ok = false;
      }
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r)
        if (ok) linearRows(x, y, ah, aw, th, tw, r, r + 1, row.data());
      if (!ok) {
#pragma omp atomic write
        failed = true;
      }
    }
    if (failed) return fail("resize2d: out of memory for a row of %lld elements", ll(inW));
  } catch (const std::bad_alloc &) {
    return fail("resize2d: out of memory for the tables of %lld + %lld entries", ll(outH),
                ll(outW));
  }
  return 0;
}

} // namespace
} // namespace coil::cpu

using namespace coil::cpu;

extern "C" int32_t coil_cpu_resize2d_f32(const void *x, void *y, int64_t planes, int64_t inH,
                                         int64_t inW, int64_t outH, int64_t outW, double scaleH,
                                         int64_t numH, int64_t denH, double scaleW, int64_t numW,
                                         int64_t denW, int64_t mode, int64_t coord,
                                         int64_t nearestMode) {
  return resize2d(x, y, planes, inH, inW, outH, outW, scaleH, numH, denH, scaleW, numW, denW, mode,
                  coord, nearestMode);
}
