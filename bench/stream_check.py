#!/usr/bin/env python3
"""coil.compile from PyTorch on the GPU: a compiled module called with CUDA tensors on the legacy
default stream against the same calls on a caller stream, in one run (issue 17).

The module is issue 17's measurement, layer norm in bf16 over 16384 x 4096 (--rows/--cols
change it), compiled in-process with coil.compile(torch module, device="cuda"). Checks, each
PASS or FAIL (exit 1 on a FAIL):
  - outputs are torch tensors on the inputs' device, bf16, within 1e-2 of torch's layer norm;
  - a call enqueues without synchronizing the host, on the default stream and on a caller
    stream: behind a GPU sleep of --sleep-ms on that stream, the call returns in a fraction of
    it, and its input, written on that stream after the sleep (the buffer is NaN before), gives
    the right output (so coil's work is ordered after the writer on the caller's stream).
Timing (reported, not asserted): per call, median of --rounds rounds of --iters calls each,
between CUDA events on the stream in use, the three ways alternating within each round:
  default   m(x) on the legacy default stream (torch's default)
  caller    m(x) under `with torch.cuda.stream(s)`
  own+sync  the runtime's own stream, synchronized before returning (NULL stream argument:
            what a default-stream call did before this fix), for comparison
and the ratio default / caller (1.00 means as fast).

usage: PYTHONPATH=build-gpu/python LD_LIBRARY_PATH=build-gpu/lib \\
         python3 bench/stream_check.py [--rows 16384] [--cols 4096] [--iters 200] [--rounds 7]
(after scripts/gpu-bundle.sh; needs nvcc and a C++ compiler for the compile)
"""
import argparse
import statistics
import sys
import time

import torch

import coil

FAILED = []


def report(ok, what):
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILED.append(what)


def timed(fn, iters, stream):
    """Per-call milliseconds of `iters` calls of fn() enqueued on `stream` (CUDA events)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        fn()  # the graph of this signature is captured before timing
        torch.cuda.synchronize()
        start.record(stream)
        for _ in range(iters):
            y = fn()
        end.record(stream)
    torch.cuda.synchronize()
    del y
    return start.elapsed_time(end) / iters


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--sleep-ms", type=float, default=200.0)
    ap.add_argument("--work", default=None, help="keep the package here (default: temporary)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("stream_check: no CUDA device")
        return 77

    torch.manual_seed(0)
    net = torch.nn.LayerNorm(args.cols).to(torch.bfloat16).eval()
    with torch.no_grad():
        net.weight.copy_(torch.randn(args.cols))
        net.bias.copy_(torch.randn(args.cols))
    example = torch.randn(8, args.cols, dtype=torch.bfloat16)
    t0 = time.perf_counter()
    m = coil.compile(net, example_inputs=(example,), device="cuda", output=args.work,
                     dynamic={"x": {0: ("rows", 1, max(args.rows, 8))}}, input_names=["x"],
                     verbose=True)
    print(f"compiled in {time.perf_counter() - t0:.1f} s: {m}", flush=True)
    dev = torch.device("cuda")
    net = net.to(dev)
    x = torch.randn(args.rows, args.cols, device=dev, dtype=torch.bfloat16)
    with torch.no_grad():
        want = net(x).float()

    def close(y):
        return float((y.float() - want).norm() / want.norm())

    y = m(x)
    report(isinstance(y, torch.Tensor) and y.device == x.device and y.dtype == torch.bfloat16,
           f"output is a torch tensor: {type(y).__name__} {getattr(y, 'device', '?')} "
           f"{getattr(y, 'dtype', '?')}")
    err = close(y)
    report(err <= 1e-2, f"output matches torch's layer norm: relative error {err:.2e}")

    # Enqueue, no host synchronization: behind a GPU sleep on the stream in use.
    # torch.cuda._sleep spins a number of cycles: calibrate it to --sleep-ms.
    probe = 10_000_000
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    torch.cuda._sleep(probe)
    e1.record()
    torch.cuda.synchronize()
    cycles = int(probe * args.sleep_ms / max(e0.elapsed_time(e1), 1e-3))
    side = torch.cuda.Stream()
    for name, stream in (("default stream", torch.cuda.default_stream()), ("caller stream", side)):
        buf = torch.full_like(x, float("nan"))
        torch.cuda.synchronize()
        with torch.cuda.stream(stream):
            torch.cuda._sleep(cycles)
            buf.copy_(x)  # written after the sleep, on this stream
            h0 = time.perf_counter()
            out = m(buf)
            host_ms = (time.perf_counter() - h0) * 1e3
        torch.cuda.synchronize()
        report(host_ms < args.sleep_ms / 4,
               f"{name}: the call returned after {host_ms:.2f} ms of a {args.sleep_ms:.0f} ms "
               "GPU sleep (enqueued, the host not synchronized)")
        err = close(out)
        report(err <= 1e-2, f"{name}: the input written after the sleep gives the right output "
                            f"(relative error {err:.2e}: ordered on the stream)")

    # Timing: the three ways alternate within each round.
    def own_sync():  # NULL stream: the runtime's own stream, synchronized (the old default path)
        return m._m.run([x.__dlpack__(stream=1)], True, 0)

    ways = {"default": (lambda: m(x), torch.cuda.default_stream()),
            "caller": (lambda: m(x), side),
            "own+sync": (own_sync, torch.cuda.default_stream())}
    times = {k: [] for k in ways}
    for _ in range(args.rounds):
        for k, (fn, stream) in ways.items():
            times[k].append(timed(fn, args.iters, stream))
    print(f"\nlayer norm bf16 {args.rows} x {args.cols}, {args.rounds} rounds of {args.iters} "
          f"calls on {torch.cuda.get_device_name(dev)}:")
    print("| way | median ms/call | min | max |")
    print("|---|---|---|---|")
    med = {}
    for k, ts in times.items():
        med[k] = statistics.median(ts)
        print(f"| {k} | {med[k]:.4f} | {min(ts):.4f} | {max(ts):.4f} |")
    print(f"\ndefault / caller = {med['default'] / med['caller']:.3f}; "
          f"own+sync / caller = {med['own+sync'] / med['caller']:.3f}")
    if FAILED:
        print(f"\n{len(FAILED)} checks failed")
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
