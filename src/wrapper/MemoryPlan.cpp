#include "wrapper/MemoryPlan.h"

#include "wrapper/Lines.h"
#include "wrapper/Verify.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

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
    // Planning again starts over (Reuse lines already in the program are kept).
    for (Buffer &b : p_.buffers) b.arenaOffset.reset();
    p_.arenaBytes = 0;
    for (const Line &l : p_.lines)
      if (const auto *b = std::get_if<BindSymbol>(&l)) static_.insert(b->symbol);
    for (const std::string &s : programSymbols(p_)) {
      auto it = o_.hints.find(s);
      SymRange r = p_.symbols.count(s) ? p_.symbols.at(s) : SymRange{};
      int64_t h = it != o_.hints.end() ? it->second : o_.defaultHint;
      hints_[s] = std::max(r.min, std::min(r.max, h)); // inside the range: refutations hold
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
        bool ok = true;
        for (const std::string &s : syms) ok = ok && static_.count(s);
        plannable_[a->buffer] = ok;
      }
      // Reuse lines already in the program extend their block.
      if (const auto *r = std::get_if<Reuse>(&l)) plannable_[r->to] = plannable_[r->from];
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

  /// A chain of blocks stacked on each other: its sum of aligned sizes is a lower bound of the
  /// end of its last block, for every value of the symbols. Sorted group indices.
  using Path = std::vector<int32_t>;

  struct Placed {
    std::vector<Path> paths; ///< offset = max over paths of their sums
    SymInt off, end;
    int64_t offHint = 0, endHint = 0;
  };

  bool overlapsInTime(const Group &a, const Group &b) const {
    for (BufferId x : a.members)
      for (BufferId y : b.members)
        if (life_[x].first <= life_[y].last && life_[y].first <= life_[x].last) return true;
    return false;
  }

  const SymInt &pathSum(const Path &p) {
    auto it = sums_.find(p);
    if (it != sums_.end()) return it->second;
    SymInt s = 0;
    for (int32_t g : p) s = s + aligned_[g];
    return sums_.emplace(p, s).first->second;
  }

  /// Drops paths that another one provably dominates (a subset, or a provably smaller sum) and
  /// merges the rest down to kMaxPaths (the union of two paths bounds both from above).
  void prune(std::vector<Path> &paths) {
    std::sort(paths.begin(), paths.end());
    paths.erase(std::unique(paths.begin(), paths.end()), paths.end());
    { // subsets first: cheap, and most of what there is to drop
      std::vector<bool> drop(paths.size(), false);
      for (size_t i = 0; i < paths.size(); ++i)
        for (size_t j = 0; j < paths.size() && !drop[i]; ++j)
          if (i != j && !drop[j] && paths[j].size() > paths[i].size() &&
              std::includes(paths[j].begin(), paths[j].end(), paths[i].begin(), paths[i].end()))
            drop[i] = true;
      std::vector<Path> kept;
      for (size_t i = 0; i < paths.size(); ++i)
        if (!drop[i]) kept.push_back(std::move(paths[i]));
      paths = std::move(kept);
    }
    for (;;) {
      std::vector<bool> drop(paths.size(), false);
      for (size_t i = 0; i < paths.size(); ++i)
        for (size_t j = 0; j < paths.size() && !drop[i]; ++j)
          if (i != j && !drop[j] && pathLE(paths[i], paths[j])) drop[i] = true;
      std::vector<Path> kept;
      for (size_t i = 0; i < paths.size(); ++i)
        if (!drop[i]) kept.push_back(std::move(paths[i]));
      paths = std::move(kept);
      if (paths.size() <= kMaxPaths) return;
      // Merge the two paths sharing the most blocks.
      size_t bi = 0, bj = 1, best = 0;
      for (size_t i = 0; i < paths.size(); ++i)
        for (size_t j = i + 1; j < paths.size(); ++j) {
          Path common;
          std::set_intersection(paths[i].begin(), paths[i].end(), paths[j].begin(), paths[j].end(),
                                std::back_inserter(common));
          if (common.size() > best) best = common.size(), bi = i, bj = j;
        }
      Path u;
      std::set_union(paths[bi].begin(), paths[bi].end(), paths[bj].begin(), paths[bj].end(),
                     std::back_inserter(u));
      paths.erase(paths.begin() + bj);
      paths[bi] = std::move(u);
    }
  }

  SymInt maxOfPaths(const std::vector<Path> &paths) {
    if (paths.empty()) return 0;
    SymInt m = pathSum(paths[0]);
    for (size_t i = 1; i < paths.size(); ++i) m = max(m, pathSum(paths[i]));
    return m;
  }

  /// Paths ending at the top of the blocks in `below` (each path extended by its block).
  std::vector<Path> pathsAbove(const std::vector<int32_t> &below) {
    std::vector<Path> out;
    // Blocks with the highest ends first, pruning as the set grows (bounded work per block).
    std::vector<int32_t> order = below;
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return placed_[a].endHint > placed_[b].endHint; });
    for (int32_t x : order) {
      for (const Path &q : placed_[x].paths) {
        Path p = q;
        p.insert(std::upper_bound(p.begin(), p.end(), x), x);
        out.push_back(std::move(p));
      }
      if (out.size() > 3 * kMaxPaths) prune(out);
    }
    if (out.empty()) out.push_back({});
    prune(out);
    return out;
  }

  /// Placement: blocks in order of decreasing size (at the hints); each goes to the lowest
  /// position that is free at the hints among those just above a block it meets in time (or 0),
  /// where its offset is the max over the chains of blocks below it, provided it provably ends
  /// below every block above it; the topmost position needs no proof.
  void arena() {
    size_t ng = groups_.size();
    std::vector<int64_t> alignedHint, span;
    for (const Group &g : groups_) {
      aligned_.push_back(align64(g.size));
      auto [cls, fresh] = classIds_.emplace(aligned_.back(), int32_t(classSize_.size()));
      if (fresh) classSize_.push_back(aligned_.back());
      classOf_.push_back(cls->second);
      alignedHint.push_back(hint(aligned_.back()));
      alignedHint_.push_back(alignedHint.back());
      int64_t s = 0;
      for (BufferId m : g.members) s += life_[m].last - life_[m].first + 1;
      span.push_back(s);
    }
    std::vector<int32_t> order(ng);
    for (size_t i = 0; i < ng; ++i) order[i] = int32_t(i);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      if (o_.longestLivedFirst && span[a] != span[b]) return span[a] > span[b];
      if (alignedHint[a] != alignedHint[b]) return alignedHint[a] > alignedHint[b];
      return span[a] > span[b];
    });
    placed_.assign(ng, Placed{});
    std::vector<bool> isPlaced(ng, false);
    std::vector<Path> ends;
    for (int32_t gi : order) {
      int64_t AH = alignedHint[gi];
      std::vector<int32_t> conflicts;
      for (size_t x = 0; x < ng; ++x)
        if (isPlaced[x] && overlapsInTime(groups_[gi], groups_[x])) conflicts.push_back(int32_t(x));
      std::vector<int64_t> cands{0};
      for (int32_t x : conflicts) cands.push_back(placed_[x].endHint);
      std::sort(cands.begin(), cands.end());
      cands.erase(std::unique(cands.begin(), cands.end()), cands.end());
      bool done = false;
      int tries = 0;
      for (size_t ci = 0; ci < cands.size() && !done; ++ci) {
        // Past kMaxTries positions that fit at the hints but fail the proof, go to the top.
        if (tries == kMaxTries) ci = cands.size() - 1;
        int64_t h = cands[ci];
        std::vector<int32_t> below, above;
        bool fits = true;
        for (int32_t x : conflicts) {
          const Placed &pl = placed_[x];
          if (pl.endHint <= h)
            below.push_back(x);
          else if (pl.offHint >= h + AH)
            above.push_back(x);
          else
            fits = false;
        }
        if (!fits) continue;
        std::vector<Path> paths = pathsAbove(below);
        // Every chain below it, plus itself, must provably fit under some chain of each
        // block above it.
        bool ok = true;
        for (size_t xi = 0; xi < above.size() && ok; ++xi)
          for (const Path &p : paths) {
            Path e = p;
            e.insert(std::upper_bound(e.begin(), e.end(), gi), gi);
            bool under = false;
            for (const Path &q : placed_[above[xi]].paths) under = under || pathLE(e, q);
            if (!under) {
              ok = false;
              break;
            }
          }
        if (!ok && ci + 1 < cands.size()) {
          ++tries;
          continue;
        }
        if (!ok) // the top at the hints, yet some block is not provably above: go above all
          paths = pathsAbove(conflicts);
        SymInt off = maxOfPaths(paths);
        SymInt end = off + aligned_[gi];
        placed_[gi] = {paths, off, end, hint(off), hint(end)};
        done = true;
      }
      isPlaced[gi] = true;
      for (BufferId m : groups_[gi].members) p_.buffers[m].arenaOffset = placed_[gi].off;
      std::vector<Path> mine = pathsAbove({gi});
      ends.insert(ends.end(), mine.begin(), mine.end());
      prune(ends);
    }
    p_.arenaBytes = maxOfPaths(ends);
  }

  SymInt maxOf(const SymInt &a, const SymInt &b) {
    if (le(b, a)) return a;
    if (le(a, b)) return b;
    return max(a, b);
  }

  /// Offsets stay small: at most this many chains in the max() of an offset.
  static constexpr size_t kMaxPaths = 6;
  /// Positions tried (that fit at the hints) before a block goes on top of all it meets.
  static constexpr int kMaxTries = 16;

  int64_t pathHint(const Path &p) {
    auto it = pathHints_.find(p);
    if (it != pathHints_.end()) return it->second;
    int64_t h = 0;
    for (int32_t g : p) h += alignedHint_[g];
    return pathHints_.emplace(p, h).first->second;
  }

  /// sum(a) <= sum(b) for every value of the symbols: a subset, or refuted at the hints (the
  /// hints lie in the ranges), or proven.
  bool pathLE(const Path &a, const Path &b) {
    if (a.size() <= b.size() && std::includes(b.begin(), b.end(), a.begin(), a.end())) return true;
    if (pathHint(a) > pathHint(b)) return false;
    auto key = std::make_pair(a, b);
    auto it = pathLE_.find(key);
    if (it != pathLE_.end()) return it->second;
    // sum(b) - sum(a) as a combination of the distinct block sizes.
    std::map<int32_t, int64_t> coef;
    for (int32_t g : b) ++coef[classOf_[g]];
    for (int32_t g : a) --coef[classOf_[g]];
    bool anyPos = false, anyNeg = false;
    std::vector<std::pair<int32_t, int64_t>> diff;
    for (auto [k, c] : coef) {
      anyPos = anyPos || c > 0;
      anyNeg = anyNeg || c < 0;
      if (c != 0) diff.push_back({k, c});
    }
    bool r = !anyNeg;
    if (!r && anyPos) {
      // Many pairs of chains differ by the same combination of sizes: prove each once.
      auto d = diffLE_.find(diff);
      if (d != diffLE_.end()) {
        r = d->second;
      } else {
        SymInt e = 0;
        for (auto [k, c] : diff) e = e + SymInt(c) * classSize_[k];
        r = bounds(e, p_.symbols).min >= 0 || proveLE(SymInt(0), e, p_.symbols);
        diffLE_.emplace(std::move(diff), r);
      }
    }
    pathLE_.emplace(std::move(key), r);
    return r;
  }

  /// a <= b for every value of the symbols in their ranges: structural, then interval bounds
  /// of the canonical difference, then proveLE. Memoized:
  /// placement asks the same questions many times.
  bool le(const SymInt &a, const SymInt &b) {
    if (a == b) return true;
    auto key = std::make_pair(a, b);
    auto it = leCache_.find(key);
    if (it != leCache_.end()) return it->second;
    SymInt d = b - a;
    bool r;
    if (auto c = d.maybeConstant())
      r = *c >= 0;
    else
      r = bounds(d, p_.symbols).min >= 0 || proveLE(a, b, p_.symbols);
    leCache_.emplace(std::move(key), r);
    return r;
  }

  WrapperProgram &p_;
  const MemoryPlanOptions &o_;
  std::set<std::string> static_;
  SymBindings hints_;
  std::vector<Lifetime> life_;
  std::vector<bool> plannable_;
  std::vector<int32_t> groupOf_;
  std::vector<Group> groups_;
  std::vector<SymInt> aligned_;
  std::vector<Placed> placed_;
  struct PairHash {
    size_t operator()(const std::pair<SymInt, SymInt> &p) const {
      return p.first.hash() * 0x9E3779B97F4A7C15ull ^ p.second.hash();
    }
  };
  std::unordered_map<std::pair<SymInt, SymInt>, bool, PairHash> leCache_;
  std::map<Path, SymInt> sums_;
  std::map<Path, int64_t> pathHints_;
  std::map<std::pair<Path, Path>, bool> pathLE_;
  std::map<std::vector<std::pair<int32_t, int64_t>>, bool> diffLE_;
  std::vector<int64_t> alignedHint_;
  std::map<SymInt, int32_t> classIds_; ///< distinct aligned block sizes
  std::vector<SymInt> classSize_;
  std::vector<int32_t> classOf_;
};

} // namespace

