// The Graph IR verifier: structural invariants of Graph.h, then re-inference of every node.
#include "ir/Verifier.h"

#include "ir/OpSchema.h"

#include <optional>
#include <set>
#include <unordered_map>

namespace coil {

namespace {

constexpr int64_t kMaxIntValueElements = int64_t(1) << 20;

class Verifier {
public:
  Verifier(const Graph &g, const VerifyOptions &opts, VerifyFailure *where)
      : g_(g), opts_(opts), where_(where) {}

  Status run() {
    COIL_TRY_STATUS(checkValues());
    COIL_TRY_STATUS(checkInputs());
    COIL_TRY_STATUS(checkConstants());
    COIL_TRY_STATUS(checkNodes());
    if (opts_.checkSchema)
      for (size_t i = 0; i < g_.nodes().size(); ++i) COIL_TRY_STATUS(checkSchema(int32_t(i)));
    COIL_TRY_STATUS(checkOutputs());
    for (const auto &[name, r] : g_.symbols)
      if (r.min > r.max)
        return fail("range of symbol '" + name + "' is empty: min " + std::to_string(r.min) +
                    " > max " + std::to_string(r.max));
    if (opts_.reinfer)
      for (size_t i = 0; i < g_.nodes().size(); ++i) COIL_TRY_STATUS(reinfer(int32_t(i)));
    return okStatus();
  }

private:
  bool validId(ValueId v) const { return v >= 0 && size_t(v) < g_.numValues(); }
  std::string valueStr(ValueId v) const {
    return validId(v) ? "value '" + g_.value(v).name + "'" : "value id " + std::to_string(v);
  }

  Error fail(const std::string &msg, ValueId value = kNoValue, int32_t node = -1) {
    if (where_) {
      where_->node = node;
      where_->value = value;
    }
    SourceLoc loc;
    if (node >= 0) {
      const Node &n = g_.nodes()[size_t(node)];
      loc = n.loc;
      if (loc.node.empty()) loc.node = n.name;
      if (loc.op.empty()) loc.op = std::string(opName(n.op));
    }
    return Error::internal(msg, loc);
  }
  Error failNode(int32_t node, const std::string &msg) { return fail(msg, kNoValue, node); }
  /// A node error whose message names the node and op itself (`node 'n' (Slice): ...`), so
  /// that it reads the same where the caller replaces the location (the text parser).
  Error failNamed(int32_t node, const std::string &who, const std::string &msg) {
    Error e = fail(who + msg, kNoValue, node);
    SourceLoc loc = g_.nodes()[size_t(node)].loc;
    loc.node.clear();
    loc.op.clear();
    return Error::internal(e.message(), loc);
  }

  Status checkValues() {
    std::set<std::string> names;
    for (size_t i = 0; i < g_.numValues(); ++i) {
      ValueId v = ValueId(i);
      const Value &val = g_.value(v);
      if (val.name.empty()) return fail("value id " + std::to_string(i) + " has an empty name", v);
      if (!names.insert(val.name).second)
        return fail("value name '" + val.name + "' is used twice", v);
      if (int(val.kind) < 0 || int(val.kind) > int(ValueKind::NodeOutput))
        return fail(valueStr(v) + " has an invalid kind", v);
      for (const SymInt &d : val.type.shape)
        if (d.isConstant() && d.constant() < 0)
          return fail(valueStr(v) + " has type " + val.type.str() + " with a negative dim", v);
      if (val.kind == ValueKind::NodeOutput) {
        if (val.producer < 0 || size_t(val.producer) >= g_.nodes().size())
          return fail(valueStr(v) + " is a node output but no node produces it", v);
      } else if (val.producer != -1) {
        return fail(valueStr(v) + " is not a node output but names producer node " +
                        std::to_string(val.producer),
                    v);
      }
      bool isConst = g_.isConstant(v), isSym = g_.isSymConstant(v);
      if (isConst != (val.kind == ValueKind::Constant))
        return fail(valueStr(v) + (isConst ? " has a constant tensor but is not a constant"
                                           : " is a constant without a tensor"),
                    v);
      if (isSym != (val.kind == ValueKind::SymConstant))
        return fail(valueStr(v) + (isSym ? " has symbolic elements but is not a symbolic "
                                           "constant"
                                         : " is a symbolic constant without elements"),
                    v);
    }
    for (const auto &[v, t] : g_.constants())
      if (!validId(v)) return fail("the graph holds a constant tensor for " + valueStr(v));
    for (const auto &[v, e] : g_.symConstants())
      if (!validId(v)) return fail("the graph holds symbolic elements for " + valueStr(v));
    return okStatus();
  }

