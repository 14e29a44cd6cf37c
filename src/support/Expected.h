/// \file Expected<T>: a value or an Error, returned by every function that user input can reach.
#pragma once

#include "support/Check.h"
#include "support/Error.h"

#include <optional>
#include <utility>
#include <variant>

namespace coil {

template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : v_(std::move(value)) {}
  Expected(Error error) : v_(std::move(error)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T &value() & {
    COIL_CHECK(ok()) << "Expected::value() on an error: " << error().render();
    return std::get<0>(v_);
  }
  const T &value() const & {
    COIL_CHECK(ok()) << "Expected::value() on an error: " << error().render();
    return std::get<0>(v_);
  }
  T &&value() && {
    COIL_CHECK(ok()) << "Expected::value() on an error: " << error().render();
    return std::get<0>(std::move(v_));
  }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }

  const Error &error() const {
    COIL_CHECK(!ok()) << "Expected::error() on a value";
    return std::get<1>(v_);
  }
  Error takeError() && { return std::get<1>(std::move(v_)); }

private:
  std::variant<T, Error> v_;
};

/// For functions that return nothing but may fail.
struct Ok {};
using Status = Expected<Ok>;
inline Status okStatus() {
  return Ok{};
}

} // namespace coil

/// Evaluates `expr` (an Expected); on error returns the error from the enclosing function,
/// otherwise binds the value to `var`.  COIL_TRY(auto g, importModel(path));
#define COIL_TRY_CONCAT_(a, b) a##b
#define COIL_TRY_CONCAT(a, b) COIL_TRY_CONCAT_(a, b)
#define COIL_TRY_IMPL(tmp, var, expr)                                                              \
  auto tmp = (expr);                                                                               \
  if (!tmp.ok()) return std::move(tmp).takeError();                                                \
  var = std::move(tmp).value()
#define COIL_TRY(var, expr) COIL_TRY_IMPL(COIL_TRY_CONCAT(coil_try_, __LINE__), var, expr)
/// Propagates the error of a Status-returning call.
#define COIL_TRY_STATUS(expr)                                                                      \
  do {                                                                                             \
    auto coil_st_ = (expr);                                                                        \
    if (!coil_st_.ok()) return std::move(coil_st_).takeError();                                    \
  } while (0)
