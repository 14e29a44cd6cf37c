// Tests of the CPU kernel code generator: kernels and programs built by hand, generated, compiled
// together into one shared object (one compiler run), loaded with dlopen, run through every
// config's launcher on random inputs and compared with values computed here.
#include "codegen/cpu/CpuCodegen.h"

#include "support/DType.h"

#include <cmath>
#include <cstdlib>
#include <dlfcn.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <limits>
#include <random>
#include <unistd.h>

using namespace coil;
using namespace coil::loop;
using coil::codegen::CpuCodegenOptions;
using coil::codegen::CpuKernelSource;
using coil::codegen::generateCpuKernel;

namespace {

const SymInt X0 = SymInt::symbol("%x0"), X1 = SymInt::symbol("%x1");
const SymInt R0 = SymInt::symbol("%r0"), R1 = SymInt::symbol("%r1");
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

/// Statement builders over one body.
struct B {
  Body body;
  Val add(Stmt s) { return body.add(std::move(s)); }
  Val load(const LoopProgram &p, NodeId n, std::vector<SymInt> idx) {
    Stmt s;
    s.kind = Stmt::Kind::Load;
    s.node = n;
    s.dtype = p.nodes[size_t(n)].dtype;
    s.index = std::move(idx);
    return add(s);
  }
  Val cnst(DType t, double v) {
    Stmt s;
    s.kind = Stmt::Kind::Constant;
    s.dtype = t;
    s.number = v;
    return add(s);
  }
  Val icnst(DType t, int64_t v) {
    Stmt s;
    s.kind = Stmt::Kind::Constant;
    s.dtype = t;
    s.isInt = true;
    s.intNumber = v;
    return add(s);
  }
  Val index(const SymInt &e, DType t = DType::I64) {
    Stmt s;
    s.kind = Stmt::Kind::Index;
    s.dtype = t;
    s.expr = e;
    return add(s);
  }
  Val op(ScalarOp o, std::vector<Val> args) {
    Stmt s;
    s.kind = Stmt::Kind::Op;
    s.op = o;
    bool boolResult = o == ScalarOp::Eq || o == ScalarOp::Ne || o == ScalarOp::Lt ||
                      o == ScalarOp::Le || o == ScalarOp::Gt || o == ScalarOp::Ge ||
                      o == ScalarOp::IsNaN || o == ScalarOp::Not || o == ScalarOp::And ||
                      o == ScalarOp::Or || o == ScalarOp::Xor;
    s.dtype =
        boolResult ? DType::Bool : body.stmts[size_t(args[o == ScalarOp::Select ? 1 : 0])].dtype;
    s.args = std::move(args);
    return add(s);
  }
  Val cast(Val v, DType t) {
    Stmt s;
    s.kind = Stmt::Kind::Cast;
    s.dtype = t;
    s.args = {v};
    return add(s);
  }
  Val bitcast(Val v, DType t) {
    Stmt s;
    s.kind = Stmt::Kind::BitCast;
    s.dtype = t;
    s.args = {v};
    return add(s);
  }
  SymInt indirect(Val v, const std::string &sym, const SymInt &extent) {
    Stmt s;
    s.kind = Stmt::Kind::IndirectIndex;
    s.dtype = DType::I64;
    s.args = {v};
    s.symbol = sym;
    s.extent = extent;
    add(s);
    return SymInt::symbol(sym);
  }
  Val acc(int32_t phase, int32_t slot, DType t) {
    Stmt s;
    s.kind = Stmt::Kind::Accumulator;
    s.dtype = t;
    s.phase = phase;
    s.slot = slot;
    return add(s);
  }
};

NodeId addNode(LoopProgram &p, const std::string &name, DType t, std::vector<SymInt> shape,
               bool input) {
  loop::Node n;
  n.name = name;
  n.dtype = t;
  n.shape = std::move(shape);
  if (input)
    n.kind = InputNode{};
  else
    n.kind = PointwiseNode{};
  n.origins = {int32_t(p.nodes.size())};
  return p.add(n);
}

sched::Store store(NodeId n, std::vector<SymInt> idx, Val v) {
  sched::Store s;
  s.node = n;
  s.index = std::move(idx);
  s.value = v;
  return s;
}
sched::Accumulate reduce(ReduceKind k, DType acc, Val v, Val pos = kNoVal, bool last = false) {
  sched::Accumulate a;
  a.kind = k;
  a.accDType = acc;
  a.value = v;
  a.position = pos;
  a.selectLast = last;
  return a;
}

// ------------------------------------------------------------------------ the test programs

/// All kernels of the test live in one program (node ids are shared).
struct Fixture {
  LoopProgram p;
  std::vector<sched::Kernel> kernels;
  // node ids
  NodeId a, bvec, c, y;                 // pointwise chain: y = max(a * b + c, 0) * 0.5 (batch x 37)
  NodeId sx, sy;                        // softmax [6, 100]
  NodeId ax, amax, amin;                // argmax / argmin (select last) [5, 9]
  NodeId ia, ib, iq, im, ir, ishl, icv; // integer ops [n]
  NodeId table, ids, gath;              // gather [13, 8] from [10, 8] by [13]
  NodeId hx, hout, bout, hin, hsum;     // f16/bf16
  NodeId mx, mred, colx, colsum;        // max with NaN, column sum i32 with wrap
  NodeId ux, uy;                        // unary and binary float ops, one row of uy per op
  NodeId f3, fs, fy;                    // flat pointwise [3, 5, 7] plus a rank-0 scalar
  NodeId lx, lsum;                      // long f32 row sums accumulated in double
};

/// Float ops of the unary test kernel, in the rows of its output.
const std::vector<ScalarOp> kUnaryOps = {
    ScalarOp::Exp, ScalarOp::Tanh,  ScalarOp::Sigmoid,    ScalarOp::Log,  ScalarOp::Sqrt,
    ScalarOp::Erf, ScalarOp::Round, ScalarOp::Floor,      ScalarOp::Ceil, ScalarOp::Sign,
    ScalarOp::Abs, ScalarOp::Neg,   ScalarOp::Reciprocal, ScalarOp::Sin,  ScalarOp::Atan};
constexpr int64_t kUN = 256, kLong = 200000;
constexpr int64_t kCols = 37, kSmR = 6, kSmD = 100, kAR = 5, kAD = 9, kIN = 40, kV = 10, kE = 8,
                  kT = 13, kHN = 50, kMR = 4, kMD = 33, kCR = 7, kCC = 5;

Fixture buildFixture() {
  Fixture fx;
  LoopProgram &p = fx.p;
  SymInt batch = SymInt::symbol("batch");
  p.symbols["batch"] = SymRange{1, 1000};

  // 1. Pointwise chain with broadcasting and a symbolic size.
  fx.a = addNode(p, "a", DType::F32, {batch, kCols}, true);
  fx.bvec = addNode(p, "b", DType::F32, {kCols}, true);
  fx.c = addNode(p, "c", DType::F32, {batch, 1}, true);
  fx.y = addNode(p, "y", DType::F32, {batch, kCols}, false);
  {
    sched::Kernel k;
    k.name = "k_pw";
    k.vars = {"%x0", "%x1"};
    k.ranges = {batch, kCols};
    sched::Phase ph;
    B b;
    Val va = b.load(p, fx.a, {X0, X1});
    Val vb = b.load(p, fx.bvec, {X1});
    Val vc = b.load(p, fx.c, {X0, 0});
    Val m = b.op(ScalarOp::Add, {b.op(ScalarOp::Mul, {va, vb}), vc});
    Val r = b.op(ScalarOp::Max, {m, b.cnst(DType::F32, 0)});
    Val out = b.op(ScalarOp::Mul, {r, b.cnst(DType::F32, 0.5)});
    b.cnst(DType::F32, 3); // dead
    ph.body = b.body;
    ph.stores = {store(fx.y, {X0, X1}, out)};
    k.phases = {ph};
    k.reads = {fx.a, fx.bvec, fx.c};
    k.writes = {fx.y};
    k.fused = {fx.y};
    fx.kernels.push_back(k);
  }

  // 2. Softmax over the last dim: three phases, two accumulators.
  fx.sx = addNode(p, "sx", DType::F32, {kSmR, kSmD}, true);
  fx.sy = addNode(p, "sy", DType::F32, {kSmR, kSmD}, false);
  {
    sched::Kernel k;
    k.name = "k_softmax";
    k.vars = {"%x0"};
    k.ranges = {kSmR};
    sched::Phase p0, p1, p2;
    p0.vars = {"%r0"};
    p0.ranges = {kSmD};
    B b0;
    Val x = b0.load(p, fx.sx, {X0, R0});
    p0.body = b0.body;
    p0.reductions = {reduce(ReduceKind::Max, DType::F32, x)};
    p1.vars = {"%r1"};
    p1.ranges = {kSmD};
    B b1;
    Val e = b1.op(ScalarOp::Exp,
                  {b1.op(ScalarOp::Sub, {b1.load(p, fx.sx, {X0, R1}), b1.acc(0, 0, DType::F32)})});
    p1.body = b1.body;
    p1.reductions = {reduce(ReduceKind::Sum, DType::F32, e)};
    p2.vars = {"%r2"};
    p2.ranges = {kSmD};
    SymInt R2 = SymInt::symbol("%r2");
    B b2;
    Val e2 = b2.op(ScalarOp::Exp,
                   {b2.op(ScalarOp::Sub, {b2.load(p, fx.sx, {X0, R2}), b2.acc(0, 0, DType::F32)})});
    Val o = b2.op(ScalarOp::Div, {e2, b2.acc(1, 0, DType::F32)});
    p2.body = b2.body;
    p2.stores = {store(fx.sy, {X0, R2}, o)};
    k.phases = {p0, p1, p2};
    k.reads = {fx.sx};
    k.writes = {fx.sy};
    k.fused = {fx.sy};
    fx.kernels.push_back(k);
  }

  // 3. ArgMax (first) and ArgMin (last) over the last dim, NaN and ties in the data.
  fx.ax = addNode(p, "ax", DType::F32, {kAR, kAD}, true);
  fx.amax = addNode(p, "amax", DType::I64, {kAR}, false);
  fx.amin = addNode(p, "amin", DType::I64, {kAR}, false);
  {
    sched::Kernel k;
    k.name = "k_arg";
    k.vars = {"%x0"};
    k.ranges = {kAR};
    sched::Phase p0, p1;
    p0.vars = {"%r0"};
    p0.ranges = {kAD};
    B b0;
    Val x = b0.load(p, fx.ax, {X0, R0});
    Val pos = b0.index(R0);
    p0.body = b0.body;
    p0.reductions = {reduce(ReduceKind::ArgMax, DType::I64, x, pos, false),
                     reduce(ReduceKind::ArgMin, DType::F32, x, pos, true)};
    B b1;
    Val m0 = b1.acc(0, 0, DType::I64), m1 = b1.acc(0, 1, DType::I64);
    p1.body = b1.body;
    p1.stores = {store(fx.amax, {X0}, m0), store(fx.amin, {X0}, m1)};
    k.phases = {p0, p1};
    k.reads = {fx.ax};
    k.writes = {fx.amax, fx.amin};
    k.fused = {fx.amax, fx.amin};
    fx.kernels.push_back(k);
  }

  // 4. Integer ops: div, mod, fmod by zero and -1, i8 wrap, shifts, float -> int casts.
  fx.ia = addNode(p, "ia", DType::I32, {kIN}, true);
  fx.ib = addNode(p, "ib", DType::I32, {kIN}, true);
  fx.iq = addNode(p, "iq", DType::I32, {kIN}, false);
  fx.im = addNode(p, "im", DType::I32, {kIN}, false);
  fx.ir = addNode(p, "ir", DType::I32, {kIN}, false);
  fx.ishl = addNode(p, "ishl", DType::I8, {kIN}, false);
  fx.icv = addNode(p, "icv", DType::I32, {kIN}, false);
  {
    sched::Kernel k;
    k.name = "k_int";
    k.vars = {"%x0"};
    k.ranges = {kIN};
    sched::Phase ph;
    B b;
    Val va = b.load(p, fx.ia, {X0}), vb = b.load(p, fx.ib, {X0});
    Val q = b.op(ScalarOp::Div, {va, vb});
    Val m = b.op(ScalarOp::Mod, {va, vb});
    Val r = b.op(ScalarOp::FMod, {va, vb});
    // i8: (a8 * 3 + b8) << (b & 15)
    Val a8 = b.cast(va, DType::I8), b8 = b.cast(vb, DType::I8);
    Val w = b.op(ScalarOp::Add, {b.op(ScalarOp::Mul, {a8, b.icnst(DType::I8, 3)}), b8});
    Val sh = b.op(ScalarOp::Shl, {w, b.op(ScalarOp::BitAnd, {b8, b.icnst(DType::I8, 15)})});
    // float -> i32: (float(a) * 1e3 or NaN when b == 0), saturating
    Val fa = b.op(ScalarOp::Mul, {b.cast(va, DType::F32), b.cnst(DType::F32, 1000.0)});
    Val isz = b.op(ScalarOp::Eq, {vb, b.icnst(DType::I32, 0)});
    Val sel = b.op(ScalarOp::Select, {isz, b.cnst(DType::F32, kNaN), fa});
    Val cv = b.cast(sel, DType::I32);
    ph.body = b.body;
    ph.stores = {store(fx.iq, {X0}, q), store(fx.im, {X0}, m), store(fx.ir, {X0}, r),
                 store(fx.ishl, {X0}, sh), store(fx.icv, {X0}, cv)};
    k.phases = {ph};
    k.reads = {fx.ia, fx.ib};
    k.writes = {fx.iq, fx.im, fx.ir, fx.ishl, fx.icv};
    fx.kernels.push_back(k);
  }

  // 5. Indirect gather with negative and out-of-range indices (clamped).
  fx.table = addNode(p, "table", DType::F32, {kV, kE}, true);
  fx.ids = addNode(p, "ids", DType::I64, {kT}, true);
  fx.gath = addNode(p, "gath", DType::F32, {kT, kE}, false);
  {
    sched::Kernel k;
    k.name = "k_gather";
    k.vars = {"%x0", "%x1"};
    k.ranges = {kT, kE};
    sched::Phase ph;
    B b;
    SymInt i0 = b.indirect(b.load(p, fx.ids, {X0}), "%i0", kV);
    Val v = b.load(p, fx.table, {i0, X1});
    ph.body = b.body;
    ph.stores = {store(fx.gath, {X0, X1}, v)};
    k.phases = {ph};
    k.reads = {fx.table, fx.ids};
    k.writes = {fx.gath};
    fx.kernels.push_back(k);
  }

  // 6. f16 / bf16: stores from f32 and f64, loads of f16 summed in f32.
  fx.hx = addNode(p, "hx", DType::F32, {kHN}, true);
  fx.hout = addNode(p, "hout", DType::F16, {kHN}, false);
  fx.bout = addNode(p, "bout", DType::BF16, {kHN}, false);
  fx.hin = addNode(p, "hin", DType::F16, {3, kHN}, true);
  fx.hsum = addNode(p, "hsum", DType::F16, {kHN}, false);
  {
    sched::Kernel k;
    k.name = "k_half";
    k.vars = {"%x0"};
    k.ranges = {kHN};
    sched::Phase ph;
    B b;
    Val x = b.load(p, fx.hx, {X0});
    Val h = b.cast(b.op(ScalarOp::Mul, {x, b.cnst(DType::F32, 3.0)}), DType::F16);
    Val d = b.op(ScalarOp::Div, {b.cast(x, DType::F64), b.cnst(DType::F64, 7.0)});
    Val bf = b.cast(d, DType::BF16);
    ph.body = b.body;
    ph.stores = {store(fx.hout, {X0}, h), store(fx.bout, {X0}, bf)};
    k.phases = {ph};
    k.reads = {fx.hx};
    k.writes = {fx.hout, fx.bout};
    fx.kernels.push_back(k);
  }
  {
    // hsum[j] = sum_i hin[i, j] (reduction over a non-contiguous dim), f32 accumulator.
    sched::Kernel k;
    k.name = "k_hsum";
    k.vars = {"%x0"};
    k.ranges = {kHN};
    sched::Phase p0, p1;
    p0.vars = {"%r0"};
    p0.ranges = {3};
    B b0;
    Val v = b0.cast(b0.load(p, fx.hin, {R0, X0}), DType::F32);
    p0.body = b0.body;
    p0.reductions = {reduce(ReduceKind::Sum, DType::F32, v)};
    B b1;
    Val s = b1.cast(b1.acc(0, 0, DType::F32), DType::F16);
    p1.body = b1.body;
    p1.stores = {store(fx.hsum, {X0}, s)};
    k.phases = {p0, p1};
    k.reads = {fx.hin};
    k.writes = {fx.hsum};
    fx.kernels.push_back(k);
  }

  // 7. Max over rows with NaN; an i32 column sum with wraparound over two reduced dims.
  fx.mx = addNode(p, "mx", DType::F32, {kMR, kMD}, true);
  fx.mred = addNode(p, "mred", DType::F32, {kMR}, false);
  {
    sched::Kernel k;
    k.name = "k_max";
    k.vars = {"%x0"};
    k.ranges = {kMR};
    sched::Phase p0, p1;
    p0.vars = {"%r0"};
    p0.ranges = {kMD};
    B b0;
    Val v = b0.load(p, fx.mx, {X0, R0});
    p0.body = b0.body;
    p0.reductions = {reduce(ReduceKind::Max, DType::F32, v)};
    B b1;
    Val s = b1.acc(0, 0, DType::F32);
    p1.body = b1.body;
    p1.stores = {store(fx.mred, {X0}, s)};
    k.phases = {p0, p1};
    k.reads = {fx.mx};
    k.writes = {fx.mred};
    fx.kernels.push_back(k);
  }
  fx.colx = addNode(p, "colx", DType::I32, {kCR, 2, kCC}, true);
  fx.colsum = addNode(p, "colsum", DType::I32, {kCC}, false);
  {
    sched::Kernel k;
    k.name = "k_colsum";
    k.vars = {"%x0"};
    k.ranges = {kCC};
    sched::Phase p0, p1;
    p0.vars = {"%r0", "%r1"};
    p0.ranges = {kCR, 2};
    B b0;
    Val v = b0.load(p, fx.colx, {R0, R1, X0});
    p0.body = b0.body;
    p0.reductions = {reduce(ReduceKind::Sum, DType::I32, v)};
    B b1;
    p1.body = b1.body;
    Val s = b1.acc(0, 0, DType::I32);
    p1.body = b1.body;
    p1.stores = {store(fx.colsum, {X0}, s)};
    k.phases = {p0, p1};
    k.reads = {fx.colx};
    k.writes = {fx.colsum};
    fx.kernels.push_back(k);
  }

  // 8. Float ops: each unary op of kUnaryOps, then binary ops and an f64 round trip.
  int64_t rows = int64_t(kUnaryOps.size()) + 8;
  fx.ux = addNode(p, "ux", DType::F32, {kUN}, true);
  fx.uy = addNode(p, "uy", DType::F32, {rows, kUN}, false);
  {
    sched::Kernel k;
    k.name = "k_unary";
    k.vars = {"%x0"};
    k.ranges = {kUN};
    sched::Phase ph;
    B b;
    Val x = b.load(p, fx.ux, {X0});
    int64_t row = 0;
    for (ScalarOp op : kUnaryOps) ph.stores.push_back(store(fx.uy, {row++, X0}, b.op(op, {x})));
    Val c = b.cnst(DType::F32, 0.7);
    ph.stores.push_back(store(fx.uy, {row++, X0}, b.op(ScalarOp::Mod, {x, c})));
    ph.stores.push_back(store(fx.uy, {row++, X0}, b.op(ScalarOp::FMod, {x, c})));
    ph.stores.push_back(store(fx.uy, {row++, X0}, b.op(ScalarOp::Min, {x, c})));
    Val ax = b.op(ScalarOp::Abs, {x});
    ph.stores.push_back(
        store(fx.uy, {row++, X0}, b.op(ScalarOp::Pow, {ax, b.cnst(DType::F32, 1.5)})));
    Val d = b.op(ScalarOp::Exp, {b.cast(x, DType::F64)});
    ph.stores.push_back(store(fx.uy, {row++, X0}, b.cast(d, DType::F32)));
    // isnan(x) ? -1 : (x > 0 && !(x > 5) ? 1 : 0), through bool ops
    Val gt0 = b.op(ScalarOp::Gt, {x, b.cnst(DType::F32, 0)});
    Val gt5 = b.op(ScalarOp::Gt, {x, b.cnst(DType::F32, 5)});
    Val in = b.op(ScalarOp::And, {gt0, b.op(ScalarOp::Not, {gt5})});
    Val sel = b.op(ScalarOp::Select,
                   {b.op(ScalarOp::IsNaN, {x}), b.cnst(DType::F32, -1), b.cast(in, DType::F32)});
    ph.stores.push_back(store(fx.uy, {row++, X0}, sel));
    // Constant exponents 2 and 3 (printed as products), the second an integer constant.
    ph.stores.push_back(store(fx.uy, {row++, X0}, b.op(ScalarOp::Pow, {x, b.cnst(DType::F32, 2)})));
    ph.stores.push_back(
        store(fx.uy, {row++, X0}, b.op(ScalarOp::Pow, {x, b.icnst(DType::F32, 3)})));
    ph.body = b.body;
    k.phases = {ph};
    k.reads = {fx.ux};
    k.writes = {fx.uy};
    fx.kernels.push_back(k);
  }

  // 9. Flat pointwise: same-shape accesses and a rank-0 broadcast, no index decomposition.
  fx.f3 = addNode(p, "f3", DType::F32, {3, 5, 7}, true);
  fx.fs = addNode(p, "fs", DType::F32, {}, true);
  fx.fy = addNode(p, "fy", DType::F32, {3, 5, 7}, false);
  {
    sched::Kernel k;
    k.name = "k_flat";
    k.vars = {"%x0", "%x1", "%x2"};
    k.ranges = {3, 5, 7};
    SymInt X2 = SymInt::symbol("%x2");
    sched::Phase ph;
    B b;
    Val v = b.op(ScalarOp::Sub, {b.load(p, fx.f3, {X0, X1, X2}), b.load(p, fx.fs, {})});
    ph.body = b.body;
    ph.stores = {store(fx.fy, {X0, X1, X2}, v)};
    k.phases = {ph};
    k.reads = {fx.f3, fx.fs};
    k.writes = {fx.fy};
    fx.kernels.push_back(k);
  }

  // 10. Long row sums (f32 accumulated in double with sumF32InDouble).
  fx.lx = addNode(p, "lx", DType::F32, {2, kLong}, true);
  fx.lsum = addNode(p, "lsum", DType::F32, {2}, false);
  {
    sched::Kernel k;
    k.name = "k_sumd";
    k.vars = {"%x0"};
    k.ranges = {2};
    sched::Phase p0, p1;
    p0.vars = {"%r0"};
    p0.ranges = {kLong};
    B b0;
    Val v = b0.load(p, fx.lx, {X0, R0});
    p0.body = b0.body;
    p0.reductions = {reduce(ReduceKind::Sum, DType::F32, v)};
    B b1;
    Val a = b1.acc(0, 0, DType::F32);
    p1.body = b1.body;
    p1.stores = {store(fx.lsum, {X0}, a)};
    k.phases = {p0, p1};
    k.reads = {fx.lx};
    k.writes = {fx.lsum};
    fx.kernels.push_back(k);
  }
  return fx;
}

CpuCodegenOptions testOptions() {
  CpuCodegenOptions o;
  o.pointwiseBlocks = {7, 4096}; // 7: blocks that start and end inside rows
  o.rowBlocks = {3, 1};
  return o;
}

/// Generates every kernel of the fixture into one source file.
std::string generateAll(const Fixture &fx, std::vector<CpuKernelSource> *sources = nullptr) {
  std::string code = codegen::cpuKernelPrelude();
  for (const sched::Kernel &k : fx.kernels) {
    CpuCodegenOptions o = testOptions();
    o.sumF32InDouble = k.name == "k_sumd";
    auto r = generateCpuKernel(k, fx.p, o);
    EXPECT_TRUE(r.ok()) << k.name << ": " << (r.ok() ? "" : r.error().message());
    if (!r.ok()) continue;
    code += "\n" + r->code;
    if (sources) sources->push_back(*r);
  }
  return code;
}

/// Compiles `code` once into a shared object and dlopens it.
class Library {
public:
  explicit Library(const std::string &code) {
    dir_ =
        std::filesystem::temp_directory_path() / ("coil_cpu_codegen_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "kernels.cpp") << code;
    if (const char *dump = std::getenv("COIL_DUMP_CPU_KERNELS")) std::ofstream(dump) << code;
    std::string cmd =
        "c++ -O2 -fopenmp -shared -fPIC -Wall -Wno-unused-variable -Werror=uninitialized -o " +
        (dir_ / "kernels.so").string() + " " + (dir_ / "kernels.cpp").string() + " 2> " +
        (dir_ / "log.txt").string();
    int rc = std::system(cmd.c_str());
    std::ifstream log(dir_ / "log.txt");
    log_.assign(std::istreambuf_iterator<char>(log), {});
    if (rc != 0) return;
    // RTLD_NODELETE: when this library brought libgomp in, unloading it would unload libgomp
    // under its idle worker threads.
    handle_ = dlopen((dir_ / "kernels.so").c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  }
  ~Library() {
    if (handle_) dlclose(handle_);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  bool ok() const { return handle_ != nullptr; }
  const std::string &log() const { return log_; }
  template <typename F> F get(const std::string &name) const {
    void *s = handle_ ? dlsym(handle_, name.c_str()) : nullptr;
    EXPECT_NE(s, nullptr) << "missing symbol " << name;
    return reinterpret_cast<F>(s);
  }

private:
  std::filesystem::path dir_;
  void *handle_ = nullptr;
  std::string log_;
};

std::vector<float> randomFloats(std::mt19937 &rng, size_t n, float lo = -2, float hi = 2) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float &x : v) x = d(rng);
  return v;
}

void expectClose(float got, float want, float rel, const std::string &what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << ": got " << got << ", want NaN";
    return;
  }
  if (std::isinf(want) || rel == 0) {
    EXPECT_EQ(got, want) << what;
    return;
  }
  EXPECT_NEAR(got, want, rel * std::max(1.0f, std::fabs(want))) << what;
}

class CpuCodegenTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    fx_ = new Fixture(buildFixture());
    sources_ = new std::vector<CpuKernelSource>();
    lib_ = new Library(generateAll(*fx_, sources_));
  }
  static void TearDownTestSuite() {
    delete lib_;
    delete sources_;
    delete fx_;
  }
  void SetUp() override { ASSERT_TRUE(lib_->ok()) << lib_->log(); }
  const CpuKernelSource &source(const std::string &name) {
    for (const CpuKernelSource &s : *sources_)
      if (s.info.name == name) return s;
    ADD_FAILURE() << "no kernel " << name;
    return sources_->front();
  }
  size_t configs(const std::string &name) { return source(name).info.configs.size(); }

  static Fixture *fx_;
  static std::vector<CpuKernelSource> *sources_;
  static Library *lib_;
};
Fixture *CpuCodegenTest::fx_ = nullptr;
std::vector<CpuKernelSource> *CpuCodegenTest::sources_ = nullptr;
Library *CpuCodegenTest::lib_ = nullptr;

} // namespace

