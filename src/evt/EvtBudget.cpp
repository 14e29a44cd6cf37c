// Shared memory of the kernel an epilogue becomes (see EvtBudget.h for the model and its
// sources in CUTLASS).
#include "evt/EvtBudget.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace coil::evt {

namespace {

/// A C++ object's size and alignment.
struct Layout {
  int64_t bytes = 0; ///< 0: an empty class (takes no space in a cute::tuple)
  int64_t align = 1;
};

int64_t roundUp(int64_t v, int64_t a) {
  return (v + a - 1) / a * a;
}

/// cute::tuple<elems...>: the "empty structure optimization" nests non-empty elements as
/// first_/rest_ members, skipping empty ones.
Layout tupleLayout(const std::vector<Layout> &elems) {
  std::vector<Layout> kept;
  for (const Layout &e : elems)
    if (e.bytes > 0) kept.push_back(e);
  Layout rest; // empty
  for (size_t i = kept.size(); i-- > 0;) {
    const Layout &first = kept[i];
    if (rest.bytes == 0) {
      rest = first;
      continue;
    }
    int64_t align = std::max(first.align, rest.align);
    int64_t offset = roundUp(first.bytes, rest.align);
    rest = {roundUp(offset + rest.bytes, align), align};
  }
  return rest;
}

/// A struct of members in order (no empty-class optimization: an empty member takes a byte).
Layout structLayout(const std::vector<Layout> &members) {
  int64_t offset = 0, align = 1;
  for (Layout m : members) {
    if (m.bytes == 0) m = {1, 1};
    offset = roundUp(offset, m.align) + m.bytes;
    align = std::max(align, m.align);
  }
  return {roundUp(std::max<int64_t>(offset, 1), align), align};
}

int64_t elemBytes(DType t) {
  return int64_t(dtypeSize(t));
}

// --- sm90 -----------------------------------------------------------------------------------

constexpr int64_t kSm90Capacity = 232448;     // cutlass::gemm::collective::detail
constexpr int64_t kEpiTile = 128 * 32;        // elements of the 128x32 epilogue tile
constexpr int64_t kStagesC = 4, kStagesD = 2; // for 4 epilogue tiles per 128x128 tile
constexpr int64_t kTileN = 128;

/// The alignment CUTLASS gives an epilogue tile buffer (its swizzle's): N-major (row-major) rows
/// of 32 elements pick the widest swizzle of at most 32 elements' bytes; M-major columns of 128
/// elements always take the 128-byte one.
int64_t swizzleAlign(DType t, bool mMajor) {
  int64_t rowBytes = mMajor ? 128 * elemBytes(t) : 32 * elemBytes(t);
  if (rowBytes >= 128) return 1024; // Swizzle<3,4,3>
  if (rowBytes >= 64) return 512;   // Swizzle<2,4,3>
  if (rowBytes >= 32) return 256;   // Swizzle<1,4,3>
  return 128;
}

bool mMajor(const Node &n) {
  return n.stride.m == 1 && n.stride.n != 1;
}

/// The epilogue tile buffer of `stages` stages of `t`: alignas(swizzle) array_aligned<T, N>.
Layout tileBuffer(DType t, int64_t stages, bool mMaj) {
  int64_t a = swizzleAlign(t, mMaj);
  return {roundUp(stages * kEpiTile * elemBytes(t), a), a};
}

class Sm90Walk {
public:
  Sm90Walk(const Program &p, const VisitorPlan &plan) : p_(p), plan_(plan) {}

  Layout expr(int id) {
    if (int r = plan_.regionOfExit[size_t(id)]; r >= 0) return region(r);
    const Node &n = p_.at(id);
    if (n.operands.empty()) return own(id);
    std::vector<Layout> parts;
    for (int op : n.operands) parts.push_back(expr(op));
    parts.push_back(own(id)); // Sm90TreeVisitor: Sm90VisitorImpl<ChildOps..., NodeOp>
    return tupleLayout(parts);
  }

