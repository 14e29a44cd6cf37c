#!/usr/bin/env python3
"""The attention forms of test/attention (forms.json, made by make_forms.py) compiled and run on
the CPU against onnxruntime.

For each form: `coil inspect --fusion` must show exactly one attention extern
(coil_cpu_attention_*) when the form is fused, none for a near miss, and `coil inspect --loops`
must show is_causal where the form's mask is causal. Then the form is compiled once
(`coil compile`) and run at both sizes of its dynamic dims (`coil run`) on seeded random inputs
(never zeros): attention masks get some rows masked everywhere, padding masks a batch row of
padding only. Each output is compared with onnxruntime's, relative to its largest magnitude:
fp32 within 1e-4. Forms marked `lowprec` are also converted to f16 and bf16
(test/models/lowprec.py) and checked within 1e-2 of onnxruntime running the fp32 model on the
same rounded inputs. Forms exported at f16 or bf16 (`dtype`) are checked within 1e-2 of
onnxruntime running them lifted to fp32 (lowprec.lift) on the same inputs.

Rows masked everywhere with -inf: onnxruntime's softmax gives NaN there, the fused Attention
gives 0 (as PyTorch's scaled_dot_product_attention does). For forms marked `nan_rows`, a NaN
row of onnxruntime's output is expected as zeros, so coil's output must hold no NaN at all;
elsewhere (the near misses, which keep the explicit softmax) NaN must be where onnxruntime's is.

usage: check_forms.py --coil BIN --work DIR [--forms a,b] [--no-lowprec]
"""
import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import lowprec  # noqa: E402

NP = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.INT64: np.int64,
      onnx.TensorProto.INT32: np.int32, onnx.TensorProto.BOOL: np.bool_}


def make_inputs(model, kinds, sizes, rng):
    feeds = {}
    for i in model.graph.input:
        t = i.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else sizes[d.dim_param] for d in t.shape.dim]
        dt = NP[t.elem_type]
        kind = kinds.get(i.name, "float")
        if kind == "ids":
            a = rng.integers(0, 64, size=shape).astype(dt)
        elif kind == "mask01":
            a = (rng.random(shape) > 0.3).astype(dt)
            a[..., 0] = 1
            if shape[0] > 1:
                a[1] = 0  # a batch row of padding only
        elif kind == "boolmask":
            a = rng.random(shape) > 0.3
            a[..., 1, :] = False  # rows masked everywhere
            a[0, ..., 0, :] = False
        elif kind == "floatmask":
            a = rng.standard_normal(shape).astype(dt)
            a[rng.random(shape) < 0.2] = -np.inf
            if len(shape) >= 2 and shape[-2] > 1:
                a[..., 1, :] = -np.inf
        else:
            a = rng.standard_normal(shape).astype(dt)
        feeds[i.name] = a.astype(dt)
    return feeds


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def check_structure(args, name, form, path, dtype):
    """0 or 1 failure: the number of attention externs and is_causal (which a split_fill form
    has at every dtype but f16)."""
    r = run([args.coil, "inspect", path, "--fusion"])
    if r.returncode != 0:
        print("FAIL %s: coil inspect --fusion: %s" % (name, r.stderr.strip()[:300]))
        return 1
    n = len(re.findall(r"= coil_cpu_attention_", r.stdout))
    want = 1 if form["fused"] else 0
    if n != want:
        print("FAIL %s: %d attention extern(s), expected %d" % (name, n, want))
        return 1
    if form["fused"]:
        r = run([args.coil, "inspect", path, "--loops"])
        m = re.search(r"coil_cpu_attention_\w+\((.*)\)", r.stdout)
        fields = m.group(1).split(", ") if m else []
        causal = len(fields) == 37 and fields[33] == "int 1"
        want = form["causal"] and not (form.get("split_fill") and dtype == "f16")
        if causal != want:
            print("FAIL %s: is_causal %s, expected %s" % (name, causal, want))
            return 1
    return 0


