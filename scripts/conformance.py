#!/usr/bin/env python3
"""ONNX backend node tests through coil.

Generates the node tests of the installed onnx package (models and input/output data, with
onnx's own test-case code, since the wheel ships no data), runs each through the coil CLI, and
compares with the expected outputs:
  - integers and bools: exact; shapes and dtypes: exact;
  - f32/f64: |got - want| <= atol + rtol * |want| with the test's own tolerances (onnx's
    defaults: rtol 1e-3, atol 1e-7); NaN where NaN is expected;
  - f16/bf16: rtol 1e-2, atol 1e-3 (onnx computes those expectations step by step at low
    precision, coil rounds once).
Prints `conformance: N passed, N failed, N skipped` and a per-op table. Skips are tests with
non-tensor inputs or outputs (sequences, optionals, maps) and entries of the exclusion file.

Exit status 1 when a test crashed coil (a signal or an unknown exit code), when a test listed in
the baseline file does not pass (a regression), or when the pass rate over supported ops falls
below --min-supported-rate. --update-baseline rewrites the baseline with the tests that pass.

Modes:
  interpret   coil interpret MODEL --inputs IN.npz --outputs OUT.npz
  text        coil inspect MODEL --graph > M.coil; the text must parse back, print identically,
              and `coil interpret M.coil` must match the expected outputs
  ort         coil interpret as in 'interpret', compared with onnxruntime's CPUExecutionProvider
              on the same model and inputs (graph optimizations off, one thread), instead of
              with the stored expectations. Comparison rules: shapes, dtypes, ints and bools
              exact; floats |coil - ort| <= atol + rtol * |ort|, NaN where ORT gives NaN, with
              fixed per-dtype tolerances (ORT_TOLERANCES below):
                f64       rtol 1e-12, atol 1e-14  both compute in double; only the order of
                                                  operations and libm differ (largest seen over
                                                  the node tests: 1.9e-15 relative)
                f32       rtol 1e-5,  atol 1e-6   coil accumulates reductions and matmuls in
                                                  double and rounds once; ORT accumulates in
                                                  float, in a blocked/vectorized order, and uses
                                                  polynomial approximations of exp, tanh,
                                                  logistic, erf. Largest seen: 1.9e-6 relative
                                                  (NegativeLogLikelihoodLoss mean over weights),
                                                  1.1e-5 absolute on values ~6 (cubic Resize);
                                                  the node tests reduce over at most a few
                                                  hundred terms; longer float reductions would
                                                  need rtol ~1e-4..1e-3. atol covers sums that
                                                  cancel to near zero.
                f16       rtol 2e-3,  atol 1e-4   two f16 ulps: ORT computes some f16 ops by
                                                  upcasting, others step by step in f16; coil
                                                  rounds once (largest seen: 1 ulp)
                bf16      rtol 1e-2,  atol 1e-3   about one bf16 ulp (largest seen: 0)
              Extra statuses, neither passes nor failures, counted and listed in the summary:
                ort-unavailable  onnxruntime cannot load or run the test (op, opset or type it
                                 does not implement, or it raises or crashes on the inputs)
                ort-disagrees    coil and ORT differ, coil matches the stored expectation and
                                 ORT does not (a finding about ORT, not a coil failure)
              A coil/ORT difference where coil does not match the stored expectation (or ORT
              matches it too) is a failure of kind 'mismatch'. onnxruntime runs in separate
              worker processes (-j of them) before coil, so that an ORT crash costs one test.

Old opsets (--opsets LO-HI, e.g. 7-12): instead of the node tests at the opsets onnx writes them,
run tests derived from them at each older opset in LO..HI where one of their ops has a different
version, plus a few written for behaviour that exists only there (scripts/old_opset_tests.py says
how they are made). They are generated once per onnx version under WORK/data-onnx-V-opsetsLO-HI;
while generating, each runs through onnxruntime, and one whose onnxruntime outputs differ from the
expectations (or that onnxruntime cannot run) is skipped with that reason, so the tests that run
are those onnxruntime passes. WORK/data-.../report.json counts them and lists the derived tests
left out (no equivalent form at the old opset) with their reasons. They use their own baselines.

Exclusion file: 'test_name  reason' excludes a test in every mode; 'test_name@MODE  reason'
excludes it only in mode MODE (e.g. 'test_foo@ort  onnxruntime bug ...'); 'test_name@cuda'
excludes it in compile mode with --device cuda.
"""
import argparse
import collections
import concurrent.futures
import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import warnings
import zipfile

