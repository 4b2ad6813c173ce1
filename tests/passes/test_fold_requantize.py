"""fold_requantize: an int8 layer read only by one set of quantize nodes returns uint8 itself; every case that must not fold."""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from ipexconvert.ir import Program
from ipexconvert.passes import PassOptions
from ipexconvert.passes.base import PASSES
from ipexconvert.quant.plan import ActivationQuant
from int8_pass_helpers import INT8_TOL, assert_close, by_weight, planned, quantized


def _fold(program: Program) -> tuple[Program, int]:
    program = copy.deepcopy(program)
    return program, PASSES["fold_requantize"].run(program, PassOptions(dtype="int8"))["requantize_folded"]


def _output_dtype(program: Program, float_node) -> str:
    """The output dtype of the int8 layer that replaced `float_node` (the pass keeps node names)."""
    node = next(n for n in program.graph.nodes if n.name == float_node.name)
    assert node.op in ("qconv2d", "qlinear")
    return node.attrs["output_dtype"]


class Chain(nn.Module):
    """conv -> relu -> conv -> relu -> conv -> mean -> linear; variants break the chain in one place each."""

    def __init__(self, variant: str = "chain"):
        super().__init__()
        torch.manual_seed(0)
        self.variant = variant
        self.c1, self.c2, self.c3 = (nn.Conv2d(c, 8, 3, padding=1) for c in (3, 8, 8))
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        y1 = F.relu(self.c1(x))
        y2 = F.relu(self.c2(y1) + y1) if self.variant == "residual" else F.relu(self.c2(y1))
        y3 = self.c3(y2)
        out = self.head(y3.mean(dim=(2, 3)))
        return (out, y1) if self.variant == "y1_is_output" else out


SHAPE = (2, 3, 8, 8)


def test_conv_chain_becomes_uint8():
    before, quantization, data = planned(Chain(), SHAPE)
    c1, c2, c3 = (by_weight(before, n) for n in ("c1", "c2", "c3"))
    unfolded, _ = quantized(before, quantization)
    assert unfolded.graph.op_histogram()["quantize"] == 4

    folded, count = _fold(unfolded)

    assert count == 2 and folded.graph.op_histogram()["quantize"] == 2  # the input's and the head's stay
    producers = folded.graph.producers()
    for producer, consumer in ((c1, c2), (c2, c3)):
        q = producers[producer.outputs[0]]
        assert q.attrs["output_dtype"] == "uint8" and folded.graph.values[q.outputs[0]].dtype == "uint8"
        reader = next(n for n in folded.graph.nodes if n.name == consumer.name)
        assert reader.inputs[0] == q.outputs[0]  # reads the producer's uint8 output directly
        assert (q.attrs["output_scale"], q.attrs["output_zero_point"]) == (reader.attrs["x_scale"], reader.attrs["x_zero_point"])
    assert _output_dtype(folded, c3) == "float32"  # read by mean, not by a quantize node
    # Folding only moves the requantization into the producer: same codes up to rounding of the float product.
    assert_close(folded, unfolded, data, tol=0.01)
    assert_close(folded, before, data, tol=INT8_TOL)


def test_no_fold_for_binary_post_op_or_a_float_reader():
    before, quantization, data = planned(Chain("residual"), SHAPE)
    c1, c2 = by_weight(before, "c1"), by_weight(before, "c2")
    assert [p["kind"] for p in c2.attrs["post_ops"]] == ["add", "relu"]
    unfolded, _ = quantized(before, quantization)

    folded, count = _fold(unfolded)

    assert count == 0
    assert _output_dtype(folded, c1) == "float32"  # y1 is also c2's residual operand: a reader that is no quantize
    assert _output_dtype(folded, c2) == "float32"  # its add post-op: oneDNN cannot fuse it with requantization
    assert_close(folded, before, data)


def test_no_fold_when_the_reader_is_a_fallback_layer():
    before, quantization, data = planned(Chain(), SHAPE)
    c1, c2 = by_weight(before, "c1"), by_weight(before, "c2")
    quantization.plan.layers[c2.name].quantized = False
    unfolded, _ = quantized(before, quantization)

    folded, count = _fold(unfolded)

    assert count == 0 and _output_dtype(folded, c1) == "float32"
    assert_close(folded, before, data)


