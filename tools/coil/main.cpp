// coil: the command-line driver. Diagnostics go to stderr, results to stdout.
// Exit codes: 0 ok, 1 user error, 2 internal error, 3 runtime error.
#include "Commands.h"
#include "driver/LoadModel.h"
#include "driver/Tune.h"
#include "evt/EvtCommand.h"
#include "interp/Interpreter.h"
#include "io/Npz.h"
#include "ir/Printer.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <new>
#include <set>
#include <string>
#include <vector>

using namespace coil;
using namespace coil::cli;

namespace {

/// The command line: CLI11 declares every command's options (so `coil CMD --help` lists them)
/// and fills the `Args` that the commands read (Commands.h).
class CommandLine {
public:
  CommandLine()
      : app_("coil: an ahead-of-time compiler for tensor programs (ONNX or coil text IR "
             "-> fused CPU/CUDA kernels -> a package that C, C++ and Python load)",
             "coil") {
    app_.set_version_flag("--version", std::string("coil ") + COIL_VERSION);
    app_.set_help_flag("-h,--help", "print this help (or 'coil COMMAND --help')");
    app_.require_subcommand(0, 1);
    app_.footer("MODEL is a .onnx or .coil file, PKG a package directory, LOOPS a .loops file "
                "(Loop IR text, as 'coil inspect --loops' prints it), SCHED a .sched file "
                "(schedule text, as 'coil inspect --schedule' prints it), PLANS a .plans file (the "
                "schedule and each kernel's plan, as 'coil inspect --plans' prints them). Exit "
                "codes: 0 ok, 1 user "
                "error, 2 internal error, 3 runtime error.\n'coil COMMAND --help' describes a "
                "command; 'coil evt --help' the epilogue generator.");

    CLI::App *c = command("compile", "compile MODEL into the package directory PKG (model.so, "
                                     "metadata.json, weights.bin, src/)");
    model(c, "MODEL");
    value(c, "-o,--output", "PKG", "the package directory to write");
    device(c);
    value(c, "--cpu-target", "TARGET",
          "the CPU instruction set of a cpu package: native, x86-64-v2, x86-64-v3 or x86-64-v4 "
          "(default: x86-64-v2, portable, with a copy of the generated kernels for this CPU's "
          "level, which CPUs of that level run; a level: that level only; the runtime's kernels "
          "choose their AVX2 and AVX-512 paths as they run)");
    dynamic(c);
    value(c, "--print-after", "STAGE", "print the IR after STAGE (lower, schedule, wrapper)");
    flag(c, "--tune",
         "time every kernel config on this machine's GPU (cuda; the default when it has one; "
         "COIL_TUNE=1)");
    flag(c, "--no-tune", "choose configs by the cost model (COIL_TUNE=0)");
    flag(c, "-v,--verbose", "list the kernels and launches, and print the toolchain's commands");

    c = command("run", "run a package (a MODEL is compiled first, through the compile cache)");
    model(c, "PKG|MODEL");
    value(c, "--inputs", "IN.npz", "the inputs, by name (required)");
    value(c, "--outputs", "OUT.npz", "write the outputs here");
    device(c);
    dynamic(c);
    flag(c, "--poison",
         "run twice, the second time into output buffers filled with 0xff bytes (NaN, -1), and "
         "report that run, so that an element the package leaves unwritten shows");

    c = command("verify", "compile and run MODEL and compare every output with the reference "
                          "interpreter (random inputs unless --inputs)");
    model(c, "MODEL");
    value(c, "--inputs", "IN.npz", "the inputs (default: random, sizes 3)");
    value(c, "--package", "PKG", "run PKG instead of compiling MODEL");
    flag(c, "--kernels",
         "compare every launch's outputs with the Loop IR evaluator and name the first "
         "diverging launch (always done on a mismatch)");
    device(c);
    dynamic(c);

    c = command("bench", "time runs of a package: median, min, max");
    model(c, "PKG|MODEL");
    value(c, "--inputs", "IN.npz", "the inputs (required)");
    value(c, "--iters", "N", "timed runs (default 20)");
    value(c, "--warmup", "W", "untimed runs first (default 3)");
    flag(c, "--json", "print one JSON object");
    device(c);
    dynamic(c);

    c = command("interpret", "run MODEL with the reference interpreter; prints each output's "
                             "statistics and the time taken");
    model(c, "MODEL");
    value(c, "--inputs", "IN.npz", "the inputs (required)");
    value(c, "--outputs", "OUT.npz", "write the outputs here");
    dynamic(c);

    c = command("inspect", "print a summary of MODEL, or one of its compiled forms");
    model(c, "MODEL|PKG|LOOPS|SCHED|PLANS",
          "the input (.onnx or .coil model, a package directory, Loop IR text: a .loops file, "
          "schedule text: a .sched file, or plans text: a .plans file)");
    flag(c, "--graph", "MODEL in coil's text format (with --pass NAME: after that Graph IR pass)");
    flag(c, "--loops", "the Loop IR (of MODEL, or of LOOPS: parsed, verified and printed)");
    value(c, "--pass", "NAME",
          "run one pass, verify the result and print it: with --graph MODEL the Graph IR pass "
          "NAME (fold-constants, refine-shapes, fuse-attention, channels-last); with --loops "
          "LOOPS the Loop IR pass NAME (fold-gemm-bias, fold-conv-bias; --device cuda: the conv "
          "folds of a CUDA program)");
    flag(c, "--schedule",
         "the schedule as text that parses again: of MODEL (after every pass), of LOOPS (the "
         "scheduler run on it; --device cuda --gemm cutlass: GEMM epilogues fused too), or of "
         "SCHED (parsed, verified and printed)");
    flag(c, "--fusion", "the kernels and the nodes each fuses (with --svg: a picture)");
    flag(c, "--kernels", "the launches: kernel or extern, and the buffers each writes");
    flag(c, "--configs",
         "each kernel's configs and, for cuda, their launch plans (grid, block, workspace)");
    flag(c, "--plans",
         "each kernel's code-generation plan: its shape of code, loops, vectors, configs and "
         "thresholds, as the planner (codegen/cpu/CpuPlan.h, codegen/cuda/CudaPlan.h) decided, "
         "after the schedule: a PLANS file; of PLANS: parsed, verified and printed");
    flag(c, "--wrapper", "the C++ wrapper of a model or a package (with --svg: its graph)");
    flag(c, "--sources",
         "the generated kernel sources, file by file, as compile writes them (without the "
         "preludes)");
    flag(c, "--memory",
         "the arena plan against its lower bound (with --svg: the arena over "
         "time)");
    value(c, "--inputs", "IN.npz", "--memory: the sizes of these inputs (default: random, 3)");
    value(c, "--svg", "OUT.svg",
          "draw --fusion (nodes grouped by kernel), --memory (the arena over time) or --wrapper "
          "(its graph, through Graphviz's dot) as SVG");
    device(c);
    dynamic(c);

    c = command("pack", "pack a package directory into one archive (stored zip) that coil "
                        "loads as it is (coil run, coil.load, coil_model_load)");
    model(c, "PKG");
    value(c, "-o,--output", "OUT.coil.zip", "the archive to write (required)");

    app_.add_subcommand("evt", "generate CUTLASS epilogue visitor trees ('coil evt --help')");
    app_.add_subcommand("help", "print this help, or a command's ('coil help COMMAND')");
  }