  Status checkInputs() {
    std::set<ValueId> seen;
    for (ValueId v : g_.inputs) {
      if (!validId(v)) return fail("graph input " + valueStr(v) + " does not exist");
      if (g_.value(v).kind != ValueKind::Input)
        return fail("graph input " + valueStr(v) + " is not of kind input", v);
      if (!seen.insert(v).second) return fail("graph input " + valueStr(v) + " is listed twice", v);
    }
    for (size_t i = 0; i < g_.numValues(); ++i)
      if (g_.value(ValueId(i)).kind == ValueKind::Input && !seen.count(ValueId(i)))
        return fail(valueStr(ValueId(i)) + " is of kind input but is not a graph input",
                    ValueId(i));
    return okStatus();
  }

  Status checkConstants() {
    for (const auto &[v, t] : g_.constants()) {
      const TensorType &type = g_.value(v).type;
      if (!t.defined()) return fail("constant " + valueStr(v) + " holds no tensor", v);
      TensorType actual{t.dtype(), {}};
      for (int64_t d : t.shape()) actual.shape.push_back(d);
      if (actual != type)
        return fail("constant " + valueStr(v) + " has type " + type.str() + " but its tensor is " +
                        actual.str(),
                    v);
    }
    for (const auto &[v, e] : g_.symConstants()) {
      const TensorType &type = g_.value(v).type;
      bool ok = type.dtype == DType::I64 &&
                ((type.rank() == 0 && e.size() == 1) ||
                 (type.rank() == 1 && type.shape[0] == SymInt(int64_t(e.size()))));
      if (!ok)
        return fail("symbolic constant " + valueStr(v) + " has type " + type.str() + " but " +
                        std::to_string(e.size()) +
                        " elements (expected i64[] with 1 element or i64[n] with n)",
                    v);
    }
    return okStatus();
  }

  Status checkNodes() {
    std::vector<int> producedBy(g_.numValues(), -1);
    for (size_t i = 0; i < g_.nodes().size(); ++i) {
      const Node &n = g_.nodes()[i];
      int32_t ni = int32_t(i);
      if (size_t(n.op) >= kNumOps)
        return failNode(ni, "node " + std::to_string(i) + " has an invalid op");
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        ValueId in = n.inputs[k];
        if (in == kNoValue) continue;
        if (!validId(in))
          return failNode(ni, "input " + std::to_string(k) + " is " + valueStr(in) +
                                  ", which does not exist");
        const Value &val = g_.value(in);
        if (val.kind == ValueKind::NodeOutput && val.producer >= ni)
          return failNode(ni, "input " + std::to_string(k) + " (" + valueStr(in) +
                                  ") is produced by node " + std::to_string(val.producer) +
                                  ", which does not come before it (nodes must be in "
                                  "topological order)");
      }
      for (size_t k = 0; k < n.outputs.size(); ++k) {
        ValueId out = n.outputs[k];
        if (!validId(out))
          return failNode(ni, "output " + std::to_string(k) + " is " + valueStr(out) +
                                  ", which does not exist");
        const Value &val = g_.value(out);
        if (val.kind != ValueKind::NodeOutput)
          return failNode(ni, "output " + std::to_string(k) + " (" + valueStr(out) +
                                  ") is not of kind node output");
        if (producedBy[size_t(out)] >= 0)
          return failNode(ni, "output " + std::to_string(k) + " (" + valueStr(out) +
                                  ") is also produced by node " +
                                  std::to_string(producedBy[size_t(out)]));
        producedBy[size_t(out)] = int(i);
        if (val.producer != ni)
          return failNode(ni, "output " + std::to_string(k) + " (" + valueStr(out) +
                                  ") records producer node " + std::to_string(val.producer));
      }
      for (const auto &[name, v] : n.attrs.all()) {
        if (name.empty()) return failNode(ni, "an attribute has an empty name");
        if (v.valueless_by_exception())
          return failNode(ni, "attribute '" + name + "' holds no value");
        if (const Tensor *t = std::get_if<Tensor>(&v); t && !t->defined())
          return failNode(ni, "tensor attribute '" + name + "' holds no tensor");
      }
    }
    for (size_t i = 0; i < g_.numValues(); ++i)
      if (g_.value(ValueId(i)).kind == ValueKind::NodeOutput && producedBy[i] < 0)
        return fail(valueStr(ValueId(i)) + " is a node output but no node produces it", ValueId(i));
    return okStatus();
  }