import numpy as np

FLOAT_LOW = ("float16", "bfloat16")

# mode 'ort': (rtol, atol) per dtype for coil against onnxruntime; see the docstring for why.
ORT_TOLERANCES = {
    "float64": (1e-12, 1e-14),
    "float32": (1e-5, 1e-6),
    "float16": (2e-3, 1e-4),
    "bfloat16": (1e-2, 1e-3),
}


def save_npz(path, arrays):
    """np.savez, except bfloat16 arrays are stored as 2-byte void ('|V2'), which coil reads as bf16."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, arr in arrays.items():
            arr = np.asarray(arr)
            if arr.dtype.name == "bfloat16":
                arr = arr.view(np.uint16).view(np.dtype("V2"))
            elif arr.dtype.kind == "V" or arr.dtype.type.__module__.startswith("ml_dtypes"):
                raise ValueError("dtype %s has no .npy form coil reads" % arr.dtype.name)
            buf = io.BytesIO()
            # np.ascontiguousarray would turn a 0-d array into a 1-d one
            np.lib.format.write_array(buf, arr if arr.flags.c_contiguous else arr.copy(order="C"), allow_pickle=False)
            z.writestr(name + ".npy", buf.getvalue())


def load_npz(path):
    out = {}
    with zipfile.ZipFile(path) as z:
        for n in z.namelist():
            arr = np.lib.format.read_array(io.BytesIO(z.read(n)), allow_pickle=False)
            if arr.dtype.kind == "V" and arr.dtype.itemsize == 2:
                arr = ("bfloat16", arr.view(np.uint16))
            out[n[:-4]] = arr
    return out


def bf16_to_f32(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def to_numpy(x):
    """A test-data value (numpy array or onnx TensorProto) as a numpy array."""
    import onnx
    from onnx import numpy_helper

    if isinstance(x, onnx.TensorProto):
        return numpy_helper.to_array(x)
    return np.asarray(x)


def generate(data_dir):
    """Writes every node test case under data_dir/<name>/ (once per onnx version)."""
    import onnx
    from onnx.backend.test.case import node as node_cases

    marker = os.path.join(data_dir, ".complete")
    if os.path.exists(marker):
        return
    if os.path.exists(data_dir):
        shutil.rmtree(data_dir)
    os.makedirs(data_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = node_cases.collect_testcases(None)
    first_op = {c.name: c.model.graph.node[0].op_type for c in cases if len(c.model.graph.node) == 1}
    for c in cases:
        d = os.path.join(data_dir, c.name)
        os.makedirs(d)
        g = c.model.graph
        base = c.name.split("_expanded")[0]
        op = first_op.get(base) or first_op.get(c.name) or (g.node[0].op_type if g.node else "?")
        meta = {"op": op, "rtol": c.rtol, "atol": c.atol, "skip": None, "datasets": 0}
        non_tensor = [v.name for v in list(g.input) + list(g.output) if not v.type.HasField("tensor_type")]
        if non_tensor:
            meta["skip"] = "non-tensor input or output: " + ", ".join(non_tensor)
        else:
            with open(os.path.join(d, "model.onnx"), "wb") as f:
                f.write(c.model.SerializeToString())
            for k, (inputs, outputs) in enumerate(c.data_sets):
                ins = {g.input[j].name: to_numpy(x) for j, x in enumerate(inputs)}
                outs = {g.output[j].name: to_numpy(x) for j, x in enumerate(outputs)}
                try:
                    save_npz(os.path.join(d, "in%d.npz" % k), ins)
                    save_npz(os.path.join(d, "want%d.npz" % k), outs)
                except ValueError as e:  # e.g. object (string) arrays
                    meta["unsavable"] = str(e)
                meta["datasets"] += 1
        with open(os.path.join(d, "meta.json"), "w") as f:
            json.dump(meta, f)
    open(marker, "w").close()


def compare(got, want, rtol, atol, tolerances=None):
    """Returns None when equal within tolerance, else a description of the first mismatch.

    tolerances, when given, maps a float dtype name to (rtol, atol) and replaces rtol/atol and
    the f16/bf16 defaults."""
    for name, w in want.items():
        if name not in got:
            return "missing output '%s'" % name
        g = got[name]
        wbf = isinstance(w, tuple)
        gbf = isinstance(g, tuple)
        if wbf != gbf:
            return "output '%s': dtype %s, want %s" % (name, "bf16" if gbf else g.dtype, "bf16" if wbf else w.dtype)
        if wbf:
            g, w = bf16_to_f32(g[1]), bf16_to_f32(w[1])
            rt, at = tolerances["bfloat16"] if tolerances else (1e-2, 1e-3)
        else:
            if g.dtype != w.dtype:
                return "output '%s': dtype %s, want %s" % (name, g.dtype, w.dtype)
            if tolerances and w.dtype.name in tolerances:
                rt, at = tolerances[w.dtype.name]
            else:
                rt, at = (1e-2, 1e-3) if w.dtype == np.float16 else (rtol, atol)
        if g.shape != w.shape:
            return "output '%s': shape %s, want %s" % (name, g.shape, w.shape)
        if w.dtype.kind in "fc":
            gf, wf = g.astype(np.float64), w.astype(np.float64)
            nan_mismatch = np.isnan(gf) != np.isnan(wf)
            with np.errstate(invalid="ignore"):
                both_inf = np.isinf(wf) & (gf == wf)
                bad = ~(np.abs(gf - wf) <= at + rt * np.abs(wf)) & ~np.isnan(wf) & ~both_inf
            bad |= nan_mismatch
            if bad.any():
                i = np.argwhere(bad)[0]
                return "output '%s': %d of %d elements differ; at %s got %r want %r" % (
                    name, int(bad.sum()), bad.size, tuple(int(x) for x in i), gf[tuple(i)], wf[tuple(i)])
        else:
            if not np.array_equal(g, w):
                bad = g != w
                i = np.argwhere(bad)[0] if bad.ndim else ()
                return "output '%s': %d elements differ; at %s got %r want %r" % (
                    name, int(np.sum(bad)), tuple(int(x) for x in i), g[tuple(i)], w[tuple(i)])
    return None


def ort_output_array(value):
    """An onnxruntime OrtValue as a numpy array (bf16, which ORT cannot convert, through its bits)."""
    import ctypes

    if value.data_type() == "tensor(bfloat16)":
        import ml_dtypes  # onnx's own dependency for bf16

        bits = np.empty(value.shape(), dtype=np.uint16)
        if bits.size:
            ctypes.memmove(bits.ctypes.data, value.data_ptr(), bits.nbytes)
        return bits.view(ml_dtypes.bfloat16)
    return value.numpy()


def ort_message(e):
    """The first line of an onnxruntime exception, without the C++ file and function names."""
    msg = (str(e).strip().splitlines() or [type(e).__name__])[0]
    return re.sub(r"/onnxruntime_src/\S+:\d+ .*?\)( const)? ", "", msg)[:400]


def ort_worker(list_file):
    """Runs the tests named in list_file through onnxruntime; writes out/<name>/ort.json (status
    'ok' or 'unavailable' with a detail) and ort<k>.npz. Prints 'START <name>' before each test
    so that the parent can tell which test a crash belongs to."""
    import onnxruntime as ort
    from onnx import TensorProto

    ort.set_default_logger_severity(4)  # errors come back as exceptions
    jobs = json.load(open(list_file))
    for name, d, out_dir, datasets in jobs:
        print("START " + name, flush=True)
        os.makedirs(out_dir, exist_ok=True)
        status = {"status": "ok", "detail": ""}
        try:
            so = ort.SessionOptions()
            so.intra_op_num_threads = 1
            so.inter_op_num_threads = 1
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            so.log_severity_level = 4
            try:
                sess = ort.InferenceSession(os.path.join(d, "model.onnx"), so, providers=["CPUExecutionProvider"])
            except Exception as e:  # noqa: BLE001 - any load failure means ORT cannot run it
                raise RuntimeError("load: " + ort_message(e))
            names = [o.name for o in sess.get_outputs()]
            for k in range(datasets):
                feeds = {}
                for n, a in load_npz(os.path.join(d, "in%d.npz" % k)).items():
                    if isinstance(a, tuple):
                        a = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(a[1], TensorProto.BFLOAT16)
                    else:
                        a = ort.OrtValue.ortvalue_from_numpy(a)
                    feeds[n] = a
                try:
                    vals = sess.run_with_ort_values(names, feeds)
                    outs = {n: ort_output_array(v) for n, v in zip(names, vals)}
                except Exception as e:  # noqa: BLE001
                    raise RuntimeError("run: " + ort_message(e))
                save_npz(os.path.join(out_dir, "ort%d.npz" % k), outs)
        except Exception as e:  # noqa: BLE001
            status = {"status": "unavailable", "detail": str(e) or type(e).__name__}
        with open(os.path.join(out_dir, "ort.json"), "w") as f:
            json.dump(status, f)
    return 0


def run_ort_phase(args, todo, out_root=None):
    """Runs onnxruntime on every test of todo in -j worker processes, writing under
    out_root/<name>/ (default WORK/out); a test during which a worker dies is marked unavailable
    and the worker restarts after it."""
    jobs = []
    out_root = out_root or os.path.join(args.work, "out")
    for name, d, meta in todo:
        if meta.get("unsavable"):
            continue
        out_dir = os.path.join(out_root, name)
        os.makedirs(out_dir, exist_ok=True)
        if os.path.exists(os.path.join(out_dir, "ort.json")):
            os.remove(os.path.join(out_dir, "ort.json"))
        jobs.append((name, d, out_dir, meta["datasets"]))
    nworkers = max(1, min(args.j, len(jobs)))

    def drive(i):
        pending = jobs[i::nworkers]
        while pending:
            list_file = os.path.join(args.work, "ort-jobs-%d.json" % i)
            with open(list_file, "w") as f:
                json.dump(pending, f)
            err_file = os.path.join(args.work, "ort-jobs-%d.err" % i)
            with open(err_file, "w") as ef:
                p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--ort-worker", list_file],
                                     stdout=subprocess.PIPE, stderr=ef, text=True)
            started = None
            done = 0
            progress = [time.time(), False]  # time of the last START line, killed for a timeout

            def watchdog():
                while p.poll() is None:
                    if time.time() - progress[0] > args.timeout:
                        progress[1] = True
                        p.kill()
                        return
                    time.sleep(0.5)

            watcher = threading.Thread(target=watchdog, daemon=True)
            watcher.start()
            for line in p.stdout:
                if line.startswith("START "):
                    progress[0] = time.time()
                    if started is not None:
                        done += 1
                    started = line[6:].strip()
            rc = p.wait()
            watcher.join()
            err = open(err_file).read()
            if rc == 0:
                return
            if started is None:
                raise RuntimeError("onnxruntime worker failed before its first test: " + err.strip()[-500:])
            # the worker died inside pending[done]
            name, _, out_dir, _ = pending[done]
            with open(os.path.join(out_dir, "ort.json"), "w") as f:
                tail = " | ".join(err.strip().splitlines()[-2:])
                if progress[1]:
                    detail = "onnxruntime gave no result in %d s" % args.timeout
                else:
                    detail = "onnxruntime crashed (exit status %d)%s" % (rc, ": " + tail if tail else "")
                json.dump({"status": "unavailable", "detail": detail}, f)
            pending = pending[done + 1:]

    with concurrent.futures.ThreadPoolExecutor(max_workers=nworkers) as ex:
        list(ex.map(drive, range(nworkers)))


def compare_with_ort(res, got, out_dir, k, want, meta):
    """Mode 'ort': fills res from coil's outputs against onnxruntime's for dataset k; returns
    True when the test should go on with its next dataset."""
    info = json.load(open(os.path.join(out_dir, "ort.json")))
    if info["status"] != "ok":
        res.update(status="ort-unavailable", detail=info["detail"])
        return False
    ort_out = load_npz(os.path.join(out_dir, "ort%d.npz" % k))
    diff = compare(got, ort_out, 0, 0, ORT_TOLERANCES)
    if diff is None:
        return True
    coil_vs_want = compare(got, want, meta["rtol"], meta["atol"])
    ort_vs_want = compare(ort_out, want, meta["rtol"], meta["atol"])
    if coil_vs_want is None and ort_vs_want is not None:
        res.update(status="ort-disagrees", detail="dataset %d: onnxruntime vs expected: %s" % (k, ort_vs_want))
        return False
    res.update(status="fail", kind="mismatch", detail="dataset %d: coil vs onnxruntime: %s; coil vs expected: %s; onnxruntime vs expected: %s" % (
        k, diff, coil_vs_want or "ok", ort_vs_want or "ok"))
    return False


def classify_error(rc, stderr):
    if rc == 1:
        if re.search(r"not supported|unsupported|is older than \d+|is deprecated|no lowering|cannot be compiled", stderr):
            return "unsupported"
        return "user-error"
    if rc == 2:
        return "internal-error"
    if rc == 3:
        return "runtime-error"
    return "crash"


def run_one(args, name, d, meta):
    res = {"name": name, "op": meta["op"], "status": "pass", "detail": ""}
    if meta.get("unsavable"):
        res.update(status="fail", kind="unsupported", detail="inputs not representable in .npz: " + meta["unsavable"])
        return res
    model = os.path.join(d, "model.onnx")
    out_dir = os.path.join(args.work, "out", name)
    os.makedirs(out_dir, exist_ok=True)
    if args.mode == "text":
        text1 = os.path.join(out_dir, "model.coil")
        r = subprocess.run([args.coil, "inspect", model, "--graph"], capture_output=True, text=True, timeout=args.timeout)
        if r.returncode != 0:
            res.update(status="fail", kind=classify_error(r.returncode, r.stderr), detail=r.stderr.strip().splitlines()[0] if r.stderr.strip() else "rc %d" % r.returncode)
            return res
        with open(text1, "w") as f:
            f.write(r.stdout)
        r2 = subprocess.run([args.coil, "inspect", text1, "--graph"], capture_output=True, text=True, timeout=args.timeout)
        if r2.returncode != 0:
            res.update(status="fail", kind=classify_error(r2.returncode, r2.stderr) if r2.returncode not in (1,) else "text-roundtrip", detail="printed text does not parse: " + (r2.stderr.strip().splitlines() or ["?"])[0])
            return res
        if r2.stdout != r.stdout:
            res.update(status="fail", kind="text-roundtrip", detail="text changes after a round trip")
            return res
        model = text1
    if args.mode == "compile":
        pkg = os.path.join(out_dir, "pkg")
        cmd = [args.coil, "compile", model, "-o", pkg, "--device", args.device]
        if args.arch:
            cmd += ["--arch", args.arch]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            res.update(status="fail", kind="timeout", detail="compile: no result in %d s" % args.timeout)
            return res
        if r.returncode != 0:
            lines = r.stderr.strip().splitlines()
            res.update(status="fail", kind=classify_error(r.returncode, r.stderr), detail="compile: " + (lines[0] if lines else "rc %d" % r.returncode))
            if res["kind"] == "crash":
                res["detail"] = "compile: exit status %d: %s" % (r.returncode, " | ".join(lines[-3:]))
            return res
        model = pkg
    for k in range(meta["datasets"]):
        out = os.path.join(out_dir, "got%d.npz" % k)
        if os.path.exists(out):
            os.remove(out)
        verb = "run" if args.mode == "compile" else "interpret"
        cmd = [args.coil, verb, model, "--inputs", os.path.join(d, "in%d.npz" % k), "--outputs", out]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            res.update(status="fail", kind="timeout", detail="no result in %d s" % args.timeout)
            return res
        if r.returncode != 0:
            lines = r.stderr.strip().splitlines()
            res.update(status="fail", kind=classify_error(r.returncode, r.stderr), detail=(lines[0] if lines else "rc %d" % r.returncode))
            if res["kind"] == "crash":
                res["detail"] = "exit status %d: %s" % (r.returncode, " | ".join(lines[-3:]))
            return res
        try:
            got = load_npz(out)
        except Exception as e:  # noqa: BLE001 - any unreadable output is a failure
            res.update(status="fail", kind="bad-output", detail="unreadable outputs: %s" % e)
            return res
        want = load_npz(os.path.join(d, "want%d.npz" % k))
        if args.mode == "ort":
            if compare_with_ort(res, got, out_dir, k, want, meta):
                continue
            return res
        diff = compare(got, want, meta["rtol"], meta["atol"])
        if diff:
            res.update(status="fail", kind="mismatch", detail=diff)
            return res
    return res


def generate_old_opsets(args, data_dir, lo, hi):
    """Writes the old-opset tests (once per onnx version) and runs them through onnxruntime;
    returns the generation report."""
    import old_opset_tests

    marker = os.path.join(data_dir, ".complete")
    if not os.path.exists(marker):
        try:
            import onnxruntime  # noqa: F401 - the workers use it
        except ImportError as e:
            raise SystemExit("error: --opsets needs the onnxruntime package to validate the tests: %s" % e)
        if os.path.exists(data_dir):
            shutil.rmtree(data_dir)
        os.makedirs(data_dir)
        t = time.time()
        names = old_opset_tests.generate(data_dir, lo, hi, save_npz, to_numpy)
        todo = [(n, os.path.join(data_dir, n), json.load(open(os.path.join(data_dir, n, "meta.json")))) for n in names]
        ort_root = os.path.join(data_dir, ".ort")
        run_ort_phase(args, todo, ort_root)
        old_opset_tests.mark_ort(data_dir, names, ort_root, compare, load_npz)
        shutil.rmtree(ort_root)
        print("generated %d old-opset tests in %.0f s" % (len(names), time.time() - t))
        open(marker, "w").close()
    return json.load(open(os.path.join(data_dir, "report.json")))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--ort-worker":
        return ort_worker(sys.argv[2])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--coil", required=True)
    ap.add_argument("--mode", choices=["interpret", "text", "ort", "compile"], default="interpret")
    ap.add_argument("--work", required=True, help="folder for generated data and outputs")
    ap.add_argument("--reference-baseline", help="baseline of another mode whose passing tests this mode should pass too (reported)")
    ap.add_argument("--ops", help="comma-separated op types to run (default: all)")
    ap.add_argument("--filter", help="regex on test names")
    ap.add_argument("--exclude", help="exclusion file: 'test_name  reason' per line")
    ap.add_argument("--baseline", help="file of test names that must pass")
    ap.add_argument("--update-baseline", action="store_true")
    ap.add_argument("--min-supported-rate", type=float, default=0.0)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="compile mode: the device to compile for and run on")
    ap.add_argument("--arch", help="compile mode, cuda: GPU architectures (e.g. sm_90a)")
    ap.add_argument("-j", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--opsets", help="LO-HI: the node tests derived at opsets LO..HI (see above) instead of the usual ones")
    ap.add_argument("--only-converted", action="store_true",
                    help="with --opsets: only the tests in which coil converts a node of an older op version "
                         "('coil inspect' says so); the others import to the graph of the test they come from")
    ap.add_argument("--table", action="store_true", help="print the per-op table")
    ap.add_argument("--failures", type=int, default=40, help="how many failures to print")
    args = ap.parse_args()

    import onnx

    if args.mode == "ort":
        try:
            import onnxruntime  # noqa: F401 - checked here, used by the worker processes
        except ImportError as e:
            print("error: mode 'ort' needs the onnxruntime package (pip install onnxruntime): %s" % e)
            return 1
    data_dir = os.path.join(args.work, "data-onnx-" + onnx.__version__)
    t0 = time.time()
    old_report = None
    if args.opsets:
        lo, _, hi = args.opsets.partition("-")
        data_dir += "-opsets%d-%d" % (int(lo), int(hi or lo))
        old_report = generate_old_opsets(args, data_dir, int(lo), int(hi or lo))
    else:
        generate(data_dir)
    excluded = {}
    if args.exclude and os.path.exists(args.exclude):
        for line in open(args.exclude):
            line = line.strip()
            if line and not line.startswith("#"):
                parts = line.split(None, 1)
                name, _, mode = parts[0].partition("@")
                if not mode or mode == args.mode or (mode == "cuda" and args.device == "cuda"):
                    excluded[name] = parts[1] if len(parts) > 1 else "(no reason given)"
    ops = set(args.ops.split(",")) if args.ops else None
    tests = []
    for name in sorted(os.listdir(data_dir)):
        d = os.path.join(data_dir, name)
        if name.startswith("."):
            continue
        if not os.path.isdir(d):
            continue
        meta = json.load(open(os.path.join(d, "meta.json")))
        if ops and meta["op"] not in ops:
            continue
        if args.filter and not re.search(args.filter, name):
            continue
        tests.append((name, d, meta))

    if args.only_converted:
        def converts(t):
            model = os.path.join(t[1], "model.onnx")
            if not os.path.exists(model):
                return False
            r = subprocess.run([args.coil, "inspect", model], capture_output=True, text=True, timeout=args.timeout)
            return r.returncode == 0 and re.search(r"; converted \d+ nodes", r.stdout) is not None
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.j)) as ex:
            keep = list(ex.map(converts, tests))
        tests = [t for t, k in zip(tests, keep) if k]

    results = []
    todo = []
    for name, d, meta in tests:
        if meta["skip"]:
            results.append({"name": name, "op": meta["op"], "status": "skip", "detail": meta["skip"]})
        elif name in excluded:
            results.append({"name": name, "op": meta["op"], "status": "skip", "detail": "excluded: " + excluded[name]})
        else:
            todo.append((name, d, meta))
    if args.mode == "ort":
        run_ort_phase(args, todo)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.j)) as ex:
        for r in ex.map(lambda t: run_one(args, *t), todo):
            results.append(r)
    results.sort(key=lambda r: r["name"])

    counts = collections.Counter(r["status"] for r in results)
    kinds = collections.Counter(r.get("kind") for r in results if r["status"] == "fail")
    per_op = collections.defaultdict(collections.Counter)
    for r in results:
        per_op[r["op"]][r["status"]] += 1
        if r["status"] == "fail" and r.get("kind") == "unsupported":
            per_op[r["op"]]["unsupported"] += 1
    unsupported = kinds.get("unsupported", 0)
    supported_total = counts["pass"] + counts["fail"] - unsupported
    rate = counts["pass"] / supported_total if supported_total else 1.0

    fails = [r for r in results if r["status"] == "fail"]
    shown = [r for r in fails if r.get("kind") != "unsupported"][: args.failures]
    for r in shown:
        print("FAIL %s [%s] %s: %s" % (r["name"], r["op"], r.get("kind"), r["detail"]))
    if args.mode == "ort":
        for r in results:
            if r["status"] == "ort-disagrees":
                print("ORT-DISAGREES %s [%s]: %s" % (r["name"], r["op"], r["detail"]))
        for r in results:
            if r["status"] == "ort-unavailable":
                print("ORT-UNAVAILABLE %s [%s]: %s" % (r["name"], r["op"], r["detail"]))
    if args.table and args.mode == "ort":
        print("\n%-32s %6s %6s %6s %6s %8s %8s" % ("op", "pass", "fail", "unsup", "skip", "ort-unav", "ort-dis"))
        for op in sorted(per_op):
            c = per_op[op]
            print("%-32s %6d %6d %6d %6d %8d %8d" % (op, c["pass"], c["fail"] - c["unsupported"], c["unsupported"], c["skip"],
                                                   c["ort-unavailable"], c["ort-disagrees"]))
    elif args.table:
        print("\n%-32s %6s %6s %6s %6s" % ("op", "pass", "fail", "unsup", "skip"))
        for op in sorted(per_op):
            c = per_op[op]
            print("%-32s %6d %6d %6d %6d" % (op, c["pass"], c["fail"] - c["unsupported"], c["unsupported"], c["skip"]))
    print("\nfailure kinds: " + ", ".join("%s %d" % (k, v) for k, v in sorted(kinds.items())))
    print("supported-op pass rate: %.1f%% (%d of %d tests whose ops coil supports; %d tests fail as unsupported)" % (
        100 * rate, counts["pass"], supported_total, unsupported))
    print("onnx %s, mode %s, %.0f s" % (onnx.__version__, args.mode, time.time() - t0))
    if old_report is not None:
        print("opsets %s: %d tests generated (%d derived from node tests, %d written for old-only behaviour), "
              "%d pass onnxruntime; %d derived tests left out for want of an equivalent form (report.json)" % (
                  args.opsets, old_report["generated"], old_report["derived"], old_report["handwritten"],
                  old_report["onnxruntime_passes"], len(old_report["left_out"])))
        by_opset = collections.defaultdict(collections.Counter)
        for r in results:
            by_opset[r["name"].rsplit("_opset", 1)[-1]][r["status"]] += 1
        print("by opset: " + ", ".join("%s: %d/%d" % (o, c["pass"], c["pass"] + c["fail"]) for o, c in sorted(by_opset.items(), key=lambda kv: int(kv[0]))))
    with open(os.path.join(args.work, "results-%s.json" % args.mode), "w") as f:
        json.dump(results, f, indent=1)
    print("conformance: %d passed, %d failed, %d skipped" % (counts["pass"], counts["fail"], counts["skip"]))
    if args.mode == "ort":
        also = 0
        for r in results:
            ort_json = os.path.join(args.work, "out", r["name"], "ort.json")
            if r["status"] == "fail" and os.path.exists(ort_json) and json.load(open(ort_json))["status"] != "ok":
                also += 1
        print("onnxruntime: %d ort-unavailable, %d ort-disagrees (neither passed nor failed); "
              "onnxruntime cannot run %d of the failed tests either" % (counts["ort-unavailable"], counts["ort-disagrees"], also))

    status = 0
    crashes = [r for r in results if r.get("kind") == "crash"]
    if crashes:
        print("error: %d tests crashed coil: %s" % (len(crashes), ", ".join(r["name"] for r in crashes[:20])))
        status = 1
    if args.baseline:
        passed = {r["name"] for r in results if r["status"] == "pass"}
        if args.update_baseline:
            with open(args.baseline, "w") as f:
                f.write("# node tests that pass in mode '%s' (scripts/conformance.py --update-baseline)\n" % args.mode)
                for n in sorted(passed):
                    f.write(n + "\n")
            print("baseline: wrote %d tests to %s" % (len(passed), args.baseline))
        elif os.path.exists(args.baseline):
            ran = {r["name"] for r in results}
            want = [l.strip() for l in open(args.baseline) if l.strip() and not l.startswith("#")]
            regressed = [n for n in want if n in ran and n not in passed]
            if regressed:
                print("error: %d baseline tests no longer pass: %s" % (len(regressed), ", ".join(regressed[:30])))
                status = 1
    if args.reference_baseline and os.path.exists(args.reference_baseline):
        # Tests that pass in the reference mode (e.g. interpret) must pass here too, except
        # those excluded for this mode (each exclusion carries its reason).
        ref = [l.strip() for l in open(args.reference_baseline) if l.strip() and not l.startswith("#")]
        passed = {r["name"] for r in results if r["status"] == "pass"}
        byname = {r["name"]: r for r in results}
        ran_ref = [n for n in ref if n in byname]
        excl = [n for n in ran_ref if byname[n]["status"] == "skip"]
        missing = [n for n in ran_ref if n not in passed and byname[n]["status"] != "skip"]
        print("reference %s: %d tests; %d pass here, %d excluded here (%.1f%%), %d fail here" % (
            os.path.basename(args.reference_baseline), len(ran_ref), len(ran_ref) - len(excl) - len(missing),
            len(excl), 100.0 * len(excl) / max(1, len(ran_ref)), len(missing)))
    if rate < args.min_supported_rate:
        print("error: supported-op pass rate %.1f%% is below %.1f%%" % (100 * rate, 100 * args.min_supported_rate))
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
