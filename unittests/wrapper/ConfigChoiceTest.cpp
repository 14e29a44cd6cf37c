// KernelCall config choice per size bucket: the C++ backend's if/else chain (cpu and cuda, golden
// text, compiled; on cpu also run: each size picks its bucket's launcher), the Python backend's
// if/elif chain, the JSON export, metadata.json's "tuning", and the verifier's checks.
#include "WrapperTestUtil.h"
#include "coil/coil.h"
#include "wrapper/GraphExport.h"
#include "wrapper/PyBackend.h"
#include "wrapper/Verify.h"

namespace coil::wrapper::testing {
namespace {

void expectHas(const std::string &code, const std::string &snippet) {
  EXPECT_NE(code.find(snippet), std::string::npos) << "missing:\n" << snippet << "\nin:\n" << code;
}

/// x [N, 4] -> y [N, 4] through kernel `k` of 3 configs, bucketed on 4*N:
/// <= 16: config 2, <= 64: config 1, else config 0.
struct Bucketed {
  ProgramBuilder b{"bucketed"};
  BufferId x, y;
  KernelId k;
  Bucketed() {
    x = b.input("x", DType::F32, {sym("N"), 4});
    y = b.output("y", DType::F32, {sym("N"), 4});
    k = b.kernel(
        "k", {bufParam("x", DType::F32, false), bufParam("y", DType::F32, true), sizeParam("n")},
        3);
    b.p.symbols["N"] = {1, 1024};
    b.bind("N", x, 0);
    b.line(KernelDefinition{k});
    KernelCall c;
    c.kernel = k;
    c.args = {bufArg(x), bufArg(y), sizeArg(sym("N") * 4)};
    c.config = 0;
    c.bucketSize = sym("N") * 4;
    c.choices = {ConfigChoice{16, 2, 8, {}}, ConfigChoice{64, 1, 32, {3.5, 2.25, 4.0}}};
    b.line(c);
  }
  KernelCall &call() { return std::get<KernelCall>(b.p.lines.back()); }
};

TEST(ConfigChoice, CppChainGolden) {
  Bucketed s;
  ASSERT_TRUE(verifyWrapper(s.b.p).ok());
  std::string code = emitCppWrapper(s.b.p);
  expectHas(code, "  { // config by size bucket\n"
                  "    const int64_t coil_bucket = 4*s_N;\n"
                  "    if (coil_bucket <= 16) k_c2(b_x, b_y, 4*s_N);\n"
                  "    else if (coil_bucket <= 64) k_c1(b_x, b_y, 4*s_N);\n"
                  "    else k_c0(b_x, b_y, 4*s_N);\n"
                  "  }\n");
}

TEST(ConfigChoice, CudaChainGoldenChecksEveryLaunch) {
  Bucketed s;
  s.b.p.device = "cuda";
  ASSERT_TRUE(verifyWrapper(s.b.p).ok());
  std::string code = emitCppWrapper(s.b.p);
  expectHas(code, "  { // config by size bucket\n"
                  "    const int64_t coil_bucket = 4*s_N;\n"
                  "    int32_t coil_rc;\n"
                  "    if (coil_bucket <= 16) coil_rc = k_c2(coil_cu, b_x, b_y, 4*s_N);\n"
                  "    else if (coil_bucket <= 64) coil_rc = k_c1(coil_cu, b_x, b_y, 4*s_N);\n"
                  "    else coil_rc = k_c0(coil_cu, b_x, b_y, 4*s_N);\n"
                  "    if (coil_rc) {\n"
                  "      coil_cuda_failed(args, coil_cu);\n"
                  "      goto coil_fail;\n"
                  "    }\n"
                  "  }\n");
  if (!std::filesystem::exists("/usr/local/cuda/include/cuda.h")) return;
  TempDir dir;
  writeFile(dir.path + "/w.cpp", code);
  std::string cmd =
      "c++ -std=c++17 -fsyntax-only -Wall -Werror -Wno-unused-label -I" COIL_SOURCE_DIR
      "/include -isystem /usr/local/cuda/include '" +
      dir.path + "/w.cpp' > '" + dir.path + "/log' 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << readFile(dir.path + "/log") << "\n" << code;
}

TEST(ConfigChoice, NoChoicesPrintsTheSingleCall) {
  Bucketed s;
  s.call().choices.clear();
  s.call().config = 1;
  std::string code = emitCppWrapper(s.b.p);
  expectHas(code, "  k_c1(b_x, b_y, 4*s_N);\n");
  EXPECT_EQ(code.find("coil_bucket"), std::string::npos);
}

/// The chain runs: config c's kernel writes y = x + 100 * c, so each size shows its launcher.
TEST(ConfigChoice, CpuPackageRunsTheBucketsConfig) {
  Bucketed s;
  TempDir dir;
  std::string kernels = "#include <cstdint>\n";
  for (int c = 0; c < 3; ++c)
    kernels += "extern \"C\" void k_c" + std::to_string(c) +
               "(const float *x, float *y, int64_t n) {\n"
               "  for (int64_t i = 0; i < n; ++i) y[i] = x[i] + " +
               std::to_string(100 * c) + ".0f;\n}\n";
  ASSERT_EQ(buildPackage(dir.path, s.b.p, {}, kernels), "");
  coil_model *m = nullptr;
  ASSERT_EQ(coil_model_load(dir.path.c_str(), &m), COIL_OK) << coil_last_error();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  // 4*N: 4 and 16 (bucket 0, config 2), 20 and 64 (config 1), 68 and 4096 (default 0).
  for (auto [n, config] :
       std::vector<std::pair<int64_t, int>>{{1, 2}, {4, 2}, {5, 1}, {16, 1}, {17, 0}, {1024, 0}}) {
    std::vector<float> x(size_t(n) * 4);
    for (float &v : x) v = dist(rng);
    int64_t shape[] = {n, 4};
    coil_tensor in = {x.data(), COIL_DTYPE_F32, 2, shape};
    coil_output out = {};
    ASSERT_EQ(coil_model_run(m, &in, 1, &out, 1), COIL_OK) << coil_last_error();
    const float *y = static_cast<const float *>(out.data);
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(y[i], x[i] + float(100 * config)) << "N=" << n << " element " << i;
    coil_output_release(&out);
  }
  coil_model_free(m);
}

TEST(ConfigChoice, PythonChain) {
  Bucketed s;
  std::string py = emitPyWrapper(s.b.p);
  expectHas(py, "    coil_bucket = 4*s_N  # config by size bucket\n"
                "    if coil_bucket <= 16:\n"
                "        lib.k_c2(b_x, b_y, 4*s_N)\n"
                "    elif coil_bucket <= 64:\n"
                "        lib.k_c1(b_x, b_y, 4*s_N)\n"
                "    else:\n"
                "        lib.k_c0(b_x, b_y, 4*s_N)\n");
}

TEST(ConfigChoice, JsonAndDotExport) {
  Bucketed s;
  std::string json = emitWrapperJson(s.b.p);
  expectHas(json, "\"config\": 0, \"args\": [");
  expectHas(json, "\"bucket_size\": \"4*N\", \"choices\": [{\"up_to\": 16, \"config\": 2, "
                  "\"at\": 8}, {\"up_to\": 64, \"config\": 1, \"at\": 32, \"times_us\": [3.5, "
                  "2.25, 4.0]}]");
  std::string dot = emitWrapperDot(s.b.p);
  expectHas(dot, "4*N <= 16: c2");
  expectHas(dot, "4*N <= 64: c1");
}

TEST(ConfigChoice, MetadataRecordsTuning) {
  Bucketed s;
  PackageOptions o;
  TuningRecord t;
  t.method = "measured";
  t.device = "NVIDIA H200 (sm_90)";
  t.calls.push_back({"k", "4*N", {{16, 8, 2, {5, 4, 1.5}}, {64, 32, 1, {3.5, 2.25, -1}}}});
  o.tuning = t;
  std::string meta = metadataJson(s.b.p, {}, 0, o);
  expectHas(meta, "\"tuning\": {\"method\": \"measured\", \"device\": \"NVIDIA H200 (sm_90)\", "
                  "\"note\": \"\", \"calls\": [\n    {\"kernel\": \"k\", \"bucket_size\": \"4*N\", "
                  "\"buckets\": [\n      {\"up_to\": 16, \"at\": 8, \"config\": 2, \"times_us\": "
                  "[5.000, 4.000, 1.500]},\n      {\"up_to\": 64, \"at\": 32, \"config\": 1, "
                  "\"times_us\": [3.500, 2.250, -1.000]}\n    ]}\n  ]}");
  // Without a record: no section.
  EXPECT_EQ(metadataJson(s.b.p, {}, 0, PackageOptions{}).find("\"tuning\""), std::string::npos);
}

void expectInvalid(const WrapperProgram &p, const std::string &msg) {
  Status st = verifyWrapper(p);
  ASSERT_FALSE(st.ok()) << "expected: " << msg;
  EXPECT_NE(st.error().message().find(msg), std::string::npos) << st.error().message();
}

TEST(ConfigChoice, VerifierChecksConfigsAndOrder) {
  {
    Bucketed s;
    s.call().choices[1].config = 3;
    expectInvalid(s.b.p, "kernel 'k' size bucket 1 chooses config 3 (it has 3)");
  }
  {
    Bucketed s;
    s.call().choices[0].config = -1;
    expectInvalid(s.b.p, "kernel 'k' size bucket 0 chooses config -1 (it has 3)");
  }
  {
    Bucketed s;
    s.call().choices[1].upTo = 16;
    expectInvalid(s.b.p, "kernel 'k' size bucket 1 ends at 16, not above the previous bucket's "
                         "end 16 (buckets must be sorted)");
  }
  {
    Bucketed s;
    s.call().choices[1].timesUs = {1, 2};
    expectInvalid(s.b.p, "kernel 'k' size bucket 1 has 2 measured times for 3 configs");
  }
  {
    Bucketed s;
    s.call().bucketSize = sym("M") * 4;
    expectInvalid(s.b.p, "kernel 'k' bucket size uses symbol 'M' before it is bound");
  }
  {
    Bucketed s;
    s.call().config = 5;
    expectInvalid(s.b.p, "kernel 'k' has no config 5 (it has 3)");
  }
}

} // namespace
} // namespace coil::wrapper::testing
