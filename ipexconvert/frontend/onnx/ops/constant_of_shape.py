"""ConstantOfShape: a filled tensor; small integer ones stay Ints (exported graphs build shapes so)."""
from __future__ import annotations

import torch

from ..values import MAX_INTS, Ints, known_ints
from ._registry import OnnxNode, onnx_op


@onnx_op("ConstantOfShape")
def constant_of_shape(node: OnnxNode, inputs: list):
    shape = known_ints(inputs[0], "ConstantOfShape's shape")
    value = node.attr("value")  # a Const: its number was read before tracing
    kind = value.tensor.dtype if value is not None else torch.float32
    fill = value.numbers[0] if value is not None else 0.0
    if kind in (torch.int64, torch.int32, torch.bool) and len(shape) == 1 and isinstance(shape[0], int) \
            and shape[0] <= MAX_INTS:
        return Ints([fill] * shape[0], 1, kind)
    return torch.full(shape, fill, dtype=kind)
