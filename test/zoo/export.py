#!/usr/bin/env python3
"""Exports the model zoo: small instances of real architectures, for test/zoo/check.py.

Run where PyTorch, torchvision, timm, transformers (5.x) and onnxscript are installed; the check
itself needs only onnx, onnxruntime and numpy. Every model is a real architecture from its
library (torchvision, timm, Hugging Face transformers built from a config object, torch.nn
recurrent layers, or a layer written the way users write it) with a SMALL configuration (widths
8-64, 1-2 layers per stage, 32x32 or 64x64 images, vocabularies of 100) and seeded random
weights. Parameters a library initializes to a constant (zero biases and heads, LayerNorm ones,
ConvNeXt's 1e-6 layer scale) and batch-norm running statistics are randomized, so that no output
is trivial.

Each model is exported with the TorchScript exporter (`dynamo=False`, opset 17) or the dynamo
exporter (`dynamo=True`, opset 18); one dynamo model keeps its weights as external data. For each
model NAME this writes, under OUTDIR (default: this folder):
    models/NAME.onnx (+ models/NAME.onnx.data for external data)
    data/NAME_in.npz    the inputs: images from a normal distribution, token ids in range,
                        0/1 attention masks with at least one 1 per row
    data/NAME_out.npz   onnxruntime's outputs on those inputs
    manifest.json       per model: family, library, exporter, opset, inputs (name, dtype, shape
                        with symbolic dims, kind), outputs, dynamic dims with the exported size and
                        a second size that check.py also runs, ONNX node count, op types, bytes,
                        tolerance
The exported model must match PyTorch (onnxruntime vs eager, 1e-4 relative to the largest
magnitude of each output) or the model is not written.

usage: export.py [--out DIR] [--models a,b] [--list]
"""
import argparse
import json
import os
import sys
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check  # noqa: E402  (the input drawing that check.py uses at the second size)

HERE = os.path.dirname(os.path.abspath(__file__))
TOLERANCE = 1e-3  # check.py's fp32 rule; stored per model in the manifest
MIN_SENSITIVITY = 0.1  # other random inputs change every output by this much of its largest magnitude
VOCAB = 100
SECOND = {"batch": 3, "seq": 7, "height": 40, "width": 48}  # the second size of each dynamic dim

REGISTRY = []


def zoo(name, family, library, exporter="torchscript", opset=None, external=False):
    def register(fn):
        REGISTRY.append(dict(name=name, family=family, library=library, exporter=exporter,
                             opset=opset or (17 if exporter == "torchscript" else 18), external=external, build=fn))
        return fn
    return register


class Spec:
    """A model to export: the module, its example inputs (name, tensor, kind), output names and
    dynamic dims ({input or output name: {axis: dim name}})."""

    def __init__(self, module, inputs, outputs, dynamic=None):
        self.module, self.inputs, self.outputs, self.dynamic = module, inputs, outputs, dynamic or {}


def randomize(spec, gen):
    """Makes a freshly constructed model's outputs non-trivial and input-dependent.
    1. Linear and convolution weights far smaller than variance-preserving (a classifier head
       initialized with std 0.01) are redrawn with std 1/sqrt(fan_in).
    2. Every float parameter whose values are all equal gets random values: norm weights of one
       become uniform in [0.7, 1.3]; zero biases, heads, tokens and tiny layer scales become
       normal with std 0.1.
    3. Batch-norm running statistics are those of the model's own activations on a batch of 8
       random inputs (one forward pass in training mode), each mean then moved by a random 0.2
       of the standard deviation and each variance scaled by a random factor in [0.8, 1.25]:
       random, yet the signal neither dies nor explodes through a deep network."""
    model = spec.module
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d)):
                fan_in = m.weight[0].numel()
                if float(m.weight.std()) < 0.5 / fan_in ** 0.5:
                    m.weight.copy_(torch.randn(m.weight.shape, generator=gen) / fan_in ** 0.5)
        for _, p in model.named_parameters():
            if not p.dtype.is_floating_point or p.numel() == 0:
                continue
            flat = p.reshape(-1)
            if not bool(torch.all(flat == flat[0])):
                continue
            if abs(float(flat[0]) - 1.0) < 1e-6:  # a norm's weight
                p.copy_(torch.rand(p.shape, generator=gen) * 0.6 + 0.7)
            else:  # a zero bias, head or token, or a tiny layer scale
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
        norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats]
        if norms:
            for m in norms:
                m.momentum = 1.0  # the running statistics become those of this one batch
            model.train()
            calibration = []
            for _, t, kind in spec.inputs:
                assert kind == "normal", "batch-norm calibration needs float inputs"
                calibration.append(torch.randn((8,) + tuple(t.shape[1:]), generator=gen))
            model(*calibration)
            for m in norms:
                m.momentum = 0.1
                std = m.running_var.sqrt()
                m.running_mean.add_(torch.randn(std.shape, generator=gen) * 0.2 * std)
                m.running_var.mul_(torch.exp(torch.rand(std.shape, generator=gen) * 0.446 - 0.223))
    model.eval()
    return spec


