"""fuse_grouped_attention: a decoder's repeat_kv views before sdpa become enable_gqa on sdpa itself."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ipexconvert.examples import get_example
from ipexconvert.examples.decoder_cache import decoder_example_inputs
from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.passes.base import PASSES, PassOptions
from pass_helpers import assert_same_outputs, copy_program

LLAMA_EXPORTS = pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13),
                                   reason="torch.export of transformers' Llama needs torch >= 2.13 (see docs/architecture.md)")


def _run(program, *names):
    counts = {}
    for name in names:
        counts.update(PASSES[name].run(program, PassOptions()))
    return counts


def _expands(program) -> int:
    return sum(1 for n in program.graph.nodes if n.op == "aten" and n.attrs["target"] == "aten.expand.default")


@LLAMA_EXPORTS
def test_tiny_llama_attention_reads_the_kv_heads():
    pytest.importorskip("transformers")
    example = get_example("tiny-llama")
    module = example.build()
    before = program_from_module(module, example.example_inputs(2), example.dynamic_dims, list(example.output_names))
    _run(before, "remove_identity", "fuse_attention")
    after = copy_program(before)
    assert _run(after, "fuse_grouped_attention", "dead_code")["gqa_fused"] == 2  # one per layer
    sdpas = [n for n in after.graph.nodes if n.op == "sdpa"]
    assert all(n.attrs["enable_gqa"] for n in sdpas)
    assert all(after.graph.values[n.inputs[1]].shape[1] == 2 for n in sdpas)  # 2 kv heads, not 4 repeated ones
    assert _expands(after) == _expands(before) - 4  # k and v of both layers; the mask's expand stays
    for batch, seq, past in ((2, 7, 3), (1, 1, 20), (1, 5, 0)):
        inputs = decoder_example_inputs(module.shape, batch, seq, past, seed=past)
        assert_same_outputs(before, after, inputs, {"batch": batch, "seq": seq, "past": past})


class _RepeatOnlyKeys(nn.Module):
    """k repeated per query head, v already with every head: not grouped attention, left alone."""

    def forward(self, q, k, v):
        b, h, s, d = k.shape
        k = k[:, :, None, :, :].expand(b, h, 2, s, d).reshape(b, h * 2, s, d)
        return F.scaled_dot_product_attention(q, k, v)


def test_only_keys_repeated_is_left_alone():
    inputs = {"q": torch.randn(1, 4, 6, 8), "k": torch.randn(1, 2, 6, 8), "v": torch.randn(1, 4, 6, 8)}
    # Static shapes: torch 2.11's export cannot prove its own stride guard for this reshape under a dynamic seq.
    program = program_from_module(_RepeatOnlyKeys(), inputs, {})
    _run(program, "remove_identity", "fuse_attention")
    assert _run(program, "fuse_grouped_attention")["gqa_fused"] == 0
