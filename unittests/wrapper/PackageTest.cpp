// The package format: metadata.json written by the compiler and read back by the runtime's
// reader, weights.bin layout, the JSON reader itself.
#include "WrapperTestUtil.h"
#include "runtime/Json.h"
#include "runtime/Metadata.h"
#include "wrapper/MemoryPlan.h"

namespace coil::wrapper::testing {
namespace {

WrapperProgram sample() {
  ProgramBuilder b("sample \"model\"");
  BufferId x = b.input("x", DType::BF16, {sym("B"), 2 * sym("S") + 1});
  b.constant("w", DType::F32, {2, 3});
  b.constant("bias", DType::I8, {5});
  BufferId y = b.output("y", DType::Bool, {sym("B")});
  KernelId k = b.kernel(
      "k", {bufParam("x", DType::BF16, false), bufParam("y", DType::Bool, true), sizeParam("n")},
      2);
  b.p.symbols["B"] = {1, 8};
  b.p.symbols["S"] = {0, 100};
  b.bind("B", x, 0);
  b.line(KernelDefinition{k});
  b.call(k, {bufArg(x), bufArg(y), sizeArg(sym("B"))}, 1);
  b.call(k, {bufArg(x), bufArg(y), sizeArg(sym("B"))}, 0);
  b.p.kernels[0].iterationSpace = {sym("B")};
  b.p.kernels[0].origins = {3, 4};
  return b.p;
}

TEST(Package, MetadataRoundTripsThroughTheRuntimeReader) {
  WrapperProgram p = sample();
  std::vector<float> w(6, 1.5f);
  std::vector<int8_t> bias(5, -3);
  std::vector<ConstantBlob> blobs{{"w", DType::F32, {2, 3}, w.data(), 24},
                                  {"bias", DType::I8, {5}, bias.data(), 5}};
  int64_t total = 0;
  auto layout = layoutWeights(blobs, &total);
  PackageOptions o;
  o.compileOptions = {{"dynamic", "B=1:8"}, {"note", "a \"quoted\"\nline"}};
  std::string text = metadataJson(p, layout, total, o);
  auto md = runtime::parseMetadata(text);
  ASSERT_TRUE(md.ok()) << md.error().render() << "\n" << text;
  EXPECT_EQ(md->name, "sample \"model\"");
  EXPECT_EQ(md->abiVersion, kModelAbiVersion);
  EXPECT_EQ(md->weightsBytes, 69);
  ASSERT_EQ(md->inputs.size(), 1u);
  EXPECT_EQ(md->inputs[0].dtype, DType::BF16);
  EXPECT_EQ(md->inputs[0].dimText, (std::vector<std::string>{"B", "2*S + 1"}));
  EXPECT_EQ(md->inputs[0].dims[1], 2 * sym("S") + 1);
  EXPECT_EQ(md->outputs[0].dtype, DType::Bool);
  ASSERT_EQ(md->symbols.size(), 2u);
  EXPECT_EQ(md->symbols[1].name, "S");
  EXPECT_EQ(md->symbols[1].max, 100);
  ASSERT_EQ(md->bindings.size(), 1u);
  EXPECT_EQ(md->bindings[0].symbol, "B");
  ASSERT_EQ(md->constants.size(), 2u);
  EXPECT_EQ(md->constants[1].name, "bias");
  EXPECT_EQ(md->constants[1].offset, 64);
  EXPECT_EQ(md->constants[1].bytes, 5);
  // Fields the runtime does not read, through the plain JSON reader.
  auto root = json::parse(text);
  ASSERT_TRUE(root.ok());
  const json::Value *opts = root->get("compile_options");
  ASSERT_TRUE(opts && opts->get("note"));
  EXPECT_EQ(opts->get("note")->text, "a \"quoted\"\nline");
  const json::Value &k = root->get("kernels")->items.at(0);
  EXPECT_EQ(k.get("chosen_configs")->items.size(), 2u);
  EXPECT_EQ(k.get("chosen_configs")->items[0].asInt(), 1);
  EXPECT_EQ(k.get("configs")->items[1].get("values")->get("block")->asInt(), 128);
  EXPECT_EQ(k.get("iteration_space")->items[0].text, "B");
  EXPECT_EQ(k.get("origins")->items[1].asInt(), 4);
  // Deterministic.
  EXPECT_EQ(text, metadataJson(p, layout, total, o));
}

TEST(Package, WeightsAreAlignedAndPadded) {
  std::vector<uint8_t> a(70), b(3), c(0), d(64);
  for (size_t i = 0; i < a.size(); ++i) a[i] = uint8_t(i + 1);
  for (size_t i = 0; i < b.size(); ++i) b[i] = uint8_t(200 + i);
  for (size_t i = 0; i < d.size(); ++i) d[i] = uint8_t(i ^ 0x5a);
  std::vector<ConstantBlob> blobs{{"a", DType::U8, {70}, a.data(), 70},
                                  {"b", DType::U8, {3}, b.data(), 3},
                                  {"c", DType::U8, {0}, nullptr, 0},
                                  {"d", DType::U8, {64}, d.data(), 64}};
  int64_t total = 0;
  auto layout = layoutWeights(blobs, &total);
  EXPECT_EQ(layout[0].offset, 0);
  EXPECT_EQ(layout[1].offset, 128);
  EXPECT_EQ(layout[2].offset, 192);
  EXPECT_EQ(layout[3].offset, 192);
  EXPECT_EQ(total, 256);
  TempDir dir;
  ASSERT_TRUE(writeWeights(dir.path + "/weights.bin", blobs).ok());
  std::string bytes = readFile(dir.path + "/weights.bin");
  ASSERT_EQ(bytes.size(), 256u);
  for (size_t i = 0; i < 70; ++i) EXPECT_EQ(uint8_t(bytes[i]), a[i]);
  for (size_t i = 70; i < 128; ++i) EXPECT_EQ(bytes[i], 0);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(uint8_t(bytes[128 + i]), b[i]);
  for (size_t i = 131; i < 192; ++i) EXPECT_EQ(bytes[i], 0);
  for (size_t i = 0; i < 64; ++i) EXPECT_EQ(uint8_t(bytes[192 + i]), d[i]);
}

TEST(Package, ConstantsMustMatchTheProgram) {
  WrapperProgram p = sample();
  std::vector<float> w(6);
  std::vector<int8_t> bias(5);
  auto check = [&](std::vector<ConstantBlob> blobs, const std::string &msg) {
    Status st = checkConstants(p, blobs);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message().find(msg), std::string::npos) << st.error().message();
  };
  ConstantBlob goodW{"w", DType::F32, {2, 3}, w.data(), 24};
  ConstantBlob goodB{"bias", DType::I8, {5}, bias.data(), 5};
  EXPECT_TRUE(checkConstants(p, {goodW, goodB}).ok());
  check({goodW}, "the program has 2 constants, got 1 values");
  check({goodB, goodW}, "constant 0 'w' has the value of 'bias'");
  ConstantBlob t = goodW;
  t.dtype = DType::I32;
  check({t, goodB}, "constant 0 'w' is f32, its value i32");
  t = goodW;
  t.shape = {3, 2};
  check({t, goodB}, "constant 0 'w' dim 0 is 2, its value has 3");
  t = goodW;
  t.size = 20;
  check({t, goodB}, "constant 0 'w' needs 24 bytes, its value has 20");
}

TEST(Json, ParsesValues) {
  auto v = json::parse(
      R"( {"a": [1, -2.5e3, true, false, null], "s": "x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00", "e": {}, "n": -0} )");
  ASSERT_TRUE(v.ok()) << v.error().render();
  const json::Value *a = v->get("a");
  ASSERT_TRUE(a && a->isArray());
  EXPECT_EQ(a->items[0].asInt(), 1);
  EXPECT_EQ(a->items[1].asDouble(), -2500.0);
  EXPECT_FALSE(a->items[1].asInt().has_value());
  EXPECT_TRUE(a->items[2].boolean);
  EXPECT_EQ(a->items[4].kind, json::Value::Kind::Null);
  EXPECT_EQ(v->get("s")->text, "x\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_TRUE(v->get("e")->isObject());
  EXPECT_EQ(v->get("n")->asInt(), 0);
  EXPECT_EQ(v->get("missing"), nullptr);
  EXPECT_FALSE(json::Value{}.asInt().has_value());
  auto big = json::parse("99999999999999999999");
  ASSERT_TRUE(big.ok());
  EXPECT_FALSE(big->asInt().has_value());
  EXPECT_EQ(json::parse(json::quote("tab\there \x01 \"q\"\n"))->text, "tab\there \x01 \"q\"\n");
}

TEST(Json, RejectsMalformedText) {
  for (auto [text, msg] : std::vector<std::pair<std::string, std::string>>{
           {"", "invalid json at byte 0: unexpected end of text"},
           {"{", "expected a member name"},
           {"[1,]", "unexpected character ']'"},
           {"[1 2]", "expected ',' or ']'"},
           {"{\"a\" 1}", "expected ':'"},
           {"\"abc", "unterminated string"},
           {"\"a\nb\"", "control character in string"},
           {"\"\\x\"", "bad escape '\\x'"},
           {"\"\\u12G4\"", "bad \\u escape"},
           {"\"\\ud800\"", "unpaired surrogate"},
           {"01x", "unexpected text after the value"},
           {"-", "bad number"},
           {"1.", "bad number"},
           {"tru", "expected 'true'"},
           {"{} {}", "unexpected text after the value"},
           {std::string(300, '['), "nesting deeper than 200"}}) {
    auto v = json::parse(text);
    ASSERT_FALSE(v.ok()) << text;
    EXPECT_NE(v.error().message().find(msg), std::string::npos)
        << text << ": " << v.error().message();
  }
}

TEST(Package, MetadataReaderRejectsBadFields) {
  WrapperProgram p = sample();
  std::vector<float> w(6);
  std::vector<int8_t> bias(5);
  int64_t total = 0;
  auto layout = layoutWeights(
      {{"w", DType::F32, {2, 3}, w.data(), 24}, {"bias", DType::I8, {5}, bias.data(), 5}}, &total);
  std::string good = metadataJson(p, layout, total, {});
  auto expectBad = [&](const std::string &from, const std::string &to, const std::string &msg) {
    std::string t = good;
    size_t at = t.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    t.replace(at, from.size(), to);
    auto md = runtime::parseMetadata(t);
    ASSERT_FALSE(md.ok()) << to;
    EXPECT_NE(md.error().message().find(msg), std::string::npos) << md.error().message();
  };
  expectBad("\"format\": \"coil-package\"", "\"format\": \"zip\"",
            "'format' must be \"coil-package\"");
  expectBad("\"shape\": [\"B\", \"2*S + 1\"]", "\"shape\": [\"B\", \"2*S +\"]",
            "'inputs[0].shape[1]' is not a size expression");
  expectBad("\"shape\": [\"B\", \"2*S + 1\"]", "\"shape\": [\"B\", 3]",
            "'inputs[0].shape[1]' must be a string");
  expectBad("\"dim\": 0", "\"dim\": 5", "'bindings[0]' names no input dim (input 0, dim 5)");
  expectBad("\"bytes\": 5", "\"bytes\": 6", "'constants[1].bytes' must be 5 elements of i8");
  expectBad("\"offset\": 64", "\"offset\": 65", "'constants[1].offset' must be 64-byte aligned");
  expectBad("\"library\": \"model.so\"", "\"library\": \"../x.so\"",
            "'library' must be a file name in the package");
  // A NUL would cut the name the system opens; longer than NAME_MAX cannot be a file (found by
  // the metadata fuzz target, whose stand-in package could not be written).
  expectBad("\"library\": \"model.so\"", "\"library\": \"model.so\\u0000.txt\"",
            "'library' must be a file name in the package");
  expectBad("\"weights\": \"weights.bin\"", "\"weights\": \"" + std::string(256, 'w') + "\"",
            "'weights' must be a file name in the package");
  expectBad("\"min\": 1", "\"min\": 10", "'symbols[0]' has min > max");
  expectBad("\"weights_bytes\": 69", "\"weights_bytes\": \"69\"",
            "'weights_bytes' must be a number");
}

} // namespace
} // namespace coil::wrapper::testing
