/// \file Loop IR: what every Graph IR node lowers to, before fusion.
///
/// A LoopProgram is a list of *nodes* in dependency order. Each node defines one tensor (dtype +
/// SymInt shape, row-major) and says how to compute it:
///  - Input / Constant: a leaf tensor (a graph input, or weights held by the program);
///  - Pointwise: for every index point `vars` of `shape`, the value of `body` at that point;
///  - Reduction: for every point `vars` of `shape` (the *outer* point), `kind` folds the values of
///    `body` over every point `rvars` of `rranges`, in row-major order of the rvars;
///  - Extern: a library call (GEMM through BLAS, convolution, data-dependent ops) writing one or
///    more outputs; an Extern node's tensor is its first output, MultiOutput nodes name the others;
///  - MultiOutput: output `index` of an Extern node (computed by it, no code of its own).
/// There is no View node: reshape, transpose, slice, expand and friends are folded into the
/// index expressions of the loads that read through them ("views cost nothing").
///
/// Bodies are SSA lists of scalar statements (`Stmt`); statement i defines value i. A Load reads
/// element `index` (one SymInt per dim of the *loaded node's* shape) of another node. Index
/// expressions are SymInts over the node's loop variables, the program's size symbols, and the
/// symbols that IndirectIndex statements define earlier in the same body. Loop variables are
/// symbols whose names start with '%' (`%x0`, `%r1`; IndirectIndex symbols `%i0`), a character no
/// imported size symbol contains, so substitution never captures a user symbol. A loop
/// variable's range is [0, extent - 1].
///
/// The scheduler (sched/) decides which Pointwise nodes are computed inline inside their readers
/// and which are *realized* into buffers; reductions and externs are always realized, and may
/// be fused with their readers into one kernel.
///
/// Scalar semantics (what codegen must reproduce; the Loop IR evaluator is the definition):
///  - Arithmetic happens in the statement's dtype, except that f16 and bf16 values compute in
///    f32 and round once when stored (codegen may keep them in f32 between statements).
///  - Integer Add/Sub/Mul wrap modulo 2^bits; integer Div truncates toward zero (C), and Mod is
///    ONNX's `fmod=0` (sign of the divisor, Python); FMod is C's fmod / `%` (sign of the dividend).
///    Integer division or modulo by zero yields 0 (never UB).
///  - Comparisons and logic produce bool (0 or 1).
///  - Cast follows DType.h: float to integer truncates toward zero (NaN and out-of-range values
///    give an unspecified value, never UB), to bool is `!= 0`, to f16/bf16 rounds to nearest even.
///  - Round is half to even. Min/Max propagate NaN (as ONNX Min/Max).
#pragma once

