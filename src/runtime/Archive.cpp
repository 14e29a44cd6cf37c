#include "runtime/Archive.h"

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <vector>

namespace coil::runtime {

namespace fs = std::filesystem;

namespace {

uint32_t crc32(uint32_t crc, const unsigned char *p, size_t n) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

uint64_t le(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

struct Entry {
  std::string name;
  uint32_t crc = 0;
  uint64_t size = 0, compressedSize = 0, localOffset = 0;
  uint16_t method = 0;
};

std::string packageCacheDir() {
  const char *c = std::getenv("COIL_CACHE_DIR");
  if (c && *c && std::string(c) != "off") return std::string(c) + "/packages";
  if (!c || std::string(c) != "off") {
    if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x)
      return std::string(x) + "/coil/packages";
    if (const char *h = std::getenv("HOME"); h && *h)
      return std::string(h) + "/.cache/coil/packages";
  }
  const char *t = std::getenv("TMPDIR");
  return std::string(t && *t ? t : "/tmp") + "/coil-packages";
}

/// A name the package may hold: relative, no "..", no empty or "." parts.
bool safeName(const std::string &n) {
  if (n.empty() || n[0] == '/' || n.back() == '/') return false;
  size_t start = 0;
  while (start <= n.size()) {
    size_t end = n.find('/', start);
    std::string part = n.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return true;
}

} // namespace

bool isPackageArchive(const std::string &path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  std::ifstream f(path, std::ios::binary);
  char sig[4] = {};
  f.read(sig, 4);
  return f && std::memcmp(sig, "PK\x03\x04", 4) == 0;
}

Expected<std::string> unpackPackageArchive(const std::string &path) {
  auto bad = [&](const std::string &why) {
    return Error::user("package archive '" + path + "': " + why);
  };
  std::ifstream f(path, std::ios::binary);
  if (!f) return bad("cannot open it");
  f.seekg(0, std::ios::end);
  uint64_t fileSize = uint64_t(f.tellg());
  // The end of central directory record: within the last 64 KiB + 22 bytes.
  uint64_t tail = std::min<uint64_t>(fileSize, 65557);
  std::vector<unsigned char> end(tail);
  f.seekg(std::streamoff(fileSize - tail));
  f.read(reinterpret_cast<char *>(end.data()), std::streamsize(tail));
  if (!f) return bad("cannot read it");
  int64_t eocd = -1;
  for (int64_t i = int64_t(tail) - 22; i >= 0; --i)
    if (le(&end[size_t(i)], 4) == 0x06054b50) {
      eocd = i;
      break;
    }
  if (eocd < 0) return bad("not a zip archive (no end of central directory)");
  const unsigned char *e = &end[size_t(eocd)];
  uint64_t count = le(e + 10, 2), cdSize = le(e + 12, 4), cdOffset = le(e + 16, 4);
  if (count == 0xFFFF || cdSize == 0xFFFFFFFF || cdOffset == 0xFFFFFFFF) { // zip64
    if (eocd < 20 || le(e - 20, 4) != 0x07064b50) return bad("a zip64 archive without its locator");
    uint64_t rec = le(e - 20 + 8, 8);
    unsigned char z[56];
    f.seekg(std::streamoff(rec));
    f.read(reinterpret_cast<char *>(z), 56);
    if (!f || le(z, 4) != 0x06064b50) return bad("a broken zip64 end of central directory");
    count = le(z + 32, 8);
    cdSize = le(z + 40, 8);
    cdOffset = le(z + 48, 8);
  }
  if (cdOffset + cdSize > fileSize || cdSize > (uint64_t(1) << 30))
    return bad("the central directory lies outside the file");
  std::vector<unsigned char> cd(cdSize);
  f.seekg(std::streamoff(cdOffset));
  f.read(reinterpret_cast<char *>(cd.data()), std::streamsize(cdSize));
  if (!f) return bad("cannot read the central directory");

  std::vector<Entry> entries;
  size_t p = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (p + 46 > cd.size() || le(&cd[p], 4) != 0x02014b50)
      return bad("a broken central directory entry " + std::to_string(i));
    Entry en;
    en.method = uint16_t(le(&cd[p + 10], 2));
    en.crc = uint32_t(le(&cd[p + 16], 4));
    en.compressedSize = le(&cd[p + 20], 4);
    en.size = le(&cd[p + 24], 4);
    size_t nameLen = le(&cd[p + 28], 2), extraLen = le(&cd[p + 30], 2),
           commentLen = le(&cd[p + 32], 2);
    en.localOffset = le(&cd[p + 42], 4);
    if (p + 46 + nameLen + extraLen + commentLen > cd.size())
      return bad("a broken central directory entry " + std::to_string(i));
    en.name.assign(reinterpret_cast<const char *>(&cd[p + 46]), nameLen);
    // The zip64 extra field holds the sizes and offset that do not fit 32 bits, in this order.
    for (size_t x = p + 46 + nameLen; x + 4 <= p + 46 + nameLen + extraLen;) {
      size_t id = le(&cd[x], 2), n = le(&cd[x + 2], 2), at = x + 4;
      if (id == 1) {
        for (uint64_t *v : {&en.size, &en.compressedSize, &en.localOffset})
          if (*v == 0xFFFFFFFF && at + 8 <= x + 4 + n) *v = le(&cd[at], 8), at += 8;
      }
      x += 4 + n;
    }
    p += 46 + nameLen + extraLen + commentLen;
    if (!en.name.empty() && en.name.back() == '/') continue; // a directory
    if (!safeName(en.name)) return bad("entry '" + en.name + "' is not a path inside a package");
    if (en.method != 0)
      return bad("entry '" + en.name + "' is compressed (method " + std::to_string(en.method) +
                 "); coil loads archives of stored entries, as `coil pack` writes them");
    entries.push_back(en);
  }
  bool hasMetadata = false;
  for (const Entry &en : entries) hasMetadata |= en.name == "metadata.json";
  if (!hasMetadata) return bad("no metadata.json at its top level (not a coil package)");

