#!/usr/bin/env bash
# The GPU half of the debug printer tests (issue 5), on CUDA packages (`coil compile --device
# cuda`), with a one-line summary at the end; exits 1 on any failure.
#   compile   the CUDA package compiles; `coil compile` and `coil inspect --kernels` name its
#             kernels and launches; an unknown COIL_DEBUG_KERNELS name fails the load with the
#             valid names (these run without a GPU too)
#   lit       test/cli/debug-printer.test with --device cuda (test/cli/Inputs/minilit.py: the
#             same RUN lines as the CPU lit test): every mode (off, 1/save, 2/print, 3/names),
#             the filter in each mode, the NaN count of a NaN-producing input, the .npy files
#             loaded by numpy, the unknown-filter and bad-mode errors
#   values    COIL_DEBUG_PRINTER=save of the CUDA and the CPU package on the same input: every
#             .npy round-trips through numpy and matches the CPU package's file within tolerance
#   nan       print of a second input with NaNs in several rows: the NaN counts printed for the
#             input and the first kernel's output are the true ones
#   pywrapper the Python wrapper (src/wrapper.py) of the CUDA package with COIL_DEBUG_PRINTER=print
#             and names: device values printed, launches in order
#   verify    `coil verify --kernels --device cuda`: every launch's device outputs against the Loop
#             IR evaluator, all ok; then a package whose k1_max launch is followed by a write of
#             element 1 (test/cli/Inputs/corrupt_cuda_launch.py): verify names k1_max
#   python-gpu python/tests/test_python_gpu.py (ctest python-gpu): wrapper.py against model.so on
#             CUDA packages (mlp with its extern GEMM, a dynamic batch, NonZero and Unique as
#             host-fallback externs, every dtype), outputs bit for bit equal; an extern failure
#             naming its node; the module on torch/cupy DLPack tensors
# Without an NVIDIA GPU only `compile` runs (summary says so; exit 77 when it passed).
#   scripts/gpu-printer-check.sh            (BUILD=build-gpu on the GPU machine: from gpu-bundle)
# Environment: BUILD (default build), WORK (default /tmp/coil-gpu-printer), PYTHON (python3),
# PYTHONPATH for the Python steps (default BUILD/python), COIL_TUNE (default 0).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
WORK=${WORK:-/tmp/coil-gpu-printer}
PY=${PYTHON:-python3}
COIL=$BUILD/bin/coil
export LD_LIBRARY_PATH=$BUILD/lib:${LD_LIBRARY_PATH:-}
export PYTHONPATH=${PYTHONPATH:-$(cd "$BUILD" && pwd)/python}
# No config timing at compile time (what is checked here does not depend on the configs chosen).
export COIL_TUNE=${COIL_TUNE:-0}
rm -rf "$WORK"
mkdir -p "$WORK"
[ -x "$COIL" ] || { echo "gpu-printer-check: $COIL is not built"; exit 2; }
PASS=0
FAIL=0
FAILED=()
step() { # step NAME COMMAND...: runs it, log in $WORK/NAME.log
  local name=$1
  shift
  if "$@" >"$WORK/$name.log" 2>&1; then
    PASS=$((PASS + 1))
    echo "ok    $name"
  else
    FAIL=$((FAIL + 1))
    FAILED+=("$name")
    echo "FAIL  $name"
    tail -n 40 "$WORK/$name.log" | sed 's/^/      /'
  fi
}
MLP=examples/mlp.onnx
IN=examples/mlp_inputs.npz
CPU_PKG=$WORK/mlp-cpu.pkg
GPU_PKG=$WORK/mlp-cuda.pkg

check_compile() {
  local out
  out=$("$COIL" compile "$MLP" -o "$GPU_PKG" --device cuda --verbose 2>/dev/null) || return 1
  echo "$out"
  grep -qx 'launches (COIL_DEBUG_KERNELS names): k0_sum coil_cuda_gemm_bias_f32_0 coil_cuda_gemm_bias_f32_1 k1_max' <<<"$out" ||
    { echo "coil compile does not list the launches"; return 1; }
  out=$("$COIL" inspect "$MLP" --kernels --device cuda) || return 1
  echo "$out"
  for k in k0_sum coil_cuda_gemm_bias_f32_0 coil_cuda_gemm_bias_f32_1 k1_max; do
    grep -q "^$k " <<<"$out" || { echo "coil inspect --kernels --device cuda lacks $k"; return 1; }
  done
  "$COIL" compile "$MLP" -o "$CPU_PKG" --device cpu >/dev/null
}

