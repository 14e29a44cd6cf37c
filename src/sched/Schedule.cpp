#include "sched/Schedule.h"

#include "support/Check.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

namespace coil::sched {

using loop::Body;
using loop::LoopProgram;
using loop::NodeId;
using loop::Stmt;
using loop::Val;

namespace {

using Subst = std::map<std::string, SymInt>;

std::vector<SymInt> substituteAll(const std::vector<SymInt> &v, const Subst &s) {
  std::vector<SymInt> out;
  out.reserve(v.size());
  for (const SymInt &e : v) out.push_back(s.empty() ? e : e.substitute(s));
  return out;
}

std::vector<SymInt> symbols(const std::vector<std::string> &names) {
  std::vector<SymInt> out;
  for (const std::string &n : names) out.push_back(SymInt::symbol(n));
  return out;
}

/// A key that identifies a statement up to its operands' ids, for common subexpression
/// elimination inside one body.
std::string stmtKey(const Stmt &s) {
  std::ostringstream os;
  os << int(s.kind) << '/' << int(s.dtype) << '/' << int(s.op) << '/';
  for (Val a : s.args) os << a << ',';
  switch (s.kind) {
  case Stmt::Kind::Load:
    os << 'n' << s.node << '[';
    for (const SymInt &i : s.index) os << i.str() << ';';
    os << ']';
    break;
  case Stmt::Kind::Constant:
    if (s.isInt)
      os << 'i' << s.intNumber;
    else {
      // Bits, so that NaN payloads and -0.0 stay distinct.
      uint64_t bits;
      static_assert(sizeof bits == sizeof s.number);
      std::memcpy(&bits, &s.number, sizeof bits);
      os << 'f' << bits;
    }
    break;
  case Stmt::Kind::Index:
    os << s.expr.str();
    break;
  case Stmt::Kind::IndirectIndex:
    return ""; // defines a symbol: never merged
  case Stmt::Kind::Accumulator:
    os << 'a' << s.phase << ':' << s.slot;
    break;
  default:
    break;
  }
  return os.str();
}

/// Builds one kernel body, inlining the bodies of Pointwise nodes that are not realized.
class BodyBuilder {
public:
  BodyBuilder(const LoopProgram &p, const std::vector<bool> &realized, int &indirectCounter)
      : p_(p), realized_(realized), indirectCounter_(indirectCounter) {}

  Body body;
  std::set<NodeId> inlined;
  std::set<NodeId> loaded;

  /// Appends `s` (operands already renumbered), reusing an identical earlier statement.
  Val emit(Stmt s) {
    std::string key = stmtKey(s);
    if (!key.empty()) {
      auto it = cse_.find(key);
      if (it != cse_.end()) return it->second;
    }
    Val v = body.add(std::move(s));
    if (!key.empty()) cse_.emplace(std::move(key), v);
    return v;
  }

  /// Copies `src` with loop variables substituted by `sub`; returns the new id of `result`.
  Val copy(const Body &src, Val result, Subst sub) {
    COIL_CHECK(result >= 0 && size_t(result) < src.stmts.size()) << "body result out of range";
    return copyAll(src, std::move(sub))[size_t(result)];
  }

