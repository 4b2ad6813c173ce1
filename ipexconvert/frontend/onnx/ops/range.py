"""Range: arange(start, limit, delta); small integer ones stay Ints."""
from __future__ import annotations

import torch

from ..values import MAX_INTS, Ints, dtype, scalar
from ._registry import OnnxNode, onnx_op


@onnx_op("Range")
def range_(node: OnnxNode, inputs: list):
    start, limit, delta = (scalar(v, f"Range's {w}") for v, w in zip(inputs, ("start", "limit", "delta")))
    kind = dtype(inputs[0])
    if all(isinstance(v, int) for v in (start, limit, delta)) and kind in (torch.int64, torch.int32):
        values = list(range(start, limit, delta))
        if len(values) <= MAX_INTS:
            return Ints(values, 1, kind)
    return torch.arange(start, limit, delta, dtype=kind)
