// Tests of the CUDA kernel code generator: small graphs (coil's text format) are lowered and
// scheduled, every kernel is generated, and all of them are compiled together: the device text
// by nvcc for sm_80 and sm_90a, the launchers by the host compiler against <cuda.h> (skipped
// with a message when nvcc is absent). Structural checks cover the kernel shapes (vectorized
// pointwise, warp and block reductions), the configs and the determinism of the output. The
// numerics run on a GPU (conformance with --device cuda).
#include "codegen/cuda/CudaCodegen.h"

#include "codegen/KernelEmitter.h"
#include "frontend/onnx/OnnxImporter.h"
#include "ir/Parser.h"
#include "lower/Lower.h"
#include "sched/Schedule.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <gtest/gtest.h>
#include <sstream>
#include <unistd.h>

using namespace coil;
using coil::codegen::CudaKernelSource;
using coil::codegen::generateCudaKernel;

namespace {

struct Generated {
  std::vector<CudaKernelSource> kernels;
  std::string device, host; // without the preludes
};

/// Parses, lowers and schedules `text`, then generates every kernel with names prefixed by
/// `prefix` (so that several programs share one translation unit).
Generated generate(const std::string &text, const std::string &prefix) {
  Generated out;
  auto g = parseGraph(text, "<test>");
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().render());
  if (!g.ok()) return out;
  auto p = loop::lowerGraph(*g);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().render());
  if (!p.ok()) return out;
  auto s = sched::scheduleProgram(*p);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().render());
  if (!s.ok()) return out;
  int32_t base = 0;
  for (const sched::Step &st : s->steps) {
    const sched::Kernel *k = std::get_if<sched::Kernel>(&st);
    if (!k) continue;
    sched::Kernel named = *k;
    named.name = prefix + k->name;
    codegen::CudaCodegenOptions o;
    o.functionBase = base;
    auto src = generateCudaKernel(named, *p, o);
    EXPECT_TRUE(src.ok()) << (src.ok() ? "" : src.error().render());
    if (!src.ok()) continue;
    // Deterministic.
    auto again = generateCudaKernel(named, *p, o);
    EXPECT_TRUE(again.ok() && again->device == src->device && again->host == src->host);
    // One function per config, then the combining kernels of split configs.
    EXPECT_GE(src->functions.size(), src->info.configs.size());
    for (size_t i = 0; i < src->functions.size(); ++i)
      if (i < src->info.configs.size())
        EXPECT_EQ(src->functions[i], named.name + "_c" + std::to_string(i) + "_kernel");
      else
        EXPECT_NE(src->functions[i].find("_combine_kernel"), std::string::npos);
    base += int32_t(src->functions.size());
    out.device += src->device + "\n";
    out.host += src->host + "\n";
    out.kernels.push_back(std::move(*src));
  }
  return out;
}

bool hasNvcc() {
  return std::system("nvcc --version > /dev/null 2>&1") == 0;
}

