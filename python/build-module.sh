#!/usr/bin/env bash
# Builds the Python module `coil` for another Python than coil's build uses (the GPU machine has
# Python 3.12, this machine builds coil with its python3), into OUT/coil:
#   python/build-module.sh PYTHON OUT [BUILD]      e.g. python/build-module.sh python3.12 build/python-gpu
# PYTHON needs its headers (no packages); nanobind comes from coil's build Python (pip), the
# runtime and the compiler from BUILD/lib/libcoil_{runtime,compiler}.so (default BUILD=build).
# Use it with
#   PYTHONPATH=OUT LD_LIBRARY_PATH=BUILD/lib python3.12 -c "import coil"
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${1:?usage: build-module.sh PYTHON OUT [BUILD]}
OUT=$(mkdir -p "${2:?usage: build-module.sh PYTHON OUT [BUILD]}" && cd "$2" && pwd)
BUILD=$(cd "${3:-$ROOT/build}" && pwd)
PYEXE=$(command -v "$PY")
VER=$("$PYEXE" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
NB=$(python3 -m nanobind --cmake_dir)
cmake -S "$ROOT/python/standalone" -B "$OUT/.build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPython_EXECUTABLE="$PYEXE" -DCOIL_PYTHON_VERSION="$VER" -DCOIL_NANOBIND_DIR="$NB" \
  -DCOIL_RUNTIME_LIBRARY="$BUILD/lib/libcoil_runtime.so" \
  -DCOIL_COMPILER_LIBRARY="$BUILD/lib/libcoil_compiler.so" -DCOIL_OUT_DIR="$OUT" \
  -DCMAKE_CXX_COMPILER_LAUNCHER="$(command -v ccache || true)" >/dev/null
ninja -C "$OUT/.build" >/dev/null
cp "$ROOT"/python/coil/*.py "$OUT/coil/"
rm -rf "$OUT/.build"
echo "python/build-module.sh: $(ls "$OUT"/coil/_coil*.so) for Python $VER"
