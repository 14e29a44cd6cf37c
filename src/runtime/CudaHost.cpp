#include "runtime/CudaHost.h"

#include "runtime/DebugPrinter.h"
#include "runtime/cuda/CudaRuntime.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

namespace coil::runtime {
namespace {

std::mutex g_libMutex;
/// Set once libcoil_cuda is loaded; the library stays loaded for the process.
std::atomic<const cuda::Table *> g_table{nullptr};

std::string defaultLibraryPath() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void *>(&defaultLibraryPath), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    size_t slash = self.rfind('/');
    if (slash != std::string::npos) return self.substr(0, slash + 1) + "libcoil_cuda.so";
  }
  return "libcoil_cuda.so";
}

/// The debug printer reads device tensors through the driver that libcoil_cuda loaded (globally).
void registerDebugReader() {
  DeviceReader r;
  r.streamSynchronize =
      reinterpret_cast<int (*)(void *)>(dlsym(RTLD_DEFAULT, "cuStreamSynchronize"));
  r.memcpyDtoH =
      reinterpret_cast<int (*)(void *, uint64_t, size_t)>(dlsym(RTLD_DEFAULT, "cuMemcpyDtoH_v2"));
  r.errorName =
      reinterpret_cast<int (*)(int, const char **)>(dlsym(RTLD_DEFAULT, "cuGetErrorName"));
  if (r.streamSynchronize && r.memcpyDtoH) setDebugDeviceReader(r);
}

/// libcoil_cuda's table, loading the library on first use (retried after a failure).
CudaStatus cudaTable(const cuda::Table *&out) {
  std::lock_guard<std::mutex> lock(g_libMutex);
  if (const cuda::Table *t = g_table.load()) {
    out = t;
    return {};
  }
  const char *env = std::getenv("COIL_CUDA_LIBRARY");
  std::string path = env && *env ? env : defaultLibraryPath();
  void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    const char *e = dlerror();
    return {COIL_ERROR_PACKAGE,
            "cannot load the CUDA runtime library '" + path + "' (" + (e ? e : "?") +
                "); CUDA packages need libcoil_cuda.so, an NVIDIA driver (libcuda.so.1) and a GPU" +
                (env && *env ? "" : "; set COIL_CUDA_LIBRARY to its path if it is elsewhere")};
  }
  using TableFn = const cuda::Table *(*)();
  auto fn = reinterpret_cast<TableFn>(dlsym(lib, "coil_cuda_runtime_table"));
  const cuda::Table *t = fn ? fn() : nullptr;
  if (!t || t->version != cuda::kTableVersion) {
    dlclose(lib);
    return {COIL_ERROR_PACKAGE,
            "the CUDA runtime library '" + path + "' " +
                (t ? "has table version " + std::to_string(t->version) + ", this runtime needs " +
                         std::to_string(cuda::kTableVersion)
                   : std::string("lacks coil_cuda_runtime_table")) +
                " (libcoil_cuda.so and libcoil_runtime.so must come from one build)"};
  }
  g_table = t;
  out = t;
  registerDebugReader();
  return {};
}

} // namespace

CudaModel::~CudaModel() {
  if (handle_) g_table.load()->destroy(handle_);
}