TEST_F(CpuCodegenTest, PointwiseBroadcastSymbolicSize) {
  using Fn = void (*)(const float *, const float *, const float *, float *, int64_t);
  std::mt19937 rng(1);
  for (int64_t batch : {1, 3, 11}) {
    auto a = randomFloats(rng, size_t(batch * kCols)), b = randomFloats(rng, kCols),
         c = randomFloats(rng, size_t(batch));
    a[1] = kNaN; // Max propagates NaN
    for (size_t cfg = 0; cfg < configs("k_pw"); ++cfg) {
      std::vector<float> y(size_t(batch * kCols), -7.0f);
      lib_->get<Fn>("k_pw_c" + std::to_string(cfg))(a.data(), b.data(), c.data(), y.data(), batch);
      for (int64_t i = 0; i < batch; ++i)
        for (int64_t j = 0; j < kCols; ++j) {
          float m = a[size_t(i * kCols + j)] * b[size_t(j)] + c[size_t(i)];
          float want = (std::isnan(m) ? m : std::max(m, 0.0f)) * 0.5f;
          expectClose(y[size_t(i * kCols + j)], want, 1e-6f,
                      "y[" + std::to_string(i) + "," + std::to_string(j) + "]");
        }
    }
  }
  // batch == 0: the launcher returns before touching anything.
  lib_->get<Fn>("k_pw_c0")(nullptr, nullptr, nullptr, nullptr, 0);
}