  std::map<int, int64_t> perNode;

private:
  Layout region(int r) {
    const Region &reg = plan_.regions[size_t(r)];
    std::set<int> members(reg.members.begin(), reg.members.end()), seen;
    std::vector<Layout> ops; // in the emitter's op order
    for (int m : reg.members) {
      for (int op : p_.at(m).operands) {
        if (members.count(op) || seen.count(op)) continue;
        seen.insert(op);
        ops.push_back(expr(op));
      }
      seen.insert(m);
      ops.push_back(own(m));
    }
    return tupleLayout(ops);
  }

  Layout own(int id) {
    const Node &n = p_.at(id);
    Layout l;
    switch (n.kind) {
    case Kind::AuxLoad:
      l = tileBuffer(n.dtype, kStagesC, mMajor(n));
      break;
    case Kind::AuxStore:
      l = tileBuffer(n.dtype, kStagesD, mMajor(n));
      break;
    case Kind::RowBcast: // array_aligned<ElementInput, CTA N> (alignment 16)
      l = {roundUp(kTileN * elemBytes(n.dtype), 16), 16};
      break;
    default:
      break;
    }
    if (l.bytes) perNode[id] += l.bytes;
    return l;
  }

  const Program &p_;
  const VisitorPlan &plan_;
};

/// The node that is the GEMM's source C (the emitter's ElementC), or -1.
int sourceNode(const Program &p, const VisitorPlan &plan) {
  for (int id : plan.topo)
    if (p.at(id).name == "C" && (p.at(id).kind == Kind::Src || p.at(id).kind == Kind::AuxLoad))
      return id;
  return -1;
}

/// The emitter's ElementD.
DType dElement(const Program &p) {
  for (size_t k = 0; k < p.outputs.size(); ++k)
    if (p.outputs[k].name == "D") {
      int s = k < p.outputStores.size() ? p.outputStores[k] : -1;
      if (s >= 0) return p.at(s).dtype;
    }
  return p.dDType;
}

SmemBudget sm90Budget(const Program &p, const VisitorPlan &plan, DType inputs) {
  SmemBudget b;
  int c = sourceNode(p, plan);
  DType d = dElement(p);
  // The collective's buffers (sm90_epilogue_tma_warpspecialized.hpp), C and D row-major.
  Layout collective;
  Layout dBuf = tileBuffer(d, kStagesD, false);
  if (c < 0) {
    collective = dBuf; // union { array<C, 0>; D }
  } else {
    DType ct = p.at(c).dtype;
    bool reuse = elemBytes(ct) == elemBytes(d) && elemBytes(d) > 1;
    Layout cBuf = tileBuffer(ct, kStagesC, false);
    if (reuse) { // union of C and D (D with StagesC stages), both at the larger alignment
      Layout dReuse = tileBuffer(d, kStagesC, false);
      int64_t a = std::max(cBuf.align, dReuse.align);
      collective = {roundUp(std::max(cBuf.bytes, dReuse.bytes), a), a};
    } else {
      collective = structLayout({cBuf, dBuf});
    }
  }
  Sm90Walk walk(p, plan);
  Layout fusion = walk.expr(p.root);
  Layout tensors = structLayout({collective, fusion});
  Layout pipeline = {2 * kStagesC * 8, 8}; // PipelineTransactionAsync<StagesC> barriers
  Layout storage = structLayout({tensors, pipeline});
  b.collectiveBytes = collective.bytes;
  b.epilogueBytes = storage.bytes;
  for (auto [id, bytes] : walk.perNode) b.nodes.emplace_back(id, bytes);
  // The mainloop (sm90_common.inl compute_stage_count_or_override, StageCountAutoCarveout).
  int64_t k = inputs == DType::F32 ? 32 : 64;
  int64_t ab = 2 * 128 * k * elemBytes(inputs);
  b.stageBytes = roundUp(ab, 128) + 16;
  b.capacityBytes = kSm90Capacity;
  b.stages = int((kSm90Capacity - roundUp(b.epilogueBytes, 128)) / b.stageBytes);
  b.totalBytes = b.epilogueBytes + std::max(b.stages, 0) * b.stageBytes;
  return b;
}

// --- sm80 -----------------------------------------------------------------------------------

constexpr int64_t kSm80Capacity = 166912; // the most shared memory an sm_80 block may opt into
/// EpilogueWithVisitorCallbacks::SharedStorage: the accumulator staging of the 128x128 tile with
/// 64x64 warps (one stage), then the visitors' storage (an empty tuple: 16 bytes with padding).
constexpr int64_t kSm80EpilogueBaseBytes = 8704;
/// VisitorRowReduction: its cross-warp buffer, 1024 f32 values for this thread map.
constexpr int64_t kSm80RowReductionValues = 1024;

SmemBudget sm80Budget(const Program &p, const VisitorPlan &plan, DType inputs) {
  SmemBudget b;
  int64_t k = inputs == DType::F32 ? 16 : 32;
  b.stageBytes = 2 * 128 * k * elemBytes(inputs);
  b.stages = 3;
  int64_t mainloop = b.stages * b.stageBytes;
  // The epilogue: the 2.x visitor epilogue's own storage and its visitors' (row reductions).
  int64_t rowRedBytes = 0;
  for (int id : plan.topo)
    if (p.at(id).kind == Kind::RowRed) {
      int64_t bytes = kSm80RowReductionValues * 4; // in float (the emitter's reduction type)
      b.nodes.emplace_back(id, bytes);
      rowRedBytes += bytes;
    }
  b.epilogueBytes = kSm80EpilogueBaseBytes + (rowRedBytes ? rowRedBytes : 16);
  b.totalBytes = std::max(mainloop, b.epilogueBytes);
  b.capacityBytes = kSm80Capacity;
  return b;
}

} // namespace