std::string tempDir() {
  std::string dir =
      (std::filesystem::temp_directory_path() / ("coil-cuda-codegen-" + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(dir);
  return dir;
}

/// Compiles the device text (both architectures) and the launchers; failures print the output.
void compileAll(const std::string &device, const std::string &host) {
  if (!hasNvcc()) {
    GTEST_SKIP() << "nvcc not found: the generated CUDA code is not compiled";
  }
  std::string dir = tempDir();
  {
    std::ofstream(dir + "/kernels.cu") << codegen::cudaKernelPrelude() << "\n" << device;
    std::ofstream(dir + "/launchers.cpp") << codegen::cudaLauncherPrelude() << "\n" << host;
  }
  if (const char *dump = std::getenv("COIL_DUMP_CUDA_KERNELS")) {
    std::filesystem::copy_file(dir + "/kernels.cu", std::string(dump) + ".cu",
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(dir + "/launchers.cpp", std::string(dump) + ".cpp",
                               std::filesystem::copy_options::overwrite_existing);
  }
  std::string nvcc = "nvcc -std=c++17 -O3 -Werror all-warnings -gencode arch=compute_80,code=sm_80 "
                     "-gencode arch=compute_90a,code=sm_90a -c -o " +
                     dir + "/kernels.o " + dir + "/kernels.cu > " + dir + "/nvcc.log 2>&1";
  int rc = std::system(nvcc.c_str());
  if (rc != 0) {
    std::ifstream log(dir + "/nvcc.log");
    std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    ADD_FAILURE() << "nvcc failed:\n" << text.substr(0, 8000);
  }
  std::string cxx = "c++ -std=c++17 -O1 -Wall -Werror -Wno-unused-variable -c "
                    "-I/usr/local/cuda/include -I" COIL_SOURCE_DIR "/include -o " +
                    dir + "/launchers.o " + dir + "/launchers.cpp > " + dir + "/cxx.log 2>&1";
  rc = std::system(cxx.c_str());
  if (rc != 0) {
    std::ifstream log(dir + "/cxx.log");
    std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    ADD_FAILURE() << "host compiler failed:\n" << text.substr(0, 8000);
  }
  std::filesystem::remove_all(dir);
}

const char *kPointwise = R"(
graph @pw(%x: f32[N, 64], %y: f32[N, 64]) -> (%z) {
  symbol N in [1, 1048576]
  %a = Mul(%x, %y) : f32[N, 64]
  %b = Sigmoid(%a) : f32[N, 64]
  %c = Tanh(%b) : f32[N, 64]
  %z = Add(%c, %x) : f32[N, 64]
}
)";

const char *kBroadcast = R"(
graph @bc(%x: f32[N, 32], %b: f32[32], %s: f32[N, 1]) -> (%z) {
  symbol N in [1, 4096]
  %a = Add(%x, %b) : f32[N, 32]
  %z = Mul(%a, %s) : f32[N, 32]
}
)";

const char *kSoftmax = R"(
graph @sm(%x: bf16[N, 512]) -> (%y) {
  symbol N in [1, 65536]
  %y = Softmax(%x) {axis = -1} : bf16[N, 512]
}
)";

const char *kLayerNorm = R"(
graph @ln(%x: bf16[N, 4096], %g: bf16[4096], %b: bf16[4096]) -> (%y) {
  symbol N in [1, 16384]
  %y = LayerNormalization(%x, %g, %b) {axis = -1, epsilon = 0.00001} : bf16[N, 4096]
}
)";

const char *kArgMax = R"(
graph @am(%x: f32[N, 100], %h: f16[N, 7]) -> (%a, %b, %m, %p) {
  symbol N in [1, 1000]
  %a = ArgMax(%x) {axis = 1, keepdims = 0, select_last_index = 1} : i64[N]
  %b = ArgMin(%x) {axis = 1, keepdims = 1} : i64[N, 1]
  %m = ReduceMax(%h) {keepdims = 0, axes = ints[1]} : f16[N]
  %p = ReduceProd(%x) {keepdims = 0, axes = ints[0]} : f32[100]
}
)";

const char *kIntegers = R"(
graph @ints(%x: i32[N, 8], %y: i32[N, 8], %u: u8[N, 8], %w: i64[8]) -> (%q, %r, %s, %c, %t, %mx, %mn) {
  symbol N in [1, 100000]
  %q = Div(%x, %y) : i32[N, 8]
  %r = Mod(%x, %y) : i32[N, 8]
  %s = BitShift(%u, %u) {direction = "LEFT"} : u8[N, 8]
  %c = Cast(%x) {to = 10} : f16[N, 8]
  %t = Add(%x, %y) : i32[N, 8]
  %mx = ReduceMax(%w) {keepdims = 0} : i64[]
  %mn = ReduceMin(%x) {keepdims = 0, axes = ints[0]} : i32[8]
}
)";

const char *kDynamicSlice = R"(
graph @dyn(%x: f32[N, M], %i: i64[K]) -> (%g, %s, %sum) {
  symbol N in [1, 100]
  symbol M in [1, 100]
  symbol K in [1, 50]
  %g = Gather(%x, %i) {axis = 0} : f32[K, M]
  %t = Transpose(%x) {perm = [1, 0]} : f32[M, N]
  %s = Relu(%t) : f32[M, N]
  %sum = ReduceSum(%x) {keepdims = 0} : f32[]
}
)";

