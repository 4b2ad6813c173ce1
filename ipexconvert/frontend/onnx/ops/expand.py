"""Expand (broadcast both ways, as ONNX says) and Tile."""
from __future__ import annotations

from ..values import known_ints, tensor
from ._registry import OnnxNode, Unconvertible, onnx_op


@onnx_op("Expand")
def expand(node: OnnxNode, inputs: list):
    t = tensor(inputs[0])
    target = known_ints(inputs[1], "Expand's shape")
    rank = max(t.dim(), len(target))
    have = [1] * (rank - t.dim()) + list(t.shape)
    want = [1] * (rank - len(target)) + list(target)
    out = []
    for h, w in zip(have, want):
        if isinstance(w, int) and w == 1:
            out.append(h)
        elif isinstance(h, int) and h == 1:
            out.append(w)
        elif h is w or h == w:
            out.append(h)
        else:
            raise Unconvertible(f"shapes {have} and {want} do not broadcast")
    return t.reshape(have).expand(out)


@onnx_op("Tile")
def tile(node: OnnxNode, inputs: list):
    t = tensor(inputs[0])
    return t.repeat(known_ints(inputs[1], "Tile's repeats"))
