#!/usr/bin/env python3
"""Side-by-side table: the EVT corpus through CUTLASS's own Python tracer (cutlass_cppgen, from the
pip package nvidia-cutlass) and through `coil evt`, for sm80 and sm90.

CUTLASS column values:
  accepted              traced and emitted, and no fault found in the emitted declarations
  rejected: MSG         the tracer raised (first line of its message)
  BROKEN: WHY           emitted code with a fault found statically: a type alias used but never
                        defined (the EVTD bug), an alias defined twice (name collision), a returned
                        output unreachable from the callback root (silently dropped), a binary op
                        with one child (an edge lost in DAG-to-tree packing)
Nothing is compiled or run here; scripts/evt-gpu-check.sh does that for coil's code.

Example tensors come from the corpus annotations ("1,N", "M,1", "scalar", ...), as torch order
(L, M, N). numpy has no bfloat16, so bf16 programs trace with float16 examples (types only).
"""
import argparse
import ast
import os
import re
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def header(src):
    expect, args = {}, []
    for line in src.splitlines():
        if not line.startswith("#"):
            break
        m = re.match(r"#\s*expect(?:\s+(sm80|sm90))?:\s*(.*)$", line)
        if m:
            expect[m.group(1) or "*"] = m.group(2).strip()
        m = re.match(r"#\s*args:\s*(.*)$", line)
        if m:
            args += shlex.split(m.group(1))
    return expect, args


def opt(args, name, default):
    vals = [args[i + 1] for i in range(len(args) - 1) if args[i] == name]
    return vals if vals else [default]


def examples(src, args, np):
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
    npt = lambda dt: np.float32 if dt == "f32" else np.float16

    def full(dt):
        return np.zeros((L, M, N) if L else (M, N), npt(dt))

    ex = {}
    tree = ast.parse(src)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    for a in fn.args.args:
        ann = a.annotation.value if isinstance(a.annotation, ast.Constant) else None
        dt = per.get(a.arg, dflt)
        if ann and ":" in ann:
            ann, dt = ann.split(":", 1)
        if a.arg == "accum":
            ex["accum"] = full("f32")
        elif ann == "scalar":
            ex[a.arg] = 1.5
        elif ann:
            dims = [d.strip() for d in ann.split(",")]
            sizes = {"M": M, "N": N, "L": L or 1}
            mn = [sizes[d] if d in sizes else 1 for d in dims[:2]]
            if L:
                lsz = sizes["L"] if len(dims) > 2 and dims[2] == "L" else 1
                ex[a.arg] = np.zeros((lsz, mn[0], mn[1]), npt(dt))
            else:
                ex[a.arg] = np.zeros(tuple(mn), npt(dt))
        else:
            ex[a.arg] = full(dt)
    # Outputs: reductions get the reduced shape (CUTLASS infers the reduction from it).
    reds = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                isinstance(node.value.func, ast.Name) and node.value.func.id in ("sum", "max"):
            dims = []
            for kw in node.value.keywords:
                if kw.arg == "dim":
                    v = ast.literal_eval(kw.value)
                    dims = list(v) if isinstance(v, (tuple, list)) else [v]
            reds[node.targets[0].id] = [d % 2 if d >= -2 else d for d in dims]
    ret = next((n for n in ast.walk(fn) if isinstance(n, ast.Return)), None)
    names = []
    if ret is not None:
        vals = ret.value.elts if isinstance(ret.value, ast.Tuple) else [ret.value]
        names = [v.id for v in vals if isinstance(v, ast.Name)]
    for n in names:
        if n in ex and n != "accum":
            continue
        if n in reds:
            d = reds[n]
            m = 1 if 0 in d else M
            nn = 1 if 1 in d else N
            ex[n] = np.zeros((L, m, nn) if L else (m, nn), np.float32)
        else:
            ex[n] = full(per.get(n, dflt))
    return ex, names


