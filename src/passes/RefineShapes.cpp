#include "passes/RefineShapes.h"

#include "ir/Infer.h"

#include <map>
#include <set>

namespace coil {

namespace {

std::optional<std::vector<SymInt>> intValueOf(const Graph &g, ValueId v) {
  if (g.isSymConstant(v)) return g.symConstant(v);
  if (!g.isConstant(v)) return std::nullopt;
  const Tensor &t = g.constant(v);
  if (!(isInteger(t.dtype()) || t.dtype() == DType::Bool) || t.numel() > 4096) return std::nullopt;
  std::vector<SymInt> elems;
  for (int64_t i = 0; i < t.numel(); ++i) elems.push_back(t.getInt(i));
  return elems;
}

} // namespace

Expected<int> refineShapes(Graph &g) {
  // Symbols that graph inputs define are never replaced.
  std::set<std::string> inputSymbols;
  for (ValueId v : g.inputs)
    for (const SymInt &d : g.value(v).type.shape) d.collectSymbols(inputSymbols);
  int replaced = 0;
  for (const Node &n : g.nodes()) {
    InferFn fn = inferFnFor(n.op);
    if (!fn) continue;
    InferContext ctx{n, {}, {}, {}, {}};
    for (ValueId in : n.inputs) {
      bool present = in != kNoValue;
      ctx.inputTypes.push_back(present ? &g.value(in).type : nullptr);
      ctx.intValues.push_back(present ? intValueOf(g, in) : std::nullopt);
      ctx.constants.push_back(present && g.isConstant(in) ? &g.constant(in) : nullptr);
    }
    std::set<std::string> fresh;
    ctx.freshSymbol = [&fresh](const std::string &hint) {
      std::string name = "?refine_" + hint + "#" + std::to_string(fresh.size());
      fresh.insert(name);
      return SymInt::symbol(name);
    };
    auto types = fn(ctx);
    if (!types.ok() || types->size() < n.outputs.size()) continue;
    std::map<std::string, SymInt> subst;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const TensorType &rec = g.value(n.outputs[k]).type;
      const TensorType &inf = (*types)[k];
      if (rec.rank() != inf.rank()) continue;
      for (size_t d = 0; d < rec.shape.size(); ++d) {
        const SymInt &r = rec.shape[d];
        if (!r.isSymbol() || inputSymbols.count(r.symbolName()) || r == inf.shape[d]) continue;
        std::set<std::string> syms;
        inf.shape[d].collectSymbols(syms);
        bool clean = true;
        for (const std::string &s : syms) clean = clean && !fresh.count(s);
        if (clean) subst.emplace(r.symbolName(), inf.shape[d]);
      }
    }
    if (subst.empty()) continue;
    replaced += int(subst.size());
    for (size_t v = 0; v < g.numValues(); ++v)
      for (SymInt &d : g.value(ValueId(v)).type.shape) d = d.substitute(subst);
    for (const auto &[name, _] : subst) g.symbols.erase(name);
  }
  return replaced;
}

} // namespace coil