def image(gen, b=2, c=3, h=32, w=None):
    return torch.randn(b, c, h, w or h, generator=gen)


def token_ids(gen, b=2, s=16, high=VOCAB):
    return torch.randint(0, high, (b, s), generator=gen)


def attention_mask(gen, b=2, s=16):
    m = (torch.rand(b, s, generator=gen) > 0.3).long()
    m[:, 0] = 1  # at least one 1 per row
    return m


def batch_dyn(names):
    return {n: {0: "batch"} for n in names}


def seq_dyn(names):
    return {n: {0: "batch", 1: "seq"} for n in names}


# ---------------------------------------------------------------------------------------------
# torchvision classification
# ---------------------------------------------------------------------------------------------
import torchvision  # noqa: E402
from torchvision.models import convnext, densenet, efficientnet, mobilenetv2, mobilenetv3, regnet, resnet  # noqa: E402
from torchvision.models import shufflenetv2, squeezenet, swin_transformer, vision_transformer  # noqa: E402
from torchvision.ops.misc import Conv2dNormActivation  # noqa: E402


class TinyResNet(resnet.ResNet):
    """torchvision's ResNet (its forward, blocks and _make_layer) with every width divided by
    `shrink`: with 8, stem 8 channels and stages of 8/16/32/64 planes."""

    def __init__(self, block, layers, shrink=8, **kw):
        self.shrink = shrink
        super().__init__(block, layers, **kw)
        self.conv1 = nn.Conv2d(3, 64 // shrink, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64 // shrink)
        self.fc = nn.Linear(512 // shrink * block.expansion, kw.get("num_classes", 10))

    def _make_layer(self, block, planes, blocks, stride=1, dilate=False):
        if planes == 64:
            self.inplanes = 64 // self.shrink
        return super()._make_layer(block, planes // self.shrink, blocks, stride, dilate)


def classifier(module, gen, size=32, batch=1, dynamic=True):
    return Spec(module, [("image", image(gen, batch, 3, size), "normal")], ["logits"],
                batch_dyn(["image", "logits"]) if dynamic else None)


@zoo("tv_resnet18", "classification", "torchvision")
def _(gen):
    return classifier(TinyResNet(resnet.BasicBlock, [2, 1, 1, 1], shrink=16, num_classes=10), gen, 48, batch=1)


@zoo("tv_resnext", "classification", "torchvision")
def _(gen):
    return classifier(TinyResNet(resnet.Bottleneck, [1, 1, 1, 1], shrink=16, groups=4, width_per_group=16, num_classes=10),
                      gen, 32)


@zoo("tv_mobilenet_v2", "classification", "torchvision")
def _(gen):
    setting = [[1, 8, 1, 1], [6, 12, 2, 2], [6, 16, 2, 2], [6, 24, 1, 2]]
    m = mobilenetv2.MobileNetV2(num_classes=10, width_mult=1.0, inverted_residual_setting=setting)
    m.features[-1] = Conv2dNormActivation(24, 64, kernel_size=1, activation_layer=nn.ReLU6)
    m.classifier[1] = nn.Linear(64, 10)
    return classifier(m, gen, 32)


@zoo("tv_mobilenet_v3", "classification", "torchvision")
def _(gen):
    C = mobilenetv3.InvertedResidualConfig
    setting = [C(8, 3, 8, 8, True, "RE", 2, 1, 1.0), C(8, 3, 24, 12, False, "RE", 2, 1, 1.0),
               C(12, 5, 36, 16, True, "HS", 2, 1, 1.0), C(16, 5, 48, 16, True, "HS", 1, 1, 1.0),
               C(16, 3, 48, 24, True, "HS", 1, 1, 1.0)]
    return classifier(mobilenetv3.MobileNetV3(setting, last_channel=64, num_classes=10), gen, 32)


@zoo("tv_efficientnet", "classification", "torchvision")
def _(gen):
    M = efficientnet.MBConvConfig
    setting = [M(1, 3, 1, 8, 8, 1), M(4, 3, 2, 8, 12, 2), M(4, 5, 2, 12, 16, 1), M(4, 3, 2, 16, 24, 1)]
    return classifier(efficientnet.EfficientNet(setting, dropout=0.0, stochastic_depth_prob=0.0, num_classes=10,
                                                last_channel=64), gen, 32)


@zoo("tv_efficientnet_v2", "classification", "torchvision")
def _(gen):
    M, FM = efficientnet.MBConvConfig, efficientnet.FusedMBConvConfig
    setting = [FM(1, 3, 1, 8, 8, 1), FM(4, 3, 2, 8, 16, 1), M(4, 3, 2, 16, 24, 1), M(6, 3, 1, 24, 32, 1)]
    return classifier(efficientnet.EfficientNet(setting, dropout=0.0, stochastic_depth_prob=0.0, num_classes=10,
                                                last_channel=64, norm_layer=nn.BatchNorm2d), gen, 32)


@zoo("tv_regnet", "classification", "torchvision")
def _(gen):
    params = regnet.BlockParams.from_init_params(depth=4, w_0=8, w_a=8.0, w_m=2.0, group_width=8, se_ratio=0.25)
    return classifier(regnet.RegNet(params, num_classes=10, stem_width=8), gen, 32)


@zoo("tv_shufflenet_v2", "classification", "torchvision")
def _(gen):
    return classifier(shufflenetv2.ShuffleNetV2([2, 1, 1], [8, 16, 32, 64, 64], num_classes=10), gen, 32)


@zoo("tv_squeezenet", "classification", "torchvision")
def _(gen):
    """torchvision's SqueezeNet 1.1 layout (ceil-mode max pools, Fire modules, a convolutional
    classifier) at a quarter of its widths."""
    m = squeezenet.SqueezeNet(version="1_1", num_classes=10)
    Fire = squeezenet.Fire
    m.features = nn.Sequential(
        nn.Conv2d(3, 16, 3, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(16, 4, 8, 8), Fire(16, 4, 8, 8), nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(16, 8, 16, 16), Fire(32, 8, 16, 16), nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(32, 12, 24, 24), Fire(48, 16, 32, 32))
    m.classifier = nn.Sequential(nn.Dropout(0.5), nn.Conv2d(64, 10, 1), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d((1, 1)))
    for conv in m.modules():  # SqueezeNet's own initialization, for the replaced modules
        if isinstance(conv, nn.Conv2d):
            nn.init.kaiming_uniform_(conv.weight)
            nn.init.zeros_(conv.bias)
    return classifier(m, gen, 48, batch=1)


@zoo("tv_densenet", "classification", "torchvision")
def _(gen):
    return classifier(densenet.DenseNet(growth_rate=8, block_config=(2, 2, 2), num_init_features=16, bn_size=2,
                                        num_classes=10), gen, 32)


@zoo("tv_convnext", "classification", "torchvision")
def _(gen):
    C = convnext.CNBlockConfig
    return classifier(convnext.ConvNeXt([C(8, 16, 1), C(16, 32, 1), C(32, None, 1)], num_classes=10), gen, 32)


@zoo("tv_swin", "classification", "torchvision")
def _(gen):
    return classifier(swin_transformer.SwinTransformer(patch_size=[2, 2], embed_dim=16, depths=[2, 1], num_heads=[2, 4],
                                                       window_size=[4, 4], stochastic_depth_prob=0.0, num_classes=10), gen, 32)


@zoo("tv_swin_v2", "classification", "torchvision")
def _(gen):
    """Exported with a static batch (no dynamic axes), unlike the other classifiers."""
    return classifier(swin_transformer.SwinTransformer(
        patch_size=[2, 2], embed_dim=16, depths=[1, 1], num_heads=[2, 4], window_size=[4, 4], stochastic_depth_prob=0.0,
        num_classes=10, block=swin_transformer.SwinTransformerBlockV2,
        downsample_layer=swin_transformer.PatchMergingV2), gen, 32, dynamic=False)


@zoo("tv_vit", "classification", "torchvision")
def _(gen):
    return classifier(vision_transformer.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                                           hidden_dim=32, mlp_dim=64, num_classes=10), gen, 32)


@zoo("tv_resnet18_dynamo", "classification", "torchvision", exporter="dynamo")
def _(gen):
    return classifier(TinyResNet(resnet.BasicBlock, [1, 1, 1, 1], shrink=16, num_classes=10), gen, 32, batch=2)


@zoo("tv_mobilenet_v3_dynamo", "classification", "torchvision", exporter="dynamo", external=True)
def _(gen):
    C = mobilenetv3.InvertedResidualConfig
    setting = [C(8, 3, 8, 8, True, "RE", 2, 1, 1.0), C(8, 3, 24, 12, False, "HS", 2, 1, 1.0),
               C(12, 5, 36, 16, True, "HS", 1, 1, 1.0)]
    return classifier(mobilenetv3.MobileNetV3(setting, last_channel=32, num_classes=10), gen, 32, batch=2)


# ---------------------------------------------------------------------------------------------
# torchvision segmentation
# ---------------------------------------------------------------------------------------------
from torchvision.models import segmentation  # noqa: E402
from torchvision.models._utils import IntermediateLayerGetter  # noqa: E402


def small_mobilenet_v3_features():
    C = mobilenetv3.InvertedResidualConfig
    setting = [C(8, 3, 8, 8, True, "RE", 2, 1, 1.0), C(8, 3, 24, 12, False, "RE", 2, 1, 1.0),
               C(12, 5, 36, 16, True, "HS", 2, 1, 1.0), C(16, 3, 48, 24, True, "HS", 1, 2, 1.0)]
    return mobilenetv3.MobileNetV3(setting, last_channel=32, num_classes=10).features


class SegWrap(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, image):
        return self.m(image)["out"]


@zoo("tv_lraspp", "segmentation", "torchvision")
def _(gen):
    feats = small_mobilenet_v3_features()  # 0: stem (/2), 1: /4, 2: /8, 3: /16, 4: /16 dilated, 5: 1x1 conv
    backbone = IntermediateLayerGetter(feats, {"2": "low", "5": "high"})
    m = segmentation.lraspp.LRASPP(backbone, low_channels=16, high_channels=144, num_classes=5,
                                   inter_channels=16)
    return Spec(SegWrap(m), [("image", image(gen, 1, 3, 32), "normal")], ["out"],
                {"image": {0: "batch", 2: "height", 3: "width"}, "out": {0: "batch", 2: "height", 3: "width"}})


@zoo("tv_deeplabv3", "segmentation", "torchvision")
def _(gen):
    m = TinyResNet(resnet.Bottleneck, [1, 1, 1, 1], shrink=32, num_classes=10, replace_stride_with_dilation=[False, True, True])
    backbone = IntermediateLayerGetter(m, {"layer4": "out"})
    head = nn.Sequential(segmentation.deeplabv3.ASPP(64, [2, 4, 6], out_channels=8), nn.Conv2d(8, 8, 3, padding=1, bias=False),
                         nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 5, 1))
    seg = segmentation.deeplabv3.DeepLabV3(backbone, head)
    return Spec(SegWrap(seg), [("image", image(gen, 1, 3, 32), "normal")], ["out"],
                batch_dyn(["image", "out"]))


@zoo("tv_fcn", "segmentation", "torchvision")
def _(gen):
    m = TinyResNet(resnet.BasicBlock, [1, 1, 1, 1], shrink=16, num_classes=10)
    backbone = IntermediateLayerGetter(m, {"layer4": "out", "layer3": "aux"})
    seg = segmentation.fcn.FCN(backbone, segmentation.fcn.FCNHead(32, 5), segmentation.fcn.FCNHead(16, 5))

    class Both(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, image):
            r = self.m(image)
            return r["out"], r["aux"]
    return Spec(Both(seg), [("image", image(gen, 1, 3, 32), "normal")], ["out", "aux"],
                {"image": {0: "batch", 2: "height", 3: "width"}, "out": {0: "batch", 2: "height", 3: "width"},
                 "aux": {0: "batch", 2: "height", 3: "width"}})


# ---------------------------------------------------------------------------------------------
# timm
# ---------------------------------------------------------------------------------------------
import timm  # noqa: E402
from timm.models import byobnet, convmixer, efficientformer, ghostnet, mlp_mixer  # noqa: E402


def mobilevit_cfg(kind):
    B = byobnet.ByoBlockCfg
    if kind == "mobilevit":
        vit = dict(transformer_dim=24, transformer_depth=1, patch_size=2, num_heads=2)
    else:
        vit = dict(transformer_depth=1, patch_size=2)
    br = 1.0 if kind == "mobilevit" else 0.5
    return byobnet.ByoModelCfg(
        blocks=(B(type="bottle", d=1, c=8, s=1, gs=1, br=2.0, block_kwargs=dict(bottle_in=True, linear_out=True)),
                B(type="bottle", d=1, c=16, s=2, gs=1, br=2.0, block_kwargs=dict(bottle_in=True, linear_out=True)),
                (B(type="bottle", d=1, c=24, s=2, gs=1, br=2.0, block_kwargs=dict(bottle_in=True, linear_out=True)),
                 B(type=kind, d=1, c=24, s=1, gs=None, br=br, block_kwargs=vit))),
        downsample="", stem_type="3x3", stem_pool="", stem_chs=8, num_features=48 if kind == "mobilevit" else 0,
        act_layer="silu")


@zoo("timm_mobilevit", "classification", "timm")
def _(gen):
    return classifier(byobnet.ByobNet(mobilevit_cfg("mobilevit"), num_classes=10), gen, 32)


@zoo("timm_mobilevit_v2", "classification", "timm")
def _(gen):
    return classifier(byobnet.ByobNet(mobilevit_cfg("mobilevit2"), num_classes=10), gen, 32)


@zoo("timm_ghostnet", "classification", "timm")
def _(gen):
    cfgs = [[[3, 16, 16, 0, 1]], [[3, 48, 24, 0, 2]], [[5, 72, 32, 0.25, 2]], [[3, 96, 32, 0.25, 1]]]
    m = ghostnet.GhostNet(cfgs, num_classes=10, width=0.5)
    hidden = 64
    m.conv_head = nn.Conv2d(m.num_features, hidden, 1, 1, 0, bias=True)
    m.classifier = nn.Linear(hidden, 10)
    return classifier(m, gen, 32)


@zoo("timm_ghostnet_v2", "classification", "timm")
def _(gen):
    cfgs = [[[3, 16, 16, 0, 1]], [[3, 48, 24, 0, 2]], [[5, 72, 32, 0.25, 2]], [[3, 96, 32, 0.25, 1]]]
    m = ghostnet.GhostNet(cfgs, num_classes=10, width=0.5, version="v2")
    m.conv_head = nn.Conv2d(m.num_features, 64, 1, 1, 0, bias=True)
    m.classifier = nn.Linear(64, 10)
    return classifier(m, gen, 32)


@zoo("timm_efficientformer", "classification", "timm")
def _(gen):
    # The attention's position biases are for a 7x7 grid: one downsampling after the /4 stem
    # makes that a 56x56 image.
    m = efficientformer.EfficientFormer(depths=(1, 1, 1, 2), embed_dims=(16, 16, 16, 32), num_vit=1, num_classes=10, mlp_ratios=2,
                                        downsamples=(False, False, False, True))
    for stage in m.stages:  # timm's default attention (8 heads of key size 32) at a smaller size
        for block in stage.blocks:
            if isinstance(block, efficientformer.MetaBlock1d):
                block.token_mixer = efficientformer.Attention(32, key_dim=16, num_heads=2, attn_ratio=2)
    return classifier(m, gen, 56, batch=1)


@zoo("timm_convmixer", "classification", "timm")
def _(gen):
    return classifier(convmixer.ConvMixer(dim=32, depth=2, kernel_size=5, patch_size=4, num_classes=10), gen, 32)


@zoo("timm_mixer", "classification", "timm")
def _(gen):
    return classifier(mlp_mixer.MlpMixer(num_classes=10, img_size=32, patch_size=8, num_blocks=2, embed_dim=32), gen, 32)


# ---------------------------------------------------------------------------------------------
# Hugging Face transformers, built from config objects
# ---------------------------------------------------------------------------------------------
import transformers  # noqa: E402

HF = dict(attn_implementation="eager")


class EncoderWrap(nn.Module):
    def __init__(self, m, token_types=False):
        super().__init__()
        self.m, self.token_types = m, token_types

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        kw = dict(input_ids=input_ids, attention_mask=attention_mask)
        if self.token_types:
            kw["token_type_ids"] = token_type_ids
        return self.m(**kw).last_hidden_state


def text_encoder(m, gen, token_types=False):
    ids, mask = token_ids(gen), attention_mask(gen)
    inputs = [("input_ids", ids, "ids"), ("attention_mask", mask, "mask")]
    if token_types:
        inputs.append(("token_type_ids", token_ids(gen, high=2), "ids2"))
    return Spec(EncoderWrap(m, token_types), inputs, ["hidden"],
                seq_dyn([n for n, _, _ in inputs] + ["hidden"]))


class DecoderWrap(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits


def causal_lm(m, gen):
    inputs = [("input_ids", token_ids(gen), "ids"), ("attention_mask", attention_mask(gen), "mask")]
    return Spec(DecoderWrap(m), inputs, ["logits"], seq_dyn(["input_ids", "attention_mask", "logits"]))


SMALL = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
             max_position_embeddings=64, initializer_range=0.1)
ONE_LAYER = dict(SMALL, num_hidden_layers=1)


@zoo("hf_bert", "nlp-encoder", "transformers")
def _(gen):
    return text_encoder(transformers.BertModel(transformers.BertConfig(**SMALL, **HF), add_pooling_layer=False), gen, True)


@zoo("hf_roberta", "nlp-encoder", "transformers")
def _(gen):
    return text_encoder(transformers.RobertaModel(transformers.RobertaConfig(**ONE_LAYER, pad_token_id=1, **HF),
                                                  add_pooling_layer=False), gen)


@zoo("hf_distilbert", "nlp-encoder", "transformers")
def _(gen):
    cfg = transformers.DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=1, n_heads=2, hidden_dim=64,
                                        max_position_embeddings=64, initializer_range=0.1, **HF)
    return text_encoder(transformers.DistilBertModel(cfg), gen)


@zoo("hf_gpt2", "nlp-decoder", "transformers")
def _(gen):
    cfg = transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=1, n_head=2, n_positions=64, initializer_range=0.1,
                                  use_cache=False, **HF)
    return causal_lm(transformers.GPT2LMHeadModel(cfg), gen)


