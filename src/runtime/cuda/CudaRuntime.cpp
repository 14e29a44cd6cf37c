/// libcoil_cuda's half of the runtime (see CudaRuntime.h): the device and its primary context,
/// model instances (fatbin module, functions, device weights) and the table libcoil_runtime
/// calls. Runs and CUDA graphs are in CudaRun.cpp, tuning sessions in CudaTune.cpp.
#include "runtime/cuda/CudaRuntime.h"

#include "runtime/cuda/CudaRuntimeInternal.h"

#include <cstdlib>
#include <cstring>

namespace coil::runtime::cuda {
namespace {

/// Graphs per model instance (each holds an arena): COIL_CUDA_MAX_GRAPHS, default 16; runs of
/// further signatures run eagerly.
size_t maxGraphs() {
  const char *env = std::getenv("COIL_CUDA_MAX_GRAPHS");
  if (!env || !*env) return 16;
  char *end = nullptr;
  long v = std::strtol(env, &end, 10);
  return *end || v < 0 ? 16 : size_t(v);
}

std::mutex g_deviceMutex;
/// Set once, kept for the process (the primary context stays retained).
std::atomic<Device *> g_device{nullptr};

std::string archList(const std::vector<std::string> &archs) {
  std::string s;
  for (const std::string &a : archs) s += (s.empty() ? "" : ", ") + a;
  return s;
}

} // namespace

std::string cuText(CUresult r) {
  const char *name = nullptr, *text = nullptr;
  if (cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
  if (cuGetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
  return std::string(name ? name : "CUDA error " + std::to_string(int(r))) + ": " +
         (text ? text : "unknown error");
}

void check(CUresult r, const char *call, int32_t status) {
  if (r != CUDA_SUCCESS)
    throw Failure{status, std::string("cuda: ") + call + " failed: " + cuText(r)};
}

Device &device() {
  if (Device *d = g_device.load(std::memory_order_acquire)) return *d;
  std::lock_guard<std::mutex> lock(g_deviceMutex);
  if (Device *d = g_device.load(std::memory_order_acquire)) return *d;
  auto pkg = [](const std::string &m) { return Failure{COIL_ERROR_PACKAGE, "cuda: " + m}; };
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS)
    throw pkg("cannot initialize the CUDA driver (cuInit: " + cuText(r) +
              "); CUDA packages need an NVIDIA GPU and its driver");
  int count = 0;
  r = cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS) throw pkg("cuDeviceGetCount failed: " + cuText(r));
  if (count == 0) throw pkg("no CUDA device on this machine");
  auto d = std::make_unique<Device>();
  if (const char *env = std::getenv("COIL_CUDA_DEVICE"); env && *env) {
    char *end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (*end || v < 0 || v >= count)
      throw pkg("COIL_CUDA_DEVICE must be a device ordinal in [0, " + std::to_string(count) +
                "), got '" + env + "'");
    d->ordinal = int(v);
  }
  r = cuDeviceGet(&d->device, d->ordinal);
  if (r != CUDA_SUCCESS)
    throw pkg("cuDeviceGet(" + std::to_string(d->ordinal) + ") failed: " + cuText(r));
  int major = 0, minor = 0;
  check(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->device),
        "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)", COIL_ERROR_PACKAGE);
  check(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->device),
        "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)", COIL_ERROR_PACKAGE);
  d->smVersion = major * 10 + minor;
  char name[256] = {};
  if (cuDeviceGetName(name, sizeof name - 1, d->device) == CUDA_SUCCESS) d->name = name;
  int pools = 0;
  check(cuDeviceGetAttribute(&pools, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, d->device),
        "cuDeviceGetAttribute(MEMORY_POOLS_SUPPORTED)", COIL_ERROR_PACKAGE);
  if (!pools)
    throw pkg("device " + std::to_string(d->ordinal) + " (" + d->name +
              ") does not support stream-ordered allocation, which the runtime needs");
  check(cuDevicePrimaryCtxRetain(&d->context, d->device), "cuDevicePrimaryCtxRetain",
        COIL_ERROR_PACKAGE);
  // Keep freed stream-ordered memory in the pool instead of returning it at each synchronization.
  CUmemoryPool pool = nullptr;
  if (cuDeviceGetDefaultMemPool(&pool, d->device) == CUDA_SUCCESS) {
    cuuint64_t threshold = ~cuuint64_t(0);
    (void)cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold);
  }
  Device *done = d.release();
  g_device.store(done, std::memory_order_release);
  return *done;
}

std::string smName(int sm) {
  return "sm_" + std::to_string(sm);
}

