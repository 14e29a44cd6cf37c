#!/usr/bin/env python3
"""Tests of the Python module `coil`, the Python wrapper (src/wrapper.py) and the JSON export
(src/wrapper.json), on packages compiled by `coil compile`:
  - coil.load(PKG).run (model.so through libcoil_runtime) on random inputs of several sizes;
  - coil.pywrapper (src/wrapper.py through ctypes) gives bit-identical outputs;
  - replaying src/wrapper.json line by line (an executor of its own, below) gives them too, and
    every line, buffer and kernel of it agrees with metadata.json and wrapper.py;
  - the module's API: dicts, every dtype, DLPack in and out, errors with the runtime's message.
Usage: test_python.py --coil build/bin/coil --work DIR   (PYTHONPATH must hold build/python)
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import traceback

import numpy as np

import coil
import coil.pywrapper as pw

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # sim_cuda

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Models as coil text IR (the MLP is examples/mlp.onnx).
NONZERO = """graph @nz(%x: f32[N, 4], %w: f32[4, 3]) -> (%idx, %y) {
  symbol N in [1, 64]
  %r = Relu(%x) : f32[N, 4]
  %idx = NonZero(%r) : i64[2, K]
  %m = MatMul(%r, %w) : f32[N, 3]
  %y = Sigmoid(%m) : f32[N, 3]
}
"""
# Unique: an allocating extern with four outputs (MultiOutput lines) and a data-dependent U.
UNIQUE = """graph @uq(%x: f32[N]) -> (%y, %idx, %inv, %cnt) {
  symbol N in [1, 64]
  %y, %idx, %inv, %cnt = Unique(%x) {sorted = 1} : f32[U], i64[U], i64[N], i64[U]
}
"""
DTYPES = """graph @dtypes(%h: f16[N, 8], %m: bool[N, 8], %b: bf16[8], %i: i32[N, 8], %u: u8[8]) -> (%sel, %pos, %bsum, %isum, %u2) {
  symbol N in [1, 32]
  %z = Neg(%h) : f16[N, 8]
  %sel = Where(%m, %h, %z) : f16[N, 8]
  %hf = Cast(%h) {to = 1} : f32[N, 8]
  %bf = Cast(%b) {to = 1} : f32[8]
  %pos = Greater(%hf, %bf) : bool[N, 8]
  %bs = Add(%hf, %bf) : f32[N, 8]
  %bsum = Cast(%bs) {to = 16} : bf16[N, 8]
  %isum = Mul(%i, %i) : i32[N, 8]
  %u2 = Add(%u, %u) : u8[8]
}
"""

RNG = np.random.default_rng(1234)
COIL = None  # the coil binary (--coil)
FAILURES = []


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def random_array(dtype, shape):
    if dtype in ("f64", "f32", "f16"):
        return RNG.standard_normal(shape).astype(coil.numpy_dtype(dtype))
    if dtype == "bf16":
        return RNG.standard_normal(shape).astype(np.float32).astype(coil.numpy_dtype("bf16"))
    if dtype == "bool":
        return RNG.random(shape) > 0.5
    info = np.iinfo(coil.numpy_dtype(dtype))
    return RNG.integers(max(info.min, -100), min(info.max, 100), shape,
                        dtype=coil.numpy_dtype(dtype))


def random_inputs(model, sizes):
    shapes = []
    for t in model.inputs:
        shapes.append(tuple(int(eval(d, {"__builtins__": {}, "min": min, "max": max}, sizes))
                            for d in t.shape))
    return [random_array(t.dtype, s) for t, s in zip(model.inputs, shapes)]


def bits(a):
    a = np.ascontiguousarray(a)
    return a.reshape(-1).view(np.uint8), a.shape, a.dtype


def same(a, b):
    (ba, sa, _), (bb, sb, _) = bits(a), bits(b)
    return sa == sb and np.array_equal(ba, bb)


# ---- an executor of wrapper.json: proves the export carries the whole program

def replay_json(pkg, wj, inputs, constants, functions):
    """Runs the lines of wrapper.json (`wj`) on numpy arrays through pywrapper's Runtime."""
    rt = pw.Runtime(functions)
    env = {"__builtins__": {}, "min": min, "max": max}
    syms = {}

    def ev(text):
        return int(eval(text, env, syms))

    bufs = wj["buffers"]
    vals = [None] * len(bufs)
    for b in bufs:
        if b["kind"] == "input":
            vals[b["id"]] = inputs[b["index"]]
        elif b["kind"] == "constant":
            vals[b["id"]] = constants[b["index"]]

    def shape(i):
        return tuple(ev(d) for d in bufs[i]["shape"])

    def ensure_output(i):
        if bufs[i]["kind"] == "output" and vals[i] is None:
            vals[i] = rt.output(bufs[i]["dtype"], shape(i))

    arena = None
    for line in wj["lines"]:
        k = line["kind"]
        if k == "BindSymbol":
            syms[line["symbol"]] = int(vals[line["buffer"]].shape[line["dim"]])
            continue
        if arena is None and k not in ("Comment",):
            arena = rt.arena(ev(wj["arena_bytes"]))
        if k in ("Comment", "KernelDefinition", "DebugPrint"):
            continue
        if k == "Allocate":
            i = line["buffer"]
            off = bufs[i]["arena_offset"]
            vals[i] = (rt.view(arena, ev(off), bufs[i]["dtype"], shape(i)) if off is not None
                       else rt.empty(bufs[i]["dtype"], shape(i)))
        elif k == "Reuse":
            vals[line["to"]] = rt.reinterpret(vals[line["from"]], 0, bufs[line["to"]]["dtype"],
                                              shape(line["to"]))
            vals[line["from"]] = None
        elif k == "Reinterpret":
            vals[line["buffer"]] = rt.reinterpret(vals[line["base"]], ev(line["offset_bytes"]),
                                                  bufs[line["buffer"]]["dtype"],
                                                  shape(line["buffer"]))
        elif k in ("Free", "FreeIfNotReused"):
            vals[line["buffer"]] = None
        elif k == "KernelCall":
            kern = wj["kernels"][line["kernel"]]
            args = []
            for a in line["args"]:
                if a["kind"] == "buffer":
                    ensure_output(a["buffer"])
                    args.append(vals[a["buffer"]])
                elif a["kind"] == "size":
                    args.append(ev(a["value"]))
                else:
                    args.append(float(a["value"]))
            getattr(functions, kern["configs"][line["config"]]["launcher"])(*args)
        elif k in ("ExternKernelOut", "ExternKernelAlloc"):
            alloc = k == "ExternKernelAlloc"
            outs = [a for a in line["args"] if a["kind"] == "output"]
            nsym = [a for a in line["args"] if a["kind"] == "out_symbol"]
            cells_o, cells_s = rt.cells(len(outs)), rt.cells(len(nsym))
            args = [rt.alloc, rt.alloc_ctx] if alloc else []
            io = isym = 0
            for a in line["args"]:
                if a["kind"] == "buffer":
                    args.append(vals[a["buffer"]])
                elif a["kind"] == "output":
                    if alloc:
                        args.append(cells_o.at(io))
                        io += 1
                    else:
                        ensure_output(a["buffer"])
                        args.append(vals[a["buffer"]])
                elif a["kind"] == "size":
                    args.append(ev(a["value"]))
                elif a["kind"] == "float":
                    args.append(float(a["value"]))
                else:
                    args.append(cells_s.at(isym))
                    isym += 1
            getattr(functions, line["function"])(*args)
            if alloc:
                rt.check_alloc(line["function"])
                for j, a in enumerate(nsym):
                    syms[a["symbol"]] = cells_s[j]
                for j, a in enumerate(outs):
                    vals[a["buffer"]] = rt.adopt(cells_o[j], bufs[a["buffer"]]["dtype"],
                                                 shape(a["buffer"]))
        elif k == "MultiOutput":
            src = next(ln for ln in wj["lines"] if ln["kind"] == "ExternKernelAlloc" and
                       any(a["kind"] == "output" and a["buffer"] == line["source"]
                           for a in ln["args"]))
            target = [a["buffer"] for a in src["args"] if a["kind"] == "output"][line["index"]]
            vals[line["buffer"]] = vals[target]
        else:
            raise AssertionError(f"unknown line kind {k}")
    for i in wj["outputs"]:
        ensure_output(i)
    return [vals[i].reshape(shape(i)) for i in wj["outputs"]]


