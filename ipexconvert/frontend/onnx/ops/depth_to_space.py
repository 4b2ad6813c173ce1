"""DepthToSpace (DCR and CRD) and SpaceToDepth as reshape + permute."""
from ..values import tensor
from ._registry import OnnxNode, onnx_op


@onnx_op("DepthToSpace")
def depth_to_space(node: OnnxNode, inputs: list):
    x = tensor(inputs[0])
    b = node.attr("blocksize")
    n, c, h, w = x.shape
    if node.attr("mode", "DCR") == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).permute(0, 1, 4, 2, 5, 3)
    return y.reshape(n, c // (b * b), h * b, w * b)


@onnx_op("SpaceToDepth")
def space_to_depth(node: OnnxNode, inputs: list):
    x = tensor(inputs[0])
    b = node.attr("blocksize")
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b, b, w // b, b).permute(0, 3, 5, 1, 2, 4)
    return y.reshape(n, c * b * b, h // b, w // b)
