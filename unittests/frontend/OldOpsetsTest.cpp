// Tests of the conversion of nodes of opsets 7..12 to their opset-13 form (OldOpsets.h): models
// built at old opsets are imported and interpreted on seeded random inputs, and the outputs are
// compared with the old op's definition computed here element by element.
#include "frontend/onnx/OnnxImporter.h"
#include "interp/Interpreter.h"
#include "onnx/onnx.pb.h"

#include <cmath>
#include <gtest/gtest.h>
#include <random>

namespace coil {
namespace {

using onnx::TensorProto;

/// A one-graph ModelProto at an old opset; dims are constants.
struct OldModel {
  onnx::ModelProto m;
  onnx::GraphProto *g;

  explicit OldModel(int64_t opset) {
    m.set_ir_version(7);
    auto *o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    g = m.mutable_graph();
    g->set_name("old");
  }
  void input(const std::string &name, const Shape &dims, int elem = TensorProto::FLOAT) {
    auto *tt = g->add_input();
    tt->set_name(name);
    auto *t = tt->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  }
  void output(const std::string &name) { g->add_output()->set_name(name); }
  onnx::NodeProto *node(const std::string &op, const std::vector<std::string> &ins,
                        const std::vector<std::string> &outs, const std::string &name = "n") {
    auto *n = g->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto &i : ins) n->add_input(i);
    for (const auto &o : outs) n->add_output(o);
    return n;
  }
  void initFloats(const std::string &name, const Shape &dims, const std::vector<float> &v) {
    auto *t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float x : v) t->add_float_data(x);
  }
};

