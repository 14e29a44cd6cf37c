#!/usr/bin/env python3
"""GEMM + epilogue fusion (sched/FuseGemmEpilogue.h) on the models of make_models.py.

  --mode inspect  `coil inspect --fusion --device cuda --arch sm_90a --gemm cutlass`: each GEMM's
                  decision (CUTLASS, or cuBLASLt and why) is the one EXPECT names (no GPU, no nvcc);
  --mode compile  also `coil compile` every model (no tuning; COIL_CUTLASS_CONFIGS, default 1, CUTLASS
                  configs per GEMM): the generated CUTLASS units compile with nvcc and link;
  --mode verify   on the GPU: `coil verify` every model (random inputs, B = 3: 600 rows), the
                  packages tuned over every config, against the reference interpreter, with
                  --gemm cutlass and, as the baseline, --gemm cublaslt.

usage: check.py --coil BIN --work DIR [--mode inspect|compile|verify] [--models a,b] [-j N]
"""
import argparse
import concurrent.futures
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_models  # noqa: E402

CUDA = ["--device", "cuda", "--arch", "sm_90a"]


def run(cmd, env=None, timeout=1800):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def check_one(args, name):
    path = os.path.join(args.work, "models", name + ".onnx")
    problems = []
    rc, out = run([args.coil, "inspect", path, "--fusion", "--gemm", "cutlass"] + CUDA)
    if rc != 0:
        return name, ["inspect exit %d: %s" % (rc, out.strip()[-800:])], ""
    notes = [l for l in out.splitlines() if l.startswith("gemm: ")]
    want = make_models.EXPECT[name]
    if len(notes) != len(want) or any(w not in n for w, n in zip(want, notes)):
        problems.append("fusion decisions %s, expected %s" % (notes, want))
    detail = "; ".join(n[len("gemm: "):] for n in notes)
    env = dict(os.environ)
    if args.mode == "compile":
        env.setdefault("COIL_CUTLASS_CONFIGS", "1")
        env["COIL_TUNE"] = "0"
        pkg = os.path.join(args.work, "pkg", name)
        rc, out = run([args.coil, "compile", path, "-o", pkg, "--gemm", "cutlass"] + CUDA, env)
        if rc != 0:
            problems.append("compile exit %d: %s" % (rc, out.strip()[-1500:]))
    if args.mode == "verify":
        for gemm in ("cutlass", "cublaslt"):
            rc, out = run([args.coil, "verify", path, "--gemm", gemm] + CUDA, env)
            last = out.strip().splitlines()[-3:] if out.strip() else []
            detail += "\n    verify --gemm %s: exit %d: %s" % (gemm, rc, " | ".join(last))
            if rc != 0:
                problems.append("verify --gemm %s exit %d: %s" % (gemm, rc, out.strip()[-1500:]))
    return name, problems, detail


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coil", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--mode", choices=["inspect", "compile", "verify"], default="inspect")
    ap.add_argument("--models")
    ap.add_argument("-j", type=int, default=1)
    args = ap.parse_args()
    have = os.environ.get("COIL_CUTLASS_DIR") or subprocess.run(
        [sys.executable, "-c", "import cutlass_library"], capture_output=True).returncode == 0
    if not have:
        print("skipped: no CUTLASS headers (pip install nvidia-cutlass, or set COIL_CUTLASS_DIR)")
        return 77
    os.makedirs(os.path.join(args.work, "models"), exist_ok=True)
    names = args.models.split(",") if args.models else list(make_models.EXPECT)
    for n in names:
        if n not in make_models.EXPECT:
            sys.exit("unknown model %s (known: %s)" % (n, ", ".join(make_models.EXPECT)))
        make_models.onnx.save(make_models.build(n), os.path.join(args.work, "models", n + ".onnx"))
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.j)) as ex:
        for name, problems, detail in ex.map(lambda n: check_one(args, n), names):
            print("%-22s %s  %s" % (name, "FAIL" if problems else "ok", detail), flush=True)
            for p in problems:
                print("    " + p.replace("\n", "\n    "))
            failed += bool(problems)
    print("%d of %d models %s" % (len(names) - failed, len(names), "pass" if not failed else "pass; FAILED"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
