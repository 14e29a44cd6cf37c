#include "Commands.h"

#include "Pictures.h"
#include "codegen/PlansFile.h"
#include "coil/coil.h"
#include "coil/debug.h"
#include "driver/LoadModel.h"
#include "driver/Pipeline.h"
#include "interp/Interpreter.h"
#include "io/Npz.h"
#include "lower/LoopEval.h"
#include "lower/Lower.h"
#include "sched/Schedule.h"
#include "support/Sha256.h"
#include "support/Version.h"
#include "wrapper/CppBackend.h"
#include "wrapper/DebugInstrument.h"
#include "wrapper/GraphExport.h"
#include "wrapper/MemoryPlan.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <set>
#include <sstream>
#include <unistd.h>

namespace coil::cli {

namespace fs = std::filesystem;

Expected<ImportOptions> importOptions(const Args &a) {
  return parseSymbolRanges(a.dynamic);
}

std::string describeTensor(const std::string &name, const Tensor &t) {
  std::string s = name + ": " + std::string(dtypeName(t.dtype())) + shapeStr(t.shape());
  int64_t n = t.numel();
  if (n == 0) return s + " (empty)";
  double mn = INFINITY, mx = -INFINITY, sum = 0;
  int64_t nans = 0;
  for (int64_t i = 0; i < n; ++i) {
    double v = t.getDouble(i);
    if (std::isnan(v)) {
      ++nans;
      continue;
    }
    mn = std::min(mn, v);
    mx = std::max(mx, v);
    sum += v;
  }
  char buf[160];
  std::snprintf(buf, sizeof buf, " min %.6g max %.6g mean %.6g", mn, mx,
                n > nans ? sum / double(n - nans) : NAN);
  s += buf;
  if (nans) s += " nan " + std::to_string(nans);
  s += "\n  [";
  int64_t show = std::min<int64_t>(n, 8);
  for (int64_t i = 0; i < show; ++i) {
    std::snprintf(buf, sizeof buf, "%s%.6g", i ? ", " : "", t.getDouble(i));
    s += buf;
  }
  return s + (n > show ? ", ...]" : "]");
}

namespace {

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace

CompileOptions compileOptions(const Args &a) {
  CompileOptions o;
  if (a.values.count("--device")) o.device = a.values.at("--device");
  if (a.values.count("--arch")) {
    o.cudaArchs.clear();
    std::istringstream is(a.values.at("--arch"));
    for (std::string arch; std::getline(is, arch, ',');)
      if (!arch.empty()) o.cudaArchs.push_back(arch);
    o.recordedOptions.emplace_back("arch", a.values.at("--arch"));
  }
  if (a.values.count("--gemm")) {
    o.gemm = a.values.at("--gemm");
    o.recordedOptions.emplace_back("gemm", o.gemm);
  }
  // COIL_CUTLASS_CONFIGS=N: only the first N CUTLASS configs per GEMM (fewer nvcc runs).
  if (const char *n = std::getenv("COIL_CUTLASS_CONFIGS"); n && *n)
    o.cutlassConfigs = std::max(1, std::atoi(n));
  if (a.values.count("--cpu-target")) o.toolchain.cpuTarget = a.values.at("--cpu-target");
  // Tuning of CUDA packages: on when this machine has an NVIDIA GPU (the device files of its
  // driver exist), unless --no-tune or COIL_TUNE=0; --tune or COIL_TUNE=1 turn it on anyway
  // (where no GPU is usable, the cost model's choice stands and compile says why).
  const std::string tuneEnv = std::getenv("COIL_TUNE") ? std::getenv("COIL_TUNE") : "";
  const bool gpuHere = fs::exists("/dev/nvidiactl");
  o.tune = o.device == "cuda" && !a.flags.count("--no-tune") && tuneEnv != "0" &&
           (a.flags.count("--tune") || tuneEnv == "1" || gpuHere);
  if (o.tune) o.recordedOptions.emplace_back("tune", "on");
  o.toolchain.verbose = a.flags.count("--verbose") != 0;
  for (const std::string &d : a.dynamic) o.recordedOptions.emplace_back("dynamic", d);
  if (a.values.count("--device")) o.recordedOptions.emplace_back("device", o.device);
  return o;
}

Expected<std::unique_ptr<Compilation>> compileModel(const Args &a, const std::string &path,
                                                    const CompileOptions &o) {
  COIL_TRY(ImportOptions io, importOptions(a));
  auto t0 = std::chrono::steady_clock::now();
  COIL_TRY(LoadedModel m, loadModel(path, io));
  if (o.onStage) o.onStage("import", secondsSince(t0));
  auto c = compileGraph(std::move(m.graph), o);
  if (!c.ok()) {
    Error e = c.error();
    if (e.loc().file.empty()) e = e.withDefaultLoc(SourceLoc{path});
    return e;
  }
  return c;
}

Expected<std::unique_ptr<Compilation>> compileModel(const Args &a, const std::string &path) {
  return compileModel(a, path, compileOptions(a));
}

namespace {

bool isPackage(const std::string &path) {
  if (fs::is_regular_file(path) && path.size() > 4 && path.substr(path.size() - 4) == ".zip")
    return true; // `coil pack`'s archive: the runtime unpacks it
  return fs::is_directory(path) && fs::exists(fs::path(path) / "metadata.json");
}

/// True when `dir` holds a package that loads (its integrity checked by the runtime).
bool packageLoads(const std::string &dir) {
  coil_model *m = nullptr;
  if (coil_model_load(dir.c_str(), &m) != COIL_OK) return false;
  coil_model_free(m);
  return true;
}

/// The package of `path`: itself when it is a package directory, else the model compiled into
/// $TMPDIR/coil-run-<key>, the key the SHA-256 of the model (its bytes and its external data:
/// modelDigest), the compile options, coil's version and the identity of this executable (path,
/// size, modification time). A package there is reused only when it loads, and a new one is
/// compiled beside it and renamed into place, so a crashed or concurrent compile never leaves a
/// package that is used half-written.
Expected<std::string> packageFor(const Args &a, const std::string &path) {
  if (isPackage(path)) return path;
  if (fs::is_directory(path)) return Error::user(path + ": not a coil package (no metadata.json)");
  COIL_TRY(std::string model, modelDigest(path));
  CompileOptions o = compileOptions(a);
  std::ostringstream key;
  key << "coil-run 2\ncoil " << kCoilVersion << "\nmodel " << model << "\n";
  for (const auto &[k, v] : o.recordedOptions) key << k << "=" << v << "\n";
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    key << "exe " << self.string() << "|" << fs::file_size(self, ec) << "|"
        << fs::last_write_time(self, ec).time_since_epoch().count() << "\n";
  const char *tmp = std::getenv("TMPDIR");
  std::string dir =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/coil-run-" + sha256Hex(key.str()).substr(0, 32);
  if (isPackage(dir) && packageLoads(dir)) return dir;
  std::string fresh = dir + ".tmp-" + std::to_string(getpid());
  fs::remove_all(fresh, ec);
  COIL_TRY(std::unique_ptr<Compilation> c, compileModel(a, path));
  COIL_TRY(PackageResult r, writePackage(*c, fresh, o));
  (void)r;
  if (fs::exists(dir) && !packageLoads(dir)) fs::remove_all(dir, ec); // damaged: replaced
  fs::rename(fresh, dir, ec);
  if (ec) { // another coil renamed its package into place first: use it when it loads
    fs::remove_all(fresh, ec);
    if (!packageLoads(dir)) return Error::runtime("cannot create the package '" + dir + "'");
  }
  return dir;
}

Error runtimeError(const std::string &what, coil_status st) {
  std::string msg = what + ": " + coil_last_error();
  if (st == COIL_ERROR_INVALID_ARGUMENT || st == COIL_ERROR_PACKAGE) return Error::user(msg);
  if (st == COIL_ERROR_INTERNAL) return Error::internal(msg);
  return Error::runtime(msg);
}

/// A loaded package.
class Package {
public:
  static Expected<std::unique_ptr<Package>> load(const std::string &dir) {
    auto p = std::make_unique<Package>();
    p->dir_ = dir;
    if (coil_status st = coil_model_load(dir.c_str(), &p->m_); st != COIL_OK)
      return runtimeError(dir, st);
    return p;
  }
  ~Package() {
    if (m_) coil_model_free(m_);
  }

