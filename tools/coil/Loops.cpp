// `coil inspect --loops FILE.loops [--pass NAME]`: Loop IR text (lower/LoopParser.h) parsed and
// verified, one Loop IR pass run on it and verified again, and the program printed.
#include "Commands.h"
#include "lower/FoldConvBias.h"
#include "lower/FoldGemmBias.h"
#include "lower/LoopParser.h"
#include "lower/LoopVerify.h"

#include <functional>
#include <iostream>

namespace coil::cli {

namespace {

/// A Loop IR pass of driver/Pipeline.cpp, by its command-line name. `run` returns the number of
/// rewrites it made.
struct LoopPass {
  const char *name;  ///< --pass NAME
  const char *stage; ///< the verifier's name for it, as the pipeline calls it
  std::function<int(loop::LoopProgram &, bool cuda)> run;
};

const std::vector<LoopPass> &loopPasses() {
  static const std::vector<LoopPass> kPasses = {
      {"fold-gemm-bias", "foldGemmBias",
       [](loop::LoopProgram &p, bool) { return loop::foldGemmBias(p); }},
      {"fold-conv-bias", "foldConvBias",
       [](loop::LoopProgram &p, bool cuda) {
         loop::FoldConvBiasOptions o;
         o.cuda = cuda;
         return loop::foldConvBias(p, o);
       }},
  };
  return kPasses;
}

} // namespace

std::string loopPassNames() {
  std::string s;
  for (const LoopPass &p : loopPasses()) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

bool isLoopPass(const std::string &name) {
  for (const LoopPass &p : loopPasses())
    if (name == p.name) return true;
  return false;
}

bool isLoopsFile(const std::string &path) {
  return hasExtension(path, ".loops");
}

Status cmdInspectLoops(const Args &a) {
  const std::string &path = a.positional.at(0);
  for (const char *f : {"--graph", "--fusion", "--kernels", "--configs", "--plans", "--wrapper",
                        "--sources", "--memory"})
    if (a.flags.count(f))
      return Error::user(
          std::string("'coil inspect FILE.loops' takes --loops [--pass NAME] or --schedule; ") + f +
          " needs a MODEL");
  if (!a.flags.count("--loops"))
    return Error::user("'coil inspect FILE.loops' prints Loop IR text (give --loops) or its "
                       "schedule (give --schedule)");
  std::string device = a.values.count("--device") ? a.values.at("--device") : "cpu";
  if (device != "cpu" && device != "cuda")
    return Error::user("unknown device '" + device + "' (supported: cpu, cuda)");
  const LoopPass *pass = nullptr;
  if (a.values.count("--pass")) {
    const std::string &name = a.values.at("--pass");
    for (const LoopPass &p : loopPasses())
      if (name == p.name) pass = &p;
    if (!pass && name == "channels-last")
      return Error::user("channels-last rewrites the Graph IR before lowering, not the Loop IR: "
                         "'coil inspect --graph MODEL --pass channels-last' runs it, "
                         "'COIL_CHANNELS_LAST=1 coil inspect --loops MODEL' shows the Loop IR it "
                         "leads to");
    if (!pass && isGraphPass(name))
      return Error::user("'" + name + "' is a Graph IR pass: 'coil inspect --graph MODEL --pass " +
                         name + "' runs it (Loop IR passes: " + loopPassNames() + ")");
    if (!pass)
      return Error::user("unknown Loop IR pass '" + name + "' (passes: " + loopPassNames() + ")");
  }
  COIL_TRY(loop::ParsedLoopProgram parsed, loop::parseLoopProgramFile(path));
  if (pass) {
    int rewrites = pass->run(parsed.program, device == "cuda");
    // A program the pass breaks is coil's fault: an internal error, as in the pipeline.
    COIL_TRY_STATUS(loop::verifyLoopProgram(parsed.program, pass->stage));
    // A comment, so that the output still parses.
    std::cout << "# " << pass->name << ": " << rewrites << (rewrites == 1 ? " fold" : " folds")
              << "\n";
  }
  std::cout << loop::printLoopProgram(parsed.program);
  return okStatus();
}

} // namespace coil::cli
