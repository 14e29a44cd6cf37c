// coil: the command-line driver. Diagnostics go to stderr, results to stdout.
// Exit codes: 0 ok, 1 user error, 2 internal error, 3 runtime error.
#include "Commands.h"
#include "driver/LoadModel.h"
#include "driver/Tune.h"
#include "evt/EvtCommand.h"
#include "interp/Interpreter.h"
#include "io/Npz.h"
#include "ir/Printer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <new>
#include <string>
#include <vector>

using namespace coil;
using namespace coil::cli;

namespace {

const char *kUsage = R"(usage: coil <command> [options]

commands:
  interpret MODEL --inputs IN.npz [--outputs OUT.npz] [--dynamic NAME=MIN:MAX]...
      run MODEL (.onnx or .coil) with the reference interpreter; prints each output's
      dtype, shape and statistics, and the time taken
  compile MODEL -o PKG [--device cpu|cuda] [--arch sm_80,sm_90a] [--dynamic NAME=MIN:MAX]...
          [--print-after STAGE] [--tune | --no-tune] [-v]
      compile MODEL into the package directory PKG (model.so, metadata.json, weights.bin,
      src/); prints the kernel names; STAGE is lower, schedule or wrapper; cuda packages hold
      device code for each --arch (default sm_80,sm_90a) in src/kernels.fatbin; each kernel
      call's config is chosen per size bucket by timing every config on this machine's GPU
      when it has one (metadata.json "tuning"; --tune or COIL_TUNE=1 insist, --no-tune or
      COIL_TUNE=0 skip it), else by a cost model
  run PKG|MODEL --inputs IN.npz [--outputs OUT.npz] [--device cpu|cuda] [--poison]
      run a package (a MODEL is compiled first, through the compile cache); --poison runs it
      twice, the second time into output buffers filled with 0xff bytes (NaN, -1), and reports
      that run, so that an element the package leaves unwritten shows
  verify MODEL [--inputs IN.npz] [--dynamic NAME=MIN:MAX]... [--kernels] [--package PKG]
      compile and run MODEL and compare every output with the interpreter (random inputs
      unless --inputs is given); on a mismatch, or always with --kernels, compare every
      launch's outputs with the Loop IR evaluator and name the first diverging launch;
      --package runs PKG instead of compiling MODEL
  bench PKG|MODEL --inputs IN.npz [--iters N] [--warmup W] [--json]
      time N runs after W warm-up runs: median, min, max
  inspect MODEL [--graph] [--loops] [--fusion] [--kernels] [--wrapper] [--memory [--inputs IN.npz]]
      print a summary of MODEL; --graph prints it in coil's text format, --loops the Loop IR,
      --fusion the kernels and what each fuses, --kernels the kernel names, --wrapper the C++
      wrapper, --memory the arena plan against its lower bound (at the sizes of IN.npz)
  inspect MODEL|PKG --wrapper [--svg OUT.svg]
      the C++ wrapper of a model or a package, or with --svg its graph (buffers, launches, data
      edges) rendered by Graphviz's dot
  evt EPILOGUE.py --arch sm80|sm90 --shape M,N[,L] [...]   (see 'coil evt --help')
  help
      print this message
)";

Expected<Args> parseArgs(int argc, char **argv, const std::vector<std::string> &valueOpts,
                         const std::vector<std::string> &flagOpts) {
  Args a;
  a.command = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "-o")
      s = "--output";
    else if (s.rfind("-o", 0) == 0 && s.size() > 2 && s[2] != '-')
      s = "--output=" + s.substr(2);
    if (s == "-v") s = "--verbose";
    if (s.rfind("--", 0) != 0) {
      a.positional.push_back(s);
      continue;
    }
    std::string key = s, val;
    bool hasEq = false;
    if (size_t eq = s.find('='); eq != std::string::npos) {
      key = s.substr(0, eq);
      val = s.substr(eq + 1);
      hasEq = true;
    }
    bool isValue =
        key == "--dynamic" || std::find(valueOpts.begin(), valueOpts.end(), key) != valueOpts.end();
    bool isFlag = std::find(flagOpts.begin(), flagOpts.end(), key) != flagOpts.end();
    if (isValue) {
      if (!hasEq) {
        if (i + 1 >= argc) return Error::user("option " + key + " needs a value");
        val = argv[++i];
      }
      if (key == "--dynamic")
        a.dynamic.push_back(val);
      else
        a.values[key] = val;
    } else if (isFlag && !hasEq) {
      a.flags[key] = true;
    } else {
      return Error::user("unknown option '" + s + "' for 'coil " + a.command +
                         "' (see 'coil help')");
    }
  }
  return a;
}

Status cmdInterpret(const Args &a) {
  if (a.positional.size() != 1)
    return Error::user("'coil interpret' takes one MODEL (see 'coil help')");
  if (!a.values.count("--inputs")) return Error::user("'coil interpret' needs --inputs IN.npz");
  COIL_TRY(ImportOptions opts, importOptions(a));
  COIL_TRY(LoadedModel m, loadModel(a.positional[0], opts));
  const std::string &inPath = a.values.at("--inputs");
  COIL_TRY(NamedTensors arrays, readNpz(inPath));
  COIL_TRY(std::vector<Tensor> inputs, matchInputs(m.graph, arrays, inPath));
  auto t0 = std::chrono::steady_clock::now();
  auto outs = interpret(m.graph, inputs);
  auto t1 = std::chrono::steady_clock::now();
  if (!outs.ok()) {
    Error e = outs.error();
    if (e.loc().file.empty()) e = e.withDefaultLoc(SourceLoc{a.positional[0]});
    return e;
  }
  NamedTensors named;
  for (size_t i = 0; i < outs->size(); ++i) {
    named.emplace_back(m.graph.value(m.graph.outputs[i]).name, (*outs)[i]);
    std::cout << describeTensor(named.back().first, named.back().second) << "\n";
  }
  std::printf("interpret: %zu nodes in %.3f ms\n", m.graph.nodes().size(),
              std::chrono::duration<double, std::milli>(t1 - t0).count());
  if (a.values.count("--outputs")) COIL_TRY_STATUS(writeNpz(a.values.at("--outputs"), named));
  return okStatus();
}

