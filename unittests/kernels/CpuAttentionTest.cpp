// Tests of the fused attention kernels coil_cpu_attention_* (kernels/cpu/CpuAttention.cpp)
// against a straightforward double reference of their contract (CpuKernels.h), on random
// shapes, strides, grouped-query ratios, masks and their broadcasts, causal offsets, softcap,
// fully masked rows and empty key sequences, for every dtype and every vector path the CPU has.
#include "kernels/cpu/CpuAttention.h"

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/CpuKernelsImpl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace coil::cpu;

enum class Dt { F64, F32, F16, BF16 };
const char *dtName(Dt t) {
  return t == Dt::F64 ? "f64" : t == Dt::F32 ? "f32" : t == Dt::F16 ? "f16" : "bf16";
}
size_t dtSize(Dt t) {
  return t == Dt::F64 ? 8 : t == Dt::F32 ? 4 : 2;
}
/// Relative tolerance (to the output's largest magnitude) of each dtype.
double dtTol(Dt t) {
  return t == Dt::F64 ? 1e-12 : t == Dt::F32 ? 1e-4 : t == Dt::F16 ? 2e-3 : 1e-2;
}

/// A buffer of one dtype; set() rounds a double into it, get() reads the element back exactly.
struct Buf {
  Dt dt = Dt::F32;
  std::vector<unsigned char> bytes;
  Buf(Dt t, size_t n) : dt(t), bytes(n * dtSize(t), 0) {}
  size_t size() const { return bytes.size() / dtSize(dt); }
  void set(size_t i, double v) {
    unsigned char *p = bytes.data() + i * dtSize(dt);
    if (dt == Dt::F64) {
      std::memcpy(p, &v, 8);
    } else if (dt == Dt::F32) {
      float f = float(v);
      std::memcpy(p, &f, 4);
    } else {
      uint16_t h = dt == Dt::F16 ? floatToHalfBits(float(v)) : floatToBf16Bits(float(v));
      std::memcpy(p, &h, 2);
    }
  }
  double get(size_t i) const {
    const unsigned char *p = bytes.data() + i * dtSize(dt);
    if (dt == Dt::F64) {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    if (dt == Dt::F32) {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    uint16_t h;
    std::memcpy(&h, p, 2);
    return dt == Dt::F16 ? halfBitsToFloat(h) : bf16BitsToFloat(h);
  }
  void fillBytes(unsigned char c) { std::fill(bytes.begin(), bytes.end(), c); }
};

/// Where a [n0, n1, n2, last] tensor lies in its buffer: element (a, b, c, e) at
/// off + a*s0 + b*s1 + c*s2 + e.
struct Place {
  int64_t off = 0, s0 = 0, s1 = 0, s2 = 0;
  int64_t at(int64_t a, int64_t b, int64_t c, int64_t e) const {
    return off + a * s0 + b * s1 + c * s2 + e;
  }
};

/// A random layout of [n0, n1, n2, last]: the three outer dims in a random order, each padded
/// a little, a random offset, and with probability `bcast0` a 0 stride for dim 0 (n0 must then
/// be read as broadcast). Returns the buffer size needed.
int64_t randomPlace(std::mt19937 &rng, int64_t n0, int64_t n1, int64_t n2, int64_t last, Place &pl,
                    bool bcast0 = false) {
  std::uniform_int_distribution<int> pad(0, 2), coin(0, 1);
  int order[3] = {0, 1, 2};
  std::shuffle(order, order + 3, rng);
  int64_t ext[3] = {n0, n1, n2}, stride[3] = {0, 0, 0};
  int64_t s = last + (coin(rng) ? pad(rng) : 0);
  for (int k = 2; k >= 0; --k) {
    int d = order[k];
    stride[d] = s;
    s = s * std::max<int64_t>(ext[d], 1) + (coin(rng) ? pad(rng) * last : 0);
  }
  if (bcast0) stride[0] = 0;
  pl.off = coin(rng) ? pad(rng) * 5 : 0;
  pl.s0 = stride[0], pl.s1 = stride[1], pl.s2 = stride[2];
  return pl.off + s + last + 8;
}

struct Case {
  Dt dt = Dt::F32;
  int64_t B = 1, H = 1, HK = 1, S = 1, T = 1, D = 1, DV = 1;
  int64_t maskKind = 0;                               // 0 none, 1 bool, 2 additive
  bool mB = false, mH = false, mQ = false, mK = true; // which mask dims are not broadcast
  int64_t causal = 0, causalOffset = 0;
  double scale = 0.5, softcap = 0;
  bool packedQkv = false; // Q, K, V read out of one [B, S, 3*H*D] buffer
  bool kvBatchShared = false;
  double maskedFraction = 0.2; // of mask elements that mask their key
  int fullyMaskedRows = 0;     // rows of the mask masked everywhere
  std::string str() const {
    return std::string(dtName(dt)) + " B=" + std::to_string(B) + " H=" + std::to_string(H) +
           " HK=" + std::to_string(HK) + " S=" + std::to_string(S) + " T=" + std::to_string(T) +
           " D=" + std::to_string(D) + " DV=" + std::to_string(DV) +
           " mask=" + std::to_string(maskKind) + " mbcast=" + std::to_string(mB) +
           std::to_string(mH) + std::to_string(mQ) + std::to_string(mK) +
           " causal=" + std::to_string(causal) + "@" + std::to_string(causalOffset) +
           " softcap=" + std::to_string(softcap) + (packedQkv ? " packed" : "") +
           (kvBatchShared ? " kv-shared" : "");
  }
};

std::vector<std::pair<AttentionIsa, std::string>> paths();

/// Runs one case on every vector path the CPU has (f64 has only the portable one) and compares
/// each result with the double reference.
void runAllPaths(const Case &c, unsigned seed) {
  SCOPED_TRACE(c.str() + " seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::uniform_real_distribution<double> ud(0.0, 1.0);
  const int64_t B = c.B, H = c.H, HK = c.HK, S = c.S, T = c.T, D = c.D, DV = c.DV;
  Place pq, pk, pv, py;
  int64_t nq, nk, nv;
  Buf *bq, *bk, *bv;
  std::vector<Buf> bufs;
  bufs.reserve(3);
  if (c.packedQkv) {
    // [B, S, 3*H*D]: Q heads, then K heads, then V heads.
    int64_t row = 3 * H * D;
    bufs.emplace_back(c.dt, size_t(B * S * row + 1));
    pq = {0, S * row, D, row};
    pk = {H * D, S * row, D, row};
    pv = {2 * H * D, S * row, D, row};
    for (size_t i = 0; i < bufs[0].size(); ++i) bufs[0].set(i, nd(rng));
    bq = bk = bv = &bufs[0];
  } else {
    nq = randomPlace(rng, B, H, S, D, pq);
    nk = randomPlace(rng, B, HK, T, D, pk, c.kvBatchShared);
    nv = randomPlace(rng, B, HK, T, DV, pv, c.kvBatchShared);
    bufs.emplace_back(c.dt, size_t(nq));
    bufs.emplace_back(c.dt, size_t(nk));
    bufs.emplace_back(c.dt, size_t(nv));
    for (Buf &b : bufs)
      for (size_t i = 0; i < b.size(); ++i) b.set(i, nd(rng));
    bq = &bufs[0], bk = &bufs[1], bv = &bufs[2];
  }
  // Y: a random layout too; everything else in its buffer must stay as poisoned.
  int64_t ny = randomPlace(rng, B, H, S, DV, py);
  py.off = 0;

  // The mask: dense over its non-broadcast dims.
  int64_t e0 = c.mB ? B : 1, e1 = c.mH ? H : 1, e2 = c.mQ ? S : 1, e3 = c.mK ? T : 1;
  int64_t mOff = 3, msK = c.mK ? 1 : 0, msQ = c.mQ ? e3 : 0, msH = c.mH ? e2 * e3 : 0,
          msB = c.mB ? e1 * e2 * e3 : 0;
  size_t mElems = size_t(mOff + e0 * e1 * e2 * e3 + 1);
  Buf maskF(c.dt, mElems);
  std::vector<uint8_t> maskB(mElems, 1);
  const double inf = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < mElems; ++i) {
    bool masked = ud(rng) < c.maskedFraction;
    maskB[i] = masked ? 0 : uint8_t(1 + (i % 3)); // any nonzero keeps
    maskF.set(i, masked ? -inf : nd(rng));
  }
  for (int r = 0; r < c.fullyMaskedRows && c.mK; ++r) {
    // A whole row of keys masked at one (b, h, i) of the mask.
    int64_t a = rng() % e0, h = rng() % e1, i = rng() % e2;
    for (int64_t j = 0; j < e3; ++j) {
      int64_t at = mOff + a * msB + h * msH + i * msQ + j * msK;
      maskB[size_t(at)] = 0;
      maskF.set(size_t(at), -inf);
    }
  }
  const void *maskPtr = c.maskKind == 1   ? static_cast<const void *>(maskB.data())
                        : c.maskKind == 2 ? static_cast<const void *>(maskF.bytes.data())
                                          : nullptr;

  // The reference, in double, on the stored values.
  const int64_t g = H / HK;
  std::vector<double> ref(size_t(B * H * S * DV), 0.0);
  std::vector<double> sc(static_cast<size_t>(T));
  std::vector<bool> live(static_cast<size_t>(T));
  double maxRef = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < S; ++i) {
        int64_t hk = h / g;
        double mx = -inf;
        for (int64_t j = 0; j < T; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d)
            s += bq->get(size_t(pq.at(b, h, i, d))) * bk->get(size_t(pk.at(b, hk, j, d)));
          s *= c.scale;
          if (c.softcap > 0) s = c.softcap * std::tanh(s / c.softcap);
          bool keep = true;
          int64_t mi = mOff + b * msB + h * msH + i * msQ + j * msK;
          if (c.maskKind == 1) keep = maskB[size_t(mi)] != 0;
          if (c.maskKind == 2) {
            double m = maskF.get(size_t(mi));
            if (m == -inf) keep = false;
            s += m;
          }
          if (c.causal && j - i > c.causalOffset) keep = false;
          live[size_t(j)] = keep;
          sc[size_t(j)] = keep ? s : -inf;
          mx = std::max(mx, sc[size_t(j)]);
        }
        if (mx == -inf) continue; // every key masked: zeros
        double sum = 0;
        for (int64_t j = 0; j < T; ++j) sum += live[size_t(j)] ? std::exp(sc[size_t(j)] - mx) : 0;
        for (int64_t j = 0; j < T; ++j) {
          if (!live[size_t(j)]) continue;
          double p = std::exp(sc[size_t(j)] - mx) / sum;
          for (int64_t e = 0; e < DV; ++e)
            ref[size_t(((b * H + h) * S + i) * DV + e)] += p * bv->get(size_t(pv.at(b, hk, j, e)));
        }
      }
  for (double r : ref) maxRef = std::max(maxRef, std::fabs(r));
  double tol = dtTol(c.dt) * std::max(maxRef, 1e-3);
  for (auto [isa, name] : paths()) {
    if (c.dt == Dt::F64 && isa != AttentionIsa::Portable) continue;
    SCOPED_TRACE("path " + name);
    setAttentionIsaLimit(isa);
    Buf by(c.dt, size_t(ny));
    by.fillBytes(0xA5);
    Buf poison = by;
    auto fn = c.dt == Dt::F64   ? coil_cpu_attention_f64
              : c.dt == Dt::F32 ? coil_cpu_attention_f32
              : c.dt == Dt::F16 ? coil_cpu_attention_f16
                                : coil_cpu_attention_bf16;
    int32_t rc = fn(bq->bytes.data(), bk->bytes.data(), bv->bytes.data(), maskPtr, by.bytes.data(),
                    B, H, HK, S, T, D, DV, pq.off, pq.s0, pq.s1, pq.s2, pk.off, pk.s0, pk.s1, pk.s2,
                    pv.off, pv.s0, pv.s1, pv.s2, py.s0, py.s1, py.s2, c.maskKind, mOff, msB, msH,
                    msQ, msK, c.causal, c.causalOffset, c.scale, c.softcap);
    ASSERT_EQ(rc, 0) << coil_cpu_last_error();
    setAttentionIsaLimit(AttentionIsa::Avx512);
    std::vector<bool> written(by.size(), false);
    int bad = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < S; ++i)
          for (int64_t e = 0; e < DV; ++e) {
            size_t at = size_t(py.at(b, h, i, e));
            written[at] = true;
            double got = by.get(at), want = ref[size_t(((b * H + h) * S + i) * DV + e)];
            if (!(std::fabs(got - want) <= tol) && bad++ < 5)
              ADD_FAILURE() << "Y[" << b << "," << h << "," << i << "," << e << "] = " << got
                            << ", reference " << want << " (tolerance " << tol << ")";
          }
    EXPECT_EQ(bad, 0);
    size_t es = dtSize(c.dt);
    for (size_t i = 0; i < by.size(); ++i) {
      if (written[i]) continue;
      ASSERT_EQ(std::memcmp(by.bytes.data() + i * es, poison.bytes.data() + i * es, es), 0)
          << "element " << i << " outside Y was written";
    }
  }
}

