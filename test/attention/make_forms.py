#!/usr/bin/env python3
"""Exports the attention forms of test/attention (small models, committed) and forms.json.

Each form is a small PyTorch module exported the way users export it (the TorchScript exporter
at opset 17, `dynamo=False`; the dynamo exporter at opset 18, or 23 for the native Attention op)
with dynamic sequence lengths, or a Hugging Face model of a tiny configuration. forms.json
records, per form: what it is, whether coil must fuse it into one attention extern (`fused`),
whether the mask must become is_causal (`causal`), how to make each input (`inputs`: float,
ids, mask01 = a 0/1 padding mask, boolmask / floatmask = an attention mask with some rows
masked everywhere), the two sizes of its dynamic dims it is checked at, and `nan_rows`: whether
onnxruntime gives NaN in rows masked everywhere with -inf (the fused Attention gives 0 there,
as PyTorch does).

Run on a machine with torch and transformers (this one); the .onnx files are small (< 64 KB).
With --tests COIL, also (re)writes the FileCheck test of every form, <form>.test: one
attention extern in `coil inspect --fusion` and no softmax left (or, for a near miss, no
attention extern), and the extern's batch, heads, kv heads, mask kind and is_causal as the given
coil prints them (check them before committing).

usage: make_forms.py [--only name,name] [--tests build/bin/coil]
"""
import argparse
import json
import math
import os
import re
import subprocess
import warnings

import onnx
import torch
import torch.nn.functional as F
from torch.export import Dim

warnings.filterwarnings("ignore")
HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "models")
B, H, S, D = 2, 4, 8, 16
FORMS = {}


def form(name, desc, fused=True, causal=False, nan_rows=False, sizes=None, lowprec=False,
         dtype=None, split_fill=False):
    """`dtype` ("bf16", "f16"): the form is exported at that precision (its float inputs).
    `split_fill`: is_causal comes from splitting a causal + padding mask filled with finfo.min,
    which an f16 copy cannot hold (its lowest is -65504: the fill no longer swamps the scores),
    so the f16 copy keeps the whole mask."""
    def reg(fn):
        FORMS[name] = dict(fn=fn, desc=desc, fused=fused, causal=causal, nan_rows=nan_rows,
                           sizes=sizes or [{"S": 9, "T": 12}, {"S": 140, "T": 131}],
                           lowprec=lowprec)
        if dtype:
            FORMS[name]["dtype"] = dtype
        if split_fill:
            FORMS[name]["split_fill"] = True
        return fn
    return reg


def qkv(hkv=H, t=S + 3):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(B, H, S, D, generator=g), torch.randn(B, hkv, t, D, generator=g),
            torch.randn(B, hkv, t, D, generator=g))


def export(mod, args, path, names, dyn, exporter, opset=None):
    """`dyn`: {input name: {axis: dim name}}."""
    mod.eval()
    if exporter == "ts":
        torch.onnx.export(mod, args, path, opset_version=opset or 17, dynamo=False, input_names=names,
                          output_names=["y"], dynamic_axes=dyn)
    else:
        dims = {}
        shapes = {}
        for n in names:
            shapes[n] = {a: dims.setdefault(d, Dim(d, min=1 if d == "batch" else 2, max=4096))
                         for a, d in dyn.get(n, {}).items()} or None
        torch.onnx.export(mod, args, path, opset_version=opset or 18, dynamo=True, input_names=names,
                          output_names=["y"], dynamic_shapes=tuple(shapes[n] for n in names))


SEQ = {"q": {2: "S"}, "k": {2: "T"}, "v": {2: "T"}}


class Sdpa(torch.nn.Module):
    def __init__(self, causal=False):
        super().__init__()
        self.causal = causal

    def forward(self, q, k, v, m=None):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=self.causal)


def sdpa_form(exporter, causal, mask):
    def build(path):
        q, k, v = qkv()
        args, names, dyn = (q, k, v), ["q", "k", "v"], dict(SEQ)
        if mask == "float":
            args += (torch.randn(B, 1, S, S + 3),)
        elif mask == "bool":
            args += (torch.rand(B, 1, S, S + 3) > 0.3,)
        if mask:
            names.append("m")
            dyn["m"] = {2: "S", 3: "T"}
        export(Sdpa(causal), args, path, names, dyn, exporter)
        return {"m": mask + "mask"} if mask else {}
    return build


