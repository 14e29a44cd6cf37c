// CUDA GEMM externs through cuBLASLt: the GEMM state (handle, descriptor and algorithm cache),
// the internal gemmLt entry point that the convolutions share, and coil_cuda_gemm_*.
#include "kernels/cuda/CudaKernels.h"
#include "kernels/cuda/CudaKernelsImpl.h"
#include "kernels/cuda/CudnnConv.h"

#include <array>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cublasLt.h>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <new>

namespace coil::cuda {

int32_t fail(const coil_cuda_ctx *ctx, const char *fn, const char *fmt, ...) {
  if (ctx && ctx->error && ctx->error_size > 0) {
    int used = std::snprintf(ctx->error, ctx->error_size, "%s: ", fn);
    if (used >= 0 && size_t(used) < ctx->error_size) {
      va_list ap;
      va_start(ap, fmt);
      std::vsnprintf(ctx->error + used, ctx->error_size - size_t(used), fmt, ap);
      va_end(ap);
    }
  }
  return 1;
}

int32_t check(const coil_cuda_ctx *ctx, const char *fn, const char *what, cudaError_t e) {
  if (e == cudaSuccess) return 0;
  return fail(ctx, fn, "%s failed: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

int32_t checkLaunch(const coil_cuda_ctx *ctx, const char *fn, const char *kernel) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return 0;
  return fail(ctx, fn, "launching kernel %s failed: %s (%s)", kernel, cudaGetErrorName(e),
              cudaGetErrorString(e));
}

namespace {

/// A problem as cuBLASLt sees it: everything that selects descriptors and an algorithm (the
/// last two: the bias pointer of a bias epilogue, which the descriptor holds, and ReLU).
using PlanKey = std::array<int64_t, 18>;

/// Descriptors and the chosen algorithm of one problem (hasAlgo false: cuBLASLt has none, the
/// plain kernel runs instead).
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool hasAlgo = false;
  Plan() = default;
  Plan(const Plan &) = delete;
  Plan &operator=(const Plan &) = delete;
  ~Plan() {
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

/// At most this many cached plans; the cache is cleared when it would grow past it (plans in
/// use stay alive through their shared_ptr).
constexpr size_t kMaxPlans = 4096;

struct BlasState {
  cublasLtHandle_t handle = nullptr;
  bool tf32 = false;
  DnnState *dnn = nullptr; ///< the convolutions' cuDNN state; nullptr when COIL_CUDNN=0
  std::mutex mu;
  std::map<PlanKey, std::shared_ptr<Plan>> plans;
};

const char *statusName(cublasStatus_t s) {
  return cublasLtGetStatusName(s);
}

/// The largest power of two (<= 256) dividing the address and, when batched, the batch stride.
int64_t alignmentOf(const void *p, int64_t strideBytes, bool batched) {
  uint64_t v = uint64_t(reinterpret_cast<uintptr_t>(p)) | 256;
  if (batched && strideBytes != 0) v |= uint64_t(strideBytes);
  return int64_t(v & (~v + 1));
}

cudaDataType_t dataType(Elem t) {
  switch (t) {
  case Elem::F64:
    return CUDA_R_64F;
  case Elem::F32:
    return CUDA_R_32F;
  case Elem::F16:
    return CUDA_R_16F;
  case Elem::BF16:
    return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}

/// Builds the descriptors and asks for the best algorithm. Returns a cuBLAS status (the plan is
/// usable, possibly without an algorithm, on CUBLAS_STATUS_SUCCESS).
cublasStatus_t makePlan(BlasState &st, const GemmCall &g, const GemmEpilogue &epi, int64_t batch,
                        const PlanKey &key, Plan &p) {
  (void)key;
  cudaDataType_t dt = dataType(g.t);
  cublasComputeType_t compute = g.t == Elem::F64                ? CUBLAS_COMPUTE_64F
                                : (g.t == Elem::F32 && st.tf32) ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                : CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = g.t == Elem::F64 ? CUDA_R_64F : CUDA_R_32F;
  cublasStatus_t s = cublasLtMatmulDescCreate(&p.op, compute, scale);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  // Row-major Y = op(A) op(B) is column-major Y^T = op(B)^T op(A)^T: cuBLASLt's A is our B.
  cublasOperation_t opA = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N, opB = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  s = cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof(opA));
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  s = cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof(opB));
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  if (epi.bias) {
    // cuBLASLt's D rows are our columns: its bias vector (one value per D row) is our
    // per-column bias, of D's type, shared by every batch (stride 0).
    cublasLtEpilogue_t e = epi.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    cudaDataType_t bt = dt;
    int64_t biasStride = 0;
    s = cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e));
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &epi.bias,
                                         sizeof(epi.bias));
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt,
                                         sizeof(bt));
    if (s == CUBLAS_STATUS_SUCCESS && batch > 1)
      s = cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &biasStride,
                                         sizeof(biasStride));
    if (s != CUBLAS_STATUS_SUCCESS) return s;
  }
  auto layout = [&](cublasLtMatrixLayout_t *l, int64_t rows, int64_t cols, int64_t stride) {
    cublasStatus_t r = cublasLtMatrixLayoutCreate(l, dt, uint64_t(rows), uint64_t(cols), rows);
    if (r != CUBLAS_STATUS_SUCCESS || batch == 1) return r;
    int32_t count = int32_t(batch);
    r = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                         sizeof(count));
    if (r != CUBLAS_STATUS_SUCCESS) return r;
    return cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                            &stride, sizeof(stride));
  };
  // Column-major views: our B (k x n, or n x k stored when tb) and A (m x k, or k x m).
  s = g.tb ? layout(&p.la, g.k, g.n, g.sb) : layout(&p.la, g.n, g.k, g.sb);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  s = g.ta ? layout(&p.lb, g.m, g.k, g.sa) : layout(&p.lb, g.k, g.m, g.sa);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  s = layout(&p.ld, g.n, g.m, g.sy);
  if (s != CUBLAS_STATUS_SUCCESS) return s;

  cublasLtMatmulPreference_t pref = nullptr;
  s = cublasLtMatmulPreferenceCreate(&pref);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  uint64_t wsBytes = g.ws.ptr ? uint64_t(g.ws.bytes) : 0;
  uint32_t alA = uint32_t(key[11]), alB = uint32_t(key[12]), alD = uint32_t(key[13]);
  s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsBytes,
                                           sizeof(wsBytes));
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alB,
                                             sizeof(alB));
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alA,
                                             sizeof(alA));
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alD,
                                             sizeof(alD));
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alD,
                                             sizeof(alD));
  if (s != CUBLAS_STATUS_SUCCESS) {
    cublasLtMatmulPreferenceDestroy(pref);
    return s;
  }
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  s = cublasLtMatmulAlgoGetHeuristic(st.handle, p.op, p.la, p.lb, p.ld, p.ld, pref, 1, &result,
                                     &returned);
  cublasLtMatmulPreferenceDestroy(pref);
  if (s == CUBLAS_STATUS_NOT_SUPPORTED || (s == CUBLAS_STATUS_SUCCESS && returned == 0))
    return CUBLAS_STATUS_SUCCESS; // no algorithm: the plain kernel
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  p.algo = result.algo;
  p.hasAlgo = true;
  return CUBLAS_STATUS_SUCCESS;
}

