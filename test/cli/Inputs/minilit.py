#!/usr/bin/env python3
"""A small runner of coil's lit tests for machines without lit and FileCheck (the GPU machine),
parametrized by device. It runs the RUN lines of one test file with bash (pipefail; `not`
inverts a command's status) and checks output with a FileCheck subset: CHECK, CHECK-NEXT,
CHECK-NOT, {{regex}}, [[VAR]] from -DVAR=VALUE, --check-prefix, horizontal whitespace
canonicalized (patterns match within one line).

    minilit.py TEST --coil BIN [--device cuda] [--work DIR] [--python PY]
    minilit.py --filecheck CHECKFILE --check-prefix=P [-DVAR=VALUE ...] < input

--device D replaces, in the RUN lines only, `--device cpu` by `--device D`, `-DDEVICE=cpu` by
`-DDEVICE=D` and `coil_cpu_gemm` by `coil_D_gemm` (the conventions of
test/cli/debug-printer.test). Prints one line per RUN line and a summary; exits 1 on a failure.
"""
import os
import re
import shlex
import subprocess
import sys

SELF = os.path.abspath(__file__)


# ---- FileCheck subset ----------------------------------------------------------------------

def _canon(s):
    return re.sub(r"[ \t]+", " ", s)


def _pattern(text, defs):
    out, i = [], 0
    text = _canon(text.strip())
    while i < len(text):
        if text.startswith("{{", i):
            j = text.index("}}", i + 2)
            out.append("(?:" + text[i + 2:j] + ")")
            i = j + 2
        elif text.startswith("[[", i):
            j = text.index("]]", i + 2)
            name = text[i + 2:j]
            if name not in defs:
                raise SystemExit(f"FileCheck: undefined variable [[{name}]]")
            out.append(re.escape(defs[name]))
            i = j + 2
        else:
            j = min([k for k in (text.find("{{", i), text.find("[[", i)) if k >= 0] or [len(text)])
            out.append(re.escape(text[i:j]))
            i = j
    return re.compile("".join(out))


def filecheck(argv):
    check_file, prefix, defs = None, "CHECK", {}
    for a in argv:
        if a.startswith("--check-prefix="):
            prefix = a.split("=", 1)[1]
        elif a.startswith("-D"):
            k, v = a[2:].split("=", 1)
            defs[k] = v
        elif a.startswith("-"):
            continue  # --match-full-lines etc.: not used by the printer tests
        else:
            check_file = a
    directive = re.compile(r"(?:^|[^A-Za-z0-9_-])" + re.escape(prefix) + r"(-NEXT|-NOT)?:(.*)$")
    checks = []
    for n, line in enumerate(open(check_file).read().split("\n"), 1):
        m = directive.search(line)
        if m:
            checks.append((m.group(1) or "", _pattern(m.group(2), defs), m.group(2).strip(), n))
    if not checks:
        print(f"FileCheck: no {prefix}: lines in {check_file}", file=sys.stderr)
        return 2
    lines = [_canon(l) for l in sys.stdin.read().split("\n")]
    pos_line, pos_col, last_line = 0, 0, -1
    nots = []

    def find(pat, line, col):
        for li in range(line, len(lines)):
            m = pat.search(lines[li], col if li == line else 0)
            if m:
                return li, m
        return None, None

    def fail(what, text, n):
        near = "\n".join(lines[max(0, pos_line - 2):pos_line + 6])
        print(f"{check_file}:{n}: error: {what}: {prefix}: {text}\n"
              f"input near line {pos_line + 1}:\n{near}", file=sys.stderr)
        return 1

    def check_nots(end_line, end_col):
        for pat, text, n in nots:
            for li in range(pos_line, min(end_line, len(lines) - 1) + 1):
                lo = pos_col if li == pos_line else 0
                hi = end_col if li == end_line else len(lines[li])
                m = pat.search(lines[li], lo)
                if m and m.end() <= hi:
                    return fail(f"excluded string found (input line {li + 1})", text, n)
        nots.clear()
        return 0

    for kind, pat, text, n in checks:
        if kind == "-NOT":
            nots.append((pat, text, n))
            continue
        li, m = find(pat, pos_line, pos_col)
        if li is None:
            return fail("expected string not found", text, n)
        if kind == "-NEXT" and li != last_line + 1:
            return fail(f"match on input line {li + 1}, not the line after {last_line + 1}",
                        text, n)
        if check_nots(li, m.start()):
            return 1
        pos_line, pos_col, last_line = li, m.end(), li
    if nots and check_nots(len(lines) - 1, len(lines[-1]) if lines else 0):
        return 1
    return 0


# ---- the RUN lines -------------------------------------------------------------------------

def run_lines(test):
    runs, cur = [], ""
    for line in open(test).read().split("\n"):
        m = re.search(r"RUN:(.*)$", line)
        if not m:
            continue
        part = m.group(1).strip()
        if part.endswith("\\"):
            cur += part[:-1] + " "
            continue
        runs.append(cur + part)
        cur = ""
    return runs


def main(argv):
    if argv and argv[0] == "--filecheck":
        return filecheck(argv[1:])
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("test")
    ap.add_argument("--coil", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--work", default="/tmp/coil-minilit")
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args(argv)
    test = os.path.abspath(a.test)
    os.makedirs(a.work, exist_ok=True)
    tmp = os.path.join(a.work, os.path.basename(test) + "." + a.device + ".tmp")
    subst = [("%s", test), ("%S", os.path.dirname(test)), ("%t", tmp),
             ("%coil", os.path.abspath(a.coil)), ("%python", a.python),
             ("FileCheck", f"{shlex.quote(a.python)} {shlex.quote(SELF)} --filecheck")]
    failed = 0
    runs = run_lines(test)
    for i, cmd in enumerate(runs, 1):
        if a.device != "cpu":
            cmd = (cmd.replace("--device cpu", f"--device {a.device}")
                   .replace("-DDEVICE=cpu", f"-DDEVICE={a.device}")
                   .replace("coil_cpu_gemm", f"coil_{a.device}_gemm"))
        for k, v in subst:
            cmd = re.sub(re.escape(k) + (r"\b" if k[-1].isalnum() else ""), lambda _: v, cmd)
        script = "set -o pipefail\nnot() { if \"$@\"; then return 1; else return 0; fi; }\n" + cmd
        r = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
        ok = r.returncode == 0
        print(f"{'ok  ' if ok else 'FAIL'}  RUN {i}: {cmd[:150]}")
        if not ok:
            failed += 1
            sys.stdout.write(r.stdout[-3000:] + r.stderr[-3000:])
    print(f"minilit {os.path.basename(test)} --device {a.device}: "
          f"{len(runs) - failed} of {len(runs)} RUN lines passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
