#!/usr/bin/env bash
# Runs the GPU test executable, or skips (exit 77, ctest's SKIP_RETURN_CODE) where no NVIDIA GPU
# and driver exist.
set -uo pipefail
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu tests skipped: no NVIDIA GPU on this machine (nvidia-smi finds none)"
  exit 77
fi
exec "$@"
