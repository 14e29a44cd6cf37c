// `coil inspect FILE.plans --plans`: a plans file (codegen/PlansFile.h) parsed, verified and
// printed again, as `coil inspect MODEL --plans` prints it.
#include "Commands.h"
#include "codegen/PlansFile.h"

#include <fstream>
#include <iostream>
#include <sstream>

namespace coil::cli {

bool isPlansFile(const std::string &path) {
  return hasExtension(path, ".plans");
}

Status cmdInspectPlans(const Args &a) {
  const std::string &path = a.positional.at(0);
  for (const auto &[flag, on] : a.flags)
    if (on && flag != "--plans")
      return Error::user("'coil inspect FILE.plans' takes --plans (parsed, verified and printed "
                         "again); " +
                         flag + " needs a MODEL");
  if (!a.flags.count("--plans"))
    return Error::user("'coil inspect FILE.plans' prints plans text: give --plans");
  if (!a.values.empty())
    return Error::user("a .plans file is read and printed as it is: " + a.values.begin()->first +
                       " applies to a MODEL");
  if (!a.dynamic.empty())
    return Error::user("--dynamic gives a MODEL's symbol ranges; a plans file declares its own");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::user("cannot open '" + path + "'", SourceLoc{path});
  std::ostringstream text;
  text << in.rdbuf();
  COIL_TRY(codegen::ParsedPlans plans, codegen::parsePlansFile(text.str(), path));
  std::cout << codegen::printPlansFile(plans.parsed.schedule, plans.plans);
  return okStatus();
}

} // namespace coil::cli
