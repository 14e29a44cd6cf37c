// The ONNX importer's validation before import (see ImporterInternal.h): the operator schemas
// of the installed onnx package, each node against the schema of its op version, the
// topological order of the nodes, and the conversion of attributes (whose types the
// validation checks).
#include "frontend/onnx/ImporterInternal.h"
#include "frontend/onnx/OldOpsets.h"
#include "frontend/onnx/OnnxTensor.h"
#include "ir/Infer.h"

#include <functional>
#include <queue>

namespace coil::importer {

namespace {

const std::map<std::string, std::vector<Schema>> &schemaTable() {
  static const std::map<std::string, std::vector<Schema>> table = [] {
    std::map<std::string, std::vector<Schema>> m;
#define COIL_ONNX_ATTR(name, type, required) SchemaAttr{name, type, required},
#define COIL_ONNX_SCHEMA(op, since, minIn, maxIn, minOut, maxOut, deprecated, ATTRS)               \
  m[op].push_back(Schema{op, since, minIn, maxIn, minOut, maxOut, deprecated, {ATTRS}});
#include "OnnxSchemas.inc"
#undef COIL_ONNX_SCHEMA
#undef COIL_ONNX_ATTR
    for (auto &[name, v] : m)
      std::sort(v.begin(), v.end(),
                [](const Schema &a, const Schema &b) { return a.since < b.since; });
    return m;
  }();
  return table;
}

} // namespace

const Schema *resolveSchema(const std::string &op, int64_t opset) {
  const auto &t = schemaTable();
  auto it = t.find(op);
  if (it == t.end()) return nullptr;
  const Schema *best = nullptr;
  for (const Schema &s : it->second)
    if (s.since <= opset) best = &s;
  return best;
}

namespace {

const char *attrTypeName(int t) {
  switch (t) {
  case onnx::AttributeProto::FLOAT:
    return "float";
  case onnx::AttributeProto::INT:
    return "int";
  case onnx::AttributeProto::STRING:
    return "string";
  case onnx::AttributeProto::TENSOR:
    return "tensor";
  case onnx::AttributeProto::GRAPH:
    return "graph";
  case onnx::AttributeProto::FLOATS:
    return "floats";
  case onnx::AttributeProto::INTS:
    return "ints";
  case onnx::AttributeProto::STRINGS:
    return "strings";
  case onnx::AttributeProto::TENSORS:
    return "tensors";
  case onnx::AttributeProto::GRAPHS:
    return "graphs";
  case onnx::AttributeProto::SPARSE_TENSOR:
    return "sparse tensor";
  case onnx::AttributeProto::SPARSE_TENSORS:
    return "sparse tensors";
  case onnx::AttributeProto::TYPE_PROTO:
    return "type";
  case onnx::AttributeProto::TYPE_PROTOS:
    return "types";
  default:
    return "undefined";
  }
}

/// The attribute's type; old models leave `type` unset, so it is deduced from the field set.
int attrTypeOf(const onnx::AttributeProto &a) {
  if (a.type() != onnx::AttributeProto::UNDEFINED) return a.type();
  if (a.has_f()) return onnx::AttributeProto::FLOAT;
  if (a.has_i()) return onnx::AttributeProto::INT;
  if (a.has_s()) return onnx::AttributeProto::STRING;
  if (a.has_t()) return onnx::AttributeProto::TENSOR;
  if (a.has_g()) return onnx::AttributeProto::GRAPH;
  if (a.floats_size()) return onnx::AttributeProto::FLOATS;
  if (a.ints_size()) return onnx::AttributeProto::INTS;
  if (a.strings_size()) return onnx::AttributeProto::STRINGS;
  if (a.graphs_size()) return onnx::AttributeProto::GRAPHS;
  return onnx::AttributeProto::UNDEFINED;
}

} // namespace

void Importer::validateNode(const onnx::NodeProto &n) {
  SourceLoc loc = locOf(n);
  if (!isDefaultDomain(n.domain())) {
    report(Error::user("op '" + n.op_type() + "' of domain '" + n.domain() +
                           "' is not supported (only the default onnx domain is)",
                       loc));
    return;
  }
  if (noDefaultDomain_) {
    report(Error::user("op '" + n.op_type() +
                           "' is in the default onnx domain, which the model does not import",
                       loc));
    return;
  }
  // The node's own version; one older than opset 13's is converted when processed.
  const Schema *s = resolveSchema(n.op_type(), opset_);
  if (!s) {
    if (schemaTable().count(n.op_type()))
      report(Error::user(
          "op '" + n.op_type() + "' is not defined at opset " + std::to_string(opset_), loc));
    else
      report(Error::user("op '" + n.op_type() + "' is not supported (not an onnx op)", loc));
    return;
  }
  if (opset_ < kOldestOpset) {
    const Schema *at7 = resolveSchema(n.op_type(), kOldestOpset);
    if (at7 != s) {
      report(Error::user(
          "model opset " + std::to_string(opset_) + " is older than " +
              std::to_string(kOldestOpset) + " and op '" + n.op_type() + "' changed since (" +
              "version " + std::to_string(s->since) + " at opset " + std::to_string(opset_) + ", " +
              (at7 ? "version " + std::to_string(at7->since) : std::string("not defined")) +
              " at opset " + std::to_string(kOldestOpset) + "): only opsets " +
              std::to_string(kOldestOpset) + ".." + std::to_string(kMaxOpset) +
              " are supported; convert the model with onnx.version_converter",
          loc));
      return;
    }
  }
  if (s->deprecated) {
    std::string instead = n.op_type() == "Upsample"  ? "; use Resize"
                          : n.op_type() == "Scatter" ? "; use ScatterElements"
                                                     : "";
    report(Error::user("op '" + n.op_type() + "' is deprecated at opset " + std::to_string(opset_) +
                           instead,
                       loc));
    return;
  }
  // Support is decided by the op the node becomes (Upsample -> Resize, ...).
  std::string irOp = upgradedOpType(n.op_type(), s->since);
  auto op = opFromName(irOp);
  // Identity, Dropout and Constant never reach inference (removed or turned into constants).
  bool handledHere = op == OpKind::Identity || op == OpKind::Dropout || op == OpKind::Constant;
  if (!op || (!handledHere && !inferFnFor(*op))) {
    report(Error::user("op '" + n.op_type() + "' is not supported", loc));
    return;
  }
  int nIn = n.input_size(), nOut = n.output_size();
  while (nIn > 0 && n.input(nIn - 1).empty()) --nIn;
  while (nOut > 0 && n.output(nOut - 1).empty()) --nOut;
  if (nIn < s->minIn || nIn > s->maxIn)
    report(Error::user(
        "expects " +
            (s->minIn == s->maxIn ? std::to_string(s->minIn)
                                  : std::to_string(s->minIn) + " to " +
                                        (s->maxIn >= (1 << 30) ? std::string("any number of")
                                                               : std::to_string(s->maxIn))) +
            " inputs at opset " + std::to_string(opset_) + ", got " + std::to_string(nIn),
        loc));
  if (nOut < s->minOut || nOut > s->maxOut)
    report(Error::user(
        "expects " +
            (s->minOut == s->maxOut ? std::to_string(s->minOut)
                                    : std::to_string(s->minOut) + " to " +
                                          (s->maxOut >= (1 << 30) ? std::string("any number of")
                                                                  : std::to_string(s->maxOut))) +
            " outputs at opset " + std::to_string(opset_) + ", got " + std::to_string(nOut),
        loc));
  for (int i = 0; i < std::min(nIn, s->minIn); ++i)
    if (n.input(i).empty())
      report(Error::user("required input " + std::to_string(i) + " is missing", loc));
  std::set<std::string> seen;
  for (const auto &a : n.attribute()) {
    if (!seen.insert(a.name()).second) {
      report(Error::user("attribute '" + a.name() + "' is given twice", loc));
      continue;
    }
    if (!a.ref_attr_name().empty()) {
      report(Error::user("attribute '" + a.name() +
                             "' refers to a function attribute, which is not supported",
                         loc));
      continue;
    }
    auto it = std::find_if(s->attrs.begin(), s->attrs.end(),
                           [&](const SchemaAttr &sa) { return a.name() == sa.name; });
    if (it == s->attrs.end()) {
      report(Error::user("unknown attribute '" + a.name() + "' at opset " + std::to_string(opset_),
                         loc));
      continue;
    }
    int t = attrTypeOf(a);
    if (t != it->type) {
      report(Error::user("attribute '" + a.name() + "' must be " + attrTypeName(it->type) +
                             ", got " + attrTypeName(t),
                         loc));
      continue;
    }
    if (t == onnx::AttributeProto::GRAPH || t == onnx::AttributeProto::GRAPHS ||
        t == onnx::AttributeProto::SPARSE_TENSOR || t == onnx::AttributeProto::SPARSE_TENSORS ||
        t == onnx::AttributeProto::TENSORS || t == onnx::AttributeProto::TYPE_PROTO ||
        t == onnx::AttributeProto::TYPE_PROTOS)
      report(Error::user(
          "attribute '" + a.name() + "' of type " + attrTypeName(t) + " is not supported", loc));
  }
  for (const SchemaAttr &sa : s->attrs)
    if (sa.required && !seen.count(sa.name))
      report(Error::user("missing required attribute '" + std::string(sa.name) + "'", loc));
}

Expected<std::vector<int>> Importer::topoOrder(const onnx::GraphProto &g) {
  std::map<std::string, int> producer;
  bool bad = false;
  for (int i = 0; i < g.node_size(); ++i) {
    const auto &n = g.node(i);
    for (const std::string &o : n.output()) {
      if (o.empty()) continue;
      if (names_.count(o)) {
        report(Error::user("output '" + o + "' has the name of a graph input or initializer",
                           locOf(n)));
        bad = true;
      } else if (!producer.emplace(o, i).second) {
        report(Error::user("output '" + o + "' is produced more than once (also by node '" +
                               locOf(g.node(producer[o])).node + "')",
                           locOf(n)));
        bad = true;
      }
    }
  }
  std::vector<std::vector<int>> users(size_t(g.node_size()));
  std::vector<int> pending(size_t(g.node_size()), 0);
  for (int i = 0; i < g.node_size(); ++i) {
    const auto &n = g.node(i);
    std::set<int> deps;
    for (const std::string &in : n.input()) {
      if (in.empty() || names_.count(in)) continue;
      auto it = producer.find(in);
      if (it == producer.end()) {
        report(Error::user("input '" + in +
                               "' is not a graph input, an initializer or the output of "
                               "any node",
                           locOf(n)));
        bad = true;
        continue;
      }
      deps.insert(it->second);
    }
    for (int d : deps) {
      users[size_t(d)].push_back(i);
      ++pending[size_t(i)];
    }
  }
  if (bad) return diags_.combined();
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < g.node_size(); ++i)
    if (!pending[size_t(i)]) ready.push(i);
  std::vector<int> order;
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int u : users[size_t(i)])
      if (--pending[size_t(u)] == 0) ready.push(u);
  }
  if (int(order.size()) != g.node_size()) {
    std::string list;
    for (int i = 0; i < g.node_size(); ++i)
      if (pending[size_t(i)]) list += (list.empty() ? "'" : ", '") + locOf(g.node(i)).node + "'";
    return userError("the graph has a cycle through nodes " + list);
  }
  return order;
}

