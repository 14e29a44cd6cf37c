// Sizes of the ops whose output shape comes from a run-time tensor (Reshape, Unsqueeze,
// Squeeze, Pad, Expand, Tile, ConstantOfShape, Slice): coil_cpu_shape_dims reads the small
// shape-defining vector and the input's dims and writes the size symbols; the data movement
// itself stays generated Loop IR. Semantics follow interp/kernels (ShapeOps, DataMovement).
#include "kernels/cpu/CpuKernels.h"

#include <cmath>
#include <cstring>

namespace {

constexpr int kMaxSyms = 16;

bool mulOk(int64_t a, int64_t b, int64_t *p) {
  return !__builtin_mul_overflow(a, b, p);
}

int64_t clampI(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

/// Computes the symbols into s; false on a run-time value that breaks the op's rules.
bool computeDims(int64_t op, const int64_t *v, int64_t n, const int64_t *in, int64_t r,
                 int64_t outRank, int64_t attr, int64_t *s) {
  if (r < 0 || outRank < 0 || n < 0) return false;
  int64_t numel = 1;
  for (int64_t d = 0; d < r; ++d)
    if (in[d] < 0 || !mulOk(numel, in[d], &numel)) return false;
  switch (op) {
  case COIL_SHAPE_RESHAPE: { // v: target shape; 0 copies the input dim unless allowzero; one -1
    if (n != outRank || n > kMaxSyms) return false;
    int64_t known = 1, infer = -1;
    for (int64_t i = 0; i < n; ++i) {
      int64_t x = v[i];
      if (x == 0 && attr == 0) {
        if (i >= r) return false;
        x = in[i];
      }
      if (x == -1) {
        if (infer >= 0) return false;
        infer = i;
        continue;
      }
      if (x < 0 || !mulOk(known, x, &known)) return false;
      s[i] = x;
    }
    if (infer >= 0) {
      if (known == 0 || numel % known != 0) return false;
      s[infer] = numel / known;
    } else if (known != numel) {
      return false;
    }
    return true;
  }
  case COIL_SHAPE_UNSQUEEZE: { // v: axes in [-outRank, outRank), distinct
    if (outRank != r + n || outRank > kMaxSyms) return false;
    bool axis[kMaxSyms] = {};
    for (int64_t i = 0; i < n; ++i) {
      int64_t a = v[i] < 0 ? v[i] + outRank : v[i];
      if (a < 0 || a >= outRank || axis[a]) return false;
      axis[a] = true;
    }
    for (int64_t d = 0, j = 0; d < outRank; ++d) s[d] = axis[d] ? 1 : in[j++];
    return true;
  }
  case COIL_SHAPE_SQUEEZE: { // v: axes in [-r, r), distinct, each of size 1
    if (r > kMaxSyms || outRank != r - n) return false;
    bool axis[kMaxSyms] = {};
    for (int64_t i = 0; i < n; ++i) {
      int64_t a = v[i] < 0 ? v[i] + r : v[i];
      if (a < 0 || a >= r || axis[a] || in[a] != 1) return false;
      axis[a] = true;
    }
    for (int64_t d = 0, j = 0; d < r; ++d)
      if (!axis[d]) s[j++] = in[d];
    return true;
  }
  case COIL_SHAPE_PAD: { // v: pads [2k], axes [k]; s: out dims, begin pads, end pads
    if (n % 3 != 0 || 3 * r > kMaxSyms || outRank != r) return false;
    int64_t k = n / 3;
    int64_t b[kMaxSyms] = {}, e[kMaxSyms] = {};
    bool seen[kMaxSyms] = {};
    const int64_t lim = int64_t(1) << 61;
    for (int64_t i = 0; i < k; ++i) {
      int64_t a = v[2 * k + i] < 0 ? v[2 * k + i] + r : v[2 * k + i];
      if (a < 0 || a >= r || seen[a]) return false;
      seen[a] = true;
      b[a] = v[i];
      e[a] = v[k + i];
      if (b[a] < -lim || b[a] > lim || e[a] < -lim || e[a] > lim) return false;
    }
    for (int64_t d = 0; d < r; ++d) {
      int64_t o = in[d] + b[d] + e[d];
      if (o < 0) return false;
      // The kept region after negative pads crop; edge, reflect and wrap need a non-empty one.
      int64_t len = in[d] - (b[d] < 0 ? -b[d] : 0) - (e[d] < 0 ? -e[d] : 0);
      if (len < 0) return false;
      if (attr != 0 && (b[d] != 0 || e[d] != 0) && len == 0 && o > 0) return false;
      s[d] = o;
      s[r + d] = b[d];
      s[2 * r + d] = e[d];
    }
    return true;
  }
  case COIL_SHAPE_EXPAND: { // v: shape, broadcast with the input (numpy rules)
    if (outRank != (n > r ? n : r) || outRank > kMaxSyms) return false;
    for (int64_t d = 0; d < outRank; ++d) {
      int64_t a = d - (outRank - r), b = d - (outRank - n);
      int64_t x = a >= 0 ? in[a] : 1, y = b >= 0 ? v[b] : 1;
      if (y < 0) return false;
      if (x != y && x != 1 && y != 1) return false;
      s[d] = x == 1 ? y : x;
    }
    return true;
  }
  case COIL_SHAPE_TILE: { // v: repeats [r], each >= 0
    if (n != r || outRank != r || r > kMaxSyms) return false;
    for (int64_t d = 0; d < r; ++d)
      if (v[d] < 0 || !mulOk(in[d], v[d], &s[d])) return false;
    return true;
  }
  case COIL_SHAPE_CONSTANT_OF_SHAPE: { // v: the shape, each >= 0
    if (n != outRank || n > kMaxSyms) return false;
    int64_t total = 1;
    for (int64_t d = 0; d < n; ++d) {
      if (v[d] < 0 || !mulOk(total, v[d], &total)) return false;
      s[d] = v[d];
    }
    return true;
  }
  case COIL_SHAPE_SLICE: { // v: starts, ends, axes, steps [k each]; s: out dims, starts, steps
    if (n % 4 != 0 || outRank != r || 3 * r > kMaxSyms) return false;
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
      if (a < 0 || a >= r || seen[a] || sp[i] == 0 || sp[i] < -big || sp[i] > big) return false;
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
    return true;
  }
  case COIL_SHAPE_SPLIT: { // v: split [m]; attr: the axis; s: the m sizes along it
    if (n != outRank || n > kMaxSyms || attr < 0 || attr >= r) return false;
    int64_t sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (v[i] < 0 || __builtin_add_overflow(sum, v[i], &sum)) return false;
      s[i] = v[i];
    }
    return sum == in[attr];
  }
  case COIL_SHAPE_ONE_HOT: { // v: depth [1]; attr: the axis of the output; s: out dims
    if (n != 1 || outRank != r + 1 || outRank > kMaxSyms || attr < 0 || attr > r) return false;
    if (v[0] < 1 || v[0] > (int64_t(1) << 62)) return false;
    for (int64_t d = 0, j = 0; d < outRank; ++d) s[d] = d == attr ? v[0] : in[j++];
    return true;
  }
  case COIL_SHAPE_CENTER_CROP_PAD: { // v: sizes [k], axes [k]; s: out dims
    if (n % 2 != 0 || outRank != r || r > kMaxSyms) return false;
    int64_t k = n / 2;
    bool seen[kMaxSyms] = {};
    for (int64_t d = 0; d < r; ++d) s[d] = in[d];
    for (int64_t i = 0; i < k; ++i) {
      int64_t a = v[k + i] < 0 ? v[k + i] + r : v[k + i];
      if (a < 0 || a >= r || seen[a] || v[i] < 0) return false;
      seen[a] = true;
      s[a] = v[i];
    }
    return true;
  }
  case COIL_SHAPE_RANGE: { // v: start, limit, delta (attr 1: the bits of f64 values)
    if (n != 3 || outRank != 1) return false;
    const double maxLen = double(int64_t(1) << 40);
    int64_t len;
    if (attr != 0) {
      double f[3];
      std::memcpy(f, v, sizeof f);
      if (f[2] == 0) return false;
      double l = std::ceil((f[1] - f[0]) / f[2]);
      if (!(l < maxLen)) return false;
      len = l > 0 ? int64_t(l) : 0;
    } else {
      if (v[2] == 0) return false;
      __int128 span = __int128(v[1]) - v[0], step = v[2];
      __int128 l = span / step + (span % step != 0 && ((span < 0) == (step < 0)) ? 1 : 0);
      if (l >= __int128(int64_t(1) << 40)) return false;
      len = l > 0 ? int64_t(l) : 0;
    }
    s[0] = len;
    return true;
  }
  case COIL_SHAPE_RESIZE: {     // v: scales (f64 bits, attr 0) or sizes (attr 1..3), per axis
    int64_t support = attr / 4; // antialias filter support (0: no antialias)
    attr %= 4;
    if (n != r || outRank != r || 3 * r > kMaxSyms || attr < 0 || support < 0 || support > 2)
      return false;
    double scales[kMaxSyms] = {};
    const double maxLen = double(int64_t(1) << 40);
    double ratio = attr == 2 ? 1e300 : -1e300;
    for (int64_t i = 0; i < n; ++i) {
      if (attr == 0) {
        double sc;
        std::memcpy(&sc, &v[i], sizeof sc);
        if (!(sc > 0) || !(sc * double(in[i]) < maxLen)) return false;
        s[i] = int64_t(std::floor(sc * double(in[i])));
        scales[i] = sc;
      } else {
        if (v[i] < 0) return false;
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
        if (!(t >= 2 && t <= double(1 << 20))) return false; // too many taps
      }
      s[2 * r + i] = int64_t(t);
    }
    if (attr >= 2)
      for (int64_t i = 0; i < n; ++i) {
        double o = ratio * double(in[i]) + 0.5;
        if (!(o >= 0 && o < maxLen)) return false;
        s[i] = int64_t(o);
      }
    for (int64_t i = 0; i < n; ++i)
      if (in[i] == 0 && s[i] > 0) return false; // an empty axis cannot be resized
    return true;
  }
  default:
    return false;
  }
}

} // namespace