def llama_like(config_cls, model_cls, gen, layers=2, **extra):
    cfg = config_cls(**dict(SMALL, num_hidden_layers=layers), num_key_value_heads=1, use_cache=False, tie_word_embeddings=False, **extra, **HF)
    return causal_lm(model_cls(cfg), gen)


@zoo("hf_llama", "nlp-decoder", "transformers")
def _(gen):
    return llama_like(transformers.LlamaConfig, transformers.LlamaForCausalLM, gen)


@zoo("hf_qwen2", "nlp-decoder", "transformers")
def _(gen):
    return llama_like(transformers.Qwen2Config, transformers.Qwen2ForCausalLM, gen, layers=1)


@zoo("hf_mistral", "nlp-decoder", "transformers")
def _(gen):
    return llama_like(transformers.MistralConfig, transformers.MistralForCausalLM, gen, layers=1, sliding_window=8)


@zoo("hf_phi", "nlp-decoder", "transformers")
def _(gen):
    cfg = transformers.PhiConfig(**ONE_LAYER, use_cache=False, partial_rotary_factor=0.5, **HF)
    return causal_lm(transformers.PhiForCausalLM(cfg), gen)


@zoo("hf_t5_encoder", "nlp-encoder", "transformers")
def _(gen):
    cfg = transformers.T5Config(vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
                                relative_attention_num_buckets=8, relative_attention_max_distance=16,
                                feed_forward_proj="gated-gelu", initializer_factor=1.0, use_cache=False, **HF)
    return text_encoder(transformers.T5EncoderModel(cfg), gen)


