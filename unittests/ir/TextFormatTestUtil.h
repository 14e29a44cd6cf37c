// Shared by the text format and verifier tests: structural graph equality, a small inference
// table for ops (so the tests do not depend on which inference functions have landed), and
// test graphs.
#pragma once

#include "ir/Graph.h"
#include "ir/Infer.h"

#include <cstring>
#include <gtest/gtest.h>

namespace coil::testing {

/// Attribute equality with floats compared bit for bit (so NaN attributes compare equal).
inline bool attrBitsEqual(const AttrValue &a, const AttrValue &b) {
  if (a.index() != b.index()) return false;
  auto same = [](double x, double y) { return std::memcmp(&x, &y, sizeof(double)) == 0; };
  if (const double *x = std::get_if<double>(&a)) return same(*x, std::get<double>(b));
  if (const auto *x = std::get_if<std::vector<double>>(&a)) {
    const auto &y = std::get<std::vector<double>>(b);
    if (x->size() != y.size()) return false;
    for (size_t i = 0; i < x->size(); ++i)
      if (!same((*x)[i], y[i])) return false;
    return true;
  }
  return attrValueEqual(a, b);
}
inline bool attrsBitsEqual(const Attrs &a, const Attrs &b) {
  if (a.all().size() != b.all().size()) return false;
  for (auto ia = a.all().begin(), ib = b.all().begin(); ia != a.all().end(); ++ia, ++ib)
    if (ia->first != ib->first || !attrBitsEqual(ia->second, ib->second)) return false;
  return true;
}

/// Structural equality: values matched by name (ids may differ), kinds, types, constants
/// bit-exact, symbolic constants, nodes in order with ops, names, inputs, outputs, attributes
/// and locations (file, node, op; not line and column), symbols and their ranges.
inline ::testing::AssertionResult graphsEqual(const Graph &a, const Graph &b) {
  auto fail = [](const std::string &m) { return ::testing::AssertionFailure() << m; };
  if (a.name != b.name) return fail("graph names differ: '" + a.name + "' vs '" + b.name + "'");
  if (a.symbols.size() != b.symbols.size()) return fail("symbol counts differ");
  for (auto ia = a.symbols.begin(), ib = b.symbols.begin(); ia != a.symbols.end(); ++ia, ++ib)
    if (ia->first != ib->first || ia->second.min != ib->second.min ||
        ia->second.max != ib->second.max)
      return fail("symbol '" + ia->first + "' differs");
  if (a.numValues() != b.numValues())
    return fail("value counts differ: " + std::to_string(a.numValues()) + " vs " +
                std::to_string(b.numValues()));
  auto nameOf = [](const Graph &g, ValueId v) {
    return v < 0 ? std::string("<absent>") : g.value(v).name;
  };
  for (size_t i = 0; i < a.numValues(); ++i) {
    const Value &va = a.value(ValueId(i));
    auto j = b.findValue(va.name);
    if (!j) return fail("value '" + va.name + "' is missing");
    const Value &vb = b.value(*j);
    if (va.kind != vb.kind) return fail("value '" + va.name + "' kinds differ");
    if (va.type != vb.type)
      return fail("value '" + va.name + "' types differ: " + va.type.str() + " vs " +
                  vb.type.str());
    if (a.isConstant(ValueId(i)) != b.isConstant(*j) ||
        (a.isConstant(ValueId(i)) && !a.constant(ValueId(i)).identical(b.constant(*j))))
      return fail("constant '" + va.name + "' differs");
    if (a.isSymConstant(ValueId(i)) != b.isSymConstant(*j) ||
        (a.isSymConstant(ValueId(i)) && a.symConstant(ValueId(i)) != b.symConstant(*j)))
      return fail("symbolic constant '" + va.name + "' differs");
  }
  auto sameRefs = [&](const std::vector<ValueId> &x, const std::vector<ValueId> &y) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (nameOf(a, x[i]) != nameOf(b, y[i])) return false;
    return true;
  };
  if (!sameRefs(a.inputs, b.inputs)) return fail("graph inputs differ");
  if (!sameRefs(a.outputs, b.outputs)) return fail("graph outputs differ");
  if (a.nodes().size() != b.nodes().size()) return fail("node counts differ");
  for (size_t i = 0; i < a.nodes().size(); ++i) {
    const Node &x = a.nodes()[i], &y = b.nodes()[i];
    std::string at = "node " + std::to_string(i) + ": ";
    if (x.op != y.op) return fail(at + "ops differ");
    if (x.name != y.name) return fail(at + "names differ");
    if (!sameRefs(x.inputs, y.inputs)) return fail(at + "inputs differ");
    if (!sameRefs(x.outputs, y.outputs)) return fail(at + "outputs differ");
    if (!attrsBitsEqual(x.attrs, y.attrs)) return fail(at + "attributes differ");
    if (x.loc.file != y.loc.file || x.loc.node != y.loc.node || x.loc.op != y.loc.op)
      return fail(at + "locations differ");
  }
  return ::testing::AssertionSuccess();
}

/// Inference for the few ops the tests use: Relu/Identity/Neg (same as input 0), Add
/// (broadcast), NonZero (i64[rank, fresh]), Reshape (target from the shape input's contents,
/// fresh dims where unknown), Shape (i64[rank]). Everything else is unsupported.
inline Expected<std::vector<TensorType>> inferSame(InferContext &c) {
  if (!c.hasInput(0)) return c.error("input 0 is required");
  return std::vector<TensorType>{c.input(0)};
}
inline Expected<std::vector<TensorType>> inferAdd(InferContext &c) {
  if (!c.hasInput(0) || !c.hasInput(1)) return c.error("two inputs are required");
  if (c.input(0).dtype != c.input(1).dtype) return c.error("input dtypes differ");
  COIL_TRY(auto shape, broadcastShapes(c.input(0).shape, c.input(1).shape));
  return std::vector<TensorType>{TensorType{c.input(0).dtype, shape}};
}
inline Expected<std::vector<TensorType>> inferNonZero(InferContext &c) {
  if (!c.hasInput(0)) return c.error("input 0 is required");
  return std::vector<TensorType>{TensorType{DType::I64, {c.input(0).rank(), c.freshSymbol("nnz")}}};
}
inline Expected<std::vector<TensorType>> inferReshape(InferContext &c) {
  if (!c.hasInput(0) || !c.hasInput(1)) return c.error("two inputs are required");
  if (c.input(1).rank() != 1 || !c.input(1).shape[0].isConstant())
    return c.error("shape must be a 1-D tensor of known length");
  std::vector<SymInt> out;
  if (const auto &v = c.intValue(1))
    out = *v;
  else
    for (int64_t i = 0; i < c.input(1).shape[0].constant(); ++i)
      out.push_back(c.freshSymbol("reshape"));
  return std::vector<TensorType>{TensorType{c.input(0).dtype, out}};
}
inline Expected<std::vector<TensorType>> inferShape(InferContext &c) {
  if (!c.hasInput(0)) return c.error("input 0 is required");
  return std::vector<TensorType>{TensorType{DType::I64, {c.input(0).rank()}}};
}
inline InferFn testInfer(OpKind op) {
  switch (op) {
  case OpKind::Relu:
  case OpKind::Identity:
  case OpKind::Neg:
    return inferSame;
  case OpKind::Add:
    return inferAdd;
  case OpKind::NonZero:
    return inferNonZero;
  case OpKind::Reshape:
    return inferReshape;
  case OpKind::Shape:
    return inferShape;
  default:
    return nullptr;
  }
}

} // namespace coil::testing
