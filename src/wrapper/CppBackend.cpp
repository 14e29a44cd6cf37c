#include "wrapper/CppBackend.h"

#include "support/Overloaded.h"
#include "wrapper/DebugInstrument.h"
#include "wrapper/Lines.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

namespace coil::wrapper {

namespace {

std::string cIdent(const std::string &s) {
  std::string r;
  for (char c : s) r += (std::isalnum((unsigned char)c) || c == '_') ? c : '_';
  return r;
}

/// A double literal that reads back exactly (inf and nan through builtins).
std::string doubleLiteral(double v) {
  if (std::isnan(v)) return "__builtin_nan(\"\")";
  if (std::isinf(v)) return v > 0 ? "__builtin_inf()" : "(-__builtin_inf())";
  char buf[64];
  for (int prec = 15; prec <= 17; ++prec) { // the shortest text that reads back exactly
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return v < 0 ? "(" + s + ")" : s;
}

std::string oneLine(const std::string &s) {
  std::string r;
  for (char c : s) r += (c == '\n' || c == '\r') ? ' ' : c;
  return r;
}

/// C string literal contents.
std::string cString(const std::string &s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (c == '\n' || c == '\r') c = ' ';
    if (c == '%') r += '%'; // printed through a format string
    r += c;
  }
  return r;
}

/// C string literal contents (no format string).
std::string cLiteral(const std::string &s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (c == '\n' || c == '\r') c = ' ';
    r += c;
  }
  return r;
}

/// The wrapper's helpers for DebugPrint lines (only in programs that have them).
const char *kDebugPrelude =
    R"(coil_debug_value coil_debug_tensor(const char *name, const char *buffer, int32_t id,
                                   int32_t dtype, int32_t written, int32_t on_device, int32_t rank,
                                   const int64_t *shape, const void *data) {
  coil_debug_value v;
  std::memset(&v, 0, sizeof v);
  v.name = name;
  v.buffer = buffer;
  v.kind = COIL_DEBUG_TENSOR;
  v.buffer_id = id;
  v.dtype = dtype;
  v.written = written;
  v.on_device = on_device;
  v.rank = rank;
  v.shape = shape;
  v.data = data;
  return v;
}
coil_debug_value coil_debug_size(const char *name, int64_t size) {
  coil_debug_value v;
  std::memset(&v, 0, sizeof v);
  v.name = name;
  v.kind = COIL_DEBUG_SIZE;
  v.buffer_id = -1;
  v.size = size;
  return v;
}
coil_debug_value coil_debug_float(const char *name, double number) {
  coil_debug_value v;
  std::memset(&v, 0, sizeof v);
  v.name = name;
  v.kind = COIL_DEBUG_FLOAT;
  v.buffer_id = -1;
  v.number = number;
  return v;
}
int32_t coil_debug_report(const coil_model_run_args *args, int32_t id, int32_t when,
                          const char *name, const coil_debug_value *values, int32_t n) {
  coil_debug_launch l;
  l.id = id;
  l.when = when;
  l.name = name;
  l.values = values;
  l.num_values = n;
  l.device_ctx = args->device_ctx;
  l.error = args->error;
  l.error_size = args->error_size;
  return args->debug->report(args->debug->ctx, &l);
}
)";

/// The copy helper of host fallbacks (CUDA programs with host buffers only).
const char *kHostCopyPrelude =
    R"coil(int coil_copy_to_host(const coil_model_run_args *args, void *h, const void *d, int64_t bytes,
                      const char *what) {
  if (bytes <= 0) return 0;
  return coil_cuda_check(args, cuMemcpyDtoH(h, (CUdeviceptr)d, (size_t)bytes), what);
}
)coil";

class Emitter {
public:
  explicit Emitter(const WrapperProgram &p) : p_(p), cuda_(p.device == "cuda") {
    debugLaunches_ = debugLaunchNames(p);
    for (size_t i = 0; i < debugLaunches_.size(); ++i) debugId_[debugLaunches_[i]] = int32_t(i);
    for (const LaunchInfo &li : launchTable(p))
      launchWrites_[li.name].insert(li.writes.begin(), li.writes.end());
    syms_ = cppSymbolNames(p);
    std::map<std::string, SymInt> repl;
    for (const auto &[name, c] : syms_) repl.emplace(name, SymInt::symbol(c));
    repl_ = std::move(repl);
    for (const auto &[name, r] : p.symbols) ranges_[syms_.at(name)] = r;
    allocDef_ = externAllocDefs(p);
    atDef_ = allocatedAtDefinition(p);
    dynamic_ = atDef_;
    for (const Buffer &b : p.buffers) hostBuffers_ |= b.memory == BufferMemory::kHost;
    for (const Line &l : p.lines) {
      if (const auto *a = std::get_if<Allocate>(&l))
        if (!p.buffers[a->buffer].arenaOffset) dynamic_[a->buffer] = true;
      if (const auto *r = std::get_if<Reuse>(&l))
        if (dynamic_[r->from]) dynamic_[r->to] = true;
    }
  }