  /// Copies `src` with loop variables substituted by `sub`; returns the new id of every
  /// statement. `accum` (optional) replaces loads of the given nodes by accumulator reads, and
  /// accumulator statements move by `phaseOffset` phases.
  std::vector<Val> copyAll(const Body &src, Subst sub,
                           const std::map<NodeId, std::pair<int32_t, int32_t>> *accum = nullptr,
                           int32_t phaseOffset = 0) {
    std::vector<Val> remap(src.stmts.size(), loop::kNoVal);
    for (size_t i = 0; i < src.stmts.size(); ++i) {
      Stmt s = src.stmts[i];
      for (Val &a : s.args) {
        COIL_CHECK(a >= 0 && size_t(a) < i) << "body operand out of order";
        a = remap[size_t(a)];
      }
      switch (s.kind) {
      case Stmt::Kind::Load: {
        s.index = substituteAll(s.index, sub);
        if (accum) {
          auto it = accum->find(s.node);
          if (it != accum->end()) {
            Stmt a;
            a.kind = Stmt::Kind::Accumulator;
            a.dtype = accDTypeOf(s.node);
            a.phase = it->second.first;
            a.slot = it->second.second;
            Val av = emit(a);
            remap[i] = castTo(av, s.dtype);
            continue;
          }
        }
        const loop::Node &n = p_.nodes[size_t(s.node)];
        if (!realized_[size_t(s.node)] && n.isPointwise()) {
          const auto &pw = std::get<loop::PointwiseNode>(n.kind);
          Subst inner;
          for (size_t d = 0; d < pw.vars.size(); ++d) inner[pw.vars[d]] = s.index[d];
          inlined.insert(s.node);
          Val v = copy(pw.body, pw.result, std::move(inner));
          remap[i] = castTo(v, n.dtype);
          continue;
        }
        loaded.insert(s.node);
        remap[i] = emit(std::move(s));
        continue;
      }
      case Stmt::Kind::Index:
        s.expr = sub.empty() ? s.expr : s.expr.substitute(sub);
        remap[i] = emit(std::move(s));
        continue;
      case Stmt::Kind::IndirectIndex: {
        std::string fresh = "%i" + std::to_string(indirectCounter_++);
        s.extent = sub.empty() ? s.extent : s.extent.substitute(sub);
        sub[s.symbol] = SymInt::symbol(fresh);
        s.symbol = fresh;
        remap[i] = emit(std::move(s));
        continue;
      }
      case Stmt::Kind::Accumulator:
        s.phase += phaseOffset;
        remap[i] = emit(std::move(s));
        continue;
      default:
        remap[i] = emit(std::move(s));
        continue;
      }
    }
    return remap;
  }

  Val castTo(Val v, DType t) {
    if (body.stmts[size_t(v)].dtype == t) return v;
    Stmt c;
    c.kind = Stmt::Kind::Cast;
    c.dtype = t;
    c.args = {v};
    return emit(c);
  }

  DType accDTypeOf(NodeId n) const {
    const auto &r = std::get<loop::ReductionNode>(p_.nodes[size_t(n)].kind);
    if (r.kind == loop::ReduceKind::ArgMax || r.kind == loop::ReduceKind::ArgMin) return DType::I64;
    return r.accDType;
  }

private:
  const LoopProgram &p_;
  const std::vector<bool> &realized_;
  int &indirectCounter_;
  std::map<std::string, Val> cse_;
};

/// Bookkeeping of one kernel while fusing.
struct Work {
  Kernel k;
  /// Reduction nodes computed here: (phase, slot) of their accumulator.
  std::map<NodeId, std::pair<int32_t, int32_t>> accum;
  bool isReduction = false;
  bool alive = true;
  int indirectCounter = 0;
  int freshVars = 0;
};

void collectLoads(const Body &b, std::map<NodeId, std::vector<const Stmt *>> &out) {
  for (const Stmt &s : b.stmts)
    if (s.kind == Stmt::Kind::Load) out[s.node].push_back(&s);
}

bool smallConstantSpace(const std::vector<SymInt> &ranges) {
  int64_t n = 1;
  for (const SymInt &r : ranges) {
    auto c = r.maybeConstant();
    if (!c) return false;
    n *= *c;
    if (n >= 16) return false;
  }
  return true;
}

/// Keeps only the statements that stores and reductions use, renumbered in order.
void removeDeadStatements(Phase &ph) {
  std::vector<Stmt> &st = ph.body.stmts;
  std::vector<bool> live(st.size(), false);
  auto mark = [&](Val v) {
    if (v != loop::kNoVal) live[size_t(v)] = true;
  };
  for (const Store &s : ph.stores) mark(s.value);
  for (const Accumulate &a : ph.reductions) {
    mark(a.value);
    mark(a.position);
  }
  // Symbols defined by live-or-needed IndirectIndex statements are used by load indices;
  // a load keeps every IndirectIndex before it whose symbol appears in its index.
  for (size_t i = st.size(); i-- > 0;) {
    if (!live[i]) continue;
    for (Val a : st[i].args) live[size_t(a)] = true;
    std::set<std::string> syms;
    for (const SymInt &e : st[i].index) e.collectSymbols(syms);
    st[i].expr.collectSymbols(syms);
    st[i].extent.collectSymbols(syms);
    if (syms.empty()) continue;
    for (size_t j = 0; j < i; ++j)
      if (st[j].kind == Stmt::Kind::IndirectIndex && syms.count(st[j].symbol)) live[j] = true;
  }
  std::vector<Val> remap(st.size(), loop::kNoVal);
  std::vector<Stmt> out;
  for (size_t i = 0; i < st.size(); ++i) {
    if (!live[i]) continue;
    Stmt s = std::move(st[i]);
    for (Val &a : s.args) a = remap[size_t(a)];
    remap[i] = Val(out.size());
    out.push_back(std::move(s));
  }
  st = std::move(out);
  for (Store &s : ph.stores) s.value = remap[size_t(s.value)];
  for (Accumulate &a : ph.reductions) {
    a.value = remap[size_t(a.value)];
    if (a.position != loop::kNoVal) a.position = remap[size_t(a.position)];
  }
}

class Scheduler {
public:
  Scheduler(LoopProgram &p, const ScheduleOptions &o) : p_(p), o_(o) {}