namespace {

/// Sample points of the symbols bound from inputs (clamped to their ranges, as hints are).
std::vector<SymBindings> samplePoints(const WrapperProgram &p, const std::vector<int64_t> &values) {
  std::set<std::string> bound;
  for (const Line &l : p.lines)
    if (const auto *b = std::get_if<BindSymbol>(&l)) bound.insert(b->symbol);
  std::vector<SymBindings> points;
  // The diagonal (every symbol at v), then points where the symbols differ (symbol i at
  // values[(k + 2i) % n]).
  size_t n = values.size();
  for (size_t k = 0; k < 2 * n; ++k) {
    SymBindings b;
    size_t i = 0;
    for (const std::string &s : bound) {
      SymRange r = p.symbols.count(s) ? p.symbols.at(s) : SymRange{};
      int64_t v = k < n ? values[k] : values[(k + 2 * i++) % n];
      b[s] = std::max(r.min, std::min(r.max, v));
    }
    if (std::find(points.begin(), points.end(), b) == points.end()) points.push_back(std::move(b));
  }
  return points;
}

/// The worst arena / lower bound ratio of a plan over the sample points.
double worstRatio(const WrapperProgram &p, const std::vector<SymBindings> &points) {
  double worst = 1;
  for (const SymBindings &b : points) {
    auto r = memoryReport(p, b);
    if (r.ok() && r->lowerBound > 0) worst = std::max(worst, r->ratio);
  }
  return worst;
}

} // namespace

