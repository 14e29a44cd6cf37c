// GPU tests of coil_cuda_gemm_* / coil_cuda_gemm_c_*: random inputs, every dtype, transposes,
// batch strides including 0 (broadcast), C per batch / shared / in place, odd sizes, unaligned
// pointers and CUDA-graph capture, each compared with the coil_cpu_* function on the host.
#include "CudaKernelsTestUtil.h"

namespace coil::gputest {
namespace {

using GemmCpu = decltype(&coil_cpu_gemm_f32);
using GemmCCpu = decltype(&coil_cpu_gemm_c_f32);
using GemmCuda = decltype(&coil_cuda_gemm_f32);
using GemmCCuda = decltype(&coil_cuda_gemm_c_f32);

struct GemmFns {
  GemmCpu cpu;
  GemmCCpu cpuC;
  GemmCuda cuda;
  GemmCCuda cudaC;
};

GemmFns gemmFns(Dt t) {
  switch (t) {
  case Dt::F64:
    return {coil_cpu_gemm_f64, coil_cpu_gemm_c_f64, coil_cuda_gemm_f64, coil_cuda_gemm_c_f64};
  case Dt::F32:
    return {coil_cpu_gemm_f32, coil_cpu_gemm_c_f32, coil_cuda_gemm_f32, coil_cuda_gemm_c_f32};
  case Dt::F16:
    return {coil_cpu_gemm_f16, coil_cpu_gemm_c_f16, coil_cuda_gemm_f16, coil_cuda_gemm_c_f16};
  case Dt::BF16:
    return {coil_cpu_gemm_bf16, coil_cpu_gemm_c_bf16, coil_cuda_gemm_bf16, coil_cuda_gemm_c_bf16};
  }
  return {};
}

/// How C enters: none, one per batch, one shared (stride 0), or C == Y (in place).
enum class CMode { None, PerBatch, Shared, InPlace };

struct GemmCase {
  Dt t;
  int64_t batch, m, n, k;
  bool ta, tb, shareA, shareB;
  CMode c;
  double alpha = 0.75, beta = -1.25;
  size_t pad = 0; ///< bytes in front of every device operand (misaligned pointers)
};

std::string describe(const GemmCase &g) {
  return std::string(dtName(g.t)) + " batch " + std::to_string(g.batch) + " m,n,k " +
         std::to_string(g.m) + "," + std::to_string(g.n) + "," + std::to_string(g.k) + " ta " +
         std::to_string(g.ta) + " tb " + std::to_string(g.tb) + " shareA " +
         std::to_string(g.shareA) + " shareB " + std::to_string(g.shareB) + " C " +
         std::to_string(int(g.c)) + " pad " + std::to_string(g.pad);
}

class CudaKernelsGemm : public CudaKernelsTest {
protected:
  void run(const GemmCase &g) {
    SCOPED_TRACE(describe(g));
    GemmFns f = gemmFns(g.t);
    int64_t mk = g.m * g.k, kn = g.k * g.n, mn = g.m * g.n;
    int64_t sa = g.shareA ? 0 : mk, sb = g.shareB ? 0 : kn;
    int64_t sc = g.c == CMode::Shared ? 0 : mn;
    unsigned seed = unsigned(g.batch * 131 + g.m * 17 + g.n * 7 + g.k) + (g.ta ? 1000 : 0);
    HostData a = randomData(g.t, size_t((g.shareA ? 1 : g.batch) * mk), seed);
    HostData b = randomData(g.t, size_t((g.shareB ? 1 : g.batch) * kn), seed + 1);
    HostData c = randomData(g.t, size_t((g.c == CMode::Shared ? 1 : g.batch) * mn), seed + 2);
    HostData y0 = randomData(g.t, size_t(g.batch * mn), seed + 3); // garbage in the output
    bool withC = g.c != CMode::None;
    // Reference on the host, and the scale of its rounding error (|alpha| |A| |B| + |beta| |C|).
    HostData ref = g.c == CMode::InPlace ? c : y0;
    if (withC)
      f.cpuC(a.data(), b.data(), g.c == CMode::InPlace ? ref.data() : c.data(), ref.data(), g.batch,
             g.m, g.n, g.k, g.ta, g.tb, sa, sb, sc, g.alpha, g.beta);
    else
      f.cpu(a.data(), b.data(), ref.data(), g.batch, g.m, g.n, g.k, g.ta, g.tb, sa, sb, g.alpha);
    std::vector<float> aa = a.f32(true), ab = b.f32(true), ac = c.f32(true),
                       mag(size_t(g.batch * mn));
    coil_cpu_gemm_c_f32(aa.data(), ab.data(), ac.data(), mag.data(), g.batch, g.m, g.n, g.k, g.ta,
                        g.tb, sa, sb, withC ? sc : 0, std::fabs(g.alpha),
                        withC ? std::fabs(g.beta) : 0.0);

    DevBuf da(a, g.pad), db(b, g.pad), dc(c, g.pad), dy(g.c == CMode::InPlace ? c : y0, g.pad);
    int32_t rc;
    if (withC)
      rc = f.cudaC(&ctx_, da.ptr(), db.ptr(), g.c == CMode::InPlace ? dy.ptr() : dc.ptr(), dy.ptr(),
                   g.batch, g.m, g.n, g.k, g.ta, g.tb, sa, sb, sc, g.alpha, g.beta);
    else
      rc = f.cuda(&ctx_, da.ptr(), db.ptr(), dy.ptr(), g.batch, g.m, g.n, g.k, g.ta, g.tb, sa, sb,
                  g.alpha);
    ASSERT_EQ(rc, 0) << error_;
    sync();
    HostData got(g.t, size_t(g.batch * mn));
    dy.download(got);
    EXPECT_TRUE(closeTo(got, ref, mag, dtTol(g.t)));
  }
};

TEST_F(CudaKernelsGemm, EveryDtypeTransposeStrideAndCMode) {
  const int64_t sizes[][3] = {{1, 1, 1},   {7, 1, 7},     {1, 7, 129},  {129, 7, 1},
                              {7, 129, 7}, {33, 65, 129}, {64, 128, 96}};
  for (Dt t : {Dt::F32, Dt::F16, Dt::BF16, Dt::F64})
    for (auto &s : sizes)
      for (int64_t batch : {1, 3})
        for (int tr = 0; tr < 4; ++tr)
          for (int share = 0; share < (batch > 1 ? 3 : 1); ++share)
            for (CMode c : {CMode::None, CMode::PerBatch, CMode::Shared, CMode::InPlace}) {
              GemmCase g{t,          batch,      s[0], s[1], s[2], (tr & 1) != 0, (tr & 2) != 0,
                         share == 1, share == 2, c};
              run(g);
              if (HasFatalFailure()) return;
            }
}

TEST_F(CudaKernelsGemm, LargerProblemsUseTensorCores) {
  for (Dt t : {Dt::F32, Dt::F16, Dt::BF16}) {
    run({t, 1, 512, 384, 1024, false, false, false, false, CMode::None, 1.0, 0.0});
    run({t, 4, 256, 128, 320, false, true, false, false, CMode::PerBatch, 1.0, 1.0});
    run({t, 6, 128, 256, 64, true, false, false, true, CMode::None, 0.5, 0.0});
  }
}

TEST_F(CudaKernelsGemm, UnalignedOperandsAndOddStrides) {
  // Pointers off 256-byte (and 16-byte) alignment, and batch strides of odd element counts.
  for (Dt t : {Dt::F32, Dt::F16, Dt::BF16, Dt::F64})
    for (size_t pad : {size_t(2), size_t(8), size_t(24)}) {
      if (pad % dtSize(t)) continue;
      run({t, 3, 13, 9, 11, false, false, false, false, CMode::PerBatch, 0.75, -1.25, pad});
      run({t, 2, 64, 64, 64, true, true, false, true, CMode::Shared, 1.0, 0.5, pad});
    }
}

TEST_F(CudaKernelsGemm, BetaZeroIgnoresNaNInC) {
  // beta == 0 must not read C (NaN * 0 would poison the result), as on the CPU.
  HostData a = randomData(Dt::F32, 6, 1), b = randomData(Dt::F32, 6, 2), c(Dt::F32, 4);
  for (size_t i = 0; i < 4; ++i) c.set(i, NAN);
  HostData ref(Dt::F32, 4), got(Dt::F32, 4);
  coil_cpu_gemm_c_f32(a.data(), b.data(), c.data(), ref.data(), 1, 2, 2, 3, 0, 0, 0, 0, 0, 1.0,
                      0.0);
  DevBuf da(a), db(b), dc(c), dy(size_t(16));
  ASSERT_EQ(coil_cuda_gemm_c_f32(&ctx_, da.ptr(), db.ptr(), dc.ptr(), dy.ptr(), 1, 2, 2, 3, 0, 0, 0,
                                 0, 0, 1.0, 0.0),
            0)
      << error_;
  sync();
  dy.download(got);
  std::vector<float> mag(4, 1.0f);
  EXPECT_TRUE(closeTo(got, ref, mag, 1e-5));
}

TEST_F(CudaKernelsGemm, EmptyInnerDimensionWritesZerosOrBetaC) {
  HostData c = randomData(Dt::F16, 6, 5), y = randomData(Dt::F16, 6, 6), got(Dt::F16, 6);
  DevBuf dc(c), dy(y);
  ASSERT_EQ(coil_cuda_gemm_f16(&ctx_, dc.ptr(), dc.ptr(), dy.ptr(), 1, 2, 3, 0, 0, 0, 0, 0, 1.0),
            0);
  sync();
  dy.download(got);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(got.get(i), 0.0);
  ASSERT_EQ(coil_cuda_gemm_c_f16(&ctx_, dc.ptr(), dc.ptr(), dc.ptr(), dy.ptr(), 1, 2, 3, 0, 0, 0, 0,
                                 0, 0, 1.0, 2.0),
            0);
  sync();
  dy.download(got);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(got.get(i), 2 * c.get(i));
}

TEST_F(CudaKernelsGemm, InvalidSizesAreNoOpsAndMissingStateIsAnError) {
  HostData y = randomData(Dt::F32, 4, 9), got(Dt::F32, 4);
  DevBuf dy(y);
  EXPECT_EQ(coil_cuda_gemm_f32(&ctx_, dy.ptr(), dy.ptr(), dy.ptr(), 1, -2, 2, 2, 0, 0, 0, 0, 1.0),
            0);
  EXPECT_EQ(coil_cuda_gemm_f32(&ctx_, dy.ptr(), dy.ptr(), dy.ptr(), 2, 2, 2, 2, 0, 0, -4, 0, 1.0),
            0);
  EXPECT_EQ(coil_cuda_gemm_f32(&ctx_, dy.ptr(), dy.ptr(), dy.ptr(), 1, INT64_MAX, INT64_MAX, 2, 0,
                               0, 0, 0, 1.0),
            0);
  sync();
  dy.download(got);
  EXPECT_EQ(got.bytes, y.bytes);
  coil_cuda_ctx noBlas = ctx_;
  noBlas.blas = nullptr;
  EXPECT_NE(coil_cuda_gemm_f32(&noBlas, dy.ptr(), dy.ptr(), dy.ptr(), 1, 2, 2, 2, 0, 0, 0, 0, 1.0),
            0);
  EXPECT_EQ(std::string(error_).rfind("coil_cuda_gemm_f32: ", 0), 0u) << error_;
}

TEST_F(CudaKernelsGemm, WorksWithoutWorkspace) {
  setWorkspace(0);
  run({Dt::F32, 2, 65, 33, 17, false, true, false, false, CMode::PerBatch});
  run({Dt::BF16, 1, 128, 128, 128, true, false, false, false, CMode::None});
}

TEST_F(CudaKernelsGemm, CapturesIntoACudaGraph) {
  // The extern only enqueues work: it can be captured and replayed (the plan is made during
  // capture, which must not touch the stream).
  HostData a = randomData(Dt::BF16, 3 * 40 * 24, 1), b = randomData(Dt::BF16, 3 * 24 * 56, 2);
  HostData ref(Dt::BF16, 3 * 40 * 56), got(Dt::BF16, 3 * 40 * 56);
  coil_cpu_gemm_bf16(a.data(), b.data(), ref.data(), 3, 40, 56, 24, 0, 0, 40 * 24, 24 * 56, 1.0);
  DevBuf da(a), db(b), dy(ref.bytes.size());
  ASSERT_EQ(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  int32_t rc = coil_cuda_gemm_bf16(&ctx_, da.ptr(), db.ptr(), dy.ptr(), 3, 40, 56, 24, 0, 0,
                                   40 * 24, 24 * 56, 1.0);
  CUgraph graph = nullptr;
  ASSERT_EQ(cuStreamEndCapture(stream_, &graph), CUDA_SUCCESS);
  ASSERT_EQ(rc, 0) << error_;
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiate(&exec, graph, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, stream_), CUDA_SUCCESS);
  sync();
  dy.download(got);
  std::vector<float> mag(got.size(), 24.0f);
  EXPECT_TRUE(closeTo(got, ref, mag, 1e-2));
  cuGraphExecDestroy(exec);
  cuGraphDestroy(graph);
}

} // namespace
} // namespace coil::gputest
