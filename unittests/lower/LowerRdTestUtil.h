// Helpers of the lowering tests of the Reduction and DataMovement families: build a graph node by
// node (each node's types inferred as the importer does), lower it, evaluate the Loop IR and
// compare with the reference interpreter.
#pragma once

#include "interp/Interpreter.h"
#include "ir/Infer.h"
#include "lower/LoopEval.h"
#include "lower/Lower.h"

#include <cmath>
#include <gtest/gtest.h>
#include <random>
#include <string>
#include <vector>

namespace coil::rdtest {

inline Attrs attrs(std::initializer_list<std::pair<std::string, AttrValue>> kv) {
  Attrs a;
  for (auto &[k, v] : kv) a.set(k, v);
  return a;
}

/// A graph built node by node; every node's output types come from its inference function.
class Builder {
public:
  Graph g;

  void symbol(const std::string &name, int64_t lo, int64_t hi) { g.symbols[name] = {lo, hi}; }
  ValueId input(DType t, std::vector<SymInt> shape) {
    return g.addInput("in" + std::to_string(g.inputs.size()), TensorType{t, std::move(shape)});
  }
  ValueId constant(Tensor t) { return g.addConstant("c" + std::to_string(g.numValues()), t); }
  ValueId ints(std::vector<int64_t> v, bool scalar = false) {
    Shape s;
    if (!scalar) s.push_back(int64_t(v.size()));
    return constant(Tensor::fromInts(DType::I64, s, v));
  }
  /// Adds a node; `ADD_FAILURE`s and returns no outputs when inference rejects it.
  std::vector<ValueId> node(OpKind op, std::vector<ValueId> inputs, Attrs a = {},
                            size_t numOutputs = 1) {
    Node n{op, "n" + std::to_string(g.nodes().size()), std::move(inputs), {}, std::move(a), {}};
    InferContext ctx{n, {}, {}, {}, {}};
    for (ValueId in : n.inputs) {
      ctx.inputTypes.push_back(in == kNoValue ? nullptr : &g.value(in).type);
      std::optional<std::vector<SymInt>> iv;
      if (in != kNoValue && g.isSymConstant(in)) iv = g.symConstant(in);
      if (in != kNoValue && g.isConstant(in) && !isFloat(g.constant(in).dtype())) {
        std::vector<SymInt> e;
        for (int64_t x : g.constant(in).toInts()) e.push_back(x);
        iv = e;
      }
      ctx.intValues.push_back(iv);
      ctx.constants.push_back(in != kNoValue && g.isConstant(in) ? &g.constant(in) : nullptr);
    }
    ctx.freshSymbol = [this](const std::string &h) {
      return SymInt::symbol("fresh_" + h + std::to_string(fresh_++));
    };
    // The number of outputs decides some inferences (Split): give the node its outputs first.
    for (size_t i = 0; i < numOutputs; ++i)
      n.outputs.push_back(ValueId(g.numValues() + i)); // placeholders, replaced below
    auto types = inferNode(ctx);
    if (!types.ok()) {
      ADD_FAILURE() << "inference of " << opName(op) << ": " << types.error().message();
      return {};
    }
    n.outputs.clear();
    std::vector<ValueId> outs;
    for (size_t i = 0; i < numOutputs && i < types->size(); ++i) {
      outs.push_back(
          g.addValue(n.name + "_" + std::to_string(i), (*types)[i], ValueKind::NodeOutput));
      n.outputs.push_back(outs.back());
    }
    g.addNode(std::move(n));
    return outs;
  }
  ValueId node1(OpKind op, std::vector<ValueId> inputs, Attrs a = {}) {
    auto o = node(op, std::move(inputs), std::move(a));
    return o.empty() ? kNoValue : o[0];
  }
  void outputs(std::vector<ValueId> v) { g.outputs = std::move(v); }

private:
  int fresh_ = 0;
};

/// Random values of dtype t in [lo, hi] (integers: whole numbers).
inline Tensor random(DType t, Shape s, double lo = -2, double hi = 2, unsigned seed = 1) {
  std::mt19937 rng(seed);
  int64_t n = numelOf(s);
  if (isFloat(t)) {
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<double> v(static_cast<size_t>(n));
    for (double &x : v) x = d(rng);
    return Tensor::fromDoubles(t, s, v);
  }
  std::uniform_int_distribution<int64_t> d{static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t &x : v) x = d(rng);
  return Tensor::fromInts(t, s, v);
}

/// Lowers g; ADD_FAILUREs when lowering fails.
inline std::optional<loop::LoopProgram> lower(const Graph &g) {
  auto p = loop::lowerGraph(g);
  if (!p.ok()) {
    ADD_FAILURE() << "lowering failed: " << p.error().render();
    return std::nullopt;
  }
  return std::move(*p);
}

/// Compares evaluated Loop IR with the interpreter on `inputs`: dtypes and shapes exactly,
/// integers exactly, floats within atol + rtol * |want| (NaN matches NaN).
inline void expectSame(const Graph &g, const loop::LoopProgram &p, const std::vector<Tensor> &in,
                       double rtol = 1e-5, double atol = 1e-6) {
  auto want = interpret(g, in);
  ASSERT_TRUE(want.ok()) << want.error().render();
  auto got = loop::evaluateLoopProgram(p, in);
  ASSERT_TRUE(got.ok()) << got.error().render() << "\n" << loop::printLoopProgram(p);
  ASSERT_EQ(got->size(), want->size());
  for (size_t o = 0; o < want->size(); ++o) {
    const Tensor &a = (*got)[o], &b = (*want)[o];
    ASSERT_EQ(a.dtype(), b.dtype()) << "output " << o;
    ASSERT_EQ(a.shape(), b.shape()) << "output " << o;
    int bad = 0;
    for (int64_t i = 0; i < a.numel() && bad < 5; ++i) {
      if (isFloat(a.dtype())) {
        double x = a.getDouble(i), y = b.getDouble(i);
        bool ok = (std::isnan(x) && std::isnan(y)) || x == y ||
                  std::fabs(x - y) <= atol + rtol * std::fabs(y);
        if (!ok) {
          ++bad;
          ADD_FAILURE() << "output " << o << " element " << i << ": got " << x << ", want " << y;
        }
      } else if (a.getInt(i) != b.getInt(i)) {
        ++bad;
        ADD_FAILURE() << "output " << o << " element " << i << ": got " << a.getInt(i) << ", want "
                      << b.getInt(i);
      }
    }
    if (bad) ADD_FAILURE() << loop::printLoopProgram(p);
  }
}

/// Lowers g and checks it against the interpreter on each input set.
inline std::optional<loop::LoopProgram> check(const Graph &g,
                                              const std::vector<std::vector<Tensor>> &inputSets,
                                              double rtol = 1e-5, double atol = 1e-6) {
  auto p = lower(g);
  if (!p) return p;
  for (const auto &in : inputSets) expectSame(g, *p, in, rtol, atol);
  return p;
}

inline int countNodes(const loop::LoopProgram &p, bool (loop::Node::*pred)() const) {
  int n = 0;
  for (const loop::Node &node : p.nodes) n += (node.*pred)() ? 1 : 0;
  return n;
}

} // namespace coil::rdtest
