// Helpers of the lowering tests: parse a .coil graph, lower it, evaluate the Loop IR on random
// inputs and compare with the reference interpreter.
#pragma once

#include "interp/Interpreter.h"
#include "ir/Infer.h"
#include "ir/Parser.h"
#include "lower/LoopEval.h"
#include "lower/Lower.h"

#include <cmath>
#include <gtest/gtest.h>
#include <random>
#include <set>
#include <string>

namespace coil::lowertest {

inline Graph parseOrDie(const std::string &text) {
  auto g = parseGraph(text, "<test>");
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().render()) << "\n" << text;
  if (!g.ok()) return Graph();
  return std::move(g).value();
}

struct RandomOptions {
  double lo = -3, hi = 3;      ///< floats
  int64_t ilo = -20, ihi = 20; ///< signed integers
  int64_t ulo = 0, uhi = 40;   ///< unsigned integers
  bool specials = false;       ///< sprinkle NaN, +-inf and +-0 into floats
};

/// A random tensor of `t` with shape `s` (never all zeros).
inline Tensor randomTensor(DType t, const Shape &s, std::mt19937_64 &rng,
                           const RandomOptions &o = {}) {
  Tensor x(t, s);
  std::uniform_real_distribution<double> fd(o.lo, o.hi);
  std::uniform_int_distribution<int64_t> id(o.ilo, o.ihi), ud(o.ulo, o.uhi), bd(0, 1);
  std::uniform_int_distribution<int> sp(0, 11);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (isFloat(t)) {
      double v = fd(rng);
      if (o.specials) {
        int k = sp(rng);
        if (k == 0) v = std::nan("");
        if (k == 1) v = INFINITY;
        if (k == 2) v = -INFINITY;
        if (k == 3) v = 0.0;
        if (k == 4) v = -0.0;
      }
      x.setDouble(i, v);
    } else if (t == DType::Bool) {
      x.setInt(i, bd(rng));
    } else if (isUnsigned(t)) {
      x.setInt(i, ud(rng));
    } else {
      x.setInt(i, id(rng));
    }
  }
  if (x.numel() > 0 && !isFloat(t)) x.setInt(0, t == DType::Bool ? 1 : 3); // never all zeros
  return x;
}

/// Random inputs for g's inputs, with the symbols bound as `sizes`.
inline std::vector<Tensor> randomInputs(const Graph &g, const SymBindings &sizes, uint64_t seed,
                                        const RandomOptions &o = {}) {
  std::mt19937_64 rng(seed);
  std::vector<Tensor> ins;
  for (ValueId v : g.inputs) {
    const TensorType &t = g.value(v).type;
    Shape s;
    for (const SymInt &d : t.shape) {
      auto e = d.evaluate(sizes);
      EXPECT_TRUE(e.ok()) << "cannot size input " << g.value(v).name;
      s.push_back(e.ok() ? *e : 1);
    }
    ins.push_back(randomTensor(t.dtype, s, rng, o));
  }
  return ins;
}

struct Tolerance {
  double atol = 1e-6, rtol = 1e-5;
};

/// Compares `got` with `want` (exact for integers and bool, within `tol` for floats, NaN
/// matching NaN). Returns a failure message or "".
inline std::string compareTensors(const Tensor &got, const Tensor &want, Tolerance tol) {
  if (got.dtype() != want.dtype())
    return "dtype " + std::string(dtypeName(got.dtype())) + " vs " +
           std::string(dtypeName(want.dtype()));
  if (got.shape() != want.shape())
    return "shape " + shapeStr(got.shape()) + " vs " + shapeStr(want.shape());
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (isFloat(got.dtype())) {
      double a = got.getDouble(i), b = want.getDouble(i);
      if (std::isnan(a) && std::isnan(b)) continue;
      if (std::isinf(a) || std::isinf(b)) {
        if (a == b) continue;
      } else if (std::fabs(a - b) <= tol.atol + tol.rtol * std::fabs(b)) {
        continue;
      }
      return "element " + std::to_string(i) + ": " + std::to_string(a) + " vs " + std::to_string(b);
    }
    if (got.getInt(i) != want.getInt(i))
      return "element " + std::to_string(i) + ": " + std::to_string(got.getInt(i)) + " vs " +
             std::to_string(want.getInt(i));
  }
  return "";
}

/// Lowers `g`, evaluates it and the interpreter on `inputs`, and compares every output.
inline void expectMatchesInterpreter(const Graph &g, const std::vector<Tensor> &inputs,
                                     Tolerance tol = {}, const std::string &what = "") {
  auto want = interpret(g, inputs);
  ASSERT_TRUE(want.ok()) << what << ": interpreter: " << want.error().render();
  auto p = loop::lowerGraph(g);
  ASSERT_TRUE(p.ok()) << what << ": lower: " << p.error().render();
  auto got = loop::evaluateLoopProgram(*p, inputs);
  ASSERT_TRUE(got.ok()) << what << ": evaluate: " << got.error().render() << "\n"
                        << loop::printLoopProgram(*p);
  ASSERT_EQ(got->size(), want->size());
  for (size_t k = 0; k < got->size(); ++k) {
    std::string diff = compareTensors((*got)[k], (*want)[k], tol);
    EXPECT_EQ(diff, "") << what << ": output " << k << "\n" << loop::printLoopProgram(*p);
  }
}

