// The compiler's commands of the coil CLI: compile, run, verify, bench, the compiled views of
// inspect (--fusion, --loops, --wrapper, --memory, --kernels), Loop IR text (--loops
// FILE.loops --pass NAME), schedule text (--schedule) and one Graph IR pass (--graph MODEL
// --pass NAME).
#pragma once

#include "driver/Pipeline.h"
#include "frontend/onnx/OnnxImporter.h"
#include "ir/Tensor.h"
#include "sched/Kernel.h"
#include "support/Expected.h"

#include <map>
#include <string>
#include <vector>

namespace coil::cli {

/// Parsed command line: a command, positional arguments, and options.
struct Args {
  std::string command;
  std::vector<std::string> positional;
  std::map<std::string, std::string> values; // --inputs X
  std::map<std::string, bool> flags;         // --graph
  std::vector<std::string> dynamic;          // --dynamic N=1:8 (repeatable)
};

/// Symbol ranges from the --dynamic options.
Expected<ImportOptions> importOptions(const Args &a);
/// The compiler's options from the command line (--device, --arch, --gemm, --cpu-target, ...).
CompileOptions compileOptions(const Args &a);
/// MODEL loaded and compiled up to the Wrapper IR (compileGraph) with compileOptions(a) or `o`;
/// errors without a location name the model.
Expected<std::unique_ptr<Compilation>> compileModel(const Args &a, const std::string &path,
                                                    const CompileOptions &o);
Expected<std::unique_ptr<Compilation>> compileModel(const Args &a, const std::string &path);
/// "name: f32[2, 3] min .. max .. mean ..", then the first values.
std::string describeTensor(const std::string &name, const Tensor &t);

Status cmdCompile(const Args &a);
Status cmdRun(const Args &a);
Status cmdVerify(const Args &a);
Status cmdBench(const Args &a);
/// pack PKG -o OUT.coil.zip (Pack.cpp).
Status cmdPack(const Args &a);
/// inspect with --fusion, --loops, --wrapper, --memory or --kernels.
Status cmdInspectCompiled(const Args &a);
/// Whether `path` names Loop IR text (a `.loops` file).
/// Whether `path` ends with `ext` (".loops") after a non-empty name.
inline bool hasExtension(const std::string &path, const std::string &ext) {
  return path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
}

bool isLoopsFile(const std::string &path);
/// inspect --loops FILE.loops [--pass NAME] (Loops.cpp): parse, verify, run one Loop IR pass,
/// print.
Status cmdInspectLoops(const Args &a);
/// The Loop IR passes of --loops FILE.loops --pass, comma-separated; whether `name` is one.
std::string loopPassNames();
bool isLoopPass(const std::string &name);
/// inspect --schedule MODEL|FILE.loops|FILE.sched (Schedule.cpp): the schedule text of a
/// compiled model, of scheduleProgram run on Loop IR text, or of schedule text parsed and
/// verified.
Status cmdInspectSchedule(const Args &a);
/// Whether `path` names schedule text (a `.sched` file).
bool isScheduleFile(const std::string &path);
/// inspect --graph MODEL --pass NAME (GraphPasses.cpp): load, run one Graph IR pass, verify,
/// print the Graph IR text.
Status cmdInspectGraphPass(const Args &a);

/// Whether `path` names plans text (.plans).
bool isPlansFile(const std::string &path);
/// `coil inspect FILE.plans --plans` (Plans.cpp).
Status cmdInspectPlans(const Args &a);
/// The Graph IR passes of --graph MODEL --pass, comma-separated; whether `name` is one.
std::string graphPassNames();
bool isGraphPass(const std::string &name);

} // namespace coil::cli
