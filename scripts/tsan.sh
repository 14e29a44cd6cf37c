#!/usr/bin/env bash
# The runtime under ThreadSanitizer (issue 15): builds libcoil_runtime and the concurrency test
# (test/threads/runtime_threads.cpp) with -fsanitize=thread into $2 (default build-tsan) -- only
# those targets, not the compiler -- compiles its two packages with the normal build's coil ($1,
# default build/bin/coil), and runs the test. Any ThreadSanitizer report fails it
# (halt_on_error). OMP_NUM_THREADS=1: libgomp is not instrumented, and the runtime's own
# synchronization is what is checked.
set -euo pipefail
cd "$(dirname "$0")/.."
COIL=$(realpath "${1:-build/bin/coil}")
B=${2:-build-tsan}
if [ ! -f "$B/build.ninja" ]; then
  cmake -S . -B "$B" -G Ninja -DCOIL_TSAN=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOIL_NO_CUDA=ON \
    -DPython3_EXECUTABLE="$(command -v python3)" >/dev/null
fi
ninja -C "$B" -j "$(nproc)" coil_runtime coil_runtime_threads | grep -v '^\[' || true
W="$B/tsan-work"
rm -rf "$W"
mkdir -p "$W"
cat >"$W/nonzero.coil" <<'COIL'
graph @nz(%x: f32[N, 4]) -> (%idx, %y) {
  symbol N in [1, 64]
  %r = Relu(%x) : f32[N, 4]
  %idx = NonZero(%r) : i64[2, K]
  %y = Sigmoid(%r) : f32[N, 4]
}
COIL
for m in examples/mlp.onnx "$W/nonzero.coil"; do
  out="$W/$(basename "${m%.*}").pkg"
  COIL_CACHE_DIR=off "$COIL" compile "$m" -o "$out" >"$W/compile.log" 2>&1 || { cat "$W/compile.log"; exit 1; }
done
export OMP_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
"$B/bin/coil_runtime_threads" "$W/mlp.pkg" "$W/nonzero.pkg"
