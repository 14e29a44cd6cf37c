#!/usr/bin/env python3
"""Writes examples/mlp.onnx (a small MLP block with a dynamic batch) and examples/mlp_inputs.npz.

Weights are random (seeded), so the outputs are non-trivial. Run from the repository root."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(7)
D, H, C = 16, 32, 10


def init(name, *shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


nodes = [
    helper.make_node("LayerNormalization", ["x", "ln_g", "ln_b"], ["xn"], axis=-1, epsilon=1e-5, name="ln"),
    helper.make_node("MatMul", ["xn", "w1"], ["h0"], name="fc1"),
    helper.make_node("Add", ["h0", "b1"], ["h1"], name="fc1_bias"),
    helper.make_node("Relu", ["h1"], ["h2"], name="act"),
    helper.make_node("MatMul", ["h2", "w2"], ["o0"], name="fc2"),
    helper.make_node("Add", ["o0", "b2"], ["logits"], name="fc2_bias"),
    helper.make_node("Softmax", ["logits"], ["probs"], axis=-1, name="softmax"),
]
graph = helper.make_graph(
    nodes,
    "mlp",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", D])],
    [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", C])],
    [init("ln_g", D), init("ln_b", D), init("w1", D, H), init("b1", H), init("w2", H, C), init("b2", C)],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="coil-examples")
onnx.checker.check_model(model, full_check=True)
onnx.save(model, "examples/mlp.onnx")
np.savez("examples/mlp_inputs.npz", x=rng.standard_normal((4, D)).astype(np.float32))
print("wrote examples/mlp.onnx and examples/mlp_inputs.npz")
