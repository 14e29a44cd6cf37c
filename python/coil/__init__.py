"""coil: compile a model (ONNX, or PyTorch through ONNX) into a package, load it and run it.

    import coil, numpy as np
    m = coil.compile("mlp.onnx")                 # or an onnx.ModelProto, or a torch.nn.Module
    y = m(np.random.rand(4, 16).astype(np.float32))
    m = coil.load("mlp.pkg")                     # a package compiled before (`coil compile`)
    m.inputs            # [TensorInfo(name='x', dtype='f32', shape=('batch', '16'))]
    (probs,) = m.run({"x": x})

Arrays in: numpy arrays (any dtype coil has: float64/32/16, bfloat16 as uint16 bits or
ml_dtypes.bfloat16, int64..int8, uint64..uint8, bool), torch tensors, or any DLPack tensor
(__dlpack__). Host tensors run through coil_model_run; CUDA tensors through
coil_model_run_device on the tensors' current stream (a CUDA package is needed), enqueued
without a host synchronization, the legacy default stream included. Arrays out: numpy arrays for
numpy inputs (bf16 as ml_dtypes.bfloat16 when installed, else uint16 bits), torch tensors for
torch inputs (on the inputs' device, without copies), DLPack tensors for other device inputs.

Errors raise coil.Error subclasses with the compiler's or the runtime's message:
CompileError (the model or an option is wrong), InputError (inputs that do not match the
compiled signature), PackageError (a missing or incompatible package), RunError (a run failed:
out of memory, a model error), InternalError (a bug in coil).

coil.pywrapper runs the same package through its Python wrapper (src/wrapper.py).
"""
import os
from collections import namedtuple

import numpy as np

from ._coil import (  # noqa: F401
    CompileError,
    Error,
    InputError,
    InternalError,
    NativeModel,
    PackageError,
    RunError,
    compiler_version,
    model_abi_version,
    runtime_path,
)

