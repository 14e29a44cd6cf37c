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
placed in the column of the peer it happened in; peers run eager, torch.compile, then coil).
Prints markdown tables; writes JSON (--json) after every workload, so a run killed by a time
limit keeps what it measured (--budget skips workloads not started in time; --report joins
the JSON files of several runs into one table).

--device-check is a plumbing check at --quick sizes: on a GPU, the full path with 10
iterations; without one, the same exports, `coil compile --device cpu`, and coil_model_run on
host numpy data (caller buffers poisoned with NaN, then runtime-allocated outputs) against eager.

usage: gpu_bench.py --coil build/bin/coil --runtime build/lib/libcoil_runtime.so
                    [--workloads a,b] [--iters N] [--warmup N] [--work DIR] [--json OUT]
                    [--quick] [--max-autotune] [--device-check] [--coil-args '...'] [--budget S]
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


def evaluate_target(target, rec, quick):
    """(text, holds: True/False/None, gap) for the issue's target of a workload."""
    from gpu_workloads import target_text

    text = target_text(target)
    coil = rec["peers"].get("coil", {})
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


def coil_compile(args, onnx_path, pkg, device, logf):
    if os.path.exists(pkg):
        shutil.rmtree(pkg)
    cmd = [args.coil, "compile", onnx_path, "-o", pkg, "--device", device] + shlex.split(args.coil_args or "")
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

        # coil, last: a fault in its kernels can leave the CUDA context unusable.
        peers["coil"] = {}
        model = None
        try:
            save("coil")
            pkg = os.path.join(args.work, "%s%s.%s.pkg" % (w.name, "_quick" if args.quick else "", ctx.coil_device))
            secs, nk = coil_compile(args, onnx_path, pkg, ctx.coil_device, ctx.logf)
            peers["coil"].update({"compile_s": secs, "kernels_listed": nk})
            save("coil")
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
            peers["coil"]["err"] = err
            if ref32 is not None:
                peers["coil"]["err_vs_fp32"] = compare_all(outs, ref32)
            if not (err["rel_norm"] <= tol):
                raise Failure("wrong result vs eager: %s > %g; not timed" % (err_text(err), tol))
            save("coil")
            peers["coil"].update(ctx.timer.time(lambda: call(stream)))
        except Exception as e:  # noqa: BLE001
            if not isinstance(e, Failure):
                ctx.logf.write("%s coil:\n%s" % (w.name, traceback.format_exc()))
            peers["coil"]["error"] = short(e)
        finally:
            if model is not None:
                ctx.sync()
                model.close()
    module = inputs = refs = ref32 = None
    ctx.empty_cache()
    return rec


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
        coil = rec["peers"]["coil"] = {}
        model = None
        try:
            save("coil")
            pkg = os.path.join(args.work, "%s_quick.cpu.pkg" % w.name)
            secs, nk = coil_compile(args, onnx_path, pkg, "cpu", ctx.logf)
            coil.update({"compile_s": secs, "kernels_listed": nk})
            save("coil")
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
                ctx.logf.write("%s coil:\n%s" % (w.name, traceback.format_exc()))
            coil["error"] = short(e)
        finally:
            if model is not None:
                model.close()
    return rec


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
    out("")
    mat = args.max_autotune
    head = "| workload | dtype | coil ms | eager ms | compile ms |" + (" compile-mat ms |" if mat else "") + \
        " coil/compile | coil/eager | coil achieved | of ceiling | coil err vs eager | target | holds |"
    out(head)
    out("|" + "---|" * (head.count("|") - 1))
    notes = []
    for rec in results:
        if "error" in rec:
            cells = [rec["name"], rec["dtype"], "FAIL"] + [""] * (8 if mat else 7) + [rec.get("target_text", ""), "-"]
            out("| " + " | ".join(cells) + " |")
            notes.append("%s: %s" % (rec["name"], rec["error"]))
            continue
        a, pct = achieved_cell(rec)
        holds = rec.get("holds")
        holds_s = "-" if holds is None else ("yes" if holds else "no")
        cells = [rec["name"], rec["dtype"], peer_cell(rec, "coil"), peer_cell(rec, "eager"), peer_cell(rec, "compile")]
        if mat:
            cells.append(peer_cell(rec, "compile_mat"))
        cells += [ratio(rec, "coil", "compile"), ratio(rec, "coil", "eager"), a, pct,
                  err_text(rec["peers"].get("coil", {}).get("err")), rec.get("target_text", ""), holds_s]
        out("| " + " | ".join(cells) + " |")
        for peer, p in rec["peers"].items():
            if "error" in p:
                notes.append("%s %s: %s" % (rec["name"], peer, p["error"]))
            elif p.get("note"):
                notes.append("%s %s: %s" % (rec["name"], peer, p["note"]))
        for n in rec["notes"]:
            notes.append("%s: %s" % (rec["name"], n))
    out("")
    out("Details (ms as median [min, max]; compile times are wall-clock seconds, torch.compile's including its first run):")
    out("")
    out("| workload | sizes | coil | eager | compile |" + (" compile-mat |" if mat else "") +
        " coil compile s | torch.compile s | eager / compile achieved | err vs fp32 ref: coil / eager | exporter |"
        " ONNX float dtypes |")
    out("|" + "---|" * (11 + (1 if mat else 0)))
    for rec in results:
        if "error" in rec:
            continue

        def mm(peer):
            p = rec["peers"].get(peer, {})
            if "ms" not in p:
                return "-"
            rounds = " (rounds %s)" % "/".join("%.3f" % m for m in p["round_medians"]) if p.get("round_medians") else ""
            return "%.3f [%.3f, %.3f]%s" % (p["ms"], p["min_ms"], p["max_ms"], rounds)

        e_a, _ = achieved_cell(rec, "eager")
        c_a, _ = achieved_cell(rec, "compile")
        cells = [rec["name"], " ".join("%s=%s" % kv for kv in rec["sizes"].items()), mm("coil"), mm("eager"), mm("compile")]
        if mat:
            cells.append(mm("compile_mat"))
        cells += [fmt(rec["peers"].get("coil", {}).get("compile_s"), "%.1f"),
                  fmt(rec["peers"].get("compile", {}).get("compile_s"), "%.1f"),
                  "%s / %s" % (e_a, c_a),
                  "%s / %s" % (err_text(rec["peers"].get("coil", {}).get("err_vs_fp32")), err_text(rec.get("eager_err_vs_fp32"))),
                  rec.get("exporter", "-"),
                  ", ".join("%s %d" % kv for kv in sorted(rec.get("onnx_float_dtypes", {}).items()))]
        out("| " + " | ".join(cells) + " |")
    measured = sum(1 for r in results if "ms" in r["peers"].get("coil", {}))
    evaluated = [r for r in results if r.get("holds") is not None]
    out("")
    out("Summary: coil measured on %d of %d workloads; targets hold on %d of %d evaluated." % (
        measured, len(results), sum(1 for r in evaluated if r["holds"]), len(evaluated)))
    if notes:
        out("")
        out("Notes and failures:")
        for n in notes:
            out("- " + n)
    text = "\n".join(lines)
    log(text)
    return text