def static_faults(decl, callback, outputs, cc):
    defs = {}
    dup = []
    for m in re.finditer(r"using\s+(\w+)\s*=\s*(.*?);", decl, re.S):
        name, body = m.group(1), m.group(2)
        if name in defs:
            dup.append(name)
        defs[name] = body
    faults = []
    if dup:
        faults.append("alias defined twice: " + ", ".join(sorted(set(dup))))
    fixed = {"ElementC", "ElementD", "StrideC", "StrideD", "EpilogueDescriptor", "OutputTileThreadMap"}
    undefined = set()
    for name, body in defs.items():
        if "EVT<" in body or "TopologicalVisitor<" in body:
            inner = body[body.index("<") + 1:]
            for tok in re.findall(r"(?<![:\w])([A-Z]\w*)(?![\w:<])", inner):
                if tok not in defs and tok not in fixed and not re.match(r"^(Stride|Shape|Int)$", tok):
                    undefined.add(tok)
    if callback not in defs:
        undefined.add(callback)
    if undefined:
        faults.append("alias used but never defined: " + ", ".join(sorted(undefined)))
    # Reachability of every returned output from the callback.
    seen, stack = set(), [callback]
    while stack:
        n = stack.pop()
        if n in seen or n not in defs:
            continue
        seen.add(n)
        stack += re.findall(r"\b([A-Z]\w*)\b", defs[n])
    camel = lambda s: re.sub(r"(_|-)+", " ", s).title().replace(" ", "")
    dropped = [o for o in outputs if not (cc >= 90 and o == "D") and camel(o) not in seen]
    if dropped:
        faults.append("output(s) unreachable from the callback, dropped: " + ", ".join(dropped))
    # Binary ops with a single child.
    for name, body in defs.items():
        m = re.match(r"cutlass::epilogue::\w+::Sm\d+EVT<\s*(\w+)\s*,(.*)>$", body.strip(), re.S)
        if m and m.group(1) in defs:
            kids = [k for k in m.group(2).split(",") if k.strip()]
            node = defs[m.group(1)]
            if re.search(r"(Sm90Compute|VisitorCompute)<\s*cutlass::(plus|minus|multiplies|divides|maximum|minimum)\b", node) \
                    and len(kids) == 1:
                faults.append(f"binary op {m.group(1)} with one child in {name}")
    return faults


CU_HEAD = """// CUTLASS's Python tracer (cutlass_cppgen) output for {prog}, wrapped in a GEMM by
// test/evt/cutlass_compare.py so that nvcc instantiates it. Compile only (-c); nothing runs.
#include <cutlass/cutlass.h>
#include <cutlass/numeric_types.h>
#include <cutlass/functional.h>
#include <cute/tensor.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
"""

CU_SM90 = """#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
using namespace cute;
{decl}
using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cute::Shape<cute::_128, cute::_128, cute::_64>,
    cute::Shape<cute::_1, cute::_1, cute::_1>, cutlass::epilogue::collective::EpilogueTileAuto, float, float,
    ElementC, cutlass::layout::RowMajor, 8, ElementD, cutlass::layout::RowMajor, 8,
    cutlass::epilogue::TmaWarpSpecializedCooperative, {name}>::CollectiveOp;
using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cutlass::half_t, cutlass::layout::RowMajor, 8,
    cutlass::half_t, cutlass::layout::ColumnMajor, 8, float, cute::Shape<cute::_128, cute::_128, cute::_64>,
    cute::Shape<cute::_1, cute::_1, cute::_1>,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
    cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;
using GemmKernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
void coil_instantiate() {{ Gemm g; typename Gemm::Arguments a{{}}; g.initialize(a, nullptr); g.run(); }}
"""

CU_SM80 = """#include <cutlass/epilogue/threadblock/fusion/visitors.hpp>
#include <cutlass/gemm/kernel/default_gemm_universal_with_visitor.h>
using namespace cute;
using OutputTileThreadMap = cutlass::epilogue::threadblock::OutputTileThreadLayout<
    cutlass::gemm::GemmShape<128, 128, 32>, cutlass::gemm::GemmShape<64, 64, 32>, cutlass::half_t, 8, 1>;
{decl}
using GemmKernel = typename cutlass::gemm::kernel::DefaultGemmWithVisitor<
    cutlass::half_t, cutlass::layout::RowMajor, cutlass::ComplexTransform::kNone, 8,
    cutlass::half_t, cutlass::layout::ColumnMajor, cutlass::ComplexTransform::kNone, 8,
    cutlass::half_t, cutlass::layout::RowMajor, 8, float, float, cutlass::arch::OpClassTensorOp,
    cutlass::arch::Sm80, cutlass::gemm::GemmShape<128, 128, 32>, cutlass::gemm::GemmShape<64, 64, 32>,
    cutlass::gemm::GemmShape<16, 8, 16>, {name}, cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>,
    3, cutlass::arch::OpMultiplyAdd, 1>::GemmKernel;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
void coil_instantiate() {{ Gemm g; typename Gemm::Arguments a{{}}; g.initialize(a, nullptr); g.run(); }}
"""