@zoo("hf_whisper_encoder", "audio", "transformers")
def _(gen):
    cfg = transformers.WhisperConfig(vocab_size=VOCAB, num_mel_bins=16, d_model=32, encoder_layers=1, encoder_attention_heads=2,
                                     encoder_ffn_dim=64, decoder_layers=1, decoder_attention_heads=2, decoder_ffn_dim=64,
                                     max_source_positions=16, max_target_positions=16, pad_token_id=0, bos_token_id=1,
                                     eos_token_id=2, decoder_start_token_id=1, init_std=0.2, **HF)
    enc = transformers.WhisperModel(cfg).get_encoder()

    class Wrap(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_features):
            return self.m(input_features=input_features).last_hidden_state
    feats = torch.randn(2, 16, 32, generator=gen)
    return Spec(Wrap(enc), [("input_features", feats, "normal")], ["hidden"],
                batch_dyn(["input_features", "hidden"]))


class VisionWrap(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, pixel_values):
        return self.m(pixel_values=pixel_values).last_hidden_state


def vision(m, gen, size=32):
    return Spec(VisionWrap(m), [("pixel_values", image(gen, 1, 3, size), "normal")], ["hidden"],
                batch_dyn(["pixel_values", "hidden"]))


@zoo("hf_vit", "vision-transformer", "transformers")
def _(gen):
    cfg = transformers.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                 image_size=32, patch_size=8, initializer_range=0.1, **HF)
    return vision(transformers.ViTModel(cfg, add_pooling_layer=False), gen)


