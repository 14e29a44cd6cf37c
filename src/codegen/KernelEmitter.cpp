#include "codegen/KernelEmitter.h"

#include "support/Check.h"
#include "support/DType.h"

#include <algorithm>

namespace coil::codegen {

using loop::Body;
using loop::NodeId;
using loop::ReduceKind;
using loop::ScalarOp;
using loop::Stmt;
using loop::Val;

const char *cStorageType(DType t) {
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

std::string computeType(DType t) {
  switch (t) {
  case DType::F16:
  case DType::BF16:
    return "float";
  case DType::Bool:
    return "bool";
  default:
    return cStorageType(t);
  }
}

std::string constantLiteral(const Stmt &s) {
  DType t = s.dtype;
  if (t == DType::Bool) return (s.isInt ? s.intNumber != 0 : s.number != 0) ? "true" : "false";
  if (isFloat(t)) {
    double v = s.isInt ? double(s.intNumber) : s.number;
    switch (t) {
    case DType::F64:
      return doubleLiteral(v);
    default: {
      // f32, and f16/bf16, which compute in f32 (LoopIR.h): the value rounded to f32, as the
      // evaluator reads a constant. Rounding an f16 constant to f16 made HardSigmoid's alpha
      // 1/6 into 0.16663 and Gelu's 1/sqrt(2) into 0.70703 in generated code only.
      float f = 0;
      storeFromDouble(DType::F32, &f, 0, v);
      return floatLiteral(f);
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

SymInt linearIndex(const std::vector<SymInt> &shape, const std::vector<SymInt> &index) {
  SymInt lin(0), stride(1);
  for (size_t d = shape.size(); d-- > 0;) {
    lin = lin + index[d] * stride;
    stride = stride * shape[d];
  }
  return lin;
}

Status KernelEmitterBase::validateBody(const Body &b, size_t phase,
                                       const std::vector<std::string> &vars) {
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
      // A kernel that computes a GEMM (sched/FuseGemmEpilogue.h) loads the product it holds.
      bool product = k_.gemm && s.node == k_.gemm->node;
      if (s.node < 0 || size_t(s.node) >= p_.nodes.size() || (!readSet_.count(s.node) && !product))
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

Status KernelEmitterBase::validate() {
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

void KernelEmitterBase::assignNames() {
  for (const std::string &fixed : fixedNames_) names_.reserve(fixed);
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

void KernelEmitterBase::addLoopRange(const std::string &var, const SymInt &extent) {
  SymRange r = bounds(renamed(extent), ranges_);
  ranges_[cname_[var]] = SymRange{0, std::max<int64_t>(0, r.max - 1)};
}

std::vector<bool> KernelEmitterBase::liveStmts(const Body &b, const sched::Phase *ph) const {
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

std::string KernelEmitterBase::castExpr(const std::string &v, DType from, DType to) const {
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

std::string KernelEmitterBase::storeConv(const std::string &v, DType from, DType node) const {
  if (node == DType::F16)
    return from == DType::F64 ? "coil_d2h(" + v + ")"
                              : "coil_f2h(" + castExpr(v, from, DType::F32) + ")";
  if (node == DType::BF16)
    return from == DType::F64 ? "coil_d2bf(" + v + ")"
                              : "coil_f2bf(" + castExpr(v, from, DType::F32) + ")";
  if (node == DType::Bool) return "uint8_t(" + castExpr(v, from, DType::Bool) + ")";
  return castExpr(v, from, node);
}

bool KernelEmitterBase::invariant(const loop::Body &b, loop::Val v) const {
  // Statements come after their operands: one pass up to `v`.
  std::vector<bool> inv(size_t(v) + 1, false);
  for (size_t i = 0; i <= size_t(v); ++i) {
    const loop::Stmt &s = b.stmts[i];
    switch (s.kind) {
    case loop::Stmt::Kind::Constant:
    case loop::Stmt::Kind::Accumulator:
      inv[i] = true;
      break;
    case loop::Stmt::Kind::Op:
    case loop::Stmt::Kind::Cast:
      inv[i] = std::all_of(s.args.begin(), s.args.end(),
                           [&](loop::Val a) { return size_t(a) < i && inv[size_t(a)]; });
      break;
    default:
      break;
    }
  }
  return inv[size_t(v)];
}

Expected<std::string>
KernelEmitterBase::opExpr(const Stmt &s, const std::vector<std::string> &valName, const Body &b) {
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
    if (cudaMath_ && T == "float") return "coil_cuda_expf(" + a + ")";
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
    if (cudaMath_ && T == "float" && invariant(b, s.args[1]))
      return "coil_cuda_fdiv(" + a + ", " + x + ")";
    return fl ? a + " / " + x : tmpl("coil_div");
  case ScalarOp::Mod:
    if (bo) return bad();
    return fl ? "coil_fmod_floor(" + a + ", " + x + ")" : tmpl("coil_mod");
  case ScalarOp::FMod:
    if (bo) return bad();
    return fl ? "std::fmod(" + a + ", " + x + ")" : tmpl("coil_rem");
  case ScalarOp::Pow: {
    if (bo) return bad();
    if (!fl) return tmpl("coil_ipow");
    // A constant exponent of 2 or 3 (variances, RMSNorm's mean square, GELU's cube) as
    // products: on the CPU they vectorize where std::pow is a call per element, on CUDA powf
    // is a few dozen instructions with branches (x * x is the correctly rounded square; the cube
    // rounds twice, within 2 ulp). NaN, infinities, signed zeros and overflow as pow.
    const Stmt &e = b.stmts[size_t(s.args[1])];
    if (e.kind == Stmt::Kind::Constant) {
      double p = e.isInt ? double(e.intNumber) : e.number;
      if (p == 2) return "(" + a + " * " + a + ")";
      if (p == 3) return "(" + a + " * " + a + " * " + a + ")";
    }
    return "std::pow(" + a + ", " + x + ")";
  }
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

Status KernelEmitterBase::emitStatements(CodeWriter &w, const loop::Body &b,
                                         const std::vector<bool> &live,
                                         std::vector<std::string> &valName, const LoadFn &load,
                                         const IndexFn &index) {
  using loop::Stmt;
  valName.assign(b.stmts.size(), "");
  for (size_t i = 0; i < b.stmts.size(); ++i) {
    if (!live[i]) continue;
    const Stmt &s = b.stmts[i];
    std::string v = "v" + std::to_string(i);
    std::string T = computeType(s.dtype);
    std::string rhs;
    switch (s.kind) {
    case Stmt::Kind::Load: {
      std::string e = load(s);
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
      rhs = index(s.expr);
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
      std::string e = "coil_bitcast<" + std::string(cStorageType(s.dtype)) + ", " +
                      cStorageType(from) + ">(" + bits + ")";
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
      w.line("const int64_t " + cname_[s.symbol] + " = coil_index(" + arg + ", " + index(s.extent) +
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

wrapper::KernelInfo KernelEmitterBase::kernelInfo(const std::string &sourceFile) const {
  using loop::NodeId;
  wrapper::KernelInfo info;
  info.name = k_.name;
  info.sourceFile = sourceFile;
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
  return info;
}

bool KernelEmitterBase::FlatIndex::usesOuter(const SymInt &e) const {
  std::set<std::string> syms;
  e.collectSymbols(syms);
  for (const std::string &v : syms)
    if (outer.count(v)) return true;
  return false;
}

KernelEmitterBase::FlatIndex KernelEmitterBase::flatIndex() const {
  FlatIndex fi;
  std::vector<SymInt> vars, extents;
  for (size_t d = 0; d < k_.vars.size(); ++d) {
    vars.push_back(SymInt::symbol(cname_.at(k_.vars[d])));
    extents.push_back(renamed(k_.ranges[d]));
    fi.outer.insert(cname_.at(k_.vars[d]));
  }
  fi.flat = simplify(linearIndex(extents, vars), ranges_);
  return fi;
}

KernelEmitterBase::FlatAccess KernelEmitterBase::flatAccess(const FlatIndex &fi, loop::NodeId node,
                                                            const std::vector<SymInt> &idx,
                                                            SymInt *lin) const {
  std::vector<SymInt> ridx, shape;
  for (const SymInt &e : idx) ridx.push_back(renamed(e));
  for (const SymInt &d : p_.nodes[size_t(node)].shape) shape.push_back(renamed(d));
  SymInt l = simplify(linearIndex(shape, ridx), ranges_);
  if (lin) *lin = l;
  if (l == fi.flat) return FlatAccess::Flat;
  return fi.usesOuter(l) ? FlatAccess::Other : FlatAccess::Uniform;
}

std::string KernelEmitterBase::phaseComment(const sched::Phase &ph, size_t pi,
                                            const IndexFn &index) const {
  std::string text = "// phase " + std::to_string(pi);
  for (size_t d = 0; d < ph.vars.size(); ++d)
    text += (d ? ", " : " over ") + cname_.at(ph.vars[d]) + " < " + index(ph.ranges[d]);
  std::string what;
  for (const sched::Accumulate &r : ph.reductions)
    what += (what.empty() ? "" : ", ") + std::string(loop::reduceKindName(r.kind));
  std::set<loop::NodeId> stored;
  for (const sched::Store &st : ph.stores) stored.insert(st.node);
  for (loop::NodeId n : stored) what += (what.empty() ? "stores " : ", stores ") + bufName_.at(n);
  return text + (what.empty() ? "" : ": " + what);
}

std::vector<ReductionVar>
KernelEmitterBase::declareReductionVars(CodeWriter &w, const sched::Phase &ph,
                                        const std::string &tag, const ReductionStyle &style) const {
  using loop::ReduceKind;
  std::vector<ReductionVar> reds;
  for (size_t si = 0; si < ph.reductions.size(); ++si) {
    const sched::Accumulate &r = ph.reductions[si];
    ReductionVar red;
    red.r = &r;
    red.vt = ph.body.stmts[size_t(r.value)].dtype;
    red.work = "red" + tag + "_" + std::to_string(si);
    DType D = r.accDType;
    bool fl = isFloat(D);
    std::string T = computeType(D);
    switch (r.kind) {
    case ReduceKind::Sum:
    case ReduceKind::Prod: {
      bool sum = r.kind == ReduceKind::Sum;
      red.W = fl                 ? (D == DType::F32 && sum && style.sumF32InDouble ? "double" : T)
              : D == DType::Bool ? "bool"
                                 : (dtypeSize(D) > 4 ? "uint64_t" : "uint32_t");
      w.line(red.W + " " + red.work + " = " + red.W + (sum ? "(0);" : "(1);"));
      break;
    }
    case ReduceKind::Max:
    case ReduceKind::Min: {
      bool mx = r.kind == ReduceKind::Max;
      red.W = T;
      red.fl = fl;
      std::string limits = style.cuda ? "coil_limits<" : "std::numeric_limits<";
      std::string init = fl ? (mx ? "-" : "") + T + "(INFINITY)"
                            : limits + T + ">::" + (mx ? "lowest()" : "max()");
      if (style.cuda && D == DType::Bool) init = mx ? "false" : "true";
      w.line(T + " " + red.work + " = " + init + ";");
      // CUDA folds f32 with max.NaN / min.NaN: NaN stays in the value.
      if (fl && !(style.cuda && T == "float")) {
        red.nan = red.work + "n";
        w.line("int " + red.nan + " = 0;");
      }
      break;
    }
    case ReduceKind::Any:
    case ReduceKind::All:
      red.W = "int"; // int, not bool: GCC vectorizes int reductions only
      w.line("int " + red.work + (r.kind == ReduceKind::Any ? " = 0;" : " = 1;"));
      break;
    case ReduceKind::ArgMax:
    case ReduceKind::ArgMin:
      // Compared in the value's own type (accDType may name the i64 result).
      red.W = computeType(red.vt);
      red.fl = isFloat(red.vt);
      red.pos = red.work + "i";
      red.seen = red.work + "s";
      w.line(red.W + " " + red.work + " = " + red.W + "(0);");
      w.line("int64_t " + red.pos + " = 0;");
      w.line("bool " + red.seen + " = false;");
      break;
    }
    reds.push_back(red);
  }
  return reds;
}

void KernelEmitterBase::emitFoldElement(CodeWriter &w, const ReductionVar &red, const loop::Body &b,
                                        const std::vector<std::string> &valName,
                                        const ReductionStyle &style) const {
  using loop::ReduceKind;
  const sched::Accumulate &r = *red.r;
  bool arg = r.kind == ReduceKind::ArgMax || r.kind == ReduceKind::ArgMin;
  DType cmpType = arg ? red.vt : r.accDType;
  std::string v = castExpr(valName[size_t(r.value)], red.vt, cmpType);
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
    if (style.cuda && red.W == "float") { // one max.NaN / min.NaN: no NaN flag
      w.line(red.work + " = coil_cuda_f" + (r.kind == ReduceKind::Max ? "max" : "min") + "_nan(" +
             red.work + ", " + v + ");");
      break;
    }
    v = named(v);
    if (red.fl) w.line(red.nan + " |= " + v + " != " + v + ";");
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
    if (red.fl)
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

void KernelEmitterBase::emitReductionResults(CodeWriter &w, const std::string &tag,
                                             const std::vector<ReductionVar> &reds) const {
  using loop::ReduceKind;
  for (size_t si = 0; si < reds.size(); ++si) {
    const ReductionVar &red = reds[si];
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
}

} // namespace coil::codegen
