#!/usr/bin/env python3
"""coil's fused CPU attention (coil_cpu_attention_*) against its decomposition, side by side.

For each sequence length (--seqs, default 512 and 2048), two models at batch 1: a BERT-base
encoder layer (hidden 768, 12 heads of 64, FFN 3072, attention spelled out as Hugging Face's
eager export does; test/attention/bert_memory.py) and its attention alone (Q K^T / 8 + a padding
mask, softmax, times V, with Q, K, V [1, 12, S, 64] as inputs). Each is compiled twice: fused
(the default) and with COIL_FUSE_ATTENTION=0, which keeps today's decomposition (GEMMs, a softmax
kernel over the B x H x S x S scores, GEMMs). Both packages run on the same random inputs and
their outputs must agree (relative error <= 1e-4) before any timing counts. Then `coil bench
--json` times them in --rounds interleaved rounds (fused, then unfused); a row shows the median
of each over the rounds, the median of the per-round ratios fused / unfused (lower is better)
and their range (the spread on a shared machine).

usage: bench/cpu_attention.py --coil BIN [--work DIR] [--seqs 512,2048] [--iters N] [--rounds R]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "attention"))
import bert_memory  # noqa: E402


def attention_only(seq, path):
    """Q K^T / 8 + (1 - mask) * finfo.min, softmax, times V; Q, K, V [1, 12, S, 64]."""
    inits = [numpy_helper.from_array(np.array(8.0, np.float32), "eight"),
             numpy_helper.from_array(np.array([1, 2], np.int64), "axes"),
             numpy_helper.from_array(np.array(1.0, np.float32), "one"),
             numpy_helper.from_array(np.array(np.finfo(np.float32).min, np.float32), "fmin")]
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["qk"]),
             helper.make_node("Div", ["qk", "eight"], ["s"]),
             helper.make_node("Unsqueeze", ["mask", "axes"], ["m4"]),
             helper.make_node("Cast", ["m4"], ["mf"], to=TensorProto.FLOAT),
             helper.make_node("Sub", ["one", "mf"], ["inv"]),
             helper.make_node("Mul", ["inv", "fmin"], ["ext"]),
             helper.make_node("Add", ["s", "ext"], ["sm"]),
             helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    qkv = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 12, seq, 64]) for n in "qkv"]
    graph = helper.make_graph(nodes, "attention", qkv + [helper.make_tensor_value_info(
        "mask", TensorProto.INT64, [1, seq])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 12, seq, 64])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit("%s failed: %s" % (" ".join(cmd[:2]), r.stderr.strip()[:600]))
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coil", required=True)
    ap.add_argument("--work", default="/tmp/coil-bench-attention")
    ap.add_argument("--seqs", default="512,2048")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    rng = np.random.default_rng(0)
    print("%-22s %12s %12s %8s %16s" % ("model", "fused ms", "unfused ms", "ratio", "ratio range"))
    for seq in [int(s) for s in a.seqs.split(",")]:
        for kind in ("bert_layer", "attention"):
            name = "%s_%d" % (kind, seq)
            model = os.path.join(a.work, name + ".onnx")
            if kind == "bert_layer":
                bert_memory.bert_layer(1, seq, model)
                feeds = {"x": rng.standard_normal((1, seq, 768)).astype(np.float32)}
            else:
                attention_only(seq, model)
                feeds = {n: rng.standard_normal((1, 12, seq, 64)).astype(np.float32) for n in "qkv"}
            mask = np.ones((1, seq), np.int64)
            mask[0, seq - seq // 8:] = 0  # some padding
            feeds["mask"] = mask
            inp = os.path.join(a.work, name + "_in.npz")
            np.savez(inp, **feeds)
            pkgs, outs = {}, {}
            for fused in (True, False):
                env = dict(os.environ, COIL_FUSE_ATTENTION="1" if fused else "0")
                pkg = os.path.join(a.work, "%s.%s.pkg" % (name, "fused" if fused else "unfused"))
                run([a.coil, "compile", model, "-o", pkg], env)
                out = os.path.join(a.work, "%s.%s_out.npz" % (name, "fused" if fused else "unfused"))
                run([a.coil, "run", pkg, "--inputs", inp, "--outputs", out])
                pkgs[fused], outs[fused] = pkg, np.load(out)["y"].astype(np.float64)
            ref = outs[False]
            err = float(np.max(np.abs(outs[True] - ref)) / (np.max(np.abs(ref)) or 1.0))
            if not err <= 1e-4:
                sys.exit("%s: fused and unfused outputs differ: relative error %.2e" % (name, err))
            times = {True: [], False: []}
            for _ in range(a.rounds):
                for fused in (True, False):
                    r = run([a.coil, "bench", pkgs[fused], "--inputs", inp, "--iters", str(a.iters),
                             "--json"])
                    times[fused].append(json.loads(r.strip().splitlines()[-1])["median_ms"])
            ratios = [f / u for f, u in zip(times[True], times[False])]
            print("%-22s %12.2f %12.2f %8.3f %7.3f - %6.3f   (outputs agree: %.1e)" % (
                name, np.median(times[True]), np.median(times[False]), np.median(ratios),
                min(ratios), max(ratios), err))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
