#!/usr/bin/env python3
"""Runs `coil compile ARGS...` with COIL_NVCC set to an nvcc that crashes (SIGSEGV) unless it is
given -Xcicc (coil's retry after a compiler crash), in a copy of the CUDA toolkit's layout whose
other parts link to the real one. Prints coil's stderr; exits with coil's status.

usage: crashing_nvcc.py [--always] WORKDIR COIL ARGS...
  --always: the nvcc crashes with -Xcicc too."""
import os
import shutil
import subprocess
import sys

argv = sys.argv[1:]
always = bool(argv) and argv[0] == "--always"
if always:
    argv = argv[1:]
work, coil, args = argv[0], argv[1], argv[2:]
real = os.environ.get("COIL_NVCC") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
real = os.path.realpath(real)
root = os.path.dirname(os.path.dirname(real))
kit = os.path.join(work, "cuda")
shutil.rmtree(kit, ignore_errors=True)
os.makedirs(os.path.join(kit, "bin"))
for entry in os.listdir(root):
    if entry != "bin":
        os.symlink(os.path.join(root, entry), os.path.join(kit, entry))
fake = os.path.join(kit, "bin", "nvcc")
with open(fake, "w") as f:
    f.write("#!/bin/sh\n"
            "# Crash as cicc did (exit 139), unless coil retries with -Xcicc.\n"
            "case \" $* \" in %s*' --version '*) exec %s \"$@\";; esac\n"
            "echo 'Segmentation fault' >&2\n"
            "exit 139\n" % ("" if always else "*' -Xcicc '*|", real))
os.chmod(fake, 0o755)
env = dict(os.environ, COIL_NVCC=fake, COIL_CACHE_DIR=os.path.join(work, "cache"))
r = subprocess.run([coil] + args, env=env, stderr=subprocess.PIPE, text=True)
sys.stderr.write(r.stderr)
sys.exit(r.returncode)
