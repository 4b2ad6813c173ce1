"""ArgMax and ArgMin (select_last_index picks the last of equal extremes)."""
import torch

from ..values import tensor
from ._axes import normalize
from ._registry import OnnxNode, onnx_op


def _arg(fn):
    def run(node: OnnxNode, inputs: list):
        t = tensor(inputs[0])
        axis = normalize(node.attr("axis", 0), t.dim())
        keep = bool(node.attr("keepdims", 1))
        if node.attr("select_last_index", 0):
            flipped = torch.flip(t, [axis])
            return t.shape[axis] - 1 - fn(flipped, dim=axis, keepdim=keep)
        return fn(t, dim=axis, keepdim=keep)
    return run


onnx_op("ArgMax")(_arg(torch.argmax))
onnx_op("ArgMin")(_arg(torch.argmin))
