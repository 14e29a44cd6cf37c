// Lowering of the Elementwise family (lower/ops/Elementwise.cpp): each op is lowered, evaluated
// by the Loop IR evaluator on random inputs and compared with the reference interpreter.
#include "LowerTestUtil.h"
#include "ir/Parser.h"
#include "lower/Lower.h"

#include <gtest/gtest.h>

using namespace coil;
using namespace coil::lowertest;

namespace {

const SymInt N = SymInt::symbol("N");
const std::vector<SymBindings> kSizes = {{{"N", 2}}, {{"N", 5}}};
const Tolerance kFloatTol{1e-5, 2e-5};

RandomOptions specials() {
  RandomOptions o;
  o.specials = true;
  return o;
}

void checkUnary(OpKind op, DType t, Attrs a = {}, RandomOptions o = specials(),
                Tolerance tol = kFloatTol) {
  GraphBuilder b;
  ValueId x = b.input("x", t, {N, 3});
  b.output(b.op(op, {x}, std::move(a)));
  checkGraph(b.g, kSizes, tol, o, std::string(opName(op)) + " " + std::string(dtypeName(t)));
}

TEST(ElementwiseLower, UnaryFloatMath) {
  const OpKind ops[] = {
      OpKind::Acos,       OpKind::Acosh,    OpKind::Asin,     OpKind::Asinh, OpKind::Atan,
      OpKind::Atanh,      OpKind::Ceil,     OpKind::Cos,      OpKind::Cosh,  OpKind::Erf,
      OpKind::Exp,        OpKind::Floor,    OpKind::Log,      OpKind::Round, OpKind::Sin,
      OpKind::Sinh,       OpKind::Sqrt,     OpKind::Tan,      OpKind::Tanh,  OpKind::Sigmoid,
      OpKind::Reciprocal, OpKind::Softsign, OpKind::Softplus, OpKind::Mish,  OpKind::HardSwish};
  for (OpKind op : ops) {
    checkUnary(op, DType::F32);
    checkUnary(op, DType::F64, {}, specials(), Tolerance{1e-12, 1e-12});
  }
  // f16 and bf16 compute in f32: within a 16-bit ulp of the reference.
  for (OpKind op : {OpKind::Exp, OpKind::Tanh, OpKind::Sigmoid, OpKind::Sqrt, OpKind::Mish}) {
    checkUnary(op, DType::F16, {}, specials(), Tolerance{1e-3, 1e-3});
    checkUnary(op, DType::BF16, {}, specials(), Tolerance{1e-2, 1e-2});
  }
}

TEST(ElementwiseLower, RoundIsHalfToEven) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::F32, {8});
  b.output(b.op(OpKind::Round, {x}));
  Tensor in = Tensor::fromDoubles(DType::F32, {8}, {0.5, 1.5, 2.5, -0.5, -1.5, 2.4999, -2.6, 3});
  expectMatchesInterpreter(b.g, {in}, Tolerance{0, 0});
}

TEST(ElementwiseLower, ActivationsWithAttributes) {
  checkUnary(OpKind::Relu, DType::F32);
  checkUnary(OpKind::LeakyRelu, DType::F32, attrs({{"alpha", 0.3}}));
  checkUnary(OpKind::LeakyRelu, DType::F32);
  checkUnary(OpKind::Elu, DType::F32, attrs({{"alpha", 0.7}}));
  checkUnary(OpKind::Selu, DType::F32);
  checkUnary(OpKind::Selu, DType::F32, attrs({{"alpha", 2.0}, {"gamma", 3.0}}));
  checkUnary(OpKind::Celu, DType::F32, attrs({{"alpha", 1.5}}));
  checkUnary(OpKind::ThresholdedRelu, DType::F32, attrs({{"alpha", 0.5}}));
  checkUnary(OpKind::HardSigmoid, DType::F32, attrs({{"alpha", 0.3}, {"beta", 0.4}}));
  checkUnary(OpKind::Swish, DType::F32, attrs({{"alpha", 1.25}}));
  checkUnary(OpKind::Gelu, DType::F32);
  checkUnary(OpKind::Gelu, DType::F32, attrs({{"approximate", std::string("tanh")}}));
  checkUnary(OpKind::Gelu, DType::F16, attrs({{"approximate", std::string("tanh")}}), specials(),
             Tolerance{2e-3, 2e-3});
  checkUnary(OpKind::Shrink, DType::F32, attrs({{"bias", 0.25}, {"lambd", 1.0}}));
  checkUnary(OpKind::Shrink, DType::I32, attrs({{"bias", 1.5}, {"lambd", 2.0}}));
  checkUnary(OpKind::Shrink, DType::U8, attrs({{"bias", 3.0}, {"lambd", 5.0}}));
}

