// `coil inspect --schedule MODEL|FILE.loops|FILE.sched`: the schedule text (sched/ScheduleText.h)
// of a model compiled as the pipeline compiles it, of scheduleProgram run on Loop IR text, or of
// schedule text parsed and verified (sched/ScheduleParser.h).
#include "sched/Schedule.h"

#include "Commands.h"
#include "lower/LoopParser.h"
#include "sched/FuseGemmEpilogue.h"
#include "sched/ScheduleParser.h"
#include "sched/ScheduleText.h"
#include "sched/ScheduleVerify.h"

#include <fstream>
#include <iostream>
#include <sstream>

namespace coil::cli {

namespace {

/// Misuse of the options around --schedule, or "" when they fit the input `kind`.
std::string misuse(const Args &a, const std::string &kind) {
  if (a.positional.size() != 1)
    return "'coil inspect --schedule' takes one MODEL (.onnx or .coil), FILE.loops or FILE.sched";
  for (const char *f : {"--graph", "--loops", "--fusion", "--kernels", "--configs", "--plans",
                        "--wrapper", "--sources", "--memory"})
    if (a.flags.count(f))
      return std::string("'coil inspect --schedule' prints schedule text alone; ") + f +
             " is another view: ask for it in a command of its own";
  if (a.values.count("--pass"))
    return "--pass runs one Graph IR pass (--graph MODEL) or Loop IR pass (--loops FILE.loops); "
           "--schedule prints the schedule after every pass";
  if (a.values.count("--svg"))
    return "--svg draws --fusion, --memory or --wrapper; --schedule is text";
  if (a.values.count("--inputs")) return "--inputs gives the sizes of --memory, not --schedule";
  if (kind == "sched")
    for (const char *v : {"--device", "--arch", "--gemm"})
      if (a.values.count(v))
        return std::string("a .sched file is read and printed as it is: ") + v +
               " applies to a MODEL or FILE.loops";
  if (kind != "model" && !a.dynamic.empty())
    return "--dynamic gives a MODEL's symbol ranges; Loop IR and schedule text declare theirs";
  std::string device = a.values.count("--device") ? a.values.at("--device") : "cpu";
  if (device != "cpu" && device != "cuda")
    return "unknown device '" + device + "' (supported: cpu, cuda)";
  if (kind == "loops" && a.values.count("--arch"))
    return "--arch chooses a MODEL's GPU code; a schedule of Loop IR text has none";
  if (kind == "loops" && a.values.count("--gemm")) {
    const std::string &gemm = a.values.at("--gemm");
    if (gemm != "auto" && gemm != "cutlass" && gemm != "cublaslt")
      return "unknown GEMM backend '" + gemm + "' (supported: auto, cutlass, cublaslt)";
    if (device != "cuda") return "--gemm chooses how CUDA runs GEMMs: give --device cuda";
  }
  return "";
}

/// scheduleProgram on Loop IR text; with --device cuda --gemm cutlass, fuseGemmEpilogues after
/// it, as the pipeline runs them.
Status scheduleLoops(const Args &a, const std::string &path) {
  COIL_TRY(loop::ParsedLoopProgram parsed, loop::parseLoopProgramFile(path));
  COIL_TRY(sched::Schedule s, sched::scheduleProgram(parsed.program));
  // A schedule the scheduler breaks is coil's fault: an internal error, as in the pipeline.
  COIL_TRY_STATUS(sched::verifySchedule(s, "scheduleProgram"));
  if (a.values.count("--gemm") && a.values.at("--gemm") == "cutlass") {
    sched::GemmFusionOptions fo;
    fo.enabled = true;
    sched::fuseGemmEpilogues(s, fo);
    COIL_TRY_STATUS(sched::verifySchedule(s, "fuseGemmEpilogues"));
  }
  std::cout << sched::printSchedule(s);
  return okStatus();
}

Status printScheduleFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::user("cannot open '" + path + "'", SourceLoc{path});
  std::ostringstream text;
  text << in.rdbuf();
  COIL_TRY(sched::ParsedSchedule parsed, sched::parseSchedule(text.str(), path));
  std::cout << sched::printSchedule(parsed.schedule);
  return okStatus();
}

} // namespace

bool isScheduleFile(const std::string &path) {
  return hasExtension(path, ".sched");
}

Status cmdInspectSchedule(const Args &a) {
  const std::string path = a.positional.empty() ? "" : a.positional[0];
  std::string kind = isScheduleFile(path) ? "sched" : isLoopsFile(path) ? "loops" : "model";
  if (std::string m = misuse(a, kind); !m.empty()) return Error::user(m);
  if (kind == "sched") return printScheduleFile(path);
  if (kind == "loops") return scheduleLoops(a, path);
  COIL_TRY(std::unique_ptr<Compilation> c, compileModel(a, path));
  std::cout << sched::printSchedule(c->schedule);
  return okStatus();
}

} // namespace coil::cli
