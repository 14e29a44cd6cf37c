// The debug printer's Wrapper IR pass: DebugPrint lines around every launch, unique launch
// names, values named after parameters, the verifier's approval, and the C++ wrapper's hooks.
#include "wrapper/DebugInstrument.h"

#include "WrapperTestUtil.h"
#include "wrapper/Lines.h"
#include "wrapper/MemoryPlan.h"
#include "wrapper/Verify.h"

namespace coil::wrapper::testing {
namespace {

/// x [N, 4] -> k (twice) -> ext (twice, one with a float) -> y.
WrapperProgram chain() {
  ProgramBuilder b("chain");
  BufferId x = b.input("x", DType::F32, {sym("N"), 4});
  BufferId w = b.constant("w", DType::F32, {4});
  BufferId y = b.output("y", DType::F32, {sym("N"), 4});
  BufferId t0 = b.temp("t0", DType::F32, {sym("N"), 4});
  BufferId t1 = b.temp("t1", DType::F32, {sym("N"), 4});
  BufferId t2 = b.temp("t2", DType::F32, {sym("N"), 4});
  KernelId k = b.kernel(
      "k", {bufParam("src", DType::F32, false), bufParam("dst", DType::F32, true), sizeParam("n")});
  b.p.symbols["N"] = {1, 64};
  b.bind("N", x, 0);
  b.line(KernelDefinition{k});
  b.alloc(t0);
  b.call(k, {bufArg(x), bufArg(t0), sizeArg(sym("N") * 4)});
  b.alloc(t1);
  b.call(k, {bufArg(t0), bufArg(t1), sizeArg(sym("N") * 4)});
  b.free(t0);
  b.alloc(t2);
  b.line(ExternKernelOut{
      "ext", {exIn(t1), exIn(w), exOut(t2), exSize(4 * sym("N")), exFloat(0.5)}, {}});
  b.free(t1);
  b.line(ExternKernelOut{
      "ext", {exIn(t2), exIn(w), exOut(y), exSize(4 * sym("N")), exFloat(0.25)}, {}});
  b.free(t2);
  return b.p;
}

std::vector<const DebugPrint *> prints(const WrapperProgram &p) {
  std::vector<const DebugPrint *> out;
  for (const Line &l : p.lines)
    if (const auto *d = std::get_if<DebugPrint>(&l)) out.push_back(d);
  return out;
}

TEST(DebugInstrument, LaunchNamesAreUnique) {
  WrapperProgram p = chain();
  std::vector<LaunchInfo> t = launchTable(p);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].name, "k_0");
  EXPECT_EQ(t[1].name, "k_1");
  EXPECT_EQ(t[2].name, "ext_0");
  EXPECT_EQ(t[3].name, "ext_1");
  EXPECT_EQ(t[2].base, "ext");
  EXPECT_TRUE(t[2].isExtern);
  EXPECT_FALSE(t[0].isExtern);
  EXPECT_EQ(t[1].writes, std::vector<BufferId>{4}); // t1
  EXPECT_EQ(t[3].writes, std::vector<BufferId>{2}); // y
  // A kernel already named like a generated name pushes the generated one further.
  KernelId clash = KernelId(p.kernels.size());
  p.kernels.push_back(p.kernels[0]);
  p.kernels.back().name = "ext_0";
  p.lines.push_back(KernelDefinition{clash});
  p.lines.push_back(KernelCall{clash, {bufArg(0), bufArg(5), sizeArg(sym("N") * 4)}, 0});
  t = launchTable(p);
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t[2].name, "ext_1");
  EXPECT_EQ(t[3].name, "ext_2");
  EXPECT_EQ(t[4].name, "ext_0");
}

