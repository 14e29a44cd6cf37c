// Thin C++ API over include/coil/coil.h (header-only; errors become coil::RuntimeError).
//
//   coil::Model m("pkg");
//   std::vector<float> x(2 * 3);
//   auto outs = m.run({coil::Input(x.data(), COIL_DTYPE_F32, {2, 3})});
//   const float *y = outs[0].data<float>();
#pragma once

#include <coil/coil.h>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace coil {

class RuntimeError : public std::runtime_error {
public:
  RuntimeError(coil_status status, const std::string &message)
      : std::runtime_error(message), status_(status) {}
  coil_status status() const { return status_; }

private:
  coil_status status_;
};

inline void check(coil_status s) {
  if (s != COIL_OK) throw RuntimeError(s, coil_last_error());
}

/// An input: a view of caller data.
struct Input {
  Input(const void *data, coil_dtype dtype, std::vector<int64_t> shape)
      : data(data), dtype(dtype), shape(std::move(shape)) {}
  const void *data;
  coil_dtype dtype;
  std::vector<int64_t> shape;
};

/// An output the runtime allocated; frees it when destroyed.
class Output {
public:
  explicit Output(const coil_output &o) : o_(o) {}
  Output(Output &&other) noexcept : o_(other.o_) { other.o_.owned = 0, other.o_.data = nullptr; }
  Output &operator=(Output &&other) noexcept {
    if (this != &other) {
      coil_output_release(&o_);
      o_ = other.o_;
      other.o_.owned = 0, other.o_.data = nullptr;
    }
    return *this;
  }
  Output(const Output &) = delete;
  Output &operator=(const Output &) = delete;
  ~Output() { coil_output_release(&o_); }

  template <class T> const T *data() const { return static_cast<const T *>(o_.data); }
  const void *raw() const { return o_.data; }
  coil_dtype dtype() const { return o_.dtype; }
  std::vector<int64_t> shape() const { return {o_.shape, o_.shape + o_.rank}; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d = 0; d < o_.rank; ++d) n *= o_.shape[d];
    return n;
  }

private:
  coil_output o_;
};

struct TensorInfo {
  std::string name;
  coil_dtype dtype;
  std::vector<std::string> dims;
};

class Model {
public:
  explicit Model(const std::string &packageDir) { check(coil_model_load(packageDir.c_str(), &m_)); }
  Model(Model &&other) noexcept : m_(other.m_) { other.m_ = nullptr; }
  Model &operator=(Model &&other) noexcept {
    std::swap(m_, other.m_);
    return *this;
  }
  Model(const Model &) = delete;
  Model &operator=(const Model &) = delete;
  ~Model() { coil_model_free(m_); }

  std::vector<TensorInfo> inputs() const { return infos(true); }
  std::vector<TensorInfo> outputs() const { return infos(false); }

  /// Runs with runtime-allocated outputs.
  std::vector<Output> run(const std::vector<Input> &inputs) {
    std::vector<coil_tensor> in;
    for (const Input &i : inputs)
      in.push_back({i.data, i.dtype, int64_t(i.shape.size()), i.shape.data()});
    std::vector<coil_output> out(size_t(coil_model_num_outputs(m_)), coil_output{});
    check(coil_model_run(m_, in.data(), int64_t(in.size()), out.data(), int64_t(out.size())));
    std::vector<Output> result;
    for (const coil_output &o : out) result.emplace_back(o);
    return result;
  }

  /// Runs into caller buffers (`outputs[i].data`, `.capacity` set by the caller).
  void runInto(const std::vector<Input> &inputs, std::vector<coil_output> &outputs) {
    std::vector<coil_tensor> in;
    for (const Input &i : inputs)
      in.push_back({i.data, i.dtype, int64_t(i.shape.size()), i.shape.data()});
    check(
        coil_model_run(m_, in.data(), int64_t(in.size()), outputs.data(), int64_t(outputs.size())));
  }

  coil_model *handle() { return m_; }

private:
  std::vector<TensorInfo> infos(bool input) const {
    std::vector<TensorInfo> r;
    int64_t n = input ? coil_model_num_inputs(m_) : coil_model_num_outputs(m_);
    for (int64_t i = 0; i < n; ++i) {
      coil_tensor_info t;
      check(input ? coil_model_input_info(m_, i, &t) : coil_model_output_info(m_, i, &t));
      TensorInfo info{t.name, t.dtype, {}};
      for (int64_t d = 0; d < t.rank; ++d) info.dims.emplace_back(t.dims[d]);
      r.push_back(std::move(info));
    }
    return r;
  }

  coil_model *m_ = nullptr;
};

} // namespace coil
