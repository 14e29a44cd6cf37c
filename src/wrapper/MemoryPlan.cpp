#include "wrapper/MemoryPlan.h"

#include "wrapper/Lines.h"
#include "wrapper/Verify.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>

namespace coil::wrapper {

std::vector<Lifetime> bufferLifetimes(const WrapperProgram &p) {
  size_t n = p.buffers.size();
  std::vector<Lifetime> life(n);
  std::vector<BufferId> root(n);
  for (size_t b = 0; b < n; ++b) root[b] = BufferId(b);
  std::vector<int32_t> allocDef = externAllocDefs(p);
  auto touch = [&](BufferId b, int32_t i) {
    if (life[b].first < 0) life[b].first = i;
    life[b].last = std::max(life[b].last, i);
  };
  for (size_t li = 0; li < p.lines.size(); ++li) {
    int32_t i = int32_t(li);
    const Line &line = p.lines[li];
    LineEffects e = lineEffects(line);
    for (BufferId d : e.defines) touch(d, i);
    if (const auto *r = std::get_if<Reinterpret>(&line)) root[r->buffer] = root[r->base];
    if (const auto *m = std::get_if<MultiOutput>(&line); m && allocDef[m->source] >= 0) {
      const auto &ext = std::get<ExternKernelAlloc>(p.lines[allocDef[m->source]]);
      int32_t k = 0;
      for (const ExternArg &a : ext.args)
        if (a.kind == ExternArg::Kind::Output && k++ == m->index) root[m->buffer] = root[a.buffer];
    }
    for (BufferId u : e.uses) {
      touch(u, i);
      if (root[u] != u) touch(root[u], i);
    }
  }
  return life;
}

namespace {

SymInt align64(const SymInt &bytes) {
  if (auto c = bytes.maybeConstant()) return SymInt((*c + 63) / 64 * 64);
  return ceilDiv(bytes, 64) * 64;
}

struct Group {
  SymInt size;      ///< the block's bytes (its first member's)
  int64_t hint = 0; ///< size at the hints
  std::vector<BufferId> members;
  BufferId holder = -1; ///< the member owning the storage now
};

class Planner {
public:
  Planner(WrapperProgram &p, const MemoryPlanOptions &o) : p_(p), o_(o) {}

  Status run() {
    COIL_TRY_STATUS(verifyWrapper(p_));
    for (const Line &l : p_.lines)
      if (const auto *b = std::get_if<BindSymbol>(&l)) static_.insert(b->symbol);
    for (const std::string &s : programSymbols(p_)) {
      auto it = o_.hints.find(s);
      SymRange r = p_.symbols.count(s) ? p_.symbols.at(s) : SymRange{};
      hints_[s] =
          it != o_.hints.end() ? it->second : std::max(r.min, std::min(r.max, o_.defaultHint));
    }
    life_ = bufferLifetimes(p_);
    size_t n = p_.buffers.size();
    plannable_.assign(n, false);
    groupOf_.assign(n, -1);
    for (const Line &l : p_.lines) {
      if (const auto *a = std::get_if<Allocate>(&l)) {
        const Buffer &b = p_.buffers[a->buffer];
        std::set<std::string> syms;
        b.bytes().collectSymbols(syms);
        bool ok = !b.arenaOffset;
        for (const std::string &s : syms) ok = ok && static_.count(s);
        plannable_[a->buffer] = ok;
      }
      // Reuse lines already in the program extend their block.
      if (const auto *r = std::get_if<Reuse>(&l))
        plannable_[r->to] = plannable_[r->from] && !p_.buffers[r->to].arenaOffset;
    }
    reuse();
    if (o_.arena) arena();
    for (Line &l : p_.lines)
      if (const auto *f = std::get_if<FreeIfNotReused>(&l)) l = Free{f->buffer};
    return verifyWrapper(p_);
  }

private:
  int64_t hint(const SymInt &e) const {
    auto v = e.evaluate(hints_);
    return v ? *v : (int64_t(1) << 62);
  }