  std::vector<std::string> inputNames() const { return names(true); }
  coil_device device() const { return coil_model_device(m_); }
  std::vector<std::string> outputNames() const { return names(false); }

  /// Orders `arrays` by the package's inputs (each exactly once).
  Expected<std::vector<Tensor>> matchInputs(const NamedTensors &arrays,
                                            const std::string &file) const {
    std::vector<Tensor> out;
    std::vector<std::string> names = inputNames();
    for (const std::string &n : names) {
      auto it =
          std::find_if(arrays.begin(), arrays.end(), [&](const auto &p) { return p.first == n; });
      if (it == arrays.end()) return Error::user(file + ": missing input '" + n + "'");
      out.push_back(it->second);
    }
    for (const auto &[n, t] : arrays)
      if (std::find(names.begin(), names.end(), n) == names.end())
        return Error::user(file + ": '" + n +
                           "' is not an input of the model (inputs: " + join(names) + ")");
    return out;
  }

  /// Runs once. With `poison`, the outputs go to caller buffers sized from `poison`'s tensors
  /// (an earlier run's outputs) and filled with 0xff bytes first (NaN in floats, -1 in
  /// integers), so an element the package leaves unwritten shows in the result.
  Expected<std::vector<Tensor>> run(const std::vector<Tensor> &inputs,
                                    const std::vector<Tensor> *poison = nullptr) {
    std::vector<coil_tensor> in(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      in[i].data = inputs[i].data();
      in[i].dtype = coil_dtype(int(inputs[i].dtype()));
      in[i].rank = inputs[i].rank();
      in[i].shape = inputs[i].shape().data();
    }
    std::vector<coil_output> out(size_t(coil_model_num_outputs(m_)));
    for (coil_output &o : out) o = coil_output{};
    std::vector<std::vector<unsigned char>> buffers;
    if (poison) {
      COIL_CHECK(poison->size() == out.size()) << "poison: one tensor per output";
      for (size_t i = 0; i < out.size(); ++i) {
        // At least one byte, so that an empty output still gets a caller buffer.
        buffers.emplace_back(std::max<size_t>((*poison)[i].nbytes(), 1), 0xff);
        out[i].data = buffers.back().data();
        out[i].capacity = int64_t((*poison)[i].nbytes());
      }
    }
    coil_status st =
        coil_model_run(m_, in.data(), int64_t(in.size()), out.data(), int64_t(out.size()));
    if (st != COIL_OK) return runtimeError(dir_, st);
    std::vector<Tensor> result;
    for (coil_output &o : out) {
      Shape shape(o.shape, o.shape + o.rank);
      Tensor t(DType(int(o.dtype)), shape);
      if (t.nbytes()) std::memcpy(t.data(), o.data, t.nbytes());
      coil_output_release(&o);
      result.push_back(std::move(t));
    }
    return result;
  }

  coil_model *handle() { return m_; }

private:
  std::string dir_;
  coil_model *m_ = nullptr;

