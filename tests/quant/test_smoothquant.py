"""SmoothQuant: factors, groups and where 1/s goes, exactness of the smoothed float model, the alpha search."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ipexconvert.quant import smoothquant as sq
from ipexconvert.quant.calibrate import outputs_of, run_with_taps
from ipexconvert.quant.options import ALPHA_GRID, QuantOptions
from ipexconvert.quant.planner import plan_quantization, quantizable
from quant_helpers import batches, float_program, max_rel, node_reading_weight

D = 32


# ---- factors ----------------------------------------------------------------------------------------

def test_factors_by_hand():
    absmax = torch.tensor([4.0, 9.0, 0.0, 1e12, 1e-12])
    w1 = torch.tensor([[1.0, -1.0, 5.0, 1.0, 1e8]])
    w2 = torch.tensor([[-4.0, 0.25, 1.0, 1e-4, 1.0]])  # column maxima over both: [4, 1, 5, 1, 1e8]

    s = sq.factors(absmax, [w1, w2], 0.5)

    # sqrt(4)/sqrt(4) = 1, sqrt(9)/sqrt(1) = 3, a dead channel keeps 1,
    # sqrt(1e12) = 1e6 clamps to 1e5, and a tiny / huge ratio clamps to 1e-5.
    torch.testing.assert_close(s, torch.tensor([1.0, 3.0, 1.0, 1e5, 1e-5]))
    s75 = sq.factors(absmax[:2], [w1[:, :2], w2[:, :2]], 0.75)
    torch.testing.assert_close(s75, torch.tensor([4 ** 0.75 / 4 ** 0.25, 9 ** 0.75]))


# ---- groups -----------------------------------------------------------------------------------------

class AttentionBlock(nn.Module):
    """LayerNorm -> Q/K/V -> sdpa -> O with a residual; post_ln adds the norm's output (BERT) instead of x."""

    def __init__(self, post_ln: bool):
        super().__init__()
        torch.manual_seed(0)
        self.post_ln = post_ln
        self.ln = nn.LayerNorm(D)
        self.q, self.k, self.v, self.o = (nn.Linear(D, D) for _ in range(4))

    def forward(self, x):
        h = self.ln(x)
        a = self.o(F.scaled_dot_product_attention(self.q(h), self.k(h), self.v(h)))
        return (h if self.post_ln else x) + a


def _groups(program):
    return {tuple(sorted(n.inputs[1].split(".")[0] for n in g.linears)): g
            for g in sq.find_groups(program, [n for n in quantizable(program) if n.op == "linear"])}


def test_pre_ln_block_folds_into_the_norm():
    program = float_program(AttentionBlock(post_ln=False), batches((2, 5, D), 1)[0])

    groups = _groups(program)

    assert set(groups) == {("k", "q", "v"), ("o",)}
    assert groups[("k", "q", "v")].norm is not None and groups[("k", "q", "v")].norm.op == "layer_norm"
    assert groups[("o",)].norm is None  # fed by sdpa: only the quantize multiplier can take 1/s


def test_post_ln_block_uses_the_multiplier():
    program = float_program(AttentionBlock(post_ln=True), batches((2, 5, D), 1)[0])

    qkv = _groups(program)[("k", "q", "v")]

    # The residual add (fused into O as a post-op) reads the norm's output too: it must stay unscaled.
    assert qkv.norm is None


# ---- the smoothed float model is the original one ------------------------------------------------------