LINE_FIELDS = {
    "Comment": {"text"}, "BindSymbol": {"symbol", "buffer", "dim"}, "Allocate": {"buffer"},
    "Reuse": {"from", "to"}, "Reinterpret": {"buffer", "base", "offset_bytes"},
    "Free": {"buffer"}, "FreeIfNotReused": {"buffer"}, "KernelDefinition": {"kernel"},
    "KernelCall": {"kernel", "config", "args"},
    "ExternKernelOut": {"function", "place", "args", "origins"},
    "ExternKernelAlloc": {"function", "place", "args", "out_symbols", "origins"},
    "MultiOutput": {"buffer", "source", "index"}, "DebugPrint": {"when", "launch", "values"},
    # The host fallbacks of CUDA programs (never in a CPU package).
    "Synchronize": {"for"}, "HostAllocate": {"buffer", "for"}, "HostFree": {"buffer"},
    "CopyToHost": {"from", "to", "for"}, "CopyToDevice": {"from", "to", "allocate", "for"},
}


def check_json_schema(pkg, wj, meta, module):
    """wrapper.json against the package's other views of the same program."""
    check(wj["schema"] == "coil-wrapper" and wj["schema_version"] == 1, "schema and version")
    check(wj["name"] == meta["name"] and wj["device"] == meta["device"], "name and device")
    check(wj["arena_bytes"] == meta["arena_bytes"], "arena_bytes agrees with metadata.json")
    check([{"name": s["name"], "min": s["min"], "max": s["max"]} for s in wj["symbols"]] ==
          meta["symbols"], "symbols agree with metadata.json")
    bufs = wj["buffers"]
    check([b["id"] for b in bufs] == list(range(len(bufs))), "buffer ids are positions")
    for key, kind in (("inputs", "input"), ("outputs", "output"), ("constants", "constant")):
        ids = wj[key]
        check([bufs[i]["kind"] for i in ids] == [kind] * len(ids), f"{key} are {kind} buffers")
        check([bufs[i]["index"] for i in ids] == list(range(len(ids))), f"{key} indices")
        check(len([b for b in bufs if b["kind"] == kind]) == len(ids), f"every {kind} listed")
        mt = meta[key]
        check([bufs[i]["io_name"] if key != "constants" else bufs[i]["name"] for i in ids] ==
              [t["name"] for t in mt], f"{key} names agree with metadata.json")
        check([bufs[i]["dtype"] for i in ids] == [t["dtype"] for t in mt], f"{key} dtypes")
        if key != "constants":
            check([bufs[i]["shape"] for i in ids] == [t["shape"] for t in mt], f"{key} shapes")
    for b in bufs:
        check(set(b) == {"id", "name", "io_name", "kind", "index", "dtype", "shape", "bytes",
                         "arena_offset", "memory"}, f"buffer fields {sorted(b)}")
        # A CPU program has no host staging buffers.
        check(b["memory"] == "program", f"buffer memory {b}")
        if b["arena_offset"] is not None:
            check(b["kind"] == "intermediate", f"only intermediates are in the arena: {b}")
    # Kernels: the same as metadata.json's, and their launchers are wrapper.py's LAUNCHERS.
    check(len(wj["kernels"]) == len(meta["kernels"]), "kernel count")
    launchers = {}
    for kj, km in zip(wj["kernels"], meta["kernels"]):
        check(kj["name"] == km["name"] and kj["source"] == km["source"], "kernel names")
        check(kj["iteration_space"] == km["iteration_space"], "iteration spaces")
        check([c["name"] for c in kj["configs"]] == [c["name"] for c in km["configs"]], "configs")
        check([c["values"] for c in kj["configs"]] == [c["values"] for c in km["configs"]],
              "config values")
        check(kj["params"] == km["params"], "kernel params")
        for c in kj["configs"]:
            launchers[c["launcher"]] = "".join("I" if p["kind"] == "size" else "P"
                                               for p in kj["params"])
    check(launchers == module.LAUNCHERS, "launchers agree with wrapper.py")
    # Lines: fields by kind, references in range, chosen configs as in metadata.json, and the
    # externs called are wrapper.py's EXTERNS and metadata.json's externs.
    chosen = {i: [] for i in range(len(wj["kernels"]))}
    externs = []
    defined = set()
    for n, line in enumerate(wj["lines"]):
        check(line["line"] == n, "line positions")
        check(set(line) - {"line", "kind"} == LINE_FIELDS[line["kind"]],
              f"fields of {line['kind']}: {sorted(line)}")
        for f in ("buffer", "from", "to", "base", "source"):
            if f in line:
                check(0 <= line[f] < len(bufs), f"line {n} {f} in range")
        if line["kind"] == "BindSymbol":
            defined.add(line["symbol"])
        if line["kind"] == "KernelCall":
            kern = wj["kernels"][line["kernel"]]
            check(0 <= line["config"] < len(kern["configs"]), "config in range")
            check(len(line["args"]) == len(kern["params"]), "one argument per param")
            for a, p in zip(line["args"], kern["params"]):
                check(a["kind"] == p["kind"], f"argument kinds follow params in line {n}")
                if a["kind"] == "buffer":
                    check(bufs[a["buffer"]]["dtype"] == p["dtype"], "argument dtypes")
            chosen[line["kernel"]].append(line["config"])
        if line["kind"] in ("ExternKernelOut", "ExternKernelAlloc"):
            # A CPU program runs every extern on the host (libcoil_runtime).
            check(line["place"] == "host", f"extern place of line {n}: {line['place']}")
            if line["function"] not in externs:
                externs.append(line["function"])
            for s in line.get("out_symbols", []):
                defined.add(s)
    # DebugPrint lines: a before/after pair around every launch, in metadata.json's launch
    # order and with its names; each before line right above its launch line.
    prints = [(l["when"], l["launch"]) for l in wj["lines"] if l["kind"] == "DebugPrint"]
    check(prints == [(w, l["name"]) for l in meta["launches"] for w in ("before", "after")],
          f"DebugPrint lines follow metadata.json launches: {prints}")
    launch_kinds = ("KernelCall", "ExternKernelOut", "ExternKernelAlloc")
    for n, line in enumerate(wj["lines"]):
        if line["kind"] in launch_kinds:
            before = wj["lines"][n - 1]
            check(n > 0 and before["kind"] == "DebugPrint" and before["when"] == "before",
                  f"a DebugPrint before launch line {n}")
        if line["kind"] == "DebugPrint":
            for v in line["values"]:
                check(v["kind"] in ("buffer", "size", "float") and v["name"],
                      f"DebugPrint value {v}")
                if v["kind"] == "buffer":
                    check(0 <= v["buffer"] < len(bufs), f"DebugPrint buffer in range: {v}")
    check([chosen[i] for i in range(len(wj["kernels"]))] ==
          [k["chosen_configs"] for k in meta["kernels"]], "chosen configs agree")
    check(externs == meta["externs"] and externs == list(module.EXTERNS), "extern functions")
    check({b["symbol"] for b in meta["bindings"]} <= defined, "bound symbols are BindSymbol lines")


