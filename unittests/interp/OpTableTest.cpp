// Every op of the op table has both halves of its definition: type inference and a reference
// kernel. (An op listed in Ops.def without them would be importable but not runnable.)
#include "interp/Kernel.h"
#include "ir/Infer.h"

#include <gtest/gtest.h>

using namespace coil;

TEST(OpTable, EveryOpHasInferenceAndKernel) {
  std::string missing;
  for (size_t i = 0; i < kNumOps; ++i) {
    OpKind op = OpKind(i);
    if (!inferFnFor(op))
      missing += std::string(opName(op)) + " (inference) ";
    if (!kernelFor(op))
      missing += std::string(opName(op)) + " (kernel) ";
  }
  EXPECT_EQ(missing, "");
}

TEST(OpTable, NamesRoundTrip) {
  for (size_t i = 0; i < kNumOps; ++i)
    EXPECT_EQ(opFromName(opName(OpKind(i))), OpKind(i));
  EXPECT_FALSE(opFromName("NotAnOp").has_value());
}