@zoo("hf_clip_vision", "vision-transformer", "transformers")
def _(gen):
    cfg = transformers.CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                        image_size=32, patch_size=8, initializer_range=0.1, **HF)
    return vision(transformers.CLIPVisionModel(cfg), gen)


@zoo("hf_swin", "vision-transformer", "transformers")
def _(gen):
    # One stage of two blocks: windows and shifted windows (torchvision's tv_swin has the patch
    # merging between stages).
    cfg = transformers.SwinConfig(image_size=32, patch_size=2, embed_dim=16, depths=[2], num_heads=[2], window_size=4,
                                  initializer_range=0.1, **HF)
    return vision(transformers.SwinModel(cfg, add_pooling_layer=False), gen)


@zoo("hf_bert_dynamo", "nlp-encoder", "transformers", exporter="dynamo")
def _(gen):
    return text_encoder(transformers.BertModel(transformers.BertConfig(**SMALL, **HF), add_pooling_layer=False), gen, True)


@zoo("hf_llama_dynamo", "nlp-decoder", "transformers", exporter="dynamo")
def _(gen):
    return llama_like(transformers.LlamaConfig, transformers.LlamaForCausalLM, gen, layers=1)


# ---------------------------------------------------------------------------------------------
# recurrent models
# ---------------------------------------------------------------------------------------------
class Recurrent(nn.Module):
    """x [batch, seq, features] through a torch.nn recurrent layer, then a linear head."""

    def __init__(self, cell, hidden=32, layers=1, bidirectional=False):
        super().__init__()
        self.rnn = cell(16, hidden, num_layers=layers, batch_first=True, bidirectional=bidirectional)
        self.head = nn.Linear(hidden * (2 if bidirectional else 1), 8)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y)


