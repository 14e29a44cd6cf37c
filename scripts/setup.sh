#!/usr/bin/env bash
# Installs coil's build and test dependencies (Debian 12, as root) and builds coil into build/.
# Idempotent: packages already present are not reinstalled, and the build is incremental.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(cmake ninja-build g++ pkg-config libprotobuf-dev protobuf-compiler libzip-dev
              libgtest-dev llvm-14-tools libopenblas-dev libopenblas0-openmp ccache graphviz
              libcli11-dev qemu-user)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if ! $PY -c "import onnx, numpy, onnxruntime, lit" >/dev/null 2>&1 ||
   [ "$($PY -c 'import onnx; print(onnx.__version__)')" != "$(sed -n 's/^onnx==//p' requirements.txt)" ]; then
  echo "setup: installing Python packages from requirements.txt"
  $PY -m pip install -q --disable-pip-version-check -r requirements.txt
fi

# The Python module `coil` (python/, built into build/python/coil) is a nanobind extension;
# ml_dtypes (optional) gives bf16 arrays a real numpy dtype.
if ! $PY -c "import nanobind" >/dev/null 2>&1; then
  echo "setup: installing nanobind (the Python module's bindings)"
  $PY -m pip install -q --disable-pip-version-check nanobind
fi

# Optional: CUTLASS's headers (and its Python EVT tracer, for test/evt/cutlass_compare.py) from
# the nvidia-cutlass wheel (~6 MB). Without it `coil evt` still emits code; the nvcc sample of the
# evt-corpus test skips with a message.
if ! $PY -c "import cutlass_library" >/dev/null 2>&1; then
  echo "setup: installing the optional nvidia-cutlass package (CUTLASS headers)"
  $PY -m pip install -q --disable-pip-version-check nvidia-cutlass ||
    echo "setup: nvidia-cutlass not installed (optional; coil evt compile checks will skip)"
fi

BUILD=${COIL_BUILD_DIR:-build}
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DPython3_EXECUTABLE="$(command -v $PY)" >/dev/null
fi
echo "setup: building coil in $BUILD/"
ninja -C "$BUILD" -j "$(nproc)" | grep -v '^\[' || true
test -x "$BUILD/bin/coil"