TEST(ElementwiseLower, HalfActivationsKeepTheirConstants) {
  // f16 and bf16 activations compute in f32 with their attributes and formula constants in f32
  // and round once, as the interpreter (double, rounded once). With the constants typed f16
  // (HardSigmoid's 1/6 as 0.16663 in f16) results were one ulp off. Structure first: every
  // constant of the lowered body is f32 (the numerics below are within the evaluator's reach
  // only where an input lands near a rounding boundary).
  for (const char *dt : {"f16", "bf16"}) {
    std::string text = std::string("graph @g(%x: ") + dt +
                       "[8]) -> (%y) {\n  %y = HardSigmoid(%x) " +
                       "{alpha = 0.16666666666666666} : " + dt + "[8]\n}\n";
    auto g = parseGraph(text, "<test>");
    ASSERT_TRUE(g.ok()) << g.error().render();
    auto p = loop::lowerGraph(*g);
    ASSERT_TRUE(p.ok()) << p.error().render();
    int constants = 0;
    for (const loop::Node &n : p->nodes)
      if (const auto *pw = std::get_if<loop::PointwiseNode>(&n.kind))
        for (const loop::Stmt &st : pw->body.stmts)
          if (st.kind == loop::Stmt::Kind::Constant) {
            ++constants;
            EXPECT_EQ(st.dtype, DType::F32) << dt << ": constant " << st.number;
          }
    EXPECT_GT(constants, 0);
  }
  for (DType t : {DType::F16, DType::BF16}) {
    checkUnary(OpKind::HardSigmoid, t, attrs({{"alpha", 1.0 / 6}}), {}, Tolerance{0, 0});
    checkUnary(OpKind::LeakyRelu, t, {}, {}, Tolerance{0, 0});
    checkUnary(OpKind::Elu, t, attrs({{"alpha", 0.7}}), {}, Tolerance{0, 0});
    checkUnary(OpKind::Selu, t, {}, {}, Tolerance{0, 0});
    checkUnary(OpKind::Celu, t, attrs({{"alpha", 1.3}}), {}, Tolerance{0, 0});
    checkUnary(OpKind::ThresholdedRelu, t, attrs({{"alpha", 0.3}}), {}, Tolerance{0, 0});
    checkUnary(OpKind::Swish, t, attrs({{"alpha", 1.1}}), {}, Tolerance{0, 0});
    checkUnary(OpKind::Gelu, t, {}, {}, Tolerance{0, 0});
    checkUnary(OpKind::Gelu, t, attrs({{"approximate", std::string("tanh")}}), {}, Tolerance{0, 0});
  }
  checkUnary(OpKind::Shrink, DType::F16, attrs({{"bias", 0.1}, {"lambd", 0.3}}), {},
             Tolerance{0, 0}); // Shrink has no bf16
}

TEST(ElementwiseLower, UnaryNumericOnIntegers) {
  for (DType t : {DType::I64, DType::I32, DType::I8, DType::U8, DType::U32}) {
    for (OpKind op : {OpKind::Abs, OpKind::Neg, OpKind::Sign, OpKind::Relu})
      if (isSigned(t) || (op != OpKind::Neg && op != OpKind::Relu))
        checkUnary(op, t, {}, {}, Tolerance{0, 0});
  }
  for (DType t : {DType::I64, DType::I16, DType::U8, DType::U64})
    checkUnary(OpKind::BitwiseNot, t, {}, {}, Tolerance{0, 0});
  checkUnary(OpKind::Not, DType::Bool, {}, {}, Tolerance{0, 0});
  for (OpKind op : {OpKind::Abs, OpKind::Neg, OpKind::Sign}) checkUnary(op, DType::F32);
}