TEST_F(CpuCodegenTest, SoftmaxPhases) {
  using Fn = void (*)(const float *, float *);
  std::mt19937 rng(2);
  auto x = randomFloats(rng, kSmR * kSmD, -20, 20);
  for (size_t cfg = 0; cfg < configs("k_softmax"); ++cfg) {
    std::vector<float> y(kSmR * kSmD, 0);
    lib_->get<Fn>("k_softmax_c" + std::to_string(cfg))(x.data(), y.data());
    for (int64_t r = 0; r < kSmR; ++r) {
      double mx = -INFINITY, sum = 0;
      for (int64_t d = 0; d < kSmD; ++d) mx = std::max(mx, double(x[size_t(r * kSmD + d)]));
      for (int64_t d = 0; d < kSmD; ++d) sum += std::exp(double(x[size_t(r * kSmD + d)]) - mx);
      for (int64_t d = 0; d < kSmD; ++d)
        expectClose(y[size_t(r * kSmD + d)],
                    float(std::exp(double(x[size_t(r * kSmD + d)]) - mx) / sum), 1e-5f, "softmax");
    }
  }
}

TEST_F(CpuCodegenTest, ArgMaxArgMinWithNaNAndTies) {
  using Fn = void (*)(const float *, int64_t *, int64_t *);
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> small(0, 3);
  std::vector<float> x(kAR * kAD);
  for (float &v : x) v = float(small(rng)); // many ties
  x[1 * kAD + 4] = kNaN;                    // row 1: NaN wins both
  x[2 * kAD + 2] = kNaN;
  x[2 * kAD + 6] = kNaN; // row 2: first NaN for argmax, last NaN for argmin (select last)
  for (size_t cfg = 0; cfg < configs("k_arg"); ++cfg) {
    std::vector<int64_t> amax(kAR, -1), amin(kAR, -1);
    lib_->get<Fn>("k_arg_c" + std::to_string(cfg))(x.data(), amax.data(), amin.data());
    for (int64_t r = 0; r < kAR; ++r) {
      int64_t bmax = 0, bmin = 0;
      auto at = [&](int64_t d) { return x[size_t(r * kAD + d)]; };
      for (int64_t d = 1; d < kAD; ++d) {
        float v = at(d);
        if (std::isnan(at(bmax)) ? false : (std::isnan(v) || v > at(bmax))) bmax = d;
        if (std::isnan(at(bmin)) ? std::isnan(v) : (std::isnan(v) || v <= at(bmin))) bmin = d;
      }
      EXPECT_EQ(amax[size_t(r)], bmax) << "row " << r;
      EXPECT_EQ(amin[size_t(r)], bmin) << "row " << r;
    }
  }
}