def check_debug_hook(pkg, wj, xs, ref):
    """wrapper.py with a debug hook: it is called at every DebugPrint line of wrapper.json, with
    that line's values (buffers as arrays of their dtype and shape, sizes evaluated), and the
    outputs stay model.so's."""
    calls = []

    def hook(when, launch, values):
        calls.append((when, launch, [(n, np.array(v, copy=True) if isinstance(v, np.ndarray)
                                      else v) for n, v in values]))

    w = pw.load(pkg, debug=hook)
    got = w.run(*xs)
    for i, (a, b) in enumerate(zip(ref, got)):
        check(same(a, b), f"{pkg}: output {i} differs with a debug hook")
    lines = [l for l in wj["lines"] if l["kind"] == "DebugPrint"]
    check(lines and [(c[0], c[1]) for c in calls] == [(l["when"], l["launch"]) for l in lines],
          f"{pkg}: the hook's calls are the DebugPrint lines")
    bufs = wj["buffers"]
    # The symbols' values: a size value that is a lone symbol reports it (input-bound symbols,
    # and those an allocating extern defines); then every size and shape must evaluate right.
    syms = {}
    for c, l in zip(calls, lines):
        for (n, got_v), v in zip(c[2], l["values"]):
            if v["kind"] == "size" and re.fullmatch(r"[A-Za-z_]\w*", v["value"]):
                check(syms.setdefault(v["value"], got_v) == got_v,
                      f"{pkg}: symbol {v['value']} changes")
    env = {"__builtins__": {}, "min": min, "max": max}
    for c, l in zip(calls, lines):
        check([n for n, _ in c[2]] == [v["name"] for v in l["values"]], f"value names {l}")
        for (n, got_v), v in zip(c[2], l["values"]):
            where = f"{pkg}: {c[0]} {c[1]} {n}"
            if v["kind"] == "buffer":
                b = bufs[v["buffer"]]
                check(isinstance(got_v, np.ndarray) and
                      got_v.dtype == pw.storage_dtype(b["dtype"]), f"{where}: a {b['dtype']} array")
                shape = tuple(int(eval(d, env, dict(syms))) for d in b["shape"])  # noqa: S307
                check(got_v.shape == shape, f"{where}: shape {got_v.shape}, not {shape}")
            elif v["kind"] == "size":
                want = int(eval(v["value"], env, dict(syms)))  # noqa: S307
                check(type(got_v) is int and got_v == want, f"{where} = {got_v!r}, not {want}")
            else:
                check(type(got_v) is float and got_v == v["value"], f"{where} = {got_v!r}")
    # The last after call that reports an output buffer saw what the run returns (outputs that
    # are MultiOutput aliases appear under the extern's own buffer).
    for i, oi in enumerate(wj["outputs"]):
        last = None
        for c, l in zip(calls, lines):
            for (n, got_v), v in zip(c[2], l["values"]):
                if c[0] == "after" and v["kind"] == "buffer" and v["buffer"] == oi:
                    last = got_v
        if last is not None:
            check(np.ascontiguousarray(ref[i]).tobytes() == last.tobytes(),
                  f"{pkg}: output {i} as the hook saw it")


