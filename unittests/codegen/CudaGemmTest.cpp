// The launchers of GEMM kernels (codegen/cuda/CudaGemm.h), run on the host: the printed
// launchers.cpp text is compiled with recording stand-ins for the CUTLASS entry point, the
// cuBLASLt extern and cuLaunchKernel, and a driver calls each config. Checked: the CUTLASS
// config passes the operands, the epilogue's inputs and output and m, n, k to its entry on an
// sm_90 GPU and runs the unfused config on any other, or when the entry cannot run the problem; the
// unfused config gives cuBLASLt the extern's arguments with the product at the workspace's start
// (the rest of it as cuBLASLt's), or in the output when the workspace is too small, then launches
// the epilogue kernel. What the CUTLASS entry does on the GPU is test/gemm/check.py --mode
// verify's.
#include "codegen/cuda/CudaGemm.h"

#include "codegen/KernelEmitter.h"
#include "driver/Pipeline.h"
#include "ir/Parser.h"
#include "sched/FuseGemmEpilogue.h"
#include "sched/Schedule.h"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <unistd.h>

using namespace coil;

namespace {

/// x (B x 24 x 32) times W (32 x 16) plus a bias, GELU, plus a residual r.
std::string model() {
  std::string w;
  for (int i = 0; i < 32 * 16; ++i) w += (i ? ", " : "") + std::to_string((i % 7 - 3) / 8.0);
  return "graph @g(%x: bf16[B, 24, 32], %r: bf16[B, 24, 16]) -> (%out) {\n"
         "  symbol B in [1, 64]\n"
         "  %W = constant bf16[32, 16] [" +
         w +
         "]\n"
         "  %b = constant bf16[16] [1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8]\n"
         "  %y = MatMul(%x, %W) : bf16[B, 24, 16]\n"
         "  %yb = Add(%y, %b) : bf16[B, 24, 16]\n"
         "  %g = Gelu(%yb) : bf16[B, 24, 16]\n"
         "  %out = Add(%g, %r) : bf16[B, 24, 16]\n"
         "}\n";
}

} // namespace

