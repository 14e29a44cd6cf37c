#include "wrapper/Verify.h"

#include "kernels/Externs.h"
#include "wrapper/Lines.h"
#include "wrapper/MemoryPlan.h"

#include <algorithm>
#include <map>
#include <set>

namespace coil::wrapper {

// Comment is the only line carrying free text; every other kind is typed data. A new line kind
// must be added to the checks below (std::visit over `if constexpr` would otherwise accept it
// silently), to lineEffects() and to the backends.
static_assert(std::variant_size_v<Line> == 18, "a new Wrapper IR line kind: extend the verifier");

namespace {

bool isCIdent(const std::string &s) {
  if (s.empty() || !(std::isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum((unsigned char)c) || c == '_')) return false;
  return true;
}

const char *kindName(BufferKind k) {
  switch (k) {
  case BufferKind::Input:
    return "input";
  case BufferKind::Output:
    return "output";
  case BufferKind::Constant:
    return "constant";
  case BufferKind::Intermediate:
    return "intermediate";
  }
  return "?";
}

std::string aKind(BufferKind k) {
  return std::string(k == BufferKind::Constant ? "a " : "an ") + kindName(k);
}

enum class State : uint8_t { Undefined, Live, Released };

class Verifier {
public:
  explicit Verifier(const WrapperProgram &p) : p_(p) {}

  Status run() {
    COIL_TRY_STATUS(tables());
    size_t n = p_.buffers.size();
    state_.assign(n, State::Undefined);
    root_.resize(n);
    owner_.assign(n, false);
    for (size_t b = 0; b < n; ++b) root_[b] = BufferId(b);
    allocDef_ = externAllocDefs(p_);
    std::vector<bool> atDefinition = allocatedAtDefinition(p_);
    for (size_t b = 0; b < n; ++b) {
      BufferKind k = p_.buffers[b].kind;
      if (k == BufferKind::Input || k == BufferKind::Constant ||
          (k == BufferKind::Output && allocDef_[b] < 0 && !atDefinition[b]))
        state_[b] = State::Live;
    }
    defined_.assign(p_.kernels.size(), false);
    for (size_t i = 0; i < p_.lines.size(); ++i) {
      line_ = int32_t(i);
      COIL_TRY_STATUS(check(p_.lines[i]));
    }
    line_ = -1;
    for (BufferId b : p_.outputs) {
      if (state_[b] != State::Live)
        return err("output '" + p_.buffers[b].name + "' never gets storage");
      COIL_TRY_STATUS(shapeBound(b));
    }
    return okStatus();
  }

private:
  Error err(const std::string &msg) const {
    std::string where = "wrapper '" + p_.name + "'";
    if (line_ >= 0)
      where += " line " + std::to_string(line_) + " (" + lineKindName(p_.lines[line_]) + ")";
    return Error::internal(where + ": " + msg);
  }
  std::string name(BufferId b) const { return "'" + p_.buffers[b].name + "'"; }

