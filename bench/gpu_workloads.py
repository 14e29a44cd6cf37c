"""The GPU benchmark's workloads (issue 4): PyTorch modules, their inputs, and their ONNX export.

Each workload builds a module in its benchmark dtype (weights and inputs in bf16 / fp16 where the
issue says so, so the exported ONNX graph computes in that dtype), seeded random weights and
inputs (never zeros), and says how its speed is judged: 'bw' workloads by bytes moved (inputs +
weights + outputs, each once) against the device copy ceiling, 'flop' workloads by the matrix
FLOPs counted from the exported graph against the GEMM ceiling of their dtype. The target is the
issue's: a time ratio against a peer, or a bandwidth.

--quick sizes are small versions of the same graphs, for smoke tests (also on the CPU).
"""
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class PointwiseChain(nn.Module):
    """x*0.5+1 -> gelu -> *y -> tanh -> +x: one read of x and y, one write."""

    def forward(self, x, y):
        return torch.tanh(F.gelu(x * 0.5 + 1.0) * y) + x


class LayerNormModel(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.ln = nn.LayerNorm(width)
        with torch.no_grad():
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.ln(x)


class SoftmaxModel(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


class GemmEpilogue(nn.Module):
    """x + gelu(x @ W^T + b): a GEMM with a bias, GELU and residual epilogue (K == N)."""

    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return x + F.gelu(self.fc(x))


class Mlp(nn.Module):
    def __init__(self, width, layers=4):
        super().__init__()
        self.fcs = nn.ModuleList(nn.Linear(width, width) for _ in range(layers))

    def forward(self, x):
        for i, fc in enumerate(self.fcs):
            x = fc(x)
            if i + 1 < len(self.fcs):
                x = F.gelu(x)
        return x


class BertLayer(nn.Module):
    """One BERT encoder layer (post-LN): self-attention without mask, output projection,
    residual + LayerNorm, GELU feed-forward, residual + LayerNorm. Sizes are fixed at build time
    so that the exported graph has static shapes."""

    def __init__(self, batch, seq, hidden, heads, inter):
        super().__init__()
        self.b, self.s, self.h, self.nh, self.hd = batch, seq, hidden, heads, hidden // heads
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.o = nn.Linear(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden, eps=1e-12)
        self.fc1 = nn.Linear(hidden, inter)
        self.fc2 = nn.Linear(inter, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-12)
        with torch.no_grad():
            for ln in (self.ln1, self.ln2):
                ln.weight.uniform_(0.5, 1.5)
                ln.bias.uniform_(-0.2, 0.2)

    def heads(self, t):
        return t.reshape(self.b, self.s, self.nh, self.hd).transpose(1, 2)

    def forward(self, x):
        q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(self.hd))
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        ctx = ctx.transpose(1, 2).reshape(self.b, self.s, self.h)
        h1 = self.ln1(x + self.o(ctx))
        return self.ln2(h1 + self.fc2(F.gelu(self.fc1(h1))))


def resnet50():
    import torchvision

    m = torchvision.models.resnet50(weights=None)
    # Random but well-scaled statistics: with BatchNorm as the identity (its initial state) the
    # residual stream of a random ResNet-50 grows block by block and overflows fp16. Damping the
    # last BatchNorm of each bottleneck keeps activations O(1).
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                c = mod.num_features
                mod.running_mean.copy_(torch.rand(c, generator=g) * 0.2 - 0.1)
                mod.running_var.copy_(torch.rand(c, generator=g) + 0.5)
                mod.weight.copy_(torch.rand(c, generator=g) * 0.5 + 0.5)
                mod.bias.copy_(torch.rand(c, generator=g) * 0.2 - 0.1)
        for blk in m.modules():
            if isinstance(blk, torchvision.models.resnet.Bottleneck):
                c = blk.bn3.num_features
                blk.bn3.weight.copy_(torch.rand(c, generator=g) * 0.2 + 0.1)
    return m


class Workload:
    def __init__(self, name, dtype, kind, target, sizes, quick_sizes, make, desc):
        self.name = name
        self.dtype = dtype  # benchmark dtype name ('float32', 'bfloat16', 'float16')
        self.kind = kind  # 'bw' or 'flop'
        self.target = target  # {'kind': 'vs', 'peer': 'compile', 'factor': 1.05} or {'kind': 'gbps', 'value': 3400}
        self.sizes = sizes
        self.quick_sizes = quick_sizes
        self.make = make  # make(sizes, gen) -> (module in float32, [input shapes], input names, output names)
        self.desc = desc

    def build(self, quick, device, seed=0):
        """The module (benchmark dtype, eval mode, on `device`) and its random inputs."""
        sizes = self.quick_sizes if quick else self.sizes
        torch.manual_seed(seed)
        module, shapes, in_names, out_names = self.make(sizes)
        dt = DTYPES[self.dtype]
        module = module.eval().to(device=device, dtype=dt)
        g = torch.Generator(device="cpu").manual_seed(seed + 1)
        inputs = [torch.randn(*s, generator=g, dtype=torch.float32).to(device=device, dtype=dt) for s in shapes]
        return module, inputs, in_names, out_names, sizes


def target_text(t):
    if t["kind"] == "vs":
        return "<= %.2fx %s" % (t["factor"], t["peer"])
    return ">= %d GB/s" % t["value"]


WORKLOADS = [
    Workload("pointwise", "float32", "bw", {"kind": "vs", "peer": "compile", "factor": 1.05},
             {"rows": 8192, "cols": 8192}, {"rows": 256, "cols": 1024},
             lambda s: (PointwiseChain(), [(s["rows"], s["cols"])] * 2, ["x", "y"], ["out"]),
             "tanh(gelu(x*0.5+1)*y)+x, fp32"),
    Workload("layernorm", "bfloat16", "bw", {"kind": "gbps", "value": 3400},
             {"rows": 16384, "cols": 4096}, {"rows": 256, "cols": 1024},
             lambda s: (LayerNormModel(s["cols"]), [(s["rows"], s["cols"])], ["x"], ["out"]),
             "LayerNorm over the last dim, bf16"),
    Workload("softmax", "bfloat16", "bw", {"kind": "vs", "peer": "compile", "factor": 1.05},
             {"rows": 49152, "cols": 512}, {"rows": 1024, "cols": 512},
             lambda s: (SoftmaxModel(), [(s["rows"], s["cols"])], ["x"], ["out"]),
             "softmax over the last dim, bf16"),
    Workload("gemm_epilogue", "bfloat16", "flop", {"kind": "vs", "peer": "eager", "factor": 1.10},
             {"m": 512, "k": 4096}, {"m": 64, "k": 256},
             lambda s: (GemmEpilogue(s["k"]), [(s["m"], s["k"])], ["x"], ["out"]),
             "x + gelu(x W^T + b), bf16, M x K x N with K = N"),
    Workload("mlp", "bfloat16", "flop", {"kind": "vs", "peer": "eager", "factor": 1.10},
             {"batch": 2048, "width": 4096}, {"batch": 64, "width": 256},
             lambda s: (Mlp(s["width"]), [(s["batch"], s["width"])], ["x"], ["out"]),
             "4 x (Linear, GELU between), bf16"),
    Workload("bert_layer", "bfloat16", "flop", {"kind": "vs", "peer": "compile", "factor": 1.3},
             {"batch": 8, "seq": 512, "hidden": 768, "heads": 12, "inter": 3072},
             {"batch": 2, "seq": 64, "hidden": 128, "heads": 4, "inter": 512},
             lambda s: (BertLayer(s["batch"], s["seq"], s["hidden"], s["heads"], s["inter"]),
                        [(s["batch"], s["seq"], s["hidden"])], ["hidden_in"], ["hidden_out"]),
             "one BERT encoder layer (no mask), bf16"),
    Workload("resnet50", "float16", "flop", {"kind": "vs", "peer": "compile", "factor": 1.3},
             {"batch": 32, "image": 224}, {"batch": 2, "image": 64},
             lambda s: (resnet50(), [(s["batch"], 3, s["image"], s["image"])], ["image"], ["logits"]),
             "torchvision ResNet-50 (random weights), fp16, NCHW"),
]
BY_NAME = {w.name: w for w in WORKLOADS}


def export_onnx(module, inputs, in_names, out_names, path, opset=17, exporter="auto"):
    """Exports to `path`; returns (exporter used, seconds). 'auto' tries the TorchScript exporter
    (static shapes, plain opset-17 graphs) and falls back to the dynamo exporter."""
    t0 = time.perf_counter()
    err = None
    if exporter in ("auto", "torchscript"):
        try:
            with torch.no_grad():
                torch.onnx.export(module, tuple(inputs), path, input_names=in_names, output_names=out_names,
                                  opset_version=opset, do_constant_folding=True, dynamo=False)
            return "torchscript", time.perf_counter() - t0
        except Exception as e:  # noqa: BLE001 - fall back to the other exporter below
            if exporter == "torchscript":
                raise
            err = e
    try:
        with torch.no_grad():
            prog = torch.onnx.export(module, tuple(inputs), dynamo=True, opset_version=max(opset, 18),
                                     input_names=in_names, output_names=out_names, optimize=True,
                                     external_data=False)
        prog.save(path, external_data=False)
    except Exception as e:
        if err is not None:
            raise RuntimeError("torchscript exporter: %s; dynamo exporter: %s" % (err, e)) from e
        raise
    return "dynamo", time.perf_counter() - t0