TEST(CudaGemm, LaunchersCallTheEntryOrTheUnfusedPair) {
  if (std::system("c++ --version > /dev/null 2>&1") != 0 ||
      !std::filesystem::exists("/usr/local/cuda/include/cuda.h"))
    GTEST_SKIP() << "no host compiler or no cuda.h";
  auto g = parseGraph(model(), "<test>");
  ASSERT_TRUE(g.ok()) << g.error().render();
  CompileOptions o;
  o.device = "cuda";
  o.cudaArchs = {"sm_90a"};
  o.gemm = "cublaslt";
  auto c = compileGraph(std::move(*g), o);
  ASSERT_TRUE(c.ok()) << c.error().render();
  loop::LoopProgram loops = (*c)->loops;
  auto s = sched::scheduleProgram(loops);
  ASSERT_TRUE(s.ok()) << s.error().render();
  sched::GemmFusionOptions fo;
  fo.enabled = true;
  ASSERT_EQ(sched::fuseGemmEpilogues(*s, fo), 1);
  const sched::Kernel *k = nullptr;
  for (const sched::Step &st : s->steps)
    if (auto *kk = std::get_if<sched::Kernel>(&st); kk && kk->gemm) k = kk;
  ASSERT_NE(k, nullptr);
  codegen::CudaGemmOptions go;
  go.maxConfigs = 1;
  go.functionBase = 5;
  auto src = codegen::generateCudaGemmKernel(*k, loops, go);
  ASSERT_TRUE(src.ok()) << src.error().render();
  ASSERT_EQ(src->units.size(), 1u);
  ASSERT_EQ(src->info.configs.size(), 2u);
  EXPECT_EQ(src->info.configs[1].name, "cublaslt_unfused");
  EXPECT_FALSE(src->functions.empty()); // the epilogue kernel's, for the fatbin
  EXPECT_NE(src->device.find(k->name + "_epilogue_c0_kernel"), std::string::npos);
  std::string entry = "coil_" + std::filesystem::path(src->units[0].first).stem().string();

  // The launchers with recording stand-ins.
  std::string host = codegen::cudaLauncherPrelude();
  auto replace = [&](const std::string &from, const std::string &to) {
    size_t pos = host.find(from);
    ASSERT_NE(pos, std::string::npos) << from;
    host.replace(pos, from.size(), to);
  };
  replace("#include <cuda.h>\n", R"(#include <cuda.h>
#include <cstdio>
static char *coil_base = nullptr;
static int coil_refuse = 0; // the entry's answer: 2 (cannot run the problem) when set
static long coil_off(const void *p) { return p ? long(static_cast<const char *>(p) - coil_base) : -1; }
static CUresult coil_test_launch(CUfunction f, unsigned gx, unsigned, unsigned, unsigned bx,
                                 unsigned, unsigned, unsigned, CUstream, void **, void **) {
  printf("launch %d\n", int((uintptr_t)f) - 1);
  return CUDA_SUCCESS;
}
)");
  replace("cuLaunchKernel(f,", "coil_test_launch(f,");
  replace("cuGetErrorName(r, &ename)", "CUDA_ERROR_UNKNOWN");
  replace("cuGetErrorString(r, &estr)", "CUDA_ERROR_UNKNOWN");
  host +=
      R"(extern "C" int32_t coil_cuda_gemm_bias_bf16(const coil_cuda_ctx *ctx, const void *a, const void *b,
    const void *bias, void *y, int64_t batch, int64_t m, int64_t n, int64_t k, int64_t ta,
    int64_t tb, int64_t sa, int64_t sb, double alpha, int64_t relu) {
  printf("gemm a %ld b %ld bias %ld y %ld ws %ld %zu sizes %ld %ld %ld %ld %ld %ld %ld %ld %g %ld\n",
         coil_off(a), coil_off(b), coil_off(bias), coil_off(y), coil_off(ctx->workspace),
         ctx->workspace_bytes, long(batch), long(m), long(n), long(k), long(ta), long(tb), long(sa),
         long(sb), alpha, long(relu));
  return 0;
}
)";
  host += "extern \"C\" int32_t " + entry +
          "(const void *a, const void *b, const void *const *in, void *const *out, int64_t m, "
          "int64_t n, int64_t k, void *, void *ws, size_t wsb, char *, size_t) {\n"
          "  printf(\"entry a %ld b %ld in %ld %ld out %ld m %ld n %ld k %ld ws %ld %zu\\n\", "
          "coil_off(a), coil_off(b), coil_off(in[0]), coil_off(in[1]), coil_off(out[0]), long(m), "
          "long(n), long(k), coil_off(ws), wsb);\n  return coil_refuse ? 2 : 0;\n}\n";
  host += src->host;
  // Buffers at 4096-byte slots of one block, the workspace after them; B = 3 (m = 72).
  std::string args;
  size_t slot = 0;
  for (const wrapper::KernelParam &prm : src->info.params)
    args += prm.kind == wrapper::KernelParam::Kind::Buffer
                ? ", (" + std::string(codegen::cStorageType(prm.dtype)) + " *)(coil_base + " +
                      std::to_string(4096 * slot++) + ")"
                : std::string(", int64_t(3)");
  std::string call = "(&ctx" + args + ")";
  host += "int main() {\n  static char mem[1 << 20];\n  coil_base = mem;\n"
          "  static void *fns[64];\n  for (int i = 0; i < 64; ++i) fns[i] = (void *)(uintptr_t)(i "
          "+ 1);\n"
          "  coil_cuda_ctx ctx = {};\n  ctx.functions = fns;\n"
          "  ctx.workspace = mem + 65536;\n  ctx.workspace_bytes = 65536;\n"
          "  ctx.sm_version = 90;\n  printf(\"call sm90\\n\");\n  if (" +
          k->name + "_c0" + call +
          ") return 1;\n  coil_refuse = 1;\n  printf(\"call refused\\n\");\n  if (" + k->name +
          "_c0" + call +
          ") return 1;\n  coil_refuse = 0;\n  ctx.sm_version = 80;\n  printf(\"call sm80\\n\");\n  "
          "if (" +
          k->name + "_c0" + call +
          ") return 1;\n  ctx.workspace_bytes = 1024;\n  printf(\"call small\\n\");\n  if (" +
          k->name + "_c1" + call + ") return 1;\n  return 0;\n}\n";
  std::string dir =
      (std::filesystem::temp_directory_path() / ("coil-cuda-gemm-" + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/launch.cpp") << host;
  std::string cxx = "c++ -std=c++17 -O0 -w -I/usr/local/cuda/include -I" COIL_SOURCE_DIR
                    "/include -o " +
                    dir + "/launch " + dir + "/launch.cpp > " + dir + "/cxx.log 2>&1";
  ASSERT_EQ(std::system(cxx.c_str()), 0) << "see " << dir << "/cxx.log";
  ASSERT_EQ(std::system((dir + "/launch > " + dir + "/out.txt").c_str()), 0);
  std::ifstream in(dir + "/out.txt");
  std::stringstream got;
  got << in.rdbuf();
  // Buffer slots in param order: x 0, r 4096, W 8192, b 12288, the output 16384 (node ids:
  // inputs, then constants, then the output).
  std::vector<std::string> names;
  for (const wrapper::KernelParam &prm : src->info.params) names.push_back(prm.name);
  ASSERT_EQ(names, (std::vector<std::string>{"x", "r", "W", "b", "add_1", "B"}));
  // The product of the extern: 3 x 24 rows of 16 bf16 = 2304 bytes, at the workspace's start.
  std::string want =
      "call sm90\n"
      "entry a 0 b 8192 in 12288 4096 out 16384 m 72 n 16 k 32 ws 65536 65536\n"
      "call refused\n"
      "entry a 0 b 8192 in 12288 4096 out 16384 m 72 n 16 k 32 ws 65536 65536\n"
      "gemm a 0 b 8192 bias 12288 y 65536 ws 67840 63232 sizes 3 24 16 32 0 0 768 0 1 0\n"
      "launch 5\n"
      "call sm80\n"
      "gemm a 0 b 8192 bias 12288 y 65536 ws 67840 63232 sizes 3 24 16 32 0 0 768 0 1 0\n"
      "launch 5\n"
      "call small\n"
      "gemm a 0 b 8192 bias 12288 y 16384 ws 65536 1024 sizes 3 24 16 32 0 0 768 0 1 0\n"
      "launch 5\n";
  EXPECT_EQ(got.str(), want) << "see " << dir;
  if (got.str() == want) std::filesystem::remove_all(dir);
}