onnx::AttributeProto *attr(onnx::NodeProto *n, const std::string &name,
                           onnx::AttributeProto::AttributeType type) {
  auto *a = n->add_attribute();
  a->set_name(name);
  a->set_type(type);
  return a;
}
void attrInt(onnx::NodeProto *n, const std::string &name, int64_t v) {
  attr(n, name, onnx::AttributeProto::INT)->set_i(v);
}
void attrFloat(onnx::NodeProto *n, const std::string &name, float v) {
  attr(n, name, onnx::AttributeProto::FLOAT)->set_f(v);
}
void attrString(onnx::NodeProto *n, const std::string &name, const std::string &v) {
  attr(n, name, onnx::AttributeProto::STRING)->set_s(v);
}
void attrInts(onnx::NodeProto *n, const std::string &name, const std::vector<int64_t> &v) {
  auto *a = attr(n, name, onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
void attrFloats(onnx::NodeProto *n, const std::string &name, const std::vector<float> &v) {
  auto *a = attr(n, name, onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
}

Expected<Graph> import(const OldModel &b, ImportStats *stats = nullptr) {
  return importOnnxBytes(b.m.SerializeAsString(), "old.onnx", {}, stats);
}

std::string errorOf(const Expected<Graph> &g) {
  return g.ok() ? "<no error>" : g.error().render();
}

Tensor randomTensor(const Shape &shape, uint32_t seed, double lo = -2, double hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  Tensor t(DType::F32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.setDouble(i, dist(rng));
  return t;
}

/// Imports `b` and interprets it on `inputs`; the first output.
Tensor run(const OldModel &b, const std::vector<Tensor> &inputs) {
  auto g = import(b);
  EXPECT_TRUE(g.ok()) << errorOf(g);
  if (!g.ok()) return Tensor(DType::F32, {0});
  auto out = interpret(*g, inputs);
  EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().render());
  if (!out.ok()) return Tensor(DType::F32, {0});
  return (*out)[0];
}

void expectClose(const Tensor &got, const Tensor &want, double tol = 1e-5) {
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_NEAR(got.getDouble(i), want.getDouble(i), tol * (1 + std::fabs(want.getDouble(i))))
        << "at flat index " << i;
}

int countOps(const Graph &g, OpKind op) {
  int n = 0;
  for (const Node &node : g.nodes()) n += node.op == op;
  return n;
}

const Node *firstNode(const Graph &g, OpKind op) {
  for (const Node &node : g.nodes())
    if (node.op == op) return &node;
  return nullptr;
}

// --- Softmax, LogSoftmax, Hardmax: 2-D coercion before version 13

/// The old definition: rows are the dims before `axis`, the op runs over all dims from `axis`.
Tensor coercedReference(const std::string &op, const Tensor &x, int64_t axis) {
  int64_t rows = 1;
  for (int64_t d = 0; d < axis; ++d) rows *= x.shape()[size_t(d)];
  int64_t cols = x.numel() / rows;
  Tensor y(DType::F32, x.shape());
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -1e300, sum = 0;
    int64_t arg = 0;
    for (int64_t c = 0; c < cols; ++c) {
      double v = x.getDouble(r * cols + c);
      if (v > mx) mx = v, arg = c;
    }
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(x.getDouble(r * cols + c) - mx);
    for (int64_t c = 0; c < cols; ++c) {
      double v = x.getDouble(r * cols + c), out;
      if (op == "Hardmax")
        out = c == arg ? 1 : 0;
      else if (op == "Softmax")
        out = std::exp(v - mx) / sum;
      else
        out = v - mx - std::log(sum);
      y.setDouble(r * cols + c, out);
    }
  }
  return y;
}

TEST(OldOpsets, SoftmaxFamilyIsCoercedTo2D) {
  struct Case {
    Shape shape;
    std::optional<int64_t> axis; // nullopt: the default, 1
  };
  std::vector<Case> cases = {
      {{2, 3, 4}, std::nullopt}, {{2, 3, 4}, 0}, {{2, 3, 4}, 2}, {{2, 3, 2, 3}, 2}, {{5, 7}, 1}};
  uint32_t seed = 1;
  for (const char *op : {"Softmax", "LogSoftmax", "Hardmax"}) {
    for (int64_t opset : {7, 10, 11, 12}) {
      for (const Case &c : cases) {
        OldModel b(opset);
        b.input("x", c.shape);
        auto *n = b.node(op, {"x"}, {"y"});
        if (c.axis) attrInt(n, "axis", *c.axis);
        b.output("y");
        Tensor x = randomTensor(c.shape, seed++);
        int64_t axis = c.axis.value_or(1);
        SCOPED_TRACE(std::string(op) + " opset " + std::to_string(opset) + " axis " +
                     std::to_string(axis) + " rank " + std::to_string(c.shape.size()));
        expectClose(run(b, {x}), coercedReference(op, x, axis));
        // Over the last dim the op keeps its form; otherwise Flatten/op/Reshape.
        auto g = import(b);
        ASSERT_TRUE(g.ok());
        bool last = axis == int64_t(c.shape.size()) - 1;
        EXPECT_EQ(countOps(*g, OpKind::Flatten), last ? 0 : 1);
        EXPECT_EQ(g->nodes().size(), last ? 1u : 3u);
      }
    }
  }
  // Negative axes are accepted from version 11; out-of-range axes are errors.
  OldModel neg(11);
  neg.input("x", {2, 3, 2, 3});
  attrInt(neg.node("Softmax", {"x"}, {"y"}), "axis", -2);
  neg.output("y");
  Tensor x = randomTensor({2, 3, 2, 3}, 99);
  expectClose(run(neg, {x}), coercedReference("Softmax", x, 2));
  OldModel bad(10);
  bad.input("x", {2, 3});
  attrInt(bad.node("Softmax", {"x"}, {"y"}, "sm"), "axis", 2);
  bad.output("y");
  auto g = import(bad);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(errorOf(g).find("node 'sm' (Softmax): axis 2 is out of range for an input of rank 2 "
                            "(version 1 of Softmax)"),
            std::string::npos)
      << errorOf(g);
}

// --- Upsample and Resize-10: asymmetric coordinates; nearest truncates up, rounds up down

/// Nearest sampling as onnxruntime runs Upsample and Resize-10: per axis, output index o reads
/// input index trunc(o / s) where s >= 1 and ceil(o / s) where s < 1 (in float arithmetic).
Tensor nearestReference(const Tensor &x, const std::vector<float> &scales) {
  Shape out;
  for (size_t a = 0; a < scales.size(); ++a)
    out.push_back(int64_t(std::floor(double(x.shape()[a]) * double(scales[a]))));
  Tensor y(DType::F32, out);
  std::vector<int64_t> idx(out.size());
  for (int64_t i = 0; i < y.numel(); ++i) {
    int64_t rem = i, flat = 0, stride = 1;
    for (size_t a = out.size(); a-- > 0;) {
      idx[a] = rem % out[a];
      rem /= out[a];
    }
    std::vector<int64_t> src(out.size());
    for (size_t a = 0; a < out.size(); ++a) {
      float c = float(idx[a]) / scales[a];
      int64_t s = int64_t(scales[a] < 1 ? std::ceil(c) : std::floor(c));
      src[a] = std::min(s, x.shape()[a] - 1);
    }
    for (size_t a = out.size(); a-- > 0;) {
      flat += src[a] * stride;
      stride *= x.shape()[a];
    }
    y.setDouble(i, x.getDouble(flat));
  }
  return y;
}

/// Linear sampling at asymmetric coordinates (o / s, clamped to the input), 2-D over the last
/// two axes of a [1, 1, H, W] input.
Tensor linearReference(const Tensor &x, float sh, float sw) {
  int64_t h = x.shape()[2], w = x.shape()[3];
  int64_t oh = int64_t(std::floor(double(h) * sh)), ow = int64_t(std::floor(double(w) * sw));
  Tensor y(DType::F32, {1, 1, oh, ow});
  auto coord = [](int64_t o, float s, int64_t n, int64_t &i0, int64_t &i1, double &t) {
    double c = std::min(double(float(o) / s), double(n - 1));
    i0 = int64_t(std::floor(c));
    i1 = std::min(i0 + 1, n - 1);
    t = c - double(i0);
  };
  for (int64_t i = 0; i < oh; ++i)
    for (int64_t j = 0; j < ow; ++j) {
      int64_t r0, r1, c0, c1;
      double tr, tc;
      coord(i, sh, h, r0, r1, tr);
      coord(j, sw, w, c0, c1, tc);
      auto at = [&](int64_t r, int64_t c) { return x.getDouble(r * w + c); };
      double v = (1 - tr) * ((1 - tc) * at(r0, c0) + tc * at(r0, c1)) +
                 tr * ((1 - tc) * at(r1, c0) + tc * at(r1, c1));
      y.setDouble(i * ow + j, v);
    }
  return y;
}

TEST(OldOpsets, UpsampleAttributeScalesNearest) {
  OldModel b(7);
  b.input("x", {1, 2, 3, 4});
  auto *n = b.node("Upsample", {"x"}, {"y"});
  attrFloats(n, "scales", {1, 1, 2, 3});
  b.output("y");
  Tensor x = randomTensor({1, 2, 3, 4}, 3);
  expectClose(run(b, {x}), nearestReference(x, {1, 1, 2, 3}));
  auto g = import(b);
  ASSERT_TRUE(g.ok());
  const Node *r = firstNode(*g, OpKind::Resize);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->attrs.getString("coordinate_transformation_mode", ""), "asymmetric");
  EXPECT_EQ(r->attrs.getString("nearest_mode", ""), "floor");
}

TEST(OldOpsets, UpsampleAndResize10NearestRounding) {
  // Fractional scales up (Upsample-9), down, and both ways at once (Resize-10).
  struct Case {
    const char *op;
    int64_t opset;
    std::vector<float> scales;
    int resizes;
  };
  for (const Case &c :
       {Case{"Upsample", 9, {1, 1, 1.5f, 2.5f}, 1}, Case{"Resize", 10, {1, 1, 0.6f, 0.5f}, 1},
        Case{"Resize", 10, {1, 1, 0.6f, 1.7f}, 2}, Case{"Resize", 10, {1, 1, 2.f, 0.75f}, 2}}) {
    SCOPED_TRACE(std::string(c.op) + " scales " + std::to_string(c.scales[2]) + " " +
                 std::to_string(c.scales[3]));
    OldModel b(c.opset);
    b.input("x", {1, 2, 5, 7});
    b.initFloats("s", {4}, c.scales);
    b.node(c.op, {"x", "s"}, {"y"});
    b.output("y");
    Tensor x = randomTensor({1, 2, 5, 7}, 4);
    expectClose(run(b, {x}), nearestReference(x, c.scales));
    auto g = import(b);
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(countOps(*g, OpKind::Resize), c.resizes);
  }
}

TEST(OldOpsets, UpsampleAndResize10Linear) {
  for (auto [opset, op] :
       {std::pair<int64_t, const char *>{7, "Upsample"}, {9, "Upsample"}, {10, "Resize"}}) {
    for (auto [sh, sw] : {std::pair<float, float>{2, 2}, {1.5f, 2.5f}, {0.5f, 0.8f}}) {
      if (std::string(op) == "Upsample" && (sh < 1 || sw < 1)) continue;
      SCOPED_TRACE(std::string(op) + " " + std::to_string(sh) + " " + std::to_string(sw));
      OldModel b(opset);
      b.input("x", {1, 1, 4, 5});
      onnx::NodeProto *n;
      if (opset < 9) {
        n = b.node(op, {"x"}, {"y"});
        attrFloats(n, "scales", {1, 1, sh, sw});
      } else {
        b.initFloats("s", {4}, {1, 1, sh, sw});
        n = b.node(op, {"x", "s"}, {"y"});
      }
      attrString(n, "mode", "linear");
      b.output("y");
      Tensor x = randomTensor({1, 1, 4, 5}, 5);
      expectClose(run(b, {x}), linearReference(x, sh, sw));
    }
  }
}

TEST(OldOpsets, UpsampleErrorsNameTheWayForward) {
  OldModel mode(9);
  mode.input("x", {1, 1, 2, 2});
  mode.initFloats("s", {4}, {1, 1, 2, 2});
  attrString(mode.node("Upsample", {"x", "s"}, {"y"}, "up"), "mode", "foo");
  mode.output("y");
  auto g = import(mode);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(errorOf(g).find("node 'up' (Upsample): opset 9 form (version 9 of Upsample) with "
                            "mode 'foo' is not supported; re-export the model with opset >= 13 "
                            "or convert it with onnx.version_converter"),
            std::string::npos)
      << errorOf(g);
  // Mode 'foo' aside, every form converts; scales known only at run time included.
  for (auto [opset, op] : {std::pair<int64_t, const char *>{9, "Upsample"}, {10, "Resize"}}) {
    for (const char *m : {"nearest", "linear"}) {
      OldModel dyn(opset);
      dyn.input("x", {1, 2, 5, 7});
      dyn.input("s", {4});
      attrString(dyn.node(op, {"x", "s"}, {"y"}, "rs"), "mode", m);
      dyn.output("y");
      std::vector<float> sc = std::string(op) == "Resize" ? std::vector<float>{1, 1, 0.6f, 1.7f}
                                                          : std::vector<float>{1, 1, 2, 1.5f};
      Tensor x = randomTensor({1, 2, 5, 7}, 13);
      Tensor s = Tensor::fromDoubles(DType::F32, {4}, {sc[0], sc[1], sc[2], sc[3]});
      SCOPED_TRACE(std::string(op) + " " + m + " with run-time scales");
      if (std::string(m) == "nearest") {
        expectClose(run(dyn, {x, s}), nearestReference(x, sc));
      } else {
        auto g = import(dyn);
        EXPECT_TRUE(g.ok()) << errorOf(g);
      }
    }
  }
  // Upsample is deprecated from opset 10 (onnxruntime refuses it as well).
  OldModel dep(10);
  dep.input("x", {1, 1, 2, 2});
  dep.initFloats("s", {4}, {1, 1, 2, 2});
  dep.node("Upsample", {"x", "s"}, {"y"}, "up");
  dep.output("y");
  auto d = import(dep);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(errorOf(d).find("node 'up' (Upsample): op 'Upsample' is deprecated at opset 10; use "
                            "Resize"),
            std::string::npos)
      << errorOf(d);
}

// --- BatchNormalization versions 7 and 9

TEST(OldOpsets, BatchNormalizationSpatial) {
  Tensor x = randomTensor({3, 2, 4}, 6);
  // spatial=0: per-activation parameters [C, D].
  OldModel b(7);
  b.input("x", {3, 2, 4});
  std::vector<std::vector<float>> p(4);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(0.5f, 1.5f);
  for (auto &v : p)
    for (int i = 0; i < 8; ++i) v.push_back(dist(rng));
  const char *names[] = {"scale", "bias", "mean", "var"};
  for (int i = 0; i < 4; ++i) b.initFloats(names[i], {2, 4}, p[size_t(i)]);
  auto *n = b.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y"});
  attrInt(n, "spatial", 0);
  attrFloat(n, "epsilon", 1e-3f);
  b.output("y");
  Tensor want(DType::F32, {3, 2, 4});
  for (int64_t i = 0; i < want.numel(); ++i) {
    size_t a = size_t(i % 8);
    want.setDouble(i, (x.getDouble(i) - p[2][a]) / std::sqrt(double(p[3][a]) + 1e-3) * p[0][a] +
                          p[1][a]);
  }
  expectClose(run(b, {x}), want);
  auto g = import(b);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(countOps(*g, OpKind::BatchNormalization), 0);
  // spatial=1 (the default) is version 9's per-channel normalization.
  OldModel s1(8);
  s1.input("x", {3, 2, 4});
  for (int i = 0; i < 4; ++i) s1.initFloats(names[i], {2}, {p[size_t(i)][0], p[size_t(i)][1]});
  attrInt(s1.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y"}), "spatial",
          1);
  s1.output("y");
  for (int64_t i = 0; i < want.numel(); ++i) {
    size_t c = size_t((i / 4) % 2);
    want.setDouble(i, (x.getDouble(i) - p[2][c]) / std::sqrt(double(p[3][c]) + 1e-5) * p[0][c] +
                          p[1][c]);
  }
  expectClose(run(s1, {x}), want);
  // Training mode (five outputs) is not supported.
  OldModel tr(9);
  tr.input("x", {3, 2, 4});
  for (int i = 0; i < 4; ++i) tr.initFloats(names[i], {2}, {1, 1});
  tr.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"},
          {"y", "rm", "rv", "sm", "sv"}, "bn");
  tr.output("y");
  auto t = import(tr);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(errorOf(t).find("node 'bn' (BatchNormalization): opset 9 form (version 9 of "
                            "BatchNormalization) in training mode"),
            std::string::npos)
      << errorOf(t);
}

