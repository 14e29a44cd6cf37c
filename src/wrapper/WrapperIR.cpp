#include "wrapper/WrapperIR.h"

#include "support/Overloaded.h"

namespace coil::wrapper {

SymInt Buffer::numel() const {
  SymInt n = 1;
  for (const SymInt &d : shape) n = n * d;
  return n;
}

SymInt Buffer::bytes() const {
  return numel() * SymInt(int64_t(dtypeSize(dtype)));
}

const char *lineKindName(const Line &l) {
  return std::visit(Overloaded{[](const Comment &) { return "Comment"; },
                               [](const BindSymbol &) { return "BindSymbol"; },
                               [](const Allocate &) { return "Allocate"; },
                               [](const Reuse &) { return "Reuse"; },
                               [](const Reinterpret &) { return "Reinterpret"; },
                               [](const Free &) { return "Free"; },
                               [](const FreeIfNotReused &) { return "FreeIfNotReused"; },
                               [](const KernelDefinition &) { return "KernelDefinition"; },
                               [](const KernelCall &) { return "KernelCall"; },
                               [](const ExternKernelOut &) { return "ExternKernelOut"; },
                               [](const ExternKernelAlloc &) { return "ExternKernelAlloc"; },
                               [](const MultiOutput &) { return "MultiOutput"; },
                               [](const DebugPrint &) { return "DebugPrint"; },
                               [](const Synchronize &) { return "Synchronize"; },
                               [](const HostAllocate &) { return "HostAllocate"; },
                               [](const HostFree &) { return "HostFree"; },
                               [](const CopyToHost &) { return "CopyToHost"; },
                               [](const CopyToDevice &) { return "CopyToDevice"; }},
                    l);
}

} // namespace coil::wrapper
