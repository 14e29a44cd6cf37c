/* coil model ABI: the C functions a compiled package's model.so exports, which libcoil_runtime
 * (or any other loader) calls. Generated wrapper code includes this header; it is plain C.
 *
 * A model.so exports (all extern "C"):
 *   uint32_t coil_model_abi_version(void);
 *       COIL_MODEL_ABI_VERSION of the header it was compiled against.
 *   int64_t coil_model_arena_bytes(const int64_t *const *input_shapes);
 *       Bytes of scratch memory (the arena) one run needs for inputs of these shapes: the
 *       planned intermediates, at their 64-byte aligned offsets. input_shapes[i] points to the
 *       dims of input i (rank as in metadata.json). Returns -1 on an impossible value.
 *   int32_t coil_model_run(const coil_model_run_args *args);
 *       Runs the model once. Returns 0 on success; otherwise nonzero with a message in
 *       args->error. Reentrant: several threads may run at once with different args/arenas.
 *
 * Inputs are validated by the caller (the runtime checks dtypes, ranks, every dim against its
 * symbolic constraint and the symbol ranges, see metadata.json); model.so trusts them.
 *
 * Outputs: for each output i, outputs[i] is either a caller buffer of output_capacity[i] bytes
 * (the model writes into it, or fails cleanly if the output needs more bytes), or NULL, in which
 * case the model allocates the output through `alloc` and stores the pointer in outputs[i]
 * (the caller then owns it and releases it with its `free`). The dims of output i are written to
 * output_shapes[i][0..rank). On failure, outputs[i] keeps its value from entry and nothing the
 * model allocated stays allocated.
 *
 * Extern kernels (coil_cpu_* ...) are undefined symbols of model.so, resolved when it is loaded
 * from the global scope: libcoil_runtime promotes itself to RTLD_GLOBAL before loading a model
 * (see src/runtime/Model.cpp).
 *
 * Compatibility: the version changes whenever a struct or a signature here changes; a loader
 * refuses a model.so of another version. */
#ifndef COIL_MODEL_ABI_H
#define COIL_MODEL_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COIL_MODEL_ABI_VERSION 2u

/** Allocates `bytes` bytes (64-byte aligned), or returns NULL; may be asked for 0 bytes. */
typedef void *(*coil_alloc_fn)(void *ctx, size_t bytes);
/** Releases what the matching coil_alloc_fn returned (NULL is a no-op). */
typedef void (*coil_free_fn)(void *ctx, void *ptr);

/* The debug printer's hooks (include/coil/debug_abi.h); NULL when the printer is off. */
struct coil_debug_hooks;

typedef struct coil_model_run_args {
  uint32_t abi_version;               /* COIL_MODEL_ABI_VERSION */
  uint32_t reserved;                  /* 0 */
  const void *const *inputs;          /* per input: its data */
  const int64_t *const *input_shapes; /* per input: its dims */
  const void *const *constants;       /* per constant (metadata.json order): its data */
  void *arena;                        /* coil_model_arena_bytes(input_shapes) bytes, 64-aligned */
  void **outputs;                     /* in: caller buffer or NULL; out: the output's data */
  const int64_t *output_capacity;     /* per output: bytes at outputs[i] (caller buffers only) */
  int64_t *const *output_shapes;      /* per output: where its dims are written */
  coil_alloc_fn alloc;                /* outputs the caller left NULL, data-dependent buffers */
  coil_free_fn free;
  void *alloc_ctx;
  char *error;       /* receives a NUL-terminated message on failure */
  size_t error_size; /* bytes at error */
  /* Packages for a device other than the CPU: the device context of this run (cuda:
   * coil_cuda_ctx of include/coil/cuda_abi.h); inputs, constants, arena and outputs are then
   * device pointers and `alloc`/`free` manage device memory. NULL for CPU packages. */
  void *device_ctx;
  /* Debug printer hooks, or NULL (the generated code then skips every DebugPrint line). */
  const struct coil_debug_hooks *debug;
} coil_model_run_args;

typedef uint32_t (*coil_model_abi_version_fn)(void);
typedef int64_t (*coil_model_arena_bytes_fn)(const int64_t *const *input_shapes);
typedef int32_t (*coil_model_run_fn)(const coil_model_run_args *args);

#ifdef __cplusplus
}
#endif

#endif /* COIL_MODEL_ABI_H */