  Expected<Schedule> run() {
    addOutputCopies();
    decideRealization();
    buildKernels();
    if (o_.fuseReductions) fuseReductions();
    dropUnneededStores();
    if (o_.fuseHorizontal) fuseHorizontal();
    return finish();
  }

private:
  LoopProgram &p_;
  const ScheduleOptions &o_;
  std::vector<bool> realized_;
  std::vector<std::vector<NodeId>> readers_; // per node: nodes whose bodies load it
  std::vector<int> externReads_;             // per node: extern/multi-output uses
  std::vector<bool> isOutput_;
  std::vector<Work> work_;           // in step order; externs are steps too
  std::vector<NodeId> externOfStep_; // per work_ entry: the extern node, or -1
  std::map<NodeId, size_t> stepOf_;  // realized computed node -> index into work_

  /// Outputs that are inputs, constants, or a node already used as an earlier output get a
  /// Pointwise copy node, so that every output owns a distinct buffer the caller receives.
  void addOutputCopies() {
    std::set<NodeId> seen;
    for (size_t i = 0; i < p_.outputs.size(); ++i) {
      NodeId o = p_.outputs[i];
      const loop::Node &n = p_.nodes[size_t(o)];
      bool leaf = std::holds_alternative<loop::InputNode>(n.kind) ||
                  std::holds_alternative<loop::ConstantNode>(n.kind);
      if (!leaf && seen.insert(o).second) continue;
      loop::Node c;
      c.name = "output_copy_" + std::to_string(i);
      c.dtype = n.dtype;
      c.shape = n.shape;
      c.origins = n.origins;
      loop::PointwiseNode pw;
      for (size_t d = 0; d < n.shape.size(); ++d) pw.vars.push_back(loop::loopVar(int(d)));
      Stmt ld;
      ld.kind = Stmt::Kind::Load;
      ld.dtype = n.dtype;
      ld.node = o;
      ld.index = symbols(pw.vars);
      pw.result = pw.body.add(ld);
      c.kind = std::move(pw);
      p_.outputs[i] = p_.add(std::move(c));
      seen.insert(p_.outputs[i]);
    }
  }

  static std::vector<const Body *> bodiesOf(const loop::Node &n) {
    if (auto *pw = std::get_if<loop::PointwiseNode>(&n.kind)) return {&pw->body};
    if (auto *r = std::get_if<loop::ReductionNode>(&n.kind)) return {&r->body};
    return {};
  }

