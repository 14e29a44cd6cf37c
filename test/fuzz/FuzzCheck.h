/// \file What every fuzz target checks: the code under test either succeeds or rejects its input
/// with a user error. An internal error (a failed COIL_CHECK, an Error of kind Internal) or a
/// runtime error on bad input is a bug, reported as a crash so that libFuzzer keeps the input;
/// sanitizer reports (the targets build with ASan and UBSan) and crashes are caught by libFuzzer.
#pragma once

#include "support/Error.h"
#include "support/Expected.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace coil::fuzz {

[[noreturn]] inline void die(const char *what, const std::string &message) {
  std::fprintf(stderr, "fuzz: %s: %s\n", what, message.c_str());
  std::abort();
}

/// Aborts unless `e` is a user error.
inline void expectUserError(const Error &e) {
  if (e.kind() != ErrorKind::User) die("not a user error", e.render());
}

/// Runs `f`, turning an escaped InternalError into an abort with its message.
template <class F> void guarded(F &&f) {
  try {
    f();
  } catch (const InternalError &e) {
    die("internal error", e.message);
  }
}

} // namespace coil::fuzz