TEST(ElementwiseLower, IsNaNIsInf) {
  checkUnary(OpKind::IsNaN, DType::F32);
  checkUnary(OpKind::IsNaN, DType::F16);
  checkUnary(OpKind::IsInf, DType::F32);
  checkUnary(OpKind::IsInf, DType::F64, attrs({{"detect_negative", int64_t(0)}}));
  checkUnary(OpKind::IsInf, DType::F32, attrs({{"detect_positive", int64_t(0)}}));
  checkUnary(OpKind::IsInf, DType::F32,
             attrs({{"detect_positive", int64_t(0)}, {"detect_negative", int64_t(0)}}));
}

void checkBinary(OpKind op, DType ta, DType tb, std::vector<SymInt> sa, std::vector<SymInt> sb,
                 Attrs a = {}, RandomOptions o = {}, Tolerance tol = kFloatTol,
                 bool nonZeroRhs = false) {
  GraphBuilder b;
  ValueId x = b.input("a", ta, sa), y = b.input("b", tb, sb);
  b.output(b.op(op, {x, y}, std::move(a)));
  uint64_t seed = 11;
  for (const SymBindings &s : kSizes) {
    auto ins = randomInputs(b.g, s, seed++, o);
    if (nonZeroRhs)
      for (int64_t i = 0; i < ins[1].numel(); ++i)
        if (ins[1].getInt(i) == 0) ins[1].setInt(i, (i % 2) ? 3 : -3);
    expectMatchesInterpreter(b.g, ins, tol,
                             std::string(opName(op)) + " " + std::string(dtypeName(ta)));
  }
}

TEST(ElementwiseLower, ArithmeticWithBroadcasting) {
  for (OpKind op : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div}) {
    checkBinary(op, DType::F32, DType::F32, {N, 1, 4}, {3, 1}, {}, specials());
    checkBinary(op, DType::F16, DType::F16, {N, 4}, {4}, {}, {}, Tolerance{1e-3, 1e-3});
    checkBinary(op, DType::F64, DType::F64, {N, 4}, {}, {}, specials(), Tolerance{0, 1e-15});
    for (DType t : {DType::I64, DType::I32, DType::I8, DType::U8, DType::U16})
      checkBinary(op, t, t, {2, N}, {N}, {}, {}, Tolerance{0, 0}, op == OpKind::Div);
  }
  RandomOptions wide;
  wide.ilo = -100000, wide.ihi = 100000;
  checkBinary(OpKind::Mul, DType::I32, DType::I32, {N}, {N}, {}, wide, Tolerance{0, 0});
  checkBinary(OpKind::Mul, DType::I8, DType::I8, {N}, {N}, {}, wide, Tolerance{0, 0});
}

TEST(ElementwiseLower, ModBothFlavours) {
  for (int64_t fmod : {0, 1}) {
    for (DType t : {DType::I64, DType::I32, DType::I8, DType::U8})
      checkBinary(OpKind::Mod, t, t, {N, 3}, {3}, attrs({{"fmod", fmod}}), {}, Tolerance{0, 0},
                  true);
    checkBinary(OpKind::Mod, DType::F32, DType::F32, {N, 3}, {N, 3}, attrs({{"fmod", fmod}}));
    checkBinary(OpKind::Mod, DType::F64, DType::F64, {N, 3}, {N, 3}, attrs({{"fmod", fmod}}), {},
                Tolerance{0, 1e-14});
  }
}

TEST(ElementwiseLower, ComparisonsAndLogic) {
  for (OpKind op : {OpKind::Equal, OpKind::Greater, OpKind::GreaterOrEqual, OpKind::Less,
                    OpKind::LessOrEqual}) {
    checkBinary(op, DType::F32, DType::F32, {N, 3}, {1, 3}, {}, specials(), Tolerance{0, 0});
    checkBinary(op, DType::I32, DType::I32, {N, 3}, {3}, {}, {}, Tolerance{0, 0});
    checkBinary(op, DType::U64, DType::U64, {N}, {N}, {}, {}, Tolerance{0, 0});
  }
  for (OpKind op : {OpKind::And, OpKind::Or, OpKind::Xor})
    checkBinary(op, DType::Bool, DType::Bool, {N, 3}, {N, 1}, {}, {}, Tolerance{0, 0});
  checkBinary(OpKind::Equal, DType::Bool, DType::Bool, {N}, {N}, {}, {}, Tolerance{0, 0});
}

