#!/usr/bin/env python3
"""Portable packages (ctest `portable`, label package):
  - --cpu-target x86-64-v2: metadata.json records it, and model.so holds no AVX, AVX2 or
    AVX-512 instruction (no ymm or zmm register in objdump's disassembly), while a package built
    for x86-64-v3 does (so the check can fail); --cpu-target native records this CPU's level and
    extensions;
  - the default target is x86-64-v2 with, on a CPU above that level, a copy of the kernels for
    its level (metadata.json "cpu_clones"): every function of model.so but those copies is free
    of ymm and zmm registers, each kernel entry is an ifunc, the copies hold vector registers
    and the outputs equal the x86-64-v2 package's;
  - no build leftovers (obj/) in a package;
  - on an emulated x86-64-v2 CPU (QEMU user mode, Nehalem; skipped with a message without
    qemu-x86_64), the default package runs and gives the same outputs, and the x86-64-v3 one is
    refused at load with a clear error (exit 1); without QEMU, the same refusal is provoked by
    recording an extension this CPU lacks, when it lacks one;
  - `coil pack` writes one archive that `coil run` and coil.load run as they are; a damaged
    archive is refused (CRC-32), a compressed one too.
Usage: check_portable.py --coil build/bin/coil --work DIR   (PYTHONPATH must hold build/python)
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from reseal_package import SEPARATOR, reseal  # noqa: E402


def edit_metadata(pkg, change):
    """Applies `change` to metadata.json's body and reseals it (as a newer coil writing that
    field would), so that the runtime reads the field instead of stopping at the integrity
    check."""
    path = os.path.join(pkg, "metadata.json")
    text = open(path, encoding="utf-8").read()
    at = text.rfind(SEPARATOR)
    meta = json.loads(text[:at] + "\n}\n")
    change(meta)
    head = json.dumps(meta, indent=2)
    assert head.endswith("\n}")
    open(path, "w", encoding="utf-8").write(head[:-2] + text[at:])
    reseal(pkg, body=True)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MLP = os.path.join(ROOT, "examples", "mlp.onnx")
INPUTS = os.path.join(ROOT, "examples", "mlp_inputs.npz")
FAILED = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILED.append(what)


def run(cmd, env=None, expect=0):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                       timeout=900)
    if expect is not None and p.returncode != expect:
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}, want {expect}\n{p.stdout}\n"
                         f"{p.stderr}")
    return p


def vector_registers(so):
    text = run(["objdump", "-d", "--no-show-raw-insn", so]).stdout
    return len(re.findall(r"%[yz]mm\d+", text))


def function_registers(so):
    """ymm/zmm registers per function of objdump's disassembly."""
    counts, name = {}, None
    for line in run(["objdump", "-d", "--no-show-raw-insn", so]).stdout.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if m:
            name = m.group(1)
            counts.setdefault(name, 0)
        elif name:
            counts[name] += len(re.findall(r"%[yz]mm\d+", line))
    return counts


def outputs(coil, pkg, work, name, prefix=(), env=None):
    out = os.path.join(work, name + ".npz")
    run(list(prefix) + [coil, "run", pkg, "--inputs", INPUTS, "--outputs", out], env=env)
    return np.load(out)["probs"]


