// Graph construction and compaction.
#include "ir/Graph.h"

#include "support/Check.h"


namespace coil {

std::optional<Shape> TensorType::concreteShape() const {
  Shape s;
  for (const SymInt &d : shape) {
    if (!d.isConstant()) return std::nullopt;
    s.push_back(d.constant());
  }
  return s;
}

std::string TensorType::str() const {
  std::string s(dtypeName(dtype));
  s += "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + shape[i].str();
  return s + "]";
}

ValueId Graph::addValue(std::string name, TensorType type, ValueKind kind) {
  COIL_CHECK(!byName_.count(name)) << "duplicate value name '" << name << "'";
  ValueId id = ValueId(values_.size());
  byName_[name] = id;
  values_.push_back(Value{std::move(name), std::move(type), kind, -1});
  return id;
}

ValueId Graph::addInput(std::string name, TensorType type) {
  ValueId id = addValue(std::move(name), std::move(type), ValueKind::Input);
  inputs.push_back(id);
  return id;
}

ValueId Graph::addConstant(std::string name, Tensor t) {
  TensorType type{t.dtype(), {}};
  for (int64_t d : t.shape()) type.shape.push_back(d);
  ValueId id = addValue(std::move(name), std::move(type), ValueKind::Constant);
  constants_[id] = std::move(t);
  return id;
}

ValueId Graph::addSymConstant(std::string name, std::vector<SymInt> elems, bool scalar) {
  COIL_CHECK(!scalar || elems.size() == 1) << "scalar symbolic constant needs one element";
  TensorType type{DType::I64, {}};
  if (!scalar) type.shape.push_back(int64_t(elems.size()));
  ValueId id = addValue(std::move(name), std::move(type), ValueKind::SymConstant);
  symConstants_[id] = std::move(elems);
  return id;
}

std::optional<ValueId> Graph::findValue(const std::string &name) const {
  auto it = byName_.find(name);
  if (it == byName_.end()) return std::nullopt;
  return it->second;
}

std::string Graph::uniqueName(const std::string &base) const {
  if (!byName_.count(base)) return base;
  for (int i = 1;; ++i) {
    std::string n = base + "_" + std::to_string(i);
    if (!byName_.count(n)) return n;
  }
}

int32_t Graph::addNode(Node n) {
  int32_t idx = int32_t(nodes_.size());
  for (ValueId o : n.outputs) {
    Value &v = value(o);
    COIL_CHECK(v.kind == ValueKind::NodeOutput && v.producer < 0)
        << "value '" << v.name << "' cannot be the output of node '" << n.name << "'";
    v.producer = idx;
  }
  nodes_.push_back(std::move(n));
  return idx;
}

Graph Graph::compacted() const {
  std::vector<bool> liveValue(values_.size(), false), liveNode(nodes_.size(), false);
  std::vector<ValueId> stack(outputs.begin(), outputs.end());
  while (!stack.empty()) {
    ValueId v = stack.back();
    stack.pop_back();
    if (v < 0 || liveValue[size_t(v)]) continue;
    liveValue[size_t(v)] = true;
    int32_t p = values_[size_t(v)].producer;
    if (p >= 0 && !liveNode[size_t(p)]) {
      liveNode[size_t(p)] = true;
      for (ValueId in : nodes_[size_t(p)].inputs) stack.push_back(in);
      for (ValueId out : nodes_[size_t(p)].outputs) // keep every output of a live node
        liveValue[size_t(out)] = true;
    }
  }
  Graph g;
  g.name = name;
  g.symbols = symbols;
  std::vector<ValueId> remap(values_.size(), kNoValue);
  auto mapOf = [&](ValueId v) { return v < 0 ? kNoValue : remap[size_t(v)]; };
  for (ValueId in : inputs) // graph inputs are kept even when unused: they are the signature
    remap[size_t(in)] = g.addInput(values_[size_t(in)].name, values_[size_t(in)].type);
  for (const auto &[v, t] : constants_)
    if (liveValue[size_t(v)]) remap[size_t(v)] = g.addConstant(values_[size_t(v)].name, t);
  for (const auto &[v, e] : symConstants_)
    if (liveValue[size_t(v)])
      remap[size_t(v)] =
          g.addSymConstant(values_[size_t(v)].name, e, values_[size_t(v)].type.rank() == 0);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!liveNode[i]) continue;
    Node n = nodes_[i]; // topological order: its inputs are already remapped
    for (ValueId &in : n.inputs) in = mapOf(in);
    for (ValueId &out : n.outputs) {
      ValueId fresh =
          g.addValue(values_[size_t(out)].name, values_[size_t(out)].type, ValueKind::NodeOutput);
      remap[size_t(out)] = fresh;
      out = fresh;
    }
    g.addNode(std::move(n));
  }
  for (ValueId out : outputs) g.outputs.push_back(mapOf(out));
  return g;
}

} // namespace coil
