// Sizes of the ops whose output shape comes from a run-time tensor (Reshape, Unsqueeze,
// Squeeze, Pad, Expand, Tile, ConstantOfShape, Slice): coil_cpu_shape_dims reads the small
// shape-defining vector and the input's dims and writes the size symbols; the data movement
// itself stays generated Loop IR. Semantics follow interp/kernels (ShapeOps, DataMovement).
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/CpuKernelsImpl.h"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace {

using coil::cpu::fail;
using coil::cpu::ll;

constexpr int kMaxSyms = 16;
/// The most elements of any tensor (ir/Tensor.h kMaxTensorElements).
constexpr int64_t kMaxElements = int64_t(1) << 59;

bool mulOk(int64_t a, int64_t b, int64_t *p) {
  return !__builtin_mul_overflow(a, b, p);
}

int64_t clampI(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

const char *opName(int64_t op) {
  static const char *const names[] = {"reshape", "unsqueeze", "squeeze",           "pad",
                                      "expand",  "tile",      "constant of shape", "slice",
                                      "split",   "one hot",   "center crop pad",   "range",
                                      "resize"};
  return op >= 0 && op <= COIL_SHAPE_RESIZE ? names[op] : "shape";
}

/// The number of values the compiled program expects does not match the output and input
/// ranks of op `op`: a lowering bug. The status of coil::cpu::fail, naming `what` the values are.
int32_t countFail(int64_t op, int64_t n, int64_t outRank, int64_t r, const char *what) {
  return fail("%s: %lld values do not fit output rank %lld and input rank %lld (%s)", opName(op),
              ll(n), ll(outRank), ll(r), what);
}

/// Reshape. v: the target shape; 0 copies the input dim unless allowzero (attr 1); one -1
/// takes what is left of the input's numel elements.
int32_t reshapeDims(const int64_t *v, int64_t n, const int64_t *in, int64_t r, int64_t outRank,
                    int64_t attr, int64_t numel, int64_t *s) {
  if (n != outRank || n > kMaxSyms) return countFail(COIL_SHAPE_RESHAPE, n, outRank, r, "shape");
  int64_t known = 1, infer = -1;
  for (int64_t i = 0; i < n; ++i) {
    int64_t x = v[i];
    if (x == 0 && attr == 0) {
      if (i >= r)
        return fail("reshape: shape value 0 at index %lld copies an input dim, but the input "
                    "has rank %lld",
                    ll(i), ll(r));
      x = in[i];
    }
    if (x == -1) {
      if (infer >= 0)
        return fail("reshape: shape has more than one -1 (at index %lld and %lld)", ll(infer),
                    ll(i));
      infer = i;
      continue;
    }
    if (x < 0) return fail("reshape: shape value %lld at index %lld is invalid", ll(x), ll(i));
    if (!mulOk(known, x, &known))
      return fail("reshape: the product of the shape overflows at index %lld", ll(i));
    s[i] = x;
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      return fail("reshape: cannot infer the -1 at index %lld: %lld elements are not a multiple "
                  "of %lld",
                  ll(infer), ll(numel), ll(known));
    s[infer] = numel / known;
  } else if (known != numel) {
    return fail("reshape: the shape has %lld elements, the input %lld", ll(known), ll(numel));
  }
  return 0;
}

/// Unsqueeze. v: the axes in [-outRank, outRank), distinct.
int32_t unsqueezeDims(const int64_t *v, int64_t n, const int64_t *in, int64_t r, int64_t outRank,
                      int64_t attr, int64_t *s) {
  if (outRank != r + n || outRank > kMaxSyms)
    return countFail(COIL_SHAPE_UNSQUEEZE, n, outRank, r, "axes");
  bool axis[kMaxSyms] = {};
  for (int64_t i = 0; i < n; ++i) {
    int64_t a = v[i] < 0 ? v[i] + outRank : v[i];
    if (a < 0 || a >= outRank)
      return fail("unsqueeze: axis %lld is out of range for output rank %lld", ll(v[i]),
                  ll(outRank));
    if (axis[a]) return fail("unsqueeze: axis %lld appears more than once", ll(v[i]));
    axis[a] = true;
  }
  for (int64_t d = 0, j = 0; d < outRank; ++d) s[d] = axis[d] ? 1 : in[j++];
  return 0;
}

/// Squeeze. v: the axes in [-r, r), distinct, each of size 1.
int32_t squeezeDims(const int64_t *v, int64_t n, const int64_t *in, int64_t r, int64_t outRank,
                    int64_t attr, int64_t *s) {
  if (r > kMaxSyms || outRank != r - n) return countFail(COIL_SHAPE_SQUEEZE, n, outRank, r, "axes");
  bool axis[kMaxSyms] = {};
  for (int64_t i = 0; i < n; ++i) {
    int64_t a = v[i] < 0 ? v[i] + r : v[i];
    if (a < 0 || a >= r)
      return fail("squeeze: axis %lld is out of range for rank %lld", ll(v[i]), ll(r));
    if (axis[a]) return fail("squeeze: axis %lld appears more than once", ll(v[i]));
    if (in[a] != 1)
      return fail("squeeze: axis %lld has size %lld, only dims of size 1 can be squeezed", ll(v[i]),
                  ll(in[a]));
    axis[a] = true;
  }
  for (int64_t d = 0, j = 0; d < r; ++d)
    if (!axis[d]) s[j++] = in[d];
  return 0;
}

/// Pad. v: pads [2k], axes [k]; attr: nonzero for edge, reflect and wrap; s: out dims, begin
/// pads, end pads.
int32_t padDims(const int64_t *v, int64_t n, const int64_t *in, int64_t r, int64_t outRank,
                int64_t attr, int64_t *s) {
  if (n % 3 != 0 || 3 * r > kMaxSyms || outRank != r)
    return countFail(COIL_SHAPE_PAD, n, outRank, r, "pads and axes");
  int64_t k = n / 3;
  int64_t b[kMaxSyms] = {}, e[kMaxSyms] = {};
  bool seen[kMaxSyms] = {};
  const int64_t lim = int64_t(1) << 61;
  for (int64_t i = 0; i < k; ++i) {
    int64_t ax = v[2 * k + i], a = ax < 0 ? ax + r : ax;
    if (a < 0 || a >= r) return fail("pad: axis %lld is out of range for rank %lld", ll(ax), ll(r));
    if (seen[a]) return fail("pad: axis %lld appears more than once", ll(ax));
    seen[a] = true;
    b[a] = v[i];
    e[a] = v[k + i];
    if (b[a] < -lim || b[a] > lim || e[a] < -lim || e[a] > lim)
      return fail("pad: pads %lld and %lld of axis %lld are out of range (|pad| <= 2^61)", ll(b[a]),
                  ll(e[a]), ll(ax));
  }
  for (int64_t d = 0; d < r; ++d) {
    int64_t o = in[d] + b[d] + e[d];
    // The kept region after negative pads crop; edge, reflect and wrap need a non-empty one.
    int64_t len = in[d] - (b[d] < 0 ? -b[d] : 0) - (e[d] < 0 ? -e[d] : 0);
    if (o < 0 || len < 0)
      return fail("pad: pads %lld and %lld crop more than dim %lld's size %lld", ll(b[d]), ll(e[d]),
                  ll(d), ll(in[d]));
    if (attr != 0 && (b[d] != 0 || e[d] != 0) && len == 0 && o > 0)
      return fail("pad: edge, reflect and wrap modes cannot pad dim %lld, which is empty after "
                  "cropping",
                  ll(d));
    s[d] = o;
    s[r + d] = b[d];
    s[2 * r + d] = e[d];
  }
  return 0;
}

/// Expand. v: the shape, broadcast with the input (numpy rules).
int32_t expandDims(const int64_t *v, int64_t n, const int64_t *in, int64_t r, int64_t outRank,
                   int64_t attr, int64_t *s) {
  if (outRank != (n > r ? n : r) || outRank > kMaxSyms)
    return countFail(COIL_SHAPE_EXPAND, n, outRank, r, "shape");
  for (int64_t d = 0; d < outRank; ++d) {
    int64_t a = d - (outRank - r), b = d - (outRank - n);
    int64_t x = a >= 0 ? in[a] : 1, y = b >= 0 ? v[b] : 1;
    if (y < 0) return fail("expand: shape value %lld at index %lld is invalid", ll(y), ll(b));
    if (x != y && x != 1 && y != 1)
      return fail("expand: shape value %lld at index %lld does not broadcast with input dim "
                  "%lld of size %lld",
                  ll(y), ll(b), ll(a), ll(x));
    s[d] = x == 1 ? y : x;
  }
  return 0;
}

/// Tile. v: repeats [r], each >= 0.
int32_t tileDims(const int64_t *v, int64_t n, const int64_t *in, int64_t r, int64_t outRank,
                 int64_t attr, int64_t *s) {
  if (n != r || outRank != r || r > kMaxSyms)
    return countFail(COIL_SHAPE_TILE, n, outRank, r, "repeats");
  for (int64_t d = 0; d < r; ++d) {
    if (v[d] < 0)
      return fail("tile: repeats value %lld at index %lld is negative", ll(v[d]), ll(d));
    if (!mulOk(in[d], v[d], &s[d]))
      return fail("tile: dim %lld of size %lld repeated %lld times overflows", ll(d), ll(in[d]),
                  ll(v[d]));
  }
  return 0;
}

/// ConstantOfShape. v: the shape, each >= 0.
int32_t constantOfShapeDims(const int64_t *v, int64_t n, const int64_t *in, int64_t r,
                            int64_t outRank, int64_t attr, int64_t *s) {
  const char *name = opName(COIL_SHAPE_CONSTANT_OF_SHAPE);
  if (n != outRank || n > kMaxSyms)
    return countFail(COIL_SHAPE_CONSTANT_OF_SHAPE, n, outRank, r, "shape");
  int64_t total = 1;
  for (int64_t d = 0; d < n; ++d) {
    if (v[d] < 0)
      return fail("%s: shape value %lld at index %lld is negative", name, ll(v[d]), ll(d));
    if (!mulOk(total, v[d], &total))
      return fail("%s: the product of the shape overflows at index %lld", name, ll(d));
    s[d] = v[d];
  }
  return 0;
}

/// Slice. v: starts, ends, axes, steps [k each]; s: out dims, starts, steps.
int32_t sliceDims(const int64_t *v, int64_t n, const int64_t *in, int64_t r, int64_t outRank,
                  int64_t attr, int64_t *s) {
  if (n % 4 != 0 || outRank != r || 3 * r > kMaxSyms)
    return countFail(COIL_SHAPE_SLICE, n, outRank, r, "starts, ends, axes, steps");
  int64_t k = n / 4;
  const int64_t *st = v, *en = v + k, *ax = v + 2 * k, *sp = v + 3 * k;
  bool seen[kMaxSyms] = {};
  for (int64_t d = 0; d < r; ++d) {
    s[d] = in[d];
    s[r + d] = 0;
    s[2 * r + d] = 1;
  }
  const int64_t big = int64_t(1) << 62;
  for (int64_t i = 0; i < k; ++i) {
    int64_t a = ax[i] < 0 ? ax[i] + r : ax[i];
    if (a < 0 || a >= r)
      return fail("slice: axis %lld is out of range for rank %lld", ll(ax[i]), ll(r));
    if (seen[a]) return fail("slice: axis %lld appears more than once", ll(ax[i]));
    if (sp[i] == 0) return fail("slice: step of axis %lld is 0", ll(ax[i]));
    if (sp[i] < -big || sp[i] > big)
      return fail("slice: step %lld of axis %lld is out of range (|step| <= 2^62)", ll(sp[i]),
                  ll(ax[i]));
    seen[a] = true;
    int64_t dim = in[a], step = sp[i];
    int64_t b = clampI(st[i], -big, big), e = clampI(en[i], -big, big);
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    int64_t len;
    if (step > 0) {
      b = clampI(b, 0, dim);
      e = clampI(e, 0, dim);
      len = e > b ? (e - b + step - 1) / step : 0;
    } else {
      b = clampI(b, 0, dim - 1);
      e = clampI(e, -1, dim - 1);
      len = b > e ? (b - e + (-step) - 1) / (-step) : 0;
    }
    if (dim == 0) len = 0, b = 0;
    s[a] = len;
    s[r + a] = b;
    s[2 * r + a] = step;
  }
  return 0;
}

/// Split. v: split [m]; attr: the axis; s: the m sizes along it.
int32_t splitDims(const int64_t *v, int64_t n, const int64_t *in, int64_t r, int64_t outRank,
                  int64_t attr, int64_t *s) {
  if (n != outRank || n > kMaxSyms || attr < 0 || attr >= r)
    return countFail(COIL_SHAPE_SPLIT, n, outRank, r, "split");
  int64_t sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (v[i] < 0) return fail("split: split value %lld at index %lld is negative", ll(v[i]), ll(i));
    if (__builtin_add_overflow(sum, v[i], &sum))
      return fail("split: the sum of the split values overflows at index %lld", ll(i));
    s[i] = v[i];
  }
  if (sum != in[attr])
    return fail("split: the split values sum to %lld, axis %lld has size %lld", ll(sum), ll(attr),
                ll(in[attr]));
  return 0;
}

