// CUDA codegen of GEMM kernels: the epilogue program printed as CUTLASS units (evt/EvtEmit.h),
// and the host launchers that call them.
#include "codegen/cuda/CudaGemm.h"

#include "codegen/KernelEmitter.h"
#include "evt/EvtEmit.h"
#include "kernels/Externs.h"
#include "support/Sha256.h"

#include <cstdio>

namespace coil::codegen {
namespace {

using loop::NodeId;

struct GemmConfig {
  const char *name;
  evt::GemmShape shape;
};

const GemmConfig kConfigs[] = {
    {"coop_128x128", {128, 128, 64, 1, 1, false}},
    {"coop_128x256", {128, 256, 64, 1, 1, false}},
    {"pingpong_64x128", {64, 128, 64, 1, 1, true}},
    {"coop_128x128_cluster2x1", {128, 128, 64, 2, 1, false}},
};

class GemmEmitter : public KernelEmitterBase {
public:
  GemmEmitter(const sched::Kernel &k, const loop::LoopProgram &p, const CudaGemmOptions &o)
      : KernelEmitterBase(k, p, {"v", "n", "t"},
                          {"ctx", "in", "out", "m", "prod", "sub", "rc", "bytes"},
                          "cuda codegen: "),
        o_(o) {}

  Expected<CudaKernelSource> run() {
    const sched::GemmMainloop &g = *k_.gemm;
    COIL_TRY_STATUS(validate());
    assignNames();
    CudaKernelSource out;
    out.info = kernelInfo("");
    size_t n = n_ = std::min<size_t>(std::size(kConfigs), size_t(std::max(1, o_.maxConfigs)));
    std::vector<std::string> inputs;
    for (size_t i = 0; i < g.inputs.size(); ++i) inputs.push_back("in" + std::to_string(i));
    // The unfused form's epilogue kernel: this kernel's body reading the product from a buffer.
    sched::Kernel ep = k_;
    ep.gemm.reset();
    ep.name = k_.name + "_epilogue";
    ep.reads = g.epilogueReads;
    ep.fused.erase(std::remove(ep.fused.begin(), ep.fused.end(), g.node), ep.fused.end());
    CudaCodegenOptions eo;
    eo.functionBase = o_.functionBase;
    COIL_TRY(CudaKernelSource epi, generateCudaKernel(ep, p_, eo));
    out.device = epi.device;
    out.functions = epi.functions;
    CodeWriter host;
    host.line(externDeclaration());
    host.line("extern \"C\" int32_t " + launcherName(n) + "(" + hostParams() + ");");
    host.blank();
    for (size_t ci = 0; ci < n; ++ci) {
      const GemmConfig &c = kConfigs[ci];
      COIL_TRY(auto unit, cutlassUnit(c, inputs));
      wrapper::KernelConfig kc;
      kc.name = c.name;
      kc.values = {{"tile_m", c.shape.tileM},       {"tile_n", c.shape.tileN},
                   {"tile_k", c.shape.tileK},       {"cluster_m", c.shape.clusterM},
                   {"cluster_n", c.shape.clusterN}, {"pingpong", c.shape.pingpong ? 1 : 0}};
      out.info.configs.push_back(kc);
      if (ci) host.blank();
      emitLauncher(host, ci, c, unit.first);
      out.units.push_back({"src/" + unit.first + ".cu", unit.second});
    }
    wrapper::KernelConfig fb;
    fb.name = "cublaslt_unfused";
    fb.values = {{"unfused", 1}};
    out.info.configs.push_back(fb);
    host.blank();
    emitFallback(host, n, ep, epi.info);
    out.info.sourceFile = out.units.front().first;
    out.host = epi.host + "\n" + host.str();
    for (size_t ci = 0; ci < n; ++ci) out.gemmConfigs.push_back(kConfigs[ci].name);
    out.plan = epi.plan;
    return out;
  }

private:
  /// The config's CUTLASS unit: (entry name, text). Its name is a hash of its text, printed
  /// first with placeholder names.
  Expected<std::pair<std::string, std::string>> cutlassUnit(const GemmConfig &c,
                                                            const std::vector<std::string> &in) {
    const sched::GemmMainloop &g = *k_.gemm;
    auto print = [&](const std::string &tag) -> Expected<std::string> {
      evt::Program prog = g.epilogue;
      prog.fnName = tag;
      evt::EmitOptions eo;
      eo.arch = evt::Arch::Sm90;
      eo.inputs = g.dtype;
      eo.gemm = c.shape;
      eo.rowMajorB = g.rowMajorB;
      eo.columnMajorA = g.columnMajorA;
      eo.source = "coil compile";
      eo.entry = evt::LibraryEntry{"coil_gemm_" + tag, in, {"D"}};
      return evt::emitCutlass(prog, g.plan, eo);
    };
    COIL_TRY(std::string draft, print("unit"));
    std::string tag = sha256Hex(draft).substr(0, 16);
    COIL_TRY(std::string text, print(tag));
    return std::make_pair("gemm_" + tag, std::move(text));
  }

