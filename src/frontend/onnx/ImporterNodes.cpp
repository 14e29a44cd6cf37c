// The ONNX importer's node processing (see ImporterInternal.h): each node of the topological
// order converted from an old op version when needed, then a constant, a pass-through
// (Identity, inference Dropout), folded over known values, or added with the types inference
// gives it.
#include "frontend/onnx/ImporterInternal.h"
#include "frontend/onnx/OldOpsets.h"
#include "ir/Infer.h"

namespace coil::importer {

Status Importer::processConstant(const onnx::NodeProto &n, const Attrs &attrs) {
  std::optional<Tensor> t;
  if (auto v = attrs.getTensor("value")) {
    t = *v;
  } else if (attrs.has("value_float")) {
    t = Tensor::scalar(DType::F32, attrs.getFloat("value_float", 0));
  } else if (attrs.has("value_floats")) {
    auto f = attrs.getFloats("value_floats");
    t = Tensor::fromDoubles(DType::F32, {int64_t(f.size())}, f);
  } else if (attrs.has("value_int")) {
    t = Tensor::fromInts(DType::I64, {}, {*attrs.maybeInt("value_int")});
  } else if (attrs.has("value_ints")) {
    auto v = attrs.getInts("value_ints");
    t = Tensor::fromInts(DType::I64, {int64_t(v.size())}, v);
  } else if (attrs.has("value_string") || attrs.has("value_strings")) {
    return Error::user("string constants are not supported", locOf(n));
  } else {
    return Error::user("constant needs exactly one value attribute", locOf(n));
  }
  if (n.attribute_size() != 1)
    return Error::user("constant needs exactly one value attribute, got " +
                           std::to_string(n.attribute_size()),
                       locOf(n));
  ValueId id = g_.addConstant(n.output(0), *t);
  names_[n.output(0)] = id;
  noteKnown(id);
  return okStatus();
}

Status Importer::processPassThrough(const onnx::NodeProto &n, OpKind op) {
  ValueId in = names_.at(n.input(0));
  if (op == OpKind::Dropout && n.input_size() > 2 && !n.input(2).empty()) {
    auto isConstZero = [&](int i) {
      const Known *k = known(names_.at(n.input(i)));
      return k && k->allConstant() && k->v.size() == 1 && k->v[0].constant() == 0;
    };
    // Training mode drops nothing when the ratio is a constant 0.
    bool ratioZero = n.input_size() > 1 && !n.input(1).empty() && isConstZero(1);
    if (!isConstZero(2) && !ratioZero)
      return Error::user("dropout in training mode is not supported (training_mode must be a "
                         "constant false, or ratio a constant 0)",
                         locOf(n));
  }
  names_[n.output(0)] = in;
  ++stats_.removedNodes;
  if (op == OpKind::Dropout && n.output_size() > 1 && !n.output(1).empty()) {
    // The mask of an inference-mode dropout is all true, of the input's shape.
    const TensorType t = g_.value(in).type; // a copy: adding values below reallocates them
    if (auto s = t.concreteShape()) {
      Tensor mask(DType::Bool, *s);
      for (int64_t i = 0; i < mask.numel(); ++i) mask.setInt(i, 1);
      ValueId m = g_.addConstant(n.output(1), mask);
      names_[n.output(1)] = m;
    } else {
      ValueId shape = g_.addSymConstant(g_.uniqueName(n.output(1) + "_shape"), t.shape);
      Node node{OpKind::ConstantOfShape, n.name(), {shape}, {}, {}, locOf(n)};
      node.attrs.set("value", Tensor::fromInts(DType::Bool, {1}, {1}));
      ValueId m = g_.addValue(n.output(1), TensorType{DType::Bool, t.shape}, ValueKind::NodeOutput);
      node.outputs.push_back(m);
      g_.addNode(std::move(node));
      names_[n.output(1)] = m;
    }
  }
  return okStatus();
}

namespace {
/// proveLE, also using min(a, ...) <= a and a <= max(a, ...) (proveLE alone misses
/// min(seq, 128) <= seq).
bool dimLE(const SymInt &a, const SymInt &b, const SymRanges &ranges) {
  if (a == b || proveLE(a, b, ranges)) return true;
  if (a.kind() == SymInt::Kind::Min)
    for (const SymInt &o : a.operands())
      if (dimLE(o, b, ranges)) return true;
  if (b.kind() == SymInt::Kind::Max)
    for (const SymInt &o : b.operands())
      if (dimLE(a, o, ranges)) return true;
  return false;
}

/// simplify() under `ranges`, then drops min/max operands that another operand provably
/// dominates (max(seq, min(seq, 128)) -> seq), recursively.
SymInt simplifyDim(const SymInt &d, const SymRanges &ranges) {
  SymInt e = simplify(d, ranges);
  if (e.kind() != SymInt::Kind::Min && e.kind() != SymInt::Kind::Max) return e;
  bool isMax = e.kind() == SymInt::Kind::Max;
  std::vector<SymInt> ops;
  for (const SymInt &o : e.operands()) ops.push_back(simplifyDim(o, ranges));
  std::vector<SymInt> kept;
  for (size_t i = 0; i < ops.size(); ++i) {
    bool dominated = false;
    for (size_t j = 0; j < ops.size() && !dominated; ++j) {
      if (i == j) continue;
      // Of two provably equal operands keep the first.
      bool le = isMax ? dimLE(ops[i], ops[j], ranges) : dimLE(ops[j], ops[i], ranges);
      bool ge = isMax ? dimLE(ops[j], ops[i], ranges) : dimLE(ops[i], ops[j], ranges);
      dominated = le && (!ge || j < i);
    }
    if (!dominated) kept.push_back(ops[i]);
  }
  SymInt r = kept[0];
  for (size_t i = 1; i < kept.size(); ++i) r = isMax ? max(r, kept[i]) : min(r, kept[i]);
  return r;
}
} // namespace

Status Importer::inferAndAdd(Node node, const onnx::NodeProto &n) {
  if (!inferFnFor(node.op))
    return Error::user("op '" + n.op_type() + "' is not supported", node.loc);
  std::vector<TensorType> types;
  for (ValueId v : node.inputs) types.push_back(v >= 0 ? g_.value(v).type : TensorType{});
  InferContext ctx{node, {}, {}, {}, {}};
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    ValueId v = node.inputs[i];
    ctx.inputTypes.push_back(v >= 0 ? &types[i] : nullptr);
    const Known *k = v >= 0 ? known(v) : nullptr;
    ctx.intValues.push_back(k && !isFloat(types[i].dtype) ? std::optional<std::vector<SymInt>>(k->v)
                                                          : std::nullopt);
    ctx.constants.push_back(v >= 0 && g_.isConstant(v) ? &g_.constant(v) : nullptr);
  }
  // A node may list no outputs (a fuzzed model): then its op names its fresh symbols.
  std::string hintBase = !node.name.empty() ? node.name
                         : n.output_size()  ? n.output(0)
                                            : n.op_type();
  ctx.freshSymbol = [this, hintBase](const std::string &hint) {
    return SymInt::symbol(freshSymbolName(hint.empty() ? hintBase : hint));
  };
  auto r = inferNode(ctx);
  if (!r.ok()) return r.error().withDefaultLoc(node.loc);
  if (r->size() != node.outputs.size())
    return Error::internal("inference of " + n.op_type() + " gave " + std::to_string(r->size()) +
                               " output types for " + std::to_string(node.outputs.size()) +
                               " outputs",
                           node.loc);
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    std::string name = n.output(int(i));
    if (name.empty()) name = g_.uniqueName(hintBase + "_unused" + std::to_string(i));
    // Simplify dims under the symbols' ranges (max(seq, min(seq, 128)) -> seq for seq >= 0).
    for (SymInt &d : (*r)[i].shape)
      if (!d.isConstant()) d = simplifyDim(d, g_.symbols);
    ValueId id = g_.addValue(name, (*r)[i], ValueKind::NodeOutput);
    node.outputs[i] = id;
    if (!n.output(int(i)).empty()) names_[name] = id;
  }
  std::vector<ValueId> outs = node.outputs;
  g_.addNode(std::move(node));
  return okStatus();
}

