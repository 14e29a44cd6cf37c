// coil._coil: the native half of the Python module `coil` (python/coil/__init__.py is the
// public face). A thin layer over the runtime's C ABI (include/coil/coil.h): loading a package,
// its signature, and runs on host arrays (coil_model_run) or device DLPack tensors
// (coil_model_run_device). Arrays cross as nanobind ndarrays (numpy, or any DLPack producer);
// outputs are handed to Python without a copy, owned by a capsule that releases them through
// coil_output_release. Errors raise coil.Error with the runtime's message.
#include "runtime/cuda/CudaRuntime.h"

#include <coil/coil.h>
#include <coil/compiler.h>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <memory>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace nb = nanobind;

namespace {

// coil.Error and its subclasses, one per status of the C ABI (coil/__init__.py documents them).
struct CoilError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct InputError : CoilError { // COIL_ERROR_INVALID_ARGUMENT from a run
  using CoilError::CoilError;
};
struct PackageError : CoilError { // COIL_ERROR_PACKAGE
  using CoilError::CoilError;
};
struct RunError : CoilError { // COIL_ERROR_RUNTIME
  using CoilError::CoilError;
};
struct InternalError : CoilError { // COIL_ERROR_INTERNAL
  using CoilError::CoilError;
};
struct CompileError : CoilError { // COIL_ERROR_INVALID_ARGUMENT from coil_compile
  using CoilError::CoilError;
};

[[noreturn]] void raise(const std::string &what) {
  throw CoilError(what);
}

[[noreturn]] void raise(coil_status s, const std::string &what, bool compiling = false) {
  switch (s) {
  case COIL_ERROR_INVALID_ARGUMENT:
    if (compiling) throw CompileError(what);
    throw InputError(what);
  case COIL_ERROR_PACKAGE:
    throw PackageError(what);
  case COIL_ERROR_RUNTIME:
    throw RunError(what);
  case COIL_ERROR_INTERNAL:
    throw InternalError(what);
  default:
    throw CoilError(what);
  }
}

void check(coil_status s) {
  if (s != COIL_OK) raise(s, coil_last_error());
}

/// Owns a loaded package; shared with the outputs it produced (they may need the runtime's
/// device context to be released).
struct ModelHandle {
  coil_model *m = nullptr;
  ~ModelHandle() {
    if (m) coil_model_free(m);
  }
};

std::optional<coil_dtype> coilDtype(nb::dlpack::dtype t) {
  using C = nb::dlpack::dtype_code;
  if (t.lanes != 1) return std::nullopt;
  switch (C(t.code)) {
  case C::Float:
    if (t.bits == 64) return COIL_DTYPE_F64;
    if (t.bits == 32) return COIL_DTYPE_F32;
    if (t.bits == 16) return COIL_DTYPE_F16;
    break;
  case C::Bfloat:
    if (t.bits == 16) return COIL_DTYPE_BF16;
    break;
  case C::Int:
    if (t.bits == 64) return COIL_DTYPE_I64;
    if (t.bits == 32) return COIL_DTYPE_I32;
    if (t.bits == 16) return COIL_DTYPE_I16;
    if (t.bits == 8) return COIL_DTYPE_I8;
    break;
  case C::UInt:
    if (t.bits == 64) return COIL_DTYPE_U64;
    if (t.bits == 32) return COIL_DTYPE_U32;
    if (t.bits == 16) return COIL_DTYPE_U16;
    if (t.bits == 8) return COIL_DTYPE_U8;
    break;
  case C::Bool:
    if (t.bits == 8) return COIL_DTYPE_BOOL;
    break;
  default:
    break;
  }
  return std::nullopt;
}

/// The DLPack type of an output: bf16 is bfloat16 on devices (torch and others take it) and its
/// uint16 bits on the host (numpy has no bfloat16; coil/__init__.py views them).
nb::dlpack::dtype dlpackDtype(coil_dtype d, bool device) {
  using C = nb::dlpack::dtype_code;
  auto mk = [](C c, int bits) {
    nb::dlpack::dtype t;
    t.code = uint8_t(c);
    t.bits = uint8_t(bits);
    t.lanes = 1;
    return t;
  };
  switch (d) {
  case COIL_DTYPE_F64:
    return mk(C::Float, 64);
  case COIL_DTYPE_F32:
    return mk(C::Float, 32);
  case COIL_DTYPE_F16:
    return mk(C::Float, 16);
  case COIL_DTYPE_BF16:
    return device ? mk(C::Bfloat, 16) : mk(C::UInt, 16);
  case COIL_DTYPE_I64:
    return mk(C::Int, 64);
  case COIL_DTYPE_I32:
    return mk(C::Int, 32);
  case COIL_DTYPE_I16:
    return mk(C::Int, 16);
  case COIL_DTYPE_I8:
    return mk(C::Int, 8);
  case COIL_DTYPE_U64:
    return mk(C::UInt, 64);
  case COIL_DTYPE_U32:
    return mk(C::UInt, 32);
  case COIL_DTYPE_U16:
    return mk(C::UInt, 16);
  case COIL_DTYPE_U8:
    return mk(C::UInt, 8);
  case COIL_DTYPE_BOOL:
    return mk(C::Bool, 8);
  }
  raise("unknown coil dtype " + std::to_string(int(d)));
}

std::string dtypeText(nb::dlpack::dtype t) {
  static const char *codes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  std::string c = t.code < 7 ? codes[t.code] : "code" + std::to_string(t.code);
  return c + std::to_string(t.bits) + (t.lanes != 1 ? "x" + std::to_string(t.lanes) : "");
}

using Array = nb::ndarray<nb::ro, nb::c_contig>;

class Model {
public:
  explicit Model(const std::string &path) : h_(std::make_shared<ModelHandle>()) {
    if (path.find('\0') != std::string::npos) // c_str() would name another file
      raise("package path contains a NUL character");
    check(coil_model_load(path.c_str(), &h_->m));
  }

