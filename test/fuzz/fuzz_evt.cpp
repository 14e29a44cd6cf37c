/// libFuzzer target: `coil evt` (the Python-subset parser, the passes, the per-architecture
/// validator and shared-memory budget, both CUTLASS emitters). Input: an epilogue program, whose
/// `# args:` header line (as in test/evt/corpus) may give --shape, --dtype, --compute, --inputs.
/// Each input runs as the command line does, for sm80 and for sm90 (with --emit-kernel).
#include "FuzzCheck.h"
#include "evt/EvtCommand.h"

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <unistd.h>
#include <vector>

using namespace coil;

namespace {

const std::string &programPath() {
  static const std::string path = [] {
    std::string p = "/tmp/coil-fuzz-evt-" + std::to_string(::getpid()) + ".py";
    return p;
  }();
  return path;
}

/// The options of the `# args:` header lines that the target passes on (others are dropped, so
/// the fuzzer cannot make the command write files or print help).
std::vector<std::string> headerArgs(const std::string &text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line) && !line.empty() && line[0] == '#') {
    size_t at = line.find("args:");
    if (at == std::string::npos) continue;
    std::istringstream words(line.substr(at + 5));
    std::string w;
    std::vector<std::string> tokens;
    while (words >> w) tokens.push_back(w);
    for (size_t i = 0; i + 1 < tokens.size(); ++i) {
      const std::string &k = tokens[i];
      if (k == "--shape" || k == "--dtype" || k == "--compute" || k == "--inputs" || k == "--k") {
        out.push_back(k);
        out.push_back(tokens[++i]);
      }
    }
  }
  return out;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  {
    std::ofstream f(programPath(), std::ios::binary | std::ios::trunc);
    f << text;
  }
  std::vector<std::string> extra = headerArgs(text);
  bool hasShape = false;
  for (const std::string &a : extra) hasShape = hasShape || a == "--shape";
  for (const char *arch : {"sm80", "sm90"}) {
    std::vector<std::string> args = {"coil", "evt", programPath(), "--arch", arch};
    if (!hasShape) args.insert(args.end(), {"--shape", "256,512"});
    args.insert(args.end(), extra.begin(), extra.end());
    if (std::string(arch) == "sm90") args.push_back("--emit-kernel");
    args.insert(args.end(), {"-o", "/dev/null"});
    std::vector<char *> argv;
    for (std::string &a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    fuzz::guarded([&] {
      Status st = evt::runEvtCommand(int(argv.size() - 1), argv.data());
      if (!st.ok()) fuzz::expectUserError(st.error());
    });
  }
  return 0;
}
