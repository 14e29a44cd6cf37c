#include "evt/EvtBudget.h"
#include "evt/EvtEmit.h"
#include "evt/EvtParser.h"
#include "evt/EvtPasses.h"

#include <gtest/gtest.h>
#include <map>
#include <random>

using namespace coil;
using namespace coil::evt;

namespace {

Expected<Program> parse(const std::string &src, bool batched = false) {
  ParseOptions o;
  o.problem = {256, 512, batched ? 3 : 1};
  o.batched = batched;
  return parseEpilogue(src, "t.py", o);
}

struct Compiled {
  Program p;
  VisitorPlan plan;
  std::vector<std::string> notes;
};

Compiled compile(const std::string &src, Arch arch) {
  auto p = parse(src);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().render());
  Compiled c{std::move(p).value(), {}, {}};
  CompileOptions o;
  o.arch = arch;
  auto plan = compileEpilogue(c.p, o, &c.notes);
  EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().render());
  if (plan.ok()) c.plan = std::move(plan).value();
  return c;
}

std::string emit(const Compiled &c, Arch arch) {
  EmitOptions eo;
  eo.arch = arch;
  auto s = emitCutlass(c.p, c.plan, eo);
  EXPECT_TRUE(s.ok());
  return s.ok() ? s.value() : "";
}

} // namespace

TEST(EvtParser, ErrorsCarryLineAndColumn) {
  auto p = parse("def epi(accum):\n    D = accum + y\n    return D\n");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().render(), "error: t.py:2:17: name 'y' is not defined");
  auto q = parse("def epi(accum):\n    D = -accum\n    E = D ** 2\n    return D, E\n");
  ASSERT_TRUE(q.ok()) << q.error().render();
}

TEST(EvtParser, MultiEdgeKeepsOperandOrder) {
  auto p = parse("def epi(accum, C):\n    x = accum - C\n    D = x * x\n    return D\n");
  ASSERT_TRUE(p.ok());
  const Program &g = p.value();
  int d = g.outputs[0].value;
  ASSERT_EQ(g.at(d).operands.size(), 2u);
  EXPECT_EQ(g.at(d).operands[0], g.at(d).operands[1]);
  int x = g.at(d).operands[0];
  EXPECT_EQ(g.at(x).op, Op::Sub);
  EXPECT_EQ(g.at(g.at(x).operands[0]).kind, Kind::Accum); // accum - C, not C - accum
}

TEST(EvtPasses, SeedProgramIsRewrittenOnSm90) {
  Compiled c =
      compile("def e(accum):\n    D = accum\n    E = D + 1\n    return D, E\n", Arch::Sm90);
  ASSERT_GE(c.p.root, 0);
  EXPECT_EQ(c.p.at(c.p.root).op, Op::First);
  EXPECT_EQ(c.p.at(c.p.dValue).kind, Kind::Accum);
  EXPECT_EQ(c.notes.size(), 2u);
  ASSERT_EQ(c.p.outputStores.size(), 2u);
  EXPECT_EQ(c.p.at(c.p.outputStores[1]).kind, Kind::AuxStore);
  std::string code = emit(c, Arch::Sm90);
  EXPECT_EQ(code.find("EVTD"), std::string::npos);
  EXPECT_NE(code.find("using Callbacks = T"), std::string::npos);
}

TEST(EvtPasses, EveryOutputReachesTheRoot) {
  for (Arch arch : {Arch::Sm80, Arch::Sm90}) {
    Compiled c =
        compile("def e(accum, C):\n    E = C * 2\n    D = accum + 1\n    return D, E\n", arch);
    EXPECT_TRUE(verify(c.p, true).ok());
    // Cut the join: the store of E becomes unreachable, which verify must catch.
    Program broken = c.p;
    broken.at(broken.root).operands.resize(1);
    Status s = verify(broken, true);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().message().find("ancestor of the root"), std::string::npos);
  }
}