  static std::string join(const std::vector<std::string> &v) {
    std::string s;
    for (const std::string &x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  }

  std::vector<std::string> names(bool inputs) const {
    std::vector<std::string> out;
    int64_t n = inputs ? coil_model_num_inputs(m_) : coil_model_num_outputs(m_);
    for (int64_t i = 0; i < n; ++i) {
      coil_tensor_info info;
      if ((inputs ? coil_model_input_info(m_, i, &info) : coil_model_output_info(m_, i, &info)) ==
          COIL_OK)
        out.push_back(info.name);
    }
    return out;
  }
};

/// Random inputs for a graph: size symbols take `symbolValue` (clamped into their ranges);
/// floats are normal, integers in [0, 10), bools fair coins.
Expected<std::vector<Tensor>> randomInputs(const Graph &g, int64_t symbolValue, uint64_t seed) {
  SymBindings b;
  for (const auto &[name, r] : g.symbols) b[name] = std::clamp(symbolValue, r.min, r.max);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<Tensor> out;
  for (ValueId v : g.inputs) {
    const TensorType &t = g.value(v).type;
    Shape shape;
    for (const SymInt &d : t.shape) {
      COIL_TRY(int64_t n, d.evaluate(b));
      shape.push_back(n);
    }
    Tensor x(t.dtype, shape);
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (isFloat(t.dtype))
        x.setDouble(i, normal(rng));
      else if (t.dtype == DType::Bool)
        x.setInt(i, int64_t(rng() & 1));
      else
        x.setInt(i, int64_t(rng() % 10));
    }
    out.push_back(std::move(x));
  }
  return out;
}

Expected<std::vector<Tensor>> inputsFor(const Args &a, const Graph &g) {
  if (!a.values.count("--inputs")) return randomInputs(g, 3, 42);
  const std::string &path = a.values.at("--inputs");
  COIL_TRY(NamedTensors arrays, readNpz(path));
  return coil::matchInputs(g, arrays, path);
}

SymBindings bindingsFor(const Graph &g, const std::vector<Tensor> &inputs) {
  SymBindings b;
  for (size_t i = 0; i < g.inputs.size() && i < inputs.size(); ++i) {
    const TensorType &t = g.value(g.inputs[i]).type;
    for (size_t d = 0; d < t.shape.size() && d < size_t(inputs[i].rank()); ++d)
      if (t.shape[d].isSymbol()) b[t.shape[d].symbolName()] = inputs[i].shape()[d];
  }
  return b;
}

/// max |got - want| / max |want| for floats (0 when identical); for integers and bools the
/// number of differing elements.
double difference(const Tensor &got, const Tensor &want) {
  double scale = 0, err = 0;
  bool exact = !isFloat(want.dtype());
  for (int64_t i = 0; i < want.numel(); ++i) {
    double w = want.getDouble(i), gv = got.getDouble(i);
    if (exact) {
      err += got.getInt(i) != want.getInt(i);
      continue;
    }
    if (std::isnan(w) || std::isnan(gv)) {
      err = std::isnan(w) == std::isnan(gv) ? err : INFINITY;
      continue;
    }
    scale = std::max(scale, std::fabs(w));
    err = std::max(err, std::fabs(gv - w));
  }
  if (exact) return err;
  return scale > 0 ? err / scale : err;
}

/// The launches in order, one a line: the name COIL_DEBUG_KERNELS takes, kernel or extern
/// (with its function), and the buffers it writes.
void printLaunches(const wrapper::WrapperProgram &w) {
  std::vector<wrapper::LaunchInfo> table = wrapper::launchTable(w);
  size_t width = 0;
  for (const wrapper::LaunchInfo &l : table) width = std::max(width, l.name.size());
  for (const wrapper::LaunchInfo &l : table) {
    std::string kind = l.isExtern ? "extern " + l.base : "kernel";
    std::string writes;
    for (wrapper::BufferId b : l.writes)
      writes += (writes.empty() ? "" : ", ") + w.buffers[size_t(b)].name;
    std::printf("%-*s  %s -> %s\n", int(width), l.name.c_str(), kind.c_str(), writes.c_str());
  }
}

/// The generated kernel sources as `coil compile` writes them into src/, each file after a
/// `// ==== FILE` line, without the preludes every file starts with: CPU kernels by file; CUDA
/// device code (src/kernels.cu), launchers (src/launchers.cpp), then each CUDA unit once.
void printSources(const Compilation &c) {
  std::string file;
  auto header = [&](const std::string &name) {
    if (name != file) std::cout << "// ==== " << name << "\n";
    file = name;
  };
  for (const codegen::CpuKernelSource &k : c.kernels) {
    header(k.info.sourceFile);
    std::cout << k.code << "\n";
  }
  if (c.cudaKernels.empty()) return;
  header("src/kernels.cu");
  for (const codegen::CudaKernelSource &k : c.cudaKernels)
    if (!k.device.empty()) std::cout << k.device << "\n";
  header("src/launchers.cpp");
  for (const codegen::CudaKernelSource &k : c.cudaKernels) std::cout << k.host << "\n";
  std::set<std::string> units;
  for (const codegen::CudaKernelSource &k : c.cudaKernels)
    for (const auto &[name, text] : k.units)
      if (units.insert(name).second) {
        header(name);
        std::cout << text << "\n";
      }
}

/// Per kernel, its configs in order (the heuristic best first) with their values and, for CUDA
/// kernels, the launch plan each one's launcher computes.
void printConfigs(const wrapper::WrapperProgram &w) {
  for (const wrapper::KernelInfo &k : w.kernels) {
    std::string space;
    for (const SymInt &d : k.iterationSpace) space += (space.empty() ? "" : ", ") + d.str();
    std::printf("kernel %s [%s]\n", k.name.c_str(), space.c_str());
    for (size_t i = 0; i < k.configs.size(); ++i) {
      const wrapper::KernelConfig &c = k.configs[i];
      std::string values;
      for (const auto &[name, v] : c.values)
        values += (values.empty() ? "" : " ") + name + "=" + std::to_string(v);
      std::printf("  c%zu %s: %s\n", i, c.name.c_str(), values.c_str());
      if (!c.launch) continue;
      const wrapper::LaunchPlan &l = *c.launch;
      std::printf("    grid %s x block %lld\n", l.grid.str().c_str(), (long long)l.block);
      if (l.vectorGrid) std::printf("    aligned: grid %s\n", l.vectorGrid->str().c_str());
      if (l.fallback >= 0)
        std::printf("    workspace %s bytes (else c%d)\n", l.workspaceBytes.str().c_str(),
                    int(l.fallback));
    }
  }
}

/// A progress bar on stderr: redrawn in place on a terminal; elsewhere (a log) one line when a
/// task's count is complete.
class ProgressBar {
public:
  void show(const std::string &task, int64_t done, int64_t total) {
    if (total <= 0 || (!tty_ && done < total)) return;
    constexpr int kWidth = 30;
    int filled = int(kWidth * std::min(done, total) / total);
    std::string bar = std::string(size_t(filled), '#') + std::string(size_t(kWidth - filled), '.');
    std::fprintf(stderr, "%scoil compile: %-6s [%s] %lld/%lld%s", tty_ ? "\r" : "", task.c_str(),
                 bar.c_str(), (long long)done, (long long)total, tty_ ? "" : "\n");
    std::fflush(stderr);
    drawn_ = tty_;
  }
  /// Ends a bar drawn in place, before other output.
  void finish() {
    if (drawn_) std::fputc('\n', stderr);
    drawn_ = false;
  }

private:
  bool tty_ = isatty(2) != 0;
  bool drawn_ = false;
};

} // namespace

Status cmdCompile(const Args &a) {
  if (a.positional.size() != 1)
    return Error::user("'coil compile' takes one MODEL (see 'coil help')");
  if (!a.values.count("--output"))
    return Error::user("'coil compile' needs -o PKG (the package directory to write)");
  auto t0 = std::chrono::steady_clock::now();
  CompileOptions o = compileOptions(a);
  if (a.flags.count("--tune") && a.flags.count("--no-tune"))
    return Error::user("'coil compile' takes --tune or --no-tune, not both");
  if (a.flags.count("--tune") && o.device != "cuda")
    return Error::user("--tune measures CUDA kernel configs: use it with --device cuda");
  // Progress: each stage on stderr as it finishes, so that a slow compile shows where it is,
  // and a bar with counts while the builds and the tuning run.
  ProgressBar bar;
  o.onStage = [t0, &bar](const std::string &stage, double s) {
    bar.finish();
    std::fprintf(stderr, "coil compile: %-14s %8.3f s  (%.2f s in all)\n", stage.c_str(), s,
                 secondsSince(t0));
  };
  o.onProgress = [&bar](const std::string &task, int64_t done, int64_t total) {
    bar.show(task, done, total);
  };
  COIL_TRY(std::unique_ptr<Compilation> c, compileModel(a, a.positional[0], o));
  COIL_TRY(PackageResult r, writePackage(*c, a.values.at("--output"), o));
  bar.finish();
  if (!r.fatbin.warning.empty()) std::cerr << r.fatbin.warning << "\n";
  if (!r.tuning.empty()) std::cerr << r.tuning << "\n";
  size_t nKernels = c->wrapper.kernels.size();
  size_t externs = c->schedule.steps.size() - nKernels;
  std::vector<std::string> launches = wrapper::debugLaunchNames(c->wrapper);
  if (o.toolchain.verbose) { // the full lists
    std::cout << "kernels:";
    for (const wrapper::KernelInfo &k : c->wrapper.kernels) std::cout << " " << k.name;
    std::cout << "\n";
    std::cout << "launches (COIL_DEBUG_KERNELS names):";
    for (const std::string &l : launches) std::cout << " " << l;
    std::cout << "\n";
    std::cout << "stages:";
    for (const auto &[stage, s] : c->timings) std::printf(" %s %.1f ms,", stage.c_str(), s * 1e3);
    if (c->wrapper.device == "cuda")
      std::printf(" nvcc %.2f s%s,", r.fatbin.seconds, r.fatbin.cacheHit ? " (cached)" : "");
    std::printf(" build %.2f s%s\n", r.build.seconds, r.build.cacheHit ? " (cached)" : "");
  }
  std::printf("compile: %zu graph nodes -> %zu kernels and %zu extern calls (%zu launches); "
              "package %s in %.2f s%s\n",
              c->graph.nodes().size(), nKernels, externs, launches.size(), r.dir.c_str(),
              secondsSince(t0), o.toolchain.verbose ? "" : " (--verbose lists the kernels)");
  return okStatus();
}

Status cmdRun(const Args &a) {
  if (a.positional.size() != 1)
    return Error::user("'coil run' takes one PKG or MODEL (see 'coil help')");
  if (!a.values.count("--inputs")) return Error::user("'coil run' needs --inputs IN.npz");
  COIL_TRY(std::string dir, packageFor(a, a.positional[0]));
  COIL_TRY(std::unique_ptr<Package> pkg, Package::load(dir));
  const std::string &inPath = a.values.at("--inputs");
  COIL_TRY(NamedTensors arrays, readNpz(inPath));
  COIL_TRY(std::vector<Tensor> inputs, pkg->matchInputs(arrays, inPath));
  auto t0 = std::chrono::steady_clock::now();
  COIL_TRY(std::vector<Tensor> outs, pkg->run(inputs));
  double s = secondsSince(t0);
  // --poison: run again into caller buffers of the sizes just seen, filled with 0xff bytes, and
  // report that run (differential tests: an unwritten element cannot pass as a zero).
  if (a.flags.count("--poison")) {
    std::vector<Tensor> first = std::move(outs);
    COIL_TRY(outs, pkg->run(inputs, &first));
  }
  NamedTensors named;
  std::vector<std::string> names = pkg->outputNames();
  for (size_t i = 0; i < outs.size(); ++i) {
    named.emplace_back(names.at(i), outs[i]);
    std::cout << describeTensor(names[i], outs[i]) << "\n";
  }
  std::printf("run: %.3f ms\n", s * 1e3);
  if (a.values.count("--outputs")) COIL_TRY_STATUS(writeNpz(a.values.at("--outputs"), named));
  return okStatus();
}

namespace {

/// The written tensors each launch left behind, captured through the debug hooks (After lines).
struct CapturedValue {
  int32_t launch = 0; ///< launch id
  std::string launchName;
  std::string name; ///< parameter name
  std::string bufferName;
  int32_t buffer = -1; ///< Wrapper IR buffer id
  Tensor value;
};

class Capture {
public:
  explicit Capture(size_t launches) : enabled_(std::max<size_t>(launches, 1), 1) {
    hooks_.abi_version = COIL_DEBUG_ABI_VERSION;
    hooks_.num_launches = uint32_t(launches);
    hooks_.enabled = enabled_.data();
    hooks_.ctx = this;
    hooks_.report = &Capture::hook;
  }
  const coil_debug_hooks *hooks() const { return &hooks_; }
  std::vector<CapturedValue> values;

private:
  static int32_t hook(void *ctx, const coil_debug_launch *l) {
    auto *self = static_cast<Capture *>(ctx);
    if (l->when != COIL_DEBUG_AFTER) return 0;
    for (int32_t i = 0; i < l->num_values; ++i) {
      const coil_debug_value &v = l->values[i];
      if (v.kind != COIL_DEBUG_TENSOR || !v.written) continue;
      if (v.dtype < 0 || v.dtype > int(DType::Bool) || v.rank < 0 || v.rank > COIL_MAX_RANK) {
        std::snprintf(l->error, l->error_size, "malformed debug value '%s' of launch '%s'", v.name,
                      l->name);
        return 1;
      }
      CapturedValue c;
      c.launch = l->id;
      c.launchName = l->name;
      c.name = v.name ? v.name : "";
      c.bufferName = v.buffer ? v.buffer : "";
      c.buffer = v.buffer_id;
      c.value = Tensor(DType(v.dtype), Shape(v.shape, v.shape + v.rank));
      // Host or device memory (CUDA packages: read after the run's stream is synchronized).
      if (c.value.nbytes() && v.data &&
          coil_debug_read_value(l, &v, c.value.data(), c.value.nbytes()) != COIL_OK) {
        std::snprintf(l->error, l->error_size, "verify --kernels: launch '%s', value '%s': %s",
                      l->name, v.name ? v.name : "?", coil_last_error());
        return 1;
      }
      self->values.push_back(std::move(c));
    }
    return 0;
  }

