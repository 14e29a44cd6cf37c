// GEMM + epilogue fusion (see FuseGemmEpilogue.h): the rules, and the translation of a kernel
// body into an epilogue visitor tree.
#include "sched/FuseGemmEpilogue.h"

#include "evt/EvtPasses.h"
#include "ir/Infer.h"
#include "kernels/Externs.h"

#include <algorithm>
#include <map>
#include <set>

namespace coil::sched {
namespace {

using kernels::ExternId;
using loop::NodeId;
using loop::ScalarOp;
using loop::Stmt;
using loop::Val;

/// The GEMM an extern step computes, read off its arguments (kernels/Externs.def: gemm is
/// a, b, y, batch, m, n, k, transA, transB, strideA, strideB, alpha; gemm_bias has the bias
/// after b and a relu flag last).
struct GemmCall {
  NodeId a = -1, b = -1, bias = -1;
  SymInt batch, m, n, k, transA, transB, strideA, strideB;
  double alpha = 1;
  bool relu = false;
};

std::optional<GemmCall> readGemm(const loop::ExternNode &ex, std::string *why) {
  std::optional<kernels::ExternRef> r = kernels::findExtern(ex.function);
  if (!r || (r->id != ExternId::Gemm && r->id != ExternId::GemmBias)) return std::nullopt;
  bool bias = r->id == ExternId::GemmBias;
  const std::vector<loop::ExternArg> &a = ex.args;
  size_t ints = bias ? 4 : 3;
  if (a.size() != (bias ? 14u : 12u)) {
    *why = "unexpected argument list";
    return std::nullopt;
  }
  GemmCall g;
  g.a = a[0].node;
  g.b = a[1].node;
  if (bias) g.bias = a[2].node;
  g.batch = a[ints].sym;
  g.m = a[ints + 1].sym;
  g.n = a[ints + 2].sym;
  g.k = a[ints + 3].sym;
  g.transA = a[ints + 4].sym;
  g.transB = a[ints + 5].sym;
  g.strideA = a[ints + 6].sym;
  g.strideB = a[ints + 7].sym;
  g.alpha = a[ints + 8].number;
  if (bias) g.relu = a[ints + 9].sym != SymInt(0);
  return g;
}

bool isHalf(DType t) {
  return t == DType::F16 || t == DType::BF16;
}
bool isF32OrHalf(DType t) {
  return isHalf(t) || t == DType::F32;
}

/// The row-major offset of `index` in a tensor of `shape` (Horner's form, so that equal
/// positions of tensors that are reshapes of each other print the same).
SymInt rowMajorOffset(const std::vector<SymInt> &shape, const std::vector<SymInt> &index) {
  SymInt off(0);
  for (size_t d = 0; d < shape.size() && d < index.size(); ++d) off = off * shape[d] + index[d];
  return off;
}

/// A pointwise kernel's iteration space seen as the GEMM's (rows, columns): the offsets of its
/// point, of its row (the leading dims flattened) and its column (the last dim).
struct Space {
  SymInt point, row, column, rows;
};
Space spaceOf(const std::vector<std::string> &vars, const std::vector<SymInt> &ranges) {
  Space s;
  std::vector<SymInt> idx;
  for (const std::string &v : vars) idx.push_back(SymInt::symbol(v));
  s.point = rowMajorOffset(ranges, idx);
  std::vector<SymInt> lead(ranges.begin(), ranges.end() - 1), leadIdx(idx.begin(), idx.end() - 1);
  s.row = rowMajorOffset(lead, leadIdx);
  s.column = idx.back();
  s.rows = symNumel(lead);
  return s;
}

/// Translates the body of a pointwise kernel into an epilogue program.
class Translator {
public:
  Translator(const loop::LoopProgram &p, const Space &space, NodeId gemm, int64_t n, DType element)
      : p_(p), space_(space), gemm_(gemm), n_(n), element_(element),
        b_(evt::Dims{128, n, 1}, false, element) {}

