// The Wrapper IR verifier: valid programs pass; each broken rule is reported for its reason.
#include "wrapper/Verify.h"

#include "WrapperTestUtil.h"

namespace coil::wrapper::testing {
namespace {

/// x [N, 4] -> t0 -> t1 -> y, two kernels and an extern; indices of the lines noted.
struct Chain {
  ProgramBuilder b{"chain"};
  BufferId x, w, y, t0, t1;
  KernelId k, cast;
  Chain() {
    x = b.input("x", DType::F32, {sym("N"), 4});
    w = b.constant("w", DType::F32, {4});
    y = b.output("y", DType::F32, {sym("N"), 4});
    t0 = b.temp("t0", DType::F32, {sym("N"), 4});
    t1 = b.temp("t1", DType::F32, {sym("N"), 4});
    k = b.kernel(
        "k", {bufParam("x", DType::F32, false), bufParam("y", DType::F32, true), sizeParam("n")});
    b.p.symbols["N"] = {1, 64};
    b.bind("N", x, 0);                                                                       // 0
    b.line(KernelDefinition{k});                                                             // 1
    b.alloc(t0);                                                                             // 2
    b.call(k, {bufArg(x), bufArg(t0), sizeArg(sym("N") * 4)});                               // 3
    b.alloc(t1);                                                                             // 4
    b.call(k, {bufArg(t0), bufArg(t1), sizeArg(sym("N") * 4)});                              // 5
    b.free(t0);                                                                              // 6
    b.line(ExternKernelOut{"ext", {exIn(t1), exIn(w), exOut(y), exSize(4 * sym("N"))}, {}}); // 7
    b.line(FreeIfNotReused{t1});                                                             // 8
  }
};

void expectError(const WrapperProgram &p, const std::string &msg) {
  Status st = verifyWrapper(p);
  ASSERT_FALSE(st.ok()) << "expected: " << msg;
  EXPECT_EQ(st.error().kind(), ErrorKind::Internal);
  EXPECT_NE(st.error().message().find(msg), std::string::npos) << st.error().message();
}

TEST(VerifyWrapper, ValidChainPasses) {
  Chain c;
  Status st = verifyWrapper(c.b.p);
  EXPECT_TRUE(st.ok()) << st.error().render();
}

TEST(VerifyWrapper, UseBeforeAllocation) {
  Chain c;
  c.b.p.lines.erase(c.b.p.lines.begin() + 2);
  expectError(c.b.p, "line 2 (KernelCall): 't0' is used before it gets storage");
}

TEST(VerifyWrapper, UseAfterFree) {
  Chain c;
  std::swap(c.b.p.lines[5], c.b.p.lines[6]);
  expectError(c.b.p, "line 6 (KernelCall): 't0' is used after its storage is released");
}

TEST(VerifyWrapper, FreedTwice) {
  Chain c;
  c.b.free(c.t0);
  expectError(c.b.p, "line 9 (Free): 't0' is released twice");
}

TEST(VerifyWrapper, AllocatedTwice) {
  Chain c;
  c.b.p.lines.insert(c.b.p.lines.begin() + 3, Allocate{c.t0});
  expectError(c.b.p, "'t0' gets storage twice");
}

TEST(VerifyWrapper, SymbolUsedBeforeBound) {
  Chain c;
  c.b.p.lines.erase(c.b.p.lines.begin());
  expectError(c.b.p, "the shape of 't0' uses symbol 'N' before it is bound");
}

TEST(VerifyWrapper, SymbolBoundTwice) {
  Chain c;
  c.b.bind("N", c.x, 0);
  expectError(c.b.p, "symbol 'N' is bound twice");
}

TEST(VerifyWrapper, BindFromANonInputOrABadDim) {
  Chain c;
  c.b.line(BindSymbol{"M", c.y, 0});
  expectError(c.b.p, "symbol 'M' is bound from 'y', which is not an input");
  Chain d;
  d.b.line(BindSymbol{"M", d.x, 2});
  expectError(d.b.p, "symbol 'M' is bound from dim 2 of 'x', which has rank 2");
}

TEST(VerifyWrapper, KernelArgumentCountKindAndDtype) {
  Chain c;
  std::get<KernelCall>(c.b.p.lines[3]).args.pop_back();
  expectError(c.b.p, "kernel 'k' takes 3 arguments, got 2");
  Chain d;
  std::get<KernelCall>(d.b.p.lines[3]).args[2] = bufArg(d.t0);
  expectError(d.b.p, "kernel 'k' argument 2 ('n') must be a size");
  Chain e;
  std::get<KernelCall>(e.b.p.lines[3]).args[0] = sizeArg(4);
  expectError(e.b.p, "kernel 'k' argument 0 ('x') must be a buffer");
  Chain f;
  f.b.p.buffers[f.t1].dtype = DType::F16;
  expectError(f.b.p, "kernel 'k' argument 1 ('y') must be f32, 't1' is f16");
  Chain g;
  CallArg fl;
  fl.kind = CallArg::Kind::Float;
  std::get<KernelCall>(g.b.p.lines[3]).args[2] = fl;
  expectError(g.b.p, "argument 2 ('n') must be a size");
}

TEST(VerifyWrapper, KernelConfigAndDefinition) {
  Chain c;
  std::get<KernelCall>(c.b.p.lines[3]).config = 5;
  expectError(c.b.p, "kernel 'k' has no config 5 (it has 1)");
  Chain d;
  d.b.p.lines.erase(d.b.p.lines.begin() + 1);
  expectError(d.b.p, "kernel 'k' is called before its KernelDefinition");
  Chain e;
  e.b.line(KernelDefinition{e.k});
  expectError(e.b.p, "kernel 'k' is defined twice");
}

TEST(VerifyWrapper, WritingAnInputOrConstant) {
  Chain c;
  std::get<KernelCall>(c.b.p.lines[3]).args[1] = bufArg(c.x);
  expectError(c.b.p, "argument 1 ('y') is written but 'x' is an input");
  Chain d;
  std::get<ExternKernelOut>(d.b.p.lines[7]).args[2] = exOut(d.w);
  expectError(d.b.p, "extern 'ext' writes 'w', a constant");
}

TEST(VerifyWrapper, FreeingWhatIsNotOwned) {
  Chain c;
  c.b.free(c.x);
  expectError(c.b.p, "'x' is an input and is never released");
  Chain d;
  BufferId v = d.b.temp("v", DType::F32, {4});
  d.b.p.lines.insert(d.b.p.lines.begin() + 6, Reinterpret{v, d.t1, SymInt(0)});
  d.b.p.lines.insert(d.b.p.lines.begin() + 7, Free{v});
  expectError(d.b.p, "'v' is a view and does not own storage to release");
}

TEST(VerifyWrapper, ViewsDieWithTheirBase) {
  Chain c;
  BufferId v = c.b.temp("v", DType::F32, {sym("N"), 4});
  c.b.p.lines.insert(c.b.p.lines.begin() + 6, Reinterpret{v, c.t0, SymInt(0)}); // before Free t0
  c.b.call(c.k, {bufArg(v), bufArg(c.y), sizeArg(4)});
  expectError(c.b.p, "'v' is used after its storage is released");
}

TEST(VerifyWrapper, ExternSignaturesAndSymbols) {
  Chain c;
  c.b.line(ExternKernelOut{"ext", {exIn(c.x), exOut(c.y)}, {}});
  expectError(c.b.p, "extern function 'ext' is called with two different signatures");
  Chain d;
  d.b.line(ExternKernelOut{"ext2", {exIn(d.x), exSym("u")}, {}});
  expectError(d.b.p, "extern 'ext2' defines symbol 'u'; only allocating calls define symbols");
  Chain e;
  BufferId o = e.b.temp("o", DType::F32, {sym("u")});
  e.b.line(ExternKernelAlloc{"ea", {exIn(e.x), exOut(o), exSym("u")}, {"v"}, {}});
  expectError(e.b.p, "its OutSymbol arguments and outSymbols name different symbols");
}

TEST(VerifyWrapper, MultiOutputRules) {
  ProgramBuilder b("multi");
  BufferId x = b.input("x", DType::F32, {sym("N")});
  BufferId a = b.temp("a", DType::F32, {sym("u")});
  BufferId c = b.temp("c", DType::I64, {sym("u")});
  BufferId alias = b.temp("alias", DType::I64, {sym("u")});
  BufferId wrong = b.temp("wrong", DType::F32, {sym("u")});
  b.output("y", DType::F32, {1});
  b.bind("N", x, 0);
  b.line(ExternKernelAlloc{"ea", {exIn(x), exOut(a), exOut(c), exSym("u")}, {"u"}, {}});
  b.line(MultiOutput{c, a, 1});
  b.line(MultiOutput{alias, a, 1});
  EXPECT_TRUE(verifyWrapper(b.p).ok()) << verifyWrapper(b.p).error().render();
  WrapperProgram p1 = b.p;
  p1.lines.push_back(MultiOutput{wrong, a, 1});
  expectError(p1, "'wrong' is f32, output 1 of 'ea' is i64");
  WrapperProgram p2 = b.p;
  p2.lines.push_back(MultiOutput{wrong, a, 2});
  expectError(p2, "extern 'ea' has no output 2");
  WrapperProgram p3 = b.p;
  p3.lines.push_back(MultiOutput{wrong, c, 0});
  expectError(p3, "'c' is not output 0 of extern 'ea'");
  WrapperProgram p4 = b.p;
  p4.lines.push_back(MultiOutput{wrong, x, 0});
  expectError(p4, "'x' is not an output of an allocating extern");
}

TEST(VerifyWrapper, TablesAndOffsets) {
  Chain c;
  c.b.p.buffers[c.t1].name = "t0";
  expectError(c.b.p, "two buffers are named 't0'");
  Chain d;
  d.b.p.buffers[d.t1].name = "t-1";
  expectError(d.b.p, "name 't-1' is not a C identifier");
  Chain e;
  e.b.p.buffers[e.x].arenaOffset = SymInt(0);
  expectError(e.b.p, "buffer 'x' is an input with an arena offset");
  Chain f;
  f.b.p.buffers[f.y].index = 3;
  expectError(f.b.p, "is listed as output 0 but is output 3");
  Chain g;
  g.b.p.kernels[0].configs.clear();
  expectError(g.b.p, "kernel 'k' has no config");
}

TEST(VerifyWrapper, OutputsNeedStorage) {
  ProgramBuilder b("out");
  BufferId x = b.input("x", DType::F32, {sym("N")});
  BufferId o = b.output("o", DType::F32, {sym("u")});
  b.bind("N", x, 0);
  expectError(b.p, "the shape of 'o' uses symbol 'u' before it is bound");
  b.line(ExternKernelAlloc{"ea", {exIn(x), exOut(o), exSym("u")}, {"u"}, {}});
  EXPECT_TRUE(verifyWrapper(b.p).ok()) << verifyWrapper(b.p).error().render();
  b.line(ExternKernelAlloc{"ea", {exIn(x), exOut(o), exSym("u")}, {"u"}, {}});
  expectError(b.p, "extern 'ea' allocates 'o' twice");
}

TEST(VerifyWrapper, ExternPlacesMatchTheProgram) {
  // A device extern in a CPU program, or an allocating one anywhere, is not placeable.
  Chain c;
  std::get<ExternKernelOut>(c.b.p.lines[7]).place = ExternPlace::kDevice;
  expectError(c.b.p, "line 7 (ExternKernelOut): extern 'ext' is placed on the device in a cpu "
                     "program");
  c.b.p.device = "cuda";
  EXPECT_TRUE(verifyWrapper(c.b.p).ok()) << verifyWrapper(c.b.p).error().render();

  ProgramBuilder b("out");
  b.p.device = "cuda";
  BufferId x = b.input("x", DType::F32, {sym("N")});
  BufferId o = b.output("o", DType::F32, {sym("u")});
  b.bind("N", x, 0);
  ExternKernelAlloc alloc{"ea", {exIn(x), exOut(o), exSym("u")}, {"u"}, {}};
  alloc.place = ExternPlace::kDevice;
  b.line(alloc);
  expectError(b.p, "allocating extern 'ea' is placed on the device; allocating calls run on the "
                   "host");
}

} // namespace
} // namespace coil::wrapper::testing
