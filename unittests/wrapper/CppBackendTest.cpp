// The C++ wrapper backend: each line kind's printing on its own, symbol names, determinism; every
// printed program is compiled (syntax only) against include/coil/model_abi.h.
#include "WrapperTestUtil.h"
#include "wrapper/MemoryPlan.h"
#include "wrapper/Verify.h"

#include <cmath>

namespace coil::wrapper::testing {
namespace {

void expectCompiles(const std::string &code) {
  TempDir dir;
  writeFile(dir.path + "/w.cpp", code);
  std::string cmd =
      "c++ -std=c++17 -fsyntax-only -Wall -Werror -Wno-unused-label -I" COIL_SOURCE_DIR
      "/include '" +
      dir.path + "/w.cpp' > '" + dir.path + "/log' 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << readFile(dir.path + "/log") << "\n" << code;
}

void expectHas(const std::string &code, const std::string &snippet) {
  EXPECT_NE(code.find(snippet), std::string::npos) << "missing:\n" << snippet << "\nin:\n" << code;
}

std::string emitChecked(const WrapperProgram &p) {
  Status st = verifyWrapper(p);
  EXPECT_TRUE(st.ok()) << st.error().render();
  std::string code = emitCppWrapper(p);
  expectCompiles(code);
  return code;
}

/// x [N, 4] -> y [N, 4] through kernel `k` with `configs` configs.
struct Simple {
  ProgramBuilder b{"simple"};
  BufferId x, y;
  KernelId k;
  explicit Simple(int configs = 1, DType t = DType::F32) {
    x = b.input("x", t, {sym("N"), 4});
    y = b.output("y", t, {sym("N"), 4});
    k = b.kernel("k", {bufParam("x", t, false), bufParam("y", t, true), sizeParam("n")}, configs);
    b.p.symbols["N"] = {1, 64};
    b.bind("N", x, 0);
    b.line(KernelDefinition{k});
  }
};

TEST(CppBackend, KernelCallPicksTheConfigsLauncher) {
  Simple s(3);
  s.b.call(s.k, {bufArg(s.x), bufArg(s.y), sizeArg(sym("N") * 4)}, 2);
  std::string code = emitChecked(s.b.p);
  for (int c = 0; c < 3; ++c)
    expectHas(code, "void k_c" + std::to_string(c) + "(const float *, float *, int64_t);");
  expectHas(code, "  k_c2(b_x, b_y, 4*s_N);\n");
  EXPECT_EQ(code.find("k_c0(b_x"), std::string::npos);
  EXPECT_EQ(code.find("k_c1(b_x"), std::string::npos);
}

TEST(CppBackend, BufferParamsUseTheStorageType) {
  for (auto [t, c] : std::vector<std::pair<DType, std::string>>{{DType::F16, "uint16_t"},
                                                                {DType::BF16, "uint16_t"},
                                                                {DType::Bool, "uint8_t"},
                                                                {DType::I8, "int8_t"},
                                                                {DType::F64, "double"},
                                                                {DType::U32, "uint32_t"}}) {
    Simple s(1, t);
    s.b.call(s.k, {bufArg(s.x), bufArg(s.y), sizeArg(sym("N") * 4)});
    std::string code = emitChecked(s.b.p);
    expectHas(code, "void k_c0(const " + c + " *, " + c + " *, int64_t);");
    expectHas(code, c + " *b_x = (" + c + " *)args->inputs[0];");
  }
}

TEST(CppBackend, BindSymbolAndComment) {
  ProgramBuilder b("bind");
  BufferId x = b.input("x", DType::F32, {3, sym("T")});
  b.output("y", DType::F32, {sym("T")});
  b.line(Comment{"two\nlines"});
  b.bind("T", x, 1);
  std::string code = emitChecked(b.p);
  expectHas(code, "  // two lines\n");
  expectHas(code, "  s_T = args->input_shapes[0][1];\n");
  expectHas(code, "  const int64_t s_T = input_shapes[0][1];\n");
  expectHas(code, "  args->output_shapes[0][0] = s_T;\n");
}

TEST(CppBackend, KernelDefinitionNamesItsSource) {
  Simple s;
  std::string code = emitChecked(s.b.p);
  expectHas(code, "  // kernel k is defined in src/kernels.cpp\n");
}

TEST(CppBackend, AllocateInTheArenaAndOutside) {
  Simple s;
  BufferId t = s.b.temp("t", DType::F32, {sym("N"), 4});
  BufferId u = s.b.temp("u", DType::F32, {sym("N"), 4});
  s.b.alloc(t);
  s.b.alloc(u);
  s.b.call(s.k, {bufArg(s.x), bufArg(t), sizeArg(sym("N") * 4)});
  s.b.call(s.k, {bufArg(t), bufArg(u), sizeArg(sym("N") * 4)});
  s.b.call(s.k, {bufArg(u), bufArg(s.y), sizeArg(sym("N") * 4)});
  s.b.p.buffers[t].arenaOffset = SymInt(128);
  s.b.p.arenaBytes = 128 + 16 * sym("N");
  std::string code = emitChecked(s.b.p);
  expectHas(code, "  b_t = (float *)(coil_arena + 128);\n");
  expectHas(code, "  { // u: not in the arena\n    const int64_t coil_bytes = 16*s_N;\n    b_u = "
                  "(float *)coil_tracked_alloc(&coil_tracker, (size_t)coil_bytes);\n");
  expectHas(code, "return 16*s_N + 128;");
  // The unplanned one is released on every path.
  expectHas(code, "  if (b_u) args->free(args->alloc_ctx, b_u);\n  return 0;");
  expectHas(code, "coil_fail:\n  if (b_u) args->free(args->alloc_ctx, b_u);\n");
}

TEST(CppBackend, FreeAndFreeIfNotReused) {
  Simple s;
  BufferId t = s.b.temp("t", DType::F32, {sym("N"), 4});
  BufferId u = s.b.temp("u", DType::F32, {sym("N"), 4});
  s.b.alloc(t);
  s.b.alloc(u);
  s.b.call(s.k, {bufArg(s.x), bufArg(t), sizeArg(sym("N") * 4)});
  s.b.call(s.k, {bufArg(t), bufArg(u), sizeArg(sym("N") * 4)});
  s.b.free(t);
  s.b.call(s.k, {bufArg(u), bufArg(s.y), sizeArg(sym("N") * 4)});
  s.b.line(FreeIfNotReused{u});
  s.b.p.buffers[t].arenaOffset = SymInt(0);
  std::string code = emitChecked(s.b.p);
  expectHas(code, "  b_t = nullptr; // arena storage\n");
  expectHas(code, "  args->free(args->alloc_ctx, b_u);\n  b_u = nullptr;\n");
}

TEST(CppBackend, ReuseHandsThePointerOver) {
  Simple s;
  BufferId t = s.b.temp("t", DType::F32, {sym("N"), 4});
  BufferId u = s.b.temp("u", DType::I32, {sym("N"), 4});
  KernelId cast = s.b.kernel(
      "cast", {bufParam("x", DType::F32, false), bufParam("y", DType::I32, true), sizeParam("n")});
  s.b.line(KernelDefinition{cast});
  s.b.alloc(t);
  s.b.call(s.k, {bufArg(s.x), bufArg(t), sizeArg(sym("N") * 4)});
  s.b.line(Reuse{t, u});
  s.b.call(cast, {bufArg(s.x), bufArg(u), sizeArg(sym("N") * 4)});
  s.b.free(u);
  s.b.call(s.k, {bufArg(s.x), bufArg(s.y), sizeArg(sym("N") * 4)});
  s.b.p.buffers[t].arenaOffset = SymInt(0);
  s.b.p.buffers[u].arenaOffset = SymInt(0);
  std::string code = emitChecked(s.b.p);
  expectHas(code, "  b_u = (int32_t *)b_t; // reuse\n  b_t = nullptr;\n");
}

TEST(CppBackend, ReinterpretIsAPointerOffset) {
  Simple s;
  BufferId t = s.b.temp("t", DType::F32, {sym("N"), 4});
  BufferId v = s.b.temp("v", DType::F32, {sym("N") * 4 - 4});
  s.b.alloc(t);
  s.b.call(s.k, {bufArg(s.x), bufArg(t), sizeArg(sym("N") * 4)});
  s.b.line(Reinterpret{v, t, SymInt(16)});
  s.b.call(s.k, {bufArg(v), bufArg(s.y), sizeArg(sym("N") * 4 - 4)});
  s.b.free(t);
  s.b.p.buffers[t].arenaOffset = SymInt(0);
  std::string code = emitChecked(s.b.p);
  expectHas(code, "  b_v = (float *)((char *)b_t + 16);\n");
}

TEST(CppBackend, ExternKernelOutDeclarationAndCall) {
  Simple s;
  s.b.line(ExternKernelOut{"ext_fn",
                           {exIn(s.x), exOut(s.y), exSize(sym("N") * 4), exFloat(0.1), exFloat(-2),
                            exFloat(INFINITY), exFloat(1e-300)},
                           {},
                           {"scale_it", "Mul"}});
  std::string code = emitChecked(s.b.p);
  expectHas(code, "int32_t ext_fn(const void *, void *, int64_t, double, double, double, double);");
  // A nonzero status fails the run, naming the graph node, with the message the host extern
  // (a function of libcoil_runtime, whatever its name) left in coil_cpu_last_error().
  expectHas(code, "  if (ext_fn(b_x, b_y, 4*s_N, 0.1, (-2.0), __builtin_inf(), "
                  "1e-300) != 0) {\n    coil_set_error(args, \"node 'scale_it' (Mul): %s\", "
                  "coil_cpu_last_error());\n    goto coil_fail;\n  }\n");
}

TEST(CppBackend, FailedCpuExternReportsTheKernelMessageAndTheNode) {
  Simple s;
  s.b.line(ExternKernelOut{
      "coil_cpu_cumsum_f32",
      {exIn(s.x), exOut(s.y), exSize(1), exSize(sym("N") * 4), exSize(1), exSize(0), exSize(0)},
      {},
      {"cs%1", "CumSum"}});
  // An unnamed node: the function.
  s.b.line(ExternKernelOut{
      "coil_cpu_cumsum_f32",
      {exIn(s.x), exOut(s.y), exSize(1), exSize(sym("N") * 4), exSize(1), exSize(0), exSize(0)},
      {}});
  std::string code = emitChecked(s.b.p);
  expectHas(code, "const char *coil_cpu_last_error(void);\n");
  expectHas(code, "coil_set_error(args, \"node 'cs%%1' (CumSum): %s\", coil_cpu_last_error());");
  expectHas(code, "coil_set_error(args, \"extern call 'coil_cpu_cumsum_f32': %s\", "
                  "coil_cpu_last_error());");
}

TEST(CppBackend, ExternKernelAllocDeclarationAndCall) {
  ProgramBuilder b("alloc");
  BufferId x = b.input("x", DType::F32, {sym("N")});
  BufferId vals = b.output("vals", DType::F32, {sym("u")});
  BufferId idx = b.temp("idx", DType::I64, {sym("u")});
  b.bind("N", x, 0);
  b.line(ExternKernelAlloc{"ext_alloc",
                           {exIn(x), exSize(sym("N")), exOut(vals), exOut(idx), exSym("u")},
                           {"u"},
                           {},
                           {"nz", "NonZero"}});
  b.free(idx);
  std::string code = emitChecked(b.p);
  expectHas(code, "int32_t ext_alloc(coil_alloc_fn, void *, const void *, int64_t, void **, "
                  "void **, int64_t *);");
  // The outputs are set before the status is checked, so that the failure path frees them.
  expectHas(code, "    const int32_t coil_rc = ext_alloc(coil_tracked_alloc, &coil_tracker, b_x, "
                  "s_N, &coil_o[0], &coil_o[1], &s_u);\n    b_vals = (float *)coil_o[0];\n    "
                  "b_idx = (int64_t *)coil_o[1];\n    if (coil_rc != 0) {\n      "
                  "coil_set_error(args, \"node 'nz' (NonZero): %s\", coil_cpu_last_error());\n");
  expectHas(code, "coil_fail:\n  if (b_vals) args->free(args->alloc_ctx, b_vals);\n  if (b_idx) "
                  "args->free(args->alloc_ctx, b_idx);\n");
  expectHas(code, "      coil_set_error(args, \"out of memory in extern call 'ext_alloc'\");");
  // The allocated output goes to the caller's buffer (copied) or to the caller.
  expectHas(code, "std::memcpy(args->outputs[0], b_vals, (size_t)(4*s_u));");
  expectHas(code, "    args->outputs[0] = b_vals;\n");
}

TEST(CppBackend, MultiOutputAliasAndDeclaration) {
  ProgramBuilder b("multi");
  BufferId x = b.input("x", DType::F32, {sym("N")});
  BufferId vals = b.temp("vals", DType::F32, {sym("u")});
  BufferId idx = b.temp("idx", DType::I64, {sym("u")});
  BufferId alias = b.temp("alias", DType::I64, {sym("u")});
  BufferId y = b.output("y", DType::I64, {sym("u")});
  b.bind("N", x, 0);
  b.line(ExternKernelAlloc{
      "ext_alloc", {exIn(x), exSize(sym("N")), exOut(vals), exOut(idx), exSym("u")}, {"u"}, {}});
  b.line(MultiOutput{idx, vals, 1});   // declaration: idx is the extern's output 1
  b.line(MultiOutput{alias, vals, 1}); // alias of it
  b.line(ExternKernelOut{"copy", {exIn(alias), exOut(y), exSize(sym("u"))}, {}});
  b.free(vals);
  b.free(idx);
  std::string code = emitChecked(b.p);
  expectHas(code, "  // idx is output 1 of vals\n");
  expectHas(code, "  b_alias = (int64_t *)b_idx; // output 1 of vals\n");
}

TEST(CppBackend, SymbolNamesBecomeDistinctIdentifiers) {
  ProgramBuilder b("names");
  BufferId x = b.input("x", DType::F32, {sym("a.b"), sym("a_b")});
  b.output("y", DType::F32, {sym("a.b")});
  b.bind("a.b", x, 0);
  b.bind("a_b", x, 1);
  auto names = cppSymbolNames(b.p);
  EXPECT_EQ(names.at("a.b"), "s_a_b");
  EXPECT_EQ(names.at("a_b"), "s_a_b_1");
  std::string code = emitChecked(b.p);
  expectHas(code, "  s_a_b_1 = args->input_shapes[0][1];\n");
}

TEST(CppBackend, FloorDivisionFollowsRanges) {
  // K may be negative (its range is [-8, 8]): its floor division must not print as C's '/'.
  ProgramBuilder b("floor");
  BufferId x = b.input("x", DType::F32, {sym("N")});
  BufferId y = b.output("y", DType::F32, {sym("N")});
  KernelId k = b.kernel("k", {bufParam("x", DType::F32, false), bufParam("y", DType::F32, true),
                              sizeParam("a"), sizeParam("b")});
  BufferId z = b.input("z", DType::F32, {sym("K")});
  b.p.symbols["N"] = {1, 64};
  b.p.symbols["K"] = {-8, 8};
  b.bind("N", x, 0);
  b.bind("K", z, 0);
  b.line(KernelDefinition{k});
  b.call(k, {bufArg(x), bufArg(y), sizeArg(floorDiv(sym("K"), 2)), sizeArg(floorDiv(sym("N"), 2))});
  std::string code = emitChecked(b.p);
  expectHas(code, "k_c0(b_x, b_y, coil_floordiv(s_K, 2), s_N / 2);");
}

TEST(CppBackend, OutputsAreSetUpBeforeTheirFirstUse) {
  Simple s;
  BufferId t = s.b.temp("t", DType::F32, {sym("N"), 4});
  s.b.alloc(t);
  s.b.call(s.k, {bufArg(s.x), bufArg(t), sizeArg(sym("N") * 4)});
  s.b.call(s.k, {bufArg(t), bufArg(s.y), sizeArg(sym("N") * 4)});
  s.b.free(t);
  std::string code = emitChecked(s.b.p);
  size_t setup = code.find("{ // output 0: y");
  size_t first = code.find("k_c0(b_x, b_t");
  size_t second = code.find("k_c0(b_t, b_y");
  ASSERT_NE(setup, std::string::npos);
  EXPECT_LT(first, setup);
  EXPECT_LT(setup, second);
  expectHas(code, "output 'y' needs %lld bytes, the caller gave %lld");
}

TEST(CppBackend, Deterministic) {
  Simple s(2);
  BufferId t = s.b.temp("t", DType::F32, {sym("N"), 4});
  s.b.alloc(t);
  s.b.call(s.k, {bufArg(s.x), bufArg(t), sizeArg(sym("N") * 4)}, 1);
  s.b.call(s.k, {bufArg(t), bufArg(s.y), sizeArg(sym("N") * 4)});
  s.b.free(t);
  WrapperProgram a = s.b.p, b = s.b.p;
  ASSERT_TRUE(planMemory(a, {}).ok());
  ASSERT_TRUE(planMemory(b, {}).ok());
  EXPECT_EQ(emitCppWrapper(a), emitCppWrapper(b));
  EXPECT_EQ(emitCppWrapper(a), emitCppWrapper(WrapperProgram(a)));
}

} // namespace
} // namespace coil::wrapper::testing
