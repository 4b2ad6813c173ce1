"""fuse_gelu: x * 0.5 * (1 + erf(x / sqrt 2)) in its written forms becomes one gelu node, outputs
unchanged; lookalikes stay as they are."""
from __future__ import annotations

import math

import torch
from torch import nn

from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.passes.base import PASSES, PassOptions
from pass_helpers import assert_same_outputs, copy_program


class WrittenGelus(nn.Module):
    def forward(self, x):
        a = x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))            # HF BERT's form
        b = (x * (torch.erf(x / 1.4142135381698608) + 1.0)) * 0.5       # torch.onnx.export's form
        c = (x * 0.5) * (torch.erf(x * 0.7071067811865476) + 1.0)
        return a + 1, b + 2, c + 3


class Lookalikes(nn.Module):
    def forward(self, x):
        scaled = x / math.sqrt(2.0)
        d = x * 0.5 * (1.0 + torch.erf(scaled))                        # the scaled value is read twice
        e = x * 0.5 * (1.0 + torch.erf(x / 2.0))                        # not sqrt(2)
        f = x * 0.25 * (1.0 + torch.erf(x / math.sqrt(2.0)))            # not a half
        return d + scaled, e, f


def _run(module: nn.Module):
    x = torch.randn(4, 16)
    before = program_from_module(module, {"x": x}, {})
    after = copy_program(before)
    changes = PASSES["fuse_gelu"].run(after, PassOptions())
    assert_same_outputs(before, after, {"x": x}, {})
    return changes, after


def test_the_written_forms_become_gelu():
    changes, after = _run(WrittenGelus())
    hist = after.graph.op_histogram()
    assert changes == {"gelu_fused": 3}
    assert hist["gelu"] == 3 and "aten:aten.erf.default" not in hist


def test_lookalikes_stay():
    changes, after = _run(Lookalikes())
    assert changes == {"gelu_fused": 0}
    assert "gelu" not in after.graph.op_histogram()
