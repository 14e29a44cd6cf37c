#!/usr/bin/env python3
"""Differential testing of the compiler: random valid ONNX graphs, compiled and run, against the
reference interpreter (and the interpreter against onnxruntime).

usage: scripts/difftest.py --count N [--seed S] [--coil build/bin/coil] [--device cpu|cuda]
                           [--batch B] [--work DIR] [--jobs J] [--no-ort] [--minimize]
                           [--time-limit S]
       scripts/difftest.py --replay DIR        (the committed regressions, test/difftest/)

Each model holds --batch independent random subgraphs (NNSmith-style: a pool of typed tensors
grows by one op at a time, operands drawn from the pool): pointwise unary and binary ops with
broadcasting, comparisons, Where, Cast, reductions, ArgMax, MatMul, Gemm, Einsum, Conv,
pooling, Softmax, LogSoftmax, LayerNormalization, BatchNormalization, InstanceNormalization,
Reshape, Transpose, Concat, Slice, Gather, GatherElements, Squeeze, Unsqueeze, Expand, Flatten,
Pad, Tile, CumSum, Trilu, PRelu, DepthToSpace, SpaceToDepth, Mod; dtypes f32, f64, f16 and
i32/i64; dims mostly small, some around vector widths; a dynamic batch dim `N` on some inputs
(declared as dim_param; each model runs at the value the generator planned for and at a
second one); attributes in their legal ranges. Every tensor carries a bound on its magnitude; ops that could overflow
it (Exp, Mul, MatMul) are chosen only under a bound, and squashing ops (Tanh, Sigmoid, Softmax,
LayerNormalization) bring it back, so that no output depends on overflow or on where rounding
flips a discontinuity: discontinuous ops (Floor, Sign, comparisons, float-to-int Cast, ArgMax)
take only exact tensors (graph inputs and integer results of them).

A model is `coil compile`d for --device, and run by `coil run --poison` (outputs in caller
buffers filled with 0xff bytes first) on random inputs; `coil interpret` runs it on the same
inputs; onnxruntime too unless --no-ort. Outputs must agree within the tolerance of their dtype
(TOLERANCES below, for the least precise float dtype the output was computed through: an f64
output cast from f32 math gets f32's; the error of an element is measured against the output's
largest magnitude, |got - want| <= atol * max(1, max|want|) + rtol * |want|; NaN where the
reference has NaN, infinities equal; integers and bool exactly). A model that the interpreter accepts and the compiler rejects or
crashes on is a failure too; one the interpreter rejects is a generator bug (counted, reported).

--minimize reduces each failing model by delta debugging over its nodes (a node's output is cut
into a graph input holding the value the interpreter computed, the rest pruned), keeping the
failure's kind, and writes the result to WORK/min-<id>/ (model.onnx, inputs.npz, failure.txt).
Deterministic for a seed. Exit status 1 when any model fails.
"""
import argparse
import concurrent.futures
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OPSET = 17

# (rtol, atol) per dtype; atol scales with max(1, max|want|) of the output.
TOLERANCES = {
    "float64": (1e-9, 1e-10),
    "float32": (2e-4, 2e-5),
    "float16": (2e-2, 1e-2),
}
NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i32": np.int32, "i64": np.int64,
      "bool": np.bool_}
ONNX_T = {"f32": TensorProto.FLOAT, "f64": TensorProto.DOUBLE, "f16": TensorProto.FLOAT16,
          "i32": TensorProto.INT32, "i64": TensorProto.INT64, "bool": TensorProto.BOOL}
FLOATS = ("f32", "f64", "f16")
PREC = {"f16": 0, "f32": 1, "f64": 2}  # ints and bool: 3 (exact)
PREC_DTYPE = {0: "float16", 1: "float32", 2: "float64"}
INTS = ("i32", "i64")


class T:
    """A tensor of the pool: name, dtype, shape (ints, or 'N' for the dynamic dim), a bound on
    its magnitude, and whether it is exact (no rounding error could have changed it)."""

    def __init__(self, name, dtype, shape, bound, exact):
        self.name, self.dtype, self.shape, self.bound, self.exact = name, dtype, list(shape), bound, exact
        self.prec = PREC.get(dtype, 3)  # the least precise float dtype it was computed through

    @property
    def rank(self):
        return len(self.shape)


