"""conv2d (+ post-ops) -> Conv."""
from __future__ import annotations

from ._activations import finish, post_ops
from ._registry import emits


@emits("conv2d")
def conv2d(b, node) -> None:
    a = node.attrs
    x, w = node.inputs[0], node.inputs[1]
    bias = node.inputs[2] if len(node.inputs) > 2 else None
    ph, pw = a.get("padding", [0, 0])
    y = b.node("Conv", [x, w, bias], kernel_shape=list(b.graph.values[w].shape[2:]),
               strides=list(a.get("stride", [1, 1])), pads=[ph, pw, ph, pw],
               dilations=list(a.get("dilation", [1, 1])), group=a.get("groups", 1))[0]
    finish(b, post_ops(b, node, y), node.outputs[0])
