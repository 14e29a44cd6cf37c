// A hand-built WrapperProgram with every line kind and every argument kind (NaN and infinite
// floats, symbols defined by an allocating extern, a MultiOutput, a debug print), for the tests
// of the JSON/DOT export and the Python wrapper backend.
#pragma once

#include "WrapperTestUtil.h"

#include <limits>

namespace coil::wrapper::testing {

/// Buffers: 0 x (input f32[N, 4]), 1 c (constant f32[4]), 2 u (output f32[U]), 3 v (output
/// i64[U]), 4 t (f32[N, 4] at arena + 0), 5 tv (view of t + 16), 6 t2 (reuses t), 7 y (output
/// f32[N, 4], model name "y out"), 8 d (f32[N], not in the arena).
/// Lines: 0 Comment, 1 BindSymbol, 2 KernelDefinition, 3 Allocate t, 4 KernelCall k config 1,
/// 5-6 DebugPrint before/after, 7 Reinterpret, 8 ExternKernelOut, 9 Reuse, 10 Allocate d,
/// 11 FreeIfNotReused d, 12 ExternKernelAlloc (u, v, U), 13 MultiOutput, 14 Free t2.
inline WrapperProgram everyLineKind() {
  ProgramBuilder b("every \"kind\"");
  BufferId x = b.input("x", DType::F32, {sym("N"), 4});
  BufferId c = b.constant("c", DType::F32, {4});
  BufferId u = b.output("u", DType::F32, {sym("U")});
  BufferId v = b.output("v", DType::I64, {sym("U")});
  BufferId t = b.temp("t", DType::F32, {sym("N"), 4});
  BufferId tv = b.temp("tv", DType::F32, {sym("N"), 3});
  BufferId t2 = b.temp("t2", DType::F32, {sym("N"), 4});
  BufferId y = b.output("y", DType::F32, {sym("N"), 4});
  BufferId d = b.temp("d", DType::F32, {sym("N")});
  b.p.buffers[y].ioName = "y out";
  b.p.buffers[t].arenaOffset = SymInt(0);
  b.p.symbols["N"] = {1, 64};
  b.p.arenaBytes = sym("N") * 16 + 64;
  KernelId k = b.kernel(
      "k", {bufParam("x", DType::F32, false), bufParam("t", DType::F32, true), sizeParam("n")}, 2);
  b.p.kernels[k].iterationSpace = {sym("N"), 4};
  b.p.kernels[k].origins = {0, 1};
  b.line(Comment{"bind the size symbols"});
  b.bind("N", x, 0);
  b.line(KernelDefinition{k});
  b.alloc(t);
  b.call(k, {bufArg(x), bufArg(t), sizeArg(sym("N") * 4)}, 1);
  DebugPrint before;
  before.when = DebugPrint::When::Before;
  before.launch = "k";
  before.values = {
      {DebugValue::Kind::Buffer, "x", x, SymInt(0), 0.0},
      {DebugValue::Kind::Size, "n", -1, sym("N") * 4, 0.0},
      {DebugValue::Kind::Float, "eps", -1, SymInt(0), std::numeric_limits<double>::quiet_NaN()}};
  b.line(before);
  DebugPrint after;
  after.when = DebugPrint::When::After;
  after.launch = "k";
  after.values = {{DebugValue::Kind::Buffer, "t", t, SymInt(0), 0.0}};
  b.line(after);
  b.line(Reinterpret{tv, t, SymInt(16)});
  b.line(ExternKernelOut{"coil_cpu_test_out",
                         {exIn(tv), exIn(c), exOut(y), exSize(sym("N")),
                          exFloat(std::numeric_limits<double>::infinity()), exFloat(0.5)},
                         {2}});
  b.line(Reuse{t, t2});
  b.alloc(d);
  b.line(FreeIfNotReused{d});
  b.line(ExternKernelAlloc{"coil_cpu_test_alloc",
                           {exIn(x), exOut(u), exOut(v), exSym("U"), exSize(sym("N") * 4)},
                           {"U"},
                           {3}});
  b.line(MultiOutput{v, u, 1});
  b.free(t2);
  return b.p;
}

} // namespace coil::wrapper::testing
