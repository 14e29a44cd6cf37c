// The debug printer's runtime: configuration from the environment's values, the three modes on
// hand-made launches (every dtype saved as .npy and read back by numpy, statistics with NaN and
// Inf counts, names only), the device reader path, and hooks of one's own on a real package.
#include "runtime/DebugPrinter.h"

#include "../wrapper/WrapperTestUtil.h"
#include "runtime/Metadata.h"
#include "wrapper/DebugInstrument.h"
#include "wrapper/MemoryPlan.h"
#include "wrapper/Verify.h"

#include <cmath>
#include <coil/cuda_abi.h>
#include <coil/debug.h>
#include <cstring>

namespace coil::runtime {
namespace {

using wrapper::testing::TempDir;

std::vector<LaunchSig> launches() {
  return {{"k0_add", "kernel", "k0_add"},
          {"ext_gemm_0", "extern", "ext_gemm"},
          {"ext_gemm_1", "extern", "ext_gemm"}};
}

TEST(DebugPrinterConfig, ModesAndFilter) {
  auto off = debugConfig(nullptr, "nope", nullptr, launches(), "m");
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->mode, DebugMode::Off); // the filter is not looked at when off
  for (auto [text, mode] :
       {std::pair{"0", DebugMode::Off}, std::pair{"OFF", DebugMode::Off},
        std::pair{"2", DebugMode::Print}, std::pair{" Print ", DebugMode::Print},
        std::pair{"3", DebugMode::Names}, std::pair{"names", DebugMode::Names}}) {
    auto c = debugConfig(text, nullptr, nullptr, launches(), "m");
    ASSERT_TRUE(c.ok()) << text;
    EXPECT_EQ(c->mode, mode) << text;
  }
  auto all = debugConfig("names", "", nullptr, launches(), "m");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->enabled, (std::vector<uint8_t>{1, 1, 1}));
  auto some = debugConfig("names", " EXT_GEMM_1 ,, k0_add", nullptr, launches(), "m");
  ASSERT_TRUE(some.ok());
  EXPECT_EQ(some->enabled, (std::vector<uint8_t>{1, 0, 1}));
  auto group = debugConfig("names", "ext_gemm", nullptr, launches(), "m");
  ASSERT_TRUE(group.ok());
  EXPECT_EQ(group->enabled, (std::vector<uint8_t>{0, 1, 1}));

  auto bad = debugConfig("loud", nullptr, nullptr, launches(), "m");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(),
            "COIL_DEBUG_PRINTER must be 0 or off, 1 or save, 2 or print, 3 or names; got 'loud'");
  auto unknown = debugConfig("print", "k0_add,k1_mul", nullptr, launches(), "m");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().message(),
            "COIL_DEBUG_KERNELS names 'k1_mul', which is not a launch of model 'm'; valid names: "
            "k0_add, ext_gemm_0, ext_gemm_1 (or an extern function for all its launches: "
            "ext_gemm)");
  auto none = debugConfig("print", "k0_add", nullptr, {}, "m");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("(none: the package has no debug instrumentation)"),
            std::string::npos);
}

TEST(DebugPrinterConfig, SaveDirectoryIsCreatedOrRefused) {
  TempDir tmp;
  std::string dir = tmp.path + "/a/b";
  auto c = debugConfig("save", nullptr, dir.c_str(), launches(), "m");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  wrapper::testing::writeFile(tmp.path + "/file", "x");
  std::string file = tmp.path + "/file";
  auto bad = debugConfig("save", nullptr, file.c_str(), launches(), "m");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("COIL_DEBUG_DIR '" + file + "'"), std::string::npos);
}

