// Tests of Error rendering and Expected.
#include "support/Expected.h"

#include <gtest/gtest.h>

using namespace coil;

TEST(Error, RendersLocationAndKind) {
  SourceLoc loc{"model.onnx", "Conv_17", "Conv"};
  Error e = Error::user("input 1 must have rank 4, got rank 3", loc);
  EXPECT_EQ(e.render(), "error: model.onnx: node 'Conv_17' (Conv): input 1 must have rank 4, "
                        "got rank 3");
  EXPECT_EQ(e.exitCode(), 1);
  EXPECT_EQ(Error::internal("x").render(), "internal error: x");
  EXPECT_EQ(Error::runtime("x").exitCode(), 3);
}

static Expected<int> half(int x) {
  if (x % 2)
    return Error::user("odd");
  return x / 2;
}
static Expected<int> quarter(int x) {
  COIL_TRY(int h, half(x));
  COIL_TRY(int q, half(h));
  return q;
}

TEST(Expected, PropagatesErrors) {
  EXPECT_EQ(*quarter(8), 2);
  auto r = quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "odd");
}

TEST(Check, ThrowsInternalError) {
  EXPECT_THROW({ COIL_CHECK(1 == 2) << "math"; }, InternalError);
}
