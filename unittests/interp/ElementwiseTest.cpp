// Tests of the Elementwise family: inference and reference kernels.
#include "interp/Kernel.h"
#include "ir/Infer.h"

#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <optional>

using namespace coil;

namespace {

using Inputs = std::vector<std::optional<Tensor>>;

Node makeNode(OpKind op, size_t nIn, size_t nOut, Attrs attrs) {
  Node n;
  n.op = op;
  n.attrs = std::move(attrs);
  for (size_t i = 0; i < nIn; ++i) n.inputs.push_back(ValueId(i));
  for (size_t i = 0; i < nOut; ++i) n.outputs.push_back(ValueId(nIn + i));
  return n;
}

Expected<std::vector<TensorType>> infer(OpKind op, const std::vector<std::optional<TensorType>> &ts,
                                        Attrs attrs = {}, size_t nOut = 1,
                                        const std::vector<const Tensor *> &consts = {}) {
  Node n = makeNode(op, ts.size(), nOut, std::move(attrs));
  InferContext ctx{n, {}, {}, {}, [](const std::string &h) { return SymInt::symbol(h); }};
  for (size_t i = 0; i < ts.size(); ++i) {
    ctx.inputTypes.push_back(ts[i] ? &*ts[i] : nullptr);
    ctx.intValues.push_back(std::nullopt);
    ctx.constants.push_back(i < consts.size() ? consts[i] : nullptr);
  }
  return inferNode(ctx);
}

TensorType typeOf(const Tensor &t) {
  TensorType tt;
  tt.dtype = t.dtype();
  for (int64_t d : t.shape()) tt.shape.push_back(SymInt(d));
  return tt;
}

/// Runs the kernel of `op` and checks its results against the node's inference.
Expected<std::vector<Tensor>> run(OpKind op, const Inputs &ins, Attrs attrs = {}, size_t nOut = 1) {
  Node n = makeNode(op, ins.size(), nOut, attrs);
  std::vector<std::optional<TensorType>> types;
  for (const auto &t : ins)
    types.push_back(t ? std::optional<TensorType>(typeOf(*t)) : std::nullopt);
  std::vector<const Tensor *> consts;
  for (const auto &t : ins) consts.push_back(t ? &*t : nullptr);
  auto inferred = infer(op, types, attrs, nOut, consts);
  if (!inferred.ok()) return std::move(inferred).takeError();
  KernelFn fn = kernelFor(op);
  EXPECT_NE(fn, nullptr) << opName(op);
  KernelContext ctx{n, consts, &*inferred};
  auto r = fn(ctx);
  if (r.ok()) {
    EXPECT_GE(r->size(), nOut);
    for (size_t i = 0; i < nOut && i < r->size(); ++i)
      EXPECT_EQ(typeOf((*r)[i]), (*inferred)[i]) << opName(op) << " output " << i;
  }
  return r;
}

Tensor one(OpKind op, const Inputs &ins, Attrs attrs = {}) {
  auto r = run(op, ins, std::move(attrs));
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message());
  return r.ok() ? (*r)[0] : Tensor();
}

std::string errorOf(OpKind op, const Inputs &ins, Attrs attrs = {}) {
  auto r = run(op, ins, std::move(attrs));
  return r.ok() ? "<no error>" : r.error().message();
}

Tensor ints(DType t, Shape s, std::vector<int64_t> v) {
  return Tensor::fromInts(t, s, v);
}
Tensor dbls(DType t, Shape s, std::vector<double> v) {
  return Tensor::fromDoubles(t, s, v);
}
Tensor vec(DType t, std::vector<int64_t> v) {
  return ints(t, {int64_t(v.size())}, v);
}
Tensor fvec(DType t, std::vector<double> v) {
  return dbls(t, {int64_t(v.size())}, v);
}

Attrs attrs(std::initializer_list<std::pair<const char *, AttrValue>> kv) {
  Attrs a;
  for (auto &[k, v] : kv) a.set(k, v);
  return a;
}

constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

} // namespace

TEST(ElementwiseKernels, EveryOpOfTheFamilyIsRegistered) {
  int n = 0;
  for (size_t k = 0; k < kNumOps; ++k) {
    OpKind op = OpKind(k);
    if (opFamily(op) != OpFamily::Elementwise) continue;
    ++n;
    EXPECT_NE(inferFnFor(op), nullptr) << opName(op);
    EXPECT_NE(kernelFor(op), nullptr) << opName(op);
  }
  EXPECT_EQ(n, 75);
}

