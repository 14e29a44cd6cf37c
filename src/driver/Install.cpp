#include "driver/Install.h"

#include <dlfcn.h>
#include <filesystem>

namespace coil {

std::string installedFile(const std::string &relative) {
  namespace fs = std::filesystem;
  Dl_info info;
  if (!dladdr(reinterpret_cast<void *>(&installedFile), &info) || !info.dli_fname) return "";
  std::error_code ec;
  // The main program's name is what exec was given (maybe relative, or a bare name found on
  // PATH): the kernel knows its file.
  std::string name = info.dli_fname;
  bool library = fs::path(name).filename().string().find(".so") != std::string::npos;
  fs::path self = library ? fs::canonical(name, ec) : fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (fs::path dir : {self.parent_path(), self.parent_path().parent_path()}) {
    fs::path p = dir / relative;
    if (!dir.empty() && fs::is_regular_file(p, ec)) return p.string();
  }
  return "";
}

} // namespace coil
