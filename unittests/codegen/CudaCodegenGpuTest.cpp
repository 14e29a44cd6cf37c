// GPU tests of the CUDA kernel code generator (skipped without an NVIDIA GPU and nvcc): small
// graphs are lowered and scheduled, every kernel is generated; the device code is compiled by
// nvcc for the GPU present, the launchers (plus a shim with one uniform signature per launcher)
// into a shared object; every kernel runs in schedule order through its launcher, once per
// config and with buffers both 16-byte aligned and misaligned (the scalar fallbacks), on random
// inputs with ties, zeros and NaNs; the outputs must match the Loop IR evaluator.
//
// On the GPU machine: build/bin/coil_unittests --gtest_filter='CudaCodegenGpu*'
#include "codegen/KernelEmitter.h"
#include "codegen/cuda/CudaCodegen.h"
#include "ir/Parser.h"
#include "lower/LoopEval.h"
#include "lower/Lower.h"
#include "sched/Schedule.h"

#include <cmath>
#include <cstdlib>
#include <dlfcn.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <random>
#include <unistd.h>

using namespace coil;

namespace {

// The few driver API entry points the test uses, resolved from libcuda.so.1 at run time (the
// unit tests do not link libcuda).
using CUresult = int;
using CUdeviceptr = unsigned long long;
struct Driver {
  void *lib = nullptr;
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDeviceGet)(int *, int) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(void **, int) = nullptr;
  CUresult (*cuCtxSetCurrent)(void *) = nullptr;
  CUresult (*cuModuleLoadData)(void **, const void *) = nullptr;
  CUresult (*cuModuleUnload)(void *) = nullptr;
  CUresult (*cuModuleGetFunction)(void **, void *, const char *) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t) = nullptr;
  CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t) = nullptr;
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;

  bool load() {
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) return false;
    bool ok = true;
    auto sym = [&](auto &fn, const char *name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      ok = ok && fn;
    };
    sym(cuInit, "cuInit");
    sym(cuDeviceGet, "cuDeviceGet");
    sym(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    sym(cuCtxSetCurrent, "cuCtxSetCurrent");
    sym(cuModuleLoadData, "cuModuleLoadData");
    sym(cuModuleUnload, "cuModuleUnload");
    sym(cuModuleGetFunction, "cuModuleGetFunction");
    sym(cuMemAlloc, "cuMemAlloc_v2");
    sym(cuMemFree, "cuMemFree_v2");
    sym(cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    sym(cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    sym(cuMemsetD8, "cuMemsetD8_v2");
    sym(cuCtxSynchronize, "cuCtxSynchronize");
    return ok;
  }
};

/// Mirrors include/coil/cuda_abi.h (the generated launchers read it).
struct CudaCtx {
  void *stream;
  void *const *functions;
  void *blas;
  void *workspace;
  size_t workspace_bytes;
  char *error;
  size_t error_size;
  void *(*host_alloc)(void *, size_t);
  void (*host_free)(void *, void *);
  void *host_ctx;
  int32_t device_ordinal;
  int32_t sm_version;
};

bool haveGpu() {
  return std::filesystem::exists("/dev/nvidia0") || std::system("nvidia-smi > /dev/null 2>&1") == 0;
}

std::string cudaRoot() {
  if (const char *r = std::getenv("CUDA_HOME")) return r;
  return "/usr/local/cuda";
}

std::string readFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

struct Case {
  std::string name, text;
  SymBindings sizes;
  double rtol = 1e-4, atol = 1e-5;
  bool nans = true;      ///< float inputs hold NaNs
  bool integral = false; ///< float inputs hold whole numbers (exact sums)
};

/// Random inputs with repeated values (ties), zeros, and NaN in float inputs.
Tensor randomInput(DType t, const Shape &s, std::mt19937_64 &rng, const Case &tc) {
  Tensor x(t, s);
  std::uniform_int_distribution<int> k(0, 39);
  std::uniform_real_distribution<double> fd(-3, 3);
  std::uniform_int_distribution<int64_t> id(-9, 9), ud(0, 12);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int c = k(rng);
    if (isFloat(t))
      x.setDouble(i, c == 0 && tc.nans      ? std::nan("")
                     : c < 8 || tc.integral ? double(id(rng))
                                            : fd(rng));
    else if (t == DType::Bool)
      x.setInt(i, c & 1);
    else
      x.setInt(i, isUnsigned(t) ? ud(rng) : id(rng));
  }
  return x;
}