/// The plain GEMM kernel (no cuBLASLt algorithm for the problem): one thread per output, with
/// the bias epilogue (bias[j] added in the accumulator type, then ReLU) when `bias` is set.
template <typename T>
__global__ void plainGemmKernel(const T *a, const T *b, T *y, int64_t batch, int64_t m, int64_t n,
                                int64_t k, bool ta, bool tb, int64_t sa, int64_t sb, int64_t sy,
                                double alpha, double beta, bool accumulate, const T *bias,
                                bool relu) {
  using A = typename ElemOf<T>::Acc;
  int64_t total = batch * m * n;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    int64_t j = idx % n, i = (idx / n) % m, bi = idx / (m * n);
    const T *ab = a + bi * sa, *bb = b + bi * sb;
    A acc = 0;
    for (int64_t p = 0; p < k; ++p)
      acc += toAcc<A>(ab[ta ? p * m + i : i * k + p]) * toAcc<A>(bb[tb ? j * k + p : p * n + j]);
    T *yp = y + bi * sy + i * n + j;
    A v = A(alpha) * acc;
    if (accumulate && beta != 0) v += A(beta) * toAcc<A>(*yp);
    if (bias) {
      v += toAcc<A>(bias[j]);
      if (relu && v < A(0)) v = A(0);
    }
    *yp = fromAcc<T>(v);
  }
}