// --- Slice version 1 and the other attributes that became inputs

TEST(OldOpsets, SliceAttributes) {
  Tensor x = randomTensor({4, 5, 6}, 8);
  OldModel b(9);
  b.input("x", {4, 5, 6});
  auto *n = b.node("Slice", {"x"}, {"y"});
  attrInts(n, "starts", {1, -4});
  attrInts(n, "ends", {1000, -1});
  attrInts(n, "axes", {0, 2});
  b.output("y");
  Tensor want(DType::F32, {3, 5, 3});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j)
      for (int64_t k = 0; k < 3; ++k)
        want.setDouble((i * 5 + j) * 3 + k, x.getDouble(((i + 1) * 5 + j) * 6 + k + 2));
  expectClose(run(b, {x}), want);
  // Without axes the starts and ends apply to the leading dims.
  OldModel noAxes(7);
  noAxes.input("x", {4, 5, 6});
  auto *m = noAxes.node("Slice", {"x"}, {"y"});
  attrInts(m, "starts", {0, 2});
  attrInts(m, "ends", {2, 5});
  noAxes.output("y");
  Tensor want2(DType::F32, {2, 3, 6});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 6; ++k)
        want2.setDouble((i * 3 + j) * 6 + k, x.getDouble((i * 5 + j + 2) * 6 + k));
  expectClose(run(noAxes, {x}), want2);
}

