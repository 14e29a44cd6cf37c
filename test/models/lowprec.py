#!/usr/bin/env python3
"""An fp32 ONNX model as an f16 or bf16 model, for the low-precision model checks.

What changes (every tensor of element type FLOAT becomes the low type T, integers and bools stay):
  - initializers, Constant values (`value` tensors, `value_float(s)`), ConstantOfShape values;
  - graph inputs and outputs, value_info;
  - the `to` of Cast and the `dtype` of ops that create tensors (EyeLike, Random*, ...).
Values are rounded to nearest even; finite f32 values beyond T's range (e.g. the float32 minimum
that exporters use for attention masks) saturate to T's largest finite value instead of becoming
infinite (an infinity times a zero mask gives NaN). The number of saturated values is reported.

Ops whose ONNX schema, at the model's opset, does not allow T on an input that becomes T (e.g.
Conv, MaxPool, GlobalAveragePool with bf16 before opset 22) stay in f32: Casts to f32 in front of
those inputs and Casts back to T behind their float outputs. Which tensors are float comes from
onnx shape inference over the fp32 model. Subgraphs (If, Loop, Scan) are not supported.

bf16 values are numpy uint16 arrays (the upper half of the f32 bits); `round_to` gives the
rounded values back as f32, so that a reference can run the fp32 model on the same inputs.

usage: lowprec.py MODEL.onnx OUT.onnx f16|bf16
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32 = TensorProto.FLOAT
LOW = {"f16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16}
TYPE_STR = {"f16": "tensor(float16)", "bf16": "tensor(bfloat16)"}
MAX = {"f16": 65504.0, "bf16": float(np.uint32(0x7F7F0000).view(np.float32))}


def f32_to_bf16_bits(a):
    """Round-to-nearest-even f32 -> bf16, as uint16 bits (NaN stays a quiet NaN)."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(a), np.uint16(0x7FC0), rounded).astype(np.uint16)


