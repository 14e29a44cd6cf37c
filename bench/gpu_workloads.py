"""The GPU benchmark's workloads (issue 4): PyTorch modules, their inputs, and their ONNX export.

Each workload builds a module in its benchmark dtype (weights and inputs in bf16 / fp16 where the
issue says so, so the exported ONNX graph computes in that dtype), seeded random weights and
inputs (never zeros), and says how its speed is judged: 'bw' workloads by bytes moved (inputs +
weights + outputs, each once) against the device copy ceiling, 'flop' workloads by the matrix
FLOPs counted from the exported graph against the GEMM ceiling of their dtype. The target is the
issue's: a time ratio against a peer, or a bandwidth. A workload built around matrix products may
declare them (`matmul`: (M, K, N) or a list of them, as a function of its sizes); the driver then
times torch.matmul of those sizes as the peer 'matmul', the GEMM alone without its epilogue.

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


class LinearRelu(nn.Module):
    """relu(x @ W^T + b): one GEMM with a bias and ReLU epilogue."""

    def __init__(self, k, n):
        super().__init__()
        self.fc = nn.Linear(k, n)

    def forward(self, x):
        return torch.relu(self.fc(x))


class GemmLayerNorm(nn.Module):
    """LayerNorm(x + (x @ W^T + b)): a GEMM whose epilogue is a residual add and a LayerNorm over
    its output rows (K == N)."""

    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.ln = nn.LayerNorm(width)
        with torch.no_grad():
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.ln(x + self.fc(x))


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


class BertSdpaLayer(BertLayer):
    """BertLayer with its attention as F.scaled_dot_product_attention (no mask)."""

    def forward(self, x):
        q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))
        ctx = F.scaled_dot_product_attention(q, k, v)
        ctx = ctx.transpose(1, 2).reshape(self.b, self.s, self.h)
        h1 = self.ln1(x + self.o(ctx))
        return self.ln2(h1 + self.fc2(F.gelu(self.fc1(h1))))


class BertMaskedLayer(BertLayer):
    """BertLayer with F.scaled_dot_product_attention under a padding mask built in the graph the
    way Hugging Face BERT builds it: keys where `keep` > -1 (about 84% of them, at random) are
    seen; the others get the dtype's lowest value added, through an additive [B, 1, 1, S] mask."""

    def forward(self, x, keep):
        seen = (keep > -1.0).to(x.dtype)
        mask = (1.0 - seen[:, None, None, :]) * torch.finfo(x.dtype).min
        q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        ctx = ctx.transpose(1, 2).reshape(self.b, self.s, self.h)
        h1 = self.ln1(x + self.o(ctx))
        return self.ln2(h1 + self.fc2(F.gelu(self.fc1(h1))))


class EncoderLayer(nn.Module):
    """nn.TransformerEncoderLayer (batch first, post-LN, GELU). In eval mode under no_grad,
    PyTorch eager runs its fused inference path (one native kernel sequence with flash
    attention); the ONNX export is made with that path switched off (export_onnx does it for
    every workload), so coil compiles the plain graph."""

    def __init__(self, hidden, heads, inter):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(hidden, heads, inter, dropout=0.0, activation="gelu",
                                                batch_first=True, norm_first=False)
        with torch.no_grad():
            for ln in (self.layer.norm1, self.layer.norm2):
                ln.weight.uniform_(0.5, 1.5)
                ln.bias.uniform_(-0.2, 0.2)

    def forward(self, x):
        return self.layer(x)


class RMSNorm(nn.Module):
    def __init__(self, width, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(width).uniform_(0.5, 1.5))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return xf.to(x.dtype) * self.weight