  /// The program computing `value` of `body` as output D (of dtype `out`), with the extern's
  /// alpha, bias and ReLU applied to the accumulator first, then rounded to the GEMM's dtype:
  /// the kernel read the extern's f16/bf16 product, and the fused one computes with the same
  /// values (a comparison or a cast to f32 downstream sees the rounded product, as unfused).
  std::optional<evt::Program> run(const loop::Body &body, Val value, const GemmCall &g, DType out,
                                  std::string *why) {
    body_ = &body;
    why_ = why;
    accum_ = b_.accum();
    if (g.alpha != 1) accum_ = b_.compute(evt::Op::Mul, {accum_, b_.literal(g.alpha)});
    if (g.bias >= 0) {
      int bias = inputFor(g.bias, evt::Strides{0, 1, 0});
      accum_ = b_.compute(evt::Op::Add, {accum_, bias});
      if (g.relu) accum_ = b_.compute(evt::Op::Relu, {accum_});
    }
    accum_ = b_.cast(accum_, element_);
    std::optional<int> d = node(value);
    if (!d) return std::nullopt;
    // The root computes D's element type: a product rounded to f16/bf16 and stored as f32 (a
    // cast to f32 translates to nothing) is widened by one more cast.
    const evt::Node &root = b_.program().nodes[size_t(*d)];
    if (root.kind == evt::Kind::Compute && root.op == evt::Op::Cast && root.dtype != out)
      d = b_.cast(*d, out);
    b_.output("D", *d);
    Expected<evt::Program> prog = b_.finish();
    if (!prog) {
      fail("the epilogue program is invalid: " + prog.error().message());
      return std::nullopt;
    }
    prog->fnName = "epilogue";
    prog->dDType = out;
    return std::move(*prog);
  }

  const std::vector<NodeId> &inputs() const { return inputs_; }

private:
  std::optional<int> fail(const std::string &m) {
    if (why_->empty()) *why_ = m;
    return std::nullopt;
  }

  int inputFor(NodeId n, evt::Strides s) {
    auto key = std::make_pair(n, std::make_tuple(s.m, s.n, s.l));
    if (auto it = loaded_.find(key); it != loaded_.end()) return it->second;
    std::string name = "in" + std::to_string(inputs_.size());
    inputs_.push_back(n);
    int id = b_.inputStrided(name, s, p_.nodes[size_t(n)].dtype);
    loaded_[key] = id;
    return id;
  }

  /// The epilogue parameter a load of node `x` at `index` is, or nullopt. Accesses compare as
  /// row-major offsets: at the kernel's point (the product, a dense tensor), at its column (a
  /// row vector of n elements), or at its row (a column vector of m elements).
  std::optional<int> load(NodeId x, const std::vector<SymInt> &index) {
    const loop::Node &xn = p_.nodes[size_t(x)];
    if (!isF32OrHalf(xn.dtype)) return fail("'" + xn.name + "' is not a floating-point tensor");
    SymInt off = rowMajorOffset(xn.shape, index), elems = symNumel(xn.shape);
    if (x == gemm_) {
      if (off != space_.point) return fail("the GEMM's output is read away from the point");
      return accum_;
    }
    if (off == space_.point && elems == space_.rows * SymInt(n_))
      return inputFor(x, evt::Strides{n_, 1, 0});
    if (off == space_.column && elems == SymInt(n_)) return inputFor(x, evt::Strides{0, 1, 0});
    if (off == space_.row && elems == space_.rows) return inputFor(x, evt::Strides{1, 0, 0});
    return fail("'" + xn.name + "' is read neither densely nor as a row or column vector");
  }

  std::optional<int> node(Val v) {
    if (auto it = memo_.find(v); it != memo_.end()) return it->second;
    std::optional<int> r = translate(body_->stmts[size_t(v)]);
    if (r) memo_[v] = *r;
    return r;
  }