const char *kBoolMultiDim = R"(
graph @bm(%b: bool[N, 40], %x: f32[N, 5, 7], %i: i64[9]) -> (%any, %all, %s, %gs) {
  symbol N in [1, 5000]
  %any = ReduceMax(%b) {keepdims = 0, axes = ints[1]} : bool[N]
  %all = ReduceMin(%b) {keepdims = 0, axes = ints[1]} : bool[N]
  %ax = constant i64[2] [1, 2]
  %s = ReduceSum(%x, %ax) {keepdims = 1} : f32[N, 1, 1]
  %g = Gather(%x, %i) {axis = 2} : f32[N, 5, 9]
  %gs = ReduceMax(%g) {keepdims = 0, axes = ints[2]} : f32[N, 5]
}
)";

bool contains(const std::string &s, const std::string &what) {
  return s.find(what) != std::string::npos;
}

TEST(CudaCodegen, KernelsCompileForSm80AndSm90a) {
  std::string device, host;
  int i = 0;
  for (const char *text : {kPointwise, kBroadcast, kSoftmax, kLayerNorm, kArgMax, kIntegers,
                           kDynamicSlice, kBoolMultiDim}) {
    Generated g = generate(text, "p" + std::to_string(i++) + "_");
    ASSERT_FALSE(g.kernels.empty());
    device += g.device;
    host += g.host;
  }
  compileAll(device, host);
}

TEST(CudaCodegen, PointwiseIsFlatAndVectorized) {
  Generated g = generate(kPointwise, "");
  ASSERT_EQ(g.kernels.size(), 1u);
  const CudaKernelSource &k = g.kernels[0];
  ASSERT_GE(k.info.configs.size(), 2u);
  // fp32: four elements per 16-byte access, chosen at run time from the pointers' alignment.
  EXPECT_TRUE(contains(k.info.configs[0].name, "vec4")) << k.info.configs[0].name;
  EXPECT_TRUE(contains(k.device, "coil_vec<float, 4>"));
  EXPECT_TRUE(contains(k.device, "pointwise, flat"));
  EXPECT_TRUE(contains(k.host, "% 16 == 0"));
  EXPECT_TRUE(contains(k.host, "return 0;")); // empty space: no launch
  EXPECT_TRUE(contains(k.host, "coil_launch(ctx, 0 + 0,"));
  EXPECT_EQ(k.info.iterationSpace.size(), 2u);
}

TEST(CudaCodegen, BroadcastVectorsAlongTheLastDim) {
  Generated g = generate(kBroadcast, "");
  ASSERT_EQ(g.kernels.size(), 1u);
  const CudaKernelSource &k = g.kernels[0];
  EXPECT_TRUE(contains(k.device, "vectors along the last dim"));
  EXPECT_TRUE(contains(k.device, "coil_vec<float, 4>"));
  EXPECT_TRUE(contains(k.host, "n1 % 4 == 0"));
  // Index decomposition, in 32 bits when the space allows.
  EXPECT_TRUE(contains(k.device, "t /= uint32_t(n1);"));
  EXPECT_TRUE(contains(k.device, "t /= n1;"));
}

// A transpose reads along dim 0 and writes along the last dim: each thread takes 4 points of
// dim 0 (one 16-byte load), the stores stay scalar and coalesced across threads.
TEST(CudaCodegen, TransposeVectorizesLoadsAlongTheReadDim) {
  Generated g = generate(R"(
graph @tr(%x: f32[N, 32]) -> (%y) {
  symbol N in [1, 4096]
  %t = Transpose(%x) {perm = [1, 0]} : f32[32, N]
  %y = Relu(%t) : f32[32, N]
}
)",
                         "");
  ASSERT_EQ(g.kernels.size(), 1u);
  const CudaKernelSource &k = g.kernels[0];
  EXPECT_TRUE(contains(k.device, "block256_ept2_vec4: pointwise, loads vectorized along dim 0\n"));
  EXPECT_TRUE(contains(k.device, "vec0[u] = *reinterpret_cast<const coil_vec<float, 4> *>(x + ("));
  EXPECT_TRUE(contains(k.device, "const int64_t x0 = xb + e;"));
  EXPECT_TRUE(contains(k.host, "int32_t coil_vec_ok = uintptr_t(x) % 16 == 0;"));
}