  std::vector<uint8_t> enabled_;
  coil_debug_hooks hooks_{};
};

/// Where flat index i lies in `shape`, as "[a, b]".
std::string indexText(const Shape &shape, int64_t i) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    int64_t n = std::max<int64_t>(shape[d], 1);
    idx[d] = i % n;
    i /= n;
  }
  std::string s = "[";
  for (size_t d = 0; d < idx.size(); ++d) s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + "]";
}

/// The largest difference (relative to max |want|) between two computations of a value of
/// dtype `t` that round in different places. f32: 1e-4. f16: 1e-2, about 10 units in the last
/// place of the largest value. bf16: 2e-2, about 2.5 such units: its 8-bit significand spaces
/// values up to 2^-7 apart, so one rounding moved (a GEMM and its bias rounded once by the
/// extern, twice by the interpreter) and one more downstream already differ by 2 units.
double toleranceOf(DType t) {
  return t == DType::BF16 ? 2e-2 : t == DType::F16 ? 1e-2 : 1e-4;
}

/// The tolerance of graph output `out`: its dtype's, or that of a lower-precision float value
/// computed on the way to it (an f32 output of bf16 arithmetic is only as close as bf16:
/// fusion moves the places where the compiled code rounds). Inputs and constants do not
/// count: a bf16 input widened to f32 is exact.
double outputTolerance(const Graph &g, ValueId out) {
  const DType dt = g.value(out).type.dtype;
  if (!isFloat(dt)) return 0;
  double tol = toleranceOf(dt);
  std::vector<ValueId> todo = {out};
  std::vector<bool> seen(g.numValues(), false);
  while (!todo.empty()) {
    ValueId v = todo.back();
    todo.pop_back();
    if (seen[size_t(v)]) continue;
    seen[size_t(v)] = true;
    const Value &val = g.value(v);
    if (val.kind != ValueKind::NodeOutput || val.producer < 0) continue;
    if (isFloat(val.type.dtype)) tol = std::max(tol, toleranceOf(val.type.dtype));
    for (ValueId in : g.nodes()[size_t(val.producer)].inputs)
      if (in >= 0) todo.push_back(in);
  }
  return tol;
}

/// Statistics of `got` against `want` (same dtype and shape): the largest absolute and relative
/// errors (relative over elements where want != 0) with where they are, how many elements are
/// off by more than the tolerance (of max |want|; integers: any difference), NaN and Inf counts.
std::string divergence(const Tensor &got, const Tensor &want, double tolerance) {
  double maxAbs = -1, maxRel = -1, scale = 0;
  int64_t atAbs = 0, atRel = -1, nanGot = 0, nanWant = 0, infGot = 0, infWant = 0, off = 0;
  for (int64_t i = 0; i < want.numel(); ++i)
    if (std::isfinite(want.getDouble(i))) scale = std::max(scale, std::fabs(want.getDouble(i)));
  double limit = isFloat(want.dtype()) ? tolerance * scale : 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double g = got.getDouble(i), w = want.getDouble(i);
    nanGot += std::isnan(g);
    nanWant += std::isnan(w);
    infGot += std::isinf(g);
    infWant += std::isinf(w);
    if (std::isnan(g) || std::isnan(w)) {
      off += std::isnan(g) != std::isnan(w);
      continue;
    }
    double abs = g == w ? 0 : std::fabs(g - w);
    off += abs > limit;
    if (abs > maxAbs) maxAbs = abs, atAbs = i;
    if (w != 0 && abs / std::fabs(w) > maxRel) maxRel = abs / std::fabs(w), atRel = i;
  }
  char buf[640];
  std::string rel = "n/a (want is 0 wherever they differ)";
  if (atRel >= 0) {
    std::snprintf(buf, sizeof buf, "%.6g at %s (got %.9g, want %.9g)", maxRel,
                  indexText(want.shape(), atRel).c_str(), got.getDouble(atRel),
                  want.getDouble(atRel));
    rel = buf;
  }
  std::snprintf(buf, sizeof buf,
                "    max abs error %.6g at %s (got %.9g, want %.9g)\n"
                "    max rel error %s\n"
                "    %lld of %lld elements off by more than %.3g; NaN: got %lld, want %lld; "
                "Inf: got %lld, want %lld\n",
                std::max(maxAbs, 0.0), indexText(want.shape(), atAbs).c_str(), got.getDouble(atAbs),
                want.getDouble(atAbs), rel.c_str(), (long long)off, (long long)want.numel(), limit,
                (long long)nanGot, (long long)nanWant, (long long)infGot, (long long)infWant);
  return buf;
}