def check_dot(pkg, wj, coil_bin):
    dot = open(os.path.join(pkg, "src", "wrapper.dot")).read()
    check(dot.count("digraph") == 1, "one digraph")
    for b in wj["buffers"]:
        check(re.search(rf"^  b{b['id']} \[", dot, re.M), f"buffer node b{b['id']}")
    for line in wj["lines"]:
        if line["kind"] in ("KernelCall", "ExternKernelOut", "ExternKernelAlloc"):
            check(re.search(rf"^  l{line['line']} \[", dot, re.M), f"launch node l{line['line']}")
            for a in line["args"]:
                if a["kind"] in ("buffer", "output"):
                    check(re.search(rf"^  (b{a['buffer']} -> l{line['line']}|"
                                    rf"l{line['line']} -> b{a['buffer']})\b", dot, re.M),
                          f"edge between b{a['buffer']} and l{line['line']}")
    if shutil.which("dot"):  # coil inspect PKG --wrapper --svg renders it with Graphviz
        svg = os.path.join(pkg, "wrapper.svg")
        r = subprocess.run([coil_bin, "inspect", pkg, "--wrapper", "--svg", svg],
                           capture_output=True, text=True)
        check(r.returncode == 0 and r.stdout == f"wrote {svg}\n", f"inspect --svg: {r.stderr}")
        text = open(svg).read()
        check("<svg" in text, "an SVG file")
        for k in wj["kernels"]:
            check(k["name"] in text, f"kernel {k['name']} in the SVG")
    else:
        print("note: Graphviz's dot is not installed; inspect --svg not tested")


def compile_model(coil_bin, work, name, model, extra=()):
    pkg = os.path.join(work, name + ".pkg")
    shutil.rmtree(pkg, ignore_errors=True)
    if not os.path.exists(model):
        path = os.path.join(work, name + ".coil")
        with open(path, "w") as f:
            f.write(model)
        model = path
    r = subprocess.run([coil_bin, "compile", model, "-o", pkg, *extra], capture_output=True,
                       text=True)
    check(r.returncode == 0, f"coil compile {name}: {r.stderr}")
    return pkg


