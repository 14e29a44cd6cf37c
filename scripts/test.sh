#!/usr/bin/env bash
# README command 2: set up, build, and run the whole test suite (every ctest label).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD=${COIL_BUILD_DIR:-build}
cd "$BUILD"
ctest --output-on-failure -j 2 "$@"
