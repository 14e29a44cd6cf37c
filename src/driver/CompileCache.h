/// \file The compile cache: built files (model.so, fatbins, tuning timings) stored under a key,
/// the SHA-256 of everything their bytes depend on (the caller builds the key text: sources,
/// flags, the compiler's and toolkit's identity, coil's version).
///
/// Where: `$COIL_CACHE_DIR`, else `$XDG_CACHE_HOME/coil`, else `~/.cache/coil`;
/// `COIL_CACHE_DIR=off` disables the cache. How much: at most `$COIL_CACHE_MAX` bytes (a number
/// with an optional K, M or G suffix, powers of 1024; default 1G; 0 keeps nothing); after every
/// store the least recently used entries (by modification time, which a hit refreshes) are
/// removed until the cache fits.
///
/// An entry is one file `<name>`: the line `coil-cache 1 <SHA-256 of the payload> <bytes>\n`
/// then the payload. It is written to a temporary file in the cache directory and renamed into
/// place (atomic: a reader never sees part of an entry, concurrent writers of one key are
/// harmless), and verified on every read: a truncated or altered entry is removed and is a
/// miss, never handed back. A cache that cannot be written only loses entries.
#pragma once

#include "support/Expected.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace coil {

class CompileCache {
public:
  static constexpr uint64_t kDefaultMaxBytes = uint64_t(1) << 30;

  /// The cache the environment describes (a user error for a malformed COIL_CACHE_MAX).
  static Expected<CompileCache> fromEnvironment();
  /// A disabled cache.
  CompileCache() = default;
  CompileCache(std::string dir, uint64_t maxBytes) : dir_(std::move(dir)), max_(maxBytes) {}

  bool enabled() const { return !dir_.empty(); }
  const std::string &dir() const { return dir_; }
  uint64_t maxBytes() const { return max_; }

  /// The payload of entry `name` when it is present and intact (its time refreshed); nullopt
  /// otherwise (a damaged entry is removed).
  std::optional<std::string> load(const std::string &name) const;
  /// Writes the payload of entry `name` to `dest` (atomically: a temporary file renamed);
  /// false on a miss or when `dest` cannot be written.
  bool fetch(const std::string &name, const std::string &dest) const;
  /// Stores `payload` as entry `name`, then trims the cache to maxBytes().
  void store(const std::string &name, std::string_view payload) const;
  /// Stores the contents of file `path` as entry `name`; nothing when it cannot be read.
  void storeFile(const std::string &name, const std::string &path) const;
  /// Removes least recently used entries until the entries total at most maxBytes(), and
  /// temporary files older than an hour (writers that died).
  void trim() const;

private:
  std::string dir_;
  uint64_t max_ = kDefaultMaxBytes;
};

/// COIL_CACHE_MAX's value in bytes: digits with an optional K, M or G suffix (powers of 1024).
Expected<uint64_t> parseCacheSize(std::string_view text);

} // namespace coil
