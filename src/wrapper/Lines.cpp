#include "wrapper/Lines.h"

#include "support/Overloaded.h"

namespace coil::wrapper {

LineEffects lineEffects(const Line &line) {
  LineEffects e;
  std::visit(Overloaded{[](const Comment &) {},
                        [&](const BindSymbol &l) { e.definesSymbols.push_back(l.symbol); },
                        [&](const Allocate &l) { e.defines.push_back(l.buffer); },
                        [&](const Reuse &l) {
                          e.releases.push_back(l.from);
                          e.defines.push_back(l.to);
                        },
                        [&](const Reinterpret &l) {
                          e.uses.push_back(l.base);
                          e.defines.push_back(l.buffer);
                          e.exprs.push_back(l.offsetBytes);
                        },
                        [&](const Free &l) { e.releases.push_back(l.buffer); },
                        [&](const FreeIfNotReused &l) { e.releases.push_back(l.buffer); },
                        [](const KernelDefinition &) {},
                        [&](const KernelCall &l) {
                          for (const CallArg &a : l.args) {
                            if (a.kind == CallArg::Kind::Buffer) e.uses.push_back(a.buffer);
                            if (a.kind == CallArg::Kind::Size) e.exprs.push_back(a.size);
                          }
                        },
                        [&](const ExternKernelOut &l) {
                          for (const ExternArg &a : l.args) {
                            if (a.kind == ExternArg::Kind::Buffer ||
                                a.kind == ExternArg::Kind::Output)
                              e.uses.push_back(a.buffer);
                            if (a.kind == ExternArg::Kind::Size) e.exprs.push_back(a.size);
                          }
                        },
                        [&](const ExternKernelAlloc &l) {
                          for (const ExternArg &a : l.args) {
                            if (a.kind == ExternArg::Kind::Buffer) e.uses.push_back(a.buffer);
                            if (a.kind == ExternArg::Kind::Output) e.defines.push_back(a.buffer);
                            if (a.kind == ExternArg::Kind::Size) e.exprs.push_back(a.size);
                          }
                          for (const std::string &s : l.outSymbols) e.definesSymbols.push_back(s);
                        },
                        [&](const MultiOutput &l) {
                          e.uses.push_back(l.source);
                          e.defines.push_back(l.buffer);
                        },
                        [&](const DebugPrint &l) {
                          for (const DebugValue &v : l.values) {
                            if (v.kind == DebugValue::Kind::Buffer) e.uses.push_back(v.buffer);
                            if (v.kind == DebugValue::Kind::Size) e.exprs.push_back(v.size);
                          }
                        },
                        [](const Synchronize &) {},
                        [&](const HostAllocate &l) { e.defines.push_back(l.buffer); },
                        [&](const HostFree &l) { e.releases.push_back(l.buffer); },
                        [&](const CopyToHost &l) {
                          e.uses.push_back(l.from);
                          e.uses.push_back(l.to);
                        },
                        [&](const CopyToDevice &l) {
                          e.uses.push_back(l.from);
                          (l.allocate ? e.defines : e.uses).push_back(l.to);
                        }},
             line);
  return e;
}

std::set<std::string> programSymbols(const WrapperProgram &p) {
  std::set<std::string> out;
  for (const auto &[name, r] : p.symbols) out.insert(name);
  for (const Buffer &b : p.buffers) {
    for (const SymInt &d : b.shape) d.collectSymbols(out);
    if (b.arenaOffset) b.arenaOffset->collectSymbols(out);
  }
  p.arenaBytes.collectSymbols(out);
  for (const Line &l : p.lines) {
    LineEffects e = lineEffects(l);
    for (const std::string &s : e.definesSymbols) out.insert(s);
    for (const SymInt &x : e.exprs) x.collectSymbols(out);
    if (const auto *a = std::get_if<ExternKernelAlloc>(&l))
      for (const ExternArg &arg : a->args)
        if (arg.kind == ExternArg::Kind::OutSymbol) out.insert(arg.symbol);
  }
  return out;
}

std::vector<int32_t> externAllocDefs(const WrapperProgram &p) {
  std::vector<int32_t> def(p.buffers.size(), -1);
  for (size_t i = 0; i < p.lines.size(); ++i)
    if (const auto *a = std::get_if<ExternKernelAlloc>(&p.lines[i]))
      for (const ExternArg &arg : a->args)
        if (arg.kind == ExternArg::Kind::Output && arg.buffer >= 0 &&
            size_t(arg.buffer) < def.size() && def[arg.buffer] < 0)
          def[arg.buffer] = int32_t(i);
  return def;
}

std::vector<bool> allocatedAtDefinition(const WrapperProgram &p) {
  std::vector<int32_t> def = externAllocDefs(p);
  std::vector<bool> out(p.buffers.size(), false);
  for (size_t b = 0; b < p.buffers.size(); ++b)
    out[b] = def[b] >= 0 && p.buffers[b].memory == BufferMemory::kProgram;
  for (const Line &l : p.lines)
    if (const auto *c = std::get_if<CopyToDevice>(&l);
        c && c->allocate && c->to >= 0 && size_t(c->to) < out.size())
      out[c->to] = true;
  return out;
}

} // namespace coil::wrapper
