// libcoil_runtime + libcoil_cuda on a GPU, end to end with a hand-built CUDA package: a
// kernels.cu compiled by nvcc into a fatbin (sm_80, sm_90a), a hand-written wrapper (the model
// ABI with a coil_cuda_ctx, launchers through the driver API) compiled into model.so with -lcuda,
// metadata.json with the "cuda" object. Checks both run APIs, CUDA-graph capture and replay,
// graphs off (env, host fallback), concurrent runs, and errors.
//
// The model: x [N, 4] f32, constant w [4]; t = x + w (arena), u = 2 t + 0.5 (a buffer from the
// run's allocator), y = u [N, 4] and s = row sums of u [N]. model.so counts calls of
// coil_model_run in `coil_test_run_calls`: a graph replay does not call it.
#include "support/Sha256.h"
#include "wrapper/Package.h"

#include <cmath>
#include <coil/coil.h>
#include <cuda.h>
#include <dlfcn.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

const char *kKernels = R"(
#include <cstdint>
extern "C" __global__ void k_add(const float *x, const float *w, float *t, int64_t n) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) t[i] = x[i] + w[i % 4];
}
extern "C" __global__ void k_scale(const float *t, float *u, int64_t n) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) u[i] = 2.0f * t[i] + 0.5f;
}
extern "C" __global__ void k_rows(const float *u, float *y, float *s, int64_t rows) {
  int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float acc = 0;
  for (int j = 0; j < 4; ++j) {
    y[r * 4 + j] = u[r * 4 + j];
    acc += u[r * 4 + j];
  }
  s[r] = acc;
}
)";

const char *kWrapper = R"(
#include <coil/cuda_abi.h>
#include <coil/model_abi.h>
#include <cuda.h>
#include <cstdio>
#include <cstring>