/// Every vector path this CPU has.
std::vector<std::pair<AttentionIsa, std::string>> paths() {
  std::vector<std::pair<AttentionIsa, std::string>> r;
  for (auto [isa, name] :
       {std::pair{AttentionIsa::Avx512, "avx512"}, std::pair{AttentionIsa::Avx2, "avx2"},
        std::pair{AttentionIsa::Portable, "portable"}}) {
    setAttentionIsaLimit(isa);
    if (attentionIsa() == isa) r.push_back({isa, name});
  }
  setAttentionIsaLimit(AttentionIsa::Avx512);
  return r;
}

TEST(CpuAttention, HeadDimsAndDtypes) {
  unsigned seed = 1;
  for (Dt dt : {Dt::F32, Dt::F16, Dt::BF16, Dt::F64})
    for (int64_t d : {64, 80, 96, 128, 1, 17, 33}) {
      Case c;
      c.dt = dt;
      c.B = 2, c.H = 4, c.HK = 2, c.S = 70, c.T = 130, c.D = d, c.DV = d;
      c.scale = 1.0 / std::sqrt(double(d));
      runAllPaths(c, seed++);
    }
}

TEST(CpuAttention, RandomShapesStridesMasksAndCausal) {
  std::mt19937 rng(7);
  auto pick = [&](std::initializer_list<int64_t> v) {
    return *(v.begin() + std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng));
  };
  for (int it = 0; it < 120; ++it) {
    Case c;
    c.dt = Dt(it % 4);
    c.B = pick({1, 2, 3});
    c.HK = pick({1, 2, 3});
    c.H = c.HK * pick({1, 2, 4});
    c.S = pick({1, 2, 5, 63, 64, 65, 130});
    c.T = pick({1, 3, 16, 127, 128, 129, 200});
    c.D = pick({1, 7, 16, 31, 64, 80});
    c.DV = pick({1, 5, 16, 48, 64, 96});
    c.maskKind = pick({0, 1, 2});
    c.mB = rng() % 2, c.mH = rng() % 2, c.mQ = rng() % 2, c.mK = rng() % 4 != 0;
    c.maskedFraction = pick({0, 1, 3, 6}) / 10.0;
    c.fullyMaskedRows = int(pick({0, 0, 2}));
    c.causal = rng() % 3 == 0;
    c.causalOffset = pick({0, 0, 1, -1, -3}) + (rng() % 2 ? c.T - c.S : 0);
    c.scale = pick({1, 2, 5}) / 10.0;
    c.softcap = rng() % 5 == 0 ? 3.0 : 0.0;
    c.kvBatchShared = rng() % 5 == 0;
    c.packedQkv = rng() % 6 == 0;
    if (c.packedQkv) c.HK = c.H, c.DV = c.D, c.T = c.S, c.kvBatchShared = false;
    runAllPaths(c, unsigned(1000 + it));
  }
}