TEST(DebugPrinterConfig, LaunchesOfMetadata) {
  auto l = parseLaunches(R"({"launches": [{"name": "a", "kind": "kernel", "function": "a"}]})");
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ((*l)[0].function, "a");
  auto old = parseLaunches(R"({"name": "m"})");
  ASSERT_TRUE(old.ok());
  EXPECT_TRUE(old->empty());
  auto bad = parseLaunches(R"({"launches": [{"name": "a", "kind": 3, "function": "a"}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "metadata.json: 'launches[0].kind' must be a string");
}

/// One tensor value of a launch.
coil_debug_value tensor(const char *name, coil_dtype t, std::vector<int64_t> &shape,
                        const void *data, bool written = false) {
  coil_debug_value v{};
  v.name = name;
  v.buffer = name;
  v.kind = COIL_DEBUG_TENSOR;
  v.buffer_id = 0;
  v.dtype = t;
  v.written = written;
  v.rank = int32_t(shape.size());
  v.shape = shape.data();
  v.data = data;
  return v;
}

int32_t report(DebugPrinter &p, int32_t id, const char *name, coil_debug_when when,
               const std::vector<coil_debug_value> &values, void *deviceCtx = nullptr,
               char *error = nullptr, size_t errorSize = 0) {
  coil_debug_launch l{};
  l.id = id;
  l.when = when;
  l.name = name;
  l.values = values.data();
  l.num_values = int32_t(values.size());
  l.device_ctx = deviceCtx;
  l.error = error;
  l.error_size = errorSize;
  const coil_debug_hooks *h = p.hooks();
  EXPECT_EQ(h->abi_version, COIL_DEBUG_ABI_VERSION);
  EXPECT_TRUE(h->enabled[id]);
  return h->report(h->ctx, &l);
}

bool haveNumpy() {
  return std::system("python3 -c 'import numpy' > /dev/null 2>&1") == 0;
}

TEST(DebugPrinter, SaveWritesNpyOfEveryDtype) {
  if (!haveNumpy()) GTEST_SKIP() << "python3 with numpy is not available";
  TempDir tmp;
  auto c = debugConfig("save", nullptr, tmp.path.c_str(), launches(), "m");
  ASSERT_TRUE(c.ok());
  DebugPrinter p(*c, launches());
  std::mt19937 rng(11);
  static const coil_dtype kAll[] = {COIL_DTYPE_F64, COIL_DTYPE_F32, COIL_DTYPE_F16, COIL_DTYPE_BF16,
                                    COIL_DTYPE_I64, COIL_DTYPE_I32, COIL_DTYPE_I16, COIL_DTYPE_I8,
                                    COIL_DTYPE_U64, COIL_DTYPE_U32, COIL_DTYPE_U16, COIL_DTYPE_U8,
                                    COIL_DTYPE_BOOL};
  std::vector<std::vector<uint8_t>> data;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::string> names;
  for (coil_dtype t : kAll) {
    size_t size = dtypeSize(DType(int(t)));
    shapes.push_back({3, int64_t(1 + rng() % 4)});
    std::vector<uint8_t> bytes(size_t(shapes.back()[0] * shapes.back()[1]) * size);
    for (uint8_t &b : bytes) b = uint8_t(rng());
    if (t == COIL_DTYPE_BOOL)
      for (uint8_t &b : bytes) b &= 1;
    if (t == COIL_DTYPE_F16 || t == COIL_DTYPE_BF16 || t == COIL_DTYPE_F32 || t == COIL_DTYPE_F64)
      for (size_t i = size - 1; i < bytes.size(); i += size) bytes[i] &= 0x3f; // no NaN patterns
    data.push_back(std::move(bytes));
    names.push_back(std::string("v_") + std::string(dtypeName(DType(int(t)))));
  }
  std::vector<coil_debug_value> values;
  for (size_t i = 0; i < data.size(); ++i)
    values.push_back(tensor(names[i].c_str(), kAll[i], shapes[i], data[i].data()));
  std::vector<int64_t> scalarShape;
  double scalar = 2.5;
  values.push_back(tensor("scalar", COIL_DTYPE_F64, scalarShape, &scalar));
  ASSERT_EQ(report(p, 1, "ext_gemm_0", COIL_DEBUG_AFTER, values), 0);
  // The raw bytes next to the files, for numpy to compare with.
  std::string script = "import numpy as np, sys\nd = sys.argv[1]\n";
  for (size_t i = 0; i < data.size(); ++i) {
    wrapper::testing::writeFile(tmp.path + "/" + names[i] + ".raw",
                                std::string(data[i].begin(), data[i].end()));
    static const char *kDescr[] = {"<f8", "<f4", "<f2", "<u2", "<i8", "<i4", "<i2",
                                   "|i1", "<u8", "<u4", "<u2", "|u1", "|b1"};
    script += "a = np.load(d + '/after_ext_gemm_0_" + names[i] + ".npy')\n" +
              "assert a.dtype == np.dtype('" + kDescr[i] + "'), a.dtype\n" +
              "assert a.shape == (3, " + std::to_string(shapes[i][1]) + "), a.shape\n" +
              "assert a.tobytes() == open(d + '/" + names[i] + ".raw', 'rb').read()\n";
  }
  script += "s = np.load(d + '/after_ext_gemm_0_scalar.npy')\nassert s.shape == () and s == 2.5\n"
            "print('ok')\n";
  wrapper::testing::writeFile(tmp.path + "/check.py", script);
  std::string cmd =
      "python3 '" + tmp.path + "/check.py' '" + tmp.path + "' > '" + tmp.path + "/check.log' 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << wrapper::testing::readFile(tmp.path + "/check.log");
}

TEST(DebugPrinter, SaveFailureFailsTheLaunch) {
  TempDir tmp;
  auto c = debugConfig("save", nullptr, (tmp.path + "/d").c_str(), launches(), "m");
  ASSERT_TRUE(c.ok());
  DebugPrinter p(*c, launches());
  std::filesystem::remove_all(tmp.path + "/d");
  wrapper::testing::writeFile(tmp.path + "/d", "not a directory");
  std::vector<int64_t> shape{2};
  float x[2] = {1, 2};
  char error[256] = {};
  EXPECT_EQ(report(p, 0, "k0_add", COIL_DEBUG_BEFORE, {tensor("x", COIL_DTYPE_F32, shape, x)},
                   nullptr, error, sizeof error),
            1);
  EXPECT_NE(std::string(error).find("debug printer: cannot write '" + tmp.path +
                                    "/d/before_k0_add_x.npy'"),
            std::string::npos)
      << error;
}

TEST(DebugPrinter, PrintShowsStatisticsAndRealTypes) {
  auto c = debugConfig("print", nullptr, nullptr, launches(), "m");
  ASSERT_TRUE(c.ok());
  DebugPrinter p(*c, launches());
  std::vector<int64_t> small{2, 3}, big{65};
  float a[6] = {1.5f, NAN, -2.0f, INFINITY, NAN, 0.5f};
  std::vector<float> b(65);
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(i);
  int32_t ints[6] = {4, -7, 0, 9, 1, 2};
  coil_debug_value size{}, number{};
  size.name = "n", size.kind = COIL_DEBUG_SIZE, size.size = 42;
  number.name = "alpha", number.kind = COIL_DEBUG_FLOAT, number.number = 3;
  testing::internal::CaptureStderr();
  EXPECT_EQ(report(p, 0, "k0_add", COIL_DEBUG_AFTER,
                   {tensor("a", COIL_DTYPE_F32, small, a, true),
                    tensor("b", COIL_DTYPE_F32, big, b.data()),
                    tensor("c", COIL_DTYPE_I32, small, ints), size, number}),
            0);
  std::string out = testing::internal::GetCapturedStderr();
  EXPECT_EQ(out, "[after_launch: k0_add]\n"
                 "  a [written]: f32 shape [2, 3] strides [3, 1] device cpu numel 6\n"
                 "    min -2 max inf mean inf nan 2 inf 1\n"
                 "    values [1.5, nan, -2, inf, nan, 0.5]\n"
                 "  b: f32 shape [65] strides [1] device cpu numel 65\n"
                 "    min 0 max 64 mean 32 nan 0 inf 0\n"
                 "  c: i32 shape [2, 3] strides [3, 1] device cpu numel 6\n"
                 "    min -7 max 9 mean 1.5 nan 0 inf 0\n"
                 "    values [4, -7, 0, 9, 1, 2]\n"
                 "  n: i64 = 42\n"
                 "  alpha: f64 = 3.0\n");
}

TEST(DebugPrinter, NamesOnly) {
  auto c = debugConfig("names", nullptr, nullptr, launches(), "m");
  ASSERT_TRUE(c.ok());
  DebugPrinter p(*c, launches());
  std::vector<int64_t> shape{1};
  float x = 1;
  testing::internal::CaptureStderr();
  report(p, 2, "ext_gemm_1", COIL_DEBUG_BEFORE, {tensor("x", COIL_DTYPE_F32, shape, &x)});
  report(p, 2, "ext_gemm_1", COIL_DEBUG_AFTER, {tensor("x", COIL_DTYPE_F32, shape, &x)});
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "[before_launch: ext_gemm_1]\n[after_launch: ext_gemm_1]\n");
}