CudaStatus CudaModel::load(const std::string &packageDir, const Metadata &md, const void *weights,
                           size_t weightsBytes, std::unique_ptr<CudaModel> &out) {
  std::string pkg = "package '" + packageDir + "': ";
  if (!md.cuda)
    return {COIL_ERROR_PACKAGE, pkg + "metadata.json: 'cuda' is missing for device cuda"};
  const CudaSig &c = *md.cuda;
  // The fatbin first: a package error, whatever the machine.
  std::string fatbinPath = packageDir + "/" + c.fatbin;
  std::ifstream f(fatbinPath, std::ios::binary);
  if (!f)
    return {COIL_ERROR_PACKAGE, pkg + "cannot open " + c.fatbin +
                                    " (metadata.json cuda.fatbin): " + std::strerror(errno)};
  std::stringstream ss;
  ss << f.rdbuf();
  std::string fatbin = ss.str();
  if (fatbin.empty()) return {COIL_ERROR_PACKAGE, pkg + c.fatbin + " is empty"};

  const cuda::Table *table = nullptr;
  if (CudaStatus s = cudaTable(table); s.code != COIL_OK) {
    s.message = pkg + s.message;
    return s;
  }
  std::vector<const char *> functions, archs;
  for (const std::string &s : c.functions) functions.push_back(s.c_str());
  for (const std::string &s : c.archs) archs.push_back(s.c_str());
  std::vector<int64_t> offsets;
  for (const ConstantSig &k : md.constants) offsets.push_back(k.offset);
  const char *graphsEnv = std::getenv("COIL_CUDA_GRAPHS");
  cuda::ModelDesc d;
  d.package = packageDir.c_str();
  d.fatbin = fatbin.data();
  d.fatbinBytes = fatbin.size();
  d.fatbinName = c.fatbin.c_str();
  d.functions = functions.data();
  d.numFunctions = functions.size();
  d.archs = archs.data();
  d.numArchs = archs.size();
  d.weights = weights;
  d.weightsBytes = weightsBytes;
  d.constantOffsets = offsets.data();
  d.numConstants = offsets.size();
  d.workspaceBytes = size_t(c.workspaceBytes);
  d.graphs = !c.hostFallback && !(graphsEnv && std::strcmp(graphsEnv, "0") == 0);
  std::unique_ptr<CudaModel> m(new CudaModel());
  std::string error;
  int32_t st = table->create(&d, &m->handle_, &error);
  if (st != COIL_OK) {
    m->handle_ = nullptr;
    if (error.rfind("package '", 0) != 0) error = pkg + error;
    return {coil_status(st), error};
  }
  out = std::move(m);
  return {};
}

CudaStatus CudaModel::run(const Metadata &md, coil_model_arena_bytes_fn arenaBytes,
                          coil_model_run_fn fn, const coil_tensor *inputs, int64_t numInputs,
                          coil_output *outputs, int64_t numOutputs, bool hostMemory, void *stream,
                          const struct coil_debug_hooks *debug) {
  std::vector<size_t> inputBytes(size_t(numInputs) + 1);
  for (int64_t i = 0; i < numInputs; ++i) {
    __int128 n = dtypeSize(md.inputs[i].dtype);
    for (int64_t d = 0; d < inputs[i].rank; ++d) n *= inputs[i].shape[d];
    if (n > (__int128(1) << 62))
      return {COIL_ERROR_INVALID_ARGUMENT,
              "input " + std::to_string(i) + " '" + md.inputs[i].name + "' is too large"};
    inputBytes[i] = size_t(n);
  }
  std::vector<int64_t> ranks(size_t(numOutputs) + 1);
  std::vector<size_t> elementBytes(size_t(numOutputs) + 1);
  std::vector<const char *> names(size_t(numOutputs) + 1);
  for (int64_t i = 0; i < numOutputs; ++i) {
    ranks[i] = int64_t(md.outputs[i].dims.size());
    elementBytes[i] = dtypeSize(md.outputs[i].dtype);
    names[i] = md.outputs[i].name.c_str();
  }
  cuda::RunRequest q;
  q.arenaBytes = arenaBytes;
  q.run = fn;
  q.modelName = md.name.c_str();
  q.numInputs = numInputs;
  q.inputs = inputs;
  q.inputBytes = inputBytes.data();
  q.numOutputs = numOutputs;
  q.outputs = outputs;
  q.outputRanks = ranks.data();
  q.outputElementBytes = elementBytes.data();
  q.outputNames = names.data();
  q.hostMemory = hostMemory;
  q.stream = stream;
  q.debug = debug;
  std::string error;
  int32_t st = g_table.load()->run(handle_, &q, &error);
  if (st != COIL_OK) return {coil_status(st), "model '" + md.name + "': " + error};
  return {};
}

void cudaReleaseDeviceOutput(void *ptr) {
  if (const cuda::Table *t = g_table.load(); t && ptr) t->releaseDevice(ptr);
}

} // namespace coil::runtime
