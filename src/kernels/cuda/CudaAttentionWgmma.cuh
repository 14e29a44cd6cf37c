// Included by CudaAttention.cu only: the flash-attention kernel on warpgroup MMA (sm_90a):
// the wgmma wrappers and fences, the 128-byte-swizzled tile loads and the kernel with its
// block configuration.
#pragma once

#include "kernels/cuda/CudaAttentionCommon.cuh"

namespace coil::cuda {
namespace {

// --- the Hopper kernel (sm_90a): warpgroup MMA

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) // the helpers of the Hopper kernel
/// wgmma wrappers (generated): d (m64nN f32, the mma fragment layout per warp) += a (this
/// warp's 16 x 16 A fragment in registers) * B (shared memory, descriptor `desc`); scaleD 0
/// overwrites d; TB 1: B is MN-major (transposed).
template <int TB>
__device__ __forceinline__ void wgmmaRS(float (&d)[8][4], const uint32_t (&a)[4], uint64_t desc,
                                        int scaleD, __nv_bfloat16 *) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
               "{%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]),
                 "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]),
                 "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]),
                 "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
                 "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),
                 "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
                 "+f"(d[7][2]), "+f"(d[7][3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scaleD), "n"(TB));
}
template <int TB>
__device__ __forceinline__ void wgmmaRS(float (&d)[8][4], const uint32_t (&a)[4], uint64_t desc,
                                        int scaleD, __half *) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
               "{%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]),
                 "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]),
                 "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]),
                 "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
                 "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),
                 "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
                 "+f"(d[7][2]), "+f"(d[7][3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scaleD), "n"(TB));
}
template <int TB>
__device__ __forceinline__ void wgmmaRS(float (&d)[10][4], const uint32_t (&a)[4], uint64_t desc,
                                        int scaleD, __nv_bfloat16 *) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %45, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
               "%32, %33, %34, %35, %36, %37, %38, %39}, "
               "{%40, %41, %42, %43}, %44, p, 1, 1, %46;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]),
                 "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]),
                 "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]),
                 "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
                 "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),
                 "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
                 "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]),
                 "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scaleD), "n"(TB));
}
template <int TB>
__device__ __forceinline__ void wgmmaRS(float (&d)[10][4], const uint32_t (&a)[4], uint64_t desc,
                                        int scaleD, __half *) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %45, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n80k16.f32.f16.f16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
               "%32, %33, %34, %35, %36, %37, %38, %39}, "
               "{%40, %41, %42, %43}, %44, p, 1, 1, %46;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]),
                 "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]),
                 "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]),
                 "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
                 "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),
                 "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
                 "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]),
                 "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scaleD), "n"(TB));
}
template <int TB>
__device__ __forceinline__ void wgmmaRS(float (&d)[12][4], const uint32_t (&a)[4], uint64_t desc,
                                        int scaleD, __nv_bfloat16 *) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %53, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
               "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, "
               "{%48, %49, %50, %51}, %52, p, 1, 1, %54;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]),
                 "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]),
                 "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]),
                 "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
                 "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),
                 "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
                 "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]),
                 "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]),
                 "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]),
                 "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scaleD), "n"(TB));
}
template <int TB>
__device__ __forceinline__ void wgmmaRS(float (&d)[12][4], const uint32_t (&a)[4], uint64_t desc,
                                        int scaleD, __half *) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %53, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n96k16.f32.f16.f16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
               "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, "
               "{%48, %49, %50, %51}, %52, p, 1, 1, %54;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]),
                 "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]),
                 "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]),
                 "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
                 "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),
                 "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
                 "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]),
                 "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]),
                 "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]),
                 "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scaleD), "n"(TB));
}
template <int TB>
__device__ __forceinline__ void wgmmaRS(float (&d)[16][4], const uint32_t (&a)[4], uint64_t desc,
                                        int scaleD, __nv_bfloat16 *) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
               "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
               "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
               "{%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]),
                 "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]),
                 "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]),
                 "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
                 "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),
                 "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
                 "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]),
                 "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]),
                 "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]),
                 "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]),
                 "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]),
                 "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]),
                 "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scaleD), "n"(TB));
}
template <int TB>
__device__ __forceinline__ void wgmmaRS(float (&d)[16][4], const uint32_t (&a)[4], uint64_t desc,
                                        int scaleD, __half *) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
               "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
               "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
               "{%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]),
                 "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]),
                 "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]),
                 "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
                 "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),
                 "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
                 "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]),
                 "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]),
                 "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]),
                 "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]),
                 "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]),
                 "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]),
                 "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scaleD), "n"(TB));
}