def rope_tables(positions, head_dim, base=10000.0):
    """cos and sin [positions, head_dim] of rotary embeddings (the halves repeated)."""
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    ang = torch.outer(torch.arange(positions, dtype=torch.float32), inv)
    emb = torch.cat([ang, ang], dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class LlamaBlock(nn.Module):
    """A Llama-style decoder block: RMSNorm, rotary embeddings, grouped-query attention
    (heads / kv_heads query heads per key/value head), a residual, RMSNorm, SwiGLU MLP, a
    residual. Prefill (past == 0): causal attention over the sequence. Decode (past > 0): one
    new token per sequence attends to `past` cached keys/values, passed as inputs, plus itself."""

    def __init__(self, batch, seq, hidden, heads, kv_heads, inter, past=0):
        super().__init__()
        self.b, self.s, self.h, self.nh, self.nkv = batch, seq, hidden, heads, kv_heads
        self.hd, self.past = hidden // heads, past
        self.q = nn.Linear(hidden, heads * self.hd, bias=False)
        self.k = nn.Linear(hidden, kv_heads * self.hd, bias=False)
        self.v = nn.Linear(hidden, kv_heads * self.hd, bias=False)
        self.o = nn.Linear(heads * self.hd, hidden, bias=False)
        self.gate = nn.Linear(hidden, inter, bias=False)
        self.up = nn.Linear(hidden, inter, bias=False)
        self.down = nn.Linear(inter, hidden, bias=False)
        self.n1, self.n2 = RMSNorm(hidden), RMSNorm(hidden)
        cos, sin = rope_tables(past + seq, self.hd)
        self.register_buffer("cos", cos[past:past + seq].clone())
        self.register_buffer("sin", sin[past:past + seq].clone())

    def forward(self, x, *cache):
        b, s = self.b, self.s
        h = self.n1(x)
        q = self.q(h).reshape(b, s, self.nh, self.hd).transpose(1, 2)
        k = self.k(h).reshape(b, s, self.nkv, self.hd).transpose(1, 2)
        v = self.v(h).reshape(b, s, self.nkv, self.hd).transpose(1, 2)
        cos, sin = self.cos.to(q.dtype), self.sin.to(q.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if cache:
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)
        rep = self.nh // self.nkv
        k = k[:, :, None].expand(b, self.nkv, rep, k.shape[2], self.hd).reshape(b, self.nh, k.shape[2], self.hd)
        v = v[:, :, None].expand(b, self.nkv, rep, v.shape[2], self.hd).reshape(b, self.nh, v.shape[2], self.hd)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=not cache)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, self.nh * self.hd))
        h = self.n2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def llama(s):
    m = LlamaBlock(s["batch"], s["seq"], s["hidden"], s["heads"], s["kv_heads"], s["inter"], s.get("past", 0))
    shapes = [(s["batch"], s["seq"], s["hidden"])]
    names = ["x"]
    if s.get("past", 0):
        hd = s["hidden"] // s["heads"]
        shapes += [(s["batch"], s["kv_heads"], s["past"], hd)] * 2
        names += ["past_k", "past_v"]
    return m, shapes, names, ["out"]


class Sdpa(nn.Module):
    """F.scaled_dot_product_attention alone (q, k, v [B, H, S, D]). On the GPU, eager runs
    PyTorch's flash-attention kernel (the peer of the attention microbenchmark) in f16/bf16; the
    float32 reference copy takes SDPA's default (flash has no f32 kernel)."""

    def __init__(self, causal):
        super().__init__()
        self.causal = causal

    def forward(self, q, k, v):
        if (q.is_cuda and q.dtype in (torch.float16, torch.bfloat16)
                and not torch.onnx.is_in_onnx_export() and not torch.compiler.is_compiling()):
            from torch.nn.attention import SDPBackend, sdpa_kernel

            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)


