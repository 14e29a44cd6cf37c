/// The C API of libcoil_runtime (include/coil/coil.h): package loading, input validation, runs.
///
/// Extern kernels: a model.so calls coil_cpu_* functions that live in libcoil_runtime.so and
/// are undefined symbols of model.so. dlopen resolves them from the global scope only, which
/// lacks libcoil_runtime when it was itself loaded RTLD_LOCAL (Python's ctypes, a plugin host).
/// Before loading a model, the runtime therefore re-opens itself by path (found with dladdr)
/// with RTLD_NOLOAD | RTLD_GLOBAL, which promotes the already loaded library to the global
/// scope without loading a second copy. The model itself is loaded RTLD_LOCAL, so that several
/// packages (which export the same coil_model_* names) coexist.
#include "runtime/Archive.h"
#include "runtime/CudaHost.h"
#include "runtime/DebugPrinter.h"
#include "runtime/Load.h"
#include "runtime/Metadata.h"
#include "support/Sha256.h"

#include <algorithm>
#include <cerrno>
#include <coil/coil.h>
#include <coil/cuda_abi.h>
#include <coil/debug.h>
#include <coil/model_abi.h>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace coil;
using namespace coil::runtime;

static_assert(int(DType::F64) == COIL_DTYPE_F64 && int(DType::F32) == COIL_DTYPE_F32 &&
                  int(DType::F16) == COIL_DTYPE_F16 && int(DType::BF16) == COIL_DTYPE_BF16 &&
                  int(DType::I64) == COIL_DTYPE_I64 && int(DType::I32) == COIL_DTYPE_I32 &&
                  int(DType::I16) == COIL_DTYPE_I16 && int(DType::I8) == COIL_DTYPE_I8 &&
                  int(DType::U64) == COIL_DTYPE_U64 && int(DType::U32) == COIL_DTYPE_U32 &&
                  int(DType::U16) == COIL_DTYPE_U16 && int(DType::U8) == COIL_DTYPE_U8 &&
                  int(DType::Bool) == COIL_DTYPE_BOOL,
              "coil_dtype and DType disagree");

namespace {

thread_local std::string g_lastError;

coil_status fail(coil_status s, std::string message) {
  g_lastError = std::move(message);
  return s;
}

void *alignedAlloc(size_t bytes) {
  size_t n = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  return std::aligned_alloc(64, n);
}

void *runtimeAlloc(void *, size_t bytes) {
  return alignedAlloc(bytes);
}
void runtimeFree(void *, void *p) {
  std::free(p);
}

/// Scratch arenas for runs; one per concurrent run, reused across runs.
class ArenaPool {
public:
  ~ArenaPool() {
    for (auto &[p, n] : free_) std::free(p);
  }
  /// A block of at least `bytes` bytes, or nullptr.
  std::pair<void *, size_t> acquire(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto best = free_.end();
      for (auto it = free_.begin(); it != free_.end(); ++it)
        if (it->second >= bytes && (best == free_.end() || it->second < best->second)) best = it;
      if (best != free_.end()) {
        auto r = *best;
        free_.erase(best);
        return r;
      }
    }
    size_t n = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    return {alignedAlloc(n), n};
  }
  void release(std::pair<void *, size_t> block) {
    if (!block.first) return;
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(block);
  }

private:
  std::mutex mu_;
  std::vector<std::pair<void *, size_t>> free_;
};

std::string errnoText() {
  return std::strerror(errno);
}

/// Promotes libcoil_runtime to the global symbol scope (see the file comment).
void promoteRuntimeToGlobal() {
  static std::once_flag once;
  std::call_once(once, [] {
    Dl_info info;
    if (dladdr(reinterpret_cast<void *>(&promoteRuntimeToGlobal), &info) && info.dli_fname)
      (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  });
}

} // namespace

struct coil_model {
  std::string path;
  Metadata meta;
  SymRanges ranges;
  std::vector<std::vector<const char *>> inputDims, outputDims;
  void *weights = nullptr;
  size_t weightsSize = 0;
  std::vector<const void *> constants;
  void *library = nullptr;
  coil_model_arena_bytes_fn arenaBytes = nullptr;
  coil_model_run_fn run = nullptr;
  ArenaPool arenas;
  std::unique_ptr<CudaModel> cuda; ///< device "cuda": the device half (runtime/CudaHost.h)
  // The debug printer: launches of metadata.json, the printer the environment asked for at
  // load time, hooks installed by coil_model_set_debug_hooks (they win).
  std::vector<LaunchSig> launches;
  std::unique_ptr<DebugPrinter> debug;
  const coil_debug_hooks *userHooks = nullptr;

