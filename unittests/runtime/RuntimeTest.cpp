// End to end: hand-built WrapperPrograms -> wrapper.cpp + fixture kernels -> model.so ->
// libcoil_runtime (load, validate, run), plus the runtime's error paths.
#include "../wrapper/WrapperTestUtil.h"
#include "runtime/Json.h"
#include "runtime/Metadata.h"
#include "wrapper/MemoryPlan.h"
#include "wrapper/Verify.h"

#include <coil/coil.h>
#include <coil/coil.hpp>
#include <coil/model_abi.h>
#include <dlfcn.h>
#include <map>
#include <thread>

namespace coil::wrapper::testing {
namespace {

const char *kKernels = R"(
#include <coil/model_abi.h>
#include <cstdint>
#include <cstring>
extern "C" {
void k_add_c0(const float *x, const float *w, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] + w[i % 4];
}
void k_add_c1(const float *x, const float *w, float *y, int64_t n) {
  for (int64_t b = 0; b < n; b += 4)
    for (int64_t i = b; i < b + 4 && i < n; ++i) y[i] = x[i] + w[i % 4];
}
void k_scale_c0(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];
}
void k_copy_i64_c0(const int64_t *x, int64_t *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i];
}
int32_t test_add_scalar(const void *x, void *y, int64_t n, double c) {
  for (int64_t i = 0; i < n; ++i) ((float *)y)[i] = ((const float *)x)[i] + float(c);
  return 0;
}
// The positive entries of x and their positions.
int32_t test_positive(coil_alloc_fn alloc, void *ctx, const void *xv, int64_t n, void **vals,
                      void **idx, int64_t *count) {
  const float *x = (const float *)xv;
  int64_t k = 0;
  for (int64_t i = 0; i < n; ++i) k += x[i] > 0;
  float *v = (float *)alloc(ctx, size_t(k) * 4);
  int64_t *p = (int64_t *)alloc(ctx, size_t(k) * 8);
  *vals = v, *idx = p;
  if ((!v || !p) && k) { *count = 0; return 1; }
  k = 0;
  for (int64_t i = 0; i < n; ++i)
    if (x[i] > 0) v[k] = x[i], p[k] = i, ++k;
  *count = k;
  return 0;
}
}
)";

/// y = (x + w) * 2 + 0.5 with x [N, 4], w [4]: two generated kernels (the first with two configs,
/// the second chosen), one ExternKernelOut, two intermediates.
WrapperProgram addScaleProgram(int32_t addConfig = 1) {
  ProgramBuilder b("add_scale");
  BufferId x = b.input("x", DType::F32, {sym("N"), 4});
  BufferId w = b.constant("w", DType::F32, {4});
  BufferId y = b.output("y", DType::F32, {sym("N"), 4});
  BufferId t0 = b.temp("t0", DType::F32, {sym("N"), 4});
  BufferId t1 = b.temp("t1", DType::F32, {sym("N"), 4});
  KernelId add = b.kernel("k_add",
                          {bufParam("x", DType::F32, false), bufParam("w", DType::F32, false),
                           bufParam("y", DType::F32, true), sizeParam("n")},
                          2);
  KernelId scale = b.kernel("k_scale", {bufParam("x", DType::F32, false),
                                        bufParam("y", DType::F32, true), sizeParam("n")});
  b.p.symbols["N"] = {1, 1024};
  b.line(Comment{"y = (x + w) * 2 + 0.5"});
  b.bind("N", x, 0);
  b.line(KernelDefinition{add});
  b.line(KernelDefinition{scale});
  b.alloc(t0);
  b.call(add, {bufArg(x), bufArg(w), bufArg(t0), sizeArg(sym("N") * 4)}, addConfig);
  b.alloc(t1);
  b.call(scale, {bufArg(t0), bufArg(t1), sizeArg(sym("N") * 4)});
  b.free(t0);
  b.line(ExternKernelOut{
      "test_add_scalar", {exIn(t1), exOut(y), exSize(sym("N") * 4), exFloat(0.5)}, {}});
  b.free(t1);
  return b.p;
}

struct Package {
  TempDir dir;
  std::vector<float> w;
};

void buildAddScale(Package &pkg, bool plan, int32_t addConfig = 1) {
  WrapperProgram p = addScaleProgram(addConfig);
  ASSERT_TRUE(verifyWrapper(p).ok()) << verifyWrapper(p).error().render();
  if (plan) {
    Status st = planMemory(p, MemoryPlanOptions{});
    ASSERT_TRUE(st.ok()) << st.error().render();
    Status v = verifyWrapper(p);
    ASSERT_TRUE(v.ok()) << v.error().render();
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-3, 3);
  pkg.w.resize(4);
  for (float &v : pkg.w) v = dist(rng);
  std::vector<ConstantBlob> blobs{{"w", DType::F32, {4}, pkg.w.data(), 16}};
  std::string err = buildPackage(pkg.dir.path, p, blobs, kKernels);
  ASSERT_EQ(err, "");
}

std::vector<float> randomVec(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-5, 5);
  std::vector<float> v(n);
  for (float &x : v) x = dist(rng);
  return v;
}

void checkAddScale(const std::vector<float> &x, const std::vector<float> &w, const float *y) {
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_FLOAT_EQ(y[i], (x[i] + w[i % 4]) * 2 + 0.5f) << "element " << i;
}

