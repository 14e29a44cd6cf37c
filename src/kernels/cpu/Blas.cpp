// OpenBLAS through dlopen, with its core type chosen by the CPU's instructions (Blas.h).
#include "kernels/cpu/Blas.h"

#include "kernels/cpu/CpuFeatures.h"

#include <cblas.h>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <string>

#ifndef COIL_OPENBLAS_DIR
#define COIL_OPENBLAS_DIR ""
#endif

namespace coil::cpu {
namespace {

/// The core type to ask OpenBLAS for on this CPU, or nullptr to leave its choice alone.
const char *coreForThisCpu() {
  if (cpuHasAvx512()) return "SkylakeX";
  if (hasAvx2()) return "Haswell";
  return nullptr;
}

struct Blas {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&cblas_dgemm) dgemm = nullptr;
  std::string library, core, requested, error;

  Blas() {
    const char *forced = std::getenv("OPENBLAS_CORETYPE");
    const char *want = forced && *forced ? nullptr : coreForThisCpu();
    if (want) {
      requested = want;
      setenv("OPENBLAS_CORETYPE", want, 1);
    }
    // The build's OpenBLAS (the OpenMP flavour, which shares libgomp's threads with the
    // generated kernels), then whichever the system's alternatives name.
    std::string dir = COIL_OPENBLAS_DIR;
    void *handle = nullptr;
    for (std::string name : {dir.empty() ? std::string() : dir + "/libopenblas.so.0",
                             std::string("libopenblas.so.0"), std::string("libopenblas.so")}) {
      if (name.empty()) continue;
      handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle) {
        library = name;
        break;
      }
      if (error.empty()) error = dlerror();
    }
    if (want) unsetenv("OPENBLAS_CORETYPE");
    if (!handle) return;
    sgemm = reinterpret_cast<decltype(sgemm)>(dlsym(handle, "cblas_sgemm"));
    dgemm = reinterpret_cast<decltype(dgemm)>(dlsym(handle, "cblas_dgemm"));
    if (!sgemm || !dgemm) {
      error = library + " has no cblas_sgemm/cblas_dgemm";
      sgemm = nullptr;
      return;
    }
    using CoreName = char *(*)();
    if (auto name = reinterpret_cast<CoreName>(dlsym(handle, "openblas_get_corename")))
      if (const char *c = name()) core = c;
  }
};

const Blas &blas() {
  static const Blas b;
  return b;
}

/// Loads OpenBLAS with the library that holds these kernels (see Blas.h).
[[maybe_unused]] const bool kLoadedEarly = (blas(), true);

const Blas &loadedBlas() {
  const Blas &b = blas();
  if (!b.sgemm) {
    std::fprintf(stderr,
                 "coil: cannot load OpenBLAS (%s); install libopenblas0-openmp (Debian/Ubuntu)\n",
                 b.error.c_str());
    std::abort();
  }
  return b;
}

} // namespace

void blasSgemm(bool transA, bool transB, int m, int n, int k, float alpha, const float *a, int lda,
               const float *b, int ldb, float beta, float *c, int ldc) {
  loadedBlas().sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                     transB ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c,
                     ldc);
}

void blasDgemm(bool transA, bool transB, int m, int n, int k, double alpha, const double *a,
               int lda, const double *b, int ldb, double beta, double *c, int ldc) {
  loadedBlas().dgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                     transB ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c,
                     ldc);
}

BlasInfo blasInfo() {
  const Blas &b = blas();
  return {b.library.c_str(), b.core.c_str(), b.requested.c_str()};
}

} // namespace coil::cpu
