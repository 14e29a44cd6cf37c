/// \file SHA-256 digests (OpenSSL's libcrypto), for package integrity and the compile cache.
///
/// Digests are returned as 64 lowercase hex digits. Hashing cannot fail in practice; if
/// libcrypto reports a failure the functions throw InternalError (support/Check.h).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace coil {

/// The SHA-256 of `size` bytes at `data`, as 64 hex digits.
std::string sha256Hex(const void *data, size_t size);
inline std::string sha256Hex(std::string_view s) {
  return sha256Hex(s.data(), s.size());
}

/// An incremental SHA-256: update() any number of times, then hex() once.
class Sha256 {
public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256 &) = delete;
  Sha256 &operator=(const Sha256 &) = delete;
  Sha256 &update(const void *data, size_t size);
  Sha256 &update(std::string_view s) { return update(s.data(), s.size()); }
  /// The digest of everything given so far; the object cannot be updated afterwards.
  std::string hex();

private:
  struct State;
  std::unique_ptr<State> state_;
};

/// True when `s` is 64 lowercase hex digits (the form sha256Hex returns).
bool isSha256Hex(std::string_view s);

} // namespace coil
