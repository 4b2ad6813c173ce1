"""quantize: float activation -> uint8/int8, per tensor (optionally with SmoothQuant channel factors).

inputs: x (float32/bfloat16), then optionally a constant float32 multiplier [C] over the
last axis: q = round(x * multiplier[c]) + zp. The multiplier is 1/(smooth[c] * scale):
SmoothQuant's x / smooth folded into the quantize step, so no extra op runs.
memory_format "channels_last" makes the output channels-last whatever x's layout (a network's
NCHW input quantized and laid out for the first int8 convolution in one pass; fuse_layout_change).
"""
from __future__ import annotations

from typing import Literal, Optional

import torch
from pydantic import BaseModel, ConfigDict, model_validator

from .. import dtypes
from ..opdef import Arity, OpDef, register_op
from ._common import expect_dtype, expect_rank, expect_shape, like
from ._quant import Scale, ZeroPoint, check_zero_point, quantize


class QuantizeAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scale: Scale
    zero_point: ZeroPoint = 0
    dtype: Literal["uint8", "int8"] = "uint8"
    memory_format: Optional[Literal["channels_last"]] = None

    @model_validator(mode="after")
    def _code_range(self) -> "QuantizeAttrs":
        check_zero_point(self.zero_point, self.dtype, "zero_point")
        return self


@register_op
class QuantizeOp(OpDef):
    name = "quantize"
    Attrs = QuantizeAttrs
    arity = Arity(1, 2)

    @classmethod
    def infer(cls, inputs, attrs):
        expect_dtype(inputs[0], sorted(dtypes.FLOAT_DTYPES), "the input")
        if len(inputs) > 1:
            expect_dtype(inputs[1], ("float32",), "the multiplier")
            expect_shape(inputs[1], [inputs[0].shape[-1]] if inputs[0].rank else [1], "the multiplier")
        if attrs.memory_format:
            expect_rank(inputs[0], (4,), "the input of a channels_last quantize")
        out = like(inputs[0], dtype=attrs.dtype)
        return [out.with_(memory_format=attrs.memory_format) if attrs.memory_format else out]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        multiplier = inputs[1] if len(inputs) > 1 else None
        q = quantize(inputs[0], attrs.scale, attrs.zero_point, attrs.dtype, multiplier)
        return q.contiguous(memory_format=torch.channels_last) if attrs.memory_format else q
