"""Gather and GatherElements. Gather on Ints picks elements in Python (shape arithmetic); a 2-D
weight gathered along axis 0 by token ids is an embedding lookup; otherwise index_select, with
negative indices counted from the end as ONNX says."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..values import Const, Ints, known_ints, tensor
from ._axes import normalize
from ._registry import OnnxNode, Unconvertible, onnx_op


def _wrap(idx: torch.Tensor, size) -> torch.Tensor:
    return torch.where(idx < 0, idx + size, idx)


@onnx_op("Gather")
def gather(node: OnnxNode, inputs: list):
    data, indices = inputs
    axis = node.attr("axis", 0)
    if isinstance(data, Ints) and isinstance(indices, (Ints, Const)) and data.rank == 1:
        picked = known_ints(indices, "Gather's indices")
        n = len(data.values)
        values = [data.values[i + n if i < 0 else i] for i in picked]
        rank = indices.rank if isinstance(indices, Ints) else indices.tensor.dim()
        if rank > 1:
            raise Unconvertible("Gather of a shape vector with 2-D indices")
        return Ints(values, rank, data.dtype)
    t, idx = tensor(data), tensor(indices)
    axis = normalize(axis, t.dim())
    if axis == 0 and t.dim() == 2 and t.is_floating_point() and not isinstance(indices, (Ints, Const)):
        return F.embedding(idx, t)  # token ids: an embedding (ids must lie in [0, rows))
    idx = _wrap(idx, t.shape[axis])
    out = torch.index_select(t, axis, idx.reshape(-1))
    return out.reshape(list(t.shape[:axis]) + list(idx.shape) + list(t.shape[axis + 1:]))


@onnx_op("GatherElements")
def gather_elements(node: OnnxNode, inputs: list):
    t, idx = tensor(inputs[0]), tensor(inputs[1])
    axis = normalize(node.attr("axis", 0), t.dim())
    return torch.gather(t, axis, _wrap(idx, t.shape[axis]))
