/// The compiler's C ABI (include/coil/compiler.h), built into libcoil_compiler.so: a model file
/// through the pipeline (driver/Pipeline.h) into a package, with the options and the progress
/// callbacks of `coil compile`.
#include "driver/LoadModel.h"
#include "driver/Pipeline.h"

#include <algorithm>
#include <chrono>
#include <coil/compiler.h>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#ifndef COIL_VERSION
#error "COIL_VERSION must be defined (the project's version, from CMakeLists.txt)"
#endif

namespace {

thread_local std::string t_lastError;

coil_status fail(const coil::Error &e) {
  std::string text = e.render();
  // The kind travels as the status; the message keeps the file, node and op.
  if (text.rfind("error: ", 0) == 0) text = text.substr(7);
  t_lastError = text;
  switch (e.kind()) {
  case coil::ErrorKind::User:
    return COIL_ERROR_INVALID_ARGUMENT;
  case coil::ErrorKind::Runtime:
    return COIL_ERROR_RUNTIME;
  case coil::ErrorKind::Internal:
    break;
  }
  return COIL_ERROR_INTERNAL;
}

/// The options struct of a caller built against this header or an older, shorter one.
coil_compile_options effectiveOptions(const coil_compile_options *given) {
  coil_compile_options o;
  coil_compile_options_init(&o);
  if (given) {
    size_t n = std::min(given->struct_size, sizeof o);
    if (n >= sizeof(size_t)) std::memcpy(&o, given, n);
    o.struct_size = sizeof o;
  }
  return o;
}

coil::Expected<coil::CompileOptions> compileOptions(const coil_compile_options &c) {
  coil::CompileOptions o;
  if (c.device && *c.device) o.device = c.device;
  if (o.device != "cpu" && o.device != "cuda")
    return coil::Error::user("unknown device '" + o.device + "' (supported: cpu, cuda)");
  if (c.cuda_archs && *c.cuda_archs) {
    o.cudaArchs.clear();
    std::istringstream is(c.cuda_archs);
    for (std::string arch; std::getline(is, arch, ',');)
      if (!arch.empty()) o.cudaArchs.push_back(arch);
    o.recordedOptions.emplace_back("arch", c.cuda_archs);
  }
  if (c.gemm && *c.gemm) {
    o.gemm = c.gemm;
    o.recordedOptions.emplace_back("gemm", c.gemm);
  }
  if (c.cpu_target && *c.cpu_target) o.toolchain.cpuTarget = c.cpu_target;
  if (c.tune != -1 && c.tune != 0 && c.tune != 1)
    return coil::Error::user("tune must be -1 (when there is a GPU), 0 or 1, got " +
                             std::to_string(c.tune));
  if (c.tune == 1 && o.device != "cuda")
    return coil::Error::user("tune measures CUDA kernel configs: use it with device \"cuda\"");
  // As `coil compile`: tuning when this machine has an NVIDIA GPU, unless told otherwise.
  o.tune = o.device == "cuda" &&
           (c.tune == 1 || (c.tune == -1 && std::filesystem::exists("/dev/nvidiactl")));
  if (o.tune) o.recordedOptions.emplace_back("tune", "on");
  o.toolchain.verbose = c.verbose != 0;
  if (c.num_dynamic < 0 || (c.num_dynamic > 0 && !c.dynamic))
    return coil::Error::user("num_dynamic is " + std::to_string(c.num_dynamic) + " with dynamic " +
                             (c.dynamic ? "set" : "NULL"));
  for (int64_t i = 0; i < c.num_dynamic; ++i) {
    if (!c.dynamic[i]) return coil::Error::user("dynamic[" + std::to_string(i) + "] is NULL");
    o.recordedOptions.emplace_back("dynamic", c.dynamic[i]);
  }
  if (c.device && *c.device) o.recordedOptions.emplace_back("device", o.device);
  if (c.on_stage) {
    coil_stage_fn fn = c.on_stage;
    void *user = c.user;
    o.onStage = [fn, user](const std::string &stage, double s) { fn(user, stage.c_str(), s); };
  }
  if (c.on_progress) {
    coil_progress_fn fn = c.on_progress;
    void *user = c.user;
    o.onProgress = [fn, user](const std::string &task, int64_t done, int64_t total) {
      fn(user, task.c_str(), done, total);
    };
  }
  return o;
}

coil::Status compile(const char *modelPath, const char *packageDir, const coil_compile_options &c) {
  using namespace coil;
  if (!modelPath || !*modelPath) return Error::user("coil_compile: no model path");
  if (!packageDir || !*packageDir) return Error::user("coil_compile: no package directory");
  COIL_TRY(CompileOptions o, compileOptions(c));
  std::vector<std::string> dynamic(c.dynamic, c.dynamic + c.num_dynamic);
  COIL_TRY(ImportOptions io, parseSymbolRanges(dynamic));
  auto t0 = std::chrono::steady_clock::now();
  COIL_TRY(LoadedModel m, loadModel(modelPath, io));
  if (o.onStage)
    o.onStage("import",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  auto compiled = compileGraph(std::move(m.graph), o);
  if (!compiled.ok()) {
    Error e = compiled.error();
    return e.loc().file.empty() ? e.withDefaultLoc(SourceLoc{modelPath}) : e;
  }
  COIL_TRY_STATUS(writePackage(**compiled, packageDir, o));
  return okStatus();
}

} // namespace

extern "C" {

void coil_compile_options_init(coil_compile_options *o) {
  if (!o) return;
  *o = coil_compile_options{};
  o->struct_size = sizeof *o;
  o->tune = -1;
}

coil_status coil_compile(const char *model_path, const char *package_dir,
                         const coil_compile_options *options) {
  try {
    coil_compile_options o = effectiveOptions(options);
    coil::Status s = compile(model_path, package_dir, o);
    if (!s.ok()) return fail(s.error());
    t_lastError.clear();
    return COIL_OK;
  } catch (const coil::InternalError &e) {
    return fail(coil::Error::internal(e.message));
  } catch (const std::bad_alloc &) {
    return fail(coil::Error::runtime("out of memory"));
  } catch (const std::exception &e) {
    return fail(coil::Error::internal(std::string("unexpected exception: ") + e.what()));
  } catch (...) {
    return fail(coil::Error::internal("unknown exception"));
  }
}

const char *coil_compile_last_error(void) {
  return t_lastError.c_str();
}

const char *coil_compiler_version(void) {
  return COIL_VERSION;
}

} // extern "C"