int32_t plainGemm(const coil_cuda_ctx *ctx, const char *fn, const GemmCall &g,
                  const GemmEpilogue &epi) {
  cudaStream_t stream = static_cast<cudaStream_t>(ctx->stream);
  unsigned grid = gridFor(g.batch * g.m * g.n, 256);
#define COIL_PLAIN(T)                                                                              \
  plainGemmKernel<T><<<grid, 256, 0, stream>>>(                                                    \
      static_cast<const T *>(g.a), static_cast<const T *>(g.b), static_cast<T *>(g.y), g.batch,    \
      g.m, g.n, g.k, g.ta, g.tb, g.sa, g.sb, g.sy, g.alpha, g.beta, g.accumulate,                  \
      static_cast<const T *>(epi.bias), epi.relu)
  switch (g.t) {
  case Elem::F64:
    COIL_PLAIN(double);
    break;
  case Elem::F32:
    COIL_PLAIN(float);
    break;
  case Elem::F16:
    COIL_PLAIN(__half);
    break;
  case Elem::BF16:
    COIL_PLAIN(__nv_bfloat16);
    break;
  }
#undef COIL_PLAIN
  return checkLaunch(ctx, fn, "plainGemmKernel");
}

/// Batches per cuBLASLt call (its batch count is an int32; smaller chunks keep every grid
/// dimension in range).
constexpr int64_t kMaxBatch = 65535;

/// y[i] = act(y[i] + bias[i % n]) in the accumulator type (the bias epilogue after a GEMM that
/// ran without it).
template <typename T>
__global__ void biasAddKernel(const T *bias, T *y, int64_t total, int64_t n, bool relu) {
  using A = typename ElemOf<T>::Acc;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    A v = toAcc<A>(y[idx]) + toAcc<A>(bias[idx % n]);
    y[idx] = fromAcc<T>(relu && v < A(0) ? A(0) : v);
  }
}

/// A GEMM whose epilogue cuBLASLt has no algorithm for: f32 and f64 run cuBLASLt without the
/// epilogue, then the bias (+ ReLU) in a kernel of its own (the product rounded to the type
/// first, as the CPU kernels do); f16/bf16 run the plain kernel, which adds the bias before its
/// one rounding. `g.y` must be contiguous (g.sy == g.m * g.n, or one batch).
int32_t gemmWithoutLtEpilogue(const coil_cuda_ctx *ctx, const char *fn, const GemmCall &g,
                              const GemmEpilogue &epi) {
  if (!epi.bias || (g.t != Elem::F64 && g.t != Elem::F32)) return plainGemm(ctx, fn, g, epi);
  if (int32_t r = gemmLtEpilogue(ctx, fn, g, GemmEpilogue{})) return r;
  int64_t total = g.batch * g.m * g.n;
  unsigned grid = gridFor(total, 256);
  cudaStream_t stream = static_cast<cudaStream_t>(ctx->stream);
  if (g.t == Elem::F64)
    biasAddKernel<double><<<grid, 256, 0, stream>>>(
        static_cast<const double *>(epi.bias), static_cast<double *>(g.y), total, g.n, epi.relu);
  else
    biasAddKernel<float><<<grid, 256, 0, stream>>>(static_cast<const float *>(epi.bias),
                                                   static_cast<float *>(g.y), total, g.n, epi.relu);
  return checkLaunch(ctx, fn, "biasAddKernel");
}

} // namespace

DnnState *dnnStateOf(const coil_cuda_ctx *ctx) {
  auto *st = ctx ? static_cast<BlasState *>(ctx->blas) : nullptr;
  return st ? st->dnn : nullptr;
}

int32_t gemmLt(const coil_cuda_ctx *ctx, const char *fn, const GemmCall &call) {
  return gemmLtEpilogue(ctx, fn, call, GemmEpilogue{});
}

