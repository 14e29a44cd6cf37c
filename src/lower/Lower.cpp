// The lowering framework: TensorRefs (views), the body builder, the per-node context with its
// node builders, and the graph walk.
#include "lower/Lower.h"

#include "support/Check.h"
#include "support/Diagnostics.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

namespace coil::loop {

std::string viewVar(int i) {
  return "%v" + std::to_string(i);
}

std::vector<SymInt> TensorRef::sourceIndex(const std::vector<SymInt> &idx) const {
  COIL_CHECK(idx.size() == shape.size())
      << "index of rank " << idx.size() << " into a view of rank " << shape.size();
  if (map.empty()) return idx;
  std::map<std::string, SymInt> repl;
  for (size_t i = 0; i < idx.size(); ++i) repl.emplace(viewVar(int(i)), idx[i]);
  std::vector<SymInt> out;
  out.reserve(map.size());
  for (const SymInt &e : map) out.push_back(e.substitute(repl));
  return out;
}

// --- BodyBuilder

Val BodyBuilder::load(const TensorRef &t, const std::vector<SymInt> &idx) {
  Stmt s;
  s.kind = Stmt::Kind::Load;
  s.dtype = t.dtype;
  s.node = t.node;
  s.index = t.sourceIndex(idx);
  return body_.add(std::move(s));
}

Val BodyBuilder::loadBroadcast(const TensorRef &t, const std::vector<SymInt> &idx) {
  COIL_CHECK(t.shape.size() <= idx.size())
      << "broadcast of rank " << t.shape.size() << " to rank " << idx.size();
  size_t off = idx.size() - t.shape.size();
  std::vector<SymInt> sub;
  sub.reserve(t.shape.size());
  for (size_t i = 0; i < t.shape.size(); ++i)
    sub.push_back(t.shape[i] == SymInt(1) ? SymInt(0) : idx[off + i]);
  return load(t, sub);
}

Val BodyBuilder::constant(DType t, double v) {
  Stmt s;
  s.kind = Stmt::Kind::Constant;
  s.dtype = t;
  s.number = v;
  if (!isFloat(t)) {
    // Integer constants are exact: build them from the value converted as a Cast would.
    s.isInt = true;
    s.intNumber = std::isfinite(v) && v > -9.2e18 && v < 9.2e18 ? int64_t(v) : 0;
    if (t == DType::Bool) s.intNumber = v != 0;
  }
  return body_.add(std::move(s));
}

Val BodyBuilder::intConstant(DType t, int64_t v) {
  Stmt s;
  s.kind = Stmt::Kind::Constant;
  s.dtype = t;
  s.isInt = true;
  s.intNumber = v;
  s.number = double(v);
  return body_.add(std::move(s));
}

Val BodyBuilder::index(const SymInt &e, DType t) {
  Stmt s;
  s.kind = Stmt::Kind::Index;
  s.dtype = t;
  s.expr = e;
  return body_.add(std::move(s));
}

namespace {
bool producesBool(ScalarOp op) {
  switch (op) {
  case ScalarOp::Not:
  case ScalarOp::IsNaN:
  case ScalarOp::IsPosInf:
  case ScalarOp::IsNegInf:
  case ScalarOp::And:
  case ScalarOp::Or:
  case ScalarOp::Xor:
  case ScalarOp::Eq:
  case ScalarOp::Ne:
  case ScalarOp::Lt:
  case ScalarOp::Le:
  case ScalarOp::Gt:
  case ScalarOp::Ge:
    return true;
  default:
    return false;
  }
}
} // namespace

Val BodyBuilder::op(ScalarOp o, Val a) {
  COIL_CHECK(scalarOpArity(o) == 1) << scalarOpName(o) << " is not unary";
  Stmt s;
  s.kind = Stmt::Kind::Op;
  s.op = o;
  s.args = {a};
  s.dtype = producesBool(o) ? DType::Bool : dtypeOf(a);
  return body_.add(std::move(s));
}

Val BodyBuilder::op(ScalarOp o, Val a, Val b) {
  COIL_CHECK(scalarOpArity(o) == 2) << scalarOpName(o) << " is not binary";
  COIL_CHECK(dtypeOf(a) == dtypeOf(b))
      << scalarOpName(o) << " of " << dtypeName(dtypeOf(a)) << " and " << dtypeName(dtypeOf(b));
  Stmt s;
  s.kind = Stmt::Kind::Op;
  s.op = o;
  s.args = {a, b};
  s.dtype = producesBool(o) ? DType::Bool : dtypeOf(a);
  return body_.add(std::move(s));
}

Val BodyBuilder::op(ScalarOp o, Val a, Val b, Val c) {
  COIL_CHECK(o == ScalarOp::Select) << scalarOpName(o) << " is not ternary";
  COIL_CHECK(dtypeOf(b) == dtypeOf(c))
      << "select of " << dtypeName(dtypeOf(b)) << " and " << dtypeName(dtypeOf(c));
  if (dtypeOf(a) != DType::Bool) a = op(ScalarOp::Ne, a, constant(dtypeOf(a), 0));
  Stmt s;
  s.kind = Stmt::Kind::Op;
  s.op = o;
  s.args = {a, b, c};
  s.dtype = dtypeOf(b);
  return body_.add(std::move(s));
}

Val BodyBuilder::cast(Val v, DType t) {
  if (dtypeOf(v) == t) return v;
  Stmt s;
  s.kind = Stmt::Kind::Cast;
  s.dtype = t;
  s.args = {v};
  return body_.add(std::move(s));
}

Val BodyBuilder::bitcast(Val v, DType t) {
  if (dtypeOf(v) == t) return v;
  COIL_CHECK(dtypeSize(dtypeOf(v)) == dtypeSize(t))
      << "bitcast of " << dtypeName(dtypeOf(v)) << " to " << dtypeName(t);
  Stmt s;
  s.kind = Stmt::Kind::BitCast;
  s.dtype = t;
  s.args = {v};
  return body_.add(std::move(s));
}

SymInt BodyBuilder::indirect(Val v, const SymInt &extent, bool wrapNegative) {
  COIL_CHECK(!isFloat(dtypeOf(v))) << "indirect index of a float value";
  // Unique within the body, also when several builders append to the same body.
  int k = 0;
  for (const Stmt &s : body_.stmts)
    if (s.kind == Stmt::Kind::IndirectIndex) ++k;
  k = std::max(k, nextIndirect_);
  nextIndirect_ = k + 1;
  Stmt s;
  s.kind = Stmt::Kind::IndirectIndex;
  s.dtype = DType::I64;
  s.args = {cast(v, DType::I64)};
  s.symbol = "%i" + std::to_string(k);
  s.extent = extent;
  s.wrapNegative = wrapNegative;
  body_.add(s);
  return SymInt::symbol(s.symbol);
}

// --- names

namespace {

bool isCKeyword(const std::string &s) {
  static const std::set<std::string> kw = {
      "auto",     "break",    "case",     "char",     "const",    "continue", "default",   "do",
      "double",   "else",     "enum",     "extern",   "float",    "for",      "goto",      "if",
      "inline",   "int",      "long",     "register", "restrict", "return",   "short",     "signed",
      "sizeof",   "static",   "struct",   "switch",   "typedef",  "union",    "unsigned",  "void",
      "volatile", "while",    "bool",     "class",    "new",      "delete",   "this",      "true",
      "false",    "template", "typename", "operator", "private",  "public",   "namespace", "using",
      "try",      "catch",    "throw",    "virtual",  "friend",   "export",   "and",       "or",
      "not",      "xor",      "main",     "half",     "asm",      "nullptr"};
  return kw.count(s) != 0;
}

/// A C identifier derived from `s`: letters, digits and '_' (other characters become '_'), not
/// starting with a digit or '_', not a keyword, at most 48 characters.
std::string sanitize(const std::string &s) {
  std::string out;
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u))
      out += c;
    else if (!out.empty() && out.back() != '_')
      out += '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  if (out.size() > 48) out.resize(48);
  while (!out.empty() && out.back() == '_') out.pop_back();
  if (out.empty()) out = "t";
  if (std::isdigit(static_cast<unsigned char>(out[0]))) out = "t" + out;
  if (isCKeyword(out)) out += "_";
  return out;
}

