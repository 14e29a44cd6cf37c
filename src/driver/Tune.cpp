#include "driver/Tune.h"

#include "driver/Install.h"
#include "runtime/cuda/CudaTune.h"
#include "support/Check.h"
#include "support/DType.h"
#include "support/Sha256.h"
#include "support/Version.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <poll.h>
#include <set>
#include <signal.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace coil::tune {

using namespace wrapper;

namespace {

/// The GPU the cost model describes (H100/H200: 132 SMs of 2048 threads, 32 blocks each).
constexpr double kSms = 132;
constexpr double kThreadsPerSm = 2048;
constexpr double kBlocksPerSm = 32;
/// The heuristic leaves config 0 only for a config estimated this much cheaper.
constexpr double kOverride = 0.5;

std::optional<int64_t> value(const KernelConfig &c, const std::string &name) {
  for (const auto &[n, v] : c.values)
    if (n == name) return v;
  return std::nullopt;
}

/// Waves of `blocks` blocks of `block` threads over the GPU (fractional, at least 1).
double waves(double blocks, double block) {
  double perSm = std::max(1.0, std::min(kBlocksPerSm, std::floor(kThreadsPerSm / block)));
  return std::max(1.0, blocks / (kSms * perSm));
}

} // namespace

SymInt bucketSize(const WrapperProgram &p, const KernelCall &c) {
  const KernelInfo &k = p.kernels[size_t(c.kernel)];
  std::map<std::string, SymInt> repl;
  for (size_t i = 0; i < k.params.size() && i < c.args.size(); ++i)
    if (k.params[i].kind == KernelParam::Kind::Size && c.args[i].kind == CallArg::Kind::Size)
      repl.emplace(k.params[i].name, c.args[i].size);
  SymInt size(1);
  for (const SymInt &d : k.iterationSpace) size = size * d.substitute(repl);
  return simplify(size, p.symbols);
}

std::vector<Bucket> sizeBuckets(const SymInt &size, const SymRanges &symbols) {
  std::set<std::string> used;
  size.collectSymbols(used);
  // Representative bindings: every used symbol at 4^i, clamped to its range.
  std::vector<SymBindings> bindings;
  for (int64_t v = 1;; v *= 4) {
    SymBindings b;
    bool grew = false;
    for (const std::string &s : used) {
      auto it = symbols.find(s);
      SymRange r = it == symbols.end() ? SymRange{1, kMaxTunedSymbol} : it->second;
      int64_t hi = std::min(r.max, kMaxTunedSymbol), lo = std::max<int64_t>(r.min, 1);
      if (hi < lo) hi = lo;
      b[s] = std::clamp(v, lo, hi);
      grew = grew || v < hi;
    }
    bindings.push_back(std::move(b));
    if (!grew) break;
  }
  std::vector<Bucket> out;
  for (const SymBindings &b : bindings) {
    Expected<int64_t> at = size.evaluate(b);
    if (!at || *at < 1) continue;
    if (!out.empty() && *at <= out.back().at) continue; // the same size (or not growing)
    out.push_back(Bucket{0, *at, b});
  }
  int64_t max = bounds(size, symbols).max;
  for (size_t i = 0; i < out.size(); ++i) {
    if (i + 1 < out.size()) {
      // The geometric midpoint, floor(sqrt(a * b)), in [a, b).
      double mid = std::sqrt(double(out[i].at) * double(out[i + 1].at));
      out[i].upTo = std::clamp(int64_t(mid), out[i].at, out[i + 1].at - 1);
    } else {
      out[i].upTo = std::max(max, out[i].at);
    }
  }
  return out;
}

