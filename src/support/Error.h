/// \file Error values shared by every layer of coil.
///
/// Three kinds, decided by who can fix the problem:
///  - User:     the input is wrong (bad model, unsupported op or opset, bad flag,
///              bad input file). The user can fix it. Exit code 1.
///  - Internal: coil is wrong (a broken invariant, a verifier failure after a pass).
///              Exit code 2.
///  - Runtime:  the environment failed while running (I/O, device, out of memory).
///              Exit code 3.
/// Messages are lowercase, without a trailing period, and state the rule broken with the
/// offending values. The location (file, node, op) is kept apart from the message and joined
/// by `Error::render()`:
///   error: model.onnx: node 'Conv_17' (Conv): input 1 must have rank 4, got rank 3
#pragma once

#include "support/SourceLoc.h"

#include <string>
#include <utility>

namespace coil {

enum class ErrorKind { User, Internal, Runtime };

class Error {
public:
  Error(ErrorKind kind, std::string message, SourceLoc loc = {})
      : kind_(kind), message_(std::move(message)), loc_(std::move(loc)) {}

  static Error user(std::string message, SourceLoc loc = {}) {
    return Error(ErrorKind::User, std::move(message), std::move(loc));
  }
  static Error internal(std::string message, SourceLoc loc = {}) {
    return Error(ErrorKind::Internal, std::move(message), std::move(loc));
  }
  static Error runtime(std::string message, SourceLoc loc = {}) {
    return Error(ErrorKind::Runtime, std::move(message), std::move(loc));
  }

  ErrorKind kind() const { return kind_; }
  const std::string &message() const { return message_; }
  const SourceLoc &loc() const { return loc_; }
  /// Returns a copy whose location fields that are empty are filled from `loc`.
  Error withDefaultLoc(const SourceLoc &loc) const;

  /// "error: FILE: node 'N' (Op): MESSAGE" (prefix "internal error:" / "runtime error:").
  std::string render() const;
  /// Process exit code for this kind: 1 user, 2 internal, 3 runtime.
  int exitCode() const;

private:
  ErrorKind kind_;
  std::string message_;
  SourceLoc loc_;
};

/// Thrown by COIL_CHECK (see Check.h) for broken invariants; the CLI catches it and exits 2.
struct InternalError {
  std::string message;
};

} // namespace coil
