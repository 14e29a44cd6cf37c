// CUDA kernel codegen of one fused kernel: the driver (validate, name, plan, then print each
// config's device function and host launcher) and the addressing helpers the printers share.
// The decisions are the planner's (CudaPlan.cpp, data in CudaPlan.h); the device code of
// pointwise kernels prints in CudaPointwise.cpp, of row kernels in CudaRows.cpp, the launchers
// in CudaLaunch.cpp. Scalar statements print through codegen/KernelEmitter, as on the CPU.
#include "codegen/cuda/CudaEmitter.h"
#include "support/Check.h"
#include "support/DType.h"

namespace coil::codegen {

using loop::Body;
using loop::NodeId;
using loop::Stmt;

namespace {

/// One line of the device comment: how the kernel maps to threads.
std::string mappingText(const CudaKernelPlan &plan, size_t phases) {
  if (!plan.pointwise) return "per outer point, " + std::to_string(phases) + " phase(s)";
  switch (plan.mapping) {
  case PointwiseMapping::kFlat:
    return "pointwise, flat";
  case PointwiseMapping::kLastDim:
    return "pointwise, vectors along the last dim";
  case PointwiseMapping::kDim:
    return "pointwise, loads vectorized along dim " + std::to_string(plan.dimVec->dim);
  case PointwiseMapping::kIndexed:
    break;
  }
  return "pointwise";
}

/// Copies the lines of `text` into `w` at its indentation.
void appendLines(CodeWriter &w, const std::string &text) {
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    if (end == pos)
      w.blank();
    else
      w.line(text.substr(pos, end - pos));
    pos = end + 1;
  }
}

} // namespace

CudaEmitter::CudaEmitter(const sched::Kernel &k, const loop::LoopProgram &p,
                         const CudaCodegenOptions &o)
    : KernelEmitterBase(k, p, {"v", "n", "acc", "red", "vec", "t", "j", "rc"},
                        {"f",         "t",        "g",        "e",       "k",       "m",    "u",
                         "xb",        "base",     "row",      "lane",    "total",   "grid", "args",
                         "ctx",       "nvec",     "warp",     "inner",   "which",   "rows", "block",
                         "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize"},
                        "cuda codegen: "),
      o_(o) {
  cudaMath_ = true;
}

SymInt CudaEmitter::linearOffset(NodeId node, const std::vector<SymInt> &idx) const {
  std::vector<SymInt> ridx, shape;
  for (const SymInt &e : idx) ridx.push_back(renamed(e));
  for (const SymInt &d : p_.nodes[size_t(node)].shape) shape.push_back(renamed(d));
  return simplify(linearIndex(shape, ridx), ranges_);
}

std::string CudaEmitter::offsetText(NodeId node, const std::vector<SymInt> &idx) const {
  return linearOffset(node, idx).toCuda(ranges_);
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

Expected<CudaKernelSource> CudaEmitter::run() {
  COIL_TRY_STATUS(validate());
  assignNames();
  COIL_TRY_STATUS(plan());
  CudaKernelSource out;
  out.info = kernelInfo(o_.deviceFile);
  wrapper::KernelInfo &info = out.info;
  for (const CudaConfig &c : plan_.configs) {
    wrapper::KernelConfig kc;
    kc.name = c.name;
    if (plan_.pointwise)
      kc.values = {{"block", c.block}, {"ept", c.ept}, {"vec", c.vec}};
    else
      kc.values = {{"block", c.block}, {"threads_per_row", c.tpr}, {"rows_per_block", c.rows}};
    if (c.split) kc.values.push_back({"split", 1});
    kc.launch = launchPlan(info.configs.size());
    if (info.configs.empty() && !plan_.adaptive.empty() && !c.split) {
      kc.name = "adaptive_" + kc.name;
      kc.values.push_back({"adaptive", 1});
    }
    info.configs.push_back(kc);
  }

  std::string fusedNames;
  for (NodeId n : k_.fused)
    if (n >= 0 && size_t(n) < p_.nodes.size())
      fusedNames += (fusedNames.empty() ? "" : ", ") + p_.nodes[size_t(n)].name;
  CodeWriter dev, host;
  for (size_t ci = 0; ci < plan_.configs.size(); ++ci) {
    const CudaConfig &c = plan_.configs[ci];
    std::string fn = functionName(ci);
    out.functions.push_back(fn + "_kernel");
    if (ci) dev.blank();
    dev.line("// kernel " + k_.name + (fusedNames.empty() ? "" : " (" + fusedNames + ")") +
             ", config " + std::to_string(ci) + " " + c.name + ": " +
             mappingText(plan_, k_.phases.size()));
    std::string params = deviceParams();
    if (plan_.pointwise && plan_.vecWidth > 1)
      params += std::string(params.empty() ? "" : ", ") + "int32_t coil_vec_ok";
    if (c.split)
      params += std::string(params.empty() ? "" : ", ") + "char *coil_ws, int64_t coil_splits";
    CodeWriter body;
    emitExtents(body, true);
    splitMode_ = c.split ? 1 : 0;
    COIL_TRY_STATUS(plan_.pointwise ? emitPointwise(body, c, pwLive_) : emitRows(body, c));
    splitMode_ = 0;
    std::string bounds = std::to_string(c.block);
    if (c.minBlocksPerSm()) bounds += ", " + std::to_string(c.minBlocksPerSm());
    dev.open("extern \"C\" __global__ void __launch_bounds__(" + bounds + ") " + fn + "_kernel(" +
             params + ")");
    appendLines(dev, body.str());
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
      COIL_TRY_STATUS(emitRows(dev, plan_.combine));
      splitMode_ = 0;
      dev.close();
    }
    if (ci) host.blank();
    emitLauncher(host, ci);
  }
  for (const CudaConfig &c : plan_.configs)
    if (c.split)
      out.functions.push_back(functionName(size_t(plan_.splitConfig)) + "_combine_kernel");
  out.device = dev.str();
  out.host = host.str();
  out.plan = plan_;
  return out;
}

Expected<CudaKernelSource> generateCudaKernel(const sched::Kernel &k, const loop::LoopProgram &p,
                                              const CudaCodegenOptions &o) {
  return CudaEmitter(k, p, o).run();
}

} // namespace coil::codegen
