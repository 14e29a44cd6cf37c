"""Copies package SRC to DST with one kernel broken, then rebuilds DST/model.so.

usage: corrupt_kernel.py SRC DST KERNEL INCLUDE_DIR

Every config of KERNEL (`KERNEL_c<i>` in src/kernels.cpp) gets, just before it returns, a
statement that changes element 1 of the first buffer it writes (metadata.json tells which).
The rest of the package is untouched (its integrity record is resealed for the new model.so
by scripts/reseal_package.py), so `coil verify --package DST` must name KERNEL.
"""
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "scripts"))
from reseal_package import reseal  # noqa: E402


def main():
    src, dst, kernel, include = sys.argv[1:5]
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    meta = json.load(open(os.path.join(dst, "metadata.json")))
    info = next(k for k in meta["kernels"] if k["name"] == kernel)
    out = next(p["name"] for p in info["params"] if p["kind"] == "buffer" and p["written"])
    path = os.path.join(dst, "src", "kernels.cpp")
    text = open(path).read()
    count = 0
    for m in reversed(list(re.finditer(r'extern "C" void %s_c\d+\(([^)]*)\) \{' % re.escape(kernel), text))):
        # The C name of the written buffer parameter: the params follow metadata order.
        cparams = [p.strip() for p in m.group(1).split(",")]
        index = [p["name"] for p in info["params"]].index(out)
        cname = re.split(r"[ *]+", cparams[index])[-1]
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        body_end = i - 1  # the function's closing brace
        text = text[:body_end] + "  %s[1] += 1;\n" % cname + text[body_end:]
        count += 1
    if not count:
        sys.exit("no definition of %s in %s" % (kernel, path))
    open(path, "w").write(text)
    flags = ["-std=c++17", "-fPIC", "-fopenmp", "-O1", "-w", "-I", include]
    objs = []
    for name in ("kernels.cpp", "wrapper.cpp"):
        obj = os.path.join(dst, name + ".o")
        subprocess.check_call(["c++"] + flags + ["-c", os.path.join(dst, "src", name), "-o", obj])
        objs.append(obj)
    subprocess.check_call(["c++", "-shared", "-fopenmp"] + objs + ["-o", os.path.join(dst, "model.so")])
    reseal(dst)


if __name__ == "__main__":
    main()
