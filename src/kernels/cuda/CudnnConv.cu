// Convolutions through cuDNN (see CudnnConv.h): suitability, the handle pool, the plan cache
// (descriptors and the chosen algorithm per problem) and the calls.
#include "kernels/cuda/CudnnConv.h"
#include "kernels/cuda/CudnnLoader.h"

#include <array>
#include <atomic>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda.h>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace coil::cuda {
namespace {

/// Everything that selects the descriptors and the algorithm of a problem.
using PlanKey = std::array<int64_t, 32>;

/// The descriptors and chosen algorithm of one problem; ok false: cuDNN does not run it.
struct Plan {
  const dnn::Api *a = nullptr;
  dnn::TensorDesc xd = nullptr, yd = nullptr;
  dnn::FilterDesc wd = nullptr;
  dnn::ConvDesc cd = nullptr;
  dnn::TensorDesc bd = nullptr;       ///< the bias [1, m, 1, ...] of a fused call
  dnn::ActivationDesc ad = nullptr;   ///< its activation (identity or ReLU)
  int algo = 0;
  std::atomic<bool> ok{false};
  std::string why; ///< why not ok (for COIL_CUDNN_DEBUG=1)
  Plan() = default;
  Plan(const Plan &) = delete;
  Plan &operator=(const Plan &) = delete;
  ~Plan() {
    if (!a) return;
    if (ad) a->destroyActivationDescriptor(ad);
    if (bd) a->destroyTensorDescriptor(bd);
    if (cd) a->destroyConvolutionDescriptor(cd);
    if (wd) a->destroyFilterDescriptor(wd);
    if (yd) a->destroyTensorDescriptor(yd);
    if (xd) a->destroyTensorDescriptor(xd);
  }
};

/// At most this many cached plans; the cache is cleared when it would grow past it (plans in
/// use stay alive through their shared_ptr).
constexpr size_t kMaxPlans = 4096;

} // namespace

struct DnnState {
  bool tf32 = false, pointwise = false, debug = false;
  std::mutex mu;
  const dnn::Api *api = nullptr; ///< set with the first handle
  std::vector<dnn::Handle> all, idle;
  bool broken = false; ///< creating a handle failed (outside capture): cuDNN is not used
  std::map<PlanKey, std::shared_ptr<Plan>> plans;
};

namespace {

bool fitsInt(int64_t v) {
  return v >= 0 && v <= INT_MAX;
}

/// The number of elements of [a, b, s0, s1, s2] if below 2^31, else -1.
int64_t elems(int64_t a, int64_t b, const int64_t s[3]) {
  int64_t p = 1;
  for (int64_t v : {a, b, s[0], s[1], s[2]}) {
    if (v < 0 || __builtin_mul_overflow(p, v, &p) || p >= (int64_t(1) << 31)) return -1;
  }
  return p;
}

/// Whether dim 0 of the right-aligned geometry is unused (a 1-D or 2-D problem).
bool dim0Unused(const DnnConv &c) {
  return c.in[0] == 1 && c.k[0] == 1 && c.out[0] == 1 && c.s[0] == 1 && c.d[0] == 1 && c.p[0] == 0;
}

int dataTypeOf(Elem t) {
  return t == Elem::F16 ? dnn::kDataHalf : t == Elem::BF16 ? dnn::kDataBfloat16 : dnn::kDataFloat;
}

/// The largest power of two (<= 256) dividing the address.
int64_t alignmentOf(const void *p) {
  uint64_t v = uint64_t(reinterpret_cast<uintptr_t>(p)) | 256;
  return int64_t(v & (~v + 1));
}

bool captureActive(CUstream s) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return cuStreamIsCapturing(s, &status) == CUDA_SUCCESS &&
         status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

bool captureInvalidated(CUstream s) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return cuStreamIsCapturing(s, &status) == CUDA_SUCCESS &&
         status == CU_STREAM_CAPTURE_STATUS_INVALIDATED;
}

