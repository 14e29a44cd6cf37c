#include "driver/Pipeline.h"

#include "driver/BuildWrapper.h"
#include "lower/Lower.h"
#include "passes/FoldConstants.h"
#include "passes/RefineShapes.h"
#include "sched/Schedule.h"
#include "wrapper/CppBackend.h"
#include "wrapper/DebugInstrument.h"
#include "wrapper/MemoryPlan.h"
#include "wrapper/Package.h"
#include "wrapper/Verify.h"

#include <chrono>
#include <iostream>

#ifndef COIL_INCLUDE_DIR
#error "COIL_INCLUDE_DIR must name the include directory of coil"
#endif

namespace coil {

namespace {

class StageTimer {
public:
  explicit StageTimer(Compilation &c) : c_(c), t_(std::chrono::steady_clock::now()) {}
  void done(const std::string &stage) {
    auto now = std::chrono::steady_clock::now();
    c_.timings.emplace_back(stage, std::chrono::duration<double>(now - t_).count());
    t_ = now;
  }

private:
  Compilation &c_;
  std::chrono::steady_clock::time_point t_;
};

} // namespace

Expected<std::unique_ptr<Compilation>> compileGraph(Graph g, const CompileOptions &o) {
  if (o.device != "cpu")
    return Error::user("--device " + o.device + " is not supported yet (supported: cpu)");
  auto c = std::make_unique<Compilation>();
  StageTimer timer(*c);
  // Shape logic on constants (e.g. the flags and sizes of an expanded Attention function)
  // becomes constants, so that lowering sees static shapes.
  COIL_TRY(c->graph, foldConstants(g));
  COIL_TRY_STATUS(refineShapes(c->graph));
  timer.done("fold");

  COIL_TRY(c->loops, loop::lowerGraph(c->graph));
  timer.done("lower");
  if (o.printAfter == "lower") std::cerr << loop::printLoopProgram(c->loops);

  COIL_TRY(c->schedule, sched::scheduleProgram(c->loops));
  timer.done("schedule");
  if (o.printAfter == "schedule") std::cerr << sched::fusionReport(c->schedule);

  std::vector<wrapper::KernelInfo> infos;
  for (const sched::Step &st : c->schedule.steps) {
    const auto *k = std::get_if<sched::Kernel>(&st);
    if (!k) continue;
    COIL_TRY(codegen::CpuKernelSource src, codegen::generateCpuKernel(*k, c->loops));
    infos.push_back(src.info);
    c->kernels.push_back(std::move(src));
  }
  timer.done("codegen");

  COIL_TRY(c->wrapper, buildWrapperProgram(c->schedule, std::move(infos), &c->bufferNodes));
  if (o.verifyEach) COIL_TRY_STATUS(wrapper::verifyWrapper(c->wrapper));
  COIL_TRY_STATUS(wrapper::planMemory(c->wrapper, wrapper::MemoryPlanOptions{}));
  // The debug printer's lines, always: the runtime enables them without recompiling.
  wrapper::insertDebugPrints(c->wrapper);
  if (o.verifyEach) COIL_TRY_STATUS(wrapper::verifyWrapper(c->wrapper));
  timer.done("wrapper");
  if (o.printAfter == "wrapper") std::cerr << wrapper::emitCppWrapper(c->wrapper);
  return c;
}

Expected<PackageResult> writePackage(const Compilation &c, const std::string &dir,
                                     const CompileOptions &o) {
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
  po.compileOptions = o.recordedOptions;
  COIL_TRY_STATUS(wrapper::writePackage(dir, c.wrapper, blobs, po));

  std::string kernels = codegen::cpuKernelPrelude();
  for (const codegen::CpuKernelSource &k : c.kernels) kernels += "\n" + k.code;
  std::vector<SourceFile> sources = {{"src/kernels.cpp", kernels},
                                     {"src/wrapper.cpp", wrapper::emitCppWrapper(c.wrapper)}};
  ToolchainOptions to = o.toolchain;
  to.includes.push_back(COIL_INCLUDE_DIR);
  PackageResult r;
  r.dir = dir;
  COIL_TRY(r.build, buildSharedObject(dir, sources, "model.so", to));
  return r;
}

} // namespace coil