def test_package(pkg, sizes_list, make_inputs=random_inputs):
    m = coil.load(pkg)
    w = pw.load(pkg, debug=None)
    wj = json.load(open(os.path.join(pkg, "src", "wrapper.json")))
    meta = json.load(open(os.path.join(pkg, "metadata.json")))
    check_json_schema(pkg, wj, meta, w.module)
    check_dot(pkg, wj, COIL)
    for sizes in sizes_list:
        xs = make_inputs(m, sizes)
        ref = m.run(*xs)
        check(len(ref) == len(m.outputs), "one array per output")
        for o, t in zip(ref, m.outputs):
            check(o.dtype == coil.numpy_dtype(t.dtype), f"output dtype {o.dtype} for {t.dtype}")
        got = w.run(*xs)
        for i, (a, b) in enumerate(zip(ref, got)):
            check(same(a, b), f"{pkg} sizes {sizes}: wrapper.py output {i} differs from model.so")
        host = [coil.as_host_array(x, t.dtype) for x, t in zip(xs, m.inputs)]
        replayed = replay_json(pkg, wj, host, w.constants, w._functions)
        for i, (a, b) in enumerate(zip(ref, replayed)):
            check(same(a, b), f"{pkg} sizes {sizes}: wrapper.json replay output {i} differs")
        byname = m.run({t.name: x for t, x in zip(m.inputs, xs)})
        check(all(same(a, b) for a, b in zip(ref, byname)), "inputs by name")
        check_debug_hook(pkg, wj, xs, ref)
    # wrapper.py as a program: python3 PKG/src/wrapper.py IN.npz OUT.npz
    np.savez(os.path.join(pkg, "in.npz"), **{t.name: coil.as_host_array(x, t.dtype)
                                            for t, x in zip(m.inputs, xs)})
    r = subprocess.run([sys.executable, os.path.join(pkg, "src", "wrapper.py"),
                        os.path.join(pkg, "in.npz"), os.path.join(pkg, "out.npz")],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"wrapper.py as a program: {r.stderr}")
    saved = np.load(os.path.join(pkg, "out.npz"))
    for t, a in zip(m.outputs, ref):
        check(same(coil.as_host_array(a), saved[t.name]), f"wrapper.py saved output {t.name}")


class DLPackOnly:
    """A tensor that only speaks DLPack (no buffer protocol, not a numpy array)."""

    def __init__(self, a, device=None):
        self._a = a
        self._device = device

    def __dlpack__(self, stream=None, **kw):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._device or self._a.__dlpack_device__()


def expect_error(fn, pattern):
    try:
        fn()
    except coil.Error as e:
        check(re.search(pattern, str(e)), f"message {str(e)!r} !~ {pattern!r}")
        return
    raise AssertionError(f"no coil.Error matching {pattern!r}")


