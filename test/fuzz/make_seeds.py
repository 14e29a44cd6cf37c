#!/usr/bin/env python3
"""Writes the committed seed corpora of the fuzz targets, test/fuzz/corpus/<target>/.

usage: make_seeds.py --coil build/bin/coil [--out test/fuzz/corpus]

- onnx: the ONNX backend node-test models of the installed onnx (at most 3 tests per op, 4 KB
  each; generated with onnx's own test-case code) and the repository's small models (< 20 KB).
- text: those models as coil's text format (`coil inspect --graph`, at most 4 KB), plus
  test/ir/*.coil.
- npz: a third of the node tests' input archives (< 4 KB) as numpy writes them (a quarter of
  those compressed), and
  one written by coil (`coil interpret --outputs`).
- metadata: metadata.json of packages compiled from a few small models (CPU), one body without
  its integrity record, and one with device "cuda" and a cuda object (the CUDA fields).
- evt: test/evt/corpus/*.py.
- plans: plans files (`coil inspect --plans`, schedule and plans) of a few small programs, for the
  CPU and CUDA planners: rows with vectors and registers, window rows, flat and dim-vectorized
  pointwise kernels, a split reduction.
Seeds are named by the SHA-1 of their contents, as libFuzzer names corpus files. Deterministic
for a given onnx version; the committed total stays under 2 MB.
"""
import argparse
import glob
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGETS = ("onnx", "text", "npz", "metadata", "evt", "plans")