/// `d` null: only generate and build (no GPU here), for sm_90a.
void runCase(Driver *d, const Case &tc) {
  SCOPED_TRACE(tc.name);
  auto g = parseGraph(tc.text, "<" + tc.name + ">");
  ASSERT_TRUE(g.ok()) << g.error().render();
  auto lowered = loop::lowerGraph(*g);
  ASSERT_TRUE(lowered.ok()) << lowered.error().render();
  loop::LoopProgram p = std::move(*lowered);
  auto s = sched::scheduleProgram(p);
  ASSERT_TRUE(s.ok()) << s.error().render();

  // Generate.
  std::vector<codegen::CudaKernelSource> kernels;
  std::vector<const sched::Kernel *> ks;
  std::string device = codegen::cudaKernelPrelude(), host = codegen::cudaLauncherPrelude();
  std::vector<std::string> functions;
  std::string shim;
  for (const sched::Step &st : s->steps) {
    const sched::Kernel *k = std::get_if<sched::Kernel>(&st);
    ASSERT_TRUE(k) << "the test programs have no extern steps";
    codegen::CudaCodegenOptions o;
    o.functionBase = int32_t(functions.size());
    auto src = generateCudaKernel(*k, p, o);
    ASSERT_TRUE(src.ok()) << src.error().render();
    device += src->device + "\n";
    host += src->host + "\n";
    functions.insert(functions.end(), src->functions.begin(), src->functions.end());
    for (size_t c = 0; c < src->info.configs.size(); ++c) {
      std::string fn = src->info.name + "_c" + std::to_string(c);
      shim += "extern \"C\" int32_t shim_" + fn +
              "(const coil_cuda_ctx *ctx, void **b, const int64_t *z) {\n  return " + fn + "(ctx";
      size_t bi = 0, zi = 0;
      for (const wrapper::KernelParam &prm : src->info.params)
        if (prm.kind == wrapper::KernelParam::Kind::Buffer)
          shim += std::string(", (") + (prm.written ? "" : "const ") +
                  codegen::cStorageType(prm.dtype) + " *)b[" + std::to_string(bi++) + "]";
        else
          shim += ", z[" + std::to_string(zi++) + "]";
      shim += ");\n}\n";
    }
    ks.push_back(k);
    kernels.push_back(std::move(*src));
  }

  // Build.
  std::string dir = (std::filesystem::temp_directory_path() /
                     ("coil-cuda-gpu-" + std::to_string(getpid()) + "-" + tc.name))
                        .string();
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/kernels.cu") << device;
  std::ofstream(dir + "/launchers.cpp") << host << "\n" << shim;
  std::string nvcc = std::string("nvcc -std=c++17 -O3 -arch=") + (d ? "native" : "sm_90a") +
                     " --cubin -o " + dir + "/kernels.cubin " + dir + "/kernels.cu > " + dir +
                     "/nvcc.log 2>&1";
  ASSERT_EQ(std::system(nvcc.c_str()), 0) << readFile(dir + "/nvcc.log");
  std::string cxx = "c++ -std=c++17 -O1 -shared -fPIC -I" + cudaRoot() +
                    "/include -I" COIL_SOURCE_DIR "/include -o " + dir + "/launchers.so " + dir +
                    "/launchers.cpp -L" + cudaRoot() + "/lib64/stubs -lcuda > " + dir +
                    "/cxx.log 2>&1";
  ASSERT_EQ(std::system(cxx.c_str()), 0) << readFile(dir + "/cxx.log");
  if (!d) { // the shared object needs libcuda.so.1 to load
    std::filesystem::remove_all(dir);
    return;
  }
  void *so = dlopen((dir + "/launchers.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_TRUE(so) << dlerror();
  std::string cubin = readFile(dir + "/kernels.cubin");
  void *mod = nullptr;
  ASSERT_EQ(d->cuModuleLoadData(&mod, cubin.data()), 0);
  std::vector<void *> fns(functions.size());
  for (size_t i = 0; i < functions.size(); ++i)
    ASSERT_EQ(d->cuModuleGetFunction(&fns[i], mod, functions[i].c_str()), 0) << functions[i];

  // Inputs and the reference.
  std::mt19937_64 rng(42);
  std::vector<Tensor> inputs;
  for (loop::NodeId n : p.inputs) {
    Shape shape;
    for (const SymInt &dim : p.nodes[size_t(n)].shape) {
      auto v = dim.evaluate(tc.sizes);
      ASSERT_TRUE(v.ok());
      shape.push_back(*v);
    }
    inputs.push_back(randomInput(p.nodes[size_t(n)].dtype, shape, rng, tc));
  }
  auto want = loop::evaluateLoopProgram(p, inputs);
  ASSERT_TRUE(want.ok()) << want.error().render();

  // One device buffer per node a kernel touches, plus inputs and outputs.
  std::map<loop::NodeId, size_t> bytes;
  auto sizeOf = [&](loop::NodeId n) {
    int64_t numel = 1;
    for (const SymInt &dim : p.nodes[size_t(n)].shape) numel *= *dim.evaluate(tc.sizes);
    return size_t(numel) * dtypeSize(p.nodes[size_t(n)].dtype);
  };
  for (const sched::Kernel *k : ks) {
    for (loop::NodeId n : k->reads) bytes[n] = sizeOf(n);
    for (loop::NodeId n : k->writes) bytes[n] = sizeOf(n);
  }
  for (loop::NodeId n : p.outputs) bytes[n] = sizeOf(n);
  size_t maxConfigs = 0;
  for (const auto &k : kernels) maxConfigs = std::max(maxConfigs, k.info.configs.size());

  for (int misaligned = 0; misaligned < 2; ++misaligned)
    for (size_t config = 0; config < maxConfigs; ++config) {
      SCOPED_TRACE("config " + std::to_string(config) + (misaligned ? ", misaligned" : ""));
      std::map<loop::NodeId, CUdeviceptr> base, ptr;
      for (auto &[n, b] : bytes) {
        size_t off = misaligned ? dtypeSize(p.nodes[size_t(n)].dtype) : 0;
        ASSERT_EQ(d->cuMemAlloc(&base[n], b + 64), 0);
        ptr[n] = base[n] + off;
        ASSERT_EQ(d->cuMemsetD8(base[n], 0xff, b + 64), 0); // unwritten output: NaN / -1
      }
      for (size_t i = 0; i < p.inputs.size(); ++i)
        if (bytes.count(p.inputs[i]))
          ASSERT_EQ(d->cuMemcpyHtoD(ptr[p.inputs[i]], inputs[i].data(), inputs[i].nbytes()), 0);
      for (loop::NodeId n = 0; n < loop::NodeId(p.nodes.size()); ++n)
        if (auto *c = std::get_if<loop::ConstantNode>(&p.nodes[size_t(n)].kind);
            c && bytes.count(n)) {
          const Tensor &t = p.graph->constant(c->graphValue);
          ASSERT_EQ(d->cuMemcpyHtoD(ptr[n], t.data(), t.nbytes()), 0);
        }
      char error[512] = "";
      const size_t wsBytes = size_t(64) << 20; // as the runtime's default
      CUdeviceptr ws = 0;
      ASSERT_EQ(d->cuMemAlloc(&ws, wsBytes), 0);
      CudaCtx ctx{nullptr,
                  fns.data(),
                  nullptr,
                  reinterpret_cast<void *>(ws),
                  wsBytes,
                  error,
                  sizeof(error),
                  nullptr,
                  nullptr,
                  nullptr,
                  0,
                  90};
      for (size_t ki = 0; ki < ks.size(); ++ki) {
        const codegen::CudaKernelSource &src = kernels[ki];
        size_t c = std::min(config, src.info.configs.size() - 1);
        std::string fn = "shim_" + src.info.name + "_c" + std::to_string(c);
        using Shim = int32_t (*)(const CudaCtx *, void **, const int64_t *);
        auto f = reinterpret_cast<Shim>(dlsym(so, fn.c_str()));
        ASSERT_TRUE(f) << fn;
        std::vector<void *> bufs;
        std::vector<int64_t> sizes;
        std::vector<loop::NodeId> nodes(ks[ki]->reads.begin(), ks[ki]->reads.end());
        nodes.insert(nodes.end(), ks[ki]->writes.begin(), ks[ki]->writes.end());
        std::sort(nodes.begin(), nodes.end());
        nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
        for (loop::NodeId n : nodes) bufs.push_back(reinterpret_cast<void *>(ptr[n]));
        for (const wrapper::KernelParam &prm : src.info.params)
          if (prm.kind == wrapper::KernelParam::Kind::Size) sizes.push_back(tc.sizes.at(prm.name));
        ASSERT_EQ(f(&ctx, bufs.data(), sizes.data()), 0) << error;
      }
      ASSERT_EQ(d->cuCtxSynchronize(), 0) << "a kernel faulted";
      for (size_t o = 0; o < p.outputs.size(); ++o) {
        const Tensor &w = (*want)[o];
        Tensor got(w.dtype(), w.shape());
        ASSERT_EQ(d->cuMemcpyDtoH(got.data(), ptr[p.outputs[o]], got.nbytes()), 0);
        int bad = 0;
        for (int64_t i = 0; i < w.numel() && bad < 5; ++i) {
          bool same;
          if (isFloat(w.dtype())) {
            double a = got.getDouble(i), b = w.getDouble(i);
            same = (std::isnan(a) && std::isnan(b)) || a == b ||
                   std::fabs(a - b) <= tc.atol + tc.rtol * std::fabs(b);
          } else {
            same = got.getInt(i) == w.getInt(i);
          }
          if (!same) {
            ++bad;
            ADD_FAILURE() << "output " << o << " element " << i << ": got " << got.getDouble(i)
                          << ", want " << w.getDouble(i);
          }
        }
      }
      for (auto &[n, b] : base) d->cuMemFree(b);
      d->cuMemFree(ws);
    }
  d->cuModuleUnload(mod);
  dlclose(so);
  std::filesystem::remove_all(dir);
}

std::vector<Case> testCases() {
  return {
      {"pointwise",
       R"(graph @g(%x: f32[N, 64], %y: f32[N, 64]) -> (%z) {
  symbol N in [1, 100000]
  %a = Mul(%x, %y) : f32[N, 64]
  %b = Sigmoid(%a) : f32[N, 64]
  %c = Tanh(%b) : f32[N, 64]
  %z = Add(%c, %x) : f32[N, 64]
})",
       {{"N", 1001}}},
      {"pointwise_tail_bf16",
       R"(graph @g(%x: bf16[N, 3], %y: bf16[N, 3]) -> (%z, %w) {
  symbol N in [1, 100000]
  %a = Sub(%x, %y) : bf16[N, 3]
  %z = Erf(%a) : bf16[N, 3]
  %w = Max(%x, %y) : bf16[N, 3]
})",
       {{"N", 3337}},
       1e-2,
       1e-2},
      {"broadcast",
       R"(graph @g(%x: f32[N, 33], %b: f32[33], %s: f32[N, 1]) -> (%z) {
  symbol N in [1, 4096]
  %a = Add(%x, %b) : f32[N, 33]
  %z = Mul(%a, %s) : f32[N, 33]
})",
       {{"N", 77}}},
      {"softmax_bf16",
       R"(graph @g(%x: bf16[N, 512]) -> (%y) {
  symbol N in [1, 65536]
  %y = Softmax(%x) {axis = -1} : bf16[N, 512]
})",
       {{"N", 67}},
       1e-2,
       1e-3},
      // Pointwise kernels that read along another dim than they write (a transposing bias
      // add): loads vectorized along that dim, stores along the last one.
      {"transpose_vec",
       R"(graph @g(%x: bf16[N, 24, 32], %b: bf16[32], %y: f32[N, 24, 32]) -> (%z, %w) {
  symbol N in [1, 1000]
  %a = Add(%x, %b) : bf16[N, 24, 32]
  %z = Transpose(%a) {perm = [0, 2, 1]} : bf16[N, 32, 24]
  %t = Tanh(%y) : f32[N, 24, 32]
  %w = Transpose(%t) {perm = [2, 0, 1]} : f32[32, N, 24]
})",
       {{"N", 37}},
       1e-2,
       1e-2},
      // CUDA's f32 math: division by a constant or a row's accumulator through the reciprocal
      // (infinite numerators, a zero or NaN row max, a divisor below 2^-126), exp via exp2f.
      {"invariant_divisors",
       R"(graph @g(%x: f32[N, 64]) -> (%a, %b, %c, %e) {
  symbol N in [1, 100000]
  %k = constant f32[] [3.0]
  %h = constant f32[] [1e38]
  %t = constant f32[] [1e-39]
  %u = constant f32[] [1e-40]
  %ax = constant i64[1] [1]
  %big = Mul(%x, %h) : f32[N, 64]
  %a = Div(%big, %k) : f32[N, 64]
  %s = ReduceMax(%x, %ax) {keepdims = 1} : f32[N, 1]
  %b = Div(%big, %s) : f32[N, 64]
  %y = Mul(%x, %t) : f32[N, 64]
  %c = Div(%y, %u) : f32[N, 64]
  %e = Exp(%x) : f32[N, 64]
})",
       {{"N", 203}}},
      {"softmax_odd",
       R"(graph @g(%x: f32[N, 37]) -> (%y, %l) {
  symbol N in [1, 65536]
  %y = Softmax(%x) {axis = -1} : f32[N, 37]
  %l = LogSoftmax(%x) {axis = 0} : f32[N, 37]
})",
       {{"N", 45}}},
      {"layernorm_bf16",
       R"(graph @g(%x: bf16[N, 4096], %w: bf16[4096], %b: bf16[4096]) -> (%y) {
  symbol N in [1, 16384]
  %y = LayerNormalization(%x, %w, %b) {axis = -1, epsilon = 0.00001} : bf16[N, 4096]
})",
       {{"N", 9}},
       2e-2,
       2e-2},
      {"argmax",
       R"(graph @g(%x: f32[N, 100], %h: f16[N, 7]) -> (%a, %b, %c, %m, %p, %q) {
  symbol N in [1, 1000]
  %a = ArgMax(%x) {axis = 1, keepdims = 0, select_last_index = 1} : i64[N]
  %b = ArgMin(%x) {axis = 1, keepdims = 1} : i64[N, 1]
  %c = ArgMax(%x) {axis = 0, keepdims = 0} : i64[100]
  %m = ReduceMax(%h) {keepdims = 0, axes = ints[1]} : f16[N]
  %p = ReduceMin(%x) {keepdims = 0, axes = ints[0]} : f32[100]
  %q = ReduceSum(%x) {keepdims = 0} : f32[]
})",
       {{"N", 131}},
       1e-3,
       1e-3},
      {"integers",
       R"(graph @g(%x: i32[N, 8], %y: i32[N, 8], %u: u8[N, 8], %w: i64[N]) -> (%q, %r, %f, %s, %c, %t, %mx, %pr) {
  symbol N in [1, 100000]
  %q = Div(%x, %y) : i32[N, 8]
  %r = Mod(%x, %y) : i32[N, 8]
  %f = Mod(%x, %y) {fmod = 1} : i32[N, 8]
  %s = BitShift(%u, %u) {direction = "LEFT"} : u8[N, 8]
  %c = Cast(%x) {to = 10} : f16[N, 8]
  %t = Mul(%x, %y) : i32[N, 8]
  %mx = ReduceMax(%w) {keepdims = 0} : i64[]
  %pr = ReduceProd(%x) {keepdims = 0, axes = ints[1]} : i32[N]
})",
       {{"N", 1000}}},
      // Integer negations feeding min/max chains: ptxas (CUDA 12.8 to 13.3) fused them into a
      // three-input VIMNMX3 and dropped a negation (the thread-per-row config of %m computed
      // min(-x0, x1, -x2, -x3)); the CUDA coil_neg negates from an opaque zero.
      {"negated_int_minmax",
       R"(graph @g(%x: i64[N, 4], %y: i32[N, 8], %z: i16[N, 4]) -> (%m, %mm, %a, %s) {
  symbol N in [1, 1000]
  %c = Cast(%x) {to = 6} : i32[N, 4]
  %n = Neg(%c) : i32[N, 4]
  %m = ReduceMin(%n) {keepdims = 0, axes = ints[1]} : i32[N]
  %mm = ReduceMax(%m) {keepdims = 0} : i32[]
  %b = Abs(%y) : i32[N, 8]
  %a = ReduceMax(%b) {keepdims = 0, axes = ints[1]} : i32[N]
  %nz = Neg(%z) : i16[N, 4]
  %s = ReduceMax(%nz) {keepdims = 0, axes = ints[1]} : i16[N]
})",
       {{"N", 5}}},
      {"gather_transpose",
       R"(graph @g(%x: f32[N, M], %i: i64[K]) -> (%g, %s, %m) {
  symbol N in [1, 100]
  symbol M in [1, 100]
  symbol K in [1, 50]
  %g = Gather(%x, %i) {axis = 0} : f32[K, M]
  %t = Transpose(%x) {perm = [1, 0]} : f32[M, N]
  %s = Relu(%t) : f32[M, N]
  %m = ReduceMean(%x) {keepdims = 0, axes = ints[0]} : f32[M]
})",
       {{"N", 50}, {"M", 70}, {"K", 20}}},
      {"bool_multidim_indirect",
       R"(graph @g(%b: bool[N, 40], %x: f32[N, 5, 7], %i: i64[9]) -> (%any, %all, %s, %gs, %bf) {
  symbol N in [1, 5000]
  %any = ReduceMax(%b) {keepdims = 0, axes = ints[1]} : bool[N]
  %all = ReduceMin(%b) {keepdims = 0, axes = ints[1]} : bool[N]
  %ax = constant i64[2] [1, 2]
  %s = ReduceSum(%x, %ax) {keepdims = 1} : f32[N, 1, 1]
  %g = Gather(%x, %i) {axis = 2} : f32[N, 5, 9]
  %gs = ReduceMax(%g) {keepdims = 0, axes = ints[2]} : f32[N, 5]
  %bf = Cast(%b) {to = 1} : f32[N, 40]
})",
       {{"N", 301}}},
      // Few outer points, long rows: config 0 splits phase 0 over many blocks (partials in the
      // workspace, a second kernel combines them and runs the later phases). Whole numbers:
      // the sums are exact in any order.
      {"split_exact",
       R"(graph @g(%x: f32[R, M], %y: i32[R, M]) -> (%s, %a, %b, %m, %d, %is) {
  symbol R in [1, 64]
  symbol M in [1, 10000000]
  %ax = constant i64[1] [1]
  %s = ReduceSum(%x, %ax) {keepdims = 0} : f32[R]
  %a = ArgMax(%x) {axis = 1, keepdims = 0} : i64[R]
  %b = ArgMin(%x) {axis = 1, keepdims = 0, select_last_index = 1} : i64[R]
  %m = ReduceMax(%x, %ax) {keepdims = 1} : f32[R, 1]
  %d = Sub(%x, %m) : f32[R, M]
  %is = ReduceSum(%y, %ax) {keepdims = 0} : i32[R]
})",
       {{"R", 3}, {"M", 300007}},
       1e-6,
       1e-6,
       false,
       true},
      {"split_nan",
       R"(graph @g(%x: f32[R, M]) -> (%a, %b, %m) {
  symbol R in [1, 64]
  symbol M in [1, 10000000]
  %ax = constant i64[1] [1]
  %a = ArgMax(%x) {axis = 1, keepdims = 0, select_last_index = 1} : i64[R]
  %b = ArgMin(%x) {axis = 1, keepdims = 0} : i64[R]
  %m = ReduceMin(%x, %ax) {keepdims = 0} : f32[R]
})",
       {{"R", 2}, {"M", 100003}}},
  };
}

