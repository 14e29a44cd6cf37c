// CUDA kernel codegen. Kernel shapes and their configs (config 0 is the heuristic best):
//  - pointwise kernels (one phase, no inner vars, no reductions): a 1-D grid-stride loop over the
//    flattened outer space, `block` threads, `ept` elements (or vectors) per thread and step.
//    When every access is the flat index (or independent of the outer point), the body runs on
//    flat indices; when the accesses are contiguous along the last dim instead (broadcasts), on
//    groups of that dim. Either way a 16-byte vector path (coil_vec) exists when the launcher
//    finds the buffers aligned (and the last extent a multiple of the width), with a scalar
//    path otherwise. Index decomposition divides in 32 bits when the space allows.
//  - other kernels: `threads_per_row` threads per outer point (1, a warp, or a block), rows
//    strided over the grid; each phase strides its flattened inner space over the row's threads
//    (16-byte vectors over contiguous aligned runs of a constant extent, runs several phases
//    load kept in registers); reductions fold per thread, then through warp shuffles and, for a
//    block per row, shared memory, leaving every thread with the row's result (Accumulator).
// Scalar statements print through codegen/KernelEmitter, as on the CPU.
#include "codegen/cuda/CudaCodegen.h"

#include "codegen/CSource.h"
#include "codegen/KernelEmitter.h"
#include "support/DType.h"
#include "support/Check.h"

#include <algorithm>
#include <functional>
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

namespace {

std::string replaceAll(std::string s, const std::string &from, const std::string &to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
  return s;
}

/// Index expressions in device code: std::min / std::max are host-only constexpr functions.
std::string deviceIndex(std::string s) {
  s = replaceAll(std::move(s), "std::min<int64_t>(", "coil_imin(");
  return replaceAll(std::move(s), "std::max<int64_t>(", "coil_imax(");
}

/// One launch configuration. Pointwise kernels: `block` threads, `ept` (vector) elements per
/// thread and grid step, `vec` elements per 16-byte access (1: no vector path). Other kernels:
/// `tpr` threads per outer point (1, 32, or a multiple of 32 up to 1024, then one point per
/// block), `rows` outer points per block.
struct Config {
  std::string name;
  int64_t block = 256, ept = 1, vec = 1, tpr = 1, rows = 1;
  /// Split reduction: phase 0 of each outer point is split over several blocks (partials in
  /// the workspace), a second kernel combines them and runs the later phases.
  bool split = false;
};

class CudaEmitter : KernelEmitterBase {
public:
  CudaEmitter(const sched::Kernel &k, const loop::LoopProgram &p, const CudaCodegenOptions &o)
      : KernelEmitterBase(k, p, {"v", "n", "acc", "red", "vec", "t", "j", "rc"},
                          {"f",       "t",       "g",     "e",         "k",        "m",
                           "u",       "xb",      "base",  "row",       "lane",     "total",
                           "grid",    "args",    "ctx",   "nvec",      "warp",     "inner",
                           "which",   "rows",    "block", "threadIdx", "blockIdx", "blockDim",
                           "gridDim", "warpSize"},
                          "cuda codegen: "),
        o_(o) {
    cudaMath_ = true;
  }

  Expected<CudaKernelSource> run();

private:
  std::string dcpp(const SymInt &e) const { return deviceIndex(cpp(e)); }
  std::string offsetText(NodeId node, const std::vector<SymInt> &idx) const;
  Status emitBody(CodeWriter &w, const Body &b, const std::vector<bool> &live,
                  std::vector<std::string> &valName, const LoadFn &load);
  std::string storeText(const sched::Store &s, const Body &b,
                        const std::vector<std::string> &valName, const std::string &target) const;
  std::string deviceParams() const;
  std::string hostParams() const;
  void emitExtents(CodeWriter &w, bool device) const;
  /// `narrow`: divide in 32 bits when the space has at most 2^32 points (64-bit division is
  /// a long instruction sequence on the GPU).
  void emitDecompose(CodeWriter &w, const std::string &flat, bool narrow = false,
                     const std::string &lastName = "") const;

  // pointwise
  bool planFlat(const std::vector<bool> &live);
  Status emitPointwise(CodeWriter &w, const Config &c, const std::vector<bool> &live);
  // rows
  Status emitRows(CodeWriter &w, const Config &c);
  Status emitPhase(CodeWriter &w, const Config &c, size_t pi);
  /// A phase over one inner var of constant extent whose accesses that move with it are all
  /// contiguous runs of aligned vectors: loads and stores of `width` elements at a time.
  struct RowVec {
    int64_t width = 1, extent = 0;
    using Key = std::pair<NodeId, std::string>; ///< node, offset of the run's start (C text)
    std::map<Key, bool> loads, stores;
    std::map<const void *, Key> loadKey, storeKey;
  };
  std::optional<RowVec> planRowVec(size_t pi, const std::vector<bool> &live) const;
  /// The vector plan of phase `ph` along loop variable `var` (C name), any extent.
  std::optional<RowVec> planVec(const sched::Phase &ph, const std::string &var,
                                const std::vector<bool> &live) const;
  /// Pointwise kernels that are not flat: vectors along the last outer dim (when its extent is
  /// a multiple of the width, checked by the launcher).
  std::optional<RowVec> lastVec_;
  /// Pointwise kernels that read along another outer dim than they write (a transposing bias
  /// add): each thread takes `width` consecutive points of outer dim `dim` (a constant extent, a
  /// multiple of the width) at one point of the others, the last dim fastest across threads (the
  /// stores stay coalesced); the loads contiguous along `dim` (`loads`, at their first point) are
  /// 16-byte vectors, the rest scalar.
  struct DimVec {
    size_t dim = 0;
    int64_t width = 1, extent = 0;
    std::map<const void *, int> loadIndex; ///< vector loads: Load stmt -> vector number
    std::vector<const Stmt *> loads;       ///< one Load stmt per vector (its address)
  };
  std::optional<DimVec> dimVec_;
  std::optional<DimVec> planDimVec(const std::vector<bool> &live) const;
  /// Persistent rows: runs that several vector phases load stay in registers (`rc<i>[k]`),
  /// filled by the first phase that loads them. Per config.
  std::map<RowVec::Key, std::string> rowCache_;
  std::set<RowVec::Key> rowCacheFilled_;
  /// Row kernels with vector phases emit their row loop twice, under one test of the buffers'
  /// alignment (`coil_rowvec_ok`): 1 while emitting the aligned copy (vector phases only), 0
  /// the unaligned copy (element by element). A test per phase inside the loop would keep NVCC
  /// from holding the persistent row in registers across the phases (softmax: 3.0 vs 3.5 TB/s).
  int vecPath_ = 0;
  /// Set by emitRows: the config's kernel asks for 2048 / block threads' worth of blocks per SM
  /// (__launch_bounds__ minimum), its row being small and held in registers.
  bool fullOccupancy_ = false;