  Status tables() {
    std::set<std::string> names;
    for (size_t b = 0; b < p_.buffers.size(); ++b) {
      const Buffer &buf = p_.buffers[b];
      if (!isCIdent(buf.name))
        return err("buffer " + std::to_string(b) + " name '" + buf.name +
                   "' is not a C identifier");
      if (!names.insert(buf.name).second) return err("two buffers are named '" + buf.name + "'");
      for (const SymInt &d : buf.shape)
        if (d.isConstant() && d.constant() < 0)
          return err("buffer '" + buf.name + "' has a negative dim " + d.str());
      if (buf.arenaOffset && buf.kind != BufferKind::Intermediate)
        return err("buffer '" + buf.name + "' is " + aKind(buf.kind) + " with an arena offset");
      if (buf.memory == BufferMemory::kHost) {
        if (p_.device != "cuda")
          return err("buffer '" + buf.name + "' is in host memory in a " + p_.device +
                     " program (only CUDA programs have host buffers)");
        if (buf.kind != BufferKind::Intermediate || buf.arenaOffset)
          return err("host buffer '" + buf.name + "' must be an intermediate outside the arena");
      }
    }
    auto list = [&](const std::vector<BufferId> &ids, BufferKind kind) -> Status {
      for (size_t i = 0; i < ids.size(); ++i) {
        BufferId b = ids[i];
        if (b < 0 || size_t(b) >= p_.buffers.size())
          return err(std::string(kindName(kind)) + " " + std::to_string(i) + " is not a buffer id");
        if (p_.buffers[b].kind != kind || p_.buffers[b].index != int32_t(i))
          return err("buffer '" + p_.buffers[b].name + "' is listed as " + kindName(kind) + " " +
                     std::to_string(i) + " but is " + kindName(p_.buffers[b].kind) + " " +
                     std::to_string(p_.buffers[b].index));
      }
      return okStatus();
    };
    COIL_TRY_STATUS(list(p_.inputs, BufferKind::Input));
    COIL_TRY_STATUS(list(p_.outputs, BufferKind::Output));
    COIL_TRY_STATUS(list(p_.constants, BufferKind::Constant));
    for (const Buffer &buf : p_.buffers) {
      size_t count = buf.kind == BufferKind::Input      ? p_.inputs.size()
                     : buf.kind == BufferKind::Output   ? p_.outputs.size()
                     : buf.kind == BufferKind::Constant ? p_.constants.size()
                                                        : 0;
      if (buf.kind != BufferKind::Intermediate && (buf.index < 0 || size_t(buf.index) >= count))
        return err(std::string(kindName(buf.kind)) + " '" + buf.name + "' has index " +
                   std::to_string(buf.index) + " outside its list");
    }
    std::set<std::string> kernels;
    for (const KernelInfo &k : p_.kernels) {
      if (!isCIdent(k.name)) return err("kernel name '" + k.name + "' is not a C identifier");
      if (!kernels.insert(k.name).second) return err("two kernels are named '" + k.name + "'");
      if (k.configs.empty()) return err("kernel '" + k.name + "' has no config");
    }
    return okStatus();
  }

  Status buffer(BufferId b) const {
    if (b < 0 || size_t(b) >= p_.buffers.size())
      return err("buffer id " + std::to_string(b) + " out of range");
    return okStatus();
  }

  Status symbolsBound(const SymInt &e, const std::string &what) const {
    std::set<std::string> used;
    e.collectSymbols(used);
    for (const std::string &s : used)
      if (!bound_.count(s))
        return err(what + " uses symbol '" + s + "' before it is bound (" + e.str() + ")");
    return okStatus();
  }

  Status shapeBound(BufferId b) const {
    for (const SymInt &d : p_.buffers[b].shape)
      COIL_TRY_STATUS(symbolsBound(d, "the shape of " + name(b)));
    if (p_.buffers[b].arenaOffset)
      COIL_TRY_STATUS(symbolsBound(*p_.buffers[b].arenaOffset, "the arena offset of " + name(b)));
    return okStatus();
  }

  Status use(BufferId b) const {
    COIL_TRY_STATUS(buffer(b));
    if (state_[b] == State::Undefined) return err(name(b) + " is used before it gets storage");
    if (state_[b] == State::Released || state_[root_[b]] == State::Released)
      return err(name(b) + " is used after its storage is released");
    return shapeBound(b);
  }

  Status define(BufferId b, bool allowOutput) {
    COIL_TRY_STATUS(buffer(b));
    BufferKind k = p_.buffers[b].kind;
    if (!(k == BufferKind::Intermediate || (allowOutput && k == BufferKind::Output)))
      return err(name(b) + " is " + aKind(k) + "; only " +
                 (allowOutput ? "intermediates and outputs" : "intermediates") +
                 " get storage here");
    if (state_[b] != State::Undefined) return err(name(b) + " gets storage twice");
    state_[b] = State::Live;
    return okStatus();
  }

  Status release(BufferId b) {
    COIL_TRY_STATUS(buffer(b));
    if (p_.buffers[b].kind != BufferKind::Intermediate)
      return err(name(b) + " is " + aKind(p_.buffers[b].kind) + " and is never released");
    if (state_[b] == State::Undefined) return err(name(b) + " is released before it gets storage");
    if (state_[b] == State::Released) return err(name(b) + " is released twice");
    if (!owner_[b]) return err(name(b) + " is a view and does not own storage to release");
    state_[b] = State::Released;
    return okStatus();
  }

