// `coil inspect --graph MODEL --pass NAME`: a model (.coil text or ONNX) loaded, one Graph IR
// pass of driver/Pipeline.cpp run on it, the Graph IR verifier run after it, and the graph
// printed as text (ir/Printer.h) that parses again.
#include "Commands.h"
#include "driver/LoadModel.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "lower/ChannelsLast.h"
#include "passes/FoldConstants.h"
#include "passes/FuseAttention.h"
#include "passes/RefineShapes.h"

#include <functional>
#include <iostream>

namespace coil::cli {

namespace {

/// A Graph IR pass of driver/Pipeline.cpp, by its command-line name. `run` rewrites the graph
/// and returns what it did beyond the node count ("2 symbols refined"), or "".
struct GraphPass {
  const char *name;  ///< --pass NAME
  const char *stage; ///< the verifier's name for it, as the pipeline calls it
  std::function<Expected<std::string>(Graph &)> run;
};

std::string counted(int n, const std::string &one, const std::string &many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

const std::vector<GraphPass> &graphPasses() {
  static const std::vector<GraphPass> kPasses = {
      {"fold-constants", "foldConstants",
       [](Graph &g) -> Expected<std::string> {
         COIL_TRY(g, foldConstants(g));
         return std::string();
       }},
      {"refine-shapes", "refineShapes",
       [](Graph &g) -> Expected<std::string> {
         COIL_TRY(int replaced, refineShapes(g));
         return counted(replaced, "symbol refined", "symbols refined");
       }},
      {"fuse-attention", "fuseAttention",
       [](Graph &g) -> Expected<std::string> {
         int fused = 0;
         COIL_TRY(g, fuseAttention(g, &fused));
         return counted(fused, "attention fused", "attentions fused");
       }},
      {"channels-last", "convertToChannelsLast",
       [](Graph &g) -> Expected<std::string> {
         COIL_TRY(g, loop::convertToChannelsLast(g));
         return std::string();
       }},
  };
  return kPasses;
}

} // namespace

std::string graphPassNames() {
  std::string s;
  for (const GraphPass &p : graphPasses()) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

bool isGraphPass(const std::string &name) {
  for (const GraphPass &p : graphPasses())
    if (name == p.name) return true;
  return false;
}

Status cmdInspectGraphPass(const Args &a) {
  const std::string &name = a.values.at("--pass");
  if (!a.flags.count("--graph"))
    return Error::user("--pass runs one pass and prints its result: 'coil inspect --graph MODEL "
                       "--pass NAME' a Graph IR pass (" +
                       graphPassNames() + "), 'coil inspect --loops FILE.loops --pass NAME' a " +
                       "Loop IR pass (" + loopPassNames() + "); a MODEL without --pass runs " +
                       "every pass");
  for (const char *f : {"--loops", "--fusion", "--kernels", "--configs", "--plans", "--wrapper",
                        "--sources", "--memory"})
    if (a.flags.count(f))
      return Error::user(std::string("'coil inspect --graph MODEL --pass NAME' prints Graph IR "
                                     "text; ") +
                         f + " is a view of the compiled model, without --pass");
  if (a.positional.size() != 1)
    return Error::user("'coil inspect --graph MODEL --pass NAME' takes one MODEL");
  const GraphPass *pass = nullptr;
  for (const GraphPass &p : graphPasses())
    if (name == p.name) pass = &p;
  if (!pass && isLoopPass(name))
    return Error::user("'" + name +
                       "' is a Loop IR pass: 'coil inspect --loops FILE.loops --pass " + name +
                       "' runs it (Graph IR passes: " + graphPassNames() + ")");
  if (!pass)
    return Error::user("unknown Graph IR pass '" + name + "' (passes: " + graphPassNames() + ")");
  const std::string &path = a.positional[0];
  COIL_TRY(ImportOptions opts, importOptions(a));
  COIL_TRY(LoadedModel m, loadModel(path, opts));
  Graph &g = m.graph;
  size_t before = g.nodes().size();
  Expected<std::string> note = pass->run(g);
  if (!note.ok()) return note.error().withDefaultLoc(SourceLoc{path});
  // A graph the pass breaks is coil's fault: an internal error, as in the pipeline.
  Status st = verifyGraphAfter(g, pass->stage);
  if (!st.ok()) return st.error().withDefaultLoc(SourceLoc{path});
  // A comment, so that the output still parses.
  std::cout << "# " << pass->name << ": " << before << " -> "
            << counted(int(g.nodes().size()), "node", "nodes")
            << (note->empty() ? "" : ", " + *note) << "\n";
  printGraph(g, std::cout);
  return okStatus();
}

} // namespace coil::cli