TEST_F(CpuCodegenTest, IntegerSemantics) {
  using Fn = void (*)(const int32_t *, const int32_t *, int32_t *, int32_t *, int32_t *, int8_t *,
                      int32_t *);
  std::mt19937 rng(4);
  std::uniform_int_distribution<int32_t> d(-100000, 100000);
  std::vector<int32_t> a(kIN), b(kIN);
  for (size_t i = 0; i < size_t(kIN); ++i) {
    a[i] = d(rng);
    b[i] = i % 5 == 0 ? 0 : i % 7 == 0 ? -1 : d(rng) % 97;
  }
  a[7] = std::numeric_limits<int32_t>::min(); // b[7] == -1: INT_MIN / -1 wraps
  a[14] = std::numeric_limits<int32_t>::min();
  a[3] = 3000000; // float(a) * 1000 saturates in the cast to i32
  for (size_t cfg = 0; cfg < configs("k_int"); ++cfg) {
    std::vector<int32_t> q(kIN, 1), m(kIN, 1), r(kIN, 1), cv(kIN, 1);
    std::vector<int8_t> sh(kIN, 1);
    lib_->get<Fn>("k_int_c" + std::to_string(cfg))(a.data(), b.data(), q.data(), m.data(), r.data(),
                                                   sh.data(), cv.data());
    for (size_t i = 0; i < size_t(kIN); ++i) {
      int64_t x = a[i], y = b[i];
      int64_t wq = y == 0 ? 0 : int32_t(uint32_t(x / y));
      int64_t wr = y == 0 ? 0 : x % y;
      int64_t wm = wr != 0 && ((wr < 0) != (y < 0)) ? wr + y : wr;
      EXPECT_EQ(q[i], wq) << x << " / " << y;
      EXPECT_EQ(r[i], wr) << x << " fmod " << y;
      EXPECT_EQ(m[i], wm) << x << " mod " << y;
      int8_t a8 = int8_t(x), b8 = int8_t(y);
      int8_t w = int8_t(uint8_t(a8 * 3 + b8));
      int s = b8 & 15;
      int8_t wsh = s >= 8 ? 0 : int8_t(uint8_t(uint32_t(uint8_t(w)) << s));
      EXPECT_EQ(int(sh[i]), int(wsh)) << "shl at " << i;
      double f = double(float(float(x) * 1000.0f));
      int32_t wcv = y == 0               ? 0
                    : f >= 2147483647.0  ? INT32_MAX
                    : f <= -2147483648.0 ? INT32_MIN
                                         : int32_t(f);
      EXPECT_EQ(cv[i], wcv) << "cast at " << i;
    }
  }
}