Status Importer::addTypedByFolding(Node node, const onnx::NodeProto &n,
                                   const std::vector<Folded> &outs) {
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    TensorType t{outs[i].dtype, {}};
    const Shape &s = outs[i].tensor ? outs[i].tensor->shape() : outs[i].known.shape;
    for (int64_t d : s) t.shape.push_back(d);
    std::string name = n.output(int(i));
    if (name.empty()) name = g_.uniqueName(locOf(n).node + "_unused" + std::to_string(i));
    ValueId id = g_.addValue(name, t, ValueKind::NodeOutput);
    node.outputs[i] = id;
    if (!n.output(int(i)).empty()) names_[name] = id;
  }
  g_.addNode(std::move(node));
  return okStatus();
}

void Importer::processNode(const onnx::NodeProto &n) {
  SourceLoc loc = locOf(n);
  auto op = opFromName(n.op_type());
  COIL_CHECK(op) << "unvalidated op " << n.op_type();
  auto poison = [&] {
    for (const std::string &o : n.output())
      if (!o.empty()) names_[o] = kPoisoned;
  };
  // Inputs; a poisoned input means an earlier error already covers this node, except that
  // every unsupported op is still reported.
  Node node{*op, n.name(), {}, {}, {}, loc};
  int nIn = n.input_size();
  while (nIn > 0 && n.input(nIn - 1).empty()) --nIn;
  for (int i = 0; i < nIn; ++i) {
    if (n.input(i).empty()) {
      node.inputs.push_back(kNoValue);
      continue;
    }
    ValueId v = names_.at(n.input(i));
    if (v == kPoisoned) {
      if (!inferFnFor(*op) && *op != OpKind::Identity && *op != OpKind::Dropout &&
          *op != OpKind::Constant)
        report(Error::user("op '" + n.op_type() + "' is not supported", loc));
      poison();
      return;
    }
    node.inputs.push_back(v);
  }
  auto attrs = convertAttrs(n);
  if (!attrs.ok()) {
    report(attrs.error());
    poison();
    return;
  }
  node.attrs = *attrs;
  Status st = okStatus();
  if (*op == OpKind::Constant) {
    st = processConstant(n, node.attrs);
  } else if (*op == OpKind::Identity || *op == OpKind::Dropout) {
    st = processPassThrough(n, *op);
  } else {
    int nOut = n.output_size();
    while (nOut > 0 && n.output(nOut - 1).empty()) --nOut;
    node.outputs.assign(size_t(nOut), kNoValue);
    auto folded = fold(node, n);
    if (folded && folded->size() >= size_t(nOut) && materialize(n, *folded)) return;
    if (folded && folded->size() >= size_t(nOut) && !inferFnFor(*op))
      st = addTypedByFolding(node, n, *folded); // checked after dead-node removal
    else
      st = inferAndAdd(node, n);
    if (st.ok() && folded) // keep tracking contents that could not become constants
      for (size_t i = 0; i < folded->size() && i < size_t(nOut); ++i)
        if (!n.output(int(i)).empty() && !(*folded)[i].tensor)
          known_[names_.at(n.output(int(i)))] = (*folded)[i].known;
  }
  if (!st.ok()) {
    report(st.error());
    poison();
  }
}

