// Config choice per size bucket (src/driver/Tune.h): buckets from the symbol ranges, the cost
// model on codegen/cuda's config values, applying measured timings (fastest config, failures
// never chosen, unmeasured buckets left to the heuristic, neighbours merged), and the compiler's
// heuristic pass on real CUDA kernels (the chosen chain agrees with the record).
#include "driver/Tune.h"

#include "../wrapper/WrapperTestUtil.h"
#include "driver/Pipeline.h"
#include "ir/Parser.h"
#include "wrapper/Verify.h"

#include <dlfcn.h>

namespace coil::tune {
namespace {

using namespace coil::wrapper;
using namespace coil::wrapper::testing;

std::vector<int64_t> ats(const std::vector<Bucket> &b) {
  std::vector<int64_t> out;
  for (const Bucket &x : b) out.push_back(x.at);
  return out;
}

void expectWellFormed(const std::vector<Bucket> &b, const SymInt &size) {
  for (size_t i = 0; i < b.size(); ++i) {
    EXPECT_LE(b[i].at, b[i].upTo);
    if (i) {
      EXPECT_GT(b[i].at, b[i - 1].upTo) << "bucket " << i;
    }
    EXPECT_EQ(*size.evaluate(b[i].bindings), b[i].at);
  }
}

TEST(TuneBuckets, StaticSizeHasOneBucket) {
  std::vector<Bucket> b = sizeBuckets(SymInt(4096), {});
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].at, 4096);
  EXPECT_EQ(b[0].upTo, 4096);
}

TEST(TuneBuckets, PowersOfFourOfTheSymbolUpToItsMax) {
  SymInt size = SymInt::symbol("N") * 512;
  SymRanges r{{"N", {1, 1024}}};
  std::vector<Bucket> b = sizeBuckets(size, r);
  EXPECT_EQ(ats(b), (std::vector<int64_t>{512, 2048, 8192, 32768, 131072, 524288}));
  EXPECT_EQ(b[0].upTo, 1024); // sqrt(512 * 2048)
  EXPECT_EQ(b[1].upTo, 4096);
  EXPECT_EQ(b.back().upTo, 524288);
  expectWellFormed(b, size);
  // A range that is not a power of 4: its ends are representatives.
  b = sizeBuckets(size, {{"N", {3, 100}}});
  EXPECT_EQ(ats(b), (std::vector<int64_t>{3 * 512, 4 * 512, 16 * 512, 64 * 512, 100 * 512}));
  expectWellFormed(b, size);
}

TEST(TuneBuckets, UnboundedSymbolIsCappedButTheLastBucketIsOpen) {
  SymInt size = SymInt::symbol("N");
  std::vector<Bucket> b = sizeBuckets(size, {{"N", {1, int64_t(1) << 62}}});
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(b.back().at, kMaxTunedSymbol);
  EXPECT_EQ(b.back().upTo, int64_t(1) << 62);
  expectWellFormed(b, size);
}

TEST(TuneBuckets, SeveralSymbolsGrowTogether) {
  SymInt size = SymInt::symbol("B") * SymInt::symbol("S");
  SymRanges r{{"B", {1, 8}}, {"S", {1, 512}}};
  std::vector<Bucket> b = sizeBuckets(size, r);
  EXPECT_EQ(ats(b), (std::vector<int64_t>{1, 16, 128, 512, 2048, 4096}));
  expectWellFormed(b, size);
  EXPECT_EQ(b.back().upTo, 4096);
}

KernelConfig rowsConfig(const char *name, int64_t block, int64_t tpr, int64_t rows) {
  return {name, {{"block", block}, {"threads_per_row", tpr}, {"rows_per_block", rows}}};
}
KernelConfig pwConfig(int64_t block, int64_t ept, int64_t vec) {
  return {"pw", {{"block", block}, {"ept", ept}, {"vec", vec}}};
}

/// The cheapest of `configs` by the cost model.
size_t cheapest(const std::vector<KernelConfig> &configs, int64_t outer, int64_t inner) {
  size_t best = 0;
  for (size_t i = 0; i < configs.size(); ++i) {
    double c = estimateCost(configs[i], outer, inner);
    EXPECT_GE(c, 0);
    if (c < estimateCost(configs[best], outer, inner)) best = i;
  }
  return best;
}

