// The debug printer reading device memory on a real GPU: the driver API's functions as the
// DeviceReader, the run's stream (coil_cuda_ctx::stream) synchronized before the copy. Values
// written by work still queued on a non-blocking stream must be what the printer shows.
#include "runtime/DebugPrinter.h"

#include <coil/cuda_abi.h>
#include <cstring>
#include <cuda.h>
#include <gtest/gtest.h>
#include <vector>

namespace coil::runtime {
namespace {

int streamSynchronize(void *stream) {
  return int(cuStreamSynchronize(static_cast<CUstream>(stream)));
}
int memcpyDtoH(void *dst, uint64_t src, size_t bytes) {
  return int(cuMemcpyDtoH(dst, CUdeviceptr(src), bytes));
}
int errorName(int result, const char **name) {
  return int(cuGetErrorName(CUresult(result), name));
}

TEST(DebugPrinterGpu, ReadsDeviceTensorsAfterSynchronizingTheStream) {
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  CUdevice dev;
  ASSERT_EQ(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
  CUcontext ctx;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  CUstream stream;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  const size_t n = 1 << 22; // large enough that the memset is still running when we report
  CUdeviceptr d;
  ASSERT_EQ(cuMemAlloc(&d, n * 4), CUDA_SUCCESS);
  float value = 1.5f;
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  ASSERT_EQ(cuMemsetD32Async(d, 0, n, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD32Async(d, bits, n, stream), CUDA_SUCCESS);

  setDebugDeviceReader({&streamSynchronize, &memcpyDtoH, &errorName});
  auto c = debugConfig("print", nullptr, nullptr, {{"k", "kernel", "k"}}, "m");
  ASSERT_TRUE(c.ok());
  DebugPrinter p(*c, {{"k", "kernel", "k"}});
  std::vector<int64_t> shape{int64_t(n)};
  coil_debug_value v{};
  v.name = "y";
  v.buffer = "y";
  v.kind = COIL_DEBUG_TENSOR;
  v.dtype = COIL_DTYPE_F32;
  v.written = 1;
  v.on_device = 1;
  v.rank = 1;
  v.shape = shape.data();
  v.data = reinterpret_cast<const void *>(uintptr_t(d));
  coil_cuda_ctx cctx{};
  cctx.stream = stream;
  coil_debug_launch l{};
  l.id = 0;
  l.when = COIL_DEBUG_AFTER;
  l.name = "k";
  l.values = &v;
  l.num_values = 1;
  l.device_ctx = &cctx;
  testing::internal::CaptureStderr();
  EXPECT_EQ(p.hooks()->report(p.hooks()->ctx, &l), 0);
  std::string out = testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("y [written]: f32 shape [4194304] strides [1] device cuda numel 4194304\n"
                     "    min 1.5 max 1.5 mean 1.5 nan 0 inf 0\n"),
            std::string::npos)
      << out;
  setDebugDeviceReader({});
  cuMemFree(d);
  cuStreamDestroy(stream);
  cuDevicePrimaryCtxRelease(dev);
}

} // namespace
} // namespace coil::runtime