/// Relaxed stream-capture mode for this thread while alive (cuDNN setup allocates).
struct RelaxedCapture {
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  bool active;
  explicit RelaxedCapture(bool on) : active(on) {
    if (active) (void)cuThreadExchangeStreamCaptureMode(&mode);
  }
  ~RelaxedCapture() {
    if (active) (void)cuThreadExchangeStreamCaptureMode(&mode);
  }
};

/// A handle of the pool, returned to it when destroyed.
struct Lease {
  DnnState *st = nullptr;
  dnn::Handle h = nullptr;
  Lease() = default;
  Lease(const Lease &) = delete;
  Lease &operator=(const Lease &) = delete;
  ~Lease() {
    if (!h) return;
    std::lock_guard<std::mutex> lock(st->mu);
    try {
      st->idle.push_back(h); // capacity reserved when the handle was made
    } catch (const std::exception &) {
    }
  }
};

/// Takes an idle handle or makes one; false when none can be had.
bool acquire(DnnState &st, const dnn::Api &a, bool capturing, Lease &lease) {
  lease.st = &st;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    if (st.broken) return false;
    if (!st.idle.empty()) {
      lease.h = st.idle.back();
      st.idle.pop_back();
      return true;
    }
  }
  dnn::Handle h = nullptr;
  if (a.create(&h) != dnn::kSuccess || !h) {
    if (!capturing) { // inside a capture the failure may be the capture's: try again later
      std::lock_guard<std::mutex> lock(st.mu);
      st.broken = true;
    }
    return false;
  }
  std::lock_guard<std::mutex> lock(st.mu);
  try {
    st.all.push_back(h);
    st.idle.reserve(st.all.size());
  } catch (const std::exception &) {
    if (!st.all.empty() && st.all.back() == h) st.all.pop_back();
    a.destroy(h);
    return false;
  }
  st.api = &a;
  lease.h = h;
  return true;
}

/// The rest of the plan of a convolution with a bias (descriptors of x, w, y and the
/// convolution made): the bias and activation descriptors, and the fused algorithm with
/// tensor-op math (then default math for f16/bf16, FMA math for f32 unless TF32 is allowed)
/// when its workspace fits.
void makeFusedPlan(const dnn::Api &a, dnn::Handle h, const DnnConv &c, int nb, int dt,
                   size_t wsBytes, Plan &plan) {
  auto step = [&](const char *what, dnn::Status s) {
    if (s == dnn::kSuccess) return true;
    plan.why = std::string(what) + " failed: " + dnn::statusText(a, s);
    return false;
  };
  if (!a.hasFusedBias()) {
    plan.why = "the library has no cudnnConvolutionBiasActivationForward";
    return;
  }
  // [1, m, 1, ...], its strides in y's layout (channels-last: [m, 1, m, m]; the same memory).
  int bDims[5] = {1, int(c.m), 1, 1, 1}, bStr[5] = {int(c.m), 1, 1, 1, 1};
  if (c.nhwc) bStr[2] = bStr[3] = int(c.m);
  if (!step("cudnnCreateTensorDescriptor", a.createTensorDescriptor(&plan.bd)) ||
      !step("cudnnSetTensorNdDescriptor", a.setTensorNdDescriptor(plan.bd, dt, nb, bDims, bStr)) ||
      !step("cudnnCreateActivationDescriptor", a.createActivationDescriptor(&plan.ad)) ||
      !step("cudnnSetActivationDescriptor",
            a.setActivationDescriptor(plan.ad,
                                      c.relu ? dnn::kActivationRelu : dnn::kActivationIdentity,
                                      dnn::kPropagateNan, 0.0)))
    return;
  bool f32 = c.t == Elem::F32;
  plan.why = "the fused algorithm (implicit precomputed GEMM) is unavailable or its workspace "
             "does not fit (" + std::to_string(wsBytes) + " bytes)";
  for (int m : {f32 ? dnn::kFmaMath : dnn::kTensorOpMath, dnn::kDefaultMath}) {
    if (a.setConvolutionMathType(plan.cd, m) != dnn::kSuccess) continue;
    size_t need = 0;
    if (a.getConvolutionForwardWorkspaceSize(h, plan.xd, plan.wd, plan.cd, plan.yd,
                                             dnn::kFwdAlgoImplicitPrecompGemm,
                                             &need) != dnn::kSuccess ||
        need > wsBytes)
      continue;
    plan.algo = dnn::kFwdAlgoImplicitPrecompGemm;
    plan.ok = true;
    plan.why.clear();
    return;
  }
}

