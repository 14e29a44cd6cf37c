// CUDA device code of row kernels: `tpr` threads per outer point, rows strided over the grid;
// each phase strides its inner space over the row's threads (as 16-byte vectors where the plan
// has them), folds its reductions per thread, then through warp shuffles and shared memory.
// Split reductions: a partial kernel (phase 0 over one slice per block, states to the
// workspace) and a combining kernel (folds the slices, runs the later phases).
#include "codegen/cuda/CudaEmitter.h"
#include "support/DType.h"

#include <algorithm>

namespace coil::codegen {

namespace {
const ReductionStyle kCudaReductions{/*sumF32InDouble=*/false, /*cuda=*/true};
} // namespace

using loop::Body;
using loop::NodeId;
using loop::ReduceKind;
using loop::Stmt;

std::string CudaEmitter::elementAt(NodeId node, const std::vector<SymInt> &idx) const {
  return bufName_.at(node) + "[" + offsetText(node, idx) + "]";
}

void CudaEmitter::emitWorkspace(CodeWriter &w) const {
  w.line("// Phase 0's partial states per (outer point, slice), in the workspace.");
  w.line("const int64_t coil_n = total * coil_splits;");
  w.line("int64_t coil_off = 0;");
  for (const auto &[name, type, bytes] : plan_.splitArrays) {
    w.line(type + " *" + name + " = reinterpret_cast<" + type + " *>(coil_ws + coil_off);");
    w.line("coil_off += (coil_n * int64_t(sizeof(" + type + ")) + 15) / 16 * 16;");
  }
}

Status CudaEmitter::emitRows(CodeWriter &w, const CudaConfig &c) {
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
  const RowRegisters &regs = splitMode_ == 2 ? plan_.combine.regs : c.regs;
  regs_ = &regs;
  bool rowVec = regs.rowVec;
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
    for (const auto &[key, name] : path ? regs.cache : decltype(regs.cache){}) {
      // Width and steps of the run, from the phases that load it.
      for (size_t pi = 0; pi < k_.phases.size(); ++pi) {
        const auto &rv = phaseVec(pi);
        if (!rv || !rv->loads().count(key)) continue;
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
  regs_ = nullptr;
  return okStatus();
}

Status CudaEmitter::emitPhase(CodeWriter &w, const CudaConfig &c, size_t pi) {
  const sched::Phase &ph = k_.phases[pi];
  std::string tag = std::to_string(pi);
  w.line(phaseComment(ph, pi, [&](const SymInt &e) { return dcpp(e); }));
  std::vector<Red> reds = declareReductionVars(w, ph, tag, kCudaReductions);
  std::vector<bool> live = liveStmts(ph.body, &ph);
  const std::optional<VecRuns> &rv = phaseVec(pi);
  if (rv && c.tpr > 1 && vecPath_ == 1)
    COIL_TRY_STATUS(emitPhaseVectors(w, c, pi, *rv, live, reds));
  else
    COIL_TRY_STATUS(emitPhaseElements(w, c, pi, live, reds));
  // Combining the partials of the row's threads (every thread ends with the row's result).
  if (c.tpr > 1 && !ph.vars.empty() && !reds.empty()) emitCombine(w, c, reds);
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
  emitReductionResults(w, tag, reds);
  return okStatus();
}

/// The phase's statements at one inner point: its stores (one thread of the row stores a phase
/// without inner loop) and the folds of its reductions into the thread's partial states.
Status
CudaEmitter::emitInnerBody(CodeWriter &w, const CudaConfig &c, const sched::Phase &ph,
                           const std::vector<bool> &live, const std::vector<Red> &reds,
                           const LoadFn &load,
                           const std::function<std::string(const sched::Store &)> &storeTarget) {
  const Body &b = ph.body;
  std::vector<std::string> valName;
  COIL_TRY_STATUS(emitBody(w, b, live, valName, load));
  // A phase without inner loop runs on every thread of the row: one of them stores.
  bool guard = ph.vars.empty() && c.tpr > 1 && !ph.stores.empty();
  if (guard) w.open("if (lane == 0)");
  for (const sched::Store &st : ph.stores) w.line(storeText(st, b, valName, storeTarget(st)));
  if (guard) w.close();
  for (const Red &red : reds) emitFoldElement(w, red, b, valName, kCudaReductions);
  return okStatus();
}

/// Merges a partial state (its value, NaN flag, position, seen flag expressions) into the
/// thread's own.
void CudaEmitter::foldLines(CodeWriter &o, const Red &red, const std::string &sw,
                            const std::string &sn, const std::string &sp,
                            const std::string &ss) const {
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
}

/// A vector phase: each thread takes V consecutive elements (16 bytes) per step; runs held in
/// registers are loaded by the first phase that needs them.
Status CudaEmitter::emitPhaseVectors(CodeWriter &w, const CudaConfig &c, size_t pi,
                                     const VecRuns &rv, const std::vector<bool> &live,
                                     const std::vector<Red> &reds) {
  const sched::Phase &ph = k_.phases[pi];
  std::string tag = std::to_string(pi);
  // 16-byte accesses: each thread takes V consecutive elements per step.
  std::string V = std::to_string(rv.width), j = "j" + tag;
  const std::string &var = cname_[ph.vars[0]];
  int64_t nv = rv.extent / rv.width, steps = (nv + c.tpr - 1) / c.tpr;
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
  for (const VecRuns::Key &key : rv.loads()) {
    std::string &name = vecOf(key.first, key.second);
    if (!name.empty()) continue;
    name = "vec" + std::to_string(vi++);
    std::string vt =
        "coil_vec<" + std::string(cStorageType(p_.nodes[size_t(key.first)].dtype)) + ", " + V + ">";
    std::string mem = "*reinterpret_cast<const " + vt + " *>(" + bufName_[key.first] + " + " +
                      (key.second == "0" ? "" : "(" + key.second + ") + ") + j + " * " + V + ")";
    auto rc = unrolled ? regs_->cache.find(key) : regs_->cache.end();
    if (rc == regs_->cache.end()) {
      w.line("const " + vt + " " + name + " = " + mem + ";");
    } else if (rowCacheFilled_.count(key)) {
      w.line("const " + vt + " " + name + " = " + rc->second + "[k];");
    } else {
      w.line(rc->second + "[k] = " + mem + ";");
      w.line("const " + vt + " " + name + " = " + rc->second + "[k];");
    }
  }
  if (unrolled)
    for (const VecRuns::Key &key : rv.loads())
      if (regs_->cache.count(key)) rowCacheFilled_.insert(key);
  for (const VecRuns::Key &key : rv.stores()) {
    std::string &name = vecOf(key.first, key.second);
    if (!name.empty()) continue;
    name = "vec" + std::to_string(vi++);
    w.line("coil_vec<" + std::string(cStorageType(p_.nodes[size_t(key.first)].dtype)) + ", " + V +
           "> " + name + ";");
  }
  w.line("#pragma unroll");
  w.open("for (int e = 0; e < " + V + "; ++e)");
  w.line("[[maybe_unused]] const int64_t " + var + " = " + j + " * " + V + " + e;");
  COIL_TRY_STATUS(emitInnerBody(
      w, c, ph, live, reds,
      [&](const Stmt &s) {
        auto it = rv.access.find(refOf(pi, s));
        if (it == rv.access.end()) return elementAt(s.node, s.index);
        return vecOf(it->second.first, it->second.second) + ".v[e]";
      },
      [&](const sched::Store &st) {
        const auto &key = rv.access.at(refOf(pi, st));
        return vecOf(key.first, key.second) + ".v[e]";
      }));
  w.close();
  for (const VecRuns::Key &key : rv.stores()) {
    std::string at = bufName_[key.first] + " + " +
                     (key.second == "0" ? "" : "(" + key.second + ") + ") + j + " * " + V;
    // Small register-held rows (softmax): NVVM splits one of the struct copies into 2-byte
    // stores there; coil_vec_store forces one 16-byte store. (Elsewhere the copies stay whole,
    // and the packing would cost registers: layer norm's row kernel takes 48 instead of 40.)
    if (regs_->fullOccupancy)
      w.line("coil_vec_store(" + at + ", " + vecOf(key.first, key.second) + ");");
    else
      w.line("*reinterpret_cast<coil_vec<" +
             std::string(cStorageType(p_.nodes[size_t(key.first)].dtype)) + ", " + V + "> *>(" +
             at + ") = " + vecOf(key.first, key.second) + ";");
  }
  if (unrolled) w.close();
  w.close();
  w.close();
  return okStatus();
}

/// Element by element: the phase's flattened inner space strided over the row's threads (in a
/// combining kernel, phase 0 folds the slices' partial states instead).
Status CudaEmitter::emitPhaseElements(CodeWriter &w, const CudaConfig &c, size_t pi,
                                      const std::vector<bool> &live, const std::vector<Red> &reds) {
  const sched::Phase &ph = k_.phases[pi];
  std::string tag = std::to_string(pi);
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
        w.line("[[maybe_unused]] const int64_t " + cname_[ph.vars[d]] + " = t" + tag + " % " + ext +
               ";");
        w.line("t" + tag + " /= " + ext + ";");
      }
      w.line("[[maybe_unused]] const int64_t " + cname_[ph.vars[0]] + " = t" + tag + ";");
    }
  }
  if (!(splitMode_ == 2 && pi == 0)) {
    COIL_TRY_STATUS(emitInnerBody(
        w, c, ph, live, reds, [&](const Stmt &s) { return elementAt(s.node, s.index); },
        [&](const sched::Store &st) { return elementAt(st.node, st.index); }));
    w.close();
  }
  return okStatus();
}

/// Warp shuffles, then (a block per row) the warps' partials through shared memory: every
/// thread of the row ends with the row's result.
void CudaEmitter::emitCombine(CodeWriter &w, const CudaConfig &c,
                              const std::vector<Red> &reds) const {
  int64_t width = std::min<int64_t>(c.tpr, 32);
  w.line("#pragma unroll");
  w.open("for (int m = " + std::to_string(width / 2) + "; m > 0; m >>= 1)");
  for (const Red &red : reds) {
    w.line("const " + red.W + " " + red.work + "o = coil_shfl_xor(" + red.work + ", m);");
    if (!red.nan.empty()) w.line("const int " + red.nan + "o = coil_shfl_xor(" + red.nan + ", m);");
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

} // namespace coil::codegen