bool SmemBudget::fits() const {
  return stages >= 2 && totalBytes <= capacityBytes;
}

SmemBudget smemBudget(const Program &p, const VisitorPlan &plan, Arch arch, DType inputs) {
  SmemBudget b = arch == Arch::Sm90 ? sm90Budget(p, plan, inputs) : sm80Budget(p, plan, inputs);
  std::stable_sort(b.nodes.begin(), b.nodes.end(),
                   [](const auto &x, const auto &y) { return x.second > y.second; });
  return b;
}

Status checkSmemBudget(const Program &p, const VisitorPlan &plan, Arch arch, DType inputs) {
  SmemBudget b = smemBudget(p, plan, arch, inputs);
  if (b.fits()) return okStatus();
  std::ostringstream os;
  if (arch == Arch::Sm90)
    os << "the epilogue needs " << b.epilogueBytes << " bytes of shared memory (the collective's C "
       << "and D buffers " << b.collectiveBytes << "), which leaves the GEMM's mainloop "
       << b.stages << " stage(s) of " << b.stageBytes << " bytes in the " << b.capacityBytes
       << " bytes of an sm90 SM; CUTLASS needs at least 2 (shared-memory budget)";
  else
    os << "the kernel needs " << b.totalBytes << " bytes of shared memory, more than the "
       << b.capacityBytes << " an sm80 block may use (shared-memory budget)";
  if (!b.nodes.empty()) {
    os << "; the largest buffers: ";
    for (size_t i = 0; i < b.nodes.size() && i < 4; ++i) {
      const Node &n = p.at(b.nodes[i].first);
      std::string name = !n.name.empty()  ? n.name
                         : !n.var.empty() ? n.var
                                          : "%" + std::to_string(b.nodes[i].first);
      os << (i ? ", " : "") << kindName(n.kind) << " '" << name << "' (" << dtypeName(n.dtype)
         << ", " << b.nodes[i].second << " bytes)";
    }
    os << "; return fewer outputs, or narrower ones (bf16 instead of f32)";
  }
  return Error::user(os.str(), SourceLoc{p.file, "", "", 0, 0});
}

} // namespace coil::evt