TEST(Runtime, RunsAddScaleWithRuntimeAndCallerOutputs) {
  for (bool plan : {false, true}) {
    Package pkg;
    buildAddScale(pkg, plan);
    coil::Model m(pkg.dir.path);
    ASSERT_EQ(m.inputs().size(), 1u);
    EXPECT_EQ(m.inputs()[0].name, "x");
    EXPECT_EQ(m.inputs()[0].dims, (std::vector<std::string>{"N", "4"}));
    EXPECT_EQ(m.outputs()[0].name, "y");
    for (int64_t n : {1, 3, 17}) {
      std::vector<float> x = randomVec(size_t(n) * 4, unsigned(n));
      auto outs = m.run({coil::Input(x.data(), COIL_DTYPE_F32, {n, 4})});
      ASSERT_EQ(outs.size(), 1u);
      EXPECT_EQ(outs[0].shape(), (std::vector<int64_t>{n, 4}));
      EXPECT_EQ(outs[0].dtype(), COIL_DTYPE_F32);
      checkAddScale(x, pkg.w, outs[0].data<float>());

      std::vector<float> y(size_t(n) * 4, -1);
      std::vector<coil_output> co(1, coil_output{});
      co[0].data = y.data();
      co[0].capacity = int64_t(y.size() * 4);
      m.runInto({coil::Input(x.data(), COIL_DTYPE_F32, {n, 4})}, co);
      EXPECT_EQ(co[0].data, y.data());
      EXPECT_EQ(co[0].owned, 0);
      EXPECT_EQ(co[0].shape[0], n);
      checkAddScale(x, pkg.w, y.data());
    }
  }
}

TEST(Runtime, CallerOutputTooSmallIsAnError) {
  Package pkg;
  buildAddScale(pkg, true);
  coil::Model m(pkg.dir.path);
  std::vector<float> x = randomVec(8, 1), y(7);
  std::vector<coil_output> co(1, coil_output{});
  co[0].data = y.data();
  co[0].capacity = 28;
  try {
    m.runInto({coil::Input(x.data(), COIL_DTYPE_F32, {2, 4})}, co);
    FAIL() << "expected an error";
  } catch (const coil::RuntimeError &e) {
    EXPECT_EQ(e.status(), COIL_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("output 'y' needs 32 bytes, the caller gave 28"),
              std::string::npos)
        << e.what();
  }
}

TEST(Runtime, ValidatesInputs) {
  Package pkg;
  buildAddScale(pkg, true);
  coil_model *m = nullptr;
  ASSERT_EQ(coil_model_load(pkg.dir.path.c_str(), &m), COIL_OK) << coil_last_error();
  std::vector<float> x = randomVec(4 * 2000, 3);
  coil_output out = {};
  auto expectError = [&](coil_tensor in, int64_t nIn, const std::string &msg) {
    coil_status s = coil_model_run(m, &in, nIn, &out, 1);
    EXPECT_EQ(s, COIL_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(coil_last_error()).find(msg), std::string::npos) << coil_last_error();
    EXPECT_EQ(out.data, nullptr);
  };
  int64_t good[] = {2, 4}, badDim[] = {2, 5}, zero[] = {0, 4}, big[] = {2000, 4}, neg[] = {-1, 4};
  expectError({x.data(), COIL_DTYPE_F64, 2, good}, 1, "input 0 'x' must have dtype f32, got f64");
  expectError({x.data(), COIL_DTYPE_F32, 1, good}, 1, "input 0 'x' must have rank 2, got 1");
  expectError({x.data(), COIL_DTYPE_F32, 2, badDim}, 1,
              "input 0 'x' dim 1 must be 4, got 5 (shape [2, 5])");
  expectError({x.data(), COIL_DTYPE_F32, 2, zero}, 1,
              "input 0 'x' dim 0 (N) is 0, outside N's range [1, 1024]");
  expectError({x.data(), COIL_DTYPE_F32, 2, big}, 1,
              "input 0 'x' dim 0 (N) is 2000, outside N's range [1, 1024]");
  expectError({x.data(), COIL_DTYPE_F32, 2, neg}, 1, "input 0 'x' dim 0 must be >= 0, got -1");
  expectError({nullptr, COIL_DTYPE_F32, 2, good}, 1, "input 0 'x': data is null");
  expectError({x.data(), COIL_DTYPE_F32, 2, good}, 2, "takes 1 inputs, got 2");
  coil_tensor in = {x.data(), COIL_DTYPE_F32, 2, good};
  EXPECT_EQ(coil_model_run(m, &in, 1, &out, 1), COIL_OK) << coil_last_error();
  EXPECT_EQ(out.owned, 1);
  coil_output_release(&out);
  EXPECT_EQ(out.data, nullptr);
  coil_model_free(m);
}

