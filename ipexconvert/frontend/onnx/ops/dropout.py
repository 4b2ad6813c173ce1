"""Dropout at inference: the input unchanged (and an all-true mask when asked for)."""
import torch

from ..values import scalar, tensor
from ._registry import OnnxNode, Unconvertible, onnx_op


@onnx_op("Dropout")
def dropout(node: OnnxNode, inputs: list):
    if scalar(inputs[2] if len(inputs) > 2 else None, "Dropout's training_mode", False):
        raise Unconvertible("Dropout in training mode")
    node.attr("seed")  # randomness that inference never draws
    x = tensor(inputs[0])
    return [x, torch.ones_like(x, dtype=torch.bool)] if node.n_outputs > 1 else x