class Gen:
    def __init__(self, rng, tag, nbatch):
        self.r = rng
        self.tag = tag
        self.nodes, self.inputs, self.inits, self.feeds = [], [], [], {}
        self.nbatch = nbatch  # the value N is bound to at run time
        self.count = 0
        self.consumed = set()
        self.tensors = {}  # name -> T, for the precision of what a node reads
        self.specs = []  # graph inputs: (name, dtype, shape)

    # -- helpers
    def name(self, base):
        self.count += 1
        return "%s_%s%d" % (self.tag, base, self.count)

    def node(self, op, ins, out_t, **attrs):
        for i in ins:
            if i:
                self.consumed.add(i)
            if i in self.tensors:
                out_t.prec = min(out_t.prec, self.tensors[i].prec)
        self.tensors[out_t.name] = out_t
        self.nodes.append(helper.make_node(op, ins, [out_t.name], name=self.name(op), **attrs))
        return out_t

    def const(self, array, base="c"):
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(array), n))
        return n

    def concrete(self, shape):
        return [self.nbatch if d == "N" else d for d in shape]

    # Dims: mostly small, sometimes around a vector width (7..9, 15..17, 31..33, 64), so that
    # the kernels' vector bodies and their tails both run.
    DIMS = [1, 2, 3, 4, 5] * 4 + [7, 8, 9, 15, 16, 17, 31, 32, 33, 64]

    def rand_shape(self, rank, dynamic):
        while True:
            s = [self.r.choice(self.DIMS) for _ in range(rank)]
            if int(np.prod(s)) <= 4096:
                break
        if dynamic and rank:
            s[0] = "N"
        return s

    def graph_input(self, dtype, shape):
        """A new graph input; its values are drawn later, for each binding of N (feeds())."""
        n = self.name("in")
        self.inputs.append(helper.make_tensor_value_info(n, ONNX_T[dtype], [d if d == "N" else d for d in shape]))
        self.specs.append((n, dtype, list(shape)))
        bound = {"bool": 1.0}.get(dtype, 3.0 if dtype in FLOATS else 5.0)
        t = T(n, dtype, shape, bound, True)
        self.tensors[n] = t
        return t

    def r_normal(self, shape):
        n = int(np.prod(shape)) if shape else 1
        return np.array([self.r.gauss(0, 1) for _ in range(n)]).reshape(shape)

    def r_ints(self, shape, lo, hi):
        n = int(np.prod(shape)) if shape else 1
        return np.array([self.r.randrange(lo, hi) for _ in range(n)]).reshape(shape)

    def new(self, dtype, shape, bound, exact):
        return T(self.name("t"), dtype, shape, bound, exact)

    # -- broadcasting
    def broadcast_partner(self, a):
        """A shape that broadcasts with a's: a suffix of it with some dims set to 1."""
        k = self.r.randint(0, a.rank)
        s = list(a.shape[a.rank - k:])
        for i in range(len(s)):
            if self.r.random() < 0.3:
                s[i] = 1
        return s

    @staticmethod
    def bshape(a, b):
        ra, rb = len(a), len(b)
        out = []
        for i in range(max(ra, rb)):
            x = a[i - (max(ra, rb) - ra)] if i >= max(ra, rb) - ra else 1
            y = b[i - (max(ra, rb) - rb)] if i >= max(ra, rb) - rb else 1
            if x == 1:
                out.append(y)
            elif y == 1 or x == y:
                out.append(x)
            else:
                return None
        return out

    def operand_like(self, pool, a, shape):
        """A pool tensor of a's dtype and the given shape, or a new graph input."""
        cands = [t for t in pool if t.dtype == a.dtype and t.shape == shape and t is not a]
        if cands and self.r.random() < 0.6:
            return self.r.choice(cands)
        return self.graph_input(a.dtype, shape)

    # -- ops; each returns the new tensor or None when it does not apply
    def op_unary(self, pool, a):
        if a.dtype in INTS:
            op = self.r.choice(["Abs", "Neg"])
            return self.node(op, [a.name], self.new(a.dtype, a.shape, a.bound, a.exact))
        if a.dtype == "bool":
            return self.node("Not", [a.name], self.new("bool", a.shape, 1, a.exact))
        ops = ["Relu", "Sigmoid", "Tanh", "Neg", "Abs", "Erf", "Softplus", "LeakyRelu", "Elu",
               "HardSigmoid", "Sin", "Cos", "Clip", "Sqrt", "Log", "Exp", "Atan", "Selu",
               "HardSwish", "Softsign", "Reciprocal", "Sinh", "Asinh"]
        if a.exact:
            ops += ["Floor", "Ceil", "Sign", "Round"]
        op = self.r.choice(ops)
        b = a.bound
        attrs = {}
        ins = [a.name]
        x = a
        if op in ("Sqrt", "Log", "Reciprocal"):  # a positive operand: |a| + 0.5
            ab = self.node("Abs", [a.name], self.new(a.dtype, a.shape, b, False))
            x = self.node("Add", [ab.name, self.const(np.array(0.5, dtype=NP[a.dtype]))],
                          self.new(a.dtype, a.shape, b + 0.5, False))
            ins = [x.name]
        if op in ("Exp", "Sinh") and b > 4:
            return None
        # Sin and Cos pass an input's absolute rounding error on at their output's scale, 1: an
        # f32 sum of squares near 100 summed in another order moves sin by 3e-5 (seed 940000
        # model 116). Only small inputs, whose rounding error is small in absolute terms.
        if op in ("Sin", "Cos") and b > 4:
            return None
        bound = {"Relu": b, "Sigmoid": 1, "Tanh": 1, "Neg": b, "Abs": b, "Erf": 1, "Softplus": b + 1,
                 "LeakyRelu": b, "Elu": b + 1, "HardSigmoid": 1, "Sin": 1, "Cos": 1, "Clip": 2,
                 "Sqrt": (b + 1) ** 0.5, "Log": max(1.0, abs(np.log(b + 1))) + 1, "Exp": np.exp(min(b, 50)),
                 "Atan": 2, "Selu": 1.8 * b + 2, "HardSwish": b, "Softsign": 1,
                 "Reciprocal": 2, "Sinh": np.exp(min(b, 50)), "Asinh": b, "Floor": b + 1, "Ceil": b + 1,
                 "Sign": 1, "Round": b + 1}[op]
        if op == "LeakyRelu":
            attrs["alpha"] = self.r.choice([0.01, 0.1, 0.5])
        if op == "Elu":
            attrs["alpha"] = self.r.choice([1.0, 0.5])
        if op == "HardSigmoid":
            attrs.update(alpha=self.r.choice([0.2, 0.5]), beta=self.r.choice([0.5, 0.3]))
        if op == "Clip":
            lo = self.r.choice([-2.0, -1.0, 0.0])
            hi = self.r.choice([1.0, 2.0])
            ins = [a.name, self.const(np.array(lo, dtype=NP[a.dtype])), self.const(np.array(hi, dtype=NP[a.dtype]))]
        exact = a.exact and op in ("Neg", "Abs", "Relu", "Floor", "Ceil", "Sign", "Round", "Clip")
        return self.node(op, ins, self.new(a.dtype, a.shape, bound, exact), **attrs)

    def op_binary(self, pool, a):
        if a.dtype == "bool":
            op = self.r.choice(["And", "Or", "Xor"])
            bs = self.broadcast_partner(a)
            bt = self.operand_like(pool, a, bs)
            return self.node(op, [a.name, bt.name], self.new("bool", self.bshape(a.shape, bs), 1, a.exact and bt.exact))
        ops = ["Add", "Sub", "Mul", "Max", "Min", "Div"]
        if a.dtype in FLOATS:
            ops += ["Pow"]
        op = self.r.choice(ops)
        bs = self.broadcast_partner(a)
        if self.r.random() < 0.3:  # a broadcasts the other way
            bt = self.operand_like(pool, a, bs)
            a, bt = bt, a
            bs = bt.shape
        else:
            bt = self.operand_like(pool, a, bs)
        out = self.bshape(a.shape, bt.shape)
        if out is None:
            return None
        if self.r.random() < 0.5:
            a, bt = bt, a
        x, y = a.name, bt.name
        if op in ("Div", "Pow") and a.dtype in FLOATS:
            # divisor |b| + 0.5; base |a| + 0.5 and exponent clipped to [-2, 2]
            ab = self.node("Abs", [y if op == "Div" else x], self.new(a.dtype, bt.shape if op == "Div" else a.shape, 1, False))
            pos = self.node("Add", [ab.name, self.const(np.array(0.5, dtype=NP[a.dtype]))],
                            self.new(a.dtype, ab.shape, 1, False))
            if op == "Div":
                y = pos.name
                bound = a.bound * 2
            else:
                x = pos.name
                e = self.node("Clip", [y, self.const(np.array(-2.0, dtype=NP[a.dtype])),
                                       self.const(np.array(2.0, dtype=NP[a.dtype]))],
                              self.new(a.dtype, bt.shape, 2, False))
                y = e.name
                bound = max(2.0, (a.bound + 0.5) ** 2)
        elif op == "Div":  # integer division: divisor |b| + 1 (truncation toward zero)
            ab = self.node("Abs", [y], self.new(a.dtype, bt.shape, bt.bound, bt.exact))
            pos = self.node("Add", [ab.name, self.const(np.array(1, dtype=NP[a.dtype]))],
                            self.new(a.dtype, bt.shape, bt.bound + 1, bt.exact))
            y = pos.name
            bound = a.bound
        elif op == "Mul":
            bound = a.bound * bt.bound
        else:
            bound = a.bound + bt.bound
        if a.dtype in INTS and bound > 1e6:
            return None
        if a.dtype == "f16" and bound > 1e3:
            return None
        if bound > 1e6:
            return None
        return self.node(op, [x, y], self.new(a.dtype, out, bound, a.exact and bt.exact and a.dtype in INTS))

    def op_compare_where(self, pool, a):
        if a.dtype == "bool" or not a.exact:
            return None
        bs = self.broadcast_partner(a)
        bt = self.operand_like(pool, a, bs)
        if not bt.exact:
            return None
        out = self.bshape(a.shape, bs)
        op = self.r.choice(["Less", "Greater", "Equal", "LessOrEqual", "GreaterOrEqual"])
        c = self.node(op, [a.name, bt.name], self.new("bool", out, 1, True))
        if self.r.random() < 0.7:
            other = self.operand_like(pool, a, self.broadcast_partner(a))
            o2 = self.bshape(out, other.shape)
            if o2 is None:
                return c
            return self.node("Where", [c.name, a.name, other.name],
                             self.new(a.dtype, self.bshape(o2, a.shape), max(a.bound, other.bound), other.exact))
        return c

    def op_cast(self, pool, a):
        targets = [t for t in ("f32", "f64", "f16", "i32", "i64", "bool") if t != a.dtype]
        to = self.r.choice(targets)
        if a.dtype in FLOATS and to in INTS + ("bool",) and not a.exact:
            return None
        if to == "f16" and a.bound > 1e3:
            return None
        if to in INTS and a.bound > 1e6:
            return None
        exact = a.exact and not (a.dtype in INTS and to in FLOATS and to == "f16" and a.bound > 2048)
        # A narrowing float cast rounds the same way everywhere, except in onnxruntime: where a
        # consumer has no f16 kernel (comparisons), it inserts a Cast back to f32 and then drops
        # the pair Cast(f32->f16), Cast(f16->f32) as redundant, even with optimizations off, so the
        # consumer sees the unrounded value (seed 1010000 model 164: x >= c for an x that rounds
        # to c). Such a result is not exact for a discontinuous op.
        if a.dtype in FLOATS and to in FLOATS and PREC[to] < PREC[a.dtype]:
            exact = False
        return self.node("Cast", [a.name], self.new(to, a.shape, a.bound if to != "bool" else 1, exact),
                         to=ONNX_T[to])

    def op_reduce(self, pool, a):
        if a.rank == 0 or a.dtype == "bool":
            return None
        ops = ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceMean"]
        if a.dtype in FLOATS:
            ops += ["ReduceL2", "ReduceLogSumExp", "ReduceSumSquare", "ReduceL1"]
        if a.exact:
            ops += ["ArgMax", "ArgMin"]
        op = self.r.choice(ops)
        keep = self.r.randint(0, 1)
        if op in ("ArgMax", "ArgMin"):
            ax = self.r.randrange(a.rank)
            shape = list(a.shape)
            if keep:
                shape[ax] = 1
            else:
                del shape[ax]
            attrs = dict(axis=ax - a.rank * self.r.randint(0, 1), keepdims=keep,
                         select_last_index=self.r.randint(0, 1))
            return self.node(op, [a.name], self.new("i64", shape, 16, True), **attrs)
        k = self.r.randint(1, a.rank)
        axes = sorted(self.r.sample(range(a.rank), k))
        shape = [(1 if i in axes else d) for i, d in enumerate(a.shape)] if keep else \
            [d for i, d in enumerate(a.shape) if i not in axes]
        n = 1
        for i in axes:
            n *= self.nbatch * 2 if a.shape[i] == "N" else a.shape[i]  # N may be bound larger
        bound = {"ReduceSum": a.bound * n, "ReduceMax": a.bound, "ReduceMin": a.bound, "ReduceMean": a.bound,
                 "ReduceL2": a.bound * n ** 0.5, "ReduceLogSumExp": a.bound + np.log(n) + 1,
                 "ReduceSumSquare": a.bound ** 2 * n, "ReduceL1": a.bound * n}[op]
        if op == "ReduceLogSumExp" and a.bound > 30:
            return None
        if a.dtype == "f16" and bound > 1e3 or bound > 1e6:
            return None
        axes_signed = [x - a.rank if self.r.random() < 0.3 else x for x in axes]
        if op == "ReduceSum":
            return self.node(op, [a.name, self.const(np.array(axes_signed, dtype=np.int64))],
                             self.new(a.dtype, shape, bound, a.exact and a.dtype in INTS), keepdims=keep)
        exact = a.exact and op in ("ReduceMax", "ReduceMin")
        return self.node(op, [a.name], self.new(a.dtype, shape, bound, exact), axes=axes_signed, keepdims=keep)

    def op_matmul(self, pool, a):
        if a.dtype not in FLOATS + INTS or a.rank < 1 or a.shape[-1] == "N":
            return None
        if a.dtype in INTS and a.dtype != "i32" and a.dtype != "i64":
            return None
        k = a.shape[-1]
        n = self.r.randint(1, 6)
        if self.r.random() < 0.3 and a.rank >= 2 and a.dtype in FLOATS:  # Gemm
            if a.rank != 2:
                return None
            ta, tb = self.r.randint(0, 1), self.r.randint(0, 1)
            m = a.shape[0]
            x = a
            if ta:
                if m == "N":
                    return None
                x = self.node("Transpose", [a.name], self.new(a.dtype, [k, m], a.bound, a.exact), perm=[1, 0])
            w = self.const(np.array(self.r_normal([n, k] if tb else [k, n]), dtype=NP[a.dtype]), "w")
            ins = [x.name, w]
            cs = self.r.choice([[], [n], [1, n], [m, n] if m != "N" else [n]])
            if cs or self.r.random() < 0.5:
                ins.append(self.const(np.array(self.r_normal(cs or [1]), dtype=NP[a.dtype]), "bias"))
            alpha = self.r.choice([1.0, 0.5])
            beta = self.r.choice([1.0, 2.0])
            bound = a.bound * 3 * k * alpha + 4 * beta
            if a.dtype == "f16" and bound > 1e3:
                return None
            return self.node("Gemm", ins, self.new(a.dtype, [m, n], bound, False),
                             transA=ta, transB=tb, alpha=alpha, beta=beta)
        if a.rank == 1:
            bshape = [k, n]
            out = [n]
        else:
            batch = a.shape[:-2]
            bb = [d if self.r.random() < 0.7 else 1 for d in batch] if batch else []
            if self.r.random() < 0.3:
                bb = bb[len(bb) // 2:]
            bshape = bb + [k, n]
            out = self.bshape(batch, bb) + [a.shape[-2], n]
        if any(d == "N" for d in bshape) or self.r.random() < 0.5:
            if any(d == "N" for d in bshape):
                bt = self.operand_like(pool, a, bshape)
            else:
                bt = self.const(np.array(self.r_normal(bshape) if a.dtype in FLOATS else self.r_ints(bshape, -3, 4),
                                         dtype=NP[a.dtype]), "w")
                bt = T(bt, a.dtype, bshape, 3, True)
        else:
            bt = self.operand_like(pool, a, bshape)
        bound = a.bound * bt.bound * k
        if a.dtype == "f16" and bound > 1e3 or bound > 1e6:
            return None
        return self.node("MatMul", [a.name, bt.name], self.new(a.dtype, out, bound, a.exact and bt.exact and a.dtype in INTS))

    def op_conv_pool(self, pool, a):
        if a.dtype not in FLOATS or a.rank not in (3, 4) or "N" in a.shape[1:]:
            return None
        sp = a.shape[2:]
        c = a.shape[1]
        ks = [self.r.randint(1, min(3, d + 2)) for d in sp]
        strides = [self.r.randint(1, 2) for _ in sp]
        dil = [self.r.choice([1, 1, 2]) for _ in sp]
        pads = [self.r.randint(0, k - 1) if k > 1 else 0 for k in ks] * 2
        outsp = []
        for i, d in enumerate(sp):
            eff = dil[i] * (ks[i] - 1) + 1
            o = (d + pads[i] + pads[i + len(sp)] - eff) // strides[i] + 1
            if o < 1:
                return None
            outsp.append(o)
        kind = self.r.choice(["Conv", "Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"])
        if kind == "Conv":
            group = self.r.choice([g for g in (1, c) if c % g == 0])
            m = self.r.randint(1, 4) * (group if group > 1 else 1)
            w = self.const(np.array(self.r_normal([m, c // group] + ks), dtype=NP[a.dtype]) * 0.5, "w")
            ins = [a.name, w]
            if self.r.random() < 0.5:
                ins.append(self.const(np.array(self.r_normal([m]), dtype=NP[a.dtype]), "b"))
            bound = a.bound * 2 * (c // group) * int(np.prod(ks)) + 3
            if a.dtype == "f16" and bound > 1e3:
                return None
            return self.node("Conv", ins, self.new(a.dtype, [a.shape[0], m] + outsp, bound, False),
                             kernel_shape=ks, strides=strides, dilations=dil, pads=pads, group=group)
        if kind.startswith("Global"):
            return self.node(kind, [a.name], self.new(a.dtype, a.shape[:2] + [1] * len(sp), a.bound, False))
        attrs = dict(kernel_shape=ks, strides=strides, pads=pads)
        if kind == "MaxPool":
            attrs["dilations"] = dil
        else:
            # AveragePool's dilations are opset 19; pads must be smaller than the kernel
            outsp = [(d + pads[i] + pads[i + len(sp)] - ks[i]) // strides[i] + 1 for i, d in enumerate(sp)]
            if min(outsp) < 1:
                return None
            attrs["count_include_pad"] = self.r.randint(0, 1)
        if self.r.random() < 0.3:
            attrs["ceil_mode"] = 1
            outsp = []
            for i, d in enumerate(sp):
                eff = (dil[i] if kind == "MaxPool" else 1) * (ks[i] - 1) + 1
                o = -(-(d + pads[i] + pads[i + len(sp)] - eff) // strides[i]) + 1
                # A last window starting past the input and its left padding is dropped by some
                # implementations (PyTorch, ONNX's reference) and kept by others (onnxruntime,
                # the formula of the spec): not generated.
                if (o - 1) * strides[i] >= d + pads[i]:
                    return None
                outsp.append(o)
        # A window that reads no input element (all padding: a dilated kernel stepping over a
        # short row) has no value the spec defines (onnxruntime gives the lowest float, coil
        # -inf for MaxPool): not generated.
        for i, d in enumerate(sp):
            step = dil[i] if kind == "MaxPool" else 1
            for o in range(outsp[i]):
                if not any(0 <= o * strides[i] - pads[i] + k * step < d for k in range(ks[i])):
                    return None
        return self.node(kind, [a.name], self.new(a.dtype, a.shape[:2] + outsp, a.bound, False), **attrs)

    def spread(self, a, dims):
        """a + a constant of shape `dims` (the normalized trailing dims) with distinct values, so
        that no normalized row is constant. A constant row's variance is 0, and the rounding of
        its mean (one ulp of a float sum divided by n) is then amplified by 1/sqrt(epsilon) up to
        ~3e-5: ill-conditioned input, not a wrong kernel (coil's compiled LayerNormalization of
        a constant f32 row gives such values where the interpreter gives 0; see the report)."""
        v = self.r_normal(dims) * 0.5 + np.arange(int(np.prod(dims))).reshape(dims) * 0.01
        c = self.const(np.asarray(v, dtype=NP[a.dtype]), "spread")
        return self.node("Add", [a.name, c], self.new(a.dtype, a.shape, a.bound + 3, False))

    def op_normalize(self, pool, a):
        if a.dtype not in FLOATS or a.rank == 0:
            return None
        kind = self.r.choice(["Softmax", "LogSoftmax", "LayerNormalization"])
        ax = self.r.randrange(a.rank)
        if kind == "LayerNormalization":
            if a.dtype == "f16":
                return None
            norm = a.shape[ax:]
            if "N" in norm:
                return None
            ins = [self.spread(a, norm).name, self.const(np.array(self.r_normal(norm), dtype=NP[a.dtype]), "g")]
            if self.r.random() < 0.5:
                ins.append(self.const(np.array(self.r_normal(norm), dtype=NP[a.dtype]), "beta"))
            return self.node(kind, ins, self.new(a.dtype, a.shape, 3 * 4 + 3, False),
                             axis=ax - a.rank * self.r.randint(0, 1), epsilon=self.r.choice([1e-5, 1e-3]))
        bound = 1 if kind == "Softmax" else a.bound * 2 + 10
        return self.node(kind, [a.name], self.new(a.dtype, a.shape, bound, False),
                         axis=ax - a.rank * self.r.randint(0, 1))

    def op_shape(self, pool, a):
        kind = self.r.choice(["Reshape", "Transpose", "Concat", "Slice", "Gather", "Unsqueeze",
                              "Squeeze", "Expand", "Flatten"])
        shape = a.shape
        if kind == "Transpose":
            if a.rank < 2:
                return None
            perm = list(range(a.rank))
            self.r.shuffle(perm)
            return self.node(kind, [a.name], self.new(a.dtype, [shape[p] for p in perm], a.bound, a.exact), perm=perm)
        if kind == "Reshape":
            static = [d for d in shape if d != "N"]
            total = int(np.prod(static)) if static else 1
            dims = []
            rest = total
            while rest > 1 and len(dims) < 3:
                f = [x for x in range(2, rest + 1) if rest % x == 0]
                x = self.r.choice(f)
                dims.append(x)
                rest //= x
            if rest > 1:
                dims.append(rest)
            self.r.shuffle(dims)
            if "N" in shape:
                if shape[0] != "N":
                    return None
                target = [0] + dims  # 0 copies the dynamic dim
                out = ["N"] + dims
            else:
                target, out = list(dims), list(dims)
                if target and self.r.random() < 0.5:
                    i = self.r.randrange(len(target))
                    target[i] = -1
            return self.node(kind, [a.name, self.const(np.array(target, dtype=np.int64), "shape")],
                             self.new(a.dtype, out, a.bound, a.exact))
        if kind == "Flatten":
            ax = self.r.randint(0, a.rank)
            if "N" in shape and not (ax >= 1 and shape[0] == "N" and "N" not in shape[1:]):
                return None
            left = shape[:ax]
            right = shape[ax:]
            lp = "N" if "N" in left else int(np.prod(left)) if left else 1
            if lp == "N" and len(left) > 1:
                return None
            rp = int(np.prod(right)) if right else 1
            return self.node(kind, [a.name], self.new(a.dtype, [lp, rp], a.bound, a.exact), axis=ax)
        if kind == "Unsqueeze":
            ax = self.r.randint(0, a.rank)
            out = shape[:ax] + [1] + shape[ax:]
            return self.node(kind, [a.name, self.const(np.array([ax], dtype=np.int64), "axes")],
                             self.new(a.dtype, out, a.bound, a.exact))
        if kind == "Squeeze":
            ones = [i for i, d in enumerate(shape) if d == 1]
            if not ones:
                return None
            ax = self.r.choice(ones)
            return self.node(kind, [a.name, self.const(np.array([ax], dtype=np.int64), "axes")],
                             self.new(a.dtype, shape[:ax] + shape[ax + 1:], a.bound, a.exact))
        if kind == "Expand":
            out = [d if d != 1 else self.r.choice([1, 2, 3]) for d in shape]
            out = [self.r.randint(1, 3)] * self.r.randint(0, 1) + out
            tgt = [1 if d == "N" else d for d in out]
            return self.node(kind, [a.name, self.const(np.array(tgt, dtype=np.int64), "shape")],
                             self.new(a.dtype, out, a.bound, a.exact))
        if a.rank == 0:
            return None
        ax = self.r.randrange(a.rank)
        if shape[ax] == "N":
            return None
        d = shape[ax]
        if kind == "Concat":
            others = [self.operand_like(pool, a, shape[:ax] + [self.r.randint(1, 3)] + shape[ax + 1:])
                      for _ in range(self.r.randint(1, 2))]
            ins = [a] + others
            self.r.shuffle(ins)
            out = shape[:ax] + [sum(t.shape[ax] for t in ins)] + shape[ax + 1:]
            return self.node(kind, [t.name for t in ins],
                             self.new(a.dtype, out, max(t.bound for t in ins), all(t.exact for t in ins)),
                             axis=ax - a.rank * self.r.randint(0, 1))
        if kind == "Slice":
            step = self.r.choice([1, 1, 2, -1, -2])
            if step > 0:
                s = self.r.randint(-d, d - 1)
                e = self.r.choice([self.r.randint(s % d + 1, d), 2 ** 62, -1 if d > 1 else d])
                n = len(range(*slice(s, e, step).indices(d)))
            else:
                s = self.r.choice([-1, d - 1, 2 ** 62])
                e = self.r.choice([-(2 ** 62), 0, -d - 5])
                n = len(range(*slice(s if s < 2 ** 62 else None, e if e > -(2 ** 62) else None, step).indices(d)))
                if e == -(2 ** 62):
                    n = len(range(*slice(s if s < 2 ** 62 else None, None, step).indices(d)))
            if n < 1:
                return None
            ins = [a.name, self.const(np.array([s], dtype=np.int64)), self.const(np.array([e], dtype=np.int64)),
                   self.const(np.array([ax], dtype=np.int64)), self.const(np.array([step], dtype=np.int64))]
            return self.node(kind, ins, self.new(a.dtype, shape[:ax] + [n] + shape[ax + 1:], a.bound, a.exact))
        # Gather with constant indices, negative ones included
        ishape = self.r.choice([[], [self.r.randint(1, 4)], [2, 2]])
        idx = np.array(self.r_ints(ishape, -d, d), dtype=self.r.choice([np.int64, np.int32]))
        out = shape[:ax] + ishape + shape[ax + 1:]
        return self.node(kind, [a.name, self.const(idx, "idx")], self.new(a.dtype, out, a.bound, a.exact),
                         axis=ax - a.rank * self.r.randint(0, 1))

    def op_more(self, pool, a):
        """Pad, Tile, CumSum, Trilu, PRelu, BatchNormalization, InstanceNormalization,
        GatherElements, DepthToSpace, SpaceToDepth, ReduceProd, Mod, Einsum."""
        kind = self.r.choice(["Pad", "Tile", "CumSum", "Trilu", "PRelu", "BatchNormalization",
                              "InstanceNormalization", "GatherElements", "DepthToSpace",
                              "SpaceToDepth", "ReduceProd", "Mod", "Einsum"])
        shape, dt = a.shape, a.dtype
        if a.rank == 0 or dt == "bool":
            return None
        static = "N" not in shape
        if kind == "Pad":
            mode = self.r.choice(["constant", "constant", "reflect", "edge"])
            pads = []
            for d in shape + shape:
                if d == "N":
                    pads.append(0)
                else:
                    hi = d - 1 if mode == "reflect" else 3
                    pads.append(self.r.randint(0 if mode != "constant" else -min(1, d - 1), max(0, min(hi, 3))))
            r = a.rank
            out = [d if d == "N" else d + pads[i] + pads[i + r] for i, d in enumerate(shape)]
            if any(o != "N" and o < 1 for o in out):
                return None
            ins = [a.name, self.const(np.array(pads, dtype=np.int64), "pads")]
            if mode == "constant" and self.r.random() < 0.5:
                ins.append(self.const(np.array(self.r.choice([0, 1, -2]), dtype=NP[dt])))
            return self.node(kind, ins, self.new(dt, out, max(a.bound, 2), a.exact), mode=mode)
        if kind == "Tile":
            reps = [1 if d == "N" else self.r.randint(1, 3) for d in shape]
            out = [d if d == "N" else d * k for d, k in zip(shape, reps)]
            return self.node(kind, [a.name, self.const(np.array(reps, dtype=np.int64), "reps")],
                             self.new(dt, out, a.bound, a.exact))
        if kind == "CumSum":
            ax = self.r.randrange(a.rank)
            n = self.nbatch * 2 if shape[ax] == "N" else shape[ax]
            bound = a.bound * n
            if dt == "f16" and bound > 1e3 or bound > 1e6:
                return None
            return self.node(kind, [a.name, self.const(np.array(ax - a.rank * self.r.randint(0, 1), dtype=np.int64))],
                             self.new(dt, shape, bound, a.exact and dt in INTS),
                             exclusive=self.r.randint(0, 1), reverse=self.r.randint(0, 1))
        if kind == "Trilu":
            if a.rank < 2:
                return None
            ins = [a.name]
            if self.r.random() < 0.6:
                ins.append(self.const(np.array(self.r.randint(-3, 3), dtype=np.int64), "k"))
            return self.node(kind, ins, self.new(dt, shape, a.bound, a.exact), upper=self.r.randint(0, 1))
        if kind == "PRelu":
            if dt not in FLOATS:
                return None
            ss = self.broadcast_partner(a)
            slope = self.const(np.array(self.r_normal([1 if d == "N" else d for d in ss]) * 0.5, dtype=NP[dt]), "slope")
            return self.node(kind, [a.name, slope], self.new(dt, shape, a.bound * 2, False))
        if kind in ("BatchNormalization", "InstanceNormalization"):
            if dt not in FLOATS or a.rank < 2 or shape[1] == "N" or (kind == "InstanceNormalization" and (a.rank < 3 or dt == "f16" or "N" in shape[2:])):
                return None
            c = shape[1]
            scale = self.const(np.array(self.r_normal([c]), dtype=NP[dt]), "scale")
            bias = self.const(np.array(self.r_normal([c]), dtype=NP[dt]), "bias")
            if kind == "InstanceNormalization":
                x = self.spread(a, shape[2:])
                return self.node(kind, [x.name, scale, bias], self.new(dt, shape, 3 * 8 + 3, False), epsilon=1e-3)
            mean = self.const(np.array(self.r_normal([c]), dtype=NP[dt]), "mean")
            var = self.const(np.array([0.5 + self.r.random() for _ in range(c)], dtype=NP[dt]), "var")
            return self.node(kind, [a.name, scale, bias, mean, var], self.new(dt, shape, (a.bound + 3) * 6 + 3, False),
                             epsilon=self.r.choice([1e-5, 1e-3]))
        if kind == "GatherElements":
            ax = self.r.randrange(a.rank)
            if shape[ax] == "N":
                return None
            d = shape[ax]
            ishape = [x if x == "N" or i == ax else self.r.randint(1, x) for i, x in enumerate(shape)]
            ishape[ax] = self.r.randint(1, 4)
            if "N" in ishape:
                return None
            idx = np.array(self.r_ints(ishape, -d, d), dtype=np.int64)
            return self.node(kind, [a.name, self.const(idx, "idx")], self.new(dt, ishape, a.bound, a.exact),
                             axis=ax - a.rank * self.r.randint(0, 1))
        if kind in ("DepthToSpace", "SpaceToDepth"):
            if a.rank != 4 or "N" in shape[1:]:
                return None
            b = self.r.choice([2, 3])
            n, c, h, w = shape
            if kind == "DepthToSpace":
                if c % (b * b):
                    return None
                out = [n, c // (b * b), h * b, w * b]
                return self.node(kind, [a.name], self.new(dt, out, a.bound, a.exact), blocksize=b,
                                 mode=self.r.choice(["DCR", "CRD"]))
            if h % b or w % b:
                return None
            return self.node(kind, [a.name], self.new(dt, [n, c * b * b, h // b, w // b], a.bound, a.exact), blocksize=b)
        if kind == "ReduceProd":
            ax = self.r.randrange(a.rank)
            n = self.nbatch * 2 if shape[ax] == "N" else shape[ax]
            if n > 8 or a.bound ** n > (1e3 if dt == "f16" else 1e6):
                return None
            keep = self.r.randint(0, 1)
            out = [1 if i == ax else x for i, x in enumerate(shape)] if keep else shape[:ax] + shape[ax + 1:]
            return self.node(kind, [a.name], self.new(dt, out, a.bound ** n, a.exact and dt in INTS), axes=[ax], keepdims=keep)
        if kind == "Mod":
            if dt in FLOATS:
                if not a.exact:
                    return None  # fmod is discontinuous where the quotient is an integer
                fm = 1
            else:
                fm = self.r.randint(0, 1)
            bs = self.broadcast_partner(a)
            b = self.operand_like(pool, a, bs)
            if not b.exact:
                return None
            ab = self.node("Abs", [b.name], self.new(dt, bs, b.bound, True))
            if dt in FLOATS:
                # |b| + 1 rounds in f16 (1.001 is no f16): a compiled kernel that keeps it in f32
                # would divide by another number than the interpreter, and fmod jumps there. An
                # integer divisor is exact in every float type.
                ab = self.node("Floor", [ab.name], self.new(dt, bs, b.bound, True))
            pos = self.node("Add", [ab.name, self.const(np.array(1, dtype=NP[dt]))], self.new(dt, bs, b.bound + 1, True))
            return self.node(kind, [a.name, pos.name], self.new(dt, self.bshape(shape, bs), b.bound + 1, True), fmod=fm)
        # Einsum: a batched matrix product or a transpose-and-reduce
        if dt not in FLOATS or a.rank not in (2, 3) or "N" in shape[1:]:
            return None
        if a.rank == 2:
            k = shape[1]
            n = self.r.randint(1, 5)
            w = self.const(np.array(self.r_normal([n, k]), dtype=NP[dt]), "w")
            eq = self.r.choice(["ij,kj->ik", "ij,kj->ki"])
            out = [shape[0], n] if eq.endswith("ik") else [n, shape[0]]
            bound = a.bound * 3 * k
        else:
            w = self.const(np.array(self.r_normal([shape[2]]), dtype=NP[dt]), "w")
            eq = self.r.choice(["bij,j->bi", "bij,j->ib"])
            out = [shape[0], shape[1]] if eq.endswith("bi") else [shape[1], shape[0]]
            bound = a.bound * 3 * shape[2]
        if dt == "f16" and bound > 1e3:
            return None
        return self.node(kind, [a.name, w], self.new(dt, out, bound, False), equation=eq)

    def subgraph(self, nops):
        dtype = self.r.choices(["f32", "f64", "f16", "i32", "i64"], weights=[60, 10, 15, 7, 8])[0]
        dynamic = self.r.random() < 0.4
        pool = [self.graph_input(dtype, self.rand_shape(self.r.randint(1, 4), dynamic))]
        if self.r.random() < 0.5:
            pool.append(self.graph_input(dtype, self.rand_shape(self.r.randint(1, 4), dynamic and self.r.random() < 0.5)))
        made = []
        kinds = [(self.op_unary, 4), (self.op_binary, 5), (self.op_compare_where, 1), (self.op_cast, 1),
                 (self.op_reduce, 2), (self.op_matmul, 2), (self.op_conv_pool, 2), (self.op_normalize, 2),
                 (self.op_shape, 5), (self.op_more, 4)]
        tries = 0
        while len(made) < nops and tries < nops * 20:
            tries += 1
            a = self.r.choice(pool[-4:] if self.r.random() < 0.7 else pool)
            if a.rank > 0 and any(d == 0 for d in a.shape):
                continue
            f = self.r.choices([k for k, _ in kinds], weights=[w for _, w in kinds])[0]
            if f == self.op_conv_pool and a.rank not in (3, 4) and a.dtype in FLOATS and self.r.random() < 0.5:
                # make a 4-D operand: reshape to [x, c, h, w]
                continue
            before = len(self.nodes)
            try:
                t = f(pool, a)
            except (ValueError, IndexError):
                t = None
            if t is None:
                del self.nodes[before:]
                continue
            if isinstance(t, T) and (t.rank > 6 or any(d != "N" and d > 256 for d in t.shape)
                                     or int(np.prod(self.concrete(t.shape) or [1])) > 16384):
                del self.nodes[before:]
                continue
            pool.append(t)
            made.append(t)
        return made


def feeds(specs, nbatch, seed):
    """Random inputs for the graph inputs `specs` with N bound to nbatch: floats normal, clipped
    to [-3, 3] (the bound the generator assumes), integers in [-5, 5], bools."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, dtype, shape in specs:
        cs = [nbatch if d == "N" else d for d in shape]
        if dtype in FLOATS:
            out[name] = np.asarray(np.clip(rng.standard_normal(cs), -3, 3), dtype=NP[dtype])
        elif dtype == "bool":
            out[name] = np.asarray(rng.integers(0, 2, cs), dtype=np.bool_)
        else:
            out[name] = np.asarray(rng.integers(-5, 6, cs), dtype=NP[dtype])
    return out


def make_model(seed, batch, ops_range=(3, 10)):
    """A model of `batch` random subgraphs and its input sets: one with N at the value the
    generator planned for, and, when some input has the dynamic dim, one at another value."""
    r = random.Random(seed)
    nbatch = r.randint(1, 4)
    g = Gen(r, "g", nbatch)
    outs = []
    for _ in range(batch):
        made = g.subgraph(r.randint(*ops_range))
        outs += made
    # every tensor nobody reads is an output, plus some intermediates
    out_names = []
    seen = set()
    for t in outs:
        if (t.name not in g.consumed or r.random() < 0.15) and t.name not in seen:
            out_names.append(t)
            seen.add(t.name)
    if not out_names and outs:
        out_names.append(outs[-1])
    used = set()
    for n in g.nodes:
        used.update(i for i in n.input if i)
    outputs = [helper.make_tensor_value_info(t.name, ONNX_T[t.dtype], [None] * t.rank) for t in out_names]
    inputs = [i for i in g.inputs]
    graph = helper.make_graph(g.nodes, "difftest_%d" % seed, inputs, outputs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="difftest")
    model.ir_version = 8
    # the tolerance of a float output is that of the least precise float dtype it went through
    tol = {t.name: PREC_DTYPE[t.prec] for t in out_names if t.prec < 3}
    helper.set_model_props(model, {"difftest_tolerance": json.dumps(tol, sort_keys=True)})
    sets = [feeds(g.specs, nbatch, seed)]
    if any("N" in shape for _, _, shape in g.specs):
        sets.append(feeds(g.specs, r.choice([n for n in range(1, 2 * nbatch + 1) if n != nbatch]), seed + 1))
    return model, sets


# ---------------------------------------------------------------- running and comparing

def save_npz(path, arrays):
    np.savez(path, **arrays)


def load_npz(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def tolerances(model):
    """Output name -> the dtype whose tolerance applies (make_model records it)."""
    for p in model.metadata_props:
        if p.key == "difftest_tolerance":
            return json.loads(p.value)
    return {}


def compare(name, got, want, tol_dtype=None):
    """None when got matches want within the tolerance of tol_dtype (default: want's dtype, or the
    least precise one of the two), else a description."""
    if got.shape != want.shape:
        return "%s: shape %s, want %s" % (name, got.shape, want.shape)
    if got.dtype != want.dtype:
        return "%s: dtype %s, want %s" % (name, got.dtype, want.dtype)
    if want.dtype.kind not in "fc":
        bad = got != want
        if bad.any():
            i = np.flatnonzero(bad.reshape(-1))[0]
            return "%s: %d of %d elements differ, first at flat index %d: got %s, want %s" % (
                name, int(bad.sum()), got.size, i, got.reshape(-1)[i], want.reshape(-1)[i])
        return None
    key = tol_dtype if tol_dtype in TOLERANCES else str(want.dtype)
    if TOLERANCES[str(want.dtype)][0] > TOLERANCES[key][0]:
        key = str(want.dtype)
    rtol, atol = TOLERANCES[key]
    g = got.astype(np.float64).reshape(-1)
    w = want.astype(np.float64).reshape(-1)
    where = lambda i: tuple(int(x) for x in np.unravel_index(int(i), want.shape))
    nan_w, nan_g = np.isnan(w), np.isnan(g)
    if (nan_w != nan_g).any():
        i = np.flatnonzero(nan_w != nan_g)[0]
        return "%s: NaN differs at %s: got %r, want %r" % (name, where(i), g[i], w[i])
    inf = np.isinf(w)
    if (g[inf] != w[inf]).any():
        return "%s: infinities differ" % name
    finite = np.isfinite(w)
    scale = max(1.0, float(np.abs(w[finite]).max()) if finite.any() else 1.0)
    err = np.where(finite, np.abs(g - np.where(finite, w, 0)), 0)
    lim = atol * scale + rtol * np.abs(np.where(finite, w, 0))
    bad = err > lim
    if bad.any():
        i = np.flatnonzero(bad)[0]
        return "%s: %d of %d elements off (max error %.3g, scale %.3g), first at %s: got %r, want %r" % (
            name, int(bad.sum()), got.size, float(err.max()), scale, where(i), g[i], w[i])
    return None


def run(cmd, timeout=600, env=None):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        return r.returncode, r.stdout + r.stderr
    except subprocess.TimeoutExpired:
        return -999, "timeout after %d s" % timeout


class Outcome:
    def __init__(self, kind, detail=""):
        self.kind, self.detail = kind, detail  # ok, invalid, compile, run, crash, mismatch, ort

    def signature(self):
        if self.kind == "mismatch":
            return "mismatch"
        first = self.detail.strip().splitlines()[-1] if self.detail.strip() else ""
        return "%s: %s" % (self.kind, first[:80])

    def __repr__(self):
        return "%s %s" % (self.kind, self.detail)


def check(args, d, model, feed_sets):
    """Compiles the model in folder d and runs it on each input set (a dict, or a list of them:
    the second binds the dynamic dim to another value); returns an Outcome."""
    if isinstance(feed_sets, dict):
        feed_sets = [feed_sets]
    os.makedirs(d, exist_ok=True)
    mpath = os.path.join(d, "model.onnx")
    onnx.save(model, mpath)
    tol = tolerances(model)
    pkg = os.path.join(d, "pkg")
    wants = []
    for k, feeds in enumerate(feed_sets):
        ipath = os.path.join(d, "inputs%d.npz" % k)
        want_p = os.path.join(d, "want%d.npz" % k)
        save_npz(ipath, feeds)
        rc, out = run([args.coil, "interpret", mpath, "--inputs", ipath, "--outputs", want_p])
        if rc == 1:
            return Outcome("invalid", out)
        if rc != 0:
            return Outcome("crash", "coil interpret: exit %d\n%s" % (rc, out))
        want = load_npz(want_p)
        wants.append(want)
        if args.ort and k == 0:
            import onnxruntime as ort
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            so.intra_op_num_threads = 1
            so.log_severity_level = 3
            try:
                sess = ort.InferenceSession(mpath, so, providers=["CPUExecutionProvider"])
                res = sess.run(None, feeds)
            except Exception:  # onnxruntime lacks a kernel (f16 and f64 often): no third opinion
                res = None
                args.stats["ort_refused"] = args.stats.get("ort_refused", 0) + 1
            if res is not None:
                for o, v in zip(sess.get_outputs(), res):
                    m = compare(o.name, want[o.name], np.asarray(v), tol.get(o.name))
                    if m:
                        return Outcome("ort", "interpreter vs onnxruntime: " + m)
    shutil.rmtree(pkg, ignore_errors=True)
    rc, out = run([args.coil, "compile", mpath, "-o", pkg, "--device", args.device])
    if rc != 0:
        return Outcome("compile" if rc in (1, 2) else "crash", "coil compile: exit %d\n%s" % (rc, out))
    for k, want in enumerate(wants):
        ipath, got_p = os.path.join(d, "inputs%d.npz" % k), os.path.join(d, "got%d.npz" % k)
        rc, out = run([args.coil, "run", pkg, "--inputs", ipath, "--outputs", got_p, "--poison"])
        if rc != 0:
            return Outcome("run" if rc in (1, 3) else "crash", "coil run (inputs%d): exit %d\n%s" % (k, rc, out))
        got = load_npz(got_p)
        if args.self_test:  # the harness's own check: one element of one float output moved
            for name in sorted(got):
                if got[name].dtype.kind == "f" and got[name].size:
                    flat = got[name].reshape(-1)
                    big = max(1.0, float(np.nanmax(np.abs(np.where(np.isfinite(flat), flat, 0)))))
                    flat[flat.size // 2] = flat[flat.size // 2] + 0.1 * big
                    break
        msgs = []
        for name in want:
            if name not in got:
                msgs.append("%s: missing from the package's outputs" % name)
                continue
            m = compare(name, got[name], want[name], tol.get(name))
            if m:
                msgs.append(m)
        if msgs:
            return Outcome("mismatch", "inputs%d: " % k + "\n".join(msgs))
    return Outcome("ok")


# ---------------------------------------------------------------- minimization

def all_values(args, d, model, feeds):
    """Every tensor the model computes, by the interpreter (all node outputs as outputs)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for n in m.graph.node:
        for o in n.output:
            if o and o not in have:
                m.graph.output.append(helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None))
    # (the interpreter takes outputs whose type is left to inference)
    os.makedirs(d, exist_ok=True)
    mp, ip, op = os.path.join(d, "all.onnx"), os.path.join(d, "all-in.npz"), os.path.join(d, "all-out.npz")
    onnx.save(m, mp)
    save_npz(ip, feeds)
    rc, out = run([args.coil, "interpret", mp, "--inputs", ip, "--outputs", op])
    if rc != 0:
        return None
    return load_npz(op)


def cut(model, feeds, values, keep_outputs, cut_at):
    """The model with outputs keep_outputs, the tensors in cut_at turned into graph inputs
    (holding their interpreted values), and everything unused pruned."""
    g = model.graph
    producers = {o: n for n in g.node for o in n.output}
    inits = {i.name: i for i in g.initializer}
    need, order = set(), []
    stack = list(keep_outputs)
    new_inputs = []
    while stack:
        t = stack.pop()
        if t in need or not t:
            continue
        need.add(t)
        if t in cut_at:
            continue
        n = producers.get(t)
        if n is not None:
            stack.extend(n.input)
    nodes = [n for n in g.node if any(o in need for o in n.output) and not all(o in cut_at for o in n.output if o in need)]
    new_feeds = {}
    inputs = []
    for i in g.input:
        if i.name in need:
            inputs.append(i)
            new_feeds[i.name] = feeds[i.name]
    for t in sorted(cut_at & need):
        v = values[t]
        inputs.append(helper.make_tensor_value_info(t, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)))
        new_feeds[t] = v
    outputs = [helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(values[o].dtype),
                                             [None] * values[o].ndim) for o in keep_outputs]
    graph = helper.make_graph(nodes, g.name, inputs, outputs, [inits[n] for n in sorted(need) if n in inits])
    m = helper.make_model(graph, opset_imports=model.opset_import, producer_name="difftest-min")
    m.ir_version = model.ir_version
    tol = tolerances(model)
    helper.set_model_props(m, {"difftest_tolerance": json.dumps({o: tol[o] for o in keep_outputs if o in tol})})
    return m, new_feeds


def minimize(args, d, model, feeds, outcome):
    sig = outcome.signature()
    values = all_values(args, os.path.join(d, "values"), model, feeds)
    if values is None:
        return model, feeds, outcome
    for f in feeds:
        values[f] = feeds[f]
    tries = [0]

    def same(m, f):
        tries[0] += 1
        o = check(args, os.path.join(d, "try"), m, f)
        return o if o.signature() == sig else None

    outs = [o.name for o in model.graph.output]
    if outcome.kind == "mismatch":
        lines = [re.sub(r"^inputs\d+: ", "", line) for line in outcome.detail.splitlines()]
        bad = [o for o in outs if any(line.startswith(o + ":") for line in lines)]
        outs = bad[:1] or outs
    best_model, best_feeds = cut(model, feeds, values, outs, set())
    o = same(best_model, best_feeds)
    if o is None:  # the failure needs several outputs: keep them all
        outs = [o.name for o in model.graph.output]
        best_model, best_feeds = cut(model, feeds, values, outs, set())
        o = outcome
    best, cuts = o, set()
    # try dropping outputs one at a time
    i = 0
    while len(outs) > 1 and i < len(outs):
        trial = outs[:i] + outs[i + 1:]
        m, f = cut(model, feeds, values, trial, cuts)
        o = same(m, f)
        if o:
            outs, best_model, best_feeds, best = trial, m, f, o
        else:
            i += 1
    # cut nodes, earliest first (removes the most at once), until nothing more can go
    changed = True
    while changed:
        changed = False
        for n in list(best_model.graph.node):
            for t in n.output:
                if not t or t in cuts or t in outs or t not in values:
                    continue
                m, f = cut(model, feeds, values, outs, cuts | {t})
                if len(m.graph.node) >= len(best_model.graph.node):
                    continue
                o = same(m, f)
                if o:
                    cuts = cuts | {t}
                    best_model, best_feeds, best = m, f, o
                    changed = True
                    break
            if changed:
                break
    return best_model, best_feeds, best


# ---------------------------------------------------------------- driver

def one(args, k):
    seed = args.seed * 1000003 + k
    if args.deadline is not None and time.time() > args.deadline:
        return None  # --time-limit: not started
    model, feeds = make_model(seed, args.batch)
    d = os.path.join(args.work, "m%d" % k)
    t0 = time.time()
    o = check(args, d, model, feeds)
    res = {"k": k, "seed": seed, "kind": o.kind, "detail": o.detail, "nodes": len(model.graph.node),
           "seconds": time.time() - t0}
    if o.kind not in ("ok", "invalid") and args.minimize:
        which = re.search(r"inputs(\d+)", o.detail)  # the input set that failed
        f0 = feeds[int(which.group(1)) if which else 0]
        m, f, mo = minimize(args, os.path.join(args.work, "min%d" % k), model, f0, o)
        md = os.path.join(args.work, "min-%d" % k)
        os.makedirs(md, exist_ok=True)
        onnx.save(m, os.path.join(md, "model.onnx"))
        save_npz(os.path.join(md, "inputs.npz"), f)
        with open(os.path.join(md, "failure.txt"), "w") as fh:
            fh.write("seed %d (difftest.py --seed %d, model %d)\n%s\n%s\n" % (seed, args.seed, k, mo.kind, mo.detail))
        res["minimized"] = md
        res["min_nodes"] = len(m.graph.node)
    if o.kind == "ok" and not args.keep:
        shutil.rmtree(d, ignore_errors=True)
    return res


def replay(args):
    """Each folder of --replay holds model.onnx and inputs.npz of a fixed failure."""
    fails = 0
    dirs = sorted(x for x in os.listdir(args.replay) if os.path.isdir(os.path.join(args.replay, x)))
    for name in dirs:
        src = os.path.join(args.replay, name)
        model = onnx.load(os.path.join(src, "model.onnx"))
        feeds = load_npz(os.path.join(src, "inputs.npz"))
        o = check(args, os.path.join(args.work, name), model, feeds)
        print("%-40s %s" % (name, o.kind if o.kind == "ok" else repr(o)))
        fails += o.kind != "ok"
    print("difftest replay: %d models, %d failed" % (len(dirs), fails))
    return 1 if fails else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--coil", default=os.path.join(ROOT, "build", "bin", "coil"))
    ap.add_argument("--count", type=int, default=20, help="models to generate")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch", type=int, default=4, help="independent subgraphs per model")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--work", default="/tmp/coil-difftest")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--no-ort", dest="ort", action="store_false")
    ap.add_argument("--minimize", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the folders of passing models")
    ap.add_argument("--replay", help="run the regressions in this folder instead")
    ap.add_argument("--json", help="write every model's result here")
    ap.add_argument("--time-limit", type=float, help="start no model after this many seconds (the "
                    "summary counts the models that ran; for campaigns on a machine lent by the hour)")
    ap.add_argument("--self-test", action="store_true",
                    help="move one output element of every compiled run by a tenth of the output's "
                         "largest magnitude (at least 0.1) and require every model to be reported "
                         "as a mismatch (so every model needs a float output: the seed of the "
                         "ctest has that)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    args.stats = {}
    if args.replay:
        return replay(args)
    t0 = time.time()
    args.deadline = t0 + args.time_limit if args.time_limit else None
    results = []
    skipped = 0
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
        for res in ex.map(lambda k: one(args, k), range(args.count)):
            if res is None:
                skipped += 1
                continue
            results.append(res)
            if len(results) % 50 == 0:
                bad = sum(r["kind"] != "ok" for r in results)
                print("difftest: %d models, %d failed, %.0f s" % (len(results), bad, time.time() - t0), flush=True)
            if res["kind"] != "ok":
                print("model %d (seed %d, %d nodes): %s\n  %s" % (
                    res["k"], res["seed"], res["nodes"], res["kind"],
                    res["detail"].strip().replace("\n", "\n  ")[-1500:]), flush=True)
                if "minimized" in res:
                    print("  minimized to %d nodes: %s" % (res["min_nodes"], res["minimized"]), flush=True)
    kinds = {}
    for r in results:
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    nodes = sum(r["nodes"] for r in results)
    print("difftest: %d models (%d subgraphs, %d nodes) in %.0f s, device %s, seed %d: %s" % (
        len(results), len(results) * args.batch, nodes, time.time() - t0, args.device, args.seed,
        ", ".join("%s %d" % kv for kv in sorted(kinds.items()))))
    if skipped:
        print("difftest: --time-limit %.0f s reached: %d of the %d models not started" % (
            args.time_limit, skipped, args.count))
    if args.ort:
        print("difftest: onnxruntime had no kernel for %d of the runs (those were checked against "
              "the interpreter only)" % args.stats.get("ort_refused", 0))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if args.self_test:
        caught = sum(r["kind"] == "mismatch" for r in results)
        print("difftest self-test: %d of %d models reported as mismatches" % (caught, len(results)))
        return 0 if caught == len(results) else 1
    return 1 if any(r["kind"] not in ("ok",) for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