  /// (name, dtype name, dims as text) of each input (outputs: `input` false).
  std::vector<std::tuple<std::string, std::string, std::vector<std::string>>>
  signature(bool input) const {
    std::vector<std::tuple<std::string, std::string, std::vector<std::string>>> out;
    int64_t n = input ? coil_model_num_inputs(h_->m) : coil_model_num_outputs(h_->m);
    for (int64_t i = 0; i < n; ++i) {
      coil_tensor_info info;
      check(input ? coil_model_input_info(h_->m, i, &info)
                  : coil_model_output_info(h_->m, i, &info));
      std::vector<std::string> dims(info.dims, info.dims + info.rank);
      out.emplace_back(info.name, coil_dtype_name(info.dtype), std::move(dims));
    }
    return out;
  }

  std::vector<std::tuple<std::string, int64_t, int64_t>> symbols() const {
    std::vector<std::tuple<std::string, int64_t, int64_t>> out;
    for (int64_t i = 0; i < coil_model_num_symbols(h_->m); ++i) {
      const char *name = nullptr;
      int64_t lo = 0, hi = 0;
      check(coil_model_symbol_info(h_->m, i, &name, &lo, &hi));
      out.emplace_back(name, lo, hi);
    }
    return out;
  }

  std::string device() const {
    return coil_model_device(h_->m) == COIL_DEVICE_CUDA ? "cuda" : "cpu";
  }