// The device path without a GPU: driver functions over host memory that record their calls.
std::vector<std::string> g_calls;
int fakeSync(void *stream) {
  g_calls.push_back("sync " + std::to_string(*static_cast<int *>(stream)));
  return 0;
}
int fakeCopy(void *dst, uint64_t src, size_t bytes) {
  g_calls.push_back("copy " + std::to_string(bytes));
  std::memcpy(dst, reinterpret_cast<const void *>(uintptr_t(src)), bytes);
  return 0;
}
int failingSync(void *) {
  return 700;
}
int errorName(int result, const char **name) {
  *name = result == 700 ? "CUDA_ERROR_ILLEGAL_ADDRESS" : "?";
  return 0;
}

TEST(DebugPrinter, DeviceMemoryGoesThroughTheReaderWithTheRunsStream) {
  auto c = debugConfig("print", nullptr, nullptr, launches(), "m");
  ASSERT_TRUE(c.ok());
  DebugPrinter p(*c, launches());
  std::vector<int64_t> shape{3};
  float x[3] = {1, 2, 4};
  coil_debug_value v = tensor("x", COIL_DTYPE_F32, shape, x);
  v.on_device = 1;
  coil_cuda_ctx ctx{};
  int streamObject = 17;
  ctx.stream = &streamObject;
  setDebugDeviceReader({});
  testing::internal::CaptureStderr();
  report(p, 0, "k0_add", COIL_DEBUG_BEFORE, {v}, &ctx);
  EXPECT_NE(testing::internal::GetCapturedStderr().find(
                "device cuda numel 3\n    (device memory, and no device reader is registered)"),
            std::string::npos);
  setDebugDeviceReader({&fakeSync, &fakeCopy, &errorName});
  testing::internal::CaptureStderr();
  report(p, 0, "k0_add", COIL_DEBUG_BEFORE, {v}, &ctx);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("values [1, 2, 4]"), std::string::npos);
  // The run's stream is synchronized before the copy.
  EXPECT_EQ(g_calls, (std::vector<std::string>{"sync 17", "copy 12"}));
  setDebugDeviceReader({&failingSync, &fakeCopy, &errorName});
  testing::internal::CaptureStderr();
  report(p, 0, "k0_add", COIL_DEBUG_BEFORE, {v}, &ctx);
  EXPECT_NE(testing::internal::GetCapturedStderr().find(
                "(cannot read device memory: cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS)"),
            std::string::npos);
  setDebugDeviceReader({});
}

