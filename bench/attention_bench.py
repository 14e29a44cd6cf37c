#!/usr/bin/env python3
"""coil's CUDA attention kernel (coil_cuda_attention_bf16 in libcoil_cuda) against PyTorch's flash
SDPA (F.scaled_dot_product_attention under sdpa_kernel(SDPBackend.FLASH_ATTENTION)), in one run.

Shapes (issue 13): batch 8, 16 heads, seq 2048, head dim 128, bf16, causal and not (prefill);
batch 16, 32 query heads, 8 kv heads, 1 query, 4096 keys, head dim 128 (decode, GQA); and, by
--problems, head dim 64 at BERT's, ViT's and a long sequence's sizes. Each
problem is first checked: both outputs against a float32 reference on upcast inputs (relative
to the reference's largest magnitude; coil's output poisoned with NaN first). Then each peer is
timed: warm-up, then per iteration an L2 flush (a write of 256 MiB) followed by CUDA events
around the call alone; the median of --iters. TFLOP/s count 4 * B * H * Sq * Sk * D, halved for
causal; the ratio is coil's TFLOP/s over PyTorch's flash SDPA. cuDNN's fused attention
(SDPBackend.CUDNN_ATTENTION, what torch.compile picks on Hopper) is timed beside it. The kernel is called through ctypes with the
torch tensors' data_ptr() and a coil_cuda_ctx (stream: torch's current stream; workspace: a
torch buffer). --variants also times coil's other kernel configurations (COIL_CUDA_ATTN_CONFIG).

usage: attention_bench.py [--lib build/lib/libcoil_cuda.so] [--iters N] [--warmup N]
                          [--variants] [--problems NAMES] [--json OUT] [--profile CONFIG]
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


class CudaCtx(ctypes.Structure):
    _fields_ = [
        ("stream", ctypes.c_void_p),
        ("functions", ctypes.c_void_p),
        ("blas", ctypes.c_void_p),
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
        ("error", ctypes.c_char_p),
        ("error_size", ctypes.c_size_t),
        ("host_alloc", ctypes.c_void_p),
        ("host_free", ctypes.c_void_p),
        ("host_ctx", ctypes.c_void_p),
        ("device_ordinal", ctypes.c_int32),
        ("sm_version", ctypes.c_int32),
    ]


class Coil:
    def __init__(self, path, workspace_bytes=256 << 20):
        self.lib = ctypes.CDLL(path)
        f = self.lib.coil_cuda_attention_bf16
        f.restype = ctypes.c_int32
        f.argtypes = [ctypes.POINTER(CudaCtx)] + [ctypes.c_void_p] * 5 + [ctypes.c_int64] * 30 + [
            ctypes.c_double, ctypes.c_double]
        self.lib.coil_cuda_attention_last_path.restype = ctypes.c_int32
        self.lib.coil_cuda_attention_last_wgmma.restype = ctypes.c_int32
        self.err = ctypes.create_string_buffer(1024)
        self.ws = torch.empty(workspace_bytes, dtype=torch.uint8, device="cuda")
        dev = torch.cuda.current_device()
        cap = torch.cuda.get_device_capability(dev)
        self.ctx = CudaCtx()
        self.ctx.stream = torch.cuda.current_stream().cuda_stream
        self.ctx.workspace = self.ws.data_ptr()
        self.ctx.workspace_bytes = workspace_bytes
        self.ctx.error = ctypes.cast(self.err, ctypes.c_char_p)
        self.ctx.error_size = len(self.err)
        self.ctx.device_ordinal = dev
        self.ctx.sm_version = cap[0] * 10 + cap[1]

    def attention(self, q, k, v, y, causal, scale, mask=None):
        """q [B, H, Sq, D], k/v [B, Hk, Sk, D], y [B, H, Sq, D] (any strides, last dim 1); mask:
        an additive bf16 mask, [B, Sk] (a key mask: each batch's own keys) or [B, Sq, Sk] (a
        mask row per query), or None."""
        B, H, Sq, D = q.shape
        Hk, Sk = k.shape[1], k.shape[2]
        if mask is None:
            m = (0,) * 6
        elif mask.dim() == 2:
            m = (2, 0, mask.stride(0), 0, 0, mask.stride(1))
        else:
            m = (2, 0, mask.stride(0), 0, mask.stride(1), mask.stride(2))
        rc = self.lib.coil_cuda_attention_bf16(
            ctypes.byref(self.ctx), q.data_ptr(), k.data_ptr(), v.data_ptr(),
            mask.data_ptr() if mask is not None else None, y.data_ptr(),
            B, H, Hk, Sq, Sk, D, D,
            0, q.stride(0), q.stride(1), q.stride(2),
            0, k.stride(0), k.stride(1), k.stride(2),
            0, v.stride(0), v.stride(1), v.stride(2),
            y.stride(0), y.stride(1), y.stride(2),
            *m,
            1 if causal else 0, 0, scale, 0.0)
        if rc != 0:
            raise RuntimeError(self.err.value.decode())

    def last_path(self):
        path = ["none", "plain", "flash", "split"][self.lib.coil_cuda_attention_last_path()]
        return path + (" wgmma" if self.lib.coil_cuda_attention_last_wgmma() else "")


def time_median(fn, iters, warmup, flush):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        flush.zero_()  # evicts L2
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3)
    return statistics.median(times), min(times), max(times)


def reference(q, k, v, causal, scale, mask=None):
    """float32 attention on upcast inputs, chunked over the batch (mask: additive, [B, Sk] or
    [B, Sq, Sk])."""
    H, Hk = q.shape[1], k.shape[1]
    out = []
    for b in range(q.shape[0]):
        qb, kb, vb = q[b].float(), k[b].float(), v[b].float()
        if Hk != H:
            kb = kb.repeat_interleave(H // Hk, dim=0)
            vb = vb.repeat_interleave(H // Hk, dim=0)
        s = torch.matmul(qb, kb.transpose(-1, -2)) * scale
        if mask is not None:
            s += mask[b].float()
        if causal:
            Sq, Sk = s.shape[-2], s.shape[-1]
            above = torch.ones(Sq, Sk, dtype=torch.bool, device=s.device).triu(1)
            s.masked_fill_(above, float("-inf"))
        out.append(torch.matmul(torch.softmax(s, dim=-1), vb))
    return torch.stack(out)


def rel_err(got, ref):
    if not torch.isfinite(got).all():
        return float("nan")
    return ((got.float() - ref).abs().max() / ref.abs().max()).item()


# name, batch, heads, kv heads, query length, key length, head dim, causal[, padding mask]
PROBLEMS = [
    ("prefill", 8, 16, 16, 2048, 2048, 128, False),
    ("prefill causal", 8, 16, 16, 2048, 2048, 128, True),
    ("decode GQA 32/8", 16, 32, 8, 1, 4096, 128, False),
    ("bert D64", 8, 12, 12, 512, 512, 64, False),
    ("vit D64", 16, 12, 12, 197, 197, 64, False),
    ("long D64", 4, 16, 16, 4096, 4096, 64, False),
    # BERT's shape with a padding mask (additive, [B, Sk]: batch b keeps its first
    # Sk - 48 b keys), as Hugging Face BERT passes one; the masked (general) kernels.
    ("bert D64 mask", 8, 12, 12, 512, 512, 64, False, "pad"),
    # Llama-sized heads (head dim 128, 1024 keys), without and with the same kind of mask.
    ("llama D128", 4, 16, 16, 1024, 1024, 128, False),
    ("llama D128 mask", 4, 16, 16, 1024, 1024, 128, False, "pad"),
    # The same padding as a mask row per query ([B, Sq, Sk], as a decoder's combined mask
    # arrives): the kernels cannot share one row across a block.
    ("bert D64 row mask", 8, 12, 12, 512, 512, 64, False, "rows"),
    ("llama D128 row mask", 4, 16, 16, 1024, 1024, 128, False, "rows"),
    # A key mask over more keys than the kernel takes as accumulator biases (2048).
    ("long D64 mask", 4, 16, 16, 4096, 4096, 64, False, "pad"),
]


def padding_mask(B, Sk, problem=None):
    """Batch b keeps its first Sk - 48 b keys: [B, Sk], or [B, Sq, Sk] for a "rows" problem."""
    keep = torch.arange(Sk, device="cuda")[None, :] < (Sk - 48 * torch.arange(B, device="cuda"))[:, None]
    m = torch.where(keep, 0.0, float("-inf")).to(torch.bfloat16)
    if problem is not None and problem[8] == "rows":
        m = m[:, None, :].expand(B, problem[4], Sk).contiguous()
    return m


def sdpa_mask(mask):
    """The mask as SDPA takes it, [B, 1, 1 or Sq, Sk]."""
    if mask is None:
        return None
    return mask[:, None, None, :] if mask.dim() == 2 else mask[:, None, :, :]


def torch_cudnn(q, k, v, causal, scale, mask=None):
    gqa = q.shape[1] != k.shape[1]
    am = sdpa_mask(mask)
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=am, is_causal=causal, scale=scale,
                                              enable_gqa=gqa)


def torch_flash(q, k, v, causal, scale, mask=None):
    """PyTorch's flash SDPA; with a mask (which flash does not take), its memory-efficient one."""
    gqa = q.shape[1] != k.shape[1]
    am = sdpa_mask(mask)
    backend = SDPBackend.EFFICIENT_ATTENTION if mask is not None else SDPBackend.FLASH_ATTENTION
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=am, is_causal=causal, scale=scale,
                                              enable_gqa=gqa)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build/lib/libcoil_cuda.so")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--variants", action="store_true")
    ap.add_argument("--problems", default="prefill,prefill causal,decode GQA 32/8",
                    help="comma-separated names from: " + ", ".join(p[0] for p in PROBLEMS))
    ap.add_argument("--json")
    ap.add_argument("--profile", metavar="CONFIG",
                    help="only run coil (COIL_CUDA_ATTN_CONFIG=CONFIG, '-' for the default) on each "
                         "problem 3 times, for a profiler")
    args = ap.parse_args()
    if args.profile:
        if args.profile != "-":
            os.environ["COIL_CUDA_ATTN_CONFIG"] = args.profile
        coil = Coil(args.lib)
        known = {p[0]: p for p in PROBLEMS}
        for name in args.problems.split(","):
            _, B, H, Hk, Sq, Sk, D, causal = known[name][:8]
            mask = padding_mask(B, Sk, known[name]) if len(known[name]) > 8 else None
            q = torch.randn(B, H, Sq, D, device="cuda", dtype=torch.bfloat16)
            k, v = (torch.randn(B, Hk, Sk, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
            y = torch.empty_like(q)
            for _ in range(3):
                coil.attention(q, k, v, y, causal, 1 / math.sqrt(D), mask)
        torch.cuda.synchronize()
        return 0

    torch.manual_seed(0)
    coil = Coil(args.lib)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    dev = torch.cuda.get_device_name()
    print(f"device: {dev}, torch {torch.__version__}", flush=True)

    known = {p[0]: p for p in PROBLEMS}
    unknown = [n for n in args.problems.split(",") if n not in known]
    if unknown:
        print("unknown problem(s): " + ", ".join(unknown) + "; known: " + ", ".join(known))
        return 2
    problems = [known[n] for n in args.problems.split(",")]
    variants = [("coil", None)]
    if args.variants:
        # COIL_CUDA_ATTN_CONFIG: the default (on sm_90 the warp-specialized TMA kernel), the
        # wgmma kernel with two warpgroups and one; the warp-specialized TMA kernel (64-key tiles,
        # 128 at head dim 64, 64 with ping-pong warpgroups; the first two also with one consumer
        # warpgroup, two blocks an SM; each also on a persistent grid); mma.sync with 32 and 16
        # rows per warp.
        variants += [("coil wg2", "e"), ("coil wg1", "f"),
                     ("coil ws64", "g"), ("coil ws128", "h"), ("coil ws64pp", "i"),
                     ("coil ws64 persistent", "j"), ("coil ws128 persistent", "k"),
                     ("coil ws64pp persistent", "l"),
                     ("coil ws64 1wg", "m"), ("coil ws128 1wg", "n"),
                     ("coil ws64 1wg persistent", "o"), ("coil ws128 1wg persistent", "p"),
                     ("coil mma32", "b"), ("coil mma32n32", "c"), ("coil mma16", "a"),
                     ("coil mma16w8", "d")]
    rows = []
    for problem in problems:
        name, B, H, Hk, Sq, Sk, D, causal = problem[:8]
        q = torch.randn(B, H, Sq, D, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(B, Hk, Sk, D, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(B, Hk, Sk, D, device="cuda", dtype=torch.bfloat16)
        scale = 1 / math.sqrt(D)
        mask = padding_mask(B, Sk, problem) if len(problem) > 8 else None
        # FLOPs of the whole score matrix (masked keys included, as every kernel computes them).
        flops = 4 * B * H * Sq * Sk * D * (0.5 if causal else 1.0)
        ref = reference(q, k, v, causal, scale, mask)
        row = {"problem": name, "shape": [B, H, Hk, Sq, Sk, D], "causal": causal, "flops": flops}
        try:
            yt = torch_flash(q, k, v, causal, scale, mask)
            row["torch_err"] = rel_err(yt, ref)
            t, tmin, tmax = time_median(lambda: torch_flash(q, k, v, causal, scale, mask), args.iters,
                                        args.warmup, flush)
            row["torch_s"] = t
            row["torch_tflops"] = flops / t / 1e12
        except Exception as e:  # noqa: BLE001
            row["torch_error"] = str(e)
        try:  # cuDNN's fused attention: what torch.compile dispatches SDPA to on Hopper
            yc = torch_cudnn(q, k, v, causal, scale, mask)
            row["cudnn_err"] = rel_err(yc, ref)
            t, _, _ = time_median(lambda: torch_cudnn(q, k, v, causal, scale, mask), args.iters,
                                  args.warmup, flush)
            row["cudnn_s"] = t
            row["cudnn_tflops"] = flops / t / 1e12
        except Exception as e:  # noqa: BLE001
            row["cudnn_error"] = str(e)
        for vname, cfg in variants:
            if cfg:
                os.environ["COIL_CUDA_ATTN_CONFIG"] = cfg
            else:
                os.environ.pop("COIL_CUDA_ATTN_CONFIG", None)
            y = torch.full_like(q, float("nan"))
            coil.attention(q, k, v, y, causal, scale, mask)
            torch.cuda.synchronize()
            r = {"path": coil.last_path(), "err": rel_err(y, ref)}
            t, tmin, tmax = time_median(lambda: coil.attention(q, k, v, y, causal, scale, mask),
                                        args.iters, args.warmup, flush)
            r["s"], r["min_s"], r["max_s"] = t, tmin, tmax
            r["tflops"] = flops / t / 1e12
            if "torch_tflops" in row:
                r["ratio"] = r["tflops"] / row["torch_tflops"]
            row[vname] = r
        os.environ.pop("COIL_CUDA_ATTN_CONFIG", None)
        rows.append(row)
        print(json.dumps(row), flush=True)
        del q, k, v, ref
        torch.cuda.empty_cache()

    print()
    print(f"| problem | PyTorch flash TFLOP/s (ms) | cuDNN TFLOP/s (ms) | " +
          " | ".join(f"{v} TFLOP/s (ms) | {v} / PyTorch" for v, _ in variants) + " | max rel err torch / coil |")
    print("|---|---|---|" + "---|---|" * len(variants) + "---|")
    for r in rows:
        tt = (f"{r['torch_tflops']:.1f} ({r['torch_s'] * 1e3:.3f})" if "torch_tflops" in r
              else "error: " + r.get("torch_error", "?")[:60])
        cells = [f"{r['cudnn_tflops']:.1f} ({r['cudnn_s'] * 1e3:.3f})" if "cudnn_tflops" in r
                 else "error: " + r.get("cudnn_error", "?")[:60]]
        errs = [f"{r.get('torch_err', float('nan')):.1e}"]
        for v, _ in variants:
            c = r[v]
            cells.append(f"{c['tflops']:.1f} ({c['s'] * 1e3:.3f}) [{c['path']}]")
            cells.append(f"{c['ratio']:.2f}x" if "ratio" in c else "-")
            errs.append(f"{c['err']:.1e}")
        print(f"| {r['problem']} | {tt} | " + " | ".join(cells) + " | " + " / ".join(errs) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": dev, "torch": torch.__version__, "rows": rows}, f, indent=1)
    bad = [r["problem"] for r in rows for v, _ in variants if not r[v]["err"] <= 1e-2]
    if bad:
        print("coil output wrong for: " + ", ".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