TEST_F(CpuCodegenTest, IndirectGatherClamps) {
  using Fn = void (*)(const float *, const int64_t *, float *);
  std::mt19937 rng(5);
  auto table = randomFloats(rng, kV * kE);
  std::vector<int64_t> ids = {0, 3, 9, -1, -10, -11, 10, 1000, -1000, 5, 2, 7, 4};
  ASSERT_EQ(ids.size(), size_t(kT));
  for (size_t cfg = 0; cfg < configs("k_gather"); ++cfg) {
    std::vector<float> out(kT * kE, 0);
    lib_->get<Fn>("k_gather_c" + std::to_string(cfg))(table.data(), ids.data(), out.data());
    for (int64_t t = 0; t < kT; ++t) {
      int64_t i = ids[size_t(t)] < 0 ? ids[size_t(t)] + kV : ids[size_t(t)];
      i = std::clamp<int64_t>(i, 0, kV - 1);
      for (int64_t e = 0; e < kE; ++e)
        EXPECT_EQ(out[size_t(t * kE + e)], table[size_t(i * kE + e)]) << t << "," << e;
    }
  }
}

TEST_F(CpuCodegenTest, HalfAndBFloat16) {
  using Fn = void (*)(const float *, uint16_t *, uint16_t *);
  using SumFn = void (*)(const uint16_t *, uint16_t *);
  std::mt19937 rng(6);
  auto x = randomFloats(rng, kHN, -30000, 30000);
  x[0] = kNaN;
  x[1] = kInf;
  x[2] = 1e-6f; // f16 subnormal after * 3
  x[3] = 30000; // * 3 overflows f16
  x[4] = 6.1e-5f;
  x[5] = -0.0f;
  for (size_t cfg = 0; cfg < configs("k_half"); ++cfg) {
    std::vector<uint16_t> h(kHN, 0), bf(kHN, 0);
    lib_->get<Fn>("k_half_c" + std::to_string(cfg))(x.data(), h.data(), bf.data());
    for (size_t i = 0; i < size_t(kHN); ++i) {
      EXPECT_EQ(h[i], floatToHalf(x[i] * 3.0f)) << "f16 of " << x[i];
      uint16_t wbf = 0;
      storeFromDouble(DType::BF16, &wbf, 0, double(x[i]) / 7.0);
      EXPECT_EQ(bf[i], wbf) << "bf16 of " << x[i];
    }
  }
  std::vector<uint16_t> hin(3 * kHN);
  for (uint16_t &v : hin) v = floatToHalf(std::uniform_real_distribution<float>(-100, 100)(rng));
  for (size_t cfg = 0; cfg < configs("k_hsum"); ++cfg) {
    std::vector<uint16_t> s(kHN, 0);
    lib_->get<SumFn>("k_hsum_c" + std::to_string(cfg))(hin.data(), s.data());
    for (size_t j = 0; j < size_t(kHN); ++j) {
      float want = halfToFloat(hin[j]) + halfToFloat(hin[kHN + j]) + halfToFloat(hin[2 * kHN + j]);
      EXPECT_EQ(s[j], floatToHalf(want)) << j;
    }
  }
}