/// x [N, 2*N + 1] and z [N]: dims that are expressions of a symbol bound elsewhere.
TEST(Runtime, ValidatesSymbolicDimExpressions) {
  ProgramBuilder b("exprs");
  BufferId x = b.input("x", DType::F32, {sym("N"), sym("N") * 2 + 1});
  BufferId z = b.input("z", DType::F32, {sym("N")});
  BufferId y = b.output("y", DType::F32, {sym("N")});
  KernelId scale = b.kernel("k_scale", {bufParam("x", DType::F32, false),
                                        bufParam("y", DType::F32, true), sizeParam("n")});
  b.p.symbols["N"] = {1, 100};
  b.bind("N", x, 0);
  b.line(KernelDefinition{scale});
  b.call(scale, {bufArg(z), bufArg(y), sizeArg(sym("N"))});
  ASSERT_TRUE(verifyWrapper(b.p).ok()) << verifyWrapper(b.p).error().render();
  ASSERT_TRUE(planMemory(b.p, {}).ok());
  TempDir dir;
  ASSERT_EQ(buildPackage(dir.path, b.p, {}, kKernels), "");
  coil::Model m(dir.path);
  std::vector<float> xs = randomVec(3 * 7, 1), zs = randomVec(4, 2);
  try {
    m.run({coil::Input(xs.data(), COIL_DTYPE_F32, {3, 6}),
           coil::Input(zs.data(), COIL_DTYPE_F32, {3})});
    FAIL();
  } catch (const coil::RuntimeError &e) {
    EXPECT_STREQ(e.what(),
                 "input 0 'x' dim 1 must be 2*N + 1 = 7 with N = 3, got 6 (shape [3, 6])");
  }
  try {
    m.run({coil::Input(xs.data(), COIL_DTYPE_F32, {3, 7}),
           coil::Input(zs.data(), COIL_DTYPE_F32, {4})});
    FAIL();
  } catch (const coil::RuntimeError &e) {
    EXPECT_STREQ(e.what(), "input 1 'z' dim 0 must be N = 3 with N = 3, got 4 (shape [4])");
  }
  auto outs = m.run({coil::Input(xs.data(), COIL_DTYPE_F32, {3, 7}),
                     coil::Input(zs.data(), COIL_DTYPE_F32, {3})});
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(outs[0].data<float>()[i], 2 * zs[i]);
}

/// ExternKernelAlloc with a data-dependent size symbol, an output it allocates, an intermediate
/// it allocates, a MultiOutput alias of that intermediate copied into a second output.
WrapperProgram positiveProgram() {
  ProgramBuilder b("positive");
  BufferId x = b.input("x", DType::F32, {sym("N")});
  BufferId vals = b.output("vals", DType::F32, {sym("u")});
  BufferId idx = b.temp("idx", DType::I64, {sym("u")});
  BufferId alias = b.temp("idx_view", DType::I64, {sym("u")});
  BufferId pos = b.output("pos", DType::I64, {sym("u")});
  KernelId copy = b.kernel("k_copy_i64", {bufParam("x", DType::I64, false),
                                          bufParam("y", DType::I64, true), sizeParam("n")});
  b.p.symbols["N"] = {0, 1 << 20};
  b.bind("N", x, 0);
  b.line(ExternKernelAlloc{"test_positive",
                           {exIn(x), exSize(sym("N")), exOut(vals), exOut(idx), exSym("u")},
                           {"u"},
                           {}});
  b.line(MultiOutput{alias, vals, 1});
  b.line(KernelDefinition{copy});
  b.call(copy, {bufArg(alias), bufArg(pos), sizeArg(sym("u"))});
  b.free(idx);
  return b.p;
}

TEST(Runtime, DataDependentOutputs) {
  WrapperProgram p = positiveProgram();
  ASSERT_TRUE(verifyWrapper(p).ok()) << verifyWrapper(p).error().render();
  ASSERT_TRUE(planMemory(p, {}).ok());
  ASSERT_TRUE(verifyWrapper(p).ok()) << verifyWrapper(p).error().render();
  TempDir dir;
  ASSERT_EQ(buildPackage(dir.path, p, {}, kKernels), "");
  coil::Model m(dir.path);
  for (int64_t n : {0, 1, 10, 1000}) {
    std::vector<float> x = randomVec(size_t(n), unsigned(n + 5));
    std::vector<float> wantVals;
    std::vector<int64_t> wantPos;
    for (int64_t i = 0; i < n; ++i)
      if (x[i] > 0) wantVals.push_back(x[i]), wantPos.push_back(i);
    auto outs = m.run({coil::Input(x.data(), COIL_DTYPE_F32, {n})});
    ASSERT_EQ(outs[0].shape(), std::vector<int64_t>{int64_t(wantVals.size())});
    ASSERT_EQ(outs[1].shape(), std::vector<int64_t>{int64_t(wantPos.size())});
    for (size_t i = 0; i < wantVals.size(); ++i) {
      EXPECT_EQ(outs[0].data<float>()[i], wantVals[i]);
      EXPECT_EQ(outs[1].data<int64_t>()[i], wantPos[i]);
    }
    // Into caller buffers: big enough, then too small for the data-dependent output.
    std::vector<float> v(size_t(n) + 1, -7);
    std::vector<int64_t> q(size_t(n) + 1, -7);
    std::vector<coil_output> co(2, coil_output{});
    co[0].data = v.data(), co[0].capacity = int64_t(v.size() * 4);
    co[1].data = q.data(), co[1].capacity = int64_t(q.size() * 8);
    m.runInto({coil::Input(x.data(), COIL_DTYPE_F32, {n})}, co);
    EXPECT_EQ(co[0].shape[0], int64_t(wantVals.size()));
    for (size_t i = 0; i < wantVals.size(); ++i) {
      EXPECT_EQ(v[i], wantVals[i]);
      EXPECT_EQ(q[i], wantPos[i]);
    }
    if (wantVals.empty()) continue;
    co[0].data = v.data(), co[0].capacity = 0;
    co[1].data = nullptr, co[1].capacity = 0;
    EXPECT_THROW(m.runInto({coil::Input(x.data(), COIL_DTYPE_F32, {n})}, co), coil::RuntimeError);
    EXPECT_EQ(co[1].data, nullptr); // nothing handed out on failure
  }
}

