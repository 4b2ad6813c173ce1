"""fold_attention_quantize: sdpa -> transpose -> flatten -> quantize becomes one sdpa returning the codes;
the model's results do not change by a single bit, and the op's reference agrees with the kernel."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import native_ops as native
from ipexconvert.ir import Program
from ipexconvert.passes import PassOptions
from ipexconvert.passes.base import PASSES
from ipexconvert.quant.options import QuantOptions
from ipexconvert.runtime import kernels
from ipexconvert.runtime.executor import Executor
from int8_pass_helpers import INT8_TOL, planned, quantized
from pass_helpers import rel_err, run_program

HEADS, HEAD_DIM, SEQ = 2, 32, 24


class SelfAttention(nn.Module):
    """BERT's attention block: q/k/v projections split into heads, sdpa, heads merged, output projection."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        hidden = HEADS * HEAD_DIM
        self.q, self.k, self.v, self.o = (nn.Linear(hidden, hidden) for _ in range(4))

    def forward(self, x):
        b, s, _ = x.shape

        def heads(t):
            return t.view(b, s, HEADS, HEAD_DIM).transpose(1, 2)

        y = F.scaled_dot_product_attention(heads(self.q(x)), heads(self.k(x)), heads(self.v(x)))
        return self.o(y.transpose(1, 2).reshape(b, s, HEADS * HEAD_DIM))


def folded_and_unfolded(smoothquant="off", dtype="bfloat16") -> tuple[Program, Program, Program, list, int]:
    """bfloat16: the activations between the int8 layers are bf16 (to_bf16 ran), as on a CPU with
    native bf16; float32: they stay fp32. Either way the native attention kernel of that dtype
    runs where this CPU has it, else the op's reference."""
    before, quantization, data = planned(SelfAttention(), (4, SEQ, HEADS * HEAD_DIM), QuantOptions(smoothquant=smoothquant))
    unfolded = copy.deepcopy(before)
    if dtype == "bfloat16":
        PASSES["to_bf16"].run(unfolded, PassOptions(dtype="int8"))
    unfolded, _ = quantized(unfolded, quantization)
    folded = copy.deepcopy(unfolded)
    count = PASSES["fold_attention_quantize"].run(folded, PassOptions(dtype="int8"))["attention_quantize_folded"]
    return before, unfolded, folded, data, count


def sdpa_node(program: Program):
    (node,) = [n for n in program.graph.nodes if n.op == "sdpa"]
    return node


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("smoothquant", ["off", 0.5])
def test_quantize_after_attention_folds_and_results_are_bit_identical(smoothquant, dtype):
    before, unfolded, folded, data, count = folded_and_unfolded(smoothquant, dtype)
    assert count == 1
    node = sdpa_node(folded)
    assert folded.graph.values[node.inputs[0]].dtype == dtype
    assert node.attrs["quantize"]["dtype"] == "uint8"
    assert folded.graph.values[node.outputs[0]].dtype == "uint8"
    # SmoothQuant's per-channel multiplier (one per hidden feature) becomes sdpa's fifth input.
    if smoothquant == "off":
        assert len(node.inputs) == 4
    else:
        assert len(node.inputs) == 5 and folded.weights[node.inputs[4]].numel() == HEADS * HEAD_DIM
    # The output projection reads the flattened codes: the quantize node before it is gone.
    (projection,) = [n for n in folded.graph.nodes if n.op == "qlinear" and n.inputs[1].startswith("linear_3")]
    assert folded.graph.producers()[projection.inputs[0]].op == "reshape"
    assert sum(n.op == "quantize" for n in folded.graph.nodes) == sum(n.op == "quantize" for n in unfolded.graph.nodes) - 1
    for batch in data:
        for got, want in zip(run_program(folded, batch, {"batch": 4}), run_program(unfolded, batch, {"batch": 4}),
                             strict=True):
            assert torch.equal(got, want)
        for got, want in zip(run_program(folded, batch, {"batch": 4}), run_program(before, batch, {"batch": 4})):
            assert rel_err(got, want) < INT8_TOL


def test_folding_twice_changes_nothing():
    _, _, folded, _, _ = folded_and_unfolded()
    again = copy.deepcopy(folded)
    assert PASSES["fold_attention_quantize"].run(again, PassOptions(dtype="int8"))["attention_quantize_folded"] == 0
    assert again.graph == folded.graph


@pytest.mark.skipif(not native.available()
                    or native.kernel_level("attention") == native.kernel_level("attention_f32") == "none",
                    reason="needs a native attention kernel (bf16 or float32) at this ISA level")
@pytest.mark.parametrize("smoothquant", ["off", 0.5])
def test_reference_agrees_with_the_native_kernel(smoothquant):
    _, _, folded, data, _ = folded_and_unfolded(smoothquant)
    # bf16 attention, or the float32 one where bf16 parts widen at load (backends/cpu/compute_precision.py)
    names = {s.kernel_name for s in Executor(folded).steps}
    native_name = next((name for name in names if name.startswith("native:sdpa@")), None)
    assert native_name is not None, names
    saved = list(kernels.KERNELS[("cpu", "sdpa")])
    kernels.KERNELS[("cpu", "sdpa")][:] = []  # the op's reference (torch's attention, then quantize) runs instead
    try:
        assert native_name not in {s.kernel_name for s in Executor(folded).steps}
        reference_outputs = [run_program(folded, batch, {"batch": 4}) for batch in data]
    finally:
        kernels.KERNELS[("cpu", "sdpa")][:] = saved
    for batch, want in zip(data, reference_outputs):
        for got, w in zip(run_program(folded, batch, {"batch": 4}), want, strict=True):
            assert rel_err(got, w) < 0.02  # the two attentions round differently in bf16, so a code may move by one
