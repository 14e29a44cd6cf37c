// The Loop IR evaluator (the definition of Loop IR semantics; see LoopEval.h and LoopIR.h).
#include "lower/LoopEval.h"

#include "support/Check.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>

namespace coil::loop {

namespace {

// --- extern adapters

std::map<std::string, EvalExternFn> &externTable() {
  static std::map<std::string, EvalExternFn> t;
  return t;
}
std::mutex &externMutex() {
  static std::mutex m;
  return m;
}

} // namespace

void registerEvalExtern(std::string name, EvalExternFn fn) {
  std::lock_guard<std::mutex> lock(externMutex());
  externTable()[std::move(name)] = std::move(fn);
}

namespace {

EvalExternFn findExtern(const std::string &name) {
  static std::once_flag once;
  std::call_once(once, [] { registerCpuKernelEvalExterns(); });
  std::lock_guard<std::mutex> lock(externMutex());
  auto it = externTable().find(name);
  return it == externTable().end() ? EvalExternFn() : it->second;
}

// --- scalars

/// A scalar value: floats in `f` (a double holding a value of the statement's precision),
/// integers and bool in `i` (u64 as its bits).
struct V {
  double f = 0;
  int64_t i = 0;
};

/// `v` converted (as DType.h stores do) to `t` and read back as a value of `t`.
V fromDouble(DType t, double v) {
  uint8_t buf[8];
  storeFromDouble(t, buf, 0, v);
  V r;
  if (isFloat(t))
    r.f = loadAsDouble(t, buf, 0);
  else
    r.i = loadAsInt(t, buf, 0);
  return r;
}
V fromInt(DType t, int64_t v) {
  uint8_t buf[8];
  if (t == DType::Bool) v = v != 0;
  storeFromInt(t, buf, 0, v);
  V r;
  if (isFloat(t))
    r.f = loadAsDouble(t, buf, 0);
  else
    r.i = loadAsInt(t, buf, 0);
  return r;
}
/// Integer `v` of unsigned type `from` converted to float type `to`.
V fromUnsigned(DType to, uint64_t v) {
  return fromDouble(to, double(v));
}

/// The computed value `v` of a float statement of type `t`, rounded to the precision it
/// computes in (f32 for f32, f16 and bf16).
double roundCompute(DType t, double v) {
  if (t == DType::F64) return v;
  uint8_t buf[4];
  storeFromDouble(DType::F32, buf, 0, v);
  return loadAsDouble(DType::F32, buf, 0);
}
/// An integer result wrapped to `t`.
int64_t wrap(DType t, int64_t v) {
  return fromInt(t, v).i;
}

bool isUnsignedInt(DType t) {
  return isUnsigned(t) && t != DType::Bool;
}

/// Casts value `v` of type `from` to `to`.
V castValue(DType from, DType to, V v) {
  if (isFloat(from)) {
    if (to == DType::Bool) return V{0, (v.f != 0 || std::isnan(v.f)) ? 1 : 0};
    return fromDouble(to, v.f);
  }
  if (isFloat(to)) { // from the integer straight, rounding once
    bool u = from == DType::U64;
    if (to == DType::F32) return V{double(u ? float(uint64_t(v.i)) : float(v.i)), 0};
    return u ? fromUnsigned(to, uint64_t(v.i)) : fromDouble(to, double(v.i));
  }
  return fromInt(to, v.i);
}

V bitcastValue(DType from, DType to, V v) {
  uint8_t buf[8] = {};
  if (isFloat(from))
    storeFromDouble(from, buf, 0, v.f);
  else
    storeFromInt(from, buf, 0, v.i);
  V r;
  if (isFloat(to))
    r.f = loadAsDouble(to, buf, 0);
  else
    r.i = loadAsInt(to, buf, 0);
  return r;
}

int bitsOf(DType t) {
  return int(dtypeSize(t)) * 8;
}

double floatMod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

double roundHalfEven(double x) {
  if (!std::isfinite(x)) return x;
  double r = std::round(x); // half away from zero
  if (std::fabs(x - std::trunc(x)) == 0.5) r = 2.0 * std::round(x / 2.0);
  return r;
}

/// Integer power with wrap-around (exponent >= 0); negative exponents as ONNX's integer Pow:
/// 1 / base^-e truncated.
int64_t intPow(int64_t base, int64_t e) {
  if (e < 0) {
    if (base == 1) return 1;
    if (base == -1) return (e % 2 == 0) ? 1 : -1;
    return 0;
  }
  uint64_t r = 1, b = uint64_t(base);
  while (e > 0) {
    if (e & 1) r *= b;
    b *= b;
    e >>= 1;
  }
  return int64_t(r);
}

V applyFloat(ScalarOp op, double x, double y = 0) {
  auto B = [](bool b) { return V{0, b ? 1 : 0}; };
  auto F = [](double d) { return V{d, 0}; };
  switch (op) {
  case ScalarOp::Neg:
    return F(-x);
  case ScalarOp::Abs:
    return F(std::fabs(x));
  case ScalarOp::Sign:
    return F(x > 0 ? 1.0 : x < 0 ? -1.0 : x); // NaN and zeros stay
  case ScalarOp::Reciprocal:
    return F(1.0 / x);
  case ScalarOp::Exp:
    return F(std::exp(x));
  case ScalarOp::Log:
    return F(std::log(x));
  case ScalarOp::Sqrt:
    return F(std::sqrt(x));
  case ScalarOp::Sin:
    return F(std::sin(x));
  case ScalarOp::Cos:
    return F(std::cos(x));
  case ScalarOp::Tan:
    return F(std::tan(x));
  case ScalarOp::Asin:
    return F(std::asin(x));
  case ScalarOp::Acos:
    return F(std::acos(x));
  case ScalarOp::Atan:
    return F(std::atan(x));
  case ScalarOp::Sinh:
    return F(std::sinh(x));
  case ScalarOp::Cosh:
    return F(std::cosh(x));
  case ScalarOp::Tanh:
    return F(std::tanh(x));
  case ScalarOp::Asinh:
    return F(std::asinh(x));
  case ScalarOp::Acosh:
    return F(std::acosh(x));
  case ScalarOp::Atanh:
    return F(std::atanh(x));
  case ScalarOp::Erf:
    return F(std::erf(x));
  case ScalarOp::Floor:
    return F(std::floor(x));
  case ScalarOp::Ceil:
    return F(std::ceil(x));
  case ScalarOp::Round:
    return F(roundHalfEven(x));
  case ScalarOp::Sigmoid:
    return F(1.0 / (1.0 + std::exp(-x)));
  case ScalarOp::Not:
    return B(x == 0);
  case ScalarOp::IsNaN:
    return B(std::isnan(x));
  case ScalarOp::IsPosInf:
    return B(std::isinf(x) && x > 0);
  case ScalarOp::IsNegInf:
    return B(std::isinf(x) && x < 0);
  case ScalarOp::Add:
    return F(x + y);
  case ScalarOp::Sub:
    return F(x - y);
  case ScalarOp::Mul:
    return F(x * y);
  case ScalarOp::Div:
    return F(x / y);
  case ScalarOp::Mod:
    return F(floatMod(x, y));
  case ScalarOp::FMod:
    return F(std::fmod(x, y));
  case ScalarOp::Pow:
    return F(std::pow(x, y));
  case ScalarOp::Min:
    return F(std::isnan(x) || std::isnan(y) ? std::numeric_limits<double>::quiet_NaN()
                                            : std::min(x, y));
  case ScalarOp::Max:
    return F(std::isnan(x) || std::isnan(y) ? std::numeric_limits<double>::quiet_NaN()
                                            : std::max(x, y));
  case ScalarOp::And:
    return B(x != 0 && y != 0);
  case ScalarOp::Or:
    return B(x != 0 || y != 0);
  case ScalarOp::Xor:
    return B((x != 0) != (y != 0));
  case ScalarOp::Eq:
    return B(x == y);
  case ScalarOp::Ne:
    return B(x != y);
  case ScalarOp::Lt:
    return B(x < y);
  case ScalarOp::Le:
    return B(x <= y);
  case ScalarOp::Gt:
    return B(x > y);
  case ScalarOp::Ge:
    return B(x >= y);
  default:
    break;
  }
  COIL_UNREACHABLE(std::string("scalar op ") + scalarOpName(op) + " on floats");
  return {};
}

V applyInt(ScalarOp op, DType t, int64_t x, int64_t y = 0) {
  bool uns = isUnsignedInt(t);
  uint64_t ux = uint64_t(x), uy = uint64_t(y);
  auto B = [](bool b) { return V{0, b ? 1 : 0}; };
  auto I = [&](int64_t v) { return V{0, wrap(t, v)}; };
  auto viaDouble = [&](ScalarOp o) {
    double dx = uns ? double(ux) : double(x);
    V r = applyFloat(o, dx);
    return fromDouble(t, r.f);
  };
  int bits = bitsOf(t);
  switch (op) {
  case ScalarOp::Neg:
    return I(int64_t(0 - ux));
  case ScalarOp::Abs:
    return I(uns || x >= 0 ? x : int64_t(0 - ux));
  case ScalarOp::Sign:
    return I(uns ? (x != 0) : (x > 0) - (x < 0));
  case ScalarOp::Reciprocal:
    return I(x == 0 ? 0 : (x == 1 ? 1 : (!uns && x == -1 ? -1 : 0)));
  case ScalarOp::Floor:
  case ScalarOp::Ceil:
  case ScalarOp::Round:
    return I(x);
  case ScalarOp::Not:
    return B(x == 0);
  case ScalarOp::BitNot:
    return I(int64_t(~ux));
  case ScalarOp::IsNaN:
  case ScalarOp::IsPosInf:
  case ScalarOp::IsNegInf:
    return B(false);
  case ScalarOp::Add:
    return I(int64_t(ux + uy));
  case ScalarOp::Sub:
    return I(int64_t(ux - uy));
  case ScalarOp::Mul:
    return I(int64_t(ux * uy));
  case ScalarOp::Div:
    if (y == 0) return I(0);
    if (uns) return I(int64_t(ux / uy));
    if (x == std::numeric_limits<int64_t>::min() && y == -1) return I(x);
    return I(x / y);
  case ScalarOp::Mod:
    if (y == 0) return I(0);
    if (uns) return I(int64_t(ux % uy));
    if (y == -1) return I(0);
    return I(floorModInt(x, y));
  case ScalarOp::FMod:
    if (y == 0) return I(0);
    if (uns) return I(int64_t(ux % uy));
    if (y == -1) return I(0);
    return I(x % y);
  case ScalarOp::Pow:
    if (uns) return I(intPow(x, y < 0 && bits < 64 ? y : (y < 0 ? 0 : y)));
    return I(intPow(x, y));
  case ScalarOp::Min:
    return I(uns ? int64_t(std::min(ux, uy)) : std::min(x, y));
  case ScalarOp::Max:
    return I(uns ? int64_t(std::max(ux, uy)) : std::max(x, y));
  case ScalarOp::And:
    return B(x != 0 && y != 0);
  case ScalarOp::Or:
    return B(x != 0 || y != 0);
  case ScalarOp::Xor:
    return B((x != 0) != (y != 0));
  case ScalarOp::BitAnd:
    return I(int64_t(ux & uy));
  case ScalarOp::BitOr:
    return I(int64_t(ux | uy));
  case ScalarOp::BitXor:
    return I(int64_t(ux ^ uy));
  case ScalarOp::Shl: {
    // Shift amounts outside [0, bits) give 0 (never UB).
    if (y < 0 || y >= bits) return I(0);
    return I(int64_t(ux << y));
  }
  case ScalarOp::Shr: {
    if (y < 0 || y >= bits) return I(uns || x >= 0 ? 0 : -1);
    if (uns) {
      uint64_t mask = bits == 64 ? ~uint64_t(0) : ((uint64_t(1) << bits) - 1);
      return I(int64_t((ux & mask) >> y));
    }
    return I(x >> y);
  }
  case ScalarOp::Eq:
    return B(x == y);
  case ScalarOp::Ne:
    return B(x != y);
  case ScalarOp::Lt:
    return B(uns ? ux < uy : x < y);
  case ScalarOp::Le:
    return B(uns ? ux <= uy : x <= y);
  case ScalarOp::Gt:
    return B(uns ? ux > uy : x > y);
  case ScalarOp::Ge:
    return B(uns ? ux >= uy : x >= y);
  default:
    return viaDouble(op);
  }
}

// --- compiled index expressions

/// A SymInt compiled for fast evaluation: symbols are slots of an int64 array.
struct CExpr {
  enum class Op : uint8_t { Const, Slot, Add, Mul, FloorDiv, Mod, Min, Max };
  Op op = Op::Const;
  int64_t value = 0; ///< Const
  int32_t slot = 0;  ///< Slot
  std::vector<CExpr> args;
};

/// Slots of the symbols (sizes, loop variables, indirect indices) and their current values.
struct Slots {
  std::map<std::string, int32_t> index;
  std::vector<std::string> names;
  std::vector<int64_t> values;
  std::vector<uint8_t> bound;