def vit_b16(s):
    import torchvision

    m = torchvision.models.vit_b_16(weights=None, image_size=s["image"])
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():  # the classification head starts at zero: randomize it
        m.heads.head.weight.copy_(torch.randn(m.heads.head.weight.shape, generator=g) * 0.02)
        m.heads.head.bias.copy_(torch.randn(m.heads.head.bias.shape, generator=g) * 0.02)
    return m, [(s["batch"], 3, s["image"], s["image"])], ["image"], ["logits"]


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
    def __init__(self, name, dtype, kind, target, sizes, quick_sizes, make, desc, exporter=None, matmul=None):
        self.name = name
        # The exporter to use under --exporter auto (None: TorchScript, falling back to dynamo).
        self.exporter = exporter
        self.dtype = dtype  # benchmark dtype name ('float32', 'bfloat16', 'float16')
        self.kind = kind  # 'bw' or 'flop'
        self.target = target  # {'kind': 'vs', 'peer': 'compile', 'factor': 1.05} or {'kind': 'gbps', 'value': 3400}
        self.sizes = sizes
        self.quick_sizes = quick_sizes
        self.make = make  # make(sizes, gen) -> (module in float32, [input shapes], input names, output names)
        self.desc = desc
        # matmul(sizes) -> (M, K, N) or a list of them: the plain matrix products the workload
        # contains, timed as the peer 'matmul' (torch.matmul of a [M, K] and b [K, N], one after
        # another in one timed call). None: no such peer.
        self.matmul = matmul

    def matmuls(self, sizes):
        """The declared matrix products at `sizes` as a list of (M, K, N); [] when none."""
        if self.matmul is None:
            return []
        mm = self.matmul(sizes)
        return [tuple(mm)] if isinstance(mm, tuple) else [tuple(x) for x in mm]

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
        peer = {"best": "min(eager, compile)", "matmul": "torch.matmul"}.get(t["peer"], t["peer"])
        return "<= %.2fx %s" % (t["factor"], peer)
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
    # Targets of issue 16 (CUTLASS GEMMs with fused epilogues); issue 4's were <= 1.10x eager.
    Workload("gemm_epilogue", "bfloat16", "flop", {"kind": "vs", "peer": "eager", "factor": 0.8},
             {"m": 512, "k": 4096}, {"m": 64, "k": 256},
             lambda s: (GemmEpilogue(s["k"]), [(s["m"], s["k"])], ["x"], ["out"]),
             "x + gelu(x W^T + b), bf16, M x K x N with K = N",
             matmul=lambda s: (s["m"], s["k"], s["k"])),
    # The matmul peer of mlp is its 4 GEMMs, one after another.
    Workload("mlp", "bfloat16", "flop", {"kind": "vs", "peer": "eager", "factor": 0.92},
             {"batch": 2048, "width": 4096}, {"batch": 64, "width": 256},
             lambda s: (Mlp(s["width"]), [(s["batch"], s["width"])], ["x"], ["out"]),
             "4 x (Linear, GELU between), bf16",
             matmul=lambda s: [(s["batch"], s["width"], s["width"])] * 4),
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
# Issue 13 (fused attention). 'best' is the faster of eager and torch.compile; the attention
# microbenchmark's eager is PyTorch's flash SDPA, so a time ratio <= 1/0.9 is >= 0.9x its TFLOP/s.
WORKLOADS += [
    Workload("bert_sdpa", "bfloat16", "flop", {"kind": "vs", "peer": "best", "factor": 0.85},
             {"batch": 8, "seq": 512, "hidden": 768, "heads": 12, "inter": 3072},
             {"batch": 2, "seq": 64, "hidden": 128, "heads": 4, "inter": 512},
             lambda s: (BertSdpaLayer(s["batch"], s["seq"], s["hidden"], s["heads"], s["inter"]),
                        [(s["batch"], s["seq"], s["hidden"])], ["hidden_in"], ["hidden_out"]),
             "BERT-base layer with F.scaled_dot_product_attention, bf16"),
    Workload("bert_sdpa_mask", "bfloat16", "flop", {"kind": "vs", "peer": "best", "factor": 0.85},
             {"batch": 8, "seq": 512, "hidden": 768, "heads": 12, "inter": 3072},
             {"batch": 2, "seq": 64, "hidden": 128, "heads": 4, "inter": 512},
             lambda s: (BertMaskedLayer(s["batch"], s["seq"], s["hidden"], s["heads"], s["inter"]),
                        [(s["batch"], s["seq"], s["hidden"]), (s["batch"], s["seq"])],
                        ["hidden_in", "keep"], ["hidden_out"]),
             "bert_sdpa under a padding mask built in the graph, Hugging Face's way, bf16"),
    Workload("encoder_layer", "bfloat16", "flop", {"kind": "vs", "peer": "best", "factor": 0.85},
             {"batch": 8, "seq": 512, "hidden": 768, "heads": 12, "inter": 3072},
             {"batch": 2, "seq": 64, "hidden": 128, "heads": 4, "inter": 512},
             lambda s: (EncoderLayer(s["hidden"], s["heads"], s["inter"]),
                        [(s["batch"], s["seq"], s["hidden"])], ["hidden_in"], ["hidden_out"]),
             "nn.TransformerEncoderLayer (eager: PyTorch's fused path), bf16"),
    Workload("llama_prefill", "bfloat16", "flop", {"kind": "vs", "peer": "compile", "factor": 0.85},
             {"batch": 4, "seq": 1024, "hidden": 2048, "heads": 16, "kv_heads": 4, "inter": 5632},
             {"batch": 2, "seq": 64, "hidden": 256, "heads": 4, "kv_heads": 1, "inter": 512},
             llama, "Llama block (RMSNorm, RoPE, GQA 4:1 causal, SwiGLU), prefill, bf16", exporter="dynamo"),
    Workload("llama_decode", "bfloat16", "bw", {"kind": "vs", "peer": "compile", "factor": 0.9},
             {"batch": 16, "seq": 1, "hidden": 2048, "heads": 16, "kv_heads": 4, "inter": 5632, "past": 4096},
             {"batch": 2, "seq": 1, "hidden": 256, "heads": 4, "kv_heads": 1, "inter": 512, "past": 128},
             llama, "Llama block, decode: 1 new token, 4096 cached positions as inputs, bf16"),
    Workload("vit_b16", "float16", "flop", {"kind": "vs", "peer": "compile", "factor": 0.85},
             {"batch": 16, "image": 224}, {"batch": 2, "image": 32},
             vit_b16, "torchvision ViT-B/16 (random weights), fp16"),
    Workload("attention", "bfloat16", "flop", {"kind": "vs", "peer": "eager", "factor": 1 / 0.9},
             {"batch": 8, "heads": 16, "seq": 2048, "dim": 128}, {"batch": 2, "heads": 4, "seq": 128, "dim": 64},
             lambda s: (Sdpa(False), [(s["batch"], s["heads"], s["seq"], s["dim"])] * 3, ["q", "k", "v"], ["out"]),
             "attention alone (eager: flash SDPA), bf16"),
    Workload("attention_causal", "bfloat16", "flop", {"kind": "vs", "peer": "eager", "factor": 1 / 0.9},
             {"batch": 8, "heads": 16, "seq": 2048, "dim": 128}, {"batch": 2, "heads": 4, "seq": 128, "dim": 64},
             lambda s: (Sdpa(True), [(s["batch"], s["heads"], s["seq"], s["dim"])] * 3, ["q", "k", "v"], ["out"]),
             "causal attention alone (eager: flash SDPA), bf16", exporter="dynamo"),
]
# Issue 16 (CUTLASS GEMMs with fused epilogues; gemm_epilogue and mlp above carry its targets too).
WORKLOADS += [
    Workload("linear_relu", "bfloat16", "flop", {"kind": "vs", "peer": "matmul", "factor": 1.05},
             {"m": 8192, "k": 8192, "n": 8192}, {"m": 256, "k": 256, "n": 256},
             lambda s: (LinearRelu(s["k"], s["n"]), [(s["m"], s["k"])], ["x"], ["out"]),
             "relu(x W^T + b) (nn.Linear + ReLU), bf16, M x K x N",
             matmul=lambda s: (s["m"], s["k"], s["n"])),
    Workload("gemm_ln", "bfloat16", "flop", {"kind": "vs", "peer": "compile", "factor": 0.8},
             {"m": 8192, "k": 4096}, {"m": 256, "k": 256},
             lambda s: (GemmLayerNorm(s["k"]), [(s["m"], s["k"])], ["x"], ["out"]),
             "LayerNorm(x + (x W^T + b)), bf16, M x K x N with K = N",
             matmul=lambda s: (s["m"], s["k"], s["k"])),
]
BY_NAME = {w.name: w for w in WORKLOADS}


def export_onnx(module, inputs, in_names, out_names, path, opset=17, exporter="auto"):
    """Exports to `path`; returns (exporter used, seconds). 'auto' tries the TorchScript exporter
    (static shapes, plain opset-17 graphs) and falls back to the dynamo exporter."""
    t0 = time.perf_counter()
    err = None
    # nn.MultiheadAttention's fused inference path is one native op that exporters cannot
    # express: export the plain graph (the eager peer keeps the fused path).
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        return _export(module, inputs, in_names, out_names, path, opset, exporter, t0)
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)


def _export(module, inputs, in_names, out_names, path, opset, exporter, t0):
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
