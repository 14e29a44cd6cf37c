// `coil compile --device cuda --tune` on a real GPU: a dynamic softmax and layer norm are
// compiled with tuning on; every config of every kernel call is timed per size bucket (the
// record in metadata.json has positive times for all of them, method "measured", the GPU's
// name); the package then runs correctly at sizes in every bucket (compared with a host
// reference), whichever config each bucket chose.
//
// On the GPU machine: build/bin/coil_gpu_tests --gtest_filter='TuneGpu*'
#include "driver/Pipeline.h"
#include "ir/Parser.h"

#include <cmath>
#include <coil/coil.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <random>
#include <sstream>
#include <unistd.h>

namespace coil {
namespace {

struct TempDir {
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "coil-tune-gpu-XXXXXX").string();
    path = mkdtemp(t.data()) ? t : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty() && !std::getenv("COIL_KEEP_TEST_DIRS")) std::filesystem::remove_all(path, ec);
  }
  std::string path;
};

std::string readFile(const std::string &path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// Every "times_us": [...] list of metadata.json's tuning record.
std::vector<std::vector<double>> timeLists(const std::string &meta) {
  std::vector<std::vector<double>> out;
  size_t at = meta.find("\"tuning\"");
  while (at != std::string::npos) {
    at = meta.find("\"times_us\": [", at);
    if (at == std::string::npos) break;
    at += 13;
    size_t end = meta.find(']', at);
    std::vector<double> v;
    std::istringstream is(meta.substr(at, end - at));
    for (std::string tok; std::getline(is, tok, ',');) v.push_back(std::stod(tok));
    out.push_back(v);
    at = end;
  }
  return out;
}

/// Compiles `text` for cuda with tuning into `dir`.
void compileTuned(const std::string &text, const std::string &dir) {
  auto g = parseGraph(text, "<test>");
  ASSERT_TRUE(g.ok()) << g.error().render();
  CompileOptions o;
  o.device = "cuda";
  o.cudaArchs = {"sm_90a"};
  o.tune = true;
  auto c = compileGraph(std::move(*g), o);
  ASSERT_TRUE(c.ok()) << c.error().render();
  auto r = writePackage(**c, dir, o);
  ASSERT_TRUE(r.ok()) << r.error().render();
  EXPECT_EQ(r->tuning.rfind("tuned ", 0), 0u) << r->tuning;
  std::string meta = readFile(dir + "/metadata.json");
  EXPECT_NE(meta.find("\"method\": \"measured\""), std::string::npos) << meta;
  EXPECT_EQ(meta.find("\"device\": \"\""), std::string::npos) << meta;
  auto lists = timeLists(meta);
  EXPECT_GE(lists.size(), 4u) << meta; // several buckets
  for (const auto &v : lists) {
    EXPECT_GE(v.size(), 2u);
    for (double t : v) EXPECT_GT(t, 0) << meta;
  }
}

bool haveGpu() {
  return std::system("nvidia-smi -L > /dev/null 2>&1") == 0;
}

TEST(TuneGpu, SoftmaxTunedPerBucketRunsCorrectly) {
  if (!haveGpu()) GTEST_SKIP() << "no NVIDIA GPU: skipped";
  TempDir dir;
  compileTuned(R"(graph @g(%x: f32[N, 512]) -> (%y) {
  symbol N in [1, 65536]
  %y = Softmax(%x) {axis = -1} : f32[N, 512]
})",
               dir.path);
  if (HasFatalFailure()) return;
  coil_model *m = nullptr;
  ASSERT_EQ(coil_model_load(dir.path.c_str(), &m), COIL_OK) << coil_last_error();
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-4, 4);
  for (int64_t n : {1, 3, 17, 200, 1500, 9000, 65536}) {
    std::vector<float> x(size_t(n) * 512);
    for (float &v : x) v = dist(rng);
    int64_t shape[] = {n, 512};
    coil_tensor in = {x.data(), COIL_DTYPE_F32, 2, shape};
    coil_output out = {};
    ASSERT_EQ(coil_model_run(m, &in, 1, &out, 1), COIL_OK) << coil_last_error();
    const float *y = static_cast<const float *>(out.data);
    double worst = 0;
    for (int64_t r = 0; r < n; ++r) {
      const float *row = x.data() + r * 512;
      double mx = row[0], sum = 0;
      for (int j = 0; j < 512; ++j) mx = std::max(mx, double(row[j]));
      for (int j = 0; j < 512; ++j) sum += std::exp(double(row[j]) - mx);
      for (int j = 0; j < 512; ++j)
        worst = std::max(worst, std::abs(std::exp(double(row[j]) - mx) / sum - y[r * 512 + j]));
    }
    EXPECT_LT(worst, 1e-5) << "N = " << n;
    coil_output_release(&out);
  }
  coil_model_free(m);
}

TEST(TuneGpu, LayerNormTunedPerBucketRunsCorrectly) {
  if (!haveGpu()) GTEST_SKIP() << "no NVIDIA GPU: skipped";
  TempDir dir;
  compileTuned(R"(graph @g(%x: f32[N, 4096], %w: f32[4096], %b: f32[4096]) -> (%y) {
  symbol N in [1, 4096]
  %y = LayerNormalization(%x, %w, %b) {axis = -1, epsilon = 0.00001} : f32[N, 4096]
})",
               dir.path);
  if (HasFatalFailure()) return;
  coil_model *m = nullptr;
  ASSERT_EQ(coil_model_load(dir.path.c_str(), &m), COIL_OK) << coil_last_error();
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-2, 2);
  std::vector<float> w(4096), b(4096);
  for (float &v : w) v = dist(rng);
  for (float &v : b) v = dist(rng);
  for (int64_t n : {1, 5, 70, 1000, 4096}) {
    std::vector<float> x(size_t(n) * 4096);
    for (float &v : x) v = dist(rng);
    int64_t xs[] = {n, 4096}, ws[] = {4096};
    coil_tensor in[] = {{x.data(), COIL_DTYPE_F32, 2, xs},
                        {w.data(), COIL_DTYPE_F32, 1, ws},
                        {b.data(), COIL_DTYPE_F32, 1, ws}};
    coil_output out = {};
    ASSERT_EQ(coil_model_run(m, in, 3, &out, 1), COIL_OK) << coil_last_error();
    const float *y = static_cast<const float *>(out.data);
    double worst = 0;
    for (int64_t r = 0; r < n; ++r) {
      const float *row = x.data() + r * 4096;
      double mean = 0, var = 0;
      for (int j = 0; j < 4096; ++j) mean += row[j];
      mean /= 4096;
      for (int j = 0; j < 4096; ++j) var += (row[j] - mean) * (row[j] - mean);
      var /= 4096;
      for (int j = 0; j < 4096; ++j) {
        double ref = (row[j] - mean) / std::sqrt(var + 1e-5) * w[j] + b[j];
        worst = std::max(worst, std::abs(ref - y[r * 4096 + j]));
      }
    }
    EXPECT_LT(worst, 1e-3) << "N = " << n;
    coil_output_release(&out);
  }
  coil_model_free(m);
}

} // namespace
} // namespace coil