TEST(OldOpsets, AttributesThatBecameInputs) {
  Tensor x = randomTensor({2, 1, 6}, 9);
  auto shapeOf = [](const OldModel &b) {
    auto g = import(b);
    EXPECT_TRUE(g.ok()) << errorOf(g);
    return g.ok() ? g->value(g->outputs[0]).type.str() : std::string();
  };
  OldModel sq(11);
  sq.input("x", {2, 1, 6});
  attrInts(sq.node("Squeeze", {"x"}, {"y"}), "axes", {-2});
  sq.output("y");
  EXPECT_EQ(shapeOf(sq), "f32[2, 6]");
  OldModel usq(7);
  usq.input("x", {2, 1, 6});
  attrInts(usq.node("Unsqueeze", {"x"}, {"y"}), "axes", {0, 4});
  usq.output("y");
  EXPECT_EQ(shapeOf(usq), "f32[1, 2, 1, 6, 1]");
  OldModel rs(11);
  rs.input("x", {2, 1, 6});
  auto *r = rs.node("ReduceSum", {"x"}, {"y"});
  attrInts(r, "axes", {0, 2});
  attrInt(r, "keepdims", 0);
  rs.output("y");
  double sum = 0;
  for (int64_t i = 0; i < x.numel(); ++i) sum += x.getDouble(i);
  Tensor y = run(rs, {x});
  ASSERT_EQ(y.shape(), Shape{1});
  EXPECT_NEAR(y.getDouble(0), sum, 1e-5);
  OldModel sp(8);
  sp.input("x", {2, 1, 6});
  auto *s = sp.node("Split", {"x"}, {"a", "b"});
  attrInt(s, "axis", 2);
  attrInts(s, "split", {2, 4});
  sp.output("b");
  Tensor b = run(sp, {x});
  ASSERT_EQ(b.shape(), (Shape{2, 1, 4}));
  EXPECT_EQ(b.getDouble(0), x.getDouble(2));
  // Pad-2: pads and the float value were attributes.
  OldModel pad(10);
  pad.input("x", {2, 1, 6});
  auto *p = pad.node("Pad", {"x"}, {"y"});
  attrInts(p, "pads", {0, 1, 0, 0, 0, 1});
  attrFloat(p, "value", 2.5f);
  pad.output("y");
  Tensor py = run(pad, {x});
  ASSERT_EQ(py.shape(), (Shape{2, 2, 7}));
  EXPECT_EQ(py.getDouble(0), 2.5);
  EXPECT_EQ(py.getDouble(7), x.getDouble(0));
  EXPECT_EQ(py.getDouble(13), 2.5);
  // Clip-6 with only a min.
  OldModel clip(7);
  clip.input("x", {2, 1, 6});
  attrFloat(clip.node("Clip", {"x"}, {"y"}), "min", 0.25f);
  clip.output("y");
  Tensor cy = run(clip, {x});
  for (int64_t i = 0; i < x.numel(); ++i)
    EXPECT_FLOAT_EQ(float(cy.getDouble(i)), std::max(float(x.getDouble(i)), 0.25f));
  // TopK-1: k was an attribute.
  OldModel topk(9);
  topk.input("x", {2, 1, 6});
  attrInt(topk.node("TopK", {"x"}, {"v", "i"}), "k", 2);
  topk.output("v");
  Tensor tv = run(topk, {x});
  ASSERT_EQ(tv.shape(), (Shape{2, 1, 2}));
  double mx = -1e9;
  for (int64_t i = 0; i < 6; ++i) mx = std::max(mx, x.getDouble(i));
  EXPECT_EQ(tv.getDouble(0), mx);
}