double estimateCost(const KernelConfig &c, int64_t outer, int64_t inner) {
  std::optional<int64_t> block = value(c, "block");
  if (!block || *block < 1) return -1;
  double n = double(std::max<int64_t>(outer, 1));
  if (auto ept = value(c, "ept")) {
    // Pointwise: each thread handles ept (vector) accesses per grid step; blocks cover
    // block * ept * vec elements. Fewer than two waves leave SMs idle: a thread's serial work
    // is then the cost, so smaller per-thread work wins; at many waves the total is the same.
    int64_t vec = value(c, "vec").value_or(1);
    if (*ept < 1 || vec < 1) return -1;
    double perBlock = double(*block) * double(*ept) * double(vec);
    double blocks = std::ceil(n / perBlock);
    double cost = waves(blocks, double(*block)) * double(*ept);
    if (blocks < 2 * kSms) cost += double(*ept) * 0.5; // under two waves: latency dominates
    return cost;
  }
  std::optional<int64_t> tpr = value(c, "threads_per_row"), rows = value(c, "rows_per_block");
  if (!tpr || !rows || *tpr < 1 || *rows < 1) return -1;
  // Row kernels: a row's serial loop of ceil(inner / tpr) steps plus its reduction (shuffles
  // within a warp, shared memory and barriers across warps); a thread per row reads strided
  // memory (one row per thread: uncoalesced unless rows are tiny).
  // A thread's share of the row stays in registers between phases while it is small (codegen's
  // row cache holds up to 8 vectors of 16 bytes); longer shares are read again.
  double len = double(std::max<int64_t>(inner, 1)), t = double(*tpr);
  double steps = std::ceil(len / t);
  double reduce = t <= 1 ? 0 : 2 * std::log2(std::min(t, 32.0));
  if (t > 32) reduce += 10 + 2 * std::log2(t / 32);
  double coalesce = t >= 32 ? 1 : std::clamp(len / 8, 1.0, 32 / t);
  double reread = steps > 32 ? 2 : 1;
  double blocks = std::ceil(n / double(*rows));
  return waves(blocks, double(*block)) * (steps * coalesce * reread + reduce);
}

int32_t heuristicConfig(const WrapperProgram &p, const KernelCall &c, const Bucket &bucket) {
  const KernelInfo &k = p.kernels[size_t(c.kernel)];
  // Elements per outer point: the largest buffer over the bucket size.
  int64_t largest = 0;
  for (const CallArg &a : c.args)
    if (a.kind == CallArg::Kind::Buffer && a.buffer >= 0 && size_t(a.buffer) < p.buffers.size())
      if (Expected<int64_t> n = p.buffers[size_t(a.buffer)].numel().evaluate(bucket.bindings))
        largest = std::max(largest, *n);
  int64_t inner = std::max<int64_t>(1, largest / std::max<int64_t>(bucket.at, 1));
  int32_t best = 0;
  double bestCost = 0, first = 0;
  for (size_t i = 0; i < k.configs.size(); ++i) {
    double cost = estimateCost(k.configs[i], bucket.at, inner);
    if (cost < 0) return 0; // a config the model does not know: keep codegen's first
    if (i == 0) first = cost;
    if (i == 0 || cost < bestCost * (1 - 1e-9)) best = int32_t(i), bestCost = cost;
  }
  // Config 0 is codegen's choice for the whole size range; the (crude) model overrides it only
  // where it predicts at least a 2x gain.
  return bestCost < kOverride * first ? best : 0;
}

std::vector<TuneTask> tuneTasks(const WrapperProgram &p) {
  std::vector<TuneTask> tasks;
  for (size_t i = 0; i < p.lines.size(); ++i) {
    const auto *c = std::get_if<KernelCall>(&p.lines[i]);
    if (!c || c->kernel < 0 || size_t(c->kernel) >= p.kernels.size()) continue;
    if (p.kernels[size_t(c->kernel)].configs.size() < 2) continue;
    TuneTask t;
    t.line = i;
    t.size = bucketSize(p, *c);
    t.buckets = sizeBuckets(t.size, p.symbols);
    if (!t.buckets.empty()) tasks.push_back(std::move(t));
  }
  return tasks;
}

