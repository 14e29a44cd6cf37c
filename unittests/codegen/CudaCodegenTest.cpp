// Tests of the CUDA kernel code generator: small graphs (coil's text format) are lowered and
// scheduled, every kernel is generated, and all of them are compiled together: the device text
// by nvcc for sm_80 and sm_90a, the launchers by the host compiler against <cuda.h> (skipped
// with a message when nvcc is absent). Structural checks cover the kernel shapes (vectorized
// pointwise, warp and block reductions), the configs and the determinism of the output. The
// numerics run on a GPU (conformance with --device cuda).
#include "codegen/cuda/CudaCodegen.h"

#include "ir/Parser.h"
#include "lower/Lower.h"
#include "sched/Schedule.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
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
    EXPECT_EQ(src->functions.size(), src->info.configs.size());
    for (size_t i = 0; i < src->functions.size(); ++i)
      EXPECT_EQ(src->functions[i], named.name + "_c" + std::to_string(i) + "_kernel");
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

bool contains(const std::string &s, const std::string &what) {
  return s.find(what) != std::string::npos;
}

TEST(CudaCodegen, KernelsCompileForSm80AndSm90a) {
  std::string device, host;
  int i = 0;
  for (const char *text :
       {kPointwise, kBroadcast, kSoftmax, kLayerNorm, kArgMax, kIntegers, kDynamicSlice}) {
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

TEST(CudaCodegen, BroadcastIsNotFlat) {
  Generated g = generate(kBroadcast, "");
  ASSERT_EQ(g.kernels.size(), 1u);
  EXPECT_FALSE(contains(g.kernels[0].device, "coil_vec<"));
  EXPECT_TRUE(contains(g.kernels[0].device, "t /= uint32_t(n1);"));
  EXPECT_TRUE(contains(g.kernels[0].device, "t /= n1;"));
}

TEST(CudaCodegen, SoftmaxIsOneWarpPerRowKernel) {
  Generated g = generate(kSoftmax, "");
  ASSERT_EQ(g.kernels.size(), 1u);
  const CudaKernelSource &k = g.kernels[0];
  EXPECT_EQ(k.info.configs[0].name, "warp_per_row_rows4");
  EXPECT_TRUE(contains(k.device, "coil_shfl_xor("));
  // Another config combines warps through shared memory.
  EXPECT_TRUE(contains(k.device, "__syncthreads();"));
  EXPECT_TRUE(contains(k.device, "coil_f2bf("));
}

TEST(CudaCodegen, LayerNormUsesABlockPerRow) {
  Generated g = generate(kLayerNorm, "");
  ASSERT_EQ(g.kernels.size(), 1u);
  EXPECT_EQ(g.kernels[0].info.configs[0].name, "block256_per_row");
}

TEST(CudaCodegen, FunctionBaseCountsEarlierKernels) {
  Generated g = generate(kArgMax, "");
  ASSERT_GE(g.kernels.size(), 2u);
  size_t before = g.kernels[0].functions.size();
  EXPECT_TRUE(contains(g.kernels[1].host, "coil_launch(ctx, " + std::to_string(before) + " + 0,"));
}

} // namespace