TEST(OldOpsets, DropoutScatterRoiAlign) {
  // Dropout-7 copies its input; its mask has the input's type, all ones.
  Tensor x = randomTensor({3, 4}, 10);
  OldModel d(7);
  d.input("x", {3, 4});
  attrFloat(d.node("Dropout", {"x"}, {"y", "mask"}), "ratio", 0.4f);
  d.output("y");
  d.output("mask");
  auto g = import(d);
  ASSERT_TRUE(g.ok()) << errorOf(g);
  auto out = interpret(*g, {x});
  ASSERT_TRUE(out.ok()) << out.error().render();
  expectClose((*out)[0], x);
  ASSERT_EQ((*out)[1].dtype(), DType::F32);
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ((*out)[1].getDouble(i), 1.0);
  // Scatter-9 is ScatterElements.
  OldModel s(9);
  s.input("data", {2, 3});
  s.input("idx", {2, 1}, TensorProto::INT64);
  s.input("upd", {2, 1});
  attrInt(s.node("Scatter", {"data", "idx", "upd"}, {"y"}), "axis", 1);
  s.output("y");
  auto sg = import(s);
  ASSERT_TRUE(sg.ok()) << errorOf(sg);
  EXPECT_EQ(countOps(*sg, OpKind::ScatterElements), 1);
  Tensor data = randomTensor({2, 3}, 11), upd = randomTensor({2, 1}, 12);
  Tensor idx = Tensor::fromInts(DType::I64, {2, 1}, {2, 0});
  auto so = interpret(*sg, {data, idx, upd});
  ASSERT_TRUE(so.ok()) << so.error().render();
  EXPECT_EQ((*so)[0].getDouble(2), upd.getDouble(0));
  EXPECT_EQ((*so)[0].getDouble(3), upd.getDouble(1));
  EXPECT_EQ((*so)[0].getDouble(1), data.getDouble(1));
  // RoiAlign-10 samples without the half-pixel shift (opsets 10..15).
  for (int64_t opset : {10, 15}) {
    OldModel ra(opset);
    ra.input("x", {1, 1, 4, 4});
    ra.input("rois", {1, 4});
    ra.input("bi", {1}, TensorProto::INT64);
    ra.node("RoiAlign", {"x", "rois", "bi"}, {"y"});
    ra.output("y");
    auto rg = import(ra);
    ASSERT_TRUE(rg.ok()) << errorOf(rg);
    const Node *n = firstNode(*rg, OpKind::RoiAlign);
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->attrs.getString("coordinate_transformation_mode", ""), "output_half_pixel");
  }
}

