#!/usr/bin/env python3
"""coil's CPU packages against onnxruntime (CPU execution provider), side by side.

Two sets of models:
  * test/models (the default set; --models a,b chooses), at batch 4, seq 32;
  * --zoo: the model zoo (test/zoo/manifest.json; --models a,b narrows it), at the sizes of
    --zoo-sizes: `stored` (the zoo's own inputs, test/zoo/data/NAME_in.npz: batch 1-2 and
    seq 16, where most models run in 20-200 us and launch overhead dominates) or
    `NAME=V,...` (each dynamic dim NAME of a model set to V, inputs drawn as test/zoo/check.py
    draws them; dims not named keep their stored size). The default, batch=4,seq=32, is a
    realistic small batch: 4 images or 4 sequences of 32 tokens (the zoo's RoBERTa has 64
    positions, so longer sequences do not fit every model).

For each model: compile with `coil compile`, run the package once and compare its outputs with
onnxruntime's on the same inputs (max |coil - ort| / max |ort| <= 1e-4 for test/models, the
manifest's tolerance for the zoo), so a fast wrong answer never counts; then time it. Timing:
R rounds (--rounds), each `coil bench --json` (median of N runs after warm-up, in a process of
its own with OMP_NUM_THREADS = the CPU count) followed by onnxruntime in this process (intra-op
threads = the CPU count, one inter-op thread; median of N runs after warm-up). coil and
onnxruntime are interleaved, so that both see the same load on a shared machine; only their
ratios within a round are compared. N is --iters, raised for fast models so that each side
runs at least --min-ms milliseconds per round.

Prints one row per model: the medians over rounds of both medians, the median of the per-round
ratios coil / onnxruntime (lower is better) with their range, and the error; then the geomean
of the per-model ratios (and of the per-round minimum and maximum). --md FILE writes the same
table as Markdown.

usage: bench/cpu_vs_ort.py --coil BIN [--zoo] [--models a,b] [--zoo-sizes stored|NAME=V,...]
                           [--iters N] [--rounds R] [--min-ms MS] [--work DIR] [--md FILE]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS_DIR = os.path.join(HERE, "..", "test", "models")
ZOO_DIR = os.path.join(HERE, "..", "test", "zoo")
sys.path.insert(0, MODELS_DIR)
sys.path.insert(0, ZOO_DIR)
from check_models import make_inputs  # noqa: E402

SIZES = {"batch": 4, "seq": 32}
ZOO_SIZES = "batch=4,seq=32"
MODELS_TOLERANCE = 1e-4


def zoo_cases(names, sizes_spec):
    """(name, path, feeds, tolerance, size text) for the zoo models `names` (None: all)."""
    import check as zoo  # test/zoo/check.py

    manifest = zoo.load_manifest()
    names = names or sorted(manifest)
    want = {}
    if sizes_spec != "stored":
        for kv in sizes_spec.split(","):
            k, _, v = kv.partition("=")
            want[k.strip()] = int(v)
    cases = []
    for name in names:
        if name not in manifest:
            raise SystemExit("--models: no zoo model '%s'" % name)
        entry = manifest[name]
        path = os.path.join(ZOO_DIR, "models", name + ".onnx")
        stored = np.load(os.path.join(ZOO_DIR, "data", name + "_in.npz"))
        feeds = {k: stored[k] for k in stored.files}
        dyn = {d: v for d, v in entry["dynamic"].items() if v}
        use = {d: want[d] for d in dyn if d in want}
        if use:
            # Every dynamic dim at its requested size, the others at their stored sizes.
            sizes = {d: v[0] for d, v in dyn.items()}
            sizes.update(use)
            feeds = zoo.draw_inputs(entry, sizes, np.random.default_rng(zoo.seed_of(name)))
        else:
            sizes = {d: v[0] for d, v in dyn.items()}
        text = ",".join("%s=%d" % kv for kv in sorted(sizes.items())) or "static"
        cases.append((name, path, feeds, entry["tolerance"], text))
    return cases


def model_cases(names):
    rng = np.random.default_rng(7)
    cases = []
    for name in names:
        path = os.path.join(MODELS_DIR, name + ".onnx")
        feeds = make_inputs(onnx.load(path), SIZES, rng)
        cases.append((name, path, feeds, MODELS_TOLERANCE, ",".join("%s=%d" % kv for kv in sorted(SIZES.items()))))
    return cases


def ort_session(path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def time_ort(sess, feeds, iters):
    for _ in range(5):
        sess.run(None, feeds)
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--coil", required=True)
    ap.add_argument("--work", default="/tmp/coil-bench-cpu")
    ap.add_argument("--zoo", action="store_true", help="the model zoo (test/zoo) instead of test/models")
    ap.add_argument("--models", help="comma-separated names (default: resnet_small,mobilenet_v2,bert_small,"
                                     "gpt_small; with --zoo the whole zoo)")
    ap.add_argument("--zoo-sizes", default=ZOO_SIZES,
                    help="'stored' or NAME=V,... for the zoo's dynamic dims (default %s)" % ZOO_SIZES)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--cpu-target", default="",
                    help="coil compile --cpu-target (default: none, coil's default: x86-64-v2 with "
                    "a copy of the kernels for this CPU's level; tables before 2026-12-05 used "
                    "x86-64-v3)")
    ap.add_argument("--min-ms", type=float, default=100.0,
                    help="raise the iterations so that each side times at least this long per round")
    ap.add_argument("--rounds", type=int, default=1,
                    help="interleaved rounds of coil then onnxruntime; medians over rounds, "
                         "with the spread of the per-round ratios")
    ap.add_argument("--md", help="also write the table as Markdown to this file")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    threads = os.cpu_count() or 1
    if args.zoo:
        cases = zoo_cases(args.models.split(",") if args.models else None, args.zoo_sizes)
    else:
        cases = model_cases((args.models or "resnet_small,mobilenet_v2,bert_small,gpt_small").split(","))
    rows = []
    status = 0
    t_start = time.monotonic()
    load_start = os.getloadavg()
    for name, path, feeds, tolerance, size_text in cases:
        model = onnx.load(path)
        inp = os.path.join(args.work, name + "_in.npz")
        out = os.path.join(args.work, name + "_out.npz")
        np.savez(inp, **feeds)
        pkg = os.path.join(args.work, name + ".pkg")
        target = ["--cpu-target", args.cpu_target] if args.cpu_target else []
        r = subprocess.run([args.coil, "compile", path, "-o", pkg] + target,
                           capture_output=True, text=True)
        if r.returncode != 0:
            print("%s: coil compile failed: %s" % (name, r.stderr.strip()[:400]))
            status = 1
            continue
        sess = ort_session(path, threads)
        try:
            want = sess.run(None, feeds)
        except Exception as e:  # noqa: BLE001 - inputs the model cannot take: say so, skip it
            print("%s: onnxruntime fails on these inputs: %s" % (name, str(e).strip()[:300]))
            status = 1
            continue
        if os.path.exists(out):
            os.remove(out)
        r = subprocess.run([args.coil, "run", pkg, "--inputs", inp, "--outputs", out], capture_output=True, text=True)
        if r.returncode != 0:
            print("%s: coil run failed: %s" % (name, r.stderr.strip()[:400]))
            status = 1
            continue
        got = np.load(out)
        err = 0.0
        for o, w in zip(model.graph.output, want):
            scale = float(np.max(np.abs(w))) or 1.0
            err = max(err, float(np.max(np.abs(got[o.name].astype(np.float64) - w))) / scale) if w.size else err
        if not err <= tolerance:
            print("%s: outputs differ from onnxruntime (relative error %.2e > %.0e); not timed" % (name, err, tolerance))
            status = 1
            continue
        # Iterations: enough for --min-ms per side and round, from a first estimate of
        # onnxruntime's time.
        t0 = time.perf_counter()
        for _ in range(3):
            sess.run(None, feeds)
        est = (time.perf_counter() - t0) * 1e3 / 3
        iters = max(args.iters, min(5000, int(args.min_ms / max(est, 1e-3))))
        # Rounds of (coil, onnxruntime), interleaved so that both see the same load on a shared
        # machine; each round's ratio is its two medians'. coil first in each round:
        # onnxruntime's intra-op threads keep spinning for a while after its runs and would
        # steal the cores from the package that runs next (hence also the pause after them).
        coil_r, ort_r = [], []
        for _ in range(args.rounds):
            r = subprocess.run([args.coil, "bench", pkg, "--inputs", inp, "--iters", str(iters), "--warmup", "5",
                                "--json"],
                               capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
            if r.returncode != 0:
                print("%s: coil bench failed: %s" % (name, r.stderr.strip()[:400]))
                status = 1
                break
            coil_r.append(json.loads(r.stdout.strip().splitlines()[-1])["median_ms"])
            ort_r.append(time_ort(sess, feeds, iters))
            time.sleep(0.2)
        del sess  # stop its thread pool before the next package runs
        time.sleep(0.5)
        if len(coil_r) < args.rounds:
            continue
        ratios = [a / b for a, b in zip(coil_r, ort_r)]
        rows.append((name, size_text, float(np.median(coil_r)), float(np.median(ort_r)), float(np.median(ratios)),
                     min(ratios), max(ratios), err, iters))
        print("%-26s %9.3f %9.3f %6.2f  (%s)" % (name, rows[-1][2], rows[-1][3], rows[-1][4], size_text), flush=True)
    load = os.getloadavg()
    head = ("threads %d, %s, cpu target %s, iterations >= %d (at least %.0f ms per side and round) x %d rounds, "
            "onnxruntime %s, load average (1 min) %.1f at the start, %.1f at the end, %.0f s"
            % (threads, "zoo sizes " + args.zoo_sizes if args.zoo else "sizes %s" % SIZES,
               args.cpu_target or "default", args.iters, args.min_ms,
               args.rounds, ort.__version__, load_start[0], load[0], time.monotonic() - t_start))
    print("\n" + head)
    print("%-26s %-30s %10s %10s %8s %15s %10s" % ("model", "sizes", "coil ms", "ort ms", "ratio", "ratio min-max",
                                                   "rel err"))
    for name, sz, c, o, rt, lo, hi, e, _ in rows:
        print("%-26s %-30s %10.3f %10.3f %8.2f %7.2f-%-7.2f %10.1e" % (name, sz, c, o, rt, lo, hi, e))
    if rows:
        gm = geomean([r[4] for r in rows])
        print("%-26s %-30s %10s %10s %8.2f %7.2f-%-7.2f   (%d models; above 1.5: %s)" % (
            "geomean", "", "", "", gm, geomean([r[5] for r in rows]), geomean([r[6] for r in rows]), len(rows),
            ", ".join(r[0] for r in rows if r[4] > 1.5) or "none"))
        worst = sorted(rows, key=lambda r: -r[4])[:5]
        print("worst: " + ", ".join("%s %.2f" % (r[0], r[4]) for r in worst))
    if args.md:
        with open(args.md, "w") as f:
            f.write(head + "\n\n")
            f.write("| model | sizes | coil ms | ort ms | coil / ort | range over rounds | rel err |\n")
            f.write("|---|---|---|---|---|---|---|\n")
            for name, sz, c, o, rt, lo, hi, e, _ in rows:
                f.write("| %s | %s | %.3f | %.3f | %.2f | %.2f-%.2f | %.1e |\n" % (name, sz, c, o, rt, lo, hi, e))
            if rows:
                f.write("| **geomean** | | | | **%.2f** | %.2f-%.2f | |\n" % (
                    gm, geomean([r[5] for r in rows]), geomean([r[6] for r in rows])))
                f.write("\nAbove 1.5: %s. Worst: %s.\n" % (
                    ", ".join(r[0] for r in rows if r[4] > 1.5) or "none",
                    ", ".join("%s %.2f" % (r[0], r[4]) for r in worst)))
    if len(rows) < len(cases):
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
