#include "codegen/cpu/CpuCodegen.h"

#include "codegen/CSource.h"
#include "ir/DType.h"
#include "support/Check.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace coil::codegen {

using loop::Body;
using loop::NodeId;
using loop::ReduceKind;
using loop::ScalarOp;
using loop::Stmt;
using loop::Val;

const char *cpuStorageType(DType t) {
  switch (t) {
#define COIL_DTYPE_CTYPE(E, N, T, S)                                                               \
  case DType::E:                                                                                   \
    return #T;
    COIL_FOR_EACH_DTYPE(COIL_DTYPE_CTYPE)
#undef COIL_DTYPE_CTYPE
  }
  COIL_UNREACHABLE("unknown dtype");
  return "";
}

namespace {

/// The C type values of dtype `t` are computed in: f16/bf16 in float, bool as bool.
std::string computeType(DType t) {
  switch (t) {
  case DType::F16:
  case DType::BF16:
    return "float";
  case DType::Bool:
    return "bool";
  default:
    return cpuStorageType(t);
  }
}

/// The typed literal of a constant statement (rounded to its dtype, exactly as stored).
std::string constantLiteral(const Stmt &s) {
  DType t = s.dtype;
  if (t == DType::Bool) return (s.isInt ? s.intNumber != 0 : s.number != 0) ? "true" : "false";
  if (isFloat(t)) {
    double v = s.isInt ? double(s.intNumber) : s.number;
    switch (t) {
    case DType::F64:
      return doubleLiteral(v);
    case DType::F32: {
      float f = 0;
      storeFromDouble(DType::F32, &f, 0, v);
      return floatLiteral(f);
    }
    case DType::F16: {
      uint16_t h = 0;
      storeFromDouble(DType::F16, &h, 0, v);
      return floatLiteral(halfToFloat(h));
    }
    default: {
      uint16_t h = 0;
      storeFromDouble(DType::BF16, &h, 0, v);
      return floatLiteral(bf16ToFloat(h));
    }
    }
  }
  // Integers: the value wrapped to the dtype, as storeFromInt does.
  int64_t i = 0;
  if (s.isInt) {
    i = s.intNumber;
  } else {
    int64_t tmp = 0;
    storeFromDouble(DType::I64, &tmp, 0, s.number);
    i = tmp;
  }
  uint64_t bits = 0;
  storeFromInt(t, &bits, 0, i);
  int64_t v = loadAsInt(t, &bits, 0);
  if (t == DType::U64) return std::to_string(uint64_t(v)) + "ULL";
  std::string lit = int64Literal(v);
  return t == DType::I64 ? lit : computeType(t) + "(" + lit + ")";
}

/// `term` as rest + var * coef with rest and coef free of `var`; nullopt when not affine.
struct Affine {
  SymInt rest, coef;
};
bool mentions(const SymInt &e, const std::string &var) {
  std::set<std::string> syms;
  e.collectSymbols(syms);
  return syms.count(var) != 0;
}
std::optional<Affine> affineIn(const SymInt &e, const std::string &var) {
  if (!mentions(e, var)) return Affine{e, SymInt(0)};
  switch (e.kind()) {
  case SymInt::Kind::Symbol:
    return Affine{SymInt(0), SymInt(1)};
  case SymInt::Kind::Add: {
    Affine r{SymInt(0), SymInt(0)};
    for (const SymInt &t : e.operands()) {
      auto a = affineIn(t, var);
      if (!a) return std::nullopt;
      r.rest += a->rest;
      r.coef += a->coef;
    }
    return r;
  }
  case SymInt::Kind::Mul: {
    SymInt others(1);
    std::optional<Affine> inner;
    for (const SymInt &t : e.operands()) {
      if (!mentions(t, var)) {
        others *= t;
        continue;
      }
      if (inner) return std::nullopt; // var * var
      inner = affineIn(t, var);
      if (!inner) return std::nullopt;
    }
    return Affine{others * inner->rest, others * inner->coef};
  }
  default:
    return std::nullopt;
  }
}

/// Row-major linear offset of `index` into a tensor of `shape`.
SymInt linearIndex(const std::vector<SymInt> &shape, const std::vector<SymInt> &index) {
  SymInt lin(0), stride(1);
  for (size_t d = shape.size(); d-- > 0;) {
    lin = lin + index[d] * stride;
    stride = stride * shape[d];
  }
  return lin;
}

std::string kernelError(const sched::Kernel &k, const std::string &what) {
  return "cpu codegen: kernel '" + k.name + "': " + what;
}

class Emitter {
public:
  Emitter(const sched::Kernel &k, const loop::LoopProgram &p, const CpuCodegenOptions &o)
      : k_(k), p_(p), o_(o), names_({"v", "o", "d", "n", "acc", "red"}) {}

  Expected<CpuKernelSource> run();

private:
  // --- setup
  Status validate();
  Status validateBody(const Body &b, size_t phase, const std::vector<std::string> &vars);
  void collectSymbols(const SymInt &e) { e.collectSymbols(allSymbols_); }
  void assignNames();
  SymInt perPointWork() const;
  std::string cpp(const SymInt &e) const {
    return simplify(e.substitute(rename_), ranges_).toCpp(ranges_);
  }
  SymInt renamed(const SymInt &e) const { return e.substitute(rename_); }
  void addLoopRange(const std::string &var, const SymInt &extent);

  // --- body
  struct LoopCtx {
    std::string var; ///< C name of the innermost loop variable ("" when no loop)
    std::map<std::string, std::string> hoisted;            ///< offset expression text -> name
    std::vector<std::pair<std::string, std::string>> defs; ///< hoisted (name, expr), in order
    std::map<const void *, std::string> offsets; ///< per Load stmt / Store: the printed offset
    bool simd = true;
  };
  std::vector<bool> liveStmts(const Body &b, const sched::Phase *ph) const;
  std::string offsetOf(LoopCtx &ctx, const Body &b, NodeId node, const std::vector<SymInt> &idx,
                       bool isStore);
  Status planOffsets(LoopCtx &ctx, const Body &b, const std::vector<bool> &live,
                     const std::vector<sched::Store> &stores);
  Status emitBody(CodeWriter &w, LoopCtx &ctx, const Body &b, const std::vector<bool> &live,
                  std::vector<std::string> &valName);
  Expected<std::string> opExpr(const Stmt &s, const std::vector<std::string> &valName,
                               const Body &b);
  std::string castExpr(const std::string &v, DType from, DType to) const;
  std::string storeConv(const std::string &v, DType from, DType node) const;
  Status emitStores(CodeWriter &w, LoopCtx &ctx, const std::vector<sched::Store> &stores,
                    const Body &b, const std::vector<std::string> &valName);

  // --- kernel structure
  Status emitPointwise(CodeWriter &w);
  bool planFlat(LoopCtx &ctx, const std::vector<bool> &live);
  Status emitFlat(CodeWriter &w, LoopCtx &ctx, const std::vector<bool> &live);
  Status emitRows(CodeWriter &w);
  Status emitPhase(CodeWriter &w, size_t pi);
  void emitStartPoint(CodeWriter &w, size_t lastDim);
  void emitCarry(CodeWriter &w, size_t dims);
  std::string paramList(bool restrict) const;
  std::string argList() const;