TEST(CpuAttention, FullyMaskedRowsGiveZeros) {
  for (Dt dt : {Dt::F32, Dt::BF16}) {
    Case c;
    c.dt = dt;
    c.B = 2, c.H = 2, c.HK = 1, c.S = 9, c.T = 140, c.D = 16, c.DV = 8;
    // Every key masked by the mask, in many rows.
    for (int64_t kind : {1, 2}) {
      c.maskKind = kind;
      c.mB = c.mH = c.mQ = true;
      c.maskedFraction = 1.0;
      runAllPaths(c, 11);
      c.maskedFraction = 0.5;
      c.fullyMaskedRows = 6;
      runAllPaths(c, 12);
    }
    // Rows before the causal diagonal (a negative offset) have no key at all.
    c.maskKind = 0;
    c.causal = 1;
    c.causalOffset = -4;
    runAllPaths(c, 13);
  }
}

TEST(CpuAttention, EmptyKeysWriteZeros) {
  for (Dt dt : {Dt::F32, Dt::F16, Dt::F64}) {
    Case c;
    c.dt = dt;
    c.B = 2, c.H = 3, c.HK = 3, c.S = 4, c.T = 0, c.D = 8, c.DV = 8;
    runAllPaths(c, 21);
    c.maskKind = 2;
    runAllPaths(c, 22);
  }
}