def put(out, target, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def node_tests():
    from onnx.backend.test.case import node as node_cases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return node_cases.collect_testcases(None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coil", required=True)
    ap.add_argument("--out", default=os.path.join(ROOT, "test", "fuzz", "corpus"))
    args = ap.parse_args()
    for t in TARGETS:
        shutil.rmtree(os.path.join(args.out, t), ignore_errors=True)
    tmp = tempfile.mkdtemp(prefix="coil-seeds-")

    # onnx and npz from the node tests
    models = []
    per_op = {}
    for c in sorted(node_tests(), key=lambda c: c.name):
        data = c.model.SerializeToString()
        ops = tuple(sorted({n.op_type for n in c.model.graph.node}))
        if len(data) > 4096 or per_op.get(ops, 0) >= 3:  # at most 3 tests per op (set)
            continue
        per_op[ops] = per_op.get(ops, 0) + 1
        put(args.out, "onnx", data)
        path = os.path.join(tmp, c.name + ".onnx")
        with open(path, "wb") as f:
            f.write(data)
        models.append(path)
        g = c.model.graph
        for inputs, _ in c.data_sets[:1]:
            try:
                arrays = {g.input[j].name: np.asarray(x) for j, x in enumerate(inputs)}
                if any(a.dtype.kind in "OUS" for a in arrays.values()):
                    continue
                buf = io.BytesIO()
                (np.savez_compressed if len(models) % 4 == 0 else np.savez)(buf, **arrays)
                if len(buf.getvalue()) <= 4096 and len(models) % 3 == 0:
                    put(args.out, "npz", buf.getvalue())
            except Exception:
                pass
    for path in sorted(glob.glob(os.path.join(ROOT, "test", "**", "*.onnx"), recursive=True)) + \
            [os.path.join(ROOT, "examples", "mlp.onnx")]:
        if os.path.getsize(path) < 20000:
            put(args.out, "onnx", open(path, "rb").read())
            models.append(path)

    # text: the models in coil's text format
    for path in models:
        r = subprocess.run([args.coil, "inspect", path, "--graph"], capture_output=True, timeout=60)
        if r.returncode == 0 and len(r.stdout) <= 4096:
            put(args.out, "text", r.stdout)
    for path in sorted(glob.glob(os.path.join(ROOT, "test", "ir", "*.coil"))):
        put(args.out, "text", open(path, "rb").read())

    arr = os.path.join(tmp, "coil.npz")
    mlp = os.path.join(ROOT, "examples", "mlp.onnx")

    # metadata: packages of a few small models
    small = [mlp] + sorted(glob.glob(os.path.join(ROOT, "test", "regressions", "*.onnx")))[:3]
    for c in node_tests():
        if c.name in ("test_nonzero_example", "test_topk", "test_gather_0", "test_conv_with_strides_padding",
                      "test_softmax_axis_1", "test_einsum_batch_matmul", "test_lstm_defaults"):
            p = os.path.join(tmp, c.name + ".onnx")
            with open(p, "wb") as f:
                f.write(c.model.SerializeToString())
            small.append(p)
    for i, path in enumerate(small):
        pkg = os.path.join(tmp, "p%d.pkg" % i)
        r = subprocess.run([args.coil, "compile", path, "-o", pkg], capture_output=True, timeout=600)
        if r.returncode != 0:
            print("make_seeds: cannot compile %s: %s" % (path, r.stderr.decode()[-300:]), file=sys.stderr)
            continue
        meta = open(os.path.join(pkg, "metadata.json"), "rb").read()
        put(args.out, "metadata", meta)
        if i == 0:  # the body alone (unsealed) and a CUDA variant of it
            sep = b',\n  "integrity": '
            body = meta[:meta.rfind(sep)] + b"\n}\n"
            put(args.out, "metadata", body)
            doc = json.loads(body)
            doc["device"] = "cuda"
            doc["cuda"] = {"fatbin": "kernels.fatbin", "functions": ["k0_c0", "k1_c0"],
                           "archs": ["sm_80", "sm_90a"], "host_fallback": False,
                           "workspace_bytes": 0}
            put(args.out, "metadata", (json.dumps(doc, indent=2) + "\n").encode())

    # npz: coil's own writer (the outputs of `coil interpret` on the mlp)
    x = np.random.default_rng(0).standard_normal((2, 16)).astype(np.float32)
    np.savez(arr, x=x)
    out = os.path.join(tmp, "out.npz")
    r = subprocess.run([args.coil, "interpret", mlp, "--inputs", arr, "--outputs", out],
                       capture_output=True, timeout=60)
    if r.returncode == 0:
        put(args.out, "npz", open(out, "rb").read())
    else:
        print("make_seeds: coil interpret failed: " + r.stderr.decode()[-300:], file=sys.stderr)

    for path in sorted(glob.glob(os.path.join(ROOT, "test", "evt", "corpus", "*.py"))):
        put(args.out, "evt", open(path, "rb").read())

    # plans: .coil programs taken out of their lit tests (the lines that are not comments)
    programs = []
    for test in ("cuda-softmax.test", "cuda-pointwise.test"):
        lines = open(os.path.join(ROOT, "test", "compile", test)).read().splitlines()
        path = os.path.join(tmp, test.replace(".test", ".coil"))
        with open(path, "w") as f:
            f.write("".join(l + "\n" for l in lines if not l.startswith("#")))
        programs.append(path)
    programs += [os.path.join(ROOT, "test", "compile", "cpu-window-rows.coil"),
                 os.path.join(ROOT, "test", "attention", "models", "nm_softmax_axis.onnx")]
    for path in programs:
        for device in ("cpu", "cuda"):
            r = subprocess.run([args.coil, "inspect", path, "--plans", "--device", device],
                               capture_output=True)
            if r.returncode == 0:
                put(args.out, "plans", r.stdout)
            else:
                print("make_seeds: coil inspect --plans failed: " + r.stderr.decode()[-300:],
                      file=sys.stderr)
    shutil.rmtree(tmp)
    total = 0
    for t in TARGETS:
        files = glob.glob(os.path.join(args.out, t, "*"))
        size = sum(os.path.getsize(f) for f in files)
        total += size
        print("%-9s %4d seeds, %7d bytes" % (t, len(files), size))
    print("total %d bytes" % total)


if __name__ == "__main__":
    main()
