/* coil debug printer ABI: the hooks a model.so calls at its DebugPrint lines. Plain C.
 *
 * Every package's wrapper has a DebugPrint line before and after each launch (a kernel or an
 * extern call; the pass in src/wrapper/DebugInstrument.h). The generated code tests
 * `args->debug` (coil_model_run_args of include/coil/model_abi.h) at each line and does nothing
 * more when it is NULL. Otherwise, when enabled[launch id] is nonzero, it calls
 * report(ctx, &launch) with the launch's values. Launch ids index metadata.json "launches".
 *
 * libcoil_runtime sets `debug` from COIL_DEBUG_PRINTER, COIL_DEBUG_KERNELS and COIL_DEBUG_DIR,
 * read when a model is loaded (DESIGN.md §3), unless hooks were installed with
 * coil_model_set_debug_hooks (include/coil/debug.h). model.so includes this header, so it
 * declares nothing of libcoil_runtime (whose coil_model_run differs from model.so's). */
#ifndef COIL_DEBUG_ABI_H
#define COIL_DEBUG_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COIL_DEBUG_ABI_VERSION 1u

typedef enum coil_debug_when { COIL_DEBUG_BEFORE = 0, COIL_DEBUG_AFTER = 1 } coil_debug_when;

typedef enum coil_debug_value_kind {
  COIL_DEBUG_TENSOR = 0, /* a buffer argument */
  COIL_DEBUG_SIZE = 1,   /* an int64 size (symbolic sizes evaluated) */
  COIL_DEBUG_FLOAT = 2   /* a double scalar */
} coil_debug_value_kind;

typedef struct coil_debug_value {
  const char *name;      /* the launch's parameter name (externs: in<i>, out<i>, size<i>, ...) */
  const char *buffer;    /* TENSOR: the package's buffer name; NULL otherwise */
  int32_t kind;          /* coil_debug_value_kind */
  int32_t buffer_id;     /* TENSOR: the buffer's index in the Wrapper IR program; -1 otherwise */
  int32_t dtype;         /* TENSOR: coil_dtype */
  int32_t written;       /* TENSOR: the launch writes it */
  int32_t on_device;     /* TENSOR: data is device memory (of args->device_ctx); 0: host */
  int32_t rank;          /* TENSOR */
  const int64_t *shape;  /* TENSOR: rank dims; the data is contiguous row-major */
  const void *data;      /* TENSOR (NULL when it has no storage) */
  int64_t size;          /* SIZE */
  double number;         /* FLOAT */
} coil_debug_value;

typedef struct coil_debug_launch {
  int32_t id;                    /* index into metadata.json "launches" */
  int32_t when;                  /* coil_debug_when */
  const char *name;              /* the launch's name */
  const coil_debug_value *values;
  int32_t num_values;
  void *device_ctx;              /* args->device_ctx of the run (NULL for CPU packages) */
  char *error;                   /* a hook that fails writes its message here */
  size_t error_size;
} coil_debug_launch;

typedef struct coil_debug_hooks {
  uint32_t abi_version;   /* COIL_DEBUG_ABI_VERSION */
  uint32_t num_launches;  /* entries of `enabled`: the package's launch count */
  const uint8_t *enabled; /* per launch id: nonzero to report it */
  void *ctx;
  /* Returns 0, or nonzero (with a message in launch->error) to fail the run. */
  int32_t (*report)(void *ctx, const coil_debug_launch *launch);
} coil_debug_hooks;

#ifdef __cplusplus
}
#endif

#endif /* COIL_DEBUG_ABI_H */
