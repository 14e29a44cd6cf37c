// Plans files (PlansFile.h): a schedule, then each kernel's plan.
#include "codegen/PlansFile.h"

#include "codegen/PlanText.h"
#include "sched/ScheduleText.h"
#include "support/Check.h"

#include <algorithm>

namespace coil::codegen {

namespace {

/// The offset of the line that starts the plans section, or npos.
size_t plansSection(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    if (text.compare(pos, 6, "plans ") == 0) return pos;
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  return std::string_view::npos;
}

std::vector<const sched::Kernel *> kernels(const sched::Schedule &s) {
  std::vector<const sched::Kernel *> out;
  for (const sched::Step &st : s.steps)
    if (const auto *k = std::get_if<sched::Kernel>(&st)) out.push_back(k);
  return out;
}

} // namespace

std::string printPlansFile(const sched::Schedule &s, const KernelPlans &p) {
  std::vector<const sched::Kernel *> ks = kernels(s);
  bool cpu = p.device == "cpu";
  COIL_CHECK(cpu ? p.cpu.size() == ks.size()
                 : p.cuda.size() == ks.size() && p.gemmConfigs.size() == ks.size())
      << "printPlansFile: " << ks.size() << " kernels, other counts of plans";
  std::string out = sched::printSchedule(s) + "\nplans " + p.device + "\n";
  for (size_t i = 0; i < ks.size(); ++i)
    out += cpu ? printCpuKernelPlan(p.cpu[i], *ks[i])
               : printCudaKernelPlan(p.cuda[i], *ks[i], *s.program, p.gemmConfigs[i]);
  return out;
}

Expected<ParsedPlans> parsePlansFile(std::string_view text, const std::string &path) {
  size_t at = plansSection(text);
  if (at == std::string_view::npos)
    return Error::user("no plans section: the schedule text is followed by a line 'plans cpu' "
                       "or 'plans cuda', then each kernel's plan",
                       SourceLoc{path});
  ParsedPlans out;
  COIL_TRY(out.parsed, sched::parseSchedule(text.substr(0, at), path));
  size_t firstLine = size_t(std::count(text.begin(), text.begin() + long(at), '\n')) + 1;
  COIL_TRY(plantext::Reader r, plantext::Reader::split(text.substr(at), path, firstLine));
  const plantext::Line &head = r.take();
  COIL_TRY(size_t device, r.choice(head, 1, {"cpu", "cuda"}, "device"));
  COIL_TRY_STATUS(r.arity(head, 2, "plans cpu|cuda"));
  KernelPlans &plans = out.plans;
  plans.device = device == 0 ? "cpu" : "cuda";
  const loop::LoopProgram &p = *out.parsed.program;
  for (const sched::Kernel *k : kernels(out.parsed.schedule)) {
    if (device == 0) {
      COIL_TRY(CpuKernelPlan plan, parseCpuKernelPlan(r, *k));
      plans.cpu.push_back(std::move(plan));
    } else {
      std::vector<std::string> gemm;
      COIL_TRY(CudaKernelPlan plan, parseCudaKernelPlan(r, *k, p, &gemm));
      plans.cuda.push_back(std::move(plan));
      plans.gemmConfigs.push_back(std::move(gemm));
    }
  }
  if (!r.atEnd()) return r.error(r.peek(), 0, "a plan after the last kernel's");
  return out;
}

} // namespace coil::codegen