bool withinTolerance(const Tensor &got, const Tensor &want, double tolerance, double *d) {
  *d = difference(got, want);
  return isFloat(want.dtype()) ? *d <= tolerance : *d == 0;
}

/// Runs the package with hooks capturing every launch's outputs and compares each with the
/// Loop IR evaluator's value of the node the buffer holds. Prints one line per launch and the
/// statistics of the first diverging one; returns its name ("" when none diverges).
Expected<std::string> localizeDivergence(const Compilation &c, coil_model *model,
                                         const std::string &dir,
                                         const std::vector<Tensor> &inputs) {
  int64_t n = coil_model_num_launches(model);
  if (n == 0)
    return Error::user(dir + ": the package has no debug instrumentation (compiled by an older "
                             "coil); recompile it");
  Capture capture{size_t(n)};
  if (coil_status st = coil_model_set_debug_hooks(model, capture.hooks()); st != COIL_OK)
    return runtimeError(dir, st);
  std::vector<coil_tensor> in(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    in[i] = {inputs[i].data(), coil_dtype(int(inputs[i].dtype())), inputs[i].rank(),
             inputs[i].shape().data()};
  std::vector<coil_output> out(size_t(coil_model_num_outputs(model)), coil_output{});
  coil_status st =
      coil_model_run(model, in.data(), int64_t(in.size()), out.data(), int64_t(out.size()));
  std::string runError = st == COIL_OK ? "" : coil_last_error();
  for (coil_output &o : out) coil_output_release(&o);
  coil_model_set_debug_hooks(model, nullptr);
  if (st != COIL_OK) return runtimeError(dir, st);

  // The reference: every captured buffer's node, evaluated by the Loop IR evaluator.
  loop::LoopProgram ref = c.loops;
  ref.outputs.clear();
  ref.outputNames.clear();
  std::vector<int64_t> refIndex; // per captured value: index into the evaluator's outputs
  for (const CapturedValue &v : capture.values) {
    if (v.buffer < 0 || size_t(v.buffer) >= c.wrapper.buffers.size() ||
        c.wrapper.buffers[size_t(v.buffer)].name != v.bufferName)
      return Error::user(dir + ": launch '" + v.launchName + "' reports buffer '" + v.bufferName +
                         "', which this compilation of the model does not have at index " +
                         std::to_string(v.buffer) + " (the package is not this model's)");
    loop::NodeId node = c.bufferNodes.at(size_t(v.buffer));
    refIndex.push_back(node < 0 ? -1 : int64_t(ref.outputs.size()));
    if (node >= 0) {
      ref.outputs.push_back(node);
      ref.outputNames.push_back(c.loops.nodes[size_t(node)].name);
    }
  }
  COIL_TRY(std::vector<Tensor> expected, loop::evaluateLoopProgram(ref, inputs));

  std::string first;
  std::string firstReport;
  std::vector<std::string> names;
  for (int64_t i = 0; i < n; ++i) names.push_back(coil_model_launch_name(model, i));
  for (int64_t id = 0; id < n; ++id) {
    std::string line;
    bool launchOk = true;
    int compared = 0;
    for (size_t k = 0; k < capture.values.size(); ++k) {
      const CapturedValue &v = capture.values[k];
      if (v.launch != id || refIndex[k] < 0) continue;
      const Tensor &want = expected[size_t(refIndex[k])];
      ++compared;
      std::string what = v.name == v.bufferName ? v.name : v.name + " (" + v.bufferName + ")";
      if (want.shape() != v.value.shape() || want.dtype() != v.value.dtype()) {
        line += " " + what + ": " + std::string(dtypeName(v.value.dtype())) +
                shapeStr(v.value.shape()) + ", Loop IR " + std::string(dtypeName(want.dtype())) +
                shapeStr(want.shape());
        launchOk = false;
        continue;
      }
      double d = 0;
      // The Loop IR evaluator rounds where the kernel does: the value's own dtype's tolerance.
      const double tol = isFloat(want.dtype()) ? toleranceOf(want.dtype()) : 0;
      bool ok = withinTolerance(v.value, want, tol, &d);
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.3g", d);
      line += " " + what + " " + (isFloat(want.dtype()) ? "relative error " : "differing ") + buf;
      if (!ok) {
        launchOk = false;
        if (first.empty()) firstReport += "  " + what + ":\n" + divergence(v.value, want, tol);
      }
    }
    if (!compared) line = " (no output with a Loop IR value)";
    std::printf("  %s launch %s:%s\n", launchOk ? "ok      " : "DIVERGES",
                names[size_t(id)].c_str(), line.c_str());
    if (!launchOk && first.empty()) first = names[size_t(id)];
  }
  if (!first.empty())
    std::printf("first diverging launch: %s\n%s", first.c_str(), firstReport.c_str());
  else
    std::printf("every launch matches the Loop IR evaluator\n");
  return first;
}

} // namespace

