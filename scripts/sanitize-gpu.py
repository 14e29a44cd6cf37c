#!/usr/bin/env python3
"""compute-sanitizer (memcheck, racecheck) over the conformance models compiled for CUDA.

Works in the folder of a `scripts/conformance.py --mode compile --device cuda` run (WORK, e.g.
$WORK/conformance of scripts/gpu-check): reuses its packages (WORK/out/NAME/pkg) and compiles
those that are missing (a test that does not compile is counted as such, not sanitized). Every
package runs on its first dataset (in0.npz) under each tool, in parallel (-j).

Speed: starting compute-sanitizer and a CUDA context costs more than running a small package, so
packages run in batches (--batch) inside one sanitized process each: a worker (this script with
--worker) loads and runs the batch's packages one after another through libcoil_runtime
(bench/coilrt.py), printing a marker line before and after each. A batch whose process reports
anything (a sanitizer line, a failed run, a non-zero exit) is run again one package per process
with `coil run` under the tool, and the per-package verdict comes from those runs; so every
failing verdict and its log come from a plain `compute-sanitizer coil run PKG` command.

Verdicts per package and tool: clean; errors (the tool printed an error: its first lines are in
the summary, the whole log in WORK/out/NAME/sanitize.TOOL.log); run-error (coil run failed
without any sanitizer report: reported, not counted as a sanitizer failure; the conformance
stage judges those); timeout. Verdicts are stored in WORK/out/NAME/sanitize.TOOL.json, so a call
that runs out of --budget leaves the rest for the next call (exit status 4: call again);
--fresh forgets stored verdicts.

--selftest first checks the failure path on deliberately broken packages (a Relu model compiled
for CUDA whose kernels.cu is edited and rebuilt with nvcc): one with an out-of-bounds global write
injected into every kernel must be reported by memcheck, one with a shared-memory write-write
race must be reported by racecheck, the unedited one must be clean under both, through both the
batch path and the single path. A failed self-test fails the call.

Before anything, a plain Relu package must run clean under memcheck (preflight): where
compute-sanitizer refuses the GPU (on this workplace it does under gVisor; it works on the
Firecracker machines) the call stops with exit status 2 and says so.

Exit status: 0 all packages done and clean (run-errors listed); 1 a sanitizer error, a timeout or
a failed self-test; 2 compute-sanitizer cannot run here (preflight); 4 budget used up before
every package was done (call again).

--device cpu and --sanitizer PATH exist to test this harness without a GPU (CPU packages run
under a stand-in for compute-sanitizer, test/sanitize/fake_compute_sanitizer.py).
"""
import argparse
import concurrent.futures
import glob
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BEGIN, END = "@@coil-sanitize begin ", "@@coil-sanitize end "
# Lines of compute-sanitizer that are not findings.
BENIGN = re.compile(r"^=+ (COMPUTE-SANITIZER$|ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards|"
                    r"Target application returned an error|LEAK SUMMARY: 0 bytes)|^=+\s*$")
SANITIZER_LINE = re.compile(r"^=========")


# ---------------------------------------------------------------- worker (inside the sanitizer)
def worker(list_file, runtime):
    import ctypes

    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import numpy as np
    import coilrt

    rt = coilrt.Runtime(runtime)
    for name, pkg, inp in json.load(open(list_file)):
        print(BEGIN + name, flush=True)
        try:
            data = dict(np.load(inp))
            with rt.load(pkg) as m:
                names = list(data)
                order = m.input_order(names)
                keep = []
                ins = (coilrt.CoilTensor * max(1, len(order)))()
                for k, i in enumerate(order):
                    a = data[names[i]]
                    dtype = "bfloat16" if a.dtype.kind == "V" and a.dtype.itemsize == 2 else a.dtype.name
                    a = a if a.flags.c_contiguous else a.copy(order="C")  # (np.ascontiguousarray makes 0-d 1-d)
                    shape = (ctypes.c_int64 * max(1, a.ndim))(*a.shape)
                    keep += [a, shape]
                    ins[k].data, ins[k].dtype, ins[k].rank, ins[k].shape = a.ctypes.data, coilrt.dtype_code(dtype), a.ndim, shape
                outs = (coilrt.CoilOutput * max(1, len(m.outputs)))()
                rt.check(rt.lib.coil_model_run(m.handle, ins, len(order), outs, len(m.outputs)), "coil_model_run")
                for k in range(len(m.outputs)):
                    rt.lib.coil_output_release(ctypes.byref(outs[k]))
        except Exception as e:  # noqa: BLE001 - any failure ends the batch; the harness reruns singly
            print(END + name + " failed: " + str(e).replace("\n", " ")[:300], flush=True)
            return 3
        print(END + name + " ok", flush=True)
    return 0


