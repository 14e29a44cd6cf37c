#include "driver/BuildWrapper.h"

#include "support/Check.h"

#include <map>
#include <set>

namespace coil {

using loop::NodeId;
using namespace wrapper;

namespace {

class Builder {
public:
  Builder(const sched::Schedule &s, std::vector<KernelInfo> kernels)
      : s_(s), p_(*s.program), kernels_(std::move(kernels)) {}

  Expected<WrapperProgram> run() {
    w_.name = p_.graph ? p_.graph->name : "model";
    w_.symbols = p_.symbols;
    w_.kernels = kernels_;
    makeBuffers();
    COIL_TRY_STATUS(bindSymbols());
    computeLastUse();
    size_t kernelIndex = 0;
    for (size_t step = 0; step < s_.steps.size(); ++step) {
      if (auto *k = std::get_if<sched::Kernel>(&s_.steps[step]))
        COIL_TRY_STATUS(emitKernel(*k, KernelId(kernelIndex++)));
      else
        COIL_TRY_STATUS(emitExtern(std::get<sched::ExternStep>(s_.steps[step])));
      releaseAfter(step);
    }
    COIL_CHECK(kernelIndex == kernels_.size()) << "kernel count mismatch";
    return std::move(w_);
  }

  /// Per buffer, the node it holds (-1: scratch).
  std::vector<NodeId> bufferNodes(size_t n) const {
    std::vector<NodeId> out(n, NodeId(-1));
    for (const auto &[node, b] : bufferOf_) out.at(size_t(b)) = node;
    return out;
  }

private:
  const sched::Schedule &s_;
  const loop::LoopProgram &p_;
  std::vector<KernelInfo> kernels_;
  WrapperProgram w_;
  std::map<NodeId, BufferId> bufferOf_;
  std::map<BufferId, size_t> lastUse_;
  std::set<BufferId> allocated_;
  std::map<std::pair<NodeId, int32_t>, BufferId> scratch_; ///< extern outputs nobody reads

  BufferId addBuffer(const std::string &name, DType t, std::vector<SymInt> shape, BufferKind kind,
                     int32_t index) {
    Buffer b;
    b.name = name;
    b.dtype = t;
    b.shape = std::move(shape);
    b.kind = kind;
    b.index = index;
    w_.buffers.push_back(std::move(b));
    return BufferId(w_.buffers.size() - 1);
  }

  void makeBuffers() {
    std::map<NodeId, int32_t> outputIndex, inputIndex;
    for (size_t i = 0; i < p_.outputs.size(); ++i) outputIndex.emplace(p_.outputs[i], int32_t(i));
    for (size_t i = 0; i < p_.inputs.size(); ++i) inputIndex.emplace(p_.inputs[i], int32_t(i));
    w_.inputs.assign(p_.inputs.size(), -1);
    w_.outputs.assign(p_.outputs.size(), -1);
    for (size_t i = 0; i < p_.nodes.size(); ++i) {
      const loop::Node &n = p_.nodes[i];
      if (!s_.realized[i]) continue;
      NodeId id = NodeId(i);
      BufferKind kind = BufferKind::Intermediate;
      int32_t index = -1;
      if (std::holds_alternative<loop::InputNode>(n.kind)) {
        kind = BufferKind::Input;
        index = inputIndex.count(id) ? inputIndex[id] : -1;
      } else if (std::holds_alternative<loop::ConstantNode>(n.kind)) {
        kind = BufferKind::Constant;
        index = int32_t(w_.constants.size());
      } else if (outputIndex.count(id)) {
        kind = BufferKind::Output;
        index = outputIndex[id];
      }
      BufferId b = addBuffer(n.name, n.dtype, n.shape, kind, index);
      bufferOf_[id] = b;
      if (kind == BufferKind::Constant) w_.constants.push_back(b);
      if (kind == BufferKind::Input && index >= 0) {
        w_.inputs[size_t(index)] = b;
        w_.buffers[size_t(b)].ioName = p_.inputNames.at(size_t(index));
      }
      if (kind == BufferKind::Output) {
        w_.outputs[size_t(index)] = b;
        w_.buffers[size_t(b)].ioName = p_.outputNames.at(size_t(index));
      }
    }
    // Graph inputs that nothing reads still appear in the signature.
    for (size_t i = 0; i < p_.inputs.size(); ++i)
      if (w_.inputs[i] < 0) {
        const loop::Node &n = p_.nodes[size_t(p_.inputs[i])];
        BufferId b = addBuffer(n.name, n.dtype, n.shape, BufferKind::Input, int32_t(i));
        w_.buffers[size_t(b)].ioName = p_.inputNames.at(i);
        bufferOf_[p_.inputs[i]] = b;
        w_.inputs[i] = b;
      }
    for (BufferId o : w_.outputs) COIL_CHECK(o >= 0) << "an output has no buffer";
  }

