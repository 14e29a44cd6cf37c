#!/usr/bin/env bash
# scripts/sanitize-gpu.py without a GPU: CPU packages of a few conformance tests under the
# stand-in sanitizer (fake_compute_sanitizer.py). Checks that the self-test passes, that a clean
# run exits 0, and that a package the stand-in reports (as compute-sanitizer would report an
# out-of-bounds write or a race) fails the call with its first lines in the summary.
# usage: test_harness.sh COIL WORK
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
COIL=$1
WORK=$2
run() {
  python3 "$ROOT/scripts/sanitize-gpu.py" --coil "$COIL" --work "$WORK" --device cpu \
    --sanitizer "$HERE/fake_compute_sanitizer.py" --filter '^test_(relu|abs|softmax_axis_0)$' -j 2 --batch 2 "$@"
}
fail=0
out=$(run --selftest --fresh 2>&1); rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: clean run: exit $rc, expected 0"; fail=1; }
out=$(FAKE_SANITIZER_BROKEN='test_abs$' run --fresh 2>&1); rc=$?
echo "$out"
[ $rc -eq 1 ] || { echo "FAIL: run with test_abs reported: exit $rc, expected 1"; fail=1; }
echo "$out" | grep -q '^---- memcheck test_abs: errors' || { echo "FAIL: no memcheck report for test_abs"; fail=1; }
echo "$out" | grep -q '^---- racecheck test_abs: errors' || { echo "FAIL: no racecheck report for test_abs"; fail=1; }
echo "$out" | grep -q 'Invalid __global__ write' || { echo "FAIL: the first sanitizer lines are not shown"; fail=1; }
echo "$out" | grep -q 'memcheck : 3 packages: clean 2, errors 1' || { echo "FAIL: counts"; fail=1; }
# reported inside a batch process only (the stand-in matches the batch marker, not the package path)
out=$(FAKE_SANITIZER_BROKEN='begin test_relu$' run --fresh --tools memcheck 2>&1); rc=$?
echo "$out"
[ $rc -eq 1 ] || { echo "FAIL: run with test_relu reported in a batch only: exit $rc, expected 1"; fail=1; }
echo "$out" | grep -q 'reported in a batch run' || { echo "FAIL: no batch-only report for test_relu"; fail=1; }
# a run that hangs: killed after --timeout, counted as a timeout
out=$(FAKE_SANITIZER_HANG='test_abs$' run --fresh --tools memcheck --timeout 3 2>&1); rc=$?
echo "$out"
[ $rc -eq 1 ] || { echo "FAIL: run with test_abs hanging: exit $rc, expected 1"; fail=1; }
echo "$out" | grep -q 'memcheck : 3 packages: clean 2, errors 0, run-error 0, timeout 1' || { echo "FAIL: no timeout for test_abs"; fail=1; }
[ $fail -eq 0 ] && echo "sanitize harness: 1 passed, 0 failed" || echo "sanitize harness: 0 passed, 1 failed"
exit $fail
