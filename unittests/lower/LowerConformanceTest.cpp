// Lowering of the ONNX backend node tests: every test model whose ops all have lowerings is
// lowered, evaluated by the Loop IR evaluator on the test's inputs and compared with the
// reference interpreter. Runs only when COIL_NODE_TEST_DIR names the data folder that
// scripts/conformance.py generates (WORK/data-onnx-VERSION); optional COIL_NODE_TEST_FILTER is a
// substring of the test names to run.
#include "LowerTestUtil.h"
#include "frontend/onnx/OnnxImporter.h"
#include "io/Npz.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <gtest/gtest.h>

using namespace coil;
using namespace coil::loop;
using namespace coil::lowertest;

namespace {

Tolerance toleranceFor(DType t) {
  switch (t) {
  case DType::F64:
    return {1e-12, 1e-12};
  case DType::F32: // reductions accumulate in f32 here, in double in the interpreter
    return {1e-5, 1e-4};
  case DType::F16:
    return {1e-3, 2e-3};
  case DType::BF16:
    return {1e-2, 1e-2};
  default:
    return {0, 0};
  }
}

TEST(LowerConformance, NodeTests) {
  const char *dir = std::getenv("COIL_NODE_TEST_DIR");
  if (!dir) GTEST_SKIP() << "set COIL_NODE_TEST_DIR to scripts/conformance.py's data folder";
  const char *filterEnv = std::getenv("COIL_NODE_TEST_FILTER");
  std::string filter = filterEnv ? filterEnv : "";
  std::vector<std::filesystem::path> tests;
  for (const auto &e : std::filesystem::directory_iterator(dir))
    if (e.is_directory() && std::filesystem::exists(e.path() / "model.onnx"))
      tests.push_back(e.path());
  std::sort(tests.begin(), tests.end());
  int passed = 0, failed = 0, unsupported = 0, skipped = 0;
  std::vector<std::string> failures, unsupportedList;
  for (const auto &t : tests) {
    std::string name = t.filename().string();
    if (!filter.empty() && name.find(filter) == std::string::npos) continue;
    auto g = importOnnxFile((t / "model.onnx").string());
    if (!g.ok()) {
      ++skipped;
      continue;
    }
    bool lowerable = true;
    for (const coil::Node &n : g->nodes()) lowerable = lowerable && lowerFnFor(n.op) != nullptr;
    if (!lowerable) {
      ++skipped;
      continue;
    }
    bool ok = true;
    for (int k = 0; std::filesystem::exists(t / ("in" + std::to_string(k) + ".npz")); ++k) {
      auto arrays = readNpz((t / ("in" + std::to_string(k) + ".npz")).string());
      if (!arrays.ok()) break;
      std::vector<Tensor> inputs;
      for (ValueId v : g->inputs)
        for (const auto &[n, a] : *arrays)
          if (n == g->value(v).name) inputs.push_back(a);
      if (inputs.size() != g->inputs.size()) break;
      auto want = interpret(*g, inputs);
      if (!want.ok()) break; // not a lowering question
      auto p = lowerGraph(*g);
      if (!p.ok()) {
        ++unsupported;
        unsupportedList.push_back(name + ": " + p.error().render());
        ok = false;
        break;
      }
      auto got = evaluateLoopProgram(*p, inputs);
      if (!got.ok()) {
        failures.push_back(name + ": evaluate: " + got.error().render());
        ++failed;
        ok = false;
        break;
      }
      for (size_t o = 0; o < got->size(); ++o) {
        std::string diff = compareTensors((*got)[o], (*want)[o], toleranceFor((*want)[o].dtype()));
        if (!diff.empty()) {
          failures.push_back(name + ": output " + std::to_string(o) + ": " + diff);
          ++failed;
          ok = false;
          break;
        }
      }
      if (!ok) break;
    }
    if (ok) ++passed;
  }
  std::string report = "lowered node tests: " + std::to_string(passed) + " passed, " +
                       std::to_string(failed) + " failed, " + std::to_string(unsupported) +
                       " not lowerable, " + std::to_string(skipped) + " skipped\n";
  for (const std::string &f : failures) report += "  FAIL " + f + "\n";
  for (const std::string &u : unsupportedList) report += "  UNSUPPORTED " + u + "\n";
  std::cout << report;
  EXPECT_EQ(failed, 0) << report;
}

} // namespace
