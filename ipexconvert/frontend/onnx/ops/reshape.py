"""Reshape, Flatten, Squeeze, Unsqueeze (on Ints too: shape vectors get reshaped in exported graphs)."""
from __future__ import annotations

import math

from ..values import Ints, known_ints, tensor
from ._axes import axes_of, normalize
from ._registry import OnnxNode, Unconvertible, onnx_op


@onnx_op("Reshape")
def reshape(node: OnnxNode, inputs: list):
    x, target = inputs[0], known_ints(inputs[1], "Reshape's shape")
    allow_zero = node.attr("allowzero", 0)
    if isinstance(x, Ints):
        if len(target) > 1 or (len(target) == 1 and target[0] not in (-1, len(x.values))):
            return tensor(x).reshape(target)
        return Ints(list(x.values), len(target))
    t = tensor(x)
    if not allow_zero:  # 0 copies the input's size at that position
        target = [t.shape[i] if isinstance(d, int) and d == 0 else d for i, d in enumerate(target)]
    return t.reshape(target)


@onnx_op("Flatten")
def flatten(node: OnnxNode, inputs: list):
    t = tensor(inputs[0])
    axis = node.attr("axis", 1)
    axis = axis + t.dim() if axis < 0 else axis
    if not 0 <= axis <= t.dim():
        raise Unconvertible(f"axis {node.attr('axis')} for a rank-{t.dim()} tensor")
    return t.reshape(math.prod(t.shape[:axis]), math.prod(t.shape[axis:]))


@onnx_op("Squeeze")
def squeeze(node: OnnxNode, inputs: list):
    x = inputs[0]
    axes = axes_of(node, inputs, 1)
    if isinstance(x, Ints):
        if x.rank == 1 and len(x.values) == 1 and axes in (None, [0], [-1]):
            return Ints(list(x.values), 0, x.dtype)
        return x
    t = tensor(x)
    if axes is None:
        return t.squeeze()
    axes = sorted({normalize(a, t.dim()) for a in axes}, reverse=True)
    for a in axes:
        t = t.squeeze(a)
    return t


@onnx_op("Unsqueeze")
def unsqueeze(node: OnnxNode, inputs: list):
    x = inputs[0]
    axes = axes_of(node, inputs, 1)
    if axes is None:
        raise Unconvertible("Unsqueeze without axes")
    if isinstance(x, Ints) and x.rank == 0 and len(axes) == 1:
        return Ints(list(x.values), 1, x.dtype)
    t = tensor(x)
    out_rank = t.dim() + len(axes)
    for a in sorted(normalize(a, out_rank) for a in axes):
        t = t.unsqueeze(a)
    return t