TEST(CudaCodegen, SoftmaxIsOneWarpPerRowKernel) {
  Generated g = generate(kSoftmax, "");
  ASSERT_EQ(g.kernels.size(), 1u);
  const CudaKernelSource &k = g.kernels[0];
  // N is dynamic: config 0 picks the row mapping from the sizes at run time.
  EXPECT_EQ(k.info.configs[0].name, "adaptive_warp_per_row_rows4");
  EXPECT_TRUE(
      contains(k.host, "return coil_launch(ctx, 0 + which, \"k0_max_c0\", grid, block, args);"));
  EXPECT_TRUE(contains(k.host, "const int64_t inner = 512;"));
  EXPECT_TRUE(contains(k.device, "coil_shfl_xor("));
  // Another config combines warps through shared memory.
  EXPECT_TRUE(contains(k.device, "__syncthreads();"));
  EXPECT_TRUE(contains(k.device, "coil_f2bf("));
}

TEST(CudaCodegen, LayerNormUsesABlockPerRow) {
  Generated g = generate(kLayerNorm, "");
  ASSERT_EQ(g.kernels.size(), 1u);
  EXPECT_EQ(g.kernels[0].info.configs[0].name, "adaptive_block256_per_row");
}

TEST(CudaCodegen, StaticSizesChooseTheRowMappingAtCompileTime) {
  Generated g = generate(R"(
graph @sm(%x: f32[64, 2048]) -> (%y) {
  %y = Softmax(%x) {axis = -1} : f32[64, 2048]
}
)",
                         "");
  ASSERT_EQ(g.kernels.size(), 1u);
  EXPECT_EQ(g.kernels[0].info.configs[0].name, "warp_per_row_rows4");
  EXPECT_FALSE(contains(g.kernels[0].host, "which"));
}

TEST(CudaCodegen, LongReductionsOfFewPointsSplit) {
  Generated g = generate(R"(
graph @sp(%x: f32[2, 1000000]) -> (%s) {
  %ax = constant i64[1] [1]
  %s = ReduceSum(%x, %ax) {keepdims = 0} : f32[2]
}
)",
                         "");
  ASSERT_EQ(g.kernels.size(), 1u);
  const CudaKernelSource &k = g.kernels[0];
  EXPECT_EQ(k.info.configs[0].name, "split_block1024");
  // The combining kernel comes after every config's function.
  ASSERT_EQ(k.functions.size(), k.info.configs.size() + 1);
  EXPECT_EQ(k.functions.back(), "k0_sum_c0_combine_kernel");
  EXPECT_TRUE(contains(k.host, "coil_launch(ctx, 0 + " + std::to_string(k.info.configs.size()) +
                                   ", \"k0_sum_c0_combine\", total, 1024, args);"));
  EXPECT_TRUE(contains(k.host, "coil_bytes > int64_t(ctx->workspace_bytes)"));
  EXPECT_TRUE(contains(k.device, "red0_0_ws[coil_i] = red0_0;"));
}