Model *createModel(const ModelDesc &d) {
  Device &dev = device();
  ContextScope scope(dev);
  auto m = std::make_unique<Model>();
  m->package = d.package ? d.package : "?";
  m->fatbinName = d.fatbinName ? d.fatbinName : "the fatbin";
  for (size_t i = 0; i < d.numArchs; ++i) m->archs.push_back(d.archs[i]);
  m->sm = dev.smVersion;
  m->ordinal = dev.ordinal;
  m->workspaceBytes = d.workspaceBytes;
  m->graphs = d.graphs;
  m->maxGraphs = maxGraphs();
  // NULL when libcoil_cuda lacks the externs or cuBLASLt cannot start: externs then fail with
  // a message naming themselves.
  if (coil_cuda_blas_create) m->blas = coil_cuda_blas_create();
  std::string pkg = "package '" + m->package + "': ";
  std::string gpu = "this GPU (" + dev.name + ", " + smName(dev.smVersion) + ")";

  auto noImage = [&](const char *call, CUresult r) {
    return Failure{COIL_ERROR_PACKAGE, pkg + m->fatbinName + " has no kernel image that " + gpu +
                                           " and its driver can run; the package was compiled "
                                           "for " +
                                           archList(m->archs) + " (" + call + ": " + cuText(r) +
                                           ")"};
  };
  CUresult r = cuModuleLoadData(&m->module, d.fatbin);
  if (r == CUDA_ERROR_INVALID_IMAGE || r == CUDA_ERROR_INVALID_PTX)
    throw Failure{COIL_ERROR_PACKAGE, pkg + m->fatbinName +
                                          " is not a valid fatbin (cuModuleLoadData: " + cuText(r) +
                                          ")"};
  if (r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
    throw noImage("cuModuleLoadData", r);
  if (r != CUDA_SUCCESS)
    throw Failure{COIL_ERROR_PACKAGE,
                  pkg + "cannot load " + m->fatbinName + " (cuModuleLoadData: " + cuText(r) + ")"};
  for (size_t i = 0; i < d.numFunctions; ++i) {
    CUfunction f = nullptr;
    r = cuModuleGetFunction(&f, m->module, d.functions[i]);
    // With lazy module loading (the driver's default since CUDA 12.2) a fatbin without an
    // image for this GPU loads, and its functions fail.
    if (r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION ||
        r == CUDA_ERROR_INVALID_IMAGE)
      throw noImage("cuModuleGetFunction", r);
    if (r != CUDA_SUCCESS)
      throw Failure{COIL_ERROR_PACKAGE, pkg + "kernel function '" + d.functions[i] +
                                            "' (cuda.functions[" + std::to_string(i) +
                                            "]) is not in " + m->fatbinName + " for " + gpu +
                                            " (cuModuleGetFunction: " + cuText(r) + ")"};
    m->functions.push_back(reinterpret_cast<void *>(f));
  }
  if (m->functions.empty()) m->functions.push_back(nullptr); // a valid array pointer

  if (d.weightsBytes) {
    r = cuMemAlloc(&m->weights, d.weightsBytes);
    if (r != CUDA_SUCCESS)
      throw Failure{COIL_ERROR_RUNTIME, pkg + "cannot allocate " + std::to_string(d.weightsBytes) +
                                            " bytes of device memory for the weights (" +
                                            cuText(r) + ")"};
    COIL_CU(cuMemcpyHtoD(m->weights, d.weights, d.weightsBytes));
    // From pageable memory the copy returns once the bytes are staged, before the DMA ends;
    // runs launch on non-blocking streams, which do not wait for it: wait here.
    COIL_CU(cuCtxSynchronize());
  }
  for (size_t i = 0; i < d.numConstants; ++i)
    m->constants.push_back(
        reinterpret_cast<const void *>(m->weights + CUdeviceptr(d.constantOffsets[i])));
  m->constants.push_back(nullptr);
  return m.release();
}

namespace {

int32_t tableCreate(const ModelDesc *desc, void **model, std::string *error) {
  return guarded(error, [&] { *model = createModel(*desc); });
}

void tableDestroy(void *model) {
  Device *d = g_device.load(std::memory_order_acquire);
  if (!model || !d) return;
  try {
    ContextScope scope(*d);
    delete static_cast<Model *>(model);
  } catch (const Failure &) {
    delete static_cast<Model *>(model); // no context: freeing what is left is all we can do
  }
}

int32_t tableRun(void *model, const RunRequest *q, std::string *error) {
  return guarded(error, [&] { runModel(*static_cast<Model *>(model), *q); });
}

void tableReleaseDevice(void *p) {
  Device *d = g_device.load(std::memory_order_acquire);
  if (!p || !d) return;
  try {
    ContextScope scope(*d);
    (void)cuMemFree(reinterpret_cast<CUdeviceptr>(p));
  } catch (const Failure &) {
  }
}

void tableGraphStats(void *model, int64_t *captures, int64_t *replays) {
  auto *m = static_cast<Model *>(model);
  if (captures) *captures = m ? m->captures.load() : 0;
  if (replays) *replays = m ? m->replays.load() : 0;
}

const Table kTable = {kTableVersion, tableCreate,        tableDestroy,
                      tableRun,      tableReleaseDevice, tableGraphStats};

} // namespace
} // namespace coil::runtime::cuda

extern "C" __attribute__((visibility("default"))) const coil::runtime::cuda::Table *
coil_cuda_runtime_table(void) {
  return &coil::runtime::cuda::kTable;
}