extern "C" void coil_cpu_shape_dims(coil_alloc_fn alloc, void *alloc_ctx, const void *values,
                                    const void *inDims, void **status, int64_t *s0, int64_t *s1,
                                    int64_t *s2, int64_t *s3, int64_t *s4, int64_t *s5, int64_t *s6,
                                    int64_t *s7, int64_t *s8, int64_t *s9, int64_t *s10,
                                    int64_t *s11, int64_t *s12, int64_t *s13, int64_t *s14,
                                    int64_t *s15, int64_t op, int64_t nValues, int64_t inRank,
                                    int64_t outRank, int64_t attr) {
  int64_t *out[kMaxSyms] = {s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15};
  int64_t s[kMaxSyms] = {};
  int64_t v[64] = {}, in[kMaxSyms] = {};
  bool ok = nValues >= 0 && nValues <= 64 && inRank >= 0 && inRank <= kMaxSyms;
  if (ok) {
    if (nValues > 0) std::memcpy(v, values, size_t(nValues) * sizeof(int64_t));
    if (inRank > 0) std::memcpy(in, inDims, size_t(inRank) * sizeof(int64_t));
    ok = computeDims(op, v, nValues, in, inRank, outRank, attr, s);
  }
  if (!ok)
    for (int64_t &x : s) x = 0; // a rule broken: every size 0 (an empty result)
  void *p = alloc(alloc_ctx, sizeof(int64_t));
  if (p) {
    int64_t flag = ok ? 1 : 0;
    std::memcpy(p, &flag, sizeof flag);
  } else {
    for (int64_t &x : s) x = 0;
  }
  *status = p;
  for (int i = 0; i < kMaxSyms; ++i) *out[i] = s[i];
}
