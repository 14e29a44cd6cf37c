#!/usr/bin/env python3
"""Per-kernel GPU time of coil, PyTorch eager and torch.compile on bench workloads, for
performance work (not a benchmark: no L2 flush, profiler overhead included).

  python3 bench/gpu_kernel_profile.py --coil build/bin/coil --runtime build/lib/libcoil_runtime.so \
      --workloads softmax,mlp,resnet50 [--iters 20] [--top 15] [--coil-args '--arch sm_90a']

For each workload: exports it to ONNX, compiles it with coil for CUDA, then runs each system
`--iters` times under torch.profiler (CUPTI) and prints, per system, the GPU kernel time per
iteration and the kernels that take the most of it. coil runs with CUDA graphs off
(COIL_CUDA_GRAPHS=0) so every launch is attributed to its kernel."""
import argparse
import collections
import json
import os
import shlex
import subprocess
import sys

os.environ.setdefault("COIL_CUDA_GRAPHS", "0")

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import coilrt  # noqa: E402
import gpu_workloads  # noqa: E402

DT = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "i64": "int64", "i32": "int32"}


def profile(fn, iters):
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    per = collections.defaultdict(lambda: [0.0, 0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            k = per[e.name]
            k[0] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
            k[1] += 1
    return per


def report(label, per, iters, top):
    total = sum(v[0] for v in per.values()) / iters
    launches = sum(v[1] for v in per.values()) / iters
    print("  %-8s %9.1f us/iter in %5.0f launches" % (label, total, launches))
    for name, (us, n) in sorted(per.items(), key=lambda kv: -kv[1][0])[:top]:
        print("      %8.1f us  x%-5g %s" % (us / iters, n / iters, name[:150]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coil", required=True)
    ap.add_argument("--runtime", required=True)
    ap.add_argument("--workloads", default="softmax,mlp,resnet50")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--work", default="/tmp/coil-kprof")
    ap.add_argument("--coil-args", default="")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rt = coilrt.Runtime(args.runtime)
    for name in args.workloads.split(","):
        w = gpu_workloads.BY_NAME[name]
        module, inputs, in_names, out_names, _ = w.build(False, "cuda")
        onnx_path = os.path.join(args.work, name + ".onnx")
        pkg = os.path.join(args.work, name + ".pkg")
        # The exporter gpu_bench uses for this workload (the TorchScript exporter computes causal
        # SDPA in f32: profiling that graph would time other kernels than the benchmark).
        exporter, _ = gpu_workloads.export_onnx(module, inputs, in_names, out_names, onnx_path,
                                                exporter=w.exporter or "auto")
        r = subprocess.run([args.coil, "compile", onnx_path, "-o", pkg, "--device", "cuda"] +
                           shlex.split(args.coil_args), capture_output=True, text=True)
        print("== %s (%s, %s exporter): coil compile exit %d, %d kernels" % (
            name, w.desc, exporter, r.returncode, len(r.stdout.split())))
        if r.returncode:
            print(r.stderr[-2000:])
            continue
        with torch.no_grad():
            report("eager", profile(lambda: module(*inputs), args.iters), args.iters, args.top)
            if not args.no_compile:
                cm = torch.compile(module)
                for _ in range(3):
                    cm(*inputs)
                report("compile", profile(lambda: cm(*inputs), args.iters), args.iters, args.top)
            meta = json.load(open(os.path.join(pkg, "metadata.json")))
            outs = [torch.empty([int(d) for d in t["shape"]], device="cuda",
                                dtype=getattr(torch, DT[t["dtype"]])) for t in meta["outputs"]]
            ins = [x.contiguous() for x in inputs]
            with rt.load(pkg) as model:
                call = model.device_call(
                    [(x.data_ptr(), DT[t["dtype"]], tuple(x.shape)) for x, t in zip(ins, meta["inputs"])],
                    [(o.data_ptr(), o.numel() * o.element_size()) for o in outs])
                stream = torch.cuda.current_stream().cuda_stream
                report("coil", profile(lambda: call(stream), args.iters), args.iters, args.top)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
