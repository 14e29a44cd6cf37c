// GPU tests of coil_cuda_gemm_bias_* (cuBLASLt's BIAS / RELU_BIAS epilogue, or the plain kernel):
// every dtype, transposes, batches with per-batch and shared weights (the shared case runs as
// one GEMM over batch * m rows), ReLU on and off, unaligned pointers, two biases of one shape
// (the plan caches the bias pointer), k == 0 and CUDA-graph capture, each compared with
// coil_cpu_gemm_bias_* on the host.
#include "CudaKernelsTestUtil.h"

namespace coil::gputest {
namespace {

using BiasCpu = decltype(&coil_cpu_gemm_bias_f32);
using BiasCuda = decltype(&coil_cuda_gemm_bias_f32);

std::pair<BiasCpu, BiasCuda> biasFns(Dt t) {
  switch (t) {
  case Dt::F64:
    return {coil_cpu_gemm_bias_f64, coil_cuda_gemm_bias_f64};
  case Dt::F32:
    return {coil_cpu_gemm_bias_f32, coil_cuda_gemm_bias_f32};
  case Dt::F16:
    return {coil_cpu_gemm_bias_f16, coil_cuda_gemm_bias_f16};
  case Dt::BF16:
    return {coil_cpu_gemm_bias_bf16, coil_cuda_gemm_bias_bf16};
  }
  return {};
}

struct BiasCase {
  Dt t;
  int64_t batch, m, n, k;
  bool ta, tb, shareB, relu;
  double alpha = 0.75;
  size_t pad = 0;
};

std::string describe(const BiasCase &g) {
  return std::string(dtName(g.t)) + " batch " + std::to_string(g.batch) + " m,n,k " +
         std::to_string(g.m) + "," + std::to_string(g.n) + "," + std::to_string(g.k) + " ta " +
         std::to_string(g.ta) + " tb " + std::to_string(g.tb) + " shareB " +
         std::to_string(g.shareB) + " relu " + std::to_string(g.relu) + " pad " +
         std::to_string(g.pad);
}

class CudaKernelsGemmBias : public CudaKernelsTest {
protected:
  /// Runs one case with the bias of seed `biasSeed`; returns nothing, checks against the CPU.
  void run(const BiasCase &g, unsigned biasSeed = 7) {
    SCOPED_TRACE(describe(g));
    auto [cpu, cuda] = biasFns(g.t);
    int64_t mk = g.m * g.k, kn = g.k * g.n, mn = g.m * g.n;
    int64_t sa = mk, sb = g.shareB ? 0 : kn;
    unsigned seed = unsigned(g.batch * 131 + g.m * 17 + g.n * 7 + g.k) + (g.ta ? 1000 : 0);
    HostData a = randomData(g.t, size_t(g.batch * mk), seed);
    HostData b = randomData(g.t, size_t((g.shareB ? 1 : g.batch) * kn), seed + 1);
    HostData bias = randomData(g.t, size_t(g.n), biasSeed);
    HostData y0 = randomData(g.t, size_t(g.batch * mn), seed + 3); // garbage in the output
    HostData ref = y0;
    ASSERT_EQ(cpu(a.data(), b.data(), bias.data(), ref.data(), g.batch, g.m, g.n, g.k, g.ta, g.tb,
                  sa, sb, g.alpha, g.relu),
              0);
    // The rounding error's scale: |alpha| |A| |B| + |bias|.
    std::vector<float> aa = a.f32(true), ab = b.f32(true), abias = bias.f32(true),
                       mag(size_t(g.batch * mn));
    coil_cpu_gemm_bias_f32(aa.data(), ab.data(), abias.data(), mag.data(), g.batch, g.m, g.n, g.k,
                           g.ta, g.tb, sa, sb, std::fabs(g.alpha), 0);
    DevBuf da(a, g.pad), db(b, g.pad), dbias(bias, g.pad), dy(y0, g.pad);
    int32_t rc = cuda(&ctx_, da.ptr(), db.ptr(), dbias.ptr(), dy.ptr(), g.batch, g.m, g.n, g.k,
                      g.ta, g.tb, sa, sb, g.alpha, g.relu);
    ASSERT_EQ(rc, 0) << error_;
    sync();
    HostData got(g.t, size_t(g.batch * mn));
    dy.download(got);
    EXPECT_TRUE(closeTo(got, ref, mag, dtTol(g.t)));
    if (g.relu) {
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_GE(got.get(i), 0.0) << "element " << i;
      }
    }
  }
};

TEST_F(CudaKernelsGemmBias, EveryDtypeTransposeBatchAndRelu) {
  const int64_t sizes[][3] = {{1, 1, 1}, {7, 1, 7}, {1, 7, 129}, {33, 65, 129}, {64, 128, 96}};
  for (Dt t : {Dt::F32, Dt::F16, Dt::BF16, Dt::F64})
    for (auto &s : sizes)
      for (int64_t batch : {1, 3})
        for (int tr = 0; tr < 4; ++tr)
          for (bool shareB : {false, true})
            for (bool relu : {false, true}) {
              if (batch == 1 && shareB) continue;
              run({t, batch, s[0], s[1], s[2], (tr & 1) != 0, (tr & 2) != 0, shareB, relu});
              if (HasFatalFailure()) return;
            }
}

TEST_F(CudaKernelsGemmBias, MlpAndBertShapes) {
  // [B*S, K] x [K, N] as the BERT and MLP layers run it (shared weights: one GEMM).
  for (Dt t : {Dt::BF16, Dt::F16, Dt::F32}) {
    run({t, 4, 128, 768, 768, false, false, true, false, 1.0});
    run({t, 1, 256, 1024, 512, false, false, false, true, 1.0});
    run({t, 1, 256, 512, 1024, false, true, false, false, 1.0}); // Gemm with transB
  }
}

TEST_F(CudaKernelsGemmBias, UnalignedPointers) {
  for (Dt t : {Dt::F32, Dt::F16, Dt::BF16, Dt::F64})
    for (size_t pad : {size_t(2), size_t(8), size_t(24)}) {
      if (pad % dtSize(t)) continue;
      run({t, 3, 13, 9, 11, false, false, true, true, 0.75, pad});
      run({t, 1, 64, 64, 64, true, true, false, false, 1.0, pad});
    }
}

TEST_F(CudaKernelsGemmBias, EachCallUsesItsOwnBias) {
  // Same problem, different bias buffers: a cached plan must not keep the first pointer.
  run({Dt::BF16, 1, 64, 96, 32, false, false, false, true, 1.0}, 7);
  run({Dt::BF16, 1, 64, 96, 32, false, false, false, true, 1.0}, 8);
  run({Dt::F32, 2, 32, 48, 16, false, false, true, false, 1.0}, 9);
  run({Dt::F32, 2, 32, 48, 16, false, false, true, false, 1.0}, 10);
}

TEST_F(CudaKernelsGemmBias, EmptyInnerDimensionWritesTheBias) {
  for (Dt t : {Dt::F32, Dt::BF16})
    for (bool relu : {false, true}) run({t, 2, 5, 9, 0, false, false, false, relu});
}

TEST_F(CudaKernelsGemmBias, CapturesIntoACudaGraph) {
  HostData a = randomData(Dt::BF16, 3 * 40 * 24, 1), b = randomData(Dt::BF16, 24 * 56, 2);
  HostData bias = randomData(Dt::BF16, 56, 3);
  HostData ref(Dt::BF16, 3 * 40 * 56), got(Dt::BF16, 3 * 40 * 56);
  coil_cpu_gemm_bias_bf16(a.data(), b.data(), bias.data(), ref.data(), 3, 40, 56, 24, 0, 0, 40 * 24,
                          0, 1.0, 1);
  DevBuf da(a), db(b), dbias(bias), dy(ref.bytes.size());
  ASSERT_EQ(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  int32_t rc = coil_cuda_gemm_bias_bf16(&ctx_, da.ptr(), db.ptr(), dbias.ptr(), dy.ptr(), 3, 40, 56,
                                        24, 0, 0, 40 * 24, 0, 1.0, 1);
  CUgraph graph = nullptr;
  ASSERT_EQ(cuStreamEndCapture(stream_, &graph), CUDA_SUCCESS);
  ASSERT_EQ(rc, 0) << error_;
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiate(&exec, graph, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, stream_), CUDA_SUCCESS);
  sync();
  dy.download(got);
  std::vector<float> mag(got.size(), 25.0f);
  EXPECT_TRUE(closeTo(got, ref, mag, 1e-2));
  cuGraphExecDestroy(exec);
  cuGraphDestroy(graph);
}

} // namespace
} // namespace coil::gputest
