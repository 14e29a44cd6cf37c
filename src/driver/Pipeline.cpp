#include "driver/Pipeline.h"

#include "driver/BuildWrapper.h"
#include "driver/Install.h"
#include "driver/Tune.h"
#include "ir/Verifier.h"
#include "lower/ChannelsLast.h"
#include "lower/FoldConvBias.h"
#include "lower/FoldGemmBias.h"
#include "lower/LoopVerify.h"
#include "lower/Lower.h"
#include "passes/FoldConstants.h"
#include "passes/FuseAttention.h"
#include "sched/FuseGemmEpilogue.h"
#include "sched/Schedule.h"
#include "sched/ScheduleVerify.h"
#include "wrapper/CppBackend.h"
#include "wrapper/DebugInstrument.h"
#include "wrapper/HostCopies.h"
#include "wrapper/MemoryPlan.h"
#include "wrapper/Package.h"
#include "wrapper/PlaceExterns.h"
#include "wrapper/Verify.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#ifndef COIL_INCLUDE_DIR
#error "COIL_INCLUDE_DIR must name the include directory of coil"
#endif

namespace coil {

namespace {

/// Times the stages one after another; each finished stage is recorded in `timings` and
/// reported to `onStage`.
class StageTimer {
public:
  StageTimer(std::vector<std::pair<std::string, double>> *timings, const CompileOptions &o)
      : timings_(timings), o_(o), t_(std::chrono::steady_clock::now()) {}
  void done(const std::string &stage) {
    auto now = std::chrono::steady_clock::now();
    double s = std::chrono::duration<double>(now - t_).count();
    if (timings_) timings_->emplace_back(stage, s);
    if (o_.onStage) o_.onStage(stage, s);
    t_ = now;
  }

private:
  std::vector<std::pair<std::string, double>> *timings_;
  const CompileOptions &o_;
  std::chrono::steady_clock::time_point t_;
};

/// The text of the file at `path`; a runtime error when it cannot be read.
Expected<std::string> readTextFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Error::runtime("cannot read '" + path + "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// coil's public headers (include/coil/*.h), which generated code includes: $COIL_INCLUDE_DIR,
/// else those of the installation this compiler runs from (driver/Install.h), else the source
/// tree coil was built from.
std::string coilIncludeDir() {
  namespace fs = std::filesystem;
  if (const char *env = std::getenv("COIL_INCLUDE_DIR"); env && *env) return env;
  std::string installed = installedFile("include/coil/model_abi.h");
  if (!installed.empty()) return fs::path(installed).parent_path().parent_path().string();
  return COIL_INCLUDE_DIR;
}

/// Kernel code per generated C++ file (about 1.5 s of -O3 compile each): a model's kernels go
/// into files of about this size, compiled in parallel, so that a large model's build uses every
/// processor; each file repeats the prelude (0.5 s), so small models keep one file.
constexpr size_t kKernelFileBytes = 48 * 1024;

/// Assigns each CPU kernel its source file, in order: "src/kernels.cpp", then
/// "src/kernels_1.cpp", ..., a new file when the current one would pass kKernelFileBytes.
void assignKernelFiles(std::vector<codegen::CpuKernelSource> &kernels) {
  size_t file = 0, bytes = 0;
  for (codegen::CpuKernelSource &k : kernels) {
    if (bytes > 0 && bytes + k.code.size() > kKernelFileBytes) {
      ++file;
      bytes = 0;
    }
    bytes += k.code.size();
    k.info.sourceFile =
        file == 0 ? "src/kernels.cpp" : "src/kernels_" + std::to_string(file) + ".cpp";
  }
}

/// Some extern of a CUDA program runs on the host.
bool hasHostFallback(const wrapper::WrapperProgram &p) {
  for (const wrapper::Line &l : p.lines) {
    if (const auto *e = std::get_if<wrapper::ExternKernelAlloc>(&l);
        e && e->place == wrapper::ExternPlace::kHost)
      return true;
    if (const auto *e = std::get_if<wrapper::ExternKernelOut>(&l);
        e && e->place == wrapper::ExternPlace::kHost)
      return true;
  }
  return false;
}

/// Whether GEMMs fuse with their epilogues into CUTLASS kernels (CompileOptions::gemm), and
/// the CUTLASS include directory in `include` when they do.
Expected<bool> useCutlass(const CompileOptions &o, std::string *include, std::string *why) {
  if (o.gemm != "auto" && o.gemm != "cutlass" && o.gemm != "cublaslt")
    return Error::user("unknown GEMM backend '" + o.gemm +
                       "' (supported: auto, cutlass, cublaslt)");
  if (o.gemm == "cublaslt") {
    *why = "--gemm cublaslt";
    return false;
  }
  // The generated CUTLASS GEMMs are right on an H100 (test/gemm, 10 of 10 models) but no
  // faster than cuBLASLt and the epilogue kernel (bench/RESULTS.md, session 11: 0.038 against
  // 0.038 ms, 0.396 against 0.398 ms), and each unit takes about 50 s of nvcc: opt-in.
  if (o.gemm == "auto") {
    *why = "--gemm auto: cuBLASLt (CUTLASS GEMMs, --gemm cutlass, measured no faster and "
           "compile for about 50 s)";
    return false;
  }
  // The CUTLASS units are sm_90a code; on other GPUs the kernels run their unfused config.
  bool sm90 = false;
  for (const std::string &a : o.cudaArchs) sm90 = sm90 || a == "sm_90a";
  if (!sm90)
    return Error::user("--gemm cutlass generates sm_90a kernels (on other GPUs they run the "
                       "unfused GEMM and epilogue): the architectures must include sm_90a");
  COIL_TRY(*include, findCutlassIncludeDir());
  return true;
}

} // namespace

Expected<std::unique_ptr<Compilation>> compileGraph(Graph g, const CompileOptions &o) {
  if (o.device != "cpu" && o.device != "cuda")
    return Error::user("unknown device '" + o.device + "' (supported: cpu, cuda)");
  bool cuda = o.device == "cuda";
  auto c = std::make_unique<Compilation>();
  StageTimer timer(&c->timings, o);
  // Shape logic on constants (e.g. the flags and sizes of an expanded Attention function)
  // becomes constants, so that lowering sees static shapes.
  // (Folding refines the types it made stale: RefineShapes.h.)
  COIL_TRY(c->graph, foldConstants(g));
  if (o.verifyEach) COIL_TRY_STATUS(verifyGraphAfter(c->graph, "foldConstants"));
  // Attention spelled out as MatMul / Softmax / MatMul becomes one Attention node, which lowers
  // to the fused extern (COIL_FUSE_ATTENTION=0 keeps the explicit graph). Masks built on
  // constants by the pass fold once more.
  const char *fa = std::getenv("COIL_FUSE_ATTENTION");
  if (!fa || std::string(fa) != "0") {
    int fused = 0;
    COIL_TRY(c->graph, fuseAttention(c->graph, &fused));
    if (o.verifyEach) COIL_TRY_STATUS(verifyGraphAfter(c->graph, "fuseAttention"));
    if (fused > 0) {
      COIL_TRY(c->graph, foldConstants(c->graph));
      if (o.verifyEach) COIL_TRY_STATUS(verifyGraphAfter(c->graph, "foldConstants"));
    }
  }
  // Channels-last convolutions: on for CUDA, off for the CPU; COIL_CHANNELS_LAST=0/1 decides.
  const char *cl = std::getenv("COIL_CHANNELS_LAST");
  if (cl && *cl ? std::string(cl) != "0" : cuda) {
    COIL_TRY(c->graph, loop::convertToChannelsLast(c->graph));
    if (o.verifyEach) COIL_TRY_STATUS(verifyGraphAfter(c->graph, "convertToChannelsLast"));
  }
  timer.done("fold");

  loop::LowerOptions lo;
  lo.cpuExterns = !cuda;
  COIL_TRY(c->loops, loop::lowerGraph(c->graph, lo));
  if (o.verifyEach) COIL_TRY_STATUS(loop::verifyLoopProgram(c->loops, "lowering"));
  // Bias adds (and ReLUs) after GEMMs become the GEMM extern's epilogue.
  loop::foldGemmBias(c->loops);
  if (o.verifyEach) COIL_TRY_STATUS(loop::verifyLoopProgram(c->loops, "foldGemmBias"));
  // Conv bias adds (and a ReLU or Clip after them) become the conv extern's epilogue. On CUDA
  // (the dtypes whose fused extern has a CUDA twin, f16 and bf16, and a ReLU only) the twins
  // have not run on a GPU yet: COIL_CUDA_CONV_BIAS=1 opts in until they have.
  const char *cb = std::getenv("COIL_CUDA_CONV_BIAS");
  if (!cuda || (cb && std::string(cb) == "1")) {
    loop::FoldConvBiasOptions cbo;
    cbo.cuda = cuda;
    loop::foldConvBias(c->loops, cbo);
    if (o.verifyEach) COIL_TRY_STATUS(loop::verifyLoopProgram(c->loops, "foldConvBias"));
  }
  timer.done("lower");
  if (o.printAfter == "lower") std::cerr << loop::printLoopProgram(c->loops);

  COIL_TRY(c->schedule, sched::scheduleProgram(c->loops));
  if (o.verifyEach) COIL_TRY_STATUS(sched::verifySchedule(c->schedule, "scheduleProgram"));
  if (cuda) {
    std::string why;
    COIL_TRY(bool cutlass, useCutlass(o, &c->cutlassInclude, &why));
    sched::GemmFusionOptions fo;
    fo.enabled = cutlass;
    sched::fuseGemmEpilogues(c->schedule, fo);
    if (o.verifyEach) COIL_TRY_STATUS(sched::verifySchedule(c->schedule, "fuseGemmEpilogues"));
    if (!cutlass) c->schedule.gemmNotes.push_back("every GEMM runs through cuBLASLt (" + why + ")");
  }
  timer.done("schedule");
  if (o.printAfter == "schedule") std::cerr << sched::fusionReport(c->schedule);

  std::vector<wrapper::KernelInfo> infos;
  int32_t functions = 0;
  for (const sched::Step &st : c->schedule.steps) {
    const auto *k = std::get_if<sched::Kernel>(&st);
    if (!k) continue;
    if (cuda && k->gemm) {
      codegen::CudaGemmOptions go;
      go.maxConfigs = o.cutlassConfigs;
      go.functionBase = functions;
      COIL_TRY(codegen::CudaKernelSource src, codegen::generateCudaGemmKernel(*k, c->loops, go));
      if (o.verifyEach) COIL_TRY_STATUS(codegen::checkCudaPlanText(src, *k, c->loops));
      functions += int32_t(src.functions.size());
      infos.push_back(src.info);
      c->cudaKernels.push_back(std::move(src));
    } else if (cuda) {
      codegen::CudaCodegenOptions co;
      co.functionBase = functions;
      COIL_TRY(codegen::CudaKernelSource src, codegen::generateCudaKernel(*k, c->loops, co));
      if (o.verifyEach) COIL_TRY_STATUS(codegen::checkCudaPlanText(src, *k, c->loops));
      functions += int32_t(src.functions.size());
      infos.push_back(src.info);
      c->cudaKernels.push_back(std::move(src));
    } else {
      COIL_TRY(codegen::CpuKernelSource src, codegen::generateCpuKernel(*k, c->loops));
      if (o.verifyEach) COIL_TRY_STATUS(codegen::checkCpuPlanText(src, *k));
      c->kernels.push_back(std::move(src));
    }
  }
  if (!cuda) {
    assignKernelFiles(c->kernels);
    for (const codegen::CpuKernelSource &k : c->kernels) infos.push_back(k.info);
  }
  timer.done("codegen");

  COIL_TRY(c->wrapper, buildWrapperProgram(c->schedule, std::move(infos), &c->bufferNodes));
  // A CUDA program: buffers live on the device, and externs with a CUDA twin call it.
  if (cuda) c->wrapper.device = "cuda";
  COIL_TRY_STATUS(wrapper::placeExterns(c->wrapper));
  if (o.verifyEach) COIL_TRY_STATUS(wrapper::verifyWrapper(c->wrapper));
  COIL_TRY_STATUS(wrapper::planMemory(c->wrapper, wrapper::MemoryPlanOptions{}));
  // The debug printer's lines, always: the runtime enables them without recompiling.
  wrapper::insertDebugPrints(c->wrapper);
  // Each call's config per size bucket, by the cost model (writePackage may measure instead).
  c->tuning = tune::chooseConfigsHeuristic(c->wrapper);
  // Host fallbacks (CUDA): their synchronization and copies as lines, inside the DebugPrints.
  wrapper::insertHostCopies(c->wrapper);
  if (o.verifyEach) COIL_TRY_STATUS(wrapper::verifyWrapper(c->wrapper));
  timer.done("wrapper");
  if (o.printAfter == "wrapper") std::cerr << wrapper::emitCppWrapper(c->wrapper);
  return c;
}

Expected<PackageResult> writePackage(const Compilation &c, const std::string &dir,
                                     const CompileOptions &o) {
  StageTimer timer(nullptr, o);
  std::vector<wrapper::ConstantBlob> blobs;
  for (wrapper::BufferId b : c.wrapper.constants) {
    const wrapper::Buffer &buf = c.wrapper.buffers[size_t(b)];
    // The constant node of this buffer holds the graph value with the weights.
    const Tensor *t = nullptr;
    for (const loop::Node &n : c.loops.nodes)
      if (n.name == buf.name)
        if (auto *cn = std::get_if<loop::ConstantNode>(&n.kind))
          t = &c.graph.constant(cn->graphValue);
    COIL_CHECK(t) << "constant buffer " << buf.name << " has no tensor";
    wrapper::ConstantBlob blob;
    blob.name = buf.name;
    blob.dtype = t->dtype();
    blob.shape = t->shape();
    blob.data = t->data();
    blob.size = t->nbytes();
    blobs.push_back(blob);
  }
  wrapper::PackageOptions po;
  po.device = o.device;
  COIL_TRY(CpuTarget cpu, resolveCpuTarget(o.toolchain.cpuTarget));
  po.cpuTarget = cpu.level;
  po.cpuFeatures = cpu.features;
  if (o.device != "cuda" && buildsLevelCopies(o.toolchain.cxx)) po.cpuClones = cpu.clones;
  if (!o.toolchain.cpuTarget.empty())
    po.compileOptions.emplace_back("cpu-target", o.toolchain.cpuTarget);
  po.compileOptions.insert(po.compileOptions.end(), o.recordedOptions.begin(),
                           o.recordedOptions.end());
  bool cuda = c.wrapper.device == "cuda";
  if (cuda) {
    wrapper::CudaPackageInfo info;
    for (const codegen::CudaKernelSource &k : c.cudaKernels)
      info.functions.insert(info.functions.end(), k.functions.begin(), k.functions.end());
    info.archs = o.cudaArchs;
    info.hostFallback = hasHostFallback(c.wrapper);
    info.workspaceBytes = o.cudaWorkspaceBytes;
    po.cuda = info;
    po.tuning = c.tuning;
  }
  COIL_TRY_STATUS(wrapper::writePackage(dir, c.wrapper, blobs, po));
  timer.done("write");
  const wrapper::WrapperProgram *program = &c.wrapper;
  wrapper::WrapperProgram tuned; // the program with measured choices, when tuning succeeds

  ToolchainOptions to = o.toolchain;
  if (!to.onProgress) to.onProgress = o.onProgress;
  to.includes.push_back(coilIncludeDir());
  PackageResult r;
  r.dir = dir;
  std::vector<SourceFile> sources, units;
  if (cuda) {
    COIL_TRY(CudaToolkit tk, findCudaToolkit());
    std::string device = codegen::cudaKernelPrelude(), host = codegen::cudaLauncherPrelude();
    for (const codegen::CudaKernelSource &k : c.cudaKernels) {
      device += "\n" + k.device;
      host += "\n" + k.host;
    }
    COIL_TRY(r.fatbin,
             buildFatbin(dir, {"src/kernels.cu", device}, "src/kernels.fatbin", o.cudaArchs, to));
    timer.done(r.fatbin.cacheHit ? "nvcc (cached)" : "nvcc");
    to.systemIncludes.push_back(tk.includeDir);
    to.linkFlags.push_back("-L" + tk.stubLibDir);
    to.linkFlags.push_back("-lcuda");
    // CUTLASS GEMM units (one per distinct GEMM config), built by nvcc beside the launchers.
    std::set<std::string> unitNames;
    for (const codegen::CudaKernelSource &k : c.cudaKernels)
      for (const auto &[name, text] : k.units)
        if (unitNames.insert(name).second) units.push_back({name, text});
    if (!units.empty()) {
      to.nvcc = tk.nvcc;
      to.cudaFlags = {"-gencode arch=compute_90a,code=sm_90a", "-I" + c.cutlassInclude};
      to.linkFlags.push_back("-L" + tk.libDir);
      to.linkFlags.push_back("-lcudart_static -ldl -lrt -lpthread");
    }
    if (o.tune) {
      auto start = std::chrono::steady_clock::now();
      std::vector<tune::TuneTask> tasks = tune::tuneTasks(c.wrapper);
      tune::MeasureInput mi;
      mi.packageDir = dir;
      mi.functions = po.cuda->functions;
      mi.launcherSource = host;
      mi.units = units;
      mi.toolchain = to;
      mi.workspaceBytes = o.cudaWorkspaceBytes;
      mi.timeoutSeconds = o.tuneTimeoutSeconds;
      mi.toolchain.onProgress = nullptr; // the launchers' build is part of tuning
      mi.onProgress = o.onProgress;
      Expected<tune::MeasureResult> m = tune::measureConfigs(c.wrapper, tasks, mi);
      if (m) {
        tuned = c.wrapper;
        wrapper::TuningRecord rec = tune::applyChoices(tuned, tasks, &m->timings);
        rec.device = m->device;
        if (o.verifyEach) COIL_TRY_STATUS(wrapper::verifyWrapper(tuned));
        program = &tuned;
        po.tuning = rec;
        COIL_TRY_STATUS(wrapper::writePackage(dir, tuned, blobs, po));
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.2f", s);
        r.tuning = "tuned " + std::to_string(tasks.size()) + " kernel call(s) on " +
                   (m->device.empty() ? "the GPU" : m->device) + " in " + buf + " s" +
                   (m->cached ? " (timings from the compile cache)" : "");
      } else {
        r.tuning =
            "warning: tuning failed, the configs are the cost model's: " + m.error().message();
        po.tuning->note = m.error().message();
        COIL_TRY_STATUS(wrapper::writePackage(dir, c.wrapper, blobs, po));
      }
      timer.done("tune");
    }
    // Host glue (grid computations, calls in sequence): -O1 builds it several times faster
    // than -O3 and it has no loops that -O3 would make faster.
    sources = {{"src/launchers.cpp", host, 1}};
    sources.insert(sources.end(), units.begin(), units.end());
  } else {
    // The kernel files (assignKernelFiles), each the prelude and its kernels in order, then the
    // wrapper (host glue, at -O1 as above).
    for (const codegen::CpuKernelSource &k : c.kernels) {
      if (sources.empty() || sources.back().name != k.info.sourceFile)
        sources.push_back({k.info.sourceFile, codegen::cpuKernelPrelude()});
      sources.back().text += "\n" + k.code;
      for (size_t c = 0; c < k.info.configs.size(); ++c)
        sources.back().exports.push_back(k.info.entry(c));
    }
    if (sources.empty()) sources.push_back({"src/kernels.cpp", codegen::cpuKernelPrelude()});
  }
  (void)program; // src/wrapper.cpp as writePackage wrote it: the last program, with the
                 // SHA-256 of its metadata.json
  COIL_TRY(std::string wrapperCpp,
           readTextFile((std::filesystem::path(dir) / "src" / "wrapper.cpp").string()));
  sources.push_back({"src/wrapper.cpp", std::move(wrapperCpp), 1});
  COIL_TRY(r.build, buildSharedObject(dir, sources, "model.so", to));
  timer.done(r.build.cacheHit ? "build (cached)" : "build");
  COIL_TRY_STATUS(wrapper::sealPackage(dir, wrapper::sealedFiles(po)));
  return r;
}

} // namespace coil
