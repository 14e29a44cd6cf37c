// GPU tests of coil_cuda_conv_* / coil_cuda_conv_transpose_*: random inputs, every dtype, 1 to 3
// spatial dims, padding (including negative), stride, dilation, groups, depthwise, pointwise,
// and workspaces that force batch chunking or the direct kernels, each compared with the
// coil_cpu_* function on the host.
#include "CudaKernelsTestUtil.h"

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

class CudaKernelsConv : public CudaKernelsTest {
protected:
  void run(Dt t, const ConvCase &cc, bool transpose) {
    SCOPED_TRACE(std::string(transpose ? "conv_transpose " : "conv ") + dtName(t) + " " + cc.name +
                 " workspace " + std::to_string(workspaceBytes_));
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
    int32_t rc = call(transpose ? f.cudaT : f.cuda, &ctx_, dx.ptr(), dw.ptr(), dy.ptr());
    ASSERT_EQ(rc, 0) << error_;
    sync();
    HostData got(t, ref.size());
    dy.download(got);
    EXPECT_TRUE(closeTo(got, ref, mag, dtTol(t)));
  }
  void runAll(bool transpose) {
    for (Dt t : {Dt::F32, Dt::F16, Dt::BF16, Dt::F64})
      for (const ConvCase &cc : cases()) {
        if (transpose && cc.pb[0] < 0) continue; // ONNX pads are >= 0; cropping is conv-only
        run(t, cc, transpose);
        if (HasFatalFailure()) return;
      }
  }
};

TEST_F(CudaKernelsConv, EveryDtypeAndGeometry) {
  runAll(false);
}

TEST_F(CudaKernelsConv, TransposedEveryDtypeAndGeometry) {
  runAll(true);
}

TEST_F(CudaKernelsConv, SmallWorkspaceChunksTheBatch) {
  // Room for the columns of one or two images only: the batch runs in chunks.
  setWorkspace(size_t(16) << 10);
  runAll(false);
  runAll(true);
}

TEST_F(CudaKernelsConv, NoWorkspaceRunsTheDirectKernels) {
  setWorkspace(0);
  runAll(false);
  runAll(true);
}

TEST_F(CudaKernelsConv, InvalidGeometryIsANoOp) {
  HostData y = randomData(Dt::F32, 16, 3), got(Dt::F32, 16);
  DevBuf dy(y);
  // group 3 does not divide 4 channels; nd 4; stride 0.
  EXPECT_EQ(coil_cuda_conv_f32(&ctx_, dy.ptr(), dy.ptr(), dy.ptr(), 1, 4, 4, 3, 1, 4, 1, 1, 1, 1, 1,
                               4, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0),
            0);
  EXPECT_EQ(coil_cuda_conv_f32(&ctx_, dy.ptr(), dy.ptr(), dy.ptr(), 1, 4, 4, 1, 4, 4, 1, 1, 1, 1, 1,
                               4, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0),
            0);
  EXPECT_EQ(coil_cuda_conv_transpose_f32(&ctx_, dy.ptr(), dy.ptr(), dy.ptr(), 1, 4, 4, 1, 1, 4, 1,
                                         1, 1, 1, 1, 4, 1, 1, 0, 1, 1, 1, 1, 1, 0, 0, 0),
            0);
  sync();
  dy.download(got);
  EXPECT_EQ(got.bytes, y.bytes);
}

} // namespace
} // namespace coil::gputest
