"""share_attention_mask: the attention layers of tiny-bert read one additive mask made once per run,
outputs unchanged with real padding (fp32 and bf16); a mask with one reader, a mask already in the
activations' dtype and a constant mask are left alone; the op's reference against sdpa's own handling."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.ir.ops.attention_mask import AttentionMaskOp
from ipexconvert.passes import PassOptions, run_pipeline
from ipexconvert.passes.base import PASSES
from ipexconvert.passes.pipeline import PIPELINES
from pass_helpers import assert_same_outputs, copy_program


def _share(program) -> int:
    return PASSES["share_attention_mask"].run(program, PassOptions())["masks_shared"]


def _bert_inputs(batch: int, seq: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(5)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[0, seq // 2:] = 0  # padding: the mask really masks something
    return {"input_ids": torch.randint(0, 1000, (batch, seq), generator=g), "attention_mask": mask}


@pytest.fixture(scope="module")
def tiny_bert():
    pytest.importorskip("transformers")
    from ipexconvert.examples import get_example

    example = get_example("tiny-bert")
    return program_from_module(example.build(), example.example_inputs(2), example.dynamic_dims,
                               list(example.output_names))


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_tiny_bert_layers_share_one_mask(tiny_bert, dtype):
    before = copy_program(tiny_bert)
    names = PIPELINES["cpu", dtype]
    run_pipeline(before, names[:names.index("share_attention_mask")], PassOptions(dtype=dtype))
    sdpa = [n for n in before.graph.nodes if n.op == "sdpa"]
    assert len(sdpa) == 2 and len({n.inputs[3] for n in sdpa}) == 1
    assert before.graph.values[sdpa[0].inputs[3]].dtype == "bool"
    after = copy_program(before)

    assert _share(after) == 1

    (converter,) = [n for n in after.graph.nodes if n.op == "attention_mask"]
    assert all(n.inputs[3] == converter.outputs[0] for n in after.graph.nodes if n.op == "sdpa")
    assert after.graph.values[converter.outputs[0]].dtype == after.graph.values[sdpa[0].inputs[0]].dtype
    inputs = _bert_inputs(3, 9)
    assert_same_outputs(before, after, inputs, {"batch": 3, "seq": 9})


def test_left_alone_with_one_reader_or_nothing_to_convert(tiny_bert):
    program = copy_program(tiny_bert)
    names = PIPELINES["cpu", "fp32"]
    run_pipeline(program, names[:names.index("share_attention_mask")], PassOptions(dtype="fp32"))
    sdpa = [n for n in program.graph.nodes if n.op == "sdpa"]
    one_reader = copy_program(program)
    second = next(n for n in one_reader.graph.nodes if n.name == sdpa[1].name)
    second.inputs[3] = None
    assert _share(one_reader) == 0
    constant = copy_program(program)
    name = constant.add_constant("fixed_mask", torch.ones(1, 1, 9, 9, dtype=torch.bool))
    for n in constant.graph.nodes:
        if n.op == "sdpa":
            n.inputs[3] = name
    assert _share(constant) == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_reference_matches_sdpa_with_the_original_mask(dtype):
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g).to(dtype) for _ in range(3))
    bool_mask = torch.rand(2, 1, 5, 5, generator=g) > 0.3
    bool_mask[..., 0] = True  # every row attends somewhere
    additive = AttentionMaskOp.reference([bool_mask], AttentionMaskOp.parse_attrs({"dtype": str(dtype)[6:]}), {})
    assert additive.dtype == dtype and torch.equal(additive == 0, bool_mask)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=bool_mask)
    assert torch.equal(F.scaled_dot_product_attention(q, k, v, attn_mask=additive), want)
    float_mask = torch.randn(2, 1, 5, 5, generator=g)
    cast = AttentionMaskOp.reference([float_mask], AttentionMaskOp.parse_attrs({"dtype": "bfloat16"}), {})
    assert torch.equal(cast, float_mask.bfloat16())