  const CudaCodegenOptions &o_;
  bool pointwise_ = false;
  bool flat_ = false;          ///< pointwise, every access at the flat index or outer-independent
  int64_t vecWidth_ = 1;       ///< elements per vector access of the flat path (1: none)
  std::set<NodeId> flatNodes_; ///< buffers accessed at the flat index
  std::map<const void *, bool> flatAccess_; ///< per Load stmt / Store: at the flat index?
  std::string adaptiveLaunch_; ///< launcher lines of an adaptive config 0 (row kernels)
  bool splittable_ = false;    ///< phase 0 only reduces: a split config exists
  int splitIndex_ = -1, blk1024Index_ = -1;
  std::string splitInner_; ///< host text of phase 0's inner size
  /// Split reductions: 0 off, 1 the partial kernel (phase 0 over a slice), 2 the combining
  /// kernel (phase 0 folds the slices' partials).
  int splitMode_ = 0;
  /// Workspace arrays of phase 0's partial states: (C name, C type), in layout order.
  std::vector<std::pair<std::string, std::string>> splitArrays() const;
  void emitWorkspace(CodeWriter &w) const;
};

std::string CudaEmitter::offsetText(NodeId node, const std::vector<SymInt> &idx) const {
  std::vector<SymInt> ridx, shape;
  for (const SymInt &e : idx) ridx.push_back(renamed(e));
  for (const SymInt &d : p_.nodes[size_t(node)].shape) shape.push_back(renamed(d));
  return deviceIndex(simplify(linearIndex(shape, ridx), ranges_).toCpp(ranges_));
}

Status CudaEmitter::emitBody(CodeWriter &w, const Body &b, const std::vector<bool> &live,
                             std::vector<std::string> &valName, const LoadFn &load) {
  return emitStatements(w, b, live, valName, load, [&](const SymInt &e) { return dcpp(e); });
}

std::string CudaEmitter::storeText(const sched::Store &s, const Body &b,
                                   const std::vector<std::string> &valName,
                                   const std::string &target) const {
  const Stmt &v = b.stmts[size_t(s.value)];
  DType nd = p_.nodes[size_t(s.node)].dtype;
  // A value rounded from f32 to the stored f16/bf16 type: store the rounding of the f32 value
  // (the same bits; the compiler cannot see through the conversions' inline asm).
  if (v.kind == Stmt::Kind::Cast && v.dtype == nd && (nd == DType::BF16 || nd == DType::F16) &&
      b.stmts[size_t(v.args[0])].dtype == DType::F32 && !valName[size_t(v.args[0])].empty())
    return target + " = " + storeConv(valName[size_t(v.args[0])], DType::F32, nd) + ";";
  return target + " = " + storeConv(valName[size_t(s.value)], v.dtype, nd) + ";";
}

std::string CudaEmitter::deviceParams() const {
  std::string s;
  for (NodeId n : buffers_) {
    if (!s.empty()) s += ", ";
    bool w = writeSet_.count(n) != 0;
    bool r = !(w && readSet_.count(n)); // a buffer both read and written may alias itself
    s += std::string(w ? "" : "const ") + cStorageType(p_.nodes[size_t(n)].dtype) + " *" +
         (r ? "__restrict__ " : "") + bufName_.at(n);
  }
  for (const std::string &sym : sizeSyms_) {
    if (!s.empty()) s += ", ";
    s += "int64_t " + cname_.at(sym);
  }
  return s;
}

std::string CudaEmitter::hostParams() const {
  std::string s = "const coil_cuda_ctx *ctx";
  for (NodeId n : buffers_)
    s += std::string(", ") + (writeSet_.count(n) ? "" : "const ") +
         cStorageType(p_.nodes[size_t(n)].dtype) + " *" + bufName_.at(n);
  for (const std::string &sym : sizeSyms_) s += ", int64_t " + cname_.at(sym);
  return s;
}

/// `const int64_t n<d> = extent;` per outer dim and `total`, their product.
void CudaEmitter::emitExtents(CodeWriter &w, bool device) const {
  std::string total;
  for (size_t d = 0; d < k_.vars.size(); ++d) {
    std::string e = device ? dcpp(k_.ranges[d]) : cpp(k_.ranges[d]);
    w.line(std::string(device ? "[[maybe_unused]] " : "") + "const int64_t " + extent_[d] + " = " +
           e + ";");
    total += (total.empty() ? "" : " * ") + extent_[d];
  }
  w.line("const int64_t total = " + (total.empty() ? std::string("1") : total) + ";");
}

/// The outer indices of flat index `flat` (row-major).
void CudaEmitter::emitDecompose(CodeWriter &w, const std::string &flat, bool narrow,
                                const std::string &lastName) const {
  size_t rank = k_.vars.size();
  auto name = [&](size_t d) {
    return d + 1 == rank && !lastName.empty() ? lastName : cname_.at(k_.vars[d]);
  };
  if (rank == 0) return;
  if (rank == 1) {
    w.line("[[maybe_unused]] const int64_t " + name(0) + " = " + flat + ";");
    return;
  }
  if (narrow) {
    std::string decl;
    for (size_t d = 0; d < rank; ++d) decl += (d ? ", " : "") + name(d);
    w.line("[[maybe_unused]] int64_t " + decl + ";");
    w.open("if (total <= 4294967295LL)");
    w.line("uint32_t t = uint32_t(" + flat + ");");
    for (size_t d = rank; d-- > 1;) {
      w.line(name(d) + " = t % uint32_t(" + extent_[d] + ");");
      w.line("t /= uint32_t(" + extent_[d] + ");");
    }
    w.line(name(0) + " = t;");
    w.close();
    w.open("else");
    w.line("int64_t t = " + flat + ";");
    for (size_t d = rank; d-- > 1;) {
      w.line(name(d) + " = t % " + extent_[d] + ";");
      w.line("t /= " + extent_[d] + ";");
    }
    w.line(name(0) + " = t;");
    w.close();
    return;
  }
  w.line("int64_t t = " + flat + ";");
  for (size_t d = rank; d-- > 1;) {
    w.line("[[maybe_unused]] const int64_t " + name(d) + " = t % " + extent_[d] + ";");
    w.line("t /= " + extent_[d] + ";");
  }
  w.line("[[maybe_unused]] const int64_t " + name(0) + " = t;");
}

// ---------------------------------------------------------------------------------- pointwise

/// Whether every access of the pointwise kernel is either the row-major flat index of the outer
/// space or independent of the outer point (then the body runs on flat indices, without index
/// decomposition, and may use 16-byte vector accesses).
bool CudaEmitter::planFlat(const std::vector<bool> &live) {
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
  // 0: not flat; 1: at the flat index; 2: independent of the outer point.
  auto kind = [&](NodeId node, const std::vector<SymInt> &idx) {
    std::vector<SymInt> ridx, shape;
    for (const SymInt &e : idx) ridx.push_back(renamed(e));
    for (const SymInt &d : p_.nodes[size_t(node)].shape) shape.push_back(renamed(d));
    SymInt lin = simplify(linearIndex(shape, ridx), ranges_);
    if (lin == flat) return 1;
    return usesOuter(lin) ? 0 : 2;
  };
  int64_t maxSize = 1;
  for (size_t i = 0; i < ph.body.stmts.size(); ++i) {
    const Stmt &s = ph.body.stmts[i];
    if (!live[i]) continue;
    if (s.kind == Stmt::Kind::Index && usesOuter(renamed(s.expr))) return false;
    if (s.kind == Stmt::Kind::Load) {
      int kd = kind(s.node, s.index);
      if (kd == 0) return false;
      flatAccess_[&s] = kd == 1;
      if (kd == 1) {
        flatNodes_.insert(s.node);
        maxSize = std::max<int64_t>(maxSize, dtypeSize(s.dtype));
      }
    }
  }
  bool inPlace = false;
  for (const sched::Store &st : ph.stores) {
    if (kind(st.node, st.index) != 1) return false;
    flatAccess_[&st] = true;
    flatNodes_.insert(st.node);
    maxSize = std::max<int64_t>(maxSize, dtypeSize(p_.nodes[size_t(st.node)].dtype));
    if (readSet_.count(st.node)) inPlace = true;
  }
  // A buffer both read and written: its reads need not be at the flat index; stay scalar.
  vecWidth_ = inPlace ? 1 : std::max<int64_t>(1, 16 / maxSize);
  return true;
}

std::optional<CudaEmitter::DimVec> CudaEmitter::planDimVec(const std::vector<bool> &live) const {
  const sched::Phase &ph = k_.phases[0];
  size_t rank = k_.vars.size();
  std::set<std::string> indirect;
  for (const std::string &sym : indirectSyms_) indirect.insert(cname_.at(sym));
  auto linear = [&](NodeId node, const std::vector<SymInt> &idx) {
    std::vector<SymInt> ridx, shape;
    for (const SymInt &e : idx) ridx.push_back(renamed(e));
    for (const SymInt &d : p_.nodes[size_t(node)].shape) shape.push_back(renamed(d));
    return simplify(linearIndex(shape, ridx), ranges_);
  };
  auto coefIn = [&](const SymInt &lin, const std::string &var) -> std::optional<Affine> {
    std::set<std::string> syms;
    lin.collectSymbols(syms);
    for (const std::string &sym : syms)
      if (indirect.count(sym)) return std::nullopt;
    auto a = affineIn(lin, var);
    if (!a) return std::nullopt;
    return Affine{simplify(a->rest, ranges_), simplify(a->coef, ranges_)};
  };
  // Every store contiguous along the last dim (coalesced across threads), not read back.
  const std::string &last = cname_.at(k_.vars.back());
  for (const sched::Store &st : ph.stores) {
    auto a = coefIn(linear(st.node, st.index), last);
    if (!a || !(a->coef == SymInt(1)) || readSet_.count(st.node)) return std::nullopt;
  }
  for (size_t d = rank - 1; d-- > 0;) {
    auto extent = simplify(renamed(k_.ranges[d]), ranges_).maybeConstant();
    if (!extent || *extent <= 1) continue;
    const std::string &var = cname_.at(k_.vars[d]);
    DimVec dv;
    dv.dim = d;
    dv.extent = *extent;
    int64_t maxSize = 1;
    std::vector<std::pair<const Stmt *, SymInt>> vecLoads;
    bool ok = true;
    for (size_t i = 0; i < ph.body.stmts.size() && ok; ++i) {
      const Stmt &st = ph.body.stmts[i];
      if (!live[i]) continue;
      if (st.kind == Stmt::Kind::IndirectIndex) ok = false;
      if (st.kind != Stmt::Kind::Load) continue;
      auto a = coefIn(linear(st.node, st.index), var);
      if (!a || !(a->coef == SymInt(1))) continue; // a scalar load
      // Contiguous along `dim` and not along the last dim (those are read coalesced anyway).
      auto l = coefIn(linear(st.node, st.index), last);
      if (l && l->coef == SymInt(1)) continue;
      vecLoads.push_back({&st, a->rest});
      maxSize = std::max<int64_t>(maxSize, dtypeSize(p_.nodes[size_t(st.node)].dtype));
    }
    if (!ok || vecLoads.empty()) continue;
    dv.width = 16 / maxSize;
    if (dv.width < 2 || *extent % dv.width != 0) continue;
    for (const auto &[st, rest] : vecLoads) {
      // The vector starts at a multiple of the width (aligned when the buffer is).
      if (!(rest == SymInt(0)) && !exactQuotient(rest, SymInt(dv.width))) {
        ok = false;
        break;
      }
      dv.loadIndex[st] = int(dv.loads.size());
      dv.loads.push_back(st);
    }
    if (ok) return dv;
  }
  return std::nullopt;
}

Status CudaEmitter::emitPointwise(CodeWriter &w, const Config &c, const std::vector<bool> &live) {
  const sched::Phase &ph = k_.phases[0];
  std::string B = std::to_string(c.block), BE = std::to_string(c.block * c.ept);
  std::string E = std::to_string(c.ept);
  auto scalarLoad = [&](const Stmt &s) {
    if (flat_ && flatAccess_[&s]) return bufName_[s.node] + "[f]";
    return bufName_[s.node] + "[" + offsetText(s.node, s.index) + "]";
  };
  // The scalar path: element f.
  auto scalarBody = [&]() -> Status {
    if (!flat_) emitDecompose(w, "f", true);
    std::vector<std::string> valName;
    COIL_TRY_STATUS(emitBody(w, ph.body, live, valName, scalarLoad));
    for (const sched::Store &st : ph.stores)
      w.line(storeText(st, ph.body, valName,
                       bufName_[st.node] + "[" +
                           (flat_ ? std::string("f") : offsetText(st.node, st.index)) + "]"));
    return okStatus();
  };
  auto gridLoop = [&](const std::string &count, const std::string &var,
                      const std::function<Status()> &inner) -> Status {
    w.open("for (int64_t base = int64_t(blockIdx.x) * " + BE + "; base < " + count +
           "; base += int64_t(gridDim.x) * " + BE + ")");
    if (c.ept > 1) {
      w.line("#pragma unroll");
      w.open("for (int u = 0; u < " + E + "; ++u)");
      w.line("const int64_t " + var + " = base + u * " + B + " + threadIdx.x;");
    } else {
      w.line("const int64_t " + var + " = base + threadIdx.x;");
    }
    w.open("if (" + var + " < " + count + ")");
    COIL_TRY_STATUS(inner());
    w.close();
    if (c.ept > 1) w.close();
    w.close();
    return okStatus();
  };
  // The vector paths: per grid step, every load of the thread's `ept` vectors first (that many
  // 16-byte accesses in flight), then the math and the stores. `inner(false)` prints one
  // vector's loads into `<name>[u]`, `inner(true)` its math and stores.
  auto vecLoop = [&](const std::string &count, const std::function<Status(bool)> &inner) -> Status {
    w.open("for (int64_t base = int64_t(blockIdx.x) * " + BE + "; base < " + count +
           "; base += int64_t(gridDim.x) * " + BE + ")");
    for (bool math : {false, true}) {
      if (c.ept > 1) {
        w.line("#pragma unroll");
        w.open("for (int u = 0; u < " + E + "; ++u)");
        w.line("const int64_t g = base + u * " + B + " + threadIdx.x;");
      } else {
        w.open("");
        w.line("const int u = 0;");
        w.line("const int64_t g = base + threadIdx.x;");
      }
      w.open("if (g < " + count + ")");
      COIL_TRY_STATUS(inner(math));
      w.close();
      w.close();
    }
    w.close();
    return okStatus();
  };
  auto vt = [&](NodeId n, const std::string &V) {
    return "coil_vec<" + std::string(cStorageType(p_.nodes[size_t(n)].dtype)) + ", " + V + ">";
  };
  if (dimVec_ && c.vec > 1) {
    const DimVec &dv = *dimVec_;
    std::string V = std::to_string(c.vec);
    size_t rank = k_.vars.size();
    w.open("if (coil_vec_ok)");
    w.line("const int64_t nvec = total / " + V + ";");
    w.open("");
    for (size_t i = 0; i < dv.loads.size(); ++i)
      w.line(vt(dv.loads[i]->node, V) + " vec" + std::to_string(i) + "[" + E + "];");
    // Group g: the outer point with dim `dim` at a multiple of V (named xb), the last dim
    // fastest.
    auto decompose = [&]() {
      std::string decl;
      for (size_t d = 0; d < rank; ++d)
        decl += (d ? ", " : "") + (d == dv.dim ? std::string("xb") : cname_.at(k_.vars[d]));
      w.line("[[maybe_unused]] int64_t " + decl + ";");
      for (bool narrow : {true, false}) {
        w.open(narrow ? "if (total <= 4294967295LL)" : "else");
        std::string I = narrow ? "uint32_t" : "int64_t";
        w.line(I + " t = " + I + "(g);");
        for (size_t d = rank; d-- > 0;) {
          std::string n = d == dv.dim ? "(" + extent_[d] + " / " + V + ")" : extent_[d];
          std::string x = d == dv.dim ? std::string("xb") : cname_.at(k_.vars[d]);
          if (d == 0) {
            w.line(x + " = t" + (d == dv.dim ? " * " + V : std::string()) + ";");
            break;
          }
          w.line(x + " = t % " + I + "(" + n + ")" + (d == dv.dim ? " * " + V : std::string()) +
                 ";");
          w.line("t /= " + I + "(" + n + ");");
        }
        w.close();
      }
    };
    const std::string &var = cname_.at(k_.vars[dv.dim]);
    COIL_TRY_STATUS(vecLoop("nvec", [&](bool math) -> Status {
      decompose();
      if (!math) {
        w.open("");
        w.line("const int64_t " + var + " = xb;");
        for (size_t i = 0; i < dv.loads.size(); ++i) {
          const Stmt &ld = *dv.loads[i];
          w.line("vec" + std::to_string(i) + "[u] = *reinterpret_cast<const " + vt(ld.node, V) +
                 " *>(" + bufName_[ld.node] + " + (" + offsetText(ld.node, ld.index) + "));");
        }
        w.close();
        return okStatus();
      }
      w.line("#pragma unroll");
      w.open("for (int e = 0; e < " + V + "; ++e)");
      w.line("const int64_t " + var + " = xb + e;");
      std::vector<std::string> valName;
      COIL_TRY_STATUS(emitBody(w, ph.body, live, valName, [&](const Stmt &st) {
        auto it = dv.loadIndex.find(&st);
        if (it == dv.loadIndex.end()) return scalarLoad(st);
        return "vec" + std::to_string(it->second) + "[u].v[e]";
      }));
      for (const sched::Store &st : ph.stores)
        w.line(storeText(st, ph.body, valName,
                         bufName_[st.node] + "[" + offsetText(st.node, st.index) + "]"));
      w.close();
      return okStatus();
    }));
    w.close();
    w.line("return;");
    w.close();
  }
  if (lastVec_ && c.vec > 1) {
    // Vectors along the last dim: group g is elements [g * V, g * V + V) of one row.
    const RowVec &lv = *lastVec_;
    std::string V = std::to_string(c.vec);
    const std::string &last = cname_.at(k_.vars.back());
    w.open("if (coil_vec_ok)");
    w.line("const int64_t nvec = total / " + V + ";");
    std::map<RowVec::Key, std::string> vecName;
    for (const auto &[key, unused] : lv.loads)
      vecName[key] = "vec" + std::to_string(vecName.size());
    for (const auto &[key, unused] : lv.stores)
      vecName[key] = "vec" + std::to_string(vecName.size());
    auto at = [&](const RowVec::Key &key) {
      return bufName_[key.first] + " + " + (key.second == "0" ? "" : "(" + key.second + ") + ") +
             "xb";
    };
    w.open("");
    for (const auto &[key, unused] : lv.loads)
      w.line(vt(key.first, V) + " " + vecName[key] + "[" + E + "];");
    COIL_TRY_STATUS(vecLoop("nvec", [&](bool math) -> Status {
      emitDecompose(w, "g * " + V, true, "xb");
      if (!math) {
        for (const auto &[key, unused] : lv.loads)
          w.line(vecName[key] + "[u] = *reinterpret_cast<const " + vt(key.first, V) + " *>(" +
                 at(key) + ");");
        return okStatus();
      }
      for (const auto &[key, unused] : lv.stores)
        w.line(vt(key.first, V) + " " + vecName[key] + ";");
      w.line("#pragma unroll");
      w.open("for (int e = 0; e < " + V + "; ++e)");
      w.line("[[maybe_unused]] const int64_t " + last + " = xb + e;");
      std::vector<std::string> valName;
      COIL_TRY_STATUS(emitBody(w, ph.body, live, valName, [&](const Stmt &s) {
        auto it = lv.loadKey.find(&s);
        if (it == lv.loadKey.end()) return scalarLoad(s);
        return vecName[it->second] + "[u].v[e]";
      }));
      for (const sched::Store &st : ph.stores)
        w.line(storeText(st, ph.body, valName, vecName[lv.storeKey.at(&st)] + ".v[e]"));
      w.close();
      for (const auto &[key, unused] : lv.stores)
        w.line("*reinterpret_cast<" + vt(key.first, V) + " *>(" + at(key) + ") = " + vecName[key] +
               ";");
      return okStatus();
    }));
    w.close();
    w.line("return;");
    w.close();
  }
  if (flat_ && c.vec > 1) {
    std::string V = std::to_string(c.vec);
    w.open("if (coil_vec_ok)");
    w.line("const int64_t nvec = total / " + V + ";");
    // One vector access per buffer at the flat index.
    std::map<NodeId, std::string> vecName;
    for (NodeId n : flatNodes_) vecName[n] = "vec" + std::to_string(vecName.size());
    w.open("");
    for (NodeId n : flatNodes_)
      if (!writeSet_.count(n)) w.line(vt(n, V) + " " + vecName[n] + "[" + E + "];");
    COIL_TRY_STATUS(vecLoop("nvec", [&](bool math) -> Status {
      if (!math) {
        for (NodeId n : flatNodes_)
          if (!writeSet_.count(n))
            w.line(vecName[n] + "[u] = *reinterpret_cast<const " + vt(n, V) + " *>(" + bufName_[n] +
                   " + g * " + V + ");");
        return okStatus();
      }
      for (NodeId n : flatNodes_)
        if (writeSet_.count(n)) w.line(vt(n, V) + " " + vecName[n] + ";");
      w.line("#pragma unroll");
      w.open("for (int e = 0; e < " + V + "; ++e)");
      std::vector<std::string> valName;
      COIL_TRY_STATUS(emitBody(w, ph.body, live, valName, [&](const Stmt &s) {
        if (flatAccess_[&s]) return vecName[s.node] + "[u].v[e]";
        return bufName_[s.node] + "[" + offsetText(s.node, s.index) + "]";
      }));
      for (const sched::Store &st : ph.stores)
        w.line(storeText(st, ph.body, valName, vecName[st.node] + ".v[e]"));
      w.close();
      for (NodeId n : flatNodes_)
        if (writeSet_.count(n))
          w.line("*reinterpret_cast<" + vt(n, V) + " *>(" + bufName_[n] + " + g * " + V +
                 ") = " + vecName[n] + ";");
      return okStatus();
    }));
    w.close();
    w.line("// The last total % " + V + " elements.");
    w.open("for (int64_t f = nvec * " + V + " + int64_t(blockIdx.x) * " + B +
           " + threadIdx.x; f < total; f += int64_t(gridDim.x) * " + B + ")");
    COIL_TRY_STATUS(scalarBody());
    w.close();
    w.line("return;");
    w.close();
  }
  return gridLoop("total", "f", scalarBody);
}

// --------------------------------------------------------------------------------------- rows

std::vector<std::pair<std::string, std::string>> CudaEmitter::splitArrays() const {
  std::vector<std::pair<std::string, std::string>> out;
  const sched::Phase &ph = k_.phases[0];
  for (size_t si = 0; si < ph.reductions.size(); ++si) {
    const sched::Accumulate &r = ph.reductions[si];
    std::string work = "red0_" + std::to_string(si);
    DType D = r.accDType;
    bool fl = isFloat(D);
    switch (r.kind) {
    case ReduceKind::Sum:
    case ReduceKind::Prod:
      out.push_back({work + "_ws", fl                 ? computeType(D)
                                   : D == DType::Bool ? "bool"
                                   : dtypeSize(D) > 4 ? "uint64_t"
                                                      : "uint32_t"});
      break;
    case ReduceKind::Max:
    case ReduceKind::Min:
      out.push_back({work + "_ws", computeType(D)});
      if (fl) out.push_back({work + "n_ws", "int"});
      break;
    case ReduceKind::Any:
    case ReduceKind::All:
      out.push_back({work + "_ws", "int"});
      break;
    case ReduceKind::ArgMax:
    case ReduceKind::ArgMin:
      out.push_back({work + "_ws", computeType(ph.body.stmts[size_t(r.value)].dtype)});
      out.push_back({work + "i_ws", "int64_t"});
      out.push_back({work + "s_ws", "bool"});
      break;
    }
  }
  return out;
}

void CudaEmitter::emitWorkspace(CodeWriter &w) const {
  w.line("// Phase 0's partial states per (outer point, slice), in the workspace.");
  w.line("const int64_t coil_n = total * coil_splits;");
  w.line("int64_t coil_off = 0;");
  for (const auto &[name, type] : splitArrays()) {
    w.line(type + " *" + name + " = reinterpret_cast<" + type + " *>(coil_ws + coil_off);");
    w.line("coil_off += (coil_n * int64_t(sizeof(" + type + ")) + 15) / 16 * 16;");
  }
}

Status CudaEmitter::emitRows(CodeWriter &w, const Config &c) {
  if (splitMode_) emitWorkspace(w);
  if (splitMode_ == 1) {
    // One block per (outer point, slice of phase 0's inner space).
    w.line("const int lane = threadIdx.x % " + std::to_string(c.tpr) + ";");
    w.open("for (int64_t coil_b = blockIdx.x; coil_b < coil_n; coil_b += gridDim.x)");
    w.line("const int64_t row = coil_b / coil_splits;");
    w.line("const int64_t coil_s = coil_b % coil_splits;");
    emitDecompose(w, "row");
    COIL_TRY_STATUS(emitPhase(w, c, 0));
    w.line("__syncthreads(); // the next slice reuses the shared partials");
    w.close();
    return okStatus();
  }
  bool rowVec = false;
  for (size_t pi = 0; pi < k_.phases.size() && c.tpr > 1; ++pi)
    rowVec |= planRowVec(pi, liveStmts(k_.phases[pi].body, &k_.phases[pi])).has_value();
  rowCache_.clear();
  rowCacheFilled_.clear();
  if (rowVec) {
    // Runs loaded by more than one vector phase, when a thread's share of the row is small.
    std::map<RowVec::Key, std::pair<int, std::pair<int64_t, int64_t>>> seen;
    std::set<RowVec::Key> mixed;
    for (size_t pi = 0; pi < k_.phases.size(); ++pi) {
      auto rv = planRowVec(pi, liveStmts(k_.phases[pi].body, &k_.phases[pi]));
      if (!rv) continue;
      for (const auto &[key, unused] : rv->loads) {
        auto [it, fresh] = seen.try_emplace(key, 0, std::make_pair(rv->width, rv->extent));
        if (!fresh && it->second.second != std::make_pair(rv->width, rv->extent)) mixed.insert(key);
        ++it->second.first;
      }
    }
    int64_t bytes = 0;
    for (const auto &[key, info] : seen) {
      int64_t steps = (info.second.second / info.second.first + c.tpr - 1) / c.tpr;
      if (info.first < 2 || mixed.count(key) || steps > 8 || bytes + steps * 16 > 256) continue;
      bytes += steps * 16;
      std::string name = "rc" + std::to_string(rowCache_.size());
      rowCache_[key] = name;
    }
    // A warp per row whose only loads are a small register-held row (softmax): few registers
    // suffice, so the kernel asks for a full SM of threads (more rows' loads in flight).
    fullOccupancy_ = c.tpr == 32 && !splitMode_ && bytes <= 32;
    for (size_t pi = 0; pi < k_.phases.size() && fullOccupancy_; ++pi) {
      const sched::Phase &ph = k_.phases[pi];
      std::vector<bool> live = liveStmts(ph.body, &ph);
      auto rv = planRowVec(pi, live);
      if (!rv) {
        for (size_t i = 0; i < ph.body.stmts.size(); ++i)
          if (live[i] && ph.body.stmts[i].kind == Stmt::Kind::Load) fullOccupancy_ = false;
        if (!ph.vars.empty()) fullOccupancy_ = false;
        continue;
      }
      for (const auto &[key, unused] : rv->loads)
        if (!rowCache_.count(key)) fullOccupancy_ = false;
      for (const Stmt &st : ph.body.stmts)
        if (st.kind == Stmt::Kind::Load && !rv->loadKey.count(&st)) fullOccupancy_ = false;
    }
  }
  if (rowVec) {
    // Vector accesses need every buffer 16-byte aligned (the runs start at multiples of the
    // vector width); otherwise the phases run element by element.
    std::string bits;
    for (NodeId n : buffers_)
      bits += (bits.empty() ? "" : " | ") + std::string("reinterpret_cast<uintptr_t>(") +
              bufName_[n] + ")";
    w.line("const bool coil_rowvec_ok = ((" + bits + ") & 15) == 0;");
  }
  if (c.tpr > 1) w.line("const int lane = threadIdx.x % " + std::to_string(c.tpr) + ";");
  std::string R = std::to_string(c.rows);
  std::string first = c.tpr == 1    ? "threadIdx.x"
                      : c.rows == 1 ? std::string("0")
                                    : "threadIdx.x / " + std::to_string(c.tpr);
  // The row loop, once per path: aligned (vector phases) and unaligned (element by element).
  for (int path : rowVec ? std::vector<int>{1, 0} : std::vector<int>{0}) {
    vecPath_ = path;
    rowCacheFilled_.clear();
    if (rowVec) w.open(path ? "if (coil_rowvec_ok)" : "else");
    w.open("for (int64_t row = int64_t(blockIdx.x) * " + R + " + " + first +
           "; row < total; row += int64_t(gridDim.x) * " + R + ")");
    emitDecompose(w, "row", true); // 32-bit division when the rows allow
    for (const auto &[key, name] : path ? rowCache_ : decltype(rowCache_){}) {
      // Width and steps of the run, from the phases that load it.
      for (size_t pi = 0; pi < k_.phases.size(); ++pi) {
        auto rv = planRowVec(pi, liveStmts(k_.phases[pi].body, &k_.phases[pi]));
        if (!rv || !rv->loads.count(key)) continue;
        int64_t steps = (rv->extent / rv->width + c.tpr - 1) / c.tpr;
        w.line("coil_vec<" + std::string(cStorageType(p_.nodes[size_t(key.first)].dtype)) + ", " +
               std::to_string(rv->width) + "> " + name + "[" + std::to_string(steps) + "];");
        break;
      }
    }
    for (size_t pi = 0; pi < k_.phases.size(); ++pi) COIL_TRY_STATUS(emitPhase(w, c, pi));
    if (c.tpr > 32) w.line("__syncthreads(); // the next row reuses the shared partials");
    w.close();
    if (rowVec) w.close();
  }
  vecPath_ = 0;
  return okStatus();
}

std::optional<CudaEmitter::RowVec> CudaEmitter::planRowVec(size_t pi,
                                                           const std::vector<bool> &live) const {
  const sched::Phase &ph = k_.phases[pi];
  if (ph.vars.size() != 1 || (splitMode_ && pi == 0)) return std::nullopt;
  auto extent = simplify(renamed(ph.ranges[0]), ranges_).maybeConstant();
  if (!extent || *extent <= 0) return std::nullopt;
  auto rv = planVec(ph, cname_.at(ph.vars[0]), live);
  if (!rv || *extent % rv->width != 0) return std::nullopt;
  rv->extent = *extent;
  return rv;
}

std::optional<CudaEmitter::RowVec> CudaEmitter::planVec(const sched::Phase &ph,
                                                        const std::string &var,
                                                        const std::vector<bool> &live) const {
  std::set<std::string> indirect;
  for (const std::string &s : indirectSyms_) indirect.insert(cname_.at(s));
  struct Access {
    const void *what;
    NodeId node;
    SymInt rest;
    bool store;
  };
  std::vector<Access> runs;
  int64_t maxSize = 1;
  // nullopt: not vectorizable; false: independent of the inner var; true: a contiguous run.
  auto classify = [&](const void *what, NodeId node, const std::vector<SymInt> &idx,
                      bool store) -> std::optional<bool> {
    std::vector<SymInt> ridx, shape;
    for (const SymInt &e : idx) ridx.push_back(renamed(e));
    for (const SymInt &d : p_.nodes[size_t(node)].shape) shape.push_back(renamed(d));
    SymInt lin = simplify(linearIndex(shape, ridx), ranges_);
    std::set<std::string> syms;
    lin.collectSymbols(syms);
    for (const std::string &sym : syms)
      if (indirect.count(sym)) return std::nullopt;
    auto a = affineIn(lin, var);
    if (!a) return std::nullopt;
    SymInt coef = simplify(a->coef, ranges_);
    if (coef == SymInt(0)) return false;
    if (!(coef == SymInt(1))) return std::nullopt;
    runs.push_back(Access{what, node, simplify(a->rest, ranges_), store});
    maxSize = std::max<int64_t>(maxSize, dtypeSize(p_.nodes[size_t(node)].dtype));
    return true;
  };
  for (size_t i = 0; i < ph.body.stmts.size(); ++i) {
    const Stmt &s = ph.body.stmts[i];
    if (!live[i]) continue;
    if (s.kind == Stmt::Kind::IndirectIndex) return std::nullopt;
    if (s.kind == Stmt::Kind::Load && !classify(&s, s.node, s.index, false)) return std::nullopt;
  }
  for (const sched::Store &st : ph.stores) {
    auto r = classify(&st, st.node, st.index, true);
    if (!r || !*r || readSet_.count(st.node)) return std::nullopt;
  }
  if (runs.empty()) return std::nullopt;
  RowVec rv;
  rv.width = 16 / maxSize;
  if (rv.width < 2) return std::nullopt;
  for (const Access &a : runs) {
    // The run starts at a multiple of the width (so aligned when the buffer is).
    if (!(a.rest == SymInt(0)) && !exactQuotient(a.rest, SymInt(rv.width))) return std::nullopt;
    RowVec::Key key{a.node, deviceIndex(a.rest.toCpp(ranges_))};
    (a.store ? rv.stores : rv.loads)[key] = true;
    (a.store ? rv.storeKey : rv.loadKey)[a.what] = key;
  }
  return rv;
}

Status CudaEmitter::emitPhase(CodeWriter &w, const Config &c, size_t pi) {
  const sched::Phase &ph = k_.phases[pi];
  const Body &b = ph.body;
  std::string tag = std::to_string(pi);
  {
    std::string text = "// phase " + tag;
    for (size_t d = 0; d < ph.vars.size(); ++d)
      text += (d ? ", " : " over ") + cname_[ph.vars[d]] + " < " + dcpp(ph.ranges[d]);
    std::string what;
    for (const sched::Accumulate &r : ph.reductions)
      what += (what.empty() ? "" : ", ") + std::string(loop::reduceKindName(r.kind));
    std::set<NodeId> stored;
    for (const sched::Store &st : ph.stores) stored.insert(st.node);
    for (NodeId n : stored) what += (what.empty() ? "stores " : ", stores ") + bufName_[n];
    w.line(text + (what.empty() ? "" : ": " + what));
  }
  // Per-thread partial state of every reduction.
  struct Red {
    std::string work, nan, pos, seen, W;
    const sched::Accumulate *r;
    DType vt;
    bool fl = false;
  };
  std::vector<Red> reds;
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
      red.W = fl ? T : D == DType::Bool ? "bool" : (dtypeSize(D) > 4 ? "uint64_t" : "uint32_t");
      w.line(red.W + " " + red.work + " = " + red.W + (sum ? "(0);" : "(1);"));
      break;
    }
    case ReduceKind::Max:
    case ReduceKind::Min: {
      bool mx = r.kind == ReduceKind::Max;
      red.W = T;
      red.fl = fl;
      std::string init = fl ? (mx ? "-" : "") + T + "(INFINITY)"
                            : "coil_limits<" + T + ">::" + (mx ? "lowest()" : "max()");
      if (D == DType::Bool) init = mx ? "false" : "true";
      w.line(T + " " + red.work + " = " + init + ";");
      if (fl && T != "float") { // f32 folds with max.NaN / min.NaN: NaN stays in the value
        red.nan = red.work + "n";
        w.line("int " + red.nan + " = 0;");
      }
      break;
    }
    case ReduceKind::Any:
    case ReduceKind::All:
      red.W = "int";
      w.line("int " + red.work + (r.kind == ReduceKind::Any ? " = 0;" : " = 1;"));
      break;
    case ReduceKind::ArgMax:
    case ReduceKind::ArgMin:
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

