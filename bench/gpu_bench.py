#!/usr/bin/env python3
"""coil's CUDA packages against PyTorch eager and torch.compile on the GPU (issue 4), in one run.

For each workload (bench/gpu_workloads.py): build the PyTorch module in its benchmark dtype with
seeded random weights and inputs, export it to ONNX in the work dir, compile it with
`coil compile MODEL -o PKG --device cuda` (timed, with a fresh compile cache), load the package
through libcoil_runtime (ctypes, include/coil/coil.h) and run it with coil_model_run_device on
the torch CUDA tensors (inputs' data_ptr, outputs preallocated by torch, torch's current stream).
Every peer's output is checked against eager first (coil's outputs poisoned with NaN before its
check run; norm-wise relative error <= 1e-3 for fp32, 1e-2 for bf16 / fp16; a wrong coil is not
timed), then each peer is timed the same way: warm-up, then per iteration an L2 flush (a write
of max(2 x L2, 256 MiB)) followed by CUDA events around the call; median, min and max of N.
The same run measures the ceilings (device-to-device copy GB/s, counting bytes read + written;
bf16 and fp16 torch.matmul TFLOP/s on random 8192^3) and reports each workload's achieved GB/s
(inputs + weights + outputs, each once) or TFLOP/s (matrix FLOPs counted from the ONNX graph)
against them, and the issue's target. A failure of one peer or workload is reported in the
table; it never stops the run: the ceilings and each workload run in a process of their own
(a crash or a CUDA fault, which would poison the context, costs only that workload and is
placed in the column of the peer it happened in; peers run eager, torch.compile, matmul, coil,
then coil_b).

Two optional peers. --coil-b-args ARGS adds a second coil peer, 'coil_b' (named --coil-b-name in
the tables): each workload is also compiled with the base `coil compile` command plus ARGS
(instead of --coil-args' arguments), loaded, checked and timed exactly like coil, after it (so
a CUDA fault in coil's kernels costs coil_b too); the tables then gain its time, coil_b/coil and
whether the target holds for it. A workload that declares its matrix products (gpu_workloads'
`matmul`) also gets the peer 'matmul': torch.matmul of those sizes alone (random [M, K] x
[K, N] in its dtype), the GEMM without its epilogue; a target may be relative to it.
Prints markdown tables; writes JSON (--json) after every workload, so a run killed by a time
limit keeps what it measured (--budget skips workloads not started in time; --report joins
the JSON files of several runs into one table).

--device-check is a plumbing check at --quick sizes: on a GPU, the full path with 10
iterations; without one, the same exports, `coil compile --device cpu`, and coil_model_run on
host numpy data (caller buffers poisoned with NaN, then runtime-allocated outputs) against eager,
for coil and coil_b (whose arguments must then suit a CPU package); no matmul peer there.

usage: gpu_bench.py --coil build/bin/coil --runtime build/lib/libcoil_runtime.so
                    [--workloads a,b] [--iters N] [--warmup N] [--work DIR] [--json OUT]
                    [--quick] [--max-autotune] [--device-check] [--coil-args '...'] [--budget S]
                    [--coil-b-args '...' [--coil-b-name NAME]]
       gpu_bench.py --report A.json [B.json ...]     (one table from several runs)
"""
import argparse
import copy
import datetime
import json
import math
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import coilrt  # noqa: E402
import onnx_stats  # noqa: E402

TOL = {"float32": 1e-3, "bfloat16": 1e-2, "float16": 1e-2}
# The peers of a workload, in the order they run (each is also the stage a crash is placed in).
PEERS = ("eager", "compile", "compile_mat", "matmul", "coil", "coil_b")


def log(msg):
    print(msg, flush=True)


class Log:
    """The run's log file under the work dir: tracebacks and tool output."""

    def __init__(self, path, append=False):
        self.f = open(path, "a" if append else "w")

    def write(self, text):
        self.f.write(text.rstrip("\n") + "\n")
        self.f.flush()


def short(e, n=300):
    s = str(e).strip().replace("\n", " | ")
    return (type(e).__name__ + ": " + s)[:n] if not isinstance(e, Failure) else s[:n]


class Failure(Exception):
    """A reported failure (compile error, wrong result), not a bug of this script."""


# ----------------------------------------------------------------------------------------- stats


def summarize(times_ms):
    return {"ms": statistics.median(times_ms), "min_ms": min(times_ms), "max_ms": max(times_ms),
            "mean_ms": statistics.fmean(times_ms), "n": len(times_ms)}


def compare(got, ref):
    """Error of `got` against `ref` (torch tensors, any float dtype): norm-wise relative error,
    max absolute error, and that over max |ref|. NaN / Inf in `got` where ref is finite fail."""
    import torch

    if tuple(got.shape) != tuple(ref.shape):
        return {"ok_shape": False, "rel_norm": math.inf, "max_abs": math.inf, "max_rel": math.inf,
                "detail": "shape %s, expected %s" % (tuple(got.shape), tuple(ref.shape))}
    g = got.detach().to(torch.float64)
    r = ref.detach().to(torch.float64)
    bad = int((~torch.isfinite(g) & torch.isfinite(r)).sum().item())
    if bad:
        return {"ok_shape": True, "rel_norm": math.inf, "max_abs": math.inf, "max_rel": math.inf,
                "detail": "%d non-finite elements (of %d)" % (bad, g.numel())}
    d = g - r
    d = torch.where(torch.isfinite(r), d, torch.zeros_like(d))
    rn = float(torch.linalg.vector_norm(torch.where(torch.isfinite(r), r, torch.zeros_like(r))).item())
    max_abs = float(d.abs().max().item()) if d.numel() else 0.0
    scale = float(r[torch.isfinite(r)].abs().max().item()) if d.numel() else 0.0
    return {"ok_shape": True, "rel_norm": float(torch.linalg.vector_norm(d).item()) / (rn or 1.0),
            "max_abs": max_abs, "max_rel": max_abs / (scale or 1.0), "detail": ""}


def compare_all(gots, refs):
    """Worst error over a list of outputs."""
    worst = None
    for g, r in zip(gots, refs):
        c = compare(g, r)
        if worst is None or c["rel_norm"] > worst["rel_norm"] or not c["ok_shape"]:
            worst = c
    return worst


def err_text(c):
    if c is None:
        return "-"
    if c["detail"]:
        return c["detail"]
    return "%.1e (max %.1e)" % (c["rel_norm"], c["max_rel"])


