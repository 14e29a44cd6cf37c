"""ctypes binding of libcoil_runtime (include/coil/coil.h), for the benchmark drivers.

Only what the drivers need: load a package, read its signature, run it on host numpy arrays
(coil_model_run) or on device pointers with a caller stream (coil_model_run_device). Every call's
status is checked; a failure raises CoilError with coil_last_error()'s message.

Host runs take numpy arrays; bf16 arrays are either ml_dtypes.bfloat16 or raw uint16 bits (the
caller says which dtype through `dtypes`). Device runs take raw pointers (torch's data_ptr()) and
are prepared once (`DeviceCall`), so that a timed iteration is a single foreign call.
"""
import ctypes

import numpy as np

COIL_MAX_RANK = 16

# coil_dtype values (part of the ABI) and their names as coil_dtype_name / numpy / torch spell them.
DTYPES = {
    "float64": 0,
    "float32": 1,
    "float16": 2,
    "bfloat16": 3,
    "int64": 4,
    "int32": 5,
    "int16": 6,
    "int8": 7,
    "uint64": 8,
    "uint32": 9,
    "uint16": 10,
    "uint8": 11,
    "bool": 12,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
ITEMSIZE = {0: 8, 1: 4, 2: 2, 3: 2, 4: 8, 5: 4, 6: 2, 7: 1, 8: 8, 9: 4, 10: 2, 11: 1, 12: 1}

STATUS = {0: "ok", 1: "invalid argument", 2: "package error", 3: "runtime error", 4: "internal error"}
DEVICE_CPU, DEVICE_CUDA = 0, 1


class CoilTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("rank", ctypes.c_int64),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
    ]


class CoilOutput(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("capacity", ctypes.c_int64),
        ("dtype", ctypes.c_int),
        ("rank", ctypes.c_int64),
        ("shape", ctypes.c_int64 * COIL_MAX_RANK),
        ("owned", ctypes.c_int32),
    ]


class CoilTensorInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int),
        ("rank", ctypes.c_int64),
        ("dims", ctypes.POINTER(ctypes.c_char_p)),
    ]


class CoilError(RuntimeError):
    pass


def dtype_code(name):
    """coil_dtype of a dtype given by name ('float32', 'bfloat16', torch.float16, np.int64...)."""
    s = str(name)
    s = s[len("torch."):] if s.startswith("torch.") else s
    s = {"half": "float16", "float": "float32", "double": "float64", "long": "int64", "int": "int32",
         "bool_": "bool"}.get(s, s)
    if s not in DTYPES:
        raise CoilError("dtype %r has no coil_dtype" % (name,))
    return DTYPES[s]


class Runtime:
    """libcoil_runtime.so, loaded once."""

    def __init__(self, path):
        self.path = path
        lib = ctypes.CDLL(path)
        self.lib = lib
        P = ctypes.c_void_p
        lib.coil_last_error.restype = ctypes.c_char_p
        lib.coil_last_error.argtypes = []
        lib.coil_dtype_name.restype = ctypes.c_char_p
        lib.coil_dtype_name.argtypes = [ctypes.c_int]
        lib.coil_runtime_model_abi_version.restype = ctypes.c_uint32
        lib.coil_runtime_model_abi_version.argtypes = []
        lib.coil_model_load.restype = ctypes.c_int
        lib.coil_model_load.argtypes = [ctypes.c_char_p, ctypes.POINTER(P)]
        lib.coil_model_free.restype = None
        lib.coil_model_free.argtypes = [P]
        for f in ("coil_model_num_inputs", "coil_model_num_outputs", "coil_model_num_symbols"):
            getattr(lib, f).restype = ctypes.c_int64
            getattr(lib, f).argtypes = [P]
        for f in ("coil_model_input_info", "coil_model_output_info"):
            getattr(lib, f).restype = ctypes.c_int
            getattr(lib, f).argtypes = [P, ctypes.c_int64, ctypes.POINTER(CoilTensorInfo)]
        lib.coil_model_run.restype = ctypes.c_int
        lib.coil_model_run.argtypes = [P, ctypes.POINTER(CoilTensor), ctypes.c_int64,
                                       ctypes.POINTER(CoilOutput), ctypes.c_int64]
        lib.coil_model_device.restype = ctypes.c_int
        lib.coil_model_device.argtypes = [P]
        lib.coil_model_run_device.restype = ctypes.c_int
        lib.coil_model_run_device.argtypes = [P, ctypes.POINTER(CoilTensor), ctypes.c_int64,
                                              ctypes.POINTER(CoilOutput), ctypes.c_int64, P]
        lib.coil_output_release.restype = None
        lib.coil_output_release.argtypes = [ctypes.POINTER(CoilOutput)]

    def check(self, status, what):
        if status != 0:
            msg = (self.lib.coil_last_error() or b"").decode("utf-8", "replace")
            raise CoilError("%s failed (%s): %s" % (what, STATUS.get(status, "status %d" % status), msg))

    def abi_version(self):
        return int(self.lib.coil_runtime_model_abi_version())

    def load(self, pkg):
        return Model(self, pkg)


