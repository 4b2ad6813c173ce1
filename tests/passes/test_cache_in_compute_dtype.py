"""cache_in_compute_dtype: a bf16 decoder's KV cache crosses the signature in bf16, without the casts of the
whole cache that to_bf16 puts at every float32 input and output."""
from __future__ import annotations

import pytest
import torch

from ipexconvert.examples import get_example
from ipexconvert.examples.decoder_cache import decoder_example_inputs
from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.passes.base import PASSES, PassOptions
from pass_helpers import copy_program, run_program

pytest.importorskip("transformers")
pytestmark = pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13),
                                reason="torch.export of transformers' Llama needs torch >= 2.13 (see docs/architecture.md)")


def _run(program, *names):
    counts = {}
    for name in names:
        counts.update(PASSES[name].run(program, PassOptions(dtype="bf16")))
    return counts


def test_bf16_decoder_cache_is_bf16_at_the_signature():
    example = get_example("tiny-llama")
    module = example.build()
    program = program_from_module(module, example.example_inputs(2), example.dynamic_dims, list(example.output_names))
    _run(program, "remove_identity", "dead_code", "fuse_rms_norm", "fuse_attention", "to_bf16")
    before = copy_program(program)
    assert _run(program, "cache_in_compute_dtype")["cache_tensors"] == 4  # k and v of 2 layers
    graph = program.graph
    cache_inputs = [n for n in graph.inputs if n.startswith("past_")]
    cache_outputs = [n for n in graph.outputs if n.startswith("present_")]
    assert [graph.values[n].dtype for n in cache_inputs + cache_outputs] == ["bfloat16"] * 8
    assert graph.values["logits"].dtype == "float32" and graph.values["input_ids"].dtype == "int64"
    casts = [n for n in graph.nodes if n.op == "to_dtype"]
    assert len(casts) == len([n for n in before.graph.nodes if n.op == "to_dtype"]) - 8
    # Same values: the bf16 program gets the cache the float32 one rounds to bf16 on entry. Both run bf16 as bf16:
    # where the CPU has no bf16 arithmetic the executor would compute in float32 (widen_bf16) and the float32
    # program's present_* would then leave unrounded, which is that CPU's choice, not this pass's meaning.
    inputs = decoder_example_inputs(module.shape, 1, 5, 9, seed=1)
    dims = {"batch": 1, "seq": 5, "past": 9}
    want = run_program(before, inputs, dims, widen_bf16=False)
    got = run_program(program, {k: v.bfloat16() if k.startswith("past_") else v for k, v in inputs.items()}, dims,
                      widen_bf16=False)
    for name, g, w in zip(graph.outputs, got, want):
        assert torch.equal(g.float(), w.float()), name
