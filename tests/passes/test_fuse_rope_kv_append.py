"""fuse_rope_kv_append: each layer's q/k/v head views, ropes and cache appends become one rope_kv_append, from
three projections (fp32) or from one merged q/k/v projection (merge_linears), outputs unchanged; a rotated key
read outside the pattern keeps the layer as it was."""
from __future__ import annotations

import pytest
import torch

from ipexconvert.examples import get_example
from ipexconvert.examples.decoder_cache import decoder_example_inputs
from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.ir import Node
from ipexconvert.passes.base import PASSES, PassOptions
from ipexconvert.passes.pipeline import pipeline_for
from pass_helpers import assert_same_outputs, copy_program

pytest.importorskip("transformers")
pytestmark = pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13),
                                reason="torch.export of transformers' Llama needs torch >= 2.13 (see docs/architecture.md)")

BEFORE = [p for p in pipeline_for("fp32") if p not in ("fuse_rope_kv_append", "prepack")]


def _program():
    example = get_example("tiny-llama")
    module = example.build()
    program = program_from_module(module, example.example_inputs(2), example.dynamic_dims, list(example.output_names))
    return module, program


def _run(program, names):
    changes = {}
    for name in names:
        changes.update(PASSES[name].run(program, PassOptions()))
    return changes


def _same_outputs(module, before, after):
    for batch, seq, past in ((2, 6, 0), (1, 1, 9)):
        inputs = decoder_example_inputs(module.shape, batch, seq, past, seed=past)
        assert_same_outputs(before, after, inputs, {"batch": batch, "seq": seq, "past": past})


@pytest.mark.parametrize("merged", [False, True])
def test_each_layer_becomes_one_rope_kv_append(merged):
    module, before = _program()
    _run(before, BEFORE + (["merge_linears"] if merged else []))
    after = copy_program(before)
    assert _run(after, ["fuse_rope_kv_append"])["rope_kv_appends"] == 2  # 2 layers
    hist = after.graph.op_histogram()
    assert hist["permute"] == before.graph.op_histogram()["permute"] - 6  # the q, k and v head views of 2 layers
    assert hist["rope_kv_append"] == 2 and "rope" not in hist and "kv_append" not in hist
    nodes = [n for n in after.graph.nodes if n.op == "rope_kv_append"]
    assert all(len(n.inputs) == (5 if merged else 7) for n in nodes)
    assert sorted(o for n in nodes for o in n.outputs[1:]) == sorted(o for o in after.graph.outputs if o.startswith("present_"))
    _same_outputs(module, before, after)


def test_a_rotated_key_read_elsewhere_keeps_the_layer():
    module, before = _program()
    _run(before, BEFORE)
    graph = before.graph
    append = next(n for n in graph.nodes if n.op == "kv_append" and n.outputs[0] == "present_key_0")
    rotated = append.inputs[1]
    graph.nodes.append(Node(name="extra_read", op="identity", inputs=[rotated], outputs=["rotated_key_0"]))
    graph.values["rotated_key_0"] = graph.values[rotated]
    graph.outputs.append("rotated_key_0")
    after = copy_program(before)
    assert _run(after, ["fuse_rope_kv_append"])["rope_kv_appends"] == 1  # only layer 1
    assert after.graph.op_histogram()["rope"] == 2  # layer 0's q and k ropes stay
