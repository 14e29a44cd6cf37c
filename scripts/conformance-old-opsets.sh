#!/usr/bin/env bash
# The whole old-opset conformance suite: the node tests derived at opsets 7..12
# (scripts/old_opset_tests.py), interpreted and compiled, each against its baseline in
# test/conformance. ctest runs the interpreted half in full and the compiled half on the tests in
# which coil converts a node (conformance-opsets-compile, --only-converted); this runs all of it.
# Extra arguments go to scripts/conformance.py (e.g. --update-baseline, --filter REGEX, -j 4).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${COIL_BUILD_DIR:-build}
status=0
for mode in interpret compile; do
  COIL_CACHE_DIR=${COIL_CACHE_DIR:-$PWD/$BUILD/coil-cache} python3 scripts/conformance.py \
    --coil "$BUILD/bin/coil" --mode "$mode" --opsets 7-12 --work "$BUILD/conformance-opsets-full-$mode" \
    --exclude test/conformance/exclusions.txt \
    --baseline "test/conformance/baseline-opsets-$mode.txt" --table "$@" || status=1
done
exit $status