  bool onHost(BufferId b) const { return p_.buffers[b].memory == BufferMemory::kHost; }

  /// `b` is in program memory (what kernels, device externs and the planner work on).
  Status programMemory(BufferId b, const std::string &who) const {
    COIL_TRY_STATUS(buffer(b));
    if (onHost(b)) return err(who + " takes " + name(b) + ", a host buffer");
    return okStatus();
  }

  /// `b` is a host buffer (the other end of a copy, HostAllocate, HostFree).
  Status hostMemory(BufferId b) const {
    COIL_TRY_STATUS(buffer(b));
    if (!onHost(b)) return err(name(b) + " is not a host buffer");
    return okStatus();
  }

  /// The lines of host fallbacks exist in CUDA programs only.
  Status cudaOnly() const {
    if (p_.device != "cuda")
      return err("a host fallback line in a " + p_.device + " program (CUDA programs only)");
    return okStatus();
  }

  /// An extern call against the extern table, when the table lists its function: the line kind
  /// (allocating or not), the argument kinds and the place (a CUDA twin runs on the device, a
  /// CPU function on the host); and where its buffers are: a device call's in program memory, a
  /// host call's in host memory or, in a CUDA program before insertHostCopies, all in program
  /// memory.
  Status externTable(const std::string &fn, const std::vector<ExternArg> &args, bool allocating,
                     ExternPlace place) const {
    std::string an = "extern '" + fn + "'";
    if (std::optional<kernels::ExternRef> r = kernels::findExtern(fn)) {
      const kernels::ExternInfo &e = r->info();
      if (e.allocates != allocating)
        return err(an + (e.allocates ? " allocates its outputs (an ExternKernelAlloc line)"
                                     : " writes pre-allocated outputs (an ExternKernelOut line)"));
      std::string kinds;
      for (const ExternArg &a : args) kinds += "BOIDS"[int(a.kind)];
      if (kinds != e.args)
        return err(an + " takes arguments of kinds " + std::string(e.args) +
                   " (B buffer, O output, " + "I size, D float, S symbol), the call passes " +
                   kinds);
      if (r->cuda != (place == ExternPlace::kDevice))
        return err(an + (r->cuda ? " is a CUDA function placed on the host"
                                 : " is a CPU function placed on the device"));
    }
    bool host = false, program = false;
    for (const ExternArg &a : args)
      if (a.kind == ExternArg::Kind::Buffer || a.kind == ExternArg::Kind::Output) {
        COIL_TRY_STATUS(buffer(a.buffer));
        (onHost(a.buffer) ? host : program) = true;
      }
    if (place == ExternPlace::kDevice && host)
      return err(an + " runs on the device but takes a host buffer");
    if (place == ExternPlace::kHost && host && program)
      return err(an + " runs on the host and mixes host and device buffers (a copy is missing)");
    return okStatus();
  }

  /// Both ends of a copy hold the same number of bytes.
  Status sameBytes(BufferId from, BufferId to) const {
    SymInt a = p_.buffers[from].bytes(), b = p_.buffers[to].bytes();
    if (a != b)
      return err("copy of " + name(from) + " (" + a.str() + " bytes) into " + name(to) + " (" +
                 b.str() + " bytes)");
    return okStatus();
  }

  Status bindSymbol(const std::string &s) {
    if (!bound_.insert(s).second) return err("symbol '" + s + "' is bound twice");
    return okStatus();
  }

  Status externSignature(const std::string &fn, const std::vector<ExternArg> &args,
                         bool allocating) {
    if (!isCIdent(fn)) return err("extern function '" + fn + "' is not a C identifier");
    std::vector<int> kinds{allocating ? 1 : 0};
    for (const ExternArg &a : args) kinds.push_back(int(a.kind));
    auto [it, fresh] = externs_.emplace(fn, kinds);
    if (!fresh && it->second != kinds)
      return err("extern function '" + fn + "' is called with two different signatures");
    return okStatus();
  }