def trace_cutlass(src, args, cc, cu_path=None, prog=""):
    import numpy as np
    from cutlass_cppgen.backend.evt.frontend.python_ast import PythonASTFrontend
    from cutlass_cppgen.backend.evt.backend.emitter_base import FusionCallbacks

    body = "\n".join(l for l in src.splitlines() if not l.startswith("#"))

    class Frontend(PythonASTFrontend):
        def parse(self, example_inputs):
            self.example_inputs = example_inputs
            self.source = body
            self.ast = ast.parse(body)
            self.visit(self.ast)

    try:
        ex, outputs = examples(src, args, np)
    except Exception as e:  # the program is not even Python coil's examples can describe
        return "rejected: (no example tensors: %s)" % str(e).splitlines()[0][:60]
    try:
        f = Frontend(cc)
        f.trace(ex)
        decl, name = FusionCallbacks(f.dag_ir, cc, emit_CD=(cc < 90)).emit()
        if cu_path:
            if cc >= 90:
                from cutlass_cppgen.backend.evt.backend.sm90_emitter import CollectiveEpilogue
                from cutlass_library import DataType, EpilogueScheduleType

                class Tile:
                    threadblock_shape = (128, 128, 64)

                el = DataType.f32 if isinstance(ex.get("D"), np.ndarray) and ex["D"].dtype == np.float32 else DataType.f16
                name, decl = CollectiveEpilogue(Tile(), EpilogueScheduleType.TmaWarpSpecializedCooperative,
                                                el, el, FusionCallbacks(f.dag_ir, cc, emit_CD=False)).emit()
                text = CU_HEAD.format(prog=prog) + CU_SM90.format(decl=decl, name=name)
            else:
                text = CU_HEAD.format(prog=prog) + CU_SM80.format(decl=decl, name=name)
            with open(cu_path, "w") as fh:
                fh.write(text)
    except BaseException as e:  # noqa: the tracer raises anything from SyntaxError to KeyError
        msg = (str(e).strip().splitlines() or [type(e).__name__])[0]
        return "rejected: " + (type(e).__name__ + ": " + msg)[:90]
    faults = static_faults(decl, name, outputs, cc)
    return "BROKEN: " + "; ".join(faults) if faults else "accepted"


def coil_outcome(coil, path, args, arch):
    a = list(args)
    if "--shape" not in a:
        a = ["--shape", "256,512"] + a
    r = subprocess.run([coil, "evt", path, "--arch", arch, "-o", os.devnull] + a,
                       capture_output=True, text=True)
    if r.returncode == 0:
        rewritten = "sm90-d-root" in r.stderr or "joined into the root" in r.stderr
        return "accepted" + (" (rewritten)" if rewritten else "")
    first = r.stderr.strip().splitlines()[0] if r.stderr.strip() else "rc=%d" % r.returncode
    m = re.search(r"\(rule [\w-]+\)", first)
    return "rejected: " + (m.group(0) if m else first.split(": ", 2)[-1][:60])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coil", required=True)
    ap.add_argument("--corpus", default=os.path.join(HERE, "corpus"))
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--emit-cu", default="", help="also write each traced program, wrapped in a "
                    "GEMM, as DIR/<program>-cutlass.<arch>.cu (compiled by scripts/evt-gpu-check.sh)")
    a = ap.parse_args()
    # cutlass_cppgen writes compiled_cache.db into the working directory: keep it out of the tree.
    a.coil, a.corpus = os.path.abspath(a.coil), os.path.abspath(a.corpus)
    if a.emit_cu:
        a.emit_cu = os.path.abspath(a.emit_cu)
    import tempfile
    os.chdir(tempfile.mkdtemp(prefix="coil-evt-cutlass-"))
    rows = []
    for prog in sorted(p for p in os.listdir(a.corpus) if p.endswith(".py")):
        path = os.path.join(a.corpus, prog)
        src = open(path).read()
        _, args = header(src)
        cells = [prog[:-3]]
        for arch, cc in (("sm80", 80), ("sm90", 90)):
            cells.append(coil_outcome(a.coil, path, args, arch))
            cu = os.path.join(a.emit_cu, f"{prog[:-3]}-cutlass.{arch}.cu") if a.emit_cu else None
            cells.append(trace_cutlass(src, args, cc, cu, prog))
        rows.append(cells)
    heads = ["program", "coil sm80", "cutlass sm80", "coil sm90", "cutlass sm90"]
    if a.markdown:
        print("| " + " | ".join(heads) + " |")
        print("|" + "---|" * len(heads))
        for r in rows:
            print("| " + " | ".join(c.replace("|", "/") for c in r) + " |")
    else:
        for r in rows:
            print(" ; ".join(r))
    summary = {}
    for r in rows:
        for i, h in enumerate(heads[1:], 1):
            k = r[i].split(":")[0].split(" (")[0]
            summary.setdefault(h, {}).setdefault(k, 0)
            summary[h][k] += 1
    print()
    for h, d in summary.items():
        print(f"{h}: " + ", ".join(f"{k} {v}" for k, v in sorted(d.items())))


if __name__ == "__main__":
    sys.exit(main())
