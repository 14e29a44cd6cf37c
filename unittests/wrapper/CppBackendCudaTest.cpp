// The C++ wrapper backend for device "cuda": launchers and CUDA externs take the run's
// coil_cuda_ctx and report failures; externs without a CUDA twin run on the host with their
// operands copied (the lines of insertHostCopies, printed); every printed program is compiled
// (syntax only) against cuda.h.
#include "WrapperTestUtil.h"
#include "wrapper/HostCopies.h"
#include "wrapper/Verify.h"

namespace coil::wrapper::testing {
namespace {

const char *kCudaInclude = "/usr/local/cuda/include";

bool haveCudaHeaders() {
  return std::filesystem::exists(std::string(kCudaInclude) + "/cuda.h");
}

void expectCompiles(const std::string &code) {
  TempDir dir;
  writeFile(dir.path + "/w.cpp", code);
  std::string cmd = std::string("c++ -std=c++17 -fsyntax-only -Wall -Werror -Wno-unused-label "
                                "-I" COIL_SOURCE_DIR "/include -isystem ") +
                    kCudaInclude + " '" + dir.path + "/w.cpp' > '" + dir.path + "/log' 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << readFile(dir.path + "/log") << "\n" << code;
}

void expectHas(const std::string &code, const std::string &snippet) {
  EXPECT_NE(code.find(snippet), std::string::npos) << "missing:\n" << snippet << "\nin:\n" << code;
}

std::string emitChecked(WrapperProgram &p) {
  p.device = "cuda";
  insertHostCopies(p);
  Status st = verifyWrapper(p);
  EXPECT_TRUE(st.ok()) << st.error().render();
  std::string code = emitCppWrapper(p);
  if (haveCudaHeaders()) expectCompiles(code);
  return code;
}

struct Simple {
  ProgramBuilder b{"simple"};
  BufferId x, y;
  KernelId k;
  Simple() {
    x = b.input("x", DType::F32, {sym("N"), 4});
    y = b.output("y", DType::F32, {sym("N"), 4});
    k = b.kernel(
        "k", {bufParam("x", DType::F32, false), bufParam("y", DType::F32, true), sizeParam("n")},
        2);
    b.p.symbols["N"] = {1, 64};
    b.bind("N", x, 0);
    b.line(KernelDefinition{k});
  }
};

TEST(CppBackendCuda, LaunchersTakeTheContextAndFailuresStopTheRun) {
  if (!haveCudaHeaders()) GTEST_SKIP() << "no CUDA toolkit headers at " << kCudaInclude;
  Simple s;
  s.b.call(s.k, {bufArg(s.x), bufArg(s.y), sizeArg(sym("N") * 4)}, 1);
  std::string code = emitChecked(s.b.p);
  expectHas(code, "#include <coil/cuda_abi.h>\n#include <cuda.h>\n");
  expectHas(code, "int32_t k_c1(const coil_cuda_ctx *, const float *, float *, int64_t);");
  expectHas(code, "  if (k_c1(coil_cu, b_x, b_y, 4*s_N)) {\n    coil_cuda_failed(args, coil_cu);\n"
                  "    goto coil_fail;\n  }\n");
  expectHas(code, "const coil_cuda_ctx *const coil_cu = (const coil_cuda_ctx *)args->device_ctx;");
  expectHas(code, "needs a CUDA device context");
}

TEST(CppBackendCuda, CudaExternsAreCalledOnTheDevice) {
  if (!haveCudaHeaders()) GTEST_SKIP() << "no CUDA toolkit headers at " << kCudaInclude;
  Simple s;
  // (A function outside the extern table, whose signatures the verifier checks.)
  ExternKernelOut twin{"coil_cuda_test_twin", {exIn(s.x), exOut(s.y), exSize(sym("N"))}, {}};
  twin.place = ExternPlace::kDevice; // as placeExterns marks a CUDA twin
  s.b.line(twin);
  std::string code = emitChecked(s.b.p);
  expectHas(code, "int32_t coil_cuda_test_twin(const coil_cuda_ctx *, const void *, void *, "
                  "int64_t);");
  expectHas(code, "  if (coil_cuda_test_twin(coil_cu, b_x, b_y, s_N)) {\n");
  EXPECT_EQ(code.find("cuStreamSynchronize"), std::string::npos) << code;
}

TEST(CppBackendCuda, OtherExternsRunOnTheHostWithCopies) {
  if (!haveCudaHeaders()) GTEST_SKIP() << "no CUDA toolkit headers at " << kCudaInclude;
  Simple s;
  s.b.line(ExternKernelOut{"coil_cpu_det_f32",
                           {exIn(s.x), exOut(s.y), exSize(sym("N")), exSize(2)},
                           {},
                           {"det", "Det"}});
  std::string code = emitChecked(s.b.p);
  expectHas(code, "int32_t coil_cpu_det_f32(const void *, void *, int64_t, int64_t);");
  const std::string what = "\"host extern 'coil_cpu_det_f32'\"";
  expectHas(code, "  if (coil_cuda_check(args, cuStreamSynchronize(coil_stream), " + what +
                      ")) goto coil_fail;\n");
  expectHas(code, "  { // x_host: host memory\n    void *coil_p = nullptr;\n"
                  "    if (coil_host_buffer(args, coil_cu, &coil_p, 16*s_N, " +
                      what + ")) goto coil_fail;\n    b_x_host = (float *)coil_p;\n  }\n");
  expectHas(code, "  if (coil_copy_to_host(args, b_x_host, b_x, 16*s_N, " + what +
                      ")) goto coil_fail;\n");
  expectHas(code, "int coil_copy_to_host(const coil_model_run_args *args, void *h, const void *d,");
  // A failed call (nonzero status) fails the run with its message, naming the node.
  expectHas(code, "  if (coil_cpu_det_f32(b_x_host, b_y_host, s_N, 2) != 0) {\n"
                  "    coil_set_error(args, \"node 'det' (Det): %s\", coil_cpu_last_error());\n"
                  "    goto coil_fail;\n  }\n");
  expectHas(code,
            "  if (coil_to_device(args, b_y, b_y_host, 16*s_N, " + what + ")) goto coil_fail;\n");
  expectHas(code, "  if (b_x_host) coil_cu->host_free(coil_cu->host_ctx, b_x_host);\n"
                  "  b_x_host = nullptr;\n");
  // The failure path frees host memory still held.
  expectHas(code, "coil_fail:\n");
  EXPECT_NE(code.find("  if (b_y_host) coil_cu->host_free(coil_cu->host_ctx, b_y_host);\n",
                      code.find("coil_fail:\n")),
            std::string::npos)
      << code;
}

TEST(CppBackendCuda, AllocatingExternsRunOnTheHostAndMoveTheirOutputsToTheDevice) {
  if (!haveCudaHeaders()) GTEST_SKIP() << "no CUDA toolkit headers at " << kCudaInclude;
  ProgramBuilder b("alloc");
  BufferId x = b.input("x", DType::F32, {sym("N")});
  BufferId vals = b.output("vals", DType::F32, {sym("u")});
  BufferId idx = b.temp("idx", DType::I64, {sym("u")});
  b.bind("N", x, 0);
  b.line(ExternKernelAlloc{"coil_cpu_test_unique",
                           {exIn(x), exSize(sym("N")), exOut(vals), exOut(idx), exSym("u")},
                           {"u"},
                           {}});
  b.line(MultiOutput{idx, vals, 1});
  b.free(idx);
  std::string code = emitChecked(b.p);
  expectHas(code, "    coil_host_tracker coil_ht = {coil_cu, 0};\n"
                  "    const int32_t coil_rc = coil_cpu_test_unique(coil_host_tracked_alloc, "
                  "&coil_ht, b_x_host, s_N, &coil_o[0], &coil_o[1], &s_u);\n"
                  "    b_vals_host = (float *)coil_o[0];\n"
                  "    b_idx_host = (int64_t *)coil_o[1];\n");
  expectHas(code, "  // idx_host is output 1 of vals_host\n"
                  "  b_vals = (float *)coil_tracked_alloc(&coil_tracker, (size_t)(4*s_u));\n");
  expectHas(code, "  if (coil_to_device(args, b_idx, b_idx_host, 8*s_u, \"host extern "
                  "'coil_cpu_test_unique'\")) goto coil_fail;\n");
  // The allocated output reaches the caller's buffer with a device copy.
  expectHas(code, "cuMemcpyDtoDAsync((CUdeviceptr)args->outputs[0], (CUdeviceptr)b_vals, "
                  "(size_t)(4*s_u), coil_stream)");
}

} // namespace
} // namespace coil::wrapper::testing