/// Builds the descriptors and picks the algorithm (plan.ok stays false when cuDNN cannot run the
/// problem with this workspace).
void makePlan(const dnn::Api &a, dnn::Handle h, bool tf32, const DnnConv &c, size_t wsBytes,
              Plan &plan) {
  plan.a = &a;
  int nb = dim0Unused(c) ? 4 : 5, ns = nb - 2, j0 = 3 - ns;
  // x: [n, c, in...]; y: [n, m, out...]; w: conv [m, c/g, k...], transposed [c, m/g, k...].
  int xDims[5], yDims[5], wDims[5], xStr[5], yStr[5];
  int pads[3], strides[3], dil[3];
  xDims[0] = int(c.n), xDims[1] = int(c.c), yDims[0] = int(c.n), yDims[1] = int(c.m);
  wDims[0] = int(c.transpose ? c.c : c.m);
  wDims[1] = int(c.transpose ? c.m / c.group : c.c / c.group);
  for (int i = 0; i < ns; ++i) {
    xDims[2 + i] = int(c.in[j0 + i]), yDims[2 + i] = int(c.out[j0 + i]);
    wDims[2 + i] = int(c.k[j0 + i]);
    pads[i] = int(c.p[j0 + i]), strides[i] = int(c.s[j0 + i]), dil[i] = int(c.d[j0 + i]);
  }
  xStr[nb - 1] = 1, yStr[nb - 1] = 1;
  for (int i = nb - 2; i >= 0; --i) {
    xStr[i] = xStr[i + 1] * xDims[i + 1];
    yStr[i] = yStr[i + 1] * yDims[i + 1];
  }
  if (c.nhwc) { // [n, c, h, w] dims over channels-last memory (nb == 4)
    auto channelsLast = [](const int dims[4], int str[4]) {
      str[1] = 1, str[3] = dims[1], str[2] = dims[1] * dims[3], str[0] = str[2] * dims[2];
    };
    channelsLast(xDims, xStr);
    channelsLast(yDims, yStr);
  }
  int dt = dataTypeOf(c.t);
  // Each step: on failure, the reason is kept and the plan stays not ok.
  auto step = [&](const char *what, dnn::Status s) {
    if (s == dnn::kSuccess) return true;
    plan.why = std::string(what) + " failed: " + dnn::statusText(a, s);
    return false;
  };
  if (!step("cudnnCreateTensorDescriptor", a.createTensorDescriptor(&plan.xd)) ||
      !step("cudnnCreateTensorDescriptor", a.createTensorDescriptor(&plan.yd)) ||
      !step("cudnnCreateFilterDescriptor", a.createFilterDescriptor(&plan.wd)) ||
      !step("cudnnCreateConvolutionDescriptor", a.createConvolutionDescriptor(&plan.cd)))
    return;
  if (!step("cudnnSetTensorNdDescriptor", a.setTensorNdDescriptor(plan.xd, dt, nb, xDims, xStr)) ||
      !step("cudnnSetTensorNdDescriptor", a.setTensorNdDescriptor(plan.yd, dt, nb, yDims, yStr)) ||
      !step("cudnnSetFilterNdDescriptor",
            a.setFilterNdDescriptor(plan.wd, dt, c.nhwc ? dnn::kTensorNhwc : dnn::kTensorNchw, nb,
                                    wDims)) ||
      !step("cudnnSetConvolutionNdDescriptor",
            a.setConvolutionNdDescriptor(plan.cd, ns, pads, strides, dil, dnn::kCrossCorrelation,
                                         dnn::kDataFloat)) ||
      !step("cudnnSetConvolutionGroupCount", a.setConvolutionGroupCount(plan.cd, int(c.group))))
    return;
  bool f32 = c.t == Elem::F32;
  int math = f32 ? (tf32 ? dnn::kDefaultMath : dnn::kFmaMath) : dnn::kTensorOpMath;
  if (!step("cudnnSetConvolutionMathType", a.setConvolutionMathType(plan.cd, math))) return;
  // cuDNN's output size for the pads on both sides must be coil's (the forward convolution of a
  // transposed one maps y to x).
  int fwd[5];
  if (!step("cudnnGetConvolutionNdForwardOutputDim",
            a.getConvolutionNdForwardOutputDim(plan.cd, c.transpose ? plan.yd : plan.xd, plan.wd,
                                               nb, fwd)))
    return;
  const int *want = c.transpose ? xDims : yDims;
  for (int i = 0; i < nb; ++i)
    if (fwd[i] != want[i]) {
      plan.why = "cuDNN's output size differs from coil's";
      return;
    }
  if (c.bias) {
    makeFusedPlan(a, h, c, nb, dt, wsBytes, plan);
    return;
  }
  dnn::AlgoPerf perf[8] = {};
  int count = 0;
  dnn::Status s = c.transpose ? a.getConvolutionBackwardDataAlgorithmV7(
                                    h, plan.wd, plan.xd, plan.cd, plan.yd, 8, &count, perf)
                              : a.getConvolutionForwardAlgorithmV7(h, plan.xd, plan.wd, plan.cd,
                                                                   plan.yd, 8, &count, perf);
  if (!step(c.transpose ? "cudnnGetConvolutionBackwardDataAlgorithm_v7"
                        : "cudnnGetConvolutionForwardAlgorithm_v7",
            s))
    return;
  plan.why = "no algorithm among " + std::to_string(count) + " fits (workspace " +
             std::to_string(wsBytes) + " bytes, math type)";
  // f16/bf16: a tensor-op algorithm first (the heuristic may rank a CUDA-core one higher, e.g.
  // implicit_convolve_sgemm, several times slower), then any; f32: in the heuristic's order.
  bool half = !f32;
  for (int pass = half ? 0 : 1; pass < 2; ++pass)
    for (int i = 0; i < count && i < 8; ++i) {
      const dnn::AlgoPerf &r = perf[i];
      if (r.status != dnn::kSuccess || r.memory > wsBytes) continue;
      if (pass == 0 && r.mathType != dnn::kTensorOpMath) continue;
      // Never convert f32 data to f16; TF32 tensor cores only when allowed.
      if (r.mathType == dnn::kTensorOpMathAllowConversion) continue;
      if (f32 && !tf32 && r.mathType == dnn::kTensorOpMath) continue;
      int m = f32 && !tf32 ? dnn::kFmaMath : r.mathType;
      if (a.setConvolutionMathType(plan.cd, m) != dnn::kSuccess) continue;
      size_t need = 0;
      s = c.transpose ? a.getConvolutionBackwardDataWorkspaceSize(h, plan.wd, plan.xd, plan.cd,
                                                                  plan.yd, r.algo, &need)
                      : a.getConvolutionForwardWorkspaceSize(h, plan.xd, plan.wd, plan.cd, plan.yd,
                                                             r.algo, &need);
      if (s != dnn::kSuccess || need > wsBytes) continue;
      plan.algo = r.algo;
      plan.ok = true;
      plan.why.clear();
      return;
    }
}

