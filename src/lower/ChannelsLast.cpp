// The channels-last pass (see ChannelsLast.h): one walk over the nodes in order, rebuilding the
// graph with NHWC twins of the convolutions' outputs and of the elementwise ops that follow.
#include "lower/ChannelsLast.h"

#include <cstring>
#include <map>

namespace coil::loop {
namespace {

const std::vector<int64_t> kToNhwc{0, 2, 3, 1}, kToNchw{0, 3, 1, 2};

/// Ops computed elementwise over their (broadcast) inputs, without an axis attribute.
bool isElementwise(OpKind op) {
  switch (op) {
  case OpKind::Abs:
  case OpKind::Add:
  case OpKind::Cast:
  case OpKind::Ceil:
  case OpKind::Celu:
  case OpKind::Clip:
  case OpKind::Div:
  case OpKind::Elu:
  case OpKind::Erf:
  case OpKind::Exp:
  case OpKind::Floor:
  case OpKind::Gelu:
  case OpKind::HardSigmoid:
  case OpKind::HardSwish:
  case OpKind::Identity:
  case OpKind::LeakyRelu:
  case OpKind::Log:
  case OpKind::Max:
  case OpKind::Mean:
  case OpKind::Min:
  case OpKind::Mish:
  case OpKind::Mul:
  case OpKind::Neg:
  case OpKind::PRelu:
  case OpKind::Pow:
  case OpKind::Reciprocal:
  case OpKind::Relu:
  case OpKind::Selu:
  case OpKind::Sigmoid:
  case OpKind::Softplus:
  case OpKind::Softsign:
  case OpKind::Sqrt:
  case OpKind::Sub:
  case OpKind::Sum:
  case OpKind::Tanh:
  case OpKind::ThresholdedRelu:
  case OpKind::Where:
    return true;
  default:
    return false;
  }
}

bool isConvDType(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16;
}

TensorType permuted(const TensorType &t, const std::vector<int64_t> &perm) {
  TensorType r{t.dtype, {}};
  for (int64_t p : perm) r.shape.push_back(t.shape[size_t(p)]);
  return r;
}

/// A rank-4 constant with its dims permuted (dim i of the result is dim perm[i] of t).
Tensor permuteConstant(const Tensor &t, const std::vector<int64_t> &perm) {
  Shape in = t.shape(), out;
  for (int64_t p : perm) out.push_back(in[size_t(p)]);
  Tensor r(t.dtype(), out);
  size_t es = dtypeSize(t.dtype());
  std::vector<int64_t> inStrides = contiguousStrides(in);
  const char *src = static_cast<const char *>(t.data());
  char *dst = static_cast<char *>(r.data());
  int64_t i = 0;
  for (int64_t a = 0; a < out[0]; ++a)
    for (int64_t b = 0; b < out[1]; ++b)
      for (int64_t c = 0; c < out[2]; ++c)
        for (int64_t d = 0; d < out[3]; ++d, ++i) {
          int64_t o[4] = {a, b, c, d}, off = 0;
          for (size_t k = 0; k < 4; ++k) off += o[k] * inStrides[size_t(perm[k])];
          std::memcpy(dst + size_t(i) * es, src + size_t(off) * es, es);
        }
  return r;
}

bool allOnes(const TensorType &t) {
  for (const SymInt &d : t.shape)
    if (d != SymInt(1)) return false;
  return true;
}

class Converter {
public:
  explicit Converter(const Graph &g) : out_(g) {}

  Expected<Graph> run() {
    std::vector<coil::Node> nodes = std::move(out_.mutableNodes());
    out_.mutableNodes().clear();
    for (size_t v = 0; v < out_.numValues(); ++v) {
      Value &val = out_.value(ValueId(v));
      if (val.kind == ValueKind::NodeOutput)
        val.producer = -1;
      else
        produced_[ValueId(v)] = true;
    }
    for (coil::Node &n : nodes) {
      if (convertConv(n)) continue;
      if (convertElementwise(n)) continue;
      // Pooling of a channels-last input lowers to channels-last nodes (lower/ops/Spatial.cpp):
      // its output gets a twin.
      bool pool = (n.op == OpKind::MaxPool || n.op == OpKind::AveragePool) &&
                  n.outputs.size() == 1 && !n.inputs.empty() && twin_.count(n.inputs[0]) &&
                  out_.value(n.outputs[0]).type.rank() == 4;
      for (ValueId &in : n.inputs) need(in);
      ValueId y = n.outputs.empty() ? kNoValue : n.outputs[0];
      addNode(std::move(n));
      if (pool) twin_[y] = transpose(y, kToNhwc, permuted(out_.value(y).type, kToNhwc));
    }
    for (ValueId o : out_.outputs) need(o);
    return out_.compacted();
  }

private:
  Graph out_;
  std::map<ValueId, ValueId> twin_;  ///< NCHW value -> its NHWC twin
  std::map<ValueId, bool> produced_; ///< values that exist in the new graph
  int counter_ = 0;

