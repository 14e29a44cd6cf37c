"""A simulated CUDA device for testing coil.pywrapper's CUDA path without a GPU.

wrapper.py of a CUDA package runs through pywrapper.CudaRuntime exactly as on a GPU, except
that "device memory" is host memory and the pieces that need a GPU are replaced:
  - SimHost stands in for _coil.CudaWrapperHost (libcoil_cuda's run): it builds the run's
    coil_model_run_args (inputs and constants copied into 64-aligned blocks, an arena, an
    allocator that tracks its blocks, a coil_cuda_ctx with a host allocator), calls wrapper.py's
    run, copies the outputs out and checks that every block was freed;
  - SimDriver does the driver's copies with memmove;
  - the launchers `<kernel>_c<i>(ctx, ...)` call the CPU package's launcher of that kernel
    (same kernels, same parameters), a device extern (ctx, ...) calls the CPU function that
    wrapper.json names as its `host_function` (the extern table's CPU twin), and the CPU externs
    of host fallbacks are the real ones.
So the emitted CUDA lines (arena views, allocator, frees, host-fallback copies, symbol binding,
output hand-over, config choice by size bucket, error paths) are exercised on the CPU; the GPU
test (test_python_gpu.py) runs the same packages on a real device.
"""
import ctypes
import json
import os

import numpy as np

import coil
import coil.pywrapper as pw


class SimDriver:
    def sync(self, stream):
        return 0

    def dtoh(self, dst, src, n):
        ctypes.memmove(dst, src, n)
        return 0

    def htod(self, dst, src, n):
        ctypes.memmove(dst, src, n)
        return 0

    def dtod_async(self, dst, src, n, stream):
        ctypes.memmove(dst, src, n)
        return 0

    def check(self, r, what):
        if r:
            raise coil.Error(f"{what}: simulated driver error {r}")


class _Blocks:
    """An allocator of 64-aligned host blocks that remembers what is live."""

    def __init__(self):
        self.live = {}
        self.total = 0

    def alloc(self, _ctx, n):
        b = pw.aligned_bytes(max(int(n), 1))
        b[:] = 0xCD  # garbage, as fresh device memory would hold
        self.live[b.ctypes.data] = b
        self.total += 1
        return b.ctypes.data

    def free(self, _ctx, p):
        if p:
            if p not in self.live:
                raise AssertionError(f"free of {p:#x}, which the allocator never gave out")
            del self.live[p]


