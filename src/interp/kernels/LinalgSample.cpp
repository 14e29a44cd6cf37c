// Reference kernels of the sampling ops: GridSample, AffineGrid, RoiAlign, MaxRoiPool.
#include "interp/kernels/LinalgKernels.h"

#include <algorithm>
#include <cmath>

namespace coil::linalg {
namespace {

double cubicCoeff(double x, double a) {
  x = std::fabs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

/// Folds `x` into [lo, hi] by reflecting at the borders (any number of times).
double reflect(double x, double lo, double hi) {
  double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    double dx = lo - x;
    int64_t n = int64_t(dx / range);
    double r = dx - double(n) * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    double dx = x - hi;
    int64_t n = int64_t(dx / range);
    double r = dx - double(n) * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

Expected<std::vector<Tensor>> gridSampleKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0), &grid = ctx.input(1);
  size_t nd = x.rank() >= 3 ? size_t(x.rank() - 2) : 0;
  if (nd == 0 || grid.rank() != x.rank() || grid.dim(grid.rank() - 1) != int64_t(nd) ||
      grid.dim(0) != x.dim(0))
    return ctx.error("grid of shape " + shapeStr(grid.shape()) + " does not fit input " +
                     shapeStr(x.shape()));
  for (int64_t i = 2; i < x.rank(); ++i)
    if (x.dim(i) < 1 && grid.numel() > 0)
      return ctx.error("cannot sample an input with an empty spatial dim");
  COIL_TRY(GridSampleAttrs ga, decodeGridSample(ctx.node));
  const std::string &mode = ga.mode, &pad = ga.padding;
  bool align = ga.alignCorners;
  int64_t n = x.dim(0), c = x.dim(1);
  Shape in(x.shape().begin() + 2, x.shape().end());
  Shape outSp(grid.shape().begin() + 1, grid.shape().end() - 1);
  Shape outShape{n, c};
  outShape.insert(outShape.end(), outSp.begin(), outSp.end());
  int64_t inSize = numelOf(in), outSize = numelOf(outSp);
  auto inStrides = contiguousStrides(in);
  auto xv = x.toDoubles(), gv = grid.toDoubles();
  std::vector<double> out(size_t(numelOf(outShape)));
  struct DimTaps {
    std::vector<int64_t> idx; // -1: outside (zeros padding)
    std::vector<double> w;
  };
  std::vector<DimTaps> taps(nd);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < outSize; ++o) {
      const double *g = gv.data() + (b * outSize + o) * int64_t(nd);
      for (size_t d = 0; d < nd; ++d) {
        int64_t len = in[d];
        double v = g[nd - 1 - d]; // the grid lists x (last dim) first
        double pos = align ? (v + 1) / 2 * double(len - 1) : ((v + 1) * double(len) - 1) / 2;
        double lo = align ? 0.0 : -0.5, hi = align ? double(len - 1) : double(len) - 0.5;
        if (mode == "nearest") pos = std::nearbyint(pos);
        if (pos < lo || pos > hi) {
          if (pad == "border")
            pos = std::clamp(pos, 0.0, double(len - 1));
          else if (pad == "reflection")
            pos = reflect(pos, lo, hi);
        }
        auto mapIdx = [&](int64_t i) -> int64_t {
          if (i >= 0 && i < len) return i;
          if (pad == "zeros") return -1;
          if (pad == "border") return std::clamp<int64_t>(i, 0, len - 1);
          return std::clamp<int64_t>(int64_t(reflect(double(i), lo, hi)), 0, len - 1);
        };
        DimTaps &t = taps[d];
        t.idx.clear();
        t.w.clear();
        if (mode == "nearest") {
          t.idx.push_back(mapIdx(int64_t(pos)));
          t.w.push_back(1.0);
        } else if (mode == "linear") {
          double f = std::floor(pos), r = pos - f;
          t.idx = {mapIdx(int64_t(f)), mapIdx(int64_t(f) + 1)};
          t.w = {1 - r, r};
        } else {
          double f = std::floor(pos), r = pos - f;
          for (int k = -1; k <= 2; ++k) {
            t.idx.push_back(mapIdx(int64_t(f) + k));
            t.w.push_back(cubicCoeff(r - k, -0.75));
          }
        }
      }
      // Sum over the tap combinations of all dims.
      std::vector<size_t> sel(nd, 0);
      for (int64_t ch = 0; ch < c; ++ch) {
        const double *xb = xv.data() + (b * c + ch) * inSize;
        double acc = 0;
        std::fill(sel.begin(), sel.end(), 0);
        while (true) {
          double w = 1;
          int64_t flat = 0;
          bool zero = false;
          for (size_t d = 0; d < nd; ++d) {
            w *= taps[d].w[sel[d]];
            int64_t i = taps[d].idx[sel[d]];
            zero |= i < 0;
            flat += i * inStrides[d];
          }
          if (!zero) acc += w * xb[flat];
          size_t d = nd;
          while (d > 0 && ++sel[d - 1] == taps[d - 1].idx.size()) sel[--d] = 0;
          if (d == 0) break;
        }
        out[size_t((b * c + ch) * outSize + o)] = acc;
      }
    }
  return std::vector<Tensor>{Tensor::fromDoubles(x.dtype(), outShape, out)};
}

Expected<std::vector<Tensor>> affineGridKernel(KernelContext &ctx) {
  const Tensor &theta = ctx.input(0);
  Shape size = ctx.input(1).toInts();
  bool align = ctx.attrs().getInt("align_corners", 0) != 0;
  if (size.size() != 4 && size.size() != 5)
    return ctx.error("size must have 4 or 5 values, got " + std::to_string(size.size()));
  size_t nd = size.size() - 2;
  int64_t n = size[0];
  if (theta.rank() != 3 || theta.dim(0) != n || theta.dim(1) != int64_t(nd) ||
      theta.dim(2) != int64_t(nd + 1))
    return ctx.error("theta must have shape [" + std::to_string(n) + ", " + std::to_string(nd) +
                     ", " + std::to_string(nd + 1) + "], got " + shapeStr(theta.shape()));
  Shape sp(size.begin() + 2, size.end());
  for (int64_t s : sp)
    if (s < 0) return ctx.error("size must be non-negative");
  Shape outShape{n};
  outShape.insert(outShape.end(), sp.begin(), sp.end());
  outShape.push_back(int64_t(nd));
  auto base = [&](int64_t i, int64_t len) {
    if (align) return len == 1 ? -1.0 : -1.0 + 2.0 * double(i) / double(len - 1);
    return (2.0 * double(i) + 1.0) / double(len) - 1.0;
  };
  auto tv = theta.toDoubles();
  int64_t count = numelOf(sp);
  std::vector<double> out(size_t(n * count) * nd);
  std::vector<int64_t> idx;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t p = 0; p < count; ++p) {
      unravelIndex(p, sp, idx);
      std::vector<double> homo(nd + 1, 1.0); // (x, y[, z], 1): x is the last spatial dim
      for (size_t d = 0; d < nd; ++d) homo[d] = base(idx[nd - 1 - d], sp[nd - 1 - d]);
      for (size_t r = 0; r < nd; ++r) {
        double s = 0;
        for (size_t k = 0; k <= nd; ++k)
          s += tv[size_t(b) * nd * (nd + 1) + r * (nd + 1) + k] * homo[k];
        out[(size_t(b * count + p)) * nd + r] = s;
      }
    }
  return std::vector<Tensor>{Tensor::fromDoubles(theta.dtype(), outShape, out)};
}