  /// BindSymbol: the symbol comes from a dim the input has and is bound once.
  Status checkBindSymbol(const BindSymbol &l) {
    COIL_TRY_STATUS(buffer(l.buffer));
    if (p_.buffers[l.buffer].kind != BufferKind::Input)
      return err("symbol '" + l.symbol + "' is bound from " + name(l.buffer) +
                 ", which is not an input");
    if (l.dim < 0 || size_t(l.dim) >= p_.buffers[l.buffer].shape.size())
      return err("symbol '" + l.symbol + "' is bound from dim " + std::to_string(l.dim) + " of " +
                 name(l.buffer) + ", which has rank " +
                 std::to_string(p_.buffers[l.buffer].shape.size()));
    return bindSymbol(l.symbol);
  }

  /// Allocate: an intermediate in program memory gets storage it owns.
  Status checkAllocate(const Allocate &l) {
    COIL_TRY_STATUS(programMemory(l.buffer, "Allocate"));
    COIL_TRY_STATUS(define(l.buffer, false));
    owner_[l.buffer] = true;
    return shapeBound(l.buffer);
  }

  /// Reuse: `to` takes over the live storage of `from`, which is released.
  Status checkReuse(const Reuse &l) {
    COIL_TRY_STATUS(programMemory(l.from, "Reuse"));
    COIL_TRY_STATUS(programMemory(l.to, "Reuse"));
    if (state_[l.from] != State::Live)
      return err(name(l.to) + " reuses " + name(l.from) + ", which holds no storage");
    COIL_TRY_STATUS(release(l.from));
    COIL_TRY_STATUS(define(l.to, false));
    owner_[l.to] = true;
    return shapeBound(l.to);
  }

  /// Reinterpret: a view of a live base at a bound offset, outside the arena, sharing the base's
  /// storage.
  Status checkReinterpret(const Reinterpret &l) {
    COIL_TRY_STATUS(programMemory(l.base, "Reinterpret"));
    COIL_TRY_STATUS(programMemory(l.buffer, "Reinterpret"));
    COIL_TRY_STATUS(use(l.base));
    COIL_TRY_STATUS(symbolsBound(l.offsetBytes, "the offset of " + name(l.buffer)));
    COIL_TRY_STATUS(define(l.buffer, false));
    if (p_.buffers[l.buffer].arenaOffset)
      return err("view " + name(l.buffer) + " has an arena offset");
    root_[l.buffer] = root_[l.base];
    return shapeBound(l.buffer);
  }

  /// KernelDefinition: a kernel of the table, defined once.
  Status checkKernelDefinition(const KernelDefinition &l) {
    if (l.kernel < 0 || size_t(l.kernel) >= p_.kernels.size())
      return err("kernel id " + std::to_string(l.kernel) + " out of range");
    if (defined_[l.kernel])
      return err("kernel '" + p_.kernels[l.kernel].name + "' is defined twice");
    defined_[l.kernel] = true;
    return okStatus();
  }

  /// The arguments of a call to kernel `k` (named `kn`): one per parameter, a live buffer in
  /// program memory of the parameter's dtype (not an input or constant where it is written) for
  /// a buffer parameter, a size of bound symbols for a size parameter.
  Status kernelArgs(const KernelCall &l, const KernelInfo &k, const std::string &kn) const {
    if (l.args.size() != k.params.size())
      return err(kn + " takes " + std::to_string(k.params.size()) + " arguments, got " +
                 std::to_string(l.args.size()));
    for (size_t i = 0; i < l.args.size(); ++i) {
      const CallArg &a = l.args[i];
      const KernelParam &pr = k.params[i];
      std::string an = kn + " argument " + std::to_string(i) + " ('" + pr.name + "')";
      if (pr.kind == KernelParam::Kind::Buffer) {
        if (a.kind != CallArg::Kind::Buffer) return err(an + " must be a buffer");
        COIL_TRY_STATUS(programMemory(a.buffer, an));
        COIL_TRY_STATUS(use(a.buffer));
        if (p_.buffers[a.buffer].dtype != pr.dtype)
          return err(an + " must be " + std::string(dtypeName(pr.dtype)) + ", " + name(a.buffer) +
                     " is " + std::string(dtypeName(p_.buffers[a.buffer].dtype)));
        BufferKind bk = p_.buffers[a.buffer].kind;
        if (pr.written && (bk == BufferKind::Input || bk == BufferKind::Constant))
          return err(an + " is written but " + name(a.buffer) + " is " + aKind(bk));
      } else {
        if (a.kind != CallArg::Kind::Size) return err(an + " must be a size");
        COIL_TRY_STATUS(symbolsBound(a.size, an));
      }
    }
    return okStatus();
  }