  int32_t of(const std::string &name) {
    auto [it, fresh] = index.emplace(name, int32_t(names.size()));
    if (fresh) {
      names.push_back(name);
      values.push_back(0);
      bound.push_back(0);
    }
    return it->second;
  }
  void set(int32_t s, int64_t v) {
    values[size_t(s)] = v;
    bound[size_t(s)] = 1;
  }
};

CExpr compile(const SymInt &e, Slots &slots) {
  CExpr c;
  switch (e.kind()) {
  case SymInt::Kind::Const:
    c.op = CExpr::Op::Const;
    c.value = e.constant();
    return c;
  case SymInt::Kind::Symbol:
    c.op = CExpr::Op::Slot;
    c.slot = slots.of(e.symbolName());
    return c;
  case SymInt::Kind::Add:
    c.op = CExpr::Op::Add;
    break;
  case SymInt::Kind::Mul:
    c.op = CExpr::Op::Mul;
    break;
  case SymInt::Kind::FloorDiv:
    c.op = CExpr::Op::FloorDiv;
    break;
  case SymInt::Kind::Mod:
    c.op = CExpr::Op::Mod;
    break;
  case SymInt::Kind::Min:
    c.op = CExpr::Op::Min;
    break;
  case SymInt::Kind::Max:
    c.op = CExpr::Op::Max;
    break;
  }
  for (const SymInt &o : e.operands()) c.args.push_back(compile(o, slots));
  return c;
}

/// Evaluates `c`; false (with `err` set) on an unbound symbol, a division by zero or an
/// overflow.
bool evalC(const CExpr &c, const Slots &s, int64_t &out, std::string &err) {
  switch (c.op) {
  case CExpr::Op::Const:
    out = c.value;
    return true;
  case CExpr::Op::Slot:
    if (!s.bound[size_t(c.slot)]) {
      err = "unbound symbol '" + s.names[size_t(c.slot)] + "'";
      return false;
    }
    out = s.values[size_t(c.slot)];
    return true;
  default:
    break;
  }
  int64_t acc = 0;
  if (!evalC(c.args[0], s, acc, err)) return false;
  for (size_t k = 1; k < c.args.size(); ++k) {
    int64_t v;
    if (!evalC(c.args[k], s, v, err)) return false;
    switch (c.op) {
    case CExpr::Op::Add:
      if (__builtin_add_overflow(acc, v, &acc)) {
        err = "integer overflow in an index expression";
        return false;
      }
      break;
    case CExpr::Op::Mul:
      if (__builtin_mul_overflow(acc, v, &acc)) {
        err = "integer overflow in an index expression";
        return false;
      }
      break;
    case CExpr::Op::FloorDiv:
    case CExpr::Op::Mod:
      if (v == 0) {
        err = "division by zero in an index expression";
        return false;
      }
      if (c.op == CExpr::Op::FloorDiv && acc == std::numeric_limits<int64_t>::min() && v == -1) {
        err = "integer overflow in an index expression";
        return false;
      }
      acc = c.op == CExpr::Op::FloorDiv ? floorDivInt(acc, v) : floorModInt(acc, v);
      break;
    case CExpr::Op::Min:
      acc = std::min(acc, v);
      break;
    case CExpr::Op::Max:
      acc = std::max(acc, v);
      break;
    default:
      break;
    }
  }
  out = acc;
  return true;
}

/// The compiled index expressions of one statement.
struct CStmt {
  std::vector<CExpr> index; ///< Load
  CExpr expr;               ///< Index
  CExpr extent;             ///< IndirectIndex
  int32_t slot = -1;        ///< IndirectIndex: the symbol defined
};

std::vector<CStmt> compileBody(const Body &body, Slots &slots) {
  std::vector<CStmt> out(body.stmts.size());
  for (size_t k = 0; k < body.stmts.size(); ++k) {
    const Stmt &st = body.stmts[k];
    CStmt &c = out[k];
    switch (st.kind) {
    case Stmt::Kind::Load:
      for (const SymInt &e : st.index) c.index.push_back(compile(e, slots));
      break;
    case Stmt::Kind::Index:
      c.expr = compile(st.expr, slots);
      break;
    case Stmt::Kind::IndirectIndex:
      c.extent = compile(st.extent, slots);
      c.slot = slots.of(st.symbol);
      break;
    default:
      break;
    }
  }
  return out;
}

// --- the evaluator

struct Evaluator {
  const LoopProgram &p;
  SymBindings env;                              ///< size symbols (inputs' and data-dependent ones)
  Slots slots;                                  ///< every symbol, for compiled index expressions
  std::vector<Tensor> values;                   ///< per node
  std::map<NodeId, std::vector<Tensor>> extras; ///< extern outputs >= 1
  std::vector<std::vector<int64_t>> strides;

