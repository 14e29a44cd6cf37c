/// \file Wrapper IR: the host program that allocates buffers and launches kernels, as data.
///
/// A WrapperProgram is a table of buffers, a table of kernels, and a list of *lines*. Each line
/// is a plain struct (no printing, no code text inside); passes (memory planning, debug
/// instrumentation, the verifier) read and rewrite the lines, and backends (C++ wrapper, Python
/// wrapper, JSON/DOT export) only print them. Executing the lines in order runs the model:
///  - Comment: documentation only.
///  - BindSymbol: size symbol `symbol` = dim `dim` of input buffer `buffer`.
///  - Allocate: buffer `buffer` gets storage (intermediates only; inputs, outputs and constants
///    are provided by the runtime). After memory planning, its storage is `arenaOffset` bytes
///    into the run's arena.
///  - Reuse: buffer `to` takes over the storage of buffer `from`, which is dead from here on
///    (the planner proved size(to) <= size(from)); `from` is not freed.
///  - Reinterpret: buffer `buffer` is a view of `base` starting `offsetBytes` in (no storage).
///  - Free: buffer's storage is released. FreeIfNotReused: released unless a later Reuse took it
///    (memory planning turns these into Free or removes them).
///  - KernelDefinition: kernel `kernel` is defined (its source belongs to the package).
///  - KernelCall: runs kernel `kernel` with `args` (buffers and SymInt sizes, in the order of the
///    kernel's params); the kernel's launcher computes its own grid from the sizes. The config
///    that runs is chosen at compile time per size bucket: the first of `choices` whose `upTo`
///    is >= the value of `bucketSize` (evaluated at run time), else `config`.
///  - ExternKernelOut: library call `function` writing into pre-allocated output buffers.
///  - ExternKernelAlloc: library call that allocates its outputs (data-dependent shapes) and
///    defines the size symbols `outSymbols`.
///  - MultiOutput: buffer `buffer` is output `index` of the ExternKernelAlloc line that defined
///    `source` (its output 0).
///  - Synchronize, HostAllocate, HostFree, CopyToHost, CopyToDevice: the explicit host fallback
///    of an extern placed on the host in a CUDA program (inserted by insertHostCopies,
///    wrapper/HostCopies.h). Synchronize waits until the device has run everything the run
///    enqueued. HostAllocate gives a host buffer (BufferMemory::kHost) host storage of its
///    bytes (none for 0 bytes) from the CUDA context's host allocator; HostFree releases it.
///    CopyToHost copies device buffer `from` into host buffer `to`, CopyToDevice host buffer
///    `from` into device buffer `to` (`to` first gets a block of the run's allocator when
///    `allocate` is set: the device copy of an allocating extern's output), both synchronously
///    and of `to`'s bytes (both buffers have the same byte size). `forCall` names the extern
///    function the line serves (its failures are reported as "host extern 'F': ...").
///  - DebugPrint: instrumentation (the debug printer, inserted by a pass): reports `values`
///    (buffers with their shapes, sizes, scalars) of the launch `launch` (a kernel or extern
///    call, by the name the printer's filter matches) just before or just after it. The runtime
///    decides at load time what, if anything, it does (COIL_DEBUG_PRINTER / COIL_DEBUG_KERNELS).
/// Buffer sizes are SymInts over the program's size symbols; a symbol is defined by a
/// BindSymbol or ExternKernelAlloc line before any line that uses it.
#pragma once

