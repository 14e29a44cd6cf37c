#!/usr/bin/env bash
# Assembles build-gpu/: what the GPU machine needs to run scripts/gpu-check without building
# coil there (it lacks libzip and the OpenMP OpenBLAS): stripped binaries, the libraries coil
# builds, coil's headers (generated code includes them), and libzip. Carry build-gpu and run
#   BUILD=build-gpu LD_LIBRARY_PATH=build-gpu/lib scripts/gpu-check
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT_DIR:-build-gpu}
rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/lib"
for b in coil coil_gpu_tests coil_unittests; do
  [ -x "$BUILD/bin/$b" ] && strip -o "$OUT/bin/$b" "$BUILD/bin/$b"
done
for l in "$BUILD"/lib/*.so; do strip -o "$OUT/lib/$(basename "$l")" "$l"; done
cp -r include "$OUT/include"
cp -L "$(ldd "$BUILD/bin/coil" | awk '/libzip.so/ {print $3}')" "$OUT/lib/"
# The CUTLASS headers (pip nvidia-cutlass here; the GPU machine has none) as one archive: 27 MB of
# headers are 1 MB of xz. There: mkdir -p /tmp/cutlass && tar -xJf build-gpu/cutlass-include.tar.xz
# -C /tmp/cutlass && export COIL_CUTLASS_DIR=/tmp/cutlass/include
CUTLASS_SRC=$(python3 -c 'import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), "source"))' 2>/dev/null || true)
if [ -n "$CUTLASS_SRC" ] && [ -f "$CUTLASS_SRC/include/cutlass/cutlass.h" ]; then
  tar -C "$CUTLASS_SRC" -cJf "$OUT/cutlass-include.tar.xz" include
else
  echo "gpu-bundle: no CUTLASS headers here (pip install nvidia-cutlass): --gemm cutlass will not work there"
fi
# The Python module for the GPU machine's Python 3.12 (PYTHONPATH=build-gpu/python there), when
# a Python 3.12 with headers is here (COIL_GPU_PYTHON names another).
GPY=${COIL_GPU_PYTHON:-}
if [ -z "$GPY" ]; then
  for c in $(command -v python3.12 || true) "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3; do
    if [ -x "$c" ] && "$c" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
      GPY=$c
      break
    fi
  done
fi
if [ -n "$GPY" ] && [ -f "$BUILD/lib/libcoil_runtime.so" ]; then
  python/build-module.sh "$GPY" "$OUT/python" "$BUILD" || echo "gpu-bundle: no Python module for $GPY"
fi
du -sh "$OUT"
