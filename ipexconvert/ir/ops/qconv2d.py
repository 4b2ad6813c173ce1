"""qconv2d: int8 2-D convolution; the conv counterpart of qlinear (see qlinear.py).

inputs: xq [N,C,H,W] uint8/int8, weight int8 [O,C/g,kh,kw] (per output channel),
weight_scale float32 [O], bias float32 [O] or None, then post-op operands.
With accum_scale set, the add post-ops' operands are uint8 (a residual kept in uint8, see
passes/int8_residual.py), dequantized with accum_scale / accum_zero_point before the add.
"""
from __future__ import annotations

from typing import Optional

import torch.nn.functional as F
from pydantic import Field

from ..opdef import Arity, OpDef, register_op
from ._common import NonNegative2, Positive2
from ._quant import Int8LayerAttrs, Scale, check_int8_operands, dequantize, finish, float_operands
from .conv2d import conv_output


class QConv2dAttrs(Int8LayerAttrs):
    stride: Positive2 = [1, 1]
    padding: NonNegative2 = [0, 0]
    dilation: Positive2 = [1, 1]
    groups: int = Field(default=1, ge=1)
    accum_scale: Optional[Scale] = Field(default=None, description="set: the add operand is uint8 with these params")
    accum_zero_point: int = Field(default=0, ge=0, le=255)  # a uint8 code


def dequantize_accum(inputs: list, attrs: QConv2dAttrs) -> list:
    """inputs with the add post-ops' uint8 operands dequantized (when accum_scale is set)."""
    if attrs.accum_scale is None:
        return list(inputs)
    adds = {p.operand for p in attrs.post_ops if p.kind == "add" and p.operand is not None}
    return [dequantize(t, attrs.accum_scale, attrs.accum_zero_point) if i in adds else t for i, t in enumerate(inputs)]


@register_op
class QConv2dOp(OpDef):
    name = "qconv2d"
    Attrs = QConv2dAttrs
    arity = Arity(4, 4, frozenset({3}), post_op_operands=True)

    @classmethod
    def infer(cls, inputs, attrs):
        x, w, scales, bias = inputs[:4]
        check_int8_operands(x, w, scales, bias, attrs)
        return [conv_output(x, w, bias, attrs, attrs.output_dtype)]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        x, w, bias = float_operands(inputs, attrs)
        y = F.conv2d(x, w, bias, attrs.stride, attrs.padding, attrs.dilation, attrs.groups)
        return finish(y, attrs.post_ops, dequantize_accum(inputs, attrs), attrs)