def evaluate_target(target, rec, quick, peer="coil"):
    """(text, holds: True/False/None, gap) for the issue's target of a workload, met by `peer`
    (coil, or the second coil peer coil_b). A 'vs' target names the peer to compare with:
    eager, compile, matmul (torch.matmul of the workload's GEMM sizes) or best (the faster of
    eager and compile); a peer missing or not timed leaves the target unevaluated."""
    from gpu_workloads import target_text

    text = target_text(target)
    coil = rec["peers"].get(peer, {})
    if quick:
        return text, None, None
    if "ms" not in coil:
        return text, None, None
    if target["kind"] == "vs":
        names = ["eager", "compile"] if target["peer"] == "best" else [target["peer"]]
        timed = [rec["peers"][n] for n in names if "ms" in rec["peers"].get(n, {})]
        if len(timed) < len(names):
            return text, None, None
        peer = min(timed, key=lambda p: p["ms"])
        ratio = coil["ms"] / peer["ms"]
        return text, ratio <= target["factor"], ratio
    gbps = coil.get("gbps")
    if gbps is None:
        return text, None, None
    return text, gbps >= target["value"], gbps


# ---------------------------------------------------------------------------------- coil compile


def coil_compile(args, onnx_path, pkg, device, logf, coil_args=None):
    """`coil compile` with `coil_args` (a string; None: --coil-args) after the base command."""
    if os.path.exists(pkg):
        shutil.rmtree(pkg)
    extra = args.coil_args if coil_args is None else coil_args
    cmd = [args.coil, "compile", onnx_path, "-o", pkg, "--device", device] + shlex.split(extra or "")
    env = dict(os.environ)
    if not args.keep_cache:
        env["COIL_CACHE_DIR"] = os.path.join(args.work, "coil-cache-%d-%d" % (os.getpid(), int(time.time() * 1e3)))
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.compile_timeout)
    except subprocess.TimeoutExpired:
        raise Failure("coil compile timed out after %d s" % args.compile_timeout)
    secs = time.perf_counter() - t0
    logf.write("$ %s\n[exit %d, %.2f s]\n%s%s" % (" ".join(cmd), r.returncode, secs, r.stdout[-4000:], r.stderr[-8000:]))
    if r.returncode != 0:
        lines = [l for l in r.stderr.strip().splitlines() if l.strip()]
        first = next((l for l in lines if l.startswith("error")), lines[0] if lines else "")
        raise Failure("coil compile exit %d: %s" % (r.returncode, first))
    kernels = [l for l in r.stdout.splitlines() if l.strip()]
    return secs, len(kernels)


# ------------------------------------------------------------------------------- torch <-> numpy


def to_numpy_raw(t):
    """A host numpy array of t's elements and t's dtype name; bf16 as uint16 bits."""
    import torch

    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view("uint16").copy(), "bfloat16"
    return t.numpy().copy(), str(t.dtype).replace("torch.", "")


def from_raw(raw, dtype, shape):
    """A torch CPU tensor from raw elements (numpy, any view) of coil dtype name `dtype`."""
    import numpy as np
    import torch

    if dtype == "bfloat16":
        return torch.from_numpy(raw.view(np.int16).reshape(shape).copy()).view(torch.bfloat16)
    return torch.from_numpy(raw.view(np.dtype(dtype)).reshape(shape).copy())


def torch_dtype_name(t):
    return str(t.dtype).replace("torch.", "")


# ------------------------------------------------------------------------------------ GPU timing


class CudaTimer:
    def __init__(self, torch, args):
        self.torch = torch
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        l2 = int(getattr(props, "L2_cache_size", 0) or 0)
        self.flush_bytes = max(2 * l2, 256 << 20)
        self.flush = torch.empty(self.flush_bytes, dtype=torch.uint8, device="cuda")
        self.iters = args.iters
        self.warmup = args.warmup
        self.rounds = max(1, getattr(args, "rounds", 1))

    def time(self, fn, iters=None):
        """Median / min / max over all rounds; with several rounds, each round's median too
        (their spread is the noise a difference between peers must exceed)."""
        torch = self.torch
        iters = iters or self.iters
        for _ in range(self.warmup):
            fn()
        torch.cuda.synchronize()
        rounds = []
        for _ in range(self.rounds):
            events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
            for s, e in events:
                self.flush.zero_()
                s.record()
                fn()
                e.record()
            torch.cuda.synchronize()
            rounds.append([s.elapsed_time(e) for s, e in events])
        st = summarize([t for r in rounds for t in r])
        if len(rounds) > 1:
            st["round_medians"] = [statistics.median(r) for r in rounds]
        return st


