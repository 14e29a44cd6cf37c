#!/usr/bin/env python3
"""Compiles every program of test/evt/corpus that `coil evt` accepts, as a complete GEMM program
(--emit-kernel), with nvcc and CUTLASS's headers (pip package nvidia-cutlass), for sm_90a and
sm_80, in parallel. A program counts as accepted only when it compiles: coil accepting a program
whose kernel does not compile is a failure (issue 15: epilogues whose shared memory left the
mainloop fewer than 2 stages were accepted). Each compile defines COIL_EVT_CHECK_SMEM_EXACT, so
the emitted static_asserts also check coil's shared-memory model (src/evt/EvtBudget.h) against
CUTLASS's types exactly. Compiles only (-c): running them is scripts/evt-gpu-check.sh's job.

usage: compile_corpus.py --coil BIN [--work DIR] [--jobs N] [--only a,b] [--sample N]
                         [--archs sm90,sm80]
--sample N compiles N programs (a fixed spread over the corpus, for ctest); the default is all.
Prints a table and the time of each compile; exit 0 when every accepted program compiles,
77 when nvcc or CUTLASS is missing (skipped).

nvcc on CUTLASS is slow: about 40-80 s of one core per program and arch here, so the whole
corpus (about 64 programs x 2 archs) takes about 1.5 hours on a 2-core machine and a few
minutes on 16 cores. Measured times are in test/evt/README.md.
"""
import argparse
import concurrent.futures
import os
import re
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_corpus import DEFAULT_ARGS, cutlass_dirs, parse_header  # noqa: E402

ARCH_FLAGS = {"sm90": "sm_90a", "sm80": "sm_80"}


def find_nvcc():
    out = subprocess.run(["bash", "-c", "command -v nvcc || ls /usr/local/cuda/bin/nvcc"],
                         capture_output=True, text=True).stdout.strip().splitlines()
    return out[0] if out else None


def emit(coil, path, arch, work):
    """Emits the kernel program; returns (cu path or None, coil's message)."""
    _, extra = parse_header(path)
    args = extra if "--shape" in extra else DEFAULT_ARGS + extra
    name = os.path.basename(path)[:-3]
    cu = os.path.join(work, f"{name}.{arch}.cu")
    r = subprocess.run([coil, "evt", path, "--arch", arch, "--emit-kernel", "-o", cu] + args,
                       capture_output=True, text=True)
    return (cu if r.returncode == 0 else None), r.stderr.strip()


def compile_one(nvcc, dirs, cu, arch):
    cmd = ["nice", "-n", "19", nvcc, "-std=c++17", f"-arch={ARCH_FLAGS[arch]}",
           "--expt-relaxed-constexpr", "-DNDEBUG", "-DCOIL_EVT_CHECK_SMEM_EXACT", "-O1", "-c",
           "-x", "cu", cu, "-o", cu + ".o"] + [f"-I{d}" for d in dirs]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode == 0, time.perf_counter() - t0, r.stderr


def first_error(text):
    for line in text.splitlines():
        if "error" in line:
            return line.strip()[:300]
    return text.strip()[-300:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coil", required=True)
    ap.add_argument("--corpus", default=os.path.join(HERE, "corpus"))
    ap.add_argument("--work", default="/tmp/coil-evt-compile")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--only", default="")
    ap.add_argument("--sample", type=int, default=0)
    ap.add_argument("--archs", default="sm90,sm80")
    a = ap.parse_args()
    dirs, nvcc = cutlass_dirs(), find_nvcc()
    if not dirs or not nvcc:
        print("compile_corpus: skipped (" + ("CUTLASS headers not found; pip install nvidia-cutlass"
                                             if not dirs else "nvcc not found") + ")")
        return 77
    os.makedirs(a.work, exist_ok=True)
    progs = sorted(p for p in os.listdir(a.corpus) if p.endswith(".py"))
    if a.only:
        keep = set(a.only.split(","))
        progs = [p for p in progs if p[:-3] in keep]
    archs = a.archs.split(",")
    jobs = []  # (program, arch, cu)
    rejected = 0
    for prog in progs:
        for arch in archs:
            cu, msg = emit(a.coil, os.path.join(a.corpus, prog), arch, a.work)
            if cu:
                jobs.append((prog[:-3], arch, cu))
            else:
                rejected += 1
    if a.sample and a.sample < len(jobs):  # a fixed spread: every k-th job
        step = len(jobs) / a.sample
        jobs = [jobs[int(i * step)] for i in range(a.sample)]
    print(f"compile_corpus: {len(jobs)} accepted program/arch pairs to compile with {nvcc} "
          f"({a.jobs} at a time; {rejected} rejected by coil, not compiled)", flush=True)
    t0 = time.perf_counter()
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as ex:
        futs = {ex.submit(compile_one, nvcc, dirs, cu, arch): (name, arch) for name, arch, cu in jobs}
        for f in concurrent.futures.as_completed(futs):
            name, arch = futs[f]
            ok, secs, err = f.result()
            results[(name, arch)] = (ok, secs, err)
            print(f"  {'compiled' if ok else 'DOES NOT COMPILE':<16} {name} {arch} ({secs:.0f} s)"
                  + ("" if ok else ": " + first_error(err)), flush=True)
    wall = time.perf_counter() - t0
    bad = sorted(k for k, v in results.items() if not v[0])
    secs = sorted(v[1] for v in results.values())
    if secs:
        print(f"compile_corpus: {len(results) - len(bad)} of {len(results)} compiled in {wall:.0f} s "
              f"wall; per compile median {secs[len(secs) // 2]:.0f} s, max {secs[-1]:.0f} s, "
              f"total {sum(secs):.0f} s of one core")
    for name, arch in bad:
        print(f"\nFAIL {name} [{arch}]:\n{results[(name, arch)][2][-3000:]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
