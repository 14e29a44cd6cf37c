/// \file Private to libcoil_cuda's runtime half (CudaRuntime.cpp: the device and loading,
/// CudaRun.cpp: runs and graphs, CudaTune.cpp: tuning sessions): the failure type and CUDA
/// checks, the device and its context scope, run slots, graph entries and the model instance.
#pragma once

#include "runtime/cuda/CudaRuntime.h"

#include <atomic>
#include <coil/cuda_abi.h>
#include <cuda.h>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

/// The GEMM state of the CUDA extern kernels (kernels/cuda); weak, so that the runtime works
/// (with ctx->blas == NULL) while that library part is absent.
extern "C" void *coil_cuda_blas_create(void) __attribute__((weak));
extern "C" void coil_cuda_blas_destroy(void *blas) __attribute__((weak));

// Internal to libcoil_cuda: not exported.
#pragma GCC visibility push(hidden)

namespace coil::runtime::cuda {

/// A failed CUDA call or another reason to stop, carried to the table boundary.
struct Failure {
  int32_t status;
  std::string message;
};

std::string cuText(CUresult r);
/// Throws a Failure naming `call` when `r` is not CUDA_SUCCESS.
void check(CUresult r, const char *call, int32_t status = COIL_ERROR_RUNTIME);
#define COIL_CU(call) check((call), #call)

// --- the device ---------------------------------------------------------------------------------

struct Device {
  CUdevice device = 0;
  CUcontext context = nullptr;
  int ordinal = 0;
  int smVersion = 0;
  std::string name;
};

/// The device of COIL_CUDA_DEVICE (default 0), initialized on first use; throws a
/// COIL_ERROR_PACKAGE failure where no driver or GPU exists.
Device &device();

/// Makes the device's context current on this thread for the scope; a context the caller had
/// current before is made current again at the end (none: the device's stays current).
class ContextScope {
public:
  explicit ContextScope(Device &d) {
    if (cuCtxGetCurrent(&saved_) != CUDA_SUCCESS) saved_ = nullptr;
    if (saved_ != d.context) {
      check(cuCtxSetCurrent(d.context), "cuCtxSetCurrent");
      changed_ = true;
    }
  }
  ~ContextScope() {
    if (changed_ && saved_) (void)cuCtxSetCurrent(saved_);
  }
  ContextScope(const ContextScope &) = delete;
  ContextScope &operator=(const ContextScope &) = delete;

private:
  CUcontext saved_ = nullptr;
  bool changed_ = false;
};

std::string smName(int sm);

// --- slots --------------------------------------------------------------------------------------

/// What one run needs besides its inputs, outputs and the model's shared state.
struct Slot {
  CUstream stream = nullptr;
  CUevent done = nullptr; ///< recorded after the last work that used this slot
  CUdeviceptr arena = 0;
  size_t arenaBytes = 0;
  CUdeviceptr workspace = 0;
  size_t workspaceBytes = 0;

  ~Slot() {
    if (done) (void)cuEventSynchronize(done);
    if (arena) (void)cuMemFree(arena);
    if (workspace) (void)cuMemFree(workspace);
    if (done) (void)cuEventDestroy(done);
    if (stream) (void)cuStreamDestroy(stream);
  }
};

std::unique_ptr<Slot> newSlot(size_t workspaceBytes);
/// Makes the slot's arena at least `bytes` long (waiting for its previous work first).
void growArena(Slot &s, size_t bytes);

/// Pinned host memory for host-fallback externs.
void *pinnedAlloc(void *, size_t bytes);
void pinnedFree(void *, void *p);

// --- graphs -------------------------------------------------------------------------------------

struct GraphEntry {
  std::mutex mu; ///< held by the run using the entry
  bool ready = false;
  std::unique_ptr<Slot> slot;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  std::vector<CUdeviceptr> blocks;  ///< allocated during capture
  std::vector<CUdeviceptr> staging; ///< host runs: the inputs' device copies
  std::vector<void *> outputs;      ///< where the graph leaves each output
  std::vector<bool> entryOwned;     ///< output i is one of `blocks` (not a caller buffer)
  std::vector<int64_t> shapes;      ///< output dims, COIL_MAX_RANK per output