/// OneHot. v: depth [1]; attr: the axis of the output; s: out dims.
int32_t oneHotDims(const int64_t *v, int64_t n, const int64_t *in, int64_t r, int64_t outRank,
                   int64_t attr, int64_t *s) {
  if (n != 1 || outRank != r + 1 || outRank > kMaxSyms || attr < 0 || attr > r)
    return countFail(COIL_SHAPE_ONE_HOT, n, outRank, r, "depth");
  if (v[0] < 1 || v[0] > (int64_t(1) << 62))
    return fail("one hot: depth %lld is out of range [1, 2^62]", ll(v[0]));
  for (int64_t d = 0, j = 0; d < outRank; ++d) s[d] = d == attr ? v[0] : in[j++];
  return 0;
}

/// CenterCropPad. v: sizes [k], axes [k]; s: out dims.
int32_t centerCropPadDims(const int64_t *v, int64_t n, const int64_t *in, int64_t r,
                          int64_t outRank, int64_t attr, int64_t *s) {
  if (n % 2 != 0 || outRank != r || r > kMaxSyms)
    return countFail(COIL_SHAPE_CENTER_CROP_PAD, n, outRank, r, "shape and axes");
  int64_t k = n / 2;
  bool seen[kMaxSyms] = {};
  for (int64_t d = 0; d < r; ++d) s[d] = in[d];
  for (int64_t i = 0; i < k; ++i) {
    int64_t ax = v[k + i], a = ax < 0 ? ax + r : ax;
    if (a < 0 || a >= r)
      return fail("center crop pad: axis %lld is out of range for rank %lld", ll(ax), ll(r));
    if (seen[a]) return fail("center crop pad: axis %lld appears more than once", ll(ax));
    if (v[i] < 0)
      return fail("center crop pad: shape value %lld at index %lld is negative", ll(v[i]), ll(i));
    seen[a] = true;
    s[a] = v[i];
  }
  return 0;
}

