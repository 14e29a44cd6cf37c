/// \file COIL_CHECK: invariants of coil itself. A failed check is a coil bug (an internal
/// error), never the way to reject user input: user input is rejected with an Error.
#pragma once

#include <sstream>
#include <string>

namespace coil::detail {

/// Collects the streamed message and throws InternalError from its destructor.
class CheckFailure {
public:
  CheckFailure(const char *file, int line, const char *cond);
  [[noreturn]] ~CheckFailure() noexcept(false);
  template <typename T> CheckFailure &operator<<(const T &v) {
    os_ << v;
    return *this;
  }

private:
  std::ostringstream os_;
};

} // namespace coil::detail

#define COIL_CHECK(cond)                                                                           \
  if (cond) {                                                                                      \
  } else                                                                                           \
    ::coil::detail::CheckFailure(__FILE__, __LINE__, #cond)
#define COIL_UNREACHABLE(msg) ::coil::detail::CheckFailure(__FILE__, __LINE__, "unreachable") << msg
