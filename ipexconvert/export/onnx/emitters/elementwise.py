"""Element-wise ops: add/sub/mul/div (a number operand becomes a constant of the tensor's dtype) and
activations."""
from __future__ import annotations

import numpy as np

from ._activations import activation, finish, post_ops
from ._registry import emits
from .layout import numpy_dtype

_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div"}


def _number(b, value, like: str) -> str:
    return b.const(np.array(value, dtype=numpy_dtype(b.graph.values[like].dtype)), "k")


@emits(*_BINARY)
def binary(b, node) -> None:
    a = node.attrs
    tensors = [i for i in node.inputs if i is not None]
    lhs, rhs = a.get("lhs_scalar"), a.get("rhs_scalar")
    if lhs is not None:
        operands = [_number(b, lhs, tensors[0]), tensors[0]]
    elif rhs is not None:
        operands = [tensors[0], _number(b, rhs, tensors[0])]
    else:
        operands = tensors[:2]
    y = b.node(_BINARY[node.op], operands)[0]
    finish(b, post_ops(b, node, y), node.outputs[0])


@emits("relu", "sigmoid", "tanh", "silu")
def unary(b, node) -> None:
    finish(b, activation(b, node.op, node.inputs[0]), node.outputs[0])


@emits("gelu")
def gelu(b, node) -> None:
    kind = "gelu_tanh" if node.attrs.get("approximate") == "tanh" else "gelu"
    finish(b, activation(b, kind, node.inputs[0]), node.outputs[0])


@emits("softmax")
def softmax(b, node) -> None:
    b.node("Softmax", [node.inputs[0]], node.outputs, axis=node.attrs["dim"])


@emits("silu_mul")
def silu_mul(b, node) -> None:
    if len(node.inputs) == 1:  # [gate | up] along the last dim
        gate, up = b.node("Split", [node.inputs[0]], [b.fresh("gate"), b.fresh("up")], axis=-1)
    else:
        gate, up = node.inputs
    b.node("Mul", [activation(b, "silu", gate), up], node.outputs)