def measure_ceilings(torch, timer, quick):
    res = {}
    try:
        n = (256 << 20) if quick else (1 << 30)
        src = torch.rand(n // 4, device="cuda")
        dst = torch.empty_like(src)
        st = timer.time(lambda: dst.copy_(src), iters=30)
        res["copy_gbps"] = 2 * n / (st["ms"] * 1e-3) / 1e9
        res["copy_bytes"] = n
        src = dst = None
    except Exception as e:  # noqa: BLE001 - reported, the run goes on
        res["copy_error"] = short(e)
    for name, dt in (("bfloat16", torch.bfloat16), ("float16", torch.float16)):
        try:
            n = 2048 if quick else 8192
            a = torch.randn(n, n, device="cuda", dtype=dt)
            b = torch.randn(n, n, device="cuda", dtype=dt)
            c = torch.empty(n, n, device="cuda", dtype=dt)
            st = timer.time(lambda: torch.matmul(a, b, out=c), iters=30)
            res["gemm_tflops_" + name] = 2 * n ** 3 / (st["ms"] * 1e-3) / 1e12
            res["gemm_n"] = n
            a = b = c = None
        except Exception as e:  # noqa: BLE001
            res["gemm_error_" + name] = short(e)
    torch.cuda.empty_cache()
    return res


# --------------------------------------------------------------------------------- per workload


def export_and_describe(w, module, inputs, in_names, out_names, args, rec):
    from gpu_workloads import export_onnx

    path = os.path.join(args.work, "%s%s.onnx" % (w.name, "_quick" if args.quick else ""))
    # A workload may need the dynamo exporter: the TorchScript one computes causal SDPA in f32
    # and returns f32 from a bf16 model.
    chosen = w.exporter if args.exporter == "auto" and w.exporter else args.exporter
    exporter, secs = export_onnx(module, inputs, in_names, out_names, path, opset=args.opset, exporter=chosen)
    rec["onnx"] = path
    rec["exporter"] = exporter
    rec["export_s"] = secs
    import onnx

    proto = onnx.load(path)
    census = onnx_stats.float_dtype_census(proto)
    rec["onnx_float_dtypes"] = census
    rec["onnx_ops"] = onnx_stats.op_census(proto)
    stray = {k: v for k, v in census.items() if k != w.dtype}
    if stray:
        rec["notes"].append("exported graph has %s values besides %s" % (stray, w.dtype))
    flops, unknown = onnx_stats.count_flops(proto)
    rec["flops"] = flops
    if unknown:
        rec["notes"].append("FLOPs of %d nodes not counted (shapes unknown)" % len(unknown))
    in_bytes = sum(t.numel() * t.element_size() for t in inputs)
    rec["bytes"] = in_bytes + onnx_stats.initializer_bytes(proto)
    return path


def achieved(rec, ms, ceilings, dtype):
    """Achieved GB/s or TFLOP/s of a time, and its fraction of the ceiling."""
    if rec["kind"] == "bw":
        gbps = rec["bytes"] / (ms * 1e-3) / 1e9
        ceil = ceilings.get("copy_gbps")
        return {"gbps": gbps, "of_ceiling": gbps / ceil if ceil else None}
    tflops = rec["flops"] / (ms * 1e-3) / 1e12
    ceil = ceilings.get("gemm_tflops_" + dtype)
    return {"tflops": tflops, "of_ceiling": tflops / ceil if ceil else None}


def run_workload_cuda(w, args, ctx, save):
    """Measures one workload; save(stage) records the progress (and what was measured so far)
    so that the parent can tell which peer a crash happened in. The device operations come from
    ctx (cuda_context(); the selftest runs this on the CPU with host stand-ins)."""
    import torch
    from gpu_workloads import DTYPES

    rec = {"name": w.name, "dtype": w.dtype, "kind": w.kind, "desc": w.desc, "peers": {}, "notes": []}
    module, inputs, in_names, out_names, sizes = w.build(args.quick, ctx.device, seed=args.seed)
    rec["sizes"] = sizes
    rec["input_shapes"] = [list(t.shape) for t in inputs]
    peers = rec["peers"]
    ctx.rec = rec
    save("export")
    tol = TOL[w.dtype]
    with torch.no_grad():
        try:
            onnx_path = export_and_describe(w, module, inputs, in_names, out_names, args, rec)
        except Exception as e:  # noqa: BLE001
            ctx.logf.write("%s export:\n%s" % (w.name, traceback.format_exc()))
            rec["error"] = "export: " + short(e)
            return rec
        save("eager")
        refs = module(*inputs)
        refs = list(refs) if isinstance(refs, (tuple, list)) else [refs]
        ctx.sync()
        rec["bytes"] += sum(r.numel() * r.element_size() for r in refs)
        rec["output_shapes"] = [list(r.shape) for r in refs]
        if not all(bool(torch.isfinite(r).all()) for r in refs):
            rec["notes"].append("eager output has non-finite values")
        ref32 = None
        if w.dtype != "float32":  # a float32 reference, to put the half-precision errors in context
            try:
                m32 = copy.deepcopy(module).float()
                ref32 = m32(*[t.float() for t in inputs])
                ref32 = list(ref32) if isinstance(ref32, (tuple, list)) else [ref32]
                del m32
                rec["eager_err_vs_fp32"] = compare_all(refs, ref32)
            except Exception as e:  # noqa: BLE001
                rec["notes"].append("no fp32 reference: " + short(e))

        # PyTorch eager.
        try:
            save("eager")
            peers["eager"] = ctx.timer.time(lambda: module(*inputs))
        except Exception as e:  # noqa: BLE001
            ctx.logf.write("%s eager:\n%s" % (w.name, traceback.format_exc()))
            peers["eager"] = {"error": short(e)}

        # torch.compile, default mode (and max-autotune-no-cudagraphs when asked).
        modes = [("compile", None)] + ([("compile_mat", "max-autotune-no-cudagraphs")] if args.max_autotune else [])
        for peer, mode in modes:
            try:
                save(peer)
                torch._dynamo.reset()
                t0 = time.perf_counter()
                cm = torch.compile(module, mode=mode) if mode else torch.compile(module)
                out = cm(*inputs)
                ctx.sync()
                compile_s = time.perf_counter() - t0
                out = list(out) if isinstance(out, (tuple, list)) else [out]
                err = compare_all(out, refs)
                del out
                st = ctx.timer.time(lambda: cm(*inputs))
                st["compile_s"] = compile_s
                st["err"] = err
                if err["rel_norm"] > tol:
                    st["note"] = "differs from eager: " + err_text(err)
                peers[peer] = st
                cm = None
            except Exception as e:  # noqa: BLE001
                ctx.logf.write("%s %s:\n%s" % (w.name, peer, traceback.format_exc()))
                peers[peer] = {"error": short(e)}
            torch._dynamo.reset()

        # torch.matmul of the workload's plain matrix products (if it declares them).
        mms = w.matmuls(sizes)
        if mms:
            run_matmul_peer(mms, DTYPES[w.dtype], args, ctx, save, rec)

        # coil, last: a fault in its kernels can leave the CUDA context unusable (and then costs
        # coil_b, which runs after it, too).
        for peer, coil_args in coil_peers(args):
            run_coil_device(peer, coil_args, w, args, ctx, save, rec, onnx_path, in_names, inputs, refs, ref32, tol)
    module = inputs = refs = ref32 = None
    ctx.empty_cache()
    return rec


def run_matmul_peer(mms, dtype, args, ctx, save, rec):
    """The peer 'matmul': torch.matmul(a, b) for each (M, K, N) of `mms` (a [M, K], b [K, N],
    random, in the workload's dtype, on its device), one after another in one timed call; the GEMM
    work of the workload without its epilogue, timed like the other peers."""
    import torch

    flops = sum(2 * m * k * n for m, k, n in mms)
    try:
        save("matmul")
        g = torch.Generator(device="cpu").manual_seed(args.seed + 2)
        pairs = [(torch.randn(m, k, generator=g).to(device=ctx.device, dtype=dtype),
                  torch.randn(k, n, generator=g).to(device=ctx.device, dtype=dtype)) for m, k, n in mms]

        def call():
            for a, b in pairs:
                torch.matmul(a, b)

        st = ctx.timer.time(call)
        st.update({"shapes": [list(mnk) for mnk in mms], "flops": flops})
        if rec.get("flops") and rec["flops"] != flops:
            rec["notes"].append("the matmul peer's %d FLOPs differ from the graph's %d" % (flops, rec["flops"]))
        rec["peers"]["matmul"] = st
    except Exception as e:  # noqa: BLE001
        ctx.logf.write("%s matmul:\n%s" % (rec["name"], traceback.format_exc()))
        rec["peers"]["matmul"] = {"error": short(e), "flops": flops}
    pairs = None
    ctx.empty_cache()


def coil_peers(args):
    """[(peer, coil compile arguments)]: 'coil' with --coil-args, and 'coil_b' with --coil-b-args
    when given (an empty string is a peer too: the base command alone)."""
    peers = [("coil", args.coil_args or "")]
    if getattr(args, "coil_b_args", None) is not None:
        peers.append(("coil_b", args.coil_b_args))
    return peers


def coil_peer_record(peer, coil_args, args, rec):
    """A coil peer's record, placed in rec['peers'] before anything runs (so that a crash is
    placed in it): its compile arguments and, for coil_b, its display name (--coil-b-name)."""
    p = rec["peers"][peer] = {"coil_args": coil_args}
    if peer == "coil_b":
        p["name"] = getattr(args, "coil_b_name", None) or "coil_b"
    return p


def coil_package_path(w, args, peer, device):
    return os.path.join(args.work, "%s%s%s.%s.pkg" % (w.name, "_quick" if args.quick else "",
                                                      "" if peer == "coil" else "." + peer, device))


def run_coil_device(peer, coil_args, w, args, ctx, save, rec, onnx_path, in_names, inputs, refs, ref32, tol):
    """One coil peer of run_workload_cuda ('coil' or 'coil_b'): compile the package with
    `coil_args`, load it, run it on the torch tensors through coil_model_run_device (outputs
    poisoned first), check it against eager and time it, into rec['peers'][peer] (a failure is
    its 'error'). Returns that record."""
    import torch

    p = coil_peer_record(peer, coil_args, args, rec)
    model = None
    try:
        save(peer)
        pkg = coil_package_path(w, args, peer, ctx.coil_device)
        secs, nk = coil_compile(args, onnx_path, pkg, ctx.coil_device, ctx.logf, coil_args)
        p.update({"compile_s": secs, "kernels_listed": nk})
        save(peer)
        if ctx.rt is None:
            raise Failure("runtime not loaded: " + ctx.rt_error)
        model = ctx.rt.load(pkg)
        if model.device != ctx.coil_device:
            raise Failure("package device is %s, not %s" % (model.device, ctx.coil_device))
        order = model.input_order(in_names)
        if len(model.outputs) != len(refs):
            raise Failure("package has %d outputs, eager %d" % (len(model.outputs), len(refs)))
        for info, r in zip(model.outputs, refs):
            if info["dtype"] != torch_dtype_name(r):
                raise Failure("package output %s is %s, eager's is %s" % (info["name"], info["dtype"], torch_dtype_name(r)))
        outs = [torch.empty_like(r, memory_format=torch.contiguous_format) for r in refs]
        call = model.device_call(
            [(inputs[j].data_ptr(), torch_dtype_name(inputs[j]), tuple(inputs[j].shape)) for j in order],
            [(o.data_ptr(), o.numel() * o.element_size()) for o in outs])
        stream = ctx.stream_handle()
        if not stream:
            raise Failure("torch's current stream is the legacy default stream; coil needs a real one")
        for o in outs:
            o.fill_(float("nan"))
        call(stream)
        ctx.sync()
        shapes = call.output_shapes()
        if [list(s) for s in shapes] != rec["output_shapes"]:
            raise Failure("output shapes %s, expected %s" % (shapes, rec["output_shapes"]))
        err = compare_all(outs, refs)
        p["err"] = err
        if ref32 is not None:
            p["err_vs_fp32"] = compare_all(outs, ref32)
        if not (err["rel_norm"] <= tol):
            raise Failure("wrong result vs eager: %s > %g; not timed" % (err_text(err), tol))
        save(peer)
        p.update(ctx.timer.time(lambda: call(stream)))
    except Exception as e:  # noqa: BLE001
        if not isinstance(e, Failure):
            ctx.logf.write("%s %s:\n%s" % (w.name, peer, traceback.format_exc()))
        p["error"] = short(e)
    finally:
        if model is not None:
            ctx.sync()
            model.close()
    return p


def run_workload_host(w, args, ctx, save):
    """--device-check without a GPU: export, coil CPU compile, coil_model_run on host arrays
    (caller buffers poisoned with NaN, then runtime-allocated outputs), compared with eager."""
    import torch

    rec = {"name": w.name, "dtype": w.dtype, "kind": w.kind, "desc": w.desc, "peers": {}, "notes": []}
    module, inputs, in_names, out_names, sizes = w.build(True, "cpu", seed=args.seed)
    rec["sizes"] = sizes
    ctx.rec = rec
    save("export")
    tol = TOL[w.dtype]
    with torch.no_grad():
        try:
            onnx_path = export_and_describe(w, module, inputs, in_names, out_names, args, rec)
        except Exception as e:  # noqa: BLE001
            ctx.logf.write("%s export:\n%s" % (w.name, traceback.format_exc()))
            rec["error"] = "export: " + short(e)
            return rec
        refs = module(*inputs)
        refs = list(refs) if isinstance(refs, (tuple, list)) else [refs]
        rec["bytes"] += sum(r.numel() * r.element_size() for r in refs)
        rec["output_shapes"] = [list(r.shape) for r in refs]
        for peer, coil_args in coil_peers(args):
            run_coil_host(peer, coil_args, w, args, ctx, save, rec, onnx_path, in_names, inputs, refs, tol)
    return rec


def run_coil_host(peer, coil_args, w, args, ctx, save, rec, onnx_path, in_names, inputs, refs, tol):
    """One coil peer of run_workload_host: a CPU package compiled with `coil_args`, run with
    coil_model_run on host arrays (caller buffers poisoned with NaN, then runtime-allocated
    outputs, which must be equal), compared with eager, into rec['peers'][peer]."""
    import torch

    coil = coil_peer_record(peer, coil_args, args, rec)
    model = None
    try:
        save(peer)
        pkg = coil_package_path(w, args, peer, "cpu")
        secs, nk = coil_compile(args, onnx_path, pkg, "cpu", ctx.logf, coil_args)
        coil.update({"compile_s": secs, "kernels_listed": nk})
        save(peer)
        if ctx.rt is None:
            raise Failure("runtime not loaded: " + ctx.rt_error)
        model = ctx.rt.load(pkg)
        order = model.input_order(in_names)
        host = [to_numpy_raw(inputs[j]) for j in order]
        bufs = [to_numpy_raw(torch.full_like(r, float("nan")))[0] for r in refs]
        res = model.run_host([a for a, _ in host], [d for _, d in host], out_arrays=bufs)
        got = [from_raw(raw, dt, shape) for raw, dt, shape in res]
        err = compare_all(got, refs)
        coil["err"] = err
        if not (err["rel_norm"] <= tol):
            raise Failure("wrong result vs eager: %s > %g" % (err_text(err), tol))
        res2 = model.run_host([a for a, _ in host], [d for _, d in host])
        got2 = [from_raw(raw, dt, shape) for raw, dt, shape in res2]
        if not all(torch.equal(a.view(torch.uint8) if a.dtype == torch.bool else a, b) for a, b in zip(got, got2)):
            raise Failure("runtime-allocated outputs differ from caller-buffer outputs")
        t0 = time.perf_counter()
        reps = 1
        for _ in range(reps):
            model.run_host([a for a, _ in host], [d for _, d in host], out_arrays=bufs)
        coil["host_ms"] = (time.perf_counter() - t0) / reps * 1e3
    except Exception as e:  # noqa: BLE001
        if not isinstance(e, Failure):
            ctx.logf.write("%s %s:\n%s" % (w.name, peer, traceback.format_exc()))
        coil["error"] = short(e)
    finally:
        if model is not None:
            model.close()
    return coil


# ------------------------------------------------------------------------------------- printing


def fmt(x, spec="%.3f"):
    return "-" if x is None else spec % x


def peer_cell(rec, peer):
    p = rec["peers"].get(peer)
    if p is None:
        return "-"
    if "error" in p:
        return "FAIL"
    return fmt(p.get("ms"))


def ratio(rec, a, b):
    pa, pb = rec["peers"].get(a, {}), rec["peers"].get(b, {})
    if "ms" in pa and "ms" in pb:
        return "%.2f" % (pa["ms"] / pb["ms"])
    return "-"


def achieved_cell(rec, peer="coil"):
    p = rec["peers"].get(peer, {})
    if "gbps" in p:
        return "%.0f GB/s" % p["gbps"], fmt(p.get("of_ceiling") and 100 * p["of_ceiling"], "%.0f%%")
    if "tflops" in p:
        return "%.0f TFLOP/s" % p["tflops"], fmt(p.get("of_ceiling") and 100 * p["of_ceiling"], "%.0f%%")
    return "-", "-"


def coil_b_label(results):
    """The second coil peer's name in the tables (--coil-b-name of the runs; 'coil_b' when they
    differ)."""
    names = {r["peers"]["coil_b"].get("name") or "coil_b" for r in results if "coil_b" in r.get("peers", {})}
    return names.pop() if len(names) == 1 else "coil_b"


def holds_cell(holds):
    return "-" if holds is None else ("yes" if holds else "no")


def print_tables(results, ceilings, args, env):
    lines = []
    out = lines.append
    quick = args.quick
    out("")
    out("## GPU: coil vs PyTorch eager and torch.compile (%s)" % env["date"][:10])
    out("")
    out("GPU %s; torch %s (CUDA %s); %s; median of %d iterations after %d warm-up, L2 flushed "
        "(%d MiB write) before each; CUDA events.%s" % (
            env.get("gpu", "?"), env.get("torch", "?"), env.get("torch_cuda", "?"),
            "driver " + env["driver"] if env.get("driver") else "driver ?", args.iters, args.warmup,
            env.get("flush_mib", 0), " QUICK SIZES (smoke test; targets not evaluated)." if quick else ""))
    cgb = ceilings.get("copy_gbps")
    out("Ceilings measured in this run: device copy %s GB/s (read + write); GEMM %s TFLOP/s bf16, %s fp16 "
        "(torch.matmul %s^3, random data)." % (
            fmt(cgb, "%.0f"), fmt(ceilings.get("gemm_tflops_bfloat16"), "%.0f"),
            fmt(ceilings.get("gemm_tflops_float16"), "%.0f"), ceilings.get("gemm_n", "?")))
    mat = args.max_autotune
    # Columns for the second coil peer and the matmul peer only where a workload has them (so
    # the tables of older runs' JSON files print as they did).
    has_b = any("coil_b" in r.get("peers", {}) for r in results)
    has_mm = any("matmul" in r.get("peers", {}) for r in results)
    b = coil_b_label(results)
    label = {"coil_b": b}
    if has_b:
        out("Two coil peers: coil is `coil compile` plus %s; %s is `coil compile` plus %s." % (
            coil_args_text(results, "coil"), b, coil_args_text(results, "coil_b")))
    if has_mm:
        out("matmul: torch.matmul of the workload's GEMM sizes alone (a [M, K] x b [K, N], random; several "
            "one after another in one timed call), no epilogue.")
    out("")

    cols = [("workload", lambda r: r["name"]), ("dtype", lambda r: r["dtype"]),
            ("coil ms", lambda r: peer_cell(r, "coil"))]
    if has_b:
        cols.append(("%s ms" % b, lambda r: peer_cell(r, "coil_b")))
    cols += [("eager ms", lambda r: peer_cell(r, "eager")), ("compile ms", lambda r: peer_cell(r, "compile"))]
    if mat:
        cols.append(("compile-mat ms", lambda r: peer_cell(r, "compile_mat")))
    if has_mm:
        cols.append(("matmul ms", lambda r: peer_cell(r, "matmul")))
    cols += [("coil/compile", lambda r: ratio(r, "coil", "compile")), ("coil/eager", lambda r: ratio(r, "coil", "eager"))]
    if has_mm:
        cols.append(("coil/matmul", lambda r: ratio(r, "coil", "matmul")))
    if has_b:
        cols.append(("%s/coil" % b, lambda r: ratio(r, "coil_b", "coil")))
    cols += [("coil achieved", lambda r: achieved_cell(r)[0]), ("of ceiling", lambda r: achieved_cell(r)[1]),
             ("coil err vs eager", lambda r: err_text(r["peers"].get("coil", {}).get("err"))),
             ("target", lambda r: r.get("target_text", "")), ("holds", lambda r: holds_cell(r.get("holds")))]
    if has_b:
        cols.append(("%s holds" % b, lambda r: holds_cell(r.get("holds_b"))))
    # A failed workload's row: FAIL in coil's column, its target, '-' where a target would hold.
    failed = {"workload": None, "dtype": None, "coil ms": "FAIL", "target": None, "holds": "-", "%s holds" % b: "-"}
    out("| " + " | ".join(h for h, _ in cols) + " |")
    out("|" + "---|" * len(cols))
    notes = []
    for rec in results:
        if "error" in rec:
            cells = [(fn(rec) if failed[h] is None else failed[h]) if h in failed else "" for h, fn in cols]
            out("| " + " | ".join(cells) + " |")
            notes.append("%s: %s" % (rec["name"], rec["error"]))
            continue
        out("| " + " | ".join(fn(rec) for _, fn in cols) + " |")
        for peer, p in rec["peers"].items():
            if "error" in p:
                notes.append("%s %s: %s" % (rec["name"], label.get(peer, peer), p["error"]))
            elif p.get("note"):
                notes.append("%s %s: %s" % (rec["name"], label.get(peer, peer), p["note"]))
        for n in rec["notes"]:
            notes.append("%s: %s" % (rec["name"], n))
    out("")
    out("Details (ms as median [min, max]; compile times are wall-clock seconds, torch.compile's including its first run):")
    out("")

    def mm(peer):
        def cell(rec):
            p = rec["peers"].get(peer, {})
            if "ms" not in p:
                return "-"
            rounds = " (rounds %s)" % "/".join("%.3f" % m for m in p["round_medians"]) if p.get("round_medians") else ""
            return "%.3f [%.3f, %.3f]%s" % (p["ms"], p["min_ms"], p["max_ms"], rounds)
        return cell

    def compile_s(peer):
        return lambda rec: fmt(rec["peers"].get(peer, {}).get("compile_s"), "%.1f")

    cols = [("workload", lambda r: r["name"]), ("sizes", lambda r: " ".join("%s=%s" % kv for kv in r["sizes"].items())),
            ("coil", mm("coil"))]
    if has_b:
        cols.append((b, mm("coil_b")))
    cols += [("eager", mm("eager")), ("compile", mm("compile"))]
    if mat:
        cols.append(("compile-mat", mm("compile_mat")))
    if has_mm:
        cols.append(("matmul", mm("matmul")))
    cols.append(("coil compile s", compile_s("coil")))
    if has_b:
        cols.append(("%s compile s" % b, compile_s("coil_b")))
    cols += [("torch.compile s", compile_s("compile")),
             ("eager / compile achieved", lambda r: "%s / %s" % (achieved_cell(r, "eager")[0], achieved_cell(r, "compile")[0]))]
    if has_mm:
        cols.append(("matmul achieved", lambda r: achieved_cell(r, "matmul")[0]))
    cols.append(("err vs fp32 ref: coil / eager", lambda r: "%s / %s" % (
        err_text(r["peers"].get("coil", {}).get("err_vs_fp32")), err_text(r.get("eager_err_vs_fp32")))))
    if has_b:
        cols.append(("%s err vs eager / fp32 ref" % b, lambda r: "%s / %s" % (
            err_text(r["peers"].get("coil_b", {}).get("err")), err_text(r["peers"].get("coil_b", {}).get("err_vs_fp32")))))
    cols += [("exporter", lambda r: r.get("exporter", "-")),
             ("ONNX float dtypes", lambda r: ", ".join("%s %d" % kv for kv in sorted(r.get("onnx_float_dtypes", {}).items())))]
    out("| " + " | ".join(h for h, _ in cols) + " |")
    out("|" + "---|" * len(cols))
    for rec in results:
        if "error" not in rec:
            out("| " + " | ".join(fn(rec) for _, fn in cols) + " |")
    measured = sum(1 for r in results if "ms" in r["peers"].get("coil", {}))
    evaluated = [r for r in results if r.get("holds") is not None]
    out("")
    summary = "Summary: coil measured on %d of %d workloads; targets hold on %d of %d evaluated." % (
        measured, len(results), sum(1 for r in evaluated if r["holds"]), len(evaluated))
    if has_b:
        evaluated_b = [r for r in results if r.get("holds_b") is not None]
        summary += " %s measured on %d; targets hold on %d of %d evaluated." % (
            b, sum(1 for r in results if "ms" in r["peers"].get("coil_b", {})),
            sum(1 for r in evaluated_b if r["holds_b"]), len(evaluated_b))
    out(summary)
    if notes:
        out("")
        out("Notes and failures:")
        for n in notes:
            out("- " + n)
    text = "\n".join(lines)
    log(text)
    return text


def coil_args_text(results, peer):
    """The coil compile arguments of a coil peer over the runs, as the tables quote them."""
    seen = []
    for r in results:
        a = r.get("peers", {}).get(peer, {}).get("coil_args")
        if a is not None and a not in seen:
            seen.append(a)
    if not seen:
        return "?"
    return " or ".join("'%s'" % a if a else "no extra arguments" for a in seen)


def print_host_table(results):
    has_b = any("coil_b" in r.get("peers", {}) for r in results)
    b = coil_b_label(results)
    log("")
    log("device check on the CPU (quick sizes): export -> coil compile --device cpu -> coil_model_run vs eager")
    peers = [("coil", "coil")] + ([("coil_b", b)] if has_b else [])
    head = ["workload", "dtype", "exporter"]
    for _, name in peers:
        head += ["%s compile s" % name, "%s host ms" % name, "%s err vs eager" % name]
    head.append("status")
    log("| " + " | ".join(head) + " |")
    log("|" + "---|" * len(head))
    ok = 0
    for rec in results:
        cells = [rec["name"], rec["dtype"], rec.get("exporter", "-")]
        status = rec.get("error")
        for peer, name in peers:
            c = rec["peers"].get(peer, {})
            cells += [fmt(c.get("compile_s"), "%.2f"), fmt(c.get("host_ms"), "%.2f"), err_text(c.get("err"))]
            if not status and c.get("error"):
                status = c["error"] if peer == "coil" else "%s: %s" % (name, c["error"])
            elif not status and has_b and peer not in rec["peers"]:
                status = "%s: not run" % name
        status = status or "ok"
        ok += status == "ok"
        log("| " + " | ".join(cells + [status]) + " |")
    log("%d passed, %d failed" % (ok, len(results) - ok))
    return ok == len(results)


# ----------------------------------------------------------------------------------------- main


def environment(torch):
    env = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "host": platform.node(), "python": platform.python_version()}
    env["torch"] = torch.__version__
    env["torch_cuda"] = torch.version.cuda
    try:
        import onnx

        env["onnx"] = onnx.__version__
    except Exception:  # noqa: BLE001
        pass
    try:
        import triton

        env["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        pass
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(torch.cuda.current_device())
        env["gpu"] = p.name
        env["sm_count"] = p.multi_processor_count
        env["l2_bytes"] = int(getattr(p, "L2_cache_size", 0) or 0)
        env["memory_bytes"] = p.total_memory
        env["capability"] = "%d.%d" % (p.major, p.minor)
        try:
            r = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.max.sm,power.limit",
                                "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
            if r.returncode == 0:
                f = [x.strip() for x in r.stdout.strip().splitlines()[0].split(",")]
                env["driver"], env["sm_clock"], env["sm_clock_max"], env["power_limit"] = f[:4]
        except Exception:  # noqa: BLE001
            pass
    try:
        r = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10)
        if r.returncode == 0:
            env["coil_git"] = r.stdout.strip()
    except Exception:  # noqa: BLE001
        pass
    return env


