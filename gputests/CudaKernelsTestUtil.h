/// \file Shared fixture of the CUDA extern kernel tests: a driver-API context, stream,
/// workspace and GEMM state, device buffers, and host data of every float dtype.
#pragma once

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/CpuKernelsImpl.h"
#include "kernels/cuda/CudaKernels.h"

#include <cmath>
#include <cstring>
#include <cuda.h>
#include <gtest/gtest.h>
#include <random>
#include <string>
#include <vector>

namespace coil::gputest {

enum class Dt { F64, F32, F16, BF16 };

inline const char *dtName(Dt t) {
  return t == Dt::F64 ? "f64" : t == Dt::F32 ? "f32" : t == Dt::F16 ? "f16" : "bf16";
}
inline size_t dtSize(Dt t) {
  return t == Dt::F64 ? 8 : t == Dt::F32 ? 4 : 2;
}
/// Relative tolerance against the CPU kernel (f32 1e-4, f16/bf16 1e-2, f64 1e-10).
inline double dtTol(Dt t) {
  return t == Dt::F64 ? 1e-10 : t == Dt::F32 ? 1e-4 : 1e-2;
}

/// Host data of one dtype, stored as raw bytes.
struct HostData {
  Dt t = Dt::F32;
  std::vector<unsigned char> bytes;
  HostData() = default;
  HostData(Dt type, size_t n) : t(type), bytes(n * dtSize(type)) {}
  size_t size() const { return bytes.size() / dtSize(t); }
  void *data() { return bytes.data(); }
  const void *data() const { return bytes.data(); }
  double get(size_t i) const {
    const unsigned char *p = bytes.data() + i * dtSize(t);
    if (t == Dt::F64) {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    if (t == Dt::F32) {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    uint16_t h;
    std::memcpy(&h, p, 2);
    return t == Dt::F16 ? cpu::halfBitsToFloat(h) : cpu::bf16BitsToFloat(h);
  }
  void set(size_t i, double v) {
    unsigned char *p = bytes.data() + i * dtSize(t);
    if (t == Dt::F64) {
      std::memcpy(p, &v, 8);
    } else if (t == Dt::F32) {
      float f = float(v);
      std::memcpy(p, &f, 4);
    } else {
      uint16_t h = t == Dt::F16 ? cpu::floatToHalfBits(float(v)) : cpu::floatToBf16Bits(float(v));
      std::memcpy(p, &h, 2);
    }
  }
  /// The values as f32 (absolute values when `abs`).
  std::vector<float> f32(bool abs = false) const {
    std::vector<float> v(size());
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(abs ? std::fabs(get(i)) : get(i));
    return v;
  }
};

inline HostData randomData(Dt t, size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  HostData h(t, n);
  for (size_t i = 0; i < n; ++i) h.set(i, d(rng));
  return h;
}

/// A device buffer (driver API) with `pad` spare bytes in front, so tests can pass pointers
/// that are not 256-byte aligned.
struct DevBuf {
  CUdeviceptr base = 0;
  size_t bytes = 0, pad = 0;
  DevBuf() = default;
  DevBuf(size_t n, size_t padBytes = 0) : bytes(n), pad(padBytes) {
    EXPECT_EQ(cuMemAlloc(&base, n + pad + 16), CUDA_SUCCESS);
  }
  DevBuf(const HostData &h, size_t padBytes = 0) : DevBuf(h.bytes.size(), padBytes) { upload(h); }
  DevBuf(const DevBuf &) = delete;
  DevBuf &operator=(const DevBuf &) = delete;
  ~DevBuf() {
    if (base) cuMemFree(base);
  }
  void *ptr() const { return reinterpret_cast<void *>(base + pad); }
  void upload(const HostData &h) {
    if (!h.bytes.empty()) {
      EXPECT_EQ(cuMemcpyHtoD(base + pad, h.bytes.data(), h.bytes.size()), CUDA_SUCCESS);
      // A copy from pageable memory returns before its DMA ends, and the tests launch on a
      // non-blocking stream that does not wait for it.
      EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    }
  }
  void download(HostData &h) const {
    if (!h.bytes.empty()) {
      EXPECT_EQ(cuMemcpyDtoH(h.bytes.data(), base + pad, h.bytes.size()), CUDA_SUCCESS);
    }
  }
};

/// Sets up the CUDA context once per test (skipping without a GPU) and a coil_cuda_ctx.
class CudaKernelsTest : public testing::Test {
protected:
  void SetUp() override {
    int count = 0;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0)
      GTEST_SKIP() << "no CUDA device: the CUDA extern kernel tests are skipped";
    ASSERT_EQ(cuDeviceGet(&dev_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&cuctx_, dev_), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(cuctx_), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    blas_ = coil_cuda_blas_create();
    ASSERT_NE(blas_, nullptr);
    setWorkspace(size_t(64) << 20);
    std::memset(&ctx_, 0, sizeof(ctx_));
    ctx_.stream = stream_;
    ctx_.blas = blas_;
    ctx_.error = error_;
    ctx_.error_size = sizeof(error_);
    ctx_.workspace = workspace_ ? reinterpret_cast<void *>(workspace_) : nullptr;
    ctx_.workspace_bytes = workspaceBytes_;
    int major = 0, minor = 0;
    cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev_);
    cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev_);
    ctx_.sm_version = major * 10 + minor;
    ready_ = true;
  }
  void TearDown() override {
    if (!ready_) return;
    cuStreamSynchronize(stream_);
    coil_cuda_blas_destroy(blas_);
    if (workspace_) cuMemFree(workspace_);
    cuStreamDestroy(stream_);
    cuDevicePrimaryCtxRelease(dev_);
  }
  /// Replaces the workspace by one of `bytes` bytes (0: none).
  void setWorkspace(size_t bytes) {
    if (workspace_) cuMemFree(workspace_);
    workspace_ = 0;
    workspaceBytes_ = bytes;
    if (bytes) {
      ASSERT_EQ(cuMemAlloc(&workspace_, bytes), CUDA_SUCCESS);
    }
    ctx_.workspace = workspace_ ? reinterpret_cast<void *>(workspace_) : nullptr;
    ctx_.workspace_bytes = bytes;
  }
  void sync() { ASSERT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS); }

  CUdevice dev_ = 0;
  CUcontext cuctx_ = nullptr;
  CUstream stream_ = nullptr;
  CUdeviceptr workspace_ = 0;
  size_t workspaceBytes_ = 0;
  void *blas_ = nullptr;
  char error_[512] = {};
  coil_cuda_ctx ctx_{};
  bool ready_ = false;
};

/// Compares got with ref elementwise: |got - ref| <= tol * (|ref| + mag / 8) + tiny, where mag
/// is the sum of the absolute products (the scale of the rounding error of a dot product).
inline ::testing::AssertionResult closeTo(const HostData &got, const HostData &ref,
                                          const std::vector<float> &mag, double tol) {
  if (got.size() != ref.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < got.size(); ++i) {
    double g = got.get(i), r = ref.get(i), bound = tol * (std::fabs(r) + mag[i] / 8) + 1e-30;
    if (!(std::fabs(g - r) <= bound))
      return ::testing::AssertionFailure()
             << "element " << i << ": " << g << " vs reference " << r << " (bound " << bound << ")";
  }
  return ::testing::AssertionSuccess();
}

} // namespace coil::gputest