  explicit Evaluator(const LoopProgram &prog) : p(prog) {}

  /// Forgets the loop variables and indirect indices of the previous node, so that a stray
  /// reference to one is reported instead of reading a stale value.
  void unbindLoopSymbols() {
    for (size_t i = 0; i < slots.names.size(); ++i)
      if (!slots.names[i].empty() && slots.names[i][0] == '%') slots.bound[i] = 0;
  }

  void bindSize(const std::string &name, int64_t v) {
    env[name] = v;
    slots.set(slots.of(name), v);
  }

  Error internal(const Node &n, const std::string &msg) const {
    return Error::internal("loop node '" + n.name + "': " + msg, n.loc);
  }

  Expected<Shape> shapeOf(const Node &n, const std::vector<SymInt> &shape) const {
    Shape s;
    for (const SymInt &d : shape) {
      auto v = d.evaluate(env);
      if (!v.ok()) return internal(n, "shape: " + v.error().message());
      if (*v < 0) return internal(n, "negative dim " + std::to_string(*v) + " = " + d.str());
      s.push_back(*v);
    }
    return s;
  }

  Status bindInputs(const std::vector<Tensor> &inputs) {
    if (inputs.size() != p.inputs.size())
      return Error::user("the program takes " + std::to_string(p.inputs.size()) + " inputs, got " +
                         std::to_string(inputs.size()));
    for (size_t k = 0; k < inputs.size(); ++k) {
      const Node &n = p.nodes.at(size_t(p.inputs[k]));
      const Tensor &t = inputs[k];
      std::string name = k < p.inputNames.size() ? p.inputNames[k] : n.name;
      if (t.dtype() != n.dtype)
        return Error::user("input '" + name + "' must have dtype " +
                           std::string(dtypeName(n.dtype)) + ", got " +
                           std::string(dtypeName(t.dtype())));
      if (t.rank() != int64_t(n.shape.size()))
        return Error::user("input '" + name + "' must have rank " + std::to_string(n.shape.size()) +
                           ", got shape " + shapeStr(t.shape()));
      for (size_t d = 0; d < n.shape.size(); ++d) {
        if (!n.shape[d].isSymbol()) continue;
        const std::string &s = n.shape[d].symbolName();
        auto it = env.find(s);
        if (it == env.end())
          bindSize(s, t.dim(int64_t(d)));
        else if (it->second != t.dim(int64_t(d)))
          return Error::user("input '" + name + "' dim " + std::to_string(d) + " is " +
                             std::to_string(t.dim(int64_t(d))) + " but '" + s + "' is " +
                             std::to_string(it->second));
      }
    }
    for (size_t k = 0; k < inputs.size(); ++k) {
      const Node &n = p.nodes.at(size_t(p.inputs[k]));
      std::string name = k < p.inputNames.size() ? p.inputNames[k] : n.name;
      for (size_t d = 0; d < n.shape.size(); ++d) {
        auto v = n.shape[d].evaluate(env);
        if (!v.ok() || *v != inputs[k].dim(int64_t(d)))
          return Error::user("input '" + name + "' must have shape matching " +
                             TensorType{n.dtype, n.shape}.str() + ", got " +
                             shapeStr(inputs[k].shape()));
      }
    }
    for (const auto &[s, v] : env) {
      auto r = p.symbols.find(s);
      if (r != p.symbols.end() && (v < r->second.min || v > r->second.max))
        return Error::user("size '" + s + "' is " + std::to_string(v) + ", outside its range [" +
                           std::to_string(r->second.min) + ", " + std::to_string(r->second.max) +
                           "]");
    }
    return okStatus();
  }