#include "support/DType.h"
#include "support/SymInt.h"

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace coil::wrapper {

using BufferId = int32_t;
using KernelId = int32_t;

enum class BufferKind : uint8_t { Input, Output, Constant, Intermediate };

/// Where a buffer's storage is. kProgram: the program's memory (host memory in a CPU program,
/// device memory in a CUDA program). kHost: host memory in a CUDA program, the staging copy of
/// an operand of a host extern (an intermediate; its storage comes from HostAllocate or from
/// the allocating host extern that defines it, and goes with HostFree).
enum class BufferMemory : uint8_t { kProgram, kHost };

struct Buffer {
  std::string name; ///< unique C identifier
  /// Inputs and outputs: the model's name for the tensor (any string; metadata.json and the
  /// runtime use it). Empty: `name`.
  std::string ioName;
  DType dtype = DType::F32;
  std::vector<SymInt> shape; ///< contiguous, row-major
  BufferKind kind = BufferKind::Intermediate;
  int32_t index = -1; ///< position among the program's inputs / outputs / constants
  /// Byte offset in the arena, set by memory planning for planned intermediates.
  std::optional<SymInt> arenaOffset;
  BufferMemory memory = BufferMemory::kProgram;

  SymInt numel() const;
  SymInt bytes() const;
};

struct KernelParam {
  enum class Kind : uint8_t { Buffer, Size };
  Kind kind = Kind::Buffer;
  std::string name;
  DType dtype = DType::F32; ///< Buffer: element type
  bool written = false;     ///< Buffer: the kernel stores into it
};

/// How a CUDA kernel config launches, as data (expressions over the kernel's Size params): `grid`
/// blocks of `block` threads. A pointwise config with a vector path launches `vectorGrid`
/// blocks when its buffers pass the launcher's alignment test and, with `vectorLastMultiple`,
/// the last extent of the iteration space is a multiple of the config's "vec" (else `grid`). A
/// split config's partial kernel launches `grid` blocks and uses `workspaceBytes` of ctx->workspace
/// (when that does not fit, or one slice would do, it launches config `fallback` instead), then its
/// combining kernel one block of `block` threads per outer point. An adaptive config 0 launches
/// the config its actual sizes choose; `grid` here is that of its own mapping.
struct LaunchPlan {
  SymInt grid;
  int64_t block = 0;
  std::optional<SymInt> vectorGrid;
  bool vectorLastMultiple = false;
  SymInt workspaceBytes;
  int32_t fallback = -1;
};

struct KernelConfig {
  std::string name;                                    ///< e.g. "block1024_vec8"
  std::vector<std::pair<std::string, int64_t>> values; ///< e.g. {{"block", 1024}, {"vec", 8}}
  std::optional<LaunchPlan> launch;                    ///< CUDA kernels
};

struct KernelInfo {
  std::string name; ///< C identifier; the launcher is named after it
  std::vector<KernelParam> params;
  std::vector<KernelConfig> configs;
  /// Per dim of the iteration space, as a SymInt over the Size params (for reports/exports):
  /// the grid each config's launcher computes.
  std::vector<SymInt> iterationSpace;
  std::string sourceFile;       ///< package-relative, e.g. "src/kernels.cpp"
  std::vector<int32_t> origins; ///< graph nodes fused into it

  /// The C function that launches (CUDA) or runs (CPU) config `config`: <name>_c<config>.
  std::string entry(size_t config) const { return entryName(name, config); }
  static std::string entryName(const std::string &kernel, size_t config) {
    return kernel + "_c" + std::to_string(config);
  }
};

struct CallArg {
  enum class Kind : uint8_t { Buffer, Size, Float };
  Kind kind = Kind::Buffer;
  BufferId buffer = -1;
  SymInt size;
  double number = 0;
};

struct Comment {
  std::string text;
};
struct BindSymbol {
  std::string symbol;
  BufferId buffer = -1;
  int32_t dim = 0;
};
struct Allocate {
  BufferId buffer = -1;
};
struct Reuse {
  BufferId from = -1;
  BufferId to = -1;
};
struct Reinterpret {
  BufferId buffer = -1;
  BufferId base = -1;
  SymInt offsetBytes;
};
struct Free {
  BufferId buffer = -1;
};
struct FreeIfNotReused {
  BufferId buffer = -1;
};
struct KernelDefinition {
  KernelId kernel = -1;
};
/// One size bucket of a KernelCall: config `config` runs while the call's bucket size is at most
/// `upTo` (and above the previous choice's `upTo`).
struct ConfigChoice {
  int64_t upTo = 0;
  int32_t config = 0;
  /// The bucket size the choice was made for (its representative value; reports only).
  int64_t at = 0;
  /// Per config of the kernel, its measured time in microseconds at `at` (negative: that config
  /// failed to run), or empty when the choice was made without measuring (the heuristic).
  std::vector<double> timesUs;
};
struct KernelCall {
  KernelId kernel = -1;
  std::vector<CallArg> args;
  /// The config that runs when no choice applies (sizes above every bucket, or no buckets).
  int32_t config = 0;
  /// A SymInt over the program's size symbols (usually the kernel's flattened iteration space)
  /// that `choices` compare against; unused while `choices` is empty.
  SymInt bucketSize;
  /// Sorted by strictly increasing `upTo`.
  std::vector<ConfigChoice> choices;
};
/// Arguments of extern calls: buffers read, buffers written, sizes, float attributes.
/// Their C signature follows the kinds: Buffer -> `const void *`, Output -> `void *` (or
/// `void **` in allocating calls, which store the pointer they allocated), Size -> `int64_t`,
/// Float -> `double`, OutSymbol -> `int64_t *`.
struct ExternArg {
  enum class Kind : uint8_t { Buffer, Output, Size, Float, OutSymbol };
  Kind kind = Kind::Buffer;
  BufferId buffer = -1;
  SymInt size;
  double number = 0;
  std::string symbol;
};
/// The graph node an extern call computes, for the errors it reports at run time: its name (the
/// name of its first output where the node has none) and its op, e.g. "Reshape".
struct ExternNodeInfo {
  std::string name;
  std::string op;
};
/// Where an extern call runs. kHost: a CPU function of libcoil_runtime on host pointers (in a
/// CUDA program a *host fallback*: insertHostCopies puts the synchronization and the copies of
/// its operands to host buffers and back around it as lines of their own). kDevice: a CUDA
/// function of libcoil_cuda, `const coil_cuda_ctx *` first, then the CPU function's arguments as
/// device pointers, enqueued on the run's stream. Set by placeExterns (wrapper/PlaceExterns.h)
/// from the extern table (kernels/Externs.def); backends print the call as its place says and
/// never infer it from the function's name.
enum class ExternPlace : uint8_t { kHost, kDevice };
struct ExternKernelOut {
  std::string function;
  std::vector<ExternArg> args;
  std::vector<int32_t> origins;
  ExternNodeInfo node;
  ExternPlace place = ExternPlace::kHost;
};
struct ExternKernelAlloc {
  std::string function;
  std::vector<ExternArg> args;
  std::vector<std::string> outSymbols;
  std::vector<int32_t> origins;
  ExternNodeInfo node;
  ExternPlace place = ExternPlace::kHost;
};
struct MultiOutput {
  BufferId buffer = -1;
  BufferId source = -1;
  int32_t index = 0;
};

/// The lines of a host fallback (see the file comment). `forCall`: the extern function served.
struct Synchronize {
  std::string forCall;
};
struct HostAllocate {
  BufferId buffer = -1;
  std::string forCall;
};
struct HostFree {
  BufferId buffer = -1;
};
struct CopyToHost {
  BufferId from = -1; ///< program (device) memory
  BufferId to = -1;   ///< host memory
  std::string forCall;
};
struct CopyToDevice {
  BufferId from = -1; ///< host memory
  BufferId to = -1;   ///< program (device) memory
  /// `to` has no storage yet: a block of the run's allocator is taken for it (defining it).
  bool allocate = false;
  std::string forCall;
};

/// One value a DebugPrint line reports, named as the launch's parameter.
struct DebugValue {
  enum class Kind : uint8_t { Buffer, Size, Float };
  Kind kind = Kind::Buffer;
  std::string name;
  BufferId buffer = -1;
  SymInt size;
  double number = 0;
};
struct DebugPrint {
  enum class When : uint8_t { Before, After };
  When when = When::Before;
  std::string launch; ///< kernel name, or the extern call's name
  std::vector<DebugValue> values;
};

using Line =
    std::variant<Comment, BindSymbol, Allocate, Reuse, Reinterpret, Free, FreeIfNotReused,
                 KernelDefinition, KernelCall, ExternKernelOut, ExternKernelAlloc, MultiOutput,
                 DebugPrint, Synchronize, HostAllocate, HostFree, CopyToHost, CopyToDevice>;

struct WrapperProgram {
  std::string name;
  /// "cpu" or "cuda": where buffers live and kernels run (buffers are device memory on cuda).
  std::string device = "cpu";
  std::vector<Buffer> buffers;
  std::vector<KernelInfo> kernels;
  std::vector<Line> lines;
  std::vector<BufferId> inputs, outputs, constants;
  SymRanges symbols;
  /// Set by memory planning: the arena's size in bytes (0 before planning).
  SymInt arenaBytes;
};

/// The name of a line's kind ("KernelCall", ...), for reports and the JSON export.
const char *lineKindName(const Line &l);

} // namespace coil::wrapper