def compare(label, got, want, tol, nan_rows):
    """Failures (0 or 1) of one output."""
    want = want.astype(np.float64)
    if nan_rows:
        want = np.where(np.isnan(want), 0.0, want)
    if got.shape != want.shape:
        print("FAIL %s: shape %s, onnxruntime %s" % (label, got.shape, want.shape))
        return 1
    # NaN exactly where onnxruntime has NaN (only a decomposed form may have any).
    if not np.array_equal(np.isnan(got), np.isnan(want)):
        print("FAIL %s: NaN at other places (coil %d, onnxruntime %d)" % (
            label, np.isnan(got).sum(), np.isnan(want).sum()))
        return 1
    finite = ~np.isnan(want)
    got, want = got[finite], want[finite]
    scale = float(np.max(np.abs(want), initial=0.0)) or 1.0
    err = float(np.max(np.abs(got - want), initial=0.0)) / scale
    ok = err <= tol
    print("%s %s: max|ref| %.3g, relative error %.2e (tolerance %.0e)" % ("ok  " if ok else "FAIL", label,
                                                                         scale, err, tol))
    return 0 if ok else 1


def check_form(args, name, form, dtype, rng):
    src = os.path.join(HERE, "models", name + ".onnx")
    model = onnx.load(src)
    path, label = src, name
    ref = src
    if form.get("dtype"):
        # Exported at low precision: the reference runs it lifted to f32 (lowprec.lift), on
        # the same rounded inputs.
        dtype = form["dtype"]
        label = "%s[%s]" % (name, dtype)
        model = lowprec.lift(model)
        ref = os.path.join(args.work, "%s.lifted.onnx" % name)
        onnx.save(model, ref)
    elif dtype != "f32":
        label = "%s[%s]" % (name, dtype)
        low, _ = lowprec.convert(model, dtype)
        path = os.path.join(args.work, "%s.%s.onnx" % (name, dtype))
        onnx.save(low, path)
    failures = check_structure(args, label, form, path, dtype)
    pkg = os.path.join(args.work, "%s.%s.pkg" % (name, dtype))
    r = run([args.coil, "compile", path, "-o", pkg])
    if r.returncode != 0:
        print("FAIL %s: coil compile: %s" % (label, r.stderr.strip()[:500]))
        return failures + 1
    sess = ort.InferenceSession(ref, providers=["CPUExecutionProvider"])
    tol = 1e-4 if dtype == "f32" else 1e-2
    for sizes in form["sizes"]:
        feeds = make_inputs(model, form["inputs"], sizes, rng)
        coil_feeds, kinds = dict(feeds), {}
        if dtype != "f32":
            for k, a in feeds.items():
                if a.dtype == np.float32:
                    coil_feeds[k] = lowprec.to_low(a, dtype)[0]
                    feeds[k] = lowprec.low_to_f32(coil_feeds[k], dtype)
                    kinds[k] = dtype
        want = sess.run(None, feeds)
        inp = os.path.join(args.work, "%s.%s_in.npz" % (name, dtype))
        out = os.path.join(args.work, "%s.%s_out.npz" % (name, dtype))
        np.savez(inp, **{k: (a.view(np.dtype("V2")) if kinds.get(k) == "bf16" else a)
                         for k, a in coil_feeds.items()})
        if os.path.exists(out):
            os.remove(out)
        r = run([args.coil, "run", pkg, "--inputs", inp, "--outputs", out])
        desc = ", ".join("%s=%d" % kv for kv in sorted(sizes.items())) or "static"
        if r.returncode != 0:
            print("FAIL %s (%s): coil run: %s" % (label, desc, r.stderr.strip()[:500]))
            failures += 1
            continue
        got = np.load(out)
        for o, w in zip(model.graph.output, want):
            g = got[o.name]
            if g.dtype.kind == "V" and g.dtype.itemsize == 2:
                g = lowprec.bf16_bits_to_f32(g.view(np.uint16))
            failures += compare("%s (%s) %s" % (label, desc, o.name), g.astype(np.float64), w,
                                tol, form["nan_rows"])
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coil", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--forms")
    ap.add_argument("--no-lowprec", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    forms = json.load(open(os.path.join(HERE, "forms.json")))
    names = a.forms.split(",") if a.forms else list(forms)
    rng = np.random.default_rng(13)
    failures = 0
    for name in names:
        form = forms[name]
        failures += check_form(a, name, form, "f32", rng)
        if form["lowprec"] and not a.no_lowprec and not form.get("dtype"):
            for dt in ("f16", "bf16"):
                failures += check_form(a, name, form, dt, rng)
    print("%d failure(s) in %d forms" % (failures, len(names)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