TEST(TuneHeuristic, RowKernels) {
  std::vector<KernelConfig> c = {rowsConfig("thread", 128, 1, 128), rowsConfig("warp", 128, 32, 4),
                                 rowsConfig("b256", 256, 256, 1),
                                 rowsConfig("b1024", 1024, 1024, 1)};
  EXPECT_EQ(cheapest(c, 1 << 20, 4), 0u);  // tiny rows, many: a thread per row
  EXPECT_EQ(cheapest(c, 49152, 512), 1u);  // short rows: a warp per row
  EXPECT_EQ(cheapest(c, 65536, 128), 1u);  // a thread per row would read strided memory
  EXPECT_EQ(cheapest(c, 256, 32768), 3u);  // long rows, few: a large block per row
  EXPECT_EQ(cheapest(c, 2048, 16384), 2u); // long rows, enough of them: block per row
}

TEST(TuneHeuristic, PointwiseKernels) {
  std::vector<KernelConfig> c = {pwConfig(256, 2, 4), pwConfig(128, 4, 4), pwConfig(512, 1, 4)};
  // Small: under two waves, the least work per thread.
  EXPECT_EQ(cheapest(c, 4096, 1), 2u);
  // Large: every config does the same work; the estimates agree within rounding.
  double a = estimateCost(c[0], int64_t(1) << 26, 1), b = estimateCost(c[1], int64_t(1) << 26, 1);
  EXPECT_NEAR(a, b, 1e-6 * a);
}

TEST(TuneHeuristic, UnknownConfigValuesKeepConfigZero) {
  EXPECT_LT(estimateCost({"block64", {{"block", 64}}}, 100, 1), 0);
  EXPECT_LT(estimateCost({"x", {{"tile", 64}}}, 100, 1), 0);
}

/// x [N, 4] -> y [N, 4], kernel of 3 configs the cost model does not know, N in [1, 1024].
struct Program {
  ProgramBuilder b{"p"};
  Program() {
    BufferId x = b.input("x", DType::F32, {sym("N"), 4});
    BufferId y = b.output("y", DType::F32, {sym("N"), 4});
    KernelId k = b.kernel(
        "k", {bufParam("x", DType::F32, false), bufParam("y", DType::F32, true), sizeParam("n")},
        3);
    b.p.kernels[0].iterationSpace = {sym("n")};
    b.p.symbols["N"] = {1, 1024};
    b.bind("N", x, 0);
    b.line(KernelDefinition{k});
    b.call(k, {bufArg(x), bufArg(y), sizeArg(sym("N") * 4)});
  }
  KernelCall &call() { return std::get<KernelCall>(b.p.lines.back()); }
};

/// The config the printed chain runs at bucket size `n`.
int32_t picked(const KernelCall &c, int64_t n) {
  for (const ConfigChoice &ch : c.choices)
    if (n <= ch.upTo) return ch.config;
  return c.config;
}

TEST(TuneApply, MeasuredFastestWinsFailuresNeverAndNeighboursMerge) {
  Program p;
  std::vector<TuneTask> tasks = tuneTasks(p.b.p);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].size.str(), "4*N");
  ASSERT_EQ(ats(tasks[0].buckets), (std::vector<int64_t>{4, 16, 64, 256, 1024, 4096}));
  Timings t = {{{3, 2, 1}, {3, 2, 1}, {5, 1, -1}, {5, 1, 2}, {}, {1, 2, 3}}};
  TuningRecord rec = applyChoices(p.b.p, tasks, &t);
  ASSERT_TRUE(verifyWrapper(p.b.p).ok()) << verifyWrapper(p.b.p).error().render();
  const KernelCall &c = p.call();
  ASSERT_EQ(c.choices.size(), 2u);
  EXPECT_EQ(c.bucketSize.str(), "4*N");
  EXPECT_EQ(c.choices[0].config, 2);
  EXPECT_EQ(c.choices[0].upTo, tasks[0].buckets[1].upTo);
  EXPECT_EQ(c.choices[1].config, 1);
  EXPECT_EQ(c.choices[1].upTo, tasks[0].buckets[3].upTo);
  EXPECT_EQ(c.config, 0); // bucket 4: the heuristic's 0; bucket 5: measured 0
  EXPECT_EQ(rec.method, "measured");
  ASSERT_EQ(rec.calls.size(), 1u);
  ASSERT_EQ(rec.calls[0].buckets.size(), 6u);
  std::vector<int32_t> configs;
  for (const auto &bk : rec.calls[0].buckets) configs.push_back(bk.config);
  EXPECT_EQ(configs, (std::vector<int32_t>{2, 2, 1, 1, 0, 0}));
  EXPECT_TRUE(rec.calls[0].buckets[4].timesUs.empty());
  EXPECT_EQ(rec.calls[0].buckets[2].timesUs, (std::vector<double>{5, 1, -1}));
  // Every bucket's representative runs its recorded config.
  for (size_t i = 0; i < 6; ++i)
    EXPECT_EQ(picked(c, tasks[0].buckets[i].at), configs[i]) << "bucket " << i;
}

