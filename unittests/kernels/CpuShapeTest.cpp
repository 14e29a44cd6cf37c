// coil_cpu_shape_dims (kernels/cpu/CpuShape.cpp): the sizes of ops whose output shape comes
// from run-time tensors, and the empty result on values that break the op's rules.
#include "kernels/cpu/CpuKernels.h"

#include <cstdlib>
#include <cstring>
#include <gtest/gtest.h>
#include <string>
#include <vector>

namespace {

void *alloc(void *ctx, size_t bytes) {
  auto *list = static_cast<std::vector<void *> *>(ctx);
  void *p = std::malloc(bytes ? bytes : 1);
  list->push_back(p);
  return p;
}

struct Result {
  bool ok = false;
  int32_t rc = 0;
  std::string message; ///< coil_cpu_last_error() after a failed call
  std::vector<int64_t> s;
};

Result dims(int64_t op, std::vector<int64_t> v, std::vector<int64_t> in, int64_t outRank,
            int64_t attr = 0) {
  std::vector<void *> blocks;
  int64_t s[16];
  for (int64_t &x : s) x = -7; // every one must be written
  void *status = nullptr;
  int32_t rc =
      coil_cpu_shape_dims(alloc, &blocks, v.data(), in.data(), &status, &s[0], &s[1], &s[2], &s[3],
                          &s[4], &s[5], &s[6], &s[7], &s[8], &s[9], &s[10], &s[11], &s[12], &s[13],
                          &s[14], &s[15], op, int64_t(v.size()), int64_t(in.size()), outRank, attr);
  Result r;
  EXPECT_NE(status, nullptr);
  if (status) r.ok = *static_cast<int64_t *>(status) == 1;
  r.rc = rc;
  EXPECT_EQ(r.ok, rc == 0); // the status buffer and the returned status agree
  if (rc != 0) r.message = coil_cpu_last_error();
  r.s.assign(s, s + 16);
  for (void *p : blocks) std::free(p);
  return r;
}

std::vector<int64_t> head(const Result &r, size_t n) {
  return std::vector<int64_t>(r.s.begin(), r.s.begin() + long(n));
}

/// A failed call: nonzero status, every size 0, and the message (when given) exactly.
void expectRejected(const Result &r, const std::string &message = "") {
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.rc, 0);
  EXPECT_FALSE(r.message.empty());
  if (!message.empty()) {
    EXPECT_EQ(r.message, message);
  }
  EXPECT_EQ(r.s, std::vector<int64_t>(16, 0));
}

TEST(CpuShapeDims, Reshape) {
  auto r = dims(COIL_SHAPE_RESHAPE, {0, -1, 2}, {4, 3, 6}, 3);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(head(r, 4), (std::vector<int64_t>{4, 9, 2, 0}));
  r = dims(COIL_SHAPE_RESHAPE, {0, 5}, {0, 3}, 2, /*allowzero*/ 1); // 0 kept literally
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(head(r, 2), (std::vector<int64_t>{0, 5}));
  expectRejected(dims(COIL_SHAPE_RESHAPE, {0, -1}, {0, 3}, 2, 1), // -1 next to a 0 dim
                 "reshape: cannot infer the -1 at index 1: 0 elements are not a multiple of 0");
  expectRejected(dims(COIL_SHAPE_RESHAPE, {5, -1}, {4, 3}, 2),
                 "reshape: cannot infer the -1 at index 1: 12 elements are not a multiple of 5");
  expectRejected(dims(COIL_SHAPE_RESHAPE, {-1, -1}, {4, 3}, 2),
                 "reshape: shape has more than one -1 (at index 0 and 1)");
  expectRejected(dims(COIL_SHAPE_RESHAPE, {2, 7}, {4, 3}, 2),
                 "reshape: the shape has 14 elements, the input 12");
  expectRejected(dims(COIL_SHAPE_RESHAPE, {2, -3}, {4, 3}, 2),
                 "reshape: shape value -3 at index 1 is invalid");
  expectRejected(dims(COIL_SHAPE_RESHAPE, {0, 0, 0}, {4, 3}, 3),
                 "reshape: shape value 0 at index 2 copies an input dim, but the input has rank 2");
}

TEST(CpuShapeDims, SqueezeUnsqueeze) {
  auto r = dims(COIL_SHAPE_UNSQUEEZE, {-1, 0}, {3, 4}, 4);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(head(r, 4), (std::vector<int64_t>{1, 3, 4, 1}));
  expectRejected(dims(COIL_SHAPE_UNSQUEEZE, {1, -3}, {3, 4}, 4),
                 "unsqueeze: axis -3 appears more than once");
  expectRejected(dims(COIL_SHAPE_UNSQUEEZE, {4}, {3, 4}, 3),
                 "unsqueeze: axis 4 is out of range for output rank 3");
  r = dims(COIL_SHAPE_SQUEEZE, {-1, 1}, {3, 1, 5, 1}, 2);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(head(r, 2), (std::vector<int64_t>{3, 5}));
  expectRejected(dims(COIL_SHAPE_SQUEEZE, {0}, {3, 1}, 1),
                 "squeeze: axis 0 has size 3, only dims of size 1 can be squeezed");
}

