#include "evt/EvtCommand.h"

#include "evt/EvtEmit.h"
#include "evt/EvtParser.h"
#include "evt/EvtPasses.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace coil::evt {

const char *kEvtUsage =
    "  evt EPILOGUE.py --arch sm80|sm90 --shape M,N[,L] [--dtype DT] [--dtype NAME=DT,...]\n"
    "      [--compute DT] [--emit-kernel [--k K] [--inputs DT]] [--print-ir] [--time] [-o OUT]\n"
    "      compile an epilogue (one Python function) into CUTLASS visitor code; --emit-kernel\n"
    "      writes a complete GEMM + host check program; DT is f32, f16 or bf16\n";

namespace {

const char *kEvtHelp = R"(
The epilogue is one Python function:
  def epi(accum, C, alpha: "scalar", bias: "1,N", scale: "M,1:f32"):
      x = alpha * accum + C
      D = relu(x + bias) * scale
      r = sum(x, dim=1)
      return D, r
accum is the accumulator and C the GEMM source; other parameters are dense (M, N[, L]) tensors
unless annotated with the dimensions they span ("1,N", "M,1", "1,N,L", "scalar"), optionally
followed by :f32/:f16/:bf16. Operators: + - * / ** unary minus, < <= > >= == !=; functions: relu
sigmoid tanh gelu erf silu exp log abs sqrt maximum minimum pow clamp where cast(x, "f16"); reductions
sum / max with dim= over (M, N). Every epilogue returns D; every returned name is stored.
--dtype DT sets the element type of A, B, C, D and tensors; --dtype NAME=DT one tensor's;
--compute DT the compute type (default f32). --print-ir prints the compiled EVT IR.
)";

Expected<DType> dtypeArg(const std::string &s, const std::string &what) {
  if (s == "f32" || s == "float32") return DType::F32;
  if (s == "f16" || s == "float16") return DType::F16;
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  return Error::user(what + ": unknown dtype '" + s + "' (use f32, f16 or bf16)");
}

Expected<int64_t> positiveInt(const std::string &s, const std::string &what) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 9)
    return Error::user(what + " must be a positive integer, got '" + s + "'");
  int64_t v = std::strtoll(s.c_str(), nullptr, 10);
  if (v <= 0) return Error::user(what + " must be a positive integer, got '" + s + "'");
  return v;
}

std::vector<std::string> split(const std::string &s, char c) {
  std::vector<std::string> out;
  size_t b = 0;
  while (true) {
    size_t e = s.find(c, b);
    out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return out;
}

} // namespace