void Importer::processUpgraded(const onnx::NodeProto &n) {
  const Schema *s = resolveSchema(n.op_type(), opset_);
  if (!s || !needsUpgrade(n.op_type(), s->since)) return processNode(n);
  for (const std::string &in : n.input()) {
    if (!in.empty() && names_.at(in) == kPoisoned) { // an earlier error covers this node
      for (const std::string &o : n.output())
        if (!o.empty()) names_[o] = kPoisoned;
      return;
    }
  }
  UpgradeContext ctx;
  ctx.opset = opset_;
  ctx.typeOf = [this](const std::string &name) -> std::optional<TensorType> {
    auto it = names_.find(name);
    if (it == names_.end() || it->second < 0) return std::nullopt;
    return g_.value(it->second).type;
  };
  ctx.constantOf = [this](const std::string &name) -> std::optional<Tensor> {
    auto it = names_.find(name);
    if (it == names_.end() || it->second < 0) return std::nullopt;
    if (g_.isConstant(it->second)) return g_.constant(it->second);
    const Known *k = known(it->second);
    if (!k || !k->allConstant()) return std::nullopt;
    Tensor t(g_.value(it->second).type.dtype, k->shape);
    for (size_t i = 0; i < k->v.size(); ++i) t.setInt(int64_t(i), k->v[i].constant());
    return t;
  };
  ctx.freshName = [this](const std::string &hint) {
    std::string name = hint;
    for (int i = 1; onnxNames_.count(name) || g_.findValue(name); ++i)
      name = hint + "_" + std::to_string(i);
    onnxNames_.insert(name);
    return name;
  };
  auto nodes = upgradeNode(n, s->since, ctx);
  if (!nodes.ok()) {
    report(nodes.error().withDefaultLoc(locOf(n)));
    for (const std::string &o : n.output())
      if (!o.empty()) names_[o] = kPoisoned;
    return;
  }
  // (BatchNormalization-9 is also opset 13's form; only its training outputs change.)
  if (nodes->size() != 1 || nodes->front().SerializeAsString() != n.SerializeAsString())
    ++stats_.upgradedNodes;
  for (const onnx::NodeProto &m : *nodes) {
    upgradeAddedNodes_ += m.op_type() != "Constant";
    processNode(m);
  }
  --upgradeAddedNodes_;
}

} // namespace coil::importer
