/* coil CUDA ABI: what the generated host code of a CUDA package (wrapper and kernel launchers,
 * both in model.so) receives from the runtime, and the CUDA extern kernels it calls. Plain C.
 *
 * A CUDA package's kernels are compiled by nvcc into one fatbin (src/kernels.fatbin, sm_80 and
 * sm_90a) at `coil compile` time. The runtime (libcoil_cuda) loads it once per model instance
 * with the driver API and resolves every kernel config's __global__ function by the names that
 * metadata.json lists in "cuda": {"functions": [...]}; functions[i] is the CUfunction of
 * entry i.
 *
 * Every launcher and every CUDA extern takes `const coil_cuda_ctx *` first and returns 0 on
 * success; otherwise nonzero, with a NUL-terminated message naming the kernel or extern written
 * into ctx->error (the CUDA error name and string included). They enqueue work on ctx->stream
 * and never synchronize, except host-fallback externs, which the wrapper brackets with
 * synchronization itself. */
#ifndef COIL_CUDA_ABI_H
#define COIL_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* libcoil_cuda makes one per run: each concurrent run has its own stream (unless the caller
 * gave one), workspace and error buffer (not the run's args->error); blas is shared by the runs
 * of a model instance. During CUDA-graph capture the same ctx is used and nothing runs. */
typedef struct coil_cuda_ctx {
  void *stream;               /* CUstream of this run (may be the legacy default stream, NULL) */
  void *const *functions;     /* CUfunction per kernel config, metadata.json cuda.functions */
  void *blas;                 /* the runtime's GEMM state (opaque; passed to coil_cuda_* externs) */
  void *workspace;            /* device scratch for externs, workspace_bytes long, 256-aligned */
  size_t workspace_bytes;
  char *error;                /* receives a message on failure */
  size_t error_size;
  /* Host memory for host-fallback externs (pinned where possible), 64-byte aligned. */
  void *(*host_alloc)(void *host_ctx, size_t bytes);
  void (*host_free)(void *host_ctx, void *ptr);
  void *host_ctx;
  int32_t device_ordinal;     /* the CUdevice ordinal the context belongs to */
  int32_t sm_version;         /* e.g. 90 for sm_90 */
} coil_cuda_ctx;

#ifdef __cplusplus
}
#endif

#endif /* COIL_CUDA_ABI_H */