check_unknown_filter() {
  local mode out
  for mode in save print names 1 2 3; do
    if out=$(COIL_DEBUG_PRINTER=$mode COIL_DEBUG_KERNELS=k1_max,k9_nope "$COIL" run "$GPU_PKG" \
      --inputs "$IN" 2>&1); then
      echo "mode $mode: the run accepted an unknown kernel name"
      return 1
    fi
    echo "mode $mode: $out"
    grep -qF "COIL_DEBUG_KERNELS names 'k9_nope', which is not a launch of model 'mlp'; valid names: k0_sum, coil_cuda_gemm_bias_f32_0, coil_cuda_gemm_bias_f32_1, k1_max (or an extern function for all its launches: coil_cuda_gemm_bias_f32)" <<<"$out" ||
      { echo "mode $mode: the message does not list the valid names"; return 1; }
  done
}

check_values() {
  local dev
  for dev in cpu cuda; do
    COIL_DEBUG_PRINTER=save COIL_DEBUG_DIR="$WORK/save-$dev" "$COIL" run "$WORK/mlp-$dev.pkg" \
      --inputs "$IN" --outputs "$WORK/out-$dev.npz" || return 1
  done
  "$PY" - "$WORK/save-cpu" "$WORK/save-cuda" "$WORK/out-cpu.npz" "$WORK/out-cuda.npz" <<'EOF'
import os, sys
import numpy as np
cpu_dir, gpu_dir, out_cpu, out_gpu = sys.argv[1:5]
gpu = sorted(f for f in os.listdir(gpu_dir) if f.endswith(".npy"))
cpu = sorted(f for f in os.listdir(cpu_dir) if f.endswith(".npy"))
assert [f.replace("coil_cuda_", "coil_cpu_") for f in gpu] == cpu, (gpu, cpu)
worst = 0.0
for g in gpu:
    a = np.load(os.path.join(gpu_dir, g))   # numpy loads every file
    b = np.load(os.path.join(cpu_dir, g.replace("coil_cuda_", "coil_cpu_")))
    assert a.dtype == b.dtype and a.shape == b.shape, (g, a.dtype, a.shape, b.dtype, b.shape)
    # Before a launch, the buffers it writes hold whatever was there: not compared.
    unwritten = g.startswith("before_") and any(
        g.endswith(s) for s in ("_out0.npy", "_relu.npy", "_softmax.npy", "_layernormalization.npy"))
    if not unwritten:
        assert np.isfinite(a).all(), g
        assert np.allclose(a, b, rtol=1e-4, atol=1e-5), (g, float(np.abs(a - b).max()))
        worst = max(worst, float(np.abs(a.astype(np.float64) - b).max()))
    np.save(os.path.join(gpu_dir, "roundtrip.npy"), a)
    assert np.array_equal(np.load(os.path.join(gpu_dir, "roundtrip.npy")), a), g
    os.remove(os.path.join(gpu_dir, "roundtrip.npy"))
pg, pc = np.load(out_gpu)["probs"], np.load(out_cpu)["probs"]
assert np.allclose(pg, pc, rtol=1e-4, atol=1e-5)
assert np.array_equal(np.load(os.path.join(gpu_dir, "after_k1_max_softmax.npy")), pg)
print(f"{len(gpu)} files match the CPU package's (max abs difference {worst:.3g})")
EOF
}

check_nan() {
  "$PY" -c "
import numpy as np
x = np.load('$IN')['x'].copy()
x[1, 0] = np.nan; x[1, 7] = np.nan; x[3, 2] = np.nan
np.savez('$WORK/nan.npz', x=x)" || return 1
  local out
  out=$(COIL_DEBUG_PRINTER=print COIL_DEBUG_KERNELS=k0_sum "$COIL" run "$GPU_PKG" --inputs "$WORK/nan.npz" 2>&1) ||
    return 1
  echo "$out"
  # The input has 3 NaNs; LayerNormalization spreads them over rows 1 and 3 (2 x 16).
  grep -A1 '^ *x: f32 shape \[4, 16\]' <<<"$out" | grep -q 'nan 3 inf 0' || { echo "input NaN count"; return 1; }
  grep -A1 '^ *layernormalization \[written\]: f32 shape \[4, 16\].*device cuda' <<<"$out" |
    grep -q 'nan 32 inf 0' || { echo "layernormalization NaN count"; return 1; }
}

