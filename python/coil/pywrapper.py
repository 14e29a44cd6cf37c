"""coil.pywrapper: runs a package through its Python wrapper, src/wrapper.py.

wrapper.py is the Python twin of wrapper.cpp, printed from the same Wrapper IR: it executes the
same lines in the same order, with numpy arrays as buffers, and calls model.so's kernel
launchers and libcoil_runtime's extern functions through ctypes. This module gives it what it
needs (`Runtime`): the arena, buffer views, the allocator callback of allocating externs, the
ctypes functions and the debug hook.

    import coil.pywrapper
    w = coil.pywrapper.load("mlp.pkg")
    (probs,) = w.run(x)            # the same outputs as coil.load("mlp.pkg").run(x)

CPU packages only (a CUDA package's launchers take device pointers). Inputs are checked like
the runtime does (count, dtype, rank, each dim against its symbolic size and the symbol ranges).

Debug printing (DebugPrint lines) follows COIL_DEBUG_PRINTER (0/off, 1/save, 2/print,
3/names), COIL_DEBUG_KERNELS (comma list of launch names as metadata.json "launches" names them,
an extern function's name selecting all its launches; empty: all) and COIL_DEBUG_DIR, read
when the package is loaded; `load(pkg, debug=callable)` installs a hook of your own, called as
hook(when, launch, [(name, value), ...]). Without a hook (debug=None, COIL_DEBUG_PRINTER unset
or 0) a DebugPrint line costs one attribute test.
"""
import ctypes
import importlib.util
import json
import os
import sys

import numpy as np

from . import Error, as_host_array, numpy_dtype, runtime_path

WRAPPER_ABI = 1
ALIGN = 64

_STORAGE = {
    "f64": np.float64, "f32": np.float32, "f16": np.float16, "bf16": np.uint16,
    "i64": np.int64, "i32": np.int32, "i16": np.int16, "i8": np.int8, "u64": np.uint64,
    "u32": np.uint32, "u16": np.uint16, "u8": np.uint8, "bool": np.bool_,
}
ALLOC_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
_ARGTYPES = {"P": [ctypes.c_void_p], "I": [ctypes.c_int64], "D": [ctypes.c_double],
             "S": [ctypes.c_void_p], "A": [ALLOC_FN, ctypes.c_void_p]}


def storage_dtype(name):
    """The numpy dtype of a coil dtype's storage (bf16: its uint16 bits)."""
    try:
        return np.dtype(_STORAGE[name])
    except KeyError:
        raise Error(f"unknown coil dtype '{name}'") from None


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

    def __init__(self, cfn, sig, name, last_error=None):
        self.name = name
        self._fn = cfn
        # Extern kernels return an int32 status (0: success) and leave a message for
        # coil_cpu_last_error(); launchers return nothing.
        self._last_error = last_error
        cfn.restype = ctypes.c_int32 if last_error is not None else None
        cfn.argtypes = [t for c in sig for t in _ARGTYPES[c]]
        self._kinds = [k for c in sig for k in (("A", "P") if c == "A" else (c,))]

    def __call__(self, *args):
        if len(args) != len(self._kinds):
            raise Error(f"{self.name} takes {len(self._kinds)} arguments, got {len(args)}")
        conv = []
        for a, k in zip(args, self._kinds):
            if isinstance(a, np.ndarray):
                conv.append(a.ctypes.data)
            elif k == "I":
                conv.append(int(a))
            elif k == "D":
                conv.append(float(a))
            else:
                conv.append(a)
        status = self._fn(*conv)
        if self._last_error is not None and status != 0:
            msg = self._last_error()
            raise Error(f"extern {self.name}: " + (msg.decode() if msg else f"failed with status {status}"))


