// A CPU kernel's plan as text, and back (the grammar is in CpuPlan.h).
#include "codegen/PlanText.h"
#include "codegen/cpu/CpuCodegen.h"
#include "codegen/cpu/CpuPlan.h"

namespace coil::codegen {

using plantext::Line;
using plantext::quote;
using plantext::Reader;

namespace {

const std::string_view kShapes[] = {"flat", "pointwise-rows", "window-rows", "rows"};

std::vector<size_t> phaseVars(const sched::Kernel &k) {
  std::vector<size_t> out;
  for (const sched::Phase &ph : k.phases) out.push_back(ph.vars.size());
  return out;
}

} // namespace

std::string printCpuKernelPlan(const CpuKernelPlan &plan, const sched::Kernel &k) {
  std::string s = "plan " + k.name + " cpu " + std::string(kShapes[int(plan.shape)]) + "\n";
  if (plan.shape == CpuShape::kPointwiseRows)
    s += "  row-dims " + std::to_string(plan.rowDims) + "\n";
  for (size_t pi = 0; pi < plan.loopDims.size(); ++pi)
    s += "  phase " + std::to_string(pi) + " loop-dims " + std::to_string(plan.loopDims[pi]) + "\n";
  if (plan.shape == CpuShape::kWindowRows) {
    s += "  interior";
    if (!plan.interior) s += " none";
    for (const std::string &b : plan.lowers) s += " lower " + quote(b);
    for (const std::string &b : plan.uppers) s += " upper " + quote(b);
    s += "\n";
  }
  s += "  blocks";
  for (int64_t b : plan.blocks) s += " " + std::to_string(b);
  s += "\n  threads " + std::to_string(plan.parallelWork) + " per-point " +
       quote(plan.perPointWork.str()) + "\n";
  return s;
}

Expected<CpuKernelPlan> parseCpuKernelPlan(Reader &r, const sched::Kernel &k) {
  COIL_TRY(const Line *head, r.planHeader(k.name, "cpu"));
  CpuKernelPlan plan;
  COIL_TRY(size_t shape, r.choice(*head, 3, {std::begin(kShapes), std::end(kShapes)}, "shape"));
  COIL_TRY_STATUS(r.arity(*head, 4, "plan KERNEL cpu SHAPE"));
  plan.shape = CpuShape(shape);
  bool pointwiseShape = plan.shape == CpuShape::kFlat || plan.shape == CpuShape::kPointwiseRows;
  if (pointwiseShape != k.pointwise())
    return r.error(*head, 3,
                   "kernel '" + k.name + "' is " +
                       (k.pointwise() ? "pointwise: its shape is flat or pointwise-rows"
                                      : "not pointwise: its shape is window-rows or rows"));
  const std::string where = "the plan of kernel '" + k.name + "'";
  auto expect = [&](const char *keyword) { return r.expectLine(1, keyword, where); };
  if (plan.shape == CpuShape::kPointwiseRows) {
    COIL_TRY(const Line *l, expect("row-dims"));
    COIL_TRY(int64_t d, r.integer(*l, 1, "the dims of a row segment"));
    COIL_TRY_STATUS(r.arity(*l, 2, "row-dims N"));
    if (d < 0) return r.error(*l, 1, "a negative number of dims");
    plan.rowDims = size_t(d);
  }
  while (r.nextIs(1, "phase")) {
    const Line &l = r.take();
    COIL_TRY(int64_t pi, r.integer(l, 1, "the phase number"));
    if (pi != int64_t(plan.loopDims.size()))
      return r.error(l, 1, "expected phase " + std::to_string(plan.loopDims.size()));
    COIL_TRY_STATUS(r.keyword(l, 2, "loop-dims"));
    COIL_TRY(int64_t d, r.integer(l, 3, "the dims of its loop"));
    COIL_TRY_STATUS(r.arity(l, 4, "phase P loop-dims N"));
    if (d < 0) return r.error(l, 3, "a negative number of dims");
    plan.loopDims.push_back(size_t(d));
  }
  if (plan.shape == CpuShape::kWindowRows) {
    COIL_TRY(const Line *l, expect("interior"));
    if (l->words.size() == 2 && !l->words[1].quoted && l->words[1].text == "none") {
      plan.interior = false;
    } else {
      plan.interior = true;
      for (size_t i = 1; i < l->words.size(); i += 2) {
        COIL_TRY(size_t side, r.choice(*l, i, {"lower", "upper"}, "bound side"));
        COIL_TRY(std::string bound, r.string(*l, i + 1, "a bound (C text)"));
        if (!(side == 0 ? plan.lowers : plan.uppers).insert(bound).second)
          return r.error(*l, i + 1, "a bound listed twice");
      }
    }
  }
  COIL_TRY(const Line *blocks, expect("blocks"));
  for (size_t i = 1; i < blocks->words.size(); ++i) {
    COIL_TRY(int64_t b, r.integer(*blocks, i, "a block (points per task)"));
    plan.blocks.push_back(b);
  }
  COIL_TRY(const Line *threads, expect("threads"));
  COIL_TRY(plan.parallelWork, r.integer(*threads, 1, "the work threads start from"));
  COIL_TRY_STATUS(r.keyword(*threads, 2, "per-point"));
  COIL_TRY(std::string work, r.string(*threads, 3, "the work per outer point"));
  COIL_TRY_STATUS(r.arity(*threads, 4, "threads N per-point \"SIZE\""));
  auto parsed = parseSymInt(work);
  if (!parsed) return r.error(*threads, 3, "not a size expression: " + parsed.error().message());
  plan.perPointWork = *parsed;
  COIL_TRY_STATUS(r.planEnd(k.name));
  std::string broken = verifyCpuKernelPlan(plan, k.vars.size(), phaseVars(k));
  if (!broken.empty()) return r.error(*head, 0, "kernel '" + k.name + "': " + broken);
  return plan;
}

Status checkCpuPlanText(const CpuKernelSource &src, const sched::Kernel &k) {
  return plantext::checkRoundTrip(
      printCpuKernelPlan(src.plan, k), src.plan, "cpu codegen: kernel '" + k.name + "'",
      [&](Reader &r) { return parseCpuKernelPlan(r, k); },
      [&](const CpuKernelPlan &plan) { return printCpuKernelPlan(plan, k); });
}

} // namespace coil::codegen