  std::vector<bool> live = liveStmts(b, &ph);
  auto innerBody =
      [&](const LoadFn &load,
          const std::function<std::string(const sched::Store &)> &storeTarget) -> Status {
    std::vector<std::string> valName;
    COIL_TRY_STATUS(emitBody(w, b, live, valName, load));
    // A phase without inner loop runs on every thread of the row: one of them stores.
    bool guard = ph.vars.empty() && c.tpr > 1 && !ph.stores.empty();
    if (guard) w.open("if (lane == 0)");
    for (const sched::Store &st : ph.stores) w.line(storeText(st, b, valName, storeTarget(st)));
    if (guard) w.close();
    for (const Red &red : reds) {
      const sched::Accumulate &r = *red.r;
      bool arg = r.kind == ReduceKind::ArgMax || r.kind == ReduceKind::ArgMin;
      DType cmpType = arg ? red.vt : r.accDType;
      std::string v = castExpr(valName[size_t(r.value)], red.vt, cmpType);
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
        if (red.W == "float") { // one max.NaN / min.NaN: the NaN flag stays 0
          w.line(red.work + " = coil_cuda_f" + (r.kind == ReduceKind::Max ? "max" : "min") +
                 "_nan(" + red.work + ", " + v + ");");
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
                   (r.selectLast ? std::string("true") : "!(" + best + " != " + best + ")") +
                   " : (" + best + " == " + best + " && (" + better + "))";
        w.open("if (!" + red.seen + " || (" + better + "))");
        w.line(best + " = " + v + ";");
        w.line(
            red.pos + " = " +
            castExpr(valName[size_t(r.position)], b.stmts[size_t(r.position)].dtype, DType::I64) +
            ";");
        w.line(red.seen + " = true;");
        w.close();
        break;
      }
      }
    }
    return okStatus();
  };
  // `foldLines(dst, src...)` merges a partial state (its value, NaN flag, position, seen flag
  // expressions) into the thread's own.
  auto foldLines = [&](CodeWriter &o, const Red &red, const std::string &sw, const std::string &sn,
                       const std::string &sp, const std::string &ss) {
    const sched::Accumulate &r = *red.r;
    switch (r.kind) {
    case ReduceKind::Sum:
      o.line(red.work + " = " + red.W + "(" + red.work + " + " + sw + ");");
      break;
    case ReduceKind::Prod:
      o.line(red.work + " = " + red.W + "(" + red.work + " * " + sw + ");");
      break;
    case ReduceKind::Max:
    case ReduceKind::Min: {
      const char *cmp = r.kind == ReduceKind::Max ? " > " : " < ";
      if (red.W == "float") { // NaN travels in the value (see the fold of elements)
        o.line(red.work + " = coil_cuda_f" + (r.kind == ReduceKind::Max ? "max" : "min") + "_nan(" +
               red.work + ", " + sw + ");");
        break;
      }
      o.line(red.work + " = " + sw + cmp + red.work + " ? " + sw + " : " + red.work + ";");
      if (red.fl) o.line(red.nan + " |= " + sn + ";");
      break;
    }
    case ReduceKind::Any:
      o.line(red.work + " |= " + sw + ";");
      break;
    case ReduceKind::All:
      o.line(red.work + " &= " + sw + ";");
      break;
    case ReduceKind::ArgMax:
    case ReduceKind::ArgMin: {
      // The scan order's winner: NaN beats numbers; equal values (or two NaNs) go to the first
      // position, or the last one with selectLast.
      const char *cmp = r.kind == ReduceKind::ArgMax ? " > " : " < ";
      const std::string &best = red.work;
      std::string posTie = r.selectLast ? sp + " > " + red.pos : sp + " < " + red.pos;
      std::string better;
      if (red.fl)
        better = "(" + sw + " != " + sw + ") ? (!(" + best + " != " + best + ") || " + posTie +
                 ") : (" + best + " == " + best + " && (" + sw + cmp + best + " || (" + sw +
                 " == " + best + " && " + posTie + ")))";
      else
        better = sw + cmp + best + " || (" + sw + " == " + best + " && " + posTie + ")";
      o.open("if (" + ss + " && (!" + red.seen + " || (" + better + ")))");
      o.line(best + " = " + sw + ";");
      o.line(red.pos + " = " + sp + ";");
      o.line(red.seen + " = true;");
      o.close();
      break;
    }
    }
  };
  auto scalarLoad = [&](const Stmt &s) {
    return bufName_[s.node] + "[" + offsetText(s.node, s.index) + "]";
  };
  auto scalarStore = [&](const sched::Store &st) {
    return bufName_[st.node] + "[" + offsetText(st.node, st.index) + "]";
  };
  std::optional<RowVec> rv;
  if (c.tpr > 1 && vecPath_ == 1) rv = planRowVec(pi, live);
  if (rv) {
    // 16-byte accesses: each thread takes V consecutive elements per step.
    std::string V = std::to_string(rv->width), j = "j" + tag;
    const std::string &var = cname_[ph.vars[0]];
    int64_t nv = rv->extent / rv->width, steps = (nv + c.tpr - 1) / c.tpr;
    bool unrolled = steps <= 8;
    w.open("");
    if (unrolled) {
      // Fully unrolled: the register arrays of persistent rows need constant indices.
      w.line("#pragma unroll");
      w.open("for (int k = 0; k < " + std::to_string(steps) + "; ++k)");
      w.line("const int64_t " + j + " = lane + k * " + std::to_string(c.tpr) + ";");
      w.open(nv % c.tpr == 0 ? "" : "if (" + j + " < " + std::to_string(nv) + ")");
    } else {
      w.open("for (int64_t " + j + " = lane; " + j + " < " + std::to_string(nv) + "; " + j +
             " += " + std::to_string(c.tpr) + ")");
    }
    std::map<std::pair<NodeId, std::string>, std::string> vecName;
    int vi = 0;
    auto vecOf = [&](NodeId n, const std::string &rest) -> std::string & {
      return vecName[{n, rest}];
    };
    for (const auto &[key, acc] : rv->loads) {
      std::string &name = vecOf(key.first, key.second);
      if (!name.empty()) continue;
      name = "vec" + std::to_string(vi++);
      std::string vt = "coil_vec<" + std::string(cStorageType(p_.nodes[size_t(key.first)].dtype)) +
                       ", " + V + ">";
      std::string mem = "*reinterpret_cast<const " + vt + " *>(" + bufName_[key.first] + " + " +
                        (key.second == "0" ? "" : "(" + key.second + ") + ") + j + " * " + V + ")";
      auto rc = unrolled ? rowCache_.find(key) : rowCache_.end();
      if (rc == rowCache_.end()) {
        w.line("const " + vt + " " + name + " = " + mem + ";");
      } else if (rowCacheFilled_.count(key)) {
        w.line("const " + vt + " " + name + " = " + rc->second + "[k];");
      } else {
        w.line(rc->second + "[k] = " + mem + ";");
        w.line("const " + vt + " " + name + " = " + rc->second + "[k];");
      }
    }
    if (unrolled)
      for (const auto &[key, unused] : rv->loads)
        if (rowCache_.count(key)) rowCacheFilled_.insert(key);
    for (const auto &[key, acc] : rv->stores) {
      std::string &name = vecOf(key.first, key.second);
      if (!name.empty()) continue;
      name = "vec" + std::to_string(vi++);
      w.line("coil_vec<" + std::string(cStorageType(p_.nodes[size_t(key.first)].dtype)) + ", " + V +
             "> " + name + ";");
    }
    w.line("#pragma unroll");
    w.open("for (int e = 0; e < " + V + "; ++e)");
    w.line("[[maybe_unused]] const int64_t " + var + " = " + j + " * " + V + " + e;");
    COIL_TRY_STATUS(innerBody(
        [&](const Stmt &s) {
          auto it = rv->loadKey.find(&s);
          if (it == rv->loadKey.end()) return scalarLoad(s);
          return vecOf(it->second.first, it->second.second) + ".v[e]";
        },
        [&](const sched::Store &st) {
          const auto &key = rv->storeKey.at(&st);
          return vecOf(key.first, key.second) + ".v[e]";
        }));
    w.close();
    for (const auto &[key, acc] : rv->stores) {
      std::string at = bufName_[key.first] + " + " +
                       (key.second == "0" ? "" : "(" + key.second + ") + ") + j + " * " + V;
      // Small register-held rows (softmax): NVVM splits one of the struct copies into 2-byte
      // stores there; coil_vec_store forces one 16-byte store. (Elsewhere the copies stay whole,
      // and the packing would cost registers: layer norm's row kernel takes 48 instead of 40.)
      if (fullOccupancy_)
        w.line("coil_vec_store(" + at + ", " + vecOf(key.first, key.second) + ");");
      else
        w.line("*reinterpret_cast<coil_vec<" +
               std::string(cStorageType(p_.nodes[size_t(key.first)].dtype)) + ", " + V + "> *>(" +
               at + ") = " + vecOf(key.first, key.second) + ";");
    }
    if (unrolled) w.close();
    w.close();
    w.close();
  } else {
    // Element by element: the phase's flattened inner space strided over the row's threads.
    std::string P;
    if (splitMode_ == 2 && pi == 0) {
      // The slices' partial states, strided over the row's threads.
      std::string j = "j" + tag;
      w.open("for (int64_t " + j + " = lane; " + j + " < coil_splits; " + j +
             " += " + std::to_string(c.tpr) + ")");
      w.line("const int64_t coil_i = row * coil_splits + " + j + ";");
      for (const Red &red : reds)
        foldLines(w, red, red.work + "_ws[coil_i]", red.nan.empty() ? "" : red.nan + "_ws[coil_i]",
                  red.pos.empty() ? "" : red.pos + "_ws[coil_i]",
                  red.seen.empty() ? "" : red.seen + "_ws[coil_i]");
      w.close();
    } else if (ph.vars.empty()) {
      w.open("");
    } else {
      SymInt size(1);
      for (const SymInt &r : ph.ranges) size = size * r;
      P = dcpp(size);
      std::string j = "j" + tag;
      if (splitMode_ == 1 && pi == 0) {
        // This block's slice of the inner space.
        w.line("const int64_t coil_chunk = (" + P + " + coil_splits - 1) / coil_splits;");
        w.line("const int64_t coil_lo = coil_s * coil_chunk;");
        w.line("const int64_t coil_hi = coil_imin(" + P + ", coil_lo + coil_chunk);");
        w.open("for (int64_t " + j + " = coil_lo + lane; " + j + " < coil_hi; " + j +
               " += " + std::to_string(c.tpr) + ")");
      } else if (c.tpr == 1)
        w.open("for (int64_t " + j + " = 0; " + j + " < " + P + "; ++" + j + ")");
      else
        w.open("for (int64_t " + j + " = lane; " + j + " < " + P + "; " + j +
               " += " + std::to_string(c.tpr) + ")");
      if (ph.vars.size() == 1) {
        w.line("[[maybe_unused]] const int64_t " + cname_[ph.vars[0]] + " = " + j + ";");
      } else {
        w.line("int64_t t" + tag + " = " + j + ";");
        for (size_t d = ph.vars.size(); d-- > 1;) {
          std::string ext = "(" + dcpp(ph.ranges[d]) + ")";
          w.line("[[maybe_unused]] const int64_t " + cname_[ph.vars[d]] + " = t" + tag + " % " +
                 ext + ";");
          w.line("t" + tag + " /= " + ext + ";");
        }
        w.line("[[maybe_unused]] const int64_t " + cname_[ph.vars[0]] + " = t" + tag + ";");
      }
    }
    if (!(splitMode_ == 2 && pi == 0)) {
      COIL_TRY_STATUS(innerBody(scalarLoad, scalarStore));
      w.close();
    }
  }

  // Combining the partials of the row's threads (every thread ends with the row's result).
  // `fold(dst, src)` merges the state named by the src suffix into dst's variables.
  bool combine = c.tpr > 1 && !ph.vars.empty() && !reds.empty();
  if (combine) {
    int64_t width = std::min<int64_t>(c.tpr, 32);
    w.line("#pragma unroll");
    w.open("for (int m = " + std::to_string(width / 2) + "; m > 0; m >>= 1)");
    for (const Red &red : reds) {
      w.line("const " + red.W + " " + red.work + "o = coil_shfl_xor(" + red.work + ", m);");
      if (!red.nan.empty())
        w.line("const int " + red.nan + "o = coil_shfl_xor(" + red.nan + ", m);");
      if (!red.pos.empty()) {
        w.line("const int64_t " + red.pos + "o = coil_shfl_xor(" + red.pos + ", m);");
        w.line("const bool " + red.seen + "o = coil_shfl_xor(" + red.seen + ", m);");
      }
      foldLines(w, red, red.work + "o", red.nan + "o", red.pos + "o", red.seen + "o");
    }
    w.close();
    if (c.tpr > 32) {
      int64_t nw = c.tpr / 32;
      std::string NW = std::to_string(nw);
      // Per warp partials in shared memory, then every thread folds them in warp order.
      for (const Red &red : reds) {
        w.line("__shared__ " + red.W + " " + red.work + "_s[" + NW + "];");
        if (!red.nan.empty()) w.line("__shared__ int " + red.nan + "_s[" + NW + "];");
        if (!red.pos.empty()) {
          w.line("__shared__ int64_t " + red.pos + "_s[" + NW + "];");
          w.line("__shared__ bool " + red.seen + "_s[" + NW + "];");
        }
      }
      w.open("if (lane % 32 == 0)");
      for (const Red &red : reds) {
        w.line(red.work + "_s[lane / 32] = " + red.work + ";");
        if (!red.nan.empty()) w.line(red.nan + "_s[lane / 32] = " + red.nan + ";");
        if (!red.pos.empty()) {
          w.line(red.pos + "_s[lane / 32] = " + red.pos + ";");
          w.line(red.seen + "_s[lane / 32] = " + red.seen + ";");
        }
      }
      w.close();
      w.line("__syncthreads();");
      for (const Red &red : reds) {
        w.line(red.work + " = " + red.work + "_s[0];");
        if (!red.nan.empty()) w.line(red.nan + " = " + red.nan + "_s[0];");
        if (!red.pos.empty()) {
          w.line(red.pos + " = " + red.pos + "_s[0];");
          w.line(red.seen + " = " + red.seen + "_s[0];");
        }
        w.open("for (int warp = 1; warp < " + NW + "; ++warp)");
        foldLines(w, red, red.work + "_s[warp]", red.nan + "_s[warp]", red.pos + "_s[warp]",
                  red.seen + "_s[warp]");
        w.close();
      }
    }
  }
  if (splitMode_ == 1 && pi == 0) {
    // The slice's partial states.
    w.open("if (lane == 0)");
    w.line("const int64_t coil_i = row * coil_splits + coil_s;");
    for (const Red &red : reds) {
      w.line(red.work + "_ws[coil_i] = " + red.work + ";");
      if (!red.nan.empty()) w.line(red.nan + "_ws[coil_i] = " + red.nan + ";");
      if (!red.pos.empty()) {
        w.line(red.pos + "_ws[coil_i] = " + red.pos + ";");
        w.line(red.seen + "_ws[coil_i] = " + red.seen + ";");
      }
    }
    w.close();
    return okStatus();
  }
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