  /// Evaluates `body` at the point bound in `env`; returns the statement values.
  Status evalBody(const Node &n, const Body &body, const std::vector<CStmt> &cs,
                  std::vector<V> &vals) {
    vals.resize(body.stmts.size());
    std::string err;
    for (size_t k = 0; k < body.stmts.size(); ++k) {
      const Stmt &s = body.stmts[k];
      V r;
      switch (s.kind) {
      case Stmt::Kind::Load: {
        const Node &src = p.nodes.at(size_t(s.node));
        const Tensor &t = values.at(size_t(s.node));
        if (s.node >= NodeId(&n - p.nodes.data()))
          return internal(n, "load of a later node '" + src.name + "'");
        if (s.index.size() != size_t(t.rank()))
          return internal(n, "load of rank " + std::to_string(s.index.size()) + " from '" +
                                 src.name + "' of rank " + std::to_string(t.rank()));
        int64_t off = 0;
        const std::vector<int64_t> &st = strides[size_t(s.node)];
        for (size_t d = 0; d < s.index.size(); ++d) {
          int64_t v;
          if (!evalC(cs[k].index[d], slots, v, err)) return internal(n, "index: " + err);
          if (v < 0 || v >= t.dim(int64_t(d)))
            return internal(n, "load of '" + src.name + "' out of bounds: dim " +
                                   std::to_string(d) + " index " + s.index[d].str() + " = " +
                                   std::to_string(v) + ", size " +
                                   std::to_string(t.dim(int64_t(d))));
          off += v * st[d];
        }
        if (t.dtype() != s.dtype)
          return internal(n, "load of '" + src.name + "' as " + std::string(dtypeName(s.dtype)));
        if (isFloat(s.dtype))
          r.f = t.getDouble(off);
        else
          r.i = t.getInt(off);
        break;
      }
      case Stmt::Kind::Constant:
        if (s.isInt)
          r = isFloat(s.dtype) ? fromDouble(s.dtype, double(s.intNumber))
                               : fromInt(s.dtype, s.intNumber);
        else
          r = isFloat(s.dtype) ? V{roundCompute(s.dtype, s.number), 0}
                               : fromDouble(s.dtype, s.number);
        break;
      case Stmt::Kind::Index: {
        int64_t v;
        if (!evalC(cs[k].expr, slots, v, err)) return internal(n, "index expression: " + err);
        r = isFloat(s.dtype) ? fromDouble(s.dtype, double(v)) : fromInt(s.dtype, v);
        if (isFloat(s.dtype)) r.f = roundCompute(s.dtype, r.f);
        break;
      }
      case Stmt::Kind::Op: {
        if (s.args.size() != size_t(scalarOpArity(s.op)))
          return internal(n, std::string("wrong arity of ") + scalarOpName(s.op));
        for (Val a : s.args)
          if (a < 0 || size_t(a) >= k) return internal(n, "use of an undefined value");
        if (s.op == ScalarOp::Select) {
          r = vals[size_t(s.args[0])].i != 0 ? vals[size_t(s.args[1])] : vals[size_t(s.args[2])];
          break;
        }
        DType at = body.stmts[size_t(s.args[0])].dtype;
        if (isFloat(at)) {
          r = applyFloat(s.op, vals[size_t(s.args[0])].f,
                         s.args.size() > 1 ? vals[size_t(s.args[1])].f : 0.0);
          if (isFloat(s.dtype)) r.f = roundCompute(s.dtype, r.f);
        } else {
          r = applyInt(s.op, at, vals[size_t(s.args[0])].i,
                       s.args.size() > 1 ? vals[size_t(s.args[1])].i : 0);
        }
        break;
      }
      case Stmt::Kind::Cast: {
        DType from = body.stmts.at(size_t(s.args.at(0))).dtype;
        r = castValue(from, s.dtype, vals[size_t(s.args[0])]);
        break;
      }
      case Stmt::Kind::BitCast: {
        DType from = body.stmts.at(size_t(s.args.at(0))).dtype;
        r = bitcastValue(from, s.dtype, vals[size_t(s.args[0])]);
        break;
      }
      case Stmt::Kind::IndirectIndex: {
        int64_t v = vals[size_t(s.args.at(0))].i;
        int64_t e;
        if (!evalC(cs[k].extent, slots, e, err)) return internal(n, "extent: " + err);
        if (v < 0 && s.wrapNegative) v += e;
        v = std::max<int64_t>(0, std::min<int64_t>(v, e - 1));
        slots.set(cs[k].slot, v);
        r.i = v;
        break;
      }
      case Stmt::Kind::Accumulator:
        return internal(n, "accumulator statement outside a fused kernel");
      }
      vals[k] = r;
    }
    return okStatus();
  }