  Status bindSymbols() {
    std::set<std::string> bound;
    w_.lines.push_back(Comment{"bind the size symbols from the input shapes"});
    for (BufferId b : w_.inputs) {
      const Buffer &buf = w_.buffers[size_t(b)];
      for (size_t d = 0; d < buf.shape.size(); ++d) {
        const SymInt &dim = buf.shape[d];
        if (dim.isSymbol() && bound.insert(dim.symbolName()).second)
          w_.lines.push_back(BindSymbol{dim.symbolName(), b, int32_t(d)});
      }
    }
    // Every symbol an input dim uses must now be bound (data-dependent symbols are bound by
    // the extern calls that define them).
    for (BufferId b : w_.inputs)
      for (const SymInt &dim : w_.buffers[size_t(b)].shape) {
        std::set<std::string> syms;
        dim.collectSymbols(syms);
        for (const std::string &s : syms)
          if (!bound.count(s))
            return Error::user("input '" + w_.buffers[size_t(b)].name + "' has a dim '" +
                               dim.str() + "' whose symbol '" + s +
                               "' is not the whole dim of any input, so it cannot be bound");
      }
    return okStatus();
  }

  BufferId bufferFor(NodeId n) const {
    auto it = bufferOf_.find(n);
    COIL_CHECK(it != bufferOf_.end()) << "node " << p_.nodes[size_t(n)].name << " has no buffer";
    return it->second;
  }

  /// The buffer of output `index` of extern node `e` (a MultiOutput node, or a scratch buffer
  /// when no node reads that output).
  BufferId externOutput(NodeId e, int32_t index) {
    if (index == 0) return bufferFor(e);
    for (size_t i = 0; i < p_.nodes.size(); ++i)
      if (auto *m = std::get_if<loop::MultiOutputNode>(&p_.nodes[i].kind))
        if (m->source == e && m->index == index && bufferOf_.count(NodeId(i)))
          return bufferOf_.at(NodeId(i));
    auto it = scratch_.find({e, index});
    if (it != scratch_.end()) return it->second;
    const auto &ex = std::get<loop::ExternNode>(p_.nodes[size_t(e)].kind);
    const TensorType &t = ex.outputs.at(size_t(index));
    BufferId b = addBuffer(p_.nodes[size_t(e)].name + "_out" + std::to_string(index), t.dtype,
                           t.shape, BufferKind::Intermediate, -1);
    scratch_[{e, index}] = b;
    return b;
  }

  void computeLastUse() {
    for (size_t step = 0; step < s_.steps.size(); ++step) {
      auto use = [&](NodeId n) { lastUse_[bufferFor(n)] = step; };
      if (auto *k = std::get_if<sched::Kernel>(&s_.steps[step])) {
        for (NodeId n : k->reads) use(n);
        for (NodeId n : k->writes) use(n);
      } else {
        NodeId e = std::get<sched::ExternStep>(s_.steps[step]).node;
        const auto &ex = std::get<loop::ExternNode>(p_.nodes[size_t(e)].kind);
        for (const loop::ExternArg &a : ex.args)
          if (a.kind == loop::ExternArg::Kind::Node) use(a.node);
        use(e);
        for (size_t i = 0; i < p_.nodes.size(); ++i)
          if (auto *m = std::get_if<loop::MultiOutputNode>(&p_.nodes[i].kind))
            if (m->source == e && bufferOf_.count(NodeId(i)))
              lastUse_[bufferOf_.at(NodeId(i))] = std::max(lastUse_[bufferOf_.at(NodeId(i))], step);
      }
    }
  }

  void allocateIfNeeded(BufferId b) {
    if (w_.buffers[size_t(b)].kind != BufferKind::Intermediate || allocated_.count(b)) return;
    allocated_.insert(b);
    w_.lines.push_back(Allocate{b});
  }

