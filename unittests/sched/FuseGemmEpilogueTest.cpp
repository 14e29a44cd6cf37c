// GEMM + epilogue fusion (sched/FuseGemmEpilogue.h): which GEMMs fuse, and that the epilogue
// programs compute what the kernels they replace compute. Each graph (coil's text format, random
// weights) is compiled for CUDA up to the schedule, the pass runs, and for every fused kernel
// the epilogue program is evaluated on the host (evt/EvtEval.h) at every output point, with the
// accumulator computed from the operands, and compared with the Loop IR evaluator's value of
// the node the kernel stores. (That CUTLASS runs epilogue programs as specified is checked on
// the GPU: test/evt's corpus and test/gemm/check.py --mode verify.)
#include "sched/FuseGemmEpilogue.h"

#include "driver/Pipeline.h"
#include "evt/EvtEval.h"
#include "ir/Parser.h"
#include "lower/LoopEval.h"
#include "sched/Schedule.h"

#include <cmath>
#include <gtest/gtest.h>
#include <random>
#include <sstream>

using namespace coil;

namespace {

/// `constant DT[shape] [...]` text of random multiples of 1/64 in [-1, 1] (exact in every dtype).
std::string randomConstant(const std::string &name, const std::string &dt,
                           const std::vector<int> &shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-64, 64);
  int64_t n = 1;
  std::string dims;
  for (int s : shape) {
    n *= s;
    dims += (dims.empty() ? "" : ", ") + std::to_string(s);
  }
  std::ostringstream os;
  os << "  %" << name << " = constant " << dt << "[" << dims << "] [";
  for (int64_t i = 0; i < n; ++i) os << (i ? ", " : "") << d(rng) / 64.0;
  os << "]\n";
  return os.str();
}

struct Fused {
  std::unique_ptr<Compilation> c;
  loop::LoopProgram loops;
  sched::Schedule schedule;
  int fused = 0;
};

Fused fuse(const std::string &text) {
  Fused f;
  auto g = parseGraph(text, "<test>");
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().render());
  if (!g.ok()) return f;
  CompileOptions o;
  o.device = "cuda";
  o.cudaArchs = {"sm_90a"};
  o.gemm = "cublaslt"; // the schedule before fusion; the pass runs below
  auto c = compileGraph(std::move(*g), o);
  EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().render());
  if (!c.ok()) return f;
  f.c = std::move(*c);
  f.loops = f.c->loops;
  auto s = sched::scheduleProgram(f.loops);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().render());
  if (!s.ok()) return f;
  f.schedule = std::move(*s);
  sched::GemmFusionOptions fo;
  fo.enabled = true;
  f.fused = sched::fuseGemmEpilogues(f.schedule, fo);
  return f;
}

/// Random inputs for the graph's inputs, with every size symbol at `symbol`.
std::vector<Tensor> randomInputs(const loop::LoopProgram &p, int64_t symbol, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-64, 64);
  std::vector<Tensor> in;
  for (loop::NodeId id : p.inputs) {
    const loop::Node &n = p.nodes[size_t(id)];
    Shape shape;
    for (const SymInt &s : n.shape) shape.push_back(s.isConstant() ? s.constant() : symbol);
    Tensor t(n.dtype, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.setDouble(i, d(rng) / 64.0);
    in.push_back(std::move(t));
  }
  return in;
}

