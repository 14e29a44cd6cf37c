/// Runs of libcoil_cuda's model instances (see CudaRuntime.h), eager or through CUDA graphs.
///
/// Runs. A run either executes eagerly on a slot from the pool (the slot's arena and workspace;
/// the caller's stream or the slot's own), or through a graph entry. A slot or entry
/// carries an event recorded after the last work that used it; a later user makes its stream
/// wait on that event first, so a slot goes back to the pool as soon as its work is enqueued.
///
/// Graphs. Keyed by the input shapes and, for coil_model_run_device, the caller's input and
/// output pointers (with capacities); coil_model_run (host memory) copies inputs into staging
/// buffers owned by the entry, so its key is the shapes alone. An entry owns everything the graph
/// touches: its own slot (arena, workspace, capture stream), the staging buffers, and
/// the buffers the model allocated while it was captured (outputs the caller left NULL, buffers
/// sized at run time), which are kept, not freed, while the graph lives. A replay copies those
/// outputs into fresh buffers for the caller (host memory, or device memory with owned == 2).
/// An entry is used by one run at a time (a mutex held while its work is enqueued); a run that
/// finds it busy runs eagerly. Capture is relaxed-mode stream capture of the model's run; if the
/// capture or the instantiation fails, the key is remembered and runs eagerly from then on.
#include "runtime/cuda/CudaRuntimeInternal.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace coil::runtime::cuda {

// --- slots --------------------------------------------------------------------------------------

std::unique_ptr<Slot> newSlot(size_t workspaceBytes) {
  auto s = std::make_unique<Slot>();
  COIL_CU(cuStreamCreate(&s->stream, CU_STREAM_NON_BLOCKING));
  COIL_CU(cuEventCreate(&s->done, CU_EVENT_DISABLE_TIMING));
  if (workspaceBytes) {
    COIL_CU(cuMemAlloc(&s->workspace, workspaceBytes));
    s->workspaceBytes = workspaceBytes;
  }
  return s;
}

void growArena(Slot &s, size_t bytes) {
  if (s.arena && s.arenaBytes >= bytes) return;
  COIL_CU(cuEventSynchronize(s.done));
  if (s.arena) COIL_CU(cuMemFree(s.arena));
  s.arena = 0, s.arenaBytes = 0;
  size_t n = std::max<size_t>(bytes, 256);
  CUresult r = cuMemAlloc(&s.arena, n);
  if (r != CUDA_SUCCESS)
    throw Failure{COIL_ERROR_RUNTIME, "out of device memory: the run's arena needs " +
                                          std::to_string(bytes) +
                                          " bytes (cuMemAlloc: " + cuText(r) + ")"};
  s.arenaBytes = n;
}

namespace {

// --- allocation callbacks -----------------------------------------------------------------------

/// Device memory of an eager run: stream-ordered on the run's stream.
struct StreamAlloc {
  CUstream stream = nullptr;
  std::string failure; ///< the first failed call, for the run's error message
};

void *streamAlloc(void *ctx, size_t bytes) {
  auto *a = static_cast<StreamAlloc *>(ctx);
  CUdeviceptr p = 0;
  CUresult r = cuMemAllocAsync(&p, std::max<size_t>(bytes, 1), a->stream);
  if (r != CUDA_SUCCESS) {
    if (a->failure.empty())
      a->failure = "cuMemAllocAsync(" + std::to_string(bytes) + " bytes) failed: " + cuText(r);
    return nullptr;
  }
  return reinterpret_cast<void *>(p);
}

void streamFree(void *ctx, void *p) {
  auto *a = static_cast<StreamAlloc *>(ctx);
  if (!p) return;
  CUresult r = cuMemFreeAsync(reinterpret_cast<CUdeviceptr>(p), a->stream);
  if (r != CUDA_SUCCESS && a->failure.empty()) a->failure = "cuMemFreeAsync failed: " + cuText(r);
}

/// Device memory of a captured run: plain allocations that live as long as the graph (frees are
/// deferred to the entry's destruction, since replays use the same addresses).
struct GraphAlloc {
  std::vector<CUdeviceptr> *blocks = nullptr;
  std::string failure;
};

void *graphAlloc(void *ctx, size_t bytes) {
  auto *a = static_cast<GraphAlloc *>(ctx);
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  (void)cuThreadExchangeStreamCaptureMode(&mode);
  CUdeviceptr p = 0;
  CUresult r = cuMemAlloc(&p, std::max<size_t>(bytes, 1));
  (void)cuThreadExchangeStreamCaptureMode(&mode);
  if (r != CUDA_SUCCESS) {
    if (a->failure.empty())
      a->failure = "cuMemAlloc(" + std::to_string(bytes) + " bytes) failed: " + cuText(r);
    return nullptr;
  }
  a->blocks->push_back(p);
  return reinterpret_cast<void *>(p);
}

void graphFree(void *, void *) {}

} // namespace

