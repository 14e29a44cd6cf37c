/// libFuzzer target: plans files (codegen/PlansFile.h), and through them the Loop IR and schedule
/// text parsers and verifiers. Input: a .plans file. Plans that parse must print, parse again,
/// and print the same text again.
#include "FuzzCheck.h"
#include "codegen/PlansFile.h"

#include <cstddef>
#include <cstdint>

using namespace coil;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  fuzz::guarded([&] {
    auto p = codegen::parsePlansFile(text, "fuzz.plans");
    if (!p) return fuzz::expectUserError(p.error());
    std::string printed = codegen::printPlansFile(p->parsed.schedule, p->plans);
    auto back = codegen::parsePlansFile(printed, "printed.plans");
    if (!back) fuzz::die("the printed plans do not parse", back.error().render() + "\n" + printed);
    std::string again = codegen::printPlansFile(back->parsed.schedule, back->plans);
    if (again != printed)
      fuzz::die("print(parse(print(p))) != print(p)", printed + "\n----\n" + again);
  });
  return 0;
}