Status cmdVerify(const Args &a) {
  if (a.positional.size() != 1)
    return Error::user("'coil verify' takes one MODEL (see 'coil help')");
  const std::string &path = a.positional[0];
  COIL_TRY(ImportOptions io, importOptions(a));
  COIL_TRY(LoadedModel m, loadModel(path, io));
  COIL_TRY(std::vector<Tensor> inputs, inputsFor(a, m.graph));
  auto want = interpret(m.graph, inputs);
  if (!want.ok()) return want.error().withDefaultLoc(SourceLoc{path});
  std::string dir;
  if (a.values.count("--package")) {
    dir = a.values.at("--package");
    if (!isPackage(dir)) return Error::user(dir + ": not a coil package (no metadata.json)");
  } else {
    COIL_TRY(dir, packageFor(a, path));
  }
  COIL_TRY(std::unique_ptr<Package> pkg, Package::load(dir));
  COIL_TRY(std::vector<Tensor> got, pkg->run(inputs));
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const std::string &name = m.graph.value(m.graph.outputs[i]).name;
    const Tensor &w = (*want)[i];
    if (got[i].shape() != w.shape() || got[i].dtype() != w.dtype()) {
      std::printf("MISMATCH %s: compiled %s%s, interpreter %s%s\n", name.c_str(),
                  std::string(dtypeName(got[i].dtype())).c_str(), shapeStr(got[i].shape()).c_str(),
                  std::string(dtypeName(w.dtype())).c_str(), shapeStr(w.shape()).c_str());
      ++bad;
      continue;
    }
    double d = 0;
    bool ok = withinTolerance(got[i], w, outputTolerance(m.graph, m.graph.outputs[i]), &d);
    bad += !ok;
    std::printf("%s %s: %s %.3g\n", ok ? "ok      " : "MISMATCH", name.c_str(),
                isFloat(w.dtype()) ? "relative error" : "differing elements", d);
  }
  std::string diverging;
  bool kernels = a.flags.count("--kernels") != 0;
  if (bad || kernels) {
    std::printf("launches against the Loop IR evaluator:\n");
    COIL_TRY(std::unique_ptr<Compilation> c, compileModel(a, path));
    COIL_TRY(diverging, localizeDivergence(*c, pkg->handle(), dir, inputs));
  }
  if (bad)
    return Error::runtime(
        "verify: " + std::to_string(bad) + " outputs differ from the interpreter; " +
        (diverging.empty() ? "every launch matches the Loop IR evaluator, so the Loop IR itself "
                             "differs from the interpreter (a lowering bug)"
                           : "the first diverging launch is " + diverging));
  if (!diverging.empty())
    return Error::runtime("verify: the outputs match the interpreter, but launch " + diverging +
                          " diverges from the Loop IR evaluator");
  std::printf("verify: %zu outputs match the interpreter\n", got.size());
  return okStatus();
}