  const sched::Kernel &k_;
  const loop::LoopProgram &p_;
  const CpuCodegenOptions &o_;
  NameTable names_;
  std::set<std::string> allSymbols_, loopVars_, indirectSyms_;
  std::vector<std::string> sizeSyms_;        ///< original names, sorted
  std::map<std::string, SymInt> rename_;     ///< original symbol -> C-named symbol
  std::map<std::string, std::string> cname_; ///< original symbol -> C name
  SymRanges ranges_;                         ///< over C names
  std::vector<NodeId> buffers_;              ///< reads ∪ writes, ascending
  std::map<NodeId, std::string> bufName_;
  std::set<NodeId> readSet_, writeSet_;
  std::vector<std::string> extent_; ///< C names of the outer extents
  int nextOffset_ = 0;
};

Status Emitter::validateBody(const Body &b, size_t phase, const std::vector<std::string> &vars) {
  (void)vars;
  for (size_t i = 0; i < b.stmts.size(); ++i) {
    const Stmt &s = b.stmts[i];
    for (Val a : s.args)
      if (a < 0 || size_t(a) >= i)
        return Error::internal(kernelError(k_, "phase " + std::to_string(phase) + " statement " +
                                                   std::to_string(i) +
                                                   " uses a value not defined before it"));
    auto arity = [&](size_t n) -> Status {
      if (s.args.size() != n)
        return Error::internal(kernelError(k_, "phase " + std::to_string(phase) + " statement " +
                                                   std::to_string(i) + " needs " +
                                                   std::to_string(n) + " operands"));
      return okStatus();
    };
    switch (s.kind) {
    case Stmt::Kind::Load: {
      if (s.node < 0 || size_t(s.node) >= p_.nodes.size() || !readSet_.count(s.node))
        return Error::internal(kernelError(k_, "phase " + std::to_string(phase) + " loads node " +
                                                   std::to_string(s.node) +
                                                   " that is not in the kernel's reads"));
      const loop::Node &n = p_.nodes[size_t(s.node)];
      if (s.index.size() != n.shape.size())
        return Error::internal(
            kernelError(k_, "load of '" + n.name + "' has " + std::to_string(s.index.size()) +
                                " indices for rank " + std::to_string(n.shape.size())));
      if (n.dtype != s.dtype)
        return Error::internal(kernelError(k_, "load of '" + n.name + "' (" +
                                                   std::string(dtypeName(n.dtype)) + ") typed as " +
                                                   std::string(dtypeName(s.dtype))));
      for (const SymInt &e : s.index) collectSymbols(e);
      break;
    }
    case Stmt::Kind::Index:
      collectSymbols(s.expr);
      break;
    case Stmt::Kind::Op:
      COIL_TRY_STATUS(arity(size_t(loop::scalarOpArity(s.op))));
      break;
    case Stmt::Kind::Cast:
    case Stmt::Kind::BitCast:
      COIL_TRY_STATUS(arity(1));
      if (s.kind == Stmt::Kind::BitCast &&
          dtypeSize(b.stmts[size_t(s.args[0])].dtype) != dtypeSize(s.dtype))
        return Error::internal(kernelError(k_, "bitcast between dtypes of different sizes"));
      break;
    case Stmt::Kind::IndirectIndex:
      COIL_TRY_STATUS(arity(1));
      if (!s.symbol.empty() && s.symbol[0] != '%')
        return Error::internal(
            kernelError(k_, "indirect index symbol '" + s.symbol + "' must start with '%'"));
      indirectSyms_.insert(s.symbol);
      collectSymbols(s.extent);
      break;
    case Stmt::Kind::Accumulator:
      if (s.phase < 0 || size_t(s.phase) >= phase || s.slot < 0 ||
          size_t(s.slot) >= k_.phases[size_t(s.phase)].reductions.size())
        return Error::internal(kernelError(
            k_, "phase " + std::to_string(phase) + " reads accumulator " + std::to_string(s.phase) +
                    "." + std::to_string(s.slot) + " that no earlier phase defines"));
      break;
    case Stmt::Kind::Constant:
      break;
    }
  }
  return okStatus();
}

Status Emitter::validate() {
  if (k_.vars.size() != k_.ranges.size())
    return Error::internal(kernelError(k_, "outer vars and ranges differ in number"));
  if (k_.phases.empty()) return Error::internal(kernelError(k_, "has no phases"));
  readSet_.insert(k_.reads.begin(), k_.reads.end());
  writeSet_.insert(k_.writes.begin(), k_.writes.end());
  std::set<NodeId> all = readSet_;
  all.insert(writeSet_.begin(), writeSet_.end());
  for (NodeId n : all)
    if (n < 0 || size_t(n) >= p_.nodes.size())
      return Error::internal(kernelError(k_, "buffer node " + std::to_string(n) + " out of range"));
  buffers_.assign(all.begin(), all.end());
  std::set<std::string> vars(k_.vars.begin(), k_.vars.end());
  for (const SymInt &r : k_.ranges) collectSymbols(r);
  for (size_t pi = 0; pi < k_.phases.size(); ++pi) {
    const sched::Phase &ph = k_.phases[pi];
    if (ph.vars.size() != ph.ranges.size())
      return Error::internal(
          kernelError(k_, "phase " + std::to_string(pi) + ": vars and ranges differ in number"));
    for (const std::string &v : ph.vars)
      if (!vars.insert(v).second)
        return Error::internal(kernelError(k_, "loop variable '" + v + "' defined twice"));
    for (const SymInt &r : ph.ranges) collectSymbols(r);
    COIL_TRY_STATUS(validateBody(ph.body, pi, ph.vars));
    auto validVal = [&](Val v) { return v >= 0 && size_t(v) < ph.body.stmts.size(); };
    for (const sched::Store &st : ph.stores) {
      if (!writeSet_.count(st.node))
        return Error::internal(kernelError(k_, "phase " + std::to_string(pi) + " stores node " +
                                                   std::to_string(st.node) +
                                                   " that is not in the kernel's writes"));
      if (!validVal(st.value))
        return Error::internal(kernelError(k_, "store of an undefined value"));
      if (st.index.size() != p_.nodes[size_t(st.node)].shape.size())
        return Error::internal(kernelError(k_, "store into '" + p_.nodes[size_t(st.node)].name +
                                                   "' has the wrong number of indices"));
      for (const SymInt &e : st.index) collectSymbols(e);
    }
    for (const sched::Accumulate &r : ph.reductions) {
      if (!validVal(r.value))
        return Error::internal(kernelError(k_, "reduction of an undefined value"));
      bool arg = r.kind == ReduceKind::ArgMax || r.kind == ReduceKind::ArgMin;
      if (arg && !validVal(r.position))
        return Error::internal(kernelError(k_, "argmax/argmin without a position"));
    }
  }
  for (NodeId n : buffers_)
    for (const SymInt &d : p_.nodes[size_t(n)].shape) collectSymbols(d);
  loopVars_ = vars;
  for (const std::string &s : allSymbols_) {
    if (loopVars_.count(s) || indirectSyms_.count(s)) continue;
    if (!s.empty() && s[0] == '%')
      return Error::internal(kernelError(k_, "symbol '" + s +
                                                 "' is neither a loop variable of the kernel "
                                                 "nor an indirect index"));
    sizeSyms_.push_back(s);
  }
  return okStatus();
}

void Emitter::assignNames() {
  for (const char *fixed : {"begin", "end", "f", "t", "lo", "hi", "total", "grid", "block", "task"})
    names_.reserve(fixed);
  auto strip = [](const std::string &s) { return s.empty() || s[0] != '%' ? s : s.substr(1); };
  auto bind = [&](const std::string &sym, const std::string &c) {
    cname_[sym] = c;
    rename_[sym] = SymInt::symbol(c);
  };
  for (const std::string &v : k_.vars) bind(v, names_.fresh(strip(v)));
  for (const sched::Phase &ph : k_.phases)
    for (const std::string &v : ph.vars) bind(v, names_.fresh(strip(v)));
  for (const std::string &s : indirectSyms_) bind(s, names_.fresh(strip(s)));
  for (const std::string &s : sizeSyms_) {
    bind(s, names_.fresh("s_" + sanitizeIdentifier(s)));
    auto it = p_.symbols.find(s);
    ranges_[cname_[s]] = it != p_.symbols.end() ? it->second : SymRange{};
  }
  for (NodeId n : buffers_) bufName_[n] = names_.fresh(p_.nodes[size_t(n)].name);
  for (size_t d = 0; d < k_.vars.size(); ++d) {
    extent_.push_back("n" + std::to_string(d));
    addLoopRange(k_.vars[d], k_.ranges[d]);
  }
  for (const sched::Phase &ph : k_.phases)
    for (size_t d = 0; d < ph.vars.size(); ++d) addLoopRange(ph.vars[d], ph.ranges[d]);
  // Indirect symbols: [0, extent - 1] (clamped), extents from their statements.
  for (const sched::Phase &ph : k_.phases)
    for (const Stmt &s : ph.body.stmts)
      if (s.kind == Stmt::Kind::IndirectIndex) {
        SymRange r = bounds(renamed(s.extent), ranges_);
        ranges_[cname_[s.symbol]] = SymRange{0, std::max<int64_t>(0, r.max - 1)};
      }
}

void Emitter::addLoopRange(const std::string &var, const SymInt &extent) {
  SymRange r = bounds(renamed(extent), ranges_);
  ranges_[cname_[var]] = SymRange{0, std::max<int64_t>(0, r.max - 1)};
}

// ------------------------------------------------------------------------------------- bodies

std::vector<bool> Emitter::liveStmts(const Body &b, const sched::Phase *ph) const {
  std::vector<bool> live(b.stmts.size(), false);
  if (ph) {
    for (const sched::Store &s : ph->stores) live[size_t(s.value)] = true;
    for (const sched::Accumulate &r : ph->reductions) {
      live[size_t(r.value)] = true;
      if (r.position != loop::kNoVal) live[size_t(r.position)] = true;
    }
  }
  std::map<std::string, size_t> definer;
  for (size_t i = 0; i < b.stmts.size(); ++i)
    if (b.stmts[i].kind == Stmt::Kind::IndirectIndex) definer[b.stmts[i].symbol] = i;
  auto markIndex = [&](const std::vector<SymInt> &idx) {
    std::set<std::string> syms;
    for (const SymInt &e : idx) e.collectSymbols(syms);
    for (const std::string &s : syms)
      if (auto it = definer.find(s); it != definer.end()) live[it->second] = true;
  };
  if (ph)
    for (const sched::Store &s : ph->stores) markIndex(s.index);
  for (size_t i = b.stmts.size(); i-- > 0;) {
    if (!live[i]) continue;
    const Stmt &s = b.stmts[i];
    for (Val a : s.args) live[size_t(a)] = true;
    if (s.kind == Stmt::Kind::Load) markIndex(s.index);
    if (s.kind == Stmt::Kind::Index) markIndex({s.expr});
  }
  return live;
}

std::string Emitter::offsetOf(LoopCtx &ctx, const Body &b, NodeId node,
                              const std::vector<SymInt> &idx, bool isStore) {
  (void)b;
  std::vector<SymInt> ridx;
  for (const SymInt &e : idx) ridx.push_back(renamed(e));
  std::vector<SymInt> shape;
  for (const SymInt &d : p_.nodes[size_t(node)].shape) shape.push_back(renamed(d));
  SymInt lin = simplify(linearIndex(shape, ridx), ranges_);
  std::optional<Affine> a;
  if (!ctx.var.empty()) a = affineIn(lin, ctx.var);
  bool hoistable = false;
  if (a) {
    std::set<std::string> syms;
    a->rest.collectSymbols(syms);
    a->coef.collectSymbols(syms);
    hoistable = true;
    for (const std::string &s : syms)
      for (const std::string &ind : indirectSyms_)
        if (cname_[ind] == s) hoistable = false;
  }
  if (isStore && !ctx.var.empty()) {
    // Lanes of a simd loop must store to distinct elements.
    bool distinct =
        hoistable && a &&
        (a->coef.isConstant() ? a->coef.constant() != 0 : proveLE(SymInt(1), a->coef, ranges_));
    if (!distinct) ctx.simd = false;
  }
  if (!hoistable || ctx.var.empty()) return lin.toCpp(ranges_);
  std::string base;
  if (a->rest.isConstant()) {
    base = a->rest.toCpp(ranges_);
  } else {
    std::string text = a->rest.toCpp(ranges_);
    auto it = ctx.hoisted.find(text);
    if (it == ctx.hoisted.end()) {
      std::string name = "o" + std::to_string(nextOffset_++);
      it = ctx.hoisted.emplace(text, name).first;
      ctx.defs.emplace_back(name, text);
    }
    base = it->second;
  }
  if (a->coef == SymInt(0)) return base;
  std::string step;
  if (a->coef == SymInt(1)) {
    step = ctx.var;
  } else if (a->coef.isConstant()) {
    step = ctx.var + " * " + int64Literal(a->coef.constant());
  } else {
    std::string text = a->coef.toCpp(ranges_);
    auto it = ctx.hoisted.find(text);
    if (it == ctx.hoisted.end()) {
      std::string name = "d" + std::to_string(nextOffset_++);
      it = ctx.hoisted.emplace(text, name).first;
      ctx.defs.emplace_back(name, text);
    }
    step = ctx.var + " * " + it->second;
  }
  return base == "0" ? step : base + " + " + step;
}

Status Emitter::planOffsets(LoopCtx &ctx, const Body &b, const std::vector<bool> &live,
                            const std::vector<sched::Store> &stores) {
  for (size_t i = 0; i < b.stmts.size(); ++i)
    if (live[i] && b.stmts[i].kind == Stmt::Kind::Load)
      ctx.offsets[&b.stmts[i]] = offsetOf(ctx, b, b.stmts[i].node, b.stmts[i].index, false);
  for (const sched::Store &s : stores) {
    ctx.offsets[&s] = offsetOf(ctx, b, s.node, s.index, true);
    // A kernel that reads what it writes: keep the loop scalar.
    if (readSet_.count(s.node)) ctx.simd = false;
  }
  return okStatus();
}

std::string Emitter::castExpr(const std::string &v, DType from, DType to) const {
  if (from == to) return v;
  if (to == DType::Bool) return "(" + v + " != 0)";
  if (from == DType::Bool) return computeType(to) + "(" + v + ")";
  if (isFloat(from)) {
    bool dbl = from == DType::F64;
    switch (to) {
    case DType::F64:
      return "double(" + v + ")";
    case DType::F32:
      return dbl ? "coil_d2f(" + v + ")" : v;
    case DType::F16:
      return dbl ? "coil_h2f(coil_d2h(" + v + "))" : "coil_h2f(coil_f2h(" + v + "))";
    case DType::BF16:
      return dbl ? "coil_bf2f(coil_d2bf(" + v + "))" : "coil_bf2f(coil_f2bf(" + v + "))";
    default:
      return "coil_f2i<" + computeType(to) + ">(" + v + ")";
    }
  }
  // from an integer
  switch (to) {
  case DType::F64:
    return "double(" + v + ")";
  case DType::F32:
    return "float(" + v + ")";
  case DType::F16:
    return "coil_h2f(coil_d2h(double(" + v + ")))";
  case DType::BF16:
    return "coil_bf2f(coil_d2bf(double(" + v + ")))";
  default:
    return computeType(to) + "(" + v + ")";
  }
}

/// The stored representation of value `v` (dtype `from`) in a buffer of dtype `node`.
std::string Emitter::storeConv(const std::string &v, DType from, DType node) const {
  if (node == DType::F16)
    return from == DType::F64 ? "coil_d2h(" + v + ")"
                              : "coil_f2h(" + castExpr(v, from, DType::F32) + ")";
  if (node == DType::BF16)
    return from == DType::F64 ? "coil_d2bf(" + v + ")"
                              : "coil_f2bf(" + castExpr(v, from, DType::F32) + ")";
  if (node == DType::Bool) return "uint8_t(" + castExpr(v, from, DType::Bool) + ")";
  return castExpr(v, from, node);
}

Expected<std::string> Emitter::opExpr(const Stmt &s, const std::vector<std::string> &valName,
                                      const Body &b) {
  const std::string a = valName[size_t(s.args[0])];
  const std::string x = s.args.size() > 1 ? valName[size_t(s.args[1])] : "";
  const std::string y = s.args.size() > 2 ? valName[size_t(s.args[2])] : "";
  DType at = b.stmts[size_t(s.args[0])].dtype;
  // Operand type: the first value operand (Select: the second).
  DType t = s.op == ScalarOp::Select ? b.stmts[size_t(s.args[1])].dtype : at;
  std::string T = computeType(t);
  bool fl = isFloat(t), bo = t == DType::Bool, sgn = isSigned(t) && !fl;
  auto bad = [&]() -> Expected<std::string> {
    return Error::internal(kernelError(k_, std::string("scalar op ") + loop::scalarOpName(s.op) +
                                               " on " + std::string(dtypeName(t))));
  };
  auto one = [&]() { return t == DType::F64 ? std::string("1.0") : std::string("1.0f"); };
  auto fn = [&](const char *name) -> Expected<std::string> {
    if (!fl) return bad();
    return std::string("std::") + name + "(" + a + ")";
  };
  auto tmpl = [&](const char *name) {
    return std::string(name) + "<" + T + ">(" + a + ", " + x + ")";
  };
  switch (s.op) {
  case ScalarOp::Neg:
    if (bo) return bad();
    return fl ? "-" + a : "coil_neg<" + T + ">(" + a + ")";
  case ScalarOp::Abs:
    if (bo) return bad();
    return fl ? "std::fabs(" + a + ")" : sgn ? "coil_abs<" + T + ">(" + a + ")" : a;
  case ScalarOp::Sign:
    if (bo) return bad();
    return isUnsigned(t) ? T + "(" + a + " != 0)" : "coil_sign<" + T + ">(" + a + ")";
  case ScalarOp::Reciprocal:
    if (bo) return bad();
    return fl ? one() + " / " + a : "coil_div<" + T + ">(" + T + "(1), " + a + ")";
  case ScalarOp::Exp: // f32: coil's vectorizable exp
    return t == DType::F64 ? fn("exp") : fl ? Expected<std::string>("coil_expf(" + a + ")") : bad();
  case ScalarOp::Log:
    return fn("log");
  case ScalarOp::Sqrt:
    return fn("sqrt");
  case ScalarOp::Sin:
    return fn("sin");
  case ScalarOp::Cos:
    return fn("cos");
  case ScalarOp::Tan:
    return fn("tan");
  case ScalarOp::Asin:
    return fn("asin");
  case ScalarOp::Acos:
    return fn("acos");
  case ScalarOp::Atan:
    return fn("atan");
  case ScalarOp::Sinh:
    return fn("sinh");
  case ScalarOp::Cosh:
    return fn("cosh");
  case ScalarOp::Tanh:
    return t == DType::F64 ? fn("tanh")
           : fl            ? Expected<std::string>("coil_tanhf(" + a + ")")
                           : bad();
  case ScalarOp::Asinh:
    return fn("asinh");
  case ScalarOp::Acosh:
    return fn("acosh");
  case ScalarOp::Atanh:
    return fn("atanh");
  case ScalarOp::Erf:
    return t == DType::F64 ? fn("erf") : fl ? Expected<std::string>("coil_erff(" + a + ")") : bad();
  case ScalarOp::Floor:
    return fl ? "std::floor(" + a + ")" : a;
  case ScalarOp::Ceil:
    return fl ? "std::ceil(" + a + ")" : a;
  case ScalarOp::Round: // half to even under the default rounding mode
    return fl ? "std::nearbyint(" + a + ")" : a;
  case ScalarOp::Sigmoid:
    if (!fl) return bad();
    return "coil_sigmoid(" + a + ")";
  case ScalarOp::Not:
    return "!" + castExpr(a, t, DType::Bool);
  case ScalarOp::BitNot:
    if (fl) return bad();
    return bo ? "!" + a : T + "(~" + a + ")";
  case ScalarOp::IsNaN:
    return fl ? "(" + a + " != " + a + ")" : "false";
  case ScalarOp::IsPosInf:
    return fl ? "(" + a + " == " + T + "(INFINITY))" : "false";
  case ScalarOp::IsNegInf:
    return fl ? "(" + a + " == -" + T + "(INFINITY))" : "false";
  case ScalarOp::Add:
  case ScalarOp::Sub:
  case ScalarOp::Mul: {
    const char *sym = s.op == ScalarOp::Add ? " + " : s.op == ScalarOp::Sub ? " - " : " * ";
    if (fl) return a + sym + x;
    if (bo) return bad();
    return tmpl(s.op == ScalarOp::Add   ? "coil_add"
                : s.op == ScalarOp::Sub ? "coil_sub"
                                        : "coil_mul");
  }
  case ScalarOp::Div:
    if (bo) return bad();
    return fl ? a + " / " + x : tmpl("coil_div");
  case ScalarOp::Mod:
    if (bo) return bad();
    return fl ? "coil_fmod_floor(" + a + ", " + x + ")" : tmpl("coil_mod");
  case ScalarOp::FMod:
    if (bo) return bad();
    return fl ? "std::fmod(" + a + ", " + x + ")" : tmpl("coil_rem");
  case ScalarOp::Pow:
    if (bo) return bad();
    return fl ? "std::pow(" + a + ", " + x + ")" : tmpl("coil_ipow");
  case ScalarOp::Min:
    return tmpl("coil_min");
  case ScalarOp::Max:
    return tmpl("coil_max");
  case ScalarOp::And: // & and | on bools: both sides are computed already, and no branch
    return "bool(" + castExpr(a, t, DType::Bool) + " & " + castExpr(x, t, DType::Bool) + ")";
  case ScalarOp::Or:
    return "bool(" + castExpr(a, t, DType::Bool) + " | " + castExpr(x, t, DType::Bool) + ")";
  case ScalarOp::Xor:
    return "(" + castExpr(a, t, DType::Bool) + " != " + castExpr(x, t, DType::Bool) + ")";
  case ScalarOp::BitAnd:
  case ScalarOp::BitOr:
  case ScalarOp::BitXor: {
    if (fl) return bad();
    const char *sym = s.op == ScalarOp::BitAnd ? " & " : s.op == ScalarOp::BitOr ? " | " : " ^ ";
    return T + "(" + a + sym + x + ")";
  }
  case ScalarOp::Shl:
    if (fl || bo) return bad();
    return tmpl("coil_shl");
  case ScalarOp::Shr:
    if (fl || bo) return bad();
    return tmpl("coil_shr");
  case ScalarOp::Eq:
    return "(" + a + " == " + x + ")";
  case ScalarOp::Ne:
    return "(" + a + " != " + x + ")";
  case ScalarOp::Lt:
    return "(" + a + " < " + x + ")";
  case ScalarOp::Le:
    return "(" + a + " <= " + x + ")";
  case ScalarOp::Gt:
    return "(" + a + " > " + x + ")";
  case ScalarOp::Ge:
    return "(" + a + " >= " + x + ")";
  case ScalarOp::Select: // both sides are computed values: a mask select, no branch
    return "coil_select<" + T + ">(" + castExpr(a, at, DType::Bool) + ", " + x + ", " + y + ")";
  }
  return bad();
}

Status Emitter::emitBody(CodeWriter &w, LoopCtx &ctx, const Body &b, const std::vector<bool> &live,
                         std::vector<std::string> &valName) {
  valName.assign(b.stmts.size(), "");
  for (size_t i = 0; i < b.stmts.size(); ++i) {
    if (!live[i]) continue;
    const Stmt &s = b.stmts[i];
    std::string v = "v" + std::to_string(i);
    std::string T = computeType(s.dtype);
    std::string rhs;
    switch (s.kind) {
    case Stmt::Kind::Load: {
      std::string e = bufName_[s.node] + "[" + ctx.offsets[&s] + "]";
      rhs = s.dtype == DType::F16    ? "coil_h2f(" + e + ")"
            : s.dtype == DType::BF16 ? "coil_bf2f(" + e + ")"
            : s.dtype == DType::Bool ? "(" + e + " != 0)"
                                     : e;
      break;
    }
    case Stmt::Kind::Constant:
      valName[i] = constantLiteral(s);
      continue;
    case Stmt::Kind::Index:
      if (auto c = simplify(renamed(s.expr), ranges_).maybeConstant()) { // a literal
        Stmt lit;
        lit.dtype = s.dtype;
        lit.isInt = true;
        lit.intNumber = *c;
        valName[i] = constantLiteral(lit);
        continue;
      }
      rhs = cpp(s.expr);
      if (s.dtype != DType::I64) rhs = castExpr("int64_t(" + rhs + ")", DType::I64, s.dtype);
      break;
    case Stmt::Kind::Op: {
      COIL_TRY(std::string e, opExpr(s, valName, b));
      rhs = e;
      break;
    }
    case Stmt::Kind::Cast:
      rhs = castExpr(valName[size_t(s.args[0])], b.stmts[size_t(s.args[0])].dtype, s.dtype);
      if (rhs == valName[size_t(s.args[0])]) { // same C value (f16 -> f32)
        valName[i] = rhs;
        continue;
      }
      break;
    case Stmt::Kind::BitCast: {
      DType from = b.stmts[size_t(s.args[0])].dtype;
      std::string bits = storeConv(valName[size_t(s.args[0])], from, from);
      std::string e = "coil_bitcast<" + std::string(cpuStorageType(s.dtype)) + ", " +
                      cpuStorageType(from) + ">(" + bits + ")";
      rhs = s.dtype == DType::F16    ? "coil_h2f(" + e + ")"
            : s.dtype == DType::BF16 ? "coil_bf2f(" + e + ")"
            : s.dtype == DType::Bool ? "(" + e + " != 0)"
                                     : e;
      break;
    }
    case Stmt::Kind::IndirectIndex: {
      std::string arg = valName[size_t(s.args[0])];
      DType from = b.stmts[size_t(s.args[0])].dtype;
      if (from != DType::I64) arg = castExpr(arg, from, DType::I64);
      w.line("const int64_t " + cname_[s.symbol] + " = coil_index(" + arg + ", " + cpp(s.extent) +
             ", " + (s.wrapNegative ? "true" : "false") + ");");
      continue;
    }
    case Stmt::Kind::Accumulator:
      valName[i] = "acc" + std::to_string(s.phase) + "_" + std::to_string(s.slot);
      continue;
    }
    valName[i] = v;
    w.line("const " + T + " " + v + " = " + rhs + ";");
  }
  return okStatus();
}

Status Emitter::emitStores(CodeWriter &w, LoopCtx &ctx, const std::vector<sched::Store> &stores,
                           const Body &b, const std::vector<std::string> &valName) {
  for (const sched::Store &s : stores) {
    DType from = b.stmts[size_t(s.value)].dtype;
    DType nd = p_.nodes[size_t(s.node)].dtype;
    w.line(bufName_[s.node] + "[" + ctx.offsets[&s] +
           "] = " + storeConv(valName[size_t(s.value)], from, nd) + ";");
  }
  return okStatus();
}

// ------------------------------------------------------------------------------ kernel shapes

std::string Emitter::paramList(bool restrict) const {
  std::string s;
  for (NodeId n : buffers_) {
    if (!s.empty()) s += ", ";
    bool w = writeSet_.count(n) != 0;
    // A buffer both read and written may alias itself: no restrict on it.
    bool r = restrict && !(w && readSet_.count(n));
    s += std::string(w ? "" : "const ") + cpuStorageType(p_.nodes[size_t(n)].dtype) + " *" +
         (r ? "COIL_RESTRICT " : "") + bufName_.at(n);
  }
  for (const std::string &sym : sizeSyms_) {
    if (!s.empty()) s += ", ";
    s += std::string(restrict ? "[[maybe_unused]] " : "") + "int64_t " + cname_.at(sym);
  }
  return s;
}

std::string Emitter::argList() const {
  std::string s;
  for (NodeId n : buffers_) s += ", " + bufName_.at(n);
  for (const std::string &sym : sizeSyms_) s += ", " + cname_.at(sym);
  return s;
}

/// Decomposes `begin` into the outer indices x0..x{lastDim-1} (and `lo` for the last dim when
/// lastDim < rank: the pointwise shape).
void Emitter::emitStartPoint(CodeWriter &w, size_t dims) {
  size_t rank = k_.vars.size();
  if (rank == 0) return;
  // dims == rank: every outer index is a variable; dims == rank - 1: the last is `lo`.
  if (rank == 1) {
    w.line(std::string("int64_t ") + (dims == rank ? cname_[k_.vars[0]] : "lo") + " = begin;");
    return;
  }
  w.line("int64_t t = begin;");
  for (size_t d = rank; d-- > 1;) {
    std::string var = d == rank - 1 && dims < rank ? "lo" : cname_[k_.vars[d]];
    w.line("int64_t " + var + " = t % " + extent_[d] + ";");
    w.line("t /= " + extent_[d] + ";");
  }
  w.line("int64_t " + cname_[k_.vars[0]] + " = t;");
}

/// Advances x0..x{dims-1} by one point (row-major, with carry).
void Emitter::emitCarry(CodeWriter &w, size_t dims) {
  if (dims == 0) return;
  std::string text;
  for (size_t d = dims; d-- > 0;) {
    const std::string &x = cname_[k_.vars[d]];
    if (d == 0) {
      text += "++" + x + ";";
      break;
    }
    text += "if (++" + x + " == " + extent_[d] + ") { " + x + " = 0; ";
  }
  for (size_t d = 1; d < dims; ++d) text += " }";
  w.line(text);
}

Status Emitter::emitPointwise(CodeWriter &w) {
  const sched::Phase &ph = k_.phases[0];
  size_t rank = k_.vars.size();
  std::string last = cname_[k_.vars[rank - 1]];
  emitStartPoint(w, rank - 1);
  w.open("for (int64_t f = begin; f < end;)");
  w.line("const int64_t hi = std::min<int64_t>(" + extent_[rank - 1] + ", lo + (end - f));");
  LoopCtx ctx;
  ctx.var = last;
  std::vector<bool> live = liveStmts(ph.body, &ph);
  COIL_TRY_STATUS(planOffsets(ctx, ph.body, live, ph.stores));
  for (auto &[name, expr] : ctx.defs) w.line("const int64_t " + name + " = " + expr + ";");
  if (ctx.simd) w.line("#pragma omp simd");
  w.open("for (int64_t " + last + " = lo; " + last + " < hi; ++" + last + ")");
  std::vector<std::string> valName;
  COIL_TRY_STATUS(emitBody(w, ctx, ph.body, live, valName));
  COIL_TRY_STATUS(emitStores(w, ctx, ph.stores, ph.body, valName));
  w.close();
  w.line("f += hi - lo;");
  w.line("lo = 0;");
  emitCarry(w, rank - 1);
  w.close();
  return okStatus();
}

/// A pointwise kernel whose every access is either the row-major flat index of the outer space
/// (same shape, no broadcast or view) or independent of the outer point runs as one flat loop:
/// no row segments, no index decomposition. Fills ctx.offsets; false when not flat.
bool Emitter::planFlat(LoopCtx &ctx, const std::vector<bool> &live) {
  const sched::Phase &ph = k_.phases[0];
  std::vector<SymInt> vars, extents;
  std::set<std::string> outer;
  for (size_t d = 0; d < k_.vars.size(); ++d) {
    vars.push_back(SymInt::symbol(cname_[k_.vars[d]]));
    extents.push_back(renamed(k_.ranges[d]));
    outer.insert(cname_[k_.vars[d]]);
  }
  SymInt flat = simplify(linearIndex(extents, vars), ranges_);
  auto usesOuter = [&](const SymInt &e) {
    std::set<std::string> syms;
    e.collectSymbols(syms);
    for (const std::string &v : syms)
      if (outer.count(v)) return true;
    return false;
  };
  auto offset = [&](NodeId node, const std::vector<SymInt> &idx, bool isStore, std::string &out) {
    std::vector<SymInt> ridx, shape;
    for (const SymInt &e : idx) ridx.push_back(renamed(e));
    for (const SymInt &d : p_.nodes[size_t(node)].shape) shape.push_back(renamed(d));
    SymInt lin = simplify(linearIndex(shape, ridx), ranges_);
    if (lin == flat) {
      out = "f";
      return true;
    }
    if (isStore || usesOuter(lin)) return false;
    out = lin.toCpp(ranges_);
    return true;
  };
  for (size_t i = 0; i < ph.body.stmts.size(); ++i) {
    const Stmt &s = ph.body.stmts[i];
    if (!live[i]) continue;
    if (s.kind == Stmt::Kind::Index && usesOuter(renamed(s.expr))) return false;
    if (s.kind == Stmt::Kind::Load && !offset(s.node, s.index, false, ctx.offsets[&s]))
      return false;
  }
  for (const sched::Store &st : ph.stores) {
    if (!offset(st.node, st.index, true, ctx.offsets[&st])) return false;
    if (readSet_.count(st.node)) ctx.simd = false;
  }
  return true;
}

Status Emitter::emitFlat(CodeWriter &w, LoopCtx &ctx, const std::vector<bool> &live) {
  const sched::Phase &ph = k_.phases[0];
  if (ctx.simd) w.line("#pragma omp simd");
  w.open("for (int64_t f = begin; f < end; ++f)");
  std::vector<std::string> valName;
  COIL_TRY_STATUS(emitBody(w, ctx, ph.body, live, valName));
  COIL_TRY_STATUS(emitStores(w, ctx, ph.stores, ph.body, valName));
  w.close();
  return okStatus();
}

Status Emitter::emitRows(CodeWriter &w) {
  size_t rank = k_.vars.size();
  emitStartPoint(w, rank);
  w.open("for (int64_t f = begin; f < end; ++f)");
  for (size_t pi = 0; pi < k_.phases.size(); ++pi) COIL_TRY_STATUS(emitPhase(w, pi));
  emitCarry(w, rank);
  w.close();
  return okStatus();
}

Status Emitter::emitPhase(CodeWriter &w, size_t pi) {
  const sched::Phase &ph = k_.phases[pi];
  const Body &b = ph.body;
  std::string tag = std::to_string(pi);
  {
    // "// phase 1 over r1 < 100: sum; stores y"
    std::string text = "// phase " + tag;
    for (size_t d = 0; d < ph.vars.size(); ++d)
      text += (d ? ", " : " over ") + cname_[ph.vars[d]] + " < " + cpp(ph.ranges[d]);
    std::string what;
    for (const sched::Accumulate &r : ph.reductions)
      what += (what.empty() ? "" : ", ") + std::string(loop::reduceKindName(r.kind));
    std::set<NodeId> stored;
    for (const sched::Store &st : ph.stores) stored.insert(st.node);
    for (NodeId n : stored) what += (what.empty() ? "stores " : ", stores ") + bufName_[n];
    w.line(text + (what.empty() ? "" : ": " + what));
  }
  // Working variables of the reductions.
  struct Red {
    std::string work, nan, pos, seen, W;
    const sched::Accumulate *r;
    DType vt;
  };
  std::vector<Red> reds;
  std::vector<std::string> clauses;
  bool argReduce = false;
  for (size_t si = 0; si < ph.reductions.size(); ++si) {
    const sched::Accumulate &r = ph.reductions[si];
    Red red;
    red.r = &r;
    red.vt = b.stmts[size_t(r.value)].dtype;
    red.work = "red" + tag + "_" + std::to_string(si);
    DType D = r.accDType;
    bool fl = isFloat(D);
    std::string T = computeType(D);
    switch (r.kind) {
    case ReduceKind::Sum:
    case ReduceKind::Prod: {
      bool sum = r.kind == ReduceKind::Sum;
      red.W = fl                 ? (D == DType::F32 && sum && o_.sumF32InDouble ? "double" : T)
              : D == DType::Bool ? "bool"
                                 : (dtypeSize(D) > 4 ? "uint64_t" : "uint32_t");
      w.line(red.W + " " + red.work + " = " + red.W + (sum ? "(0);" : "(1);"));
      clauses.push_back(std::string("reduction(") + (sum ? "+" : "*") + ":" + red.work + ")");
      break;
    }
    case ReduceKind::Max:
    case ReduceKind::Min: {
      bool mx = r.kind == ReduceKind::Max;
      red.W = T;
      std::string init = fl ? (mx ? "-" : "") + T + "(INFINITY)"
                            : "std::numeric_limits<" + T + ">::" + (mx ? "lowest()" : "max()");
      w.line(T + " " + red.work + " = " + init + ";");
      clauses.push_back(std::string("reduction(") + (mx ? "max" : "min") + ":" + red.work + ")");
      if (fl) {
        red.nan = red.work + "n";
        w.line("int " + red.nan + " = 0;");
        clauses.push_back("reduction(|:" + red.nan + ")");
      }
      break;
    }
    case ReduceKind::Any:
    case ReduceKind::All: {
      bool any = r.kind == ReduceKind::Any;
      red.W = "int"; // int, not bool: GCC vectorizes int reductions only
      w.line("int " + red.work + (any ? " = 0;" : " = 1;"));
      clauses.push_back(std::string("reduction(") + (any ? "|" : "&") + ":" + red.work + ")");
      break;
    }
    case ReduceKind::ArgMax:
    case ReduceKind::ArgMin:
      // Compared in the value's own type (accDType may name the i64 result).
      argReduce = true;
      red.W = computeType(red.vt);
      red.pos = red.work + "i";
      red.seen = red.work + "s";
      w.line(red.W + " " + red.work + " = " + red.W + "(0);");
      w.line("int64_t " + red.pos + " = 0;");
      w.line("bool " + red.seen + " = false;");
      break;
    }
    reds.push_back(red);
  }

  // The loop nest.
  LoopCtx ctx;
  if (!ph.vars.empty()) ctx.var = cname_[ph.vars.back()];
  std::vector<bool> live = liveStmts(b, &ph);
  for (size_t d = 0; d + 1 < ph.vars.size(); ++d) {
    const std::string &v = cname_[ph.vars[d]];
    w.open("for (int64_t " + v + " = 0; " + v + " < " + cpp(ph.ranges[d]) + "; ++" + v + ")");
  }
  if (ph.vars.empty()) w.open("");
  COIL_TRY_STATUS(planOffsets(ctx, b, live, ph.stores));
  if (!ph.vars.empty()) {
    for (auto &[name, expr] : ctx.defs) w.line("const int64_t " + name + " = " + expr + ";");
    if (ctx.simd && !argReduce) {
      std::string pragma = "#pragma omp simd";
      for (const std::string &c : clauses) pragma += " " + c;
      w.line(pragma);
    }
    const std::string &v = ctx.var;
    w.open("for (int64_t " + v + " = 0; " + v + " < " + cpp(ph.ranges.back()) + "; ++" + v + ")");
  }
  std::vector<std::string> valName;
  COIL_TRY_STATUS(emitBody(w, ctx, b, live, valName));
  COIL_TRY_STATUS(emitStores(w, ctx, ph.stores, b, valName));
  for (const Red &red : reds) {
    const sched::Accumulate &r = *red.r;
    bool arg = r.kind == ReduceKind::ArgMax || r.kind == ReduceKind::ArgMin;
    DType cmpType = arg ? red.vt : r.accDType;
    std::string v = castExpr(valName[size_t(r.value)], red.vt, cmpType);
    bool fl = isFloat(cmpType);
    // A temporary when the folded value is an expression used more than once.
    auto named = [&](std::string e) {
      if (e == valName[size_t(r.value)] && e.find_first_of("(-") == std::string::npos) return e;
      w.line("const " + red.W + " " + red.work + "v = " + e + ";");
      return red.work + "v";
    };
    std::string wv = red.W == computeType(cmpType) ? v : red.W + "(" + v + ")";
    switch (r.kind) {
    case ReduceKind::Sum:
      w.line(red.work + " += " + wv + ";");
      break;
    case ReduceKind::Prod:
      w.line(red.work + " *= " + wv + ";");
      break;
    case ReduceKind::Max:
    case ReduceKind::Min: {
      const char *cmp = r.kind == ReduceKind::Max ? " > " : " < ";
      v = named(v);
      if (fl) {
        w.line(red.nan + " |= " + v + " != " + v + ";");
      }
      w.line(red.work + " = " + v + cmp + red.work + " ? " + v + " : " + red.work + ";");
      break;
    }
    case ReduceKind::Any:
      w.line(red.work + " |= int(" + v + ");");
      break;
    case ReduceKind::All:
      w.line(red.work + " &= int(" + v + ");");
      break;
    case ReduceKind::ArgMax:
    case ReduceKind::ArgMin: {
      const char *cmp = r.kind == ReduceKind::ArgMax ? " > " : " < ";
      v = named(v);
      const std::string &best = red.work;
      std::string tie = r.selectLast ? " || " + v + " == " + best : "";
      std::string better = v + cmp + best + tie;
      if (fl)
        better = "(" + v + " != " + v + ") ? " +
                 (r.selectLast ? std::string("true") : "!(" + best + " != " + best + ")") + " : (" +
                 best + " == " + best + " && (" + better + "))";
      w.open("if (!" + red.seen + " || (" + better + "))");
      w.line(best + " = " + v + ";");
      w.line(red.pos + " = " +
             castExpr(valName[size_t(r.position)], b.stmts[size_t(r.position)].dtype, DType::I64) +
             ";");
      w.line(red.seen + " = true;");
      w.close();
      break;
    }
    }
  }
  if (ph.vars.empty()) w.close();
  for (size_t d = 0; d < ph.vars.size(); ++d) w.close();
  // Final values of the accumulators, visible to later phases.
  for (size_t si = 0; si < reds.size(); ++si) {
    const Red &red = reds[si];
    const sched::Accumulate &r = *red.r;
    bool arg = r.kind == ReduceKind::ArgMax || r.kind == ReduceKind::ArgMin;
    std::string T = arg ? "int64_t" : computeType(r.accDType);
    std::string val = arg ? red.pos : red.work;
    if (!red.nan.empty())
      val = red.nan + " ? " + T + "(NAN) : " + red.work;
    else if (!arg && red.W != T)
      val = T + "(" + red.work + ")";
    w.line("const " + T + " acc" + tag + "_" + std::to_string(si) + " = " + val + ";");
  }
  return okStatus();
}

/// Below this much work (statements evaluated), a launcher runs its kernel on one thread: a
/// parallel region's fork and join costs microseconds, which tiny kernels cannot win back.
constexpr int64_t kParallelWork = int64_t(1) << 15;

/// The work per outer point of a kernel: each phase's inner points times its statements.
SymInt Emitter::perPointWork() const {
  SymInt per(0);
  for (const sched::Phase &ph : k_.phases) {
    SymInt points(1);
    for (const SymInt &r : ph.ranges) points = points * r;
    per = per + points * SymInt(std::max<int64_t>(1, int64_t(ph.body.stmts.size())));
  }
  return per;
}

Expected<CpuKernelSource> Emitter::run() {
  COIL_TRY_STATUS(validate());
  assignNames();
  CpuKernelSource out;
  wrapper::KernelInfo &info = out.info;
  info.name = k_.name;
  info.sourceFile = o_.sourceFile;
  info.iterationSpace = k_.ranges;
  for (NodeId n : buffers_) {
    wrapper::KernelParam prm;
    prm.kind = wrapper::KernelParam::Kind::Buffer;
    prm.name = p_.nodes[size_t(n)].name;
    prm.dtype = p_.nodes[size_t(n)].dtype;
    prm.written = writeSet_.count(n) != 0;
    info.params.push_back(prm);
  }
  for (const std::string &s : sizeSyms_) {
    wrapper::KernelParam prm;
    prm.kind = wrapper::KernelParam::Kind::Size;
    prm.name = s;
    prm.dtype = DType::I64;
    info.params.push_back(prm);
  }
  std::set<int32_t> origins;
  for (NodeId n : k_.fused)
    if (n >= 0 && size_t(n) < p_.nodes.size())
      origins.insert(p_.nodes[size_t(n)].origins.begin(), p_.nodes[size_t(n)].origins.end());
  info.origins.assign(origins.begin(), origins.end());

  bool pointwise = k_.phases.size() == 1 && k_.phases[0].vars.empty() &&
                   k_.phases[0].reductions.empty() && !k_.vars.empty();
  const std::vector<int64_t> &blocks = pointwise ? o_.pointwiseBlocks : o_.rowBlocks;
  if (blocks.empty()) return Error::internal(kernelError(k_, "no configs requested"));
  for (int64_t blk : blocks) {
    if (blk < 1) return Error::internal(kernelError(k_, "config block must be >= 1"));
    info.configs.push_back(wrapper::KernelConfig{"block" + std::to_string(blk), {{"block", blk}}});
  }

  LoopCtx flatCtx;
  std::vector<bool> flatLive;
  bool flat = false;
  if (pointwise) {
    flatLive = liveStmts(k_.phases[0].body, &k_.phases[0]);
    flat = planFlat(flatCtx, flatLive);
  }
  CodeWriter w;
  std::string fusedNames;
  for (NodeId n : k_.fused)
    if (n >= 0 && size_t(n) < p_.nodes.size())
      fusedNames += (fusedNames.empty() ? "" : ", ") + p_.nodes[size_t(n)].name;
  w.line("// kernel " + k_.name + (fusedNames.empty() ? "" : " (" + fusedNames + ")") + ": " +
         (flat        ? "pointwise, flat"
          : pointwise ? "pointwise, blocks of rows"
                      : "per outer point, " + std::to_string(k_.phases.size()) + " phase(s)"));
  w.open("static void " + k_.name + "_body(int64_t begin, int64_t end" +
         (buffers_.empty() && sizeSyms_.empty() ? "" : ", ") + paramList(true) + ")");
  // Extents of the outer dims the body walks (the outermost one only bounds a pointwise row).
  for (size_t d = pointwise && k_.vars.size() == 1 ? 0 : 1; d < k_.vars.size() && !flat; ++d)
    w.line("const int64_t " + extent_[d] + " = " + cpp(k_.ranges[d]) + ";");
  COIL_TRY_STATUS(flat        ? emitFlat(w, flatCtx, flatLive)
                  : pointwise ? emitPointwise(w)
                              : emitRows(w));
  w.close();
  for (size_t c = 0; c < blocks.size(); ++c) {
    w.blank();
    w.open("extern \"C\" void " + k_.name + "_c" + std::to_string(c) + "(" + paramList(false) +
           ")");
    std::string total;
    std::string empty;
    for (size_t d = 0; d < k_.vars.size(); ++d) {
      w.line("const int64_t " + extent_[d] + " = " + cpp(k_.ranges[d]) + ";");
      empty += (empty.empty() ? "" : " || ") + extent_[d] + " <= 0";
      total += (total.empty() ? "" : " * ") + extent_[d];
    }
    if (!empty.empty()) w.line("if (" + empty + ") return;");
    w.line("const int64_t total = " + (total.empty() ? std::string("1") : total) + ";");
    w.line("const int64_t block = " + std::to_string(blocks[c]) + ";");
    w.line("const int64_t grid = (total + block - 1) / block;");
    // Threads only when the work (points times the phases' inner points times their
    // statements) pays for the fork and join of a parallel region.
    w.line("const int64_t work = total * (" + cpp(perPointWork()) + ");");
    w.line("#pragma omp parallel for schedule(static) if (grid > 1 && work >= " +
           std::to_string(kParallelWork) + ")");
    w.open("for (int64_t task = 0; task < grid; ++task)");
    w.line(k_.name + "_body(task * block, std::min<int64_t>(total, (task + 1) * block)" +
           argList() + ");");
    w.close();
    w.close();
  }
  out.code = w.str();
  return out;
}

} // namespace

Expected<CpuKernelSource> generateCpuKernel(const sched::Kernel &k, const loop::LoopProgram &p,
                                            const CpuCodegenOptions &o) {
  Emitter e(k, p, o);
  return e.run();
}

} // namespace coil::codegen