class _Functions:
    def __init__(self, model_lib, runtime_lib, launchers, externs):
        last_error = runtime_lib.coil_cpu_last_error
        last_error.restype = ctypes.c_char_p
        last_error.argtypes = []
        for table, lib, where, check in ((launchers, model_lib, "model.so", None),
                                         (externs, runtime_lib, "libcoil_runtime", last_error)):
            for name, sig in table.items():
                try:
                    fn = getattr(lib, name)
                except AttributeError:
                    raise Error(f"{where} has no function '{name}' (wrapper.py calls it)") from None
                setattr(self, name, _Function(fn, sig, name, check))


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
        return arena[offset:offset + n].view(storage_dtype(dtype)).reshape(shape)

    def empty(self, dtype, shape):
        return aligned_bytes(_nbytes(dtype, shape)).view(storage_dtype(dtype)).reshape(shape)

    output = empty

    def reinterpret(self, base, offset, dtype, shape):
        raw = base.reshape(-1).view(np.uint8)
        n = _nbytes(dtype, shape)
        if offset < 0 or offset + n > raw.nbytes:
            raise Error(f"view of {n} bytes at offset {offset} exceeds its base "
                        f"({raw.nbytes} bytes)")
        return raw[offset:offset + n].view(storage_dtype(dtype)).reshape(shape)

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
        return block[:n].view(storage_dtype(dtype)).reshape(shape)

    def result(self, buf, dtype, shape):
        if buf is None:
            raise Error("an output was never computed")
        return buf.reshape(shape)


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
            print(f"[{when}_launch - {launch} - {name}] {describe(v)}", file=self.out, flush=True)


def describe(v):
    """One line of statistics of a debug value."""
    if not isinstance(v, np.ndarray):
        return f"{type(v).__name__} {v!r}"
    a = v.astype(np.float64)
    s = (f"dtype {v.dtype}, shape {list(v.shape)}, strides {list(v.strides)}, device cpu, "
         f"numel {v.size}")
    if v.size:
        s += (f", min {a.min()!r}, max {a.max()!r}, mean {a.mean()!r}, "
              f"nan {int(np.isnan(a).sum())}, inf {int(np.isinf(a).sum())}")
    if v.size <= 64:
        s += f", values {v.reshape(-1).tolist()}"
    return s


def _check_dim(text, value, symbols, where):
    expected = eval(text, {"__builtins__": {}, "min": min, "max": max}, dict(symbols))  # noqa
    if expected != value:
        raise Error(f"{where} must be {text} = {expected}, got {value}")


class PythonWrapper:
    """A package run through src/wrapper.py."""

    def __init__(self, path, debug="environment"):
        self.path = str(path)
        with open(os.path.join(self.path, "metadata.json")) as f:
            self.meta = json.load(f)
        if self.meta.get("device", "cpu") != "cpu":
            raise Error(f"package '{self.path}' is a {self.meta['device']} package; the Python "
                        "wrapper runs CPU packages only")
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
        self._model = ctypes.CDLL(os.path.join(self.path, self.meta.get("library", "model.so")))
        self._functions = _Functions(self._model, self._runtime, self.module.LAUNCHERS,
                                     self.module.EXTERNS)
        weights = os.path.join(self.path, self.meta.get("weights", "weights.bin"))
        blob = (np.fromfile(weights, np.uint8) if self.meta.get("weights_bytes", 0)
                else np.zeros(0, np.uint8))
        if blob.nbytes != self.meta.get("weights_bytes", 0):
            raise Error(f"{weights} has {blob.nbytes} bytes, metadata.json says "
                        f"{self.meta.get('weights_bytes')}")
        self.constants = []
        for c in self.meta["constants"]:
            shape = tuple(int(d) for d in c["shape"])
            n = _nbytes(c["dtype"], shape)
            raw = aligned_bytes(n)  # 64-aligned copy, as the runtime's mapping is
            raw[:] = blob[c["offset"]:c["offset"] + n]
            self.constants.append(raw.view(storage_dtype(c["dtype"])).reshape(shape))
        # The launch names of the DebugPrint lines (unique: `<function>_<k>` where several
        # launches call one kernel or extern).
        self.launches = self.meta.get("launches", [])
        self.debug = (DebugPrinter.from_environment(self.launches) if debug == "environment"
                      else debug)

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
        rt = Runtime(self._functions, self.debug)
        outs = self.module.run(rt, arrays, self.constants)
        return [o.view(numpy_dtype(t[1])) if t[1] == "bf16" else o
                for o, t in zip(outs, self.module.OUTPUTS)]


def load(path, debug="environment"):
    """Loads package `path` to run through its src/wrapper.py."""
    return PythonWrapper(path, debug)