void *pinnedAlloc(void *, size_t bytes) {
  void *p = nullptr;
  if (cuMemAllocHost(&p, std::max<size_t>(bytes, 1)) != CUDA_SUCCESS) return nullptr;
  return p;
}
void pinnedFree(void *, void *p) {
  if (p) (void)cuMemFreeHost(p);
}

namespace {

// --- runs ---------------------------------------------------------------------------------------

int64_t outputBytes(const RunRequest &q, int64_t i, const int64_t *dims) {
  __int128 n = __int128(q.outputElementBytes[i]);
  for (int64_t d = 0; d < q.outputRanks[i]; ++d) n *= dims[d];
  return n > (__int128(1) << 62) ? -1 : int64_t(n);
}

std::string outputName(const RunRequest &q, int64_t i) {
  return "output " + std::to_string(i) + " '" + q.outputNames[i] + "'";
}

/// The model's error: its message, else the message of the launcher or extern that failed.
Failure modelFailure(const char *error, const char *ctxError, const std::string &allocFailure) {
  std::string msg = error[0] ? error : ctxError[0] ? ctxError : "the run failed";
  if (!allocFailure.empty()) msg += " (" + allocFailure + ")";
  bool caller = msg.find("the caller gave") != std::string::npos;
  return Failure{caller ? COIL_ERROR_INVALID_ARGUMENT : COIL_ERROR_RUNTIME, msg};
}

/// The model's arguments for one run, pointing into this object.
struct RunFrame {
  coil_cuda_ctx ctx = {};
  coil_model_run_args args = {};
  std::vector<const void *> inData;
  std::vector<const int64_t *> inShapes;
  std::vector<void *> outData;
  std::vector<int64_t> capacity;
  std::vector<int64_t> shapes;
  std::vector<int64_t *> outShapes;
  char error[2048] = {};
  char ctxError[2048] = {}; ///< the launchers' and externs' buffer (coil_cuda_ctx::error)