  void addNode(coil::Node n) {
    for (ValueId o : n.outputs) produced_[o] = true;
    out_.addNode(std::move(n));
  }

  /// A new value `Transpose(v, perm)` of type `t`.
  ValueId transpose(ValueId v, const std::vector<int64_t> &perm, const TensorType &t) {
    ValueId o =
        out_.addValue(out_.uniqueName(out_.value(v).name + "_nhwc"), t, ValueKind::NodeOutput);
    emitTranspose(v, perm, o);
    return o;
  }
  void emitTranspose(ValueId v, const std::vector<int64_t> &perm, ValueId o) {
    coil::Node n;
    n.op = OpKind::Transpose;
    n.name = "channels_last_" + std::to_string(counter_++);
    n.inputs = {v};
    n.outputs = {o};
    n.attrs.set("perm", perm);
    addNode(std::move(n));
  }

  /// Makes sure the NCHW value v exists (from its twin when only the twin was computed).
  void need(ValueId v) {
    if (v == kNoValue || produced_[v]) return;
    auto it = twin_.find(v);
    COIL_CHECK(it != twin_.end()) << "value '" << out_.value(v).name << "' used before defined";
    emitTranspose(it->second, kToNchw, v);
  }

  bool convertConv(coil::Node &n) {
    if (n.op != OpKind::Conv || n.inputs.size() < 2 || n.outputs.size() != 1) return false;
    // Copies: adding values below moves the graph's value table.
    const TensorType xt = out_.value(n.inputs[0]).type, wt = out_.value(n.inputs[1]).type;
    const TensorType yt = out_.value(n.outputs[0]).type;
    if (xt.rank() != 4 || wt.rank() != 4 || yt.rank() != 4 || !isConvDType(yt.dtype)) return false;
    need(n.inputs[0]); // the lowering reads it through the NHWC view where it is a Transpose
    if (n.inputs.size() > 2) need(n.inputs[2]);
    ValueId w = n.inputs[1];
    if (out_.isConstant(w) && out_.constant(w).rank() == 4) {
      // Weights transposed once: the constant [M, KH, KW, C/g], seen as [M, C/g, KH, KW].
      Tensor t = permuteConstant(out_.constant(w), kToNhwc);
      ValueId wc = out_.addConstant(out_.uniqueName(out_.value(w).name + "_nhwc"), std::move(t));
      ValueId wv = out_.addValue(out_.uniqueName(out_.value(w).name + "_nchw_view"), wt,
                                 ValueKind::NodeOutput);
      emitTranspose(wc, kToNchw, wv);
      n.inputs[1] = wv;
    } else {
      need(w);
    }
    n.attrs.set(kChannelsLastAttr, int64_t(1));
    ValueId y = n.outputs[0];
    addNode(std::move(n));
    twin_[y] = transpose(y, kToNhwc, permuted(yt, kToNhwc));
    return true;
  }

  bool convertElementwise(coil::Node &n) {
    if (!isElementwise(n.op) || n.outputs.size() != 1) return false;
    ValueId y = n.outputs[0];
    const TensorType yt = out_.value(y).type; // a copy: adding values moves the table
    if (yt.rank() != 4) return false;
    bool anyTwin = false;
    for (ValueId in : n.inputs) {
      if (in == kNoValue) continue;
      const TensorType &t = out_.value(in).type;
      if (twin_.count(in)) {
        anyTwin = true;
        continue;
      }
      if (allOnes(t) || t.rank() == 4) continue;
      if (!out_.isConstant(in) || t.rank() > 4) return false;
    }
    if (!anyTwin) return false;
    for (ValueId &in : n.inputs) {
      if (in == kNoValue) continue;
      const TensorType t = out_.value(in).type;
      if (auto it = twin_.find(in); it != twin_.end()) {
        in = it->second;
      } else if (allOnes(t)) {
        need(in);
      } else if (t.rank() == 4) {
        need(in);
        in = transpose(in, kToNhwc, permuted(t, kToNhwc));
      } else { // a constant of rank < 4, aligned right: padded to rank 4, then permuted
        const Tensor &c = out_.constant(in);
        Shape s4(size_t(4 - c.rank()), 1);
        s4.insert(s4.end(), c.shape().begin(), c.shape().end());
        Tensor p = permuteConstant(c.reshaped(s4), kToNhwc);
        in = out_.addConstant(out_.uniqueName(out_.value(in).name + "_nhwc"), std::move(p));
      }
    }
    ValueId yn = out_.addValue(out_.uniqueName(out_.value(y).name + "_nhwc"), permuted(yt, kToNhwc),
                               ValueKind::NodeOutput);
    n.outputs[0] = yn;
    addNode(std::move(n));
    twin_[y] = yn;
    return true;
  }
};

} // namespace

Expected<Graph> convertToChannelsLast(const Graph &g) {
  return Converter(g).run();
}

} // namespace coil::loop
