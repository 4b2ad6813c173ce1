"""Softmax, LogSoftmax and Hardmax over one axis (opset 13 semantics: not flattened)."""
import torch

from ..values import tensor
from ._axes import normalize
from ._registry import OnnxNode, onnx_op


@onnx_op("Softmax")
def softmax(node: OnnxNode, inputs: list):
    t = tensor(inputs[0])
    return torch.softmax(t, dim=normalize(node.attr("axis", -1), t.dim()))


@onnx_op("LogSoftmax")
def log_softmax(node: OnnxNode, inputs: list):
    t = tensor(inputs[0])
    return torch.log_softmax(t, dim=normalize(node.attr("axis", -1), t.dim()))


@onnx_op("Hardmax")
def hardmax(node: OnnxNode, inputs: list):
    t = tensor(inputs[0])
    axis = normalize(node.attr("axis", -1), t.dim())
    first = torch.argmax(t, dim=axis, keepdim=True)  # ONNX: the first of equal maxima
    positions = torch.arange(t.shape[axis]).reshape([-1] + [1] * (t.dim() - 1 - axis))
    return (positions == first).to(t.dtype)