def test_no_fold_when_the_value_is_a_graph_output():
    before, quantization, data = planned(Chain("y1_is_output"), SHAPE)
    c1, c2 = by_weight(before, "c1"), by_weight(before, "c2")
    unfolded, _ = quantized(before, quantization)

    folded, count = _fold(unfolded)

    assert count == 1 and _output_dtype(folded, c1) == "float32" and _output_dtype(folded, c2) == "uint8"
    assert folded.graph.values[folded.graph.outputs[1]].dtype == "float32"
    assert_close(folded, before, data)


class Fork(nn.Module):
    """One conv feeding two convs (read through one quantize node, or two if their input params differ)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.c1, self.a, self.b = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 4, 1), nn.Conv2d(8, 4, 1)

    def forward(self, x):
        y = F.relu(self.c1(x))
        return self.a(y), self.b(y)


def test_fork_folds_only_when_the_quantize_params_agree():
    before, quantization, data = planned(Fork(), SHAPE)
    c1, b = by_weight(before, "c1"), by_weight(before, "b")

    agreeing, _ = quantized(before, quantization)
    folded, count = _fold(agreeing)
    assert count == 1 and _output_dtype(folded, c1) == "uint8"
    assert_close(folded, before, data)

    act = quantization.plan.layers[b.name].input
    quantization.plan.layers[b.name].input = ActivationQuant(**{**act.model_dump(), "scale": act.scale * 2})
    disagreeing, _ = quantized(before, quantization)
    assert disagreeing.graph.op_histogram()["quantize"] == 3  # the input's, and one per branch
    folded, count = _fold(disagreeing)
    assert count == 0 and _output_dtype(folded, c1) == "float32"
    assert_close(folded, before, data)


class FFN(nn.Module):
    """A transformer FFN: layer_norm -> linear -> gelu -> linear, SmoothQuant-ed. The norm absorbs the
    first linear's factors; the second's quantize carries them as a per-channel multiplier."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.norm, self.up, self.down = nn.LayerNorm(16), nn.Linear(16, 48), nn.Linear(48, 16)
        with torch.no_grad():
            self.up.weight[5] *= 12  # an outlier channel after the gelu, so smoothing has something to do

    def forward(self, x):
        return self.down(F.gelu(self.up(self.norm(x))))


def test_smoothquant_multiplier_becomes_a_mul_post_op():
    """The gelu output's quantize carries a per-channel multiplier: the first linear takes it as a mul
    post-op on that constant and writes uint8 at scale 1, read directly by the second."""
    from ipexconvert.quant.options import QuantOptions

    before, quantization, data = planned(FFN(), (2, 5, 16), QuantOptions(smoothquant=0.5))
    up, down = by_weight(before, "up"), by_weight(before, "down")
    unfolded, _ = quantized(before, quantization)
    (smoothed,) = [n for n in unfolded.graph.nodes if n.op == "quantize" and len(n.inputs) == 2]  # the gelu output's

    folded, count = _fold(unfolded)

    assert count == 1
    node = next(n for n in folded.graph.nodes if n.name == up.name)
    assert node.attrs["output_dtype"] == "uint8" and node.attrs["output_scale"] == 1.0
    assert node.attrs["output_zero_point"] == smoothed.attrs["zero_point"]
    assert [p["kind"] for p in node.attrs["post_ops"]] == ["gelu", "mul"]
    assert node.inputs[node.attrs["post_ops"][1]["operand"]] == smoothed.inputs[1]
    assert next(n for n in folded.graph.nodes if n.name == down.name).inputs[0] == node.outputs[0]
    # The same codes but where the unfolded graph rounded the gelu output to bfloat16 first.
    assert_close(folded, unfolded, data, tol=0.01)
    assert_close(folded, before, data, tol=INT8_TOL)


def test_no_multiplier_fold_after_a_binary_post_op():
    """A qlinear whose post-ops already hold an operand keeps its float output and the quantize."""
    from ipexconvert.quant.options import QuantOptions

    before, quantization, data = planned(FFN(), (2, 5, 16), QuantOptions(smoothquant=0.5))
    up = by_weight(before, "up")
    unfolded, _ = quantized(before, quantization)
    node = next(n for n in unfolded.graph.nodes if n.name == up.name)
    node.inputs = [*node.inputs, node.inputs[3]]  # an add of its own bias: still [48] wide, but an operand
    node.attrs = {**node.attrs, "post_ops": [{"kind": "add", "operand": len(node.inputs) - 1}, *node.attrs["post_ops"]]}

    folded, count = _fold(unfolded)

    assert count == 0 and _output_dtype(folded, up) != "uint8"
