#include "evt/EvtPasses.h"

#include "evt/EvtBudget.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <set>
#include <tuple>

namespace coil::evt {

namespace {

std::string label(const Program &p, int id) {
  const Node &n = p.at(id);
  if (!n.name.empty()) return "'" + n.name + "'";
  if (!n.var.empty()) return "'" + n.var + "'";
  return "%" + std::to_string(id);
}

std::string shapeText(const Program &p, const Dims &d) {
  std::string s = "(" + std::string(d.m == 1 ? "1" : "M") + ", " + (d.n == 1 ? "1" : "N");
  if (p.batched) s += std::string(", ") + (d.l == 1 ? "1" : "L");
  return s + ")";
}

std::string redText(const Node &n) {
  std::string over = n.kind == Kind::RowRed   ? "over M"
                     : n.kind == Kind::ColRed ? "over N"
                                              : "over M and N";
  return std::string(redName(n.red)) + " " + over;
}

DType outputDType(const Program &p, const CompileOptions &o, const std::string &name,
                  bool reduction) {
  if (auto it = o.dtypes.find(name); it != o.dtypes.end()) return it->second;
  return reduction ? DType::F32 : p.element;
}

bool commutative(Op op) {
  return op == Op::Add || op == Op::Mul || op == Op::Max || op == Op::Min || op == Op::Eq ||
         op == Op::Ne;
}

} // namespace

// Scalar semantics (EvtPasses.h).
double evalOp(Op op, const std::vector<double> &a) {
  switch (op) {
  case Op::Add:
    return a[0] + a[1];
  case Op::Sub:
    return a[0] - a[1];
  case Op::Mul:
    return a[0] * a[1];
  case Op::Div:
    return a[0] / a[1];
  case Op::Pow:
    return std::pow(a[0], a[1]);
  case Op::Neg:
    return -a[0];
  case Op::Relu:
    return a[0] > 0 ? a[0] : 0;
  case Op::Sigmoid:
    return 1 / (1 + std::exp(-a[0]));
  case Op::Tanh:
    return std::tanh(a[0]);
  case Op::Gelu:
    return 0.5 * a[0] * (1 + std::erf(a[0] / std::sqrt(2.0)));
  case Op::Erf:
    return std::erf(a[0]);
  case Op::Silu:
    return a[0] / (1 + std::exp(-a[0]));
  case Op::Exp:
    return std::exp(a[0]);
  case Op::Log:
    return std::log(a[0]);
  case Op::Abs:
    return std::fabs(a[0]);
  case Op::Sqrt:
    return std::sqrt(a[0]);
  case Op::Max:
    return std::max(a[0], a[1]);
  case Op::Min:
    return std::min(a[0], a[1]);
  case Op::Clamp:
    return std::min(std::max(a[0], a[1]), a[2]);
  case Op::Where:
    return a[0] != 0 ? a[1] : a[2];
  case Op::Lt:
    return a[0] < a[1];
  case Op::Le:
    return a[0] <= a[1];
  case Op::Gt:
    return a[0] > a[1];
  case Op::Ge:
    return a[0] >= a[1];
  case Op::Eq:
    return a[0] == a[1];
  case Op::Ne:
    return a[0] != a[1];
  case Op::Fma:
    return a[0] * a[1] + a[2];
  case Op::Cast:
  case Op::First:
    return a[0];
  }
  return 0;
}

bool isDuplicableLeaf(Kind k) {
  return k == Kind::Accum || k == Kind::Src || k == Kind::RowBcast || k == Kind::ColBcast ||
         k == Kind::ScalarBcast || k == Kind::Literal;
}

Status checkRules(Program &p, const CompileOptions &o) {
  std::set<std::string> params;
  int cNode = -1;
  for (int id : p.params) {
    params.insert(p.at(id).name);
    if (p.at(id).name == "C") cNode = id;
  }
  const Output *d = nullptr;
  for (const Output &out : p.outputs) {
    if (out.name == "D") d = &out;
    if (params.count(out.name) && out.name != "accum")
      return Error::user("output '" + out.name +
                             "' has the name of a parameter; the input and "
                             "the output would share one buffer name (rule output-param)",
                         out.loc);
    if (out.name == "accum")
      return Error::user("'accum' is the accumulator and cannot be an output; assign it to a "
                         "new name (rule output-param)",
                         out.loc);
  }
  if (!d) {
    std::string names;
    for (const Output &out : p.outputs) names += (names.empty() ? "" : ", ") + out.name;
    return Error::user("the epilogue must return D, the GEMM's output; it returns " + names +
                           " (rule d-output)",
                       p.outputs.empty() ? SourceLoc{} : p.outputs.front().loc);
  }
  if (isReduction(p.at(d->value).kind))
    return Error::user("D must be the dense " + shapeText(p, p.problem) +
                           " result of the epilogue, but it is a reduction (" +
                           redText(p.at(d->value)) + ") (rule d-dense)",
                       d->loc);
  if (cNode >= 0) {
    const Node &c = p.at(cNode);
    if (!(c.shape == p.problem))
      return Error::user("C is the GEMM's source and must be dense " + shapeText(p, p.problem) +
                             ", but it is annotated " + shapeText(p, c.shape) +
                             "; give a broadcast operand another name (rule c-dense)",
                         c.loc);
  }
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const Node &n = p.nodes[i];
    if (n.dead) continue;
    for (int op : n.operands)
      if (isReduction(p.at(op).kind))
        return Error::user("the result of reduction " + label(p, op) + " (" + redText(p.at(op)) +
                               ") is complete only after the whole GEMM; it can be returned but "
                               "not used inside the epilogue (rule reduction-use)",
                           n.loc);
  }
  for (const Output &out : p.outputs) {
    bool red = isReduction(p.at(out.value).kind);
    DType dt = outputDType(p, o, out.name, red);
    if (red && dt != DType::F32)
      return Error::user("reduction output '" + out.name +
                             "' must be f32 (reductions accumulate with atomics in the output "
                             "type), got " +
                             std::string(dtypeName(dt)) + " (rule reduction-dtype)",
                         out.loc);
  }
  return okStatus();
}