  /// The size buckets of a call to kernel `k` (named `kn`), if any: a bucket size of bound
  /// symbols, and buckets sorted by their ends, each choosing a config `k` has and measured for
  /// all of its configs or none.
  Status sizeBuckets(const KernelCall &l, const KernelInfo &k, const std::string &kn) const {
    if (l.choices.empty()) return okStatus();
    COIL_TRY_STATUS(symbolsBound(l.bucketSize, kn + " bucket size"));
    for (size_t i = 0; i < l.choices.size(); ++i) {
      const ConfigChoice &c = l.choices[i];
      std::string cn = kn + " size bucket " + std::to_string(i);
      if (c.config < 0 || size_t(c.config) >= k.configs.size())
        return err(cn + " chooses config " + std::to_string(c.config) + " (it has " +
                   std::to_string(k.configs.size()) + ")");
      if (i && c.upTo <= l.choices[i - 1].upTo)
        return err(cn + " ends at " + std::to_string(c.upTo) +
                   ", not above the previous bucket's end " +
                   std::to_string(l.choices[i - 1].upTo) + " (buckets must be sorted)");
      if (!c.timesUs.empty() && c.timesUs.size() != k.configs.size())
        return err(cn + " has " + std::to_string(c.timesUs.size()) + " measured times for " +
                   std::to_string(k.configs.size()) + " configs");
    }
    return okStatus();
  }

  /// KernelCall: a defined kernel, with the config it names, its arguments and its size buckets.
  Status checkKernelCall(const KernelCall &l) const {
    if (l.kernel < 0 || size_t(l.kernel) >= p_.kernels.size())
      return err("kernel id " + std::to_string(l.kernel) + " out of range");
    const KernelInfo &k = p_.kernels[l.kernel];
    std::string kn = "kernel '" + k.name + "'";
    if (!defined_[l.kernel]) return err(kn + " is called before its KernelDefinition");
    if (l.config < 0 || size_t(l.config) >= k.configs.size())
      return err(kn + " has no config " + std::to_string(l.config) + " (it has " +
                 std::to_string(k.configs.size()) + ")");
    COIL_TRY_STATUS(kernelArgs(l, k, kn));
    return sizeBuckets(l, k, kn);
  }

  /// ExternKernelOut: a consistent signature, placed on the device only in a CUDA program,
  /// matching the extern table, writing live buffers that are not inputs or constants and
  /// defining no symbol.
  Status checkExternOut(const ExternKernelOut &l) {
    COIL_TRY_STATUS(externSignature(l.function, l.args, false));
    if (l.place == ExternPlace::kDevice && p_.device != "cuda")
      return err("extern '" + l.function + "' is placed on the device in a " + p_.device +
                 " program");
    COIL_TRY_STATUS(externTable(l.function, l.args, false, l.place));
    for (const ExternArg &a : l.args) {
      std::string an = "extern '" + l.function + "'";
      switch (a.kind) {
      case ExternArg::Kind::Buffer:
        COIL_TRY_STATUS(use(a.buffer));
        break;
      case ExternArg::Kind::Output: {
        COIL_TRY_STATUS(use(a.buffer));
        BufferKind bk = p_.buffers[a.buffer].kind;
        if (bk == BufferKind::Input || bk == BufferKind::Constant)
          return err(an + " writes " + name(a.buffer) + ", " + aKind(bk));
        break;
      }
      case ExternArg::Kind::Size:
        COIL_TRY_STATUS(symbolsBound(a.size, an));
        break;
      case ExternArg::Kind::Float:
        break;
      case ExternArg::Kind::OutSymbol:
        return err(an + " defines symbol '" + a.symbol + "'; only allocating calls define symbols");
      }
    }
    return okStatus();
  }

