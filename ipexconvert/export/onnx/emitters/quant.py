"""int8 nodes as QDQ ONNX: codes stay uint8/int8 tensors between layers; each int8 layer reads them
through DequantizeLinear with its calibrated x_scale / x_zero_point, its int8 weights through
DequantizeLinear with their per-output-channel scales, and a requantized output is a QuantizeLinear.

A SmoothQuant multiplier m (quantize's q = round(x * m) + zp, m = 1 / (smooth * scale)) is written
as Mul(x, m * scale) followed by QuantizeLinear(scale, zp): the same codes up to rounding, and a
Q/DQ pair with one scale, the form ONNX Runtime fuses into its integer kernels.
"""
from __future__ import annotations

import numpy as np

from ..builder import Unexportable
from ._activations import activation, finish
from ._registry import emits

_NP = {"uint8": np.uint8, "int8": np.int8}


def _params(b, scale: float, zero_point: int, dtype: str) -> tuple[str, str]:
    return (b.const(np.array(scale, dtype=np.float32), "scale"),
            b.const(np.array(zero_point, dtype=_NP[dtype]), "zero_point"))


def quantize_rows(b, x: str, attrs: dict, multiplier) -> str:
    """Codes of x as the IR's quantize computes them (attrs: scale, zero_point, dtype); `multiplier`
    is the name of a constant broadcast over the last axis, or None."""
    scale, zero_point, dtype = attrs["scale"], attrs.get("zero_point", 0), attrs.get("dtype", "uint8")
    if multiplier is not None:
        m = b.weight(multiplier) if multiplier in b.weights else None
        if m is None:
            factor = b.node("Mul", [multiplier, b.const(np.array(scale, dtype=np.float32), "scale")])[0]
        else:
            factor = b.const((m.float() * scale).numpy(), "smooth")
        x = b.node("Mul", [x, factor])[0]
    return b.node("QuantizeLinear", [x, *_params(b, scale, zero_point, dtype)])[0]


def dequantize(b, codes: str, scale: float, zero_point: int) -> str:
    dtype = b.graph.values[codes].dtype
    return b.node("DequantizeLinear", [codes, *_params(b, scale, zero_point, dtype)])[0]


@emits("quantize")
def quantize(b, node) -> None:
    multiplier = node.inputs[1] if len(node.inputs) > 1 else None
    codes = quantize_rows(b, node.inputs[0], node.attrs, multiplier)
    b.node("Identity", [codes], node.outputs)


def _weight(b, node, transposed: bool) -> str:
    """DequantizeLinear of the int8 weight, per output channel ([out, in] -> [in, out] for MatMul)."""
    w, scales = node.inputs[1], node.inputs[2]
    codes = b.weight(w)
    if transposed:
        codes = codes.t().contiguous()
    zero = b.const(np.zeros(codes.shape[1 if transposed else 0], dtype=np.int8), "w_zero_point")
    return b.node("DequantizeLinear", [b.const(codes, f"{w}_q"), scales, zero], axis=1 if transposed else 0)[0]


def _post_ops_and_output(b, node, y: str) -> None:
    a = node.attrs
    accum = a.get("accum_scale")
    for p in a.get("post_ops", []):
        if p.get("operand") is None:
            y = activation(b, p["kind"], y)
            continue
        operand = node.inputs[p["operand"]]
        if accum is not None and p["kind"] == "add":  # a residual kept as uint8 codes (int8_residual)
            operand = dequantize(b, operand, accum, a.get("accum_zero_point", 0))
        y = b.node({"add": "Add", "mul": "Mul"}[p["kind"]], [y, operand])[0]
    dtype = a.get("output_dtype", "float32")
    if dtype in _NP:
        y = b.node("QuantizeLinear", [y, *_params(b, a.get("output_scale", 1.0), a.get("output_zero_point", 0), dtype)])[0]
    finish(b, y, node.outputs[0])


@emits("qlinear")
def qlinear(b, node) -> None:
    a = node.attrs
    if node.inputs[1] not in b.weights:
        raise Unexportable("an int8 linear whose weight is not a constant")
    x = dequantize(b, node.inputs[0], a["x_scale"], a.get("x_zero_point", 0))
    y = b.node("MatMul", [x, _weight(b, node, transposed=True)])[0]
    if node.inputs[3] is not None:
        y = b.node("Add", [y, node.inputs[3]])[0]
    _post_ops_and_output(b, node, y)


@emits("qconv2d")
def qconv2d(b, node) -> None:
    a = node.attrs
    x = dequantize(b, node.inputs[0], a["x_scale"], a.get("x_zero_point", 0))
    w = _weight(b, node, transposed=False)
    ph, pw = a.get("padding", [0, 0])
    y = b.node("Conv", [x, w, node.inputs[3]], kernel_shape=list(b.graph.values[node.inputs[1]].shape[2:]),
               strides=list(a.get("stride", [1, 1])), pads=[ph, pw, ph, pw],
               dilations=list(a.get("dilation", [1, 1])), group=a.get("groups", 1))[0]
    _post_ops_and_output(b, node, y)


@emits("fake_quantize")
def fake_quantize(b, node) -> None:
    """A QuantizeLinear -> DequantizeLinear pair (ONNX's arithmetic is fake_quantize's definition)."""
    a = node.attrs
    params = _params(b, a["scale"], a.get("zero_point", 0), a.get("dtype", "uint8"))
    codes = b.node("QuantizeLinear", [node.inputs[0], *params])[0]
    b.node("DequantizeLinear", [codes, *params], node.outputs)
