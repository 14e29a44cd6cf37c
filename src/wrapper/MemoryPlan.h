/// \file Memory planning of a WrapperProgram: buffer reuse, then an arena plan.
///
/// Lifetimes: an intermediate is live from the line that gives it storage (Allocate, Reuse) to
/// the last line that uses it or a view of it (Reinterpret, MultiOutput) in a KernelCall or an
/// extern call. Inputs, outputs, constants, views and outputs of allocating externs are not
/// planned, nor intermediates whose size involves a data-dependent symbol (one not bound by a
/// BindSymbol line): those stay allocated through the run's allocator.
///
/// 1. Reuse: at an Allocate, a dead block (a planned buffer whose storage is free) whose size is
///    provably >= the new buffer's size under the program's symbol ranges is handed over (the
///    Allocate becomes Reuse(from, to) and from's Free disappears). Sizes are compared as
///    SymInts, never through sample values; sample values ("hints") only choose among provable
///    candidates and drive the peak guard: a block larger than the buffer is taken only when the
///    extra bytes do not raise the peak of live bytes (at the hints) over the buffer's lifetime.
/// 2. Arena: every storage block (a buffer with the buffers that reuse it) gets a 64-byte
///    aligned byte offset (a SymInt) into one arena of `arenaBytes`. A block's offset is the
///    max over *chains* of blocks stacked under it of the chain's sum of aligned sizes, so it
///    is >= the end of every block it sits on for every value of the symbols. Blocks are placed
///    largest first (sizes at the hints); each takes the lowest position that is free at the
///    hints among 0 and the ends of the blocks it meets in time, provided it provably (under the
///    symbol ranges) ends below each such block placed above it; the topmost position needs no
///    proof (or, as a variant, longest lived first). Chains dominated by another (a subset, or a provably smaller sum) are dropped and
///    at most 6 are kept (merging two into their union bounds both), so offsets stay small.
///    So two blocks live at once never overlap, whatever the symbols' values.
/// planMemory plans several times (hints: the given ones, every symbol at 1, 16 and 1024, and
/// points where the symbols differ; each with and without step 1, in both placement orders) and keeps the plan whose worst
/// arena / lower-bound ratio over a set of sample points of the input-bound symbols is smallest.
/// FreeIfNotReused lines become Free.
#pragma once

#include "support/Expected.h"
#include "wrapper/WrapperIR.h"

#include <string>
#include <vector>

namespace coil::wrapper {

struct MemoryPlanOptions {
  bool reuse = true;
  bool arena = true;
  /// Sample values of the symbols for heuristic choices (placement order, peak guard); a symbol
  /// missing here samples as `defaultHint`; every hint is clamped to its symbol's range.
  SymBindings hints;
  int64_t defaultHint = 64;
  /// The order blocks take their arena positions in: largest first (at the hints; the longer
  /// lived first among equals), or longest lived first (long-lived blocks low in the arena,
  /// short-lived ones packed above them).
  bool longestLivedFirst = false;
};

Status planMemory(WrapperProgram &p, const MemoryPlanOptions &options);

/// The lines where each buffer's storage is live: [first, last] (first = -1: never defined by a
/// line). Uses of a view count for the buffer it views.
struct Lifetime {
  int32_t first = -1, last = -1;
};
std::vector<Lifetime> bufferLifetimes(const WrapperProgram &p);

struct MemoryReport {
  struct Row {
    std::string name;
    int64_t bytes = 0;
    int64_t offset = -1; ///< -1: not in the arena
    int32_t first = -1, last = -1;
  };
  int64_t arenaBytes = 0;
  /// The most bytes of intermediates live at one line: no plan can use less.
  int64_t lowerBound = 0;
  double ratio = 1; ///< arenaBytes / lowerBound (1 when both are 0)
  std::vector<Row> rows;

  std::string str() const;
};

/// The plan of `p` at these symbol values: a row per planned intermediate, and per intermediate
/// allocated at run time whose size these bindings determine (offset -1, outside the bound).
Expected<MemoryReport> memoryReport(const WrapperProgram &p, const SymBindings &bindings);

} // namespace coil::wrapper
