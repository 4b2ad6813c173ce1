"""fuse_swiglu: mul(silu(gate), up) becomes one silu_mul node, also over the slices of a merged gate/up GEMM
(the weight-only pipeline's form), outputs unchanged; a silu read twice or a broadcasting mul stays."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.passes.base import PASSES, PassOptions
from pass_helpers import assert_same_outputs, copy_program


class SwiGlu(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate, self.up, self.down = nn.Linear(16, 24, bias=False), nn.Linear(16, 24, bias=False), nn.Linear(24, 16)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Lookalikes(nn.Module):
    def forward(self, x, y):
        s = F.silu(x)
        read_twice = s * y + s      # the silu is needed on its own too
        broadcast = F.silu(x) * y[..., :1]  # shapes differ
        return read_twice, broadcast


def _run(module, inputs, passes):
    before = program_from_module(module, inputs, {})
    after = copy_program(before)
    changes = {}
    for name in passes:
        changes.update(PASSES[name].run(after, PassOptions()))
    assert_same_outputs(before, after, inputs, {})
    return changes, after


def test_the_gate_becomes_silu_mul():
    changes, after = _run(SwiGlu(), {"x": torch.randn(2, 5, 16)}, ["fuse_swiglu"])
    hist = after.graph.op_histogram()
    assert changes["swiglu_fused"] == 1 and hist["silu_mul"] == 1 and "silu" not in hist and "mul" not in hist


def test_slices_of_a_merged_gate_up_projection_are_read_in_place():
    changes, after = _run(SwiGlu(), {"x": torch.randn(2, 5, 16)}, ["merge_linears", "fuse_swiglu"])
    hist = after.graph.op_histogram()
    assert changes["linears_merged"] == 2 and changes["swiglu_fused"] == 1 and changes["halves_read_in_place"] == 1
    assert hist["silu_mul"] == 1 and "silu" not in hist and "aten:aten.slice.Tensor" not in hist
    (node,) = [n for n in after.graph.nodes if n.op == "silu_mul"]
    assert len(node.inputs) == 1 and after.graph.values[node.inputs[0]].shape[-1] == 48


class UnevenSlices(nn.Module):
    def forward(self, x):
        return F.silu(x[..., :8]) * x[..., 8:16], x[..., 16:]  # not the two halves of x's last dim


def test_slices_that_are_not_the_two_halves_stay():
    changes, after = _run(UnevenSlices(), {"x": torch.randn(3, 20)}, ["fuse_swiglu"])
    assert changes == {"swiglu_fused": 1, "halves_read_in_place": 0}
    (node,) = [n for n in after.graph.nodes if n.op == "silu_mul"]
    assert len(node.inputs) == 2


def test_lookalikes_stay():
    changes, after = _run(Lookalikes(), {"x": torch.randn(3, 8), "y": torch.randn(3, 8)}, ["fuse_swiglu"])
    assert changes == {"swiglu_fused": 0, "halves_read_in_place": 0}
    assert "silu_mul" not in after.graph.op_histogram()
