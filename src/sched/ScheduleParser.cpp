// The schedule text parser (grammar in ScheduleParser.h): the Loop IR program parser
// (lower/LoopParserInternal.h) reads the program and stops at 'schedule'; its rules for loop
// variables, statements, sizes and node names read the steps too, so phase bodies are Loop IR
// statements by construction.
#include "sched/ScheduleParser.h"

#include "lower/LoopParserInternal.h"
#include "sched/ScheduleVerify.h"

#include <set>

namespace coil::sched {
namespace {

using loop::NodeId;
using loop::text::Tok;
using loop::text::Token;

class ScheduleParser : public loop::text::Parser {
public:
  ScheduleParser(std::string_view text, std::string file) : Parser(text, std::move(file)) {
    stopAt_ = "schedule";
  }

  Expected<ParsedSchedule> run() {
    COIL_TRY_STATUS(parseProgram());
    COIL_TRY_STATUS(verify());
    g_->symbols = p_.symbols;
    scheduleTok_ = cur_;
    if (!isKeyword("schedule"))
      return expected("'schedule'", "after the program's inputs and outputs");
    bump();
    COIL_TRY_STATUS(parseRealized());
    while (isKeyword("kernel") || isKeyword("extern")) {
      stepToks_.push_back(cur_);
      if (isKeyword("kernel")) {
        COIL_TRY_STATUS(parseKernel());
      } else {
        bump();
        COIL_TRY(NodeId n, parseExternStep());
        s_.steps.push_back(ExternStep{n});
      }
    }
    while (isKeyword("note")) {
      bump();
      if (cur_.kind != Tok::String) return expected("a quoted note", "after 'note'");
      s_.gemmNotes.push_back(cur_.str);
      bump();
    }
    if (cur_.kind != Tok::Eof)
      return expected(s_.gemmNotes.empty() ? "'kernel', 'extern', 'note' or the end of the text"
                                           : "'note' or the end of the text");
    ParsedSchedule r;
    r.graph = std::move(g_);
    r.program = std::make_unique<loop::LoopProgram>(std::move(p_));
    r.schedule = std::move(s_);
    r.schedule.program = r.program.get();
    COIL_TRY_STATUS(verifySchedule(r.schedule));
    return r;
  }

private:
  Status parseRealized();
  Status parseKernel();
  Expected<NodeId> parseExternStep();
  Status parsePhase(Kernel &k);
  Status parseStore(Phase &ph);
  Status parseReduction(Phase &ph);
  Status parseNodes(const std::string &keyword, std::vector<NodeId> &ids);
  Status defineVars(const std::vector<std::string> &vars, const Token &at);
  Status verifySchedule(const Schedule &s) const;