TEST_F(CpuCodegenTest, MaxWithNaNAndWrappingIntSum) {
  using MaxFn = void (*)(const float *, float *);
  using SumFn = void (*)(const int32_t *, int32_t *);
  std::mt19937 rng(7);
  auto x = randomFloats(rng, kMR * kMD);
  x[1 * kMD + 20] = kNaN;
  for (int64_t d = 0; d < kMD; ++d) x[size_t(2 * kMD + d)] = -kInf; // all -inf: -inf
  x[3 * kMD + 32] = 100;
  for (size_t cfg = 0; cfg < configs("k_max"); ++cfg) {
    std::vector<float> m(kMR, 0);
    lib_->get<MaxFn>("k_max_c" + std::to_string(cfg))(x.data(), m.data());
    for (int64_t r = 0; r < kMR; ++r) {
      float want = -kInf;
      bool nan = false;
      for (int64_t d = 0; d < kMD; ++d) {
        float v = x[size_t(r * kMD + d)];
        nan |= std::isnan(v);
        want = std::max(want, v);
      }
      expectClose(m[size_t(r)], nan ? kNaN : want, 0, "max row " + std::to_string(r));
    }
  }
  std::vector<int32_t> cx(kCR * 2 * kCC);
  std::uniform_int_distribution<int32_t> big(std::numeric_limits<int32_t>::min(),
                                             std::numeric_limits<int32_t>::max());
  for (int32_t &v : cx) v = big(rng);
  for (size_t cfg = 0; cfg < configs("k_colsum"); ++cfg) {
    std::vector<int32_t> s(kCC, 0);
    lib_->get<SumFn>("k_colsum_c" + std::to_string(cfg))(cx.data(), s.data());
    for (int64_t c = 0; c < kCC; ++c) {
      uint32_t want = 0;
      for (int64_t r = 0; r < kCR * 2; ++r) want += uint32_t(cx[size_t(r * kCC + c)]);
      EXPECT_EQ(s[size_t(c)], int32_t(want)) << c;
    }
  }
}

