"""max_pool2d -> MaxPool; adaptive_avg_pool2d to 1x1 -> GlobalAveragePool."""
from __future__ import annotations

from ..builder import Unexportable
from ._registry import emits


@emits("max_pool2d")
def max_pool2d(b, node) -> None:
    a = node.attrs
    ph, pw = a.get("padding", [0, 0])
    b.node("MaxPool", [node.inputs[0]], node.outputs, kernel_shape=list(a["kernel_size"]),
           strides=list(a["stride"]), pads=[ph, pw, ph, pw], dilations=list(a.get("dilation", [1, 1])))


@emits("adaptive_avg_pool2d")
def adaptive_avg_pool2d(b, node) -> None:
    if list(node.attrs["output_size"]) != [1, 1]:
        raise Unexportable(f"adaptive average pooling to {node.attrs['output_size']} (1x1 only)")
    b.node("GlobalAveragePool", [node.inputs[0]], node.outputs)
