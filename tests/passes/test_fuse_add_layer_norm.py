"""fuse_add_layer_norm: layer_norm(x + residual) becomes one add_layer_norm node, outputs unchanged."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.ir import Program
from ipexconvert.ir.dynamic_dims import DynamicDim
from ipexconvert.passes.base import PASSES, PassOptions
from pass_helpers import copy_program as _copy, run_program as _run, rel_err as _rel_err, assert_same_outputs as _assert_same_outputs

DIM = 32


def _fuse(program: Program) -> dict[str, int]:
    return PASSES["fuse_add_layer_norm"].run(program, PassOptions())


def _fused_nodes(program: Program):
    return [n for n in program.graph.nodes if n.op == "add_layer_norm"]


# ---- tiny-bert: post-norm residual blocks ---------------------------------------------------


def test_tiny_bert_post_norm_blocks():
    pytest.importorskip("transformers")
    from ipexconvert.examples import get_example

    example = get_example("tiny-bert")
    before = program_from_module(example.build(), example.example_inputs(2), example.dynamic_dims,
                                 list(example.output_names))
    after = _copy(before)
    hist_before = before.graph.op_histogram()

    changes = _fuse(after)

    hist_after = after.graph.op_histogram()
    # Two residual+norm pairs per layer. The embeddings' norm reads word+type [batch,seq,64] plus
    # position [1,seq,64] embeddings: that add broadcasts, so it stays a plain add + layer_norm.
    assert changes == {"add_layer_norm_fused": 4, "add_layer_norm_with_sum": 0}
    assert hist_before["layer_norm"] == 5 and "add_layer_norm" not in hist_before
    assert hist_after["add_layer_norm"] == 4 and hist_after["layer_norm"] == 1
    assert hist_after["add"] == hist_before["add"] - 4
    assert all(n.attrs["return_sum"] is False and len(n.outputs) == 1 for n in _fused_nodes(after))
    assert all(n.attrs["eps"] == pytest.approx(1e-12) and n.attrs["normalized_shape"] == [64]
               for n in _fused_nodes(after))
    assert after.graph.outputs == before.graph.outputs

    for batch, seq in [(2, 16), (3, 9)]:
        gen = torch.Generator().manual_seed(seq)
        inputs = {"input_ids": torch.randint(0, 1000, (batch, seq), generator=gen),
                  "attention_mask": torch.ones(batch, seq, dtype=torch.int64)}
        _assert_same_outputs(before, after, inputs, {"batch": batch, "seq": seq})


# ---- a pre-norm block: the sum is read again ------------------------------------------------


class PreNormBlock(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.norm1, self.norm2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM, eps=1e-6)
        self.fc = nn.Linear(DIM, DIM)
        with torch.no_grad():  # non-trivial affine parameters
            for norm in (self.norm1, self.norm2):
                norm.weight.uniform_(0.5, 1.5)
                norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x, r):
        h = x + r                      # read by norm1 and, before norm1 runs, by the mul
        kept = h * 0.5
        h2 = kept + self.fc(self.norm1(h))
        return self.norm2(h2), h2      # h2 is also a graph output


def _token_dims(names: str) -> dict:
    batch, seq = DynamicDim(name="batch", max=8), DynamicDim(name="seq", min=2, max=64)
    return {n: {0: batch, 1: seq} for n in names}


def _token_inputs(names: str, batch: int, seq: int, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {n: torch.randn(batch, seq, DIM, generator=gen) for n in names}


def test_pre_norm_keeps_the_sum():
    before = program_from_module(PreNormBlock(), _token_inputs("xr", 2, 5, 0), _token_dims("xr"))
    after = _copy(before)

    assert _fuse(after) == {"add_layer_norm_fused": 2, "add_layer_norm_with_sum": 2}

    hist = after.graph.op_histogram()
    assert hist.get("add_layer_norm") == 2 and "layer_norm" not in hist and "add" not in hist
    first, second = _fused_nodes(after)
    assert first.attrs["return_sum"] and second.attrs["return_sum"]
    assert len(first.outputs) == len(second.outputs) == 2
    assert first.inputs[:2] == ["x", "r"]
    (mul,) = [n for n in after.graph.nodes if n.op == "mul"]
    assert mul.inputs == [first.outputs[1]]  # still reads the sum...
    assert after.graph.nodes.index(first) < after.graph.nodes.index(mul)  # ...which now exists before it
    assert second.outputs[1] in after.graph.outputs  # h2 is still returned
    assert second.attrs["eps"] == pytest.approx(1e-6)
    for batch, seq in [(2, 5), (4, 11)]:
        _assert_same_outputs(before, after, _token_inputs("xr", batch, seq, batch), {"batch": batch, "seq": seq})


# ---- adds the pass must leave alone -------------------------------------------------------


class NotFusable(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.norms = nn.ModuleList(nn.LayerNorm(DIM) for _ in range(4))
        self.shift = nn.Parameter(torch.randn(DIM))

    def forward(self, x, r):
        a = self.norms[0](x + 1.0)             # python-number operand
        b = self.norms[1](x + self.shift)      # residual [DIM] needs broadcasting
        c = self.norms[2](x + r[:, :1])        # residual [batch, 1, DIM] needs broadcasting
        d = self.norms[3](x * r)               # not an add
        return a + b + c + d                   # these adds feed no layer_norm


def test_scalar_and_broadcast_adds_are_not_fused():
    program = program_from_module(NotFusable(), _token_inputs("xr", 2, 5, 0), _token_dims("xr"))
    hist = program.graph.op_histogram()
    assert hist["layer_norm"] == 4
    assert _fuse(program) == {"add_layer_norm_fused": 0, "add_layer_norm_with_sum": 0}
    assert program.graph.op_histogram() == hist