  void reuse() {
    size_t nLines = p_.lines.size();
    // Live bytes per line at the hints, for the peak guard.
    std::vector<int64_t> live(nLines + 1, 0);
    for (size_t b = 0; b < p_.buffers.size(); ++b)
      if (plannable_[b] && life_[b].first >= 0)
        for (int32_t i = life_[b].first; i <= life_[b].last; ++i)
          live[i] += hint(p_.buffers[b].bytes());
    int64_t peak = *std::max_element(live.begin(), live.end());
    std::set<size_t> dropLines;
    std::vector<BufferId> freeLinesOf;
    for (size_t li = 0; li < nLines; ++li) {
      Line &line = p_.lines[li];
      if (const auto *r = std::get_if<Reuse>(&line)) {
        if (plannable_[r->to] && groupOf_[r->from] >= 0) {
          Group &g = groups_[groupOf_[r->from]];
          g.members.push_back(r->to);
          g.holder = r->to;
          groupOf_[r->to] = groupOf_[r->from];
        }
        continue;
      }
      const auto *a = std::get_if<Allocate>(&line);
      if (!a || !plannable_[a->buffer]) continue;
      BufferId to = a->buffer;
      SymInt bytes = p_.buffers[to].bytes();
      int64_t h = hint(bytes);
      int32_t best = -1;
      int64_t bestWaste = 0;
      if (o_.reuse) {
        Lifetime lt = life_[to];
        int64_t maxLive = 0;
        for (int32_t i = lt.first; i <= lt.last; ++i) maxLive = std::max(maxLive, live[i]);
        for (size_t gi = 0; gi < groups_.size(); ++gi) {
          const Group &g = groups_[gi];
          if (life_[g.holder].last >= int32_t(li)) continue; // still live
          if (!proveLE(bytes, g.size, p_.symbols)) continue;
          int64_t waste = std::max<int64_t>(0, g.hint - h);
          bool equal = proveEQ(bytes, g.size, p_.symbols);
          if (!equal && waste > 0 && maxLive + waste > peak) continue;
          // Least waste first; among equals the most recently freed block.
          if (best < 0 || waste < bestWaste ||
              (waste == bestWaste && life_[g.holder].last > life_[groups_[best].holder].last)) {
            best = int32_t(gi);
            bestWaste = waste;
          }
        }
      }
      if (best >= 0) {
        Group &g = groups_[best];
        for (size_t lj = 0; lj < nLines; ++lj) {
          const Line &fl = p_.lines[lj];
          if ((std::holds_alternative<Free>(fl) && std::get<Free>(fl).buffer == g.holder) ||
              (std::holds_alternative<FreeIfNotReused>(fl) &&
               std::get<FreeIfNotReused>(fl).buffer == g.holder))
            dropLines.insert(lj);
        }
        line = Reuse{g.holder, to};
        g.members.push_back(to);
        g.holder = to;
        groupOf_[to] = best;
        for (int32_t i = life_[to].first; i <= life_[to].last; ++i) live[i] += bestWaste;
        continue;
      }
      Group g;
      g.size = bytes;
      g.hint = h;
      g.members = {to};
      g.holder = to;
      groupOf_[to] = int32_t(groups_.size());
      groups_.push_back(std::move(g));
    }
    if (dropLines.empty()) return;
    std::vector<Line> kept;
    for (size_t li = 0; li < nLines; ++li)
      if (!dropLines.count(li)) kept.push_back(std::move(p_.lines[li]));
    p_.lines = std::move(kept);
    life_ = bufferLifetimes(p_);
  }

  struct Placed {
    int32_t group;
    SymInt off, end;
    int64_t offHint, endHint;
  };

  bool overlapsInTime(const Group &a, const Group &b) const {
    for (BufferId x : a.members)
      for (BufferId y : b.members)
        if (life_[x].first <= life_[y].last && life_[y].first <= life_[x].last) return true;
    return false;
  }

