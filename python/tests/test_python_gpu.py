#!/usr/bin/env python3
"""GPU tests of the Python module: a CUDA package (`coil compile --device cuda`) run on CUDA
DLPack tensors (torch, else cupy) through coil_model_run_device on the tensors' stream, outputs
as DLPack tensors, compared with the CPU package's outputs; host arrays on a CUDA package
(coil_model_run copies); the Python wrapper refusing a CUDA package.
Exit 77 (skip) without an NVIDIA GPU or without torch/cupy.
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
    try:
        import torch

        lib = "torch"
        if not torch.cuda.is_available():
            raise ImportError
    except ImportError:
        try:
            import cupy  # noqa: F401

            lib = "cupy"
        except ImportError:
            print("python gpu tests skipped: neither torch (with CUDA) nor cupy is installed")
            return SKIP
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
    if lib == "torch":
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
    try:
        pw.load(pkgs["cuda"])
        print("FAIL  the Python wrapper accepted a CUDA package")
        failed += 1
    except coil.Error as e:
        print("ok    the Python wrapper refuses a CUDA package" if "CPU packages only" in str(e)
              else f"FAIL  unexpected message: {e}")
        failed += "CPU packages only" not in str(e)
    print(f"python gpu: {'all passed' if not failed else f'{failed} failed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