__device__ __forceinline__ void wgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void wgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/// Orders the accumulators' registers after the wgmma that wrote them.
template <int NT> __device__ __forceinline__ void fenceRegs(float (&d)[NT][4]) {
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[i][e])::"memory");
}
/// Makes this thread's completed cp.async writes visible to the tensor cores (async proxy).
__device__ __forceinline__ void fenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
/// A shared-memory matrix descriptor of the 128-byte swizzle mode (PTX "matrix descriptor"):
/// start address, leading and stride byte offsets (in 16-byte units), swizzle mode 1.
__device__ __forceinline__ uint64_t smemDescSw128(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t((lbo >> 4) & 0x3FFF) << 16) |
         (uint64_t((sbo >> 4) & 0x3FFF) << 32) | (uint64_t(1) << 62);
}
#endif

/// Loads ROWS rows of D elements (row r at rowBase + r * stride, zeros from rowsLeft on) into
/// the 128-byte-swizzled layout of the descriptors: the row's 16-byte chunk c lives in column
/// block c / 8 (ROWS * 128 bytes each), at byte r * 128 + ((c % 8) ^ (r % 8)) * 16 of it. Each
/// thread keeps one chunk column, c = thread % (D / 8), and every (threads / (D / 8))-th row,
/// so its shared-memory offsets are fixed (`dst0`, from swizzleDst0) and its global address
/// moves by a constant step. The tile must be 1024-byte aligned.
template <int D, int kThreads, int ROWS, typename T>
__device__ __forceinline__ void loadTileSw(T *tile, uint32_t dst0, const T *rowBase, int64_t stride,
                                           int rowsLeft, const T *dummy) {
  constexpr int kChunks = D / 8, kRowStep = kThreads / kChunks;
  static_assert(kThreads % kChunks == 0 && kRowStep % 8 == 0 && ROWS % kRowStep == 0, "loader");
  const int r0 = int(threadIdx.x) / kChunks, c = int(threadIdx.x) % kChunks;
  const T *src = rowBase + r0 * stride + c * 8;
  const int64_t step = kRowStep * stride;
  const uint32_t dst = smemAddr(tile) + dst0;
#pragma unroll
  for (int it = 0; it < ROWS / kRowStep; ++it) {
    const bool valid = r0 + it * kRowStep < rowsLeft;
    cpAsync16(dst + it * kRowStep * 128, valid ? src : dummy, valid);
    src += step;
  }
}
/// This thread's byte offset in a tile of loadTileSw.
template <int D, int kThreads, int ROWS> __device__ __forceinline__ uint32_t swizzleDst0() {
  constexpr int kChunks = D / 8;
  const int r0 = int(threadIdx.x) / kChunks, c = int(threadIdx.x) % kChunks;
  return uint32_t((c / 8) * ROWS * 128 + r0 * 128 + ((c % 8) ^ (r0 % 8)) * 16);
}

/// S = Q K^T for one tile (S += Q K^T where `accumulate`: S holds a bias), issued and committed
/// (not waited for): Q fragments in registers, K K-major in shared memory at kAddr
/// (loadTileSw's layout: column block kk / 4, 32 bytes per k-step).
template <typename T, int D, int BN>
__device__ __forceinline__ void issueQK(float (&s)[BN / 8][4], const uint32_t (&qf)[D / 16][4],
                                        uint32_t kAddr, bool accumulate = false) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  wgmmaFence();
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    wgmmaRS<0>(s, qf[kk], smemDescSw128(kAddr + (kk / 4) * BN * 128 + (kk % 4) * 32, 16, 1024),
               kk | int(accumulate), (T *)nullptr);
  wgmmaCommit();
