// The attention fusion pass (see FuseAttention.h): a matcher per final MatMul that reads the
// chain back to Q, K, V, the scale and the mask terms, checking every condition first, then one
// walk over the nodes that emits the Attention node (and the few view and mask nodes it needs)
// in the place of each matched MatMul; compaction drops the chain.
// The matcher is in FuseAttentionMatch.cpp and FuseAttentionMask.cpp.
#include "passes/FuseAttention.h"

#include "ir/Infer.h"
#include "passes/FuseAttentionInternal.h"

#include <array>
#include <cmath>
#include <map>
#include <optional>

namespace coil {
namespace {

using namespace attnfusion;

/// The ONNX TensorProto.DataType code of `t`, as Cast's `to` holds it (an int in its schema).
int64_t onnxCode(DType t) {
  for (int64_t code = 1; code <= 32; ++code)
    if (dtypeFromOnnxCode(code) == t) return code;
  COIL_CHECK(false) << "dtype " << dtypeName(t) << " has no onnx code";
  return 0;
}

/// Emits the planned nodes into `out` (a copy of the graph being rebuilt).
class Emitter {
public:
  explicit Emitter(Graph &out) : g_(out) {}

  void emit(const Plan &p, const Node &m2) {
    base_ = m2.name.empty() ? std::string("attention") : m2.name;
    loc_ = m2.loc;
    const std::vector<SymInt> &s = p.scoreShape;
    size_t r = s.size();
    // Leading dims of the 4-D problem: [B, H] for rank 4, [N, 1] for rank 3, [1, 1] for 2.
    SymInt B = r == 4 ? s[0] : r == 3 ? s[0] : SymInt(1), H = r == 4 ? s[1] : SymInt(1);
    auto to4 = [&](ValueId x) {
      const std::vector<SymInt> &xs = g_.value(x).type.shape;
      if (xs.size() == 4) return x;
      std::vector<SymInt> shape{xs.size() == 3 ? xs[0] : SymInt(1), SymInt(1), xs[xs.size() - 2],
                                xs[xs.size() - 1]};
      return reshape(x, shape);
    };
    ValueId q = to4(p.q);
    ValueId k = kNoValue, v = kNoValue;
    if (p.kvK != kNoValue) {
      k = p.kvK, v = p.kvV;
    } else {
      switch (p.k.kind) {
      case KPlan::kExisting:
        k = p.k.base;
        break;
      case KPlan::kTranspose:
        k = node(OpKind::Transpose, {p.k.base}, attrs({{"perm", AttrValue(p.k.perm)}}), "k");
        break;
      case KPlan::kReshape:
        k = reshape(p.k.base, p.k.shape);
        break;
      }
      k = to4(k);
      v = to4(p.v);
    }
    // Batch dims of 1 broadcast by the MatMuls, and key/value heads of 1 against more.
    auto dims = [&](ValueId x) { return g_.value(x).type.shape; };
    SymInt hk = dims(k)[1], hv = dims(v)[1];
    SymInt heads = hk == SymInt(1) ? hv : hk;
    auto widen = [&](ValueId x) {
      std::vector<SymInt> d = dims(x), want = d;
      if (d[0] == SymInt(1)) want[0] = B;
      if (d[1] == SymInt(1)) want[1] = heads;
      if (want == d) return x;
      return node(OpKind::Expand, {x, shapeConst(want)}, {}, "kv");
    };
    k = widen(k);
    v = widen(v);
    (void)H;
    // The mask.
    ValueId mask = buildMask(p);
    if (p.splitKeys != kNoValue) {
      COIL_CHECK(mask == kNoValue) << "a split mask is the only term";
      mask = where(p.splitKeys, p.splitThen, p.splitElse);
    }
    if (mask != kNoValue) {
      std::vector<SymInt> ms = dims(mask);
      // Right-aligned against the 4-D scores; a rank-3 problem's batch is the mask's first dim.
      if (r == 3 && ms.size() == 3) {
        mask = reshape(mask, {ms[0], SymInt(1), ms[1], ms[2]});
      } else if (ms.size() < 4) {
        ms.insert(ms.begin(), 4 - ms.size(), SymInt(1));
        mask = reshape(mask, ms);
      }
      ms = dims(mask);
      if (ms.back() != s[r - 1]) {
        ms.back() = s[r - 1];
        mask = node(OpKind::Expand, {mask, shapeConst(ms)}, {}, "mask");
      }
    }
    Attrs at;
    at.set("scale", AttrValue(p.scale));
    if (p.causalTerm >= 0) at.set("is_causal", AttrValue(int64_t(1)));
    std::vector<ValueId> ins{q, k, v};
    if (mask != kNoValue) ins.push_back(mask);
    ValueId y = m2.outputs[0];
    const bool direct = r == 4 && p.outDt == p.dt;
    if (direct && p.splitKeys == kNoValue) {
      node(OpKind::Attention, ins, at, "attention", y);
    } else {
      ValueId y4 = node(OpKind::Attention, ins, at, "attention");
      if (p.splitKeys != kNoValue) y4 = fixMaskedRows(p, y4, v, direct ? y : kNoValue);
      if (direct) return;
      if (r != 4) y4 = reshape(y4, g_.value(y).type.shape, p.outDt == p.dt ? y : kNoValue);
      if (p.outDt != p.dt)
        node(OpKind::Cast, {y4}, attrs({{"to", AttrValue(onnxCode(p.outDt))}}), "y", y);
    }
  }

private:
  Graph &g_;
  std::string base_;
  SourceLoc loc_;
  int counter_ = 0;
  std::map<std::array<ValueId, 3>, ValueId> wheres_; ///< the Where(cond, then, else) made
  /// fixMaskedRows' rows before the first kept key, per keys' condition and S.
  std::map<std::pair<ValueId, SymInt>, ValueId> maskedRows_;