def print_host_table(results):
    log("")
    log("device check on the CPU (quick sizes): export -> coil compile --device cpu -> coil_model_run vs eager")
    log("| workload | dtype | exporter | coil compile s | coil host ms | err vs eager | status |")
    log("|---|---|---|---|---|---|---|")
    ok = 0
    for rec in results:
        c = rec["peers"].get("coil", {})
        status = rec.get("error") or c.get("error") or "ok"
        ok += status == "ok"
        log("| %s | %s | %s | %s | %s | %s | %s |" % (
            rec["name"], rec["dtype"], rec.get("exporter", "-"), fmt(c.get("compile_s"), "%.2f"),
            fmt(c.get("host_ms"), "%.2f"), err_text(c.get("err")), status))
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
        if stage in ("eager", "compile", "compile_mat", "coil") and stage in rec["peers"] and "ms" in rec["peers"][stage]:
            rec["notes"].append(what + " (after that peer was timed)")
        elif stage in ("eager", "compile", "compile_mat", "coil"):
            rec["peers"].setdefault(stage, {})["error"] = what
        else:
            rec["error"] = what
    return rec


def add_achieved(rec, ceilings):
    if "error" in rec:
        return
    for p in rec["peers"].values():
        if "ms" in p:
            p.update(achieved(rec, p["ms"], ceilings, rec["dtype"]))


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