/// Range. v: start, limit, delta (attr 1: the bits of f64 values); s: the length.
int32_t rangeDims(const int64_t *v, int64_t n, const int64_t *in, int64_t r, int64_t outRank,
                  int64_t attr, int64_t *s) {
  if (n != 3 || outRank != 1)
    return countFail(COIL_SHAPE_RANGE, n, outRank, r, "start, limit, delta");
  const double maxLen = double(int64_t(1) << 40);
  int64_t len;
  if (attr != 0) {
    double f[3];
    std::memcpy(f, v, sizeof f);
    if (f[2] == 0) return fail("range: delta is 0");
    double l = std::ceil((f[1] - f[0]) / f[2]);
    if (!(l < maxLen))
      return fail("range: start %g, limit %g, delta %g give %g elements, more than 2^40", f[0],
                  f[1], f[2], l);
    len = l > 0 ? int64_t(l) : 0;
  } else {
    if (v[2] == 0) return fail("range: delta is 0");
    __int128 span = __int128(v[1]) - v[0], step = v[2];
    __int128 l = span / step + (span % step != 0 && ((span < 0) == (step < 0)) ? 1 : 0);
    if (l >= __int128(int64_t(1) << 40))
      return fail("range: start %lld, limit %lld, delta %lld give more than 2^40 elements",
                  ll(v[0]), ll(v[1]), ll(v[2]));
    len = l > 0 ? int64_t(l) : 0;
  }
  s[0] = len;
  return 0;
}

