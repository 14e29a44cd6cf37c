#include "wrapper/DebugInstrument.h"

#include "support/Check.h"

#include <map>
#include <set>

namespace coil::wrapper {

namespace {

bool isLaunch(const Line &l) {
  return std::holds_alternative<KernelCall>(l) || std::holds_alternative<ExternKernelOut>(l) ||
         std::holds_alternative<ExternKernelAlloc>(l);
}

DebugValue bufferValue(std::string name, BufferId b) {
  DebugValue v;
  v.kind = DebugValue::Kind::Buffer;
  v.name = std::move(name);
  v.buffer = b;
  return v;
}
DebugValue sizeValue(std::string name, SymInt s) {
  DebugValue v;
  v.kind = DebugValue::Kind::Size;
  v.name = std::move(name);
  v.size = std::move(s);
  return v;
}
DebugValue floatValue(std::string name, double x) {
  DebugValue v;
  v.kind = DebugValue::Kind::Float;
  v.name = std::move(name);
  v.number = x;
  return v;
}

std::vector<DebugValue> kernelValues(const WrapperProgram &p, const KernelCall &c) {
  const KernelInfo &k = p.kernels.at(size_t(c.kernel));
  std::vector<DebugValue> out;
  for (size_t i = 0; i < c.args.size(); ++i) {
    const CallArg &a = c.args[i];
    std::string name = i < k.params.size() ? k.params[i].name : "arg" + std::to_string(i);
    switch (a.kind) {
    case CallArg::Kind::Buffer:
      out.push_back(bufferValue(name, a.buffer));
      break;
    case CallArg::Kind::Size:
      out.push_back(sizeValue(name, a.size));
      break;
    case CallArg::Kind::Float:
      out.push_back(floatValue(name, a.number));
      break;
    }
  }
  return out;
}

/// An extern call's values; `after` adds the outputs of an allocating call and its symbols.
std::vector<DebugValue> externValues(const std::vector<ExternArg> &args, bool allocating,
                                     bool after) {
  std::vector<DebugValue> out;
  int in = 0, outs = 0, sizes = 0, floats = 0;
  for (const ExternArg &a : args) {
    switch (a.kind) {
    case ExternArg::Kind::Buffer:
      out.push_back(bufferValue("in" + std::to_string(in++), a.buffer));
      break;
    case ExternArg::Kind::Output: {
      std::string name = "out" + std::to_string(outs++);
      if (!allocating || after) out.push_back(bufferValue(name, a.buffer));
      break;
    }
    case ExternArg::Kind::Size:
      out.push_back(sizeValue("size" + std::to_string(sizes++), a.size));
      break;
    case ExternArg::Kind::Float:
      out.push_back(floatValue("float" + std::to_string(floats++), a.number));
      break;
    case ExternArg::Kind::OutSymbol:
      if (after) out.push_back(sizeValue(a.symbol, SymInt::symbol(a.symbol)));
      break;
    }
  }
  return out;
}

} // namespace

std::vector<LaunchInfo> launchTable(const WrapperProgram &p) {
  std::vector<LaunchInfo> out;
  std::map<std::string, int> count;
  for (size_t i = 0; i < p.lines.size(); ++i) {
    const Line &l = p.lines[i];
    LaunchInfo li;
    li.line = i;
    if (const auto *c = std::get_if<KernelCall>(&l)) {
      const KernelInfo &k = p.kernels.at(size_t(c->kernel));
      li.base = k.name;
      for (size_t a = 0; a < c->args.size() && a < k.params.size(); ++a)
        if (c->args[a].kind == CallArg::Kind::Buffer && k.params[a].written)
          li.writes.push_back(c->args[a].buffer);
    } else if (const auto *e = std::get_if<ExternKernelOut>(&l)) {
      li.base = e->function;
      li.isExtern = true;
      for (const ExternArg &a : e->args)
        if (a.kind == ExternArg::Kind::Output) li.writes.push_back(a.buffer);
    } else if (const auto *e = std::get_if<ExternKernelAlloc>(&l)) {
      li.base = e->function;
      li.isExtern = true;
      for (const ExternArg &a : e->args)
        if (a.kind == ExternArg::Kind::Output) li.writes.push_back(a.buffer);
    } else {
      continue;
    }
    ++count[li.base];
    out.push_back(std::move(li));
  }
  // A host fallback writes its outputs into host buffers that CopyToDevice lines then copy to
  // the program's buffers: the launch writes those.
  size_t t = 0;
  LaunchInfo *last = nullptr;
  for (size_t i = 0; i < p.lines.size(); ++i) {
    if (t < out.size() && out[t].line == i) {
      last = &out[t++];
      std::erase_if(last->writes, [&](BufferId b) {
        return p.buffers.at(size_t(b)).memory == BufferMemory::kHost;
      });
    }
    if (const auto *c = std::get_if<CopyToDevice>(&p.lines[i]); c && last)
      last->writes.push_back(c->to);
  }
  // Unique names: shared bases get _<k>; a generated name that collides with another launch's
  // name is bumped until free.
  std::set<std::string> used;
  for (const LaunchInfo &li : out)
    if (count[li.base] == 1) used.insert(li.base);
  std::map<std::string, int> next;
  for (LaunchInfo &li : out) {
    if (count[li.base] == 1) {
      li.name = li.base;
      continue;
    }
    std::string name;
    do {
      name = li.base + "_" + std::to_string(next[li.base]++);
    } while (used.count(name));
    used.insert(name);
    li.name = name;
  }
  return out;
}

void insertDebugPrints(WrapperProgram &p) {
  std::vector<Line> lines;
  lines.reserve(p.lines.size());
  for (Line &l : p.lines)
    if (!std::holds_alternative<DebugPrint>(l)) lines.push_back(std::move(l));
  p.lines = std::move(lines);

  std::vector<LaunchInfo> launches = launchTable(p);
  std::vector<Line> out;
  out.reserve(p.lines.size() + 2 * launches.size());
  size_t next = 0; // the next launch in `launches`
  for (size_t i = 0; i < p.lines.size(); ++i) {
    const Line &l = p.lines[i];
    if (!isLaunch(l)) {
      out.push_back(l);
      continue;
    }
    COIL_CHECK(next < launches.size() && launches[next].line == i) << "launch table out of step";
    const std::string &name = launches[next++].name;
    DebugPrint before{DebugPrint::When::Before, name, {}};
    DebugPrint after{DebugPrint::When::After, name, {}};
    size_t last = i; // the line after which the After print goes
    if (const auto *c = std::get_if<KernelCall>(&l)) {
      before.values = kernelValues(p, *c);
      after.values = before.values;
    } else if (const auto *e = std::get_if<ExternKernelOut>(&l)) {
      before.values = externValues(e->args, false, false);
      after.values = externValues(e->args, false, true);
    } else {
      const auto &a = std::get<ExternKernelAlloc>(l);
      before.values = externValues(a.args, true, false);
      after.values = externValues(a.args, true, true);
      // The call's MultiOutput lines name its other outputs; report after them.
      BufferId first = -1;
      for (const ExternArg &arg : a.args)
        if (arg.kind == ExternArg::Kind::Output && first < 0) first = arg.buffer;
      while (last + 1 < p.lines.size()) {
        const auto *m = std::get_if<MultiOutput>(&p.lines[last + 1]);
        if (!m || m->source != first) break;
        ++last;
      }
    }
    out.push_back(std::move(before));
    for (size_t j = i; j <= last; ++j) out.push_back(p.lines[j]);
    out.push_back(std::move(after));
    i = last;
  }
  p.lines = std::move(out);
}

std::vector<std::string> debugLaunchNames(const WrapperProgram &p) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const Line &l : p.lines)
    if (const auto *d = std::get_if<DebugPrint>(&l))
      if (seen.insert(d->launch).second) out.push_back(d->launch);
  return out;
}

} // namespace coil::wrapper