  /// Parses argv; on success the chosen command's Args. Help and --version print and return
  /// an Args with an empty command.
  Expected<Args> parse(int argc, char **argv) {
    try {
      app_.parse(argc, argv);
    } catch (const CLI::CallForHelp &e) {
      app_.exit(e);
      return Args{};
    } catch (const CLI::CallForVersion &e) {
      app_.exit(e);
      return Args{};
    } catch (const CLI::ParseError &e) {
      std::string cmd;
      for (CLI::App *sub : app_.get_subcommands()) cmd = sub->get_name();
      return Error::user(std::string(e.what()) + " (see 'coil " + (cmd.empty() ? "" : cmd + " ") +
                         "--help')");
    }
    for (auto &[name, sub] : commands_) {
      if (!sub->parsed()) continue;
      Args a = std::move(args_[name]);
      a.command = name;
      for (const std::string &extra : sub->remaining()) {
        if (extra.rfind("-", 0) == 0 && extra.size() > 1)
          return Error::user("unknown option '" + extra + "' for 'coil " + name + "' (see 'coil " +
                             name + " --help')");
        a.positional.push_back(extra);
      }
      return a;
    }
    if (argc < 2) {
      std::cout << app_.help();
      return Args{};
    }
    return Error::internal("no command parsed");
  }

  /// The help of a command, or of coil ("" or a name that is not a command).
  std::string help(const std::string &command) {
    auto it = commands_.find(command);
    return it != commands_.end() ? it->second->help("coil") : app_.help();
  }

private:
  CLI::App app_;
  std::map<std::string, CLI::App *> commands_;
  std::map<std::string, Args> args_;

  CLI::App *command(const std::string &name, const std::string &description) {
    CLI::App *c = app_.add_subcommand(name, description);
    c->allow_extras(); // unknown options are reported by parse(), in coil's words
    c->set_help_flag("-h,--help", "print this help");
    commands_[name] = c;
    args_[name];
    return c;
  }
  Args &argsOf(CLI::App *c) { return args_[c->get_name()]; }