for ex, exname in (("ts", "TorchScript exporter, opset 17"), ("dyn", "dynamo exporter, opset 18")):
    for causal, mask, suffix in ((False, None, ""), (True, None, "_causal"), (False, "float", "_floatmask"),
                                 (False, "bool", "_boolmask")):
        desc = "F.scaled_dot_product_attention (%s)%s%s" % (
            exname, ", is_causal" if causal else "", ", %s attn_mask" % mask if mask else "")
        form("sdpa_%s%s" % (ex, suffix), desc, causal=causal, nan_rows=mask is not None,
             lowprec=suffix in ("", "_causal"))(sdpa_form(ex, causal, mask))


def sdpa_lowprec_form(dtype, causal):
    def build(path):
        t = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
        export(Sdpa(causal), tuple(x.to(t) for x in qkv()), path, ["q", "k", "v"], SEQ, "ts")
        return {}
    return build


# TorchScript's export at bf16/f16: the scores widened to f32 for the softmax (and the causal
# mask added there), V widened too, Y in f32.
for dt in ("bf16", "f16"):
    for causal in (False, True):
        form("sdpa_ts_%s%s" % (dt, "_causal" if causal else ""),
             "F.scaled_dot_product_attention at %s (TorchScript exporter, opset 17)%s" % (
                 dt, ", is_causal" if causal else ""), causal=causal, dtype=dt)(
            sdpa_lowprec_form(dt, causal))


@form("sdpa_native23", "F.scaled_dot_product_attention, dynamo exporter at opset 23: the ONNX "
      "Attention op itself", causal=True)
def _(path):
    export(Sdpa(True), qkv(), path, ["q", "k", "v"], SEQ, "dyn", 23)
    return {}


class Explicit(torch.nn.Module):
    """q k^T, scaled as `scale` says, `mask` applied, softmax, times v."""

    def __init__(self, scale="div", mask=None, rep=1, axis=-1, extra=None):
        super().__init__()
        self.scale, self.mask, self.rep, self.axis, self.extra = scale, mask, rep, axis, extra

    def forward(self, q, k, v, m=None):
        d = q.shape[-1]
        if self.rep > 1:  # grouped-query attention as Hugging Face's repeat_kv
            b, hk, t, dd = k.shape
            k = k[:, :, None].expand(b, hk, self.rep, t, dd).reshape(b, hk * self.rep, t, dd)
            v = v[:, :, None].expand(b, hk, self.rep, t, dd).reshape(b, hk * self.rep, t, dd)
        if self.scale == "qk":  # q and k each scaled by sqrt(scale)
            f = d ** -0.25
            s = (q * f) @ (k * f).transpose(-2, -1)
        else:
            s = q @ k.transpose(-2, -1)
            if self.scale == "div":
                s = s / math.sqrt(d)
            elif self.scale == "mul":
                s = s * (1.0 / math.sqrt(d))
            elif self.scale == "input":
                s = s * m[0, 0, 0, 0]
        sq, tk = q.shape[-2], k.shape[-2]
        if self.mask == "float":
            s = s + m
        elif self.mask == "bool":
            s = s.masked_fill(~m, float("-inf"))
        elif self.mask == "bool_finfo":
            s = s.masked_fill(m == 0, torch.finfo(s.dtype).min)
        elif self.mask == "hf_extended":
            s = s + (1.0 - m[:, None, None, :].to(s.dtype)) * torch.finfo(s.dtype).min
        elif self.mask == "trilu":
            tri = torch.tril(torch.ones(sq, tk, dtype=torch.bool))
            s = s.masked_fill(~tri, float("-inf"))
        elif self.mask == "range":
            keep = torch.arange(tk)[None, :] <= torch.arange(sq)[:, None]
            s = s.masked_fill(~keep, torch.finfo(s.dtype).min)
        elif self.mask == "triangle":
            s = s + self.tri
        elif self.mask == "wide":
            s = s + m
        elif self.mask == "scalar":  # FlexAttention's score_mod expanded: a constant bias
            s = s + 0.5
        elif self.mask == "keys":  # a float bias per key, rank 1
            s = s + m
        elif self.mask == "under_scale":
            s = (q @ k.transpose(-2, -1) + m) * 0.25
        p = torch.softmax(s, dim=self.axis)
        y = p @ v
        if self.extra == "scores":
            return y, s
        if self.extra == "probs":
            return y, p
        return y


