// The Loop IR text (lower/LoopParser.h): print -> parse -> print is byte-identical and the parsed
// program verifies, for the Loop IR of every test model (as `coil inspect --loops` prints it, for
// the CPU and for CUDA) and of .coil programs; programs whose constants are all in the text
// evaluate alike; the statement forms no test model has; and malformed text is a user error,
// never a crash.
#include "lower/LoopParser.h"

#include "LowerTestUtil.h"
#include "driver/LoadModel.h"
#include "driver/Pipeline.h"
#include "lower/LoopVerify.h"

#include <filesystem>
#include <gtest/gtest.h>

using namespace coil;
using namespace coil::lowertest;

namespace {

namespace fs = std::filesystem;

/// Checks that `p` prints, parses back, verifies and prints byte-identically; returns the parsed
/// program (empty on failure).
std::optional<loop::ParsedLoopProgram> roundTrip(const loop::LoopProgram &p,
                                                 const std::string &what) {
  std::string text = loop::printLoopProgram(p);
  auto parsed = loop::parseLoopProgram(text, what);
  EXPECT_TRUE(parsed.ok()) << what << ": " << (parsed.ok() ? "" : parsed.error().render());
  if (!parsed.ok()) return std::nullopt;
  EXPECT_EQ(parsed->program.graph, parsed->graph.get()) << what;
  Status st = loop::verifyLoopProgram(parsed->program, "parsing");
  EXPECT_TRUE(st.ok()) << what << ": " << (st.ok() ? "" : st.error().render());
  EXPECT_EQ(loop::printLoopProgram(parsed->program), text) << what;
  EXPECT_EQ(parsed->program.nodes.size(), p.nodes.size()) << what;
  for (size_t i = 0; i < p.nodes.size() && i < parsed->program.nodes.size(); ++i)
    EXPECT_EQ(parsed->program.nodes[i].kind.index(), p.nodes[i].kind.index())
        << what << ": node " << p.nodes[i].name;
  return std::move(parsed).value();
}

/// The Loop IR the pipeline makes of `path` for `device` (every Loop IR pass included).
std::optional<loop::LoopProgram> pipelineLoops(const std::string &path, const std::string &device,
                                               std::unique_ptr<Compilation> &keep) {
  auto m = loadModel(path);
  EXPECT_TRUE(m.ok()) << path << ": " << (m.ok() ? "" : m.error().render());
  if (!m.ok()) return std::nullopt;
  CompileOptions o;
  o.device = device;
  auto c = compileGraph(std::move(m->graph), o);
  EXPECT_TRUE(c.ok()) << path << " (" << device << "): " << (c.ok() ? "" : c.error().render());
  if (!c.ok()) return std::nullopt;
  keep = std::move(*c);
  return keep->loops;
}

/// The files under test/`dir` (recursively) whose names end in `ext`, sorted.
std::vector<std::string> filesIn(const std::string &dir, const std::string &ext) {
  std::vector<std::string> files;
  for (const auto &e :
       fs::recursive_directory_iterator(std::string(COIL_SOURCE_DIR) + "/test/" + dir))
    if (e.path().extension() == ext) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(LoopParser, RoundTripsTheTestModels) {
  // test/models and the ONNX files of the other tests (attention forms, regressions, ...).
  std::vector<std::string> models = filesIn("", ".onnx");
  ASSERT_GE(models.size(), 100u);
  for (const std::string &path : models)
    for (const char *device : {"cpu", "cuda"}) {
      std::unique_ptr<Compilation> keep;
      if (auto p = pipelineLoops(path, device, keep)) roundTrip(*p, path + " (" + device + ")");
    }
}

TEST(LoopParser, RoundTripsCoilPrograms) {
  // The .coil programs that compile (test/ir's are parser tests, some of them not lowerable).
  std::vector<std::string> programs = filesIn("compile", ".coil");
  for (const std::string &path : filesIn("loops", ".coil")) programs.push_back(path);
  ASSERT_GE(programs.size(), 3u);
  for (const std::string &path : programs)
    for (const char *device : {"cpu", "cuda"}) {
      std::unique_ptr<Compilation> keep;
      if (auto p = pipelineLoops(path, device, keep)) roundTrip(*p, path + " (" + device + ")");
    }
}

/// Lowered straight from `text` (no pass after lowering), round-tripped, and the parsed
/// program evaluated against the original on random inputs: the same outputs, bit for bit.
void checkEvaluatesAlike(const std::string &text, const std::vector<SymBindings> &sizes) {
  Graph g = parseOrDie(text);
  auto p = loop::lowerGraph(g);
  ASSERT_TRUE(p.ok()) << p.error().render();
  std::optional<loop::ParsedLoopProgram> parsed = roundTrip(*p, text);
  ASSERT_TRUE(parsed);
  int constants = 0;
  for (const loop::Node &n : parsed->program.nodes)
    if (const auto *c = std::get_if<loop::ConstantNode>(&n.kind)) {
      EXPECT_TRUE(parsed->graph->isConstant(c->graphValue)) << n.name << ": no data in the text";
      ++constants;
    }
  EXPECT_GT(constants, 0);
  uint64_t seed = 5;
  for (const SymBindings &s : sizes) {
    std::vector<Tensor> ins = randomInputs(g, s, seed++);
    auto want = loop::evaluateLoopProgram(*p, ins);
    auto got = loop::evaluateLoopProgram(parsed->program, ins);
    ASSERT_TRUE(want.ok()) << want.error().render();
    ASSERT_TRUE(got.ok()) << got.error().render();
    ASSERT_EQ(got->size(), want->size());
    for (size_t k = 0; k < got->size(); ++k)
      EXPECT_EQ(compareTensors((*got)[k], (*want)[k], Tolerance{0, 0}), "") << "output " << k;
  }
}

TEST(LoopParser, ParsedProgramsEvaluateAlike) {
  // Small constants (in the text), a gather (IndirectIndex), ArgMax with select_last_index
  // (a position and 'last'), a cast, floor division and modulo in indices (the reshape).
  checkEvaluatesAlike(R"(graph @g(%x: f32[N, 6], %i: i64[3]) -> (%y, %am, %g, %r) {
  symbol N in [1, 8]
  %s = constant f32[6] [0.5, -1, 2.25, inf, -0, 3e-08]
  %y = Mul(%x, %s) : f32[N, 6]
  %am = ArgMax(%x) {axis = 1, keepdims = 0, select_last_index = 1} : i64[N]
  %g = Gather(%x, %i) {axis = 1} : f32[N, 3]
  %t2 = symconst i64[3] [3, N, 2]
  %rs = Reshape(%x, %t2) : f32[3, N, 2]
  %r = Cast(%rs) {to = 7} : i64[3, N, 2]
})",
                      {{{"N", 1}}, {{"N", 5}}});
}

