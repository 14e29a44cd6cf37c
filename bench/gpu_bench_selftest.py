#!/usr/bin/env python3
"""Checks of the GPU benchmark's parts that need no GPU (and, except the last group, no torch):

- the ctypes structures of bench/coilrt.py against include/coil/coil.h (sizes and offsets printed
  by a small C program built with the host compiler);
- onnx_stats: FLOPs of MatMul / Gemm / Conv / ConvTranspose graphs, initializer bytes, dtype census;
- the runtime binding end to end on CPU packages: hand-built ONNX graphs (fp32 pointwise chain
  with two inputs, bf16 softmax, fp32 Gemm + bias + Relu) compiled with `coil compile`, run with
  coil_model_run on numpy data (caller buffers poisoned with NaN, and runtime-allocated outputs),
  compared with numpy; bad calls (wrong dtype, wrong count, a CPU package given to
  coil_model_run_device) must raise CoilError with the runtime's message;
- with torch: the driver's error metric, target evaluation (also against the matmul peer and for
  the second coil peer), the workloads' declared matrix products, --coil-b-args' way to the
  workload processes, crash placement, table printing on made-up records (with and without the
  coil_b and matmul columns; --report of old and new JSON files together);
- with torch, no GPU: run_workload_cuda end to end on the CPU with host stand-ins for the device
  (eager, compile, matmul, coil, coil_b; poisoned outputs caught), crash isolation, and
  `gpu_bench.py --device-check` of issue 16's workloads with a second coil peer.

usage: gpu_bench_selftest.py [--coil build/bin/coil] [--runtime build/lib/libcoil_runtime.so]
Prints 'N passed, N failed' last; exit 1 when a check fails.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import traceback

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import coilrt  # noqa: E402
import onnx_stats  # noqa: E402

RESULTS = {"passed": 0, "failed": 0, "skipped": 0}


def check(cond, what):
    if cond:
        RESULTS["passed"] += 1
    else:
        RESULTS["failed"] += 1
        print("FAIL: " + what)


def skip(what):
    RESULTS["skipped"] += 1
    print("skipped: " + what)


# ------------------------------------------------------------------------------------ ABI layout

C_LAYOUT = r"""
#include <stddef.h>
#include <stdio.h>
#include "coil/coil.h"
#define F(T, f) printf(#T "." #f " %zu\n", offsetof(T, f))
int main(void) {
  printf("coil_tensor %zu\n", sizeof(coil_tensor));
  F(coil_tensor, data); F(coil_tensor, dtype); F(coil_tensor, rank); F(coil_tensor, shape);
  printf("coil_output %zu\n", sizeof(coil_output));
  F(coil_output, data); F(coil_output, capacity); F(coil_output, dtype); F(coil_output, rank);
  F(coil_output, shape); F(coil_output, owned);
  printf("coil_tensor_info %zu\n", sizeof(coil_tensor_info));
  F(coil_tensor_info, name); F(coil_tensor_info, dtype); F(coil_tensor_info, rank); F(coil_tensor_info, dims);
  printf("COIL_DTYPE_BF16 %d\nCOIL_DTYPE_BOOL %d\nCOIL_MAX_RANK %d\n", COIL_DTYPE_BF16, COIL_DTYPE_BOOL, COIL_MAX_RANK);
  return 0;
}
"""


def test_abi_layout(tmp):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        return skip("abi layout: no C compiler")
    src = os.path.join(tmp, "layout.c")
    exe = os.path.join(tmp, "layout")
    open(src, "w").write(C_LAYOUT)
    r = subprocess.run([cc, "-I", os.path.join(ROOT, "include"), src, "-o", exe], capture_output=True, text=True)
    if r.returncode != 0:
        check(False, "abi layout: C program did not build: " + r.stderr[:300])
        return
    want = dict(line.rsplit(" ", 1) for line in subprocess.run([exe], capture_output=True, text=True).stdout.splitlines())
    for name, cls in (("coil_tensor", coilrt.CoilTensor), ("coil_output", coilrt.CoilOutput),
                      ("coil_tensor_info", coilrt.CoilTensorInfo)):
        import ctypes

        check(int(want[name]) == ctypes.sizeof(cls), "sizeof(%s): C %s, ctypes %d" % (name, want[name], ctypes.sizeof(cls)))
        for f, _ in cls._fields_:
            key = "%s.%s" % (name, f)
            check(int(want[key]) == getattr(cls, f).offset, "offsetof(%s): C %s, ctypes %d" % (key, want[key], getattr(cls, f).offset))
    check(int(want["COIL_DTYPE_BF16"]) == coilrt.DTYPES["bfloat16"], "COIL_DTYPE_BF16 value")
    check(int(want["COIL_DTYPE_BOOL"]) == coilrt.DTYPES["bool"], "COIL_DTYPE_BOOL value")
    check(int(want["COIL_MAX_RANK"]) == coilrt.COIL_MAX_RANK, "COIL_MAX_RANK value")
    check(coilrt.dtype_code("torch.bfloat16") == 3 and coilrt.dtype_code("half") == 2 and coilrt.dtype_code("float32") == 1,
          "dtype_code spellings")
    try:
        coilrt.dtype_code("complex64")
        check(False, "dtype_code(complex64) must raise")
    except coilrt.CoilError as e:
        check("complex64" in str(e), "dtype_code error names the dtype")


# ------------------------------------------------------------------------------------ onnx_stats


def model_of(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def vi(name, et, shape):
    return helper.make_tensor_value_info(name, et, shape)


def test_onnx_stats():
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 5)).astype(np.float32), "w")
    m = model_of([helper.make_node("MatMul", ["a", "w"], ["y"])], [vi("a", TensorProto.FLOAT, [2, 3, 4])],
                 [vi("y", TensorProto.FLOAT, None)], [w])
    flops, unknown = onnx_stats.count_flops(m)
    check(flops == 2 * 2 * 3 * 5 * 4 and not unknown, "MatMul flops %d" % flops)
    check(onnx_stats.initializer_bytes(m) == 4 * 5 * 4, "initializer bytes")
    # Gemm with transA: A is K x M.
    m = model_of([helper.make_node("Gemm", ["a", "b"], ["y"], transA=1)],
                 [vi("a", TensorProto.FLOAT16, [7, 3]), vi("b", TensorProto.FLOAT16, [7, 6])],
                 [vi("y", TensorProto.FLOAT16, None)])
    flops, _ = onnx_stats.count_flops(m)
    check(flops == 2 * 3 * 6 * 7, "Gemm transA flops %d" % flops)
    check(onnx_stats.float_dtype_census(m) == {"float16": 3}, "census %s" % onnx_stats.float_dtype_census(m))
    # Grouped conv: N=2, Cin=4, Cout=6, groups=2, 3x3, stride 1, pad 1, 5x5.
    wc = numpy_helper.from_array(rng.standard_normal((6, 2, 3, 3)).astype(np.float32), "wc")
    m = model_of([helper.make_node("Conv", ["x", "wc"], ["y"], group=2, pads=[1, 1, 1, 1])],
                 [vi("x", TensorProto.FLOAT, [2, 4, 5, 5])], [vi("y", TensorProto.FLOAT, None)], [wc])
    flops, _ = onnx_stats.count_flops(m)
    check(flops == 2 * (2 * 6 * 5 * 5) * (2 * 3 * 3), "grouped Conv flops %d" % flops)
    # ConvTranspose: x 1x4x3x3, w 4x2x2x2 (Cout 2), stride 2: each input element scatters 2*2*2 MACs.
    wt = numpy_helper.from_array(rng.standard_normal((4, 2, 2, 2)).astype(np.float32), "wt")
    m = model_of([helper.make_node("ConvTranspose", ["x", "wt"], ["y"], strides=[2, 2])],
                 [vi("x", TensorProto.FLOAT, [1, 4, 3, 3])], [vi("y", TensorProto.FLOAT, None)], [wt])
    flops, _ = onnx_stats.count_flops(m)
    check(flops == 2 * (4 * 3 * 3) * (2 * 2 * 2), "ConvTranspose flops %d" % flops)
    # Unknown shapes are reported, not guessed.
    m = model_of([helper.make_node("MatMul", ["a", "b"], ["y"])],
                 [vi("a", TensorProto.FLOAT, ["n", 4]), vi("b", TensorProto.FLOAT, [4, 2])], [vi("y", TensorProto.FLOAT, None)])
    flops, unknown = onnx_stats.count_flops(m)
    check(flops == 0 and len(unknown) == 1, "dynamic MatMul: flops %d, unknown %s" % (flops, unknown))
    check(onnx_stats.op_census(m) == {"MatMul": 1}, "op census")


# ------------------------------------------------------------------------- runtime, CPU packages


def bf16_bits(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_value(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def erf(x):
    from math import erf as e

    return np.vectorize(e)(x.astype(np.float64))


def compile_pkg(coil, model, tmp, name):
    path = os.path.join(tmp, name + ".onnx")
    onnx.save(model, path)
    pkg = os.path.join(tmp, name + ".pkg")
    r = subprocess.run([coil, "compile", path, "-o", pkg, "--device", "cpu"], capture_output=True, text=True,
                       env=dict(os.environ, COIL_CACHE_DIR=os.path.join(tmp, "cache")))
    check(r.returncode == 0, "coil compile %s: %s" % (name, r.stderr[-400:]))
    return pkg if r.returncode == 0 else None


def test_runtime(coil, runtime, tmp):
    if not (coil and os.path.exists(coil)) or not (runtime and os.path.exists(runtime)):
        return skip("runtime binding: coil binary or libcoil_runtime.so not found (pass --coil, --runtime)")
    rt = coilrt.Runtime(runtime)
    check(rt.abi_version() >= 1, "model ABI version %d" % rt.abi_version())
    rng = np.random.default_rng(1)
    f = TensorProto.FLOAT

    # 1. fp32 pointwise chain of two inputs: tanh(gelu(x*0.5+1)*y)+x, gelu through Erf.
    half = numpy_helper.from_array(np.array(0.5, np.float32), "half")
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    r2 = numpy_helper.from_array(np.array(1.4142135, np.float32), "r2")
    nodes = [helper.make_node("Mul", ["x", "half"], ["a"]), helper.make_node("Add", ["a", "one"], ["b"]),
             helper.make_node("Div", ["b", "r2"], ["c"]), helper.make_node("Erf", ["c"], ["d"]),
             helper.make_node("Add", ["d", "one"], ["e"]), helper.make_node("Mul", ["b", "e"], ["g0"]),
             helper.make_node("Mul", ["g0", "half"], ["g"]), helper.make_node("Mul", ["g", "y"], ["h"]),
             helper.make_node("Tanh", ["h"], ["t"]), helper.make_node("Add", ["t", "x"], ["out"])]
    m = model_of(nodes, [vi("x", f, [37, 64]), vi("y", f, [37, 64])], [vi("out", f, [37, 64])], [half, one, r2])
    pkg = compile_pkg(coil, m, tmp, "pointwise")
    if pkg:
        x = rng.standard_normal((37, 64)).astype(np.float32)
        y = rng.standard_normal((37, 64)).astype(np.float32)
        b = x.astype(np.float64) * 0.5 + 1
        want = np.tanh(0.5 * b * (1 + erf(b / np.sqrt(2))) * y) + x
        with rt.load(pkg) as model:
            check([i["name"] for i in model.inputs] == ["x", "y"], "input names %s" % model.inputs)
            check(model.inputs[0]["dtype"] == "float32" and model.inputs[0]["dims"] == ["37", "64"], "input info %s" % model.inputs[0])
            check(model.outputs[0]["name"] == "out" and model.device == "cpu", "output info, device")
            order = model.input_order(["y", "x"])
            check(order == [1, 0], "input_order %s" % order)
            feeds = [[y, x][j] for j in order]
            buf = np.full((37, 64), np.nan, np.float32)
            (raw, dt, shape), = model.run_host(feeds, out_arrays=[buf])
            check(raw is buf and dt == "float32" and shape == (37, 64), "caller buffer result")
            err = np.abs(buf - want).max()
            check(np.isfinite(buf).all() and err < 1e-5, "pointwise max error %g" % err)
            (raw2, _, _), = model.run_host(feeds)
            check(np.array_equal(raw2.view(np.float32).reshape(37, 64), buf), "runtime-allocated output equals the caller buffer's")
            try:
                model.run_host([x])
                check(False, "one input for two must raise")
            except coilrt.CoilError as e:
                check("2" in str(e), "count error: %s" % e)
            try:
                model.run_host([x.astype(np.float64), y])
                check(False, "a float64 input must be rejected")
            except coilrt.CoilError as e:
                check("coil_model_run failed" in str(e) and len(str(e)) > 40, "dtype error carries the runtime's message: %s" % e)
            try:
                model.run_host(feeds, out_arrays=[np.empty((3,), np.float32)])
                check(False, "a too-small caller buffer must be rejected")
            except coilrt.CoilError as e:
                check("invalid argument" in str(e), "small buffer error: %s" % e)
            call = model.device_call([(x.ctypes.data, "float32", x.shape), (y.ctypes.data, "float32", y.shape)],
                                     [(buf.ctypes.data, buf.nbytes)])
            try:
                call(0)
                check(False, "coil_model_run_device on a cpu package must fail")
            except coilrt.CoilError as e:
                check("cpu" in str(e), "device run error: %s" % e)
        try:
            rt.load(os.path.join(tmp, "no-such.pkg"))
            check(False, "loading a missing package must raise")
        except coilrt.CoilError as e:
            check("coil_model_load" in str(e), "load error: %s" % e)

    # 2. bf16 softmax over the last axis.
    m = model_of([helper.make_node("Softmax", ["x"], ["out"], axis=-1)], [vi("x", TensorProto.BFLOAT16, [16, 96])],
                 [vi("out", TensorProto.BFLOAT16, [16, 96])])
    pkg = compile_pkg(coil, m, tmp, "softmax_bf16")
    if pkg:
        xb = bf16_bits(rng.standard_normal((16, 96)) * 3)
        xv = bf16_value(xb).astype(np.float64)
        e = np.exp(xv - xv.max(-1, keepdims=True))
        want = e / e.sum(-1, keepdims=True)
        with rt.load(pkg) as model:
            check(model.inputs[0]["dtype"] == "bfloat16", "bf16 input info")
            buf = np.full((16, 96), 0x7FC0, np.uint16)  # bf16 NaN
            (raw, dt, shape), = model.run_host([xb], ["bfloat16"], out_arrays=[buf])
            got = bf16_value(buf)
            err = np.abs(got - want).max() / np.abs(want).max()
            check(dt == "bfloat16" and np.isfinite(got).all() and err < 1e-2, "bf16 softmax rel error %g" % err)

    # 3. fp32 Gemm + bias + Relu (weights as initializers).
    wt = rng.standard_normal((24, 40)).astype(np.float32) / 5
    bias = rng.standard_normal(24).astype(np.float32)
    m = model_of([helper.make_node("Gemm", ["x", "w", "b"], ["z"], transB=1), helper.make_node("Relu", ["z"], ["out"])],
                 [vi("x", f, [8, 40])], [vi("out", f, [8, 24])],
                 [numpy_helper.from_array(wt, "w"), numpy_helper.from_array(bias, "b")])
    pkg = compile_pkg(coil, m, tmp, "gemm")
    if pkg:
        x = rng.standard_normal((8, 40)).astype(np.float32)
        want = np.maximum(x.astype(np.float64) @ wt.T + bias, 0)
        with rt.load(pkg) as model:
            (raw, _, shape), = model.run_host([x])
            got = raw.view(np.float32).reshape(shape)
            err = np.abs(got - want).max()
            check(shape == (8, 24) and err < 1e-4, "gemm max error %g" % err)


# ------------------------------------------------------------------------- driver (needs torch)


def test_driver():
    try:
        import torch
    except ImportError:
        return skip("driver checks: no torch")
    import gpu_bench as gb

    a = torch.randn(100, dtype=torch.float32)
    c = gb.compare(a, a)
    check(c["rel_norm"] == 0 and c["max_abs"] == 0, "compare identical")
    b = a.clone()
    b[7] += 0.5
    c = gb.compare(b, a)
    check(abs(c["max_abs"] - 0.5) < 1e-6 and 0 < c["rel_norm"] < 1, "compare perturbed %s" % c)
    b[3] = float("nan")
    check(gb.compare(b, a)["rel_norm"] == float("inf"), "NaN never passes")
    check(not gb.compare(a.reshape(10, 10), a)["ok_shape"], "shape mismatch detected")
    h = a.to(torch.bfloat16)
    c = gb.compare(h, a)
    check(1e-4 < c["rel_norm"] < 1e-2, "bf16 rounding error in range: %s" % c)
    raw, dt = gb.to_numpy_raw(h)
    check(dt == "bfloat16" and raw.dtype == np.uint16 and torch.equal(gb.from_raw(raw, dt, (100,)), h), "bf16 raw round trip")

    def rec(coil_ms, peer_ms, gbps=None):
        r = {"peers": {"coil": {"ms": coil_ms}, "compile": {"ms": peer_ms}, "eager": {"ms": peer_ms * 2}}}
        if gbps is not None:
            r["peers"]["coil"]["gbps"] = gbps
        return r

    t = {"kind": "vs", "peer": "compile", "factor": 1.05}
    check(gb.evaluate_target(t, rec(1.04, 1.0), False)[1] is True, "1.04x within 1.05x")
    check(gb.evaluate_target(t, rec(1.06, 1.0), False)[1] is False, "1.06x not within 1.05x")
    check(gb.evaluate_target(t, rec(1.0, 1.0), True)[1] is None, "quick: not evaluated")
    check(gb.evaluate_target({"kind": "vs", "peer": "eager", "factor": 1.1}, rec(2.1, 1.0), False)[1] is True, "vs eager")
    check(gb.evaluate_target({"kind": "gbps", "value": 3400}, rec(1, 1, 3300.0), False)[1] is False, "gbps below")
    check(gb.evaluate_target({"kind": "gbps", "value": 3400}, rec(1, 1, 3500.0), False)[1] is True, "gbps above")
    missing = {"peers": {"coil": {"error": "x"}, "compile": {"ms": 1.0}}}
    check(gb.evaluate_target(t, missing, False)[1] is None, "no coil time: not evaluated")
    # Targets against the matmul peer, and a target met by the second coil peer.
    import gpu_workloads

    tm = {"kind": "vs", "peer": "matmul", "factor": 1.05}
    check(gpu_workloads.target_text(tm) == "<= 1.05x torch.matmul", "matmul target text: " + gpu_workloads.target_text(tm))
    r = rec(1.04, 1.0)
    r["peers"]["matmul"] = {"ms": 1.0}
    r["peers"]["coil_b"] = {"ms": 1.1}
    check(gb.evaluate_target(tm, r, False)[1:] == (True, 1.04), "1.04x matmul within 1.05x")
    check(gb.evaluate_target(tm, r, False, "coil_b")[1] is False, "coil_b: 1.1x matmul not within 1.05x")
    check(gb.evaluate_target(tm, rec(1.0, 1.0), False)[1] is None, "no matmul peer: not evaluated")
    check(gb.evaluate_target(t, rec(1.0, 1.0), False, "coil_b")[1] is None, "no coil_b: not evaluated")
    # Declared matrix products: none, one, several; each a GEMM of the workload's input.
    check(gpu_workloads.BY_NAME["pointwise"].matmuls({"rows": 1, "cols": 1}) == [], "no matmul declared")
    for name in ("gemm_epilogue", "mlp", "linear_relu", "gemm_ln"):
        w = gpu_workloads.BY_NAME[name]
        for sizes in (w.sizes, w.quick_sizes):
            mms = w.matmuls(sizes)
            _, shapes, _, _ = w.make(sizes)
            check(mms and all(len(x) == 3 for x in mms) and mms[0][:2] == tuple(shapes[0]),
                  "%s matmul %s fits its input %s" % (name, mms, shapes[0]))
    check(len(gpu_workloads.BY_NAME["mlp"].matmuls({"batch": 2, "width": 3})) == 4, "mlp: its 4 GEMMs")
    check(gpu_workloads.BY_NAME["linear_relu"].target == tm, "linear_relu's target")
    # The second coil peer's options reach the workload processes (an empty ARGS is a peer too).
    a = gb.parse_args(["--coil-b-args=--arch sm_90a --gemm cublaslt", "--coil-b-name", "cublaslt"])
    check(gb.coil_peers(a) == [("coil", ""), ("coil_b", "--arch sm_90a --gemm cublaslt")], "coil peers %s" % gb.coil_peers(a))
    argv = gb.child_argv(a, "mlp", "o.json")
    check("--coil-b-args=--arch sm_90a --gemm cublaslt" in argv and "--coil-b-name=cublaslt" in argv, "child argv %s" % argv)
    a = gb.parse_args(["--coil-b-args="])
    check(gb.coil_peers(a) == [("coil", ""), ("coil_b", "")] and "--coil-b-args=" in gb.child_argv(a, "x", "o"),
          "empty --coil-b-args")
    a = gb.parse_args([])
    check(gb.coil_peers(a) == [("coil", "")] and not any("coil-b" in x for x in gb.child_argv(a, "x", "o")),
          "no coil_b by default")
    # A crash while coil_b or matmul runs is placed in that peer.
    for stage in ("coil_b", "matmul"):
        doc = {"stage": stage, "rec": {"name": "w", "peers": {"coil": {"ms": 1.0}, stage: {"compile_s": 1.0}}, "notes": []}}
        got = gb.finish_record(gpu_workloads.BY_NAME["mlp"], doc, -6)
        check("during %s" % stage in got["peers"][stage].get("error", "") and "error" not in got, "crash in %s placed" % stage)

    bw = {"kind": "bw", "bytes": 4e9, "flops": 0}
    ach = gb.achieved(bw, 1.0, {"copy_gbps": 4000.0}, "float32")
    check(abs(ach["gbps"] - 4000) < 1e-6 and abs(ach["of_ceiling"] - 1) < 1e-9, "achieved GB/s %s" % ach)
    fl = {"kind": "flop", "bytes": 0, "flops": 1e12}
    ach = gb.achieved(fl, 2.0, {"gemm_tflops_bfloat16": 800.0}, "bfloat16")
    check(abs(ach["tflops"] - 500) < 1e-6 and abs(ach["of_ceiling"] - 0.625) < 1e-9, "achieved TFLOP/s %s" % ach)

    # Table: every row has the header's number of cells, failures are listed as notes.
    import argparse

    results = [
        {"name": "softmax", "dtype": "bfloat16", "kind": "bw", "sizes": {"rows": 4}, "notes": [], "exporter": "torchscript",
         "onnx_float_dtypes": {"bfloat16": 2}, "target_text": "<= 1.05x compile", "holds": False,
         "peers": {"eager": {"ms": 1.0, "min_ms": 0.9, "max_ms": 1.1, "gbps": 100.0},
                   "compile": {"ms": 0.5, "min_ms": 0.4, "max_ms": 0.6, "gbps": 200.0, "compile_s": 3.0},
                   "coil": {"error": "coil compile exit 1: error: op X unsupported", "compile_s": 1.0}}},
        {"name": "mlp", "dtype": "bfloat16", "kind": "flop", "error": "export: boom", "peers": {}, "notes": [],
         "target_text": "<= 1.10x eager"},
    ]
    import contextlib
    import io

    def tables(results, mat):
        args = argparse.Namespace(quick=False, iters=100, warmup=10, max_autotune=mat)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            text = gb.print_tables(results, {"copy_gbps": 4200.0}, args, {"date": "2026-01-01T00:00:00"})
        rows = [l for l in text.splitlines() if l.startswith("|")]
        n_main = 2 + len(results)
        check(len({l.count("|") for l in rows[:n_main]}) == 1, "main table rows have equal cell counts (mat=%s)" % mat)
        check(len({l.count("|") for l in rows[n_main:]}) == 1, "details table rows have equal cell counts (mat=%s)" % mat)
        return text, rows

    for mat in (False, True):
        text, _ = tables(results, mat)
        check("op X unsupported" in text and "export: boom" in text, "failures listed in notes")
        check("| softmax | bfloat16 | FAIL | 1.000 | 0.500 |" in text, "coil failure shown in its row")
        check("matmul ms" not in text and "coil_b" not in text, "no matmul / coil_b columns without those peers")
    # A run with the second coil peer and a matmul peer: their columns and ratios.
    gemm = {"name": "linear_relu", "dtype": "bfloat16", "kind": "flop", "sizes": {"m": 4}, "notes": [],
            "exporter": "torchscript", "onnx_float_dtypes": {"bfloat16": 5}, "target_text": "<= 1.05x torch.matmul",
            "holds": True, "holds_b": False,
            "peers": {"eager": {"ms": 1.2, "min_ms": 1.1, "max_ms": 1.3},
                      "compile": {"ms": 1.1, "min_ms": 1.0, "max_ms": 1.2, "compile_s": 3.0},
                      "matmul": {"ms": 1.0, "min_ms": 0.9, "max_ms": 1.1, "tflops": 700.0},
                      "coil": {"ms": 1.02, "min_ms": 1.0, "max_ms": 1.1, "compile_s": 2.0, "coil_args": "--gemm cutlass"},
                      "coil_b": {"ms": 1.53, "min_ms": 1.5, "max_ms": 1.6, "compile_s": 2.5, "name": "cublaslt",
                                 "coil_args": "--gemm cublaslt", "err": {"rel_norm": 1e-3, "max_rel": 2e-3, "detail": ""}}}}
    for mat in (False, True):
        text, rows = tables(results + [gemm], mat)
        head = rows[0]
        for col in ("| cublaslt ms |", "| matmul ms |", "| coil/matmul |", "| cublaslt/coil |", "| cublaslt holds |"):
            check(col in head, "column %s in %s" % (col, head))
        row = next(l for l in rows if l.startswith("| linear_relu |"))
        cells = dict(zip(head.split("|")[1:-1], row.split("|")[1:-1]))
        cells = {k.strip(): v.strip() for k, v in cells.items()}
        check(cells["cublaslt ms"] == "1.530" and cells["cublaslt/coil"] == "1.50" and cells["coil/matmul"] == "1.02"
              and cells["holds"] == "yes" and cells["cublaslt holds"] == "no", "coil_b and matmul cells %s" % cells)
        fail_row = next(l for l in rows if l.startswith("| mlp |"))
        check(fail_row.split("|")[3].strip() == "FAIL" and "<= 1.10x eager" in fail_row, "failed row: " + fail_row)
        check("'--gemm cublaslt'" in text and "cublaslt err vs eager" in text and "1.0e-03" in text,
              "coil_b's arguments and error reported")

    # --report joins the workloads of several runs' JSON files into one table.
    import json

    tmp = tempfile.mkdtemp(prefix="gpu-bench-report-")
    try:
        paths = []
        for i, r in enumerate(results):
            path = os.path.join(tmp, "r%d.json" % i)
            json.dump({"mode": "cuda", "env": {"date": "2026-01-0%dT00:00:00" % (i + 1)}, "ceilings": {"copy_gbps": 4000.0 + i},
                       "args": {"iters": 100, "warmup": 10, "quick": False, "max_autotune": False}, "workloads": [r]},
                      open(path, "w"))
            paths.append(path)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = gb.report(paths)
        text = buf.getvalue()
        check(rc == 0 and "| softmax |" in text and "| mlp |" in text and "(2 runs;" in text, "report of two runs")
        # An older run (no coil_b, no matmul) joined with a newer one.
        path = os.path.join(tmp, "r_new.json")
        json.dump({"mode": "cuda", "env": {"date": "2026-02-01T00:00:00"}, "ceilings": {},
                   "args": {"iters": 100, "warmup": 10, "quick": False, "max_autotune": False}, "workloads": [gemm]},
                  open(path, "w"))
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = gb.report(paths + [path])
        text = buf.getvalue()
        check(rc == 0 and "| linear_relu |" in text and "| cublaslt ms |" in text and "| softmax |" in text,
              "report of an old and a new run")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# A runtime whose coil_model_load aborts: the driver must report the crash in the coil column of
# that workload (its own process died), not die itself.
CRASHING_RUNTIME = r"""
#include <stdlib.h>
#include <stdint.h>
const char *coil_last_error(void) { return ""; }
const char *coil_dtype_name(int d) { (void)d; return ""; }
uint32_t coil_runtime_model_abi_version(void) { return 2; }
int coil_model_load(const char *p, void **m) { (void)p; (void)m; abort(); }
void coil_model_free(void *m) { (void)m; }
int64_t coil_model_num_inputs(const void *m) { (void)m; return 0; }
int64_t coil_model_num_outputs(const void *m) { (void)m; return 0; }
int64_t coil_model_num_symbols(const void *m) { (void)m; return 0; }
int coil_model_input_info(const void *m, int64_t i, void *o) { (void)m; (void)i; (void)o; return 1; }
int coil_model_output_info(const void *m, int64_t i, void *o) { (void)m; (void)i; (void)o; return 1; }
int coil_model_run(void *m, const void *i, int64_t n, void *o, int64_t k) { (void)m; (void)i; (void)n; (void)o; (void)k; return 1; }
int coil_model_device(const void *m) { (void)m; return 0; }
int coil_model_run_device(void *m, const void *i, int64_t n, void *o, int64_t k, void *s) { (void)m; (void)i; (void)n; (void)o; (void)k; (void)s; return 1; }
void coil_output_release(void *o) { (void)o; }
"""


def test_crash_isolation(coil, tmp):
    try:
        import torch  # noqa: F401
    except ImportError:
        return skip("crash isolation: no torch")
    if torch.cuda.is_available():
        return skip("crash isolation: runs on machines without a GPU only")
    if not (coil and os.path.exists(coil)):
        return skip("crash isolation: no coil binary")
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return skip("crash isolation: no C compiler")
    src = os.path.join(tmp, "crash.c")
    so = os.path.join(tmp, "libcrash.so")
    open(src, "w").write(CRASHING_RUNTIME)
    r = subprocess.run([cc, "-shared", "-fPIC", src, "-o", so], capture_output=True, text=True)
    check(r.returncode == 0, "crashing runtime builds: " + r.stderr[:200])
    work = os.path.join(tmp, "crashwork")
    out = os.path.join(work, "r.json")
    r = subprocess.run([sys.executable, os.path.join(HERE, "gpu_bench.py"), "--device-check", "--coil", coil,
                        "--runtime", so, "--workloads", "softmax,pointwise", "--work", work, "--json", out],
                       capture_output=True, text=True, timeout=600)
    check(r.returncode == 1, "a crashed workload makes the run fail (exit %d)" % r.returncode)
    check("0 passed, 2 failed" in r.stdout, "both workloads reported: " + r.stdout[-300:])
    import json

    doc = json.load(open(out))
    names = [w["name"] for w in doc["workloads"]]
    check(names == ["softmax", "pointwise"], "both workloads in the JSON: %s" % names)
    for w in doc["workloads"]:
        e = w["peers"].get("coil", {}).get("error", "")
        check("during coil" in e and "compile_s" in w["peers"]["coil"], "%s: crash placed in coil: %s" % (w["name"], e))


def test_host_device_check(coil, runtime, tmp):
    """--device-check without a GPU on issue 16's workloads, with a second coil peer: both
    packages run through coil_model_run and are checked against eager; both shown in the table."""
    try:
        import torch
    except ImportError:
        return skip("host device check: no torch")
    if torch.cuda.is_available():
        return skip("host device check: runs on machines without a GPU only")
    if not (os.path.exists(coil) and os.path.exists(runtime)):
        return skip("host device check: coil binary or runtime not found")
    work = os.path.join(tmp, "hostcheck")
    out = os.path.join(work, "r.json")
    r = subprocess.run([sys.executable, os.path.join(HERE, "gpu_bench.py"), "--device-check", "--coil", coil,
                        "--runtime", runtime, "--workloads", "linear_relu,gemm_ln", "--work", work, "--json", out,
                        "--coil-b-args=--no-tune", "--coil-b-name", "twin"], capture_output=True, text=True, timeout=900)
    check(r.returncode == 0 and "2 passed, 0 failed" in r.stdout, "device check of linear_relu, gemm_ln with coil_b "
          "(exit %d): %s %s" % (r.returncode, r.stdout[-600:], r.stderr[-600:]))
    check("| twin compile s | twin host ms | twin err vs eager |" in r.stdout, "coil_b's columns in the host table")
    import json

    doc = json.load(open(out))
    for w in doc["workloads"]:
        for peer in ("coil", "coil_b"):
            p = w["peers"].get(peer, {})
            check("host_ms" in p and p["err"]["rel_norm"] < 1e-2, "%s %s: %s" % (w["name"], peer, p))
        check(w["peers"]["coil_b"].get("coil_args") == "--no-tune", "%s: coil_b's arguments recorded" % w["name"])
    check(os.path.isdir(os.path.join(work, "linear_relu_quick.coil_b.cpu.pkg")), "coil_b's CPU package of its own")


class HostTimer:
    """CudaTimer's interface on the host clock (for the emulated device path)."""

    def __init__(self, iters):
        self.iters = iters

    def time(self, fn, iters=None):
        import time

        import gpu_bench as gb

        fn()
        ts = []
        for _ in range(iters or self.iters):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
        return gb.summarize(ts)