TuningRecord applyChoices(WrapperProgram &p, const std::vector<TuneTask> &tasks,
                          const Timings *timings) {
  TuningRecord rec;
  rec.method = timings ? "measured" : "heuristic";
  for (size_t ti = 0; ti < tasks.size(); ++ti) {
    const TuneTask &t = tasks[ti];
    auto &call = std::get<KernelCall>(p.lines[t.line]);
    const KernelInfo &k = p.kernels[size_t(call.kernel)];
    TuningRecord::Call rc;
    rc.kernel = k.name;
    rc.bucketSize = t.size.str();
    std::vector<ConfigChoice> chosen;
    for (size_t b = 0; b < t.buckets.size(); ++b) {
      ConfigChoice ch;
      ch.upTo = t.buckets[b].upTo;
      ch.at = t.buckets[b].at;
      const std::vector<double> *times = nullptr;
      if (timings && ti < timings->size() && b < (*timings)[ti].size() &&
          (*timings)[ti][b].size() == k.configs.size())
        times = &(*timings)[ti][b];
      int32_t best = -1;
      if (times)
        for (size_t c = 0; c < times->size(); ++c)
          if ((*times)[c] >= 0 && (best < 0 || (*times)[c] < (*times)[size_t(best)]))
            best = int32_t(c);
      if (best >= 0) {
        ch.config = best;
        ch.timesUs = *times;
      } else {
        ch.config = heuristicConfig(p, call, t.buckets[b]);
      }
      rc.buckets.push_back(TuningRecord::Bucket{ch.upTo, ch.at, ch.config, ch.timesUs});
      chosen.push_back(std::move(ch));
    }
    // Merge neighbours with the same config (the later bucket's end covers both); the last
    // bucket is the default.
    std::vector<ConfigChoice> merged;
    for (ConfigChoice &ch : chosen) {
      if (!merged.empty() && merged.back().config == ch.config) {
        merged.back().upTo = ch.upTo;
        continue;
      }
      merged.push_back(std::move(ch));
    }
    call.config = merged.back().config;
    merged.pop_back();
    call.bucketSize = merged.empty() ? SymInt() : t.size;
    call.choices = std::move(merged);
    rec.calls.push_back(std::move(rc));
  }
  return rec;
}

TuningRecord chooseConfigsHeuristic(WrapperProgram &p) {
  return applyChoices(p, tuneTasks(p), nullptr);
}

bool gpuPresent() {
  std::error_code ec;
  if (std::filesystem::exists("/dev/nvidia0", ec)) return true;
  FILE *f = popen("nvidia-smi -L 2>/dev/null", "r");
  if (!f) return false;
  char buf[256];
  bool any = false;
  while (fgets(buf, sizeof buf, f))
    if (std::strncmp(buf, "GPU ", 4) == 0) any = true;
  pclose(f);
  return any;
}

// --- measuring ----------------------------------------------------------------------------------

std::string tuneTrampolineSource(const WrapperProgram &p) {
  std::ostringstream os;
  os << R"(
// --- tuning trampoline (coil compile --tune): calls a launcher with arguments from an array
#include <cstdint>
#include <type_traits>
#include <utility>
namespace {
struct coil_tune_arg {
  void *ptr;
  int64_t size;
};
template <class T> T coil_tune_get(const coil_tune_arg &a) {
  if constexpr (std::is_pointer_v<T>)
    return static_cast<T>(a.ptr);
  else
    return static_cast<T>(a.size);
}
template <class... P, size_t... I>
int32_t coil_tune_apply(int32_t (*f)(const coil_cuda_ctx *, P...), const coil_cuda_ctx *ctx,
                        const coil_tune_arg *a, std::index_sequence<I...>) {
  (void)a;
  return f(ctx, coil_tune_get<P>(a[I])...);
}
template <class... P>
int32_t coil_tune_apply(int32_t (*f)(const coil_cuda_ctx *, P...), const coil_cuda_ctx *ctx,
                        const coil_tune_arg *a) {
  return coil_tune_apply(f, ctx, a, std::index_sequence_for<P...>{});
}
} // namespace
extern "C" int32_t coil_tune_launch(const coil_cuda_ctx *ctx, int32_t kernel, int32_t config,
                                    const coil_tune_arg *a) {
  switch (kernel) {
)";
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    os << "  case " << k << ":\n    switch (config) {\n";
    for (size_t c = 0; c < p.kernels[k].configs.size(); ++c)
      os << "    case " << c << ": return coil_tune_apply(" << p.kernels[k].name << "_c" << c
         << ", ctx, a);\n";
    os << "    }\n    break;\n";
  }
  os << "  }\n  return -1;\n}\n";
  return os.str();
}

