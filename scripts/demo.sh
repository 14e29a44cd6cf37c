#!/usr/bin/env bash
# README command 1: set up, build, and run coil on the example model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
set -x
build/bin/coil inspect examples/mlp.onnx
build/bin/coil interpret examples/mlp.onnx --inputs examples/mlp_inputs.npz --outputs /tmp/coil-demo-outputs.npz