class Ctx:
    pass


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--coil", default=os.path.join(HERE, "..", "build", "bin", "coil"), help="the coil binary")
    ap.add_argument("--runtime", default=os.path.join(HERE, "..", "build", "lib", "libcoil_runtime.so"),
                    help="libcoil_runtime.so")
    ap.add_argument("--workloads", default="all", help="comma-separated names, or 'all'")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=1,
                    help="time each peer this many times over (--iters each); the JSON keeps each round's median")
    ap.add_argument("--work", default="/tmp/coil-gpu-bench", help="exports, packages, logs (never committed)")
    ap.add_argument("--json", default=None, help="write the results here (default WORK/gpu_bench.json)")
    ap.add_argument("--md", default=None, help="also write the markdown tables here")
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke test; targets not evaluated")
    ap.add_argument("--max-autotune", action="store_true", help="also time torch.compile(mode='max-autotune-no-cudagraphs')")
    ap.add_argument("--device-check", action="store_true",
                    help="plumbing check at quick sizes: on a GPU a short run; without one, coil CPU packages "
                         "through coil_model_run on host data")
    ap.add_argument("--coil-args", default="", help="extra arguments for coil compile, e.g. '--arch sm_90a'")
    ap.add_argument("--coil-b-args", default=None, metavar="ARGS",
                    help="a second coil peer ('coil_b'): every workload is also compiled with the base coil compile "
                         "command plus ARGS (instead of --coil-args' arguments; '' for none), checked and timed like "
                         "coil, after it")
    ap.add_argument("--coil-b-name", default="coil_b", metavar="NAME",
                    help="the second coil peer's name in the tables (its JSON key stays 'coil_b')")
    ap.add_argument("--budget", type=float, default=0,
                    help="seconds: workloads not started by then are skipped and reported (0: no limit)")
    ap.add_argument("--workload-timeout", type=int, default=1800,
                    help="seconds for one workload's process (coil compile, exports and all peers)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-out", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--report", nargs="+", metavar="JSON",
                    help="print the tables of earlier runs' JSON files (workloads concatenated) and exit")
    ap.add_argument("--exporter", default="auto", choices=["auto", "torchscript", "dynamo"])
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compile-timeout", type=int, default=1800, help="seconds per coil compile")
    ap.add_argument("--keep-cache", action="store_true", help="use coil's compile cache (default: a fresh one, so compile times are cold)")
    args = ap.parse_args(argv)
    if args.device_check:
        args.quick = True
        args.iters = min(args.iters, 10)
        args.warmup = min(args.warmup, 2)
    if args.iters < 1 or args.warmup < 0:
        ap.error("--iters must be >= 1 and --warmup >= 0")
    return args