  Status emitKernel(const sched::Kernel &k, KernelId id) {
    const KernelInfo &info = kernels_[size_t(id)];
    w_.lines.push_back(KernelDefinition{id});
    for (NodeId n : k.writes) allocateIfNeeded(bufferFor(n));
    KernelCall call;
    call.kernel = id;
    size_t bufferParam = 0;
    std::vector<NodeId> buffers;
    std::set<NodeId> all(k.reads.begin(), k.reads.end());
    all.insert(k.writes.begin(), k.writes.end());
    buffers.assign(all.begin(), all.end());
    for (const KernelParam &param : info.params) {
      CallArg a;
      if (param.kind == KernelParam::Kind::Buffer) {
        COIL_CHECK(bufferParam < buffers.size())
            << "kernel " << info.name << " has more buffer params than buffers";
        a.kind = CallArg::Kind::Buffer;
        a.buffer = bufferFor(buffers[bufferParam++]);
      } else {
        a.kind = CallArg::Kind::Size;
        a.size = SymInt::symbol(param.name);
      }
      call.args.push_back(std::move(a));
    }
    COIL_CHECK(bufferParam == buffers.size()) << "kernel " << info.name << " misses buffer params";
    w_.lines.push_back(std::move(call));
    return okStatus();
  }

  Status emitExtern(const sched::ExternStep &st) {
    NodeId e = st.node;
    const loop::Node &n = p_.nodes[size_t(e)];
    const auto &ex = std::get<loop::ExternNode>(n.kind);
    std::vector<ExternArg> args;
    std::vector<BufferId> outs(ex.outputs.size(), -1);
    for (size_t i = 0; i < ex.outputs.size(); ++i) outs[i] = externOutput(e, int32_t(i));
    std::vector<std::string> outSymbols;
    for (const loop::ExternArg &a : ex.args) {
      ExternArg w;
      switch (a.kind) {
      case loop::ExternArg::Kind::Node:
        w.kind = ExternArg::Kind::Buffer;
        w.buffer = bufferFor(a.node);
        break;
      case loop::ExternArg::Kind::Output:
        w.kind = ExternArg::Kind::Output;
        w.buffer = outs.at(size_t(a.index));
        break;
      case loop::ExternArg::Kind::Int:
        w.kind = ExternArg::Kind::Size;
        w.size = a.sym;
        break;
      case loop::ExternArg::Kind::Float:
        w.kind = ExternArg::Kind::Float;
        w.number = a.number;
        break;
      case loop::ExternArg::Kind::OutSymbol:
        w.kind = ExternArg::Kind::OutSymbol;
        w.symbol = a.symbol;
        outSymbols.push_back(a.symbol);
        break;
      }
      args.push_back(std::move(w));
    }
    ExternNodeInfo node;
    if (p_.graph && !n.origins.empty() && n.origins[0] >= 0 &&
        size_t(n.origins[0]) < p_.graph->nodes().size()) {
      const Node &gn = p_.graph->nodes()[size_t(n.origins[0])];
      node.name = gn.name;
      if (node.name.empty() && !gn.outputs.empty()) node.name = p_.graph->value(gn.outputs[0]).name;
      node.op = std::string(opName(gn.op));
    }
    if (ex.allocates) {
      ExternKernelAlloc line{ex.function, std::move(args), outSymbols, n.origins, std::move(node)};
      w_.lines.push_back(std::move(line));
      for (size_t i = 1; i < outs.size(); ++i)
        w_.lines.push_back(MultiOutput{outs[i], outs[0], int32_t(i)});
      for (BufferId b : outs) allocated_.insert(b);
    } else {
      for (BufferId b : outs) allocateIfNeeded(b);
      w_.lines.push_back(ExternKernelOut{ex.function, std::move(args), n.origins, std::move(node)});
    }
    return okStatus();
  }

  void releaseAfter(size_t step) {
    for (auto &[b, last] : lastUse_)
      if (last == step && w_.buffers[size_t(b)].kind == BufferKind::Intermediate &&
          allocated_.count(b))
        w_.lines.push_back(FreeIfNotReused{b});
  }
};

} // namespace

Expected<WrapperProgram> buildWrapperProgram(const sched::Schedule &s,
                                             std::vector<KernelInfo> kernels,
                                             std::vector<loop::NodeId> *bufferNodes) {
  Builder b(s, std::move(kernels));
  COIL_TRY(WrapperProgram w, b.run());
  if (bufferNodes) *bufferNodes = b.bufferNodes(w.buffers.size());
  return w;
}

} // namespace coil