Status resolveKinds(Program &p, const CompileOptions &o) {
  for (Node &n : p.nodes) {
    if (n.dead || n.kind != Kind::Input) continue;
    const Strides &s = n.stride;
    if (n.name == "C" && o.arch == Arch::Sm90) {
      n.kind = Kind::Src;
    } else if (s.m == 0 && s.n == 0) {
      n.kind = Kind::ScalarBcast;
    } else if (s.m == 0 && s.n == 1) {
      n.kind = Kind::RowBcast;
    } else if (s.m == 1 && s.n == 0) {
      n.kind = Kind::ColBcast;
    } else if (s.n == 1 || s.m == 1) {
      n.kind = Kind::AuxLoad;
    } else {
      return Error::user("parameter '" + n.name + "' has strides (" + std::to_string(s.m) + ", " +
                             std::to_string(s.n) +
                             ") over (M, N); an epilogue operand needs a unit stride in M or N "
                             "(rule load-stride)",
                         n.loc);
    }
  }
  return okStatus();
}

Status propagateShapes(Program &p) {
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    Node &n = p.nodes[i];
    if (n.dead) continue;
    if (n.kind == Kind::Literal) {
      n.shape = {1, 1, 1};
      continue;
    }
    if (isLoad(n.kind)) continue;
    if (n.kind == Kind::Compute || n.kind == Kind::AuxStore) {
      Dims d{1, 1, 1};
      for (int op : n.operands) {
        const Dims &s = p.at(op).shape;
        auto merge = [&](int64_t &acc, int64_t v, const char *dim) -> Status {
          if (acc == 1)
            acc = v;
          else if (v != 1 && v != acc)
            return Error::user(std::string("operands of ") + std::string(opName(n.op)) +
                                   " disagree in dimension " + dim + ": " + std::to_string(acc) +
                                   " vs " + std::to_string(v) + " (rule broadcast)",
                               n.loc);
          return okStatus();
        };
        COIL_TRY_STATUS(merge(d.m, s.m, "M"));
        COIL_TRY_STATUS(merge(d.n, s.n, "N"));
        COIL_TRY_STATUS(merge(d.l, s.l, "L"));
      }
      if (n.kind == Kind::AuxStore) d = p.problem; // stores are dense
      n.shape = d;
      continue;
    }
    // Reductions: the reduced value's shape, per batch.
    int64_t l = p.batched ? p.problem.l : 1;
    if (n.kind == Kind::RowRed) {
      n.shape = {1, p.problem.n, l};
      n.stride = {0, 1, p.batched ? p.problem.n : 0};
    } else if (n.kind == Kind::ColRed) {
      n.shape = {p.problem.m, 1, l};
      n.stride = {1, 0, p.batched ? p.problem.m : 0};
    } else {
      n.shape = {1, 1, l};
      n.stride = {0, 0, p.batched ? 1 : 0};
    }
  }
  return okStatus();
}