  void store(Tensor &t, int64_t i, DType valType, const V &v) {
    if (isFloat(valType))
      t.setDouble(i, v.f);
    else if (isFloat(t.dtype()) && valType == DType::U64)
      t.setDouble(i, double(uint64_t(v.i)));
    else
      t.setInt(i, v.i);
  }

  /// Calls f() for every point of `shape`, binding `vars` in env.
  template <typename F>
  Status forEachPoint(const std::vector<std::string> &vars, const Shape &shape, F f) {
    int64_t total = numelOf(shape);
    if (total == 0) return okStatus();
    std::vector<int64_t> pt(shape.size(), 0);
    std::vector<int32_t> vs;
    for (size_t d = 0; d < vars.size(); ++d) {
      vs.push_back(slots.of(vars[d]));
      slots.set(vs.back(), 0);
    }
    for (int64_t flat = 0; flat < total; ++flat) {
      COIL_TRY_STATUS(f(flat));
      for (size_t d = shape.size(); d-- > 0;) {
        if (++pt[d] < shape[d]) {
          slots.set(vs[d], pt[d]);
          break;
        }
        pt[d] = 0;
        slots.set(vs[d], 0);
      }
    }
    return okStatus();
  }

  Status pointwise(const Node &n, const PointwiseNode &pw, Tensor &out) {
    if (pw.vars.size() != n.shape.size()) return internal(n, "vars do not match the rank");
    if (pw.result < 0 || size_t(pw.result) >= pw.body.stmts.size()) return internal(n, "no result");
    DType rt = pw.body.stmts[size_t(pw.result)].dtype;
    if (rt != n.dtype) return internal(n, "result of type " + std::string(dtypeName(rt)));
    std::vector<V> vals;
    std::vector<CStmt> cs = compileBody(pw.body, slots);
    unbindLoopSymbols();
    return forEachPoint(pw.vars, out.shape(), [&](int64_t flat) -> Status {
      COIL_TRY_STATUS(evalBody(n, pw.body, cs, vals));
      store(out, flat, rt, vals[size_t(pw.result)]);
      return okStatus();
    });
  }