// coil_debug_read_value, what `coil verify --kernels` reads every launch's outputs with (issue 15:
// it refused device memory, so it did not work on CUDA packages): host values are copied,
// device values go through the reader after the launch's stream is synchronized.
TEST(DebugPrinter, ReadValueCopiesHostAndDeviceMemory) {
  std::vector<int64_t> shape{3};
  float x[3] = {1.5f, -2, 4};
  coil_debug_value v = tensor("x", COIL_DTYPE_F32, shape, x);
  coil_cuda_ctx ctx{};
  int streamObject = 23;
  ctx.stream = &streamObject;
  coil_debug_launch l{};
  l.name = "k0_add";
  l.device_ctx = &ctx;
  float got[3] = {0, 0, 0};
  g_calls.clear();
  setDebugDeviceReader({&fakeSync, &fakeCopy, &errorName});
  ASSERT_EQ(coil_debug_read_value(&l, &v, got, sizeof got), COIL_OK) << coil_last_error();
  EXPECT_EQ(std::memcmp(got, x, sizeof x), 0);
  EXPECT_TRUE(g_calls.empty()); // host memory: no driver call
  v.on_device = 1;
  float dev[3] = {0, 0, 0};
  ASSERT_EQ(coil_debug_read_value(&l, &v, dev, sizeof dev), COIL_OK) << coil_last_error();
  EXPECT_EQ(std::memcmp(dev, x, sizeof x), 0);
  EXPECT_EQ(g_calls, (std::vector<std::string>{"sync 23", "copy 12"}));
  // Failures are errors with a message, never a crash.
  setDebugDeviceReader({&failingSync, &fakeCopy, &errorName});
  EXPECT_EQ(coil_debug_read_value(&l, &v, dev, sizeof dev), COIL_ERROR_RUNTIME);
  EXPECT_NE(std::string(coil_last_error()).find("cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS"),
            std::string::npos)
      << coil_last_error();
  setDebugDeviceReader({});
  EXPECT_EQ(coil_debug_read_value(&l, &v, dev, sizeof dev), COIL_ERROR_RUNTIME);
  EXPECT_NE(std::string(coil_last_error()).find("no device reader is registered"),
            std::string::npos);
  coil_debug_value size = v;
  size.kind = COIL_DEBUG_SIZE;
  EXPECT_EQ(coil_debug_read_value(&l, &size, dev, sizeof dev), COIL_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(coil_debug_read_value(&l, nullptr, dev, sizeof dev), COIL_ERROR_INVALID_ARGUMENT);
  v.data = nullptr;
  EXPECT_EQ(coil_debug_read_value(&l, &v, dev, sizeof dev), COIL_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(coil_debug_read_value(&l, &v, dev, 0), COIL_OK); // nothing to read
}

// A real package: instrumented by the pass, run with hooks of the test's own.
const char *kKernels = R"(
#include <coil/model_abi.h>
#include <cstdint>
extern "C" {
void k_scale_c0(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];
}
int32_t t_add(const void *x, void *y, int64_t n, double c) {
  for (int64_t i = 0; i < n; ++i) ((float *)y)[i] = ((const float *)x)[i] + float(c);
  return 0;
}
int32_t t_positive(coil_alloc_fn alloc, void *ctx, const void *xv, int64_t n, void **vals,
                   int64_t *count) {
  const float *x = (const float *)xv;
  int64_t k = 0;
  for (int64_t i = 0; i < n; ++i) k += x[i] > 0;
  float *v = (float *)alloc(ctx, size_t(k) * 4);
  *vals = v;
  if (!v && k) { *count = 0; return 1; }
  k = 0;
  for (int64_t i = 0; i < n; ++i)
    if (x[i] > 0) v[k++] = x[i];
  *count = k;
  return 0;
}
}
)";