// The launch plans (data in KernelInfo) say what the printed launchers do: the launchers of
// several programs are compiled for the host with cuLaunchKernel replaced by a recorder and run
// over sizes and buffer alignments; every launch's function, grid and block must be the plan's.
TEST(CudaCodegen, LaunchPlansMatchTheLaunchers) {
  if (std::system("c++ --version > /dev/null 2>&1") != 0 ||
      !std::filesystem::exists("/usr/local/cuda/include/cuda.h"))
    GTEST_SKIP() << "no host compiler or no cuda.h";
  struct Case {
    const char *text;
    std::vector<SymBindings> sizes;
  };
  const std::vector<Case> cases = {
      {kPointwise, {{{"N", 1}}, {{"N", 37}}, {{"N", 100000}}}},
      {kBroadcast, {{{"N", 3}}, {{"N", 4096}}}},
      {kSoftmax, {{{"N", 1}}, {{"N", 65536}}}},
      {kLayerNorm, {{{"N", 5}}, {{"N", 16384}}}},
      {kArgMax, {{{"N", 1}}, {{"N", 999}}}},
      {kDynamicSlice, {{{"N", 7}, {"M", 9}, {"K", 3}}, {{"N", 100}, {"M", 64}, {"K", 50}}}},
      {R"(
graph @bm(%x: f32[N, M], %b: f32[M]) -> (%z) {
  symbol N in [1, 4096]
  symbol M in [1, 4096]
  %z = Add(%x, %b) : f32[N, M]
}
)",
       {{{"N", 4000}, {"M", 6}}, {{"N", 3000}, {"M", 8}}}},
      {R"(
graph @tr(%x: f32[N, 32]) -> (%y) {
  symbol N in [1, 4096]
  %t = Transpose(%x) {perm = [1, 0]} : f32[32, N]
  %y = Relu(%t) : f32[32, N]
}
)",
       {{{"N", 5}}, {{"N", 4096}}}},
      {R"(
graph @sd(%x: f32[N, K]) -> (%y) {
  symbol N in [1, 64]
  symbol K in [1, 1000000]
  %ax = constant i64[1] [1]
  %y = ReduceSum(%x, %ax) {keepdims = 0} : f32[N]
}
)",
       {{{"N", 2}, {"K", 1000000}}, {{"N", 64}, {"K", 100}}, {{"N", 1}, {"K", 70000}}}},
  };
  // The launchers, with a recording cuLaunchKernel, and a driver that calls every launcher of
  // every kernel with each size binding, buffers aligned (case 0) or not (case 1).
  std::string host = codegen::cudaLauncherPrelude();
  auto replace = [&](const std::string &from, const std::string &to) {
    size_t pos = host.find(from);
    ASSERT_NE(pos, std::string::npos) << from;
    host.replace(pos, from.size(), to);
  };
  replace("#include <cuda.h>\n", R"(#include <cuda.h>
static int coil_test_fn = -1;
static CUresult coil_test_launch(CUfunction f, unsigned gx, unsigned, unsigned, unsigned bx,
                                 unsigned, unsigned, unsigned, CUstream, void **, void **) {
  printf("launch %d %u %u\n", int((uintptr_t)f) - 1, gx, bx);
  return CUDA_SUCCESS;
}
)");
  replace("cuLaunchKernel(f,", "coil_test_launch(f,");
  replace("cuGetErrorName(r, &ename)", "CUDA_ERROR_UNKNOWN");
  replace("cuGetErrorString(r, &estr)", "CUDA_ERROR_UNKNOWN");
  std::string driver = "int main() {\n  static void *fns[4096];\n"
                       "  for (int i = 0; i < 4096; ++i) fns[i] = (void *)(uintptr_t)(i + 1);\n"
                       "  static char ws[1 << 20];\n  coil_cuda_ctx ctx = {};\n"
                       "  ctx.functions = fns;\n  ctx.workspace = ws;\n"
                       "  ctx.workspace_bytes = sizeof(ws);\n"
                       "  alignas(256) static char mem[64 * 256];\n";
  struct Call {
    size_t program, kernel, config, binding;
    int aligned;
  };
  std::vector<Call> calls;
  std::vector<Generated> programs;
  for (size_t pi = 0; pi < cases.size(); ++pi) {
    programs.push_back(generate(cases[pi].text, "p" + std::to_string(pi) + "_"));
    const Generated &g = programs.back();
    ASSERT_FALSE(g.kernels.empty());
    host += g.host;
    for (size_t ki = 0; ki < g.kernels.size(); ++ki) {
      const wrapper::KernelInfo &info = g.kernels[ki].info;
      for (size_t ci = 0; ci < info.configs.size(); ++ci)
        for (size_t bi = 0; bi < cases[pi].sizes.size(); ++bi)
          for (int aligned : {1, 0}) {
            std::string args;
            size_t slot = 0;
            for (const wrapper::KernelParam &prm : info.params) {
              if (prm.kind == wrapper::KernelParam::Kind::Buffer)
                args += std::string(", (") + codegen::cStorageType(prm.dtype) + " *)(mem + " +
                        std::to_string(256 * slot++ + (aligned ? 0 : 4)) + ")";
              else
                args += ", int64_t(" + std::to_string(cases[pi].sizes[bi].at(prm.name)) + ")";
            }
            driver += "  printf(\"call " + std::to_string(calls.size()) + "\\n\");\n";
            driver += "  if (" + info.name + "_c" + std::to_string(ci) + "(&ctx" + args +
                      ") != 0) return 1;\n";
            calls.push_back({pi, ki, ci, bi, aligned});
          }
    }
  }
  host += driver + "  return 0;\n}\n";
  std::string dir = tempDir();
  std::ofstream(dir + "/launch.cpp") << host;
  std::string cxx = "c++ -std=c++17 -O0 -w -I/usr/local/cuda/include -I" COIL_SOURCE_DIR
                    "/include -o " +
                    dir + "/launch " + dir + "/launch.cpp > " + dir + "/cxx.log 2>&1";
  ASSERT_EQ(std::system(cxx.c_str()), 0) << "see " << dir << "/cxx.log";
  ASSERT_EQ(std::system((dir + "/launch > " + dir + "/out.txt").c_str()), 0);
  std::ifstream in(dir + "/out.txt");
  std::vector<std::vector<std::array<int64_t, 3>>> launches;
  for (std::string word; in >> word;) {
    if (word == "call") {
      size_t n;
      in >> n;
      ASSERT_EQ(n, launches.size());
      launches.emplace_back();
    } else {
      ASSERT_EQ(word, "launch");
      std::array<int64_t, 3> l;
      in >> l[0] >> l[1] >> l[2];
      ASSERT_FALSE(launches.empty());
      launches.back().push_back(l);
    }
  }
  ASSERT_EQ(launches.size(), calls.size());
  size_t checked = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    const Call &c = calls[i];
    const CudaKernelSource &k = programs[c.program].kernels[c.kernel];
    const SymBindings &b = cases[c.program].sizes[c.binding];
    int64_t base = 0;
    for (size_t j = 0; j < c.kernel; ++j)
      base += int64_t(programs[c.program].kernels[j].functions.size());
    auto eval = [&](const SymInt &e) {
      auto v = e.evaluate(b);
      EXPECT_TRUE(v.ok());
      return v.ok() ? *v : -1;
    };
    int64_t total = 1;
    for (const SymInt &d : k.info.iterationSpace) total *= eval(d);
    // What config `ci`'s plan launches under this call: (function, grid, block) in order.
    std::function<std::vector<std::array<int64_t, 3>>(size_t)> expect =
        [&](size_t ci) -> std::vector<std::array<int64_t, 3>> {
      const wrapper::KernelConfig &cf = k.info.configs[ci];
      EXPECT_TRUE(cf.launch.has_value());
      if (!cf.launch) return {};
      const wrapper::LaunchPlan &lp = *cf.launch;
      if (lp.fallback >= 0) {
        int64_t grid = eval(lp.grid);
        if (grid <= total || eval(lp.workspaceBytes) > int64_t(1 << 20))
          return expect(size_t(lp.fallback));
        return {{base + int64_t(ci), grid, lp.block},
                {base + int64_t(k.info.configs.size()), total, lp.block}};
      }
      int64_t grid = eval(lp.grid);
      if (lp.vectorGrid && c.aligned) {
        int64_t vec = 1;
        for (const auto &[name, v] : cf.values)
          if (name == "vec") vec = v;
        if (!lp.vectorLastMultiple || eval(k.info.iterationSpace.back()) % vec == 0)
          grid = eval(*lp.vectorGrid);
      }
      return {{base + int64_t(ci), grid, lp.block}};
    };
    const auto &got = launches[i];
    bool adaptive = false;
    for (const auto &[name, v] : k.info.configs[c.config].values) adaptive |= name == "adaptive";
    if (adaptive) {
      // Config 0 launches the config its sizes choose: that config's plan.
      ASSERT_FALSE(got.empty());
      size_t chosen = size_t(got[0][0] - base);
      ASSERT_LT(chosen, k.info.configs.size());
      EXPECT_EQ(got, chosen == 0 ? got : expect(chosen)) << k.info.name << " call " << i;
      if (chosen == 0) EXPECT_EQ(got[0][2], k.info.configs[0].launch->block);
    } else {
      EXPECT_EQ(got, expect(c.config)) << k.info.name << " config " << c.config << " call " << i;
    }
    ++checked;
  }
  EXPECT_GT(checked, 100u);
  std::filesystem::remove_all(dir);
}

