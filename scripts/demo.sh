#!/usr/bin/env bash
# README command 1: set up, build, and run coil on the example model: inspect it, show what the
# compiler fuses, compile it into a package, run the package, and check it against the
# reference interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
PKG=${TMPDIR:-/tmp}/coil-demo-mlp.pkg
set -x
build/bin/coil inspect examples/mlp.onnx
build/bin/coil inspect examples/mlp.onnx --fusion
build/bin/coil compile examples/mlp.onnx -o "$PKG"
build/bin/coil run "$PKG" --inputs examples/mlp_inputs.npz --outputs "${TMPDIR:-/tmp}/coil-demo-outputs.npz"
build/bin/coil verify examples/mlp.onnx --inputs examples/mlp_inputs.npz
build/bin/coil bench "$PKG" --inputs examples/mlp_inputs.npz --iters 50