  /// ExternKernelAlloc: a consistent signature, on the host, matching the extern table; it
  /// allocates at least one output (each at this line only, outside the arena) and binds the
  /// symbols of its OutSymbol arguments, which outSymbols lists.
  Status checkExternAlloc(const ExternKernelAlloc &l) {
    COIL_TRY_STATUS(externSignature(l.function, l.args, true));
    if (l.place == ExternPlace::kDevice)
      return err("allocating extern '" + l.function +
                 "' is placed on the device; allocating calls run on the host");
    COIL_TRY_STATUS(externTable(l.function, l.args, true, l.place));
    std::string an = "extern '" + l.function + "'";
    std::vector<std::string> outSyms;
    std::vector<BufferId> outs;
    for (const ExternArg &a : l.args) {
      switch (a.kind) {
      case ExternArg::Kind::Buffer:
        COIL_TRY_STATUS(use(a.buffer));
        break;
      case ExternArg::Kind::Output:
        COIL_TRY_STATUS(buffer(a.buffer));
        if (allocDef_[a.buffer] != line_)
          return err(an + " allocates " + name(a.buffer) + " twice");
        outs.push_back(a.buffer);
        break;
      case ExternArg::Kind::Size:
        COIL_TRY_STATUS(symbolsBound(a.size, an));
        break;
      case ExternArg::Kind::Float:
        break;
      case ExternArg::Kind::OutSymbol:
        outSyms.push_back(a.symbol);
        break;
      }
    }
    if (outs.empty()) return err(an + " allocates no output");
    std::vector<std::string> a = outSyms, b = l.outSymbols;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (a != b) return err(an + ": its OutSymbol arguments and outSymbols name different symbols");
    for (const std::string &s : l.outSymbols) COIL_TRY_STATUS(bindSymbol(s));
    for (BufferId b : outs) {
      COIL_TRY_STATUS(define(b, true));
      owner_[b] = true;
      if (p_.buffers[b].arenaOffset)
        return err(name(b) + " is allocated by an extern and has an arena offset");
      COIL_TRY_STATUS(shapeBound(b));
    }
    return okStatus();
  }

  /// MultiOutput: names output `index` of the allocating extern whose output 0 is `source`,
  /// either that buffer itself or a view of it of the same dtype, outside the arena.
  Status checkMultiOutput(const MultiOutput &l) {
    COIL_TRY_STATUS(use(l.source));
    int32_t def = allocDef_[l.source];
    if (def < 0) return err(name(l.source) + " is not an output of an allocating extern");
    const auto &ext = std::get<ExternKernelAlloc>(p_.lines[def]);
    std::vector<BufferId> outs;
    for (const ExternArg &a : ext.args)
      if (a.kind == ExternArg::Kind::Output) outs.push_back(a.buffer);
    if (outs[0] != l.source)
      return err(name(l.source) + " is not output 0 of extern '" + ext.function + "'");
    if (l.index < 0 || size_t(l.index) >= outs.size())
      return err("extern '" + ext.function + "' has no output " + std::to_string(l.index));
    BufferId target = outs[l.index];
    COIL_TRY_STATUS(use(target));
    if (target == l.buffer) return okStatus(); // names the extern's own output buffer
    if (p_.buffers[target].dtype != p_.buffers[l.buffer].dtype)
      return err(name(l.buffer) + " is " + std::string(dtypeName(p_.buffers[l.buffer].dtype)) +
                 ", output " + std::to_string(l.index) + " of '" + ext.function + "' is " +
                 std::string(dtypeName(p_.buffers[target].dtype)));
    COIL_TRY_STATUS(define(l.buffer, false));
    if (p_.buffers[l.buffer].arenaOffset)
      return err("view " + name(l.buffer) + " has an arena offset");
    root_[l.buffer] = root_[target];
    return shapeBound(l.buffer);
  }

