"""coil.compile: a model (an ONNX file, an onnx.ModelProto or a torch.nn.Module) compiled in
this process by libcoil_compiler (include/coil/compiler.h) into a package, loaded."""
from __future__ import annotations

import inspect
import os
import shutil
import sys
import tempfile
import time
import warnings
import weakref
from typing import Any, Callable, Mapping, Optional, Sequence, Tuple, Union

from . import _coil

__all__ = ["compile"]

# A symbol's range: (min, max), both inclusive.
Range = Tuple[int, int]
# An axis of a torch input: the symbol's name, or (name, min, max).
AxisSpec = Union[str, Tuple[str, int, int]]
Dynamic = Union[Mapping[str, Union[Range, Mapping[int, AxisSpec]]], Sequence[str]]


def _is_module_of(obj: Any, prefix: str) -> bool:
    return any((c.__module__ or "").startswith(prefix) for c in type(obj).__mro__)


def _range_text(name: str, lo: Any, hi: Any) -> str:
    if not isinstance(lo, int) or not isinstance(hi, int) or isinstance(lo, bool) or \
            isinstance(hi, bool):
        raise TypeError(f"dynamic: symbol '{name}' needs integer bounds (min, max), "
                        f"got ({lo!r}, {hi!r})")
    return f"{name}={lo}:{hi}"


def _parse_dynamic(dynamic: Optional[Dynamic]) -> Tuple[list, dict]:
    """(["NAME=MIN:MAX", ...], {input name: {axis: symbol}}) from the `dynamic` argument."""
    ranges: list = []
    axes: dict = {}
    if dynamic is None:
        return ranges, axes
    if isinstance(dynamic, str):
        dynamic = [dynamic]
    if not isinstance(dynamic, Mapping):
        for d in dynamic:
            if not isinstance(d, str):
                raise TypeError(f"dynamic: a list holds 'NAME=MIN:MAX' texts, got {d!r}")
            ranges.append(d)
        return ranges, axes
    for key, value in dynamic.items():
        if isinstance(value, Mapping):  # dynamic axes of a torch input
            spec = {}
            for axis, sym in value.items():
                if not isinstance(axis, int):
                    raise TypeError(f"dynamic: input '{key}' axis {axis!r} is not an int")
                if isinstance(sym, str):
                    spec[axis] = sym
                elif isinstance(sym, (tuple, list)) and len(sym) == 3 and isinstance(sym[0], str):
                    spec[axis] = sym[0]
                    ranges.append(_range_text(sym[0], sym[1], sym[2]))
                else:
                    raise TypeError(f"dynamic: input '{key}' axis {axis}: give a symbol name or "
                                    f"(name, min, max), got {sym!r}")
            axes[key] = spec
        elif isinstance(value, (tuple, list)) and len(value) == 2:
            ranges.append(_range_text(key, value[0], value[1]))
        else:
            raise TypeError(f"dynamic['{key}']: give a symbol's range (min, max) or a torch "
                            f"input's axes {{axis: name or (name, min, max)}}, got {value!r}")
    # One range per symbol: the last one given wins, as with repeated --dynamic.
    unique = {}
    for r in ranges:
        unique[r.split("=", 1)[0]] = r
    return list(unique.values()), axes


