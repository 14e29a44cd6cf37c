#!/usr/bin/env python3
"""Tests of coil.compile (libcoil_compiler in this process) and of calling the loaded model:
  - an ONNX path, an onnx.ModelProto and a .coil file compile and run against onnxruntime (or
    numpy); numpy in, numpy out; m(x) and m.run(x); inputs by name;
  - output= keeps the package where asked; a temporary package goes with the model;
  - dynamic= gives symbol ranges (checked at run time) and, for torch modules, dynamic axes;
  - the progress callbacks see every stage and the build's counts;
  - errors: coil.CompileError with the compiler's message (file, node, op), InputError,
    PackageError, TypeError for arguments of the wrong kind, all coil.Error subclasses;
  - torch (skipped when torch is missing): a torch.nn.Module with example inputs, dynamic axes,
    torch tensors in and out (CPU), tensors that require grad, bf16 outputs.
Usage: test_compile.py --work DIR   (PYTHONPATH must hold build/python)
"""
import argparse
import gc
import os
import shutil
import sys
import traceback

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import coil

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MLP = os.path.join(ROOT, "examples", "mlp.onnx")
RNG = np.random.default_rng(77)
WORK = None

try:
    import torch
except ImportError:  # torch is optional: its tests skip
    torch = None


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def reference(path, feeds):
    import onnxruntime as ort

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def close(got, want, tol=1e-5, what="output"):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    check(got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}")
    err = float(np.max(np.abs(got - want))) if got.size else 0.0
    check(err <= tol * max(1.0, float(np.max(np.abs(want))) if want.size else 1.0),
          f"{what}: max abs error {err}")


def mismatched_matmul_model(path):
    g = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"], name="mm")], "bad",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 64]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [32, 4])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [2, 4])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_onnx_path():
    m = coil.compile(MLP)
    check(isinstance(m, coil.Model), f"compile returned {type(m)}")
    check(m.device == "cpu", m.device)
    check([t.name for t in m.inputs] == ["x"] and [t.name for t in m.outputs] == ["probs"], m)
    for batch in (1, 3, 8):
        x = RNG.standard_normal((batch, 16)).astype(np.float32)
        (want,) = reference(MLP, {"x": x})
        y = m(x)  # one output: the array itself
        check(isinstance(y, np.ndarray), f"numpy in gives {type(y)}")
        close(y, want, what=f"m(x) batch {batch}")
        (y2,) = m.run(x)
        close(y2, want, what="m.run(x)")
        close(m(x=x), want, what="m(x=x)")
        close(m({"x": x}), want, what="m({'x': x})")


def test_model_proto_and_output_dir():
    proto = onnx.load(MLP)
    out = os.path.join(WORK, "proto.pkg")
    m = coil.compile(proto, output=out)
    check(m.path == out, f"path {m.path}, want {out}")
    for f in ("metadata.json", "model.so", "weights.bin"):
        check(os.path.exists(os.path.join(out, f)), f"{f} missing in {out}")
    x = RNG.standard_normal((5, 16)).astype(np.float32)
    close(m(x), reference(MLP, {"x": x})[0], what="ModelProto")
    del m
    gc.collect()
    check(os.path.isdir(out), "output= is the caller's: it stays after the model goes")
    again = coil.load(out)
    close(again(x), reference(MLP, {"x": x})[0], what="the package loaded again")


def test_temporary_package_goes_with_model():
    m = coil.compile(MLP)
    pkg = m.path
    check(os.path.isdir(pkg), f"{pkg} missing while the model lives")
    del m
    gc.collect()
    check(not os.path.exists(pkg), f"the temporary package {pkg} outlived its model")


def test_coil_text_file():
    path = os.path.join(WORK, "tanh.coil")
    with open(path, "w") as f:
        f.write("graph @t(%x: f32[N, 8]) -> (%y) {\n  symbol N in [1, 100]\n"
                "  %a = Tanh(%x) : f32[N, 8]\n  %y = Mul(%a, %x) : f32[N, 8]\n}\n")
    m = coil.compile(path, dynamic={"N": (2, 16)})
    check(m.symbols == {"N": (2, 16)}, f"symbols {m.symbols}")
    x = RNG.standard_normal((7, 8)).astype(np.float32)
    close(m(x), np.tanh(x) * x, what=".coil model")
    try:
        m(RNG.standard_normal((17, 8)).astype(np.float32))
        raise AssertionError("N = 17 outside [2, 16] was accepted")
    except coil.InputError as e:
        check("outside N's range [2, 16]" in str(e), str(e))