  /// HostAllocate (CUDA programs only): a host intermediate gets storage it owns.
  Status checkHostAllocate(const HostAllocate &l) {
    COIL_TRY_STATUS(cudaOnly());
    COIL_TRY_STATUS(hostMemory(l.buffer));
    COIL_TRY_STATUS(define(l.buffer, false));
    owner_[l.buffer] = true;
    return shapeBound(l.buffer);
  }

  /// CopyToHost (CUDA programs only): a live buffer in program memory into a live host buffer
  /// of as many bytes.
  Status checkCopyToHost(const CopyToHost &l) const {
    COIL_TRY_STATUS(cudaOnly());
    COIL_TRY_STATUS(programMemory(l.from, "CopyToHost's source"));
    COIL_TRY_STATUS(hostMemory(l.to));
    COIL_TRY_STATUS(use(l.from));
    COIL_TRY_STATUS(use(l.to));
    return sameBytes(l.from, l.to);
  }

  /// CopyToDevice (CUDA programs only): a live host buffer into a buffer in program memory of as
  /// many bytes, either allocated by the copy (outside the arena) or live and not an input or
  /// constant.
  Status checkCopyToDevice(const CopyToDevice &l) {
    COIL_TRY_STATUS(cudaOnly());
    COIL_TRY_STATUS(hostMemory(l.from));
    COIL_TRY_STATUS(programMemory(l.to, "CopyToDevice's target"));
    COIL_TRY_STATUS(use(l.from));
    if (l.allocate) {
      COIL_TRY_STATUS(define(l.to, true));
      owner_[l.to] = true;
      if (p_.buffers[l.to].arenaOffset)
        return err(name(l.to) + " is allocated by a copy and has an arena offset");
      COIL_TRY_STATUS(shapeBound(l.to));
    } else {
      COIL_TRY_STATUS(use(l.to));
      BufferKind bk = p_.buffers[l.to].kind;
      if (bk == BufferKind::Input || bk == BufferKind::Constant)
        return err("CopyToDevice writes " + name(l.to) + ", " + aKind(bk));
    }
    return sameBytes(l.from, l.to);
  }

  /// DebugPrint: its buffer values are live and in program memory, its sizes use bound symbols.
  Status checkDebugPrint(const DebugPrint &l) const {
    for (const DebugValue &v : l.values) {
      if (v.kind == DebugValue::Kind::Buffer) {
        COIL_TRY_STATUS(programMemory(v.buffer, "debug value '" + v.name + "'"));
        COIL_TRY_STATUS(use(v.buffer));
      }
      if (v.kind == DebugValue::Kind::Size)
        COIL_TRY_STATUS(symbolsBound(v.size, "debug value '" + v.name + "'"));
    }
    return okStatus();
  }

  /// Checks one line against the rules of its kind (the functions above), updating the states
  /// of the buffers, kernels and symbols it defines, uses or releases.
  Status check(const Line &line) {
    return std::visit(
        [&](const auto &l) -> Status {
          using T = std::decay_t<decltype(l)>;
          if constexpr (std::is_same_v<T, Comment>) {
            return okStatus();
          } else if constexpr (std::is_same_v<T, BindSymbol>) {
            return checkBindSymbol(l);
          } else if constexpr (std::is_same_v<T, Allocate>) {
            return checkAllocate(l);
          } else if constexpr (std::is_same_v<T, Reuse>) {
            return checkReuse(l);
          } else if constexpr (std::is_same_v<T, Reinterpret>) {
            return checkReinterpret(l);
          } else if constexpr (std::is_same_v<T, Free> || std::is_same_v<T, FreeIfNotReused>) {
            COIL_TRY_STATUS(programMemory(l.buffer, lineKindName(line)));
            return release(l.buffer);
          } else if constexpr (std::is_same_v<T, KernelDefinition>) {
            return checkKernelDefinition(l);
          } else if constexpr (std::is_same_v<T, KernelCall>) {
            return checkKernelCall(l);
          } else if constexpr (std::is_same_v<T, ExternKernelOut>) {
            return checkExternOut(l);
          } else if constexpr (std::is_same_v<T, ExternKernelAlloc>) {
            return checkExternAlloc(l);
          } else if constexpr (std::is_same_v<T, MultiOutput>) {
            return checkMultiOutput(l);
          } else if constexpr (std::is_same_v<T, Synchronize>) {
            return cudaOnly();
          } else if constexpr (std::is_same_v<T, HostAllocate>) {
            return checkHostAllocate(l);
          } else if constexpr (std::is_same_v<T, HostFree>) {
            COIL_TRY_STATUS(cudaOnly());
            COIL_TRY_STATUS(hostMemory(l.buffer));
            return release(l.buffer);
          } else if constexpr (std::is_same_v<T, CopyToHost>) {
            return checkCopyToHost(l);
          } else if constexpr (std::is_same_v<T, CopyToDevice>) {
            return checkCopyToDevice(l);
          } else if constexpr (std::is_same_v<T, DebugPrint>) {
            return checkDebugPrint(l);
          } else {
            static_assert(sizeof(T) == 0, "line kind without verifier checks");
          }
        },
        line);
  }

