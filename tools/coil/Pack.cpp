// coil pack PKG -o OUT.coil.zip: a package directory as one zip archive of stored entries (the
// runtime reads them without a decompressor and unpacks the archive once: runtime/Archive.h).
#include "Commands.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <zip.h>

namespace coil::cli {

namespace fs = std::filesystem;

Status cmdPack(const Args &a) {
  if (a.positional.size() != 1)
    return Error::user("'coil pack' takes one PKG (see 'coil pack --help')");
  if (!a.values.count("--output"))
    return Error::user("'coil pack' needs -o OUT.coil.zip (the archive to write)");
  const std::string &dir = a.positional[0];
  const std::string &out = a.values.at("--output");
  std::error_code ec;
  if (!fs::is_directory(dir, ec) || !fs::exists(fs::path(dir) / "metadata.json", ec))
    return Error::user(dir + ": not a coil package directory (no metadata.json)");
  if (!fs::exists(fs::path(dir) / "model.so", ec))
    return Error::user(dir + ": the package has no model.so (its build did not finish)");
  // Every file but build leftovers, metadata.json first, then in name order.
  std::vector<std::string> files;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    std::string rel = fs::relative(it->path(), dir, ec).string();
    if (it->is_directory() && (rel == "obj" || rel == "tune")) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file()) files.push_back(rel);
  }
  if (ec) return Error::runtime("cannot list '" + dir + "': " + ec.message());
  std::sort(files.begin(), files.end(), [](const std::string &x, const std::string &y) {
    return (x != "metadata.json") < (y != "metadata.json") ||
           ((x != "metadata.json") == (y != "metadata.json") && x < y);
  });
  std::string tmp = out + ".part";
  int err = 0;
  zip_t *z = zip_open(tmp.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  if (!z)
    return Error::runtime("cannot create '" + tmp + "' (libzip error " + std::to_string(err) + ")");
  uint64_t bytes = 0;
  for (const std::string &rel : files) {
    std::string path = (fs::path(dir) / rel).string();
    zip_source_t *src = zip_source_file(z, path.c_str(), 0, -1);
    zip_int64_t idx = src ? zip_file_add(z, rel.c_str(), src, ZIP_FL_ENC_UTF_8) : -1;
    if (idx < 0) {
      if (src) zip_source_free(src);
      std::string why = zip_strerror(z);
      zip_discard(z);
      return Error::runtime("cannot add '" + path + "' to '" + out + "': " + why);
    }
    zip_set_file_compression(z, zip_uint64_t(idx), ZIP_CM_STORE, 0);
    bytes += fs::file_size(path, ec);
  }
  if (zip_close(z) != 0) {
    std::string why = zip_strerror(z);
    zip_discard(z);
    return Error::runtime("cannot write '" + out + "': " + why);
  }
  fs::rename(tmp, out, ec);
  if (ec) return Error::runtime("cannot write '" + out + "': " + ec.message());
  std::printf("pack: %zu files, %.1f MB, into %s\n", files.size(), double(bytes) / 1e6,
              out.c_str());
  return okStatus();
}

} // namespace coil::cli