/// Checks every fused kernel of `f` against the Loop IR evaluator; returns the worst error
/// relative to the largest reference magnitude.
double checkFused(const Fused &f, int64_t symbol) {
  double worst = 0;
  std::vector<Tensor> inputs = randomInputs(f.loops, symbol, 7);
  for (const sched::Step &st : f.schedule.steps) {
    const auto *k = std::get_if<sched::Kernel>(&st);
    if (!k || !k->gemm) continue;
    const sched::GemmMainloop &g = *k->gemm;
    loop::NodeId store = k->phases[0].stores[0].node;
    loop::LoopProgram ref = f.loops;
    ref.outputs = {g.a, g.b};
    ref.outputs.insert(ref.outputs.end(), g.inputs.begin(), g.inputs.end());
    ref.outputs.push_back(store);
    ref.outputNames.clear();
    for (loop::NodeId n : ref.outputs) ref.outputNames.push_back(f.loops.nodes[size_t(n)].name);
    auto values = loop::evaluateLoopProgram(ref, inputs);
    EXPECT_TRUE(values.ok()) << (values.ok() ? "" : values.error().render());
    if (!values.ok()) return 1e9;
    const Tensor &a = (*values)[0], &b = (*values)[1], &want = values->back();
    int64_t K = g.k.constant(), N = g.n.constant(), M = a.numel() / K;
    EXPECT_EQ(want.numel(), M * N);
    double scale = 1e-30, err = 0;
    for (int64_t i = 0; i < want.numel(); ++i)
      scale = std::max(scale, std::fabs(want.getDouble(i)));
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0;
        for (int64_t kk = 0; kk < K; ++kk)
          acc += a.getDouble(g.columnMajorA ? kk * M + m : m * K + kk) *
                 b.getDouble(g.rowMajorB ? kk * N + n : n * K + kk);
        auto load = [&](const evt::Node &node) {
          size_t which = size_t(std::stoi(node.name.substr(2))) + 2;
          const Tensor &t = (*values)[which];
          return t.getDouble(m * node.stride.m + n * node.stride.n);
        };
        std::vector<double> out = evt::evaluateOutputs(g.epilogue, g.plan, acc, load);
        Tensor d(want.dtype(), {1});
        d.setDouble(0, out.at(0)); // rounded to the stored dtype, as the collective stores D
        err = std::max(err, std::fabs(d.getDouble(0) - want.getDouble(m * N + n)));
      }
    worst = std::max(worst, err / std::max(1.0, scale));
  }
  return worst;
}

const char *kHeader = "graph @g(%x: DT[B, 24, 32]EXTRA) -> (%out) {\n  symbol B in [1, 64]\n";

std::string graph(const std::string &dt, const std::string &extraInputs, const std::string &body) {
  std::string h = kHeader;
  h.replace(h.find("DT"), 2, dt);
  h.replace(h.find("EXTRA"), 5, extraInputs);
  return h + randomConstant("W", dt, {32, 40}, 1) + randomConstant("b", dt, {40}, 2) + body + "}\n";
}

} // namespace

TEST(FuseGemmEpilogue, BiasGeluResidual) {
  Fused f = fuse(graph("bf16", ", %r: bf16[B, 24, 40]",
                       "  %y = MatMul(%x, %W) : bf16[B, 24, 40]\n"
                       "  %yb = Add(%y, %b) : bf16[B, 24, 40]\n"
                       "  %g = Gelu(%yb) : bf16[B, 24, 40]\n"
                       "  %out = Add(%g, %r) : bf16[B, 24, 40]\n"));
  ASSERT_EQ(f.fused, 1) << sched::fusionReport(f.schedule);
  EXPECT_LE(checkFused(f, 3), 1.5e-2);
}

TEST(FuseGemmEpilogue, TransposedWeightsColumnScaleAndClip) {
  std::string text = "graph @g(%x: f16[M, 32], %s: f16[M, 1]) -> (%out) {\n"
                     "  symbol M in [1, 4096]\n" +
                     randomConstant("W", "f16", {40, 32}, 3) + randomConstant("b", "f16", {40}, 4) +
                     "  %lo = constant f16[] [-0.5]\n  %hi = constant f16[] [0.75]\n"
                     "  %y = Gemm(%x, %W, %b) {transB = 1} : f16[M, 40]\n"
                     "  %ys = Mul(%y, %s) : f16[M, 40]\n"
                     "  %out = Clip(%ys, %lo, %hi) : f16[M, 40]\n}\n";
  Fused f = fuse(text);
  ASSERT_EQ(f.fused, 1) << sched::fusionReport(f.schedule);
  EXPECT_LE(checkFused(f, 37), 4e-3);
}