/// y = positive(2 * x + 0.5): a kernel, an extern with a float, an allocating extern.
wrapper::WrapperProgram program() {
  using namespace wrapper;
  using namespace wrapper::testing;
  ProgramBuilder b("dbg");
  BufferId x = b.input("x", DType::F32, {sym("N")});
  BufferId t0 = b.temp("t0", DType::F32, {sym("N")});
  BufferId t1 = b.temp("t1", DType::F32, {sym("N")});
  BufferId y = b.output("y", DType::F32, {sym("u")});
  KernelId scale = b.kernel("k_scale", {bufParam("x", DType::F32, false),
                                        bufParam("y", DType::F32, true), sizeParam("n")});
  b.p.symbols["N"] = {0, 4096};
  b.bind("N", x, 0);
  b.line(KernelDefinition{scale});
  b.alloc(t0);
  b.call(scale, {bufArg(x), bufArg(t0), sizeArg(sym("N"))});
  b.alloc(t1);
  b.line(ExternKernelOut{"t_add", {exIn(t0), exOut(t1), exSize(sym("N")), exFloat(0.5)}, {}});
  b.free(t0);
  b.line(ExternKernelAlloc{
      "t_positive", {exIn(t1), exSize(sym("N")), exOut(y), exSym("u")}, {"u"}, {}});
  b.free(t1);
  return b.p;
}