  Status reduction(const Node &n, const ReductionNode &rn, Tensor &out) {
    if (rn.vars.size() != n.shape.size() || rn.rvars.size() != rn.rranges.size())
      return internal(n, "vars do not match the ranges");
    COIL_TRY(Shape rshape, shapeOf(n, rn.rranges));
    DType acc = rn.accDType;
    DType vt = rn.body.stmts.at(size_t(rn.value)).dtype;
    if (vt != acc) return internal(n, "value of type " + std::string(dtypeName(vt)));
    bool arg = rn.kind == ReduceKind::ArgMax || rn.kind == ReduceKind::ArgMin;
    if (arg && n.dtype != DType::I64) return internal(n, "arg reduction not to i64");
    bool fl = isFloat(acc), uns = isUnsigned(acc); // bool counts as unsigned here
    std::vector<V> vals;
    std::vector<CStmt> cs = compileBody(rn.body, slots);
    unbindLoopSymbols();
    return forEachPoint(rn.vars, out.shape(), [&](int64_t flat) -> Status {
      V a;
      bool first = true;
      int64_t pos = 0;
      double inf = std::numeric_limits<double>::infinity();
      switch (rn.kind) {
      case ReduceKind::Sum:
        a = V{0, 0};
        break;
      case ReduceKind::Prod:
        a = fl ? V{1, 0} : V{0, 1};
        break;
      case ReduceKind::Max:
        // the lowest value of the type (wrapping 2^(bits-1) gives it for signed types)
        a = fl ? V{-inf, 0} : V{0, uns ? 0 : wrap(acc, int64_t(uint64_t(1) << (bitsOf(acc) - 1)))};
        break;
      case ReduceKind::Min:
        a = fl ? V{inf, 0}
               : V{0, uns ? wrap(acc, -1) : wrap(acc, ~int64_t(uint64_t(1) << (bitsOf(acc) - 1)))};
        break;
      case ReduceKind::ArgMax:
      case ReduceKind::ArgMin:
        break;
      case ReduceKind::Any:
        a = V{0, 0};
        break;
      case ReduceKind::All:
        a = V{0, 1};
        break;
      }
      // Save the outer point: the reduced loop binds other names only.
      Status st = forEachPoint(rn.rvars, rshape, [&](int64_t) -> Status {
        COIL_TRY_STATUS(evalBody(n, rn.body, cs, vals));
        V v = vals[size_t(rn.value)];
        switch (rn.kind) {
        case ReduceKind::Sum:
          a = fl ? V{roundCompute(acc, a.f + v.f), 0} : applyInt(ScalarOp::Add, acc, a.i, v.i);
          break;
        case ReduceKind::Prod:
          a = fl ? V{roundCompute(acc, a.f * v.f), 0} : applyInt(ScalarOp::Mul, acc, a.i, v.i);
          break;
        case ReduceKind::Max:
          a = fl ? applyFloat(ScalarOp::Max, a.f, v.f) : applyInt(ScalarOp::Max, acc, a.i, v.i);
          break;
        case ReduceKind::Min:
          a = fl ? applyFloat(ScalarOp::Min, a.f, v.f) : applyInt(ScalarOp::Min, acc, a.i, v.i);
          break;
        case ReduceKind::ArgMax:
        case ReduceKind::ArgMin: {
          bool better;
          if (first) {
            better = true;
          } else if (fl) {
            bool nv = std::isnan(v.f), na = std::isnan(a.f);
            if (na) // a NaN counts as the extreme: only a later NaN replaces it (selectLast)
              better = nv && rn.selectLast;
            else if (nv)
              better = true;
            else if (rn.kind == ReduceKind::ArgMax)
              better = rn.selectLast ? v.f >= a.f : v.f > a.f;
            else
              better = rn.selectLast ? v.f <= a.f : v.f < a.f;
          } else {
            bool gt = applyInt(ScalarOp::Gt, acc, v.i, a.i).i != 0;
            bool lt = applyInt(ScalarOp::Lt, acc, v.i, a.i).i != 0;
            bool eq = v.i == a.i;
            if (rn.kind == ReduceKind::ArgMax)
              better = gt || (rn.selectLast && eq);
            else
              better = lt || (rn.selectLast && eq);
          }
          if (better) {
            a = v;
            pos = vals.at(size_t(rn.position)).i;
          }
          break;
        }
        case ReduceKind::Any:
          a.i = (a.i != 0 || v.i != 0 || (fl && v.f != 0)) ? 1 : 0;
          break;
        case ReduceKind::All:
          a.i = (a.i != 0 && (fl ? v.f != 0 : v.i != 0)) ? 1 : 0;
          break;
        }
        first = false;
        return okStatus();
      });
      COIL_TRY_STATUS(st);
      if (arg) {
        out.setInt(flat, pos);
      } else if (rn.kind == ReduceKind::Any || rn.kind == ReduceKind::All) {
        store(out, flat, DType::Bool, a);
      } else {
        store(out, flat, n.dtype, castValue(acc, n.dtype, a));
      }
      return okStatus();
    });
  }

