#!/usr/bin/env python3
"""coil's CPU convolution extern against onnxruntime's Conv, one shape at a time.

Each shape (a line of SHAPES: n c h w m kh kw group stride pad dilation, square strides, pads
and dilations; `#` starts a comment) is a 2-D f32 convolution with a bias followed by ReLU:
coil_cpu_conv_bias_f32 with its ReLU clamp, called through ctypes from each libcoil_runtime.so
given (--libs, so that two builds compare side by side), and an onnxruntime session of
Conv + Relu (which onnxruntime fuses) on the same random inputs. Outputs are poisoned (NaN)
before coil's call and compared with onnxruntime's (max |coil - ort| / max |ort| <= 1e-4, else
the row says ERR), so a fast wrong answer never counts.

Timing: R rounds (--rounds); in each, every side runs in a process of its own (coil with
OMP_NUM_THREADS = --threads, onnxruntime with that many intra-op threads), one after the other,
and times each shape for at least 0.15 s (median of the calls). Only the per-round ratios
coil / onnxruntime are compared; the table shows their median over rounds.

Note that a single-node onnxruntime model reorders its input and output to and from its blocked
NCHWc layout around every Conv, which a whole model does once per chain: whole-model ratios
(bench/cpu_vs_ort.py) are the ones that count; this script ranks shapes and compares builds.

usage: bench/cpu_conv_shapes.py --libs A.so[,B.so] [--shapes FILE] [--rounds R] [--threads T]
"""
import argparse
import ctypes
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def parse(line):
    n, c, h, w, m, kh, kw, g, s, p, d = (int(t) for t in line.split())
    oh = (h + 2 * p - d * (kh - 1) - 1) // s + 1
    ow = (w + 2 * p - d * (kw - 1) - 1) // s + 1
    return dict(n=n, c=c, h=h, w=w, m=m, kh=kh, kw=kw, g=g, s=s, p=p, d=d, oh=oh, ow=ow)


def arrays(sh):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((sh["n"], sh["c"], sh["h"], sh["w"]), dtype=np.float32)
    w = rng.standard_normal((sh["m"], sh["c"] // sh["g"], sh["kh"], sh["kw"]), dtype=np.float32)
    b = rng.standard_normal(sh["m"], dtype=np.float32)
    return x, w * np.float32(0.1), b


def median_time(fn, min_s=0.15):
    for _ in range(3):
        fn()
    t0 = time.perf_counter()
    fn()
    iters = max(5, int(min_s / max(time.perf_counter() - t0, 1e-6)))
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def side_coil(lib, shapes):
    f = ctypes.CDLL(lib).coil_cpu_conv_bias_f32
    f.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 24 + [ctypes.c_double] * 2
    f.restype = ctypes.c_int32
    out = []
    for sh in shapes:
        x, w, b = arrays(sh)
        y = np.full((sh["n"], sh["m"], sh["oh"], sh["ow"]), np.nan, np.float32)
        # Geometry: n c m group nd, then in/k/out/strides/dilations/pads of 3 dims (the 2 used
        # dims first), then clamp (1: ReLU's lower bound) and the bounds.
        args = [x.ctypes.data, w.ctypes.data, b.ctypes.data, y.ctypes.data, sh["n"], sh["c"],
                sh["m"], sh["g"], 2, sh["h"], sh["w"], 1, sh["kh"], sh["kw"], 1, sh["oh"],
                sh["ow"], 1, sh["s"], sh["s"], 1, sh["d"], sh["d"], 1, sh["p"], sh["p"], 0, 1,
                0.0, 0.0]
        rc = f(*args)
        if rc != 0:
            raise SystemExit("coil_cpu_conv_bias_f32 failed (%d) on %s" % (rc, sh))
        first = y.copy()
        out.append((median_time(lambda: f(*args)), first))
    return out


def side_ort(shapes, threads):
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    out = []
    for sh in shapes:
        x, w, b = arrays(sh)
        conv = helper.make_node("Conv", ["x", "w", "b"], ["c"], group=sh["g"],
                                strides=[sh["s"]] * 2, pads=[sh["p"]] * 4,
                                dilations=[sh["d"]] * 2)
        relu = helper.make_node("Relu", ["c"], ["y"])
        graph = helper.make_graph(
            [conv, relu], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
            [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        y = s.run(None, {"x": x})[0]
        out.append((median_time(lambda: s.run(None, {"x": x})), y))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--libs", help="comma-separated libcoil_runtime.so paths")
    ap.add_argument("--shapes", default=os.path.join(HERE, "conv_shapes.txt"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--side", help=argparse.SUPPRESS)  # internal: one side in this process
    ap.add_argument("--lib", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    lines = [l.split("#")[0].strip() for l in open(a.shapes)]
    lines = [l for l in lines if l]
    shapes = [parse(l) for l in lines]
    if a.side:
        res = side_coil(a.lib, shapes) if a.side == "coil" else side_ort(shapes, a.threads)
        np.savez(a.out, t=np.array([r[0] for r in res]), **{"y%d" % i: r[1] for i, r in enumerate(res)})
        return
    if not a.libs:
        raise SystemExit("--libs: at least one libcoil_runtime.so")
    libs = a.libs.split(",")
    sides = ["ort"] + libs
    times = {k: [] for k in sides}
    outs = {}
    work = "/tmp/coil-bench-conv-%d" % os.getpid()
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    for _ in range(a.rounds):
        for i, k in enumerate(sides):
            o = os.path.join(work, "side%d.npz" % i)
            cmd = [sys.executable, os.path.abspath(__file__), "--shapes", a.shapes, "--out", o,
                   "--threads", str(a.threads)]
            cmd += ["--side", "ort"] if k == "ort" else ["--side", "coil", "--lib", k]
            subprocess.run(cmd, check=True, env=env)
            z = np.load(o)
            times[k].append(z["t"])
            outs[k] = [z["y%d" % j] for j in range(len(shapes))]
    load = os.getloadavg()
    print("threads %d, %d rounds, load average %.1f / %.1f / %.1f" % (a.threads, a.rounds, *load))
    for i, k in enumerate(libs):
        print("lib%d = %s" % (i, k))
    print("%-40s %9s" % ("n c h w m kh kw g s p d", "ort us") +
          "".join("  %9s %6s" % ("lib%d us" % i, "ratio") for i in range(len(libs))))
    for j, line in enumerate(lines):
        row = "%-40s %9.1f" % (line, np.median([t[j] for t in times["ort"]]) * 1e6)
        for k in libs:
            ratios = [times[k][r][j] / times["ort"][r][j] for r in range(a.rounds)]
            ref = outs["ort"][j]
            err = np.max(np.abs(outs[k][j] - ref)) / max(np.max(np.abs(ref)), 1e-30)
            row += "  %9.1f %6.2f" % (np.median([t[j] for t in times[k]]) * 1e6, np.median(ratios))
            if not err <= 1e-4:
                row += " ERR %.1e" % err
        print(row)


if __name__ == "__main__":
    main()