void foldConstants(Program &p) {
  for (Node &n : p.nodes) {
    if (n.dead || n.kind != Kind::Compute || n.op == Op::First || n.op == Op::Cast) continue;
    if (n.dtype != p.compute) continue;
    std::vector<double> vals;
    bool all = true;
    for (int op : n.operands) {
      if (p.at(op).kind != Kind::Literal) {
        all = false;
        break;
      }
      vals.push_back(p.at(op).value);
    }
    if (!all) continue;
    double v = static_cast<double>(static_cast<float>(evalOp(n.op, vals)));
    n.kind = Kind::Literal;
    n.value = v;
    n.operands.clear();
    n.shape = {1, 1, 1};
  }
}

void cse(Program &p) {
  // Key: kind, op, reduction, dtype, literal bits, name, operands (sorted when commutative).
  using Key = std::tuple<int, int, int, int, uint64_t, std::string, std::vector<int>>;
  std::map<Key, int> seen;
  std::vector<int> repl(p.nodes.size());
  for (size_t i = 0; i < p.nodes.size(); ++i) repl[i] = static_cast<int>(i);
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    Node &n = p.nodes[i];
    if (n.dead) continue;
    for (int &op : n.operands) op = repl[static_cast<size_t>(op)];
    if (isStore(n.kind) || n.kind == Kind::Input) continue; // side effects / distinct tensors
    std::vector<int> ops = n.operands;
    if (n.kind == Kind::Compute && commutative(n.op)) std::sort(ops.begin(), ops.end());
    uint64_t bits = 0;
    std::memcpy(&bits, &n.value, sizeof bits);
    Key k{static_cast<int>(n.kind),
          static_cast<int>(n.op),
          static_cast<int>(n.red),
          static_cast<int>(n.dtype),
          bits,
          n.name,
          ops};
    auto [it, inserted] = seen.emplace(k, static_cast<int>(i));
    if (!inserted) {
      repl[i] = it->second;
      n.dead = true;
    }
  }
  for (Output &o : p.outputs) o.value = repl[static_cast<size_t>(o.value)];
  for (int &id : p.params) id = repl[static_cast<size_t>(id)];
}

void dce(Program &p) {
  std::vector<char> live(p.nodes.size(), 0);
  std::vector<int> stack;
  for (const Output &o : p.outputs) stack.push_back(o.value);
  for (int s : p.outputStores)
    if (s >= 0) stack.push_back(s);
  if (p.root >= 0) stack.push_back(p.root);
  while (!stack.empty()) {
    int id = stack.back();
    stack.pop_back();
    if (live[static_cast<size_t>(id)]) continue;
    live[static_cast<size_t>(id)] = 1;
    for (int op : p.at(id).operands) stack.push_back(op);
  }
  for (size_t i = 0; i < p.nodes.size(); ++i)
    if (!live[i]) p.nodes[i].dead = true;
}

