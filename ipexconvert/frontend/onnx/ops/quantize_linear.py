"""QuantizeLinear and DequantizeLinear (uint8/int8, per tensor or per axis) computed as the spec
says: q = saturate(round_half_even(x / scale) + zero_point), x = (q - zero_point) * scale.

These run the arithmetic (a QDQ model imports as the float model it simulates); reading Q/DQ pairs
as the IR's int8 layers is not built yet."""
from __future__ import annotations

import torch

from ..values import tensor
from ._axes import normalize
from ._registry import OnnxNode, Unconvertible, onnx_op

_RANGES = {torch.uint8: (0, 255), torch.int8: (-128, 127)}


def _per_axis(node: OnnxNode, param: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """A scale / zero point shaped to broadcast against x: per tensor, or along `axis`."""
    if node.attr("block_size", 0):
        raise Unconvertible("blocked quantization")
    axis = node.attr("axis", 1)
    if param.numel() == 1:  # a scalar, or a one-element vector (per tensor, as ONNX Runtime reads it)
        return param.reshape(())
    axis = normalize(axis, x.dim())
    return param.reshape([-1] + [1] * (x.dim() - 1 - axis))


@onnx_op("QuantizeLinear")
def quantize_linear(node: OnnxNode, inputs: list):
    x, scale = tensor(inputs[0]), tensor(inputs[1])
    zero = tensor(inputs[2]) if len(inputs) > 2 and inputs[2] is not None else None
    node.attr("saturate")  # float8 outputs only, which are refused below
    out_dtype = zero.dtype if zero is not None else torch.uint8
    if node.attr("output_dtype", 0):
        raise Unconvertible("output_dtype (give a zero point of the output type instead)")
    if out_dtype not in _RANGES or x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise Unconvertible(f"quantizing {x.dtype} to {out_dtype} (float to uint8/int8 only)")
    lo, hi = _RANGES[out_dtype]
    q = torch.round(x.float() / _per_axis(node, scale.float(), x))
    if zero is not None:
        q = q + _per_axis(node, zero.float(), x)
    return torch.clamp(q, lo, hi).to(out_dtype)


@onnx_op("DequantizeLinear")
def dequantize_linear(node: OnnxNode, inputs: list):
    x, scale = tensor(inputs[0]), tensor(inputs[1])
    zero = tensor(inputs[2]) if len(inputs) > 2 and inputs[2] is not None else None
    if x.dtype not in (torch.uint8, torch.int8, torch.int32):
        raise Unconvertible(f"dequantizing {x.dtype}")
    if node.attr("output_dtype", 0):
        raise Unconvertible("output_dtype")
    y = x.float()
    if zero is not None:
        y = y - _per_axis(node, zero.float(), x)
    return (y * _per_axis(node, scale.float(), x)).to(scale.dtype)
