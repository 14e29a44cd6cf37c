"""coil.pywrapper: runs a package through its Python wrapper, src/wrapper.py.

wrapper.py is the Python twin of wrapper.cpp, printed from the same Wrapper IR: it executes the
same lines in the same order, with numpy arrays as buffers, and calls model.so's kernel
launchers and libcoil_runtime's extern functions through ctypes. This module gives it what it
needs (`Runtime`): the arena, buffer views, the allocator callback of allocating externs, the
ctypes functions and the debug hook.

    import coil.pywrapper
    w = coil.pywrapper.load("mlp.pkg")
    (probs,) = w.run(x)            # the same outputs as coil.load("mlp.pkg").run(x)

CPU and CUDA packages. A CUDA package's wrapper.py runs inside libcoil_cuda's run (the nanobind
class _coil.CudaWrapperHost): the runtime copies the numpy inputs to the device and hands
wrapper.py the run's coil_model_run_args (device arena, allocator, device constants, the
coil_cuda_ctx `cu` with the stream and the fatbin's functions), wrapper.py calls the launchers
and externs with them like wrapper.cpp does, and the runtime copies the outputs back (CUDA
graphs are off for these runs). Inputs are checked like the runtime does (count, dtype, rank,
each dim against its symbolic size and the symbol ranges).

Debug printing (DebugPrint lines) follows COIL_DEBUG_PRINTER (0/off, 1/save, 2/print,
3/names), COIL_DEBUG_KERNELS (comma list of launch names as metadata.json "launches" names them,
an extern function's name selecting all its launches; empty: all) and COIL_DEBUG_DIR, read
when the package is loaded; `load(pkg, debug=callable)` installs a hook of your own, called as
hook(when, launch, [(name, value), ...]). Without a hook (debug=None, COIL_DEBUG_PRINTER unset
or 0) a DebugPrint line costs one attribute test.
"""
import ctypes
import hashlib
import importlib.util
import json
import os
import sys

import numpy as np

from . import Error, as_host_array, model_abi_version, numpy_dtype, runtime_path

WRAPPER_ABI = 2
ALIGN = 64

_STORAGE = {
    "f64": np.float64, "f32": np.float32, "f16": np.float16, "bf16": np.uint16,
    "i64": np.int64, "i32": np.int32, "i16": np.int16, "i8": np.int8, "u64": np.uint64,
    "u32": np.uint32, "u16": np.uint16, "u8": np.uint8, "bool": np.bool_,
}
_CODES = {n: i for i, n in enumerate(
    ["f64", "f32", "f16", "bf16", "i64", "i32", "i16", "i8", "u64", "u32", "u16", "u8", "bool"])}
ALLOC_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
FREE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
_ARGTYPES = {"P": [ctypes.c_void_p], "I": [ctypes.c_int64], "D": [ctypes.c_double],
             "S": [ctypes.c_void_p], "A": [ALLOC_FN, ctypes.c_void_p], "C": [ctypes.c_void_p]}


class _RunArgs(ctypes.Structure):
    """coil_model_run_args (include/coil/model_abi.h)."""

    _fields_ = [("abi_version", ctypes.c_uint32), ("reserved", ctypes.c_uint32),
                ("inputs", ctypes.POINTER(ctypes.c_void_p)),
                ("input_shapes", ctypes.POINTER(ctypes.POINTER(ctypes.c_int64))),
                ("constants", ctypes.POINTER(ctypes.c_void_p)), ("arena", ctypes.c_void_p),
                ("outputs", ctypes.POINTER(ctypes.c_void_p)),
                ("output_capacity", ctypes.POINTER(ctypes.c_int64)),
                ("output_shapes", ctypes.POINTER(ctypes.POINTER(ctypes.c_int64))),
                ("alloc", ALLOC_FN), ("free", FREE_FN), ("alloc_ctx", ctypes.c_void_p),
                ("error", ctypes.c_void_p), ("error_size", ctypes.c_size_t),
                ("device_ctx", ctypes.c_void_p), ("debug", ctypes.c_void_p)]


class _CudaCtx(ctypes.Structure):
    """coil_cuda_ctx (include/coil/cuda_abi.h)."""

    _fields_ = [("stream", ctypes.c_void_p), ("functions", ctypes.c_void_p),
                ("blas", ctypes.c_void_p), ("workspace", ctypes.c_void_p),
                ("workspace_bytes", ctypes.c_size_t), ("error", ctypes.c_void_p),
                ("error_size", ctypes.c_size_t), ("host_alloc", ALLOC_FN),
                ("host_free", FREE_FN), ("host_ctx", ctypes.c_void_p),
                ("device_ordinal", ctypes.c_int32), ("sm_version", ctypes.c_int32)]