TEST(ElementwiseKernels, IntegerDivTruncatesTowardZero) {
  Tensor r =
      one(OpKind::Div, {vec(DType::I32, {7, -7, 7, -7, 1}), vec(DType::I32, {2, 2, -2, -2, 3})});
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{3, -3, -3, 3, 0}));
  r = one(OpKind::Div, {vec(DType::I64, {kI64Min}), vec(DType::I64, {-1})});
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{kI64Min})); // wraps
  r = one(OpKind::Div, {vec(DType::I8, {-128}), vec(DType::I8, {-1})});
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{-128}));
  // u64 values above 2^63 divide as unsigned.
  r = one(OpKind::Div, {vec(DType::U64, {-2}), vec(DType::U64, {2})});
  EXPECT_EQ(uint64_t(r.toInts()[0]), (~uint64_t(0) - 1) / 2);
  EXPECT_EQ(errorOf(OpKind::Div, {vec(DType::I32, {1, 2}), vec(DType::I32, {1, 0})}),
            "integer division by zero");
  // Floats divide by zero as IEEE.
  r = one(OpKind::Div, {fvec(DType::F32, {1, -1}), fvec(DType::F32, {0, 0})});
  EXPECT_EQ(r.getDouble(0), INFINITY);
  EXPECT_EQ(r.getDouble(1), -INFINITY);
}

TEST(ElementwiseKernels, ModSigns) {
  Tensor a = vec(DType::I32, {-7, 7, -7, 7, 6}), b = vec(DType::I32, {2, -2, -2, 2, 3});
  // fmod=0: floor modulo, the sign of the divisor.
  EXPECT_EQ(one(OpKind::Mod, {a, b}).toInts(), (std::vector<int64_t>{1, -1, -1, 1, 0}));
  // fmod=1: C fmod, the sign of the dividend.
  EXPECT_EQ(one(OpKind::Mod, {a, b}, attrs({{"fmod", int64_t(1)}})).toInts(),
            (std::vector<int64_t>{-1, 1, -1, 1, 0}));
  EXPECT_EQ(one(OpKind::Mod, {vec(DType::I64, {kI64Min}), vec(DType::I64, {-1})}).toInts(),
            (std::vector<int64_t>{0}));
  EXPECT_EQ(errorOf(OpKind::Mod, {vec(DType::U8, {5}), vec(DType::U8, {0})}),
            "integer modulo by zero");
  Tensor f = one(OpKind::Mod, {fvec(DType::F32, {-4.5, 4.5}), fvec(DType::F32, {2, -2})},
                 attrs({{"fmod", int64_t(1)}}));
  EXPECT_EQ(f.toDoubles(), (std::vector<double>{-0.5, 0.5}));
  f = one(OpKind::Mod, {fvec(DType::F32, {-4.5, 4.5}), fvec(DType::F32, {2, -2})});
  EXPECT_EQ(f.toDoubles(), (std::vector<double>{1.5, -1.5}));
}

TEST(ElementwiseKernels, IntegerWrapAround) {
  EXPECT_EQ(one(OpKind::Add, {vec(DType::I8, {127, -128}), vec(DType::I8, {1, -1})}).toInts(),
            (std::vector<int64_t>{-128, 127}));
  EXPECT_EQ(one(OpKind::Sub, {vec(DType::U8, {0}), vec(DType::U8, {1})}).toInts(),
            (std::vector<int64_t>{255}));
  EXPECT_EQ(one(OpKind::Mul, {vec(DType::I32, {65536}), vec(DType::I32, {65537})}).toInts(),
            (std::vector<int64_t>{65536}));
  EXPECT_EQ(one(OpKind::Abs, {vec(DType::I8, {-128, -5})}).toInts(),
            (std::vector<int64_t>{-128, 5}));
  EXPECT_EQ(one(OpKind::Neg, {vec(DType::I16, {-32768, 3})}).toInts(),
            (std::vector<int64_t>{-32768, -3}));
  EXPECT_EQ(one(OpKind::Add,
                {vec(DType::I64, {std::numeric_limits<int64_t>::max()}), vec(DType::I64, {1})})
                .toInts(),
            (std::vector<int64_t>{kI64Min}));
}