TEST(ElementwiseLower, BitwiseAndShifts) {
  RandomOptions big;
  big.ilo = -1000000, big.ihi = 1000000, big.uhi = 1000000;
  for (OpKind op : {OpKind::BitwiseAnd, OpKind::BitwiseOr, OpKind::BitwiseXor})
    for (DType t : {DType::I32, DType::I8, DType::U16, DType::U64})
      checkBinary(op, t, t, {N, 2}, {2}, {}, big, Tolerance{0, 0});
  for (std::string dir : {"LEFT", "RIGHT"})
    for (DType t : {DType::U8, DType::U16, DType::U32, DType::U64})
      checkBinary(OpKind::BitShift, t, t, {N, 3}, {3}, attrs({{"direction", dir}}), {},
                  Tolerance{0, 0});
}

TEST(ElementwiseLower, PowWithMixedTypes) {
  RandomOptions pos;
  pos.lo = 0.1, pos.hi = 3;
  checkBinary(OpKind::Pow, DType::F32, DType::F32, {N, 3}, {3}, {}, specials());
  checkBinary(OpKind::Pow, DType::F32, DType::I64, {N, 3}, {3});
  checkBinary(OpKind::Pow, DType::F64, DType::F32, {N, 3}, {N, 3}, {}, pos, Tolerance{0, 1e-15});
  checkBinary(OpKind::Pow, DType::F16, DType::F32, {N, 3}, {3}, {}, pos, Tolerance{1e-3, 1e-3});
  RandomOptions small;
  small.ilo = 1, small.ihi = 9, small.ulo = 0, small.uhi = 9;
  checkBinary(OpKind::Pow, DType::I32, DType::I32, {N, 3}, {3}, {}, small, Tolerance{0, 0});
  checkBinary(OpKind::Pow, DType::I64, DType::I8, {N, 3}, {3}, {}, small, Tolerance{0, 0});
  checkBinary(OpKind::Pow, DType::I64, DType::U8, {N, 3}, {3}, {}, small, Tolerance{0, 0});
  checkBinary(OpKind::Pow, DType::I32, DType::F32, {N, 3}, {3}, {}, pos, Tolerance{0, 0});
  {
    GraphBuilder b; // u64 exponents of 2^63 and more
    ValueId x = b.input("x", DType::I64, {4}), y = b.input("y", DType::U64, {4});
    b.output(b.op(OpKind::Pow, {x, y}));
    Tensor xs = Tensor::fromInts(DType::I64, {4}, {3, -3, 5, 2});
    Tensor ys = Tensor::fromInts(DType::U64, {4}, {-1, INT64_MIN, 7, -2});
    expectMatchesInterpreter(b.g, {xs, ys}, Tolerance{0, 0});
  }
  // negative integer exponents: 1 / x**-y truncated
  RandomOptions neg;
  neg.ilo = -3, neg.ihi = 3;
  checkBinary(OpKind::Pow, DType::I32, DType::I32, {N, 3}, {3}, {}, neg, Tolerance{0, 0}, true);
}

TEST(ElementwiseLower, PRelu) {
  checkBinary(OpKind::PRelu, DType::F32, DType::F32, {N, 3, 2}, {3, 1}, {}, specials());
  checkBinary(OpKind::PRelu, DType::I32, DType::I32, {N, 3}, {3}, {}, {}, Tolerance{0, 0});
  checkBinary(OpKind::PRelu, DType::U32, DType::U32, {N, 3}, {1}, {}, {}, Tolerance{0, 0});
}

TEST(ElementwiseLower, Variadic) {
  for (OpKind op : {OpKind::Sum, OpKind::Mean, OpKind::Max, OpKind::Min}) {
    for (DType t : {DType::F32, DType::F16, DType::I32, DType::U8}) {
      if (!isFloat(t) && (op == OpKind::Sum || op == OpKind::Mean)) continue; // float-only ops
      GraphBuilder b;
      ValueId x = b.input("x", t, {N, 1, 3}), y = b.input("y", t, {4, 1}),
              z = b.input("z", t, {N, 4, 3});
      b.output(b.op(op, {x, y, z}));
      Tolerance tol = t == DType::F16 ? Tolerance{1e-3, 1e-3} : kFloatTol;
      if (!isFloat(t)) tol = Tolerance{0, 0};
      checkGraph(b.g, kSizes, tol, isFloat(t) ? specials() : RandomOptions{},
                 std::string(opName(op)) + " " + std::string(dtypeName(t)));
    }
    GraphBuilder one;
    ValueId x = one.input("x", DType::F32, {N});
    one.output(one.op(op, {x}));
    checkGraph(one.g, kSizes, Tolerance{0, 0});
  }
}