  /// Runs on host arrays (`device` false) or on device tensors of the package's device, the
  /// work enqueued on `stream` (0: the runtime's own stream). Returns the outputs.
  std::vector<nb::object> run(const std::vector<Array> &arrays, bool device, uintptr_t stream) {
    int64_t nIn = coil_model_num_inputs(h_->m), nOut = coil_model_num_outputs(h_->m);
    if (int64_t(arrays.size()) != nIn)
      raise("the model takes " + std::to_string(nIn) + " inputs, got " +
            std::to_string(arrays.size()));
    std::vector<coil_tensor> ins(arrays.size());
    std::vector<std::vector<int64_t>> shapes(arrays.size());
    for (size_t i = 0; i < arrays.size(); ++i) {
      const Array &a = arrays[i];
      coil_tensor_info info;
      check(coil_model_input_info(h_->m, int64_t(i), &info));
      int wantDevice = device ? nb::device::cuda::value : nb::device::cpu::value;
      if (a.device_type() != wantDevice)
        raise("input " + std::to_string(i) + " '" + info.name + "' is on DLPack device type " +
              std::to_string(a.device_type()) + ", expected " +
              (device ? "a CUDA tensor" : "host memory"));
      std::optional<coil_dtype> dt = coilDtype(a.dtype());
      // bf16 travels as its uint16 bits (numpy has no bfloat16)
      if (dt == COIL_DTYPE_U16 && info.dtype == COIL_DTYPE_BF16) dt = COIL_DTYPE_BF16;
      if (!dt)
        raise("input " + std::to_string(i) + " '" + info.name + "' has element type " +
              dtypeText(a.dtype()) + ", which coil does not support");
      for (size_t d = 0; d < a.ndim(); ++d) shapes[i].push_back(int64_t(a.shape(d)));
      ins[i].data = a.data();
      ins[i].dtype = *dt;
      ins[i].rank = int64_t(a.ndim());
      ins[i].shape = shapes[i].data();
    }
    std::vector<coil_output> outs(static_cast<size_t>(nOut), coil_output{});
    coil_status s;
    {
      nb::gil_scoped_release unlocked;
      s = device ? coil_model_run_device(h_->m, ins.data(), nIn, outs.data(), nOut,
                                         reinterpret_cast<void *>(stream))
                 : coil_model_run(h_->m, ins.data(), nIn, outs.data(), nOut);
    }
    if (s != COIL_OK) {
      std::string msg = coil_last_error();
      for (coil_output &o : outs) coil_output_release(&o);
      raise(s, msg);
    }
    std::vector<nb::object> result;
    int devId = arrays.empty() ? 0 : arrays[0].device_id();
    for (size_t i = 0; i < outs.size(); ++i) result.push_back(wrapOutput(outs[i], device, devId));
    // Outputs not yet handed over (an exception above) are released by their capsules.
    return result;
  }

private:
  struct OwnedOutput {
    coil_output out;
    std::shared_ptr<ModelHandle> model; // keeps the runtime (and its device) alive
  };

  nb::object wrapOutput(const coil_output &o, bool device, int devId) {
    auto *owned = new OwnedOutput{o, h_};
    nb::capsule owner(owned, [](void *p) noexcept {
      auto *w = static_cast<OwnedOutput *>(p);
      coil_output_release(&w->out);
      delete w;
    });
    std::vector<size_t> shape(size_t(o.rank));
    for (int64_t d = 0; d < o.rank; ++d) shape[size_t(d)] = size_t(o.shape[d]);
    if (!device) {
      nb::ndarray<nb::numpy> arr(o.data, shape.size(), shape.data(), owner, nullptr,
                                 dlpackDtype(o.dtype, false), nb::device::cpu::value);
      return arr.cast();
    }
    nb::ndarray<> arr(o.data, shape.size(), shape.data(), owner, nullptr,
                      dlpackDtype(o.dtype, true), nb::device::cuda::value, devId);
    return arr.cast(); // an object with __dlpack__ / __dlpack_device__
  }

