#!/usr/bin/env python3
"""The bad-input catalogue: malformed models, IR text, inputs and command lines.

Each case writes its files into a scratch folder, runs one coil command, and asserts the exit
code (1 for user errors unless stated) and that stderr states the rule broken (a regex). Any
other outcome -- a crash, a signal, an internal error, a different message -- fails the case.
Run with the normal build (ctest label `errors`) and with the ASan/UBSan build (`sanitize`),
where any sanitizer report also fails.

usage: catalogue.py --coil BIN --work DIR [--filter REGEX]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
COIL = None  # the coil binary under test (set by main; setups compile packages with it)


def model(nodes, inputs, outputs, inits=(), opset=17, **kw):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], **kw)
    return m


def vi(name, shape, dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


def relu_model():
    return model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2, 3])], [vi("y", [2, 3])])


def save(m, path):
    with open(path, "wb") as f:
        f.write(m.SerializeToString())


class Case:
    def __init__(self, name, regex, setup, argv, code=1):
        self.name, self.regex, self.setup, self.argv, self.code = name, regex, setup, argv, code


def cases():
    C = []

    def add(name, regex, setup, argv, code=1):
        C.append(Case(name, regex, setup, argv, code))

    good_inputs = lambda d: np.savez(os.path.join(d, "in.npz"), x=np.random.rand(2, 3).astype(np.float32))

    # --- files that are not ONNX models
    def truncated(d):
        b = relu_model().SerializeToString()
        open(os.path.join(d, "m.onnx"), "wb").write(b[: len(b) // 2])
    add("truncated-protobuf", r"error: .*m\.onnx: .*(not a valid ONNX|cannot parse|truncated|malformed)", truncated, ["inspect", "m.onnx"])
    add("not-protobuf", r"error: .*m\.onnx: .*(not a valid ONNX|cannot parse|malformed)",
        lambda d: open(os.path.join(d, "m.onnx"), "w").write("this is plain text, not a protobuf\n" * 20), ["inspect", "m.onnx"])
    add("empty-file", r"error: .*m\.onnx: .*(empty|not a valid ONNX|no graph)", lambda d: open(os.path.join(d, "m.onnx"), "wb").close(), ["inspect", "m.onnx"])
    add("missing-file", r"error: .*(cannot open|no such file|does not exist).*nothere\.onnx|nothere\.onnx.*(cannot open|no such file|does not exist)", lambda d: None, ["inspect", "nothere.onnx"])
    add("unknown-extension", r"error: .*m\.txt: unknown model type", lambda d: open(os.path.join(d, "m.txt"), "w").write("x"), ["inspect", "m.txt"])

    # --- graph structure
    add("empty-graph", r"error: .*m\.onnx: .*(no outputs|empty graph|graph has no)",
        lambda d: save(model([], [], []), os.path.join(d, "m.onnx")), ["inspect", "m.onnx"])

    def unknown_ops(d):
        m = model([helper.make_node("FooBar", ["x"], ["t"], name="first_bad"),
                   helper.make_node("BazQux", ["t"], ["y"], name="second_bad")], [vi("x", [2])], [vi("y", [2])])
        save(m, os.path.join(d, "m.onnx"))
    add("unknown-ops-all-listed", r"(?s)first_bad.*FooBar.*second_bad.*BazQux|second_bad.*BazQux.*first_bad.*FooBar", unknown_ops, ["inspect", "m.onnx"])

    def custom_domain(d):
        m = model([helper.make_node("Relu", ["x"], ["y"], name="r", domain="com.example")], [vi("x", [2])], [vi("y", [2])])
        m.opset_import.append(helper.make_opsetid("com.example", 1))
        save(m, os.path.join(d, "m.onnx"))
    add("custom-domain-op", r"error: .*node 'r'.*(com\.example|domain)", custom_domain, ["inspect", "m.onnx"])

    def old_opset(d):
        # Add changed between opsets 3 and 7 (the oldest supported; Softmax-1 would be accepted)
        m = model([helper.make_node("Add", ["x", "x"], ["y"], name="s")], [vi("x", [2, 3])], [vi("y", [2, 3])], opset=3)
        save(m, os.path.join(d, "m.onnx"))
    add("unsupported-old-opset", r"error: .*m\.onnx: node 's' \(Add\): model opset 3 is older than 7 .*onnx\.version_converter",
        old_opset, ["inspect", "m.onnx"])

    def old_opset_form(d):
        m = model([helper.make_node("Upsample", ["x"], ["y"], name="u", mode="foo", scales=[1.0, 2.0])],
                  [vi("x", [2, 3])], [vi("y", [2, 6])], opset=8)
        save(m, os.path.join(d, "m.onnx"))
    add("unsupported-old-opset-form", r"error: .*m\.onnx: node 'u' \(Upsample\): opset 8 form \(version 7 of "
        r"Upsample\) with mode 'foo' is not supported; re-export the model with opset >= 13", old_opset_form,
        ["inspect", "m.onnx"])

    def new_opset(d):
        m = relu_model()
        m.opset_import[0].version = 999
        save(m, os.path.join(d, "m.onnx"))
    add("unsupported-new-opset", r"error: .*m\.onnx: .*opset 999", new_opset, ["inspect", "m.onnx"])

    add("missing-required-attribute", r"error: .*node 'c' \(Cast\): .*(required attribute|attribute 'to')",
        lambda d: save(model([helper.make_node("Cast", ["x"], ["y"], name="c")], [vi("x", [2])], [vi("y", [2])]), os.path.join(d, "m.onnx")),
        ["inspect", "m.onnx"])

    def wrong_attr_type(d):
        n = helper.make_node("Softmax", ["x"], ["y"], name="s")
        n.attribute.append(helper.make_attribute("axis", 1.5))
        save(model([n], [vi("x", [2, 3])], [vi("y", [2, 3])]), os.path.join(d, "m.onnx"))
    add("attribute-wrong-type", r"error: .*node 's' \(Softmax\): attribute 'axis'.*(int|type)", wrong_attr_type, ["inspect", "m.onnx"])

    def unknown_attr(d):
        n = helper.make_node("Relu", ["x"], ["y"], name="r", flavour=3)
        save(model([n], [vi("x", [2])], [vi("y", [2])]), os.path.join(d, "m.onnx"))
    add("unknown-attribute", r"error: .*node 'r' \(Relu\): .*attribute 'flavour'", unknown_attr, ["inspect", "m.onnx"])

    add("wrong-arity", r"error: .*node 'a' \(Add\): .*(input|inputs)",
        lambda d: save(model([helper.make_node("Add", ["x"], ["y"], name="a")], [vi("x", [2])], [vi("y", [2])]), os.path.join(d, "m.onnx")),
        ["inspect", "m.onnx"])
    add("dangling-input", r"error: .*node 'r' \(Relu\): .*'ghost'",
        lambda d: save(model([helper.make_node("Relu", ["ghost"], ["y"], name="r")], [vi("x", [2])], [vi("y", [2])]), os.path.join(d, "m.onnx")),
        ["inspect", "m.onnx"])

    def dup_output(d):
        m = model([helper.make_node("Relu", ["x"], ["t"], name="r1"), helper.make_node("Neg", ["x"], ["t"], name="r2"),
                   helper.make_node("Abs", ["t"], ["y"], name="r3")], [vi("x", [2])], [vi("y", [2])])
        save(m, os.path.join(d, "m.onnx"))
    add("duplicate-output-name", r"error: .*'t'.*(more than once|duplicate|already|also produced)", dup_output, ["inspect", "m.onnx"])

    def cycle(d):
        m = model([helper.make_node("Add", ["x", "b"], ["a"], name="n1"), helper.make_node("Relu", ["a"], ["b"], name="n2"),
                   helper.make_node("Neg", ["a"], ["y"], name="n3")], [vi("x", [2])], [vi("y", [2])])
        save(m, os.path.join(d, "m.onnx"))
    add("cycle", r"error: .*m\.onnx: .*cycle", cycle, ["inspect", "m.onnx"])

    add("graph-output-not-produced", r"error: .*'nowhere'",
        lambda d: save(model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2])], [vi("nowhere", [2])]), os.path.join(d, "m.onnx")),
        ["inspect", "m.onnx"])

    # Found by the onnx fuzz target: the second listing became a value of the same name
    # (internal error: duplicate value name), for a node's output and for an input.
    add("graph-output-listed-twice", r"error: .*m\.onnx: graph output 'y' is listed twice",
        lambda d: save(model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2])], [vi("y", [2]), vi("y", [2])]),
                       os.path.join(d, "m.onnx")),
        ["inspect", "m.onnx"])
    add("graph-input-as-output-twice", r"error: .*m\.onnx: graph output 'x' is listed twice",
        lambda d: save(model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2])],
                             [vi("y", [2]), vi("x", [2]), vi("x", [2])]), os.path.join(d, "m.onnx")),
        ["inspect", "m.onnx"])
    # An empty name marks an absent optional node input; as a graph input it reached the
    # verifier as an internal error (found by scripts/fuzz.sh onnx).
    add("graph-input-without-name", r"error: .*m\.onnx: graph input #1 has no name",
        lambda d: save(model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2]), vi("", [2])],
                             [vi("y", [2])]), os.path.join(d, "m.onnx")),
        ["inspect", "m.onnx"])
    # AffineGrid's size of another length than 4 or 5, not a constant: the inferred type had a
    # negative dim (found by scripts/fuzz.sh onnx).
    add("affine-grid-size-length", r"error: .*node 'ag' \(AffineGrid\): size must have 4 or 5 values, got 1",
        lambda d: save(model([helper.make_node("AffineGrid", ["theta", "size"], ["grid"], name="ag")],
                             [vi("theta", [2, 3, 4]), vi("size", [1], TensorProto.INT64)], [vi("grid", None)],
                             opset=20), os.path.join(d, "m.onnx")),
        ["inspect", "m.onnx"])
    # A float Range of more elements than int64 holds: converting its size was undefined.
    add("range-float-too-large", r"error: .*node 'rg' \(Range\): range of 1\d{30}\.0+ elements is too large",
        lambda d: save(model([helper.make_node("Constant", [], ["a"], value_float=0.0, name="ca"),
                              helper.make_node("Constant", [], ["b"], value_float=1e30, name="cb"),
                              helper.make_node("Constant", [], ["c"], value_float=1.0, name="cc"),
                              helper.make_node("Range", ["a", "b", "c"], ["y"], name="rg")],
                             [], [vi("y", None)]), os.path.join(d, "m.onnx")),
        ["inspect", "m.onnx"])

    # --- types and shapes
    add("matmul-inner-dims", r"error: .*node 'mm' \(MatMul\): .*64.*32|error: .*node 'mm' \(MatMul\): .*32.*64",
        lambda d: save(model([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")], [vi("a", [4, 64]), vi("b", [32, 8])], [vi("y", [4, 8])]), os.path.join(d, "m.onnx")),
        ["inspect", "m.onnx"])
    add("matmul-inner-dims-unprovable", r"error: .*node 'mm' \(MatMul\): inner dimensions K and M cannot be proven equal .*--dynamic NAME=V:V",
        lambda d: save(model([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")], [vi("a", [4, "K"]), vi("b", ["M", 8])], [vi("y", [4, 8])]), os.path.join(d, "m.onnx")),
        ["compile", "m.onnx", "-o", "pkg"])
    add("broadcast-mismatch", r"error: .*node 'add' \(Add\): .*broadcast",
        lambda d: save(model([helper.make_node("Add", ["a", "b"], ["y"], name="add")], [vi("a", [2, 3]), vi("b", [4, 5])], [vi("y", [2, 3])]), os.path.join(d, "m.onnx")),
        ["inspect", "m.onnx"])
    add("conv-weight-rank", r"error: .*node 'conv' \(Conv\): .*rank",
        lambda d: save(model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv")], [vi("x", [1, 3, 8, 8]), vi("w", [4, 3, 3])], [vi("y", [1, 4, 6, 6])]), os.path.join(d, "m.onnx")),
        ["inspect", "m.onnx"])
    add("dtype-mismatch", r"error: .*node 'add' \(Add\): .*(f32|float).*(f16|float16)|error: .*node 'add' \(Add\): .*(f16|float16).*(f32|float)",
        lambda d: save(model([helper.make_node("Add", ["a", "b"], ["y"], name="add")], [vi("a", [2]), vi("b", [2], TensorProto.FLOAT16)], [vi("y", [2])]), os.path.join(d, "m.onnx")),
        ["inspect", "m.onnx"])

    def reshape_two_minus_one(d):
        shape = numpy_helper.from_array(np.array([-1, -1], dtype=np.int64), "s")
        save(model([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")], [vi("x", [2, 3])], [vi("y", [6])], [shape]), os.path.join(d, "m.onnx"))
    add("reshape-two-inferred-dims", r"error: .*node 'rs' \(Reshape\): .*-1", reshape_two_minus_one, ["inspect", "m.onnx"])

    def string_tensor(d):
        save(model([helper.make_node("Identity", ["x"], ["y"], name="i")], [vi("x", [2], TensorProto.STRING)], [vi("y", [2], TensorProto.STRING)]), os.path.join(d, "m.onnx"))
    add("unsupported-dtype", r"error: .*m\.onnx: .*'x'.*(string|dtype)", string_tensor, ["inspect", "m.onnx"])

    def ext_missing(d):
        t = numpy_helper.from_array(np.ones((4,), np.float32), "w")
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        e = t.external_data.add()
        e.key, e.value = "location", "weights.bin"
        save(model([helper.make_node("Add", ["x", "w"], ["y"], name="a")], [vi("x", [4])], [vi("y", [4])], [t]), os.path.join(d, "m.onnx"))
    add("external-data-missing", r"error: .*weights\.bin", ext_missing, ["inspect", "m.onnx"])

    # --- inputs
    def with_relu(d, **arrays):
        save(relu_model(), os.path.join(d, "m.onnx"))
        np.savez(os.path.join(d, "in.npz"), **arrays)
    add("npz-missing-input", r"error: .*in\.npz: missing input 'x'", lambda d: with_relu(d), ["interpret", "m.onnx", "--inputs", "in.npz"])
    add("npz-extra-array", r"error: .*in\.npz: array 'extra' is not an input",
        lambda d: with_relu(d, x=np.zeros((2, 3), np.float32), extra=np.zeros(1)), ["interpret", "m.onnx", "--inputs", "in.npz"])
    add("input-wrong-dtype", r"error: .*input 'x' must have dtype f32, got f64", lambda d: with_relu(d, x=np.zeros((2, 3), np.float64)), ["interpret", "m.onnx", "--inputs", "in.npz"])
    add("input-wrong-shape", r"error: .*input 'x' must have shape \[2, 3\], got \[3, 2\]", lambda d: with_relu(d, x=np.zeros((3, 2), np.float32)), ["interpret", "m.onnx", "--inputs", "in.npz"])
    add("input-wrong-rank", r"error: .*input 'x' must have rank 2", lambda d: with_relu(d, x=np.zeros((6,), np.float32)), ["interpret", "m.onnx", "--inputs", "in.npz"])

    def npz_garbage(d):
        save(relu_model(), os.path.join(d, "m.onnx"))
        open(os.path.join(d, "in.npz"), "w").write("not a zip archive")
    add("npz-not-zip", r"error: .*in\.npz: not a valid \.npz", npz_garbage, ["interpret", "m.onnx", "--inputs", "in.npz"])

    def npz_size_bomb(d):
        # An entry of 152 bytes whose archive directory and local header claim 4 GB (found by
        # the npz fuzz target: the reader allocated and zeroed the claimed size before reading;
        # test/fuzz/corpus/npz/oom-* replays it under the fuzzer's malloc limit).
        save(relu_model(), os.path.join(d, "m.onnx"))
        path = os.path.join(d, "in.npz")
        np.savez(path, x=np.zeros((2, 3), np.float32))
        b = bytearray(open(path, "rb").read())
        for sig, off in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
            at = b.find(sig)
            b[at + off:at + off + 4] = (0xF0000000).to_bytes(4, "little")
        open(path, "wb").write(bytes(b))
    add("npz-declared-size-bomb", r"error: .*in\.npz: entry 'x\.npy' is truncated or corrupt \(152 bytes, its header says 4026531840\)",
        npz_size_bomb,
        ["interpret", "m.onnx", "--inputs", "in.npz"])

    def dyn_model(d):
        m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", ["batch", 3])], [vi("y", ["batch", 3])])
        save(m, os.path.join(d, "m.onnx"))
        np.savez(os.path.join(d, "in.npz"), x=np.zeros((4, 3), np.float32))
    add("dim-outside-range", r"error: .*symbol 'batch' = 4 is outside its declared range \[1, 2\]", dyn_model,
        ["interpret", "m.onnx", "--inputs", "in.npz", "--dynamic", "batch=1:2"])
    add("dynamic-malformed", r"error: --dynamic expects NAME=MIN:MAX", dyn_model, ["interpret", "m.onnx", "--inputs", "in.npz", "--dynamic", "batch=9:2"])
    add("dynamic-unknown-symbol", r"error: .*symbol 'seq'", dyn_model, ["interpret", "m.onnx", "--inputs", "in.npz", "--dynamic", "seq=1:8"])

    def gather_oob(d):
        idx = numpy_helper.from_array(np.array([0, 7], dtype=np.int64), "i")
        save(model([helper.make_node("Gather", ["x", "i"], ["y"], name="g", axis=0)], [vi("x", [2, 3])], [vi("y", [2, 3])], [idx]), os.path.join(d, "m.onnx"))
        np.savez(os.path.join(d, "in.npz"), x=np.zeros((2, 3), np.float32))
    add("gather-index-out-of-range", r"error: .*node 'g' \(Gather\): .*(out of range|out of bounds).*7|error: .*node 'g' \(Gather\): .*7.*(out of range|out of bounds)", gather_oob,
        ["interpret", "m.onnx", "--inputs", "in.npz"])

    # --- text IR
    def coil_text(text):
        return lambda d: open(os.path.join(d, "g.coil"), "w").write(text)
    add("coil-syntax-error", r"error: .*g\.coil:2:\d+: ", coil_text("graph @g(%x: f32[2]) -> (%y) {\n  %y = Relu(%x :: f32[2]\n}\n"), ["inspect", "g.coil"])
    add("coil-unknown-op", r"error: .*g\.coil:2:\d+: .*(unknown op|Frobnicate)", coil_text("graph @g(%x: f32[2]) -> (%y) {\n  %y = Frobnicate(%x) : f32[2]\n}\n"), ["inspect", "g.coil"])
    add("coil-undefined-value", r"error: .*g\.coil:2:\d+: .*%?nothing", coil_text("graph @g(%x: f32[2]) -> (%y) {\n  %y = Relu(%nothing) : f32[2]\n}\n"), ["inspect", "g.coil"])
    add("coil-wrong-arity", r"^error: .*g\.coil:2:3: node of value 'y' \(Slice\): needs at least 3 inputs, got 1", coil_text("graph @g(%x: f32[2, 3]) -> (%y) {\n  %y = Slice(%x) : f32[2, 3]\n}\n"), ["inspect", "g.coil"])
    add("coil-attr-kind", r"^error: .*g\.coil:2:3: node of value 'y' \(Transpose\): attribute 'perm' must be ints, got floats", coil_text("graph @g(%x: f32[2, 3]) -> (%y) {\n  %y = Transpose(%x) {perm = [1.0, 0.0]} : f32[3, 2]\n}\n"), ["inspect", "g.coil"])
    add("coil-bad-dtype", r"error: .*g\.coil:1:\d+: .*(dtype|f33)", coil_text("graph @g(%x: f33[2]) -> (%x) {\n}\n"), ["inspect", "g.coil"])

    # --- Loop IR text (coil inspect --loops FILE.loops, lower/LoopParser.h)
    def loops_text(text):
        return lambda d: open(os.path.join(d, "p.loops"), "w").write(text)
    loops = ["inspect", "--loops", "p.loops"]
    add("loops-syntax-error", r"^error: .*p\.loops:1:3: expected ':' after the node name, got 'f32'", loops_text("x f32[4] = input 'x'\n"), loops)
    add("loops-truncated", r"^error: .*p\.loops:4:\d+: expected a size", loops_text("x: f32[4] = input 'x'\n\ny: f32[4] = pointwise (%x0)\n  %0 = load f32 x["), loops)
    add("loops-binary", r"^error: .*p\.loops:1:1: unexpected character '\\x00'", lambda d: open(os.path.join(d, "p.loops"), "wb").write(b"\x00\xff" * 64), loops)
    add("loops-verifier", r"^error: .*p\.loops:3:1: loop IR after parsing: node 1 'y': its result is f32, the node i64",
        loops_text("x: f32[4] = input 'x'\n\ny: i64[4] = pointwise (%x0)\n  %0 = load f32 x[%x0]\n  result %0\n"), loops)
    add("loops-unknown-pass", r"^error: unknown Loop IR pass 'frob' \(passes: fold-gemm-bias, fold-conv-bias\)", loops_text("x: f32[4] = input 'x'\n"), loops + ["--pass", "frob"])

    # --- compiled packages: bad inputs and damaged packages (coil compile / coil run)
    def package(d, damage=None):
        # y = Relu(x + w): a constant, so that weights.bin is not empty
        w = numpy_helper.from_array(np.arange(3, dtype=np.float32) - 1, "w")
        m = model([helper.make_node("Add", ["x", "w"], ["t"], name="a"), helper.make_node("Relu", ["t"], ["y"], name="r")],
                  [vi("x", ["N", 3])], [vi("y", ["N", 3])], [w])
        save(m, os.path.join(d, "m.onnx"))
        subprocess.run([COIL, "compile", "m.onnx", "-o", "p.pkg", "--dynamic", "N=1:8"], cwd=d, check=True, capture_output=True)
        if damage:
            damage(os.path.join(d, "p.pkg"))

    def with_inputs(**arrays):
        def setup(d):
            package(d)
            np.savez(os.path.join(d, "in.npz"), **arrays)
        return setup

    rnd = lambda *shape: np.random.rand(*shape).astype(np.float32)
    add("run-wrong-dtype", r"error: .*p\.pkg: input 0 'x' must have dtype f32, got f64", with_inputs(x=np.random.rand(2, 3)), ["run", "p.pkg", "--inputs", "in.npz"])
    add("run-wrong-dim", r"error: .*p\.pkg: input 0 'x' dim 1 must be 3, got 4", with_inputs(x=rnd(2, 4)), ["run", "p.pkg", "--inputs", "in.npz"])
    add("run-wrong-rank", r"error: .*p\.pkg: input 0 'x' must have rank 2, got 1", with_inputs(x=rnd(3)), ["run", "p.pkg", "--inputs", "in.npz"])
    add("run-dim-outside-range", r"error: .*input 0 'x' dim 0 \(N\) is 9, outside N's range \[1, 8\]", with_inputs(x=rnd(9, 3)), ["run", "p.pkg", "--inputs", "in.npz"])
    add("run-missing-input", r"error: .*in\.npz: missing input 'x'", with_inputs(z=rnd(2, 3)), ["run", "p.pkg", "--inputs", "in.npz"])
    add("run-extra-input", r"error: .*in\.npz: 'z' is not an input of the model", with_inputs(x=rnd(2, 3), z=rnd(1)), ["run", "p.pkg", "--inputs", "in.npz"])

    def damaged(fn):
        def setup(d):
            package(d, fn)
            np.savez(os.path.join(d, "in.npz"), x=rnd(2, 3))
        return setup
    add("package-corrupt-metadata", r"error: .*p\.pkg.*(invalid json|metadata)", damaged(lambda p: open(os.path.join(p, "metadata.json"), "w").write("garbage")), ["run", "p.pkg", "--inputs", "in.npz"])
    add("package-missing-model-so", r"error: .*p\.pkg.*model\.so", damaged(lambda p: os.remove(os.path.join(p, "model.so"))), ["run", "p.pkg", "--inputs", "in.npz"])
    # Issue 15: metadata.json, weights.bin and model.so are tied by SHA-256 digests; any change is
    # refused before model.so is loaded or a weight read (these crashed or ran on garbage).
    add("package-truncated-model-so", r"error: .*p\.pkg.*model\.so does not match metadata\.json \(modified, truncated or from another package\)",
        damaged(lambda p: open(os.path.join(p, "model.so"), "r+b").truncate(100)), ["run", "p.pkg", "--inputs", "in.npz"])

    def flip(name, at):
        def damage(p):
            path = os.path.join(p, name)
            b = bytearray(open(path, "rb").read())
            b[at % len(b)] ^= 0x10
            open(path, "wb").write(bytes(b))
        return damage

    def edit_meta(old, new):
        def damage(p):
            path = os.path.join(p, "metadata.json")
            text = open(path).read()
            assert old in text, old
            open(path, "w").write(text.replace(old, new, 1))
        return damage

    def swap_model_so(p):  # another package's model.so (a model of another weight)
        d = os.path.dirname(p)
        m = model([helper.make_node("Neg", ["x"], ["y"], name="r")], [vi("x", ["N", 3])], [vi("y", ["N", 3])])
        save(m, os.path.join(d, "other.onnx"))
        subprocess.run([COIL, "compile", "other.onnx", "-o", "other.pkg", "--dynamic", "N=1:8"], cwd=d, check=True, capture_output=True)
        shutil.copy(os.path.join(d, "other.pkg", "model.so"), os.path.join(p, "model.so"))

    add("package-flipped-weights-byte", r"error: .*p\.pkg.*weights\.bin does not match metadata\.json", damaged(flip("weights.bin", 0)),
        ["run", "p.pkg", "--inputs", "in.npz"])
    add("package-flipped-model-so-byte", r"error: .*p\.pkg.*model\.so does not match metadata\.json", damaged(flip("model.so", 5000)),
        ["run", "p.pkg", "--inputs", "in.npz"])
    add("package-swapped-model-so", r"error: .*p\.pkg.*model\.so does not match metadata\.json", damaged(swap_model_so),
        ["run", "p.pkg", "--inputs", "in.npz"])
    add("package-output-dtype-f64", r"error: .*p\.pkg.*metadata\.json was modified after it was written",
        damaged(edit_meta('"outputs": [\n    {"name": "y", "dtype": "f32"', '"outputs": [\n    {"name": "y", "dtype": "f64"')),
        ["run", "p.pkg", "--inputs", "in.npz"])
    add("package-output-dropped", r"error: .*p\.pkg.*metadata\.json was modified after it was written",
        damaged(edit_meta('"outputs": [\n    {"name": "y", "dtype": "f32", "shape": ["N", "3"]}\n  ]', '"outputs": []')),
        ["run", "p.pkg", "--inputs", "in.npz"])
    add("package-integrity-removed", r"error: .*p\.pkg.*metadata\.json has no integrity record",
        damaged(lambda p: open(os.path.join(p, "metadata.json"), "w").write(
            open(os.path.join(p, "metadata.json")).read().split(',\n  "integrity": ')[0] + "\n}\n")),
        ["run", "p.pkg", "--inputs", "in.npz"])
    add("package-not-a-package", r"error: .*nopkg: not a coil package", lambda d: os.makedirs(os.path.join(d, "nopkg"), exist_ok=True), ["run", "nopkg", "--inputs", "in.npz"])
    # --- run-time values that break an op's rule inside an extern kernel (shape tensors, K,
    #     axes read from inputs): `coil run` on the compiled package fails naming the node, and
    #     `coil interpret` on the same inputs fails too (the two agree)
    I64 = TensorProto.INT64

    def bad_values(op, nodes, ins, outs, arrays):
        def setup(d):
            save(model(nodes, ins, outs, opset=18), os.path.join(d, "m.onnx"))
            np.savez(os.path.join(d, "in.npz"), **arrays)
            if op:
                subprocess.run([COIL, "compile", "m.onnx", "-o", "p.pkg"], cwd=d, check=True, capture_output=True)
        return setup

    def run_and_interpret(name, node, op, message, nodes, ins, outs, arrays):
        where = r"node '%s' \(%s\)" % (node, op)
        add("run-bad-value-" + name, r"error: .*p\.pkg: .*" + where + ": " + message, bad_values(op, nodes, ins, outs, arrays),
            ["run", "p.pkg", "--inputs", "in.npz"], code=3)
        add("interpret-bad-value-" + name, r"error: .*m\.onnx: " + where, bad_values(None, nodes, ins, outs, arrays),
            ["interpret", "m.onnx", "--inputs", "in.npz"])

    i64 = lambda *v: np.array(v, dtype=np.int64)
    run_and_interpret("reshape-negative", "rs", "Reshape", r"reshape: shape value -3 at index 1 is invalid",
                      [helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")], [vi("x", [2, 6]), vi("s", [2], I64)], [vi("y", None)],
                      dict(x=rnd(2, 6), s=i64(4, -3)))
    run_and_interpret("reshape-count", "rs", "Reshape", r"reshape: the shape has 15 elements, the input 12",
                      [helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")], [vi("x", [2, 6]), vi("s", [2], I64)], [vi("y", None)],
                      dict(x=rnd(2, 6), s=i64(5, 3)))
    run_and_interpret("expand", "ex", "Expand", r"expand: shape value 5 at index 0 does not broadcast with input dim 0 of size 2",
                      [helper.make_node("Expand", ["x", "s"], ["y"], name="ex")], [vi("x", [2, 3]), vi("s", [2], I64)], [vi("y", None)],
                      dict(x=rnd(2, 3), s=i64(5, 3)))
    run_and_interpret("slice-step-zero", "sl", "Slice", r"slice: step of axis 1 is 0",
                      [helper.make_node("Slice", ["x", "b", "e", "a", "st"], ["y"], name="sl")],
                      [vi("x", [4, 5]), vi("b", [1], I64), vi("e", [1], I64), vi("a", [1], I64), vi("st", [1], I64)], [vi("y", None)],
                      dict(x=rnd(4, 5), b=i64(0), e=i64(3), a=i64(1), st=i64(0)))
    run_and_interpret("tile-negative", "ti", "Tile", r"tile: repeats value -2 at index 1 is negative",
                      [helper.make_node("Tile", ["x", "r"], ["y"], name="ti")], [vi("x", [2, 3]), vi("r", [2], I64)], [vi("y", None)],
                      dict(x=rnd(2, 3), r=i64(1, -2)))
    run_and_interpret("pad-crop", "pd", "Pad", r"pad: pads -2 and -2 crop more than dim 1's size 3",
                      [helper.make_node("Pad", ["x", "p"], ["y"], name="pd")], [vi("x", [2, 3]), vi("p", [4], I64)], [vi("y", None)],
                      dict(x=rnd(2, 3), p=i64(0, -2, 0, -2)))
    run_and_interpret("topk-k-too-large", "tk", "TopK", r"topk: k 9 is out of range \[0, 6\]",
                      [helper.make_node("TopK", ["x", "k"], ["v", "i"], name="tk", axis=1)], [vi("x", [2, 6]), vi("k", [1], I64)],
                      [vi("v", None), vi("i", None, I64)], dict(x=rnd(2, 6), k=i64(9)))
    run_and_interpret("range-huge", "rg", "Range", r"range: start 0, limit 1125899906842624, delta 1 give more than 2\^40 elements",
                      [helper.make_node("Range", ["a", "b", "c"], ["y"], name="rg")], [vi("a", [], I64), vi("b", [], I64), vi("c", [], I64)],
                      [vi("y", None, I64)], dict(a=np.array(0, np.int64), b=np.array(1 << 50, np.int64), c=np.array(1, np.int64)))
    run_and_interpret("constant-of-shape-negative", "cs", "ConstantOfShape", r"constant of shape: shape value -1 at index 0 is negative",
                      [helper.make_node("ConstantOfShape", ["s"], ["y"], name="cs")], [vi("s", [2], I64)], [vi("y", None)],
                      dict(s=i64(-1, 2)))
    run_and_interpret("squeeze-not-one", "sq", "Squeeze", r"squeeze: axis 1 has size 3, only dims of size 1 can be squeezed",
                      [helper.make_node("Squeeze", ["x", "a"], ["y"], name="sq")], [vi("x", [1, 3]), vi("a", [1], I64)], [vi("y", None)],
                      dict(x=rnd(1, 3), a=i64(1)))
    run_and_interpret("cumsum-axis", "cu", "CumSum", r"cumsum: axis 2 is out of range for rank 2",
                      [helper.make_node("CumSum", ["x", "a"], ["y"], name="cu")], [vi("x", [2, 3]), vi("a", [], I64)], [vi("y", [2, 3])],
                      dict(x=rnd(2, 3), a=np.array(2, np.int64)))
    run_and_interpret("reduce-axis-repeated", "rd", "ReduceSum", r"reduce: axis -1 appears more than once in axes",
                      [helper.make_node("ReduceSum", ["x", "a"], ["y"], name="rd", keepdims=1)], [vi("x", [2, 3]), vi("a", [2], I64)], [vi("y", None)],
                      dict(x=rnd(2, 3), a=i64(1, -1)))

    # Issue 15: element counts that overflow (the shape reported did not match the data).
    big = (1 << 62) + 1
    run_and_interpret("expand-overflow", "ex", "Expand", r"expand: the output shape \[4611686018427387905, 4\] has more than 2\^59 elements",
                      [helper.make_node("Expand", ["x", "s"], ["y"], name="ex")], [vi("x", [1, 4]), vi("s", [2], I64)], [vi("y", None)],
                      dict(x=rnd(1, 4), s=i64(big, 4)))
    run_and_interpret("tile-overflow", "ti", "Tile", r"tile: the output shape \[2147483648, 4294967296\] has more than 2\^59 elements",
                      [helper.make_node("Tile", ["x", "r"], ["y"], name="ti")], [vi("x", [2, 4]), vi("r", [2], I64)], [vi("y", None)],
                      dict(x=rnd(2, 4), r=i64(1 << 30, 1 << 30)))
    run_and_interpret("pad-overflow", "pd", "Pad", r"pad: the output shape \[2305843009213693954, 2305843009213693956\] has more than 2\^59 elements",
                      [helper.make_node("Pad", ["x", "p"], ["y"], name="pd")], [vi("x", [2, 4]), vi("p", [4], I64)], [vi("y", None)],
                      dict(x=rnd(2, 4), p=i64(1 << 60, 1 << 60, 1 << 60, 1 << 60)))

    def const_shape(op, shape_values, x_shape):
        def setup(d):
            s = numpy_helper.from_array(np.array(shape_values, np.int64), "s")
            save(model([helper.make_node(op, ["x", "s"], ["y"], name="n")], [vi("x", x_shape)], [vi("y", None)], [s]), os.path.join(d, "m.onnx"))
        return setup
    add("expand-constant-overflow", r"error: .*m\.onnx: node 'n' \(Expand\): output 0 of type f32\[4611686018427387905, 4\] has more than 2\^59 elements",
        const_shape("Expand", [big, 4], [1, 4]), ["compile", "m.onnx", "-o", "p.pkg"])
    add("tile-constant-overflow", r"error: .*m\.onnx: node 'n' \(Tile\): .*dim 0 \(2\*4611686018427387905\) overflows int64",
        const_shape("Tile", [big, 1], [2, 4]), ["inspect", "m.onnx"])
    add("pad-constant-overflow", r"error: .*m\.onnx: node 'n' \(Pad\): output 0 of type f32\[4611686018427387905, 4\] has more than 2\^59 elements",
        const_shape("Pad", [big - 2, 0, 0, 0], [2, 4]), ["inspect", "m.onnx"])

    def int_fold(op, a, b):
        def setup(d):
            inits = [numpy_helper.from_array(np.array(a, np.int64), "a"), numpy_helper.from_array(np.array(b, np.int64), "b")]
            save(model([helper.make_node(op, ["a", "b"], ["y"], name="n")], [], [vi("y", None, I64)], inits), os.path.join(d, "m.onnx"))
            np.savez(os.path.join(d, "in.npz"))
        return setup
    # Not errors: integer overflow wraps as in the kernels (the importer used to die of SIGFPE).
    add("div-int64-min-by-minus-one", r"^$", int_fold("Div", -(1 << 63), -1), ["inspect", "m.onnx"], code=0)
    add("mod-int64-min-by-minus-one", r"^$", int_fold("Mod", -(1 << 63), -1), ["inspect", "m.onnx"], code=0)

    def slice_step(d):
        inits = [numpy_helper.from_array(np.array([v], np.int64), n) for n, v in (("s", 3), ("e", -100), ("a", 0), ("st", -(1 << 63)))]
        save(model([helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"], name="sl")], [vi("x", [4])], [vi("y", None)], inits), os.path.join(d, "m.onnx"))
    add("slice-step-int64-min", r"error: .*m\.onnx: node 'sl' \(Slice\): slice step -9223372036854775808 of axis 0 is out of range", slice_step, ["inspect", "m.onnx"])

    def no_data(d):  # 57 bytes declaring 4 GiB: rejected before anything is allocated
        t = TensorProto()
        t.name, t.data_type = "w", F
        t.dims.extend([32768, 32768])
        save(model([helper.make_node("Add", ["x", "w"], ["y"], name="a")], [vi("x", [1])], [vi("y", None)], [t]), os.path.join(d, "m.onnx"))
    add("initializer-without-data", r"error: .*m\.onnx: tensor 'w' of shape \[32768, 32768\] has 0 elements in float_data, expected 1073741824",
        no_data, ["inspect", "m.onnx"])

    def ext_symlink(d):
        open(os.path.join(d, "..", "secret-outside.bin"), "wb").write(b"0123456789abcdef")
        link = os.path.join(d, "weights.bin")
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.abspath(os.path.join(d, "..", "secret-outside.bin")), link)
        t = numpy_helper.from_array(np.ones((4,), np.float32), "w")
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        e = t.external_data.add()
        e.key, e.value = "location", "weights.bin"
        save(model([helper.make_node("Add", ["x", "w"], ["y"], name="a")], [vi("x", [4])], [vi("y", [4])], [t]), os.path.join(d, "m.onnx"))
    add("external-data-symlink-escape", r"error: .*m\.onnx: tensor 'w' has external data location 'weights\.bin', which resolves \(through symbolic links\) to .*secret-outside\.bin', outside the model's folder",
        ext_symlink, ["inspect", "m.onnx"])

    add("compile-needs-output", r"error: 'coil compile' needs -o PKG", lambda d: None, ["compile", "x.onnx"])
    add("compile-unknown-device", r"error: .*(--device tpu is not supported|unknown device 'tpu' \(supported: cpu, cuda\))", lambda d: save(relu_model(), os.path.join(d, "m.onnx")), ["compile", "m.onnx", "-o", "p.pkg", "--device", "tpu"])

    # --- command line
    add("unknown-command", r"error: unknown command 'frobnicate'", lambda d: None, ["frobnicate"])
    add("unknown-option", r"error: unknown option '--bogus'", lambda d: None, ["inspect", "x.onnx", "--bogus"])
    add("interpret-needs-inputs", r"error: 'coil interpret' needs --inputs", lambda d: None, ["interpret", "x.onnx"])
    return C


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coil", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--filter")
    args = ap.parse_args()
    coil = os.path.abspath(args.coil)
    global COIL
    COIL = coil
    passed = failed = 0
    for c in cases():
        if args.filter and not re.search(args.filter, c.name):
            continue
        d = os.path.join(args.work, c.name)
        os.makedirs(d, exist_ok=True)
        c.setup(d)
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
        r = subprocess.run([coil] + c.argv, cwd=d, capture_output=True, text=True, timeout=120, env=env)
        problems = []
        if r.returncode != c.code:
            problems.append("exit code %d, want %d" % (r.returncode, c.code))
        if not re.search(c.regex, r.stderr, re.IGNORECASE):
            problems.append("stderr does not match /%s/" % c.regex)
        # UBSan reports "FILE:LINE:COL: runtime error: ..."; coil's own run failures print
        # "runtime error: PKG: ..." at the start of a line.
        if re.search(r"AddressSanitizer|:\d+:\d+: runtime error:|LeakSanitizer|UndefinedBehaviorSanitizer", r.stderr):
            problems.append("sanitizer report")
        if problems:
            failed += 1
            print("FAIL %s: %s\n  command: coil %s\n  stderr: %s" % (c.name, "; ".join(problems), " ".join(c.argv), r.stderr.strip()[:800]))
        else:
            passed += 1
            print("ok   %s: %s" % (c.name, r.stderr.strip().splitlines()[0] if r.stderr.strip() else ""))
    print("errors: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
