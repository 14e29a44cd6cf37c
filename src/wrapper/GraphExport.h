/// \file The graph export backend: a WrapperProgram as data (src/wrapper.json, for tools) and
/// as a picture (src/wrapper.dot, Graphviz).
///
/// wrapper.json (schema "coil-wrapper", version kWrapperJsonVersion, docs/WRAPPER-JSON.md)
/// holds every buffer (dtype, shape, kind, byte size, arena offset), every kernel (params,
/// configs, iteration space), every line with its kind and all its fields, the symbols with
/// their ranges and the arena size; SymInts are their canonical text (parseSymInt reads them).
///
/// wrapper.dot draws buffers (ellipses, by kind) and launches (kernel calls: boxes, extern
/// calls: hexagons), data edges (a buffer read by a launch, a launch writing a buffer) and alias
/// edges (Reuse, Reinterpret, MultiOutput: dashed). Emitters only: both follow the program.
/// Deterministic: the text depends only on the program.
#pragma once

#include "wrapper/WrapperIR.h"

#include <string>

namespace coil::wrapper {

constexpr int32_t kWrapperJsonVersion = 1;

/// The text of wrapper.json for `p`.
std::string emitWrapperJson(const WrapperProgram &p);

/// The text of wrapper.dot for `p` (a `digraph`).
std::string emitWrapperDot(const WrapperProgram &p);

} // namespace coil::wrapper
