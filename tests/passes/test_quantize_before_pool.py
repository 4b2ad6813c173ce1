"""quantize_before_pool: max_pool2d -> quantize becomes quantize -> max_pool2d on the codes (the same
codes: quantizing keeps the order of values); fold_requantize then makes the conv before it write
uint8; cases that must not move."""
from __future__ import annotations

import copy

import torch
from torch import nn

from ipexconvert.passes import PassOptions
from ipexconvert.passes.base import PASSES
from ipexconvert.quant.options import QuantOptions
from int8_pass_helpers import INT8_TOL, planned, quantized
from pass_helpers import rel_err, run_program


class Stem(nn.Module):
    """ResNet's stem: conv, ReLU, 3x3/2 max-pool, then an int8 conv."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv, self.pool, self.next = nn.Conv2d(3, 8, 7, 2, 3), nn.MaxPool2d(3, 2, 1), nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        return self.next(self.pool(torch.relu(self.conv(x))))


def moved_and_unmoved():
    before, quantization, data = planned(Stem(), (2, 3, 32, 32), QuantOptions(smoothquant="off"))
    unmoved, _ = quantized(before, quantization)
    moved = copy.deepcopy(unmoved)
    count = PASSES["quantize_before_pool"].run(moved, PassOptions(dtype="int8"))["quantize_moved_before_pool"]
    return before, unmoved, moved, data, count


def test_the_quantize_moves_before_the_pool_with_the_same_codes():
    before, unmoved, moved, data, count = moved_and_unmoved()
    assert count == 1
    producers = moved.graph.producers()
    (pool,) = [n for n in moved.graph.nodes if n.op == "max_pool2d"]
    assert producers[pool.inputs[0]].op == "quantize"
    assert moved.graph.values[pool.outputs[0]].dtype == "uint8"
    assert moved.graph.values[pool.inputs[0]].shape == moved.graph.values[producers[pool.inputs[0]].inputs[0]].shape
    names = [n.name for n in moved.graph.nodes]
    assert names.index(producers[pool.inputs[0]].name) < names.index(pool.name)
    for batch in data:
        for got, want in zip(run_program(moved, batch, {"batch": 2}), run_program(unmoved, batch, {"batch": 2}), strict=True):
            assert torch.equal(got, want)  # the same codes reach the next conv


def test_fold_requantize_then_makes_the_stem_conv_write_uint8():
    before, _, moved, data, _ = moved_and_unmoved()
    assert PASSES["fold_requantize"].run(moved, PassOptions(dtype="int8"))["requantize_folded"] == 1
    (stem,) = [n for n in moved.graph.nodes if n.op == "qconv2d" and n.outputs[0] in
               {p.inputs[0] for p in moved.graph.nodes if p.op == "max_pool2d"}]
    assert stem.attrs["output_dtype"] == "uint8"
    assert sum(n.op == "quantize" for n in moved.graph.nodes) == 1  # the input's only
    for batch in data:
        for got, want in zip(run_program(moved, batch, {"batch": 2}), run_program(before, batch, {"batch": 2}), strict=True):
            assert rel_err(got, want) < INT8_TOL


def test_nothing_moves_when_the_pool_has_another_reader_or_twice():
    _, unmoved, moved, _, _ = moved_and_unmoved()
    assert PASSES["quantize_before_pool"].run(moved, PassOptions(dtype="int8"))["quantize_moved_before_pool"] == 0
    (pool,) = [n for n in unmoved.graph.nodes if n.op == "max_pool2d"]
    unmoved.graph.outputs.append(pool.outputs[0])  # the float pool output is also a model output
    assert PASSES["quantize_before_pool"].run(unmoved, PassOptions(dtype="int8"))["quantize_moved_before_pool"] == 0
