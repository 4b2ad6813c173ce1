"""qlinear: int8 linear. y = (dequant(xq) @ dequant(W)^T + b), post-ops, then the output dtype.

inputs: xq [..., in] uint8/int8 (per-tensor x_scale, x_zero_point), weight int8 [out, in]
(symmetric, per output channel), weight_scale float32 [out], bias float32 [out] or None,
then post-op operands. The output is float32/bfloat16, or requantized uint8/int8 when the
next op quantizes it anyway (fold_requantize), so int8 chains stay int8.
"""
from __future__ import annotations

import torch.nn.functional as F

from ..opdef import OpDef, register_op
from ._common import like
from ._quant import Int8LayerAttrs, finish, float_operands


class QLinearAttrs(Int8LayerAttrs):
    """x_scale, x_zero_point, post_ops and the output's dtype/scale/zero point (Int8LayerAttrs)."""


@register_op
class QLinearOp(OpDef):
    name = "qlinear"
    Attrs = QLinearAttrs

    @classmethod
    def infer(cls, inputs, attrs):
        x, w = inputs[0], inputs[1]
        return [like(x, [*x.shape[:-1], w.shape[0]], dtype=attrs.output_dtype)]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        return finish(F.linear(*float_operands(inputs, attrs)), attrs.post_ops, inputs, attrs)
