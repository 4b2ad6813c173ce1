"""CumSum along one axis, optionally exclusive and/or reversed."""
import torch

from ..values import scalar, tensor
from ._axes import normalize
from ._registry import OnnxNode, onnx_op


@onnx_op("CumSum")
def cumsum(node: OnnxNode, inputs: list):
    t = tensor(inputs[0])
    axis = normalize(int(scalar(inputs[1], "CumSum's axis")), t.dim())
    reverse, exclusive = node.attr("reverse", 0), node.attr("exclusive", 0)
    x = torch.flip(t, [axis]) if reverse else t
    y = torch.cumsum(x, dim=axis, dtype=t.dtype)  # torch widens integers to int64; ONNX keeps the type
    if exclusive:
        y = y - x
    return torch.flip(y, [axis]) if reverse else y