  std::optional<int> translate(const Stmt &s) {
    switch (s.kind) {
    case Stmt::Kind::Load:
      return load(s.node, s.index);
    case Stmt::Kind::Constant:
      if (!isF32OrHalf(s.dtype) && s.dtype != DType::Bool)
        return fail("an integer constant in the epilogue");
      return b_.literal(s.isInt ? double(s.intNumber) : s.number);
    case Stmt::Kind::Cast: {
      DType from = body_->stmts[size_t(s.args[0])].dtype;
      std::optional<int> x = node(s.args[0]);
      if (!x) return std::nullopt;
      if (!(isF32OrHalf(from) || from == DType::Bool)) return fail("a cast from an integer type");
      if (s.dtype == DType::F32) return x; // exact: the value is already a float
      if (isHalf(s.dtype)) return b_.cast(*x, s.dtype);
      if (s.dtype == DType::Bool) return b_.compute(evt::Op::Ne, {*x, b_.literal(0)});
      return fail(std::string("a cast to ") + std::string(dtypeName(s.dtype)));
    }
    case Stmt::Kind::Op:
      return op(s);
    case Stmt::Kind::Index:
      return fail("a value computed from the position (an index)");
    case Stmt::Kind::BitCast:
      return fail("a bit cast");
    case Stmt::Kind::IndirectIndex:
      return fail("an indirect (gathered) load");
    case Stmt::Kind::Accumulator:
      return fail("a reduction's result");
    }
    return fail("an unknown statement");
  }

  bool isLiteral(Val v) const { return body_->stmts[size_t(v)].kind == Stmt::Kind::Constant; }

  std::optional<int> op(const Stmt &s) {
    if (!isF32OrHalf(s.dtype) && s.dtype != DType::Bool)
      return fail(std::string("integer arithmetic (") + loop::scalarOpName(s.op) + ")");
    std::vector<int> a;
    for (Val x : s.args) {
      std::optional<int> n = node(x);
      if (!n) return std::nullopt;
      a.push_back(*n);
    }
    auto un = [&](evt::Op o) { return b_.compute(o, {a[0]}); };
    auto bin = [&](evt::Op o) { return b_.compute(o, {a[0], a[1]}); };
    switch (s.op) {
    case ScalarOp::Neg:
      return un(evt::Op::Neg);
    case ScalarOp::Abs:
      return un(evt::Op::Abs);
    case ScalarOp::Exp:
      return un(evt::Op::Exp);
    case ScalarOp::Log:
      return un(evt::Op::Log);
    case ScalarOp::Sqrt:
      return un(evt::Op::Sqrt);
    case ScalarOp::Tanh:
      return un(evt::Op::Tanh);
    case ScalarOp::Erf:
      return un(evt::Op::Erf);
    case ScalarOp::Sigmoid:
      return un(evt::Op::Sigmoid);
    case ScalarOp::Reciprocal:
      return b_.compute(evt::Op::Div, {b_.literal(1), a[0]});
    case ScalarOp::Add:
      return bin(evt::Op::Add);
    case ScalarOp::Sub:
      return bin(evt::Op::Sub);
    case ScalarOp::Mul:
      return bin(evt::Op::Mul);
    case ScalarOp::Div:
      return bin(evt::Op::Div);
    case ScalarOp::Pow:
      return bin(evt::Op::Pow);
    case ScalarOp::Min:
    case ScalarOp::Max: {
      // The epilogue's max(a, b) is `a < b ? b : a`: NaN propagates from a only, so the
      // varying operand goes first and the other must be a constant.
      evt::Op o = s.op == ScalarOp::Max ? evt::Op::Max : evt::Op::Min;
      if (isLiteral(s.args[1])) return b_.compute(o, {a[0], a[1]});
      if (isLiteral(s.args[0])) return b_.compute(o, {a[1], a[0]});
      return fail("min / max of two varying values (NaN would not propagate from both)");
    }
    case ScalarOp::Lt:
      return bin(evt::Op::Lt);
    case ScalarOp::Le:
      return bin(evt::Op::Le);
    case ScalarOp::Gt:
      return bin(evt::Op::Gt);
    case ScalarOp::Ge:
      return bin(evt::Op::Ge);
    case ScalarOp::Eq:
      return bin(evt::Op::Eq);
    case ScalarOp::Ne:
      return bin(evt::Op::Ne);
    case ScalarOp::Select:
      return b_.compute(evt::Op::Where, {a[0], a[1], a[2]});
    default:
      return fail(std::string("the scalar op ") + loop::scalarOpName(s.op));
    }
  }