check_pywrapper() {
  "$PY" -c "import coil.pywrapper" || { echo "the Python module coil is not importable (PYTHONPATH=$PYTHONPATH)"; return 1; }
  local out
  out=$(COIL_DEBUG_PRINTER=print COIL_DEBUG_KERNELS=k1_max "$PY" "$GPU_PKG/src/wrapper.py" "$IN" 2>&1) || { echo "$out"; return 1; }
  echo "$out"
  grep -q '^\[after_launch - k1_max - softmax\] dtype float32, shape \[4, 10\], strides \[10, 1\], device cuda' <<<"$out" ||
    { echo "print: k1_max's output"; return 1; }
  grep -q 'k0_sum' <<<"$out" && { echo "print: the filter let k0_sum through"; return 1; }
  out=$(COIL_DEBUG_PRINTER=names "$PY" "$GPU_PKG/src/wrapper.py" "$IN" 2>&1) || { echo "$out"; return 1; }
  echo "$out"
  [ "$(grep -c '_launch: ' <<<"$out")" = 8 ] || { echo "names: 8 lines expected"; return 1; }
  grep -q '^\[after_launch: coil_cuda_gemm_bias_f32_1\]' <<<"$out" || { echo "names: the second GEMM"; return 1; }
}

check_verify() { # issue 15: coil verify --kernels reads device memory on CUDA packages
  local out rc
  out=$("$COIL" verify "$MLP" --inputs "$IN" --kernels --device cuda 2>&1) || { echo "$out"; return 1; }
  echo "$out"
  for k in k0_sum coil_cuda_gemm_bias_f32_0 coil_cuda_gemm_bias_f32_1 k1_max; do
    grep -q "^  ok       launch $k: " <<<"$out" || { echo "verify --kernels: launch $k not ok"; return 1; }
  done
  grep -qx 'every launch matches the Loop IR evaluator' <<<"$out" || return 1
  # The softmax's element 1 overwritten after its launch (on the stream): verify names k1_max.
  "$PY" test/cli/Inputs/corrupt_cuda_launch.py "$GPU_PKG" "$WORK/mlp-cuda-bad.pkg" k1_max include || return 1
  out=$("$COIL" verify "$MLP" --inputs "$IN" --device cuda --package "$WORK/mlp-cuda-bad.pkg" 2>&1)
  rc=$?
  echo "$out"
  [ "$rc" -eq 3 ] || { echo "verify of the broken package: exit $rc, want 3"; return 1; }
  grep -q '^  ok       launch coil_cuda_gemm_bias_f32_1: ' <<<"$out" || return 1
  grep -q '^  DIVERGES launch k1_max: softmax relative error' <<<"$out" || return 1
  grep -qx 'first diverging launch: k1_max' <<<"$out" || return 1
  grep -q 'max abs error .* at \[0, 1\] (got 12345' <<<"$out" || { echo "the statistics do not show element [0, 1]"; return 1; }
}

step compile check_compile
step unknown-filter check_unknown_filter
if nvidia-smi -L >/dev/null 2>&1; then
  step lit "$PY" test/cli/Inputs/minilit.py test/cli/debug-printer.test --coil "$COIL" --device cuda \
    --work "$WORK/lit" --python "$PY"
  step values check_values
  step nan check_nan
  step pywrapper check_pywrapper
  step verify check_verify
  step python-gpu "$PY" python/tests/test_python_gpu.py --coil "$COIL" --work "$WORK/python-gpu"
  gpu="GPU steps run"
else
  gpu="GPU steps skipped (no NVIDIA GPU)"
fi
echo "gpu-printer-check: $PASS passed, $FAIL failed${FAILED[*]:+ (${FAILED[*]})}; $gpu"
[ "$FAIL" -eq 0 ] || exit 1
[ "$gpu" = "GPU steps run" ] || exit 77
exit 0