struct Event {
  int32_t id, when;
  std::string name;
  std::vector<std::string> values;
  std::vector<std::vector<float>> data; ///< f32 tensors' contents
  std::vector<int64_t> sizes;
  std::vector<double> numbers;
};

int32_t record(void *ctx, const coil_debug_launch *l) {
  auto *events = static_cast<std::vector<Event> *>(ctx);
  Event e{l->id, l->when, l->name, {}, {}, {}, {}};
  for (int32_t i = 0; i < l->num_values; ++i) {
    const coil_debug_value &v = l->values[i];
    e.values.push_back(v.name + std::string(v.written ? "*" : ""));
    if (v.kind == COIL_DEBUG_SIZE) e.sizes.push_back(v.size);
    if (v.kind == COIL_DEBUG_FLOAT) e.numbers.push_back(v.number);
    if (v.kind == COIL_DEBUG_TENSOR && v.dtype == COIL_DTYPE_F32) {
      int64_t n = 1;
      for (int32_t d = 0; d < v.rank; ++d) n *= v.shape[d];
      const float *f = static_cast<const float *>(v.data);
      e.data.emplace_back(f, f + n);
    }
  }
  events->push_back(std::move(e));
  return 0;
}

TEST(DebugPrinter, HooksOfOnesOwnSeeEveryLaunch) {
  wrapper::WrapperProgram p = program();
  ASSERT_TRUE(wrapper::planMemory(p, {}).ok());
  wrapper::insertDebugPrints(p);
  Status st = wrapper::verifyWrapper(p);
  ASSERT_TRUE(st.ok()) << st.error().render();
  TempDir dir;
  ASSERT_EQ(wrapper::testing::buildPackage(dir.path, p, {}, kKernels), "");
  coil_model *m = nullptr;
  ASSERT_EQ(coil_model_load(dir.path.c_str(), &m), COIL_OK) << coil_last_error();
  ASSERT_EQ(coil_model_num_launches(m), 3);
  EXPECT_STREQ(coil_model_launch_name(m, 0), "k_scale");
  EXPECT_STREQ(coil_model_launch_name(m, 2), "t_positive");
  EXPECT_EQ(coil_model_launch_name(m, 3), nullptr);

  std::vector<Event> events;
  uint8_t enabled[3] = {1, 1, 1};
  coil_debug_hooks hooks{COIL_DEBUG_ABI_VERSION, 3, enabled, &events, &record};
  coil_debug_hooks wrong = hooks;
  wrong.num_launches = 2;
  EXPECT_EQ(coil_model_set_debug_hooks(m, &wrong), COIL_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(coil_model_set_debug_hooks(m, &hooks), COIL_OK);

  std::vector<float> x = {1, -3, 2, -0.5f, 7};
  int64_t n = int64_t(x.size());
  coil_tensor in{x.data(), COIL_DTYPE_F32, 1, &n};
  coil_output out{};
  ASSERT_EQ(coil_model_run(m, &in, 1, &out, 1), COIL_OK) << coil_last_error();
  coil_output_release(&out);
  ASSERT_EQ(events.size(), 6u);
  const char *names[] = {"k_scale", "k_scale", "t_add", "t_add", "t_positive", "t_positive"};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(events[i].name, names[i]);
    EXPECT_EQ(events[i].id, int32_t(i / 2));
    EXPECT_EQ(events[i].when, i % 2 ? COIL_DEBUG_AFTER : COIL_DEBUG_BEFORE);
  }
  EXPECT_EQ(events[1].values, (std::vector<std::string>{"x", "y*", "n"}));
  EXPECT_EQ(events[1].data[1], (std::vector<float>{2, -6, 4, -1, 14}));
  EXPECT_EQ(events[1].sizes, std::vector<int64_t>{5});
  EXPECT_EQ(events[3].values, (std::vector<std::string>{"in0", "out0*", "size0", "float0"}));
  EXPECT_EQ(events[3].numbers, std::vector<double>{0.5});
  EXPECT_EQ(events[3].data[1], (std::vector<float>{2.5f, -5.5f, 4.5f, -0.5f, 14.5f}));
  // The allocating extern: before, its input and size; after, its output and the symbol.
  EXPECT_EQ(events[4].values, (std::vector<std::string>{"in0", "size0"}));
  EXPECT_EQ(events[5].values, (std::vector<std::string>{"in0", "size0", "out0*", "u"}));
  EXPECT_EQ(events[5].data[1], (std::vector<float>{2.5f, 4.5f, 14.5f}));
  EXPECT_EQ(events[5].sizes, (std::vector<int64_t>{5, 3}));

  // A launch switched off is not reported; without hooks nothing is.
  enabled[1] = 0;
  events.clear();
  ASSERT_EQ(coil_model_run(m, &in, 1, &out, 1), COIL_OK) << coil_last_error();
  coil_output_release(&out);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[2].name, "t_positive");
  ASSERT_EQ(coil_model_set_debug_hooks(m, nullptr), COIL_OK);
  events.clear();
  ASSERT_EQ(coil_model_run(m, &in, 1, &out, 1), COIL_OK) << coil_last_error();
  coil_output_release(&out);
  EXPECT_TRUE(events.empty());
  coil_model_free(m);
}

