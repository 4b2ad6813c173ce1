"""fold_norm_quantize: add_layer_norm -> quantize becomes one add_layer_norm with a quantized output;
the model's results do not change by a single bit, and the op's reference agrees with the kernel."""
from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import native_ops as native
from ipexconvert.ir import Program
from ipexconvert.passes import PassOptions
from ipexconvert.passes.base import PASSES
from ipexconvert.quant.options import QuantOptions
from ipexconvert.runtime import kernels
from int8_pass_helpers import INT8_TOL, assert_close, planned, quantized
from pass_helpers import rel_err, run_program


class PostNorm(nn.Module):
    """Two post-norm residual blocks (BERT's shape): each norm feeds an int8 linear and the next residual add."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b, self.c = (nn.Linear(32, 32) for _ in range(3))
        self.n1, self.n2 = nn.LayerNorm(32), nn.LayerNorm(32)

    def forward(self, x):
        h = self.n1(x + self.a(x))
        h = self.n2(h + self.b(h))
        return self.c(h)


def folded_and_unfolded(smoothquant="off") -> tuple[Program, Program, Program, list, int]:
    before, quantization, data = planned(PostNorm(), (4, 32), QuantOptions(smoothquant=smoothquant))
    unfolded, _ = quantized(before, quantization)
    folded = copy.deepcopy(unfolded)
    count = PASSES["fold_norm_quantize"].run(folded, PassOptions(dtype="int8"))["norm_quantize_folded"]
    return before, unfolded, folded, data, count


@pytest.mark.parametrize("smoothquant", ["off", 0.5])
def test_quantize_after_each_norm_folds_and_results_are_bit_identical(smoothquant):
    before, unfolded, folded, data, count = folded_and_unfolded(smoothquant)
    norms = [n for n in folded.graph.nodes if n.op == "add_layer_norm"]
    assert count == 2 and len(norms) == 2
    producers = folded.graph.producers()
    for norm in norms:
        assert norm.attrs["quantize"]["dtype"] == "uint8" and len(norm.outputs) == 2
        assert folded.graph.values[norm.outputs[1]].dtype == "uint8"
    # SmoothQuant's per-channel multiplier travels with the fold as the norm's fifth input where
    # the norm's output is also a residual (n1); where the linear is its only reader (n2), the
    # smoothing went into the norm's own weights already.
    assert [len(n.inputs) for n in norms] == ([4, 4] if smoothquant == "off" else [5, 4])
    assert all(n.inputs[4] in folded.graph.constants for n in norms if len(n.inputs) == 5)
    # Each linear after a norm reads the norm's quantized output directly; no quantize reads a norm.
    readers_of_norms = [n for n in folded.graph.nodes if any(producers.get(v) in norms for v in n.inputs if v)]
    assert not any(n.op == "quantize" for n in readers_of_norms)
    assert sum(n.op == "qlinear" for n in readers_of_norms) == 2
    for batch in data:
        for got, want in zip(run_program(folded, batch, {"batch": 4}), run_program(unfolded, batch, {"batch": 4}),
                             strict=True):
            assert torch.equal(got, want)
    assert_close(folded, before, data, tol=INT8_TOL)


def test_folding_twice_changes_nothing():
    _, _, folded, _, _ = folded_and_unfolded()
    again = copy.deepcopy(folded)
    assert PASSES["fold_norm_quantize"].run(again, PassOptions(dtype="int8"))["norm_quantize_folded"] == 0
    assert again.graph == folded.graph


@pytest.mark.skipif(not native.available(), reason="compares the native kernel with the op's reference")
@pytest.mark.parametrize("smoothquant", ["off", 0.5])
def test_reference_agrees_with_the_native_kernel(smoothquant):
    _, _, folded, data, _ = folded_and_unfolded(smoothquant)
    saved = list(kernels.KERNELS[("cpu", "add_layer_norm")])
    kernels.KERNELS[("cpu", "add_layer_norm")][:] = []  # the op's reference runs instead
    try:
        reference_outputs = [run_program(folded, batch, {"batch": 4}) for batch in data]
    finally:
        kernels.KERNELS[("cpu", "add_layer_norm")][:] = saved
    for batch, want in zip(data, reference_outputs):
        for got, w in zip(run_program(folded, batch, {"batch": 4}), want, strict=True):
            assert rel_err(got, w) < 0.02  # the norms differ in bf16 rounding, so a code may move by one
