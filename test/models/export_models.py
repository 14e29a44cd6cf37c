#!/usr/bin/env python3
"""Exports the small real-model test set from PyTorch (run where torch is installed, e.g. the GPU
machine): a ResNet-style CNN and MobileNetV2 (TorchScript exporter, opset 17, dynamic batch), a
BERT-style encoder (dynamic batch and sequence), and a GPT-style decoder (dynamo exporter,
opset 18, dynamic sequence). Weights are random but seeded; BatchNorm statistics are randomized
so outputs are not near-constant. Writes OUTDIR/<name>.onnx and OUTDIR/manifest.json.

usage: export_models.py OUTDIR
"""
import json
import os
import sys

import torch
import torch.nn as nn

torch.manual_seed(0)
OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
manifest = {"torch": torch.__version__}


def randomize_bn(m):
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            with torch.no_grad():
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 2.0)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.3, 0.3)
    return m


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.skip = None if stride == 1 and cin == cout else nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return torch.relu(y + (x if self.skip is None else self.skip(x)))


class SmallResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2))
        self.layers = nn.Sequential(Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2))
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def export_ts(name, model, args, input_names, output_names, dynamic_axes, opset=17):
    path = os.path.join(OUT, name + ".onnx")
    torch.onnx.export(model, args, path, input_names=input_names, output_names=output_names,
                      dynamic_axes=dynamic_axes, opset_version=opset, dynamo=False)
    manifest[name] = {"exporter": "torchscript", "opset": opset}


resnet = randomize_bn(SmallResNet()).eval()
export_ts("resnet_small", resnet, (torch.randn(2, 3, 32, 32),), ["image"], ["logits"], {"image": {0: "batch"}, "logits": {0: "batch"}})

import torchvision

mnet = randomize_bn(torchvision.models.mobilenet_v2(width_mult=0.25, num_classes=10)).eval()
export_ts("mobilenet_v2", mnet, (torch.randn(2, 3, 64, 64),), ["image"], ["logits"], {"image": {0: "batch"}, "logits": {0: "batch"}})

from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel

bert = BertModel(BertConfig(vocab_size=500, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=128, max_position_embeddings=128)).eval()


class BertWrap(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


ids = torch.randint(0, 500, (2, 16))
mask = torch.ones(2, 16, dtype=torch.int64)
export_ts("bert_small", BertWrap(bert), (ids, mask), ["input_ids", "attention_mask"], ["hidden"],
          {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}, "hidden": {0: "batch", 1: "seq"}})

gpt = GPT2LMHeadModel(GPT2Config(vocab_size=500, n_embd=64, n_layer=2, n_head=4, n_positions=128, use_cache=False)).eval()


class GptWrap(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids):
        return self.m(input_ids=input_ids, use_cache=False).logits


path = os.path.join(OUT, "gpt_small.onnx")
seq = torch.export.Dim("seq", min=2, max=128)
prog = torch.onnx.export(GptWrap(gpt), (torch.randint(0, 500, (1, 16)),), dynamo=True, opset_version=18,
                         input_names=["input_ids"], output_names=["logits"],
                         dynamic_shapes={"input_ids": {1: seq}}, optimize=True, external_data=False)
prog.save(path, external_data=False)
manifest["gpt_small"] = {"exporter": "dynamo", "opset": 18}

import onnx

for name in list(manifest):
    if name == "torch":
        continue
    m = onnx.load(os.path.join(OUT, name + ".onnx"))
    manifest[name]["nodes"] = len(m.graph.node)
    manifest[name]["bytes"] = os.path.getsize(os.path.join(OUT, name + ".onnx"))
json.dump(manifest, open(os.path.join(OUT, "manifest.json"), "w"), indent=1)
print(json.dumps(manifest, indent=1))