Status cmdBench(const Args &a) {
  if (a.positional.size() != 1)
    return Error::user("'coil bench' takes one PKG or MODEL (see 'coil help')");
  int iters = 20, warmup = 3;
  try {
    if (a.values.count("--iters")) iters = std::stoi(a.values.at("--iters"));
    if (a.values.count("--warmup")) warmup = std::stoi(a.values.at("--warmup"));
  } catch (...) {
    return Error::user("--iters and --warmup take positive integers");
  }
  if (iters < 1 || warmup < 0) return Error::user("--iters must be >= 1 and --warmup >= 0");
  COIL_TRY(std::string dir, packageFor(a, a.positional[0]));
  COIL_TRY(std::unique_ptr<Package> pkg, Package::load(dir));
  std::vector<Tensor> inputs;
  if (a.values.count("--inputs")) {
    const std::string &inPath = a.values.at("--inputs");
    COIL_TRY(NamedTensors arrays, readNpz(inPath));
    COIL_TRY(inputs, pkg->matchInputs(arrays, inPath));
  } else {
    return Error::user("'coil bench' needs --inputs IN.npz");
  }
  for (int i = 0; i < warmup; ++i) COIL_TRY_STATUS(pkg->run(inputs));
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    COIL_TRY_STATUS(pkg->run(inputs));
    ms.push_back(secondsSince(t0) * 1e3);
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  double median = iters % 2 ? sorted[size_t(iters / 2)]
                            : 0.5 * (sorted[size_t(iters / 2 - 1)] + sorted[size_t(iters / 2)]);
  // A device package runs from host memory here: every run includes its copies in and out.
  const char *device = pkg->device() == COIL_DEVICE_CUDA ? "cuda" : "cpu";
  if (a.flags.count("--json")) {
    std::printf("{\"median_ms\": %.6f, \"min_ms\": %.6f, \"max_ms\": %.6f, \"iters\": %d, "
                "\"warmup\": %d, \"device\": \"%s\", \"host_copies\": %s}\n",
                median, sorted.front(), sorted.back(), iters, warmup, device,
                pkg->device() == COIL_DEVICE_CUDA ? "true" : "false");
  } else {
    std::printf("bench: %d runs after %d warm-up: median %.3f ms, min %.3f ms, max %.3f ms\n",
                iters, warmup, median, sorted.front(), sorted.back());
    if (pkg->device() == COIL_DEVICE_CUDA)
      std::printf("bench: a cuda package timed from host memory (copies in and out included); "
                  "bench/gpu_bench.py times device memory on a stream with CUDA events\n");
  }
  return okStatus();
}

