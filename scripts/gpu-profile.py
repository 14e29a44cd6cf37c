#!/usr/bin/env python3
"""Times coil CUDA packages on the GPU, for performance work: per package, the median time of
one coil_model_run_device call between CUDA events (L2 not flushed), and, with --ncu under
Nsight Compute, each kernel's duration and memory throughput.

  python3 scripts/gpu-profile.py --runtime build/lib/libcoil_runtime.so PKG... [--iters 50]
  ncu --section SpeedOfLight python3 scripts/gpu-profile.py --runtime ... PKG --iters 1

Inputs are random torch tensors of the package's input signature; every dim must be a number
(packages compiled without --dynamic)."""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import coilrt  # noqa: E402

# metadata.json dtype names -> (torch dtype, coil_dtype name of coilrt)
DTYPES = {"f32": (torch.float32, "float32"), "f16": (torch.float16, "float16"),
          "bf16": (torch.bfloat16, "bfloat16"), "f64": (torch.float64, "float64"),
          "i64": (torch.int64, "int64"), "i32": (torch.int32, "int32"), "bool": (torch.bool, "bool")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runtime", required=True)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("pkgs", nargs="+")
    args = ap.parse_args()
    rt = coilrt.Runtime(args.runtime)
    stream = torch.cuda.Stream()
    for pkg in args.pkgs:
        meta = json.load(open(os.path.join(pkg, "metadata.json")))
        with rt.load(pkg) as model:
            ins, outs = [], []
            for t in meta["inputs"]:
                dt = DTYPES[t["dtype"]][0]
                shape = [int(d) for d in t["shape"]]
                x = torch.randn(shape, device="cuda") if dt.is_floating_point else torch.randint(0, 3, shape, device="cuda")
                ins.append(x.to(dt))
            for t in meta["outputs"]:
                outs.append(torch.empty([int(d) for d in t["shape"]], device="cuda", dtype=DTYPES[t["dtype"]][0]))
            call = model.device_call(
                [(x.data_ptr(), DTYPES[t["dtype"]][1], tuple(x.shape)) for x, t in zip(ins, meta["inputs"])],
                [(o.data_ptr(), o.numel() * o.element_size()) for o in outs])
            with torch.cuda.stream(stream):
                h = stream.cuda_stream
                for _ in range(3):
                    call(h)
                torch.cuda.synchronize()
                times = []
                for _ in range(args.iters):
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record(stream)
                    call(h)
                    b.record(stream)
                    b.synchronize()
                    times.append(a.elapsed_time(b))
            times.sort()
            moved = sum(x.numel() * x.element_size() for x in ins + outs)
            med = times[len(times) // 2]
            print("%s: median %.4f ms, min %.4f ms, %.0f GB/s (inputs + outputs once), kernels %s" % (
                os.path.basename(pkg.rstrip("/")), med, times[0], moved / med / 1e6,
                " ".join(k["name"] for k in meta["kernels"])))


if __name__ == "__main__":
    main()