  RunFrame(const Model &m, const RunRequest &q, Slot &slot, CUstream stream) {
    inData.resize(size_t(q.numInputs) + 1);
    inShapes.resize(size_t(q.numInputs) + 1);
    for (int64_t i = 0; i < q.numInputs; ++i)
      inData[i] = q.inputs[i].data, inShapes[i] = q.inputs[i].shape;
    outData.resize(size_t(q.numOutputs) + 1);
    capacity.resize(size_t(q.numOutputs) + 1);
    shapes.resize(size_t(q.numOutputs + 1) * COIL_MAX_RANK);
    outShapes.resize(size_t(q.numOutputs) + 1);
    for (int64_t i = 0; i < q.numOutputs; ++i) {
      // Host runs: the model allocates every output on the device; the runtime copies it out.
      outData[i] = q.hostMemory ? nullptr : q.outputs[i].data;
      capacity[i] = outData[i] ? q.outputs[i].capacity : 0;
      outShapes[i] = &shapes[size_t(i) * COIL_MAX_RANK];
    }
    ctx.stream = stream;
    ctx.functions = m.functions.data();
    ctx.blas = m.blas;
    ctx.workspace = reinterpret_cast<void *>(slot.workspace);
    ctx.workspace_bytes = slot.workspaceBytes;
    ctx.error = ctxError;
    ctx.error_size = sizeof ctxError;
    ctx.host_alloc = pinnedAlloc;
    ctx.host_free = pinnedFree;
    ctx.host_ctx = nullptr;
    ctx.device_ordinal = m.ordinal;
    ctx.sm_version = m.sm;
    args.abi_version = COIL_MODEL_ABI_VERSION;
    args.inputs = inData.data();
    args.input_shapes = inShapes.data();
    args.constants = m.constants.data();
    args.arena = reinterpret_cast<void *>(slot.arena);
    args.outputs = outData.data();
    args.output_capacity = capacity.data();
    args.output_shapes = outShapes.data();
    args.error = error;
    args.error_size = sizeof error;
    args.device_ctx = &ctx;
    args.debug = q.debug;
  }
};

/// Copies inputs to fresh stream-ordered device buffers (host runs); returns them.
std::vector<CUdeviceptr> uploadInputs(const RunRequest &q, CUstream stream, RunFrame &f) {
  std::vector<CUdeviceptr> staged;
  try {
    for (int64_t i = 0; i < q.numInputs; ++i) {
      CUdeviceptr p = 0;
      COIL_CU(cuMemAllocAsync(&p, std::max<size_t>(q.inputBytes[i], 1), stream));
      staged.push_back(p);
      if (q.inputBytes[i]) COIL_CU(cuMemcpyHtoDAsync(p, q.inputs[i].data, q.inputBytes[i], stream));
      f.inData[i] = reinterpret_cast<const void *>(p);
    }
  } catch (...) {
    for (CUdeviceptr p : staged) (void)cuMemFreeAsync(p, stream);
    throw;
  }
  return staged;
}

/// Host outputs from device ones: into the caller's buffers (capacity checked first) or new
/// host blocks (owned = 1). On failure nothing stays allocated and `outputs` are unchanged.
void downloadOutputs(const RunRequest &q, CUstream stream, const std::vector<void *> &device,
                     const int64_t *shapes) {
  std::vector<int64_t> bytes(size_t(q.numOutputs));
  for (int64_t i = 0; i < q.numOutputs; ++i) {
    bytes[i] = outputBytes(q, i, &shapes[i * COIL_MAX_RANK]);
    if (bytes[i] < 0) throw Failure{COIL_ERROR_RUNTIME, outputName(q, i) + " is too large"};
    const coil_output &o = q.outputs[i];
    if (o.data && bytes[i] > o.capacity)
      throw Failure{COIL_ERROR_INVALID_ARGUMENT,
                    outputName(q, i) + " needs " + std::to_string(bytes[i]) +
                        " bytes, the caller gave " + std::to_string(o.capacity)};
  }
  std::vector<void *> host(size_t(q.numOutputs), nullptr);
  try {
    for (int64_t i = 0; i < q.numOutputs; ++i) {
      host[i] = q.outputs[i].data;
      if (!host[i]) {
        size_t n = (std::max<size_t>(size_t(bytes[i]), 1) + 63) / 64 * 64;
        host[i] = std::aligned_alloc(64, n);
        if (!host[i])
          throw Failure{COIL_ERROR_RUNTIME, "out of memory: " + outputName(q, i) + " needs " +
                                                std::to_string(bytes[i]) + " bytes"};
      }
      if (bytes[i])
        COIL_CU(cuMemcpyDtoHAsync(host[i], reinterpret_cast<CUdeviceptr>(device[i]),
                                  size_t(bytes[i]), stream));
    }
    COIL_CU(cuStreamSynchronize(stream));
  } catch (...) {
    for (int64_t i = 0; i < q.numOutputs; ++i)
      if (host[i] && !q.outputs[i].data) std::free(host[i]);
    throw;
  }
  for (int64_t i = 0; i < q.numOutputs; ++i) {
    coil_output &o = q.outputs[i];
    o.owned = o.data ? 0 : 1;
    o.data = host[i];
    std::copy_n(&shapes[i * COIL_MAX_RANK], q.outputRanks[i], o.shape);
  }
}

void runEager(Model &m, const RunRequest &q, int64_t arenaBytes) {
  std::unique_ptr<Slot> slot = m.acquireSlot(size_t(arenaBytes));
  bool ownStream = q.hostMemory || !q.stream;
  CUstream stream = ownStream ? slot->stream : static_cast<CUstream>(q.stream);
  struct Finish { // records the slot's event and returns it to the pool, on every path
    Model &m;
    std::unique_ptr<Slot> &slot;
    CUstream stream;
    ~Finish() {
      (void)cuEventRecord(slot->done, stream);
      m.releaseSlot(std::move(slot));
    }
  } finish{m, slot, stream};
  COIL_CU(cuStreamWaitEvent(stream, slot->done, 0));

  RunFrame f(m, q, *slot, stream);
  StreamAlloc alloc{stream, {}};
  f.args.alloc = streamAlloc;
  f.args.free = streamFree;
  f.args.alloc_ctx = &alloc;
  std::vector<CUdeviceptr> staged;
  if (q.hostMemory) staged = uploadInputs(q, stream, f);
  auto freeStaged = [&] {
    for (CUdeviceptr p : staged) (void)cuMemFreeAsync(p, stream);
    staged.clear();
  };
  int32_t rc = q.run(&f.args);
  if (rc != 0) {
    freeStaged();
    if (ownStream) (void)cuStreamSynchronize(stream);
    throw modelFailure(f.error, f.ctxError, alloc.failure);
  }
  if (q.hostMemory) {
    std::vector<void *> device(f.outData.begin(), f.outData.end() - 1);
    try {
      downloadOutputs(q, stream, device, f.shapes.data());
    } catch (...) {
      for (void *p : device) streamFree(&alloc, p);
      freeStaged();
      (void)cuStreamSynchronize(stream);
      throw;
    }
    for (void *p : device) streamFree(&alloc, p);
    freeStaged();
    return;
  }
  if (ownStream) {
    CUresult r = cuStreamSynchronize(stream);
    if (r != CUDA_SUCCESS) {
      for (int64_t i = 0; i < q.numOutputs; ++i)
        if (!q.outputs[i].data) (void)cuMemFree(reinterpret_cast<CUdeviceptr>(f.outData[i]));
      throw Failure{COIL_ERROR_RUNTIME,
                    "the run failed on the GPU (cuStreamSynchronize: " + cuText(r) + ")"};
    }
  }
  for (int64_t i = 0; i < q.numOutputs; ++i) {
    coil_output &o = q.outputs[i];
    o.owned = o.data ? 0 : 2;
    o.data = f.outData[i];
    std::copy_n(f.outShapes[i], q.outputRanks[i], o.shape);
  }
}

std::vector<int64_t> graphKey(const RunRequest &q) {
  std::vector<int64_t> key{q.hostMemory ? 1 : 0, q.numInputs, q.numOutputs};
  for (int64_t i = 0; i < q.numInputs; ++i) {
    const coil_tensor &t = q.inputs[i];
    key.push_back(t.rank);
    key.insert(key.end(), t.shape, t.shape + t.rank);
    if (!q.hostMemory) key.push_back(int64_t(reinterpret_cast<intptr_t>(t.data)));
  }
  if (!q.hostMemory)
    for (int64_t i = 0; i < q.numOutputs; ++i) {
      key.push_back(int64_t(reinterpret_cast<intptr_t>(q.outputs[i].data)));
      key.push_back(q.outputs[i].data ? q.outputs[i].capacity : 0);
    }
  return key;
}

/// Captures the model's run into `e` (locked by the caller). Returns false when the graph
/// could not be made (the caller then runs eagerly); throws on a model error.
bool capture(Model &m, const RunRequest &q, int64_t arenaBytes, GraphEntry &e) {
  e.slot = newSlot(m.workspaceBytes);
  growArena(*e.slot, size_t(arenaBytes));
  CUstream stream = e.slot->stream;
  RunFrame f(m, q, *e.slot, stream);
  if (q.hostMemory)
    for (int64_t i = 0; i < q.numInputs; ++i) {
      CUdeviceptr p = 0;
      COIL_CU(cuMemAlloc(&p, std::max<size_t>(q.inputBytes[i], 1)));
      e.staging.push_back(p);
      f.inData[i] = reinterpret_cast<const void *>(p);
    }
  GraphAlloc alloc{&e.blocks, {}};
  f.args.alloc = graphAlloc;
  f.args.free = graphFree;
  f.args.alloc_ctx = &alloc;
  if (cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_RELAXED) != CUDA_SUCCESS) return false;
  int32_t rc = q.run(&f.args);
  CUgraph graph = nullptr;
  CUresult r = cuStreamEndCapture(stream, &graph);
  if (rc != 0) {
    if (graph) (void)cuGraphDestroy(graph);
    // Whether the model failed on its own or because the capture broke it, run it eagerly: an
    // eager run reports the model's own errors.
    return false;
  }
  if (r != CUDA_SUCCESS || !graph || !alloc.failure.empty()) {
    if (graph) (void)cuGraphDestroy(graph);
    return false;
  }
  e.graph = graph;
  if (cuGraphInstantiate(&e.exec, graph, 0) != CUDA_SUCCESS) {
    e.exec = nullptr;
    return false;
  }
  e.outputs.assign(f.outData.begin(), f.outData.end() - 1);
  for (int64_t i = 0; i < q.numOutputs; ++i)
    e.entryOwned.push_back(q.hostMemory || !q.outputs[i].data);
  e.shapes = f.shapes;
  e.ready = true;
  return true;
}

