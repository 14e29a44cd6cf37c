// Helpers of the wrapper and runtime tests: hand-built WrapperPrograms, hand-written kernel
// sources (fixtures), and building a package's model.so with the host compiler.
#pragma once

#include "wrapper/CppBackend.h"
#include "wrapper/Package.h"
#include "wrapper/WrapperIR.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <random>
#include <string>
#include <unistd.h>

namespace coil::wrapper::testing {

inline SymInt sym(const char *n) {
  return SymInt::symbol(n);
}

class ProgramBuilder {
public:
  explicit ProgramBuilder(std::string name) { p.name = std::move(name); }

  BufferId buffer(std::string name, DType t, std::vector<SymInt> shape, BufferKind kind) {
    Buffer b;
    b.name = std::move(name);
    b.dtype = t;
    b.shape = std::move(shape);
    b.kind = kind;
    BufferId id = BufferId(p.buffers.size());
    if (kind == BufferKind::Input) b.index = int32_t(p.inputs.size()), p.inputs.push_back(id);
    if (kind == BufferKind::Output) b.index = int32_t(p.outputs.size()), p.outputs.push_back(id);
    if (kind == BufferKind::Constant)
      b.index = int32_t(p.constants.size()), p.constants.push_back(id);
    p.buffers.push_back(std::move(b));
    return id;
  }
  BufferId input(std::string n, DType t, std::vector<SymInt> s) {
    return buffer(std::move(n), t, std::move(s), BufferKind::Input);
  }
  BufferId output(std::string n, DType t, std::vector<SymInt> s) {
    return buffer(std::move(n), t, std::move(s), BufferKind::Output);
  }
  BufferId constant(std::string n, DType t, std::vector<SymInt> s) {
    return buffer(std::move(n), t, std::move(s), BufferKind::Constant);
  }
  BufferId temp(std::string n, DType t, std::vector<SymInt> s) {
    return buffer(std::move(n), t, std::move(s), BufferKind::Intermediate);
  }

  /// A kernel with `configs` configs; params given as (name, kind, dtype, written).
  KernelId kernel(std::string name, std::vector<KernelParam> params, int nConfigs = 1) {
    KernelInfo k;
    k.name = std::move(name);
    k.params = std::move(params);
    for (int i = 0; i < nConfigs; ++i)
      k.configs.push_back({"cfg" + std::to_string(i), {{"block", 64 << i}}});
    k.sourceFile = "src/kernels.cpp";
    p.kernels.push_back(std::move(k));
    return KernelId(p.kernels.size() - 1);
  }

  void line(Line l) { p.lines.push_back(std::move(l)); }
  void bind(const std::string &s, BufferId b, int32_t dim) { line(BindSymbol{s, b, dim}); }
  void alloc(BufferId b) { line(Allocate{b}); }
  void free(BufferId b) { line(Free{b}); }
  void call(KernelId k, std::vector<CallArg> args, int32_t config = 0) {
    line(KernelCall{k, std::move(args), config});
  }

  WrapperProgram p;
};

inline KernelParam bufParam(const char *n, DType t, bool written) {
  return {KernelParam::Kind::Buffer, n, t, written};
}
inline KernelParam sizeParam(const char *n) {
  return {KernelParam::Kind::Size, n, DType::I64, false};
}
inline CallArg bufArg(BufferId b) {
  CallArg a;
  a.kind = CallArg::Kind::Buffer;
  a.buffer = b;
  return a;
}
inline CallArg sizeArg(SymInt s) {
  CallArg a;
  a.kind = CallArg::Kind::Size;
  a.size = std::move(s);
  return a;
}
inline ExternArg exIn(BufferId b) {
  ExternArg a;
  a.kind = ExternArg::Kind::Buffer;
  a.buffer = b;
  return a;
}
inline ExternArg exOut(BufferId b) {
  ExternArg a;
  a.kind = ExternArg::Kind::Output;
  a.buffer = b;
  return a;
}
inline ExternArg exSize(SymInt s) {
  ExternArg a;
  a.kind = ExternArg::Kind::Size;
  a.size = std::move(s);
  return a;
}
inline ExternArg exFloat(double v) {
  ExternArg a;
  a.kind = ExternArg::Kind::Float;
  a.number = v;
  return a;
}
inline ExternArg exSym(std::string s) {
  ExternArg a;
  a.kind = ExternArg::Kind::OutSymbol;
  a.symbol = std::move(s);
  return a;
}

/// A fresh directory under the build's temp space, removed by the destructor.
struct TempDir {
  TempDir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "coil-wrapper-test-XXXXXX").string();
    path = mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty() && !std::getenv("COIL_KEEP_TEST_DIRS")) std::filesystem::remove_all(path, ec);
  }
  std::string path;
};

inline void writeFile(const std::string &path, const std::string &text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream f(path, std::ios::binary);
  f << text;
}

inline std::string readFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// Compiles `sources` (package-relative) of package `dir` into dir/model.so the way the driver
/// does: `c++ -O2 -std=c++17 -fPIC -shared -I<repo>/include`, then seals the package
/// (sealPackage over weights.bin, model.so and src/wrapper.py) as the driver does after its
/// build. Returns the compiler's output on failure, "" on success.
inline std::string compileModel(const std::string &dir, const std::vector<std::string> &sources) {
  std::string cmd = "c++ -O2 -std=c++17 -fPIC -shared -I" COIL_SOURCE_DIR "/include";
  for (const std::string &s : sources) cmd += " '" + dir + "/" + s + "'";
  cmd += " -o '" + dir + "/model.so' > '" + dir + "/cc.log' 2>&1";
  if (std::system(cmd.c_str()) != 0) return "compile failed:\n" + readFile(dir + "/cc.log");
  Status st = sealPackage(dir, sealedFiles(PackageOptions{}));
  if (!st) return st.error().render();
  return "";
}

/// metadata.json's body: its text without the integrity record (src/wrapper/Package.h).
inline std::string metadataBody(const std::string &metadata) {
  size_t at = metadata.rfind(kIntegritySeparator);
  return at == std::string::npos ? metadata : metadata.substr(0, at) + "\n}\n";
}

/// writePackage + the fixture sources + model.so.
inline std::string buildPackage(const std::string &dir, const WrapperProgram &p,
                                const std::vector<ConstantBlob> &constants,
                                const std::string &kernelSource) {
  Status st = writePackage(dir, p, constants, PackageOptions{});
  if (!st) return st.error().render();
  writeFile(dir + "/src/kernels.cpp", kernelSource);
  return compileModel(dir, {"src/wrapper.cpp", "src/kernels.cpp"});
}

} // namespace coil::wrapper::testing