int fuseBetaC(Program &p) {
  auto users = p.users();
  int rewrites = 0;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    Node &n = p.nodes[i];
    if (n.dead || n.kind != Kind::Compute || n.op != Op::Add || n.dtype != p.compute) continue;
    for (int side = 0; side < 2; ++side) {
      int m = n.operands[static_cast<size_t>(side)], z = n.operands[static_cast<size_t>(1 - side)];
      const Node &mul = p.at(m);
      bool returned = false; // an output reads the product too
      for (const Output &o : p.outputs) returned = returned || o.value == m;
      if (mul.kind != Kind::Compute || mul.op != Op::Mul || mul.dtype != p.compute ||
          users[static_cast<size_t>(m)].size() != 1 || returned)
        continue;
      int a = mul.operands[0], b = mul.operands[1];
      if (p.at(a).kind == Kind::Src) std::swap(a, b);
      Kind sk = p.at(a).kind;
      if (p.at(b).kind != Kind::Src || (sk != Kind::ScalarBcast && sk != Kind::Literal)) continue;
      n.op = Op::Fma;
      n.operands = {a, b, z};
      p.at(m).dead = true;
      ++rewrites;
      break;
    }
  }
  return rewrites;
}

Status spliceStores(Program &p, const CompileOptions &o, std::vector<std::string> *notes) {
  p.outputStores.assign(p.outputs.size(), -1);
  p.dValue = -1;
  p.dDType = outputDType(p, o, "D", false);
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    const Output &out = p.outputs[k];
    int v = out.value;
    if (isReduction(p.at(v).kind)) {
      if (!p.at(v).name.empty())
        return Error::user("reduction " + label(p, v) + " is returned twice, as '" + p.at(v).name +
                               "' and '" + out.name + "' (rule output-unique)",
                           out.loc);
      p.at(v).name = out.name;
      p.outputStores[k] = v;
      // Splice the reduction in as a pass-through of its operand: the operand's other users
      // read the reduction, which keeps the visitor graph a chain instead of a fork.
      int x = p.at(v).operands[0];
      for (size_t i = 0; i < p.nodes.size(); ++i) {
        Node &u = p.nodes[i];
        if (u.dead || static_cast<int>(i) == v) continue;
        for (int &op : u.operands)
          if (op == x) op = v;
      }
      if (p.dValue == x) p.dValue = v;
      for (size_t j = k + 1; j < p.outputs.size(); ++j)
        if (p.outputs[j].value == x) p.outputs[j].value = v;
      continue;
    }
    if (o.arch == Arch::Sm90 && out.name == "D") {
      p.dValue = v;
      continue;
    }
    Node s;
    s.kind = Kind::AuxStore;
    s.operands = {v};
    s.dtype = outputDType(p, o, out.name, false);
    s.shape = p.problem;
    s.stride = {p.problem.n, 1, p.batched ? p.problem.m * p.problem.n : 0};
    s.name = out.name;
    s.var = out.name;
    s.loc = out.loc;
    p.nodes.push_back(s);
    int sid = static_cast<int>(p.nodes.size()) - 1;
    // Splice: every user of v now reads the store, which passes v through.
    for (size_t i = 0; i < p.nodes.size() - 1; ++i) {
      Node &u = p.nodes[i];
      if (u.dead) continue;
      for (int &op : u.operands)
        if (op == v) op = sid;
    }
    if (p.dValue == v) p.dValue = sid;
    for (size_t j = k + 1; j < p.outputs.size(); ++j)
      if (p.outputs[j].value == v) p.outputs[j].value = sid;
    p.outputStores[k] = sid;
  }
  // Sinks: live nodes with no users. Every store must reach the root.
  auto users = p.users();
  std::vector<int> sinks;
  for (size_t i = 0; i < p.nodes.size(); ++i)
    if (!p.nodes[i].dead && users[i].empty()) sinks.push_back(static_cast<int>(i));
  std::vector<int> joined;
  int first = -1;
  if (o.arch == Arch::Sm90) {
    COIL_CHECK(p.dValue >= 0) << "sm90 epilogue without D survived checkRules";
    first = p.dValue;
    bool dRead = std::binary_search(p.readNames.begin(), p.readNames.end(), std::string("D"));
    if (!users[static_cast<size_t>(p.dValue)].empty() && dRead && notes)
      notes->push_back("D has " + std::to_string(users[static_cast<size_t>(p.dValue)].size()) +
                       " user(s) inside the epilogue; on sm90 the collective stores D, so the "
                       "users read D's value and the root returns it (rewrite of rule "
                       "sm90-d-root)");
    for (int s : sinks)
      if (s != p.dValue) joined.push_back(s);
  } else {
    // sm80: the root's value is unused; D's store (or the first sink) leads.
    for (size_t k = 0; k < p.outputs.size(); ++k)
      if (p.outputs[k].name == "D") {
        int s = p.outputStores[k];
        while (!users[static_cast<size_t>(s)].empty() && p.at(s).kind == Kind::AuxStore &&
               users[static_cast<size_t>(s)].size() == 1 &&
               isStore(p.at(users[static_cast<size_t>(s)][0]).kind))
          s = users[static_cast<size_t>(s)][0];
        if (users[static_cast<size_t>(s)].empty()) first = s;
      }
    for (int s : sinks)
      if (first < 0)
        first = s;
      else if (s != first)
        joined.push_back(s);
  }
  if (joined.empty()) {
    p.root = first;
  } else {
    if (notes) {
      std::string names;
      for (int s : joined) names += (names.empty() ? "" : ", ") + label(p, s);
      notes->push_back("output(s) " + names + " do not feed " +
                       (o.arch == Arch::Sm90 ? std::string("D") : label(p, first)) +
                       "; joined into the root with a pass-through node so that none is dropped");
    }
    Node j;
    j.kind = Kind::Compute;
    j.op = Op::First;
    j.operands.push_back(first);
    for (int s : joined) j.operands.push_back(s);
    j.dtype = p.compute;
    j.shape = p.problem;
    j.var = "root";
    p.nodes.push_back(j);
    p.root = static_cast<int>(p.nodes.size()) - 1;
  }
  // Alignment: dense tensors and row vectors move 16 bytes per access.
  auto aligned = [&](const Node &n, const std::string &what) -> Status {
    int64_t elems = 16 / static_cast<int64_t>(dtypeSize(n.dtype));
    bool dense =
        n.kind == Kind::AuxLoad || n.kind == Kind::Src || n.kind == Kind::AuxStore || what == "D";
    bool row = n.kind == Kind::RowBcast || n.kind == Kind::RowRed;
    if ((dense || row) && p.problem.n % elems != 0)
      return Error::user(what + " (" + std::string(dtypeName(n.dtype)) + ", " +
                             (row ? "row vector" : "row-major") + ") needs N to be a multiple of " +
                             std::to_string(elems) + " for 16-byte accesses, got N=" +
                             std::to_string(p.problem.n) + " (rule alignment)",
                         n.loc);
    return okStatus();
  };
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const Node &n = p.nodes[i];
    if (n.dead) continue;
    if (isLoad(n.kind) || isStore(n.kind)) {
      std::string what = n.name.empty() ? label(p, static_cast<int>(i)) : "'" + n.name + "'";
      COIL_TRY_STATUS(aligned(n, what));
    }
  }
  if (o.arch == Arch::Sm90) {
    Node d;
    d.kind = Kind::AuxStore;
    d.dtype = outputDType(p, o, "D", false);
    for (const Output &out : p.outputs)
      if (out.name == "D") d.loc = out.loc;
    COIL_TRY_STATUS(aligned(d, "D"));
  }
  return okStatus();
}