/// Launches the entry's graph for this run and hands the outputs over (e locked, ready).
void replay(const RunRequest &q, GraphEntry &e) {
  bool ownStream = q.hostMemory || !q.stream;
  CUstream stream = ownStream ? e.slot->stream : static_cast<CUstream>(q.stream);
  if (q.hostMemory) // the capacity check before any work
    for (int64_t i = 0; i < q.numOutputs; ++i) {
      int64_t bytes = outputBytes(q, i, &e.shapes[size_t(i) * COIL_MAX_RANK]);
      if (q.outputs[i].data && bytes > q.outputs[i].capacity)
        throw Failure{COIL_ERROR_INVALID_ARGUMENT,
                      outputName(q, i) + " needs " + std::to_string(bytes) +
                          " bytes, the caller gave " + std::to_string(q.outputs[i].capacity)};
    }
  COIL_CU(cuStreamWaitEvent(stream, e.slot->done, 0));
  if (q.hostMemory)
    for (int64_t i = 0; i < q.numInputs; ++i)
      if (q.inputBytes[i])
        COIL_CU(cuMemcpyHtoDAsync(e.staging[i], q.inputs[i].data, q.inputBytes[i], stream));
  COIL_CU(cuGraphLaunch(e.exec, stream));
  if (q.hostMemory) {
    try {
      downloadOutputs(q, stream, e.outputs, e.shapes.data());
    } catch (...) {
      (void)cuEventRecord(e.slot->done, stream);
      throw;
    }
    COIL_CU(cuEventRecord(e.slot->done, stream));
    return;
  }
  std::vector<CUdeviceptr> fresh(size_t(q.numOutputs), 0);
  auto freeFresh = [&] {
    for (CUdeviceptr p : fresh)
      if (p) (void)cuMemFreeAsync(p, stream);
  };
  try {
    for (int64_t i = 0; i < q.numOutputs; ++i) {
      if (!e.entryOwned[i]) continue;
      int64_t bytes = outputBytes(q, i, &e.shapes[size_t(i) * COIL_MAX_RANK]);
      COIL_CU(cuMemAllocAsync(&fresh[i], std::max<size_t>(size_t(bytes), 1), stream));
      if (bytes)
        COIL_CU(cuMemcpyDtoDAsync(fresh[i], reinterpret_cast<CUdeviceptr>(e.outputs[i]),
                                  size_t(bytes), stream));
    }
    COIL_CU(cuEventRecord(e.slot->done, stream));
    if (ownStream) COIL_CU(cuStreamSynchronize(stream));
  } catch (...) {
    freeFresh();
    (void)cuEventRecord(e.slot->done, stream);
    throw;
  }
  for (int64_t i = 0; i < q.numOutputs; ++i) {
    coil_output &o = q.outputs[i];
    o.owned = e.entryOwned[i] ? 2 : 0;
    o.data = e.entryOwned[i] ? reinterpret_cast<void *>(fresh[i]) : e.outputs[i];
    std::copy_n(&e.shapes[size_t(i) * COIL_MAX_RANK], q.outputRanks[i], o.shape);
  }
}