TEST(DebugInstrument, BeforeAndAfterEveryLaunch) {
  WrapperProgram p = chain();
  size_t before = p.lines.size();
  insertDebugPrints(p);
  ASSERT_EQ(p.lines.size(), before + 8);
  Status st = verifyWrapper(p);
  ASSERT_TRUE(st.ok()) << st.error().render();
  // Each launch line sits between its Before and After lines.
  for (const LaunchInfo &li : launchTable(p)) {
    const auto *b = std::get_if<DebugPrint>(&p.lines[li.line - 1]);
    const auto *a = std::get_if<DebugPrint>(&p.lines[li.line + 1]);
    ASSERT_TRUE(b && a) << li.name;
    EXPECT_EQ(b->when, DebugPrint::When::Before);
    EXPECT_EQ(a->when, DebugPrint::When::After);
    EXPECT_EQ(b->launch, li.name);
    EXPECT_EQ(a->launch, li.name);
  }
  auto ps = prints(p);
  ASSERT_EQ(ps.size(), 8u);
  // Kernel values carry the parameter names.
  ASSERT_EQ(ps[0]->values.size(), 3u);
  EXPECT_EQ(ps[0]->values[0].name, "src");
  EXPECT_EQ(ps[0]->values[0].buffer, 0);
  EXPECT_EQ(ps[0]->values[1].name, "dst");
  EXPECT_EQ(ps[0]->values[2].kind, DebugValue::Kind::Size);
  EXPECT_EQ(ps[0]->values[2].name, "n");
  EXPECT_EQ(ps[0]->values[2].size, sym("N") * 4);
  // Externs: positional names per kind; the float keeps its value.
  const DebugPrint *e1 = ps[7];
  ASSERT_EQ(e1->values.size(), 5u);
  EXPECT_EQ(e1->values[0].name, "in0");
  EXPECT_EQ(e1->values[1].name, "in1");
  EXPECT_EQ(e1->values[2].name, "out0");
  EXPECT_EQ(e1->values[2].buffer, 2);
  EXPECT_EQ(e1->values[3].kind, DebugValue::Kind::Size);
  EXPECT_EQ(e1->values[3].name, "size0");
  EXPECT_EQ(e1->values[4].kind, DebugValue::Kind::Float);
  EXPECT_EQ(e1->values[4].name, "float0");
  EXPECT_EQ(e1->values[4].number, 0.25);
  EXPECT_EQ(debugLaunchNames(p), (std::vector<std::string>{"k_0", "k_1", "ext_0", "ext_1"}));
}

TEST(DebugInstrument, RunningTwiceChangesNothing) {
  WrapperProgram p = chain();
  insertDebugPrints(p);
  std::string once = emitCppWrapper(p);
  insertDebugPrints(p);
  EXPECT_EQ(emitCppWrapper(p), once);
}

TEST(DebugInstrument, AllocatingExternReportsItsOutputsAfterTheirMultiOutputs) {
  ProgramBuilder b("positive");
  BufferId x = b.input("x", DType::F32, {sym("N")});
  BufferId vals = b.output("vals", DType::F32, {sym("u")});
  BufferId idx = b.temp("idx", DType::I64, {sym("u")});
  BufferId alias = b.temp("idx_view", DType::I64, {sym("u")});
  BufferId pos = b.output("pos", DType::I64, {sym("u")});
  KernelId copy = b.kernel("k_copy", {bufParam("x", DType::I64, false),
                                      bufParam("y", DType::I64, true), sizeParam("n")});
  b.p.symbols["N"] = {0, 1 << 20};
  b.bind("N", x, 0);
  b.line(ExternKernelAlloc{
      "positive", {exIn(x), exSize(sym("N")), exOut(vals), exOut(idx), exSym("u")}, {"u"}, {}});
  b.line(MultiOutput{alias, vals, 1});
  b.line(KernelDefinition{copy});
  b.call(copy, {bufArg(alias), bufArg(pos), sizeArg(sym("u"))});
  b.free(idx);
  WrapperProgram p = b.p;
  insertDebugPrints(p);
  Status st = verifyWrapper(p);
  ASSERT_TRUE(st.ok()) << st.error().render();
  // bind, Before, call, MultiOutput, After, ...
  ASSERT_TRUE(std::holds_alternative<DebugPrint>(p.lines[1]));
  ASSERT_TRUE(std::holds_alternative<ExternKernelAlloc>(p.lines[2]));
  ASSERT_TRUE(std::holds_alternative<MultiOutput>(p.lines[3]));
  ASSERT_TRUE(std::holds_alternative<DebugPrint>(p.lines[4]));
  const auto &before = std::get<DebugPrint>(p.lines[1]);
  const auto &after = std::get<DebugPrint>(p.lines[4]);
  // Before: the input and the size only (the outputs and u do not exist yet).
  ASSERT_EQ(before.values.size(), 2u);
  EXPECT_EQ(before.values[0].name, "in0");
  EXPECT_EQ(before.values[1].name, "size0");
  ASSERT_EQ(after.values.size(), 5u);
  EXPECT_EQ(after.values[2].name, "out0");
  EXPECT_EQ(after.values[2].buffer, vals);
  EXPECT_EQ(after.values[3].name, "out1");
  EXPECT_EQ(after.values[3].buffer, idx);
  EXPECT_EQ(after.values[4].kind, DebugValue::Kind::Size);
  EXPECT_EQ(after.values[4].name, "u");
  EXPECT_EQ(after.values[4].size, sym("u"));
  // Moving the After line before the call is what the verifier rejects.
  WrapperProgram broken = p;
  std::swap(broken.lines[1], broken.lines[4]);
  EXPECT_FALSE(verifyWrapper(broken).ok());
}