Status verify(const Program &p, bool spliced) {
  auto fail = [&](int id, const std::string &what) {
    SourceLoc loc = p.at(id).loc;
    return Error::internal("evt node %" + std::to_string(id) + " (" +
                               std::string(kindName(p.at(id).kind)) + "): " + what,
                           loc);
  };
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const Node &n = p.nodes[i];
    if (n.dead) continue;
    int id = static_cast<int>(i);
    for (int op : n.operands) {
      if (op < 0 || op >= static_cast<int>(p.nodes.size()))
        return fail(id, "operand %" + std::to_string(op) + " does not exist");
      if (p.at(op).dead) return fail(id, "operand %" + std::to_string(op) + " was removed");
    }
    size_t nops = n.operands.size();
    if (isLoad(n.kind) && nops != 0) return fail(id, "a load has operands");
    if (isStore(n.kind) && nops != 1)
      return fail(id, "a store has " + std::to_string(nops) + " operands, expected 1");
    if (n.kind == Kind::Compute) {
      int a = opArity(n.op);
      if ((a >= 0 && static_cast<int>(nops) != a) || (a < 0 && nops == 0))
        return fail(id, std::string(opName(n.op)) + " has " + std::to_string(nops) +
                            " operands, expected " + std::to_string(a));
    }
    if (spliced && n.kind == Kind::Input) return fail(id, "parameter kind was never chosen");
  }
  // Acyclic (DFS with colours).
  std::vector<int> colour(p.nodes.size(), 0);
  std::function<bool(int)> acyclic = [&](int id) {
    colour[static_cast<size_t>(id)] = 1;
    for (int op : p.at(id).operands) {
      if (colour[static_cast<size_t>(op)] == 1) return false;
      if (colour[static_cast<size_t>(op)] == 0 && !acyclic(op)) return false;
    }
    colour[static_cast<size_t>(id)] = 2;
    return true;
  };
  for (size_t i = 0; i < p.nodes.size(); ++i)
    if (!p.nodes[i].dead && colour[i] == 0 && !acyclic(static_cast<int>(i)))
      return fail(static_cast<int>(i), "the epilogue graph has a cycle");
  if (spliced) {
    if (p.root < 0 || p.at(p.root).dead)
      return Error::internal("evt: no root after splicing stores");
    std::vector<char> reach(p.nodes.size(), 0);
    std::vector<int> st{p.root};
    while (!st.empty()) {
      int id = st.back();
      st.pop_back();
      if (reach[static_cast<size_t>(id)]) continue;
      reach[static_cast<size_t>(id)] = 1;
      for (int op : p.at(id).operands) st.push_back(op);
    }
    for (size_t i = 0; i < p.nodes.size(); ++i)
      if (!p.nodes[i].dead && isStore(p.nodes[i].kind) && !reach[i])
        return fail(static_cast<int>(i), "store is not an ancestor of the root and would be "
                                         "dropped");
    for (size_t k = 0; k < p.outputs.size(); ++k) {
      bool isD = p.outputs[k].name == "D";
      int s = k < p.outputStores.size() ? p.outputStores[k] : -1;
      if (s < 0 && !(isD && p.dValue >= 0))
        return Error::internal("evt: output '" + p.outputs[k].name + "' has no store");
    }
    if (p.dValue >= 0 && !reach[static_cast<size_t>(p.dValue)])
      return fail(p.dValue, "D's value does not reach the root");
  }
  return okStatus();
}