TEST(EvtPasses, SmallestRegionForDagEdgeCase) {
  // CUTLASS's DAG2Tree loses the edge a -> D here; coil packs {a, l, D} into one DAG.
  Compiled c =
      compile("def e(accum):\n    a = accum * 2\n    l = a + accum\n    D = l + a\n    return D\n",
              Arch::Sm90);
  ASSERT_EQ(c.plan.regions.size(), 1u);
  EXPECT_EQ(c.plan.regions[0].members.size(), 3u);
  std::string code = emit(c, Arch::Sm90);
  EXPECT_NE(code.find("Sm90TopologicalVisitor"), std::string::npos);
  // The final add has two edges.
  EXPECT_NE(code.find("cute::seq<3, 2>>"), std::string::npos) << code;
}

TEST(EvtPasses, LeafSquareNeedsNoDag) {
  Compiled c = compile("def e(accum):\n    D = accum * accum\n    return D\n", Arch::Sm90);
  EXPECT_TRUE(c.plan.regions.empty());
  std::string code = emit(c, Arch::Sm90);
  EXPECT_NE(code.find("Sm90EVT<N1_D, N0_accum, N0_accum>"), std::string::npos) << code;
}

TEST(EvtPasses, CseMergesCommutedOperands) {
  Compiled c = compile("def e(accum, C):\n    a = relu(accum + C)\n    b = relu(C + accum)\n    D "
                       "= a + b\n    return D\n",
                       Arch::Sm90);
  int d = c.p.dValue;
  EXPECT_EQ(c.p.at(d).operands[0], c.p.at(d).operands[1]);
}

TEST(EvtPasses, RulesNameTheVariable) {
  auto p = parse("def e(accum):\n    r = sum(accum, dim=1)\n    D = accum + r\n    return D, r\n");
  ASSERT_TRUE(p.ok());
  CompileOptions o;
  auto plan = compileEpilogue(p.value(), o);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().message().find("'r'"), std::string::npos);
  EXPECT_NE(plan.error().message().find("rule reduction-use"), std::string::npos);
}

TEST(EvtEmit, DeterministicAndCollisionFree) {
  std::string src =
      "def e(accum, x_1, x1, element_c: \"1,N\"):\n    ElementC = x_1 + x1\n"
      "    D = accum + ElementC * element_c\n    m = max(D, dim=0)\n    return D, ElementC, m\n";
  for (Arch arch : {Arch::Sm80, Arch::Sm90}) {
    Compiled a = compile(src, arch), b = compile(src, arch);
    std::string ca = emit(a, arch), cb = emit(b, arch);
    EXPECT_EQ(ca, cb);
    // Each alias is defined exactly once.
    std::map<std::string, int> defs;
    size_t pos = 0;
    while ((pos = ca.find("\nusing ", pos)) != std::string::npos) {
      size_t e = ca.find(" =", pos + 7);
      ++defs[ca.substr(pos + 7, e - pos - 7)];
      pos = e;
    }
    for (auto &[name, n] : defs) EXPECT_EQ(n, 1) << name;
    // The max's identity, in the reduction's compute type (float).
    EXPECT_NE(ca.find("-cutlass::platform::numeric_limits<float>::infinity()"), std::string::npos);
  }
}

TEST(EvtBuilder, RandomDagsCompileWithEveryStoreReachable) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 500; ++trial) {
    Builder b({128, 256, 1}, false);
    std::vector<int> vals{b.accum(), b.input("C", true, true, false, DType::BF16),
                          b.input("bias", false, true, false, DType::BF16), b.literal(0.5)};
    int n = 2 + static_cast<int>(rng() % 8);
    for (int i = 0; i < n; ++i) {
      int x = vals[rng() % vals.size()], y = vals[rng() % vals.size()];
      Op ops[] = {Op::Add, Op::Mul, Op::Sub, Op::Max};
      vals.push_back(b.compute(ops[rng() % 4], {x, y}));
    }
    int outs = 1 + static_cast<int>(rng() % 3);
    b.output("D", vals.back());
    for (int k = 1; k < outs; ++k) b.output("E" + std::to_string(k), vals[4 + rng() % n]);
    if (rng() % 2)
      b.output("r",
               b.reduce(rng() % 2 ? RedFn::Sum : RedFn::Max, vals[4 + rng() % n], rng() % 2, true));
    auto p = b.finish();
    ASSERT_TRUE(p.ok());
    for (Arch arch : {Arch::Sm80, Arch::Sm90}) {
      Program q = p.value();
      CompileOptions o;
      o.arch = arch;
      auto plan = compileEpilogue(q, o);
      ASSERT_TRUE(plan.ok()) << plan.error().render() << "\n" << printProgram(q);
      EXPECT_TRUE(verify(q, true).ok());
      EmitOptions eo;
      eo.arch = arch;
      auto code = emitCutlass(q, plan.value(), eo);
      EXPECT_TRUE(code.ok()) << code.error().render() << "\n" << printProgram(q);
    }
  }
}

