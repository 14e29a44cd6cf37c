// Tests of the ONNX operator schema table of the ir layer (ir/OpSchema.h).
#include "ir/OpSchema.h"

#include <gtest/gtest.h>

using namespace coil;

namespace {

TEST(OpSchema, MapsOnnxAttributeTypesToAttrKinds) {
  EXPECT_EQ(attrKindFromOnnxType(1), AttrKind::Float);
  EXPECT_EQ(attrKindFromOnnxType(2), AttrKind::Int);
  EXPECT_EQ(attrKindFromOnnxType(3), AttrKind::String);
  EXPECT_EQ(attrKindFromOnnxType(4), AttrKind::Tensor);
  EXPECT_EQ(attrKindFromOnnxType(6), AttrKind::Floats);
  EXPECT_EQ(attrKindFromOnnxType(7), AttrKind::Ints);
  EXPECT_EQ(attrKindFromOnnxType(8), AttrKind::Strings);
  EXPECT_EQ(attrKindFromOnnxType(5), std::nullopt);  // graph
  EXPECT_EQ(attrKindFromOnnxType(11), std::nullopt); // sparse tensor
  EXPECT_EQ(attrKindFromOnnxType(0), std::nullopt);
}

TEST(OpSchema, KindAcceptance) {
  EXPECT_TRUE(attrKindAccepts(AttrKind::Ints, AttrKind::Ints));
  // syms never stands for ints: inference reads ints with Attrs::getInts, which rejects syms.
  EXPECT_FALSE(attrKindAccepts(AttrKind::Ints, AttrKind::Syms));
  EXPECT_TRUE(attrKindAccepts(AttrKind::Float, AttrKind::Int));
  EXPECT_FALSE(attrKindAccepts(AttrKind::Int, AttrKind::Float));
  EXPECT_FALSE(attrKindAccepts(AttrKind::Ints, AttrKind::Floats));
  EXPECT_FALSE(attrKindAccepts(AttrKind::Floats, AttrKind::Ints));
  EXPECT_FALSE(attrKindAccepts(AttrKind::Syms, AttrKind::Ints));
  EXPECT_FALSE(attrKindAccepts(AttrKind::String, AttrKind::Strings));
}

TEST(OpSchema, VersionsAreSortedAndResolvedByOpset) {
  const auto &vs = opSchemaVersions(OpKind::Slice);
  ASSERT_GE(vs.size(), 3u);
  for (size_t i = 1; i < vs.size(); ++i) EXPECT_LT(vs[i - 1].since, vs[i].since);
  // Slice-1 takes starts and ends as attributes; from Slice-10 they are inputs.
  const OpSchema *s1 = opSchema(OpKind::Slice, 9);
  ASSERT_NE(s1, nullptr);
  EXPECT_EQ(s1->since, 1);
  EXPECT_EQ(s1->minInputs, 1);
  ASSERT_NE(s1->findAttr("starts"), nullptr);
  EXPECT_EQ(s1->findAttr("starts")->kind, AttrKind::Ints);
  EXPECT_TRUE(s1->findAttr("starts")->required);
  const OpSchema *s13 = opSchema(OpKind::Slice, 13);
  ASSERT_NE(s13, nullptr);
  EXPECT_EQ(s13->since, 13);
  EXPECT_EQ(s13->minInputs, 3);
  EXPECT_EQ(s13->maxInputs, 5);
  EXPECT_EQ(s13->findAttr("starts"), nullptr);
  EXPECT_EQ(opSchema(OpKind::Slice, 0), nullptr);
  EXPECT_EQ(opSchema(OpKind::Slice, newestOpset()), &vs.back());
  EXPECT_GE(newestOpset(), 21);
}

TEST(OpSchema, AttributesCarryKindsAndRequiredFlags) {
  const OpSchema *cast = opSchema(OpKind::Cast, newestOpset());
  ASSERT_NE(cast, nullptr);
  const OpAttrSchema *to = cast->findAttr("to");
  ASSERT_NE(to, nullptr);
  EXPECT_EQ(to->kind, AttrKind::Int);
  EXPECT_TRUE(to->required);
  const OpSchema *leaky = opSchema(OpKind::LeakyRelu, newestOpset());
  ASSERT_NE(leaky, nullptr);
  ASSERT_NE(leaky->findAttr("alpha"), nullptr);
  EXPECT_EQ(leaky->findAttr("alpha")->kind, AttrKind::Float);
  EXPECT_FALSE(leaky->findAttr("alpha")->required);
  EXPECT_EQ(leaky->findAttr("beta"), nullptr);
  const OpSchema *cos = opSchema(OpKind::ConstantOfShape, newestOpset());
  ASSERT_NE(cos, nullptr);
  EXPECT_EQ(cos->findAttr("value")->kind, AttrKind::Tensor);
  const OpSchema *lstm = opSchema(OpKind::LSTM, newestOpset());
  ASSERT_NE(lstm, nullptr);
  EXPECT_EQ(lstm->findAttr("activations")->kind, AttrKind::Strings);
  EXPECT_EQ(lstm->findAttr("activation_alpha")->kind, AttrKind::Floats);
  EXPECT_EQ(lstm->findAttr("direction")->kind, AttrKind::String);
  for (const OpSchema &s : opSchemaVersions(OpKind::Conv))
    for (size_t i = 1; i < s.attrs.size(); ++i) EXPECT_LT(s.attrs[i - 1].name, s.attrs[i].name);
}

TEST(OpSchema, VariadicArityIsUnbounded) {
  const OpSchema *concat = irOpSchema(OpKind::Concat);
  ASSERT_NE(concat, nullptr);
  EXPECT_EQ(concat->minInputs, 1);
  EXPECT_EQ(concat->maxInputs, kAnyArity);
  const OpSchema *split = irOpSchema(OpKind::Split);
  ASSERT_NE(split, nullptr);
  EXPECT_EQ(split->maxOutputs, kAnyArity);
}

TEST(OpSchema, IrSchemaMergesTheSupportedOpsets) {
  // ReduceMean: `axes` is an attribute at opset 13 and an input from opset 18; the IR holds both.
  const OpSchema *rm = irOpSchema(OpKind::ReduceMean);
  ASSERT_NE(rm, nullptr);
  EXPECT_EQ(rm->since, 13);
  EXPECT_EQ(rm->minInputs, 1);
  EXPECT_EQ(rm->maxInputs, 2);
  ASSERT_NE(rm->findAttr("axes"), nullptr);
  EXPECT_EQ(rm->findAttr("axes")->kind, AttrKind::Ints);
  EXPECT_NE(rm->findAttr("noop_with_empty_axes"), nullptr);
  EXPECT_NE(rm->findAttr("keepdims"), nullptr);
  // Versions older than the one in effect at kMinIrOpset do not contribute: Slice-1's
  // attributes are gone.
  const OpSchema *slice = irOpSchema(OpKind::Slice);
  ASSERT_NE(slice, nullptr);
  EXPECT_EQ(slice->minInputs, 3);
  EXPECT_TRUE(slice->attrs.empty());
  // An attribute required by every version stays required.
  const OpSchema *cast = irOpSchema(OpKind::Cast);
  ASSERT_NE(cast, nullptr);
  EXPECT_TRUE(cast->findAttr("to")->required);
  // Every op of Ops.def is an ONNX op with a schema.
  for (size_t k = 0; k < kNumOps; ++k)
    EXPECT_NE(irOpSchema(OpKind(k)), nullptr) << opName(OpKind(k));
  EXPECT_EQ(irOpSchema(OpKind::NumOps), nullptr);
}

} // namespace