/// Resize. v: scales (f64 bits, attr 0) or sizes (attr 1..3), per axis; attr / 4: the
/// antialias filter support; s: out dims, sizes (attr 1..3), antialias taps (support > 0).
int32_t resizeDims(const int64_t *v, int64_t n, const int64_t *in, int64_t r, int64_t outRank,
                   int64_t attr, int64_t *s) {
  int64_t support = attr / 4; // antialias filter support (0: no antialias)
  attr %= 4;
  if (n != r || outRank != r || 3 * r > kMaxSyms || attr < 0 || support < 0 || support > 2)
    return countFail(COIL_SHAPE_RESIZE, n, outRank, r, "scales or sizes");
  double scales[kMaxSyms] = {};
  const double maxLen = double(int64_t(1) << 40);
  double ratio = attr == 2 ? 1e300 : -1e300;
  for (int64_t i = 0; i < n; ++i) {
    if (attr == 0) {
      double sc;
      std::memcpy(&sc, &v[i], sizeof sc);
      if (!(sc > 0)) return fail("resize: scale %g at index %lld is not positive", sc, ll(i));
      if (!(sc * double(in[i]) < maxLen))
        return fail("resize: scale %g at index %lld makes dim %lld of size %lld larger than "
                    "2^40",
                    sc, ll(i), ll(i), ll(in[i]));
      s[i] = int64_t(std::floor(sc * double(in[i])));
      scales[i] = sc;
    } else {
      if (v[i] < 0)
        return fail("resize: sizes value %lld at index %lld is negative", ll(v[i]), ll(i));
      s[i] = s[r + i] = v[i];
      double q = double(v[i]) / double(in[i]);
      scales[i] = q;
      ratio = attr == 2 ? std::fmin(ratio, q) : std::fmax(ratio, q);
    }
  }
  // The antialias taps: 2 - 2 * (floor(-support / min(scale, 1)) + 1).
  for (int64_t i = 0; i < n && support > 0; ++i) {
    double sc = std::fmin(attr >= 2 ? ratio : scales[i], 1.0);
    double t = 2; // NaN (0 / 0): no output along the empty axis
    if (sc > 0) {
      t = -2 * std::floor(-double(support) / sc);
      if (!(t >= 2 && t <= double(1 << 20)))
        return fail("resize: the antialias filter of axis %lld needs %g taps, more than 2^20",
                    ll(i), t);
    }
    s[2 * r + i] = int64_t(t);
  }
  if (attr >= 2)
    for (int64_t i = 0; i < n; ++i) {
      double o = ratio * double(in[i]) + 0.5;
      if (!(o >= 0 && o < maxLen))
        return fail("resize: axis %lld of size %lld would get %g elements, more than 2^40", ll(i),
                    ll(in[i]), o);
      s[i] = int64_t(o);
    }
  for (int64_t i = 0; i < n; ++i)
    if (in[i] == 0 && s[i] > 0)
      return fail("resize: axis %lld is empty and cannot be resized to %lld", ll(i), ll(s[i]));
  return 0;
}