TEST(EvtBuilder, KindsComeFromStrides) {
  Builder b({128, 256, 1}, false);
  int acc = b.accum();
  int colMajor = b.inputStrided("Xt", {1, 128, 128 * 256}, DType::BF16);
  int row = b.inputStrided("r", {0, 1, 0}, DType::F32);
  int col = b.inputStrided("c", {1, 0, 0}, DType::F32);
  int x = b.compute(Op::Add, {b.compute(Op::Mul, {acc, colMajor}), b.compute(Op::Sub, {row, col})});
  b.output("D", x);
  auto p = b.finish();
  ASSERT_TRUE(p.ok());
  Program q = p.value();
  CompileOptions o;
  auto plan = compileEpilogue(q, o);
  ASSERT_TRUE(plan.ok()) << plan.error().render();
  EXPECT_EQ(q.at(colMajor).kind, Kind::AuxLoad);
  EXPECT_EQ(q.at(row).kind, Kind::RowBcast);
  EXPECT_EQ(q.at(col).kind, Kind::ColBcast);
  EmitOptions eo;
  auto code = emitCutlass(q, plan.value(), eo);
  ASSERT_TRUE(code.ok());
  EXPECT_NE(code.value().find("cute::Stride<cute::_1, int64_t, int64_t>"), std::string::npos);
  EXPECT_NE(code.value().find("{cute::_1{}, int64_t(p.M), int64_t(p.M) * p.N}"), std::string::npos)
      << code.value();

  Builder bad({128, 256, 1}, false);
  int a2 = bad.accum();
  int strided = bad.inputStrided("S", {512, 2, 0}, DType::BF16);
  bad.output("D", bad.compute(Op::Add, {a2, strided}));
  Program r = bad.finish().value();
  auto plan2 = compileEpilogue(r, o);
  ASSERT_FALSE(plan2.ok());
  EXPECT_NE(plan2.error().message().find("rule load-stride"), std::string::npos);
}

TEST(EvtPasses, ReductionsAreSplicedAsPassThrough) {
  Compiled c = compile("def e(accum, C):\n    x = accum + C\n    r = sum(x, dim=0)\n"
                       "    c = max(x, dim=1)\n    D = x * 0.5\n    return D, r, c\n",
                       Arch::Sm90);
  // x -> r -> c -> D: a chain, so no DAG region and no join.
  EXPECT_TRUE(c.plan.regions.empty());
  EXPECT_NE(c.p.at(c.p.root).op, Op::First);
  int r = c.p.outputStores[1], cc = c.p.outputStores[2];
  EXPECT_EQ(c.p.at(r).kind, Kind::RowRed);
  EXPECT_EQ(c.p.at(cc).kind, Kind::ColRed);
  EXPECT_EQ(c.p.at(cc).operands[0], r);
  EXPECT_EQ(c.p.at(c.p.dValue).operands[0], cc);
}