Status cmdInspect(const Args &a) {
  if (a.positional.size() != 1)
    return Error::user("'coil inspect' takes one MODEL (see 'coil help')");
  COIL_TRY(ImportOptions opts, importOptions(a));
  COIL_TRY(LoadedModel m, loadModel(a.positional[0], opts));
  const Graph &g = m.graph;
  if (a.flags.count("--graph")) {
    printGraph(g, std::cout);
    return okStatus();
  }
  std::cout << "model: " << a.positional[0] << "\n";
  for (ValueId v : g.inputs)
    std::cout << "  input  " << g.value(v).name << ": " << g.value(v).type.str() << "\n";
  for (ValueId v : g.outputs)
    std::cout << "  output " << g.value(v).name << ": " << g.value(v).type.str() << "\n";
  for (const auto &[name, r] : g.symbols)
    std::cout << "  symbol " << name << " in [" << r.min << ", " << r.max << "]\n";
  std::map<std::string, int> counts;
  for (const Node &n : g.nodes()) ++counts[std::string(opName(n.op))];
  std::cout << "  nodes: " << g.nodes().size() << " (";
  bool first = true;
  for (const auto &[op, c] : counts) {
    std::cout << (first ? "" : ", ") << op << " " << c;
    first = false;
  }
  std::cout << ")\n";
  size_t weightBytes = 0;
  for (const auto &[v, t] : g.constants()) weightBytes += t.nbytes();
  std::cout << "  constants: " << g.constants().size() << " (" << weightBytes << " bytes), "
            << "symbolic constants: " << g.symConstants().size() << "\n";
  if (m.fromOnnx)
    std::cout << "  onnx: opset " << m.stats.opset << ", " << m.stats.onnxNodes
              << " nodes; removed " << m.stats.removedNodes << " (Identity/Dropout), folded "
              << m.stats.foldedNodes << " (shape computations)"
              << (m.stats.upgradedNodes ? "; converted " + std::to_string(m.stats.upgradedNodes) +
                                              " nodes of older op versions"
                                        : std::string())
              << "\n";
  return okStatus();
}

Status run(int argc, char **argv) {
  std::string cmd = argv[1];
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    std::cout << kUsage;
    return okStatus();
  }
  if (cmd == "interpret") {
    COIL_TRY(Args a, parseArgs(argc, argv, {"--inputs", "--outputs"}, {}));
    return cmdInterpret(a);
  }
  if (cmd == "evt") return evt::runEvtCommand(argc, argv);
  if (cmd == "inspect") {
    COIL_TRY(Args a,
             parseArgs(argc, argv, {"--inputs", "--device", "--arch", "--svg"},
                       {"--graph", "--fusion", "--loops", "--wrapper", "--memory", "--kernels"}));
    if (a.values.count("--svg") && !a.flags.count("--wrapper"))
      return Error::user("--svg OUT.svg renders the wrapper's graph: use it with --wrapper");
    for (const char *f : {"--fusion", "--loops", "--wrapper", "--memory", "--kernels"})
      if (a.flags.count(f)) {
        if (a.positional.size() != 1)
          return Error::user("'coil inspect' takes one MODEL (see 'coil help')");
        return cmdInspectCompiled(a);
      }
    return cmdInspect(a);
  }
  if (cmd == "compile") {
    COIL_TRY(Args a, parseArgs(argc, argv, {"--output", "--device", "--arch", "--print-after"},
                               {"--verbose", "--tune", "--no-tune"}));
    return cmdCompile(a);
  }
  if (cmd == "run") {
    COIL_TRY(Args a,
             parseArgs(argc, argv, {"--inputs", "--outputs", "--device", "--arch"}, {"--poison"}));
    return cmdRun(a);
  }
  if (cmd == "verify") {
    COIL_TRY(Args a,
             parseArgs(argc, argv, {"--inputs", "--device", "--arch", "--package"}, {"--kernels"}));
    return cmdVerify(a);
  }
  if (cmd == "bench") {
    COIL_TRY(Args a,
             parseArgs(argc, argv, {"--inputs", "--iters", "--warmup", "--device", "--arch"},
                       {"--json"}));
    return cmdBench(a);
  }
  return Error::user("unknown command '" + cmd + "' (see 'coil help')");
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return 1;
  }
  // Internal: the measuring process of `compile --tune` (src/driver/Tune.h).
  if (std::string(argv[1]) == "tune-worker")
    return argc == 3 ? coil::tune::runTuneWorker(argv[2], stdout) : 2;
  try {
    Status s = run(argc, argv);
    if (!s.ok()) {
      std::cerr << s.error().render() << "\n";
      return s.error().exitCode();
    }
    return 0;
  } catch (const InternalError &e) {
    std::cerr << "internal error: " << e.message << "\n";
    return 2;
  } catch (const std::bad_alloc &) {
    std::cerr << "runtime error: out of memory\n";
    return 3;
  } catch (const std::exception &e) {
    std::cerr << "internal error: unexpected exception: " << e.what() << "\n";
    return 2;
  }
}