namespace {

using TuneLaunchFn = int32_t (*)(const coil_cuda_ctx *, int32_t, int32_t, const TuneArg *);

/// Random bytes for a buffer of `t`: floats uniform in [-1, 1), integers and bools 0 (valid
/// indices for gathers). A block of random values is repeated to fill large buffers.
std::vector<char> randomBytes(DType t, int64_t numel, uint64_t &seed) {
  size_t es = dtypeSize(t);
  std::vector<char> out(size_t(std::max<int64_t>(numel, 1)) * es, 0);
  if (!isFloat(t)) return out;
  size_t unique = std::min<size_t>(size_t(std::max<int64_t>(numel, 1)), size_t(1) << 20);
  auto next = [&] {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return float(double(seed >> 11) / double(uint64_t(1) << 53) * 2 - 1);
  };
  for (size_t i = 0; i < unique; ++i) {
    float v = next();
    char *dst = out.data() + i * es;
    switch (t) {
    case DType::F64: {
      double d = v;
      std::memcpy(dst, &d, 8);
      break;
    }
    case DType::F32:
      std::memcpy(dst, &v, 4);
      break;
    case DType::F16: {
      uint16_t h = floatToHalf(v);
      std::memcpy(dst, &h, 2);
      break;
    }
    default: {
      uint16_t h = floatToBf16(v);
      std::memcpy(dst, &h, 2);
      break;
    }
    }
  }
  for (size_t i = unique * es; i < out.size(); i += unique * es)
    std::memcpy(out.data() + i, out.data(), std::min(unique * es, out.size() - i));
  return out;
}

std::string cudaLibraryPath() {
  if (const char *env = std::getenv("COIL_CUDA_LIBRARY"); env && *env) return env;
  for (const char *rel : {"lib/libcoil_cuda.so", "libcoil_cuda.so"})
    if (std::string p = installedFile(rel); !p.empty()) return p;
  return "libcoil_cuda.so";
}

/// Bytes of device memory one bucket of a task may use. Each measured bucket's buffers are
/// filled on the host and uploaded; at 4 GiB that took seconds per job, and a model with
/// dynamic axes up to 2^16 spent minutes of its compile there (timm EfficientFormer over 200 s,
/// Swin 145 s). Larger buckets saturate the GPU whatever the config; the heuristic picks theirs.
constexpr int64_t kBucketBytesBudget = int64_t(512) << 20;

/// The tuning request: what the worker loads, then one job per task and bucket with the
/// call's arguments at the bucket's representative sizes. Buckets over the memory budget, or
/// whose sizes do not evaluate, are left out (the heuristic decides them).
} // namespace

std::string tuneRequestText(const WrapperProgram &p, const std::vector<TuneTask> &tasks,
                            const MeasureInput &in, const std::string &lib) {
  namespace fs = std::filesystem;
  std::ostringstream os;
  os << "lib " << lib << "\n"
     << "fatbin " << fs::absolute(fs::path(in.packageDir) / in.fatbin).string() << "\n"
     << "workspace " << in.workspaceBytes << "\n";
  for (const std::string &f : in.functions) os << "function " << f << "\n";
  for (size_t ti = 0; ti < tasks.size(); ++ti) {
    const auto &call = std::get<KernelCall>(p.lines[tasks[ti].line]);
    const KernelInfo &k = p.kernels[size_t(call.kernel)];
    for (size_t b = 0; b < tasks[ti].buckets.size(); ++b) {
      const SymBindings &bind = tasks[ti].buckets[b].bindings;
      std::ostringstream args;
      int64_t total = 0;
      bool ok = true;
      for (const CallArg &a : call.args) {
        if (a.kind == CallArg::Kind::Buffer) {
          const Buffer &buf = p.buffers[size_t(a.buffer)];
          Expected<int64_t> n = buf.numel().evaluate(bind);
          ok = ok && n && *n >= 0;
          if (!ok) break;
          total += *n * int64_t(dtypeSize(buf.dtype));
          args << "arg b " << dtypeName(buf.dtype) << " " << *n << "\n";
        } else if (a.kind == CallArg::Kind::Size) {
          Expected<int64_t> v = a.size.evaluate(bind);
          ok = ok && v;
          if (!ok) break;
          args << "arg s " << *v << "\n";
        } else {
          ok = false; // launchers take no float arguments
          break;
        }
      }
      if (!ok || total > kBucketBytesBudget) continue;
      os << "job " << ti << " " << b << " " << call.kernel << " " << k.name << " "
         << k.configs.size() << " " << call.args.size() << "\n"
         << args.str();
    }
  }
  return os.str();
}

