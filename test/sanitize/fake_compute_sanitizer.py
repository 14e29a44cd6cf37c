#!/usr/bin/env python3
"""A stand-in for compute-sanitizer, to test scripts/sanitize-gpu.py on a machine without a GPU
(with --device cpu). Not a sanitizer: it runs the command and passes its output through, and
when the command runs a package whose path or batch marker matches FAKE_SANITIZER_BROKEN (a
regex, default 'broken-TOOL') it prints an error report in compute-sanitizer's format for that
package and exits with the --error-exitcode. A package matching FAKE_SANITIZER_HANG makes it
hang (a sanitized run that never ends).

usage: fake_compute_sanitizer.py --tool TOOL --error-exitcode N [other flags] COMMAND...
"""
import os
import re
import subprocess
import sys
import time

args = sys.argv[1:]
tool, code = "memcheck", 0
while args and args[0].startswith("--"):
    flag = args.pop(0)
    if flag == "--tool":
        tool = args.pop(0)
    elif flag == "--error-exitcode":
        code = int(args.pop(0))
    elif args and not args[0].startswith("-"):
        args.pop(0)
broken = re.compile(os.environ.get("FAKE_SANITIZER_BROKEN", "broken-" + tool))
hang = re.compile(os.environ["FAKE_SANITIZER_HANG"]) if os.environ.get("FAKE_SANITIZER_HANG") else None
REPORT = {
    "memcheck": ["========= Invalid __global__ write of size 4 bytes",
                 "=========     at k0_relu_c0_kernel+0x80",
                 "=========     by thread (0,0,0) in block (0,0,0)",
                 "=========     Address 0x10 is out of bounds"],
    "racecheck": ["========= Error: Race reported between Write access at k0_relu_c0_kernel+0x40",
                  "=========     and Write access at k0_relu_c0_kernel+0x40 [248 hazards]"],
}[tool]
print("========= COMPUTE-SANITIZER", flush=True)
errors = 0
p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
if any(broken.search(a[:-len("/pkg")]) for a in args if a.endswith("/pkg")):  # a single `coil run DIR/pkg`
    print("\n".join(REPORT), flush=True)
    errors += 1
if hang and any(hang.search(a[:-len("/pkg")]) for a in args if a.endswith("/pkg")):
    time.sleep(3600)
for line in p.stdout:
    sys.stdout.write(line)
    sys.stdout.flush()
    if line.startswith("@@coil-sanitize begin ") and hang and hang.search(line):
        time.sleep(3600)
    if line.startswith("@@coil-sanitize begin ") and broken.search(line):
        print("\n".join(REPORT), flush=True)
        errors += 1
rc = p.wait()
if tool == "racecheck":
    print("========= RACECHECK SUMMARY: %d hazards displayed (%d errors, 0 warnings)" % (errors, errors))
else:
    print("========= ERROR SUMMARY: %d errors" % errors)
sys.exit(code if errors and code else rc)
