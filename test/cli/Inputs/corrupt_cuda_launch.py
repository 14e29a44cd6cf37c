"""Copies CUDA package SRC to DST with one kernel's result broken, then rebuilds DST/model.so.

usage: corrupt_cuda_launch.py SRC DST KERNEL INCLUDE_DIR

Every host launcher of KERNEL (`KERNEL_c<i>` in src/launchers.cpp) enqueues, right after the
kernel on the run's stream, a cuMemsetD32Async that sets element 1 of the first buffer the
kernel writes to 12345.0f: deterministic (stream order), and the device code is untouched. The
package is resealed (scripts/reseal_package.py), so `coil verify --package DST --kernels` must
name KERNEL as the first diverging launch. For the GPU machine (scripts/gpu-printer-check.sh).
"""
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "scripts"))
from reseal_package import reseal  # noqa: E402


def cuda_root():
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    return os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))


def main():
    src, dst, kernel, include = sys.argv[1:5]
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    meta = json.load(open(os.path.join(dst, "metadata.json")))
    info = next(k for k in meta["kernels"] if k["name"] == kernel)
    out = next(p["name"] for p in info["params"] if p["kind"] == "buffer" and p["written"])
    path = os.path.join(dst, "src", "launchers.cpp")
    text = open(path).read()
    count = 0
    pattern = r'(extern "C" int32_t %s_c\d+\(([^)]*)\) \{.*?)(  return (coil_launch\([^;]*\));\n\})' % re.escape(kernel)
    def inject(m):
        nonlocal count
        cparams = [p.strip() for p in m.group(2).split(",")][1:]  # after the ctx
        index = [p["name"] for p in info["params"]].index(out)
        cname = re.split(r"[ *]+", cparams[index])[-1]
        count += 1
        return (m.group(1) + "  if (int32_t rc = %s) return rc;\n"
                "  return cuMemsetD32Async((CUdeviceptr)(%s + 1), 0x4640e400u /* 12345.0f */, 1,\n"
                "                          (CUstream)ctx->stream) == CUDA_SUCCESS ? 0 : 1;\n}" % (m.group(4), cname))
    text = re.sub(pattern, inject, text, flags=re.S)
    if not count:
        sys.exit("no launcher of %s in %s" % (kernel, path))
    open(path, "w").write(text)
    root = cuda_root()
    flags = ["-std=c++17", "-fPIC", "-O1", "-w", "-I", include, "-isystem", os.path.join(root, "include")]
    objs = []
    for name in ("launchers.cpp", "wrapper.cpp"):
        obj = os.path.join(dst, name + ".o")
        subprocess.check_call(["c++"] + flags + ["-c", os.path.join(dst, "src", name), "-o", obj])
        objs.append(obj)
    stubs = next(d for d in (os.path.join(root, s) for s in ("lib64/stubs", "targets/x86_64-linux/lib/stubs", "lib/stubs"))
                 if os.path.exists(os.path.join(d, "libcuda.so")))
    subprocess.check_call(["c++", "-shared"] + objs + ["-L", stubs, "-lcuda", "-o", os.path.join(dst, "model.so")])
    reseal(dst)
    print("%s: %d launcher(s) of %s corrupted" % (dst, count, kernel))


if __name__ == "__main__":
    main()