  void decideRealization() {
    size_t n = p_.nodes.size();
    realized_.assign(n, false);
    readers_.assign(n, {});
    externReads_.assign(n, 0);
    isOutput_.assign(n, false);
    for (NodeId o : p_.outputs) isOutput_[size_t(o)] = true;
    for (size_t i = 0; i < n; ++i) {
      const loop::Node &node = p_.nodes[i];
      for (const Body *b : bodiesOf(node)) {
        std::set<NodeId> once;
        for (const Stmt &s : b->stmts)
          if (s.kind == Stmt::Kind::Load && once.insert(s.node).second)
            readers_[size_t(s.node)].push_back(NodeId(i));
      }
      if (auto *e = std::get_if<loop::ExternNode>(&node.kind))
        for (const loop::ExternArg &a : e->args)
          if (a.kind == loop::ExternArg::Kind::Node) ++externReads_[size_t(a.node)];
      if (auto *m = std::get_if<loop::MultiOutputNode>(&node.kind))
        ++externReads_[size_t(m->source)];
    }
    // Inlined size of each Pointwise body, bottom-up (nodes are in dependency order).
    std::vector<int> size(n, 1);
    for (size_t i = 0; i < n; ++i) {
      const loop::Node &node = p_.nodes[i];
      if (!node.isPointwise()) {
        realized_[i] = true;
        continue;
      }
      const auto &pw = std::get<loop::PointwiseNode>(node.kind);
      int s = 0;
      for (const Stmt &st : pw.body.stmts) {
        if (st.kind == Stmt::Kind::Load && !realized_[size_t(st.node)])
          s += size[size_t(st.node)];
        else
          ++s;
      }
      size[i] = s;
      bool cheap = s <= 12;
      realized_[i] = isOutput_[i] || externReads_[i] > 0 || s > o_.maxInlineStmts ||
                     (readers_[i].size() > 1 && !cheap);
    }
  }

  Work kernelFor(NodeId id) {
    const loop::Node &n = p_.nodes[size_t(id)];
    Work w;
    w.k.name = "k" + std::to_string(work_.size()) + "_" + n.name;
    w.k.ranges = n.shape;
    if (auto *pw = std::get_if<loop::PointwiseNode>(&n.kind)) {
      w.k.vars = pw->vars;
      Phase ph;
      BodyBuilder b(p_, realized_, w.indirectCounter);
      Val v = b.castTo(b.copy(pw->body, pw->result, {}), n.dtype);
      ph.body = std::move(b.body);
      ph.stores.push_back({id, symbols(pw->vars), v});
      w.k.phases.push_back(std::move(ph));
      noteFused(w.k, b, id);
      return w;
    }
    const auto &r = std::get<loop::ReductionNode>(n.kind);
    w.isReduction = true;
    w.k.vars = r.vars;
    Phase fold;
    fold.vars = r.rvars;
    fold.ranges = r.rranges;
    BodyBuilder b(p_, realized_, w.indirectCounter);
    bool arg = r.kind == loop::ReduceKind::ArgMax || r.kind == loop::ReduceKind::ArgMin;
    Accumulate acc;
    acc.kind = r.kind;
    acc.accDType = r.accDType; // the type values compare in; ArgMax/ArgMin results are i64
    acc.selectLast = r.selectLast;
    std::vector<Val> map = b.copyAll(r.body, {});
    Val v = map.at(size_t(r.value));
    acc.value = b.castTo(v, r.accDType);
    if (arg) {
      COIL_CHECK(r.position != loop::kNoVal) << "arg reduction without a position";
      acc.position = b.castTo(map.at(size_t(r.position)), DType::I64);
    }
    fold.body = std::move(b.body);
    fold.reductions.push_back(acc);
    w.k.phases.push_back(std::move(fold));
    noteFused(w.k, b, id);
    Phase store;
    Stmt a;
    a.kind = Stmt::Kind::Accumulator;
    a.dtype = arg ? DType::I64 : acc.accDType;
    a.phase = 0;
    a.slot = 0;
    Val av = store.body.add(a);
    Val sv = av;
    if (n.dtype != a.dtype) {
      Stmt c;
      c.kind = Stmt::Kind::Cast;
      c.dtype = n.dtype;
      c.args = {av};
      sv = store.body.add(c);
    }
    store.stores.push_back({id, symbols(r.vars), sv});
    w.k.phases.push_back(std::move(store));
    w.accum[id] = {0, 0};
    return w;
  }

  void noteFused(Kernel &k, const BodyBuilder &b, NodeId id) {
    k.fused.push_back(id);
    for (NodeId i : b.inlined) k.fused.push_back(i);
  }