def test_extern_failure(coil_bin, work):
    """A run-time value an extern rejects fails wrapper.py's run with the extern's message and
    the graph node (the same words as model.so), never a silent empty output."""
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")], "rs",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
                           helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = os.path.join(work, "reshape_values.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), path)
    pkg = compile_model(coil_bin, work, "reshape_values", path)
    w = pw.load(pkg)
    x = RNG.standard_normal((2, 6)).astype(np.float32)
    (y,) = w.run(x, np.array([3, 4], np.int64))
    check(same(y, x.reshape(3, 4)), "a valid run-time shape")
    # The error names the graph node as wrapper.cpp does, with the extern's message.
    expect_error(lambda: w.run(x, np.array([4, -3], np.int64)),
                 r"^node 'rs' \(Reshape\): reshape: shape value -3 at index 1 is invalid$")
    try:
        coil.load(pkg).run(x, np.array([4, -3], np.int64))
        raise AssertionError("model.so accepted shape [4, -3]")
    except coil.Error as e:  # model.so's message ends with the same text
        check(str(e).endswith("node 'rs' (Reshape): reshape: shape value -3 at index 1 is "
                              "invalid"), f"model.so says {str(e)!r}")
    (y,) = w.run(x, np.array([6, 2], np.int64))
    check(same(y, x.reshape(6, 2)), "a valid run after a failed one")


def compile_cuda(coil_bin, work, name, model, extra=()):
    """A CUDA package of `model`, or None when this machine cannot build one (no nvcc)."""
    try:
        return compile_model(coil_bin, work, name + "_cuda", model, ["--device", "cuda", *extra])
    except AssertionError as e:
        if "nvcc" in str(e) or "CUDA" in str(e):
            return None
        raise


def test_cuda_simulated(coil_bin, work, cases):
    """wrapper.py of CUDA packages through coil.pywrapper's CUDA runtime on a simulated device
    (sim_cuda.py: host memory as device memory, the CPU package's launchers as kernels): the
    outputs equal the CPU package's bit for bit, every block is freed, and an extern failure
    names its node. Returns a note when no CUDA package can be built here."""
    import sim_cuda

    done = 0
    for name, model, extra, sizes_list, make_inputs in cases:
        cuda = compile_cuda(coil_bin, work, name, model, extra)
        if cuda is None:
            return "skipped: coil compile --device cuda needs nvcc"
        cpu = compile_model(coil_bin, work, name, model, extra)
        m = coil.load(cpu)
        w = sim_cuda.SimWrapper(cuda, cpu)
        check(w.device == "cuda" and w.module.DEVICE == "cuda", "a CUDA wrapper.py")
        for sizes in sizes_list:
            xs = make_inputs(m, sizes)
            ref = m.run(*xs)
            got = w.run(*xs)
            for i, (a, b) in enumerate(zip(ref, got)):
                check(same(a, b), f"{name} sizes {sizes}: simulated CUDA wrapper.py output {i} "
                                  f"differs from the CPU package")
        done += w.sim.runs
    # An extern failure on CUDA (a host fallback) names the node, as model.so does.
    cpu = os.path.join(work, "reshape_values.pkg")
    cuda = compile_cuda(coil_bin, work, "reshape_values", os.path.join(work, "reshape_values.onnx"))
    w = sim_cuda.SimWrapper(cuda, cpu)
    x = RNG.standard_normal((2, 6)).astype(np.float32)
    (y,) = w.run(x, np.array([3, 4], np.int64))
    check(same(y, x.reshape(3, 4)), "a valid run-time shape on the simulated device")
    expect_error(lambda: w.run(x, np.array([4, -3], np.int64)),
                 r"^node 'rs' \(Reshape\): reshape: shape value -3 at index 1 is invalid$")
    return f"{done} simulated runs"


def test_api(mlp_pkg, nz_pkg):
    m = coil.load(mlp_pkg)
    check(m.device == "cpu", "device")
    check([t.name for t in m.inputs] == ["x"] and m.inputs[0].dtype == "f32", "inputs")
    check(m.inputs[0].shape == ("batch", "16"), f"symbolic dims {m.inputs[0].shape}")
    check(m.outputs[0].shape == ("batch", "10"), "output dims")
    check("batch" in m.symbols, "symbols")
    x = RNG.standard_normal((3, 16)).astype(np.float32)
    (ref,) = m.run(x)
    # DLPack in: a DLPack-only object; DLPack out: numpy consumes the output by __dlpack__.
    (y,) = m.run(DLPackOnly(x))
    check(same(ref, y), "DLPack input")
    check(same(np.from_dlpack(ref), ref), "DLPack output")
    # Non-contiguous inputs are made contiguous.
    xt = np.asfortranarray(x)
    check(same(m.run(xt)[0], ref), "Fortran-ordered input")
    # Errors carry the runtime's messages.
    expect_error(lambda: m.run(x.astype(np.float64)), r"input 0 'x'.*f32.*f64|dtype")
    expect_error(lambda: m.run(x[:, :5]), r"input 0 'x' dim 1 must be 16")
    expect_error(lambda: m.run(x, x), r"takes 1 inputs, got 2")
    expect_error(lambda: m.run(np.zeros((3, 16), object)), r"input 0 'x' has numpy dtype object")
    expect_error(lambda: m.run(np.zeros((3, 16), np.complex64)),
                 r"input 0 'x' has numpy dtype complex64, which coil does not support")
    expect_error(lambda: m.run({"y": x}), r"missing \['x'\], unknown \['y'\]")
    expect_error(lambda: coil.load(os.path.join(mlp_pkg, "nope")), r"nope")
    # CUDA tensors need a CUDA package.
    expect_error(lambda: m.run(DLPackOnly(x, device=(2, 0))), r"CPU package")
    check(issubclass(coil.Error, RuntimeError), "coil.Error is a RuntimeError")
    # The Python wrapper checks inputs as the runtime does.
    w = pw.load(nz_pkg, debug=None)
    expect_error(lambda: w.run(np.zeros((65, 4), np.float32), np.zeros((4, 3), np.float32)),
                 r"symbol N = 65 is outside its range \[1, 64\]")
    expect_error(lambda: w.run(np.zeros((2, 5), np.float32), np.zeros((4, 3), np.float32)),
                 r"input 0 'x' dim 1 must be 4")
    # The Python wrapper's debug printer (the hook DebugPrint lines call): its three modes and
    # its filter, which names the valid launches.
    import io
    import tempfile
    vals = [("x", np.array([1.0, np.nan, np.inf, -2.0], np.float32)), ("n", 4), ("eps", 0.5)]
    buf = io.StringIO()
    pw.DebugPrinter("names", "", ".", ["k0"], out=buf)("before", "k0", vals)
    check(buf.getvalue() == "[before_launch: k0]\n", buf.getvalue())
    buf = io.StringIO()
    pr = pw.DebugPrinter("2", "K0", ".", ["k0", "k1"], out=buf)
    pr("after", "k1", vals)  # filtered out
    pr("after", "k0", vals)
    text = buf.getvalue()
    check("k1" not in text and "[after_launch - k0 - x] dtype float32, shape [4]" in text, text)
    check("nan 1, inf 1" in text and "[after_launch - k0 - n] int 4" in text, text)
    check("[after_launch - k0 - eps] float 0.5" in text, text)
    with tempfile.TemporaryDirectory() as d:
        pw.DebugPrinter("save", "", d, ["k0"])("before", "k0", vals)
        saved = np.load(os.path.join(d, "before_k0_x.npy"))
        check(same(saved, vals[0][1]), "saved .npy round-trips")
        check(sorted(os.listdir(d)) == ["before_k0_x.npy"], "only tensors are saved")
    try:
        pw.DebugPrinter("names", "nosuchkernel", ".", ["k0_relu", "coil_cpu_gemm_f32"])
        raise AssertionError("unknown kernel accepted")
    except coil.Error as e:
        check("k0_relu" in str(e) and "nosuchkernel" in str(e), str(e))
    # With the package's launches (metadata.json): the MLP calls coil_cpu_gemm_bias_f32 twice, as
    # the launches coil_cpu_gemm_bias_f32_0 and _1. COIL_DEBUG_KERNELS takes a launch's name, or the
    # function's for all its launches, as the runtime's printer does.
    saved = {k: os.environ.get(k) for k in ("COIL_DEBUG_PRINTER", "COIL_DEBUG_KERNELS")}
    try:
        os.environ["COIL_DEBUG_PRINTER"] = "names"
        for kernels, expect in (("coil_cpu_gemm_bias_f32_1", ["coil_cpu_gemm_bias_f32_1"]),
                                ("COIL_CPU_GEMM_BIAS_F32, k0_sum",
                                 ["k0_sum", "coil_cpu_gemm_bias_f32_0", "coil_cpu_gemm_bias_f32_1"]),
                                ("", ["k0_sum", "coil_cpu_gemm_bias_f32_0",
                                      "coil_cpu_gemm_bias_f32_1", "k1_max"])):
            os.environ["COIL_DEBUG_KERNELS"] = kernels
            w = pw.load(mlp_pkg)
            w.debug.out = buf = io.StringIO()
            (y,) = w.run(x)
            check(same(y, ref), "outputs with the debug printer on")
            want = "".join(f"[{when}_launch: {n}]\n" for n in expect
                           for when in ("before", "after"))
            check(buf.getvalue() == want, f"COIL_DEBUG_KERNELS={kernels!r}: {buf.getvalue()!r}")
        os.environ["COIL_DEBUG_KERNELS"] = "coil_cpu_gemm_bias_f32_2"
        try:
            pw.load(mlp_pkg)
            raise AssertionError("unknown launch accepted")
        except coil.Error as e:
            check("coil_cpu_gemm_bias_f32_0, coil_cpu_gemm_bias_f32_1, k1_max" in str(e) and
                  "extern function for all its launches: coil_cpu_gemm_bias_f32" in str(e), str(e))
        os.environ["COIL_DEBUG_PRINTER"] = "0"
        check(pw.load(mlp_pkg).debug is None, "COIL_DEBUG_PRINTER=0: no hook")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


SCALAR = """graph @scalar(%s: f32[], %y: f32[N]) -> (%z, %t) {
  symbol N in [1, 16]
  %z = Mul(%s, %y) : f32[N]
  %t = Neg(%s) : f32[]
}
"""


def test_inputs_and_paths(work, mlp_pkg):
    """Issue 15: a rank-0 input stays rank 0 (np.ascontiguousarray made it rank 1), big-endian
    arrays run (a raw TypeError before), a path with a NUL is refused (C read it only up to the
    NUL: another file)."""
    pkg = compile_model(COIL, work, "scalar", SCALAR)
    m = coil.load(pkg)
    check(m.inputs[0].shape == (), f"rank-0 input signature {m.inputs[0].shape}")
    s = np.array(1.5, np.float32)
    y = RNG.standard_normal(5).astype(np.float32)
    for run in (m.run, pw.load(pkg, debug=None).run):
        z, t = run(s, y)
        check(same(z, (s * y).astype(np.float32)) and t.shape == () and t == -1.5,
              f"rank-0 input and output: {z} {t!r}")
        z2, _ = run({"s": np.float32(1.5), "y": y})  # a numpy scalar is rank 0 too
        check(same(z2, z), "numpy scalar input")
    expect_error(lambda: m.run(np.array([1.5], np.float32), y), r"input 0 's' must have rank 0, got 1")
    # Big-endian (and byte-swapped views) give the same results as native arrays.
    mm = coil.load(mlp_pkg)
    x = RNG.standard_normal((3, 16)).astype(np.float32)
    (ref,) = mm.run(x)
    (big,) = mm.run(x.astype(">f4"))
    check(same(big, ref), "big-endian input")
    (wbig,) = pw.load(mlp_pkg, debug=None).run(x.astype(">f4"))
    check(same(wbig, ref), "big-endian input through wrapper.py")
    for bad in (mlp_pkg + "\0/../elsewhere", mlp_pkg + "\0"):
        expect_error(lambda: coil.load(bad), r"contains a NUL character")
        expect_error(lambda: pw.load(bad), r"contains a NUL character")
    check(coil.load(os.fsencode(mlp_pkg)).path == mlp_pkg, "bytes paths")


def test_tampered_packages(work, mlp_pkg):
    """Issue 15: coil.load and coil.pywrapper.load refuse a package whose files do not match
    metadata.json's integrity record, before running any of it."""
    cases = [
        ("weights.bin", 17, r"weights\.bin does not match metadata\.json"),
        ("model.so", 4097, r"model\.so does not match metadata\.json"),
        ("src/wrapper.py", 30, r"src/wrapper\.py does not match metadata\.json"),
        ("metadata.json", 200, r"metadata\.json was modified after it was written"),
    ]
    for name, at, pattern in cases:
        pkg = os.path.join(work, "tampered.pkg")
        shutil.rmtree(pkg, ignore_errors=True)
        shutil.copytree(mlp_pkg, pkg)
        path = os.path.join(pkg, name)
        data = bytearray(open(path, "rb").read())
        data[at] ^= 0x01
        open(path, "wb").write(bytes(data))
        expect_error(lambda: coil.load(pkg), pattern)
        expect_error(lambda: pw.load(pkg, debug=None), pattern)
    # An output's dtype changed to f64 (ran with garbage before).
    shutil.rmtree(pkg)
    shutil.copytree(mlp_pkg, pkg)
    meta = open(os.path.join(pkg, "metadata.json")).read()
    at = meta.index('"outputs"')
    meta = meta[:at] + meta[at:].replace('"dtype": "f32"', '"dtype": "f64"', 1)
    open(os.path.join(pkg, "metadata.json"), "w").write(meta)
    expect_error(lambda: coil.load(pkg), r"metadata\.json was modified")
    expect_error(lambda: pw.load(pkg, debug=None), r"metadata\.json was modified")


def test_printer_values(dt_pkg):
    """Issue 15: the Python wrapper's printer shows bf16 buffers as values (not the statistics
    of their bits) with NaN and Inf counts, and strides in elements as the C++ printer does."""
    vals = np.array([1.0, -2.5, np.nan, np.inf, 0.5, 3.0], np.float32)
    bits = (vals.view(np.uint32) >> 16).astype(np.uint16).view(pw.BFloat16Bits)
    text = pw.describe(bits)
    check(text.startswith("dtype bfloat16, shape [6], strides [1]"), text)
    check("min -2.5, max inf, mean inf, nan 1, inf 1" in text, text)
    check("values [1.0, -2.5, nan, inf, 0.5, 3.0]" in text, text)
    f = np.arange(12, dtype=np.float32).reshape(3, 4)
    check("strides [4, 1]" in pw.describe(f), pw.describe(f))
    check("strides [4, 2]" in pw.describe(f[:, ::2]), pw.describe(f[:, ::2]))
    check("nan 0, inf 0" in pw.describe(np.arange(3, dtype=np.int64)), "integer counts")
    # bf16 buffers of a run (input %b, output %bsum of the DTYPES model) reach hooks marked.
    seen = []
    w = pw.load(dt_pkg, debug=lambda when, launch, values: seen.extend(values))
    xs = random_inputs(coil.load(dt_pkg), {"N": 3})
    w.run(*xs)
    marked = [v for _, v in seen if isinstance(v, pw.BFloat16Bits)]
    check(marked, "bf16 buffers reach the hook as BFloat16Bits")
    check(all(pw.describe(v).startswith("dtype bfloat16") for v in marked), "bf16 described")
    check(not any(isinstance(v, np.ndarray) and v.dtype == np.uint16 and
                  not isinstance(v, pw.BFloat16Bits) for _, v in seen), "no bf16 as plain uint16")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coil", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    global COIL
    COIL = a.coil
    os.makedirs(a.work, exist_ok=True)
    mlp = compile_model(a.coil, a.work, "mlp", os.path.join(ROOT, "examples", "mlp.onnx"))
    mlp_dyn = compile_model(a.coil, a.work, "mlp_dynamic",
                            os.path.join(ROOT, "examples", "mlp.onnx"), ["--dynamic", "batch=1:48"])
    nz = compile_model(a.coil, a.work, "nonzero", NONZERO)
    dt = compile_model(a.coil, a.work, "dtypes", DTYPES)
    uq = compile_model(a.coil, a.work, "unique", UNIQUE)

    def repeated_values(m, sizes):  # values with repeats, so that Unique has work to do
        return [np.round(RNG.standard_normal(sizes["N"]) * 2).astype(np.float32)]

    tests = [
        ("mlp (extern GEMM)", lambda: test_package(mlp, [{"batch": 1}, {"batch": 7}, {"batch": 33}])),
        ("mlp --dynamic", lambda: test_package(mlp_dyn, [{"batch": 2}, {"batch": 48}])),
        ("nonzero (allocating extern, data-dependent dim)",
         lambda: test_package(nz, [{"N": 1}, {"N": 5}, {"N": 64}])),
        ("every dtype", lambda: test_package(dt, [{"N": 1}, {"N": 9}])),
        ("unique (MultiOutput lines)",
         lambda: test_package(uq, [{"N": 1}, {"N": 20}, {"N": 64}], repeated_values)),
        ("module API", lambda: test_api(mlp, nz)),
        ("rank-0, big-endian and NUL inputs", lambda: test_inputs_and_paths(a.work, mlp)),
        ("tampered packages", lambda: test_tampered_packages(a.work, mlp)),
        ("printer values", lambda: test_printer_values(dt)),
        ("extern failure in wrapper.py", lambda: test_extern_failure(a.coil, a.work)),
        ("CUDA wrapper.py on a simulated device", lambda: test_cuda_simulated(a.coil, a.work, [
            ("mlp", os.path.join(ROOT, "examples", "mlp.onnx"), [], [{"batch": 1}, {"batch": 7}],
             random_inputs),
            ("mlp_dynamic", os.path.join(ROOT, "examples", "mlp.onnx"), ["--dynamic", "batch=1:48"],
             [{"batch": 2}, {"batch": 48}], random_inputs),
            ("nonzero", NONZERO, [], [{"N": 1}, {"N": 5}, {"N": 64}], random_inputs),
            ("unique", UNIQUE, [], [{"N": 1}, {"N": 20}], repeated_values),
            ("dtypes", DTYPES, [], [{"N": 1}, {"N": 9}], random_inputs)])),
    ]
    failed = 0
    for name, fn in tests:
        try:
            note = fn()
            print(f"ok    {name}" + (f" ({note})" if note else ""))
        except Exception:  # noqa: BLE001
            failed += 1
            print(f"FAIL  {name}")
            traceback.print_exc()
    print(f"python: {len(tests) - failed} of {len(tests)} tests passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
