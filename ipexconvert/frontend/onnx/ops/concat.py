"""Concat: of Ints stays Ints (shape vectors); of tensors, torch.cat."""
import torch

from ..values import Ints, tensor
from ._axes import normalize
from ._registry import OnnxNode, onnx_op


@onnx_op("Concat")
def concat(node: OnnxNode, inputs: list):
    parts = [v for v in inputs if v is not None]
    axis = node.attr("axis")
    if all(isinstance(v, Ints) and v.rank == 1 for v in parts) and len({v.dtype for v in parts}) == 1 \
            and axis in (0, -1):
        return Ints([x for v in parts for x in v.values], 1, parts[0].dtype)
    tensors = [tensor(v) for v in parts]
    axis = normalize(axis, tensors[0].dim())
    return torch.cat(tensors, dim=axis)
