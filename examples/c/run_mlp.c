/* Runs a package compiled from examples/mlp.onnx (x: f32[batch, 16] -> probs: f32[batch, 10])
 * through libcoil_runtime's C ABI, on a batch of 4 rows, and prints the probabilities.
 *
 *   coil compile examples/mlp.onnx -o mlp.pkg
 *   cc examples/c/run_mlp.c $(pkg-config --cflags --libs coil) -o run_mlp   # or CMake, below
 *   ./run_mlp mlp.pkg
 *
 * (pkg-config finds coil.pc with PKG_CONFIG_PATH=<prefix>/lib/pkgconfig; the CMake build of
 * examples/CMakeLists.txt uses find_package(coil).) */
#include <coil/coil.h>
#include <math.h>
#include <stdio.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s PACKAGE_DIR\n", argv[0]);
    return 1;
  }
  coil_model *model = NULL;
  if (coil_model_load(argv[1], &model) != COIL_OK) {
    fprintf(stderr, "error: %s\n", coil_last_error());
    return 1;
  }
  /* The signature, as compiled: names, dtypes and symbolic dims. */
  coil_tensor_info info;
  for (int64_t i = 0; i < coil_model_num_inputs(model); ++i) {
    coil_model_input_info(model, i, &info);
    printf("input %s: %s[", info.name, coil_dtype_name(info.dtype));
    for (int64_t d = 0; d < info.rank; ++d) printf("%s%s", d ? ", " : "", info.dims[d]);
    printf("]\n");
  }

  enum { BATCH = 4, FEATURES = 16 };
  float x[BATCH * FEATURES];
  for (int i = 0; i < BATCH * FEATURES; ++i) x[i] = sinf(0.1f * (float)i);
  int64_t shape[2] = {BATCH, FEATURES};
  coil_tensor input = {x, COIL_DTYPE_F32, 2, shape};
  coil_output output = {0}; /* data NULL: the runtime allocates it */
  if (coil_model_run(model, &input, 1, &output, 1) != COIL_OK) {
    fprintf(stderr, "error: %s\n", coil_last_error());
    coil_model_free(model);
    return 1;
  }
  const float *probs = (const float *)output.data;
  printf("probs: %s[%lld, %lld]\n", coil_dtype_name(output.dtype), (long long)output.shape[0],
         (long long)output.shape[1]);
  for (int64_t r = 0; r < output.shape[0]; ++r) {
    for (int64_t c = 0; c < output.shape[1]; ++c)
      printf("%s%.6f", c ? " " : "", probs[r * output.shape[1] + c]);
    printf("\n");
  }
  coil_output_release(&output);
  coil_model_free(model);
  return 0;
}