Status runEvtCommand(int argc, char **argv) {
  auto start = std::chrono::steady_clock::now();
  std::string file, archS, shapeS, out;
  std::vector<std::string> dtypeArgs;
  std::string computeS = "f32", inputsS, kS = "128";
  bool kernel = false, printIr = false, timing = false;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    std::string key = a, val;
    bool hasVal = false;
    if (a.rfind("--", 0) == 0)
      if (size_t eq = a.find('='); eq != std::string::npos) {
        key = a.substr(0, eq);
        val = a.substr(eq + 1);
        hasVal = true;
      }
    auto value = [&]() -> Expected<std::string> {
      if (hasVal) return val;
      if (i + 1 >= argc) return Error::user("option " + key + " needs a value");
      return std::string(argv[++i]);
    };
    if (key == "--arch") {
      COIL_TRY(archS, value());
    } else if (key == "--shape") {
      COIL_TRY(shapeS, value());
    } else if (key == "--dtype") {
      COIL_TRY(std::string v, value());
      dtypeArgs.push_back(v);
    } else if (key == "--compute") {
      COIL_TRY(computeS, value());
    } else if (key == "--inputs") {
      COIL_TRY(inputsS, value());
    } else if (key == "--k") {
      COIL_TRY(kS, value());
    } else if (key == "-o") {
      COIL_TRY(out, value());
    } else if (key == "--emit-kernel" && !hasVal) {
      kernel = true;
    } else if (key == "--help" || key == "-h") {
      std::cout << "usage: coil evt ...\n" << kEvtUsage << kEvtHelp;
      return okStatus();
    } else if (key == "--time" && !hasVal) {
      timing = true;
    } else if (key == "--print-ir" && !hasVal) {
      printIr = true;
    } else if (a.rfind("-", 0) == 0) {
      return Error::user("unknown option '" + a + "' for 'coil evt' (see 'coil help')");
    } else if (file.empty()) {
      file = a;
    } else {
      return Error::user("'coil evt' takes one EPILOGUE file, got '" + file + "' and '" + a + "'");
    }
  }
  if (file.empty()) return Error::user("'coil evt' needs an EPILOGUE file (see 'coil help')");
  CompileOptions co;
  if (archS == "sm90" || archS == "sm90a")
    co.arch = Arch::Sm90;
  else if (archS == "sm80")
    co.arch = Arch::Sm80;
  else if (archS.empty())
    return Error::user("'coil evt' needs --arch sm80|sm90");
  else
    return Error::user("--arch must be sm80 or sm90, got '" + archS + "'");
  if (shapeS.empty()) return Error::user("'coil evt' needs --shape M,N[,L]");
  ParseOptions po;
  auto dims = split(shapeS, ',');
  if (dims.size() != 2 && dims.size() != 3)
    return Error::user("--shape must be M,N or M,N,L, got '" + shapeS + "'");
  COIL_TRY(po.problem.m, positiveInt(dims[0], "--shape M"));
  COIL_TRY(po.problem.n, positiveInt(dims[1], "--shape N"));
  if (dims.size() == 3) {
    COIL_TRY(po.problem.l, positiveInt(dims[2], "--shape L"));
    po.batched = true;
  }
  COIL_TRY(po.compute, dtypeArg(computeS, "--compute"));
  for (const std::string &d : dtypeArgs)
    for (const std::string &item : split(d, ',')) {
      size_t eq = item.find('=');
      if (eq == std::string::npos) {
        COIL_TRY(po.element, dtypeArg(item, "--dtype"));
      } else {
        COIL_TRY(DType t, dtypeArg(item.substr(eq + 1), "--dtype " + item.substr(0, eq)));
        po.dtypes[item.substr(0, eq)] = t;
      }
    }
  co.dtypes = po.dtypes;
  EmitOptions eo;
  eo.arch = co.arch;
  eo.kernel = kernel;
  eo.source = file;
  eo.inputs = po.element;
  if (!inputsS.empty()) {
    COIL_TRY(eo.inputs, dtypeArg(inputsS, "--inputs"));
  }
  co.inputs = eo.inputs;
  COIL_TRY(eo.k, positiveInt(kS, "--k"));
  if (kernel && eo.k % 16 != 0) return Error::user("--k must be a multiple of 16, got " + kS);

  std::ifstream in(file, std::ios::binary);
  if (!in) return Error::user("cannot read '" + file + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  COIL_TRY(Program prog, parseEpilogue(ss.str(), file, po));
  // Every --dtype NAME must name a parameter or an output.
  for (const auto &[name, t] : po.dtypes) {
    bool found = false;
    for (int id : prog.params) found = found || prog.at(id).name == name;
    for (const Output &o : prog.outputs) found = found || o.name == name;
    if (!found)
      return Error::user("--dtype " + name + "=" + std::string(dtypeName(t)) +
                         ": the epilogue has no parameter or output named '" + name + "'");
  }
  std::vector<std::string> notes;
  COIL_TRY(VisitorPlan plan, compileEpilogue(prog, co, &notes));
  for (const std::string &n : notes) std::cerr << "note: " << file << ": " << n << "\n";
  std::string text;
  if (printIr) {
    text = printProgram(prog);
  } else {
    COIL_TRY(text, emitCutlass(prog, plan, eo));
  }
  if (out.empty()) {
    std::cout << text;
  } else {
    std::ofstream o(out, std::ios::binary);
    o << text;
    if (!o) return Error::runtime("cannot write '" + out + "'");
  }
  if (timing) {
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "evt-time: %.3f ms\n", ms);
  }
  return okStatus();
}

} // namespace coil::evt