// --- which opsets are accepted

TEST(OldOpsets, OpsetRange) {
  // Below opset 7 a model is accepted when its ops have the version they have at 7...
  OldModel relu(6);
  relu.input("x", {2});
  relu.node("Relu", {"x"}, {"y"});
  relu.output("y");
  ImportStats stats;
  auto g = import(relu, &stats);
  EXPECT_TRUE(g.ok()) << errorOf(g);
  EXPECT_EQ(stats.opset, 6);
  // ...and converted as at opset 7 (Softmax-1 is in effect from 1 to 10).
  OldModel sm(3);
  sm.input("x", {2, 3, 4});
  sm.node("Softmax", {"x"}, {"y"});
  sm.output("y");
  g = import(sm, &stats);
  EXPECT_TRUE(g.ok()) << errorOf(g);
  EXPECT_EQ(stats.upgradedNodes, 1);
  // An op that changed between the model's opset and 7 is refused.
  OldModel add(5);
  add.input("x", {2});
  add.node("Add", {"x", "x"}, {"y"}, "a");
  add.output("y");
  g = import(add);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(errorOf(g).find("node 'a' (Add): model opset 5 is older than 7 and op 'Add' changed "
                            "since (version 1 at opset 5, version 7 at opset 7): only opsets 7.." +
                            std::to_string(maxOnnxOpset()) +
                            " are supported; convert the model with onnx.version_converter"),
            std::string::npos)
      << errorOf(g);
}

} // namespace
} // namespace coil