// --- inspect --wrapper [--svg OUT.svg]: the wrapper of a model or a package, or its graph
// (wrapper.dot, wrapper/GraphExport.h) rendered by Graphviz's `dot`.
Status renderDot(const std::string &dotText, const std::string &svgPath) {
  std::string dotExe;
  if (const char *path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    for (std::string d; std::getline(dirs, d, ':');)
      if (!d.empty() && ::access((d + "/dot").c_str(), X_OK) == 0) {
        dotExe = d + "/dot";
        break;
      }
  }
  if (dotExe.empty())
    return Error::user("--svg needs Graphviz's 'dot' program, which is not on PATH (install "
                       "the 'graphviz' package; packages hold the graph as src/wrapper.dot)");
  fs::path tmp = fs::path(svgPath + ".dot.tmp");
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << dotText;
    if (!f) return Error::runtime("cannot write '" + tmp.string() + "'");
  }
  std::string cmd = "'" + dotExe + "' -Tsvg -o '" + svgPath + "' '" + tmp.string() + "'";
  if (svgPath.find('\'') != std::string::npos)
    return Error::user("--svg path must not contain a single quote: '" + svgPath + "'");
  int rc = std::system(cmd.c_str());
  std::error_code ec;
  fs::remove(tmp, ec);
  if (rc != 0)
    return Error::runtime("'dot' failed (status " + std::to_string(rc) + ") on the wrapper graph");
  std::cout << "wrote " << svgPath << "\n";
  return okStatus();
}

Status writeSvg(const std::string &svg, const std::string &path) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << svg;
  if (!f) return Error::runtime("cannot write '" + path + "'");
  std::cout << "wrote " << path << "\n";
  return okStatus();
}

Status inspectPackageWrapper(const Args &a, const std::string &dir) {
  for (const char *f :
       {"--fusion", "--loops", "--memory", "--kernels", "--configs", "--plans", "--sources"})
    if (a.flags.count(f))
      return Error::user(std::string("'coil inspect PKG' takes --wrapper [--svg OUT.svg]; ") + f +
                         " needs a MODEL");
  auto read = [&](const std::string &rel) -> Expected<std::string> {
    std::ifstream f(fs::path(dir) / rel, std::ios::binary);
    if (!f) return Error::user("package '" + dir + "' has no " + rel);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  if (a.values.count("--svg")) {
    COIL_TRY(std::string dot, read("src/wrapper.dot"));
    return renderDot(dot, a.values.at("--svg"));
  }
  COIL_TRY(std::string cpp, read("src/wrapper.cpp"));
  std::cout << cpp;
  return okStatus();
}

Status cmdInspectCompiled(const Args &a) {
  const std::string &path = a.positional.at(0);
  if (fs::is_directory(path) && fs::exists(fs::path(path) / "metadata.json"))
    return inspectPackageWrapper(a, path);
  COIL_TRY(ImportOptions io, importOptions(a));
  COIL_TRY(LoadedModel m, loadModel(path, io));
  Graph g = m.graph;
  COIL_TRY(std::unique_ptr<Compilation> c, compileGraph(std::move(m.graph), compileOptions(a)));
  // --svg draws the one view asked for: --fusion, --memory or --wrapper (Pictures.h, dot).
  bool svg = a.values.count("--svg") != 0;
  std::string title = fs::path(path).filename().string();
  if (a.flags.count("--loops")) std::cout << loop::printLoopProgram(c->loops);
  if (a.flags.count("--fusion")) {
    if (svg) return writeSvg(fusionSvg(c->graph, c->wrapper, title), a.values.at("--svg"));
    std::cout << sched::fusionReport(c->schedule);
  }
  if (a.flags.count("--kernels")) printLaunches(c->wrapper);
  if (a.flags.count("--configs")) printConfigs(c->wrapper);
  if (a.flags.count("--plans")) {
    codegen::KernelPlans plans;
    plans.device = compileOptions(a).device;
    for (const codegen::CpuKernelSource &k : c->kernels) plans.cpu.push_back(k.plan);
    for (const codegen::CudaKernelSource &k : c->cudaKernels) {
      plans.cuda.push_back(k.plan);
      plans.gemmConfigs.push_back(k.gemmConfigs);
    }
    std::cout << codegen::printPlansFile(c->schedule, plans);
  }
  if (a.flags.count("--sources")) printSources(*c);
  if (a.flags.count("--memory")) {
    COIL_TRY(std::vector<Tensor> inputs, inputsFor(a, g));
    SymBindings b = bindingsFor(g, inputs);
    COIL_TRY(wrapper::MemoryReport r, wrapper::memoryReport(c->wrapper, b));
    if (svg) return writeSvg(memorySvg(c->wrapper, r, title), a.values.at("--svg"));
    std::cout << r.str();
  }
  if (svg)
    COIL_TRY_STATUS(renderDot(wrapper::emitWrapperDot(c->wrapper), a.values.at("--svg")));
  else if (a.flags.count("--wrapper"))
    std::cout << wrapper::emitCppWrapper(c->wrapper);
  return okStatus();
}

} // namespace coil::cli