def child_argv(args, step, out):
    argv = [sys.executable, os.path.abspath(__file__), "--coil", args.coil, "--runtime", args.runtime,
            "--iters", str(args.iters), "--warmup", str(args.warmup), "--rounds", str(args.rounds), "--work", args.work, "--exporter", args.exporter,
            "--opset", str(args.opset), "--seed", str(args.seed), "--compile-timeout", str(args.compile_timeout),
            "--coil-args=" + (args.coil_args or ""), "--child", step, "--child-out", out]
    if args.coil_b_args is not None:
        argv += ["--coil-b-args=" + args.coil_b_args, "--coil-b-name=" + args.coil_b_name]
    for flag in ("quick", "max_autotune", "keep_cache", "device_check"):
        if getattr(args, flag):
            argv.append("--" + flag.replace("_", "-"))
    return argv


def run_child(args, step, timeout):
    """Runs one step (ceilings or a workload) in its own process: a crash or a CUDA fault there
    (which would poison this process's CUDA context) costs only that step. Returns
    (document the child wrote or None, exit code or a text)."""
    out = os.path.join(args.work, "step-%s.json" % step)
    if os.path.exists(out):
        os.remove(out)
    try:
        rc = subprocess.run(child_argv(args, step, out), timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        rc = "killed after %d s (--workload-timeout)" % timeout
    doc = None
    if os.path.exists(out):
        try:
            doc = json.load(open(out))
        except ValueError:
            doc = None
    return doc, rc


def cuda_context(ctx, torch):
    """The device operations run_workload_cuda uses, for CUDA."""
    ctx.device = "cuda"
    ctx.coil_device = "cuda"
    ctx.sync = torch.cuda.synchronize
    ctx.empty_cache = torch.cuda.empty_cache
    ctx.stream_handle = lambda: torch.cuda.current_stream().cuda_stream
    return ctx


def child_main(args):
    import torch
    import gpu_workloads

    ctx = Ctx()
    ctx.logf = Log(os.path.join(args.work, "gpu_bench.log"), append=True)
    ctx.rt, ctx.rt_error, ctx.rec = None, "", None
    try:
        ctx.rt = coilrt.Runtime(args.runtime)
    except Exception as e:  # noqa: BLE001 - every coil row then says why
        ctx.rt_error = short(e)
    env = environment(torch)
    cuda = torch.cuda.is_available()

    def save(stage):
        write_json(args.child_out, {"env": env, "stage": stage, "rec": ctx.rec})

    try:
        if not cuda:
            run_workload_host(gpu_workloads.BY_NAME[args.child], args, ctx, save)
        else:
            # Everything runs on one dedicated stream: torch's work, the L2 flush, the events and
            # coil's launches (its handle is what coil_model_run_device gets), so they are ordered.
            with torch.cuda.stream(torch.cuda.Stream()):
                cuda_context(ctx, torch)
                ctx.timer = CudaTimer(torch, args)
                env["flush_mib"] = ctx.timer.flush_bytes >> 20
                if args.child == "ceilings":
                    ctx.rec = measure_ceilings(torch, ctx.timer, args.quick)
                else:
                    run_workload_cuda(gpu_workloads.BY_NAME[args.child], args, ctx, save)
    except Exception as e:  # noqa: BLE001 - outside any peer: the workload fails, reported
        ctx.logf.write("%s:\n%s" % (args.child, traceback.format_exc()))
        if ctx.rec is None:
            w = gpu_workloads.BY_NAME.get(args.child)
            ctx.rec = {"name": args.child, "dtype": w.dtype if w else "", "kind": w.kind if w else "", "peers": {},
                       "notes": []}
        ctx.rec["error"] = short(e)
    save("done")
    return 0


def finish_record(w, doc, rc):
    """The record of a workload from its child's document, with the crash (if any) placed."""
    rec = (doc or {}).get("rec")
    if rec is None:
        return {"name": w.name, "dtype": w.dtype, "kind": w.kind, "peers": {}, "notes": [],
                "error": "its process ended (%s) before it measured anything; see the log" % rc}
    stage = doc.get("stage")
    if stage != "done":
        what = "its process ended (%s) during %s; see the log" % (rc, stage)
        if stage in PEERS and stage in rec["peers"] and "ms" in rec["peers"][stage]:
            rec["notes"].append(what + " (after that peer was timed)")
        elif stage in PEERS:
            rec["peers"].setdefault(stage, {})["error"] = what
        else:
            rec["error"] = what
    return rec


def add_achieved(rec, ceilings):
    if "error" in rec:
        return
    for p in rec["peers"].values():
        if "ms" in p:
            # The matmul peer's TFLOP/s count its own products (those of the graph when the
            # workload declares them right).
            p.update(achieved(dict(rec, flops=p["flops"]) if "flops" in p else rec, p["ms"], ceilings, rec["dtype"]))


def main(argv=None):
    args = parse_args(argv)
    if args.report:
        return report(args.report)
    try:
        import torch
    except ImportError:
        log("error: gpu_bench.py needs torch (and torchvision for resnet50); bench/gpu_bench_selftest.py checks "
            "the torch-free parts")
        return 2
    import gpu_workloads

    args.work = os.path.abspath(args.work)
    args.coil = os.path.abspath(args.coil)
    args.runtime = os.path.abspath(args.runtime)
    if args.child:
        return child_main(args)
    names = [w.name for w in gpu_workloads.WORKLOADS] if args.workloads == "all" else args.workloads.split(",")
    unknown = [n for n in names if n not in gpu_workloads.BY_NAME]
    if unknown:
        log("error: unknown workloads %s; known: %s" % (unknown, ",".join(w.name for w in gpu_workloads.WORKLOADS)))
        return 2
    os.makedirs(args.work, exist_ok=True)
    Log(os.path.join(args.work, "gpu_bench.log"))  # starts the log afresh
    log_path = os.path.join(args.work, "gpu_bench.log")
    try:
        coilrt.Runtime(args.runtime)
    except Exception as e:  # noqa: BLE001 - every coil row will say why
        log("warning: cannot load %s: %s" % (args.runtime, short(e)))
    if not os.path.exists(args.coil):
        log("warning: coil binary %s does not exist; every coil row will fail" % args.coil)
    json_path = os.path.abspath(args.json or os.path.join(args.work, "gpu_bench.json"))
    os.makedirs(os.path.dirname(json_path), exist_ok=True)
    cuda = torch.cuda.is_available()
    if not cuda and not args.device_check:
        log("error: no CUDA device visible to torch; run with --device-check for the CPU plumbing check")
        return 2
    start = time.perf_counter()
    # The parent never touches the GPU: the children report the environment.
    env = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "torch": torch.__version__}
    ceilings = {}
    if cuda:
        log("torch %s; measuring ceilings ..." % torch.__version__)
        doc, rc = run_child(args, "ceilings", args.workload_timeout)
        if doc and doc.get("stage") == "done" and "error" not in (doc.get("rec") or {"error": 1}):
            ceilings = doc["rec"]
            env = doc["env"]
        else:
            ceilings = {"error": "the ceilings process ended (%s); see %s" % (rc, log_path)}
        log("ceilings: %s" % json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in ceilings.items()}))
    results = []
    for n in names:
        w = gpu_workloads.BY_NAME[n]
        t0 = time.perf_counter()
        if args.budget and t0 - start > args.budget:
            rec = {"name": n, "dtype": w.dtype, "kind": w.kind, "peers": {}, "notes": [],
                   "error": "skipped: the time budget of %.0f s was spent" % args.budget}
        else:
            log("[%s] ... (%.0f s into the run)" % (n, t0 - start))
            doc, rc = run_child(args, n, args.workload_timeout)
            rec = finish_record(w, doc, rc)
            if doc and doc.get("env"):
                rec["gpu_state"] = {k: doc["env"][k] for k in ("sm_clock", "sm_clock_max", "power_limit") if k in doc["env"]}
            if doc and "gpu" not in env and doc.get("env"):
                env = doc["env"]
            if doc and "flush_mib" in doc.get("env", {}):
                env["flush_mib"] = doc["env"]["flush_mib"]
        rec["target"] = w.target
        add_achieved(rec, ceilings)
        if "error" in rec:
            rec["target_text"], rec["holds"], rec["target_value"] = gpu_workloads.target_text(w.target), None, None
        else:
            rec["target_text"], rec["holds"], rec["target_value"] = evaluate_target(w.target, rec, args.quick)
            if "coil_b" in rec["peers"]:
                _, rec["holds_b"], rec["target_value_b"] = evaluate_target(w.target, rec, args.quick, "coil_b")
        rec["wall_s"] = time.perf_counter() - t0
        brief = ", ".join("%s %s" % (p, ("%.3f ms" % v["ms"]) if "ms" in v else ("ok" if "err" in v and "error" not in v else "FAIL"))
                          for p, v in rec["peers"].items())
        log("[%s] %.0f s: %s" % (n, rec["wall_s"], brief if "error" not in rec else rec["error"]))
        results.append(rec)
        # Written after every workload, so that a run killed by a time limit leaves its results.
        write_json(json_path, {"env": env, "mode": "cuda" if cuda else "host-device-check", "args": vars(args),
                               "ceilings": ceilings, "workloads": results})
    if not cuda:
        ok = print_host_table(results)
        log("json: %s; log: %s" % (json_path, log_path))
        return 0 if ok else 1
    text = print_tables(results, ceilings, args, env)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text + "\n")
    log("\njson: %s; log: %s" % (json_path, log_path))
    return 0


def write_json(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, default=str)
    os.replace(tmp, path)


def report(paths):
    """Prints one set of tables from the JSON files of earlier runs (first file's env and ceilings)."""
    docs = [json.load(open(p)) for p in paths]
    docs = [d for d in docs if d.get("mode") == "cuda"]
    if not docs:
        log("error: no GPU run among %s" % paths)
        return 2
    results = [w for d in docs for w in d["workloads"]]
    a = docs[0]["args"]
    args = argparse.Namespace(quick=a.get("quick", False), iters=a.get("iters", 0), warmup=a.get("warmup", 0),
                              max_autotune=any(d["args"].get("max_autotune") for d in docs))
    print_tables(results, docs[0].get("ceilings", {}), args, docs[0]["env"])
    if len(docs) > 1:
        log("(%d runs; ceilings of the first: %s)" % (len(docs), ", ".join(
            "%s %s" % (d["env"].get("date", "?"), {k: round(v) for k, v in d.get("ceilings", {}).items()
                                                     if isinstance(v, float)}) for d in docs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