def explicit_form(name, desc, fused=True, causal=False, nan_rows=False, lowprec=False,
                  exporter="ts", mask_input=None, mask_shape=None, mask_dyn=None, **kw):
    def build(path):
        mod = Explicit(**kw)
        q, k, v = qkv(hkv=H // kw.get("rep", 1))
        if kw.get("mask") == "wide":
            q, k, v = q[:1], k[:1], v[:1]
        args, names, dyn = (q, k, v), ["q", "k", "v"], dict(SEQ)
        inputs = {}
        if mask_input:
            if mask_input == "boolmask":
                m = torch.rand(*mask_shape) > 0.3
            elif mask_input == "mask01":
                m = (torch.rand(*mask_shape) > 0.3).to(torch.int64)
            else:
                m = torch.randn(*mask_shape)
            args += (m,)
            names.append("m")
            dyn["m"] = mask_dyn or {}
            inputs["m"] = mask_input
        if kw.get("mask") == "triangle":
            t = torch.full((1, 1, S, S + 3), torch.finfo(torch.float32).min).triu(1)
            mod.register_buffer("tri", t)
            dyn = {}
        export(mod, args, path, names, dyn, exporter)
        return inputs
    form(name, desc, fused=fused, causal=causal, nan_rows=nan_rows, lowprec=lowprec,
         sizes=[{}] if kw.get("mask") == "triangle" else None)(build)


explicit_form("explicit_div_floatmask", "q k^T / sqrt(d) + float mask, softmax, times v",
              mask="float", mask_input="floatmask", mask_shape=(B, 1, S, S + 3), mask_dyn={2: "S", 3: "T"},
              nan_rows=True, lowprec=True)
explicit_form("explicit_mul", "q k^T * (1 / sqrt(d)), softmax, times v (dynamo exporter)",
              scale="mul", exporter="dyn")
explicit_form("explicit_qk_scaled", "(q * d^-1/4) (k * d^-1/4)^T, softmax, times v", scale="qk")
explicit_form("explicit_noscale", "q k^T unscaled (the scale folded into the Q projection), "
              "softmax, times v", scale=None)
explicit_form("explicit_bool_where", "scores.masked_fill(~mask, -inf): a boolean mask through "
              "Where", mask="bool", mask_input="boolmask", mask_shape=(B, 1, S, S + 3),
              mask_dyn={2: "S", 3: "T"}, nan_rows=True)
explicit_form("explicit_bool_finfo", "scores.masked_fill(mask == 0, finfo.min) with a 0/1 key "
              "padding mask [B, 1, 1, T] (dynamo exporter)", mask="bool_finfo",
              mask_input="mask01", mask_shape=(B, 1, 1, S + 3), mask_dyn={3: "T"}, exporter="dyn")
explicit_form("explicit_hf_extended", "Hugging Face's extended mask (1 - mask) * finfo.min added, "
              "mask [B, T] of 0/1", mask="hf_extended", mask_input="mask01", mask_shape=(B, S + 3),
              mask_dyn={1: "T"})
explicit_form("causal_trilu", "causal mask torch.tril(ones(S, T)) through masked_fill(-inf)",
              mask="trilu", causal=True)
explicit_form("causal_trilu_dynamo", "causal mask torch.tril(ones(S, T)) through masked_fill(-inf) "
              "(dynamo exporter)", mask="trilu", causal=True, exporter="dyn")
explicit_form("causal_range", "causal mask arange(T)[None] <= arange(S)[:, None], masked_fill("
              "finfo.min)", mask="range", causal=True, lowprec=True)
explicit_form("causal_range_dynamo", "causal mask from Range comparisons (dynamo exporter)",
              mask="range", causal=True, exporter="dyn")
explicit_form("causal_triangle", "causal mask as a constant triangle of finfo.min (static "
              "shapes)", mask="triangle", causal=True)
explicit_form("gqa_expand", "grouped-query attention 4:2, K/V heads repeated by "
              "Unsqueeze/Expand/Reshape (dynamo exporter)", rep=2, exporter="dyn")
explicit_form("gqa_tile", "grouped-query attention 4:1, K/V heads repeated by "
              "repeat_interleave (Unsqueeze/Tile/Reshape)", rep=4, scale="mul")
explicit_form("explicit_scalar_bias", "q k^T / sqrt(d) + 0.5: a constant scalar bias, the form of "
              "ONNX's expanded FlexAttention score_mod", mask="scalar")
explicit_form("explicit_key_bias", "q k^T / sqrt(d) + a float bias [T] per key (rank 1)",
              mask="keys", mask_input="floatmask", mask_shape=(S + 3,), mask_dyn={0: "T"})
# Near misses: each must keep the decomposition.
explicit_form("nm_softmax_axis", "near miss: softmax over the query axis", fused=False, axis=-2)
explicit_form("nm_scores_used", "near miss: the scores are also an output", fused=False,
              extra="scores")
explicit_form("nm_probs_used", "near miss: the probabilities are also an output", fused=False,
              extra="probs")
explicit_form("nm_mask_widens", "near miss: a mask [3, H, S, T] widens the scores' batch of 1",
              fused=False, mask="wide", mask_input="floatmask", mask_shape=(3, H, S, S + 3),
              mask_dyn={2: "S", 3: "T"})
explicit_form("nm_scale_input", "near miss: the scale is a tensor read at run time", fused=False,
              scale="input", mask_input="floatmask", mask_shape=(1, 1, 1, 1))
explicit_form("nm_mask_under_scale", "near miss: the mask is added before the scale, (s + m) * c",
              fused=False, mask="under_scale", mask_input="floatmask", mask_shape=(B, 1, S, S + 3),
              mask_dyn={2: "S", 3: "T"})


class Mha(torch.nn.Module):
    def __init__(self, weights):
        super().__init__()
        self.m = torch.nn.MultiheadAttention(32, 4, batch_first=True)
        self.weights = weights

    def forward(self, x):
        return self.m(x, x, x, need_weights=self.weights)[0]


@form("mha_bmm", "nn.MultiheadAttention with need_weights=True (dynamo exporter): 3-D bmm attention over "
      "[B*H, S, D]", lowprec=True)
def _(path):
    torch.manual_seed(0)
    export(Mha(True), (torch.randn(B, S, 32),), path, ["x"], {"x": {1: "S"}}, "dyn")
    return {}


@form("transformer_encoder_layer", "nn.TransformerEncoderLayer (dynamo exporter; its fused "
      "fast path is not exported)")
def _(path):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    export(layer, (torch.randn(B, S, 32),), path, ["x"], {"x": {1: "S"}}, "dyn")
    return {}


def hf_form(name, desc, kind, impl, exporter, causal=False, lowprec=False):
    # Decoders (causal): their causal + padding mask splits (see form's split_fill).
    def build(path):
        import transformers as tr
        torch.manual_seed(0)
        small = dict(num_hidden_layers=1, num_attention_heads=4, intermediate_size=64)
        if kind == "bert":
            m = tr.BertModel(tr.BertConfig(hidden_size=32, vocab_size=64, max_position_embeddings=64,
                                           attn_implementation=impl, **small))
        elif kind == "roberta":
            m = tr.RobertaModel(tr.RobertaConfig(hidden_size=32, vocab_size=64,
                                                 max_position_embeddings=68,
                                                 attn_implementation=impl, **small))
        elif kind == "llama":
            m = tr.LlamaModel(tr.LlamaConfig(hidden_size=32, vocab_size=64, num_key_value_heads=2,
                                             max_position_embeddings=64,
                                             attn_implementation=impl, **small))
        elif kind == "qwen2":
            m = tr.Qwen2Model(tr.Qwen2Config(hidden_size=32, vocab_size=64, num_key_value_heads=2,
                                             max_position_embeddings=64,
                                             attn_implementation=impl, **small))
        elif kind == "t5":
            m = tr.T5EncoderModel(tr.T5Config(d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=4,
                                              vocab_size=64, attn_implementation=impl))
        elif kind == "vit":
            m = tr.ViTModel(tr.ViTConfig(hidden_size=32, image_size=32, patch_size=8,
                                         attn_implementation=impl, **small))
        m.eval()

        class W(torch.nn.Module):
            def __init__(s):
                super().__init__()
                s.m = m

            def forward(s, ids, mask=None):
                if kind == "vit":
                    return s.m(pixel_values=ids).last_hidden_state
                return s.m(input_ids=ids, attention_mask=mask).last_hidden_state

        if kind == "vit":
            export(W(), (torch.randn(B, 3, 32, 32),), path, ["pixels"], {"pixels": {0: "batch"}},
                   exporter)
            return {}
        ids = torch.randint(0, 64, (B, S))
        mask = torch.ones(B, S, dtype=torch.int64)
        export(W(), (ids, mask), path, ["ids", "mask"],
               {"ids": {0: "batch", 1: "S"}, "mask": {0: "batch", 1: "S"}}, exporter)
        return {"ids": "ids", "mask": "mask01"}
    sizes = [{"batch": 2}, {"batch": 3}] if kind == "vit" else [{"batch": 2, "S": 9},
                                                              {"batch": 3, "S": 40}]
    form(name, desc, causal=causal, lowprec=lowprec, sizes=sizes, split_fill=causal)(build)


hf_form("hf_bert", "Hugging Face BERT layer (eager attention, TorchScript exporter)", "bert",
        "eager", "ts", lowprec=True)
hf_form("hf_roberta", "Hugging Face RoBERTa layer (eager attention, TorchScript exporter)",
        "roberta", "eager", "ts")
# The decoders' causal + padding mask splits into is_causal and a key mask (rows that the
# padding masks everywhere get the mean of V, as the original's uniform softmax).
hf_form("hf_llama", "Hugging Face Llama layer (eager attention, grouped-query 4:2, rotary, "
        "causal + padding mask; TorchScript exporter)", "llama", "eager", "ts", causal=True,
        lowprec=True)
hf_form("hf_llama_sdpa", "Hugging Face Llama layer (SDPA attention: safe softmax, dynamo "
        "exporter)", "llama", "sdpa", "dyn", causal=True)
hf_form("hf_qwen2", "Hugging Face Qwen2 layer (eager attention, QKV bias, grouped-query; "
        "TorchScript exporter)", "qwen2", "eager", "ts", causal=True)
hf_form("hf_t5", "Hugging Face T5 encoder layer (no scale; relative position bias as an "
        "additive mask; TorchScript exporter)", "t5", "eager", "ts")
hf_form("hf_vit", "Hugging Face ViT layer (eager attention, dynamo exporter)", "vit", "eager",
        "dyn", lowprec=True)


def write_test(name, entry, coil):
    model = "%S/models/" + name + ".onnx"
    lines = ["# " + entry["desc"] + "."]
    if entry["fused"]:
        loops = subprocess.run([coil, "inspect", os.path.join(MODELS, name + ".onnx"), "--loops"],
                               capture_output=True, text=True).stdout
        m = re.search(r"(coil_cpu_attention_\w+)\((.*)\)", loops)
        f = m.group(2).split(", ")
        lines += ["# One attention extern, and no softmax (max over the keys) left. Its arguments: batch,",
                  "# heads, kv heads, seqQ, seqK, headDim, headDimV; offset and strides of Q, K, V (read",
                  "# in place) and Y; mask kind (0 none, 1 bool, 2 additive), offset and strides; causal.",
                  "# RUN: %coil inspect " + model + " --fusion | FileCheck %s --implicit-check-not='max over'",
                  "# CHECK: = " + m.group(1),
                  "# CHECK-NOT: coil_cpu_attention_",
                  "# RUN: %coil inspect " + model + " --loops | FileCheck %s --check-prefix=ARGS",
                  "# ARGS: = extern %s({{[^,]+}}, {{[^,]+}}, {{[^,]+}}, {{[^,]+}}, out 0, %s)" % (
                      m.group(1), ", ".join(f[5:]))]
    else:
        lines += ["# A near miss: it keeps the decomposition (GEMMs and the softmax kernel).",
                  "# RUN: %coil inspect " + model + " --fusion | FileCheck %s "
                  "--implicit-check-not=coil_cpu_attention",
                  "# CHECK: = coil_cpu_gemm_f32",
                  "# CHECK: max over"]
    with open(os.path.join(HERE, name + ".test"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only")
    ap.add_argument("--tests", metavar="COIL")
    a = ap.parse_args()
    os.makedirs(MODELS, exist_ok=True)
    path = os.path.join(HERE, "forms.json")
    manifest = json.load(open(path)) if os.path.exists(path) else {}
    only = set(a.only.split(",")) if a.only else None
    for name, f in FORMS.items():
        if only and name not in only:
            continue
        out = os.path.join(MODELS, name + ".onnx")
        inputs = f["fn"](out)
        m = onnx.load(out)
        # Names and debug metadata of the exporters are most of a small model's bytes.
        m.doc_string = ""
        del m.metadata_props[:]
        m.graph.doc_string = ""
        del m.graph.metadata_props[:]
        for n in m.graph.node:
            n.doc_string = ""
            del n.metadata_props[:]
        for v in list(m.graph.value_info):
            del v.metadata_props[:]
        onnx.save(m, out)
        entry = {k: v for k, v in f.items() if k != "fn"}
        entry["inputs"] = inputs
        manifest[name] = entry
        print("%-28s %6d bytes  %s" % (name, os.path.getsize(out), f["desc"]))
    manifest = {k: manifest[k] for k in FORMS if k in manifest}
    with open(path, "w") as fh:
        json.dump(manifest, fh, indent=1, sort_keys=True)
        fh.write("\n")
    if a.tests:
        for name, entry in manifest.items():
            if not only or name in only:
                write_test(name, entry, a.tests)


if __name__ == "__main__":
    main()
