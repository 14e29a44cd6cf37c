#!/usr/bin/env python3
"""The EVT corpus through CUTLASS's own Python flow, end to end on the GPU: do the kernels that
CUTLASS's tracer (cutlass_cppgen, pip nvidia-cutlass) accepts compute the right values?

For each corpus program and each of sm80 / sm90, one worker process:
  1. traces the program with the official API, `cutlass_cppgen.epilogue.trace(fn, examples,
     cc=...)` (example tensors from the corpus annotations, as in test/evt/cutlass_compare.py),
  2. builds `cutlass_cppgen.op.Gemm(..., cc=80|90)`, sets `plan.epilogue_visitor` and calls
     `plan.run(A, B, C, D, visitor_args=...)`: CUTLASS emits, compiles (nvcc, for the device:
     sm_90a on the H200, so the CUTLASS 2.x sm80 kernels run natively there) and launches,
  3. compares every returned output with a float64 numpy evaluation of the same program
     (`reference()` below; the GEMM inputs are small multiples of 0.5, so the accumulator is exact
     in bf16/fp16/tf32 and any mismatch comes from the epilogue), error |got-ref| / max(1, |ref|)
     (the metric of coil's own --emit-kernel check), tolerance 1e-2 for bf16/fp16 outputs, 1e-4 for
     fp32 outputs. Reduction outputs start at the reduction's identity (0 for sum, -inf for max),
     other outputs at NaN, so an element the kernel never writes is a mismatch.

Outcome per program and arch (json field "status"):
  correct         traced, compiled, ran, every output within tolerance
  wrong           traced, compiled, ran, some output out of tolerance ("wrong results")
  rejected        the tracer raised (nothing to run)
  nocompile       CUTLASS's own nvcc compilation of its emitted code failed
  error           an exception after compiling (argument packing, launch, shape checks)
  noref           ran, but the program has no reference meaning (coil rejects it: no dim= ...)
  notrun          no example tensors for it (a dtype torch lacks, a malformed program)
  pending         not finished within the time budget (the next call resumes)

  python3 test/evt/cutlass_run.py --out DIR [--jobs 16] [--budget 500] [--only REGEX]
  python3 test/evt/cutlass_run.py --dry ...   # no GPU: trace, build the plan, emit, pack the
                                              # visitor arguments; `--dry nvcc` also compiles with
                                              # nvcc for an explicit cc (sm_90a), stops before loading
  python3 test/evt/cutlass_run.py --selftest  # the reference evaluator and the comparison

Results: DIR/results/<program>.<arch>.json (resumable: finished ones are skipped), DIR/cutlass-run.json,
DIR/cutlass-compare.md (test/evt/cutlass-compare.md with the two results columns added).
"""
import argparse
import ast
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
import traceback
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cutlass_compare import header, opt  # noqa: E402

K = 64
TOL = {"bf16": 1e-2, "f16": 1e-2, "f32": 1e-4}


class NoReference(Exception):
    pass