class HostDeviceCall(coilrt.DeviceCall):
    """coil_model_run_device's call, made with coil_model_run on the same (host) pointers."""

    def __init__(self, model, inputs, outputs, break_it=False):
        super().__init__(model, inputs, outputs)
        self.break_it = break_it
        self.streams = []

    def __call__(self, stream=0):
        self.streams.append(stream)
        scratch = []
        for i, (ptr, cap) in enumerate(self.out_spec):
            if self.break_it:  # a run that writes its outputs elsewhere: the poison must be caught
                scratch.append(np.empty(cap, np.uint8))
                ptr = scratch[-1].ctypes.data
            self.outs[i].data, self.outs[i].capacity, self.outs[i].owned = ptr, cap, 0
        self.model.rt.check(self.model.rt.lib.coil_model_run(self.handle, self.ins, self.n_in, self.outs, self.n_out),
                            "coil_model_run")


def test_emulated_device_path(coil, runtime, tmp):
    """run_workload_cuda end to end on the CPU: the device operations of its context replaced by
    host ones, coil's CPU package run through the same prepared argument arrays."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return skip("emulated device path: no torch")
    if not (os.path.exists(coil) and os.path.exists(runtime)):
        return skip("emulated device path: coil binary or runtime not found")
    import argparse

    import gpu_bench as gb
    import gpu_workloads

    rt = coilrt.Runtime(runtime)
    calls = []

    class Rt:
        def __init__(self, break_it):
            self.break_it = break_it

        def load(self, pkg):
            m = rt.load(pkg)
            m.device_call = lambda ins, outs: calls.append(HostDeviceCall(m, ins, outs, self.break_it)) or calls[-1]
            return m

    for break_it in (False, True):
        work = os.path.join(tmp, "emul%d" % break_it)
        os.makedirs(work)
        args = argparse.Namespace(quick=True, work=work, seed=0, opset=17, exporter="auto", max_autotune=False,
                                  coil=coil, coil_args="", keep_cache=False, compile_timeout=300,
                                  coil_b_args="--no-tune", coil_b_name="twin")
        ctx = gb.Ctx()
        ctx.device, ctx.coil_device = "cpu", "cpu"
        ctx.sync = ctx.empty_cache = lambda: None
        ctx.stream_handle = lambda: 4242
        ctx.timer = HostTimer(3)
        ctx.rt, ctx.rt_error = Rt(break_it), ""
        ctx.logf = gb.Log(os.path.join(work, "log"))
        stages = []
        rec = gb.run_workload_cuda(gpu_workloads.BY_NAME["gemm_epilogue"], args, ctx, stages.append)
        coil_rec = rec["peers"]["coil"]
        check(stages[0] == "export" and "coil" in stages and "eager" in stages and "compile" in stages,
              "stages saved %s" % stages)
        order = [p for p in gb.PEERS if p in stages]
        check(order == ["eager", "compile", "matmul", "coil", "coil_b"] and list(rec["peers"]) == order,
              "peers in order: stages %s, peers %s" % (order, list(rec["peers"])))
        mm = rec["peers"]["matmul"]
        check("ms" in mm and mm["shapes"] == [[64, 256, 256]] and mm["flops"] == rec["flops"] and not rec["notes"],
              "matmul peer timed at the GEMM's size: %s %s" % (mm, rec["notes"]))
        b_rec = rec["peers"]["coil_b"]
        check(b_rec.get("name") == "twin" and b_rec.get("coil_args") == "--no-tune" and "compile_s" in b_rec
              and coil_rec.get("coil_args") == "", "coil_b's record: %s" % b_rec)
        check(os.path.isdir(os.path.join(work, "gemm_epilogue_quick.coil_b.cpu.pkg")), "coil_b's package of its own")
        check(rec["flops"] == 2 * 64 * 256 * 256 and rec["onnx_float_dtypes"] == {"bfloat16": 13}, "flops, dtypes %s %s"
              % (rec["flops"], rec["onnx_float_dtypes"]))
        check(rec["bytes"] == 2 * (64 * 256 * 2) + (256 * 256 + 256) * 2, "bytes %d" % rec["bytes"])
        check("ms" in rec["peers"]["eager"] and "err" in rec["peers"]["compile"] and rec["peers"]["compile"]["err"]["rel_norm"] < 1e-2,
              "eager and compile measured: %s" % {k: v.get("error") for k, v in rec["peers"].items()})
        check("err_vs_fp32" in coil_rec and "eager_err_vs_fp32" in rec, "fp32 reference errors recorded: %s" % coil_rec)
        check(len(calls) >= 2 and all(c.streams and set(c.streams) == {4242} for c in calls[-2:]),
              "coil and coil_b called on the context's stream")
        for peer, p, c in (("coil", coil_rec, calls[-2]), ("coil_b", b_rec, calls[-1])):
            if not break_it:
                check("ms" in p and p["err"]["rel_norm"] < 1e-2 and "error" not in p, "%s measured: %s" % (peer, p))
                check(len(c.streams) == 1 + 1 + 3, "%s: one check run, one warm-up, 3 timed runs: %d" % (peer, len(c.streams)))
            else:
                check("ms" not in p and "wrong result" in p.get("error", "") and "non-finite" in p["error"],
                      "%s: unwritten (poisoned) outputs caught: %s" % (peer, p.get("error")))
        ctx.logf.f.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coil", default=os.path.join(ROOT, "build", "bin", "coil"))
    ap.add_argument("--runtime", default=os.path.join(ROOT, "build", "lib", "libcoil_runtime.so"))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="gpu-bench-selftest-")
    try:
        groups = [("abi layout", lambda: test_abi_layout(tmp)), ("onnx_stats", test_onnx_stats),
                  ("runtime", lambda: test_runtime(os.path.abspath(args.coil), os.path.abspath(args.runtime), tmp)),
                  ("driver", test_driver),
                  ("emulated device path", lambda: test_emulated_device_path(os.path.abspath(args.coil),
                                                                             os.path.abspath(args.runtime), tmp)),
                  ("crash isolation", lambda: test_crash_isolation(os.path.abspath(args.coil), tmp)),
                  ("host device check", lambda: test_host_device_check(os.path.abspath(args.coil),
                                                                       os.path.abspath(args.runtime), tmp))]
        for name, fn in groups:
            try:
                fn()
            except Exception:  # noqa: BLE001 - an exception fails its group, the others still run
                check(False, "%s raised:\n%s" % (name, traceback.format_exc()))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed, %d skipped" % (RESULTS["passed"], RESULTS["failed"], RESULTS["skipped"]))
    return 1 if RESULTS["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