# ---------------------------------------------------------------- harness
def findings(lines):
    """The sanitizer lines of lines that report something (not banners or zero summaries)."""
    return [l for l in lines if SANITIZER_LINE.match(l) and not BENIGN.match(l)]


def error_heads(lines):
    """The first line of each finding (a line right after the '=========' prefix, not indented)."""
    return [l for l in findings(lines) if re.match(r"^=+ \S", l)]


class Harness:
    def __init__(self, args):
        self.args = args
        self.deadline = time.time() + args.budget
        self.lock = threading.Lock()
        self.verdicts = 0
        self.fallbacks = []  # batches run again one package per process
        self.env = dict(os.environ, COIL_CUDA_GRAPHS="0")
        libdir = os.path.dirname(args.runtime)
        self.env["LD_LIBRARY_PATH"] = libdir + (":" + os.environ["LD_LIBRARY_PATH"] if os.environ.get("LD_LIBRARY_PATH") else "")

    def time_left(self):
        return self.deadline - time.time()

    def sanitizer_cmd(self, tool):
        cmd = [self.args.sanitizer, "--tool", tool, "--error-exitcode", "9"]
        return cmd + (self.args.sanitizer_flags.split() if self.args.sanitizer_flags else [])

    # ---- compiling
    def pkg_ok(self, pkg):
        meta = os.path.join(pkg, "metadata.json")
        if not (os.path.exists(meta) and os.path.exists(os.path.join(pkg, "model.so"))):
            return False
        try:
            return json.load(open(meta)).get("device") == self.args.device
        except ValueError:
            return False

    def compile_one(self, item):
        name, model, pkg = item["name"], item["model"], item["pkg"]
        status_file = os.path.join(os.path.dirname(pkg), "sanitize.compile.json")
        if self.time_left() <= 0:
            return
        cmd = [self.args.coil, "compile", model, "-o", pkg, "--device", self.args.device]
        if self.args.arch and self.args.device == "cuda":
            cmd += ["--arch", self.args.arch]
        t0 = time.time()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=self.args.timeout)
            ok, detail = r.returncode == 0, (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[0]
        except subprocess.TimeoutExpired:
            ok, detail = False, "no result in %d s" % self.args.timeout
        write_json(status_file, {"ok": ok, "secs": round(time.time() - t0, 1), "detail": "" if ok else detail})

    # ---- running
    def single(self, item, tool):
        """`compute-sanitizer --tool TOOL coil run PKG` for one package: its verdict."""
        out_dir = os.path.dirname(item["pkg"])
        log = os.path.join(out_dir, "sanitize.%s.log" % tool)
        cmd = self.sanitizer_cmd(tool) + [self.args.coil, "run", item["pkg"], "--inputs", item["inputs"],
                                          "--outputs", os.path.join(out_dir, "sanitize.%s.out.npz" % tool)]
        t0 = time.time()
        # its own process group, so that a timeout ends the sanitized program too, not only the tool
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                             env=self.env, start_new_session=True)
        try:
            text, _ = p.communicate(timeout=self.args.timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            kill_group(p)
            text, _ = p.communicate()
            rc = None
        with open(log, "w") as f:
            f.write("$ " + " ".join(cmd) + "\n" + text)
        lines = text.splitlines()
        found = findings(lines)
        if found or rc == 9:
            v = {"status": "errors", "first": (found or lines)[: self.args.lines]}
        elif rc is None:
            v = {"status": "timeout", "first": ["no result in %d s" % self.args.timeout]}
        elif rc != 0:
            v = {"status": "run-error", "first": [l for l in lines if l.strip()][:3] or ["exit %d" % rc]}
        else:
            v = {"status": "clean"}
        v.update(secs=round(time.time() - t0, 1), via="single", command=" ".join(cmd))
        return v

    def batch(self, items, tool, tag):
        """Runs items in one sanitized worker process; returns {name: verdict} for the items that
        ran clean, the items to run singly (all of them when anything was reported), and
        {name: first sanitizer lines} for the items the report was printed under."""
        list_file = os.path.join(self.args.work, "sanitize-batches", "%s.%s.json" % (tool, tag))
        os.makedirs(os.path.dirname(list_file), exist_ok=True)
        write_json(list_file, [[i["name"], i["pkg"], i["inputs"]] for i in items])
        cmd = self.sanitizer_cmd(tool) + [sys.executable, os.path.abspath(__file__), "--worker", list_file,
                                          "--runtime", self.args.runtime]
        t0 = time.time()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", env=self.env,
                             start_new_session=True)
        progress = [time.time(), None]  # last marker time, why it was killed

        def watchdog():
            while p.poll() is None:
                if time.time() - progress[0] > self.args.timeout:
                    progress[1] = "timeout"
                    kill_group(p)
                elif self.time_left() < -self.args.grace:
                    progress[1] = "budget"
                    kill_group(p)
                time.sleep(0.5)

        w = threading.Thread(target=watchdog, daemon=True)
        w.start()
        lines = []
        for line in p.stdout:
            line = line.rstrip("\n")
            if line.startswith(BEGIN) or line.startswith(END):
                progress[0] = time.time()
            lines.append(line)
        rc = p.wait()
        w.join()
        with open(list_file[:-5] + ".log", "w") as f:
            f.write("$ " + " ".join(cmd) + "\n" + "\n".join(lines) + "\n")
        # Per package: the lines between its begin and end markers.
        done, cur, seg, anomaly, flagged = {}, None, [], False, {}
        for line in lines:
            if line.startswith(BEGIN):
                cur, seg = line[len(BEGIN):], []
            elif line.startswith(END):
                name, _, state = line[len(END):].partition(" ")
                if state != "ok" or findings(seg):
                    anomaly = True
                if findings(seg):
                    flagged[name] = findings(seg)[: self.args.lines]
                done[name] = state == "ok" and not findings(seg)
                cur = None
            elif cur is not None:
                seg.append(line)
            elif findings([line]):
                anomaly = True  # a report outside any package (e.g. a non-zero error summary)
        if progress[1] == "budget":
            # stopped for the budget: keep what finished cleanly before, leave the rest pending
            return {i["name"]: {"status": "clean", "via": "batch"} for i in items if done.get(i["name"])}, [], {}
        if rc != 0 or anomaly or progress[1] or set(done) != {i["name"] for i in items}:
            with self.lock:
                self.fallbacks.append(tag)
            return {}, items, flagged
        secs = round((time.time() - t0) / max(1, len(items)), 1)
        return {i["name"]: {"status": "clean", "via": "batch", "secs": secs} for i in items}, [], {}

    def store(self, item, tool, verdict):
        write_json(self.verdict_file(item, tool), verdict)
        with self.lock:
            self.verdicts += 1

    def verdict_file(self, item, tool):
        return os.path.join(os.path.dirname(item["pkg"]), "sanitize.%s.json" % tool)

    def run_tool_jobs(self, jobs):
        """jobs: list of (tool, [items]) batches. Runs them with -j workers until the budget is
        spent; stores each verdict as it comes."""
        def do(job):
            tool, items = job
            if self.time_left() <= 0:
                return
            clean, again, flagged = self.batch(items, tool, items[0]["name"]) if len(items) > 1 else ({}, items, {})
            for i in items:
                if i["name"] in clean:
                    self.store(i, tool, clean[i["name"]])
            for i in again:
                if self.time_left() <= -self.args.grace:
                    return
                v = self.single(i, tool)
                if v["status"] == "clean" and i["name"] in flagged:
                    # reported inside the batch process, not when run alone: state carried from
                    # one package to the next in one process; counted as an error
                    v = {"status": "errors", "via": "batch only", "first": ["(reported in a batch run, %s; clean alone)" % (
                        os.path.join(self.args.work, "sanitize-batches", "%s.%s.log" % (tool, items[0]["name"])))] + flagged[i["name"]]}
                self.store(i, tool, v)

        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, self.args.j)) as ex:
            list(ex.map(do, jobs))