/// Device runs: every input and caller output buffer must be memory the GPU can address (a
/// host pointer there would fault the context for every later run).
void checkDevicePointers(const RunRequest &q) {
  auto check = [](const void *p, const std::string &what) {
    unsigned type = 0;
    CUresult r = cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                       reinterpret_cast<CUdeviceptr>(p));
    if (r != CUDA_SUCCESS)
      throw Failure{COIL_ERROR_INVALID_ARGUMENT,
                    what + " is not CUDA memory (" + cuText(r) +
                        "): coil_model_run_device takes device pointers; coil_model_run takes "
                        "host memory"};
  };
  for (int64_t i = 0; i < q.numInputs; ++i)
    if (q.inputBytes[i] && q.inputs[i].data)
      check(q.inputs[i].data, "input " + std::to_string(i) + " data");
  for (int64_t i = 0; i < q.numOutputs; ++i)
    if (q.outputs[i].data && q.outputs[i].capacity > 0)
      check(q.outputs[i].data, outputName(q, i) + " buffer");
}

} // namespace

void runModel(Model &m, const RunRequest &q) {
  ContextScope scope(device());
  if (!q.hostMemory) checkDevicePointers(q);
  std::vector<const int64_t *> shapes(size_t(q.numInputs) + 1);
  for (int64_t i = 0; i < q.numInputs; ++i) shapes[i] = q.inputs[i].shape;
  int64_t arenaBytes = q.arenaBytes(shapes.data());
  if (arenaBytes < 0)
    throw Failure{COIL_ERROR_RUNTIME,
                  "arena size " + std::to_string(arenaBytes) + " for these input shapes"};
  if (!m.graphs || q.debug) return runEager(m, q, arenaBytes);

  std::vector<int64_t> key = graphKey(q);
  GraphEntry *e = nullptr;
  bool fresh = false;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (!m.noGraph.count(key)) {
      auto it = m.graphEntries.find(key);
      if (it != m.graphEntries.end()) {
        if (it->second->mu.try_lock()) e = it->second.get();
      } else if (m.graphEntries.size() < m.maxGraphs) {
        auto entry = std::make_unique<GraphEntry>();
        entry->mu.lock();
        e = entry.get();
        fresh = true;
        m.graphEntries.emplace(key, std::move(entry));
      }
    }
  }
  if (!e) return runEager(m, q, arenaBytes); // busy, refused before, or too many graphs
  std::unique_lock<std::mutex> entryLock(e->mu, std::adopt_lock);
  auto drop = [&](bool remember) { // removes the entry (still locked by this run)
    std::unique_ptr<GraphEntry> gone;
    {
      std::lock_guard<std::mutex> lock(m.mu);
      auto it = m.graphEntries.find(key);
      if (it != m.graphEntries.end() && it->second.get() == e) {
        gone = std::move(it->second);
        m.graphEntries.erase(it);
      }
      if (remember) m.noGraph.insert(key);
    }
    entryLock.unlock();
    gone.reset();
  };
  if (fresh) {
    bool made = false;
    try {
      made = capture(m, q, arenaBytes, *e);
    } catch (...) {
      drop(false);
      throw;
    }
    if (!made) {
      drop(true);
      return runEager(m, q, arenaBytes);
    }
    ++m.captures;
  } else if (!e->ready) {
    entryLock.unlock();
    return runEager(m, q, arenaBytes);
  } else {
    ++m.replays;
  }
  replay(q, *e);
}

} // namespace coil::runtime::cuda