  static Attrs attrs(std::initializer_list<std::pair<const char *, AttrValue>> kv) {
    Attrs a;
    for (const auto &[k, v] : kv) a.set(k, v);
    return a;
  }

  ValueId shapeConst(const std::vector<SymInt> &dims) {
    return g_.addSymConstant(g_.uniqueName(base_ + "/shape"), dims);
  }
  ValueId scalarConst(DType t, double v) {
    return g_.addConstant(g_.uniqueName(base_ + "/const"), Tensor::fromDoubles(t, {}, {v}));
  }
  ValueId reshape(ValueId x, const std::vector<SymInt> &shape, ValueId into = kNoValue) {
    return node(OpKind::Reshape, {x, shapeConst(shape)},
                attrs({{"allowzero", AttrValue(int64_t(1))}}), "view", into);
  }

  /// Adds a node with inferred output types; its one output is `into` when given.
  ValueId node(OpKind op, std::vector<ValueId> ins, Attrs at, const std::string &hint,
               ValueId into = kNoValue) {
    Node n{op,
           base_ + "/" + hint + "_" + std::to_string(counter_++),
           std::move(ins),
           {kNoValue},
           std::move(at),
           loc_};
    InferContext ctx{n, {}, {}, {}, {}};
    for (ValueId v : n.inputs) {
      ctx.inputTypes.push_back(v == kNoValue ? nullptr : &g_.value(v).type);
      std::optional<std::vector<SymInt>> iv;
      const Tensor *c = nullptr;
      if (v != kNoValue && g_.isSymConstant(v)) iv = g_.symConstant(v);
      if (v != kNoValue && g_.isConstant(v)) {
        c = &g_.constant(v);
        if (!isFloat(c->dtype())) {
          iv.emplace();
          for (int64_t x : c->toInts()) iv->push_back(x);
        }
      }
      ctx.intValues.push_back(iv);
      ctx.constants.push_back(c);
    }
    ctx.freshSymbol = [](const std::string &) -> SymInt {
      COIL_CHECK(false) << "attention fusion made a node with a data-dependent shape";
      return SymInt(0);
    };
    auto types = inferNode(ctx);
    COIL_CHECK(types.ok() && types->size() >= 1)
        << "attention fusion made an invalid " << opName(op)
        << " node: " << (types.ok() ? "" : types.error().render());
    if (into == kNoValue) {
      into = g_.addValue(g_.uniqueName(n.name), (*types)[0], ValueKind::NodeOutput);
    } else {
      const TensorType &want = g_.value(into).type, &got = (*types)[0];
      bool fits = want.dtype == got.dtype && want.rank() == got.rank();
      for (size_t i = 0; fits && i < want.shape.size(); ++i)
        fits = want.shape[i] == got.shape[i] || proveEQ(want.shape[i], got.shape[i], g_.symbols);
      COIL_CHECK(fits) << "attention fusion: " << opName(op) << " gives " << got.str() << " for "
                       << want.str();
    }
    n.outputs = {into};
    g_.addNode(std::move(n));
    return into;
  }

  /// Where(c, a, b), made once for every attention that reads it.
  ValueId where(ValueId c, ValueId a, ValueId b) {
    const std::array<ValueId, 3> key{c, a, b};
    auto it = wheres_.find(key);
    if (it == wheres_.end())
      it = wheres_.emplace(key, node(OpKind::Where, {c, a, b}, {}, "mask")).first;
    return it->second;
  }

  ValueId scalarSym(const SymInt &v) {
    return g_.addSymConstant(g_.uniqueName(base_ + "/size"), {v}, true);
  }