TEST(LoopParser, StatementFormsTheModelsLack) {
  // bitcast, u64 and i64 extremes, NaN, data-dependent sizes (an allocating extern with an
  // outsym, and a MultiOutput), -2^63 in an index, names that need quotes.
  std::string text = R"(symbols N in [0, 64]

x: f32[N] = input 'x\'s \\ \x01'

c: u64[] = constant 'c' [18446744073709551615]

u: f32[1, cnt, 1] = extern coil_cpu_unique_f32(x, out 0, out 1, out 2, out 3, outsym cnt, int 1, int N, int 1, int 1) allocates
  out 0: f32[1, cnt, 1]
  out 1: i64[cnt]
  out 2: i64[N]
  out 3: i64[cnt]

counts: i64[cnt] = output 3 of u

y: i32[N] = pointwise (%x0)
  %0 = load f32 x[%x0]
  %1 = bitcast i32 %0
  %2 = const i64 -9223372036854775808
  %3 = const u64 18446744073709551615
  %4 = const f32 nan
  %5 = const f32 -inf
  %6 = index i64 (-9223372036854775807 - 1) + min(%x0, N - 1) // 2 + max(N, 3) % 4
  %7 = load u64 c[]
  %8 = eq bool %3, %7
  %9 = select i32 %8, %1, %1
  result %9

input 'a b' = x
output y#1 = y
output counts = counts
)";
  // An unquoted `y#1` starts a comment (the printer quotes such names).
  auto parsed = loop::parseLoopProgram(text, "<forms>");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().render(), "error: <forms>:30:1: expected '=' after the program "
                                     "output's name, got 'output'");
  text.replace(text.find("y#1"), 3, "'y#1'");
  parsed = loop::parseLoopProgram(text, "<forms>");
  ASSERT_TRUE(parsed.ok()) << parsed.error().render();
  // The printed text is a fixed point (the index expression prints in its canonical form).
  std::string printed = loop::printLoopProgram(parsed->program);
  EXPECT_NE(printed.find("input 'a b' = x\noutput 'y#1' = y\n"), std::string::npos) << printed;
  auto again = loop::parseLoopProgram(printed, "<printed>");
  ASSERT_TRUE(again.ok()) << again.error().render();
  EXPECT_EQ(loop::printLoopProgram(again->program), printed);
  const loop::LoopProgram &p = parsed->program;
  EXPECT_EQ(parsed->graph->value(0).name, "x's \\ \x01");
  EXPECT_EQ(p.inputNames, std::vector<std::string>{"a b"});
  EXPECT_EQ(p.outputNames, (std::vector<std::string>{"y#1", "counts"}));
  EXPECT_EQ(parsed->graph->constant(1).getInt(0), -1); // u64 max, read as int64
  const auto &ex = std::get<loop::ExternNode>(p.nodes[2].kind);
  EXPECT_TRUE(ex.allocates);
  EXPECT_EQ(ex.args[5].kind, loop::ExternArg::Kind::OutSymbol);
  EXPECT_EQ(std::get<loop::MultiOutputNode>(p.nodes[3].kind).index, 3);
  const auto &body = std::get<loop::PointwiseNode>(p.nodes[4].kind).body;
  EXPECT_EQ(body.stmts[1].kind, loop::Stmt::Kind::BitCast);
  EXPECT_EQ(body.stmts[2].intNumber, INT64_MIN);
  EXPECT_EQ(uint64_t(body.stmts[3].intNumber), UINT64_MAX);
  EXPECT_TRUE(std::isnan(body.stmts[4].number));
  EXPECT_EQ(body.stmts[5].number, -INFINITY);
  auto v = body.stmts[6].expr.evaluate({{"%x0", 5}, {"N", 9}});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, INT64_MIN + 2 + 1);
}