  Schedule s_;
  Token scheduleTok_;
  std::vector<Token> stepToks_;       ///< the first token of each step
  std::set<std::string> kernelNames_; ///< of the kernels so far
  std::set<std::string> kernelVars_;  ///< the loop variables of the current kernel
};

// realized := 'realized' nodes
Status ScheduleParser::parseRealized() {
  std::vector<NodeId> ids;
  COIL_TRY_STATUS(parseNodes("realized", ids));
  s_.realized.assign(p_.nodes.size(), false);
  for (NodeId n : ids) s_.realized[size_t(n)] = true;
  return okStatus();
}

// 'extern' IDENT
Expected<NodeId> ScheduleParser::parseExternStep() {
  Token t = cur_;
  COIL_TRY(NodeId n, parseNodeRef("after 'extern'"));
  if (!p_.nodes[size_t(n)].isExtern())
    return errorAt(t, "node '" + p_.nodes[size_t(n)].name +
                          "' is not an extern node: an 'extern' step calls one");
  return n;
}

// 'kernel' IDENT '(' rvars? ')' phase+ 'reads' nodes 'writes' nodes 'fused' nodes
Status ScheduleParser::parseKernel() {
  bump();
  Kernel k;
  if (cur_.kind != Tok::Ident) return expected("the kernel's name", "after 'kernel'");
  k.name = std::string(cur_.text);
  if (!kernelNames_.insert(k.name).second)
    return errorAt(cur_, "kernel '" + k.name + "' is already defined");
  bump();
  kernelVars_.clear();
  Token varsTok = cur_;
  COIL_TRY_STATUS(
      parseVars(k.vars, &k.ranges, "of the kernel's outer point", "after a loop variable"));
  COIL_TRY_STATUS(defineVars(k.vars, varsTok));
  if (isKeyword("gemm"))
    return errorAt(cur_, "a kernel with a fused GEMM mainloop cannot be read back (the text holds "
                         "a summary of the GEMM only, not its epilogue or unfused call)");
  if (!isKeyword("phase")) return expected("'phase'", "in kernel '" + k.name + "'");
  while (isKeyword("phase")) COIL_TRY_STATUS(parsePhase(k));
  if (!isKeyword("reads"))
    return expected("'store', 'reduce', 'phase' or 'reads'", "in kernel '" + k.name + "'");
  COIL_TRY_STATUS(parseNodes("reads", k.reads));
  COIL_TRY_STATUS(parseNodes("writes", k.writes));
  COIL_TRY_STATUS(parseNodes("fused", k.fused));
  s_.steps.push_back(std::move(k));
  return okStatus();
}

// phase := 'phase' '(' rvars? ')' stmt* store* reduction*
Status ScheduleParser::parsePhase(Kernel &k) {
  bump();
  Phase ph;
  Token varsTok = cur_;
  COIL_TRY_STATUS(parseVars(ph.vars, &ph.ranges, "of the phase", "after a loop variable"));
  COIL_TRY_STATUS(defineVars(ph.vars, varsTok));
  COIL_TRY_STATUS(parseBody(ph.body));
  while (isKeyword("store")) COIL_TRY_STATUS(parseStore(ph));
  while (isKeyword("reduce")) COIL_TRY_STATUS(parseReduction(ph));
  if (cur_.kind == Tok::Var)
    return errorAt(cur_, "a statement after the phase's stores and reductions (they come last)");
  if (isKeyword("store"))
    return errorAt(cur_, "a store after the phase's reductions (stores come first)");
  k.phases.push_back(std::move(ph));
  return okStatus();
}

// store := 'store' IDENT '[' (symint (',' symint)*)? ']' '=' VAL
Status ScheduleParser::parseStore(Phase &ph) {
  bump();
  Store st;
  COIL_TRY(st.node, parseNodeRef("as the node stored"));
  COIL_TRY(st.index, parseSymList("as the store's index"));
  COIL_TRY_STATUS(expectPunct("=", "after the store's index"));
  COIL_TRY(st.value, parseVal(ph.body.stmts.size(), "as the value stored"));
  ph.stores.push_back(std::move(st));
  return okStatus();
}

// reduction := 'reduce' REDUCE DTYPE 'last'? 'value' VAL ('position' VAL)?
Status ScheduleParser::parseReduction(Phase &ph) {
  bump();
  Accumulate r;
  COIL_TRY(r.kind, parseReduceKind());
  COIL_TRY(r.accDType, parseDType("as the accumulation type"));
  if (isKeyword("last")) {
    r.selectLast = true;
    bump();
  }
  COIL_TRY_STATUS(expectKeyword("value", "in a reduction"));
  COIL_TRY(r.value, parseVal(ph.body.stmts.size(), "as the folded value"));
  if (isKeyword("position")) {
    bump();
    COIL_TRY(r.position, parseVal(ph.body.stmts.size(), "as the position"));
  }
  ph.reductions.push_back(r);
  return okStatus();
}

// nodes := '[' (IDENT (',' IDENT)*)? ']', after `keyword`
Status ScheduleParser::parseNodes(const std::string &keyword, std::vector<NodeId> &ids) {
  COIL_TRY_STATUS(expectKeyword(keyword, ""));
  COIL_TRY_STATUS(expectPunct("[", "after '" + keyword + "'"));
  std::set<NodeId> seen;
  while (!isPunct("]")) {
    if (!ids.empty()) COIL_TRY_STATUS(expectPunct(",", "or ']' in the list of '" + keyword + "'"));
    Token t = cur_;
    COIL_TRY(NodeId n, parseNodeRef("in the list of '" + keyword + "'"));
    if (!seen.insert(n).second)
      return errorAt(t, "node '" + std::string(t.text) + "' is listed twice in '" + keyword + "'");
    ids.push_back(n);
  }
  bump();
  return okStatus();
}

/// The loop variables of a kernel have distinct names (sched/Kernel.h).
Status ScheduleParser::defineVars(const std::vector<std::string> &vars, const Token &at) {
  for (const std::string &v : vars)
    if (!kernelVars_.insert(v).second)
      return errorAt(at, "loop variable " + v +
                             " is defined twice in the kernel (its outer and "
                             "phase variables have distinct names)");
  return okStatus();
}

/// The verifier on the parsed schedule, its failures located at the step at fault.
Status ScheduleParser::verifySchedule(const Schedule &s) const {
  int step = -1;
  Status st = sched::verifySchedule(s, "parsing", &step);
  if (st.ok()) return st;
  const Token &t =
      step >= 0 && size_t(step) < stepToks_.size() ? stepToks_[size_t(step)] : scheduleTok_;
  return Error::user(st.error().message(), SourceLoc{file_, "", "", t.line, t.col});
}

} // namespace

Expected<ParsedSchedule> parseSchedule(std::string_view text, const std::string &file) {
  return ScheduleParser(text, file).run();
}

} // namespace coil::sched
