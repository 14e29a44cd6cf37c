// Constant folding through the reference kernels.
#include "passes/FoldConstants.h"

#include "interp/Kernel.h"
#include "passes/RefineShapes.h"

namespace coil {

namespace {

class ConstantFolder {
public:
  ConstantFolder(const Graph &g, const FoldOptions &opts) : g_(g), opts_(opts) {}

  Expected<Graph> run() {
    out_.name = g_.name;
    out_.symbols = g_.symbols;
    remap_.assign(g_.numValues(), kNoValue);
    for (ValueId in : g_.inputs)
      remap_[size_t(in)] = out_.addInput(g_.value(in).name, g_.value(in).type);
    for (const auto &[v, t] : g_.constants())
      remap_[size_t(v)] = out_.addConstant(g_.value(v).name, t);
    for (const auto &[v, e] : g_.symConstants())
      remap_[size_t(v)] = out_.addSymConstant(g_.value(v).name, e, g_.value(v).type.rank() == 0);
    for (const Node &n : g_.nodes()) {
      COIL_TRY(bool folded, tryFold(n));
      if (!folded) copyNode(n);
    }
    for (ValueId o : g_.outputs) out_.outputs.push_back(remap_[size_t(o)]);
    return out_.compacted();
  }

private:
  Expected<bool> tryFold(const Node &n) {
    KernelFn fn = kernelFor(n.op);
    if (!fn || n.inputs.empty()) return false;
    int64_t inBytes = 0;
    KernelContext ctx{n, {}, nullptr};
    for (ValueId in : n.inputs) {
      if (in < 0) {
        ctx.inputs.push_back(nullptr);
        continue;
      }
      ValueId m = remap_[size_t(in)];
      if (!out_.isConstant(m)) return false;
      ctx.inputs.push_back(&out_.constant(m));
      inBytes += int64_t(out_.constant(m).nbytes());
    }
    // Estimate the output size from the inferred types before running anything large.
    int64_t outElems = 0, outBytes = 0;
    for (ValueId o : n.outputs) {
      auto shape = g_.value(o).type.concreteShape();
      if (!shape) return false;
      outElems += numelOf(*shape);
      outBytes += numelOf(*shape) * int64_t(dtypeSize(g_.value(o).type.dtype));
    }
    if (outElems > opts_.maxNewElements && outBytes > inBytes) return false;
    std::vector<TensorType> types;
    for (ValueId o : n.outputs) types.push_back(g_.value(o).type);
    ctx.outputTypes = &types;
    auto res = fn(ctx);
    if (!res.ok()) return res.error().withDefaultLoc(n.loc);
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const Value &v = g_.value(n.outputs[k]);
      const Tensor &t = (*res)[k];
      COIL_CHECK(t.dtype() == v.type.dtype && t.rank() == v.type.rank())
          << "folding '" << v.name << "': kernel result " << dtypeName(t.dtype())
          << shapeStr(t.shape()) << " disagrees with its type " << v.type.str();
      remap_[size_t(n.outputs[k])] = out_.addConstant(v.name, t);
    }
    return true;
  }

  void copyNode(const Node &n) {
    Node c = n;
    for (ValueId &in : c.inputs) in = in < 0 ? kNoValue : remap_[size_t(in)];
    for (ValueId &o : c.outputs) {
      ValueId fresh = out_.addValue(g_.value(o).name, g_.value(o).type, ValueKind::NodeOutput);
      remap_[size_t(o)] = fresh;
      o = fresh;
    }
    out_.addNode(std::move(c));
  }

  const Graph &g_;
  const FoldOptions &opts_;
  Graph out_;
  std::vector<ValueId> remap_;
};

} // namespace

Expected<Graph> foldConstants(const Graph &g, const FoldOptions &opts) {
  COIL_TRY(Graph out, ConstantFolder(g, opts).run());
  // A dim that was a data-dependent symbol at import may now be known from the folded values:
  // the recorded types become what inference gives, so that the result verifies.
  COIL_TRY_STATUS(refineShapes(out));
  return out;
}

} // namespace coil