extern "C" {
int coil_test_run_calls = 0;

static int launchFailed(const coil_cuda_ctx *ctx, const char *kernel, CUresult r) {
  const char *name = nullptr, *text = nullptr;
  cuGetErrorName(r, &name);
  cuGetErrorString(r, &text);
  snprintf(ctx->error, ctx->error_size, "kernel %s: cuLaunchKernel failed: %s: %s", kernel,
           name ? name : "?", text ? text : "?");
  return 1;
}

// Blocks of 128 threads; 4096 (an invalid launch) when N is 7777, to test launch errors.
static unsigned blockFor(int64_t rows) { return rows == 7777 ? 4096 : 128; }

static int launch(const coil_cuda_ctx *ctx, int f, const char *kernel, int64_t threads,
                  unsigned block, void **params) {
  if (threads == 0) return 0;
  unsigned grid = unsigned((threads + block - 1) / block);
  CUresult r = cuLaunchKernel((CUfunction)ctx->functions[f], grid, 1, 1, block, 1, 1, 0,
                              (CUstream)ctx->stream, params, nullptr);
  return r == CUDA_SUCCESS ? 0 : launchFailed(ctx, kernel, r);
}

static int k_add_c0(const coil_cuda_ctx *ctx, const float *x, const float *w, float *t,
                    int64_t n) {
  void *p[] = {&x, &w, &t, &n};
  return launch(ctx, 0, "k_add_c0", n, blockFor(n / 4), p);
}
static int k_scale_c0(const coil_cuda_ctx *ctx, const float *t, float *u, int64_t n) {
  void *p[] = {&t, &u, &n};
  return launch(ctx, 1, "k_scale_c0", n, blockFor(n / 4), p);
}
static int k_rows_c0(const coil_cuda_ctx *ctx, const float *u, float *y, float *s, int64_t rows) {
  void *p[] = {&u, &y, &s, &rows};
  return launch(ctx, 2, "k_rows_c0", rows, blockFor(rows), p);
}

uint32_t coil_model_abi_version(void) { return COIL_MODEL_ABI_VERSION; }

int64_t coil_model_arena_bytes(const int64_t *const *shapes) {
  return (shapes[0][0] * 16 + 63) / 64 * 64;
}

int32_t coil_model_run(const coil_model_run_args *a) {
  __atomic_fetch_add(&coil_test_run_calls, 1, __ATOMIC_RELAXED);
  const coil_cuda_ctx *ctx = (const coil_cuda_ctx *)a->device_ctx;
  if (!ctx || !ctx->functions || ctx->sm_version < 80) {
    snprintf(a->error, a->error_size, "no usable coil_cuda_ctx");
    return 1;
  }
  int64_t n = a->input_shapes[0][0];
  const float *x = (const float *)a->inputs[0];
  const float *w = (const float *)a->constants[0];
  float *t = (float *)a->arena;
  int64_t need[2] = {n * 16, n * 4};
  void *out[2] = {a->outputs[0], a->outputs[1]};
  for (int i = 0; i < 2; ++i)
    if (out[i] && a->output_capacity[i] < need[i]) {
      snprintf(a->error, a->error_size, "output %d '%s' needs %lld bytes, the caller gave %lld",
               i, i ? "s" : "y", (long long)need[i], (long long)a->output_capacity[i]);
      return 1;
    }
  bool mine[2] = {false, false};
  float *u = nullptr;
  int rc = 0;
  for (int i = 0; i < 2 && !rc; ++i)
    if (!out[i]) {
      out[i] = a->alloc(a->alloc_ctx, size_t(need[i]));
      mine[i] = true;
      if (!out[i]) rc = 1, snprintf(a->error, a->error_size, "out of memory for output %d", i);
    }
  if (!rc) {
    u = (float *)a->alloc(a->alloc_ctx, size_t(n * 16));
    if (!u) rc = 1, snprintf(a->error, a->error_size, "out of memory for u");
  }
  if (!rc) rc = k_add_c0(ctx, x, w, t, n * 4);
  if (!rc) rc = k_scale_c0(ctx, t, u, n * 4);
  if (!rc) rc = k_rows_c0(ctx, u, (float *)out[0], (float *)out[1], n);
  if (u) a->free(a->alloc_ctx, u);
  if (rc) {
    if (ctx->error != a->error) snprintf(a->error, a->error_size, "%s", ctx->error);
    for (int i = 0; i < 2; ++i)
      if (mine[i] && out[i]) a->free(a->alloc_ctx, out[i]);
    return rc;
  }
  a->outputs[0] = out[0];
  a->outputs[1] = out[1];
  a->output_shapes[0][0] = n;
  a->output_shapes[0][1] = 4;
  a->output_shapes[1][0] = n;
  return 0;
}
}
)";

std::string metadata(const std::string &functions, bool hostFallback) {
  return R"({"format": "coil-package", "format_version": 2, "model_abi_version": 2,
  "coil_version": "test", "name": "cuda_tiny", "device": "cuda", "library": "model.so",
  "weights": "weights.bin", "weights_bytes": 16,
  "symbols": [{"name": "N", "min": 0, "max": 100000}],
  "bindings": [{"symbol": "N", "input": 0, "dim": 0}],
  "inputs": [{"name": "x", "dtype": "f32", "shape": ["N", "4"]}],
  "outputs": [{"name": "y", "dtype": "f32", "shape": ["N", "4"]},
              {"name": "s", "dtype": "f32", "shape": ["N"]}],
  "constants": [{"name": "w", "dtype": "f32", "shape": [4], "offset": 0, "bytes": 16}],
  "cuda": {"fatbin": "src/kernels.fatbin", "functions": )" +
         functions + R"(, "archs": ["sm_80", "sm_90a"], "host_fallback": )" +
         (hostFallback ? "true" : "false") + R"(, "workspace_bytes": 1024}
}
)";
}

const char *kFunctions = R"(["k_add", "k_scale", "k_rows"])";

void writeFile(const std::string &path, const std::string &text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream f(path, std::ios::binary);
  f << text;
}

std::string readFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string cudaHome() {
  if (const char *h = std::getenv("CUDA_HOME"); h && *h) return h;
  return "/usr/local/cuda";
}

