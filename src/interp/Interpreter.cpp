// The graph executor of the reference interpreter.
#include "interp/Interpreter.h"

#include "support/Check.h"

#include <algorithm>

namespace coil {

namespace {

std::string dimsStr(const std::vector<SymInt> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + s[i].str();
  return r + "]";
}

/// Matches a concrete shape against a symbolic one, binding bare symbols. Returns the
/// index of the first dim that contradicts, or -1; expressions with unbound symbols are
/// checked later by the caller (pending).
int64_t matchShape(const std::vector<SymInt> &sym, const Shape &actual, SymBindings &b,
                   std::vector<std::pair<SymInt, int64_t>> &pending) {
  for (size_t i = 0; i < sym.size(); ++i) {
    const SymInt &d = sym[i];
    if (d.isConstant()) {
      if (d.constant() != actual[i]) return int64_t(i);
    } else if (d.isSymbol()) {
      auto it = b.find(d.symbolName());
      if (it == b.end())
        b[d.symbolName()] = actual[i];
      else if (it->second != actual[i])
        return int64_t(i);
    } else {
      pending.push_back({d, actual[i]});
    }
  }
  return -1;
}

} // namespace

Expected<SymBindings> bindInputs(const Graph &g, const std::vector<Tensor> &inputs) {
  if (inputs.size() != g.inputs.size())
    return Error::user("the graph has " + std::to_string(g.inputs.size()) + " inputs, got " +
                       std::to_string(inputs.size()));
  SymBindings b;
  std::vector<std::pair<SymInt, int64_t>> pending;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value &v = g.value(g.inputs[i]);
    const Tensor &t = inputs[i];
    if (t.dtype() != v.type.dtype)
      return Error::user("input '" + v.name + "' must have dtype " +
                         std::string(dtypeName(v.type.dtype)) + ", got " +
                         std::string(dtypeName(t.dtype())));
    if (t.rank() != v.type.rank())
      return Error::user("input '" + v.name + "' must have rank " + std::to_string(v.type.rank()) +
                         " (shape " + dimsStr(v.type.shape) + "), got shape " +
                         shapeStr(t.shape()));
    int64_t bad = matchShape(v.type.shape, t.shape(), b, pending);
    if (bad >= 0)
      return Error::user("input '" + v.name + "' must have shape " + dimsStr(v.type.shape) +
                         ", got " + shapeStr(t.shape()) + " (dim " + std::to_string(bad) + ")");
  }
  for (const auto &[e, actual] : pending) {
    auto val = e.evaluate(b);
    if (!val.ok() || *val != actual)
      return Error::user("an input dim must equal " + e.str() + ", got " + std::to_string(actual));
  }
  for (const auto &[name, value] : b) {
    auto it = g.symbols.find(name);
    if (it != g.symbols.end() && (value < it->second.min || value > it->second.max))
      return Error::user("symbol '" + name + "' = " + std::to_string(value) +
                         " is outside its declared range [" + std::to_string(it->second.min) +
                         ", " + std::to_string(it->second.max) + "]");
  }
  return b;
}

Expected<std::vector<Tensor>> interpret(const Graph &g, const std::vector<Tensor> &inputs,
                                        const InterpOptions &opts) {
  COIL_TRY(SymBindings bindings, bindInputs(g, inputs));
  std::vector<Tensor> vals(g.numValues());
  for (size_t i = 0; i < inputs.size(); ++i) vals[size_t(g.inputs[i])] = inputs[i];
  for (const auto &[v, t] : g.constants()) vals[size_t(v)] = t;

  auto evalSymConstant = [&](ValueId v) -> Status {
    const std::vector<SymInt> &elems = g.symConstant(v);
    std::vector<int64_t> ints;
    for (const SymInt &e : elems) {
      auto x = e.evaluate(bindings);
      if (!x.ok())
        return Error::user("cannot evaluate '" + g.value(v).name + "': " + x.error().message());
      ints.push_back(*x);
    }
    Shape shape;
    if (g.value(v).type.rank() == 1) shape.push_back(int64_t(ints.size()));
    vals[size_t(v)] = Tensor::fromInts(DType::I64, shape, ints);
    return okStatus();
  };
  for (const auto &[v, e] : g.symConstants())
    if (std::all_of(e.begin(), e.end(), [&](const SymInt &s) { return s.evaluate(bindings).ok(); }))
      COIL_TRY_STATUS(evalSymConstant(v));

  for (const Node &n : g.nodes()) {
    KernelFn fn = kernelFor(n.op);
    if (!fn)
      return Error::user("op '" + std::string(opName(n.op)) +
                             "' has no reference kernel in the interpreter",
                         n.loc);
    std::vector<TensorType> outTypes;
    for (ValueId o : n.outputs) outTypes.push_back(g.value(o).type);
    KernelContext ctx{n, {}, &outTypes};
    for (ValueId in : n.inputs) {
      if (in < 0) {
        ctx.inputs.push_back(nullptr);
        continue;
      }
      if (!vals[size_t(in)].defined() && g.isSymConstant(in))
        COIL_TRY_STATUS(evalSymConstant(in)); // symbols bound by an earlier node
      COIL_CHECK(vals[size_t(in)].defined())
          << "value '" << g.value(in).name << "' used before it is computed";
      ctx.inputs.push_back(&vals[size_t(in)]);
    }
    auto res = fn(ctx);
    if (!res.ok()) return res.error().withDefaultLoc(n.loc);
    std::vector<Tensor> &outs = *res;
    if (outs.size() < n.outputs.size())
      return Error::internal("kernel returned " + std::to_string(outs.size()) +
                                 " outputs, the node has " + std::to_string(n.outputs.size()),
                             n.loc);
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const Value &ov = g.value(n.outputs[k]);
      const Tensor &t = outs[k];
      std::vector<std::pair<SymInt, int64_t>> pending;
      bool ok = t.dtype() == ov.type.dtype && t.rank() == ov.type.rank();
      if (ok) ok = matchShape(ov.type.shape, t.shape(), bindings, pending) < 0;
      for (const auto &[e, actual] : pending) {
        auto x = e.evaluate(bindings);
        ok = ok && (!x.ok() || *x == actual); // unbound: a data-dependent expression
      }
      if (!ok)
        return Error::internal("output '" + ov.name + "' is " + std::string(dtypeName(t.dtype())) +
                                   shapeStr(t.shape()) + " but its inferred type is " +
                                   ov.type.str(),
                               n.loc);
      vals[size_t(n.outputs[k])] = t;
    }
    outs.resize(n.outputs.size());
    if (opts.afterNode) opts.afterNode(n, outs);
  }
  std::vector<Tensor> result;
  for (ValueId o : g.outputs) {
    if (!vals[size_t(o)].defined() && g.isSymConstant(o)) COIL_TRY_STATUS(evalSymConstant(o));
    result.push_back(vals[size_t(o)]);
  }
  return result;
}

} // namespace coil