TEST(CudaCodegenGpu, KernelsMatchTheLoopEvaluator) {
  if (!haveGpu()) GTEST_SKIP() << "no NVIDIA GPU (no /dev/nvidia0, no nvidia-smi): skipped";
  if (std::system("nvcc --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "nvcc not found";
  Driver d;
  ASSERT_TRUE(d.load()) << "libcuda.so.1 not loadable";
  ASSERT_EQ(d.cuInit(0), 0);
  int dev = 0;
  ASSERT_EQ(d.cuDeviceGet(&dev, 0), 0);
  void *ctx = nullptr;
  ASSERT_EQ(d.cuDevicePrimaryCtxRetain(&ctx, dev), 0);
  ASSERT_EQ(d.cuCtxSetCurrent(ctx), 0);
  for (const Case &tc : testCases()) runCase(&d, tc);
}

// Without a GPU: the same programs, their launchers and the test's shims build (sm_90a).
TEST(CudaCodegenGpu, TestProgramsBuildWithoutAGpu) {
  if (haveGpu()) GTEST_SKIP() << "a GPU is present: KernelsMatchTheLoopEvaluator runs them";
  if (std::system("nvcc --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "nvcc not found";
  if (!std::getenv("COIL_CUDA_BUILD_CHECK"))
    GTEST_SKIP() << "set COIL_CUDA_BUILD_CHECK=1 to build the GPU test programs without a GPU";
  for (const Case &tc : testCases()) runCase(nullptr, tc);
}

} // namespace
