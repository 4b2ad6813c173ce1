"""fuse_rope: Hugging Face's rotate-half rotary embedding becomes one rope node per query/key tensor."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from ipexconvert.examples import get_example
from ipexconvert.examples.decoder_cache import decoder_example_inputs
from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.ir.dynamic_dims import DynamicDim
from ipexconvert.passes.base import PASSES, PassOptions
from pass_helpers import assert_same_outputs, copy_program

LLAMA_EXPORTS = pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13),
                                   reason="torch.export of transformers' Llama needs torch >= 2.13 (see docs/architecture.md)")


def _fuse(program):
    return PASSES["fuse_rope"].run(program, PassOptions())["rope_fused"]


@LLAMA_EXPORTS
def test_tiny_llama_query_and_key_rotations_fuse():
    pytest.importorskip("transformers")
    example = get_example("tiny-llama")
    module = example.build()
    before = program_from_module(module, example.example_inputs(2), example.dynamic_dims, list(example.output_names))
    after = copy_program(before)
    assert _fuse(after) == 4  # q and k of 2 layers
    hist = after.graph.op_histogram()
    assert hist["rope"] == 4 and "aten:aten.neg.default" not in hist
    for batch, seq, past in ((2, 7, 3), (1, 1, 20)):
        inputs = decoder_example_inputs(module.shape, batch, seq, past, seed=past)
        assert_same_outputs(before, after, inputs, {"batch": batch, "seq": seq, "past": past})


class RotateHalf(nn.Module):
    """The pattern with operands swapped, and a variant that rotates the wrong way (not rope)."""

    def __init__(self, wrong_way: bool = False):
        super().__init__()
        self.wrong_way = wrong_way

    def forward(self, x, cos, sin):
        x1, x2 = x[..., :4], x[..., 4:]
        rotated = torch.cat([x1, -x2] if self.wrong_way else [-x2, x1], dim=-1)
        return sin * rotated + cos * x


@pytest.mark.parametrize("wrong_way, fused", [(False, 1), (True, 0)])
def test_operand_orders_and_a_look_alike(wrong_way, fused):
    inputs = {"x": torch.randn(1, 2, 5, 8), "cos": torch.randn(1, 1, 5, 8), "sin": torch.randn(1, 1, 5, 8)}
    seq = DynamicDim("seq", 2, 64)
    before = program_from_module(RotateHalf(wrong_way), inputs, {n: {2: seq} for n in inputs})
    after = copy_program(before)
    assert _fuse(after) == fused
    assert_same_outputs(before, after, inputs, {"seq": 5})