namespace {

/// The worker's output as timings; its "E" line as the error.
Expected<MeasureResult> parseWorkerOutput(const WrapperProgram &p,
                                          const std::vector<TuneTask> &tasks,
                                          const std::string &text) {
  MeasureResult res;
  res.timings.resize(tasks.size());
  for (size_t t = 0; t < tasks.size(); ++t) res.timings[t].resize(tasks[t].buckets.size());
  std::string error;
  std::istringstream is(text);
  std::string line;
  while (std::getline(is, line)) {
    if (line.rfind("D ", 0) == 0) res.device = line.substr(2);
    if (line.rfind("E ", 0) == 0) error = line.substr(2);
    size_t t, b, c;
    double us;
    if (std::sscanf(line.c_str(), "T %zu %zu %zu %lf", &t, &b, &c, &us) == 4 && t < tasks.size() &&
        b < tasks[t].buckets.size()) {
      const auto &call = std::get<KernelCall>(p.lines[tasks[t].line]);
      std::vector<double> &v = res.timings[t][b];
      v.resize(p.kernels[size_t(call.kernel)].configs.size(), -1);
      if (c < v.size()) v[c] = us;
    }
  }
  if (!error.empty()) return Error::runtime("tuning: " + error);
  // A bucket with a config left unmeasured (not run) is left to the heuristic.
  for (auto &task : res.timings)
    for (auto &v : task)
      if (std::find(v.begin(), v.end(), -1.0) != v.end()) v.clear();
  return res;
}

/// The GPUs of this machine as `nvidia-smi -L` lists them (names, without UUIDs).
std::string gpuList() {
  FILE *f = popen("nvidia-smi -L 2>/dev/null", "r");
  if (!f) return "";
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, f)) {
    std::string line = buf;
    if (size_t u = line.find(" (UUID:"); u != std::string::npos) line = line.substr(0, u) + "\n";
    out += line;
  }
  pclose(f);
  return out;
}

/// The coil executable that runs the worker: $COIL_EXECUTABLE, else this process when it is
/// `coil`, else the `coil` of the installation this compiler runs from (driver/Install.h: the
/// tests in build/bin, libcoil_compiler.so in lib/ beside bin/).
std::string coilExecutable() {
  namespace fs = std::filesystem;
  if (const char *env = std::getenv("COIL_EXECUTABLE"); env && *env) return env;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && exe.filename() == "coil") return exe.string();
  for (const char *rel : {"coil", "bin/coil"})
    if (std::string p = installedFile(rel); !p.empty()) return p;
  return "";
}

} // namespace

