#!/usr/bin/env python3
"""coil inspect --fusion --svg and --memory --svg (ctest `pictures`, label golden):
  - every SVG parses as XML with an <svg> root;
  - fusion: one group per launch, in the order and with the graph nodes that
    `coil inspect --fusion` (the text report) gives each kernel and extern call; a model of six
    identical blocks is drawn as one repeated group (data-count 6) with the block's launches
    once; bert_small's two encoder layers collapse too;
  - memory: one bar per buffer of `coil inspect --memory` (name, bytes, offset), inside the
    plot, and no two bars of buffers alive at the same time overlap (the plan, as drawn).
Usage: check_pictures.py --coil build/bin/coil --work DIR
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NS = "{http://www.w3.org/2000/svg}"
FAILED = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILED.append(what)


def coil(args, *cmd):
    p = subprocess.run([args.coil] + list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"coil {' '.join(cmd)}: exit {p.returncode}\n{p.stderr}")
    return p.stdout


def svg(args, model, view, work):
    out = os.path.join(work, os.path.basename(model) + "." + view + ".svg")
    coil(args, "inspect", model, "--" + view, "--svg", out)
    root = ET.parse(out).getroot()  # raises on malformed XML
    check(root.tag == NS + "svg" and float(root.get("width")) > 0 and
          float(root.get("height")) > 0, f"{os.path.basename(out)} is an SVG document")
    return root


def groups(root, cls):
    return [g for g in root.iter(NS + "g") if cls in (g.get("class") or "").split()]


def chips(step):
    return [t.text for g in groups(step, "node") for t in g.iter(NS + "title")]


def report_groups(text):
    """The text report's launches in order: the set of 'name (Op)' each runs."""
    out = []
    for line in text.splitlines():
        if line.startswith("  from: "):
            out.append(sorted(x.strip() for x in re.split(r",\s*(?![^()]*\))", line[8:])))
    return out


def six_blocks(path):
    rng = np.random.default_rng(3)
    nodes, inits, x = [], [], "x"
    for i in range(6):
        w = numpy_helper.from_array(rng.standard_normal((32, 32)).astype(np.float32) * 0.2, f"w{i}")
        b = numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), f"b{i}")
        g = numpy_helper.from_array(np.ones(32, np.float32), f"g{i}")
        z = numpy_helper.from_array(np.zeros(32, np.float32), f"z{i}")
        inits += [w, b, g, z]
        nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"], name=f"block{i}/fc"),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"], name=f"block{i}/bias"),
                  helper.make_node("Relu", [f"a{i}"], [f"r{i}"], name=f"block{i}/act"),
                  helper.make_node("LayerNormalization", [f"r{i}", f"g{i}", f"z{i}"], [f"y{i}"],
                                   axis=-1, name=f"block{i}/norm")]
        x = f"y{i}"
    graph = helper.make_graph(nodes, "six", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                          ["batch", 32])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", 32])],
                              inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def check_fusion(args, model, work):
    root = svg(args, model, "fusion", work)
    steps = groups(root, "step")
    repeats = groups(root, "repeat")
    report = report_groups(coil(args, "inspect", model, "--fusion"))
    # The launches drawn: each repeated group's launches once.
    drawn = [sorted(re.sub(r"; weights: .*", "", c) for c in chips(s)) for s in steps]
    expected, i = [], 0
    covered = {}
    for r in repeats:
        covered[int(groups(r, "step")[0].get("data-index"))] = (int(r.get("data-period")),
                                                                int(r.get("data-count")))
    while i < len(report):
        if i in covered:
            period, count = covered[i]
            expected += report[i:i + period]
            i += period * count
        else:
            expected.append(report[i])
            i += 1
    check(drawn == expected, f"{os.path.basename(model)}: {len(steps)} launch groups with the "
                             f"nodes of the text report ({len(report)} launches)")
    return root, steps, repeats


def check_memory(args, model, work):
    root = svg(args, model, "memory", work)
    text = coil(args, "inspect", model, "--memory")
    rows = []
    for line in text.splitlines()[4:]:
        f = line.split()
        if len(f) >= 4:
            rows.append((f[0], int(f[1]), -1 if f[2] == "run" else int(f[2])))
    bars = [r for r in root.iter(NS + "rect") if r.get("class") == "buffer"]
    got = [(b.get("data-name"), int(b.get("data-bytes")), int(b.get("data-offset"))) for b in bars]
    check(got == rows, f"{os.path.basename(model)}: {len(bars)} bars, one per buffer of the "
                       "text report (name, bytes, offset)")
    plot = next(r for r in root.iter(NS + "rect") if r.get("class") == "axis")
    top, bottom = float(plot.get("y")), float(plot.get("y")) + float(plot.get("height"))
    planned = [b for b in bars if int(b.get("data-offset")) >= 0]
    inside = all(top - 0.01 <= float(b.get("y")) and
                 float(b.get("y")) + float(b.get("height")) <= bottom + 1.01 for b in planned)
    check(inside, "the planned buffers' bars lie inside the plot")
    clash = []
    for i, a in enumerate(planned):
        for b in planned[i + 1:]:
            # A line that frees one and allocates the other (Reuse) hands the bytes over.
            live = not (int(a.get("data-last")) <= int(b.get("data-first")) or
                        int(b.get("data-last")) <= int(a.get("data-first")))
            ao, ab = int(a.get("data-offset")), int(a.get("data-bytes"))
            bo, bb = int(b.get("data-offset")), int(b.get("data-bytes"))
            if live and ao < bo + bb and bo < ao + ab:
                clash.append((a.get("data-name"), b.get("data-name")))
    check(not clash, f"no two buffers alive together share bytes: {clash[:3]}")
    return root


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--coil", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    args.coil = os.path.abspath(args.coil)
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    mlp = os.path.join(ROOT, "examples", "mlp.onnx")
    _, steps, repeats = check_fusion(args, mlp, work)
    names = [s.get("data-name") for s in steps]
    check(names == ["k0_sum", "coil_cpu_gemm_bias_f32_0", "coil_cpu_gemm_bias_f32_1", "k1_max"]
          and not repeats, f"mlp: the launches k0_sum, two GEMM externs, k1_max: {names}")
    gemm = chips(steps[1])
    check(any(c.startswith("fc1 (MatMul); weights: w1 f32[16, 32]") for c in gemm) and
          "act (Relu)" in gemm, f"mlp: the first GEMM runs fc1 with its weight, fc1_bias, act: {gemm}")
    check_memory(args, mlp, work)

    six = os.path.join(work, "six.onnx")
    six_blocks(six)
    _, steps, repeats = check_fusion(args, six, work)
    counts = [int(r.get("data-count")) for r in repeats]
    check(counts == [6] and len(steps) == int(repeats[0].get("data-period")),
          f"six blocks: one repeated group of 6 ({counts}), its {len(steps)} launches drawn once")
    check_memory(args, six, work)

    bert = os.path.join(ROOT, "test", "models", "bert_small.onnx")
    _, steps, repeats = check_fusion(args, bert, work)
    check([int(r.get("data-count")) for r in repeats] == [2],
          "bert_small: its two encoder layers drawn once, as a repeated group of 2")
    check_memory(args, bert, work)
    print(f"{len(FAILED)} checks failed" if FAILED else "all checks passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
