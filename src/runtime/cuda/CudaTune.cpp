/// libcoil_cuda's tuning sessions (coil compile --tune; see CudaTune.h): a package's fatbin
/// functions, a slot's stream and workspace, events to time launches, uploaded buffers.
#include "runtime/cuda/CudaTune.h"

#include "runtime/cuda/CudaRuntimeInternal.h"

#include <algorithm>

namespace coil::runtime::cuda {
namespace {

struct TuneSession {
  std::unique_ptr<Model> model;
  std::unique_ptr<Slot> slot;
  coil_cuda_ctx ctx = {};
  char ctxError[2048] = {};
  CUevent start = nullptr, stop = nullptr;
  std::vector<CUdeviceptr> buffers;

  ~TuneSession() {
    if (slot && slot->stream) (void)cuStreamSynchronize(slot->stream);
    for (CUdeviceptr p : buffers) (void)cuMemFree(p);
    if (start) (void)cuEventDestroy(start);
    if (stop) (void)cuEventDestroy(stop);
    slot.reset();
    model.reset();
  }
};

int32_t tuneOpen(const TuneDesc *desc, void **session, const coil_cuda_ctx **ctx,
                 std::string *deviceName, std::string *error) {
  return guarded(error, [&] {
    Device &dev = device();
    ContextScope scope(dev);
    auto s = std::make_unique<TuneSession>();
    ModelDesc md;
    md.package = desc->package;
    md.fatbin = desc->fatbin;
    md.fatbinBytes = desc->fatbinBytes;
    md.fatbinName = desc->fatbinName;
    md.functions = desc->functions;
    md.numFunctions = desc->numFunctions;
    md.workspaceBytes = desc->workspaceBytes;
    md.graphs = false;
    s->model.reset(createModel(md));
    s->slot = newSlot(desc->workspaceBytes);
    COIL_CU(cuEventCreate(&s->start, CU_EVENT_DEFAULT));
    COIL_CU(cuEventCreate(&s->stop, CU_EVENT_DEFAULT));
    coil_cuda_ctx &c = s->ctx;
    c.stream = s->slot->stream;
    c.functions = s->model->functions.data();
    c.blas = s->model->blas;
    c.workspace = reinterpret_cast<void *>(s->slot->workspace);
    c.workspace_bytes = s->slot->workspaceBytes;
    c.error = s->ctxError;
    c.error_size = sizeof s->ctxError;
    c.host_alloc = pinnedAlloc;
    c.host_free = pinnedFree;
    c.device_ordinal = dev.ordinal;
    c.sm_version = dev.smVersion;
    *ctx = &s->ctx;
    *deviceName = dev.name + " (" + smName(dev.smVersion) + ")";
    *session = s.release();
  });
}

int32_t tuneUpload(void *session, const void *host, size_t bytes, void **out, std::string *error) {
  return guarded(error, [&] {
    auto &s = *static_cast<TuneSession *>(session);
    ContextScope scope(device());
    CUdeviceptr p = 0;
    COIL_CU(cuMemAlloc(&p, std::max<size_t>(bytes, 256)));
    s.buffers.push_back(p);
    if (host && bytes) {
      COIL_CU(cuMemcpyHtoD(p, host, bytes));
      COIL_CU(cuCtxSynchronize()); // the DMA of a pageable copy may still be running
    }
    *out = reinterpret_cast<void *>(p);
  });
}

int32_t tuneTime(void *session, int32_t (*launch)(void *), void *user, int32_t warmup, int32_t reps,
                 double *medianUs, std::string *error) {
  return guarded(error, [&] {
    auto &s = *static_cast<TuneSession *>(session);
    ContextScope scope(device());
    CUstream st = s.slot->stream;
    auto once = [&] {
      s.ctxError[0] = 0;
      if (launch(user) != 0)
        throw Failure{COIL_ERROR_RUNTIME,
                      s.ctxError[0] ? std::string(s.ctxError) : "the launch failed"};
    };
    for (int32_t i = 0; i < warmup; ++i) once();
    COIL_CU(cuStreamSynchronize(st));
    std::vector<double> times;
    for (int32_t i = 0; i < std::max(reps, 1); ++i) {
      COIL_CU(cuEventRecord(s.start, st));
      once();
      COIL_CU(cuEventRecord(s.stop, st));
      COIL_CU(cuEventSynchronize(s.stop));
      float ms = 0;
      COIL_CU(cuEventElapsedTime(&ms, s.start, s.stop));
      times.push_back(double(ms) * 1000.0);
    }
    std::sort(times.begin(), times.end());
    *medianUs = times[times.size() / 2];
  });
}

void tuneFreeAll(void *session) {
  auto &s = *static_cast<TuneSession *>(session);
  try {
    ContextScope scope(device());
    (void)cuStreamSynchronize(s.slot->stream);
    for (CUdeviceptr p : s.buffers) (void)cuMemFree(p);
  } catch (const Failure &) {
  }
  s.buffers.clear();
}

void tuneClose(void *session) {
  if (!session) return;
  try {
    ContextScope scope(device());
    delete static_cast<TuneSession *>(session);
  } catch (const Failure &) {
    delete static_cast<TuneSession *>(session);
  }
}

const TuneTable kTuneTable = {kTuneTableVersion, tuneOpen,    tuneUpload,
                              tuneTime,          tuneFreeAll, tuneClose};

} // namespace
} // namespace coil::runtime::cuda

extern "C" __attribute__((visibility("default"))) const coil::runtime::cuda::TuneTable *
coil_cuda_tune_table(void) {
  return &coil::runtime::cuda::kTuneTable;
}