class DeviceBuffer:
    """A buffer of a CUDA run: its device address, coil dtype and shape."""

    __slots__ = ("ptr", "dtype", "shape")

    def __init__(self, ptr, dtype, shape):
        self.ptr = int(ptr or 0)
        self.dtype = dtype
        self.shape = tuple(int(d) for d in shape)

    @property
    def nbytes(self):
        return _nbytes(self.dtype, self.shape)

    def __repr__(self):
        return f"DeviceBuffer({self.ptr:#x}, {self.dtype}, {list(self.shape)})"


class _Driver:
    """The few CUDA driver calls wrapper.py's host externs need (libcuda, loaded by
    libcoil_cuda already)."""

    def __init__(self):
        self._lib = ctypes.CDLL("libcuda.so.1")
        v, sz = ctypes.c_void_p, ctypes.c_size_t
        self.sync = self._fn("cuStreamSynchronize", [v])
        self.dtoh = self._fn("cuMemcpyDtoH_v2", [v, ctypes.c_uint64, sz])
        self.htod = self._fn("cuMemcpyHtoD_v2", [ctypes.c_uint64, v, sz])
        self.dtod_async = self._fn("cuMemcpyDtoDAsync_v2",
                                   [ctypes.c_uint64, ctypes.c_uint64, sz, v])
        self._name = self._fn("cuGetErrorName", [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)])
        self._text = self._fn("cuGetErrorString", [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)])

    def _fn(self, name, argtypes):
        f = getattr(self._lib, name)
        f.restype = ctypes.c_int
        f.argtypes = argtypes
        return f

    def check(self, r, what):
        """coil_cuda_check of wrapper.cpp: a failed call raises with its name and text."""
        if r == 0:
            return
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        self._name(r, ctypes.byref(name))
        self._text(r, ctypes.byref(text))
        raise Error(f"{what}: {(name.value or b'unknown CUDA error').decode()} "
                    f"({(text.value or b'').decode()})")


def storage_dtype(name):
    """The numpy dtype of a coil dtype's storage (bf16: its uint16 bits)."""
    try:
        return np.dtype(_STORAGE[name])
    except KeyError:
        raise Error(f"unknown coil dtype '{name}'") from None


class BFloat16Bits(np.ndarray):
    """The storage of a coil bf16 buffer in the Python wrapper: its uint16 bit patterns (numpy
    has no bfloat16), marked as bf16 so that the debug printer and hooks can tell it from u16.
    Every bf16 buffer of a run (inputs, constants, arena views, allocations, device copies) is
    one; outputs are handed back as ml_dtypes.bfloat16 when installed, else plain uint16."""

    def as_float32(self):
        """The values: each 16-bit pattern is the top half of an f32."""
        bits = np.asarray(self, np.uint16).astype(np.uint32) << np.uint32(16)
        return bits.view(np.float32)


def as_storage(a, dtype):
    """`a` (an array of bytes or of the storage type) viewed as coil dtype `dtype`'s storage."""
    v = a.view(storage_dtype(dtype))
    return v.view(BFloat16Bits) if dtype == "bf16" else v