class SimHost:
    def __init__(self, wrapper, weights):
        self.w = wrapper
        self.weights = weights
        self.device_blocks = _Blocks()
        self.host_blocks = _Blocks()
        self.runs = 0

    def run(self, run, arena_fn, arrays, dtypes, ranks, elem_bytes, names, odtypes):
        keep = []

        def block(data):
            b = pw.aligned_bytes(max(data.nbytes, 1))
            b[:data.nbytes] = data.reshape(-1).view(np.uint8)
            keep.append(b)
            return b.ctypes.data

        n_in, n_out = len(arrays), len(ranks)
        shapes = [np.array(a.shape or (0,), np.int64) for a in arrays]
        shape_ptrs = (ctypes.POINTER(ctypes.c_int64) * (n_in + 1))(
            *[s.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)) for s in shapes])
        arena_bytes = arena_fn([tuple(a.shape) for a in arrays])
        arena = pw.aligned_bytes(max(arena_bytes, 256))
        arena[:] = 0xCD  # garbage, as device memory would hold
        consts = [block(self.weights[c["offset"]:c["offset"] + c["bytes"]])
                  for c in self.w.meta["constants"]]
        ins = (ctypes.c_void_p * (n_in + 1))(*[block(np.ascontiguousarray(a)) for a in arrays])
        cs = (ctypes.c_void_p * (len(consts) + 1))(*consts)
        outs = (ctypes.c_void_p * (n_out + 1))()
        cap = (ctypes.c_int64 * (n_out + 1))()
        oshape = [np.zeros(8, np.int64) for _ in range(n_out)]
        oshape_ptrs = (ctypes.POINTER(ctypes.c_int64) * (n_out + 1))(
            *[s.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)) for s in oshape])
        err = ctypes.create_string_buffer(2048)
        ctx_err = ctypes.create_string_buffer(2048)
        ctx = pw._CudaCtx()
        ctx.stream = None
        ctx.error = ctypes.addressof(ctx_err)
        ctx.error_size = 2048
        ctx.host_alloc = pw.ALLOC_FN(self.host_blocks.alloc)
        ctx.host_free = pw.FREE_FN(self.host_blocks.free)
        a = pw._RunArgs()
        a.abi_version = coil.model_abi_version()
        a.inputs = ctypes.cast(ins, ctypes.POINTER(ctypes.c_void_p))
        a.input_shapes = ctypes.cast(shape_ptrs, ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)))
        a.constants = ctypes.cast(cs, ctypes.POINTER(ctypes.c_void_p))
        a.arena = arena.ctypes.data
        a.outputs = ctypes.cast(outs, ctypes.POINTER(ctypes.c_void_p))
        a.output_capacity = ctypes.cast(cap, ctypes.POINTER(ctypes.c_int64))
        a.output_shapes = ctypes.cast(oshape_ptrs,
                                      ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)))
        a.alloc = pw.ALLOC_FN(self.device_blocks.alloc)
        a.free = pw.FREE_FN(self.device_blocks.free)
        a.error = ctypes.addressof(err)
        a.error_size = 2048
        a.device_ctx = ctypes.addressof(ctx)
        self.runs += 1
        rc = run(ctypes.addressof(a))
        if rc:
            if self.device_blocks.live or self.host_blocks.live:
                raise AssertionError(f"a failed run left {len(self.device_blocks.live)} device "
                                     f"and {len(self.host_blocks.live)} host blocks allocated")
            raise coil.Error(err.value.decode() or ctx_err.value.decode())
        result = []
        for i in range(n_out):
            shape = [int(d) for d in oshape[i][:ranks[i]]]
            n = elem_bytes[i] * int(np.prod(shape, dtype=np.int64))
            result.append((ctypes.string_at(outs[i], n) if n else b"", shape))
            self.device_blocks.free(None, outs[i])
        if self.device_blocks.live or self.host_blocks.live:
            raise AssertionError(f"the run left {len(self.device_blocks.live)} device and "
                                 f"{len(self.host_blocks.live)} host blocks allocated")
        return result


def host_functions(pkg):
    """The CPU function of every device extern of package `pkg`, from its src/wrapper.json."""
    with open(os.path.join(pkg, "src", "wrapper.json")) as f:
        lines = json.load(f)["lines"]
    return {l["function"]: l["host_function"] for l in lines
            if l["kind"] == "ExternKernelOut" and l["place"] == "device"}


class _SimFunctions:
    """wrapper.py's `lib` on the simulated device (see the module comment)."""

    def __init__(self, cuda_module, cpu_wrapper, twins):
        cpu = cpu_wrapper._functions
        self.cpu = cpu
        for name, sig in cuda_module.LAUNCHERS.items():
            kernel = name.rsplit("_c", 1)[0]
            cpu_sig = cpu_wrapper.module.LAUNCHERS.get(kernel + "_c0")
            if cpu_sig != sig[1:]:
                raise AssertionError(f"launcher {name} ({sig}) has no CPU twin of the same "
                                     f"parameters ({cpu_sig})")
            setattr(self, name, self._launcher(getattr(cpu, kernel + "_c0")))
        for name, sig in cuda_module.EXTERNS.items():
            if sig.startswith("C"):  # a device extern: simulated by its CPU twin
                setattr(self, name, self._launcher(getattr(cpu, twins[name])))
            else:
                setattr(self, name, pw._Function(getattr(cpu_wrapper._runtime, name), sig, name,
                                                 True))

    @staticmethod
    def _launcher(fn):
        def call(cu, *args):
            r = fn(*args)
            return 0 if r is None else r
        return call

    def extern_failed(self, who, function):
        self.cpu.extern_failed(who, function)


class SimWrapper(pw.PythonWrapper):
    """A CUDA package's wrapper.py on the simulated device; `cpu_pkg` is the CPU package of the
    same model (its launchers and extern twins stand in for the GPU's)."""

    def __init__(self, path, cpu_pkg, debug=None):
        self._cpu = pw.load(cpu_pkg, debug=None)
        super().__init__(path, debug)

    def _open_cuda(self, weights):
        self.sim = SimHost(self, weights)
        return self.sim, None, SimDriver()

    def _load_model(self):
        return None

    def _make_functions(self, cuda_lib):
        return _SimFunctions(self.module, self._cpu, host_functions(self.path))