  std::string run() {
    header();
    declarations();
    arenaFunction();
    runFunction();
    return os_.str();
  }

private:
  std::string expr(const SymInt &e) { return e.substitute(repl_).toCpp(ranges_); }
  std::string var(BufferId b) { return "b_" + cIdent(p_.buffers[b].name); }
  const char *ctype(BufferId b) { return cppStorageType(p_.buffers[b].dtype); }
  std::string bytes(BufferId b) { return expr(p_.buffers[b].bytes()); }

  void header() {
    os_ << "// wrapper.cpp of model '" << oneLine(p_.name)
        << "', generated by coil from its Wrapper IR. Do not edit.\n"
        << "#include <coil/model_abi.h>\n"
        << (cuda_ ? "#include <coil/cuda_abi.h>\n#include <cuda.h>\n" : "")
        << (debugLaunches_.empty() ? "" : "#include <coil/debug_abi.h>\n") << "\n"
        << "#include <algorithm>\n#include <cstdarg>\n#include <cstdint>\n#include <cstdio>\n"
        << "#include <cstring>\n\n"
        << "namespace {\n"
        << cppPrelude() << "\n"
        << "struct coil_alloc_tracker {\n"
        << "  const coil_model_run_args *args;\n"
        << "  int failed;\n"
        << "};\n"
        << "void *coil_tracked_alloc(void *ctx, size_t bytes) {\n"
        << "  coil_alloc_tracker *t = (coil_alloc_tracker *)ctx;\n"
        << "  void *p = t->args->alloc(t->args->alloc_ctx, bytes);\n"
        << "  if (!p && bytes) t->failed = 1;\n"
        << "  return p;\n"
        << "}\n"
        << "void coil_set_error(const coil_model_run_args *args, const char *fmt, ...) {\n"
        << "  if (!args->error || !args->error_size) return;\n"
        << "  va_list ap;\n"
        << "  va_start(ap, fmt);\n"
        << "  std::vsnprintf(args->error, args->error_size, fmt, ap);\n"
        << "  va_end(ap);\n"
        << "}\n";
    if (cuda_) os_ << cudaPrelude();
    if (hostBuffers_) os_ << kHostCopyPrelude;
    os_ << (debugLaunches_.empty() ? "" : kDebugPrelude) << "} // namespace\n\n";
  }