  // The directory: keyed by the central directory (every name, size and CRC).
  uint32_t k1 = crc32(0, cd.data(), cd.size());
  uint32_t k2 = crc32(0x9E3779B9u, cd.data(), cd.size() / 2);
  char key[40];
  std::snprintf(key, sizeof key, "%08x%08x-%llx", k1, k2, (unsigned long long)fileSize);
  fs::path dir = fs::path(packageCacheDir()) / key;
  std::error_code ec;
  if (fs::exists(dir / ".unpacked", ec)) return dir.string();
  fs::path part = dir.string() + ".part" + std::to_string(getpid());
  fs::remove_all(part, ec);
  fs::create_directories(part, ec);
  if (ec) return Error::runtime("cannot create '" + part.string() + "': " + ec.message());
  std::vector<char> buf(size_t(1) << 20);
  for (const Entry &en : entries) {
    unsigned char local[30];
    f.seekg(std::streamoff(en.localOffset));
    f.read(reinterpret_cast<char *>(local), 30);
    if (!f || le(local, 4) != 0x04034b50) return bad("entry '" + en.name + "' has no local header");
    uint64_t data = en.localOffset + 30 + le(local + 26, 2) + le(local + 28, 2);
    if (data + en.size > fileSize) return bad("entry '" + en.name + "' lies outside the file");
    fs::path out = part / en.name;
    fs::create_directories(out.parent_path(), ec);
    std::ofstream o(out, std::ios::binary);
    f.seekg(std::streamoff(data));
    uint32_t crc = 0;
    for (uint64_t left = en.size; left > 0;) {
      size_t n = size_t(std::min<uint64_t>(left, buf.size()));
      f.read(buf.data(), std::streamsize(n));
      if (!f) return bad("entry '" + en.name + "' is cut short");
      crc = crc32(crc, reinterpret_cast<const unsigned char *>(buf.data()), n);
      o.write(buf.data(), std::streamsize(n));
      left -= n;
    }
    if (!o) return Error::runtime("cannot write '" + out.string() + "'");
    if (crc != en.crc) {
      fs::remove_all(part, ec);
      return bad("entry '" + en.name + "' does not match its CRC-32 (a damaged archive)");
    }
  }
  std::ofstream(part / ".unpacked") << path << "\n";
  fs::rename(part, dir, ec);
  if (ec) { // another process unpacked it first
    fs::remove_all(part, ec);
    if (!fs::exists(dir / ".unpacked", ec))
      return Error::runtime("cannot unpack '" + path + "' into '" + dir.string() + "'");
  }
  return dir.string();
}

} // namespace coil::runtime