def recurrent(m, gen):
    return Spec(m, [("x", torch.randn(2, 16, 16, generator=gen), "normal")], ["y"],
                seq_dyn(["x", "y"]))


@zoo("rnn_lstm", "recurrent", "torch.nn")
def _(gen):
    return recurrent(Recurrent(nn.LSTM), gen)


@zoo("rnn_lstm_2layer", "recurrent", "torch.nn")
def _(gen):
    return recurrent(Recurrent(nn.LSTM, layers=2), gen)


@zoo("rnn_gru_bidirectional", "recurrent", "torch.nn")
def _(gen):
    return recurrent(Recurrent(nn.GRU, bidirectional=True), gen)


@zoo("rnn_tanh", "recurrent", "torch.nn")
def _(gen):
    return recurrent(Recurrent(nn.RNN), gen)


class Tagger(nn.Module):
    """Token ids -> embedding -> 2-layer bidirectional LSTM -> per-token tag scores."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 16)
        self.lstm = nn.LSTM(16, 24, num_layers=2, batch_first=True, bidirectional=True)
        self.head = nn.Linear(48, 9)

    def forward(self, input_ids):
        y, _ = self.lstm(self.emb(input_ids))
        return self.head(y)


@zoo("rnn_bilstm_tagger", "recurrent", "torch.nn")
def _(gen):
    return Spec(Tagger(), [("input_ids", token_ids(gen), "ids")], ["tags"], seq_dyn(["input_ids", "tags"]))


# ---------------------------------------------------------------------------------------------
# a BERT-style layer written with F.scaled_dot_product_attention
# ---------------------------------------------------------------------------------------------
class SdpaLayer(nn.Module):
    """One transformer encoder layer as users write it: fused QKV projection, heads split by
    view/transpose, F.scaled_dot_product_attention, output projection, residuals, LayerNorm, GELU
    MLP. mask: None, 'causal' (is_causal=True) or 'padding' (a boolean attn_mask from a 0/1
    padding mask, broadcast over heads and query positions)."""

    def __init__(self, mask, dim=32, heads=2):
        super().__init__()
        self.mask, self.heads = mask, heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x, attention_mask=None):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if self.mask == "causal":
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif self.mask == "padding":
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask[:, None, None, :].bool())
        else:
            a = F.scaled_dot_product_attention(q, k, v)
        x = self.n1(x + self.out(a.transpose(1, 2).reshape(b, s, d)))
        return self.n2(x + self.mlp(x))


def sdpa(mask, gen):
    inputs = [("x", torch.randn(2, 16, 32, generator=gen), "normal")]
    if mask == "padding":
        inputs.append(("attention_mask", attention_mask(gen), "mask"))
    return Spec(SdpaLayer(mask), inputs, ["y"], seq_dyn([n for n, _, _ in inputs] + ["y"]))


@zoo("sdpa_layer", "attention", "torch.nn")
def _(gen):
    return sdpa(None, gen)


@zoo("sdpa_layer_causal", "attention", "torch.nn")
def _(gen):
    return sdpa("causal", gen)


@zoo("sdpa_layer_mask", "attention", "torch.nn")
def _(gen):
    return sdpa("padding", gen)


@zoo("sdpa_layer_mask_dynamo", "attention", "torch.nn", exporter="dynamo")
def _(gen):
    return sdpa("padding", gen)


@zoo("tv_vit_dynamo", "classification", "torchvision", exporter="dynamo")
def _(gen):
    return classifier(vision_transformer.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                                           hidden_dim=32, mlp_dim=64, num_classes=10), gen, 32, batch=2)


# ---------------------------------------------------------------------------------------------
# export
# ---------------------------------------------------------------------------------------------
def export(entry, spec, path):
    names = [n for n, _, _ in spec.inputs]
    args = tuple(t for _, t, _ in spec.inputs)
    if entry["exporter"] == "torchscript":
        torch.onnx.export(spec.module, args, path, input_names=names, output_names=spec.outputs,
                          dynamic_axes=spec.dynamic, opset_version=entry["opset"], dynamo=False)
        return
    dims = {}
    shapes = []  # by position: the forward's parameter names need not be the ONNX input names
    for n in names:
        axes = spec.dynamic.get(n, {})
        shapes.append({a: dims.setdefault(d, torch.export.Dim(d, min=2, max=64)) for a, d in axes.items()} or None)
    shapes = tuple(shapes)
    prog = torch.onnx.export(spec.module, args, dynamo=True, opset_version=entry["opset"], input_names=names,
                             output_names=spec.outputs, dynamic_shapes=shapes, optimize=True,
                             external_data=entry["external"])
    # Node metadata (the PyTorch source stack of each node) is for debugging and the bulk of a
    # small model's file: dropped.
    for node in prog.model.graph:
        node.metadata_props.clear()
    prog.save(path, external_data=entry["external"])


def relative_error(got, want):
    scale = float(np.max(np.abs(want))) or 1.0
    return float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) / scale


def files_of(path):
    return [path] + ([path + ".data"] if os.path.exists(path + ".data") else [])


def describe(e, spec, model, feeds, files):
    """The manifest entry of an exported model."""
    dynamic = {}
    for vi in model.graph.input:
        for d, v in zip(dim_info(vi), feeds[vi.name].shape):
            if isinstance(d, str):
                dynamic[d] = [int(v), SECOND.get(d, int(v) + 1)]
    kinds = {n: k for n, _, k in spec.inputs}
    return {
        "family": e["family"], "library": e["library"], "exporter": e["exporter"],
        "opset": next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
        "inputs": [{"name": vi.name, "dtype": str(feeds[vi.name].dtype), "shape": dim_info(vi),
                    "kind": kinds[vi.name]} for vi in model.graph.input],
        "outputs": [{"name": vi.name, "shape": dim_info(vi)} for vi in model.graph.output],
        "dynamic": dynamic,
        "nodes": len(model.graph.node),
        "ops": sorted({n.op_type for n in model.graph.node}),
        "bytes": sum(os.path.getsize(f) for f in files),
        "external_data": len(files) > 1,
        "tolerance": TOLERANCE,
    }


def dim_info(value_info):
    return [d.dim_param if d.dim_param else d.dim_value for d in value_info.type.tensor_type.shape.dim]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--models")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    if args.list:
        for e in REGISTRY:
            print("%-26s %-20s %-13s %s" % (e["name"], e["family"], e["library"], e["exporter"]))
        return 0
    warnings.filterwarnings("ignore")
    os.makedirs(os.path.join(args.out, "models"), exist_ok=True)
    os.makedirs(os.path.join(args.out, "data"), exist_ok=True)
    mpath = os.path.join(args.out, "manifest.json")
    manifest = json.load(open(mpath)) if os.path.exists(mpath) else {}
    manifest.setdefault("models", {})
    manifest["tools"] = {"torch": torch.__version__, "torchvision": torchvision.__version__, "timm": timm.__version__,
                         "transformers": transformers.__version__, "onnx": onnx.__version__,
                         "onnxruntime": ort.__version__}
    wanted = set(args.models.split(",")) if args.models else None
    failed = []
    for i, e in enumerate(REGISTRY):
        name = e["name"]
        if wanted and name not in wanted:
            continue
        torch.manual_seed(1000 + i)
        gen = torch.Generator().manual_seed(2000 + i)
        path = os.path.join(args.out, "models", name + ".onnx")
        try:
            spec = randomize(e["build"](gen), gen)
            with torch.no_grad():
                ref = spec.module(*[t for _, t, _ in spec.inputs])
            ref = [ref] if isinstance(ref, torch.Tensor) else list(ref)
            for f in (path, path + ".data"):
                if os.path.exists(f):
                    os.remove(f)
            export(e, spec, path)
            model = onnx.load(path)
            onnx.checker.check_model(path)
            feeds = {n: t.numpy() for n, t, _ in spec.inputs}
            used = {i.name for i in model.graph.input}
            feeds = {k: v for k, v in feeds.items() if k in used}
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            outs = sess.run(None, feeds)
            for k, (o, r) in enumerate(zip(outs, ref)):
                err = relative_error(o, r.numpy())
                if not err <= 1e-4:
                    raise RuntimeError("output %d: onnxruntime differs from PyTorch by %.2e" % (k, err))
            entry = describe(e, spec, model, feeds, files_of(path))
            # Other inputs of the same size must change every output by a good part of its
            # largest magnitude: an output dominated by a constant would hide errors.
            same = {d: v[0] for d, v in entry["dynamic"].items()}
            other = sess.run(None, check.draw_inputs(entry, same, np.random.default_rng(7)))
            sensitivity = [relative_error(a, b) for a, b in zip(other, outs)]
            if not min(sensitivity) >= MIN_SENSITIVITY:
                raise RuntimeError("outputs barely depend on the inputs: %s" % ", ".join("%.3f" % x for x in sensitivity))
            sizes = check.second_sizes(entry)
            if sizes:  # the second size that check.py runs: onnxruntime must match PyTorch there too
                feeds2 = check.draw_inputs(entry, sizes, np.random.default_rng(check.seed_of(name)))
                with torch.no_grad():
                    ref2 = spec.module(*[torch.from_numpy(feeds2[n]) if n in feeds2 else t for n, t, _ in spec.inputs])
                ref2 = [ref2] if isinstance(ref2, torch.Tensor) else list(ref2)
                for k, (o, r) in enumerate(zip(sess.run(None, feeds2), ref2)):
                    err = relative_error(o, r.numpy())
                    if not err <= 1e-4:
                        raise RuntimeError("at %s, output %d: onnxruntime differs from PyTorch by %.2e" % (sizes, k, err))
        except Exception as ex:  # noqa: BLE001 - report and go on with the next model
            print("FAIL %s: %s: %s" % (name, type(ex).__name__, str(ex).strip().splitlines()[0][:300] if str(ex).strip() else ""))
            failed.append(name)
            continue
        np.savez(os.path.join(args.out, "data", name + "_in.npz"), **feeds)
        np.savez(os.path.join(args.out, "data", name + "_out.npz"),
                 **{o.name: a for o, a in zip(model.graph.output, outs)})
        manifest["models"][name] = entry
        print("ok   %-26s %-11s opset %d  %4d nodes  %7d bytes  sensitivity %.2f  dynamic %s" % (
            name, e["exporter"], entry["opset"], entry["nodes"], entry["bytes"], min(sensitivity), entry["dynamic"]))
    manifest["models"] = dict(sorted(manifest["models"].items()))
    with open(mpath, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print("%d exported, %d failed%s" % (len(REGISTRY) - len(failed) if not wanted else len(wanted) - len(failed), len(failed),
                                        (": " + ", ".join(failed)) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
