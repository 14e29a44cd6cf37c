#!/usr/bin/env python3
"""The installed tree as a C or C++ user sees it (ctest `install-examples`, label install):
`cmake --install` into a fresh prefix, then examples/ built against it, with CMake
(find_package(coil): coil::runtime, coil::compiler) and with pkg-config (coil.pc), run on
packages that the installed `coil` compiles, their outputs checked against onnxruntime; and the
prefix moved elsewhere still compiles and runs (relocatable: $ORIGIN RPATHs, headers found
beside the compiler)."""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(cmd, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if p.returncode != 0:
        print(p.stdout[-4000:])
        raise SystemExit(f"FAILED ({p.returncode}): {' '.join(cmd)}")
    return p.stdout


def values(text, name="probs"):
    """The rows of numbers after the '<name>: ...' line."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith(name + ":"))
    rows = []
    for l in lines[start + 1:]:
        try:
            rows.append([float(v) for v in l.split()])
        except ValueError:
            break
    return np.array(rows, dtype=np.float64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True, help="coil's build directory")
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = {k: v for k, v in os.environ.items()
           if k not in ("COIL_INCLUDE_DIR", "COIL_EXECUTABLE", "COIL_CUDA_LIBRARY")}
    env["COIL_CACHE_DIR"] = os.path.join(work, "cache")
    prefix = os.path.join(work, "prefix")
    run(["cmake", "--install", args.build, "--prefix", prefix, "--component", "coil"])
    for f in ["bin/coil", "lib/libcoil_runtime.so", "lib/libcoil_compiler.so",
              "include/coil/coil.h", "include/coil/compiler.h", "lib/cmake/coil/coilConfig.cmake",
              "lib/pkgconfig/coil.pc"]:
        if not os.path.exists(os.path.join(prefix, f)):
            raise SystemExit(f"cmake --install did not install {f}")

    import onnxruntime as ort

    x = np.sin(0.1 * np.arange(4 * 16, dtype=np.float32)).reshape(4, 16)
    sess = ort.InferenceSession(os.path.join(ROOT, "examples", "mlp.onnx"),
                                providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]

    def check(what, out):
        got = values(out)
        if got.shape != want.shape:
            raise SystemExit(f"{what}: printed {got.shape} values, want {want.shape}:\n{out}")
        err = float(np.max(np.abs(got - want)))
        if err > 2e-6:  # printed with 6 decimals
            raise SystemExit(f"{what}: max abs error {err} against onnxruntime:\n{out}")
        print(f"ok {what}: max abs error {err:.2g}")

    # CMake: find_package(coil) from the installed prefix.
    ex = os.path.join(work, "examples-build")
    run(["cmake", "-S", os.path.join(ROOT, "examples"), "-B", ex, "-G", "Ninja",
         f"-Dcoil_DIR={prefix}/lib/cmake/coil"], env=env)
    run(["cmake", "--build", ex], env=env)
    model = os.path.join(ROOT, "examples", "mlp.onnx")
    pkg = os.path.join(work, "mlp.pkg")
    run([os.path.join(prefix, "bin", "coil"), "compile", model, "-o", pkg], env=env, cwd=work)
    check("C example (CMake, coil::runtime)", run([os.path.join(ex, "run_mlp"), pkg], env=env))
    check("C++ example (CMake, coil::compiler)",
          run([os.path.join(ex, "compile_and_run"), model, os.path.join(work, "mlp2.pkg")],
              env=env, cwd=work))

    # pkg-config: coil.pc, relocatable through ${pcfiledir}.
    pc_env = dict(env, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
    flags = run(["pkg-config", "--cflags", "--libs", "coil"], env=pc_env).split()
    exe = os.path.join(work, "run_mlp_pc")
    run(["cc", "-std=c11", os.path.join(ROOT, "examples", "c", "run_mlp.c")] + flags +
        ["-lm", "-o", exe], env=env)
    check("C example (pkg-config coil)", run([exe, pkg], env=env))

    # The prefix moved: its coil still finds its libraries and headers.
    moved = os.path.join(work, "moved")
    shutil.move(prefix, moved)
    pkg3 = os.path.join(work, "mlp3.pkg")
    out = run([os.path.join(moved, "bin", "coil"), "compile", model, "-o", pkg3, "-v"],
              env=env, cwd=work)
    if f"-I'{moved}/include'" not in out and f"-I{moved}/include" not in out:
        raise SystemExit(f"the moved coil did not compile with its own headers:\n{out}")
    out = run([os.path.join(moved, "bin", "coil"), "run", pkg3, "--inputs",
               os.path.join(ROOT, "examples", "mlp_inputs.npz")], env=env)
    if "probs: f32[4, 10]" not in out:
        raise SystemExit(f"the moved coil's run printed:\n{out}")
    print("ok moved prefix: compile with its own headers, run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