TEST_F(CpuCodegenTest, FloatOps) {
  using Fn = void (*)(const float *, float *);
  std::mt19937 rng(8);
  auto x = randomFloats(rng, kUN, -12, 12);
  const float special[] = {kNaN,   kInf,    -kInf, 0.0f,  -0.0f, 0.5f,  1.5f,  2.5f,  -2.5f,
                           100.0f, -100.0f, 1e-3f, -0.3f, 0.54f, 0.56f, 89.0f, -90.0f};
  std::copy(std::begin(special), std::end(special), x.begin());
  auto near = randomFloats(rng, kUN / 2, -2, 2); // where the piecewise approximations switch
  std::copy(near.begin(), near.end(), x.begin() + kUN / 2);
  size_t rows = kUnaryOps.size() + 8;
  auto ref = [](ScalarOp op, double v) -> double {
    switch (op) {
    case ScalarOp::Exp:
      return std::exp(v);
    case ScalarOp::Tanh:
      return std::tanh(v);
    case ScalarOp::Sigmoid:
      return 1 / (1 + std::exp(-v));
    case ScalarOp::Log:
      return std::log(v);
    case ScalarOp::Sqrt:
      return std::sqrt(v);
    case ScalarOp::Erf:
      return std::erf(v);
    case ScalarOp::Round:
      return std::nearbyint(v);
    case ScalarOp::Floor:
      return std::floor(v);
    case ScalarOp::Ceil:
      return std::ceil(v);
    case ScalarOp::Sign:
      return v > 0 ? 1 : v < 0 ? -1 : v;
    case ScalarOp::Abs:
      return std::fabs(v);
    case ScalarOp::Neg:
      return -v;
    case ScalarOp::Reciprocal:
      return 1 / v;
    case ScalarOp::Sin:
      return std::sin(v);
    case ScalarOp::Atan:
      return std::atan(v);
    default:
      return 0;
    }
  };
  for (size_t cfg = 0; cfg < configs("k_unary"); ++cfg) {
    std::vector<float> y(rows * kUN, 12345.0f);
    lib_->get<Fn>("k_unary_c" + std::to_string(cfg))(x.data(), y.data());
    for (size_t i = 0; i < size_t(kUN); ++i) {
      double v = x[i];
      auto got = [&](size_t row) { return y[row * kUN + i]; };
      std::string at = " of " + std::to_string(v);
      for (size_t o = 0; o < kUnaryOps.size(); ++o)
        expectClose(got(o), float(ref(kUnaryOps[o], v)), 2e-6f,
                    std::string(scalarOpName(kUnaryOps[o])) + at);
      size_t r = kUnaryOps.size();
      double fm = std::fmod(v, double(0.7f));
      double md = fm != 0 && ((fm < 0) != (0.7f < 0)) ? fm + double(0.7f) : fm;
      expectClose(got(r), float(md), 1e-6f, "mod" + at);
      expectClose(got(r + 1), float(fm), 1e-6f, "fmod" + at);
      expectClose(got(r + 2), std::isnan(v) ? kNaN : std::min(float(v), 0.7f), 0, "min" + at);
      expectClose(got(r + 3), float(std::pow(std::fabs(v), 1.5)), 2e-6f, "pow" + at);
      expectClose(got(r + 4), float(std::exp(v)), 0, "exp in f64" + at);
      expectClose(got(r + 5),
                  std::isnan(v)         ? -1.0f
                  : (v > 0 && !(v > 5)) ? 1.0f
                                        : 0.0f,
                  0, "bool ops" + at);
      expectClose(got(r + 6), float(std::pow(v, 2.0)), 0, "pow 2" + at);
      expectClose(got(r + 7), float(std::pow(v, 3.0)), 3e-7f, "pow 3" + at);
    }
  }
}