/// With COIL_CUDNN_DEBUG=1: "coil cuDNN: <fn>: <message>" on stderr.
void note(const DnnState &st, const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void note(const DnnState &st, const char *fn, const char *fmt, ...) {
  if (!st.debug) return;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "coil cuDNN: %s: %s\n", fn, buf);
}

} // namespace

DnnState *dnnStateCreate(bool tf32) {
  auto *st = new (std::nothrow) DnnState;
  if (!st) return nullptr;
  st->tf32 = tf32;
  const char *pw = std::getenv("COIL_CUDNN_POINTWISE");
  st->pointwise = pw && std::strcmp(pw, "1") == 0;
  const char *dbg = std::getenv("COIL_CUDNN_DEBUG");
  st->debug = dbg && std::strcmp(dbg, "1") == 0;
  return st;
}

bool dnnPointwise(const coil_cuda_ctx *ctx) {
  DnnState *st = dnnStateOf(ctx);
  return st && st->pointwise;
}

void dnnStateDestroy(DnnState *st) {
  if (!st) return;
  st->plans.clear();
  if (st->api)
    for (dnn::Handle h : st->all) st->api->destroy(h);
  delete st;
}

bool dnnSuits(const DnnConv &c) {
  if (c.t != Elem::F32 && c.t != Elem::F16 && c.t != Elem::BF16) return false;
  if (c.bias && c.transpose) return false; // the fused call is forward only
  if (!fitsInt(c.n) || !fitsInt(c.c) || !fitsInt(c.m) || c.group < 1 || !fitsInt(c.group) ||
      c.n == 0 || c.c == 0 || c.m == 0 || c.c % c.group || c.m % c.group)
    return false;
  if (c.nhwc && (c.transpose || !dim0Unused(c))) return false; // channels-last: 2-D forward
  // Depthwise: the direct kernel, except channels-last (its direct kernel is only a fallback).
  if (!c.nhwc && c.group > 1 && c.c / c.group == 1) return false;
  for (int i = 0; i < 3; ++i) {
    int64_t in = c.in[i], k = c.k[i], out = c.out[i], s = c.s[i], d = c.d[i], p = c.p[i];
    if (!fitsInt(in) || !fitsInt(k) || !fitsInt(out) || !fitsInt(s) || !fitsInt(d) || !fitsInt(p) ||
        in == 0 || k == 0 || out == 0 || s == 0 || d == 0)
      return false;
    // Symmetric padding: the output size cuDNN derives with pad p on both sides is coil's.
    int64_t span = (k - 1) * d + 1;
    int64_t from = c.transpose ? out : in, to = c.transpose ? in : out;
    if (from + 2 * p < span || (from + 2 * p - span) / s + 1 != to) return false;
  }
  int64_t wPerGroup = c.transpose ? c.m / c.group : c.c / c.group;
  int64_t wRows = c.transpose ? c.c : c.m;
  return elems(c.n, c.c, c.in) >= 0 && elems(c.n, c.m, c.out) >= 0 &&
         elems(wRows, wPerGroup, c.k) >= 0;
}