TEST(DebugPrinter, EnvironmentIsReadWhenTheModelLoads) {
  wrapper::WrapperProgram p = program();
  wrapper::insertDebugPrints(p);
  TempDir dir;
  ASSERT_EQ(wrapper::testing::buildPackage(dir.path, p, {}, kKernels), "");
  setenv("COIL_DEBUG_PRINTER", "names", 1);
  setenv("COIL_DEBUG_KERNELS", "t_add", 1);
  coil_model *m = nullptr;
  ASSERT_EQ(coil_model_load(dir.path.c_str(), &m), COIL_OK) << coil_last_error();
  // Changing the environment after the load changes nothing.
  setenv("COIL_DEBUG_PRINTER", "off", 1);
  std::vector<float> x = {1, 2};
  int64_t n = 2;
  coil_tensor in{x.data(), COIL_DTYPE_F32, 1, &n};
  coil_output out{};
  testing::internal::CaptureStderr();
  ASSERT_EQ(coil_model_run(m, &in, 1, &out, 1), COIL_OK) << coil_last_error();
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "[before_launch: t_add]\n[after_launch: t_add]\n");
  coil_output_release(&out);
  coil_model_free(m);
  // An unknown name fails the load.
  setenv("COIL_DEBUG_PRINTER", "print", 1);
  setenv("COIL_DEBUG_KERNELS", "k_scale,t_sub", 1);
  EXPECT_EQ(coil_model_load(dir.path.c_str(), &m), COIL_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(coil_last_error())
                .find("COIL_DEBUG_KERNELS names 't_sub', which is not a launch of model 'dbg'; "
                      "valid names: k_scale, t_add, t_positive"),
            std::string::npos)
      << coil_last_error();
  unsetenv("COIL_DEBUG_PRINTER");
  unsetenv("COIL_DEBUG_KERNELS");
}

} // namespace
} // namespace coil::runtime