  static std::string count(int64_t n, const char *what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  }
  /// `needs 2 inputs, got 1`, `needs at least 3 inputs, got 1`, `takes at most 5 inputs, got 6`.
  static std::string arityError(int got, int lo, int hi, const char *what) {
    std::string rule = lo == hi   ? "needs " + count(lo, what)
                       : got < lo ? "needs at least " + count(lo, what)
                                  : "takes at most " + count(hi, what);
    return rule + ", got " + std::to_string(got);
  }

  /// The node against its op's ONNX schema (irOpSchema): arity, attribute names and kinds,
  /// required attributes and inputs. Inference functions rely on these.
  Status checkSchema(int32_t ni) {
    const Node &n = g_.nodes()[size_t(ni)];
    const OpSchema *s = irOpSchema(n.op);
    if (!s) return okStatus();
    std::string who = !n.name.empty()      ? "node '" + n.name + "'"
                      : !n.outputs.empty() ? "node of " + valueStr(n.outputs[0])
                                           : "node " + std::to_string(ni);
    who += " (" + std::string(opName(n.op)) + "): ";
    // Trailing absent inputs do not count (as in ONNX, where they are empty names).
    int nIn = int(n.inputs.size()), nOut = int(n.outputs.size());
    while (nIn > 0 && n.inputs[size_t(nIn - 1)] == kNoValue) --nIn;
    if (nIn < s->minInputs || nIn > s->maxInputs)
      return failNamed(ni, who, arityError(nIn, s->minInputs, s->maxInputs, "input"));
    if (nOut < s->minOutputs || nOut > s->maxOutputs)
      return failNamed(ni, who, arityError(nOut, s->minOutputs, s->maxOutputs, "output"));
    for (int k = 0; k < s->minInputs; ++k)
      if (n.inputs[size_t(k)] == kNoValue)
        return failNamed(ni, who, "input " + std::to_string(k) + " is required but absent");
    for (const auto &[name, v] : n.attrs.all()) {
      const OpAttrSchema *a = s->findAttr(name);
      if (!a) return failNamed(ni, who, "unknown attribute '" + name + "'");
      AttrKind got = attrKind(v);
      if (!a->kind)
        return failNode(ni,
                        who + "attribute '" + name + "' has an onnx type coil does not support");
      if (!attrKindAccepts(*a->kind, got))
        return failNamed(ni, who,
                         "attribute '" + name + "' must be " + attrKindName(*a->kind) + ", got " +
                             attrKindName(got));
    }
    for (const OpAttrSchema &a : s->attrs)
      if (a.required && !n.attrs.has(std::string(a.name)))
        return failNamed(ni, who, "missing required attribute '" + std::string(a.name) + "'");
    return okStatus();
  }

  Status checkOutputs() {
    for (size_t i = 0; i < g_.outputs.size(); ++i)
      if (!validId(g_.outputs[i]))
        return fail("graph output " + std::to_string(i) + " is " + valueStr(g_.outputs[i]) +
                    ", which does not exist");
    return okStatus();
  }