int32_t gemmLtEpilogue(const coil_cuda_ctx *ctx, const char *fn, const GemmCall &call,
                       const GemmEpilogue &epi) {
  auto *st = static_cast<BlasState *>(ctx->blas);
  if (!st) return fail(ctx, fn, "no cuBLASLt state (coil_cuda_blas_create failed)");
  GemmCall g = call;
  // A batch of contiguous A matrices times one shared B is a single GEMM with m * batch rows.
  if (g.batch > 1 && g.sb == 0 && !g.ta && g.sa == g.m * g.k && g.sy == g.m * g.n) {
    g.m *= g.batch;
    g.batch = 1;
  }
  size_t es = elemSize(g.t);
  for (int64_t b0 = 0; b0 < g.batch; b0 += kMaxBatch) {
    int64_t nb = g.batch - b0 < kMaxBatch ? g.batch - b0 : kMaxBatch;
    GemmCall c = g;
    c.batch = nb;
    c.a = static_cast<const char *>(g.a) + b0 * g.sa * int64_t(es);
    c.b = static_cast<const char *>(g.b) + b0 * g.sb * int64_t(es);
    c.y = static_cast<char *>(g.y) + b0 * g.sy * int64_t(es);
    bool batched = nb > 1;
    PlanKey key{int64_t(c.t),
                st->tf32 ? 1 : 0,
                nb,
                c.m,
                c.n,
                c.k,
                (c.ta ? 1 : 0) | (c.tb ? 2 : 0),
                batched ? c.sa : 0,
                batched ? c.sb : 0,
                batched ? c.sy : 0,
                int64_t(c.ws.ptr ? c.ws.bytes : 0),
                alignmentOf(c.a, c.sa * int64_t(es), batched),
                alignmentOf(c.b, c.sb * int64_t(es), batched),
                alignmentOf(c.y, c.sy * int64_t(es), batched),
                alignmentOf(c.ws.ptr, 0, false),
                0,
                int64_t(reinterpret_cast<uintptr_t>(epi.bias)),
                epi.relu ? 1 : 0};
    std::shared_ptr<Plan> plan;
    {
      std::lock_guard<std::mutex> lock(st->mu);
      auto it = st->plans.find(key);
      if (it != st->plans.end()) plan = it->second;
    }
    if (!plan) {
      try {
        plan = std::make_shared<Plan>();
        cublasStatus_t s = makePlan(*st, c, epi, nb, key, *plan);
        if (s != CUBLAS_STATUS_SUCCESS && epi.bias) {
          // cuBLASLt rejects the bias epilogue for this problem: gemmWithoutLtEpilogue.
          plan = std::make_shared<Plan>();
          s = CUBLAS_STATUS_SUCCESS;
        }
        if (s != CUBLAS_STATUS_SUCCESS)
          return fail(ctx, fn, "cuBLASLt setup for a %lldx%lldx%lld GEMM (batch %lld) failed: %s",
                      (long long)c.m, (long long)c.n, (long long)c.k, (long long)nb, statusName(s));
        std::lock_guard<std::mutex> lock(st->mu);
        if (st->plans.size() >= kMaxPlans) st->plans.clear();
        st->plans.emplace(key, plan);
      } catch (const std::exception &e) { // out of host memory (never across the C ABI)
        return fail(ctx, fn, "caching the cuBLASLt plan failed: %s", e.what());
      }
    }
    if (!plan->hasAlgo) {
      if (int32_t r = gemmWithoutLtEpilogue(ctx, fn, c, epi)) return r;
      continue;
    }
    float alpha32 = float(c.alpha), beta32 = c.accumulate ? float(c.beta) : 0.0f;
    double alpha64 = c.alpha, beta64 = c.accumulate ? c.beta : 0.0;
    const void *alpha = c.t == Elem::F64 ? static_cast<const void *>(&alpha64) : &alpha32;
    const void *beta = c.t == Elem::F64 ? static_cast<const void *>(&beta64) : &beta32;
    cublasStatus_t s =
        cublasLtMatmul(st->handle, plan->op, alpha, c.b, plan->la, c.a, plan->lb, beta, c.y,
                       plan->ld, c.y, plan->ld, &plan->algo, c.ws.ptr, c.ws.ptr ? c.ws.bytes : 0,
                       static_cast<cudaStream_t>(ctx->stream));
    if (s == CUBLAS_STATUS_NOT_SUPPORTED) {
      if (int32_t r = gemmWithoutLtEpilogue(ctx, fn, c, epi)) return r;
      continue;
    }
    if (s != CUBLAS_STATUS_SUCCESS)
      return fail(ctx, fn, "cublasLtMatmul (%lldx%lldx%lld, batch %lld) failed: %s", (long long)c.m,
                  (long long)c.n, (long long)c.k, (long long)nb, statusName(s));
  }
  return 0;
}

namespace {

bool mulSize(int64_t a, int64_t b, int64_t *out) {
  if (a < 0 || b < 0) return false;
  return !__builtin_mul_overflow(a, b, out);
}

/// y[b*mn + i] = c[b*sc + i] (C broadcast into the output before an accumulating GEMM).
template <typename T>
__global__ void copyBatchedKernel(const T *c, T *y, int64_t batch, int64_t mn, int64_t sc) {
  int64_t total = batch * mn;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x)
    y[idx] = c[(idx / mn) * sc + idx % mn];
}

