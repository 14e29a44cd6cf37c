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

/// The plans of a schedule's kernels, one per kernel step in order, for one device.
struct KernelPlans {
  std::string device;                                ///< "cpu" or "cuda"
  std::vector<CpuKernelPlan> cpu;                    ///< device "cpu"
  std::vector<CudaKernelPlan> cuda;                  ///< device "cuda"
  std::vector<std::vector<std::string>> gemmConfigs; ///< cuda: a GEMM kernel's CUTLASS configs
};

struct ParsedPlans {
  sched::ParsedSchedule parsed;
  KernelPlans plans;
};

/// The plans file of `s` (whose program is `*s.program`) and its kernels' plans `p`.
std::string printPlansFile(const sched::Schedule &s, const KernelPlans &p);

/// Parses a plans file (`path` names it in errors, at line:column): the schedule (parsed and
/// verified), then a plan per kernel, each checked against its kernel and by its planner's
/// rules. User errors only.
Expected<ParsedPlans> parsePlansFile(std::string_view text, const std::string &path);

} // namespace coil::codegen
