// CUDA packages on the CPU side: metadata.json's "cuda" object (parsed and checked, errors
// naming the field) and loading a CUDA package where libcoil_cuda, the driver or a GPU is
// missing (a package error with a message, never a crash). The GPU side is gputests/.
#include "../wrapper/WrapperTestUtil.h"
#include "runtime/Metadata.h"
#include "support/Sha256.h"

#include <coil/coil.h>
#include <cstdlib>

namespace coil::runtime {
namespace {

using coil::wrapper::testing::readFile;
using coil::wrapper::testing::TempDir;
using coil::wrapper::testing::writeFile;

const char *kCuda =
    R"({"fatbin": "src/kernels.fatbin", "functions": ["k0_c0_kernel", "k1_c0_kernel"],
  "archs": ["sm_80", "sm_90a"], "host_fallback": false, "workspace_bytes": 4096})";

/// A metadata.json of a one-input, one-output, one-constant model for `device`, with `cuda`
/// (JSON text) as its "cuda" member unless empty.
std::string metadata(const std::string &device, const std::string &cuda) {
  std::string s = R"({"format": "coil-package", "format_version": 2, "model_abi_version": 2,
  "name": "tiny", "device": ")" +
                  device + R"(", "library": "model.so", "weights": "weights.bin",
  "weights_bytes": 16, "symbols": [{"name": "N", "min": 1, "max": 64}],
  "bindings": [{"symbol": "N", "input": 0, "dim": 0}],
  "inputs": [{"name": "x", "dtype": "f32", "shape": ["N", "4"]}],
  "outputs": [{"name": "y", "dtype": "f32", "shape": ["N", "4"]}],
  "constants": [{"name": "w", "dtype": "f32", "shape": [4], "offset": 0, "bytes": 16}])";
  if (!cuda.empty()) s += ", \"cuda\": " + cuda;
  return s + "\n}\n";
}

/// metadata.json with the member `key` of the cuda object replaced by `value` (JSON text).
std::string withCudaMember(const std::string &key, const std::string &value) {
  std::string c = kCuda;
  size_t k = c.find("\"" + key + "\"");
  EXPECT_NE(k, std::string::npos) << key;
  size_t start = c.find(':', k) + 1;
  size_t end = start;
  int depth = 0;
  for (; end < c.size(); ++end) {
    char ch = c[end];
    if (ch == '[') ++depth;
    if (ch == ']') --depth;
    if (depth == 0 && (ch == ',' || ch == '}')) break;
  }
  return metadata("cuda", c.substr(0, start) + " " + value + c.substr(end));
}

std::string parseError(const std::string &text) {
  auto m = parseMetadata(text);
  return m ? std::string("parsed") : m.error().message();
}

TEST(CudaMetadata, ParsesTheCudaObject) {
  auto m = parseMetadata(metadata("cuda", kCuda));
  ASSERT_TRUE(m.ok()) << m.error().message();
  ASSERT_TRUE(m->cuda.has_value());
  EXPECT_EQ(m->device, "cuda");
  EXPECT_EQ(m->cuda->fatbin, "src/kernels.fatbin");
  EXPECT_EQ(m->cuda->functions, (std::vector<std::string>{"k0_c0_kernel", "k1_c0_kernel"}));
  EXPECT_EQ(m->cuda->archs, (std::vector<std::string>{"sm_80", "sm_90a"}));
  EXPECT_FALSE(m->cuda->hostFallback);
  EXPECT_EQ(m->cuda->workspaceBytes, 4096);

  auto fallback = parseMetadata(withCudaMember("host_fallback", "true"));
  ASSERT_TRUE(fallback.ok()) << fallback.error().message();
  EXPECT_TRUE(fallback->cuda->hostFallback);
  auto none = parseMetadata(withCudaMember("functions", "[]"));
  ASSERT_TRUE(none.ok()) << none.error().message();
  EXPECT_TRUE(none->cuda->functions.empty());

  auto cpu = parseMetadata(metadata("cpu", ""));
  ASSERT_TRUE(cpu.ok()) << cpu.error().message();
  EXPECT_FALSE(cpu->cuda.has_value());
}

TEST(CudaMetadata, ErrorsNameTheField) {
  struct Case {
    std::string text, message;
  };
  std::vector<Case> cases = {
      {metadata("cuda", ""), "'cuda' is missing"},
      {metadata("cuda", "[1]"), "'cuda' must be an object"},
      {withCudaMember("fatbin", "7"), "'cuda.fatbin' must be a string"},
      {withCudaMember("fatbin", "\"/tmp/k.fatbin\""), "'cuda.fatbin' must be a relative path"},
      {withCudaMember("fatbin", "\"src/../../k.fatbin\""), "'cuda.fatbin' must be a relative path"},
      {withCudaMember("fatbin", "\"\""), "'cuda.fatbin' must be a relative path"},
      {withCudaMember("functions", "\"k0\""), "'cuda.functions' must be an array"},
      {withCudaMember("functions", "[\"k0\", 3]"), "'cuda.functions[1]' must be a string"},
      {withCudaMember("functions", "[\"k0 x\"]"),
       "'cuda.functions[0]' must be a C identifier, got \"k0 x\""},
      {withCudaMember("archs", "[]"), "'cuda.archs' must name at least one architecture"},
      {withCudaMember("archs", "[\"sm_90a\", \"compute_90\"]"),
       "'cuda.archs[1]' must be an architecture such as"},
      {withCudaMember("archs", "[\"sm_9\"]"), "'cuda.archs[0]' must be an architecture"},
      {withCudaMember("host_fallback", "0"), "'cuda.host_fallback' must be a boolean"},
      {withCudaMember("workspace_bytes", "-1"), "'cuda.workspace_bytes' must be >= 0, got -1"},
      {withCudaMember("workspace_bytes", "1.5"), "'cuda.workspace_bytes' must be an int64 integer"},
  };
  for (const Case &c : cases) {
    std::string e = parseError(c.text);
    EXPECT_NE(e.find(c.message), std::string::npos) << "got: " << e << "\nwant: " << c.message;
  }
  // Every member is required.
  const std::vector<std::pair<std::string, std::string>> members = {
      {"fatbin", "\"src/kernels.fatbin\""},
      {"functions", "[\"k0\"]"},
      {"archs", "[\"sm_80\"]"},
      {"host_fallback", "false"},
      {"workspace_bytes", "0"}};
  for (size_t skip = 0; skip < members.size(); ++skip) {
    std::string obj;
    for (size_t i = 0; i < members.size(); ++i)
      if (i != skip)
        obj += (obj.empty() ? "{" : ", ") + ("\"" + members[i].first + "\": ") + members[i].second;
    std::string e = parseError(metadata("cuda", obj + "}"));
    EXPECT_NE(e.find("'cuda." + members[skip].first + "' is missing"), std::string::npos)
        << members[skip].first << ": " << e;
  }
}

