#include "driver/Toolchain.h"

#include "support/Sha256.h"
#include "support/Version.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace coil {

namespace fs = std::filesystem;

namespace {

std::string shellQuote(const std::string &s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

/// Runs `cmd` through /bin/sh with output to `log`; returns the exit status.
pid_t spawn(const std::string &cmd, const std::string &log) {
  std::string full = cmd + " >" + shellQuote(log) + " 2>&1";
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", full.c_str(), (char *)nullptr);
    _exit(127);
  }
  return pid;
}

int waitFor(pid_t pid) {
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string firstLines(const std::string &text, int n) {
  std::string out;
  std::istringstream is(text);
  std::string line;
  for (int i = 0; i < n && std::getline(is, line); ++i) out += "\n  " + line;
  return out;
}

} // namespace

Expected<CpuTarget> resolveCpuTarget(const std::string &requested) {
  CpuTarget t;
  __builtin_cpu_init();
  const std::string hostLevel = __builtin_cpu_supports("x86-64-v4")   ? "x86-64-v4"
                                : __builtin_cpu_supports("x86-64-v3") ? "x86-64-v3"
                                                                      : "x86-64-v2";
  if (requested.empty() || requested == "x86-64-v2" || requested == "x86-64-v3" ||
      requested == "x86-64-v4") {
    t.level = requested.empty() ? "x86-64-v2" : requested;
    t.march = "-march=" + t.level;
    // The default stays portable and runs at this CPU's speed: its kernels have a copy for
    // this CPU's level (AVX2 or AVX-512 vector loops are 2-4x faster than SSE's).
    if (requested.empty() && hostLevel != t.level) t.clones.push_back(hostLevel);
    return t;
  }
  if (requested != "native")
    return Error::user("unknown CPU target '" + requested +
                       "' (supported: native, x86-64-v2, x86-64-v3, x86-64-v4)");
  t.level = hostLevel;
  // -march=native may use any extension of this CPU: those beyond its level are recorded too
  // (the names of __builtin_cpu_supports, which the runtime checks).
#define COIL_CPU_EXTENSION(name)                                                                   \
  if (__builtin_cpu_supports(name)) t.features.push_back(name);
  COIL_CPU_EXTENSION("aes")
  COIL_CPU_EXTENSION("pclmul")
  COIL_CPU_EXTENSION("gfni")
  COIL_CPU_EXTENSION("vpclmulqdq")
  COIL_CPU_EXTENSION("avx512vbmi")
  COIL_CPU_EXTENSION("avx512ifma")
  COIL_CPU_EXTENSION("avx512vpopcntdq")
  COIL_CPU_EXTENSION("avx512vbmi2")
  COIL_CPU_EXTENSION("avx512vnni")
  COIL_CPU_EXTENSION("avx512bitalg")
  COIL_CPU_EXTENSION("avx512bf16")
#undef COIL_CPU_EXTENSION
  t.march = "-march=native";
  return t;
}

namespace {

bool isExecutable(const std::string &path) {
  return !path.empty() && access(path.c_str(), X_OK) == 0;
}

/// `name` found on $PATH, or "".
std::string onPath(const std::string &name) {
  const char *path = std::getenv("PATH");
  if (!path) return "";
  std::istringstream is(path);
  std::string dir;
  while (std::getline(is, dir, ':'))
    if (!dir.empty() && isExecutable(dir + "/" + name)) return dir + "/" + name;
  return "";
}

/// Whether the compiler of `identity` (compilerIdentity) builds level copies: not clang.
bool identityBuildsLevelCopies(const std::string &identity) {
  return identity.find("clang") == std::string::npos;
}

/// The text every cache key starts with: the key format and coil's version.
std::string keyPrefix(const char *what) {
  return std::string("coil-") + what + " 2\ncoil " + kCoilVersion + "\n";
}

/// "x86-64-v4" -> "x86_64_v4": the suffix of a copy's function names.
std::string levelSuffix(const std::string &level) {
  std::string s = level;
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

/// The translation unit that compiles the generated kernel file `path` (defining `s.exports`)
/// for `level`, each export renamed <name>__<level suffix>. A copy above the package's base
/// level includes the file's headers first, so that they stay compiled for the base level (the
/// inline functions of the standard library are merged across units: an AVX-512 copy of one
/// must not serve the base code), then the file under `#pragma GCC target` in a namespace of
/// its own (its helpers differ from another copy's); every copy is hidden (not exported from
/// model.so). The base copy also defines each export as
/// an ifunc: the dynamic loader calls its resolver once and binds the name to the copy of the
/// highest level this CPU has.
std::string isaUnit(const std::string &path, const SourceFile &s, const std::string &level,
                    const std::string &base, const std::vector<std::string> &clones) {
  std::ostringstream os;
  const std::string suffix = "__" + levelSuffix(level);
  os << "// coil: " << path << " for " << level << " (Toolchain.h: CpuTarget::clones)\n";
  const bool copy = level != base;
  if (copy) {
    std::istringstream in(s.text);
    for (std::string line; std::getline(in, line);)
      if (line.rfind("#include", 0) == 0) os << line << "\n";
    os << "#pragma GCC push_options\n#pragma GCC target(\"arch=" << level << "\")\nnamespace coil_"
       << levelSuffix(level) << " {\n";
  }
  for (const std::string &e : s.exports) os << "#define " << e << " " << e << suffix << "\n";
  // The copies are internal to model.so: only the ifunc names below are its entry points.
  os << "#pragma GCC visibility push(hidden)\n#include \"" << path
     << "\"\n#pragma GCC visibility pop\n";
  for (const std::string &e : s.exports) os << "#undef " << e << "\n";
  if (copy) {
    os << "} // namespace coil_" << levelSuffix(level) << "\n#pragma GCC pop_options\n";
    return os.str();
  }
  os << "\nstatic int coil_isa_level() {\n  __builtin_cpu_init();\n"
     << "  return __builtin_cpu_supports(\"x86-64-v4\") ? 4\n"
     << "         : __builtin_cpu_supports(\"x86-64-v3\") ? 3 : 2;\n}\n";
  for (const std::string &e : s.exports) {
    const std::string baseName = e + suffix;
    for (const std::string &c : clones)
      os << "extern \"C\" __attribute__((visibility(\"hidden\"))) decltype(" << baseName << ") "
         << e << "__" << levelSuffix(c) << ";\n";
    os << "extern \"C\" {\nstatic void *" << e << "__resolve() {\n"
       << "  const int level = coil_isa_level();\n";
    for (auto c = clones.rbegin(); c != clones.rend(); ++c)
      os << "  if (level >= " << c->back() << ") return reinterpret_cast<void *>(&" << e << "__"
         << levelSuffix(*c) << ");\n";
    os << "  return reinterpret_cast<void *>(&" << baseName << ");\n}\n}\n";
    os << "extern \"C\" decltype(" << baseName << ") " << e << " __attribute__((ifunc(\"" << e
       << "__resolve\")));\n";
  }
  return os.str();
}

} // namespace

std::string hostCompiler(const std::string &cxx) {
  if (!cxx.empty()) return cxx;
  const char *env = std::getenv("CXX");
  return env && *env ? env : "c++";
}

bool buildsLevelCopies(const std::string &cxx) {
  return identityBuildsLevelCopies(compilerIdentity(hostCompiler(cxx)));
}

std::string compilerIdentity(const std::string &compiler) {
  std::string cmd = shellQuote(compiler) + " --version 2>/dev/null";
  std::string out;
  if (FILE *f = popen(cmd.c_str(), "r")) {
    char buf[512];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    pclose(f);
  }
  std::string path = compiler.find('/') == std::string::npos ? onPath(compiler) : compiler;
  std::error_code ec;
  fs::path real = path.empty() ? fs::path() : fs::canonical(path, ec);
  return compiler + "|" + (ec ? path : real.string()) + "|" + out;
}

Expected<BuildResult> buildSharedObject(const std::string &dir,
                                        const std::vector<SourceFile> &sources,
                                        const std::string &output, const ToolchainOptions &opts) {
  auto start = std::chrono::steady_clock::now();
  BuildResult result;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Error::user("cannot create directory '" + dir + "': " + ec.message());
  for (const SourceFile &s : sources) {
    fs::path p = fs::path(dir) / s.name;
    fs::create_directories(p.parent_path(), ec);
    std::ofstream out(p, std::ios::binary);
    out << s.text;
    if (!out) return Error::user("cannot write '" + p.string() + "'");
  }

  std::string cxx = hostCompiler(opts.cxx);
  // The flags but the optimization level, which is per source file.
  COIL_TRY(CpuTarget target, resolveCpuTarget(opts.cpuTarget));
  std::string flags = "-std=c++17 -fPIC -fopenmp " + target.march + " -fno-math-errno -w";
  auto optFlag = [&](const SourceFile &s) {
    int level = s.optLevel < 0 ? opts.optLevel : std::min(s.optLevel, opts.optLevel);
    return "-O" + std::to_string(level);
  };
  for (const std::string &inc : opts.includes) flags += " -I" + shellQuote(inc);
  for (const std::string &inc : opts.systemIncludes) flags += " -isystem " + shellQuote(inc);
  for (const std::string &f : opts.extraFlags) flags += " " + f;
  std::string linkFlags;
  for (const std::string &f : opts.linkFlags) linkFlags += " " + f;

  COIL_TRY(CompileCache cache, opts.useCache ? CompileCache::fromEnvironment()
                                             : Expected<CompileCache>(CompileCache()));
  const std::string cxxIdentity = compilerIdentity(cxx);
  std::string keyText = keyPrefix("build") + cxxIdentity + "\n" + flags + "\n" + linkFlags + "\n";
  if (!identityBuildsLevelCopies(cxxIdentity)) target.clones.clear();
  // -march=native means this CPU: its level and extensions are part of the key.
  keyText += target.level + "\n";
  for (const std::string &f : target.features) keyText += f + " ";
  for (const std::string &c : target.clones) keyText += "clone " + c + " ";
  for (const SourceFile &s : sources)
    keyText += s.name + " " + optFlag(s) + "\n" + sha256Hex(s.text) + "\n";
  // CUDA units: nvcc and its flags (the CUTLASS headers are keyed by their version header).
  std::string cudaFlags = "-std=c++17 -O3 -DNDEBUG -Xcompiler -fPIC -w --expt-relaxed-constexpr";
  for (const std::string &f : opts.cudaFlags) cudaFlags += " " + f;
  std::string cudaKey;
  bool anyCu = false;
  for (const SourceFile &s : sources) anyCu = anyCu || fs::path(s.name).extension() == ".cu";
  if (anyCu) {
    if (opts.nvcc.empty()) return Error::internal("a CUDA unit to build, but no nvcc");
    cudaKey = keyPrefix("cuda-object") + compilerIdentity(opts.nvcc) + "\n" + cudaFlags + "\n";
    for (const std::string &f : opts.cudaFlags)
      if (f.rfind("-I", 0) == 0) {
        fs::path v = fs::path(f.substr(2)) / "cutlass" / "version.h";
        if (fs::exists(v)) cudaKey += sha256Hex(readFile(v.string())) + "\n";
      }
    keyText += cudaKey;
  }
  // Headers included from the -I directories are part of the build too.
  for (const std::string &inc : opts.includes) {
    if (!fs::is_directory(inc)) continue;
    std::vector<fs::path> headers;
    for (auto &e : fs::recursive_directory_iterator(inc, ec))
      if (e.is_regular_file() && e.path().extension() == ".h") headers.push_back(e.path());
    std::sort(headers.begin(), headers.end());
    for (const fs::path &h : headers)
      keyText += h.string() + "\n" + sha256Hex(readFile(h.string())) + "\n";
  }
  // System include directories (the CUDA toolkit) by path and, where it has one, by cuda.h
  // (which names the toolkit's version): hashing every header would cost more than compiling.
  for (const std::string &inc : opts.systemIncludes) {
    fs::path cudaH = fs::path(inc) / "cuda.h";
    keyText += inc + "\n" + (fs::exists(cudaH) ? sha256Hex(readFile(cudaH.string())) : "") + "\n";
  }
  result.key = sha256Hex(keyText);

  fs::path outPath = fs::path(dir) / output;
  std::string entry = result.key + ".so";
  if (cache.fetch(entry, outPath.string())) {
    result.cacheHit = true;
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  }

  // Compile each translation unit in its own process, at most one per processor at a time
  // (in source order, each next one started when the oldest running one ends), then link.
  fs::path objDir = fs::path(dir) / "obj";
  fs::create_directories(objDir, ec);
  struct Job {
    pid_t pid;
    std::string log, source;
    std::string obj, cacheEntry; ///< CUDA units: the object and its cache entry
  };
  size_t slots = std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN));
  std::vector<Job> running;
  std::string objects, failures;
  int64_t units = 0, compiled = 0;
  // A kernel file with exports compiles once per level when the target has clones.
  for (const SourceFile &s : sources)
    if (fs::path(s.name).extension() == ".cpp")
      units += s.exports.empty() ? 1 : 1 + int64_t(target.clones.size());
    else
      units += fs::path(s.name).extension() == ".cu";
  auto progress = [&](int64_t done) {
    if (opts.onProgress) opts.onProgress("build", done, units + 1);
  };
  progress(0);
  auto finishOldest = [&]() {
    Job j = running.front();
    running.erase(running.begin());
    int status = waitFor(j.pid);
    progress(++compiled);
    if (status != 0)
      failures += "\ncompiling " + j.source + " failed (log: " + j.log + ")" +
                  firstLines(readFile(j.log), 12);
    else if (!j.cacheEntry.empty())
      cache.storeFile(j.cacheEntry, j.obj);
  };
  for (const SourceFile &s : sources) {
    if (fs::path(s.name).extension() == ".cu") {
      std::string stem = fs::path(s.name).stem().string();
      std::string obj = (objDir / (stem + ".cu.o")).string();
      objects += " " + shellQuote(obj);
      std::string entry = sha256Hex(cudaKey + sha256Hex(s.text)) + ".o";
      if (cache.fetch(entry, obj)) {
        progress(++compiled);
        continue;
      }
      std::string log = (objDir / (stem + ".cu.log")).string();
      std::string cmd = shellQuote(opts.nvcc) + " " + cudaFlags + " -c " +
                        shellQuote((fs::path(dir) / s.name).string()) + " -o " + shellQuote(obj);
      if (opts.verbose) std::fprintf(stderr, "coil: %s\n", cmd.c_str());
      if (running.size() >= slots) finishOldest();
      running.push_back({spawn(cmd, log), log, s.name, obj, entry});
      continue;
    }
    if (fs::path(s.name).extension() != ".cpp") continue;
    std::string stem = fs::path(s.name).stem().string();
    std::string path = fs::absolute(fs::path(dir) / s.name).string();
    std::vector<std::string> levels = {""}; // "": the file as it is
    if (!s.exports.empty() && !target.clones.empty()) {
      levels = {target.level};
      levels.insert(levels.end(), target.clones.begin(), target.clones.end());
    }
    for (const std::string &level : levels) {
      std::string unit = path, name = stem;
      if (!level.empty()) {
        name = stem + "." + level;
        unit = (objDir / (name + ".cpp")).string();
        std::ofstream(unit) << isaUnit(path, s, level, target.level, target.clones);
      }
      std::string obj = (objDir / (name + ".o")).string();
      std::string log = (objDir / (name + ".log")).string();
      std::string cmd = shellQuote(cxx) + " " + flags + " " + optFlag(s) + " -c " +
                        shellQuote(unit) + " -o " + shellQuote(obj);
      if (opts.verbose) std::fprintf(stderr, "coil: %s\n", cmd.c_str());
      if (running.size() >= slots) finishOldest();
      running.push_back(
          {spawn(cmd, log), log, level.empty() ? s.name : s.name + " (" + level + ")"});
      objects += " " + shellQuote(obj);
    }
  }
  while (!running.empty()) finishOldest();
  if (!failures.empty()) return Error::internal("the generated code does not compile:" + failures);