  /// Known integer contents of `v` (constants of integer or bool type, symbolic constants).
  const std::optional<std::vector<SymInt>> &intValueOf(ValueId v) {
    auto it = intValues_.find(v);
    if (it != intValues_.end()) return it->second;
    std::optional<std::vector<SymInt>> r;
    if (g_.isSymConstant(v)) {
      r = g_.symConstant(v);
    } else if (g_.isConstant(v)) {
      const Tensor &t = g_.constant(v);
      if ((isInteger(t.dtype()) || t.dtype() == DType::Bool) && t.numel() <= kMaxIntValueElements) {
        std::vector<SymInt> elems;
        elems.reserve(size_t(t.numel()));
        for (int64_t i = 0; i < t.numel(); ++i) elems.push_back(t.getInt(i));
        r = std::move(elems);
      }
    }
    return intValues_.emplace(v, std::move(r)).first->second;
  }

  bool involvesFresh(const SymInt &d) const {
    if (fresh_.empty() || d.isConstant()) return false;
    std::set<std::string> syms;
    d.collectSymbols(syms);
    for (const std::string &s : syms)
      if (fresh_.count(s)) return true;
    return false;
  }

  Status reinfer(int32_t ni) {
    const Node &n = g_.nodes()[size_t(ni)];
    InferFn fn = opts_.inferFor ? opts_.inferFor(n.op) : inferFnFor(n.op);
    if (!fn)
      return failNode(ni, "op '" + std::string(opName(n.op)) +
                              "' is not supported (it has no "
                              "shape inference)");
    InferContext ctx{n, {}, {}, {}, {}};
    for (ValueId in : n.inputs) {
      if (in == kNoValue) {
        ctx.inputTypes.push_back(nullptr);
        ctx.intValues.push_back(std::nullopt);
        ctx.constants.push_back(nullptr);
        continue;
      }
      ctx.inputTypes.push_back(&g_.value(in).type);
      ctx.intValues.push_back(intValueOf(in));
      ctx.constants.push_back(g_.isConstant(in) ? &g_.constant(in) : nullptr);
    }
    ctx.freshSymbol = [this](const std::string &hint) {
      std::string name = "?" + hint + "#" + std::to_string(fresh_.size());
      fresh_.insert(name);
      return SymInt::symbol(name);
    };
    // An inference function that trips one of its own checks on a malformed node (e.g. too
    // few inputs) is a coil bug, but the graph may come from text: report it at the node.
    std::optional<Expected<std::vector<TensorType>>> result;
    try {
      result.emplace(fn(ctx));
    } catch (const InternalError &e) {
      if (where_) where_->inferenceBug = true;
      return failNode(ni, "shape inference of " + std::string(opName(n.op)) +
                              " failed with an internal error: " + e.message);
    }
    Expected<std::vector<TensorType>> &r = *result;
    if (!r.ok()) return failNode(ni, "shape inference fails: " + r.error().message());
    const std::vector<TensorType> &types = *r;
    if (types.size() < n.outputs.size())
      return failNode(ni, "shape inference gives " + std::to_string(types.size()) +
                              " outputs, the node has " + std::to_string(n.outputs.size()));
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const TensorType &rec = g_.value(n.outputs[k]).type;
      const TensorType &inf = types[k];
      std::string what = "output " + std::to_string(k) + " (" + valueStr(n.outputs[k]) +
                         ") has type " + rec.str() + " but shape inference gives " + inf.str();
      if (rec.dtype != inf.dtype || rec.rank() != inf.rank()) return failNode(ni, what);
      for (size_t d = 0; d < rec.shape.size(); ++d)
        if (rec.shape[d] != inf.shape[d] && !involvesFresh(inf.shape[d]) &&
            !proveEQ(rec.shape[d], inf.shape[d], g_.symbols))
          return failNode(ni, what);
    }
    return okStatus();
  }

  const Graph &g_;
  const VerifyOptions &opts_;
  VerifyFailure *where_;
  std::unordered_map<ValueId, std::optional<std::vector<SymInt>>> intValues_;
  std::set<std::string> fresh_;
};

} // namespace

Status verifyGraph(const Graph &g) {
  return verifyGraph(g, VerifyOptions{}, nullptr);
}

Status verifyGraph(const Graph &g, const VerifyOptions &opts, VerifyFailure *where) {
  return Verifier(g, opts, where).run();
}

Status verifyGraphAfter(const Graph &g, const std::string &stage) {
  Status st = verifyGraph(g);
  if (st.ok()) return st;
  return Error::internal("graph IR after " + stage + ": " + st.error().message(), st.error().loc());
}

} // namespace coil