Status planMemory(WrapperProgram &p, const MemoryPlanOptions &options) {
  if (!options.arena) return Planner(p, options).run();
  // One symbolic plan serves every value of the symbols, but placement is guided by sample
  // values: plan with several (the given hints first, then every symbol at 1, 16 and 1024),
  // with and without step 1 (reuse fixes blocks before the arena sees them, which can pack
  // worse), and keep the plan whose worst ratio to the lower bound over those sample points is
  // smallest (the first on a tie).
  std::vector<MemoryPlanOptions> variants;
  for (int64_t v : {options.defaultHint, int64_t(1), int64_t(16), int64_t(1024)}) {
    MemoryPlanOptions o = options;
    o.defaultHint = v;
    if (v != options.defaultHint) o.hints.clear();
    if (v != options.defaultHint && !options.hints.empty()) continue; // the caller's hints rule
    variants.push_back(o);
    if (o.reuse) {
      o.reuse = false;
      variants.push_back(o);
    }
  }
  std::vector<SymBindings> points = samplePoints(p, {1, 4, 16, 64, 256, 1024});
  // With several symbols, also placements guided by points where they differ.
  if (options.hints.empty())
    for (const SymBindings &b : samplePoints(p, {1, 16, 1024}))
      if (std::any_of(b.begin(), b.end(),
                      [&](const auto &kv) { return kv.second != b.begin()->second; })) {
        MemoryPlanOptions o = options;
        o.hints = b;
        variants.push_back(o);
        if (o.reuse) {
          o.reuse = false;
          variants.push_back(o);
        }
      }
  for (const auto &[s, v] : options.hints) points.front()[s] = v; // the caller's point
  for (size_t i = 0, n = variants.size(); i < n; ++i) {
    MemoryPlanOptions o = variants[i];
    o.longestLivedFirst = true;
    variants.push_back(o);
  }
  std::optional<WrapperProgram> best;
  double bestScore = 0;
  for (const MemoryPlanOptions &o : variants) {
    WrapperProgram q = p;
    COIL_TRY_STATUS(Planner(q, o).run());
    double score = worstRatio(q, points);
    if (!best || score < bestScore - 1e-9) {
      best = std::move(q);
      bestScore = score;
    }
  }
  p = std::move(*best);
  return okStatus();
}

