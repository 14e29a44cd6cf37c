// A CPU kernel's plan as text, and back (the grammar is in CpuPlan.h).
#include "codegen/PlanText.h"
#include "codegen/cpu/CpuCodegen.h"
#include "codegen/cpu/CpuPlan.h"

namespace coil::codegen {

using plantext::Line;
using plantext::quote;
using plantext::Reader;

namespace {

const char *const kShapes[] = {"flat", "pointwise-rows", "window-rows", "rows"};

std::string n(int64_t v) {
  return std::to_string(v);
}

std::vector<size_t> phaseVars(const sched::Kernel &k) {
  std::vector<size_t> out;
  for (const sched::Phase &ph : k.phases) out.push_back(ph.vars.size());
  return out;
}

} // namespace

std::string printCpuKernelPlan(const CpuKernelPlan &plan, const sched::Kernel &k) {
  std::string s = "plan " + k.name + " cpu " + kShapes[int(plan.shape)] + "\n";
  if (plan.shape == CpuShape::kPointwiseRows) s += "  row-dims " + n(int64_t(plan.rowDims)) + "\n";
  for (size_t pi = 0; pi < plan.loopDims.size(); ++pi)
    s += "  phase " + n(int64_t(pi)) + " loop-dims " + n(int64_t(plan.loopDims[pi])) + "\n";
  if (plan.shape == CpuShape::kWindowRows) {
    s += "  interior";
    if (!plan.interior) s += " none";
    for (const std::string &b : plan.lowers) s += " lower " + quote(b);
    for (const std::string &b : plan.uppers) s += " upper " + quote(b);
    s += "\n";
  }
  s += "  blocks";
  for (int64_t b : plan.blocks) s += " " + n(b);
  s +=
      "\n  threads " + n(plan.parallelWork) + " per-point " + quote(plan.perPointWork.str()) + "\n";
  return s;
}

Expected<CpuKernelPlan> parseCpuKernelPlan(Reader &r, const sched::Kernel &k) {
  if (r.atEnd()) return r.errorAtEnd("expected the plan of kernel '" + k.name + "'");
  const Line &head = r.take();
  COIL_TRY_STATUS(r.keyword(head, 0, "plan"));
  COIL_TRY(std::string name, r.bare(head, 1, "a kernel name"));
  if (name != k.name)
    return r.error(head, 1, "expected the plan of kernel '" + k.name + "', not '" + name + "'");
  COIL_TRY_STATUS(r.keyword(head, 2, "cpu"));
  COIL_TRY(std::string shape, r.bare(head, 3, "a shape of code"));
  COIL_TRY_STATUS(r.arity(head, 4, "plan KERNEL cpu SHAPE"));
  CpuKernelPlan plan;
  size_t si = 0;
  while (si < std::size(kShapes) && shape != kShapes[si]) ++si;
  if (si == std::size(kShapes))
    return r.error(head, 3,
                   "unknown shape '" + shape + "' (flat, pointwise-rows, window-rows or rows)");
  plan.shape = CpuShape(si);
  auto expect = [&](const char *keyword) -> Expected<const Line *> {
    if (r.nextIs(1, keyword)) return &r.take();
    std::string m =
        std::string("expected '") + keyword + "' in the plan of kernel '" + k.name + "'";
    return r.atEnd() ? r.errorAtEnd(m) : r.error(r.peek(), 0, m);
  };
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
      return r.error(l, 1, "expected phase " + n(int64_t(plan.loopDims.size())));
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
        COIL_TRY(std::string side, r.bare(*l, i, "'lower' or 'upper'"));
        if (side != "lower" && side != "upper")
          return r.error(*l, i, "expected 'lower' or 'upper'");
        COIL_TRY(std::string bound, r.string(*l, i + 1, "a bound (C text)"));
        if (!(side == "lower" ? plan.lowers : plan.uppers).insert(bound).second)
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
  if (!r.atEnd() && r.peek().indent > 0)
    return r.error(r.peek(), 0, "unexpected line in the plan of kernel '" + k.name + "'");
  std::string broken = verifyCpuKernelPlan(plan, k.vars.size(), phaseVars(k));
  if (!broken.empty()) return r.error(head, 0, "kernel '" + k.name + "': " + broken);
  return plan;
}

Status checkCpuPlanText(const CpuKernelSource &src, const sched::Kernel &k) {
  auto broken = [&](const std::string &why) {
    return Error::internal("cpu codegen: kernel '" + k.name + "': its plan text " + why);
  };
  auto r = Reader::split(src.planText, "plan of " + k.name);
  if (!r) return broken("does not split into lines: " + r.error().render());
  auto plan = parseCpuKernelPlan(*r, k);
  if (!plan) return broken("does not parse: " + plan.error().render());
  if (!r->atEnd()) return broken("goes on after the plan");
  if (!(*plan == src.plan)) return broken("parses to another plan");
  if (printCpuKernelPlan(*plan, k) != src.planText) return broken("prints again differently");
  return okStatus();
}

} // namespace coil::codegen
