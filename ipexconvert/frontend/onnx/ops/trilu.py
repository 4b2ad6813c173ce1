"""Trilu: triu / tril with the diagonal offset k."""
import torch

from ..values import scalar, tensor
from ._registry import OnnxNode, onnx_op


@onnx_op("Trilu")
def trilu(node: OnnxNode, inputs: list):
    t = tensor(inputs[0])
    k = int(scalar(inputs[1] if len(inputs) > 1 else None, "Trilu's k", 0))
    return torch.triu(t, k) if node.attr("upper", 1) else torch.tril(t, k)
