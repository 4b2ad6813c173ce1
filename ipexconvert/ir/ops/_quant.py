"""Quantization math shared by the int8 ops (not an op): the reference every int8 kernel must match.

Quantized values are plain int8/uint8 tensors; scales and zero points travel as attrs
(activations, per tensor) or constant inputs (weights, per output channel).
Codes follow the native quantize kernels' arithmetic exactly (see quantize() below), so
reference and kernel agree bit for bit.
"""
from __future__ import annotations

from typing import Optional

import torch
from pydantic import BaseModel, ConfigDict, Field

from ..postops import PostOp, apply_post_ops

QRANGE = {"uint8": (0, 255), "int8": (-128, 127)}
QTORCH = {"uint8": torch.uint8, "int8": torch.int8}


class OutputQuant(BaseModel):
    """What an int8 GEMM/conv returns: a float dtype, or a requantized uint8/int8 tensor."""

    model_config = ConfigDict(extra="forbid")
    output_dtype: str = Field(default="float32", description="float32, bfloat16, uint8 or int8")
    output_scale: float = 1.0
    output_zero_point: int = 0


class Int8LayerAttrs(OutputQuant):
    """What qlinear and qconv2d share: the per-tensor input quantization and the post-ops."""

    x_scale: float
    x_zero_point: int = 0
    post_ops: list[PostOp] = Field(default_factory=list)


def float_operands(inputs, attrs: Int8LayerAttrs) -> tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
    """(x, weight, bias) of an int8 layer back in float32: what the reference computes on."""
    x = dequantize(inputs[0], attrs.x_scale, attrs.x_zero_point)
    bias = None if inputs[3] is None else inputs[3].float()
    return x, dequantize_weight(inputs[1], inputs[2]), bias


def quantize(x: torch.Tensor, scale: float, zero_point: int, dtype: str,
             multiplier: Optional[torch.Tensor] = None) -> torch.Tensor:
    """clamp(round(x * (1/scale)) + zp); `multiplier` (per last-axis channel) replaces 1/scale."""
    lo, hi = QRANGE[dtype]
    if multiplier is not None:
        # native quantize_last_axis: float32 product rounded, then the zero point added.
        return torch.clamp(torch.round(x.float() * multiplier.float()) + zero_point, lo, hi).to(QTORCH[dtype])
    # native quantize_per_tensor: fmaf(x, 1/scale, zp), i.e. exact in float64, one rounding to float32.
    inv = 1.0 / torch.tensor(scale, dtype=torch.float32)
    v = (x.float().double() * inv.double() + zero_point).float()
    return torch.clamp(torch.round(v), lo, hi).to(QTORCH[dtype])


def dequantize(q: torch.Tensor, scale, zero_point) -> torch.Tensor:
    return (q.float() - zero_point) * scale


def dequantize_weight(q: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """Per-output-channel (axis 0) symmetric weights back to float32."""
    return q.float() * scales.float().view(-1, *([1] * (q.dim() - 1)))


def finish(y: torch.Tensor, post_ops: list[PostOp], inputs, out: OutputQuant) -> torch.Tensor:
    """Post-ops in float32, then the output dtype (requantized if integer)."""
    operands = [None if t is None else (t.float() if t.is_floating_point() else t) for t in inputs]
    y = apply_post_ops(y, post_ops, operands)
    if out.output_dtype in QRANGE:
        return quantize(y, out.output_scale, out.output_zero_point, out.output_dtype)
    return y.to(getattr(torch, out.output_dtype))