TEST(ElementwiseKernels, RoundHalfToEven) {
  Tensor r =
      one(OpKind::Round, {fvec(DType::F32, {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, 2.5001})});
  EXPECT_EQ(r.toDoubles(), (std::vector<double>{0, 2, 2, -0.0, -2, -2, 2, 3}));
  r = one(OpKind::Round, {fvec(DType::F16, {0.5, 1.5, 2.5, 3.5})});
  EXPECT_EQ(r.toDoubles(), (std::vector<double>{0, 2, 2, 4}));
}

TEST(ElementwiseKernels, MaxMinPropagateNaN) {
  Tensor a = fvec(DType::F32, {1, kNaN, 3}), b = fvec(DType::F32, {kNaN, 2, 1});
  Tensor mx = one(OpKind::Max, {a, b}), mn = one(OpKind::Min, {a, b});
  EXPECT_TRUE(std::isnan(mx.getDouble(0)) && std::isnan(mx.getDouble(1)));
  EXPECT_EQ(mx.getDouble(2), 3);
  EXPECT_TRUE(std::isnan(mn.getDouble(0)) && std::isnan(mn.getDouble(1)));
  EXPECT_EQ(mn.getDouble(2), 1);
  // NaN in the first input is not replaced by later inputs either.
  Tensor c =
      one(OpKind::Max, {fvec(DType::F64, {kNaN}), fvec(DType::F64, {5}), fvec(DType::F64, {7})});
  EXPECT_TRUE(std::isnan(c.getDouble(0)));
}

TEST(ElementwiseKernels, VariadicBroadcastsAllInputs) {
  Tensor a = dbls(DType::F32, {2, 1}, {1, 10}), b = fvec(DType::F32, {1, 2, 3});
  Tensor c = dbls(DType::F32, {}, {100});
  Tensor s = one(OpKind::Sum, {a, b, c});
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(s.toDoubles(), (std::vector<double>{102, 103, 104, 111, 112, 113}));
  Tensor m = one(OpKind::Mean, {a, b});
  EXPECT_EQ(m.toDoubles(), (std::vector<double>{1, 1.5, 2, 5.5, 6, 6.5}));
  // Integer Max/Min compare exactly, u64 as unsigned.
  Tensor u = one(OpKind::Max, {vec(DType::U64, {-1, 3}), vec(DType::U64, {1, 4})});
  EXPECT_EQ(u.toInts(), (std::vector<int64_t>{-1, 4}));
  Tensor single = one(OpKind::Min, {vec(DType::I32, {4, -2})});
  EXPECT_EQ(single.toInts(), (std::vector<int64_t>{4, -2}));
}

TEST(ElementwiseKernels, ClipWithAbsentBounds) {
  Tensor x = fvec(DType::F32, {-3, -1, 0, 1, 3, kNaN});
  Tensor r = one(OpKind::Clip, {x, std::nullopt, dbls(DType::F32, {}, {1.5})});
  EXPECT_EQ(r.getDouble(0), -3);
  EXPECT_EQ(r.getDouble(4), 1.5);
  EXPECT_TRUE(std::isnan(r.getDouble(5)));
  r = one(OpKind::Clip, {x, dbls(DType::F32, {}, {-2})});
  EXPECT_EQ(r.getDouble(0), -2);
  EXPECT_EQ(r.getDouble(4), 3);
  r = one(OpKind::Clip, {x});
  EXPECT_EQ(r.getDouble(0), -3);
  // min > max: every value becomes max.
  r = one(OpKind::Clip, {x, dbls(DType::F32, {}, {2}), dbls(DType::F32, {}, {1})});
  EXPECT_EQ(r.getDouble(0), 1);
  EXPECT_EQ(r.getDouble(4), 1);
  Tensor i = one(OpKind::Clip, {vec(DType::I64, {-5, 5, kI64Min}), ints(DType::I64, {}, {-1}),
                                ints(DType::I64, {}, {1})});
  EXPECT_EQ(i.toInts(), (std::vector<int64_t>{-1, 1, -1}));
  EXPECT_EQ(errorOf(OpKind::Clip, {x, fvec(DType::F32, {1, 2})}),
            "input 1 of Clip must be a scalar, got shape f32[2]");
}

