// CUDA device code of pointwise kernels: a 1-D grid-stride loop over the flattened outer space,
// with the vector path the plan chose (flat, along the last dim, or loads along another dim)
// under the launcher's alignment test, and the scalar path.
#include "codegen/cuda/CudaEmitter.h"
#include "support/DType.h"

#include <algorithm>

namespace coil::codegen {

using loop::NodeId;
using loop::Stmt;

namespace {

bool lookup(const std::map<StmtRef, bool> &m, StmtRef key) {
  auto it = m.find(key);
  return it != m.end() && it->second;
}

} // namespace

std::string CudaEmitter::vecType(NodeId n, const std::string &width) const {
  return "coil_vec<" + std::string(cStorageType(p_.nodes[size_t(n)].dtype)) + ", " + width + ">";
}

std::string CudaEmitter::pointwiseLoad(const Stmt &s) const {
  if (plan_.mapping == PointwiseMapping::kFlat && lookup(plan_.flatAccess, refOf(0, s)))
    return bufName_.at(s.node) + "[f]";
  return bufName_.at(s.node) + "[" + offsetText(s.node, s.index) + "]";
}

/// The scalar path: element f.
Status CudaEmitter::emitScalarElement(CodeWriter &w, const std::vector<bool> &live) {
  const sched::Phase &ph = k_.phases[0];
  bool flat = plan_.mapping == PointwiseMapping::kFlat;
  if (!flat) emitDecompose(w, "f", true);
  std::vector<std::string> valName;
  COIL_TRY_STATUS(
      emitBody(w, ph.body, live, valName, [&](const Stmt &s) { return pointwiseLoad(s); }));
  for (const sched::Store &st : ph.stores)
    w.line(storeText(st, ph.body, valName,
                     bufName_[st.node] + "[" +
                         (flat ? std::string("f") : offsetText(st.node, st.index)) + "]"));
  return okStatus();
}

Status CudaEmitter::vecLoop(CodeWriter &w, const CudaConfig &c, const std::string &count,
                            const std::function<Status(bool)> &inner) {
  std::string B = std::to_string(c.block), BE = std::to_string(c.block * c.ept);
  std::string E = std::to_string(c.ept);
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
}

Status CudaEmitter::emitPointwise(CodeWriter &w, const CudaConfig &c,
                                  const std::vector<bool> &live) {
  if (plan_.dimVec && c.vec > 1) COIL_TRY_STATUS(emitDimVecPath(w, c, live));
  if (plan_.lastVec && c.vec > 1) COIL_TRY_STATUS(emitLastVecPath(w, c, live));
  if (plan_.mapping == PointwiseMapping::kFlat && c.vec > 1)
    COIL_TRY_STATUS(emitFlatVecPath(w, c, live));
  // The scalar path: a grid-stride loop over the elements.
  std::string B = std::to_string(c.block), BE = std::to_string(c.block * c.ept);
  w.open("for (int64_t base = int64_t(blockIdx.x) * " + BE +
         "; base < total; base += " + "int64_t(gridDim.x) * " + BE + ")");
  if (c.ept > 1) {
    w.line("#pragma unroll");
    w.open("for (int u = 0; u < " + std::to_string(c.ept) + "; ++u)");
    w.line("const int64_t f = base + u * " + B + " + threadIdx.x;");
  } else {
    w.line("const int64_t f = base + threadIdx.x;");
  }
  w.open("if (f < total)");
  COIL_TRY_STATUS(emitScalarElement(w, live));
  w.close();
  if (c.ept > 1) w.close();
  w.close();
  return okStatus();
}

/// Loads vectorized along dim plan_.dimVec->dim: group g is `width` consecutive points of it.
Status CudaEmitter::emitDimVecPath(CodeWriter &w, const CudaConfig &c,
                                   const std::vector<bool> &live) {
  const sched::Phase &ph = k_.phases[0];
  std::string E = std::to_string(c.ept);
  const DimVecs &dv = *plan_.dimVec;
  std::string V = std::to_string(c.vec);
  size_t rank = k_.vars.size();
  w.open("if (coil_vec_ok)");
  w.line("const int64_t nvec = total / " + V + ";");
  w.open("");
  for (size_t i = 0; i < dv.loads.size(); ++i)
    w.line(vecType(loadAt(dv.loads[i]).node, V) + " vec" + std::to_string(i) + "[" + E + "];");
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
        w.line(x + " = t % " + I + "(" + n + ")" + (d == dv.dim ? " * " + V : std::string()) + ";");
        w.line("t /= " + I + "(" + n + ");");
      }
      w.close();
    }
  };
  const std::string &var = cname_.at(k_.vars[dv.dim]);
  COIL_TRY_STATUS(vecLoop(w, c, "nvec", [&](bool math) -> Status {
    decompose();
    if (!math) {
      w.open("");
      w.line("const int64_t " + var + " = xb;");
      for (size_t i = 0; i < dv.loads.size(); ++i) {
        const Stmt &ld = loadAt(dv.loads[i]);
        w.line("vec" + std::to_string(i) + "[u] = *reinterpret_cast<const " + vecType(ld.node, V) +
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
      auto it = std::find(dv.loads.begin(), dv.loads.end(), refOf(0, st));
      if (it == dv.loads.end()) return pointwiseLoad(st);
      return "vec" + std::to_string(it - dv.loads.begin()) + "[u].v[e]";
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
  return okStatus();
}

/// Vectors along the last dim: group g is elements [g * V, g * V + V) of one row.
Status CudaEmitter::emitLastVecPath(CodeWriter &w, const CudaConfig &c,
                                    const std::vector<bool> &live) {
  const sched::Phase &ph = k_.phases[0];
  std::string E = std::to_string(c.ept);
  // Vectors along the last dim: group g is elements [g * V, g * V + V) of one row.
  const VecRuns &lv = *plan_.lastVec;
  std::string V = std::to_string(c.vec);
  const std::string &last = cname_.at(k_.vars.back());
  w.open("if (coil_vec_ok)");
  w.line("const int64_t nvec = total / " + V + ";");
  std::map<VecRuns::Key, std::string> vecName;
  for (const VecRuns::Key &key : lv.loads()) vecName[key] = "vec" + std::to_string(vecName.size());
  for (const VecRuns::Key &key : lv.stores()) vecName[key] = "vec" + std::to_string(vecName.size());
  auto at = [&](const VecRuns::Key &key) {
    return bufName_[key.first] + " + " + (key.second == "0" ? "" : "(" + key.second + ") + ") +
           "xb";
  };
  w.open("");
  for (const VecRuns::Key &key : lv.loads())
    w.line(vecType(key.first, V) + " " + vecName[key] + "[" + E + "];");
  COIL_TRY_STATUS(vecLoop(w, c, "nvec", [&](bool math) -> Status {
    emitDecompose(w, "g * " + V, true, "xb");
    if (!math) {
      for (const VecRuns::Key &key : lv.loads())
        w.line(vecName[key] + "[u] = *reinterpret_cast<const " + vecType(key.first, V) + " *>(" +
               at(key) + ");");
      return okStatus();
    }
    for (const VecRuns::Key &key : lv.stores())
      w.line(vecType(key.first, V) + " " + vecName[key] + ";");
    w.line("#pragma unroll");
    w.open("for (int e = 0; e < " + V + "; ++e)");
    w.line("[[maybe_unused]] const int64_t " + last + " = xb + e;");
    std::vector<std::string> valName;
    COIL_TRY_STATUS(emitBody(w, ph.body, live, valName, [&](const Stmt &s) {
      auto it = lv.access.find(refOf(0, s));
      if (it == lv.access.end()) return pointwiseLoad(s);
      return vecName[it->second] + "[u].v[e]";
    }));
    for (const sched::Store &st : ph.stores)
      w.line(storeText(st, ph.body, valName, vecName[lv.access.at(refOf(0, st))] + ".v[e]"));
    w.close();
    for (const VecRuns::Key &key : lv.stores())
      w.line("*reinterpret_cast<" + vecType(key.first, V) + " *>(" + at(key) +
             ") = " + vecName[key] + ";");
    return okStatus();
  }));
  w.close();
  w.line("return;");
  w.close();
  return okStatus();
}

/// One vector access per flat buffer at the flat index, then the last total % V elements.
Status CudaEmitter::emitFlatVecPath(CodeWriter &w, const CudaConfig &c,
                                    const std::vector<bool> &live) {
  const sched::Phase &ph = k_.phases[0];
  std::string E = std::to_string(c.ept), B = std::to_string(c.block);
  std::string V = std::to_string(c.vec);
  w.open("if (coil_vec_ok)");
  w.line("const int64_t nvec = total / " + V + ";");
  // One vector access per buffer at the flat index.
  std::map<NodeId, std::string> vecName;
  for (NodeId n : plan_.flatNodes) vecName[n] = "vec" + std::to_string(vecName.size());
  w.open("");
  for (NodeId n : plan_.flatNodes)
    if (!writeSet_.count(n)) w.line(vecType(n, V) + " " + vecName[n] + "[" + E + "];");
  COIL_TRY_STATUS(vecLoop(w, c, "nvec", [&](bool math) -> Status {
    if (!math) {
      for (NodeId n : plan_.flatNodes)
        if (!writeSet_.count(n))
          w.line(vecName[n] + "[u] = *reinterpret_cast<const " + vecType(n, V) + " *>(" +
                 bufName_[n] + " + g * " + V + ");");
      return okStatus();
    }
    for (NodeId n : plan_.flatNodes)
      if (writeSet_.count(n)) w.line(vecType(n, V) + " " + vecName[n] + ";");
    w.line("#pragma unroll");
    w.open("for (int e = 0; e < " + V + "; ++e)");
    std::vector<std::string> valName;
    COIL_TRY_STATUS(emitBody(w, ph.body, live, valName, [&](const Stmt &s) {
      if (lookup(plan_.flatAccess, refOf(0, s))) return vecName[s.node] + "[u].v[e]";
      return bufName_[s.node] + "[" + offsetText(s.node, s.index) + "]";
    }));
    for (const sched::Store &st : ph.stores)
      w.line(storeText(st, ph.body, valName, vecName[st.node] + ".v[e]"));
    w.close();
    for (NodeId n : plan_.flatNodes)
      if (writeSet_.count(n))
        w.line("*reinterpret_cast<" + vecType(n, V) + " *>(" + bufName_[n] + " + g * " + V +
               ") = " + vecName[n] + ";");
    return okStatus();
  }));
  w.close();
  w.line("// The last total % " + V + " elements.");
  w.open("for (int64_t f = nvec * " + V + " + int64_t(blockIdx.x) * " + B +
         " + threadIdx.x; f < total; f += int64_t(gridDim.x) * " + B + ")");
  COIL_TRY_STATUS(emitScalarElement(w, live));
  w.close();
  w.line("return;");
  w.close();
  return okStatus();
}

} // namespace coil::codegen
