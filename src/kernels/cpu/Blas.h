// BLAS for the CPU kernels: OpenBLAS, loaded by coil rather than by the dynamic linker, so that
// coil chooses its kernels before the library initializes.
//
// OpenBLAS picks its GEMM kernels when it is loaded, from the CPU's family and model numbers.
// A CPU it does not know by number (a newer Xeon, or a virtual machine that reports a generic
// "Intel Xeon Processor") gets the SSE3 kernels of 2004 ("Prescott"), 2.4x slower on AVX-512
// machines. Loading it with dlopen lets coil name the core by the instructions the CPU has
// (AVX-512 F/DQ/BW/VL: SkylakeX; AVX2 and FMA: Haswell) through OPENBLAS_CORETYPE, unless the
// user has set that variable. The library is loaded once, when the first coil library that
// holds these kernels is loaded (the runtime, the compiler), while that process is still
// single-threaded in practice; a process that loaded OpenBLAS already shares its instance.
#pragma once

namespace coil::cpu {

/// c (m x n, ldc) = alpha * op(a) * op(b) + beta * c, row-major; op transposes when asked.
void blasSgemm(bool transA, bool transB, int m, int n, int k, float alpha, const float *a, int lda,
               const float *b, int ldb, float beta, float *c, int ldc);
void blasDgemm(bool transA, bool transB, int m, int n, int k, double alpha, const double *a,
               int lda, const double *b, int ldb, double beta, double *c, int ldc);

/// How OpenBLAS was loaded, for reports and tests: the file, its kernels ("SkylakeX") and the
/// core type coil asked for ("" when it asked for none: the user set OPENBLAS_CORETYPE, or the
/// CPU has neither AVX-512 nor AVX2).
struct BlasInfo {
  const char *library;
  const char *core;
  const char *requested;
};
BlasInfo blasInfo();

} // namespace coil::cpu