def kill_group(p):
    """Kills the process group p leads (p and the program it runs)."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def read_json(path):
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return None


def discover(args):
    sys.path.insert(0, HERE)
    import onnx
    import conformance

    data_dir = os.path.join(args.work, "data-onnx-" + onnx.__version__)
    conformance.generate(data_dir)
    excluded = set()
    if args.exclude and os.path.exists(args.exclude):
        for line in open(args.exclude):
            line = line.strip()
            if line and not line.startswith("#"):
                name, _, mode = line.split(None, 1)[0].partition("@")
                if not mode or mode == "compile" or (mode == "cuda" and args.device == "cuda"):
                    excluded.add(name)
    items = []
    for name in sorted(os.listdir(data_dir)):
        d = os.path.join(data_dir, name)
        meta = read_json(os.path.join(d, "meta.json"))
        if not meta or meta.get("skip") or meta.get("unsavable") or name in excluded:
            continue
        if args.filter and not re.search(args.filter, name):
            continue
        if args.ops and meta.get("op") not in args.ops.split(","):
            continue
        if not os.path.exists(os.path.join(d, "in0.npz")):
            continue
        items.append({"name": name, "model": os.path.join(d, "model.onnx"), "inputs": os.path.join(d, "in0.npz"),
                      "pkg": os.path.join(args.work, "out", name, "pkg")})
    return items


# ---------------------------------------------------------------- self-test
INJECT_OOB = ("\n  if (threadIdx.x == 0 && blockIdx.x == 0) "
              "{ *reinterpret_cast<volatile float *>(uintptr_t(16)) = 1.0f; }  // SELFTEST: out of bounds\n")
INJECT_RACE = ("\n  { __shared__ volatile int coil_selftest_race; coil_selftest_race = int(threadIdx.x); "
               "if (coil_selftest_race == -1) __trap(); }  // SELFTEST: write-write race on shared memory\n")


def inject(src, code):
    """src with code inserted at the start of every __global__ function's body."""
    out, n = [], 0
    for m in re.finditer(r"__global__[^{;]*\{", src):
        out.append(m.end())
    for pos in reversed(out):
        src = src[:pos] + code + src[pos:]
        n += 1
    return src, n


