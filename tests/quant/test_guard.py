"""Accuracy guard: metrics, the per-model metric choice, the fallback rounds, and a real fallback on an outlier layer."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ipexconvert
from ipexconvert.quant.guard import METRICS, WORST_SAMPLE_FACTOR, choose_metric, fewest_passing, guard, worst_error
from ipexconvert.quant.options import QuantOptions
from ipexconvert.quant.plan import LayerPlan, QuantPlan
from quant_helpers import batches, float_program

# ---- metrics ----------------------------------------------------------------------------------------


def test_cosine_error():
    want = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    assert METRICS["cosine"].error(torch.tensor([[2.0, 0.0], [0.0, 3.0]]), want) == pytest.approx(0.5)  # cos 1 and 0
    assert METRICS["cosine"].error(want * 7, want) == pytest.approx(0.0, abs=1e-7)  # scale does not matter


def test_cosine_error_counts_the_worst_sample():
    """Eleven perfect samples and one at cosine 0.94: the mean's error is 0.005, the worst sample's 0.06 over
    WORST_SAMPLE_FACTOR (6) is 0.01, and that is the error (a mean alone hides one bad sentence)."""
    want = torch.tensor([[1.0, 0.0]]).repeat(12, 1)
    got = want.clone()
    got[5] = torch.tensor([0.94, (1 - 0.94 ** 2) ** 0.5])
    assert METRICS["cosine"].error(got, want) == pytest.approx(0.06 / WORST_SAMPLE_FACTOR, rel=1e-4)
    assert METRICS["cosine"].error(got[5:6].repeat(12, 1), want) == pytest.approx(0.06, rel=1e-4)  # all 0.94: the mean


def test_relative_error():
    want = torch.tensor([[3.0, 4.0], [0.0, 0.0]])
    assert METRICS["relative"].error(want + torch.tensor([[0.3, -0.4], [0.0, 0.0]]), want) == pytest.approx(0.1)


def test_top1_error():
    want = torch.tensor([[5.0, 1, 0], [0, 5, 1], [0, 1, 5], [5, 0, 1]])
    got = want.clone()
    got[2] = torch.tensor([9.0, 1, 5])  # one of four samples changes its class
    assert METRICS["top1"].error(got, want) == 0.25
    assert METRICS["top1"].error(want * 0.5 + 1, want) == 0.0


def test_worst_error_takes_the_worst_output_over_all_batches():
    reference = [[torch.ones(2, 3), torch.ones(2, 1)], [torch.ones(2, 3), torch.ones(2, 1)]]
    results = iter([[torch.ones(2, 3), torch.ones(2, 1) * 1.5], [torch.ones(2, 3), torch.ones(2, 1) * 0.5]])

    error = worst_error(lambda _b: next(results), [{}, {}], reference, METRICS["top1"])

    assert error == pytest.approx(0.5)  # a single-column output has no top-1: measured as relative error


# ---- metric choice ----------------------------------------------------------------------------------

class Classifier(nn.Module):
    def __init__(self, features_only: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.features_only = features_only
        self.conv, self.fc = nn.Conv2d(3, 4, 3), nn.Linear(4, 10)

    def forward(self, x):
        y = self.conv(x)
        return y if self.features_only else self.fc(y.mean(dim=(2, 3)))


class Encoder(nn.Module):
    def __init__(self, norm: bool = True):
        super().__init__()
        self.ln, self.fc = (nn.LayerNorm(8) if norm else nn.Identity()), nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(self.ln(x))


@pytest.mark.parametrize("module, shape, metric", [
    (Classifier(), (2, 3, 8, 8), "top1"),  # image in, [batch, classes] out
    (Classifier(features_only=True), (2, 3, 8, 8), "cosine"),  # image in, feature map out
    (Encoder(), (2, 5, 8), "cosine"),  # hidden states
    (Encoder(norm=False), (2, 8), "cosine"),  # [batch, classes] out, but not an image model
])
def test_choose_metric_auto(module, shape, metric):
    program = float_program(module, batches(shape, 1)[0])
    assert choose_metric("auto", program).name == metric
    assert choose_metric("relative", program).name == "relative"


# ---- the fallback loop, with a fake model ----------------------------------------------------------

def _plan(sensitivities: dict[str, float]) -> QuantPlan:
    return QuantPlan(layers={n: LayerPlan(node=n, op="linear", sensitivity=s) for n, s in sensitivities.items()})


def _build(damage: dict[str, float]):
    """A fake candidate: output = 1 + the damage of every layer still in int8 (relative error = that sum / 1)."""
    def build(fallback: set[str]):
        extra = sum(d for n, d in damage.items() if n not in fallback)
        return lambda _batch: [torch.ones(4, 1) * (1 + extra)]
    return build


def test_guard_falls_back_the_most_sensitive_layers_in_doubling_rounds():
    damage = {"a": 0.001, "b": 0.2, "c": 0.3, "d": 0.1, "e": 0.002}
    plan = _plan(damage)  # sensitivity ranks c, b, d, e, a
    reference = [[torch.ones(4, 1)]]

    fallback = guard(_build(damage), plan, [{}], reference, METRICS["relative"], budget=0.01)

    assert fallback == {"c", "b", "d"}  # rounds of 1 then 2 layers; 2 layers (bisecting 1..3) miss the budget
    assert [r["fallback_layers"] for r in plan.guard["rounds"]] == [0, 1, 3, 2]
    assert plan.guard["passed"] and plan.guard["final_error"] == pytest.approx(0.003)
    assert plan.fallback_layers().keys() == {"b", "c", "d"}
    assert "accuracy guard" in plan.layers["c"].fallback_reason and "rank 1 of 5" in plan.layers["c"].fallback_reason


def test_guard_bisects_to_the_fewest_layers_that_meet_the_budget():
    damage = {f"l{i}": 0.1 - 0.01 * i for i in range(8)}  # l0 the most sensitive; the budget needs l0..l4 in float
    plan = _plan(damage)

    fallback = guard(_build(damage), plan, [{}], [[torch.ones(4, 1)]], METRICS["relative"], budget=0.16)

    # Doubling: 0, 1, 3 and 7 layers (7 passes, 3 does not); bisecting 3..7: 5 passes, 4 does not.
    assert [r["fallback_layers"] for r in plan.guard["rounds"]] == [0, 1, 3, 7, 5, 4]
    assert fallback == {"l0", "l1", "l2", "l3", "l4"}
    assert plan.guard["passed"] and plan.guard["final_error"] == pytest.approx(0.05 + 0.04 + 0.03)  # l5..l7 in int8
    assert sorted(plan.fallback_layers()) == ["l0", "l1", "l2", "l3", "l4"]


@pytest.mark.parametrize("total, needed, judged, result", [
    (10, 0, [0], (0, True)),  # within budget as planned
    (10, 6, [0, 1, 3, 7, 5, 6], (6, True)),  # doubling to 7, then bisecting 3..7
    (10, 10, [0, 1, 3, 7, 10, 8, 9], (10, True)),  # the last round takes all 10
    (10, 11, [0, 1, 3, 7, 10], (10, False)),  # nothing passes: all in float, failed
    (0, 1, [0], (0, False)),  # no layer to move
])
def test_fewest_passing_doubles_then_bisects(total, needed, judged, result):
    calls = []

    def passes(count):
        calls.append(count)
        return count >= needed

    assert fewest_passing(total, passes) == result
    assert calls == judged


def test_fewest_passing_takes_a_round_already_judged():
    calls = []
    assert fewest_passing(4, lambda c: calls.append(c) or c >= 2, zero_passed=False) == (2, True)
    assert calls == [1, 3, 2]


def test_guard_gives_up_when_nothing_is_left():
    damage = {"a": 0.5, "b": 0.5}
    plan = _plan(damage)

    fallback = guard(lambda _fb: (lambda _b: [torch.ones(4, 1) * 2]), plan, [{}], [[torch.ones(4, 1)]],
                     METRICS["relative"], budget=0.01)

    assert fallback == {"a", "b"} and not plan.guard["passed"] and plan.quantized_layers() == []


def test_guard_within_budget_changes_nothing():
    plan = _plan({"a": 0.5})
    assert guard(_build({"a": 0.001}), plan, [{}], [[torch.ones(4, 1)]], METRICS["relative"], None) == set()
    assert plan.guard["budget"] == METRICS["relative"].default_budget and len(plan.guard["rounds"]) == 1
    assert plan.layers["a"].quantized


# ---- the real thing: an outlier-heavy layer ----------------------------------------------------------

class OutlierMLP(nn.Module):
    """fc0 makes 3 of fc1's 32 input channels ~1000x larger than the rest; fc1 barely uses them.

    Per-tensor int8 of fc1's input then spends its range on the outliers and rounds every other
    channel to (almost) nothing, so fc1 alone ruins the output.
    """

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc0, self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 8)
        with torch.no_grad():
            self.fc0.weight[:3] *= 1000
            self.fc0.bias[:3] *= 1000
            self.fc1.weight[:, :3] /= 1000

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(F.relu(self.fc0(x)))))


BUDGET = 1e-3  # cosine error; int8 without the outlier layer is ~2e-4, with it ~6e-2


def _convert(tmp_path, guard_on: bool):
    data = batches((8, 16), 6, seed=1)
    result = ipexconvert.optimize(
        OutlierMLP(), data[0], dtype="int8", calibration=data[:5], output=tmp_path / f"mlp_{guard_on}.ipxc",
        quant=QuantOptions(smoothquant="off", guard=guard_on, guard_metric="cosine", max_error=BUDGET, float_dtype="float32"),
        max_rel_error=100.0, min_cosine=0.0)  # the guard is under test here, not the final check
    plan = QuantPlan.model_validate(result.manifest.quantization)
    fc1 = max(plan.layers, key=lambda n: plan.layers[n].sensitivity)  # the planner ranks the outlier layer first
    model = ipexconvert.load_artifact(result.path)
    with torch.no_grad():
        errors = [METRICS["cosine"].error(model(**b), OutlierMLP()(**b)) for b in data[4:]]  # held out, and unseen
    return plan, fc1, max(errors)


def test_guard_falls_back_the_outlier_layer(tmp_path):
    plan, fc1, error = _convert(tmp_path, guard_on=True)

    assert not plan.layers[fc1].quantized and plan.layers[fc1].fallback_reason.startswith("accuracy guard")
    assert len(plan.quantized_layers()) == 2  # the other two stay int8
    rounds = plan.guard["rounds"]
    assert rounds[0]["fallback_layers"] == 0 and rounds[0]["error"] > BUDGET
    assert rounds[-1]["error"] <= BUDGET and plan.guard["passed"] and plan.guard["metric"] == "cosine"
    assert error <= BUDGET  # the artifact itself, on held-out and unseen batches


def test_without_the_guard_the_outlier_layer_breaks_the_budget(tmp_path):
    plan, fc1, error = _convert(tmp_path, guard_on=False)

    assert plan.guard is None and len(plan.quantized_layers()) == 3
    assert error > 10 * BUDGET