TEST(LoopParser, VerifierViolationsAreUserErrorsAtTheNode) {
  auto parsed = loop::parseLoopProgram("x: f32[4] = input 'x'\n\ny: i64[4] = pointwise (%x0)\n"
                                       "  %0 = load f32 x[%x0]\n  result %0\n",
                                       "t.loops");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().kind(), ErrorKind::User);
  EXPECT_EQ(parsed.error().render(), "error: t.loops:3:1: loop IR after parsing: node 1 'y': its "
                                     "result is f32, the node i64");
}

TEST(LoopParser, MalformedTextIsAUserError) {
  // Every prefix and many one-character edits of a real program: a parsed program or a user
  // error, never a crash or an internal error.
  std::unique_ptr<Compilation> keep;
  auto p =
      pipelineLoops(std::string(COIL_SOURCE_DIR) + "/test/models/resnet_small.onnx", "cpu", keep);
  ASSERT_TRUE(p);
  std::string text = loop::printLoopProgram(*p);
  int parsed = 0, rejected = 0;
  auto check = [&](const std::string &t) {
    auto r = loop::parseLoopProgram(t, "<fuzz>");
    if (r.ok()) {
      ++parsed;
      return;
    }
    ++rejected;
    EXPECT_EQ(r.error().kind(), ErrorKind::User) << r.error().render();
    EXPECT_GT(r.error().loc().line, 0) << r.error().render();
  };
  for (size_t n = 0; n < text.size(); n += 7) check(text.substr(0, n));
  const char edits[] = {' ', '%', '(', ')', ',', '\'', '0', 'x', '-', ':', '\n', '#'};
  for (size_t i = 0, k = 0; i < text.size(); i += 13, ++k) {
    std::string t = text;
    t[i] = edits[k % sizeof edits];
    check(t);
  }
  EXPECT_GT(rejected, 100);
}

} // namespace
