/// libFuzzer target: the `.coil` text parser (lexer, parser, verifier, inference). Input: a
/// .coil file. A graph that parses must print, parse again, and print the same text again.
#include "FuzzCheck.h"
#include "ir/Parser.h"
#include "ir/Printer.h"

#include <cstddef>
#include <cstdint>

using namespace coil;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  fuzz::guarded([&] {
    auto g = parseGraph(text, "fuzz.coil");
    if (!g) return fuzz::expectUserError(g.error());
    std::string printed = printGraph(*g);
    auto back = parseGraph(printed, "printed.coil");
    if (!back)
      fuzz::die("the printed graph does not parse", back.error().render() + "\n" + printed);
    std::string again = printGraph(*back);
    if (again != printed)
      fuzz::die("print(parse(print(g))) != print(g)", printed + "\n----\n" + again);
  });
  return 0;
}