try:  # optional: a real numpy bfloat16
    import ml_dtypes as _ml_dtypes

    _BFLOAT16 = np.dtype(_ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    _BFLOAT16 = None

__version__ = compiler_version()

__all__ = ["CompileError", "Error", "InputError", "InternalError", "Model", "PackageError",
           "RunError", "TensorInfo", "cmake_dir", "compile", "include_dir", "load", "numpy_dtype"]

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
        raise InputError(f"a bf16 input needs ml_dtypes.bfloat16 or uint16 bits, got {a.dtype}")
    return a


def _checked_host_array(i, x, info):
    """Input i as a host array, or a coil.Error naming it when numpy cannot give coil one."""
    try:
        a = as_host_array(x, info.dtype)
    except (TypeError, ValueError) as e:
        raise InputError(f"input {i} '{info.name}' is not an array coil can read: {e}") from None
    if a.dtype.kind not in "fiub" and a.dtype != np.bool_:
        raise InputError(f"input {i} '{info.name}' has numpy dtype {a.dtype}, which coil does not "
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


def _is_torch(x) -> bool:
    return (type(x).__module__ or "").startswith("torch")


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


# The CUDA handles of the default streams (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD; coil.h's
# COIL_STREAM_LEGACY and COIL_STREAM_PER_THREAD): coil_model_run_device takes NULL as "the
# runtime's own stream, synchronized", so the legacy default stream, which torch and cupy call 0,
# is passed as its handle 1 and the work is enqueued there like on any other stream.
_STREAM_LEGACY, _STREAM_PER_THREAD = 1, 2


def _torch_host_input(x):
    """A CPU torch tensor as coil reads it: detached (DLPack refuses tensors that require
    grad), C-contiguous (a copy only when it is not)."""
    return x.detach().contiguous()


def _to_torch(outs, coil_dtypes):
    """Host outputs (numpy) or device outputs (DLPack) as torch tensors, without copies."""
    import torch  # only reached when the inputs were torch tensors

    result = []
    for y, dt in zip(outs, coil_dtypes):
        if isinstance(y, np.ndarray):
            if dt == "bf16":  # the uint16 bits, seen as bfloat16
                t = torch.from_numpy(np.ascontiguousarray(y).view(np.int16)).view(torch.bfloat16)
            else:
                t = torch.from_numpy(y) if y.dtype != np.bool_ else torch.from_dlpack(y)
        else:
            t = torch.from_dlpack(y)
        result.append(t)
    return result


class Model:
    """A loaded package (coil_model_load): its signature, and runs on numpy arrays, torch
    tensors or DLPack tensors. `model(*inputs)` returns the output (a tuple when the model has
    several); `model.run(*inputs)` returns the list of outputs."""

    def __init__(self, path: "str | os.PathLike[str]"):
        self.path = os.fsdecode(os.fspath(path))
        if "\0" in self.path:  # C would read the path only up to it: another file
            raise Error(f"package path {self.path!r} contains a NUL character")
        self._m = NativeModel(self.path)
        self.inputs = [TensorInfo(n, d, tuple(s)) for n, d, s in self._m.signature(True)]
        self.outputs = [TensorInfo(n, d, tuple(s)) for n, d, s in self._m.signature(False)]
        self.symbols = {n: (lo, hi) for n, lo, hi in self._m.symbols()}

    @property
    def device(self) -> str:
        """'cpu' or 'cuda': where the package's buffers live."""
        return self._m.device

    def __repr__(self) -> str:
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
                raise InputError(f"inputs by name: missing {missing}, unknown {extra}; the "
                                 f"model takes {names}")
            return [given[n] for n in names]
        if len(args) == 1 and isinstance(args[0], (list, tuple)) and len(self.inputs) != 1:
            return list(args[0])
        return list(args)

    def __call__(self, *args, stream: "int | None" = None, **named):
        """Runs the model on positional inputs, or inputs by name (keywords or one dict).
        Returns the output, or a tuple of them when the model has several."""
        if named:
            if args:
                raise InputError("give the inputs by position or by name, not both")
            args = (named,)
        outs = self.run(*args, stream=stream)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def run(self, *args, stream: "int | None" = None) -> list:
        """Runs the model: positional inputs, a list, or one dict by name. Returns the outputs
        as a list. `stream` (an int CUstream; 0 is the legacy default stream) is used for CUDA
        tensors; by default the current stream of the tensors' device (torch, cupy), else the
        runtime's own (synchronized before returning)."""
        xs = self._ordered(args)
        if len(xs) != len(self.inputs):
            raise InputError(f"the model takes {len(self.inputs)} inputs, got {len(xs)}")
        torch_in = any(_is_torch(x) for x in xs)
        kinds = [_device_type(x) for x in xs]
        cuda = [k in (_DL_CUDA, _DL_CUDA_MANAGED) for k in kinds]
        if any(cuda):
            outs = self._run_device(xs, cuda, stream)
        else:
            arrays = []
            for i, (x, t) in enumerate(zip(xs, self.inputs)):
                if _is_torch(x):
                    arrays.append(_torch_host_input(x))
                else:
                    arrays.append(_checked_host_array(i, x, t))
            outs = self._m.run(arrays, False, 0)
            if not torch_in:
                for i, t in enumerate(self.outputs):
                    if t.dtype == "bf16" and _BFLOAT16 is not None:
                        outs[i] = outs[i].view(_BFLOAT16)
        if torch_in:
            return _to_torch(outs, [t.dtype for t in self.outputs])
        return outs

    def _run_device(self, xs, cuda, stream):
        if self.device == "cpu":
            raise InputError(f"package '{self.path}' is a CPU package and cannot run CUDA "
                             "tensors; pass host arrays (numpy) or compile with --device cuda")
        if not all(cuda):
            bad = [t.name for t, c in zip(self.inputs, cuda) if not c]
            raise InputError(f"inputs {bad} are not CUDA tensors; a device run takes every "
                             "input on the device")
        for i, (x, t) in enumerate(zip(xs, self.inputs)):
            if not _contiguous(x):
                raise InputError(f"input {i} '{t.name}' is a non-contiguous CUDA tensor; coil "
                                 "reads contiguous row-major data (call .contiguous() first)")
        xs = [x.detach() if _is_torch(x) else x for x in xs]
        if stream is None:
            stream = _current_stream(xs[0])
        if stream is None:  # a producer without a current stream: the runtime's own, synchronized
            return self._m.run([x.__dlpack__() for x in xs], True, 0)
        # DLPack: the producer makes the data ready on the consumer's stream, where 1 names the
        # legacy default stream; coil enqueues on that same stream (see _STREAM_LEGACY).
        handle = _STREAM_LEGACY if int(stream) == 0 else int(stream)
        capsules = [x.__dlpack__(stream=handle) for x in xs]
        return self._m.run(capsules, True, handle)


def load(path: "str | os.PathLike[str]") -> Model:
    """Loads the package directory `path` (coil_model_load), or a packed package
    (`coil pack`, a .zip); raises coil.PackageError when it is missing or incompatible."""
    return Model(path)


def _installed(relative: str) -> str:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), relative)
    if not os.path.exists(path):
        raise Error(f"{path} is missing: this coil module runs from a build tree, not from an "
                    "installed wheel (pip install <coil checkout>)")
    return path


def include_dir() -> str:
    """The directory holding coil/coil.h, coil/compiler.h, ... of an installed wheel (for
    C and C++ programs that load packages)."""
    return _installed("include")


def cmake_dir() -> str:
    """The directory of coilConfig.cmake of an installed wheel:
    `cmake -Dcoil_DIR=$(python -c "import coil; print(coil.cmake_dir())")`."""
    return _installed(os.path.join("lib", "cmake", "coil"))


from ._compile import compile  # noqa: E402  (uses Model)