  ~GraphEntry() {
    if (slot && slot->done) (void)cuEventSynchronize(slot->done);
    if (exec) (void)cuGraphExecDestroy(exec);
    if (graph) (void)cuGraphDestroy(graph);
    for (CUdeviceptr p : blocks) (void)cuMemFree(p);
    for (CUdeviceptr p : staging) (void)cuMemFree(p);
  }
};

// --- the model instance -------------------------------------------------------------------------

struct Model {
  std::string package, fatbinName;
  std::vector<std::string> archs;
  int sm = 0, ordinal = 0;
  CUmodule module = nullptr;
  std::vector<void *> functions; ///< CUfunction per cuda.functions entry
  CUdeviceptr weights = 0;
  std::vector<const void *> constants;
  size_t workspaceBytes = 0;
  bool graphs = true;
  size_t maxGraphs = 16;
  void *blas = nullptr; ///< the externs' GEMM state, shared by all runs (it is thread-safe)

  std::mutex mu; ///< guards slots, graphs, noGraph
  std::vector<std::unique_ptr<Slot>> freeSlots;
  std::map<std::vector<int64_t>, std::unique_ptr<GraphEntry>> graphEntries;
  std::set<std::vector<int64_t>> noGraph;
  std::atomic<int64_t> captures{0}, replays{0};

  ~Model() {
    graphEntries.clear();
    freeSlots.clear();
    if (blas && coil_cuda_blas_destroy) coil_cuda_blas_destroy(blas);
    if (weights) (void)cuMemFree(weights);
    if (module) (void)cuModuleUnload(module);
  }

  std::unique_ptr<Slot> acquireSlot(size_t arenaBytes) {
    std::unique_ptr<Slot> s;
    {
      std::lock_guard<std::mutex> lock(mu);
      // The smallest free slot whose arena suffices, else the largest one (grown).
      auto best = freeSlots.end();
      for (auto it = freeSlots.begin(); it != freeSlots.end(); ++it) {
        if (best == freeSlots.end()) {
          best = it;
          continue;
        }
        bool fits = (*it)->arenaBytes >= arenaBytes, bestFits = (*best)->arenaBytes >= arenaBytes;
        if (fits != bestFits ? fits
                             : (fits ? (*it)->arenaBytes < (*best)->arenaBytes
                                     : (*it)->arenaBytes > (*best)->arenaBytes))
          best = it;
      }
      if (best != freeSlots.end()) {
        s = std::move(*best);
        freeSlots.erase(best);
      }
    }
    if (!s) s = newSlot(workspaceBytes);
    growArena(*s, arenaBytes);
    return s;
  }

  void releaseSlot(std::unique_ptr<Slot> s) {
    std::lock_guard<std::mutex> lock(mu);
    freeSlots.push_back(std::move(s));
  }
};

/// A model instance of `d` on the device (throws a Failure).
Model *createModel(const ModelDesc &d);
/// One run of `m` (throws a Failure).
void runModel(Model &m, const RunRequest &q);

/// Runs f, turning a Failure or another exception into a coil_status and *error.
template <class F> int32_t guarded(std::string *error, F &&f) {
  try {
    f();
    return COIL_OK;
  } catch (const Failure &e) {
    *error = e.message;
    return e.status;
  } catch (const std::bad_alloc &) {
    *error = "out of memory";
    return COIL_ERROR_RUNTIME;
  } catch (const std::exception &e) {
    *error = std::string("internal error: ") + e.what();
    return COIL_ERROR_INTERNAL;
  }
}

} // namespace coil::runtime::cuda

#pragma GCC visibility pop
