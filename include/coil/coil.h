/* libcoil_runtime: load a compiled coil package and run it. C ABI.
 *
 * Conventions: functions are named coil_<object>_<verb>; they return a coil_status, and on
 * failure coil_last_error() returns a message (thread-local, valid until the next failing call
 * on the same thread). No C++ exception crosses this interface.
 *
 *   coil_model *m;
 *   if (coil_model_load("pkg", &m) != COIL_OK) { fprintf(stderr, "%s\n", coil_last_error()); }
 *   coil_tensor in = {data, COIL_DTYPE_F32, 2, shape};
 *   coil_output out = {0};             // data NULL: the runtime allocates the output
 *   coil_model_run(m, &in, 1, &out, 1);
 *   ... out.data, out.rank, out.shape ...
 *   coil_output_release(&out);
 *   coil_model_free(m);
 *
 * Concurrency: coil_model_run may be called from several threads at once on one model (each
 * run takes its own scratch arena from a pool). Loading and freeing are not concurrent with
 * runs of the same model. */
#ifndef COIL_COIL_H
#define COIL_COIL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum coil_status {
  COIL_OK = 0,
  COIL_ERROR_INVALID_ARGUMENT = 1, /* bad call: null pointers, wrong counts, inputs that do not
                                      match the compiled signature, output buffers too small */
  COIL_ERROR_PACKAGE = 2,          /* missing or corrupt package file, incompatible version */
  COIL_ERROR_RUNTIME = 3,          /* the run failed: out of memory, a model error */
  COIL_ERROR_INTERNAL = 4          /* a bug in coil */
} coil_status;

/* Element types; the values are part of the ABI. */
typedef enum coil_dtype {
  COIL_DTYPE_F64 = 0,
  COIL_DTYPE_F32 = 1,
  COIL_DTYPE_F16 = 2,
  COIL_DTYPE_BF16 = 3,
  COIL_DTYPE_I64 = 4,
  COIL_DTYPE_I32 = 5,
  COIL_DTYPE_I16 = 6,
  COIL_DTYPE_I8 = 7,
  COIL_DTYPE_U64 = 8,
  COIL_DTYPE_U32 = 9,
  COIL_DTYPE_U16 = 10,
  COIL_DTYPE_U8 = 11,
  COIL_DTYPE_BOOL = 12
} coil_dtype;

#define COIL_MAX_RANK 16

typedef struct coil_model coil_model;

/* An input: contiguous row-major data of `shape` (rank dims). */
typedef struct coil_tensor {
  const void *data;
  coil_dtype dtype;
  int64_t rank;
  const int64_t *shape;
} coil_tensor;

/* An output. On entry: `data` is a caller buffer of `capacity` bytes, or NULL for an output the
 * runtime allocates (release it with coil_output_release). On return: data, dtype, rank and
 * shape describe the output. */
typedef struct coil_output {
  void *data;
  int64_t capacity;
  coil_dtype dtype;
  int64_t rank;
  int64_t shape[COIL_MAX_RANK];
  int32_t owned; /* set by the run: 1 when the runtime allocated `data` (host memory), 2 when
                    it allocated device memory (coil_model_run_device), else 0 */
} coil_output;

/* Description of an input or output of a model; pointers valid while the model is loaded. */
typedef struct coil_tensor_info {
  const char *name;
  coil_dtype dtype;
  int64_t rank;
  const char *const *dims; /* per dim, its symbolic size as text: "N", "64", "2*N + 1" */
} coil_tensor_info;

/* The message of the last failing call on this thread ("" if none). */
const char *coil_last_error(void);
const char *coil_dtype_name(coil_dtype dtype);
/* COIL_MODEL_ABI_VERSION of the model.so files this runtime loads. */
uint32_t coil_runtime_model_abi_version(void);

/* Loads the package directory `path` (metadata.json, weights.bin mmapped, model.so). */
coil_status coil_model_load(const char *path, coil_model **out);
void coil_model_free(coil_model *model);

int64_t coil_model_num_inputs(const coil_model *model);
int64_t coil_model_num_outputs(const coil_model *model);
coil_status coil_model_input_info(const coil_model *model, int64_t index, coil_tensor_info *out);
coil_status coil_model_output_info(const coil_model *model, int64_t index, coil_tensor_info *out);
/* Symbols (dynamic sizes) of the model and their inclusive ranges. */
int64_t coil_model_num_symbols(const coil_model *model);
coil_status coil_model_symbol_info(const coil_model *model, int64_t index, const char **name,
                                   int64_t *min, int64_t *max);

/* Runs the model: inputs are checked against the compiled signature (dtype, rank, every dim
 * against its symbolic size, each symbol within its range) before anything runs. */
coil_status coil_model_run(coil_model *model, const coil_tensor *inputs, int64_t num_inputs,
                           coil_output *outputs, int64_t num_outputs);

/* Where a package's buffers live and its kernels run (metadata.json "device"). */
typedef enum coil_device { COIL_DEVICE_CPU = 0, COIL_DEVICE_CUDA = 1 } coil_device;
coil_device coil_model_device(const coil_model *model);

/* Runs a model of a device package (cuda) on device memory: every inputs[i].data and every
 * caller output buffer is device memory of the model's device; outputs left NULL are allocated
 * on the device by the runtime (owned == 2; release with coil_output_release). The work is
 * enqueued on `stream` (a CUstream / cudaStream_t, COIL_STREAM_LEGACY for the legacy default
 * stream, COIL_STREAM_PER_THREAD for the per-thread one; NULL: the runtime's own stream,
 * synchronized before returning); output shapes are set on return, the data is ready when the
 * stream reaches the end of the enqueued work (no host synchronization but for NULL). coil_model_run (host memory) works for device packages too: it
 * copies inputs in and outputs out and returns when they are ready.
 * CUDA graphs: each input-shape signature (with the device pointers of the call) is captured on
 * its first run and replayed afterwards; off when the package has host-fallback externs, when
 * the debug printer is on, or with COIL_CUDA_GRAPHS=0 in the environment; at most
 * COIL_CUDA_MAX_GRAPHS (default 16) per loaded model, each with its own scratch arena. Device
 * outputs the runtime allocates are stream-ordered allocations on `stream`: use them there, or
 * anywhere once that stream is synchronized. The device is
 * COIL_CUDA_DEVICE (an ordinal, default 0); libcoil_cuda.so is looked up next to
 * libcoil_runtime.so unless COIL_CUDA_LIBRARY names it. */
/* The CUDA default streams as `stream` arguments: the handles CUDA itself gives them
 * (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD), since NULL asks for the runtime's own stream. A
 * caller on the legacy default stream (PyTorch's default) passes COIL_STREAM_LEGACY. */
#define COIL_STREAM_LEGACY ((void *)0x1)
#define COIL_STREAM_PER_THREAD ((void *)0x2)
coil_status coil_model_run_device(coil_model *model, const coil_tensor *inputs,
                                  int64_t num_inputs, coil_output *outputs, int64_t num_outputs,
                                  void *stream);

/* Releases an output the runtime allocated (owned == 1) and sets data to NULL; no-op
 * otherwise. Device outputs (owned == 2) are freed with cuMemFree, which does not wait: the
 * stream they were produced on must be done with them. */
void coil_output_release(coil_output *output);

#ifdef __cplusplus
}
#endif

#endif /* COIL_COIL_H */
