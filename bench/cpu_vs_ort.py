#!/usr/bin/env python3
"""coil's CPU packages against onnxruntime (CPU execution provider), side by side.

For each model of test/models, at one size of its dynamic dims: compile with `coil compile`,
time the package with `coil bench --json` (median of N runs after warm-up), and time
onnxruntime in this process with the same number of threads (intra-op = the CPU count, one
inter-op thread), median of N runs after warm-up. The outputs are compared first (relative
error <= 1e-4), so a fast wrong answer never counts. Prints one row per model with both medians
and the ratio coil / onnxruntime (lower is better; the target is <= 1.5).

With --rounds R, the timing (coil, then onnxruntime) repeats R times, interleaved, and the row
shows the medians over rounds, the median of the per-round ratios and their range (the spread on
a shared, noisy machine).

usage: bench/cpu_vs_ort.py --coil BIN [--work DIR] [--models a,b] [--iters N] [--rounds R]
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS_DIR = os.path.join(HERE, "..", "test", "models")
sys.path.insert(0, MODELS_DIR)
from check_models import make_inputs  # noqa: E402

SIZES = {"batch": 4, "seq": 32}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coil", required=True)
    ap.add_argument("--work", default="/tmp/coil-bench-cpu")
    ap.add_argument("--models", default="resnet_small,mobilenet_v2,bert_small,gpt_small")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--cpu-target", default="x86-64-v3",
                    help="coil compile --cpu-target (default x86-64-v3, what coil chose on an "
                    "AVX2 machine before the portable x86-64-v2 default; 'native' for this CPU)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="interleaved rounds of coil then onnxruntime; medians over rounds, "
                         "with the spread of the per-round ratios")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    threads = os.cpu_count() or 1
    rng = np.random.default_rng(7)
    rows = []
    status = 0
    for name in args.models.split(","):
        path = os.path.join(MODELS_DIR, name + ".onnx")
        model = onnx.load(path)
        feeds = make_inputs(model, SIZES, rng)
        inp = os.path.join(args.work, name + "_in.npz")
        out = os.path.join(args.work, name + "_out.npz")
        np.savez(inp, **feeds)
        pkg = os.path.join(args.work, name + ".pkg")
        r = subprocess.run([args.coil, "compile", path, "-o", pkg, "--cpu-target", args.cpu_target],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print("%s: coil compile failed: %s" % (name, r.stderr.strip()[:400]))
            status = 1
            continue
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        want = sess.run(None, feeds)
        r = subprocess.run([args.coil, "run", pkg, "--inputs", inp, "--outputs", out], capture_output=True, text=True)
        if r.returncode != 0:
            print("%s: coil run failed: %s" % (name, r.stderr.strip()[:400]))
            status = 1
            continue
        got = np.load(out)
        err = 0.0
        for o, w in zip(model.graph.output, want):
            scale = float(np.max(np.abs(w))) or 1.0
            err = max(err, float(np.max(np.abs(got[o.name].astype(np.float64) - w))) / scale)
        if err > 1e-4:
            print("%s: outputs differ from onnxruntime (relative error %.2e); not timed" % (name, err))
            status = 1
            continue
        # Rounds of (coil, onnxruntime), interleaved so that both see the same load on a shared
        # machine; each round's ratio is its two medians'. coil first in each round:
        # onnxruntime's intra-op threads keep spinning for a while after its runs and would
        # steal the cores from the package that runs next (hence also the pause after them).
        coil_r, ort_r = [], []
        for _ in range(args.rounds):
            r = subprocess.run([args.coil, "bench", pkg, "--inputs", inp, "--iters", str(args.iters), "--json"],
                               capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
            if r.returncode != 0:
                print("%s: coil bench failed: %s" % (name, r.stderr.strip()[:400]))
                status = 1
                break
            coil_r.append(json.loads(r.stdout.strip().splitlines()[-1])["median_ms"])
            for _ in range(5):
                sess.run(None, feeds)
            times = []
            for _ in range(args.iters):
                t0 = time.perf_counter()
                sess.run(None, feeds)
                times.append((time.perf_counter() - t0) * 1e3)
            ort_r.append(float(np.median(times)))
            time.sleep(0.2)
        if len(coil_r) < args.rounds:
            continue
        rows.append((name, coil_r, ort_r, err))
        del sess  # stop its thread pool before the next package runs
        time.sleep(0.5)
    print("\nthreads %d, sizes %s, %d iterations x %d rounds, onnxruntime %s"
          % (threads, SIZES, args.iters, args.rounds, ort.__version__))
    print("%-14s %10s %10s %8s %15s %10s" % ("model", "coil ms", "ort ms", "ratio", "ratio min-max", "rel err"))
    for name, c, o, e in rows:
        ratios = [a / b for a, b in zip(c, o)]
        print("%-14s %10.3f %10.3f %8.2f %7.2f-%-7.2f %10.1e"
              % (name, np.median(c), np.median(o), np.median(ratios), min(ratios), max(ratios), e))
    return status


if __name__ == "__main__":
    sys.exit(main())