  std::string tmp = outPath.string() + ".tmp";
  std::string log = (objDir / "link.log").string();
  std::string link =
      shellQuote(cxx) + " -shared -fopenmp" + objects + linkFlags + " -o " + shellQuote(tmp);
  if (opts.verbose) std::fprintf(stderr, "coil: %s\n", link.c_str());
  if (waitFor(spawn(link, log)) != 0)
    return Error::internal("linking the package failed (log: " + log + ")" +
                           firstLines(readFile(log), 12));
  progress(units + 1);
  // The objects and logs are build leftovers: a package holds none (kept on a failure, where
  // the error names the log).
  fs::remove_all(objDir, ec);
  fs::rename(tmp, outPath, ec);
  if (ec) return Error::user("cannot write '" + outPath.string() + "': " + ec.message());

  cache.storeFile(entry, outPath.string());
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

Expected<CudaToolkit> findCudaToolkit() {
  CudaToolkit t;
  if (const char *env = std::getenv("COIL_NVCC"); env && *env) {
    if (!isExecutable(env))
      return Error::user(std::string("COIL_NVCC is '") + env + "', which is not an executable");
    t.nvcc = env;
  } else {
    t.nvcc = onPath("nvcc");
    if (t.nvcc.empty() && isExecutable("/usr/local/cuda/bin/nvcc"))
      t.nvcc = "/usr/local/cuda/bin/nvcc";
  }
  if (t.nvcc.empty())
    return Error::user("compiling for cuda needs nvcc from the CUDA toolkit: none on PATH or at "
                       "/usr/local/cuda/bin/nvcc (set COIL_NVCC to its path)");
  std::error_code ec;
  fs::path root = fs::canonical(t.nvcc, ec).parent_path().parent_path();
  if (ec) root = fs::path(t.nvcc).parent_path().parent_path();
  for (const char *inc : {"include", "targets/x86_64-linux/include"})
    if (fs::exists(root / inc / "cuda.h")) {
      t.includeDir = (root / inc).string();
      break;
    }
  if (t.includeDir.empty())
    return Error::user("the CUDA toolkit at '" + root.string() + "' has no include/cuda.h");
  for (const char *lib : {"lib64/stubs", "targets/x86_64-linux/lib/stubs", "lib/stubs"})
    if (fs::exists(root / lib / "libcuda.so")) {
      t.stubLibDir = (root / lib).string();
      break;
    }
  if (t.stubLibDir.empty())
    return Error::user("the CUDA toolkit at '" + root.string() +
                       "' has no lib64/stubs/libcuda.so to link packages against");
  t.libDir = fs::path(t.stubLibDir).parent_path().string();
  return t;
}

Expected<std::string> findCutlassIncludeDir() {
  auto holds = [](const fs::path &d) {
    return fs::exists(d / "cutlass" / "cutlass.h") && fs::exists(d / "cute" / "tensor.hpp");
  };
  if (const char *env = std::getenv("COIL_CUTLASS_DIR"); env && *env) {
    for (fs::path d : {fs::path(env), fs::path(env) / "include"})
      if (holds(d)) return fs::canonical(d).string();
    return Error::user(std::string("COIL_CUTLASS_DIR is '") + env +
                       "', which holds no cutlass/cutlass.h and cute/tensor.hpp (nor does its "
                       "include/)");
  }
  static const std::string found = [] {
    std::string out;
    if (FILE *f = popen("python3 -c 'import cutlass_library, os; print(os.path.join("
                        "os.path.dirname(cutlass_library.__file__), \"source\", \"include\"))' "
                        "2>/dev/null",
                        "r")) {
      char buf[1024];
      while (fgets(buf, sizeof buf, f)) out += buf;
      pclose(f);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out;
  }();
  if (!found.empty() && holds(found)) return found;
  return Error::user("CUDA GEMM kernels need the CUTLASS headers: `pip install nvidia-cutlass` "
                     "(for the python3 on PATH), or set COIL_CUTLASS_DIR to a directory holding "
                     "cutlass/ and cute/ (or use --gemm cublaslt)");
}

Expected<BuildResult> buildFatbin(const std::string &dir, const SourceFile &cu,
                                  const std::string &output, const std::vector<std::string> &archs,
                                  const ToolchainOptions &opts) {
  auto start = std::chrono::steady_clock::now();
  COIL_TRY(CudaToolkit tk, findCudaToolkit());
  BuildResult result;
  std::error_code ec;
  fs::path src = fs::path(dir) / cu.name;
  fs::create_directories(src.parent_path(), ec);
  {
    std::ofstream out(src, std::ios::binary);
    out << cu.text;
    if (!out) return Error::user("cannot write '" + src.string() + "'");
  }
  if (archs.empty()) return Error::user("no CUDA architecture to compile for");
  std::string flags = "-std=c++17 -O3 --fatbin -w";
  for (const std::string &a : archs) {
    if (a.rfind("sm_", 0) != 0 || a.size() < 5)
      return Error::user("CUDA architecture '" + a + "' is not of the form sm_<digits>[a]");
    std::string num = a.substr(3);
    flags += " -gencode arch=compute_" + num + ",code=sm_" + num;
  }
  for (const std::string &f : opts.extraFlags) flags += " " + f;
  COIL_TRY(CompileCache cache, opts.useCache ? CompileCache::fromEnvironment()
                                             : Expected<CompileCache>(CompileCache()));
  result.key = sha256Hex(keyPrefix("fatbin") + compilerIdentity(tk.nvcc) + "\n" + flags + "\n" +
                         sha256Hex(cu.text));

  fs::path outPath = fs::path(dir) / output;
  std::string entry = result.key + ".fatbin";
  if (cache.fetch(entry, outPath.string())) {
    result.cacheHit = true;
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  }
  fs::path objDir = fs::path(dir) / "obj";
  fs::create_directories(objDir, ec);
  std::string log = (objDir / (fs::path(output).stem().string() + ".log")).string();
  std::string tmp = outPath.string() + ".tmp";
  // Runs nvcc with `extra` flags after coil's; returns its exit status.
  auto nvcc = [&](const std::string &extra) {
    std::string cmd = shellQuote(tk.nvcc) + " " + flags + extra + " " + shellQuote(src.string()) +
                      " -o " + shellQuote(tmp);
    if (opts.verbose) std::fprintf(stderr, "coil: %s\n", cmd.c_str());
    return waitFor(spawn(cmd, log));
  };
  if (opts.onProgress) opts.onProgress("nvcc", 0, 1);
  int status = nvcc("");
  if (status > 128) {
    // A compiler killed by a signal (nvcc exits 128 + the signal: 139 for a segmentation fault
    // in cicc) crashed on valid code; the front end's optimizer is where CUDA 13.0 did (a loop
    // over a flattened index whose div/mod decomposition the loads recompose). Build once more
    // with NVVM at -O1, and say so (every time: the result is not cached, so a warm compile
    // warns too).
    std::string what = firstLines(readFile(log), 1); // "\n  Segmentation fault", or ""
    what = "exit " + std::to_string(status) + (what.size() > 3 ? ": " + what.substr(3) : "");
    status = nvcc(" -Xcicc -O1");
    if (status == 0)
      result.warning = "warning: nvcc crashed on the generated kernels (" + what +
                       "); built them again with NVVM at -O1 (-Xcicc -O1), which makes slower code";
  }
  if (status != 0)
    return Error::internal("the generated CUDA code does not compile (log: " + log + ")" +
                           firstLines(readFile(log), 12));
  if (opts.onProgress) opts.onProgress("nvcc", 1, 1);
  fs::remove_all(objDir, ec);
  fs::rename(tmp, outPath, ec);
  if (ec) return Error::user("cannot write '" + outPath.string() + "': " + ec.message());
  if (result.warning.empty()) cache.storeFile(entry, outPath.string());
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

} // namespace coil
