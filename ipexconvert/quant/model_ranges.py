"""Activation ranges a model states itself: its fake_quantize nodes (a QDQ ONNX model's Q -> DQ pairs, a
quantization-aware-trained PyTorch model). An int8 conversion takes these instead of calibrating.

`take_model_ranges` runs before the float passes: it removes the nodes (their readers read the float
value again, so fusions see the plain graph; a range starting at 0 leaves a relu: its lower clamp is
the model's ReLU) and returns each quantized value's scale and zero point;
`plan_from_ranges` turns them, after the float passes, into the plan the quantize pass follows, as an
imported qconfig does. Weights are quantized again per output channel from the (dequantized) float
weights: the same codes for a model with symmetric per-channel int8 weights, finer ones otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..ir import Node, Program
from ..ir.ops._quant import QRANGE
from ..passes.rewrite import remove_nodes, replace_uses
from .plan import ActivationQuant, LayerPlan, QuantPlan

MODEL = "the model's QuantizeLinear/fake-quantize nodes"
NOT_IN_MODEL = "the model does not quantize this layer's input (no QuantizeLinear/DequantizeLinear pair on it)"


@dataclass
class ModelRanges:
    """Keyed by node name (the float passes keep the names of the layers they fuse into; values they rename)."""

    inputs: dict[str, ActivationQuant] = field(default_factory=dict)  # layer -> its input's quantization
    outputs: dict[str, ActivationQuant] = field(default_factory=dict)  # layer -> its output's quantization

    def __len__(self) -> int:
        return len(self.inputs)


def take_model_ranges(program: Program) -> ModelRanges:
    """Remove fake_quantize nodes (but those writing a graph output) and return what they stated about
    the nodes reading them and the layers writing them. A node reading two ranges keeps the first."""
    graph = program.graph
    ranges = ModelRanges()
    doomed: set[str] = set()
    producers, users = graph.producers(), graph.users()
    for node in graph.nodes:
        if node.op != "fake_quantize" or node.outputs[0] in graph.outputs:
            continue
        a = node.attrs
        lo, hi = QRANGE[a["dtype"]]
        act = ActivationQuant(dtype=a["dtype"], scale=a["scale"], zero_point=a["zero_point"],
                              lo=(lo - a["zero_point"]) * a["scale"], hi=(hi - a["zero_point"]) * a["scale"],
                              observer="model")
        for reader in users.get(node.outputs[0], []):
            if reader.inputs and reader.inputs[0] == node.outputs[0]:
                ranges.inputs.setdefault(reader.name, act)
        writer = _layer_behind(node.inputs[0], producers)
        if writer is not None:
            ranges.outputs.setdefault(writer.name, act)
        floor = _lower_bound(program, node.inputs[0], producers)
        if a["zero_point"] == lo and (floor is None or floor < 0):
            # The range starts at 0: the node is the model's ReLU (ONNX Runtime's quantizer drops a Relu
            # before a QuantizeLinear whose zero point clamps at 0), so float readers must see it too.
            node.op, node.attrs = "relu", {}
            continue
        replace_uses(graph, node.outputs[0], node.inputs[0])
        doomed.add(node.name)
    remove_nodes(program, doomed)
    return ranges


_KEEPS_BOUND = {"max_pool2d", "adaptive_avg_pool2d", "reshape", "flatten", "permute", "aten.expand.default",
                "aten.slice.Tensor", "aten.unsqueeze.default", "aten.squeeze.dim", "aten.clone.default"}
_BOUNDED_BELOW = {"relu": 0.0, "softmax": 0.0, "sigmoid": 0.0, "aten.exp.default": 0.0, "aten.erf.default": -1.0,
                  "tanh": -1.0}


def _lower_bound(program: Program, value: str, producers: dict[str, Node], depth: int = 0) -> Optional[float]:
    """A number the value is never below, where a few rules prove one (None: unknown). It tells whether
    a range starting at 0 clamps anything: softmax, GELU's 1 + erf(...) and a relu's output need no relu."""
    if value in program.weights:
        t = program.weights[value]
        return float(t.min()) if t.is_floating_point() and t.numel() else None
    node = producers.get(value)
    if node is None or depth > 32:
        return None
    kind = node.attrs.get("target") if node.op == "aten" else node.op

    def bound(i: int) -> Optional[float]:
        return _lower_bound(program, node.inputs[i], producers, depth + 1) if i < len(node.inputs) else None

    if kind in _BOUNDED_BELOW:
        return _BOUNDED_BELOW[kind]
    if kind in _KEEPS_BOUND:
        return bound(0)
    if kind == "aten.where.self":
        a, b = bound(1), bound(2)
        return None if a is None or b is None else min(a, b)
    if kind == "add":
        scalar = node.attrs.get("rhs_scalar")
        a, b = bound(0), (float(scalar) if isinstance(scalar, (int, float)) else bound(1))
        return None if a is None or b is None else a + b
    if kind == "mul" and node.attrs.get("rhs_scalar") is None:
        a, b = bound(0), bound(1)
        return 0.0 if a is not None and b is not None and a >= 0 and b >= 0 else None
    return None


def _layer_behind(value: str, producers: dict[str, Node]) -> Optional[Node]:
    """The linear/conv2d writing `value`, directly or through a relu (which the float passes fuse into it)."""
    node = producers.get(value)
    if node is not None and node.op == "relu":
        node = producers.get(node.inputs[0])
    return node if node is not None and node.op in ("linear", "conv2d", "matmul") else None


def plan_from_ranges(program: Program, ranges: ModelRanges) -> QuantPlan:
    """The layers whose input the model quantizes go int8 with its scale; the others stay float."""
    from .planner import quantizable, residual_sources

    targets = quantizable(program)
    residual = {n.name for n in residual_sources(program, targets)}
    plan = QuantPlan(observer="model", calibration=f"ranges from {MODEL}")
    for node in targets:
        act = ranges.inputs.get(node.name)
        plan.layers[node.name] = LayerPlan(
            node=node.name, op=node.op, quantized=act is not None, fallback_reason=None if act else NOT_IN_MODEL,
            input=act, output=ranges.outputs.get(node.name) if node.name in residual else None)
    return plan