TEST(EvtPasses, DeadCodeAndConstantsDisappear) {
  Compiled c = compile("def e(accum, C, unused: \"1,N\"):\n    dead = exp(C)\n"
                       "    D = accum * (2 * 3) + 1 / 4\n    return D\n",
                       Arch::Sm80);
  std::string ir = printProgram(c.p);
  EXPECT_EQ(ir.find("'C'"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("unused"), std::string::npos) << ir;
  EXPECT_NE(ir.find("literal 6"), std::string::npos) << ir;
  EXPECT_NE(ir.find("literal 0.25"), std::string::npos) << ir;
}

TEST(EvtPasses, Sm80StoresDAsAnAuxStore) {
  Compiled c =
      compile("def e(accum):\n    D = accum\n    E = D + 1\n    return D, E\n", Arch::Sm80);
  EXPECT_EQ(c.p.dValue, -1);
  ASSERT_EQ(c.p.outputStores.size(), 2u);
  int d = c.p.outputStores[0], e = c.p.outputStores[1];
  EXPECT_EQ(c.p.at(d).kind, Kind::AuxStore);
  // D's store feeds E's computation, so the root is E's store: one chain, nothing joined.
  EXPECT_EQ(c.p.root, e);
  std::string code = emit(c, Arch::Sm80);
  EXPECT_NE(code.find("VisitorAuxStore"), std::string::npos);
}

TEST(EvtParser, AnnotationsAndDims) {
  auto p = parse("def e(accum, a: \"1,N,L\", b: \"M,1\", s: \"1,1,L\", t: \"scalar:f16\"):\n"
                 "    D = accum + a + b + s + t\n    r = sum(D, dim=(-2, -3))\n    return D, r\n",
                 true);
  ASSERT_TRUE(p.ok()) << p.error().render();
  const Program &g = p.value();
  EXPECT_EQ(g.at(g.params[1]).stride, (Strides{0, 1, 512}));
  EXPECT_EQ(g.at(g.params[2]).stride, (Strides{1, 0, 0}));
  EXPECT_EQ(g.at(g.params[3]).stride, (Strides{0, 0, 1}));
  EXPECT_EQ(g.at(g.params[4]).dtype, DType::F16);
  EXPECT_EQ(g.at(g.outputs[1].value).kind, Kind::ScalarRed);
  auto bad =
      parse("def e(accum):\n    D = accum\n    r = sum(accum, dim=-1)\n    return D, r\n", true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("batch dimension L"), std::string::npos);
}

TEST(EvtPasses, BetaTimesSourceFusesOnSm90Only) {
  std::string src = "def e(accum, C, beta: \"scalar\"):\n    D = accum + C * beta\n    return D\n";
  Compiled c90 = compile(src, Arch::Sm90);
  const Node &d = c90.p.at(c90.p.dValue);
  EXPECT_EQ(d.op, Op::Fma);
  EXPECT_EQ(c90.p.at(d.operands[0]).name, "beta");
  EXPECT_EQ(c90.p.at(d.operands[1]).kind, Kind::Src);
  std::string code = emit(c90, Arch::Sm90);
  EXPECT_NE(code.find("Sm90EVT<N4_D, N2_beta, N1_C, N0_accum>"), std::string::npos) << code;
  Compiled c80 = compile(src, Arch::Sm80);
  EXPECT_EQ(c80.p.at(c80.p.at(c80.p.root).operands[0]).op, Op::Add);
  // A product with a second user stays as it is.
  Compiled shared = compile("def e(accum, C, beta: \"scalar\"):\n    y = C * beta\n"
                            "    D = accum + y\n    E = y\n    return D, E\n",
                            Arch::Sm90);
  EXPECT_EQ(shared.p.at(shared.p.dValue).op, Op::Add);
}

TEST(EvtEmit, Sm80ScalarReductionAtomicIsAppliedOncePerWarp) {
  // CUTLASS's sm80 scalar reduction leaves the warp's total in every lane before its atomic, so
  // the emitted atomic must act in the warp's first lane only (else a sum counts 32 times).
  std::string src = "def e(accum):\n    D = accum * 2\n    s = sum(accum, dim=(0, 1))\n"
                    "    return D, s\n";
  std::string code = emit(compile(src, Arch::Sm80), Arch::Sm80);
  EXPECT_NE(code.find("VisitorScalarReduction<\n    cutlass::plus, coil_warp_leader_atomic_add,"),
            std::string::npos)
      << code;
  EXPECT_NE(code.find("if (cutlass::arch::LaneId() == 0) cutlass::atomic_add<T>{}(ptr, value);"),
            std::string::npos)
      << code;
  // Sm90's scalar reduction issues one atomic per tile itself.
  std::string code90 = emit(compile(src, Arch::Sm90), Arch::Sm90);
  EXPECT_EQ(code90.find("coil_warp_leader"), std::string::npos) << code90;
  EXPECT_NE(code90.find("cutlass::plus, cutlass::atomic_add, float"), std::string::npos) << code90;
  // Row and column reductions keep CUTLASS's atomics (one writing lane per row or column).
  std::string row = emit(compile("def e(accum):\n    D = accum\n    r = sum(accum, dim=0)\n"
                                 "    return D, r\n",
                                 Arch::Sm80),
                         Arch::Sm80);
  EXPECT_EQ(row.find("coil_warp_leader"), std::string::npos) << row;
}

TEST(EvtEmit, ReductionsAccumulateInFloatUnderANarrowComputeType) {
  // A bf16 accumulator would lose a sum's low bits, and CUTLASS's sm80 reduction visitors
  // initialise their identity from an int, which bfloat16_t cannot take implicitly.
  auto p = parse("def e(accum):\n    D = accum / 3\n    m = max(D, dim=0)\n"
                 "    c = sum(D, dim=1)\n    s = sum(D, dim=(0, 1))\n    return D, m, c, s\n");
  ASSERT_TRUE(p.ok()) << p.error().render();
  for (Arch arch : {Arch::Sm80, Arch::Sm90}) {
    Compiled c{p.value(), {}, {}};
    c.p.compute = DType::BF16;
    CompileOptions o;
    o.arch = arch;
    auto plan = compileEpilogue(c.p, o, &c.notes);
    ASSERT_TRUE(plan.ok()) << plan.error().render();
    c.plan = std::move(plan).value();
    std::string code = emit(c, arch);
    EXPECT_NE(code.find("using ElementCompute = cutlass::bfloat16_t;"), std::string::npos);
    // Row, column and scalar reductions: output f32, accumulator float.
    size_t n = 0;
    for (size_t pos = 0; (pos = code.find("float, float, RoundStyle", pos)) != std::string::npos;
         ++pos)
      ++n;
    EXPECT_EQ(n, 3u) << code;
    EXPECT_EQ(code.find("float, ElementCompute, RoundStyle"), std::string::npos) << code;
    EXPECT_NE(code.find("-cutlass::platform::numeric_limits<float>::infinity()"), std::string::npos)
        << code;
    EXPECT_NE(code.find("float(0)"), std::string::npos) << code;
  }
}

// ---- the shared-memory budget (issue 15, defect 9; src/evt/EvtBudget.h)

namespace {

const char *kFiveAux = R"(def epi(accum, C, bias: "1,N", s: "M,1"):
    a = accum + bias
    b = a * s
    c = relu(a) + C
    d = b - bias
    e = c * s
    D = a + b
    return D, a, b, c, d, e
)";

Expected<VisitorPlan> compileWith(Program &p, Arch arch, const std::map<std::string, DType> &dt,
                                  DType inputs = DType::BF16) {
  CompileOptions o;
  o.arch = arch;
  o.dtypes = dt;
  o.inputs = inputs;
  return compileEpilogue(p, o);
}

} // namespace