  void arena() {
    std::vector<SymInt> aligned;
    std::vector<int64_t> alignedHint, span;
    for (const Group &g : groups_) {
      aligned.push_back(align64(g.size));
      alignedHint.push_back(hint(aligned.back()));
      int64_t s = 0;
      for (BufferId m : g.members) s += life_[m].last - life_[m].first + 1;
      span.push_back(s);
    }
    std::vector<int32_t> order(groups_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = int32_t(i);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      if (alignedHint[a] != alignedHint[b]) return alignedHint[a] > alignedHint[b];
      return span[a] > span[b];
    });
    std::vector<Placed> placed;
    SymInt total = 0;
    for (int32_t gi : order) {
      const SymInt &A = aligned[gi];
      int64_t AH = alignedHint[gi];
      std::vector<const Placed *> conflicts;
      for (const Placed &pl : placed)
        if (overlapsInTime(groups_[gi], groups_[pl.group])) conflicts.push_back(&pl);
      std::vector<std::pair<int64_t, SymInt>> cands{{0, SymInt(0)}};
      for (const Placed *c : conflicts) cands.push_back({c->endHint, c->end});
      std::stable_sort(cands.begin(), cands.end(),
                       [](const auto &a, const auto &b) { return a.first < b.first; });
      std::optional<SymInt> chosen;
      for (size_t ci = 0; ci < cands.size() && !chosen; ++ci) {
        if (ci > 0 && cands[ci].second == cands[ci - 1].second) continue;
        const auto &[cH, c] = cands[ci];
        bool ok = true;
        for (const Placed *x : conflicts)
          if (AH > 0 && x->endHint > x->offHint && cH < x->endHint && x->offHint < cH + AH)
            ok = false;
        if (!ok) continue;
        SymInt cEnd = c + A;
        for (const Placed *x : conflicts)
          if (!proveLE(cEnd, x->off, p_.symbols) && !proveLE(x->end, c, p_.symbols)) {
            ok = false;
            break;
          }
        if (ok) chosen = c;
      }
      if (!chosen) {
        SymInt top = 0;
        for (const Placed *x : conflicts) top = maxOf(top, x->end);
        chosen = top;
      }
      SymInt end = *chosen + A;
      placed.push_back({gi, *chosen, end, hint(*chosen), hint(end)});
      total = maxOf(total, end);
      for (BufferId m : groups_[gi].members) p_.buffers[m].arenaOffset = *chosen;
    }
    p_.arenaBytes = total;
  }

  SymInt maxOf(const SymInt &a, const SymInt &b) const {
    if (proveLE(b, a, p_.symbols)) return a;
    if (proveLE(a, b, p_.symbols)) return b;
    return max(a, b);
  }

  WrapperProgram &p_;
  const MemoryPlanOptions &o_;
  std::set<std::string> static_;
  SymBindings hints_;
  std::vector<Lifetime> life_;
  std::vector<bool> plannable_;
  std::vector<int32_t> groupOf_;
  std::vector<Group> groups_;
};

} // namespace

Status planMemory(WrapperProgram &p, const MemoryPlanOptions &options) {
  return Planner(p, options).run();
}

Expected<MemoryReport> memoryReport(const WrapperProgram &p, const SymBindings &bindings) {
  MemoryReport r;
  COIL_TRY(r.arenaBytes, p.arenaBytes.evaluate(bindings));
  std::vector<Lifetime> life = bufferLifetimes(p);
  std::vector<int64_t> live(p.lines.size() + 1, 0);
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const Buffer &buf = p.buffers[b];
    if (!buf.arenaOffset) continue;
    MemoryReport::Row row;
    row.name = buf.name;
    COIL_TRY(row.bytes, buf.bytes().evaluate(bindings));
    COIL_TRY(row.offset, buf.arenaOffset->evaluate(bindings));
    row.first = life[b].first;
    row.last = life[b].last;
    for (int32_t i = std::max(row.first, 0); i <= row.last; ++i) live[i] += row.bytes;
    r.rows.push_back(std::move(row));
  }
  r.lowerBound = *std::max_element(live.begin(), live.end());
  r.ratio = r.lowerBound > 0 ? double(r.arenaBytes) / double(r.lowerBound)
                             : (r.arenaBytes > 0 ? double(r.arenaBytes) : 1.0);
  return r;
}

std::string MemoryReport::str() const {
  std::ostringstream os;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", ratio);
  os << "arena bytes: " << arenaBytes << "\nlower bound: " << lowerBound
     << " (most bytes of intermediates live at one line)\nratio: " << buf << "\n";
  os << "buffer                           bytes       offset  lines\n";
  for (const Row &r : rows) {
    std::snprintf(buf, sizeof buf, "%12lld %12lld", (long long)r.bytes, (long long)r.offset);
    std::string name = r.name;
    if (name.size() < 28) name.resize(28, ' ');
    os << name << " " << buf << "  " << r.first << "-" << r.last << "\n";
  }
  return os.str();
}

} // namespace coil::wrapper