  std::string launcherName(size_t ci) const { return wrapper::KernelInfo::entryName(k_.name, ci); }

  std::string hostParams() const {
    std::string params = "const coil_cuda_ctx *ctx";
    for (NodeId b : buffers_) params += ", " + param(b);
    for (const std::string &s : sizeSyms_) params += ", int64_t " + cname_.at(s);
    return params;
  }

  std::string hostArgs() const {
    std::string args = "ctx";
    for (NodeId b : buffers_) args += ", " + bufName_.at(b);
    for (const std::string &s : sizeSyms_) args += ", " + cname_.at(s);
    return args;
  }

  /// The extern's CUDA twin, as the extern table types it.
  std::string cudaFunction() const {
    std::optional<kernels::ExternRef> r = kernels::findExtern(k_.gemm->call.function);
    return r ? kernels::cudaSymbol(r->id, r->dtype) : std::string();
  }

  std::string externDeclaration() const {
    std::optional<kernels::ExternRef> r = kernels::findExtern(k_.gemm->call.function);
    std::string s = "extern \"C\" int32_t " + cudaFunction() + "(const coil_cuda_ctx *";
    for (char kind : r->info().args)
      s += kind == 'B'   ? ", const void *"
           : kind == 'O' ? ", void *"
           : kind == 'D' ? ", double"
           : kind == 'S' ? ", int64_t *"
                         : ", int64_t";
    return s + ");";
  }

  /// The unfused config: the GEMM extern into a product buffer, then the epilogue kernel.
  void emitFallback(CodeWriter &w, size_t ci, const sched::Kernel &ep,
                    const wrapper::KernelInfo &epInfo) {
    const sched::GemmMainloop &g = *k_.gemm;
    NodeId d = k_.phases[0].stores[0].node;
    DType pt = p_.nodes[size_t(g.node)].dtype;
    bool inPlace = p_.nodes[size_t(d)].dtype == pt;
    w.line("// kernel " + k_.name + ", config " + std::to_string(ci) +
           " cublaslt_unfused: the GEMM through cuBLASLt, then the epilogue as a kernel");
    w.open("extern \"C\" int32_t " + launcherName(ci) + "(" + hostParams() + ")");
    w.line("const int64_t m = " + cpp(g.m) + ";");
    w.line("const size_t bytes = size_t((m * " + cpp(g.n) + " * " + std::to_string(dtypeSize(pt)) +
           " + 255) / 256 * 256);");
    w.line("coil_cuda_ctx sub = *ctx;");
    w.line("void *prod = nullptr;");
    w.open("if (ctx->workspace && bytes <= ctx->workspace_bytes)");
    w.line("// The product at the workspace's start; cuBLASLt keeps the rest.");
    w.line("prod = ctx->workspace;");
    w.line("sub.workspace = ctx->workspace_bytes > bytes ? static_cast<char *>(ctx->workspace) "
           "+ bytes : nullptr;");
    w.line("sub.workspace_bytes = ctx->workspace_bytes - bytes;");
    w.close();
    if (inPlace) {
      w.open("else");
      w.line("// In place: the epilogue reads each element of the product before it stores it.");
      w.line("prod = " + bufName_.at(d) + ";");
      w.close();
    } else {
      w.open("else");
      w.line("if (ctx->error && ctx->error_size) std::snprintf(ctx->error, ctx->error_size, "
             "\"kernel " +
             k_.name + ": the product (%zu bytes) does not fit the workspace\", bytes);");
      w.line("return 1;");
      w.close();
    }
    std::string call;
    for (const loop::ExternArg &a : g.call.args) {
      std::string v;
      switch (a.kind) {
      case loop::ExternArg::Kind::Node:
        v = bufName_.at(a.node);
        break;
      case loop::ExternArg::Kind::Output:
        v = "prod";
        break;
      case loop::ExternArg::Kind::Int:
        v = "int64_t(" + cpp(a.sym) + ")";
        break;
      case loop::ExternArg::Kind::Float: {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.17g", a.number);
        v = buf;
        break;
      }
      case loop::ExternArg::Kind::OutSymbol:
        v = "nullptr";
        break;
      }
      call += ", " + v;
    }
    w.line("const int32_t rc = " + cudaFunction() + "(&sub" + call + ");");
    w.line("if (rc != 0) return rc;");
    // The epilogue kernel's params: its buffers (the product is `prod`), then its sizes.
    std::set<NodeId> all(ep.reads.begin(), ep.reads.end());
    all.insert(ep.writes.begin(), ep.writes.end());
    std::string args = "ctx";
    auto it = all.begin();
    for (const wrapper::KernelParam &prm : epInfo.params) {
      if (prm.kind == wrapper::KernelParam::Kind::Buffer) {
        NodeId n = *it++;
        args +=
            ", " + (n == g.node ? "static_cast<const " + std::string(cStorageType(pt)) + " *>(prod)"
                                : bufName_.at(n));
      } else {
        args += ", " + cname_.at(prm.name);
      }
    }
    w.line("return " + ep.name + "_c0(" + args + ");");
    w.close();
  }