TEST(Runtime, TwoThreadsRunAtOnce) {
  Package pkg;
  buildAddScale(pkg, true);
  coil::Model m(pkg.dir.path);
  std::atomic<int> failures{0};
  auto worker = [&](unsigned seed) {
    std::mt19937 rng(seed);
    for (int it = 0; it < 200; ++it) {
      int64_t n = 1 + int64_t(rng() % 300);
      std::vector<float> x = randomVec(size_t(n) * 4, seed * 1000 + unsigned(it));
      auto outs = m.run({coil::Input(x.data(), COIL_DTYPE_F32, {n, 4})});
      const float *y = outs[0].data<float>();
      for (size_t i = 0; i < x.size(); ++i)
        if (y[i] != (x[i] + pkg.w[i % 4]) * 2 + 0.5f) {
          ++failures;
          break;
        }
    }
  };
  std::thread a(worker, 1), b(worker, 2);
  a.join();
  b.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(Runtime, PackageErrors) {
  coil_model *m = nullptr;
  EXPECT_EQ(coil_model_load("/nonexistent/pkg", &m), COIL_ERROR_PACKAGE);
  EXPECT_NE(std::string(coil_last_error()).find("cannot open metadata.json"), std::string::npos);
  EXPECT_EQ(coil_model_load(nullptr, &m), COIL_ERROR_INVALID_ARGUMENT);

  Package pkg;
  buildAddScale(pkg, true);
  const std::string d = pkg.dir.path;
  std::string meta = readFile(d + "/metadata.json");
  std::string weights = readFile(d + "/weights.bin");
  std::string lib = readFile(d + "/model.so");
  auto expectLoadError = [&](const std::string &msg) {
    coil_model *mm = nullptr;
    EXPECT_EQ(coil_model_load(d.c_str(), &mm), COIL_ERROR_PACKAGE);
    EXPECT_EQ(mm, nullptr);
    EXPECT_NE(std::string(coil_last_error()).find(msg), std::string::npos) << coil_last_error();
  };
  writeFile(d + "/metadata.json", meta.substr(0, meta.size() / 2));
  expectLoadError("metadata.json has no integrity record");
  writeFile(d + "/metadata.json", "{\"format\": \"coil-package\"}");
  expectLoadError("metadata.json has no integrity record");
  // Any edit of the body is caught by its digest before a field is read.
  std::string badDtype = meta;
  badDtype.replace(badDtype.find("\"dtype\": \"f32\""), 14, "\"dtype\": \"f33\"");
  writeFile(d + "/metadata.json", badDtype);
  expectLoadError("metadata.json was modified after it was written");
  // The field checks still hold for a body sealed as it is (a coil bug, or a forged package).
  auto resealed = [&](const std::string &text) {
    writeFile(d + "/metadata.json", metadataBody(text));
    Status st = sealPackage(d, sealedFiles(PackageOptions{}));
    ASSERT_TRUE(st.ok()) << st.error().render();
  };
  resealed(badDtype);
  expectLoadError("is not a dtype: 'f33'");
  std::string badOffset = meta;
  badOffset.replace(badOffset.find("\"offset\": 0"), 11, "\"offset\": 8");
  resealed(badOffset);
  expectLoadError("constants[0].offset' must be 64-byte aligned and inside weights");
  // A body sealed anew is not the one model.so was built for.
  std::string renamed = meta;
  renamed.replace(renamed.find("\"name\": \"add_scale\""), 19, "\"name\": \"add_scalf\"");
  resealed(renamed);
  expectLoadError("model.so was not built for this metadata.json (it names metadata ");
  writeFile(d + "/metadata.json", meta);
  writeFile(d + "/weights.bin", weights.substr(0, 8));
  expectLoadError("weights.bin has 8 bytes, metadata.json says 16");
  writeFile(d + "/weights.bin", weights);
  std::filesystem::remove(d + "/model.so");
  expectLoadError("cannot open model.so");
  writeFile(d + "/model.so", "not an elf file");
  expectLoadError("model.so does not match metadata.json (modified, truncated or from another "
                  "package)");
  writeFile(d + "/model.so", lib);
  ASSERT_EQ(coil_model_load(d.c_str(), &m), COIL_OK) << coil_last_error();
  coil_model_free(m);
}

/// Issue 15: tampering with any byte of weights.bin or model.so, or any field of metadata.json,
/// is a package error with a message naming the file, before model.so is loaded (a truncated
/// model.so used to die of SIGBUS in dlopen, a dropped output of SIGSEGV, an f64 output dtype
/// read past a buffer) -- never a crash and never a load.
TEST(Runtime, TamperedPackagesAreRejected) {
  Package pkg;
  buildAddScale(pkg, true);
  Package other; // another package: its model.so must not pass as this one's
  buildAddScale(other, false, 0);
  const std::string d = pkg.dir.path;
  const std::string files[] = {"metadata.json", "weights.bin", "model.so"};
  std::map<std::string, std::string> original;
  for (const std::string &f : files) original[f] = readFile(d + "/" + f);
  ASSERT_NE(original["model.so"], readFile(other.dir.path + "/model.so"));
  int rejected = 0;
  auto expectRejected = [&](const std::string &file, const std::string &what,
                            const std::string &message) {
    coil_model *m = nullptr;
    coil_status st = coil_model_load(d.c_str(), &m);
    EXPECT_EQ(st, COIL_ERROR_PACKAGE) << file << ": " << what;
    EXPECT_EQ(m, nullptr);
    if (m) coil_model_free(m);
    std::string e = coil_last_error();
    EXPECT_NE(e.find("package '" + d + "'"), std::string::npos) << e;
    EXPECT_NE(e.find(message), std::string::npos) << file << " " << what << ": " << e;
    rejected += st == COIL_ERROR_PACKAGE;
  };
  // Every byte of metadata.json and weights.bin, and bytes all over model.so, one at a time.
  for (const std::string &f : files) {
    const std::string &bytes = original[f];
    size_t step = f == "model.so" ? std::max<size_t>(1, bytes.size() / 97) : 1;
    for (size_t i = 0; i < bytes.size(); i += step) {
      std::string t = bytes;
      t[i] = char(t[i] ^ 1); // never turns one JSON whitespace character into another
      writeFile(d + "/" + f, t);
      expectRejected(f, "byte " + std::to_string(i) + " flipped",
                     f == "metadata.json" ? "metadata.json" : f + " does not match metadata.json");
    }
    for (size_t keep : {size_t(0), bytes.size() / 2, bytes.size() - 1}) {
      writeFile(d + "/" + f, bytes.substr(0, keep));
      expectRejected(f, "truncated to " + std::to_string(keep) + " bytes",
                     f == "metadata.json" ? "metadata.json"
                     : f == "weights.bin" ? "weights.bin has " + std::to_string(keep) + " bytes"
                                          : "model.so does not match metadata.json");
    }
    writeFile(d + "/" + f, bytes);
  }
  // Fields dropped or changed as the issue did it: an output removed, a constant removed, an
  // output's dtype changed to f64.
  std::string meta = original["metadata.json"];
  std::string noConstant = meta;
  size_t c0 = noConstant.find("\"constants\": [");
  size_t c1 = noConstant.find("]", noConstant.find("\"bytes\"", c0));
  noConstant.replace(c0, c1 + 1 - c0, "\"constants\": []");
  std::string f64 = meta;
  size_t out = f64.find("\"outputs\": [");
  f64.replace(f64.find("\"dtype\": \"f32\"", out), 14, "\"dtype\": \"f64\"");
  std::string noOutput = meta;
  size_t o0 = noOutput.find("\"outputs\": [");
  noOutput.replace(o0, noOutput.find("]", noOutput.find("\"shape\"", o0) + 9) + 1 - o0,
                   "\"outputs\": []");
  for (const std::string *t : {&noConstant, &f64, &noOutput}) {
    ASSERT_NE(*t, meta);
    writeFile(d + "/metadata.json", *t);
    expectRejected("metadata.json", "a field changed",
                   "metadata.json was modified after it was written");
  }
  writeFile(d + "/metadata.json", meta);
  // Another package's model.so in place of this one's, then also recorded in the integrity
  // record: the first fails the digest, the second names another metadata.
  writeFile(d + "/model.so", readFile(other.dir.path + "/model.so"));
  expectRejected("model.so", "swapped", "model.so does not match metadata.json");
  writeFile(d + "/metadata.json", metadataBody(meta));
  ASSERT_TRUE(sealPackage(d, sealedFiles(PackageOptions{})).ok());
  expectRejected("model.so", "swapped and resealed", "model.so was not built for this metadata");
  for (const std::string &f : files) writeFile(d + "/" + f, original[f]);
  coil_model *m = nullptr;
  ASSERT_EQ(coil_model_load(d.c_str(), &m), COIL_OK) << coil_last_error();
  coil_model_free(m);
  EXPECT_GT(rejected, int(original["metadata.json"].size() + original["weights.bin"].size()));
}

TEST(Runtime, InputByteSizeOverflowIsRejected) {
  // Issue 15: [2^58, 16] f32 has 2^62 elements (allowed before) but 2^64 bytes, which wrapped
  // in the sizes the wrapper computes; the run crashed. Now every input has at most 2^59
  // elements and 2^62 bytes, checked before any dim is bound or any byte read.
  Package pkg;
  buildAddScale(pkg, true);
  coil_model *m = nullptr;
  ASSERT_EQ(coil_model_load(pkg.dir.path.c_str(), &m), COIL_OK) << coil_last_error();
  float dummy = 0;
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{int64_t(1) << 58, 16}, std::vector<int64_t>{int64_t(1) << 57, 8},
        std::vector<int64_t>{int64_t(1) << 62, 4}}) {
    coil_tensor in = {&dummy, COIL_DTYPE_F32, 2, shape.data()};
    coil_output out = {};
    EXPECT_EQ(coil_model_run(m, &in, 1, &out, 1), COIL_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(coil_last_error())
                  .find("input 0 'x' is too large: shape [" + std::to_string(shape[0]) + ", " +
                        std::to_string(shape[1]) + "] of f32"),
              std::string::npos)
        << coil_last_error();
    EXPECT_EQ(out.data, nullptr);
  }
  coil_model_free(m);
}

