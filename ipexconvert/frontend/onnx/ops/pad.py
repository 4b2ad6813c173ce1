"""Pad: constant, reflect and edge modes over the given (or all) axes."""
from __future__ import annotations

import torch.nn.functional as F

from ..values import known_ints, optional_ints, scalar, tensor
from ._axes import normalize
from ._registry import OnnxNode, Unconvertible, onnx_op
from ._spatial import torch_pad_order

_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate"}


@onnx_op("Pad")
def pad(node: OnnxNode, inputs: list):
    t = tensor(inputs[0])
    pads = known_ints(inputs[1], "Pad's pads")
    value = scalar(inputs[2] if len(inputs) > 2 else None, "Pad's constant_value", 0)
    axes = optional_ints(inputs[3], "Pad's axes") if len(inputs) > 3 and inputs[3] is not None else None
    mode = node.attr("mode", "constant")
    if mode not in _MODES:
        raise Unconvertible(f"Pad mode {mode}")
    axes = [normalize(a, t.dim()) for a in axes] if axes is not None else list(range(t.dim()))
    full = [0] * (2 * t.dim())
    for i, a in enumerate(axes):
        full[a], full[t.dim() + a] = pads[i], pads[len(axes) + i]
    order = torch_pad_order(full)
    while order and order[-2:] == [0, 0]:  # F.pad's reflect/replicate take the trailing axes only
        order = order[:-2]
    if mode == "constant":
        return F.pad(t, order, value=value)
    if len(order) // 2 > t.dim() - 1 or len(order) // 2 > 3:
        raise Unconvertible(f"{mode} padding of these axes")
    return F.pad(t, order, mode=_MODES[mode])
