#!/usr/bin/env python3
"""Writes the old-opset regression models (torch_opset9.onnx, torch_opset10.onnx) with PyTorch's
TorchScript exporter: a small CNN head whose ops changed between opsets 9/10 and 13 (Upsample or
Resize-10 in nearest and linear mode, Clip, Pad, Slice, Split, Squeeze/Unsqueeze, ReduceSum,
TopK, Softmax/LogSoftmax). coil refused both before it converted old op versions (issue 14).
Seeded weights, batch-norm statistics randomized; run where torch is installed."""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


class Net(nn.Module):
    def __init__(self, down):
        super().__init__()
        self.down = down
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        y = F.relu6(self.bn(self.c1(x)))
        y = F.max_pool2d(y, 2)
        y = F.interpolate(y, scale_factor=2, mode="nearest")
        if self.down:  # Resize-10 downsampling (Upsample allows scales >= 1 only)
            z = F.interpolate(y, scale_factor=0.5, mode="bilinear", align_corners=False)
        else:
            z = F.max_pool2d(F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=False), 4)
        y = self.c2(y) + z
        a, b = torch.chunk(y, 2, dim=1)
        y = F.pad(torch.cat([b, a], 1), (1, 0, 0, 1))[:, :, 1:, :-1]
        s = F.softmax(y.flatten(2), dim=1)
        t = y.mean(dim=(2,)).unsqueeze(-1).squeeze(-1)
        v, _ = torch.topk(t, 3, dim=1)
        h = t.sum(dim=1, keepdim=True) * t
        out = self.fc(torch.cat([h, t, t, t], 1).reshape(2, -1)[:, :32])
        return F.log_softmax(out, dim=1), s, v


def main():
    for opset, down in ((9, False), (10, True)):
        torch.manual_seed(opset)
        m = Net(down).eval()
        with torch.no_grad():
            for p in m.bn.parameters():
                p.uniform_(0.5, 1.5)
            m.bn.running_mean.uniform_(-0.5, 0.5)
            m.bn.running_var.uniform_(0.5, 2)
        torch.onnx.export(m, (torch.randn(2, 3, 16, 16),), os.path.join(HERE, "torch_opset%d.onnx" % opset),
                          opset_version=opset, dynamo=False, input_names=["x"], output_names=["y", "s", "v"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