Expected<VisitorPlan> planVisitors(const Program &p) {
  VisitorPlan plan;
  size_t n = p.nodes.size();
  // Topological order of the nodes reachable from the root (operands first), deterministic.
  std::vector<char> seen(n, 0);
  std::function<void(int)> visit = [&](int id) {
    if (seen[static_cast<size_t>(id)]) return;
    seen[static_cast<size_t>(id)] = 1;
    for (int op : p.at(id).operands) visit(op);
    plan.topo.push_back(id);
  };
  visit(p.root);
  std::vector<int> pos(n, -1);
  for (size_t i = 0; i < plan.topo.size(); ++i)
    pos[static_cast<size_t>(plan.topo[i])] = static_cast<int>(i);
  std::vector<std::vector<int>> users(n);
  for (int id : plan.topo)
    for (int op : p.at(id).operands) users[static_cast<size_t>(op)].push_back(id);
  // Post-dominator tree (the root is the single sink).
  std::vector<int> ipdom(n, -1), depth(n, 0);
  auto lca = [&](int a, int b) {
    while (a != b) {
      if (depth[static_cast<size_t>(a)] >= depth[static_cast<size_t>(b)])
        a = ipdom[static_cast<size_t>(a)];
      else
        b = ipdom[static_cast<size_t>(b)];
      COIL_CHECK(a >= 0 && b >= 0) << "post-dominator walk left the tree";
    }
    return a;
  };
  for (auto it = plan.topo.rbegin(); it != plan.topo.rend(); ++it) {
    int id = *it;
    if (id == p.root) continue;
    int d = -1;
    for (int u : users[static_cast<size_t>(id)]) d = d < 0 ? u : lca(d, u);
    ipdom[static_cast<size_t>(id)] = d;
    depth[static_cast<size_t>(id)] = depth[static_cast<size_t>(d)] + 1;
  }
  auto membersOf = [&](const std::vector<int> &sources, int exit) {
    // Forward-reachable from the sources, and reaching the exit.
    std::vector<char> fwd(n, 0), bwd(n, 0);
    for (int s : sources) fwd[static_cast<size_t>(s)] = 1;
    for (int id : plan.topo)
      if (fwd[static_cast<size_t>(id)])
        for (int u : users[static_cast<size_t>(id)]) fwd[static_cast<size_t>(u)] = 1;
    bwd[static_cast<size_t>(exit)] = 1;
    for (auto it = plan.topo.rbegin(); it != plan.topo.rend(); ++it)
      if (bwd[static_cast<size_t>(*it)])
        for (int op : p.at(*it).operands) bwd[static_cast<size_t>(op)] = 1;
    std::vector<int> m;
    for (int id : plan.topo)
      if (fwd[static_cast<size_t>(id)] && bwd[static_cast<size_t>(id)]) m.push_back(id);
    return m;
  };
  std::vector<Region> regions;
  for (int id : plan.topo) {
    if (users[static_cast<size_t>(id)].size() < 2 || isDuplicableLeaf(p.at(id).kind)) continue;
    Region r;
    r.sources = {id};
    r.exit = ipdom[static_cast<size_t>(id)];
    r.members = membersOf(r.sources, r.exit);
    regions.push_back(std::move(r));
  }
  // Merge until the regions are disjoint: nested ones are absorbed, overlapping ones united
  // under the nearest common post-dominator of their exits.
  bool changed = true;
  while (changed) {
    changed = false;
    for (size_t a = 0; a < regions.size() && !changed; ++a)
      for (size_t b = a + 1; b < regions.size() && !changed; ++b) {
        std::set<int> ma(regions[a].members.begin(), regions[a].members.end());
        bool inter = false, bInA = true;
        std::set<int> mb(regions[b].members.begin(), regions[b].members.end());
        bool aInB = true;
        for (int x : regions[b].members) {
          if (ma.count(x))
            inter = true;
          else
            bInA = false;
        }
        for (int x : regions[a].members)
          if (!mb.count(x)) aInB = false;
        if (!inter) continue;
        changed = true;
        if (bInA) {
          regions.erase(regions.begin() + static_cast<long>(b));
        } else if (aInB) {
          regions.erase(regions.begin() + static_cast<long>(a));
        } else {
          Region r;
          r.sources = regions[a].sources;
          r.sources.insert(r.sources.end(), regions[b].sources.begin(), regions[b].sources.end());
          r.exit = lca(regions[a].exit, regions[b].exit);
          r.members = membersOf(r.sources, r.exit);
          regions.erase(regions.begin() + static_cast<long>(b));
          regions[a] = std::move(r);
        }
      }
  }
  std::sort(regions.begin(), regions.end(), [&](const Region &x, const Region &y) {
    return pos[static_cast<size_t>(x.exit)] < pos[static_cast<size_t>(y.exit)];
  });
  plan.regions = std::move(regions);
  plan.regionOfExit.assign(n, -1);
  plan.regionOf.assign(n, -1);
  for (size_t r = 0; r < plan.regions.size(); ++r) {
    const Region &reg = plan.regions[r];
    if (reg.members.size() < 2 || reg.members.back() != reg.exit)
      return Error::internal("evt: region exiting at %" + std::to_string(reg.exit) +
                             " is malformed");
    plan.regionOfExit[static_cast<size_t>(reg.exit)] = static_cast<int>(r);
    for (int m : reg.members) {
      if (plan.regionOf[static_cast<size_t>(m)] >= 0 && m != reg.exit)
        return Error::internal("evt: node %" + std::to_string(m) + " is in two regions");
      if (m != reg.exit) plan.regionOf[static_cast<size_t>(m)] = static_cast<int>(r);
    }
    // Closure: every non-exit member's users are members.
    std::set<int> ms(reg.members.begin(), reg.members.end());
    for (int m : reg.members)
      if (m != reg.exit)
        for (int u : users[static_cast<size_t>(m)])
          if (!ms.count(u))
            return Error::internal("evt: region exiting at %" + std::to_string(reg.exit) +
                                   " leaks node %" + std::to_string(m) + " to %" +
                                   std::to_string(u));
  }
  return plan;
}