/// The names of a program's nodes, kept incrementally across calls (lowering names thousands of
/// nodes; rescanning the program for each would be quadratic). The cache is rebuilt whenever it
/// may not describe `p`: another program, a reallocated node array, or fewer nodes than seen.
struct NameCache {
  const LoopProgram *program = nullptr;
  const Node *data = nullptr;
  size_t scanned = 0;
  std::string last;
  std::set<std::string> used;
  std::map<std::string, int> nextSuffix;

  void sync(const LoopProgram &p) {
    bool valid = program == &p && data == p.nodes.data() && scanned <= p.nodes.size() &&
                 (scanned == 0 || p.nodes[scanned - 1].name == last);
    if (!valid) {
      program = &p;
      scanned = 0;
      used.clear();
      nextSuffix.clear();
    }
    data = p.nodes.data();
    for (; scanned < p.nodes.size(); ++scanned) used.insert(p.nodes[scanned].name);
    last = scanned ? p.nodes[scanned - 1].name : "";
  }
};

/// "relu" for Relu: node names derived from an op are lowercase.
std::string opBaseName(OpKind op) {
  std::string s(opName(op));
  for (char &c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string uniqueNodeName(const LoopProgram &p, const std::string &base) {
  thread_local NameCache cache;
  cache.sync(p);
  std::string b = sanitize(base);
  if (!cache.used.count(b)) return b;
  for (int &k = cache.nextSuffix[b];;) {
    std::string c = b + "_" + std::to_string(++k);
    if (!cache.used.count(c)) return c;
  }
}

/// The ranges of the view variables of a view of `shape`, added to `base`.
SymRanges viewRanges(const SymRanges &base, const std::vector<SymInt> &shape) {
  SymRanges r = base;
  for (size_t i = 0; i < shape.size(); ++i) {
    SymRange b = bounds(shape[i], base);
    r[viewVar(int(i))] = SymRange{0, std::max<int64_t>(0, b.max - 1)};
  }
  return r;
}

/// The node of a graph constant or symbolic constant (a small i64 vector of size expressions,
/// computed by a Pointwise node: element k is the value of expression k).
NodeId leafNode(LoopProgram &p, const Graph &g, ValueId v, int32_t origin) {
  const Value &val = g.value(v);
  Node n;
  n.name = uniqueNodeName(p, val.name);
  n.dtype = val.type.dtype;
  n.shape = val.type.shape;
  if (origin >= 0) n.origins = {origin};
  if (g.isConstant(v)) {
    n.kind = ConstantNode{v};
  } else {
    COIL_CHECK(g.isSymConstant(v)) << "value " << val.name << " read before it is defined";
    const std::vector<SymInt> &elems = g.symConstant(v);
    COIL_CHECK(!elems.empty() && n.shape.size() <= 1)
        << "symbolic constant " << val.name << " of type " << val.type.str();
    PointwiseNode pw;
    for (size_t d = 0; d < n.shape.size(); ++d) pw.vars.push_back(loopVar(int(d)));
    BodyBuilder b(pw.body);
    Val acc = b.index(elems.back(), n.dtype);
    if (elems.size() > 1) {
      Val pos = b.index(SymInt::symbol(loopVar(0)));
      for (size_t k = elems.size() - 1; k-- > 0;) {
        Val hit = b.op(ScalarOp::Eq, pos, b.intConstant(DType::I64, int64_t(k)));
        acc = b.op(ScalarOp::Select, hit, b.index(elems[k], n.dtype), acc);
      }
    }
    pw.result = acc;
    n.kind = std::move(pw);
  }
  return p.add(std::move(n));
}

} // namespace

// --- LowerContext

LowerContext::LowerContext(LoopProgram &program, const Graph &graph, int32_t nodeIndex,
                           std::vector<std::optional<TensorRef>> &refs, const LowerOptions &options)
    : program_(program), graph_(graph), nodeIndex_(nodeIndex), refs_(refs), options_(options) {}

bool LowerContext::hasInput(size_t i) const {
  return i < gnode().inputs.size() && gnode().inputs[i] != kNoValue;
}

const TensorType &LowerContext::inputType(size_t i) const {
  COIL_CHECK(hasInput(i)) << "input " << i << " of " << opName(gnode().op) << " is absent";
  return graph_.value(gnode().inputs[i]).type;
}

const TensorType &LowerContext::outputType(size_t i) const {
  COIL_CHECK(i < gnode().outputs.size()) << "output " << i << " of " << opName(gnode().op);
  return graph_.value(gnode().outputs[i]).type;
}

const Tensor *LowerContext::constant(size_t i) const {
  if (!hasInput(i)) return nullptr;
  ValueId v = gnode().inputs[i];
  return graph_.isConstant(v) ? &graph_.constant(v) : nullptr;
}

std::optional<std::vector<SymInt>> LowerContext::intValue(size_t i) const {
  if (!hasInput(i)) return std::nullopt;
  ValueId v = gnode().inputs[i];
  if (graph_.isSymConstant(v)) return graph_.symConstant(v);
  if (graph_.isConstant(v)) {
    const Tensor &t = graph_.constant(v);
    if (isFloat(t.dtype())) return std::nullopt;
    std::vector<SymInt> out;
    for (int64_t x : t.toInts()) out.push_back(x);
    return out;
  }
  return std::nullopt;
}

TensorRef LowerContext::input(size_t i) const {
  COIL_CHECK(hasInput(i)) << "input " << i << " of " << opName(gnode().op) << " is absent";
  ValueId v = gnode().inputs[i];
  std::optional<TensorRef> &r = refs_.at(size_t(v));
  if (r) return *r;
  const Value &val = graph_.value(v);
  r = TensorRef{leafNode(program_, graph_, v, nodeIndex_), val.type.dtype, val.type.shape, {}};
  return *r;
}

void LowerContext::setOutput(size_t i, TensorRef t) {
  if (i < gnode().outputs.size() && gnode().outputs[i] == kNoValue) return; // not requested
  const TensorType &ty = outputType(i);
  COIL_CHECK(t.dtype == ty.dtype) << opName(gnode().op) << " output " << i << " lowered as "
                                  << dtypeName(t.dtype) << ", inferred " << dtypeName(ty.dtype);
  COIL_CHECK(t.shape.size() == ty.shape.size())
      << opName(gnode().op) << " output " << i << " lowered with rank " << t.shape.size()
      << ", inferred " << ty.shape.size();
  // The inferred shape is the one every reader sees (it may be a simpler form).
  t.shape = ty.shape;
  refs_.at(size_t(gnode().outputs[i])) = std::move(t);
}

namespace {
/// The base of a node name: the caller's hint, else the op ("relu").
std::string baseName(const coil::Node &gn, const std::string &hint) {
  return hint.empty() ? opBaseName(gn.op) : hint;
}
} // namespace

TensorRef LowerContext::pointwise(DType t, std::vector<SymInt> shape, const PointwiseFn &fn,
                                  const std::string &hint) {
  Node n;
  n.name = uniqueNodeName(program_, baseName(gnode(), hint));
  n.dtype = t;
  n.shape = shape;
  n.origins = {nodeIndex_};
  n.loc = gnode().loc;
  PointwiseNode pw;
  std::vector<SymInt> idx;
  for (size_t d = 0; d < shape.size(); ++d) {
    pw.vars.push_back(loopVar(int(d)));
    idx.push_back(SymInt::symbol(pw.vars.back()));
  }
  BodyBuilder b(pw.body);
  Val r = fn(b, idx);
  pw.result = b.cast(r, t);
  n.kind = std::move(pw);
  NodeId id = program_.add(std::move(n));
  return TensorRef{id, t, std::move(shape), {}};
}

TensorRef LowerContext::reduce(ReduceKind kind, DType outT, DType accT, std::vector<SymInt> outer,
                               std::vector<SymInt> rranges, const ReduceFn &fn, bool selectLast,
                               const std::string &hint) {
  Node n;
  n.name = uniqueNodeName(program_, baseName(gnode(), hint));
  n.dtype = outT;
  n.shape = outer;
  n.origins = {nodeIndex_};
  n.loc = gnode().loc;
  ReductionNode rn;
  rn.kind = kind;
  rn.accDType = accT;
  rn.rranges = rranges;
  rn.selectLast = selectLast;
  std::vector<SymInt> o, r;
  for (size_t d = 0; d < outer.size(); ++d) {
    rn.vars.push_back(loopVar(int(d)));
    o.push_back(SymInt::symbol(rn.vars.back()));
  }
  for (size_t d = 0; d < rranges.size(); ++d) {
    rn.rvars.push_back(reduceVar(int(d)));
    r.push_back(SymInt::symbol(rn.rvars.back()));
  }
  BodyBuilder b(rn.body);
  Val position = kNoVal;
  Val v = fn(b, o, r, &position);
  bool arg = kind == ReduceKind::ArgMax || kind == ReduceKind::ArgMin;
  COIL_CHECK(!arg || position != kNoVal) << "arg reduction without a position";
  rn.value = b.cast(v, accT);
  if (arg) rn.position = b.cast(position, DType::I64);
  n.kind = std::move(rn);
  NodeId id = program_.add(std::move(n));
  return TensorRef{id, outT, std::move(outer), {}};
}

TensorRef LowerContext::view(
    const TensorRef &src, std::vector<SymInt> shape,
    const std::function<std::vector<SymInt>(const std::vector<SymInt> &)> &srcIndex) {
  std::vector<SymInt> vars;
  for (size_t i = 0; i < shape.size(); ++i) vars.push_back(SymInt::symbol(viewVar(int(i))));
  std::vector<SymInt> inner = srcIndex(vars);
  COIL_CHECK(inner.size() == src.shape.size())
      << "view index of rank " << inner.size() << " into rank " << src.shape.size();
  const Node &srcNode = program_.nodes.at(size_t(src.node));
  if (srcNode.shape.empty() && !shape.empty()) {
    // A scalar node seen with a rank: its map would be empty, which means the identity, so the
    // broadcast is a Pointwise node instead (inlined by the scheduler like a view).
    TensorRef scalar{src.node, src.dtype, {}, {}};
    return pointwise(
        src.dtype, std::move(shape),
        [&](BodyBuilder &b, const std::vector<SymInt> &) { return b.load(scalar, {}); },
        srcNode.name);
  }
  std::vector<SymInt> map = src.sourceIndex(inner);
  SymRanges ranges = viewRanges(program_.symbols, shape);
  for (SymInt &e : map) e = simplify(e, ranges);
  // The identity map over the node's own shape needs no map.
  const Node &node = program_.nodes.at(size_t(src.node));
  bool identity = map.size() == shape.size() && node.shape.size() == shape.size();
  for (size_t i = 0; identity && i < map.size(); ++i)
    identity = map[i] == vars[i] &&
               (node.shape[i] == shape[i] || proveEQ(node.shape[i], shape[i], program_.symbols));
  if (identity) map.clear();
  return TensorRef{src.node, src.dtype, std::move(shape), std::move(map)};
}

namespace {

/// Reshape of `src` to `shape` as a view: source and target dims are grouped into runs whose
/// products are provably equal; a run of one dim on each side maps directly, a longer run goes
/// through its linear index (flatten, then unflatten with // and %).
TensorRef reshapeView(LowerContext &ctx, const TensorRef &src, std::vector<SymInt> shape) {
  const SymRanges &ranges = ctx.program().symbols;
  const std::vector<SymInt> &from = src.shape;
  auto isOne = [&](const SymInt &d) { return d == SymInt(1); };
  // Non-unit dims of each side; unit dims take index 0 (source) or are ignored (target).
  std::vector<size_t> s, t;
  for (size_t i = 0; i < from.size(); ++i)
    if (!isOne(from[i])) s.push_back(i);
  for (size_t i = 0; i < shape.size(); ++i)
    if (!isOne(shape[i])) t.push_back(i);
  // Group into runs of provably equal products.
  struct Run {
    std::vector<size_t> src, dst;
  };
  std::vector<Run> runs;
  bool grouped = true;
  {
    size_t i = 0, j = 0;
    while (grouped && (i < s.size() || j < t.size())) {
      if (i >= s.size() || j >= t.size()) {
        grouped = false;
        break;
      }
      Run run{{s[i]}, {t[j]}};
      SymInt ps = from[s[i++]], pt = shape[t[j++]];
      while (!(ps == pt || proveEQ(ps, pt, ranges))) {
        auto cs = ps.maybeConstant(), ct = pt.maybeConstant();
        bool growSrc;
        if (cs && ct)
          growSrc = *cs < *ct;
        else if (exactQuotient(pt, ps) && !exactQuotient(ps, pt))
          growSrc = true;
        else if (exactQuotient(ps, pt) && !exactQuotient(pt, ps))
          growSrc = false;
        else
          growSrc = i < s.size() && (j >= t.size() || run.src.size() <= run.dst.size());
        if (growSrc && i < s.size()) {
          run.src.push_back(s[i]);
          ps = ps * from[s[i++]];
        } else if (!growSrc && j < t.size()) {
          run.dst.push_back(t[j]);
          pt = pt * shape[t[j++]];
        } else {
          grouped = false;
          break;
        }
      }
      runs.push_back(std::move(run));
    }
  }
  if (!grouped) { // one run of everything
    runs.clear();
    Run all;
    all.src = s;
    all.dst = t;
    if (!s.empty() || !t.empty()) runs.push_back(std::move(all));
  }
  auto mapper = [&](const std::vector<SymInt> &v) {
    std::vector<SymInt> idx(from.size(), SymInt(0));
    for (const Run &r : runs) {
      if (r.src.size() == 1 && r.dst.size() == 1) {
        idx[r.src[0]] = v[r.dst[0]];
        continue;
      }
      SymInt linear = 0;
      for (size_t k : r.dst) linear = linear * shape[k] + v[k];
      SymInt stride = 1;
      for (size_t k = r.src.size(); k-- > 0;) {
        size_t d = r.src[k];
        SymInt q = stride == SymInt(1) ? linear : floorDiv(linear, stride);
        idx[d] = k == 0 ? q : floorMod(q, from[d]);
        stride = stride * from[d];
      }
    }
    return idx;
  };
  return ctx.view(src, shape, mapper);
}

} // namespace

TensorRef LowerContext::reshape(const TensorRef &src, std::vector<SymInt> shape) {
  // A reshape of a reshape is a reshape of the node: composing the two maps instead would
  // leave terms such as (a*S + b) // S that need b < S to simplify.
  if (!src.map.empty()) {
    const Node &node = program_.nodes.at(size_t(src.node));
    TensorRef base{src.node, src.dtype, node.shape, {}};
    SymInt a = 1, b = 1;
    for (const SymInt &d : node.shape) a = a * d;
    for (const SymInt &d : src.shape) b = b * d;
    if ((a == b || proveEQ(a, b, program_.symbols)) &&
        reshapeView(*this, base, src.shape).map == src.map)
      return reshapeView(*this, base, std::move(shape));
  }
  return reshapeView(*this, src, std::move(shape));
}

TensorRef LowerContext::permute(const TensorRef &src, const std::vector<int64_t> &perm) {
  COIL_CHECK(perm.size() == src.shape.size()) << "permutation of rank " << perm.size();
  std::vector<SymInt> shape;
  for (int64_t p : perm) shape.push_back(src.shape.at(size_t(p)));
  return view(src, std::move(shape), [&](const std::vector<SymInt> &v) {
    std::vector<SymInt> idx(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) idx[size_t(perm[i])] = v[i];
    return idx;
  });
}

TensorRef LowerContext::broadcastTo(const TensorRef &src, std::vector<SymInt> shape) {
  COIL_CHECK(src.shape.size() <= shape.size())
      << "broadcast of rank " << src.shape.size() << " to rank " << shape.size();
  size_t off = shape.size() - src.shape.size();
  // Per source dim: 0 where it is 1, the target index where it provably equals the target dim,
  // and otherwise min(index, dim - 1): right both when the dim turns out to be 1 at run time
  // and when it equals the target dim (a symbol broadcast against another symbol).
  enum class How { Zero, Same, Clamp };
  std::vector<How> how;
  for (size_t i = 0; i < src.shape.size(); ++i) {
    const SymInt &d = src.shape[i], &t = shape[off + i];
    if (d == SymInt(1))
      how.push_back(How::Zero);
    else if (d == t || proveEQ(d, t, program_.symbols))
      how.push_back(How::Same);
    else
      how.push_back(How::Clamp);
  }
  std::vector<SymInt> srcShape = src.shape;
  return view(src, shape, [&](const std::vector<SymInt> &v) {
    std::vector<SymInt> idx;
    for (size_t i = 0; i < srcShape.size(); ++i) {
      const SymInt &x = v[off + i];
      idx.push_back(how[i] == How::Zero   ? SymInt(0)
                    : how[i] == How::Same ? x
                                          : min(x, srcShape[i] - 1));
    }
    return idx;
  });
}

TensorRef LowerContext::realize(const TensorRef &src) {
  if (src.map.empty()) return src;
  const Node &node = program_.nodes.at(size_t(src.node));
  return pointwise(
      src.dtype, src.shape,
      [&](BodyBuilder &b, const std::vector<SymInt> &idx) { return b.load(src, idx); }, node.name);
}

std::vector<TensorRef> LowerContext::externCall(std::string function, std::vector<ExternArg> args,
                                                std::vector<TensorType> outputs, bool allocates) {
  COIL_CHECK(!outputs.empty()) << "extern call " << function << " without outputs";
  Node n;
  n.name = uniqueNodeName(program_, opBaseName(gnode().op));
  n.dtype = outputs[0].dtype;
  n.shape = outputs[0].shape;
  n.origins = {nodeIndex_};
  n.loc = gnode().loc;
  ExternNode en;
  en.function = std::move(function);
  en.args = std::move(args);
  en.outputs = outputs;
  en.allocates = allocates;
  n.kind = std::move(en);
  std::string base = n.name;
  NodeId id = program_.add(std::move(n));
  std::vector<TensorRef> refs{TensorRef{id, outputs[0].dtype, outputs[0].shape, {}}};
  for (size_t k = 1; k < outputs.size(); ++k) {
    Node m;
    m.name = uniqueNodeName(program_, base + "_out" + std::to_string(k));
    m.dtype = outputs[k].dtype;
    m.shape = outputs[k].shape;
    m.origins = {nodeIndex_};
    m.loc = gnode().loc;
    m.kind = MultiOutputNode{id, int32_t(k)};
    NodeId mid = program_.add(std::move(m));
    refs.push_back(TensorRef{mid, outputs[k].dtype, outputs[k].shape, {}});
  }
  return refs;
}

SymInt LowerContext::freshSymbol(const std::string &hint) {
  std::string base = sanitize(hint.empty() ? std::string("n") : hint);
  std::string name = base;
  for (int k = 1; program_.symbols.count(name) || (graph_.symbols.count(name)); ++k)
    name = base + "_" + std::to_string(k);
  program_.symbols[name] = SymRange{};
  return SymInt::symbol(name);
}

// --- registry and the graph walk

namespace {
const LowerRegistry &registry() {
  static const LowerRegistry r = LowerRegistry::filled({
#define COIL_OP_FAMILY(F) register##F##Lowerings,
#include "ir/OpFamilies.def"
#undef COIL_OP_FAMILY
  });
  return r;
}

SourceLoc locOf(const Graph &g, const coil::Node &n) {
  SourceLoc loc = n.loc;
  if (loc.node.empty()) {
    if (!n.name.empty())
      loc.node = n.name;
    else if (!n.outputs.empty())
      loc.node = g.value(n.outputs[0]).name;
  }
  if (loc.op.empty()) loc.op = std::string(opName(n.op));
  return loc;
}
/// After graph node `gn` lowered into nodes [first, end): every size those nodes (and the
/// node's outputs) use must have a value when they run. A size computed from tensor data needs
/// an extern call that reports it (an OutSymbol argument); anything else cannot be compiled.
Status checkSizesKnown(const LoopProgram &p, size_t first, std::set<std::string> &bound,
                       const coil::Node &gn, const std::vector<std::optional<TensorRef>> &refs) {
  auto unknown = [&](const std::vector<SymInt> &shape) -> std::string {
    std::set<std::string> used;
    for (const SymInt &d : shape) d.collectSymbols(used);
    for (const std::string &s : used)
      if (!bound.count(s)) return s;
    return "";
  };
  auto refuse = [&](const std::string &sym, DType t, const std::vector<SymInt> &shape) {
    return Error::user(std::string(opName(gn.op)) + " whose output size '" + sym + "' (in " +
                       TensorType{t, shape}.str() +
                       ") depends on tensor data at run time is not supported by the compiler "
                       "yet");
  };
  for (size_t i = first; i < p.nodes.size(); ++i) {
    const Node &n = p.nodes[i];
    if (const auto *e = std::get_if<ExternNode>(&n.kind))
      for (const ExternArg &a : e->args)
        if (a.kind == ExternArg::Kind::OutSymbol) bound.insert(a.symbol);
    std::string s = unknown(n.shape);
    if (!s.empty()) return refuse(s, n.dtype, n.shape);
  }
  for (size_t k = 0; k < gn.outputs.size(); ++k) {
    if (gn.outputs[k] == kNoValue) continue;
    const std::optional<TensorRef> &r = refs[size_t(gn.outputs[k])];
    COIL_CHECK(r) << "lowering of " << opName(gn.op) << " left output " << k << " undefined";
    std::string s = unknown(r->shape);
    if (!s.empty()) return refuse(s, r->dtype, r->shape);
  }
  return okStatus();
}

} // namespace

LowerFn lowerFnFor(OpKind op) {
  return registry().get(op);
}

Expected<LoopProgram> lowerGraph(const Graph &g, const LowerOptions &options) {
  LoopProgram p;
  p.graph = &g;
  p.symbols = g.symbols;
  std::vector<std::optional<TensorRef>> refs(g.numValues());
  for (ValueId v : g.inputs) {
    const Value &val = g.value(v);
    Node n;
    n.name = uniqueNodeName(p, val.name);
    n.dtype = val.type.dtype;
    n.shape = val.type.shape;
    n.kind = InputNode{v};
    NodeId id = p.add(std::move(n));
    refs[size_t(v)] = TensorRef{id, val.type.dtype, val.type.shape, {}};
    p.inputs.push_back(id);
    p.inputNames.push_back(val.name);
  }
  // Symbols with a value when a node runs: the inputs' and those that extern calls define.
  std::set<std::string> bound;
  for (NodeId i : p.inputs)
    for (const SymInt &d : p.nodes[size_t(i)].shape) d.collectSymbols(bound);
  Diagnostics diags;
  const std::vector<coil::Node> &nodes = g.nodes();
  for (size_t ni = 0; ni < nodes.size(); ++ni) {
    const coil::Node &gn = nodes[ni];
    LowerFn fn = lowerFnFor(gn.op);
    if (!fn) {
      diags.report(Error::user("op '" + std::string(opName(gn.op)) +
                                   "' is not supported by the compiler yet",
                               locOf(g, gn)));
      continue;
    }
    // After an error, nodes that do not depend on the failed ones still lower, so that one
    // run reports every problem.
    bool ready = true;
    for (ValueId in : gn.inputs)
      if (in != kNoValue && !refs[size_t(in)] && g.value(in).kind == ValueKind::NodeOutput)
        ready = false;
    if (!ready) continue;
    size_t first = p.nodes.size();
    LowerContext ctx(p, g, int32_t(ni), refs, options);
    Status st = fn(ctx);
    if (st.ok()) st = checkSizesKnown(p, first, bound, gn, refs);
    if (!st.ok()) {
      diags.report(st.error().withDefaultLoc(locOf(g, gn)));
      continue;
    }
  }
  if (diags.hasErrors()) return diags.combined();
  for (ValueId v : g.outputs) {
    const Value &val = g.value(v);
    std::optional<TensorRef> &r = refs[size_t(v)];
    if (!r) {
      COIL_CHECK(g.isConstant(v) || g.isSymConstant(v)) << "output " << val.name << " undefined";
      r = TensorRef{leafNode(p, g, v, -1), val.type.dtype, val.type.shape, {}};
    }
    TensorRef t = *r;
    if (!t.map.empty()) {
      // A view as an output: copy it into a node of its own.
      Node n;
      n.name = uniqueNodeName(p, val.name);
      n.dtype = t.dtype;
      n.shape = val.type.shape;
      PointwiseNode pw;
      std::vector<SymInt> idx;
      for (size_t d = 0; d < n.shape.size(); ++d) {
        pw.vars.push_back(loopVar(int(d)));
        idx.push_back(SymInt::symbol(pw.vars.back()));
      }
      BodyBuilder b(pw.body);
      pw.result = b.load(t, idx);
      n.kind = std::move(pw);
      NodeId id = p.add(std::move(n));
      t = TensorRef{id, t.dtype, val.type.shape, {}};
      r = t;
    }
    p.outputs.push_back(t.node);
    p.outputNames.push_back(val.name);
  }
  return p;
}

} // namespace coil::loop
