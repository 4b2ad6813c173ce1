"""Transpose: a permute (the default reverses the axes)."""
from ..values import tensor
from ._registry import OnnxNode, onnx_op


@onnx_op("Transpose")
def transpose(node: OnnxNode, inputs: list):
    t = tensor(inputs[0])
    perm = node.attr("perm", list(range(t.dim() - 1, -1, -1)))
    return t.permute(list(perm))