// ------------------------------------------------------------------------------------- driver

Expected<CudaKernelSource> CudaEmitter::run() {
  COIL_TRY_STATUS(validate());
  assignNames();
  CudaKernelSource out;
  out.info = kernelInfo(o_.deviceFile);
  wrapper::KernelInfo &info = out.info;

  pointwise_ = k_.phases.size() == 1 && k_.phases[0].vars.empty() &&
               k_.phases[0].reductions.empty() && !k_.vars.empty();
  std::vector<bool> pwLive;
  if (pointwise_) {
    pwLive = liveStmts(k_.phases[0].body, &k_.phases[0]);
    flat_ = planFlat(pwLive);
    if (!flat_) {
      flatAccess_.clear();
      flatNodes_.clear();
      vecWidth_ = 1;
      if (k_.vars.size() >= 2) lastVec_ = planVec(k_.phases[0], cname_.at(k_.vars.back()), pwLive);
      if (lastVec_) {
        auto n = simplify(renamed(k_.ranges.back()), ranges_).maybeConstant();
        if (n && *n % lastVec_->width != 0) lastVec_.reset(); // never a whole number of vectors
      }
      if (lastVec_) vecWidth_ = lastVec_->width;
      if (!lastVec_ && k_.vars.size() >= 2) dimVec_ = planDimVec(pwLive);
      if (dimVec_) vecWidth_ = dimVec_->width;
    }
  }

  // Configs, the heuristic best first.
  std::vector<Config> configs;
  if (pointwise_) {
    int64_t vec = vecWidth_;
    for (auto [blk, ept] : std::vector<std::pair<int64_t, int64_t>>{{256, 2}, {128, 4}, {512, 1}})
      configs.push_back(Config{"block" + std::to_string(blk) + "_ept" + std::to_string(ept) +
                                   (vec > 1 ? "_vec" + std::to_string(vec) : ""),
                               blk, ept, vec, 1, 1});
  } else {
    // The largest inner space of a phase, and the number of outer points, as far as known.
    int64_t inner = 1;
    for (const sched::Phase &ph : k_.phases) {
      SymInt size(1);
      for (const SymInt &r : ph.ranges) size = size * renamed(r);
      inner = std::max(inner, bounds(size, ranges_).max);
    }
    SymInt outer(1);
    for (const SymInt &r : k_.ranges) outer = outer * renamed(r);
    int64_t outerMax = bounds(outer, ranges_).max;
    Config thread{"thread_per_row_block128", 128, 1, 1, 1, 128};
    Config warp{"warp_per_row_rows4", 128, 1, 1, 32, 4};
    Config blk256{"block256_per_row", 256, 1, 1, 256, 1};
    Config blk512{"block512_per_row", 512, 1, 1, 512, 1};
    Config blk1024{"block1024_per_row", 1024, 1, 1, 1024, 1};
    // Loads that stride through memory along a phase's innermost var (a reduction over a
    // leading dim): neighbouring outer points are neighbours in memory, so one thread per
    // outer point keeps the accesses of a warp coalesced.
    bool strided = false;
    for (const sched::Phase &ph : k_.phases) {
      if (ph.vars.empty()) continue;
      const std::string &var = cname_.at(ph.vars.back());
      for (const Stmt &s : ph.body.stmts) {
        if (s.kind != Stmt::Kind::Load) continue;
        std::vector<SymInt> ridx, shape;
        for (const SymInt &e : s.index) ridx.push_back(renamed(e));
        for (const SymInt &d : p_.nodes[size_t(s.node)].shape) shape.push_back(renamed(d));
        auto a = affineIn(simplify(linearIndex(shape, ridx), ranges_), var);
        if (a && !(simplify(a->coef, ranges_) == SymInt(0)) &&
            !(simplify(a->coef, ranges_) == SymInt(1)))
          strided = true;
      }
    }
    // Short rows: a thread each; rows up to 2048: a warp each (a block when there are few
    // rows: one wave of the GPU); longer rows: a block each.
    Config best = inner <= 8 || (strided && outerMax >= 4096)        ? thread
                  : inner <= 2048 && !(outerMax < 64 && inner > 256) ? warp
                  : inner <= 16384 && outerMax >= 132                ? blk256
                                                                     : blk1024;
    // Few outer points with long reductions: phase 0 split over many blocks (when phase 0
    // only reduces; its launcher falls back to a block per point when splitting does not pay).
    const sched::Phase &ph0 = k_.phases[0];
    SymInt size0(1);
    for (const SymInt &r : ph0.ranges) size0 = size0 * r;
    // (Only where phase 0 may be long enough to split: more than one slice of 8192.)
    splittable_ = !ph0.vars.empty() && !ph0.reductions.empty() && ph0.stores.empty() &&
                  bounds(renamed(size0), ranges_).max > 8192;
    Config split{"split_block1024", 1024, 1, 1, 1024, 1, true};
    if (splittable_ && outerMax <= 64 && bounds(renamed(size0), ranges_).min >= 65536) best = split;
    configs.push_back(best);
    for (const Config &c : {thread, warp, blk256, blk512, blk1024, split})
      if (c.name != best.name && (!c.split || splittable_)) configs.push_back(c);
    auto index = [&](const Config &c) {
      for (size_t i = 0; i < configs.size(); ++i)
        if (configs[i].name == c.name) return std::to_string(i);
      return std::string("0");
    };
    if (splittable_) {
      splitIndex_ = std::stoi(index(split));
      blk1024Index_ = std::stoi(index(blk1024));
      splitInner_ = cpp(size0);
    }
    // Sizes unknown at compile time: config 0's launcher applies the same rule to the actual
    // sizes and launches the function of the config it picks.
    std::string innerText;
    std::vector<std::string> innerTexts;
    bool known = simplify(outer, ranges_).isConstant();
    for (const sched::Phase &ph : k_.phases) {
      if (ph.vars.empty()) continue;
      SymInt size(1);
      for (const SymInt &r : ph.ranges) size = size * r;
      known = known && simplify(renamed(size), ranges_).isConstant();
      std::string t = cpp(size);
      if (std::find(innerTexts.begin(), innerTexts.end(), t) == innerTexts.end())
        innerTexts.push_back(t);
    }
    for (const std::string &t : innerTexts)
      innerText = innerText.empty() ? t : "std::max<int64_t>(" + innerText + ", " + t + ")";
    if (!known && !innerText.empty()) {
      CodeWriter a;
      a.line("// Config 0 adapts to the sizes: the row mapping of the config that suits them.");
      if (splittable_ && splitIndex_ != 0 && bounds(renamed(size0), ranges_).max >= 65536) {
        std::string call;
        for (NodeId n : buffers_) call += ", " + bufName_[n];
        for (const std::string &sz : sizeSyms_) call += ", " + cname_[sz];
        a.line("if (total <= 64 && " + splitInner_ + " >= 65536) return " + k_.name + "_c" +
               std::to_string(splitIndex_) + "(ctx" + call + ");");
      }
      a.line("const int64_t inner = " + innerText + ";");
      a.line("int32_t which = 0;");
      a.line("unsigned block = 0;");
      a.line("int64_t rows = 1;");
      auto pick = [&](const std::string &cond, const Config &c) {
        a.open(cond);
        a.line("which = " + index(c) + ";");
        a.line("block = " + std::to_string(c.block) + ";");
        a.line("rows = " + std::to_string(c.rows) + ";");
        a.close();
      };
      pick(std::string("if (inner <= 8") + (strided ? " || total >= 4096)" : ")"), thread);
      pick("else if (inner <= 2048 && !(total < 64 && inner > 256))", warp);
      pick("else if (inner <= 16384 && total >= 132)", blk256);
      pick("else", blk1024);
      adaptiveLaunch_ = a.str();
    }
  }
  for (const Config &c : configs) {
    wrapper::KernelConfig kc;
    kc.name = c.name;
    if (pointwise_)
      kc.values = {{"block", c.block}, {"ept", c.ept}, {"vec", c.vec}};
    else
      kc.values = {{"block", c.block}, {"threads_per_row", c.tpr}, {"rows_per_block", c.rows}};
    if (c.split) kc.values.push_back({"split", 1});
    if (info.configs.empty() && !adaptiveLaunch_.empty() && !c.split) {
      kc.name = "adaptive_" + kc.name;
      kc.values.push_back({"adaptive", 1});
    }
    info.configs.push_back(kc);
  }

  std::string fusedNames;
  for (NodeId n : k_.fused)
    if (n >= 0 && size_t(n) < p_.nodes.size())
      fusedNames += (fusedNames.empty() ? "" : ", ") + p_.nodes[size_t(n)].name;
  bool vecParam = pointwise_ && ((flat_ && vecWidth_ > 1) || lastVec_ || dimVec_);
  CodeWriter dev, host;
  for (size_t ci = 0; ci < configs.size(); ++ci) {
    const Config &c = configs[ci];
    std::string fn = k_.name + "_c" + std::to_string(ci);
    out.functions.push_back(fn + "_kernel");
    // --- device
    if (ci) dev.blank();
    dev.line("// kernel " + k_.name + (fusedNames.empty() ? "" : " (" + fusedNames + ")") +
             ", config " + std::to_string(ci) + " " + c.name + ": " +
             (pointwise_ ? (flat_      ? "pointwise, flat"
                            : lastVec_ ? "pointwise, vectors along the last dim"
                            : dimVec_  ? "pointwise, loads vectorized along dim " +
                                            std::to_string(dimVec_->dim)
                                      : "pointwise")
                         : "per outer point, " + std::to_string(k_.phases.size()) + " phase(s)"));
    std::string params = deviceParams();
    if (vecParam) params += std::string(params.empty() ? "" : ", ") + "int32_t coil_vec_ok";
    std::string splitParams =
        std::string(params.empty() ? "" : ", ") + "char *coil_ws, int64_t coil_splits";
    if (c.split) params += splitParams;
    // The body first: emitRows decides the launch bounds' minimum of blocks per SM.
    CodeWriter body;
    emitExtents(body, true);
    splitMode_ = c.split ? 1 : 0;
    fullOccupancy_ = false;
    COIL_TRY_STATUS(pointwise_ ? emitPointwise(body, c, pwLive) : emitRows(body, c));
    splitMode_ = 0;
    std::string bounds = std::to_string(c.block);
    if (fullOccupancy_ && c.block <= 1024) bounds += ", " + std::to_string(2048 / c.block);
    dev.open("extern \"C\" __global__ void __launch_bounds__(" + bounds + ") " + fn + "_kernel(" +
             params + ")");
    const std::string &text = body.str();
    for (size_t pos = 0; pos < text.size();) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      if (end == pos)
        dev.blank();
      else
        dev.line(text.substr(pos, end - pos));
      pos = end + 1;
    }
    dev.close();
    if (c.split) {
      // The combining kernel, after every config's function.
      dev.blank();
      dev.line("// kernel " + k_.name + ", config " + std::to_string(ci) +
               ": combines phase 0's partials, then runs the later phases");
      dev.open("extern \"C\" __global__ void __launch_bounds__(1024) " + fn + "_combine_kernel(" +
               params + ")");
      emitExtents(dev, true);
      splitMode_ = 2;
      Config combine{"combine", 1024, 1, 1, 1024, 1};
      COIL_TRY_STATUS(emitRows(dev, combine));
      splitMode_ = 0;
      dev.close();
    }

    // --- host
    if (ci) host.blank();
    if (ci == 0 && !adaptiveLaunch_.empty() && splittable_ && splitIndex_ != 0)
      host.line("extern \"C\" int32_t " + k_.name + "_c" + std::to_string(splitIndex_) + "(" +
                hostParams() + ");");
    host.open("extern \"C\" int32_t " + fn + "(" + hostParams() + ")");
    std::string empty;
    for (size_t d = 0; d < k_.vars.size(); ++d)
      empty += (empty.empty() ? "" : " || ") + extent_[d] + " <= 0";
    emitExtents(host, false);
    if (!empty.empty()) host.line("if (" + empty + ") return 0;");
    std::string args;
    for (NodeId n : buffers_) args += (args.empty() ? "" : ", ") + std::string("&") + bufName_[n];
    for (const std::string &s : sizeSyms_)
      args += (args.empty() ? "" : ", ") + std::string("&") + cname_[s];
    if (pointwise_) {
      std::string count = "total";
      if (vecParam) {
        // The vector path needs every flat buffer aligned to its vector access.
        std::string cond;
        std::set<NodeId> vecNodes = flatNodes_;
        if (dimVec_)
          for (const Stmt *ld : dimVec_->loads) vecNodes.insert(ld->node);
        if (lastVec_) {
          cond = extent_.back() + " % " + std::to_string(c.vec) + " == 0";
          for (const auto &[key, unused] : lastVec_->loads) vecNodes.insert(key.first);
          for (const auto &[key, unused] : lastVec_->stores) vecNodes.insert(key.first);
        }
        for (NodeId n : vecNodes)
          cond += (cond.empty() ? "" : " && ") + std::string("uintptr_t(") + bufName_[n] + ") % " +
                  std::to_string(c.vec * dtypeSize(p_.nodes[size_t(n)].dtype)) + " == 0";
        host.line("int32_t coil_vec_ok = " + cond + ";");
        args += (args.empty() ? "" : ", ") + std::string("&coil_vec_ok");
        count = "(coil_vec_ok ? coil_ceildiv(total, " + std::to_string(c.vec) + ") : total)";
      }
      host.line("const int64_t grid = coil_ceildiv(" + count + ", " +
                std::to_string(c.block * c.ept) + ");");
    } else if (c.split) {
      std::string base = std::to_string(o_.functionBase);
      host.line("const int64_t inner = " + splitInner_ + ";");
      host.line("int64_t coil_splits = std::min<int64_t>(coil_ceildiv(inner, 8192), "
                "coil_ceildiv(528, total));");
      host.line("coil_splits = std::max<int64_t>(1, std::min<int64_t>(coil_splits, 1024));");
      host.line("const int64_t coil_n = total * coil_splits;");
      host.line("int64_t coil_bytes = 0;");
      for (const auto &[name, type] : splitArrays())
        host.line("coil_bytes += (coil_n * int64_t(sizeof(" + type + ")) + 15) / 16 * 16;");
      host.open("if (coil_splits <= 1 || !ctx->workspace || "
                "coil_bytes > int64_t(ctx->workspace_bytes))");
      host.line("// Not worth splitting, or no room: a block of 1024 threads per outer point.");
      host.line("void *args[] = {" + (args.empty() ? std::string("nullptr") : args) + "};");
      host.line("return coil_launch(ctx, " + base + " + " + std::to_string(blk1024Index_) + ", \"" +
                fn + "\", total, 1024, args);");
      host.close();
      host.line("char *coil_ws = static_cast<char *>(ctx->workspace);");
      host.line("void *args[] = {" + args + (args.empty() ? "" : ", ") +
                "&coil_ws, &coil_splits};");
      host.line("const int32_t coil_r = coil_launch(ctx, " + base + " + " + std::to_string(ci) +
                ", \"" + fn + "\", coil_n, 1024, args);");
      host.line("if (coil_r != 0) return coil_r;");
      host.line("return coil_launch(ctx, " + base + " + " + std::to_string(configs.size()) +
                ", \"" + fn + "_combine\", total, 1024, args);");
      host.close();
      continue;
    } else if (ci == 0 && !adaptiveLaunch_.empty()) {
      std::string text = adaptiveLaunch_;
      for (size_t pos = 0; pos < text.size();) {
        size_t end = text.find('\n', pos);
        host.line(text.substr(pos, end - pos));
        pos = end + 1;
      }
      host.line("const int64_t grid = coil_ceildiv(total, rows);");
      host.line("void *args[] = {" + (args.empty() ? std::string("nullptr") : args) + "};");
      host.line("return coil_launch(ctx, " + std::to_string(o_.functionBase) + " + which, \"" + fn +
                "\", grid, block, args);");
      host.close();
      continue;
    } else {
      host.line("const int64_t grid = coil_ceildiv(total, " + std::to_string(c.rows) + ");");
    }
    host.line("void *args[] = {" + (args.empty() ? std::string("nullptr") : args) + "};");
    host.line("return coil_launch(ctx, " + std::to_string(o_.functionBase) + " + " +
              std::to_string(ci) + ", \"" + fn + "\", grid, " + std::to_string(c.block) +
              ", args);");
    host.close();
  }
  for (const Config &c : configs)
    if (c.split)
      out.functions.push_back(k_.name + "_c" + std::to_string(splitIndex_) + "_combine_kernel");
  out.device = dev.str();
  out.host = host.str();
  return out;
}

} // namespace

Expected<CudaKernelSource> generateCudaKernel(const sched::Kernel &k, const loop::LoopProgram &p,
                                              const CudaCodegenOptions &o) {
  CudaEmitter e(k, p, o);
  return e.run();
}

} // namespace coil::codegen
