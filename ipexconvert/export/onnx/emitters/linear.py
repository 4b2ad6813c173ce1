"""linear and matmul (+ post-ops) -> MatMul (+ Add for the bias); W^T is stored transposed."""
from __future__ import annotations

from ..builder import Unexportable
from ._activations import finish, post_ops
from ._registry import emits


@emits("linear")
def linear(b, node) -> None:
    x, w = node.inputs[0], node.inputs[1]
    bias = node.inputs[2] if len(node.inputs) > 2 else None
    if w not in b.weights:
        raise Unexportable("a linear whose weight is not a constant")
    wt = b.const(b.weight(w).t().contiguous(), f"{w}_t")
    y = b.node("MatMul", [x, wt])[0]
    if bias is not None:
        y = b.node("Add", [y, bias])[0]
    finish(b, post_ops(b, node, y), node.outputs[0])


@emits("matmul")
def matmul(b, node) -> None:
    y = b.node("MatMul", node.inputs[:2])[0]
    finish(b, post_ops(b, node, y), node.outputs[0])
