"""layer_norm, add_layer_norm (its sum output too), batch_norm."""
from __future__ import annotations

import numpy as np

from ..builder import Unexportable
from ._registry import emits


def _scale_bias(b, node, first: int, width: int) -> tuple[str, str]:
    w = node.inputs[first] if len(node.inputs) > first else None
    bias = node.inputs[first + 1] if len(node.inputs) > first + 1 else None
    return (w or b.const(np.ones(width, dtype=np.float32), "ones"),
            bias or b.const(np.zeros(width, dtype=np.float32), "zeros"))


def _layer_norm(b, x: str, node, first: int, out: str) -> None:
    shape = node.attrs["normalized_shape"]
    if len(shape) != 1:
        raise Unexportable("layer_norm over more than the last dim")
    scale, bias = _scale_bias(b, node, first, shape[0])
    b.node("LayerNormalization", [x, scale, bias], [out], axis=-1, epsilon=float(node.attrs.get("eps", 1e-5)))


@emits("layer_norm")
def layer_norm(b, node) -> None:
    _layer_norm(b, node.inputs[0], node, 1, node.outputs[0])


@emits("add_layer_norm")
def add_layer_norm(b, node) -> None:
    total = node.outputs[1] if node.attrs.get("return_sum") else b.fresh("sum")
    b.node("Add", [node.inputs[0], node.inputs[1]], [total])
    _layer_norm(b, total, node, 2, node.outputs[0])
    if node.attrs.get("quantize") is not None:  # the last output: the norm as codes for the int8 layer after it
        from .quant import quantize_rows
        multiplier = node.inputs[4] if len(node.inputs) > 4 else None
        codes = quantize_rows(b, node.outputs[0], node.attrs["quantize"], multiplier)
        b.node("Identity", [codes], [node.outputs[-1]])


@emits("batch_norm")
def batch_norm(b, node) -> None:
    x, w, bias, mean, var = node.inputs[:5]
    width = b.graph.values[mean].shape[0]
    scale, shift = _scale_bias(b, node, 1, width)
    b.node("BatchNormalization", [x, scale, shift, mean, var], node.outputs, epsilon=float(node.attrs.get("eps", 1e-5)))