  std::shared_ptr<ModelHandle> h_;
};

// --- CUDA packages run through src/wrapper.py -----------------------------------------------

/// The Python functions of the run in progress on this thread (libcoil_cuda calls the model's
/// run and arena-size functions as plain C function pointers, without a context).
struct PyRunFunctions {
  nb::callable run, arenaBytes;
  const std::vector<int64_t> *ranks = nullptr;
};
thread_local PyRunFunctions *t_run = nullptr;

int64_t arenaTrampoline(const int64_t *const *shapes) {
  try {
    nb::list py;
    for (size_t i = 0; i < t_run->ranks->size(); ++i) {
      nb::list dims;
      for (int64_t d = 0; d < (*t_run->ranks)[i]; ++d) dims.append(shapes[i][d]);
      py.append(nb::tuple(dims));
    }
    return nb::cast<int64_t>(t_run->arenaBytes(py));
  } catch (const std::exception &) {
    return -1;
  }
}

int32_t runTrampoline(const coil_model_run_args *args) {
  try {
    return nb::cast<int32_t>(t_run->run(uintptr_t(args)));
  } catch (const std::exception &e) { // the Python side reports its own errors; this is a bug
    if (args->error && args->error_size)
      std::snprintf(args->error, args->error_size, "wrapper.py: %s", e.what());
    return 1;
  }
}

/// A CUDA package's device half (libcoil_cuda's model instance: fatbin functions, device
/// weights, run slots) for coil.pywrapper: run() hands wrapper.py, as the model's run function,
/// the coil_model_run_args of a run (the run's arena, allocator, device constants and
/// coil_cuda_ctx) on host inputs, which libcoil_cuda copies in and the outputs out. CUDA
/// graphs are off: every run executes wrapper.py.
class CudaWrapperHost {
public:
  CudaWrapperHost(const std::string &library, const std::string &package, nb::bytes fatbin,
                  const std::string &fatbinName, const std::vector<std::string> &functions,
                  const std::vector<std::string> &archs, const Array &weights,
                  const std::vector<int64_t> &constantOffsets, int64_t workspaceBytes) {
    // Global, so that model.so (loaded by ctypes after this) resolves its coil_cuda_* externs.
    void *lib = dlopen(library.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
      const char *e = dlerror();
      raise("cannot load the CUDA runtime library '" + library + "' (" + (e ? e : "?") +
            "); CUDA packages need libcoil_cuda.so, an NVIDIA driver and a GPU");
    }
    using TableFn = const coil::runtime::cuda::Table *(*)();
    auto fn = reinterpret_cast<TableFn>(dlsym(lib, "coil_cuda_runtime_table"));
    table_ = fn ? fn() : nullptr;
    if (!table_ || table_->version != coil::runtime::cuda::kTableVersion)
      raise("the CUDA runtime library '" + library + "' lacks a table of version " +
            std::to_string(coil::runtime::cuda::kTableVersion));
    std::vector<const char *> fns, arch;
    for (const std::string &f : functions) fns.push_back(f.c_str());
    for (const std::string &a : archs) arch.push_back(a.c_str());
    coil::runtime::cuda::ModelDesc d;
    d.package = package.c_str();
    d.fatbin = fatbin.c_str();
    d.fatbinBytes = fatbin.size();
    d.fatbinName = fatbinName.c_str();
    d.functions = fns.data();
    d.numFunctions = fns.size();
    d.archs = arch.data();
    d.numArchs = arch.size();
    d.weights = weights.data();
    d.weightsBytes = weights.nbytes();
    d.constantOffsets = constantOffsets.data();
    d.numConstants = constantOffsets.size();
    d.workspaceBytes = size_t(workspaceBytes);
    d.graphs = false;
    std::string error;
    if (table_->create(&d, &model_, &error) != COIL_OK) {
      model_ = nullptr;
      raise("package '" + package + "': " + error);
    }
  }
  ~CudaWrapperHost() {
    if (model_) table_->destroy(model_);
  }
  CudaWrapperHost(const CudaWrapperHost &) = delete;
  CudaWrapperHost &operator=(const CudaWrapperHost &) = delete;