/// Computes the symbols into s; 0, or the status of coil::cpu::fail on a run-time value that
/// breaks the op's rules (the message names the op, the rule and the values). Checks what all
/// ops share (the ranks, the value count, the input dims) and hands the rest to the op's
/// function above, each of which computes s the same way and returns the same status.
int32_t computeDims(int64_t op, const int64_t *v, int64_t n, const int64_t *in, int64_t r,
                    int64_t outRank, int64_t attr, int64_t *s) {
  const char *name = opName(op);
  if (r < 0 || outRank < 0 || n < 0)
    return fail("%s: input rank %lld, output rank %lld and %lld values are not valid", name, ll(r),
                ll(outRank), ll(n));
  int64_t numel = 1;
  for (int64_t d = 0; d < r; ++d)
    if (in[d] < 0 || !mulOk(numel, in[d], &numel))
      return fail("%s: input dim %lld is %lld, negative or overflowing", name, ll(d), ll(in[d]));
  switch (op) {
  case COIL_SHAPE_RESHAPE:
    return reshapeDims(v, n, in, r, outRank, attr, numel, s);
  case COIL_SHAPE_UNSQUEEZE:
    return unsqueezeDims(v, n, in, r, outRank, attr, s);
  case COIL_SHAPE_SQUEEZE:
    return squeezeDims(v, n, in, r, outRank, attr, s);
  case COIL_SHAPE_PAD:
    return padDims(v, n, in, r, outRank, attr, s);
  case COIL_SHAPE_EXPAND:
    return expandDims(v, n, in, r, outRank, attr, s);
  case COIL_SHAPE_TILE:
    return tileDims(v, n, in, r, outRank, attr, s);
  case COIL_SHAPE_CONSTANT_OF_SHAPE:
    return constantOfShapeDims(v, n, in, r, outRank, attr, s);
  case COIL_SHAPE_SLICE:
    return sliceDims(v, n, in, r, outRank, attr, s);
  case COIL_SHAPE_SPLIT:
    return splitDims(v, n, in, r, outRank, attr, s);
  case COIL_SHAPE_ONE_HOT:
    return oneHotDims(v, n, in, r, outRank, attr, s);
  case COIL_SHAPE_CENTER_CROP_PAD:
    return centerCropPadDims(v, n, in, r, outRank, attr, s);
  case COIL_SHAPE_RANGE:
    return rangeDims(v, n, in, r, outRank, attr, s);
  case COIL_SHAPE_RESIZE:
    return resizeDims(v, n, in, r, outRank, attr, s);
  default:
    return fail("shape: unknown op code %lld", ll(op));
  }
}

} // namespace

