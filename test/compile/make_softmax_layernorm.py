"""Writes a model: y = softmax(relu(x) + b) * layernorm(relu(x) + b), x: f32[N, 16]."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(3)
nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "b"], ["a"]),
         helper.make_node("Softmax", ["a"], ["s"], axis=-1),
         helper.make_node("LayerNormalization", ["a", "g", "bb"], ["ln"], axis=-1),
         helper.make_node("Mul", ["s", "ln"], ["y"])]
inits = [numpy_helper.from_array(rng.random(16).astype(np.float32), n) for n in ("b", "g", "bb")]
g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), sys.argv[1])