Expected<MemoryReport> memoryReport(const WrapperProgram &p, const SymBindings &bindings) {
  MemoryReport r;
  COIL_TRY(r.arenaBytes, p.arenaBytes.evaluate(bindings));
  std::vector<Lifetime> life = bufferLifetimes(p);
  std::vector<int64_t> live(p.lines.size() + 1, 0);
  std::vector<bool> ownsStorage(p.buffers.size(), false);
  for (const Line &l : p.lines)
    if (std::holds_alternative<Allocate>(l) || std::holds_alternative<Reuse>(l) ||
        std::holds_alternative<ExternKernelAlloc>(l))
      for (BufferId d : lineEffects(l).defines) ownsStorage[d] = true;
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const Buffer &buf = p.buffers[b];
    if (!buf.arenaOffset) {
      // Intermediates allocated at run time: listed when their size is known here, not part
      // of the arena or its bound. Views own no storage.
      bool owns = ownsStorage[b];
      auto bytes = buf.bytes().evaluate(bindings);
      if (buf.kind == BufferKind::Intermediate && owns && bytes.ok())
        r.rows.push_back({buf.name, *bytes, -1, life[b].first, life[b].last});
      continue;
    }
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
    if (r.offset >= 0)
      std::snprintf(buf, sizeof buf, "%12lld %12lld", (long long)r.bytes, (long long)r.offset);
    else
      std::snprintf(buf, sizeof buf, "%12lld %12s", (long long)r.bytes, "run time");
    std::string name = r.name;
    if (name.size() < 28) name.resize(28, ' ');
    os << name << " " << buf << "  " << r.first << "-" << r.last << "\n";
  }
  return os.str();
}

} // namespace coil::wrapper