TEST(TuneApply, OneConfigEverywhereHasNoChain) {
  Program p;
  std::vector<TuneTask> tasks = tuneTasks(p.b.p);
  Timings t(1);
  for (size_t i = 0; i < tasks[0].buckets.size(); ++i) t[0].push_back({4, 3, 5});
  applyChoices(p.b.p, tasks, &t);
  EXPECT_TRUE(p.call().choices.empty());
  EXPECT_EQ(p.call().config, 1);
  EXPECT_EQ(emitCppWrapper(p.b.p).find("coil_bucket"), std::string::npos);
}

TEST(TuneApply, HeuristicOnlyKeepsUnknownConfigsAtZero) {
  Program p;
  p.call().config = 2;
  TuningRecord rec = chooseConfigsHeuristic(p.b.p);
  EXPECT_EQ(rec.method, "heuristic");
  EXPECT_TRUE(p.call().choices.empty());
  EXPECT_EQ(p.call().config, 0);
}

TEST(TuneApply, SingleConfigKernelsAreNotTasks) {
  ProgramBuilder b("one");
  BufferId x = b.input("x", DType::F32, {sym("N")});
  BufferId y = b.output("y", DType::F32, {sym("N")});
  KernelId k = b.kernel(
      "k", {bufParam("x", DType::F32, false), bufParam("y", DType::F32, true), sizeParam("n")});
  b.p.symbols["N"] = {1, 1024};
  b.bind("N", x, 0);
  b.line(KernelDefinition{k});
  b.call(k, {bufArg(x), bufArg(y), sizeArg(sym("N"))});
  EXPECT_TRUE(tuneTasks(b.p).empty());
}

TEST(TuneHeuristic, OverridesConfigZeroOnlyForATwofoldGain) {
  // Rows of 4 elements: a block of 1024 threads per row (config 0) against a thread per row.
  ProgramBuilder b("p");
  BufferId x = b.input("x", DType::F32, {sym("N"), 4});
  BufferId y = b.output("y", DType::F32, {sym("N")});
  KernelId k = b.kernel(
      "k", {bufParam("x", DType::F32, false), bufParam("y", DType::F32, true), sizeParam("n")}, 1);
  b.p.kernels[0].iterationSpace = {sym("n")};
  b.p.kernels[0].configs = {rowsConfig("b1024", 1024, 1024, 1), rowsConfig("thread", 128, 1, 128),
                            rowsConfig("warp", 128, 32, 4)};
  b.p.symbols["N"] = {1, 1 << 20};
  b.bind("N", x, 0);
  b.line(KernelDefinition{k});
  b.call(k, {bufArg(x), bufArg(y), sizeArg(sym("N"))});
  const auto &call = std::get<KernelCall>(b.p.lines.back());
  EXPECT_EQ(heuristicConfig(b.p, call, Bucket{1 << 20, 1 << 20, {{"N", 1 << 20}}}), 1);
  // Layer norm rows of 4096 at many rows: the model prefers a warp per row, but not by 2x.
  b.p.kernels[0].configs = {rowsConfig("b256", 256, 256, 1), rowsConfig("warp", 128, 32, 4)};
  b.p.buffers[size_t(x)].shape = {sym("N"), 4096};
  EXPECT_LT(estimateCost(b.p.kernels[0].configs[1], 16384, 4096),
            estimateCost(b.p.kernels[0].configs[0], 16384, 4096));
  EXPECT_EQ(heuristicConfig(b.p, call, Bucket{16384, 16384, {{"N", 16384}}}), 0);
}