TEST(FuseGemmEpilogue, SwiGluFusesOneOfTwoGemms) {
  Fused f = fuse(graph("bf16", "",
                       randomConstant("W2", "bf16", {32, 40}, 5) +
                           "  %a = MatMul(%x, %W) : bf16[B, 24, 40]\n"
                           "  %c = MatMul(%x, %W2) : bf16[B, 24, 40]\n"
                           "  %sa = Sigmoid(%a) : bf16[B, 24, 40]\n"
                           "  %silu = Mul(%a, %sa) : bf16[B, 24, 40]\n"
                           "  %out = Mul(%silu, %c) : bf16[B, 24, 40]\n"));
  ASSERT_EQ(f.fused, 1) << sched::fusionReport(f.schedule);
  ASSERT_EQ(f.schedule.gemmNotes.size(), 2u);
  EXPECT_NE(f.schedule.gemmNotes[1].find("its reader already computes a GEMM"), std::string::npos)
      << f.schedule.gemmNotes[1];
  EXPECT_LE(checkFused(f, 2), 1.5e-2);
}

TEST(FuseGemmEpilogue, BiasReluCastToF32AndWhere) {
  Fused f = fuse(graph("bf16", "",
                       "  %y = MatMul(%x, %W) : bf16[B, 24, 40]\n"
                       "  %yb = Add(%y, %b) : bf16[B, 24, 40]\n"
                       "  %r = Relu(%yb) : bf16[B, 24, 40]\n"
                       "  %t = Tanh(%r) : bf16[B, 24, 40]\n"
                       "  %half = constant bf16[] [0.25]\n"
                       "  %big = Greater(%t, %half) : bool[B, 24, 40]\n"
                       "  %w = Where(%big, %t, %r) : bf16[B, 24, 40]\n"
                       "  %out = Cast(%w) {to = 1} : f32[B, 24, 40]\n"));
  ASSERT_EQ(f.fused, 1) << sched::fusionReport(f.schedule);
  EXPECT_LE(checkFused(f, 4), 1.5e-2);
}

TEST(FuseGemmEpilogue, TransposedAAndAProductReadThroughAReshape) {
  // Gemm with transA on a 2-D input; its product [24, 40] is read as [6, 4, 40] with a per-row
  // scale of that shape, as exporters write Linear layers of 3-D inputs.
  std::string one = "graph @g(%x: bf16[32, 24]) -> (%out) {\n" +
                    randomConstant("W", "bf16", {32, 40}, 8) +
                    randomConstant("s", "bf16", {6, 4, 1}, 9) +
                    "  %y = Gemm(%x, %W) {transA = 1} : bf16[24, 40]\n"
                    "  %shape = constant i64[3] [6, 4, 40]\n"
                    "  %y3 = Reshape(%y, %shape) : bf16[6, 4, 40]\n"
                    "  %t = Tanh(%y3) : bf16[6, 4, 40]\n"
                    "  %out = Mul(%t, %s) : bf16[6, 4, 40]\n}\n";
  Fused f = fuse(one);
  ASSERT_EQ(f.fused, 1) << sched::fusionReport(f.schedule);
  EXPECT_LE(checkFused(f, 1), 1.5e-2);
}

TEST(FuseGemmEpilogue, UnfusableGemmsSayWhy) {
  // k = 12 is not a multiple of 8; the second graph is f32.
  std::string text = "graph @g(%x: bf16[M, 12]) -> (%out) {\n  symbol M in [1, 64]\n" +
                     randomConstant("W", "bf16", {12, 16}, 6) +
                     "  %y = MatMul(%x, %W) : bf16[M, 16]\n"
                     "  %out = Relu(%y) : bf16[M, 16]\n}\n";
  Fused f = fuse(text);
  EXPECT_EQ(f.fused, 0);
  ASSERT_EQ(f.schedule.gemmNotes.size(), 1u);
  EXPECT_NE(f.schedule.gemmNotes[0].find("k and n must be constant multiples of 8"),
            std::string::npos)
      << f.schedule.gemmNotes[0];
  Fused g = fuse(graph("f32", "",
                       "  %y = MatMul(%x, %W) : f32[B, 24, 40]\n"
                       "  %out = Tanh(%y) : f32[B, 24, 40]\n"));
  EXPECT_EQ(g.fused, 0);
  ASSERT_EQ(g.schedule.gemmNotes.size(), 1u);
  EXPECT_NE(g.schedule.gemmNotes[0].find("f32"), std::string::npos);
}