  std::string param(NodeId n) const {
    return std::string(writeSet_.count(n) ? "" : "const ") +
           cStorageType(p_.nodes[size_t(n)].dtype) + " *" + bufName_.at(n);
  }

  void emitLauncher(CodeWriter &w, size_t ci, const GemmConfig &c, const std::string &unit) {
    const sched::GemmMainloop &g = *k_.gemm;
    std::string entry = "coil_" + unit;
    w.line("extern \"C\" int32_t " + entry +
           "(const void *, const void *, const void *const *, void *const *, int64_t, int64_t, "
           "int64_t, void *, void *, size_t, char *, size_t);");
    w.line("// kernel " + k_.name + ", config " + std::to_string(ci) + " " + c.name +
           ": CUTLASS GEMM with the epilogue " + g.description);
    w.open("extern \"C\" int32_t " + launcherName(ci) + "(" + hostParams() + ")");
    w.line("// CUTLASS's code is sm_90a's: other GPUs run the unfused config.");
    w.line("if (ctx->sm_version != 90) return " + launcherName(n_) + "(" + hostArgs() + ");");
    std::string ins;
    for (NodeId in : g.inputs) ins += (ins.empty() ? "" : ", ") + bufName_.at(in);
    if (ins.empty())
      w.line("const void *const *in = nullptr;");
    else
      w.line("const void *in[] = {" + ins + "};");
    NodeId d = k_.phases[0].stores[0].node;
    w.line("void *out[] = {" + bufName_.at(d) + "};");
    w.line("const int64_t m = " + cpp(g.m) + ";");
    w.line("const int32_t rc = " + entry + "(" + bufName_.at(g.a) + ", " + bufName_.at(g.b) +
           ", in, out, m, " + cpp(g.n) + ", " + cpp(g.k) +
           ", ctx->stream, ctx->workspace, ctx->workspace_bytes, ctx->error, ctx->error_size);");
    w.line("// 2: CUTLASS cannot run these sizes or pointers; the unfused pair can.");
    w.line("if (rc == 2) return " + launcherName(n_) + "(" + hostArgs() + ");");
    w.line("return rc;");
    w.close();
  }

  const CudaGemmOptions &o_;
  size_t n_ = 0; ///< CUTLASS configs; the unfused one is config n_
};

} // namespace

Expected<CudaKernelSource> generateCudaGemmKernel(const sched::Kernel &k,
                                                  const loop::LoopProgram &p,
                                                  const CudaGemmOptions &o) {
  if (!k.gemm) return Error::internal("cuda codegen: kernel '" + k.name + "' computes no GEMM");
  GemmEmitter e(k, p, o);
  return e.run();
}

} // namespace coil::codegen