# ------------------------------------------------------------------------------------------------
# The program: parameters, outputs, dtypes, shapes (the conventions of coil evt and cutlass_compare)
# ------------------------------------------------------------------------------------------------
def describe(src, args):
    """Returns dict: M, N, L, params [(name, kind, shape, dtype)], outputs [(name, shape, dtype,
    reduction or None)], inputs dtype. kind: accum | scalar | tensor. Shapes in torch order."""
    shape = [int(x) for x in opt(args, "--shape", "256,512")[0].split(",")]
    M, N = shape[0], shape[1]
    L = shape[2] if len(shape) == 3 else None
    dflt, per = "bf16", {}
    for d in opt(args, "--dtype", "bf16"):
        for item in d.split(","):
            if "=" in item:
                k, v = item.split("=", 1)
                per[k] = v
            else:
                dflt = item
    inputs = opt(args, "--inputs", "bf16")[0]
    full = (L, M, N) if L else (M, N)
    tree = ast.parse(src)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    params = []
    for a in fn.args.args:
        ann = a.annotation.value if isinstance(a.annotation, ast.Constant) else None
        dt = per.get(a.arg, dflt)
        if isinstance(ann, str) and ":" in ann:
            ann, dt = ann.split(":", 1)
        if a.arg == "accum":
            params.append((a.arg, "accum", full, "f32"))
        elif ann == "scalar":
            params.append((a.arg, "scalar", (), dt))
        elif ann:
            dims = [d.strip() for d in ann.split(",")]
            sizes = {"M": M, "N": N, "L": L or 1}
            mn = [sizes[d] if d in sizes else 1 for d in dims[:2]]
            if L:
                lsz = sizes["L"] if len(dims) > 2 and dims[2] == "L" else 1
                params.append((a.arg, "tensor", (lsz, mn[0], mn[1]), dt))
            else:
                params.append((a.arg, "tensor", tuple(mn), dt))
        else:
            params.append((a.arg, "tensor", full, dt))
    reds = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                isinstance(node.value.func, ast.Name) and node.value.func.id in ("sum", "max"):
            dims = []
            for kw in node.value.keywords:
                if kw.arg == "dim":
                    v = ast.literal_eval(kw.value)
                    dims = list(v) if isinstance(v, (tuple, list)) else [v]
            reds[node.targets[0].id] = (node.value.func.id, [d % 2 if d >= -2 else d for d in dims])
    ret = next((n for n in ast.walk(fn) if isinstance(n, ast.Return)), None)
    names = []
    if ret is not None and ret.value is not None:
        vals = ret.value.elts if isinstance(ret.value, ast.Tuple) else [ret.value]
        names = [v.id for v in vals if isinstance(v, ast.Name)]
    outputs = []
    pnames = {p[0] for p in params}
    for n in names:
        if n in pnames:
            continue
        if n in reds:
            kind, d = reds[n]
            m = 1 if 0 in d else M
            nn = 1 if 1 in d else N
            outputs.append((n, (L, m, nn) if L else (m, nn), per.get(n, "f32"), kind))
        else:
            outputs.append((n, full, per.get(n, dflt), None))
    return dict(M=M, N=N, L=L, params=params, outputs=outputs, inputs=inputs, fn=fn.name)


# ------------------------------------------------------------------------------------------------
# Reference: the program evaluated in float64 numpy (the semantics of coil's EVT IR)
# ------------------------------------------------------------------------------------------------
def round_to(x, dt):
    import numpy as np
    x = np.asarray(x, np.float64)
    if dt == "f32":
        return x.astype(np.float32).astype(np.float64)
    if dt == "f16":
        return x.astype(np.float16).astype(np.float64)
    if dt == "bf16":  # round to nearest even on the upper 16 bits of the float32
        f = np.ascontiguousarray(x.astype(np.float32))
        u = f.view(np.uint32).astype(np.uint64)
        u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
        r = (u & 0xFFFFFFFF).astype(np.uint32).view(np.float32).astype(np.float64)
        return np.where(np.isnan(f), np.nan, r)
    raise NoReference("cast to unknown dtype %r" % dt)


class _Floatify(ast.NodeTransformer):
    """Comparisons produce 0/1 floats (numpy bools would turn + into logical or)."""

    def visit_Compare(self, node):
        self.generic_visit(node)
        return ast.copy_location(ast.Call(ast.Name("_f", ast.Load()), [node], []), node)