/// y[i] = beta * y[i] (0 when beta is 0, as the CPU kernels).
template <typename T> __global__ void scaleKernel(T *y, int64_t total, double beta) {
  using A = typename ElemOf<T>::Acc;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x)
    y[idx] = beta == 0 ? fromAcc<T>(A(0)) : fromAcc<T>(A(beta) * toAcc<A>(y[idx]));
}

template <typename T>
int32_t gemmExtern(const coil_cuda_ctx *ctx, const char *fn, const void *a, const void *b,
                   const void *c, void *y, int64_t batch, int64_t m, int64_t n, int64_t k,
                   int64_t ta, int64_t tb, int64_t sa, int64_t sb, int64_t sc, double alpha,
                   double beta) {
  if (!ctx) return 1;
  int64_t mn, mk, kn, all, work;
  if (batch < 0 || sa < 0 || sb < 0 || sc < 0 || !mulSize(m, n, &mn) || !mulSize(m, k, &mk) ||
      !mulSize(k, n, &kn) || !mulSize(batch, mn, &all) || !mulSize(mn, k, &work))
    return 0;
  int64_t last = batch > 0 ? batch - 1 : 0, tmp;
  if (!mulSize(last, sa, &tmp) || !mulSize(last, sb, &tmp) || !mulSize(last, sc, &tmp)) return 0;
  if (all == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(ctx->stream);
  T *yt = static_cast<T *>(y);
  if (c && !(c == y && (sc == mn || batch == 1))) {
    copyBatchedKernel<T>
        <<<gridFor(all, 256), 256, 0, stream>>>(static_cast<const T *>(c), yt, batch, mn, sc);
    if (int32_t r = checkLaunch(ctx, fn, "copyBatchedKernel")) return r;
  }
  if (k == 0) {
    if (c) {
      scaleKernel<T><<<gridFor(all, 256), 256, 0, stream>>>(yt, all, beta);
      return checkLaunch(ctx, fn, "scaleKernel");
    }
    return check(ctx, fn, "cudaMemsetAsync",
                 cudaMemsetAsync(y, 0, size_t(all) * sizeof(T), stream));
  }
  GemmCall g;
  g.t = ElemOf<T>::kElem;
  g.a = a, g.b = b, g.y = y;
  g.batch = batch, g.m = m, g.n = n, g.k = k;
  g.ta = ta != 0, g.tb = tb != 0;
  g.sa = sa, g.sb = sb, g.sy = mn;
  g.alpha = alpha, g.beta = beta, g.accumulate = c != nullptr;
  g.ws = workspaceOf(ctx);
  return gemmLt(ctx, fn, g);
}

/// y[r, j] = act(bias[j]) for the rows of a GEMM with k == 0 (the product is zero).
template <typename T>
__global__ void biasFillKernel(const T *bias, T *y, int64_t total, int64_t n, bool relu) {
  using A = typename ElemOf<T>::Acc;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    A v = toAcc<A>(bias[idx % n]);
    y[idx] = fromAcc<T>(relu && v < A(0) ? A(0) : v);
  }
}

/// coil_cuda_gemm_bias_*: the GEMM with cuBLASLt's bias (+ ReLU) epilogue.
template <typename T>
int32_t gemmBiasExtern(const coil_cuda_ctx *ctx, const char *fn, const void *a, const void *b,
                       const void *bias, void *y, int64_t batch, int64_t m, int64_t n, int64_t k,
                       int64_t ta, int64_t tb, int64_t sa, int64_t sb, double alpha, int64_t relu) {
  if (!ctx) return 1;
  int64_t mn, mk, kn, all, work;
  if (batch < 0 || sa < 0 || sb < 0 || !mulSize(m, n, &mn) || !mulSize(m, k, &mk) ||
      !mulSize(k, n, &kn) || !mulSize(batch, mn, &all) || !mulSize(mn, k, &work))
    return 0;
  int64_t last = batch > 0 ? batch - 1 : 0, tmp;
  if (!mulSize(last, sa, &tmp) || !mulSize(last, sb, &tmp)) return 0;
  if (all == 0) return 0;
  if (!bias) return fail(ctx, fn, "the bias pointer is null");
  cudaStream_t stream = static_cast<cudaStream_t>(ctx->stream);
  if (k == 0) {
    biasFillKernel<T><<<gridFor(all, 256), 256, 0, stream>>>(
        static_cast<const T *>(bias), static_cast<T *>(y), all, n, relu != 0);
    return checkLaunch(ctx, fn, "biasFillKernel");
  }
  GemmCall g;
  g.t = ElemOf<T>::kElem;
  g.a = a, g.b = b, g.y = y;
  g.batch = batch, g.m = m, g.n = n, g.k = k;
  g.ta = ta != 0, g.tb = tb != 0;
  g.sa = sa, g.sb = sb, g.sy = mn;
  g.alpha = alpha, g.beta = 0, g.accumulate = false;
  g.ws = workspaceOf(ctx);
  GemmEpilogue epi;
  epi.bias = bias;
  epi.relu = relu != 0;
  return gemmLtEpilogue(ctx, fn, g, epi);
}

} // namespace
} // namespace coil::cuda