TEST(CpuAttention, LongSequenceCausal) {
  Case c;
  c.B = 1, c.H = 2, c.HK = 1, c.S = 300, c.T = 300, c.D = 64, c.DV = 64;
  c.causal = 1;
  c.scale = 0.125;
  runAllPaths(c, 31);
  c.S = 1; // decode: one query against the whole cache, bottom-right aligned
  c.causalOffset = c.T - c.S;
  runAllPaths(c, 32);
}

TEST(CpuAttention, ExtremeCausalOffsets) {
  // Offsets far beyond the sizes: every key kept, or every key masked (zeros).
  for (int64_t off : {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(),
                      int64_t(1) << 62, -(int64_t(1) << 62)}) {
    Case c;
    c.B = 1, c.H = 2, c.HK = 2, c.S = 5, c.T = 7, c.D = 8, c.DV = 8;
    c.causal = 1;
    c.causalOffset = off;
    runAllPaths(c, 41);
  }
}

TEST(CpuAttention, NaNPropagates) {
  float q[4] = {1, 2, 3, 4}, k[8] = {1, 0, 0, 1, std::nanf(""), 0, 1, 1}, v[4] = {1, 2, 3, 4},
        y[2] = {0, 0};
  for (auto [isa, name] : paths()) {
    setAttentionIsaLimit(isa);
    ASSERT_EQ(coil_cpu_attention_f32(q, k, v, nullptr, y, 1, 1, 1, 1, 2, 4, 2, 0, 0, 0, 4, 0, 0, 0,
                                     4, 0, 0, 0, 2, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0.5, 0),
              0);
    EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1])) << name;
  }
  setAttentionIsaLimit(AttentionIsa::Avx512);
}

