// The Python wrapper backend: each line kind's printing (mirroring the C++ backend's), literals
// (NaN, infinities, names that need escaping), determinism; every printed program parses as
// Python (python3's ast). Running wrapper.py against model.so is python/tests/test_python.py.
#include "wrapper/PyBackend.h"

#include "GraphExportTestProgram.h"
#include "wrapper/HostCopies.h"

namespace coil::wrapper::testing {
namespace {

void expectHas(const std::string &code, const std::string &snippet) {
  EXPECT_NE(code.find(snippet), std::string::npos) << "missing:\n" << snippet << "\nin:\n" << code;
}

void expectParses(const std::string &code) {
  TempDir dir;
  writeFile(dir.path + "/wrapper.py", code);
  std::string cmd = "python3 -c \"import ast, sys; ast.parse(open(sys.argv[1]).read())\" '" +
                    dir.path + "/wrapper.py' > '" + dir.path + "/log' 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << readFile(dir.path + "/log") << "\n" << code;
}

TEST(PyBackend, EveryLineKind) {
  std::string py = emitPyWrapper(everyLineKind());
  expectParses(py);
  expectHas(py, "WRAPPER_ABI = " + std::to_string(kPyWrapperAbiVersion) + "\n");
  expectHas(py, "MODEL = \"every \\\"kind\\\"\"\n");
  // Signatures: launchers of both configs; externs with the allocator (A) and symbol cells (S).
  expectHas(py, "    \"k_c0\": \"PPI\",\n    \"k_c1\": \"PPI\",\n");
  expectHas(py, "    \"coil_cpu_test_out\": \"PPPIDD\",\n");
  expectHas(py, "    \"coil_cpu_test_alloc\": \"APPPSI\",\n");
  expectHas(py, "    (\"y out\", \"f32\", (\"N\", \"4\")),\n");
  expectHas(py, "def arena_bytes(input_shapes):\n");
  expectHas(py, "    s_N = input_shapes[0][0]\n    return 16*s_N + 64\n");
  // The run, line by line.
  expectHas(py, "    # bind the size symbols\n"
                "    s_N = input_shapes[0][0]\n"
                "    # kernel k is defined in src/kernels.cpp\n"
                "    b_t = rt.view(arena, 0, \"f32\", (s_N, 4))\n"
                "    lib.k_c1(b_x, b_t, 4*s_N)\n"
                "    if rt.debug is not None:\n"
                "        rt.debug(\"before\", \"k\", [(\"x\", b_x), (\"n\", 4*s_N), "
                "(\"eps\", float(\"nan\"))])\n"
                "    if rt.debug is not None:\n"
                "        rt.debug(\"after\", \"k\", [(\"t\", b_t)])\n"
                "    b_tv = rt.reinterpret(b_t, 16, \"f32\", (s_N, 3))\n"
                "    b_y = rt.output(\"f32\", (s_N, 4))  # output 2: y\n"
                "    if lib.coil_cpu_test_out(b_tv, b_c, b_y, s_N, float(\"inf\"), 0.5) != 0:\n"
                "        rt.extern_failed(\"extern call 'coil_cpu_test_out'\", "
                "\"coil_cpu_test_out\")\n"
                "    b_t2 = rt.reinterpret(b_t, 0, \"f32\", (s_N, 4))  # reuse\n"
                "    b_t = None\n"
                "    b_d = rt.empty(\"f32\", (s_N,))  # not in the arena\n"
                "    b_d = None  # free\n"
                "    coil_o = rt.cells(2)  # where the call stores its outputs\n"
                "    coil_s = rt.cells(1)  # the symbols it defines\n"
                "    coil_rc = lib.coil_cpu_test_alloc(rt.alloc, rt.alloc_ctx, b_x, coil_o.at(0), "
                "coil_o.at(1), coil_s.at(0), 4*s_N)\n"
                "    if coil_rc != 0:\n"
                "        rt.extern_failed(\"extern call 'coil_cpu_test_alloc'\", "
                "\"coil_cpu_test_alloc\")\n"
                "    rt.check_alloc(\"coil_cpu_test_alloc\")\n"
                "    s_U = coil_s[0]\n"
                "    b_u = rt.adopt(coil_o[0], \"f32\", (s_U,))\n"
                "    b_v = rt.adopt(coil_o[1], \"i64\", (s_U,))\n"
                "    # v is output 1 of u\n"
                "    b_t2 = None  # arena storage\n"
                "    return [rt.result(b_u, \"f32\", (s_U,)), rt.result(b_v, \"i64\", (s_U,)), "
                "rt.result(b_y, \"f32\", (s_N, 4))]\n");
  expectHas(py, "    b_x = inputs[0]\n    b_c = constants[0]\n    b_u = None\n");
}

TEST(PyBackend, ExternErrorsNameTheNode) {
  WrapperProgram p = everyLineKind();
  for (Line &l : p.lines)
    if (auto *e = std::get_if<ExternKernelOut>(&l)) e->node = {"rs", "Reshape"};
  std::string py = emitPyWrapper(p);
  expectParses(py);
  expectHas(py, "        rt.extern_failed(\"node 'rs' (Reshape)\", \"coil_cpu_test_out\")\n");
}

TEST(PyBackend, CudaFlavourMirrorsTheCppWrapper) {
  WrapperProgram p = everyLineKind();
  p.device = "cuda";
  insertHostCopies(p);
  std::string py = emitPyWrapper(p);
  expectParses(py);
  expectHas(py, "DEVICE = \"cuda\"\n");
  // Launchers take the run's ctx first and return a status.
  expectHas(py, "    \"k_c0\": \"CPPI\",\n");
  expectHas(py, "    cu = rt.cuda_ctx(MODEL)");
  expectHas(py, "    if lib.k_c1(cu, b_x, b_t, 4*s_N):\n        rt.cuda_failed(cu)\n");
  // Outputs by index from the run's allocator; unplanned buffers freed through it.
  expectHas(py, "    b_y = rt.output(\"f32\", (s_N, 4), 2)  # output 2: y\n");
  expectHas(py, "    rt.free(b_d)\n    b_d = None  # free\n");
  // A CPU extern runs on the host: synchronize, copies, the call, copies back, host memory
  // freed (on a failure, by rt.release()).
  const std::string what = "\"host extern 'coil_cpu_test_out'\"";
  expectHas(py, "    rt.synchronize(cu, " + what +
                    ")\n"
                    "    b_tv_host = rt.host_alloc(cu, 12*s_N, " +
                    what +
                    ")  # host memory\n"
                    "    rt.copy_to_host(b_tv_host, b_tv, 12*s_N, " +
                    what + ")\n");
  expectHas(py, "    b_y_host = rt.host_alloc(cu, 16*s_N, " + what +
                    ")  # host memory\n"
                    "    if lib.coil_cpu_test_out(b_tv_host, b_c_host, b_y_host, s_N, "
                    "float(\"inf\"), 0.5) != 0:\n");
  expectHas(py, "    rt.to_device(b_y, b_y_host, 16*s_N, " + what +
                    ")\n"
                    "    rt.host_free(cu, b_tv_host)\n    b_tv_host = None\n");
  // An allocating one: the host allocator, its blocks adopted before the status is checked, the
  // symbols it defines, device blocks sized by them.
  expectHas(py, "    coil_ht = rt.host_tracker(cu)\n    coil_o = rt.cells(2)");
  expectHas(py, "    coil_rc = lib.coil_cpu_test_alloc(coil_ht.alloc, coil_ht.ctx, b_x_host, "
                "coil_o.at(0), coil_o.at(1), coil_s.at(0), 4*s_N)\n"
                "    b_u_host = rt.host_adopt(coil_o[0])\n"
                "    b_v_host = rt.host_adopt(coil_o[1])\n"
                "    if coil_rc != 0:\n");
  expectHas(py, "    s_U = coil_s[0]\n    # v_host is output 1 of u_host\n"
                "    b_u = rt.empty(\"f32\", (s_U,))\n");
  // The epilogue hands the outputs over.
  expectHas(py, "    rt.set_output(0, b_u, (s_U,), True)");
  expectHas(py, "    rt.set_output(2, b_y, (s_N, 4), False)");
}

TEST(PyBackend, MultiOutputIntoAnotherBufferIsAnAlias) {
  WrapperProgram p = everyLineKind();
  // w: an intermediate standing for output 1 of the allocating call.
  Buffer w;
  w.name = "w";
  w.dtype = DType::I64;
  w.shape = {sym("U")};
  p.buffers.push_back(w);
  BufferId wid = BufferId(p.buffers.size() - 1);
  p.lines.insert(p.lines.begin() + 14, MultiOutput{wid, 2, 1});
  std::string py = emitPyWrapper(p);
  expectParses(py);
  expectHas(py, "    b_w = b_v  # output 1 of u\n");
}

TEST(PyBackend, NamesBecomeIdentifiersAndSymbolsMatchTheCppBackend) {
  ProgramBuilder b("names");
  BufferId x = b.input("x", DType::BF16, {sym("N")});
  BufferId y = b.output("y", DType::Bool, {sym("N")});
  b.p.buffers[x].ioName = "input/0 'x'";
  KernelId k = b.kernel(
      "k", {bufParam("x", DType::BF16, false), bufParam("y", DType::Bool, true), sizeParam("n")});
  b.bind("N", x, 0);
  b.call(k, {bufArg(x), bufArg(y), sizeArg(floorDiv(sym("N") + 1, 2))});
  std::string py = emitPyWrapper(b.p);
  expectParses(py);
  expectHas(py, "    (\"input/0 'x'\", \"bf16\", (\"N\",)),\n");
  expectHas(py, "    lib.k_c0(b_x, b_y, (s_N + 1) // 2)\n");
  expectHas(py, "    b_y = rt.output(\"bool\", (s_N,))  # output 0: y\n");
  EXPECT_EQ(emitPyWrapper(b.p), py);
}

} // namespace
} // namespace coil::wrapper::testing
