// The schedule printer (grammar in ScheduleParser.h). Node lists wrap at 100 columns, so that a
// large model's lists stay readable; the parser takes any whitespace between tokens.
#include "sched/ScheduleText.h"

#include <sstream>

namespace coil::sched {
namespace {

constexpr size_t kWidth = 100;

std::string nodeName(const loop::LoopProgram &p, loop::NodeId id) {
  if (id < 0 || size_t(id) >= p.nodes.size()) return "<node " + std::to_string(id) + ">";
  return p.nodes[size_t(id)].name;
}

std::string symList(const std::vector<SymInt> &v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i].str();
  return s;
}

/// `(%a < A, %b < B)`: loop variables with their extents.
std::string loopVars(const std::vector<std::string> &vars, const std::vector<SymInt> &ranges) {
  std::string s = "(";
  for (size_t i = 0; i < vars.size(); ++i)
    s += (i ? ", " : "") + vars[i] + " < " + (i < ranges.size() ? ranges[i].str() : "?");
  return s + ")";
}

/// `KEYWORD [a, b, ...]` at `indent`, continued on lines indented two more past kWidth.
void nodeList(std::ostringstream &os, const loop::LoopProgram &p, const std::string &keyword,
              const std::vector<loop::NodeId> &ids, size_t indent) {
  std::string line = std::string(indent, ' ') + keyword + " [";
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string item = nodeName(p, ids[i]) + (i + 1 < ids.size() ? "," : "");
    if (i > 0 && line.size() + 1 + item.size() > kWidth) {
      os << line << "\n";
      line = std::string(indent + 2, ' ') + item;
    } else {
      line += (i > 0 ? " " : "") + item;
    }
  }
  os << line << "]\n";
}

void printPhase(std::ostringstream &os, const loop::LoopProgram &p, const Phase &ph) {
  os << "  phase " << loopVars(ph.vars, ph.ranges) << "\n" << loop::printLoopBody(p, ph.body, 4);
  for (const Store &st : ph.stores)
    os << "    store " << nodeName(p, st.node) << "[" << symList(st.index) << "] = %" << st.value
       << "\n";
  for (const Accumulate &r : ph.reductions) {
    os << "    reduce " << loop::reduceKindName(r.kind) << " " << dtypeName(r.accDType)
       << (r.selectLast ? " last" : "") << " value %" << r.value;
    if (r.position != loop::kNoVal) os << " position %" << r.position;
    os << "\n";
  }
}

/// A fused GEMM mainloop: a summary only (ScheduleParser.h refuses it).
void printGemm(std::ostringstream &os, const loop::LoopProgram &p, const GemmMainloop &g) {
  os << "  gemm " << nodeName(p, g.node) << " = " << nodeName(p, g.a)
     << (g.columnMajorA ? "^T" : "") << " @ " << nodeName(p, g.b) << (g.rowMajorB ? "" : "^T")
     << " [m " << g.m.str() << ", n " << g.n.str() << ", k " << g.k.str() << "] "
     << dtypeName(g.dtype) << " epilogue " << loop::quoteName(g.description) << "\n";
}

void printKernel(std::ostringstream &os, const loop::LoopProgram &p, const Kernel &k) {
  os << "\nkernel " << k.name << " " << loopVars(k.vars, k.ranges) << "\n";
  if (k.gemm) printGemm(os, p, *k.gemm);
  for (const Phase &ph : k.phases) printPhase(os, p, ph);
  nodeList(os, p, "reads", k.reads, 2);
  nodeList(os, p, "writes", k.writes, 2);
  nodeList(os, p, "fused", k.fused, 2);
}

} // namespace

std::string printSchedule(const Schedule &s) {
  const loop::LoopProgram &p = *s.program;
  std::ostringstream os;
  os << loop::printLoopProgram(p) << "\nschedule\n";
  std::vector<loop::NodeId> realized;
  for (size_t i = 0; i < s.realized.size(); ++i)
    if (s.realized[i]) realized.push_back(loop::NodeId(i));
  nodeList(os, p, "realized", realized, 0);
  for (const Step &st : s.steps) {
    if (const auto *k = std::get_if<Kernel>(&st))
      printKernel(os, p, *k);
    else
      os << "\nextern " << nodeName(p, std::get<ExternStep>(st).node) << "\n";
  }
  if (!s.gemmNotes.empty()) os << "\n";
  for (const std::string &n : s.gemmNotes) os << "note " << loop::quoteName(n) << "\n";
  return os.str();
}

} // namespace coil::sched
