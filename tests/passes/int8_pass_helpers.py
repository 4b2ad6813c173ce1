"""Shared helpers for the int8 pass tests: a calibrated plan for a small module, the quantize pass, numerics."""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.ir import Node, Program
from ipexconvert.ir.dynamic_dims import DynamicDim
from ipexconvert.passes import PassOptions, run_pipeline
from ipexconvert.passes.base import PASSES
from ipexconvert.passes.pipeline import PIPELINES
from ipexconvert.quant.options import QuantOptions
from ipexconvert.quant.plan import Quantization
from ipexconvert.quant.planner import plan_quantization
from pass_helpers import rel_err, run_program

INT8_TOL = 0.05  # max|int8 - fp32| / max|fp32| for these small, well-scaled models


def planned(module: nn.Module, shape: tuple, options=QuantOptions(smoothquant="off")) -> tuple[Program, Quantization, list]:
    """Float passes, then the planner: (the planned float program, its quantization, the calibration batches)."""
    g = torch.Generator().manual_seed(0)
    data = [{"x": torch.randn(*shape, generator=g)} for _ in range(3)]
    program = program_from_module(module.eval(), data[0], {"x": {0: DynamicDim(name="batch", max=8)}})
    names = PIPELINES["cpu", "int8"]
    run_pipeline(program, names[:names.index("to_bf16")], PassOptions(dtype="int8"))
    return program, plan_quantization(program, data, data[:1], options), data


def quantized(program: Program, quantization: Quantization) -> tuple[Program, dict]:
    """A copy of `program` after the quantize pass, and the pass's counts."""
    program = copy.deepcopy(program)
    return program, PASSES["quantize"].run(program, PassOptions(dtype="int8", quantization=quantization))


def by_weight(program: Program, prefix: str) -> Node:
    """The float linear/conv2d node whose weight is the module attribute `prefix`'s."""
    (node,) = [n for n in program.graph.nodes if n.op in ("linear", "conv2d") and n.inputs[1].startswith(f"{prefix}.weight")]
    return node


def assert_close(after: Program, before: Program, data: list, tol: float = INT8_TOL) -> None:
    """Same outputs (count, shape, dtype) within tol, on every batch, with the real executor."""
    for batch in data:
        for got, want in zip(run_program(after, batch, {"batch": 2}), run_program(before, batch, {"batch": 2}), strict=True):
            assert got.dtype == want.dtype and got.shape == want.shape
            assert rel_err(got, want) < tol


class Bottleneck(nn.Module):
    """1x1 -> 3x3 -> 1x1 (BN after each), residual add, relu; the shortcut computed first or last
    (first as in examples/resnet.py: the add fuses into conv3; last as in torchvision: into the downsample)."""

    def __init__(self, cin: int, mid: int, cout: int, stride: int = 1, shortcut_last: bool = False):
        super().__init__()
        self.shortcut_last = shortcut_last
        self.c1, self.b1 = nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid)
        self.c2, self.b2 = nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid)
        self.c3, self.b3 = nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.down is None or self.shortcut_last else self.down(x)
        h = F.relu(self.b1(self.c1(x)))
        h = F.relu(self.b2(self.c2(h)))
        h = self.b3(self.c3(h))
        if self.down is not None and self.shortcut_last:
            identity = self.down(x)
        return F.relu(h + identity)


class TinyResNet(nn.Module):
    def __init__(self, shortcut_last: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.stem, self.pool = nn.Conv2d(3, 16, 3, padding=1), nn.MaxPool2d(2)
        self.blocks = nn.Sequential(Bottleneck(16, 8, 32, stride=2, shortcut_last=shortcut_last),
                                    Bottleneck(32, 8, 32, shortcut_last=shortcut_last))
        self.fc = nn.Linear(32, 10)
        for m in self.modules():  # non-trivial BN statistics, so folding and ranges are exercised
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2), m.running_var.uniform_(0.5, 1.5), m.weight.data.uniform_(0.5, 1.5)

    def forward(self, x):
        return self.fc(self.blocks(self.pool(F.relu(self.stem(x)))).mean(dim=(2, 3)))