std::string nvcc() {
  if (const char *n = std::getenv("COIL_NVCC"); n && *n) return n;
  std::string p = cudaHome() + "/bin/nvcc";
  return access(p.c_str(), X_OK) == 0 ? p : "nvcc";
}

/// Whether a GPU exists; if so, its primary context (device 0, the runtime's default) is made
/// current on this thread for the test's own driver calls.
bool haveGpu() {
  if (cuInit(0) != CUDA_SUCCESS) return false;
  int n = 0;
  if (cuDeviceGetCount(&n) != CUDA_SUCCESS || n == 0) return false;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  return cuDeviceGet(&dev, 0) == CUDA_SUCCESS &&
         cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS &&
         cuCtxSetCurrent(ctx) == CUDA_SUCCESS;
}

/// The package's files, built once per test program; each test copies them to its own
/// directory (a distinct model.so file, so its own call counter).
struct Built {
  std::string dir, error;
  std::vector<float> w;
};

const Built &built() {
  static Built b = [] {
    Built r;
    std::string tmpl = (std::filesystem::temp_directory_path() / "coil-gpu-test-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) {
      r.error = "mkdtemp failed";
      return r;
    }
    r.dir = tmpl;
    writeFile(r.dir + "/src/kernels.cu", kKernels);
    writeFile(r.dir + "/src/wrapper.cpp", kWrapper);
    std::string log = r.dir + "/build.log";
    std::string cmd = nvcc() +
                      " --fatbin -gencode arch=compute_80,code=sm_80 -gencode "
                      "arch=compute_90a,code=sm_90a -o '" +
                      r.dir + "/src/kernels.fatbin' '" + r.dir + "/src/kernels.cu' > '" + log +
                      "' 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      r.error = "nvcc failed: " + cmd + "\n" + readFile(log);
      return r;
    }
    cmd = "c++ -O2 -std=c++17 -fPIC -shared -I" COIL_SOURCE_DIR "/include -I" + cudaHome() +
          "/include '" + r.dir + "/src/wrapper.cpp' -o '" + r.dir + "/model.so' -L" + cudaHome() +
          "/lib64/stubs -lcuda > '" + log + "' 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      r.error = "c++ failed: " + cmd + "\n" + readFile(log);
      return r;
    }
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> dist(-2, 2);
    r.w.resize(4);
    for (float &v : r.w) v = dist(rng);
    writeFile(r.dir + "/weights.bin", std::string(reinterpret_cast<const char *>(r.w.data()), 16));
    return r;
  }();
  return b;
}

/// A package directory for one test: the built files plus a metadata.json.
struct Package {
  explicit Package(const std::string &functions = kFunctions, bool hostFallback = false) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "coil-gpu-pkg-XXXXXX").string();
    dir = mkdtemp(tmpl.data()) ? tmpl : "";
    const Built &b = built();
    std::filesystem::create_directories(dir + "/src");
    for (const char *f : {"model.so", "weights.bin", "src/kernels.fatbin"})
      std::filesystem::copy_file(b.dir + "/" + f, dir + "/" + f);
    body = metadata(functions, hostFallback);
    writeFile(dir + "/metadata.json", body);
    // One model.so serves packages of several metadata: each copy gets the mark of its own
    // (appended after the ELF contents, which dlopen ignores), and the package is sealed.
    writeFile(dir + "/model.so",
              readFile(dir + "/model.so") + coil::wrapper::kMetadataMarker + coil::sha256Hex(body));
    coil::Status st =
        coil::wrapper::sealPackage(dir, {"weights.bin", "model.so", "src/kernels.fatbin"});
    EXPECT_TRUE(st.ok()) << st.error().render();
  }
  /// Records the files' new digests after a test changed one on purpose: the metadata as it was
  /// before sealing (sealPackage refuses a sealed one), sealed again.
  void reseal() const {
    writeFile(dir + "/metadata.json", body);
    coil::Status st =
        coil::wrapper::sealPackage(dir, {"weights.bin", "model.so", "src/kernels.fatbin"});
    EXPECT_TRUE(st.ok()) << st.error().render();
  }
  ~Package() {
    std::error_code ec;
    if (!dir.empty() && !std::getenv("COIL_KEEP_TEST_DIRS")) std::filesystem::remove_all(dir, ec);
  }
  /// coil_model_run calls made by this package's model.so so far.
  int runCalls() const {
    void *h = dlopen((dir + "/model.so").c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (!h) return -1;
    int *calls = static_cast<int *>(dlsym(h, "coil_test_run_calls"));
    int n = calls ? __atomic_load_n(calls, __ATOMIC_RELAXED) : -1;
    dlclose(h);
    return n;
  }
  std::string dir;
  std::string body; ///< metadata.json before sealing
};

