// The schedule text (sched/ScheduleText.h, sched/ScheduleParser.h): print -> parse -> print is
// byte-identical and the parsed schedule verifies, for the schedule of every test model and zoo
// model as the pipeline makes it, for the CPU and for CUDA (whose default, cuBLASLt, fuses no
// GEMM mainloop); a parsed schedule has the original's steps, phases and realized nodes.
#include "sched/ScheduleText.h"

#include "driver/LoadModel.h"
#include "driver/Pipeline.h"
#include "sched/ScheduleParser.h"
#include "sched/ScheduleVerify.h"

#include <algorithm>
#include <filesystem>
#include <gtest/gtest.h>

using namespace coil;

namespace {

namespace fs = std::filesystem;

/// The `.onnx` files directly under test/`dir`, sorted.
std::vector<std::string> modelsIn(const std::string &dir) {
  std::vector<std::string> files;
  for (const auto &e : fs::directory_iterator(std::string(COIL_SOURCE_DIR) + "/test/" + dir))
    if (e.path().extension() == ".onnx") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

/// "line N: 'A' vs 'B'" for the first line where `a` and `b` differ ("" when equal), so that a
/// failure does not print two whole models.
std::string firstDifference(const std::string &a, const std::string &b) {
  if (a == b) return "";
  size_t i = 0, line = 1;
  for (; i < a.size() && i < b.size() && a[i] == b[i]; ++i) line += a[i] == '\n';
  auto lineAt = [&](const std::string &s) {
    size_t begin = s.rfind('\n', i == 0 ? 0 : i - 1);
    begin = begin == std::string::npos || i == 0 ? 0 : begin + 1;
    return s.substr(begin, s.find('\n', begin) - begin);
  };
  return "line " + std::to_string(line) + ": '" + lineAt(a) + "' vs '" + lineAt(b) + "'";
}

/// The same steps, in order, with the same phases (variables, ranges, stores, reductions).
void expectSameShape(const sched::Schedule &a, const sched::Schedule &b, const std::string &what) {
  EXPECT_EQ(a.realized, b.realized) << what;
  EXPECT_EQ(a.gemmNotes, b.gemmNotes) << what;
  ASSERT_EQ(a.steps.size(), b.steps.size()) << what;
  for (size_t i = 0; i < a.steps.size(); ++i) {
    ASSERT_EQ(a.steps[i].index(), b.steps[i].index()) << what << ": step " << i;
    const auto *ka = std::get_if<sched::Kernel>(&a.steps[i]);
    if (!ka) {
      EXPECT_EQ(std::get<sched::ExternStep>(a.steps[i]).node,
                std::get<sched::ExternStep>(b.steps[i]).node)
          << what << ": step " << i;
      continue;
    }
    const auto &kb = std::get<sched::Kernel>(b.steps[i]);
    EXPECT_EQ(ka->name, kb.name) << what;
    EXPECT_EQ(ka->vars, kb.vars) << what << ": " << ka->name;
    EXPECT_EQ(ka->reads, kb.reads) << what << ": " << ka->name;
    EXPECT_EQ(ka->writes, kb.writes) << what << ": " << ka->name;
    EXPECT_EQ(ka->fused, kb.fused) << what << ": " << ka->name;
    ASSERT_EQ(ka->phases.size(), kb.phases.size()) << what << ": " << ka->name;
    for (size_t p = 0; p < ka->phases.size(); ++p) {
      const sched::Phase &pa = ka->phases[p], &pb = kb.phases[p];
      EXPECT_EQ(pa.vars, pb.vars) << what << ": " << ka->name << " phase " << p;
      EXPECT_EQ(pa.body.stmts.size(), pb.body.stmts.size()) << what << ": " << ka->name;
      EXPECT_EQ(pa.stores.size(), pb.stores.size()) << what << ": " << ka->name;
      ASSERT_EQ(pa.reductions.size(), pb.reductions.size()) << what << ": " << ka->name;
      for (size_t r = 0; r < pa.reductions.size(); ++r) {
        EXPECT_EQ(pa.reductions[r].kind, pb.reductions[r].kind) << what << ": " << ka->name;
        EXPECT_EQ(pa.reductions[r].accDType, pb.reductions[r].accDType) << what;
        EXPECT_EQ(pa.reductions[r].position, pb.reductions[r].position) << what;
        EXPECT_EQ(pa.reductions[r].selectLast, pb.reductions[r].selectLast) << what;
      }
    }
  }
}

/// Compiles `path` for `device`, round-trips its schedule; false when the schedule has a fused
/// GEMM mainloop (not readable, by design) or the model does not compile (a failure).
bool roundTripModel(const std::string &path, const std::string &device) {
  std::string what = path + " (" + device + ")";
  auto m = loadModel(path);
  EXPECT_TRUE(m.ok()) << what << ": " << (m.ok() ? "" : m.error().render());
  if (!m.ok()) return false;
  CompileOptions o;
  o.device = device;
  auto c = compileGraph(std::move(m->graph), o);
  EXPECT_TRUE(c.ok()) << what << ": " << (c.ok() ? "" : c.error().render());
  if (!c.ok()) return false;
  const sched::Schedule &s = (*c)->schedule;
  for (const sched::Step &st : s.steps)
    if (const auto *k = std::get_if<sched::Kernel>(&st); k && k->gemm) return false;
  std::string text = sched::printSchedule(s);
  auto parsed = sched::parseSchedule(text, what);
  EXPECT_TRUE(parsed.ok()) << what << ": " << (parsed.ok() ? "" : parsed.error().render());
  if (!parsed.ok()) return false;
  EXPECT_EQ(parsed->schedule.program, parsed->program.get()) << what;
  EXPECT_EQ(parsed->program->graph, parsed->graph.get()) << what;
  Status st = sched::verifySchedule(parsed->schedule, "parsing");
  EXPECT_TRUE(st.ok()) << what << ": " << (st.ok() ? "" : st.error().render());
  EXPECT_EQ(firstDifference(sched::printSchedule(parsed->schedule), text), "") << what;
  expectSameShape(s, parsed->schedule, what);
  return true;
}

TEST(ScheduleText, RoundTripsTheTestAndZooModels) {
  std::vector<std::string> models = modelsIn("models");
  std::vector<std::string> zoo = modelsIn("zoo/models");
  ASSERT_GE(models.size(), 4u);
  ASSERT_GE(zoo.size(), 50u);
  models.insert(models.end(), zoo.begin(), zoo.end());
  for (const char *device : {"cpu", "cuda"}) {
    size_t done = 0;
    for (const std::string &path : models) done += roundTripModel(path, device) ? 1 : 0;
    // cuda's default runs GEMMs through cuBLASLt: no kernel has a GEMM mainloop.
    EXPECT_EQ(done, models.size()) << device;
  }
}

TEST(ScheduleText, ParsedScheduleMovesWithItsProgram) {
  // No symbols: the program's text starts with the blank line before its first node.
  const std::string text = R"(
x: f32[4] = input 'x'

y: f32[4] = pointwise (%x0)
  %0 = load f32 x[%x0]
  %1 = exp f32 %0
  result %1

input x = x
output y = y

schedule
realized [x, y]

kernel k0_y (%x0 < 4)
  phase ()
    %0 = load f32 x[%x0]
    %1 = exp f32 %0
    store y[%x0] = %1
  reads [x]
  writes [y]
  fused [y]
)";
  auto parsed = sched::parseSchedule(text);
  ASSERT_TRUE(parsed.ok()) << parsed.error().render();
  sched::ParsedSchedule moved = std::move(parsed).value();
  EXPECT_EQ(moved.schedule.program, moved.program.get());
  EXPECT_EQ(sched::printSchedule(moved.schedule), text);
}

} // namespace
