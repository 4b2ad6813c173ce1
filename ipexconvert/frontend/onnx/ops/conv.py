"""Conv (1-, 2- and 3-D; 2-D maps to the IR's conv2d). Asymmetric padding becomes an explicit pad."""
from __future__ import annotations

import torch.nn.functional as F

from ..values import tensor
from ._registry import OnnxNode, Unconvertible, onnx_op
from ._spatial import pads_for, symmetric, torch_pad_order

_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


@onnx_op("Conv")
def conv(node: OnnxNode, inputs: list):
    x, w = tensor(inputs[0]), tensor(inputs[1])
    b = tensor(inputs[2]) if len(inputs) > 2 and inputs[2] is not None else None
    n = w.dim() - 2
    if n not in _CONV:
        raise Unconvertible(f"{n}-D convolution")
    kernel = list(node.attr("kernel_shape", w.shape[2:]))
    strides = list(node.attr("strides", [1] * n))
    dilations = list(node.attr("dilations", [1] * n))
    pads = pads_for(node, list(x.shape[2:]), kernel, strides, dilations)
    even = symmetric(pads)
    if even is None:
        x = F.pad(x, torch_pad_order(pads))
        even = [0] * n
    return _CONV[n](x, w, b, stride=strides, padding=even, dilation=dilations, groups=node.attr("group", 1))