class CudaRuntime : public ::testing::Test {
protected:
  void SetUp() override {
    if (!haveGpu()) GTEST_SKIP() << "no CUDA GPU: skipped";
    const Built &b = built();
    ASSERT_EQ(b.error, "");
    w = b.w;
  }
  std::vector<float> w;
};

std::vector<float> randomInput(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-5, 5);
  std::vector<float> x(size_t(n) * 4);
  for (float &v : x) v = dist(rng);
  return x;
}

/// Checks y and s against the model's definition.
void expectResults(const std::vector<float> &x, const std::vector<float> &w, const float *y,
                   const float *s) {
  size_t n = x.size() / 4;
  for (size_t r = 0; r < n; ++r) {
    float acc = 0;
    for (size_t j = 0; j < 4; ++j) {
      float u = 2.0f * (x[r * 4 + j] + w[j]) + 0.5f;
      ASSERT_FLOAT_EQ(y[r * 4 + j], u) << "y[" << r << ", " << j << "]";
      acc += u;
    }
    ASSERT_NEAR(s[r], acc, 1e-4f * (1 + std::fabs(acc))) << "s[" << r << "]";
  }
}

struct Loaded {
  explicit Loaded(const Package &p) {
    status = coil_model_load(p.dir.c_str(), &m);
    if (status != COIL_OK) error = coil_last_error();
  }
  ~Loaded() { coil_model_free(m); }
  coil_model *m = nullptr;
  coil_status status;
  std::string error;
};

/// One host-memory run with runtime-allocated outputs; checks the results.
void hostRun(coil_model *m, const std::vector<float> &w, int64_t n, unsigned seed) {
  std::vector<float> x = randomInput(n, seed);
  int64_t shape[2] = {n, 4};
  coil_tensor in = {x.data(), COIL_DTYPE_F32, 2, shape};
  coil_output out[2] = {};
  ASSERT_EQ(coil_model_run(m, &in, 1, out, 2), COIL_OK) << coil_last_error();
  EXPECT_EQ(out[0].owned, 1);
  EXPECT_EQ(out[0].rank, 2);
  EXPECT_EQ(out[0].shape[0], n);
  EXPECT_EQ(out[0].shape[1], 4);
  EXPECT_EQ(out[1].rank, 1);
  EXPECT_EQ(out[1].shape[0], n);
  EXPECT_EQ(out[1].dtype, COIL_DTYPE_F32);
  expectResults(x, w, static_cast<float *>(out[0].data), static_cast<float *>(out[1].data));
  coil_output_release(&out[0]);
  coil_output_release(&out[1]);
}