  Status externCall(NodeId id, const Node &n, const ExternNode &en, Tensor &out) {
    EvalExternFn fn = findExtern(en.function);
    if (!fn)
      return Error::user("the evaluator has no adapter for extern function '" + en.function + "'",
                         n.loc);
    std::vector<Tensor> outs(en.outputs.size());
    if (!en.allocates)
      for (size_t k = 0; k < en.outputs.size(); ++k) {
        COIL_TRY(Shape s, shapeOf(n, en.outputs[k].shape));
        outs[k] = Tensor(en.outputs[k].dtype, s);
      }
    std::vector<EvalExternArg> args(en.args.size());
    std::vector<int64_t> symVals(en.args.size(), 0);
    for (size_t k = 0; k < en.args.size(); ++k) {
      const ExternArg &a = en.args[k];
      EvalExternArg &e = args[k];
      e.kind = a.kind;
      switch (a.kind) {
      case ExternArg::Kind::Node:
        if (a.node < 0 || a.node >= id)
          return internal(n, "extern argument is not an earlier node");
        e.tensor = &values.at(size_t(a.node));
        break;
      case ExternArg::Kind::Output:
        if (a.index < 0 || size_t(a.index) >= outs.size())
          return internal(n, "extern output " + std::to_string(a.index));
        e.output = &outs[size_t(a.index)];
        break;
      case ExternArg::Kind::Int: {
        auto v = a.sym.evaluate(env);
        if (!v.ok()) return internal(n, "extern argument: " + v.error().message());
        e.i = *v;
        break;
      }
      case ExternArg::Kind::Float:
        e.number = a.number;
        break;
      case ExternArg::Kind::OutSymbol:
        e.outSymbol = &symVals[k];
        break;
      }
    }
    Status st = fn(en, args);
    if (!st.ok()) return st.error().withDefaultLoc(n.loc);
    for (size_t k = 0; k < en.args.size(); ++k)
      if (en.args[k].kind == ExternArg::Kind::OutSymbol) bindSize(en.args[k].symbol, symVals[k]);
    for (size_t k = 0; k < outs.size(); ++k) {
      COIL_TRY(Shape s, shapeOf(n, en.outputs[k].shape));
      if (!outs[k].defined() || outs[k].dtype() != en.outputs[k].dtype || outs[k].shape() != s)
        return internal(n, "extern '" + en.function + "' output " + std::to_string(k) +
                               " does not have type " + en.outputs[k].str());
    }
    out = outs[0];
    extras[id] = outs;
    return okStatus();
  }