  ~coil_model() {
    cuda.reset();
    if (library) dlclose(library);
    if (weights) munmap(weights, weightsSize);
  }
};

namespace {

/// The part of coil_model_load that runs none of the package's code (runtime/Load.h).
coil_status openPackage(const char *pathC, std::unique_ptr<coil_model> &m) {
  m = std::make_unique<coil_model>();
  m->path = pathC;
  if (isPackageArchive(m->path)) { // `coil pack`'s archive (runtime/Archive.h)
    auto unpacked = unpackPackageArchive(m->path);
    if (!unpacked) return fail(COIL_ERROR_PACKAGE, unpacked.error().message());
    m->path = *unpacked;
  }
  std::string pkg = "package '" + m->path + "'";

  std::string metaPath = m->path + "/metadata.json";
  std::ifstream f(metaPath, std::ios::binary);
  if (!f) return fail(COIL_ERROR_PACKAGE, pkg + ": cannot open metadata.json: " + errnoText());
  std::stringstream ss;
  ss << f.rdbuf();
  // Integrity first (src/wrapper/Package.h): metadata.json as written, then each file against
  // its digest before it is used.
  auto sealed = splitSealedMetadata(ss.str());
  if (!sealed) return fail(COIL_ERROR_PACKAGE, pkg + ": " + sealed.error().message());
  if (Status st = checkBody(*sealed); !st.ok())
    return fail(COIL_ERROR_PACKAGE, pkg + ": " + st.error().message());
  const std::string &body = sealed->body;
  auto meta = parseMetadata(body);
  if (!meta) return fail(COIL_ERROR_PACKAGE, pkg + ": " + meta.error().message());
  m->meta = std::move(meta).value();
  const Metadata &md = m->meta;
  if (md.formatVersion != 2)
    return fail(COIL_ERROR_PACKAGE, pkg + ": package format version " +
                                        std::to_string(md.formatVersion) +
                                        ", this runtime reads version 2: recompile the model");
  if (md.abiVersion != COIL_MODEL_ABI_VERSION || sealed->integrity.abiVersion != md.abiVersion)
    return fail(COIL_ERROR_PACKAGE,
                pkg + ": metadata.json says model ABI version " + std::to_string(md.abiVersion) +
                    " (its integrity record " + std::to_string(sealed->integrity.abiVersion) +
                    "), this runtime has " + std::to_string(COIL_MODEL_ABI_VERSION));
  auto launches = parseLaunches(body);
  if (!launches) return fail(COIL_ERROR_PACKAGE, pkg + ": " + launches.error().message());
  m->launches = std::move(launches).value();
  auto printer = DebugPrinter::fromEnvironment(m->launches, md.name);
  if (!printer) return fail(COIL_ERROR_INVALID_ARGUMENT, pkg + ": " + printer.error().message());
  m->debug = std::move(printer).value();
  if (std::string lacks = missingCpuFeatures(md); !lacks.empty())
    return fail(COIL_ERROR_PACKAGE,
                pkg + ": model.so is built for " + md.cpuTarget +
                    (md.cpuFeatures.empty() ? "" : " with extensions of the CPU it was built on") +
                    " (metadata.json cpu_target), but this CPU lacks " + lacks +
                    "; compile it with --cpu-target x86-64-v2 (the default) or for this CPU "
                    "with --cpu-target native");
  if (md.device != "cpu" && md.device != "cuda")
    return fail(COIL_ERROR_PACKAGE, pkg + ": compiled for device '" + md.device +
                                        "', this runtime runs cpu and cuda packages");
  /// The digest the record holds for `file` against that of `bytes`.
  auto checkDigest = [&](const std::string &file, const void *bytes, size_t size) -> coil_status {
    const std::string *want = sealed->integrity.digestOf(file);
    if (!want)
      return fail(COIL_ERROR_PACKAGE,
                  pkg + ": metadata.json's integrity record has no digest of " + file);
    std::string got = sha256Hex(bytes, size);
    if (got != *want)
      return fail(COIL_ERROR_PACKAGE, pkg + ": " + file +
                                          " does not match metadata.json (modified, truncated "
                                          "or from another package): its SHA-256 is " +
                                          got + ", the integrity record says " + *want);
    return COIL_OK;
  };

  // The record covers the whole package: files this runtime does not read (src/wrapper.py,
  // which coil.pywrapper runs) are checked too, so that no byte of the record goes unchecked.
  for (const auto &[file, digest] : sealed->integrity.files) {
    if (file == md.library || file == md.weights || (md.cuda && file == md.cuda->fatbin)) continue;
    std::ifstream xf(m->path + "/" + file, std::ios::binary);
    if (!xf)
      return fail(COIL_ERROR_PACKAGE,
                  pkg + ": cannot open " + file +
                      " (listed in metadata.json's integrity record): " + errnoText());
    std::stringstream xs;
    xs << xf.rdbuf();
    std::string bytes = xs.str();
    if (coil_status s = checkDigest(file, bytes.data(), bytes.size()); s != COIL_OK) return s;
  }

  // model.so, read and checked (never loaded yet): its digest, and the metadata it names.
  std::string libPath = m->path + "/" + md.library;
  std::string library;
  {
    std::ifstream lf(libPath, std::ios::binary);
    if (!lf)
      return fail(COIL_ERROR_PACKAGE, pkg + ": cannot open " + md.library + ": " + errnoText());
    std::stringstream ls;
    ls << lf.rdbuf();
    library = ls.str();
  }
  if (coil_status s = checkDigest(md.library, library.data(), library.size()); s != COIL_OK)
    return s;
  {
    static const std::string marker = "coil-metadata-sha256:";
    std::string named;
    for (size_t at = library.find(marker); at != std::string::npos;
         at = library.find(marker, at + 1)) {
      std::string_view hex(library.data() + at + marker.size(),
                           std::min<size_t>(64, library.size() - at - marker.size()));
      if (isSha256Hex(hex)) named = std::string(hex);
    }
    if (named != sealed->integrity.metadata)
      return fail(
          COIL_ERROR_PACKAGE,
          pkg + ": " + md.library + " was not built for this metadata.json (" +
              (named.empty() ? std::string("it names no metadata") : "it names metadata " + named) +
              ", metadata.json is " + sealed->integrity.metadata + ")");
  }
  library.clear();
  library.shrink_to_fit();
  for (const SymbolSig &s : md.symbols) m->ranges[s.name] = {s.min, s.max};
  for (const TensorSig &t : md.inputs) {
    m->inputDims.emplace_back();
    for (const std::string &d : t.dimText) m->inputDims.back().push_back(d.c_str());
  }
  for (const TensorSig &t : md.outputs) {
    m->outputDims.emplace_back();
    for (const std::string &d : t.dimText) m->outputDims.back().push_back(d.c_str());
  }

  // weights.bin, mapped read-only.
  std::string wPath = m->path + "/" + md.weights;
  int fd = open(wPath.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail(COIL_ERROR_PACKAGE, pkg + ": cannot open " + md.weights + ": " + errnoText());
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return fail(COIL_ERROR_PACKAGE, pkg + ": cannot stat " + md.weights + ": " + errnoText());
  }
  if (int64_t(st.st_size) != md.weightsBytes) {
    close(fd);
    return fail(COIL_ERROR_PACKAGE,
                pkg + ": " + md.weights + " has " + std::to_string(int64_t(st.st_size)) +
                    " bytes, metadata.json says " + std::to_string(md.weightsBytes));
  }
  if (md.weightsBytes > 0) {
    void *p = mmap(nullptr, size_t(md.weightsBytes), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      close(fd);
      return fail(COIL_ERROR_PACKAGE, pkg + ": cannot map " + md.weights + ": " + errnoText());
    }
    m->weights = p;
    m->weightsSize = size_t(md.weightsBytes);
  }
  close(fd);
  if (coil_status s = checkDigest(md.weights, m->weights, m->weightsSize); s != COIL_OK) return s;
  if (md.cuda) { // the fatbin, which CudaModel::load hands to the driver
    std::ifstream ff(m->path + "/" + md.cuda->fatbin, std::ios::binary);
    if (!ff)
      return fail(COIL_ERROR_PACKAGE, pkg + ": cannot open " + md.cuda->fatbin +
                                          " (metadata.json cuda.fatbin): " + errnoText());
    std::stringstream fs;
    fs << ff.rdbuf();
    std::string fatbin = fs.str();
    if (coil_status s = checkDigest(md.cuda->fatbin, fatbin.data(), fatbin.size()); s != COIL_OK)
      return s;
  }
  for (const ConstantSig &c : md.constants)
    m->constants.push_back(static_cast<const char *>(m->weights) + c.offset);
  return COIL_OK;
}

coil_status loadModel(const char *pathC, coil_model **out) {
  if (!pathC || !out) return fail(COIL_ERROR_INVALID_ARGUMENT, "coil_model_load: null argument");
  *out = nullptr;
  std::unique_ptr<coil_model> m;
  if (coil_status s = openPackage(pathC, m); s != COIL_OK) return s;
  const Metadata &md = m->meta;
  std::string pkg = "package '" + m->path + "'";
  std::string libPath = m->path + "/" + md.library;

  // CUDA packages: libcoil_cuda (loaded RTLD_GLOBAL: model.so's coil_cuda_* externs), the
  // fatbin and the device weights, before model.so.
  if (md.device == "cuda")
    if (CudaStatus s = CudaModel::load(m->path, md, m->weights, m->weightsSize, m->cuda); s.code)
      return fail(s.code, s.message);

  // model.so
  promoteRuntimeToGlobal();
  m->library = dlopen(libPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!m->library) {
    const char *e = dlerror();
    return fail(COIL_ERROR_PACKAGE, pkg + ": cannot load " + md.library + ": " + (e ? e : "?"));
  }
  auto version =
      reinterpret_cast<coil_model_abi_version_fn>(dlsym(m->library, "coil_model_abi_version"));
  m->arenaBytes =
      reinterpret_cast<coil_model_arena_bytes_fn>(dlsym(m->library, "coil_model_arena_bytes"));
  m->run = reinterpret_cast<coil_model_run_fn>(dlsym(m->library, "coil_model_run"));
  if (!version || !m->arenaBytes || !m->run)
    return fail(COIL_ERROR_PACKAGE,
                pkg + ": " + md.library + " lacks the coil_model_* functions of the model ABI");
  if (version() != COIL_MODEL_ABI_VERSION)
    return fail(COIL_ERROR_PACKAGE, pkg + ": " + md.library + " has model ABI version " +
                                        std::to_string(version()) + ", this runtime has " +
                                        std::to_string(COIL_MODEL_ABI_VERSION));
  *out = m.release();
  return COIL_OK;
}

std::string dimsText(const int64_t *shape, int64_t rank) {
  std::string s = "[";
  for (int64_t i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Checks the inputs against the compiled signature; on success `bytes[i]` is input i's size.
coil_status validateInputs(const coil_model &m, const coil_tensor *inputs, int64_t n) {
  const Metadata &md = m.meta;
  if (n != int64_t(md.inputs.size()))
    return fail(COIL_ERROR_INVALID_ARGUMENT, "model '" + md.name + "' takes " +
                                                 std::to_string(md.inputs.size()) +
                                                 " inputs, got " + std::to_string(n));
  if (n > 0 && !inputs) return fail(COIL_ERROR_INVALID_ARGUMENT, "coil_model_run: inputs is null");
  for (int64_t i = 0; i < n; ++i) {
    const TensorSig &sig = md.inputs[i];
    const coil_tensor &t = inputs[i];
    auto in = [&] { return "input " + std::to_string(i) + " '" + sig.name + "'"; };
    if (int(t.dtype) < 0 || int(t.dtype) > int(COIL_DTYPE_BOOL) || int(t.dtype) != int(sig.dtype))
      return fail(COIL_ERROR_INVALID_ARGUMENT, in() + " must have dtype " +
                                                   std::string(dtypeName(sig.dtype)) + ", got " +
                                                   coil_dtype_name(t.dtype));
    if (t.rank != int64_t(sig.dims.size()))
      return fail(COIL_ERROR_INVALID_ARGUMENT, in() + " must have rank " +
                                                   std::to_string(sig.dims.size()) + ", got " +
                                                   std::to_string(t.rank));
    if (t.rank > 0 && !t.shape) return fail(COIL_ERROR_INVALID_ARGUMENT, in() + ": shape is null");
    // Bytes, not only elements: [2^58, 16] f32 has 2^62 elements but 2^64 bytes, which wraps
    // in every size the wrapper computes. At most 2^59 elements (ir/Tensor.h) and 2^62 bytes.
    __int128 numel = 1;
    for (int64_t d = 0; d < t.rank; ++d) {
      if (t.shape[d] < 0)
        return fail(COIL_ERROR_INVALID_ARGUMENT, in() + " dim " + std::to_string(d) +
                                                     " must be >= 0, got " +
                                                     std::to_string(t.shape[d]));
      numel *= t.shape[d];
      if (numel > (__int128(1) << 59) ||
          numel * __int128(dtypeSize(sig.dtype)) > (__int128(1) << 62))
        return fail(COIL_ERROR_INVALID_ARGUMENT, in() + " is too large: shape " +
                                                     dimsText(t.shape, t.rank) + " of " +
                                                     std::string(dtypeName(sig.dtype)) +
                                                     " has more than 2^59 elements or 2^62 bytes");
    }
    if (numel > 0 && !t.data) return fail(COIL_ERROR_INVALID_ARGUMENT, in() + ": data is null");
  }
  // Bind symbols as the model does, then check every dim and each symbol's range.
  // Messages are built only on failure: this runs before every run.
  SymBindings binds;
  std::map<std::string, const BindingSig *> boundBy;
  auto dimName = [&](int64_t input, int64_t dim) {
    return "input " + std::to_string(input) + " '" + md.inputs[input].name + "' dim " +
           std::to_string(dim);
  };
  for (const BindingSig &b : md.bindings) {
    int64_t v = inputs[b.input].shape[b.dim];
    auto [it, fresh] = binds.emplace(b.symbol, v);
    if (!fresh && it->second != v) {
      const BindingSig *first = boundBy[b.symbol];
      return fail(COIL_ERROR_INVALID_ARGUMENT, dimName(b.input, b.dim) + " is " +
                                                   std::to_string(v) + ", but " + b.symbol +
                                                   " is " + std::to_string(it->second) + " from " +
                                                   dimName(first->input, first->dim));
    }
    if (fresh) boundBy[b.symbol] = &b;
    auto r = m.ranges.find(b.symbol);
    SymRange range = r == m.ranges.end() ? SymRange{} : r->second;
    if (v < range.min || v > range.max)
      return fail(COIL_ERROR_INVALID_ARGUMENT, dimName(b.input, b.dim) + " (" + b.symbol + ") is " +
                                                   std::to_string(v) + ", outside " + b.symbol +
                                                   "'s range [" + std::to_string(range.min) + ", " +
                                                   std::to_string(range.max) + "]");
  }
  for (int64_t i = 0; i < n; ++i) {
    const TensorSig &sig = md.inputs[i];
    for (size_t d = 0; d < sig.dims.size(); ++d) {
      if (sig.dims[d].isConstant() && sig.dims[d].constant() == inputs[i].shape[d]) continue;
      auto want = sig.dims[d].evaluate(binds);
      if (want && *want == inputs[i].shape[d]) continue;
      std::string where = dimName(i, int64_t(d));
      if (!want)
        return fail(COIL_ERROR_INVALID_ARGUMENT,
                    where + " (" + sig.dimText[d] + "): " + want.error().message());
      if (*want != inputs[i].shape[d]) {
        std::string sub;
        std::set<std::string> used;
        sig.dims[d].collectSymbols(used);
        for (const std::string &s : used)
          sub += (sub.empty() ? " with " : ", ") + s + " = " + std::to_string(binds.at(s));
        return fail(COIL_ERROR_INVALID_ARGUMENT,
                    where + " must be " + sig.dimText[d] +
                        (sig.dims[d].isConstant() ? "" : " = " + std::to_string(*want) + sub) +
                        ", got " + std::to_string(inputs[i].shape[d]) + " (shape " +
                        dimsText(inputs[i].shape, inputs[i].rank) + ")");
      }
    }
  }
  return COIL_OK;
}

/// A run: host memory, or (device) device memory on `stream` for device packages.
coil_status runModel(coil_model *m, const coil_tensor *inputs, int64_t nIn, coil_output *outputs,
                     int64_t nOut, bool device = false, void *stream = nullptr) {
  if (!m) return fail(COIL_ERROR_INVALID_ARGUMENT, "coil_model_run: model is null");
  if (coil_status s = validateInputs(*m, inputs, nIn); s != COIL_OK) return s;
  const Metadata &md = m->meta;
  if (nOut != int64_t(md.outputs.size()))
    return fail(COIL_ERROR_INVALID_ARGUMENT, "model '" + md.name + "' has " +
                                                 std::to_string(md.outputs.size()) +
                                                 " outputs, got " + std::to_string(nOut));
  if (nOut > 0 && !outputs)
    return fail(COIL_ERROR_INVALID_ARGUMENT, "coil_model_run: outputs is null");
  std::vector<const void *> inData(size_t(nIn) + 1);
  std::vector<const int64_t *> inShapes(size_t(nIn) + 1);
  for (int64_t i = 0; i < nIn; ++i) inData[i] = inputs[i].data, inShapes[i] = inputs[i].shape;
  std::vector<void *> outData(size_t(nOut) + 1);
  std::vector<int64_t> capacity(size_t(nOut) + 1);
  std::vector<int64_t> shapes(size_t(nOut + 1) * COIL_MAX_RANK);
  std::vector<int64_t *> outShapes(size_t(nOut) + 1);
  for (int64_t i = 0; i < nOut; ++i) {
    if (outputs[i].data && outputs[i].capacity < 0)
      return fail(COIL_ERROR_INVALID_ARGUMENT,
                  "output " + std::to_string(i) + " '" + md.outputs[i].name +
                      "': capacity must be >= 0, got " + std::to_string(outputs[i].capacity));
    outData[i] = outputs[i].data;
    capacity[i] = outputs[i].data ? outputs[i].capacity : 0;
    outShapes[i] = &shapes[size_t(i) * COIL_MAX_RANK];
  }
  if (m->cuda) { // the debug printer's hooks when it is on (CUDA graphs are then off)
    const coil_debug_hooks *hooks = m->userHooks ? m->userHooks
                                    : m->debug   ? m->debug->hooks()
                                                 : nullptr;
    if (m->debug && !m->userHooks) {
      std::vector<std::string> names;
      for (const TensorSig &t : md.inputs) names.push_back(t.name);
      coil_cuda_ctx inputCtx = {};
      inputCtx.stream = stream;
      if (Status st = m->debug->reportInputs(names, inputs, nIn, device, &inputCtx); !st.ok())
        return fail(COIL_ERROR_RUNTIME, st.error().message());
    }
    CudaStatus s =
        m->cuda->run(md, m->arenaBytes, m->run, inputs, nIn, outputs, nOut, !device, stream, hooks);
    if (s.code) return fail(s.code, s.message);
    for (int64_t i = 0; i < nOut; ++i) {
      outputs[i].dtype = coil_dtype(int(md.outputs[i].dtype));
      outputs[i].rank = int64_t(md.outputs[i].dims.size());
    }
    return COIL_OK;
  }
  int64_t arenaBytes = m->arenaBytes(inShapes.data());
  if (arenaBytes < 0)
    return fail(COIL_ERROR_RUNTIME, "model '" + md.name + "': arena size " +
                                        std::to_string(arenaBytes) + " for these input shapes");
  auto arena = m->arenas.acquire(size_t(arenaBytes));
  if (!arena.first)
    return fail(COIL_ERROR_RUNTIME,
                "out of memory: the run's arena needs " + std::to_string(arenaBytes) + " bytes");
  char error[1024] = {};
  coil_model_run_args args = {};
  args.abi_version = COIL_MODEL_ABI_VERSION;
  args.inputs = inData.data();
  args.input_shapes = inShapes.data();
  args.constants = m->constants.data();
  args.arena = arena.first;
  args.outputs = outData.data();
  args.output_capacity = capacity.data();
  args.output_shapes = outShapes.data();
  args.alloc = runtimeAlloc;
  args.free = runtimeFree;
  args.alloc_ctx = nullptr;
  args.error = error;
  args.error_size = sizeof error;
  args.debug = m->userHooks ? m->userHooks : m->debug ? m->debug->hooks() : nullptr;
  if (m->debug && !m->userHooks) {
    std::vector<std::string> names;
    for (const TensorSig &t : md.inputs) names.push_back(t.name);
    if (Status st = m->debug->reportInputs(names, inputs, nIn, false, nullptr); !st.ok()) {
      m->arenas.release(arena);
      return fail(COIL_ERROR_RUNTIME, st.error().message());
    }
  }
  int32_t rc = m->run(&args);
  m->arenas.release(arena);
  if (rc != 0) {
    std::string msg = error[0] ? error : "the run failed";
    bool caller = msg.find("the caller gave") != std::string::npos;
    return fail(caller ? COIL_ERROR_INVALID_ARGUMENT : COIL_ERROR_RUNTIME,
                "model '" + md.name + "': " + msg);
  }
  for (int64_t i = 0; i < nOut; ++i) {
    coil_output &o = outputs[i];
    o.owned = o.data ? 0 : 1;
    o.data = outData[i];
    o.dtype = coil_dtype(int(md.outputs[i].dtype));
    o.rank = int64_t(md.outputs[i].dims.size());
    for (int64_t d = 0; d < o.rank; ++d) o.shape[d] = outShapes[i][d];
  }
  return COIL_OK;
}

coil_status tensorInfo(const coil_model *m, int64_t index, coil_tensor_info *out, bool input) {
  if (!m || !out) return fail(COIL_ERROR_INVALID_ARGUMENT, "null argument");
  const auto &list = input ? m->meta.inputs : m->meta.outputs;
  if (index < 0 || index >= int64_t(list.size()))
    return fail(COIL_ERROR_INVALID_ARGUMENT, std::string(input ? "input" : "output") + " index " +
                                                 std::to_string(index) + " out of range [0, " +
                                                 std::to_string(list.size()) + ")");
  const TensorSig &t = list[index];
  out->name = t.name.c_str();
  out->dtype = coil_dtype(int(t.dtype));
  out->rank = int64_t(t.dims.size());
  out->dims = (input ? m->inputDims : m->outputDims)[index].data();
  return COIL_OK;
}

template <class F> coil_status guarded(F &&f) {
  try {
    return f();
  } catch (const InternalError &e) {
    return fail(COIL_ERROR_INTERNAL, "internal error: " + e.message);
  } catch (const std::bad_alloc &) {
    return fail(COIL_ERROR_RUNTIME, "out of memory");
  } catch (const std::exception &e) {
    return fail(COIL_ERROR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(COIL_ERROR_INTERNAL, "internal error: unknown exception");
  }
}

} // namespace

coil_status coil::runtime::checkPackage(const char *path, std::string *message) {
  if (!path) return fail(COIL_ERROR_INVALID_ARGUMENT, "checkPackage: null path");
  std::unique_ptr<coil_model> m;
  coil_status s = openPackage(path, m);
  if (s != COIL_OK && message) *message = g_lastError;
  return s;
}

extern "C" {

const char *coil_last_error(void) {
  return g_lastError.c_str();
}

const char *coil_dtype_name(coil_dtype dtype) {
  if (int(dtype) < 0 || int(dtype) > int(COIL_DTYPE_BOOL)) return "invalid";
  return dtypeName(DType(int(dtype))).data();
}

uint32_t coil_runtime_model_abi_version(void) {
  return COIL_MODEL_ABI_VERSION;
}

coil_status coil_model_load(const char *path, coil_model **out) {
  return guarded([&] { return loadModel(path, out); });
}

void coil_model_free(coil_model *model) {
  delete model;
}

int64_t coil_model_num_inputs(const coil_model *model) {
  return model ? int64_t(model->meta.inputs.size()) : 0;
}
int64_t coil_model_num_outputs(const coil_model *model) {
  return model ? int64_t(model->meta.outputs.size()) : 0;
}
coil_status coil_model_input_info(const coil_model *model, int64_t index, coil_tensor_info *out) {
  return guarded([&] { return tensorInfo(model, index, out, true); });
}
coil_status coil_model_output_info(const coil_model *model, int64_t index, coil_tensor_info *out) {
  return guarded([&] { return tensorInfo(model, index, out, false); });
}
int64_t coil_model_num_symbols(const coil_model *model) {
  return model ? int64_t(model->meta.symbols.size()) : 0;
}
coil_status coil_model_symbol_info(const coil_model *model, int64_t index, const char **name,
                                   int64_t *min, int64_t *max) {
  if (!model) return fail(COIL_ERROR_INVALID_ARGUMENT, "null model");
  if (index < 0 || index >= int64_t(model->meta.symbols.size()))
    return fail(COIL_ERROR_INVALID_ARGUMENT, "symbol index " + std::to_string(index) +
                                                 " out of range [0, " +
                                                 std::to_string(model->meta.symbols.size()) + ")");
  const SymbolSig &s = model->meta.symbols[index];
  if (name) *name = s.name.c_str();
  if (min) *min = s.min;
  if (max) *max = s.max;
  return COIL_OK;
}

coil_status coil_model_run(coil_model *model, const coil_tensor *inputs, int64_t num_inputs,
                           coil_output *outputs, int64_t num_outputs) {
  return guarded([&] { return runModel(model, inputs, num_inputs, outputs, num_outputs); });
}

coil_device coil_model_device(const coil_model *model) {
  return model && model->meta.device == "cuda" ? COIL_DEVICE_CUDA : COIL_DEVICE_CPU;
}

coil_status coil_model_run_device(coil_model *model, const coil_tensor *inputs, int64_t num_inputs,
                                  coil_output *outputs, int64_t num_outputs, void *stream) {
  if (!model) return fail(COIL_ERROR_INVALID_ARGUMENT, "coil_model_run_device: model is null");
  if (coil_model_device(model) == COIL_DEVICE_CPU)
    return fail(COIL_ERROR_INVALID_ARGUMENT,
                "coil_model_run_device: package '" + model->path +
                    "' is compiled for the cpu; call coil_model_run with host memory");
  return guarded(
      [&] { return runModel(model, inputs, num_inputs, outputs, num_outputs, true, stream); });
}

int64_t coil_model_num_launches(const coil_model *model) {
  return model ? int64_t(model->launches.size()) : 0;
}
const char *coil_model_launch_name(const coil_model *model, int64_t index) {
  if (!model || index < 0 || index >= int64_t(model->launches.size())) return nullptr;
  return model->launches[size_t(index)].name.c_str();
}
coil_status coil_model_set_debug_hooks(coil_model *model, const coil_debug_hooks *hooks) {
  if (!model) return fail(COIL_ERROR_INVALID_ARGUMENT, "coil_model_set_debug_hooks: null model");
  if (hooks && (hooks->abi_version != COIL_DEBUG_ABI_VERSION ||
                hooks->num_launches != model->launches.size() || !hooks->enabled || !hooks->report))
    return fail(COIL_ERROR_INVALID_ARGUMENT,
                "coil_model_set_debug_hooks: hooks of ABI version " +
                    std::to_string(hooks->abi_version) + " for " +
                    std::to_string(hooks->num_launches) + " launches; need version " +
                    std::to_string(COIL_DEBUG_ABI_VERSION) + ", " +
                    std::to_string(model->launches.size()) + " launches, enabled and report");
  model->userHooks = hooks;
  return COIL_OK;
}

coil_status coil_debug_read_value(const coil_debug_launch *launch, const coil_debug_value *value,
                                  void *dst, size_t bytes) {
  if (!launch || !value) return fail(COIL_ERROR_INVALID_ARGUMENT, "coil_debug_read_value: null");
  return guarded([&] {
    Status st = readDebugValue(*launch, *value, dst, bytes);
    if (st.ok()) return COIL_OK;
    return fail(st.error().kind() == ErrorKind::User ? COIL_ERROR_INVALID_ARGUMENT
                                                     : COIL_ERROR_RUNTIME,
                st.error().message());
  });
}

void coil_output_release(coil_output *output) {
  if (!output || !output->owned) return;
  if (output->owned == 2)
    cudaReleaseDeviceOutput(output->data);
  else
    std::free(output->data);
  output->data = nullptr;
  output->owned = 0;
}

} // extern "C"
