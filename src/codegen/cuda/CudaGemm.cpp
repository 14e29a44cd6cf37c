// CUDA codegen of GEMM kernels: the epilogue program printed as CUTLASS units (evt/EvtEmit.h),
// and the host launchers that call them.
#include "codegen/cuda/CudaGemm.h"

#include "codegen/KernelEmitter.h"
#include "evt/EvtEmit.h"
#include "support/Sha256.h"

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
      : KernelEmitterBase(k, p, {"v", "n", "t"}, {"ctx", "in", "out", "m"}, "cuda codegen: "),
        o_(o) {}

  Expected<CudaKernelSource> run() {
    const sched::GemmMainloop &g = *k_.gemm;
    COIL_TRY_STATUS(validate());
    assignNames();
    CudaKernelSource out;
    out.info = kernelInfo("");
    size_t n = std::min<size_t>(std::size(kConfigs), size_t(std::max(1, o_.maxConfigs)));
    std::vector<std::string> inputs;
    for (size_t i = 0; i < g.inputs.size(); ++i) inputs.push_back("in" + std::to_string(i));
    CodeWriter host;
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
    out.info.sourceFile = out.units.front().first;
    out.host = host.str();
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
      eo.source = "coil compile";
      eo.entry = evt::LibraryEntry{"coil_gemm_" + tag, in, {"D"}};
      return evt::emitCutlass(prog, g.plan, eo);
    };
    COIL_TRY(std::string draft, print("unit"));
    std::string tag = sha256Hex(draft).substr(0, 16);
    COIL_TRY(std::string text, print(tag));
    return std::make_pair("gemm_" + tag, std::move(text));
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
    std::string params = "const coil_cuda_ctx *ctx";
    for (NodeId b : buffers_) params += ", " + param(b);
    for (const std::string &s : sizeSyms_) params += ", int64_t " + cname_.at(s);
    w.line("// kernel " + k_.name + ", config " + std::to_string(ci) + " " + c.name +
           ": CUTLASS GEMM with the epilogue " + g.description);
    w.open("extern \"C\" int32_t " + k_.name + "_c" + std::to_string(ci) + "(" + params + ")");
    std::string ins;
    for (NodeId in : g.inputs) ins += (ins.empty() ? "" : ", ") + bufName_.at(in);
    if (ins.empty())
      w.line("const void *const *in = nullptr;");
    else
      w.line("const void *in[] = {" + ins + "};");
    NodeId d = k_.phases[0].stores[0].node;
    w.line("void *out[] = {" + bufName_.at(d) + "};");
    w.line("const int64_t m = " + cpp(g.m) + ";");
    w.line("return " + entry + "(" + bufName_.at(g.a) + ", " + bufName_.at(g.b) + ", in, out, m, " +
           cpp(g.n) + ", " + cpp(g.k) +
           ", ctx->stream, ctx->workspace, ctx->workspace_bytes, ctx->error, ctx->error_size);");
    w.close();
  }

  const CudaGemmOptions &o_;
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