TEST(EvtBudget, Sm90SizesAreCutlasss) {
  // Sizes nvcc reported for these programs' CollectiveEpilogue::SharedStorage and mainloop
  // stages (CUTLASS 4.2, test/evt/compile_corpus.py checks every corpus program so).
  auto p = parse("def epi(accum):\n    E = accum + 1\n    D = E * 2\n    return D, E\n");
  ASSERT_TRUE(p.ok());
  auto plan = compileWith(*p, Arch::Sm90, {});
  ASSERT_TRUE(plan.ok()) << plan.error().render();
  SmemBudget b = smemBudget(*p, *plan, Arch::Sm90, DType::BF16);
  EXPECT_EQ(b.epilogueBytes, 33280); // D's 2 stages, E's 2 stages, barriers, 512-aligned
  EXPECT_EQ(b.collectiveBytes, 16384);
  EXPECT_EQ(b.stageBytes, 32784);
  EXPECT_EQ(b.stages, 6);
  EXPECT_TRUE(b.fits());
  auto q = parse(kFiveAux);
  ASSERT_TRUE(q.ok());
  std::map<std::string, DType> near = {{"a", DType::F32},
                                       {"b", DType::BF16},
                                       {"c", DType::BF16},
                                       {"d", DType::F32},
                                       {"e", DType::BF16}};
  auto qplan = compileWith(*q, Arch::Sm90, near);
  ASSERT_TRUE(qplan.ok()) << qplan.error().render();
  SmemBudget qb = smemBudget(*q, *qplan, Arch::Sm90, DType::BF16);
  EXPECT_EQ(qb.epilogueBytes, 150528); // corpus a67
  EXPECT_EQ(qb.stages, 2);
  ASSERT_FALSE(qb.nodes.empty());
  EXPECT_EQ(q->at(qb.nodes[0].first).dtype, DType::F32); // largest first
  EXPECT_EQ(qb.nodes[0].second, 32768);
}

