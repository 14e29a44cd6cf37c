// GPU tests of coil_cuda_conv_* / coil_cuda_conv_transpose_*: random inputs, every dtype, 1 to 3
// spatial dims, padding (including negative), stride, dilation, groups, depthwise, pointwise,
// and workspaces that force batch chunking or the direct kernels, each compared with the
// coil_cpu_* function on the host. Every test runs twice: with cuDNN allowed (COIL_CUDNN=1 when
// the GEMM state is made; it is used where it can be loaded) and disabled (COIL_CUDNN=0); the
// path each call took (coil_cuda_conv_last_path) is checked where it is determined.
#include "CudaKernelsTestUtil.h"

#include <cstdlib>
#include <iostream>
#include <optional>

namespace coil::gputest {
namespace {

using ConvCpu = decltype(&coil_cpu_conv_f32);
using ConvCuda = decltype(&coil_cuda_conv_f32);

struct ConvFns {
  ConvCpu cpu, cpuT;
  ConvCuda cuda, cudaT;
};

ConvFns convFns(Dt t) {
  switch (t) {
  case Dt::F64:
    return {coil_cpu_conv_f64, coil_cpu_conv_transpose_f64, coil_cuda_conv_f64,
            coil_cuda_conv_transpose_f64};
  case Dt::F32:
    return {coil_cpu_conv_f32, coil_cpu_conv_transpose_f32, coil_cuda_conv_f32,
            coil_cuda_conv_transpose_f32};
  case Dt::F16:
    return {coil_cpu_conv_f16, coil_cpu_conv_transpose_f16, coil_cuda_conv_f16,
            coil_cuda_conv_transpose_f16};
  case Dt::BF16:
    return {coil_cpu_conv_bf16, coil_cpu_conv_transpose_bf16, coil_cuda_conv_bf16,
            coil_cuda_conv_transpose_bf16};
  }
  return {};
}

/// A convolution: sizes per spatial dim (1 to 3 of them), begin and end pads.
struct ConvCase {
  const char *name;
  int64_t n, c, m, group;
  std::vector<int64_t> in, k, s, d, pb, pe;
  int64_t outPad = 0; ///< transposed only: extra output size per dim
};

std::vector<int64_t> convOut(const ConvCase &cc, bool transpose) {
  std::vector<int64_t> o;
  for (size_t i = 0; i < cc.in.size(); ++i) {
    int64_t span = (cc.k[i] - 1) * cc.d[i] + 1;
    o.push_back(transpose ? (cc.in[i] - 1) * cc.s[i] - cc.pb[i] - cc.pe[i] + span + cc.outPad
                          : (cc.in[i] + cc.pb[i] + cc.pe[i] - span) / cc.s[i] + 1);
  }
  return o;
}

const std::vector<ConvCase> &cases() {
  static const std::vector<ConvCase> c = {
      {"2d 3x3 pad 1", 2, 4, 6, 1, {9, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
      {"2d groups stride dilation", 3, 4, 6, 2, {11, 8}, {3, 2}, {2, 1}, {2, 2}, {1, 0}, {2, 1}},
      {"2d pointwise", 3, 8, 5, 1, {5, 6}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}},
      {"2d pointwise groups", 2, 8, 6, 2, {4, 5}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}},
      {"2d 1x1 stride 2", 2, 3, 1, 1, {7, 6}, {1, 1}, {2, 2}, {1, 1}, {0, 0}, {0, 0}},
      {"2d depthwise", 2, 6, 6, 6, {10, 9}, {3, 3}, {2, 1}, {1, 1}, {1, 1}, {1, 1}},
      {"2d depthwise multiplier 2", 1, 3, 6, 3, {8, 8}, {5, 3}, {1, 1}, {1, 2}, {2, 2}, {2, 2}},
      {"2d negative pad crops", 1, 2, 3, 1, {9, 9}, {3, 3}, {1, 2}, {1, 1}, {-1, 0}, {0, -1}},
      {"1d", 4, 5, 7, 1, {129}, {5}, {3}, {2}, {3}, {1}},
      {"3d", 2, 3, 4, 1, {5, 6, 7}, {2, 3, 2}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1}, {0, 1, 1}},
      {"2d one channel odd", 1, 1, 1, 1, {1, 7}, {1, 3}, {1, 1}, {1, 1}, {0, 1}, {0, 1}},
      {"2d wider", 2, 16, 32, 1, {17, 15}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
  };
  return c;
}

const char *pathName(int32_t p) {
  switch (p) {
  case COIL_CUDA_CONV_PATH_NONE:
    return "none";
  case COIL_CUDA_CONV_PATH_ZEROS:
    return "zeros";
  case COIL_CUDA_CONV_PATH_DIRECT:
    return "direct";
  case COIL_CUDA_CONV_PATH_GEMM:
    return "gemm";
  case COIL_CUDA_CONV_PATH_CUDNN:
    return "cudnn";
  }
  return "?";
}

/// The fixture, with the parameter "cuDNN allowed": COIL_CUDNN is set for the GEMM state that
/// SetUp makes (coil_cuda_blas_create reads it) and restored afterwards.
class CudaKernelsConv : public CudaKernelsTest, public testing::WithParamInterface<bool> {
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
  /// Whether convolutions may run through cuDNN in this test (allowed and loadable).
  bool cudnn() const { return GetParam() && coil_cuda_cudnn_version() > 0; }