TEST(DebugInstrument, VerifierAcceptsPlannedInstrumentedPrograms) {
  WrapperProgram p = chain();
  ASSERT_TRUE(planMemory(p, MemoryPlanOptions{}).ok());
  insertDebugPrints(p);
  Status st = verifyWrapper(p);
  EXPECT_TRUE(st.ok()) << st.error().render();
}

TEST(DebugInstrument, CppWrapperCallsTheHooksOnlyWhenEnabled) {
  WrapperProgram p = chain();
  std::string plain = emitCppWrapper(p);
  EXPECT_EQ(plain.find("debug"), std::string::npos);
  insertDebugPrints(p);
  std::string code = emitCppWrapper(p);
  EXPECT_NE(code.find("#include <coil/debug_abi.h>"), std::string::npos);
  EXPECT_NE(code.find("const coil_debug_hooks *const coil_debug = args->debug;"),
            std::string::npos);
  EXPECT_NE(code.find("coil_debug->num_launches != 4u"), std::string::npos);
  // One test of the pointer per DebugPrint line, then the launch's enabled flag.
  size_t tests = 0;
  for (size_t at = 0;
       (at = code.find("if (coil_debug && coil_debug->enabled[", at)) != std::string::npos; ++at)
    ++tests;
  EXPECT_EQ(tests, 8u);
  EXPECT_NE(code.find("coil_debug_tensor(\"dst\", \"t1\", 4, 1, 1, 0, 2, coil_ds1, b_t1)"),
            std::string::npos)
      << code;
  EXPECT_NE(code.find("coil_debug_tensor(\"src\", \"x\", 0, 1, 0, 0, 2, coil_ds0, b_x)"),
            std::string::npos);
  EXPECT_NE(code.find("coil_debug_size(\"n\", 4*s_N)"), std::string::npos);
  EXPECT_NE(code.find("coil_debug_float(\"float0\", 0.25)"), std::string::npos);
  EXPECT_NE(code.find("if (coil_debug_report(args, 3, COIL_DEBUG_AFTER, \"ext_1\", coil_dv, 5))"),
            std::string::npos);
}

TEST(DebugInstrument, MetadataListsTheLaunches) {
  WrapperProgram p = chain();
  EXPECT_NE(metadataJson(p, {}, 0, PackageOptions{}).find("\"launches\": []"), std::string::npos);
  insertDebugPrints(p);
  std::string json = metadataJson(p, {}, 0, PackageOptions{});
  EXPECT_NE(json.find("\"launches\": [\n    {\"name\": \"k_0\", \"kind\": \"kernel\", "
                      "\"function\": \"k\"},\n    {\"name\": \"k_1\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("{\"name\": \"ext_1\", \"kind\": \"extern\", \"function\": \"ext\"}"),
            std::string::npos);
}

} // namespace
} // namespace coil::wrapper::testing
