// Compiles a model into a package with libcoil_compiler (coil/compiler.h), then loads and runs
// it with the C++ API of libcoil_runtime (coil/coil.hpp). Inputs are generated: every symbolic
// dim is 4, float values sin(0.1 i); prints each output's shape and values.
//
//   cmake -S examples -B build-examples -Dcoil_DIR=<prefix>/lib/cmake/coil
//   cmake --build build-examples
//   build-examples/compile_and_run examples/mlp.onnx mlp.pkg
#include <cmath>
#include <coil/coil.hpp>
#include <coil/compiler.h>
#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s MODEL PACKAGE_DIR\n", argv[0]);
    return 1;
  }
  std::printf("coil %s\n", coil_compiler_version());
  coil_compile_options options;
  coil_compile_options_init(&options);
  options.on_stage = [](void *, const char *stage, double seconds) {
    std::printf("  %-16s %.3f s\n", stage, seconds);
  };
  if (coil_compile(argv[1], argv[2], &options) != COIL_OK) {
    std::fprintf(stderr, "error: %s\n", coil_compile_last_error());
    return 1;
  }
  try {
    coil::Model model(argv[2]);
    std::vector<std::vector<float>> data;
    std::vector<coil::Input> inputs;
    for (const coil::TensorInfo &in : model.inputs()) {
      if (in.dtype != COIL_DTYPE_F32) {
        std::fprintf(stderr, "this example feeds f32 inputs; '%s' is %s\n", in.name.c_str(),
                     coil_dtype_name(in.dtype));
        return 1;
      }
      std::vector<int64_t> shape;
      size_t n = 1;
      for (const std::string &d : in.dims) {
        bool number = !d.empty() && d.find_first_not_of("0123456789") == std::string::npos;
        shape.push_back(number ? std::stoll(d) : 4);
        n *= size_t(shape.back());
      }
      std::vector<float> x(n);
      for (size_t i = 0; i < n; ++i) x[i] = std::sin(0.1f * float(i));
      data.push_back(std::move(x));
      inputs.emplace_back(data.back().data(), COIL_DTYPE_F32, shape);
    }
    std::vector<coil::Output> outputs = model.run(inputs);
    std::vector<coil::TensorInfo> infos = model.outputs();
    for (size_t o = 0; o < outputs.size(); ++o) {
      std::printf("%s: %s[", infos[o].name.c_str(), coil_dtype_name(outputs[o].dtype()));
      std::vector<int64_t> shape = outputs[o].shape();
      for (size_t d = 0; d < shape.size(); ++d)
        std::printf("%s%lld", d ? ", " : "", (long long)shape[d]);
      std::printf("]\n");
      if (outputs[o].dtype() != COIL_DTYPE_F32) continue;
      int64_t cols = shape.empty() ? 1 : shape.back();
      for (int64_t i = 0; i < outputs[o].numel(); ++i)
        std::printf("%.6f%s", outputs[o].data<float>()[i], (i + 1) % cols ? " " : "\n");
    }
  } catch (const coil::RuntimeError &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