  void buildKernels() {
    for (size_t i = 0; i < p_.nodes.size(); ++i) {
      const loop::Node &n = p_.nodes[i];
      if (n.isExtern()) {
        Work w;
        w.k.name = n.name;
        externOfStep_.push_back(NodeId(i));
        stepOf_[NodeId(i)] = work_.size();
        work_.push_back(std::move(w));
        continue;
      }
      if (!(n.isPointwise() || n.isReduction()) || !realized_[i]) continue;
      externOfStep_.push_back(-1);
      stepOf_[NodeId(i)] = work_.size();
      work_.push_back(kernelFor(NodeId(i)));
    }
  }

  /// Step index at which node `n` is available (-1 for inputs, constants).
  long producedAt(NodeId n) const {
    const loop::Node &node = p_.nodes[size_t(n)];
    if (auto *m = std::get_if<loop::MultiOutputNode>(&node.kind)) return producedAt(m->source);
    auto it = stepOf_.find(n);
    return it == stepOf_.end() ? -1 : long(it->second);
  }

  std::set<NodeId> writesOf(const Kernel &k) const {
    std::set<NodeId> w;
    for (const Phase &ph : k.phases)
      for (const Store &s : ph.stores) w.insert(s.node);
    return w;
  }

  /// Tries to append kernel `c` (index ci) to reduction kernel `k` (index ki).
  bool tryFuse(size_t ki, size_t ci) {
    Work &K = work_[ki];
    Work &C = work_[ci];
    if (!K.isReduction || !C.alive || externOfStep_[ci] >= 0 || smallConstantSpace(K.k.ranges))
      return false;
    std::set<NodeId> kWrites = writesOf(K.k);
    // Every read of C: either something K computes as an accumulator (read at the outer
    // point), or something available before K runs.
    std::map<NodeId, std::vector<const Stmt *>> loads;
    for (const Phase &ph : C.k.phases) collectLoads(ph.body, loads);
    bool readsK = false;
    std::map<size_t, std::string> dimToVar; // K outer dim -> C outer var
    std::set<std::string> cVars(C.k.vars.begin(), C.k.vars.end());
    for (auto &[node, stmts] : loads) {
      if (kWrites.count(node)) {
        if (!K.accum.count(node)) return false;
        readsK = true;
        for (const Stmt *s : stmts) {
          if (s->index.size() != K.k.ranges.size()) return false;
          for (size_t d = 0; d < s->index.size(); ++d) {
            const SymInt &e = s->index[d];
            if (e.isSymbol() && cVars.count(e.symbolName())) {
              auto [it, fresh] = dimToVar.emplace(d, e.symbolName());
              if (!fresh && it->second != e.symbolName()) return false;
            } else if (!(e == SymInt(0) && K.k.ranges[d] == SymInt(1))) {
              return false;
            }
          }
        }
      } else if (producedAt(node) >= long(ki)) {
        return false;
      }
    }
    if (!readsK) {
      // A sibling reduction over the same outer space that reads what K reads (layer norm's
      // mean next to softmax's max over the same rows) joins K too, point by point.
      if (!C.isReduction || C.k.ranges.size() != K.k.ranges.size()) return false;
      std::map<NodeId, std::vector<const Stmt *>> kLoads;
      for (const Phase &ph : K.k.phases) collectLoads(ph.body, kLoads);
      bool shares = false;
      for (auto &[node, _] : loads) shares = shares || kLoads.count(node);
      if (!shares) return false;
      for (size_t d = 0; d < K.k.ranges.size(); ++d) dimToVar[d] = C.k.vars[d];
    }
    // Every outer dim of K that is not trivially 1 must be pinned to a distinct var of C with
    // the same extent.
    std::set<std::string> used;
    Subst rename;
    for (size_t d = 0; d < K.k.ranges.size(); ++d) {
      auto it = dimToVar.find(d);
      if (it == dimToVar.end()) {
        if (K.k.ranges[d] != SymInt(1)) return false;
        continue;
      }
      if (!used.insert(it->second).second) return false;
      size_t cv =
          size_t(std::find(C.k.vars.begin(), C.k.vars.end(), it->second) - C.k.vars.begin());
      if (!proveEQ(C.k.ranges[cv], K.k.ranges[d], p_.symbols)) return false;
      rename[it->second] = SymInt::symbol(K.k.vars[d]);
    }
    // C's remaining outer vars become an inner loop nest of each of its phases; a reduction
    // kernel's results must be per outer point of K, so it may have none.
    std::vector<std::string> extraVars;
    std::vector<SymInt> extraRanges;
    for (size_t v = 0; v < C.k.vars.size(); ++v) {
      if (used.count(C.k.vars[v])) continue;
      std::string fresh = "%f" + std::to_string(K.freshVars++);
      rename[C.k.vars[v]] = SymInt::symbol(fresh);
      extraVars.push_back(fresh);
      extraRanges.push_back(C.k.ranges[v]);
    }
    if (C.isReduction && !extraVars.empty()) return false;
    if (!extraVars.empty() && C.k.phases.size() != 1) return false;

    int32_t offset = int32_t(K.k.phases.size());
    for (const Phase &ph : C.k.phases) {
      Phase np;
      Subst sub = rename;
      np.vars = extraVars;
      np.ranges = extraRanges;
      for (size_t v = 0; v < ph.vars.size(); ++v) {
        std::string fresh = "%f" + std::to_string(K.freshVars++);
        sub[ph.vars[v]] = SymInt::symbol(fresh);
        np.vars.push_back(fresh);
        np.ranges.push_back(ph.ranges[v]);
      }
      BodyBuilder b(p_, realized_, K.indirectCounter);
      std::vector<Val> map = b.copyAll(ph.body, sub, &K.accum, offset);
      np.body = std::move(b.body);
      for (const Store &s : ph.stores)
        np.stores.push_back({s.node, substituteAll(s.index, sub), map[size_t(s.value)]});
      for (Accumulate a : ph.reductions) {
        a.value = map[size_t(a.value)];
        if (a.position != loop::kNoVal) a.position = map[size_t(a.position)];
        np.reductions.push_back(a);
      }
      K.k.phases.push_back(std::move(np));
    }
    for (auto &[node, ps] : C.accum) K.accum[node] = {ps.first + offset, ps.second};
    K.k.fused.insert(K.k.fused.end(), C.k.fused.begin(), C.k.fused.end());
    for (NodeId f : C.k.fused) stepOf_[f] = ki;
    C.alive = false;
    return true;
  }

