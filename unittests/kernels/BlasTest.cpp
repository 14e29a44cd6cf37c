// Tests of kernels/cpu/Blas.h: OpenBLAS is loaded, runs on the kernels this CPU's instructions
// call for (not the SSE3 fallback it picks for CPUs it does not know by model number), and its
// GEMMs are right, transposes included.
#include "kernels/cpu/Blas.h"

#include <cstdlib>
#include <gtest/gtest.h>
#include <random>
#include <string>
#include <vector>

namespace coil::cpu {
namespace {

TEST(Blas, LoadsOpenBlasWithTheCoreThisCpuCallsFor) {
  BlasInfo info = blasInfo();
  ASSERT_STRNE(info.library, "") << "OpenBLAS did not load";
  EXPECT_STRNE(info.core, "");
  const char *forced = std::getenv("OPENBLAS_CORETYPE");
  if (forced && *forced) {
    EXPECT_STREQ(info.requested, "") << "the user's OPENBLAS_CORETYPE is left alone";
    return;
  }
  // The variable coil sets for the load is gone afterwards.
  EXPECT_EQ(std::getenv("OPENBLAS_CORETYPE"), nullptr);
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
    EXPECT_STREQ(info.requested, "SkylakeX");
    EXPECT_STRNE(info.core, "Prescott");
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_STREQ(info.requested, "Haswell");
    EXPECT_STRNE(info.core, "Prescott");
  }
#endif
}

template <typename T, typename F> void checkGemm(F gemm, bool ta, bool tb, double tol) {
  const int m = 37, n = 29, k = 45;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<T> a(m * k), b(k * n), c(m * n), c0(m * n);
  for (T &x : a) x = T(u(rng));
  for (T &x : b) x = T(u(rng));
  for (T &x : c0) x = T(u(rng));
  c = c0;
  const T alpha = T(0.75), beta = T(-0.5);
  gemm(ta, tb, m, n, k, alpha, a.data(), ta ? m : k, b.data(), tb ? k : n, beta, c.data(), n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int p = 0; p < k; ++p)
        acc += double(a[ta ? p * m + i : i * k + p]) * double(b[tb ? j * k + p : p * n + j]);
      double want = double(alpha) * acc + double(beta) * double(c0[i * n + j]);
      ASSERT_NEAR(double(c[i * n + j]), want, tol)
          << "ta " << ta << " tb " << tb << " at " << i << "," << j;
    }
}

TEST(Blas, SgemmAndDgemmWithEveryTranspose) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      checkGemm<float>(blasSgemm, ta, tb, 1e-4);
      checkGemm<double>(blasDgemm, ta, tb, 1e-12);
    }
}

} // namespace
} // namespace coil::cpu