TEST(ElementwiseKernels, BroadcastingWithRankDifferences) {
  std::vector<int64_t> av(24);
  for (int64_t i = 0; i < 24; ++i) av[size_t(i)] = i;
  Tensor a = ints(DType::I32, {2, 3, 4}, av);
  Tensor r = one(OpKind::Add, {a, vec(DType::I32, {100, 200, 300, 400})});
  EXPECT_EQ(r.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(r.getInt(5), 5 + 200);
  r = one(OpKind::Sub, {ints(DType::I32, {3, 1}, {10, 20, 30}), a});
  EXPECT_EQ(r.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(r.getInt(13), 10 - 13); // (1, 0, 1)
  EXPECT_EQ(r.getInt(17), 20 - 17); // (1, 1, 1)
  r = one(OpKind::Mul,
          {ints(DType::I32, {1, 3, 1}, {1, 2, 3}), ints(DType::I32, {2, 1, 1, 2}, {1, 2, 3, 4})});
  EXPECT_EQ(r.shape(), (Shape{2, 1, 3, 2}));
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{1, 2, 2, 4, 3, 6, 3, 4, 6, 8, 9, 12}));
  EXPECT_FALSE(run(OpKind::Add, {vec(DType::I32, {1, 2}), vec(DType::I32, {1, 2, 3})}).ok());
}

TEST(ElementwiseKernels, HalfPrecisionResultsRoundOnce) {
  // 1 + 2^-11 is a tie in f16: it rounds to even (1); 1 + 3 * 2^-11 rounds up.
  Tensor r = one(OpKind::Add, {fvec(DType::F16, {1, 1}), fvec(DType::F16, {0x1p-11, 3 * 0x1p-11})});
  EXPECT_EQ(r.toDoubles(), (std::vector<double>{1, 1 + 0x1p-9}));
  // Slightly above the tie: correct rounding goes up, though f32 would first round it to the tie.
  Tensor c = one(OpKind::Cast, {fvec(DType::F64, {1 + 0x1p-11 + 0x1p-40, 1 + 0x1p-8 + 0x1p-40})},
                 attrs({{"to", int64_t(10)}}));
  EXPECT_EQ(c.dtype(), DType::F16);
  EXPECT_EQ(c.getDouble(0), 1 + 0x1p-10);
  Tensor b =
      one(OpKind::Cast, {fvec(DType::F64, {1 + 0x1p-8, 1 + 0x1p-8 + 0x1p-40, 1 + 3 * 0x1p-8})},
          attrs({{"to", int64_t(16)}}));
  EXPECT_EQ(b.toDoubles(), (std::vector<double>{1, 1 + 0x1p-7, 1 + 0x1p-6}));
  // Overflow to infinity in f16.
  Tensor m = one(OpKind::Mul, {fvec(DType::F16, {60000}), fvec(DType::F16, {2})});
  EXPECT_EQ(m.getDouble(0), INFINITY);
  // bf16 math rounds the double result.
  Tensor e = one(OpKind::Exp, {fvec(DType::BF16, {1})});
  EXPECT_EQ(e.getDouble(0), 2.71875);
}

TEST(ElementwiseKernels, ComparisonsAreExact) {
  int64_t big = int64_t(1) << 53;
  Tensor r = one(OpKind::Greater, {vec(DType::I64, {big + 1, 5}), vec(DType::I64, {big, 5})});
  EXPECT_EQ(r.dtype(), DType::Bool);
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{1, 0}));
  r = one(OpKind::Equal, {vec(DType::I64, {big + 1}), vec(DType::I64, {big})});
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{0}));
  r = one(OpKind::Less, {vec(DType::U64, {1}), vec(DType::U64, {-1})}); // 2^64-1
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{1}));
  r = one(OpKind::Equal, {fvec(DType::F32, {kNaN, 1}), fvec(DType::F32, {kNaN, 1})});
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{0, 1}));
  r = one(OpKind::LessOrEqual, {fvec(DType::F32, {1, 2}), fvec(DType::F32, {1, 1})});
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{1, 0}));
  r = one(OpKind::Equal, {vec(DType::Bool, {1, 0}), vec(DType::Bool, {1, 1})});
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{1, 0}));
}