  void fuseReductions() {
    for (size_t ki = 0; ki < work_.size(); ++ki) {
      if (!work_[ki].alive || !work_[ki].isReduction) continue;
      for (size_t ci = ki + 1; ci < work_.size(); ++ci)
        if (work_[ci].alive) tryFuse(ki, ci);
    }
  }

  /// Reduction results that no other kernel, extern or output reads lose their store (and
  /// their buffer): fused readers use the accumulator.
  void dropUnneededStores() {
    std::map<NodeId, std::set<size_t>> readBy;
    for (size_t i = 0; i < work_.size(); ++i) {
      if (!work_[i].alive) continue;
      if (externOfStep_[i] >= 0) continue;
      for (const Phase &ph : work_[i].k.phases)
        for (const Stmt &s : ph.body.stmts)
          if (s.kind == Stmt::Kind::Load) readBy[s.node].insert(i);
    }
    for (size_t i = 0; i < work_.size(); ++i) {
      Work &w = work_[i];
      if (!w.alive || externOfStep_[i] >= 0) continue;
      std::vector<int32_t> newIndex(w.k.phases.size(), -1);
      std::vector<Phase> kept;
      for (size_t pi = 0; pi < w.k.phases.size(); ++pi) {
        Phase &ph = w.k.phases[pi];
        std::vector<Store> stores;
        for (const Store &s : ph.stores) {
          bool needed = isOutput_[size_t(s.node)] || externReads_[size_t(s.node)] > 0 ||
                        !w.accum.count(s.node);
          for (size_t r : readBy[s.node]) needed = needed || r != i;
          if (needed)
            stores.push_back(s);
          else
            realized_[size_t(s.node)] = false;
        }
        ph.stores = std::move(stores);
        if (ph.stores.empty() && ph.reductions.empty()) continue;
        newIndex[pi] = int32_t(kept.size());
        kept.push_back(std::move(ph));
      }
      for (Phase &ph : kept)
        for (Stmt &s : ph.body.stmts)
          if (s.kind == Stmt::Kind::Accumulator) {
            COIL_CHECK(newIndex[size_t(s.phase)] >= 0) << "accumulator of a dropped phase";
            s.phase = newIndex[size_t(s.phase)];
          }
      w.k.phases = std::move(kept);
    }
  }

