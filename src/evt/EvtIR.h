/// \file The Epilogue Visitor Tree IR: a DAG of epilogue nodes over a problem of shape (M, N[, L]).
///
/// A program is a list of nodes in definition order (operands always precede their users). Every
/// node has an explicit, ordered operand list; the same operand may appear twice (`x * x` is one
/// node with operands {x, x}). Loads carry a shape and strides over (M, N, L); a dimension of
/// size 1 with stride 0 is broadcast. Node kinds follow CUTLASS's node library:
///   loads:    Accum (the accumulator), Src (C), AuxLoad (a dense tensor), RowBcast (1 x N),
///             ColBcast (M x 1), ScalarBcast (a run-time scalar), Literal (a constant)
///   compute:  Compute (an elementwise op)
///   stores:   AuxStore (a dense tensor), RowRed / ColRed / ScalarRed (reductions over M, over N,
///             over both). Stores pass their operand's value through to their users.
/// `Input` is a parameter whose kind is not chosen yet (see passes: kinds come from strides).
#pragma once

#include "support/DType.h"
#include "support/Expected.h"
#include "support/SourceLoc.h"

#include <cstdint>
#include <string>
#include <vector>

namespace coil::evt {

enum class Arch { Sm80, Sm90 };
std::string_view archName(Arch a);

enum class Kind {
  Input,
  Accum,
  Src,
  AuxLoad,
  RowBcast,
  ColBcast,
  ScalarBcast,
  Literal,
  Compute,
  AuxStore,
  RowRed,
  ColRed,
  ScalarRed,
};
std::string_view kindName(Kind k);
bool isLoad(Kind k);  ///< Input, Accum, Src, AuxLoad, the broadcasts and Literal
bool isStore(Kind k); ///< AuxStore and the reductions
bool isReduction(Kind k);

enum class Op {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Neg,
  Relu,
  Sigmoid,
  Tanh,
  Gelu,
  Erf,
  Silu,
  Exp,
  Log,
  Abs,
  Sqrt,
  Max,
  Min,
  Clamp,
  Where,
  Lt,
  Le,
  Gt,
  Ge,
  Eq,
  Ne,
  Fma,   ///< a * b + c (sm90's beta * C + Z, see fuseBetaC)
  Cast,  ///< identity whose output is rounded to the node's dtype
  First, ///< returns its first operand; joins stores that feed nothing into the root
};
std::string_view opName(Op op);
/// Number of operands the op takes; -1 for variadic (First: one or more).
int opArity(Op op);

enum class RedFn { Sum, Max };
std::string_view redName(RedFn r);

/// Sizes over (M, N, L); a broadcast dimension has size 1.
struct Dims {
  int64_t m = 1, n = 1, l = 1;
  bool operator==(const Dims &o) const { return m == o.m && n == o.n && l == o.l; }
};
/// Strides in elements over (M, N, L); 0 for a broadcast dimension.
struct Strides {
  int64_t m = 0, n = 0, l = 0;
  bool operator==(const Strides &o) const { return m == o.m && n == o.n && l == o.l; }
};

struct Node {
  Kind kind = Kind::Compute;
  Op op = Op::Add;        ///< Compute only
  RedFn red = RedFn::Sum; ///< reductions only
  std::vector<int> operands;
  DType dtype = DType::F32; ///< loaded / stored element type, or the compute output type
  Dims shape;               ///< value shape (loads: the tensor's; compute: the broadcast)
  Strides stride;           ///< loads and stores: the tensor's strides
  std::string name;         ///< parameter or output name; empty for temporaries
  std::string var;          ///< the program variable first bound to this value (messages)
  double value = 0;         ///< Literal
  SourceLoc loc;
  bool dead = false; ///< removed by a pass (ids stay stable)
};

/// A returned name and the node that computes it (before stores are spliced in).
struct Output {
  std::string name;
  int value = -1;
  SourceLoc loc;
};

struct Program {
  std::string file;   ///< source file for messages
  std::string fnName; ///< the epilogue function's name
  Dims problem;       ///< (M, N, L)
  bool batched = false;
  DType element = DType::BF16; ///< default element type of tensors (A, B, C, D, aux)
  DType compute = DType::F32;  ///< ElementCompute
  std::vector<Node> nodes;
  std::vector<int> params; ///< parameter nodes in declaration order
  std::vector<Output> outputs;
  std::vector<std::string> readNames; ///< variables the source reads after binding (sorted)
  /// After splicing: the root of the visitor DAG (its value is D's on sm90), and the store that
  /// writes each output, by output index.
  int root = -1;
  int dValue = -1;            ///< sm90: the node whose value the collective stores as D
  DType dDType = DType::BF16; ///< element type of D
  std::vector<int> outputStores;

  const Node &at(int id) const { return nodes[static_cast<size_t>(id)]; }
  Node &at(int id) { return nodes[static_cast<size_t>(id)]; }
  /// Users of every live node, with multiplicity (x * x lists the user twice), in id order.
  std::vector<std::vector<int>> users() const;
};

/// Textual dump: one line per live node, e.g. `%3 = compute add(%1, %2) : f32 [M,N] 'x'`.
std::string printProgram(const Program &p);

/// Builds programs without the Python front end (for the scheduler and tests). Every method
/// returns the new node's id. Errors (a bad operand, an arity mismatch) come back from `finish`.
class Builder {
public:
  Builder(Dims problem, bool batched, DType element = DType::BF16);
  int accum(SourceLoc loc = {});
  /// A parameter; `pattern` gives which of (M, N, L) it spans, e.g. {false,true,false} is a row
  /// vector shared across the batch. `name` "C" is the GEMM source.
  int input(const std::string &name, bool spansM, bool spansN, bool spansL, DType dtype,
            SourceLoc loc = {});
  /// A parameter with explicit strides over (M, N, L) (0 = broadcast), e.g. a column-major aux
  /// tensor {1, M, M * N}; the node kind is chosen from them.
  int inputStrided(const std::string &name, Strides strides, DType dtype, SourceLoc loc = {});
  int scalar(const std::string &name, DType dtype = DType::F32, SourceLoc loc = {});
  int literal(double v, SourceLoc loc = {});
  int compute(Op op, std::vector<int> operands, SourceLoc loc = {});
  int cast(int x, DType to, SourceLoc loc = {});
  /// Reduction of `x` over `overM` / `overN`; its result may only be returned.
  int reduce(RedFn fn, int x, bool overM, bool overN, SourceLoc loc = {});
  void output(const std::string &name, int value, SourceLoc loc = {});
  void setVar(int id, const std::string &var);
  Program &program() { return p_; }
  Expected<Program> finish();

private:
  int add(Node n);
  Program p_;
  std::vector<std::string> problems_;
};

} // namespace coil::evt