TEST_F(CudaRuntime, HostRunsAndGraphReplay) {
  Package pkg;
  Loaded l(pkg);
  ASSERT_EQ(l.status, COIL_OK) << l.error;
  EXPECT_EQ(coil_model_device(l.m), COIL_DEVICE_CUDA);
  hostRun(l.m, w, 37, 1);
  EXPECT_EQ(pkg.runCalls(), 1);
  // Same shape, new values: the graph is replayed (model.so's run is not called again).
  hostRun(l.m, w, 37, 2);
  hostRun(l.m, w, 37, 3);
  EXPECT_EQ(pkg.runCalls(), 1);
  // Another shape: a second capture; then both replay.
  hostRun(l.m, w, 5, 4);
  EXPECT_EQ(pkg.runCalls(), 2);
  hostRun(l.m, w, 37, 5);
  hostRun(l.m, w, 5, 6);
  EXPECT_EQ(pkg.runCalls(), 2);
  // Empty input: nothing to launch, still right.
  hostRun(l.m, w, 0, 7);

  // Caller host buffers, replayed; and a buffer too small.
  std::vector<float> x = randomInput(37, 8);
  int64_t shape[2] = {37, 4};
  coil_tensor in = {x.data(), COIL_DTYPE_F32, 2, shape};
  std::vector<float> y(37 * 4, -1), s(37, -1);
  coil_output out[2] = {};
  out[0].data = y.data(), out[0].capacity = int64_t(y.size() * 4);
  out[1].data = s.data(), out[1].capacity = int64_t(s.size() * 4);
  ASSERT_EQ(coil_model_run(l.m, &in, 1, out, 2), COIL_OK) << coil_last_error();
  EXPECT_EQ(out[0].owned, 0);
  EXPECT_EQ(out[0].data, y.data());
  expectResults(x, w, y.data(), s.data());
  out[1].capacity = 36 * 4;
  EXPECT_EQ(coil_model_run(l.m, &in, 1, out, 2), COIL_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(
      std::string(coil_last_error()).find("output 1 's' needs 148 bytes, the caller gave 144"),
      std::string::npos)
      << coil_last_error();
}

TEST_F(CudaRuntime, DeviceRuns) {
  Package pkg;
  Loaded l(pkg);
  ASSERT_EQ(l.status, COIL_OK) << l.error;
  const int64_t n = 300;
  std::vector<float> x = randomInput(n, 21);
  CUdeviceptr dx = 0, dy = 0, ds = 0;
  ASSERT_EQ(cuMemAlloc(&dx, x.size() * 4), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&dy, x.size() * 4), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&ds, n * 4), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoD(dx, x.data(), x.size() * 4), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS); // the pageable copy's DMA
  int64_t shape[2] = {n, 4};
  coil_tensor in = {reinterpret_cast<void *>(dx), COIL_DTYPE_F32, 2, shape};
  std::vector<float> y(x.size()), s(n);

  // Runtime-allocated device outputs on the runtime's stream (synchronized on return).
  for (int rep = 0; rep < 3; ++rep) {
    x = randomInput(n, 22 + rep);
    ASSERT_EQ(cuMemcpyHtoD(dx, x.data(), x.size() * 4), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS); // the pageable copy's DMA
    coil_output out[2] = {};
    ASSERT_EQ(coil_model_run_device(l.m, &in, 1, out, 2, nullptr), COIL_OK) << coil_last_error();
    EXPECT_EQ(out[0].owned, 2);
    EXPECT_EQ(out[1].owned, 2);
    EXPECT_EQ(out[0].shape[0], n);
    ASSERT_EQ(cuMemcpyDtoH(y.data(), reinterpret_cast<CUdeviceptr>(out[0].data), y.size() * 4),
              CUDA_SUCCESS);
    ASSERT_EQ(cuMemcpyDtoH(s.data(), reinterpret_cast<CUdeviceptr>(out[1].data), s.size() * 4),
              CUDA_SUCCESS);
    expectResults(x, w, y.data(), s.data());
    coil_output_release(&out[0]);
    coil_output_release(&out[1]);
    EXPECT_EQ(out[0].data, nullptr);
  }
  EXPECT_EQ(pkg.runCalls(), 1) << "the device pointers did not change: one capture, replays";

  // Caller device buffers on the caller's stream.
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  for (int rep = 0; rep < 3; ++rep) {
    x = randomInput(n, 30 + rep);
    ASSERT_EQ(cuMemcpyHtoDAsync(dx, x.data(), x.size() * 4, stream), CUDA_SUCCESS);
    coil_output out[2] = {};
    out[0].data = reinterpret_cast<void *>(dy), out[0].capacity = int64_t(x.size() * 4);
    out[1].data = reinterpret_cast<void *>(ds), out[1].capacity = n * 4;
    ASSERT_EQ(coil_model_run_device(l.m, &in, 1, out, 2, stream), COIL_OK) << coil_last_error();
    EXPECT_EQ(out[0].owned, 0);
    EXPECT_EQ(out[0].data, reinterpret_cast<void *>(dy));
    ASSERT_EQ(cuMemcpyDtoHAsync(y.data(), dy, y.size() * 4, stream), CUDA_SUCCESS);
    ASSERT_EQ(cuMemcpyDtoHAsync(s.data(), ds, s.size() * 4, stream), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
    expectResults(x, w, y.data(), s.data());
  }
  EXPECT_EQ(pkg.runCalls(), 2) << "new output pointers: a second capture, then replays";

  // A caller device buffer too small.
  coil_output out[2] = {};
  out[0].data = reinterpret_cast<void *>(dy), out[0].capacity = 16;
  EXPECT_EQ(coil_model_run_device(l.m, &in, 1, out, 2, stream), COIL_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(coil_last_error()).find("the caller gave 16"), std::string::npos)
      << coil_last_error();
  EXPECT_EQ(out[0].data, reinterpret_cast<void *>(dy));
  EXPECT_EQ(out[1].data, nullptr);
  cuStreamDestroy(stream);
  cuMemFree(dx), cuMemFree(dy), cuMemFree(ds);
}