TEST(ElementwiseLower, WhereAndClip) {
  {
    GraphBuilder b;
    ValueId c = b.input("c", DType::Bool, {N, 1}), x = b.input("x", DType::F32, {3}),
            y = b.input("y", DType::F32, {N, 3});
    b.output(b.op(OpKind::Where, {c, x, y}));
    checkGraph(b.g, kSizes, Tolerance{0, 0}, specials());
  }
  for (DType t : {DType::F32, DType::I32, DType::U8}) {
    GraphBuilder b;
    ValueId x = b.input("x", t, {N, 3}), lo = b.input("lo", t, {}), hi = b.input("hi", t, {});
    b.output(b.op(OpKind::Clip, {x, lo, hi}));
    b.output(b.op(OpKind::Clip, {x, kNoValue, hi}));
    b.output(b.op(OpKind::Clip, {x, lo}));
    b.output(b.op(OpKind::Clip, {x}));
    checkGraph(b.g, kSizes, Tolerance{0, 0}, isFloat(t) ? specials() : RandomOptions{});
  }
}

TEST(ElementwiseLower, IdentityAndDropout) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::F32, {N, 3});
  b.output(b.op(OpKind::Identity, {x}));
  auto d = b.node(OpKind::Dropout, {x}, {}, 2);
  ASSERT_EQ(d.size(), 2u);
  b.output(d[0]);
  b.output(d[1]);
  checkGraph(b.g, kSizes, Tolerance{0, 0});
}

TEST(ElementwiseLower, CastsBetweenAllTypes) {
  const DType all[] = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64,
                       DType::I32, DType::I16, DType::I8,  DType::U64,  DType::U32,
                       DType::U16, DType::U8,  DType::Bool};
  RandomOptions wide;
  wide.lo = -70000, wide.hi = 70000;
  wide.ilo = -70000, wide.ihi = 70000, wide.uhi = 70000;
  for (DType from : all)
    for (DType to : all) {
      GraphBuilder b;
      ValueId x = b.input("x", from, {N, 3});
      b.output(b.op(OpKind::Cast, {x}, attrs({{"to", std::string(dtypeName(to))}})));
      ValueId like = b.constant("like", Tensor(to, {1}));
      b.output(b.op(OpKind::CastLike, {x, like}));
      RandomOptions o = isFloat(from) && !isFloat(to) ? wide : RandomOptions{};
      checkGraph(b.g, kSizes, Tolerance{0, 0}, o,
                 "cast " + std::string(dtypeName(from)) + " -> " + std::string(dtypeName(to)));
    }
  // integers beyond 2^24 and 2^53 round once to f32
  GraphBuilder b;
  ValueId x = b.input("x", DType::I64, {4});
  b.output(b.op(OpKind::Cast, {x}, attrs({{"to", std::string("f32")}})));
  b.output(b.op(OpKind::Cast, {x}, attrs({{"to", std::string("f16")}})));
  Tensor in = Tensor::fromInts(
      DType::I64, {4},
      {(int64_t(1) << 53) + 1, (int64_t(1) << 24) + 1, -(int64_t(1) << 60) - 3, 70001});
  expectMatchesInterpreter(b.g, {in}, Tolerance{0, 0});
}

TEST(ElementwiseLower, BitCast) {
  const std::pair<DType, DType> pairs[] = {{DType::F32, DType::I32}, {DType::I32, DType::F32},
                                           {DType::F16, DType::U16}, {DType::U16, DType::BF16},
                                           {DType::I8, DType::U8},   {DType::U8, DType::Bool},
                                           {DType::F64, DType::I64}, {DType::U64, DType::F64}};
  for (auto [from, to] : pairs) {
    GraphBuilder b;
    ValueId x = b.input("x", from, {N, 2});
    b.output(b.op(OpKind::BitCast, {x}, attrs({{"to", std::string(dtypeName(to))}})));
    RandomOptions o;
    o.uhi = 65535;
    checkGraph(b.g, kSizes, Tolerance{0, 0}, o,
               "bitcast " + std::string(dtypeName(from)) + " -> " + std::string(dtypeName(to)));
  }
}