Expected<Attrs> Importer::convertAttrs(const onnx::NodeProto &n) {
  Attrs attrs;
  for (const auto &a : n.attribute()) {
    switch (attrTypeOf(a)) {
    case onnx::AttributeProto::INT:
      attrs.set(a.name(), int64_t(a.i()));
      break;
    case onnx::AttributeProto::FLOAT:
      attrs.set(a.name(), double(a.f()));
      break;
    case onnx::AttributeProto::STRING:
      attrs.set(a.name(), a.s());
      break;
    case onnx::AttributeProto::INTS:
      attrs.set(a.name(), std::vector<int64_t>(a.ints().begin(), a.ints().end()));
      break;
    case onnx::AttributeProto::FLOATS: {
      std::vector<double> v(a.floats().begin(), a.floats().end());
      attrs.set(a.name(), std::move(v));
      break;
    }
    case onnx::AttributeProto::STRINGS:
      attrs.set(a.name(), std::vector<std::string>(a.strings().begin(), a.strings().end()));
      break;
    case onnx::AttributeProto::TENSOR: {
      onnx::TensorProto tp = a.t();
      if (tp.name().empty()) tp.set_name(a.name());
      auto t = tensorFromProto(tp, dir_);
      if (!t.ok()) return t.error().withDefaultLoc(locOf(n));
      attrs.set(a.name(), *t);
      break;
    }
    default:
      return Error::user(std::string("attribute '") + a.name() + "' of type " +
                             attrTypeName(attrTypeOf(a)) + " is not supported",
                         locOf(n));
    }
  }
  return attrs;
}

} // namespace coil::importer