TEST_F(CudaRuntime, GraphsOffByEnvironmentAndHostFallback) {
  {
    setenv("COIL_CUDA_GRAPHS", "0", 1);
    Package pkg;
    Loaded l(pkg);
    unsetenv("COIL_CUDA_GRAPHS");
    ASSERT_EQ(l.status, COIL_OK) << l.error;
    for (unsigned i = 0; i < 3; ++i) hostRun(l.m, w, 19, 40 + i);
    EXPECT_EQ(pkg.runCalls(), 3);
    // Eager runs of growing and shrinking shapes (the pooled arena grows).
    unsigned seed = 100;
    for (int64_t n : {3, 50, 7, 2000, 1, 0, 300}) hostRun(l.m, w, n, seed++);
    EXPECT_EQ(pkg.runCalls(), 10);
  }
  {
    setenv("COIL_CUDA_MAX_GRAPHS", "1", 1);
    Package pkg;
    Loaded l(pkg);
    unsetenv("COIL_CUDA_MAX_GRAPHS");
    ASSERT_EQ(l.status, COIL_OK) << l.error;
    hostRun(l.m, w, 5, 45); // captured
    hostRun(l.m, w, 6, 46); // eager: one graph at most
    hostRun(l.m, w, 6, 47);
    EXPECT_EQ(pkg.runCalls(), 3);
    hostRun(l.m, w, 5, 48); // replayed
    EXPECT_EQ(pkg.runCalls(), 3);
  }
  {
    Package pkg(kFunctions, /*hostFallback=*/true);
    Loaded l(pkg);
    ASSERT_EQ(l.status, COIL_OK) << l.error;
    for (unsigned i = 0; i < 3; ++i) hostRun(l.m, w, 19, 50 + i);
    EXPECT_EQ(pkg.runCalls(), 3);
  }
}

