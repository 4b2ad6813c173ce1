"""Accuracy guard: compare the int8 model with float32 on held-out batches; fall back until within budget.

The error is measured per output with one metric (a registry, like the observers):
- cosine: 1 - mean per-sample cosine similarity, or the worst sample's 1 - cosine over
  WORST_SAMPLE_FACTOR where that is larger (embeddings, hidden states; the default): a mean
  alone let one short sentence fall to 0.996 while the mean stayed at 0.9996;
- relative: ||int8 - fp32|| / ||fp32|| over the whole output;
- top1: share of samples whose arg-max class changed (classifier logits; the default for
  image models with [batch, classes] outputs).
When the worst output is over budget, the most sensitive layers (the planner's per-layer
error on held-out data) go back to float in rounds of 1, 2, 4, ... layers, until the model
is within budget or nothing is left to fall back; then the count between the last failing
round and the passing one is bisected, so the fewest of the most sensitive layers that meet
the budget stay float (doubling alone could keep nearly twice as many): fewest_passing, which
the weight-only guard searches with too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch

from ..ir import Program
from .plan import QuantPlan

Batch = dict[str, torch.Tensor]
RunFn = Callable[[Batch], list[torch.Tensor]]


@dataclass(frozen=True)
class Metric:
    name: str
    default_budget: float
    error: Callable[[torch.Tensor, torch.Tensor], float]  # (int8 output, fp32 output) -> error, 0 is perfect
    meaning: str


# A sample's cosine may fall this many budgets at most: at a budget of 0.0005, mean >= 0.9995 and worst >= 0.997
# (issue 21's bar for int8 MiniLM: mean 0.998, worst 0.997); at the default 0.01 the worst may reach 0.94.
WORST_SAMPLE_FACTOR = 6.0


def _cosine_error(got: torch.Tensor, want: torch.Tensor) -> float:
    g, w = got.float().reshape(got.shape[0], -1), want.float().reshape(want.shape[0], -1)
    cosine = torch.nn.functional.cosine_similarity(g, w, dim=1, eps=1e-12)
    return float(torch.maximum(1 - cosine.mean(), (1 - cosine.min()) / WORST_SAMPLE_FACTOR))


def _relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.float() - want.float()).norm() / want.float().norm().clamp_min(1e-12))


def _top1_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.float().argmax(-1) != want.float().argmax(-1)).float().mean())


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("cosine", 0.01, _cosine_error, "1 - mean cosine similarity to float32, or the worst sample's 1 - cosine "
           f"/ {WORST_SAMPLE_FACTOR:g} where larger"),
    Metric("relative", 0.1, _relative_error, "norm of the difference / norm of the float32 output"),
    Metric("top1", 0.02, _top1_error, "share of samples whose top-1 class changed"),
)}


def choose_metric(name: str, program: Program) -> Metric:
    """`auto`: top1 for an image model with [batch, classes] outputs, cosine otherwise."""
    if name != "auto":
        return METRICS[name]
    graph = program.graph
    image = any(graph.values[i].rank == 4 and graph.values[i].dtype.startswith("float") for i in graph.inputs)
    logits = all(graph.values[o].rank == 2 for o in graph.outputs)
    return METRICS["top1" if image and logits else "cosine"]


def worst_error(run: RunFn, batches: Sequence[Batch], reference: Sequence[list[torch.Tensor]], metric: Metric) -> float:
    """The metric over all held-out batches (outputs concatenated per output), worst output."""
    got = [run(b) for b in batches]
    worst = 0.0
    for i in range(len(reference[0])):
        g = torch.cat([outs[i].float().reshape(outs[i].shape[0], -1) for outs in got])
        w = torch.cat([outs[i].float().reshape(outs[i].shape[0], -1) for outs in reference])
        worst = max(worst, metric.error(g, w) if metric.name != "top1" or g.shape[1] > 1 else _relative_error(g, w))
    return worst


def fewest_passing(total: int, passes: Callable[[int], bool], zero_passed: Optional[bool] = None) -> tuple[int, bool]:
    """The fewest layers in float, of `total`, for which passes(count) holds, searched as both guards do: counts 0, 1,
    3, 7, ... (1, 2, 4, ... more a round) until one passes or all are float, then bisected between the last count
    that failed and the one that passed (more layers in float taken never to hurt). `zero_passed`: count 0 already
    judged. Returns (count, whether it passed); (total, False) when nothing passes."""
    failed, count, step = -1, 0, 1  # failed: the largest count known to miss the budget
    passed = passes(0) if zero_passed is None else zero_passed
    while not passed and count < total:
        failed, count = count, min(total, count + step)
        step *= 2
        passed = passes(count)
    if passed:
        while count - failed > 1:
            middle = (failed + count) // 2
            if passes(middle):
                count = middle
            else:
                failed = middle
    return count, passed


def guard(build: Callable[[set[str]], RunFn], plan: QuantPlan, batches: Sequence[Batch],
          reference: Sequence[list[torch.Tensor]], metric: Metric, budget: Optional[float],
          say: Callable[[str], None] = lambda _m: None) -> set[str]:
    """The layers to keep in float (possibly none); records every round in plan.guard."""
    budget = metric.default_budget if budget is None else budget
    ranked = sorted((n for n, layer in plan.layers.items() if layer.quantized),
                    key=lambda n: plan.layers[n].sensitivity or 0.0, reverse=True)
    rounds = []

    def within_budget(count: int) -> bool:
        """The metric with the `count` most sensitive layers in float (one guard round, recorded)."""
        error = worst_error(build(set(ranked[:count])), batches, reference, metric)
        rounds.append({"fallback_layers": count, "error": round(error, 6)})
        say(f"accuracy guard: {metric.name} error {error:.4g} (budget {budget:g}) with {count} layer(s) in float")
        return error <= budget

    count, passed = fewest_passing(len(ranked), within_budget)
    fallback = set(ranked[:count])
    for rank, name in enumerate(ranked[:count], start=1):
        layer = plan.layers[name]
        layer.quantized = False
        layer.fallback_reason = (f"accuracy guard: sensitivity {layer.sensitivity:.3g} (rank {rank} of {len(ranked)}); "
                                 f"{metric.name} error with it in int8 exceeded {budget:g}")
    plan.guard = {"metric": metric.name, "meaning": metric.meaning, "budget": budget, "held_out_batches": len(batches),
                  "passed": passed, "rounds": rounds,
                  "final_error": next(r["error"] for r in reversed(rounds) if r["fallback_layers"] == count)}
    return fallback
