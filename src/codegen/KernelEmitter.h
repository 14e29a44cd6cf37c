/// \file Shared pieces of the kernel emitters (codegen/cpu, codegen/cuda): the checks and symbol
/// naming of a fused kernel, and the printing of Loop IR scalar statements as C++ expressions
/// (the Loop IR's scalar semantics, lower/LoopIR.h, through the helpers of scalarHelpersCode()).
#pragma once

#include "codegen/CSource.h"
#include "sched/Kernel.h"
#include "support/Expected.h"
#include "wrapper/WrapperIR.h"

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace coil::codegen {

/// C storage type of a dtype ("float", "uint16_t" for f16/bf16, "uint8_t" for bool, ...).
const char *cStorageType(DType t);
/// The C type values of dtype `t` are computed in: f16/bf16 in float, bool as bool.
std::string computeType(DType t);
/// The typed literal of a constant statement (rounded to its dtype, exactly as stored).
std::string constantLiteral(const loop::Stmt &s);

/// `term` as rest + var * coef with rest and coef free of `var`; nullopt when not affine.
struct Affine {
  SymInt rest, coef;
};
bool mentions(const SymInt &e, const std::string &var);
std::optional<Affine> affineIn(const SymInt &e, const std::string &var);
/// Row-major linear offset of `index` into a tensor of `shape`.
SymInt linearIndex(const std::vector<SymInt> &shape, const std::vector<SymInt> &index);

/// Scalar helper functions (coil_select, coil_f2h, coil_div, coil_expf, ...) that reproduce the
/// Loop IR's scalar semantics; every function is declared with the macro `COIL_FN` (defined by
/// the including prelude: `static inline` on the CPU, `__device__` on CUDA). Needs <cmath>,
/// <cstdint>, <cstring>, <limits>, <type_traits>.
const char *scalarHelpersCode();

/// A reduction's partial state: its value (`work`, of C type `W`), for max/min of floats a
/// NaN flag (`nan`, empty when NaN travels in the value), for arg reductions the position
/// (`pos`) and whether any element was seen (`seen`); `vt` is the folded value's dtype, `fl`
/// whether comparisons see NaN.
struct ReductionVar {
  std::string work, nan, pos, seen, W;
  const sched::Accumulate *r = nullptr;
  DType vt = DType::F32;
  bool fl = false;
};
/// How a target keeps partial states. CPU: f32 sums may accumulate in double, limits from
/// std::numeric_limits, a NaN flag per float max/min. CUDA: limits from coil_limits, bool
/// max/min start from literals, f32 max/min fold NaN into the value (max.NaN / min.NaN), so
/// only wider floats keep a flag.
struct ReductionStyle {
  bool sumF32InDouble = false;
  bool cuda = false;
};

/// The state both kernel emitters share: validation of a kernel against its program, C names of
/// its symbols and buffers, ranges of its loop variables, and the printing of scalar statements.
class KernelEmitterBase {
protected:
  /// `prefixes`: reserved prefixes of generated names; `fixedNames`: exact names the emitter
  /// uses; `errorPrefix`: starts every error message ("cpu codegen: ").
  KernelEmitterBase(const sched::Kernel &k, const loop::LoopProgram &p,
                    std::set<std::string> prefixes, std::vector<std::string> fixedNames,
                    std::string errorPrefix)
      : k_(k), p_(p), names_(std::move(prefixes)), fixedNames_(std::move(fixedNames)),
        errorPrefix_(std::move(errorPrefix)) {}

  std::string kernelError(const sched::Kernel &k, const std::string &what) const {
    return errorPrefix_ + "kernel '" + k.name + "': " + what;
  }
  Status validate();
  Status validateBody(const loop::Body &b, size_t phase, const std::vector<std::string> &vars);
  void collectSymbols(const SymInt &e) { e.collectSymbols(allSymbols_); }
  void assignNames();
  std::string cpp(const SymInt &e) const {
    return simplify(e.substitute(rename_), ranges_).toCpp(ranges_);
  }
  SymInt renamed(const SymInt &e) const { return e.substitute(rename_); }
  void addLoopRange(const std::string &var, const SymInt &extent);
  std::vector<bool> liveStmts(const loop::Body &b, const sched::Phase *ph) const;
  Expected<std::string> opExpr(const loop::Stmt &s, const std::vector<std::string> &valName,
                               const loop::Body &b);
  std::string castExpr(const std::string &v, DType from, DType to) const;
  /// Whether statement `v` of `b` has one value for the whole inner loop of a phase: built from
  /// constants and accumulators only.
  bool invariant(const loop::Body &b, loop::Val v) const;
  /// The kernel's KernelInfo without configs: name, its buffers then its sizes as params (in
  /// the order both emitters' functions take them), iteration space, source file, origins.
  wrapper::KernelInfo kernelInfo(const std::string &sourceFile) const;
  /// Prints the live statements of `b` in order as `const T v<i> = ...;` lines (constants,
  /// accumulators and casts that keep the C value become names without a line) and fills
  /// `valName`. The target supplies a Load's element expression (`load`: its addressing) and
  /// the printing of integer expressions of sizes and loop variables (`index`).
  using LoadFn = std::function<std::string(const loop::Stmt &)>;
  using IndexFn = std::function<std::string(const SymInt &)>;
  Status emitStatements(CodeWriter &w, const loop::Body &b, const std::vector<bool> &live,
                        std::vector<std::string> &valName, const LoadFn &load,
                        const IndexFn &index);
  /// The stored representation of value `v` (dtype `from`) in a buffer of dtype `node`.
  std::string storeConv(const std::string &v, DType from, DType node) const;

  /// How an access of a pointwise kernel relates to its outer space's row-major flat index
  /// (`flatIndex`): at it (`Flat`), independent of the outer point (`Uniform`, with `lin` its
  /// index), or neither (`Other`). The flat loops of both emitters are built on this.
  enum class FlatAccess { Other, Flat, Uniform };
  struct FlatIndex {
    SymInt flat;                 ///< the outer variables' row-major flat index
    std::set<std::string> outer; ///< C names of the outer variables
    bool usesOuter(const SymInt &e) const;
  };
  FlatIndex flatIndex() const;
  FlatAccess flatAccess(const FlatIndex &fi, loop::NodeId node, const std::vector<SymInt> &idx,
                        SymInt *lin = nullptr) const;

  /// `// phase 1 over r1 < 100: sum, stores y` (`index` prints the extents).
  std::string phaseComment(const sched::Phase &ph, size_t pi, const IndexFn &index) const;
  /// Declares and initializes the partial state of every reduction of phase `ph` (names
  /// `red<tag>_<i>...`).
  std::vector<ReductionVar> declareReductionVars(CodeWriter &w, const sched::Phase &ph,
                                                 const std::string &tag,
                                                 const ReductionStyle &style) const;
  /// Folds the phase body's value (named by `valName`) into `red`'s partial state.
  void emitFoldElement(CodeWriter &w, const ReductionVar &red, const loop::Body &b,
                       const std::vector<std::string> &valName, const ReductionStyle &style) const;
  /// `const T acc<tag>_<i> = ...;`: the reductions' results, visible to later phases.
  void emitReductionResults(CodeWriter &w, const std::string &tag,
                            const std::vector<ReductionVar> &reds) const;

  const sched::Kernel &k_;
  const loop::LoopProgram &p_;
  NameTable names_;
  std::vector<std::string> fixedNames_;
  std::string errorPrefix_;
  std::set<std::string> allSymbols_, loopVars_, indirectSyms_;
  std::vector<std::string> sizeSyms_;        ///< original names, sorted
  std::map<std::string, SymInt> rename_;     ///< original symbol -> C-named symbol
  std::map<std::string, std::string> cname_; ///< original symbol -> C name
  SymRanges ranges_;                         ///< over C names
  std::vector<loop::NodeId> buffers_;        ///< reads ∪ writes, ascending
  std::map<loop::NodeId, std::string> bufName_;
  std::set<loop::NodeId> readSet_, writeSet_;
  std::vector<std::string> extent_; ///< C names of the outer extents
  /// CUDA's f32 math (helpers of the CUDA prelude, not of scalarHelpersCode()): Exp as
  /// coil_cuda_expf, Div by an invariant divisor as coil_cuda_fdiv (its reciprocal computed
  /// once, then a corrected product).
  bool cudaMath_ = false;
};

} // namespace coil::codegen