  /// A split decoder mask (Plan::splitKeys): Y [B, H, S, Dv] with the rows that K masks at every
  /// key they see causally (query i below K's first kept key) set to the mean of V [B, Hv, T,
  /// Dv] over its keys (heads repeated for grouped queries), written into `into` when given.
  ValueId fixMaskedRows(const Plan &p, ValueId y4, ValueId v4, ValueId into) {
    const size_t r = p.scoreShape.size();
    const SymInt S = p.scoreShape[r - 2], T = p.scoreShape[r - 1];
    // Which rows (before the keys' first kept key): made once per keys' condition and S.
    const std::pair<ValueId, SymInt> rowsKey{p.splitKeys, S};
    auto cached = maskedRows_.find(rowsKey);
    if (cached == maskedRows_.end()) {
      const ValueId zero = g_.addConstant(g_.uniqueName(base_ + "/const"),
                                          Tensor::fromInts(DType::I64, {}, {0})),
                    one = g_.addConstant(g_.uniqueName(base_ + "/const"),
                                         Tensor::fromInts(DType::I64, {}, {1})),
                    tKeys = scalarSym(T);
      ValueId keys = node(OpKind::Range, {zero, tKeys, one}, {}, "keys");
      ValueId first = node(OpKind::Where, {p.splitKeys, keys, tKeys}, {}, "first");
      first = node(OpKind::ReduceMin, {first},
                   attrs({{"axes", AttrValue(std::vector<int64_t>{-1})},
                          {"keepdims", AttrValue(int64_t(1))}}),
                   "first");
      ValueId rows = node(OpKind::Range, {zero, scalarSym(S), one}, {}, "rows");
      rows = reshape(rows, {S, SymInt(1)});
      cached = maskedRows_.emplace(rowsKey, node(OpKind::Less, {rows, first}, {}, "masked")).first;
    }
    const ValueId masked = cached->second;
    ValueId mean = node(
        OpKind::ReduceMean, {v4},
        attrs({{"axes", AttrValue(std::vector<int64_t>{2})}, {"keepdims", AttrValue(int64_t(1))}}),
        "vmean");
    const std::vector<SymInt> ys = g_.value(y4).type.shape, ms = g_.value(mean).type.shape;
    if (ms[1] != ys[1]) { // [B, Hv, 1, Dv] -> [B, Hv, G, 1, Dv] -> [B, H, 1, Dv]
      const SymInt G = floorDiv(ys[1], ms[1]);
      mean = reshape(mean, {ms[0], ms[1], SymInt(1), SymInt(1), ms[3]});
      mean = node(OpKind::Expand, {mean, shapeConst({ms[0], ms[1], G, SymInt(1), ms[3]})}, {},
                  "vmean");
      mean = reshape(mean, {ms[0], ys[1], SymInt(1), ms[3]});
    }
    return node(OpKind::Where, {masked, mean, y4}, {}, "rows", into);
  }

  /// The one attn_mask of the terms other than the causal one (kNoValue when there is none).
  ValueId buildMask(const Plan &p) {
    ValueId add = kNoValue, keep = kNoValue;
    for (size_t i = 0; i < p.terms.size(); ++i) {
      if (int(i) == p.causalTerm) continue;
      const MaskTerm &t = p.terms[i];
      if (t.kind == MaskTerm::kKeep) {
        ValueId c = t.negate ? node(OpKind::Not, {t.value}, {}, "mask") : t.value;
        keep = keep == kNoValue ? c : node(OpKind::And, {keep, c}, {}, "mask");
        continue;
      }
      ValueId m;
      if (t.kind == MaskTerm::kWhereNeg) {
        double n = std::max(t.neg, Matcher::lowest(p.dt));
        ValueId zero = scalarConst(p.dt, 0), neg = scalarConst(p.dt, n);
        m = node(OpKind::Where, {t.value, t.negate ? neg : zero, t.negate ? zero : neg}, {},
                 "mask");
      } else if (t.narrowCond != kNoValue) {
        m = where(t.narrowCond, t.narrowThen, t.narrowElse);
      } else if (g_.value(t.value).type.dtype != p.dt) {
        const Tensor &c = g_.constant(t.value);
        m = g_.addConstant(
            g_.uniqueName(g_.value(t.value).name + "_" + std::string(dtypeName(p.dt))),
            Tensor::fromDoubles(p.dt, c.shape(), c.toDoubles()));
      } else {
        m = t.value;
      }
      add = add == kNoValue ? m : node(OpKind::Add, {add, m}, {}, "mask");
    }
    if (keep == kNoValue) return add;
    if (add == kNoValue) return keep;
    return node(OpKind::Where, {keep, add, scalarConst(p.dt, -kInf)}, {}, "mask");
  }
};

} // namespace

Expected<Graph> fuseAttention(const Graph &g, int *fused) {
  if (fused) *fused = 0;
  Matcher matcher(g);
  std::map<int32_t, Plan> plans;
  for (int32_t i = 0; i < int32_t(g.nodes().size()); ++i)
    if (std::optional<Plan> p = matcher.match(i)) plans.emplace(i, std::move(*p));
  if (plans.empty()) return g;
  Graph out = g;
  std::vector<Node> nodes = std::move(out.mutableNodes());
  out.mutableNodes().clear();
  for (size_t v = 0; v < out.numValues(); ++v) {
    Value &val = out.value(ValueId(v));
    if (val.kind == ValueKind::NodeOutput) val.producer = -1;
  }
  Emitter emitter(out);
  for (int32_t i = 0; i < int32_t(nodes.size()); ++i) {
    auto it = plans.find(i);
    if (it == plans.end()) {
      out.addNode(std::move(nodes[size_t(i)]));
      continue;
    }
    emitter.emit(it->second, nodes[size_t(i)]);
    if (fused) ++*fused;
  }
  return out.compacted();
}

} // namespace coil