def reference(src, inputs):
    """inputs: name -> float64 array or float. Returns (name -> float64 array, in return order)."""
    import numpy as np
    erf = np.vectorize(math.erf, otypes=[np.float64])

    def axes(x, dim, what):
        if dim is None:
            raise NoReference(f"{what}() without dim=")
        ds = list(dim) if isinstance(dim, (tuple, list)) else [dim]
        out = []
        for d in ds:
            if not -2 <= d <= 1:
                raise NoReference(f"{what}(dim={d}) out of the (M, N) range")
            out.append(-2 if d % 2 == 0 else -1)
        if len(set(out)) != len(out):
            raise NoReference(f"{what}() lists a dimension twice")
        return tuple(out)

    def _sum(x, dim=None):
        return np.sum(np.asarray(x, np.float64), axis=axes(x, dim, "sum"), keepdims=True)

    def _max(x, dim=None, *rest):
        if rest or not isinstance(dim, (int, tuple, list)) and dim is not None:
            raise NoReference("max() of two tensors")
        return np.max(np.asarray(x, np.float64), axis=axes(x, dim, "max"), keepdims=True)

    env = {
        "_f": lambda b: np.asarray(b, np.float64),
        "relu": lambda x: np.maximum(x, 0.0),
        "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
        "tanh": np.tanh,
        "gelu": lambda x: 0.5 * x * (1.0 + erf(np.asarray(x, np.float64) / math.sqrt(2.0))),
        "silu": lambda x: x / (1.0 + np.exp(-x)),
        "exp": np.exp,
        "log": np.log,
        "abs": np.abs,
        "sqrt": np.sqrt,
        "maximum": np.maximum,
        "minimum": np.minimum,
        "clamp": lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi),
        "where": lambda c, a, b: np.where(np.asarray(c) != 0, a, b),
        "cast": lambda x, dt: round_to(x, dt),
        "sum": _sum,
        "max": _max,
        "multiply_add": lambda x, y, z: x * y + z,
    }
    tree = ast.parse(src)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    for n in ast.walk(fn):
        if isinstance(n, (ast.If, ast.For, ast.While, ast.AugAssign)):
            raise NoReference("statement outside the epilogue subset")
    tree = ast.fix_missing_locations(_Floatify().visit(tree))
    with np.errstate(all="ignore"):
        exec(compile(tree, "<epilogue>", "exec"), env)
        res = env[fn.name](**inputs)
    return res if isinstance(res, tuple) else (res,)


def compare(got, ref, dt):
    """Max of |got-ref| / max(1, |ref|); NaN/inf match only NaN/inf of the same kind."""
    import numpy as np
    got = np.asarray(got, np.float64)
    ref = np.broadcast_to(np.asarray(ref, np.float64), got.shape) if np.size(ref) != got.size \
        else np.asarray(ref, np.float64).reshape(got.shape)
    same_special = (np.isnan(got) & np.isnan(ref)) | (np.isinf(ref) & (got == ref))
    with np.errstate(all="ignore"):
        err = np.abs(got - ref) / np.maximum(1.0, np.abs(ref))
    err = np.where(same_special, 0.0, np.where(np.isnan(err), np.inf, err))
    e = float(err.max()) if err.size else 0.0
    idx = np.unravel_index(int(err.argmax()), err.shape) if err.size else ()
    where = {"index": [int(i) for i in idx], "got": float(got[idx]), "ref": float(ref[idx])} \
        if err.size else {}
    return e, e <= TOL.get(dt, 1e-2), where


# ------------------------------------------------------------------------------------------------
# One program on one arch (worker process)
# ------------------------------------------------------------------------------------------------
def shim_cuda_python():
    """cutlass_cppgen 4.2 imports cuda.cuda / cuda.cudart / cuda.nvrtc and reads cuda.__version__;
    cuda-python 13 keeps them under cuda.bindings only."""
    import importlib
    import cuda
    for old, new in (("cuda.cuda", "cuda.bindings.driver"), ("cuda.cudart", "cuda.bindings.runtime"),
                     ("cuda.nvrtc", "cuda.bindings.nvrtc")):
        try:
            importlib.import_module(old)
        except ImportError:
            mod = importlib.import_module(new)
            sys.modules[old] = mod
            setattr(cuda, old.split(".")[1], mod)
    if getattr(cuda, "__version__", None) is None:
        import cuda.bindings
        cuda.__version__ = cuda.bindings.__version__


class DryCompiled(Exception):
    pass


class _SkipPlan(Exception):
    pass


def dry_patches(cc, nvcc):
    """No GPU: compile for an explicit device cc and stop where the cubin would be loaded."""
    import importlib
    import cutlass_cppgen
    # by module name: cutlass_cppgen.backend.compiler is also the name of an ArtifactManager instance
    comp = importlib.import_module("cutlass_cppgen.backend.compiler")
    comp = sys.modules["cutlass_cppgen.backend.compiler"]
    op = sys.modules[importlib.import_module("cutlass_cppgen.backend.operation").__name__]
    dev = sys.modules["cutlass_cppgen.backend.utils.device"]
    fixed = lambda device=-1: cc
    for m in (cutlass_cppgen, comp, op, dev):
        if hasattr(m, "device_cc"):
            m.device_cc = fixed
    cutlass_cppgen.initialize_cuda_context = cutlass_cppgen.check_cuda_versions
    cutlass_cppgen._device_id = 0

    class NoLoad:
        def __getattr__(self, name):
            if name == "cuModuleLoadData":
                def stop(*a):
                    raise DryCompiled()
                return stop
            import cuda.bindings.driver as d
            return getattr(d, name)
    comp.cuda = NoLoad()
    if not nvcc:  # stop at CUTLASS's nvcc call: its whole source was emitted by then
        def no_nvcc(cmd, source, error_file):
            raise DryCompiled()
        comp.compile_with_nvcc = no_nvcc
    os.environ.setdefault("LIBRARY_PATH", "/usr/local/cuda/lib64/stubs")


