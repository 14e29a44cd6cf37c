// `coil inspect FILE.plans --plans`: a plans file (the schedule text of sched/ScheduleParser.h,
// then a line `plans cpu` or `plans cuda` and each kernel's plan, codegen/PlanText.h) parsed,
// verified and printed again, as `coil inspect MODEL --plans` prints it.
#include "Commands.h"
#include "codegen/PlanText.h"
#include "codegen/cpu/CpuPlan.h"
#include "codegen/cuda/CudaPlan.h"
#include "sched/ScheduleParser.h"
#include "sched/ScheduleText.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>

namespace coil::cli {

namespace {

/// Where the plans section starts: the offset of its `plans` line, or npos.
size_t plansSection(const std::string &text) {
  for (size_t pos = 0; pos < text.size();) {
    if (text.compare(pos, 6, "plans ") == 0) return pos;
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return std::string::npos;
}

} // namespace

bool isPlansFile(const std::string &path) {
  const std::string ext = ".plans";
  return path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
}

std::string plansText(const sched::Schedule &s, const std::string &device,
                      const std::vector<std::string> &plans) {
  std::string out = sched::printSchedule(s) + "\nplans " + device + "\n";
  for (const std::string &p : plans) out += p;
  return out;
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
  for (const auto &[name, value] : a.values)
    return Error::user("a .plans file is read and printed as it is: " + name +
                       " applies to a MODEL");
  if (!a.dynamic.empty())
    return Error::user("--dynamic gives a MODEL's symbol ranges; a plans file declares its own");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::user("cannot open '" + path + "'", SourceLoc{path});
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  size_t at = plansSection(text);
  if (at == std::string::npos)
    return Error::user("no plans section: the schedule text is followed by a line 'plans cpu' "
                       "or 'plans cuda', then each kernel's plan",
                       SourceLoc{path});
  COIL_TRY(sched::ParsedSchedule parsed, sched::parseSchedule(text.substr(0, at), path));
  size_t firstLine = size_t(std::count(text.begin(), text.begin() + long(at), '\n')) + 1;
  COIL_TRY(codegen::plantext::Reader r,
           codegen::plantext::Reader::split(std::string_view(text).substr(at), path, firstLine));
  const codegen::plantext::Line &head = r.take();
  COIL_TRY(std::string device, r.bare(head, 1, "'cpu' or 'cuda'"));
  if (device != "cpu" && device != "cuda") return r.error(head, 1, "expected 'cpu' or 'cuda'");
  COIL_TRY_STATUS(r.arity(head, 2, "plans cpu|cuda"));
  const loop::LoopProgram &p = *parsed.program;
  std::vector<std::string> plans;
  for (const sched::Step &st : parsed.schedule.steps) {
    const auto *k = std::get_if<sched::Kernel>(&st);
    if (!k) continue;
    if (device == "cpu") {
      COIL_TRY(codegen::CpuKernelPlan plan, codegen::parseCpuKernelPlan(r, *k));
      plans.push_back(codegen::printCpuKernelPlan(plan, *k));
    } else {
      std::vector<std::string> gemm;
      COIL_TRY(codegen::CudaKernelPlan plan, codegen::parseCudaKernelPlan(r, *k, p, &gemm));
      plans.push_back(codegen::printCudaKernelPlan(plan, *k, p, gemm));
    }
  }
  if (!r.atEnd()) return r.error(r.peek(), 0, "a plan after the last kernel's");
  std::cout << plansText(parsed.schedule, device, plans);
  return okStatus();
}

} // namespace coil::cli