TEST(CpuShapeDims, PadSliceExpandTile) {
  // pads for axes (1, -3) of a [2, 5, 4] input: begins (3, -1), ends (-2, 0).
  auto r = dims(COIL_SHAPE_PAD, {3, -1, -2, 0, 1, -3}, {2, 5, 4}, 3);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(head(r, 9), (std::vector<int64_t>{1, 6, 4, -1, 3, 0, 0, -2, 0}));
  expectRejected(dims(COIL_SHAPE_PAD, {-3, 0, 0}, {2}, 1),
                 "pad: pads -3 and 0 crop more than dim 0's size 2");
  expectRejected(dims(COIL_SHAPE_PAD, {-2, 1, 0}, {2}, 1, 1),
                 "pad: edge, reflect and wrap modes cannot pad dim 0, which is empty after "
                 "cropping");
  expectRejected(dims(COIL_SHAPE_PAD, {1, 1, 1, 1, 0, -2}, {2, 2}, 2),
                 "pad: axis -2 appears more than once");
  // Slice of a [10, 6] input: dim 1 from -1 down by -2, dim 0 [2, 100).
  r = dims(COIL_SHAPE_SLICE, {-1, 2, -100, 100, 1, 0, -2, 1}, {10, 6}, 2);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(head(r, 6), (std::vector<int64_t>{8, 3, 2, 5, 1, -2}));
  expectRejected(dims(COIL_SHAPE_SLICE, {0, 1, 0, 0}, {4}, 1), "slice: step of axis 0 is 0");
  expectRejected(dims(COIL_SHAPE_SLICE, {0, 1, 3, 1}, {4}, 1),
                 "slice: axis 3 is out of range for rank 1");
  r = dims(COIL_SHAPE_EXPAND, {2, 1, 4}, {3, 1}, 3);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(head(r, 3), (std::vector<int64_t>{2, 3, 4}));
  expectRejected(dims(COIL_SHAPE_EXPAND, {2}, {3}, 1),
                 "expand: shape value 2 at index 0 does not broadcast with input dim 0 of size 3");
  expectRejected(dims(COIL_SHAPE_EXPAND, {-2}, {1}, 1),
                 "expand: shape value -2 at index 0 is invalid");
  r = dims(COIL_SHAPE_TILE, {2, 0}, {3, 5}, 2);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(head(r, 2), (std::vector<int64_t>{6, 0}));
  expectRejected(dims(COIL_SHAPE_TILE, {-1, 1}, {3, 5}, 2),
                 "tile: repeats value -1 at index 0 is negative");
}

TEST(CpuShapeDims, SplitOneHotCropRange) {
  auto r = dims(COIL_SHAPE_SPLIT, {1, 4, 0}, {2, 5}, 3, 1);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(head(r, 3), (std::vector<int64_t>{1, 4, 0}));
  expectRejected(dims(COIL_SHAPE_SPLIT, {1, 3}, {2, 5}, 2, 1),
                 "split: the split values sum to 4, axis 1 has size 5");
  r = dims(COIL_SHAPE_ONE_HOT, {7}, {2, 3}, 3, 1);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(head(r, 3), (std::vector<int64_t>{2, 7, 3}));
  expectRejected(dims(COIL_SHAPE_ONE_HOT, {0}, {2}, 2, 1),
                 "one hot: depth 0 is out of range [1, 2^62]");
  expectRejected(dims(COIL_SHAPE_CENTER_CROP_PAD, {-2, 0}, {4}, 1),
                 "center crop pad: shape value -2 at index 0 is negative");
  expectRejected(dims(COIL_SHAPE_CONSTANT_OF_SHAPE, {2, -1}, {}, 2),
                 "constant of shape: shape value -1 at index 1 is negative");
  r = dims(COIL_SHAPE_CENTER_CROP_PAD, {9, 2, -1, 0}, {4, 5, 6}, 3);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(head(r, 3), (std::vector<int64_t>{2, 5, 9}));
  r = dims(COIL_SHAPE_RANGE, {10, 1, -4}, {}, 1);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.s[0], 3); // 10, 6, 2
  r = dims(COIL_SHAPE_RANGE, {INT64_MIN, INT64_MAX, 1}, {}, 1);
  expectRejected(r, "range: start -9223372036854775808, limit 9223372036854775807, delta 1 give "
                    "more than 2^40 elements");
  expectRejected(dims(COIL_SHAPE_RANGE, {1, 5, 0}, {}, 1), "range: delta is 0");
  // Counts that do not fit the op (a lowering bug) fail too.
  expectRejected(dims(COIL_SHAPE_RANGE, {1, 5}, {}, 1));
  expectRejected(dims(99, {1}, {}, 1), "shape: unknown op code 99");
  double f[3] = {1.0, 2.05, 0.25};
  std::vector<int64_t> bits(3);
  std::memcpy(bits.data(), f, sizeof f);
  r = dims(COIL_SHAPE_RANGE, bits, {}, 1, 1);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.s[0], 5); // ceil(4.2)
}

} // namespace
