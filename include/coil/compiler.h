/* libcoil_compiler: compile a model (ONNX or coil's text IR) into a package. C ABI.
 *
 *   coil_compile_options o;
 *   coil_compile_options_init(&o);
 *   o.device = "cpu";
 *   if (coil_compile("model.onnx", "model.pkg", &o) != COIL_OK)
 *     fprintf(stderr, "%s\n", coil_compile_last_error());
 *   coil_model *m;
 *   coil_model_load("model.pkg", &m);       // libcoil_runtime (coil/coil.h) runs it
 *
 * The compile runs in the calling process: the model is imported, lowered, fused and turned into
 * C++ (or CUDA C++) sources, which the host C++ compiler (and nvcc for cuda) builds into the
 * package's model.so, through the compile cache (see docs/PACKAGE.md). No C++ exception crosses
 * this interface. Several compiles may run at once on different threads. */
#ifndef COIL_COMPILER_H
#define COIL_COMPILER_H

#include <coil/coil.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Called as each compile stage finishes: "import", "fold", "lower", "schedule", "codegen",
 * "wrapper", "write", "nvcc", "tune", "build" (a stage served by the compile cache is named
 * "<stage> (cached)"), with the seconds it took. */
typedef void (*coil_stage_fn)(void *user, const char *stage, double seconds);
/* Called as the countable work of a stage advances: `task` is "tune" (kernel calls measured),
 * "nvcc" or "build" (translation units compiled, then 1 for the link); done == 0 announces the
 * total before the first item finishes. */
typedef void (*coil_progress_fn)(void *user, const char *task, int64_t done, int64_t total);

typedef struct coil_compile_options {
  size_t struct_size;         /* sizeof(coil_compile_options): set by coil_compile_options_init */
  const char *device;         /* "cpu" (default) or "cuda" */
  const char *cuda_archs;     /* cuda: comma-separated, e.g. "sm_80,sm_90a" (NULL: that default) */
  const char *cpu_target;     /* the CPU instruction set of model.so: "native", "x86-64-v2",
                                 "x86-64-v3", "x86-64-v4" (NULL: the portable default) */
  const char *const *dynamic; /* symbol ranges "NAME=MIN:MAX" (like `coil compile --dynamic`) */
  int64_t num_dynamic;
  int32_t tune;           /* cuda: -1 when this machine has a GPU (default), 0 never, 1 always */
  int32_t verbose;        /* print the toolchain's commands on stderr */
  coil_stage_fn on_stage; /* may be NULL */
  coil_progress_fn on_progress; /* may be NULL */
  void *user;                   /* passed to the callbacks */
  const char *gemm; /* cuda: how GEMMs with pointwise consumers run, like `coil compile --gemm`:
                       "auto" (NULL), "cutlass" (experimental) or "cublaslt" */
} coil_compile_options;

/* The defaults: cpu, the portable CPU target, tuning when a GPU is present, no callbacks. */
void coil_compile_options_init(coil_compile_options *options);

/* Compiles `model_path` (.onnx or .coil) into the package directory `package_dir` (created;
 * files of an earlier package there are replaced). `options` may be NULL (the defaults).
 * Returns COIL_OK, COIL_ERROR_INVALID_ARGUMENT for a problem with the model or the options
 * (the message names the file, node, op and the rule broken), COIL_ERROR_RUNTIME when the
 * environment fails (no compiler, a full disk), COIL_ERROR_INTERNAL for a bug in coil. */
coil_status coil_compile(const char *model_path, const char *package_dir,
                         const coil_compile_options *options);

/* The message of the last failing coil_compile on this thread ("" when none). */
const char *coil_compile_last_error(void);

/* coil's version, e.g. "0.1.0". */
const char *coil_compiler_version(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* COIL_COMPILER_H */
