// Timing of coil_cuda_conv_f16 / _f32 on the convolutions of ResNet-50 (batch 32, 224x224):
// coil's own kernels (im2col + cuBLASLt, the pointwise GEMM) against cuDNN, and pointwise
// convolutions through cuDNN (COIL_CUDNN_POINTWISE=1). Runs only with COIL_CONV_BENCH=1 (it
// prints a table; nothing is compared).
#include "CudaKernelsTestUtil.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace coil::gputest {
namespace {

struct BenchConv {
  const char *name;
  int64_t c, m, hw, k, s, count; ///< square input hw, kernel k, stride s, pad k / 2
};

/// The convolutions of ResNet-50 (torchvision, stride on the 3x3) and how often each occurs.
const BenchConv kResNet50[] = {
    {"conv1 7x7/2 3->64 @224", 3, 64, 224, 7, 2, 1},
    {"1x1 64->64 @56", 64, 64, 56, 1, 1, 1},
    {"3x3 64->64 @56", 64, 64, 56, 3, 1, 3},
    {"1x1 64->256 @56", 64, 256, 56, 1, 1, 4},
    {"1x1 256->64 @56", 256, 64, 56, 1, 1, 2},
    {"1x1 256->128 @56", 256, 128, 56, 1, 1, 1},
    {"3x3/2 128->128 @56", 128, 128, 56, 3, 2, 1},
    {"1x1/2 256->512 @56", 256, 512, 56, 1, 2, 1},
    {"1x1 128->512 @28", 128, 512, 28, 1, 1, 4},
    {"1x1 512->128 @28", 512, 128, 28, 1, 1, 3},
    {"3x3 128->128 @28", 128, 128, 28, 3, 1, 3},
    {"1x1 512->256 @28", 512, 256, 28, 1, 1, 1},
    {"3x3/2 256->256 @28", 256, 256, 28, 3, 2, 1},
    {"1x1/2 512->1024 @28", 512, 1024, 28, 1, 2, 1},
    {"1x1 256->1024 @14", 256, 1024, 14, 1, 1, 6},
    {"1x1 1024->256 @14", 1024, 256, 14, 1, 1, 5},
    {"3x3 256->256 @14", 256, 256, 14, 3, 1, 5},
    {"1x1 1024->512 @14", 1024, 512, 14, 1, 1, 1},
    {"3x3/2 512->512 @14", 512, 512, 14, 3, 2, 1},
    {"1x1/2 1024->2048 @14", 1024, 2048, 14, 1, 2, 1},
    {"1x1 512->2048 @7", 512, 2048, 7, 1, 1, 3},
    {"1x1 2048->512 @7", 2048, 512, 7, 1, 1, 2},
    {"3x3 512->512 @7", 512, 512, 7, 3, 1, 2},
};

class CudaKernelsConvBench : public CudaKernelsTest {
protected:
  /// A GEMM state made with the given COIL_CUDNN / COIL_CUDNN_POINTWISE (restored after).
  void *makeBlas(const char *cudnn, const char *pointwise) {
    std::string saved[2];
    const char *names[2] = {"COIL_CUDNN", "COIL_CUDNN_POINTWISE"};
    bool had[2];
    for (int i = 0; i < 2; ++i) {
      const char *v = std::getenv(names[i]);
      had[i] = v != nullptr;
      if (v) saved[i] = v;
    }
    setenv("COIL_CUDNN", cudnn, 1);
    setenv("COIL_CUDNN_POINTWISE", pointwise, 1);
    void *b = coil_cuda_blas_create();
    for (int i = 0; i < 2; ++i) {
      if (had[i])
        setenv(names[i], saved[i].c_str(), 1);
      else
        unsetenv(names[i]);
    }
    return b;
  }

  /// Microseconds per call of `fn` on ctx (after warm-up), and the path it took.
  template <typename F> double time(coil_cuda_ctx &ctx, F fn, int32_t *path) {
    for (int i = 0; i < 3; ++i) EXPECT_EQ(fn(ctx), 0) << error_;
    *path = coil_cuda_conv_last_path();
    sync();
    CUevent a, b;
    cuEventCreate(&a, CU_EVENT_DEFAULT);
    cuEventCreate(&b, CU_EVENT_DEFAULT);
    constexpr int kIters = 20;
    cuEventRecord(a, stream_);
    for (int i = 0; i < kIters; ++i) fn(ctx);
    cuEventRecord(b, stream_);
    cuEventSynchronize(b);
    float ms = 0;
    cuEventElapsedTime(&ms, a, b);
    cuEventDestroy(a);
    cuEventDestroy(b);
    return double(ms) * 1000.0 / kIters;
  }

  void bench(Dt t) {
    void *states[3] = {makeBlas("0", "0"), makeBlas("1", "0"), makeBlas("1", "1")};
    const char *labels[3] = {"coil", "cudnn", "cudnn+1x1"};
    std::printf("[ bench    ] ResNet-50 convolutions, %s, batch 32 (cuDNN: %s)\n", dtName(t),
                coil_cuda_cudnn_library());
    std::printf("%-24s %10s %10s %10s   (us per call; path)\n", "", labels[0], labels[1],
                labels[2]);
    double totals[3] = {};
    constexpr int64_t n = 32;
    for (const BenchConv &b : kResNet50) {
      int64_t out = (b.hw + 2 * (b.k / 2) - b.k) / b.s + 1;
      HostData x = randomData(t, size_t(n * b.c * b.hw * b.hw), 1);
      HostData w = randomData(t, size_t(b.m * b.c * b.k * b.k), 2);
      DevBuf dx(x), dw(w), dy(size_t(n * b.m * out * out) * dtSize(t));
      auto fn = [&](coil_cuda_ctx &ctx) {
        auto conv = t == Dt::F16 ? coil_cuda_conv_f16 : coil_cuda_conv_f32;
        // Sizes per spatial dim, the used dims first (as coil_cpu_conv_*).
        return conv(&ctx, dx.ptr(), dw.ptr(), dy.ptr(), n, b.c, b.m, 1, 2, b.hw, b.hw, 1, b.k, b.k,
                    1, out, out, 1, b.s, b.s, 1, 1, 1, 1, b.k / 2, b.k / 2, 0);
      };
      std::printf("%-24s", b.name);
      for (int i = 0; i < 3; ++i) {
        coil_cuda_ctx ctx = ctx_;
        ctx.blas = states[i];
        int32_t path = 0;
        double us = time(ctx, fn, &path);
        totals[i] += us * double(b.count);
        std::printf(" %7.1f %-6s", us,
                    path == COIL_CUDA_CONV_PATH_CUDNN  ? "cudnn"
                    : path == COIL_CUDA_CONV_PATH_GEMM ? "gemm"
                                                       : "other");
      }
      std::printf("\n");
    }
    std::printf("%-24s %7.1f        %7.1f        %7.1f         (sum over the network, us)\n",
                "total", totals[0], totals[1], totals[2]);
    sync();
    for (void *s : states) coil_cuda_blas_destroy(s);
  }
};

TEST_F(CudaKernelsConvBench, ResNet50Shapes) {
  const char *on = std::getenv("COIL_CONV_BENCH");
  if (!on || std::string(on) != "1") GTEST_SKIP() << "set COIL_CONV_BENCH=1 to time convolutions";
  bench(Dt::F16);
  bench(Dt::F32);
}

} // namespace
} // namespace coil::gputest
