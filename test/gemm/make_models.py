#!/usr/bin/env python3
"""The GEMM + epilogue models of test/gemm (sched/FuseGemmEpilogue.h): one ONNX file per
pattern, each with the fusion decision `coil inspect --fusion` must report for it (EXPECT below),
written to --out. The rows of every GEMM are symbolic (B x 200: not a multiple of any tile), the
weights random constants in the model's dtype.

usage: make_models.py --out DIR
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

DT = {"bf16": T.BFLOAT16, "f16": T.FLOAT16, "f32": T.FLOAT}

# name -> the `gemm:` lines of coil inspect --fusion (substrings, in order).
EXPECT = {
    "mm_bias_gelu_res": ["CUTLASS, fused into kernel"],
    "gemm_t_bias_sigmoid": ["CUTLASS, fused into kernel"],
    "mm_swiglu": ["CUTLASS, fused into kernel", "cuBLASLt (its reader already computes a GEMM)"],
    "mm_colscale_clip": ["CUTLASS, fused into kernel"],
    "mm_bias_relu_f32out": ["CUTLASS, fused into kernel"],
    "mm_where_tanh": ["CUTLASS, fused into kernel"],
    "gemm_ta_tanh": ["CUTLASS, fused into kernel"],
    "mm_k100": ["cuBLASLt (k and n must be constant multiples of 8)"],
    "mm_output_too": ["cuBLASLt (its product is a model output)"],
    "mm_f32": ["cuBLASLt (f32: CUTLASS GEMMs are generated for f16 and bf16)"],
}

ROWS = 200


def weight(name, shape, dtype, seed):
    a = np.random.RandomState(seed).uniform(-0.1, 0.1, shape).astype(np.float32)
    t = nh.from_array(a, name + "_f32")
    node = h.make_node("Cast", [name + "_f32"], [name], to=DT[dtype])
    return t, node


def model(name, dtype, nodes, inits, inputs, outputs):
    g = h.make_graph(nodes, name, inputs, outputs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 20)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def build(name):
    dtype = "f16" if name in ("gemm_t_bias_sigmoid", "mm_colscale_clip") else "bf16"
    if name == "mm_f32":
        dtype = "f32"
    k, n = (100, 256) if name == "mm_k100" else (256, 512)
    dt = DT[dtype]
    x = h.make_tensor_value_info("x", dt, ["B", ROWS, k])
    inits, nodes = [], []

    def w(wname, shape, seed):
        t, c = weight(wname, shape, dtype, seed)
        inits.append(t)
        nodes.append(c)

    out = lambda nm="out", t=dt: h.make_tensor_value_info(nm, t, ["B", ROWS, n])
    if name == "mm_bias_gelu_res":
        w("W", [k, n], 1)
        w("b", [n], 2)
        nodes += [h.make_node("MatMul", ["x", "W"], ["y"]), h.make_node("Add", ["y", "b"], ["yb"]),
                  h.make_node("Gelu", ["yb"], ["g"]), h.make_node("Add", ["g", "r"], ["out"])]
        return model(name, dtype, nodes, inits, [x, h.make_tensor_value_info("r", dt, ["B", ROWS, n])], [out()])
    if name == "gemm_t_bias_sigmoid":
        x2 = h.make_tensor_value_info("x", dt, ["M", k])
        w("W", [n, k], 3)
        w("b", [n], 4)
        nodes += [h.make_node("Gemm", ["x", "W", "b"], ["y"], transB=1), h.make_node("Sigmoid", ["y"], ["out"])]
        return model(name, dtype, nodes, inits, [x2], [h.make_tensor_value_info("out", dt, ["M", n])])
    if name == "mm_swiglu":
        w("W1", [k, n], 5)
        w("W2", [k, n], 6)
        nodes += [h.make_node("MatMul", ["x", "W1"], ["a"]), h.make_node("MatMul", ["x", "W2"], ["c"]),
                  h.make_node("Sigmoid", ["a"], ["sa"]), h.make_node("Mul", ["a", "sa"], ["silu"]),
                  h.make_node("Mul", ["silu", "c"], ["out"])]
        return model(name, dtype, nodes, inits, [x], [out()])
    if name == "mm_colscale_clip":
        w("W", [k, n], 7)
        nodes += [h.make_node("MatMul", ["x", "W"], ["y"]), h.make_node("Mul", ["y", "s"], ["ys"]),
                  h.make_node("Clip", ["ys", "lo", "hi"], ["out"])]
        inits += [nh.from_array(np.array(-0.5, np.float16), "lo"), nh.from_array(np.array(0.5, np.float16), "hi")]
        s = h.make_tensor_value_info("s", dt, ["B", ROWS, 1])
        return model(name, dtype, nodes, inits, [x, s], [out()])
    if name == "mm_bias_relu_f32out":
        w("W", [k, n], 8)
        w("b", [n], 9)
        nodes += [h.make_node("MatMul", ["x", "W"], ["y"]), h.make_node("Add", ["y", "b"], ["yb"]),
                  h.make_node("Relu", ["yb"], ["r"]), h.make_node("Cast", ["r"], ["out"], to=T.FLOAT)]
        return model(name, dtype, nodes, inits, [x], [out(t=T.FLOAT)])
    if name == "mm_where_tanh":
        w("W", [k, n], 10)
        half = nh.from_array(np.array(0.05, np.float32), "half_f32")
        tenth = nh.from_array(np.array(0.1, np.float32), "tenth_f32")
        inits += [half, tenth]
        nodes += [h.make_node("Cast", ["half_f32"], ["half"], to=dt), h.make_node("Cast", ["tenth_f32"], ["tenth"], to=dt),
                  h.make_node("MatMul", ["x", "W"], ["y"]), h.make_node("Tanh", ["y"], ["t"]),
                  h.make_node("Greater", ["t", "half"], ["big"]), h.make_node("Mul", ["t", "tenth"], ["small"]),
                  h.make_node("Where", ["big", "t", "small"], ["out"])]
        return model(name, dtype, nodes, inits, [x], [out()])
    if name == "gemm_ta_tanh":
        # A transposed (column-major for CUTLASS); with M = 3 (coil verify's random sizes) TMA
        # cannot load it (rows of 6 bytes): the kernel falls back to the unfused pair.
        xt = h.make_tensor_value_info("x", dt, [k, "M"])
        w("W", [k, n], 13)
        nodes += [h.make_node("Gemm", ["x", "W"], ["y"], transA=1), h.make_node("Tanh", ["y"], ["out"])]
        return model(name, dtype, nodes, inits, [xt], [h.make_tensor_value_info("out", dt, ["M", n])])
    if name in ("mm_k100", "mm_f32"):
        w("W", [k, n], 11)
        nodes += [h.make_node("MatMul", ["x", "W"], ["y"]), h.make_node("Relu", ["y"], ["r"]),
                  h.make_node("Mul", ["r", "r"], ["out"])]
        return model(name, dtype, nodes, inits, [x], [out()])
    if name == "mm_output_too":
        w("W", [k, n], 12)
        nodes += [h.make_node("MatMul", ["x", "W"], ["y"]), h.make_node("Tanh", ["y"], ["out"])]
        return model(name, dtype, nodes, inits, [x], [out(), out("y")])
    raise KeyError(name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in EXPECT:
        onnx.save(build(name), os.path.join(args.out, name + ".onnx"))


if __name__ == "__main__":
    main()