def make_broken(args, good, dst, code):
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(good, dst)
    meta = json.load(open(os.path.join(good, "metadata.json")))
    if args.device == "cpu":
        return  # harness test without a GPU: the stand-in sanitizer reacts to the name
    cu = os.path.join(dst, "src", "kernels.cu")
    text, n = inject(open(cu).read(), code)
    if n == 0:
        raise RuntimeError("self-test: no __global__ function in " + cu)
    open(cu, "w").write(text)
    cmd = [args.nvcc, "-std=c++17", "-O3", "--fatbin", "-w"]
    for a in meta["cuda"]["archs"]:
        cmd += ["-gencode", "arch=compute_%s,code=sm_%s" % (a[3:], a[3:])]
    cmd += [cu, "-o", os.path.join(dst, meta["cuda"]["fatbin"])]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("self-test: nvcc: " + r.stderr.strip()[:500])
    # The broken fatbin is deliberate: record it in the integrity record, or loading refuses it.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from reseal_package import reseal
    reseal(dst)


def selftest_packages(args, h):
    """Builds the self-test packages (a Relu model compiled, and two broken copies); returns
    {name: item} or raises RuntimeError."""
    import onnx
    from onnx import TensorProto, helper

    d = os.path.join(args.work, "sanitize-selftest")
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "selftest",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 300])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 300])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), os.path.join(d, "model.onnx"))
    import numpy as np
    np.savez(os.path.join(d, "in0.npz"), x=np.random.default_rng(7).standard_normal((4, 300)).astype(np.float32))
    items = {}
    for name in ("good", "broken-memcheck", "broken-racecheck"):
        os.makedirs(os.path.join(d, name))
        items[name] = {"name": name, "model": os.path.join(d, "model.onnx"), "inputs": os.path.join(d, "in0.npz"),
                       "pkg": os.path.join(d, name, "pkg")}
    h.compile_one(items["good"])
    if not h.pkg_ok(items["good"]["pkg"]):
        raise RuntimeError("self-test: the Relu model did not compile: %s" % read_json(os.path.join(d, "good", "sanitize.compile.json")))
    make_broken(args, items["good"]["pkg"], items["broken-memcheck"]["pkg"], INJECT_OOB)
    make_broken(args, items["good"]["pkg"], items["broken-racecheck"]["pkg"], INJECT_RACE)
    return items


def preflight(h, good):
    """None when compute-sanitizer runs a good package clean under memcheck, else why not."""
    v = h.single(good, "memcheck")
    if v["status"] == "clean":
        return None
    text = open(os.path.join(os.path.dirname(good["pkg"]), "sanitize.memcheck.log")).read()
    lines = [l for l in text.splitlines()[1:] if l.strip()][:6]
    if re.search(r"Device not supported|error 999|not supported on this", text):
        return ("compute-sanitizer cannot use this GPU (it reports the device as not supported; on this workplace it "
                "works on the Firecracker machines, not under gVisor): " + " | ".join(lines))
    return "a plain Relu package is not clean under memcheck (%s): %s" % (v["status"], " | ".join(lines))


