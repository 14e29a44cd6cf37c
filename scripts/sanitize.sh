#!/usr/bin/env bash
# Builds coil with ASan+UBSan into $1 (default build-sanitize), then runs the bad-input
# catalogue and the fuzz tests (importer, text parser) with it: every case must be rejected with
# its message, and no sanitizer may report anything.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-sanitize}
if [ ! -f "$B/build.ninja" ]; then
  cmake -S . -B "$B" -G Ninja -DCOIL_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug \
    -DPython3_EXECUTABLE="$(command -v python3)" >/dev/null
fi
ninja -C "$B" -j "$(nproc)" coil coil_unittests | grep -v '^\[' || true
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
python3 test/errors/catalogue.py --coil "$B/bin/coil" --work "$B/errors-work"
"$B/bin/coil_unittests" --gtest_filter='*Fuzz*'
