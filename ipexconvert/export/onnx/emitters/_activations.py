"""Activations as ONNX nodes (opset 17 has no Gelu: the exact and tanh forms are written out)."""
from __future__ import annotations

import math

import numpy as np

from ..builder import OnnxBuilder, Unexportable


def _scalar(b: OnnxBuilder, value: float, like_dtype=np.float32) -> str:
    return b.const(np.array(value, dtype=like_dtype), "k")


def activation(b: OnnxBuilder, kind: str, x: str) -> str:
    if kind == "relu":
        return b.node("Relu", [x])[0]
    if kind == "sigmoid":
        return b.node("Sigmoid", [x])[0]
    if kind == "tanh":
        return b.node("Tanh", [x])[0]
    if kind == "silu":
        return b.node("Mul", [x, b.node("Sigmoid", [x])[0]])[0]
    if kind == "gelu":  # x * 0.5 * (1 + erf(x / sqrt 2))
        e = b.node("Erf", [b.node("Div", [x, _scalar(b, math.sqrt(2))])[0]])[0]
        return b.node("Mul", [b.node("Mul", [x, b.node("Add", [e, _scalar(b, 1.0)])[0]])[0], _scalar(b, 0.5)])[0]
    if kind == "gelu_tanh":  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = b.node("Mul", [b.node("Mul", [x, x])[0], x])[0]
        inner = b.node("Add", [x, b.node("Mul", [cube, _scalar(b, 0.044715)])[0]])[0]
        t = b.node("Tanh", [b.node("Mul", [inner, _scalar(b, math.sqrt(2 / math.pi))])[0]])[0]
        return b.node("Mul", [b.node("Mul", [x, b.node("Add", [t, _scalar(b, 1.0)])[0]])[0], _scalar(b, 0.5)])[0]
    raise Unexportable(f"activation {kind}")


def post_ops(b: OnnxBuilder, node, y: str) -> str:
    """The node's fused post-ops (ir/postops.py) after its main result y."""
    for p in node.attrs.get("post_ops", []):
        if p.get("operand") is None:
            y = activation(b, p["kind"], y)
        else:
            y = b.node({"add": "Add", "mul": "Mul"}[p["kind"]], [y, node.inputs[p["operand"]]])[0]
    return y


def finish(b: OnnxBuilder, y: str, out: str) -> None:
    """Name the last result as the IR's output value."""
    b.node("Identity", [y], [out])
