// GPU tests of coil_cuda_conv_bias_* and coil_cuda_conv_nhwc_bias_* (f16, bf16): the bias added
// and the clamp applied before the one rounding, each call compared bit by bit with its CPU twin
// (coil_cpu_conv_bias_*, coil_cpu_conv_nhwc_bias_*), which rounds once too. Rounding once, the
// two differ only where their f32 sums (summed in other orders) fall on either side of a
// rounding boundary: by one ulp, in few outputs; a twin that rounded the convolution before
// adding the bias would differ in a large share of them (about 30% on the CPU's tests). Every
// test runs with cuDNN allowed (COIL_CUDNN=1 when the GEMM state is made; used where loadable)
// and disabled (COIL_CUDNN=0); the path of each call (coil_cuda_conv_last_path) is checked
// where it is determined: cuDNN's fused convolution for the 3x3 cases with no clamp or a ReLU
// (when cuDNN may run), cuBLASLt's bias epilogue for channels-last 1x1 convolutions, the direct
// kernels for a Clip and without cuDNN.
#include "CudaKernelsTestUtil.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <optional>

namespace coil::gputest {
namespace {

using BiasCpu = decltype(&coil_cpu_conv_bias_f16);
using BiasCuda = decltype(&coil_cuda_conv_bias_f16);

/// The CPU and CUDA functions of dtype t (f16 or bf16), channels-first or channels-last.
std::pair<BiasCpu, BiasCuda> biasFns(Dt t, bool nhwc) {
  if (t == Dt::F16)
    return nhwc ? std::make_pair(coil_cpu_conv_nhwc_bias_f16, coil_cuda_conv_nhwc_bias_f16)
                : std::make_pair(coil_cpu_conv_bias_f16, coil_cuda_conv_bias_f16);
  return nhwc ? std::make_pair(coil_cpu_conv_nhwc_bias_bf16, coil_cuda_conv_nhwc_bias_bf16)
              : std::make_pair(coil_cpu_conv_bias_bf16, coil_cuda_conv_bias_bf16);
}

/// A 2-D convolution (rows of one pixel for the 1-D case) with symmetric padding.
struct BiasCase {
  const char *name;
  int64_t n, c, m, group;
  int64_t in[2], k[2], s[2], d[2], p[2];
  bool dnn; ///< cuDNN's fused call must run it (no clamp or a ReLU, when cuDNN may run)
};

const std::vector<BiasCase> &cases() {
  static const std::vector<BiasCase> c = {
      {"3x3 pad 1", 2, 16, 32, 1, {14, 14}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, true},
      {"3x3 stride 2 groups", 2, 16, 16, 2, {15, 13}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
      {"1x1", 3, 32, 24, 1, {7, 7}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, false},
      {"depthwise 3x3", 2, 16, 16, 16, {10, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false},
      {"5x5 dilated", 1, 8, 8, 1, {12, 12}, {5, 5}, {1, 1}, {2, 2}, {4, 4}, false},
      {"rows of 1 x 40", 2, 8, 16, 1, {1, 40}, {1, 5}, {1, 2}, {1, 1}, {0, 2}, false},
  };
  return c;
}

/// The clamp of a call: flags and bounds (as FoldConvBias passes them).
struct Clamp {
  const char *name;
  int64_t flags;
  double lo, hi;
  bool reluOrNone;
};
const std::vector<Clamp> &clamps() {
  static const std::vector<Clamp> c = {{"none", 0, 0, 0, true},
                                       {"relu", 1, 0, 0, true},
                                       {"clip", 3, -0.5, 0.75, false},
                                       {"lower -0.25", 1, -0.25, 0, false}};
  return c;
}

const char *pathName(int32_t p) {
  static const char *names[] = {"none", "zeros", "direct", "gemm", "cudnn"};
  return p >= 0 && p <= 4 ? names[p] : "?";
}

/// The bits of an f16/bf16 value as an ordered integer (one ulp apart: adjacent integers).
int ordered(double v, Dt t) {
  float f = float(v);
  uint16_t h = t == Dt::F16 ? cpu::floatToHalfBits(f) : cpu::floatToBf16Bits(f);
  return (h & 0x8000) ? -int(h & 0x7fff) : int(h);
}

class CudaKernelsConvBias : public CudaKernelsTest, public testing::WithParamInterface<bool> {
protected:
  void SetUp() override {
    if (const char *v = std::getenv("COIL_CUDNN")) saved_ = std::string(v);
    setenv("COIL_CUDNN", GetParam() ? "1" : "0", 1);
    CudaKernelsTest::SetUp();
  }
  void TearDown() override {
    CudaKernelsTest::TearDown();
    if (saved_)
      setenv("COIL_CUDNN", saved_->c_str(), 1);
    else
      unsetenv("COIL_CUDNN");
  }
  bool cudnn() const { return GetParam() && coil_cuda_cudnn_version() > 0; }

  /// Runs one case on the GPU (captured into a CUDA graph when `capture`) and the CPU, compares
  /// them and checks the path; returns the path (-1 when the call failed).
  int32_t run(Dt t, const BiasCase &bc, const Clamp &cl, bool nhwc, bool capture = false) {
    SCOPED_TRACE(std::string(nhwc ? "conv_nhwc_bias " : "conv_bias ") + dtName(t) + " " + bc.name +
                 " clamp " + cl.name + (capture ? " captured" : "") +
                 (GetParam() ? " cudnn allowed" : " cudnn disabled"));
    int64_t out[2];
    for (int i = 0; i < 2; ++i)
      out[i] = (bc.in[i] + 2 * bc.p[i] - ((bc.k[i] - 1) * bc.d[i] + 1)) / bc.s[i] + 1;
    int64_t inS = bc.in[0] * bc.in[1], kS = bc.k[0] * bc.k[1], outS = out[0] * out[1];
    unsigned seed = unsigned(bc.c * 13 + bc.m * 7 + inS);
    HostData x = randomData(t, size_t(bc.n * bc.c * inS), seed);
    HostData w = randomData(t, size_t(bc.m * (bc.c / bc.group) * kS), seed + 1);
    HostData bias = randomData(t, size_t(bc.m), seed + 2);
    // Garbage in the CPU's output, NaN in the GPU's: an output either leaves unwritten differs.
    HostData ref = randomData(t, size_t(bc.n * bc.m * outS), seed + 3);
    HostData y0(t, ref.size());
    for (size_t i = 0; i < y0.size(); ++i) y0.set(i, std::nan(""));
    // Two spatial dims: the first two of each triple (the third is unused).
    auto call = [&](auto fn, auto... first) {
      return fn(first..., bc.n, bc.c, bc.m, bc.group, int64_t(2), bc.in[0], bc.in[1], int64_t(1),
                bc.k[0], bc.k[1], int64_t(1), out[0], out[1], int64_t(1), bc.s[0], bc.s[1],
                int64_t(1), bc.d[0], bc.d[1], int64_t(1), bc.p[0], bc.p[1], int64_t(0), cl.flags,
                cl.lo, cl.hi);
    };
    auto [cpu, cuda] = biasFns(t, nhwc);
    EXPECT_EQ(call(cpu, x.data(), w.data(), bias.data(), ref.data()), 0) << coil_cpu_last_error();
    DevBuf dx(x), dw(w), db(bias), dy(y0);
    int32_t rc = -1;
    std::optional<CUgraphExec> exec;
    if (capture) {
      EXPECT_EQ(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
      rc = call(cuda, &ctx_, dx.ptr(), dw.ptr(), db.ptr(), dy.ptr());
      CUgraph graph = nullptr;
      EXPECT_EQ(cuStreamEndCapture(stream_, &graph), CUDA_SUCCESS);
      if (!graph) return -1;
      CUgraphExec e = nullptr;
      EXPECT_EQ(cuGraphInstantiate(&e, graph, 0), CUDA_SUCCESS);
      cuGraphDestroy(graph);
      if (!e) return -1;
      EXPECT_EQ(cuGraphLaunch(e, stream_), CUDA_SUCCESS);
      exec = e;
    } else {
      rc = call(cuda, &ctx_, dx.ptr(), dw.ptr(), db.ptr(), dy.ptr());
    }
    int32_t path = coil_cuda_conv_last_path();
    EXPECT_EQ(rc, 0) << error_;
    sync();
    if (exec) cuGraphExecDestroy(*exec);
    if (rc != 0) return -1;
    HostData got(t, ref.size());
    dy.download(got);
    // Bit for bit up to one ulp, and off by one in few outputs. Outputs near zero after
    // cancellation may differ by more ulps of their own (tiny spacing) but not by more than the
    // f32 sums' rounding in another order: 1e-5 of the largest output.
    double scale = 0;
    for (size_t i = 0; i < ref.size(); ++i) scale = std::max(scale, std::fabs(ref.get(i)));
    size_t off = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      int du = std::abs(ordered(got.get(i), t) - ordered(ref.get(i), t));
      bool close = du <= 1 || std::fabs(got.get(i) - ref.get(i)) <= 1e-5 * scale;
      EXPECT_TRUE(close) << "element " << i << ": " << got.get(i) << " vs the CPU's " << ref.get(i)
                         << ", " << du << " ulps (path " << pathName(path) << ")";
      if (!close) break;
      off += du != 0;
      if (cl.flags & 1) {
        EXPECT_GE(got.get(i), cl.lo) << "element " << i;
      }
      if (cl.flags & 2) {
        EXPECT_LE(got.get(i), cl.hi) << "element " << i;
      }
    }
    EXPECT_LE(off, std::max<size_t>(2, got.size() / 100))
        << off << " of " << got.size() << " outputs one ulp off the CPU's (path " << pathName(path)
        << "): rounded twice?";
    // The paths.
    bool pointwise = bc.k[0] == 1 && bc.k[1] == 1 && bc.s[0] == 1 && bc.s[1] == 1 && bc.p[0] == 0 &&
                     bc.p[1] == 0;
    if (nhwc && pointwise && bc.group == 1 && cl.reluOrNone) {
      EXPECT_EQ(path, COIL_CUDA_CONV_PATH_GEMM) << pathName(path);
    } else if (!cl.reluOrNone || !cudnn()) {
      EXPECT_EQ(path, COIL_CUDA_CONV_PATH_DIRECT) << pathName(path);
    } else if (bc.dnn) {
      EXPECT_EQ(path, COIL_CUDA_CONV_PATH_CUDNN)
          << pathName(path) << " (COIL_CUDNN_DEBUG=1 says why cuDNN's fused call did not run)";
    }
    ++paths_[path < 0 || path > 4 ? 0 : path];
    return path;
  }
  void reportPaths() {
    std::cout << "[ paths    ] cudnn " << (GetParam() ? "allowed" : "disabled") << " ("
              << coil_cuda_cudnn_library() << "):";
    for (int p = 0; p <= 4; ++p) std::cout << " " << pathName(p) << " " << paths_[p];
    std::cout << "\n";
  }

  std::optional<std::string> saved_;
  int64_t paths_[5] = {};
};

TEST_P(CudaKernelsConvBias, EveryCaseClampAndLayoutRoundsOnce) {
  for (bool nhwc : {false, true})
    for (Dt t : {Dt::F16, Dt::BF16})
      for (const BiasCase &bc : cases())
        for (const Clamp &cl : clamps()) {
          run(t, bc, cl, nhwc);
          if (HasFatalFailure()) return;
        }
  reportPaths();
}

TEST_P(CudaKernelsConvBias, CapturedIntoACudaGraph) {
  for (bool nhwc : {false, true})
    for (Dt t : {Dt::F16, Dt::BF16})
      for (const Clamp &cl : clamps()) run(t, cases()[0], cl, nhwc, true);
  reportPaths();
}

TEST_P(CudaKernelsConvBias, NoWorkspaceStillRoundsOnce) {
  // cuDNN's fused algorithm and cuBLASLt may need a workspace: without one, whatever runs.
  setWorkspace(0);
  for (bool nhwc : {false, true})
    for (const BiasCase &bc : cases()) {
      BiasCase any = bc;
      any.dnn = false;
      run(Dt::F16, any, clamps()[1], nhwc);
    }
  reportPaths();
}

TEST_P(CudaKernelsConvBias, BadArgumentsFail) {
  HostData y = randomData(Dt::F16, 16, 3), got(Dt::F16, 16);
  DevBuf dy(y);
  auto expectFails = [&](int32_t rc, const char *fn, const char *rule) {
    EXPECT_NE(rc, 0);
    EXPECT_NE(std::string(error_).find(fn), std::string::npos) << error_;
    EXPECT_NE(std::string(error_).find(rule), std::string::npos) << error_;
    error_[0] = 0;
  };
  // Clamp flags 4; group 3 not dividing 4 channels; a null bias: each fails with a message
  // naming the function and the rule, and writes nothing.
  expectFails(coil_cuda_conv_bias_f16(&ctx_, dy.ptr(), dy.ptr(), dy.ptr(), dy.ptr(), 1, 1, 1, 1, 2,
                                      1, 4, 1, 1, 1, 1, 1, 4, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 4, 0.0,
                                      0.0),
              "coil_cuda_conv_bias_f16", "clamp flags");
  expectFails(coil_cuda_conv_nhwc_bias_bf16(&ctx_, dy.ptr(), dy.ptr(), dy.ptr(), dy.ptr(), 1, 4, 4,
                                            3, 2, 1, 4, 1, 1, 1, 1, 1, 4, 1, 1, 1, 1, 1, 1, 1, 0, 0,
                                            0, 0, 0.0, 0.0),
              "coil_cuda_conv_nhwc_bias_bf16", "group");
  expectFails(coil_cuda_conv_nhwc_bias_f16(&ctx_, dy.ptr(), dy.ptr(), nullptr, dy.ptr(), 1, 1, 1, 1,
                                           2, 1, 4, 1, 1, 1, 1, 1, 4, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0,
                                           0, 0.0, 0.0),
              "coil_cuda_conv_nhwc_bias_f16", "bias");
  sync();
  dy.download(got);
  EXPECT_EQ(got.bytes, y.bytes);
}

INSTANTIATE_TEST_SUITE_P(Cudnn, CudaKernelsConvBias, testing::Bool(),
                         [](const testing::TestParamInfo<bool> &i) {
                           return i.param ? "Allowed" : "Disabled";
                         });

} // namespace
} // namespace coil::gputest
