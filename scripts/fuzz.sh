#!/usr/bin/env bash
# Builds (if needed) and runs one libFuzzer target for SECONDS seconds.
#
# usage: scripts/fuzz.sh TARGET SECONDS [LIBFUZZER_OPTION...]
#   TARGET: onnx | text | npz | metadata | evt | plans   (test/fuzz/fuzz_TARGET.cpp)
#   scripts/fuzz.sh build                         builds all six and exits
# Exit status: 0 no crash, 1 a crash (or a build failure), 77 clang missing (ctest: skipped).
#
# The targets build with clang, coverage instrumentation, ASan and UBSan in their own folder
# ($COIL_FUZZ_BUILD, default build-fuzz; ccache shared with the other builds). A run starts from
# the committed seeds, test/fuzz/corpus/TARGET (read only), plus the inputs earlier runs found,
# $COIL_FUZZ_BUILD/corpus/TARGET, where new ones go. A crash, a sanitizer report, an internal
# error or a non-user error on bad input stops the run with exit status 1 and leaves the input in
# $COIL_FUZZ_BUILD/artifacts/TARGET/ (minimize it with -minimize_crash=1 -runs=10000 and commit
# it to test/fuzz/corpus/TARGET after fixing the bug). The last line printed is a summary:
#   fuzz TARGET: N executions in S s, corpus C inputs, no crash
set -euo pipefail
cd "$(dirname "$0")/.."
B=${COIL_FUZZ_BUILD:-build-fuzz}
TARGETS="onnx text npz metadata evt plans"
target=${1:?usage: scripts/fuzz.sh TARGET SECONDS (TARGET: $TARGETS, or build)}

if ! command -v "${COIL_FUZZ_CXX:-clang++}" >/dev/null; then
  echo "fuzz.sh: ${COIL_FUZZ_CXX:-clang++} not found (apt install clang): skipped" >&2
  exit 77
fi
if [ ! -f "$B/build.ninja" ]; then
  CC=${COIL_FUZZ_CC:-clang} CXX=${COIL_FUZZ_CXX:-clang++} \
    cmake -S . -B "$B" -G Ninja -DCOIL_FUZZ=ON -DCOIL_NO_CUDA=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPython3_EXECUTABLE="$(command -v python3)" >/dev/null
fi
build() {
  if ! ninja -C "$B" -j "${COIL_FUZZ_JOBS:-2}" "$@" >"$B/build.log" 2>&1; then
    grep -v '^\[' "$B/build.log" | tail -40 >&2
    echo "fuzz.sh: building $* failed (log $B/build.log)" >&2
    exit 1
  fi
}
if [ "$target" = build ]; then
  build fuzz_targets
  exit 0
fi
case " $TARGETS " in *" $target "*) ;; *) echo "fuzz.sh: unknown target '$target' ($TARGETS)" >&2; exit 2 ;; esac
seconds=${2:?usage: scripts/fuzz.sh TARGET SECONDS}
shift 2
build "coil_fuzz_$target"

work="$B/corpus/$target"
art="$B/artifacts/$target"
mkdir -p "$work" "$art"
log="$B/fuzz-$target.log"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
set +e
"$B/bin/coil_fuzz_$target" "$work" "test/fuzz/corpus/$target" \
  -max_total_time="$seconds" -timeout=20 -rss_limit_mb=3072 -max_len=1048576 \
  -artifact_prefix="$art/" -print_final_stats=1 "$@" 2>&1 | tee "$log" | grep -v '^#[0-9].*\(NEW\|REDUCE\|pulse\)'
rc=${PIPESTATUS[0]}
set -e
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
secs=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
corpus=$(ls "$work" | wc -l)
if [ "$rc" -eq 0 ]; then
  echo "fuzz $target: ${execs:-?} executions in $seconds s (${secs:-?}/s), corpus $corpus inputs, no crash"
else
  echo "fuzz $target: FAILED (exit $rc) after ${execs:-?} executions; input in $art/ (log $log)"
  exit 1
fi