#endif
}

/// P as the A fragments of the P V product (T, two per register) from the scores s.
template <typename T, int BN>
__device__ __forceinline__ void pFragments(const float (&s)[BN / 8][4],
                                           uint32_t (&pa)[BN / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) pFragment<T>(s, kk, pa[kk]);
}

/// O += P V for one tile, issued and committed (not waited for): P as A fragments (pa, which
/// the product reads until it is waited for), V MN-major in shared memory at vAddr (column
/// blocks of 64 at BN * 128 bytes, 8-key groups at 1024).
template <typename T, int D, int BN>
__device__ __forceinline__ void issuePVFragments(float (&o)[D / 8][4],
                                                 const uint32_t (&pa)[BN / 16][4], uint32_t vAddr) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  wgmmaFence();
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk)
    wgmmaRS<1>(o, pa[kk], smemDescSw128(vAddr + kk * 2048, BN * 128, 1024), 1, (T *)nullptr);
  wgmmaCommit();
#endif
}

/// O += P V for one tile, issued and committed (not waited for), P from the scores s.
template <typename T, int D, int BN>
__device__ __forceinline__ void issuePV(float (&o)[D / 8][4], const float (&s)[BN / 8][4],
                                        uint32_t vAddr) {
  uint32_t pa[BN / 16][4];
  pFragments<T, BN>(s, pa);
  issuePVFragments<T, D, BN>(o, pa, vAddr);
}