  const WrapperProgram &p_;
  std::vector<State> state_;
  std::vector<BufferId> root_;
  std::vector<bool> owner_;
  std::vector<int32_t> allocDef_;
  std::vector<bool> defined_;
  std::set<std::string> bound_;
  std::map<std::string, std::vector<int>> externs_;
  int32_t line_ = -1;
};

} // namespace

Status verifyWrapper(const WrapperProgram &p) {
  return Verifier(p).run();
}

Status verifyArena(const WrapperProgram &p, const SymBindings &bindings) {
  std::string where = "wrapper '" + p.name + "' arena";
  auto arena = p.arenaBytes.evaluate(bindings);
  if (!arena) return Error::internal(where + ": " + arena.error().message());
  struct Block {
    BufferId b;
    int64_t off, bytes;
    Lifetime life;
  };
  std::vector<Lifetime> life = bufferLifetimes(p);
  std::vector<Block> blocks;
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const Buffer &buf = p.buffers[b];
    if (!buf.arenaOffset) continue;
    auto off = buf.arenaOffset->evaluate(bindings);
    auto bytes = buf.bytes().evaluate(bindings);
    if (!off || !bytes)
      return Error::internal(where + ": '" + buf.name +
                             "': " + (!off ? off.error() : bytes.error()).message());
    std::string at = " at these symbol values";
    if (*off < 0 || *off % 64 != 0)
      return Error::internal(where + ": '" + buf.name + "' has offset " + std::to_string(*off) +
                             ", not a multiple of 64" + at);
    if (*off + *bytes > *arena)
      return Error::internal(where + ": '" + buf.name + "' ends at byte " +
                             std::to_string(*off + *bytes) + ", past the arena's " +
                             std::to_string(*arena) + at);
    blocks.push_back({BufferId(b), *off, *bytes, life[b]});
  }
  std::sort(blocks.begin(), blocks.end(),
            [](const Block &a, const Block &b) { return a.life.first < b.life.first; });
  for (size_t i = 0; i < blocks.size(); ++i)
    for (size_t j = i + 1; j < blocks.size() && blocks[j].life.first <= blocks[i].life.last; ++j) {
      const Block &a = blocks[i], &b = blocks[j];
      if (a.bytes == 0 || b.bytes == 0) continue;
      if (a.off < b.off + b.bytes && b.off < a.off + a.bytes)
        return Error::internal(
            where + ": '" + p.buffers[a.b].name + "' [" + std::to_string(a.off) + ", " +
            std::to_string(a.off + a.bytes) + ") and '" + p.buffers[b.b].name + "' [" +
            std::to_string(b.off) + ", " + std::to_string(b.off + b.bytes) +
            ") overlap while both are live (lines " + std::to_string(a.life.first) + "-" +
            std::to_string(a.life.last) + " and " + std::to_string(b.life.first) + "-" +
            std::to_string(b.life.last) + ")");
    }
  return okStatus();
}

} // namespace coil::wrapper