/// A CUDA package that cannot run: metadata.json, weights.bin, a fatbin that is not one and a
/// model.so that is no shared object, only the mark of this metadata (loading must stop at the
/// CUDA library or the fatbin, before model.so). Sealed, so that the integrity checks pass.
struct FakeCudaPackage {
  FakeCudaPackage(const std::string &device = "cuda") {
    std::string body = metadata(device, device == "cuda" ? kCuda : "");
    writeFile(dir.path + "/metadata.json", body);
    writeFile(dir.path + "/weights.bin", std::string(16, '\1'));
    writeFile(dir.path + "/src/kernels.fatbin", "not a fatbin");
    writeFile(dir.path + "/model.so", std::string("\x7f"
                                                  "ELF?") +
                                          wrapper::kMetadataMarker + sha256Hex(body) +
                                          std::string(8, '\0'));
    Status st = wrapper::sealPackage(dir.path, {"weights.bin", "model.so", "src/kernels.fatbin"});
    EXPECT_TRUE(st.ok()) << st.error().render();
  }
  TempDir dir;
};

/// Sets an environment variable for the scope.
struct ScopedEnv {
  ScopedEnv(const char *name, const char *value) : name(name) {
    if (const char *old = std::getenv(name)) saved = old, had = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had)
      setenv(name, saved.c_str(), 1);
    else
      unsetenv(name);
  }
  const char *name;
  std::string saved;
  bool had = false;
};

TEST(CudaPackage, MissingCudaLibraryIsAPackageError) {
  FakeCudaPackage pkg;
  ScopedEnv env("COIL_CUDA_LIBRARY", "/nonexistent/libcoil_cuda.so");
  coil_model *m = nullptr;
  EXPECT_EQ(coil_model_load(pkg.dir.path.c_str(), &m), COIL_ERROR_PACKAGE);
  EXPECT_EQ(m, nullptr);
  std::string e = coil_last_error();
  EXPECT_NE(e.find("package '" + pkg.dir.path + "'"), std::string::npos) << e;
  EXPECT_NE(e.find("cannot load the CUDA runtime library '/nonexistent/libcoil_cuda.so'"),
            std::string::npos)
      << e;
}

TEST(CudaPackage, LoadingWithoutAGpuIsAPackageError) {
  // Here libcoil_cuda.so (next to libcoil_runtime.so) cannot load without libcuda.so.1, or the
  // driver finds no GPU; on a GPU machine the fake fatbin is refused. A package error each time.
  FakeCudaPackage pkg;
  coil_model *m = nullptr;
  EXPECT_EQ(coil_model_load(pkg.dir.path.c_str(), &m), COIL_ERROR_PACKAGE);
  EXPECT_EQ(m, nullptr);
  std::string e = coil_last_error();
  EXPECT_NE(e.find("package '" + pkg.dir.path + "'"), std::string::npos) << e;
  bool noGpu = e.find("libcuda.so.1") != std::string::npos ||
               e.find("cannot initialize the CUDA driver") != std::string::npos ||
               e.find("no CUDA device") != std::string::npos;
  bool badFatbin = e.find("src/kernels.fatbin") != std::string::npos;
  EXPECT_TRUE(noGpu || badFatbin) << e;
}

TEST(CudaPackage, MissingFatbinIsAPackageError) {
  FakeCudaPackage pkg;
  std::filesystem::remove(pkg.dir.path + "/src/kernels.fatbin");
  coil_model *m = nullptr;
  EXPECT_EQ(coil_model_load(pkg.dir.path.c_str(), &m), COIL_ERROR_PACKAGE);
  std::string e = coil_last_error();
  EXPECT_NE(e.find("cannot open src/kernels.fatbin (metadata.json cuda.fatbin)"), std::string::npos)
      << e;
}

TEST(CudaPackage, UnknownDeviceIsAPackageError) {
  FakeCudaPackage pkg("tpu");
  coil_model *m = nullptr;
  EXPECT_EQ(coil_model_load(pkg.dir.path.c_str(), &m), COIL_ERROR_PACKAGE);
  EXPECT_NE(std::string(coil_last_error()).find("compiled for device 'tpu'"), std::string::npos)
      << coil_last_error();
}

} // namespace
} // namespace coil::runtime