def selftest(args, h, items):
    """Returns a list of problems (empty: the failure path works)."""
    want = {("good", "memcheck"): "clean", ("good", "racecheck"): "clean",
            ("broken-memcheck", "memcheck"): "errors", ("broken-racecheck", "racecheck"): "errors"}
    problems = []
    for tool in ("memcheck", "racecheck"):
        names = [n for (n, t) in want if t == tool]
        # the batch path: the broken package between good ones must send the batch to single runs
        seq = [items["good"]] + [items[n] for n in names if n != "good"] + [items["good"]]
        clean, again, _ = h.batch(seq, tool, "selftest")
        bad = [n for n in names if n != "good"][0]
        if bad in clean:
            problems.append("self-test: %s: the batch run calls %s clean" % (tool, bad))
        if not again:
            problems.append("self-test: %s: the batch with %s was not sent to single runs" % (tool, bad))
        clean, again, _ = h.batch([items["good"], dict(items["good"], name="good-again")], tool, "selftest-good")
        if again or set(clean) != {"good", "good-again"}:
            problems.append("self-test: %s: the batch of good packages is not clean (see %s)" % (
                tool, os.path.join(args.work, "sanitize-batches")))
        for n in names:
            v = h.single(items[n], tool)
            got = v["status"]
            print("sanitize self-test: %-16s %-9s -> %s%s" % (n, tool, got, (": " + v["first"][0]) if v.get("first") else ""))
            if got != want[(n, tool)]:
                problems.append("self-test: %s under %s: %s, expected %s (log: %s)" % (
                    n, tool, got, want[(n, tool)], os.path.join(os.path.dirname(items[n]["pkg"]), "sanitize.%s.log" % tool)))
    return problems


