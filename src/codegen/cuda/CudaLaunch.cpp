// CUDA host launchers, printed from the kernel's plan: per config, the extents, the empty-space
// test, the vector path's alignment test, the grid (ceil(count / per block)), and the launch; an
// adaptive config 0 prints the plan's cases; a split config sizes its slices and workspace and
// launches the partial and combining kernels (or its whole-row fallback).
#include "codegen/cuda/CudaEmitter.h"
#include "support/DType.h"

namespace coil::codegen {

using loop::NodeId;

std::string CudaEmitter::launchArgs() const {
  std::string args;
  for (NodeId n : buffers_) args += (args.empty() ? "" : ", ") + std::string("&") + bufName_.at(n);
  for (const std::string &s : sizeSyms_)
    args += (args.empty() ? "" : ", ") + std::string("&") + cname_.at(s);
  return args;
}

void CudaEmitter::emitLauncher(CodeWriter &host, size_t ci) const {
  const CudaConfig &c = plan_.configs[ci];
  const std::string fn = functionName(ci);
  const bool adaptive = ci == 0 && !plan_.adaptive.empty();
  if (adaptive && plan_.splitConfig > 0)
    host.line("extern \"C\" int32_t " + functionName(size_t(plan_.splitConfig)) + "(" +
              hostParams() + ");");
  host.open("extern \"C\" int32_t " + fn + "(" + hostParams() + ")");
  std::string empty;
  for (size_t d = 0; d < k_.vars.size(); ++d)
    empty += (empty.empty() ? "" : " || ") + extent_[d] + " <= 0";
  emitExtents(host, false);
  if (!empty.empty()) host.line("if (" + empty + ") return 0;");
  std::string args = launchArgs();
  auto argArray = [&](const std::string &extra) {
    std::string all = args + (args.empty() || extra.empty() ? "" : ", ") + extra;
    return "void *args[] = {" + (all.empty() ? std::string("nullptr") : all) + "};";
  };
  auto launch = [&](const std::string &function, const std::string &name, const std::string &grid,
                    const std::string &block) {
    return "coil_launch(ctx, " + std::to_string(o_.functionBase) + " + " + function + ", \"" +
           name + "\", " + grid + ", " + block + ", args)";
  };
  if (plan_.pointwise) {
    std::string count = "total";
    if (plan_.vecWidth > 1) {
      // The vector path needs every buffer it accesses as vectors aligned to its access.
      std::string cond;
      if (plan_.vecNeedsLastMultiple)
        cond = extent_.back() + " % " + std::to_string(c.vec) + " == 0";
      for (NodeId n : plan_.vecAlign)
        cond += (cond.empty() ? "" : " && ") + std::string("uintptr_t(") + bufName_.at(n) + ") % " +
                std::to_string(c.vec * dtypeSize(p_.nodes[size_t(n)].dtype)) + " == 0";
      host.line("int32_t coil_vec_ok = " + cond + ";");
      args += (args.empty() ? "" : ", ") + std::string("&coil_vec_ok");
      count = "(coil_vec_ok ? coil_ceildiv(total, " + std::to_string(c.vec) + ") : total)";
    }
    host.line("const int64_t grid = coil_ceildiv(" + count + ", " +
              std::to_string(c.block * c.ept) + ");");
  } else if (c.split) {
    host.line("const int64_t inner = " + plan_.splitInner + ";");
    host.line("int64_t coil_splits = std::min<int64_t>(coil_ceildiv(inner, " +
              std::to_string(kSplitSliceElems) + "), coil_ceildiv(" +
              std::to_string(kSplitTargetBlocks) + ", total));");
    host.line("coil_splits = std::max<int64_t>(1, std::min<int64_t>(coil_splits, " +
              std::to_string(kSplitMaxSlices) + "));");
    host.line("const int64_t coil_n = total * coil_splits;");
    host.line("int64_t coil_bytes = 0;");
    for (const auto &[name, type, bytes] : plan_.splitArrays)
      host.line("coil_bytes += (coil_n * int64_t(sizeof(" + type + ")) + 15) / 16 * 16;");
    host.open("if (coil_splits <= 1 || !ctx->workspace || "
              "coil_bytes > int64_t(ctx->workspace_bytes))");
    host.line("// Not worth splitting, or no room: a block of 1024 threads per outer point.");
    host.line(argArray(""));
    host.line("return " +
              launch(std::to_string(plan_.wholeConfig), fn, "total",
                     std::to_string(plan_.configs[size_t(plan_.wholeConfig)].block)) +
              ";");
    host.close();
    host.line("char *coil_ws = static_cast<char *>(ctx->workspace);");
    host.line(argArray("&coil_ws, &coil_splits"));
    host.line("const int32_t coil_r = " +
              launch(std::to_string(ci), fn, "coil_n", std::to_string(c.block)) + ";");
    host.line("if (coil_r != 0) return coil_r;");
    host.line("return " +
              launch(std::to_string(plan_.configs.size()), fn + "_combine", "total",
                     std::to_string(plan_.combine.block)) +
              ";");
    host.close();
    return;
  } else if (adaptive) {
    host.line("// Config 0 adapts to the sizes: the row mapping of the config that suits them.");
    if (plan_.adaptiveSplit) {
      std::string call;
      for (NodeId n : buffers_) call += ", " + bufName_.at(n);
      for (const std::string &sz : sizeSyms_) call += ", " + cname_.at(sz);
      host.line("if (total <= " + std::to_string(kSplitMaxTotal) + " && " + plan_.splitInner +
                " >= " + std::to_string(kSplitMinInner) + ") return " +
                functionName(size_t(plan_.splitConfig)) + "(ctx" + call + ");");
    }
    std::string inner;
    for (const std::string &t : plan_.adaptiveInner)
      inner = inner.empty() ? t : "std::max<int64_t>(" + inner + ", " + t + ")";
    host.line("const int64_t inner = " + inner + ";");
    host.line("int32_t which = 0;");
    host.line("unsigned block = 0;");
    host.line("int64_t rows = 1;");
    for (const AdaptiveCase &a : plan_.adaptive) {
      const CudaConfig &to = plan_.configs[size_t(a.config)];
      host.open(a.condition);
      host.line("which = " + std::to_string(a.config) + ";");
      host.line("block = " + std::to_string(to.block) + ";");
      host.line("rows = " + std::to_string(to.rows) + ";");
      host.close();
    }
    host.line("const int64_t grid = coil_ceildiv(total, rows);");
    host.line(argArray(""));
    host.line("return " + launch("which", fn, "grid", "block") + ";");
    host.close();
    return;
  } else {
    host.line("const int64_t grid = coil_ceildiv(total, " + std::to_string(c.rows) + ");");
  }
  host.line(argArray(""));
  host.line("return " + launch(std::to_string(ci), fn, "grid", std::to_string(c.block)) + ";");
  host.close();
}

wrapper::LaunchPlan CudaEmitter::launchPlan(size_t ci) const {
  const CudaConfig &c = plan_.configs[ci];
  constexpr int64_t kMaxGrid = 2147483647; // coil_launch clamps grid.x; the kernels stride
  SymInt total(1);
  for (const SymInt &r : k_.ranges) total = total * r;
  wrapper::LaunchPlan lp;
  lp.block = c.block;
  if (plan_.pointwise) {
    lp.grid = min(ceilDiv(total, c.block * c.ept), kMaxGrid);
    if (plan_.vecWidth > 1) {
      lp.vectorGrid = min(ceilDiv(ceilDiv(total, c.vec), c.block * c.ept), kMaxGrid);
      lp.vectorLastMultiple = plan_.vecNeedsLastMultiple;
    }
  } else if (c.split) {
    SymInt inner(1);
    for (const SymInt &r : k_.phases[0].ranges) inner = inner * r;
    SymInt splits =
        max(SymInt(1),
            min(min(ceilDiv(inner, kSplitSliceElems), ceilDiv(SymInt(kSplitTargetBlocks), total)),
                kSplitMaxSlices));
    SymInt n = total * splits;
    lp.grid = min(n, kMaxGrid);
    for (const WorkspaceArray &a : plan_.splitArrays)
      lp.workspaceBytes = lp.workspaceBytes + ceilDiv(n * a.elemBytes, 16) * 16;
    lp.fallback = plan_.wholeConfig;
  } else {
    lp.grid = min(ceilDiv(total, c.rows), kMaxGrid);
  }
  return lp;
}

} // namespace coil::codegen