TEST(EvtBudget, EpilogueThatLeavesTheMainloopOneStageIsRejectedOnSm90Only) {
  std::map<std::string, DType> f32 = {{"a", DType::F32},
                                      {"b", DType::F32},
                                      {"c", DType::F32},
                                      {"d", DType::F32},
                                      {"e", DType::F32}};
  auto p = parse(kFiveAux);
  ASSERT_TRUE(p.ok());
  auto plan = compileWith(*p, Arch::Sm90, f32);
  ASSERT_FALSE(plan.ok());
  std::string e = plan.error().render();
  EXPECT_EQ(plan.error().kind(), ErrorKind::User);
  EXPECT_NE(e.find("error: t.py: the epilogue needs "), std::string::npos) << e;
  EXPECT_NE(e.find("leaves the GEMM's mainloop 0 stage(s) of 32784 bytes"), std::string::npos) << e;
  EXPECT_NE(e.find("CUTLASS needs at least 2 (shared-memory budget)"), std::string::npos) << e;
  EXPECT_NE(e.find("aux_store 'a' (f32, 32768 bytes)"), std::string::npos) << e;
  // The same program fits sm80 (its visitors store without shared memory)...
  auto q = parse(kFiveAux);
  auto qplan = compileWith(*q, Arch::Sm80, f32);
  ASSERT_TRUE(qplan.ok()) << qplan.error().render();
  SmemBudget b = smemBudget(*q, *qplan, Arch::Sm80, DType::BF16);
  EXPECT_EQ(b.epilogueBytes, 8720);
  EXPECT_EQ(b.totalBytes, 49152);
  EXPECT_TRUE(b.fits());
  // ... and on sm90 with f32 A and B the tile is 128x128x32: the same bytes per stage.
  auto r = parse(kFiveAux);
  EXPECT_FALSE(compileWith(*r, Arch::Sm90, f32, DType::F32).ok());
}

TEST(EvtBudget, Sm80RowReductionsUseSharedMemory) {
  auto p = parse("def epi(accum):\n    D = accum\n    r = sum(accum, dim=0)\n    return D, r\n");
  ASSERT_TRUE(p.ok());
  auto plan = compileWith(*p, Arch::Sm80, {});
  ASSERT_TRUE(plan.ok()) << plan.error().render();
  SmemBudget b = smemBudget(*p, *plan, Arch::Sm80, DType::BF16);
  EXPECT_EQ(b.epilogueBytes, 12800); // nvcc: GemmKernel::Epilogue::SharedStorage
  EXPECT_EQ(b.totalBytes, 49152);
}

TEST(EvtBudget, KernelProgramAssertsTheModel) {
  Compiled c =
      compile("def epi(accum):\n    E = accum + 1\n    D = E * 2\n    return D, E\n", Arch::Sm90);
  EmitOptions eo;
  eo.arch = Arch::Sm90;
  eo.kernel = true;
  auto text = emitCutlass(c.p, c.plan, eo);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("static_assert(sizeof(typename CollectiveEpilogue::SharedStorage) <= 33280"),
            std::string::npos);
  EXPECT_NE(text->find("#ifdef COIL_EVT_CHECK_SMEM_EXACT\nstatic_assert(sizeof(typename "
                       "CollectiveEpilogue::SharedStorage) == 33280"),
            std::string::npos);
  EXPECT_NE(text->find("static_assert(CollectiveMainloop::DispatchPolicy::Stages == 6"),
            std::string::npos);
}