TEST(ElementwiseKernels, CastRules) {
  Tensor r = one(OpKind::Cast, {fvec(DType::F32, {-2.7, 2.7, 0.5})}, attrs({{"to", int64_t(6)}}));
  EXPECT_EQ(r.dtype(), DType::I32);
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{-2, 2, 0}));
  r = one(OpKind::Cast, {vec(DType::I32, {300, -1})}, attrs({{"to", int64_t(2)}}));
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{44, 255}));
  r = one(OpKind::Cast, {fvec(DType::F32, {0, -0.0, 0.1, kNaN})}, attrs({{"to", int64_t(9)}}));
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{0, 0, 1, 1}));
  // i64 -> f32 rounds once (2^60 + 2^36 + 1 is just above a tie).
  int64_t v = (int64_t(1) << 60) + (int64_t(1) << 36) + 1;
  r = one(OpKind::Cast, {vec(DType::I64, {v})}, attrs({{"to", int64_t(1)}}));
  EXPECT_EQ(r.dataAs<float>()[0], float(v));
  // f64 -> f32 beyond the largest float: to infinity past the rounding boundary only.
  double fmax = std::numeric_limits<float>::max();
  r = one(OpKind::Cast,
          {fvec(DType::F64, {1e300, -1e300, fmax * (1 + 0x1p-26), fmax * (1 + 0x1p-24)})},
          attrs({{"to", int64_t(1)}}));
  EXPECT_EQ(r.toDoubles(), (std::vector<double>{INFINITY, -INFINITY, fmax, INFINITY}));
  r = one(OpKind::CastLike, {vec(DType::U8, {3}), fvec(DType::F16, {0})});
  EXPECT_EQ(r.dtype(), DType::F16);
  EXPECT_EQ(r.getDouble(0), 3);
  EXPECT_EQ(errorOf(OpKind::Cast, {vec(DType::U8, {3})}, attrs({{"to", int64_t(8)}})),
            "attribute 'to': string tensors are not supported");
}

TEST(ElementwiseKernels, BitCastKeepsBits) {
  Tensor r = one(OpKind::BitCast, {fvec(DType::F32, {1.0, -2.0})}, attrs({{"to", int64_t(6)}}));
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{0x3f800000, int32_t(0xc0000000)}));
  EXPECT_EQ(errorOf(OpKind::BitCast, {fvec(DType::F32, {1.0})}, attrs({{"to", int64_t(7)}})),
            "BitCast needs dtypes of the same width, got f32 (32 bits) and i64 (64 bits)");
}

TEST(ElementwiseKernels, QuantizeLinearRoundsHalfToEvenAndSaturates) {
  Tensor x = fvec(DType::F32, {0, 5, 7, -5, 1000, -1000, 2.9});
  Tensor s = dbls(DType::F32, {}, {2});
  Tensor zp = ints(DType::U8, {}, {10});
  // x / 2 = 0, 2.5, 3.5, -2.5, 500, -500, 1.45 -> rint 0, 2, 4, -2, ... then + 10, saturate.
  Tensor r = one(OpKind::QuantizeLinear, {x, s, zp});
  EXPECT_EQ(r.dtype(), DType::U8);
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{10, 12, 14, 8, 255, 0, 11}));
  r = one(OpKind::QuantizeLinear, {x, s, ints(DType::I8, {}, {-1})});
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{-1, 1, 3, -3, 127, -128, 0}));
  r = one(OpKind::QuantizeLinear, {x, s}); // no zero point: u8
  EXPECT_EQ(r.dtype(), DType::U8);
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{0, 2, 4, 0, 255, 0, 1}));
  r = one(OpKind::QuantizeLinear, {x, s}, attrs({{"output_dtype", int64_t(5)}}));
  EXPECT_EQ(r.dtype(), DType::I16);
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{0, 2, 4, -2, 500, -500, 1}));
  EXPECT_EQ(errorOf(OpKind::QuantizeLinear, {x, s, zp}, attrs({{"output_dtype", int64_t(3)}})),
            "output_dtype i8 differs from the dtype of the zero point, u8");
}

