/// \file A plans file (`.plans`): the schedule text of sched/ScheduleParser.h, then a line
/// `plans cpu` or `plans cuda`, then each kernel's plan in the schedule's order (the grammars are
/// in cpu/CpuPlan.h and cuda/CudaPlan.h). `coil inspect MODEL --plans` prints one, and
/// `coil inspect FILE.plans --plans` parses, verifies and prints it again.
#pragma once

#include "codegen/cpu/CpuPlan.h"
#include "codegen/cuda/CudaPlan.h"
#include "sched/ScheduleParser.h"
#include "support/Expected.h"

#include <string>
#include <string_view>
#include <vector>

namespace coil::codegen {

struct ParsedPlans {
  sched::ParsedSchedule parsed;
  std::string device; ///< "cpu" or "cuda"
  /// Per kernel step, in order: its plan (cpu or cuda), and a GEMM kernel's CUTLASS configs.
  std::vector<CpuKernelPlan> cpu;
  std::vector<CudaKernelPlan> cuda;
  std::vector<std::vector<std::string>> gemmConfigs;
};

/// The text of a plans file: `s` printed, then `plans DEVICE` and the plans' texts.
std::string plansFileText(const sched::Schedule &s, const std::string &device,
                          const std::vector<std::string> &plans);

/// Parses a plans file (`path` names it in errors, at line:column): the schedule (parsed and
/// verified), then a plan per kernel, each checked against its kernel and by its planner's
/// rules. User errors only.
Expected<ParsedPlans> parsePlansFile(std::string_view text, const std::string &path);

/// `p` as a plans file again.
std::string printPlansFile(const ParsedPlans &p);

} // namespace coil::codegen
