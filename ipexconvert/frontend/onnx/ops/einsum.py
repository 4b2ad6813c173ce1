"""Einsum: torch.einsum with the same equation (lowered to matmuls and permutes by torch)."""
import torch

from ..values import tensor
from ._registry import OnnxNode, onnx_op


@onnx_op("Einsum")
def einsum(node: OnnxNode, inputs: list):
    return torch.einsum(node.attr("equation"), *(tensor(v) for v in inputs))
