"""fuse_layout_change: the input's bf16 cast folds into its channels-last copy (the same values), and
the channels-last copy into the int8 quantize after it (the codes of the float32 input, within one
code of the codes of its bf16 rounding); nothing folds where the intermediate value has another
reader."""
from __future__ import annotations

import copy

import torch

from ipexconvert.examples import get_example
from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.ir.ops._quant import quantize
from ipexconvert.passes import PassOptions, run_pipeline
from ipexconvert.passes.base import PASSES
from ipexconvert.passes.pipeline import PIPELINES
from int8_pass_helpers import INT8_TOL, planned, quantized
from pass_helpers import rel_err, run_program
from test_quantize_before_pool import Stem

CL = torch.channels_last


def _fuse(program) -> dict[str, int]:
    return PASSES["fuse_layout_change"].run(program, PassOptions())


def _ops(program) -> list[str]:
    return [n.op for n in program.graph.nodes]


def bf16_tiny_cnn():
    """tiny-cnn through the bf16 pipeline up to (not including) fuse_layout_change, and an input batch."""
    example = get_example("tiny-cnn")
    inputs = example.example_inputs(2)
    program = program_from_module(example.build(), inputs, example.dynamic_dims, list(example.output_names))
    names = PIPELINES["cpu", "bf16"]
    run_pipeline(program, names[:names.index("fuse_layout_change")], PassOptions(dtype="bf16"))
    return program, inputs


def test_bf16_cast_folds_into_the_layout_change_with_the_same_outputs():
    before, inputs = bf16_tiny_cnn()
    (image,) = before.graph.inputs
    assert _ops(before)[:2] == ["to_dtype", "to_memory_format"]
    after = copy.deepcopy(before)
    assert _fuse(after) == {"casts_folded": 1, "quantizes_folded": 0}
    first = after.graph.nodes[0]
    assert first.op == "to_memory_format" and first.inputs == [image]
    assert first.attrs == {"memory_format": "channels_last", "dtype": "bfloat16"}
    assert after.graph.values[first.outputs[0]].dtype == "bfloat16"
    assert "to_dtype" not in _ops(after)[:2]
    for got, want in zip(run_program(after, inputs, {"batch": 2}), run_program(before, inputs, {"batch": 2}), strict=True):
        assert torch.equal(got, want)


def test_nothing_folds_when_the_cast_is_also_read_elsewhere():
    program, _ = bf16_tiny_cnn()
    program.graph.outputs.append(program.graph.nodes[0].outputs[0])  # the bf16 input is also a model output
    assert _fuse(program) == {"casts_folded": 0, "quantizes_folded": 0}


def int8_stem():
    """The ResNet stem through to_bf16 and quantize: image -> to_dtype -> to_memory_format -> quantize -> conv."""
    before, quantization, data = planned(Stem(), (2, 3, 32, 32))
    PASSES["to_bf16"].run(before, PassOptions(dtype="int8"))
    program, _ = quantized(before, quantization)
    return program, data


def test_int8_input_is_quantized_from_float32_and_laid_out_in_one_node():
    before, data = int8_stem()
    assert _ops(before)[:3] == ["to_dtype", "to_memory_format", "quantize"]
    scale, zero_point = before.graph.nodes[2].attrs["scale"], before.graph.nodes[2].attrs["zero_point"]
    after = copy.deepcopy(before)
    assert _fuse(after) == {"casts_folded": 1, "quantizes_folded": 1}
    first = after.graph.nodes[0]
    assert first.op == "quantize" and first.inputs == ["x"] and first.attrs["memory_format"] == "channels_last"
    assert after.graph.values[first.outputs[0]].memory_format == "channels_last"
    assert _ops(after).count("to_dtype") == _ops(before).count("to_dtype") - 1
    for batch in data:
        x = batch["x"]
        # The codes the first conv reads: from float32 now, from the bf16 rounding before.
        from_float = quantize(x, scale, zero_point, "uint8", None)
        from_bf16 = quantize(x.bfloat16(), scale, zero_point, "uint8", None)
        assert (from_float.int() - from_bf16.int()).abs().max().item() <= 1
        got = run_program(after, batch, {"batch": 2})
        want = run_program(before, batch, {"batch": 2})
        for g, w in zip(got, want, strict=True):
            assert g.shape == w.shape and g.dtype == w.dtype
            assert rel_err(g, w) < INT8_TOL


def test_quantize_keeps_its_layout_node_when_the_copy_is_read_elsewhere():
    program, _ = int8_stem()
    program.graph.outputs.append(program.graph.nodes[1].outputs[0])  # the channels-last input, also an output
    counts = _fuse(program)
    assert counts == {"casts_folded": 1, "quantizes_folded": 0}
    assert _ops(program)[:2] == ["to_memory_format", "quantize"]