TEST(ElementwiseLower, QuantizeDequantize) {
  RandomOptions o;
  o.lo = -40, o.hi = 40;
  // per tensor, with and without zero point, u8 and i8
  for (DType q : {DType::U8, DType::I8, DType::I16}) {
    GraphBuilder b;
    ValueId x = b.input("x", DType::F32, {N, 4});
    ValueId s = b.constant("s", Tensor::fromDoubles(DType::F32, {}, {0.37}));
    ValueId z = b.constant("z", Tensor::fromInts(q, {}, {q == DType::U8 ? 17 : -5}));
    ValueId y = b.op(OpKind::QuantizeLinear, {x, s, z});
    b.output(y);
    b.output(b.op(OpKind::DequantizeLinear, {y, s, z}));
    b.output(b.op(OpKind::QuantizeLinear, {x, s}));
    checkGraph(b.g, kSizes, Tolerance{0, 0}, o, "quantize " + std::string(dtypeName(q)));
  }
  // per axis
  {
    GraphBuilder b;
    ValueId x = b.input("x", DType::F32, {N, 3, 2});
    ValueId s = b.constant("s", Tensor::fromDoubles(DType::F32, {3}, {0.5, 0.25, 2}));
    ValueId z = b.constant("z", Tensor::fromInts(DType::U8, {3}, {0, 100, 255}));
    ValueId y = b.op(OpKind::QuantizeLinear, {x, s, z}, attrs({{"axis", int64_t(1)}}));
    b.output(y);
    b.output(b.op(OpKind::DequantizeLinear, {y, s, z}, attrs({{"axis", int64_t(-2)}})));
    checkGraph(b.g, kSizes, Tolerance{0, 0}, o, "per axis");
  }
  // blocked
  {
    GraphBuilder b;
    ValueId x = b.input("x", DType::F32, {2, 5});
    ValueId s = b.constant("s", Tensor::fromDoubles(DType::F32, {2, 3}, {0.5, 0.25, 2, 1, 3, 0.1}));
    ValueId z = b.constant("z", Tensor::fromInts(DType::I8, {2, 3}, {0, 10, -10, 3, 4, 5}));
    ValueId y = b.op(OpKind::QuantizeLinear, {x, s, z},
                     attrs({{"axis", int64_t(1)}, {"block_size", int64_t(2)}}));
    b.output(y);
    b.output(b.op(OpKind::DequantizeLinear, {y, s, z},
                  attrs({{"axis", int64_t(1)}, {"block_size", int64_t(2)}})));
    checkGraph(b.g, {{}}, Tolerance{0, 0}, o, "blocked");
  }
  // f16 scale, dequantize to f16; integer input
  {
    GraphBuilder b;
    ValueId x = b.input("x", DType::I32, {N, 3});
    ValueId s = b.constant("s", Tensor::fromDoubles(DType::F16, {}, {0.1}));
    b.output(b.op(OpKind::DequantizeLinear, {x, s}));
    checkGraph(b.g, kSizes, Tolerance{0, 0}, {}, "dequantize i32 f16");
  }
}

TEST(ElementwiseLower, DynamicQuantizeLinear) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::F32, {N, 4});
  auto outs = b.node(OpKind::DynamicQuantizeLinear, {x}, {}, 3);
  ASSERT_EQ(outs.size(), 3u);
  for (ValueId v : outs) b.output(v);
  RandomOptions o;
  o.lo = -5, o.hi = 9;
  checkGraph(b.g, kSizes, Tolerance{0, 0}, o);
  RandomOptions positive;
  positive.lo = 1, positive.hi = 2; // the range still includes 0
  checkGraph(b.g, kSizes, Tolerance{0, 0}, positive);
}

