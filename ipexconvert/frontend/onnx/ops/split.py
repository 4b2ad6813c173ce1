"""Split: sizes from the `split` input (or attribute), else `num_outputs` / the output count, with
the last part smaller when the size does not divide (opset 18)."""
import torch

from ..values import optional_ints, tensor
from ._axes import normalize
from ._registry import OnnxNode, Unconvertible, onnx_op


@onnx_op("Split")
def split(node: OnnxNode, inputs: list):
    t = tensor(inputs[0])
    axis = normalize(node.attr("axis", 0), t.dim())
    sizes = node.attr("split")
    if sizes is None and len(inputs) > 1:
        sizes = optional_ints(inputs[1], "Split's sizes")
    if sizes is None:
        parts = node.attr("num_outputs", node.n_outputs)
        length = t.shape[axis]
        if not isinstance(length, int):
            raise Unconvertible("an even split of a dynamic axis")
        chunk = -(-length // parts)
        sizes = [chunk] * (parts - 1) + [length - chunk * (parts - 1)]
    return list(torch.split(t, list(sizes), dim=axis))
