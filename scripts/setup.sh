#!/usr/bin/env bash
# Installs coil's build and test dependencies (Debian 12) and builds coil into build/.
# Idempotent: packages already present are not reinstalled, and the build is incremental.
set -euo pipefail
cd "$(dirname "$0")/.."

# Without root this works where the system already has the packages: apt-get runs only for what
# is missing (through sudo when it needs no password); COIL_NO_APT=1 skips it (on other systems
# CMake names any dependency that is missing).
APT_PACKAGES=(cmake ninja-build g++ pkg-config libprotobuf-dev protobuf-compiler libzip-dev
              libgtest-dev llvm-14-tools libopenblas-dev libopenblas0-openmp libcli11-dev
              libssl-dev)
# Optional: faster rebuilds (ccache), `coil inspect --wrapper --svg` (graphviz), the emulated
# x86-64-v2 CPU of the `portable` test (qemu-user; it skips that part without).
APT_OPTIONAL=(ccache graphviz qemu-user)
missing=() optional=()
if [ "${COIL_NO_APT:-0}" != 1 ] && command -v dpkg >/dev/null; then
  for p in "${APT_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  for p in "${APT_OPTIONAL[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || optional+=("$p"); done
fi
APT=()
if [ "$(id -u)" -eq 0 ]; then
  APT=(apt-get)
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  APT=(sudo -n apt-get)
fi
if [ ${#missing[@]} -gt 0 ] || { [ ${#optional[@]} -gt 0 ] && [ ${#APT[@]} -gt 0 ]; }; then
  if [ ${#APT[@]} -eq 0 ]; then
    echo "setup: these system packages are missing: ${missing[*]}" >&2
    echo "setup: install them as root (apt-get install ${missing[*]} ${optional[*]}) and run" \
         "scripts/setup.sh again; everything else needs no root" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]} ${optional[*]}"
  DEBIAN_FRONTEND=noninteractive "${APT[@]}" update -qq
  DEBIAN_FRONTEND=noninteractive "${APT[@]}" install -y -qq "${missing[@]}" "${optional[@]}" >/dev/null
elif [ ${#optional[@]} -gt 0 ]; then
  echo "setup: optional packages not installed (no root): ${optional[*]}"
fi

PY=${PYTHON:-python3}
# pip installs into the active virtual environment, else (as root) the Python's own
# site-packages, else the user's (--user).
PIP=("$PY" -m pip install -q --disable-pip-version-check)
if [ "$(id -u)" -ne 0 ] && [ "$($PY -c 'import sys; print(sys.prefix == sys.base_prefix)')" = True ] &&
   [ ! -w "$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" ]; then
  PIP+=(--user)
fi
if ! $PY -c "import onnx, numpy, onnxruntime, lit" >/dev/null 2>&1 ||
   [ "$($PY -c 'import onnx; print(onnx.__version__)')" != "$(sed -n 's/^onnx==//p' requirements.txt)" ]; then
  echo "setup: installing Python packages from requirements.txt"
  "${PIP[@]}" -r requirements.txt
fi

# The Python module `coil` (python/, built into build/python/coil) is a nanobind extension;
# ml_dtypes (optional) gives bf16 arrays a real numpy dtype.
if ! $PY -c "import nanobind" >/dev/null 2>&1; then
  echo "setup: installing nanobind (the Python module's bindings)"
  "${PIP[@]}" nanobind
fi

# Optional: CUTLASS's headers (and its Python EVT tracer, for test/evt/cutlass_compare.py) from
# the nvidia-cutlass wheel (~6 MB). Without it `coil evt` still emits code; the nvcc sample of the
# evt-corpus test skips with a message.
if ! $PY -c "import cutlass_library" >/dev/null 2>&1; then
  echo "setup: installing the optional nvidia-cutlass package (CUTLASS headers)"
  "${PIP[@]}" nvidia-cutlass ||
    echo "setup: nvidia-cutlass not installed (optional; coil evt compile checks will skip)"
fi

BUILD=${COIL_BUILD_DIR:-build}
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DPython3_EXECUTABLE="$(command -v $PY)" >/dev/null
fi
echo "setup: building coil in $BUILD/"
ninja -C "$BUILD" -j "$(nproc)" | grep -v '^\[' || true
test -x "$BUILD/bin/coil"
