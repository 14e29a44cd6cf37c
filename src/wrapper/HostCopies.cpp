#include "wrapper/HostCopies.h"

#include "support/Error.h"

#include <map>
#include <set>

namespace coil::wrapper {

namespace {

class HostCopies {
public:
  explicit HostCopies(WrapperProgram &p) : p_(p) {
    for (const Buffer &b : p.buffers) names_.insert(b.name);
  }

  void run() {
    std::vector<Line> out;
    out.reserve(p_.lines.size());
    for (size_t i = 0; i < p_.lines.size(); ++i) {
      Line &l = p_.lines[i];
      auto *eo = std::get_if<ExternKernelOut>(&l);
      auto *ea = std::get_if<ExternKernelAlloc>(&l);
      std::vector<ExternArg> *args = eo ? &eo->args : ea ? &ea->args : nullptr;
      ExternPlace place = eo ? eo->place : ea ? ea->place : ExternPlace::kDevice;
      if (!args || place != ExternPlace::kHost || onHost(*args)) {
        out.push_back(std::move(l));
        continue;
      }
      const std::string fn = eo ? eo->function : ea->function;
      bool allocating = ea != nullptr;
      std::map<BufferId, BufferId> host; // device buffer -> its host copy
      std::vector<BufferId> order;       // host buffers, in order of creation
      auto hostOf = [&](BufferId b) {
        auto [it, fresh] = host.emplace(b, -1);
        if (fresh) {
          it->second = addHostBuffer(b);
          order.push_back(it->second);
        }
        return it->second;
      };
      out.push_back(Synchronize{fn});
      for (const ExternArg &a : *args)
        if (a.kind == ExternArg::Kind::Buffer && !host.count(a.buffer)) {
          BufferId h = hostOf(a.buffer);
          out.push_back(HostAllocate{h, fn});
          out.push_back(CopyToHost{a.buffer, h, fn});
        }
      std::vector<std::pair<BufferId, BufferId>> outputs; // (device, host), in argument order
      for (const ExternArg &a : *args)
        if (a.kind == ExternArg::Kind::Output) {
          bool fresh = !host.count(a.buffer);
          BufferId h = hostOf(a.buffer);
          if (fresh && !allocating) out.push_back(HostAllocate{h, fn});
          outputs.emplace_back(a.buffer, h);
        }
      for (ExternArg &a : *args)
        if (a.kind == ExternArg::Kind::Buffer || a.kind == ExternArg::Kind::Output)
          a.buffer = host.at(a.buffer);
      out.push_back(std::move(l));
      // The call's MultiOutput lines name its outputs: now the host buffers.
      while (allocating && i + 1 < p_.lines.size()) {
        auto *m = std::get_if<MultiOutput>(&p_.lines[i + 1]);
        if (!m || !host.count(m->source)) break;
        COIL_CHECK(host.count(m->buffer) && m->buffer != m->source)
            << "MultiOutput of '" << p_.buffers[m->buffer].name
            << "' is not an output of host extern '" << fn << "'";
        m->source = host.at(m->source);
        m->buffer = host.at(m->buffer);
        out.push_back(std::move(p_.lines[++i]));
      }
      for (const auto &[dev, h] : outputs) out.push_back(CopyToDevice{h, dev, allocating, fn});
      for (BufferId h : order) out.push_back(HostFree{h});
    }
    p_.lines = std::move(out);
  }

private:
  /// Whether the call's buffers are host buffers already (the pass ran).
  bool onHost(const std::vector<ExternArg> &args) const {
    bool any = false;
    for (const ExternArg &a : args)
      if (a.kind == ExternArg::Kind::Buffer || a.kind == ExternArg::Kind::Output) {
        any = true;
        if (p_.buffers[a.buffer].memory != BufferMemory::kHost) return false;
      }
    return any;
  }

  BufferId addHostBuffer(BufferId of) {
    Buffer b;
    const Buffer &src = p_.buffers[of];
    b.name = src.name + "_host";
    for (int k = 1; names_.count(b.name); ++k) b.name = src.name + "_host_" + std::to_string(k);
    names_.insert(b.name);
    b.dtype = src.dtype;
    b.shape = src.shape;
    b.kind = BufferKind::Intermediate;
    b.memory = BufferMemory::kHost;
    p_.buffers.push_back(std::move(b));
    return BufferId(p_.buffers.size() - 1);
  }

  WrapperProgram &p_;
  std::set<std::string> names_;
};

} // namespace

void insertHostCopies(WrapperProgram &p) {
  if (p.device != "cuda") return;
  HostCopies(p).run();
}

} // namespace coil::wrapper
