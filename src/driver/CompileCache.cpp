#include "driver/CompileCache.h"

#include "support/Sha256.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>
#include <vector>

namespace coil {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kMagic = "coil-cache 1 ";
constexpr std::string_view kTempTag = ".tmp-";

bool readAll(const fs::path &path, std::string &out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  out = ss.str();
  return !f.bad();
}

/// Writes `bytes` to a fresh temporary file beside `path` and renames it to `path`.
bool writeAtomically(const fs::path &path, std::string_view header, std::string_view bytes) {
  static std::atomic<int> counter{0};
  fs::path tmp = path;
  tmp += std::string(kTempTag) + std::to_string(getpid()) + "-" + std::to_string(counter++);
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(header.data(), std::streamsize(header.size()));
    f.write(bytes.data(), std::streamsize(bytes.size()));
    f.flush();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return false;
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
  return !ec;
}

/// The payload of an entry's bytes when the header's digest and size match it.
std::optional<std::string_view> payloadOf(std::string_view entry) {
  if (entry.substr(0, kMagic.size()) != kMagic) return std::nullopt;
  size_t nl = entry.find('\n');
  if (nl == std::string_view::npos) return std::nullopt;
  std::string_view head = entry.substr(kMagic.size(), nl - kMagic.size());
  size_t sp = head.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  std::string_view digest = head.substr(0, sp), size = head.substr(sp + 1);
  std::string_view payload = entry.substr(nl + 1);
  if (!isSha256Hex(digest) || size != std::to_string(payload.size())) return std::nullopt;
  if (sha256Hex(payload) != digest) return std::nullopt;
  return payload;
}

} // namespace

Expected<uint64_t> parseCacheSize(std::string_view text) {
  auto bad = [&] {
    return Error::user("COIL_CACHE_MAX must be a size in bytes with an optional K, M or G "
                       "suffix (e.g. 500M, 2G), got '" +
                       std::string(text) + "'");
  };
  if (text.empty()) return bad();
  uint64_t unit = 1;
  char last = text.back();
  if (last == 'K' || last == 'k') unit = uint64_t(1) << 10;
  if (last == 'M' || last == 'm') unit = uint64_t(1) << 20;
  if (last == 'G' || last == 'g') unit = uint64_t(1) << 30;
  if (unit != 1) text.remove_suffix(1);
  if (text.empty() || text.size() > 15) return bad();
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return bad();
    v = v * 10 + uint64_t(c - '0');
  }
  if (v > (uint64_t(1) << 62) / unit) return bad();
  return v * unit;
}

Expected<CompileCache> CompileCache::fromEnvironment() {
  uint64_t max = kDefaultMaxBytes;
  if (const char *m = std::getenv("COIL_CACHE_MAX"); m && *m) {
    COIL_TRY(max, parseCacheSize(m));
  }
  std::string dir;
  if (const char *d = std::getenv("COIL_CACHE_DIR"); d && *d)
    dir = std::string(d) == "off" ? "" : std::string(d);
  else if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x)
    dir = std::string(x) + "/coil";
  else if (const char *h = std::getenv("HOME"); h && *h)
    dir = std::string(h) + "/.cache/coil";
  return CompileCache(dir, max);
}

std::optional<std::string> CompileCache::load(const std::string &name) const {
  if (!enabled()) return std::nullopt;
  fs::path path = fs::path(dir_) / name;
  std::string entry;
  if (!readAll(path, entry)) return std::nullopt;
  auto payload = payloadOf(entry);
  std::error_code ec;
  if (!payload) { // damaged: never handed out, and gone so that the next store replaces it
    fs::remove(path, ec);
    return std::nullopt;
  }
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec); // recently used
  return std::string(*payload);
}

bool CompileCache::fetch(const std::string &name, const std::string &dest) const {
  std::optional<std::string> payload = load(name);
  return payload && writeAtomically(dest, "", *payload);
}

void CompileCache::store(const std::string &name, std::string_view payload) const {
  if (!enabled()) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  std::string header =
      std::string(kMagic) + sha256Hex(payload) + " " + std::to_string(payload.size()) + "\n";
  writeAtomically(fs::path(dir_) / name, header, payload);
  trim();
}

void CompileCache::storeFile(const std::string &name, const std::string &path) const {
  std::string bytes;
  if (enabled() && readAll(path, bytes)) store(name, bytes);
}

void CompileCache::trim() const {
  if (!enabled()) return;
  struct Entry {
    fs::path path;
    uint64_t bytes;
    fs::file_time_type used;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  auto now = fs::file_time_type::clock::now();
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    if (!it->is_regular_file(e2)) continue;
    Entry e{it->path(), uint64_t(it->file_size(e2)), it->last_write_time(e2)};
    if (e2) continue;
    if (e.path.filename().string().find(kTempTag) != std::string::npos) {
      if (now - e.used > std::chrono::hours(1)) fs::remove(e.path, e2);
      continue; // a store in progress
    }
    total += e.bytes;
    entries.push_back(std::move(e));
  }
  if (total <= max_) return;
  std::sort(entries.begin(), entries.end(),
            [](const Entry &a, const Entry &b) { return a.used < b.used; });
  for (const Entry &e : entries) {
    if (total <= max_) break;
    std::error_code e2;
    if (fs::remove(e.path, e2)) total -= e.bytes;
  }
}

} // namespace coil