extern "C" int32_t coil_cpu_shape_dims(coil_alloc_fn alloc, void *alloc_ctx, const void *values,
                                       const void *inDims, void **status, int64_t *s0, int64_t *s1,
                                       int64_t *s2, int64_t *s3, int64_t *s4, int64_t *s5,
                                       int64_t *s6, int64_t *s7, int64_t *s8, int64_t *s9,
                                       int64_t *s10, int64_t *s11, int64_t *s12, int64_t *s13,
                                       int64_t *s14, int64_t *s15, int64_t op, int64_t nValues,
                                       int64_t inRank, int64_t outRank, int64_t attr) {
  int64_t *out[kMaxSyms] = {s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15};
  int64_t s[kMaxSyms] = {};
  int64_t v[64] = {}, in[kMaxSyms] = {};
  int32_t rc;
  if (nValues < 0 || nValues > 64 || inRank < 0 || inRank > kMaxSyms) {
    rc = fail("%s: %lld values and input rank %lld are out of range (at most 64 and %d)",
              opName(op), ll(nValues), ll(inRank), kMaxSyms);
  } else {
    if (nValues > 0) std::memcpy(v, values, size_t(nValues) * sizeof(int64_t));
    if (inRank > 0) std::memcpy(in, inDims, size_t(inRank) * sizeof(int64_t));
    rc = computeDims(op, v, nValues, in, inRank, outRank, attr, s);
    // Every op but split writes the output dims first: their product must stay within the
    // bound of every tensor (ir/Tensor.h kMaxTensorElements), or the byte sizes the wrapper
    // computes from them overflow and the shape it reports does not match the data.
    if (rc == 0 && op != COIL_SHAPE_SPLIT && outRank <= kMaxSyms) {
      int64_t numel = 1;
      for (int64_t d = 0; d < outRank; ++d)
        if (!mulOk(numel, s[d], &numel) || numel > kMaxElements) {
          char dims[kMaxSyms * 24] = "";
          for (int64_t k = 0, at = 0; k < outRank && at < int64_t(sizeof dims) - 24; ++k)
            at += std::snprintf(dims + at, sizeof dims - size_t(at), "%s%lld", k ? ", " : "",
                                ll(s[k]));
          rc = fail("%s: the output shape [%s] has more than 2^59 elements", opName(op), dims);
          break;
        }
    }
  }
  if (rc != 0)
    for (int64_t &x : s) x = 0; // a rule broken: every size 0 (an empty result)
  void *p = alloc(alloc_ctx, sizeof(int64_t));
  if (p) {
    int64_t flag = rc == 0 ? 1 : 0;
    std::memcpy(p, &flag, sizeof flag);
  } else {
    for (int64_t &x : s) x = 0;
    if (rc == 0) rc = fail("%s: out of memory allocating the status (8 bytes)", opName(op));
  }
  *status = p;
  for (int i = 0; i < kMaxSyms; ++i) *out[i] = s[i];
  return rc;
}