  /// Runs one case on the GPU and the CPU and compares; returns the path the GPU call took
  /// (-1 when it failed).
  int32_t run(Dt t, const ConvCase &cc, bool transpose) {
    SCOPED_TRACE(std::string(transpose ? "conv_transpose " : "conv ") + dtName(t) + " " + cc.name +
                 " workspace " + std::to_string(workspaceBytes_) +
                 (GetParam() ? " cudnn allowed" : " cudnn disabled"));
    ConvFns f = convFns(t);
    std::vector<int64_t> out = convOut(cc, transpose);
    size_t nd = cc.in.size();
    int64_t g[3][6]; // in, k, out, s, d, p per dim, right-padded with the unused dims
    for (size_t i = 0; i < 3; ++i) {
      bool u = i < nd;
      g[i][0] = u ? cc.in[i] : 1, g[i][1] = u ? cc.k[i] : 1, g[i][2] = u ? out[i] : 1;
      g[i][3] = u ? cc.s[i] : 1, g[i][4] = u ? cc.d[i] : 1, g[i][5] = u ? cc.pb[i] : 0;
    }
    int64_t inSize = g[0][0] * g[1][0] * g[2][0], kSize = g[0][1] * g[1][1] * g[2][1];
    int64_t outSize = g[0][2] * g[1][2] * g[2][2];
    int64_t wSize = transpose ? cc.c * (cc.m / cc.group) * kSize : cc.m * (cc.c / cc.group) * kSize;
    unsigned seed = unsigned(cc.n * 7 + cc.c * 13 + cc.m * 19 + inSize);
    HostData x = randomData(t, size_t(cc.n * cc.c * inSize), seed);
    HostData w = randomData(t, size_t(wSize), seed + 1);
    HostData y0 = randomData(t, size_t(cc.n * cc.m * outSize), seed + 2);
    HostData ref = y0;
    auto call = [&](auto fn, auto... first) {
      return fn(first..., cc.n, cc.c, cc.m, cc.group, int64_t(nd), g[0][0], g[1][0], g[2][0],
                g[0][1], g[1][1], g[2][1], g[0][2], g[1][2], g[2][2], g[0][3], g[1][3], g[2][3],
                g[0][4], g[1][4], g[2][4], g[0][5], g[1][5], g[2][5]);
    };
    call(transpose ? f.cpuT : f.cpu, x.data(), w.data(), ref.data());
    std::vector<float> ax = x.f32(true), aw = w.f32(true), mag(ref.size());
    call(transpose ? coil_cpu_conv_transpose_f32 : coil_cpu_conv_f32, ax.data(), aw.data(),
         mag.data());
    DevBuf dx(x), dw(w), dy(y0);
    int32_t rc = -1;
    auto launch = [&]() {
      rc = call(transpose ? f.cudaT : f.cuda, &ctx_, dx.ptr(), dw.ptr(), dy.ptr());
    };
    std::optional<CUgraphExec> exec;
    if (capture_) { // the call captured into a CUDA graph, which then runs
      EXPECT_EQ(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
      launch();
      CUgraph graph = nullptr;
      EXPECT_EQ(cuStreamEndCapture(stream_, &graph), CUDA_SUCCESS);
      EXPECT_NE(graph, nullptr);
      if (!graph) return -1;
      CUgraphExec e = nullptr;
      EXPECT_EQ(cuGraphInstantiate(&e, graph, 0), CUDA_SUCCESS);
      cuGraphDestroy(graph);
      if (!e) return -1;
      EXPECT_EQ(cuGraphLaunch(e, stream_), CUDA_SUCCESS);
      exec = e;
    } else {
      launch();
    }
    int32_t path = coil_cuda_conv_last_path();
    EXPECT_EQ(rc, 0) << error_;
    sync();
    if (exec) cuGraphExecDestroy(*exec);
    if (rc != 0) return -1;
    HostData got(t, ref.size());
    dy.download(got);
    EXPECT_TRUE(closeTo(got, ref, mag, dtTol(t))) << "path " << pathName(path);
    // cuDNN never runs where it is disabled or for f64; where it may, the cases below say when.
    if (!cudnn() || t == Dt::F64) {
      EXPECT_NE(path, COIL_CUDA_CONV_PATH_CUDNN);
    }
    ++paths_[path < 0 || path > 4 ? 0 : path];
    return path;
  }
  void runAll(bool transpose) {
    for (Dt t : {Dt::F32, Dt::F16, Dt::BF16, Dt::F64})
      for (const ConvCase &cc : cases()) {
        if (transpose && cc.pb[0] < 0) continue; // ONNX pads are >= 0; cropping is conv-only
        run(t, cc, transpose);
        if (HasFatalFailure()) return;
      }
  }
  /// Prints how many calls took each path.
  void reportPaths() {
    std::cout << "[ paths    ] cudnn " << (GetParam() ? "allowed" : "disabled") << " ("
              << coil_cuda_cudnn_library() << "):";
    for (int p = 0; p <= 4; ++p) std::cout << " " << pathName(p) << " " << paths_[p];
    std::cout << "\n";
  }

  std::optional<std::string> saved_;
  bool capture_ = false;
  int64_t paths_[5] = {};
};

/// Convolutions with symmetric padding that cuDNN takes (when it may run), with the dtypes where
/// the test requires it to (others only report their path).
struct DnnCase {
  ConvCase cc;
  bool transpose;
  std::vector<Dt> required;
};

const std::vector<DnnCase> &dnnCases() {
  static const std::vector<DnnCase> c = {
      {{"3x3 pad 1", 4, 16, 32, 1, {14, 14}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
       false,
       {Dt::F32, Dt::F16, Dt::BF16}},
      {{"7x7 stride 2 pad 3", 2, 3, 16, 1, {32, 30}, {7, 7}, {2, 2}, {1, 1}, {3, 3}, {3, 3}},
       false,
       {Dt::F32, Dt::F16}},
      {{"1x1 stride 2", 2, 16, 32, 1, {14, 14}, {1, 1}, {2, 2}, {1, 1}, {0, 0}, {0, 0}},
       false,
       {Dt::F32, Dt::F16}},
      {{"grouped 3x3 dilated", 2, 16, 16, 4, {13, 11}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, {2, 2}},
       false,
       {Dt::F32, Dt::F16}},
      {{"end pad lost to the stride", 2, 8, 8, 1, {11, 8}, {3, 2}, {2, 1}, {2, 1}, {1, 0}, {2, 0}},
       false,
       {Dt::F16}},
      {{"1d", 3, 8, 16, 1, {100}, {5}, {2}, {1}, {2}, {2}}, false, {Dt::F16}},
      {{"3d", 2, 4, 8, 1, {6, 7, 5}, {3, 3, 3}, {1, 2, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}},
       false,
       {}},
      {{"t 4x4 s2 p1", 2, 16, 8, 1, {7, 9}, {4, 4}, {2, 2}, {1, 1}, {1, 1}, {1, 1}},
       true,
       {Dt::F32, Dt::F16}},
      {{"t 3x3 s2 outpad 1", 2, 8, 12, 2, {5, 6}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 1},
       true,
       {}},
  };
  return c;
}

TEST_P(CudaKernelsConv, EveryDtypeAndGeometry) {
  runAll(false);
  reportPaths();
}

TEST_P(CudaKernelsConv, TransposedEveryDtypeAndGeometry) {
  runAll(true);
  reportPaths();
}

/// The symmetric cases: cuDNN where required (when it may run), never otherwise; a case with
/// asymmetric padding that changes the output size never takes it.
TEST_P(CudaKernelsConv, SymmetricPaddingRunsThroughCudnn) {
  if (GetParam() && !cudnn())
    std::cout << "[ cudnn    ] not loadable, every convolution runs coil's own kernels: "
              << coil_cuda_cudnn_library() << "\n";
  for (const DnnCase &dc : dnnCases())
    for (Dt t : {Dt::F32, Dt::F16, Dt::BF16, Dt::F64}) {
      int32_t path = run(t, dc.cc, dc.transpose);
      if (HasFatalFailure()) return;
      bool required = false;
      for (Dt r : dc.required) required = required || r == t;
      if (cudnn() && required) {
        EXPECT_EQ(path, COIL_CUDA_CONV_PATH_CUDNN)
            << dc.cc.name << " " << dtName(t) << " took " << pathName(path);
      }
      if (!cudnn() || t == Dt::F64) {
        EXPECT_EQ(path, COIL_CUDA_CONV_PATH_GEMM)
            << dc.cc.name << " " << dtName(t) << " took " << pathName(path);
      }
      std::cout << "[ path     ] " << (dc.transpose ? "conv_transpose " : "conv ") << dtName(t)
                << " " << dc.cc.name << ": " << pathName(path) << "\n";
    }
  ConvCase asym{"asymmetric", 2, 8, 8, 1, {10, 10}, {3, 3}, {1, 1}, {1, 1}, {0, 0}, {2, 2}};
  EXPECT_EQ(run(Dt::F16, asym, false), COIL_CUDA_CONV_PATH_GEMM);
  ConvCase pointwise{"pointwise", 2, 8, 8, 1, {10, 10}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}};
  EXPECT_EQ(run(Dt::F16, pointwise, false), COIL_CUDA_CONV_PATH_GEMM); // COIL_CUDNN_POINTWISE unset
  ConvCase depthwise{"depthwise", 2, 8, 8, 8, {10, 10}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}};
  EXPECT_EQ(run(Dt::F16, depthwise, false), COIL_CUDA_CONV_PATH_DIRECT);
}

/// The first convolution of a fresh GEMM state inside a CUDA-graph capture: cuDNN's handle and
/// algorithm are set up during the capture, and the graph computes the right result.
TEST_P(CudaKernelsConv, FirstCallInsideGraphCapture) {
  capture_ = true;
  for (const DnnCase &dc : dnnCases()) {
    if (dc.required.empty()) continue;
    int32_t path = run(dc.required.front(), dc.cc, dc.transpose);
    if (HasFatalFailure()) return;
    if (cudnn()) {
      EXPECT_EQ(path, COIL_CUDA_CONV_PATH_CUDNN) << dc.cc.name << " took " << pathName(path);
    }
  }
}

TEST_P(CudaKernelsConv, SmallWorkspaceChunksTheBatch) {
  // Room for the columns of one or two images only: the batch runs in chunks.
  setWorkspace(size_t(16) << 10);
  runAll(false);
  runAll(true);
}

TEST_P(CudaKernelsConv, NoWorkspaceRunsTheDirectKernels) {
  setWorkspace(0);
  runAll(false);
  runAll(true);
}

TEST_P(CudaKernelsConv, InvalidGeometryFails) {
  HostData y = randomData(Dt::F32, 16, 3), got(Dt::F32, 16);
  DevBuf dy(y);
  // group 3 does not divide 4 channels; nd 4; stride 0: each call fails with a message naming
  // the function and the rule, and writes nothing.
  auto expectFails = [&](int32_t rc, const char *fn, const char *rule) {
    EXPECT_NE(rc, 0);
    EXPECT_NE(std::string(error_).find(fn), std::string::npos) << error_;
    EXPECT_NE(std::string(error_).find(rule), std::string::npos) << error_;
    error_[0] = 0;
  };
  expectFails(coil_cuda_conv_f32(&ctx_, dy.ptr(), dy.ptr(), dy.ptr(), 1, 4, 4, 3, 1, 4, 1, 1, 1, 1,
                                 1, 4, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0),
              "coil_cuda_conv_f32", "group");
  expectFails(coil_cuda_conv_f32(&ctx_, dy.ptr(), dy.ptr(), dy.ptr(), 1, 4, 4, 1, 4, 4, 1, 1, 1, 1,
                                 1, 4, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0),
              "coil_cuda_conv_f32", "spatial dims");
  expectFails(coil_cuda_conv_transpose_f32(&ctx_, dy.ptr(), dy.ptr(), dy.ptr(), 1, 4, 4, 1, 1, 4, 1,
                                           1, 1, 1, 1, 4, 1, 1, 0, 1, 1, 1, 1, 1, 0, 0, 0),
              "coil_cuda_conv_transpose_f32", "strides");
  expectFails(coil_cuda_conv_nhwc_f16(&ctx_, dy.ptr(), dy.ptr(), dy.ptr(), 1, 4, 4, 3, 2, 1, 4, 1,
                                      1, 1, 1, 1, 4, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0),
              "coil_cuda_conv_nhwc_f16", "group");
  EXPECT_EQ(coil_cuda_conv_last_path(), COIL_CUDA_CONV_PATH_NONE);
  sync();
  dy.download(got);
  EXPECT_EQ(got.bytes, y.bytes);
}

/// coil_cuda_conv_nhwc_* against the CPU twin coil_cpu_conv_nhwc_* on the 2-D cases, every
/// dtype, eagerly and captured into a CUDA graph; the CPU twin itself is checked against the
/// NCHW convolution in unittests/kernels.
TEST_P(CudaKernelsConv, ChannelsLastEveryDtype) {
  using NhwcFn = decltype(&coil_cpu_conv_nhwc_f32);
  using NhwcCuda = decltype(&coil_cuda_conv_nhwc_f32);
  auto fns = [](Dt t) -> std::pair<NhwcFn, NhwcCuda> {
    switch (t) {
    case Dt::F64:
      return {coil_cpu_conv_nhwc_f64, coil_cuda_conv_nhwc_f64};
    case Dt::F32:
      return {coil_cpu_conv_nhwc_f32, coil_cuda_conv_nhwc_f32};
    case Dt::F16:
      return {coil_cpu_conv_nhwc_f16, coil_cuda_conv_nhwc_f16};
    default:
      return {coil_cpu_conv_nhwc_bf16, coil_cuda_conv_nhwc_bf16};
    }
  };
  std::vector<ConvCase> all = cases();
  // ResNet-like shapes: 1x1 over 7x7 and 14x14 (positions not a multiple of 8), 3x3, stride 2.
  all.push_back({"resnet 1x1 7x7", 4, 64, 32, 1, {7, 7}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}});
  all.push_back(
      {"resnet 3x3 14x14", 2, 32, 32, 1, {14, 14}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}});
  all.push_back(
      {"resnet 1x1 stride 2", 2, 32, 64, 1, {14, 14}, {1, 1}, {2, 2}, {1, 1}, {0, 0}, {0, 0}});
  all.push_back(
      {"stem 7x7 stride 2", 2, 3, 16, 1, {32, 32}, {7, 7}, {2, 2}, {1, 1}, {3, 3}, {3, 3}});
  int64_t paths[5] = {};
  for (bool capture : {false, true})
    for (Dt t : {Dt::F32, Dt::F16, Dt::BF16, Dt::F64})
      for (const ConvCase &cc : all) {
        if (cc.in.size() != 2) continue;
        SCOPED_TRACE(std::string("conv_nhwc ") + dtName(t) + " " + cc.name +
                     (capture ? " captured" : "") + (GetParam() ? " cudnn allowed" : ""));
        std::vector<int64_t> out = convOut(cc, false);
        int64_t kSize = cc.k[0] * cc.k[1];
        HostData x = randomData(t, size_t(cc.n * cc.in[0] * cc.in[1] * cc.c), unsigned(cc.c + 5));
        HostData w = randomData(t, size_t(cc.m * kSize * (cc.c / cc.group)), unsigned(cc.m + 7));
        HostData y0 = randomData(t, size_t(cc.n * out[0] * out[1] * cc.m), 11);
        HostData ref = y0;
        auto call = [&](auto fn, auto... first) {
          return fn(first..., cc.n, cc.c, cc.m, cc.group, int64_t(2), int64_t(1), cc.in[0],
                    cc.in[1], int64_t(1), cc.k[0], cc.k[1], int64_t(1), out[0], out[1], int64_t(1),
                    cc.s[0], cc.s[1], int64_t(1), cc.d[0], cc.d[1], int64_t(0), cc.pb[0], cc.pb[1]);
        };
        auto [cpu, cuda] = fns(t);
        ASSERT_EQ(call(cpu, x.data(), w.data(), ref.data()), 0);
        std::vector<float> ax = x.f32(true), aw = w.f32(true), mag(ref.size());
        ASSERT_EQ(call(coil_cpu_conv_nhwc_f32, ax.data(), aw.data(), mag.data()), 0);
        DevBuf dx(x), dw(w), dy(y0);
        int32_t rc = -1;
        std::optional<CUgraphExec> exec;
        if (capture) {
          ASSERT_EQ(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
          rc = call(cuda, &ctx_, dx.ptr(), dw.ptr(), dy.ptr());
          CUgraph graph = nullptr;
          ASSERT_EQ(cuStreamEndCapture(stream_, &graph), CUDA_SUCCESS);
          CUgraphExec e = nullptr;
          ASSERT_EQ(cuGraphInstantiate(&e, graph, 0), CUDA_SUCCESS);
          cuGraphDestroy(graph);
          ASSERT_EQ(cuGraphLaunch(e, stream_), CUDA_SUCCESS);
          exec = e;
        } else {
          rc = call(cuda, &ctx_, dx.ptr(), dw.ptr(), dy.ptr());
        }
        int32_t path = coil_cuda_conv_last_path();
        ASSERT_EQ(rc, 0) << error_;
        sync();
        if (exec) cuGraphExecDestroy(*exec);
        HostData got(t, ref.size());
        dy.download(got);
        EXPECT_TRUE(closeTo(got, ref, mag, dtTol(t))) << "path " << pathName(path);
        bool pointwise = cc.group == 1 && cc.k[0] == 1 && cc.k[1] == 1 && cc.s[0] == 1 &&
                         cc.s[1] == 1 && cc.pb[0] == 0 && cc.pb[1] == 0;
        if (pointwise) {
          EXPECT_EQ(path, COIL_CUDA_CONV_PATH_GEMM);
        }
        if (!cudnn() || t == Dt::F64) {
          EXPECT_NE(path, COIL_CUDA_CONV_PATH_CUDNN);
        }
        ++paths[path < 0 || path > 4 ? 0 : path];
      }
  std::cout << "[ paths    ] conv_nhwc, cudnn " << (GetParam() ? "allowed" : "disabled") << ":";
  for (int p = 0; p <= 4; ++p) std::cout << " " << pathName(p) << " " << paths[p];
  std::cout << "\n";
}

INSTANTIATE_TEST_SUITE_P(Cudnn, CudaKernelsConv, testing::Values(true, false),
                         [](const testing::TestParamInfo<bool> &i) {
                           return i.param ? std::string("CudnnAllowed")
                                          : std::string("CudnnDisabled");
                         });

} // namespace
} // namespace coil::gputest
