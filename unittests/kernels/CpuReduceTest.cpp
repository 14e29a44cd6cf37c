// Tests of coil_cpu_reduce_dyn_* (Reduce* with run-time axes) against the reference interpreter
// on random data: every reduction, several dtypes, NaN, empty dims, negative and absent axes,
// keepdims and noop_with_empty_axes, and the no-op on bad axes.
#include "../lower/LowerRdTestUtil.h"
#include "kernels/cpu/CpuKernels.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

using namespace coil;
using namespace coil::rdtest;

namespace {

using ReduceDynFn = int32_t (*)(coil_alloc_fn, void *, const void *, const void *, void **,
                                int64_t *, int64_t *, int64_t *, int64_t *, int64_t *, int64_t *,
                                int64_t *, int64_t *, int64_t, int64_t, int64_t, int64_t, int64_t,
                                int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                int64_t);

ReduceDynFn fnFor(DType t) {
  switch (t) {
  case DType::F64:
    return coil_cpu_reduce_dyn_f64;
  case DType::F32:
    return coil_cpu_reduce_dyn_f32;
  case DType::F16:
    return coil_cpu_reduce_dyn_f16;
  case DType::BF16:
    return coil_cpu_reduce_dyn_bf16;
  case DType::I64:
    return coil_cpu_reduce_dyn_i64;
  case DType::I32:
    return coil_cpu_reduce_dyn_i32;
  case DType::I8:
    return coil_cpu_reduce_dyn_i8;
  case DType::U8:
    return coil_cpu_reduce_dyn_u8;
  case DType::U32:
    return coil_cpu_reduce_dyn_u32;
  case DType::Bool:
    return coil_cpu_reduce_dyn_bool;
  default:
    return nullptr;
  }
}

// The kind codes of the C API, in the order of kReduceOps.
const std::vector<OpKind> kOps = {
    OpKind::ReduceSum,    OpKind::ReduceSumSquare, OpKind::ReduceL1,  OpKind::ReduceL2,
    OpKind::ReduceLogSum, OpKind::ReduceLogSumExp, OpKind::ReduceMax, OpKind::ReduceMin,
    OpKind::ReduceMean,   OpKind::ReduceProd};

struct Blocks {
  std::vector<std::unique_ptr<std::vector<uint8_t>>> list;
  static void *alloc(void *ctx, size_t bytes) {
    auto *b = static_cast<Blocks *>(ctx);
    b->list.push_back(std::make_unique<std::vector<uint8_t>>(bytes ? bytes : 1));
    return b->list.back()->data();
  }
};

struct Result {
  void *data = nullptr;
  Shape shape;
  int64_t dims[8];
  int32_t rc = 0;
  std::string message; ///< coil_cpu_last_error() after a failed call
};

Result callKernel(Blocks &blocks, DType t, int64_t kind, const Tensor &x,
                  const std::vector<int64_t> &axes, bool keepdims, bool noop) {
  Result r;
  int64_t d[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  for (int64_t i = 0; i < x.rank(); ++i) d[i] = x.dim(i);
  int64_t *o = r.dims;
  for (int i = 0; i < 8; ++i) o[i] = -7;
  r.rc = fnFor(t)(&Blocks::alloc, &blocks, x.data(), axes.data(), &r.data, o, o + 1, o + 2, o + 3,
                  o + 4, o + 5, o + 6, o + 7, x.rank(), d[0], d[1], d[2], d[3], d[4], d[5], d[6],
                  d[7], int64_t(axes.size()), kind, keepdims ? 1 : 0, noop ? 1 : 0);
  if (r.rc != 0) r.message = coil_cpu_last_error();
  return r;
}

/// Interpreter result of op on x with constant axes (the reference).
Expected<std::vector<Tensor>>
reference(OpKind op, const Tensor &x, const std::vector<int64_t> &axes, bool keepdims, bool noop) {
  Builder b;
  std::vector<SymInt> s;
  for (int64_t v : x.shape()) s.push_back(v);
  ValueId in = b.input(x.dtype(), s);
  ValueId ax = b.ints(axes);
  b.outputs(
      {b.node1(op, {in, ax},
               attrs({{"keepdims", int64_t(keepdims)}, {"noop_with_empty_axes", int64_t(noop)}}))});
  return interpret(b.g, {x});
}

/// Elementwise identical (NaN matches NaN), same shape.
void expectIdentical(const Tensor &want, DType t, const Result &got) {
  Shape shape(got.dims, got.dims + want.rank());
  ASSERT_EQ(shape, want.shape());
  for (int64_t i = want.rank(); i < 8; ++i) EXPECT_EQ(got.dims[i], 1);
  Tensor g(t, shape);
  ASSERT_TRUE(got.data || g.nbytes() == 0);
  if (g.nbytes()) std::memcpy(g.data(), got.data, g.nbytes());
  for (int64_t i = 0; i < want.numel(); ++i) {
    if (isFloat(t)) {
      double a = want.getDouble(i), b = g.getDouble(i);
      if (std::isnan(a)) {
        EXPECT_TRUE(std::isnan(b)) << "element " << i;
      } else {
        EXPECT_EQ(a, b) << "element " << i;
      }
    } else {
      EXPECT_EQ(want.getInt(i), g.getInt(i)) << "element " << i;
    }
  }
}

Tensor randomInput(DType t, const Shape &s, std::mt19937 &rng, bool withNaN) {
  Tensor x = random(t, s, isUnsigned(t) ? 0 : (isFloat(t) ? -2 : -100), isFloat(t) ? 2 : 100,
                    unsigned(rng()));
  if (t == DType::Bool) x = random(t, s, 0, 1, unsigned(rng()));
  if (withNaN && isFloat(t) && x.numel() > 0)
    x.setDouble(int64_t(rng() % uint64_t(x.numel())), std::nan(""));
  return x;
}

TEST(CpuReduceDyn, MatchesInterpreterOnRandomData) {
  std::mt19937 rng(17);
  const std::vector<Shape> shapes = {{3, 4, 5}, {2, 0, 3}, {6}, {}, {2, 3, 1, 4}};
  int checked = 0;
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32,
                  DType::I8, DType::U8, DType::U32, DType::Bool})
    for (size_t k = 0; k < kOps.size(); ++k) {
      OpKind op = kOps[k];
      bool floatOnly = op == OpKind::ReduceLogSum || op == OpKind::ReduceLogSumExp;
      if (floatOnly && !isFloat(t)) continue;
      if (t == DType::Bool && op != OpKind::ReduceMax && op != OpKind::ReduceMin) continue;
      for (const Shape &s : shapes)
        for (int trial = 0; trial < 4; ++trial) {
          int64_t r = int64_t(s.size());
          // Random distinct axes, some negative; trial 0 passes none.
          std::vector<int64_t> axes;
          if (trial > 0)
            for (int64_t d = 0; d < r; ++d)
              if (rng() % 2) axes.push_back(rng() % 2 ? d - r : d);
          bool keepdims = trial % 2 == 0, noop = trial == 0 && rng() % 2;
          double lo = op == OpKind::ReduceLogSum ? 0.1 : -2;
          Tensor x = isFloat(t) && lo > 0 ? random(t, s, lo, 2, unsigned(rng()))
                                          : randomInput(t, s, rng, trial == 3);
          SCOPED_TRACE(std::string(opName(op)) + " " + std::string(dtypeName(t)) + " shape " +
                       shapeStr(s) + " trial " + std::to_string(trial));
          auto want = reference(op, x, axes, keepdims, noop);
          ASSERT_TRUE(want.ok()) << want.error().render();
          Blocks blocks;
          Result got = callKernel(blocks, t, int64_t(k), x, axes, keepdims, noop);
          expectIdentical((*want)[0], t, got);
          ++checked;
        }
    }
  EXPECT_GT(checked, 500);
}