TEST_F(CudaRuntime, ConcurrentRuns) {
  Package pkg;
  Loaded l(pkg);
  ASSERT_EQ(l.status, COIL_OK) << l.error;
  // Host runs: two threads with the same shape (contending for one graph), two with changing
  // shapes. Device runs: two threads, each with its own input buffer and stream (own graphs).
  auto wrong = [&](const std::vector<float> &x, const float *y, const float *s) {
    int bad = 0;
    for (size_t r = 0; r < x.size() / 4; ++r) {
      float acc = 0;
      for (size_t j = 0; j < 4; ++j) {
        float u = 2.0f * (x[r * 4 + j] + w[j]) + 0.5f;
        bad += y[r * 4 + j] != u;
        acc += u;
      }
      bad += std::fabs(s[r] - acc) > 1e-4f * (1 + std::fabs(acc));
    }
    return bad;
  };
  std::vector<std::thread> threads;
  std::vector<int> failures(6, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        int64_t n = t < 2 ? 64 : 3 + 17 * t + i % 3;
        std::vector<float> x = randomInput(n, unsigned(1000 * t + i));
        int64_t shape[2] = {n, 4};
        coil_tensor in = {x.data(), COIL_DTYPE_F32, 2, shape};
        std::vector<float> y(static_cast<size_t>(n) * 4), s(static_cast<size_t>(n));
        coil_output out[2] = {};
        out[0].data = y.data(), out[0].capacity = int64_t(y.size() * 4);
        out[1].data = s.data(), out[1].capacity = int64_t(s.size() * 4);
        if (coil_model_run(l.m, &in, 1, out, 2) != COIL_OK) {
          ++failures[t];
          continue;
        }
        failures[t] += wrong(x, y.data(), s.data());
      }
    });
  for (int t = 4; t < 6; ++t)
    threads.emplace_back([&, t] {
      CUdevice dev = 0;
      CUcontext ctx = nullptr;
      CUstream stream = nullptr;
      const int64_t n = 96;
      CUdeviceptr dx = 0;
      if (cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx) ||
          cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) || cuMemAlloc(&dx, n * 16)) {
        ++failures[t];
        return;
      }
      for (int i = 0; i < 25; ++i) {
        std::vector<float> x = randomInput(n, unsigned(1000 * t + i));
        int64_t shape[2] = {n, 4};
        coil_tensor in = {reinterpret_cast<void *>(dx), COIL_DTYPE_F32, 2, shape};
        std::vector<float> y(n * 4), s(n);
        coil_output out[2] = {};
        void *runStream = i % 2 ? nullptr : stream; // the caller's stream, or the runtime's
        if (cuMemcpyHtoDAsync(dx, x.data(), n * 16, stream) || cuStreamSynchronize(stream) ||
            coil_model_run_device(l.m, &in, 1, out, 2, runStream) != COIL_OK ||
            cuMemcpyDtoHAsync(y.data(), reinterpret_cast<CUdeviceptr>(out[0].data), n * 16,
                              stream) ||
            cuMemcpyDtoHAsync(s.data(), reinterpret_cast<CUdeviceptr>(out[1].data), n * 4,
                              stream) ||
            cuStreamSynchronize(stream)) {
          ++failures[t];
          continue;
        }
        failures[t] += wrong(x, y.data(), s.data());
        coil_output_release(&out[0]);
        coil_output_release(&out[1]);
      }
      cuMemFree(dx);
      cuStreamDestroy(stream);
    });
  for (std::thread &t : threads) t.join();
  for (int t = 0; t < 6; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

TEST_F(CudaRuntime, Errors) {
  {
    Package pkg(R"(["k_add", "k_missing", "k_rows"])");
    Loaded l(pkg);
    EXPECT_EQ(l.status, COIL_ERROR_PACKAGE);
    EXPECT_NE(l.error.find("kernel function 'k_missing' (cuda.functions[1]) is not in "
                           "src/kernels.fatbin"),
              std::string::npos)
        << l.error;
  }
  {
    Package pkg;
    writeFile(pkg.dir + "/src/kernels.fatbin", "garbage, not a fatbin at all");
    pkg.reseal(); // past the integrity check, to the driver
    Loaded l(pkg);
    EXPECT_EQ(l.status, COIL_ERROR_PACKAGE);
    EXPECT_NE(l.error.find("src/kernels.fatbin"), std::string::npos) << l.error;
    EXPECT_EQ(l.error.find("does not match metadata.json"), std::string::npos) << l.error;
  }
  {
    // A fatbin with SASS for another architecture only (no PTX): no image for this GPU.
    CUdevice dev = 0;
    int major = 0;
    ASSERT_EQ(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
              CUDA_SUCCESS);
    std::string other = major == 8 ? "90a" : "80";
    Package pkg;
    std::string log = pkg.dir + "/nvcc.log";
    std::string cmd = nvcc() + " --fatbin -gencode arch=compute_" + other + ",code=sm_" + other +
                      " -o '" + pkg.dir + "/src/kernels.fatbin' '" + built().dir +
                      "/src/kernels.cu' > '" + log + "' 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << readFile(log);
    pkg.reseal();
    Loaded l(pkg);
    EXPECT_EQ(l.status, COIL_ERROR_PACKAGE);
    EXPECT_NE(l.error.find("src/kernels.fatbin has no kernel image that this GPU"),
              std::string::npos)
        << l.error;
    EXPECT_NE(l.error.find("sm_" + std::to_string(major)), std::string::npos) << l.error;
  }
  Package pkg;
  Loaded l(pkg);
  ASSERT_EQ(l.status, COIL_OK) << l.error;
  std::vector<float> x = randomInput(8, 60);
  int64_t shape[2] = {8, 3};
  coil_tensor in = {x.data(), COIL_DTYPE_F32, 2, shape};
  coil_output out[2] = {};
  EXPECT_EQ(coil_model_run(l.m, &in, 1, out, 2), COIL_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(coil_last_error()).find("input 0 'x' dim 1 must be 4, got 3"),
            std::string::npos)
      << coil_last_error();
  EXPECT_EQ(coil_model_run_device(l.m, &in, 1, out, 2, nullptr), COIL_ERROR_INVALID_ARGUMENT);
  // Host memory given to the device API: refused, unless the driver says the GPU can address
  // it (heterogeneous memory management), in which case the run must be right.
  shape[1] = 4;
  coil_status st = coil_model_run_device(l.m, &in, 1, out, 2, nullptr);
  if (st == COIL_OK) {
    std::vector<float> y(32), s(8);
    ASSERT_EQ(cuMemcpyDtoH(y.data(), reinterpret_cast<CUdeviceptr>(out[0].data), 128),
              CUDA_SUCCESS);
    ASSERT_EQ(cuMemcpyDtoH(s.data(), reinterpret_cast<CUdeviceptr>(out[1].data), 32), CUDA_SUCCESS);
    expectResults(x, w, y.data(), s.data());
    coil_output_release(&out[0]);
    coil_output_release(&out[1]);
  } else {
    EXPECT_EQ(st, COIL_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(coil_last_error()).find("input 0 data is not CUDA memory"),
              std::string::npos)
        << coil_last_error();
  }
  EXPECT_EQ(pkg.runCalls(), 0);
  in.dtype = COIL_DTYPE_F16;
  shape[1] = 4;
  EXPECT_EQ(coil_model_run(l.m, &in, 1, out, 2), COIL_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(coil_model_run(l.m, &in, 1, out, 1), COIL_ERROR_INVALID_ARGUMENT);
  int calls = pkg.runCalls();
  // A launch error (N = 7777 makes the test wrapper launch 4096-thread blocks): a runtime error
  // naming the kernel, with the CUDA error.
  x = randomInput(7777, 62);
  shape[0] = 7777;
  in = {x.data(), COIL_DTYPE_F32, 2, shape};
  EXPECT_EQ(coil_model_run(l.m, &in, 1, out, 2), COIL_ERROR_RUNTIME);
  std::string e = coil_last_error();
  EXPECT_NE(e.find("model 'cuda_tiny': kernel k_add_c0: cuLaunchKernel failed: CUDA_ERROR_"),
            std::string::npos)
      << e;
  EXPECT_EQ(out[0].data, nullptr);
  EXPECT_GT(pkg.runCalls(), calls);
  // The model still runs after the errors.
  hostRun(l.m, w, 8, 61);
}

TEST_F(CudaRuntime, TwoModelsOfOnePackage) {
  Package pkg;
  Loaded a(pkg), b(pkg);
  ASSERT_EQ(a.status, COIL_OK) << a.error;
  ASSERT_EQ(b.status, COIL_OK) << b.error;
  hostRun(a.m, w, 10, 70);
  hostRun(b.m, w, 10, 71);
  hostRun(a.m, w, 10, 72);
}

} // namespace
