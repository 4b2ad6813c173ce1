"""int8 nodes as QDQ ONNX: codes stay uint8/int8 tensors between layers; each int8 layer reads them
through DequantizeLinear with its calibrated x_scale / x_zero_point, its int8 weights through
DequantizeLinear with their per-output-channel scales, and a requantized output is a QuantizeLinear.

A SmoothQuant multiplier m (quantize's q = round(x * m) + zp, m = 1 / (smooth * scale)) is written
as Mul(x, m * scale) followed by QuantizeLinear(scale, zp): the same codes up to rounding, and a
Q/DQ pair with one scale, the form ONNX Runtime fuses into its integer kernels.
"""
from __future__ import annotations

import numpy as np
import torch

from ....ir.ops._quant import QRANGE
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


def dequantize(b, codes: str, scale: float, zero_point: int, dtype: str | None = None) -> str:
    """DequantizeLinear of codes (an IR value, or a name written here with its `dtype` given)."""
    dtype = dtype or b.graph.values[codes].dtype
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


def _output_codes(b, node) -> tuple[float, int, str] | None:
    """(scale, zero point, dtype) of the layer's output codes: its requantized output, or for a conv with a
    float output the plan's calibrated output range (written as a Q/DQ pair: ONNX Runtime then runs the conv,
    and a pooling after it, as integer kernels, as it does for its own quantize_static models)."""
    a = node.attrs
    dtype = a.get("output_dtype", "float32")
    if dtype in _NP:
        return a.get("output_scale", 1.0), a.get("output_zero_point", 0), dtype
    return b.output_ranges.get(node.name) if node.op == "qconv2d" else None


def _residual_codes_range(a: dict, out: tuple[float, int, str] | None) -> tuple[float, int] | None:
    """(scale, zero point) the sum's first operand is quantized at, for a layer ending in
    [add(uint8 residual), relu?] with output codes `out`; None for any other layer.

    ONNX Runtime fuses an integer convolution only when a QuantizeLinear follows it, and an integer
    add only between Q/DQ pairs, so y = Q(conv + r) is written as Q(DQ(Q(conv)) + DQ(r)). With
    y's codes spanning [y_lo, y_hi] and r's [r_lo, r_hi], conv outside [y_lo - r_hi, y_hi - r_lo]
    saturates y (after the relu too) whatever its exact value, so quantizing it over that range
    clips nothing that matters; the cost is one rounding at about twice y's step."""
    post = a.get("post_ops", [])
    if (out is None or a.get("accum_scale") is None or not post or post[0]["kind"] != "add"
            or any(p["kind"] != "relu" or p.get("operand") is not None for p in post[1:])):
        return None
    s_o, zp_o, out_dtype = out
    lo_o, hi_o = QRANGE[out_dtype]
    s_r, zp_r = a["accum_scale"], a.get("accum_zero_point", 0)
    lo_r, hi_r = QRANGE["uint8"]  # int8_residual keeps residuals in uint8
    c_lo = (lo_o - zp_o) * s_o - (hi_r - zp_r) * s_r
    c_hi = (hi_o - zp_o) * s_o - (lo_r - zp_r) * s_r
    scale = (c_hi - c_lo) / 255.0
    return scale, int(min(255, max(0, round(-c_lo / scale))))


def _post_ops_and_output(b, node, y: str) -> None:
    a = node.attrs
    accum = a.get("accum_scale")
    out = _output_codes(b, node)
    through = _residual_codes_range(a, out)
    post = a.get("post_ops", [])
    if through is not None:
        codes = b.node("QuantizeLinear", [y, *_params(b, *through, "uint8")])[0]
        y = dequantize(b, codes, *through, "uint8")
        if out[1] == QRANGE[out[2]][0]:  # the output's QuantizeLinear clamps at 0 itself: no Relu needed
            post = post[:1]
    for p in post:
        if p.get("operand") is None:
            y = activation(b, p["kind"], y)
            continue
        operand = node.inputs[p["operand"]]
        if accum is not None and p["kind"] == "add":  # a residual kept as uint8 codes (int8_residual)
            operand = dequantize(b, operand, accum, a.get("accum_zero_point", 0))
        y = b.node({"add": "Add", "mul": "Mul"}[p["kind"]], [y, operand])[0]
    if out is not None:
        y = b.node("QuantizeLinear", [y, *_params(b, *out)])[0]
        if a.get("output_dtype", "float32") not in _NP:  # a float output: back to float after the pair
            y = dequantize(b, y, out[0], out[1], out[2])
    finish(b, y, node.outputs[0])


def _int32_bias(b, node) -> str | None:
    """The float bias as int32 codes at scale x_scale * w_scale (DequantizeLinear), the form ONNX Runtime
    needs to run a 2-D Gemm as its integer QGemm; None when a code would not fit int32."""
    bias, scales = b.weight(node.inputs[3]).double(), b.weight(node.inputs[2]).double() * node.attrs["x_scale"]
    codes = torch.round(bias / scales)
    if codes.abs().max() >= 2 ** 31 - 1:
        return None
    zero = b.const(np.zeros(codes.numel(), dtype=np.int32), "b_zero_point")
    return b.node("DequantizeLinear", [b.const(codes.to(torch.int32), f"{node.inputs[3]}_q"),
                                       b.const(scales.float(), "b_scale"), zero], axis=0)[0]


@emits("qlinear")
def qlinear(b, node) -> None:
    """2-D input: Gemm over int8 weights and an int32 bias (ONNX Runtime's QGemm, float or requantized
    output); else MatMul then Add (ONNX Runtime's MatMulIntegerToFloat)."""
    a = node.attrs
    if node.inputs[1] not in b.weights:
        raise Unexportable("an int8 linear whose weight is not a constant")
    x = dequantize(b, node.inputs[0], a["x_scale"], a.get("x_zero_point", 0))
    bias = node.inputs[3]
    if b.graph.values[node.inputs[0]].rank == 2 and (bias is None or bias in b.weights):
        c = None if bias is None else _int32_bias(b, node)
        if bias is None or c is not None:
            y = b.node("Gemm", [x, _weight(b, node, transposed=False)] + ([c] if c else []), transB=1)[0]
            _post_ops_and_output(b, node, y)
            return
    y = b.node("MatMul", [x, _weight(b, node, transposed=True)])[0]
    if bias is not None:
        y = b.node("Add", [y, bias])[0]
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