TEST(CudaCodegen, FunctionBaseCountsEarlierKernels) {
  Generated g = generate(kArgMax, "");
  ASSERT_GE(g.kernels.size(), 2u);
  size_t before = g.kernels[0].functions.size();
  EXPECT_TRUE(contains(g.kernels[1].host, "coil_launch(ctx, " + std::to_string(before) + " + "));
}

} // namespace

// Stress: every .onnx model under $COIL_CUDA_STRESS_DIR (e.g. the conformance work folder) is
// imported, lowered and scheduled; all its kernels are generated and compiled, many models per
// nvcc run (sm_90a) and host compiler run. Models coil cannot import or lower do not count.
// Run: COIL_CUDA_STRESS_DIR=/tmp/conf build/bin/coil_unittests --gtest_filter='CudaCodegenStress*'
TEST(CudaCodegenStress, ModelsCompile) {
  const char *root = std::getenv("COIL_CUDA_STRESS_DIR");
  if (!root) GTEST_SKIP() << "set COIL_CUDA_STRESS_DIR to a folder of .onnx models";
  if (!hasNvcc()) GTEST_SKIP() << "nvcc not found";
  std::vector<std::string> models;
  for (const auto &e : std::filesystem::recursive_directory_iterator(root))
    if (e.path().extension() == ".onnx") models.push_back(e.path().string());
  std::sort(models.begin(), models.end());
  int generated = 0, kernels = 0, skipped = 0;
  std::string dir = tempDir();
  std::string device, host;
  std::vector<std::string> batchModels;
  int batch = 0;
  auto flush = [&]() {
    if (batchModels.empty()) return;
    std::string b = dir + "/b" + std::to_string(batch++);
    std::ofstream(b + ".cu") << codegen::cudaKernelPrelude() << device;
    std::ofstream(b + ".cpp") << codegen::cudaLauncherPrelude() << host;
    // Up to PTX (every C++ and CUDA language check, no ptxas); COIL_CUDA_STRESS_FULL=1
    // compiles down to SASS (minutes per batch).
    std::string nvcc = std::string("nvcc -std=c++17 -O1 -arch=sm_90a -w ") +
                       (std::getenv("COIL_CUDA_STRESS_FULL") ? "-c" : "-ptx") + " -o " + b + ".o " +
                       b + ".cu > " + b + ".log 2>&1";
    if (std::system(nvcc.c_str()) != 0) {
      std::ifstream log(b + ".log");
      std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
      std::string names;
      for (const std::string &m : batchModels) names += "  " + m + "\n";
      ADD_FAILURE() << "nvcc failed on " << b << ".cu, models:\n" << names << text.substr(0, 6000);
    }
    std::string cxx = "c++ -std=c++17 -O0 -w -c -I/usr/local/cuda/include -I" COIL_SOURCE_DIR
                      "/include -o " +
                      b + "_h.o " + b + ".cpp > " + b + "_h.log 2>&1";
    if (std::system(cxx.c_str()) != 0) {
      std::ifstream log(b + "_h.log");
      std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
      ADD_FAILURE() << "host compiler failed on " << b << ".cpp:\n" << text.substr(0, 6000);
    }
    device.clear();
    host.clear();
    batchModels.clear();
  };
  for (size_t mi = 0; mi < models.size(); ++mi) {
    auto g = importOnnxFile(models[mi]);
    if (!g.ok()) {
      ++skipped;
      continue;
    }
    auto p = loop::lowerGraph(*g);
    if (!p.ok()) {
      ++skipped;
      continue;
    }
    auto s = sched::scheduleProgram(*p);
    if (!s.ok()) {
      ++skipped;
      continue;
    }
    ++generated;
    for (const sched::Step &st : s->steps) {
      const sched::Kernel *k = std::get_if<sched::Kernel>(&st);
      if (!k) continue;
      sched::Kernel named = *k;
      named.name = "m" + std::to_string(mi) + "_" + k->name;
      auto src = generateCudaKernel(named, *p);
      if (!src.ok()) {
        ADD_FAILURE() << models[mi] << ": " << src.error().render();
        continue;
      }
      ++kernels;
      device += "// model " + models[mi] + "\n" + src->device + "\n";
      host += src->host + "\n";
    }
    batchModels.push_back(models[mi]);
    if (batchModels.size() >= 150) flush();
  }
  flush();
  std::filesystem::remove_all(dir);
  std::printf("stress: %d models generated (%d kernels) in %d nvcc batches, %d not lowered\n",
              generated, kernels, batch, skipped);
}