Expected<std::vector<Tensor>> roiAlignKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0), &rois = ctx.input(1), &bi = ctx.input(2);
  if (x.rank() != 4 || rois.rank() != 2 || rois.dim(1) != 4 || bi.numel() != rois.dim(0))
    return ctx.error("roi_align needs X [N, C, H, W], rois [R, 4] and R batch indices");
  COIL_TRY(RoiAlignAttrs ra, decodeRoiAlign(ctx.node));
  int64_t ph = ra.outHeight, pw = ra.outWidth, ratio = ra.samplingRatio;
  double scale = ra.spatialScale;
  bool isMax = ra.max, halfPixel = ra.halfPixel;
  int64_t nr = rois.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  if ((h < 1 || w < 1) && nr > 0)
    return ctx.error("cannot pool from an input with an empty spatial dim");
  auto xv = x.toDoubles(), rv = rois.toDoubles();
  std::vector<double> out(size_t(nr * c * ph * pw));
  for (int64_t r = 0; r < nr; ++r) {
    int64_t b = bi.getInt(r);
    if (b < 0 || b >= x.dim(0))
      return ctx.error("batch index " + std::to_string(b) + " is out of range [0, " +
                       std::to_string(x.dim(0)) + ")");
    double off = halfPixel ? 0.5 : 0.0;
    double sw = rv[size_t(r * 4)] * scale - off, sh = rv[size_t(r * 4 + 1)] * scale - off;
    double ew = rv[size_t(r * 4 + 2)] * scale - off, eh = rv[size_t(r * 4 + 3)] * scale - off;
    double rw = ew - sw, rh = eh - sh;
    if (!halfPixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
    double bh = rh / double(ph), bw = rw / double(pw);
    int64_t gh = ratio > 0 ? ratio : int64_t(std::ceil(rh / double(ph)));
    int64_t gw = ratio > 0 ? ratio : int64_t(std::ceil(rw / double(pw)));
    double count = double(std::max<int64_t>(gh * gw, 1));
    for (int64_t ch = 0; ch < c; ++ch) {
      const double *xb = xv.data() + (b * c + ch) * h * w;
      for (int64_t py = 0; py < ph; ++py)
        for (int64_t px = 0; px < pw; ++px) {
          double acc = 0;
          bool first = true;
          for (int64_t iy = 0; iy < gh; ++iy)
            for (int64_t ix = 0; ix < gw; ++ix) {
              double y = sh + double(py) * bh + (double(iy) + 0.5) * bh / double(gh);
              double xx = sw + double(px) * bw + (double(ix) + 0.5) * bw / double(gw);
              double v1 = 0, v2 = 0, v3 = 0, v4 = 0;
              if (!(y < -1.0 || y > double(h) || xx < -1.0 || xx > double(w))) {
                y = std::max(y, 0.0);
                xx = std::max(xx, 0.0);
                int64_t yl = int64_t(y), xl = int64_t(xx), yh, xh;
                if (yl >= h - 1)
                  yh = yl = h - 1, y = double(yl);
                else
                  yh = yl + 1;
                if (xl >= w - 1)
                  xh = xl = w - 1, xx = double(xl);
                else
                  xh = xl + 1;
                double ly = y - double(yl), lx = xx - double(xl), hy = 1 - ly, hx = 1 - lx;
                v1 = hy * hx * xb[yl * w + xl];
                v2 = hy * lx * xb[yl * w + xh];
                v3 = ly * hx * xb[yh * w + xl];
                v4 = ly * lx * xb[yh * w + xh];
              }
              if (isMax) {
                double v = std::max({v1, v2, v3, v4});
                acc = first ? v : std::max(acc, v);
                first = false;
              } else {
                acc += v1 + v2 + v3 + v4;
              }
            }
          out[size_t(((r * c + ch) * ph + py) * pw + px)] = isMax ? acc : acc / count;
        }
    }
  }
  return std::vector<Tensor>{Tensor::fromDoubles(x.dtype(), {nr, c, ph, pw}, out)};
}

