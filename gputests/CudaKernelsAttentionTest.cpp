// GPU tests of coil_cuda_attention_*: random inputs (never zeros), outputs poisoned with NaN
// before each call, compared with a double-precision reference computed here from the same
// (rounded) host data and strides: every tensor-core head dim, causal with offsets, bool and
// additive masks with broadcast strides, GQA, strided / offset / fused-QKV inputs, softcap,
// fully masked rows, seqK not a multiple of the key tile, decode with split keys (and too
// small a workspace), f32 and other head dims through the plain kernel, argument errors and
// CUDA-graph capture. f16/bf16 must be within 1e-2 of the reference relative to the output's
// largest magnitude, f32 within 1e-4; rows with no visible key must be exactly 0, and Y's
// elements outside the rows' headDimV (padded row strides) must stay untouched.
#include "CudaKernelsTestUtil.h"

#include <cstdlib>
#include <limits>

namespace coil::gputest {
namespace {

using AttnFn = decltype(&coil_cuda_attention_f32);

AttnFn attnFn(Dt t) {
  return t == Dt::F32   ? coil_cuda_attention_f32
         : t == Dt::F16 ? coil_cuda_attention_f16
                        : coil_cuda_attention_bf16;
}

/// Where Q, K, V and Y live: contiguous [B, H, S, D]; [B, S, H, D] (heads interleaved); one
/// fused QKV buffer [B, S, (H + 2 kvHeads) D] (self-attention); or [B, H, S, D] with padded rows
/// and leading offsets (and K/V shared by every batch: batch stride 0).
enum class Layout { BHSD, BSHD, FusedQKV, Padded };

/// Which dims of the mask [B, H, Sq, Sk] are real (others broadcast with stride 0).
enum class MaskShape {
  Full,
  KeyPadding /*[B,1,1,Sk]*/,
  Shared /*[1,1,Sq,Sk]*/,
  PerRow /*[B,H,Sq,1]*/
};

struct AttnCase {
  Dt t = Dt::BF16;
  int64_t batch = 2, heads = 4, kvHeads = 2, seqQ = 100, seqK = 130, d = 64, dv = 64;
  bool causal = false;
  int64_t causalOffset = 0;
  int maskKind = 0;
  MaskShape maskShape = MaskShape::Full;
  int64_t maskOffset = 3;        ///< leading elements of the mask (even: key masks load pairs)
  double softcap = 0, scale = 0; ///< scale 0: 1 / sqrt(d)
  Layout layout = Layout::BHSD;
  int64_t rowPad = 0;  ///< extra elements per row (Padded layout)
  int64_t offset = 0;  ///< leading elements of Q, K, V (Padded layout)
  size_t bytePad = 0;  ///< bytes in front of every device buffer
  int expectPath = -1; ///< COIL_CUDA_ATTN_PATH_*, kTensorCores, or -1: not checked
};

/// expectPath: the flash kernel, with or without split keys (small problems split).
constexpr int kTensorCores = -2;

std::string describe(const AttnCase &c) {
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "%s B%lld H%lld Hk%lld Sq%lld Sk%lld D%lld Dv%lld causal %d off %lld mask %d "
      "shape %d (offset %lld) softcap %g scale %g layout %d rowPad %lld offset %lld bytePad %zu",
      dtName(c.t), (long long)c.batch, (long long)c.heads, (long long)c.kvHeads, (long long)c.seqQ,
      (long long)c.seqK, (long long)c.d, (long long)c.dv, c.causal, (long long)c.causalOffset,
      c.maskKind, int(c.maskShape), (long long)c.maskOffset, c.softcap, c.scale, int(c.layout),
      (long long)c.rowPad, (long long)c.offset, c.bytePad);
  return buf;
}

/// A strided 4-D view: element (a, b, c, e) at off + a*s0 + b*s1 + c*s2 + e.
struct View {
  int64_t off = 0, s0 = 0, s1 = 0, s2 = 0;
  int64_t at(int64_t a, int64_t b, int64_t c, int64_t e) const {
    return off + a * s0 + b * s1 + c * s2 + e;
  }
};

/// Sets an environment variable for the scope.
struct EnvGuard {
  std::string name;
  EnvGuard(const char *n, const char *v) : name(n) { setenv(n, v, 1); }
  ~EnvGuard() { unsetenv(name.c_str()); }
};

class CudaKernelsAttention : public CudaKernelsTest {
protected:
  void run(const AttnCase &c) {
    SCOPED_TRACE(describe(c));
    const int64_t B = c.batch, H = c.heads, Hk = c.kvHeads, Sq = c.seqQ, Sk = c.seqK, D = c.d,
                  Dv = c.dv;
    const double scale = c.scale != 0 ? c.scale : 1.0 / std::sqrt(double(D));
    unsigned seed = unsigned(B * 7 + H * 131 + Sq * 17 + Sk * 3 + D + c.maskKind * 1000 +
                             int(c.layout) * 77 + (c.causal ? 5 : 0) + int(c.causalOffset));

    // Layouts of Q, K, V (sizes of their buffers) and Y.
    View q, k, v, y;
    size_t qN = 0, kN = 0, vN = 0, yN = 0;
    bool fused = false;
    switch (c.layout) {
    case Layout::BHSD:
      q = {0, H * Sq * D, Sq * D, D}, qN = size_t(B * H * Sq * D);
      k = {0, Hk * Sk * D, Sk * D, D}, kN = size_t(B * Hk * Sk * D);
      v = {0, Hk * Sk * Dv, Sk * Dv, Dv}, vN = size_t(B * Hk * Sk * Dv);
      y = {0, H * Sq * Dv, Sq * Dv, Dv}, yN = size_t(B * H * Sq * Dv);
      break;
    case Layout::BSHD:
      q = {0, Sq * H * D, D, H * D}, qN = size_t(B * H * Sq * D);
      k = {0, Sk * Hk * D, D, Hk * D}, kN = size_t(B * Hk * Sk * D);
      v = {0, Sk * Hk * Dv, Dv, Hk * Dv}, vN = size_t(B * Hk * Sk * Dv);
      y = {0, Sq * H * Dv, Dv, H * Dv}, yN = size_t(B * H * Sq * Dv);
      break;
    case Layout::FusedQKV: {
      // Requires Sq == Sk and D == Dv: one buffer, offsets 0, H*D, (H+Hk)*D.
      const int64_t w = (H + 2 * Hk) * D;
      q = {0, Sq * w, D, w}, k = {H * D, Sq * w, D, w}, v = {(H + Hk) * D, Sq * w, D, w};
      qN = kN = vN = size_t(B * Sq * w);
      y = {0, Sq * H * Dv, Dv, H * Dv}, yN = size_t(B * H * Sq * Dv);
      fused = true;
      break;
    }
    case Layout::Padded: {
      const int64_t lq = D + c.rowPad, lk = D + c.rowPad, lv = Dv + c.rowPad, ly = Dv + c.rowPad;
      q = {c.offset, H * Sq * lq, Sq * lq, lq}, qN = size_t(c.offset + B * H * Sq * lq);
      k = {c.offset, 0, Sk * lk, lk}, kN = size_t(c.offset + Hk * Sk * lk); // batch-broadcast
      v = {c.offset, 0, Sk * lv, lv}, vN = size_t(c.offset + Hk * Sk * lv);
      y = {0, H * Sq * ly, Sq * ly, ly}, yN = size_t(B * H * Sq * ly);
      break;
    }
    }
    // Random Q, K, V (Q scaled by 2: peakier softmax); every element of every buffer is set.
    HostData hq = randomData(c.t, qN, seed), hk = randomData(c.t, kN, seed + 1),
             hv = randomData(c.t, vN, seed + 2);
    for (size_t i = 0; i < qN; ++i) hq.set(i, 2 * hq.get(i));
    if (fused) hk = hv = hq; // one buffer holds all three

    // The mask [B, H, Sq, Sk] with broadcast dims, an offset, and some fully masked rows.
    int64_t mB = B, mH = H, mQ = Sq, mK = Sk;
    if (c.maskShape == MaskShape::KeyPadding) mH = mQ = 1;
    if (c.maskShape == MaskShape::Shared) mB = mH = 1;
    if (c.maskShape == MaskShape::PerRow) mK = 1;
    const int64_t mOff = c.maskOffset;
    View m{mOff, mB == 1 ? 0 : mH * mQ * mK, mH == 1 ? 0 : mQ * mK, mQ == 1 ? 0 : mK};
    const int64_t msK = mK == 1 ? 0 : 1;
    const size_t mN = size_t(mOff + mB * mH * mQ * mK);
    std::vector<unsigned char> mBool(c.maskKind == 1 ? mN : 0);
    HostData mAdd(c.t, c.maskKind == 2 ? mN : 0);
    std::mt19937 rng(seed + 3);
    std::uniform_real_distribution<double> u(0, 1);
    auto maskIdx = [&](int64_t b, int64_t h, int64_t i, int64_t j) {
      return size_t(m.at(mB == 1 ? 0 : b, mH == 1 ? 0 : h, mQ == 1 ? 0 : i, 0) + (mK == 1 ? 0 : j));
    };
    if (c.maskKind == 1) {
      for (auto &x : mBool) x = u(rng) < 0.75 ? 1 + (rng() % 200) : 0;
    } else if (c.maskKind == 2) {
      for (size_t i = 0; i < mN; ++i) mAdd.set(i, u(rng) < 0.1 ? -INFINITY : 4 * u(rng) - 2);
    }
    if (c.maskKind != 0) {
      // Fully masked: one row (or, for key padding, every key of the last batch; for a
      // per-row mask, its single entry of row 1).
      auto kill = [&](size_t i) {
        if (c.maskKind == 1)
          mBool[i] = 0;
        else
          mAdd.set(i, -INFINITY);
      };
      if (c.maskShape == MaskShape::KeyPadding) {
        for (int64_t j = 0; j < Sk; ++j) kill(maskIdx(B - 1, 0, 0, j));
      } else if (Sq > 1) {
        for (int64_t j = 0; j < mK; ++j) kill(maskIdx(0, 0, 1, j));
      }
    }

    // Reference (double) and which rows see no key.
    auto toDouble = [](const HostData &h) {
      std::vector<double> r(h.size());
      for (size_t i = 0; i < r.size(); ++i) r[i] = h.get(i);
      return r;
    };
    const std::vector<double> xq = toDouble(hq), xk = toDouble(hk), xv = toDouble(hv);
    const int64_t group = H / Hk;
    std::vector<double> ref(size_t(B * H * Sq * Dv), 0.0);
    std::vector<char> empty(size_t(B * H * Sq), 0);
    std::vector<double> s(size_t(std::max<int64_t>(Sk, 1)));
    std::vector<char> vis(s.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < Sq; ++i) {
          const int64_t hk2 = h / group;
          double mx = -INFINITY;
          for (int64_t j = 0; j < Sk; ++j) {
            vis[j] = !(c.causal && j > i + c.causalOffset);
            if (c.maskKind == 1 && mBool[maskIdx(b, h, i, j)] == 0) vis[j] = 0;
            if (!vis[j]) continue;
            double dot = 0;
            for (int64_t e = 0; e < D; ++e)
              dot += xq[size_t(q.at(b, h, i, e))] * xk[size_t(k.at(b, hk2, j, e))];
            double x = scale * dot;
            if (c.softcap > 0) x = c.softcap * std::tanh(x / c.softcap);
            if (c.maskKind == 2) x += mAdd.get(maskIdx(b, h, i, j));
            s[j] = x;
            if (x == -INFINITY)
              vis[j] = 0;
            else
              mx = std::max(mx, x);
          }
          const size_t row = size_t((b * H + h) * Sq + i);
          if (mx == -INFINITY) {
            empty[row] = 1;
            continue;
          }
          double sum = 0;
          for (int64_t j = 0; j < Sk; ++j)
            if (vis[j]) sum += (s[j] = std::exp(s[j] - mx));
          for (int64_t j = 0; j < Sk; ++j) {
            if (!vis[j]) continue;
            const double pj = s[j] / sum;
            for (int64_t e = 0; e < Dv; ++e)
              ref[row * size_t(Dv) + size_t(e)] += pj * xv[size_t(v.at(b, hk2, j, e))];
          }
        }

    // Device run; Y poisoned with NaN.
    HostData poison(c.t, yN);
    for (size_t i = 0; i < yN; ++i) poison.set(i, NAN);
    DevBuf dq(hq, c.bytePad), dk(hk, c.bytePad), dv(hv, c.bytePad), dy(poison, c.bytePad);
    DevBuf dmb(std::max<size_t>(mBool.size(), 1), c.bytePad);
    if (!mBool.empty()) {
      ASSERT_EQ(cuMemcpyHtoD(dmb.base + dmb.pad, mBool.data(), mBool.size()), CUDA_SUCCESS);
      ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    }
    DevBuf dma(mAdd, c.bytePad);
    const void *maskPtr = c.maskKind == 1 ? dmb.ptr() : c.maskKind == 2 ? dma.ptr() : nullptr;
    const void *kp = fused ? dq.ptr() : dk.ptr(), *vp = fused ? dq.ptr() : dv.ptr();
    int32_t rc = attnFn(c.t)(&ctx_, dq.ptr(), kp, vp, maskPtr, dy.ptr(), B, H, Hk, Sq, Sk, D, Dv,
                             q.off, q.s0, q.s1, q.s2, k.off, k.s0, k.s1, k.s2, v.off, v.s0, v.s1,
                             v.s2, y.s0, y.s1, y.s2, c.maskKind, m.off, m.s0, m.s1, m.s2, msK,
                             c.causal, c.causalOffset, scale, c.softcap);
    ASSERT_EQ(rc, 0) << error_;
    const int path = coil_cuda_attention_last_path();
    sync();
    if (c.expectPath == kTensorCores) {
      EXPECT_TRUE(path == COIL_CUDA_ATTN_PATH_FLASH || path == COIL_CUDA_ATTN_PATH_SPLIT) << path;
    } else if (c.expectPath >= 0) {
      EXPECT_EQ(path, c.expectPath);
    }
    HostData got(c.t, yN);
    dy.download(got);

    double maxRef = 0, maxErr = 0;
    for (double r : ref) maxRef = std::max(maxRef, std::fabs(r));
    const double tol = c.t == Dt::F32 ? 1e-4 : 1e-2;
    int64_t bad = 0;
    std::vector<char> written(yN, 0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < Sq; ++i) {
          const size_t row = size_t((b * H + h) * Sq + i);
          for (int64_t e = 0; e < Dv; ++e) {
            const size_t yi = size_t(y.at(b, h, i, e));
            written[yi] = 1;
            const double g = got.get(yi), r = ref[row * size_t(Dv) + size_t(e)];
            const bool ok = empty[row] ? g == 0.0 : std::fabs(g - r) <= tol * maxRef;
            if (!ok && bad++ < 5)
              ADD_FAILURE() << "Y(" << b << "," << h << "," << i << "," << e << ") = " << g
                            << ", reference " << r << (empty[row] ? " (no visible key)" : "")
                            << ", max |reference| " << maxRef;
            if (std::isfinite(g)) maxErr = std::max(maxErr, std::fabs(g - r));
          }
        }
    EXPECT_EQ(bad, 0) << "max error " << maxErr << " vs max |reference| " << maxRef;
    int64_t touched = 0;
    for (size_t i = 0; i < yN; ++i)
      if (!written[i] && !std::isnan(got.get(i))) ++touched;
    EXPECT_EQ(touched, 0) << "elements of Y outside its rows were written";
  }
};

TEST_F(CudaKernelsAttention, EveryHeadDimOnTensorCores) {
  for (Dt t : {Dt::BF16, Dt::F16})
    for (int64_t d : {64, 80, 96, 128})
      for (bool causal : {false, true}) {
        AttnCase c;
        c.t = t, c.d = c.dv = d, c.causal = causal;
        c.expectPath = kTensorCores;
        run(c);
        if (HasFatalFailure()) return;
      }
}

TEST_F(CudaKernelsAttention, HopperRunsWarpgroupMma) {
  // On sm_90 the default prefill kernel of head dims 64 and 128 runs on warpgroup MMA (the
  // warp-specialized TMA kernel), with or without a mask, over few or many keys; head dims 80
  // and 96 run mma.sync; other GPUs never run wgmma.
  struct Case {
    int64_t d, seqK;
    int maskKind;
    bool wgmma;
  };
  for (Case k : {Case{64, 250, 0, true}, Case{64, 1100, 0, true}, Case{64, 250, 1, true},
                 Case{80, 250, 0, false}, Case{96, 250, 0, false}, Case{128, 250, 0, true}}) {
    AttnCase c;
    c.d = c.dv = k.d, c.seqQ = 200, c.seqK = k.seqK, c.causal = true, c.maskKind = k.maskKind;
    run(c);
    EXPECT_EQ(coil_cuda_attention_last_wgmma(), ctx_.sm_version == 90 && k.wgmma ? 1 : 0)
        << "head dim " << k.d << ", " << k.seqK << " keys, mask " << k.maskKind << ", sm_"
        << ctx_.sm_version;
  }
}

TEST_F(CudaKernelsAttention, EveryKernelConfiguration) {
  // The prefill kernels behind COIL_CUDA_ATTN_CONFIG: mma.sync a-d everywhere, wgmma e/f and
  // the warp-specialized TMA kernel g-p on sm_90 (elsewhere they fall back to the mma.sync
  // default); split counts 1 and 3.
  for (const char *cfg :
       {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p"})
    for (const char *splits : {"1", "3"}) {
      EnvGuard env("COIL_CUDA_ATTN_CONFIG", cfg), envS("COIL_CUDA_ATTN_SPLITS", splits);
      SCOPED_TRACE(std::string("config ") + cfg + " splits " + splits);
      for (int64_t d : {64, 80, 96, 128}) {
        AttnCase c;
        c.d = c.dv = d, c.causal = d != 80, c.seqQ = 300, c.seqK = 333;
        c.t = d == 96 ? Dt::F16 : Dt::BF16;
        c.expectPath = splits[0] == '1' ? COIL_CUDA_ATTN_PATH_FLASH : COIL_CUDA_ATTN_PATH_SPLIT;
        run(c);
        if (HasFatalFailure()) return;
      }
      AttnCase c;
      c.maskKind = 2, c.causal = true, c.softcap = 10, c.heads = 8, c.kvHeads = 2;
      c.layout = Layout::BSHD, c.d = c.dv = 128;
      run(c);
      c.maskKind = 1, c.softcap = 0, c.layout = Layout::FusedQKV, c.seqK = c.seqQ;
      c.d = c.dv = 64;
      run(c);
      // Key-padding masks (one mask row a block), their pairs aligned: whole tiles load a
      // pair a word, the last tile (334 keys) key by key; on sm_90 as accumulator biases
      // (over 8192 keys, too many for them, read by the masked kernel).
      for (int64_t d : {64, 128})
        for (int64_t seqK : {334, 8300}) {
          if (seqK > 8192 && splits[0] != '1') continue;
          AttnCase kp;
          kp.maskKind = d == 64 ? 2 : 1, kp.maskShape = MaskShape::KeyPadding, kp.maskOffset = 0;
          kp.heads = 8, kp.kvHeads = 2, kp.causal = d == 128, kp.seqQ = seqK > 8192 ? 20 : 300,
          kp.seqK = seqK;
          kp.d = kp.dv = d;
          run(kp);
          // A mask row per query with aligned pairs: read by the masked kernel, a pair a word.
          if (seqK < 8192) {
            kp.maskShape = MaskShape::Full;
            run(kp);
          }
        }
    }
}

TEST_F(CudaKernelsAttention, CausalOffsets) {
  // Top-left (0), bottom-right (seqK - seqQ), negative (the first rows see no key), huge
  // (nothing masked), and more queries than keys.
  const int64_t shapes[][2] = {{70, 150}, {150, 70}, {64, 64}, {1, 77}};
  for (auto &sh : shapes)
    for (int64_t off : {int64_t(0), sh[1] - sh[0], int64_t(-5), int64_t(1) << 40}) {
      for (Dt t : {Dt::BF16, Dt::F32}) {
        AttnCase c;
        c.t = t, c.seqQ = sh[0], c.seqK = sh[1], c.causal = true, c.causalOffset = off;
        c.d = c.dv = t == Dt::F32 ? 48 : 96;
        run(c);
        if (HasFatalFailure()) return;
      }
    }
}

TEST_F(CudaKernelsAttention, MasksAndBroadcasts) {
  // Key masks (KeyPadding) on sm_90 run as accumulator biases by default; with
  // COIL_CUDA_ATTN_KEY_BIAS=0 the masked kernels read them.
  for (const char *bias : {"1", "0"})
    for (Dt t : {Dt::BF16, Dt::F16, Dt::F32})
      for (int kind : {1, 2})
        for (MaskShape shape :
             {MaskShape::Full, MaskShape::KeyPadding, MaskShape::Shared, MaskShape::PerRow})
          for (bool causal : {false, true}) {
            EnvGuard env("COIL_CUDA_ATTN_KEY_BIAS", bias);
            AttnCase c;
            c.t = t, c.maskKind = kind, c.maskShape = shape, c.causal = causal;
            c.seqQ = 67, c.seqK = 200, c.d = c.dv = 64;
            c.expectPath = t == Dt::F32 ? COIL_CUDA_ATTN_PATH_PLAIN : kTensorCores;
            run(c);
            if (HasFatalFailure()) return;
            // Even offsets: a key mask's pairs are aligned words (odd ones: loaded key by key).
            c.maskOffset = 2;
            run(c);
            if (HasFatalFailure()) return;
          }
}

TEST_F(CudaKernelsAttention, Softcap) {
  for (Dt t : {Dt::BF16, Dt::F16, Dt::F32})
    for (int kind : {0, 2}) {
      AttnCase c;
      c.t = t, c.softcap = 3.0, c.scale = 0.5, c.maskKind = kind, c.causal = kind == 2;
      c.d = c.dv = 80;
      c.expectPath = t == Dt::F32 ? COIL_CUDA_ATTN_PATH_PLAIN : kTensorCores;
      run(c);
    }
}

TEST_F(CudaKernelsAttention, GroupedQueryHeads) {
  const int64_t hs[][2] = {{8, 2}, {6, 1}, {12, 4}, {5, 5}};
  for (auto &h : hs)
    for (bool causal : {false, true}) {
      AttnCase c;
      c.heads = h[0], c.kvHeads = h[1], c.causal = causal, c.seqQ = 45, c.seqK = 190;
      c.d = c.dv = 128;
      c.expectPath = kTensorCores;
      run(c);
      if (HasFatalFailure()) return;
    }
}

TEST_F(CudaKernelsAttention, StridedAndOffsetOperands) {
  for (Dt t : {Dt::BF16, Dt::F16}) {
    AttnCase c;
    c.t = t, c.layout = Layout::BSHD, c.expectPath = kTensorCores;
    run(c);
    c.layout = Layout::FusedQKV, c.seqK = c.seqQ = 150, c.causal = true;
    run(c);
    c.d = c.dv = 128, c.heads = 4, c.kvHeads = 4;
    run(c);
    // Padded rows with a 16-byte-aligned offset, K/V shared by the batches: fast path.
    c = AttnCase{};
    c.t = t, c.layout = Layout::Padded, c.rowPad = 8, c.offset = 16, c.d = c.dv = 96;
    c.expectPath = kTensorCores;
    run(c);
    // Rows not 16-byte aligned: the plain kernel, still correct.
    c.rowPad = 3, c.offset = 5, c.expectPath = COIL_CUDA_ATTN_PATH_PLAIN;
    run(c);
    c.rowPad = 8, c.offset = 8, c.bytePad = 2;
    run(c);
  }
}

TEST_F(CudaKernelsAttention, OtherHeadDimsRunThePlainKernel) {
  const int64_t dims[][2] = {{32, 32}, {48, 48}, {160, 160}, {64, 32}, {8, 200}, {256, 256}};
  for (Dt t : {Dt::BF16, Dt::F32})
    for (auto &dd : dims) {
      AttnCase c;
      c.t = t, c.d = dd[0], c.dv = dd[1], c.causal = dd[0] == 48;
      c.expectPath = COIL_CUDA_ATTN_PATH_PLAIN;
      run(c);
    }
}

TEST_F(CudaKernelsAttention, Float32EveryFeature) {
  AttnCase c;
  c.t = Dt::F32, c.heads = 8, c.kvHeads = 2, c.causal = true, c.causalOffset = 30;
  c.maskKind = 2, c.softcap = 4, c.layout = Layout::BSHD, c.d = c.dv = 128;
  c.expectPath = COIL_CUDA_ATTN_PATH_PLAIN;
  run(c);
}

TEST_F(CudaKernelsAttention, DecodeSplitsTheKeys) {
  for (Dt t : {Dt::BF16, Dt::F16})
    for (int64_t sk : {4096, 1000}) {
      AttnCase c;
      c.t = t, c.batch = 4, c.heads = 32, c.kvHeads = 8, c.seqQ = 1, c.seqK = sk;
      c.d = c.dv = 128, c.expectPath = COIL_CUDA_ATTN_PATH_SPLIT;
      run(c);
      // A few new tokens against a cache: causal, bottom-right aligned.
      c.seqQ = 3, c.causal = true, c.causalOffset = sk - 3;
      run(c);
      // With a key-padding mask.
      c.maskKind = 1, c.maskShape = MaskShape::KeyPadding;
      run(c);
    }
}

TEST_F(CudaKernelsAttention, DecodeWithLittleOrNoWorkspace) {
  AttnCase c;
  c.batch = 2, c.heads = 8, c.kvHeads = 2, c.seqQ = 1, c.seqK = 3000, c.d = c.dv = 64;
  // Room for 2 splits only: 2 * 16 rows * (64 + 1) floats, plus alignment.
  setWorkspace(2 * 16 * 64 * 4 + 256 + 2 * 16 * 4);
  c.expectPath = COIL_CUDA_ATTN_PATH_SPLIT;
  run(c);
  setWorkspace(0);
  c.expectPath = COIL_CUDA_ATTN_PATH_FLASH;
  run(c);
}

TEST_F(CudaKernelsAttention, ForcedSplitsWithEmptySplits) {
  // Many splits on a causal, masked problem: some splits see no key for some rows.
  EnvGuard env("COIL_CUDA_ATTN_SPLITS", "7");
  for (Dt t : {Dt::BF16, Dt::F16}) {
    AttnCase c;
    c.t = t, c.seqQ = 40, c.seqK = 500, c.causal = true, c.causalOffset = 10, c.maskKind = 2;
    c.d = c.dv = 64, c.expectPath = COIL_CUDA_ATTN_PATH_SPLIT;
    run(c);
    c.maskKind = 0, c.causalOffset = -3, c.d = c.dv = 80;
    run(c);
  }
}

TEST_F(CudaKernelsAttention, LongerSequence) {
  AttnCase c;
  c.batch = 1, c.heads = 4, c.kvHeads = 4, c.seqQ = c.seqK = 1024, c.d = c.dv = 128;
  c.causal = true, c.expectPath = kTensorCores;
  run(c);
}

TEST_F(CudaKernelsAttention, EmptyKeysWriteZerosAndEmptyOutputsNothing) {
  AttnCase c;
  c.seqK = 0;
  run(c); // every row is empty: zeros
  // batch 0 / seqQ 0 / heads 0: nothing written, returns 0.
  HostData poison(Dt::BF16, 64);
  for (size_t i = 0; i < 64; ++i) poison.set(i, NAN);
  DevBuf a(poison), y(poison);
  for (int which = 0; which < 3; ++which) {
    int64_t b = which == 0 ? 0 : 1, sq = which == 1 ? 0 : 2, h = which == 2 ? 0 : 2;
    ASSERT_EQ(coil_cuda_attention_bf16(&ctx_, a.ptr(), a.ptr(), a.ptr(), nullptr, y.ptr(), b, h,
                                       h == 0 ? 1 : 2, sq, 2, 8, 8, 0, 32, 16, 8, 0, 32, 16, 8, 0,
                                       32, 16, 8, 32, 16, 8, 0, 0, 0, 0, 0, 0, 0, 0, 1.0, 0.0),
              0)
        << error_;
    EXPECT_EQ(coil_cuda_attention_last_path(), COIL_CUDA_ATTN_PATH_NONE);
  }
  sync();
  HostData got(Dt::BF16, 64);
  y.download(got);
  for (size_t i = 0; i < 64; ++i) EXPECT_TRUE(std::isnan(got.get(i))) << i;
}

TEST_F(CudaKernelsAttention, InvalidArgumentsFailWithAMessage) {
  DevBuf a(size_t(4096)), yb(size_t(4096));
  void *p = a.ptr();
  auto call = [&](int64_t heads, int64_t kvHeads, int64_t seqQ, int64_t maskKind,
                  int64_t qStrideS) {
    error_[0] = 0;
    return coil_cuda_attention_f16(&ctx_, p, p, p, p, yb.ptr(), 1, heads, kvHeads, seqQ, 4, 8, 8, 0,
                                   0, 0, qStrideS, 0, 0, 0, 8, 0, 0, 0, 8, 0, 0, 8, maskKind, 0, 0,
                                   0, 0, 1, 0, 0, 1.0, 0.0);
  };
  EXPECT_NE(call(2, 2, -1, 0, 8), 0);
  EXPECT_NE(std::string(error_).find("coil_cuda_attention_f16: sizes must be >= 0"),
            std::string::npos)
      << error_;
  EXPECT_NE(call(3, 2, 2, 0, 8), 0);
  EXPECT_NE(std::string(error_).find("multiple of kvHeads"), std::string::npos) << error_;
  EXPECT_NE(call(2, 2, 2, 3, 8), 0);
  EXPECT_NE(std::string(error_).find("maskKind"), std::string::npos) << error_;
  EXPECT_NE(call(2, 2, 2, 0, -8), 0);
  EXPECT_NE(std::string(error_).find("strides must be >= 0"), std::string::npos) << error_;
  EXPECT_NE(call(2, 2, int64_t(1) << 62, 0, int64_t(1) << 40), 0);
  EXPECT_NE(std::string(error_).find("overflow"), std::string::npos) << error_;
  EXPECT_EQ(call(2, 2, 2, 0, 8), 0) << error_; // the valid call succeeds
  sync();
}

TEST_F(CudaKernelsAttention, CapturesIntoACudaGraph) {
  // Decode (split keys + combine) and prefill, captured and replayed.
  for (int64_t sq : {1, 200}) {
    const int64_t B = 2, H = 8, Hk = 2, Sk = 2048, D = 128;
    HostData hq = randomData(Dt::BF16, size_t(B * H * sq * D), 11),
             hk = randomData(Dt::BF16, size_t(B * Hk * Sk * D), 12),
             hv = randomData(Dt::BF16, size_t(B * Hk * Sk * D), 13);
    HostData poison(Dt::BF16, size_t(B * H * sq * D));
    for (size_t i = 0; i < poison.size(); ++i) poison.set(i, NAN);
    DevBuf dq(hq), dk(hk), dv(hv), dy1(poison), dy2(poison);
    auto call = [&](void *y) {
      return coil_cuda_attention_bf16(&ctx_, dq.ptr(), dk.ptr(), dv.ptr(), nullptr, y, B, H, Hk, sq,
                                      Sk, D, D, 0, H * sq * D, sq * D, D, 0, Hk * Sk * D, Sk * D, D,
                                      0, Hk * Sk * D, Sk * D, D, H * sq * D, sq * D, D, 0, 0, 0, 0,
                                      0, 0, 1, Sk - sq, 0.088, 0.0);
    };
    ASSERT_EQ(call(dy1.ptr()), 0) << error_;
    sync();
    CUgraph graph;
    CUgraphExec exec;
    ASSERT_EQ(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    ASSERT_EQ(call(dy2.ptr()), 0) << error_;
    ASSERT_EQ(cuStreamEndCapture(stream_, &graph), CUDA_SUCCESS);
    ASSERT_EQ(cuGraphInstantiate(&exec, graph, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuGraphLaunch(exec, stream_), CUDA_SUCCESS);
    sync();
    HostData a(Dt::BF16, poison.size()), b(Dt::BF16, poison.size());
    dy1.download(a);
    dy2.download(b);
    EXPECT_EQ(a.bytes, b.bytes);
    for (size_t i = 0; i < a.size(); ++i)
      if (std::isnan(a.get(i))) {
        ADD_FAILURE() << "NaN at " << i;
        break;
      }
    cuGraphExecDestroy(exec);
    cuGraphDestroy(graph);
  }
}

} // namespace
} // namespace coil::gputest