def test_dynamic_forms():
    for dyn in ({"batch": (1, 4)}, ["batch=1:4"], "batch=1:4"):
        m = coil.compile(MLP, dynamic=dyn)
        check(m.symbols.get("batch") == (1, 4), f"{dyn!r}: symbols {m.symbols}")
    for bad, kind in (({"batch": (1.5, 4)}, TypeError), ({"batch": "x"}, TypeError),
                      ([3], TypeError)):
        try:
            coil.compile(MLP, dynamic=bad)
            raise AssertionError(f"dynamic={bad!r} was accepted")
        except kind:
            pass
    try:
        coil.compile(MLP, dynamic={"nosuch": (1, 4)})
        raise AssertionError("a range for a symbol the model lacks was accepted")
    except coil.CompileError as e:
        check("symbol 'nosuch', which the model does not have" in str(e), str(e))
    try:
        coil.compile(MLP, dynamic={"x": {0: "batch"}})
        raise AssertionError("dynamic axes for an ONNX model were accepted")
    except coil.CompileError as e:
        check("torch modules" in str(e), str(e))


def test_progress_callbacks():
    stages, progress = [], []
    saved = os.environ.get("COIL_CACHE_DIR")
    os.environ["COIL_CACHE_DIR"] = "off"  # a real build, whose progress is counted
    try:
        coil.compile(MLP, output=os.path.join(WORK, "progress.pkg"),
                     on_stage=lambda s, t: stages.append((s, t)),
                     on_progress=lambda task, done, total: progress.append((task, done, total)))
    finally:
        if saved is None:
            del os.environ["COIL_CACHE_DIR"]
        else:
            os.environ["COIL_CACHE_DIR"] = saved
    names = [s.split(" ")[0] for s, _ in stages]
    for want in ("import", "fold", "lower", "schedule", "codegen", "wrapper", "write", "build"):
        check(want in names, f"stage {want} not reported: {names}")
    check(all(t >= 0 for _, t in stages), f"negative times: {stages}")
    check("build (cached)" not in [s for s, _ in stages], f"the cache was used: {stages}")
    builds = [p for p in progress if p[0] == "build"]
    # kernels.cpp and wrapper.cpp (or more units), then the link
    check(len(builds) >= 4 and builds[0][1] == 0 and builds[-1][1] == builds[-1][2] >= 3,
          f"build progress {builds}")
    dones = [d for _, d, _ in builds]
    check(dones == sorted(dones), f"build progress goes back: {builds}")


def test_errors():
    for cls in (coil.CompileError, coil.InputError, coil.PackageError, coil.RunError,
                coil.InternalError):
        check(issubclass(cls, coil.Error), f"{cls} is not a coil.Error")
    bad = os.path.join(WORK, "bad.onnx")
    mismatched_matmul_model(bad)
    try:
        coil.compile(bad)
        raise AssertionError("a MatMul of mismatched sizes compiled")
    except coil.CompileError as e:
        msg = str(e)
        check("bad.onnx" in msg and "node 'mm' (MatMul)" in msg, f"message: {msg}")
        check(not msg.startswith("error:"), f"message keeps the CLI prefix: {msg}")
    try:
        coil.compile(os.path.join(WORK, "missing.onnx"))
        raise AssertionError("a missing file compiled")
    except coil.CompileError as e:
        check("missing.onnx" in str(e), str(e))
    try:
        coil.compile(MLP, device="tpu")
        raise AssertionError("device tpu was accepted")
    except coil.CompileError as e:
        check("unknown device 'tpu'" in str(e), str(e))
    try:
        coil.compile(MLP, cpu_target="pentium")
        raise AssertionError("cpu_target pentium was accepted")
    except coil.CompileError as e:
        check("unknown CPU target 'pentium'" in str(e), str(e))
    try:
        coil.compile(MLP, device="cuda", gemm="tensorcores")
        raise AssertionError("gemm tensorcores was accepted")
    except coil.CompileError as e:
        check("unknown GEMM backend 'tensorcores'" in str(e), str(e))
    try:
        coil.compile(42)
        raise AssertionError("an int compiled")
    except TypeError as e:
        check("got int" in str(e), str(e))
    try:
        coil.load(os.path.join(WORK, "no.pkg"))
        raise AssertionError("a missing package loaded")
    except coil.PackageError as e:
        check("no.pkg" in str(e), str(e))
    m = coil.compile(MLP)
    try:
        m(np.zeros((2, 15), np.float32))
        raise AssertionError("a (2, 15) input was accepted for f32[batch, 16]")
    except coil.InputError as e:
        check("input 0 'x' dim 1 must be 16, got 15" in str(e), str(e))


