// CUDA convolution externs: cuDNN where it is loadable and suits the problem (CudnnConv.h);
// otherwise im2col into the workspace + cuBLASLt GEMM (chunked over the batch), a GEMM directly
// for pointwise convolutions, GEMM + col2im (a gather, no atomics) for transposed convolutions,
// and direct kernels for depthwise convolutions and for problems whose column buffer does not
// fit the workspace. Transposed convolutions keep their columns in the accumulator type (f32
// for f16/bf16), so each output is rounded once, after all its taps. The f16/bf16 convolutions
// with a bias (coil_cuda_conv_bias_*, coil_cuda_conv_nhwc_bias_*) add it, and clamp, before
// their one rounding: cuDNN's fused convolution, cuBLASLt's bias epilogue (channels-last 1x1),
// or the direct kernels with the epilogue.
#include "kernels/cuda/CudaKernels.h"
#include "kernels/cuda/CudaKernelsImpl.h"
#include "kernels/cuda/CudnnConv.h"
#include "kernels/cuda/CudnnLoader.h"

#include <climits>
#include <type_traits>

namespace coil::cuda {
namespace {

bool mulSize(int64_t a, int64_t b, int64_t *out) {
  if (a < 0 || b < 0) return false;
  return !__builtin_mul_overflow(a, b, out);
}
bool mulSizes(std::initializer_list<int64_t> v, int64_t *out) {
  int64_t p = 1;
  for (int64_t x : v)
    if (!mulSize(p, x, &p)) return false;
  *out = p;
  return true;
}

/// Geometry of a conv or transposed conv with the spatial dims right-aligned to 3 (unused
/// leading dims of size 1), validated as kernels/cpu does. Passed to kernels by value.
struct Geom {
  int64_t n = 0, c = 0, m = 0, group = 1, cg = 0, mg = 0;
  int64_t in[3], k[3], out[3], s[3], d[3], p[3];
  int64_t inSize = 0, kSize = 0, outSize = 0, colRows = 0;
};

/// Validates the geometry as kernels/cpu does: nullptr, or the rule broken (for the message).
const char *makeGeom(Geom &g, int64_t n, int64_t c, int64_t m, int64_t group, int64_t nd,
                     const int64_t in[3], const int64_t k[3], const int64_t out[3],
                     const int64_t s[3], const int64_t d[3], const int64_t p[3]) {
  if (nd < 1 || nd > 3) return "the number of spatial dims must be 1 to 3";
  if (n < 0 || c < 0 || m < 0) return "sizes n, c and m must be >= 0";
  if (group < 1 || c % group || m % group)
    return "group must be >= 1 and divide the input and output channels";
  g.n = n, g.c = c, g.m = m, g.group = group, g.cg = c / group, g.mg = m / group;
  for (int i = 0; i < 3; ++i) {
    int64_t j = i - (3 - nd);
    bool used = j >= 0;
    g.in[i] = used ? in[j] : 1, g.k[i] = used ? k[j] : 1, g.out[i] = used ? out[j] : 1;
    g.s[i] = used ? s[j] : 1, g.d[i] = used ? d[j] : 1, g.p[i] = used ? p[j] : 0;
    if (g.in[i] < 0 || g.k[i] < 0 || g.out[i] < 0 || g.s[i] < 1 || g.d[i] < 1 ||
        g.p[i] < -(INT64_MAX >> 2))
      return "spatial sizes must be >= 0, strides and dilations >= 1";
    int64_t a, b, e;
    if (!mulSize(g.out[i], g.s[i], &a) || !mulSize(g.k[i], g.d[i], &b) ||
        !mulSize(g.in[i], g.s[i], &e) || a > (INT64_MAX >> 2) || b > (INT64_MAX >> 2) ||
        e > (INT64_MAX >> 2) || g.p[i] > (INT64_MAX >> 2) || g.out[i] > (INT64_MAX >> 2))
      return "the coordinates of a spatial dim overflow";
  }
  int64_t all;
  bool ok = mulSizes({g.in[0], g.in[1], g.in[2]}, &g.inSize) &&
            mulSizes({g.k[0], g.k[1], g.k[2]}, &g.kSize) &&
            mulSizes({g.out[0], g.out[1], g.out[2]}, &g.outSize) &&
            mulSize(g.cg, g.kSize, &g.colRows) && mulSizes({n, c, g.inSize}, &all) &&
            mulSizes({n, m, g.outSize}, &all) && mulSizes({c, g.kSize, g.outSize}, &all) &&
            mulSizes({m, g.colRows}, &all) && mulSizes({c, g.mg, g.kSize}, &all) &&
            mulSizes({m, g.kSize, g.inSize}, &all);
  return ok ? nullptr : "the tensor sizes overflow int64";
}

/// fail() for a rejected geometry, naming the rule and the main sizes.
int32_t geometryError(const coil_cuda_ctx *ctx, const char *fn, const char *why, int64_t n,
                      int64_t c, int64_t m, int64_t group, int64_t nd) {
  return fail(ctx, fn, "%s (n %lld, c %lld, m %lld, group %lld, %lld spatial dims)", why,
              (long long)n, (long long)c, (long long)m, (long long)group, (long long)nd);
}

/// The path of the calling thread's last convolution extern (COIL_CUDA_CONV_PATH_*).
thread_local int32_t lastPath = COIL_CUDA_CONV_PATH_NONE;

/// The epilogue of the conv_bias twins, on the accumulator of output channel oc before its
/// rounding: v + bias[oc], then `v < lo ? lo : v` when `lower` and `v > hi ? hi : v` when
/// `upper` (NaN passes), as the CPU kernels. Inactive (the plain convolution) without a bias.
template <typename T> struct Epi {
  using A = typename ElemOf<T>::Acc;
  const T *bias = nullptr;
  bool lower = false, upper = false;
  A lo = A(0), hi = A(0);
  __device__ __forceinline__ A apply(A v, int64_t oc) const {
    if (!bias) return v;
    v += toAcc<A>(bias[oc]);
    if (lower) v = v < lo ? lo : v;
    if (upper) v = v > hi ? hi : v;
    return v;
  }
  /// The clamp is a ReLU (or there is none): what cuDNN's fused call and cuBLASLt's epilogue
  /// apply.
  bool reluOrNone() const { return !upper && (!lower || lo == A(0)); }
};

/// Runs the convolution through cuDNN when it suits (see dnnConv: -1 means not run).
template <typename T>
int32_t tryDnn(const coil_cuda_ctx *ctx, const char *fn, bool transpose, const T *x, const T *w,
               T *y, const Geom &g, bool nhwc = false, const Epi<T> &ep = {}) {
  if constexpr (std::is_same_v<T, double>) {
    return -1;
  } else {
    DnnConv c;
    c.transpose = transpose;
    c.nhwc = nhwc;
    c.t = ElemOf<T>::kElem;
    c.n = g.n, c.c = g.c, c.m = g.m, c.group = g.group;
    for (int i = 0; i < 3; ++i) {
      c.in[i] = g.in[i], c.k[i] = g.k[i], c.out[i] = g.out[i];
      c.s[i] = g.s[i], c.d[i] = g.d[i], c.p[i] = g.p[i];
    }
    c.x = x, c.w = w, c.y = y;
    c.bias = ep.bias, c.relu = ep.bias && ep.lower;
    int32_t r = dnnConv(ctx, fn, c);
    if (r == 0) lastPath = COIL_CUDA_CONV_PATH_CUDNN;
    return r;
  }
}

bool isPointwise(const Geom &g) {
  for (int i = 0; i < 3; ++i)
    if (g.k[i] != 1 || g.s[i] != 1 || g.p[i] != 0 || g.out[i] != g.in[i]) return false;
  return true;
}

/// A convolution over the last two spatial dims only (the first is 1, unstrided, unpadded).
bool isTwoD(const Geom &g) {
  return g.in[0] == 1 && g.k[0] == 1 && g.out[0] == 1 && g.s[0] == 1 && g.d[0] == 1 && g.p[0] == 0;
}

/// A channels-last 1x1 convolution of one group as the GEMM y[n*out, m] = x[n*out, c] w[m, c]^T.
template <typename T>
GemmCall pointwiseNhwcGemm(const coil_cuda_ctx *ctx, const T *x, const T *w, T *y, const Geom &g) {
  GemmCall call;
  call.t = ElemOf<T>::kElem;
  call.ws = workspaceOf(ctx);
  call.batch = 1;
  call.m = g.n * g.outSize, call.n = g.m, call.k = g.c;
  call.tb = true;
  call.a = x, call.b = w, call.y = y;
  return call;
}

/// The geometry as the kernels read it, in index type I: int32_t when every index and
/// coordinate fits (32-bit division is several times cheaper on the GPU), else int64_t.
template <typename I> struct KGeom {
  I c, m, cg, mg;
  I in[3], k[3], out[3], s[3], d[3], p[3];
  I inSize, kSize, outSize;
};

template <typename I> KGeom<I> kgeom(const Geom &g) {
  KGeom<I> r;
  r.c = I(g.c), r.m = I(g.m), r.cg = I(g.cg), r.mg = I(g.mg);
  for (int i = 0; i < 3; ++i) {
    r.in[i] = I(g.in[i]), r.k[i] = I(g.k[i]), r.out[i] = I(g.out[i]);
    r.s[i] = I(g.s[i]), r.d[i] = I(g.d[i]), r.p[i] = I(g.p[i]);
  }
  r.inSize = I(g.inSize), r.kSize = I(g.kSize), r.outSize = I(g.outSize);
  return r;
}

/// Whether 32-bit indices suffice: every buffer index below 2^31 (`maxIndex`: the largest
/// element count a kernel addresses) and every coordinate o*s - p + k*d (and i*s - p + k*d)
/// far from overflow.
bool fits32(const Geom &g, int64_t maxIndex) {
  constexpr int64_t kLimit = int64_t(1) << 29;
  int64_t all;
  if (maxIndex >= (int64_t(1) << 31) || !mulSizes({g.n, g.c, g.inSize}, &all) ||
      all >= (int64_t(1) << 31) || !mulSizes({g.n, g.m, g.outSize}, &all) ||
      all >= (int64_t(1) << 31) || !mulSizes({g.m, g.cg, g.kSize}, &all) ||
      all >= (int64_t(1) << 31))
    return false;
  for (int i = 0; i < 3; ++i)
    if (g.out[i] * g.s[i] >= kLimit || g.in[i] * g.s[i] >= kLimit || g.k[i] * g.d[i] >= kLimit ||
        g.p[i] >= kLimit || g.p[i] <= -kLimit || g.in[i] >= kLimit || g.out[i] >= kLimit)
      return false;
  return true;
}

template <typename I> __device__ __forceinline__ void split3(I v, const I dims[3], I r[3]) {
  r[2] = v % dims[2];
  v /= dims[2];
  r[1] = v % dims[1];
  r[0] = v / dims[1];
}

/// col[img][ic*K + kk][o] = x[b0 + img][ic][position(o, kk)] (0 in the padding), for `nb`
/// images and every input channel. The loop counter is 64-bit so that the grid stride cannot
/// overflow; everything else is in I.
template <typename T, typename I>
__global__ void im2colKernel(const T *x, T *col, KGeom<I> g, I b0, I nb) {
  using A = typename ElemOf<T>::Acc;
  I O = g.outSize, rows = g.c * g.kSize;
  int64_t total = int64_t(nb) * rows * O;
  for (int64_t it = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; it < total;
       it += int64_t(gridDim.x) * blockDim.x) {
    I idx = I(it);
    I o = idx % O, row = (idx / O) % rows, img = idx / (O * rows);
    I ic = row / g.kSize, kk = row % g.kSize;
    I oi[3], ki[3];
    split3(o, g.out, oi);
    split3(kk, g.k, ki);
    bool inside = true;
    I pos = 0;
    for (int d = 0; d < 3; ++d) {
      I i = oi[d] * g.s[d] - g.p[d] + ki[d] * g.d[d];
      inside = inside && i >= 0 && i < g.in[d];
      pos = pos * g.in[d] + i;
    }
    col[idx] = inside ? x[((b0 + img) * g.c + ic) * g.inSize + pos] : fromAcc<T>(A(0));
  }
}

/// Direct convolution: one thread per output element, accumulated in ElemOf<T>::Acc.
template <typename T, typename I>
__global__ void directConvKernel(const T *x, const T *w, T *y, KGeom<I> g, int64_t total,
                                 Epi<T> ep) {
  using A = typename ElemOf<T>::Acc;
  I O = g.outSize;
  for (int64_t it = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; it < total;
       it += int64_t(gridDim.x) * blockDim.x) {
    I idx = I(it);
    I o = idx % O, oc = (idx / O) % g.m, b = idx / (O * g.m);
    I gr = oc / g.mg;
    I oi[3];
    split3(o, g.out, oi);
    A acc = 0;
    for (I ic = 0; ic < g.cg; ++ic) {
      const T *xc = x + (b * g.c + gr * g.cg + ic) * g.inSize;
      const T *wc = w + (oc * g.cg + ic) * g.kSize;
      for (I kk = 0; kk < g.kSize; ++kk) {
        I ki[3];
        split3(kk, g.k, ki);
        bool inside = true;
        I pos = 0;
        for (int d = 0; d < 3; ++d) {
          I i = oi[d] * g.s[d] - g.p[d] + ki[d] * g.d[d];
          inside = inside && i >= 0 && i < g.in[d];
          pos = pos * g.in[d] + i;
        }
        if (inside) acc += toAcc<A>(xc[pos]) * toAcc<A>(wc[kk]);
      }
    }
    y[idx] = fromAcc<T>(ep.apply(acc, oc));
  }
}

/// The input position of transposed-conv output `oi` through kernel tap `ki`, or -1.
template <typename I>
__device__ __forceinline__ I transposedSource(const KGeom<I> &g, const I oi[3], const I ki[3]) {
  I pos = 0;
  for (int d = 0; d < 3; ++d) {
    I t = oi[d] + g.p[d] - ki[d] * g.d[d];
    if (t < 0 || t % g.s[d] != 0) return -1;
    I i = t / g.s[d];
    if (i >= g.in[d]) return -1;
    pos = pos * g.in[d] + i;
  }
  return pos;
}

/// y[b0 + img][oc][o] = sum over taps kk of col[img][oc*K + kk][source(o, kk)] (col2im as a
/// gather: deterministic, no atomics). The columns are in the accumulator type A (unrounded GEMM
/// results), so the sum of the overlapping taps is rounded to T once.
template <typename T, typename I>
__global__ void col2imKernel(const typename ElemOf<T>::Acc *col, T *y, KGeom<I> g, I b0, I nb) {
  using A = typename ElemOf<T>::Acc;
  I O = g.outSize, In = g.inSize, K = g.kSize;
  int64_t total = int64_t(nb) * g.m * O;
  for (int64_t it = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; it < total;
       it += int64_t(gridDim.x) * blockDim.x) {
    I idx = I(it);
    I o = idx % O, oc = (idx / O) % g.m, img = idx / (O * g.m);
    I oi[3];
    split3(o, g.out, oi);
    const A *src = col + (img * g.m + oc) * K * In;
    A acc = 0;
    for (I kk = 0; kk < K; ++kk) {
      I ki[3];
      split3(kk, g.k, ki);
      I pos = transposedSource(g, oi, ki);
      if (pos >= 0) acc += src[kk * In + pos];
    }
    y[b0 * g.m * O + idx] = fromAcc<T>(acc);
  }
}

/// dst[i] = src[i] widened to the accumulator type A (exact: f16 and bf16 values are f32 values,
/// and TF32 keeps their mantissas too).
template <typename T>
__global__ void widenKernel(const T *src, typename ElemOf<T>::Acc *dst, int64_t total) {
  using A = typename ElemOf<T>::Acc;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = toAcc<A>(src[i]);
}

/// Direct transposed convolution: one thread per output element.
template <typename T, typename I>
__global__ void directConvTransposeKernel(const T *x, const T *w, T *y, KGeom<I> g, int64_t total) {
  using A = typename ElemOf<T>::Acc;
  I O = g.outSize;
  for (int64_t it = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; it < total;
       it += int64_t(gridDim.x) * blockDim.x) {
    I idx = I(it);
    I o = idx % O, oc = (idx / O) % g.m, b = idx / (O * g.m);
    I gr = oc / g.mg, mc = oc % g.mg;
    I oi[3];
    split3(o, g.out, oi);
    A acc = 0;
    for (I kk = 0; kk < g.kSize; ++kk) {
      I ki[3];
      split3(kk, g.k, ki);
      I pos = transposedSource(g, oi, ki);
      if (pos < 0) continue;
      for (I ic = 0; ic < g.cg; ++ic) {
        I ch = gr * g.cg + ic;
        acc += toAcc<A>(x[(b * g.c + ch) * g.inSize + pos]) *
               toAcc<A>(w[(ch * g.mg + mc) * g.kSize + kk]);
      }
    }
    y[idx] = fromAcc<T>(acc);
  }
}

/// Bytes rounded up to a multiple of 256 (callers' sizes are far below SIZE_MAX).
size_t align256Up(size_t v) {
  return (v + 255) & ~size_t(255);
}

/// Splits the workspace into a column buffer and cuBLASLt's workspace (an eighth, at most
/// 32 MiB).
void splitWorkspace(const coil_cuda_ctx *ctx, Scratch &cols, Scratch &gemm) {
  Scratch ws = workspaceOf(ctx);
  size_t gemmBytes = align256Down(ws.bytes / 8);
  if (gemmBytes > (size_t(32) << 20)) gemmBytes = size_t(32) << 20;
  cols.ptr = ws.ptr;
  cols.bytes = align256Down(ws.bytes - gemmBytes);
  gemm.ptr = gemmBytes ? static_cast<char *>(ws.ptr) + cols.bytes : nullptr;
  gemm.bytes = gemmBytes;
}

template <typename T>
int32_t conv(const coil_cuda_ctx *ctx, const char *fn, const T *x, const T *w, T *y,
             const Geom &g) {
  lastPath = COIL_CUDA_CONV_PATH_NONE;
  if (g.n == 0 || g.m == 0 || g.outSize == 0) return 0;
  if (!ctx->blas) return fail(ctx, fn, "no cuBLASLt state (coil_cuda_blas_create failed)");
  cudaStream_t stream = static_cast<cudaStream_t>(ctx->stream);
  int64_t total = g.n * g.m * g.outSize;
  if (g.colRows == 0) { // no input channels or an empty kernel: zeros
    lastPath = COIL_CUDA_CONV_PATH_ZEROS;
    return check(ctx, fn, "cudaMemsetAsync",
                 cudaMemsetAsync(y, 0, size_t(total) * sizeof(T), stream));
  }
  auto direct = [&]() {
    lastPath = COIL_CUDA_CONV_PATH_DIRECT;
    unsigned grid = gridFor(total, 256);
    if (fits32(g, total))
      directConvKernel<T, int32_t>
          <<<grid, 256, 0, stream>>>(x, w, y, kgeom<int32_t>(g), total, Epi<T>{});
    else
      directConvKernel<T, int64_t>
          <<<grid, 256, 0, stream>>>(x, w, y, kgeom<int64_t>(g), total, Epi<T>{});
    return checkLaunch(ctx, fn, "directConvKernel");
  };
  if (g.group > 1 && g.cg == 1) return direct(); // depthwise: a GEMM would have one row
  // Pointwise convolutions are one batched GEMM without im2col: cuDNN only when asked to.
  bool pointwise = isPointwise(g);
  if (!pointwise || dnnPointwise(ctx))
    if (int32_t r = tryDnn(ctx, fn, false, x, w, y, g); r >= 0) return r;
  lastPath = COIL_CUDA_CONV_PATH_GEMM;
  GemmCall call;
  call.t = ElemOf<T>::kElem;
  call.m = g.mg, call.n = g.outSize, call.k = g.colRows;
  call.sa = 0, call.sy = g.m * g.outSize;
  if (pointwise) {
    call.ws = workspaceOf(ctx);
    call.batch = g.n;
    call.sb = g.c * g.inSize;
    for (int64_t gr = 0; gr < g.group; ++gr) {
      call.a = w + gr * g.mg * g.colRows;
      call.b = x + gr * g.cg * g.inSize;
      call.y = y + gr * g.mg * g.outSize;
      if (int32_t r = gemmLt(ctx, fn, call)) return r;
    }
    return 0;
  }
  Scratch cols;
  splitWorkspace(ctx, cols, call.ws);
  int64_t perImage = g.c * g.kSize * g.outSize; // elements of one image's columns
  int64_t fit = int64_t(cols.bytes / sizeof(T)) / perImage;
  if (fit == 0) return direct();
  T *col = static_cast<T *>(cols.ptr);
  for (int64_t b0 = 0; b0 < g.n; b0 += fit) {
    int64_t nb = g.n - b0 < fit ? g.n - b0 : fit;
    unsigned grid = gridFor(nb * perImage, 256);
    if (fits32(g, nb * perImage))
      im2colKernel<T, int32_t>
          <<<grid, 256, 0, stream>>>(x, col, kgeom<int32_t>(g), int32_t(b0), int32_t(nb));
    else
      im2colKernel<T, int64_t><<<grid, 256, 0, stream>>>(x, col, kgeom<int64_t>(g), b0, nb);
    if (int32_t r = checkLaunch(ctx, fn, "im2colKernel")) return r;
    call.batch = nb;
    call.sb = perImage;
    for (int64_t gr = 0; gr < g.group; ++gr) {
      call.a = w + gr * g.mg * g.colRows;
      call.b = col + gr * g.colRows * g.outSize;
      call.y = y + (b0 * g.m + gr * g.mg) * g.outSize;
      if (int32_t r = gemmLt(ctx, fn, call)) return r;
    }
  }
  return 0;
}

template <typename T>
int32_t convTranspose(const coil_cuda_ctx *ctx, const char *fn, const T *x, const T *w, T *y,
                      const Geom &g) {
  lastPath = COIL_CUDA_CONV_PATH_NONE;
  int64_t total = g.n * g.m * g.outSize;
  if (total == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(ctx->stream);
  if (g.c == 0 || g.inSize == 0 || g.kSize == 0) {
    lastPath = COIL_CUDA_CONV_PATH_ZEROS;
    return check(ctx, fn, "cudaMemsetAsync",
                 cudaMemsetAsync(y, 0, size_t(total) * sizeof(T), stream));
  }
  if (!ctx->blas) return fail(ctx, fn, "no cuBLASLt state (coil_cuda_blas_create failed)");
  auto direct = [&]() {
    lastPath = COIL_CUDA_CONV_PATH_DIRECT;
    unsigned grid = gridFor(total, 256);
    if (fits32(g, total))
      directConvTransposeKernel<T, int32_t>
          <<<grid, 256, 0, stream>>>(x, w, y, kgeom<int32_t>(g), total);
    else
      directConvTransposeKernel<T, int64_t>
          <<<grid, 256, 0, stream>>>(x, w, y, kgeom<int64_t>(g), total);
    return checkLaunch(ctx, fn, "directConvTransposeKernel");
  };
  if (g.cg == 1) return direct(); // a GEMM with k = 1 is only overhead
  if (int32_t r = tryDnn(ctx, fn, true, x, w, y, g); r >= 0) return r;
  lastPath = COIL_CUDA_CONV_PATH_GEMM;
  // The GEMM runs in the accumulator type A and writes unrounded columns: for f16/bf16 the
  // weights (once) and each chunk's images are first widened to f32 in the workspace, since the
  // GEMM takes one element type. Workspace (256-aligned pieces): [w in A][columns of `fit`
  // images][those images in A]; T = A (f32, f64) needs the columns only.
  using A = typename ElemOf<T>::Acc;
  constexpr bool widen = !std::is_same_v<A, T>;
  GemmCall call;
  Scratch cols;
  splitWorkspace(ctx, cols, call.ws);
  int64_t rows = g.mg * g.kSize;               // per group: col [mg*K, inSize]
  int64_t perImage = g.m * g.kSize * g.inSize; // every group's columns of one image
  int64_t wElems = widen ? g.c * rows : 0;     // w is [c, mg*K]
  int64_t xElems = widen ? g.c * g.inSize : 0; // one image in A
  size_t wBytes = widen ? align256Up(size_t(wElems) * sizeof(A)) : 0;
  size_t slack = widen ? 256 : 0; // aligning the widened images after the columns
  int64_t perFit = 0, fit = 0;
  if (cols.bytes > wBytes + slack && !__builtin_add_overflow(perImage, xElems, &perFit))
    fit = int64_t((cols.bytes - wBytes - slack) / sizeof(A)) / perFit;
  if (fit == 0) return direct();
  char *base = static_cast<char *>(cols.ptr);
  A *w32 = reinterpret_cast<A *>(base);
  A *col = reinterpret_cast<A *>(base + wBytes);
  A *x32 = reinterpret_cast<A *>(base + wBytes + align256Up(size_t(fit * perImage) * sizeof(A)));
  const A *wA = nullptr;
  if constexpr (widen) {
    widenKernel<T><<<gridFor(wElems, 256), 256, 0, stream>>>(w, w32, wElems);
    if (int32_t r = checkLaunch(ctx, fn, "widenKernel")) return r;
    wA = w32;
  } else {
    (void)w32, (void)x32;
    wA = w;
  }
  call.t = ElemOf<A>::kElem;
  call.m = rows, call.n = g.inSize, call.k = g.cg;
  call.ta = true; // w_g is stored [cg, mg*K]
  call.sa = 0, call.sb = g.c * g.inSize, call.sy = perImage;
  for (int64_t b0 = 0; b0 < g.n; b0 += fit) {
    int64_t nb = g.n - b0 < fit ? g.n - b0 : fit;
    const A *xA = nullptr; // the chunk's first image in A
    if constexpr (widen) {
      widenKernel<T>
          <<<gridFor(nb * xElems, 256), 256, 0, stream>>>(x + b0 * xElems, x32, nb * xElems);
      if (int32_t r = checkLaunch(ctx, fn, "widenKernel")) return r;
      xA = x32;
    } else {
      xA = x + b0 * g.c * g.inSize;
    }
    call.batch = nb;
    for (int64_t gr = 0; gr < g.group; ++gr) {
      call.a = wA + gr * g.cg * rows;
      call.b = xA + gr * g.cg * g.inSize;
      call.y = col + gr * rows * g.inSize;
      if (int32_t r = gemmLt(ctx, fn, call)) return r;
    }
    unsigned grid = gridFor(nb * g.m * g.outSize, 256);
    if (fits32(g, nb * perImage))
      col2imKernel<T, int32_t>
          <<<grid, 256, 0, stream>>>(col, y, kgeom<int32_t>(g), int32_t(b0), int32_t(nb));
    else
      col2imKernel<T, int64_t><<<grid, 256, 0, stream>>>(col, y, kgeom<int64_t>(g), b0, nb);
    if (int32_t r = checkLaunch(ctx, fn, "col2imKernel")) return r;
  }
  return 0;
}

/// Direct channels-last convolution: one thread per output element y[b][o][oc] (oc innermost,
/// so neighbouring threads read the same input pixel and consecutive weights rows), accumulated
/// in ElemOf<T>::Acc. x [n, in..., c], w [m, k..., c/group].
template <typename T, typename I>
__global__ void directConvNhwcKernel(const T *x, const T *w, T *y, KGeom<I> g, int64_t total,
                                     Epi<T> ep) {
  using A = typename ElemOf<T>::Acc;
  I O = g.outSize;
  for (int64_t it = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; it < total;
       it += int64_t(gridDim.x) * blockDim.x) {
    I idx = I(it);
    I oc = idx % g.m, o = (idx / g.m) % O, b = idx / (g.m * O);
    I gr = oc / g.mg;
    I oi[3];
    split3(o, g.out, oi);
    A acc = 0;
    for (I kk = 0; kk < g.kSize; ++kk) {
      I ki[3];
      split3(kk, g.k, ki);
      bool inside = true;
      I pos = 0;
      for (int d = 0; d < 3; ++d) {
        I i = oi[d] * g.s[d] - g.p[d] + ki[d] * g.d[d];
        inside = inside && i >= 0 && i < g.in[d];
        pos = pos * g.in[d] + i;
      }
      if (!inside) continue;
      const T *xs = x + (b * g.inSize + pos) * g.c + gr * g.cg;
      const T *ws = w + (oc * g.kSize + kk) * g.cg;
      for (I ic = 0; ic < g.cg; ++ic) acc += toAcc<A>(xs[ic]) * toAcc<A>(ws[ic]);
    }
    y[idx] = fromAcc<T>(ep.apply(acc, oc));
  }
}

/// Channels-last convolution: a pointwise one of one group is a single GEMM over every image's
/// positions (y [n*positions, m] = x [n*positions, c] * w [m, c]^T); others run through cuDNN
/// with NHWC descriptors where it suits (2-D), else the direct kernel.
template <typename T>
int32_t convNhwc(const coil_cuda_ctx *ctx, const char *fn, const T *x, const T *w, T *y,
                 const Geom &g) {
  lastPath = COIL_CUDA_CONV_PATH_NONE;
  if (g.n == 0 || g.m == 0 || g.outSize == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(ctx->stream);
  int64_t total = g.n * g.m * g.outSize;
  if (g.colRows == 0) {
    lastPath = COIL_CUDA_CONV_PATH_ZEROS;
    return check(ctx, fn, "cudaMemsetAsync",
                 cudaMemsetAsync(y, 0, size_t(total) * sizeof(T), stream));
  }
  if (g.group == 1 && isPointwise(g)) {
    if (!ctx->blas) return fail(ctx, fn, "no cuBLASLt state (coil_cuda_blas_create failed)");
    lastPath = COIL_CUDA_CONV_PATH_GEMM;
    return gemmLt(ctx, fn, pointwiseNhwcGemm(ctx, x, w, y, g));
  }
  bool twoD = isTwoD(g);
  if (twoD && ctx->blas)
    if (int32_t r = tryDnn(ctx, fn, false, x, w, y, g, true); r >= 0) return r;
  lastPath = COIL_CUDA_CONV_PATH_DIRECT;
  unsigned grid = gridFor(total, 256);
  if (fits32(g, total))
    directConvNhwcKernel<T, int32_t>
        <<<grid, 256, 0, stream>>>(x, w, y, kgeom<int32_t>(g), total, Epi<T>{});
  else
    directConvNhwcKernel<T, int64_t>
        <<<grid, 256, 0, stream>>>(x, w, y, kgeom<int64_t>(g), total, Epi<T>{});
  return checkLaunch(ctx, fn, "directConvNhwcKernel");
}

/// y[i] = epilogue(0) of its channel ((i / inner) % m): a convolution with no input channels or
/// an empty kernel, with its bias.
template <typename T>
__global__ void epilogueFillKernel(T *y, int64_t total, int64_t inner, int64_t m, Epi<T> ep) {
  using A = typename ElemOf<T>::Acc;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = fromAcc<T>(ep.apply(A(0), (i / inner) % m));
}

/// coil_cuda_conv_bias_* (nhwc false) and coil_cuda_conv_nhwc_bias_*: the convolution with the
/// epilogue `ep` applied to each accumulator before its one rounding. Paths: no input channels
/// or an empty kernel, the epilogue of 0; channels-last 1x1 of one group with a ReLU or no
/// clamp, one cuBLASLt GEMM with its BIAS / RELU_BIAS epilogue; with a ReLU or no clamp, cuDNN's
/// fused convolution where it suits (2-D for channels-last; not channels-first depthwise);
/// otherwise the direct kernel with the epilogue.
template <typename T>
int32_t convBias(const coil_cuda_ctx *ctx, const char *fn, const T *x, const T *w, T *y,
                 const Geom &g, const Epi<T> &ep, bool nhwc) {
  lastPath = COIL_CUDA_CONV_PATH_NONE;
  if (g.n == 0 || g.m == 0 || g.outSize == 0) return 0;
  if (!ep.bias) return fail(ctx, fn, "the bias pointer is null");
  cudaStream_t stream = static_cast<cudaStream_t>(ctx->stream);
  int64_t total = g.n * g.m * g.outSize;
  if (g.colRows == 0) {
    lastPath = COIL_CUDA_CONV_PATH_ZEROS;
    epilogueFillKernel<T>
        <<<gridFor(total, 256), 256, 0, stream>>>(y, total, nhwc ? 1 : g.outSize, g.m, ep);
    return checkLaunch(ctx, fn, "epilogueFillKernel");
  }
  if (nhwc && g.group == 1 && isPointwise(g) && ep.reluOrNone()) {
    if (!ctx->blas) return fail(ctx, fn, "no cuBLASLt state (coil_cuda_blas_create failed)");
    lastPath = COIL_CUDA_CONV_PATH_GEMM;
    GemmCall call = pointwiseNhwcGemm(ctx, x, w, y, g);
    GemmEpilogue epi;
    epi.bias = ep.bias;
    epi.relu = ep.lower;
    return gemmLtEpilogue(ctx, fn, call, epi);
  }
  bool twoD = isTwoD(g);
  if (ep.reluOrNone() && ctx->blas && (twoD || !nhwc))
    if (int32_t r = tryDnn(ctx, fn, false, x, w, y, g, nhwc, ep); r >= 0) return r;
  lastPath = COIL_CUDA_CONV_PATH_DIRECT;
  unsigned grid = gridFor(total, 256);
  if (nhwc) {
    if (fits32(g, total))
      directConvNhwcKernel<T, int32_t>
          <<<grid, 256, 0, stream>>>(x, w, y, kgeom<int32_t>(g), total, ep);
    else
      directConvNhwcKernel<T, int64_t>
          <<<grid, 256, 0, stream>>>(x, w, y, kgeom<int64_t>(g), total, ep);
    return checkLaunch(ctx, fn, "directConvNhwcKernel");
  }
  if (fits32(g, total))
    directConvKernel<T, int32_t><<<grid, 256, 0, stream>>>(x, w, y, kgeom<int32_t>(g), total, ep);
  else
    directConvKernel<T, int64_t><<<grid, 256, 0, stream>>>(x, w, y, kgeom<int64_t>(g), total, ep);
  return checkLaunch(ctx, fn, "directConvKernel");
}

// The C entry points: the geometry from the flat arguments (n, c, m, group, nd, then in, k,
// out, strides, dilations and pads of 3 dims each), checked, then the implementation.
using ConvArgs = int64_t[23];
template <typename T>
int32_t convEntry(int32_t (*impl)(const coil_cuda_ctx *, const char *, const T *, const T *, T *,
                                  const Geom &),
                  const char *fn, const coil_cuda_ctx *ctx, const void *x, const void *w, void *y,
                  const ConvArgs &a) {
  if (!ctx) return 1;
  lastPath = COIL_CUDA_CONV_PATH_NONE;
  Geom g;
  if (const char *why =
          makeGeom(g, a[0], a[1], a[2], a[3], a[4], a + 5, a + 8, a + 11, a + 14, a + 17, a + 20))
    return geometryError(ctx, fn, why, a[0], a[1], a[2], a[3], a[4]);
  return impl(ctx, fn, static_cast<const T *>(x), static_cast<const T *>(w), static_cast<T *>(y),
              g);
}

/// The C entry points of the conv_bias twins: the geometry and the clamp flags checked (as
/// kernels/cpu does), then convBias.
template <typename T>
int32_t convBiasEntry(const char *fn, bool nhwc, const coil_cuda_ctx *ctx, const void *x,
                      const void *w, const void *bias, void *y, const ConvArgs &a, int64_t clamp,
                      double lo, double hi) {
  if (!ctx) return 1;
  lastPath = COIL_CUDA_CONV_PATH_NONE;
  Geom g;
  if (const char *why =
          makeGeom(g, a[0], a[1], a[2], a[3], a[4], a + 5, a + 8, a + 11, a + 14, a + 17, a + 20))
    return geometryError(ctx, fn, why, a[0], a[1], a[2], a[3], a[4]);
  if (clamp < 0 || clamp > 3)
    return fail(ctx, fn, "clamp flags must be 0 to 3, got %lld", (long long)clamp);
  using A = typename ElemOf<T>::Acc;
  Epi<T> ep;
  ep.bias = static_cast<const T *>(bias);
  ep.lower = (clamp & 1) != 0, ep.upper = (clamp & 2) != 0;
  ep.lo = A(lo), ep.hi = A(hi);
  return convBias<T>(ctx, fn, static_cast<const T *>(x), static_cast<const T *>(w),
                     static_cast<T *>(y), g, ep, nhwc);
}

} // namespace
} // namespace coil::cuda

using namespace coil::cuda;

extern "C" {

#define COIL_CUDA_DEFINE_CONV_ENTRY(NAME, S, T, IMPL)                                              \
  int32_t coil_cuda_##NAME##_##S(                                                                  \
      const coil_cuda_ctx *ctx, const void *x, const void *w, void *y, int64_t n, int64_t c,       \
      int64_t m, int64_t group, int64_t nd, int64_t in0, int64_t in1, int64_t in2, int64_t k0,     \
      int64_t k1, int64_t k2, int64_t out0, int64_t out1, int64_t out2, int64_t s0, int64_t s1,    \
      int64_t s2, int64_t d0, int64_t d1, int64_t d2, int64_t p0, int64_t p1, int64_t p2) {        \
    const ConvArgs a = {n,    c,    m,  group, nd, in0, in1, in2, k0, k1, k2, out0,                \
                        out1, out2, s0, s1,    s2, d0,  d1,  d2,  p0, p1, p2};                     \
    return convEntry<T>(IMPL<T>, "coil_cuda_" #NAME "_" #S, ctx, x, w, y, a);                      \
  }
#define COIL_CUDA_DEFINE_CONV(S, T)                                                                \
  COIL_CUDA_DEFINE_CONV_ENTRY(conv, S, T, conv)                                                    \
  COIL_CUDA_DEFINE_CONV_ENTRY(conv_transpose, S, T, convTranspose)                                 \
  COIL_CUDA_DEFINE_CONV_ENTRY(conv_nhwc, S, T, convNhwc)

COIL_CUDA_DEFINE_CONV(f64, double)
COIL_CUDA_DEFINE_CONV(f32, float)
COIL_CUDA_DEFINE_CONV(f16, __half)
COIL_CUDA_DEFINE_CONV(bf16, __nv_bfloat16)
#undef COIL_CUDA_DEFINE_CONV
#undef COIL_CUDA_DEFINE_CONV_ENTRY

#define COIL_CUDA_DEFINE_CONV_BIAS_ENTRY(NAME, S, T, NHWC)                                         \
  int32_t coil_cuda_##NAME##_##S(                                                                  \
      const coil_cuda_ctx *ctx, const void *x, const void *w, const void *bias, void *y,           \
      int64_t n, int64_t c, int64_t m, int64_t group, int64_t nd, int64_t in0, int64_t in1,        \
      int64_t in2, int64_t k0, int64_t k1, int64_t k2, int64_t out0, int64_t out1, int64_t out2,   \
      int64_t s0, int64_t s1, int64_t s2, int64_t d0, int64_t d1, int64_t d2, int64_t p0,          \
      int64_t p1, int64_t p2, int64_t clamp, double lo, double hi) {                               \
    const ConvArgs a = {n,    c,    m,  group, nd, in0, in1, in2, k0, k1, k2, out0,                \
                        out1, out2, s0, s1,    s2, d0,  d1,  d2,  p0, p1, p2};                     \
    return convBiasEntry<T>("coil_cuda_" #NAME "_" #S, NHWC, ctx, x, w, bias, y, a, clamp, lo,     \
                            hi);                                                                   \
  }
#define COIL_CUDA_DEFINE_CONV_BIAS(S, T)                                                           \
  COIL_CUDA_DEFINE_CONV_BIAS_ENTRY(conv_bias, S, T, false)                                         \
  COIL_CUDA_DEFINE_CONV_BIAS_ENTRY(conv_nhwc_bias, S, T, true)

COIL_CUDA_DEFINE_CONV_BIAS(f16, __half)
COIL_CUDA_DEFINE_CONV_BIAS(bf16, __nv_bfloat16)
#undef COIL_CUDA_DEFINE_CONV_BIAS
#undef COIL_CUDA_DEFINE_CONV_BIAS_ENTRY

int32_t coil_cuda_conv_last_path(void) {
  return lastPath;
}

int64_t coil_cuda_cudnn_version(void) {
  const coil::cuda::dnn::Api *a = coil::cuda::dnn::api();
  return a ? int64_t(a->version) : 0;
}

const char *coil_cuda_cudnn_library(void) {
  (void)coil::cuda::dnn::api();
  return coil::cuda::dnn::loadMessage();
}

} // extern "C"