#include "support/DType.h"
#include "ir/Graph.h"
#include "support/SourceLoc.h"
#include "support/SymInt.h"

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace coil::loop {

using NodeId = int32_t; ///< index into LoopProgram::nodes
using Val = int32_t;    ///< index into Body::stmts
constexpr Val kNoVal = -1;

#define COIL_FOR_EACH_SCALAR_OP(X)                                                                 \
  /* unary */                                                                                      \
  X(Neg, 1)                                                                                        \
  X(Abs, 1) X(Sign, 1) X(Reciprocal, 1) X(Exp, 1) X(Log, 1) X(Sqrt, 1) X(Sin, 1) X(Cos, 1)         \
      X(Tan, 1) X(Asin, 1) X(Acos, 1) X(Atan, 1) X(Sinh, 1) X(Cosh, 1) X(Tanh, 1) X(Asinh, 1)      \
          X(Acosh, 1) X(Atanh, 1) X(Erf, 1) X(Floor, 1) X(Ceil, 1) X(Round, 1) X(Sigmoid, 1)       \
              X(Not, 1) X(BitNot, 1) X(IsNaN, 1) X(IsPosInf, 1) X(IsNegInf, 1) /* binary */        \
      X(Add, 2) X(Sub, 2) X(Mul, 2) X(Div, 2) X(Mod, 2) X(FMod, 2) X(Pow, 2) X(Min, 2) X(Max, 2)   \
          X(And, 2) X(Or, 2) X(Xor, 2) X(BitAnd, 2) X(BitOr, 2) X(BitXor, 2) X(Shl, 2) X(Shr, 2)   \
              X(Eq, 2) X(Ne, 2) X(Lt, 2) X(Le, 2) X(Gt, 2)                                         \
                  X(Ge, 2) /* ternary: Select(cond, a, b) = cond ? a : b */                        \
      X(Select, 3)

enum class ScalarOp : uint8_t {
#define COIL_SCALAR_OP_ENUM(E, A) E,
  COIL_FOR_EACH_SCALAR_OP(COIL_SCALAR_OP_ENUM)
#undef COIL_SCALAR_OP_ENUM
};
const char *scalarOpName(ScalarOp op);
int scalarOpArity(ScalarOp op);

struct Stmt {
  enum class Kind : uint8_t {
    Load,          ///< node[index...] of `node`
    Constant,      ///< `number` converted to dtype (integers are exact in `intNumber`)
    Index,         ///< the value of the integer expression `expr` (e.g. a loop variable)
    Op,            ///< op(args...)
    Cast,          ///< args[0] converted to dtype
    BitCast,       ///< the bits of args[0] reinterpreted as dtype (same size)
    IndirectIndex, ///< defines symbol `symbol` = args[0] (an integer), see below
    /// Only in fused kernels (sched/Kernel.h): the result of reduction `slot` of an earlier
    /// phase `phase` of the same kernel, at the current outer point.
    Accumulator,
  };
  Kind kind = Kind::Constant;
  DType dtype = DType::F32; ///< type of the value defined (IndirectIndex: i64)
  ScalarOp op = ScalarOp::Add;
  std::vector<Val> args;
  // Load
  NodeId node = -1;
  std::vector<SymInt> index;
  // Constant
  double number = 0;
  int64_t intNumber = 0;
  bool isInt = false; ///< the constant is `intNumber` (exact), not `number`
  // Index
  SymInt expr;
  // IndirectIndex: `symbol` = args[0], plus `extent` when args[0] < 0 and `wrapNegative`; the
  // result is clamped into [0, extent - 1] (an out-of-range index is a user error in ONNX; coil
  // clamps instead of reading out of bounds, and the runtime may report it).
  std::string symbol;
  SymInt extent;
  bool wrapNegative = true;
  // Accumulator
  int32_t phase = 0, slot = 0;
};

struct Body {
  std::vector<Stmt> stmts;
  Val add(Stmt s) {
    stmts.push_back(std::move(s));
    return Val(stmts.size() - 1);
  }
};

enum class ReduceKind : uint8_t {
  Sum,
  Prod,
  Max,    ///< NaN propagates
  Min,    ///< NaN propagates
  ArgMax, ///< index (i64) of the first (or last, see `selectLast`) maximum
  ArgMin,
  Any, ///< bool or
  All, ///< bool and
};
const char *reduceKindName(ReduceKind k);

struct InputNode {
  ValueId graphValue = kNoValue; ///< the graph input it binds
};
struct ConstantNode {
  ValueId graphValue = kNoValue; ///< the graph constant (weights) it holds
};
struct PointwiseNode {
  std::vector<std::string> vars; ///< one per dim of the node's shape
  Body body;
  Val result = kNoVal;
};
struct ReductionNode {
  std::vector<std::string> vars;  ///< outer point, one per dim of the node's shape
  std::vector<std::string> rvars; ///< reduced point
  std::vector<SymInt> rranges;    ///< extent of each rvar
  ReduceKind kind = ReduceKind::Sum;
  DType accDType = DType::F32; ///< accumulation type (f32 for f16/bf16 inputs)
  Body body;                   ///< over vars and rvars
  Val value = kNoVal;          ///< the value folded
  /// ArgMax/ArgMin: the i64 position reported, usually the Index of one rvar.
  Val position = kNoVal;
  bool selectLast = false; ///< ArgMax/ArgMin: last occurrence wins ties
};
/// An argument of an extern call, in order.
struct ExternArg {
  enum class Kind : uint8_t {
    Node,   ///< a realized input tensor (pointer to its first element)
    Output, ///< output `index` of this call (pointer the call writes)
    Int,    ///< an int64 size or attribute (`sym`)
    Float,  ///< a double attribute (`number`)
    /// The call writes an int64 through this pointer: the value of the data-dependent size
    /// symbol `symbol` (e.g. the number of non-zeros), which the outputs' shapes use. Only in
    /// allocating calls.
    OutSymbol,
  };
  Kind kind = Kind::Int;
  NodeId node = -1;
  int32_t index = 0;
  SymInt sym;
  double number = 0;
  std::string symbol;
};
struct ExternNode {
  /// The C function called, e.g. "coil_cpu_gemm_f32" (declared in kernels/cpu/CpuKernels.h).
  std::string function;
  std::vector<ExternArg> args;
  /// dtype and shape of every output (output 0 is this node's tensor).
  std::vector<TensorType> outputs;
  /// True when an output shape depends on the data (an OutSymbol argument): the call allocates
  /// its outputs through the runtime (ExternKernelAlloc); otherwise the caller allocates them
  /// (ExternKernelOut).
  bool allocates = false;
};
struct MultiOutputNode {
  NodeId source = -1; ///< an Extern node
  int32_t index = 0;  ///< which of its outputs (>= 1)
};

using NodeKind = std::variant<InputNode, ConstantNode, PointwiseNode, ReductionNode, ExternNode,
                              MultiOutputNode>;

struct Node {
  std::string name; ///< unique, a C identifier (e.g. "relu_3")
  DType dtype = DType::F32;
  std::vector<SymInt> shape;
  NodeKind kind;
  /// The graph nodes this node was lowered from (for reports and error messages).
  std::vector<int32_t> origins;
  SourceLoc loc;

  bool isPointwise() const { return std::holds_alternative<PointwiseNode>(kind); }
  bool isReduction() const { return std::holds_alternative<ReductionNode>(kind); }
  bool isExtern() const { return std::holds_alternative<ExternNode>(kind); }
};

struct LoopProgram {
  std::vector<Node> nodes;
  /// Graph inputs and outputs, in graph order: the node that each is (outputs may be any node,
  /// several outputs the same node, or an Input node).
  std::vector<NodeId> inputs;
  std::vector<NodeId> outputs;
  std::vector<std::string> inputNames, outputNames;
  /// Every size symbol with its range (from the graph, plus data-dependent symbols).
  SymRanges symbols;
  /// The graph, for constants (weights) and names.
  const Graph *graph = nullptr;

  NodeId add(Node n) {
    nodes.push_back(std::move(n));
    return NodeId(nodes.size() - 1);
  }
};

/// Loop variable names: `%x<i>` for output dims, `%r<i>` for reduced dims.
std::string loopVar(int i);
std::string reduceVar(int i);

/// A Constant node whose graph constant has at most this many elements prints its elements.
constexpr int64_t kMaxPrintedConstantElements = 8;

/// Readable text of a program, for `coil inspect --loops`, `--print-after=lower` and golden
/// tests; the grammar is in LoopParser.h, which reads it back (print -> parse -> print is
/// byte-identical). Input and Constant nodes print the name of their graph value; a constant of
/// at most kMaxPrintedConstantElements elements also prints them, larger weights are not in the
/// text. Node origins and locations are not printed.
std::string printLoopProgram(const LoopProgram &p);

/// `'s'`, a NAME of the text (LoopParser.h): `\\`, `\'` and `\xHH` (bytes outside 0x20..0x7e)
/// escaped.
std::string quoteName(const std::string &s);

/// The statements of `b`, one line each as printLoopProgram prints a node's body, indented by
/// `indent` spaces (sched/ScheduleText.h prints the bodies of a kernel's phases with it).
std::string printLoopBody(const LoopProgram &p, const Body &b, int indent);

} // namespace coil::loop
