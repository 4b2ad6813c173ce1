"""The weight-only guard's rounds (quant/weight_only_guard.py) with a fake judge: no Hugging Face model, so it runs
on any torch the suite runs on."""
from __future__ import annotations

import torch
from torch import nn

from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.manifest import DecoderAccuracy
from ipexconvert.passes import PassOptions
from ipexconvert.passes.pipeline import pipeline_for
from ipexconvert.quant.options import WeightOnlyOptions
from ipexconvert.quant.weight_only_guard import guarded_weight_only


def test_the_guard_bisects_to_the_fewest_float_layers_that_pass():
    """Doubling rounds move 1, 3 then 7 layers; the budget (a fake judge: passes with at most 2 of the 7 quantized
    layers left quantized) then bisects to 5 moved, and the program returned has 5 moved even though the last round
    judged 4. (The 8th linear makes the graph output: an LM head, kept float by default, not a candidate.)"""
    torch.manual_seed(0)
    module = nn.Sequential(*[nn.Linear(128, 128) for _ in range(8)]).eval()
    program = program_from_module(module, {"input": torch.randn(2, 128)}, {})

    def quantized(candidate) -> int:
        return sum(node.op == "woq_linear" for node in candidate.graph.nodes)

    def judge(candidate, _records):
        passed = quantized(candidate) <= 2
        return DecoderAccuracy(reference="fake", text="fake", prefill_tokens=1, positions=1, mean_cosine=float(passed),
                               min_cosine=float(passed), top1_agreement=1.0, perplexity=1.0, reference_perplexity=1.0,
                               perplexity_ratio=1.0, budget_mean_cosine=1.0, budget_top1_agreement=0.0,
                               budget_perplexity_ratio=2.0, passed=passed)

    options = PassOptions(dtype="int4", weight_only=WeightOnlyOptions(activations="float"))
    candidate, _, record = guarded_weight_only(program, pipeline_for("int4", weight_only=True), options, judge)

    assert record.candidates == 7
    assert [r.float_layers for r in record.rounds] == [0, 1, 3, 7, 5, 4]
    assert [r.passed for r in record.rounds] == [False, False, False, True, True, False]
    assert record.passed and len(record.float_layers) == 5 and quantized(candidate) == 2
