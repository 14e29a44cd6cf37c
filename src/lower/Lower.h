/// \file Lowering: Graph IR -> Loop IR, one lowering function per op.
///
/// lowerGraph() walks the graph in order and calls the op's lowering function, which reads its
/// inputs as TensorRefs and defines its outputs as TensorRefs. A TensorRef is a node seen
/// through an index map, so view ops (Reshape, Transpose, Slice, Expand, Squeeze, ...) create no
/// node: they return a TensorRef with a new map. Pointwise ops create Pointwise nodes whose
/// bodies load their inputs through those maps; the scheduler later inlines or realizes them.
///
/// Lowering functions are grouped by op family in lower/ops/<Family>.cpp, like inference.
#pragma once

#include "ir/Graph.h"
#include "ir/Op.h"
#include "lower/LoopIR.h"
#include "support/Expected.h"

#include <functional>
#include <optional>

namespace coil::loop {

/// A node seen through a view. Element `idx` (one SymInt per dim of `shape`) of the TensorRef is
/// element `map` of node `node`, where `map` (one SymInt per dim of the node's shape) is an
/// expression of the view variables `%v0 .. %v<rank-1>`; an empty map is the identity (then
/// `shape` equals the node's shape).
struct TensorRef {
  NodeId node = -1;
  DType dtype = DType::F32;
  std::vector<SymInt> shape;
  std::vector<SymInt> map;

  int64_t rank() const { return int64_t(shape.size()); }
  /// The node index read for element `idx` of this view.
  std::vector<SymInt> sourceIndex(const std::vector<SymInt> &idx) const;
};
/// `%v<i>`.
std::string viewVar(int i);

/// Builds the body of one Pointwise or Reduction node. Values are typed: op() infers the
/// result type (comparisons and logic give bool, everything else the type of its first value
/// operand; operands of a binary op must have the same type: cast first).
class BodyBuilder {
public:
  explicit BodyBuilder(Body &body) : body_(body) {}

  Val load(const TensorRef &t, const std::vector<SymInt> &idx);
  /// Loads `t` broadcast (numpy rules, aligned right) to a tensor of rank idx.size().
  Val loadBroadcast(const TensorRef &t, const std::vector<SymInt> &idx);
  Val constant(DType t, double v);
  Val intConstant(DType t, int64_t v);
  /// The value of an integer expression (loop variables, sizes) as dtype `t`.
  Val index(const SymInt &e, DType t = DType::I64);
  Val op(ScalarOp op, Val a);
  Val op(ScalarOp op, Val a, Val b);
  Val op(ScalarOp op, Val a, Val b, Val c);
  Val cast(Val v, DType t); ///< no statement when v already has type t
  Val bitcast(Val v, DType t);
  /// An index symbol with the value of integer `v` (negative values wrapped by `extent` when
  /// `wrapNegative`), for use in later load indices: `x[indirect(idx, N), j]`.
  SymInt indirect(Val v, const SymInt &extent, bool wrapNegative = true);
  DType dtypeOf(Val v) const { return body_.stmts.at(size_t(v)).dtype; }
  Body &body() { return body_; }

private:
  Body &body_;
  int nextIndirect_ = 0;
};

/// Choices of lowerGraph that depend on where the program runs.
struct LowerOptions {
  /// The program runs on the CPU: lowerings may call externs of kernels/cpu that have no CUDA
  /// twin (kernels/cuda/CudaExterns.h), where they beat the generic Loop IR (Resize of the two
  /// innermost axes: coil_cpu_resize2d_*). Off, every op lowers as it does for CUDA.
  bool cpuExterns = false;
};

using PointwiseFn = std::function<Val(BodyBuilder &, const std::vector<SymInt> &idx)>;
/// Returns the value folded at (outer point, reduced point); sets *position for ArgMax/ArgMin.
using ReduceFn = std::function<Val(BodyBuilder &, const std::vector<SymInt> &outer,
                                   const std::vector<SymInt> &r, Val *position)>;

class LowerContext {
public:
  LowerContext(LoopProgram &program, const Graph &graph, int32_t nodeIndex,
               std::vector<std::optional<TensorRef>> &refs, const LowerOptions &options = {});

  const Graph &graph() const { return graph_; }
  const coil::Node &gnode() const { return graph_.nodes()[size_t(nodeIndex_)]; }
  LoopProgram &program() { return program_; }
  const LowerOptions &options() const { return options_; }

  size_t numInputs() const { return gnode().inputs.size(); }
  bool hasInput(size_t i) const;
  TensorRef input(size_t i) const; ///< checked present
  const TensorType &inputType(size_t i) const;
  /// Known integer contents (constants and symbolic constants), as in inference.
  std::optional<std::vector<SymInt>> intValue(size_t i) const;
  const Tensor *constant(size_t i) const; ///< nullptr unless input i is a constant
  size_t numOutputs() const { return gnode().outputs.size(); }
  const TensorType &outputType(size_t i) const;
  void setOutput(size_t i, TensorRef t);
  /// A user error about this node; the caller adds its location.
  Error error(const std::string &message) const { return Error::user(message); }

  // --- builders (names are derived from the graph node; origins are set automatically)
  TensorRef pointwise(DType t, std::vector<SymInt> shape, const PointwiseFn &fn,
                      const std::string &hint = "");
  TensorRef reduce(ReduceKind kind, DType outT, DType accT, std::vector<SymInt> outer,
                   std::vector<SymInt> rranges, const ReduceFn &fn, bool selectLast = false,
                   const std::string &hint = "");
  /// A view: element idx of the result is element srcIndex(idx) of `src`.
  TensorRef view(const TensorRef &src, std::vector<SymInt> shape,
                 const std::function<std::vector<SymInt>(const std::vector<SymInt> &)> &srcIndex);
  TensorRef reshape(const TensorRef &src, std::vector<SymInt> shape);
  TensorRef permute(const TensorRef &src, const std::vector<int64_t> &perm);
  TensorRef broadcastTo(const TensorRef &src, std::vector<SymInt> shape);
  /// A realized copy of src (a node of its own), e.g. for an extern's input.
  TensorRef realize(const TensorRef &src);
  /// Calls an extern function; returns one TensorRef per output. Node arguments must be
  /// realized, contiguous TensorRefs (use realize()).
  std::vector<TensorRef> externCall(std::string function, std::vector<ExternArg> args,
                                    std::vector<TensorType> outputs, bool allocates = false);
  /// A new data-dependent size symbol (range [0, 2^62]).
  SymInt freshSymbol(const std::string &hint);

private:
  LoopProgram &program_;
  const Graph &graph_;
  int32_t nodeIndex_;
  std::vector<std::optional<TensorRef>> &refs_;
  LowerOptions options_;
};

using LowerFn = Status (*)(LowerContext &);

using LowerRegistry = OpTable<LowerFn>;

// One per op family (ir/OpFamilies.def): its file registers its ops.
#define COIL_OP_FAMILY(F) void register##F##Lowerings(LowerRegistry &r);
#include "ir/OpFamilies.def"
#undef COIL_OP_FAMILY

/// The lowering function of `op`, or nullptr when coil cannot compile it yet.
LowerFn lowerFnFor(OpKind op);

/// Lowers a verified graph. Every op without a lowering is reported in one error.
Expected<LoopProgram> lowerGraph(const Graph &g, const LowerOptions &options = {});

} // namespace coil::loop
