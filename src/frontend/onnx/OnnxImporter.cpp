// ONNX importer: ModelProto -> Graph, with schema validation, typing by inference and symbolic
// folding of shape subgraphs (see OnnxImporter.h for the contract). This file reads the model
// (opset, dim_param symbols, inputs, initializers, outputs) and runs the import; the Importer's
// other parts are listed in ImporterInternal.h.
#include "frontend/onnx/OnnxImporter.h"

#include "frontend/onnx/ImporterInternal.h"
#include "frontend/onnx/OnnxTensor.h"
#include "ir/Infer.h"

#include <cctype>
#include <fstream>
#include <sstream>

namespace coil {

namespace importer {

bool isDefaultDomain(const std::string &d) {
  return d.empty() || d == "ai.onnx";
}

std::string dirOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

namespace {

/// A symbol name from a dim_param: non-identifier characters become '_', a leading digit or
/// an empty name gets a '_' prefix, and C++/Python keywords get a '_' suffix.
std::string sanitizeSymbol(const std::string &raw) {
  static const std::set<std::string> keywords = {
      "and",    "as",     "assert",   "auto",   "bool",     "break", "case",     "catch",  "char",
      "class",  "const",  "continue", "def",    "default",  "del",   "delete",   "do",     "double",
      "elif",   "else",   "enum",     "except", "extern",   "false", "float",    "for",    "from",
      "global", "goto",   "if",       "import", "in",       "int",   "is",       "lambda", "long",
      "new",    "None",   "nonlocal", "not",    "or",       "pass",  "raise",    "return", "short",
      "signed", "sizeof", "static",   "struct", "switch",   "this",  "throw",    "true",   "True",
      "False",  "try",    "typedef",  "union",  "unsigned", "void",  "volatile", "while",  "with",
      "yield",  "min",    "max"};
  std::string s;
  for (char c : raw) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "_" + s;
  if (keywords.count(s)) s += "_";
  return s;
}

} // namespace

Expected<std::string> readFileBytes(const std::string &path, const char *what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Error::user(std::string("cannot open ") + what + " '" + path + "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return Error::runtime(std::string("cannot read ") + what + " '" + path + "'");
  return ss.str();
}

Status Importer::readOpset(const onnx::ModelProto &model) {
  bool found = false;
  for (const auto &imp : model.opset_import()) {
    if (isDefaultDomain(imp.domain())) {
      opset_ = imp.version();
      found = true;
    }
  }
  if (!found) { // fine while no node uses the default domain (checked per node)
    noDefaultDomain_ = true;
    opset_ = kMaxOpset;
    return okStatus();
  }
  if (opset_ > kMaxOpset)
    return userError("model opset " + std::to_string(opset_) +
                     " is newer than the newest supported opset " + std::to_string(kMaxOpset) +
                     " (onnx " COIL_ONNX_VERSION_STRING ")");
  if (opset_ < 1)
    return userError("model opset " + std::to_string(opset_) + " is not a valid opset");
  return okStatus();
}

std::string Importer::symbolFor(const std::string &dimParam) {
  auto it = dimParams_.find(dimParam);
  if (it != dimParams_.end()) return it->second;
  std::string base = sanitizeSymbol(dimParam), s = base;
  for (int i = 2; usedSymbols_.count(s); ++i) s = base + "_" + std::to_string(i);
  usedSymbols_.insert(s);
  dimParams_[dimParam] = s;
  auto r = opts_.symbolRanges.find(s);
  if (r == opts_.symbolRanges.end()) r = opts_.symbolRanges.find(dimParam);
  // A named dynamic dim defaults to [1, 2^62]: exporters name batch and sequence dims, which
  // are never empty in practice, and min 1 lets min(seq, 1) -> 1 fold. --dynamic seq=0:MAX
  // allows 0.
  g_.symbols[s] = r == opts_.symbolRanges.end() ? SymRange{1, SymRange{}.max} : r->second;
  return s;
}

std::string Importer::freshSymbolName(const std::string &hint) {
  std::string base = sanitizeSymbol(hint), s;
  do {
    s = base + "_" + std::to_string(freshCounter_++);
  } while (usedSymbols_.count(s));
  usedSymbols_.insert(s);
  g_.symbols[s] = SymRange{};
  return s;
}

Expected<TensorType> Importer::typeOf(const onnx::ValueInfoProto &vi, const char *what,
                                      bool inventDims) {
  if (!vi.type().has_tensor_type())
    return userError(std::string(what) + " '" + vi.name() + "' is not a tensor");
  const auto &tt = vi.type().tensor_type();
  auto dt = dtypeFromOnnx(tt.elem_type(), vi.name());
  if (!dt.ok()) return dt.error().withDefaultLoc(SourceLoc{path_});
  TensorType t{*dt, {}};
  if (!tt.has_shape())
    return userError(std::string(what) + " '" + vi.name() +
                     "' has no shape: coil needs the rank of every input");
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto &d = tt.shape().dim(i);
    if (d.has_dim_value()) {
      if (d.dim_value() < 0)
        return userError(std::string(what) + " '" + vi.name() + "' has negative dim " +
                         std::to_string(d.dim_value()));
      t.shape.push_back(d.dim_value());
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      t.shape.push_back(inventDims ? SymInt::symbol(symbolFor(d.dim_param())) : SymInt(-1));
    } else {
      t.shape.push_back(
          inventDims ? SymInt::symbol(freshSymbolName(vi.name() + "_dim" + std::to_string(i)))
                     : SymInt(-1));
    }
  }
  return t;
}

Status Importer::addOutputs(const onnx::GraphProto &g) {
  std::set<ValueId> used;
  std::set<std::string> listed;
  for (const auto &o : g.output()) {
    // Names are single assignments: an output listed twice would be two values of one name.
    if (!listed.insert(o.name()).second) {
      report(userError("graph output '" + o.name() + "' is listed twice"));
      continue;
    }
    auto it = names_.find(o.name());
    if (it == names_.end()) {
      report(userError("graph output '" + o.name() +
                       "' is not produced by any node, initializer or input"));
      continue;
    }
    ValueId v = it->second;
    if (v == kPoisoned) continue;
    if (g_.value(v).name != o.name() || used.count(v)) {
      // An output aliased by a removed Identity/Dropout: give it its own name.
      Value &val = g_.value(v);
      bool ownName = val.kind == ValueKind::NodeOutput && !used.count(v);
      for (const auto &o2 : g.output()) ownName = ownName && o2.name() != val.name;
      if (ownName) {
        val.name = o.name();
      } else if (g_.isConstant(v)) {
        v = g_.addConstant(o.name(), g_.constant(v));
      } else if (g_.isSymConstant(v)) {
        v = g_.addSymConstant(o.name(), g_.symConstant(v), val.type.rank() == 0);
      } else if (inferFnFor(OpKind::Identity)) {
        Node id{OpKind::Identity, o.name(), {v}, {}, {}, SourceLoc{path_, o.name(), "Identity"}};
        ValueId out = g_.addValue(o.name(), g_.value(v).type, ValueKind::NodeOutput);
        id.outputs.push_back(out);
        g_.addNode(std::move(id));
        v = out;
      }
    }
    used.insert(v);
    g_.outputs.push_back(v);
    // The declared type must agree with the inferred one.
    if (!o.type().has_tensor_type()) continue;
    const auto &tt = o.type().tensor_type();
    const TensorType &t = g_.value(v).type;
    if (tt.elem_type() != 0) {
      auto dt = dtypeFromOnnx(tt.elem_type(), o.name());
      if (!dt.ok()) {
        report(dt.error().withDefaultLoc(SourceLoc{path_}));
        continue;
      }
      if (*dt != t.dtype) {
        report(userError("graph output '" + o.name() + "' is declared " +
                         std::string(dtypeName(*dt)) + " but computes " +
                         std::string(dtypeName(t.dtype))));
        continue;
      }
    }
    if (!tt.has_shape()) continue;
    if (tt.shape().dim_size() != t.rank()) {
      report(userError("graph output '" + o.name() + "' is declared with rank " +
                       std::to_string(tt.shape().dim_size()) + " but computes " + t.str()));
      continue;
    }
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto &d = tt.shape().dim(i);
      const SymInt &s = t.shape[size_t(i)];
      if (d.has_dim_value() && s.isConstant() && d.dim_value() != s.constant()) {
        report(userError("graph output '" + o.name() + "' is declared with dim " +
                         std::to_string(i) + " = " + std::to_string(d.dim_value()) +
                         " but computes " + t.str()));
        break;
      }
    }
  }
  return okStatus();
}

Expected<Graph> Importer::run(const onnx::ModelProto &model, ImportStats *stats) {
  if (!model.has_graph()) return userError("the file is not an onnx model (it has no graph)");
  COIL_TRY_STATUS(readOpset(model));
  const onnx::GraphProto &g = model.graph();
  g_.name = g.name();
  stats_.onnxNodes = g.node_size();
  stats_.opset = opset_;
  for (const auto &in : g.input()) onnxNames_.insert(in.name());
  for (const auto &t : g.initializer()) onnxNames_.insert(t.name());
  for (const auto &n : g.node())
    for (const std::string &o : n.output()) onnxNames_.insert(o);
  // Reserve every dim_param's symbol before any fresh symbol is named.
  for (const auto &in : g.input())
    if (in.type().has_tensor_type())
      for (const auto &d : in.type().tensor_type().shape().dim())
        if (d.has_dim_param() && !d.dim_param().empty()) symbolFor(d.dim_param());
  // Initializers, then inputs (an input with an initializer is a constant).
  std::map<std::string, const onnx::TensorProto *> inits;
  for (const auto &t : g.initializer()) {
    if (t.name().empty())
      report(userError("an initializer has no name"));
    else if (!inits.emplace(t.name(), &t).second)
      report(userError("initializer '" + t.name() + "' is given twice"));
  }
  for (const auto &t : g.sparse_initializer())
    report(userError("sparse initializer '" + t.values().name() + "' is not supported"));
  std::set<std::string> inputNames;
  for (int i = 0; i < g.input_size(); ++i) {
    const onnx::ValueInfoProto &in = g.input(i);
    // An empty name is an absent optional input to a node, never a graph input.
    if (in.name().empty()) {
      report(userError("graph input #" + std::to_string(i) + " has no name"));
      continue;
    }
    if (!inputNames.insert(in.name()).second) {
      report(userError("graph input '" + in.name() + "' is given twice"));
      continue;
    }
    if (inits.count(in.name())) continue;
    auto t = typeOf(in, "graph input", true);
    if (!t.ok()) {
      report(t.error());
      continue;
    }
    names_[in.name()] = g_.addInput(in.name(), *t);
    for (const SymInt &d : t->shape) d.collectSymbols(inputSymbols_);
  }
  for (const auto &t : g.initializer()) {
    if (t.name().empty() || names_.count(t.name()) || inits.at(t.name()) != &t) continue;
    auto tensor = tensorFromProto(t, dir_);
    if (!tensor.ok()) {
      report(tensor.error().withDefaultLoc(SourceLoc{path_}));
      names_[t.name()] = kPoisoned;
      continue;
    }
    ValueId id = g_.addConstant(t.name(), *tensor);
    names_[t.name()] = id;
    noteKnown(id);
  }
  if (g.output_size() == 0) report(userError("the graph has no outputs"));
  // ai.onnx.ml and other domains are fine as long as no node uses them (checked per node).
  for (const auto &n : g.node()) validateNode(n);
  if (diags_.hasErrors()) return diags_.combined();
  COIL_TRY(std::vector<int> order, topoOrder(g));
  for (int i : order) processUpgraded(g.node(i));
  COIL_TRY_STATUS(addOutputs(g));
  if (diags_.hasErrors()) return diags_.combined();
  Graph out = g_.compacted();
  // Nodes typed by folding alone (ops without inference) must not survive dead-node removal.
  for (const Node &n : out.nodes())
    if (!inferFnFor(n.op))
      report(Error::user("op '" + std::string(opName(n.op)) + "' is not supported", n.loc));
  if (diags_.hasErrors()) return diags_.combined();
  // Nodes gone at import other than Identity/Dropout were folded (or left dead by folding).
  int64_t kept = 0;
  for (const Node &n : out.nodes()) kept += n.loc.op == opName(n.op) && n.op != OpKind::Identity;
  stats_.foldedNodes = stats_.onnxNodes + upgradeAddedNodes_ - stats_.removedNodes - kept;
  if (stats) *stats = stats_;
  return out;
}

} // namespace importer

using namespace importer;

Expected<Graph> importOnnxBytes(const std::string &bytes, const std::string &path,
                                const ImportOptions &opts, ImportStats *stats) {
  onnx::ModelProto model;
  if (bytes.empty()) return Error::user("the file is empty, not an onnx model", SourceLoc{path});
  if (!model.ParseFromString(bytes))
    return Error::user("the file is not a valid ONNX model (protobuf parsing failed: truncated "
                       "or not an onnx file)",
                       SourceLoc{path});
  try {
    Importer imp(path, opts);
    return imp.run(model, stats);
  } catch (const InternalError &e) {
    return Error::internal(e.message, SourceLoc{path});
  }
}

int64_t maxOnnxOpset() {
  return kMaxOpset;
}

Expected<Graph> importOnnxFile(const std::string &path, const ImportOptions &opts,
                               ImportStats *stats) {
  auto bytes = readFileBytes(path, "model file");
  if (!bytes.ok()) return bytes.error().withDefaultLoc(SourceLoc{path});
  return importOnnxBytes(*bytes, path, opts, stats);
}

} // namespace coil
