"""MatMul and Gemm. Gemm with alpha = beta = 1, no transposed A and a bias of N (or none) is a linear
layer; a MatMul by a constant 2-D weight becomes one in the prepack pass."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..values import tensor
from ._registry import OnnxNode, onnx_op


@onnx_op("MatMul")
def matmul(node: OnnxNode, inputs: list):
    return torch.matmul(tensor(inputs[0]), tensor(inputs[1]))


@onnx_op("Gemm")
def gemm(node: OnnxNode, inputs: list):
    a, b = tensor(inputs[0]), tensor(inputs[1])
    c = tensor(inputs[2]) if len(inputs) > 2 and inputs[2] is not None else None
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    trans_a, trans_b = node.attr("transA", 0), node.attr("transB", 0)
    weight = b if trans_b else b.t()
    if alpha == 1.0 and beta == 1.0 and not trans_a and (c is None or list(c.shape) == [weight.shape[0]]):
        return F.linear(a, weight, c)
    a = a.t() if trans_a else a
    b = b.t() if trans_b else b
    y = torch.matmul(a, b)
    y = y * alpha if alpha != 1.0 else y
    if c is not None:
        y = y + (c * beta if beta != 1.0 else c)
    return y