Expected<std::vector<Tensor>> maxRoiPoolKernel(KernelContext &ctx) {
  const Tensor &x = ctx.input(0), &rois = ctx.input(1);
  if (x.rank() != 4 || rois.rank() != 2 || rois.dim(1) != 5)
    return ctx.error("max_roi_pool needs X [N, C, H, W] and rois [R, 5]");
  auto ps = ctx.attrs().getInts("pooled_shape");
  if (ps.size() != 2 || ps[0] < 1 || ps[1] < 1)
    return ctx.error("pooled_shape must have 2 positive values");
  double scale = ctx.attrs().getFloat("spatial_scale", 1.0);
  int64_t nr = rois.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  auto xv = x.toDoubles(), rv = rois.toDoubles();
  std::vector<double> out(size_t(nr * c * ps[0] * ps[1]));
  for (int64_t r = 0; r < nr; ++r) {
    const double *roi = rv.data() + r * 5;
    int64_t b = int64_t(roi[0]);
    if (b < 0 || b >= x.dim(0))
      return ctx.error("batch index " + std::to_string(b) + " is out of range");
    int64_t sw = int64_t(std::round(roi[1] * scale)), sh = int64_t(std::round(roi[2] * scale));
    int64_t ew = int64_t(std::round(roi[3] * scale)), eh = int64_t(std::round(roi[4] * scale));
    double bh = double(std::max<int64_t>(eh - sh + 1, 1)) / double(ps[0]);
    double bw = double(std::max<int64_t>(ew - sw + 1, 1)) / double(ps[1]);
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t py = 0; py < ps[0]; ++py)
        for (int64_t px = 0; px < ps[1]; ++px) {
          int64_t hs = std::clamp<int64_t>(int64_t(std::floor(double(py) * bh)) + sh, 0, h);
          int64_t he = std::clamp<int64_t>(int64_t(std::ceil(double(py + 1) * bh)) + sh, 0, h);
          int64_t ws = std::clamp<int64_t>(int64_t(std::floor(double(px) * bw)) + sw, 0, w);
          int64_t we = std::clamp<int64_t>(int64_t(std::ceil(double(px + 1) * bw)) + sw, 0, w);
          double m = 0;
          bool any = false;
          for (int64_t yy = hs; yy < he; ++yy)
            for (int64_t xx = ws; xx < we; ++xx) {
              double v = xv[size_t(((b * c + ch) * h + yy) * w + xx)];
              m = any ? std::max(m, v) : v;
              any = true;
            }
          out[size_t(((r * c + ch) * ps[0] + py) * ps[1] + px)] = m;
        }
  }
  return std::vector<Tensor>{Tensor::fromDoubles(x.dtype(), {nr, c, ps[0], ps[1]}, out)};
}

} // namespace

void registerLinalgSampleKernels(KernelRegistry &r) {
  r.add(OpKind::GridSample, gridSampleKernel);
  r.add(OpKind::AffineGrid, affineGridKernel);
  r.add(OpKind::RoiAlign, roiAlignKernel);
  r.add(OpKind::MaxRoiPool, maxRoiPoolKernel);
}

} // namespace coil::linalg
