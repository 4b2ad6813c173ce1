"""fake_quantize: a float activation quantized and dequantized again, per tensor (the float model a
QuantizeLinear -> DequantizeLinear pair, or a quantization-aware-trained PyTorch model, describes).

We promise ONNX's QuantizeLinear arithmetic: q = clamp(round_half_even(x / scale) + zero_point) in
float32, then (q - zero_point) * scale. In an int8 conversion these nodes are not run: they are
read as the ranges of the int8 layers behind them and removed (quant/model_ranges.py).
"""
from __future__ import annotations

from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, model_validator

from .. import dtypes
from ..opdef import OpDef, register_op
from ._common import expect_dtype, like
from ._quant import QRANGE, Scale, ZeroPoint, check_zero_point


class FakeQuantizeAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scale: Scale
    zero_point: ZeroPoint = 0
    dtype: Literal["uint8", "int8"] = "uint8"

    @model_validator(mode="after")
    def _code_range(self) -> "FakeQuantizeAttrs":
        check_zero_point(self.zero_point, self.dtype, "zero_point")
        return self


def fake_quantize(x: torch.Tensor, scale: float, zero_point: int, dtype: str) -> torch.Tensor:
    return fake_quantize_range(x, scale, zero_point, *QRANGE[dtype])


def fake_quantize_range(x: torch.Tensor, scale: float, zero_point: int, lo: int, hi: int) -> torch.Tensor:
    """The arithmetic, over the code range [lo, hi] (what frontend/torch/custom_ops.py traces to)."""
    s = torch.tensor(scale, dtype=torch.float32)
    q = torch.clamp(torch.round(x.float() / s) + zero_point, lo, hi)
    return ((q - zero_point) * s).to(x.dtype)


@register_op
class FakeQuantizeOp(OpDef):
    name = "fake_quantize"
    Attrs = FakeQuantizeAttrs

    @classmethod
    def infer(cls, inputs, attrs):
        expect_dtype(inputs[0], sorted(dtypes.FLOAT_DTYPES), "the input")
        return [like(inputs[0])]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        return fake_quantize(inputs[0], attrs.scale, attrs.zero_point, attrs.dtype)