TEST(CpuAttention, ArgumentErrors) {
  float buf[64] = {};
  auto call = [&](int64_t heads, int64_t kvHeads, int64_t seqK, int64_t maskKind,
                  int64_t qStrideS) {
    return coil_cpu_attention_f32(buf, buf, buf, buf, buf, 1, heads, kvHeads, 2, seqK, 4, 4, 0, 0,
                                  4, qStrideS, 0, 0, 4, 4, 0, 0, 4, 4, 0, 4, 4, maskKind, 0, 0, 0,
                                  0, 1, 0, 0, 1.0, 0);
  };
  EXPECT_NE(call(3, 2, 2, 0, 4), 0);
  EXPECT_NE(std::string(coil_cpu_last_error()).find("not a multiple of kvHeads"), std::string::npos)
      << coil_cpu_last_error();
  EXPECT_NE(call(2, 0, 2, 0, 4), 0);
  EXPECT_NE(call(1, 1, -1, 0, 4), 0);
  EXPECT_NE(std::string(coil_cpu_last_error()).find("seqK is negative"), std::string::npos)
      << coil_cpu_last_error();
  EXPECT_NE(call(1, 1, 2, 3, 4), 0);
  EXPECT_NE(std::string(coil_cpu_last_error()).find("maskKind"), std::string::npos);
  EXPECT_NE(call(1, 1, 2, 0, std::numeric_limits<int64_t>::max()), 0);
  EXPECT_NE(std::string(coil_cpu_last_error()).find("sizes overflow"), std::string::npos);
  EXPECT_EQ(call(1, 1, 2, 0, 4), 0) << coil_cpu_last_error();
  // Without a mask its offset and strides are not read, negative or not.
  EXPECT_EQ(coil_cpu_attention_f32(buf, buf, buf, nullptr, buf, 1, 1, 1, 2, 2, 4, 4, 0, 0, 4, 4, 0,
                                   0, 4, 4, 0, 0, 4, 4, 0, 4, 4, 0, -1, -1, -1, -1, -1, 0, 0, 1.0,
                                   0),
            0)
      << coil_cpu_last_error();
  EXPECT_NE(coil_cpu_attention_f32(buf, buf, buf, buf, buf, 1, 1, 1, 2, 2, 4, 4, 0, 0, 4, 4, 0, 0,
                                   4, 4, 0, 0, 4, 4, 0, 4, 4, 2, 0, 0, 0, -1, 1, 0, 0, 1.0, 0),
            0);
  EXPECT_NE(std::string(coil_cpu_last_error()).find("maskStrideQ is negative"), std::string::npos)
      << coil_cpu_last_error();
}

} // namespace