def _forward_names(module: Any, count: int) -> list:
    """The names of forward()'s first `count` positional parameters ("input_<i>" past them)."""
    names = []
    try:
        params = [p for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        names = [p.name for p in params[:count]]
    except (TypeError, ValueError):
        pass
    return names + [f"input_{i}" for i in range(len(names), count)]


def _export_torch(module: Any, example_inputs: Any, path: str, axes: dict,
                  input_names: Optional[Sequence[str]], output_names: Optional[Sequence[str]],
                  opset: Optional[int], exporter: str) -> None:
    import torch

    if example_inputs is None:
        raise TypeError("compiling a torch.nn.Module needs example_inputs (a tensor or a tuple "
                        "of tensors, as forward() takes them) to export it to ONNX")
    args = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    names = list(input_names) if input_names is not None else _forward_names(module, len(args))
    unknown = sorted(set(axes) - set(names) - set(output_names or []))
    if unknown:
        raise ValueError(f"dynamic names inputs {unknown}, which the module does not have "
                         f"(its inputs: {names})")
    dynamic_axes = {k: dict(v) for k, v in axes.items()} or None
    kwargs = dict(input_names=names, output_names=list(output_names) if output_names else None,
                  do_constant_folding=True, verbose=False)
    errors = []
    with torch.no_grad(), warnings.catch_warnings():
        # The exporters' notices about each other are not the caller's business.
        warnings.simplefilter("ignore", category=DeprecationWarning)
        warnings.simplefilter("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", message=".*dynamic_axes.*")
        warnings.filterwarnings("ignore", message=".*legacy TorchScript-based ONNX export.*")
        if exporter in ("auto", "torchscript"):
            try:
                torch.onnx.export(module, args, path, dynamic_axes=dynamic_axes,
                                  opset_version=opset or 18, dynamo=False, **kwargs)
                return
            except Exception as e:  # noqa: BLE001 - the other exporter may manage
                if exporter == "torchscript":
                    raise
                errors.append(f"TorchScript exporter: {e}")
        if exporter not in ("auto", "dynamo"):
            raise ValueError(f"exporter must be 'auto', 'torchscript' or 'dynamo', got "
                             f"{exporter!r}")
        try:
            program = torch.onnx.export(module, args, dynamo=True, dynamic_axes=dynamic_axes,
                                        opset_version=max(opset or 18, 18),
                                        external_data=False, **kwargs)
            program.save(path)
        except Exception as e:
            errors.append(f"dynamo exporter: {e}")
            raise _coil.CompileError("cannot export the torch module to ONNX: " +
                                     "; ".join(errors)) from e


def _save_onnx(model: Any, path: str) -> None:
    import onnx

    try:
        large = model.ByteSize() > (1 << 31) - (64 << 20)
    except ValueError:
        large = True
    # Protobuf cannot serialize 2 GB: big weights go to a file beside the model.
    onnx.save_model(model, path, save_as_external_data=large,
                    location=os.path.basename(path) + ".data" if large else None)


class _Progress:
    """Stage lines and a progress bar on stderr, as `coil compile` prints them: on a terminal
    the bar redraws in place; elsewhere (a log) only the finished count is written."""

    def __init__(self, stream=sys.stderr):
        self.stream = stream
        self.tty = stream.isatty()
        self.t0 = time.perf_counter()
        self.drawn = False

    def stage(self, name: str, seconds: float) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.drawn = False
        self.stream.write(f"coil compile: {name:<14} {seconds:8.3f} s  "
                          f"({time.perf_counter() - self.t0:.2f} s in all)\n")
        self.stream.flush()

    def progress(self, task: str, done: int, total: int) -> None:
        if total <= 0 or (not self.tty and done < total):
            return
        width = 30
        filled = width * done // total
        bar = f"coil compile: {task:<6} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}"
        if self.tty:
            self.stream.write("\r" + bar)
            self.drawn = True
        else:
            self.stream.write(bar + "\n")
        self.stream.flush()


def compile(model: Any, *, device: str = "cpu", dynamic: Optional[Dynamic] = None,
            output: "Optional[Union[str, os.PathLike[str]]]" = None,
            example_inputs: Any = None, input_names: Optional[Sequence[str]] = None,
            output_names: Optional[Sequence[str]] = None, arch: Optional[str] = None,
            cpu_target: Optional[str] = None, tune: Optional[bool] = None,
            gemm: Optional[str] = None,
            opset: Optional[int] = None, exporter: str = "auto", verbose: bool = False,
            on_stage: Optional[Callable[[str, float], None]] = None,
            on_progress: Optional[Callable[[str, int, int], None]] = None):
    """Compiles `model` into a package and loads it (in this process, through libcoil_compiler).

    model: the path of an ONNX (.onnx) or coil text IR (.coil) file, an onnx.ModelProto, or a
        torch.nn.Module (exported with torch.onnx.export on `example_inputs`).
    device: "cpu" or "cuda" (CUDA packages need nvcc when compiling and a GPU when running).
    dynamic: sizes that vary between runs. Ranges of the model's symbols, {"batch": (1, 64)}
        or ["batch=1:64"]; for a torch module also the dynamic axes of its inputs and outputs,
        {"x": {0: ("batch", 1, 64)}} or {"x": {0: "batch"}} (range [1, 2^62]).
    output: the package directory to write (default: a temporary one, removed with the model).
    example_inputs: a torch module's example arguments (a tensor or a tuple of them).
    input_names, output_names: the names of a torch module's inputs and outputs in the package
        (default: forward()'s parameter names, and "output_<i>" as torch names them).
    arch: CUDA architectures, e.g. "sm_80,sm_90a" (default both).
    cpu_target: the instruction set of a CPU package: "native", "x86-64-v2", "x86-64-v3" or
        "x86-64-v4" (default: the portable x86-64-v2, with a copy of the kernels for this
        CPU's level that CPUs of that level run).
    tune: time each CUDA kernel's configs on this machine's GPU (default: when it has one).
    gemm: how CUDA GEMMs with pointwise consumers run: "auto" (default: cuBLASLt), "cutlass"
        (fused into generated CUTLASS kernels; experimental, sm_90a) or "cublaslt".
    opset: the ONNX opset a torch module is exported at (default 18).
    exporter: "auto" (TorchScript, then dynamo), "torchscript" or "dynamo" for torch modules.
    verbose: print each stage with its time and the builds' progress on stderr.
    on_stage(stage, seconds), on_progress(task, done, total): callbacks for the same events.

    Returns a coil.Model: call it with numpy arrays or torch tensors. Raises coil.CompileError
    with the compiler's message when the model or an option is wrong, coil.InternalError for a
    bug in coil, TypeError for arguments of the wrong kind.
    """
    if device not in ("cpu", "cuda"):
        raise _coil.CompileError(f"unknown device '{device}' (supported: cpu, cuda)")
    ranges, axes = _parse_dynamic(dynamic)
    work = tempfile.mkdtemp(prefix="coil-compile-")
    try:
        if isinstance(model, (str, os.PathLike)):
            path = os.fspath(model)
            if axes:
                raise _coil.CompileError(
                    "dynamic axes ({input: {axis: name}}) apply to torch modules; an ONNX "
                    "model's dynamic sizes are its symbols: give their ranges, "
                    "{'name': (min, max)}")
        elif _is_module_of(model, "onnx") and hasattr(model, "SerializeToString"):
            if axes:
                raise _coil.CompileError("dynamic axes apply to torch modules; give an ONNX "
                                         "model's symbol ranges as {'name': (min, max)}")
            path = os.path.join(work, (model.graph.name or "model") + ".onnx")
            _save_onnx(model, path)
        elif _is_module_of(model, "torch") and hasattr(model, "forward"):
            path = os.path.join(work, type(model).__name__ + ".onnx")
            _export_torch(model, example_inputs, path, axes, input_names, output_names, opset,
                          exporter)
        else:
            raise TypeError("coil.compile takes a path of a .onnx or .coil file, an "
                            f"onnx.ModelProto or a torch.nn.Module, got {type(model).__name__}")
        temporary = output is None
        package = os.path.join(work, "package") if temporary else os.fspath(output)
        printer = _Progress() if verbose else None

        def stage(name: str, seconds: float) -> None:
            if printer:
                printer.stage(name, seconds)
            if on_stage:
                on_stage(name, seconds)

        def progress(task: str, done: int, total: int) -> None:
            if printer:
                printer.progress(task, done, total)
            if on_progress:
                on_progress(task, done, total)

        _coil.compile(path, package, device, arch or "", cpu_target or "", ranges,
                      -1 if tune is None else int(bool(tune)), False, stage, progress, gemm or "")
        from . import Model

        loaded = Model(package)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    if temporary:
        # The package lives as long as the model (model.so is mapped: removing the files while
        # it is loaded is safe on Linux, but they are kept until the model goes).
        weakref.finalize(loaded, shutil.rmtree, work, True)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return loaded