class OutlierBlock(nn.Module):
    """Pre-LN attention, an RMSNorm MLP (hand-written, fused into rms_norm) and a GELU MLP, with outlier channels."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.ln = nn.LayerNorm(D)
        self.q, self.k, self.v, self.o = (nn.Linear(D, D) for _ in range(4))
        self.rms_weight = nn.Parameter(torch.ones(D))
        self.gate, self.up, self.down = nn.Linear(D, 2 * D), nn.Linear(D, 2 * D), nn.Linear(2 * D, D)
        self.fc1, self.fc2 = nn.Linear(D, 2 * D), nn.Linear(2 * D, D)
        with torch.no_grad():  # a few channels 30-40x the rest, as in real LLM activations
            self.ln.weight[[3, 17]] = 30.0
            self.rms_weight[[5, 20]] = 40.0
            self.fc1.weight[7] *= 30.0

    def forward(self, x):
        h = self.ln(x)
        x = x + self.o(F.scaled_dot_product_attention(self.q(h), self.k(h), self.v(h)))
        r = self.rms_weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))
        x = x + self.down(F.silu(self.gate(r)) * self.up(r))
        return x + self.fc2(F.gelu(self.fc1(x)))


@pytest.fixture(scope="module")
def smoothed():
    """(float program before planning, the same program after plan_quantization smoothed it, quantization, data)."""
    data = batches((2, 6, D), 3)
    program = float_program(OutlierBlock(), data[0])
    before = copy.deepcopy(program)
    quantization = plan_quantization(program, data, data[:1], QuantOptions(smoothquant=0.5))
    return before, program, quantization, data


def test_smoothing_is_folded_into_layer_norm_and_rms_norm(smoothed):
    before, after, quantization, _ = smoothed
    folded = {}
    for name, layer in quantization.plan.layers.items():
        assert layer.smoothing is not None and layer.smoothing.alpha == 0.5, name
        folded[name] = layer.smoothing.folded_into
    norms = {n.op: n.name for n in after.graph.nodes if n.op in ("layer_norm", "rms_norm")}
    assert set(norms) == {"layer_norm", "rms_norm"}
    by_layer = {n.inputs[1].split(".")[0]: folded[n.name] for n in before.graph.nodes if n.op == "linear"}
    assert by_layer == {"q": norms["layer_norm"], "k": norms["layer_norm"], "v": norms["layer_norm"],
                        "gate": norms["rms_norm"], "up": norms["rms_norm"],
                        "o": "quantize", "down": "quantize", "fc2": "quantize", "fc1": "quantize"}
    # The norms' weights really changed (else the equivalence below would prove nothing).
    for op in ("layer_norm", "rms_norm"):
        old = next(n for n in before.graph.nodes if n.op == op).inputs[1]
        new = next(n for n in after.graph.nodes if n.op == op).inputs[1]
        assert max_rel(after.weights[new], before.weights[old]) > 0.5


def test_smoothed_float_model_equals_the_original(smoothed):
    before, after, _, data = smoothed
    for batch in data + batches((3, 4, D), 2, seed=7):
        for got, want in zip(outputs_of(after, batch), outputs_of(before, batch), strict=True):
            assert max_rel(got, want) < 1e-5


def test_multiplier_route_is_exact_and_leaves_the_float_weight_alone(smoothed):
    before, after, quantization, data = smoothed
    node = node_reading_weight(after, "fc2")
    s = torch.tensor(quantization.plan.layers[node.name].smoothing.factors)
    assert s.max() / s.min() > 5  # the GELU output's outlier channel got its own factor
    assert torch.equal(after.weights[node.inputs[1]], before.weights[node.inputs[1]])

    seen = []
    run_with_taps(after, data[:1], {node.inputs[0]: [seen.append]})
    x, w = seen[0].float(), after.weights[node.inputs[1]].float()
    assert max_rel(F.linear(x / s, w * s), F.linear(x, w)) < 1e-5
    # The quantize pass will read through 1 / (s * input scale): the planner's multiplier says so.
    t, act = quantization.tensors[node.name], quantization.plan.layers[node.name].input
    torch.testing.assert_close(t.multiplier, 1 / (s * act.scale), rtol=1e-5, atol=0)


# ---- alpha search -----------------------------------------------------------------------------------

def _outlier_group():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 16, generator=g)
    x[:, [3, 11]] *= 50.0
    weights = [torch.randn(8, 16, generator=g) * 0.1, torch.randn(4, 16, generator=g) * 0.1]
    group = sq.SmoothGroup("x", linears=[])
    group.observe(x, rows=256)
    return group, x, weights


def test_choose_alpha_auto_takes_the_grid_minimum():
    group, _, weights = _outlier_group()

    alpha, errors = sq.choose_alpha(group, weights, "auto", ALPHA_GRID, "uint8")

    assert tuple(errors) == ALPHA_GRID and alpha in ALPHA_GRID
    assert errors[alpha] == min(errors.values())
    assert sq.choose_alpha(group, weights, 0.7, ALPHA_GRID, "uint8") == (0.7, {})


def test_smoothing_lowers_the_error_on_outlier_channels():
    group, x, weights = _outlier_group()
    alpha, errors = sq.choose_alpha(group, weights, "auto", ALPHA_GRID, "uint8")

    plain = sq.group_error(x, weights, None, "uint8")
    smoothed = sq.group_error(x, weights, sq.factors(group.absmax, weights, alpha), "uint8")

    assert smoothed == pytest.approx(errors[alpha])
    assert smoothed < plain / 2