def torch_module():
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(),
                               torch.nn.LayerNorm(32), torch.nn.Linear(32, 10)).eval()


def test_torch_module():
    if torch is None:
        print("skip test_torch_module: torch is not installed")
        return
    net = torch_module()
    example = torch.randn(4, 16)
    m = coil.compile(net, example_inputs=(example,), dynamic={"input": {0: ("batch", 1, 64)}},
                     input_names=["input"], output_names=["logits"])
    check([t.name for t in m.inputs] == ["input"], m.inputs)
    check(m.symbols.get("batch") == (1, 64), f"symbols {m.symbols}")
    for batch in (1, 5, 64):
        x = torch.randn(batch, 16)
        with torch.no_grad():
            want = net(x)
        y = m(x)
        check(isinstance(y, torch.Tensor), f"torch in gives {type(y)}")
        check(y.device.type == "cpu" and y.dtype == torch.float32, f"{y.device} {y.dtype}")
        close(y.numpy(), want.numpy(), tol=1e-4, what=f"torch batch {batch}")
        close(m(x.numpy()), want.numpy(), tol=1e-4, what="numpy into a torch-made model")
    # A tensor that requires grad (DLPack refuses those: coil takes the data).
    x = torch.randn(3, 16, requires_grad=True)
    close(m(x).numpy(), net(x).detach().numpy(), tol=1e-4, what="requires_grad input")
    # A non-contiguous tensor is read as its values.
    xt = torch.randn(16, 6).t()
    close(m(xt).numpy(), net(xt).detach().numpy(), tol=1e-4, what="non-contiguous input")
    # forward()'s parameter names by default; static shapes without dynamic=.
    m2 = coil.compile(net, example_inputs=torch.randn(2, 16))
    check([t.shape for t in m2.inputs] == [("2", "16")], m2.inputs)
    try:
        coil.compile(net)
        raise AssertionError("a module without example_inputs was accepted")
    except TypeError as e:
        check("example_inputs" in str(e), str(e))
    try:
        coil.compile(net, example_inputs=example, dynamic={"nosuch": {0: "b"}})
        raise AssertionError("dynamic axes of an unknown input were accepted")
    except ValueError as e:
        check("nosuch" in str(e), str(e))


def test_torch_dtypes():
    if torch is None:
        print("skip test_torch_dtypes: torch is not installed")
        return

    class Half(torch.nn.Module):
        def forward(self, x, i):
            return (x * 2).to(torch.bfloat16), i + 1

    m = coil.compile(Half(), example_inputs=(torch.randn(3, 4), torch.arange(6).view(3, 2)))
    x, i = torch.randn(3, 4), torch.arange(6).view(3, 2) * 7
    b, j = m(x, i)
    check(b.dtype == torch.bfloat16 and j.dtype == torch.int64, f"{b.dtype} {j.dtype}")
    close(b.float().numpy(), (x * 2).to(torch.bfloat16).float().numpy(), what="bf16 output")
    check(bool(torch.equal(j, i + 1)), f"int output {j} vs {i + 1}")


def main():
    global WORK
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    WORK = os.path.abspath(args.work)
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_")]
    failures = []
    for name, fn in tests:
        try:
            fn()
            print(f"ok   {name}")
        except Exception:  # noqa: BLE001
            failures.append(name)
            print(f"FAIL {name}")
            traceback.print_exc()
    print(f"{len(tests) - len(failures)} of {len(tests)} passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
