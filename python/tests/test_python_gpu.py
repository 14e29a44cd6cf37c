#!/usr/bin/env python3
"""GPU tests of the Python module and the Python wrapper on CUDA packages (`coil compile
--device cuda`):
  - src/wrapper.py (coil.pywrapper, inside libcoil_cuda's run: the run's device arena,
    allocator and coil_cuda_ctx) against model.so (coil.load) on the same random inputs, outputs
    bit for bit equal, for the mlp example (extern GEMM), the mlp with a dynamic batch, NonZero
    (a host-fallback extern, data-dependent dim), Unique (allocating host fallback, MultiOutput),
    every dtype; wrapper.py's debug hook sees device values copied to the host; an extern
    failure names its node like model.so;
  - CUDA DLPack tensors (torch, else cupy) through coil_model_run_device on the tensors'
    stream, compared with the CPU package's outputs; host arrays on a CUDA package.
Exit 77 (skip) without an NVIDIA GPU; the DLPack part is skipped without torch/cupy.
Usage: test_python_gpu.py --coil build/bin/coil --work DIR   (PYTHONPATH must hold build/python)
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np

import coil
import coil.pywrapper as pw

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_python as T  # noqa: E402 -- the models and helpers of the CPU tests

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP = 77


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coil", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    if not shutil.which("nvidia-smi") or subprocess.run(["nvidia-smi", "-L"],
                                                        capture_output=True).returncode:
        print("python gpu tests skipped: no NVIDIA GPU on this machine")
        return SKIP
    lib = None
    try:
        import torch

        if torch.cuda.is_available():
            lib = "torch"
    except ImportError:
        pass
    if lib is None:
        try:
            import cupy  # noqa: F401

            lib = "cupy"
        except ImportError:
            print("note: neither torch (with CUDA) nor cupy is installed: DLPack tests skipped")
    os.makedirs(a.work, exist_ok=True)
    model = os.path.join(ROOT, "examples", "mlp.onnx")
    pkgs = {}
    for dev in ("cpu", "cuda"):
        pkgs[dev] = os.path.join(a.work, f"mlp-{dev}.pkg")
        shutil.rmtree(pkgs[dev], ignore_errors=True)
        r = subprocess.run([a.coil, "compile", model, "-o", pkgs[dev], "--device", dev],
                           capture_output=True, text=True)
        if r.returncode:
            print(f"FAIL  coil compile --device {dev}: {r.stderr}")
            return 1
    cpu, gpu = coil.load(pkgs["cpu"]), coil.load(pkgs["cuda"])
    assert gpu.device == "cuda", gpu.device
    x = np.random.default_rng(7).standard_normal((5, 16)).astype(np.float32)
    (ref,) = cpu.run(x)
    failed = 0

    def check(name, got):
        nonlocal failed
        ok = got.shape == ref.shape and np.allclose(got, ref, rtol=1e-4, atol=1e-5)
        print(("ok    " if ok else "FAIL  ") + name)
        failed += not ok

    # Host arrays on a CUDA package: coil_model_run copies in and out.
    check("host arrays on a CUDA package", gpu.run(x)[0])
    if lib is None:
        pass
    elif lib == "torch":
        xt = torch.from_numpy(x).cuda()
        (y,) = gpu.run(xt)  # the current (default) stream
        check("torch tensor, default stream", torch.from_dlpack(y).cpu().numpy())
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            xs = xt * 1.0  # produced on s
            (y2,) = gpu.run(xs)  # runs on s
            out = torch.from_dlpack(y2) + 0  # consumed on s
        s.synchronize()
        check("torch tensor, a side stream", out.cpu().numpy())
    else:
        import cupy

        xc = cupy.asarray(x)
        (y,) = gpu.run(xc)
        check("cupy array", cupy.asnumpy(cupy.from_dlpack(y)))
    failed += wrapper_tests(a.coil, a.work)
    print(f"python gpu: {'all passed' if not failed else f'{failed} failed'}")
    return 1 if failed else 0


def wrapper_tests(coil_bin, work):
    """wrapper.py vs model.so on CUDA packages; returns the number of failures."""
    T.COIL = coil_bin
    mlp = os.path.join(ROOT, "examples", "mlp.onnx")

    def repeated_values(m, sizes):
        return [np.round(T.RNG.standard_normal(sizes["N"]) * 2).astype(np.float32)]

    cases = [
        ("mlp (extern GEMM)", "mlp", mlp, [], [{"batch": 1}, {"batch": 7}, {"batch": 33}],
         T.random_inputs),
        ("mlp --dynamic batch", "mlp_dynamic", mlp, ["--dynamic", "batch=1:48"],
         [{"batch": 2}, {"batch": 17}, {"batch": 48}], T.random_inputs),
        ("nonzero (host-fallback extern)", "nonzero", T.NONZERO, [],
         [{"N": 1}, {"N": 5}, {"N": 64}], T.random_inputs),
        ("unique (allocating host fallback)", "unique", T.UNIQUE, [], [{"N": 1}, {"N": 20}],
         repeated_values),
        ("every dtype", "dtypes", T.DTYPES, [], [{"N": 1}, {"N": 9}], T.random_inputs),
    ]
    failed = 0
    for title, name, model, extra, sizes_list, make_inputs in cases:
        try:
            pkg = T.compile_model(coil_bin, work, name + "_cuda", model,
                                  ["--device", "cuda", *extra])
            m, w = coil.load(pkg), pw.load(pkg, debug=None)
            T.check(w.device == "cuda", "a CUDA package")
            runs = 0
            for sizes in sizes_list:
                xs = make_inputs(m, sizes)
                ref, got = m.run(*xs), w.run(*xs)
                for i, (r, g) in enumerate(zip(ref, got)):
                    T.check(T.same(r, g), f"sizes {sizes}: wrapper.py output {i} differs from "
                                          f"model.so:\n{g}\n{r}")
                runs += 1
            # The debug hook sees every launch, with device values copied to the host: the
            # values after the launch that computes the last output include it.
            seen = []
            wd = pw.load(pkg, debug=lambda when, launch, values: seen.append((when, launch,
                                                                              values)))
            xs = make_inputs(m, sizes_list[-1])
            outs = wd.run(*xs)
            launches = [l["name"] for l in wd.launches]
            T.check([s[1] for s in seen if s[0] == "after"] == launches,
                    f"debug hook launches {[s[1] for s in seen]} != {launches}")
            T.check(any(isinstance(v, np.ndarray) and T.same(v, outs[-1])
                        for when, _, values in seen if when == "after" for _, v in values),
                    "a launch's values after it ran hold the last output")
            print(f"ok    wrapper.py = model.so: {title} ({runs} sizes)")
        except Exception:  # noqa: BLE001
            import traceback

            failed += 1
            print(f"FAIL  wrapper.py = model.so: {title}")
            traceback.print_exc()
    # An extern failure names the graph node, as model.so does.
    try:
        onnx_path = os.path.join(work, "reshape_values.onnx")
        make_reshape_model(onnx_path)
        pkg = T.compile_model(coil_bin, work, "reshape_values_cuda", onnx_path,
                              ["--device", "cuda"])
        w = pw.load(pkg, debug=None)
        x = T.RNG.standard_normal((2, 6)).astype(np.float32)
        (y,) = w.run(x, np.array([3, 4], np.int64))
        T.check(T.same(y, x.reshape(3, 4)), "a valid run-time shape")
        want = "node 'rs' (Reshape): reshape: shape value -3 at index 1 is invalid"
        for who, fn in (("wrapper.py", w.run), ("model.so", coil.load(pkg).run)):
            try:
                fn(x, np.array([4, -3], np.int64))
                T.check(False, f"{who} accepted shape [4, -3]")
            except coil.Error as e:
                T.check(str(e).endswith(want), f"{who} says {str(e)!r}, expected ...{want!r}")
        (y,) = w.run(x, np.array([6, 2], np.int64))
        T.check(T.same(y, x.reshape(6, 2)), "a valid run after a failed one")
        print("ok    wrapper.py extern failure names the node on CUDA")
    except Exception:  # noqa: BLE001
        import traceback

        failed += 1
        print("FAIL  wrapper.py extern failure names the node on CUDA")
        traceback.print_exc()
    return failed


def make_reshape_model(path):
    from onnx import TensorProto, helper, save

    g = helper.make_graph([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")], "rs",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
                           helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), path)


if __name__ == "__main__":
    sys.exit(main())