TEST(Runtime, MissingExternSymbolIsALoadError) {
  WrapperProgram p = addScaleProgram();
  std::get<ExternKernelOut>(p.lines[9]).function = "coil_no_such_function";
  ASSERT_TRUE(planMemory(p, {}).ok());
  TempDir dir;
  std::vector<float> w(4, 1);
  ASSERT_EQ(buildPackage(dir.path, p, {{"w", DType::F32, {4}, w.data(), 16}}, kKernels), "");
  coil_model *m = nullptr;
  EXPECT_EQ(coil_model_load(dir.path.c_str(), &m), COIL_ERROR_PACKAGE);
  EXPECT_NE(std::string(coil_last_error()).find("coil_no_such_function"), std::string::npos)
      << coil_last_error();
}

TEST(Runtime, AbiVersionsAgree) {
  EXPECT_EQ(uint32_t(kModelAbiVersion), COIL_MODEL_ABI_VERSION);
  EXPECT_EQ(coil_runtime_model_abi_version(), COIL_MODEL_ABI_VERSION);
  EXPECT_STREQ(coil_dtype_name(COIL_DTYPE_BF16), "bf16");
  EXPECT_STREQ(coil_dtype_name(coil_dtype(99)), "invalid");
}

} // namespace
} // namespace coil::wrapper::testing

