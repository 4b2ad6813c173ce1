"""plan_quantization: a plan entry per linear/conv2d, per-family observer defaults, sensitivity, errors."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ipexconvert.errors import UserInputError
from ipexconvert.quant.options import QuantOptions
from ipexconvert.quant.planner import plan_quantization
from quant_helpers import batches, float_program, node_reading_weight


class TinyCNN(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv1, self.bn = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, groups=2)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        y = F.relu(self.bn(self.conv1(x)))
        y = F.relu(self.conv2(y) + y)
        return self.head(y.mean(dim=(2, 3)))


class TinyTransformer(nn.Module):
    def __init__(self, d: int = 16):
        super().__init__()
        torch.manual_seed(0)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.o(F.scaled_dot_product_attention(self.q(h), self.k(h), self.v(h)))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def _plan(module, shape, options=QuantOptions(), **kw):
    data = batches(shape, 4)
    program = float_program(module, data[0])
    layers = [n.name for n in program.graph.nodes if n.op in ("linear", "conv2d")]
    return plan_quantization(program, data[:3], data[3:], options, **kw), layers, program


@pytest.mark.parametrize("module, shape, family_observer, count", [
    (TinyCNN, (2, 3, 8, 8), "histogram", 3),
    (TinyTransformer, (2, 5, 16), "minmax", 6),
])
def test_every_layer_is_planned(module, shape, family_observer, count):
    quantization, layers, _ = _plan(module(), shape)
    plan = quantization.plan

    assert len(layers) == count and sorted(plan.layers) == sorted(layers)
    assert plan.observer == family_observer and plan.calibration_batches == 3 and plan.held_out_batches == 1
    for name, layer in plan.layers.items():
        act = layer.input
        assert layer.quantized and layer.fallback_reason is None, name
        assert act.scale > 0 and 0 <= act.zero_point <= 255 and act.dtype == "uint8", name
        assert act.observer == family_observer and act.lo <= 0 <= act.hi, name
        assert layer.weight_scale_min > 0 and layer.sensitivity is not None and 0 <= layer.sensitivity < 0.1, name
        t = quantization.tensors[name]
        assert t.weight.dtype == torch.int8 and t.weight_scale.shape == (t.weight.shape[0],), name


def test_cnn_relu_input_range_starts_at_zero():
    quantization, _, program = _plan(TinyCNN(), (2, 3, 8, 8))
    # conv2 and the head read relu outputs: the range is [0, hi] and zero maps to code 0.
    for weight in ("conv2", "head"):
        act = quantization.plan.layers[node_reading_weight(program, weight).name].input
        assert act.lo == 0 and act.zero_point == 0 and act.hi > 0
    assert quantization.plan.smoothquant == "off (not a transformer)"


@pytest.mark.parametrize("observer", ["percentile", "minmax"])
def test_observer_override_is_recorded(observer):
    quantization, _, _ = _plan(TinyCNN(), (2, 3, 8, 8), QuantOptions(observer=observer))

    assert quantization.plan.observer == observer
    assert {layer.input.observer for layer in quantization.plan.layers.values()} == {observer}


def test_int8_activations_are_symmetric():
    quantization, _, _ = _plan(TinyTransformer(), (2, 5, 16), QuantOptions(activation_dtype="int8"))

    assert quantization.plan.activation_dtype == "int8"
    for layer in quantization.plan.layers.values():
        assert layer.input.dtype == "int8" and layer.input.zero_point == 0


class NoLayers(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2


def test_model_without_linear_or_conv_is_a_user_error():
    with pytest.raises(UserInputError, match="no linear or conv2d"):
        _plan(NoLayers(), (2, 4))


def test_imported_qconfig_without_a_layer_leaves_it_float():
    data = batches((2, 5, 16), 2)
    program = float_program(TinyTransformer(), data[0])
    exported = plan_quantization(copy.deepcopy(program), data, data, QuantOptions()).plan
    edited = exported.model_copy(deep=True)
    dropped = sorted(edited.layers)[-1]
    del edited.layers[dropped]

    imported = plan_quantization(program, data, data, QuantOptions(), imported=edited).plan

    assert not imported.layers[dropped].quantized and "qconfig" in imported.layers[dropped].fallback_reason
    for name in edited.layers:
        assert imported.layers[name].quantized and imported.layers[name].input == exported.layers[name].input
