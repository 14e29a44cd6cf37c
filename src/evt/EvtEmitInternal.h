/// \file Shared by the CUTLASS emitter's files (EvtEmit.cpp: visitor types and the GEMM;
/// EvtEmitHost.cpp: host code, the check program and the library entry point). Not a public
/// interface.
#pragma once

#include "evt/EvtEmit.h"

#include <string>
#include <vector>

namespace coil::evt::detail {

/// The CUTLASS element type of a dtype ("cutlass::bfloat16_t", ...).
std::string cppType(DType t);
/// `s` with every character that is not alphanumeric or '_' replaced by '_'.
std::string ident(const std::string &s);
/// A float literal of C++ ("0.5f", "INFINITY").
std::string floatLit(double v);
/// The scalar expression of an op over floats a0, a1, a2 (device functors and host reference).
std::string scalarExpr(Op op);

/// What the host-side printers need of the emitter: the program and its plan, the options, the
/// namespace of the emitted types, the parameter and store nodes in the order of
/// EpilogueParams, the source node C (or -1) and D's element type.
struct HostView {
  const Program &p;
  const VisitorPlan &plan;
  const EmitOptions &o;
  std::string ns;
  bool sm90 = true;
  std::vector<int> params, stores;
  int src = -1;
  DType d = DType::BF16;

  /// The EpilogueParams field of a parameter (`p_<name>`) or store (`o_<name>`).
  std::string field(const Node &n) const { return (isStore(n.kind) ? "o_" : "p_") + n.name; }
};

/// The kernel program's host side (EmitOptions::kernel): random inputs, the GEMM, a reference
/// evaluated on the host from the same IR, and the comparison of every output.
std::string checkProgram(const HostView &v);
/// The library entry point (EmitOptions::entry; LibraryEntry in EvtEmit.h).
Expected<std::string> libraryEntry(const HostView &v);

} // namespace coil::evt::detail