TEST(ElementwiseLower, ScalarConstantsBecomeLiterals) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::F32, {N, 3});
  ValueId h = b.input("h", DType::F16, {N});
  ValueId i = b.input("i", DType::I8, {N});
  ValueId u = b.input("u", DType::U64, {N});
  ValueId c = b.input("c", DType::Bool, {N, 1});
  b.output(b.op(OpKind::Mul, {x, b.constant("half", Tensor::scalar(DType::F32, 0.1))}));
  b.output(b.op(OpKind::Pow, {x, b.constant("two", Tensor::fromDoubles(DType::F32, {1}, {2}))}));
  b.output(b.op(OpKind::Sub, {b.constant("hk", Tensor::scalar(DType::F16, 0.3)), h}));
  b.output(b.op(OpKind::Add, {i, b.constant("ik", Tensor::fromInts(DType::I8, {}, {-100}))}));
  b.output(b.op(OpKind::Max, {u, b.constant("uk", Tensor::fromInts(DType::U64, {}, {-5}))}));
  b.output(b.op(OpKind::Where, {c, x, b.constant("ninf", Tensor::scalar(DType::F32, -INFINITY))}));
  b.output(b.op(OpKind::Clip, {x, b.constant("lo", Tensor::scalar(DType::F32, -0.5)),
                               b.constant("hi", Tensor::scalar(DType::F32, 0.25))}));
  checkGraph(b.g, kSizes, Tolerance{0, 0}, specials());
  auto p = loop::lowerGraph(b.g);
  ASSERT_TRUE(p.ok());
  for (const loop::Node &n : p->nodes)
    EXPECT_FALSE(std::holds_alternative<loop::ConstantNode>(n.kind)) << n.name;
  std::string text = loop::printLoopProgram(*p);
  EXPECT_NE(text.find("const f32 0.10000000149011612"), std::string::npos) << text;
  EXPECT_NE(text.find("const u64 18446744073709551611"), std::string::npos) << text;
  EXPECT_NE(text.find("const f32 -inf"), std::string::npos) << text;
}

TEST(ElementwiseLower, RandomBroadcasts) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 60; ++trial) {
    size_t rank = size_t(rng() % 4);
    std::vector<SymInt> sa, sb, sc;
    for (size_t d = 0; d < rank; ++d) {
      SymInt full = rng() % 3 == 0 ? N : SymInt(int64_t(2 + rng() % 3));
      // each operand has the full dim or 1
      sa.push_back(rng() % 3 ? full : SymInt(1));
      sb.push_back(rng() % 3 ? full : SymInt(1));
      sc.push_back(rng() % 3 ? full : SymInt(1));
    }
    // drop leading dims of b and c (aligned right)
    sb.erase(sb.begin(), sb.begin() + int64_t(rng() % (rank + 1)));
    sc.erase(sc.begin(), sc.begin() + int64_t(rng() % (rank + 1)));
    GraphBuilder b;
    ValueId x = b.input("x", DType::F32, sa), y = b.input("y", DType::F32, sb);
    ValueId c = b.input("c", DType::Bool, sc);
    ValueId sum = b.op(OpKind::Add, {x, y});
    b.output(sum);
    b.output(b.op(OpKind::Where, {c, sum, x}));
    b.output(b.op(OpKind::Max, {y, x, sum}));
    checkGraph(b.g, {{{"N", 1}}, {{"N", 4}}}, Tolerance{0, 0}, specials(),
               "trial " + std::to_string(trial));
  }
}

TEST(ElementwiseLower, ChainsShareNoState) {
  // A chain of ops over one dynamic input: every node is lowered and evaluated in order.
  GraphBuilder b;
  ValueId x = b.input("x", DType::F32, {N, 4});
  ValueId w = b.constant("w", Tensor::fromDoubles(DType::F32, {4}, {0.5, -1, 2, 0}));
  ValueId y = b.op(OpKind::Mul, {x, w});
  y = b.op(OpKind::Sigmoid, {y});
  ValueId c = b.op(OpKind::Greater, {y, b.constant("h", Tensor::scalar(DType::F32, 0.5))});
  y = b.op(OpKind::Where, {c, y, x});
  b.output(b.op(OpKind::Cast, {y}, attrs({{"to", std::string("f16")}})));
  checkGraph(b.g, kSizes, Tolerance{1e-3, 1e-3}, specials());
}

} // namespace