int runTuneWorker(const std::string &requestPath, FILE *out) {
  auto fail = [&](const std::string &m) {
    std::string line = m;
    std::replace(line.begin(), line.end(), '\n', ' ');
    std::fprintf(out, "E %s\n", line.c_str());
    std::fflush(out);
    return 1;
  };
  std::ifstream req(requestPath);
  if (!req) return fail("cannot read the tuning request '" + requestPath + "'");
  struct Job {
    size_t task = 0, bucket = 0;
    int32_t kernel = 0, configs = 0;
    std::string name;
    std::vector<std::pair<DType, int64_t>> buffers; ///< per arg: a buffer, or (I64, size)
    std::vector<bool> isBuffer;
  };
  std::string lib, fatbinPath;
  int64_t workspace = 0;
  std::vector<std::string> functions;
  std::vector<Job> jobs;
  std::string line;
  while (std::getline(req, line)) {
    std::istringstream is(line);
    std::string key;
    is >> key;
    if (key == "lib") {
      std::getline(is >> std::ws, lib);
    } else if (key == "fatbin") {
      std::getline(is >> std::ws, fatbinPath);
    } else if (key == "workspace") {
      is >> workspace;
    } else if (key == "function") {
      std::string f;
      is >> f;
      functions.push_back(f);
    } else if (key == "job") {
      Job j;
      size_t nargs = 0;
      is >> j.task >> j.bucket >> j.kernel >> j.name >> j.configs >> nargs;
      jobs.push_back(j);
    } else if (key == "arg" && !jobs.empty()) {
      std::string kind;
      is >> kind;
      if (kind == "b") {
        std::string dt;
        int64_t n = 0;
        is >> dt >> n;
        std::optional<DType> t = parseDType(dt);
        if (!t) return fail("bad dtype '" + dt + "' in the tuning request");
        jobs.back().buffers.emplace_back(*t, n);
        jobs.back().isBuffer.push_back(true);
      } else {
        int64_t v = 0;
        is >> v;
        jobs.back().buffers.emplace_back(DType::I64, v);
        jobs.back().isBuffer.push_back(false);
      }
    }
  }

  std::ifstream f(fatbinPath, std::ios::binary);
  std::string fatbin((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (fatbin.empty()) return fail("cannot read '" + fatbinPath + "'");
  std::string libPath = cudaLibraryPath();
  void *cudaLib = dlopen(libPath.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!cudaLib) return fail("cannot load '" + libPath + "': " + dlerror());
  using TableFn = const runtime::cuda::TuneTable *(*)();
  auto tableFn = reinterpret_cast<TableFn>(dlsym(cudaLib, "coil_cuda_tune_table"));
  const runtime::cuda::TuneTable *tt = tableFn ? tableFn() : nullptr;
  if (!tt || tt->version != runtime::cuda::kTuneTableVersion)
    return fail("'" + libPath + "' has no tuning table of version " +
                std::to_string(runtime::cuda::kTuneTableVersion));
  void *tl = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!tl) return fail("cannot load the tuning launchers: " + std::string(dlerror()));
  auto launch = reinterpret_cast<TuneLaunchFn>(dlsym(tl, "coil_tune_launch"));
  if (!launch) return fail("the tuning launchers lack coil_tune_launch");

  std::vector<const char *> fns;
  for (const std::string &s : functions) fns.push_back(s.c_str());
  runtime::cuda::TuneDesc desc;
  desc.package = fatbinPath.c_str();
  desc.fatbin = fatbin.data();
  desc.fatbinBytes = fatbin.size();
  desc.fatbinName = fatbinPath.c_str();
  desc.functions = fns.data();
  desc.numFunctions = fns.size();
  desc.workspaceBytes = size_t(workspace);
  void *session = nullptr;
  const coil_cuda_ctx *ctx = nullptr;
  std::string device, error;
  if (tt->open(&desc, &session, &ctx, &device, &error) != 0) return fail(error);
  std::fprintf(out, "D %s\n", device.c_str());
  std::fflush(out);
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  for (const Job &j : jobs) {
    // Fresh device buffers with random contents, sizes as they are.
    std::vector<TuneArg> args;
    for (size_t i = 0; i < j.buffers.size(); ++i) {
      if (!j.isBuffer[i]) {
        args.push_back(TuneArg{nullptr, j.buffers[i].second});
        continue;
      }
      std::vector<char> host = randomBytes(j.buffers[i].first, j.buffers[i].second, seed);
      void *d = nullptr;
      if (tt->upload(session, host.data(), host.size(), &d, &error) != 0) return fail(error);
      args.push_back(TuneArg{d, 0});
    }
    struct Call {
      TuneLaunchFn launch;
      const coil_cuda_ctx *ctx;
      int32_t kernel, config;
      const TuneArg *args;
    };
    for (int32_t c = 0; c < j.configs; ++c) {
      Call call{launch, ctx, j.kernel, c, args.data()};
      double us = -1;
      int32_t rc = tt->time(
          session,
          [](void *user) {
            auto *k = static_cast<Call *>(user);
            return k->launch(k->ctx, k->kernel, k->config, k->args);
          },
          &call, 3, 15, &us, &error);
      // A failed launch may leave the context unusable: report it and stop.
      if (rc != 0) return fail(wrapper::KernelInfo::entryName(j.name, c) + ": " + error);
      std::fprintf(out, "T %zu %zu %d %.4f\n", j.task, j.bucket, c, us);
      std::fflush(out);
    }
    tt->freeAll(session);
  }
  tt->close(session);
  return 0;
}

Expected<MeasureResult> measureConfigs(const WrapperProgram &p, const std::vector<TuneTask> &tasks,
                                       const MeasureInput &in) {
  namespace fs = std::filesystem;
  if (tasks.empty()) return MeasureResult{};
  if (!gpuPresent())
    return Error::runtime("no NVIDIA GPU found (no /dev/nvidia0, and nvidia-smi -L lists none)");
  std::string exe = coilExecutable();
  if (exe.empty())
    return Error::runtime("the coil executable that measures configs was not found (set "
                          "COIL_EXECUTABLE to its path)");
  // The launchers, with a trampoline that calls them from an argument array.
  std::string dir = (fs::path(in.packageDir) / "tune").string();
  std::vector<SourceFile> sources = {{"src/tune.cpp", in.launcherSource + tuneTrampolineSource(p)}};
  sources.insert(sources.end(), in.units.begin(), in.units.end());
  Expected<BuildResult> built = buildSharedObject(dir, sources, "tune.so", in.toolchain);
  if (!built) return built.error();
  std::string request = (fs::path(dir) / "request.txt").string();
  std::string body =
      tuneRequestText(p, tasks, in, fs::absolute(fs::path(dir) / "tune.so").string());
  {
    std::ofstream f(request);
    f << body;
    if (!f) return Error::runtime("cannot write '" + request + "'");
  }
  // The cache key: what runs (the launchers, the fatbin, the jobs; not their paths) and where.
  COIL_TRY(CompileCache cache, in.toolchain.useCache ? CompileCache::fromEnvironment()
                                                     : Expected<CompileCache>(CompileCache()));
  std::string cacheEntry;
  if (cache.enabled()) {
    std::ifstream fb(fs::path(in.packageDir) / in.fatbin, std::ios::binary);
    std::string fatbin((std::istreambuf_iterator<char>(fb)), std::istreambuf_iterator<char>());
    std::string jobs = body.substr(std::min(body.find("\nworkspace "), body.size()));
    cacheEntry = "tune-" +
                 sha256Hex("coil-tune 2\ncoil " + std::string(kCoilVersion) + "\n" + built->key +
                           "\n" + sha256Hex(fatbin) + "\n" + gpuList() + jobs) +
                 ".txt";
    std::optional<std::string> cached = cache.load(cacheEntry);
    if (cached && !cached->empty()) {
      const std::string &text = *cached;
      Expected<MeasureResult> r = parseWorkerOutput(p, tasks, text);
      if (r) {
        std::error_code ec;
        if (!std::getenv("COIL_KEEP_TUNE_DIR")) fs::remove_all(dir, ec);
        r->cached = true;
        return r;
      }
    }
  }

  int fds[2];
  if (pipe(fds) != 0) return Error::runtime("tuning: pipe() failed");
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return Error::runtime("tuning: fork() failed");
  }
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 1);
    close(fds[1]);
    execl(exe.c_str(), exe.c_str(), "tune-worker", request.c_str(), (char *)nullptr);
    _exit(127);
  }
  close(fds[1]);
  std::string text;
  // Progress: one "T" line per config measured, of the configs of every job requested.
  int64_t measured = 0, toMeasure = 0;
  {
    std::istringstream jobs(body);
    for (std::string line; std::getline(jobs, line);) {
      std::istringstream f(line);
      std::string word, name;
      size_t task = 0, bucket = 0, kernel = 0;
      int64_t configs = 0;
      if (f >> word && word == "job" && f >> task >> bucket >> kernel >> name >> configs)
        toMeasure += configs;
    }
  }
  if (in.onProgress) in.onProgress("tune", 0, toMeasure);
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(in.timeoutSeconds);
  bool timedOut = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      timedOut = true;
      break;
    }
    pollfd pf{fds[0], POLLIN, 0};
    int r = poll(&pf, 1, int(std::min<long long>(left, 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[4096];
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) // a "T" line starts at the text's start or after a newline
      if (buf[i] == 'T' && (i ? buf[i - 1] == '\n' : text.empty() || text.back() == '\n'))
        ++measured;
    text.append(buf, size_t(n));
    if (in.onProgress && measured) in.onProgress("tune", std::min(measured, toMeasure), toMeasure);
  }
  close(fds[0]);
  if (timedOut) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  std::error_code ec;
  if (!std::getenv("COIL_KEEP_TUNE_DIR")) fs::remove_all(dir, ec);

  if (timedOut)
    return Error::runtime("tuning did not finish within " + std::to_string(int(in.timeoutSeconds)) +
                          " s");
  Expected<MeasureResult> res = parseWorkerOutput(p, tasks, text);
  if (!res) return res.error();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Error::runtime("tuning: the measuring process (" + exe + " tune-worker) " +
                          (WIFSIGNALED(status)
                               ? "died of signal " + std::to_string(WTERMSIG(status))
                               : "exited with status " + std::to_string(WEXITSTATUS(status))));
  if (!cacheEntry.empty()) cache.store(cacheEntry, text); // atomic, verified when read
  return res;
}

} // namespace coil::tune