def run_one(prog_path, arch, dry):
    import numpy as np
    src = open(prog_path).read()
    _, args = header(src)
    cc = 90 if arch == "sm90" else 80
    res = {"program": os.path.basename(prog_path)[:-3], "arch": arch}
    try:
        desc = describe(src, args)
    except Exception as e:
        res.update(status="notrun", detail="no example tensors: %s" % str(e).splitlines()[0][:80])
        return res
    shim_cuda_python()
    if dry:
        dry_patches(90, dry == "nvcc")
    import cutlass_cppgen
    from cutlass_cppgen import Tensor as FakeTensor
    cutlass_cppgen.check_cuda_versions()  # sets the nvcc version the kernel generators read
    try:
        import torch
        have_torch = True
    except ImportError:
        have_torch = False
    if not dry and not have_torch:
        res.update(status="error", detail="torch is needed on the GPU machine")
        return res

    rng = np.random.default_rng(zlib.crc32((res["program"] + arch).encode()))
    tdt = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}

    def dev(x64, dt):  # float64 numpy -> device tensor of dtype dt (or numpy in dry mode)
        if have_torch and not dry:
            return torch.tensor(x64, dtype=torch.float64).to(getattr(torch, tdt[dt])).cuda().contiguous()
        return x64.astype(np.float32 if dt == "f32" else np.float16)

    M, N, L = desc["M"], desc["N"], desc["L"]
    lead = (L,) if L else ()
    # GEMM inputs: multiples of 0.5 in [-1, 1]: exact in every input type, exact accumulator.
    A64 = rng.integers(-2, 3, size=lead + (M, K)).astype(np.float64) * 0.5
    B64 = rng.integers(-2, 3, size=lead + (K, N)).astype(np.float64) * 0.5
    accum64 = A64 @ B64
    in_dt = desc["inputs"] if desc["inputs"] in tdt else "bf16"
    A, B = dev(A64, in_dt), dev(B64, in_dt)

    examples, visitor, ref_in = {}, {}, {}
    c_dt = None
    for name, kind, shape, dt in desc["params"]:
        if kind == "accum":
            el = torch.float32 if have_torch else np.float32
            examples[name] = FakeTensor(element=el, shape=shape, layout_tag=cutlass_cppgen.LayoutType.RowMajor)
            ref_in[name] = accum64
        elif kind == "scalar":
            v = float(rng.integers(1, 8)) * 0.25
            examples[name] = visitor[name] = v
            ref_in[name] = v
        else:
            if dt not in tdt:
                res.update(status="notrun", detail=f"parameter {name}: dtype {dt!r} has no torch type")
                return res
            x64 = round_to(rng.uniform(-1.0, 1.0, size=shape), dt)
            t = dev(x64, dt)
            examples[name] = visitor[name] = t
            ref_in[name] = x64
            if name == "C":
                c_dt = dt
    out_dt = {}
    for name, shape, dt, red in desc["outputs"]:
        if dt not in tdt:
            res.update(status="notrun", detail=f"output {name}: dtype {dt!r} has no torch type")
            return res
        init = 0.0 if red == "sum" else (-np.inf if red == "max" else np.nan)
        t = dev(np.full(shape, init), dt)
        examples[name] = visitor[name] = t
        out_dt[name] = dt
    d_dt = out_dt.get("D", "bf16")
    if "C" in visitor:
        C = visitor["C"]
    else:
        C = dev(round_to(rng.uniform(-1.0, 1.0, size=lead + (M, N)), d_dt), d_dt)
        c_dt = d_dt
    D = visitor.get("D")
    if D is None or tuple(D.shape) != lead + (M, N):
        D = dev(np.full(lead + (M, N), np.nan), d_dt)

    # 1. trace (the official entry point, from the program's source text)
    try:
        # The callable form (its string form misses an import of textwrap in 4.2): the function is
        # defined from the corpus file itself, so inspect.getsource finds its text.
        ns = {}
        exec(compile(src, prog_path, "exec"), ns)
        fn = cutlass_cppgen.epilogue.trace(ns[desc["fn"]], examples, cc=cc)
    except BaseException as e:  # noqa: the tracer raises anything from SyntaxError to KeyError
        msg = (str(e).strip().splitlines() or [type(e).__name__])[0]
        res.update(status="rejected", detail=(type(e).__name__ + ": " + msg)[:160])
        return res
    if dry and dry.startswith("mock"):
        # Harness check without a GPU: the "kernel" writes the reference, rounded to each output's
        # type (fp16 stands in for bf16 in numpy), into the output tensors; "mock-bad" also scales
        # reductions by 32 (the sm80 scalar-sum fault). The comparison below must say correct /
        # wrong for them.
        try:
            refs = reference(src, ref_in)
        except NoReference as e:
            res.update(status="noref", detail=str(e))
            return res
        order = re.findall(r"\w+", ast.unparse(next(
            n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Return)).value))
        for name, shape, dt, red in desc["outputs"]:
            t = D if name == "D" else visitor[name]
            r = np.broadcast_to(np.asarray(refs[order.index(name)], np.float64), t.shape)
            t[...] = r * (32 if red and dry == "mock-bad" else 1)
    # 2. plan, emit, compile, run
    lib = {"bf16": cutlass_cppgen.DataType.bf16, "f16": cutlass_cppgen.DataType.f16,
           "f32": cutlass_cppgen.DataType.f32}
    t0 = time.time()
    try:
        if dry and dry.startswith("mock"):
            raise _SkipPlan()
        plan = cutlass_cppgen.op.Gemm(element_A=lib[in_dt], element_B=lib[in_dt], element_C=lib[c_dt],
                                      element_D=lib[d_dt], layout=cutlass_cppgen.LayoutType.RowMajor,
                                      element_accumulator=cutlass_cppgen.DataType.f32, cc=cc)
        plan.epilogue_visitor = fn
    except _SkipPlan:
        pass
    except BaseException as e:
        res.update(status="error", stage="plan", detail=(type(e).__name__ + ": " + str(e).strip().splitlines()[0]
                                                         if str(e).strip() else type(e).__name__)[:200],
                   trace=traceback.format_exc()[-1500:])
        return res
    try:
        if dry and dry.startswith("mock"):
            pass
        elif dry:
            # numpy tensors only serve the plan's type checks; compile is all that runs here
            plan.compile(alignment_A=8 if in_dt != "f32" else 4, alignment_B=8 if in_dt != "f32" else 4,
                         alignment_C=8 if c_dt != "f32" else 4)
        else:
            plan.run(A, B, C, D, visitor_args=visitor)
            torch.cuda.synchronize()
    except DryCompiled:
        res.update(status="compiled-dry" if dry == "nvcc" else "emitted-dry", compile_s=round(time.time() - t0, 1))
        try:  # the visitor arguments as plan.run packs them (host pointers stand in for device ones)
            plan.operation.epilogue_type(visitor)
            res["args"] = "packed"
        except BaseException as e:
            if "cudaMalloc" in str(e):  # sm90 arguments allocate device memory: GPU only
                res["args"] = "needs a GPU"
                return res
            res.update(status="error", stage="args", detail="%s: %s" % (type(e).__name__, e),
                       trace=traceback.format_exc()[-1500:])
        return res
    except BaseException as e:
        text = str(e)
        first = (text.strip().splitlines() or [type(e).__name__])[0]
        if "Invalid Kernel" in text or "cutlass_python_compilation" in text:
            err = ""
            for f in ("cutlass_python_compilation_device_error.txt", "cutlass_python_compilation_host_error.txt"):
                if os.path.exists(f):
                    m = re.findall(r"error[^\n]*", open(f).read().split("Error Message:")[-1])
                    err = err or (m[0] if m else "")
            res.update(status="nocompile", compile_s=round(time.time() - t0, 1), detail=err[:240] or first[:240])
        else:
            res.update(status="error", stage="run", detail=(type(e).__name__ + ": " + first)[:240],
                       trace=traceback.format_exc()[-1500:])
        return res
    res["compile_run_s"] = round(time.time() - t0, 1)
    # 3. compare
    try:
        refs = reference(src, ref_in)
    except NoReference as e:
        res.update(status="noref", detail=str(e))
        return res
    except Exception as e:
        res.update(status="noref", detail="reference failed: %s: %s" % (type(e).__name__, e))
        return res
    names = [o[0] for o in desc["outputs"]]
    order = [n for n in re.findall(r"\w+", ast.unparse(next(
        n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Return)).value))]
    errs, ok = {}, True
    for name in names:
        r = refs[order.index(name)]
        t = D if name == "D" else visitor[name]
        got = t.double().cpu().numpy() if hasattr(t, "cpu") else np.asarray(t, np.float64)
        e, good, where = compare(got, r, out_dt[name])
        errs[name] = {"err": e, "ok": good, "tol": TOL[out_dt[name]], "worst": where}
        ok = ok and good
    res.update(status="correct" if ok else "wrong", outputs=errs)
    return res