TEST(ElementwiseKernels, QuantizeLinearPerAxisAndBlocked) {
  Tensor x = dbls(DType::F32, {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  // Per-axis along axis 0.
  Tensor r = one(OpKind::QuantizeLinear, {x, fvec(DType::F32, {1, 2}), vec(DType::U8, {0, 100})},
                 attrs({{"axis", int64_t(0)}}));
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{1, 2, 3, 4, 102, 103, 104, 104}));
  // Blocked along axis 1 with blocks of 3: scale shape [2, 2] (the last block is short).
  Tensor bs = dbls(DType::F32, {2, 2}, {1, 4, 2, 8});
  r = one(OpKind::QuantizeLinear, {x, bs},
          attrs({{"axis", int64_t(1)}, {"block_size", int64_t(3)}}));
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{1, 2, 3, 1, 2, 3, 4, 1}));
  Tensor d = one(OpKind::DequantizeLinear, {r, bs},
                 attrs({{"axis", int64_t(1)}, {"block_size", int64_t(3)}}));
  EXPECT_EQ(d.dtype(), DType::F32);
  EXPECT_EQ(d.toDoubles(), (std::vector<double>{1, 2, 3, 4, 4, 6, 8, 8}));
  EXPECT_FALSE(run(OpKind::QuantizeLinear, {x, dbls(DType::F32, {2, 3}, {1, 1, 1, 1, 1, 1})},
                   attrs({{"axis", int64_t(1)}, {"block_size", int64_t(3)}}))
                   .ok());
}

TEST(ElementwiseKernels, DequantizeAndDynamicQuantize) {
  Tensor d =
      one(OpKind::DequantizeLinear,
          {vec(DType::I8, {-128, 0, 127}), dbls(DType::F16, {}, {0.5}), ints(DType::I8, {}, {-1})});
  EXPECT_EQ(d.dtype(), DType::F16);
  EXPECT_EQ(d.toDoubles(), (std::vector<double>{-63.5, 0.5, 64}));
  // The example of the ONNX DynamicQuantizeLinear definition.
  auto r =
      run(OpKind::DynamicQuantizeLinear, {fvec(DType::F32, {0, 2, -3, -2.5, 1.34, 0.5})}, {}, 3);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ((*r)[0].toInts(), (std::vector<int64_t>{153, 255, 0, 26, 221, 179}));
  EXPECT_FLOAT_EQ(float((*r)[1].getDouble(0)), 0.019607844f);
  EXPECT_EQ((*r)[2].getInt(0), 153);
}

TEST(ElementwiseKernels, BitShiftAndPow) {
  std::string left = "LEFT", right = "RIGHT";
  EXPECT_EQ(one(OpKind::BitShift, {vec(DType::U8, {16, 4, 1, 255}), vec(DType::U8, {1, 2, 8, 1})},
                attrs({{"direction", left}}))
                .toInts(),
            (std::vector<int64_t>{32, 16, 0, 254}));
  EXPECT_EQ(one(OpKind::BitShift, {vec(DType::I8, {-16, 16, -1}), vec(DType::I8, {2, 2, 9})},
                attrs({{"direction", right}}))
                .toInts(),
            (std::vector<int64_t>{-4, 4, -1}));
  EXPECT_EQ(
      one(OpKind::Pow, {vec(DType::I64, {3, 2, -2, 2}), vec(DType::I64, {4, 62, 3, -1})}).toInts(),
      (std::vector<int64_t>{81, int64_t(1) << 62, -8, 0}));
  EXPECT_EQ(one(OpKind::Pow, {vec(DType::I32, {2, 3}), fvec(DType::F32, {0.5, 2})}).toInts(),
            (std::vector<int64_t>{1, 9}));
  Tensor f = one(OpKind::Pow, {fvec(DType::F32, {2, -8}), vec(DType::I64, {-1, 3})});
  EXPECT_EQ(f.toDoubles(), (std::vector<double>{0.5, -512}));
}

TEST(ElementwiseKernels, WhereAndActivations) {
  Tensor r = one(OpKind::Where, {vec(DType::Bool, {1, 0}), dbls(DType::I64, {2, 1}, {1, 2}),
                                 ints(DType::I64, {}, {-1})});
  EXPECT_EQ(r.shape(), (Shape{2, 2}));
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{1, -1, 2, -1}));
  Tensor g = one(OpKind::Gelu, {fvec(DType::F64, {1})});
  EXPECT_NEAR(g.getDouble(0), 0.8413447460685429, 1e-15);
  g = one(OpKind::Gelu, {fvec(DType::F64, {1})}, attrs({{"approximate", std::string("tanh")}}));
  EXPECT_NEAR(g.getDouble(0), 0.8411919906082768, 1e-15);
  Tensor s = one(OpKind::Sigmoid, {fvec(DType::F64, {-800, 0, 800})});
  EXPECT_EQ(s.toDoubles(), (std::vector<double>{0, 0.5, 1}));
  Tensor sp = one(OpKind::Softplus, {fvec(DType::F64, {1000})});
  EXPECT_EQ(sp.getDouble(0), 1000);
  Tensor pr =
      one(OpKind::PRelu, {dbls(DType::F32, {2, 2}, {-1, 2, -3, 4}), fvec(DType::F32, {0.5, 0.25})});
  EXPECT_EQ(pr.toDoubles(), (std::vector<double>{-0.5, 2, -1.5, 4}));
  Tensor sh =
      one(OpKind::Shrink, {vec(DType::I32, {-3, 0, 3})}, attrs({{"lambd", 1.5}, {"bias", 1.5}}));
  EXPECT_EQ(sh.toInts(), (std::vector<int64_t>{-1, 0, 1}));
  Tensor inf = one(OpKind::IsInf, {fvec(DType::F32, {INFINITY, -INFINITY, kNaN, 1})},
                   attrs({{"detect_negative", int64_t(0)}}));
  EXPECT_EQ(inf.toInts(), (std::vector<int64_t>{1, 0, 0, 0}));
}