  /// One run on host arrays: `run(args_address) -> status` is wrapper.py's run, `arena(shapes)`
  /// its arena_bytes. Returns each output as (bytes, shape).
  std::vector<std::tuple<nb::bytes, std::vector<int64_t>>>
  run(nb::callable runFn, nb::callable arenaFn, const std::vector<Array> &arrays,
      const std::vector<int32_t> &dtypes, const std::vector<int64_t> &outputRanks,
      const std::vector<int64_t> &outputElementBytes, const std::vector<std::string> &outputNames,
      const std::vector<int32_t> &outputDtypes) {
    size_t nIn = arrays.size(), nOut = outputRanks.size();
    if (dtypes.size() != nIn || outputElementBytes.size() != nOut || outputNames.size() != nOut ||
        outputDtypes.size() != nOut)
      raise("CudaWrapperHost.run: inconsistent argument lengths");
    std::vector<coil_tensor> ins(nIn);
    std::vector<std::vector<int64_t>> shapes(nIn);
    std::vector<size_t> inBytes(nIn);
    std::vector<int64_t> ranks(nIn);
    for (size_t i = 0; i < nIn; ++i) {
      const Array &a = arrays[i];
      if (a.device_type() != nb::device::cpu::value)
        raise("input " + std::to_string(i) + " is not host memory");
      for (size_t d = 0; d < a.ndim(); ++d) shapes[i].push_back(int64_t(a.shape(d)));
      ins[i].data = a.data();
      ins[i].dtype = coil_dtype(dtypes[i]);
      ins[i].rank = ranks[i] = int64_t(a.ndim());
      ins[i].shape = shapes[i].data();
      inBytes[i] = a.nbytes();
    }
    std::vector<coil_output> outs(nOut, coil_output{});
    std::vector<const char *> names;
    for (size_t i = 0; i < nOut; ++i) {
      names.push_back(outputNames[i].c_str());
      outs[i].dtype = coil_dtype(outputDtypes[i]);
      outs[i].rank = outputRanks[i];
    }
    PyRunFunctions fns{runFn, arenaFn, &ranks};
    coil::runtime::cuda::RunRequest q;
    q.arenaBytes = arenaTrampoline;
    q.run = runTrampoline;
    q.modelName = "wrapper.py";
    q.numInputs = int64_t(nIn);
    q.inputs = ins.data();
    q.inputBytes = inBytes.data();
    q.numOutputs = int64_t(nOut);
    q.outputs = outs.data();
    q.outputRanks = outputRanks.data();
    std::vector<size_t> elementBytes(outputElementBytes.begin(), outputElementBytes.end());
    q.outputElementBytes = elementBytes.data();
    q.outputNames = names.data();
    q.hostMemory = true;
    std::string error;
    PyRunFunctions *saved = t_run;
    t_run = &fns;
    int32_t st = table_->run(model_, &q, &error); // the GIL stays held: wrapper.py runs inside
    t_run = saved;
    if (st != COIL_OK) raise(error);
    std::vector<std::tuple<nb::bytes, std::vector<int64_t>>> result;
    for (size_t i = 0; i < nOut; ++i) {
      int64_t n = int64_t(outputElementBytes[i]);
      for (int64_t d = 0; d < outs[i].rank; ++d) n *= outs[i].shape[d];
      result.emplace_back(nb::bytes(static_cast<const char *>(outs[i].data), size_t(n)),
                          std::vector<int64_t>(outs[i].shape, outs[i].shape + outs[i].rank));
    }
    for (coil_output &o : outs)
      if (o.owned == 1) std::free(o.data);
    return result;
  }

private:
  const coil::runtime::cuda::Table *table_ = nullptr;
  void *model_ = nullptr;
};

// --- Compiling (libcoil_compiler) ------------------------------------------------------------

/// Python callables for the compile's progress; called with the GIL taken. An exception in one
/// (KeyboardInterrupt included) is kept and raised when the compile returns.
struct CompileCallbacks {
  nb::object onStage, onProgress;
  std::optional<nb::python_error> error;
};

void stageTrampoline(void *user, const char *stage, double seconds) {
  auto *c = static_cast<CompileCallbacks *>(user);
  nb::gil_scoped_acquire gil;
  if (c->error || c->onStage.is_none()) return;
  try {
    c->onStage(stage, seconds);
  } catch (nb::python_error &e) {
    c->error.emplace(std::move(e));
  }
}

void progressTrampoline(void *user, const char *task, int64_t done, int64_t total) {
  auto *c = static_cast<CompileCallbacks *>(user);
  nb::gil_scoped_acquire gil;
  if (c->error || c->onProgress.is_none()) return;
  try {
    c->onProgress(task, done, total);
  } catch (nb::python_error &e) {
    c->error.emplace(std::move(e));
  }
}

/// coil_compile(model, package) with the options of coil.compile; the GIL is released while
/// it runs.
void compileModel(const std::string &model, const std::string &package, const std::string &device,
                  const std::string &cudaArchs, const std::string &cpuTarget,
                  const std::vector<std::string> &dynamic, int tune, bool verbose,
                  nb::object onStage, nb::object onProgress, const std::string &gemm) {
  CompileCallbacks callbacks{std::move(onStage), std::move(onProgress), std::nullopt};
  coil_compile_options o;
  coil_compile_options_init(&o);
  o.device = device.c_str();
  o.cuda_archs = cudaArchs.empty() ? nullptr : cudaArchs.c_str();
  o.cpu_target = cpuTarget.empty() ? nullptr : cpuTarget.c_str();
  o.gemm = gemm.empty() ? nullptr : gemm.c_str();
  std::vector<const char *> dyn;
  for (const std::string &d : dynamic) dyn.push_back(d.c_str());
  o.dynamic = dyn.data();
  o.num_dynamic = int64_t(dyn.size());
  o.tune = tune;
  o.verbose = verbose;
  o.on_stage = stageTrampoline;
  o.on_progress = progressTrampoline;
  o.user = &callbacks;
  coil_status s;
  std::string message;
  {
    nb::gil_scoped_release unlocked;
    s = coil_compile(model.c_str(), package.c_str(), &o);
    if (s != COIL_OK) message = coil_compile_last_error();
  }
  if (callbacks.error) {
    nb::python_error e = std::move(*callbacks.error);
    callbacks.error.reset();
    throw e;
  }
  if (s != COIL_OK) raise(s, message, true);
}

/// The file of the loaded libcoil_runtime (coil.pywrapper loads it RTLD_GLOBAL for ctypes).
std::string runtimePath() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void *>(&coil_model_load), &info) && info.dli_fname)
    return info.dli_fname;
  raise("cannot find the file of libcoil_runtime");
}

} // namespace

