// Pictures of a compilation for `coil inspect`: self-contained SVG documents (no Graphviz),
// printed from the Wrapper IR and the graph.
//   fusionSvg: the graph's nodes (ONNX nodes) grouped by the kernel or extern call that runs
//     them, launches top to bottom in execution order; runs of identical launch groups (the
//     layers of a transformer, the blocks of a ResNet) drawn once with their count; weights
//     listed with the node that takes them, not drawn as edges.
//   memorySvg: the arena over time: each planned buffer a bar at its offset (height: its bytes)
//     from the launch that first touches it to the last; buffers allocated at run time in a
//     band below.
// Elements carry classes and data- attributes (step, node, repeat, buffer) for tools and tests.
#pragma once

#include "ir/Graph.h"
#include "wrapper/MemoryPlan.h"
#include "wrapper/WrapperIR.h"

#include <string>

namespace coil::cli {

std::string fusionSvg(const Graph &g, const wrapper::WrapperProgram &p, const std::string &title);
std::string memorySvg(const wrapper::WrapperProgram &p, const wrapper::MemoryReport &r,
                      const std::string &title);

} // namespace coil::cli
