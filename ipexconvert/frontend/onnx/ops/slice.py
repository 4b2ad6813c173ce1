"""Slice: starts/ends/axes/steps from inputs (opset 10+), clamped as ONNX says; on Ints in Python.
Negative steps walk backwards (static sizes only: the indices are computed here)."""
from __future__ import annotations

import torch

from ..values import Ints, known_ints, optional_ints, tensor
from ._axes import normalize
from ._registry import OnnxNode, Unconvertible, onnx_op


def _backward_indices(start: int, end: int, step: int, size: int) -> list[int]:
    start = start + size if start < 0 else start
    end = end + size if end < 0 else end
    start = min(max(start, 0), size - 1)
    end = min(max(end, -1), size - 1)
    return list(range(start, end, step))


@onnx_op("Slice")
def slice_(node: OnnxNode, inputs: list):
    x = inputs[0]
    starts = known_ints(inputs[1], "Slice's starts")
    ends = known_ints(inputs[2], "Slice's ends")
    axes = optional_ints(inputs[3], "Slice's axes") if len(inputs) > 3 and inputs[3] is not None else None
    steps = optional_ints(inputs[4], "Slice's steps") if len(inputs) > 4 and inputs[4] is not None else None
    axes = axes if axes is not None else list(range(len(starts)))
    steps = steps if steps is not None else [1] * len(starts)
    if isinstance(x, Ints) and x.rank == 1:
        if axes not in ([0], [-1]) or steps[0] == 0:
            raise Unconvertible("Slice of a shape vector with these axes/steps")
        return Ints(list(x.values)[slice(starts[0], ends[0], steps[0])], 1, x.dtype)
    t = tensor(x)
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = normalize(axis, t.dim())
        if step == 0:
            raise Unconvertible("a Slice step of 0")
        if step > 0:
            index = [slice(None)] * axis + [slice(start, end, step)]
            t = t[tuple(index)]
            continue
        size = t.shape[axis]
        if not (isinstance(size, int) and all(isinstance(v, int) for v in (start, end))):
            raise Unconvertible("a backward Slice of a dynamic axis")
        picked = _backward_indices(start, end, step, size)
        t = torch.index_select(t, axis, torch.tensor(picked, dtype=torch.int64)) if picked \
            else t.narrow(axis, 0, 0)
    return t
