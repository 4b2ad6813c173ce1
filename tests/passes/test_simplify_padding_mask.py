"""simplify_padding_mask: tiny-bert's padding mask (transformers' sdpa_mask: an index by broadcast aranges and two
ands with all-true masks) becomes a reshape and an expand of the mask, with the same outputs for padded batches of
other sizes; what is not that pattern is left alone (an index by other tensors, an and with a mask that may be
false); the all-true analysis itself."""
from __future__ import annotations

import pytest
import torch

from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.ir import Node
from ipexconvert.passes import PassOptions, run_pipeline
from ipexconvert.passes.base import PASSES
from ipexconvert.passes.pipeline import PIPELINES
from ipexconvert.passes.simplify_padding_mask import _all_true
from pass_helpers import assert_same_outputs, copy_program, run_program


def _simplify(program) -> dict[str, int]:
    return PASSES["simplify_padding_mask"].run(program, PassOptions())


@pytest.fixture(scope="module")
def tiny_bert():
    pytest.importorskip("transformers")
    from ipexconvert.examples import get_example

    example = get_example("tiny-bert")
    return _before_the_pass(program_from_module(example.build(), example.example_inputs(2), example.dynamic_dims,
                                                list(example.output_names)))


def _before_the_pass(program):
    """The program as the fp32 pipeline hands it to simplify_padding_mask."""
    names = PIPELINES["cpu", "fp32"]
    run_pipeline(program, names[:names.index("simplify_padding_mask")], PassOptions())
    return program


def _inputs(batch: int, seq: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(batch * 100 + seq)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    for b in range(batch):
        mask[b, seq - 1 - b * (seq // (batch + 1)):] = 0  # each sentence its own padding
    return {"input_ids": torch.randint(0, 1000, (batch, seq), generator=g), "attention_mask": mask}


def _aten(program, target: str) -> list[Node]:
    return [n for n in program.graph.nodes if n.op == "aten" and n.attrs.get("target") == target]


def test_tiny_bert_mask_becomes_views_with_the_same_outputs(tiny_bert):
    before = copy_program(tiny_bert)
    assert _aten(before, "aten.index.Tensor") and _aten(before, "aten.bitwise_and.Tensor")
    after = copy_program(before)

    assert _simplify(after) == {"mask_indexes_viewed": 1, "true_ands_dropped": 1}

    PASSES["dead_code"].run(after, PassOptions())
    assert not _aten(after, "aten.index.Tensor")  # the index is a reshape of the mask now
    assert not _aten(after, "aten.bitwise_and.Tensor")  # the one and with a maybe-false mask is an expand
    assert not _aten(after, "aten.arange.start_step")  # the aranges had no other reader
    for batch, seq in [(3, 9), (1, 16), (2, 5)]:
        inputs = _inputs(batch, seq)
        assert_same_outputs(before, after, inputs, {"batch": batch, "seq": seq})
        # the same values exactly: only views changed
        for e, g in zip(run_program(before, inputs, {"batch": batch, "seq": seq}),
                        run_program(after, inputs, {"batch": batch, "seq": seq}), strict=True):
            assert torch.equal(e, g)


def test_the_mask_stays_one_row_per_batch_underneath(tiny_bert):
    program = copy_program(tiny_bert)
    _simplify(program)
    PASSES["dead_code"].run(program, PassOptions())
    producers = program.graph.producers()
    (value,) = {n.inputs[3] for n in program.graph.nodes if n.op == "sdpa"}
    chain = []
    while value in producers and value not in program.graph.inputs:
        node = producers[value]
        chain.append(node.op if node.op != "aten" else node.attrs["target"])
        value = node.inputs[0]
    # the sdpa mask: expands of the bool mask reshaped to [batch, 1, 1, seq] (no copy of a [batch, 1, seq, seq])
    assert chain == ["aten.expand.default", "aten.expand.default", "reshape", "to_dtype"], chain
    assert value == "attention_mask"


def _mask_program(other: torch.Tensor | None):
    """and(full(other) or an input, index(mask [b, s], [arange(b) on axis 0, arange(s) on axis 3]))."""
    import torch.nn as nn

    class Mask(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("other", other if other is not None else torch.ones(1, dtype=torch.bool))

        def forward(self, mask, gate):
            b, s = mask.shape
            rows = torch.arange(b)[:, None, None, None]
            cols = torch.arange(s)[None, None, None, :]
            picked = mask.bool()[rows, cols]
            q_idx = torch.arange(s)[None, None, :, None]
            first = self.other & (q_idx >= 0) if other is not None else gate.bool()[:, None, None, None]
            return (first & picked).float()

    from ipexconvert.ir.dynamic_dims import DynamicDim

    mask = torch.ones(2, 6, dtype=torch.int64)
    mask[1, 4:] = 0
    dims = {"mask": {0: DynamicDim("batch", 1, 8), 1: DynamicDim("seq", 2, 32)}, "gate": {0: DynamicDim("batch", 1, 8)}}
    return _before_the_pass(program_from_module(Mask(), {"mask": mask, "gate": torch.ones(2, dtype=torch.int64)}, dims,
                                                ["out"]))


def test_ands_with_all_true_masks_go_ands_with_maybe_false_ones_stay():
    true_program = _mask_program(torch.ones(1, 1, 1, 1, dtype=torch.bool))
    after = copy_program(true_program)
    assert _simplify(after) == {"mask_indexes_viewed": 1, "true_ands_dropped": 1}  # (true & true: no reader left)
    PASSES["dead_code"].run(after, PassOptions())
    assert not _aten(after, "aten.bitwise_and.Tensor")
    # a constant that is not all true: its and with (q_idx >= 0) becomes the constant expanded, but the and of that
    # with the padding mask stays
    false_program = _mask_program(torch.tensor([[[[False]]]]))
    after = copy_program(false_program)
    assert _simplify(after) == {"mask_indexes_viewed": 1, "true_ands_dropped": 1}
    assert [n.name for n in _aten(after, "aten.bitwise_and.Tensor")] == ["bitwise_and_1"]
    gated = _mask_program(None)  # the other side comes from an input: may be false, the and stays
    after = copy_program(gated)
    assert _simplify(after)["true_ands_dropped"] == 0 and _aten(after, "aten.bitwise_and.Tensor")
    for program in (true_program, false_program, gated):
        after = copy_program(program)
        _simplify(after)
        mask = torch.ones(3, 7, dtype=torch.int64)
        mask[0, 5:] = 0
        inputs = {"mask": mask, "gate": torch.tensor([1, 0, 1])}
        for e, g in zip(run_program(program, inputs, {"batch": 3, "seq": 7}),
                        run_program(after, inputs, {"batch": 3, "seq": 7}), strict=True):
            assert torch.equal(e, g)


def test_all_true_analysis(tiny_bert):
    program = copy_program(tiny_bert)
    producers = program.graph.producers()
    memo: dict[str, bool] = {}
    (index,) = _aten(program, "aten.index.Tensor")
    assert not _all_true(index.outputs[0], program, producers, memo)  # the padding mask: may be false
    ands = _aten(program, "aten.bitwise_and.Tensor")
    verdicts = {n.name: _all_true(n.outputs[0], program, producers, memo) for n in ands}
    assert sorted(verdicts.values()) == [False, True]  # (full & q_idx >= 0) is; its and with the index is not
