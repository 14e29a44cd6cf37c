/// libFuzzer target: the ONNX importer (protobuf parsing, schema checks, old-opset conversion,
/// shape folding, type inference). Input: the bytes of a .onnx file. An imported graph must pass
/// the verifier and survive a print/parse round trip of the text format.
#include "FuzzCheck.h"
#include "frontend/onnx/OnnxImporter.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include <cstddef>
#include <cstdint>

using namespace coil;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  fuzz::guarded([&] {
    // A folder that does not exist: external data never resolves to a real file.
    auto g = importOnnxBytes(bytes, "/nonexistent-coil-fuzz/model.onnx");
    if (!g) return fuzz::expectUserError(g.error());
    if (Status st = verifyGraph(*g); !st.ok())
      fuzz::die("the imported graph fails the verifier", st.error().render());
    std::string text = printGraph(*g);
    auto back = parseGraph(text, "printed.coil");
    if (!back) fuzz::die("the printed graph does not parse", back.error().render() + "\n" + text);
  });
  return 0;
}