TEST(CpuReduceDyn, BadAxesFailAndWriteNothing) {
  Tensor x = random(DType::F32, {2, 3}, -1, 1, 3);
  const std::pair<std::vector<int64_t>, const char *> cases[] = {
      {{2}, "reduce: axis 2 is out of range for rank 2"},
      {{-3}, "reduce: axis -3 is out of range for rank 2"},
      {{1, -1}, "reduce: axis -1 appears more than once in axes"},
      {{0, 0}, "reduce: axis 0 appears more than once in axes"}};
  for (const auto &[axes, message] : cases) {
    Blocks blocks;
    Result got = callKernel(blocks, DType::F32, 0, x, axes, true, false);
    EXPECT_NE(got.rc, 0);
    EXPECT_EQ(got.message, message);
    EXPECT_EQ(got.data, nullptr);
    for (int64_t d : got.dims) EXPECT_EQ(d, 0);
    EXPECT_TRUE(blocks.list.empty());
  }
  EXPECT_EQ(callKernel(*std::make_unique<Blocks>(), DType::F32, 0, x, {1}, true, false).rc, 0);
  // LogSum of integers and an unknown kind fail too.
  Tensor xi = random(DType::I32, {2, 3}, -5, 5, 4);
  Blocks blocks;
  Result r = callKernel(blocks, DType::I32, 4, xi, {0}, true, false);
  EXPECT_EQ(r.data, nullptr);
  EXPECT_EQ(r.message, "reduce: reduction kind 4 is not valid for this dtype");
  EXPECT_NE(callKernel(blocks, DType::I32, 10, xi, {0}, true, false).rc, 0);
}

TEST(CpuReduceDyn, FailedAllocationFails) {
  Tensor x = random(DType::F32, {2, 3}, -1, 1, 5);
  int64_t axes[1] = {0}, o[8];
  void *y = reinterpret_cast<void *>(1);
  int32_t rc = coil_cpu_reduce_dyn_f32([](void *, size_t) -> void * { return nullptr; }, nullptr,
                                       x.data(), axes, &y, o, o + 1, o + 2, o + 3, o + 4, o + 5,
                                       o + 6, o + 7, 2, 2, 3, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0);
  EXPECT_NE(rc, 0);
  EXPECT_EQ(y, nullptr);
  EXPECT_STREQ(coil_cpu_last_error(), "reduce: out of memory allocating the output (12 bytes)");
}

} // namespace
