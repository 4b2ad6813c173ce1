"""Quantization math shared by the int8 ops (not an op): the reference every int8 kernel must match.

Quantized values are plain int8/uint8 tensors; scales and zero points travel as attrs
(activations, per tensor) or constant inputs (weights, per output channel).
Codes follow the native quantize kernels' arithmetic exactly (see quantize() below), so
reference and kernel agree bit for bit.
"""
from __future__ import annotations

from typing import Annotated, Literal, Optional

import torch
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from .. import dtypes
from ..postops import PostOp, apply_post_ops
from ..spec import TensorSpec
from ._common import expect_dtype, expect_rank, expect_shape, require

QRANGE = {"uint8": (0, 255), "int8": (-128, 127)}
QTORCH = {"uint8": torch.uint8, "int8": torch.int8}

# The kernels hold scales in float32 and divide by them: a scale must be a normal positive float32 (NaN, 0,
# 5e-324 or 1e39 make inf or NaN codes, and the native layers refuse them with a ValueError).
_FLOAT32_TINY, _FLOAT32_MAX = float(torch.finfo(torch.float32).tiny), float(torch.finfo(torch.float32).max)


def _positive_float32(value: float) -> float:
    if not _FLOAT32_TINY <= value <= _FLOAT32_MAX:  # NaN fails the comparison too
        raise ValueError(f"scale {value} is not a positive, finite float32 (the kernels divide by it)")
    return value


Scale = Annotated[float, AfterValidator(_positive_float32)]
ZeroPoint = Annotated[int, Field(ge=-128, le=255)]  # a uint8 or int8 code; the dtype's own range is checked with it


def check_zero_point(zero_point: int, dtype: str, what: str) -> None:
    """ValueError unless zero_point is a code of dtype (uint8 or int8)."""
    lo, hi = QRANGE[dtype]
    if not lo <= zero_point <= hi:
        raise ValueError(f"{what} {zero_point} is outside {dtype}'s range {lo}..{hi}")


class OutputQuant(BaseModel):
    """What an int8 GEMM/conv returns: a float dtype, or a requantized uint8/int8 tensor."""

    model_config = ConfigDict(extra="forbid")
    output_dtype: Literal["float32", "bfloat16", "uint8", "int8"] = "float32"
    output_scale: Scale = 1.0
    output_zero_point: ZeroPoint = 0

    @model_validator(mode="after")
    def _output_code_range(self) -> "OutputQuant":
        if self.output_dtype in QRANGE:
            check_zero_point(self.output_zero_point, self.output_dtype, "output_zero_point")
        return self


class Int8LayerAttrs(OutputQuant):
    """What qlinear and qconv2d share: the per-tensor input quantization and the post-ops."""

    x_scale: Scale
    x_zero_point: ZeroPoint = 0
    post_ops: list[PostOp] = Field(default_factory=list)


def check_int8_operands(x: TensorSpec, w: TensorSpec, scales: TensorSpec, bias: Optional[TensorSpec],
                        attrs: Int8LayerAttrs) -> None:
    """The own inputs of qlinear/qconv2d: codes (whose dtype holds attrs.x_zero_point), int8 weight [O, ...], float32
    scales [O], float32 bias [O] or None (SpecError otherwise; the shapes x and the weight must agree on are the op's
    own check)."""
    expect_dtype(x, tuple(QRANGE), "the input")
    lo, hi = QRANGE[x.dtype]
    require(lo <= attrs.x_zero_point <= hi,
            f"x_zero_point {attrs.x_zero_point} is not a code of the input {x.describe()} ({lo}..{hi})")
    expect_dtype(w, ("int8",), "the weight")
    expect_rank(w, (2, 4), "the weight")
    expect_dtype(scales, ("float32",), "the weight scales")
    expect_shape(scales, [w.shape[0]], "the weight scales")
    if bias is not None:
        expect_dtype(bias, ("float32",), "the bias")


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
    return y.to(dtypes.to_torch(out.output_dtype))