int32_t dnnConv(const coil_cuda_ctx *ctx, const char *fn, const DnnConv &c) {
  DnnState *st = dnnStateOf(ctx);
  if (!st || !dnnSuits(c)) return -1;
  const dnn::Api *a = dnn::api();
  if (!a) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) note(*st, fn, "not used: %s", dnn::loadMessage());
    return -1;
  }
  CUstream stream = static_cast<CUstream>(ctx->stream);
  bool capturing = captureActive(stream);
  Scratch ws = workspaceOf(ctx);
  size_t wsBytes = ws.ptr ? ws.bytes : 0;
  PlanKey key{};
  {
    size_t i = 0;
    key[i++] = (c.transpose ? 1 : 0) | (c.nhwc ? 2 : 0) | (c.bias ? 4 : 0) | (c.relu ? 8 : 0);
    key[i++] = int64_t(c.t);
    for (int64_t v : {c.n, c.c, c.m, c.group}) key[i++] = v;
    for (int j = 0; j < 3; ++j)
      for (int64_t v : {c.in[j], c.k[j], c.out[j], c.s[j], c.d[j], c.p[j]}) key[i++] = v;
    key[i++] = int64_t(wsBytes);
    key[i++] = alignmentOf(c.x), key[i++] = alignmentOf(c.w), key[i++] = alignmentOf(c.y);
    key[i++] = alignmentOf(ws.ptr);
  }
  std::shared_ptr<Plan> plan;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    auto it = st->plans.find(key);
    if (it != st->plans.end()) plan = it->second;
  }
  if (plan && !plan->ok) return -1;
  // Inside a capture, cuDNN's setup (a handle, the algorithm) and its first run of an algorithm
  // may allocate: relaxed capture mode for this thread, and the capture checked afterwards.
  RelaxedCapture relaxed(capturing);
  auto broke = [&]() { return capturing && captureInvalidated(stream); };
  const char *broken = "using cuDNN invalidated the CUDA graph capture of the stream";
  Lease lease;
  if (!acquire(*st, *a, capturing, lease)) {
    note(*st, fn, "no cuDNN handle (cudnnCreate failed%s)", capturing ? " inside a capture" : "");
    return broke() ? fail(ctx, fn, "%s", broken) : -1;
  }
  if (a->setStream(lease.h, ctx->stream) != dnn::kSuccess)
    return broke() ? fail(ctx, fn, "%s", broken) : -1;
  if (!plan) {
    try {
      plan = std::make_shared<Plan>();
      makePlan(*a, lease.h, st->tf32, c, wsBytes, *plan);
      if (plan->ok)
        note(*st, fn, "%s n %lld c %lld m %lld group %lld: algorithm %d",
             c.transpose ? "backward data"
             : c.bias    ? (c.relu ? "forward + bias + relu (fused)" : "forward + bias (fused)")
                         : "forward",
             (long long)c.n, (long long)c.c, (long long)c.m, (long long)c.group, plan->algo);
      else
        note(*st, fn, "not used for n %lld c %lld m %lld group %lld: %s", (long long)c.n,
             (long long)c.c, (long long)c.m, (long long)c.group, plan->why.c_str());
      std::lock_guard<std::mutex> lock(st->mu);
      if (st->plans.size() >= kMaxPlans) st->plans.clear();
      st->plans.emplace(key, plan);
    } catch (const std::exception &) { // out of host memory: the caller's path
      return broke() ? fail(ctx, fn, "%s", broken) : -1;
    }
  }
  if (!plan->ok) return broke() ? fail(ctx, fn, "%s", broken) : -1;
  const float one = 1.0f, zero = 0.0f;
  dnn::Status s;
  if (c.bias) // z = y with alpha2 = 0: y = act(conv(x, w) + bias)
    s = a->convolutionBiasActivationForward(lease.h, &one, plan->xd, c.x, plan->wd, c.w, plan->cd,
                                            plan->algo, ws.ptr, wsBytes, &zero, plan->yd, c.y,
                                            plan->bd, c.bias, plan->ad, plan->yd, c.y);
  else if (c.transpose)
    s = a->convolutionBackwardData(lease.h, &one, plan->wd, c.w, plan->xd, c.x, plan->cd,
                                   plan->algo, ws.ptr, wsBytes, &zero, plan->yd, c.y);
  else
    s = a->convolutionForward(lease.h, &one, plan->xd, c.x, plan->wd, c.w, plan->cd, plan->algo,
                              ws.ptr, wsBytes, &zero, plan->yd, c.y);
  if (broke()) return fail(ctx, fn, "%s", broken);
  if (s != dnn::kSuccess) {
    plan->ok = false; // not again for this problem
    note(*st, fn, "algorithm %d failed: %s; coil's kernels run instead", plan->algo,
         dnn::statusText(*a, s));
    return -1;
  }
  return 0;
}

} // namespace coil::cuda
