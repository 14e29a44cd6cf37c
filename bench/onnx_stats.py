"""Facts about an exported ONNX graph that the GPU benchmark reports (no torch needed):
the matrix FLOPs (2 * multiply-adds of Conv, ConvTranspose, MatMul, Gemm, from inferred shapes),
the bytes of its initializers, and which element types its float tensors have (to check that a
bf16 / fp16 export really computes in that dtype)."""
import onnx
from onnx import TensorProto, shape_inference

FLOAT_TYPES = {TensorProto.FLOAT: "float32", TensorProto.FLOAT16: "float16", TensorProto.BFLOAT16: "bfloat16",
               TensorProto.DOUBLE: "float64"}


def _load(model):
    return onnx.load(model) if isinstance(model, str) else model


def _shapes(model):
    """name -> (elem_type, shape list or None) for every typed value after shape inference."""
    inferred = shape_inference.infer_shapes(model)
    g = inferred.graph
    out = {}
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        t = vi.type.tensor_type
        dims = None
        if t.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        out[vi.name] = (t.elem_type, dims)
    for init in g.initializer:
        out[init.name] = (init.data_type, list(init.dims))
    return out


def _prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def _attr(node, name, default):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def count_flops(model):
    """2 * multiply-adds of the graph's matrix ops (top-level graph). Returns (flops, unknown):
    `unknown` lists the nodes whose shapes could not be inferred (their FLOPs are not counted)."""
    model = _load(model)
    shapes = _shapes(model)
    flops = 0
    unknown = []

    def shape(name):
        s = shapes.get(name, (None, None))[1]
        return s if s is not None and all(d is not None for d in s) else None

    for n in model.graph.node:
        if n.op_type not in ("MatMul", "Gemm", "Conv", "ConvTranspose"):
            continue
        a = shape(n.input[0])
        b = shape(n.input[1])
        y = shape(n.output[0])
        if a is None or b is None or y is None:
            unknown.append(n.name or n.op_type)
            continue
        if n.op_type == "MatMul":
            k = a[-1] if len(a) > 1 else a[0]
            flops += 2 * _prod(y) * k
        elif n.op_type == "Gemm":
            k = a[0] if _attr(n, "transA", 0) else a[1]
            flops += 2 * _prod(y) * k
        elif n.op_type == "Conv":
            # y: N x Cout x spatial...; w: Cout x Cin/group x kernel...
            flops += 2 * _prod(y) * _prod(b[1:])
        else:  # ConvTranspose: x: N x Cin x spatial; w: Cin x Cout/group x kernel
            flops += 2 * _prod(a) * _prod(b[1:])
    return flops, unknown


def initializer_bytes(model):
    model = _load(model)
    total = 0
    for init in model.graph.initializer:
        total += _prod(init.dims) * onnx.helper.tensor_dtype_to_np_dtype(init.data_type).itemsize
    return total


def float_dtype_census(model):
    """{dtype name: number of float-typed values} over inputs, outputs, initializers and
    inferred intermediate values."""
    model = _load(model)
    census = {}
    for name, (et, _) in _shapes(model).items():
        if et in FLOAT_TYPES:
            census[FLOAT_TYPES[et]] = census.get(FLOAT_TYPES[et], 0) + 1
    return census


def op_census(model):
    model = _load(model)
    ops = {}
    for n in model.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    return dict(sorted(ops.items()))
