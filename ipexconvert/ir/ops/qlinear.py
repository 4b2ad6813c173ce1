"""qlinear: int8 linear. y = (dequant(xq) @ dequant(W)^T + b), post-ops, then the output dtype.

inputs: xq [..., in] uint8/int8 (per-tensor x_scale, x_zero_point), weight int8 [out, in]
(symmetric, per output channel), weight_scale float32 [out], bias float32 [out] or None,
then post-op operands. The output is float32/bfloat16, or requantized uint8/int8 when the
next op quantizes it anyway (fold_requantize), so int8 chains stay int8.
"""
from __future__ import annotations

import torch.nn.functional as F

from ..opdef import Arity, OpDef, register_op
from ._quant import Int8LayerAttrs, check_int8_operands, finish, float_operands
from .linear import linear_output


class QLinearAttrs(Int8LayerAttrs):
    """x_scale, x_zero_point, post_ops and the output's dtype/scale/zero point (Int8LayerAttrs)."""


@register_op
class QLinearOp(OpDef):
    name = "qlinear"
    Attrs = QLinearAttrs
    arity = Arity(4, 4, frozenset({3}), post_op_operands=True)

    @classmethod
    def infer(cls, inputs, attrs):
        x, w, scales, bias = inputs[:4]
        check_int8_operands(x, w, scales, bias, attrs)
        return [linear_output(x, w, bias, attrs.output_dtype)]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        return finish(F.linear(*float_operands(inputs, attrs)), attrs.post_ops, inputs, attrs)
