"""quantize: linear/conv2d -> quantize + qlinear/qconv2d as the plan says; shared quantize nodes, post-ops, fallbacks."""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from ipexconvert.ir import Program
from ipexconvert.passes import PassOptions
from ipexconvert.passes.base import PASSES
from ipexconvert.quant.options import QuantOptions
from int8_pass_helpers import assert_close, by_weight, planned, quantized


class Attention(nn.Module):
    """Q/K/V read one LayerNorm output; O's residual add becomes its post-op (operand: x, or h for post-LN)."""

    def __init__(self, post_ln: bool = False, d: int = 16):
        super().__init__()
        torch.manual_seed(0)
        self.post_ln = post_ln
        self.ln = nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        h = self.ln(x)
        return (h if self.post_ln else x) + self.o(F.scaled_dot_product_attention(self.q(h), self.k(h), self.v(h)))


def _names(program: Program, op: str) -> list[str]:
    return [n.name for n in program.graph.nodes if n.op == op]


def test_qkv_share_one_quantize_node_and_the_residual_operand_shifts():
    before, quantization, data = planned(Attention(), (2, 5, 16))
    o_before = next(n for n in before.graph.nodes if n.op == "linear" and n.attrs["post_ops"])
    assert o_before.attrs["post_ops"] == [{"kind": "add", "operand": 3}] and o_before.inputs[3] == "x"

    after, counts = quantized(before, quantization)

    assert counts == {"linear_quantized": 4, "conv2d_quantized": 0, "quantize_inserted": 2, "left_float": 0}
    assert len(_names(after, "qlinear")) == 4 and not _names(after, "linear")
    users = after.graph.users()
    norm_out = next(n for n in after.graph.nodes if n.op == "layer_norm").outputs[0]
    (shared,) = users[norm_out]
    assert shared.op == "quantize" and shared.attrs["dtype"] == "uint8"
    assert sorted(n.name for n in users[shared.outputs[0]]) == ["linear", "linear_1", "linear_2"]
    o = after.graph.producers()[o_before.outputs[0]]
    assert o.op == "qlinear" and o.attrs["post_ops"] == [{"kind": "add", "operand": 4}] and o.inputs[4] == "x"
    assert after.weights[o.inputs[1]].dtype == torch.int8 and after.graph.values[o.outputs[0]].dtype == "float32"
    assert_close(after, before, data)  # the residual really is x: a wrong operand would be far off


def test_post_ln_qkv_share_one_quantize_node_with_the_smoothing_multiplier():
    # SmoothQuant on, post-LN: 1/s cannot go into the norm (the residual reads it), so it rides on the quantize node.
    before, quantization, data = planned(Attention(post_ln=True), (2, 5, 16), QuantOptions(smoothquant=0.5))
    assert {layer.smoothing.folded_into for layer in quantization.plan.layers.values()} == {"quantize"}

    after, counts = quantized(before, quantization)

    assert counts["quantize_inserted"] == 2  # Q/K/V share one (with the multiplier), O has its own
    norm_out = next(n for n in after.graph.nodes if n.op == "layer_norm").outputs[0]
    readers = after.graph.users()[norm_out]
    quantizes = [n for n in readers if n.op == "quantize"]
    assert len(quantizes) == 1 and len(quantizes[0].inputs) == 2  # x and the multiplier
    (o,) = [n for n in readers if n.op == "qlinear"]  # O reads the unscaled norm output as its residual
    assert o.inputs[o.attrs["post_ops"][0]["operand"]] == norm_out
    assert_close(after, before, data)


class ResidualCNN(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.body = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        y = F.relu(self.stem(x))
        y = F.relu(self.body(y) + y)
        return self.head(y.mean(dim=(2, 3)))


def test_conv_post_ops_keep_their_operand_and_numerics():
    before, quantization, data = planned(ResidualCNN(), (2, 3, 8, 8))
    body_before = by_weight(before, "body")
    assert [p["kind"] for p in body_before.attrs["post_ops"]] == ["add", "relu"]
    residual = body_before.inputs[3]

    after, counts = quantized(before, quantization)

    assert counts == {"linear_quantized": 1, "conv2d_quantized": 2, "quantize_inserted": 3, "left_float": 0}
    body = after.graph.producers()[body_before.outputs[0]]
    assert body.op == "qconv2d" and body.inputs[3] is None  # no bias: the slot stays, empty
    assert body.attrs["post_ops"] == [{"kind": "add", "operand": 4}, {"kind": "relu", "operand": None}]
    assert body.inputs[4] == residual and body.attrs["padding"] == [1, 1]
    assert_close(after, before, data)


def test_fallback_layers_stay_float():
    before, quantization, data = planned(ResidualCNN(), (2, 3, 8, 8))
    body = by_weight(before, "body")
    quantization.plan.layers[body.name].quantized = False
    quantization.plan.layers[body.name].fallback_reason = "test"

    after, counts = quantized(before, quantization)

    assert counts == {"linear_quantized": 1, "conv2d_quantized": 1, "quantize_inserted": 2, "left_float": 1}
    kept = after.graph.producers()[body.outputs[0]]
    assert kept.op == "conv2d" and kept.inputs == body.inputs and kept.attrs == body.attrs
    assert after.weights[kept.inputs[1]].dtype == torch.float32
    assert_close(after, before, data)


def test_without_a_plan_nothing_changes():
    before, _, _ = planned(ResidualCNN(), (2, 3, 8, 8))
    after = copy.deepcopy(before)

    counts = PASSES["quantize"].run(after, PassOptions(dtype="int8"))

    assert counts == {"linear_quantized": 0, "conv2d_quantized": 0, "quantize_inserted": 0, "left_float": 0}
    assert after.graph == before.graph
