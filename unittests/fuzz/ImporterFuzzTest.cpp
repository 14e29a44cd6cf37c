// Mutation fuzzing of the ONNX importer: every mutated model must import or be rejected with a
// user error; never a crash, an internal error or (under the sanitizer build) a report.
#include "frontend/onnx/OnnxImporter.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

using namespace coil;

namespace {

std::string readFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// One random mutation: flip bytes, truncate, duplicate or delete a span, or overwrite with
/// "interesting" values (0, 0xff, 0x7f, 0x80) that hit varint and length edge cases.
std::string mutate(std::string s, std::mt19937_64 &rng) {
  if (s.empty())
    return s;
  auto pos = [&](size_t n) { return size_t(rng() % n); };
  int kind = int(rng() % 5);
  int rounds = 1 + int(rng() % 4);
  for (int r = 0; r < rounds && !s.empty(); ++r) {
    switch (kind) {
    case 0: s[pos(s.size())] ^= char(1 << (rng() % 8)); break;
    case 1: s.resize(pos(s.size())); break;
    case 2: {
      size_t a = pos(s.size()), len = std::min<size_t>(s.size() - a, 1 + rng() % 16);
      s.insert(pos(s.size()), s.substr(a, len));
      break;
    }
    case 3: {
      size_t a = pos(s.size()), len = std::min<size_t>(s.size() - a, 1 + rng() % 16);
      s.erase(a, len);
      break;
    }
    default: {
      static const char vals[] = {0, char(0xff), 0x7f, char(0x80), 1};
      s[pos(s.size())] = vals[rng() % 5];
    }
    }
  }
  return s;
}

void fuzzModel(const std::string &path, int iterations, uint64_t seed) {
  std::string seedBytes = readFile(path);
  ASSERT_FALSE(seedBytes.empty()) << "cannot read " << path;
  auto clean = importOnnxBytes(seedBytes, path);
  ASSERT_TRUE(clean.ok()) << clean.error().render();
  std::mt19937_64 rng(seed);
  int imported = 0, rejected = 0;
  for (int i = 0; i < iterations; ++i) {
    std::string m = mutate(seedBytes, rng);
    try {
      auto g = importOnnxBytes(m, "fuzz.onnx");
      if (g.ok())
        ++imported;
      else {
        ++rejected;
        EXPECT_EQ(g.error().kind(), ErrorKind::User) << "iteration " << i << ": "
                                                     << g.error().render();
      }
    } catch (const InternalError &e) {
      ADD_FAILURE() << "iteration " << i << ": internal error: " << e.message;
    }
  }
  // Both outcomes must occur, or the mutations are not exercising the importer.
  EXPECT_GT(rejected, 0);
  EXPECT_GT(imported + rejected, 0);
  std::cout << path << ": " << imported << " imported, " << rejected << " rejected\n";
}

} // namespace

TEST(ImporterFuzz, SmallMlp) { fuzzModel(COIL_SOURCE_DIR "/examples/mlp.onnx", 3000, 1); }

TEST(ImporterFuzz, BertWithShapeSubgraphs) {
  fuzzModel(COIL_SOURCE_DIR "/test/models/bert_small.onnx", 150, 2);
}