namespace coil::wrapper::testing {
namespace {

/// y = a @ b through coil_cpu_gemm_f32 and idx = NonZero(y) through coil_cpu_nonzero_f32: extern
/// kernels that live in libcoil_runtime.so, resolved when model.so is loaded.
WrapperProgram runtimeExternProgram() {
  ProgramBuilder b("runtime_externs");
  BufferId a = b.input("a", DType::F32, {sym("N"), 3});
  BufferId w = b.constant("w", DType::F32, {3, 2});
  BufferId y = b.output("y", DType::F32, {sym("N"), 2});
  BufferId idx = b.output("idx", DType::I64, {sym("u")});
  b.p.symbols["N"] = {1, 100};
  b.bind("N", a, 0);
  b.line(ExternKernelOut{"coil_cpu_gemm_f32",
                         {exIn(a), exIn(w), exOut(y), exSize(1), exSize(sym("N")), exSize(2),
                          exSize(3), exSize(0), exSize(0), exSize(0), exSize(0), exFloat(1)},
                         {}});
  b.line(ExternKernelAlloc{
      "coil_cpu_nonzero_f32", {exIn(y), exOut(idx), exSym("u"), exSize(2 * sym("N"))}, {"u"}, {}});
  return b.p;
}

struct ExternPackage {
  TempDir dir;
  std::vector<float> w{1, 0, -1, 2, 0.5f, 0};
};

void buildExternPackage(ExternPackage &pkg) {
  WrapperProgram p = runtimeExternProgram();
  ASSERT_TRUE(planMemory(p, {}).ok());
  ASSERT_TRUE(verifyWrapper(p).ok()) << verifyWrapper(p).error().render();
  ASSERT_EQ(writePackage(pkg.dir.path, p, {{"w", DType::F32, {3, 2}, pkg.w.data(), 24}}, {}).ok(),
            true);
  ASSERT_EQ(compileModel(pkg.dir.path, {"src/wrapper.cpp"}), "");
}

TEST(Runtime, ModelCallsExternKernelsOfTheRuntime) {
  ExternPackage pkg;
  buildExternPackage(pkg);
  coil::Model m(pkg.dir.path);
  std::vector<float> a = {1, 2, 3, 0, 0, 0, -1, 0, 1}; // row 1 gives y = 0 0
  auto outs = m.run({coil::Input(a.data(), COIL_DTYPE_F32, {3, 3})});
  std::vector<float> want(6, 0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) want[i * 2 + j] += a[i * 3 + k] * pkg.w[k * 2 + j];
  std::vector<int64_t> wantIdx;
  for (int i = 0; i < 6; ++i) {
    EXPECT_FLOAT_EQ(outs[0].data<float>()[i], want[i]);
    if (want[i] != 0) wantIdx.push_back(i);
  }
  ASSERT_EQ(outs[1].shape(), std::vector<int64_t>{int64_t(wantIdx.size())});
  for (size_t i = 0; i < wantIdx.size(); ++i) EXPECT_EQ(outs[1].data<int64_t>()[i], wantIdx[i]);
}

/// TopK with K read from an input (coil_cpu_topk_dyn_f32, allocating) and a CumSum whose axis is
/// an input (coil_cpu_cumsum_dyn_f32): values that break the ops' rules fail the run with the
/// kernel's message and the graph node; valid ones still run, so nothing is left behind.
TEST(Runtime, FailingExternKernelFailsTheRunNamingTheNode) {
  ProgramBuilder b("bad_values");
  BufferId x = b.input("x", DType::F32, {2, 3});
  BufferId k = b.input("k", DType::I64, {1});
  BufferId axis = b.input("axis", DType::I64, {1});
  BufferId shape = b.constant("shape", DType::I64, {2});
  BufferId vals = b.output("vals", DType::F32, {2, sym("K")});
  BufferId idx = b.output("idx", DType::I64, {2, sym("K")});
  BufferId sums = b.output("sums", DType::F32, {2, 3});
  b.line(ExternKernelAlloc{"coil_cpu_topk_dyn_f32",
                           {exIn(x), exIn(k), exOut(vals), exOut(idx), exSym("K"), exSize(2),
                            exSize(3), exSize(1), exSize(1)},
                           {"K"},
                           {},
                           {"top", "TopK"}});
  b.line(MultiOutput{idx, vals, 1});
  b.line(ExternKernelOut{
      "coil_cpu_cumsum_dyn_f32",
      {exIn(x), exIn(axis), exIn(shape), exOut(sums), exSize(2), exSize(0), exSize(0), exSize(0)},
      {},
      {"sum", "CumSum"}});
  ASSERT_TRUE(planMemory(b.p, {}).ok());
  ASSERT_TRUE(verifyWrapper(b.p).ok()) << verifyWrapper(b.p).error().render();
  TempDir dir;
  int64_t shapeData[2] = {2, 3};
  ASSERT_EQ(writePackage(dir.path, b.p, {{"shape", DType::I64, {2}, shapeData, 16}}, {}).ok(),
            true);
  ASSERT_EQ(compileModel(dir.path, {"src/wrapper.cpp"}), "");
  coil::Model m(dir.path);
  std::vector<float> xs = randomVec(6, 7);
  auto run = [&](int64_t kv, int64_t av) {
    return m.run({coil::Input(xs.data(), COIL_DTYPE_F32, {2, 3}),
                  coil::Input(&kv, COIL_DTYPE_I64, {1}), coil::Input(&av, COIL_DTYPE_I64, {1})});
  };
  auto outs = run(2, -1);
  ASSERT_EQ(outs[0].shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(outs[0].data<float>()[0], std::max({xs[0], xs[1], xs[2]}));
  EXPECT_FLOAT_EQ(outs[2].data<float>()[2], xs[0] + xs[1] + xs[2]);
  auto expectFailure = [&](int64_t kv, int64_t av, const std::string &msg) {
    try {
      run(kv, av);
      ADD_FAILURE() << "the run did not fail: " << msg;
    } catch (const coil::RuntimeError &e) {
      EXPECT_NE(std::string(e.what()).find(msg), std::string::npos) << e.what();
    }
  };
  expectFailure(4, 1, "node 'top' (TopK): topk: k 4 is out of range [0, 3] (the size of the axis)");
  expectFailure(-1, 1, "node 'top' (TopK): topk: k -1 is out of range [0, 3]");
  expectFailure(3, 2, "node 'sum' (CumSum): cumsum: axis 2 is out of range for rank 2");
  outs = run(3, 0);
  ASSERT_EQ(outs[1].shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_FLOAT_EQ(outs[2].data<float>()[3], xs[0] + xs[3]);
}

/// A host that loads libcoil_runtime.so with RTLD_LOCAL (as Python's ctypes does) still runs a
/// model whose extern kernels live in the runtime.
TEST(Runtime, WorksWhenTheRuntimeIsLoadedLocally) {
  ExternPackage pkg;
  buildExternPackage(pkg);
  Dl_info info;
  ASSERT_TRUE(dladdr(reinterpret_cast<void *>(&coil_model_load), &info) && info.dli_fname);
  std::string lib = info.dli_fname;
  ASSERT_NE(lib.find("libcoil_runtime"), std::string::npos) << lib;
  writeFile(pkg.dir.path + "/host.cpp", R"(
#include <coil/coil.h>
#include <dlfcn.h>
#include <cstdio>
int main(int argc, char **argv) {
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) { std::printf("dlopen: %s\n", dlerror()); return 2; }
  auto load = (coil_status(*)(const char *, coil_model **))dlsym(h, "coil_model_load");
  auto run = (coil_status(*)(coil_model *, const coil_tensor *, int64_t, coil_output *, int64_t))
      dlsym(h, "coil_model_run");
  auto err = (const char *(*)())dlsym(h, "coil_last_error");
  coil_model *m = nullptr;
  if (load(argv[2], &m) != COIL_OK) { std::printf("load: %s\n", err()); return 3; }
  float a[3] = {1, 2, 3};
  int64_t shape[2] = {1, 3};
  coil_tensor in = {a, COIL_DTYPE_F32, 2, shape};
  float y[2];
  int64_t idx[2];
  coil_output out[2] = {};
  out[0].data = y, out[0].capacity = sizeof y;
  out[1].data = idx, out[1].capacity = sizeof idx;
  if (run(m, &in, 1, out, 2) != COIL_OK) { std::printf("run: %s\n", err()); return 4; }
  std::printf("%g %g %lld\n", y[0], y[1], (long long)out[1].shape[0]);
  return 0;
}
)");
  std::string exe = pkg.dir.path + "/host";
  std::string cc = "c++ -std=c++17 -I" COIL_SOURCE_DIR "/include '" + pkg.dir.path +
                   "/host.cpp' -o '" + exe + "' -ldl > '" + pkg.dir.path + "/host.log' 2>&1";
  ASSERT_EQ(std::system(cc.c_str()), 0) << readFile(pkg.dir.path + "/host.log");
  std::string run =
      "'" + exe + "' '" + lib + "' '" + pkg.dir.path + "' > '" + pkg.dir.path + "/run.log' 2>&1";
  int rc = std::system(run.c_str());
  EXPECT_EQ(rc, 0) << readFile(pkg.dir.path + "/run.log");
  // y = [1 2 3] @ [[1 0] [-1 2] [0.5 0]] = [0.5 4]
  EXPECT_EQ(readFile(pkg.dir.path + "/run.log"), "0.5 4 2\n");
}

} // namespace
} // namespace coil::wrapper::testing

namespace coil::wrapper::testing {
namespace {

const char *kChainKernels = R"(
#include <cstdint>
extern "C" {
void k_add2_c0(const float *a, const float *b, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}
void k_scale_c0(const float *a, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 2 * a[i] - 1;
}
}
)";

/// Random dataflow over temps of [N, 4] (f32) and views of them, planned and run; the results
/// match the same arithmetic done here, so an arena plan that lets live buffers overlap fails.
TEST(Runtime, RandomPlannedProgramsComputeTheRightValues) {
  std::mt19937 rng(99);
  for (int prog = 0; prog < 4; ++prog) {
    ProgramBuilder b("chain" + std::to_string(prog));
    SymInt n4 = sym("N") * 4;
    BufferId x = b.input("x", DType::F32, {sym("N"), 4});
    BufferId y = b.output("y", DType::F32, {sym("N"), 4});
    KernelId add =
        b.kernel("k_add2", {bufParam("a", DType::F32, false), bufParam("b", DType::F32, false),
                            bufParam("y", DType::F32, true), sizeParam("n")});
    KernelId scale = b.kernel("k_scale", {bufParam("a", DType::F32, false),
                                          bufParam("y", DType::F32, true), sizeParam("n")});
    b.p.symbols["N"] = {1, 64};
    struct Op {
      bool isAdd;
      int a, b, out; // value ids: 0 = x, k >= 1 = temp k - 1, -1 = y
    };
    std::vector<Op> ops;
    int steps = 6 + int(rng() % 14);
    for (int s = 0; s < steps; ++s) {
      int avail = s + 1;
      int lo = std::max(0, avail - 4); // mostly recent values: overlapping lifetimes
      auto pick = [&] {
        return rng() % 5 == 0 ? int(rng() % avail) : lo + int(rng() % (avail - lo));
      };
      ops.push_back({rng() % 2 == 0, pick(), pick(), s == steps - 1 ? -1 : s + 1});
    }
    std::vector<BufferId> temps;
    for (int s = 0; s + 1 < steps; ++s)
      temps.push_back(b.temp("t" + std::to_string(s), DType::F32, {sym("N"), 4}));
    // A view of each temp, used in place of it by later ops half of the time.
    std::vector<BufferId> views;
    for (int s = 0; s + 1 < steps; ++s)
      views.push_back(b.temp("v" + std::to_string(s), DType::F32, {sym("N"), 4}));
    auto buf = [&](int v, bool viaView) -> BufferId {
      return v == 0 ? x : viaView ? views[v - 1] : temps[v - 1];
    };
    std::vector<int> lastUse(steps, -1);
    for (int s = 0; s < steps; ++s) {
      lastUse[ops[s].a] = s;
      lastUse[ops[s].b] = s;
    }
    b.bind("N", x, 0);
    b.line(KernelDefinition{add});
    b.line(KernelDefinition{scale});
    std::vector<bool> viewMade(steps, false);
    for (int s = 0; s < steps; ++s) {
      const Op &op = ops[s];
      BufferId out = op.out < 0 ? y : temps[op.out - 1];
      if (op.out > 0) b.alloc(out);
      bool va = op.a > 0 && rng() % 2 == 0, vb = op.b > 0 && rng() % 2 == 0;
      for (auto [v, use] : {std::pair{op.a, va}, std::pair{op.b, vb}})
        if (use && !viewMade[v]) {
          b.line(Reinterpret{views[v - 1], temps[v - 1], SymInt(0)});
          viewMade[v] = true;
        }
      if (op.isAdd)
        b.call(add, {bufArg(buf(op.a, va)), bufArg(buf(op.b, vb)), bufArg(out), sizeArg(n4)});
      else
        b.call(scale, {bufArg(buf(op.a, va)), bufArg(out), sizeArg(n4)});
      for (int v = 1; v < steps; ++v)
        if (lastUse[v] == s) b.free(temps[v - 1]);
    }
    for (int v = 1; v < steps; ++v)
      if (lastUse[v] < 0) b.free(temps[v - 1]); // never read
    ASSERT_TRUE(verifyWrapper(b.p).ok()) << verifyWrapper(b.p).error().render();
    ASSERT_TRUE(planMemory(b.p, {}).ok());
    for (int64_t n : {1, 7, 64}) ASSERT_TRUE(verifyArena(b.p, {{"N", n}}).ok());
    TempDir dir;
    ASSERT_EQ(buildPackage(dir.path, b.p, {}, kChainKernels), "");
    coil::Model m(dir.path);
    for (int64_t n : {1, 5, 33}) {
      std::vector<float> xv = randomVec(size_t(n) * 4, unsigned(prog * 100 + n));
      std::vector<std::vector<float>> val(steps + 1);
      val[0] = xv;
      std::vector<float> want;
      for (int s = 0; s < steps; ++s) {
        const Op &op = ops[s];
        std::vector<float> r(xv.size());
        for (size_t i = 0; i < r.size(); ++i)
          r[i] = op.isAdd ? val[op.a][i] + val[op.b][i] : 2 * val[op.a][i] - 1;
        if (op.out < 0)
          want = r;
        else
          val[op.out] = r;
      }
      auto outs = m.run({coil::Input(xv.data(), COIL_DTYPE_F32, {n, 4})});
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(outs[0].data<float>()[i], want[i]) << "program " << prog << " N=" << n;
    }
  }
}

} // namespace
} // namespace coil::wrapper::testing