def bf16_bits_to_f32(u):
    return (np.asarray(u, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def saturate(a, dtype):
    """Finite values beyond the range of dtype clamped to its largest finite value; returns the
    array and how many values were clamped."""
    a = np.asarray(a, dtype=np.float32)
    big = np.isfinite(a) & (np.abs(a) > MAX[dtype])
    return np.where(big, np.sign(a) * np.float32(MAX[dtype]), a).astype(np.float32), int(big.sum())


def to_low(a, dtype):
    """f32 array -> (array coil reads as dtype: float16 or uint16 bf16 bits, saturated count)."""
    a, n = saturate(a, dtype)
    return (a.astype(np.float16) if dtype == "f16" else f32_to_bf16_bits(a)), n


def low_to_f32(a, dtype):
    return np.asarray(a, dtype=np.float16).astype(np.float32) if dtype == "f16" else bf16_bits_to_f32(a)


def round_to(a, dtype):
    """a rounded to dtype and back to f32."""
    return low_to_f32(to_low(a, dtype)[0], dtype)


def low_tensor(t, dtype, stats):
    """An f32 TensorProto as a dtype TensorProto with the same name."""
    a, n = to_low(numpy_helper.to_array(t), dtype)
    stats["saturated"] += n
    out = TensorProto()
    out.name = t.name
    out.dims.extend(t.dims)
    out.data_type = LOW[dtype]
    out.raw_data = np.ascontiguousarray(a).tobytes()
    return out


def float_names(model):
    """Names of the tensors of element type FLOAT in the fp32 model (after shape inference)."""
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    g = inferred.graph
    names = set()
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == F32:
            names.add(vi.name)
    for t in g.initializer:
        if t.data_type == F32:
            names.add(t.name)
    known = {vi.name for vi in list(g.input) + list(g.output) + list(g.value_info)} | {t.name for t in g.initializer}
    for n in g.node:
        for o in n.output:
            if o and o not in known:
                raise ValueError("lowprec: shape inference gives no type for '%s' (output of %s node '%s')" % (o, n.op_type, n.name))
    return names


def allows(node, opset, dtype, float_inputs):
    """Whether node's schema accepts dtype on every input in float_inputs (input positions)."""
    schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
    constraints = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    for k in float_inputs:
        if not schema.inputs:
            return False
        formal = schema.inputs[min(k, len(schema.inputs) - 1)]  # variadic: the last formal input
        allowed = constraints.get(formal.type_str, {formal.type_str})
        if TYPE_STR[dtype] not in allowed:
            return False
    return True


def convert(model, dtype):
    """The model with every FLOAT tensor as dtype ('f16' or 'bf16'); returns (model, stats)."""
    if dtype not in LOW:
        raise ValueError("lowprec: dtype must be f16 or bf16, got '%s'" % dtype)
    low = LOW[dtype]
    floats = float_names(model)
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    opset = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
    stats = {"saturated": 0, "kept_f32": {}, "casts": 0}

    for i, t in enumerate(g.initializer):
        if t.data_type == F32:
            g.initializer[i].CopyFrom(low_tensor(t, dtype, stats))
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == F32:
            vi.type.tensor_type.elem_type = low

    nodes = []
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH or a.type == onnx.AttributeProto.GRAPHS:
                raise ValueError("lowprec: %s node '%s' has a subgraph; not supported" % (n.op_type, n.name))
            if a.name in ("to", "dtype") and a.type == onnx.AttributeProto.INT and a.i == F32:
                a.i = low
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == F32:
                a.t.CopyFrom(low_tensor(a.t, dtype, stats))
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
            for a in list(n.attribute):
                if a.name in ("value_float", "value_floats"):
                    vals = np.array([a.f] if a.name == "value_float" else list(a.floats), dtype=np.float32)
                    t = numpy_helper.from_array(vals.reshape(()) if a.name == "value_float" else vals)
                    n.attribute.remove(a)
                    n.attribute.append(helper.make_attribute("value", low_tensor(t, dtype, stats)))
        float_in = [k for k, x in enumerate(n.input) if x in floats]
        if n.op_type in ("Constant", "Cast") or not float_in or allows(n, opset, dtype, float_in):
            nodes.append(n)
            continue
        # Not allowed at this opset in dtype: compute in f32 between Casts.
        stats["kept_f32"][n.op_type] = stats["kept_f32"].get(n.op_type, 0) + 1
        tag = n.name or n.output[0]
        for k in float_in:
            up = "%s__f32_in%d" % (tag, k)
            nodes.append(helper.make_node("Cast", [n.input[k]], [up], name=up, to=F32))
            n.input[k] = up
            stats["casts"] += 1
        downs = []
        for k, o in enumerate(n.output):
            if o in floats:
                tmp = "%s__f32_out%d" % (tag, k)
                downs.append(helper.make_node("Cast", [tmp], [o], name=tmp + "_cast", to=low))
                n.output[k] = tmp
                stats["casts"] += 1
        nodes.append(n)
        nodes.extend(downs)
    del g.node[:]
    g.node.extend(nodes)
    # value_info of the old outputs stays right (they are still T); the new f32 ones get inferred.
    onnx.checker.check_model(m)
    onnx.shape_inference.infer_shapes(m, strict_mode=True)
    return m, stats


def lift(model):
    """The reverse of convert, for references: a model computing in f16/bf16 as an fp32 model
    that onnxruntime can run (every FLOAT16/BFLOAT16 initializer, constant, graph input, output,
    value_info and Cast/dtype target becomes FLOAT, values exactly as stored). The f32 model
    rounds nothing, so it is the ideal that a low-precision run approximates."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    lows = set(LOW.values())

    def lifted(t):
        return numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name)

    for i, t in enumerate(g.initializer):
        if t.data_type in lows:
            g.initializer[i].CopyFrom(lifted(t))
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type in lows:
            vi.type.tensor_type.elem_type = F32
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH or a.type == onnx.AttributeProto.GRAPHS:
                raise ValueError("lowprec: %s node '%s' has a subgraph; not supported" % (n.op_type, n.name))
            if a.name in ("to", "dtype") and a.type == onnx.AttributeProto.INT and a.i in lows:
                a.i = F32
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type in lows:
                a.t.CopyFrom(lifted(a.t))
    onnx.checker.check_model(m)
    return m


def describe(stats):
    kept = ", ".join("%s x%d" % (k, v) for k, v in sorted(stats["kept_f32"].items())) or "none"
    return "ops kept in f32 (not allowed by their schema): %s; %d Casts added; %d constants saturated" % (
        kept, stats["casts"], stats["saturated"])


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    m, stats = convert(onnx.load(sys.argv[1]), sys.argv[3])
    onnx.save(m, sys.argv[2])
    print("%s -> %s (%s): %s" % (sys.argv[1], sys.argv[2], sys.argv[3], describe(stats)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