class Model:
    """A loaded package. Free it with close() (or use it as a context manager)."""

    def __init__(self, rt, pkg):
        self.rt = rt
        self.pkg = pkg
        h = ctypes.c_void_p()
        rt.check(rt.lib.coil_model_load(pkg.encode(), ctypes.byref(h)), "coil_model_load(%s)" % pkg)
        self.handle = h
        self.inputs = [self._info(i, True) for i in range(rt.lib.coil_model_num_inputs(h))]
        self.outputs = [self._info(i, False) for i in range(rt.lib.coil_model_num_outputs(h))]
        self.device = "cuda" if rt.lib.coil_model_device(h) == DEVICE_CUDA else "cpu"

    def _info(self, i, is_input):
        info = CoilTensorInfo()
        f = self.rt.lib.coil_model_input_info if is_input else self.rt.lib.coil_model_output_info
        self.rt.check(f(self.handle, i, ctypes.byref(info)), "coil_model_%s_info(%d)" % ("input" if is_input else "output", i))
        dims = [info.dims[d].decode() for d in range(info.rank)]
        return {"name": info.name.decode(), "dtype": DTYPE_NAMES.get(info.dtype, str(info.dtype)),
                "rank": int(info.rank), "dims": dims}

    def close(self):
        if self.handle:
            self.rt.lib.coil_model_free(self.handle)
            self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def input_order(self, names):
        """Indices into `names` in the model's input order; raises if a name is missing."""
        order = []
        for info in self.inputs:
            if info["name"] not in names:
                raise CoilError("package input %r is not among the given inputs %s" % (info["name"], list(names)))
            order.append(list(names).index(info["name"]))
        return order

    def run_host(self, arrays, dtypes=None, out_arrays=None):
        """Runs on host arrays in the model's input order. dtypes: per input a dtype name (needed
        for bf16 given as uint16 bits); default the arrays' dtypes. out_arrays: caller buffers
        (contiguous numpy arrays) or None to let the runtime allocate them; returns, per output,
        (numpy array of raw elements, coil dtype name, shape)."""
        if len(arrays) != len(self.inputs):
            raise CoilError("%d inputs given, the package takes %d" % (len(arrays), len(self.inputs)))
        keep = []
        ins = (CoilTensor * max(1, len(arrays)))()
        for i, a in enumerate(arrays):
            a = np.ascontiguousarray(a)
            shape = (ctypes.c_int64 * max(1, a.ndim))(*a.shape)
            keep += [a, shape]
            ins[i].data = a.ctypes.data
            ins[i].dtype = dtype_code(dtypes[i] if dtypes else a.dtype.name)
            ins[i].rank = a.ndim
            ins[i].shape = shape
        n_out = len(self.outputs)
        outs = (CoilOutput * max(1, n_out))()
        for i in range(n_out):
            if out_arrays is not None:
                b = out_arrays[i]
                if not b.flags["C_CONTIGUOUS"]:
                    raise CoilError("output buffer %d is not contiguous" % i)
                outs[i].data = b.ctypes.data
                outs[i].capacity = b.nbytes
        self.rt.check(self.rt.lib.coil_model_run(self.handle, ins, len(arrays), outs, n_out), "coil_model_run")
        result = []
        for i in range(n_out):
            o = outs[i]
            shape = tuple(int(o.shape[d]) for d in range(o.rank))
            name = DTYPE_NAMES.get(o.dtype, str(o.dtype))
            n = int(np.prod(shape, dtype=np.int64))
            nbytes = n * ITEMSIZE[o.dtype]
            if out_arrays is not None:
                raw = out_arrays[i]
            else:
                raw = np.empty(nbytes, np.uint8)
                if nbytes:
                    ctypes.memmove(raw.ctypes.data, o.data, nbytes)
                self.rt.lib.coil_output_release(ctypes.byref(o))
            result.append((raw, name, shape))
        return result

    def device_call(self, inputs, outputs):
        """Prepares a device run. inputs: per model input (model order) (ptr, dtype name, shape);
        outputs: per output (ptr, capacity bytes). Returns a DeviceCall."""
        return DeviceCall(self, inputs, outputs)


class DeviceCall:
    """One prepared coil_model_run_device call: the argument arrays are built once; __call__
    enqueues the model on `stream` (an integer CUstream handle, 0 for the runtime's own)."""

    def __init__(self, model, inputs, outputs):
        if len(inputs) != len(model.inputs):
            raise CoilError("%d inputs given, the package takes %d" % (len(inputs), len(model.inputs)))
        if len(outputs) != len(model.outputs):
            raise CoilError("%d outputs given, the package has %d" % (len(outputs), len(model.outputs)))
        self.model = model
        self.keep = []
        self.ins = (CoilTensor * max(1, len(inputs)))()
        for i, (ptr, dtype, shape) in enumerate(inputs):
            s = (ctypes.c_int64 * max(1, len(shape)))(*shape)
            self.keep.append(s)
            self.ins[i].data = ptr
            self.ins[i].dtype = dtype_code(dtype)
            self.ins[i].rank = len(shape)
            self.ins[i].shape = s
        self.outs = (CoilOutput * max(1, len(outputs)))()
        self.out_spec = list(outputs)
        self.n_in, self.n_out = len(inputs), len(outputs)
        self.fn = model.rt.lib.coil_model_run_device
        self.handle = model.handle

    def __call__(self, stream=0):
        for i, (ptr, cap) in enumerate(self.out_spec):
            self.outs[i].data = ptr
            self.outs[i].capacity = cap
            self.outs[i].owned = 0
        st = self.fn(self.handle, self.ins, self.n_in, self.outs, self.n_out, ctypes.c_void_p(stream or None))
        if st != 0:
            self.model.rt.check(st, "coil_model_run_device")

    def output_shapes(self):
        return [tuple(int(o.shape[d]) for d in range(o.rank)) for o in self.outs[: self.n_out]]