  void model(CLI::App *c, const std::string &what,
             const std::string &help = "the input (.onnx or .coil model, or a package directory)") {
    Args &a = argsOf(c);
    c->add_option_function<std::string>(
         what, [&a](const std::string &v) { a.positional.insert(a.positional.begin(), v); }, help)
        ->type_name("");
  }
  /// `--name VALUE`; the key Commands.cpp reads is the long name.
  void value(CLI::App *c, const std::string &names, const std::string &type,
             const std::string &help) {
    std::string key = names.substr(names.find("--"));
    Args &a = argsOf(c);
    c->add_option_function<std::string>(
         names, [&a, key](const std::string &v) { a.values[key] = v; }, help)
        ->type_name(type);
  }
  void flag(CLI::App *c, const std::string &names, const std::string &help) {
    std::string key = names.substr(names.find("--"));
    Args &a = argsOf(c);
    c->add_flag_callback(
        names, [&a, key] { a.flags[key] = true; }, help);
  }
  void device(CLI::App *c) {
    value(c, "--device", "cpu|cuda", "the device to compile for (default cpu)");
    value(c, "--arch", "sm_80,sm_90a", "cuda: the GPU architectures (default sm_80,sm_90a)");
    value(c, "--gemm", "auto|cutlass|cublaslt",
          "cuda: GEMMs with pointwise consumers as fused CUTLASS kernels (sm_90a code, other GPUs "
          "run the unfused pair; needs the CUTLASS headers; opt-in: no faster than cuBLASLt yet) "
          "or through cuBLASLt (default auto: cublaslt)");
  }
  void dynamic(CLI::App *c) {
    Args &a = argsOf(c);
    c->add_option_function<std::vector<std::string>>(
         "--dynamic",
         [&a](const std::vector<std::string> &v) {
           a.dynamic.insert(a.dynamic.end(), v.begin(), v.end());
         },
         "the range of a size symbol (repeatable)")
        ->type_name("NAME=MIN:MAX")
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  }
};

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
  // `coil evt` has its own parser (evt/EvtCommand.h).
  if (argc >= 2 && std::string(argv[1]) == "evt") return evt::runEvtCommand(argc, argv);
  static const std::set<std::string> known = {"compile", "run",  "verify", "bench", "interpret",
                                              "inspect", "pack", "evt",    "help"};
  if (argc >= 2 && argv[1][0] != '-' && !known.count(argv[1]))
    return Error::user(std::string("unknown command '") + argv[1] + "' (see 'coil --help')");
  CommandLine cli;
  if (argc >= 2 && std::string(argv[1]) == "help") { // coil help [COMMAND]
    std::cout << cli.help(argc >= 3 ? argv[2] : "");
    return okStatus();
  }
  COIL_TRY(Args a, cli.parse(argc, argv));
  const std::string &cmd = a.command;
  if (cmd.empty()) return okStatus(); // help or --version, printed
  if (cmd == "interpret") return cmdInterpret(a);
  if (cmd == "inspect") {
    if (a.flags.count("--schedule")) return cmdInspectSchedule(a);
    if (a.positional.size() == 1 && isScheduleFile(a.positional[0]))
      return Error::user("'coil inspect FILE.sched' prints schedule text: give --schedule");
    if (a.positional.size() == 1 && isLoopsFile(a.positional[0])) return cmdInspectLoops(a);
    if (a.positional.size() == 1 && isPlansFile(a.positional[0])) return cmdInspectPlans(a);
    if (a.values.count("--pass")) return cmdInspectGraphPass(a);
    if (a.values.count("--svg") && int(a.flags.count("--wrapper")) +
                                           int(a.flags.count("--fusion")) +
                                           int(a.flags.count("--memory")) !=
                                       1)
      return Error::user("--svg OUT.svg draws one of --fusion, --memory or --wrapper: give one");
    for (const char *f : {"--fusion", "--loops", "--wrapper", "--memory", "--kernels", "--configs",
                          "--plans", "--sources"})
      if (a.flags.count(f)) {
        if (a.positional.size() != 1)
          return Error::user("'coil inspect' takes one MODEL (see 'coil inspect --help')");
        return cmdInspectCompiled(a);
      }
    return cmdInspect(a);
  }
  if (cmd == "compile") return cmdCompile(a);
  if (cmd == "run") return cmdRun(a);
  if (cmd == "verify") return cmdVerify(a);
  if (cmd == "bench") return cmdBench(a);
  if (cmd == "pack") return cmdPack(a);
  return Error::user("unknown command '" + cmd + "' (see 'coil --help')");
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    CommandLine cli;
    (void)cli.parse(argc, argv); // prints the help
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