NB_MODULE(_coil, m) {
  m.doc() = "coil's native module: the runtime's C ABI (include/coil/coil.h) for Python";
  static nb::exception<CoilError> error(m, "Error", PyExc_RuntimeError);
  static nb::exception<InputError> inputError(m, "InputError", error);
  static nb::exception<PackageError> packageError(m, "PackageError", error);
  static nb::exception<RunError> runError(m, "RunError", error);
  static nb::exception<InternalError> internalError(m, "InternalError", error);
  static nb::exception<CompileError> compileError(m, "CompileError", error);
  nb::class_<Model>(m, "NativeModel")
      .def(nb::init<const std::string &>(), nb::arg("path"))
      .def("signature", &Model::signature, nb::arg("input"))
      .def("symbols", &Model::symbols)
      .def_prop_ro("device", &Model::device)
      .def("run", &Model::run, nb::arg("arrays"), nb::arg("device") = false, nb::arg("stream") = 0);
  nb::class_<CudaWrapperHost>(m, "CudaWrapperHost")
      .def(nb::init<const std::string &, const std::string &, nb::bytes, const std::string &,
                    const std::vector<std::string> &, const std::vector<std::string> &,
                    const Array &, const std::vector<int64_t> &, int64_t>(),
           nb::arg("library"), nb::arg("package"), nb::arg("fatbin"), nb::arg("fatbin_name"),
           nb::arg("functions"), nb::arg("archs"), nb::arg("weights"), nb::arg("constant_offsets"),
           nb::arg("workspace_bytes"))
      .def("run", &CudaWrapperHost::run, nb::arg("run"), nb::arg("arena_bytes"), nb::arg("arrays"),
           nb::arg("dtypes"), nb::arg("output_ranks"), nb::arg("output_element_bytes"),
           nb::arg("output_names"), nb::arg("output_dtypes"));
  m.def("compile", &compileModel, nb::arg("model"), nb::arg("package"), nb::arg("device"),
        nb::arg("cuda_archs"), nb::arg("cpu_target"), nb::arg("dynamic"), nb::arg("tune"),
        nb::arg("verbose"), nb::arg("on_stage").none(), nb::arg("on_progress").none(),
        nb::arg("gemm") = "");
  m.def("compiler_version", &coil_compiler_version);
  m.def("runtime_path", &runtimePath);
  m.def("model_abi_version", &coil_runtime_model_abi_version);
}