# ---------------------------------------------------------------- main
def find_sanitizer():
    for c in [shutil.which("compute-sanitizer")] + sorted(glob.glob("/usr/local/cuda*/bin/compute-sanitizer")) + sorted(
            glob.glob("/usr/local/cuda*/compute-sanitizer/compute-sanitizer")) + sorted(glob.glob("/opt/nvidia/*/compute-sanitizer")):
        if c and os.access(c, os.X_OK):
            return c
    return "compute-sanitizer"


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--worker":
        ap = argparse.ArgumentParser()
        ap.add_argument("--worker", required=True)
        ap.add_argument("--runtime", required=True)
        a = ap.parse_args()
        return worker(a.worker, a.runtime)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--coil", required=True)
    ap.add_argument("--work", required=True, help="the conformance work folder (data-onnx-*, out/NAME/pkg)")
    ap.add_argument("--runtime", help="libcoil_runtime.so (default: ../lib/ beside coil)")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: only to test this harness")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--tools", default="memcheck,racecheck")
    ap.add_argument("--sanitizer", default=find_sanitizer())
    ap.add_argument("--sanitizer-flags", default="", help="extra compute-sanitizer flags")
    ap.add_argument("--nvcc", default=shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc")
    ap.add_argument("--exclude", default=os.path.join(ROOT, "test", "conformance", "exclusions.txt"))
    ap.add_argument("--filter", help="regex on test names")
    ap.add_argument("--ops", help="comma-separated op types (default: all)")
    ap.add_argument("-j", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--batch", type=int, default=8, help="packages per sanitized process")
    ap.add_argument("--budget", type=float, default=480, help="seconds; what is left waits for the next call")
    ap.add_argument("--grace", type=float, default=20, help="seconds past the budget before runs in flight are killed")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per compile or per package run")
    ap.add_argument("--lines", type=int, default=6, help="sanitizer lines kept per failing package")
    ap.add_argument("--fresh", action="store_true", help="forget stored verdicts")
    ap.add_argument("--selftest", action="store_true", help="check the failure path first (broken packages)")
    ap.add_argument("--no-run", action="store_true", help="only the self-test")
    args = ap.parse_args()
    args.runtime = args.runtime or os.path.join(os.path.dirname(os.path.abspath(args.coil)), "..", "lib", "libcoil_runtime.so")
    tools = args.tools.split(",")
    if not shutil.which(args.sanitizer):
        print("sanitize: compute-sanitizer not found (%s; --sanitizer PATH)" % args.sanitizer)
        return 1
    os.makedirs(args.work, exist_ok=True)
    h = Harness(args)
    t0 = time.time()
    status = 0
    try:
        st_items = selftest_packages(args, h)
    except (RuntimeError, OSError) as e:
        print("sanitize: %s" % e)
        return 1
    why = preflight(h, st_items["good"])
    if why:
        print("sanitize: cannot check anything here: " + why)
        return 2
    if args.selftest:
        problems = selftest(args, h, st_items)
        for p in problems:
            print("FAIL " + p)
        print("sanitize self-test: %s (%.0f s)" % ("FAILED" if problems else "the broken packages are reported, the good one is clean", time.time() - t0))
        status = 1 if problems else 0
        if args.no_run:
            return status

    items = discover(args)
    if args.fresh:
        for i in items:
            for t in tools:
                for f in (h.verdict_file(i, t), os.path.join(os.path.dirname(i["pkg"]), "sanitize.compile.json")):
                    if os.path.exists(f):
                        os.remove(f)
    # compile what the conformance stage did not (packages of another device are recompiled)
    todo = [i for i in items if not h.pkg_ok(i["pkg"])
            and not read_json(os.path.join(os.path.dirname(i["pkg"]), "sanitize.compile.json"))]
    reused = sum(1 for i in items if h.pkg_ok(i["pkg"]))
    t1 = time.time()
    for i in todo:
        os.makedirs(os.path.dirname(i["pkg"]), exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.j)) as ex:
        list(ex.map(h.compile_one, todo))
    compiled = [i for i in items if h.pkg_ok(i["pkg"])]
    nocompile = [i for i in items if not h.pkg_ok(i["pkg"])
                 and (read_json(os.path.join(os.path.dirname(i["pkg"]), "sanitize.compile.json")) or {}).get("ok") is False]
    print("sanitize: %d conformance tests; %d packages reused, %d compiled now in %.0f s, %d do not compile, %d not compiled yet" % (
        len(items), reused, len(compiled) - reused, time.time() - t1, len(nocompile), len(items) - len(compiled) - len(nocompile)))

    per_tool = []
    for tool in tools:
        pending = [i for i in compiled if not read_json(h.verdict_file(i, tool))]
        per_tool.append([(tool, pending[k:k + max(1, args.batch)]) for k in range(0, len(pending), max(1, args.batch))])
    jobs = [j for group in itertools.zip_longest(*per_tool) for j in group if j]  # the tools in turn
    t2 = time.time()
    h.run_tool_jobs(jobs)
    print("sanitize: %d of %d pending package runs done this call in %.0f s with -j %d, batches of %d; "
          "%d batches run again one package per process (something reported or failed in them)" % (
              h.verdicts, sum(len(j[1]) for j in jobs), time.time() - t2, args.j, args.batch, len(h.fallbacks)))

    # summary
    incomplete = len(items) - len(compiled) - len(nocompile)
    bad = []
    for tool in tools:
        counts = {}
        for i in compiled:
            v = read_json(h.verdict_file(i, tool))
            s = v["status"] if v else "pending"
            counts[s] = counts.get(s, 0) + 1
            if s in ("errors", "timeout", "run-error"):
                bad.append((tool, i, v))
        incomplete += counts.get("pending", 0)
        print("sanitize %-9s: %d packages: %s" % (tool, len(compiled), ", ".join(
            "%s %d" % (k, counts.get(k, 0)) for k in ("clean", "errors", "run-error", "timeout", "pending"))))
    for tool, i, v in [b for b in bad if b[2]["status"] != "run-error"][:40]:
        print("---- %s %s: %s (log %s)" % (tool, i["name"], v["status"], os.path.join(os.path.dirname(i["pkg"]), "sanitize.%s.log" % tool)))
        for line in v.get("first", []):
            print("     " + line)
    runerr = [b for b in bad if b[2]["status"] == "run-error"]
    for tool, i, v in runerr[:20]:
        print("run-error (no sanitizer report) %s %s: %s" % (tool, i["name"], " | ".join(v.get("first", []))[:300]))
    nerr = sum(1 for b in bad if b[2]["status"] in ("errors", "timeout"))
    if nerr:
        status = 1
    elif incomplete and status == 0:
        status = 4
    print("sanitize: %s; %d run-errors; %d do not compile (%.0f s)" % (
        "%d packages with sanitizer errors or timeouts" % nerr if nerr else
        ("clean so far, %d left for the next call" % incomplete if incomplete else "clean"),
        len(runerr), len(nocompile), time.time() - t0))
    return status


if __name__ == "__main__":
    sys.exit(main())
