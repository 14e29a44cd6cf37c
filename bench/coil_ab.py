#!/usr/bin/env python3
"""Two coil builds side by side on the model zoo (CPU): is a compiler change faster?

For each zoo model (test/zoo/manifest.json; --models a,b narrows it) at the sizes of
bench/cpu_vs_ort.py --zoo (default batch=4,seq=32): compile it with build A and with build B,
check that both packages' outputs agree with onnxruntime's (the manifest's tolerance), then time
them with `coil bench --json` in R interleaved rounds (A then B in even rounds, B then A in odd
ones, so neither always runs second), each at least --min-ms milliseconds. Prints per model the
medians over rounds and the median of the per-round ratios B / A (lower: B is faster) with their
range, then the geomean. A build is a coil binary; its runtime library is taken from ../lib next
to it when that exists (LD_LIBRARY_PATH), so that a copy of an older build can be compared with
the current one. OMP_NUM_THREADS is the CPU count for both (or --threads).

usage: bench/coil_ab.py --a BIN --b BIN [--models a,b] [--zoo-sizes ...] [--rounds R]
                        [--min-ms MS] [--threads N] [--work DIR]
"""
import argparse
import json
import math
import os
import subprocess
import sys

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cpu_vs_ort import ZOO_SIZES, ort_session, zoo_cases  # noqa: E402


def env_for(binary, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    lib = os.path.join(os.path.dirname(os.path.abspath(binary)), "..", "lib")
    if os.path.exists(os.path.join(lib, "libcoil_runtime.so")):
        env["LD_LIBRARY_PATH"] = os.path.abspath(lib) + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env


def bench(binary, env, pkg, inp, iters):
    r = subprocess.run([binary, "bench", pkg, "--inputs", inp, "--iters", str(iters), "--warmup", "5", "--json"],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError("coil bench failed: " + r.stderr.strip()[:300])
    return json.loads(r.stdout.strip().splitlines()[-1])["median_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--a", required=True, help="coil binary of build A (the reference)")
    ap.add_argument("--b", required=True, help="coil binary of build B (the change)")
    ap.add_argument("--models")
    ap.add_argument("--zoo-sizes", default=ZOO_SIZES)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-ms", type=float, default=100.0)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--work", default="/tmp/coil-bench-ab")
    ap.add_argument("--cpu-target", default="",
                    help="coil compile --cpu-target for both builds (default: none, each build's "
                    "default, as bench/cpu_vs_ort.py)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    cases = zoo_cases(args.models.split(",") if args.models else None, args.zoo_sizes)
    builds = [("A", args.a, env_for(args.a, args.threads)), ("B", args.b, env_for(args.b, args.threads))]
    load_start = os.getloadavg()
    rows, status = [], 0
    for name, path, feeds, tolerance, size_text in cases:
        inp = os.path.join(args.work, name + "_in.npz")
        np.savez(inp, **feeds)
        want = ort_session(path, 1).run(None, feeds)
        names = [o.name for o in onnx.load(path).graph.output]
        pkgs = {}
        try:
            for tag, binary, env in builds:
                pkg = os.path.join(args.work, "%s.%s.pkg" % (name, tag))
                out = os.path.join(args.work, "%s.%s_out.npz" % (name, tag))
                for cmd in ([binary, "compile", path, "-o", pkg] + (["--cpu-target", args.cpu_target] if args.cpu_target else []), [binary, "run", pkg, "--inputs", inp, "--outputs", out]):
                    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
                    if r.returncode != 0:
                        raise RuntimeError("%s: %s failed: %s" % (tag, cmd[1], r.stderr.strip()[:300]))
                got = np.load(out)
                err = 0.0
                for k, w in zip(names, want):
                    if w.size:
                        scale = float(np.max(np.abs(w))) or 1.0
                        err = max(err, float(np.max(np.abs(got[k].astype(np.float64) - w))) / scale)
                if not err <= tolerance:
                    raise RuntimeError("%s: outputs differ from onnxruntime (%.2e)" % (tag, err))
                pkgs[tag] = pkg
            est = bench(args.a, builds[0][2], pkgs["A"], inp, 20)
            iters = max(20, min(5000, int(args.min_ms / max(est, 1e-3))))
            times = {"A": [], "B": []}
            for rnd in range(args.rounds):
                order = builds if rnd % 2 == 0 else builds[::-1]
                for tag, binary, env in order:
                    times[tag].append(bench(binary, env, pkgs[tag], inp, iters))
        except RuntimeError as e:
            print("%s: %s" % (name, e))
            status = 1
            continue
        ratios = [b / a for a, b in zip(times["A"], times["B"])]
        rows.append((name, float(np.median(times["A"])), float(np.median(times["B"])), float(np.median(ratios)),
                     min(ratios), max(ratios)))
        print("%-26s A %8.3f ms  B %8.3f ms  B/A %5.2f (%.2f-%.2f)" % rows[-1], flush=True)
    load = os.getloadavg()
    print("\nthreads %d, zoo sizes %s, %d rounds, at least %.0f ms per build and round, load average (1 min) "
          "%.1f at the start, %.1f at the end" % (args.threads, args.zoo_sizes, args.rounds, args.min_ms, load_start[0],
                                                  load[0]))
    if rows:
        gm = math.exp(sum(math.log(r[3]) for r in rows) / len(rows))
        print("geomean B/A %.3f over %d models; B faster by >5%%: %d, slower by >5%%: %d" % (
            gm, len(rows), sum(r[3] < 0.95 for r in rows), sum(r[3] > 1.05 for r in rows)))
    return status


if __name__ == "__main__":
    sys.exit(main())
