#!/usr/bin/env bash
# Builds coil with ASan+UBSan into $1 (default build-sanitize) and runs the bad-input catalogue
# with it: every case must be rejected with its message and no sanitizer report.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-sanitize}
if [ ! -f "$B/build.ninja" ]; then
  cmake -S . -B "$B" -G Ninja -DCOIL_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug \
    -DPython3_EXECUTABLE="$(command -v python3)" >/dev/null
fi
ninja -C "$B" -j "$(nproc)" coil | grep -v '^\[' || true
python3 test/errors/catalogue.py --coil "$B/bin/coil" --work "$B/errors-work"
