"""Shape and Size: the input's sizes as Ints (symbolic under tracing), never a tensor read."""
from ..values import Ints, tensor
from ._registry import OnnxNode, onnx_op


@onnx_op("Shape")
def shape(node: OnnxNode, inputs: list) -> Ints:
    x = inputs[0]
    if isinstance(x, Ints):
        sizes = [len(x.values)] if x.rank == 1 else []
    else:
        sizes = list(tensor(x).shape)
    rank = len(sizes)
    start, end = node.attr("start", 0), node.attr("end", rank)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return Ints(sizes[start:end], 1)


@onnx_op("Size")
def size(node: OnnxNode, inputs: list) -> Ints:
    x = inputs[0]
    if isinstance(x, Ints):
        return Ints([len(x.values)], 0)
    return Ints([tensor(x).numel()], 0)
