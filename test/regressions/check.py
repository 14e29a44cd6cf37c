#!/usr/bin/env python3
"""Models that once broke coil, exported by users' tools, each against onnxruntime.

Each model here is one that a user's export made coil fail on (the reason is in REGRESSIONS).
For each: `coil compile` must finish within --compile-timeout seconds (a hang is the failure
these guard against), the package runs on seeded random inputs (never zeros), and every output
is compared with onnxruntime. A model computing in f16/bf16 is checked against onnxruntime
running it lifted to fp32 (lowprec.lift: the same stored weights, no rounding) on the same
rounded inputs, within 1e-2 relative to the output's largest magnitude; fp32 models within 1e-4
(1e-3 on CUDA). `coil interpret` is checked the same way.

usage: check.py --coil BIN --work DIR [--device cpu|cuda] [--arch sm_90a] [--models a,b]
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import lowprec  # noqa: E402

# name: why it is here
REGRESSIONS = {
    "bert_sdpa_small": "BERT layer with F.scaled_dot_product_attention (TorchScript exporter, "
                       "opset 17, bf16): compile hung in NameTable::fresh on the weight 'n1.weight'",
    "torch_opset9": "CNN head exported at opset 9 (export_old_opsets.py: Upsample nearest and linear, "
                    "Slice/Pad/Clip/TopK/Softmax of old versions): refused, opset older than 13",
    "torch_opset10": "the same at opset 10 (Resize-10 up and down): refused, opset older than 13",
}
ELEM = {onnx.TensorProto.FLOAT: "f32", onnx.TensorProto.FLOAT16: "f16", onnx.TensorProto.BFLOAT16: "bf16",
        onnx.TensorProto.INT64: "i64", onnx.TensorProto.INT32: "i32", onnx.TensorProto.BOOL: "bool"}


def inputs_for(model, rng):
    """(coil's arrays, onnxruntime's arrays for the lifted model)."""
    coil, ref = {}, {}
    for i in model.graph.input:
        t = i.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 3 for d in t.shape.dim]
        kind = ELEM.get(t.elem_type)
        if kind in ("f32", "f16", "bf16"):
            a = rng.standard_normal(shape).astype(np.float32)
            if kind == "f32":
                coil[i.name], ref[i.name] = a, a
            else:
                low = lowprec.to_low(a, kind)[0]
                coil[i.name] = low.view(np.dtype("V2")) if kind == "bf16" else low
                ref[i.name] = lowprec.low_to_f32(low, kind)
        elif kind in ("i64", "i32"):
            a = rng.integers(0, 100, size=shape).astype(np.int64 if kind == "i64" else np.int32)
            coil[i.name], ref[i.name] = a, a
        elif kind == "bool":
            a = rng.random(shape) > 0.3
            coil[i.name], ref[i.name] = a, a
        else:
            raise ValueError("input %s: element type %d not handled" % (i.name, t.elem_type))
    return coil, ref


def as_f64(a):
    if a.dtype.kind == "V" and a.dtype.itemsize == 2:
        return lowprec.bf16_bits_to_f32(a.view(np.uint16)).astype(np.float64)
    return a.astype(np.float64)


def check(args, name):
    path = os.path.join(HERE, name + ".onnx")
    model = onnx.load(path)
    low = any(ELEM.get(o.type.tensor_type.elem_type) in ("f16", "bf16") for o in model.graph.output)
    tolerance = 1e-2 if low else 1e-3 if args.device == "cuda" else 1e-4
    sess = ort.InferenceSession(lowprec.lift(model).SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(20261204)
    coil_in, ref_in = inputs_for(model, rng)
    want = sess.run(None, ref_in)
    inp = os.path.join(args.work, name + "_in.npz")
    np.savez(inp, **coil_in)
    pkg = os.path.join(args.work, name + ".pkg")
    cmd = [args.coil, "compile", path, "-o", pkg, "--device", args.device] + (["--arch", args.arch] if args.arch else [])
    t0 = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.compile_timeout)
    except subprocess.TimeoutExpired:
        print("FAIL %s: coil compile did not finish in %d s (%s)" % (name, args.compile_timeout, REGRESSIONS[name]))
        return 1
    if r.returncode != 0:
        print("FAIL %s: coil compile: exit %d: %s" % (name, r.returncode, r.stderr.strip()[-800:]))
        return 1
    print("%s: compiled for %s in %.2f s" % (name, args.device, time.time() - t0))
    failures = 0
    for verb, target in (("run", pkg), ("interpret", path)):
        out = os.path.join(args.work, "%s_%s_out.npz" % (name, verb))
        if os.path.exists(out):
            os.remove(out)
        r = subprocess.run([args.coil, verb, target, "--inputs", inp, "--outputs", out], capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL %s: coil %s: exit %d: %s" % (name, verb, r.returncode, r.stderr.strip()[-500:]))
            failures += 1
            continue
        got = np.load(out)
        for o, w in zip(model.graph.output, want):
            g = as_f64(got[o.name])
            if g.shape != w.shape:
                print("FAIL %s: coil %s: output %s shape %s, onnxruntime %s" % (name, verb, o.name, g.shape, w.shape))
                failures += 1
                continue
            scale = float(np.max(np.abs(w))) or 1.0
            err = float(np.max(np.abs(g - w.astype(np.float64)))) / scale
            ok = err <= tolerance  # NaN fails
            failures += 0 if ok else 1
            print("%s %s: coil %s: output %s relative error %.2e (tolerance %.0e)" % (
                "ok  " if ok else "FAIL", name, verb, o.name, err, tolerance))
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coil", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--arch")
    ap.add_argument("--models")
    ap.add_argument("--compile-timeout", type=int, default=300)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    names = args.models.split(",") if args.models else sorted(REGRESSIONS)
    failures = sum(check(args, n) for n in names)
    print("regressions: %d models, %d failures" % (len(names), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