/// The flash kernel on warpgroup MMA: kWG warpgroups of 4 warps, 64 rows each (16 per warp,
/// the same fragment layout as the mma.sync kernel: the masking, softmax and stores are
/// shared). S = Q K^T is wgmma m64nBNk16 with Q fragments in registers and K (K-major) in
/// shared memory; O += P V is wgmma m64nDk16 with P from the S registers and V (MN-major) in
/// shared memory, both 128-byte swizzled. K/V tiles stream through kStages cp.async stages;
/// the S product of tile t + 1 is issued before the softmax of tile t, so the tensor cores
/// work while the warps compute exponentials. Compiled for sm_90a only; D 64 or 128.
template <typename T, int D, int kWG, int BN, int kStages, bool kGeneral>
__global__ void __launch_bounds__(128 * kWG) flashAttnWgmmaKernel(const AttnParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(D % 64 == 0 && BN % 64 == 0 && kStages == 3, "wgmma tiles");
  constexpr int BM = 64 * kWG, LDQ = D + 8, kThreads = 128 * kWG;
  constexpr int kTile = BN * D; // elements of one K or V tile
  extern __shared__ __align__(16) unsigned char smemRaw[];
  const uint32_t align = (1024 - (smemAddr(smemRaw) & 1023)) & 1023;
  T *sK = reinterpret_cast<T *>(smemRaw + align); // kStages tiles, then kStages V tiles
  T *sV = sK + kStages * kTile;
  T *sQ = sV + kStages * kTile; // BM x LDQ (padded)
  RowInfo *rowInfo = reinterpret_cast<RowInfo *>(sQ + BM * LDQ);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tq = lane % 4;
  const T *kg = static_cast<const T *>(p.k);
  const T *vg = static_cast<const T *>(p.v);
  const float scaleLog2 = p.scale * kLog2e;
  const uint32_t dst0 = swizzleDst0<D, kThreads, BN>();

  for (int64_t bid = blockIdx.x; bid < p.totalBlocks; bid += gridDim.x) {
    const BlockWork w = blockWork<BM, BN>(p, bid);
    const T *kBase = kg + p.kOff + w.b * p.ksB + w.hk * p.ksH;
    const T *vBase = vg + p.vOff + w.b * p.vsB + w.hk * p.vsH;
    __syncthreads(); // the previous block of this loop is done with shared memory
    fillRowInfo(p, rowInfo, BM, w);
    auto loadKV = [&](int tile) {
      const int stage = tile % kStages;
      const int64_t n0 = (w.kbBegin + tile) * BN;
      const int rowsLeft = int(min(p.seqK - n0, int64_t(BN)));
      const int64_t ks = p.ksS, vs = p.vsS;
      loadTileSw<D, kThreads, BN>(sK + stage * kTile, dst0, kBase + n0 * ks, ks, rowsLeft, kBase);
      loadTileSw<D, kThreads, BN>(sV + stage * kTile, dst0, vBase + n0 * vs, vs, rowsLeft, vBase);
    };
    auto issueS = [&](float(&s)[BN / 8][4], const uint32_t(&qf)[D / 16][4], int tile) {
      issueQK<T, D, BN>(s, qf, smemAddr(sK + (tile % kStages) * kTile));
    };
    // Waits for every committed load (the newest is the tile needed next) and makes it
    // visible to the tensor cores; the barrier also means every warp is done with the tiles
    // before the one in use.
    auto waitLoads = [&]() {
      cpAsyncWait<0>();
      fenceProxyAsync();
      __syncthreads();
    };

    loadTile<D, LDQ, kThreads, BM>(sQ,
                                   [&](int r, bool &valid) { return qRowPtr<T>(p, w, r, valid); });
    if (w.nTiles > 0) loadKV(0);
    cpAsyncCommit();

    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float rowMax[2] = {-INFINITY, -INFINITY}, rowSum[2] = {0.f, 0.f};
    uint32_t qf[D / 16][4];
    float s[BN / 8][4], sNext[BN / 8][4];
    waitLoads(); // Q and tile 0
    if (w.nTiles > 1) loadKV(1);
    cpAsyncCommit();
    {
      const T *qa = sQ + (warp * 16 + (lane & 15)) * LDQ + (lane / 16) * 8;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        ldmatrixX4(smemAddr(qa + kk * 16), qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3]);
    }
    const RowInfo *ri = rowInfo + warp * 16 + lane / 4;
    if (w.nTiles > 0) {
      issueS(s, qf, 0);
      wgmmaWait<0>();
      fenceRegs(s);
    }

    for (int t = 0; t < w.nTiles; ++t) {
      const bool more = t + 1 < w.nTiles;
      if (more) {
        waitLoads(); // tile t + 1; every warp is past tile t - 1
        // Tile t + 2 goes into the stage of tile t - 1 (3 stages).
        if (t + 2 < w.nTiles) loadKV(t + 2);
        cpAsyncCommit();
        issueS(sNext, qf, t + 1);
      }

      const int64_t n0 = (w.kbBegin + t) * BN;
      const bool edge = n0 + BN > p.seqK || (p.causal && n0 + BN - 1 > w.firstQ + p.causalOffset);
      maskScores<T, kGeneral>(p, s, ri, ri + 8, n0, tq, edge, scaleLog2);
      softmaxStep(s, o, rowMax, rowSum, softmaxMult<kGeneral>(scaleLog2));

      issuePV<T, D, BN>(o, s, smemAddr(sV + (t % kStages) * kTile));
      wgmmaWait<0>();
      fenceRegs(o);
      if (more) {
        fenceRegs(sNext);
#pragma unroll
        for (int i = 0; i < BN / 8; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[i][e] = sNext[i][e];
      }
    }
    cpAsyncWait<0>();
    quadRowSums(rowSum);
    storeRows<T>(p, o, rowMax, rowSum, ri, ri + 8, w.split, tq);
  }
#endif
}

template <int D, int kWG, int BN, int kStages> struct WgmmaCfg {
  static constexpr int BM = 64 * kWG;
  static constexpr int kThreads = 128 * kWG;
  static constexpr size_t kSmem =
      1024 + size_t(2 * kStages) * BN * D * 2 + size_t(BM) * (D + 8) * 2 + size_t(BM) * 32;
};

} // namespace
} // namespace coil::cuda