def qemu_stderr(p):
    return "\n".join(l for l in p.stderr.splitlines() if "TCG doesn't support" not in l)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--coil", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    coil, work = os.path.abspath(args.coil), os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ, COIL_CACHE_DIR=os.path.join(work, "cache"))

    pkgs = {}
    for target in ("default", "x86-64-v2", "x86-64-v3", "native"):
        pkg = os.path.join(work, f"mlp-{target}.pkg")
        extra = [] if target == "default" else ["--cpu-target", target]
        run([coil, "compile", MLP, "-o", pkg] + extra, env=env)
        pkgs[target] = pkg
        meta = json.load(open(os.path.join(pkg, "metadata.json")))
        want = {"default": "x86-64-v2", "x86-64-v2": "x86-64-v2", "x86-64-v3": "x86-64-v3"}.get(target)
        if want:
            check(meta.get("cpu_target") == want and meta.get("cpu_features") == [],
                  f"{target}: metadata.json cpu_target {meta.get('cpu_target')!r}, "
                  f"cpu_features {meta.get('cpu_features')!r}")
        else:
            check(meta.get("cpu_target") in ("x86-64-v2", "x86-64-v3", "x86-64-v4"),
                  f"native: metadata.json records this CPU's level {meta.get('cpu_target')!r} and "
                  f"extensions {meta.get('cpu_features')!r}")
        check(sorted(os.listdir(pkg)) == ["metadata.json", "model.so", "src", "weights.bin"],
              f"{target}: the package holds {sorted(os.listdir(pkg))} (no obj/)")
    v2, v3 = (vector_registers(os.path.join(pkgs[t], "model.so")) for t in ("x86-64-v2", "x86-64-v3"))
    check(v2 == 0, f"the x86-64-v2 model.so uses {v2} ymm/zmm registers (want none)")
    check(v3 > 0, f"the x86-64-v3 model.so uses {v3} ymm/zmm registers (the check can fail)")
    want = outputs(coil, pkgs["x86-64-v3"], work, "v3")
    got = outputs(coil, pkgs["x86-64-v2"], work, "v2")
    check(np.allclose(got, want, rtol=1e-5, atol=1e-6), "x86-64-v2 and -v3 packages agree")

    # The default: x86-64-v2, plus a copy of the kernels for this CPU's level above it.
    host = json.load(open(os.path.join(pkgs["native"], "metadata.json")))["cpu_target"]
    meta = json.load(open(os.path.join(pkgs["default"], "metadata.json")))
    clones = [] if host == "x86-64-v2" else [host]
    check(meta.get("cpu_clones", []) == clones,
          f"default: metadata.json cpu_clones {meta.get('cpu_clones')!r}, want {clones!r} on this "
          f"{host} CPU")
    so = os.path.join(pkgs["default"], "model.so")
    per_function = function_registers(so)
    # A copy's functions: its entries (NAME__x86_64_v4) and its helpers (namespace coil_x86_64_v4).
    base = {f: n for f, n in per_function.items() if "x86_64_v3" not in f and "x86_64_v4" not in f}
    check(sum(base.values()) == 0,
          "default: model.so's functions but the level copies use no ymm/zmm register: "
          f"{ {f: n for f, n in base.items() if n} }")
    if clones:
        suffix = "__" + host.replace("-", "_")
        copies = sum(n for f, n in per_function.items() if host.replace("-", "_") in f)
        check(copies > 0, f"default: the {host} copies use {copies} ymm/zmm registers (want some)")
        dyn = run(["nm", "-D", "--defined-only", so]).stdout.split("\n")
        local = run(["nm", "--defined-only", so]).stdout.split("\n")
        entries = [l.split()[-1] for l in dyn if " i " in l]
        check(entries and all(any(l.endswith(" " + e + suffix) for l in local) for e in entries),
              f"default: the kernel entries are ifuncs with {host} copies: {entries}")
        exported = [l.split()[-1] for l in dyn if "__x86_64_v" in l]
        check(not exported, f"default: the level copies are not exported from model.so: {exported}")
    got_default = outputs(coil, pkgs["default"], work, "default")
    check(np.allclose(got_default, got, rtol=1e-5, atol=1e-6),
          "the default package agrees with the x86-64-v2 one")

    qemu = shutil.which("qemu-x86_64")
    if qemu:
        prefix = [qemu, "-cpu", "Nehalem"]  # an x86-64-v2 CPU: SSE4.2, POPCNT, no AVX
        emulated = outputs(coil, pkgs["default"], work, "nehalem", prefix)
        # OpenBLAS picks its SSE kernels there: the same values up to rounding.
        check(np.allclose(emulated, got, rtol=1e-5, atol=1e-7),
              "the default package runs on an emulated x86-64-v2 CPU (QEMU Nehalem), same "
              f"outputs (max abs difference {float(np.max(np.abs(emulated - got))):.2g})")
        p = run(prefix + [coil, "run", pkgs["x86-64-v3"], "--inputs", INPUTS], expect=None)
        msg = qemu_stderr(p)
        check(p.returncode == 1 and "model.so is built for x86-64-v3" in msg and
              "this CPU lacks x86-64-v3 (avx, avx2, fma, bmi, bmi2)" in msg and
              "--cpu-target x86-64-v2" in msg,
              f"the x86-64-v3 package is refused on QEMU Nehalem: exit {p.returncode}: {msg}")
    else:
        print("skip: qemu-x86_64 not installed (apt-get install qemu-user): the emulated "
              "x86-64-v2 CPU checks did not run")
    # The refusal without an emulator: record an extension this CPU lacks, if it lacks one.
    flags = set(open("/proc/cpuinfo").read().split())
    lacking = [f for f, cpuinfo in (("avx512bf16", "avx512_bf16"), ("avx512vp2intersect", None),
                                    ("avx512vnni", "avx512_vnni"), ("gfni", "gfni"))
               if cpuinfo and cpuinfo not in flags]
    if lacking:
        edited = os.path.join(work, "edited.pkg")
        shutil.copytree(pkgs["default"], edited)
        edit_metadata(edited, lambda meta: meta.update(cpu_features=[lacking[0]]))
        p = run([coil, "run", edited, "--inputs", INPUTS], expect=None)
        check(p.returncode == 1 and f"this CPU lacks {lacking[0]}" in p.stderr,
              f"a package recording {lacking[0]}, which this CPU lacks, is refused: {p.stderr.strip()}")
    bad = os.path.join(work, "bad-target.pkg")
    shutil.copytree(pkgs["default"], bad)
    edit_metadata(bad, lambda meta: meta.update(cpu_target="x86-64-v9"))
    p = run([coil, "run", bad, "--inputs", INPUTS], expect=None)
    check(p.returncode == 1 and "'cpu_target' must be" in p.stderr,
          f"an unknown cpu_target is a clear error: {p.stderr.strip()}")

    # coil pack: one archive, run as it is.
    archive = os.path.join(work, "mlp.coil.zip")
    p = run([coil, "pack", pkgs["default"], "-o", archive])
    with zipfile.ZipFile(archive) as z:
        names = z.namelist()
        methods = {i.compress_type for i in z.infolist()}
    check(names[0] == "metadata.json" and "model.so" in names and "weights.bin" in names and
          not any(n.startswith("obj/") for n in names) and methods == {zipfile.ZIP_STORED},
          f"coil pack: stored entries {names}")
    packed = outputs(coil, archive, work, "packed", (), env)
    check(np.array_equal(packed, got_default), "coil run on the archive: the directory's outputs")
    py = run([sys.executable, "-c",
              "import coil, numpy as np, sys; m = coil.load(sys.argv[1]); "
              "x = np.load(sys.argv[2])['x']; np.save(sys.argv[3], m(x))",
              archive, INPUTS, os.path.join(work, "py.npy")], env=env)
    check(np.array_equal(np.load(os.path.join(work, "py.npy")), got_default),
          "coil.load on the archive: the directory's outputs")
    # A damaged archive: one byte of weights.bin flipped (CRC-32). Unpacked archives are cached
    # by their central directory (names, sizes, CRCs), which this one shares with the good one:
    # a fresh cache makes it unpack.
    env = dict(env, COIL_CACHE_DIR=os.path.join(work, "cache-damaged"))
    damaged = os.path.join(work, "damaged.coil.zip")
    data = bytearray(open(archive, "rb").read())
    with zipfile.ZipFile(archive) as z:
        info = z.getinfo("weights.bin")
    at = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra) + 5
    data[at] ^= 0xFF
    open(damaged, "wb").write(bytes(data))
    p = run([coil, "run", damaged, "--inputs", INPUTS], env=env, expect=None)
    check(p.returncode == 1 and "entry 'weights.bin' does not match its CRC-32" in p.stderr,
          f"a damaged archive is refused: {p.stderr.strip()}")
    deflated = os.path.join(work, "deflated.coil.zip")
    with zipfile.ZipFile(archive) as src, zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as d:
        for n in src.namelist():
            d.writestr(n, src.read(n))
    p = run([coil, "run", deflated, "--inputs", INPUTS], env=env, expect=None)
    check(p.returncode == 1 and "is compressed (method 8)" in p.stderr,
          f"a compressed archive is refused: {p.stderr.strip()}")
    print(f"{len(FAILED)} checks failed" if FAILED else "all checks passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