/// The compiler's pass on real CUDA kernels: the choices it prints agree with its record and
/// with the heuristic at every bucket.
TEST(TuneCompile, CudaKernelsGetPerBucketConfigs) {
  auto g = parseGraph(
      R"(graph @g(%x: f32[N, 4096], %w: f32[4096], %b: f32[4096], %s: f32[N, 6]) -> (%y, %t) {
  symbol N in [1, 16384]
  %y = LayerNormalization(%x, %w, %b) {axis = -1, epsilon = 0.00001} : f32[N, 4096]
  %t = Softmax(%s) {axis = -1} : f32[N, 6]
})",
      "<test>");
  ASSERT_TRUE(g.ok()) << g.error().render();
  CompileOptions o;
  o.device = "cuda";
  auto c = compileGraph(std::move(*g), o);
  ASSERT_TRUE(c.ok()) << c.error().render();
  const WrapperProgram &w = (*c)->wrapper;
  const TuningRecord &rec = (*c)->tuning;
  EXPECT_EQ(rec.method, "heuristic");
  std::vector<const KernelCall *> calls;
  for (const Line &l : w.lines)
    if (const auto *kc = std::get_if<KernelCall>(&l)) calls.push_back(kc);
  ASSERT_EQ(rec.calls.size(), calls.size());
  ASSERT_EQ(calls.size(), 2u);
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(rec.calls[i].bucketSize, "N");
    ASSERT_EQ(rec.calls[i].buckets.size(), 8u); // N = 1, 4, ..., 16384
    for (const auto &bk : rec.calls[i].buckets) {
      EXPECT_EQ(picked(*calls[i], bk.at), bk.config) << "N = " << bk.at;
      EXPECT_EQ(bk.config, heuristicConfig(w, *calls[i], Bucket{bk.upTo, bk.at, {{"N", bk.at}}}));
    }
  }
  EXPECT_TRUE(verifyWrapper(w).ok());
}

} // namespace
} // namespace coil::tune

