"""common_subexpressions: repeated nodes (same op, attrs and inputs; small constants by value) run once."""
from __future__ import annotations

import torch
from torch import nn

from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.passes.base import PASSES, PassOptions
from pass_helpers import assert_same_outputs, copy_program


class RepeatedMasks(nn.Module):
    """Each 'layer' rebuilds the same additive mask from its own copies of 0 and -inf."""

    def forward(self, x, keep):
        out = x
        for _ in range(3):
            mask = torch.where(keep, torch.tensor(0.0), torch.tensor(float("-inf")))
            out = out + mask.clamp(min=-1e4)
        other = torch.where(keep, torch.tensor(1.0), torch.tensor(-2.0))  # other numbers: stays
        return out, other


def test_repeats_are_computed_once():
    inputs = {"x": torch.randn(2, 5), "keep": torch.rand(2, 5) > 0.3}
    before = program_from_module(RepeatedMasks(), inputs, {})
    after = copy_program(before)
    wheres = before.graph.op_histogram()["aten:aten.where.self"]
    changes = PASSES["common_subexpressions"].run(after, PassOptions())
    assert wheres == 4 and after.graph.op_histogram()["aten:aten.where.self"] == 2
    assert changes["nodes_deduplicated"] >= 2
    assert after.graph.outputs == before.graph.outputs
    assert_same_outputs(before, after, inputs, {})