  const loop::LoopProgram &p_;
  const Space &space_;
  NodeId gemm_;
  int64_t n_;
  DType element_; ///< the GEMM's dtype (f16 or bf16): its product is rounded to it
  evt::Builder b_;
  const loop::Body *body_ = nullptr;
  std::string *why_ = nullptr;
  int accum_ = -1;
  std::map<Val, int> memo_;
  std::map<std::pair<NodeId, std::tuple<int64_t, int64_t, int64_t>>, int> loaded_;
  std::vector<NodeId> inputs_;
};

std::string shapeText(const std::vector<SymInt> &shape) {
  std::string s;
  for (const SymInt &d : shape) s += (s.empty() ? "" : ", ") + d.str();
  return s;
}

/// Short words for the report: the ops of the epilogue, e.g. "add, mul, erf".
std::string describe(const evt::Program &p) {
  std::vector<std::string> words;
  for (const evt::Node &n : p.nodes) {
    if (n.dead || n.kind != evt::Kind::Compute || n.op == evt::Op::Cast) continue;
    std::string w(evt::opName(n.op));
    if (std::find(words.begin(), words.end(), w) == words.end()) words.push_back(w);
  }
  std::string s;
  for (const std::string &w : words) s += (s.empty() ? "" : ", ") + w;
  return s.empty() ? "identity" : s;
}

/// Kernel step index reading `node`, when exactly one step reads it and it is a kernel; else
/// nullopt and why in `why`.
std::optional<size_t> onlyReader(const Schedule &s, NodeId node, std::string *why) {
  std::optional<size_t> reader;
  int readers = 0;
  std::string externName;
  for (size_t i = 0; i < s.steps.size(); ++i) {
    if (const auto *k = std::get_if<Kernel>(&s.steps[i])) {
      if (std::binary_search(k->reads.begin(), k->reads.end(), node)) {
        ++readers;
        reader = i;
      }
    } else {
      NodeId e = std::get<ExternStep>(s.steps[i]).node;
      const auto &ex = std::get<loop::ExternNode>(s.program->nodes[size_t(e)].kind);
      for (const loop::ExternArg &a : ex.args)
        if (a.kind == loop::ExternArg::Kind::Node && a.node == node) {
          ++readers;
          externName = ex.function;
          break;
        }
    }
  }
  if (readers == 1 && reader) return reader;
  if (readers > 1)
    *why = "its product has " + std::to_string(readers) + " readers";
  else if (!externName.empty())
    *why = "its product is read by the extern " + externName;
  else
    *why = "nothing reads its product";
  return std::nullopt;
}

} // namespace

int fuseGemmEpilogues(Schedule &s, const GemmFusionOptions &o) {
  if (!o.enabled) return 0;
  const loop::LoopProgram &p = *s.program;
  int fused = 0;
  for (size_t si = 0; si < s.steps.size(); ++si) {
    const auto *es = std::get_if<ExternStep>(&s.steps[si]);
    if (!es) continue;
    NodeId g = es->node;
    const loop::Node &gn = p.nodes[size_t(g)];
    const auto &ex = std::get<loop::ExternNode>(gn.kind);
    std::string why;
    std::optional<GemmCall> call = readGemm(ex, &why);
    if (!call && why.empty()) continue; // not a GEMM
    std::string label = "GEMM '" + gn.name + "': ";
    auto note = [&](const std::string &m) {
      s.gemmNotes.push_back(label + "cuBLASLt (" + m + ")");
    };
    if (!call) {
      note(why);
      continue;
    }
    if (!isHalf(gn.dtype)) {
      note(std::string(dtypeName(gn.dtype)) + ": CUTLASS GEMMs are generated for f16 and bf16");
      continue;
    }
    std::optional<int64_t> kc = call->k.maybeConstant(), nc = call->n.maybeConstant();
    if (!kc || !nc || *kc % 8 != 0 || *nc % 8 != 0 || *kc <= 0) {
      note("k and n must be constant multiples of 8");
      continue;
    }
    if (call->transA != SymInt(0) && call->batch != SymInt(1)) {
      note("a batch of products with transposed A matrices");
      continue;
    }
    if (call->batch != SymInt(1) &&
        !(call->strideB == SymInt(0) && call->strideA == call->m * call->k)) {
      note("a batch of products with different B matrices");
      continue;
    }
    if (std::find(p.outputs.begin(), p.outputs.end(), g) != p.outputs.end()) {
      note("its product is a model output");
      continue;
    }
    std::optional<size_t> ki = onlyReader(s, g, &why);
    if (!ki) {
      note(why);
      continue;
    }
    Kernel &k = std::get<Kernel>(s.steps[*ki]);
    if (k.gemm) {
      note("its reader already computes a GEMM");
      continue;
    }
    if (k.phases.size() != 1 || !k.phases[0].reductions.empty()) {
      note("its reader " + k.name + " reduces (" + std::to_string(k.phases.size()) + " phases)");
      continue;
    }
    if (k.phases[0].stores.size() != 1) {
      note("its reader " + k.name + " stores " + std::to_string(k.phases[0].stores.size()) +
           " tensors");
      continue;
    }
    const Phase &ph = k.phases[0];
    std::vector<std::string> vars = k.vars;
    vars.insert(vars.end(), ph.vars.begin(), ph.vars.end());
    std::vector<SymInt> ranges = k.ranges;
    ranges.insert(ranges.end(), ph.ranges.begin(), ph.ranges.end());
    const Store &st = ph.stores[0];
    const loop::Node &dn = p.nodes[size_t(st.node)];
    // The reader's points are the product's (rows and columns, the leading dims of either
    // flattened: a reshape of the product is read as it is), and it stores at its point.
    bool pointOk = !ranges.empty() && ranges.back() == call->n;
    Space space;
    if (pointOk) {
      space = spaceOf(vars, ranges);
      pointOk = space.rows == call->batch * call->m &&
                rowMajorOffset(dn.shape, st.index) == space.point &&
                symNumel(dn.shape) == space.rows * call->n;
    }
    if (!pointOk || !isF32OrHalf(dn.dtype)) {
      note("its reader " + k.name + " stores '" + dn.name + "' (" + shapeText(dn.shape) +
           ") over [" + shapeText(ranges) + "], not the product's " + shapeText(gn.shape) +
           " at its point");
      continue;
    }
    Translator t(p, space, g, *nc, gn.dtype);
    why.clear();
    std::optional<evt::Program> prog = t.run(ph.body, st.value, *call, dn.dtype, &why);
    if (!prog) {
      note("no epilogue for it: " + why);
      continue;
    }
    evt::CompileOptions co;
    co.arch = evt::Arch::Sm90;
    co.inputs = gn.dtype;
    co.dtypes["D"] = dn.dtype;
    std::vector<std::string> notes;
    Expected<evt::VisitorPlan> plan = evt::compileEpilogue(*prog, co, &notes);
    if (!plan) {
      note("the epilogue does not map onto CUTLASS's visitors: " + plan.error().message());
      continue;
    }
    GemmMainloop gm;
    gm.node = g;
    gm.call = ex;
    gm.epilogueReads = k.reads;
    gm.a = call->a;
    gm.b = call->b;
    gm.rowMajorB = call->transB == SymInt(0);
    gm.columnMajorA = call->transA != SymInt(0);
    gm.m = call->batch * call->m;
    gm.n = call->n;
    gm.k = call->k;
    gm.dtype = gn.dtype;
    gm.inputs = t.inputs();
    gm.description = describe(*prog);
    gm.epilogue = std::move(*prog);
    gm.plan = std::move(*plan);
    // The kernel computes the product itself: it reads the operands, not the product.
    std::set<NodeId> reads(k.reads.begin(), k.reads.end());
    reads.erase(g);
    reads.insert(gm.a);
    reads.insert(gm.b);
    for (NodeId in : gm.inputs) reads.insert(in);
    k.reads.assign(reads.begin(), reads.end());
    k.fused.insert(k.fused.begin(), g);
    k.gemm = std::move(gm);
    s.realized[size_t(g)] = false;
    s.gemmNotes.push_back(label + "CUTLASS, fused into kernel " + k.name + " (" +
                          k.gemm->description + ")");
    s.steps.erase(s.steps.begin() + long(si));
    --si;
    ++fused;
  }
  return fused;
}

} // namespace coil::sched
