// Tests of the Graph IR verifier: one test per rule, each breaking it in an otherwise valid
// graph, and re-inference (with the test inference table of TextFormatTestUtil.h).
#include "ir/Verifier.h"

#include "TextFormatTestUtil.h"
#include "ir/Parser.h"

using namespace coil;
using coil::testing::testInfer;

namespace {

VerifyOptions structural() {
  VerifyOptions o;
  o.reinfer = false;
  return o;
}
VerifyOptions withInfer() {
  VerifyOptions o;
  o.inferFor = testInfer;
  return o;
}

/// x: f32[N, 4] -> Relu -> Add(relu, c) -> out; plus a shape symconst and a Reshape.
struct Fixture {
  Graph g;
  ValueId x, c, shape, relu, add, reshaped;
  Fixture() {
    g.name = "v";
    SymInt N = SymInt::symbol("N");
    g.symbols["N"] = SymRange{1, 16};
    x = g.addInput("x", TensorType{DType::F32, {N, 4}});
    c = g.addConstant("c", Tensor::fromDoubles(DType::F32, {4}, {1, 2, 3, 4}));
    shape = g.addSymConstant("shape", {4, N});
    relu = addNode(OpKind::Relu, {x}, "relu", TensorType{DType::F32, {N, 4}});
    add = addNode(OpKind::Add, {relu, c}, "add", TensorType{DType::F32, {N, 4}});
    reshaped = addNode(OpKind::Reshape, {add, shape}, "reshaped", TensorType{DType::F32, {4, N}});
    g.outputs = {reshaped};
  }
  ValueId addNode(OpKind op, std::vector<ValueId> inputs, const std::string &out, TensorType type) {
    Node n;
    n.op = op;
    n.name = out + "_node";
    n.inputs = std::move(inputs);
    n.outputs = {g.addValue(out, std::move(type), ValueKind::NodeOutput)};
    g.addNode(std::move(n));
    return g.nodes().back().outputs[0];
  }
};

::testing::AssertionResult failsWith(const Graph &g, const std::string &needle,
                                     const VerifyOptions &opts = structural(),
                                     VerifyFailure *where = nullptr) {
  Status st = verifyGraph(g, opts, where);
  if (st.ok()) return ::testing::AssertionFailure() << "verified, expected: " << needle;
  if (st.error().kind() != ErrorKind::Internal)
    return ::testing::AssertionFailure() << "not an internal error: " << st.error().render();
  if (st.error().render().find(needle) == std::string::npos)
    return ::testing::AssertionFailure()
           << "error '" << st.error().render() << "' does not contain '" << needle << "'";
  return ::testing::AssertionSuccess();
}

TEST(Verifier, AcceptsValidGraph) {
  Fixture f;
  EXPECT_TRUE(verifyGraph(f.g, structural()).ok());
  Status st = verifyGraph(f.g, withInfer());
  EXPECT_TRUE(st.ok()) << st.error().render();
}

TEST(Verifier, ValueNamesAreNonEmptyAndUnique) {
  Fixture f;
  f.g.value(f.add).name = "relu";
  EXPECT_TRUE(failsWith(f.g, "value name 'relu' is used twice"));
  Fixture e;
  e.g.value(e.add).name = "";
  EXPECT_TRUE(failsWith(e.g, "has an empty name"));
}

TEST(Verifier, TypesHaveNonNegativeDims) {
  Fixture f;
  f.g.value(f.relu).type.shape[1] = -4;
  VerifyFailure where;
  EXPECT_TRUE(
      failsWith(f.g, "value 'relu' has type f32[N, -4] with a negative dim", structural(), &where));
  EXPECT_EQ(where.value, f.relu);
}

TEST(Verifier, GraphInputsAreInputValuesListedOnce) {
  Fixture f;
  f.g.inputs.push_back(f.x);
  EXPECT_TRUE(failsWith(f.g, "graph input value 'x' is listed twice"));
  Fixture h;
  h.g.inputs.push_back(h.relu);
  EXPECT_TRUE(failsWith(h.g, "graph input value 'relu' is not of kind input"));
  Fixture k;
  k.g.inputs.clear();
  EXPECT_TRUE(failsWith(k.g, "value 'x' is of kind input but is not a graph input"));
  Fixture m;
  m.g.inputs.push_back(99);
  EXPECT_TRUE(failsWith(m.g, "graph input value id 99 does not exist"));
}

TEST(Verifier, ValueKindsMatchTheGraphsTables) {
  Fixture f;
  f.g.value(f.c).kind = ValueKind::Input;
  EXPECT_TRUE(failsWith(f.g, "value 'c' has a constant tensor but is not a constant"));
  Fixture h;
  h.g.value(h.shape).kind = ValueKind::Constant;
  EXPECT_TRUE(failsWith(h.g, "value 'shape' is a constant without a tensor"));
  Fixture k;
  k.g.value(k.x).producer = 0;
  EXPECT_TRUE(failsWith(k.g, "value 'x' is not a node output but names producer node 0"));
}

TEST(Verifier, ConstantTypesMatchTheirTensors) {
  Fixture f;
  f.g.value(f.c).type = TensorType{DType::F32, {5}};
  EXPECT_TRUE(failsWith(f.g, "constant value 'c' has type f32[5] but its tensor is f32[4]"));
  Fixture h;
  h.g.value(h.c).type = TensorType{DType::F64, {4}};
  EXPECT_TRUE(failsWith(h.g, "constant value 'c' has type f64[4] but its tensor is f32[4]"));
}

TEST(Verifier, SymConstantsAreI64OfMatchingLength) {
  Fixture f;
  f.g.value(f.shape).type = TensorType{DType::I64, {3}};
  EXPECT_TRUE(failsWith(f.g, "symbolic constant value 'shape' has type i64[3] but 2 elements"));
  Fixture h;
  h.g.value(h.shape).type = TensorType{DType::I32, {2}};
  EXPECT_TRUE(failsWith(h.g, "symbolic constant value 'shape' has type i32[2]"));
  Fixture k;
  k.g.value(k.shape).type = TensorType{DType::I64, {}};
  EXPECT_TRUE(failsWith(k.g, "symbolic constant value 'shape' has type i64[] but 2 elements"));
  Fixture m;
  m.g.value(m.shape).type = TensorType{DType::I64, {1, 2}};
  EXPECT_TRUE(failsWith(m.g, "has type i64[1, 2]"));
}

TEST(Verifier, NodeOutputsAreProducedExactlyOnce) {
  Fixture f;
  f.g.mutableNodes()[1].outputs.push_back(f.relu);
  VerifyFailure where;
  EXPECT_TRUE(
      failsWith(f.g, "output 1 (value 'relu') is also produced by node 0", structural(), &where));
  EXPECT_EQ(where.node, 1);
  Fixture h;
  h.g.mutableNodes()[2].outputs.clear();
  EXPECT_TRUE(failsWith(h.g, "value 'reshaped' is a node output but no node produces it"));
  Fixture k;
  k.g.value(k.add).producer = 0;
  EXPECT_TRUE(failsWith(k.g, "output 0 (value 'add') records producer node 0"));
  Fixture m;
  m.g.mutableNodes()[0].outputs.push_back(m.x);
  EXPECT_TRUE(failsWith(m.g, "output 1 (value 'x') is not of kind node output"));
  Fixture n;
  n.g.addValue("orphan", TensorType{}, ValueKind::NodeOutput);
  EXPECT_TRUE(failsWith(n.g, "value 'orphan' is a node output but no node produces it"));
}

TEST(Verifier, InputsAreDefinedBeforeUse) {
  Fixture f;
  std::swap(f.g.mutableNodes()[0], f.g.mutableNodes()[1]); // Add now comes before Relu
  f.g.value(f.relu).producer = 1;
  f.g.value(f.add).producer = 0;
  VerifyFailure where;
  EXPECT_TRUE(failsWith(f.g,
                        "node 'add_node' (Add): input 0 (value 'relu') is produced by node 1, "
                        "which does not come before it (nodes must be in topological order)",
                        structural(), &where));
  EXPECT_EQ(where.node, 0);
  Fixture h;
  h.g.mutableNodes()[0].inputs[0] = h.relu; // its own output
  EXPECT_TRUE(failsWith(h.g, "input 0 (value 'relu') is produced by node 0"));
  Fixture k;
  k.g.mutableNodes()[0].inputs[0] = 1234;
  EXPECT_TRUE(failsWith(k.g, "input 0 is value id 1234, which does not exist"));
  Fixture m; // absent optional inputs are fine
  m.g.mutableNodes()[0].inputs.push_back(kNoValue);
  EXPECT_TRUE(verifyGraph(m.g, structural()).ok());
}

TEST(Verifier, AttributesAreSane) {
  Fixture f;
  f.g.mutableNodes()[0].attrs.set("", int64_t(1));
  EXPECT_TRUE(failsWith(f.g, "an attribute has an empty name"));
  Fixture h;
  h.g.mutableNodes()[0].attrs.set("value", Tensor());
  EXPECT_TRUE(failsWith(h.g, "tensor attribute 'value' holds no tensor"));
}

TEST(Verifier, GraphOutputsAreDefined) {
  Fixture f;
  f.g.outputs.push_back(kNoValue);
  EXPECT_TRUE(failsWith(f.g, "graph output 1 is value id -1, which does not exist"));
  Fixture h; // an output may be an input or a constant
  h.g.outputs = {h.x, h.c, h.shape, h.x};
  EXPECT_TRUE(verifyGraph(h.g, structural()).ok());
}

TEST(Verifier, SymbolRangesAreNonEmpty) {
  Fixture f;
  f.g.symbols["N"] = SymRange{3, 2};
  EXPECT_TRUE(failsWith(f.g, "range of symbol 'N' is empty: min 3 > max 2"));
}

TEST(Verifier, ReinfersOutputTypes) {
  Fixture f;
  f.g.value(f.relu).type.shape[1] = 5;
  VerifyFailure where;
  EXPECT_TRUE(failsWith(f.g,
                        "node 'relu_node' (Relu): output 0 (value 'relu') has type f32[N, 5] but "
                        "shape inference gives f32[N, 4]",
                        withInfer(), &where));
  EXPECT_EQ(where.node, 0);
  // Structural checks alone do not look at inference.
  EXPECT_TRUE(verifyGraph(f.g, structural()).ok());

  Fixture h;
  h.g.value(h.add).type.dtype = DType::F16;
  EXPECT_TRUE(failsWith(h.g, "output 0 (value 'add') has type f16[N, 4]", withInfer()));
  Fixture k;
  k.g.value(k.add).type.shape.push_back(1);
  EXPECT_TRUE(
      failsWith(k.g, "has type f32[N, 4, 1] but shape inference gives f32[N, 4]", withInfer()));
}

TEST(Verifier, DimsProvablyEqualUnderRangesMatch) {
  // With N in [4, 4], a recorded 4 equals the re-inferred N; with N in [1, 16] it does not.
  Fixture f;
  f.g.value(f.relu).type.shape[0] = 4;
  EXPECT_TRUE(failsWith(f.g,
                        "output 0 (value 'relu') has type f32[4, 4] but shape inference "
                        "gives f32[N, 4]",
                        withInfer()));
  f.g.symbols["N"] = SymRange{4, 4};
  Status st = verifyGraph(f.g, withInfer());
  EXPECT_TRUE(st.ok()) << st.error().render();
}

TEST(Verifier, ReinferenceUsesSymbolicConstantContents) {
  // Reshape's output comes from the symconst {4, N}: a wrong recorded dim is caught.
  Fixture f;
  f.g.value(f.reshaped).type.shape[1] = SymInt::symbol("M");
  EXPECT_TRUE(
      failsWith(f.g, "has type f32[4, M] but shape inference gives f32[4, N]", withInfer()));
}

TEST(Verifier, ReinferenceUsesIntegerConstantContents) {
  Fixture f;
  ValueId s = f.g.addConstant("s2", Tensor::fromInts(DType::I64, {2}, {2, 8}));
  f.addNode(OpKind::Reshape, {f.x, s}, "r2", TensorType{DType::F32, {2, 8}});
  EXPECT_TRUE(verifyGraph(f.g, withInfer()).ok());
  f.g.value(f.g.nodes().back().outputs[0]).type.shape[1] = 9;
  EXPECT_TRUE(
      failsWith(f.g, "has type f32[2, 9] but shape inference gives f32[2, 8]", withInfer()));
}

TEST(Verifier, FreshSymbolsMatchAnyDim) {
  // NonZero's second dim is data-dependent: any recorded dim is accepted; the first is not.
  Fixture f;
  ValueId nz =
      f.addNode(OpKind::NonZero, {f.x}, "nz", TensorType{DType::I64, {2, SymInt::symbol("K")}});
  EXPECT_TRUE(verifyGraph(f.g, withInfer()).ok());
  f.g.value(nz).type.shape[1] = 17;
  EXPECT_TRUE(verifyGraph(f.g, withInfer()).ok());
  f.g.value(nz).type.shape[0] = 3;
  EXPECT_TRUE(failsWith(f.g, "output 0 (value 'nz') has type i64[3, 17]", withInfer()));
  // A Reshape whose target is unknown gets fresh dims too.
  Fixture h;
  ValueId shapeIn = h.g.addInput("target", TensorType{DType::I64, {2}});
  h.addNode(OpKind::Reshape, {h.x, shapeIn}, "r", TensorType{DType::F32, {SymInt::symbol("A"), 7}});
  EXPECT_TRUE(verifyGraph(h.g, withInfer()).ok());
}

TEST(Verifier, UnsupportedOpsAndInferenceErrors) {
  Fixture f;
  f.addNode(OpKind::Sigmoid, {f.x}, "sig", TensorType{DType::F32, {SymInt::symbol("N"), 4}});
  EXPECT_TRUE(
      failsWith(f.g, "op 'Sigmoid' is not supported (it has no shape inference)", withInfer()));
  Fixture h;
  h.addNode(OpKind::Add, {h.x, h.shape}, "bad", TensorType{DType::F32, {SymInt::symbol("N"), 4}});
  EXPECT_TRUE(failsWith(h.g, "node 'bad_node' (Add): shape inference fails: input dtypes differ",
                        withInfer()));
  Fixture k; // more outputs than inference gives
  k.g.mutableNodes()[0].outputs.push_back(
      k.g.addValue("extra", TensorType{}, ValueKind::NodeOutput));
  k.g.value(k.g.mutableNodes()[0].outputs.back()).producer = 0;
  VerifyOptions noSchema = withInfer(); // the schema check would catch Relu's second output
  noSchema.checkSchema = false;
  EXPECT_TRUE(failsWith(k.g, "shape inference gives 1 outputs, the node has 2", noSchema));
}

TEST(Verifier, DefaultOptionsUseTheRegistry) {
  // With the registry, an op without inference is unsupported; an empty graph verifies.
  Graph empty;
  EXPECT_TRUE(verifyGraph(empty).ok());
  Fixture f;
  if (!inferFnFor(OpKind::Relu)) {
    EXPECT_TRUE(failsWith(f.g, "op 'Relu' is not supported", VerifyOptions{}));
  }
}

// --- The ONNX schema check (structural, before re-inference)

TEST(Verifier, InputCountsAreWithinTheSchema) {
  Fixture f; // Add needs 2 inputs
  f.g.mutableNodes()[1].inputs.pop_back();
  VerifyFailure where;
  EXPECT_TRUE(failsWith(f.g, "node 'add_node' (Add): needs 2 inputs, got 1", structural(), &where));
  EXPECT_EQ(where.node, 1);
  EXPECT_FALSE(where.inferenceBug);
  Fixture h; // Reshape takes at most 2
  h.g.mutableNodes()[2].inputs.push_back(h.shape);
  EXPECT_TRUE(failsWith(h.g, "node 'reshaped_node' (Reshape): needs 2 inputs, got 3"));
  Fixture k;
  k.g.mutableNodes()[2].op = OpKind::Slice;
  EXPECT_TRUE(failsWith(k.g, "node 'reshaped_node' (Slice): needs at least 3 inputs, got 2"));
  Fixture m;
  m.g.mutableNodes()[2].op = OpKind::Slice;
  m.g.mutableNodes()[2].inputs = {m.add, m.shape, m.shape, m.shape, m.shape, m.shape};
  EXPECT_TRUE(failsWith(m.g, "node 'reshaped_node' (Slice): takes at most 5 inputs, got 6"));
  // Variadic inputs, and absent optional inputs count.
  Fixture v;
  v.g.mutableNodes()[1].op = OpKind::Sum;
  v.g.mutableNodes()[1].inputs = {v.relu, v.c, v.relu, v.c};
  EXPECT_TRUE(verifyGraph(v.g, structural()).ok());
  Fixture a; // trailing absent inputs do not count
  a.g.mutableNodes()[0].inputs.push_back(kNoValue);
  a.g.mutableNodes()[0].inputs.push_back(kNoValue);
  EXPECT_TRUE(verifyGraph(a.g, structural()).ok());
  a.g.mutableNodes()[0].inputs.push_back(a.x);
  EXPECT_TRUE(failsWith(a.g, "node 'relu_node' (Relu): needs 1 input, got 4"));
  Fixture o;
  o.g.mutableNodes()[2].op = OpKind::Slice;
  o.g.mutableNodes()[2].inputs = {o.add, o.shape, o.shape, kNoValue, o.shape};
  EXPECT_TRUE(verifyGraph(o.g, structural()).ok());
}

TEST(Verifier, RequiredInputsArePresent) {
  Fixture f; // Slice needs data, starts and ends; a trailing absent one is a missing input
  f.g.mutableNodes()[2].op = OpKind::Slice;
  f.g.mutableNodes()[2].inputs = {f.add, kNoValue, f.shape};
  EXPECT_TRUE(failsWith(f.g, "node 'reshaped_node' (Slice): input 1 is required but absent"));
  Fixture h;
  h.g.mutableNodes()[2].inputs[1] = kNoValue;
  EXPECT_TRUE(failsWith(h.g, "node 'reshaped_node' (Reshape): needs 2 inputs, got 1"));
}

TEST(Verifier, OutputCountsAreWithinTheSchema) {
  Fixture f;
  f.g.mutableNodes()[0].outputs.push_back(
      f.g.addValue("extra", TensorType{DType::F32, {4}}, ValueKind::NodeOutput));
  f.g.value(f.g.mutableNodes()[0].outputs.back()).producer = 0;
  EXPECT_TRUE(failsWith(f.g, "node 'relu_node' (Relu): needs 1 output, got 2"));
}

TEST(Verifier, AttributesMatchTheSchema) {
  Fixture f;
  f.g.mutableNodes()[0].attrs.set("alpha", 0.5);
  EXPECT_TRUE(failsWith(f.g, "node 'relu_node' (Relu): unknown attribute 'alpha'"));
  Fixture h;
  h.g.mutableNodes()[2].attrs.set("allowzero", 1.0);
  EXPECT_TRUE(failsWith(
      h.g, "node 'reshaped_node' (Reshape): attribute 'allowzero' must be int, got float"));
  Fixture t; // Transpose perm of floats
  t.g.mutableNodes()[0].op = OpKind::Transpose;
  t.g.mutableNodes()[0].attrs.set("perm", std::vector<double>{1.0, 0.0});
  EXPECT_TRUE(
      failsWith(t.g, "node 'relu_node' (Transpose): attribute 'perm' must be ints, got floats"));
  Fixture c; // Cast needs `to`
  c.g.mutableNodes()[0].op = OpKind::Cast;
  EXPECT_TRUE(failsWith(c.g, "node 'relu_node' (Cast): missing required attribute 'to'"));
  c.g.mutableNodes()[0].attrs.set("to", int64_t(1));
  EXPECT_TRUE(verifyGraph(c.g, structural()).ok());
  // An int where a float is expected (Attrs::getFloat converts it); never syms for ints.
  Fixture l;
  l.g.mutableNodes()[0].op = OpKind::LeakyRelu;
  l.g.mutableNodes()[0].attrs.set("alpha", int64_t(1));
  EXPECT_TRUE(verifyGraph(l.g, structural()).ok());
  l.g.mutableNodes()[0].attrs.set("alpha", std::vector<double>{1.0});
  EXPECT_TRUE(
      failsWith(l.g, "node 'relu_node' (LeakyRelu): attribute 'alpha' must be float, got floats"));
  Fixture s;
  s.g.mutableNodes()[0].op = OpKind::Transpose;
  s.g.mutableNodes()[0].attrs.set("perm", std::vector<SymInt>{1, 0});
  EXPECT_TRUE(
      failsWith(s.g, "node 'relu_node' (Transpose): attribute 'perm' must be ints, got syms"));
  // Attributes of the opset-13 form and of the newest form are both accepted.
  Fixture r;
  r.g.mutableNodes()[0].op = OpKind::ReduceMean;
  r.g.mutableNodes()[0].attrs.set("axes", std::vector<int64_t>{1});
  r.g.mutableNodes()[0].attrs.set("noop_with_empty_axes", int64_t(0));
  EXPECT_TRUE(verifyGraph(r.g, structural()).ok());
}

TEST(Verifier, SchemaCheckCanBeTurnedOff) {
  Fixture f;
  f.g.mutableNodes()[0].attrs.set("anything", std::string("x"));
  f.g.mutableNodes()[1].inputs.pop_back();
  VerifyOptions o = structural();
  o.checkSchema = false;
  EXPECT_TRUE(verifyGraph(f.g, o).ok());
  EXPECT_FALSE(verifyGraph(f.g, structural()).ok());
}

TEST(Verifier, SchemaErrorsInTextAreUserErrorsAtTheNode) {
  // With the registry's inference, these used to reach COIL_CHECK in the inference functions.
  auto g =
      parseGraph("graph @g(%x: f32[2, 3]) -> (%y) {\n  %y = Slice(%x) : f32[2, 3]\n}\n", "s.coil");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().kind(), ErrorKind::User) << g.error().render();
  EXPECT_EQ(g.error().render(),
            "error: s.coil:2:3: node of value 'y' (Slice): needs at least 3 inputs, got 1");
  auto t = parseGraph("graph @g(%x: f32[2, 3]) -> (%y) {\n  %y = Transpose(%x) {perm = [1.0, "
                      "0.0]} : f32[3, 2] name \"tr\"\n}\n",
                      "t.coil");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().kind(), ErrorKind::User) << t.error().render();
  EXPECT_EQ(t.error().render(),
            "error: t.coil:2:3: node 'tr' (Transpose): attribute 'perm' must be ints, got floats");
  auto ok = parseGraph("graph @g(%x: f32[2, 3]) -> (%y) {\n  %y = Transpose(%x) {perm = [1, 0]} "
                       ": f32[3, 2]\n}\n",
                       "ok.coil");
  EXPECT_TRUE(ok.ok()) << ok.error().render();
}

} // namespace