  Expected<std::vector<Tensor>> run(const std::vector<Tensor> &inputs) {
    COIL_TRY_STATUS(bindInputs(inputs));
    values.resize(p.nodes.size());
    strides.resize(p.nodes.size());
    std::map<NodeId, size_t> inputIndex;
    for (size_t k = 0; k < p.inputs.size(); ++k) inputIndex[p.inputs[k]] = k;
    for (size_t i = 0; i < p.nodes.size(); ++i) {
      const Node &n = p.nodes[i];
      NodeId id = NodeId(i);
      Tensor out;
      if (const auto *e = std::get_if<ExternNode>(&n.kind)) {
        COIL_TRY_STATUS(externCall(id, n, *e, out));
      } else if (const auto *m = std::get_if<MultiOutputNode>(&n.kind)) {
        auto it = extras.find(m->source);
        if (it == extras.end() || m->index < 0 || size_t(m->index) >= it->second.size())
          return internal(n, "multi-output of a node that is not an earlier extern");
        out = it->second[size_t(m->index)];
      } else {
        COIL_TRY(Shape shape, shapeOf(n, n.shape));
        if (std::holds_alternative<InputNode>(n.kind)) {
          auto it = inputIndex.find(id);
          if (it == inputIndex.end()) return internal(n, "input node that is no program input");
          out = inputs[it->second];
        } else if (const auto *c = std::get_if<ConstantNode>(&n.kind)) {
          if (!p.graph || !p.graph->isConstant(c->graphValue))
            return internal(n, "constant without its graph value");
          out = p.graph->constant(c->graphValue);
        } else if (const auto *pw = std::get_if<PointwiseNode>(&n.kind)) {
          out = Tensor(n.dtype, shape);
          COIL_TRY_STATUS(pointwise(n, *pw, out));
        } else if (const auto *rn = std::get_if<ReductionNode>(&n.kind)) {
          out = Tensor(n.dtype, shape);
          COIL_TRY_STATUS(reduction(n, *rn, out));
        }
        if (out.dtype() != n.dtype || out.shape() != shape)
          return internal(n, "value of type " + std::string(dtypeName(out.dtype())) +
                                 shapeStr(out.shape()) + ", expected " +
                                 TensorType{n.dtype, n.shape}.str());
      }
      strides[i] = contiguousStrides(out.shape());
      values[i] = out;
    }
    std::vector<Tensor> outs;
    for (NodeId o : p.outputs) outs.push_back(values.at(size_t(o)));
    return outs;
  }
};

} // namespace

Expected<std::vector<Tensor>> evaluateLoopProgram(const LoopProgram &p,
                                                  const std::vector<Tensor> &inputs) {
  Evaluator ev(p);
  return ev.run(inputs);
}

} // namespace coil::loop
