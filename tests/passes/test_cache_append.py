"""cache_append: the cat of a decoder's past cache (a graph input) and the new positions, read as a graph
output, becomes kv_append; other cats stay."""
from __future__ import annotations

import pytest
import torch

from ipexconvert.examples import get_example
from ipexconvert.examples.decoder_cache import decoder_example_inputs
from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.passes.base import PASSES, PassOptions
from pass_helpers import assert_same_outputs, copy_program

pytest.importorskip("transformers")
pytestmark = pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13),
                                reason="torch.export of transformers' Llama needs torch >= 2.13 (see docs/architecture.md)")


def test_every_cache_cat_becomes_kv_append():
    example = get_example("tiny-llama")
    module = example.build()
    before = program_from_module(module, example.example_inputs(2), example.dynamic_dims, list(example.output_names))
    cats_before = sum(1 for n in before.graph.nodes if n.op == "aten" and n.attrs["target"] == "aten.cat.default")
    after = copy_program(before)
    assert PASSES["cache_append"].run(after, PassOptions())["cache_appends"] == 4  # k and v of 2 layers
    appends = [n for n in after.graph.nodes if n.op == "kv_append"]
    assert sorted(n.outputs[0] for n in appends) == sorted(n for n in after.graph.outputs if n.startswith("present_"))
    cats_after = sum(1 for n in after.graph.nodes if n.op == "aten" and n.attrs["target"] == "aten.cat.default")
    assert cats_after == cats_before - 4  # the rotary embedding's cats stay
    for batch, seq, past in ((1, 6, 0), (2, 1, 11)):
        inputs = decoder_example_inputs(module.shape, batch, seq, past, seed=past)
        assert_same_outputs(before, after, inputs, {"batch": batch, "seq": seq, "past": past})
