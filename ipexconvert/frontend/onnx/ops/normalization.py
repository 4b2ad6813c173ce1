"""BatchNormalization (inference), LayerNormalization, RMSNormalization, InstanceNormalization.
Where the scale has the normalized shape these are the torch norms the IR models; otherwise the
arithmetic is written out (ONNX lets scale and bias broadcast)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..values import tensor
from ._axes import normalize
from ._registry import OnnxNode, Unconvertible, onnx_op


def _optional(inputs: list, i: int):
    return tensor(inputs[i]) if len(inputs) > i and inputs[i] is not None else None


@onnx_op("BatchNormalization")
def batch_norm(node: OnnxNode, inputs: list):
    if node.attr("training_mode", 0) or node.n_outputs > 1:
        raise Unconvertible("BatchNormalization in training mode")
    x, scale, bias, mean, var = (tensor(v) for v in inputs[:5])
    return F.batch_norm(x, mean, var, scale, bias, False, 0.0, node.attr("epsilon", 1e-5))


@onnx_op("LayerNormalization")
def layer_norm(node: OnnxNode, inputs: list):
    x, scale, bias = tensor(inputs[0]), tensor(inputs[1]), _optional(inputs, 2)
    axis = normalize(node.attr("axis", -1), x.dim())
    eps = node.attr("epsilon", 1e-5)
    shape = list(x.shape[axis:])
    if node.n_outputs == 1 and list(scale.shape) == shape and (bias is None or list(bias.shape) == shape) \
            and x.is_floating_point():
        return F.layer_norm(x, shape, scale, bias, eps)
    dims = list(range(axis, x.dim()))
    compute = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    xf = x.to(compute)
    mean = xf.mean(dim=dims, keepdim=True)
    inv_std = torch.rsqrt(((xf - mean) ** 2).mean(dim=dims, keepdim=True) + eps)
    y = ((xf - mean) * inv_std).to(x.dtype) * scale
    y = y + bias if bias is not None else y
    return [y, mean, inv_std][:node.n_outputs]


@onnx_op("RMSNormalization", min_opset=23)
def rms_norm(node: OnnxNode, inputs: list):
    x, scale = tensor(inputs[0]), tensor(inputs[1])
    axis = normalize(node.attr("axis", -1), x.dim())
    eps = node.attr("epsilon", 1e-5)
    shape = list(x.shape[axis:])
    if list(scale.shape) == shape:
        return F.rms_norm(x, shape, scale, eps)
    dims = list(range(axis, x.dim()))
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    y = (xf * torch.rsqrt((xf * xf).mean(dim=dims, keepdim=True) + eps)).to(x.dtype)
    return y * scale


@onnx_op("InstanceNormalization")
def instance_norm(node: OnnxNode, inputs: list):
    """Written out (F.instance_norm lowers to a private batch-norm op the allow-list refuses)."""
    x, scale, bias = (tensor(v) for v in inputs[:3])
    dims = list(range(2, x.dim()))
    mean = x.mean(dim=dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
    shape = [1, -1] + [1] * (x.dim() - 2)
    return (x - mean) * torch.rsqrt(var + node.attr("epsilon", 1e-5)) * scale.reshape(shape) + bias.reshape(shape)