namespace coil::tune {
namespace {

using namespace coil::wrapper;

/// The measuring build's trampoline, linked with a recording cuLaunchKernel instead of the
/// driver: each (kernel, config) reaches its own CUfunction with the arguments in param order.
TEST(TuneMeasure, TrampolinePassesArgumentsToEachConfigsLauncher) {
  if (!std::filesystem::exists("/usr/local/cuda/include/cuda.h"))
    GTEST_SKIP() << "no CUDA toolkit headers at /usr/local/cuda/include";
  auto g = parseGraph(R"(graph @g(%x: f32[N, 300], %w: f32[300], %b: f32[300]) -> (%y) {
  symbol N in [1, 4096]
  %y = LayerNormalization(%x, %w, %b) {axis = -1, epsilon = 0.00001} : f32[N, 300]
})",
                      "<test>");
  ASSERT_TRUE(g.ok()) << g.error().render();
  CompileOptions o;
  o.device = "cuda";
  auto c = compileGraph(std::move(*g), o);
  ASSERT_TRUE(c.ok()) << c.error().render();
  std::string launchers = codegen::cudaLauncherPrelude();
  for (const auto &k : (*c)->cudaKernels) launchers += "\n" + k.host;
  const char *fake = R"(#include <cuda.h>
#include <cstdint>
#include <cstring>
extern "C" {
void *g_f;
unsigned g_grid, g_block;
void *g_params[8];
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned, unsigned, unsigned bx, unsigned,
                        unsigned, unsigned, CUstream, void **params, void **) {
  g_f = f;
  g_grid = gx;
  g_block = bx;
  for (int i = 0; i < 5; ++i) std::memcpy(&g_params[i], params[i], 8);
  return CUDA_SUCCESS;
}
CUresult cuGetErrorName(CUresult, const char **s) { *s = "E"; return CUDA_SUCCESS; }
CUresult cuGetErrorString(CUresult, const char **s) { *s = "e"; return CUDA_SUCCESS; }
void *fake_state(int i) { return i == 0 ? g_f : i == 1 ? (void *)(uintptr_t)g_grid : i == 2 ? (void *)(uintptr_t)g_block : g_params[i - 3]; }
}
)";
  TempDir dir;
  ToolchainOptions to;
  to.useCache = false;
  to.includes.push_back(COIL_SOURCE_DIR "/include");
  to.systemIncludes.push_back("/usr/local/cuda/include");
  auto built = buildSharedObject(
      dir.path,
      {{"src/tune.cpp", launchers + tuneTrampolineSource((*c)->wrapper)}, {"src/fake.cpp", fake}},
      "tune.so", to);
  ASSERT_TRUE(built.ok()) << built.error().render();
  void *lib = dlopen((dir.path + "/tune.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  using LaunchFn = int32_t (*)(const void *, int32_t, int32_t, const TuneArg *);
  using StateFn = void *(*)(int);
  auto launch = reinterpret_cast<LaunchFn>(dlsym(lib, "coil_tune_launch"));
  auto state = reinterpret_cast<StateFn>(dlsym(lib, "fake_state"));
  ASSERT_TRUE(launch && state);

  const KernelInfo &k = (*c)->wrapper.kernels.at(0);
  ASSERT_EQ(k.params.size(), 5u); // x, w, b, y, N (buffers in the call's order, then N)
  std::vector<void *> functions;
  for (size_t i = 0; i < k.configs.size(); ++i) functions.push_back((void *)(0x1000 + 16 * i));
  struct Ctx { // include/coil/cuda_abi.h's layout
    void *stream;
    void *const *functions;
    void *blas, *workspace;
    size_t workspace_bytes;
    char *error;
    size_t error_size;
    void *ha, *hf, *hc;
    int32_t ordinal, sm;
  } ctx{};
  char err[256] = {};
  ctx.functions = functions.data();
  ctx.error = err;
  ctx.error_size = sizeof err;
  TuneArg args[5] = {{(void *)0x10000, 0},
                     {(void *)0x20000, 0},
                     {(void *)0x30000, 0},
                     {(void *)0x40000, 0},
                     {nullptr, 300}};
  for (size_t cfg = 0; cfg < k.configs.size(); ++cfg) {
    ASSERT_EQ(launch(&ctx, 0, int32_t(cfg), args), 0) << err;
    EXPECT_EQ(state(0), functions[cfg]) << "config " << cfg;
    int64_t rows = 0, block = 0;
    for (const auto &[n, v] : k.configs[cfg].values) {
      if (n == "rows_per_block") rows = v;
      if (n == "block") block = v;
    }
    EXPECT_EQ(int64_t(uintptr_t(state(1))), (300 + rows - 1) / rows) << "config " << cfg;
    EXPECT_EQ(int64_t(uintptr_t(state(2))), block);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(state(3 + i), args[i].ptr);
    EXPECT_EQ(int64_t(uintptr_t(state(7))), 300);
  }
  EXPECT_EQ(launch(&ctx, 0, int32_t(k.configs.size()), args), -1);
  EXPECT_EQ(launch(&ctx, 1, 0, args), -1);
  dlclose(lib);
}

TEST(TuneMeasure, RequestHasAJobPerBucketWithItsSizes) {
  ProgramBuilder b("p");
  BufferId x = b.input("x", DType::BF16, {sym("N"), 4});
  BufferId y = b.output("y", DType::F32, {sym("N"), 4});
  KernelId k = b.kernel(
      "k", {bufParam("x", DType::BF16, false), bufParam("y", DType::F32, true), sizeParam("n")}, 3);
  b.p.kernels[0].iterationSpace = {sym("n")};
  b.p.symbols["N"] = {1, 16};
  b.bind("N", x, 0);
  b.line(KernelDefinition{k});
  b.call(k, {bufArg(x), bufArg(y), sizeArg(sym("N") * 4)});
  MeasureInput in;
  in.packageDir = "/pkg";
  in.functions = {"k_c0_kernel", "k_c1_kernel", "k_c2_kernel"};
  in.workspaceBytes = 256;
  std::string text = tuneRequestText(b.p, tuneTasks(b.p), in, "/pkg/tune/tune.so");
  EXPECT_EQ(text, "lib /pkg/tune/tune.so\n"
                  "fatbin /pkg/src/kernels.fatbin\n"
                  "workspace 256\n"
                  "function k_c0_kernel\nfunction k_c1_kernel\nfunction k_c2_kernel\n"
                  "job 0 0 0 k 3 3\narg b bf16 4\narg b f32 4\narg s 4\n"
                  "job 0 1 0 k 3 3\narg b bf16 16\narg b f32 16\narg s 16\n"
                  "job 0 2 0 k 3 3\narg b bf16 64\narg b f32 64\narg s 64\n");
  // Buckets whose buffers exceed 512 MiB are not measured: rows of 2^20 (6 MiB per row of x
  // and y together): N = 64 (384 MiB) is, N = 256 (1.5 GiB) is not.
  ProgramBuilder w("wide");
  x = w.input("x", DType::BF16, {sym("N"), int64_t(1) << 20});
  y = w.output("y", DType::F32, {sym("N"), int64_t(1) << 20});
  k = w.kernel(
      "k", {bufParam("x", DType::BF16, false), bufParam("y", DType::F32, true), sizeParam("n")}, 3);
  w.p.kernels[0].iterationSpace = {sym("n")};
  w.p.symbols["N"] = {1, 4096};
  w.bind("N", x, 0);
  w.line(KernelDefinition{k});
  w.call(k, {bufArg(x), bufArg(y), sizeArg(sym("N"))});
  ASSERT_EQ(tuneTasks(w.p).at(0).buckets.size(), 7u);
  text = tuneRequestText(w.p, tuneTasks(w.p), in, "/pkg/tune/tune.so");
  EXPECT_NE(text.find("job 0 3 0 k 3 3\narg b bf16 67108864\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("job 0 4 "), std::string::npos) << text;
  EXPECT_EQ(text.find("job 0 5 "), std::string::npos) << text;
  EXPECT_EQ(text.find("job 0 6 "), std::string::npos) << text;
}

TEST(TuneMeasure, WorkerReportsAFailureLine) {
  TempDir dir;
  writeFile(dir.path + "/request.txt", "lib " + dir.path + "/missing.so\nfatbin " + dir.path +
                                           "/missing.fatbin\nworkspace 0\n");
  std::string outPath = dir.path + "/out.txt";
  FILE *out = std::fopen(outPath.c_str(), "w");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(runTuneWorker(dir.path + "/request.txt", out), 1);
  std::fclose(out);
  std::string text = readFile(outPath);
  EXPECT_EQ(text.rfind("E ", 0), 0u) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  FILE *null = std::fopen("/dev/null", "w");
  ASSERT_NE(null, nullptr);
  EXPECT_EQ(runTuneWorker(dir.path + "/none.txt", null), 1);
  std::fclose(null);
}

/// `--tune` where no GPU exists: the package is built with the cost model's choice, the warning
/// says why, and metadata.json records it.
TEST(TuneMeasure, WithoutAGpuThePackageKeepsTheHeuristicWithAWarning) {
  if (gpuPresent()) GTEST_SKIP() << "a GPU is present: TuneGpu tests measure";
  if (std::system("nvcc --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "nvcc not found";
  auto g = parseGraph(R"(graph @g(%x: f32[N, 512]) -> (%y) {
  symbol N in [1, 4096]
  %y = Softmax(%x) {axis = -1} : f32[N, 512]
})",
                      "<test>");
  ASSERT_TRUE(g.ok()) << g.error().render();
  CompileOptions o;
  o.device = "cuda";
  o.cudaArchs = {"sm_80"};
  o.tune = true;
  auto c = compileGraph(std::move(*g), o);
  ASSERT_TRUE(c.ok()) << c.error().render();
  TempDir dir;
  auto r = writePackage(**c, dir.path, o);
  ASSERT_TRUE(r.ok()) << r.error().render();
  EXPECT_EQ(r->tuning, "warning: tuning failed, the configs are the cost model's: no NVIDIA GPU "
                       "found (no /dev/nvidia0, and nvidia-smi -L lists none)");
  std::string meta = readFile(dir.path + "/metadata.json");
  EXPECT_NE(meta.find("\"tuning\": {\"method\": \"heuristic\", \"device\": \"\", \"note\": \"no "
                      "NVIDIA GPU found"),
            std::string::npos)
      << meta;
  EXPECT_NE(meta.find("{\"up_to\": 4096, \"at\": 4096, \"config\": 0, \"times_us\": []}"),
            std::string::npos)
      << meta;
  EXPECT_TRUE(std::filesystem::exists(dir.path + "/model.so"));
  EXPECT_FALSE(std::filesystem::exists(dir.path + "/tune"));
}

TEST(TuneMeasure, WithoutAGpuMeasuringFailsCleanly) {
  if (gpuPresent()) GTEST_SKIP() << "a GPU is present";
  ProgramBuilder b("p");
  BufferId x = b.input("x", DType::F32, {sym("N")});
  BufferId y = b.output("y", DType::F32, {sym("N")});
  KernelId k = b.kernel(
      "k", {bufParam("x", DType::F32, false), bufParam("y", DType::F32, true), sizeParam("n")}, 2);
  b.p.kernels[0].iterationSpace = {sym("n")};
  b.p.symbols["N"] = {1, 64};
  b.bind("N", x, 0);
  b.line(KernelDefinition{k});
  b.call(k, {bufArg(x), bufArg(y), sizeArg(sym("N"))});
  auto r = measureConfigs(b.p, tuneTasks(b.p), MeasureInput{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("no NVIDIA GPU found"), std::string::npos);
}

} // namespace
} // namespace coil::tune