  static bool isPlainPointwise(const Work &w) {
    return !w.isReduction && w.k.phases.size() == 1 && w.k.phases[0].vars.empty() &&
           w.k.phases[0].reductions.empty();
  }

  /// Pointwise kernels with equal iteration spaces that read a common buffer and do not
  /// depend on each other merge into one.
  void fuseHorizontal() {
    for (size_t ki = 0; ki < work_.size(); ++ki) {
      Work &K = work_[ki];
      if (!K.alive || externOfStep_[ki] >= 0 || !isPlainPointwise(K)) continue;
      for (size_t ci = ki + 1; ci < work_.size(); ++ci) {
        Work &C = work_[ci];
        if (!C.alive || externOfStep_[ci] >= 0 || !isPlainPointwise(C)) continue;
        if (C.k.ranges.size() != K.k.ranges.size()) continue;
        bool same = true;
        for (size_t d = 0; d < K.k.ranges.size() && same; ++d)
          same = proveEQ(K.k.ranges[d], C.k.ranges[d], p_.symbols);
        if (!same) continue;
        std::map<NodeId, std::vector<const Stmt *>> kl, cl;
        collectLoads(K.k.phases[0].body, kl);
        collectLoads(C.k.phases[0].body, cl);
        bool shares = false, independent = true;
        for (auto &[node, _] : cl) {
          shares = shares || kl.count(node);
          independent = independent && producedAt(node) < long(ki);
        }
        if (!shares || !independent) continue;
        Subst sub;
        for (size_t d = 0; d < K.k.vars.size(); ++d) sub[C.k.vars[d]] = SymInt::symbol(K.k.vars[d]);
        BodyBuilder b(p_, realized_, K.indirectCounter);
        const Phase &kp = K.k.phases[0];
        std::vector<Val> kmap = b.copyAll(kp.body, {});
        const Phase &cp = C.k.phases[0];
        std::vector<Val> cmap = b.copyAll(cp.body, sub);
        Phase np;
        np.body = std::move(b.body);
        for (const Store &s : kp.stores)
          np.stores.push_back({s.node, s.index, kmap[size_t(s.value)]});
        for (const Store &s : cp.stores)
          np.stores.push_back({s.node, substituteAll(s.index, sub), cmap[size_t(s.value)]});
        K.k.phases[0] = std::move(np);
        K.k.fused.insert(K.k.fused.end(), C.k.fused.begin(), C.k.fused.end());
        for (NodeId f : C.k.fused) stepOf_[f] = ki;
        C.alive = false;
      }
    }
  }