TEST(ElementwiseKernels, DropoutAndIdentity) {
  Tensor x = fvec(DType::F32, {1, 2});
  auto r = run(OpKind::Dropout, {x, dbls(DType::F32, {}, {0.3})}, {}, 2);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].toDoubles(), x.toDoubles());
  EXPECT_EQ((*r)[1].toInts(), (std::vector<int64_t>{1, 1}));
  // training_mode with ratio 0 keeps every value.
  r = run(OpKind::Dropout, {x, dbls(DType::F32, {}, {0}), ints(DType::Bool, {}, {1})}, {}, 2);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(errorOf(OpKind::Dropout, {x, dbls(DType::F32, {}, {0.3}), ints(DType::Bool, {}, {1})}),
            "training-mode Dropout is not supported");
  EXPECT_EQ(errorOf(OpKind::Dropout, {x, std::nullopt, ints(DType::Bool, {}, {1})}),
            "training-mode Dropout is not supported");
  EXPECT_EQ(one(OpKind::Identity, {vec(DType::Bool, {1, 0})}).toInts(),
            (std::vector<int64_t>{1, 0}));
}

TEST(ElementwiseInfer, DTypeRules) {
  TensorType f32{DType::F32, {SymInt(2)}}, f16{DType::F16, {SymInt(2)}};
  TensorType b{DType::Bool, {SymInt(2)}}, i32{DType::I32, {SymInt(2)}};
  auto r = infer(OpKind::Add, {f32, f16});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "inputs 0 and 1 must have the same dtype, got f32 and f16");
  r = infer(OpKind::Add, {b, b});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "input 0 has dtype bool, which Add does not accept");
  EXPECT_FALSE(infer(OpKind::Sqrt, {i32}).ok());
  EXPECT_FALSE(infer(OpKind::Neg, {TensorType{DType::U8, {}}}).ok());
  EXPECT_FALSE(infer(OpKind::And, {i32, i32}).ok());
  EXPECT_EQ(infer(OpKind::Equal, {i32, i32})->at(0).dtype, DType::Bool);
  EXPECT_EQ(infer(OpKind::Pow, {f32, i32})->at(0).dtype, DType::F32);
  r = infer(OpKind::Where, {b, f32, f16});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "inputs 1 and 2 must have the same dtype, got f32 and f16");
  EXPECT_FALSE(infer(OpKind::Where, {i32, f32, f32}).ok());
  EXPECT_FALSE(infer(OpKind::DequantizeLinear, {f32, f32}).ok());
}

TEST(ElementwiseInfer, SymbolicBroadcast) {
  SymInt n = SymInt::symbol("N");
  TensorType a{DType::F32, {n, SymInt(1), SymInt(4)}}, c{DType::F32, {SymInt(3), SymInt(1)}};
  auto r = infer(OpKind::Mul, {a, c});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->at(0).shape, (std::vector<SymInt>{n, SymInt(3), SymInt(4)}));
  auto bad = infer(OpKind::Add,
                   {TensorType{DType::F32, {SymInt(3)}}, TensorType{DType::F32, {SymInt(4)}}});
  EXPECT_FALSE(bad.ok());
  auto dq = infer(OpKind::DynamicQuantizeLinear, {a}, {}, 3);
  ASSERT_TRUE(dq.ok());
  EXPECT_EQ(dq->size(), 3u);
  EXPECT_EQ(dq->at(0).shape, a.shape);
  EXPECT_EQ(dq->at(1).shape.size(), 0u);
}