TEST_F(CpuCodegenTest, FlatPointwiseAndDoubleSums) {
  using Fn = void (*)(const float *, const float *, float *);
  std::mt19937 rng(9);
  auto x = randomFloats(rng, 3 * 5 * 7);
  float sc = 0.25f;
  for (size_t cfg = 0; cfg < configs("k_flat"); ++cfg) {
    std::vector<float> y(x.size(), 0);
    lib_->get<Fn>("k_flat_c" + std::to_string(cfg))(x.data(), &sc, y.data());
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i] - sc) << i;
  }
  EXPECT_NE(source("k_flat").code.find("fy[f] = "), std::string::npos) << source("k_flat").code;

  using SumFn = void (*)(const float *, float *);
  auto lx = randomFloats(rng, 2 * kLong, 0, 1);
  for (float &v : lx) v = 1.0f + v * 1e-3f; // a float accumulator loses digits here
  for (size_t cfg = 0; cfg < configs("k_sumd"); ++cfg) {
    std::vector<float> s(2, 0);
    lib_->get<SumFn>("k_sumd_c" + std::to_string(cfg))(lx.data(), s.data());
    for (int64_t r = 0; r < 2; ++r) {
      double want = 0;
      for (int64_t i = 0; i < kLong; ++i) want += lx[size_t(r * kLong + i)];
      EXPECT_EQ(s[size_t(r)], float(want)) << r;
    }
  }
  EXPECT_NE(source("k_sumd").code.find("double red0_0"), std::string::npos);
}

TEST_F(CpuCodegenTest, KernelInfoAndText) {
  const CpuKernelSource &pw = source("k_pw");
  ASSERT_EQ(pw.info.params.size(), 5u);
  EXPECT_EQ(pw.info.params[0].name, "a");
  EXPECT_FALSE(pw.info.params[0].written);
  EXPECT_EQ(pw.info.params[3].name, "y");
  EXPECT_TRUE(pw.info.params[3].written);
  EXPECT_EQ(pw.info.params[4].kind, wrapper::KernelParam::Kind::Size);
  EXPECT_EQ(pw.info.params[4].name, "batch");
  ASSERT_EQ(pw.info.configs.size(), 2u);
  EXPECT_EQ(pw.info.configs[0].values[0].first, "block");
  EXPECT_EQ(pw.info.configs[0].values[0].second, 7);
  EXPECT_EQ(pw.info.iterationSpace.size(), 2u);
  EXPECT_EQ(pw.info.sourceFile, "src/kernels.cpp");
  EXPECT_EQ(pw.info.origins, std::vector<int32_t>{int32_t(fx_->y)});
  const std::string &t = pw.code;
  EXPECT_NE(t.find("extern \"C\" void k_pw_c0(const float *a, const float *b, const float *c, "
                   "float *y, int64_t s_batch)"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("extern \"C\" void k_pw_c1("), std::string::npos);
  EXPECT_NE(t.find("if (n0 <= 0 || n1 <= 0) return;"), std::string::npos) << t;
  EXPECT_NE(t.find("#pragma omp parallel for"), std::string::npos);
  EXPECT_NE(t.find("#pragma omp simd"), std::string::npos);
  EXPECT_EQ(t.find("3.0f"), std::string::npos) << "dead constant printed";
  // Threads only for enough work: points times statements (a pointwise kernel's inner phase
  // has one point), and the reductions' inner points for softmax; 2^18 for kernels whose
  // statements run in simd lanes, 2^15 for scalar ones (arg reductions).
  EXPECT_NE(t.find("  if (grid > 1 && work >= 262144) {\n    #pragma omp parallel for "
                   "schedule(static)\n"),
            std::string::npos)
      << t;
  // Below that a plain loop, never a parallel region with a false `if` clause.
  EXPECT_NE(t.find("  } else {\n    for (int64_t task = 0; task < grid; ++task) {\n"),
            std::string::npos)
      << t;
  EXPECT_EQ(t.find("#pragma omp parallel for schedule(static) if"), std::string::npos) << t;
  EXPECT_NE(t.find("const int64_t work = total * ("), std::string::npos) << t;
  // Affine indexing in the simd loop: hoisted bases, no division in the loop.
  EXPECT_NE(t.find("[o0 + x1]"), std::string::npos) << t;
  const std::string &sm = source("k_softmax").code;
  EXPECT_NE(sm.find("#pragma omp simd reduction(max:red0_0) reduction(|:red0_0n)"),
            std::string::npos)
      << sm;
  EXPECT_NE(sm.find("#pragma omp simd reduction(+:red1_0)"), std::string::npos) << sm;
  // Softmax: kSmD points of 1, 4 and 6 statements per row.
  EXPECT_NE(sm.find("const int64_t work = total * (" + std::to_string(kSmD * 11) + ");"),
            std::string::npos)
      << sm;
  EXPECT_NE(sm.find("work >= 262144"), std::string::npos) << sm;
  // ArgMax stays a scalar loop.
  const std::string &arg = source("k_arg").code;
  EXPECT_EQ(arg.find("#pragma omp simd"), std::string::npos) << arg;
  EXPECT_NE(arg.find("work >= 32768"), std::string::npos) << arg;
  // Pow by a constant 2 or 3 is a product (vectorizes); other exponents call std::pow.
  const std::string &un = source("k_unary").code;
  EXPECT_EQ(un.find("std::pow(v0, 2"), std::string::npos) << un;
  EXPECT_EQ(un.find("std::pow(v0, 3"), std::string::npos) << un;
  EXPECT_NE(un.find("(v0 * v0 * v0)"), std::string::npos) << un;
  EXPECT_NE(un.find("std::pow("), std::string::npos) << un;
}

TEST_F(CpuCodegenTest, Deterministic) {
  Fixture again = buildFixture();
  EXPECT_EQ(generateAll(*fx_), generateAll(again));
}

TEST(CpuCodegenErrors, MalformedKernels) {
  Fixture fx = buildFixture();
  sched::Kernel k = fx.kernels[0];
  k.reads = {fx.a}; // loads b and c too
  auto r = generateCpuKernel(k, fx.p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("not in the kernel's reads"), std::string::npos)
      << r.error().message();
  sched::Kernel k2 = fx.kernels[1];
  k2.phases[0].body.stmts[0].index.pop_back();
  auto r2 = generateCpuKernel(k2, fx.p);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.error().message().find("indices for rank"), std::string::npos);
}
