"""quantize: float activation -> uint8/int8, per tensor (optionally with SmoothQuant channel factors).

inputs: x (float32/bfloat16), then optionally a constant float32 multiplier [C] over the
last axis: q = round(x * multiplier[c]) + zp. The multiplier is 1/(smooth[c] * scale):
SmoothQuant's x / smooth folded into the quantize step, so no extra op runs.
"""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ..opdef import OpDef, register_op
from ._common import like
from ._quant import quantize


class QuantizeAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scale: float
    zero_point: int = 0
    dtype: str = "uint8"


@register_op
class QuantizeOp(OpDef):
    name = "quantize"
    Attrs = QuantizeAttrs

    @classmethod
    def infer(cls, inputs, attrs):
        return [like(inputs[0], dtype=attrs.dtype)]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        multiplier = inputs[1] if len(inputs) > 1 else None
        return quantize(inputs[0], attrs.scale, attrs.zero_point, attrs.dtype, multiplier)