Expected<VisitorPlan> compileEpilogue(Program &p, const CompileOptions &o,
                                      std::vector<std::string> *notes) {
  // Passes and the emitter recurse over the DAG; an epilogue is small, so bound it.
  constexpr size_t kMaxNodes = 2000;
  if (p.nodes.size() > kMaxNodes)
    return Error::user("the epilogue has " + std::to_string(p.nodes.size()) +
                           " nodes; coil evt handles at most " + std::to_string(kMaxNodes),
                       SourceLoc{p.file, "", "", 0, 0});
  COIL_TRY_STATUS(verify(p, false));
  COIL_TRY_STATUS(checkRules(p, o));
  COIL_TRY_STATUS(resolveKinds(p, o));
  COIL_TRY_STATUS(verify(p, false));
  COIL_TRY_STATUS(propagateShapes(p));
  foldConstants(p);
  COIL_TRY_STATUS(verify(p, false));
  cse(p);
  COIL_TRY_STATUS(verify(p, false));
  if (o.arch == Arch::Sm90 && fuseBetaC(p) > 0 && notes)
    notes->push_back("beta * C + Z uses CUTLASS's homogeneous_multiply_add: C is not loaded when "
                     "beta is 0 at run time");
  COIL_TRY_STATUS(verify(p, false));
  dce(p);
  COIL_TRY_STATUS(verify(p, false));
  COIL_TRY_STATUS(spliceStores(p, o, notes));
  COIL_TRY_STATUS(verify(p, true));
  dce(p);
  COIL_TRY_STATUS(verify(p, true));
  COIL_TRY(VisitorPlan plan, planVisitors(p));
  COIL_TRY_STATUS(checkSmemBudget(p, plan, o.arch, o.inputs));
  return plan;
}

} // namespace coil::evt
