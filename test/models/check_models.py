#!/usr/bin/env python3
"""Real exported models: coil's interpreter against onnxruntime.

For each model in test/models (made by export_models.py), at two different values of every
dynamic dim, random inputs (token ids in range, a random attention mask, normal images) go
through onnxruntime (CPU) and `coil interpret`; the check is
    max |coil - ort| / max |ort| <= 1e-4
for every output. Prints node counts of the ONNX graph and of coil's graph after import
(shape folding). Exit status 1 on any mismatch or failure.

With --mode compile, each model is compiled once (`coil compile`) and the package runs at both
sizes (`coil run`); `coil inspect PKG --memory` must report an arena within 1.25x of the lower
bound at each size. With --device cuda (compile mode) the fp32 tolerance is 1e-3.

--dtype f16,bf16 (or f32,f16,bf16) also checks the models converted to f16 and bf16 by
lowprec.py (every float tensor in the low type; ops whose schema does not allow it in f32
between Casts). Float inputs are rounded to the low type; coil runs the converted model on the
rounded inputs and onnxruntime runs the original fp32 model on the same rounded values (as f32).
The check is the same relative error, coil's low-precision output converted to f64:
    max |coil - ort| / max |ort| <= 1e-2
on either device. It covers the rounding of weights and of every intermediate to the low type;
each line also prints, for information, the error of onnxruntime emulating the low-precision
model node by node (fp32 model, weights rounded, a Cast pair rounding every float node output):
the error that rounding weights and node outputs makes by itself. coil's interpreter (which
rounds every node output) matches it; compiled packages round only at kernel boundaries.

usage: check_models.py --coil BIN --work DIR [--models a,b] [--mode interpret|compile]
                       [--device cpu|cuda] [--arch sm_90a] [--dtype f32,f16,bf16]
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

import lowprec

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ["resnet_small", "mobilenet_v2", "bert_small", "gpt_small"]
SIZES = [{"batch": 2, "seq": 16}, {"batch": 3, "seq": 7}]
TYPES = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.INT64: np.int64, onnx.TensorProto.INT32: np.int32}


def make_inputs(model, sizes, rng):
    feeds = {}
    for i in model.graph.input:
        t = i.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else sizes[d.dim_param] for d in t.shape.dim]
        dt = TYPES[t.elem_type]
        if "mask" in i.name:
            a = (rng.random(shape) > 0.3).astype(dt)
            a[..., 0] = 1
        elif "ids" in i.name:
            a = rng.integers(0, 500, size=shape).astype(dt)
        else:
            a = rng.standard_normal(shape).astype(dt)
        feeds[i.name] = a
    return feeds


def emulation(model, dtype):
    """onnxruntime on the fp32 model with its float initializers and constants rounded to dtype
    (saturated as lowprec does) and every float node output rounded to dtype and back (a Cast
    pair): the converted model evaluated node by node at low precision. Its error against the
    fp32 model is the part of the error that rounding each node's output makes by itself; printed
    for information, not checked."""
    floats = lowprec.float_names(model)
    r = onnx.ModelProto()
    r.CopyFrom(model)
    g = r.graph
    for i, t in enumerate(g.initializer):
        if t.data_type == onnx.TensorProto.FLOAT:
            g.initializer[i].CopyFrom(numpy_helper.from_array(lowprec.round_to(numpy_helper.to_array(t), dtype), t.name))
    nodes = []
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == onnx.TensorProto.FLOAT:
                a.t.CopyFrom(numpy_helper.from_array(lowprec.round_to(numpy_helper.to_array(a.t), dtype), a.t.name))
        casts = []
        for k, o in enumerate(n.output):
            if o in floats:
                n.output[k] = o + "__unrounded"
                casts.append(onnx.helper.make_node("Cast", [o + "__unrounded"], [o + "__low"], to=lowprec.LOW[dtype]))
                casts.append(onnx.helper.make_node("Cast", [o + "__low"], [o], to=onnx.TensorProto.FLOAT))
        nodes.append(n)
        nodes.extend(casts)
    del g.node[:]
    g.node.extend(nodes)
    del g.value_info[:]
    return ort.InferenceSession(r.SerializeToString(), providers=["CPUExecutionProvider"])


def save_npz(path, arrays, dtypes):
    """np.savez; arrays whose entry in dtypes is 'bf16' (uint16 bits) are stored as 2-byte void,
    which coil reads as bf16."""
    np.savez(path, **{k: (a.view(np.dtype("V2")) if dtypes.get(k) == "bf16" else a) for k, a in arrays.items()})


def load_output(npz, name, dtype):
    """An output of coil as f64; a 2-byte void array is bf16."""
    a = npz[name]
    if a.dtype.kind == "V" and a.dtype.itemsize == 2:
        a = lowprec.bf16_bits_to_f32(a.view(np.uint16))
    elif dtype != "f32" and a.dtype != (np.float16 if dtype == "f16" else np.float32):
        raise ValueError("output %s has dtype %s, expected %s" % (name, a.dtype, dtype))
    return a.astype(np.float64)


def check_model(args, name, dtype, rng):
    """Checks one model in one dtype; returns the number of failures."""
    label = name if dtype == "f32" else "%s[%s]" % (name, dtype)
    tolerance = 1e-2 if dtype != "f32" else 1e-3 if args.device == "cuda" else 1e-4
    path = os.path.join(HERE, name + ".onnx")
    model = onnx.load(path)
    runnable = path
    if dtype != "f32":
        try:
            low, stats = lowprec.convert(model, dtype)
        except Exception as e:  # noqa: BLE001 - a converter failure is a failure of this check
            print("FAIL %s: conversion: %s" % (label, e))
            return 1
        runnable = os.path.join(args.work, "%s.%s.onnx" % (name, dtype))
        onnx.save(low, runnable)
        print("%s: converted: %s" % (label, lowprec.describe(stats)))
    source = runnable
    r = subprocess.run([args.coil, "inspect", source], capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL %s: coil inspect: %s" % (label, r.stderr.strip()))
        return 1
    m = re.search(r"nodes: (\d+)", r.stdout)
    print("%s: %d ONNX nodes -> %s coil nodes after import" % (label, len(model.graph.node), m.group(1) if m else "?"))
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    sess_rounded = emulation(model, dtype) if dtype != "f32" else None
    failures = 0
    tag = name if dtype == "f32" else "%s.%s" % (name, dtype)
    if args.mode == "compile":
        runnable = os.path.join(args.work, tag + ".pkg")
        cmd = [args.coil, "compile", source, "-o", runnable, "--device", args.device]
        if args.arch:
            cmd += ["--arch", args.arch]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL %s: coil compile: exit %d: %s" % (label, r.returncode, r.stderr.strip()[:800]))
            return 1
        print("%s: compiled: %s" % (label, r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""))
    for sizes in SIZES:
        feeds = make_inputs(model, sizes, rng)
        coil_feeds, dtypes = feeds, {}
        if dtype != "f32":
            coil_feeds = {}
            for k, a in feeds.items():
                if a.dtype == np.float32:
                    coil_feeds[k] = lowprec.to_low(a, dtype)[0]
                    feeds[k] = lowprec.low_to_f32(coil_feeds[k], dtype)  # ORT sees the rounded values
                    dtypes[k] = dtype
                else:
                    coil_feeds[k] = a
        want = sess.run(None, feeds)
        floor = sess_rounded.run(None, feeds) if sess_rounded else None
        inp = os.path.join(args.work, tag + "_in.npz")
        out = os.path.join(args.work, tag + "_out.npz")
        save_npz(inp, coil_feeds, dtypes)
        if os.path.exists(out):
            os.remove(out)
        verb = "run" if args.mode == "compile" else "interpret"
        r = subprocess.run([args.coil, verb, runnable, "--inputs", inp, "--outputs", out], capture_output=True, text=True)
        shape_desc = ", ".join("%s %s" % (k, v.shape) for k, v in feeds.items())
        if r.returncode != 0:
            print("FAIL %s (%s): exit %d: %s" % (label, shape_desc, r.returncode, r.stderr.strip()[:500]))
            failures += 1
            continue
        got = np.load(out)
        if args.mode == "compile":
            m = subprocess.run([args.coil, "inspect", source, "--memory", "--inputs", inp], capture_output=True, text=True)
            mm = re.search(r"ratio:? ([0-9.]+)", m.stdout)
            if m.returncode != 0 or not mm:
                print("FAIL %s (%s): coil inspect --memory: %s" % (label, shape_desc, (m.stderr or m.stdout).strip()[:300]))
                failures += 1
            else:
                ratio = float(mm.group(1))
                ok = ratio <= 1.25
                failures += 0 if ok else 1
                print("%s %s (%s): arena / lower bound = %.3f" % ("ok  " if ok else "FAIL", label, shape_desc, ratio))
        for k, (o, w) in enumerate(zip(model.graph.output, want)):
            try:
                g = load_output(got, o.name, dtype)
            except (KeyError, ValueError) as e:
                print("FAIL %s (%s): output %s: %s" % (label, shape_desc, o.name, e))
                failures += 1
                continue
            if g.shape != w.shape:
                print("FAIL %s (%s): output %s shape %s, onnxruntime %s" % (label, shape_desc, o.name, g.shape, w.shape))
                failures += 1
                continue
            scale = float(np.max(np.abs(w))) or 1.0
            err = float(np.max(np.abs(g - w.astype(np.float64)))) / scale
            ok = err <= tolerance  # NaN fails
            failures += 0 if ok else 1
            note = ""
            if floor:
                note = "; onnxruntime emulating %s node by node: %.2e" % (
                    dtype, float(np.max(np.abs(floor[k].astype(np.float64) - w.astype(np.float64)))) / scale)
            print("%s %s (%s): output %s max|ref| %.3g, relative error %.2e (tolerance %.0e%s)" % (
                "ok  " if ok else "FAIL", label, shape_desc, o.name, scale, err, tolerance, note))
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coil", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--models")
    ap.add_argument("--mode", choices=["interpret", "compile"], default="interpret")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="compile mode: target device")
    ap.add_argument("--arch", help="compile mode, cuda: GPU architectures (e.g. sm_90a)")
    ap.add_argument("--dtype", default="f32", help="comma-separated: f32 (the models as exported), f16, bf16 (converted by lowprec.py)")
    args = ap.parse_args()
    dtypes = args.dtype.split(",")
    for d in dtypes:
        if d not in ("f32", "f16", "bf16"):
            ap.error("--dtype: '%s' is not one of f32, f16, bf16" % d)
    os.makedirs(args.work, exist_ok=True)
    names = args.models.split(",") if args.models else MODELS
    failures = 0
    for dtype in dtypes:
        rng = np.random.default_rng(1234)  # the same inputs (before rounding) for every dtype
        for name in names:
            failures += check_model(args, name, dtype, rng)
    print("models: %d failures" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
