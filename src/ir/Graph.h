/// \file Graph IR: a dataflow graph of ONNX-semantics ops over typed tensor values.
///
/// Semantics:
///  - A Graph owns Values and Nodes. Values are numbered densely (ValueId); each value is
///    exactly one of: a graph input, a constant (a Tensor owned by the graph), a symbolic
///    constant (a rank-0 or rank-1 i64 tensor whose elements are SymInts: the folded result of
///    a shape computation such as Shape->Gather->Concat), or the output of exactly one node.
///  - Nodes are kept in a topological order: every input of a node is a graph input, a
///    (symbolic) constant or an output of an earlier node.
///  - Every value has a TensorType: a dtype and a shape of SymInts. Symbols in input shapes
///    are bound from the actual inputs at run time; symbols that first appear in a node's output
///    type (data-dependent sizes, e.g. NonZero) are bound when that node runs.
///  - Optional inputs that are absent are kNoValue (-1) in Node::inputs; trailing absent
///    inputs may be omitted.
///  - Node attributes are those of the ONNX op (see Attr.h); absent attributes take the ONNX
///    default.
/// The verifier (Verifier.h) checks all of the above.
#pragma once

#include "ir/Attr.h"
#include "ir/Op.h"
#include "support/SourceLoc.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace coil {

using ValueId = int32_t;
constexpr ValueId kNoValue = -1;

struct TensorType {
  DType dtype = DType::F32;
  std::vector<SymInt> shape;

  int64_t rank() const { return int64_t(shape.size()); }
  /// The shape when every dim is a constant.
  std::optional<Shape> concreteShape() const;
  /// "f32[N, 3, 224, 224]".
  std::string str() const;
  friend bool operator==(const TensorType &a, const TensorType &b) {
    return a.dtype == b.dtype && a.shape == b.shape;
  }
  friend bool operator!=(const TensorType &a, const TensorType &b) { return !(a == b); }
};

enum class ValueKind { Input, Constant, SymConstant, NodeOutput };

struct Value {
  std::string name; ///< unique within the graph; the ONNX tensor name where there is one
  TensorType type;
  ValueKind kind = ValueKind::NodeOutput;
  int32_t producer = -1; ///< index of the producing node (NodeOutput only)
};

struct Node {
  OpKind op;
  std::string name; ///< ONNX node name (may be empty)
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  Attrs attrs;
  SourceLoc loc;
};

class Graph {
public:
  std::string name;
  /// Every symbol that appears in the graph, with its declared range.
  SymRanges symbols;

  // --- values
  ValueId addValue(std::string name, TensorType type, ValueKind kind);
  ValueId addInput(std::string name, TensorType type);
  ValueId addConstant(std::string name, Tensor t);
  ValueId addSymConstant(std::string name, std::vector<SymInt> elems, bool scalar = false);
  const Value &value(ValueId v) const { return values_.at(size_t(v)); }
  Value &value(ValueId v) { return values_.at(size_t(v)); }
  size_t numValues() const { return values_.size(); }
  std::optional<ValueId> findValue(const std::string &name) const;
  /// A name not yet used in the graph, derived from `base`.
  std::string uniqueName(const std::string &base) const;

  const Tensor &constant(ValueId v) const { return constants_.at(v); }
  bool isConstant(ValueId v) const { return constants_.count(v) != 0; }
  const std::vector<SymInt> &symConstant(ValueId v) const { return symConstants_.at(v); }
  bool isSymConstant(ValueId v) const { return symConstants_.count(v) != 0; }
  const std::map<ValueId, Tensor> &constants() const { return constants_; }
  const std::map<ValueId, std::vector<SymInt>> &symConstants() const { return symConstants_; }

  // --- nodes
  /// Appends a node; its outputs must be values of kind NodeOutput not yet produced.
  int32_t addNode(Node n);
  const std::vector<Node> &nodes() const { return nodes_; }
  std::vector<Node> &mutableNodes() { return nodes_; }

  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;

  /// Rebuilds a graph holding only the nodes and values reachable from the outputs, with
  /// values renumbered in a deterministic order (inputs, constants, node outputs).
  Graph compacted() const;

private:
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::map<ValueId, Tensor> constants_;
  std::map<ValueId, std::vector<SymInt>> symConstants_;
  std::map<std::string, ValueId> byName_;
};

} // namespace coil
