#!/usr/bin/env python3
"""coil as a user installs it (ctest `install-wheel`, label install): in fresh virtual
environments, outside the repository.

  1. `pip wheel <repo>` builds the wheel (build dependencies from PyPI, the build in --build-dir,
     so that a second run is incremental);
  2. venv 1: `pip install <repo>`; venv 2: `pip install <the wheel>`;
  3. in each, from a directory outside the repository: `coil --version`, then
     `python -c "import coil; m = coil.compile('model.onnx'); print(m(x))"` checked against the
     outputs onnxruntime computes here, and `coil compile` + `coil run` through the console
     command, and the installed CMake package and headers are where coil.cmake_dir() says.

Exit 77 (skipped) when PyPI cannot be reached: the build dependencies come from there.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def log(msg):
    print(msg, flush=True)


def run(cmd, cwd=None, env=None, timeout=3000):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        log(p.stdout[-6000:])
        raise SystemExit(f"FAILED ({p.returncode}, {dt:.1f} s): {' '.join(cmd)}")
    log(f"  ok {dt:7.1f} s  {' '.join(os.path.basename(c) if i == 0 else c for i, c in enumerate(cmd))}")
    return p.stdout


def pypi_reachable():
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    try:
        urllib.request.urlopen(index + "/scikit-build-core/", timeout=15).read(1)
        return True
    except Exception as e:  # noqa: BLE001
        log(f"PyPI ({index}) unreachable: {e}")
        return False


def clean_env():
    env = dict(os.environ)
    for k in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "COIL_INCLUDE_DIR", "COIL_EXECUTABLE",
              "COIL_CUDA_LIBRARY"):
        env.pop(k, None)
    return env


USE = r'''
import sys, numpy as np
import coil
data = np.load("io.npz")
m = coil.compile("model.onnx")
y = m(data["x"])
print(m)
print(y)
err = float(np.max(np.abs(y - data["want"])))
assert err < 1e-4, f"max abs error {err}"
assert coil.__file__.startswith(sys.prefix), (coil.__file__, sys.prefix)
print("max abs error", err)
'''


def check_env(venv, work, name):
    py = os.path.join(venv, "bin", "python")
    coil_cmd = os.path.join(venv, "bin", "coil")
    env = clean_env()
    env["COIL_CACHE_DIR"] = os.path.join(work, "cache-" + name)  # a cold compile cache
    outside = tempfile.mkdtemp(prefix=f"coil-{name}-", dir=work)
    shutil.copy(os.path.join(ROOT, "examples", "mlp.onnx"), os.path.join(outside, "model.onnx"))
    for f in ("io.npz", "inputs.npz"):
        shutil.copy(os.path.join(work, f), os.path.join(outside, f))
    version = run([coil_cmd, "--version"], cwd=outside, env=env).strip()
    if not version.startswith("coil "):
        raise SystemExit(f"coil --version printed {version!r}")
    log(f"    {version}")
    out = run([py, "-c", USE], cwd=outside, env=env)
    log("    " + out.strip().splitlines()[-1])
    run([coil_cmd, "compile", "model.onnx", "-o", "model.pkg"], cwd=outside, env=env)
    out = run([coil_cmd, "run", "model.pkg", "--inputs", "inputs.npz"], cwd=outside, env=env)
    if "probs: f32[4, 10]" not in out:
        raise SystemExit(f"coil run printed:\n{out}")
    files = run([py, "-c", "import coil, os; d = coil.cmake_dir(); "
                 "print(os.path.exists(os.path.join(d, 'coilConfig.cmake'))); "
                 "print(os.path.exists(os.path.join(coil.include_dir(), 'coil', 'compiler.h')))"],
                cwd=outside, env=env)
    if files.split() != ["True", "True"]:
        raise SystemExit(f"the installed CMake package or headers are missing: {files}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", required=True)
    ap.add_argument("--build-dir", required=True, help="scikit-build-core's build directory")
    ap.add_argument("--python", default=sys.executable, help="the Python to make venvs with")
    ap.add_argument("--cc", help="the C compiler of coil's own build (so that ccache serves the "
                    "wheel's build from it; scikit-build-core would take Python's, often another "
                    "name for the same compiler)")
    ap.add_argument("--cxx", help="the C++ compiler of coil's own build")
    args = ap.parse_args()
    if not pypi_reachable():
        return 77
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    t0 = time.perf_counter()

    # The reference outputs, from onnxruntime (this Python has it; the venvs need not).
    import onnxruntime as ort

    x = np.load(os.path.join(ROOT, "examples", "mlp_inputs.npz"))["x"]
    sess = ort.InferenceSession(os.path.join(ROOT, "examples", "mlp.onnx"),
                                providers=["CPUExecutionProvider"])
    np.savez(os.path.join(work, "io.npz"), x=x, want=sess.run(None, {"x": x})[0])
    np.savez(os.path.join(work, "inputs.npz"), x=x)

    build = ["-C", f"build-dir={os.path.abspath(args.build_dir)}"]
    for var, value in (("CMAKE_C_COMPILER", args.cc), ("CMAKE_CXX_COMPILER", args.cxx)):
        if value:
            build += ["-C", f"cmake.define.{var}={value}"]
    pip_env = clean_env()
    pip_env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    log("wheel:")
    venv0 = os.path.join(work, "venv-build")
    run([args.python, "-m", "venv", venv0])
    run([os.path.join(venv0, "bin", "pip"), "wheel", "--no-deps", "-w",
         os.path.join(work, "wheels"), ROOT] + build, env=pip_env)
    wheels = glob.glob(os.path.join(work, "wheels", "coil-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"pip wheel made {wheels}")
    log(f"    {os.path.basename(wheels[0])}: {os.path.getsize(wheels[0]) / 1e6:.1f} MB")

    log("venv 1: pip install <repo>")
    venv1 = os.path.join(work, "venv1")
    run([args.python, "-m", "venv", venv1])
    run([os.path.join(venv1, "bin", "pip"), "install", ROOT] + build, env=pip_env)
    check_env(venv1, work, "venv1")

    log("venv 2: pip install <wheel>")
    venv2 = os.path.join(work, "venv2")
    run([args.python, "-m", "venv", venv2])
    run([os.path.join(venv2, "bin", "pip"), "install", wheels[0]], env=pip_env)
    check_env(venv2, work, "venv2")
    log(f"install-wheel: ok in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
