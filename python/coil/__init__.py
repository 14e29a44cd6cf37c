"""coil: load a compiled coil package and run it from Python.

    import coil, numpy as np
    m = coil.load("mlp.pkg")
    m.inputs            # [TensorInfo(name='x', dtype='f32', shape=('batch', '16'))]
    (probs,) = m.run(np.random.rand(4, 16).astype(np.float32))
    (probs,) = m.run({"x": x})

Arrays in: numpy arrays (any dtype coil has: float64/32/16, bfloat16 as uint16 bits or
ml_dtypes.bfloat16, int64..int8, uint64..uint8, bool) or any DLPack tensor (__dlpack__).
Host tensors run through coil_model_run; CUDA tensors through coil_model_run_device on the
tensor's stream (a CUDA package is needed). Arrays out: numpy arrays (bf16 as ml_dtypes.bfloat16
when installed, else uint16 bits) for host runs, DLPack tensors (torch.from_dlpack,
cupy.from_dlpack) for device runs. Errors raise coil.Error with the runtime's message.

coil.pywrapper runs the same package through its Python wrapper (src/wrapper.py).
"""
import os
from collections import namedtuple

import numpy as np

from ._coil import Error, NativeModel, model_abi_version, runtime_path  # noqa: F401

try:  # optional: a real numpy bfloat16
    import ml_dtypes as _ml_dtypes

    _BFLOAT16 = np.dtype(_ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    _BFLOAT16 = None

__all__ = ["Error", "Model", "TensorInfo", "load", "numpy_dtype"]

TensorInfo = namedtuple("TensorInfo", ["name", "dtype", "shape"])
TensorInfo.__doc__ = "An input or output: its name, coil dtype name and symbolic shape (text)."

_NUMPY = {
    "f64": np.float64, "f32": np.float32, "f16": np.float16, "i64": np.int64, "i32": np.int32,
    "i16": np.int16, "i8": np.int8, "u64": np.uint64, "u32": np.uint32, "u16": np.uint16,
    "u8": np.uint8, "bool": np.bool_,
}

_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13


def numpy_dtype(coil_dtype):
    """The numpy dtype holding a coil dtype's values (bf16: ml_dtypes.bfloat16 or uint16)."""
    if coil_dtype == "bf16":
        return _BFLOAT16 if _BFLOAT16 is not None else np.dtype(np.uint16)
    try:
        return np.dtype(_NUMPY[coil_dtype])
    except KeyError:
        raise Error(f"unknown coil dtype '{coil_dtype}'") from None


def as_host_array(x, coil_dtype=None):
    """x as a C-contiguous numpy array whose bytes coil reads (bf16 as its uint16 bits)."""
    if not isinstance(x, np.ndarray) and hasattr(x, "__dlpack__"):
        x = np.from_dlpack(x)
    # np.asarray keeps rank 0 (np.ascontiguousarray would make a scalar rank 1).
    a = np.asarray(x, order="C")
    if not a.dtype.isnative:  # big-endian data: coil reads the machine's byte order
        a = a.astype(a.dtype.newbyteorder("="))
    if _BFLOAT16 is not None and a.dtype == _BFLOAT16:
        a = a.view(np.uint16)
    if coil_dtype == "bf16" and a.dtype != np.uint16:
        raise Error(f"a bf16 input needs ml_dtypes.bfloat16 or uint16 bits, got {a.dtype}")
    return a


def _checked_host_array(i, x, info):
    """Input i as a host array, or a coil.Error naming it when numpy cannot give coil one."""
    try:
        a = as_host_array(x, info.dtype)
    except (TypeError, ValueError) as e:
        raise Error(f"input {i} '{info.name}' is not an array coil can read: {e}") from None
    if a.dtype.kind not in "fiub" and a.dtype != np.bool_:
        raise Error(f"input {i} '{info.name}' has numpy dtype {a.dtype}, which coil does not "
                    f"support (the model takes {info.dtype})")
    return a


def _contiguous(x):
    """False for a torch or cupy tensor that is not C-contiguous (True when unknown)."""
    if hasattr(x, "is_contiguous"):
        return bool(x.is_contiguous())
    flags = getattr(x, "flags", None)
    return bool(getattr(flags, "c_contiguous", True))


def _device_type(x):
    if isinstance(x, np.ndarray) or not hasattr(x, "__dlpack_device__"):
        return _DL_CPU
    return int(x.__dlpack_device__()[0])


def _current_stream(x):
    """The current CUDA stream of a torch or cupy tensor's device (the stream its producer
    works on), or None for other producers."""
    mod = type(x).__module__ or ""
    if mod.startswith("torch"):
        import torch  # only reached for torch tensors

        return torch.cuda.current_stream(x.device).cuda_stream
    if mod.startswith("cupy"):
        import cupy  # only reached for cupy arrays

        with cupy.cuda.Device(x.device.id):
            return cupy.cuda.get_current_stream().ptr
    return None


class Model:
    """A loaded package (coil_model_load)."""

    def __init__(self, path):
        self.path = os.fsdecode(os.fspath(path))
        if "\0" in self.path:  # C would read the path only up to it: another file
            raise Error(f"package path {self.path!r} contains a NUL character")
        self._m = NativeModel(self.path)
        self.inputs = [TensorInfo(n, d, tuple(s)) for n, d, s in self._m.signature(True)]
        self.outputs = [TensorInfo(n, d, tuple(s)) for n, d, s in self._m.signature(False)]
        self.symbols = {n: (lo, hi) for n, lo, hi in self._m.symbols()}

    @property
    def device(self):
        """'cpu' or 'cuda': where the package's buffers live."""
        return self._m.device

    def __repr__(self):
        sig = ", ".join(f"{t.name}: {t.dtype}[{', '.join(t.shape)}]" for t in self.inputs)
        out = ", ".join(f"{t.name}: {t.dtype}[{', '.join(t.shape)}]" for t in self.outputs)
        return f"<coil.Model {self.path!r} ({sig}) -> ({out}) on {self.device}>"

    def _ordered(self, args):
        if len(args) == 1 and isinstance(args[0], dict):
            given = dict(args[0])
            names = [t.name for t in self.inputs]
            missing = [n for n in names if n not in given]
            extra = sorted(str(n) for n in given if n not in names)
            if missing or extra:
                raise Error(f"inputs by name: missing {missing}, unknown {extra}; the model "
                            f"takes {names}")
            return [given[n] for n in names]
        if len(args) == 1 and isinstance(args[0], (list, tuple)) and len(self.inputs) != 1:
            return list(args[0])
        return list(args)

    def run(self, *args, stream=None):
        """Runs the model: positional inputs, a list, or one dict by name. Returns the outputs
        as a list. `stream` (an int CUstream) is used for CUDA tensors; by default the current
        stream of the tensors' device (torch, cupy), else the runtime's own."""
        xs = self._ordered(args)
        if len(xs) != len(self.inputs):
            raise Error(f"the model takes {len(self.inputs)} inputs, got {len(xs)}")
        kinds = [_device_type(x) for x in xs]
        cuda = [k in (_DL_CUDA, _DL_CUDA_MANAGED) for k in kinds]
        if any(cuda):
            return self._run_device(xs, cuda, stream)
        arrays = [_checked_host_array(i, x, t) for i, (x, t) in enumerate(zip(xs, self.inputs))]
        outs = self._m.run(arrays, False, 0)
        for i, t in enumerate(self.outputs):
            if t.dtype == "bf16" and _BFLOAT16 is not None:
                outs[i] = outs[i].view(_BFLOAT16)
        return outs

    def _run_device(self, xs, cuda, stream):
        if self.device == "cpu":
            raise Error(f"package '{self.path}' is a CPU package and cannot run CUDA tensors; "
                        "pass host arrays (numpy) or compile with --device cuda")
        if not all(cuda):
            bad = [t.name for t, c in zip(self.inputs, cuda) if not c]
            raise Error(f"inputs {bad} are not CUDA tensors; a device run takes every input "
                        "on the device")
        for i, (x, t) in enumerate(zip(xs, self.inputs)):
            if not _contiguous(x):
                raise Error(f"input {i} '{t.name}' is a non-contiguous CUDA tensor; coil reads "
                            "contiguous row-major data (call .contiguous() first)")
        if stream is None:
            stream = _current_stream(xs[0])
        # DLPack: the producer makes the data ready on the consumer's stream; 0 (the legacy
        # default stream) is spelled 1 there. coil takes NULL for "its own stream", which it
        # synchronizes before returning.
        dl_stream = None if stream is None else (1 if int(stream) == 0 else int(stream))
        capsules = [x.__dlpack__(stream=dl_stream) if dl_stream is not None else x.__dlpack__()
                    for x in xs]
        return self._m.run(capsules, True, int(stream or 0))


def load(path):
    """Loads the package directory `path` (coil_model_load); raises coil.Error."""
    return Model(path)