/// Parses `text`, then checks lowering against the interpreter for each size binding.
inline void checkText(const std::string &text, const std::vector<SymBindings> &sizes = {{}},
                      Tolerance tol = {}, const RandomOptions &o = {}) {
  Graph g = parseOrDie(text);
  if (g.nodes().empty() && g.outputs.empty()) return;
  uint64_t seed = 1;
  for (const SymBindings &s : sizes)
    expectMatchesInterpreter(g, randomInputs(g, s, seed++, o), tol, text);
}

/// Builds graphs node by node, inferring each node's output types (as the importer does).
struct GraphBuilder {
  Graph g;
  int fresh = 0;

  ValueId input(const std::string &name, DType t, std::vector<SymInt> shape) {
    for (const SymInt &d : shape) {
      std::set<std::string> syms;
      d.collectSymbols(syms);
      for (const std::string &s : syms)
        if (!g.symbols.count(s)) g.symbols[s] = SymRange{1, 1 << 20};
    }
    return g.addInput(name, TensorType{t, std::move(shape)}); // also a graph input
  }
  ValueId constant(const std::string &name, Tensor t) { return g.addConstant(name, std::move(t)); }
  ValueId ints(const std::string &name, std::vector<int64_t> v) {
    return constant(name, Tensor::fromInts(DType::I64, {int64_t(v.size())}, v));
  }
  ValueId symconst(const std::string &name, std::vector<SymInt> v, bool scalar = false) {
    return g.addSymConstant(name, std::move(v), scalar);
  }
  /// Adds a node; returns its outputs (empty after a failure, which the test reports).
  std::vector<ValueId> node(OpKind op, std::vector<ValueId> inputs, Attrs attrs = {},
                            size_t numOutputs = 1, const std::string &name = "") {
    Node n{
        op, name, std::move(inputs), std::vector<ValueId>(numOutputs, kNoValue), std::move(attrs),
        {}};
    InferContext ctx{n, {}, {}, {}, {}};
    for (ValueId v : n.inputs) {
      ctx.inputTypes.push_back(v == kNoValue ? nullptr : &g.value(v).type);
      std::optional<std::vector<SymInt>> iv;
      const Tensor *c = nullptr;
      if (v != kNoValue && g.isSymConstant(v)) iv = g.symConstant(v);
      if (v != kNoValue && g.isConstant(v)) {
        c = &g.constant(v);
        if (!isFloat(c->dtype())) {
          iv.emplace();
          for (int64_t x : c->toInts()) iv->push_back(x);
        }
      }
      ctx.intValues.push_back(iv);
      ctx.constants.push_back(c);
    }
    ctx.freshSymbol = [this](const std::string &hint) {
      std::string s = hint + "_" + std::to_string(fresh++);
      g.symbols[s] = SymRange{};
      return SymInt::symbol(s);
    };
    auto types = inferNode(ctx);
    EXPECT_TRUE(types.ok()) << opName(op) << ": " << (types.ok() ? "" : types.error().render());
    if (!types.ok()) return {};
    n.outputs.resize(types->size());
    for (size_t k = 0; k < types->size(); ++k)
      n.outputs[k] = g.addValue(g.uniqueName(std::string(opName(op)) + "_out"), (*types)[k],
                                ValueKind::NodeOutput);
    std::vector<ValueId> outs = n.outputs;
    g.addNode(std::move(n));
    return outs;
  }
  ValueId op(OpKind op, std::vector<ValueId> inputs, Attrs attrs = {}) {
    auto o = node(op, std::move(inputs), std::move(attrs));
    return o.empty() ? kNoValue : o[0];
  }
  void output(ValueId v) {
    if (v != kNoValue) g.outputs.push_back(v);
  }
};

inline Attrs attrs(std::initializer_list<std::pair<const char *, AttrValue>> kv) {
  Attrs a;
  for (const auto &[k, v] : kv) a.set(k, v);
  return a;
}

/// Checks the graph of `b` against the interpreter for each size binding.
inline void checkGraph(const Graph &g, const std::vector<SymBindings> &sizes = {{}},
                       Tolerance tol = {}, const RandomOptions &o = {},
                       const std::string &what = "") {
  if (g.outputs.empty()) {
    ADD_FAILURE() << what << ": graph without outputs";
    return;
  }
  uint64_t seed = 7;
  for (const SymBindings &s : sizes)
    expectMatchesInterpreter(g, randomInputs(g, s, seed++, o), tol, what);
}

} // namespace coil::lowertest
