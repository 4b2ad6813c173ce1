"""MaxPool, AveragePool (2-D), GlobalAveragePool and GlobalMaxPool."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..values import tensor
from ._registry import OnnxNode, Unconvertible, onnx_op
from ._spatial import pads_for, symmetric, torch_pad_order


def _window(node: OnnxNode, x: torch.Tensor):
    kernel = list(node.attr("kernel_shape"))
    if len(kernel) != 2 or x.dim() != 4:
        raise Unconvertible(f"{len(kernel)}-D pooling (2-D only)")
    strides = list(node.attr("strides", [1, 1]))
    dilations = list(node.attr("dilations", [1, 1]))
    pads = pads_for(node, list(x.shape[2:]), kernel, strides, dilations)
    return kernel, strides, dilations, pads


@onnx_op("MaxPool")
def max_pool(node: OnnxNode, inputs: list):
    x = tensor(inputs[0])
    if node.n_outputs > 1:
        raise Unconvertible("MaxPool's Indices output")
    if node.attr("storage_order", 0):
        raise Unconvertible("storage_order 1")
    kernel, strides, dilations, pads = _window(node, x)
    even = symmetric(pads)
    if even is None or any(p > k // 2 for p, k in zip(even, kernel)):
        x = F.pad(x, torch_pad_order(pads), value=float("-inf"))
        even = [0, 0]
    return F.max_pool2d(x, kernel, strides, even, dilations, ceil_mode=bool(node.attr("ceil_mode", 0)))


@onnx_op("AveragePool")
def average_pool(node: OnnxNode, inputs: list):
    x = tensor(inputs[0])
    kernel, strides, dilations, pads = _window(node, x)
    if dilations != [1, 1]:
        raise Unconvertible("dilated AveragePool")
    even = symmetric(pads)
    include_pad = bool(node.attr("count_include_pad", 0))
    if even is None or any(p > k // 2 for p, k in zip(even, kernel)):
        raise Unconvertible("asymmetric or oversized AveragePool padding")
    return F.avg_pool2d(x, kernel, strides, even, ceil_mode=bool(node.attr("ceil_mode", 0)),
                        count_include_pad=include_pad)


@onnx_op("GlobalAveragePool")
def global_average_pool(node: OnnxNode, inputs: list):
    x = tensor(inputs[0])
    if x.dim() == 4:
        return F.adaptive_avg_pool2d(x, 1)
    return torch.mean(x, dim=list(range(2, x.dim())), keepdim=True)


@onnx_op("GlobalMaxPool")
def global_max_pool(node: OnnxNode, inputs: list):
    x = tensor(inputs[0])
    return torch.amax(x, dim=list(range(2, x.dim())), keepdim=True)