  /// Helpers of CUDA wrappers: error propagation from launchers and externs, CUDA-call checks,
  /// and the host copies of host-fallback externs.
  static const char *cudaPrelude() {
    return R"coil(// A launcher or CUDA extern failed: its message (ctx->error) becomes the run's.
int coil_cuda_failed(const coil_model_run_args *args, const coil_cuda_ctx *cu) {
  if (cu->error && args->error && cu->error != args->error) coil_set_error(args, "%s", cu->error);
  return 1;
}
int coil_cuda_check(const coil_model_run_args *args, CUresult r, const char *what) {
  if (r == CUDA_SUCCESS) return 0;
  const char *name = nullptr, *text = nullptr;
  cuGetErrorName(r, &name);
  cuGetErrorString(r, &text);
  coil_set_error(args, "%s: %s (%s)", what, name ? name : "unknown CUDA error", text ? text : "");
  return 1;
}
// Host memory for host-fallback externs; `bytes` may be 0 (then *h is NULL).
int coil_host_buffer(const coil_model_run_args *args, const coil_cuda_ctx *cu, void **h,
                     int64_t bytes, const char *what) {
  *h = nullptr;
  if (bytes <= 0) return 0;
  *h = cu->host_alloc(cu->host_ctx, (size_t)bytes);
  if (*h) return 0;
  coil_set_error(args, "%s: out of host memory (%lld bytes)", what, (long long)bytes);
  return 1;
}
int coil_to_host(const coil_model_run_args *args, const coil_cuda_ctx *cu, void **h,
                 const void *d, int64_t bytes, const char *what) {
  if (coil_host_buffer(args, cu, h, bytes, what)) return 1;
  if (bytes <= 0) return 0;
  return coil_cuda_check(args, cuMemcpyDtoH(*h, (CUdeviceptr)d, (size_t)bytes), what);
}
int coil_to_device(const coil_model_run_args *args, void *d, const void *h, int64_t bytes,
                   const char *what) {
  if (bytes <= 0) return 0;
  return coil_cuda_check(args, cuMemcpyHtoD((CUdeviceptr)d, h, (size_t)bytes), what);
}
struct coil_host_tracker {
  const coil_cuda_ctx *cu;
  int failed;
};
void *coil_host_tracked_alloc(void *ctx, size_t bytes) {
  coil_host_tracker *t = (coil_host_tracker *)ctx;
  void *p = bytes ? t->cu->host_alloc(t->cu->host_ctx, bytes) : nullptr;
  if (!p && bytes) t->failed = 1;
  return p;
}
)coil";
  }

  bool deviceExtern(ExternPlace place) const { return cuda_ && place == ExternPlace::kDevice; }

  void declarations() {
    os_ << "extern \"C\" {\n";
    for (const KernelInfo &k : p_.kernels) {
      os_ << "// kernel " << k.name << " (" << oneLine(k.sourceFile) << "): " << k.configs.size()
          << " config(s)\n";
      std::string params;
      for (size_t i = 0; i < k.params.size(); ++i) {
        const KernelParam &kp = k.params[i];
        if (i) params += ", ";
        if (kp.kind == KernelParam::Kind::Size)
          params += "int64_t";
        else
          params += std::string(kp.written ? "" : "const ") + cppStorageType(kp.dtype) + " *";
      }
      for (size_t c = 0; c < k.configs.size(); ++c) {
        if (cuda_)
          os_ << "int32_t " << k.name << "_c" << c << "(const coil_cuda_ctx *"
              << (params.empty() ? "" : ", ") << params << ");\n";
        else
          os_ << "void " << k.name << "_c" << c << "(" << params << ");\n";
      }
    }
    std::set<std::string> declared;
    for (const Line &l : p_.lines) {
      const std::vector<ExternArg> *args = nullptr;
      std::string fn;
      bool allocating = false;
      ExternPlace place = ExternPlace::kHost;
      if (const auto *e = std::get_if<ExternKernelOut>(&l))
        args = &e->args, fn = e->function, place = e->place;
      if (const auto *e = std::get_if<ExternKernelAlloc>(&l))
        args = &e->args, fn = e->function, place = e->place, allocating = true;
      if (!args || !declared.insert(fn).second) continue;
      if (declared.size() == 1)
        os_ << "// extern functions: 0 on success, else a failure with a message\n"
            << "const char *coil_cpu_last_error(void);\n";
      bool first = true;
      auto sep = [&] {
        if (!first) os_ << ", ";
        first = false;
      };
      os_ << "int32_t " << fn << "(";
      if (deviceExtern(place)) {
        sep();
        os_ << "const coil_cuda_ctx *";
      }
      if (allocating) {
        sep();
        os_ << "coil_alloc_fn, void *";
      }
      for (const ExternArg &a : *args) {
        sep();
        switch (a.kind) {
        case ExternArg::Kind::Buffer:
          os_ << "const void *";
          break;
        case ExternArg::Kind::Output:
          os_ << (allocating ? "void **" : "void *");
          break;
        case ExternArg::Kind::Size:
          os_ << "int64_t";
          break;
        case ExternArg::Kind::Float:
          os_ << "double";
          break;
        case ExternArg::Kind::OutSymbol:
          os_ << "int64_t *";
          break;
        }
      }
      os_ << ");\n";
    }
    os_ << "}\n\n"
        << "extern \"C\" uint32_t coil_model_abi_version(void) { return COIL_MODEL_ABI_VERSION; "
           "}\n\n";
  }

  void bindSymbol(const BindSymbol &l, const char *shapes, const std::string &indent) {
    os_ << indent << syms_.at(l.symbol) << " = " << shapes << "[" << p_.buffers[l.buffer].index
        << "][" << l.dim << "];\n";
  }

  void arenaFunction() {
    os_ << "extern \"C\" int64_t coil_model_arena_bytes(const int64_t *const *input_shapes) {\n";
    for (const Line &l : p_.lines)
      if (const auto *b = std::get_if<BindSymbol>(&l)) {
        os_ << "  const int64_t ";
        bindSymbol(*b, "input_shapes", "");
        os_ << "  (void)" << syms_.at(b->symbol) << ";\n";
      }
    os_ << "  return " << expr(p_.arenaBytes) << ";\n}\n\n";
  }

  void fail(const std::string &indent, const std::string &fmt, const std::string &fmtArgs = "") {
    os_ << indent << "coil_set_error(args, \"" << fmt << "\"" << fmtArgs << ");\n"
        << indent << "goto coil_fail;\n";
  }

  /// Points output `b` at the caller's buffer or a block from the allocator.
  void setupOutput(BufferId b) {
    const Buffer &buf = p_.buffers[b];
    int32_t i = buf.index;
    os_ << "  { // output " << i << ": " << buf.name << "\n"
        << "    const int64_t coil_bytes = " << bytes(b) << ";\n"
        << "    if (args->outputs[" << i << "]) {\n"
        << "      if (args->output_capacity && args->output_capacity[" << i
        << "] < coil_bytes) {\n";
    fail("        ", "output '" + cString(buf.name) + "' needs %lld bytes, the caller gave %lld",
         ", (long long)coil_bytes, (long long)args->output_capacity[" + std::to_string(i) + "]");
    os_ << "      }\n"
        << "      " << var(b) << " = (" << ctype(b) << " *)args->outputs[" << i << "];\n"
        << "    } else {\n"
        << "      " << var(b) << " = (" << ctype(b)
        << " *)coil_tracked_alloc(&coil_tracker, (size_t)coil_bytes);\n"
        << "      coil_out_owned[" << i << "] = " << var(b) << ";\n"
        << "      if (coil_tracker.failed) {\n";
    fail("        ", "out of memory allocating output '" + cString(buf.name) + "' (%lld bytes)",
         ", (long long)coil_bytes");
    os_ << "      }\n    }\n  }\n";
  }

  void runFunction() {
    os_ << "extern \"C\" int32_t coil_model_run(const coil_model_run_args *args) {\n"
        << "  if (!args) return 1;\n"
        << "  if (args->abi_version != COIL_MODEL_ABI_VERSION) {\n"
        << "    coil_set_error(args, \"model ABI version %u, the caller has %u\", "
           "(unsigned)COIL_MODEL_ABI_VERSION, (unsigned)args->abi_version);\n"
        << "    return 1;\n  }\n"
        << "  char *const coil_arena = (char *)args->arena;\n"
        << "  (void)coil_arena;\n"
        << "  coil_alloc_tracker coil_tracker = {args, 0};\n";
    if (cuda_)
      os_ << "  const coil_cuda_ctx *const coil_cu = (const coil_cuda_ctx *)args->device_ctx;\n"
          << "  if (!coil_cu) {\n"
          << "    coil_set_error(args, \"model '%s' is compiled for cuda and needs a CUDA device "
             "context\", \""
          << cString(p_.name) << "\");\n"
          << "    return 1;\n  }\n"
          << "  CUstream const coil_stream = (CUstream)coil_cu->stream;\n"
          << "  (void)coil_stream;\n";
    if (!debugLaunches_.empty()) {
      size_t n = debugLaunches_.size();
      os_ << "  const coil_debug_hooks *const coil_debug = args->debug;\n"
          << "  if (coil_debug && (coil_debug->abi_version != COIL_DEBUG_ABI_VERSION ||\n"
          << "                     coil_debug->num_launches != " << n
          << "u || !coil_debug->enabled || !coil_debug->report)) {\n"
          << "    coil_set_error(args, \"debug hooks of ABI version %u for %u launches; the model "
             "has ABI version %u and "
          << n
          << " launches\", (unsigned)coil_debug->abi_version, "
             "(unsigned)coil_debug->num_launches, (unsigned)COIL_DEBUG_ABI_VERSION);\n"
          << "    return 1;\n  }\n";
    }
    // symbols
    for (const auto &[name, c] : syms_) os_ << "  int64_t " << c << " = 0;\n  (void)" << c << ";\n";
    // buffers
    for (size_t b = 0; b < p_.buffers.size(); ++b) {
      const Buffer &buf = p_.buffers[b];
      os_ << "  " << ctype(b) << " *" << var(b) << " = ";
      switch (buf.kind) {
      case BufferKind::Input:
        os_ << "(" << ctype(b) << " *)args->inputs[" << buf.index << "];\n";
        break;
      case BufferKind::Constant:
        os_ << "(" << ctype(b) << " *)args->constants[" << buf.index << "];\n";
        break;
      case BufferKind::Output:
      case BufferKind::Intermediate:
        os_ << "nullptr;\n";
        break;
      }
      os_ << "  (void)" << var(b) << ";\n";
    }
    size_t nout = p_.outputs.size();
    os_ << "  void *coil_out_owned[" << std::max<size_t>(nout, 1) << "] = {};\n";

    std::vector<bool> outputReady(p_.buffers.size(), false);
    for (size_t li = 0; li < p_.lines.size(); ++li) {
      const Line &line = p_.lines[li];
      LineEffects eff = lineEffects(line);
      for (BufferId b : eff.uses) {
        if (p_.buffers[b].kind != BufferKind::Output || outputReady[b] || atDef_[b]) continue;
        outputReady[b] = true;
        setupOutput(b);
      }
      printLine(line);
    }
    for (BufferId b : p_.outputs)
      if (!outputReady[b] && !atDef_[b]) setupOutput(b);

    // Epilogue: outputs of allocating externs go to the caller's buffer (checked first) or to
    // the caller as they are; shapes are written.
    for (BufferId b : p_.outputs) {
      if (!atDef_[b]) continue;
      int32_t i = p_.buffers[b].index;
      os_ << "  if (args->outputs[" << i << "] && args->output_capacity && args->output_capacity["
          << i << "] < " << bytes(b) << ") {\n";
      fail("    ",
           "output '" + cString(p_.buffers[b].name) + "' needs %lld bytes, the caller gave %lld",
           ", (long long)(" + bytes(b) + "), (long long)args->output_capacity[" +
               std::to_string(i) + "]");
      os_ << "  }\n";
    }
    for (BufferId b : p_.outputs) {
      const Buffer &buf = p_.buffers[b];
      int32_t i = buf.index;
      for (size_t d = 0; d < buf.shape.size(); ++d)
        os_ << "  args->output_shapes[" << i << "][" << d << "] = " << expr(buf.shape[d]) << ";\n";
      if (atDef_[b]) {
        os_ << "  if (args->outputs[" << i << "]) {\n"
            << "    if (" << var(b) << ") " << copyOut(i, b) << "\n"
            << "    args->free(args->alloc_ctx, " << var(b) << ");\n"
            << "  } else {\n"
            << "    args->outputs[" << i << "] = " << var(b) << ";\n"
            << "  }\n";
      } else {
        os_ << "  if (!args->outputs[" << i << "]) args->outputs[" << i << "] = " << var(b)
            << ";\n";
      }
    }
    // Unplanned intermediates still held (the normal path frees them at their Free line).
    for (size_t b = 0; b < p_.buffers.size(); ++b)
      if (dynamic_[b] && p_.buffers[b].kind == BufferKind::Intermediate)
        os_ << "  if (" << var(b) << ") args->free(args->alloc_ctx, " << var(b) << ");\n";
    os_ << "  return 0;\n"
        << "coil_fail:\n";
    for (size_t b = 0; b < p_.buffers.size(); ++b)
      if (dynamic_[b])
        os_ << "  if (" << var(b) << ") args->free(args->alloc_ctx, " << var(b) << ");\n";
    for (size_t b = 0; b < p_.buffers.size(); ++b)
      if (p_.buffers[b].memory == BufferMemory::kHost)
        os_ << "  if (" << var(b) << ") coil_cu->host_free(coil_cu->host_ctx, " << var(b) << ");\n";
    for (size_t i = 0; i < nout; ++i)
      os_ << "  if (coil_out_owned[" << i << "]) args->free(args->alloc_ctx, coil_out_owned[" << i
          << "]);\n";
    os_ << "  return 1;\n}\n";
  }

  /// `<kernel>_c<config>(ctx, args)`: the launcher of one config, without a statement end.
  std::string launcherCall(const KernelCall &l, int32_t config) {
    const KernelInfo &k = p_.kernels[l.kernel];
    std::string out = k.entry(config) + "(" + (cuda_ ? "coil_cu" : "");
    for (size_t i = 0; i < l.args.size(); ++i) {
      const CallArg &a = l.args[i];
      if (i || cuda_) out += ", ";
      switch (a.kind) {
      case CallArg::Kind::Buffer:
        out += var(a.buffer);
        break;
      case CallArg::Kind::Size:
        out += expr(a.size);
        break;
      case CallArg::Kind::Float:
        out += doubleLiteral(a.number);
        break;
      }
    }
    return out + ")";
  }

  /// A kernel call; with size buckets, an if/else chain over the bucket size picks the config.
  void kernelCall(const KernelCall &l) {
    if (l.choices.empty()) {
      if (cuda_)
        os_ << "  if (" << launcherCall(l, l.config)
            << ") {\n    coil_cuda_failed(args, coil_cu);\n    goto coil_fail;\n  }\n";
      else
        os_ << "  " << launcherCall(l, l.config) << ";\n";
      return;
    }
    os_ << "  { // config by size bucket\n"
        << "    const int64_t coil_bucket = " << expr(l.bucketSize) << ";\n";
    if (cuda_) os_ << "    int32_t coil_rc;\n";
    std::string assign = cuda_ ? "coil_rc = " : "";
    for (size_t i = 0; i < l.choices.size(); ++i)
      os_ << "    " << (i ? "else if" : "if") << " (coil_bucket <= " << l.choices[i].upTo << ") "
          << assign << launcherCall(l, l.choices[i].config) << ";\n";
    os_ << "    else " << assign << launcherCall(l, l.config) << ";\n";
    if (cuda_)
      os_ << "    if (coil_rc) {\n      coil_cuda_failed(args, coil_cu);\n"
          << "      goto coil_fail;\n    }\n";
    os_ << "  }\n";
  }

  void printLine(const Line &line) {
    std::visit(
        Overloaded{
            [&](const Comment &l) { os_ << "  // " << oneLine(l.text) << "\n"; },
            [&](const BindSymbol &l) { bindSymbol(l, "args->input_shapes", "  "); },
            [&](const Allocate &l) {
              const Buffer &b = p_.buffers[l.buffer];
              if (b.arenaOffset) {
                os_ << "  " << var(l.buffer) << " = (" << ctype(l.buffer) << " *)(coil_arena + "
                    << expr(*b.arenaOffset) << ");\n";
                return;
              }
              os_ << "  { // " << b.name << ": not in the arena\n"
                  << "    const int64_t coil_bytes = " << bytes(l.buffer) << ";\n"
                  << "    " << var(l.buffer) << " = (" << ctype(l.buffer)
                  << " *)coil_tracked_alloc(&coil_tracker, (size_t)coil_bytes);\n"
                  << "    if (coil_tracker.failed) {\n";
              fail("      ", "out of memory allocating '" + cString(b.name) + "' (%lld bytes)",
                   ", (long long)coil_bytes");
              os_ << "    }\n  }\n";
            },
            [&](const Reuse &l) {
              os_ << "  " << var(l.to) << " = (" << ctype(l.to) << " *)" << var(l.from)
                  << "; // reuse\n"
                  << "  " << var(l.from) << " = nullptr;\n";
            },
            [&](const Reinterpret &l) {
              os_ << "  " << var(l.buffer) << " = (" << ctype(l.buffer) << " *)((char *)"
                  << var(l.base) << " + " << expr(l.offsetBytes) << ");\n";
            },
            [&](const Free &l) { printFree(l.buffer); },
            [&](const FreeIfNotReused &l) { printFree(l.buffer); },
            [&](const KernelDefinition &l) {
              const KernelInfo &k = p_.kernels[l.kernel];
              os_ << "  // kernel " << k.name << " is defined in " << oneLine(k.sourceFile) << "\n";
            },
            [&](const KernelCall &l) { kernelCall(l); },
            [&](const ExternKernelOut &l) {
              if (deviceExtern(l.place)) return deviceExternOut(l);
              hostOperands(l.args, l.function);
              os_ << "  if (" << l.function << "(";
              for (size_t i = 0; i < l.args.size(); ++i) {
                if (i) os_ << ", ";
                externArg(l.args[i], -1);
              }
              os_ << ") != 0) {\n";
              externFailure("    ", l.function, l.node);
              os_ << "  }\n";
            },
            [&](const ExternKernelAlloc &l) {
              hostOperands(l.args, l.function);
              // In a CUDA program the call allocates its (host) outputs from the ctx's host
              // memory.
              std::string tracker = cuda_ ? "coil_ht" : "coil_tracker";
              int32_t nOut = 0;
              for (const ExternArg &a : l.args) nOut += a.kind == ExternArg::Kind::Output;
              os_ << "  {\n"
                  << "    void *coil_o[" << std::max(nOut, 1) << "] = {};\n";
              if (cuda_) os_ << "    coil_host_tracker coil_ht = {coil_cu, 0};\n";
              os_ << "    const int32_t coil_rc = " << l.function
                  << (cuda_ ? "(coil_host_tracked_alloc, &coil_ht"
                            : "(coil_tracked_alloc, &coil_tracker");
              int32_t k = 0;
              for (const ExternArg &a : l.args) {
                os_ << ", ";
                externArg(a, a.kind == ExternArg::Kind::Output ? k++ : -1);
              }
              os_ << ");\n";
              k = 0;
              for (const ExternArg &a : l.args)
                if (a.kind == ExternArg::Kind::Output)
                  os_ << "    " << var(a.buffer) << " = (" << ctype(a.buffer) << " *)coil_o[" << k++
                      << "];\n";
              // The outputs it allocated are set above, so that the failure path frees them.
              os_ << "    if (coil_rc != 0) {\n";
              externFailure("      ", l.function, l.node);
              os_ << "    }\n"
                  << "    if (" << tracker << ".failed) {\n";
              if (cuda_)
                fail("      ", "%s: out of host memory", ", \"" + hostWhat(l.function) + "\"");
              else
                fail("      ", "out of memory in extern call '" + cString(l.function) + "'");
              os_ << "    }\n  }\n";
            },
            [&](const MultiOutput &l) {
              BufferId target = -1;
              if (allocDef_[l.source] >= 0) {
                const auto &def = std::get<ExternKernelAlloc>(p_.lines[allocDef_[l.source]]);
                int32_t k = 0;
                for (const ExternArg &a : def.args)
                  if (a.kind == ExternArg::Kind::Output && k++ == l.index) target = a.buffer;
              }
              COIL_CHECK(target >= 0) << "MultiOutput of '" << p_.buffers[l.buffer].name
                                      << "' has no source output " << l.index;
              if (target == l.buffer) {
                os_ << "  // " << p_.buffers[l.buffer].name << " is output " << l.index << " of "
                    << p_.buffers[l.source].name << "\n";
                return;
              }
              os_ << "  " << var(l.buffer) << " = (" << ctype(l.buffer) << " *)" << var(target)
                  << "; // output " << l.index << " of " << p_.buffers[l.source].name << "\n";
            },
            [&](const DebugPrint &l) { debugPrint(l); },
            [&](const Synchronize &l) {
              os_ << "  if (coil_cuda_check(args, cuStreamSynchronize(coil_stream), \""
                  << hostWhat(l.forCall) << "\")) goto coil_fail;\n";
            },
            [&](const HostAllocate &l) {
              os_ << "  { // " << p_.buffers[l.buffer].name << ": host memory\n"
                  << "    void *coil_p = nullptr;\n"
                  << "    if (coil_host_buffer(args, coil_cu, &coil_p, " << bytes(l.buffer)
                  << ", \"" << hostWhat(l.forCall) << "\")) goto coil_fail;\n"
                  << "    " << var(l.buffer) << " = (" << ctype(l.buffer) << " *)coil_p;\n  }\n";
            },
            [&](const HostFree &l) {
              os_ << "  if (" << var(l.buffer) << ") coil_cu->host_free(coil_cu->host_ctx, "
                  << var(l.buffer) << ");\n"
                  << "  " << var(l.buffer) << " = nullptr;\n";
            },
            [&](const CopyToHost &l) {
              os_ << "  if (coil_copy_to_host(args, " << var(l.to) << ", " << var(l.from) << ", "
                  << bytes(l.to) << ", \"" << hostWhat(l.forCall) << "\")) goto coil_fail;\n";
            },
            [&](const CopyToDevice &l) {
              std::string what = hostWhat(l.forCall);
              if (l.allocate) {
                os_ << "  " << var(l.to) << " = (" << ctype(l.to)
                    << " *)coil_tracked_alloc(&coil_tracker, (size_t)(" << bytes(l.to) << "));\n"
                    << "  if (coil_tracker.failed) {\n";
                fail("    ", "%s: out of device memory", ", \"" + what + "\"");
                os_ << "  }\n";
              }
              os_ << "  if (coil_to_device(args, " << var(l.to) << ", " << var(l.from) << ", "
                  << bytes(l.to) << ", \"" << what << "\")) goto coil_fail;\n";
            }},
        line);
  }

  /// Reports a failed extern call (nonzero status) as "node 'NAME' (OP): MESSAGE" and fails the
  /// run.
  void externFailure(const std::string &indent, const std::string &function,
                     const ExternNodeInfo &node) {
    auto [fmt, fmtArgs] = externError(function, node);
    fail(indent, fmt, fmtArgs);
  }
  /// The coil_set_error format and arguments of a failed host extern call (libcoil_runtime's
  /// functions leave their message in coil_cpu_last_error()).
  std::pair<std::string, std::string> externError(const std::string &function,
                                                  const ExternNodeInfo &node) {
    std::string who = node.name.empty() ? "extern call '" + cString(function) + "'"
                                        : "node '" + cString(node.name) + "'";
    if (!node.op.empty()) who += " (" + cString(node.op) + ")";
    return {who + ": %s", ", coil_cpu_last_error()"};
  }

  /// Copies allocating-extern output `b` into the caller's output buffer i.
  std::string copyOut(int32_t i, BufferId b) {
    std::string n = "(size_t)(" + bytes(b) + ")";
    if (!cuda_)
      return "std::memcpy(args->outputs[" + std::to_string(i) + "], " + var(b) + ", " + n + ");";
    return "if (coil_cuda_check(args, cuMemcpyDtoDAsync((CUdeviceptr)args->outputs[" +
           std::to_string(i) + "], (CUdeviceptr)" + var(b) + ", " + n +
           ", coil_stream), \"copying output '" + cString(p_.buffers[b].name) +
           "'\")) goto coil_fail;";
  }

  /// An ExternKernelOut placed on the device: the CUDA twin, ctx first, status checked.
  void deviceExternOut(const ExternKernelOut &l) {
    os_ << "  if (" << l.function << "(coil_cu";
    for (const ExternArg &a : l.args) {
      os_ << ", ";
      externArg(a, -1);
    }
    os_ << ")) {\n    coil_cuda_failed(args, coil_cu);\n    goto coil_fail;\n  }\n";
  }

  /// A host extern of a CUDA program takes host buffers: insertHostCopies has run.
  void hostOperands(const std::vector<ExternArg> &args, const std::string &fn) const {
    if (!cuda_) return;
    for (const ExternArg &a : args)
      if (a.kind == ExternArg::Kind::Buffer || a.kind == ExternArg::Kind::Output)
        COIL_CHECK(p_.buffers[a.buffer].memory == BufferMemory::kHost)
            << "host extern '" << fn << "' of a CUDA program takes device buffer '"
            << p_.buffers[a.buffer].name << "' (insertHostCopies has not run)";
  }

  /// How the lines of a host fallback name it in errors: "host extern 'F'".
  std::string hostWhat(const std::string &fn) { return "host extern '" + cString(fn) + "'"; }

  /// A DebugPrint line: when the hooks enable its launch, the values and one report call.
  void debugPrint(const DebugPrint &l) {
    int32_t id = debugId_.at(l.launch);
    bool after = l.when == DebugPrint::When::After;
    os_ << "  if (coil_debug && coil_debug->enabled[" << id
        << "]) { // debug: " << (after ? "after " : "before ") << oneLine(l.launch) << "\n";
    const std::set<BufferId> &writes = launchWrites_[l.launch];
    for (size_t i = 0; i < l.values.size(); ++i) {
      const DebugValue &v = l.values[i];
      if (v.kind != DebugValue::Kind::Buffer || p_.buffers[v.buffer].shape.empty()) continue;
      os_ << "    const int64_t coil_ds" << i << "[] = {";
      const auto &shape = p_.buffers[v.buffer].shape;
      for (size_t d = 0; d < shape.size(); ++d) os_ << (d ? ", " : "") << expr(shape[d]);
      os_ << "};\n";
    }
    if (!l.values.empty()) os_ << "    const coil_debug_value coil_dv[] = {\n";
    bool device = p_.device != "cpu";
    for (size_t i = 0; i < l.values.size(); ++i) {
      const DebugValue &v = l.values[i];
      std::string name = "\"" + cLiteral(v.name) + "\"";
      os_ << "        ";
      switch (v.kind) {
      case DebugValue::Kind::Buffer: {
        const Buffer &b = p_.buffers[v.buffer];
        os_ << "coil_debug_tensor(" << name << ", \"" << cLiteral(b.name) << "\", " << v.buffer
            << ", " << int(b.dtype) << ", " << (writes.count(v.buffer) ? 1 : 0) << ", "
            << (device ? 1 : 0) << ", " << b.shape.size() << ", "
            << (b.shape.empty() ? std::string("nullptr") : "coil_ds" + std::to_string(i)) << ", "
            << var(v.buffer) << ")";
        break;
      }
      case DebugValue::Kind::Size:
        os_ << "coil_debug_size(" << name << ", " << expr(v.size) << ")";
        break;
      case DebugValue::Kind::Float:
        os_ << "coil_debug_float(" << name << ", " << doubleLiteral(v.number) << ")";
        break;
      }
      os_ << ",\n";
    }
    if (!l.values.empty()) os_ << "    };\n";
    os_ << "    if (coil_debug_report(args, " << id << ", "
        << (after ? "COIL_DEBUG_AFTER" : "COIL_DEBUG_BEFORE") << ", \"" << cLiteral(l.launch)
        << "\", " << (l.values.empty() ? "nullptr" : "coil_dv") << ", " << l.values.size()
        << "))\n      goto coil_fail;\n  }\n";
  }

  void printFree(BufferId b) {
    if (dynamic_[b]) os_ << "  args->free(args->alloc_ctx, " << var(b) << ");\n";
    os_ << "  " << var(b) << " = nullptr;" << (dynamic_[b] ? "\n" : " // arena storage\n");
  }

  void externArg(const ExternArg &a, int32_t outSlot) {
    switch (a.kind) {
    case ExternArg::Kind::Buffer:
      os_ << var(a.buffer);
      break;
    case ExternArg::Kind::Output:
      if (outSlot >= 0)
        os_ << "&coil_o[" << outSlot << "]";
      else
        os_ << var(a.buffer);
      break;
    case ExternArg::Kind::Size:
      os_ << expr(a.size);
      break;
    case ExternArg::Kind::Float:
      os_ << doubleLiteral(a.number);
      break;
    case ExternArg::Kind::OutSymbol:
      os_ << "&" << syms_.at(a.symbol);
      break;
    }
  }

  const WrapperProgram &p_;
  bool cuda_ = false;
  std::map<std::string, std::string> syms_;
  std::map<std::string, SymInt> repl_;
  SymRanges ranges_;
  std::vector<int32_t> allocDef_;
  std::vector<bool> atDef_, dynamic_;
  bool hostBuffers_ = false;
  std::vector<std::string> debugLaunches_;
  std::map<std::string, int32_t> debugId_;
  std::map<std::string, std::set<BufferId>> launchWrites_;
  std::ostringstream os_;
};

} // namespace

const char *cppStorageType(DType t) {
  switch (t) {
#define COIL_DTYPE_CTYPE(E, N, T, S)                                                               \
  case DType::E:                                                                                   \
    return #T;
    COIL_FOR_EACH_DTYPE(COIL_DTYPE_CTYPE)
#undef COIL_DTYPE_CTYPE
  }
  COIL_UNREACHABLE("bad dtype");
}

std::map<std::string, std::string> cppSymbolNames(const WrapperProgram &p) {
  std::map<std::string, std::string> out;
  std::set<std::string> used;
  for (const std::string &s : programSymbols(p)) {
    std::string c = "s_" + cIdent(s);
    if (!used.insert(c).second) {
      for (int k = 1;; ++k)
        if (used.insert(c + "_" + std::to_string(k)).second) {
          c += "_" + std::to_string(k);
          break;
        }
    }
    out.emplace(s, c);
  }
  return out;
}

std::string emitCppWrapper(const WrapperProgram &p) {
  return Emitter(p).run();
}

} // namespace coil::wrapper
