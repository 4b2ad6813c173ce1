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
from pydantic import BaseModel, ConfigDict

from ..opdef import OpDef, register_op
from ._common import like
from ._quant import quantize


class QuantizeAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scale: float
    zero_point: int = 0
    dtype: str = "uint8"
    memory_format: Optional[Literal["channels_last"]] = None


@register_op
class QuantizeOp(OpDef):
    name = "quantize"
    Attrs = QuantizeAttrs

    @classmethod
    def infer(cls, inputs, attrs):
        out = like(inputs[0], dtype=attrs.dtype)
        return [out.with_(memory_format=attrs.memory_format) if attrs.memory_format else out]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        multiplier = inputs[1] if len(inputs) > 1 else None
        q = quantize(inputs[0], attrs.scale, attrs.zero_point, attrs.dtype, multiplier)
        return q.contiguous(memory_format=torch.channels_last) if attrs.memory_format else q