using namespace coil::cuda;

extern "C" {

void *coil_cuda_blas_create(void) {
  auto *st = new (std::nothrow) BlasState;
  if (!st) return nullptr;
  if (cublasLtCreate(&st->handle) != CUBLAS_STATUS_SUCCESS) {
    delete st;
    return nullptr;
  }
  const char *tf32 = std::getenv("COIL_CUDA_TF32");
  st->tf32 = tf32 && std::strcmp(tf32, "1") == 0;
  const char *dnn = std::getenv("COIL_CUDNN");
  if (!(dnn && std::strcmp(dnn, "0") == 0)) st->dnn = dnnStateCreate(st->tf32);
  return st;
}

void coil_cuda_blas_destroy(void *blas) {
  auto *st = static_cast<BlasState *>(blas);
  if (!st) return;
  st->plans.clear();
  dnnStateDestroy(st->dnn);
  cublasLtDestroy(st->handle);
  delete st;
}

#define COIL_CUDA_DEFINE_GEMM(S, T)                                                                \
  int32_t coil_cuda_gemm_##S(const coil_cuda_ctx *ctx, const void *a, const void *b, void *y,      \
                             int64_t batch, int64_t m, int64_t n, int64_t k, int64_t transA,       \
                             int64_t transB, int64_t strideA, int64_t strideB, double alpha) {     \
    return gemmExtern<T>(ctx, "coil_cuda_gemm_" #S, a, b, nullptr, y, batch, m, n, k, transA,      \
                         transB, strideA, strideB, 0, alpha, 0.0);                                 \
  }                                                                                                \
  int32_t coil_cuda_gemm_c_##S(const coil_cuda_ctx *ctx, const void *a, const void *b,             \
                               const void *c, void *y, int64_t batch, int64_t m, int64_t n,        \
                               int64_t k, int64_t transA, int64_t transB, int64_t strideA,         \
                               int64_t strideB, int64_t strideC, double alpha, double beta) {      \
    return gemmExtern<T>(ctx, "coil_cuda_gemm_c_" #S, a, b, c, y, batch, m, n, k, transA, transB,  \
                         strideA, strideB, strideC, alpha, beta);                                  \
  }

#define COIL_CUDA_DEFINE_GEMM_BIAS(S, T)                                                           \
  int32_t coil_cuda_gemm_bias_##S(const coil_cuda_ctx *ctx, const void *a, const void *b,          \
                                  const void *bias, void *y, int64_t batch, int64_t m, int64_t n,  \
                                  int64_t k, int64_t transA, int64_t transB, int64_t strideA,      \
                                  int64_t strideB, double alpha, int64_t relu) {                   \
    return gemmBiasExtern<T>(ctx, "coil_cuda_gemm_bias_" #S, a, b, bias, y, batch, m, n, k,        \
                             transA, transB, strideA, strideB, alpha, relu);                       \
  }

COIL_CUDA_DEFINE_GEMM_BIAS(f64, double)
COIL_CUDA_DEFINE_GEMM_BIAS(f32, float)
COIL_CUDA_DEFINE_GEMM_BIAS(f16, __half)
COIL_CUDA_DEFINE_GEMM_BIAS(bf16, __nv_bfloat16)
#undef COIL_CUDA_DEFINE_GEMM_BIAS

COIL_CUDA_DEFINE_GEMM(f64, double)
COIL_CUDA_DEFINE_GEMM(f32, float)
COIL_CUDA_DEFINE_GEMM(f16, __half)
COIL_CUDA_DEFINE_GEMM(bf16, __nv_bfloat16)
#undef COIL_CUDA_DEFINE_GEMM

} // extern "C"