  Expected<Schedule> finish() {
    Schedule s;
    s.program = &p_;
    s.realized = realized_;
    int kernelIndex = 0;
    for (size_t i = 0; i < work_.size(); ++i) {
      if (!work_[i].alive) continue;
      if (externOfStep_[i] >= 0) {
        s.steps.push_back(ExternStep{externOfStep_[i]});
        continue;
      }
      Kernel k = std::move(work_[i].k);
      for (Phase &ph : k.phases) removeDeadStatements(ph);
      const loop::Node &first = p_.nodes[size_t(k.fused.front())];
      k.name = "k" + std::to_string(kernelIndex++) + "_" + first.name;
      std::set<NodeId> reads, writes;
      for (const Phase &ph : k.phases) {
        for (const Stmt &st : ph.body.stmts)
          if (st.kind == Stmt::Kind::Load) reads.insert(st.node);
        for (const Store &st : ph.stores) writes.insert(st.node);
      }
      for (NodeId r : reads)
        COIL_CHECK(s.realized[size_t(r)])
            << "kernel " << k.name << " loads unrealized node " << p_.nodes[size_t(r)].name;
      k.reads.assign(reads.begin(), reads.end());
      k.writes.assign(writes.begin(), writes.end());
      std::sort(k.fused.begin(), k.fused.end());
      k.fused.erase(std::unique(k.fused.begin(), k.fused.end()), k.fused.end());
      s.steps.push_back(std::move(k));
    }
    return s;
  }
};

} // namespace

Expected<Schedule> scheduleProgram(LoopProgram &p, const ScheduleOptions &o) {
  Scheduler s(p, o);
  return s.run();
}

std::string fusionReport(const Schedule &s) {
  const LoopProgram &p = *s.program;
  std::ostringstream os;
  auto origins = [&](const std::vector<NodeId> &nodes) {
    std::set<int32_t> g;
    for (NodeId n : nodes)
      for (int32_t o : p.nodes[size_t(n)].origins) g.insert(o);
    std::string out;
    for (int32_t o : g) {
      if (!out.empty()) out += ", ";
      const auto &gn = p.graph->nodes()[size_t(o)];
      out += (gn.name.empty() ? "#" + std::to_string(o) : gn.name) + " (" +
             std::string(opName(gn.op)) + ")";
    }
    return out;
  };
  size_t kernels = 0, externs = 0;
  for (const Step &st : s.steps) {
    if (auto *k = std::get_if<Kernel>(&st)) {
      ++kernels;
      os << "kernel " << k->name << " [";
      for (size_t d = 0; d < k->ranges.size(); ++d) os << (d ? ", " : "") << k->ranges[d].str();
      os << "]";
      for (const Phase &ph : k->phases) {
        os << " | ";
        if (!ph.reductions.empty()) {
          for (size_t r = 0; r < ph.reductions.size(); ++r)
            os << (r ? "+" : "") << loop::reduceKindName(ph.reductions[r].kind);
        } else {
          os << "store";
        }
        if (!ph.ranges.empty()) {
          os << " over [";
          for (size_t d = 0; d < ph.ranges.size(); ++d) os << (d ? ", " : "") << ph.ranges[d].str();
          os << "]";
        }
      }
      if (k->gemm)
        os << "\n  gemm: " << p.nodes[size_t(k->gemm->node)].name << " = "
           << p.nodes[size_t(k->gemm->a)].name << (k->gemm->columnMajorA ? "^T" : "") << " x "
           << p.nodes[size_t(k->gemm->b)].name << (k->gemm->rowMajorB ? "" : "^T") << " [m "
           << k->gemm->m.str() << ", n " << k->gemm->n.str() << ", k " << k->gemm->k.str()
           << "], CUTLASS sm90 with the epilogue " << k->gemm->description;
      os << "\n  nodes: ";
      for (size_t i = 0; i < k->fused.size(); ++i)
        os << (i ? ", " : "") << p.nodes[size_t(k->fused[i])].name;
      os << "\n  from: " << origins(k->fused) << "\n  writes: ";
      for (size_t i = 0; i < k->writes.size(); ++i)
        os << (i ? ", " : "") << p.nodes[size_t(k->writes[i])].name;
      os << "\n";
    } else {
      ++externs;
      const auto &e = std::get<ExternStep>(st);
      const loop::Node &n = p.nodes[size_t(e.node)];
      os << "extern " << n.name << " = " << std::get<loop::ExternNode>(n.kind).function
         << "\n  from: " << origins({e.node}) << "\n";
    }
  }
  size_t realized = 0;
  for (size_t i = 0; i < s.realized.size(); ++i)
    if (s.realized[i] && (p.nodes[i].isPointwise() || p.nodes[i].isReduction())) ++realized;
  os << "summary: " << p.graph->nodes().size() << " graph nodes, " << p.nodes.size()
     << " loop nodes, " << kernels << " kernels, " << externs << " extern calls, " << realized
     << " intermediate buffers\n";
  for (const std::string &n : s.gemmNotes) os << "gemm: " << n << "\n";
  return os.str();
}

} // namespace coil::sched
