#!/usr/bin/env python3
"""Memory of a BERT-base-sized encoder layer at a long sequence, compiled for the CPU.

Writes a BERT-base layer (hidden 768, 12 heads of 64, FFN 3072; attention spelled out as the
Hugging Face eager exports do: Q K^T / 8 + (1 - mask) * finfo.min, softmax, times V) with batch
1 and sequence length --seq (8192), random weights, and reads `coil inspect --memory`. With the
attention fusion, no planned buffer may hold batch x heads x T x T elements (or more); the same
model with the fusion off (COIL_FUSE_ATTENTION=0) must have one, which shows that the check can
fail. Prints the largest buffer and the arena of both.

usage: bert_memory.py --coil BIN --work DIR [--seq 8192]
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HIDDEN, HEADS, FFN = 768, 12, 3072


def bert_layer(batch, seq, path):
    rng = np.random.default_rng(0)
    inits, nodes = [], []

    def w(name, *shape):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * 0.02).astype(np.float32), name))
        return name

    def c(name, value, dtype=np.float32):
        inits.append(numpy_helper.from_array(np.array(value, dtype=dtype), name))
        return name

    def node(op, ins, out, **attrs):
        nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    d = HIDDEN // HEADS
    heads = c("heads_shape", [batch, seq, HEADS, d], np.int64)
    hidden = c("hidden_shape", [batch, seq, HIDDEN], np.int64)

    def proj(x, name, n_out, n_in=HIDDEN):
        m = node("MatMul", [x, w(name + ".w", n_in, n_out)], name + ".mm")
        return node("Add", [m, w(name + ".b", n_out)], name)

    q = node("Transpose", [node("Reshape", [proj("x", "q", HIDDEN), heads], "q4")], "qt", perm=[0, 2, 1, 3])
    k = node("Transpose", [node("Reshape", [proj("x", "k", HIDDEN), heads], "k4")], "kt", perm=[0, 2, 3, 1])
    v = node("Transpose", [node("Reshape", [proj("x", "v", HIDDEN), heads], "v4")], "vt", perm=[0, 2, 1, 3])
    s = node("Div", [node("MatMul", [q, k], "qk"), c("sqrt_d", 8.0)], "scores")
    m = node("Cast", [node("Unsqueeze", ["mask", c("axes", [1, 2], np.int64)], "m4")], "mf", to=TensorProto.FLOAT)
    ext = node("Mul", [node("Sub", [c("one", 1.0), m], "inv"), c("fmin", np.finfo(np.float32).min)], "ext")
    p = node("Softmax", [node("Add", [s, ext], "masked")], "probs", axis=-1)
    ctx = node("Reshape", [node("Transpose", [node("MatMul", [p, v], "pv")], "pvt", perm=[0, 2, 1, 3]), hidden],
               "ctx")
    h = node("LayerNormalization", [node("Add", [proj(ctx, "o", HIDDEN), "x"], "res1"),
                                    w("ln1.g", HIDDEN), w("ln1.b", HIDDEN)], "h", axis=-1, epsilon=1e-12)
    f = proj(h, "ffn1", FFN)
    g = node("Mul", [node("Mul", [f, c("half", 0.5)], "fh"),
                     node("Add", [node("Erf", [node("Div", [f, c("sqrt2", np.sqrt(2.0))], "fs")], "fe"),
                                  c("one2", 1.0)], "fe1")], "gelu")
    y = node("LayerNormalization", [node("Add", [proj(g, "ffn2", HIDDEN, FFN), h], "res2"),
                                    w("ln2.g", HIDDEN), w("ln2.b", HIDDEN)], "y", axis=-1, epsilon=1e-12)
    graph = helper.make_graph(
        nodes, "bert_layer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, HIDDEN]),
         helper.make_tensor_value_info("mask", TensorProto.INT64, [batch, seq])],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, [batch, seq, HIDDEN])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)


def memory(coil, path, fuse):
    env = dict(os.environ)
    env["COIL_FUSE_ATTENTION"] = "1" if fuse else "0"
    r = subprocess.run([coil, "inspect", path, "--memory"], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit("coil inspect --memory failed: " + r.stderr.strip())
    arena = int(re.search(r"arena bytes: (\d+)", r.stdout).group(1))
    buffers = [(int(b), n) for n, b in re.findall(r"^(\S+)\s+(\d+)\s+\d+\s+\d+-\d+$", r.stdout, re.M)]
    if not buffers:
        sys.exit("no buffers in coil inspect --memory:\n" + r.stdout)
    return arena, max(buffers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coil", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--seq", type=int, default=8192)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    batch = 1
    path = os.path.join(a.work, "bert_layer_%d.onnx" % a.seq)
    bert_layer(batch, a.seq, path)
    limit = batch * HEADS * a.seq * a.seq  # elements of one score matrix, f32 buffers
    failures = 0
    for fuse in (True, False):
        arena, (largest, name) = memory(a.coil, path, fuse)
        has_scores = largest // 4 >= limit
        print("%s: arena %.1f MiB, largest buffer '%s' %.1f MiB (%d f32 elements; B*H*T*T = %d)" % (
            "fused" if fuse else "unfused", arena / 2**20, name, largest / 2**20, largest // 4, limit))
        if has_scores == fuse:
            failures += 1
            print("FAIL: %s" % ("the fused layer plans a buffer of B*H*T*T elements" if fuse else
                                "the unfused layer has no score buffer, so the check proves nothing"))
    print("ok" if not failures else "%d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
