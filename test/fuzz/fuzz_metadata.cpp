/// libFuzzer target: package loading up to (never including) running the package's code.
/// Input: a package's metadata.json, sealed or not. The target checks the integrity record as
/// given (splitSealedMetadata, checkBody), then seals the body itself, as an attacker who writes
/// a whole package would, and loads that package with runtime::checkPackage (every step of
/// coil_model_load before libcoil_cuda or dlopen: metadata, launches, digests, model.so's mark,
/// weights.bin mapped, constants located). model.so is a stand-in carrying the mark only.
#include "FuzzCheck.h"
#include "runtime/Load.h"
#include "runtime/Metadata.h"
#include "support/Sha256.h"

#include <coil/model_abi.h>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

using namespace coil;

namespace {

const std::string &packageDir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/coil-fuzz-package-XXXXXX";
    if (!::mkdtemp(tmpl)) fuzz::die("setup", "cannot create a temporary folder");
    return std::string(tmpl);
  }();
  return dir;
}

void writeFile(const std::string &name, const std::string &bytes) {
  std::ofstream f(packageDir() + "/" + name, std::ios::binary | std::ios::trunc);
  f << bytes;
  if (!f) fuzz::die("setup", "cannot write " + name);
}

std::string quoted(const std::string &s) {
  return "\"" + s + "\"";
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  fuzz::guarded([&] {
    std::string body = text;
    auto sealed = runtime::splitSealedMetadata(text);
    if (sealed) {
      if (Status st = runtime::checkBody(*sealed); !st.ok()) fuzz::expectUserError(st.error());
      body = sealed->body;
    } else {
      fuzz::expectUserError(sealed.error());
    }
    if (body.size() < 3 || body.compare(body.size() - 3, 3, "\n}\n") != 0) return;

    // The package an attacker would write around this body, sealed correctly; weights.bin has
    // the size the metadata says when that is at most 64 KB (writing and hashing more only
    // slows the target down), else 64 bytes.
    std::string library = "model.so", weights = "weights.bin";
    int64_t weightsBytes = 64;
    if (auto meta = runtime::parseMetadata(body)) {
      library = meta->library;
      weights = meta->weights;
      if (meta->weightsBytes <= (int64_t(1) << 16)) weightsBytes = meta->weightsBytes;
    } else {
      fuzz::expectUserError(meta.error());
    }
    std::string bodyDigest = sha256Hex(body);
    std::string so = "\x7f"
                     "ELF stand-in; coil-metadata-sha256:" +
                     bodyDigest + "\n";
    std::string w(size_t(weightsBytes), '\x5a');
    std::string record =
        ",\n  \"integrity\": {\"algorithm\": \"sha256\", \"model_abi_version\": " +
        std::to_string(COIL_MODEL_ABI_VERSION) + ",\n    \"metadata\": " + quoted(bodyDigest) +
        ",\n    \"files\": {\n      " + quoted(library) + ": " + quoted(sha256Hex(so));
    if (weights != library) record += ",\n      " + quoted(weights) + ": " + quoted(sha256Hex(w));
    record += "\n    }}\n}\n";
    writeFile(library, so);
    if (weights != library) writeFile(weights, w);
    writeFile("metadata.json", body.substr(0, body.size() - 3) + record);
    std::string message;
    coil_status s = runtime::checkPackage(packageDir().c_str(), &message);
    if (s != COIL_OK && s != COIL_ERROR_PACKAGE)
      fuzz::die("checkPackage: not a package error", std::to_string(int(s)) + ": " + message);
  });
  return 0;
}
