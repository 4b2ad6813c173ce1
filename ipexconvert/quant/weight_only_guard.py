"""The weight-only accuracy guard: move the linears that round worst back to float until a decoder's teacher-forced
accuracy (decoder_accuracy.py) is within budget.

With activations "auto" (the default) the first candidate rounds every layer's activations to int8 and the second
keeps them float, before any layer moves back to float weights: int8 activations are the faster choice, kept when
the budget holds with them.

The float passes before weight_only_quantize run once; weight_only_quantize and the passes after it run once per
round on a copy, with PassOptions.keep_float naming the layers to leave float. Layers are ranked by how much
their codes move their weights against the typical weight, RMS(dequantized - W) / mean|W| (quant/weight_only.py:
a layer whose groups hold an outlier rounds most of its other weights to zero): round-to-nearest codes, or the GPTQ /
AWQ ones in PassOptions.weight_codes; the ranking itself needs no data. Rounds move 1, 2, 4, ... more of them back
until the budget holds or every quantized layer is float, then bisect between the last count over budget and the
first within it, as the int8 guard does (quant/guard.fewest_passing); then the conversion's final check (api.py)
judges the result, and raises AccuracyError (nothing written) if even that misses.
"""
from __future__ import annotations

import copy
import math
from dataclasses import replace
from typing import Callable, Optional

from ..ir import Program
from ..manifest import DecoderAccuracy, FloatLayer, GuardRound, PassRecord, WeightOnlyGuardRecord
from ..passes import PassOptions, run_pipeline
from ..passes.pipeline import WEIGHT_ONLY_PASS
from .guard import fewest_passing
from .options import WeightOnlyOptions
from .weight_only import WeightCodes, codes_error, weight_error

RANKED_BY = ("RMS(dequantized - W) / mean|W| of the layer's codes (round-to-nearest, or the GPTQ / AWQ codes given), "
             "largest first")
Judge = Callable[[Program, list[PassRecord]], DecoderAccuracy]  # a candidate program (and its records) -> accuracy


def _finite(value: float) -> Optional[float]:
    return value if math.isfinite(value) else None


def rank_layers(float_program: Program, quantized: Program, codes: Optional[WeightCodes] = None) -> list[tuple[str, float]]:
    """(layer, weight error) of every woq_linear of `quantized`, largest error first, from its weight in
    `float_program` (the same graph before weight_only_quantize) and the codes it got: `codes`' for the weights it
    names (GPTQ / AWQ), else the round-to-nearest ones for the bits, group size and symmetry of the node."""
    floats = {node.name: node for node in float_program.graph.nodes if node.op == "linear"}
    ranked = []
    for node in quantized.graph.nodes:
        if node.op != "woq_linear" or node.name not in floats:
            continue
        name = floats[node.name].inputs[1]
        weight, given = float_program.weights[name], codes.get(name) if codes is not None else None
        symmetric = len(node.inputs) <= 3 or node.inputs[3] is None
        ranked.append((node.name, codes_error(weight, given) if given is not None else
                       weight_error(weight, node.attrs["bits"], node.attrs["group_size"], symmetric)))
    return sorted(ranked, key=lambda pair: pair[1], reverse=True)


def guarded_weight_only(program: Program, names: list[str], options: PassOptions, judge: Judge,
                        say: Callable[[str], None] = lambda _m: None
                        ) -> tuple[Program, list[PassRecord], WeightOnlyGuardRecord]:
    """Run the weight-only pipeline `names` on `program` (changed in place up to weight_only_quantize), judging each
    candidate; returns the last candidate, its pass records and what the guard did."""
    at = names.index(WEIGHT_ONLY_PASS)
    before = run_pipeline(program, names[:at], options, on_pass=lambda n: say(f"pass {n}"))

    woq = options.weight_only if options.weight_only is not None else WeightOnlyOptions()
    choices = ["int8", "float"] if woq.activations == "auto" else [woq.activations]

    def build(keep_float: list[str], activations: str) -> tuple[Program, list[PassRecord]]:
        candidate = copy.deepcopy(program)
        settings = replace(options, keep_float=options.keep_float | set(keep_float),
                           weight_only=woq.model_copy(update={"activations": activations}))
        records = run_pipeline(candidate, names[at:], settings, on_pass=lambda n: say(f"pass {n}"))
        return candidate, before + records

    activations = choices.pop(0)
    candidate, records = build([], activations)
    ranked = rank_layers(program, candidate, options.weight_codes)
    rounds: list[GuardRound] = []

    built = 0  # how many layers the candidate has in float

    def judged(count: int) -> bool:
        """Judge a candidate with the `count` worst layers in float (one guard round, recorded)."""
        nonlocal candidate, records, built
        if count != built:
            candidate, records = build([name for name, _ in ranked[:count]], activations)
            built = count
        result = judge(candidate, records)
        rounds.append(GuardRound(float_layers=count, activations=activations, mean_cosine=_finite(result.mean_cosine),
                                 top1_agreement=_finite(result.top1_agreement),
                                 perplexity_ratio=_finite(result.perplexity_ratio), passed=result.passed))
        say(f"weight-only guard: mean cosine {result.mean_cosine:.5f}, top-1 {result.top1_agreement:.3f}, perplexity "
            f"ratio {result.perplexity_ratio:.4f} with {count} layer(s) in float, {activations} activations")
        return result.passed

    passed = judged(0)
    while not passed and choices:  # float activations before any layer goes back to float weights
        activations = choices.pop(0)
        candidate, records = build([], activations)
        passed = judged(0)
    count, passed = fewest_passing(len(ranked), judged, zero_passed=passed)
    if built != count:  # the last round judged missed: build the chosen candidate again
        candidate, records = build([name for name, _ in ranked[:count]], activations)
    moved = ranked[:count]
    float_layers = [FloatLayer(layer=name, weight_error=error,
                               reason=f"accuracy guard: weight error {error:.3g}, rank {rank} of {len(ranked)}; the "
                               "teacher-forced budget failed with it quantized")
                    for rank, (name, error) in enumerate(moved, start=1)]
    return candidate, records, WeightOnlyGuardRecord(ranked_by=RANKED_BY, candidates=len(ranked), rounds=rounds,
                                                     float_layers=float_layers, activations=activations,
                                                     passed=passed)