# ------------------------------------------------------------------------------------------------
# Driver: parallel, resumable, time-bounded; the table
# ------------------------------------------------------------------------------------------------
def cell(r):
    if r is None:
        return "pending"
    st = r["status"]
    if st == "correct":
        return "correct (max err %s)" % ", ".join("%s %.2g" % (k, v["err"]) for k, v in r["outputs"].items())
    if st == "wrong":
        bad = ["%s %.3g > %.0e" % (k, v["err"], v["tol"]) for k, v in r["outputs"].items() if not v["ok"]]
        good = ["%s ok" % k for k, v in r["outputs"].items() if v["ok"]]
        return "WRONG RESULTS: " + ", ".join(bad + good)
    if st == "rejected":
        return "rejected (not run)"
    if st == "nocompile":
        return "does not compile: " + r.get("detail", "")[:70].replace("|", "/")
    if st == "noref":
        return "ran; no reference (%s)" % r.get("detail", "")[:50]
    if st == "notrun":
        return "not run: %s" % r.get("detail", "")[:60]
    if st == "error":
        return "run error: " + r.get("detail", "")[:70].replace("|", "/")
    return st


def table(out_dir, results):
    """test/evt/cutlass-compare.md (the tracer table) with a results column after each CUTLASS
    column; a table that already has results columns is rebuilt from its tracer columns."""
    base = os.path.join(HERE, "cutlass-compare.md")
    keep = ["program", "coil sm80", "cutlass sm80", "coil sm90", "cutlass sm90"]
    md, idx = [], None
    for line in open(base).read().splitlines():
        if not line.startswith("|"):
            if not re.match(r"cutlass sm\d0 results:", line):
                md.append(line)
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "program":
            idx = [cells.index(k) for k in keep]
            md.append("| " + " | ".join(keep[:3] + ["cutlass sm80 results"] + keep[3:] +
                                       ["cutlass sm90 results"]) + " |")
        elif set(line.replace("|", "").strip()) <= {"-"}:
            md.append("|" + "---|" * 7)
        else:
            c = [cells[i] for i in idx]
            r80, r90 = results.get((c[0], "sm80")), results.get((c[0], "sm90"))
            md.append("| " + " | ".join(c[:3] + [cell(r80)] + c[3:] + [cell(r90)]) + " |")
    while md and not md[-1].strip():
        md.pop()
    md.append("")
    for arch in ("sm80", "sm90"):
        counts = {}
        for (p, a), r in results.items():
            if a == arch:
                counts[r["status"]] = counts.get(r["status"], 0) + 1
        md.append(f"cutlass {arch} results: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return "\n".join(md) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=os.path.join(HERE, "corpus"))
    ap.add_argument("--out", default="build-evt/cutlass-run")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--budget", type=float, default=500, help="seconds; unfinished work resumes next call")
    ap.add_argument("--only", default="", help="regex over '<program>.<arch>'")
    ap.add_argument("--archs", default="sm80,sm90")
    ap.add_argument("--dry", nargs="?", const="emit", choices=["emit", "nvcc", "mock", "mock-bad"],
                    help="no GPU: trace, emit and pack the arguments; --dry nvcc also compiles (sm_90a); "
                    "--dry mock / mock-bad: trace, then the reference (mock-bad: reductions x32) stands in "
                    "for the kernel, to check the comparison glue")
    ap.add_argument("--table-only", action="store_true")
    ap.add_argument("--one", nargs=3, metavar=("PROGRAM", "ARCH", "RESULT"), help=argparse.SUPPRESS)
    ap.add_argument("--selftest", action="store_true")
    a = ap.parse_args()

    if a.one:
        prog, arch, result = a.one
        try:
            r = run_one(os.path.abspath(prog), arch, a.dry)
            r["mode"] = a.dry or "gpu"
        except BaseException as e:  # the harness itself: report, never hide
            r = {"program": os.path.basename(prog)[:-3], "arch": arch, "status": "error", "stage": "harness",
                 "mode": a.dry or "gpu",
                 "detail": "%s: %s" % (type(e).__name__, e), "trace": traceback.format_exc()[-1500:]}
        with open(result + ".tmp", "w") as fh:
            json.dump(r, fh, indent=1)
        os.replace(result + ".tmp", result)
        return 0
    if a.selftest:
        return selftest(a.corpus)

    out = os.path.abspath(a.out)
    rdir = os.path.join(out, "results")
    os.makedirs(rdir, exist_ok=True)
    progs = sorted(p for p in os.listdir(a.corpus) if p.endswith(".py"))
    mode = a.dry or "gpu"

    def done(path):  # a result of this mode (a dry or mock result never stands for a GPU one)
        try:
            return json.load(open(path)).get("mode") == mode
        except (OSError, ValueError):
            return False
    tasks = []
    for arch in a.archs.split(","):
        for p in progs:
            key = f"{p[:-3]}.{arch}"
            if a.only and not re.search(a.only, key):
                continue
            if not done(os.path.join(rdir, key + ".json")):
                tasks.append((p, arch, key))
    # Reductions first (the known suspect: sm80 scalar sums), then accepted programs before the
    # e* ones coil rejects; within each, sm90 first (longest compile)
    def priority(t):
        text = open(os.path.join(a.corpus, t[0])).read()
        return (not re.search(r"\b(sum|max)\(", text), t[0].startswith("e"), t[1] != "sm90", t[0])
    tasks.sort(key=priority)
    t_start = time.time()
    running = {}

    def stop(signum, frame):  # workers run in their own sessions: take them down with us
        for pr, _, _ in running.values():
            if pr.poll() is None:
                os.killpg(pr.pid, signal.SIGKILL)
        sys.exit(128 + signum)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if not a.table_only:
        print(f"cutlass-run: {len(tasks)} programs to run with {a.jobs} jobs (budget {a.budget:.0f} s)", flush=True)
        while tasks or running:
            while tasks and len(running) < a.jobs and time.time() - t_start < a.budget:
                p, arch, key = tasks.pop(0)
                wd = os.path.join(out, "work", key)
                os.makedirs(wd, exist_ok=True)
                cmd = [sys.executable, os.path.abspath(__file__), "--one", os.path.join(os.path.abspath(a.corpus), p),
                       arch, os.path.join(rdir, key + ".json")] + (["--dry", a.dry] if a.dry else [])
                log = open(os.path.join(wd, "log.txt"), "w")
                running[key] = (subprocess.Popen(cmd, cwd=wd, stdout=log, stderr=subprocess.STDOUT,
                                                 start_new_session=True), time.time(), log)
            if time.time() - t_start >= a.budget:
                tasks = []
                for key, (pr, t0, log) in list(running.items()):
                    if pr.poll() is None:
                        os.killpg(pr.pid, signal.SIGKILL)
                        pr.wait()
                        print(f"cutlass-run: {key}: stopped at the budget (resumes next call)", flush=True)
                    log.close()
                running = {}
                break
            time.sleep(0.5)
            for key, (pr, t0, log) in list(running.items()):
                if pr.poll() is not None:
                    log.close()
                    del running[key]
                    rf = os.path.join(rdir, key + ".json")
                    st = json.load(open(rf))["status"] if os.path.exists(rf) else "no result (rc %d)" % pr.returncode
                    print(f"cutlass-run: {key}: {st} ({time.time() - t0:.0f} s)", flush=True)
    results = {}
    for f in sorted(os.listdir(rdir)):
        if f.endswith(".json"):
            r = json.load(open(os.path.join(rdir, f)))
            if r.get("mode") == mode:
                results[(r["program"], r["arch"])] = r
    left = sum(1 for p in progs for arch in a.archs.split(",")
               if (p[:-3], arch) not in results and (not a.only or re.search(a.only, f"{p[:-3]}.{arch}")))
    with open(os.path.join(out, "cutlass-run.json"), "w") as fh:
        json.dump([results[k] for k in sorted(results)], fh, indent=1)
    md = table(out, results)
    with open(os.path.join(out, "cutlass-compare.md"), "w") as fh:
        fh.write(md)
    print(md.rsplit("\n\n", 1)[-1], end="")
    for (p, arch), r in sorted(results.items()):
        if r["status"] in ("wrong", "error"):
            print(f"cutlass-run: {p} {arch}: {cell(r)}")
    print(f"cutlass-run: {len(results)} results in {out}; {left} left for the next call")
    return 0


def selftest(corpus):
    """The evaluator and the comparison on known values; fails loudly."""
    import numpy as np
    rng = np.random.default_rng(1)
    acc = rng.integers(-8, 9, size=(4, 6)).astype(np.float64) * 0.25
    C = rng.uniform(-1, 1, size=(4, 6))
    bias = rng.uniform(-1, 1, size=(1, 6))
    src = "def epi(accum, C, bias):\n    x = accum + C\n    D = relu(x * 2) + bias\n" \
          "    r = sum(x, dim=0)\n    c = max(x, dim=-1)\n    s = sum(x, dim=(0, 1))\n" \
          "    g = (accum >= C) + (accum != 0) + where(accum > 0, -accum, accum ** 2)\n" \
          "    return D, r, c, s, g\n"
    D, r, c, s, g = reference(src, {"accum": acc, "C": C, "bias": bias})
    x = acc + C
    assert np.allclose(D, np.maximum(2 * x, 0) + bias)
    assert r.shape == (1, 6) and np.allclose(r, x.sum(0))
    assert c.shape == (4, 1) and np.allclose(c[:, 0], x.max(1))
    assert s.shape == (1, 1) and np.isclose(s[0, 0], x.sum())
    ge = (acc >= C).astype(float) + (acc != 0).astype(float)
    assert np.allclose(g, ge + np.where(acc > 0, -acc, acc ** 2)), "comparisons must add as 0/1 floats"
    # gelu is the erf form; bf16 rounding is round-to-nearest-even
    (gl,) = reference("def e(accum):\n    D = gelu(accum)\n    return D\n", {"accum": np.array([1.0, -0.5])})
    assert np.allclose(gl, [0.8413447460685429, -0.15426876936299347])
    assert round_to(np.array([1.00390625, 1.01171875, 3.0]), "bf16").tolist() == [1.0, 1.015625, 3.0]
    # comparison: a bf16-rounded result passes at 1e-2, a 32x reduction fails, NaN where a value
    # was expected fails, NaN where NaN is expected passes
    e, ok, _ = compare(round_to(D, "bf16"), D, "bf16")
    assert ok and 0 < e < 1e-2, e
    e, ok, _ = compare(s * 32, s, "f32")
    assert not ok and e > 30, e
    bad = D.copy()
    bad[1, 2] = np.nan
    assert not compare(bad, D, "bf16")[1]
    assert compare(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]), "f32")[1]
    assert not compare(round_to(D, "bf16"), D, "f32")[1] or np.all(round_to(D, "bf16") == D)
    try:
        reference("def e(accum):\n    r = sum(accum)\n    D = accum\n    return D, r\n", {"accum": acc})
        raise AssertionError("sum() without dim= must have no reference")
    except NoReference:
        pass
    # every accepted corpus program has a reference of the declared output shapes
    n = 0
    for p in sorted(os.listdir(corpus)):
        if not p.startswith("a") or not p.endswith(".py"):
            continue
        src = open(os.path.join(corpus, p)).read()
        _, args = header(src)
        d = describe(src, args)
        ins = {}
        for name, kind, shape, dt in d["params"]:
            ins[name] = 1.25 if kind == "scalar" else rng.uniform(-1, 1, size=shape)
        refs = reference(src, ins)
        assert len(refs) >= len(d["outputs"]), p
        n += 1
    print(f"cutlass_run selftest: ok ({n} corpus references evaluated)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