def aligned_bytes(nbytes):
    """A fresh uint8 array of `nbytes` bytes whose data is 64-byte aligned."""
    raw = np.empty(int(nbytes) + ALIGN, np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    return raw[start:start + int(nbytes)]


def _nbytes(dtype, shape):
    n = storage_dtype(dtype).itemsize
    for d in shape:
        if d < 0:
            raise Error(f"negative dim in shape {tuple(shape)}")
        n *= int(d)
    return n


class _Function:
    """A ctypes function taking numpy arrays (their data pointers), ints and floats."""

    def __init__(self, cfn, sig, name, status):
        self.name = name
        self._fn = cfn
        # Extern functions and CUDA launchers return an int32 status (0: success), which
        # wrapper.py checks; CPU launchers return nothing.
        cfn.restype = ctypes.c_int32 if status else None
        cfn.argtypes = [t for c in sig for t in _ARGTYPES[c]]
        self._kinds = [k for c in sig for k in (("A", "P") if c == "A" else (c,))]

    def __call__(self, *args):
        if len(args) != len(self._kinds):
            raise Error(f"{self.name} takes {len(self._kinds)} arguments, got {len(args)}")
        conv = []
        for a, k in zip(args, self._kinds):
            if isinstance(a, np.ndarray):
                conv.append(a.ctypes.data)
            elif isinstance(a, DeviceBuffer):
                conv.append(a.ptr)
            elif k == "I":
                conv.append(int(a))
            elif k == "D":
                conv.append(float(a))
            else:
                conv.append(a)
        return self._fn(*conv)


class _Functions:
    """The launchers of model.so and the extern functions of libcoil_runtime (coil_cpu_*) and
    libcoil_cuda (coil_cuda_*), as wrapper.py's `lib`."""

    def __init__(self, model_lib, runtime_lib, launchers, externs, cuda_lib=None):
        self.last_error = runtime_lib.coil_cpu_last_error
        self.last_error.restype = ctypes.c_char_p
        self.last_error.argtypes = []
        for table, lib, where, status in ((launchers, model_lib, "model.so", cuda_lib is not None),
                                          (externs, runtime_lib, "libcoil_runtime", True)):
            for name, sig in table.items():
                src, place = lib, where
                # A device extern (wrapper.py declares it with the run's ctx first).
                if table is externs and sig.startswith("C") and cuda_lib is not None:
                    src, place = cuda_lib, "libcoil_cuda"
                try:
                    fn = getattr(src, name)
                except AttributeError:
                    raise Error(f"{place} has no function '{name}' (wrapper.py calls it)") from None
                setattr(self, name, _Function(fn, sig, name, status))

    def extern_failed(self, who, function):
        """A failed host extern call (a function of libcoil_runtime, which leaves its message in
        coil_cpu_last_error), worded as wrapper.cpp does: "node 'rs' (Reshape): MESSAGE"."""
        msg = self.last_error()
        raise Error(f"{who}: {msg.decode() if msg else 'failed'}")


class Cells:
    """n int64 cells an extern writes through pointers (allocated blocks, defined symbols)."""

    def __init__(self, n):
        self._a = np.zeros(max(int(n), 1), np.int64)

    def at(self, i):
        return self._a.ctypes.data + 8 * int(i)

    def __getitem__(self, i):
        return int(self._a[i])


class Runtime:
    """What one run of wrapper.py uses: `rt` in its run()."""

    def __init__(self, functions, debug=None):
        self._functions = functions
        self.debug = debug
        self._blocks = {}
        self._alloc_failed = False
        self.alloc = ALLOC_FN(self._alloc)
        self.alloc_ctx = None

    def functions(self, launchers, externs):
        return self._functions

    # -- storage
    def arena(self, nbytes):
        if nbytes < 0:
            raise Error(f"impossible arena size {nbytes}")
        return aligned_bytes(nbytes)

    def view(self, arena, offset, dtype, shape):
        n = _nbytes(dtype, shape)
        if offset < 0 or offset + n > arena.nbytes:
            raise Error(f"buffer at arena offset {offset} ({n} bytes) exceeds the arena "
                        f"({arena.nbytes} bytes)")
        return as_storage(arena[offset:offset + n], dtype).reshape(shape)

    def empty(self, dtype, shape):
        return as_storage(aligned_bytes(_nbytes(dtype, shape)), dtype).reshape(shape)

    output = empty

    def reinterpret(self, base, offset, dtype, shape):
        raw = base.reshape(-1).view(np.uint8)
        n = _nbytes(dtype, shape)
        if offset < 0 or offset + n > raw.nbytes:
            raise Error(f"view of {n} bytes at offset {offset} exceeds its base "
                        f"({raw.nbytes} bytes)")
        return as_storage(raw[offset:offset + n], dtype).reshape(shape)

    def cells(self, n):
        return Cells(n)

    # -- the allocator callback of allocating externs
    def _alloc(self, ctx, nbytes):
        try:
            block = aligned_bytes(max(int(nbytes), 1))
        except Exception:  # noqa: BLE001 -- nothing may escape a ctypes callback
            self._alloc_failed = True
            return None
        self._blocks[block.ctypes.data] = block
        return block.ctypes.data

    def check_alloc(self, function):
        if self._alloc_failed:
            raise MemoryError(f"out of memory in extern call '{function}'")

    def extern_failed(self, who, function):
        self._functions.extern_failed(who, function)

    def adopt(self, ptr, dtype, shape):
        """The block the allocator handed out at `ptr`, as a buffer of dtype and shape."""
        n = _nbytes(dtype, shape)
        ptr = ptr & 0xFFFFFFFFFFFFFFFF
        if ptr == 0:
            if n:
                raise Error(f"an extern call returned no storage for {n} bytes")
            return self.empty(dtype, shape)
        block = self._blocks.pop(ptr, None)
        if block is None:
            raise Error(f"an extern call returned storage {ptr:#x} the allocator never gave out")
        if block.nbytes < n:
            raise Error(f"an extern call allocated {block.nbytes} bytes for a buffer of {n}")
        return as_storage(block[:n], dtype).reshape(shape)

    def result(self, buf, dtype, shape):
        if buf is None:
            raise Error("an output was never computed")
        return buf.reshape(shape)


class HostCells:
    """Host block addresses of a host extern's operands (wrapper.cpp's coil_h)."""

    def __init__(self, n):
        self._a = np.zeros(max(int(n), 1), np.uint64)

    def at(self, i):
        return self._a.ctypes.data + 8 * int(i)

    def __getitem__(self, i):
        return int(self._a[i])

    def __setitem__(self, i, v):
        self._a[i] = int(v or 0)

    def __iter__(self):
        return (int(v) for v in self._a)


class HostTracker:
    """The allocator an allocating host extern gets: the ctx's host memory, failures noted
    (wrapper.cpp's coil_host_tracker)."""

    def __init__(self, ctx):
        self._ctx = ctx
        self.failed = False
        self.alloc = ALLOC_FN(self._alloc)
        self.ctx = None

    def _alloc(self, _, nbytes):
        p = self._ctx.host_alloc(self._ctx.host_ctx, nbytes) if nbytes else None
        if not p and nbytes:
            self.failed = True
        return p

    def check(self, what):
        if self.failed:
            raise Error(f"{what}: out of host memory")


class CudaRuntime:
    """`rt` of a CUDA package's wrapper.py: one run inside libcoil_cuda, on the run's
    coil_model_run_args (at address `args`): its device arena, allocator, inputs, constants,
    outputs and coil_cuda_ctx. Blocks from the allocator that are neither freed nor handed over
    when the run ends (a failure) are freed by release()."""

    def __init__(self, wrapper, args, debug):
        self.args = _RunArgs.from_address(int(args))
        if self.args.abi_version != model_abi_version():
            raise Error(f"model ABI version {model_abi_version()}, the caller has "
                        f"{self.args.abi_version}")
        self._w = wrapper
        self._functions = wrapper._functions
        self._driver = wrapper._driver
        self._ctx = (_CudaCtx.from_address(self.args.device_ctx) if self.args.device_ctx
                     else None)
        self._live = {}  # address -> bytes of the allocator's blocks this run holds
        self._host_live = set()  # addresses of the ctx's host blocks this run holds
        self._hook = debug
        self.debug = None if debug is None else self._debug
        self.alloc_failed = False

    def functions(self, launchers, externs):
        return self._functions

    def inputs(self, table):
        a = self.args
        return [DeviceBuffer(a.inputs[i], dt, [a.input_shapes[i][d] for d in range(len(shape))])
                for i, (_, dt, shape) in enumerate(table)]

    def constants(self, table):
        return [DeviceBuffer(self.args.constants[i], c["dtype"], c["shape"])
                for i, c in enumerate(table)]

    # -- storage
    def arena(self, nbytes):
        if nbytes < 0:
            raise Error(f"impossible arena size {nbytes}")
        return DeviceBuffer(self.args.arena, "u8", (nbytes,))

    def view(self, arena, offset, dtype, shape):
        n = _nbytes(dtype, shape)
        if offset < 0 or offset + n > arena.nbytes:
            raise Error(f"buffer at arena offset {offset} ({n} bytes) exceeds the arena "
                        f"({arena.nbytes} bytes)")
        return DeviceBuffer(arena.ptr + offset, dtype, shape)

    def empty(self, dtype, shape):
        n = _nbytes(dtype, shape)
        p = self.args.alloc(self.args.alloc_ctx, n)
        if not p and n:
            raise Error(f"out of device memory allocating {n} bytes")
        if p:
            self._live[p] = n
        return DeviceBuffer(p, dtype, shape)

    def output(self, dtype, shape, index):
        """Output `index`: the caller's buffer (capacity checked) or a block of the allocator."""
        n = _nbytes(dtype, shape)
        given = self.args.outputs[index]
        if given:
            self._check_capacity(index, n)
            return DeviceBuffer(given, dtype, shape)
        return self.empty(dtype, shape)

    def _check_capacity(self, index, n):
        cap = self.args.output_capacity
        if cap and cap[index] < n:
            raise Error(f"output '{self._w.module.OUTPUTS[index][0]}' needs {n} bytes, the "
                        f"caller gave {cap[index]}")

    def reinterpret(self, base, offset, dtype, shape):
        n = _nbytes(dtype, shape)
        if offset < 0 or offset + n > base.nbytes:
            raise Error(f"view of {n} bytes at offset {offset} exceeds its base "
                        f"({base.nbytes} bytes)")
        return DeviceBuffer(base.ptr + offset, dtype, shape)

    def free(self, buf):
        if buf is None or not buf.ptr:
            return
        self._live.pop(buf.ptr, None)
        self.args.free(self.args.alloc_ctx, buf.ptr)

    def release(self):
        for p in list(self._live):
            self.args.free(self.args.alloc_ctx, p)
        self._live.clear()
        for p in list(self._host_live):
            self._ctx.host_free(self._ctx.host_ctx, p)
        self._host_live.clear()

    def cells(self, n):
        return Cells(n)

    def set_output(self, index, buf, shape, allocated):
        """wrapper.cpp's epilogue for output `index`: its dims; a block of an allocating extern
        goes into the caller's buffer (then freed) or to the caller as it is."""
        a = self.args
        for d, v in enumerate(shape):
            a.output_shapes[index][d] = int(v)
        if buf is None:
            raise Error(f"output '{self._w.module.OUTPUTS[index][0]}' was never computed")
        if allocated and a.outputs[index]:
            n = _nbytes(buf.dtype, shape)
            self._check_capacity(index, n)
            if n:
                self._driver.check(self._driver.dtod_async(a.outputs[index], buf.ptr, n,
                                                           self._ctx.stream),
                                   f"copying output '{self._w.module.OUTPUTS[index][0]}'")
            self.free(buf)
        elif not a.outputs[index]:
            a.outputs[index] = buf.ptr
            self._live.pop(buf.ptr, None)

    # -- the CUDA context
    def cuda_ctx(self, model):
        if self._ctx is None:
            raise Error(f"model '{model}' is compiled for cuda and needs a CUDA device context")
        return self.args.device_ctx

    def cuda_failed(self, cu):
        """A launcher or CUDA extern failed: its message (ctx->error) becomes the run's."""
        msg = ctypes.string_at(self._ctx.error).decode(errors="replace") if self._ctx.error else ""
        raise Error(msg or "a CUDA launcher or extern failed without a message")

    def extern_failed(self, who, function):
        self._functions.extern_failed(who, function)

    # -- host externs: their operands in the ctx's host memory
    def host_cells(self, cu, n):
        return HostCells(n)

    def synchronize(self, cu, what):
        self._driver.check(self._driver.sync(self._ctx.stream), what)

    def host_buffer(self, cu, cells, i, nbytes, what):
        cells[i] = 0
        if nbytes <= 0:
            return
        p = self._ctx.host_alloc(self._ctx.host_ctx, nbytes)
        if not p:
            raise Error(f"{what}: out of host memory ({nbytes} bytes)")
        cells[i] = p

    def to_host(self, cu, cells, i, buf, nbytes, what):
        self.host_buffer(cu, cells, i, nbytes, what)
        if nbytes > 0:
            self._driver.check(self._driver.dtoh(cells[i], buf.ptr, nbytes), what)

    def to_device(self, buf, host, nbytes, what):
        if nbytes > 0:
            self._driver.check(self._driver.htod(buf.ptr, host, nbytes), what)

    def host_tracker(self, cu):
        return HostTracker(self._ctx)

    # -- host fallbacks as lines of their own (HostAllocate, HostFree, CopyToHost; the blocks an
    #    allocating host extern allocated): host blocks are addresses (0: none), which release()
    #    frees when a run fails
    def host_alloc(self, cu, nbytes, what):
        if nbytes <= 0:
            return 0
        p = self._ctx.host_alloc(self._ctx.host_ctx, nbytes)
        if not p:
            raise Error(f"{what}: out of host memory ({nbytes} bytes)")
        self._host_live.add(p)
        return p

    def host_adopt(self, p):
        if p:
            self._host_live.add(int(p))
        return int(p or 0)

    def host_free(self, cu, p):
        if p:
            self._host_live.discard(p)
            self._ctx.host_free(self._ctx.host_ctx, p)

    def copy_to_host(self, host, buf, nbytes, what):
        if nbytes > 0:
            self._driver.check(self._driver.dtoh(host, buf.ptr, nbytes), what)

    def free_host(self, cu, cells):
        for p in cells:
            if p:
                self._ctx.host_free(self._ctx.host_ctx, p)

    # -- the debug printer: device values copied to the host after a synchronization
    def host_copy(self, buf):
        out = as_storage(np.empty(buf.shape, storage_dtype(buf.dtype)), buf.dtype)
        if out.nbytes and buf.ptr:
            self.synchronize(None, "debug printer")
            self._driver.check(self._driver.dtoh(out.ctypes.data, buf.ptr, out.nbytes),
                               "debug printer")
        return out

    def _debug(self, when, launch, values):
        self._hook(when, launch, [(n, self.host_copy(v) if isinstance(v, DeviceBuffer) else v)
                                  for n, v in values])


class DebugPrinter:
    """The debug hook of the environment's COIL_DEBUG_PRINTER / COIL_DEBUG_KERNELS."""

    MODES = {"0": None, "off": None, "": None, "1": "save", "save": "save", "2": "print",
             "print": "print", "3": "names", "names": "names"}

    def __init__(self, mode, kernels, directory, launches, out=sys.stderr):
        """`launches`: the package's launches, as metadata.json "launches" entries ({name,
        function}) or plain names. A name in `kernels` selects the launch of that name, or every
        launch of that function, as the runtime's printer does."""
        if mode not in self.MODES:
            raise Error(f"COIL_DEBUG_PRINTER must be 0/off, 1/save, 2/print or 3/names, "
                        f"got '{mode}'")
        self.mode = self.MODES[mode]
        pairs = [(l, l) if isinstance(l, str) else (l["name"], l.get("function", l["name"]))
                 for l in launches]
        given = [k.strip().lower() for k in kernels.split(",") if k.strip()]
        self.filter = set()  # the selected launches, lowercase; empty: all
        unknown = []
        for k in given:
            hit = {n.lower() for n, fn in pairs if k in (n.lower(), fn.lower())}
            if not hit:
                unknown.append(k)
            self.filter |= hit
        if unknown:
            functions = sorted({fn for n, fn in pairs if fn != n})
            raise Error(f"COIL_DEBUG_KERNELS names unknown launches {unknown}; valid names: "
                        f"{', '.join(n for n, _ in pairs) or '(none)'}"
                        + (f" (or an extern function for all its launches: "
                           f"{', '.join(functions)})" if functions else ""))
        self.dir = directory
        self.out = out
        self.device = "cpu"  # where the package's buffers live (values come as host copies)

    @classmethod
    def from_environment(cls, launches):
        """The printer the environment asks for, or None when it is off (as in the runtime,
        COIL_DEBUG_KERNELS is then not looked at)."""
        mode = os.environ.get("COIL_DEBUG_PRINTER", "0").strip().lower()
        if mode in cls.MODES and cls.MODES[mode] is None:
            return None
        return cls(mode, os.environ.get("COIL_DEBUG_KERNELS", ""),
                   os.environ.get("COIL_DEBUG_DIR", "coil-debug"), launches)

    def __call__(self, when, launch, values):
        if self.filter and launch.lower() not in self.filter:
            return
        if self.mode == "names":
            print(f"[{when}_launch: {launch}]", file=self.out, flush=True)
            return
        for name, v in values:
            if self.mode == "save":
                if isinstance(v, np.ndarray):
                    os.makedirs(self.dir, exist_ok=True)
                    np.save(os.path.join(self.dir, f"{when}_{launch}_{name}.npy"), v)
                continue
            print(f"[{when}_launch - {launch} - {name}] {describe(v, self.device)}", file=self.out,
                  flush=True)


def describe(v, device="cpu"):
    """One line of statistics of a debug value (`device`: where the buffer lives), as the C++
    printer gives them: strides in elements, bf16 as its values (not its bits), NaN and Inf
    counts of floats."""
    if not isinstance(v, np.ndarray):
        return f"{type(v).__name__} {v!r}"
    if isinstance(v, BFloat16Bits):
        name, a = "bfloat16", v.as_float32()
    else:
        name, a = str(v.dtype), np.asarray(v)
    strides = [s // v.itemsize for s in v.strides] if v.itemsize else list(v.strides)
    s = f"dtype {name}, shape {list(v.shape)}, strides {strides}, device {device}, numel {v.size}"
    if v.size:  # over the values that are not NaN, as the C++ printer
        f = a.astype(np.float64)
        num = f[~np.isnan(f)]
        nan = float("nan")
        s += (f", min {float(num.min()) if num.size else nan!r}, "
              f"max {float(num.max()) if num.size else nan!r}, "
              f"mean {float(num.mean()) if num.size else nan!r}, "
              f"nan {int(np.isnan(f).sum())}, inf {int(np.isinf(f).sum())}")
    if v.size <= 64:
        s += f", values {a.reshape(-1).tolist()}"
    return s


def _check_dim(text, value, symbols, where):
    expected = eval(text, {"__builtins__": {}, "min": min, "max": max}, dict(symbols))  # noqa
    if expected != value:
        raise Error(f"{where} must be {text} = {expected}, got {value}")


_INTEGRITY = ',\n  "integrity": '
_MARKER = b"coil-metadata-sha256:"


def check_integrity(path):
    """The runtime's integrity checks (src/wrapper/Package.h) in Python, before anything of the
    package is used: metadata.json's body against its digest, every file of the integrity
    record against its digest, and model.so naming this metadata. Returns the body's text;
    raises coil.Error naming the file."""
    pkg = f"package '{path}'"
    try:
        text = open(os.path.join(path, "metadata.json"), encoding="utf-8").read()
    except (OSError, UnicodeDecodeError) as e:
        raise Error(f"{pkg}: cannot read metadata.json: {e}") from None
    at = text.rfind(_INTEGRITY)
    if at < 0 or not text.endswith("\n}\n"):
        raise Error(f"{pkg}: metadata.json has no integrity record (or was truncated): the package "
                    "was written by an older coil, or metadata.json was edited; recompile the model")
    body = text[:at] + "\n}\n"
    try:
        record = json.loads("{" + text[at + 1:])
        (key, rec), = record.items()
        digest, files = rec["metadata"], rec["files"]
        assert key == "integrity" and rec["algorithm"] == "sha256" and isinstance(files, dict)
    except (ValueError, KeyError, TypeError, AssertionError):
        raise Error(f"{pkg}: metadata.json's integrity record is malformed") from None
    got = hashlib.sha256(body.encode("utf-8")).hexdigest()
    if got != digest:
        raise Error(f"{pkg}: metadata.json was modified after it was written: the SHA-256 of its "
                    f"contents is {got}, its integrity record says {digest}")
    library = json.loads(body).get("library", "model.so")
    for name, want in files.items():
        full = os.path.join(path, name)
        if os.path.isabs(name) or ".." in name.split("/"):
            raise Error(f"{pkg}: metadata.json's integrity record names '{name}', outside the package")
        try:
            data = open(full, "rb").read()
        except OSError as e:
            raise Error(f"{pkg}: cannot open {name} (listed in metadata.json's integrity record): "
                        f"{e.strerror}") from None
        got = hashlib.sha256(data).hexdigest()
        if got != want:
            raise Error(f"{pkg}: {name} does not match metadata.json (modified, truncated or from "
                        f"another package): its SHA-256 is {got}, the integrity record says {want}")
        if name == library:
            i = data.rfind(_MARKER)
            named = data[i + len(_MARKER):i + len(_MARKER) + 64].decode("ascii", "replace") if i >= 0 else ""
            if named != digest:
                raise Error(f"{pkg}: {name} was not built for this metadata.json")
    return body


class PythonWrapper:
    """A package run through src/wrapper.py."""

    def __init__(self, path, debug="environment"):
        self.path = os.fsdecode(os.fspath(path))
        if "\0" in self.path:
            raise Error(f"package path {self.path!r} contains a NUL character")
        # wrapper.py and model.so are code: nothing runs before the package is checked.
        self.meta = json.loads(check_integrity(self.path))
        self.device = self.meta.get("device", "cpu")
        if self.device not in ("cpu", "cuda"):
            raise Error(f"package '{self.path}' is a {self.device} package; the Python wrapper "
                        "runs CPU and CUDA packages")
        spec = importlib.util.spec_from_file_location(
            f"coil_wrapper_{abs(hash(os.path.abspath(self.path)))}",
            os.path.join(self.path, "src", "wrapper.py"))
        self.module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.module)
        if getattr(self.module, "WRAPPER_ABI", None) != WRAPPER_ABI:
            raise Error(f"{self.path}/src/wrapper.py has wrapper ABI "
                        f"{getattr(self.module, 'WRAPPER_ABI', None)}, coil.pywrapper "
                        f"{WRAPPER_ABI}")
        # Extern functions live in libcoil_runtime; model.so resolves them from the global
        # scope, so the runtime is made global before model.so is loaded.
        self._runtime = ctypes.CDLL(runtime_path(), mode=ctypes.RTLD_GLOBAL)
        weights = os.path.join(self.path, self.meta.get("weights", "weights.bin"))
        blob = (np.fromfile(weights, np.uint8) if self.meta.get("weights_bytes", 0)
                else np.zeros(0, np.uint8))
        if blob.nbytes != self.meta.get("weights_bytes", 0):
            raise Error(f"{weights} has {blob.nbytes} bytes, metadata.json says "
                        f"{self.meta.get('weights_bytes')}")
        cuda_lib = None
        if self.device == "cuda":
            self._host, cuda_lib, self._driver = self._open_cuda(blob)
        self._model = self._load_model()
        self._functions = self._make_functions(cuda_lib)
        self.constants = []
        for c in self.meta["constants"] if self.device == "cpu" else []:
            shape = tuple(int(d) for d in c["shape"])
            n = _nbytes(c["dtype"], shape)
            raw = aligned_bytes(n)  # 64-aligned copy, as the runtime's mapping is
            raw[:] = blob[c["offset"]:c["offset"] + n]
            self.constants.append(as_storage(raw, c["dtype"]).reshape(shape))
        # The launch names of the DebugPrint lines (unique: `<function>_<k>` where several
        # launches call one kernel or extern).
        self.launches = self.meta.get("launches", [])
        self.debug = (DebugPrinter.from_environment(self.launches) if debug == "environment"
                      else debug)
        if isinstance(self.debug, DebugPrinter):
            self.debug.device = self.device

    def _open_cuda(self, weights):
        """libcoil_cuda's model instance (fatbin, device weights, run slots), loaded RTLD_GLOBAL
        before model.so, which resolves its coil_cuda_* externs from it; returns it, the library
        and the driver calls of host externs."""
        from ._coil import CudaWrapperHost

        library = (os.environ.get("COIL_CUDA_LIBRARY") or
                   os.path.join(os.path.dirname(runtime_path()), "libcoil_cuda.so"))
        c = self.meta["cuda"]
        with open(os.path.join(self.path, c["fatbin"]), "rb") as f:
            fatbin = f.read()
        host = CudaWrapperHost(library, self.path, fatbin, c["fatbin"], c["functions"], c["archs"],
                               weights, [int(k["offset"]) for k in self.meta["constants"]],
                               int(c.get("workspace_bytes", 0)))
        return host, ctypes.CDLL(library, mode=ctypes.RTLD_GLOBAL), _Driver()

    def _load_model(self):
        return ctypes.CDLL(os.path.join(self.path, self.meta.get("library", "model.so")))

    def _make_functions(self, cuda_lib):
        return _Functions(self._model, self._runtime, self.module.LAUNCHERS, self.module.EXTERNS,
                          cuda_lib)

    @property
    def inputs(self):
        return self.module.INPUTS

    @property
    def outputs(self):
        return self.module.OUTPUTS

    def _check(self, arrays):
        if len(arrays) != len(self.module.INPUTS):
            raise Error(f"the model takes {len(self.module.INPUTS)} inputs, got {len(arrays)}")
        symbols = {}
        for b in self.meta.get("bindings", []):
            symbols[b["symbol"]] = int(arrays[b["input"]].shape[b["dim"]])
        for s in self.meta.get("symbols", []):
            if s["name"] in symbols and not s["min"] <= symbols[s["name"]] <= s["max"]:
                raise Error(f"symbol {s['name']} = {symbols[s['name']]} is outside its range "
                            f"[{s['min']}, {s['max']}]")
        for i, (a, (name, dtype, shape)) in enumerate(zip(arrays, self.module.INPUTS)):
            if a.dtype != storage_dtype(dtype):
                raise Error(f"input {i} '{name}' must be {dtype}, got {a.dtype}")
            if a.ndim != len(shape):
                raise Error(f"input {i} '{name}' must have rank {len(shape)}, got {a.ndim}")
            for d, text in enumerate(shape):
                _check_dim(text, a.shape[d], symbols, f"input {i} '{name}' dim {d}")

    def run(self, *args):
        """Runs src/wrapper.py on numpy arrays (positional, a list, or a dict by name)."""
        if len(args) == 1 and isinstance(args[0], dict):
            names = [n for n, _, _ in self.module.INPUTS]
            missing = [n for n in names if n not in args[0]]
            if missing:
                raise Error(f"inputs by name: missing {missing}; the model takes {names}")
            args = [args[0][n] for n in names]
        elif len(args) == 1 and isinstance(args[0], (list, tuple)) and len(self.inputs) != 1:
            args = list(args[0])
        arrays = [as_host_array(x, t[1]) for x, t in zip(args, self.module.INPUTS)]
        self._check(arrays)
        arrays = [a.view(BFloat16Bits) if t[1] == "bf16" else a
                  for a, t in zip(arrays, self.module.INPUTS)]
        if self.device == "cuda":
            outs = self._run_cuda(arrays)
        else:
            rt = Runtime(self._functions, self.debug)
            outs = self.module.run(rt, arrays, self.constants)
        return [np.asarray(o).view(numpy_dtype(t[1])) if t[1] == "bf16" else o
                for o, t in zip(outs, self.module.OUTPUTS)]


    def _run_cuda(self, arrays):
        """wrapper.py's run() as the model's run function of one libcoil_cuda run on host
        arrays; an exception raised in it is raised again here."""
        failure = []

        def run(address):
            rt = None
            try:
                rt = CudaRuntime(self, address, self.debug)
                self.module.run(rt, rt.inputs(self.module.INPUTS),
                                rt.constants(self.meta["constants"]))
                rt.release()  # nothing is left on success; a wrapper bug otherwise
                return 0
            except BaseException as e:  # noqa: BLE001 -- nothing may escape the callback
                failure.append(e)
                if rt is not None:
                    rt.release()
                    a = rt.args
                    if a.error and a.error_size:
                        msg = str(e).encode(errors="replace")[:a.error_size - 1]
                        ctypes.memmove(a.error, msg + b"\0", len(msg) + 1)
                return 1

        def arena(shapes):
            return int(self.module.arena_bytes(shapes))

        outs_t = self.module.OUTPUTS
        try:
            outs = self._host.run(run, arena, arrays, [_CODES[t[1]] for t in self.module.INPUTS],
                                  [len(t[2]) for t in outs_t],
                                  [storage_dtype(t[1]).itemsize for t in outs_t],
                                  [t[0] for t in outs_t], [_CODES[t[1]] for t in outs_t])
        except Error:
            if failure:
                raise failure[0] from None
            raise
        return [np.frombuffer(data, storage_dtype(t[1])).reshape(shape).copy()
                for (data, shape), t in zip(outs, outs_t)]


def load(path, debug="environment"):
    """Loads package `path` to run through its src/wrapper.py."""
    return PythonWrapper(path, debug)
